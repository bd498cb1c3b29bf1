"""Cost of the first achievable prediction with an imported engine: in a fresh process, after the
imports, the seconds to read and validate the shipped calibration (``load_calibration``), then
to predict one decode step (``predict_phase``, which fits the calibration's models on first use),
median over fresh processes, per (model, GPU, engine) case.

    python benchmarks/bench_calibration_load.py [--runs 5] [--target-s 0.5] [--json]

A dense model reads the GEMM and attention tables only; an MoE model its MoE table too. CPU time
of each stage is printed beside its wall time (on a shared machine the wall time includes other
jobs). Exits 1 when a case's median total misses the target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CASES: tuple[tuple[str, str, str], ...] = (
    ("llama-3.1-8b", "h200", "vllm"),
    ("qwen3-30b-a3b", "h100-sxm", "sglang"),
    ("llama-3.1-8b", "l40s", "trtllm"),
)

CHILD = r"""
import json, sys, time
from rooflinecli.achievable import calibration_path
from rooflinecli.achievable.calibration import load_calibration
from rooflinecli.analysis.workload import Workload
from rooflinecli.hardware.loader import get_spec
from rooflinecli.model_registry import get_model
from rooflinecli.predict import predict_phase

model, hw, engine = sys.argv[1:4]
cfg, spec = get_model(model), get_spec(hw)
path = str(calibration_path(spec, engine))
stages = {}

def timed(name, f):
    w, c = time.perf_counter(), time.process_time()
    out = f()
    stages[name] = (time.perf_counter() - w, time.process_time() - c)
    return out

cal = timed("load", lambda: load_calibration(path))
timed("fit_predict", lambda: predict_phase(cfg, spec, Workload(batch=8, prompt_len=2048, gen_len=128), "decode", 8, 2048, mode="achievable", engine=engine))
print(json.dumps(stages))
"""


def run_case(model: str, hw: str, engine: str, runs: int) -> dict:
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", CHILD, model, hw, engine], capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"{model} {hw} {engine}: {out.stderr.strip().splitlines()[-1]}")
        samples.append(json.loads(out.stdout.strip().splitlines()[-1]))
    res = {}
    for stage in samples[0]:
        res[f"{stage}_wall_s"] = statistics.median(s[stage][0] for s in samples)
        res[f"{stage}_cpu_s"] = statistics.median(s[stage][1] for s in samples)
    res["total_wall_s"] = statistics.median(sum(v[0] for v in s.values()) for s in samples)
    res["total_cpu_s"] = statistics.median(sum(v[1] for v in s.values()) for s in samples)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--target-s", type=float, default=0.5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    results = {f"{m} {h} {e}": run_case(m, h, e, a.runs) for m, h, e in CASES}
    if a.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"{'case':34} {'load_s':>8} {'fit_predict_s':>14} {'total_s':>8} {'total_cpu_s':>12}")
        for name, r in results.items():
            print(f"{name:34} {r['load_wall_s']:8.3f} {r['fit_predict_wall_s']:14.3f} {r['total_wall_s']:8.3f} {r['total_cpu_s']:12.3f}")
    return 1 if any(r["total_cpu_s"] > a.target_s for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
