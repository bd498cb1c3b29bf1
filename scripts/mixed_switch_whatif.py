"""Graft the mixed-kernel rows of a new calibration onto a measured spec's calibration (CPU only).

    python3 scripts/mixed_switch_whatif.py NEW.calibration.json OUT_DIR [--spec hardware_specs/measured/h200.toml]

``NEW`` is what ``roofline calibrate`` wrote on the GPU (even a short, budget-cut run: the
``launch_floor_mixed`` and ``launch_floor_mixed_gemm`` rows come second in the grid). Writes
``OUT_DIR/calibration.json`` (the spec's calibration plus NEW's mixed rows, nothing else of NEW)
and ``OUT_DIR/spec.toml`` (the spec naming it), and prints each mixed row's interleaved and
grouped per-kernel times and the switch costs the achievable model fits from them. Then::

    roofline validate reports/h200-2026-11-30-run2/e2e.json --measured OUT_DIR/spec.toml --out OUT_DIR/validation-e2e.json

predicts the run's whole-model steps with the switch cost, every other model unchanged (the
calibration's other rows are the run's own). Exit 0, or 2 with one ``error:`` line on bad input.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MIXED_PREFIX = "launch_floor_mixed"
CAL_LINE = re.compile(r'^(calibration\s*=\s*)"[^"]*"', re.MULTILINE)


def graft(new_doc: dict, base_doc: dict) -> tuple[dict, list[dict]]:
    """(base_doc with new_doc's mixed rows in place of its own, those rows)."""
    mixed = [r for r in new_doc.get("rows", []) if isinstance(r, dict) and str(r.get("op", "")).startswith(MIXED_PREFIX)]
    out = dict(base_doc)
    out["rows"] = [r for r in base_doc["rows"] if not str(r.get("op", "")).startswith(MIXED_PREFIX)] + mixed
    return out, mixed


def main(argv: list[str] | None = None) -> int:
    from rooflinecli.achievable import calibration_path
    from rooflinecli.achievable.calibration import parse_calibration
    from rooflinecli.achievable.fit import fit_models
    from rooflinecli.atomic import write_json_atomic, write_text_atomic
    from rooflinecli.errors import RooflineError
    from rooflinecli.hardware import get_spec

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("new", help="calibration file with launch_floor_mixed* rows (roofline calibrate's output)")
    ap.add_argument("out_dir")
    ap.add_argument("--spec", default="hardware_specs/measured/h200.toml", help="measured spec whose calibration the rows join")
    a = ap.parse_args(argv)
    try:
        spec = get_spec(a.spec)
        base_path = calibration_path(spec)
        if base_path is None:
            raise RooflineError(f"{a.spec}: names no calibration file")
        try:
            new_doc = json.loads(Path(a.new).read_text())
            base_doc = json.loads(base_path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise RooflineError(f"cannot read a calibration file: {e}") from None
        doc, mixed = graft(new_doc, base_doc)
        if not mixed:
            raise RooflineError(f"{a.new}: no {MIXED_PREFIX}* rows (calibrate a grid that reaches its second category)")
        models = fit_models(parse_calibration(doc, str(a.new)))  # validates the grafted rows
        toml = Path(spec.path).read_text()
        if not CAL_LINE.search(toml):
            raise RooflineError(f"{a.spec}: no 'calibration = \"...\"' line to point at the new file")
        out = Path(a.out_dir)
        write_json_atomic(out / "calibration.json", doc, make_parents=True)
        write_text_atomic(out / "spec.toml", CAL_LINE.sub(r'\1"calibration.json"', toml, count=1))
    except RooflineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in mixed:
        blocked = r.get("t_blocked")
        extra = f"grouped {blocked * 1e6:.3f} us  switch {(r['t_graph'] - blocked) * 1e6:+.3f} us" if blocked else "no t_blocked"
        print(f"{r['op']:24s} {json.dumps(r['shape']):40s} interleaved {r['t_graph'] * 1e6:.3f} us  {extra}")
    print(f"fitted: graph_switch_s {models.graph_switch_s * 1e6:.3f} us, graph_switch_gemm_s {models.graph_switch_gemm_s * 1e6:.3f} us "
          f"(graph floor {models.graph_floor_s * 1e6:.3f} us); wrote {out / 'spec.toml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
