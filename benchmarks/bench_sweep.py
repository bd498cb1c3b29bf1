"""Time a 1M-row `roofline sweep` command end to end (a fresh process each run, so Python
start-up and imports count) and print the median of 3 runs.

    python benchmarks/bench_sweep.py [--runs 3] [--out /tmp/sweep.parquet]

Target: under 3 s on 2 CPU cores for 1,048,576 rows per phase.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

COMMAND = [
    "sweep",
    "--model", "llama-3-8b,llama-3-70b,mixtral-8x7b,deepseek-v3",
    "--hw", "h100-sxm,h200",
    "--batch", "1..1024",
    "--context", "1k..128k:1k",
    "--quiet",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "rooflinecli-bench-sweep.parquet"))
    args = ap.parse_args()
    walls, cpus = [], []
    for _ in range(args.runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rooflinecli", *COMMAND, "--out", args.out], check=True)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    size = os.path.getsize(args.out)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"roofline {' '.join(COMMAND)} --out {args.out}")
    print(f"rows: 2,097,152 (1,048,576 per phase); file {size / 1e6:.0f} MB")
    print(f"wall s: {', '.join(f'{w:.2f}' for w in walls)}  median {statistics.median(walls):.2f} s (target < 3 s)")
    print(f"cpu s:  {', '.join(f'{c:.2f}' for c in cpus)}  median {statistics.median(cpus):.2f} s; {os.cpu_count()} CPUs, load average {load:.1f}")


if __name__ == "__main__":
    main()
