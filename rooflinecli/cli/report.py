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
from rooflinecli.cli.achievable_options import EngineOption, ModeOption
from rooflinecli.cli.options import HwListOption, tokens_option


def report_cmd(
    model: Annotated[str, typer.Option("--model", help="Model preset id (see `roofline model list`) or a config.json path.")] = "llama-3-8b",
    hw: HwListOption = "h100-sxm",
    batch: Annotated[int, typer.Option("--batch", help="Sequences in flight.")] = 1,
    prompt: Annotated[int, tokens_option("--prompt", help="Prompt tokens per sequence (prefill).")] = 1024,
    gen: Annotated[int, tokens_option("--gen", help="Generated tokens per sequence.")] = 256,
    dtype: Annotated[str, typer.Option("--dtype", help="Compute dtype; the GPU's peak for it is used.")] = "bf16",
    weight_dtype: Annotated[str, typer.Option("--weight-dtype", help="Stored weights: bf16, fp16, fp32, fp8, int8, int4.")] = "bf16",
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="KV cache dtype.")] = "bf16",
    kv_bits: Annotated[Optional[float], typer.Option("--kv-bits", help="KV cache bits per element (overrides --kv-dtype).")] = None,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel GPUs.")] = 1,
    ep: Annotated[int, typer.Option("--ep", help="Expert-parallel GPUs (MoE models).")] = 1,
    efficiency: Annotated[Optional[str], typer.Option("--efficiency", help="Fraction of the roofline reached: 0.8 or gemm=0.8,attention=0.7,...")] = None,
    fitted_efficiency: Annotated[bool, typer.Option("--fitted-efficiency", help="Use the spec's fitted efficiency table (measured specs).")] = False,
    launch_overhead_us: Annotated[float, typer.Option("--launch-overhead-us", help="Fixed cost per kernel launch, microseconds.")] = 0.0,
    price_per_gpu_hour: Annotated[Optional[float], typer.Option("--price-per-gpu-hour", help="USD per GPU-hour.")] = None,
    kv_block_size: Annotated[Optional[int], typer.Option("--kv-block-size", help="Paged KV cache: tokens per block.")] = None,
    prefill_chunk: Annotated[int, tokens_option("--prefill-chunk", help="Memory: size the activation workspace for prefill chunks of this many tokens (0 = unchunked).")] = 8192,
    expert_skew: Annotated[float, typer.Option("--expert-skew", help="MoE routing skew >= 1: the hottest expert's load over the mean (1 = uniform).")] = 1.0,
    mla_decode: Annotated[str, typer.Option("--mla-decode", help="MLA decode form: absorbed or naive.")] = "absorbed",
    weight_group_size: Annotated[int, typer.Option("--weight-group-size", help="int4 weights: elements per 2-byte scale.")] = 128,
    results: Annotated[Optional[Path], typer.Option("--results", help="Measured results JSON (`roofline bench`): adds measured points and the validation table.")] = None,
    baseline: Annotated[Optional[Path], typer.Option("--baseline", help="Baseline results JSON: adds the comparison of the two runs (needs --results).")] = None,
    measured_hw: Annotated[Optional[str], typer.Option("--measured-hw", help="Measured spec (id or .toml) whose ceilings are drawn beside the datasheet ones; default: the one the results name.")] = None,
    mode: ModeOption = None,
    engine: EngineOption = "torch",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="HTML file to write; default reports/roofline-<model>-<gpu>.html.")] = None,
) -> None:
    """Write one self-contained HTML report (works offline) and print its path.

    Roofline chart with every op of prefill and decode, time breakdown, KV cache vs weights,
    memory vs batch, batch sweep, attention variants, MoE total vs active, GPUs side by side,
    and with --results / --baseline the validation table and the comparison of two runs.
    With no options: llama-3-8b on h100-sxm, batch 1, prompt 1024, gen 256.
    """
    from rooflinecli.analysis import Workload, parse_efficiency, validate_workload
    from rooflinecli.errors import RooflineError
    from rooflinecli.hardware import get_specs
    from rooflinecli.model_registry import get_model
    from rooflinecli.report import build_report_data, default_out_path, render_report, write_report
    from rooflinecli.results import load_results

    t0 = time.perf_counter()
    wl = Workload(
        batch=batch, prompt_len=prompt, gen_len=gen, compute_dtype=dtype, weight_dtype=weight_dtype, kv_dtype=kv_dtype, kv_bits=kv_bits,
        weight_group_size=weight_group_size, tp=tp, ep=ep, efficiency=parse_efficiency(efficiency), launch_overhead_s=launch_overhead_us * 1e-6,
        expert_skew=expert_skew, kv_block_size=kv_block_size, prefill_chunk_tokens=prefill_chunk or None, price_per_gpu_hour=price_per_gpu_hour, use_fitted_efficiency=fitted_efficiency,
        mla_decode=mla_decode, engine=engine,
    )
    validate_workload(wl)
    if baseline is not None and results is None:
        raise RooflineError("--baseline needs --results: the baseline is compared with the results run")
    if out is not None and out.exists() and out.is_dir():
        raise RooflineError(f"--out {out}: is a folder; give a file name such as {out / 'report.html'}")
    from rooflinecli.output import model_and_spec_files, refuse_overwriting_inputs
    from rooflinecli.hardware import get_spec

    refuse_overwriting_inputs({"--results": results, "--baseline": baseline}, {"--out": out})
    cfg, specs = get_model(model), get_specs(hw)
    measured = get_spec(measured_hw) if measured_hw is not None else None
    refuse_overwriting_inputs(model_and_spec_files([cfg], [*specs, measured]), {"--out": out})
    res = load_results(results) if results is not None else None
    base = load_results(baseline) if baseline is not None else None
    inputs = {
        "--model": model,
        "--hw": hw,
        "--results": str(results) if results else None,
        "--baseline": str(baseline) if baseline else None,
        "--measured-hw": measured_hw,
    }
    data = build_report_data(cfg, specs, wl, inputs={k: v for k, v in inputs.items() if v is not None}, results=res, baseline=base, measured_spec=measured_hw, mode=mode)
    for w in data["warnings"]:
        typer.echo(f"warning: {w}", err=True)
    path = out if out is not None else default_out_path(model, [s.id for s in specs])
    try:
        written = write_report(render_report(data), path, make_parents=out is None)
    except OSError as e:
        raise RooflineError(f"--out {path}: cannot write: {e.strerror or e}") from None
    size = written.stat().st_size
    typer.echo(f"wrote {one_line(written)} ({size / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s)")


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)
