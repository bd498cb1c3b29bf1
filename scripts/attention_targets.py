"""Issue 11's attention targets on one GPU: our kernels against every torch baseline candidate.

For each target shape it checks ours and each candidate against the fp32 reference, then prints
graph-timed GPU time (``triton.testing.do_bench_cudagraph``, median), TFLOP/s and TB/s from the
op's cost, the ratio to the fastest candidate, and our launcher's host time per call (back-to-back
calls without a sync, so the GPU queue never blocks the host). Writes the rows as JSON with --out.

Usage on the GPU machine (about 2-4 minutes on an H200, most of it autotuning and references):
    python scripts/attention_targets.py [--out attention-targets.json] [--only flash,mla,decode]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: (group, kernel module, case builder args): the shapes issue 11 names
TARGETS = (
    ("flash", "flash_attention", (4, 32, 8, 4096, 128, True, "bf16")),
    ("flash", "flash_attention", (4, 32, 8, 4096, 128, False, "bf16")),
    ("mla", "mla_decode", (1, 128, 131072, 512, 64, "bf16")),
    ("mla", "mla_decode", (64, 128, 32768, 512, 64, "bf16")),
    ("decode", "decode_attention", (1, 32, 8, 131072, 128, "bf16")),
    ("decode", "decode_attention", (16, 32, 8, 131072, 128, "bf16")),
    ("decode", "decode_attention", (64, 32, 8, 16384, 128, "bf16")),
)
HOST_CALLS = 200


def host_us_per_call(fn, torch) -> float:
    """Host time of one call: ``HOST_CALLS`` back-to-back calls timed without a sync."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(HOST_CALLS):
        fn()
    dt = time.perf_counter() - t0
    torch.cuda.synchronize()
    return dt / HOST_CALLS * 1e6


def measure(group: str, module: str, args: tuple, torch) -> dict:
    import importlib

    from triton.testing import do_bench_cudagraph

    from kernels.testing import compare, seeded_generator

    mod = importlib.import_module(f"kernels.{module}")
    op = mod.OP
    case = mod._case(*args)
    inputs = op.make_inputs(case, "cuda", seeded_generator(case.id))
    ref = op.reference(**inputs)
    tol = op.tolerance[case.dtype]
    flops, bytes_ = op.cost(case)

    def ours():
        return op.run(**inputs)

    row = {"group": group, "op": op.name, "case": case.id, "flops": flops, "bytes": bytes_}
    check = compare(ours(), ref, tol)  # the first call autotunes
    row["ours_check"] = check.message
    row["ours_us"] = do_bench_cudagraph(ours, rep=100, return_mode="median") * 1e3 if check.ok else None
    row["ours_host_us"] = host_us_per_call(ours, torch)
    row["baselines_us"] = {}
    for name, factory in op.baselines.items():
        try:
            call = factory(**inputs)
        except Exception as e:  # noqa: BLE001 - a candidate that cannot be set up is reported
            row["baselines_us"][name] = f"setup raised {type(e).__name__}"
            continue
        if call is None:
            row["baselines_us"][name] = "declined"
            continue
        c = compare(call(), ref, tol)
        row["baselines_us"][name] = do_bench_cudagraph(call, rep=100, return_mode="median") * 1e3 if c.ok else c.message
        del call
    del ref, inputs
    torch.cuda.empty_cache()
    timed = {k: v for k, v in row["baselines_us"].items() if isinstance(v, float)}
    if timed and row["ours_us"]:
        best = min(timed, key=timed.get)
        row["best_baseline"] = best
        row["ratio_vs_best"] = timed[best] / row["ours_us"]  # > 1: ours faster
    if row["ours_us"]:
        row["ours_tflop_per_s"] = flops / row["ours_us"] / 1e6
        row["ours_tb_per_s"] = bytes_ / row["ours_us"] / 1e6
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the rows as JSON here")
    p.add_argument("--only", default="", help="comma-separated groups: flash, mla, decode (default: all)")
    a = p.parse_args(argv)
    groups = {g for g in a.only.split(",") if g}
    unknown = groups - {t[0] for t in TARGETS}
    if unknown:
        print(f"error: --only: unknown group(s) {', '.join(sorted(unknown))}; known: flash, mla, decode", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("error: attention_targets needs a CUDA GPU (graph timing)", file=sys.stderr)
        return 2
    rows = []
    for group, module, args in TARGETS:
        if groups and group not in groups:
            continue
        row = measure(group, module, args, torch)
        rows.append(row)
        ours = f"{row['ours_us']:.1f} us" if row["ours_us"] else row["ours_check"]
        print(
            f"{row['op']:<17} {row['case']:<40} ours {ours:>12}  {row.get('ours_tflop_per_s', 0):6.1f} TFLOP/s "
            f"{row.get('ours_tb_per_s', 0):5.2f} TB/s  host {row['ours_host_us']:6.1f} us/call  "
            f"vs {row.get('best_baseline', '-')} x{row.get('ratio_vs_best', float('nan')):.3f}",
            flush=True,
        )
        for name, v in row["baselines_us"].items():
            print(f"    {name:<16} {v if isinstance(v, str) else f'{v:.1f} us'}", flush=True)
    if a.out:
        from rooflinecli.atomic import write_json_atomic

        write_json_atomic(a.out, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
