"""Catch and false-alarm rates of ``roofline regress`` on simulated GPU timings.

    python benchmarks/sim_regress.py [--trials 2000] [--kernels 20] [--outliers 0.03] [--seed 0]
    python benchmarks/sim_regress.py --baseline-runs 5 --drift 0,0.01,0.02 --samples 10

For each noise level (IQR/median of a lognormal), slowdown of one kernel and sample count, it runs
``--trials`` CI comparisons of a ``--kernels`` suite through the gate's own code
(rooflinecli.gate.sim) and prints: caught (the slowed kernel judged "regression"), flagged
("regression" or "inconclusive"), and the false-alarm rate (trials in which any unchanged kernel is
judged "regression"). Fixed seeds: the table is reproducible.
"""

from __future__ import annotations

import argparse
import time

from rooflinecli.gate.decision import GateParams
from rooflinecli.gate.sim import simulate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--kernels", type=int, default=20)
    ap.add_argument("--outliers", type=float, default=0.03, help="fraction of samples that are outliers (+20-100%%)")
    ap.add_argument("--noise", default="0.005,0.01,0.02,0.03,0.05", help="IQR/median levels")
    ap.add_argument("--slowdowns", default="0,0.05,0.1,0.2")
    ap.add_argument("--samples", default="10,20")
    ap.add_argument("--threshold", type=float, default=0.05)
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline-runs", type=int, default=1, help="runs pooled into the baseline (roofline baseline update)")
    ap.add_argument("--drift", default="0", help="run-to-run drift levels (lognormal sigma per run and kernel)")
    a = ap.parse_args()
    params = GateParams(threshold=a.threshold, alpha=a.alpha)
    noises = [float(x) for x in a.noise.split(",")]
    slowdowns = [float(x) for x in a.slowdowns.split(",")]
    samples = [int(x) for x in a.samples.split(",")]
    drifts = [float(x) for x in a.drift.split(",")]

    t0 = time.perf_counter()
    print(f"gate: threshold {a.threshold:.0%}, alpha {a.alpha:g} (Holm over {a.kernels} kernels), min 1 us; "
          f"{a.trials} trials per row; {a.outliers:.0%} of samples outliers; baseline pooled from {a.baseline_runs} run(s)")
    print(f"{'drift':>6} {'samples':>7} {'IQR/med':>8} {'slowdown':>9} {'caught':>8} {'flagged':>8} {'false alarm':>12}")
    case = 0
    for drift in drifts:
        for n in samples:
            for noise in noises:
                for s in slowdowns:
                    case += 1
                    seed = a.seed * 1000 + case
                    o = simulate(noise, s, n_samples=n, n_kernels=a.kernels, trials=a.trials, outlier_rate=a.outliers, params=params,
                                 seed=seed, baseline_runs=a.baseline_runs, run_drift=drift)
                    caught = "-" if s == 0 else f"{o.catch_rate:.1%}"
                    flagged = "-" if s == 0 else f"{o.flagged_rate:.1%}"
                    print(f"{drift:>6.1%} {n:>7} {noise:>8.1%} {s:>9.0%} {caught:>8} {flagged:>8} {o.suite_false_alarm_rate:>12.2%}")
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
