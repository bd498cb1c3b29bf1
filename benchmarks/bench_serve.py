"""Time the serving model's two heavy paths and print the figures:

- the discrete-event simulation of 10,000 requests (Poisson arrivals at half the replica's
  capacity, prompt and output lengths spread by half) on llama-3-8b / h100-sxm;
- the SLO search over at least 10,000 candidate configurations (llama-3-70b on 64 x h100-sxm,
  aggregated and disaggregated).

    python benchmarks/bench_serve.py [--runs 3] [--mode datasheet]

Targets: the simulation under 2 s, the search under 5 s, on 2 CPU cores. Step tables (the
prediction path's grid, built once per layout) are timed inside the search; the calibration a
GPU's achievable mode loads is read once before timing (it is cached per process).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mode", default=None, help="prediction mode (default: achievable where calibrated, else the roof)")
    args = ap.parse_args()

    from rooflinecli.analysis.workload import Workload
    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_model
    from rooflinecli.serve.arrivals import Stream, arrivals, lengths
    from rooflinecli.serve.replica import build_replica
    from rooflinecli.serve.search import Slo, search
    from rooflinecli.serve.sim import simulate
    from rooflinecli.serve.steady import Lengths, capacity_requests_per_s

    spec = get_spec("h100-sxm")
    wl = Workload(batch=1, prompt_len=1024, gen_len=256, mode=args.mode, engine="vllm")
    cfg = get_model("llama-3-8b")
    rep = build_replica(cfg, spec, wl, isl=1536, osl=384, max_isl=1536, max_context=1536 + 384)
    rate = 0.5 * capacity_requests_per_s(rep.table, Lengths(1024, 256), rep.kv_limit, 8192)
    sim_s, steps = [], 0
    for run in range(args.runs):
        rng = np.random.default_rng(run)
        n = 10_000
        stream = Stream(arrivals(rng, n, rate), lengths(rng, n, 1024, 0.5, "isl"), lengths(rng, n, 256, 0.5, "osl"))
        t = time.perf_counter()
        res = simulate(rep.table, stream, token_budget=8192, kv_tokens=rep.kv_tokens, max_seqs=rep.kv_limit)
        sim_s.append(time.perf_counter() - t)
        steps = res.steps
    print(f"simulation: 10,000 requests ({steps:,} engine steps, {rep.table.mode}) in {statistics.median(sim_s):.3f} s "
          f"(median of {args.runs}; target < 2 s)")

    big = get_model("llama-3-70b")
    swl = Workload(batch=1, prompt_len=1024, gen_len=256, mode=args.mode, engine="vllm")
    search(big, spec, swl, gpus=8, isl=1024, osl=256, slo=Slo(ttft_s=0.5, tpot_s=0.05))  # loads the calibration once
    search_s, count = [], 0
    for _ in range(args.runs):
        t = time.perf_counter()
        res = search(big, spec, swl, gpus=64, isl=1024, osl=256, slo=Slo(ttft_s=0.5, tpot_s=0.05))
        search_s.append(time.perf_counter() - t)
        count = res["count"]
    print(f"search: {count:,} candidate configurations in {statistics.median(search_s):.3f} s "
          f"(median of {args.runs}, step tables included; target < 5 s for 10,000)")


if __name__ == "__main__":
    main()
