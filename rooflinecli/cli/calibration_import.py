"""``roofline calibrate --import`` and ``roofline validate --calibration``: imported measured
per-op tables (``rooflinecli.importer``) turned into calibration files, and the accuracy of the
model fitted from them.

Called by the ``calibrate`` and ``validate`` commands (``cli.measure``) when those options are given.
"""

from __future__ import annotations

from pathlib import Path

import typer

from rooflinecli.errors import RooflineError, one_line


def default_calibration_path(gpu: str, engine: str) -> Path:
    """Where a shipped imported calibration of (GPU, engine) lives."""
    from rooflinecli.achievable import measured_dir

    return measured_dir() / f"{gpu}.{engine}.calibration.json.gz"


def run_import(system: str | None, framework: str | None, data: Path | None, out: Path | None, audit_out: Path | None, compare: Path | None,
               write_spec: bool = True) -> None:
    """Audit the data, build the (system, framework) calibration and write it atomically; with
    ``write_spec``, also the GPU's measured spec (``<gpu>-imported.toml`` beside the calibration,
    from every imported calibration of the GPU there, this one included), derived before anything
    is written so that a refusal leaves nothing behind."""
    from rooflinecli.importer.aiconfigurator import FRAMEWORKS, SYSTEMS, audit, build_calibration, compare_with_audit, encode, find_data_root, system_folder
    from rooflinecli.output import refuse_overwriting_inputs, write_bytes_atomic, write_json_atomic

    if not system:
        raise RooflineError("calibrate --import: --system is required (e.g. --system h100-sxm)")
    if not framework:
        raise RooflineError(f"calibrate --import: --engine is required ({', '.join(FRAMEWORKS)})")
    if framework not in FRAMEWORKS:
        raise RooflineError(f"--engine: unknown '{framework}' for an import; known: {', '.join(FRAMEWORKS)}")
    root = find_data_root(data)
    sysname = system_folder(root, system)
    gpu = next((k for k, v in SYSTEMS.items() if v == sysname), sysname)
    out = out or default_calibration_path(gpu, framework)
    if out.is_dir():
        raise RooflineError(f"--out {out}: is a folder; name the calibration file to write")
    refuse_overwriting_inputs({"--audit-compare": compare}, {"--out": out, "--audit-out": audit_out})
    reference = None
    if compare is not None:
        from rooflinecli.errors import parse_json_text, read_user_file

        reference = parse_json_text(read_user_file(compare, "reference audit"), str(compare))
        if not isinstance(reference, list) or not all(isinstance(x, dict) and "verdict" in x for x in reference):
            raise RooflineError(f"--audit-compare {compare}: expected a JSON list of tables with a 'verdict' each")
    audits = audit(root, None)
    doc = build_calibration(root, sysname, framework, audits)
    mine = [a for a in audits if a.system == sysname]
    doc["audit"] = [a.to_dict() for a in mine]
    data_bytes = encode(doc, out)
    spec_plan = _imported_spec_plan(gpu, framework, out, data_bytes) if write_spec else None
    write_bytes_atomic(out, data_bytes)
    if audit_out is not None:
        write_json_atomic(audit_out, [a.to_dict() for a in audits])
    for name, t in doc["tables"].items():
        p = t["provenance"]
        typer.echo(f"{name}: {p['rows_kept']:,} rows from {p['table_path']} ({p['framework']} {p['framework_version']}, provenance {p['table_provenance']})")
    skipped = [a for a in mine if not a.clean]
    typer.echo(f"audit: {len(mine)} tables of {sysname}, {len(skipped)} not measurements of this GPU and version:")
    for a in skipped:
        typer.echo(f"  skipped {a.path}: {a.verdict}")
    if reference is not None:
        c = compare_with_audit(audits, reference)
        typer.echo(f"audit vs {compare.name}: {c['agree']} of {c['compared']} verdicts agree, {len(c['differ'])} differ, {len(c['not_found'])} not found")
        for d in c["differ"][:20]:
            typer.echo(f"  differs: {d['path']}: ours '{d['ours']}', reference '{d['reference']}'")
    typer.echo(f"wrote {one_line(out)} ({out.stat().st_size / 1e6:.2f} MB, from {' '.join(x for x in (root.package, root.package_version) if x)})")
    if spec_plan is not None:
        _write_imported_spec(*spec_plan)


def _imported_spec_plan(gpu: str, framework: str, out: Path, data_bytes: bytes):
    """(path, spec document, comment) of the measured spec the import implies, or None with a line
    saying why there is none (a GPU without a datasheet spec, tables without a large GEMM): the
    calibration is still written. Refuses tables faster than the datasheet (they are not of this
    GPU). An engine's calibration already beside ``out`` joins this one."""
    import gzip
    import json

    from rooflinecli.achievable import IMPORTED_ENGINES
    from rooflinecli.achievable.calibration import parse_calibration
    from rooflinecli.hardware import builtin_specs
    from rooflinecli.importer.measured_spec import LARGE_GEMM, SPEC_NAME, gpu_ceilings, imported_calibrations_of, measured_spec_doc, spec_comment

    base = builtin_specs().get(gpu)
    if base is None:
        typer.echo(f"no measured spec: '{gpu}' has no datasheet spec in hardware_specs/ to base one on")
        return None
    text = gzip.decompress(data_bytes) if out.name.endswith(".gz") else data_bytes
    mine = parse_calibration(json.loads(text), str(out))
    cals = [(e, c) for e, c in imported_calibrations_of(gpu, out.parent) if e != framework] + [(framework, mine)]
    cals.sort(key=lambda ec: IMPORTED_ENGINES.index(ec[0]) if ec[0] in IMPORTED_ENGINES else len(IMPORTED_ENGINES))
    if not gpu_ceilings(base, cals):  # raises for a figure above the datasheet: those tables are not of this GPU
        typer.echo(f"no measured spec: no GEMM of these tables gives a ceiling (none with M, N, K >= {LARGE_GEMM}, nor weight-streaming shapes)")
        return None
    doc = measured_spec_doc(base, cals, cals[0][1].source)
    return out.parent / SPEC_NAME.format(gpu=gpu), doc, spec_comment(base, doc)


def _write_imported_spec(path: Path, doc: dict, comment: str) -> None:
    from rooflinecli.bench.calibrate import write_spec_file

    spec = write_spec_file(path, doc, comment)
    figures = ", ".join([f"{d} {v:,.1f} TFLOP/s" for d, v in sorted(doc.get("peak_dense_tflops", {}).items())]
                        + ([f"HBM {doc['memory']['bandwidth_gb_per_s']:,.1f} GB/s"] if "bandwidth_gb_per_s" in doc.get("memory", {}) else []))
    typer.echo(f"wrote {one_line(path)} (measured spec '{spec.id}' on '{spec.base}': {figures})")


def run_validate_calibration(target: str | None, as_json: bool) -> None:
    """Print the leave-shape-out and cross-framework errors of imported calibrations."""
    from rooflinecli.achievable.tables import validation_report
    from rooflinecli.fmt import json_dumps

    report = validation_report(target)
    if as_json:
        typer.echo(json_dumps(report))
        return
    from rooflinecli.cli.measure import _echo_table

    rows = [[r["gpu"], r["engine"], r["family"], f"{r['n']:,}", f"{r['median_abs_error']:.1%}", f"{r['p90_abs_error']:.1%}", f"{r['signed_median_error']:+.1%}",
             r["target"], {True: "yes", False: "NO", None: "-"}[r["meets_target"]]] for r in report["leave_shape_out"]]
    _echo_table("leave-shape-out error of the imported tables (each grid point predicted with its slice of the grid left out)",
                ["gpu", "engine", "op family", "points", "median |err|", "p90 |err|", "signed median", "target (median / p90)", "met"], rows, right={3, 4, 5, 6})
    rows = [[r["gpu"], r["fit"], r["check"], r["family"], f"{r['n']:,}", f"{r['median_abs_error']:.1%}", f"{r['p90_abs_error']:.1%}", f"{r['signed_median_error']:+.1%}"]
            for r in report["cross_framework"]]
    _echo_table("cross-framework error (tables of one engine predicting another engine's measurements of the same shapes)",
                ["gpu", "fit on", "checked on", "op family", "points", "median |err|", "p90 |err|", "signed median"], rows, right={4, 5, 6, 7})
    rows = [[r["gpu"], r["engine"], r["from"], r["family"], f"{r['n']:,}", f"{r['median_abs_error']:.1%}", f"{r['p90_abs_error']:.1%}", f"{r['signed_median_error']:+.1%}"]
            for r in report["transfer"]]
    _echo_table("leave-one-GPU-out transfer error (each GPU predicted from the nearest other measured GPU, scaled by the datasheet ceilings)",
                ["gpu", "engine", "from", "op family", "points", "median |err|", "p90 |err|", "signed median"], rows, right={4, 5, 6, 7})

