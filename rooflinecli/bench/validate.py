"""``roofline validate``: the analytical model against measured kernels.

Per kernel and shape: measured median (p20/p80) beside the roofline prediction from the datasheet
ceilings, from the measured ceilings, and from the measured ceilings with a calibrated efficiency
fitted leave-one-shape-out (``rooflinecli.bench.fit``); error = (predicted - measured) / measured.
Summary statistics (median and p90 |error|, overall and by op) for our kernels, the kernel
targets as met / missed with their figures, and the end-to-end decoder-layer check when the results
carry one. A point faster than its datasheet roof is flagged as a counting error.

Targets are reported, never asserted: validation exits 0 whatever the errors (exit 2 only for bad
input). This module holds the data classes, the per-row checks and ``validate()``; the kernel
targets live in ``kernel_targets``, the end-to-end points in ``e2e_validation``, the Markdown and
table rendering in ``validate_render``.
"""

from __future__ import annotations

import math

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rooflinecli.bench.e2e_validation import ROOF_SLACK, e2e_full_flags, e2e_full_stats, end_to_end_checks, end_to_end_full_checks
from rooflinecli.bench.fit import error_stats, fit_efficiency, loo_efficiencies, points_from_rows, predictions_with, rel_error
from rooflinecli.bench.kernel_targets import Target, kernel_targets, paired_speedups
from rooflinecli.bench.predict import compute_dtype_for, roof_maker
from rooflinecli.bulk import bulk, frozen_from_fields
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
        ai, m = self.ai, self.measured_s

        def err(t: float | None) -> float | None:  # error(basis), without its lookup table per row
            return None if t is None else rel_error(t, m)

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
            "ai_flops_per_byte": ai if math.isfinite(ai) else None,
            "achieved_tflops": self.flops / m / 1e12,
            "achieved_gb_per_s": self.bytes / m / 1e9,
            "predicted_datasheet_s": self.predicted_datasheet_s,
            "error_datasheet": err(self.predicted_datasheet_s),
            "predicted_measured_s": self.predicted_measured_s,
            "error_measured": err(self.predicted_measured_s),
            "predicted_fitted_s": self.predicted_fitted_s,
            "error_fitted": err(self.predicted_fitted_s),
            "above_roof": self.above_roof,
            "above_measured_roof": self.above_measured_roof,
            "measured_bound_s": self.measured_bound_s,
        }

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
        errors: dict[str, list] = {}  # per op, in one pass over the rows
        for r in self.rows:
            if r.impl == impl:
                errors.setdefault(r.op, []).append(r.error(basis))
        overall = error_stats(e for op_errors in errors.values() for e in op_errors)
        by_op = {op: error_stats(errors[op]).to_json() for op in sorted(errors)}
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

    @bulk
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
    eff_without = loo_efficiencies(ours)  # per (op, shape, dtype): fitted on every other shape
    loo = dict(zip(((p.op, p.impl, p.shape, p.dtype) for p in ours), predictions_with(ours, eff_without)))
    eff_all = fit_efficiency(ours)
    bound_ms = fastest_ceilings(ms) if ms is not None else None  # what a measured kernel must not beat

    def none(flops: float, bytes_: float, cdt: str) -> None:
        return None

    roof_ds, roof_ms = (roof_maker(ds) if ds is not None else none), (roof_maker(ms) if ms is not None else none)
    roof_bound = roof_maker(bound_ms) if bound_ms is not None else none  # the fastest measured ceilings
    roof_fit = roof_ms if ms is not None else roof_ds
    checks = []
    for r in timed:
        kind = r.model_kind or _kind(r)
        cdt = r.compute_dtype or compute_dtype_for(kind, r.dtype)
        rd, rm, rb = roof_ds(r.flops, r.bytes, cdt), roof_ms(r.flops, r.bytes, cdt), roof_bound(r.flops, r.bytes, cdt)
        fitted = loo.get((r.op, r.impl, r.shape, r.dtype))
        if fitted is None:  # a baseline row: the efficiency fitted on our kernels without its shape
            base_roof = roof_fit(r.flops, r.bytes, cdt)
            if base_roof is not None:
                fitted = base_roof.with_efficiency(eff_without.get((r.op, r.shape, r.dtype), eff_all).get(kind))
        m = _p50(r)
        checks.append(
            frozen_from_fields(RowCheck, dict(
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
            ))
        )
    return checks, eff_all


def _kind(r: ResultRow) -> str:
    from rooflinecli.bench.fit import row_kind

    return row_kind(r)


@bulk
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
