"""The frozen dataclasses of a GPU spec (``HardwareSpec``, ``Source``) and their derived figures.

Nothing here reads a file: ``rooflinecli.hardware.schema`` turns a parsed spec file into a
``HardwareSpec`` and ``rooflinecli.hardware.loader`` finds and loads the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rooflinecli.errors import RooflineError

GB = 1e9
TB = 1e12


@dataclass(frozen=True)
class Source:
    """Where a spec's figures come from: a document's title and address."""

    title: str
    url: str
    note: str = ""


@dataclass(frozen=True)
class HardwareSpec:
    """One GPU's ceilings. Throughputs are dense; bandwidths in bytes/s are derived properties."""

    id: str
    name: str
    vendor: str
    kind: str  # "datasheet" | "measured"
    peak_dense_tflops: Mapping[str, float]
    memory_type: str
    memory_capacity_gb: float
    memory_bandwidth_gb_per_s: float
    l2_size_mb: float
    l2_bandwidth_gb_per_s: float
    smem_per_sm_kb: float
    sm_count: int
    boost_clock_mhz: float
    gpu_link_gb_per_s: float
    pcie_gb_per_s: float
    tdp_w: float
    sources: tuple[Source, ...]
    estimates: frozenset[str] = frozenset()
    base: str | None = None  # measured specs: the datasheet spec they refine
    path: str = ""  # the file it was loaded from
    #: fitted efficiency per op kind and regime: {"gemm": {"memory": 0.9, "compute": 0.8}, ...}
    efficiency: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: free-form provenance of a measured spec (GPU name, driver, date, results file)
    measured_with: Mapping[str, str] = field(default_factory=dict)
    #: measured specs: the dotted keys this file set itself (the rest is inherited from ``base``)
    measured_keys: frozenset[str] = frozenset()
    #: shared-memory (SRAM) bandwidth of all SMs together, GB/s (optional: the report's shared-memory ceiling)
    smem_bandwidth_gb_per_s: float | None = None
    #: optional ``[price]``: USD per GPU-hour, and where that price is cited from (the cost lines' default)
    price_usd_per_gpu_hour: float | None = None
    price_source: str | None = None

    # ---- derived figures -------------------------------------------------------------------
    def peak_flops_per_s(self, dtype: str) -> float:
        """Dense peak in FLOP/s for a compute dtype; error lists the dtypes the spec has."""
        try:
            return self.peak_dense_tflops[dtype] * TB
        except KeyError:
            raise RooflineError(
                f"{self.id}: no peak for compute dtype '{dtype}'; this spec has: "
                f"{', '.join(sorted(self.peak_dense_tflops))} ({self.path or 'built-in'})"
            ) from None

    @property
    def memory_bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_gb_per_s * GB

    @property
    def l2_bandwidth_bytes_per_s(self) -> float:
        return self.l2_bandwidth_gb_per_s * GB

    @property
    def memory_capacity_bytes(self) -> float:
        return self.memory_capacity_gb * GB

    @property
    def smem_per_sm_bytes(self) -> float:
        return self.smem_per_sm_kb * 1024

    @property
    def smem_total_bytes(self) -> float:
        return self.smem_per_sm_bytes * self.sm_count

    @property
    def gpu_link_bytes_per_s(self) -> float:
        return self.gpu_link_gb_per_s * GB

    def ridge_point(self, dtype: str = "bf16") -> float:
        """FLOP per HBM byte at which ``dtype`` compute and memory time are equal."""
        return self.peak_flops_per_s(dtype) / self.memory_bandwidth_bytes_per_s

    @property
    def onchip_to_hbm_bandwidth_ratio(self) -> float:
        """L2 bandwidth over HBM bandwidth."""
        return self.l2_bandwidth_gb_per_s / self.memory_bandwidth_gb_per_s

    def is_estimate(self, dotted_key: str) -> bool:
        return dotted_key in self.estimates

    def provenance(self, dotted_key: str) -> str:
        """Where a figure comes from: "measured", "measured estimate" (set by a measured spec as an
        estimate from a measurement: a burst peak scaled to sustained), "estimate" or "datasheet"
        (for plot labels)."""
        if dotted_key in self.measured_keys:
            return "measured estimate" if dotted_key in self.estimates else "measured"
        return "estimate" if dotted_key in self.estimates else "datasheet"

    def to_dict(self) -> dict:
        """JSON-ready: the spec file's layout, plus ``derived`` figures (ridge points, ratios)."""
        return {
            "id": self.id,
            "name": self.name,
            "vendor": self.vendor,
            "kind": self.kind,
            "base": self.base,
            "path": self.path,
            "peak_dense_tflops": dict(self.peak_dense_tflops),
            "memory": {
                "type": self.memory_type,
                "capacity_gb": self.memory_capacity_gb,
                "bandwidth_gb_per_s": self.memory_bandwidth_gb_per_s,
            },
            "cache": {
                "l2_size_mb": self.l2_size_mb,
                "l2_bandwidth_gb_per_s": self.l2_bandwidth_gb_per_s,
                "smem_per_sm_kb": self.smem_per_sm_kb,
                **({"smem_bandwidth_gb_per_s": self.smem_bandwidth_gb_per_s} if self.smem_bandwidth_gb_per_s is not None else {}),
            },
            "compute": {"sm_count": self.sm_count, "boost_clock_mhz": self.boost_clock_mhz},
            "interconnect": {"gpu_link_gb_per_s": self.gpu_link_gb_per_s, "pcie_gb_per_s": self.pcie_gb_per_s},
            "power": {"tdp_w": self.tdp_w},
            "derived": {
                "ridge_point_flop_per_byte": {d: self.ridge_point(d) for d in self.peak_dense_tflops},
                "bf16_ridge_point_flop_per_byte": self.ridge_point("bf16"),
                "l2_to_hbm_bandwidth_ratio": self.onchip_to_hbm_bandwidth_ratio,
                "smem_total_mb": self.smem_total_bytes / 1e6,
            },
            "estimates": sorted(self.estimates),
            "measured_keys": sorted(self.measured_keys),
            "sources": [{"title": s.title, "url": s.url, "note": s.note} for s in self.sources],
            "efficiency": {k: dict(v) for k, v in self.efficiency.items()},
            "measured_with": dict(self.measured_with),
            **({"price": {"usd_per_gpu_hour": self.price_usd_per_gpu_hour, "source": self.price_source}}
               if self.price_usd_per_gpu_hour is not None else {}),
        }
