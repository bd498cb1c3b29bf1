"""Plausibility of a spec's figures for a GPU: ranges in both directions and cross-field rules.

The schema (``rooflinecli.hardware.schema``) refuses what no part can have (a negative bandwidth,
1e300 TFLOP/s); this module refuses what a GPU does not have, which is how unit slips show: a
bandwidth of 3.35 typed into a GB/s key (TB/s), a bf16 peak of 0.9895 (PFLOP/s), a link of 0.9 GB/s
(TB/s), a clock of 1.98 (GHz). A value about 1,000x outside its range says which unit it looks like.
Cross-field rules: L2 bandwidth above memory bandwidth; fp8 at least bf16 (and fp4 at least fp8)
where the GPU has both; a measured figure at most ``MEASURED_OVER_DATASHEET`` x its datasheet
figure (not where that figure is an estimate).

A measured spec taken on a CPU under Triton's interpreter (``roofline calibrate --device cpu``:
``measured_with.gpu_name = "cpu (...)"``) is a stand-in, not a GPU: its own figures skip the
GPU ranges and the fp8 >= bf16 rule, and keep the schema's limits and the datasheet cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from rooflinecli.errors import RooflineError
from rooflinecli.hardware.schema import MEASURED_NUMBER_KINDS, PEAK_TABLE, TABLES
from rooflinecli.hardware.spec import HardwareSpec

#: a measured ceiling may beat its datasheet figure by this much (boost clocks, rounding), no more
MEASURED_OVER_DATASHEET = 1.1


@dataclass(frozen=True)
class Range:
    """The plausible [lo, hi] of one figure for a GPU, in the unit of its key, and the units a
    value 1,000x too small (``small_looks_like``) or too large (``large_looks_like``) was typed in."""

    lo: float
    hi: float
    unit: str
    small_looks_like: str
    large_looks_like: str


# Each range holds every shipped part with room to spare and is narrower than a unit slip: the
# smallest shipped figure x 1,000 lies above ``hi`` and the largest / 1,000 below ``lo`` (RTX 4090
# fp64 1.29 and MI300X fp64 163.4 TFLOP/s -> fp64 in [0.2, 1,000]; 64 GB/s PCIe links on L40S and
# RTX 4090 -> links below 30 TB/s; B200 fp4 9,000 -> fp4 above 20). tests/hardware/test_hw_plausible.py
# slips every shipped figure both ways.
_BW = ("GB/s", "TB/s", "MB/s")
RANGES: dict[str, Range] = {
    "memory.capacity_gb": Range(1, 10_000, "GB", "TB", "MB"),
    "memory.bandwidth_gb_per_s": Range(50, 100_000, *_BW),
    "cache.l2_size_mb": Range(0.5, 4096, "MB", "GB", "KB"),
    "cache.l2_bandwidth_gb_per_s": Range(100, 500_000, *_BW),
    "cache.smem_per_sm_kb": Range(8, 4096, "KB", "MB", "bytes"),
    "cache.smem_bandwidth_gb_per_s": Range(100, 1_000_000, *_BW),
    "compute.boost_clock_mhz": Range(100, 10_000, "MHz", "GHz", "kHz"),
    "interconnect.gpu_link_gb_per_s": Range(5, 30_000, *_BW),
    "interconnect.pcie_gb_per_s": Range(5, 10_000, *_BW),
    "power.tdp_w": Range(10, 10_000, "W", "kW", "mW"),
}
_FLOPS = ("TFLOP/s", "PFLOP/s", "GFLOP/s")
#: dense peaks per dtype, TFLOP/s (TOP/s for int types): fp64 runs at 1/64 rate on some parts
PEAK_RANGES: dict[str, Range] = {
    "fp64": Range(0.2, 1_000, *_FLOPS),
    "fp32": Range(1, 10_000, *_FLOPS),
    "tf32": Range(2, 50_000, *_FLOPS),
    "bf16": Range(5, 100_000, *_FLOPS),
    "fp16": Range(5, 100_000, *_FLOPS),
    **{dt: Range(10, 100_000, *_FLOPS) for dt in ("fp8", "int8")},
    **{dt: Range(20, 100_000, *_FLOPS) for dt in ("fp4", "int4")},
}
#: (narrower, wider): the narrower dtype's peak is at least the wider one's on a GPU with both
AT_LEAST = (("fp8", "bf16"), ("fp4", "fp8"))


class ImplausibleSpec(RooflineError):
    """A spec whose figures a GPU does not have: the message is the first problem, ``problems``
    holds every one as ``<path>: <key>: <what>``."""

    def __init__(self, problems: list[str]):
        super().__init__(problems[0])
        self.problems = problems


def range_for(key: str) -> Range | None:
    """The plausible range of a dotted key (``peak_dense_tflops.bf16``, ``memory.bandwidth_gb_per_s``)."""
    if key.startswith(f"{PEAK_TABLE}."):
        return PEAK_RANGES.get(key.split(".", 1)[1])
    return RANGES.get(key)


def slip(key: str, value: float) -> str | None:
    """"<leaf> = <value> looks like <unit> (write <value x or / 1,000>)" when ``value`` is outside
    ``key``'s range and 1,000x off from inside it; None otherwise."""
    r = range_for(key)
    if r is None or r.lo <= value <= r.hi:
        return None
    low = value < r.lo
    scaled = value * 1000 if low else value / 1000
    if not r.lo <= scaled <= r.hi:
        return None
    return f"{key.rsplit('.', 1)[1]} = {value:g} looks like {r.small_looks_like if low else r.large_looks_like} (write {scaled:g})"


def out_of_range(key: str, value: float) -> str | None:
    """What is wrong with ``value`` for ``key`` (None: plausible), naming the unit it looks like
    when it is about 1,000x outside the range."""
    r = range_for(key)
    if r is None or r.lo <= value <= r.hi:
        return None
    low = value < r.lo
    limit = f"{'below' if low else 'above'} the plausible {r.lo if low else r.hi:,g} {r.unit} for a GPU"
    return f"{value:g} {r.unit} is {limit}; {slip(key, value) or 'check the unit in the key name'}"


def _figures(spec: HardwareSpec) -> dict[str, float]:
    """Every numeric figure of ``spec`` by dotted key (optional ones when set)."""
    out = {f"{PEAK_TABLE}.{dt}": v for dt, v in spec.peak_dense_tflops.items()}
    for table, fields in TABLES.items():
        for key, f in fields.items():
            value = getattr(spec, f.attr)
            if f.kind is not str and value is not None:
                out[f"{table}.{key}"] = float(value)
    return out


def measured_on_cpu(spec: HardwareSpec) -> bool:
    """A measured spec taken on a CPU (``roofline calibrate --device cpu``), not on a GPU."""
    return spec.kind == "measured" and spec.measured_with.get("gpu_name", "").lower().startswith("cpu")


def problems(spec: HardwareSpec, base: HardwareSpec | None = None) -> list[tuple[str, str]]:
    """(dotted key, what is wrong) for each implausible figure of ``spec``; ``base`` is a measured
    spec's datasheet spec. A measured spec answers for the figures it sets (the rest are its
    base's, checked when the base loaded)."""
    figures = _figures(spec)
    own = figures if spec.kind != "measured" else {k: v for k, v in figures.items() if k in spec.measured_keys}
    cpu = measured_on_cpu(spec)
    found: list[tuple[str, str]] = []
    if not cpu:
        for key, value in own.items():
            why = out_of_range(key, value)
            if why:
                found.append((key, why))
    l2, hbm = spec.l2_bandwidth_gb_per_s, spec.memory_bandwidth_gb_per_s
    if l2 <= hbm and not cpu:
        key = "cache.l2_bandwidth_gb_per_s" if "cache.l2_bandwidth_gb_per_s" in own or "memory.bandwidth_gb_per_s" not in own else "memory.bandwidth_gb_per_s"
        found.append((key, f"L2 bandwidth {l2:,g} GB/s is not above the memory bandwidth {hbm:,g} GB/s; the on-chip level is the faster one"))
    peaks = spec.peak_dense_tflops
    for narrow, wide in AT_LEAST:
        if narrow in peaks and wide in peaks and peaks[narrow] < peaks[wide] and not cpu:
            key = f"{PEAK_TABLE}.{narrow}" if f"{PEAK_TABLE}.{narrow}" in own or f"{PEAK_TABLE}.{wide}" not in own else f"{PEAK_TABLE}.{wide}"
            found.append((key, f"{narrow} peak {peaks[narrow]:,g} TFLOP/s is below the {wide} peak {peaks[wide]:,g} TFLOP/s; a GPU with {narrow} runs it at least as fast"))
    if base is not None:
        found += _above_datasheet(spec, base, own)
    return found


def _above_datasheet(spec: HardwareSpec, base: HardwareSpec, own: dict[str, float]) -> list[tuple[str, str]]:
    """A measured figure (or a number in ``[measured_with]``) above ``MEASURED_OVER_DATASHEET`` x
    the datasheet's; not where the datasheet's figure is an estimate."""
    datasheet = _figures(base)
    found = []
    candidates = [(k, k, v) for k, v in own.items()]
    for entry, text in spec.measured_with.items():
        kind, _, key = entry.partition(" ")
        if kind in MEASURED_NUMBER_KINDS and key in datasheet:
            candidates.append((f"measured_with.{entry}", key, float(text)))
    for where, key, value in candidates:
        if key not in datasheet or base.is_estimate(key):
            continue
        cap = datasheet[key] * MEASURED_OVER_DATASHEET
        if value > cap:
            unit = "TFLOP/s" if key.startswith(PEAK_TABLE) else (RANGES[key].unit if key in RANGES else "")
            found.append((where, f"measured {value:,g} {unit} is above {MEASURED_OVER_DATASHEET:g}x the datasheet's {datasheet[key]:,g} {unit} ({base.id}); check the measurement and the unit"))
    return found


def check(spec: HardwareSpec, base: HardwareSpec | None = None) -> None:
    """Raise ``ImplausibleSpec`` (one line: the file, the key, what is wrong) if ``problems`` finds any."""
    found = problems(spec, base)
    if found:
        raise ImplausibleSpec([f"{spec.path}: {key}: {what}" for key, what in found])
