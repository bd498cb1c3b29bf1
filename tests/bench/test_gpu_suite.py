"""scripts/gpu_suite.sh: without a GPU, one line and exit 2; its CPU dry run goes through every
stage (calibrate, bench, fit, e2e, validate) and writes every output, so the real GPU run's plumbing
is checked here first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rooflinecli.hardware import load_spec_file
from rooflinecli.results import load_results

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_suite.sh"


def _run(tmp_path, extra_env=None, timeout=240):
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "GPU_SUITE_CPU_DRYRUN")}
    env["PYTHON"] = sys.executable
    env.update(extra_env or {})
    # a relative OUT_DIR is taken from the caller's directory (the script itself cd-s to the repo)
    return subprocess.run(["bash", str(SCRIPT), "out"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=timeout)


def test_without_gpu_one_line_and_exit_2(tmp_path):
    assert not torch.cuda.is_available()
    p = _run(tmp_path, timeout=60)
    assert p.returncode == 2
    lines = (p.stdout + p.stderr).strip().splitlines()
    assert len(lines) == 1, p.stdout + p.stderr
    assert lines[0].startswith("gpu_suite: no CUDA GPU found")
    assert not (tmp_path / "out").exists()


def test_without_torch_one_line_and_exit_2(tmp_path):
    fake = tmp_path / "python-without-torch"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")  # -S: no site-packages, so no torch
    fake.chmod(0o755)
    p = _run(tmp_path, {"PYTHON": str(fake)}, timeout=60)
    assert p.returncode == 2
    lines = (p.stdout + p.stderr).strip().splitlines()
    assert len(lines) == 1 and "torch does not import" in lines[0]


@pytest.mark.slow
def test_cpu_dry_run_runs_every_stage_and_writes_every_output(tmp_path):
    # the GPU image has no plotly: make it unimportable here too
    blocker = tmp_path / "no_plotly" / "plotly"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text('raise ImportError("plotly is not on the GPU machine")\n')
    pythonpath = os.pathsep.join(p for p in (str(blocker.parent), os.environ.get("PYTHONPATH", "")) if p)
    # stage budgets are sized for an H200; on a slow or busy CI machine the interpreter needs longer
    budgets = {k: "300" for k in ("T_TESTS", "T_CALIBRATE", "T_BENCH", "T_E2E_8B", "T_E2E_QWEN", "T_E2E_70B", "T_GATE", "T_VALIDATE")}
    tar = tmp_path / "suite.tar.gz"
    env = {"GPU_SUITE_CPU_DRYRUN": "1", "GPU_SUITE_KERNELS": "copy", "PYTHONPATH": pythonpath, "GPU_SUITE_DEADLINE_S": "3000",
           "GPU_SUITE_TAR": str(tar), **budgets}
    p = _run(tmp_path, env, timeout=900)
    out = tmp_path / "out"
    assert p.returncode == 0, p.stdout + p.stderr
    stages = [line.split("\t") for line in (out / "stages.tsv").read_text().splitlines()[1:]]
    assert [s[0] for s in stages] == ["calibrate", "e2e_llama8b", "e2e_qwen7b", "e2e_llama70b", "e2e_qwen3moe", "tune",
                                      "gate_run1", "gate_run2", "gate_regress", "bench", "validate_e2e", "validate", "moe_align",
                                      "tests"]
    assert all(s[1].startswith("ok") or s[1] == "skipped(cpu)" for s in stages), stages
    # the summary comes last, and the packed copy holds the whole folder
    tail = p.stdout.strip().splitlines()
    head = max(i for i, line in enumerate(tail) if line.startswith("gpu_suite summary"))
    assert all(line.startswith("  ") for line in tail[head + 1:]) and len(tail) - head > 30  # every line after it is the summary's
    assert tail[-1].startswith("  flags:")
    assert any(line.startswith("  calibrate: bf16 ") and "read-only" in line for line in tail[head:])
    import tarfile

    with tarfile.open(tar) as t:
        names = set(t.getnames())
    assert {"out/results.json", "out/validation.json", "out/summary.txt", "out/gate-regress.json", "out/e2e.json"} <= names
    res = load_results(out / "results.json")
    assert res.rows and all(r.correct and len(r.samples_s) >= 10 for r in res.rows)
    assert all(r.host_us_per_call is not None and r.method for r in res.rows)
    assert res.measured_spec == "h200-measured"
    full = load_results(out / "e2e.json").extra["end_to_end_full"]["models"]
    assert len(full) == 4 and "qwen3-30b-a3b-tiny" in full and all(m["points"] for m in full.values())
    spec = load_spec_file(out / "measured_spec.toml")
    assert spec.kind == "measured"
    v = json.loads((out / "validation.json").read_text())
    assert v["summary"]["measured"]["overall"]["n"] == len([r for r in res.rows if r.impl == "triton"])
    ve = json.loads((out / "validation-e2e.json").read_text())
    assert ve["end_to_end_full"] and all(p["measured_s"] > 0 for p in ve["end_to_end_full"])
    assert any(line.startswith("  e2e ") for line in tail)
    gate = json.loads((out / "gate-regress.json").read_text())
    assert gate["exit_code"] in (0, 1) and gate["rows"]
    assert (out / "validation.md").read_text().startswith("# Validation")
    assert (out / "summary.txt").is_file() and (out / "logs" / "bench.log").is_file()
    # the GPU's test stage (last) collects its -k subset: every kernel's cases against its reference
    # (the registry test) and the kernel files' own split-K, paged and baseline checks
    tests_log = (out / "logs" / "tests.log").read_text()
    assert "deselected" in tests_log, tests_log[-2000:]
    from kernels.registry import KERNEL_NAMES

    for k in KERNEL_NAMES:
        assert f"tests/kernels/test_kernels_reference.py::test_kernel_matches_reference[{k}-" in tests_log, k
    assert "tests/kernels/test_decode_attention.py::" in tests_log and "tests/kernels/test_gemm.py::" in tests_log


def test_the_summary_reports_the_torch_moe_rows_of_the_calibration(tmp_path):
    """A run's summary names what its ``moe_grouped`` rows measured (TFLOP/s and GB/s at each
    expert shape's smallest and largest token count); run 2 predates them and says so."""
    import json
    import shutil

    from rooflinecli.bench.opgrid import build_grid
    from rooflinecli.bench.suite_summary import calibration_lines

    run2 = Path(__file__).resolve().parents[2] / "reports" / "h200-2026-11-30-run2"
    assert any(line.endswith("torch MoE experts (moe_grouped): no moe_grouped rows") for line in calibration_lines(run2))
    for name in ("measured_spec.toml", "measured_spec.calibration.json"):
        shutil.copy(run2 / name, tmp_path / name)
    cal = tmp_path / "measured_spec.calibration.json"
    doc = json.loads(cal.read_text())
    doc["rows"] += [{"op": c.op, "shape": c.shape, "flops": c.flops, "bytes": c.bytes, "t_graph": 1e-5 + c.flops / 4e14 + c.bytes / 3e12,
                     "t_eager": 5e-5 + c.flops / 4e14 + c.bytes / 3e12} for c in build_grid()["moe"]]
    cal.write_text(json.dumps(doc))
    line = next(x for x in calibration_lines(tmp_path) if "moe_grouped" in x)
    assert "E8 T1 " in line and "E8 T4096 " in line and "E128 T4096 " in line and "TFLOP/s" in line and "fitted per expert shape" in line
