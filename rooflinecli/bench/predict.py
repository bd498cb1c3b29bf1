"""The roofline prediction of one measured kernel call, from its FLOPs and bytes (counted by the
kernel's cost function with ``rooflinecli.formulas``) and a spec's ceilings.

Used by ``bench`` (predicted times in each row), ``validate`` and the efficiency fit, so the three
agree on what "predicted" means.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from rooflinecli.formulas import compute_time_s, memory_time_s
from rooflinecli.hardware import HardwareSpec

#: matrix-unit op kinds: an fp32 kernel there runs on the tf32 tensor cores (Triton's default
#: ``tl.dot`` precision for fp32), so its ceiling is the tf32 peak
MATRIX_KINDS = ("gemm", "attention", "moe")


def compute_dtype_for(model_kind: str, dtype: str) -> str:
    """The peak a kernel of ``model_kind`` on ``dtype`` data is held to."""
    if dtype == "fp32" and model_kind in MATRIX_KINDS:
        return "tf32"
    return dtype


class Roof(NamedTuple):
    """Roofline of one call on one spec. ``time_s`` = max(compute, memory). A named tuple: a
    validation builds four per row of a 100,000-row file, and a frozen dataclass cost 1 s of it."""

    compute_time_s: float
    memory_time_s: float
    spec_id: str

    @property
    def time_s(self) -> float:
        return max(self.compute_time_s, self.memory_time_s)

    @property
    def bound(self) -> str:
        """"compute" or "memory": the regime (arithmetic intensity vs the ridge point)."""
        return "compute" if self.compute_time_s > self.memory_time_s else "memory"

    def with_efficiency(self, eff: Mapping[str, float] | None) -> float:
        """max(compute / eff_compute, memory / eff_memory): the calibrated prediction."""
        if not eff:
            return self.time_s
        return max(self.compute_time_s / eff.get("compute", 1.0), self.memory_time_s / eff.get("memory", 1.0))


def roof_maker(spec: HardwareSpec) -> Callable[[float, float, str], Roof | None]:
    """``roof`` on one spec as a function of (flops, bytes, compute dtype), the spec's peaks looked
    up once per compute dtype (a validation builds four roofs for each of 100,000 rows)."""
    peaks: dict[str, float | None] = {}
    bandwidth, spec_id = spec.memory_bandwidth_bytes_per_s, spec.id

    def make(flops: float, bytes_: float, compute_dtype: str) -> Roof | None:
        try:
            peak = peaks[compute_dtype]
        except KeyError:
            peak = peaks[compute_dtype] = spec.peak_flops_per_s(compute_dtype) if compute_dtype in spec.peak_dense_tflops else None
        if peak is None:
            return None
        return _roof_from(flops, bytes_, peak, bandwidth, spec_id)

    return make


def roof(flops: float, bytes_: float, spec: HardwareSpec, compute_dtype: str) -> Roof | None:
    """The roofline of a call, or None when the spec has no peak for ``compute_dtype``."""
    if compute_dtype not in spec.peak_dense_tflops:
        return None
    return _roof_from(flops, bytes_, spec.peak_flops_per_s(compute_dtype), spec.memory_bandwidth_bytes_per_s, spec.id)


def _roof_from(flops: float, bytes_: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float, spec_id: str) -> Roof:
    return Roof(float(compute_time_s(flops, peak_flops_per_s)), float(memory_time_s(bytes_, bandwidth_bytes_per_s)), spec_id)
