"""The measured specs derived from the imported calibrations (``<gpu>-imported``): what ships is
what the derivation gives from the shipped tables, every figure sits below its datasheet, and
working sets the L2 can hold never become a ceiling."""

from __future__ import annotations

import random

import pytest

from rooflinecli.achievable import imported_calibrations, measured_dir
from rooflinecli.achievable.calibration import Calibration
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import get_spec
from rooflinecli.importer.measured_spec import L2_MULTIPLE, LARGE_GEMM, imported_calibrations_of, measured_spec_doc, table_ceilings

GPUS = sorted({g for g, _, _ in imported_calibrations()})


def test_every_gpu_with_imported_tables_ships_its_spec():
    assert {"a100-sxm", "b200", "h100-sxm", "h200", "l40s"} <= set(GPUS)
    for g in GPUS:
        assert (measured_dir() / f"{g}-imported.toml").is_file(), g


@pytest.mark.parametrize("gpu", GPUS)
def test_shipped_spec_is_what_the_shipped_tables_give(gpu):
    base, spec = get_spec(gpu), get_spec(f"{gpu}-imported")
    cals = imported_calibrations_of(gpu, measured_dir())
    doc = measured_spec_doc(base, cals, cals[0][1].source)
    assert spec.kind == "measured" and spec.base == gpu
    assert spec.peak_dense_tflops["bf16"] == doc["peak_dense_tflops"]["bf16"]
    assert spec.memory_bandwidth_gb_per_s == doc["memory"]["bandwidth_gb_per_s"]
    # below the datasheet, and not absurdly so (NVIDIA's tables reach 75-95% of it)
    assert 0.6 * base.peak_dense_tflops["bf16"] < spec.peak_dense_tflops["bf16"] <= base.peak_dense_tflops["bf16"]
    assert 0.75 * base.memory_bandwidth_gb_per_s < spec.memory_bandwidth_gb_per_s <= base.memory_bandwidth_gb_per_s
    if "fp8" in doc["peak_dense_tflops"]:
        assert spec.peak_dense_tflops["bf16"] < spec.peak_dense_tflops["fp8"] <= base.peak_dense_tflops["fp8"]
    # inherited figures are the datasheet's
    assert spec.memory_capacity_gb == base.memory_capacity_gb and spec.l2_size_mb == base.l2_size_mb


def _cal(rows) -> Calibration:
    cols = {k: [r[i] for r in rows] for i, k in enumerate(("dtype", "M", "N", "K", "latency_us"))}
    return Calibration(path="x", gpu="g", created_utc="", method="", rows=(), tables={"gemm": {"columns": cols, "provenance": {}}}, engine="vllm",
                       source={"package": "aiconfigurator-core", "package_version": "0", "license": "Apache-2.0"})


def test_l2_resident_gemms_never_set_the_bandwidth():
    base = get_spec("a100-sxm")
    l2 = base.l2_size_mb * 2**20
    rng = random.Random(7)
    rows = []
    for _ in range(40):  # weights that fit the L2, at 3x the HBM bandwidth: not a ceiling
        n = k = 2048
        rows.append(("bf16", 1, n, k, 2 * n * k / (3 * base.memory_bandwidth_gb_per_s * 1e9) * 1e6))
    assert "memory.bandwidth_gb_per_s" not in table_ceilings(_cal(rows), l2)
    for _ in range(40):  # weights 8x+ the L2 at 80-90% of the datasheet bandwidth
        n, k = 16384, 16384 * 2
        assert 2 * n * k >= L2_MULTIPLE * l2
        rows.append(("bf16", 8, n, k, 2 * n * k / (rng.uniform(0.8, 0.9) * base.memory_bandwidth_gb_per_s * 1e9) * 1e6))
    bw, n = table_ceilings(_cal(rows), l2)["memory.bandwidth_gb_per_s"]
    assert n == 40 and 0.8 * base.memory_bandwidth_gb_per_s < bw < 0.91 * base.memory_bandwidth_gb_per_s


def test_a_table_faster_than_the_datasheet_is_refused():
    base = get_spec("h100-sxm")
    m = LARGE_GEMM
    rows = [("bf16", m, m, m, 2 * m**3 / (1.3 * base.peak_dense_tflops["bf16"] * 1e12) * 1e6) for _ in range(30)]
    with pytest.raises(RooflineError, match="above the datasheet"):
        measured_spec_doc(base, [("vllm", _cal(rows))], {})


def test_measured_roof_on_the_imported_spec_is_slower_than_the_datasheet_roof():
    from rooflinecli.analysis import Workload
    from rooflinecli.model_registry import get_model
    from rooflinecli.predict import predict_step_s

    cfg, wl = get_model("llama-3-8b"), Workload(batch=1, prompt_len=1024, gen_len=1)
    roof = predict_step_s(cfg, get_spec("h100-sxm"), wl, "decode", 1, 1024, mode="datasheet")
    imported = predict_step_s(cfg, get_spec("h100-sxm-imported"), wl, "decode", 1, 1024, mode="measured-roof")
    ratio = get_spec("h100-sxm").memory_bandwidth_gb_per_s / get_spec("h100-sxm-imported").memory_bandwidth_gb_per_s
    assert imported / roof == pytest.approx(ratio, rel=0.03)  # decode at batch 1 streams the weights
