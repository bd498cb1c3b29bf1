"""One call run in a forked child process while this one goes on: two big files read at once on
two cores (``regress`` reads a baseline and a candidate of up to 100,000 rows each).

``start(fn, *args)`` forks only where that is safe and pays: a POSIX ``fork`` on Linux, a process
with one thread (a fork copies only the calling thread: a lock another thread held stays held),
and at least two cores this process may use. Otherwise the call runs when its result is asked
for, so the two paths give the same answers and the same errors in the same order:

- the child's value comes back pickled through a pipe;
- a ``RooflineError`` in the child is raised here (its class and line kept);
- anything else (a bug, a value that cannot be pickled, the child killed) runs the call again
  here, so a failure shows its own traceback.

The child resets SIGINT and SIGTERM to their defaults (no handler of this process, such as the
temp-file cleanup, runs twice) and leaves with ``os._exit``: no atexit hooks, no second flush of
buffers it inherited.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from rooflinecli.errors import RooflineError

T = TypeVar("T")


def can_fork() -> bool:
    """Whether ``start`` forks here: Linux, one thread in this process, two or more usable cores."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        threads = len(os.listdir("/proc/self/task"))
        cores = len(os.sched_getaffinity(0))
    except OSError:
        return False
    return threads == 1 and cores >= 2


class Pending(Generic[T]):
    """A call started by ``start``: ``result()`` its value (or its error), ``cancel()`` stops it."""

    def __init__(self, fn: Callable[..., T], args: tuple, pid: int | None = None, fd: int | None = None):
        self._fn, self._args, self._pid, self._fd = fn, args, pid, fd

    @property
    def forked(self) -> bool:
        return self._pid is not None

    def result(self) -> T:
        if self._pid is None:
            return self._fn(*self._args)
        with os.fdopen(self._fd, "rb") as f:
            data = f.read()
        self._fd = None
        self._reap()
        try:
            status, value = pickle.loads(data)
        except Exception:  # the child died or wrote nothing whole: run the call here
            status, value = "crash", None
        if status == "ok":
            return value
        if status == "error":
            raise value if isinstance(value, RooflineError) else RooflineError(str(value))
        return self._fn(*self._args)

    def cancel(self) -> None:
        """Stop the child (if it still runs) and reap it; nothing when already done or inline."""
        if self._pid is None:
            return
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            os.kill(self._pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._reap()

    def _reap(self) -> None:
        if self._pid is not None:
            try:
                os.waitpid(self._pid, 0)
            except ChildProcessError:
                pass
            self._pid = None


def start(fn: Callable[..., T], *args: Any, worth_it: bool = True) -> Pending[T]:
    """``fn(*args)`` in a forked child (see the module), or deferred to ``result()`` when forking
    is not safe here or ``worth_it`` is False (small inputs: the pickling would cost more than
    the overlap saves)."""
    if not worth_it or not can_fork():
        return Pending(fn, args)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, leave
        try:
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            try:
                payload = pickle.dumps(("ok", fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
            except RooflineError as e:
                try:  # the error itself (its class kept), else its line
                    payload = pickle.dumps(("error", e))
                    pickle.loads(payload)
                except Exception:
                    payload = pickle.dumps(("error", str(e)))
            except BaseException:
                payload = pickle.dumps(("crash", None))
            with os.fdopen(w, "wb") as f:
                f.write(payload)
        finally:
            os._exit(0)
    os.close(w)
    return Pending(fn, args, pid, r)
