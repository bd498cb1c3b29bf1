"""CLI: ``roofline hw list | show | validate``: the GPUs the tool knows and their cited ceilings."""

from __future__ import annotations

from typing import Annotated

import typer

from rooflinecli.fmt import json_dumps

from rooflinecli.cli.options import JsonOption, forgive_gpu_names
from rooflinecli.errors import RooflineError

hw_app = typer.Typer(
    help="GPUs: datasheet and measured ceilings, with their sources.",
    no_args_is_help=True,
)

L2_VS_SMEM = (
    "L2 is one on-chip cache shared by the whole GPU; shared memory (SRAM) is a much smaller "
    "scratchpad per SM. The H100's 50 MB is its L2, not SRAM per SM (228 KB per SM)."
)


def _console():
    from rooflinecli.console import make_console

    return make_console(markup=False, emoji=False)


def _num(x: float, digits: int = 1) -> str:
    if x == int(x) and abs(x) >= 10:
        return f"{int(x):,}"
    return f"{x:,.{digits}f}"


def _est(spec, key: str) -> str:
    """A figure's mark: ` *` for an estimate, ` (m)` for a figure a measured spec set itself,
    ` (m)*` for one it set as an estimate from a measurement (a burst peak scaled to sustained)."""
    return {"estimate": " *", "measured": " (m)", "measured estimate": " (m)*"}.get(spec.provenance(key), "")


def list_cmd(json_out: JsonOption = False) -> None:
    """List every built-in and measured GPU spec with its key ceilings."""
    from rooflinecli.hardware import all_specs

    from rooflinecli.achievable import calibrated_engines

    specs = list(all_specs().values())
    if json_out:
        typer.echo(json_dumps([{**s.to_dict(), "calibrated_engines": dict(calibrated_engines(s))} for s in specs]))
        return
    from rooflinecli.console import fit_table

    cols = ["id", "name", "kind", "bf16 TFLOP/s", "fp8 TFLOP/s", "mem GB", "mem GB/s",
            "L2 MB", "smem/SM KB", "SMs", "bf16 ridge FLOP/B", "L2/HBM BW", "calibrated engines"]
    rows = []
    for s in specs:
        fp8 = s.peak_dense_tflops.get("fp8")
        rows.append([
            s.id,
            s.name,
            s.kind if s.base is None or s.id.startswith(s.base + "-") else f"{s.kind} ({s.base})",  # "h200-measured" names its base already
            _num(s.peak_dense_tflops["bf16"]) + _est(s, "peak_dense_tflops.bf16"),
            (_num(fp8) + _est(s, "peak_dense_tflops.fp8")) if fp8 is not None else "-",
            _num(s.memory_capacity_gb),
            _num(s.memory_bandwidth_gb_per_s) + _est(s, "memory.bandwidth_gb_per_s"),
            _num(s.l2_size_mb) + _est(s, "cache.l2_size_mb"),
            _num(s.smem_per_sm_kb),
            str(s.sm_count) + _est(s, "compute.sm_count"),
            f"{s.ridge_point('bf16'):.0f}",
            f"{s.onchip_to_hbm_bandwidth_ratio:.1f}x" + _est(s, "cache.l2_bandwidth_gb_per_s"),
            ", ".join(f"{e} ({src[0]})" for e, src in calibrated_engines(s)) or "-",
        ])
    c = _console()
    c.print(fit_table(c, "GPUs (dense peaks; * = estimate, (m) = measured, (m)* = estimated from a measurement)", cols, rows,
                      justify=["left" if col in ("id", "name", "kind", "calibrated engines") else "right" for col in cols],
                      wrap=("name", "calibrated engines"), optional=("name", "calibrated engines", "smem/SM KB", "L2/HBM BW", "L2 MB", "SMs", "kind")))
    c.print(L2_VS_SMEM)
    c.print("calibrated engines (the GPU is --hw, the engine --engine): (o) our own measurements, (i) imported vendor tables, (t) transferred from the nearest measured GPU, "
            "hardware_specs/measured/<gpu>.<engine>.calibration.json.gz")


def show_cmd(
    gpu: Annotated[str, typer.Argument(help="GPU id (see `roofline hw list`) or a spec file path (.toml).",
                                       parser=lambda v: forgive_gpu_names(v, check=False))],
    json_out: JsonOption = False,
) -> None:
    """Show one GPU spec: peaks and ridge points, memory levels, links, sources, estimates."""
    from rooflinecli.hardware import get_spec

    s = get_spec(gpu)
    if json_out:
        typer.echo(json_dumps(s.to_dict()))
        return
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    c = _console()
    head = f"{s.name}  [{s.id}, {s.kind}" + (f", base {s.base}" if s.base else "") + "]"
    c.print(head)
    c.print(f"file: {s.path}")

    from rooflinecli.console import fit_table

    peaks = [[dtype, _num(tflops) + _est(s, f"peak_dense_tflops.{dtype}"), f"{s.ridge_point(dtype):.1f}",
              f"{s.peak_flops_per_s(dtype) / s.l2_bandwidth_bytes_per_s:.1f}"] for dtype, tflops in s.peak_dense_tflops.items()]
    c.print(fit_table(c, "Dense peak throughput (* = estimate, (m) = measured, (m)* = estimated from a measurement)",
                      ["dtype", "TFLOP/s", "ridge FLOP/B (HBM)", "ridge FLOP/B (L2)"], peaks))

    rows = [
        ("HBM/GDDR capacity", f"{_num(s.memory_capacity_gb)} GB ({s.memory_type})", "memory.capacity_gb"),
        ("HBM/GDDR bandwidth", f"{_num(s.memory_bandwidth_gb_per_s)} GB/s", "memory.bandwidth_gb_per_s"),
        ("L2 size (whole GPU)", f"{_num(s.l2_size_mb)} MB", "cache.l2_size_mb"),
        ("L2 bandwidth", f"{_num(s.l2_bandwidth_gb_per_s)} GB/s", "cache.l2_bandwidth_gb_per_s"),
        ("shared memory per SM", f"{_num(s.smem_per_sm_kb)} KB", "cache.smem_per_sm_kb"),
        *([("shared memory bandwidth (all SMs)", f"{_num(s.smem_bandwidth_gb_per_s)} GB/s", "cache.smem_bandwidth_gb_per_s")]
          if s.smem_bandwidth_gb_per_s is not None else []),
        ("SMs (CUs)", str(s.sm_count), "compute.sm_count"),
        ("boost clock", f"{_num(s.boost_clock_mhz)} MHz", "compute.boost_clock_mhz"),
        ("GPU link (NVLink/IF)", f"{_num(s.gpu_link_gb_per_s)} GB/s", "interconnect.gpu_link_gb_per_s"),
        ("PCIe", f"{_num(s.pcie_gb_per_s)} GB/s", "interconnect.pcie_gb_per_s"),
        ("TDP", f"{_num(s.tdp_w)} W", "power.tdp_w"),
    ]
    c.print(fit_table(c, "Memory levels, links, power (* = estimate, (m) = measured, (m)* = estimated from a measurement)",
                      ["figure", "value", "key"], [[label, value + _est(s, key), key] for label, value, key in rows],
                      justify=["left", "right", "left"], wrap=("figure",), optional=("key",)))

    own = "the datasheet's figures" if s.kind != "measured" else "this spec's own figures: sustained peak, sustained copy"
    c.print(f"bf16 ridge point: {s.ridge_point('bf16'):.1f} FLOP/byte of HBM traffic ({own})")
    c.print(f"L2 / HBM bandwidth: {s.onchip_to_hbm_bandwidth_ratio:.2f}x"
            + (" (L2 bandwidth is an estimate)" if s.is_estimate("cache.l2_bandwidth_gb_per_s") else ""))
    c.print(f"shared memory, all SMs: {s.smem_total_bytes / 1e6:.1f} MB (vs {_num(s.l2_size_mb)} MB of L2)")
    c.print(f"estimates: {', '.join(sorted(s.estimates)) or 'none'}")
    _achievable_roof_line(c, s)

    if s.efficiency:
        eff = Table(title="Fitted efficiency (measured)", title_justify="left")
        for col in ("op kind", "memory", "compute"):
            eff.add_column(col, justify="left" if col == "op kind" else "right")
        for op_kind, regimes in s.efficiency.items():
            eff.add_row(op_kind, *(f"{regimes[r]:.3f}" if r in regimes else "-" for r in ("memory", "compute")))
        c.print(eff)
    if s.measured_with:
        c.print("measured with: " + ", ".join(f"{k}={v}" for k, v in s.measured_with.items()))

    c.print("sources:")
    for source in s.sources:
        c.print(Padding(Text(f"- {source.title}"), (0, 0, 0, 2), expand=False))  # text wraps within the width, indented
        c.print(f"    {source.url}", soft_wrap=True)  # a URL stays whole, to be copied
        if source.note:
            c.print(Padding(Text(source.note), (0, 0, 0, 4), expand=False))


def validate_cmd(
    files: Annotated[list[str], typer.Argument(help="Spec files (.toml) to check.")],
) -> None:
    """Check spec files: one line per file, `ok` or its problem (every implausible figure, a line
    each); exit 2 if any is bad. Loading a spec anywhere applies the same checks. A measured spec's
    calibration file is loaded and fitted too (what `analyze` would do with it)."""
    from rooflinecli.achievable import models_for
    from rooflinecli.hardware import load_user_spec
    from rooflinecli.hardware.plausible import ImplausibleSpec

    seen: dict[str, str] = {}
    bad = 0
    for f in files:
        try:
            spec = load_user_spec(f)
            if spec.id in seen:
                raise RooflineError(f"{f}: id: duplicate id '{spec.id}' (also in {seen[spec.id]})")
            if spec.measured_with.get("calibration"):
                models_for(spec)
        except ImplausibleSpec as e:
            for line in e.problems:
                typer.echo(f"error: {line}", err=True)
            bad += 1
            continue
        except RooflineError as e:
            typer.echo(f"error: {e}", err=True)
            bad += 1
            continue
        seen[spec.id] = f
        typer.echo(f"ok: {f} ({spec.id}, {spec.kind}" + (f", base {spec.base}" if spec.base else "") + ")")
    if bad:
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    hw_app.command("list")(list_cmd)
    hw_app.command("show")(show_cmd)
    hw_app.command("validate")(validate_cmd)
    app.add_typer(hw_app, name="hw")


def _achievable_roof_line(c, s) -> None:
    """A calibrated spec: the HBM ceiling of the achievable mode's roof and where it comes from
    (``ceilings.measured_roof_spec``); a calibration that does not load is said in one line."""
    if s.kind != "measured":
        return
    from rooflinecli.achievable import models_for
    from rooflinecli.ceilings import measured_roof_bandwidth
    from rooflinecli.errors import RooflineError

    try:
        models = models_for(s)
    except RooflineError as e:
        c.print(f"calibration: does not load ({e})", markup=False)
        return
    if models is None:
        return
    bw, source = measured_roof_bandwidth(s, models.streams)
    c.print(f"measured roof (the achievable mode's roof): HBM {bw:,.0f} GB/s, ridge {s.peak_flops_per_s('bf16') / (bw * 1e9):.0f} FLOP/B bf16 ({source})", markup=False)
