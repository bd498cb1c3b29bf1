"""``roofline validate``: the analytical model against measured kernels.

Per kernel and shape: measured median (p20/p80) beside the roofline prediction from the datasheet
ceilings, from the measured ceilings, and from the measured ceilings with a calibrated efficiency
fitted leave-one-shape-out (``rooflinecli.bench.fit``); error = (predicted - measured) / measured.
Summary statistics (median and p90 |error|, overall and by op) for our kernels, the kernel
targets as met / missed with their figures, and the end-to-end decoder-layer check when the results
carry one. A point faster than its datasheet roof is flagged as a counting error.

Targets are reported, never asserted: validation exits 0 whatever the errors (exit 2 only for bad
input).
"""

from __future__ import annotations

import math

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rooflinecli.bench.fit import error_stats, fit_efficiency, loo_efficiencies, loo_predictions, points_from_rows, rel_error
from rooflinecli.bench.predict import compute_dtype_for, roof
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.predict import fastest_ceilings
from rooflinecli.results import ResultRow, Results

#: accuracy goals: docs/reference.md, section 3
KERNEL_ERROR_GOAL = 0.10  # median |error| against measured ceilings
E2E_ERROR_GOAL = 0.15
#: a point this much faster than its measured roof is flagged (the datasheet roof: any amount)
MEASURED_ROOF_SLACK = 0.05


@dataclass(frozen=True)
class RowCheck:
    op: str
    impl: str
    shape: str
    dtype: str
    kind: str
    measured_s: float
    p20_s: float
    p80_s: float
    flops: float
    bytes: float
    bound: str  # on the datasheet roof
    predicted_datasheet_s: float | None
    predicted_measured_s: float | None
    predicted_fitted_s: float | None  # measured (or datasheet) ceilings x leave-one-out efficiency
    above_roof: bool  # faster than the datasheet roof: a counting error
    above_measured_roof: bool  # more than MEASURED_ROOF_SLACK faster than measured_bound_s
    #: the roof on the measured spec's fastest ceilings (``fastest_ceilings``: burst peak, the
    #: highest of copy, read and the calibration's fastest stream): what the flag compares with
    measured_bound_s: float | None = None

    @property
    def ai(self) -> float:
        return self.flops / self.bytes if self.bytes > 0 else float("inf")

    def error(self, basis: str) -> float | None:
        t = {"datasheet": self.predicted_datasheet_s, "measured": self.predicted_measured_s, "fitted": self.predicted_fitted_s}[basis]
        return None if t is None else rel_error(t, self.measured_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "impl": self.impl,
            "shape": self.shape,
            "dtype": self.dtype,
            "kind": self.kind,
            "bound": self.bound,
            "measured_s": self.measured_s,
            "p20_s": self.p20_s,
            "p80_s": self.p80_s,
            "flops": self.flops,
            "bytes": self.bytes,
            "ai_flops_per_byte": self.ai if np.isfinite(self.ai) else None,
            "achieved_tflops": self.flops / self.measured_s / 1e12,
            "achieved_gb_per_s": self.bytes / self.measured_s / 1e9,
            "predicted_datasheet_s": self.predicted_datasheet_s,
            "error_datasheet": self.error("datasheet"),
            "predicted_measured_s": self.predicted_measured_s,
            "error_measured": self.error("measured"),
            "predicted_fitted_s": self.predicted_fitted_s,
            "error_fitted": self.error("fitted"),
            "above_roof": self.above_roof,
            "above_measured_roof": self.above_measured_roof,
            "measured_bound_s": self.measured_bound_s,
        }


def target_value_text(value: float | None, unit: str) -> str:
    """A target's value with its unit, for tables: "0.91x torch", "0.80 of copy BW", "-"."""
    if value is None:
        return "-"
    return f"{value:.2f}{unit}" if unit.startswith("x") else f"{value:.2f} {unit}".rstrip()


@dataclass(frozen=True)
class Target:
    name: str
    goal: str
    value: float | None
    threshold: float
    detail: str
    #: what ``value`` (and ``threshold``) count: "x torch" (our speed over the fastest torch path),
    #: "of copy BW", "of datasheet BW", "of 350 TFLOP/s", "limit / worst"
    unit: str = "x torch"
    #: the value as a reader wants it where the ratio reads poorly ("467 us worst" beside 30 us / 467 us)
    shown: str | None = None

    def value_text(self) -> str:
        return self.shown if self.shown and self.value is not None else target_value_text(self.value, self.unit)

    @property
    def status(self) -> str:
        if self.value is None:
            return "not measured"
        return "met" if self.value >= self.threshold else "missed"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "goal": self.goal, "value": self.value, "unit": self.unit, "threshold": self.threshold,
                "status": self.status, "detail": self.detail, "value_text": self.value_text()}


@dataclass(frozen=True)
class Validation:
    results_path: str
    gpu_name: str
    datasheet: HardwareSpec | None
    measured: HardwareSpec | None
    rows: tuple[RowCheck, ...]
    failed: tuple[ResultRow, ...]
    targets: tuple[Target, ...]
    fitted_efficiency: dict[str, dict[str, float]]
    end_to_end: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: whole-model points of ``e2e --full`` with the three predictors (``end_to_end_full_checks``)
    end_to_end_full: tuple[dict[str, Any], ...] = ()

    def ours(self) -> list[RowCheck]:
        return [r for r in self.rows if r.impl == "triton"]

    def stats(self, basis: str, impl: str = "triton") -> dict[str, Any]:
        rows = [r for r in self.rows if r.impl == impl]
        overall = error_stats(r.error(basis) for r in rows)
        by_op = {op: error_stats(r.error(basis) for r in rows if r.op == op).to_json() for op in sorted({r.op for r in rows})}
        return {"overall": overall.to_json(), "by_op": by_op}

    def e2e_stats(self, basis: str) -> dict[str, Any]:
        return error_stats(p.get(f"error_{basis}") for p in self.end_to_end).to_json()

    def flags(self) -> list[str]:
        out = e2e_full_flags(self.end_to_end_full)
        for r in self.rows:
            if r.above_roof:
                out.append(
                    f"{r.op}[{r.impl}] {r.shape} {r.dtype}: measured {r.measured_s * 1e6:.2f} us is faster than the datasheet "
                    f"roof {r.predicted_datasheet_s * 1e6:.2f} us: counting error (FLOPs or bytes over-counted, or data served from cache)"
                )
            elif r.above_measured_roof:
                bound = r.measured_bound_s if r.measured_bound_s is not None else r.predicted_measured_s
                out.append(
                    f"{r.op}[{r.impl}] {r.shape} {r.dtype}: measured {r.measured_s * 1e6:.2f} us is more than "
                    f"{MEASURED_ROOF_SLACK:.0%} faster than the measured-ceiling roof {bound * 1e6:.2f} us "
                    "(its fastest measured ceilings: burst peak, the highest of copy, read and calibration-stream bandwidth)"
                )
        return out

    def to_json(self) -> dict[str, Any]:
        bases = ["datasheet"] + (["measured"] if self.measured is not None else []) + ["fitted"]
        return {
            "schema": "rooflinecli.validation/1",
            "results": self.results_path,
            "gpu_name": self.gpu_name,
            "datasheet_spec": self.datasheet.id if self.datasheet else None,
            "measured_spec": self.measured.id if self.measured else None,
            "goals": {"kernel_median_abs_error_measured": KERNEL_ERROR_GOAL, "end_to_end_median_abs_error": E2E_ERROR_GOAL},
            "summary": {b: self.stats(b) for b in bases},
            "summary_baseline": {b: self.stats(b, "torch") for b in bases},
            "fitted_efficiency_leave_one_out_basis": self.fitted_efficiency,
            "targets": [t.to_json() for t in self.targets],
            "end_to_end": list(self.end_to_end),
            "end_to_end_summary": {b: self.e2e_stats(b) for b in ("datasheet", "measured")},
            "end_to_end_full": list(self.end_to_end_full),
            "end_to_end_full_summary": {"engine": "torch", "slack_faster_than_roof": ROOF_SLACK, **e2e_full_stats(self.end_to_end_full)},
            "flags": self.flags(),
            "failed": [{"op": r.op, "impl": r.impl, "shape": r.shape, "dtype": r.dtype, "error": r.note} for r in self.failed],
            "notes": list(self.notes),
            "rows": [r.to_json() for r in self.rows],
        }


# ------------------------------------------------------------------------------------------------


def resolve_specs(results: Results, hw: str | None, measured: str | None) -> tuple[HardwareSpec | None, HardwareSpec | None, list[str]]:
    """Specs for validation: the options, else those the bench run recorded (path first, then id)."""
    from pathlib import Path

    from rooflinecli.hardware import get_spec

    notes: list[str] = []
    bench = results.extra.get("bench", {}) if isinstance(results.extra, dict) else {}

    def recorded(spec_id: str | None, path_key: str, what: str) -> HardwareSpec | None:
        path = bench.get(path_key)
        try:  # a recorded path, if it is one (a number, a list or an impossible name is ignored)
            is_file = isinstance(path, str) and bool(path) and Path(path).is_file()
        except (OSError, ValueError):
            is_file = False
        if is_file:
            try:
                return get_spec(str(path))
            except RooflineError:  # say, a copy of a built-in spec in another checkout: the id decides
                pass
        if spec_id:
            try:
                return get_spec(spec_id)
            except RooflineError:
                notes.append(f"{what} spec '{spec_id}' recorded in the results was not found; pass --{'measured' if what == 'measured' else 'hw'}")
        return None

    ds = get_spec(hw) if hw else recorded(results.hardware_spec, "hardware_spec_path", "datasheet")
    ms = get_spec(measured) if measured else recorded(results.measured_spec, "measured_spec_path", "measured")
    if ds is not None and ds.kind == "measured" and ms is None:
        ms, ds = ds, None
    if ds is None and ms is not None and ms.base:
        ds = get_spec(ms.base)
    if ds is None and ms is None:
        raise RooflineError(f"{results.path}: no spec to validate against: the results name none; pass --hw (e.g. --hw h200)")
    for spec in (ds, ms):
        note = gpu_mismatch_note(results.gpu_name, spec)
        if note and note not in notes:
            notes.append(note)
    return ds, ms, notes


#: GPU model names as they appear in torch's device names and our spec names
_GPU_MODELS = ("h100", "h200", "h20", "h800", "b200", "b100", "gb200", "a100", "a800", "l40s", "l40", "l4", "4090", "5090", "mi300x", "mi325x", "mi355x")


def _gpu_model(name: str | None) -> str | None:
    import re

    words = set(re.findall(r"[a-z0-9]+", (name or "").lower()))
    return next((m for m in _GPU_MODELS if m in words), None)


def gpu_mismatch_note(gpu_name: str | None, spec: HardwareSpec | None) -> str | None:
    """A note when the results were measured on another GPU model than ``spec`` describes (an
    H100 run validated against the H200 spec compares two GPUs); None when they match, or when
    either name says no known model (CPU dry runs, custom specs)."""
    if spec is None:
        return None
    ran = _gpu_model(gpu_name)
    spec_gpu = _gpu_model(spec.measured_with.get("gpu_name")) or _gpu_model(spec.name) or _gpu_model(spec.id)
    if ran is None or spec_gpu is None or ran == spec_gpu:
        return None
    return (f"the results were measured on {gpu_name}, but spec '{spec.id}' describes {spec_gpu.upper()}: "
            "predictions and errors compare two different GPUs (pass the matching --hw / --measured)")


def _p50(r: ResultRow) -> float:
    return float(r.p50_s)


def check_rows(rows: Sequence[ResultRow], ds: HardwareSpec | None, ms: HardwareSpec | None) -> tuple[list[RowCheck], dict]:
    timed = [r for r in rows if r.correct and r.samples_s]
    fit_spec = ms or ds
    # leave-one-shape-out efficiency, fitted on our kernels only, applied to every row of a shape
    ours = points_from_rows(timed, fit_spec, impls=("triton",))
    loo = dict(zip(((p.op, p.impl, p.shape, p.dtype) for p in ours), loo_predictions(ours)))
    eff_all = fit_efficiency(ours)
    eff_without = loo_efficiencies(ours)  # per (op, shape, dtype): fitted on every other shape
    bound_ms = fastest_ceilings(ms) if ms is not None else None  # what a measured kernel must not beat
    checks = []
    for r in timed:
        kind = r.model_kind or _kind(r)
        cdt = r.compute_dtype or compute_dtype_for(kind, r.dtype)
        rd = roof(r.flops, r.bytes, ds, cdt) if ds is not None else None
        rm = roof(r.flops, r.bytes, ms, cdt) if ms is not None else None
        rb = roof(r.flops, r.bytes, bound_ms, cdt) if bound_ms is not None else None  # the fastest measured ceilings
        fitted = loo.get((r.op, r.impl, r.shape, r.dtype))
        if fitted is None:  # a baseline row: the efficiency fitted on our kernels without its shape
            base_roof = roof(r.flops, r.bytes, fit_spec, cdt)
            if base_roof is not None:
                fitted = base_roof.with_efficiency(eff_without.get((r.op, r.shape, r.dtype), eff_all).get(kind))
        m = _p50(r)
        checks.append(
            RowCheck(
                op=r.op,
                impl=r.impl,
                shape=r.shape,
                dtype=r.dtype,
                kind=kind,
                measured_s=m,
                p20_s=float(r.p20_s),
                p80_s=float(r.p80_s),
                flops=r.flops,
                bytes=r.bytes,
                bound=(rd or rm).bound if (rd or rm) else "",
                predicted_datasheet_s=rd.time_s if rd else None,
                predicted_measured_s=rm.time_s if rm else None,
                predicted_fitted_s=fitted,
                above_roof=bool(rd is not None and m < rd.time_s),
                above_measured_roof=bool(rb is not None and m < rb.time_s * (1 - MEASURED_ROOF_SLACK)),
                measured_bound_s=rb.time_s if rb else None,
            )
        )
    return checks, eff_all


def _kind(r: ResultRow) -> str:
    from rooflinecli.bench.fit import row_kind

    return row_kind(r)


# ---- targets ------------------------------------------------------------------------------------


def _param(r: ResultRow, *names: str) -> Any:
    for n in names:
        if n in r.params:
            return r.params[n]
    return None


def _timed(rows: Sequence[ResultRow], op: str | None, impl: str = "triton") -> list[ResultRow]:
    """Timed, correct rows of ``op`` (every op when None) and ``impl``."""
    return [r for r in rows if (op is None or r.op == op) and r.impl == impl and r.correct and r.samples_s]


def _gbps(r: ResultRow) -> float:
    return r.bytes / _p50(r) / 1e9


def paired_speedups(extra: Any) -> dict[tuple[str, str, str], float]:
    """``extra.bench.paired`` of a results file as {(op, shape, dtype): speedup}; {} when absent
    or malformed (files written before it)."""
    bench = extra.get("bench") if isinstance(extra, dict) else None
    items = bench.get("paired") if isinstance(bench, dict) else None
    out: dict[tuple[str, str, str], float] = {}
    for p in items if isinstance(items, list) else []:
        try:
            v = float(p["speedup"])
            if math.isfinite(v) and v > 0:
                out[(str(p["op"]), str(p["shape"]), str(p["dtype"]))] = v
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _speedups(rows: Sequence[ResultRow], paired: Mapping[tuple[str, str, str], float], op: str, select) -> list[tuple[ResultRow, float]]:
    """(our row, torch time / ours) for each shape with both timed: the interleaved pairs' median
    where bench measured one (``paired``: both figures at one clock state), else torch p50 / our
    p50."""
    torch_rows = {(r.shape, r.dtype): r for r in _timed(rows, op, "torch")}
    out = []
    for r in _timed(rows, op):
        t = torch_rows.get((r.shape, r.dtype))
        if t is not None and select(r):
            out.append((r, paired.get((op, r.shape, r.dtype), _p50(t) / _p50(r))))
    return out


def copy_bandwidth_gb_per_s(rows: Sequence[ResultRow], ms: HardwareSpec | None) -> tuple[float | None, str]:
    """The measured copy bandwidth the bandwidth targets are held to."""
    if ms is not None and ms.kind == "measured":
        return ms.memory_bandwidth_gb_per_s, f"measured copy BW {ms.memory_bandwidth_gb_per_s:.0f} GB/s ({ms.id})"
    copies = _timed(rows, "copy") + _timed(rows, "copy", "torch")
    if copies:
        best = max(_gbps(r) for r in copies)
        return best, f"best copy in this run {best:.0f} GB/s (no measured spec)"
    return None, "no measured copy bandwidth"


#: the kernel targets (graph-timed, against the fastest torch path the installed torch offers);
#: the copy ones from docs/reference.md
LAUNCHER_HOST_US_MAX = 30.0


def kernel_targets(rows: Sequence[ResultRow], ds: HardwareSpec | None, ms: HardwareSpec | None,
                   paired: Mapping[tuple[str, str, str], float] | None = None) -> list[Target]:
    """The kernel targets (docs/reference.md, section 3); ``paired`` (``paired_speedups``): the speedups measured in interleaved
    replay pairs, used instead of the ratio of separate medians where present."""
    paired = paired or {}
    targets: list[Target] = []
    copy_bw, copy_src = copy_bandwidth_gb_per_s(rows, ms)

    # copy >= 90% of datasheet bandwidth (largest case), >= 0.95x torch copy
    copies = _timed(rows, "copy")
    if copies and ds is not None:
        r = max(copies, key=lambda r: r.bytes)
        frac = _gbps(r) / ds.memory_bandwidth_gb_per_s
        targets.append(Target("copy_bandwidth", ">= 90% of datasheet HBM bandwidth", frac, 0.90, f"{r.shape} {r.dtype}: {_gbps(r):.0f} GB/s of {ds.memory_bandwidth_gb_per_s:.0f} ({ds.id})", "of datasheet BW"))
    else:
        targets.append(Target("copy_bandwidth", ">= 90% of datasheet HBM bandwidth", None, 0.90, "no timed copy rows", "of datasheet BW"))
    sp = _speedups(rows, paired, "copy", lambda r: True)
    targets.append(_worst("copy_vs_torch", ">= 0.95x torch copy_", sp, 0.95))

    def dims(r: ResultRow) -> list:
        return [_param(r, "M"), _param(r, "N"), _param(r, "K")]

    def big_gemm(r: ResultRow) -> bool:
        return all(isinstance(d, int) and 4096 <= d <= 8192 for d in dims(r))

    # GEMM bf16 at 4096-8192 >= 0.95x cuBLAS; fp8 >= 1.0x torch._scaled_mm
    targets.append(_worst("gemm_vs_torch", "bf16 M,N,K in 4096..8192: >= 0.95x cuBLAS", _speedups(rows, paired, "gemm", lambda r: r.dtype == "bf16" and big_gemm(r)), 0.95))
    targets.append(_worst("gemm_fp8_vs_torch", "fp8 M,N,K in 4096..8192: >= 1.0x torch._scaled_mm", _speedups(rows, paired, "gemm", lambda r: r.dtype == "fp8" and big_gemm(r)), 1.0))
    # skinny GEMM, M <= 256: >= 0.95x cuBLAS (every M)
    targets.append(_worst("skinny_gemm_vs_torch", "M <= 256: >= 0.95x cuBLAS", _speedups(rows, paired, "gemm", lambda r: isinstance(_param(r, "M"), int) and _param(r, "M") <= 256), 0.95))
    # skinny gemm at M = 1 >= 85% of measured copy bandwidth (largest weight)
    skinny = [r for r in _timed(rows, "gemm") if _param(r, "M") == 1]
    targets.append(_bandwidth_target("skinny_gemm_m1", ">= 85% of measured copy BW at M = 1", skinny, copy_bw, copy_src, 0.85))

    # flash attention prefill (hdim 128, seq >= 4k) >= 1.0x the best SDPA backend
    def long_flash(r: ResultRow) -> bool:
        return _param(r, "D") == 128 and (_param(r, "S", "N") or 0) >= 4096

    targets.append(_worst("flash_vs_sdpa", "hdim 128, seq >= 4k: >= 1.0x the fastest SDPA backend", _speedups(rows, paired, "flash_attention", long_flash), 1.0))

    # MLA decode: >= 350 TFLOP/s where compute-bound (datasheet ridge), >= 80% of copy BW where memory-bound
    mla = _timed(rows, "mla_decode")
    ridge = ds.ridge_point("bf16") if ds is not None else None
    compute_bound = [ridge is not None and r.bytes > 0 and r.flops / r.bytes >= ridge for r in mla]  # one pass: `r not in list` was O(n^2)
    mla_c = [r for r, c in zip(mla, compute_bound) if c]
    mla_m = [r for r, c in zip(mla, compute_bound) if not c]
    if mla_c:
        r = min(mla_c, key=lambda r: r.flops / _p50(r))
        tf = r.flops / _p50(r) / 1e12
        targets.append(Target("mla_decode_tflops", ">= 350 TFLOP/s compute-bound", tf / 350.0, 1.0, f"worst of {len(mla_c)}: {r.shape} {r.dtype} at {tf:.0f} TFLOP/s", "of 350 TFLOP/s"))
    else:
        targets.append(Target("mla_decode_tflops", ">= 350 TFLOP/s compute-bound", None, 1.0, "no compute-bound MLA rows timed", "of 350 TFLOP/s"))
    targets.append(_bandwidth_target("mla_decode_bw", ">= 80% of measured copy BW memory-bound", mla_m, copy_bw, copy_src, 0.80))

    # decode attention >= 1.0x SDPA (every shape); >= 80% of copy BW at the longest context
    # the launcher's default schedule (cases without a "schedule" param); the balanced schedule's
    # cases (bench's -bal twins) as their own line, to decide whether it should be the default
    def default_schedule(r: ResultRow) -> bool:
        return _param(r, "schedule") is None

    targets.append(_worst("decode_vs_sdpa", ">= 1.0x the fastest SDPA path", _speedups(rows, paired, "decode_attention", default_schedule), 1.0))
    balanced = _speedups(rows, paired, "decode_attention", lambda r: _param(r, "schedule") == "balanced")
    if balanced:
        targets.append(_worst("decode_balanced_vs_sdpa", "schedule='balanced': >= 1.0x the fastest SDPA path", balanced, 1.0))
    dec = [r for r in _timed(rows, "decode_attention") if default_schedule(r)]
    if dec:
        longest = max((_param(r, "N", "context", "S") or 0) for r in dec)
        dec = [r for r in dec if (_param(r, "N", "context", "S") or 0) == longest]
    targets.append(_bandwidth_target("decode_attention_bw", ">= 80% of measured copy BW at long context", dec, copy_bw, copy_src, 0.80))

    # MoE decode, T <= 16: >= 70% of copy bandwidth over the experts touched, every shape (worst)
    moe = [r for r in _timed(rows, "moe") if isinstance(_param(r, "T"), int) and _param(r, "T") <= 16]
    if moe and copy_bw is not None:
        r = min(moe, key=_gbps)
        targets.append(Target("moe_decode_bw", "T <= 16: >= 70% of copy BW over touched experts", _gbps(r) / copy_bw, 0.70,
                              f"worst of {len(moe)}: {r.shape} {r.dtype}: {_gbps(r):.0f} GB/s vs {copy_src}", "of copy BW"))
    else:
        targets.append(Target("moe_decode_bw", "T <= 16: >= 70% of copy BW over touched experts", None, 0.70, "no timed rows" if not moe else copy_src,
                              "of copy BW"))

    # every launcher <= 30 us of host time per call (eager, after a synchronize)
    hosted = [r for r in _timed(rows, None) if r.host_us_per_call is not None]
    if hosted:
        r = max(hosted, key=lambda r: r.host_us_per_call)
        over = sum(x.host_us_per_call > LAUNCHER_HOST_US_MAX for x in hosted)
        targets.append(Target("launcher_host_us", f"<= {LAUNCHER_HOST_US_MAX:g} us host time per call", LAUNCHER_HOST_US_MAX / r.host_us_per_call, 1.0,
                              f"worst {r.op} {r.shape} {r.dtype} at {r.host_us_per_call:.0f} us; {over} of {len(hosted)} launchers over",
                              f"of {LAUNCHER_HOST_US_MAX:g} us / worst us", shown=f"{r.host_us_per_call:,.0f} us worst"))
    else:
        targets.append(Target("launcher_host_us", f"<= {LAUNCHER_HOST_US_MAX:g} us host time per call", None, 1.0, "no host times (results written before they were recorded)",
                              f"of {LAUNCHER_HOST_US_MAX:g} us / worst us"))
    return targets


def _is_decode(r: ResultRow) -> bool:
    phase = _param(r, "phase", "regime")
    if isinstance(phase, str):
        return phase == "decode"
    t = _param(r, "T", "tokens", "M")
    return isinstance(t, int) and t <= 64


def _worst(name: str, goal: str, pairs: list[tuple[ResultRow, float]], threshold: float) -> Target:
    if not pairs:
        return Target(name, goal, None, threshold, "no shape with both ours and the baseline timed")
    r, s = min(pairs, key=lambda x: x[1])
    detail = f"worst of {len(pairs)}: {r.shape} {r.dtype} at {s:.2f}x"
    if len(pairs) > 1:
        detail += f" (median {float(np.median([x[1] for x in pairs])):.2f}x)"
    return Target(name, goal, s, threshold, detail)


def _bandwidth_target(name: str, goal: str, rows: list[ResultRow], copy_bw: float | None, copy_src: str, threshold: float) -> Target:
    unit = "of copy BW"
    if not rows:
        return Target(name, goal, None, threshold, "no timed rows", unit)
    if copy_bw is None:
        return Target(name, goal, None, threshold, copy_src, unit)
    r = max(rows, key=lambda r: r.bytes)
    return Target(name, goal, _gbps(r) / copy_bw, threshold, f"{r.shape} {r.dtype}: {_gbps(r):.0f} GB/s vs {copy_src}", unit)


# ---- end to end ----------------------------------------------------------------------------------


def end_to_end_checks(results: Results) -> list[dict[str, Any]]:
    """Errors of the end-to-end layer checks stored by ``roofline e2e`` (``extra.end_to_end``)."""
    e2e = results.extra.get("end_to_end") if isinstance(results.extra, dict) else None
    if not e2e:
        return []
    out = []
    for p in e2e.get("phases", []):
        m = p.get("measured_s")
        if not m:
            continue
        q = dict(p)
        for basis in ("datasheet", "measured", "fitted"):
            t = p.get(f"predicted_s_{basis}")
            q[f"error_{basis}"] = rel_error(t, m) if t else None
        out.append(q)
    return out


# ---- whole-model end to end (e2e --full) ----------------------------------------------------------

#: predictors of a whole-model point: (key, mode of ``rooflinecli.predict``, label)
E2E_PREDICTORS = (("roof", "datasheet", "roof (datasheet)"), ("roof_measured", "measured-roof", "roof (measured roof)"),
                  ("achievable", "achievable", "achievable model"))
#: a point faster than a roof by more than this is flagged (the roof must stay a bound)
ROOF_SLACK = 0.03


def predict_point(cfg, ds: HardwareSpec | None, ms: HardwareSpec | None, phase: str, batch: int, context: int, engine: str, notes: list[str]) -> dict[str, float | None]:
    """{predictor: seconds or None}: each mode of the one prediction path (``predict_step_s``) on
    the measured spec (datasheet: the datasheet spec, else the measured spec's base); achievable for torch engine points only."""
    from rooflinecli.analysis import Workload
    from rooflinecli.predict import predict_step_s

    out: dict[str, float | None] = {}
    wl = Workload(batch=batch, prompt_len=context, gen_len=1)
    for key, mode, _ in E2E_PREDICTORS:
        out[key] = None
        spec = ms if mode != "datasheet" else (ds or ms)
        if spec is None or (mode == "achievable" and engine != "torch"):
            continue
        try:
            out[key] = predict_step_s(cfg, spec, wl, phase, batch, context, mode=mode, engine="torch")
        except RooflineError as e:  # a predictor that cannot run leaves its column empty, said in the notes
            note = f"{key} prediction unavailable: {' '.join(str(e).split())[:200]}"
            if note not in notes:
                notes.append(note)
    return out


def end_to_end_full_checks(results: Results, ds: HardwareSpec | None, ms: HardwareSpec | None, notes: list[str]) -> list[dict[str, Any]]:
    """Per whole-model point of ``extra.end_to_end_full``: measured, each predictor and its error."""
    from rooflinecli.bench.e2e_full import rebuild_config

    section = results.extra.get("end_to_end_full") if isinstance(results.extra, dict) else None
    if not isinstance(section, dict):
        return []
    out = []
    for name, entry in (section.get("models") or {}).items():
        try:
            cfg = rebuild_config(entry["model_ref"], entry.get("config"))
        except (RooflineError, KeyError, TypeError, ValueError) as e:
            notes.append(f"e2e {name}: cannot rebuild its config ({e}); not predicted")
            continue
        for p in entry.get("points", []):
            m = p.get("measured_s")
            if not m:
                continue
            pred = predict_point(cfg, ds, ms, p["phase"], int(p["batch"]), int(p["context"]), p.get("engine", "torch"), notes)
            q = {"model": name, "layers": entry.get("layers_used"), "layers_full": entry.get("layers_full"), "reduced": bool(entry.get("reduced")),
                 "phase": p["phase"], "engine": p.get("engine", "torch"), "batch": p["batch"], "context": p["context"], "measured_s": m}
            for key, _, _ in E2E_PREDICTORS:
                q[f"predicted_s_{key}"] = pred[key]
                q[f"error_{key}"] = rel_error(pred[key], m) if pred[key] else None
            q["faster_than_roof"] = bool(pred["roof"] and m < pred["roof"] * (1 - ROOF_SLACK))
            q["faster_than_measured_roof"] = bool(pred["roof_measured"] and m < pred["roof_measured"] * (1 - ROOF_SLACK))
            out.append(q)
    return out


def e2e_full_stats(points: Sequence[dict[str, Any]], engine: str = "torch") -> dict[str, dict[str, Any]]:
    """Per predictor: median and p90 |error| over the points of ``engine``, overall and per phase."""
    mine = [p for p in points if p["engine"] == engine]
    out = {}
    for key, _, _ in E2E_PREDICTORS:
        out[key] = {"all": error_stats(p[f"error_{key}"] for p in mine).to_json()}
        for phase in ("decode", "prefill"):
            out[key][phase] = error_stats(p[f"error_{key}"] for p in mine if p["phase"] == phase).to_json()
    return out


def e2e_full_flags(points: Sequence[dict[str, Any]]) -> list[str]:
    out = []
    for p in points:
        for flag, key, what in (("faster_than_roof", "roof", "datasheet roof"), ("faster_than_measured_roof", "roof_measured", "measured-ceiling roof")):
            if p.get(flag):
                out.append(f"e2e {p['model']} {p['phase']} {p['engine']} B{p['batch']} N{p['context']}: measured {p['measured_s'] * 1e6:.1f} us is "
                           f"more than {ROOF_SLACK:.0%} faster than the {what} {p[f'predicted_s_{key}'] * 1e6:.1f} us (the roof must bound it: a counting error)")
    return out


def e2e_full_rows(points: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Table rows: model, phase, engine, B, N, layers, measured us, then each predictor's us and error."""
    rows = []
    for p in points:
        layers = f"{p['layers']}/{p['layers_full']}" if p.get("reduced") else str(p["layers"])
        row = [p["model"], p["phase"], p["engine"], str(p["batch"]), str(p["context"]), layers, _us(p["measured_s"])]
        for key, _, _ in E2E_PREDICTORS:
            row += [_us(p[f"predicted_s_{key}"]), _pct(p[f"error_{key}"])]
        rows.append(row + (["FASTER THAN ROOF"] if p.get("faster_than_roof") or p.get("faster_than_measured_roof") else [""]))
    return rows


E2E_FULL_HEADER = ["model", "phase", "engine", "batch", "context", "layers", "measured us", "roof us", "err", "roof-meas. us", "err", "achievable us", "err", "flag"]


def e2e_full_summary_rows(points: Sequence[dict[str, Any]]) -> list[list[str]]:
    """[predictor, points, median |err|, p90 |err|] over torch-engine points, overall then per phase."""
    stats = e2e_full_stats(points)
    rows = []
    for key, _, label in E2E_PREDICTORS:
        for scope in ("all", "decode", "prefill"):
            st = stats[key][scope]
            if st["n"]:
                rows.append([label, scope, str(st["n"]), _abs_pct(st["median_abs_error"]), _abs_pct(st["p90_abs_error"])])
    return rows


def validate(results: Results, hw: str | None = None, measured: str | None = None) -> Validation:
    ds, ms, notes = resolve_specs(results, hw, measured)
    checks, eff = check_rows(results.rows, ds, ms)
    if not checks:
        notes.append("no timed, correct rows in the results")
    full = end_to_end_full_checks(results, ds, ms, notes)
    return Validation(
        end_to_end_full=tuple(full),
        results_path=results.path,
        gpu_name=results.gpu_name,
        datasheet=ds,
        measured=ms,
        rows=tuple(checks),
        failed=tuple(r for r in results.rows if not r.correct),
        targets=tuple(kernel_targets(results.rows, ds, ms, paired_speedups(results.extra))),
        fitted_efficiency=eff,
        end_to_end=tuple(end_to_end_checks(results)),
        notes=tuple(notes),
    )


# ---- rendering -----------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.1f}%"


def _abs_pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e6:.4g}"


def summary_table(v: Validation) -> list[list[str]]:
    """[basis, n, median |err|, p90 |err|, median signed err] for our kernels."""
    out = []
    for basis, label in (("datasheet", "datasheet ceilings"), ("measured", "measured ceilings"), ("fitted", "measured + fitted efficiency (leave-one-out)")):
        if basis == "measured" and v.measured is None:
            continue
        s = v.stats(basis)["overall"]
        out.append([label, str(s["n"]), _abs_pct(s["median_abs_error"]), _abs_pct(s["p90_abs_error"]), _pct(s["median_error"])])
    return out


def to_markdown(v: Validation) -> str:
    lines = [f"# Validation: {v.gpu_name}", ""]
    lines.append(
        f"Results `{v.results_path}`; datasheet spec `{v.datasheet.id if v.datasheet else '-'}`, measured spec "
        f"`{v.measured.id if v.measured else '-'}`. Error = (predicted - measured) / measured; our Triton kernels. "
        f"Goal: median |error| <= {KERNEL_ERROR_GOAL:.0%} against measured ceilings, <= {E2E_ERROR_GOAL:.0%} end to end."
    )
    lines += ["", "| prediction from | points | median abs error | p90 abs error | median error |", "|---|---:|---:|---:|---:|"]
    lines += ["| " + " | ".join(r) + " |" for r in summary_table(v)]
    if v.end_to_end:
        lines += ["", "## End to end (one decoder layer)", "", "| phase | measured us | datasheet us | error | measured-ceiling us | error | fitted us | error |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for p in v.end_to_end:
            lines.append(
                f"| {p.get('phase')} | {_us(p.get('measured_s'))} | {_us(p.get('predicted_s_datasheet'))} | {_pct(p.get('error_datasheet'))} | "
                f"{_us(p.get('predicted_s_measured'))} | {_pct(p.get('error_measured'))} | {_us(p.get('predicted_s_fitted'))} | {_pct(p.get('error_fitted'))} |"
            )
    if v.end_to_end_full:
        lines += ["", "## Whole model (e2e --full)", "",
                  "Error = (predicted - measured) / measured. Summary over torch-engine points (decode: one CUDA graph per step; prefill: eager).", "",
                  "| predictor | phase | points | median abs error | p90 abs error |", "|---|---|---:|---:|---:|"]
        lines += ["| " + " | ".join(r) + " |" for r in e2e_full_summary_rows(v.end_to_end_full)]
        lines += ["", "| " + " | ".join(E2E_FULL_HEADER) + " |", "|" + "---|" * 6 + "---:|" * 7 + "---|"]
        lines += ["| " + " | ".join(r) + " |" for r in e2e_full_rows(v.end_to_end_full)]
    lines += ["", "## Kernel targets", "", "| target | goal | value (unit) | status | detail |", "|---|---|---:|---|---|"]
    for t in v.targets:
        lines.append(f"| {t.name} | {t.goal} | {t.value_text()} | {t.status} | {t.detail} |")
    lines += ["", "## By op (our kernels, median abs error)", "", "| op | points | datasheet | measured | fitted (LOO) |", "|---|---:|---:|---:|---:|"]
    ds_by, ms_by, ft_by = (v.stats(b)["by_op"] for b in ("datasheet", "measured", "fitted"))
    for op in ds_by:
        lines.append(
            f"| {op} | {ds_by[op]['n']} | {_abs_pct(ds_by[op]['median_abs_error'])} | "
            f"{_abs_pct(ms_by.get(op, {}).get('median_abs_error')) if v.measured else '-'} | {_abs_pct(ft_by[op]['median_abs_error'])} |"
        )
    lines += [
        "",
        "## Per kernel and shape",
        "",
        "| op | impl | shape | dtype | bound | measured us (p20-p80) | TFLOP/s | GB/s | datasheet us | err | measured-ceiling us | err | fitted us | err |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in v.rows:
        j = r.to_json()
        flag = " **above roof**" if r.above_roof else ""
        lines.append(
            f"| {r.op} | {r.impl} | {r.shape} | {r.dtype} | {r.bound}{flag} | {_us(r.measured_s)} ({_us(r.p20_s)}-{_us(r.p80_s)}) | "
            f"{j['achieved_tflops']:.1f} | {j['achieved_gb_per_s']:.0f} | {_us(r.predicted_datasheet_s)} | {_pct(j['error_datasheet'])} | "
            f"{_us(r.predicted_measured_s)} | {_pct(j['error_measured'])} | {_us(r.predicted_fitted_s)} | {_pct(j['error_fitted'])} |"
        )
    flags = v.flags()
    if flags:
        lines += ["", "## Flags", ""] + [f"- {f}" for f in flags]
    if v.failed:
        lines += ["", "## Failed checks (not timed)", ""] + [f"- {r.op}[{r.impl}] {r.shape} {r.dtype}: {r.note}" for r in v.failed]
    if v.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in v.notes]
    return "\n".join(lines) + "\n"
