"""RMSNorm: y = x * rsqrt(mean(x^2) + eps) * w over rows of width D; a memory-bound elementwise op.

``rmsnorm(x[M, D], w[D], eps=1e-6, out=None) -> y[M, D]`` (x and y in bf16, fp16 or fp32, w in
x's dtype). One program normalizes one row in fp32. Rows up to ``MAX_ONE_PASS_D`` wide are held in
registers (x read once); wider rows take two passes over the row in ``BLOCK_D`` chunks (sum of
squares, then normalize), where the second read of a row mostly hits L2. Bytes = read x + write y +
read w once (``formulas.rmsnorm_bytes``). The baseline is ``torch.nn.functional.rms_norm``
(a manual fp32 version where that is missing).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import launch
from kernels.registry import Case, KernelOp, output_like
from kernels.testing import device_randn, torch_dtype
from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element

# untuned: a row of up to 16384 fp32 values (64 KB of registers over 16 warps) stays in registers,
# the limit Liger-Kernel and Unsloth use for one-pass norms; wider rows loop in 4096-wide chunks.
MAX_ONE_PASS_D = 16384
CHUNK_D = 4096


def _num_warps(block_d: int) -> int:
    # untuned: about 8-16 elements per thread, as in Liger-Kernel's calculate_settings
    if block_d >= 8192:
        return 16
    if block_d >= 2048:
        return 8
    return 4


@triton.jit
def _rmsnorm_kernel(
    x_ptr, w_ptr, y_ptr, D, stride_xm, stride_ym, eps,
    BLOCK_D: tl.constexpr, ONE_PASS: tl.constexpr,
):
    pid_m = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + pid_m * stride_xm
    y_row = y_ptr + pid_m * stride_ym
    if ONE_PASS:
        offs_d = tl.arange(0, BLOCK_D)
        mask = offs_d < D
        x = tl.load(x_row + offs_d, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / D + eps)
        w = tl.load(w_ptr + offs_d, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + offs_d, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        sum_sq = tl.zeros((BLOCK_D,), dtype=tl.float32)
        for d0 in range(0, D, BLOCK_D):
            offs_d = d0 + tl.arange(0, BLOCK_D)
            x = tl.load(x_row + offs_d, mask=offs_d < D, other=0.0).to(tl.float32)
            sum_sq += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(sum_sq, axis=0) / D + eps)
        for d0 in range(0, D, BLOCK_D):
            offs_d = d0 + tl.arange(0, BLOCK_D)
            mask = offs_d < D
            x = tl.load(x_row + offs_d, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + offs_d, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + offs_d, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def rmsnorm(
    x: torch.Tensor,
    w: torch.Tensor,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
    max_one_pass_d: int = MAX_ONE_PASS_D,
) -> torch.Tensor:
    """RMS-normalize each row of ``x`` [M, D] and scale by ``w`` [D]; returns ``out`` [M, D].

    ``max_one_pass_d`` (a power of two) is the widest row kept in registers; tests lower it to
    exercise the two-pass path on small rows."""
    if x.ndim != 2:
        raise ValueError(f"rmsnorm: x must be [M, D], got shape {tuple(x.shape)}")
    M, D = x.shape
    if w.shape != (D,):
        raise ValueError(f"rmsnorm: w must be [D] = [{D}], got shape {tuple(w.shape)}")
    if x.dtype not in _DTYPES or w.dtype != x.dtype:
        raise ValueError(f"rmsnorm: x and w must share a dtype in bf16/fp16/fp32, got {x.dtype} and {w.dtype}")
    if x.stride(1) != 1 or not w.is_contiguous():
        raise ValueError("rmsnorm: rows of x and w must be contiguous")
    if not eps > 0:
        raise ValueError(f"rmsnorm: eps must be > 0, got {eps}")
    if out is None:
        out = torch.empty_like(x)
    if out.shape != x.shape or out.dtype != x.dtype or out.stride(1) != 1:
        raise ValueError(f"rmsnorm: out must be {tuple(x.shape)} {x.dtype} with contiguous rows")
    if M == 0:
        return out
    one_pass = triton.next_power_of_2(D) <= max_one_pass_d
    block_d = triton.next_power_of_2(D) if one_pass else min(CHUNK_D, max_one_pass_d)
    launch(
        _rmsnorm_kernel, (M,), x, w, out, D, x.stride(0), out.stride(0), eps,
        BLOCK_D=block_d, ONE_PASS=one_pass, num_warps=_num_warps(block_d),
    )
    return out


def reference(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm in fp64 from the inputs."""
    x64 = x.to(torch.float64)
    rstd = torch.rsqrt(x64.pow(2).mean(dim=-1, keepdim=True) + eps)
    return x64 * rstd * w.to(torch.float64)


def baseline(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``F.rms_norm`` (torch >= 2.4; fused on CUDA in recent versions), else the manual fp32 form."""
    rms_norm = getattr(torch.nn.functional, "rms_norm", None)
    if rms_norm is not None:
        return rms_norm(x, (x.shape[-1],), w, eps)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def _make_inputs(case: Case, device, generator) -> dict:
    M, D = case.params["M"], case.params["D"]
    dt = torch_dtype(case.dtype)
    return {
        "x": device_randn((M, D), dt, device, generator),
        # weights around 1, as trained RMSNorm gains are, but never all equal
        "w": (1.0 + 0.1 * device_randn((D,), torch.float32, device, generator)).to(dt),
        "eps": 1e-6,
    }


def _cost(case: Case) -> tuple[float, float]:
    M, D = case.params["M"], case.params["D"]
    b = bytes_per_element(case.dtype)
    return float(formulas.norm_flops(M, D)), float(formulas.rmsnorm_bytes(M, D, b, b))


def _case(M: int, D: int, dtype: str) -> Case:
    return Case(shape=f"M{M}-D{D}", params={"M": M, "D": D}, dtype=dtype)


OP = KernelOp(
    name="rmsnorm",
    make_inputs=_make_inputs,
    run=rmsnorm,
    output=output_like("x"),
    reference=reference,
    baseline=baseline,
    cost=_cost,
    cases={
        "test": tuple(
            _case(M, D, dt) for (M, D) in ((1, 63), (7, 500), (3, 4097)) for dt in ("bf16", "fp16", "fp32")
        ),
        # 128 MiB in + 128 MiB out
        "quick": (_case(16384, 4096, "bf16"),),
        # rows of Llama-3-8B (4096), Llama-3-70B (8192) and Llama-3.1-405B (16384) widths; 0.25-1 GiB
        # moved each (several times the 50 MB L2); at most 256M elements keeps the suite's time down
        "full": (
            _case(16384, 4096, "bf16"),
            _case(65536, 4096, "bf16"),
            _case(32768, 8192, "bf16"),
            _case(16384, 16384, "bf16"),
            _case(16384, 8192, "fp32"),
        ),
    },
    # the one final rounding to the output dtype: 2-3x the error the CPU measures in bf16 (the
    # interpreter truncates), 5x in fp16, 16x in fp32
    tolerance={"bf16": 8e-3, "fp16": 1e-3, "fp32": 1e-6},
    model_kind="elementwise",
    dtypes=("bf16", "fp16", "fp32"),
    notes="bytes = read x + write y + read w; baseline torch.nn.functional.rms_norm.",
)
