"""CLI: ``roofline regress`` (the CI performance gate), ``roofline baseline ...`` (per-GPU pooled
baselines) and ``roofline golden`` (the analytical model's golden predictions)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rooflinecli.console import TABLE_MAX_ROWS
from rooflinecli.errors import RooflineError, one_line


def _console():
    from rooflinecli.console import make_console

    return make_console(soft_wrap=False)


def regress(
    baseline: Annotated[Path, typer.Argument(help="Baseline results JSON (a run, or a pooled per-GPU baseline).")],
    candidate: Annotated[Path, typer.Argument(help="Candidate results JSON.")],
    threshold: Annotated[str, typer.Option("--threshold", help="Minimum relative slowdown that counts: '5%' or '0.05'.")] = "5%",
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level, after Holm correction across kernels.")] = 0.01,
    min_abs_us: Annotated[float, typer.Option("--min-abs-us", help="Minimum absolute slowdown that counts, microseconds.")] = 1.0,
    impl: Annotated[str, typer.Option("--impl", help="Impls to compare: 'triton' (ours), 'torch', a comma list, or 'all'.")] = "triton",
    markdown: Annotated[Optional[Path], typer.Option("--markdown", help="Write Markdown (PR comment) here.")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Write JUnit XML here.")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write the JSON report here.")] = None,
    allow_hardware_mismatch: Annotated[bool, typer.Option("--allow-hardware-mismatch", help="Compare runs from different GPU models anyway.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Unstable rows (bimodal, spread changed, host-timed) fail the gate (exit 1).")] = False,
    allow_missing: Annotated[bool, typer.Option("--allow-missing", help="Baseline rows missing from the candidate do not fail the gate (still listed).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the summary line.")] = False,
    max_rows: Annotated[int, typer.Option("--max-rows", help="Rows the terminal table shows, most severe first (0: all); --json, --markdown and --junit hold every row.")] = TABLE_MAX_ROWS,
) -> None:
    """Compare two benchmark runs; exit 0 pass, 1 regression (or a failed check, a missing row, --strict unstable), 2 error.

    Regression = slowdown > max(threshold, 2 x noise) AND Holm-corrected one-sided Mann-Whitney
    p < alpha AND slowdown >= min-abs-us. Unstable rows (bimodal samples, spread changed >= 3x,
    host-timed) and changed tuned configs get their own verdicts. Markdown is also appended to
    $GITHUB_STEP_SUMMARY when set.
    """
    from rooflinecli.output import exit_on_closed_pipe, refuse_overwriting_inputs
    from rooflinecli.results import load_results, load_results_in_background

    if max_rows < 0:
        raise RooflineError(f"--max-rows must be >= 0 (0 shows every row), got {max_rows}")
    inputs = {"the baseline": baseline, "the candidate": candidate}
    refuse_overwriting_inputs(inputs, {"--markdown": markdown, "--junit": junit, "--json": json_out})
    later = load_results_in_background(candidate, beside=baseline)  # big files: read on a second core, before numpy starts threads
    try:
        from rooflinecli.gate.decision import GateParams, compare, parse_impls, parse_threshold
        from rooflinecli.gate.render import render_table, write_outputs

        params = GateParams(threshold=parse_threshold(threshold), alpha=alpha, min_abs_s=min_abs_us * 1e-6, impls=parse_impls(impl),
                            strict=strict, allow_missing=allow_missing)
        base = load_results(baseline)
        cand = later.result()
    finally:
        later.cancel()
    rep = compare(base, cand, params, allow_hardware_mismatch=allow_hardware_mismatch)
    exit_on_closed_pipe(rep.exit_code)  # `regress ... | head` still fails on a regression
    if quiet:
        typer.echo(rep.summary_line())
    else:
        render_table(rep, _console(), max_rows)
    for p in write_outputs(rep, markdown=markdown, junit=junit, json_path=json_out, inputs=inputs):
        typer.echo(f"wrote {one_line(p)}")
    raise typer.Exit(rep.exit_code)


baseline_app = typer.Typer(help="Per-GPU baselines pooled over the last K benchmark runs (reports/baselines/<gpu>.json).", no_args_is_help=True)


@baseline_app.command("update")
def baseline_update(
    results: Annotated[Path, typer.Argument(help="A benchmark run's results JSON.")],
    directory: Annotated[Path, typer.Option("--dir", help="Baselines folder.")] = Path("reports/baselines"),
    keep: Annotated[int, typer.Option("--keep", help="Pool the newest K runs.")] = 5,
) -> None:
    """Add a run to its GPU's baseline and re-pool: median of the runs' medians, samples concatenated."""
    from rooflinecli.errors import MAX_USER_FILE_BYTES
    from rooflinecli.gate.baseline import update_baseline

    out = update_baseline(results, directory, keep)
    what = "added" if out.added else "already present (not added twice)"
    typer.echo(f"{out.path}: run {what}; pooling {out.runs} run(s), {out.rows} row(s)"
               + (f"; {out.dropped} old run(s) dropped" if out.dropped else "")
               + (f"; {out.dropped_for_size} older run(s) dropped to keep the file under the results-file limit ({MAX_USER_FILE_BYTES:,} bytes)" if out.dropped_for_size else "")
               + (f"; {out.skipped_incorrect} row(s) that failed correctness left out" if out.skipped_incorrect else ""))


@baseline_app.command("show")
def baseline_show(
    gpu: Annotated[Optional[str], typer.Argument(help="A baseline file, GPU slug or GPU name; omit to list all.")] = None,
    directory: Annotated[Path, typer.Option("--dir", help="Baselines folder.")] = Path("reports/baselines"),
) -> None:
    """List the baselines, or show one baseline's pooled rows."""
    from rich.table import Table
    from rich.text import Text

    from rooflinecli import stats
    from rooflinecli.gate.baseline import list_baselines, load_baseline, resolve_baseline
    from rooflinecli.gate.render import kernel, text, us

    con = _console()
    if gpu is None:
        infos = list_baselines(directory)
        if not infos:
            typer.echo(f"no baselines in {one_line(directory)}")
            return
        t = Table(title=Text(f"baselines in {one_line(directory)}"), title_justify="left")
        for col in ("file", "gpu", "runs", "keep", "rows", "updated (UTC)"):
            t.add_column(col)
        for b in infos:
            t.add_row(Text(text(b.path.name)), Text(text(b.gpu_name)), str(len(b.runs)), str(b.keep), str(len(b.results.rows)), Text(text(b.updated_utc)))
        con.print(t)
        return
    b = load_baseline(resolve_baseline(gpu, directory))
    con.print(Text(f"{text(b.path)}: {text(b.gpu_name)}, {len(b.runs)} run(s) pooled (keep {b.keep}), updated {text(b.updated_utc)}"))
    for r in b.runs:
        con.print(Text(f"  run {text(r['created_utc'])} from {text(r['source'])} ({r['rows']} rows, id {text(r['fingerprint'])})"))
    t = Table(title_justify="left")
    t.add_column(Text("kernel (op shape dtype [impl])"), overflow="fold", min_width=24)
    for col in ("p50 (us)", "p20 (us)", "p80 (us)", "noise", "samples"):
        t.add_column(col, justify="right", no_wrap=True)
    for r in b.results.rows:
        t.add_row(Text(kernel(r.key)), us(r.p50_s), us(r.p20_s), us(r.p80_s),
                  f"{float(stats.relative_iqr(r.samples_s)):.1%}", str(len(r.samples_s)))
    con.print(t)


@baseline_app.command("path")
def baseline_path_cmd(
    results: Annotated[Path, typer.Argument(help="A results JSON; prints the baseline file for its GPU.")],
    directory: Annotated[Path, typer.Option("--dir", help="Baselines folder.")] = Path("reports/baselines"),
) -> None:
    """Print the baseline file that belongs to a run's GPU (for CI scripts)."""
    from rooflinecli.gate.baseline import baseline_path_for
    from rooflinecli.results import load_results

    typer.echo(str(baseline_path_for(load_results(results), directory)))


def golden(
    update: Annotated[bool, typer.Option("--update", help="Rewrite the golden file from the current model.")] = False,
    path: Annotated[Optional[Path], typer.Option("--path", help="Golden file (default: tests/golden/predictions.json).")] = None,
) -> None:
    """Check (default) or regenerate the analytical model's golden predictions; exit 1 when they moved."""
    from rooflinecli.gate import golden as g

    target = path or g.default_path()
    if update:
        data = g.write_golden(target)
        typer.echo(f"wrote {one_line(target)} ({len(data['entries'])} entries)")
        return
    moved = g.check_golden(target)
    if moved:
        for line in moved:
            typer.echo(line)
        typer.echo(f"{len(moved)} golden number(s) moved; if intended, regenerate with: {g.REGENERATE_COMMAND}")
        raise typer.Exit(1)
    typer.echo(f"{target}: all golden predictions unchanged")


def register(app: typer.Typer) -> None:
    app.command("regress")(regress)
    app.add_typer(baseline_app, name="baseline")
    app.command("golden")(golden)
