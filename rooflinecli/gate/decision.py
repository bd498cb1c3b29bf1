"""Performance regression gate: compare a candidate benchmark run with a baseline.

Decision rule (docs/reference.md, section 6), per kernel and shape (rows keyed by op, impl, shape, dtype):

- relative change = (candidate median - baseline median) / baseline median (medians derived from
  the rows' samples, never their stored ``p50_s``; a pooled baseline's is the median of its runs'
  medians),
- noise = max(IQR/median of the baseline samples, IQR/median of the candidate samples),
- p = one-sided Mann-Whitney U p-value on the raw samples (candidate slower), Holm-corrected across
  all compared rows (a second family, "candidate faster", for improvements).

``regression`` when change > max(threshold, 2 x noise) AND absolute slowdown >= min_abs AND corrected
p < alpha; ``improvement`` when the same holds in the faster direction; ``inconclusive`` when a
slowdown is practically OR statistically significant but not both; otherwise ``pass``. That is the
row's *timing* verdict. The verdict the gate acts on (docs/regress.md, "Verdicts"):

- ``failed``: the candidate row failed its correctness check (not timed);
- ``unstable``: the timing cannot be trusted (``instability``): a side's samples are bimodal, the
  spread changed several-fold between the runs, or a plain-event row was timed by the host; the
  timing verdict is kept in ``timing_verdict`` and the reason; not a failure unless ``strict``;
- ``regression`` (shown "regression (config changed)" when the tuned config changed too);
- ``config-changed``: the autotuned config differs (both rows record one) and the timing verdict is
  not a regression (shown "config-changed (pass)" etc.); never a failure;
- otherwise the timing verdict.

Rows of the baseline missing from the candidate fail the gate unless ``allow_missing``.

``decide`` is vectorized and is the single decision function, shared by ``compare`` and by the
simulation that measures the gate's catch and false-alarm rates (``rooflinecli.gate.sim``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from rooflinecli import stats
from rooflinecli.bulk import bulk, frozen_from_fields
from rooflinecli.errors import RooflineError
from rooflinecli.results import BASELINE_FORMAT, ResultRow, Results, baseline_info, median_s, stored_run_samples

REPORT_SCHEMA = "rooflinecli.regress/1"
# failed: candidate row failed its correctness check; worst first (the order of the outputs)
VERDICTS = ("failed", "regression", "unstable", "config-changed", "inconclusive", "improvement", "pass")
#: a row timed with plain CUDA events ("cuda_events") is host-timed when its launcher's host time per
#: call is at least this fraction of its median (the GPU waits for the host), or, in files without
#: host_us_per_call, when its IQR/median is at least HOST_SPREAD. From the real H200 run of 2026-11-30
#: (docs/regress.md): rows whose launcher's host time exceeds the graph time have event-timed spreads
#: of 8.8-24.8%, GEMM M256 (host 73% of its median) 14-28%; GPU-bound rows 4.6% or less (one
#: bimodal MoE run: 8.1%)
HOST_BOUND_FRACTION = 0.5
HOST_SPREAD = 0.08
MIN_SAMPLES = 10  # docs/reference.md section 6: >= 10 samples each
ENV_KEYS_TO_DIFF = ("driver", "cuda", "torch", "triton", "python", "sm_clock_mhz", "mem_clock_mhz")
#: the spread-change test needs this many samples a side: the IQR of 10 samples is too uncertain
#: (two runs of one lognormal kernel differ 3-fold in 6% of simulated 10-sample pairs, 0.5% at 20)
SPREAD_CHANGE_MIN_SAMPLES = 20


@dataclass(frozen=True)
class GateParams:
    threshold: float = 0.05  # minimum relative slowdown that matters
    alpha: float = 0.01  # significance level after Holm correction
    min_abs_s: float = 1e-6  # minimum absolute slowdown that matters, seconds
    impls: tuple[str, ...] | None = ("triton",)  # None: compare every impl
    strict: bool = False  # unstable rows fail the gate
    allow_missing: bool = False  # baseline rows missing from the candidate do not fail the gate

    def __post_init__(self) -> None:
        if not (0.0 <= self.threshold < 10.0):
            raise RooflineError(f"--threshold must be a fraction in [0, 10), got {self.threshold}")
        if not (0.0 < self.alpha < 1.0):
            raise RooflineError(f"--alpha must be in (0, 1), got {self.alpha}")
        if not (self.min_abs_s >= 0.0):
            raise RooflineError(f"--min-abs-us must be >= 0, got {self.min_abs_s * 1e6}")


def parse_threshold(text: str) -> float:
    """'5%' -> 0.05, '0.05' -> 0.05; a bare number >= 1 is ambiguous and refused."""
    t = text.strip()
    try:
        if t.endswith("%"):
            value = float(t[:-1]) / 100.0
        else:
            value = float(t)
            if math.isfinite(value) and value >= 1.0:
                raise RooflineError(f"--threshold {text}: write a percentage ('{t}%') or a fraction ('{value / 100:g}')")
    except ValueError:
        raise RooflineError(f"--threshold {text!r}: expected a percentage like '5%' or a fraction like '0.05'") from None
    if not math.isfinite(value) or value < 0:
        raise RooflineError(f"--threshold {text!r}: must be a finite, non-negative percentage")
    return value


def parse_impls(text: str) -> tuple[str, ...] | None:
    """'triton' -> ('triton',); 'triton,torch' -> both; 'all' -> None (every impl)."""
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    if not parts:
        raise RooflineError("--impl: give an impl name ('triton', 'torch'), a comma list, or 'all'")
    if "all" in parts:
        return None
    return parts


def decide(rel_change, abs_change_s, noise, p_slower_adj, p_faster_adj, params: GateParams) -> np.ndarray:
    """Verdict strings (same shape as the broadcast inputs) from the gate's numbers."""
    rel = np.asarray(rel_change, dtype=float)
    absd = np.asarray(abs_change_s, dtype=float)
    limit = np.maximum(params.threshold, 2.0 * np.asarray(noise, dtype=float))
    slower_practical = (rel > limit) & (absd >= params.min_abs_s)
    slower_stat = np.asarray(p_slower_adj) < params.alpha
    faster_practical = (rel < -limit) & (-absd >= params.min_abs_s)
    faster_stat = np.asarray(p_faster_adj) < params.alpha
    shape = np.broadcast_shapes(rel.shape, absd.shape, limit.shape, slower_stat.shape, faster_stat.shape)
    out = np.full(shape, "pass", dtype=object)
    out[np.broadcast_to(slower_practical ^ slower_stat, shape)] = "inconclusive"
    out[np.broadcast_to(faster_practical & faster_stat, shape)] = "improvement"
    out[np.broadcast_to(slower_practical & slower_stat, shape)] = "regression"
    return out


@dataclass(frozen=True)
class Comparison:
    op: str
    impl: str
    shape: str
    dtype: str
    baseline_median_s: float
    candidate_median_s: float
    rel_change: float  # (candidate - baseline) / baseline; > 0 is slower
    abs_change_s: float
    noise: float  # max of the two IQR/median
    baseline_noise: float
    candidate_noise: float
    limit: float  # max(threshold, 2 x noise)
    n_baseline: int
    n_candidate: int
    p_slower: float
    p_slower_adj: float  # Holm-corrected
    p_faster: float
    p_faster_adj: float
    verdict: str
    reason: str
    note: str = ""
    timing_verdict: str = ""  # what the timing rule alone says (regression/improvement/inconclusive/pass)
    unstable_reason: str = ""  # why the timing cannot be trusted; "" when stable
    config_changed: bool = False
    config_diff: str = ""  # which autotuner configs differ, baseline -> candidate

    @property
    def label(self) -> str:
        """The verdict as shown: 'regression (config changed)', 'config-changed (pass)', ..."""
        if self.verdict == "config-changed":
            return f"config-changed ({self.timing_verdict})"
        if self.config_changed and self.verdict in ("regression", "unstable"):
            return f"{self.verdict} (config changed)"
        return self.verdict

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.op, self.impl, self.shape, self.dtype)

    @property
    def p_shown(self) -> float:
        """The corrected p-value the verdict rests on: "candidate slower" for a slower median and for
        every inconclusive row (inconclusive is about slowdowns), "candidate faster" otherwise."""
        inconclusive = "inconclusive" in (self.verdict, self.timing_verdict)
        return self.p_slower_adj if self.rel_change >= 0 or inconclusive else self.p_faster_adj


@dataclass(frozen=True)
class RegressReport:
    params: GateParams
    baseline: dict[str, Any]  # path, gpu_name, created_utc, tool_version
    candidate: dict[str, Any]
    comparisons: tuple[Comparison, ...]
    only_in_baseline: tuple[tuple[str, str, str, str], ...]
    only_in_candidate: tuple[tuple[str, str, str, str], ...]
    hardware_mismatch: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    not_compared: tuple[tuple[tuple[str, str, str, str], str], ...] = ()  # (key, why), e.g. baseline row untimed

    def count(self, verdict: str) -> int:
        return sum(1 for c in self.comparisons if c.verdict == verdict)

    @property
    def counts(self) -> dict[str, int]:
        return {v: self.count(v) for v in VERDICTS}

    @property
    def missing_fail(self) -> bool:
        """Baseline rows missing from the candidate fail the gate (a crashed or skipped kernel hides its slowdown)."""
        return bool(self.only_in_baseline) and not self.params.allow_missing

    @property
    def verdict(self) -> str:
        if self.count("regression") or self.count("failed"):
            return "regression"
        if self.missing_fail:
            return "missing"
        if self.params.strict and self.count("unstable"):
            return "unstable"
        return "pass"

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict == "pass" else 1

    def summary_line(self) -> str:
        c = self.counts
        parts = ([f"{c['failed']} failed correctness"] if c["failed"] else []) + [f"{c['regression']} regression(s)", f"{c['unstable']} unstable", f"{c['inconclusive']} inconclusive", f"{c['improvement']} improvement(s)", f"{c['pass']} pass"]
        if c["config-changed"]:
            parts.insert(-1, f"{c['config-changed']} config-changed")
        tail = ""
        if self.only_in_baseline or self.only_in_candidate:
            missing = " (missing: fail)" if self.missing_fail else (" (missing: allowed)" if self.only_in_baseline else "")
            tail = f"; {len(self.only_in_baseline)} only in baseline{missing}, {len(self.only_in_candidate)} only in candidate"
        if self.not_compared:
            tail += f"; {len(self.not_compared)} not compared"
        return f"{self.verdict.upper()}: " + ", ".join(parts) + f" ({len(self.comparisons)} compared{tail})"

    def rule_text(self) -> str:
        p = self.params
        return (
            f"regression = slowdown > max({p.threshold:.1%}, 2 x noise) AND Holm-corrected one-sided "
            f"Mann-Whitney p < {p.alpha:g} AND slowdown >= {p.min_abs_s * 1e6:g} us; noise = IQR/median; "
            f"unstable = bimodal samples, spread changed >= {stats.SPREAD_CHANGE_RATIO:g}x, or host-timed "
            f"({'fails: --strict' if p.strict else 'not a failure'}); missing rows "
            f"{'allowed (--allow-missing)' if p.allow_missing else 'fail'}"
        )


# -- comparing -------------------------------------------------------------------------------------


def gpu_slug(gpu_name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200' (file names of per-GPU baselines)."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_name.strip().lower()).strip("-")
    return slug or "unknown-gpu"


def _gpu_of(res: Results) -> str | None:
    name = res.environment.get("gpu_name")
    if not isinstance(name, str) or not name.strip() or name.strip().lower() == "unknown":
        return None
    return name.strip()


def check_same_hardware(baseline: Results, candidate: Results, allow_mismatch: bool = False) -> str | None:
    """Raise unless both runs are on the same GPU model; with ``allow_mismatch`` return a note instead."""
    b, c = _gpu_of(baseline), _gpu_of(candidate)
    if b is None or c is None:
        which = baseline.path if b is None else candidate.path
        msg = f"{which}: no environment.gpu_name, so the GPU model cannot be checked"
    elif " ".join(b.lower().split()) != " ".join(c.lower().split()):
        msg = f"GPU models differ: baseline {baseline.path} ran on '{b}', candidate {candidate.path} on '{c}'"
    else:
        return None
    if allow_mismatch:
        return msg + " (compared anyway: --allow-hardware-mismatch)"
    raise RooflineError(msg + "; refusing to compare (pass --allow-hardware-mismatch to override)")


def index_rows(res: Results, impls: tuple[str, ...] | None) -> dict[tuple[str, str, str, str], ResultRow]:
    out: dict[tuple[str, str, str, str], ResultRow] = {}
    for r in res.rows:
        if impls is not None and r.impl not in impls:
            continue
        if r.key in out:
            raise RooflineError(f"{res.path}: duplicate row for op '{r.op}', impl '{r.impl}', shape '{r.shape}', dtype '{r.dtype}'")
        out[r.key] = r
    return out


def _env_diffs(baseline: Results, candidate: Results) -> list[str]:
    notes = []
    for k in ENV_KEYS_TO_DIFF:
        a, b = baseline.environment.get(k), candidate.environment.get(k)
        if a is not None and b is not None and a != b:
            notes.append(f"environment differs: {k} {a} (baseline) -> {b} (candidate)")
    return notes


def _reason(c_rel, limit, noise, p_adj_slow, p_adj_fast, abs_s, verdict, params: GateParams) -> str:
    sign = "slower" if c_rel > 0 else "faster"
    # inconclusive is about slowdowns: a candidate can be significantly slower in rank (U test)
    # while its median is not, so its reason quotes the "slower" p-value whatever the median did
    p = p_adj_slow if c_rel > 0 or verdict == "inconclusive" else p_adj_fast
    practical = c_rel > limit and abs_s >= params.min_abs_s  # a practical slowdown
    size = "same median" if c_rel == 0 and abs_s == 0 else f"{abs(c_rel):.1%} {sign} ({abs(abs_s) * 1e6:.2f} us)"
    lim = f"limit {limit:.1%}" + (" = 2 x noise" if 2 * noise > params.threshold else " = threshold")
    if abs(c_rel) > limit and abs(abs_s) < params.min_abs_s:
        lim += f", but under {params.min_abs_s * 1e6:g} us"
    stat = f"p={p:.2g}" + (" < " if p < params.alpha else " >= ") + f"{params.alpha:g}"
    if verdict == "inconclusive":
        why = "practical only, not significant" if practical else "significant only, below the practical limit"
        return f"{size}, {lim}, {stat}: {why}"
    return f"{size}, {lim}, {stat}"


def _host_timed(r: ResultRow, spread: float) -> str:
    """Why a row's samples are host time rather than GPU time ('' when they are not): plain CUDA
    events (the GPU waits for a slow launcher, and the events time the wait)."""
    if r.method != "cuda_events":
        return ""
    med_us = r.p50_s * 1e6
    if r.host_us_per_call is not None:
        if r.host_us_per_call >= HOST_BOUND_FRACTION * med_us:
            return f"host {r.host_us_per_call:.0f} us per call >= {HOST_BOUND_FRACTION:.0%} of the {med_us:.0f} us median (plain CUDA events)"
        return ""
    if spread >= HOST_SPREAD:
        return f"plain CUDA events with IQR/median {spread:.1%} >= {HOST_SPREAD:.0%} (the spread of host-timed rows)"
    return ""


def _host_timed_mask(rows: list[ResultRow], spread: np.ndarray) -> np.ndarray:
    """``_host_timed(r, spread) != ''`` for every row at once."""
    events = np.array([r.method == "cuda_events" for r in rows], dtype=bool)
    host_us = np.array([np.nan if r.host_us_per_call is None else r.host_us_per_call for r in rows], dtype=float)
    med_us = np.array([r.p50_s for r in rows], dtype=float) * 1e6
    with np.errstate(invalid="ignore"):
        timed_by_host = np.where(np.isnan(host_us), spread >= HOST_SPREAD, host_us >= HOST_BOUND_FRACTION * med_us)
    return events & timed_by_host


def pooled_bimodal_quorum(n_runs: int) -> int:
    """A pooled baseline is bimodal when at least half its runs are (one odd run in five is not)."""
    return max(1, math.ceil(n_runs / 2))


def instability(b: ResultRow, c: ResultRow, b_spread: float, c_spread: float, b_samples=None, c_samples=None,
                b_runs: list[np.ndarray] | None = None, bimodal: dict[str, Any] | None = None) -> str:
    """Why this row's timing cannot be trusted ('' when it can): either side bimodal, the spread
    changed several-fold between the runs, or either side host-timed. See docs/regress.md.

    ``b_runs``: a pooled baseline's per-run samples. Its runs are then judged one by one (bimodal:
    at least half of its runs; spread: the median of the runs' IQR/median), because concatenating
    runs that drifted apart by a few percent makes two modes and a wide spread that no single run has.

    ``bimodal``: the gap tests and spreads ``compare`` computed for all rows at once ("baseline",
    "candidate": ``stats.bimodal_split`` results; "runs": per-run found flags; "run_spreads")."""
    why = []
    pre = bimodal or {}
    b_samples = b.samples_s if b_samples is None else b_samples
    c_samples = c.samples_s if c_samples is None else c_samples
    pooled = b_runs is not None and len(b_runs) > 1
    if pooled:
        flags = pre["runs"] if "runs" in pre else [bool(stats.bimodal_split(run)[0]) for run in b_runs]
        bimodal_runs = [j + 1 for j, found in enumerate(flags) if found]
        if len(bimodal_runs) >= pooled_bimodal_quorum(len(b_runs)):
            why.append(f"baseline bimodal in {len(bimodal_runs)} of its {len(b_runs)} pooled runs (runs {', '.join(map(str, bimodal_runs))})")
        spreads = pre["run_spreads"] if "run_spreads" in pre else [float(stats.relative_iqr(run)) for run in b_runs]
        # np.median's value (a middle one, or the mean of two) without its per-call cost: this runs
        # for every unstable row of a big file
        b_spread = float(np.median(spreads)) if any(x != x for x in spreads) else median_s(spreads)
        b_n = min(len(run) for run in b_runs)
    else:
        b_n = len(b_samples)
    sides = (("candidate", c_samples),) if pooled else (("baseline", b_samples), ("candidate", c_samples))
    for side, samples in sides:
        found, gap_rel, lower = pre[side] if side in pre else stats.bimodal_split(samples)
        if bool(found):
            why.append(f"{side} bimodal ({int(lower)} + {len(samples) - int(lower)} samples, {float(gap_rel):.1%} gap)")
    if min(b_n, len(c_samples)) >= SPREAD_CHANGE_MIN_SAMPLES and bool(stats.spread_changed(b_spread, c_spread)):
        ratio = max(b_spread, c_spread) / min(b_spread, c_spread) if min(b_spread, c_spread) > 0 else math.inf
        what = "median run IQR/median" if pooled else "IQR/median"
        why.append(f"spread changed {ratio:.1f}x ({what} {b_spread:.1%} -> {c_spread:.1%})")
    for side, r, spread in (("baseline", b, b_spread), ("candidate", c, c_spread)):
        host = _host_timed(r, spread)
        if host:
            why.append(f"{side} host-timed: {host}")
    return "; ".join(why)


def config_diff(b: ResultRow, c: ResultRow) -> str:
    """'' when the autotuned configs agree or either row has none (files written before the field);
    else which autotuners changed, baseline -> candidate."""
    if not b.config or not c.config or b.config == c.config:
        return ""
    import json

    def brief(v: Any) -> str:
        text = json.dumps(v, sort_keys=True, separators=(",", ":"), default=str)
        return text if len(text) <= 120 else text[:117] + "..."

    names = sorted(set(b.config) | set(c.config), key=str)
    return "; ".join(f"{n}: {brief(b.config.get(n))} -> {brief(c.config.get(n))}" for n in names if b.config.get(n) != c.config.get(n))


def _side_stats(bs: list, cs: list) -> dict[str, np.ndarray]:
    """Every per-row statistic of the two sides' samples, computed for all rows of one (baseline,
    candidate) sample count at once: one (rows, samples) array a side, built straight from the rows'
    sample tuples (the stats functions work along the last axis). One array per statistic, one
    entry per row."""
    names = ("b_med", "b_iqr", "c_med", "c_iqr", "p_slow", "p_fast", "b_found", "b_gap", "b_lower", "c_found", "c_gap", "c_lower")

    def all_stats(b: np.ndarray, c: np.ndarray) -> tuple:
        return (stats.median(b), stats.relative_iqr(b), stats.median(c), stats.relative_iqr(c),
                *stats.mannwhitney_both(c, b), *stats.bimodal_split(b), *stats.bimodal_split(c))

    groups: dict[tuple[int, int], list[int]] = {}
    for i, (b, c) in enumerate(zip(bs, cs)):
        groups.setdefault((len(b), len(c)), []).append(i)
    if not groups:  # no rows: empty arrays of the right dtypes
        return {k: np.asarray(v)[:0] for k, v in zip(names, all_stats(np.ones((1, 2)), np.ones((1, 2))))}
    out: dict[str, np.ndarray] = {}
    for idx in groups.values():
        res = all_stats(np.array([bs[i] for i in idx], dtype=float), np.array([cs[i] for i in idx], dtype=float))
        for name, v in zip(names, res):
            if name not in out:
                out[name] = np.empty(len(bs), dtype=np.asarray(v).dtype)
            out[name][idx] = v
    return out


class _PooledRuns:
    """The stored runs of a pooled baseline's compared rows, judged one by one: per row (arrays over
    the compared rows) whether it has more than one run, the median of its runs' medians, the
    median of their IQR/median and how many runs are bimodal; per-run flags and
    spreads of one row on request (``detail``). Rows of one run-length pattern are computed at once."""

    def __init__(self, baseline: Results, keys: list, samples: list) -> None:
        n = len(keys)
        self.has = np.zeros(n, dtype=bool)
        self.median_s = np.full(n, np.nan)
        self.spread = np.full(n, np.nan)
        self.n_bimodal = np.zeros(n, dtype=np.int64)
        self._where: dict[int, tuple[int, int]] = {}
        self._groups: list[tuple[np.ndarray, np.ndarray]] = []
        lengths, pooled = self._run_lengths(baseline, keys, samples)
        self._lengths, self._samples = lengths, pooled
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, ls in lengths.items():
            if len(ls) > 1:
                groups.setdefault(tuple(ls), []).append(i)
        for ls, idx in groups.items():
            a = np.array([pooled[i] for i in idx], dtype=float)
            offs = np.cumsum((0,) + ls)
            found = np.stack([stats.bimodal_split(a[:, o:o + m])[0] for o, m in zip(offs, ls)], axis=1)
            meds = np.stack([stats.median(a[:, o:o + m]) for o, m in zip(offs, ls)], axis=1)
            iqrs = np.stack([stats.relative_iqr(a[:, o:o + m]) for o, m in zip(offs, ls)], axis=1)
            self.has[idx] = True
            self.median_s[idx] = np.median(meds, axis=1)
            self.spread[idx] = np.median(iqrs, axis=1)
            self.n_bimodal[idx] = found.sum(axis=1)
            g = len(self._groups)
            self._groups.append((found, iqrs))
            self._where.update((i, (g, r)) for r, i in enumerate(idx))

    @staticmethod
    def _run_lengths(baseline: Results, keys: list, samples: list) -> tuple[dict[int, list[int]], list]:
        """Per compared row (its position in ``keys``), the sample counts of its stored runs, and
        the samples those runs concatenate to (a /2 baseline: the pooled row's own samples). The
        reader has checked that a /2 baseline's stored runs add up."""
        info = baseline_info(baseline.extra)
        if info is None:
            return {}, samples
        pos = {k: i for i, k in enumerate(keys)}
        if info.get("format") != BASELINE_FORMAT:  # /1: each run stored its own samples
            runs = stored_run_samples(info, [r.key for r in baseline.rows], [r.samples_s for r in baseline.rows], baseline.path)
            out, cat = {}, list(samples)
            for k, i in pos.items():
                kept = [s for s in runs.get(k, ()) if len(s) and min(s) > 0]  # positive numbers only
                out[i] = [len(s) for s in kept]
                cat[i] = tuple(chain.from_iterable(kept))
            return out, cat
        row_at = [pos.get(r.key) for r in baseline.rows]  # file row -> compared position (None: not compared)
        out: dict[int, list[int]] = {}
        for run in info["runs"]:
            for rr in run["rows"]:
                i = row_at[rr[0]]
                if i is not None:
                    out.setdefault(i, []).append(rr[1])
        return out, samples

    def detail(self, i: int) -> tuple[list, dict[str, Any]]:
        """Row ``i``'s runs' samples and its per-run bimodal flags and spreads, for ``instability``."""
        g, r = self._where[i]
        found, iqrs = self._groups[g]
        offs = np.cumsum([0] + self._lengths[i]).tolist()
        runs = [self._samples[i][o:o + m] for o, m in zip(offs, self._lengths[i])]
        return runs, {"runs": [bool(x) for x in found[r]], "run_spreads": [float(x) for x in iqrs[r]]}


@bulk
def compare(baseline: Results, candidate: Results, params: GateParams = GateParams(), allow_hardware_mismatch: bool = False) -> RegressReport:
    """Compare two results files row by row (see the module doc for the rule)."""
    notes: list[str] = []
    hw_note = check_same_hardware(baseline, candidate, allow_hardware_mismatch)
    if hw_note:
        notes.append(hw_note)
    notes.extend(_env_diffs(baseline, candidate))
    base_rows = index_rows(baseline, params.impls)
    cand_rows = index_rows(candidate, params.impls)
    what = "any impl" if params.impls is None else "impl " + ", ".join(params.impls)

    def untimed(r: ResultRow) -> bool:  # a row that failed its correctness check is stored without samples
        return len(r.samples_s) == 0

    b_untimed = {k for k, r in base_rows.items() if untimed(r)}
    c_untimed = {k for k, r in cand_rows.items() if untimed(r)}
    # an empty candidate must not pass the gate (a crashed suite would hide every slowdown)
    if not cand_rows:
        raise RooflineError(f"{candidate.path}: candidate has no rows for {what}; an empty candidate cannot pass the gate (see --impl)")
    if len(c_untimed) == len(cand_rows):
        raise RooflineError(f"{candidate.path}: none of the candidate's {len(cand_rows)} row(s) for {what} was timed (all failed their correctness check)")
    if len(b_untimed) == len(base_rows):  # a wrong or empty baseline would pass everything
        raise RooflineError(f"{baseline.path}: baseline has no timed rows for {what}; nothing to compare against (see --impl)")

    failed = [k for k in cand_rows if k in c_untimed]
    common = [k for k in base_rows if k in cand_rows]
    either = b_untimed | c_untimed
    keys = [k for k in common if k not in either] if either else common
    not_compared = tuple((k, "baseline row untimed (failed its correctness check)") for k in common if k in b_untimed and k not in c_untimed)
    only_b = tuple(k for k in base_rows if k not in cand_rows)
    only_c = tuple(k for k in cand_rows if k not in base_rows and k not in c_untimed)

    bs = [base_rows[k].samples_s for k in keys]
    cs = [cand_rows[k].samples_s for k in keys]
    # medians derived from the samples, never the stored p50_s (the reader also refuses a row whose
    # summary its samples contradict); a pooled baseline's is the median of its runs' medians, its
    # runs judged one by one. Every statistic is computed for all rows of one sample count at once
    st = _side_stats(bs, cs)
    runs = _PooledRuns(baseline, keys, bs)
    bn, cm, cn = st["b_iqr"], st["c_med"], st["c_iqr"]
    bm = np.where(runs.has, runs.median_s, st["b_med"])
    bad = ~((bm > 0) & (cm > 0) & np.isfinite(bm) & np.isfinite(cm))
    if bad.any():
        k = keys[int(np.argmax(bad))]
        raise RooflineError(f"row {k[0]} {k[2]} {k[3]} ({k[1]}): the samples' median must be a positive number in both files")
    p_slow, p_fast = st["p_slow"], st["p_fast"]
    p_slow_adj = stats.holm(p_slow)
    p_fast_adj = stats.holm(p_fast)
    rel = cm / bm - 1.0 if keys else np.zeros(0)
    absd = cm - bm
    noise = np.maximum(bn, cn)
    limit = np.maximum(params.threshold, 2 * noise)
    timing = decide(rel, absd, noise, p_slow_adj, p_fast_adj, params)
    # rows whose timing may not be trusted: a superset of what ``instability`` finds (it says why)
    b_spread = np.where(runs.has, runs.spread, bn)
    suspect = (st["c_found"] | np.where(runs.has, runs.n_bimodal > 0, st["b_found"])
               | stats.spread_changed(b_spread, cn)
               | _host_timed_mask([base_rows[k] for k in keys], b_spread) | _host_timed_mask([cand_rows[k] for k in keys], cn))
    bm_l, cm_l, rel_l, absd_l = bm.tolist(), cm.tolist(), rel.tolist(), absd.tolist()
    noise_l, bn_l, cn_l, limit_l = noise.tolist(), bn.tolist(), cn.tolist(), limit.tolist()
    ps_l, psa_l, pf_l, pfa_l = p_slow.tolist(), p_slow_adj.tolist(), p_fast.tolist(), p_fast_adj.tolist()
    timing_l, suspect_l = timing.tolist(), suspect.tolist()

    comps = []
    few = []
    for i, k in enumerate(keys):
        b, c = base_rows[k], cand_rows[k]
        row_notes = []
        if len(b.samples_s) < MIN_SAMPLES or len(c.samples_s) < MIN_SAMPLES:
            few.append(k)
            row_notes.append(f"few samples ({len(b.samples_s)} vs {len(c.samples_s)}; want >= {MIN_SAMPLES})")
        if not c.correct:
            row_notes.append("candidate failed its correctness check")
        tv = str(timing_l[i])
        timing_reason = _reason(rel_l[i], limit_l[i], noise_l[i], psa_l[i], pfa_l[i], absd_l[i], tv, params)
        unstable = ""
        if suspect_l[i]:
            pre = {"baseline": (st["b_found"][i], st["b_gap"][i], st["b_lower"][i]), "candidate": (st["c_found"][i], st["c_gap"][i], st["c_lower"][i])}
            b_runs = None
            if runs.has[i]:
                b_runs, per_run = runs.detail(i)
                pre.update(per_run)
            unstable = instability(b, c, bn_l[i], cn_l[i], bs[i], cs[i], b_runs, pre)
        cfg = config_diff(b, c)
        if unstable:
            verdict, reason = "unstable", f"{unstable}; timing alone: {tv} ({timing_reason})" + (f"; tuned config changed: {cfg}" if cfg else "")
        elif cfg and tv != "regression":
            verdict, reason = "config-changed", f"{timing_reason}; tuned config changed: {cfg}"
        else:
            verdict, reason = tv, timing_reason + (f"; tuned config changed: {cfg}" if cfg else "")
        comps.append(
            frozen_from_fields(Comparison, dict(
                op=k[0], impl=k[1], shape=k[2], dtype=k[3],
                baseline_median_s=bm_l[i], candidate_median_s=cm_l[i],
                rel_change=rel_l[i], abs_change_s=absd_l[i],
                noise=noise_l[i], baseline_noise=bn_l[i], candidate_noise=cn_l[i], limit=limit_l[i],
                n_baseline=len(b.samples_s), n_candidate=len(c.samples_s),
                p_slower=ps_l[i], p_slower_adj=psa_l[i],
                p_faster=pf_l[i], p_faster_adj=pfa_l[i],
                verdict=verdict, reason=reason, note="; ".join(row_notes),
                timing_verdict=tv, unstable_reason=unstable, config_changed=bool(cfg), config_diff=cfg,
            ))
        )
    nan = float("nan")
    for k in failed:
        b = base_rows.get(k)
        c = cand_rows[k]
        bmed = b.p50_s if b is not None and not untimed(b) else nan
        comps.append(Comparison(
            op=k[0], impl=k[1], shape=k[2], dtype=k[3], baseline_median_s=bmed, candidate_median_s=nan,
            rel_change=nan, abs_change_s=nan, noise=nan, baseline_noise=nan, candidate_noise=nan, limit=nan,
            n_baseline=len(b.samples_s) if b is not None else 0, n_candidate=0,
            p_slower=nan, p_slower_adj=nan, p_faster=nan, p_faster_adj=nan, verdict="failed",
            reason="candidate failed its correctness check, so it was not timed" + (f": {c.note}" if c.note else ""),
            note="" if b is not None else "not in baseline", timing_verdict="failed",
        ))
    if few:
        notes.append(f"{len(few)} row(s) have fewer than {MIN_SAMPLES} samples on a side: their tests have little power")
    if any(not cand_rows[k].correct for k in keys):
        notes.append("some candidate rows failed their correctness check (see notes column)")
    order = {v: i for i, v in enumerate(VERDICTS)}
    comps.sort(key=lambda c: (order[c.verdict], -c.rel_change if math.isfinite(c.rel_change) else 0.0, c.op, c.shape))

    def meta(res: Results) -> dict[str, Any]:
        return {"path": res.path, "gpu_name": res.gpu_name, "created_utc": res.created_utc, "tool_version": res.tool_version, "suite": res.suite}

    return RegressReport(
        params=params, baseline=meta(baseline), candidate=meta(candidate), comparisons=tuple(comps),
        only_in_baseline=only_b, only_in_candidate=only_c, hardware_mismatch=hw_note is not None, notes=tuple(notes),
        not_compared=not_compared,
    )
