"""Start-up time of the analytical path: median wall time of
``roofline model show llama-3-70b --json`` over 10 fresh processes (target < 0.3 s).

    python benchmarks/bench_startup.py [--runs 10] [--target-s 0.3]

Runs ``python -m rooflinecli`` with the interpreter running this script, so it measures the
installed package without depending on the ``roofline`` script being on PATH. Exits 1 when the
median misses the target.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

COMMAND = ["model", "show", "llama-3-70b", "--json"]


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def time_runs(runs: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) of each run. CPU time (user + system) shows what the command
    costs when other jobs share the machine and inflate the wall time."""
    cmd = [sys.executable, "-m", "rooflinecli", *COMMAND]
    subprocess.run(cmd, check=True, capture_output=True)  # warm the file cache and .pyc files
    wall_s, cpu_s = [], []
    for _ in range(runs):
        c0, t0 = _children_cpu_s(), time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        wall_s.append(time.perf_counter() - t0)
        cpu_s.append(_children_cpu_s() - c0)
    return wall_s, cpu_s


def bare_python_s(runs: int) -> float:
    times_s = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times_s.append(time.perf_counter() - t0)
    return statistics.median(times_s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--target-s", type=float, default=0.3)
    args = ap.parse_args()
    times_s, cpu_s = time_runs(args.runs)
    median_s = statistics.median(times_s)
    q = statistics.quantiles(times_s, n=5) if len(times_s) > 1 else [median_s] * 4
    print(f"roofline {' '.join(COMMAND)}")
    print(f"  runs: {len(times_s)}  median: {median_s:.3f} s  p20: {q[0]:.3f} s  p80: {q[3]:.3f} s  (target < {args.target_s} s)")
    print(f"  CPU time (user + system) median: {statistics.median(cpu_s):.3f} s")
    print(f"  bare `python -c pass`: {bare_python_s(args.runs):.3f} s")
    return 0 if median_s < args.target_s else 1


if __name__ == "__main__":
    sys.exit(main())
