"""CLI: ``roofline report``: one offline HTML file with interactive roofline plots of a model on
one or more GPUs, and, given measured results (and a baseline), their validation and comparison.

Thin: parse, call ``rooflinecli.report``, print the path written. plotly is imported inside the
command (by ``render_report``), never at import time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from rooflinecli.errors import one_line
from rooflinecli.cli.options import HwListOption, forgive_gpu_names
from rooflinecli.cli.workload_options import DEFAULT_WORKLOAD, SHARED, Prices, workload_from_options, workload_options


@workload_options
def report_cmd(
    model=SHARED, hw: HwListOption = DEFAULT_WORKLOAD.hw, batch=SHARED, prompt=SHARED, gen=SHARED, dtype=SHARED, weight_dtype=SHARED,
    kv_dtype=SHARED, kv_bits=SHARED, tp=SHARED, ep=SHARED, efficiency=SHARED, launch_overhead_us=SHARED,
    price=SHARED, kv_block_size=SHARED, prefill_chunk=SHARED, expert_skew=SHARED, mla_decode=SHARED, weight_group_size=SHARED,
    results: Annotated[Optional[Path], typer.Option("--results", help="Measured results JSON (`roofline bench`): adds measured points and the validation table.")] = None,
    baseline: Annotated[Optional[Path], typer.Option("--baseline", help="Baseline results JSON: adds the comparison of the two runs (needs --results).")] = None,
    measured_hw: Annotated[Optional[str], typer.Option("--measured-hw", help="Measured spec (id or .toml) whose ceilings are drawn beside the datasheet ones; default: the one the results name.",
                                                           parser=forgive_gpu_names, metavar="GPU")] = None,
    mode=SHARED,
    engine=SHARED,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="HTML file to write; default reports/roofline-<model>-<gpu>.html.")] = None,
    serving: Annotated[bool, typer.Option("--serving", help="Add the serving section: the frontier on one node and TTFT/TPOT against load (`roofline serve`).")] = False,
) -> None:
    """Write one self-contained HTML report (works offline) and print its path.

    Roofline chart with every op of prefill and decode, time breakdown, KV cache vs weights,
    memory vs batch, batch sweep, attention variants, MoE total vs active, GPUs side by side,
    and with --results / --baseline the validation table and the comparison of two runs.
    With no options: llama-3-8b on h100-sxm, batch 1, prompt 1024, gen 256.
    """
    from rooflinecli.errors import RooflineError
    from rooflinecli.hardware import get_specs
    from rooflinecli.model_registry import get_model
    from rooflinecli.report import build_report_data, default_out_path, render_report, write_report
    from rooflinecli.results import load_results

    t0 = time.perf_counter()
    wl = workload_from_options(
        batch=batch, prompt=prompt, gen=gen, dtype=dtype, weight_dtype=weight_dtype, kv_dtype=kv_dtype, kv_bits=kv_bits, tp=tp, ep=ep,
        efficiency=efficiency, launch_overhead_us=launch_overhead_us, kv_block_size=kv_block_size,
        prefill_chunk=prefill_chunk, expert_skew=expert_skew, mla_decode=mla_decode, weight_group_size=weight_group_size, engine=engine,
    )
    if baseline is not None and results is None:
        raise RooflineError("--baseline needs --results: the baseline is compared with the results run")
    if out is not None and out.exists() and out.is_dir():
        raise RooflineError(f"--out {out}: is a folder; give a file name such as {out / 'report.html'}")
    from rooflinecli.cli.options import model_and_spec_files
    from rooflinecli.output import refuse_overwriting_inputs
    from rooflinecli.hardware import get_spec

    for option, path in (("--results", results), ("--baseline", baseline)):
        if path is not None and not path.is_file():
            raise RooflineError(f"{option} {one_line(path)}: no such results file")
    refuse_overwriting_inputs({"--results": results, "--baseline": baseline}, {"--out": out})
    cfg, specs = get_model(model), get_specs(hw)
    prices = price or Prices()
    prices.check_gpus(specs)
    measured = get_spec(measured_hw) if measured_hw is not None else None
    refuse_overwriting_inputs(model_and_spec_files([cfg], [*specs, measured]), {"--out": out})
    from dataclasses import replace

    from rooflinecli.cli.workload_options import checkpoint_workload, tokens_within_trained_context

    fitted, fit_note = tokens_within_trained_context(cfg, prompt=wl.prompt_len, gen=wl.gen_len)
    wl = replace(wl, prompt_len=fitted["prompt"], gen_len=fitted["gen"])
    wl, dtype_notes = checkpoint_workload(cfg, wl, specs)
    res = load_results(results) if results is not None else None
    base = load_results(baseline) if baseline is not None else None
    inputs = {
        "--model": model,
        "--hw": hw,
        "--results": str(results) if results else None,
        "--baseline": str(baseline) if baseline else None,
        "--measured-hw": measured_hw,
        "--serving": True if serving else None,
    }
    data = build_report_data(cfg, specs, wl, inputs={k: v for k, v in inputs.items() if v is not None}, results=res, baseline=base, measured_spec=measured_hw, mode=mode,
                             price_for=prices.for_gpu, serving=serving)
    for w in data["warnings"]:
        typer.echo(f"warning: {w}", err=True)
    path = out if out is not None else default_out_path(model, [s.id for s in specs])
    try:
        written = write_report(render_report(data), path, make_parents=out is None)
    except OSError as e:
        raise RooflineError(f"--out {path}: cannot write: {e.strerror or e}") from None
    size = written.stat().st_size
    for note in ([fit_note] if fit_note else []) + [f"note: {n}" for n in dtype_notes]:  # once written: an error stays one line
        typer.echo(note, err=True)
    typer.echo(f"wrote {one_line(written)} ({size / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s)")


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)
