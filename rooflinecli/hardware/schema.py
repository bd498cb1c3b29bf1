"""The spec file schema: a parsed TOML dict -> ``HardwareSpec``, or ONE error line.

Every problem is reported as a single ``RooflineError`` line that names the file, the dotted key and
what is wrong, e.g. ``h100.toml: memory.bandwidth_gb_per_s: must be > 0, got -3``. Unknown keys get
the closest valid key as a suggestion. The layout is documented in ``rooflinecli.hardware``.

Measured specs (``kind = "measured"``) name a datasheet spec as ``base`` (an id, or a path relative
to the measured file) and inherit every field they do not set. Finding that base is the caller's:
``parse_spec`` takes the resolver as an argument (``rooflinecli.hardware.loader`` passes the one
that knows the built-in specs), so this module reads no file. Whether the figures are plausible
for a GPU is ``rooflinecli.hardware.plausible``'s question.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rooflinecli.dtypes import COMPUTE_DTYPES, bytes_per_element
from rooflinecli.errors import RooflineError, closest, has_control
from rooflinecli.hardware.spec import HardwareSpec, Source

#: (base as the file names it, the path of the measured file) -> the datasheet spec it names; a
#: RooflineError's message says what is wrong with the base (``parse_spec`` names file and key)
BaseResolver = Callable[[str, str], HardwareSpec]
#: (dotted key, value) -> which unit an absurd value looks like, or None (the loader passes
#: ``plausible.slip``): "bf16 = 989500 looks like GFLOP/s (write 989.5)"
UnitHint = Callable[[str, float], "str | None"]

KINDS = ("datasheet", "measured")
#: the longest string value (a name, a source note)
MAX_STRING_CHARS = 1000
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
URL_PATTERN = re.compile(r"^https?://\S+$")


@dataclass(frozen=True)
class Field:
    """One leaf key of the schema: its type and, for numbers, the sane range [lo, hi]."""

    attr: str  # HardwareSpec attribute it fills
    kind: type  # float (any number), int or str
    #: inclusive lower bound ("absurd" below it: 1e-300 is a typo, not a part). Low enough for the
    #: ceilings `roofline calibrate` measures on a CPU under Triton's interpreter (about 1 GB/s).
    lo: float = 1e-3
    hi: float = math.inf  # inclusive upper bound ("absurd" above it)
    unit: str = ""
    required: bool = True  # an optional key may be absent (its attribute keeps its default)


#: table -> key -> Field. Limits flag typos in units (GB/s vs TB/s), not real parts.
TABLES: dict[str, dict[str, Field]] = {
    "memory": {
        "type": Field("memory_type", str),
        "capacity_gb": Field("memory_capacity_gb", float, hi=10_000, unit="GB"),
        "bandwidth_gb_per_s": Field("memory_bandwidth_gb_per_s", float, hi=100_000, unit="GB/s (100 TB/s)"),
    },
    "cache": {
        "l2_size_mb": Field("l2_size_mb", float, hi=4096, unit="MB"),
        "l2_bandwidth_gb_per_s": Field("l2_bandwidth_gb_per_s", float, hi=500_000, unit="GB/s (500 TB/s)"),
        "smem_per_sm_kb": Field("smem_per_sm_kb", float, hi=4096, unit="KB"),
        "smem_bandwidth_gb_per_s": Field("smem_bandwidth_gb_per_s", float, hi=1_000_000, unit="GB/s (1 PB/s)", required=False),
    },
    "compute": {
        "sm_count": Field("sm_count", int, hi=100_000),
        "boost_clock_mhz": Field("boost_clock_mhz", float, hi=10_000, unit="MHz"),
    },
    "interconnect": {
        "gpu_link_gb_per_s": Field("gpu_link_gb_per_s", float, hi=100_000, unit="GB/s"),
        "pcie_gb_per_s": Field("pcie_gb_per_s", float, hi=10_000, unit="GB/s"),
    },
    "power": {
        "tdp_w": Field("tdp_w", float, hi=10_000, unit="W"),
    },
}

#: dense peak per dtype, TFLOP/s (TOP/s for integer types); 100 PFLOP/s is absurd for one GPU.
PEAK_TABLE = "peak_dense_tflops"
PEAK_HI_TFLOPS = 100_000.0
#: below 1 MFLOP/s a peak is a unit typo (a CPU under Triton's interpreter measures about 250 MFLOP/s)
PEAK_LO_TFLOPS = 1e-6
EFFICIENCY_LO = 0.001
EFFICIENCY_HI = 1.5
#: op kinds an ``[efficiency.<kind>]`` table may name: the analysis's op kinds
#: (``rooflinecli.analysis.workload.OP_KINDS``; a test keeps them in step) and ``copy``, which
#: ``roofline calibrate`` fits from the copy kernel
EFFICIENCY_KINDS = ("gemm", "attention", "elementwise", "moe", "copy")
TOP_LEVEL_STR = ("id", "name", "vendor", "kind", "base")
#: the optional ``[price]`` table: a cited rental price (``usd_per_gpu_hour``, ``source``, ``as_of``)
PRICE_TABLE = "price"
PRICE_KEYS = ("usd_per_gpu_hour", "source", "as_of")
PRICE_HI_USD_PER_GPU_HOUR = 1_000.0  # more than any GPU rents for: a typo (cents, or a month's price)
TOP_LEVEL = (*TOP_LEVEL_STR, "estimates", PEAK_TABLE, *TABLES, "sources", "efficiency", "measured_with", PRICE_TABLE)
SOURCE_KEYS = ("title", "url", "note")
REGIMES = ("memory", "compute")


def all_dotted_keys() -> list[str]:
    """Every leaf key of the schema in dotted form (``memory.bandwidth_gb_per_s``)."""
    keys = [*TOP_LEVEL_STR, "estimates", "sources", "efficiency", "measured_with"]
    keys += [f"{PEAK_TABLE}.{d}" for d in COMPUTE_DTYPES]
    keys += [f"{t}.{k}" for t, fields in TABLES.items() for k in fields]
    return keys


# ------------------------------------------------------------------------------------------------


class _Checker:
    """Collects nothing: the first problem raises, as one line naming ``path`` and the key."""

    def __init__(self, path: str, unit_hint: UnitHint | None = None) -> None:
        self.path = path
        self.unit_hint = unit_hint

    def check_unit(self, key: str, value: float) -> str:
        """The end of an absurd value's message: the unit it looks like, else a pointer to the key."""
        hint = self.unit_hint(key, float(value)) if self.unit_hint is not None else None
        return hint or "check the unit in the key name"

    def fail(self, key: str, what: str) -> RooflineError:
        msg = f"{self.path}: {key}: {what}" if key else f"{self.path}: {what}"
        return RooflineError(" ".join(msg.split("\n")))

    def unknown(self, key: str, valid: list[str], where: str = "") -> RooflineError:
        dotted = f"{where}.{key}" if where else key
        hint = closest(key, valid)
        if hint is None:  # a key put at the wrong level: suggest its dotted home
            hint = closest(key, [k.rsplit(".", 1)[-1] for k in all_dotted_keys()])
            if hint is not None:
                hint = next(k for k in all_dotted_keys() if k.rsplit(".", 1)[-1] == hint)
        elif where:
            hint = f"{where}.{hint}"
        tail = f"; did you mean '{hint}'?" if hint else f"; valid keys: {', '.join(valid)}"
        return self.fail(dotted, f"unknown key{tail}")

    def table(self, raw: Mapping[str, Any], key: str) -> dict[str, Any] | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a table ([{key}]), got {_type_name(value)}")
        return value

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {_type_name(value)} {value!r}")
        if not value.strip():
            raise self.fail(key, "must not be empty")
        if has_control(value):
            raise self.fail(key, "must not hold control characters or terminal escape codes")
        if len(value) > MAX_STRING_CHARS:
            raise self.fail(key, f"is {len(value):,} characters long; the limit is {MAX_STRING_CHARS:,}")
        return value

    def number(self, value: Any, key: str, f: Field) -> float | int:
        if f.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.fail(key, f"must be an integer, got {_type_name(value)} {value!r}")
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"must be a number, got {_type_name(value)} {value!r}")
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."  # a 400-digit integer
        if isinstance(value, int) and value.bit_length() > 1000:  # float() overflows; far beyond any bound
            if value < 0:
                raise self.fail(key, f"must be > 0, got {shown}")
            raise self.fail(key, f"absurd value {shown}: above {f.hi:g}{f' {f.unit}' if f.unit else ''}; check the unit in the key name")
        if not math.isfinite(value) or not value > 0:
            raise self.fail(key, f"must be > 0, got {shown}")
        if value < f.lo:
            unit = f" {f.unit}" if f.unit else ""
            raise self.fail(key, f"absurd value {shown}: below {f.lo:g}{unit}; {self.check_unit(key, value)}")
        if value > f.hi:
            unit = f" {f.unit}" if f.unit else ""
            raise self.fail(key, f"absurd value {shown}: above {f.hi:g}{unit}; {self.check_unit(key, value)}")
        return value if f.kind is int else float(value)


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "table"}.get(
        type(value), type(value).__name__
    )


# ------------------------------------------------------------------------------------------------


def parse_spec(raw: dict, path: str, resolve_base: BaseResolver, unit_hint: UnitHint | None = None) -> HardwareSpec:
    """Validate a parsed spec file and build its ``HardwareSpec``; one-line RooflineError otherwise.
    ``resolve_base`` finds a measured spec's datasheet base; ``unit_hint`` names the unit an absurd
    value looks like."""
    c = _Checker(path, unit_hint)
    if not isinstance(raw, dict):
        raise c.fail("", "a spec file must be a TOML table")
    for key in raw:
        if key not in TOP_LEVEL:
            raise c.unknown(key, list(TOP_LEVEL))

    # ---- identity ------------------------------------------------------------------------------
    kind = c.string(raw["kind"], "kind") if "kind" in raw else "datasheet"
    if kind not in KINDS:
        raise c.fail("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    if "id" not in raw:
        raise c.fail("id", "missing required key")
    spec_id = c.string(raw["id"], "id")
    if not ID_PATTERN.match(spec_id) or spec_id.endswith(".toml"):
        raise c.fail("id", f"must be lower-case letters, digits, '.', '_' or '-' (not a path), got {spec_id!r}")

    base_spec: HardwareSpec | None = None
    if kind == "measured":
        if "base" not in raw:
            raise c.fail("base", "missing required key: a measured spec names its datasheet spec (e.g. base = \"h200\")")
        base_spec = _base(c, c.string(raw["base"], "base"), resolve_base)
    elif "base" in raw:
        raise c.fail("base", 'only measured specs (kind = "measured") have a base')

    values: dict[str, Any] = {"id": spec_id, "kind": kind, "path": path}
    inherited = _inherited_values(base_spec) if base_spec is not None else {}
    for key in ("name", "vendor"):
        if key in raw:
            values[key] = c.string(raw[key], key)
        elif key in inherited:
            values[key] = inherited[key] + (" (measured)" if key == "name" else "")
        else:
            raise c.fail(key, "missing required key")

    # ---- peaks ---------------------------------------------------------------------------------
    peaks: dict[str, float] = dict(inherited.get("peak_dense_tflops", {}))
    table = c.table(raw, PEAK_TABLE)
    if table is not None:
        for dtype, value in table.items():
            key = f"{PEAK_TABLE}.{dtype}"
            if dtype not in COMPUTE_DTYPES:
                hint = closest(dtype, COMPUTE_DTYPES)
                tail = f" (did you mean '{hint}'?)" if hint else ""
                raise c.fail(key, f"unknown dtype '{dtype}'{tail}; known: {', '.join(COMPUTE_DTYPES)}")
            peaks[dtype] = c.number(value, key, Field(dtype, float, lo=PEAK_LO_TFLOPS, hi=PEAK_HI_TFLOPS, unit="TFLOP/s"))
    if "bf16" not in peaks:
        raise c.fail(f"{PEAK_TABLE}.bf16", "missing required key (the bf16 peak sets the ridge point)")
    derived: dict[str, tuple[float, str]] = {}
    if kind == "measured" and base_spec is not None and table:
        # a dtype the file does not measure: the datasheet figure at a measured peer's ratio, not
        # the datasheet's own (beside a sustained bf16 it would make int8 2.95x bf16 on an H200)
        derived = derive_unmeasured_peaks(base_spec.peak_dense_tflops, {d: peaks[d] for d in table})
        peaks.update({d: v for d, (v, _) in derived.items()})
    values["peak_dense_tflops"] = peaks

    # ---- numeric tables ------------------------------------------------------------------------
    own_keys: set[str] = set()
    for name, fields in TABLES.items():
        table = c.table(raw, name) or {}
        for key in table:
            if key not in fields:
                raise c.unknown(key, list(fields), name)
        for key, f in fields.items():
            dotted = f"{name}.{key}"
            if key in table:
                own_keys.add(dotted)
                if f.kind is str:
                    values[f.attr] = c.string(table[key], dotted)
                else:
                    values[f.attr] = c.number(table[key], dotted, f)
            elif f.attr in inherited:
                values[f.attr] = inherited[f.attr]
            elif not f.required:
                continue
            else:
                raise c.fail(dotted, "missing required key")
    own_keys |= {f"{PEAK_TABLE}.{d}" for d in (raw.get(PEAK_TABLE) or {})}

    # ---- estimates -----------------------------------------------------------------------------
    estimates: set[str] = set()
    if base_spec is not None:  # a figure this file measures is no longer the base's estimate
        estimates = {k for k in base_spec.estimates if k not in own_keys}
    estimates |= {f"{PEAK_TABLE}.{d}" for d in derived}
    if "estimates" in raw:
        est = raw["estimates"]
        if not isinstance(est, list):
            raise c.fail("estimates", f"must be an array of dotted keys, got {_type_name(est)}")
        present = {f"{PEAK_TABLE}.{d}" for d in peaks} | {f"{t}.{k}" for t, fs in TABLES.items() for k in fs}
        for i, item in enumerate(est):
            item = c.string(item, f"estimates[{i}]")
            if item not in present:
                hint = closest(item, sorted(present))
                tail = f" (did you mean '{hint}'?)" if hint else ""
                raise c.fail(f"estimates[{i}]", f"names '{item}', which is not a figure in this spec{tail}")
            estimates.add(item)
    values["estimates"] = frozenset(estimates)

    # ---- sources -------------------------------------------------------------------------------
    if "sources" in raw:
        values["sources"] = tuple(Source(**s) for s in _sources(c, raw["sources"]))
    elif base_spec is not None:
        values["sources"] = base_spec.sources
    else:
        raise c.fail("sources", "missing required key: cite the datasheet or whitepaper ([[sources]] title, url)")

    # ---- measured extras -----------------------------------------------------------------------
    values["efficiency"] = _efficiency(c, raw) if "efficiency" in raw else dict(inherited.get("efficiency", {}))
    values["measured_with"] = _measured_with(c, raw) if "measured_with" in raw else {}
    for d, (_, how) in derived.items():
        values["measured_with"].setdefault(f"method {PEAK_TABLE}.{d}", how)
    values["price_usd_per_gpu_hour"], values["price_source"] = (
        _price(c, raw) if PRICE_TABLE in raw else (base_spec.price_usd_per_gpu_hour, base_spec.price_source) if base_spec is not None else (None, None))
    values["base"] = base_spec.id if base_spec is not None else None
    values["measured_keys"] = frozenset(own_keys) if kind == "measured" else frozenset()
    return HardwareSpec(**values)


#: peaks of units of their own (fp32 on the CUDA cores, fp64 on the FP64 units): an equal datasheet
#: figure (H100/H200: fp32 67 = fp64 67 TFLOP/s) is a coincidence, not one unit's rate
OWN_UNIT_DTYPES = frozenset({"fp32", "fp64"})


def peak_peer(base: Mapping[str, float], measured, dtype: str) -> str | None:
    """The measured dtype whose datasheet peak equals ``dtype``'s (within 0.5%; the closest
    element width first: int8 -> fp8 on Hopper), or None. fp32 and fp64 pair with nothing
    (``OWN_UNIT_DTYPES``)."""
    v = base.get(dtype)
    if dtype in OWN_UNIT_DTYPES:
        return None
    peers = [p for p in measured if p != dtype and p not in OWN_UNIT_DTYPES and v and base.get(p)
             and abs(base[p] - v) <= 0.005 * v]
    return min(peers, key=lambda p: (abs(bytes_per_element(p) - bytes_per_element(dtype)), p)) if peers else None


def derive_unmeasured_peaks(base: Mapping[str, float], measured: Mapping[str, float]) -> dict[str, tuple[float, str]]:
    """dtype -> (TFLOP/s, how) for each datasheet peak a measured spec does not measure: the
    datasheet figure times measured / datasheet of a *peer*, a measured dtype with the same
    datasheet figure (int8 -> fp8 on Hopper; the closest element width first), else of bf16. Those
    units run at the same rate on the datasheet, and a measured spec's ceilings all come from one
    run at one clock."""
    out: dict[str, tuple[float, str]] = {}
    for dt, v in base.items():
        if dt in measured:
            continue
        peer = peak_peer(base, measured, dt) or ("bf16" if "bf16" in measured and base.get("bf16") else None)
        if peer is None:
            continue
        ratio = measured[peer] / base[peer]
        out[dt] = (v * ratio, f"not measured: the datasheet's {v:g} TFLOP/s x {ratio:.3f}, {peer}'s measured / datasheet ratio")
    return out


def _base(c: _Checker, base: str, resolve_base: BaseResolver) -> HardwareSpec:
    try:
        spec = resolve_base(base, c.path)
    except RooflineError as e:
        raise c.fail("base", str(e)) from None
    if spec.kind != "datasheet":
        raise c.fail("base", f"base '{base}' is itself a measured spec; name a datasheet spec")
    return spec


def _inherited_values(base: HardwareSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"name": base.name, "vendor": base.vendor, "peak_dense_tflops": dict(base.peak_dense_tflops)}
    for fields in TABLES.values():
        for f in fields.values():
            out[f.attr] = getattr(base, f.attr)
    out["efficiency"] = {k: dict(v) for k, v in base.efficiency.items()}
    return out


def _sources(c: _Checker, sources: Any) -> list[dict[str, str]]:
    if not isinstance(sources, list) or not sources:
        raise c.fail("sources", f"must be a non-empty array of tables ([[sources]] with title, url), got {_type_name(sources)}")
    out = []
    for i, s in enumerate(sources):
        key = f"sources[{i}]"
        if not isinstance(s, dict):
            raise c.fail(key, f"must be a table with title and url, got {_type_name(s)}")
        for k in s:
            if k not in SOURCE_KEYS:
                raise c.unknown(k, list(SOURCE_KEYS), key)
        for k in ("title", "url"):
            if k not in s:
                raise c.fail(f"{key}.{k}", "missing required key")
        title = c.string(s["title"], f"{key}.title")
        url = c.string(s["url"], f"{key}.url")
        if not URL_PATTERN.match(url):
            raise c.fail(f"{key}.url", f"must be an http(s) URL, got {url!r}")
        note = c.string(s["note"], f"{key}.note") if "note" in s else ""
        out.append({"title": title, "url": url, "note": note})
    return out


def _efficiency(c: _Checker, raw: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    table = c.table(raw, "efficiency") or {}
    out: dict[str, dict[str, float]] = {}
    f = Field("efficiency", float, lo=EFFICIENCY_LO, hi=EFFICIENCY_HI)
    for op_kind, regimes in table.items():
        key = f"efficiency.{op_kind}"
        if op_kind not in EFFICIENCY_KINDS:
            raise c.unknown(op_kind, list(EFFICIENCY_KINDS), "efficiency")
        if not isinstance(regimes, dict):
            raise c.fail(key, f"must be a table {{memory = x, compute = y}}, got {_type_name(regimes)}")
        for regime in regimes:
            if regime not in REGIMES:
                raise c.unknown(regime, list(REGIMES), key)
        out[op_kind] = {r: c.number(v, f"{key}.{r}", f) for r, v in regimes.items()}
    return out


#: [measured_with] entries read as numbers (``bound_spec``, the achievable roof, the fp8 speed-up):
#: "<kind> peak_dense_tflops.<dtype>" and "<kind> memory.bandwidth_gb_per_s"
MEASURED_NUMBER_KINDS = ("burst", "sustained", "read")
#: ``[measured_with]`` entries of a measured spec that hold faster ceilings than the ones its
#: predictions use: (entry, the ceiling it raises); ``rooflinecli.ceilings.bound_spec`` reads them
BOUND_ENTRIES = (
    *((f"burst {PEAK_TABLE}.{dt}", dt) for dt in COMPUTE_DTYPES),  # bf16's, and the bursts calibrate scaled
    ("burst memory.bandwidth_gb_per_s", "memory"),
    ("read memory.bandwidth_gb_per_s", "memory"),
)


def _price(c: _Checker, raw: Mapping[str, Any]) -> tuple[float, str]:
    """``[price]``: USD per GPU-hour with the source it is cited from (and ``as_of``, a date)."""
    table = c.table(raw, PRICE_TABLE) or {}
    for key in table:
        if key not in PRICE_KEYS:
            raise c.unknown(key, list(PRICE_KEYS), PRICE_TABLE)
    for key in ("usd_per_gpu_hour", "source"):
        if key not in table:
            raise c.fail(f"{PRICE_TABLE}.{key}", "missing required key: a price is cited (usd_per_gpu_hour and its source)")
    usd = c.number(table["usd_per_gpu_hour"], f"{PRICE_TABLE}.usd_per_gpu_hour",
                   Field("price_usd_per_gpu_hour", float, lo=0.0, hi=PRICE_HI_USD_PER_GPU_HOUR, unit="USD per GPU-hour"))
    source = c.string(table["source"], f"{PRICE_TABLE}.source")
    if "as_of" in table:
        source += f" (as of {c.string(table['as_of'], f'{PRICE_TABLE}.as_of')})"
    return usd, source


def _measured_with(c: _Checker, raw: Mapping[str, Any]) -> dict[str, str]:
    """Strings; the entries other code reads as ceilings must be numbers in the spec's own ranges
    (a burst bandwidth of 1e300 GB/s turned off validate's faster-than-roof check)."""
    table = c.table(raw, "measured_with") or {}
    out = {k: c.string(v, f"measured_with.{k}") for k, v in table.items()}
    for k, v in out.items():
        kind, _, figure = k.partition(" ")
        if kind not in MEASURED_NUMBER_KINDS or not (figure.startswith(f"{PEAK_TABLE}.") or figure == "memory.bandwidth_gb_per_s"):
            continue
        lo, hi, unit = (PEAK_LO_TFLOPS, PEAK_HI_TFLOPS, "TFLOP/s") if figure.startswith(PEAK_TABLE) else (1e-3, 100_000.0, "GB/s")
        try:
            x = float(v)
        except ValueError:
            x = math.nan
        if not lo <= x <= hi:
            raise c.fail(f"measured_with.{k}", f"must be a number of {unit} in [{lo:g}, {hi:g}], got {v!r}")
    return out
