"""Measure the figures the README and docs quote, and write them everywhere they are quoted.

    python scripts/figures.py            # measure, write docs/figures.json, rewrite the quotes
    python scripts/figures.py --check    # no measuring: exit 1 if a quote differs from docs/figures.json

A quoted figure is marked in the Markdown as ``<!--fig:NAME-->VALUE<!--/fig-->`` (the markers do not
render), so README.md and docs/*.md cannot quote different numbers for the same measurement.
Figures: the issue's sweep grid (``benchmarks/bench_sweep.py``: 2,097,152 rows to Parquet) and
the start-up of ``model show``, ``hw list`` and ``analyze --no-ops`` beside a bare
``import typer, rich`` (``benchmarks/bench_startup.py``), each a median of fresh processes, with
the machine's CPU count and load average recorded beside them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures.json"
MARK = re.compile(r"<!--fig:([a-z0-9_]+)-->(.*?)<!--/fig-->")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def measure_sweep(runs: int) -> tuple[float, float]:
    """(median wall s, median CPU s) of the issue's sweep grid, fresh processes."""
    command = _load("bench_sweep").COMMAND
    out = os.path.join(tempfile.gettempdir(), "rooflinecli-figures-sweep.parquet")
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rooflinecli", *command, "--out", out], check=True, capture_output=True)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    os.unlink(out)
    return statistics.median(walls), statistics.median(cpus)


def measure(runs_sweep: int, runs_startup: int) -> dict[str, str]:
    """Every figure as the text the docs print (``1.34 s``)."""
    sweep_wall, sweep_cpu = measure_sweep(runs_sweep)
    s = _load("bench_startup").measure(runs_startup)
    c = s["commands"]
    fig = {
        "sweep_wall_s": f"{sweep_wall:.2f} s",
        "sweep_cpu_s": f"{sweep_cpu:.2f} s",
        "startup_floor_s": f"{s['bare_import_typer_rich_median_s']:.2f} s",
        "startup_typer_app_s": f"{s['typer_app_median_s']:.2f} s",
        "startup_model_show_s": f"{c['model show llama-3-70b --json']['median_s']:.2f} s",
        "startup_model_show_cpu_s": f"{c['model show llama-3-70b --json']['cpu_median_s']:.2f} s",
        "startup_hw_list_s": f"{c['hw list']['median_s']:.2f} s",
        "startup_analyze_s": f"{c['analyze --no-ops']['median_s']:.2f} s",
        "startup_analyze_cpu_s": f"{c['analyze --no-ops']['cpu_median_s']:.2f} s",
    }
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    fig["machine"] = f"{os.cpu_count()} CPUs, load average {load:.1f}"
    return fig


def quotes() -> list[tuple[Path, str, str]]:
    """(file, figure name, quoted value) of every marked figure in README.md and docs/*.md."""
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for name, value in MARK.findall(path.read_text(encoding="utf-8")):
            out.append((path, name, value))
    return out


def rewrite(figures: dict[str, str]) -> list[Path]:
    from rooflinecli.output import write_text_atomic

    changed = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")

        def sub(m: re.Match) -> str:
            if m.group(1) not in figures:
                raise SystemExit(f"error: {path}: unknown figure '{m.group(1)}'; known: {', '.join(sorted(figures))}")
            return f"<!--fig:{m.group(1)}-->{figures[m.group(1)]}<!--/fig-->"

        new = MARK.sub(sub, text)
        if new != text:
            write_text_atomic(path, new)
            changed.append(path)
    return changed


def mismatches(figures: dict[str, str]) -> list[str]:
    return [f"{p.relative_to(ROOT)}: {name} quotes '{value}', docs/figures.json has '{figures.get(name)}'"
            for p, name, value in quotes() if figures.get(name) != value]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare the quotes with docs/figures.json; measure nothing")
    ap.add_argument("--runs-sweep", type=int, default=3)
    ap.add_argument("--runs-startup", type=int, default=11)
    args = ap.parse_args()
    if args.check:
        bad = mismatches(json.loads(FIGURES.read_text(encoding="utf-8")))
        for line in bad:
            print(line)
        return 1 if bad else 0
    figures = measure(args.runs_sweep, args.runs_startup)
    from rooflinecli.output import write_json_atomic

    write_json_atomic(FIGURES, figures)
    for path in rewrite(figures):
        print(f"updated {path.relative_to(ROOT)}")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
