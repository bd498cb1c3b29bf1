"""CLI: ``roofline analyze``: one model, one GPU, one workload: TTFT, TPOT, latency, throughput,
cost, memory and a per-op roofline table for prefill and decode (``rooflinecli.analysis``)."""

from __future__ import annotations

import json
import math
from typing import Annotated

import typer

from rooflinecli.fmt import fmt_num, json_default
from rooflinecli.cli.options import HwOption, JsonOption
from rooflinecli.cli.workload_options import DEFAULT_WORKLOAD, SHARED, Prices, workload_from_options, workload_options


def _fmt():
    from rooflinecli.fmt import fmt_bytes, fmt_count, fmt_time

    return fmt_bytes, fmt_time, fmt_count


@workload_options
def analyze_cmd(
    model=SHARED, hw: HwOption = DEFAULT_WORKLOAD.hw, batch=SHARED, prompt=SHARED, gen=SHARED, dtype=SHARED, weight_dtype=SHARED,
    kv_dtype=SHARED, kv_bits=SHARED, tp=SHARED, ep=SHARED, efficiency=SHARED, launch_overhead_us=SHARED,
    price=SHARED, kv_block_size=SHARED, prefill_chunk=SHARED, expert_skew=SHARED, mla_decode=SHARED, weight_group_size=SHARED,
    mode=SHARED, engine=SHARED,
    ops: Annotated[bool, typer.Option("--ops/--no-ops", help="Print the per-op tables.")] = True,
    as_json: JsonOption = False,
) -> None:
    """How fast a model should run: prefill (TTFT) and decode (TPOT) on the roofline, per op.

    Defaults: llama-3-8b on h100-sxm, batch 1, prompt 1024, gen 256. On a datasheet spec: the pure
    roofline (efficiency 1.0, no launch overhead). On a calibrated spec (--hw h200-measured): the
    achievable times of the calibrated vendor-kernel model, roof beside (--mode roof for the roof
    alone). Times are per GPU of a replica of max(--tp, --ep) GPUs.
    """
    from dataclasses import replace

    from rooflinecli.cli.workload_options import checkpoint_workload, tokens_within_trained_context
    from rooflinecli.predict import analyze, resolve_mode
    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_model

    wl = workload_from_options(  # input errors first, before loading anything
        batch=batch, prompt=prompt, gen=gen, dtype=dtype, weight_dtype=weight_dtype, kv_dtype=kv_dtype, kv_bits=kv_bits, tp=tp, ep=ep,
        efficiency=efficiency, launch_overhead_us=launch_overhead_us, kv_block_size=kv_block_size,
        prefill_chunk=prefill_chunk, expert_skew=expert_skew, mla_decode=mla_decode, weight_group_size=weight_group_size, engine=engine,
    )
    cfg, spec = get_model(model), get_spec(hw)
    if price is not None:
        price.check_gpus([spec])
    wl = replace(wl, mode=resolve_mode(spec, mode, engine), price_per_gpu_hour=(price or Prices()).for_gpu(spec))
    fitted, fit_note = tokens_within_trained_context(cfg, prompt=wl.prompt_len, gen=wl.gen_len)
    wl = replace(wl, prompt_len=fitted["prompt"], gen_len=fitted["gen"])
    wl, dtype_notes = checkpoint_workload(cfg, wl, [spec])
    a = analyze(cfg, spec, wl)
    if fit_note:  # once the analysis stands: an input error stays one line
        typer.echo(fit_note, err=True)
    for w in a.warnings:
        typer.echo(f"warning: {w}", err=True)
    if cfg.vision is not None:  # multimodal: the language model is what is timed
        typer.echo(f"note: {cfg.name}: {cfg.vision.note}", err=True)
    if as_json:
        from rooflinecli.fmt import json_dumps

        typer.echo(json_dumps({**a.to_json(), "dtype_notes": dtype_notes}))
        return
    render(a, show_ops=ops, notes=dtype_notes)


#: columns a narrow terminal leaves out first (the per-op time, share and bound stay)
OPS_OPTIONAL = ("act", "L", "KV r+w", "weights")
ACHIEVABLE_OPTIONAL = ("L", "kernels/L", "fixed cost", "beyond roof")


def _ops_table(console, title: str, phase, fmt_bytes, fmt_time, fmt_count):
    from rich import box

    from rooflinecli.console import fit_table

    cols = ["op", "L", "FLOPs", "weights", "KV r+w", "act", "AI FLOP/B", "time", "%", "bound"]
    total = phase.time_s or 1.0

    def b(x):
        return fmt_bytes(x) if x else "-"

    rows = []
    for r in phase.ops:
        ai = "-" if r.arithmetic_intensity_flop_per_byte is None else fmt_num(r.arithmetic_intensity_flop_per_byte)
        rows.append([
            r.name, str(r.layers), fmt_count(r.flops) if r.flops else "-", b(r.weights_bytes), b(r.kv_read_bytes + r.kv_write_bytes),
            b(r.activation_bytes), ai, fmt_time(r.time_s), f"{r.time_s / total:.1%}", r.bound,
        ])
    tt = phase.totals
    rows.append([
        "total", "", fmt_count(tt["flops"]), b(tt["weights_bytes"]), b(tt["kv_read_bytes"] + tt["kv_write_bytes"]), b(tt["activation_bytes"]),
        fmt_num(tt["flops"] / tt["bytes"]) if tt["bytes"] else "-", fmt_time(tt["time_s"]), "100%", phase.bound,
    ])
    return fit_table(console, title, cols, rows, styles=[None] * (len(rows) - 1) + ["bold"], optional=OPS_OPTIONAL,
                     box=box.SIMPLE_HEAD, pad_edge=False)


def _achievable_table(console, title: str, rows: list[dict], roof_total_s: float, fmt_time):
    """Where a phase's time goes beyond the roof: per op, roof and achievable time, the fixed
    costs inside it, the efficiency of the rest (roof / (achievable - fixed)), kernels, excess."""
    from rich import box

    from rooflinecli.console import fit_table

    cols = ["op", "L", "kernels/L", "roof time", "achievable", "fixed cost", "efficiency past fixed", "beyond roof", "%"]
    total = sum(r["time_s"] for r in rows) or 1.0
    cells = []
    for r in rows:
        eff = "-" if not r["roof_time_s"] or r["efficiency"] is None else f"{r['efficiency']:.2f}"
        cells.append([
            r["name"], str(r["layers"]), str(r["kernels_per_layer"]), fmt_time(r["roof_time_s"]) if r["roof_time_s"] else "-",
            fmt_time(r["time_s"]), fmt_time(r["fixed_s"]), eff, fmt_time(r["time_s"] - r["roof_time_s"]), f"{r['time_s'] / total:.1%}",
        ])
    kernels = sum(r["kernels_per_layer"] * r["layers"] for r in rows)
    fixed = sum(r["fixed_s"] for r in rows)
    cells.append(["total", "", f"{kernels:,} in all", fmt_time(roof_total_s), fmt_time(total), fmt_time(fixed), "",
                  fmt_time(total - roof_total_s), "100%"])
    return fit_table(console, title, cols, cells, styles=[None] * (len(cells) - 1) + ["bold"], optional=ACHIEVABLE_OPTIONAL,
                     box=box.SIMPLE_HEAD, pad_edge=False)


def render(a, show_ops: bool = True, notes: tuple[str, ...] | list[str] = ()) -> None:
    """Rich summary and per-op tables of an ``Analysis``."""
    from rooflinecli.console import make_console

    fmt_bytes, fmt_time, fmt_count = _fmt()
    from rooflinecli.errors import markup_safe

    c = make_console(markup=True)  # long lines wrap at words within the console's width
    from rooflinecli.quant import weights_label

    wl, cfg, spec = a.workload, a.model, a.spec
    par = f", TP {wl.tp}" + (f", EP {wl.ep}" if wl.ep > 1 else "") + f" over {wl.num_gpus} GPUs" if wl.num_gpus > 1 else ""
    c.print(
        f"[bold]{markup_safe(cfg.name)}[/] on [bold]{markup_safe(spec.id)}[/] ({spec.kind}){par}: batch {wl.batch}, prompt {wl.prompt_len:,}, gen {wl.gen_len:,}; "
        f"{wl.compute_dtype} compute, {weights_label(cfg, wl)} weights, KV {wl.kv_label}"
    )
    for note in notes:  # where the compute and KV dtypes come from, when the checkpoint has its own
        c.print(markup_safe(note))
    ach = a.mode == "achievable"
    eff = ", ".join(f"{k}={v:g}" for k, v in wl.efficiency.items()) or "1.0 (pure roofline)"
    if ach:
        eff = "1.0 for the roof; the achievable times use the calibrated models"
    rspec = a.roof_spec or spec
    c.print(
        f"ridge point {a.ridge_point_flop_per_byte:.0f} FLOP/B ({rspec.peak_flops_per_s(wl.compute_dtype) / 1e12:.0f} TFLOP/s / "
        f"{rspec.memory_bandwidth_bytes_per_s / 1e12:.3g} TB/s); efficiency {eff}"
        + (f"; launch overhead {wl.launch_overhead_s * 1e6:g} us/kernel" if wl.launch_overhead_s else "")
    )
    if ach:
        from pathlib import Path

        cal = a.calibration or {}
        c.print(f"mode achievable: engine {a.engine}, calibrated on {cal.get('gpu', '?')} ({cal.get('created_utc', '?')[:10]}, {Path(cal.get('path', '?')).name}); the roof beside")
        from rooflinecli.predict import roof_bandwidth_source

        source = roof_bandwidth_source(spec, a.engine)
        if rspec.memory_bandwidth_gb_per_s != spec.memory_bandwidth_gb_per_s or "left out" in source:
            c.print(f"roof beside: the measured roof, HBM {rspec.memory_bandwidth_gb_per_s:,.0f} GB/s "
                    f"({source}; the spec's copy: {spec.memory_bandwidth_gb_per_s:,.0f})", markup=False)
        for note in cal.get("notes", []):
            c.print(f"calibration: {note}", markup=False)
    elif a.mode == "datasheet" and spec.kind == "measured":
        c.print(f"mode datasheet: pure roofline on the datasheet figures of {spec.id}'s base ({rspec.id})")
    elif a.mode == "datasheet":
        from rooflinecli.achievable import IMPORTED_ENGINES, calibrated_engines

        engines = sorted((e for e, _ in calibrated_engines(spec)), key=lambda e: (IMPORTED_ENGINES + (e,)).index(e))
        if engines:
            c.print(f"mode datasheet: pure roofline on datasheet figures; calibrated engines on {spec.id}: {', '.join(engines)} "
                    f"(--engine {engines[0]} gives achievable times)")
        else:
            c.print("mode datasheet: pure roofline on datasheet figures; no calibration (a calibrated spec such as h200-measured gives achievable times)")
    else:
        from rooflinecli.predict import roof_bandwidth_source

        c.print(f"mode measured-roof: roofline on {spec.id}'s measured roof (sustained peaks; HBM "
                f"{rspec.memory_bandwidth_gb_per_s:,.0f} GB/s: {roof_bandwidth_source(spec, wl.engine)})", markup=False)

    def beside(t, roof_t, phase=None):
        if not (ach and roof_t):
            return ""
        rows = (a.achievable_ops or {}).get(phase) or []
        total, fixed = sum(r["time_s"] for r in rows), sum(r["fixed_s"] for r in rows)
        share = f", {fixed / total:.0%} of it fixed per-kernel costs" if total and fixed else ""
        return f"  (roof {fmt_time(roof_t)}, x{t / roof_t:.2f}{share})"

    lines = [
        ("TTFT (prefill)", f"{fmt_time(a.ttft_s)}  ({a.prefill.bound}-bound){beside(a.ttft_s, a.roof_ttft_s, 'prefill')}"),
        ("TPOT first / mean / last", f"{fmt_time(a.tpot_first_s)} / {fmt_time(a.tpot_s)} / {fmt_time(a.tpot_last_s)}  ({a.decode.bound}-bound){beside(a.tpot_s, a.roof_tpot_s, 'decode')}"),
        ("end-to-end latency", fmt_time(a.e2e_latency_s)),
        ("decode tokens/s", f"{fmt_num(a.tokens_per_s_per_sequence)} per sequence, {fmt_num(a.tokens_per_s_per_gpu)} per GPU "
                            f"({fmt_num(a.end_to_end_tokens_per_s_per_gpu)} per GPU with prefill)"),
        ("decode compute-bound at", (f"batch {a.decode_gemm_compute_bound_batch:,}" if a.decode_gemm_compute_bound_batch else "batch > 65,536") + " for the matmuls, "
                                    f"{f'batch {a.decode_compute_bound_batch:,}' if a.decode_compute_bound_batch else 'never (<= 65,536)'} for the whole step "
                                    f"(context {a.decode_compute_bound_context:,})"),
        ("KV read = weight read at", f"context {math.ceil(a.kv_crossover_context):,}" if a.kv_crossover_context else "never (KV reads stay below weight reads)"),
    ]
    if a.cost_per_million_output_tokens_usd is not None:
        usd = wl.price_per_gpu_hour
        cited = f", cited: {spec.price_source}" if spec.price_source and usd == spec.price_usd_per_gpu_hour else ""
        lines.append(("cost", f"${fmt_num(a.cost_per_million_output_tokens_usd)} per million output tokens (prefill and decode GPU time "
                              f"at ${usd:g} per GPU-hour{markup_safe(cited)})"))
    if a.decode_naive_mla is not None:
        lines.append((f"MLA {a.decode_naive_mla.phase.split('(')[1].split()[0]} decode", f"TPOT {fmt_time(a.decode_naive_mla.time_s)} (mean{', roof' if ach else ''}), for comparison"))
    m = a.memory
    lines.append(
        (
            "memory per GPU",
            f"weights {fmt_bytes(m['weights_bytes'])} + KV {fmt_bytes(m['kv_cache_bytes'])} (at {m['kv_cache_context']:,}) + workspace "
            f"{fmt_bytes(m['activation_workspace_bytes'])} = {fmt_bytes(m['total_bytes_per_gpu'])} of {fmt_bytes(m['capacity_bytes_per_gpu'])}: "
            + ("fits" if m["fits"] else "[bold red]does not fit[/]"),
        )
    )
    lines.append(("largest batch / context", _largest_text(m, wl.batch)))
    print_pairs(c, lines)
    if show_ops and ach:
        c.print(_achievable_table(c, f"prefill ({a.engine}, eager): {wl.batch} x {wl.prompt_len:,} tokens, achievable vs roof (summed over L layers, per GPU)",
                                  a.achievable_ops["prefill"], a.roof_ttft_s, fmt_time))
        c.print(_achievable_table(c, f"decode ({a.engine}, CUDA graph): one step, mean over contexts {a.decode.context}, achievable vs roof (summed over L layers, per GPU)",
                                  a.achievable_ops["decode"], a.roof_tpot_s, fmt_time))
    elif show_ops:
        c.print(_ops_table(c, f"prefill: {wl.batch} x {wl.prompt_len:,} tokens (summed over L layers, per GPU)", a.prefill, fmt_bytes, fmt_time, fmt_count))
        c.print(_ops_table(c, f"decode: one step, mean over contexts {a.decode.context} (summed over L layers, per GPU)", a.decode, fmt_bytes, fmt_time, fmt_count))


def print_pairs(c, lines: list[tuple[str, str]]) -> None:
    """"  key  value" lines, keys aligned; a value too long for the width wraps under itself."""
    from rich.text import Text

    width = max(len(k) for k, _ in lines)
    if all(Text.from_markup(f"  {k:<{width}}  {v}").cell_len <= c.width for k, v in lines):
        for k, v in lines:
            c.print(f"  {k:<{width}}  {v}")
        return
    from rich.table import Table

    grid = Table.grid(padding=(0, 0, 0, 2))
    grid.add_column(no_wrap=True, min_width=width)
    grid.add_column()
    for k, v in lines:
        grid.add_row(k, v)
    c.print(grid)


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze_cmd)


def _largest_text(m: dict, batch: int) -> str:
    """The "largest batch / context" line: the largest batch at this context and the longest
    context at this batch, or why there is none (the weights alone, or this context or batch)."""
    from rooflinecli.fmt import fmt_bytes

    if not m["max_batch_at_context"] and m["weights_bytes"] >= m["capacity_bytes_per_gpu"]:
        return (f"none: the weights alone ({fmt_bytes(m['weights_bytes'])} per GPU) leave no room in "
                f"{fmt_bytes(m['capacity_bytes_per_gpu'])} (more --tp / --ep GPUs, or a smaller --weight-dtype)")
    mb, mc = m["max_batch_at_context"], m["max_context_at_batch"]
    at = f"at context {m['kv_cache_context']:,}"
    first = f"batch {mb:,} {at}" if mb else f"not even batch 1 {at}"
    if mc is None:
        second = "any context (the KV cache stops growing)"
    elif mc:
        second = f"context {mc:,}"
    else:
        second = "not even 1 token of context"
    return f"{first}; {second} at batch {batch:,}"

