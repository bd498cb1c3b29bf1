"""The achievable model: what a real GPU reaches, from calibrated vendor-kernel timings.

A measured spec names its calibration file (``[measured_with] calibration = "h200-calibration.json"``,
or a top-level ``calibration`` key where the spec schema has one; relative to the spec file). ``fit`` turns the file's rows into per-op-kind time models (fixed
cost + work / achieved rate), ``profiles`` says which kernels an engine launches, and ``step``
times the kernels of one phase, with the roof beside.

Public entry points (``rooflinecli.predict`` composes them with the roofline; nothing else should):

- ``default_engine(spec)``, ``has_calibration(spec, engine)``, ``calibration_for(spec, engine)`` and
  ``models_for(spec, engine)``: a spec's calibration for an engine and its fit;
- ``phase_achievable(cfg, spec, wl, phase, batch, context, engine)``: the achievable rows of one
  phase (``step.StepRow``), each no faster than its roof on ``ceilings.measured_roof_spec``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from rooflinecli.errors import RooflineError

from .profiles import ENGINES, EngineProfile, get_engine

#: ``measured_with`` key of a spec that names its calibration file
CALIBRATION_KEY = "calibration"

__all__ = [
    "CALIBRATION_KEY",
    "ENGINES",
    "EngineProfile",
    "calibration_for",
    "calibration_path",
    "default_engine",
    "get_engine",
    "has_calibration",
    "models_for",
    "phase_achievable",
    "require_models",
]


def default_engine(spec) -> str:
    """The engine a prediction on ``spec`` runs when none is named: "torch" (the engine of the
    project's own calibration)."""
    return "torch"


def calibration_path(spec, engine: str | None = None) -> Path | None:
    """The calibration file of ``spec`` for ``engine`` (relative paths resolve beside the spec
    file), or None. The torch and fused engines share the spec's own calibration."""
    get_engine(engine or default_engine(spec))
    # a top-level ``calibration`` key (if the spec schema has one), else ``[measured_with] calibration``
    name = getattr(spec, CALIBRATION_KEY, None) or (spec.measured_with or {}).get(CALIBRATION_KEY)
    if not name:
        return None
    p = Path(name)
    if not p.is_absolute() and spec.path:
        p = Path(spec.path).resolve().parent / p
    return p


def has_calibration(spec, engine: str | None = None) -> bool:
    """Whether ``spec`` names a calibration for ``engine``."""
    return calibration_path(spec, engine) is not None


def calibration_for(spec, engine: str | None = None):
    """The spec's ``Calibration`` for ``engine`` or None; a named file that is missing or bad: RooflineError."""
    from .calibration import load_calibration

    p = calibration_path(spec, engine)
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


def models_for(spec, engine: str | None = None):
    """The fitted models of the spec's calibration for ``engine`` (cached per file), or None without one."""
    cal = calibration_for(spec, engine)
    return None if cal is None else _fit(cal.path)


def require_models(spec, engine: str | None = None):
    m = models_for(spec, engine)
    if m is None:
        raise RooflineError(
            f"{spec.id}: achievable mode needs a calibrated spec (a measured spec naming its calibration file, "
            f"e.g. --hw h200-measured); {spec.id} is {spec.kind}: use --mode roof"
        )
    return m


def phase_achievable(cfg, spec, wl, phase: str, batch, context, engine: str = "torch"):
    """Achievable rows of one phase (``step.StepRow``), arrays over (batch, context)."""
    from .step import step_rows

    return step_rows(cfg, spec, wl, phase, batch, context, require_models(spec, engine), get_engine(engine))
