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
    decode_case,
    decode_options,
    random_block_table,
    reduce_splits,
    sm_count,
    split_plan,
)
from kernels.flash_attention import LOG2E, check_device, dot, dot_acc, full_fp32, interpreting, upcast_dots
from kernels.registry import Case, KernelOp
from kernels.testing import device_randn, torch_dtype
from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element

DTYPES = ("bf16", "fp16")


@triton.jit
def _mla_decode_kernel(
    QL, QR, C, Seq_lens, Block_table, M_part, L_part, Acc_part,
    stride_qlb, stride_qlh, stride_qrb, stride_qrh,
    stride_cb, stride_cn,  # contiguous: (batch, token); paged: (page, slot)
    stride_bt,
    stride_pb, stride_ph,  # M_part, L_part [B, H, SPLITS]
    stride_ab, stride_ah, stride_as,  # Acc_part [B, H, SPLITS, R]
    H, N_ctx, chunk, qk_scale,
    R: tl.constexpr, P: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
    VARLEN: tl.constexpr, PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_h = tl.program_id(0)
    pid_split = tl.program_id(1)
    b = tl.program_id(2)
    if VARLEN:
        seq_len = tl.load(Seq_lens + b)
    else:
        seq_len = N_ctx
    start = pid_split * chunk
    end = tl.minimum(start + chunk, seq_len)

    heads = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = heads < H
    offs_r = tl.arange(0, R)
    offs_p = tl.arange(0, P)
    ql = tl.load(QL + b * stride_qlb + heads[:, None] * stride_qlh + offs_r[None, :], mask=h_mask[:, None], other=0.0)
    qr = tl.load(QR + b * stride_qrb + heads[:, None] * stride_qrh + offs_p[None, :], mask=h_mask[:, None], other=0.0)

    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, R], dtype=tl.float32)
    for start_n in range(start, end, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        in_seq = offs_n < end
        if PAGED:
            page = tl.load(Block_table + b * stride_bt + offs_n // PAGE_SIZE, mask=in_seq, other=0).to(tl.int64)
            row = page * stride_cb + (offs_n % PAGE_SIZE) * stride_cn
        else:
            row = b.to(tl.int64) * stride_cb + offs_n.to(tl.int64) * stride_cn
        c_kv = tl.load(C + row[:, None] + offs_r[None, :], mask=in_seq[:, None], other=0.0)  # [BLOCK_N, R]
        k_pe = tl.load(C + row[:, None] + R + offs_p[None, :], mask=in_seq[:, None], other=0.0)  # [BLOCK_N, P]
        qk = dot(ql, tl.trans(c_kv), UPCAST)
        qk = dot_acc(qr, tl.trans(k_pe), qk, UPCAST) * qk_scale
        qk = tl.where(in_seq[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = dot_acc(p.to(c_kv.dtype), c_kv, acc * alpha[:, None], UPCAST)
        m_i = m_new

    p_off = b * stride_pb + heads * stride_ph + pid_split
    tl.store(M_part + p_off, m_i, mask=h_mask)
    tl.store(L_part + p_off, l_i, mask=h_mask)
    a_ptrs = Acc_part + b * stride_ab + heads[:, None] * stride_ah + pid_split * stride_as + offs_r[None, :]
    tl.store(a_ptrs, acc, mask=h_mask[:, None])


# GPU configs. Untuned (no GPU in development): 16-32 heads per program (the fp32 [BLOCK_H, 512]
# accumulator lives in registers), 16-64 tokens per tile (a [64, 576] bf16 tile is 72 KB of shared
# memory per stage); kept to those that compiled for sm_90 (Triton 3.9, checked offline with ptxas)
# without register spills (64 heads, or 64 tokens on 4 warps, spilled). BLOCK_N divides CHUNK_ALIGN.
CHUNK_ALIGN = 64
_GPU_CONFIGS = [
    triton.Config({"BLOCK_H": 16, "BLOCK_N": 32}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_H": 16, "BLOCK_N": 64}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_H": 32, "BLOCK_N": 32}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_H": 16, "BLOCK_N": 16}, num_warps=4, num_stages=3),
]
_mla_decode_autotuned = triton.autotune(configs=_GPU_CONFIGS, key=["chunk", "H", "R", "P", "PAGED", "VARLEN"])(
    _mla_decode_kernel
)
# Interpreter: one fixed config; BLOCK_N = 32 so odd contexts cross tiles within a chunk.
_INTERPRET_BLOCKS = {"BLOCK_H": 16, "BLOCK_N": 32}


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
    [B, max_blocks] int32, a paged cache [num_blocks, page_size, R + P]. R and P powers of two
    (DeepSeek-V3: R = 512, P = 64); bf16 or fp16. seq_lens [B] int32 in [1, N_max] (not checked);
    None: all N_max. ``sm_scale`` defaults to 1/sqrt(R + P); DeepSeek-V3 uses 1/sqrt(128 + 64)
    (its per-head q.k width before absorption). Returns out [B, H, R] in the input dtype."""
    if q_latent.dim() != 3 or q_rope.dim() != 3:
        raise ValueError(f"q_latent and q_rope must be [B, H, R] and [B, H, P], got {tuple(q_latent.shape)}, {tuple(q_rope.shape)}")
    B, H, R = q_latent.shape
    if q_rope.shape[:2] != (B, H):
        raise ValueError(f"q_rope {tuple(q_rope.shape)} does not match q_latent {tuple(q_latent.shape)} in B, H")
    P = q_rope.shape[2]
    for name, n in (("kv_lora_rank R", R), ("rope dim P", P)):
        if n < 16 or n & (n - 1):
            raise ValueError(f"{name} = {n} must be a power of two >= 16")
    if cache.dim() != 3 or cache.shape[2] != R + P:
        raise ValueError(f"cache must be [*, *, R + P = {R + P}], got {tuple(cache.shape)}")
    paged = block_table is not None
    if paged:
        page_size = cache.shape[1]
        if block_table.dim() != 2 or block_table.shape[0] != B or block_table.dtype != torch.int32:
            raise ValueError(f"block_table must be [B={B}, max_blocks] int32, got {tuple(block_table.shape)} {block_table.dtype}")
        if block_table.stride(1) != 1:
            raise ValueError("block_table must be contiguous in its last dimension")
        if page_size & (page_size - 1):
            raise ValueError(f"page_size = {page_size} must be a power of two")
        N_max = block_table.shape[1] * page_size
    else:
        page_size = 1
        if cache.shape[0] != B:
            raise ValueError(f"cache batch {cache.shape[0]} != q batch {B}")
        N_max = cache.shape[1]
    dt = q_latent.dtype
    if dt not in (torch.bfloat16, torch.float16) or q_rope.dtype != dt or cache.dtype != dt:
        raise ValueError(f"q_latent, q_rope and cache must all be bf16 or all fp16, got {dt}, {q_rope.dtype}, {cache.dtype}")
    if q_latent.stride(-1) != 1 or q_rope.stride(-1) != 1 or cache.stride(-1) != 1:
        raise ValueError("q_latent, q_rope and cache must be contiguous in their last dimension")
    if seq_lens is not None and (seq_lens.shape != (B,) or seq_lens.dtype != torch.int32):
        raise ValueError(f"seq_lens must be [B={B}] int32, got {tuple(seq_lens.shape)} {seq_lens.dtype}")
    check_device(*(t for t in (q_latent, q_rope, cache, seq_lens, block_table) if t is not None))
    if out is None:
        out = torch.empty_like(q_latent)
    elif out.shape != q_latent.shape or out.dtype != dt or out.device != q_latent.device or out.stride(-1) != 1:
        raise ValueError(f"out must be {tuple(q_latent.shape)} {dt} on {q_latent.device}, contiguous in R")
    if B * H == 0 or N_max == 0:
        raise ValueError("MLA decode needs B, H and the cache length >= 1")

    interp = interpreting()
    head_blocks = triton.cdiv(H, 16)  # for sizing the split only; the GPU config picks BLOCK_H
    splits = choose_splits(B * head_blocks, N_max, sm_count(q_latent.device)) if num_splits is None else num_splits
    if not 1 <= splits <= MAX_SPLITS:
        raise ValueError(f"num_splits = {splits} must be in [1, {MAX_SPLITS}]")
    chunk, splits = split_plan(N_max, splits, _INTERPRET_BLOCKS["BLOCK_N"] if interp else CHUNK_ALIGN)
    m_part = torch.empty((B, H, splits), dtype=torch.float32, device=q_latent.device)
    l_part = torch.empty_like(m_part)
    acc_part = torch.empty((B, H, splits, R), dtype=torch.float32, device=q_latent.device)
    lens = seq_lens if seq_lens is not None else q_latent  # not read when VARLEN is False
    table = block_table if paged else q_latent
    scale = 1.0 / math.sqrt(R + P) if sm_scale is None else sm_scale
    args = (
        q_latent, q_rope, cache, lens, table, m_part, l_part, acc_part,
        q_latent.stride(0), q_latent.stride(1), q_rope.stride(0), q_rope.stride(1),
        cache.stride(0), cache.stride(1),
        table.stride(0),
        m_part.stride(0), m_part.stride(1),
        acc_part.stride(0), acc_part.stride(1), acc_part.stride(2),
        H, N_max, chunk, scale * LOG2E,
    )
    flags = dict(R=R, P=P, VARLEN=seq_lens is not None, PAGED=paged, PAGE_SIZE=page_size)
    if interp:
        grid = (triton.cdiv(H, _INTERPRET_BLOCKS["BLOCK_H"]), splits, B)
        _mla_decode_kernel[grid](*args, UPCAST=upcast_dots(dt), **_INTERPRET_BLOCKS, **flags)
    else:
        def grid(meta):
            return (triton.cdiv(H, meta["BLOCK_H"]), splits, B)

        _mla_decode_autotuned[grid](*args, UPCAST=False, **flags)
    reduce_splits(m_part, l_part, acc_part, out)
    return out


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
    reference=mla_reference,
    cost=cost,
    cases={"test": _TEST, "quick": _QUICK, "full": _FULL},
    tolerance={"bf16": 1e-2, "fp16": 1e-3},
    baseline=matmul_baseline,
    model_kind="attention",
    dtypes=DTYPES,
    notes="absorbed MLA over the latent cache, split-KV; out in latent space. Baseline torch matmul path "
    "(a paged cache is gathered first, inside the timing).",
)
