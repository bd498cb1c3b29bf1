"""CLI: ``roofline tune``, regenerate the committed tuned configs of the Triton kernels on a GPU
(``rooflinecli.bench.tuner``). torch, triton and the kernels are imported inside the command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rooflinecli.errors import one_line
from rooflinecli.cli.measure import Suite


def tune(
    kernel: Annotated[str | None, typer.Option("--kernel", "-k", help="Kernels whose cases to tune on, comma-separated (default: all).")] = None,
    suite: Annotated[Suite, typer.Option("--suite", help="The bench suite whose cases set the keys to tune.")] = Suite.full,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Tuned-config file, or a folder to write <gpu>-triton<version>.json in (kernels/tuned/ to update the shipped configs: written only when named).")] = None,
    time_budget_s: Annotated[float | None, typer.Option("--time-budget-s", help="Start no new case after this many seconds (what was tuned is written).")] = None,
    rounds: Annotated[int, typer.Option("--rounds", help="Interleaved rounds per config (>= 5): each round replays every config's graph once.")] = 7,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress or table.")] = False,
    report_out: Annotated[Path | None, typer.Option("--report", help="Also write every key's candidates (median us per config, failures) and the skipped cases as JSON here.")] = None,
) -> None:
    """Time every config of every autotuner the bench cases hit (CUDA graphs, interleaved
    repeats) and write the fastest (near-ties within 2% to the simpler config)."""
    from rooflinecli.bench.environment import require_cuda
    from rooflinecli.errors import RooflineError

    require_cuda("tune")
    if time_budget_s is not None and not time_budget_s > 0:
        raise RooflineError(f"--time-budget-s must be > 0, got {time_budget_s:g}")
    from rooflinecli.bench.runner import parse_kernels
    from rooflinecli.bench.tuner import run_tune

    def on_case(op: str, case_id: str, i: int, n: int) -> None:
        if not quiet:
            typer.echo(f"[{i + 1}/{n}] {op} {case_id}", err=True)

    report = run_tune(parse_kernels(kernel), suite.value, out=out, time_budget_s=time_budget_s, rounds=rounds, seed=seed, on_case=on_case)
    if report_out is not None:
        from dataclasses import asdict

        from rooflinecli.output import write_json_atomic

        write_json_atomic(report_out, {"schema": "rooflinecli.tune_report/1", **asdict(report)})
    if not quiet:
        for t in report.tuned:
            cfg = t["config"]
            typer.echo(f"{t['autotuner']} key={t['key']}: {cfg['kwargs']} w{cfg['num_warps']} s{cfg['num_stages']} {t['median_us']:.4g} us ({len(t['candidates_us'])} configs timed)")
        for s in report.skipped:
            typer.echo(f"skipped {s['op']} {s['case']}: {s['reason']}", err=True)
    typer.echo(f"wrote {one_line(report.path)} ({len(report.tuned)} keys tuned in {report.elapsed_s:.0f} s, {len(report.skipped)} cases skipped)")


def register(app: typer.Typer) -> None:
    app.command("tune")(tune)
