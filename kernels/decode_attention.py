"""Decode attention (flash-decoding) in Triton: one query token per sequence over a KV cache.

Split-KV: the partial kernel gives each (batch, KV head, chunk of context) to one program, which
runs an online softmax over its chunk for ALL the query heads of that KV head's group (GQA: each
KV byte is read from HBM once) and writes a partial max, sum and unnormalized output; the reduce
kernel combines the chunks. Splitting the context keeps the GPU full when B * H_kv is small.
``schedule="balanced"`` (stream-KV) instead runs one program per SM, each over an equal share of
all (batch, KV head, context) work, crossing group boundaries (``_decode_attention_balanced_kernel``).

Caches: contiguous [B, H_kv, N_max, D] (SDPA's layout), or paged (compile-time flag): a cache of
fixed-size pages [num_blocks, page_size, H_kv, D] and a block table [B, max_blocks] (int32) naming
the pages of each sequence in order. Per-sequence context lengths ``seq_lens`` [B] (int32).

Cost: ``formulas.attention_decode_flops`` and, for the bytes, the KV cache of one layer
(``formulas.kv_cache_bytes`` with L = 1) plus the query read and output write
(``formulas.attention_qo_bytes`` with S = 1).
"""

from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels.flash_attention import (
    LOG2E,
    check_device,
    dot,
    dot_acc,
    full_fp32,
    interpreting,
    launch_key,
    tma_ready,
    upcast_dots,
)
from kernels.launch import Bound, descriptor_tile_hook, launch, remember
from kernels.registry import Case, KernelOp, output_like
from kernels.sdpa_baselines import plain, sdpa_factories
from kernels.testing import device_randn, torch_dtype
from kernels.tuning import Choice
from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element

DTYPES = ("bf16", "fp16")
HEAD_DIMS = (64, 128)
MAX_SPLITS = 64  # the reduce kernel holds all splits of one head in registers: [64, D] fp32


@triton.jit
def _attend(
    Q, K, V, desc_k, desc_v, Block_table, b, h_kv, start, end,
    stride_qb, stride_qh, stride_kb, stride_kh, stride_kn, stride_vb, stride_vh, stride_vn, stride_bt,
    GROUP, qk_scale,
    BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
    VARLEN: tl.constexpr, PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr,
):
    """Online softmax of the GROUP query heads of KV head ``h_kv`` of sequence ``b`` over its tokens
    [start, end) (``end`` is within the sequence) -> (m, l, acc): running max (base 2), sum of
    exponentials, unnormalized output. An empty range leaves m = -inf, l = 0, acc = 0."""
    offs_g = tl.arange(0, BLOCK_G)  # query heads of this group, padded to the MMA's 16 rows
    offs_d = tl.arange(0, D)
    heads = h_kv * GROUP + offs_g
    q = tl.load(Q + b * stride_qb + heads[:, None] * stride_qh + offs_d[None, :], mask=offs_g[:, None] < GROUP, other=0.0)

    m_i = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, D], dtype=tl.float32)
    for start_n in range(start, end, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        in_seq = offs_n < end
        if TMA:  # BLOCK_N divides PAGE_SIZE: a tile never crosses a page
            if PAGED:
                page = tl.load(Block_table + b * stride_bt + start_n // PAGE_SIZE)
                row = start_n % PAGE_SIZE
            else:
                page = b
                row = start_n
            k = desc_k.load([page, row, h_kv, 0]).reshape(BLOCK_N, D)
        else:
            if PAGED:
                page = tl.load(Block_table + b * stride_bt + offs_n // PAGE_SIZE, mask=in_seq, other=0).to(tl.int64)
                k_off = page * stride_kb + h_kv * stride_kh + (offs_n % PAGE_SIZE) * stride_kn
                v_off = page * stride_vb + h_kv * stride_vh + (offs_n % PAGE_SIZE) * stride_vn
            else:
                k_off = b.to(tl.int64) * stride_kb + h_kv * stride_kh + offs_n.to(tl.int64) * stride_kn
                v_off = b.to(tl.int64) * stride_vb + h_kv * stride_vh + offs_n.to(tl.int64) * stride_vn
            k = tl.load(K + k_off[:, None] + offs_d[None, :], mask=in_seq[:, None], other=0.0)
        qk = dot(q, tl.trans(k), UPCAST) * qk_scale
        qk = tl.where(in_seq[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if TMA:
            v = desc_v.load([page, row, h_kv, 0]).reshape(BLOCK_N, D)
            if VARLEN:
                if start_n + BLOCK_N > end:
                    # a sequence's last tile: slots past its length may hold NaN (0 x NaN is NaN);
                    # without VARLEN a tile only crosses the end of the cache, read as zeros
                    v = tl.where(in_seq[:, None], v, 0.0)
        else:
            v = tl.load(V + v_off[:, None] + offs_d[None, :], mask=in_seq[:, None], other=0.0)
        acc = dot_acc(p.to(v.dtype), v, acc * alpha[:, None], UPCAST)
        m_i = m_new
    return m_i, l_i, acc


@triton.jit
def _store_and_reduce(
    m_i, l_i, acc, M_part, L_part, Acc_part, O, Counter, b, h_kv, slot, n_slots,
    stride_pb, stride_ph, stride_ab, stride_ah, stride_as, stride_ob, stride_oh, H_kv, GROUP,
    BLOCK_G: tl.constexpr, D: tl.constexpr,
):
    """Write one partial (m, l, acc) of KV head ``h_kv`` of sequence ``b`` to partial slot ``slot``
    of ``n_slots``; the last of the n_slots writers to arrive combines all of them into O, slot
    0 first (the order never depends on who arrives last: deterministic).

    The reduce, fused: Counter [B * H_kv] int32, zero between calls: each writer counts itself in
    after its stores (acq_rel at GPU scope: the partials it wrote are visible to whoever counts in
    last), and the last one resets it for the next call. One launch instead of two."""
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    heads = h_kv * GROUP + offs_g
    g_mask = offs_g < GROUP
    # an empty range (past this sequence's length) leaves m = -inf, l = 0, acc = 0: weight 0
    p_off = b * stride_pb + heads * stride_ph + slot
    tl.store(M_part + p_off, m_i, mask=g_mask)
    tl.store(L_part + p_off, l_i, mask=g_mask)
    a_ptrs = Acc_part + b * stride_ab + heads[:, None] * stride_ah + slot * stride_as + offs_d[None, :]
    tl.store(a_ptrs, acc, mask=g_mask[:, None])

    tl.debug_barrier()  # every thread's partial stores before the (one-thread) releasing atomic
    count = Counter + b * H_kv + h_kv
    done = tl.atomic_add(count, 1)
    if done == n_slots - 1:
        tl.store(count, 0)
        combine_splits(
            M_part + b * stride_pb + heads * stride_ph, L_part + b * stride_pb + heads * stride_ph, g_mask,
            Acc_part + b * stride_ab + heads[:, None] * stride_ah + offs_d[None, :], stride_as,
            O + b * stride_ob + heads[:, None] * stride_oh + offs_d[None, :], n_slots, BLOCK_G, D,
        )


@triton.jit
def sequence_length(Seq_lens, b, N_ctx, VARLEN: tl.constexpr):
    """Cached tokens of sequence ``b``: its own length (ragged, ``VARLEN``) or the cache's."""
    if VARLEN:
        return tl.load(Seq_lens + b)
    return N_ctx


@triton.jit
def chunk_bounds(Seq_lens, b, N_ctx, pid_split, chunk, VARLEN: tl.constexpr):
    """[start, end) of split ``pid_split``'s chunk of sequence ``b`` (end clipped to its length)."""
    start = pid_split * chunk
    return start, tl.minimum(start + chunk, sequence_length(Seq_lens, b, N_ctx, VARLEN))


@triton.jit
def _decode_attention_kernel(
    Q, K, V, desc_k, desc_v, Seq_lens, Block_table, M_part, L_part, Acc_part, O, Counter,
    stride_qb, stride_qh,
    stride_kb, stride_kh, stride_kn,  # contiguous: (batch, head, token); paged: (page, head, slot)
    stride_vb, stride_vh, stride_vn,
    stride_bt,
    stride_pb, stride_ph,  # M_part, L_part [B, H, SPLITS]
    stride_ab, stride_ah, stride_as,  # Acc_part [B, H, SPLITS, D]
    stride_ob, stride_oh,  # O [B, H, D]
    H_kv, GROUP, N_ctx, chunk, qk_scale,  # GROUP = H / H_kv query heads per KV head
    B, SPLITS,  # the grid's batch and split extents: autotune key only (the grid changes with them)
    BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
    VARLEN: tl.constexpr, PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr, UPCAST: tl.constexpr,
    TMA: tl.constexpr,  # K/V tiles by the TMA engine (desc_k, desc_v) instead of pointer loads (K, V)
):
    # schedule "splits": grid (B * H_kv, SPLITS), one chunk of one (sequence, KV head) per program.
    # desc_k, desc_v: TMA descriptors over the cache as [batch or page, token, H_kv, D]
    pid_bh = tl.program_id(0)
    pid_split = tl.program_id(1)
    b = pid_bh // H_kv
    h_kv = pid_bh % H_kv
    start, end = chunk_bounds(Seq_lens, b, N_ctx, pid_split, chunk, VARLEN)
    m_i, l_i, acc = _attend(
        Q, K, V, desc_k, desc_v, Block_table, b, h_kv, start, end,
        stride_qb, stride_qh, stride_kb, stride_kh, stride_kn, stride_vb, stride_vh, stride_vn, stride_bt,
        GROUP, qk_scale, BLOCK_G, D, BLOCK_N, VARLEN, PAGED, PAGE_SIZE, UPCAST, TMA,
    )
    _store_and_reduce(
        m_i, l_i, acc, M_part, L_part, Acc_part, O, Counter, b, h_kv, pid_split, SPLITS,
        stride_pb, stride_ph, stride_ab, stride_ah, stride_as, stride_ob, stride_oh, H_kv, GROUP, BLOCK_G, D,
    )


@triton.jit
def _decode_attention_balanced_kernel(
    Q, K, V, desc_k, desc_v, Seq_lens, Block_table, M_part, L_part, Acc_part, O, Counter,
    stride_qb, stride_qh,
    stride_kb, stride_kh, stride_kn,  # contiguous: (batch, head, token); paged: (page, head, slot)
    stride_vb, stride_vh, stride_vn,
    stride_bt,
    stride_pb, stride_ph,  # M_part, L_part [B, H, SLOTS]
    stride_ab, stride_ah, stride_as,  # Acc_part [B, H, SLOTS, D]
    stride_ob, stride_oh,  # O [B, H, D]
    H_kv, GROUP, N_ctx,
    units_per_group, n_units,  # UNIT-token pieces of one (sequence, KV head), of all of them
    qk_scale,
    B, P,  # the batch (autotune key only) and the number of programs (the grid: (P,))
    UNIT: tl.constexpr,  # tokens per unit: a multiple of every BLOCK_N (and of a page's tiles)
    BLOCK_G: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
    VARLEN: tl.constexpr, PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr, UPCAST: tl.constexpr,
    TMA: tl.constexpr,
):
    # schedule "balanced" (stream-KV): the context of every (sequence, KV head) = group g is cut in
    # units_per_group units; the n_units units of all groups, group after group, are dealt out as
    # P equal runs, program p taking [p * n_units // P, (p + 1) * n_units // P) (P <= n_units: no run
    # is empty). A run is one segment per group it touches; each segment writes one partial. The
    # programs covering group g are p_first(g) .. p_last(g), the ones holding its first and last
    # unit, with p(u) = ((u + 1) * P - 1) // n_units the program holding unit u; program p's
    # partial for g goes to slot p - p_first(g), so slot 0 always holds the group's token 0.
    # Products of a unit and a program count can pass 2^31: they take int64; the rest (units,
    # tokens, program indices) fits int32, which TMA coordinates need and which keeps no 64-bit
    # value live across the loop over groups.
    pid = tl.program_id(0)
    lo = (pid.to(tl.int64) * n_units // P).to(tl.int32)
    hi = ((pid + 1).to(tl.int64) * n_units // P).to(tl.int32)
    for g in range(lo // units_per_group, (hi - 1) // units_per_group + 1):
        first_unit = g * units_per_group
        p_first = (((first_unit + 1).to(tl.int64) * P - 1) // n_units).to(tl.int32)
        p_last = (((first_unit + units_per_group).to(tl.int64) * P - 1) // n_units).to(tl.int32)
        b = g // H_kv
        h_kv = g % H_kv
        seq_len = sequence_length(Seq_lens, b, N_ctx, VARLEN)
        start = (tl.maximum(lo, first_unit) - first_unit) * UNIT
        end = tl.minimum((tl.minimum(hi, first_unit + units_per_group) - first_unit) * UNIT, seq_len)
        m_i, l_i, acc = _attend(
            Q, K, V, desc_k, desc_v, Block_table, b, h_kv, start, end,
            stride_qb, stride_qh, stride_kb, stride_kh, stride_kn, stride_vb, stride_vh, stride_vn, stride_bt,
            GROUP, qk_scale, BLOCK_G, D, BLOCK_N, VARLEN, PAGED, PAGE_SIZE, UPCAST, TMA,
        )
        _store_and_reduce(
            m_i, l_i, acc, M_part, L_part, Acc_part, O, Counter, b, h_kv, pid - p_first, p_last - p_first + 1,
            stride_pb, stride_ph, stride_ab, stride_ah, stride_as, stride_ob, stride_oh, H_kv, GROUP, BLOCK_G, D,
        )


@triton.jit
def combine_splits(m_ptrs, l_ptrs, rows, acc_ptrs, stride_as, o_ptrs, SPLITS, ROWS: tl.constexpr, COLS: tl.constexpr):
    """o = sum_s 2^(m_s - m) acc_s / sum_s 2^(m_s - m) l_s over the splits of ROWS heads (m_ptrs,
    l_ptrs [ROWS] at split 0, consecutive splits; acc_ptrs [ROWS, COLS] at split 0, splits
    ``stride_as`` apart), in one pass that rescales as the max grows; stores o into o_ptrs for the
    ``rows`` that exist. Padded rows read m = 0, not -inf (no -inf - -inf); split 0 is never empty,
    so m is finite from the first split on. Shared by the decode and MLA kernels' fused reduce."""
    m_run = tl.full([ROWS], float("-inf"), dtype=tl.float32)
    l_sum = tl.zeros([ROWS], dtype=tl.float32)
    o = tl.zeros([ROWS, COLS], dtype=tl.float32)
    for s in range(0, SPLITS):
        m_s = tl.load(m_ptrs + s, mask=rows, other=0.0)
        m_new = tl.maximum(m_run, m_s)
        keep = tl.math.exp2(m_run - m_new)
        w = tl.math.exp2(m_s - m_new)
        l_sum = l_sum * keep + w * tl.load(l_ptrs + s, mask=rows, other=0.0)
        o = o * keep[:, None] + w[:, None] * tl.load(acc_ptrs + s * stride_as, mask=rows[:, None], other=0.0)
        m_run = m_new
    o = o / tl.where(rows, l_sum, 1.0)[:, None]
    tl.store(o_ptrs, o.to(o_ptrs.dtype.element_ty), mask=rows[:, None])


@triton.jit
def _decode_attention_reduce_kernel(
    M_part, L_part, Acc_part, O,
    stride_pb, stride_ph, stride_ab, stride_ah, stride_as, stride_ob, stride_oh,
    H, n_splits,
    BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
):
    # o = sum_s 2^(m_s - m) acc_s / sum_s 2^(m_s - m) l_s, m = max_s m_s (scores in base 2);
    # one program per (batch, head) and BLOCK_D slice of the output
    pid_bh = tl.program_id(0)
    pid_d = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    s_mask = offs_s < n_splits
    m = tl.load(M_part + b * stride_pb + h * stride_ph + offs_s, mask=s_mask, other=float("-inf"))
    l = tl.load(L_part + b * stride_pb + h * stride_ph + offs_s, mask=s_mask, other=0.0)
    a_ptrs = Acc_part + b * stride_ab + h * stride_ah + offs_s[:, None] * stride_as + offs_d[None, :]
    acc = tl.load(a_ptrs, mask=s_mask[:, None], other=0.0)
    w = tl.math.exp2(m - tl.max(m, 0))
    o = tl.sum(w[:, None] * acc, 0) / tl.sum(w * l, 0)
    tl.store(O + b * stride_ob + h * stride_oh + offs_d, o.to(O.dtype.element_ty))


def reduce_splits(m_part: torch.Tensor, l_part: torch.Tensor, acc_part: torch.Tensor, out: torch.Tensor) -> None:
    """Combine split-KV partials into ``out`` [B, H, D]: m_part, l_part [B, H, SPLITS] fp32 (running
    max in base 2, sum of exponentials), acc_part [B, H, SPLITS, D] fp32 (unnormalized output).
    Also used by ``kernels/mla_decode.py`` (D = kv_lora_rank)."""
    B, H, splits, D = acc_part.shape
    block_d = min(D, 128)  # at most [64 splits, 128] fp32 per program: no register spills
    launch(
        _decode_attention_reduce_kernel, (B * H, triton.cdiv(D, block_d)), m_part, l_part, acc_part, out,
        m_part.stride(0), m_part.stride(1), acc_part.stride(0), acc_part.stride(1), acc_part.stride(2),
        out.stride(0), out.stride(1),
        H, splits, BLOCK_D=block_d, BLOCK_S=triton.next_power_of_2(splits),
    )


@descriptor_tile_hook
def _set_blocks(nargs):
    """Autotune pre-hook: the TMA descriptors' tiles follow the config being run."""
    block = [1, nargs["BLOCK_N"], 1, nargs["D"]]
    nargs["desc_k"].block_shape = block
    nargs["desc_v"].block_shape = block


def _config(bn, warps, stages, tma):
    return triton.Config({"BLOCK_N": bn, "TMA": tma}, num_warps=warps, num_stages=stages, pre_hook=_set_blocks)


def _keep_fitting_tiles(configs, named_args, **kwargs):
    """Autotune pruning: a TMA tile of a paged cache must not cross a page (BLOCK_N <= PAGE_SIZE);
    16-token TMA tiles only for pages that small. Paged pointer loads: 64-token tiles (the 32-token
    4-warp one spills 8 bytes under Triton 3.9 with the fused reduce)."""
    paged = bool(kwargs.get("PAGED", named_args.get("PAGED", False)))
    page = kwargs.get("PAGE_SIZE", named_args.get("PAGE_SIZE", 1)) if paged else CHUNK_ALIGN
    smallest = min(page, 32)
    return [
        c for c in configs
        if (smallest <= c.kwargs["BLOCK_N"] <= page if c.kwargs["TMA"] else not paged or c.kwargs["BLOCK_N"] >= 64)
    ]


# GPU configs. Pointer loads (cp.async pipelined): 32 x 4 warps x 4 stages won at B1 128k on the
# H200 (138 us in the autotuner, 0.97x SDPA graph-timed), and 64-token tiles; TMA loads: 64-128-token
# tiles, 2-4 per SM in flight; the autotuner picks between them on the GPU. Every config compiles
# for sm_90 without register spills under the pinned Triton and the newest (test_decode_attention's
# compile check, run by .ci/run on both). Every BLOCK_N divides CHUNK_ALIGN so any of them tiles a chunk.
CHUNK_ALIGN = 128
_SHARED_CONFIGS = [
    _config(32, 4, 4, False),
    _config(64, 4, 4, True),
    _config(128, 4, 3, True),
    _config(16, 4, 8, True),  # paged caches of 16-token pages (a TMA tile stays inside a page)
]
# 64-token pointer tiles: 4 warps in the split-KV kernel (on 8 warps it spills under Triton 3.8:
# 64 registers and an 8-byte stack; on 4 warps 84-120 registers, none), 8 warps in the balanced one
# (on 4 warps it spills under 3.8 or 3.9). 128-token TMA tiles on 8 warps are left out: they spill
# in the split-KV kernel under 3.8 and in the balanced one under 3.6.
_GPU_CONFIGS = _SHARED_CONFIGS[:1] + [_config(64, 4, 3, False), _config(64, 4, 4, False)] + _SHARED_CONFIGS[1:]
# Key: everything that changes the grid (B, H_kv, SPLITS) or the code (GROUP, D, PAGED, VARLEN,
# PAGE_SIZE). Not the chunk length: it changes every CHUNK_ALIGN tokens of a growing context.
_decode_attention_autotuned = triton.autotune(
    configs=_GPU_CONFIGS,
    key=["B", "H_kv", "SPLITS", "GROUP", "D", "PAGED", "PAGE_SIZE", "VARLEN"],
    prune_configs_by={"early_config_prune": _keep_fitting_tiles},
)(_decode_attention_kernel)
# Balanced schedule: the grid is always (P,) = one program per SM, so P replaces SPLITS in the key;
# B and H_kv still change how many groups each program walks (B64: ~4 per program, B1: 1).
# Its configs: the shared ones and the 64-token pointer tiles on 8 warps.
_BALANCED_CONFIGS = _SHARED_CONFIGS[:1] + [_config(64, 8, 3, False), _config(64, 8, 4, False)] + _SHARED_CONFIGS[1:]
_decode_attention_balanced_autotuned = triton.autotune(
    configs=_BALANCED_CONFIGS,
    key=["B", "H_kv", "P", "GROUP", "D", "PAGED", "PAGE_SIZE", "VARLEN"],
    prune_configs_by={"early_config_prune": _keep_fitting_tiles},
)(_decode_attention_balanced_kernel)
# Interpreter: fixed 16-token tiles (the smallest page), so odd contexts cross several tiles within
# one chunk; TMA loads (the tests run the pointer loads too, by setting this False).
_INTERPRET_BLOCK_N = 16
_INTERPRET_TMA = True


@functools.lru_cache(maxsize=None)
def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device (8 stands in when interpreting on the CPU)."""
    if device.type != "cuda":
        return 8
    return torch.cuda.get_device_properties(device).multi_processor_count


def choose_splits(groups: int, n_ctx: int, sms: int, min_chunk: int = 256) -> int:
    """Context chunks per (batch, KV head): about 4 programs per SM in all, chunks of at least
    ``min_chunk`` tokens (untuned: enough loop trips to hide the partial write), at most MAX_SPLITS."""
    want = triton.cdiv(4 * sms, max(1, groups))
    return max(1, min(MAX_SPLITS, want, triton.cdiv(n_ctx, min_chunk)))


def one_wave_splits(groups: int, n_ctx: int, sms: int, min_chunk: int = 256) -> int:
    """Context chunks per (batch, KV head) for decode attention: as many as keep the grid within one
    program per SM (B * H_kv * splits <= SMs, at least one split), chunks of at least ``min_chunk``
    tokens, at most MAX_SPLITS. One wave whatever the config's occupancy: the second H200 run's
    ``choose_splits`` grids were fractional waves (B8 32k: 576 programs of the one-per-SM 128-token
    TMA tile, 4.4 waves run as 5) and B1's 64 splits made the fused reduce's last program read 64
    partials; the B16-B64 shapes with 5 waves or more were at parity with SDPA either way."""
    return max(1, min(MAX_SPLITS, sms // max(1, groups), triton.cdiv(n_ctx, min_chunk)))


#: decode_attention's work schedules: "splits" (grid (B * H_kv, splits), one_wave_splits) and
#: "balanced" (grid (SMs,), every program the same number of context units: balanced_plan)
SCHEDULES = ("splits", "balanced")
#: the schedule where none is chosen: on a GPU (``AUTO_SCHEDULE``), the faster of the two, timed on
#: the first call of each shape class (``choose_schedule``); under the interpreter, or while a CUDA
#: graph is being captured, this one
DEFAULT_SCHEDULE = "splits"
AUTO_SCHEDULE = True
#: "balanced" must beat "splits" by more than this fraction to be chosen (a near-tie keeps splits)
SCHEDULE_MARGIN = 0.02
#: shape class -> the schedule chosen for it (``_auto_schedule``): timed on a shape class's first
#: call, or committed in the tuned file (``roofline tune`` writes the choices it timed)
SCHEDULE_CHOICE = Choice("decode_attention.schedule", SCHEDULES)


def choose_schedule(time_ms, margin: float = SCHEDULE_MARGIN) -> tuple[str, dict]:
    """(schedule, {schedule: ms}): ``time_ms(schedule)`` for each of ``SCHEDULES``; "balanced"
    only if it is more than ``margin`` faster than "splits"."""
    times = {s: float(time_ms(s)) for s in SCHEDULES}
    return ("balanced" if times["balanced"] < (1.0 - margin) * times["splits"] else "splits"), times


def _schedule_class(q, k_cache, seq_lens, block_table) -> tuple:
    """What the schedules' relative speed depends on: batch, heads, head dim, dtype, paging,
    ragged lengths, and the cache length to a power of two."""
    paged = block_table is not None
    n_max = block_table.shape[1] * k_cache.shape[1] if paged else k_cache.shape[2]
    h_kv = k_cache.shape[2] if paged else k_cache.shape[1]
    # JSON scalars (a committed choice's key): batch, heads, head dim, KV heads, dtype, paging, ...
    return (*(int(x) for x in q.shape), int(h_kv), str(q.dtype), paged, int(k_cache.shape[1]) if paged else 1,
            seq_lens is not None, int(n_max).bit_length())


def _graph_time_ms(fn) -> float:
    from kernels.tuning import graph_benchmarker  # the autotuners' graph timer, one definition

    return float(graph_benchmarker()(fn))


def _auto_enabled(q) -> bool:
    return AUTO_SCHEDULE and q.is_cuda and not interpreting() and not torch.cuda.is_current_stream_capturing()


def _auto_schedule(q, k_cache, v_cache, seq_lens, block_table, sm_scale, out) -> str:
    """The schedule for this call's shape class: cached, or chosen now by timing both (graph
    replay; each schedule's own autotuner runs first, unrecorded) on these very inputs. Bad
    inputs raise as they would without the choice; a schedule that fails otherwise (a compile
    error, say) counts as infinitely slow."""
    from kernels.tuning import unrecorded

    cls = _schedule_class(q, k_cache, seq_lens, block_table)
    choice = SCHEDULE_CHOICE.get(cls)
    if choice is None:

        def time_ms(schedule: str) -> float:
            def fn():
                decode_attention(q, k_cache, v_cache, seq_lens, block_table, sm_scale, out=out, schedule=schedule)

            try:
                fn()  # compiles and autotunes that schedule's kernel outside the timing
                return _graph_time_ms(fn)
            except ValueError:
                raise
            except Exception:  # noqa: BLE001 - the other schedule may still run
                return math.inf

        with unrecorded():
            choice, times = choose_schedule(time_ms)
        SCHEDULE_CHOICE.put(cls, choice, times)
    return choice


def balanced_plan(groups: int, units_per_group: int, programs: int) -> tuple[int, int]:
    """(programs, slots) of the balanced schedule: ``groups`` (sequence, KV head) pairs of
    ``units_per_group`` context units each, dealt out as equal runs to at most ``programs``
    programs (never more than there are units, so no run is empty); ``slots``: the most programs
    any one group's units are spread over, so the most partials a group writes (the partial
    buffers' size). Runs are n_units // P or one more units long; a group's first unit lies in one
    run and every further run starting inside it begins at least n_units // P units later."""
    n_units = groups * units_per_group
    programs = max(1, min(programs, n_units))
    slots = 1 + triton.cdiv(units_per_group - 1, n_units // programs)
    return programs, min(programs, slots)


def split_plan(n_ctx: int, splits: int, align: int) -> tuple[int, int]:
    """(chunk, splits): ``splits`` chunks of the context, each a multiple of ``align`` tokens
    (so every BLOCK_N tiles it); rounding up may leave fewer chunks than asked."""
    chunk = triton.cdiv(triton.cdiv(n_ctx, splits), align) * align
    return chunk, triton.cdiv(n_ctx, chunk)


#: per-shape launch plans (checks done, partial buffers, strides, grid), so a repeated call costs a
#: dict lookup and the two launches
_PLANS: dict = {}


def _plan(q, k_cache, v_cache, seq_lens, block_table, sm_scale, num_splits, schedule, num_programs, out):
    """Check the inputs once per shape and build the launch."""
    if q.dim() != 3:
        raise ValueError(f"q must be [B, H, D], got {tuple(q.shape)}")
    B, H, D = q.shape
    paged = block_table is not None
    if k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(f"k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} must be one 4-d shape")
    if paged:
        _, page_size, H_kv, Dk = k_cache.shape
        if block_table.dim() != 2 or block_table.shape[0] != B or block_table.dtype != torch.int32:
            raise ValueError(f"block_table must be [B={B}, max_blocks] int32, got {tuple(block_table.shape)} {block_table.dtype}")
        if block_table.stride(1) != 1:
            raise ValueError("block_table must be contiguous in its last dimension")
        N_max = block_table.shape[1] * page_size
        if page_size < 16 or page_size & (page_size - 1):
            raise ValueError(f"page_size = {page_size} must be a power of two >= 16")
    else:
        Bk, H_kv, N_max, Dk = k_cache.shape
        page_size = 1
        if Bk != B:
            raise ValueError(f"k_cache batch {Bk} != q batch {B}")
    if Dk != D:
        raise ValueError(f"cache head dim {Dk} != q head dim {D}")
    if D not in HEAD_DIMS:
        raise ValueError(f"head dim D = {D} not supported; supported: {HEAD_DIMS}")
    if H_kv < 1 or H % H_kv:
        raise ValueError(f"H_kv = {H_kv} must divide H = {H}")
    if q.dtype not in (torch.bfloat16, torch.float16) or k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise ValueError(f"q and the caches must all be bf16 or all fp16, got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1:
        raise ValueError("q and the caches must be contiguous in the last (head) dimension")
    why = tma_ready(k_cache, v_cache)
    if why:
        raise ValueError(f"the caches must be {why}")
    if seq_lens is not None and (seq_lens.shape != (B,) or seq_lens.dtype != torch.int32):
        raise ValueError(f"seq_lens must be [B={B}] int32, got {tuple(seq_lens.shape)} {seq_lens.dtype}")
    check_device(*(t for t in (q, k_cache, v_cache, seq_lens, block_table) if t is not None))
    if out.shape != q.shape or out.dtype != q.dtype or out.device != q.device or out.stride(-1) != 1:
        raise ValueError(f"out must be {tuple(q.shape)} {q.dtype} on {q.device}, contiguous in D")
    if B * H == 0 or N_max == 0:
        raise ValueError("decode attention needs B, H and the cache length >= 1")

    group = H // H_kv
    schedule = DEFAULT_SCHEDULE if schedule is None else schedule
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule = {schedule!r} is not one of {', '.join(map(repr, SCHEDULES))}")
    align = _INTERPRET_BLOCK_N if interpreting() else CHUNK_ALIGN
    qk_scale = (1.0 / math.sqrt(D) if sm_scale is None else sm_scale) * LOG2E
    if schedule == "balanced":
        if num_splits is not None:
            raise ValueError("num_splits applies to schedule='splits' only (the balanced schedule takes num_programs)")
        if num_programs is not None and num_programs < 1:
            raise ValueError(f"num_programs = {num_programs} must be >= 1")
        units = triton.cdiv(N_max, align)
        programs, slots = balanced_plan(B * H_kv, units, num_programs or sm_count(q.device))
        grid = (programs,)
        tail = (units, B * H_kv * units, qk_scale, B, programs)
    else:
        if num_programs is not None:
            raise ValueError("num_programs applies to schedule='balanced' only (the splits schedule takes num_splits)")
        splits = one_wave_splits(B * H_kv, N_max, sm_count(q.device)) if num_splits is None else num_splits
        if not 1 <= splits <= MAX_SPLITS:
            raise ValueError(f"num_splits = {splits} must be in [1, {MAX_SPLITS}]")
        chunk, slots = split_plan(N_max, splits, align)
        grid = (B * H_kv, slots)
        tail = (chunk, qk_scale, B, slots)
    m_part = torch.empty((B, H, slots), dtype=torch.float32, device=q.device)
    l_part = torch.empty_like(m_part)
    acc_part = torch.empty((B, H, slots, D), dtype=torch.float32, device=q.device)
    counter = torch.zeros((B * H_kv,), dtype=torch.int32, device=q.device)  # the fused reduce's
    if paged:
        kb, kh, kn = k_cache.stride(0), k_cache.stride(2), k_cache.stride(1)
        vb, vh, vn = v_cache.stride(0), v_cache.stride(2), v_cache.stride(1)
        rows = page_size
    else:
        kb, kh, kn = k_cache.stride(0), k_cache.stride(1), k_cache.stride(2)
        vb, vh, vn = v_cache.stride(0), v_cache.stride(1), v_cache.stride(2)
        rows = N_max
    # TMA view of either cache: [batch or page, token, H_kv, D] over its own strides
    bn = _INTERPRET_BLOCK_N if interpreting() else 64
    descs = tuple(
        TensorDescriptor(c, [c.shape[0], rows, H_kv, D], [sb, sn, sh, 1], [1, bn, 1, D])
        for c, sb, sh, sn in ((k_cache, kb, kh, kn), (v_cache, vb, vh, vn))
    )
    strides = (
        q.stride(0), q.stride(1), kb, kh, kn, vb, vh, vn,
        block_table.stride(0) if paged else 0,
        m_part.stride(0), m_part.stride(1),
        acc_part.stride(0), acc_part.stride(1), acc_part.stride(2),
        out.stride(0), out.stride(1),
        H_kv, group, N_max, *tail,
    )
    consts = dict(
        BLOCK_G=max(16, triton.next_power_of_2(group)), D=D,
        VARLEN=seq_lens is not None, PAGED=paged, PAGE_SIZE=page_size,
    )
    balanced = schedule == "balanced"
    if balanced:
        consts["UNIT"] = align
    if interpreting():
        consts.update(BLOCK_N=_INTERPRET_BLOCK_N, UPCAST=upcast_dots(q.dtype), TMA=_INTERPRET_TMA)
        kernel = _decode_attention_balanced_kernel if balanced else _decode_attention_kernel
    else:
        consts["UPCAST"] = False
        kernel = _decode_attention_balanced_autotuned if balanced else _decode_attention_autotuned
    return kernel, grid, descs, (m_part, l_part, acc_part, counter), strides, consts


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    seq_lens: torch.Tensor | None = None,
    block_table: torch.Tensor | None = None,
    sm_scale: float | None = None,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,
    schedule: str | None = None,
    num_programs: int | None = None,
) -> torch.Tensor:
    """One decode step of attention.

    q [B, H, D] (bf16/fp16, D in 64/128). Contiguous cache: k_cache, v_cache [B, H_kv, N_max, D].
    Paged cache (``block_table`` given): k_cache, v_cache [num_blocks, page_size, H_kv, D] and
    block_table [B, max_blocks] int32, N_max = max_blocks * page_size. H_kv divides H.
    seq_lens [B] int32, each in [1, N_max] (not checked: that would need a device sync); None: all
    N_max. ``schedule`` (``SCHEDULES``; None: on a GPU the faster of the two for this shape class,
    timed on its first call, ``choose_schedule``; else ``DEFAULT_SCHEDULE``): "splits" gives each (batch, KV
    head) ``num_splits`` context chunks, one program each (None picks from the SM count: at most
    one program per SM); "balanced" runs ``num_programs`` programs (None: one per SM) that each
    take an equal share of all (batch, KV head, context) work, across group boundaries.
    Returns o [B, H, D] in q's dtype (into ``out`` when given)."""
    if out is None:
        out = torch.empty_like(q)
    key = launch_key(q, k_cache, v_cache, out, seq_lens, block_table, sm_scale, num_splits, schedule, num_programs)
    plan = _PLANS.get(key)
    if plan is None:
        run_schedule = schedule
        if schedule is None and num_splits is None and num_programs is None and _auto_enabled(q):
            run_schedule = _auto_schedule(q, k_cache, v_cache, seq_lens, block_table, sm_scale, out)
        kernel, grid, descs, buffers, strides, consts = _plan(q, k_cache, v_cache, seq_lens, block_table, sm_scale,
                                                              num_splits, run_schedule, num_programs, out)
        # the launch with everything but q, the caches, lens, table and out fixed (BOUND_SLOTS)
        bound = Bound(kernel, grid, [None, None, None, *descs, None, None, *buffers[:3], None, buffers[3], *strides],
                      consts, BOUND_SLOTS)
        plan = remember(_PLANS, key, (kernel, grid, descs, buffers, strides, consts, bound))
    elif (k_cache.data_ptr() | v_cache.data_ptr()) % 16:
        raise ValueError("the caches must be 16-byte aligned (the TMA engine's rule)")
    desc_k, desc_v = plan[2]
    desc_k.base, desc_v.base = k_cache, v_cache
    lens = seq_lens if seq_lens is not None else q  # any tensor: not read when VARLEN is False
    table = block_table if block_table is not None else q
    plan[6](q, k_cache, v_cache, lens, table, out)
    return out


#: positions of q, k_cache, v_cache, lens, table and out in the kernels' arguments
BOUND_SLOTS = (0, 1, 2, 5, 6, 10)


# ------------------------------------------------------------------------------------------------
# Reference, baseline, cost, cases
# ------------------------------------------------------------------------------------------------


def _sequence_kv(k_cache, v_cache, b, length, block_table):
    """Sequence b's first ``length`` cached K and V as [H_kv, length, D] views or gathers."""
    if block_table is None:
        return k_cache[b, :, :length], v_cache[b, :, :length]
    page_size = k_cache.shape[1]
    t = torch.arange(length, device=k_cache.device)
    pages = block_table[b].long()[t // page_size]
    return k_cache[pages, t % page_size].transpose(0, 1), v_cache[pages, t % page_size].transpose(0, 1)


def decode_reference(q, k_cache, v_cache, seq_lens=None, block_table=None, sm_scale=None, **_):
    """softmax(q K^T * scale) V per sequence in fp32 over its first seq_lens[b] tokens -> fp32 [B, H, D]."""
    B, H, D = q.shape
    H_kv = k_cache.shape[2] if block_table is not None else k_cache.shape[1]
    n_max = block_table.shape[1] * k_cache.shape[1] if block_table is not None else k_cache.shape[2]
    lens = [n_max] * B if seq_lens is None else seq_lens.tolist()
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    out = torch.empty((B, H, D), dtype=torch.float32, device=q.device)
    with full_fp32():
        for b in range(B):
            k, v = _sequence_kv(k_cache, v_cache, b, lens[b], block_table)
            qg = q[b].float().view(H_kv, H // H_kv, D)  # [H_kv, G, D]: no K/V repeat for GQA
            s = torch.matmul(qg, k.float().transpose(-1, -2)) * scale  # [H_kv, G, L]
            out[b] = torch.matmul(torch.softmax(s, dim=-1), v.float()).reshape(H, D)
    return out


def sdpa_baseline(q, k_cache, v_cache, seq_lens=None, block_table=None, sm_scale=None, **_):
    """torch SDPA on the cache (q as one query token, GQA via enable_gqa). A paged cache is first
    gathered into SDPA's layout (that gather is timed too); ragged seq_lens become a mask."""
    import torch.nn.functional as F

    B, H, D = q.shape
    if block_table is not None:
        k_cache, v_cache = _gathered(k_cache, v_cache, block_table)
    mask = None if seq_lens is None else _length_mask(seq_lens, k_cache.shape[2], q.device)
    gqa = k_cache.shape[1] != H
    o = F.scaled_dot_product_attention(q[:, :, None, :], k_cache, v_cache, attn_mask=mask, scale=sm_scale, enable_gqa=gqa)
    return o[:, :, 0, :]


def _gathered(k_cache, v_cache, block_table):
    """A paged cache gathered into SDPA's layout [B, H_kv, N_max, D] (a copy)."""
    pages = block_table.long()  # [B, max_blocks]
    return k_cache[pages].flatten(1, 2).transpose(1, 2), v_cache[pages].flatten(1, 2).transpose(1, 2)


def _length_mask(seq_lens, n_max, device):
    """[B, 1, 1, N_max] bool: token t of sequence b is inside its length."""
    return (torch.arange(n_max, device=device)[None, :] < seq_lens[:, None].long())[:, None, None, :]


def matmul_baseline(q, k_cache, v_cache, seq_lens=None, block_table=None, sm_scale=None, **_):
    """The plain torch path: q grouped per KV head (no K/V repeat), scores by one batched matmul,
    softmax in fp32, one matmul with V. A paged cache is gathered first (timed)."""
    B, H, D = q.shape
    if block_table is not None:
        k_cache, v_cache = _gathered(k_cache, v_cache, block_table)
    H_kv, n_max = k_cache.shape[1], k_cache.shape[2]
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    s = torch.matmul(q.view(B, H_kv, H // H_kv, D), k_cache.transpose(-1, -2))  # [B, H_kv, G, N]
    if seq_lens is not None:
        s = s.masked_fill(~_length_mask(seq_lens, n_max, q.device), float("-inf"))
    p = torch.softmax(s.float() * scale, dim=-1).to(q.dtype)
    return torch.matmul(p, v_cache).reshape(B, H, D)


def _sdpa_inputs(q, k_cache, v_cache, seq_lens=None, block_table=None, sm_scale=None, **_):
    """SDPA's view of a contiguous cache (q as one query token; ragged lengths as a mask); None for
    a paged cache (torch has no paged SDPA: ``sdpa:gather`` times the gather too)."""
    if block_table is not None:
        return None
    kw = {"scale": sm_scale}
    if seq_lens is not None:
        kw["attn_mask"] = _length_mask(seq_lens, k_cache.shape[2], q.device)
    return q[:, :, None, :], k_cache, v_cache, kw


def _gather_then_sdpa(**inputs):
    return None if inputs.get("block_table") is None else (lambda: sdpa_baseline(**inputs))


def make_inputs(case: Case, device, generator) -> dict:
    """Fresh random q and cache. ``varlen``: random lengths in [1, N] (the first sequence full);
    ``page_size``: a paged cache with the pages of all sequences shuffled through the pool."""
    p = case.params
    dt = torch_dtype(case.dtype)
    B, H, H_kv, N, D = p["B"], p["H"], p["H_kv"], p["N"], p["D"]
    inputs = {"q": device_randn((B, H, D), dt, device, generator)}
    page_size = p.get("page_size")
    if page_size:
        inputs["block_table"] = random_block_table(B, N, page_size, device, generator)
        shape = (inputs["block_table"].numel(), page_size, H_kv, D)
    else:
        shape = (B, H_kv, N, D)
    inputs["k_cache"] = device_randn(shape, dt, device, generator)
    inputs["v_cache"] = device_randn(shape, dt, device, generator)
    return inputs | decode_options(p, device, generator)


def random_block_table(B: int, N: int, page_size: int, device, generator) -> torch.Tensor:
    """Block table [B, ceil(N / page_size)] (int32): every sequence's pages, shuffled through a
    pool of B * ceil(N / page_size) pages. Shared by the decode kernels' inputs."""
    max_blocks = triton.cdiv(N, page_size)
    perm = torch.randperm(B * max_blocks, generator=generator)
    return perm.view(B, max_blocks).to(torch.int32).to(device)


def decode_options(p, device, generator) -> dict:
    """Inputs a decode case's flags ask for: ``varlen`` -> random ``seq_lens`` in [1, N] with the
    first sequence full; ``splits`` -> ``num_splits``; ``schedule`` -> ``schedule``."""
    B, N = p["B"], p["N"]
    out = {}
    if p.get("varlen"):
        lens = torch.randint(1, N + 1, (B,), generator=generator, dtype=torch.int32)
        lens[0] = N
        out["seq_lens"] = lens.to(device)
    if p.get("splits"):
        out["num_splits"] = p["splits"]
    if p.get("schedule"):
        out["schedule"] = p["schedule"]
    return out


def cost(case: Case) -> tuple[float, float]:
    """FLOPs 4*B*H*N*D; bytes: one layer's K and V at context N, q read and o written once."""
    p = case.params
    b = bytes_per_element(case.dtype)
    B, H, H_kv, N, D = p["B"], p["H"], p["H_kv"], p["N"], p["D"]
    flops = formulas.attention_decode_flops(B, H, N, D)
    bytes_ = formulas.kv_cache_bytes(1, H_kv, D, N, b, B) + formulas.attention_qo_bytes(B, H, 1, D, b)
    return float(flops), float(bytes_)


def _case(B, H, H_kv, N, D, dtype, page_size=None, varlen=False, splits=None, schedule=None) -> Case:
    shape = f"B{B}-H{H}-Hkv{H_kv}-N{N}-D{D}"
    return decode_case({"B": B, "H": H, "H_kv": H_kv, "N": N, "D": D}, shape, dtype, page_size, varlen, splits, schedule)


#: case id suffix of a schedule other than the default
SCHEDULE_SUFFIX = {"balanced": "-bal", "splits": "-splits"}


def decode_case(params: dict, shape: str, dtype: str, page_size=None, varlen=False, splits=None, schedule=None) -> Case:
    """A decode Case with the optional flags added to its params and its readable id."""
    params = dict(params)
    if page_size:
        params["page_size"] = page_size
        shape += f"-page{page_size}"
    if varlen:
        params["varlen"] = True
        shape += "-varlen"
    if splits:
        params["splits"] = splits
        shape += f"-split{splits}"
    if schedule:
        params["schedule"] = schedule
        shape += SCHEDULE_SUFFIX[schedule]
    return Case(shape, params, dtype)


# "test": odd contexts, several splits (some empty for the short sequences), GQA groups of 1, 4, 8.
_TEST = tuple(
    c
    for dt in DTYPES
    for c in (
        _case(2, 8, 2, 123, 64, dt, splits=3),
        _case(3, 4, 4, 63, 128, dt, varlen=True, splits=2),
        _case(2, 8, 1, 500, 64, dt, varlen=True, splits=4),
        _case(2, 4, 2, 100, 64, dt, page_size=16, varlen=True, splits=2),
        # balanced (8 programs when interpreting): runs crossing group boundaries, several groups a run
        _case(2, 8, 2, 123, 64, dt, schedule="balanced"),
        _case(3, 4, 4, 63, 128, dt, varlen=True, schedule="balanced"),
        _case(2, 4, 2, 100, 64, dt, page_size=16, varlen=True, schedule="balanced"),
    )
)
# GPU: H = 32, H_kv = 8, D = 128 (Llama-3-8B's attention), one layer's cache of 0.5 to 8.6 GB.
_QUICK = (_case(8, 32, 8, 32768, 128, "bf16"),)
_FULL = (
    _case(1, 32, 8, 131072, 128, "bf16"),
    _case(8, 32, 8, 32768, 128, "bf16"),
    _case(16, 32, 8, 131072, 128, "bf16"),
    _case(32, 32, 8, 4096, 128, "bf16"),
    _case(64, 32, 8, 16384, 128, "bf16"),
    _case(16, 32, 8, 32768, 128, "bf16", page_size=16),
    # the balanced schedule beside the splits one where the splits grid leaves SMs idle or runs a
    # fractional last wave on an H200's 132 SMs: 128 programs (B1, B8), 1.94 and 3.88 waves (B32, B64)
    _case(1, 32, 8, 131072, 128, "bf16", schedule="balanced"),
    _case(8, 32, 8, 32768, 128, "bf16", schedule="balanced"),
    _case(32, 32, 8, 4096, 128, "bf16", schedule="balanced"),
    _case(64, 32, 8, 16384, 128, "bf16", schedule="balanced"),
)

OP = KernelOp(
    name="decode_attention",
    make_inputs=make_inputs,
    run=decode_attention,
    output=output_like("q"),
    reference=decode_reference,
    cost=cost,
    cases={"test": _TEST, "quick": _QUICK, "full": _FULL},
    tolerance={"bf16": 1e-2, "fp16": 1e-3},
    baseline=sdpa_baseline,
    baselines={
        "torch:matmul": plain(matmul_baseline),
        "sdpa:gather": _gather_then_sdpa,
        **sdpa_factories(_sdpa_inputs, post=lambda o: o[:, :, 0]),
    },
    model_kind="attention",
    dtypes=DTYPES,
    notes="split-KV flash-decoding, GQA groups share each KV read; paged via block table. Baseline: the "
    "fastest of the SDPA backends on the cache and the torch matmul path (a paged cache is gathered "
    "first, inside the timing).",
)
