"""scripts/host_overhead.py: argument errors, the no-GPU exit, and its plumbing on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "host_overhead.py"


def _run(*args, env=None):
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=e, timeout=600)


def test_unknown_kernel_is_one_line_exit_2(tmp_path):
    r = _run(str(tmp_path / "o.json"), "--kernel", "copy,nope")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: --kernel: unknown kernel 'nope' (known: copy, rmsnorm, gemm, flash_attention, naive_attention, "
        "decode_attention, mla_decode, moe)"]
    assert not (tmp_path / "o.json").exists()


def test_without_gpu_one_line_exit_2(tmp_path):
    assert not torch.cuda.is_available()  # the no-GPU path; the GPU path runs in scripts/gpu_suite.sh
    r = _run(str(tmp_path / "o.json"), "--kernel", "copy")
    assert r.returncode == 2 and r.stderr.strip() == (
        "error: host_overhead.py needs a CUDA GPU (torch.cuda.is_available() is False)")


def test_cpu_dryrun_checks_and_times(tmp_path):
    out = tmp_path / "ho.json"
    r = _run(str(out), "--kernel", "copy,rmsnorm", "--cpu-dryrun", env={"TRITON_INTERPRET": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    from kernels.copy import OP as COPY
    from kernels.rmsnorm import OP as RMS

    assert [(x["kernel"], x["case"]) for x in doc["rows"]] == (
        [("copy", c.id) for c in COPY.cases["test"]] + [("rmsnorm", c.id) for c in RMS.cases["test"]])
    for row in doc["rows"]:
        assert row["check_ok"] and row["check_rel_error"] <= 8e-3
        for k in ("fast_eager_us", "normal_eager_us", "torch_eager_us", "fast_back_to_back_us"):
            assert row[k] > 0
    assert doc["launch_stats"] == {}  # the interpreter never takes the fast path
    assert not doc["skipped"] and not doc["errors"]


def test_tma_encode_timer_counts_and_restores():
    """The timer wraps whichever encoders the driver's utils has (Triton 3.6: fill_tma_descriptor;
    3.9: fill_tma_descriptor_tiled), counts and times their calls, passes results through, and
    puts the originals back."""
    import time

    mod = load_script("host_overhead")
    TmaEncodeTimer, _tma_encode_per_call = mod.TmaEncodeTimer, mod._tma_encode_per_call

    class Utils36:
        def fill_tma_descriptor(self, ptr, *rest):
            time.sleep(0.001)
            return ("map", ptr)

    class Utils39:
        def fill_tma_descriptor_tiled(self, ptr, *rest):
            return ("tiled", ptr)

    for utils, name in ((Utils36(), "fill_tma_descriptor"), (Utils39(), "fill_tma_descriptor_tiled")):
        original = getattr(utils, name)
        with TmaEncodeTimer(utils) as t:
            assert getattr(utils, name)(7, 128, 2) == (original(7, 128, 2)[0], 7)
            assert getattr(utils, name) is not original
        assert t.calls == 1 and getattr(utils, name) == original
        assert not hasattr(utils, "fill_tma_descriptor_im2col")
    u = Utils36()
    us, per = _tma_encode_per_call(lambda: (u.fill_tma_descriptor(1), u.fill_tma_descriptor(2)), lambda: None, 3, utils=u)
    assert per == 2.0 and 2 * 1000 <= us < 2 * 1000 * 20  # two 1 ms encodes per call
