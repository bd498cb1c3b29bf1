"""CLI: the measuring commands. ``bench`` (check, then time the kernels), ``calibrate`` (measured
ceilings -> a spec file), ``validate`` (prediction vs measurement) and ``e2e`` (one decoder layer
built from the kernels, against the model's prediction for that layer).

Thin: parse, call ``rooflinecli.bench``, render. torch, triton and the kernels are imported inside
the commands.
"""

from __future__ import annotations

import enum
import os
import time
from pathlib import Path
from typing import Annotated

import typer

from rooflinecli.console import TABLE_MAX_ROWS
from rooflinecli.errors import one_line
from rooflinecli.cli.options import tokens_option

from rooflinecli.errors import RooflineError


class Suite(str, enum.Enum):
    quick = "quick"
    full = "full"
    test = "test"  # the kernels' tiny CPU-interpreter cases


def _echo_table(title: str, header: list[str], rows: list[list[str]], right: set[int] | None = None,
                wrap: tuple[str, ...] = (), optional: tuple[str, ...] = ()) -> None:
    """A table that fits the terminal (``console.fit_table``): numbers are never cut; ``wrap``
    names text columns that may wrap, ``optional`` columns that may be left out, first named first."""
    from rooflinecli.console import fit_table, make_console

    con = make_console()
    justify = ["right" if right and i in right else "left" for i in range(len(header))]
    con.print(fit_table(con, title, header, rows, justify=justify, wrap=wrap, optional=optional, show_edge=False, pad_edge=False))


def _use_cpu(device: str, allow_cpu: bool, cmd: str) -> bool:
    """``--device cpu`` / ``--allow-cpu`` (hidden, for tests): run on the CPU under the Triton
    interpreter; otherwise a CUDA GPU is required (one-line error, exit 2)."""
    if device not in ("cuda", "cpu"):
        raise RooflineError(f"--device must be cuda or cpu, got '{device}'")
    if device == "cpu" or allow_cpu:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is first imported
        return True
    from rooflinecli.bench.environment import require_cuda

    require_cuda(cmd)
    return False


def _specs_for_gpu(hw: str | None, measured: str | None, gpu_name: str | None):
    """(datasheet, measured) specs: the options, else the GPU name's datasheet spec and the
    measured spec on file for it."""
    from rooflinecli.bench.environment import match_spec_id
    from rooflinecli.bench.runner import default_measured_spec
    from rooflinecli.hardware import get_spec

    ds = get_spec(hw) if hw else None
    ms = get_spec(measured) if measured else None
    if ds is not None and ds.kind == "measured":
        if ms is None:
            ms = ds
        ds = get_spec(ds.base) if ds.base else None
    if ds is None and gpu_name:
        spec_id = match_spec_id(gpu_name)
        if spec_id is None and ms is None:
            raise RooflineError(f"cannot match GPU '{gpu_name}' to a datasheet spec; pass --hw (e.g. --hw h100-sxm)")
        ds = get_spec(spec_id) if spec_id else (get_spec(ms.base) if ms and ms.base else None)
    if ms is None and measured is None:
        ms = default_measured_spec(ds)
    return ds, ms


# ------------------------------------------------------------------------------------------------


def bench(
    kernel: Annotated[str | None, typer.Option("--kernel", "-k", help="Kernels to run, comma-separated (default: all).")] = None,
    suite: Annotated[Suite, typer.Option("--suite", help="quick: a few shapes; full: the whole sweep.")] = Suite.quick,
    hw: Annotated[str | None, typer.Option("--hw", "--hw-file", help="Datasheet spec id or path for predictions (default: matched from the GPU name).")] = None,
    measured: Annotated[str | None, typer.Option("--measured", help="Measured spec (id or path) for predictions (default: the one on file for the GPU).")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Results file (JSON, written atomically after each case).")] = Path("results.json"),
    samples: Annotated[int, typer.Option("--samples", help="Minimum timed samples (graph replays) per kernel and shape (>= 20, which the regression gate needs to catch a 10% slowdown in >= 95% of runs).")] = 20,
    target_ms: Annotated[float, typer.Option("--target-ms", help="Timing budget per kernel, shape and impl, milliseconds.")] = 250.0,
    time_budget_s: Annotated[float | None, typer.Option("--time-budget-s", help="Start no new case after this many seconds; the rest are recorded as skipped.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")] = 0,
    no_baseline: Annotated[bool, typer.Option("--no-baseline", help="Do not time the PyTorch equivalent.")] = False,
    no_graphs: Annotated[bool, typer.Option("--no-graphs", help="Never use CUDA graphs: CUDA events with the host kept ahead of the GPU instead.")] = False,
    no_paired: Annotated[bool, typer.Option("--no-paired", help="Skip the interleaved timing of ours against the chosen baseline (replay pairs, the speedup the targets use); on a GPU it is on by default.")] = False,
    crosscheck: Annotated[bool, typer.Option("--crosscheck", help="Also time each timed case with triton.testing.do_bench_cudagraph (median) and store the ratio (row note, extra.bench.crosscheck).")] = False,
    tuned: Annotated[Path | None, typer.Option("--tuned", help="Committed tuned-config file, or a folder holding <gpu>-triton<version>.json (default: kernels/tuned/). A file of another GPU or Triton version, or a bad one: one warning line, then run-time autotuning.")] = None,
    shape: Annotated[str | None, typer.Option("--shape", help="Only the cases whose id matches one of these comma-separated shell patterns, e.g. 'M128-*,T1-E128-*' (ids as in the results' shape and dtype: M128-N8192-K8192-bf16).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or table.")] = False,
    device: Annotated[str, typer.Option("--device", hidden=True)] = "cuda",
    allow_cpu: Annotated[bool, typer.Option("--allow-cpu", hidden=True)] = False,
) -> None:
    """Check each kernel against its reference, then time it and its PyTorch equivalent."""
    cpu = _use_cpu(device, allow_cpu, "bench")
    if samples < 20:
        raise RooflineError(f"--samples must be >= 20 (the timing method keeps at least 20), got {samples}")
    if target_ms <= 0:
        raise RooflineError(f"--target-ms must be > 0, got {target_ms:g}")
    from rooflinecli.bench.environment import collect_environment, utc_now
    from rooflinecli.bench.run_summary import summary_rows
    from rooflinecli.bench.runner import BenchOptions, check_cases, make_results, parse_kernels, parse_shapes, run_bench

    kernels = parse_kernels(kernel)
    env = collect_environment("cpu" if cpu else "cuda")
    if cpu:
        from rooflinecli.hardware import get_spec

        ds = get_spec(hw) if hw else None
        ms = get_spec(measured) if measured else None
    else:
        ds, ms = _specs_for_gpu(hw, measured, env.get("gpu_name"))
    opts = BenchOptions(
        kernels=kernels,
        suite=suite.value,
        device="cpu" if cpu else "cuda",
        hw=ds,
        measured=ms,
        min_samples=samples,
        target_total_s=target_ms / 1e3,
        time_budget_s=time_budget_s,
        seed=seed,
        baseline=not no_baseline,
        use_graphs=not no_graphs,
        crosscheck=crosscheck,
        paired=not no_paired,
        tuned_file=str(tuned) if tuned is not None else None,
        gpu_name=str(env.get("gpu_name", "")),
        shapes=parse_shapes(shape),
    )
    check_cases(opts)  # nothing to run: the one error line before any progress bar is drawn
    created = utc_now()
    t0 = time.monotonic()

    def checkpoint(state) -> None:
        make_results(opts, state, env, created, time.monotonic() - t0).save(out)

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=quiet,
        transient=True,
    ) as progress:
        task = progress.add_task("bench", total=None)

        def on_case(op: str, case_id: str, i: int, n: int) -> None:
            progress.update(task, description=f"{op} {case_id}", completed=i, total=n)

        def on_tuned(info: dict) -> None:
            if info.get("message") and info.get("status") != "none":
                typer.echo(info["message"], err=True)

        state = run_bench(opts, on_case=on_case, on_checkpoint=checkpoint, on_tuned=on_tuned)
    if not cpu:  # clocks and temperature after the run, beside those before it
        from rooflinecli.bench.environment import nvidia_smi_query

        after = nvidia_smi_query()
        env.update({f"{k}_end": after[k] for k in ("sm_clock_mhz", "mem_clock_mhz", "temperature_c") if k in after})
    results = make_results(opts, state, env, created, time.monotonic() - t0)
    results.save(out)
    failed = [r for r in results.rows if not r.correct]
    if not quiet:
        _echo_table(
            f"{env.get('gpu_name')}: suite {suite.value}; predictions from {ds.id if ds else '-'} / {ms.id if ms else '-'}",
            ["op", "impl", "shape", "dtype", "p50 us", "TFLOP/s", "GB/s", "% roof", "method"],
            summary_rows(results.rows),
            right={4, 5, 6, 7},
        )
    if not cpu:
        from rooflinecli.bench.run_summary import quality_lines

        for line in quality_lines(results.rows, state.crosscheck if crosscheck else None):
            typer.echo(line)
    typer.echo(f"wrote {one_line(out)} ({len(results.rows)} rows, {len(failed)} failed checks, {len(state.skipped)} cases skipped)")
    if failed:
        typer.echo(f"{len(failed)} rows failed their correctness check and were not timed", err=True)
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------


def calibrate(
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Spec file to write (needed unless --measured names a spec file outside the installed package, which is then updated in place).")] = None,
    base: Annotated[str | None, typer.Option("--base", "--hw", "--hw-file", help="Datasheet spec (id or path) the measurement refines (default: matched from the GPU name).")] = None,
    spec_id: Annotated[str | None, typer.Option("--id", help="Id of the measured spec (default: <base>-measured).")] = None,
    from_results: Annotated[Path | None, typer.Option("--from-results", help="Fit the efficiency table from this bench results file and embed it.")] = None,
    measured: Annotated[str | None, typer.Option("--measured", help="With --from-results: the measured spec to add the fit to (no GPU needed).")] = None,
    ops: Annotated[bool, typer.Option("--ops/--no-ops", help="Also time the calibration grid (cuBLAS GEMMs, SDPA, elementwise ops, copies, launch floor) into a calibration file the spec names.")] = True,
    budget_s: Annotated[float, typer.Option("--budget-s", help="GPU seconds for the whole calibration; the op grid starts no new shape past it.")] = 90.0,
    sustained_s: Annotated[float, typer.Option("--sustained-s", help="Seconds of back-to-back matmul and copy for the sustained ceilings (>= 2 on a GPU).")] = 2.0,
    calibration_out: Annotated[Path | None, typer.Option("--calibration-out", help="Calibration file to write (default: <spec stem>.calibration.json beside the spec).")] = None,
    device: Annotated[str, typer.Option("--device", hidden=True)] = "cuda",
    import_tables: Annotated[bool, typer.Option("--import", help="No GPU: import measured per-op tables (installed aiconfigurator-core / aisimulate, or --data) into a calibration file for --system and --engine.")] = False,
    system: Annotated[str | None, typer.Option("--system", help="With --import: the GPU (h100-sxm, h200, b200, a100-sxm, l40s, or the data's system name).")] = None,
    engine: Annotated[str | None, typer.Option("--engine", help="With --import: the framework whose kernels were measured (vllm, sglang, trtllm).")] = None,
    data: Annotated[Path | None, typer.Option("--data", help="With --import: a data folder in the <system>/<family>/<framework>/<version>/ layout instead of the installed package.")] = None,
    audit_out: Annotated[Path | None, typer.Option("--audit-out", help="With --import: also write the audit of every table (JSON).")] = None,
    audit_compare: Annotated[Path | None, typer.Option("--audit-compare", help="With --import: a reference audit (JSON list with 'path' and 'verdict') to count agreement with.")] = None,
    import_spec: Annotated[bool, typer.Option("--spec/--no-spec", help="With --import: also write the GPU's measured spec, <gpu>-imported.toml beside the calibration, from every imported calibration of the GPU there.")] = True,
) -> None:
    """Measure copy bandwidth, L2 bandwidth, matmul peaks (burst and sustained) and the op grid; write a measured spec file and its calibration file."""
    if import_tables:
        from rooflinecli.cli.calibration_import import run_import

        return run_import(system, engine, data, out, audit_out, audit_compare, import_spec)
    from rooflinecli.output import inside_package, refuse_overwriting_inputs
    from rooflinecli.bench.calibrate import SPEC_COMMENT, add_efficiency, default_out_path, read_spec_doc, write_spec_file
    from rooflinecli.hardware import get_spec, parse_spec

    def refuse(spec_out: Path | None) -> None:  # before anything is measured or written
        cal_out = calibration_out or (spec_out.with_name(f"{spec_out.stem}.calibration.json") if spec_out is not None and ops else None)
        refuse_overwriting_inputs({"--from-results": from_results}, {"--out": spec_out, "--calibration-out": cal_out})

    if out is not None and (out.name in ("", ".", "..") or out.is_dir()):
        raise RooflineError(f"--out {out}: is a folder; name the spec file to write (e.g. {out / 'h200.toml'})")
    refuse(out)
    if out is None and from_results is None and inside_package(default_out_path("x").parent):
        raise RooflineError(f"calibrate: the default spec file ({default_out_path('<base>')}) is inside the installed package; name the spec file to write with --out")
    early = None
    if from_results is not None:  # read and checked before anything is measured or written
        from rooflinecli.results import load_results

        early = load_results(from_results)
    doc = None
    if from_results is not None:
        if measured is not None:
            spec = get_spec(measured)
            if spec.kind != "measured":
                raise RooflineError(f"--measured '{measured}' is a datasheet spec; name a measured spec file")
            doc = read_spec_doc(spec.path)
            if out is None and inside_package(spec.path):  # never rewrite the tool's own spec file unasked
                raise RooflineError(f"--measured {measured}: its spec file {spec.path} is part of the installed package; name the spec file to write with --out")
            out = out or Path(spec.path)
            cal = spec.measured_with.get("calibration")
            if cal:  # its calibration file is an input too; a spec written elsewhere must still find it
                cal_path = (Path(spec.path).parent / cal).resolve()
                refuse_overwriting_inputs({"the measured spec's calibration file": cal_path}, {"--out": out})
                if out.resolve().parent != Path(spec.path).resolve().parent:
                    doc.setdefault("measured_with", {})["calibration"] = os.path.relpath(cal_path, out.resolve().parent)
        elif out is not None and out.is_file():
            doc = read_spec_doc(out)
    if doc is None:
        if not budget_s > 0:
            raise RooflineError(f"--budget-s must be > 0, got {budget_s}")
        if not sustained_s > 0:
            raise RooflineError(f"--sustained-s must be > 0, got {sustained_s}")
        t0 = time.monotonic()
        doc, ceilings, env = _measure_doc(base, spec_id, device, sustained_s)
        out = out or default_out_path(doc["base"])
        refuse(out)
        _show_ceilings(doc)
        if ops:
            doc = _measure_ops(doc, ceilings, env, out, calibration_out, budget_s - (time.monotonic() - t0), device)
    assert out is not None
    if from_results is not None:
        refuse_overwriting_inputs({"--from-results": from_results}, {"--out": out})
        from rooflinecli.bench.environment import utc_now
        from rooflinecli.bench.fit import fit_report, points_from_rows
        from rooflinecli.results import load_results

        results = early if early is not None else load_results(from_results)
        spec = parse_spec(doc, str(out))
        points = points_from_rows(results.rows, spec)
        if not points:
            raise RooflineError(f"{from_results}: no timed, correct rows of our kernels to fit an efficiency from")
        report = fit_report(points, spec.id)
        doc = add_efficiency(
            doc,
            report.efficiency,
            {
                "results": str(from_results),
                "gpu": results.gpu_name,
                "date_utc": utc_now(),
                "points": str(len(points)),
                "median_abs_error_before": f"{report.before.median_abs_error:.4f}",
                "median_abs_error_after_leave_one_out": f"{report.after_loo.median_abs_error:.4f}",
            },
        )
        _show_fit(report)
    written = write_spec_file(out, doc, SPEC_COMMENT)
    typer.echo(f"wrote {one_line(out)} (id {written.id}, base {written.base})")


def _measure_ops(doc: dict, ceilings, env: dict, spec_out: Path, calibration_out: Path | None, budget_s: float, device: str) -> dict:
    """Time the calibration grid within ``budget_s``, write the calibration file, name it in ``doc``."""
    import os as _os

    from rooflinecli.bench.calibrate import SPEC_COMMENT, device_l2_bytes, set_calibration, write_spec_file
    from rooflinecli.bench.calibration_file import calibration_checkpointer
    from rooflinecli.bench.opgrid import GridResult, build_grid, run_grid

    cpu = device == "cpu"
    l2 = device_l2_bytes("cpu" if cpu else "cuda")
    grid = build_grid(tiny=cpu)
    n_cases = sum(len(v) for v in grid.values())
    path = calibration_out or spec_out.with_name(f"{spec_out.stem}.calibration.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    rel = _os.path.relpath(path.resolve(), spec_out.resolve().parent)

    checkpoint = calibration_checkpointer(path, env, l2, ceilings.sustained, ceilings.sustained_rows, budget_s)
    # the ceilings and a first calibration file are on disk before the grid starts: a stage killed by
    # its timeout keeps the spec and the rows of the last checkpoint
    checkpoint(GridResult())
    write_spec_file(spec_out, set_calibration(doc, rel), SPEC_COMMENT)
    typer.echo(f"op grid: {n_cases} shapes, {max(budget_s, 0):.0f} s of budget left", err=True)
    result = run_grid(grid, "cpu" if cpu else "cuda", l2, max(budget_s, 0.0), on_checkpoint=checkpoint)
    checkpoint(result)
    typer.echo(f"wrote {one_line(path)} ({len(result.rows)} rows, {len(result.failed)} failed, {result.skipped} skipped for the budget, {result.elapsed_s:.1f} s)")
    for f in result.failed[:20]:
        typer.echo(f"failed: {f['op']} {f['shape']}: {f['error']}", err=True)
    return set_calibration(doc, rel)


def _measure_doc(base: str | None, spec_id: str | None, device: str, sustained_s: float = 2.0):
    """(spec document, ceilings, environment) measured on the GPU (or the CPU, for tests)."""
    from dataclasses import replace as _replace

    from rooflinecli.bench.calibrate import CPU_SIZES, CalibrationSizes, measure_ceilings, measured_doc
    from rooflinecli.bench.environment import collect_environment, match_spec_id
    from rooflinecli.hardware import get_spec

    cpu = _use_cpu(device, False, "calibrate")
    env = collect_environment("cpu" if cpu else "cuda")
    if base is None:
        base = None if cpu else match_spec_id(str(env.get("gpu_name", "")))
        if base is None:
            raise RooflineError(f"cannot match GPU '{env.get('gpu_name')}' to a datasheet spec; pass --base (e.g. --base h100-sxm)")
    base_spec = get_spec(base)
    sizes = CPU_SIZES if cpu else _replace(CalibrationSizes(), sustained_s=sustained_s)
    ceilings = measure_ceilings("cpu" if cpu else "cuda", sizes)
    for key, why in ceilings.skipped.items():
        typer.echo(f"skipped {key}: {why}", err=True)
    if ceilings.sustained:
        typer.echo("ceilings: sustained (" + ", ".join(f"{k} {v:.4g} vs burst {ceilings.burst.get(k, 0):.4g}" for k, v in ceilings.sustained.items()) + "); predictions use the sustained figures")
    return measured_doc(base_spec, ceilings, env, spec_id), ceilings, env


def _show_ceilings(doc: dict) -> None:
    from rooflinecli.hardware import get_spec

    base = get_spec(doc["base"])
    rows = []
    for dt, v in doc.get("peak_dense_tflops", {}).items():
        ds = base.peak_dense_tflops.get(dt)
        rows.append([f"matmul {dt}", f"{v:.1f} TFLOP/s", f"{ds:.1f}" if ds else "-", f"{v / ds:.0%}" if ds else "-"])
    if "memory" in doc:
        v = doc["memory"]["bandwidth_gb_per_s"]
        rows.append(["HBM copy", f"{v:.0f} GB/s", f"{base.memory_bandwidth_gb_per_s:.0f}", f"{v / base.memory_bandwidth_gb_per_s:.0%}"])
    if "cache" in doc:
        v = doc["cache"]["l2_bandwidth_gb_per_s"]
        rows.append(["L2 copy", f"{v:.0f} GB/s", f"{base.l2_bandwidth_gb_per_s:.0f}", f"{v / base.l2_bandwidth_gb_per_s:.0%}"])
    _echo_table(f"measured ceilings vs {base.id} datasheet", ["ceiling", "measured", "datasheet", "ratio"], rows, right={1, 2, 3})


def _show_fit(report) -> None:
    rows = [[k, r, f"{v:.3f}", str(report.group_counts.get(k, {}).get(r, 0))] for k, regs in report.efficiency.items() for r, v in regs.items()]
    _echo_table(f"fitted efficiency on {report.spec_id}", ["op kind", "regime", "efficiency", "points"], rows, right={2, 3})
    for label, s in (("before (roof)", report.before), ("after, leave-one-out", report.after_loo), ("after, in-sample", report.after_in_sample)):
        typer.echo(f"median |error| {label}: {s.median_abs_error:.1%} (p90 {s.p90_abs_error:.1%}, n {s.n})")


# ------------------------------------------------------------------------------------------------


def validate(
    results: Annotated[Path | None, typer.Argument(help="Results file written by `roofline bench`.")] = None,
    hw: Annotated[str | None, typer.Option("--hw", "--hw-file", help="Datasheet spec id or path (default: the one the results name).")] = None,
    measured: Annotated[str | None, typer.Option("--measured", help="Measured spec (default: the one the results name, if any).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the validation as JSON instead of tables.")] = False,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Also write the validation JSON to this file.")] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Also write a Markdown report to this file.")] = None,
    calibration: Annotated[str | None, typer.Option("--calibration", help="Instead of a results file: the imported calibrations' leave-shape-out, cross-framework and transfer errors ('all', a GPU, or GPU.engine).")] = None,
    max_rows: Annotated[int, typer.Option("--max-rows", help="Kernel rows the terminal table shows, in file order (0: all); --json, --out and --markdown hold every row.")] = TABLE_MAX_ROWS,
) -> None:
    """Predicted vs measured time per kernel and shape, error statistics and the kernel targets."""
    if calibration is not None:
        from rooflinecli.cli.calibration_import import run_validate_calibration

        return run_validate_calibration(None if calibration == "all" else calibration, as_json)
    if results is None:
        raise RooflineError("validate: name a results file, or pass --calibration")
    if max_rows < 0:
        raise RooflineError(f"--max-rows must be >= 0 (0 shows every row), got {max_rows}")
    import json

    from rooflinecli.output import json_text, refuse_overwriting_inputs, write_text_atomic
    from rooflinecli.bench.validate import validate as run_validate
    from rooflinecli.bench.validate_render import summary_table, to_markdown
    from rooflinecli.results import load_results

    refuse_overwriting_inputs({"the results file": results}, {"--out": out, "--markdown": markdown})
    v = run_validate(load_results(results), hw, measured)
    data = v.to_json()
    text = json_text(data) + "\n" if out is not None or as_json else ""  # a row a line: the C encoder writes each
    if out is not None:
        write_text_atomic(out, text)
    if markdown is not None:
        write_text_atomic(markdown, to_markdown(v))
    if as_json:
        typer.echo(text, nl=False)
        return
    _show_validation(v, summary_table(v), max_rows)
    for path in (out, markdown):
        if path is not None:
            typer.echo(f"wrote {one_line(path)}")


def _show_validation(v, summary: list[list[str]], max_rows: int = 0) -> None:
    from rooflinecli.fmt import fmt_pct, fmt_us
    from rooflinecli.gate.render import kernel

    shown = v.rows if max_rows <= 0 else v.rows[:max_rows]
    rows = []
    for r in shown:
        flag = " ABOVE ROOF" if r.above_roof else ""
        rows.append(
            [kernel((r.op, r.impl, r.shape, r.dtype)), r.bound + flag, fmt_us(r.measured_s), fmt_us(r.predicted_datasheet_s),
             fmt_pct(r.error("datasheet")), fmt_us(r.predicted_measured_s), fmt_pct(r.error("measured")), fmt_pct(r.error("fitted"))]
        )
    kernel_col = "kernel (op shape dtype [impl])"
    _echo_table(
        f"{v.gpu_name}: predicted vs measured (datasheet {v.datasheet.id if v.datasheet else '-'}, measured {v.measured.id if v.measured else '-'})",
        [kernel_col, "bound", "measured us", "datasheet us", "datasheet err", "meas.-ceil. us", "meas.-ceil. err", "fitted err"],
        rows,
        right={2, 3, 4, 5, 6, 7},
        wrap=(kernel_col,),
        optional=("datasheet us", "meas.-ceil. us", "bound"),
    )
    if len(shown) < len(v.rows):
        typer.echo(f"... {len(v.rows) - len(shown):,} more row(s) not shown (--max-rows 0 shows every row; --json or --out writes them all)")
    if v.end_to_end:
        _echo_table(
            "end to end: one decoder layer",
            ["phase", "measured us", "datasheet us", "err", "meas.-ceil. us", "err", "fitted us", "err"],
            [[str(p.get("phase")), fmt_us(p.get("measured_s")), fmt_us(p.get("predicted_s_datasheet")), fmt_pct(p.get("error_datasheet")),
              fmt_us(p.get("predicted_s_measured")), fmt_pct(p.get("error_measured")), fmt_us(p.get("predicted_s_fitted")),
              fmt_pct(p.get("error_fitted"))] for p in v.end_to_end],
            right={1, 2, 3, 4, 5, 6, 7},
        )
    if v.end_to_end_full:
        from rooflinecli.bench.validate_render import E2E_FULL_HEADER, e2e_full_rows, e2e_full_summary_rows

        _echo_table("whole model (e2e --full): predicted vs measured", E2E_FULL_HEADER, e2e_full_rows(v.end_to_end_full), right=set(range(3, 13)))
        _echo_table("whole model error summary (torch engine)", ["predictor", "phase", "points", "median |err|", "p90 |err|"], e2e_full_summary_rows(v.end_to_end_full), right={2, 3, 4})
    _echo_table("kernel targets", ["target", "goal", "value (unit)", "status", "detail"],
                [[t.name, t.goal, t.value_text(), t.status, t.detail] for t in v.targets], right={2},
                wrap=("goal", "detail"))
    _echo_table("error summary (our kernels)", ["prediction from", "points", "median |err|", "p90 |err|", "median err"], summary, right={1, 2, 3, 4}, wrap=("prediction from",))
    for what, lines in (("flag", v.flags()), ("failed check (not timed)", [f"{r.op}[{r.impl}] {r.shape} {r.dtype}: {r.note}" for r in v.failed])):
        for line in lines if max_rows <= 0 else lines[:max_rows]:
            typer.echo(f"{what}: {one_line(line)}")
        if 0 < max_rows < len(lines):
            typer.echo(f"... {len(lines) - max_rows:,} more {what} line(s) (--max-rows 0 shows every line)")
    for n in v.notes:
        typer.echo(f"note: {one_line(n)}")


# ------------------------------------------------------------------------------------------------


def e2e(
    results: Annotated[Path, typer.Option("--results", "-r", help="Results file to add the check to (extra.end_to_end); created when missing.")] = Path("results.json"),
    model: Annotated[str, typer.Option("--model", "-m", help="Model whose decoder layer is built (preset id or config.json).")] = "llama-3-8b",
    hw: Annotated[str | None, typer.Option("--hw", "--hw-file", help="Datasheet spec id or path (default: matched from the GPU name).")] = None,
    measured: Annotated[str | None, typer.Option("--measured", help="Measured spec (default: the one on file for the GPU).")] = None,
    prefill_batch: Annotated[int, typer.Option("--prefill-batch", help="Sequences in the prefill.")] = 1,
    prompt: Annotated[int, tokens_option("--prompt", help="Prompt tokens per sequence in the prefill.")] = 2048,
    batch: Annotated[int, typer.Option("--batch", help="Sequences in the decode step.")] = 8,
    context: Annotated[int, tokens_option("--context", help="Tokens in the KV cache at the decode step.")] = 4096,
    samples: Annotated[int, typer.Option("--samples", help="Minimum timed samples (>= 10).")] = 10,
    full: Annotated[bool, typer.Option("--full", help="The whole model: decode steps (one CUDA graph each, torch ops and our Triton kernels) over a batch x context grid and eager prefill; into extra.end_to_end_full.")] = False,
    budget_s: Annotated[float, typer.Option("--budget-s", help="With --full: GPU seconds for this model; no new point starts past it.")] = 30.0,
    triton: Annotated[bool, typer.Option("--triton/--no-triton", help="With --full: also time the decode step built from our Triton kernels (a few points; autotunes on first use).")] = True,
    device: Annotated[str, typer.Option("--device", hidden=True)] = "cuda",
    tiny: Annotated[bool, typer.Option("--tiny", hidden=True)] = False,
) -> None:
    """Time one decoder layer built from the kernels (prefill and a decode step) against the model; --full: the whole model."""
    cpu = _use_cpu(device, False, "e2e")
    if full:
        _e2e_full(results, model, hw, measured, budget_s, triton, cpu, tiny)
        return
    if samples < 10:
        raise RooflineError(f"--samples must be >= 10, got {samples}")
    for name, value in (("--prefill-batch", prefill_batch), ("--prompt", prompt), ("--batch", batch), ("--context", context)):
        if value < 1:
            raise RooflineError(f"{name} must be >= 1, got {value}")
    from rooflinecli import __version__
    from rooflinecli.bench.e2e import TINY_SHAPES, E2EShapes, run_e2e, tiny_config
    from rooflinecli.bench.environment import collect_environment, utc_now
    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_model
    from rooflinecli.results import Results, load_results

    cfg = get_model(model)
    if cfg.mla is not None or cfg.moe is not None or cfg.num_heads % cfg.num_kv_heads or cfg.head_dim not in (64, 128):
        raise RooflineError(f"--model {model}: the end-to-end layer needs a dense GQA/MHA model with head dim 64 or 128")
    env = collect_environment("cpu" if cpu else "cuda")
    if cpu:
        ds = get_spec(hw or "h200")
        ms = get_spec(measured) if measured else None
    else:
        ds, ms = _specs_for_gpu(hw, measured, env.get("gpu_name"))
    shapes = E2EShapes(prefill_batch, prompt, batch, context)
    if tiny:
        cfg, shapes = tiny_config(cfg), TINY_SHAPES
    check = run_e2e(cfg, ds, ms, shapes, "cpu" if cpu else "cuda", samples)
    check["environment"] = env
    base = load_results(results) if results.is_file() else Results(rows=(), environment=env, created_utc=utc_now(), tool_version=__version__, suite="e2e", hardware_spec=ds.id, measured_spec=ms.id if ms else None)
    from dataclasses import replace

    replace(base, extra={**base.extra, "end_to_end": check}).save(results)
    from rooflinecli.fmt import fmt_pct, fmt_us

    rows = []
    for p in check["phases"]:
        m = p.get("measured_s")
        rows.append([p["phase"], f"B{p['batch']} N{p['context']}", "ok" if p["correct"] else "FAILED " + p["error"], fmt_us(m), fmt_us(p["predicted_s_datasheet"]),
                     fmt_pct((p["predicted_s_datasheet"] - m) / m if m else None), fmt_us(p["predicted_s_measured"]),
                     fmt_pct((p["predicted_s_measured"] - m) / m if m and p["predicted_s_measured"] else None)])
    _echo_table(f"one {check['model']} decoder layer on {env.get('gpu_name')}", ["phase", "shape", "check", "measured us", "datasheet us", "err", "meas.-ceil. us", "err"], rows, right={3, 4, 5, 6, 7})
    typer.echo(f"wrote {one_line(results)} (extra.end_to_end)")
    if not all(p["correct"] for p in check["phases"]):
        raise typer.Exit(1)


def _e2e_full(results: Path, model: str, hw: str | None, measured: str | None, budget_s: float, triton: bool, cpu: bool, tiny: bool) -> None:
    """``e2e --full``: build and time the whole model, checkpointing the results after every point."""
    import math as _math

    if not (budget_s > 0 and _math.isfinite(budget_s)):
        raise RooflineError(f"--budget-s must be a finite number > 0, got {budget_s}")
    from rooflinecli import __version__
    from rooflinecli.bench.e2e_full import run_full, tiny_full_config, unsupported_reason
    from rooflinecli.bench.environment import collect_environment, utc_now
    from rooflinecli.bench.whole_model_file import WholeModelFile
    from rooflinecli.fmt import fmt_us
    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_model

    cfg = get_model(model)
    why = unsupported_reason(cfg)
    if why is not None:
        raise RooflineError(f"--model {model}: {why}")
    env = collect_environment("cpu" if cpu else "cuda")
    if cpu:
        ds, ms = get_spec(hw or "h200"), (get_spec(measured) if measured else None)
    else:
        ds, ms = _specs_for_gpu(hw, measured, env.get("gpu_name"))
    if tiny:
        cfg = tiny_full_config(cfg)
    out = WholeModelFile.open(results, env, ds, ms, __version__, utc_now())  # one file, one GPU

    def save(entry: dict) -> None:
        out.save(cfg.name, entry)

    def on_point(phase: str, engine: str, batch: int, context: int) -> None:
        typer.echo(f"{cfg.name}: {phase} {engine} B{batch} N{context}", err=True)

    entry = run_full(cfg, model, "cpu" if cpu else "cuda", tiny=tiny, budget_s=budget_s, on_point=on_point, triton=triton, checkpoint=save)
    save(entry)
    if entry.get("note"):
        typer.echo(f"note: {entry['note']}")
    def check(p: dict) -> str:
        word = p.get("backend", "-") if p["engine"] == "torch" else ("ok" if p.get("check_ok") else "CHECK FAILED vs torch")
        return word + (" GRAPH CHECK FAILED" if p.get("graph_check_ok") is False else "")

    rows = [[p["phase"], p["engine"], str(p["batch"]), str(p["context"]), str(p["layers"]), fmt_us(p["measured_s"]), check(p)] for p in entry["points"]]
    _echo_table(f"{cfg.name} ({entry['layers_used']} of {entry['layers_full']} layers) on {env.get('gpu_name')}", ["phase", "engine", "batch", "context", "layers", "measured us", "backend / check"], rows, right={2, 3, 4, 5})
    for f in entry["failed"]:
        typer.echo(f"failed: {f['phase']} {f['engine']} B{f['batch']} N{f['context']}: {f['error']}")
    skipped = entry["skipped"]
    if skipped:
        typer.echo(f"skipped {len(skipped)} points: " + "; ".join(f"{x['phase']} B{x['batch']} N{x['context']} ({x['reason']})" for x in skipped[:8]))
    typer.echo(f"wrote {one_line(results)} (extra.end_to_end_full, {len(entry['points'])} points, {len(entry['failed'])} failed, {entry['elapsed_s']:.1f} s)")


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
    app.command("calibrate")(calibrate)
    app.command("validate")(validate)
    app.command("e2e")(e2e)
