"""GEMM against a weight: C[M, N] = A[M, K] @ W[N, K]^T, fp32 accumulation.

Layout: the weight is given as ``W[N, K]`` (``nn.Linear`` layout, K contiguous), the matrix a decode
step streams from HBM; ``gemm(a, w)`` equals ``torch.nn.functional.linear(a, w)`` and the baseline
is ``torch.matmul(a, w.T)`` (one cuBLAS call). The same layout is what fp8 tensor-core MMAs want
(both operands K-major).

Dtypes: bf16 or fp16 in, same dtype out; fp8 e4m3 in (``a_scale``, ``w_scale``: per-tensor fp32
scales, C = (A @ W^T) * a_scale * w_scale) with bf16 out, on GPUs with compute capability >= 8.9;
the fp8 baseline is ``torch._scaled_mm``.

Tiling: grouped tile ordering (``GROUP_M`` row tiles share a column band, for L2 reuse of W).
Two autotuned config sets: "large" for prefill-like M > ``SKINNY_MAX_M`` and "skinny" for
decode-like M <= ``SKINNY_MAX_M``, where W streaming dominates; skinny shapes also split K over
``SPLIT_K`` programs when there are too few output tiles to fill the GPU, each writing an fp32
partial that a second small kernel sums (``_splitk_reduce_kernel``) and casts.

Under ``TRITON_INTERPRET=1`` (CPU tests) autotuning is bypassed: the launcher runs one explicit
small config (``INTERPRET_CONFIG``, or the ``config=`` a test passes), because the interpreter would
otherwise time every config on the CPU. Triton 3.9's interpreter multiplies bf16 dot operands as
their raw uint16 bit patterns; the ``UPCAST`` flag (set only when interpreting bf16) casts tiles to
fp32 before ``tl.dot`` to keep the CPU check meaningful. Compiled runs never set it.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from kernels.registry import Case, KernelOp
from kernels.testing import device_randn, torch_dtype
from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element

#: M at or below which the "skinny" (decode-like) configs and split-K are used
SKINNY_MAX_M = 64
#: largest fp8 e4m3 magnitude, for per-tensor scaling
FP8_E4M3_MAX = 448.0


def _cfg(bm, bn, bk, warps, stages, group_m=8):
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m},
        num_warps=warps,
        num_stages=stages,
    )


# untuned: the large configs are the Hopper-friendly entries of Triton's matmul tutorial
# (03-matrix-multiplication), trimmed to five so first-call autotuning stays a few seconds; the
# BLOCK_M = 64 entries give M = 128..256 enough tiles to fill 132 SMs. Shared memory of the largest:
# (128*64 + 256*64) * 2 B * 3 stages = 147 KB < 227 KB.
LARGE_16BIT = [
    _cfg(128, 256, 64, 8, 3),
    _cfg(128, 128, 64, 8, 4),
    _cfg(64, 256, 32, 4, 4),
    _cfg(128, 128, 32, 4, 4),
    _cfg(64, 128, 64, 4, 4),
]
# untuned: fp8 takes BLOCK_K = 128 (32 bytes per k-row per operand, the MMA's natural depth), as in
# the tutorial's fp8 list.
LARGE_FP8 = [
    _cfg(128, 256, 128, 8, 3),
    _cfg(128, 128, 128, 8, 4),
    _cfg(64, 128, 128, 4, 4),
]


# untuned: skinny tiles keep BLOCK_M at the smallest MMA-friendly size >= M and vary how much of W
# each program streams (BLOCK_N x BLOCK_K) with 3-4 stages in flight, enough bytes in flight per SM
# (Little's law: about 4.8 TB/s x 1 us / 132 SMs = 36 KB) at 1-4 programs per SM.
def _skinny_configs(bm: int) -> list:
    return [_cfg(bm, 64, 128, 4, 4), _cfg(bm, 32, 256, 4, 4), _cfg(bm, 128, 64, 4, 3)]


#: the one config the CPU interpreter runs (small tiles: the interpreter's cost is per tile op)
INTERPRET_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4, "SPLIT_K": 1}


@triton.heuristics({"EVEN_K": lambda args: args["K"] % (args["BLOCK_K"] * args["SPLIT_K"]) == 0})
@triton.jit
def _gemm_kernel(
    a_ptr, w_ptr, c_ptr, ws_ptr, a_scale_ptr, w_scale_ptr,
    M, N, K,
    stride_am, stride_ak, stride_wn, stride_wk, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, EVEN_K: tl.constexpr, HAS_SCALES: tl.constexpr, UPCAST: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    # grouped ordering: GROUP_M row tiles walk one column band of W together (W reused from L2)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # rows past M / N wrap onto valid rows (no load masks); their results are never stored
    offs_am = offs_m % M
    offs_wn = offs_n % N
    k_blocks = tl.cdiv(K, BLOCK_K)
    k_blocks_per_split = tl.cdiv(k_blocks, SPLIT_K)
    kb_start = pid_k * k_blocks_per_split
    kb_end = min(kb_start + k_blocks_per_split, k_blocks)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(kb_start, kb_end):
        offs_k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
        w_ptrs = w_ptr + offs_wn[:, None] * stride_wn + offs_k[None, :] * stride_wk
        if EVEN_K:
            a = tl.load(a_ptrs)
            w = tl.load(w_ptrs)
        else:
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K, other=0.0)
            w = tl.load(w_ptrs, mask=offs_k[None, :] < K, other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(a, tl.trans(w), acc)

    if HAS_SCALES:
        acc = acc * (tl.load(a_scale_ptr) * tl.load(w_scale_ptr))
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if SPLIT_K == 1:
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)
    else:
        ws_ptrs = ws_ptr + pid_k * M * N + offs_m[:, None] * N + offs_n[None, :]
        tl.store(ws_ptrs, acc, mask=mask)


@triton.jit
def _splitk_reduce_kernel(ws_ptr, c_ptr, M, N, stride_cm, stride_cn, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(SPLIT_K):
        acc += tl.load(ws_ptr + s * M * N + offs, mask=mask, other=0.0)
    m = offs // N
    n = offs % N
    tl.store(c_ptr + m * stride_cm + n * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=mask)


_KEY = ["M", "N", "K", "SPLIT_K"]
_large_16bit = triton.autotune(configs=LARGE_16BIT, key=_KEY)(_gemm_kernel)
_large_fp8 = triton.autotune(configs=LARGE_FP8, key=_KEY)(_gemm_kernel)
_skinny = {bm: triton.autotune(configs=_skinny_configs(bm), key=_KEY)(_gemm_kernel) for bm in (16, 32, 64)}

_FP8 = torch.float8_e4m3fn
_IN_DTYPES = (torch.bfloat16, torch.float16, _FP8)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def skinny_block_m(M: int) -> int:
    """BLOCK_M of the skinny configs: the smallest of 16, 32, 64 that covers M."""
    return 16 if M <= 16 else 32 if M <= 32 else 64


def split_k_for(M: int, N: int, K: int, num_sms: int) -> int:
    """untuned heuristic: double the K split (up to 8) while the skinny grid (nominal 64-wide tiles)
    stays within two programs per SM and each split keeps at least 1024 of K; 1 for M > 64.
    N = K = 8192 on 132 SMs: M <= 64 -> 2 (256 programs)."""
    if M > SKINNY_MAX_M:
        return 1
    tiles = triton.cdiv(M, skinny_block_m(M)) * triton.cdiv(N, 64)
    split = 1
    while split < 8 and tiles * split * 2 <= 2 * num_sms and K // (split * 2) >= 1024:
        split *= 2
    return split


def kernel_args(a, w, out, ws, a_scale, w_scale, split_k: int) -> dict:
    """Arguments of ``_gemm_kernel`` but the tile constexprs (also used to compile it ahead of time
    in the tests). ``ws``: fp32 [SPLIT_K, M, N] partials (``out`` when SPLIT_K = 1)."""
    fp8 = a.dtype == _FP8
    M, K = a.shape
    N = w.shape[0]
    return dict(
        a_ptr=a, w_ptr=w, c_ptr=out, ws_ptr=ws,
        # the scale pointers are unused (never traced) unless HAS_SCALES
        a_scale_ptr=a_scale if fp8 else out, w_scale_ptr=w_scale if fp8 else out,
        M=M, N=N, K=K,
        stride_am=a.stride(0), stride_ak=a.stride(1), stride_wn=w.stride(0), stride_wk=w.stride(1),
        stride_cm=out.stride(0), stride_cn=out.stride(1),
        SPLIT_K=split_k, HAS_SCALES=fp8, UPCAST=_interpreting() and a.dtype == torch.bfloat16,
    )


def gemm(
    a: torch.Tensor,
    w: torch.Tensor,
    a_scale: torch.Tensor | None = None,
    w_scale: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    config: dict | None = None,
) -> torch.Tensor:
    """C[M, N] = A[M, K] @ W[N, K]^T (times ``a_scale * w_scale`` for fp8).

    a: [M, K] and w: [N, K], both bf16, both fp16, or both fp8 e4m3 (then ``a_scale`` and
    ``w_scale`` are one-element fp32 tensors and C is bf16). ``config`` (BLOCK_M, BLOCK_N,
    BLOCK_K, GROUP_M, SPLIT_K, optional num_warps/num_stages) bypasses autotuning."""
    if a.ndim != 2 or w.ndim != 2:
        raise ValueError(f"gemm: a must be [M, K] and w [N, K], got {tuple(a.shape)} and {tuple(w.shape)}")
    M, K = a.shape
    N, K_w = w.shape
    if K != K_w:
        raise ValueError(f"gemm: inner dimensions differ: a is [M={M}, K={K}], w is [N={N}, K={K_w}]")
    if a.dtype not in _IN_DTYPES or w.dtype != a.dtype:
        raise ValueError(f"gemm: a and w must share a dtype in bf16/fp16/fp8 e4m3, got {a.dtype} and {w.dtype}")
    if a.device != w.device:
        raise ValueError(f"gemm: a on {a.device} and w on {w.device}")
    fp8 = a.dtype == _FP8
    if fp8:
        for name, s in (("a_scale", a_scale), ("w_scale", w_scale)):
            if s is None or s.numel() != 1 or s.dtype != torch.float32:
                raise ValueError(f"gemm: fp8 inputs need {name} as a one-element fp32 tensor (per-tensor scale)")
    elif a_scale is not None or w_scale is not None:
        raise ValueError("gemm: a_scale/w_scale are for fp8 inputs only")
    out_dtype = torch.bfloat16 if fp8 else a.dtype
    if out is None:
        out = torch.empty((M, N), dtype=out_dtype, device=a.device)
    if out.shape != (M, N) or out.dtype != out_dtype:
        raise ValueError(f"gemm: out must be [{M}, {N}] {out_dtype}, got {tuple(out.shape)} {out.dtype}")
    if M == 0 or N == 0:
        return out
    if max(M * K, N * K, M * N) >= 2**31:
        raise ValueError("gemm: operands above 2^31 elements are not supported (32-bit offsets)")
    if K == 0:
        return out.zero_()

    if config is None and _interpreting():
        config = INTERPRET_CONFIG
    if config is not None:
        split_k = config.get("SPLIT_K", 1)
        kernel = _gemm_kernel
        meta = {k: config[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
        meta.update(num_warps=config.get("num_warps", 4), num_stages=config.get("num_stages", 3))
    else:
        num_sms = torch.cuda.get_device_properties(a.device).multi_processor_count
        split_k = split_k_for(M, N, K, num_sms)
        if M <= SKINNY_MAX_M:
            kernel = _skinny[skinny_block_m(M)]
        else:
            kernel = _large_fp8 if fp8 else _large_16bit
        meta = {}
    if split_k < 1:
        raise ValueError(f"gemm: SPLIT_K must be >= 1, got {split_k}")
    ws = torch.empty((split_k, M, N), dtype=torch.float32, device=a.device) if split_k > 1 else out

    def grid(META):
        return (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]), split_k)

    kernel[grid](**kernel_args(a, w, out, ws, a_scale, w_scale, split_k), **meta)
    if split_k > 1:
        block = 1024  # untuned: a plain streaming reduction of M*N*SPLIT_K fp32 partials
        _splitk_reduce_kernel[(triton.cdiv(M * N, block),)](
            ws, out, M, N, out.stride(0), out.stride(1), SPLIT_K=split_k, BLOCK=block, num_warps=4
        )
    return out


def reference(a, w, a_scale=None, w_scale=None) -> torch.Tensor:
    """A @ W^T in fp64 from the inputs (times the scales for fp8)."""
    c = a.to(torch.float64) @ w.to(torch.float64).T
    if a_scale is not None:
        c = c * (a_scale.to(torch.float64) * w_scale.to(torch.float64))
    return c


def baseline(a, w, a_scale=None, w_scale=None) -> torch.Tensor:
    """cuBLAS: ``torch.matmul(a, w.T)``; fp8: ``torch._scaled_mm`` (cuBLASLt, bf16 out)."""
    if a.dtype == _FP8:
        return torch._scaled_mm(a, w.T, scale_a=a_scale, scale_b=w_scale, out_dtype=torch.bfloat16)
    return torch.matmul(a, w.T)


def quantize_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor fp8 e4m3 quantization: (x / scale).to(fp8) with scale = amax / 448."""
    scale = (x.abs().amax().float() / FP8_E4M3_MAX).clamp(min=1e-12).reshape(1)
    return (x.float() / scale).to(_FP8), scale


def _make_inputs(case: Case, device, generator) -> dict:
    M, N, K = case.params["M"], case.params["N"], case.params["K"]
    if case.dtype == "fp8":
        a, a_scale = quantize_fp8(device_randn((M, K), torch.bfloat16, device, generator))
        w, w_scale = quantize_fp8(device_randn((N, K), torch.bfloat16, device, generator))
        return {"a": a, "w": w, "a_scale": a_scale, "w_scale": w_scale}
    dt = torch_dtype(case.dtype)
    return {"a": device_randn((M, K), dt, device, generator), "w": device_randn((N, K), dt, device, generator)}


def _cost(case: Case) -> tuple[float, float]:
    M, N, K = case.params["M"], case.params["N"], case.params["K"]
    b = bytes_per_element(case.dtype)
    out_b = bytes_per_element("bf16") if case.dtype == "fp8" else b
    return float(formulas.gemm_flops(M, N, K)), float(formulas.gemm_min_bytes(M, N, K, b, out_b))


def _supported(case: Case, spec=None) -> bool:
    """fp8 needs fp8 tensor cores: compute capability >= 8.9 (Ada, Hopper and later)."""
    if case.dtype != "fp8":
        return True
    if not torch.cuda.is_available():
        return _interpreting()  # the CPU interpreter emulates fp8 dots in fp16
    return torch.cuda.get_device_capability() >= (8, 9)


def _case(M: int, N: int, K: int, dtype: str) -> Case:
    return Case(shape=f"M{M}-N{N}-K{K}", params={"M": M, "N": N, "K": K}, dtype=dtype)


#: decode-like sweep: M tokens against an 8192 x 8192 weight (128 MiB of bf16, 2.7x the L2)
SKINNY_MS = (1, 2, 4, 8, 16, 32, 64, 128, 256)

OP = KernelOp(
    name="gemm",
    make_inputs=_make_inputs,
    run=gemm,
    reference=reference,
    baseline=baseline,
    cost=_cost,
    cases={
        "test": (
            *(_case(63, 123, 500, dt) for dt in ("bf16", "fp16", "fp8")),
            _case(1, 123, 500, "bf16"),
            _case(5, 64, 256, "fp16"),
        ),
        "quick": (_case(4096, 4096, 4096, "bf16"), _case(1, 8192, 8192, "bf16"), _case(64, 8192, 8192, "bf16")),
        "full": (
            _case(4096, 4096, 4096, "bf16"),
            _case(8192, 8192, 8192, "bf16"),
            _case(8192, 8192, 8192, "fp8"),
            *(_case(m, 8192, 8192, "bf16") for m in SKINNY_MS),
        ),
    },
    # one final rounding to the output dtype (fp8 inputs are exact; their output is bf16): 2-3x the
    # CPU-measured bf16 error (the interpreter truncates to bf16), 10x the fp16 one
    tolerance={"bf16": 8e-3, "fp16": 2e-3, "fp8": 8e-3},
    model_kind="gemm",
    dtypes=("bf16", "fp16", "fp8"),
    supported=_supported,
    notes="C = A @ W^T with W [N, K] (nn.Linear layout); baseline torch.matmul(a, w.T) / torch._scaled_mm for fp8.",
)
