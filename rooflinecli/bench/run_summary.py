"""What a bench run prints once it has run: the terminal table's rows of every result row, and the
timing-quality lines (spread, drift within each measurement, agreement with ``do_bench_cudagraph``)
against their targets. The checking and timing itself is ``bench.runner``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rooflinecli.results import ResultRow


def summary_rows(rows: Sequence[ResultRow]) -> list[list[str]]:
    """Table cells for the terminal summary: op, impl, shape, dtype, p50, TFLOP/s, GB/s, % roof,
    method (with the tuning of ours or the backend of the baseline)."""
    out = []
    for r in rows:
        if not r.correct:
            out.append([r.op, r.impl, r.shape, r.dtype, "FAILED", "", "", "", r.note[:60]])
            continue
        out.append(
            [
                r.op,
                r.impl,
                r.shape,
                r.dtype,
                f"{r.p50_s * 1e6:.4g}",
                f"{r.achieved_tflops:.4g}" if r.achieved_tflops else "-",
                f"{r.achieved_gb_per_s:.4g}" if r.achieved_gb_per_s else "-",
                f"{r.pct_of_roof:.3g}" if r.pct_of_roof is not None else "-",
                r.method + (f" ({r.tuning or r.backend})" if (r.tuning or r.backend) else ""),
            ]
        )
    return out


#: timing-agreement targets, for cases of at least CHECKED_MIN_US
CHECKED_MIN_US = 20.0
CROSSCHECK_TOLERANCE = 0.05
SPREAD_MAX = 1.10
#: a measurement whose last third of samples (in the order taken) differs from its first third by
#: more than this is reported as drifting (the GPU changed clocks while it was timed)
DRIFT_MAX = 0.03


def drift(samples: Sequence[float]) -> float | None:
    """median(last third) / median(first third) - 1 of samples in the order taken; None under 6."""
    n = len(samples) // 3
    if n < 2:
        return None
    first, last = sorted(samples[:n]), sorted(samples[-n:])
    return last[n // 2] / first[n // 2] - 1.0


def quality_lines(rows: Sequence[ResultRow], crosschecks: Sequence[dict[str, Any]] | None = None) -> list[str]:
    """One line on the p80/p20 spread of the timed rows of >= 20 us (target <= 1.10), one on drift
    within each measurement (``drift``), and with crosschecks one on the agreement with
    do_bench_cudagraph (target within 5%), naming the worst offenders."""
    timed = [r for r in rows if r.correct and r.samples_s and r.p50_s * 1e6 >= CHECKED_MIN_US]
    wide = sorted(((r.p80_s / r.p20_s, r) for r in timed if r.p80_s / r.p20_s > SPREAD_MAX), key=lambda x: -x[0])
    lines = [
        f"spread: {len(timed) - len(wide)} of {len(timed)} timed rows >= {CHECKED_MIN_US:g} us have p80/p20 <= {SPREAD_MAX}"
        + (f"; widest: {', '.join(f'{r.name} {s:.2f}' for s, r in wide[:3])}" if wide else "")
    ]
    drifting = sorted(((d, r) for r in timed if (d := drift(r.samples_s)) is not None and abs(d) > DRIFT_MAX), key=lambda x: -abs(x[0]))
    lines.append(
        f"drift: {len(drifting)} of {len(timed)} timed rows >= {CHECKED_MIN_US:g} us moved more than {DRIFT_MAX:.0%} between the first "
        "and last third of their own samples (clock steps while timed)"
        + (f"; largest: {', '.join(f'{r.name} {d:+.1%}' for d, r in drifting[:3])}" if drifting else "")
    )
    if crosschecks is not None:
        cc = [c for c in crosschecks if c["ours_us"] >= CHECKED_MIN_US]
        ran = [c for c in cc if c["ratio"] is not None]
        off = sorted((c for c in ran if abs(c["ratio"] - 1) > CROSSCHECK_TOLERANCE), key=lambda c: -abs(c["ratio"] - 1))
        lines.append(
            f"crosscheck: {len(ran) - len(off)} of {len(ran)} rows >= {CHECKED_MIN_US:g} us within {CROSSCHECK_TOLERANCE:.0%} of do_bench_cudagraph"
            + (" (ours: our samples just before and after it)" if any("ours_around_us" in c for c in ran) else "")
            + (f" ({len(cc) - len(ran)} could not run it)" if len(cc) > len(ran) else "")
            + ("; worst: " + ", ".join(f"{c['op']}[{c['impl']}] {c['shape']} {c['dtype']} {c['ratio']:.3f}" for c in off[:3]) if off else "")
        )
    return lines
