"""The one writer for every output: files a user names (``--out``, ``--json``, ``--markdown``, ...),
files the tool keeps (baselines, measured spec and calibration files), ``$GITHUB_STEP_SUMMARY`` and
standard output.

- A file is replaced atomically: written to a temporary file beside it, fsynced, renamed over it,
  so readers see the old file or the whole new one. A temporary file is removed on an error, on
  Ctrl-C and on SIGTERM / SIGHUP (``_TEMPS``).
- A symlink is written through: its target is replaced and the link kept.
- Only regular files are written: a device (``/dev/zero``, ``/dev/full``), FIFO, socket or folder
  is refused (``-`` means stdout to the callers that accept it). A missing parent folder is an
  error unless the caller asks for it (``make_parents=True``: the tool's own folders such as
  ``reports/``).
- A command never overwrites its own inputs (``refuse_overwriting_inputs``), never writes inside
  the installed package unless the user named that path (``default=True`` marks a path the tool
  chose), and a writer of a known kind never replaces a file of another kind (``kind=``: an
  existing results file may be replaced by a results writer; a config, a spec or a log may not).
- ``$GITHUB_STEP_SUMMARY`` is appended to (``append_step_summary``) under the same rules, and
  never when it names one of the command's inputs.
- Standard output (``guard_stdout``): a closed pipe (``roofline analyze | head -1``) ends quietly
  with exit 0; a full disk is one line and exit 2; an encoding that cannot show a character (say
  ``PYTHONIOENCODING=ascii``) shows it as an escape instead of failing.
- Every OS error (ENOTDIR, EROFS, EACCES, ENOSPC as on ``/dev/full``, ...) is one
  ``RooflineError`` line naming the path, and the old file is left as it was.
- ``locked(folder)`` serializes writers of one folder (an ``fcntl`` lock): concurrent
  ``baseline update`` runs each add their run.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rooflinecli.bulk import bulk
from rooflinecli.errors import RooflineError

#: the output path that means "standard output" to commands that accept it
STDOUT = "-"


def _publish_mode(tmp: str | os.PathLike[str], target: Path) -> None:
    """Give the temporary file the mode a plain ``open(path, "w")`` would: the existing file's
    mode when replacing one, else 0666 less the umask (mkstemp creates files 0600)."""
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)


def _reason(e: OSError) -> str:
    if e.errno == errno.ENOSPC:
        return "no space left on the device"
    if e.errno == errno.EROFS:
        return "read-only file system"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno == errno.ENOTDIR:
        return "a parent is not a folder"
    return e.strerror or type(e).__name__


class OutputError(RooflineError, OSError):
    """A refused or failed write: one line ``<path>: cannot write: <reason>``. Also an ``OSError``
    (``strerror`` = the reason), so a caller that names its option on OSError keeps doing so."""

    def __init__(self, path: str | os.PathLike[str], reason: str, err: int = 0):
        OSError.__init__(self, err, reason)
        name = str(path)
        name = name if len(name) <= 255 else name[:60] + f"... ({len(name):,} characters)"  # a name too long for the OS
        self.message = f"{name}: cannot write: {reason}"

    def __str__(self) -> str:
        return self.message


def output_error(path: str | os.PathLike[str], e: OSError) -> OutputError:
    """One line for an OS error while writing ``path``."""
    return OutputError(path, _reason(e), e.errno or 0)


def refuse_overwriting_inputs(inputs: dict[str, str | os.PathLike[str] | None], outputs: dict[str, str | os.PathLike[str] | None]) -> None:
    """One-line RooflineError when an output option names the same file as an input (or as another
    output): ``validate in.json --out in.json`` would replace the results with the validation.
    Paths are compared resolved (symlinks followed); missing outputs never collide with inputs."""
    from rooflinecli.errors import RooflineError

    def key(p) -> str | None:
        if p is None or str(p) == STDOUT:
            return None
        try:
            return os.path.realpath(p)
        except (OSError, ValueError):
            return None

    seen = {key(p): what for what, p in inputs.items() if key(p) is not None}
    for what, p in outputs.items():
        k = key(p)
        if k is None:
            continue
        if k in seen:
            raise RooflineError(f"{what} {p}: is also {seen[k]}; refusing to overwrite it (name another file)")
        seen[k] = what


def packaged_dirs() -> tuple[Path, ...]:
    """The folders the tool is installed from: the package itself and the data folders that ship
    beside it (built-in spec files, kernels and their tuned configs). Paths the tool chooses on
    its own (a default output) are never inside them."""
    here = Path(__file__).resolve().parent
    dirs = [here] + [d for d in (here / "hardware_specs", here.parent / "hardware_specs", here.parent / "kernels") if d.is_dir()]
    return tuple(dict.fromkeys(dirs))


def inside_package(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (resolved, symlinks followed) lies inside one of ``packaged_dirs``."""
    try:
        real = Path(os.path.realpath(path))
    except (OSError, ValueError):
        return False
    return any(real == d or d in real.parents for d in packaged_dirs())


#: how much of an existing file ``kind`` checks read to recognise it (a schema key comes first)
_KIND_PROBE_BYTES = 1 << 20


def _file_kind_ok(target: Path, kind: str) -> bool:
    """Whether the existing file ``target`` may be replaced by a writer of ``kind``: an empty file,
    or for a JSON schema prefix such as ``rooflinecli.results/`` a JSON object whose ``schema``
    starts with it (read in full only when the schema is not among the first bytes), for a kind
    that starts with ``<`` (``<?xml``, ``<!-- rooflinecli-regress -->``) a text that starts so."""
    import json
    import re

    try:
        with open(target, "rb") as f:
            head = f.read(_KIND_PROBE_BYTES)
            if not head.strip():
                return True
            if kind.startswith("<"):
                return head.lstrip().startswith(kind.encode("utf-8"))
            m = re.search(rb'"schema"\s*:\s*"([^"]{0,200})"', head)
            if m is not None and head.lstrip()[:1] == b"{":
                return m.group(1).decode("utf-8", "replace").startswith(kind)
            if len(head) < _KIND_PROBE_BYTES:
                return False
            raw = json.loads(head + f.read())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(raw, dict) and isinstance(raw.get("schema"), str) and raw["schema"].startswith(kind)


def resolve_output(path: str | os.PathLike[str], *, make_parents: bool = False, default: bool = False, kind: str | None = None) -> Path:
    """The regular file to replace for an output path: symlinks followed (the link is kept, its
    target replaced), devices / FIFOs / sockets / folders refused, the parent folder required to
    exist unless ``make_parents``. ``default``: the tool chose the path (the user did not name it),
    so it may not lie inside the installed package. ``kind``: the JSON schema prefix of what is
    written; an existing file of another kind is refused. Raises a one-line RooflineError."""
    given = Path(path)
    if str(path) == STDOUT:
        raise OutputError(path, "'-' (stdout) is not accepted for this output; name a file")
    try:
        target = Path(os.path.realpath(given)) if given.is_symlink() else given
        st = os.stat(target) if target.exists() else None
    except (OSError, ValueError) as e:
        if isinstance(e, OSError):
            raise output_error(given, e) from None
        raise OutputError(given, str(e)) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(given, "is a folder; name a file for the output", errno.EISDIR)
        if not stat.S_ISREG(st.st_mode):
            kind_of = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
            raise OutputError(given, f"is {kind_of}; outputs are written only to regular files (or '-' for stdout where accepted)")
        if kind is not None and not _file_kind_ok(target, kind):
            what = kind.rstrip("/") if not kind.startswith("<") else f"file starting {kind}"
            raise OutputError(given, f"exists and is not a {what} file; refusing to replace it (name a new file or remove it)", errno.EEXIST)
    if default and inside_package(target if st is not None else target.parent):
        raise OutputError(given, "is inside the installed package; name the output file explicitly to write there", errno.EPERM)
    parent = target.parent
    if not parent.is_dir():
        if parent.exists() or any(p.exists() and not p.is_dir() for p in parent.parents):
            raise OutputError(given, "a parent is not a folder", errno.ENOTDIR)
        if not make_parents:
            raise OutputError(given, f"folder {parent} does not exist (create it first)", errno.ENOENT)
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise output_error(given, e) from None
    return target


# -- temporary files: removed on SIGTERM / SIGHUP ----------------------------------------------

#: temporary files being written (absolute paths); a termination signal removes them
_TEMPS: set[str] = set()
_HANDLED: dict[int, Any] = {}


def _on_signal(signum, frame) -> None:  # pragma: no cover - exercised through a subprocess
    for tmp in list(_TEMPS):
        discard_temp(tmp)
    _TEMPS.clear()
    previous = _HANDLED.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _track(tmp: str | os.PathLike[str]) -> None:
    """Remember a temporary file, and once per process (main thread only) route SIGTERM and SIGHUP
    through ``_on_signal`` so that the file does not outlive a killed command."""
    _TEMPS.add(os.path.abspath(tmp))
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None or sig in _HANDLED:
            continue
        previous = signal.getsignal(sig)
        if previous is signal.SIG_IGN:
            continue
        _HANDLED[sig] = previous
        signal.signal(sig, _on_signal)


def _untrack(tmp: str | os.PathLike[str] | None) -> None:
    if tmp is not None:
        _TEMPS.discard(os.path.abspath(tmp))


def temp_beside(target: Path, suffix: str = ".tmp") -> str:
    """A new hidden temporary file beside ``target`` (its path), tracked for removal on SIGTERM."""
    import tempfile  # here, not at the top: it imports random and hashlib, start-up time the commands that write nothing need not pay

    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    os.close(fd)
    _track(tmp)
    return tmp


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes | _Encoded, *, make_parents: bool = False, default: bool = False,
                       kind: str | None = None) -> Path:
    """Write ``data`` (bytes, or ``write_chunks_atomic``'s pieces) to ``path`` so that readers see
    either the old file or the whole new one.
    Returns the path given (a symlink stays a symlink). ``default`` and ``kind``: see ``resolve_output``."""
    target = resolve_output(path, make_parents=make_parents, default=default, kind=kind)
    tmp = None
    try:
        tmp = temp_beside(target)
        with open(tmp, "wb") as f:
            if isinstance(data, _Encoded):
                for chunk in data.chunks:
                    f.write(chunk.encode("utf-8"))
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        _publish_mode(tmp, target)
        os.replace(tmp, target)
        _untrack(tmp)
    except OSError as e:
        discard_temp(tmp)
        raise output_error(path, e) from None
    except BaseException:
        discard_temp(tmp)
        raise
    return Path(path)


def discard_temp(tmp: str | os.PathLike[str] | None) -> None:
    """Remove a temporary file made by ``temp_beside`` (quietly when it is gone) and stop tracking it."""
    if tmp is None:
        return
    _untrack(tmp)
    try:
        os.unlink(tmp)
    except OSError:
        pass


def write_text_atomic(path: str | os.PathLike[str], text: str, *, make_parents: bool = False, default: bool = False, kind: str | None = None) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"), make_parents=make_parents, default=default, kind=kind)


def write_chunks_atomic(path: str | os.PathLike[str], chunks: list[str], *, make_parents: bool = False, default: bool = False,
                        kind: str | None = None) -> Path:
    """``write_text_atomic`` of ``"".join(chunks)``, each piece encoded and written in turn."""
    return write_bytes_atomic(path, _Encoded(chunks), make_parents=make_parents, default=default, kind=kind)


class _Encoded:
    """Text pieces that ``write_bytes_atomic`` writes one after another, UTF-8 encoded."""

    def __init__(self, chunks: list[str]):
        self.chunks = chunks


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, make_parents: bool = False, default: bool = False, kind: str | None = None) -> Path:
    """``obj`` as indented JSON; NaN and infinities are written as null (``fmt.json_dumps``)."""
    from rooflinecli.fmt import json_dumps

    return write_text_atomic(path, json_dumps(obj) + "\n", make_parents=make_parents, default=default, kind=kind)


class RawJSON:
    """A value given as its JSON text, written as it is by ``json_text(..., raw=True)`` where it
    is a value of a row (an object in a list of objects): text copied from a file this tool
    parsed (a run's samples, ``results.load_results_keeping_sample_text``), not encoded again."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def json_text(obj: Any, level: int = 0, raw: bool = False) -> str:
    """``json_chunks`` joined: ``obj`` as JSON text."""
    return "".join(json_chunks(obj, level, raw))


@bulk
def json_chunks(obj: Any, level: int = 0, raw: bool = False) -> list[str]:
    """``obj`` as JSON for big data files (results, baselines, reports of 100,000 rows): objects
    indented, each object of a list of objects on one line (the C encoder writes it; the indenting
    encoder is pure Python and ten times slower). Strict: NaN and infinities are written as null.
    ``raw``: a row's ``RawJSON`` values are written as their text, the rest of the row encoded
    around them (the same text the C encoder writes for the values they stand for); such rows
    stay on one line. The text comes in pieces (a row each, when ``raw``) whose join is the
    text: a writer writes them one after another (``write_chunks_atomic``) rather than copying
    a file of hundreds of MB into one string."""
    import json
    import secrets

    from rooflinecli.fmt import json_default, json_safe

    held: list[str] = []  # the text of the RawJSON values of the row being encoded, in order
    marker = "\x00raw-" + secrets.token_hex(16) if raw else ""  # a nonce: no text holds it
    marker_json = json.dumps(marker)

    def raw_default(x: Any) -> Any:
        if type(x) is RawJSON:
            held.append(x.text)
            return marker
        return json_default(x)

    encode = json.JSONEncoder(allow_nan=False, default=raw_default if raw else json_default, separators=(", ", ": ")).encode

    def compact(x: Any) -> str:
        try:  # the C encoder alone; only a value holding NaN or an infinity takes the slow walk
            return encode(x)
        except ValueError:
            if raw:
                held.clear()  # the failed try's markers: the walk's encoding makes them again
            return encode(json_safe(x))

    def rows(x: Any) -> bool:
        return isinstance(x, (list, tuple)) and bool(x) and all(isinstance(v, dict) for v in x)

    def nested(x: Any) -> bool:  # an object that holds a list of objects somewhere below
        for v in x.values():
            if isinstance(v, dict):
                if nested(v):
                    return True
            elif isinstance(v, (list, tuple)) and v and isinstance(v[0], dict) and rows(v):
                return True
        return False

    def row(v: Any, lvl: int) -> str:
        if raw:  # RawJSON values were encoded as the marker, in order: put their text in its place
            t = compact(v)
            if not held:
                return t
            pieces = t.split(marker_json)
            out = [pieces[0]]
            for text, piece in zip(held, pieces[1:]):
                out.append(text)
                out.append(piece)
            held.clear()
            return "".join(out)
        # a row holding a list of objects is indented: its compact text shows "[{" (the C encoder
        # writes no space there), so the walk runs only for the rows that may hold one
        t = compact(v)
        return enc(v, lvl) if "[{" in t and nested(v) else t

    def enc(x: Any, lvl: int) -> str:
        out: list[str] = []
        emit(x, lvl, out)
        return "".join(out)

    def emit(x: Any, lvl: int, out: list[str]) -> None:
        pad, inner = "  " * lvl, "  " * (lvl + 1)
        if isinstance(x, dict) and x and (lvl < 2 or nested(x)):
            sep = "{\n"
            for k, v in x.items():
                out.append(f"{sep}{inner}{json.dumps(str(k))}: ")
                emit(v, lvl + 1, out)
                sep = ",\n"
            out.append(f"\n{pad}}}")
        elif rows(x):
            if raw:  # copied samples leave little to encode: a child would cost more than it saves
                sep = "[\n"
                for v in x:
                    out.append(f"{sep}{inner}{row(v, lvl + 1)}")
                    sep = ",\n"
            else:
                out.append("[\n" + _halves(lambda part: ",\n".join(f"{inner}{row(v, lvl + 1)}" for v in part), x))
            out.append(f"\n{pad}]")
        else:
            out.append(compact(x))

    out: list[str] = []
    emit(obj, level, out)
    return out


#: a list of at least this many objects is encoded in two halves at once, the second in a forked
#: child (``rooflinecli.forked``: only where forking is safe; else here, one after the other)
PARALLEL_ROWS = 20_000


def _halves(encode, rows) -> str:
    """``encode(rows)`` of a list of objects as ``encode(first half) + ",\n" + encode(second
    half)``, the second half encoded in a forked child when the list is long."""
    if len(rows) < PARALLEL_ROWS:
        return encode(rows)
    from rooflinecli import forked

    half = len(rows) // 2
    later = forked.start(encode, rows[half:])
    try:
        first = encode(rows[:half])
        return first + ",\n" + later.result()
    finally:
        later.cancel()


def write_output(path: str | os.PathLike[str], text: str, *, make_parents: bool = False) -> Path | None:
    """``text`` to ``path``, or to stdout when ``path`` is ``-``."""
    if str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    return write_text_atomic(path, text, make_parents=make_parents)


class atomic_output:
    """Context manager for writers that need a file path (pyarrow, pandas): yields a temporary path
    beside ``path``; on a clean exit the file is fsynced and renamed over ``path``, on an error it
    is removed and ``path`` is left untouched::

        with atomic_output("sweep.parquet") as tmp:
            pyarrow.parquet.write_table(table, tmp)
    """

    def __init__(self, path: str | os.PathLike[str], *, make_parents: bool = False, default: bool = False, kind: str | None = None):
        self.path = Path(path)
        self.make_parents = make_parents
        self.default = default
        self.kind = kind
        self.target: Path | None = None
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        self.target = resolve_output(self.path, make_parents=self.make_parents, default=self.default, kind=self.kind)
        try:
            self.tmp = Path(temp_beside(self.target))
        except OSError as e:
            raise output_error(self.path, e) from None
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> bool:
        assert self.tmp is not None and self.target is not None
        if exc_type is None:
            try:
                with open(self.tmp, "rb") as f:
                    os.fsync(f.fileno())
                _publish_mode(self.tmp, self.target)
                os.replace(self.tmp, self.target)
                _untrack(self.tmp)
            except OSError as e:
                discard_temp(self.tmp)
                raise output_error(self.path, e) from None
        else:
            discard_temp(self.tmp)
            if isinstance(exc, OSError) and not isinstance(exc, OutputError):
                raise output_error(self.path, exc) from None
        return False


# -- $GITHUB_STEP_SUMMARY ---------------------------------------------------------------------------

#: the variable GitHub Actions names its job-summary file in
STEP_SUMMARY_VAR = "GITHUB_STEP_SUMMARY"
#: the largest job summary appended to (GitHub's own limit is 1 MiB per step)
MAX_STEP_SUMMARY_BYTES = 64 << 20


def append_step_summary(text: str, inputs: dict[str, str | os.PathLike[str] | None] | None = None) -> Path | None:
    """Append ``text`` to the file ``$GITHUB_STEP_SUMMARY`` names (None when it is unset or empty).
    Refused in one line naming the variable: a device, FIFO, socket or folder (a FIFO would block,
    ``/dev/zero`` would never end), one of the command's ``inputs``, a file inside the installed
    package, a file already over ``MAX_STEP_SUMMARY_BYTES``; a missing parent folder or an OS error
    (a full disk) likewise."""
    name = os.environ.get(STEP_SUMMARY_VAR)
    if not name:
        return None
    where = f"${STEP_SUMMARY_VAR} {name}"

    def refuse(reason: str, err: int = 0) -> OutputError:
        e = OutputError(name, reason, err)
        e.message = f"{where}: cannot write: {reason}"
        return e

    try:
        target = Path(os.path.realpath(name))
        st = os.stat(target) if target.exists() else None
    except (OSError, ValueError) as e:
        raise refuse(_reason(e) if isinstance(e, OSError) else str(e)) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise refuse("is a folder", errno.EISDIR)
        if not stat.S_ISREG(st.st_mode):
            raise refuse(f"is {'a FIFO' if stat.S_ISFIFO(st.st_mode) else 'a socket' if stat.S_ISSOCK(st.st_mode) else 'a device'}; the job summary must be a regular file")
        if st.st_size > MAX_STEP_SUMMARY_BYTES:
            raise refuse(f"already {st.st_size:,} bytes (limit {MAX_STEP_SUMMARY_BYTES:,})", errno.EFBIG)
        for what, p in (inputs or {}).items():
            if p is None or str(p) == STDOUT:
                continue
            try:
                same = os.path.samefile(p, target)
            except (OSError, ValueError):
                same = False
            if same:
                raise refuse(f"is also {what}; refusing to append the summary to it")
    elif not target.parent.is_dir():
        raise refuse(f"folder {target.parent} does not exist", errno.ENOENT)
    if inside_package(target if st is not None else target.parent):
        raise refuse("is inside the installed package", errno.EPERM)
    data = text.encode("utf-8")
    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOCTTY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a FIFO or device after the check
                raise refuse("is not a regular file")
            if os.fstat(fd).st_size and not _ends_with_newline(fd):
                data = b"\n" + data
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)
    except OutputError:
        raise
    except OSError as e:
        raise refuse(_reason(e), e.errno or 0) from None
    return Path(name)


def _ends_with_newline(fd: int) -> bool:
    try:
        return os.pread(fd, 1, os.fstat(fd).st_size - 1) == b"\n"
    except OSError:
        return True


# -- standard output ---------------------------------------------------------------------------------

#: errno values of a write to stdout that no retry fixes: the disk or quota is full, the device fails
_STDOUT_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so that the interpreter's last flush of stdout cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _stdout_failure(e: BaseException) -> int | None:
    """The exit code for an error of writing stdout (0: the reader went away), or None when ``e``
    is something else."""
    if isinstance(e, BrokenPipeError) or (isinstance(e, OSError) and e.errno == errno.EPIPE):
        _silence_stdout()
        return 0
    if isinstance(e, OSError) and e.errno in _STDOUT_FULL and getattr(e, "filename", None) is None:
        _silence_stdout()
        try:
            sys.stderr.write(f"error: standard output: cannot write: {_reason(e)}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        return 2
    return None


def tolerant_streams() -> None:
    """stdout and stderr show a character their encoding lacks as an escape (``\\u00e9``) instead
    of raising: ``PYTHONIOENCODING=ascii`` with a non-ASCII model name still prints."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream.errors == "strict":
                stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):
            pass


def _fd_identity(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _devnull_identity() -> tuple[int, int] | None:
    try:
        st = os.stat(os.devnull)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


#: the exit code a command keeps when its reader goes away (``exit_on_closed_pipe``); 0 otherwise
_CLOSED_PIPE_CODE = [0]


def exit_on_closed_pipe(code: int) -> None:
    """A command whose exit code is its answer (``regress``: 1 = regression) keeps ``code`` when
    stdout is closed under it (``roofline regress ... | head -1``), instead of the quiet 0."""
    _CLOSED_PIPE_CODE[0] = code


def guard_stdout(main) -> None:
    """Run a command-line ``main``: a closed stdout pipe ends with exit 0 (or the code a command
    set with ``exit_on_closed_pipe``) and no message; a full
    disk (``> /dev/full``) is ``error: standard output: cannot write: no space left on the device``
    and exit 2, whether it shows mid-command or at the final flush."""
    tolerant_streams()
    before = _fd_identity(1)
    code: Any = 0
    try:
        main()
    except SystemExit as e:
        code = e.code
        # Click (a PacifyFlushWrapper) and Rich (stdout moved onto /dev/null) answer a closed pipe
        # with exit 1, which a CI step reads as a regression
        if type(sys.stdout).__name__ == "PacifyFlushWrapper" or (before != _fd_identity(1) and _fd_identity(1) == _devnull_identity()):
            _silence_stdout()
            sys.exit(_CLOSED_PIPE_CODE[0])
    except OSError as e:
        failed = _stdout_failure(e)
        if failed is None:
            raise
        sys.exit(_CLOSED_PIPE_CODE[0] if failed == 0 else failed)
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as e:
        failed = _stdout_failure(e) if isinstance(e, OSError) else None
        if failed is not None:
            sys.exit(failed if code in (0, None) or failed == 2 else code)
    sys.exit(code)


# -- serializing writers ---------------------------------------------------------------------------


@contextmanager
def locked(folder: str | os.PathLike[str]):
    """Hold an exclusive ``fcntl`` lock on ``folder`` (which must exist) for the block: writers
    that read, change and rewrite a file in it (``baseline update``) run one at a time, each seeing
    the previous one's file. Blocks until the lock is free."""
    import fcntl

    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise output_error(folder, e) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
