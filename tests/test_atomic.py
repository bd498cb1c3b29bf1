"""Output files are written atomically, and get the mode a plain open() would give them."""

from __future__ import annotations

import os
import stat

import pytest

from rooflinecli.atomic import atomic_output, write_json_atomic, write_text_atomic


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_new_file_gets_umask_mode_not_mkstemps_0600(tmp_path):
    old = os.umask(0o022)
    try:
        p = write_text_atomic(tmp_path / "a.txt", "hello")
        with atomic_output(tmp_path / "b.bin") as tmp:
            tmp.write_bytes(b"x")
    finally:
        os.umask(old)
    assert p.read_text() == "hello"
    assert _mode(p) == 0o644 and _mode(tmp_path / "b.bin") == 0o644


def test_replacing_keeps_the_existing_mode(tmp_path):
    p = tmp_path / "r.json"
    p.write_text("{}")
    os.chmod(p, 0o640)
    write_json_atomic(p, {"a": 1})
    assert _mode(p) == 0o640 and '"a": 1' in p.read_text()


def test_failure_leaves_the_old_file_and_no_temporary(tmp_path):
    p = tmp_path / "keep.txt"
    p.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_output(p) as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk full")
    assert p.read_text() == "old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["keep.txt"]
