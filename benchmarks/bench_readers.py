"""How long the readers and checks take on big accepted files: a results file, a pooled baseline,
a calibration file, and the commands that read them (regress, baseline update into an empty
folder and as the third run of a baseline, validate).

Each file is made by repeating the rows of the committed H200 run (results) and calibration with
new shapes, so every row is one the readers accept. Prints seconds per step at each size and the
ratio to the smaller size (about 10x for 10x the rows is linear; 100x would be quadratic)::

    python benchmarks/bench_readers.py              # 10,000 and 100,000 rows
    python benchmarks/bench_readers.py --rows 20000 --samples 20
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "tests" / "fixtures" / "h200-2026-11-30" / "results.json"
CALIBRATION = ROOT / "hardware_specs" / "measured" / "h200-calibration.json"


def results_file(path: Path, n_rows: int, n_samples: int, run: int = 0) -> None:
    """``n_rows`` rows cycled from the committed run, each a new shape, ``n_samples`` samples each
    (the run's own, cycled; ``run`` > 0: another run of the same suite, each sample a little
    slower, a day later), quantiles as the bench writes them."""
    sys.path.insert(0, str(ROOT))
    from rooflinecli.results import quantiles_s

    doc = json.loads(RESULTS.read_text())
    base = [r for r in doc["rows"] if r.get("correct", True) and r["samples_s"]]
    rows = []
    for i in range(n_rows):
        r = dict(base[i % len(base)])
        s = r["samples_s"]
        r["samples_s"] = [s[j % len(s)] * (1 + 1e-3 * run * ((i + j) % 7)) for j in range(n_samples)]
        r["p20_s"], r["p50_s"], r["p80_s"] = quantiles_s(r["samples_s"])
        r["shape"] = f"{r['shape']}-v{i // len(base)}"
        rows.append(r)
    doc["rows"] = rows
    doc["extra"] = {}
    doc["created_utc"] = f"2026-12-{1 + run:02d}T00:00:00Z"
    path.write_text(json.dumps(doc))


def calibration_file(path: Path, n_rows: int) -> None:
    """The committed calibration with its GEMM rows repeated at new M until it holds ``n_rows`` rows."""
    doc = json.loads(CALIBRATION.read_text())
    gemms = [r for r in doc["rows"] if r["op"] == "gemm"]
    rows = list(doc["rows"])
    i = 0
    while len(rows) < n_rows:
        r = copy.deepcopy(gemms[i % len(gemms)])
        r["shape"] = {**r["shape"], "M": int(r["shape"]["M"]) + 1 + i // len(gemms)}
        rows.append(r)
        i += 1
    doc["rows"] = rows
    path.write_text(json.dumps(doc))


def timed(what: str, fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def cli(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "rooflinecli", *args], cwd=ROOT, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"roofline {' '.join(args)} exited {r.returncode}: {r.stderr.strip()[-400:]}")


def measure(n_rows: int, n_samples: int, folder: Path) -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    from rooflinecli.achievable.calibration import load_calibration
    from rooflinecli.gate.baseline import load_baseline
    from rooflinecli.results import load_results

    res, cand, cal = folder / f"r{n_rows}.json", folder / f"c{n_rows}.json", folder / f"cal{n_rows}.json"
    results_file(res, n_rows, n_samples)
    results_file(cand, n_rows, n_samples)
    calibration_file(cal, n_rows)
    bdir = folder / f"b{n_rows}"
    more = [folder / f"r{n_rows}-{k}.json" for k in (1, 2)]
    for k, p in enumerate(more, start=1):
        results_file(p, n_rows, n_samples, run=k)
    out = {
        "read results (s)": timed("read", lambda: load_results(res)),
        "read calibration (s)": timed("cal", lambda: load_calibration(str(cal))),
        "baseline update (s, CLI)": timed("update", lambda: cli("baseline", "update", str(res), "--dir", str(bdir))),
    }
    cli("baseline", "update", str(more[0]), "--dir", str(bdir))
    out["baseline update, 3rd run (s, CLI)"] = timed("update3", lambda: cli("baseline", "update", str(more[1]), "--dir", str(bdir)))
    bfile = next(bdir.glob("*.json"))
    out["read baseline (s)"] = timed("load", lambda: load_baseline(bfile))
    out["regress baseline vs run (s, CLI)"] = timed("regress", lambda: cli("regress", str(bfile), str(cand), "--impl", "all", "-q"))
    out["validate (s, CLI)"] = timed("validate", lambda: cli("validate", str(res), "--json"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000], help="row counts to time (ascending)")
    ap.add_argument("--samples", type=int, default=20, help="samples per results row")
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        table = {n: measure(n, args.samples, Path(tmp)) for n in args.rows}
    steps = list(next(iter(table.values())))
    print(f"{'step':<36}" + "".join(f"{f'{n:,} rows':>14}" for n in args.rows) + ("   ratio (last/first)" if len(args.rows) > 1 else ""))
    for s in steps:
        vals = [table[n][s] for n in args.rows]
        ratio = f"   {vals[-1] / vals[0]:.1f}x for {args.rows[-1] / args.rows[0]:.0f}x rows" if len(vals) > 1 and vals[0] > 0 else ""
        print(f"{s:<36}" + "".join(f"{v:>14.2f}" for v in vals) + ratio)


if __name__ == "__main__":
    main()
