"""The achievable model against whole-model runs it never saw: the H200 shakedown run's torch
decode steps (one CUDA graph each) and eager prefills of llama-3-8b and a 34-layer llama-3-70b,
predicted from that run's calibration microbenchmarks alone (no parameter comes from e2e.json).

The target is median |error| <= 5% and p90 <= 10%. The shakedown's partial calibration
(175 of 528 shapes: no gate_up, lm_head or 70b GEMM shapes; no decode attention past batch 8 at
head dim 128) reaches median 2.7%, p90 8.3% over all 29 torch points (decode 2.7% / 7.8%,
prefill 2.9% / 12.7%). What is left is one-sided: llama-3-8b decode runs 5-11% slower than the
sum of its calibrated kernels below 8k context (see docs/analysis.md, "Achievable mode")."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rooflinecli.predict import predict_step_breakdown, predict_step_s
from rooflinecli.analysis import Workload
from rooflinecli.hardware import get_spec, load_spec_file
from rooflinecli.model_registry import get_model

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "tests" / "fixtures" / "h200-2026-11-30-shakedown"


def _points():
    d = json.loads((RUN / "e2e.json").read_text())
    for name, entry in d["extra"]["end_to_end_full"]["models"].items():
        cfg = replace(get_model(entry["model_ref"]), **entry["config"])
        for p in entry["points"]:
            if p["engine"] == "torch":
                yield name, cfg, p


def _errors(spec) -> list[tuple[str, str, int, int, float]]:
    out = []
    for name, cfg, p in _points():
        B, N = int(p["batch"]), int(p["context"])
        t = predict_step_s(cfg, spec, Workload(batch=B, prompt_len=N, gen_len=1), p["phase"], B, N, mode="achievable", engine="torch")
        out.append((name, p["phase"], B, N, t / p["measured_s"] - 1.0))
    return out


def _stats(errs) -> tuple[float, float]:
    a = np.abs(np.asarray(errs, dtype=float))
    return float(np.median(a)), float(np.percentile(a, 90))


@pytest.fixture(scope="module")
def shakedown_errors():
    return _errors(load_spec_file(RUN / "measured_spec.toml"))


def test_fixture_is_the_whole_run(shakedown_errors):
    phases = [e[1] for e in shakedown_errors]
    assert phases.count("decode") == 23 and phases.count("prefill") == 6
    assert {e[0] for e in shakedown_errors} == {"llama-3-8b", "llama-3-70b"}


def test_shakedown_e2e_from_its_own_calibration(shakedown_errors):
    """The issue's limits over all points and over the decode points (before the structural work:
    median 5.4%, p90 10.3% over all points; decode 5.4% / 10.2%)."""
    for name, phase, B, N, e in shakedown_errors:
        print(f"{name:12s} {phase:7s} B{B:<3d} N{N:<5d} {e:+.1%}")
    med, p90 = _stats([e[-1] for e in shakedown_errors])
    dmed, dp90 = _stats([e[-1] for e in shakedown_errors if e[1] == "decode"])
    print(f"all: median {med:.1%} p90 {p90:.1%}; decode: median {dmed:.1%} p90 {dp90:.1%}")
    assert med <= 0.05 and p90 <= 0.10
    assert dmed <= 0.05 and dp90 <= 0.10
    # every decode point within 11.5% (the worst: -10.7%, 8b batch 8 at 512)
    assert max(abs(e[-1]) for e in shakedown_errors if e[1] == "decode") <= 0.115


def test_decode_error_is_one_sided_and_prefill_is_not_biased(shakedown_errors):
    """What is left is a systematic miss, not noise: llama-3-8b decode steps run slower than the
    sum of their calibrated kernels (each timed alone in its own graph) except at 8k context, where
    decode attention dominates; eager prefill errs both ways."""
    dec8 = [e[-1] for e in shakedown_errors if e[1] == "decode" and e[0] == "llama-3-8b" and e[3] < 8192]
    # (-3.8% at the closest, batch 64 x 2048, since no row's work may run faster than the roof)
    assert len(dec8) == 8 and all(-0.115 < e < -0.035 for e in dec8)
    pre = [e[-1] for e in shakedown_errors if e[1] == "prefill"]
    assert min(pre) < 0.0 < max(pre)


def test_the_older_calibration_predicts_the_same_run_within_loose_bounds():
    """The shipped calibration (another H200 run's, every projection shape measured) on the
    same points: another run's elementwise and attention rows, so looser."""
    errs = _errors(get_spec("h200-measured"))
    med, p90 = _stats([e[-1] for e in errs])
    print(f"older calibration: median {med:.1%} p90 {p90:.1%}")
    assert med <= 0.075 and p90 <= 0.15


def test_decode_step_launches_what_e2e_full_runs():
    """The torch profile's kernels per layer match ``bench.e2e_full.decode_step``: F.rms_norm x2
    (one kernel each), 4 cuBLAS GEMMs, RoPE (mul, neg, cat, mul, add) on q and on k, K and V
    copied into the cache, one SDPA call, two in-place residual adds, silu then mul."""
    spec = load_spec_file(RUN / "measured_spec.toml")
    cfg = get_model("llama-3-8b")
    rows = {r["name"]: r for r in predict_step_breakdown(cfg, spec, Workload(batch=8, prompt_len=2048, gen_len=1), "decode", 8, 2048, mode="achievable")}
    per_layer = {n: r["kernels"] for n, r in rows.items() if r["layers"] == cfg.num_layers}
    assert per_layer == {"norms": 2, "attn.qkv": 1, "attn.o": 1, "mlp.gate_up": 1, "mlp.down": 1, "attn.rope": 10,
                         "attn.kv_write": 2, "attn.core": 1, "residual_adds": 2, "mlp.act": 2}
    assert {n: r["kernels"] for n, r in rows.items() if r["layers"] == 1} == {"embedding": 1, "final_norm": 1, "lm_head": 1}
    # the norms are timed by their own width's rows: 70b's 8192-wide norm costs more than 8b's
    big = {r["name"]: r for r in predict_step_breakdown(get_model("llama-3-70b"), spec, Workload(batch=8, prompt_len=2048, gen_len=1), "decode", 8, 2048,
                                                         mode="achievable")}
    assert big["final_norm"]["time_s"] > 1.5 * rows["final_norm"]["time_s"]


# ---- the full run (2026-11-30, 22:10 UTC): the shipped calibration, its own whole-model runs -------

RUN2 = ROOT / "tests" / "fixtures" / "h200-2026-11-30-run2" / "e2e.json"


def test_shipped_h200_calibration_predicts_the_full_runs_whole_models():
    """hardware_specs/measured/h200.toml is that run's calibration (564 microbenchmark shapes, and
    10 torch MoE rows from its bench that no dense model uses);
    its e2e.json (44 torch points: llama-3-8b, qwen2.5-7b, 34-layer llama-3-70b; decode in one
    CUDA graph per step over batch x context, eager prefill) was never used to fit it. The issue's
    limits: median |error| <= 5%, p90 <= 10% (measured: 5.0% / 7.1%; decode alone 5.1% / 7.1%)."""
    spec = get_spec("h200-measured")
    d = json.loads(RUN2.read_text())
    errors = []
    for entry in d["extra"]["end_to_end_full"]["models"].values():
        cfg = replace(get_model(entry["model_ref"]), **entry["config"])
        for p in entry["points"]:
            if p["engine"] != "torch":
                continue
            wl = Workload(batch=p["batch"], prompt_len=p["context"], gen_len=1)
            pred = predict_step_s(cfg, spec, wl, p["phase"], p["batch"], p["context"], mode="achievable")
            roof = predict_step_s(cfg, spec, wl, p["phase"], p["batch"], p["context"], mode="datasheet")
            assert p["measured_s"] > roof * 0.97, (entry["model_ref"], p)  # the roof stays a bound
            errors.append(pred / p["measured_s"] - 1)
    a = np.abs(errors)
    assert len(a) == 44
    assert np.median(a) <= 0.05 and np.percentile(a, 90) <= 0.10, (np.median(a), np.percentile(a, 90))
