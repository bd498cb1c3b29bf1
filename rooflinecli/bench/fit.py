"""Calibrated efficiency: per op kind and regime, the fraction of the roof that measured kernels
reach, fitted from a bench run and stored in the measured spec's ``[efficiency]`` table.

Model: predicted time = max(compute_time / eff_compute, memory_time / eff_memory), with
compute/memory times from the spec's ceilings (``rooflinecli.bench.predict``) and the efficiencies
of the call's op kind. A point is memory- or compute-bound by its arithmetic intensity against the
ridge point; each regime's efficiency is the median over its points of roof time / measured time
(the value that minimises the median |error| of the fitted prediction).

The "after" error is honest: leave-one-shape-out, each (op, shape, dtype) is predicted from an
efficiency fitted on every other shape; the in-sample figure is reported beside it, labelled.
"""

from __future__ import annotations

import math

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rooflinecli.bench.predict import Roof, compute_dtype_for, roof
from rooflinecli.hardware import HardwareSpec
from rooflinecli.results import ResultRow

#: the hardware-spec validator's range for a stored efficiency is (0, 1.5]
EFF_MIN, EFF_MAX = 0.01, 1.5


@dataclass(frozen=True)
class Point:
    """One timed kernel call: its roof on a spec and its measured median."""

    op: str
    impl: str
    shape: str
    dtype: str
    kind: str
    roof: Roof
    measured_s: float

    @property
    def group(self) -> tuple[str, str]:
        return (self.kind, self.roof.bound)

    @property
    def shape_key(self) -> tuple[str, str, str]:
        return (self.op, self.shape, self.dtype)


def row_kind(row: ResultRow) -> str:
    return row.model_kind or _KIND_BY_OP.get(row.op, "gemm")


_KIND_BY_OP = {
    "copy": "copy",
    "rmsnorm": "elementwise",
    "gemm": "gemm",
    "flash_attention": "attention",
    "naive_attention": "attention",
    "decode_attention": "attention",
    "mla_decode": "attention",
    "moe": "moe",
}


def points_from_rows(rows: Iterable[ResultRow], spec: HardwareSpec, impls: Sequence[str] = ("triton",)) -> list[Point]:
    """Timed, correct rows of ``impls`` with their roof on ``spec`` (rows whose dtype has no peak
    in the spec are left out)."""
    out = []
    for r in rows:
        if not r.correct or not r.samples_s or (impls and r.impl not in impls):
            continue
        kind = row_kind(r)
        rf = roof(r.flops, r.bytes, spec, r.compute_dtype or compute_dtype_for(kind, r.dtype))
        if rf is None or not rf.time_s > 0:
            continue
        out.append(Point(r.op, r.impl, r.shape, r.dtype, kind, rf, float(r.p50_s)))
    return out


def fit_efficiency(points: Iterable[Point]) -> dict[str, dict[str, float]]:
    """{kind: {"memory": eff, "compute": eff}} from the median roof/measured ratio of each group."""
    ratios: dict[tuple[str, str], list[float]] = {}
    for p in points:
        t = p.roof.compute_time_s if p.roof.bound == "compute" else p.roof.memory_time_s
        ratios.setdefault(p.group, []).append(t / p.measured_s)
    eff: dict[str, dict[str, float]] = {}
    for (kind, regime), rs in sorted(ratios.items()):
        eff.setdefault(kind, {})[regime] = float(np.clip(np.median(rs), EFF_MIN, EFF_MAX))
    return eff


def predict(p: Point, eff: Mapping[str, Mapping[str, float]] | None) -> float:
    return p.roof.with_efficiency((eff or {}).get(p.kind))


def rel_error(predicted_s: float, measured_s: float) -> float:
    """(predicted - measured) / measured: negative when the model is optimistic."""
    return (predicted_s - measured_s) / measured_s


def loo_efficiencies(points: Sequence[Point]) -> dict[tuple[str, str, str], dict[str, dict[str, float]]]:
    """For every (op, shape, dtype) among ``points``: ``fit_efficiency`` of all the other points,
    in O(n log n): each group's ratios are sorted once, and a key's median skips that key's ranks."""
    points = list(points)
    ratios: dict[tuple[str, str], list[tuple[float, tuple[str, str, str]]]] = {}
    for p in points:
        t = p.roof.compute_time_s if p.roof.bound == "compute" else p.roof.memory_time_s
        ratios.setdefault(p.group, []).append((t / p.measured_s, p.shape_key))
    sorted_groups = {}
    ranks: dict[tuple[str, str, str], dict[tuple[str, str], list[int]]] = {}
    for g, items in ratios.items():
        items.sort(key=lambda x: x[0])
        sorted_groups[g] = [x[0] for x in items]
        for rank, (_, key) in enumerate(items):
            ranks.setdefault(key, {}).setdefault(g, []).append(rank)
    full = fit_efficiency(points)

    def median_without(s: list[float], removed: list[int]) -> float | None:
        n = len(s) - len(removed)
        if n <= 0:
            return None

        def at(j: int) -> float:  # the j-th remaining value (removed ranks are sorted)
            i = j
            for r in removed:
                if r <= i:
                    i += 1
                else:
                    break
            return s[i]

        return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2.0

    out = {}
    for key, by_group in ranks.items():
        eff = {kind: dict(v) for kind, v in full.items()}
        for (kind, regime), removed in by_group.items():
            m = median_without(sorted_groups[(kind, regime)], removed)
            if m is None:
                del eff[kind][regime]
                if not eff[kind]:
                    del eff[kind]
            else:
                eff[kind][regime] = min(max(float(m), EFF_MIN), EFF_MAX)  # np.clip's result, without a numpy call per key
        out[key] = eff
    return out


def loo_predictions(points: Sequence[Point]) -> list[float]:
    """Each point predicted with an efficiency fitted on every other shape (leave one
    (op, shape, dtype) out). A group left empty falls back to efficiency 1 (the plain roof)."""
    return predictions_with(points, loo_efficiencies(points))


def predictions_with(points: Sequence[Point], by_key: Mapping[tuple[str, str, str], dict[str, dict[str, float]]]) -> list[float]:
    """Each point predicted with its key's efficiencies (``loo_efficiencies``' result)."""
    return [predict(p, by_key[p.shape_key]) for p in points]


@dataclass(frozen=True)
class ErrorStats:
    n: int
    median_abs_error: float | None
    p90_abs_error: float | None
    median_error: float | None  # signed: < 0 when predictions are optimistic

    def to_json(self) -> dict:
        return {
            "n": self.n,
            "median_abs_error": self.median_abs_error,
            "p90_abs_error": self.p90_abs_error,
            "median_error": self.median_error,
        }


def error_stats(errors: Iterable[float]) -> ErrorStats:
    e = np.asarray([x for x in errors if x is not None and math.isfinite(x)], dtype=float)  # math: a numpy call per value cost 1 s at 100,000 rows
    if e.size == 0:
        return ErrorStats(0, None, None, None)
    a = np.abs(e)
    return ErrorStats(int(e.size), float(np.median(a)), float(np.percentile(a, 90)), float(np.median(e)))


@dataclass(frozen=True)
class FitReport:
    efficiency: dict[str, dict[str, float]]
    spec_id: str
    group_counts: dict[str, dict[str, int]]
    before: ErrorStats  # plain roof (efficiency 1)
    after_loo: ErrorStats  # leave-one-shape-out fitted efficiency: the honest "after"
    after_in_sample: ErrorStats  # fitted on every point, evaluated on the same points

    def to_json(self) -> dict:
        return {
            "spec": self.spec_id,
            "efficiency": self.efficiency,
            "points": self.group_counts,
            "error_before": self.before.to_json(),
            "error_after_leave_one_out": self.after_loo.to_json(),
            "error_after_in_sample": self.after_in_sample.to_json(),
        }


def fit_report(points: Sequence[Point], spec_id: str) -> FitReport:
    eff = fit_efficiency(points)
    counts: dict[str, dict[str, int]] = {}
    for p in points:
        kind, regime = p.group
        counts.setdefault(kind, {}).setdefault(regime, 0)
        counts[kind][regime] += 1
    loo = loo_predictions(points)
    return FitReport(
        efficiency=eff,
        spec_id=spec_id,
        group_counts=counts,
        before=error_stats(rel_error(p.roof.time_s, p.measured_s) for p in points),
        after_loo=error_stats(rel_error(t, p.measured_s) for t, p in zip(loo, points)),
        after_in_sample=error_stats(rel_error(predict(p, eff), p.measured_s) for p in points),
    )
