"""Report generation time and size: median wall time of ``roofline report --model M`` over fresh
processes (start-up, analysis, figures and the atomic write included), and the file size, for a
few presets (targets: < 3 s and < 10 MB each).

    python benchmarks/bench_report.py [--runs 5] [--models llama-3-8b,deepseek-v3,mixtral-8x7b]
                                      [--hw h100-sxm] [--target-s 3] [--target-mb 10]

Also times the two in-process steps (data assembly, rendering) once per model. Exits 1 when a
median or a size misses its target.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def time_cli(model: str, hw: str, runs: int, out: Path) -> list[float]:
    cmd = [sys.executable, "-m", "rooflinecli", "report", "--model", model, "--hw", hw, "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)  # warm the file cache and .pyc files
    wall = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        wall.append(time.perf_counter() - t0)
    return wall


def time_steps(model: str, hw: str) -> tuple[float, float]:
    from rooflinecli.analysis import Workload
    from rooflinecli.hardware import get_specs
    from rooflinecli.model_registry import get_model
    from rooflinecli.report import build_report_data, render_report

    cfg, specs = get_model(model), get_specs(hw)
    t0 = time.perf_counter()
    data = build_report_data(cfg, specs, Workload(batch=1, prompt_len=1024, gen_len=256))
    t1 = time.perf_counter()
    render_report(data)
    return t1 - t0, time.perf_counter() - t1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--models", default="llama-3-8b,deepseek-v3,mixtral-8x7b")
    ap.add_argument("--hw", default="h100-sxm")
    ap.add_argument("--target-s", type=float, default=3.0)
    ap.add_argument("--target-mb", type=float, default=10.0)
    args = ap.parse_args()
    ok = True
    print(f"{'model':<16} {'hw':<18} {'median s':>9} {'min s':>7} {'max s':>7} {'MB':>6} {'data s':>7} {'render s':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            out = Path(tmp) / f"{model}.html"
            wall = time_cli(model, args.hw, args.runs, out)
            med = statistics.median(wall)
            mb = out.stat().st_size / 1e6
            data_s, render_s = time_steps(model, args.hw)
            print(f"{model:<16} {args.hw:<18} {med:>9.2f} {min(wall):>7.2f} {max(wall):>7.2f} {mb:>6.2f} {data_s:>7.2f} {render_s:>9.2f}")
            ok &= med < args.target_s and mb < args.target_mb
    print(f"targets: median < {args.target_s:g} s, file < {args.target_mb:g} MB: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
