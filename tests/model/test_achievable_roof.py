"""The achievable mode's roof is a bound: its HBM ceiling is the fastest stream measured (reads
outrun the copy behind a spec's bandwidth), and no achievable row or phase goes below it."""

from __future__ import annotations

import numpy as np
import pytest

from rooflinecli.achievable import models_for, phase_achievable
from rooflinecli.ceilings import measured_roof_bandwidth, measured_roof_spec
from rooflinecli.achievable.calibration import Row
from rooflinecli.achievable.fit import STREAM_MIN_BYTES, fit_target_s, stream_rates
from rooflinecli.ceilings import fastest_stream
from rooflinecli.analysis import Workload
from rooflinecli.predict import analyze
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model, preset_ids


def _row(op, nbytes, t, eager=None, **shape):
    return Row(op=op, shape=shape, flops=1.0, bytes=nbytes, t_graph_s=t, t_eager_s=eager)


def test_fastest_stream_takes_big_memory_bound_rows_at_their_fitted_time():
    rows = [
        _row("copy", 2e9, 2e9 / 4.2e12, bytes=1),
        _row("sdpa_decode", 4e9, 4e9 / 4.0e12, eager=4e9 / 4.5e12, B=8),  # eager under graph: the fit takes eager
        _row("copy", 1e8, 1e8 / 9e12, bytes=2),  # could sit in L2: too small to count
        _row("silu_mul_strided", 2e9, 2e9 / 6e12, T=1),  # strided: its bytes formula may undercount
        _row("gemm", 2e9, 2e9 / 7e12, M=1, N=1, K=1),  # not a memory-bound op
    ]
    bw, where = fastest_stream(stream_rates(rows))
    assert bw == pytest.approx(4e9 / fit_target_s(rows[1])) == pytest.approx(4.5e12)
    assert where.startswith("sdpa_decode B8") and "4,500 GB/s" in where
    assert fastest_stream(stream_rates([r for r in rows if r.bytes < STREAM_MIN_BYTES or r.op == "gemm"])) == (0.0, "")
    # under a datasheet ceiling of 4.4 TB/s the 4.5 TB/s row is not HBM: the copy is the fastest
    assert fastest_stream(stream_rates(rows), 4.4e12)[0] == pytest.approx(4.2e12)
    assert [round(bw / 1e12, 2) for bw, _ in stream_rates(rows)] == [4.5, 4.2]


def test_measured_roof_raises_only_the_bandwidth():
    spec = get_spec("h200-measured")
    models = models_for(spec)
    fast = measured_roof_spec(spec, models.streams)
    assert models.streams[0][0] / 1e9 == pytest.approx(fast.memory_bandwidth_gb_per_s)
    # the shipped H200 calibration: SDPA decode reads ran 7-8% over the sustained copy
    assert 1.04 < fast.memory_bandwidth_gb_per_s / spec.memory_bandwidth_gb_per_s < 1.12
    assert fast.memory_bandwidth_gb_per_s < get_spec("h200").memory_bandwidth_gb_per_s  # under the datasheet
    assert fast.peak_dense_tflops == spec.peak_dense_tflops  # sustained compute stays
    assert measured_roof_spec(get_spec("h100-sxm")) == get_spec("h100-sxm")


GRID_B = np.array([1.0, 16.0, 256.0])[:, None]
GRID_N = np.array([128.0, 8192.0, 131072.0])[None, :]


@pytest.mark.parametrize("model_id", preset_ids())
def test_no_achievable_phase_beats_its_roof(model_id):
    """Every preset, dtypes and engines over batch 1-256 x context 128-128k: the achievable total
    of each phase is at least its roof, and so is every row's work beyond its fixed costs (the main
    norms of a model with extra norms share their roof with them by bytes: with all of it, Qwen3's
    main norms printed an efficiency of 1.48). Before the clamp DeepSeek-V3's
    absorbed MLA decode at batch 256 x 128k with fp8 KV came out at 0.52x its roof: a bytes-only
    attention fit on a compute-bound op."""
    spec = get_spec("h200-measured")
    cfg = get_model(model_id)
    for kvd, wd, engine in (("bf16", "bf16", "torch"), ("fp8", "int4", "torch"), ("fp8", "fp8", "fused")):
        wl = Workload(batch=1, prompt_len=1024, gen_len=1, kv_dtype=kvd, weight_dtype=wd, engine=engine)
        for phase in ("decode", "prefill"):
            rows = phase_achievable(cfg, spec, wl, phase, GRID_B, GRID_N, engine)
            shape = np.broadcast_shapes(GRID_B.shape, GRID_N.shape)
            t = sum(np.broadcast_to(r.time_s, shape) for r in rows)
            roof = sum(np.broadcast_to(r.roof_s, shape) for r in rows)
            assert (t >= roof * (1 - 1e-12)).all(), (model_id, kvd, wd, engine, phase, (t / roof).min())
            for r in rows:  # the work beyond the fixed costs runs at most at the roof
                work = np.asarray(r.time_s) - np.asarray(r.fixed_s)
                assert (work >= np.asarray(r.roof_s) * (1 - 1e-12)).all(), (model_id, r.name, phase)
            extra = [r for r in rows if r.name == "norms.extra"]
            if extra:  # the extra norms carry their share of the norms' roof
                assert (np.asarray(extra[0].roof_s) > 0).all(), (model_id, phase)


def test_mla_decode_at_large_batch_is_held_at_its_compute_roof():
    spec = get_spec("h200-measured")
    cfg = get_model("deepseek-v3")
    wl = Workload(batch=256, prompt_len=1024, gen_len=1, kv_dtype="fp8")
    rows = {r.name: r for r in phase_achievable(cfg, spec, wl, "decode", 256.0, 131072.0)}
    core = rows["attn.core"]
    assert float(core.time_s) >= float(core.roof_s) > 0
    assert float(core.efficiency) <= 1.0 + 1e-9


def test_analyze_prints_the_fastest_ceilings_and_a_ratio_of_at_least_one(capsys):
    from rooflinecli.cli.analyze import render

    spec = get_spec("h200-measured")
    a = analyze(get_model("llama-3-8b"), spec, Workload(batch=64, prompt_len=131072, gen_len=4, kv_dtype="fp8", mode="achievable"))
    assert a.tpot_s >= a.roof_tpot_s and a.ttft_s >= a.roof_ttft_s
    assert a.roof_spec.memory_bandwidth_gb_per_s > spec.memory_bandwidth_gb_per_s
    assert a.to_json()["roof_memory_bandwidth_gb_per_s"] == a.roof_spec.memory_bandwidth_gb_per_s
    render(a, show_ops=False)
    out = capsys.readouterr().out
    assert "roof beside: the measured roof, HBM 4," in out and "fastest calibration stream, sdpa_decode" in out
    # roof mode on the same spec is the measured roof: the very roof printed beside achievable
    r = analyze(get_model("llama-3-8b"), spec, Workload(batch=64, prompt_len=131072, gen_len=4, kv_dtype="fp8", mode="roof"))
    assert r.mode == "measured-roof" and r.roof_spec == a.roof_spec and r.tpot_s == pytest.approx(a.roof_tpot_s, rel=1e-12)
    d = analyze(get_model("llama-3-8b"), spec, Workload(batch=64, prompt_len=131072, gen_len=4, kv_dtype="fp8", mode="datasheet"))
    assert d.roof_spec == get_spec("h200") and d.tpot_s < r.tpot_s


def test_a_mistimed_row_cannot_raise_the_roof_past_the_datasheet(tmp_path):
    """One SDPA decode row timed at 0.1 us (10.7 PB/s): left out of the roof's bandwidth, which
    stays at the fastest real stream, and the summary line says a row was left out."""
    import json
    import shutil

    from rooflinecli.hardware import load_spec_file

    shipped = get_spec("h200-measured")
    doc = json.loads(open(shipped.path.replace("h200.toml", "h200-calibration.json"), encoding="utf-8").read())
    bad = next(r for r in doc["rows"] if r["op"] == "sdpa_decode" and r["bytes"] > STREAM_MIN_BYTES)
    bad["t_graph"] = bad["t_eager"] = 1e-7
    (tmp_path / "h200-calibration.json").write_text(json.dumps(doc), encoding="utf-8")
    shutil.copy(shipped.path, tmp_path / "h200.toml")
    spec = load_spec_file(tmp_path / "h200.toml")
    models = models_for(spec)
    assert models.streams[0][0] > 1e15  # the bad row is the "fastest"
    fast = measured_roof_spec(spec, models.streams)
    assert fast.memory_bandwidth_gb_per_s == pytest.approx(measured_roof_spec(shipped, models_for(shipped).streams).memory_bandwidth_gb_per_s)
    assert fast.memory_bandwidth_gb_per_s <= get_spec("h200").memory_bandwidth_gb_per_s
    assert "1 calibration row(s) over the datasheet's 4,800 GB/s left out" in measured_roof_bandwidth(spec, models.streams)[1]


def test_multi_gpu_collectives_are_flagged_as_uncalibrated():
    """TP 8: the 160 all-reduces of a Llama-3-70B decode step are at the link roofline (plus the
    graph floor), with no calibrated latency: the rows and a warning say so; one GPU: no warning."""
    from rooflinecli.achievable.step import COMM_NOTE

    spec = get_spec("h200-measured")
    a = analyze(get_model("llama-3-70b"), spec, Workload(batch=1, prompt_len=1024, gen_len=2, tp=8, mode="achievable"))
    comm = [r for r in a.achievable_ops["decode"] if r["kind"] == "comm"]
    assert len(comm) == 2 and all(COMM_NOTE in r["note"] for r in comm)
    assert sum(r["layers"] * r["kernels_per_layer"] for r in comm) == 160
    assert [w for w in a.warnings if "the 160 collectives of a decode step" in w and "not calibrated" in w]
    one = analyze(get_model("llama-3-8b"), spec, Workload(batch=1, prompt_len=1024, gen_len=2, mode="achievable"))
    assert not [w for w in one.warnings if "collectives" in w]


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "fp16", "fp8"])
def test_other_compute_dtypes_stay_at_or_above_their_roof(dtype):
    """The GEMM fits are bf16 and other compute dtypes are never modelled slower than it: before
    the clamp an fp32 prefill of Llama-3-8B (2k tokens) printed 66.9 ms against its fp32 roof of
    587 ms (x0.11); now every row holds its dtype's roof."""
    spec = get_spec("h200-measured")
    a = analyze(get_model("llama-3-8b"), spec, Workload(batch=1, prompt_len=2048, gen_len=2, compute_dtype=dtype, mode="achievable"))
    assert a.ttft_s >= a.roof_ttft_s * (1 - 1e-12) and a.tpot_s >= a.roof_tpot_s * (1 - 1e-12)
    if dtype == "fp32":
        assert a.ttft_s > 0.5  # the fp32 peak (50.9 TFLOP/s measured) bounds it, not the bf16 fit
