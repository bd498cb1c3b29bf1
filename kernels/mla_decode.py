"""Absorbed MLA decode (DeepSeek-V2/V3 multi-head latent attention) in Triton.

MLA caches one latent per token, c = [c_kv (kv_lora_rank R) | k_rope (rope dim P)], shared by all
heads. Absorbing the key up-projection into the query (q_latent = q_nope W_UK, done before this
kernel) lets decode attend over the latent cache directly:
    score[h, n] = q_latent[h] . c_kv[n] + q_rope[h] . k_rope[n],   out[h] = softmax(score[h]) @ c_kv
and out [B, H, R] stays in latent space (the value up-projection W_UV runs after, outside).

Split-KV like ``kernels/decode_attention.py``: a partial kernel per (block of BLOCK_H heads, chunk
of context, batch), the head block fastest in the grid so the programs sharing a chunk run together
and read it from HBM about once; then a reduce kernel. Cache: contiguous [B, N_max, R + P], or
paged (compile-time flag) [num_blocks, page_size, R + P] with a block table [B, max_blocks] (int32).

Cost: FLOPs 2*B*H*N*(R + P) + 2*B*H*N*R (``formulas.attention_decode_flops`` with D = R + P and
Dv = R); bytes: ``formulas.mla_kv_cache_bytes`` (L = 1) plus q read and out written
(``formulas.attention_qo_bytes`` with S = 1, D = R + P, Dv = R).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels.decode_attention import (
    MAX_SPLITS,
    choose_splits,
    chunk_bounds,
    decode_case,
    decode_options,
    random_block_table,
    combine_splits,
    reduce_splits,
    sm_count,
    split_plan,
)
from kernels.flash_attention import (
    LOG2E,
    check_device,
    dot,
    dot_acc,
    full_fp32,
    interpreting,
    launch_key,
    make_descriptor,
    tma_ready,
    upcast_dots,
)
from kernels.launch import Bound, descriptor_tile_hook, remember
from kernels.registry import Case, KernelOp, output_like
from kernels.sdpa_baselines import plain, sdpa_factories
from kernels.testing import device_randn, torch_dtype
from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element

DTYPES = ("bf16", "fp16")
MAX_TMA_BOX = 256  # elements per dimension of one TMA tile (the hardware limit)


@triton.jit
def _mla_tiles(
    acc0, acc1, l_i, m_i, ql0, ql1, qr, desc_ckv, desc_kpe, table, b, start, end, qk_scale,
    R: tl.constexpr, P: tl.constexpr, BLOCK_N: tl.constexpr, PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr,
    VARLEN: tl.constexpr, UPCAST: tl.constexpr,
):
    # Tiles [start, end) of one sequence's latents (the TMA engine reads rows past the cache as 0;
    # the mask leaves out keys at or past ``end``).
    RH: tl.constexpr = R // 2
    for start_n in range(start, end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        if PAGED:  # BLOCK_N divides PAGE_SIZE: a tile never crosses a page
            page = tl.load(table + start_n // PAGE_SIZE)
            row = start_n % PAGE_SIZE
        else:
            page = b
            row = start_n
        c0 = desc_ckv.load([page, row, 0]).reshape(BLOCK_N, RH)
        c1 = desc_ckv.load([page, row, RH]).reshape(BLOCK_N, RH)
        k_pe = desc_kpe.load([page, row, R]).reshape(BLOCK_N, P)
        qk = dot(ql0, tl.trans(c0), UPCAST)
        qk = dot_acc(ql1, tl.trans(c1), qk, UPCAST)
        qk = dot_acc(qr, tl.trans(k_pe), qk, UPCAST)
        keep = (start_n + tl.arange(0, BLOCK_N)) < end
        if VARLEN:
            if start_n + BLOCK_N > end:
                # a sequence's last tile: rows past its length are unwritten slots (NaN bit patterns
                # included); p = 0 there, but 0 * NaN is NaN, so zero those values. Without VARLEN a
                # tile only crosses the end of the cache, where the TMA engine reads zeros.
                c0 = tl.where(keep[:, None], c0, 0.0)
                c1 = tl.where(keep[:, None], c1, 0.0)
        qk = tl.where(keep[None, :], qk * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        p = p.to(c0.dtype)
        acc0 = dot_acc(p, c0, acc0 * alpha[:, None], UPCAST)
        acc1 = dot_acc(p, c1, acc1 * alpha[:, None], UPCAST)
        m_i = m_new
    return acc0, acc1, l_i, m_i


@triton.jit
def _mla_decode_kernel(
    desc_ql, desc_qr, desc_ckv, desc_kpe, Seq_lens, Block_table, M_part, L_part, Acc_part, O, Counter,
    stride_bt,
    stride_pb, stride_ph,  # M_part, L_part [B, H, SPLITS]
    stride_ab, stride_ah, stride_as,  # Acc_part [B, H, SPLITS, R]
    stride_ob, stride_oh,  # O [B, H, R]
    H, N_ctx, chunk, qk_scale,
    B, SPLITS,  # the grid's batch and split extents: autotune key only (the grid changes with them)
    R: tl.constexpr, P: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
    VARLEN: tl.constexpr, PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr, UPCAST: tl.constexpr,
    FUSED_REDUCE: tl.constexpr,  # combine the splits here (one launch) or in reduce_splits after
):
    # One program: BLOCK_H heads x one context chunk of one sequence. Each latent tile is fetched
    # once by the TMA engine (desc_ckv: the two R/2 halves of c_kv; desc_kpe: k_rope) and used by
    # all BLOCK_H heads, for the scores and, as the value, for both output halves (acc0, acc1:
    # the R-wide output as two R/2-wide accumulators, which the warpgroups split between them).
    RH: tl.constexpr = R // 2
    pid_h = tl.program_id(0)
    pid_split = tl.program_id(1)
    b = tl.program_id(2)
    start, end = chunk_bounds(Seq_lens, b, N_ctx, pid_split, chunk, VARLEN)

    heads = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = heads < H
    offs_rh = tl.arange(0, RH)
    # queries through TMA too (heads past H read as 0): they stay in shared memory for the wgmma
    ql0 = desc_ql.load([b, pid_h * BLOCK_H, 0]).reshape(BLOCK_H, RH)
    ql1 = desc_ql.load([b, pid_h * BLOCK_H, RH]).reshape(BLOCK_H, RH)
    qr = desc_qr.load([b, pid_h * BLOCK_H, 0]).reshape(BLOCK_H, P)

    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc0 = tl.zeros([BLOCK_H, RH], dtype=tl.float32)
    acc1 = tl.zeros([BLOCK_H, RH], dtype=tl.float32)
    # one loop, every tile masked against ``end``: a separate unmasked loop for the whole tiles
    # doubles the code and made ptxas spill at BLOCK_N = 64 (Triton 3.6), for a select per score
    acc0, acc1, l_i, m_i = _mla_tiles(
        acc0, acc1, l_i, m_i, ql0, ql1, qr, desc_ckv, desc_kpe, Block_table + b * stride_bt, b,
        start, end, qk_scale, R, P, BLOCK_N, PAGED, PAGE_SIZE, VARLEN, UPCAST,
    )

    p_off = b * stride_pb + heads * stride_ph + pid_split
    tl.store(M_part + p_off, m_i, mask=h_mask)
    tl.store(L_part + p_off, l_i, mask=h_mask)
    a_ptrs = Acc_part + b * stride_ab + heads[:, None] * stride_ah + pid_split * stride_as + offs_rh[None, :]
    tl.store(a_ptrs, acc0, mask=h_mask[:, None])
    tl.store(a_ptrs + RH, acc1, mask=h_mask[:, None])

    # The reduce, fused (as in decode_attention): the last program of this (sequence, head block)
    # to count itself in combines the splits, a quarter of R at a time, and resets the counter.
    if FUSED_REDUCE:
        _fused_reduce(
            M_part, L_part, Acc_part, O, Counter, b * tl.num_programs(0) + pid_h, b, heads, h_mask,
            stride_pb, stride_ph, stride_ab, stride_ah, stride_as, stride_ob, stride_oh, SPLITS, R, BLOCK_H,
        )


@triton.jit
def _fused_reduce(
    M_part, L_part, Acc_part, O, Counter, slot, b, heads, h_mask,
    stride_pb, stride_ph, stride_ab, stride_ah, stride_as, stride_ob, stride_oh, SPLITS,
    R: tl.constexpr, BLOCK_H: tl.constexpr,
):
    tl.debug_barrier()  # every thread's partial stores before the (one-thread) releasing atomic
    done = tl.atomic_add(Counter + slot, 1)
    if done == SPLITS - 1:
        tl.store(Counter + slot, 0)
        pm = M_part + b * stride_pb + heads * stride_ph
        pl = L_part + b * stride_pb + heads * stride_ph
        RQ: tl.constexpr = R // 4
        offs_rq = tl.arange(0, RQ)
        a0 = Acc_part + b * stride_ab + heads[:, None] * stride_ah + offs_rq[None, :]
        o0 = O + b * stride_ob + heads[:, None] * stride_oh + offs_rq[None, :]
        for q in tl.static_range(4):  # R/4 columns at a time: a small epilogue next to the main loop
            combine_splits(pm, pl, h_mask, a0 + q * RQ, stride_as, o0 + q * RQ, SPLITS, BLOCK_H, RQ)


@descriptor_tile_hook
def _set_blocks(nargs):
    """Autotune pre-hook: the latent descriptors' tiles follow the config being run."""
    h, n, r, p = nargs["BLOCK_H"], nargs["BLOCK_N"], nargs["R"], nargs["P"]
    nargs["desc_ql"].block_shape = [1, h, r // 2]
    nargs["desc_qr"].block_shape = [1, h, p]
    nargs["desc_ckv"].block_shape = [1, n, r // 2]
    nargs["desc_kpe"].block_shape = [1, n, p]


def _config(bn, warps, stages):
    return triton.Config({"BLOCK_H": 64, "BLOCK_N": bn}, num_warps=warps, num_stages=stages, pre_hook=_set_blocks)


# GPU configs, not tuned on a GPU. FlashMLA's shape of the work: 64 heads per program
# (one wgmma M of 64 rows; H = 128 takes two programs per chunk), 8 warps = two warpgroups that
# split the 512-wide output, 32-64 tokens per TMA tile (a [64, 576] bf16 tile is 72 KB per stage).
# (BLOCK_N, warps, stages) per Triton version and per (paged, varlen) variant: those that compile
# for sm_90 without register spills within 227 KB of shared memory (test_mla_decode's compile
# check, with the reduce fused under 3.6). Varlen zeroes the values past a sequence's end in its
# last tile, which costs registers. A variant with no spill-free tile (paged varlen under 3.9,
# 16-token pages varlen under 3.6) runs the smallest tile that fits, spilling; docs/kernels-attention.md.
_ALL_TILES = [(64, 8, 2), (32, 8, 2), (32, 8, 3), (16, 8, 3)]
_TILES_BY_TRITON = {
    "3.6": {
        (False, False): [(64, 8, 2), (32, 8, 2), (32, 8, 3)],
        (True, False): [(64, 8, 2), (32, 8, 2), (16, 8, 3)],
        (False, True): [(32, 8, 2), (32, 8, 3)],
        (True, True): [(32, 8, 2)],
    },
}
_TILES_OTHER = {
    (False, False): [(32, 8, 2), (32, 8, 3)],
    (True, False): [(32, 8, 2), (32, 8, 3), (16, 8, 3)],
    (False, True): [(16, 8, 3)],
    (True, True): [],
}
_TRITON = ".".join(triton.__version__.split(".")[:2])
TILES = _TILES_BY_TRITON.get(_TRITON, _TILES_OTHER)
#: the split reduce fused into the kernel (one launch per call: the last program of a sequence's
#: head block combines, as in decode_attention) where that compiles without spills: Triton 3.6;
#: under 3.9 the fused epilogue made every tile spill, so it launches reduce_splits after
FUSED_REDUCE = _TRITON == "3.6"
#: most splits the fused reduce takes: above it the reduce is a launch of its own (reduce_splits,
#: B * H * R/128 programs). The fused one is a single program per (sequence, head block) reading
#: SPLITS x 64 heads x R fp32 partials: 8 MB at B1's 64 splits, two programs doing it while the
#: other SMs idle (second H200 run: B1 128k 310.8 us, 117 TFLOP/s, against 240-282 TFLOP/s at
#: B16-B128, whose 3-17 splits are 0.4-2.2 MB per head block)
FUSED_REDUCE_MAX_SPLITS = 8
_GPU_CONFIGS = [_config(*t) for t in _ALL_TILES]


def _tile(c):
    return (c.kwargs["BLOCK_N"], c.num_warps, c.num_stages)


def _keep_fitting_tiles(configs, named_args, **kwargs):
    """Autotune pruning: the spill-free tiles listed for this (paged, varlen) variant; a paged cache
    also needs BLOCK_N to divide the page (a TMA tile never crosses a page), preferring tiles of 32+
    tokens. No listed tile fits: the widest 2-stage-or-less one that does (it spills)."""
    paged = bool(kwargs.get("PAGED", named_args.get("PAGED", False)))
    varlen = bool(kwargs.get("VARLEN", named_args.get("VARLEN", False)))
    page = kwargs.get("PAGE_SIZE", named_args.get("PAGE_SIZE", 1)) if paged else CHUNK_ALIGN
    fits = [c for c in configs if c.kwargs["BLOCK_N"] <= page]
    listed = [c for c in fits if _tile(c) in TILES[(paged, varlen)]]
    wide = [c for c in listed if c.kwargs["BLOCK_N"] >= 32]
    return wide or listed or [min(fits, key=lambda c: (abs(c.kwargs["BLOCK_N"] - 32), c.num_stages))]


CHUNK_ALIGN = 64
_mla_decode_autotuned = triton.autotune(
    configs=_GPU_CONFIGS,
    key=["B", "SPLITS", "H", "R", "P", "PAGED", "PAGE_SIZE", "VARLEN"],
    prune_configs_by={"early_config_prune": _keep_fitting_tiles},
)(_mla_decode_kernel)
# Interpreter: one fixed config; 16-token tiles so odd contexts cross tiles within a chunk.
_INTERPRET_BLOCKS = {"BLOCK_H": 16, "BLOCK_N": 16}


#: per-shape launch plans (checks done, descriptors, partial buffers, grid), so a repeated call
#: costs a dict lookup, four descriptor base swaps and the two launches
_PLANS: dict = {}


def _check(q_latent, q_rope, cache, seq_lens, block_table, out):
    """Check the inputs once per shape; returns (B, H, R, P, N_max, page_size)."""
    if q_latent.dim() != 3 or q_rope.dim() != 3:
        raise ValueError(f"q_latent and q_rope must be [B, H, R] and [B, H, P], got {tuple(q_latent.shape)}, {tuple(q_rope.shape)}")
    B, H, R = q_latent.shape
    if q_rope.shape[:2] != (B, H):
        raise ValueError(f"q_rope {tuple(q_rope.shape)} does not match q_latent {tuple(q_latent.shape)} in B, H")
    P = q_rope.shape[2]
    for name, n, hi in (("kv_lora_rank R", R, 2 * MAX_TMA_BOX), ("rope dim P", P, MAX_TMA_BOX)):
        if n < 16 or n & (n - 1) or n > hi:
            raise ValueError(f"{name} = {n} must be a power of two in [16, {hi}]")
    if cache.dim() != 3 or cache.shape[2] != R + P:
        raise ValueError(f"cache must be [*, *, R + P = {R + P}], got {tuple(cache.shape)}")
    if block_table is not None:
        page_size = cache.shape[1]
        if block_table.dim() != 2 or block_table.shape[0] != B or block_table.dtype != torch.int32:
            raise ValueError(f"block_table must be [B={B}, max_blocks] int32, got {tuple(block_table.shape)} {block_table.dtype}")
        if block_table.stride(1) != 1:
            raise ValueError("block_table must be contiguous in its last dimension")
        if page_size < 16 or page_size & (page_size - 1):
            raise ValueError(f"page_size = {page_size} must be a power of two >= 16")
        N_max = block_table.shape[1] * page_size
    else:
        page_size = 1
        if cache.shape[0] != B:
            raise ValueError(f"cache batch {cache.shape[0]} != q batch {B}")
        N_max = cache.shape[1]
    dt = q_latent.dtype
    if dt not in (torch.bfloat16, torch.float16) or q_rope.dtype != dt or cache.dtype != dt:
        raise ValueError(f"q_latent, q_rope and cache must all be bf16 or all fp16, got {dt}, {q_rope.dtype}, {cache.dtype}")
    why = tma_ready(q_latent, q_rope, cache)
    if why:
        raise ValueError(f"q_latent, q_rope and cache must be {why}")
    if seq_lens is not None and (seq_lens.shape != (B,) or seq_lens.dtype != torch.int32):
        raise ValueError(f"seq_lens must be [B={B}] int32, got {tuple(seq_lens.shape)} {seq_lens.dtype}")
    check_device(*(t for t in (q_latent, q_rope, cache, seq_lens, block_table) if t is not None))
    if out.shape != q_latent.shape or out.dtype != dt or out.device != q_latent.device or out.stride(-1) != 1:
        raise ValueError(f"out must be {tuple(q_latent.shape)} {dt} on {q_latent.device}, contiguous in R")
    if B * H == 0 or N_max == 0:
        raise ValueError("MLA decode needs B, H and the cache length >= 1")
    return B, H, R, P, N_max, page_size


def _plan(q_latent, q_rope, cache, seq_lens, block_table, sm_scale, num_splits, out):
    B, H, R, P, N_max, page_size = _check(q_latent, q_rope, cache, seq_lens, block_table, out)
    interp = interpreting()
    block_h = _INTERPRET_BLOCKS["BLOCK_H"] if interp else 64
    head_blocks = triton.cdiv(H, block_h)
    splits = choose_splits(B * head_blocks, N_max, sm_count(q_latent.device)) if num_splits is None else num_splits
    if not 1 <= splits <= MAX_SPLITS:
        raise ValueError(f"num_splits = {splits} must be in [1, {MAX_SPLITS}]")
    chunk, splits = split_plan(N_max, splits, _INTERPRET_BLOCKS["BLOCK_N"] if interp else CHUNK_ALIGN)
    dev = q_latent.device
    m_part = torch.empty((B, H, splits), dtype=torch.float32, device=dev)
    l_part = torch.empty_like(m_part)
    acc_part = torch.empty((B, H, splits, R), dtype=torch.float32, device=dev)
    counter = torch.zeros((B * head_blocks,), dtype=torch.int32, device=dev)  # the fused reduce's
    bn = _INTERPRET_BLOCKS["BLOCK_N"] if interp else 64
    descs = (
        make_descriptor(q_latent, [1, block_h, R // 2]),
        make_descriptor(q_rope, [1, block_h, P]),
        make_descriptor(cache, [1, bn, R // 2]),
        make_descriptor(cache, [1, bn, P]),
    )
    scale = 1.0 / math.sqrt(R + P) if sm_scale is None else sm_scale
    tail = (
        block_table.stride(0) if block_table is not None else 0,
        m_part.stride(0), m_part.stride(1),
        acc_part.stride(0), acc_part.stride(1), acc_part.stride(2),
        out.stride(0), out.stride(1),
        H, N_max, chunk, scale * LOG2E, B, splits,
    )
    consts = dict(
        R=R, P=P, VARLEN=seq_lens is not None, PAGED=block_table is not None, PAGE_SIZE=page_size,
        FUSED_REDUCE=FUSED_REDUCE and splits <= FUSED_REDUCE_MAX_SPLITS,
    )
    if interp:
        consts.update(_INTERPRET_BLOCKS, UPCAST=upcast_dots(q_latent.dtype))
        kernel, grid = _mla_decode_kernel, (head_blocks, splits, B)
    else:
        consts["UPCAST"] = False
        kernel, grid = _mla_decode_autotuned, (head_blocks, splits, B)
    return kernel, grid, descs, (m_part, l_part, acc_part, counter), tail, consts


def mla_decode(
    q_latent: torch.Tensor,
    q_rope: torch.Tensor,
    cache: torch.Tensor,
    seq_lens: torch.Tensor | None = None,
    block_table: torch.Tensor | None = None,
    sm_scale: float | None = None,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """One absorbed-MLA decode step.

    q_latent [B, H, R] (query absorbed into the latent space, R = kv_lora_rank), q_rope [B, H, P];
    cache [B, N_max, R + P] (latent then rope part per token) or, with ``block_table``
    [B, max_blocks] int32, a paged cache [num_blocks, page_size, R + P] (page_size a power of two
    >= 16). R a power of two in [16, 512], P in [16, 256] (DeepSeek-V3: R = 512, P = 64); bf16 or
    fp16; the cache TMA-addressable (16-byte aligned, 16-byte multiple strides). seq_lens [B] int32
    in [1, N_max] (not checked: that would need a device sync); None: all N_max. ``sm_scale``
    defaults to 1/sqrt(R + P); DeepSeek-V3 uses 1/sqrt(128 + 64) (its per-head q.k width before
    absorption). Returns out [B, H, R] in the input dtype."""
    if out is None:
        out = torch.empty_like(q_latent)
    key = launch_key(q_latent, q_rope, cache, out, seq_lens, block_table, sm_scale, num_splits)
    plan = _PLANS.get(key)
    if plan is None:
        kernel, grid, descs, bufs, tail, consts = _plan(q_latent, q_rope, cache, seq_lens, block_table, sm_scale,
                                                        num_splits, out)
        m_part, l_part, acc_part, counter = bufs
        # everything but lens, table and out fixed (the descriptors' bases are swapped per call)
        bound = Bound(kernel, grid, [*descs, None, None, m_part, l_part, acc_part, None, counter, *tail], consts,
                      BOUND_SLOTS)
        plan = remember(_PLANS, key, (kernel, grid, descs, bufs, tail, consts, bound))
    elif (q_latent.data_ptr() | q_rope.data_ptr() | cache.data_ptr()) % 16:
        raise ValueError("q_latent, q_rope and cache must be 16-byte aligned (the TMA engine's rule)")
    _, _, descs, (m_part, l_part, acc_part, _), _, consts, bound = plan
    for d, t in zip(descs, (q_latent, q_rope, cache, cache)):
        d.base = t
    lens = seq_lens if seq_lens is not None else q_latent  # not read when VARLEN is False
    table = block_table if block_table is not None else q_latent  # not read when PAGED is False
    bound(lens, table, out)
    if not consts["FUSED_REDUCE"]:
        reduce_splits(m_part, l_part, acc_part, out)
    return out


#: positions of lens, table and out in the kernel's arguments (after the four descriptors)
BOUND_SLOTS = (4, 5, 9)


# ------------------------------------------------------------------------------------------------
# Reference, baseline, cost, cases
# ------------------------------------------------------------------------------------------------


def _sequence_latents(cache, b, length, block_table):
    """Sequence b's first ``length`` cached latents [length, R + P]."""
    if block_table is None:
        return cache[b, :length]
    page_size = cache.shape[1]
    t = torch.arange(length, device=cache.device)
    return cache[block_table[b].long()[t // page_size], t % page_size]


def mla_reference(q_latent, q_rope, cache, seq_lens=None, block_table=None, sm_scale=None, **_):
    """Absorbed MLA decode in fp32, sequence by sequence -> fp32 [B, H, R]."""
    B, H, R = q_latent.shape
    P = q_rope.shape[2]
    n_max = block_table.shape[1] * cache.shape[1] if block_table is not None else cache.shape[1]
    lens = [n_max] * B if seq_lens is None else seq_lens.tolist()
    scale = 1.0 / math.sqrt(R + P) if sm_scale is None else sm_scale
    out = torch.empty((B, H, R), dtype=torch.float32, device=q_latent.device)
    with full_fp32():
        for b in range(B):
            c = _sequence_latents(cache, b, lens[b], block_table).float()  # [L, R + P]
            s = (q_latent[b].float() @ c[:, :R].T + q_rope[b].float() @ c[:, R:].T) * scale  # [H, L]
            out[b] = torch.softmax(s, dim=-1) @ c[:, :R]
    return out


def matmul_baseline(q_latent, q_rope, cache, seq_lens=None, block_table=None, sm_scale=None, **_):
    """The plain torch path in the input dtype: one batched matmul for the scores against the whole
    latent row ([q_latent | q_rope] . [c_kv | k_rope]), softmax in fp32, a matmul with c_kv.
    A paged cache is gathered first (timed too); ragged seq_lens become a mask."""
    B, H, R = q_latent.shape
    P = q_rope.shape[2]
    if block_table is not None:
        cache = cache[block_table.long()].flatten(1, 2)  # [B, N_max, R + P]
    scale = 1.0 / math.sqrt(R + P) if sm_scale is None else sm_scale
    s = torch.matmul(torch.cat([q_latent, q_rope], dim=-1), cache.transpose(1, 2))  # [B, H, N_max]
    if seq_lens is not None:
        s = s.masked_fill(torch.arange(cache.shape[1], device=s.device)[None, None, :] >= seq_lens[:, None, None], float("-inf"))
    p = torch.softmax(s.float() * scale, dim=-1).to(q_latent.dtype)
    return torch.matmul(p, cache[:, :, :R])


def _sdpa_inputs(q_latent, q_rope, cache, seq_lens=None, block_table=None, sm_scale=None, **_):
    """Absorbed MLA as SDPA with one KV head (untimed set-up): q = [q_latent | q_rope] as one query
    token, K = the whole latent row, V = its c_kv part; ragged lengths as a mask. None for a paged
    cache (torch has no paged SDPA; the matmul path gathers it, timed)."""
    if block_table is not None:
        return None
    R = q_latent.shape[2]
    q = torch.cat([q_latent, q_rope], dim=-1)[:, :, None, :]  # [B, H, 1, R + P]
    k = cache[:, None]  # [B, 1, N, R + P]
    kw = {"scale": 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale}
    if seq_lens is not None:
        kw["attn_mask"] = (torch.arange(cache.shape[1], device=cache.device)[None, :] < seq_lens[:, None].long())[:, None, None, :]
    return q, k, k[..., :R], kw


def make_inputs(case: Case, device, generator) -> dict:
    """Fresh random queries and latent cache; ``varlen``, ``page_size``, ``splits`` as decode_attention."""
    p = case.params
    dt = torch_dtype(case.dtype)
    B, H, N, R, P = p["B"], p["H"], p["N"], p["R"], p["P"]
    inputs = {
        "q_latent": device_randn((B, H, R), dt, device, generator),
        "q_rope": device_randn((B, H, P), dt, device, generator),
        "sm_scale": 1.0 / math.sqrt(p.get("qk_head_dim", R + P)),
    }
    page_size = p.get("page_size")
    if page_size:
        inputs["block_table"] = random_block_table(B, N, page_size, device, generator)
        inputs["cache"] = device_randn((inputs["block_table"].numel(), page_size, R + P), dt, device, generator)
    else:
        inputs["cache"] = device_randn((B, N, R + P), dt, device, generator)
    return inputs | decode_options(p, device, generator)


def cost(case: Case) -> tuple[float, float]:
    """FLOPs 2*B*H*N*(R + P) + 2*B*H*N*R; bytes: the latent cache of one layer, q and out once."""
    p = case.params
    b = bytes_per_element(case.dtype)
    B, H, N, R, P = p["B"], p["H"], p["N"], p["R"], p["P"]
    flops = formulas.attention_decode_flops(B, H, N, R + P, Dv=R)
    bytes_ = formulas.mla_kv_cache_bytes(1, R, P, N, b, B) + formulas.attention_qo_bytes(B, H, 1, R + P, b, Dv=R)
    return float(flops), float(bytes_)


def _case(B, H, N, R, P, dtype, page_size=None, varlen=False, splits=None) -> Case:
    params = {"B": B, "H": H, "N": N, "R": R, "P": P, "qk_head_dim": 192}
    return decode_case(params, f"B{B}-H{H}-N{N}-R{R}-P{P}", dtype, page_size, varlen, splits)


# "test": small latent widths for the interpreter, one case at DeepSeek-V3's R = 512, P = 64; head
# counts that leave a partial head block; odd contexts over several splits.
_TEST = tuple(
    c
    for dt in DTYPES
    for c in (
        _case(2, 20, 123, 64, 32, dt, splits=3),
        _case(3, 16, 63, 128, 16, dt, varlen=True, splits=2),
        _case(2, 8, 100, 64, 32, dt, page_size=16, varlen=True, splits=2),
        _case(1, 16, 77, 512, 64, dt, splits=2),
    )
)
# GPU: DeepSeek-V3 (H = 128, R = 512, P = 64): 1152 bytes per token and layer; caches 0.15-2.4 GB.
_QUICK = (_case(16, 128, 32768, 512, 64, "bf16"),)
_FULL = (
    _case(1, 128, 131072, 512, 64, "bf16"),
    _case(16, 128, 32768, 512, 64, "bf16"),
    _case(64, 128, 32768, 512, 64, "bf16"),
    _case(16, 128, 131072, 512, 64, "bf16"),
    _case(128, 128, 4096, 512, 64, "bf16"),
    _case(64, 128, 16384, 512, 64, "bf16", page_size=64),
)

OP = KernelOp(
    name="mla_decode",
    make_inputs=make_inputs,
    run=mla_decode,
    output=output_like("q_latent"),
    reference=mla_reference,
    cost=cost,
    cases={"test": _TEST, "quick": _QUICK, "full": _FULL},
    tolerance={"bf16": 1e-2, "fp16": 1e-3},
    baseline=matmul_baseline,
    # the matmul path, and SDPA backends that take one shared KV head by enable_gqa (expanding it to
    # 128 heads would copy the cache 128 times); the math backend would expand it internally
    baselines={
        "torch:matmul": plain(matmul_baseline),
        **sdpa_factories(
            _sdpa_inputs, post=lambda o: o[:, :, 0], backends=("sdpa:cudnn", "sdpa:flash", "sdpa:efficient"), max_expand_bytes=0
        ),
    },
    model_kind="attention",
    dtypes=DTYPES,
    notes="absorbed MLA, 64 heads per program, latent tiles by TMA read once for all of them, split-KV; "
    "out in latent space. Baseline: the fastest of the torch matmul path (a paged cache gathered "
    "first, inside the timing) and the SDPA backends that run it.",
)
