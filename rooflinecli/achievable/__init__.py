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

#: names of ``profiles`` this package exports, read on first use (``hw list`` asks which engines
#: are calibrated on each GPU, never how an engine runs)
_FROM_PROFILES = ("ENGINES", "EngineProfile", "get_engine")

#: ``measured_with`` key of a spec that names its calibration file
CALIBRATION_KEY = "calibration"

__all__ = [
    "CALIBRATION_KEY",
    "ENGINES",
    "EngineProfile",
    "calibrated_engines",
    "calibration_for",
    "calibration_source",
    "calibration_path",
    "default_engine",
    "get_engine",
    "has_calibration",
    "imported_calibrations",
    "serving_engine",
    "measured_dir",
    "models_for",
    "phase_achievable",
    "require_models",
    "transfer_donor",
]


def __getattr__(name: str):
    """``ENGINES``, ``EngineProfile`` and ``get_engine``: ``profiles``', imported on first use."""
    if name in _FROM_PROFILES:
        from . import profiles

        return getattr(profiles, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: engines whose calibrations are imported vendor tables, looked up by (GPU, engine), in the
#: order a GPU without its own calibration picks its default engine from
IMPORTED_ENGINES: tuple[str, ...] = ("vllm", "trtllm", "sglang")
#: file name of an imported calibration of (GPU id, engine) in ``measured_dir()``
IMPORTED_NAME = "{gpu}.{engine}.calibration.json.gz"


def measured_dir() -> Path:
    """The folder of measured specs and calibrations (``hardware_specs/measured``)."""
    from rooflinecli.hardware.loader import specs_dir

    return specs_dir() / "measured"


def gpu_id(spec) -> str:
    """The GPU a spec describes: a measured spec's datasheet base, else its own id."""
    return spec.base if spec.kind == "measured" and spec.base else spec.id


def imported_calibrations() -> list[tuple[str, str, Path]]:
    """(GPU id, engine, path) of every imported calibration shipped in ``measured_dir()``."""
    d = measured_dir()
    out = []
    suffix = IMPORTED_NAME.format(gpu="", engine="")[1:]  # ".calibration.json.gz"
    for p in sorted(d.glob("*" + suffix)) if d.is_dir() else ():
        gpu, _, engine = p.name[: -len(suffix)].rpartition(".")
        if gpu and engine in IMPORTED_ENGINES:
            out.append((gpu, engine, p))
    return out


def calibrated_engines(spec) -> list[tuple[str, str]]:
    """(engine, where its calibration comes from: "own ...", "imported ..." or "transferred ...")
    for every engine calibrated on ``spec``'s GPU, without loading the files: the spec's own
    calibration (torch and fused engines), the imported ones of its GPU, and for a GPU without
    them, the nearest measured GPU's (``transfer_donor``)."""
    out = []
    own = _own_calibration(spec)
    if own:
        out += [("torch", f"own measurements ({Path(own).name})"), ("fused", f"own measurements ({Path(own).name})")]
    shipped = imported_calibrations()
    out += [(e, f"imported vendor tables ({p.name})") for g, e, p in shipped if g == gpu_id(spec)]
    for e in IMPORTED_ENGINES:
        donor = None if any(x == e for x, _ in out) else transfer_donor(spec, e, shipped)
        if donor is not None:
            out.append((e, f"transferred from {donor}'s imported tables"))
    return out


def _own_calibration(spec) -> str | None:
    return getattr(spec, CALIBRATION_KEY, None) or (spec.measured_with or {}).get(CALIBRATION_KEY)


def default_engine(spec) -> str:
    """The engine a prediction on ``spec`` runs when none is named: "torch" (the engine of the
    project's own calibration). A datasheet spec thus stays on its roof unless an engine is named
    (``--hw h100-sxm --engine vllm``); ``serving_engine(spec)`` is the serving engine it would take."""
    return "torch"


def serving_engine(spec) -> str | None:
    """The first of ``IMPORTED_ENGINES`` calibrated on ``spec``'s GPU, imported or transferred
    (``calibrated_engines``), or None."""
    have = {e for e, _ in calibrated_engines(spec)}
    return next((e for e in IMPORTED_ENGINES if e in have), None)


def calibration_path(spec, engine: str | None = None) -> Path | None:
    """The calibration file of ``spec`` for ``engine`` (relative paths resolve beside the spec
    file), or None. The torch and fused engines share the spec's own calibration; the serving
    engines (``IMPORTED_ENGINES``) read the imported calibration of the spec's GPU, whatever
    the spec's kind."""
    from .profiles import get_engine

    engine = engine or default_engine(spec)
    get_engine(engine)  # an unknown engine: one line naming the known ones
    if engine in IMPORTED_ENGINES:
        p = measured_dir() / IMPORTED_NAME.format(gpu=gpu_id(spec), engine=engine)
        if p.is_file():
            return p
        donor = transfer_donor(spec, engine)
        return None if donor is None else measured_dir() / IMPORTED_NAME.format(gpu=donor, engine=engine)
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


def ceilings_of(gpu) -> tuple[float, float]:
    """(bf16 dense FLOP/s, HBM bytes/s) of the datasheet behind ``gpu`` (an id or a spec; a
    measured spec's base)."""
    from rooflinecli.hardware import get_spec

    s = get_spec(gpu) if isinstance(gpu, str) else gpu
    if s.kind == "measured" and s.base:
        s = get_spec(s.base)
    return s.peak_flops_per_s("bf16"), s.memory_bandwidth_gb_per_s * 1e9


def nearest_gpu(gpu, candidates: list[str]) -> str | None:
    """The candidate nearest ``gpu`` (an id or a spec) in (log bf16 peak, log HBM bandwidth)."""
    import math

    if not candidates:
        return None
    p, b = ceilings_of(gpu)

    def distance(c: str) -> tuple[float, str]:
        pc, bc = ceilings_of(c)
        return abs(math.log(pc / p)) + abs(math.log(bc / b)), c

    return min(candidates, key=distance)


def transfer_donor(spec, engine: str, shipped: list[tuple[str, str, Path]] | None = None) -> str | None:
    """The measured GPU whose imported ``engine`` calibration stands in for ``spec``'s GPU when it
    has none of its own: the nearest in (log bf16 peak, log HBM bandwidth); None when the GPU has
    its own, the engine is not imported, or no GPU has it. ``shipped``: ``imported_calibrations()``
    when the caller has read it already."""
    if engine not in IMPORTED_ENGINES:
        return None
    have = [g for g, e, _ in (imported_calibrations() if shipped is None else shipped) if e == engine]
    if gpu_id(spec) in have:
        return None
    return nearest_gpu(spec, have)


def calibration_for(spec, engine: str | None = None):
    """The spec's ``Calibration`` for ``engine`` or None; a named file that is missing or bad:
    RooflineError. A calibration transferred from another GPU (``transfer_donor``) says so in its
    ``gpu``."""
    from dataclasses import replace

    from .calibration import load_calibration

    p = calibration_path(spec, engine)
    if p is None:
        return None
    if not p.is_file():
        raise RooflineError(f"{spec.path or spec.id}: measured_with.calibration: no such calibration file {p}")
    cal = load_calibration(str(p))
    donor = transfer_donor(spec, engine or default_engine(spec))
    if donor is not None:
        cal = replace(cal, gpu=f"{cal.gpu}, transferred to {spec.id} by the datasheet ceilings (no data of its own)")
    return cal


@lru_cache(maxsize=8)
def _fit(path: str):
    from .calibration import load_calibration
    from .fit import fit_models

    return fit_models(load_calibration(path))


def calibration_source(spec, engine: str | None = None) -> str:
    """Which calibration answers for (spec, engine), in words (for summary lines)."""
    engine = engine or default_engine(spec)
    cal = calibration_for(spec, engine)
    if cal is None:
        return "none"
    if cal.tables:
        src = cal.source
        versions = sorted({f"{t['provenance'].get('framework')} {t['provenance'].get('framework_version')}" for t in cal.tables.values()})
        return f"{Path(cal.path).name}: {src.get('package', '')} {src.get('package_version', '')} tables of {cal.gpu} ({', '.join(versions)})"
    return f"{Path(cal.path).name}: our own measurements of {cal.gpu}"


def models_for(spec, engine: str | None = None):
    """The fitted models of the spec's calibration for ``engine`` (cached per file), or None
    without one; transferred from another GPU's (``transfer_donor``): its tables' rates scaled by
    the two GPUs' datasheet ceilings (``tables.transferred``)."""
    cal = calibration_for(spec, engine)
    if cal is None:
        return None
    donor = transfer_donor(spec, engine or default_engine(spec))
    if donor is None:
        return _fit(cal.path)
    return _fit_transferred(cal.path, donor, ceilings_of(spec))


@lru_cache(maxsize=8)
def _fit_transferred(path: str, donor: str, target: tuple[float, float]):
    from dataclasses import replace

    import numpy as np

    from .tables import transferred

    m = _fit(path)
    (pd, bd), (pg, bg) = ceilings_of(donor), target
    copy = m.linear["copy"]
    return replace(m, tables=transferred(m.tables, donor, target),
                   gemm=replace(m.gemm, flops_per_s=m.gemm.flops_per_s * pg / pd, bytes_per_s=m.gemm.bytes_per_s * bg / bd),
                   linear={**m.linear, "copy": replace(copy, coef=np.array([copy.coef[0], copy.coef[1] * bd / bg]))})


def require_models(spec, engine: str | None = None):
    m = models_for(spec, engine)
    if m is None:
        engine = engine or default_engine(spec)
        have = sorted({e for g, e, _ in imported_calibrations() if g == gpu_id(spec)})
        raise RooflineError(
            f"{spec.id}: no calibration for engine {engine} (achievable mode needs one: "
            + (f"this GPU has {', '.join(have)}" if have else "a measured spec naming its calibration file, e.g. --hw h200-measured")
            + "); use --mode roof"
        )
    return m


def phase_achievable(cfg, spec, wl, phase: str, batch, context, engine: str = "torch"):
    """Achievable rows of one phase (``step.StepRow``), arrays over (batch, context)."""
    from .profiles import get_engine
    from .step import step_rows

    return step_rows(cfg, spec, wl, phase, batch, context, require_models(spec, engine), get_engine(engine))
