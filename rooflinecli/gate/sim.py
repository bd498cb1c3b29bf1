"""Proof of the regression gate: simulated GPU timings, and realistic synthetic results files.

The noise model, per sample: ``t = t0 * slowdown * exp(sigma * Z)`` with Z standard normal (a
lognormal, right-skewed like real kernel timings) whose ``spread`` is given as the gate's own noise
measure, IQR/median = 2 sinh(0.6745 sigma) (so spread 3% is sigma 2.2%), and with
probability ``outlier_rate`` the sample is multiplied by 1 + U(0.2, 1.0) (a clock dip, a preempted
launch). A simulated suite has ``n_kernels`` kernels with true medians log-uniform in
[20 us, 5 ms]; each trial times every kernel ``n_samples`` times for the baseline and again for
the candidate, and kernel 0 of the candidate is slowed by ``slowdown``. The gate's own vectorized
code (``stats`` + ``regress.decide``, Holm across the suite) judges every trial.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rooflinecli import stats
from rooflinecli.gate.decision import SPREAD_CHANGE_MIN_SAMPLES, GateParams, decide, pooled_bimodal_quorum


_Z75 = 0.6744897501960817  # standard normal 75th percentile


def sigma_for_spread(spread: float) -> float:
    """Lognormal sigma whose IQR/median equals ``spread``."""
    return math.asinh(spread / 2.0) / _Z75


def draw_timings(rng: np.random.Generator, medians_s: np.ndarray, n_samples: int, spread: float, outlier_rate: float) -> np.ndarray:
    """Samples of shape medians_s.shape + (n_samples,), seconds; ``spread`` = IQR/median."""
    shape = np.shape(medians_s) + (n_samples,)
    sigma = sigma_for_spread(spread)
    t = np.asarray(medians_s, dtype=float)[..., None] * np.exp(sigma * rng.standard_normal(shape))
    if outlier_rate > 0:
        hit = rng.random(shape) < outlier_rate
        t = np.where(hit, t * (1.0 + rng.uniform(0.2, 1.0, shape)), t)
    return t


def gate_verdicts(base: np.ndarray, cand: np.ndarray, params: GateParams, base_median: np.ndarray | None = None,
                  base_runs: list[np.ndarray] | None = None) -> np.ndarray:
    """Verdicts for batches of suites: base (..., K, n), cand (..., K, m) -> (..., K).

    The same steps as ``regress.compare``: medians (``base_median`` overrides the baseline's, as a
    pooled baseline's median of run medians does), noise, one-sided U tests, Holm across K, and
    "unstable" for bimodal samples or a spread that changed several-fold (``base_runs``: a pooled
    baseline's runs, judged one by one as ``regress.instability`` does)."""
    bm = stats.median(base) if base_median is None else base_median
    cm = stats.median(cand)
    noise = np.maximum(stats.relative_iqr(base), stats.relative_iqr(cand))
    p_slow, p_fast = stats.mannwhitney_both(cand, base)
    v = decide(cm / bm - 1.0, cm - bm, noise, stats.holm(p_slow, axis=-1), stats.holm(p_fast, axis=-1), params)
    # the sample-shape half of ``regress.instability`` (simulated rows have no method or host time)
    if base_runs is not None and len(base_runs) > 1:
        votes = np.sum([stats.bimodal_split(r)[0] for r in base_runs], axis=0)
        base_bimodal = votes >= pooled_bimodal_quorum(len(base_runs))
        base_spread = np.median([stats.relative_iqr(r) for r in base_runs], axis=0)
        n_base = min(r.shape[-1] for r in base_runs)
    else:
        base_bimodal, base_spread, n_base = stats.bimodal_split(base)[0], stats.relative_iqr(base), base.shape[-1]
    unstable = base_bimodal | stats.bimodal_split(cand)[0]
    if min(n_base, cand.shape[-1]) >= SPREAD_CHANGE_MIN_SAMPLES:
        unstable |= stats.spread_changed(base_spread, stats.relative_iqr(cand))
    v[np.broadcast_to(unstable, v.shape)] = "unstable"
    return v


@dataclass(frozen=True)
class SimOutcome:
    spread: float
    slowdown: float
    n_samples: int
    n_kernels: int
    trials: int
    outlier_rate: float
    baseline_runs: int
    run_drift: float
    catch_rate: float  # slowed kernel flagged "regression" (nan when slowdown == 0)
    flagged_rate: float  # slowed kernel flagged "regression" or "inconclusive"
    suite_false_alarm_rate: float  # trials where an unchanged kernel is flagged "regression"
    kernel_false_alarm_rate: float  # unchanged kernels flagged "regression", per kernel
    kernel_unstable_rate: float = 0.0  # unchanged kernels judged "unstable" (not a failure unless --strict), per kernel

    def row(self) -> dict[str, float]:
        return {
            "spread": self.spread, "slowdown": self.slowdown, "n_samples": self.n_samples, "kernels": self.n_kernels,
            "trials": self.trials, "baseline_runs": self.baseline_runs, "run_drift": self.run_drift, "catch_rate": self.catch_rate, "flagged_rate": self.flagged_rate,
            "suite_false_alarm": self.suite_false_alarm_rate, "kernel_false_alarm": self.kernel_false_alarm_rate,
            "kernel_unstable": self.kernel_unstable_rate,
        }


def simulate(
    spread: float,
    slowdown: float,
    n_samples: int = 10,
    n_kernels: int = 20,
    trials: int = 1000,
    outlier_rate: float = 0.03,
    params: GateParams = GateParams(),
    seed: int = 0,
    chunk: int = 500,
    baseline_runs: int = 1,
    run_drift: float = 0.0,
) -> SimOutcome:
    """Run ``trials`` simulated CI comparisons of an ``n_kernels`` suite (see the module doc).

    ``baseline_runs`` > 1 models a pooled baseline (``roofline baseline update``): that many runs of
    ``n_samples``, samples concatenated, median = median of the run medians. ``run_drift`` is the
    lognormal sigma of a per-run, per-kernel shift (clocks, thermals, another day), applied to every
    run including the candidate's."""
    rng = np.random.default_rng(seed)
    caught = flagged = suite_fa = kernel_fa = kernel_unstable = 0
    unchanged_first = slowdown == 0.0
    done = 0
    while done < trials:
        t = min(chunk, trials - done)
        medians = np.exp(rng.uniform(math.log(20e-6), math.log(5e-3), size=(t, n_kernels)))
        factor = np.ones((t, n_kernels))
        factor[:, 0] = 1.0 + slowdown
        runs = [draw_timings(rng, medians * np.exp(run_drift * rng.standard_normal(medians.shape)), n_samples, spread, outlier_rate)
                for _ in range(baseline_runs)]
        base = np.concatenate(runs, axis=-1)
        base_median = np.median(np.stack([stats.median(r) for r in runs]), axis=0) if baseline_runs > 1 else None
        drift = np.exp(run_drift * rng.standard_normal(medians.shape))
        cand = draw_timings(rng, medians * factor * drift, n_samples, spread, outlier_rate)
        v = gate_verdicts(base, cand, params, base_median, runs)
        unchanged = v if unchanged_first else v[:, 1:]
        reg = unchanged == "regression"
        suite_fa += int(reg.any(axis=1).sum())
        kernel_fa += int(reg.sum())
        kernel_unstable += int((unchanged == "unstable").sum())
        if not unchanged_first:
            caught += int((v[:, 0] == "regression").sum())
            flagged += int(np.isin(v[:, 0], ("regression", "inconclusive")).sum())
        done += t
    n_unchanged = n_kernels if unchanged_first else n_kernels - 1
    return SimOutcome(
        spread=spread, slowdown=slowdown, n_samples=n_samples, n_kernels=n_kernels, trials=trials, outlier_rate=outlier_rate,
        baseline_runs=baseline_runs, run_drift=run_drift,
        catch_rate=float("nan") if unchanged_first else caught / trials,
        flagged_rate=float("nan") if unchanged_first else flagged / trials,
        suite_false_alarm_rate=suite_fa / trials,
        kernel_false_alarm_rate=kernel_fa / (trials * n_unchanged) if n_unchanged else 0.0,
        kernel_unstable_rate=kernel_unstable / (trials * n_unchanged) if n_unchanged else 0.0,
    )


# -- realistic synthetic results files -------------------------------------------------------------

#: (op, shape, dtype, params, flops, bytes, typical H200 median in seconds) for a plausible suite.
_SUITE = (
    ("copy", "N268435456", "bf16", {"N": 268435456}, 0.0, 2 * 2 * 268435456, 2 * 2 * 268435456 / 4.3e12),
    ("copy", "N16777216", "bf16", {"N": 16777216}, 0.0, 2 * 2 * 16777216, 2 * 2 * 16777216 / 3.9e12),
    ("rmsnorm", "T4096-D8192", "bf16", {"T": 4096, "D": 8192}, 4.0 * 4096 * 8192, 2 * 2 * 4096 * 8192 + 2 * 8192, 4 * 4096 * 8192 / 3.6e12),
    ("gemm", "M8192-N8192-K8192", "bf16", {"M": 8192, "N": 8192, "K": 8192}, 2.0 * 8192**3, 3 * 2 * 8192**2, 2.0 * 8192**3 / 760e12),
    ("gemm", "M4096-N4096-K4096", "bf16", {"M": 4096, "N": 4096, "K": 4096}, 2.0 * 4096**3, 3 * 2 * 4096**2, 2.0 * 4096**3 / 700e12),
    ("gemm", "M1-N8192-K8192", "bf16", {"M": 1, "N": 8192, "K": 8192}, 2.0 * 8192**2, 2 * 8192**2, 2 * 8192**2 / 3.7e12),
    ("gemm", "M16-N28672-K8192", "bf16", {"M": 16, "N": 28672, "K": 8192}, 2.0 * 16 * 28672 * 8192, 2 * 28672 * 8192, 2 * 28672 * 8192 / 3.8e12),
    ("flash_attention", "B4-H32-S4096-D128", "bf16", {"B": 4, "H": 32, "S": 4096, "D": 128}, 2 * 2 * 4 * 32 * 4096 * 4096 * 128 / 2, 4 * 4 * 32 * 4096 * 128 * 2, 2 * 4 * 32 * 4096 * 4096 * 128 / 450e12),
    ("decode_attention", "B32-H32-Hkv8-N8192-D128", "bf16", {"B": 32, "H": 32, "Hkv": 8, "N": 8192, "D": 128}, 4.0 * 32 * 32 * 8192 * 128, 2 * 32 * 8 * 8192 * 128 * 2, 2 * 32 * 8 * 8192 * 128 * 2 / 3.4e12),
    ("mla_decode", "B64-H128-N4096-R512", "bf16", {"B": 64, "H": 128, "N": 4096, "R": 512}, 4.0 * 64 * 128 * 4096 * 576, 64 * 4096 * 576 * 2, 64 * 4096 * 576 * 2 / 3.0e12),
    ("moe", "T8-E64-K6-D2048-F1408", "bf16", {"T": 8, "E": 64, "K": 6, "D": 2048, "F": 1408}, 2.0 * 8 * 6 * 3 * 2048 * 1408, 2.0 * 40 * 3 * 2048 * 1408, 2.0 * 40 * 3 * 2048 * 1408 / 2.6e12),
)


def synthetic_results(seed: int = 0, n_samples: int = 20, spread: float = 0.015, outlier_rate: float = 0.03, gpu_name: str = "NVIDIA H200", created_utc: str = "2026-01-01T00:00:00Z", impls: tuple[str, ...] = ("triton", "torch"), code_seed: int = 0):
    """A realistic results file (``rooflinecli.results.Results``): a suite of kernels on an H200 with
    noisy raw samples, ours and the PyTorch equivalent. ``code_seed`` fixes the true kernel speeds
    (the code under test); ``seed`` the timing noise of this run."""
    from rooflinecli.results import ResultRow, Results, quantiles_s

    speed = np.random.default_rng(code_seed).uniform(0.95, 1.15, size=len(_SUITE))
    rng = np.random.default_rng(seed)
    rows = []
    for i, (op, shape, dtype, p, flops, nbytes, t0) in enumerate(_SUITE):
        for impl in impls:
            med = t0 * (1.0 if impl == "torch" else float(speed[i]))
            samples = tuple(float(x) for x in draw_timings(rng, np.asarray(med), n_samples, spread, outlier_rate))
            p20, p50, p80 = quantiles_s(samples)
            rows.append(ResultRow(
                op=op, impl=impl, shape=shape, dtype=dtype, samples_s=samples, p20_s=p20, p50_s=p50, p80_s=p80,
                flops=float(flops), bytes=float(nbytes), params=dict(p),
                achieved_tflops=flops / p50 / 1e12, achieved_gb_per_s=nbytes / p50 / 1e9,
                method="cuda_graph" if p50 < 50e-6 else "cuda_events", note="synthetic",
            ))
    env = {"gpu_name": gpu_name, "driver": "570.00", "cuda": "12.8", "torch": "2.11.0", "triton": "3.6.0", "python": "3.12.0",
           "sm_clock_mhz": 1980, "mem_clock_mhz": 3201, "synthetic": True}
    return Results(rows=tuple(rows), environment=env, created_utc=created_utc, tool_version="0.1.0", suite="synthetic", hardware_spec="h200")


def slow_down(res, factor: float, keys=None, op: str | None = None):
    """A copy of ``res`` whose rows (those with ``key`` in ``keys``, or op ``op``, or all) have every
    sample multiplied by ``factor`` and their quantiles recomputed."""
    from dataclasses import replace

    from rooflinecli.results import quantiles_s

    keys = set(keys) if keys is not None else None
    rows = []
    for r in res.rows:
        hit = (keys is None or r.key in keys) and (op is None or r.op == op)
        if hit:
            samples = tuple(s * factor for s in r.samples_s)
            p20, p50, p80 = quantiles_s(samples)
            r = replace(r, samples_s=samples, p20_s=p20, p50_s=p50, p80_s=p80,
                        achieved_tflops=r.flops / p50 / 1e12 if r.flops else r.achieved_tflops,
                        achieved_gb_per_s=r.bytes / p50 / 1e9 if r.bytes else r.achieved_gb_per_s)
        rows.append(r)
    return replace(res, rows=tuple(rows))
