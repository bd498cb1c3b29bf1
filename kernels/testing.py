"""Correctness helpers shared by the tests and the benchmark's pre-timing check."""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: default relative-error tolerances ||out - ref|| / ||ref|| per dtype (see ../shared METHOD)
DEFAULT_TOLERANCE = {"fp32": 1e-4, "tf32": 2e-3, "bf16": 1.6e-2, "fp16": 4e-3, "fp8": 8e-2}

TORCH_DTYPES = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp64": torch.float64,
}


def torch_dtype(name: str) -> torch.dtype:
    if name == "fp8":
        return torch.float8_e4m3fn
    return TORCH_DTYPES[name]


def poisoned(shape, dtype, device) -> torch.Tensor:
    """An output buffer filled with NaN, so an element a kernel forgets to write fails the check."""
    if dtype in (torch.float8_e4m3fn,):
        return torch.full(shape, float("nan"), dtype=torch.float32, device=device).to(dtype)
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def randn(shape, dtype, device, generator, scale: float = 1.0) -> torch.Tensor:
    """Fresh standard-normal values (never zeros), drawn in fp32 then cast."""
    x = torch.randn(shape, generator=generator, device="cpu", dtype=torch.float32) * scale
    return x.to(device=device).to(dtype)


@dataclass(frozen=True)
class Comparison:
    rel_error: float
    ok: bool
    message: str


def compare(out: torch.Tensor, ref: torch.Tensor, tol: float, abs_floor: float = 1e-6) -> Comparison:
    """Relative error ||out - ref|| / max(||ref||, floor), with a readable mismatch report:
    how many elements differ, where the first ones are, NaN and inf counted apart."""
    if out.shape != ref.shape:
        return Comparison(float("inf"), False, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    o = out.detach().to(torch.float64).cpu()
    r = ref.detach().to(torch.float64).cpu()
    n_nan = int(torch.isnan(o).sum())
    n_inf = int(torch.isinf(o).sum())
    if n_nan or n_inf:
        bad = torch.nonzero(~torch.isfinite(o))[:5].tolist()
        return Comparison(
            float("inf"), False, f"{n_nan} NaN and {n_inf} inf of {o.numel()} elements (first at {bad})"
        )
    denom = max(float(torch.linalg.vector_norm(r)), abs_floor)
    rel = float(torch.linalg.vector_norm(o - r)) / denom
    if rel <= tol:
        return Comparison(rel, True, f"rel error {rel:.3e} <= {tol:.1e}")
    elem_tol = tol * max(float(r.abs().max()), abs_floor)
    diff = (o - r).abs() > elem_tol
    where = torch.nonzero(diff)[:5].tolist()
    return Comparison(
        rel,
        False,
        f"rel error {rel:.3e} > {tol:.1e}; {int(diff.sum())} of {o.numel()} elements differ by more than "
        f"{elem_tol:.2e} (first at {where})",
    )


def assert_close(out: torch.Tensor, ref: torch.Tensor, tol: float, what: str = "") -> float:
    c = compare(out, ref, tol)
    assert c.ok, f"{what}: {c.message}"
    return c.rel_error


def device_randn(shape, dtype, device, generator, scale: float = 1.0) -> torch.Tensor:
    """Like ``randn``, but drawn on ``device`` itself from a generator seeded by ``generator``:
    fresh random values for GPU inputs of several GB without a CPU round trip (``randn`` draws on
    the CPU, which takes tens of seconds at that size). On the CPU it is ``randn``."""
    if torch.device(device).type == "cpu":
        return randn(shape, dtype, device, generator, scale)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    direct = dtype in (torch.float32, torch.bfloat16, torch.float16)  # no fp32 copy at full size
    x = torch.randn(shape, generator=g, device=device, dtype=dtype if direct else torch.float32)
    if scale != 1.0:
        x.mul_(scale)
    return x if direct else x.to(dtype)
