"""Atomic file output: write to a temporary file beside the target, then rename over it.

The one writer for every path a user names as an output (``--out``, ``--json-out``, ...):

- a symlink is written through: its target is replaced and the link kept;
- a device file, FIFO or socket is refused (``-`` means stdout to the callers that accept it);
- a missing parent folder is an error unless the caller asks for it (``make_parents=True``: the
  default output folders such as ``reports/``);
- every OS error (ENOTDIR, EROFS, EACCES, ENOSPC as on ``/dev/full``, ...) is one
  ``RooflineError`` line naming the path, and the old file is left as it was.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

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
        self.message = f"{path}: cannot write: {reason}"

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


def model_and_spec_files(cfgs, specs) -> dict[str, str]:
    """The files a run reads to build its models and GPUs, for ``refuse_overwriting_inputs``: each
    config.json given by path, each spec file (built-in ones too) and each calibration file a
    measured spec names. ``report --model cfg.json --out cfg.json`` replaced the config."""
    from rooflinecli.achievable import calibration_path

    files: dict[str, str] = {}
    for cfg in cfgs:
        if cfg.source and not cfg.source.startswith("preset:"):
            files[f"--model's config file ({cfg.name})"] = cfg.source
    for spec in specs:
        if spec is None:
            continue
        if spec.path:
            files[f"--hw's spec file ({spec.id})"] = str(spec.path)
        cal = calibration_path(spec)
        if cal is not None:
            files[f"{spec.id}'s calibration file"] = str(cal)
    return files


def resolve_output(path: str | os.PathLike[str], *, make_parents: bool = False) -> Path:
    """The regular file to replace for an output path: symlinks followed (the link is kept, its
    target replaced), devices / FIFOs / sockets / folders refused, the parent folder required to
    exist unless ``make_parents``. Raises a one-line RooflineError."""
    given = Path(path)
    if str(path) == STDOUT:
        raise OutputError(path, "'-' (stdout) is not accepted for this output; name a file")
    try:
        target = Path(os.path.realpath(given)) if given.is_symlink() else given
        st = os.stat(target) if target.exists() else None
    except OSError as e:
        raise output_error(given, e) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(given, "is a folder; name a file for the output", errno.EISDIR)
        if not stat.S_ISREG(st.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
            raise OutputError(given, f"is {kind}; outputs are written only to regular files (or '-' for stdout where accepted)")
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


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, *, make_parents: bool = False) -> Path:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one.
    Returns the path given (a symlink stays a symlink)."""
    target = resolve_output(path, make_parents=make_parents)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        _publish_mode(tmp, target)
        os.replace(tmp, target)
    except OSError as e:
        _discard(tmp)
        raise output_error(path, e) from None
    except BaseException:
        _discard(tmp)
        raise
    return Path(path)


def _discard(tmp: str | os.PathLike[str] | None) -> None:
    if tmp is None:
        return
    try:
        os.unlink(tmp)
    except OSError:
        pass


def write_text_atomic(path: str | os.PathLike[str], text: str, *, make_parents: bool = False) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"), make_parents=make_parents)


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, make_parents: bool = False) -> Path:
    """``obj`` as indented JSON; NaN and infinities are written as null (``fmt.json_dumps``)."""
    from rooflinecli.fmt import json_dumps

    return write_text_atomic(path, json_dumps(obj) + "\n", make_parents=make_parents)


def write_output(path: str | os.PathLike[str], text: str, *, make_parents: bool = False) -> Path | None:
    """``text`` to ``path``, or to stdout when ``path`` is ``-``."""
    if str(path) == STDOUT:
        import sys

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

    def __init__(self, path: str | os.PathLike[str], *, make_parents: bool = False):
        self.path = Path(path)
        self.make_parents = make_parents
        self.target: Path | None = None
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        self.target = resolve_output(self.path, make_parents=self.make_parents)
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{self.target.name}.", suffix=".tmp", dir=self.target.parent)
        except OSError as e:
            raise output_error(self.path, e) from None
        os.close(fd)
        self.tmp = Path(tmp)
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> bool:
        assert self.tmp is not None and self.target is not None
        if exc_type is None:
            try:
                with open(self.tmp, "rb") as f:
                    os.fsync(f.fileno())
                _publish_mode(self.tmp, self.target)
                os.replace(self.tmp, self.target)
            except OSError as e:
                _discard(self.tmp)
                raise output_error(self.path, e) from None
        else:
            _discard(self.tmp)
            if isinstance(exc, OSError) and not isinstance(exc, OutputError):
                raise output_error(self.path, exc) from None
        return False
