"""Output files are written atomically, and get the mode a plain open() would give them."""

from __future__ import annotations

import os
import stat

import pytest

from rooflinecli.output import atomic_output, write_json_atomic, write_text_atomic


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


# ---- hostile output paths ------------------------------------------------------------------------

from rooflinecli.output import write_bytes_atomic, write_output  # noqa: E402
from rooflinecli.errors import RooflineError  # noqa: E402


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_text_atomic(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new"


def test_a_fifo_and_a_device_are_refused_and_left_alone(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(RooflineError, match="is a FIFO"):
        write_text_atomic(fifo, "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(RooflineError, match="is a device"):
        write_text_atomic("/dev/null", "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    link = tmp_path / "to-null"
    link.symlink_to("/dev/null")
    with pytest.raises(RooflineError, match="is a device"):
        write_text_atomic(link, "x")


def test_no_stray_folders_unless_asked(tmp_path):
    with pytest.raises(RooflineError, match="does not exist"):
        write_text_atomic(tmp_path / "a" / "b" / "out.txt", "x")
    assert not (tmp_path / "a").exists()
    write_text_atomic(tmp_path / "a" / "b" / "out.txt", "x", make_parents=True)
    assert (tmp_path / "a" / "b" / "out.txt").read_text() == "x"


def test_os_errors_are_one_line_and_leave_nothing(tmp_path):
    f = tmp_path / "file"
    f.write_text("keep")
    with pytest.raises(RooflineError, match="a parent is not a folder"):
        write_text_atomic(f / "out.txt", "x")
    with pytest.raises(RooflineError, match="a parent is not a folder"):
        write_text_atomic(f / "sub" / "out.txt", "x", make_parents=True)
    with pytest.raises(RooflineError, match="is a folder"):
        write_text_atomic(tmp_path, "x")
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):  # root ignores the mode bits: nothing to check then
            return
        with pytest.raises(RooflineError, match="permission denied"):
            write_text_atomic(ro / "out.txt", "x")
        with pytest.raises(RooflineError, match="permission denied"):
            with atomic_output(ro / "out.bin") as tmp:
                tmp.write_bytes(b"x")
    finally:
        os.chmod(ro, 0o700)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["file", "ro"]


def test_a_full_device_is_one_line(monkeypatch, tmp_path):
    """ENOSPC (as /dev/full gives) during the write: one line, no temporary file left."""
    import errno

    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(RooflineError, match="no space left"):
        write_bytes_atomic(tmp_path / "big.bin", b"x" * 10)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert list(tmp_path.iterdir()) == []


def test_stdout_dash(capsys, tmp_path):
    assert write_output("-", "to stdout\n") is None
    assert capsys.readouterr().out == "to stdout\n"
    with pytest.raises(RooflineError, match="stdout"):
        write_text_atomic("-", "x")


def test_json_output_never_holds_nan(tmp_path):
    p = write_json_atomic(tmp_path / "n.json", {"a": float("nan"), "b": [float("inf"), 1.5], "c": (float("-inf"),)})
    import json

    assert json.loads(p.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON")) == {"a": None, "b": [None, 1.5], "c": [None]}
