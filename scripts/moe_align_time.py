"""GPU check: how much of a MoE call the one-program alignment kernel takes (issue 11, H200 run 2).

Times ``align_by_expert`` alone and the whole ``moe`` call, CUDA-graph replayed, for the bench's
Qwen3 and Mixtral shapes, and prints one JSON line per shape: align_us, moe_us, align_share.
docs/kernels_a.md ("H200 run 2") predicts align_us of 1,000-1,400 at Qwen3 T = 4096 (512 chunks of
64 slots, 40 barriers each) and a few us at T <= 16. Needs a CUDA GPU; about 10 s on an H200.

    PYTHONPATH=. python3 scripts/moe_align_time.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys


def _graph_us(fn, replays: int = 20) -> float:
    """Median microseconds of one ``fn()`` replayed from a CUDA graph (after a warm-up call)."""
    import statistics

    import torch

    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("error: scripts/moe_align_time.py needs a CUDA GPU", file=sys.stderr)
        return 2
    from kernels import moe as MOE

    dev = torch.device("cuda")
    rows = []
    for T, E, k, d, I in ((1, 128, 8, 2048, 768), (16, 128, 8, 2048, 768), (4096, 128, 8, 2048, 768),
                          (4096, 8, 2, 4096, 14336)):
        ids, weights = MOE.case_routing(T, E, k, seed=0)
        ids_t, w_t = torch.from_numpy(ids).to(dev), torch.from_numpy(weights).to(dev)
        hidden = torch.randn((T, d), dtype=torch.bfloat16, device=dev)
        w1 = torch.randn((E, 2 * I, d), dtype=torch.bfloat16, device=dev) * d**-0.5
        w2 = torch.randn((E, d, I), dtype=torch.bfloat16, device=dev) * I**-0.5
        block_m = MOE.moe_config(T * k, E, I)["BLOCK_M"]
        align_us = _graph_us(lambda: MOE.align_by_expert(ids_t, E, block_m))
        out = torch.empty_like(hidden)
        moe_us = _graph_us(lambda: MOE.moe(hidden, w1, w2, ids_t, w_t, out=out))
        rows.append(dict(shape=f"T{T}-E{E}-k{k}-d{d}-I{I}", block_m=block_m, align_us=round(align_us, 1),
                         moe_us=round(moe_us, 1), align_share=round(align_us / moe_us, 3)))
        print(json.dumps(rows[-1]), flush=True)
        del w1, w2
        torch.cuda.empty_cache()
    if args.out:
        from rooflinecli.atomic import write_text_atomic

        write_text_atomic(args.out, json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
