"""Mixture-of-experts FFN: top-k routing, grouped SwiGLU GEMMs over the routed tokens, combine.

``moe(hidden[T, d], w1[E, 2I, d], w2[E, d, I], topk_ids[T, k], topk_weights[T, k]) -> out[T, d]``
with out[t] = sum_j topk_weights[t, j] * expert_{topk_ids[t, j]}(hidden[t]) and
expert_e(x) = w2[e] @ (silu(w1[e, :I] @ x) * (w1[e, I:] @ x)) (gate rows first, then up rows, as in
vLLM's fused w13). ``route(router_logits, k)`` gives ids and weights from logits (softmax, top-k,
renormalized, Mixtral/Qwen3 style).

Four launches (``moe``), none reading anything back to the host, so the op can be captured in a
CUDA graph:
1. Alignment (Triton): counts the T*k (token, choice) slots per expert, pads each expert's run to
   a multiple of ``BLOCK_M`` and writes the slots sorted by expert (stable: in slot order within an
   expert) plus the expert of each block of ``BLOCK_M`` sorted slots, into buffers sized for the
   worst case (``padded_slots``), unused blocks marked -1. Up to ``ALIGN_MULTI_MIN_CHUNKS`` chunks
   of 64 slots (decode): one program, ``_align_kernel``, looping over the chunks. More (prefill):
   three launches of many programs, ``_align_count_kernel`` (per chunk: a histogram and each slot's
   rank within its chunk's slots of its expert), ``_align_scan_kernel`` (per expert: prefix sums of
   the chunk counts, and the totals) and ``_align_scatter_kernel`` (per chunk: each slot to expert
   start + chunk prefix + rank; the padding sentinel and block experts), same result. (So the
   layer is four to six launches.) One token (T = 1, int32 ids: batch-1 decode) needs no
   alignment: block j is slot j alone, its expert ``topk_ids[0, j]`` read straight from the ids,
   and the sorted slots a constant pattern the plan writes once (``direct_slots``): three launches.
2. ``_moe_gate_up_kernel`` (Triton): per block and band of ``BLOCK_N`` intermediate columns, gathers
   its tokens' rows of ``hidden`` and multiplies by the expert's gate and up rows of ``w1`` (one w13
   GEMM, two fp32 accumulators), writing silu(gate) * up.
3. ``_moe_down_kernel`` (Triton): multiplies by the expert's ``w2``, scales by the routing weight and
   writes each slot's row back at its original (token, choice) position: the un-permute.
4. Combine (torch): sum over the k choices of each token.

Both GEMMs read the weights through TMA tensor descriptors (w1 as [E * 2I, d], w2 as [E * d, I])
and compute swap-AB (W rows on the MMA's M side, the block's tokens on its N side, so a decode block
of 16 tokens still feeds a 64-row warpgroup MMA). Only the experts some token chose are read:
bytes = touched experts' weights + activations.

Baseline: ``torch._grouped_mm`` (CUTLASS grouped GEMM, bf16 only, sm_90+) over the same sorted slots
when available and the shapes are 16-byte aligned; otherwise the Hugging Face style loop over experts
(``torch.where`` per expert: host syncs, not capturable in a CUDA graph).

Tile sizes come from a table by average slots per expert (T*k / E, ``moe_config``); they are not
autotuned because ``BLOCK_M`` also sets the padding of step 1. Under ``TRITON_INTERPRET=1`` bf16
tiles are cast to fp32 before ``tl.dot`` (``UPCAST``; Triton 3.9's interpreter multiplies bf16 bit
patterns).
"""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels.launch import Bound, launch, remember
from kernels.moe_torch import experts as baseline
from kernels.moe_torch import route  # noqa: F401 - re-exported: kernels.moe.route(logits, k)
from kernels.registry import Case, KernelOp, output_like
from kernels.testing import device_randn, torch_dtype
from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element

#: d and I must be multiples of this (TMA: 16-byte aligned weight rows)
DIM_MULTIPLE = 8
#: slots per step of the alignment kernel (its rank computation holds a CHUNK x CHUNK compare and
#: a CHUNK x E_PAD one-hot: 64 x 256 at 128 experts; 8 warps: 197 registers, no spills, Triton 3.6)
ALIGN_CHUNK = 64
ALIGN_WARPS = 8
#: more slots than this many chunks take the three-launch multi-program alignment (``align_multi``):
#: the one-program kernel costs about 2-2.5 us per 64-slot chunk on an H200 at 128 experts (run 2
#: SASS: 40 barriers per chunk), the three launches about 10 us together in a CUDA graph, so they
#: break even near 4 chunks; one launch stays cheaper below (less host time too)
ALIGN_MULTI_MIN_CHUNKS = 4
#: warps of each multi-program alignment kernel (64 slots or one [ALIGN_SCAN_CHUNKS,
#: ALIGN_SCAN_EXPERTS] tile per program)
ALIGN_MULTI_WARPS = 4
#: experts per program of the chunk scan (``_align_scan_kernel``) and its largest tile of chunks
ALIGN_SCAN_EXPERTS = 8
ALIGN_SCAN_CHUNKS = 256


@triton.jit
def _align_kernel(
    ids_ptr, sorted_slots_ptr, block_expert_ptr, num_slots, E, P, NB,
    BLOCK_M: tl.constexpr, E_PAD: tl.constexpr, CHUNK: tl.constexpr,
):
    """One program: sorted_slots[P] (slot t*k + j in expert order, num_slots for padding) and
    block_expert[NB] (the expert of each BLOCK_M run, -1 past the last)."""
    bins = tl.arange(0, E_PAD)
    lanes = tl.arange(0, CHUNK)
    # 1. slots per expert (bin E_PAD - 1 >= E collects the masked lanes)
    counts = tl.zeros((E_PAD,), dtype=tl.int32)
    for c0 in range(0, num_slots, CHUNK):
        offs = c0 + lanes
        ids = tl.load(ids_ptr + offs, mask=offs < num_slots, other=E_PAD - 1).to(tl.int32)
        counts += tl.histogram(ids, E_PAD)
    counts = tl.where(bins < E, counts, 0)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, 0)
    starts = ends - padded
    # 2. padding sentinel everywhere, and each block's expert: the first e with ends[e] > its start
    for p0 in range(0, P, CHUNK):
        offs = p0 + lanes
        tl.store(sorted_slots_ptr + offs, tl.zeros((CHUNK,), dtype=tl.int32) + num_slots, mask=offs < P)
    for b0 in range(0, NB, CHUNK):
        blocks = b0 + lanes
        first = blocks * BLOCK_M
        e = tl.sum((ends[None, :] <= first[:, None]).to(tl.int32), axis=1)
        tl.store(block_expert_ptr + blocks, tl.where(e < E, e, -1), mask=blocks < NB)
    tl.debug_barrier()  # the sentinel stores land before the scatter below overwrites them
    # 3. scatter: position = start of the expert + earlier slots of the same expert (stable)
    seen = starts
    earlier = lanes[None, :] < lanes[:, None]
    for c0 in range(0, num_slots, CHUNK):
        offs = c0 + lanes
        valid = offs < num_slots
        ids = tl.load(ids_ptr + offs, mask=valid, other=E_PAD - 1).to(tl.int32)
        same = (ids[:, None] == ids[None, :]) & earlier
        rank = tl.sum(same.to(tl.int32), axis=1)
        onehot = ids[:, None] == bins[None, :]
        base = tl.sum(tl.where(onehot, seen[None, :], 0), axis=1)
        tl.store(sorted_slots_ptr + base + rank, offs, mask=valid)
        seen += tl.histogram(ids, E_PAD)


@triton.jit
def _align_count_kernel(ids_ptr, counts_ptr, rank_ptr, num_slots, E, E_PAD: tl.constexpr, CHUNK: tl.constexpr):
    """Multi-program alignment, step A (one program per chunk c of CHUNK slots): counts[c, e] (the
    chunk's slots of expert e, rows of E) and rank[s] (earlier slots of s's expert in its chunk)."""
    c = tl.program_id(0)
    lanes = tl.arange(0, CHUNK)
    offs = c * CHUNK + lanes
    valid = offs < num_slots
    ids = tl.load(ids_ptr + offs, mask=valid, other=E_PAD - 1).to(tl.int32)  # masked lanes: bin >= E
    bins = tl.arange(0, E_PAD)
    tl.store(counts_ptr + c * E + bins, tl.histogram(ids, E_PAD), mask=bins < E)
    same = (ids[:, None] == ids[None, :]) & (lanes[None, :] < lanes[:, None])
    tl.store(rank_ptr + offs, tl.sum(same.to(tl.int32), axis=1), mask=valid)


@triton.jit
def _align_scan_kernel(counts_ptr, totals_ptr, num_chunks, E, EB: tl.constexpr, CB: tl.constexpr):
    """Step B (one program per EB experts): counts[c, e] becomes the exclusive prefix over chunks
    (slots of expert e in chunks before c), in place, and totals[e] the expert's slot count; CB
    chunks per step, a running carry between steps."""
    cols = tl.program_id(0) * EB + tl.arange(0, EB)
    in_e = cols < E
    rows = tl.arange(0, CB)
    carry = tl.zeros((EB,), dtype=tl.int32)
    for c0 in range(0, num_chunks, CB):
        r = c0 + rows
        ptrs = counts_ptr + r[:, None] * E + cols[None, :]
        mask = (r < num_chunks)[:, None] & in_e[None, :]
        x = tl.load(ptrs, mask=mask, other=0)
        tl.store(ptrs, tl.cumsum(x, axis=0) - x + carry[None, :], mask=mask)
        carry += tl.sum(x, axis=0)
    tl.store(totals_ptr + cols, carry, mask=in_e)


@triton.jit
def _align_scatter_kernel(
    ids_ptr, counts_ptr, rank_ptr, totals_ptr, sorted_slots_ptr, block_expert_ptr, num_slots, E, NB,
    BLOCK_M: tl.constexpr, E_PAD: tl.constexpr, CHUNK: tl.constexpr,
):
    """Step C (one program per chunk): each slot to start of its expert + its chunk's prefix + its
    rank; then the padding sentinel and block_expert for blocks pid, pid + grid, ... Each position
    is written by one program only: a slot, or padding [start + count, start + padded) / [end, P)."""
    c = tl.program_id(0)
    bins = tl.arange(0, E_PAD)
    in_e = bins < E
    counts = tl.load(totals_ptr + bins, mask=in_e, other=0)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, 0)
    starts = ends - padded
    # this chunk's first position per expert, stored over its own row of prefixes (no other
    # program reads it), then gathered by id after a barrier (read from L2: .cg)
    row = counts_ptr + c * E + bins
    tl.store(row, tl.load(row, mask=in_e, other=0) + starts, mask=in_e)
    tl.debug_barrier()
    lanes = tl.arange(0, CHUNK)
    offs = c * CHUNK + lanes
    valid = offs < num_slots
    ids = tl.load(ids_ptr + offs, mask=valid, other=0).to(tl.int32)
    base = tl.load(counts_ptr + c * E + ids, mask=valid, other=0, cache_modifier=".cg")
    rank = tl.load(rank_ptr + offs, mask=valid, other=0)
    tl.store(sorted_slots_ptr + base + rank, offs, mask=valid)
    # padding and block experts: block b's expert is the first e with ends[e] > b * BLOCK_M
    fill_ends = starts + counts
    sentinel = tl.zeros((BLOCK_M,), dtype=tl.int32) + num_slots
    for b in range(c, NB, tl.num_programs(0)):
        first = b * BLOCK_M
        e = tl.sum((ends <= first).to(tl.int32), axis=0)
        tl.store(block_expert_ptr + b, tl.where(e < E, e, -1))
        fill_from = tl.where(e < E, tl.sum(tl.where(bins == e, fill_ends, 0), axis=0), first)
        pos = first + tl.arange(0, BLOCK_M)
        tl.store(sorted_slots_ptr + pos, sentinel, mask=pos >= fill_from)


@triton.jit
def _moe_gate_up_kernel(
    x_ptr, w1_desc, act_ptr, sorted_slots_ptr, block_expert_ptr,
    num_slots, D, I, top_k, stride_xt, stride_am,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(block_expert_ptr + pid_m)
    if expert < 0:  # a block past the last padded expert run
        return
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slots = tl.load(sorted_slots_ptr + offs_m)
    valid = slots < num_slots  # padding slots hold num_slots
    tokens = tl.where(valid, slots // top_k, 0).to(tl.int64)
    # w1 viewed as [E * 2I, d]: gate rows of this band, and the up rows I further on (rows past
    # the band's end belong to the next rows or expert: their columns are never stored)
    row_gate = expert * 2 * I + pid_n * BLOCK_N
    row_up = row_gate + I
    gate = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    up = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, D, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + tokens[:, None] * stride_xt + offs_k[None, :],
                    mask=valid[:, None] & (offs_k < D)[None, :], other=0.0)
        wg = w1_desc.load([row_gate, k0])
        wu = w1_desc.load([row_up, k0])
        if UPCAST:
            x = x.to(tl.float32)
            wg = wg.to(tl.float32)
            wu = wu.to(tl.float32)
        gate = tl.dot(wg, x.T, gate)
        up = tl.dot(wu, x.T, up)
    act = gate * tl.sigmoid(gate) * up
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    a_ptrs = act_ptr + offs_m[None, :].to(tl.int64) * stride_am + offs_n[:, None]
    tl.store(a_ptrs, act.to(act_ptr.dtype.element_ty), mask=valid[None, :] & (offs_n < I)[:, None])


@triton.jit
def _moe_down_kernel(
    act_ptr, w2_desc, y_ptr, sorted_slots_ptr, block_expert_ptr, topk_weights_ptr,
    num_slots, D, I, stride_am, stride_ys,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(block_expert_ptr + pid_m)
    if expert < 0:
        return
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slots = tl.load(sorted_slots_ptr + offs_m)
    valid = slots < num_slots
    row = expert * D + pid_n * BLOCK_N  # w2 viewed as [E * d, I]
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, I, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(act_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :],
                    mask=valid[:, None] & (offs_k < I)[None, :], other=0.0)
        w = w2_desc.load([row, k0])
        if UPCAST:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(w, a.T, acc)
    route_w = tl.load(topk_weights_ptr + slots, mask=valid, other=0.0).to(tl.float32)
    acc = acc * route_w[None, :]
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    safe_slots = tl.where(valid, slots, 0).to(tl.int64)
    y_ptrs = y_ptr + safe_slots[None, :] * stride_ys + offs_n[:, None]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=valid[None, :] & (offs_n < D)[:, None])


#: per-M configs: (largest average slots per expert T*k/E, config), first match wins. untuned:
#: decode (<= 16 slots per expert) takes 16-token blocks (the smallest wgmma N) and streams 64-row
#: bands of the weights in 128-wide K tiles, 3 stages (2 x 16 KB of w1 per stage in the w13 GEMM,
#: 110 KB in all: two programs per SM, so a grid that is not a whole number of waves, Mixtral T = 1's
#: 448 w13 programs, still keeps every SM streaming at the tail; 3 x 36 KB in flight per program is
#: several times the ~36 KB per SM a 4.8 TB/s stream needs); prefill-like runs take 64/128-token
#: blocks and 128-row bands, as compute-friendly tiles of Triton's matmul tutorial.
MOE_CONFIGS = (
    (16, dict(BLOCK_M=16, BLOCK_N_UP=64, BLOCK_N_DOWN=64, BLOCK_K=128, num_warps=4, num_stages=3)),
    (128, dict(BLOCK_M=64, BLOCK_N_UP=64, BLOCK_N_DOWN=128, BLOCK_K=64, num_warps=4, num_stages=4)),
    (float("inf"), dict(BLOCK_M=128, BLOCK_N_UP=128, BLOCK_N_DOWN=128, BLOCK_K=64, num_warps=8, num_stages=3)),
)


#: decode grids with fewer w13 programs than this (touched experts x I / 64-row bands) take
#: ``NARROW_DECODE_CONFIG``: one per SM of an H200 (132 SMs, hardware_specs/h200.toml)
NARROW_DECODE_MIN_PROGRAMS = 132
#: the decode row with 32-row w13 bands: twice the programs (second H200 run: Qwen3 T = 1, 8 experts
#: x 768 / 64 = 96 w13 programs on 132 SMs, 34.1 us, 52% of copy bandwidth). 32 rows are below
#: the 64-row warpgroup MMA (mma.sync instead), which a weight stream of 16 tokens does not miss;
#: 4 stages of 20 KB keep 80 KB of w1 and tokens in flight per program.
NARROW_DECODE_CONFIG = dict(BLOCK_M=16, BLOCK_N_UP=32, BLOCK_N_DOWN=64, BLOCK_K=128, num_warps=4, num_stages=4)


def moe_config(num_slots: int, E: int, I: int | None = None) -> dict:
    """The ``MOE_CONFIGS`` row for T*k = ``num_slots`` routed over ``E`` experts; with the
    intermediate size ``I``, a decode grid too small for the GPU takes ``NARROW_DECODE_CONFIG``."""
    per_expert = num_slots / max(E, 1)
    cfg = next(cfg for limit, cfg in MOE_CONFIGS if per_expert <= limit)
    if I is not None and cfg is MOE_CONFIGS[0][1]:
        w13_programs = min(E, num_slots) * triton.cdiv(I, cfg["BLOCK_N_UP"])
        if w13_programs < NARROW_DECODE_MIN_PROGRAMS:
            return NARROW_DECODE_CONFIG
    return cfg


#: the config the CPU interpreter runs (small tiles keep the interpreter fast)
INTERPRET_CONFIG = dict(BLOCK_M=16, BLOCK_N_UP=32, BLOCK_N_DOWN=32, BLOCK_K=32, num_warps=4, num_stages=2)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def padded_slots(num_slots: int, E: int, block_m: int) -> int:
    """Worst-case length of the expert-sorted slot list: every touched expert's run (at most
    min(E, T*k) of them) padded by up to block_m - 1, rounded up to whole blocks."""
    return -(-(num_slots + min(E, num_slots) * (block_m - 1)) // block_m) * block_m


def direct_slots(k: int, block_m: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """The sorted-slot list of one token's k slots with one slot per block (``_MoEPlan.direct``):
    block j holds slot j in its first row and padding (``k``, the slot count) in the others; the
    blocks' experts are the ids themselves. [k * block_m] int32."""
    rows = torch.arange(k * block_m, dtype=torch.int32, device=None if out is None else out.device)
    pattern = torch.where(rows % block_m == 0, rows // block_m, torch.full_like(rows, k))
    if out is None:
        return pattern
    return out.copy_(pattern)


def align_multi(num_slots: int) -> bool:
    """Whether ``num_slots`` routed slots take the multi-program alignment (more than
    ``ALIGN_MULTI_MIN_CHUNKS`` chunks of ``ALIGN_CHUNK``)."""
    return num_slots > ALIGN_MULTI_MIN_CHUNKS * ALIGN_CHUNK


def align_scratch_elems(num_slots: int, E: int, multi: bool) -> int:
    """int32 scratch of the multi-program alignment after its P + P / block_m outputs: per-chunk
    counts [chunks, E], a rank per slot and a count per expert (none for the one-program kernel)."""
    return triton.cdiv(num_slots, ALIGN_CHUNK) * E + num_slots + E if multi else 0


def align_by_expert(topk_ids: torch.Tensor, E: int, block_m: int, multi: bool | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort the T*k slots by expert and pad each expert's run to a multiple of ``block_m``, no host
    sync: one Triton launch (``_align_kernel``) up to ``ALIGN_MULTI_MIN_CHUNKS`` chunks of slots,
    else three (``_align_count_kernel``, ``_align_scan_kernel``, ``_align_scatter_kernel``);
    ``multi`` forces one or the other. Both give exactly the same result.

    Returns ``sorted_slots`` [P] int32 (slot index t*k + j, or T*k for padding) and
    ``block_expert`` [P / block_m] int32 (the expert of each block, -1 past the last run), with
    P = ``padded_slots(T*k, E, block_m)``, the worst case, so that no step needs the actual counts
    on the host."""
    n = topk_ids.numel()
    multi = align_multi(n) if multi is None else multi
    return _align(topk_ids, E, block_m, padded_slots(n, E, block_m), triton.next_power_of_2(E + 1), multi=multi)


def _align(topk_ids, E: int, block_m: int, P: int, e_pad: int, buf: torch.Tensor | None = None,
           multi: bool = False):
    """``align_by_expert`` with its sizes precomputed (a plan's repeated calls); ``buf``: a kept
    int32 buffer of P + P / block_m + ``align_scratch_elems`` elements (the plan's), else one is
    allocated."""
    nb = P // block_m
    n = topk_ids.numel()
    if buf is None:  # one allocation
        buf = torch.empty(P + nb + align_scratch_elems(n, E, multi), dtype=torch.int32, device=topk_ids.device)
    sorted_slots, block_expert = buf[:P], buf[P:P + nb]
    ids = topk_ids if topk_ids.is_contiguous() else topk_ids.contiguous()
    if not multi:
        launch(
            _align_kernel, (1,), ids, sorted_slots, block_expert, n, E, P, nb,
            BLOCK_M=block_m, E_PAD=e_pad, CHUNK=ALIGN_CHUNK, num_warps=ALIGN_WARPS,
        )
        return sorted_slots, block_expert
    chunks = triton.cdiv(n, ALIGN_CHUNK)
    o = P + nb  # scratch: counts [chunks, E], then rank [n], then totals [E]
    counts, rank, totals = buf[o:o + chunks * E], buf[o + chunks * E:o + chunks * E + n], buf[o + chunks * E + n:]
    launch(_align_count_kernel, (chunks,), ids, counts, rank, n, E,
           E_PAD=e_pad, CHUNK=ALIGN_CHUNK, num_warps=ALIGN_MULTI_WARPS)
    launch(_align_scan_kernel, (triton.cdiv(E, ALIGN_SCAN_EXPERTS),), counts, totals, chunks, E,
           EB=ALIGN_SCAN_EXPERTS, CB=min(triton.next_power_of_2(chunks), ALIGN_SCAN_CHUNKS),
           num_warps=ALIGN_MULTI_WARPS)
    launch(_align_scatter_kernel, (chunks,), ids, counts, rank, totals, sorted_slots, block_expert, n, E, nb,
           BLOCK_M=block_m, E_PAD=e_pad, CHUNK=ALIGN_CHUNK, num_warps=ALIGN_MULTI_WARPS)
    return sorted_slots, block_expert


_DTYPES = (torch.bfloat16, torch.float16)


def _check(hidden, w1, w2, topk_ids, topk_weights):
    if hidden.ndim != 2 or w1.ndim != 3 or w2.ndim != 3:
        raise ValueError(
            f"moe: need hidden [T, d], w1 [E, 2I, d], w2 [E, d, I]; got {tuple(hidden.shape)}, "
            f"{tuple(w1.shape)}, {tuple(w2.shape)}"
        )
    T, d = hidden.shape
    E, two_I, d_w1 = w1.shape
    I = two_I // 2
    if two_I % 2 or d_w1 != d or tuple(w2.shape) != (E, d, I):
        raise ValueError(
            f"moe: with hidden [T={T}, d={d}], w1 must be [E, 2I, {d}] and w2 [E, {d}, I]; got "
            f"{tuple(w1.shape)} and {tuple(w2.shape)}"
        )
    if d % DIM_MULTIPLE or I % DIM_MULTIPLE:
        raise ValueError(f"moe: d = {d} and I = {I} must be multiples of {DIM_MULTIPLE} (16-byte aligned TMA rows)")
    if hidden.dtype not in _DTYPES or w1.dtype != hidden.dtype or w2.dtype != hidden.dtype:
        raise ValueError(f"moe: hidden, w1, w2 must share bf16 or fp16, got {hidden.dtype}, {w1.dtype}, {w2.dtype}")
    for name, t in (("hidden", hidden), ("w1", w1), ("w2", w2)):
        if not t.is_contiguous() or t.data_ptr() % 16:
            raise ValueError(f"moe: {name} must be contiguous and 16-byte aligned")
    if topk_ids.ndim != 2 or topk_ids.shape[0] != T or topk_weights.shape != topk_ids.shape:
        raise ValueError(
            f"moe: topk_ids and topk_weights must both be [T={T}, k], got {tuple(topk_ids.shape)} "
            f"and {tuple(topk_weights.shape)}"
        )
    if topk_ids.dtype not in (torch.int32, torch.int64) or not topk_weights.is_floating_point():
        raise ValueError(f"moe: topk_ids must be int32/int64 and topk_weights float, got {topk_ids.dtype}, {topk_weights.dtype}")
    if not topk_ids.shape[1] <= E:
        raise ValueError(f"moe: k = {topk_ids.shape[1]} > E = {E} experts")
    return T, d, E, I, topk_ids.shape[1]


def gate_up_args(hidden, w1, act, sorted_slots, block_expert, top_k: int, cfg: dict) -> dict:
    """Arguments of ``_moe_gate_up_kernel`` (also used to compile it ahead of time in the tests)."""
    T, d = hidden.shape
    E, two_I, _ = w1.shape
    return dict(
        x_ptr=hidden, w1_desc=TensorDescriptor(w1, [E * two_I, d], [d, 1], [cfg["BLOCK_N_UP"], cfg["BLOCK_K"]]),
        act_ptr=act, sorted_slots_ptr=sorted_slots, block_expert_ptr=block_expert,
        num_slots=T * top_k, D=d, I=two_I // 2, top_k=top_k, stride_xt=hidden.stride(0), stride_am=act.stride(0),
        BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N_UP"], BLOCK_K=cfg["BLOCK_K"],
        UPCAST=_interpreting() and hidden.dtype == torch.bfloat16,
    )


def down_args(act, w2, y, sorted_slots, block_expert, topk_weights_flat, cfg: dict) -> dict:
    """Arguments of ``_moe_down_kernel``; ``y`` [T*k, d] receives each slot's weighted output."""
    E, d, I = w2.shape
    return dict(
        act_ptr=act, w2_desc=TensorDescriptor(w2, [E * d, I], [I, 1], [cfg["BLOCK_N_DOWN"], cfg["BLOCK_K"]]),
        y_ptr=y, sorted_slots_ptr=sorted_slots, block_expert_ptr=block_expert, topk_weights_ptr=topk_weights_flat,
        num_slots=y.shape[0], D=d, I=I, stride_am=act.stride(0), stride_ys=y.stride(0),
        BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N_DOWN"], BLOCK_K=cfg["BLOCK_K"],
        UPCAST=_interpreting() and act.dtype == torch.bfloat16,
    )


def moe(
    hidden: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    topk_ids: torch.Tensor | None = None,
    topk_weights: torch.Tensor | None = None,
    router_logits: torch.Tensor | None = None,
    top_k: int | None = None,
    out: torch.Tensor | None = None,
    config: dict | None = None,
) -> torch.Tensor:
    """MoE SwiGLU FFN over routed tokens; returns out [T, d] in hidden's dtype.

    Give either ``topk_ids`` [T, k] (int, values in [0, E): not checked, that would need a device
    sync) with ``topk_weights`` [T, k], or ``router_logits`` [T, E] with ``top_k``. d and I must be
    multiples of 8 and the tensors contiguous (TMA)."""
    if router_logits is not None:
        if topk_ids is not None or top_k is None:
            raise ValueError("moe: give router_logits with top_k, or topk_ids with topk_weights, not both")
        topk_ids, topk_weights = route(router_logits, top_k)
    elif topk_ids is None or topk_weights is None:
        raise ValueError("moe: give topk_ids and topk_weights, or router_logits and top_k")
    key = None
    if config is None:
        key = (hidden.shape, hidden.stride(), hidden.dtype, w1.shape, w1.stride(), w1.dtype, w2.shape, w2.stride(),
               w2.dtype, hidden.device, topk_ids.shape, topk_ids.dtype, topk_weights.shape, topk_weights.dtype)
    plan = _PLANS.get(key) if key is not None else None
    if plan is None or (hidden.data_ptr() | w1.data_ptr() | w2.data_ptr()) % 16:
        T, d, E, I, k = _check(hidden, w1, w2, topk_ids, topk_weights)
        if T == 0:
            return _out(out, hidden, T, d)
        cfg = config or (INTERPRET_CONFIG if _interpreting() else moe_config(T * k, E, I))
        plan = _MoEPlan(hidden, w1, w2, k, cfg)
        if key is not None:
            remember(_PLANS, key, plan)
    return plan.launch(hidden, w1, w2, topk_ids, topk_weights, _out(out, hidden, *hidden.shape))


def _out(out, hidden, T, d):
    if out is None:
        return torch.empty((T, d), dtype=hidden.dtype, device=hidden.device)
    if out.shape != (T, d) or out.dtype != hidden.dtype or out.device != hidden.device:
        raise ValueError(f"moe: out must be [{T}, {d}] {hidden.dtype}, got {tuple(out.shape)} {out.dtype}")
    return out


#: launch plans by shapes, strides, dtypes and device: a repeated call builds no descriptor and
#: checks nothing twice
_PLANS: dict = {}


#: largest per-plan activation scratch kept between calls (decode shapes: a few MB)
KEEP_SCRATCH_MAX_BYTES = 64 << 20


class _MoEPlan:
    """One shape's four launches: config, worst-case buffer sizes, the weights' TMA descriptors
    (their ``base`` swapped per call) and every kernel argument that does not change."""

    def __init__(self, hidden, w1, w2, k, cfg):
        T, d = hidden.shape
        E, two_I, _ = w1.shape
        self.T, self.d, self.E, self.I, self.k, self.cfg = T, d, E, two_I // 2, k, cfg
        self.P = padded_slots(T * k, E, cfg["BLOCK_M"])
        self.e_pad = triton.next_power_of_2(E + 1)
        self.nb = self.P // cfg["BLOCK_M"]
        self.align_multi = align_multi(T * k)
        # one token: block j is slot j alone (P = k * BLOCK_M, nb = k), no alignment launch
        self.direct = T == 1
        # shape-only stand-ins (no memory) for the per-call buffers, replaced at every launch
        empty = torch.empty(0, dtype=torch.int32, device="meta")
        act = torch.empty((self.P, self.I), dtype=hidden.dtype, device="meta")
        y = torch.empty((T * k, d), dtype=hidden.dtype, device="meta")
        up = gate_up_args(hidden, w1, act, empty, empty, k, cfg)
        down = down_args(act, w2, y, empty, empty, empty, cfg)
        self.w1_desc, self.w2_desc = up["w1_desc"], down["w2_desc"]
        # positional: the per-call tensors first, then the fixed scalars; constexprs as keywords
        self.up_scalars = tuple(up[n] for n in ("num_slots", "D", "I", "top_k", "stride_xt", "stride_am"))
        self.down_scalars = tuple(down[n] for n in ("num_slots", "D", "I", "stride_am", "stride_ys"))
        opts = dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
        self.up_consts = {n: up[n] for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "UPCAST")} | opts
        self.down_consts = {n: down[n] for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "UPCAST")} | opts
        self.grid_up = (self.nb, triton.cdiv(self.I, cfg["BLOCK_N_UP"]))
        self.grid_down = (self.nb, triton.cdiv(d, cfg["BLOCK_N_DOWN"]))
        self.bufs = None  # (device, alignment buffer, scratch), allocated on the first launch
        # the launches with everything but their per-call tensors fixed (kernels.launch.Bound)
        self.bound_align = None if self.align_multi else Bound(
            _align_kernel, (1,), [None, None, None, T * k, E, self.P, self.nb],
            dict(BLOCK_M=cfg["BLOCK_M"], E_PAD=self.e_pad, CHUNK=ALIGN_CHUNK, num_warps=ALIGN_WARPS), (0, 1, 2))
        self.bound_up = Bound(_moe_gate_up_kernel, self.grid_up, [None, self.w1_desc, None, None, None, *self.up_scalars],
                              self.up_consts, (0, 2, 3, 4))
        self.bound_down = Bound(_moe_down_kernel, self.grid_down,
                                [None, self.w2_desc, None, None, None, None, *self.down_scalars], self.down_consts,
                                (0, 2, 3, 4, 5))

    def launch(self, hidden, w1, w2, topk_ids, topk_weights, out):
        T, d, I, P, k = self.T, self.d, self.I, self.P, self.k
        # The alignment and activation buffers are kept by the plan, not allocated per call: safe
        # because every use is ordered on one stream (a call's kernels and the next call's, or one
        # CUDA graph's replays). Two streams (or graphs replayed concurrently) running the same
        # shape at once would share them: not supported.
        # Kept only up to KEEP_SCRATCH_MAX_BYTES: a prefill-sized scratch is GPU-bound, not host-bound.
        bufs = self.bufs
        if bufs is None or bufs[0] != hidden.device:
            align_elems = P + self.nb + align_scratch_elems(T * k, self.E, self.align_multi)
            bufs = (hidden.device, torch.empty(align_elems, dtype=torch.int32, device=hidden.device),
                    torch.empty(P * I + T * k * d, dtype=hidden.dtype, device=hidden.device))
            if self.direct:
                direct_slots(k, self.cfg["BLOCK_M"], out=bufs[1][:P])
            if bufs[2].numel() * bufs[2].element_size() <= KEEP_SCRATCH_MAX_BYTES:
                self.bufs = bufs
        if self.direct and topk_ids.dtype == torch.int32:  # the plan's ids dtype: it never aligns, its pattern stays
            # block j: slot j, expert ids[0, j] (a strided [1, k] view is copied: k ints)
            sorted_slots, block_expert = bufs[1][:P], (topk_ids if topk_ids.is_contiguous() else topk_ids.contiguous()).view(-1)
        elif self.bound_align is not None:  # decode sizes: the one-program alignment kernel
            sorted_slots, block_expert = bufs[1][:P], bufs[1][P:P + self.nb]
            self.bound_align(topk_ids if topk_ids.is_contiguous() else topk_ids.contiguous(), sorted_slots, block_expert)
        else:
            sorted_slots, block_expert = _align(topk_ids, self.E, self.cfg["BLOCK_M"], P, self.e_pad, bufs[1],
                                                self.align_multi)
        weights_flat = topk_weights.reshape(-1)
        if weights_flat.dtype != torch.float32 or not weights_flat.is_contiguous():
            weights_flat = weights_flat.to(torch.float32).contiguous()
        scratch = bufs[2]
        act = scratch[: P * I].view(P, I)  # P * I * 2 bytes: 16-byte aligned (I % 8 == 0)
        y = scratch[P * I:].view(T * k, d)
        self.w1_desc.base = w1
        self.w2_desc.base = w2
        self.bound_up(hidden, act, sorted_slots, block_expert)
        self.bound_down(act, y, sorted_slots, block_expert, weights_flat)
        torch.sum(y.view(T, k, d), dim=1, out=out)  # combine: fp32 accumulation, one rounding
        return out


def reference(hidden, w1, w2, topk_ids, topk_weights) -> torch.Tensor:
    """Every token through each of its chosen experts, in fp64 from the inputs."""
    T, d = hidden.shape
    I = w2.shape[2]
    x = hidden.to(torch.float64)
    out = torch.zeros((T, d), dtype=torch.float64, device=hidden.device)
    for e in torch.unique(topk_ids).tolist():
        tok, choice = torch.where(topk_ids == e)
        h = x[tok] @ w1[e].to(torch.float64).T
        act = torch.nn.functional.silu(h[:, :I]) * h[:, I:]
        y = act @ w2[e].to(torch.float64).T
        out.index_add_(0, tok, y * topk_weights[tok, choice].to(torch.float64)[:, None])
    return out


# ---------------------------------------------------------------------------------------------
# Cases: routing is drawn from the case's own seed (numpy), so the cost knows which experts it hits
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def case_routing(T: int, E: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform random routing for a case: logits ~ N(0, 1), top-k, renormalized softmax weights.
    Returns (topk_ids [T, k] int32, topk_weights [T, k] float32)."""
    logits = np.random.default_rng(seed).standard_normal((T, E))
    ids = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    chosen = np.take_along_axis(logits, ids, axis=1)
    w = np.exp(chosen - chosen.max(axis=1, keepdims=True))
    return ids.astype(np.int32), (w / w.sum(axis=1, keepdims=True)).astype(np.float32)


def experts_touched(case: Case) -> int:
    """Distinct experts the case's routing hits (the layer reads only these experts' weights)."""
    p = case.params
    ids, _ = case_routing(p["T"], p["E"], p["k"], p["seed"])
    return int(np.unique(ids).size)


def _make_inputs(case: Case, device, generator) -> dict:
    p = case.params
    T, E, k, d, I = p["T"], p["E"], p["k"], p["d"], p["I"]
    dt = torch_dtype(case.dtype)
    ids, weights = case_routing(T, E, k, p["seed"])
    return {
        "hidden": device_randn((T, d), dt, device, generator),
        # weights scaled by 1/sqrt(fan-in), as initialized models are, so outputs stay O(1)
        "w1": device_randn((E, 2 * I, d), dt, device, generator, scale=d**-0.5),
        "w2": device_randn((E, d, I), dt, device, generator, scale=I**-0.5),
        "topk_ids": torch.from_numpy(ids).to(device),
        "topk_weights": torch.from_numpy(weights).to(device),
    }


def _cost(case: Case) -> tuple[float, float]:
    """FLOPs: the two grouped GEMMs over the T*k slots. Bytes: the touched experts' w1 and w2 once,
    hidden read once and out written once (minimum traffic; the kernels' intermediates are extra)."""
    p = case.params
    T, k, d, I = p["T"], p["k"], p["d"], p["I"]
    b = bytes_per_element(case.dtype)
    slots = T * k
    flops = formulas.linear_flops(slots, d, 2 * I) + formulas.linear_flops(slots, I, d)
    expert_bytes = formulas.linear_weight_bytes(d, 2 * I, b) + formulas.linear_weight_bytes(I, d, b)
    bytes_ = experts_touched(case) * expert_bytes + formulas.linear_activation_bytes(T, d, d, b)
    return float(flops), float(bytes_)


def _case(T: int, E: int, k: int, d: int, I: int, dtype: str, seed: int = 0) -> Case:
    params = {"T": T, "E": E, "k": k, "d": d, "I": I, "seed": seed}
    probe = Case(shape="", params=params, dtype=dtype)
    params["experts_touched"] = experts_touched(probe)
    params["expected_experts_touched"] = float(formulas.expected_experts_touched(E, k, T))
    return Case(shape=f"T{T}-E{E}-k{k}-d{d}-I{I}", params=params, dtype=dtype)


def _mixtral(T: int) -> Case:  # Mixtral 8x7B: 8 experts, top-2, d 4096, I 14336
    return _case(T, 8, 2, 4096, 14336, "bf16")


def _qwen3_moe(T: int) -> Case:  # Qwen3-30B-A3B: 128 experts, top-8, d 2048, I 768
    return _case(T, 128, 8, 2048, 768, "bf16")


OP = KernelOp(
    name="moe",
    make_inputs=_make_inputs,
    run=moe,
    output=output_like("hidden"),
    reference=reference,
    baseline=baseline,
    cost=_cost,
    cases={
        "test": (
            _case(1, 8, 2, 64, 96, "bf16"),
            _case(7, 8, 2, 200, 56, "bf16"),
            _case(7, 8, 2, 200, 56, "fp16"),
            _case(33, 16, 4, 128, 40, "bf16"),
            _case(50, 6, 3, 72, 104, "fp16"),
            # Mixtral (E 8, k 2, I / d = 3.5) and Qwen3 (E 128, k 8, I / d = 0.375) scaled down
            _case(4, 8, 2, 128, 448, "bf16"),
            _case(3, 128, 8, 64, 24, "bf16"),
        ),
        "quick": (_mixtral(8), _qwen3_moe(16)),
        "full": (
            *(_mixtral(t) for t in (1, 4, 16, 64, 4096)),
            *(_qwen3_moe(t) for t in (1, 4, 16, 64, 4096)),
        ),
    },
    # roundings of the activation and of each choice's output: 2.4x the CPU-measured bf16 error, 5x fp16
    tolerance={"bf16": 1.6e-2, "fp16": 2e-3},
    model_kind="moe",
    dtypes=("bf16", "fp16"),
    notes=(
        "SwiGLU experts, w1 [E, 2I, d] (gate rows then up rows), w2 [E, d, I]; bytes = distinct experts "
        "hit by the case's routing x expert weights + hidden in + out; params carry experts_touched and "
        "formulas.expected_experts_touched; baseline torch._grouped_mm (bf16) or a loop over experts."
    ),
)
