"""Invariants of the analytical model over random valid configs and workloads (hypothesis), and
the published anchors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooflinecli.analysis import (
    Workload,
    kv_cache_bytes_per_gpu,
    phase_times,
    weights_bytes_per_gpu,
    with_attention_variant,
)
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model
from rooflinecli.models import MLAConfig, MoEConfig
from rooflinecli.params import total_params
from rooflinecli.predict import analyze, phase_grid

SPEC = get_spec("h100-sxm")
BASE = get_model("llama-3-8b")
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def configs(draw):
    """Small random models: GQA/MQA/MHA or MLA, dense or MoE, optional sliding window."""
    L = draw(st.integers(1, 6))
    H = draw(st.sampled_from([4, 8, 16]))
    D = draw(st.sampled_from([32, 64, 128]))
    d = H * D
    kv = draw(st.sampled_from([h for h in (1, 2, 4, 8, 16) if H % h == 0]))
    cfg = BASE.with_(
        name="random",
        num_layers=L,
        hidden_size=d,
        num_heads=H,
        num_kv_heads=kv,
        head_dim=D,
        intermediate_size=draw(st.integers(1, 8)) * 256,
        vocab_size=draw(st.integers(1000, 50000)),
        gated_mlp=draw(st.booleans()),
        max_position_embeddings=1 << 20,
    )
    if draw(st.booleans()):
        W = draw(st.integers(16, 4096))
        cfg = cfg.with_(sliding_window=W, sliding_window_layers=tuple(range(0, L, draw(st.integers(1, 2)))))
    if draw(st.integers(0, 3)) == 0:
        cfg = cfg.with_(mla=MLAConfig(draw(st.sampled_from([None, 256])), 4 * D, D, D // 2, D), num_kv_heads=H, sliding_window=None, sliding_window_layers=())
    if draw(st.booleans()):
        E = draw(st.sampled_from([8, 16, 64]))
        cfg = cfg.with_(
            moe=MoEConfig(
                num_routed_experts=E,
                top_k=draw(st.integers(1, 4)),
                expert_intermediate_size=draw(st.integers(1, 4)) * 128,
                num_shared_experts=draw(st.integers(0, 2)),
                shared_expert_intermediate_size=256,
                dense_layers=tuple(range(draw(st.integers(0, L)))),
            )
        )
    return cfg


@st.composite
def workloads(draw, cfg):
    tps = [t for t in (1, 2, 4, 8) if cfg.num_heads % t == 0 and (cfg.mla is not None or cfg.num_kv_heads % t == 0 or t % cfg.num_kv_heads == 0)]
    tp = draw(st.sampled_from(tps))
    ep = 1
    if cfg.moe is not None and draw(st.booleans()):
        ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if cfg.moe.num_routed_experts % e == 0 and (e % tp == 0 or tp % e == 0)]))
    return Workload(
        batch=draw(st.integers(1, 512)),
        prompt_len=draw(st.integers(1, 8192)),
        gen_len=draw(st.integers(1, 64)),
        weight_dtype=draw(st.sampled_from(["bf16", "fp8", "int8", "int4"])),
        kv_bits=draw(st.sampled_from([None, 4.0, 8.0, 3.5])),
        tp=tp,
        ep=ep,
        expert_skew=draw(st.sampled_from([1.0, 2.0])) if cfg.moe is not None else 1.0,  # skew needs experts
        launch_overhead_s=draw(st.sampled_from([0.0, 3e-6])),
        efficiency=draw(st.sampled_from([{}, {"gemm": 0.8, "attention": 0.6}])),
        mla_decode=draw(st.sampled_from(["absorbed", "naive"])),
    )


@st.composite
def cases(draw):
    cfg = draw(configs())
    return cfg, draw(workloads(cfg))


@FAST
@given(cases())
def test_every_op_time_at_least_its_compute_and_memory_time(case):
    cfg, wl = case
    for phase in ("prefill", "decode"):
        for t in phase_times(cfg, SPEC, wl, phase, float(wl.batch), float(wl.prompt_len)):
            assert t.time_s >= t.compute_time_s and t.time_s >= t.memory_time_s, t.name
            assert t.flops >= 0 and t.bytes >= 0 and t.comm_time_s >= 0


@FAST
@given(cases())
def test_decode_never_below_weight_bytes_over_bandwidth(case):
    cfg, wl = case
    g = phase_grid(cfg, SPEC, wl, "decode", np.array([1.0, wl.batch]), np.array([1.0, wl.prompt_len]))
    assert np.all(g["time_s"] >= g["weights_bytes"] / SPEC.memory_bandwidth_bytes_per_s * (1 - 1e-12))
    # efficiencies are <= 1, so no op moves its bytes faster than the datasheet bandwidth
    assert np.all(g["time_s"] >= g["bytes"] / SPEC.memory_bandwidth_bytes_per_s * (1 - 1e-12))


@FAST
@given(cases())
def test_grid_row_equals_single_analyze(case):
    cfg, wl = case
    a = analyze(cfg, SPEC, wl)
    batch = np.array([[1.0], [float(wl.batch)], [7.0]])
    pre = phase_grid(cfg, SPEC, wl, "prefill", batch, np.array([[3.0, float(wl.prompt_len)]]))
    dec = phase_grid(cfg, SPEC, wl, "decode", batch, np.array([[3.0, float(wl.prompt_len)]]))
    assert math.isclose(pre["time_s"][1, 1], a.ttft_s, rel_tol=1e-9)
    assert math.isclose(pre["flops"][1, 1], a.prefill.totals["flops"], rel_tol=1e-9)
    assert math.isclose(pre["bytes"][1, 1], a.prefill.totals["bytes"], rel_tol=1e-9)
    assert math.isclose(dec["time_s"][1, 1], a.tpot_first_s, rel_tol=1e-9)
    # the last generated token's step is the grid's decode at S+G-1
    last = phase_grid(cfg, SPEC, wl, "decode", float(wl.batch), float(wl.prompt_len + wl.gen_len - 1))
    assert math.isclose(float(last["time_s"]), a.tpot_last_s, rel_tol=1e-9)
    assert a.tpot_first_s * (1 - 1e-12) <= a.tpot_s <= a.tpot_last_s * (1 + 1e-12)
    assert math.isclose(a.e2e_latency_s, a.ttft_s + wl.gen_len * a.tpot_s, rel_tol=1e-9)


@FAST
@given(configs(), st.integers(1, 100_000), st.integers(1, 64))
def test_kv_linear_in_context_and_batch_without_windows(cfg, N, B):
    cfg = cfg.with_(sliding_window=None, sliding_window_layers=())
    wl = Workload(batch=B, prompt_len=N, gen_len=1)
    one = kv_cache_bytes_per_gpu(cfg, wl, N, B)
    assert math.isclose(kv_cache_bytes_per_gpu(cfg, wl, 2 * N, B), 2 * one, rel_tol=1e-12)
    assert math.isclose(kv_cache_bytes_per_gpu(cfg, wl, N, 3 * B), 3 * one, rel_tol=1e-12)


@FAST
@given(configs(), st.integers(1, 64), st.integers(1, 32768))
def test_mqa_le_gqa_le_mha_bytes(cfg, B, N):
    cfg = cfg.with_(mla=None, num_kv_heads=cfg.num_heads)
    wl = Workload(batch=B, prompt_len=N, gen_len=1)
    byts = []
    for kind, knobs in (("mqa", {}), ("gqa", {"kv_heads": max(1, cfg.num_heads // 2)}), ("mha", {})):
        v = with_attention_variant(cfg, kind, **knobs)
        g = phase_grid(v, SPEC, wl, "decode", float(B), float(N))
        byts.append((float(g["bytes"]), float(g["kv_cache_bytes_per_gpu"])))
    assert byts[0][0] <= byts[1][0] <= byts[2][0]
    assert byts[0][1] <= byts[1][1] <= byts[2][1]


@FAST
@given(configs())
def test_weights_in_memory_equal_parameter_count_at_bf16(cfg):
    """The memory model walks the same inventory as the parameter count."""
    assert math.isclose(weights_bytes_per_gpu(cfg, Workload(1, 1, 1)), 2 * total_params(cfg), rel_tol=1e-12)


def test_more_batch_touches_more_experts():
    cfg = get_model("mixtral-8x7b")
    g = phase_grid(cfg, SPEC, Workload(1, 1, 1), "decode", np.array([1.0, 2.0, 8.0, 64.0]), 512.0)
    w = g["weights_bytes"]
    assert np.all(np.diff(w) > 0)


# ------------------------------------------------------------------------------------------------
# Published anchors
# ------------------------------------------------------------------------------------------------


def test_anchor_llama3_70b_decode_tpot_is_weights_over_bandwidth():
    """Llama-3-70B bf16, batch 1 on H100 SXM: decode is weight streaming, TPOT within 5% of
    (all weight bytes) / HBM bandwidth = 141 GB / 3.35 TB/s = 42 ms."""
    cfg = get_model("llama-3-70b")
    a = analyze(cfg, SPEC, Workload(batch=1, prompt_len=1024, gen_len=256))
    ref = 2 * total_params(cfg) / SPEC.memory_bandwidth_bytes_per_s
    assert 0.040 < ref < 0.044
    assert abs(a.tpot_s - ref) / ref < 0.05
    assert a.decode.bound == "memory"


def test_anchor_h100_ridge_point():
    a = analyze(get_model("llama-3-8b"), SPEC, Workload(1, 128, 1))
    assert abs(a.ridge_point_flop_per_byte - 295) / 295 < 0.01
    # the decode matmuls turn compute-bound a little above the ridge (activation bytes)
    assert 295 <= a.decode_gemm_compute_bound_batch <= 400


def test_efficiency_and_launch_overhead_slow_things_down():
    cfg = get_model("llama-3-8b")
    base = analyze(cfg, SPEC, Workload(1, 512, 8))
    slow = analyze(cfg, SPEC, Workload(1, 512, 8, efficiency={"gemm": 0.5}))
    over = analyze(cfg, SPEC, Workload(1, 512, 8, launch_overhead_s=5e-6))
    assert slow.tpot_s > 1.5 * base.tpot_s
    n_kernels = sum(t.op.layers * t.op.kernels for t in phase_times(cfg, SPEC, Workload(1, 512, 8), "decode", 1.0, 512.0))
    assert math.isclose(over.tpot_s - base.tpot_s, n_kernels * 5e-6, rel_tol=1e-9)


def test_memory_limits():
    cfg = get_model("llama-3-8b")
    a = analyze(cfg, SPEC, Workload(batch=8, prompt_len=4096, gen_len=4096))
    m = a.memory
    assert m["fits"] and m["max_batch_at_context"] >= 8
    # one more sequence than the largest batch does not fit
    from rooflinecli.analysis import memory_totals

    nb = m["max_batch_at_context"]
    assert memory_totals(cfg, SPEC, a.workload, 4096, 8192, nb)["fits"]
    assert not memory_totals(cfg, SPEC, a.workload, 4096, 8192, nb + 1)["fits"]
    nc = m["max_context_at_batch"]
    assert memory_totals(cfg, SPEC, a.workload, nc, nc, 8)["fits"] and not memory_totals(cfg, SPEC, a.workload, nc + 1, nc + 1, 8)["fits"]


def test_cost_per_million_tokens():
    a = analyze(get_model("llama-3-8b"), SPEC, Workload(batch=16, prompt_len=512, gen_len=128, price_per_gpu_hour=3.0))
    assert math.isclose(a.cost_per_million_output_tokens_usd, 3.0 / 3600 * a.e2e_latency_s / (16 * 128) * 1e6, rel_tol=1e-12)


@FAST
@given(E=st.integers(2, 512), k_frac=st.floats(0.0, 1.0), skew=st.floats(1.0, 64.0), T=st.lists(st.integers(1, 1 << 20), min_size=2, max_size=6))
def test_routing_skew_invariants(E, k_frac, skew, T):
    """For any E, k <= E and skew >= 1: the shares sum to k, the hottest over the mean is the skew
    (at most E / k), every expert keeps a share (short of underflow near E / k); the experts touched are k for one token, grow with
    T, never pass uniform routing's nor E."""
    from rooflinecli import formulas

    k = max(1, min(E, int(round(k_frac * E))))
    q = formulas.routing_shares(E, k, skew)
    assert q.sum() == pytest.approx(k, rel=1e-9) and (q >= 0).all() and (q <= 1.0).all()
    # every expert keeps a share; near skew = E / k (all tokens on the same k experts) the coldest
    # shares fall below the smallest double (E = 22, k = 1, skew 22: the last is 1e-320, then 0)
    assert (q > 0).all() or skew > 0.5 * E / k
    assert q.max() * E / k == pytest.approx(min(skew, E / k), rel=1e-6)
    T = np.array(sorted(set(T)), dtype=float)
    touched = formulas.expected_experts_touched(E, k, T, skew)
    uniform = formulas.expected_experts_touched(E, k, T)
    assert formulas.expected_experts_touched(E, k, np.array([1.0]), skew)[0] == pytest.approx(k, rel=1e-9)
    assert (np.diff(touched) >= -1e-9).all() and (touched <= uniform + 1e-6).all() and (touched <= E + 1e-9).all()
