"""Chunked attention (Llama-4's ``attention_chunk_size``), by hand: the token at position p attends
the (p mod C) + 1 tokens of its own chunk, in prefill FLOPs, decode reads and FLOPs; the KV cache
is allocated for min(N, C) tokens a layer. A sliding window is costed as before."""

from __future__ import annotations

import numpy as np
import pytest

from rooflinecli import formulas as F
from rooflinecli import kv
from rooflinecli.analysis import Workload
from rooflinecli.analysis.ops import phase_ops
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model

C = 8192
H, H_KV, D = 40, 8, 128  # llama-4-scout: query heads, KV heads, head dim
KV_TOKEN_LAYER_BYTES = 2 * H_KV * D * 2  # K and V, bf16


def _attention_ops(phase: str, context: float, batch: float = 1.0) -> dict:
    cfg = get_model("llama-4-scout")
    wl = Workload(batch=int(batch), prompt_len=int(context) if phase == "prefill" else 1, gen_len=1)
    return {op.group: op for op in phase_ops(cfg, get_spec("h200"), wl, phase, batch, context) if op.kind == "attention"}


@pytest.mark.parametrize("position,attended", [(0, 1), (5, 6), (8191, 8192), (8192, 1), (3 * 8192 + 5, 6), (10**6, 10**6 % 8192 + 1)])
def test_a_query_attends_its_own_chunk_up_to_itself(position, attended):
    assert F.chunked_attended_tokens(position, C) == attended
    assert F.chunked_attended_tokens(np.array([float(position)]), C)[0] == attended


@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_chunked_prefill_pairs_are_the_sum_over_positions(chunk):
    for S in range(0, 5 * chunk + 2):
        by_position = sum(p - chunk * (p // chunk) + 1 for p in range(S))  # positions C*floor(p/C) .. p
        assert F.chunked_causal_pairs(S, chunk) == by_position, (chunk, S)


def test_prefill_flops_of_a_chunked_layer_at_two_chunks_and_100_tokens():
    S = 2 * 8192 + 100
    pairs = 2 * (8192 * 8193 // 2) + 100 * 101 // 2  # two whole triangles, then 100 tokens of a third
    assert pairs == 67_122_106
    op = _attention_ops("prefill", float(S))["window"]
    # QK^T and PV: 2 * H * pairs * (D + D); softmax 5 * H * pairs; per layer, one sequence
    assert op.flops == 2 * H * pairs * (D + D) + 5 * H * pairs == 1_388_085_152_080
    # a window of 8,192 (the former cost) would score 8192*S - 8192*8191/2 pairs, 1.51x as many
    assert F.causal_pairs(S, 8192) == 8192 * S - 8192 * 8191 // 2 == 101_486_592
    # Q/O of the query heads plus the fresh K/V read once, as for every attention layer; the cache
    # is written for the tokens it keeps: the last chunk's allocation, min(S, C)
    assert op.activation_bytes == (2 * H + 2 * H_KV) * S * D * 2
    assert op.kv_write_bytes == 8192 * KV_TOKEN_LAYER_BYTES
    full = _attention_ops("prefill", float(S))["full"]
    assert full.flops == (4 * D + 5) * H * S * (S + 1) / 2  # the NoPE layers stay full causal


@pytest.mark.parametrize("N,attended", [(3 * 8192 + 5, 6), (8191, 8192), (8192, 1), (100, 101)])
def test_decode_reads_the_chunk_of_the_new_token(N, attended):
    ops = _attention_ops("decode", float(N), batch=2.0)
    op = ops["window"]
    assert op.kv_read_bytes == 2 * attended * KV_TOKEN_LAYER_BYTES
    assert op.flops == 2 * (2 * H * attended * (D + D) + 5 * H * attended)
    assert op.kv_write_bytes == 2 * KV_TOKEN_LAYER_BYTES
    assert ops["full"].kv_read_bytes == 2 * N * KV_TOKEN_LAYER_BYTES


def test_decode_reads_follow_the_chunks_over_an_array_of_contexts():
    N = np.array([8190.0, 8191.0, 8192.0, 8193.0, 3 * 8192 + 5])
    op = _attention_ops("decode", N)["window"]
    np.testing.assert_array_equal(op.kv_read_bytes, np.array([8191, 8192, 1, 2, 6]) * KV_TOKEN_LAYER_BYTES)


def test_kv_memory_is_allocated_for_one_chunk():
    cfg = get_model("llama-4-scout")
    N = 3 * 8192 + 5
    # 12 NoPE layers hold N tokens; the 36 chunked ones need 6 but are allocated a whole chunk
    assert kv.kv_cache_bytes_for(cfg, N, 1, 2.0) == (12 * N + 36 * 8192) * KV_TOKEN_LAYER_BYTES == 2_416_164_864
    assert kv.kv_cache_bytes_for(cfg, 5000, 3, 2.0) == 3 * 48 * 5000 * KV_TOKEN_LAYER_BYTES


def test_a_sliding_window_is_costed_as_before():
    cfg = get_model("gemma-2-9b")
    W = cfg.sliding_window
    assert cfg.window_kind == "sliding"
    wl = Workload(batch=1, prompt_len=1, gen_len=1)
    N = 3.0 * W + 5
    (op,) = [o for o in phase_ops(cfg, get_spec("h200"), wl, "decode", 1.0, N) if o.name == "attn.core.window"]
    assert op.kv_read_bytes == W * 2 * cfg.num_kv_heads * cfg.head_dim * 2  # min(N, W), not (N mod W) + 1
    (pre,) = [o for o in phase_ops(cfg, get_spec("h200"), wl, "prefill", 1.0, N) if o.name == "attn.core.window"]
    pairs = W * N - W * (W - 1) / 2
    assert pre.flops == (2 * cfg.head_dim * 2 + 5) * cfg.num_heads * pairs
