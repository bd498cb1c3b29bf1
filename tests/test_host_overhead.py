"""scripts/host_overhead.py: argument errors, the no-GPU exit, and its plumbing on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
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
    assert not torch.cuda.is_available()  # this machine; the GPU path runs in scripts/gpu_suite.sh
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
