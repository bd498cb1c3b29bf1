"""Start-up time of the analytical commands: median wall time over fresh processes of

    roofline model show llama-3-70b --json
    roofline hw list
    roofline analyze --no-ops

beside a bare ``python -c "import typer, rich"`` (the floor any Typer + Rich CLI pays), with the
ratio of each to that floor. Target: every median < 0.25 s.

    python benchmarks/bench_startup.py [--runs 11] [--target-s 0.25] [--json]

Runs ``python -m rooflinecli`` with the interpreter running this script, so it measures the
installed package without depending on the ``roofline`` script being on PATH. CPU time (user +
system) is printed too: on a shared machine it shows what the command costs when other jobs
inflate the wall time. Exits 1 when a median misses the target.

Every process runs from a bytecode cache (PYTHONPYCACHEPREFIX in a temporary folder, filled by a
warm-up run), as a pip-installed package does, even where PYTHONDONTWRITEBYTECODE is set (which
would recompile the package's modules in every run, ~0.03 s); ``--no-bytecode-cache`` measures
with the environment as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("model", "show", "llama-3-70b", "--json"),
    ("hw", "list"),
    ("analyze", "--no-ops"),
)
BARE = (sys.executable, "-c", "import typer, rich")
#: a one-option Typer app that runs: what Typer itself costs at run time beyond its import (typer
#: 0.29 builds each option's converter with pydantic, about 0.1 s of CPU before any command code)
TYPER_APP = (sys.executable, "-c", "import typer\napp = typer.Typer()\n@app.command()\ndef f(x: int = 1): pass\napp(['--x', '2'])")


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(runs: int, bytecode_cache: bool = True) -> dict:
    """Medians of every command and of the bare import, interleaved run by run so that a burst of
    load from other jobs hits all of them alike; ``bytecode_cache``: from a bytecode cache of their
    own (see the module's doc), else with the environment as it is."""
    with tempfile.TemporaryDirectory(prefix="bench-startup-pyc-") as pyc:
        env = None
        if bytecode_cache:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPYCACHEPREFIX"] = pyc
        m = _measure(runs, env)
    m["bytecode_cache"] = bytecode_cache
    return m


def _measure(runs: int, env: dict[str, str] | None) -> dict:
    cmds = {"import typer, rich": BARE, "one-option typer app": TYPER_APP, **{" ".join(c): (sys.executable, "-m", "rooflinecli", *c) for c in COMMANDS}}
    for cmd in cmds.values():
        subprocess.run(cmd, check=True, capture_output=True, env=env)  # warm-up: file cache, .pyc files
    wall: dict[str, list[float]] = {k: [] for k in cmds}
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            w, c = time_runs_once(cmd, env)
            wall[name].append(w)
            cpu[name].append(c)
    bare = statistics.median(wall["import typer, rich"])
    return {
        "runs": runs,
        "bare_import_typer_rich_median_s": bare,
        "bare_import_typer_rich_cpu_median_s": statistics.median(cpu["import typer, rich"]),
        "typer_app_median_s": statistics.median(wall["one-option typer app"]),
        "typer_app_cpu_median_s": statistics.median(cpu["one-option typer app"]),
        "commands": {
            name: {"median_s": statistics.median(wall[name]), "cpu_median_s": statistics.median(cpu[name]),
                   "ratio_to_bare": statistics.median(wall[name]) / bare}
            for name in cmds if name not in ("import typer, rich", "one-option typer app")
        },
    }


def time_runs_once(cmd, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh process."""
    c0, t0 = _children_cpu_s(), time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - t0, _children_cpu_s() - c0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--target-s", type=float, default=0.25)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--no-bytecode-cache", action="store_true", help="run with the environment as it is (no bytecode cache of its own)")
    args = ap.parse_args()
    m = measure(args.runs, bytecode_cache=not args.no_bytecode_cache)
    m["target_s"] = args.target_s
    if args.json:
        print(json.dumps(m, indent=2))
    else:
        cache = "from a bytecode cache" if m["bytecode_cache"] else "environment as it is"
        print(f"start-up, median of {args.runs} fresh processes, {cache} (target < {args.target_s} s)")
        bare = 'python -c "import typer, rich"'
        print(f"  {bare:<40} {m['bare_import_typer_rich_median_s']:.3f} s  (the floor; CPU {m['bare_import_typer_rich_cpu_median_s']:.3f} s)")
        app = "a one-option typer app"
        print(f"  {app:<40} {m['typer_app_median_s']:.3f} s  (Typer's run-time cost; CPU {m['typer_app_cpu_median_s']:.3f} s)")
        for name, r in m["commands"].items():
            print(f"  roofline {name:<31} {r['median_s']:.3f} s  {r['ratio_to_bare']:.2f}x the floor  (CPU {r['cpu_median_s']:.3f} s)")
    return 0 if all(r["median_s"] < args.target_s for r in m["commands"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
