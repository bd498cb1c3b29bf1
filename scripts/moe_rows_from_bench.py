"""Add ``moe_grouped`` calibration rows, taken from a bench run's torch MoE rows, to a calibration
file that has none (a calibration written before ``roofline calibrate`` timed that op itself).

    PYTHONPATH=. python3 scripts/moe_rows_from_bench.py RESULTS.json CALIBRATION.json [--out FILE]

The torch baseline of ``roofline bench``'s ``moe`` rows is ``kernels.moe_torch.experts`` on the
grouped path (``torch._grouped_mm``), graph-timed on the same GPU run as the calibration: the
same code as a ``moe_grouped`` row of the op grid, less the routing (``moe_torch.route``: fp32
softmax, top-k, renormalize; ``ROUTE_KERNELS`` tiny kernels at decode sizes). Each row becomes
one ``moe_grouped`` row with

* ``t_graph`` = the bench row's median + ``ROUTE_KERNELS`` x the calibration's graph launch floor
  (the routing kernels, each at least the floor; at 4,096 tokens their few MB are still
  negligible against the experts' milliseconds);
* FLOPs and bytes from ``opgrid.moe_experts_work`` with the experts the bench case really touched
  (its ``experts_touched`` param; uniform-routing expectation otherwise);
* no ``t_eager`` (the bench times host cost per call, not an eager GPU time).

Whole-model runs are never read. Refuses a calibration that already has ``moe_grouped`` rows, or
results of another GPU. Writes atomically (``--out``, default: the calibration file itself).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rooflinecli.atomic import write_text_atomic  # noqa: E402
from rooflinecli.errors import RooflineError, parse_json_text, read_user_file  # noqa: E402

#: what the rows' notes say they are
NOTE = ("from bench {results}: torch MoE experts (kernels.moe_torch.experts, torch._grouped_mm) graph-timed "
        "p50 {p50_us:.1f} us + routing as {route} kernels at the launch floor ({floor_us:.2f} us each)")


def moe_rows(results_path: str, calibration: dict) -> list[dict]:
    """The ``moe_grouped`` rows for ``calibration`` from the torch ``moe`` rows of a results file."""
    from kernels.moe_torch import ROUTE_KERNELS
    from rooflinecli.bench.opgrid import moe_experts_work
    from rooflinecli.results import load_results

    res = load_results(results_path)
    if res.gpu_name != calibration.get("gpu"):
        raise RooflineError(f"{results_path}: measured on '{res.gpu_name}', the calibration on '{calibration.get('gpu')}'")
    floors = [r["t_graph"] for r in calibration.get("rows", []) if isinstance(r, dict) and r.get("op") == "launch_floor"]
    if not floors:
        raise RooflineError("the calibration has no launch_floor row to time the routing kernels with")
    floor = float(floors[0])
    out = []
    for r in res.rows:
        if r.op != "moe" or r.impl != "torch" or r.dtype != "bf16" or not r.correct or not r.samples_s:
            continue
        T, E, k, d, I = (int(r.params[x]) for x in ("T", "E", "k", "d", "I"))
        touched = r.params.get("experts_touched")
        flops, nbytes = moe_experts_work(T, E, k, d, I, touched=None if touched is None else float(touched))
        out.append({
            "op": "moe_grouped", "shape": {"T": T, "E": E, "k": k, "d": d, "I": I}, "flops": flops, "bytes": nbytes,
            "t_graph": float(r.p50_s) + ROUTE_KERNELS * floor, "backend": "torch._grouped_mm",
            "note": NOTE.format(results=Path(results_path).as_posix(), p50_us=r.p50_s * 1e6, route=ROUTE_KERNELS, floor_us=floor * 1e6),
        })
    if not out:
        raise RooflineError(f"{results_path}: no timed torch bf16 moe rows")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results")
    p.add_argument("calibration")
    p.add_argument("--out", default=None, help="file to write (default: the calibration file)")
    a = p.parse_args(argv)
    try:
        doc = parse_json_text(read_user_file(Path(a.calibration), "calibration file"), a.calibration)
        if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
            raise RooflineError(f"{a.calibration}: not a calibration file (no rows)")
        if any(isinstance(r, dict) and r.get("op") == "moe_grouped" for r in doc["rows"]):
            raise RooflineError(f"{a.calibration}: already has moe_grouped rows")
        rows = moe_rows(a.results, doc)
        doc["rows"].extend(rows)
        write_text_atomic(Path(a.out or a.calibration), json.dumps(doc, indent=2) + "\n")
    except RooflineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"added {len(rows)} moe_grouped rows to {a.out or a.calibration}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
