"""CLI: ``roofline sweep``, the analytical model over a models x GPUs x dtypes x batch x context
grid, vectorized (``rooflinecli.whatif.sweep``), written to Parquet or CSV."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from rooflinecli.errors import one_line
from rooflinecli.cli.options import dtype_parser, forgive_gpu_names, forgive_model_names
from rooflinecli.cli.workload_options import SHARED, checkpoint_workload, echo_dtype_notes, workload_options
from rooflinecli.dtypes import COMPUTE_DTYPES, KV_DTYPES, WEIGHT_DTYPES
from rooflinecli.errors import RooflineError

#: the most rows one sweep may write (about a minute of work and a few GB of output)
MAX_SWEEP_ROWS = 100_000_000
#: grids with more rows than this get a progress bar
PROGRESS_MIN_ROWS = 200_000


@workload_options
def sweep_cmd(
    model: Annotated[str, typer.Option("--model", help="Comma list of model presets or config paths.", parser=forgive_model_names, metavar="MODELS")],
    hw: Annotated[str, typer.Option("--hw", "--hw-file", help="Comma list of GPUs (ids or spec paths).", envvar="ROOFLINE_HW",
                                    parser=forgive_gpu_names, metavar="GPUS")],
    out: Annotated[str, typer.Option("--out", "-o", help="Output file: .parquet or .csv (by extension), written atomically.")],
    batch: Annotated[str, typer.Option("--batch", help="Batch grid: lists and A..B[:STEP|:xF] ranges, k = 1024.")] = "1..256:x2",
    context: Annotated[str | None, typer.Option("--context", help="Context grid (prefill: prompt tokens; decode: cached tokens); "
                                                "default: 1k doubling up to the models' shortest trained context.")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="Comma list of compute dtypes (weights stored in the same dtype unless --weight-dtype).",
                                       parser=dtype_parser(COMPUTE_DTYPES, "compute dtype"), metavar="DTYPES")] = "bf16",
    weight_dtype: Annotated[str | None, typer.Option("--weight-dtype", help="Comma list of stored weight dtypes (default: the compute dtype).",
                                                     parser=dtype_parser(WEIGHT_DTYPES, "weight dtype"), metavar="DTYPES")] = None,
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="Comma list of KV cache dtypes.", parser=dtype_parser(KV_DTYPES, "KV dtype"), metavar="DTYPES")] = "bf16",
    phase: Annotated[str, typer.Option("--phase", help="Phases: prefill,decode.")] = "prefill,decode",
    tp=SHARED, ep=SHARED, kv_bits=SHARED, kv_block_size=SHARED, prefill_chunk=SHARED, mode=SHARED, engine=SHARED,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary line.")] = False,
) -> None:
    """Vectorized what-if grid: one long row per (model, GPU, dtype, phase, batch, context)."""
    from rooflinecli.dtypes import KV_DTYPES, WEIGHT_DTYPES, check_dtype
    from rooflinecli.hardware import get_specs
    from rooflinecli.model_registry import get_model
    from rooflinecli.whatif import sweep as S
    from rooflinecli.whatif.grid import parse_grid, parse_list
    from rooflinecli.rope import context_warning

    t0 = time.perf_counter()
    S.output_format(out)
    B = parse_grid(batch, "--batch")
    if context is not None:
        N = parse_grid(context, "--context")
    phases = tuple(parse_list(phase, "--phase"))
    for p in phases:
        if p not in S.PHASES:
            raise RooflineError(f"--phase: unknown phase '{p}'; known: {', '.join(S.PHASES)}")
    cfgs = [get_model(m) for m in parse_list(model, "--model")]
    if context is None:  # the default grid stays inside every model's trained context: no warning at defaults
        trained = min(cfg.max_position_embeddings for cfg in cfgs)
        N = parse_grid(f"{min(1024, trained)}..{trained}:x2", "--context")
    if B[-1] > 2**31 - 1 or N[-1] > 2**31 - 1:
        raise RooflineError("--batch/--context: values must be below 2^31")
    specs = get_specs(hw)
    if not specs:
        raise RooflineError("--hw: give at least one GPU")
    from rooflinecli.cli.options import model_and_spec_files
    from rooflinecli.output import refuse_overwriting_inputs

    refuse_overwriting_inputs(model_and_spec_files(cfgs, specs), {"--out": out})
    dtypes = parse_list(dtype, "--dtype")
    wds = parse_list(weight_dtype, "--weight-dtype") if weight_dtype is not None else None
    for wd in wds or ():
        check_dtype(wd, WEIGHT_DTYPES, "weight dtype (--weight-dtype)")
    kvs = [check_dtype(k, KV_DTYPES, "KV dtype (--kv-dtype)") for k in parse_list(kv_dtype, "--kv-dtype")]
    combos, dtype_notes = _checkpoint_combos(S.make_combos(cfgs, specs, dtypes, kvs, wds, mode, engine, kv_bits))
    total_rows = B.size * N.size * len(combos) * len(phases)
    if total_rows > MAX_SWEEP_ROWS:  # before any work: a typo must not run for hours
        raise RooflineError(f"--batch x --context x combos x phases: {total_rows:,} rows is above the limit of {MAX_SWEEP_ROWS:,}; narrow a grid")
    n_blocks = len(combos) * len(phases) * len(S.grid_chunks(B, N))
    size = S.estimate(total_rows, S.output_format(out))
    free = _free_bytes(out)
    if free is not None and size.output_bytes > free:
        raise RooflineError(
            f"--out {one_line(out)}: {total_rows:,} rows need about {_gb(size.output_bytes)} of {S.output_format(out)} and its "
            f"folder has {_gb(free)} free; narrow a grid{' or write .parquet' if S.output_format(out) == 'csv' else ''}"
        )
    if not quiet and total_rows >= PROGRESS_MIN_ROWS:
        typer.echo(
            f"sweep: {total_rows:,} rows, about {_gb(size.output_bytes)} of {S.output_format(out)}, peak memory about "
            f"{_gb(size.peak_memory_bytes)} (streamed in chunks of up to {S.CHUNK_ROWS:,} rows)",
            err=True,
        )
    if not quiet:
        echo_dtype_notes(dtype_notes)
    for cfg in cfgs:
        if not quiet:
            w = context_warning(cfg, int(N[-1]))
            if w:
                typer.echo(w, err=True)
    blocks = S.iter_blocks(combos, B, N, phases, tp, kv_block_size, prefill_chunk_tokens=prefill_chunk or None, ep=ep)
    if quiet or total_rows < PROGRESS_MIN_ROWS:
        rows = S.write_sweep(out, blocks)
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}", markup=False),
                      TimeElapsedColumn(), transient=True) as progress:
            task = progress.add_task("", total=n_blocks)

            def step(block):
                progress.update(task, advance=1, description=f"{block.combo.cfg.name} {block.combo.spec.id} {block.combo.dtype} {block.phase}")

            rows = S.write_sweep(out, blocks, on_block=step)
    if not quiet:
        typer.echo(
            f"wrote {rows:,} rows ({len(combos)} combos x {len(phases)} phases x {B.size} batches x {N.size} contexts) "
            f"to {one_line(out)} in {time.perf_counter() - t0:.2f} s",
            err=True,
        )


def _checkpoint_combos(combos) -> tuple[list, list[str]]:
    """Each combination with the compute and KV dtypes its model's checkpoint implies where
    --dtype / --kv-dtype / --kv-bits were not given (``checkpoint_workload``), and the notes saying
    so, once each."""
    from dataclasses import replace

    from rooflinecli.analysis import Workload

    out, notes = [], []
    for c in combos:
        wl = Workload(batch=1, prompt_len=1, gen_len=1, compute_dtype=c.dtype, weight_dtype=c.weight_dtype, kv_dtype=c.kv_dtype,
                      kv_bits=c.kv_bits, weight_dtype_overrides=c.weight_dtype_overrides)
        wl, said = checkpoint_workload(c.cfg, wl, [c.spec])
        out.append(replace(c, dtype=wl.compute_dtype, kv_dtype=wl.kv_dtype, kv_bits=wl.kv_bits))
        notes += [n for n in said if n not in notes]
    return out, notes


def _gb(n: int) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.0f} MB"


def _free_bytes(out: str) -> int | None:
    """Free bytes in the folder ``out`` goes to (None when it cannot be told: the writer says why)."""
    import os
    import shutil

    try:
        return shutil.disk_usage(os.path.dirname(os.path.abspath(out))).free
    except OSError:
        return None


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)
