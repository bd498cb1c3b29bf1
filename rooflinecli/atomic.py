"""Atomic file output: write to a temporary file beside the target, then rename over it."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


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


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        _publish_mode(tmp, path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> Path:
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


class atomic_output:
    """Context manager for writers that need a file path (pyarrow, pandas): yields a temporary path
    beside ``path``; on a clean exit the file is fsynced and renamed over ``path``, on an error it
    is removed and ``path`` is left untouched::

        with atomic_output("sweep.parquet") as tmp:
            pyarrow.parquet.write_table(table, tmp)
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        os.close(fd)
        self.tmp = Path(tmp)
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> bool:
        assert self.tmp is not None
        if exc_type is None:
            with open(self.tmp, "rb") as f:
                os.fsync(f.fileno())
            _publish_mode(self.tmp, self.path)
            os.replace(self.tmp, self.path)
        else:
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass
        return False
