"""The achievable model: calibration files (both layouts, bad input), the fitted vendor-kernel
models against real H200 timings (leave one shape out), engine profiles and ``predict_step_s``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rooflinecli.achievable import calibration_for, models_for
from rooflinecli.ceilings import measured_roof_spec
from rooflinecli.predict import predict_step_breakdown, predict_step_s
from rooflinecli.achievable.calibration import SCHEMA, load_calibration, parse_calibration
from rooflinecli.achievable.fit import fit_models, leave_one_out
from rooflinecli.analysis import Workload
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "h200-2026-11-30" / "torch-op-timings.json"
SHIPPED = ROOT / "hardware_specs" / "measured" / "h200-calibration.json"
#: the first run's torch-op timings converted to the calibration schema (the shipped file was once this)
CONVERTED = FIXTURE.parent / "torch-op-timings.calibration.json"


@pytest.fixture(scope="module")
def cal():
    return load_calibration(str(FIXTURE))


def test_leave_one_shape_out_on_the_h200_fixture(cal):
    """Drop each timed row, refit its op's model, predict it: median |error| <= 5%, p90 <= 15%."""
    res = leave_one_out(cal)
    errs = np.abs([e for _, e in res])
    assert len(res) >= 250  # every timed row but the launch floor
    med, p90 = float(np.median(errs)), float(np.percentile(errs, 90))
    by_op: dict[str, list[float]] = {}
    for r, e in res:
        by_op.setdefault(r.op, []).append(abs(e))
    print(f"\nleave-one-shape-out over {len(res)} rows: median |error| {med:.1%}, p90 {p90:.1%}")
    for op, v in sorted(by_op.items()):
        print(f"  {op:30s} {len(v):4d} rows  median {np.median(v):6.1%}  p90 {np.percentile(v, 90):6.1%}  max {max(v):6.1%}")
    assert med <= 0.05 and p90 <= 0.15
    assert np.median(by_op["gemm"]) <= 0.05  # the bulk of a step's time


def test_fit_reproduces_the_rows_it_was_fitted_on_and_the_h200_facts(cal):
    m = fit_models(cal)
    assert 0.9e-6 < m.graph_floor_s < 1.0e-6  # ~1 us per kernel in a graph
    assert 3e-6 < m.gemm.t0_s < 7e-6  # small projections pay a fixed cost of a few us
    assert 600 < m.sustained_gemm_flops_per_s / 1e12 < 700  # sustained, below the 790 burst
    assert 10e-6 < m.eager_launch_s < 25e-6  # eager host launch
    errs = [abs(m.row_time_s(r) / r.t_graph_s - 1) for r in cal.rows if r.op == "gemm"]
    assert np.median(errs) < 0.01  # the per-(N, K) table passes through its own points


def test_both_layouts_load_the_same_rows(cal):
    shipped = load_calibration(str(CONVERTED))
    assert json.loads(CONVERTED.read_text())["schema"] == SCHEMA
    assert json.loads(SHIPPED.read_text())["schema"] == SCHEMA
    assert [(r.op, r.shape, r.t_graph_s) for r in shipped.rows] == [(r.op, r.shape, r.t_graph_s) for r in cal.rows]
    assert shipped.gpu == cal.gpu == "NVIDIA H200"
    assert shipped.sustained["gemm_bf16_tflops"] == pytest.approx(cal.sustained["gemm_bf16_tflops"], rel=1e-3)


def _doc():
    return json.loads(FIXTURE.read_text())


def test_unknown_ops_are_noted_not_fatal():
    doc = _doc()
    doc["rows"].append({"op": "fancy_new_op", "shape": {}, "flops": 1, "bytes": 1, "t_graph": 1e-6})
    c = parse_calibration(doc, "x.json")
    assert c.notes == ("ignored 1 row(s) of unknown op 'fancy_new_op'",)


@pytest.mark.parametrize(
    "mutate, expect",
    [
        (lambda d: d["rows"][3].__setitem__("t_graph", float("nan")), "not valid JSON: NaN is not a JSON number"),
        (lambda d: d["rows"][3].__setitem__("t_graph", -1e-6), "rows[3] (gemm): t_graph: must be a positive finite number"),
        (lambda d: d["rows"][5].pop("t_graph"), "rows[5] (gemm): t_graph: missing"),
        (lambda d: d["rows"][5].__setitem__("bytes", -4), "rows[5] (gemm): bytes: must be a positive finite number in [0, 1e+15], got -4"),
        (lambda d: d["rows"][5]["shape"].pop("K"), "rows[5] (gemm): shape.K: missing"),
        (lambda d: d["rows"].__setitem__(slice(None), []), "rows: missing or empty"),
        (lambda d: d.__setitem__("schema", "other/9"), "schema: unknown 'other/9'"),
        (lambda d: d.__setitem__("sustained", {"gemm_bf16_tflops": 1e-308}), "sustained.gemm_bf16_tflops: must be a positive finite number in [0.001, 100000]"),
        (lambda d: d.__setitem__("rows", [r for r in d["rows"] if r["op"] != "sdpa_decode"]), "rows: fewer than 2 'sdpa_decode' rows"),
    ],
    ids=["nan", "negative-time", "missing-time", "negative-bytes", "missing-shape-key", "no-rows", "bad-schema", "tiny-sustained", "no-decode-attention"],
)
def test_bad_calibration_is_one_line(tmp_path, mutate, expect):
    doc = _doc()
    mutate(doc)
    p = tmp_path / "cal.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(RooflineError) as e:
        load_calibration(str(p))
    msg = str(e.value)
    assert "\n" not in msg and expect in msg and str(p) in msg


def test_missing_calibration_file_through_the_cli(tmp_path):
    from typer.testing import CliRunner

    from rooflinecli.cli import app

    spec = tmp_path / "lab.toml"
    spec.write_text('id = "lab"\nkind = "measured"\nbase = "h200"\n[measured_with]\ncalibration = "gone.json"\n')
    r = CliRunner().invoke(app, ["analyze", "--hw", str(spec)])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "no such calibration file" in lines[0] and "gone.json" in lines[0]


# ------------------------------------------------------------------------------------------------
# predictions
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def h200m():
    return get_spec("h200-measured")


def test_shipped_measured_spec_names_its_calibration(h200m):
    assert h200m.kind == "measured" and h200m.base == "h200"
    # the sustained rate is what predictions use; the burst (20 single launches) is kept beside it
    burst = float(h200m.measured_with["burst peak_dense_tflops.bf16"])
    assert 600 < h200m.peak_dense_tflops["bf16"] < burst < 990
    assert calibration_for(h200m).sustained["gemm_bf16_tflops"] == pytest.approx(h200m.peak_dense_tflops["bf16"], rel=1e-3)
    assert calibration_for(h200m).gpu == "NVIDIA H200"
    # the datasheet spec has no calibration of its own (torch engine); its GPU's imported ones answer by engine
    assert calibration_for(get_spec("h200"), "torch") is None and models_for(get_spec("h200"), "torch") is None
    assert calibration_for(get_spec("h200"), "vllm").engine == "vllm"
    assert calibration_for(h200m, "vllm").path == calibration_for(get_spec("h200"), "vllm").path  # the GPU, not the spec's kind


def test_modes_order_and_breakdown_sums(h200m):
    cfg = get_model("llama-3-8b")
    wl = Workload(batch=64, prompt_len=2048, gen_len=1)
    t = {m: predict_step_s(cfg, h200m, wl, "decode", 64, 2048, mode=m) for m in ("datasheet", "measured-roof", "achievable")}
    # the datasheet roof is the fastest; the measured roof is lower; real kernels lower still
    assert t["datasheet"] < t["measured-roof"] < t["achievable"]
    assert 1.1 < t["achievable"] / t["datasheet"] < 1.6  # the H200 gap: 30-44% over the datasheet roof
    # "roof" is the roof of the spec's own kind: the measured roof on a measured spec
    assert predict_step_s(cfg, h200m, wl, "decode", 64, 2048, mode="roof") == t["measured-roof"]
    rows = predict_step_breakdown(cfg, h200m, wl, "decode", 64, 2048, mode="achievable")
    assert math.isclose(sum(r["time_s"] for r in rows), t["achievable"], rel_tol=1e-12)
    by = {r["name"]: r for r in rows}
    assert {"attn.qkv", "mlp.gate_up", "attn.rope", "attn.kv_write", "residual_adds"} <= set(by)
    assert by["attn.rope"]["kernels"] == 10 and by["attn.rope"]["roof_s"] == 0.0
    for r in rows:
        assert r["time_s"] >= r["fixed_s"] >= 0.0
    # the roof rows of the achievable breakdown add up to the measured roof (the calibration's
    # fastest HBM stream, faster than the spec's sustained copy bandwidth)
    fastest = measured_roof_spec(h200m, models_for(h200m).streams)
    assert fastest.memory_bandwidth_gb_per_s > h200m.memory_bandwidth_gb_per_s
    assert math.isclose(sum(r["roof_s"] for r in rows), t["measured-roof"], rel_tol=1e-9)


def test_gemm_row_matches_the_calibrated_shape(h200m, cal):
    """A Llama-3-8B decode step's fused qkv GEMM at batch 64 is the calibrated (64, 6144, 4096)."""
    cfg = get_model("llama-3-8b")
    rows = predict_step_breakdown(cfg, h200m, Workload(batch=64, prompt_len=512, gen_len=1), "decode", 64, 512, mode="achievable")
    qkv = next(r for r in rows if r["name"] == "attn.qkv")
    measured = next(r.t_graph_s for r in cal.rows if r.op == "gemm" and r.shape == {"M": 64, "N": 6144, "K": 4096})
    assert qkv["time_s"] / cfg.num_layers == pytest.approx(measured, rel=0.03)


def test_fused_engine_is_faster_and_launches_fewer_kernels(h200m):
    cfg = get_model("llama-3-8b")
    wl = Workload(batch=8, prompt_len=1024, gen_len=1)
    torch_rows = predict_step_breakdown(cfg, h200m, wl, "decode", 8, 1024, mode="achievable", engine="torch")
    fused_rows = predict_step_breakdown(cfg, h200m, wl, "decode", 8, 1024, mode="achievable", engine="fused")

    def kernels(rows):
        return sum(r["kernels"] * r["layers"] for r in rows)

    assert kernels(fused_rows) < kernels(torch_rows) / 2
    assert sum(r["time_s"] for r in fused_rows) < sum(r["time_s"] for r in torch_rows)


def test_achievable_grows_with_batch_and_context(h200m):
    from rooflinecli.achievable import phase_achievable

    cfg = get_model("llama-3-8b")
    wl = Workload(batch=1, prompt_len=1, gen_len=1)
    B = np.array([1.0, 8.0, 64.0, 256.0])[:, None]
    N = np.array([512.0, 4096.0, 32768.0])[None, :]
    total = sum(np.broadcast_to(r.time_s, (4, 3)) for r in phase_achievable(cfg, h200m, wl, "decode", B, N))
    assert (np.diff(total, axis=0) > 0).all() and (np.diff(total, axis=1) > 0).all()
    # one grid point equals the scalar call
    assert total[2, 1] == pytest.approx(predict_step_s(cfg, h200m, wl, "decode", 64, 4096, mode="achievable"), rel=1e-12)


def test_eager_prefill_waits_for_the_host_only_when_kernels_are_short(h200m):
    """Eager prefill: a short prompt is host-bound (the host's calibrated cost of each torch call),
    a long one GPU-bound (the host runs ahead during the long GEMMs)."""
    cfg = get_model("llama-3-8b")
    m = models_for(h200m)

    def rows(S):
        return {r["name"]: r for r in predict_step_breakdown(cfg, h200m, Workload(batch=1, prompt_len=S, gen_len=1), "prefill", 1, S, mode="achievable")}

    short, long_ = rows(16), rows(8192)
    host = sum(r["host_s"] * r["layers"] for r in short.values())
    total_short = sum(r["time_s"] for r in short.values())
    assert total_short == pytest.approx(host, rel=0.05)  # host-bound: the calls set the pace
    # each row's host time is its torch calls at their calibrated eager cost (a launch's cost
    # per kernel where the calibration has no eager rows of the op)
    assert short["attn.qkv"]["host_s"] == pytest.approx(m.eager_call_s["gemm"])
    assert short["residual_adds"]["host_s"] == pytest.approx(2 * m.eager_call_s["add_"])
    norm_call_s = m.eager_call_s.get("rmsnorm", m.eager_launch_s)  # one F.rms_norm call per norm
    assert short["norms"]["host_s"] == pytest.approx(short["norms"]["kernels"] * norm_call_s)
    assert short["host launch wait"]["time_s"] > 0.4 * total_short  # the GPU idles for a large share
    total_long = sum(r["time_s"] for r in long_.values())
    assert long_["host launch wait"]["time_s"] < 0.01 * total_long
    # decode runs in a CUDA graph: no host row
    assert "host launch wait" not in {r["name"] for r in predict_step_breakdown(cfg, h200m, Workload(batch=1, prompt_len=16, gen_len=1), "decode", 1, 16, mode="achievable")}


def test_bad_mode_and_engine(h200m):
    cfg = get_model("llama-3-8b")
    wl = Workload(batch=1, prompt_len=16, gen_len=1)
    with pytest.raises(RooflineError, match="unknown engine 'tensorrt'"):
        predict_step_s(cfg, h200m, wl, "decode", 1, 16, mode="achievable", engine="tensorrt")
    with pytest.raises(RooflineError, match="--mode: unknown mode 'fast'"):
        predict_step_s(cfg, h200m, wl, "decode", 1, 16, mode="fast")
    with pytest.raises(RooflineError, match="no calibration for engine torch"):
        predict_step_s(cfg, get_spec("mi300x"), wl, "decode", 1, 16, mode="achievable", engine="torch")
    # achievable without an engine on a GPU with no data of its own: the first serving engine, transferred
    from rooflinecli.predict import predict_phase

    p = predict_phase(cfg, get_spec("mi300x"), wl, "decode", 1.0, 16.0, mode="achievable")
    assert (p.mode, p.engine) == ("achievable", "vllm") and float(p.time_s) >= float(p.roof_time_s) > 0
    with pytest.raises(RooflineError, match="h200: no calibration for engine torch .*this GPU has sglang, trtllm, vllm"):
        predict_step_s(cfg, get_spec("h200"), wl, "decode", 1, 16, mode="achievable", engine="torch")
    with pytest.raises(RooflineError, match="measured-roof needs a measured spec"):
        predict_step_s(cfg, get_spec("h200"), wl, "decode", 1, 16, mode="measured-roof")


def test_million_point_achievable_sweep_is_fast(h200m):
    """A 1,000 x 1,000 (batch x context) decode grid in achievable mode: well under 3 s of CPU
    (about 0.45 s on a 2-core CI machine; CPU time, so other jobs on the machine do not count)."""
    import time

    from rooflinecli.whatif import sweep as S

    combo = S.make_combos([get_model("llama-3-8b")], [h200m], ["bf16"], ["bf16"], None, None)[0]
    assert combo.mode == "achievable"
    B = np.arange(1, 1001)
    N = np.arange(1, 1001)
    S.block_columns(combo, "decode", B[:10], N[:10])  # fit and caches warm
    t0 = time.process_time()
    cols = S.block_columns(combo, "decode", B, N)
    cpu = time.process_time() - t0
    print(f"\n1M-point achievable decode block: {cpu:.2f} s CPU")
    assert cols["time_s"].size == 1_000_000 and (cols["time_s"] > cols["roof_time_s"]).all()
    assert cpu < 3.0


def test_newer_calibration_ops_are_used(tmp_path):
    """`roofline calibrate --ops` also times F.rms_norm alone and the torch RoPE: the torch engine
    then takes its norms and RoPE from them; copy_sustained rows fold into `sustained`."""
    doc = _doc()
    doc["schema"] = SCHEMA
    for T in (1, 64, 4096):
        n = T * 4096 * 2
        doc["rows"].append({"op": "rmsnorm", "shape": {"T": T, "D": 4096}, "flops": 4 * T * 4096, "bytes": 2 * n + 8192, "t_graph": 3e-6 + (2 * n) / 3e12})
        q = T * 32 * 128 * 2
        doc["rows"].append({"op": "rope", "shape": {"T": T, "H": 32, "D": 128}, "flops": 3 * T * 4096, "bytes": 2 * q + 4 * T * 128, "t_graph": 4e-6 + 2 * q / 2e12})
    doc["rows"].append({"op": "copy_sustained", "shape": {"bytes": 2 << 30}, "flops": 0, "bytes": 4 << 30, "t_series": [1e-3, 1.1e-3]})
    (tmp_path / "cal.json").write_text(json.dumps(doc))
    spec_path = tmp_path / "lab.toml"
    spec_path.write_text('id = "lab"\nkind = "measured"\nbase = "h200"\n[measured_with]\ncalibration = "cal.json"\n')
    spec = get_spec(str(spec_path))
    cal = calibration_for(spec)
    assert cal.notes == () and {"rmsnorm", "rope"} <= {r.op for r in cal.rows}
    m = models_for(spec)
    cfg = get_model("llama-3-8b")
    rows = {r["name"]: r for r in predict_step_breakdown(cfg, spec, Workload(batch=64, prompt_len=1, gen_len=1), "decode", 64, 1024, mode="achievable")}
    q, k = 64 * 32 * 128 * 2, 64 * 8 * 128 * 2
    cs = 2 * 64 * 128 * 2
    want = sum(m.linear["rope"].time_s([1.0, 2.0 * x + cs])[0] for x in (q, k))
    assert rows["attn.rope"]["time_s"] == pytest.approx(cfg.num_layers * want)
    assert rows["norms"]["time_s"] == pytest.approx(cfg.num_layers * 2 * m.linear["rmsnorm"].time_s([1.0, 2.0 * 64 * 4096 * 2 + 2 * 4096])[0])


def test_unseen_gemm_shapes_leave_one_shape_family_out(cal):
    """GEMMs of an (N, K) the calibration lacks (other models, TP shards): leave each measured
    (N, K) out, refit, predict its M sweep from the fitted form and the ratio curves of the
    measured shapes nearest in weight size (median 4.1%, p90 10.4%; the mean of all: 5.2%)."""
    from rooflinecli.achievable.fit import fit_gemm

    rows = cal.of("gemm")
    errs = []
    for nk in {(r.shape["N"], r.shape["K"]) for r in rows}:
        m = fit_gemm([r for r in rows if (r.shape["N"], r.shape["K"]) != nk])
        for r in rows:
            if (r.shape["N"], r.shape["K"]) == nk:
                M, N, K = r.shape["M"], r.shape["N"], r.shape["K"]
                errs.append(abs(float(m.time_s(M, N, K, 2.0 * M * N * K, r.bytes)[0]) / r.t_graph_s - 1))
    med, p90 = float(np.median(errs)), float(np.percentile(errs, 90))
    print(f"\nunseen (N, K), {len(errs)} GEMMs: median |error| {med:.1%}, p90 {p90:.1%}")
    assert med <= 0.05 and p90 <= 0.12


def test_fp8_compute_runs_the_gemm_fits_faster_by_the_measured_ratio(h200m):
    """The vendor-kernel fits are bf16 GEMMs. fp8 compute runs their compute term faster by the
    spec's fp8 peak over its bf16 peak measured the same way (H200 run 2, both bursts: 1,449 /
    781.9 = 1.85; run 3's bench: 1.91 at 8192^3); a peak the measured spec does not measure (int8)
    takes its peer's (fp8: the same datasheet peak), not the datasheet's 2.0, which made int8
    prefill faster than fp8; bf16 and fp16 stay at 1. Compute-bound prefill GEMMs speed up by about
    that ratio, memory-bound decode GEMMs only through their bytes."""
    from rooflinecli.achievable.step import gemm_dtype_speedup

    assert gemm_dtype_speedup(h200m, "fp8") == pytest.approx(1449.0 / 781.9, rel=1e-3)
    assert gemm_dtype_speedup(h200m, "int8") == gemm_dtype_speedup(h200m, "fp8")
    assert gemm_dtype_speedup(get_spec("h200"), "int8") == pytest.approx(2.0, rel=0.01)
    assert gemm_dtype_speedup(h200m, "bf16") == gemm_dtype_speedup(h200m, "fp16") == gemm_dtype_speedup(h200m, "fp32") == 1.0
    cfg = get_model("llama-3-8b")

    def gemm_s(phase, batch, context, **wl):
        w = Workload(batch=batch, prompt_len=context, gen_len=1, **wl)
        rows = predict_step_breakdown(cfg, h200m, w, phase, batch, context, mode="achievable")
        return {r["name"]: r for r in rows}

    bf16 = gemm_s("prefill", 8, 2048)
    fp8 = gemm_s("prefill", 8, 2048, compute_dtype="fp8", weight_dtype="fp8")
    ratio = bf16["mlp.gate_up"]["time_s"] / fp8["mlp.gate_up"]["time_s"]
    assert 1.6 < ratio <= 1.86  # compute-bound: close to the measured ratio, fixed costs aside
    assert "fp8 compute 1.85x the bf16 fit" in fp8["mlp.gate_up"]["note"]
    dec_bf16 = gemm_s("decode", 1, 2048)["mlp.gate_up"]["time_s"]
    dec_fp8 = gemm_s("decode", 1, 2048, compute_dtype="fp8", weight_dtype="fp8")["mlp.gate_up"]["time_s"]
    assert 1.5 < dec_bf16 / dec_fp8 < 2.05  # memory-bound: half the weight bytes


def test_fp8_gemm_rows_calibrate_the_speedup_and_the_step_uses_it(h200m):
    """A calibration with ``gemm_fp8`` rows (the op grid's torch._scaled_mm shapes) fits the fp8
    speedup of the bf16 GEMM fit (rows made from the fit itself at 1.9x are recovered), leave-one-
    out and to_dict carry it, and an fp8 step uses it instead of the spec's peak ratio."""
    from dataclasses import replace

    from rooflinecli.achievable.calibration import Row
    from rooflinecli.achievable.fit import fit_gemm_speedup

    cal = calibration_for(h200m)
    m = fit_models(cal)
    assert m.gemm_speedup == {}  # the shipped run-2 file has no fp8 rows
    rows = []
    rng = np.random.default_rng(7)
    for M, N, K in ((16, 6144, 4096), (256, 28672, 4096), (4096, 4096, 14336), (8192, 8192, 8192)):
        nbytes = M * K + N * K + 2 * M * N
        t, _ = m.gemm.time_s(M, N, K, 2.0 * M * N * K / 1.9, nbytes)
        rows.append(Row("gemm_fp8", {"M": M, "N": N, "K": K}, 2.0 * M * N * K, nbytes, float(t) * (1 + 0.01 * rng.standard_normal())))
    assert fit_gemm_speedup(m.gemm, rows) == pytest.approx(1.9, abs=0.05)
    assert fit_gemm_speedup(m.gemm, []) is None
    fp8_cal = replace(cal, rows=tuple(cal.rows) + tuple(rows))
    fitted = fit_models(fp8_cal)
    assert fitted.gemm_speedup["fp8"] == pytest.approx(1.9, abs=0.05)
    assert fitted.to_dict()["gemm_speedup"]["fp8"] == pytest.approx(1.9, abs=0.05)
    for r in rows:
        assert fitted.row_time_s(r) == pytest.approx(r.t_graph_s, rel=0.05)
    from rooflinecli.achievable import step as step_mod

    cfg = get_model("llama-3-8b")
    wl = Workload(batch=8, prompt_len=2048, gen_len=1, compute_dtype="fp8", weight_dtype="fp8")
    from rooflinecli.achievable.profiles import ENGINES

    b = step_mod._Builder(cfg, h200m, wl, "prefill", 8, 2048, fitted, ENGINES["torch"])
    assert b.gemm_speedup == pytest.approx(fitted.gemm_speedup["fp8"]) and b.gemm_speedup_source == "calibrated"
    b = step_mod._Builder(cfg, h200m, wl, "prefill", 8, 2048, m, ENGINES["torch"])
    assert b.gemm_speedup == pytest.approx(1449.0 / 781.9, rel=1e-3) and b.gemm_speedup_source == "peak ratio"


def test_memory_bound_rows_fit_the_lower_of_graph_and_eager_time():
    """A memory-bound row whose eager time is under its graph time is fitted to the eager time
    (the shipped H200 calibration: a 1 GiB copy graph-timed at 774.6 us against 506.2 eager and
    505.1 back to back for 2 s; GQA decode attention at 2.15 GB 545.8 us against 481.6); a GEMM
    row keeps its graph time (its eager launches run at burst clocks)."""
    from rooflinecli.achievable.fit import fit_target_s

    shipped = load_calibration(str(SHIPPED))
    m = fit_models(shipped)
    copy = next(r for r in shipped.rows if r.op == "copy" and r.shape["bytes"] == 1 << 30)
    assert copy.t_graph_s > 1.4 * copy.t_eager_s and fit_target_s(copy) == copy.t_eager_s
    assert m.linear["copy"].time_s([1.0, copy.bytes])[0] == pytest.approx(copy.t_eager_s, rel=0.02)
    dec = next(r for r in shipped.rows if r.op == "sdpa_decode" and r.shape == {"B": 64, "H": 32, "KVH": 8, "S": 8192, "D": 128})
    t = m.linear["sdpa_decode"].time_s([1.0, dec.bytes], (32, 8, 128))[0]
    assert t == pytest.approx(dec.t_eager_s, rel=0.03) and t < 0.92 * dec.t_graph_s
    gemm = next(r for r in shipped.rows if r.op == "gemm" and r.t_eager_s and r.t_eager_s < 0.97 * r.t_graph_s)
    assert fit_target_s(gemm) == gemm.t_graph_s
    small = next(r for r in shipped.rows if r.op == "copy" and r.shape["bytes"] == 4096)  # host-bound eager
    assert fit_target_s(small) == small.t_graph_s < small.t_eager_s


def test_gemm_stream_rows_scale_the_graph_phase_gemms(tmp_path):
    """`gemm_stream` rows (decode-sized GEMMs over 32 layers of distinct weights, one pass per
    launch) set how much slower than their single-GEMM rows a graph-captured step's GEMMs run,
    per M; eager prefill keeps the single-GEMM fit; a calibration without them predicts as before."""
    from rooflinecli.achievable.fit import stream_pass_s

    doc = json.loads(SHIPPED.read_text())
    (tmp_path / "plain.json").write_text(json.dumps(doc))
    base = fit_models(parse_calibration(doc, "plain.json"))
    slow = {1: 1.08, 8: 1.08, 64: 1.02}
    for M, f in slow.items():
        shape = {"M": M, "L": 32, "D": 4096, "F": 14336, "Q": 6144}
        t = f * stream_pass_s(base.gemm, shape, base.graph_switch_gemm_s, base.graph_floor_s)
        doc["rows"].append({"op": "gemm_stream", "shape": shape, "flops": 1.0, "bytes": 14e9, "t_graph": t, "t_eager": 1.01 * t})
    (tmp_path / "stream.json").write_text(json.dumps(doc))
    m = fit_models(parse_calibration(doc, "stream.json"))
    assert float(m.gemm_stream_ratio(1)) == pytest.approx(1.08) and float(m.gemm_stream_ratio(256)) == pytest.approx(1.02)
    assert 1.02 < float(m.gemm_stream_ratio(32)) < 1.08  # interpolated in log M
    assert m.to_dict()["gemm_stream_ratio"] == pytest.approx({"1": 1.08, "8": 1.08, "64": 1.02})
    assert base.gemm_stream_ratio(1) == 1.0 and base.to_dict()["gemm_stream_ratio"] == {}
    specs = {}
    for name in ("plain", "stream"):
        (tmp_path / f"{name}.toml").write_text(f'id = "{name}"\nkind = "measured"\nbase = "h200"\n[measured_with]\ncalibration = "{name}.json"\n')
        specs[name] = get_spec(str(tmp_path / f"{name}.toml"))
    cfg = get_model("llama-3-8b")

    def rows(spec, phase, b, c):
        return {r["name"]: r for r in predict_step_breakdown(cfg, spec, Workload(batch=b, prompt_len=c, gen_len=1), phase, b, c, mode="achievable")}

    p, s = rows(specs["plain"], "decode", 1, 2048), rows(specs["stream"], "decode", 1, 2048)
    for g in ("attn.qkv", "attn.o", "mlp.gate_up", "mlp.down", "lm_head"):
        assert s[g]["time_s"] == pytest.approx(1.08 * p[g]["time_s"]) and "streamed" in s[g]["note"]
    assert s["attn.core"]["time_s"] == p["attn.core"]["time_s"]
    p, s = rows(specs["plain"], "prefill", 1, 512), rows(specs["stream"], "prefill", 1, 512)
    assert s["mlp.gate_up"]["time_s"] == p["mlp.gate_up"]["time_s"]  # eager prefill: not a graph


def test_absurd_gemm_stream_rows_are_clipped_or_refused_not_a_crash():
    doc = json.loads(SHIPPED.read_text())
    doc["rows"].append({"op": "gemm_stream", "shape": {"M": 1, "L": 1, "D": 4096, "F": 14336, "Q": 6144}, "flops": 1.0, "bytes": 1.0, "t_graph": 1e-8})
    doc["rows"].append({"op": "gemm_stream", "shape": {"M": 64, "L": 1, "D": 4096, "F": 14336, "Q": 6144}, "flops": 1.0, "bytes": 1.0, "t_graph": 1e3})
    m = fit_models(parse_calibration(doc, "x.json"))
    assert float(m.gemm_stream_ratio(1)) == pytest.approx(0.5) and float(m.gemm_stream_ratio(64)) == pytest.approx(2.0)
    doc["rows"][-1]["shape"]["L"] = 1e300  # no GPU streams 1e300 layers: a corrupt row, one line
    with pytest.raises(RooflineError, match=r"shape.L: must be a positive finite number in \[0, 1e\+12\]"):
        parse_calibration(doc, "x.json")


def test_decode_attention_grows_with_context_at_every_batch(h200m):
    """Decode attention reads its family's ratio at the query's batch and per-sequence size: rows
    of one size but different batches (H200: 67 MB in 23.1 us at B1 x 16k, 20.0 at B32 x 512) no
    longer make the time fall as the context grows (it fell by up to 17% between measured points
    when read by bytes alone). What is left is the measured rows' own shape at batch 1, where
    SDPA's dispatch makes 512 tokens slower than 1,024 (8.37 against 7.45 us for Llama-3-8B's heads)."""
    for name in ("llama-3-8b", "llama-3-70b", "mistral-7b"):
        cfg = get_model(name)
        for b in (1, 8, 16, 48):
            ctx = np.arange(256, 20000, 97)
            t = np.array([next(r for r in predict_step_breakdown(cfg, h200m, Workload(batch=b, prompt_len=int(c), gen_len=1), "decode", b, int(c), mode="achievable")
                               if r["kind"] == "attention")["time_s"] for c in ctx])
            below_max = 1.0 - t / np.maximum.accumulate(t)
            assert below_max.max() < (0.12 if b == 1 else 1e-9), (name, b, float(below_max.max()))
            assert t[-1] > 1.3 * t[0]  # and it does grow (mistral-7b only up to its 4,096-token window)


def test_decode_attention_predicts_the_held_out_bench_shapes(h200m):
    """The bench's SDPA decode rows of H200 run 2 (the fastest backend, graph-timed) are shapes the
    calibration grid never timed (128k and 32k contexts; the grid stops at 16k) or timed once:
    the decode-attention model of the same run's calibration predicts each within 5%."""
    from rooflinecli.results import load_results

    cfg = get_model("llama-3-8b")  # H32, Hkv 8, D128: the bench's decode shapes
    res = load_results(ROOT / "tests" / "fixtures" / "h200-2026-11-30-run2" / "results.json")
    rows = [r for r in res.rows if r.op == "decode_attention" and r.impl == "torch" and "page" not in r.shape]
    assert len(rows) >= 5
    for r in rows:
        B, N = r.params["B"], r.params["N"]
        step = predict_step_breakdown(cfg, h200m, Workload(batch=B, prompt_len=N, gen_len=1), "decode", B, N, mode="achievable")
        per_layer = next(x for x in step if x["kind"] == "attention")["time_s"] / cfg.num_layers
        assert per_layer == pytest.approx(r.p50_s, rel=0.05), (r.shape, per_layer, r.p50_s)


def test_absorbed_mla_decode_rows_are_fitted_and_used(h200m):
    """``mla_decode_matmul`` rows (absorbed MLA decode as torch ops): the grid's FLOPs and bytes
    are the analysis op's own formulas; a calibration with them fits t0 + bytes/BW + FLOPs/P and
    the decode step of an MLA model takes it (without them: the SDPA fit, and the row says so)."""
    from rooflinecli.achievable.profiles import get_engine
    from rooflinecli.achievable.step import step_rows
    from rooflinecli.analysis.ops import phase_ops
    from rooflinecli.bench.op_cases import MLA_P, MLA_R
    from rooflinecli.bench.opgrid import build_grid

    grid = build_grid()["mla"]
    assert {c.shape["H"] for c in grid} == {16, 128} and {(c.shape["R"], c.shape["P"]) for c in grid} == {(MLA_R, MLA_P)}
    cfg = get_model("deepseek-v2-lite")  # 16 heads, kv_lora_rank 512, rope 64
    case = next(c for c in grid if c.shape["H"] == 16 and c.shape["B"] == 8 and c.shape["S"] == 8192)
    op = next(o for o in phase_ops(cfg, h200m, Workload(batch=8, prompt_len=8192, gen_len=1), "decode", 8.0, 8192.0) if o.name == "attn.core")
    assert case.flops == pytest.approx(float(op.flops), rel=1e-12)
    assert case.bytes == pytest.approx(float(op.kv_read_bytes + op.activation_bytes), rel=1e-12)

    # a calibration with rows timed by a known law
    doc = json.loads(Path(calibration_for(h200m).path).read_text())
    law = lambda c: 6e-6 + c.bytes / 4.0e12 + c.flops / 3.0e14  # noqa: E731
    doc["rows"] = [r for r in doc["rows"] if r["op"] != "mla_decode_matmul"] + [
        {"op": c.op, "shape": c.shape, "flops": c.flops, "bytes": c.bytes, "t_graph": law(c), "t_eager": law(c) + 3e-5} for c in grid]
    models = fit_models(parse_calibration(doc, "synthetic.json"))
    mla = models.linear["mla_decode_matmul"]
    for c in grid:
        assert float(mla.time_s([1.0, c.bytes, c.flops])[0]) == pytest.approx(law(c), rel=0.02)
    wl = Workload(batch=8, prompt_len=8192, gen_len=1)
    row = next(r for r in step_rows(cfg, h200m, wl, "decode", 8.0, 8192.0, models, get_engine("torch")) if r.name == "attn.core")
    assert "as torch ops (bmm, fp32 softmax, bmm), calibrated" in row.note
    assert float(row.time_s) == pytest.approx(cfg.num_layers * law(case), rel=0.05)
    shipped = next(r for r in step_rows(cfg, h200m, wl, "decode", 8.0, 8192.0, models_for(h200m), get_engine("torch")) if r.name == "attn.core")
    assert "no MLA kernel calibrated" in shipped.note  # the shipped calibration predates the rows


def test_decode_attention_grows_smoothly_past_the_largest_measured_batch(h200m):
    """Past the calibration's largest batch (128) the by-batch ratio fades into the by-bytes one
    over a factor of 2 in batch: a hard switch at 128 x 1.05 made batch 135 faster than 134
    (attention 1,183 -> 1,167 us, llama-3-8b at 239 tokens)."""
    cfg = get_model("llama-3-8b")
    for context in (239, 1024, 6720):
        prev = 0.0
        for batch in range(100, 301, 1):
            w = Workload(batch=batch, prompt_len=context, gen_len=1)
            rows = predict_step_breakdown(cfg, h200m, w, "decode", batch, context, mode="achievable")
            t = next(r["time_s"] for r in rows if r["name"] == "attn.core")
            assert t >= prev, (context, batch, t, prev)
            prev = t


def test_a_cache_of_another_dtype_is_written_by_the_calibrated_copy_on_its_bytes(h200m):
    """The torch engine's KV write is ``kc[:, :, pos] = k``: one copy_ per K and V that casts bf16
    to an fp8 cache within it. So an fp8 cache takes the calibrated bf16 write on its own bytes
    (bf16 in, fp8 out), no separate cast. Before: the copy model without the calibration, 44%
    cheaper than bf16 for 25% fewer bytes, then (one commit) two extra cast kernels per layer."""
    cfg = get_model("llama-3-8b")

    def rows(kv):
        w = Workload(batch=64, prompt_len=128, gen_len=1, kv_dtype=kv)
        return {r["name"]: r for r in predict_step_breakdown(cfg, h200m, w, "decode", 64, 128, mode="achievable")}

    bf16, fp8 = rows("bf16"), rows("fp8")
    assert not any("cast" in n for n in (*bf16, *fp8))
    assert fp8["attn.kv_write"]["kernels"] == bf16["attn.kv_write"]["kernels"] == 2
    assert 0.75 * bf16["attn.kv_write"]["time_s"] <= fp8["attn.kv_write"]["time_s"] <= bf16["attn.kv_write"]["time_s"]
    assert "cast to the cache's dtype within the copy" in fp8["attn.kv_write"]["note"]


def test_torch_moe_rows_are_fitted_by_expert_shape_and_used_by_the_torch_engine(h200m):
    """``moe_grouped`` rows (a torch MoE layer: routing + torch._grouped_mm): the grid's FLOPs and
    bytes are the analysis's expert ops summed; a calibration with them fits them per expert shape
    (E, k, d, I) and the torch engine's MoE layers take that fit as one row of the layer's experts
    (the fused engine keeps the GEMM form); its kernel count is kernels.moe_torch's."""
    from kernels import moe_torch
    from rooflinecli.achievable.profiles import get_engine
    from rooflinecli.achievable.step import MOE_EXPERT_OPS, MOE_TORCH_KERNELS, step_rows
    from rooflinecli.analysis.ops import phase_ops
    from rooflinecli.bench.opgrid import MOE_SHAPES, MOE_T, build_grid

    assert MOE_TORCH_KERNELS == moe_torch.GROUPED_KERNELS + moe_torch.ROUTE_KERNELS
    grid = build_grid()["moe"]
    assert {(c.shape["E"], c.shape["k"], c.shape["d"], c.shape["I"]) for c in grid} == set(MOE_SHAPES)
    assert {c.shape["T"] for c in grid} == set(MOE_T)
    for model, (E, k, d, I) in (("mixtral-8x7b", MOE_SHAPES[0]), ("qwen3-30b-a3b", MOE_SHAPES[1])):
        cfg = get_model(model)
        assert (cfg.moe.num_routed_experts, cfg.moe.top_k, cfg.hidden_size, cfg.moe.expert_intermediate_size) == (E, k, d, I)
        for T in (1, 64):
            case = next(c for c in grid if c.shape["E"] == E and c.shape["T"] == T)
            ops = [o for o in phase_ops(cfg, h200m, Workload(batch=T, prompt_len=512, gen_len=1), "decode", float(T), 512.0) if o.name in MOE_EXPERT_OPS]
            assert len(ops) == 4
            assert case.flops == pytest.approx(sum(float(o.flops) for o in ops), rel=1e-12)
            assert case.bytes == pytest.approx(sum(float(o.bytes) for o in ops), rel=1e-12)

    # a calibration with rows timed by a per-shape law: the fit reproduces it
    doc = json.loads(Path(calibration_for(h200m).path).read_text())
    law = lambda c: 2e-5 + c.bytes / 3.0e12 + c.flops / (2.0e14 if c.shape["E"] == 128 else 5.0e14)  # noqa: E731
    doc["rows"] = [r for r in doc["rows"] if r["op"] != "moe_grouped"] + [
        {"op": c.op, "shape": c.shape, "flops": c.flops, "bytes": c.bytes, "t_graph": law(c), "t_eager": law(c) + 3e-5} for c in grid]
    models = fit_models(parse_calibration(doc, "synthetic.json"))
    cfg = get_model("qwen3-30b-a3b")
    for T in (16, 4096):  # decode and prefill token counts, both measured shapes of the grid
        case = next(c for c in grid if c.shape["E"] == 128 and c.shape["T"] == T)
        phase, B, N = ("decode", float(T), 512.0) if T <= 256 else ("prefill", 1.0, float(T))
        wl = Workload(batch=int(B), prompt_len=int(N), gen_len=1)
        rows = {r.name: r for r in step_rows(cfg, h200m, wl, phase, B, N, models, get_engine("torch"))}
        assert not set(MOE_EXPERT_OPS) & set(rows) and rows["moe.experts"].kernels == MOE_TORCH_KERNELS
        assert float(rows["moe.experts"].time_s) == pytest.approx(cfg.num_layers * law(case), rel=0.03)
        fused = {r.name for r in step_rows(cfg, h200m, wl, phase, B, N, models, get_engine("fused"))}
        assert set(MOE_EXPERT_OPS) <= fused and "moe.experts" not in fused


def test_the_shipped_torch_moe_rows_are_run_2s_bench_rows_and_the_torch_engine_times_by_them(h200m):
    """The shipped calibration predates calibrate's own ``moe_grouped`` rows; its 10 come from run 2's
    bench rows of the same torch path: each is a torch ``moe``
    row's median plus the routing's kernels at the launch floor. A Qwen3-30B-A3B decode step at
    batch 1 then spends 48 x that row on its experts, where the GEMM form gave about a third."""
    from kernels import moe_torch
    from rooflinecli.achievable.profiles import get_engine
    from rooflinecli.achievable.step import MOE_EXPERT_OPS, step_rows
    from rooflinecli.results import load_results

    cal = calibration_for(h200m)
    floor = next(r.t_graph_s for r in cal.rows if r.op == "launch_floor")
    bench = {(r.params["T"], r.params["E"]): r for r in load_results(ROOT / "reports" / "h200-2026-11-30-run2" / "results.json").rows
             if r.op == "moe" and r.impl == "torch"}
    rows = cal.of("moe_grouped")
    assert len(rows) == 10 and {(r.shape["T"], r.shape["E"]) for r in rows} == set(bench)
    for r in rows:
        assert r.t_graph_s == pytest.approx(bench[(r.shape["T"], r.shape["E"])].p50_s + moe_torch.ROUTE_KERNELS * floor, rel=1e-12)
    cfg = get_model("qwen3-30b-a3b")
    wl = Workload(batch=1, prompt_len=512, gen_len=1)
    got = {r.name: r for r in step_rows(cfg, h200m, wl, "decode", 1.0, 512.0, models_for(h200m), get_engine("torch"))}
    assert not set(MOE_EXPERT_OPS) & set(got)
    row = next(r for r in rows if r.shape["T"] == 1 and r.shape["E"] == 128)
    assert float(got["moe.experts"].time_s) == pytest.approx(48 * row.t_graph_s, rel=0.05)
    gemm_form = {r.name: r for r in step_rows(cfg, h200m, wl, "decode", 1.0, 512.0, models_for(h200m), get_engine("fused"))}
    assert float(got["moe.experts"].time_s) > 2.5 * sum(float(gemm_form[n].time_s) for n in MOE_EXPERT_OPS if n in gemm_form)


def test_moe_analysis_warns_where_its_experts_are_not_calibrated():
    from typer.testing import CliRunner

    from rooflinecli.cli import app

    # the torch engine's experts are calibrated (moe_grouped rows): no warning; the fused engine's
    # GEMM form at prefill sizes is optimistic, and says so
    torch_prefill = CliRunner().invoke(app, ["analyze", "--model", "qwen3-30b-a3b", "--hw", "h200-measured", "--prompt", "4096", "--no-ops"])
    assert torch_prefill.exit_code == 0 and "routed experts" not in torch_prefill.output
    prefill = CliRunner().invoke(app, ["analyze", "--model", "qwen3-30b-a3b", "--hw", "h200-measured", "--prompt", "4096", "--engine", "fused", "--no-ops"])
    assert prefill.exit_code == 0 and "MoE prefill is optimistic" in prefill.output
    fused_decode = CliRunner().invoke(app, ["analyze", "--model", "qwen3-30b-a3b", "--hw", "h200-measured", "--prompt", "16", "--engine", "fused", "--no-ops"])
    assert fused_decode.exit_code == 0 and "routed experts" not in fused_decode.output  # 8 tokens per expert: the fit holds
    dense = CliRunner().invoke(app, ["analyze", "--model", "llama-3-8b", "--hw", "h200-measured", "--prompt", "4096", "--no-ops"])
    assert "routed experts" not in dense.output
