"""Hardware specs: TOML files under ``hardware_specs/`` -> frozen ``HardwareSpec`` dataclasses.

Every figure lives in a spec file with its source; no peak number is written in Python. A spec may
be named by id (``h100-sxm``) or given by path (``my-gpu.toml``) anywhere a GPU is accepted.
Measured specs (``hardware_specs/measured/*.toml``, written by ``roofline calibrate``) name a
datasheet spec as ``base`` and override the ceilings they measured.

File layout (every number carries its unit in its key)::

    id = "h100-sxm"
    name = "NVIDIA H100 SXM5 80GB"
    vendor = "nvidia"
    kind = "datasheet"                 # or "measured"
    estimates = ["cache.l2_bandwidth_gb_per_s"]   # dotted keys whose figure is an estimate

    [peak_dense_tflops]                # dense (no sparsity), TFLOP/s (TOP/s for int types)
    fp64 = 33.5
    bf16 = 989.4
    ...
    [memory]
    type = "HBM3"
    capacity_gb = 80
    bandwidth_gb_per_s = 3350
    [cache]
    l2_size_mb = 50
    l2_bandwidth_gb_per_s = 12000
    smem_per_sm_kb = 228
    smem_bandwidth_gb_per_s = 33454    # optional: all SMs (estimate: 128 B/clk/SM x 132 x 1.98 GHz)
    [compute]
    sm_count = 132                     # CUs on AMD
    boost_clock_mhz = 1980
    [interconnect]
    gpu_link_gb_per_s = 900            # NVLink / Infinity Fabric, per GPU, all links, both ways
    pcie_gb_per_s = 128
    [power]
    tdp_w = 700
    [[sources]]
    title = "NVIDIA H100 Tensor Core GPU Datasheet"
    url = "https://..."
    note = "tensor figures printed with sparsity; halved"
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from rooflinecli.dtypes import COMPUTE_DTYPES
from rooflinecli.errors import RooflineError, parse_toml_text, read_user_file, unknown_name_error

GB = 1e9
TB = 1e12
#: a spec file is a page of TOML; anything over 1 MB is not one
MAX_SPEC_FILE_BYTES = 1_000_000


@dataclass(frozen=True)
class Source:
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
        }


# ------------------------------------------------------------------------------------------------
# Locating and loading
# ------------------------------------------------------------------------------------------------


def specs_dir() -> Path:
    """The folder of built-in spec files: inside the package in a wheel, the repo root otherwise."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "hardware_specs", here.parent / "hardware_specs"):
        if candidate.is_dir():
            return candidate
    raise RooflineError(f"hardware_specs folder not found beside {here}")


def read_spec_toml(path: str | Path) -> dict:
    """The parsed TOML of a spec file, or a one-line RooflineError naming the file."""
    path = Path(path)
    return parse_toml_text(read_user_file(path, "spec file", MAX_SPEC_FILE_BYTES), str(path))


def load_spec_file(path: str | Path, expect_kind: str | None = None) -> HardwareSpec:
    """Load and validate one spec file; every problem is a one-line RooflineError naming the file.

    ``expect_kind`` ("datasheet" or "measured") is checked before anything else, so that a measured
    spec dropped among the datasheets is reported rather than resolved against itself.
    """
    from rooflinecli.hardware_validate import parse_spec

    raw = read_spec_toml(path)
    if expect_kind is not None:
        kind = raw.get("kind", "datasheet")
        if kind != expect_kind:
            where = "hardware_specs/measured/" if kind == "measured" else "hardware_specs/"
            raise RooflineError(f"{path}: kind: a '{kind}' spec belongs in {where}, not beside {expect_kind} specs")
    return parse_spec(raw, str(path))


def load_spec_files(paths: list[Path], expect_kind: str | None = None) -> dict[str, HardwareSpec]:
    """Several spec files by id; a duplicate id is an error naming both files."""
    specs: dict[str, HardwareSpec] = {}
    for p in paths:
        spec = load_spec_file(p, expect_kind)
        if spec.id in specs:
            raise RooflineError(f"{p}: id: duplicate id '{spec.id}' (also in {specs[spec.id].path})")
        specs[spec.id] = spec
    return specs


@lru_cache(maxsize=None)
def builtin_specs() -> dict[str, HardwareSpec]:
    """Every datasheet spec in ``hardware_specs/*.toml`` by id (duplicate ids are an error)."""
    return load_spec_files(sorted(specs_dir().glob("*.toml")), "datasheet")


def measured_specs() -> dict[str, HardwareSpec]:
    """Measured specs in ``hardware_specs/measured/*.toml`` by id (not cached: calibrate adds them)."""
    d = specs_dir() / "measured"
    if not d.is_dir():
        return {}
    specs = load_spec_files(sorted(d.glob("*.toml")), "measured")
    builtin = builtin_specs()
    for spec_id, spec in specs.items():
        if spec_id in builtin:
            raise RooflineError(f"{spec.path}: id: duplicate id '{spec_id}' (also in {builtin[spec_id].path})")
    return specs


def all_specs() -> dict[str, HardwareSpec]:
    """Built-in datasheet specs, then measured ones, by id."""
    return {**builtin_specs(), **measured_specs()}


def _ids_on_disk(measured: bool) -> dict[str, list[Path]]:
    """The ``id`` of every built-in (and, if ``measured``, measured) spec file, read without
    validating the files (so that a bad file among them cannot hide a clash): id -> its files."""
    d = specs_dir()
    ids: dict[str, list[Path]] = {}
    for p in sorted(d.glob("*.toml")) + (sorted((d / "measured").glob("*.toml")) if measured else []):
        try:
            spec_id = read_spec_toml(p).get("id")
        except RooflineError:
            continue
        if isinstance(spec_id, str):
            ids.setdefault(spec_id, []).append(p)
    return ids


def load_user_spec(path: str | Path) -> HardwareSpec:
    """A spec file named by path (``--hw my-gpu.toml``, ``hw validate``): the checks of
    ``load_spec_file`` plus its id being unique among the built-in datasheet specs (a copy of
    ``h100-sxm.toml`` that keeps ``id = "h100-sxm"`` would make two GPUs of one name) and, for a
    file inside ``hardware_specs/`` (where a clash breaks every command), among the measured specs
    too. ``hw validate`` and every command load a path through this one function, so a file that
    validates loads everywhere."""
    spec = load_spec_file(path)
    here = Path(path).resolve()
    inside = specs_dir().resolve() in here.parents
    others = [p for p in _ids_on_disk(measured=inside).get(spec.id, []) if p.resolve() != here]
    if others:
        raise RooflineError(f"{path}: id: duplicate id '{spec.id}' (also in {others[0]}); give this GPU its own id")
    return spec


def is_spec_path(name_or_path: str) -> bool:
    """Whether ``--hw`` names a file rather than an id."""
    return name_or_path.endswith(".toml") or "/" in name_or_path or "\\" in name_or_path


def get_spec(name_or_path: str) -> HardwareSpec:
    """A spec by id (built-in or measured) or by path to a .toml file."""
    name_or_path = name_or_path.strip()
    if is_spec_path(name_or_path):
        return load_user_spec(name_or_path)
    specs = builtin_specs()
    if name_or_path in specs:
        return specs[name_or_path]
    measured = measured_specs()
    if name_or_path in measured:
        return measured[name_or_path]
    known = sorted([*specs, *measured])
    prefixed = [k for k in known if k.startswith(name_or_path)]  # "h100" -> "h100-pcie" beats "h200"
    if name_or_path and prefixed:
        hint = " or ".join(f"'{k}'" for k in prefixed)
        raise RooflineError(f"unknown GPU '{name_or_path}' (did you mean {hint}?); known: {', '.join(known)}")
    raise unknown_name_error("GPU", name_or_path, known)


#: ``[measured_with]`` entries of a measured spec that hold faster ceilings than the ones its
#: predictions use: (entry, the ceiling it raises)
BOUND_ENTRIES = (
    *((f"burst peak_dense_tflops.{dt}", dt) for dt in COMPUTE_DTYPES),  # bf16's, and the bursts calibrate scaled
    ("burst memory.bandwidth_gb_per_s", "memory"),
    ("read memory.bandwidth_gb_per_s", "memory"),
)


def measured_peer(spec: HardwareSpec, dtype: str) -> tuple[str, HardwareSpec] | None:
    """(peer, base spec) for a dense peak a measured spec does not measure but derives from a
    measured dtype of the same datasheet figure (``hardware_validate.peak_peer``: int8 from fp8 on
    Hopper); None for a measured peak, a datasheet spec, or no such peer."""
    if not spec.base or f"peak_dense_tflops.{dtype}" in spec.measured_keys:
        return None
    from rooflinecli.hardware_validate import peak_peer

    try:
        base = get_spec(spec.base)
    except RooflineError:
        return None
    measured = [k.split(".", 1)[1] for k in spec.measured_keys if k.startswith("peak_dense_tflops.")]
    peer = peak_peer(base.peak_dense_tflops, measured, dtype)
    return (peer, base) if peer is not None else None


def bound_spec(spec: HardwareSpec) -> HardwareSpec:
    """``spec`` with the fastest ceilings it measured: the burst peaks (20 single launches,
    before the clocks settle) and the higher of the copy bandwidth and the read-only bandwidth
    (a stream of reads beats a copy's read + write mix), where ``[measured_with]`` has them. What a
    measured kernel must not beat; predictions keep the spec's own (sustained, copy) ceilings.
    A spec without such entries, or with entries that are not positive numbers, comes back as is."""
    peaks = dict(spec.peak_dense_tflops)
    bw = spec.memory_bandwidth_gb_per_s
    for entry, what in BOUND_ENTRIES:
        try:
            v = float(spec.measured_with.get(entry, "nan"))
        except (TypeError, ValueError):
            continue
        if not (v > 0 and v < float("inf")):
            continue
        if what == "memory":
            bw = max(bw, v)
        elif what in peaks:
            peaks[what] = max(peaks[what], v)
    for dt in list(peaks):  # a peak the spec derives from a measured peer (int8 from fp8) takes the peer's burst too
        found = measured_peer(spec, dt)
        if found is None:
            continue
        peer, base = found
        try:
            burst = float(spec.measured_with.get(f"burst peak_dense_tflops.{peer}", "nan"))
        except (TypeError, ValueError):
            continue
        if burst > 0 and math.isfinite(burst):
            peaks[dt] = max(peaks[dt], burst * base.peak_dense_tflops[dt] / base.peak_dense_tflops[peer])
    if bw == spec.memory_bandwidth_gb_per_s and peaks == dict(spec.peak_dense_tflops):
        return spec
    from dataclasses import replace

    return replace(spec, peak_dense_tflops=peaks, memory_bandwidth_gb_per_s=bw)


def get_specs(names: str) -> list[HardwareSpec]:
    """Comma-separated ids or paths -> specs."""
    specs = [get_spec(n) for n in names.split(",") if n.strip()]
    if not specs:
        raise RooflineError("no GPU given: pass an id (see `roofline hw list`) or a spec file path")
    seen: dict[str, HardwareSpec] = {}
    for s in specs:
        if s.id in seen:
            where = f" ({seen[s.id].path} and {s.path})" if seen[s.id].path != s.path else ""
            raise RooflineError(f"--hw: GPU '{s.id}' given twice{where}; each GPU needs its own id")
        seen[s.id] = s
    return specs
