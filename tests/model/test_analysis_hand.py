"""The analytical model against numbers derived by hand, with the arithmetic written out:
Llama-3-8B (dense GQA), DeepSeek-V3 (MLA + MoE) and Mistral-7B (sliding window), per phase, on
the H100 SXM datasheet spec (bf16 989.5 TFLOP/s, HBM 3.35 TB/s)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rooflinecli import formulas
from rooflinecli.errors import RooflineError
from rooflinecli.analysis import Workload, kv_crossover_context, phase_times
from rooflinecli.predict import analyze
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model

PEAK = 989.5e12  # h100-sxm.toml peak_dense_tflops.bf16
BW = 3350e9  # h100-sxm.toml memory.bandwidth_gb_per_s


def ops_by_name(cfg, wl, phase, batch, context):
    return {t.name: t for t in phase_times(cfg, get_spec("h100-sxm"), wl, phase, float(batch), float(context))}


def close(a, b, rel=1e-9):
    return math.isclose(float(a), float(b), rel_tol=rel)


def test_spec_figures_used_here():
    spec = get_spec("h100-sxm")
    assert spec.peak_flops_per_s("bf16") == PEAK and spec.memory_bandwidth_bytes_per_s == BW


# ------------------------------------------------------------------------------------------------
# Llama-3-8B: L=32, d=4096, H=32, H_kv=8, D=128, I=14336, V=128256, untied, bf16
# ------------------------------------------------------------------------------------------------

L, d, H, HKV, D, I, V = 32, 4096, 32, 8, 128, 14336, 128256
ATTN_PARAMS = d * H * D + 2 * d * HKV * D + H * D * d  # q + k + v + o = 41_943_040
MLP_PARAMS = 3 * d * I  # gate + up + down = 176_160_768
NORM_PARAMS = L * 2 * d + d  # two RMSNorms per layer + final
LM_PARAMS = d * V


def test_llama3_8b_decode_by_hand():
    cfg = get_model("llama-3-8b")
    wl = Workload(batch=1, prompt_len=1024, gen_len=1)
    N = 1024
    ops = ops_by_name(cfg, wl, "decode", 1, N)
    assert ATTN_PARAMS == 41_943_040 and MLP_PARAMS == 176_160_768

    # q projection: 2*T*d_in*d_out FLOPs, 2 bytes per weight, read 4096 + write 4096 activations
    q = ops["attn.q"]
    assert close(q.flops, L * 2 * 1 * 4096 * 4096)
    assert close(q.weights_bytes, L * 2 * 4096 * 4096)
    assert close(q.activation_bytes, L * 2 * (4096 + 4096))

    # attention core at N=1024: 4*B*H*N*D FLOPs + 5 softmax FLOPs per score; reads K and V of
    # 1024 tokens: 2*H_kv*D*N*2 bytes per layer; writes one token's K and V
    core = ops["attn.core"]
    assert close(core.flops, L * (4 * 32 * 1024 * 128 + 5 * 32 * 1024))
    assert close(core.kv_read_bytes, L * 2 * 8 * 128 * 1024 * 2)  # 134_217_728
    assert close(core.kv_write_bytes, L * 2 * 8 * 128 * 2)
    # q read + o write (32 heads x 128 x 2 tensors x 2 B) + fresh k, v (8 heads)
    assert close(core.activation_bytes, L * (32 * 256 * 2 + 8 * 256 * 2))

    # every byte of a batch-1 decode step, op by op, per layer:
    per_layer_act = (
        2 * (2 * 4096) * 2  # norms: read + write 2 x 4096
        + 2 * (4096 + 4096) * 2  # q, o
        + 2 * (4096 + 1024) * 2  # k, v
        + (32 * 256 + 8 * 256) * 2  # attention core q/o and fresh k/v
        + 3 * (4096 + 14336) * 2  # gate, up, down
        + 3 * 14336 * 2  # silu(gate)*up: read 2, write 1
    )
    act = L * per_layer_act + 4096 * 2 + 2 * 4096 * 2 + (4096 + V) * 2  # + embedding write, final norm, LM head
    weights = 2 * (L * (ATTN_PARAMS + MLP_PARAMS) + NORM_PARAMS + LM_PARAMS + 4096)  # + one embedding row
    kv = L * (2 * 8 * 128 * 1024 * 2 + 2 * 8 * 128 * 2)
    total_bytes = weights + act + kv
    tot = {k: sum(float(getattr(t, k)) for t in ops.values()) for k in ("weights_bytes", "activation_bytes", "bytes", "time_s")}
    assert close(tot["weights_bytes"], weights)
    assert close(tot["activation_bytes"], act)
    assert close(tot["bytes"], total_bytes)
    # batch 1: every op is below the ridge (AI < 295), so the step is bytes / BW
    assert all(t.bound == "memory" for t in ops.values())
    assert close(tot["time_s"], total_bytes / BW)
    assert 4.5e-3 < total_bytes / BW < 4.6e-3  # about 15.2 GB / 3.35 TB/s


def test_llama3_8b_prefill_by_hand():
    cfg = get_model("llama-3-8b")
    S = 1024
    wl = Workload(batch=1, prompt_len=S, gen_len=1)
    ops = ops_by_name(cfg, wl, "prefill", 1, S)
    # q projection over 1024 tokens: 2*1024*4096*4096 = 34.36 GFLOP per layer; AI ~683 > 295
    q = ops["attn.q"]
    assert close(q.flops, L * 2 * 1024 * 4096 * 4096)
    assert close(q.compute_time_s, L * 2 * 1024 * 4096 * 4096 / PEAK)
    assert close(q.memory_time_s, L * (2 * 4096 * 4096 + 2 * 1024 * 8192) / BW)
    assert q.bound == "compute" and close(q.time_s, q.compute_time_s)
    # causal attention core: S(S+1)/2 = 524_800 pairs, 2*H*pairs*(D+D) FLOPs + 5/score softmax
    pairs = 1024 * 1025 / 2
    core = ops["attn.core"]
    assert close(core.flops, L * (2 * 32 * pairs * 256 + 5 * 32 * pairs))
    assert close(core.kv_write_bytes, L * 2 * 8 * 128 * 1024 * 2)  # the prompt's K and V cached
    assert close(core.activation_bytes, L * (32 * 1024 * 256 * 2 + 8 * 1024 * 256 * 2))
    assert float(core.kv_read_bytes) == 0.0
    # LM head: only the last token of each sequence gets logits
    assert close(ops["lm_head"].flops, 2 * 1 * 4096 * V)
    # total FLOPs, written out
    flops = (
        L * (2 * S * (ATTN_PARAMS + MLP_PARAMS))  # projections and MLP
        + L * (2 * 32 * pairs * 256 + 5 * 32 * pairs)  # attention core
        + L * (4 * S * 2 * 4096)  # two RMSNorms, 4 FLOPs per element
        + L * (5 * S * 14336)  # silu(gate)*up
        + 4 * 4096 + 2 * 4096 * V  # final norm + LM head on the last token
    )
    a = analyze(cfg, get_spec("h100-sxm"), wl)
    assert close(a.prefill.totals["flops"], flops)
    assert close(a.ttft_s, sum(float(t.time_s) for t in ops.values()))
    # compute-bound overall: TTFT sits just above FLOPs / peak
    assert a.prefill.bound == "compute"
    assert flops / PEAK <= a.ttft_s < 1.2 * flops / PEAK


def test_llama3_8b_kv_crossover_matches_formula():
    """No windows, no MLA: the numeric crossover equals formulas.kv_crossover_context with the
    decode step's weight bytes: N* = W / (2*L*H_kv*D*b*B)."""
    cfg, spec = get_model("llama-3-8b"), get_spec("h100-sxm")
    for B in (1, 8):
        wl = Workload(batch=B, prompt_len=1024, gen_len=1)
        ops = ops_by_name(cfg, wl, "decode", B, 1024)
        weights = sum(float(t.weights_bytes) for t in ops.values())
        n_star = formulas.kv_crossover_context(weights, 32, 8, 128, 2.0, B)
        assert math.isclose(kv_crossover_context(cfg, spec, wl), n_star, rel_tol=1e-6)
    assert 100_000 < formulas.kv_crossover_context(2 * (L * (ATTN_PARAMS + MLP_PARAMS) + NORM_PARAMS + LM_PARAMS + 4096), 32, 8, 128, 2.0, 1) < 120_000


# ------------------------------------------------------------------------------------------------
# DeepSeek-V3: L=61 (3 dense + 58 MoE), d=7168, H=128, MLA kv_lora 512, rope 64, nope 128, v 128,
# q_lora 1536; 256 routed experts top-8 of width 2048, 1 shared expert; dense MLP 18432
# ------------------------------------------------------------------------------------------------


def test_deepseek_v3_decode_by_hand():
    cfg = get_model("deepseek-v3")
    wl = Workload(batch=1, prompt_len=1024, gen_len=1)  # absorbed MLA decode (the default)
    ops = ops_by_name(cfg, wl, "decode", 1, 1024)
    # absorbed core: scores over the latent (512 + 64 per head), PV over the latent (512)
    core = ops["attn.core"]
    assert close(core.flops, 61 * (2 * 128 * 1024 * (576 + 512) + 5 * 128 * 1024))
    # reads one latent + RoPE key per cached token and layer: (512 + 64) * 1024 * 2 bytes
    assert close(core.kv_read_bytes, 61 * 576 * 1024 * 2)
    # absorbed projections: W_UK (128 heads x 128 -> 512) and W_UV (128 heads x 512 -> 128)
    assert close(ops["attn.kv_b.uk"].weights_bytes, 61 * 128 * 512 * 128 * 2)
    assert close(ops["attn.kv_b.uv"].flops, 61 * 128 * 2 * 512 * 128)
    assert "attn.kv_b" not in ops
    # one token touches exactly k = 8 of 256 experts: 256*(1-(1-8/256)^1) = 8
    g = ops["moe.expert_gate"]
    assert close(g.weights_bytes, 58 * 8 * 7168 * 2048 * 2)
    assert close(g.flops, 58 * 8 * 2 * 7168 * 2048)
    # shared expert and dense layers
    assert close(ops["moe.shared_down"].weights_bytes, 58 * 2048 * 7168 * 2)
    assert close(ops["mlp.up"].weights_bytes, 3 * 7168 * 18432 * 2)
    # router: 7168 -> 256 with a 256-entry bias, kept 16-bit
    assert close(ops["moe.router"].weights_bytes, 58 * (7168 * 256 + 256) * 2)
    # MLA attention projections per layer: q_a 7168x1536, q_b 1536x(128*192), kv_a 7168x576, o (128*128)x7168
    proj = sum(float(ops[n].weights_bytes) for n in ("attn.q_a", "attn.q_b", "attn.kv_a", "attn.o", "attn.kv_b.uk", "attn.kv_b.uv"))
    assert close(proj, 61 * 2 * (7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168))


def test_deepseek_v3_naive_decode_reads_more():
    cfg, spec = get_model("deepseek-v3"), get_spec("h100-sxm")
    naive = ops_by_name(cfg, Workload(1, 1024, 1, mla_decode="naive"), "decode", 1, 1024)
    # naive: up-project 1024 cached latents per layer: 2*N*512*(128*(128+128)) FLOPs
    up = naive["attn.kv_b.naive"]
    assert close(up.flops, 61 * 2 * 1024 * 512 * 128 * 256)
    # then attend per head over materialized K_nope, V (16-bit) plus the shared RoPE key
    assert close(naive["attn.core"].kv_read_bytes, 61 * (128 * 1024 * 256 * 2 + 64 * 1024 * 2))
    a = analyze(cfg, spec, Workload(1, 1024, 4))
    assert a.decode_naive_mla is not None and a.decode_naive_mla.time_s > a.tpot_s


def test_deepseek_v3_prefill_by_hand():
    cfg = get_model("deepseek-v3")
    S = 512
    ops = ops_by_name(cfg, Workload(1, S, 1), "prefill", 1, S)
    pairs = 512 * 513 / 2  # causal: 131_328
    core = ops["attn.core"]
    # prefill runs the naive form: per head K = 128 nope + 64 rope, V = 128
    assert close(core.flops, 61 * (2 * 128 * pairs * (192 + 128) + 5 * 128 * pairs))
    assert close(core.kv_write_bytes, 61 * 576 * 512 * 2)  # latents cached
    assert close(ops["attn.kv_b"].flops, 61 * 2 * 512 * 512 * 128 * 256)
    # 512 tokens x top-8 over 256 experts: expected touched = 256*(1-(1-8/256)^512), all but ~0
    touched = 256 * (1 - (1 - 8 / 256) ** 512)
    assert 255.99 < touched <= 256
    g = ops["moe.expert_gate"]
    assert close(g.weights_bytes, 58 * touched * 7168 * 2048 * 2)
    assert close(g.flops, 58 * 2 * (8 * 512) * 7168 * 2048)


# ------------------------------------------------------------------------------------------------
# Mistral-7B: L=32, d=4096, H=32, H_kv=8, D=128, sliding window W=4096 on every layer
# ------------------------------------------------------------------------------------------------


def test_mistral_7b_window_decode_and_prefill():
    cfg, spec = get_model("mistral-7b"), get_spec("h100-sxm")
    wl = Workload(batch=2, prompt_len=8192, gen_len=1)
    dec = ops_by_name(cfg, wl, "decode", 2, 8192)
    core = dec["attn.core.window"]
    # at N = 8192 > W, each layer reads only the last 4096 tokens: 2*8*128*4096*2 B per sequence
    assert close(core.kv_read_bytes, 32 * 2 * 2 * 8 * 128 * 4096 * 2)
    assert close(core.flops, 32 * (4 * 2 * 32 * 4096 * 128 + 5 * 2 * 32 * 4096))
    # below the window nothing is capped
    short = ops_by_name(cfg, wl, "decode", 2, 1000)["attn.core.window"]
    assert close(short.kv_read_bytes, 32 * 2 * 2 * 8 * 128 * 1000 * 2)
    # prefill of 8192: each query sees min(i, W) keys: W*S - W*(W-1)/2 = 25_167_872 pairs
    pre = ops_by_name(cfg, wl, "prefill", 2, 8192)["attn.core.window"]
    pairs = 4096 * 8192 - 4096 * 4095 / 2
    assert pairs == 25_167_872
    assert close(pre.flops, 32 * (2 * 2 * 32 * pairs * 256 + 5 * 2 * 32 * pairs))
    assert close(pre.kv_write_bytes, 32 * 2 * 2 * 8 * 128 * 4096 * 2)  # rolling buffer keeps W
    # the KV cache stops growing at W, so KV reads never overtake weight reads
    assert kv_crossover_context(cfg, spec, wl) is None
    a = analyze(cfg, spec, Workload(batch=2, prompt_len=8192, gen_len=16))
    assert close(a.memory["kv_cache_bytes"], 32 * 2 * 2 * 8 * 128 * 4096 * 2)
    assert close(a.tpot_first_s, a.tpot_last_s)  # beyond W every step costs the same


def test_int4_weights_and_fp8_compute():
    """int4 weights with group-128 2-byte scales: 0.5 + 2/128 bytes per weight; fp8 compute uses
    the fp8 peak (1979 TFLOP/s) while activations stay 16-bit."""
    cfg, _spec = get_model("llama-3-8b"), get_spec("h100-sxm")
    ops = ops_by_name(cfg, Workload(1, 1024, 1, weight_dtype="int4"), "decode", 1, 1024)
    assert close(ops["attn.q"].weights_bytes, 32 * 4096 * 4096 * (0.5 + 2 / 128))
    assert close(ops["lm_head"].weights_bytes, 4096 * V * 2)  # LM head stays 16-bit
    pre = ops_by_name(cfg, Workload(1, 1024, 1, compute_dtype="fp8", weight_dtype="fp8"), "prefill", 1, 1024)
    assert close(pre["attn.q"].compute_time_s, 32 * 2 * 1024 * 4096 * 4096 / 1979e12)
    assert close(pre["attn.q"].weights_bytes, 32 * 4096 * 4096 * 1.0)


def test_tensor_parallel_split_and_allreduce():
    cfg, spec = get_model("llama-3-8b"), get_spec("h100-sxm")
    ops = ops_by_name(cfg, Workload(1, 1024, 1, tp=4), "decode", 1, 1024)
    assert close(ops["attn.q"].weights_bytes, 32 * 4096 * 1024 * 2)  # 32 heads / 4
    assert close(ops["attn.core"].kv_read_bytes, 32 * 2 * 2 * 128 * 1024 * 2)  # 8 KV heads / 4 = 2
    # two ring all-reduces per layer of n = T*d*2 bytes: each GPU sends 2*(p-1)/p * n at the link's
    # one-way bandwidth (the spec's 900 GB/s NVLink figure counts both directions: 450 GB/s each way)
    assert spec.gpu_link_bytes_per_s == 900e9
    sent = 2 * 3 / 4 * 4096 * 2
    assert close(ops["comm.tp_allreduce.attn"].comm_bytes, 32 * sent)
    assert close(ops["comm.tp_allreduce.attn"].comm_time_s, 32 * sent / 450e9)
    assert close(ops["comm.tp_allreduce.mlp"].comm_time_s, 32 * sent / 450e9)
    # tp 16 > 8 KV heads: each GPU keeps one KV head
    ops16 = ops_by_name(cfg, Workload(1, 1024, 1, tp=16), "decode", 1, 1024)
    assert close(ops16["attn.core"].kv_read_bytes, 32 * 2 * 1 * 128 * 1024 * 2)
    a = analyze(cfg, spec, Workload(1, 1024, 4, tp=16))
    assert any("replicated" in w for w in a.warnings)


@pytest.mark.parametrize("skew", [1.0, 4.0])
def test_expert_parallel_bytes(skew):
    cfg = get_model("deepseek-v3")
    B = 64
    ops = ops_by_name(cfg, Workload(B, 1024, 1, tp=8, ep=8, expert_skew=skew), "decode", B, 1024)
    touched = formulas.expected_experts_touched(256, 8, B, skew)
    # the step waits for the busiest GPU, which reads the weights of its 32 experts that the step
    # touches: the hottest expert and 31 of average share among the other 255
    q = formulas.routing_shares(256, 8, skew)
    here = (1 - (1 - q[0]) ** B) + 31 * (1 - (1 - q[1:].mean()) ** B)
    assert close(here, touched / 8) if skew == 1 else touched / 8 < here <= 32
    assert close(ops["moe.expert_up"].weights_bytes, 58 * here * 7168 * 2048 * 2)
    # the busiest GPU (skewed routing) computes and receives its share of the pairs: 32 experts per
    # GPU, the hottest at skew x the mean load, so 1 + about (skew - 1) / 32 of the mean GPU's
    hot = formulas.ep_hot_gpu_load(256, 8, 8, skew)
    assert hot == 1.0 if skew == 1 else 1.05 < hot < 1 + (skew - 1) / 32 + 0.02
    assert close(ops["moe.expert_up"].flops, 58 * 2 * (B * 8 * hot) * 7168 * 2048 / 8)
    # dispatch + combine: each GPU holds B/8 tokens x top-8 copies of d = 7168 at 2 bytes and sends
    # 7/8 of them, twice, at 450 GB/s one way
    a2a = 64 / 8 * 8 * 7168 * 2 * hot
    assert close(ops["comm.ep_all_to_all"].comm_bytes, 58 * 2 * 7 / 8 * a2a)
    assert close(ops["comm.ep_all_to_all"].comm_time_s, 58 * 2 * 7 / 8 * a2a / 450e9)
    if skew > 1:
        assert touched < formulas.expected_experts_touched(256, 8, B, 1.0)


def test_skew_under_expert_parallelism_never_speeds_decode_up():
    """Under EP the step waits for the busiest GPU: more skew gives it more pairs and it still reads
    all of its experts, so decode time and its expert bytes only grow with skew (they used to fall:
    the bytes were the mean GPU's, which a concentrated routing leaves idle)."""
    cfg, spec = get_model("qwen3-30b-a3b"), get_spec("h100-sxm")
    tpot = []
    all_16 = 48 * 16 * 2048 * 768 * 2  # the 16 experts a GPU holds, all 48 layers
    for skew in (1.0, 2.0, 4.0, 16.0):
        wl = Workload(64, 1024, 1, ep=8, expert_skew=skew)
        tpot.append(analyze(cfg, spec, wl).tpot_s)
        up = float(ops_by_name(cfg, wl, "decode", 64, 1024)["moe.expert_up"].weights_bytes)
        mean_gpu = float(formulas.expected_experts_touched(128, 8, 64, skew)) / 8 * 48 * 2048 * 768 * 2
        # 512 pairs: the busiest GPU reads (nearly) all 16 of its experts, however few the mean GPU does
        assert mean_gpu * (1 - 1e-12) <= up <= all_16 and up > 0.97 * all_16
    assert all(b >= a for a, b in zip(tpot, tpot[1:])) and tpot[-1] > tpot[0]


def test_attention_data_parallel_keeps_whole_sequences():
    """EP 8 over 8 GPUs, TP 1: attention is data-parallel over 8 groups, each holding whole
    sequences. One sequence lives on one GPU (its whole KV cache there), 12 sequences put 2 on the
    busiest; a batch never splits a sequence's cache over GPUs."""
    from rooflinecli.analysis import kv_cache_bytes_per_gpu

    cfg = get_model("qwen3-30b-a3b")
    one_seq = 2 * 48 * 4 * 128 * 4097 * 2  # 2 L H_kv D N bytes
    for batch, seqs in ((1, 1), (8, 1), (12, 2), (64, 8)):
        wl = Workload(batch, 4096, 1, ep=8)
        assert close(float(kv_cache_bytes_per_gpu(cfg, wl, 4097, batch)), seqs * one_seq)
        core = ops_by_name(cfg, wl, "decode", batch, 4096)["attn.core"]
        assert close(float(core.kv_read_bytes), seqs * 2 * 48 * 4 * 128 * 4096 * 2, rel=1e-2)  # summed over the layers


def test_compressed_attention_variant_by_hand():
    """DeepSeek-V4-style compressed attention on Llama-3-8B: ratio 4, top-512 entries, 128-token
    window. A decode query at N = 131072 reads min(ceil(N/4), 512) + min(N, 128) = 640 entries;
    the cache holds ceil(N/4) + 128 = 32896 entries per layer."""
    from rooflinecli.analysis import kv_cache_bytes_per_gpu, with_attention_variant

    cfg = with_attention_variant(get_model("llama-3-8b"), "compressed", ratio=4, top_k=512, window=128)
    N = 131072
    wl = Workload(1, N, 1)
    core = ops_by_name(cfg, wl, "decode", 1, N)["attn.core.compressed"]
    assert close(core.kv_read_bytes, 32 * 2 * 8 * 128 * 640 * 2)
    assert close(core.flops, 32 * (4 * 32 * 640 * 128 + 5 * 32 * 640))
    assert close(kv_cache_bytes_per_gpu(cfg, wl, N, 1), 32 * 2 * 8 * 128 * (N // 4 + 128) * 2)
    # prefill: query i scores min(512, i/4) compressed entries + min(i, 128) local ones;
    # the top-k cap binds after 4*512 = 2048 queries: 2048^2/8 + 512*(N - 2048) + (128*N - 128*127/2)
    pre = ops_by_name(cfg, wl, "prefill", 1, N)["attn.core.compressed"]
    pairs = 2048**2 / 8 + 512 * (N - 2048) + (128 * N - 128 * 127 / 2)
    assert close(pre.flops, 32 * (2 * 32 * pairs * 256 + 5 * 32 * pairs))


def test_attention_variants_keep_the_rest():
    from rooflinecli.analysis import with_attention_variant
    from rooflinecli.errors import RooflineError

    base = get_model("llama-3-8b")
    mla = with_attention_variant(base, "mla")
    assert mla.mla.kv_lora_rank == 4 * 128 and mla.num_layers == base.num_layers and mla.intermediate_size == base.intermediate_size
    assert with_attention_variant(base, "mqa").num_kv_heads == 1
    assert with_attention_variant(base, "mha").num_kv_heads == 32
    assert with_attention_variant(get_model("deepseek-v3"), "gqa", kv_heads=8).head_dim == 128
    with pytest.raises(RooflineError, match="must divide"):
        with_attention_variant(base, "gqa", kv_heads=5)
    with pytest.raises(RooflineError, match="unknown attention variant"):
        with_attention_variant(base, "linear")


def test_activation_workspace_by_hand_chunked_prefill():
    """Llama-3-8B workspace per prefill token: the residual stream (2d) plus the widest layer's input
    and output (gate, up and silu(gate)*up: 3 x 14336) = 8192 + 43008 elements of 2 bytes; plus fp32
    logits for each sequence's last token. Engines prefill in chunks (default 8192 tokens), so the
    per-token part stops growing at the chunk; --prefill-chunk 0 sizes it for the whole prefill."""
    from rooflinecli.analysis import activation_workspace_bytes_per_gpu, memory_totals

    cfg, spec = get_model("llama-3-8b"), get_spec("h100-sxm")
    per_token = (2 * d + 3 * I) * 2
    logits = 4 * V * 4  # 4 sequences
    chunked = Workload(4, 32768, 1)
    assert chunked.prefill_chunk_tokens == 8192
    assert close(activation_workspace_bytes_per_gpu(cfg, chunked, 32768, 4), 8192 * per_token + logits)
    # a short prefill is smaller than one chunk: all its tokens count
    assert close(activation_workspace_bytes_per_gpu(cfg, chunked, 1000, 4), 4000 * per_token + logits)
    whole = Workload(4, 32768, 1, prefill_chunk_tokens=None)
    assert close(activation_workspace_bytes_per_gpu(cfg, whole, 32768, 4), 4 * 32768 * per_token + logits)
    # memory_totals and analyze add it to weights and KV
    m = memory_totals(cfg, spec, chunked, 32768, 32769, 4)
    assert close(m["total_bytes_per_gpu"], m["weights_bytes_per_gpu"] + m["kv_cache_bytes_per_gpu"] + 8192 * per_token + logits)
    a = analyze(cfg, spec, Workload(4, 32768, 1, prefill_chunk_tokens=2048))
    assert close(a.memory["activation_workspace_bytes"], 2048 * per_token + logits)


def test_a_verification_pass_reads_weights_and_cache_once():
    """decode_tokens = q (a speculative verification pass): every layer and the LM head see q times
    the tokens (FLOPs x q), the weights and the KV cache are read once, q entries are written."""
    import numpy as np

    from rooflinecli.analysis import Workload
    from rooflinecli.analysis.ops import phase_ops
    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_model

    cfg, spec = get_model("llama-3-8b"), get_spec("h100-sxm")
    one = {o.name: o for o in phase_ops(cfg, spec, Workload(batch=4, prompt_len=2048, gen_len=1), "decode", 4.0, 2048.0)}
    five = {o.name: o for o in phase_ops(cfg, spec, Workload(batch=4, prompt_len=2048, gen_len=1, decode_tokens=5), "decode", 4.0, 2048.0)}
    assert one.keys() == five.keys()
    for name in ("attn.q", "mlp.down", "lm_head", "attn.core", "final_norm"):
        assert float(np.sum(five[name].flops)) == pytest.approx(5 * float(np.sum(one[name].flops)), rel=1e-12), name
    for name in ("attn.q", "mlp.down", "lm_head"):
        assert float(five[name].weights_bytes) == float(one[name].weights_bytes)
    assert float(five["attn.core"].kv_read_bytes) == float(one["attn.core"].kv_read_bytes)
    assert float(five["attn.core"].kv_write_bytes) == pytest.approx(5 * float(one["attn.core"].kv_write_bytes))
    with pytest.raises(Exception, match="decode tokens per sequence must be a whole number >= 1"):
        from rooflinecli.analysis.workload import validate_workload

        validate_workload(Workload(batch=1, prompt_len=1, gen_len=1, decode_tokens=0))


@pytest.mark.parametrize("E, k", [(8, 2), (64, 6), (128, 8), (256, 8)])
@pytest.mark.parametrize("skew", [1.0, 1.5, 2.0, 4.0])
def test_routing_skew_shares_and_experts_touched(E, k, skew):
    """``skew`` is the hottest expert's load over the mean; every expert keeps a share, so a skewed
    step touches at most as many experts as a uniform one, one token touches its k, and a large
    step touches all of them (the skew used to squeeze the tokens onto E/skew experts: DeepSeek-V3
    at batch 256 read half its experts at skew 2, and ran 1.9x faster than uniform)."""
    q = formulas.routing_shares(E, k, skew)
    assert q.shape == (E,) and (q > 0).all() and q.sum() == pytest.approx(k)
    assert q[0] * E / k == pytest.approx(skew) and (q[:-1] >= q[1:]).all()
    T = np.array([1.0, 4.0, 32.0, 256.0, 4096.0])
    touched = formulas.expected_experts_touched(E, k, T, skew)
    uniform = formulas.expected_experts_touched(E, k, T)
    assert touched == pytest.approx(uniform) if skew == 1 else (touched <= uniform + 1e-9).all()
    assert touched[0] == pytest.approx(k) and touched[-1] == pytest.approx(E, rel=1e-3)
    assert (np.diff(touched) >= 0).all() and touched[1] > touched[0]
    # the busiest GPU under expert parallelism: the mean at skew 1, the skew itself at one expert per GPU
    assert formulas.ep_hot_gpu_load(E, k, E, skew) == pytest.approx(skew)
    assert formulas.ep_hot_gpu_load(E, k, 1, skew) == 1.0


def test_routing_skew_costs_the_busiest_gpu_and_never_halves_a_large_step():
    cfg, spec = get_model("deepseek-v3"), get_spec("h200")
    times = {s: analyze(cfg, spec, Workload(256, 1024, 4, expert_skew=s)).tpot_s for s in (1.0, 2.0)}
    assert times[2.0] == pytest.approx(times[1.0], rel=0.01)  # 2,048 pairs over 256 experts read them all
    ep = {s: analyze(cfg, spec, Workload(256, 1024, 4, tp=8, ep=8, expert_skew=s)).ttft_s for s in (1.0, 2.0, 4.0)}
    assert ep[1.0] < ep[2.0] < ep[4.0]  # compute-bound prefill waits for the busiest GPU


def test_routing_skew_is_capped_at_e_over_k_and_big_grids_are_interpolated_exactly_enough():
    # past E / k the hottest expert would be in more than every token's top-k: one token touched
    # fewer than k experts and Mixtral at --expert-skew 8 read half of uniform's bytes
    assert formulas.routing_shares(8, 2, 8.0) == pytest.approx(formulas.routing_shares(8, 2, 4.0))
    assert formulas.expected_experts_touched(8, 2, np.array([1.0]), 8.0)[0] == pytest.approx(2.0)
    with pytest.raises(RooflineError, match=r"--expert-skew 8: at most 4 for mixtral-8x7b"):
        analyze(get_model("mixtral-8x7b"), get_spec("h200"), Workload(4, 1024, 4, expert_skew=8.0))
    # a prefill grid of 131,072 token counts x 256 experts goes through an exact grid in log(1 + T)
    T = np.outer(np.arange(1, 1025), np.linspace(128, 131072, 128))
    big = formulas.expected_experts_touched(256, 8, T, 2.0)
    pick = np.random.default_rng(0).integers(0, T.size, 2000)
    exact = formulas.expected_experts_touched(256, 8, T.ravel()[pick], 2.0)
    assert big.shape == T.shape and np.abs(big.ravel()[pick] / exact - 1).max() < 1e-6
