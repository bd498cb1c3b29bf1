"""GPU check: the MoE alignment step by path, one-program kernel against the multi-program one.

Times ``align_by_expert`` alone through each path (``multi=False``: ``_align_kernel``, one program
looping over 64-slot chunks; ``multi=True``: the count, chunk-scan and scatter launches) and the
whole ``moe`` call, CUDA-graph replayed, for the bench's Qwen3 and Mixtral shapes, and prints one
JSON line per shape: align_us_one_program, align_us_multi_program, the path ``moe`` takes there
(``align_multi``), moe_us, and where that path is the multi-program one, moe_us_one_program (the
layer with the one-program kernel forced). It also checks that both paths give
the same sorted slots and block experts (``paths_equal``); exit code 1 if any differs.

Predictions (reports/h200-2026-11-30-run2/README.md): one-program 1,000-1,400 us at Qwen3 T = 4096 (512 chunks of 64
slots, 40 barriers each), a few us at T <= 16; multi-program 10-20 us at Qwen3 T = 4096 (three
launches of 512, 16 and 512 programs), about 10 us at every shape (its floor: three launches).
Needs a CUDA GPU; about 30 s on an H200, mostly compiling.

    PYTHONPATH=. python3 scripts/moe_align_time.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys

#: (T, E, k, d, I): Qwen3-30B-A3B decode and prefill, Mixtral 8x7B prefill
SHAPES = ((1, 128, 8, 2048, 768), (16, 128, 8, 2048, 768), (64, 128, 8, 2048, 768), (4096, 128, 8, 2048, 768),
          (4096, 8, 2, 4096, 14336))


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


def _moe_us(MOE, hidden, w1, w2, ids, weights, min_chunks: int) -> float:
    """``moe`` graph-timed with ``ALIGN_MULTI_MIN_CHUNKS`` set to ``min_chunks`` (fresh plans)."""
    import torch

    saved = MOE.ALIGN_MULTI_MIN_CHUNKS
    MOE.ALIGN_MULTI_MIN_CHUNKS = min_chunks
    MOE._PLANS.clear()
    try:
        out = torch.empty_like(hidden)
        return _graph_us(lambda: MOE.moe(hidden, w1, w2, ids, weights, out=out))
    finally:
        MOE.ALIGN_MULTI_MIN_CHUNKS = saved
        MOE._PLANS.clear()


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
    rows, all_equal = [], True
    for T, E, k, d, I in SHAPES:
        ids, weights = MOE.case_routing(T, E, k, seed=0)
        ids_t, w_t = torch.from_numpy(ids).to(dev), torch.from_numpy(weights).to(dev)
        block_m = MOE.moe_config(T * k, E, I)["BLOCK_M"]
        one = [t.clone() for t in MOE.align_by_expert(ids_t, E, block_m, multi=False)]
        multi = MOE.align_by_expert(ids_t, E, block_m, multi=True)
        equal = all(torch.equal(a, b) for a, b in zip(one, multi))
        all_equal &= equal
        row = dict(shape=f"T{T}-E{E}-k{k}-d{d}-I{I}", block_m=block_m, slots=T * k, paths_equal=equal,
                   align_us_one_program=round(_graph_us(lambda: MOE.align_by_expert(ids_t, E, block_m, multi=False)), 1),
                   align_us_multi_program=round(_graph_us(lambda: MOE.align_by_expert(ids_t, E, block_m, multi=True)), 1),
                   align_multi=MOE.align_multi(T * k))
        hidden = torch.randn((T, d), dtype=torch.bfloat16, device=dev)
        w1 = torch.randn((E, 2 * I, d), dtype=torch.bfloat16, device=dev) * d**-0.5
        w2 = torch.randn((E, d, I), dtype=torch.bfloat16, device=dev) * I**-0.5
        row["moe_us"] = round(_moe_us(MOE, hidden, w1, w2, ids_t, w_t, MOE.ALIGN_MULTI_MIN_CHUNKS), 1)
        if row["align_multi"]:
            row["moe_us_one_program"] = round(_moe_us(MOE, hidden, w1, w2, ids_t, w_t, 1 << 30), 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.out:  # after every shape: a run cut short by its budget keeps the rows it timed
            from rooflinecli.output import write_text_atomic

            write_text_atomic(args.out, json.dumps(rows, indent=1) + "\n")
        del w1, w2
        torch.cuda.empty_cache()
    if not all_equal:
        print("error: the one-program and multi-program alignments differ (paths_equal false above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
