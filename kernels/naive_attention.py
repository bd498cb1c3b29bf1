"""Standard (naive) attention in Triton: scores and probabilities materialized in HBM.

Three launches, as attention is written without FlashAttention: S = scale * Q K^T (written as an
S x S matrix per head in the input dtype), P = softmax(S) row by row (S read, P written), O = P V
(P read). It exists to measure the traffic FlashAttention avoids: per head it moves
``formulas.naive_attention_hbm_elements(S, D)`` = 4*S*D + 4*S^2 elements, against
``attention_qo_bytes + kv_cache_bytes`` for ``kernels/flash_attention.py`` at equal FLOPs.

Layout as ``flash_attention``: Q, O [B, H, S, D]; K, V [B, H_kv, S, D] (H_kv divides H). The
matmuls run over the whole S x S square; ``causal`` masks in the softmax (as torch's math path).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels.flash_attention import (
    sdpa_inputs,
    attention_reference,
    check_qkv,
    dot_acc,
    interpreting,
    make_inputs,
    upcast_dots,
)
from kernels.registry import Case, KernelOp, output_like
from kernels.sdpa_baselines import plain, sdpa_factories
from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element

DTYPES = ("bf16", "fp16")


@triton.jit
def _naive_attention_matmul_kernel(
    A, Bm, C,
    stride_ab, stride_ah, stride_am, stride_ak,
    stride_bb, stride_bh, stride_bk, stride_bn,
    stride_cb, stride_ch, stride_cm, stride_cn,
    H, M, N, K, scale,
    GROUP: tl.constexpr,  # heads of A (and C) per head of Bm (GQA)
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
):
    # C[b, h] = scale * A[b, h] @ Bm[b, h // GROUP]; K^T is Bm with its strides swapped.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_bh = tl.program_id(2)
    b = (pid_bh // H).to(tl.int64)  # int64: B*H*S*S elements can pass 2^31
    h = (pid_bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + b * stride_ab + h * stride_ah + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = Bm + b * stride_bb + (h // GROUP) * stride_bh + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k0), other=0.0)
        bt = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k0) & (offs_n[None, :] < N), other=0.0)
        acc = dot_acc(a, bt, acc, UPCAST)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = C + b * stride_cb + h * stride_ch + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, (acc * scale).to(C.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _naive_attention_softmax_kernel(
    Sc, P, n_rows, N, stride_row, CAUSAL: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # ROWS whole rows of the [B*H*S, S] score matrix per program; fp32 inside, input dtype out.
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    rows_in = tl.minimum(rows, n_rows - 1)  # the last program recomputes row n_rows-1, stores nothing extra
    cols = tl.arange(0, BLOCK_N)
    keep = cols[None, :] < N
    if CAUSAL:
        keep = keep & (cols[None, :] <= (rows_in[:, None] % N))  # query index = row within its head
    s = tl.load(Sc + rows_in[:, None].to(tl.int64) * stride_row + cols[None, :], mask=keep, other=float("-inf"))
    s = s.to(tl.float32)
    s = s - tl.max(s, 1)[:, None]
    e = tl.exp(s)
    p = e / tl.sum(e, 1)[:, None]
    ptrs = P + rows[:, None].to(tl.int64) * stride_row + cols[None, :]
    tl.store(ptrs, p.to(P.dtype.element_ty), mask=(rows[:, None] < n_rows) & (cols[None, :] < N))


# Not tuned on a GPU: Triton's matmul-tutorial tile for Hopper-class GPUs; interpreted,
# 32-wide tiles keep numpy work per program small while odd shapes still cross tile edges.
_MATMUL_BLOCKS_GPU = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}
_MATMUL_BLOCKS_INTERPRET = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}


def _matmul(a, b_mat, c, H, M, N, K, scale, group, upcast):
    """c[b, h] = scale * a[b, h] @ b_mat[b, h // group]; operands as 4-d strided views."""
    blocks = _MATMUL_BLOCKS_INTERPRET if interpreting() else _MATMUL_BLOCKS_GPU
    grid = (triton.cdiv(M, blocks["BLOCK_M"]), triton.cdiv(N, blocks["BLOCK_N"]), a.shape[0] * H)
    _naive_attention_matmul_kernel[grid](
        a, b_mat, c,
        a.stride(0), a.stride(1), a.stride(2), a.stride(3),
        b_mat.stride(0), b_mat.stride(1), b_mat.stride(2), b_mat.stride(3),
        c.stride(0), c.stride(1), c.stride(2), c.stride(3),
        H, M, N, K, scale, GROUP=group, UPCAST=upcast, **blocks,
    )


def naive_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    sm_scale: float | None = None,
    out: torch.Tensor | None = None,
    scores: torch.Tensor | None = None,
    probs: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention through HBM. q [B, H, S, D]; k, v [B, H_kv, S, D] (H_kv divides H); bf16 or fp16.
    ``scores`` and ``probs`` ([B, H, S, S], q's dtype) may be passed to reuse buffers; they hold
    S and P afterwards. Returns o [B, H, S, D] (into ``out`` when given)."""
    B, H, H_kv, S, D = check_qkv(q, k, v)
    square = (B, H, S, S)
    for name, buf in (("scores", scores), ("probs", probs)):
        if buf is not None and (tuple(buf.shape) != square or buf.dtype != q.dtype or not buf.is_contiguous()):
            raise ValueError(f"{name} must be a contiguous {square} {q.dtype} tensor")
    if out is None:
        out = torch.empty_like(q)
    elif out.shape != q.shape or out.dtype != q.dtype or out.device != q.device:
        raise ValueError(f"out must be {tuple(q.shape)} {q.dtype} on {q.device}")
    if S == 0 or B * H == 0:
        return out
    scores = torch.empty(square, dtype=q.dtype, device=q.device) if scores is None else scores
    probs = torch.empty(square, dtype=q.dtype, device=q.device) if probs is None else probs
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    up = upcast_dots(q.dtype)
    group = H // H_kv

    # 1. scores = scale * Q K^T  (K^T: the [B, H_kv, D, S] view of k)
    _matmul(q, k.transpose(2, 3), scores, H, S, S, D, scale, group, up)
    # 2. probs = softmax(scores) per row; a row of up to 8k fp32 values fits one program's registers
    BLOCK_N = triton.next_power_of_2(S)
    rows_per_program = max(1, min(16, 2048 // BLOCK_N))  # untuned: ~2k elements per program
    n_rows = B * H * S
    warps = 4 if BLOCK_N <= 2048 else 8  # untuned: 8 warps keep an 8k row at 32 values per thread
    grid = (triton.cdiv(n_rows, rows_per_program),)
    kw = {} if interpreting() else {"num_warps": warps}
    _naive_attention_softmax_kernel[grid](
        scores, probs, n_rows, S, S, CAUSAL=causal, ROWS=rows_per_program, BLOCK_N=BLOCK_N, **kw
    )
    # 3. out = probs @ V
    _matmul(probs, v, out, H, S, D, S, 1.0, group, up)
    return out


def math_baseline(q, k, v, causal=False, sm_scale=None, **_):
    """torch's math attention, step by step: matmul, (mask,) softmax, matmul, all through HBM."""
    B, H, S, D = q.shape
    group = H // k.shape[1]
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    s = torch.matmul(q * scale, k.transpose(-1, -2))
    if causal:
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def cost(case: Case) -> tuple[float, float]:
    """FLOPs of both full S x S matmuls (the mask does not skip work here) and the standard-attention
    HBM traffic: naive_attention_hbm_elements(S, D) per head x B*H x bytes per element."""
    p = case.params
    b = bytes_per_element(case.dtype)
    flops = formulas.attention_prefill_flops(p["B"], p["H"], p["S"], p["D"], causal=False)
    bytes_ = formulas.naive_attention_hbm_elements(p["S"], p["D"]) * b * p["B"] * p["H"]
    return float(flops), float(bytes_)


def _case(B, H, H_kv, S, D, causal, dtype) -> Case:
    mask = "causal" if causal else "full"
    return Case(f"B{B}-H{H}-Hkv{H_kv}-S{S}-D{D}-{mask}", {"B": B, "H": H, "H_kv": H_kv, "S": S, "D": D, "causal": causal}, dtype)


_TEST = tuple(
    _case(B, H, H_kv, S, D, causal, dt)
    for (B, H, H_kv, S, D, causal) in [
        (1, 2, 2, 63, 64, False),
        (2, 2, 1, 123, 64, True),
        (1, 2, 2, 100, 128, False),
    ]
    for dt in DTYPES
)
# GPU cases: MHA (the traffic formula counts K and V per query head), S <= 8k so that the two
# S x S matrices per head (2*B*H*S^2*2 bytes: 4 GB at B*H = 16, S = 8k) fit beside the reference.
_QUICK = (_case(1, 16, 16, 2048, 128, False, "bf16"),)
_FULL = (
    _case(4, 32, 32, 1024, 128, False, "bf16"),
    _case(1, 32, 32, 2048, 128, False, "bf16"),
    _case(1, 32, 32, 4096, 128, False, "bf16"),
    _case(1, 32, 32, 4096, 128, True, "bf16"),
    _case(1, 16, 16, 8192, 128, False, "bf16"),
    _case(2, 32, 32, 2048, 64, False, "bf16"),
)

OP = KernelOp(
    name="naive_attention",
    make_inputs=make_inputs,
    run=naive_attention,
    output=output_like("q"),
    reference=attention_reference,
    cost=cost,
    cases={"test": _TEST, "quick": _QUICK, "full": _FULL},
    # S and P are rounded to the input dtype in HBM: looser than flash_attention's. bf16: Triton's
    # interpreter truncates fp32 -> bf16 (the GPU rounds to nearest), about 2x the GPU's error.
    tolerance={"bf16": 2e-2, "fp16": 2e-3},
    baseline=math_baseline,
    # torch's math attention step by step (GQA by repeated K/V, as the kernel's traffic counts them),
    # and SDPA pinned to its math backend
    baselines={
        "torch:matmul-softmax": plain(math_baseline),
        **sdpa_factories(sdpa_inputs, backends=("sdpa:math",)),
    },
    model_kind="attention",
    dtypes=DTYPES,
    notes="matmul -> softmax -> matmul with S and P in HBM; baseline the faster of torch's math "
    "attention written out and SDPA's math backend.",
)
