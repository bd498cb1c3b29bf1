"""The achievable model: what a real GPU reaches, from calibrated vendor-kernel timings.

A measured spec names its calibration file (``[measured_with] calibration = "h200-calibration.json"``,
or a top-level ``calibration`` key where the spec schema has one; relative to the spec file). ``fit`` turns the file's rows into per-op-kind time models (fixed
cost + work / achieved rate), ``profiles`` says which kernels an engine launches, and ``step``
times the kernels of one phase, with the roof beside.

Public entry points:

- ``predict_step_s(cfg, spec, wl, phase, batch, context, mode=..., engine=...)``: seconds of one
  phase; mode "roof" (the datasheet roofline: a measured spec's base), "roof_measured" (the
  roofline on the spec's own ceilings) or "achievable" (the calibrated model);
- ``predict_step_breakdown(...)``: the same as per-op rows;
- ``calibration_for(spec)`` and ``models_for(spec)``: the spec's calibration and its fit;
- ``roof_spec(spec, models)``: the ceilings of the roof the achievable mode prints beside its
  times, and that no achievable time goes below.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from rooflinecli.errors import RooflineError

from .profiles import ENGINES, MODES, EngineProfile, check_mode, get_engine

#: ``measured_with`` key of a spec that names its calibration file
CALIBRATION_KEY = "calibration"
PREDICT_MODES: tuple[str, ...] = ("roof", "roof_measured", "achievable")

__all__ = [
    "CALIBRATION_KEY",
    "ENGINES",
    "MODES",
    "PREDICT_MODES",
    "EngineProfile",
    "calibration_for",
    "calibration_path",
    "check_mode",
    "get_engine",
    "models_for",
    "phase_achievable",
    "predict_step_breakdown",
    "predict_step_s",
    "resolve_mode",
    "roof_spec",
]


def calibration_path(spec) -> Path | None:
    """The calibration file a spec names (relative paths resolve beside the spec file), or None."""
    # a top-level ``calibration`` key (if the spec schema has one), else ``[measured_with] calibration``
    name = getattr(spec, CALIBRATION_KEY, None) or (spec.measured_with or {}).get(CALIBRATION_KEY)
    if not name:
        return None
    p = Path(name)
    if not p.is_absolute() and spec.path:
        p = Path(spec.path).resolve().parent / p
    return p


def calibration_for(spec):
    """The spec's ``Calibration`` or None; a named file that is missing or bad: RooflineError."""
    from .calibration import load_calibration

    p = calibration_path(spec)
    if p is None:
        return None
    if not p.is_file():
        raise RooflineError(f"{spec.path or spec.id}: measured_with.calibration: no such calibration file {p}")
    return load_calibration(str(p))


@lru_cache(maxsize=8)
def _fit(path: str):
    from .calibration import load_calibration
    from .fit import fit_models

    return fit_models(load_calibration(path))


def models_for(spec):
    """The fitted models of the spec's calibration (cached per file), or None without one."""
    cal = calibration_for(spec)
    return None if cal is None else _fit(cal.path)


def roof_spec(spec, models):
    """The ceilings of the achievable mode's roof: ``spec`` with its HBM bandwidth raised to the
    fastest stream measured on that GPU, the highest of the spec's own (sustained copy), the
    memory entries of ``hardware.bound_spec`` (burst copy, read-only ceiling) and the
    calibration's fastest memory-bound row (``fit.fastest_stream``), each only up to the
    datasheet's bandwidth (the spec's base): a figure above it is a mistimed row, not HBM. Reads
    outrun copies: on the H200 of 2026-11-30 SDPA decode streamed 4,576 GB/s against the copy's
    4,252, so a roof on the copy alone put big-KV decode steps 4% under their own achievable
    time. Compute peaks stay the spec's sustained ones, which the achievable GEMMs never exceed
    either. With it the roof is a bound: every achievable row is at least its roof (``step``)."""
    bw, _ = _roof_bandwidth(spec, models)
    if bw <= spec.memory_bandwidth_gb_per_s:
        return spec
    return replace(spec, memory_bandwidth_gb_per_s=bw)


def _datasheet_bandwidth_gb_per_s(spec) -> float | None:
    """The HBM bandwidth of the spec's datasheet base, or None (no base, or one that does not load)."""
    if not spec.base or spec.kind != "measured":
        return None
    from rooflinecli.hardware import get_spec

    try:
        return get_spec(spec.base).memory_bandwidth_gb_per_s
    except RooflineError:
        return None


def _roof_bandwidth(spec, models) -> tuple[float, str]:
    """(GB/s, where it comes from) of ``roof_spec``."""
    from rooflinecli.hardware import bound_spec

    cap = _datasheet_bandwidth_gb_per_s(spec)
    if cap is None:  # nothing to tell a real stream from a mistimed row: the spec's own figure
        return spec.memory_bandwidth_gb_per_s, "the spec's bandwidth"
    best, where = spec.memory_bandwidth_gb_per_s, "the spec's bandwidth"
    measured = bound_spec(spec).memory_bandwidth_gb_per_s
    if best < measured <= cap:
        best, where = measured, "fastest measured ceiling in [measured_with]"
    if models is not None:
        from .fit import fastest_stream

        stream_bw, stream_row = fastest_stream(models.streams, cap * 1e9)
        if stream_bw / 1e9 > best:
            best, where = stream_bw / 1e9, f"fastest calibration stream, {stream_row}"
        over = sum(1 for bw, _ in models.streams if bw / 1e9 > cap)
        if over:
            where += f"; {over} calibration row(s) over the datasheet's {cap:,.0f} GB/s left out"
    return best, where


def roof_bandwidth_source(spec, models) -> str:
    """Where the achievable roof's HBM bandwidth comes from, in words (for the summary line)."""
    return _roof_bandwidth(spec, models)[1]


def require_models(spec):
    m = models_for(spec)
    if m is None:
        raise RooflineError(
            f"{spec.id}: achievable mode needs a calibrated spec (a measured spec naming its calibration file, "
            f"e.g. --hw h200-measured); {spec.id} is {spec.kind}: use --mode roof"
        )
    return m


def resolve_mode(spec, mode: str | None, engine: str = "torch") -> str:
    """The mode a command runs in: ``mode`` checked, or (None) "achievable" on a calibrated spec and
    "roof" otherwise. Achievable on a spec without a calibration is a RooflineError."""
    get_engine(engine)
    if mode is None:
        return "achievable" if calibration_path(spec) is not None else "roof"
    check_mode(mode)
    if mode == "achievable":
        require_models(spec)
    return mode


def phase_achievable(cfg, spec, wl, phase: str, batch, context, engine: str = "torch"):
    """Achievable rows of one phase (``step.StepRow``), arrays over (batch, context)."""
    from .step import step_rows

    return step_rows(cfg, spec, wl, phase, batch, context, require_models(spec), get_engine(engine))


def _datasheet(spec):
    if spec.kind != "measured" or not spec.base:
        return spec
    from rooflinecli.hardware import get_spec

    return get_spec(spec.base)


def predict_step_breakdown(cfg, spec, wl, phase: str, batch, context, *, mode: str, engine: str = "torch") -> list[dict]:
    """Per-op rows of one phase: name, kind, layers, kernels, time_s (the mode's), roof_s,
    fixed_s, efficiency (achievable rows add host_s: the host's seconds per layer of the row's
    eager calls). Phase "prefill": the whole prefill of ``context`` prompt tokens per
    sequence; "decode": one decode step at ``context`` cached tokens."""
    import numpy as np

    if mode not in PREDICT_MODES:
        raise RooflineError(f"mode: unknown '{mode}'; known: {', '.join(PREDICT_MODES)}")
    get_engine(engine)
    wl = replace(wl, efficiency={}, use_fitted_efficiency=False, launch_overhead_s=0.0)
    if mode == "achievable":
        return [
            {"name": r.name, "kind": r.kind, "layers": r.layers, "kernels": r.kernels, "time_s": float(np.sum(r.time_s)),
             "roof_s": float(np.sum(r.roof_s)), "fixed_s": float(np.sum(r.fixed_s)), "efficiency": r.mean_efficiency(), "note": r.note,
             "host_s": r.host_s}
            for r in phase_achievable(cfg, spec, wl, phase, float(batch), float(context), engine)
        ]
    if mode == "roof_measured" and spec.kind != "measured":
        raise RooflineError(f"mode roof_measured needs a measured spec; {spec.id} is {spec.kind}")
    from rooflinecli.analysis.phase import phase_times

    roof_spec = _datasheet(spec) if mode == "roof" else spec
    return [
        {"name": t.name, "kind": t.op.kind, "layers": t.op.layers, "kernels": t.op.kernels, "time_s": float(np.sum(t.time_s)),
         "roof_s": float(np.sum(t.time_s)), "fixed_s": 0.0, "efficiency": 1.0, "note": t.op.note}
        for t in phase_times(cfg, roof_spec, wl, phase, float(batch), float(context))
    ]


def predict_step_s(cfg, spec, wl, phase: str, batch, context, *, mode: str, engine: str = "torch") -> float:
    """Seconds of one phase on one GPU of the replica (see ``predict_step_breakdown``)."""
    return float(sum(r["time_s"] for r in predict_step_breakdown(cfg, spec, wl, phase, batch, context, mode=mode, engine=engine)))
