"""Rendering of a validation: the summary table and the Markdown report, and the whole-model
(``e2e --full``) table rows the terminal view shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rooflinecli.bench.e2e_validation import E2E_PREDICTORS, e2e_full_stats
from rooflinecli.bench.validate import E2E_ERROR_GOAL, KERNEL_ERROR_GOAL, Validation


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.1f}%"


def _abs_pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e6:.4g}"


def e2e_full_rows(points: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Table rows: model, phase, engine, B, N, layers, measured us, then each predictor's us and error."""
    rows = []
    for p in points:
        layers = f"{p['layers']}/{p['layers_full']}" if p.get("reduced") else str(p["layers"])
        row = [p["model"], p["phase"], p["engine"], str(p["batch"]), str(p["context"]), layers, _us(p["measured_s"])]
        for key, _, _ in E2E_PREDICTORS:
            row += [_us(p[f"predicted_s_{key}"]), _pct(p[f"error_{key}"])]
        rows.append(row + (["FASTER THAN ROOF"] if p.get("faster_than_roof") or p.get("faster_than_measured_roof") else [""]))
    return rows


E2E_FULL_HEADER = ["model", "phase", "engine", "batch", "context", "layers", "measured us", "roof us", "err", "roof-meas. us", "err", "achievable us", "err", "flag"]


def e2e_full_summary_rows(points: Sequence[dict[str, Any]]) -> list[list[str]]:
    """[predictor, points, median |err|, p90 |err|] over torch-engine points, overall then per phase."""
    stats = e2e_full_stats(points)
    rows = []
    for key, _, label in E2E_PREDICTORS:
        for scope in ("all", "decode", "prefill"):
            st = stats[key][scope]
            if st["n"]:
                rows.append([label, scope, str(st["n"]), _abs_pct(st["median_abs_error"]), _abs_pct(st["p90_abs_error"])])
    return rows


def summary_table(v: Validation) -> list[list[str]]:
    """[basis, n, median |err|, p90 |err|, median signed err] for our kernels."""
    out = []
    for basis, label in (("datasheet", "datasheet ceilings"), ("measured", "measured ceilings"), ("fitted", "measured + fitted efficiency (leave-one-out)")):
        if basis == "measured" and v.measured is None:
            continue
        s = v.stats(basis)["overall"]
        out.append([label, str(s["n"]), _abs_pct(s["median_abs_error"]), _abs_pct(s["p90_abs_error"]), _pct(s["median_error"])])
    return out


def to_markdown(v: Validation) -> str:
    lines = [f"# Validation: {v.gpu_name}", ""]
    lines.append(
        f"Results `{v.results_path}`; datasheet spec `{v.datasheet.id if v.datasheet else '-'}`, measured spec "
        f"`{v.measured.id if v.measured else '-'}`. Error = (predicted - measured) / measured; our Triton kernels. "
        f"Goal: median |error| <= {KERNEL_ERROR_GOAL:.0%} against measured ceilings, <= {E2E_ERROR_GOAL:.0%} end to end."
    )
    lines += ["", "| prediction from | points | median abs error | p90 abs error | median error |", "|---|---:|---:|---:|---:|"]
    lines += ["| " + " | ".join(r) + " |" for r in summary_table(v)]
    if v.end_to_end:
        lines += ["", "## End to end (one decoder layer)", "", "| phase | measured us | datasheet us | error | measured-ceiling us | error | fitted us | error |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for p in v.end_to_end:
            lines.append(
                f"| {p.get('phase')} | {_us(p.get('measured_s'))} | {_us(p.get('predicted_s_datasheet'))} | {_pct(p.get('error_datasheet'))} | "
                f"{_us(p.get('predicted_s_measured'))} | {_pct(p.get('error_measured'))} | {_us(p.get('predicted_s_fitted'))} | {_pct(p.get('error_fitted'))} |"
            )
    if v.end_to_end_full:
        lines += ["", "## Whole model (e2e --full)", "",
                  "Error = (predicted - measured) / measured. Summary over torch-engine points (decode: one CUDA graph per step; prefill: eager).", "",
                  "| predictor | phase | points | median abs error | p90 abs error |", "|---|---|---:|---:|---:|"]
        lines += ["| " + " | ".join(r) + " |" for r in e2e_full_summary_rows(v.end_to_end_full)]
        lines += ["", "| " + " | ".join(E2E_FULL_HEADER) + " |", "|" + "---|" * 6 + "---:|" * 7 + "---|"]
        lines += ["| " + " | ".join(r) + " |" for r in e2e_full_rows(v.end_to_end_full)]
    lines += ["", "## Kernel targets", "", "| target | goal | value (unit) | status | detail |", "|---|---|---:|---|---|"]
    for t in v.targets:
        lines.append(f"| {t.name} | {t.goal} | {t.value_text()} | {t.status} | {t.detail} |")
    lines += ["", "## By op (our kernels, median abs error)", "", "| op | points | datasheet | measured | fitted (LOO) |", "|---|---:|---:|---:|---:|"]
    ds_by, ms_by, ft_by = (v.stats(b)["by_op"] for b in ("datasheet", "measured", "fitted"))
    for op in ds_by:
        lines.append(
            f"| {op} | {ds_by[op]['n']} | {_abs_pct(ds_by[op]['median_abs_error'])} | "
            f"{_abs_pct(ms_by.get(op, {}).get('median_abs_error')) if v.measured else '-'} | {_abs_pct(ft_by[op]['median_abs_error'])} |"
        )
    lines += [
        "",
        "## Per kernel and shape",
        "",
        "| op | impl | shape | dtype | bound | measured us (p20-p80) | TFLOP/s | GB/s | datasheet us | err | measured-ceiling us | err | fitted us | err |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in v.rows:
        j = r.to_json()
        flag = " **above roof**" if r.above_roof else ""
        lines.append(
            f"| {r.op} | {r.impl} | {r.shape} | {r.dtype} | {r.bound}{flag} | {_us(r.measured_s)} ({_us(r.p20_s)}-{_us(r.p80_s)}) | "
            f"{j['achieved_tflops']:.1f} | {j['achieved_gb_per_s']:.0f} | {_us(r.predicted_datasheet_s)} | {_pct(j['error_datasheet'])} | "
            f"{_us(r.predicted_measured_s)} | {_pct(j['error_measured'])} | {_us(r.predicted_fitted_s)} | {_pct(j['error_fitted'])} |"
        )
    flags = v.flags()
    if flags:
        lines += ["", "## Flags", ""] + [f"- {f}" for f in flags]
    if v.failed:
        lines += ["", "## Failed checks (not timed)", ""] + [f"- {r.op}[{r.impl}] {r.shape} {r.dtype}: {r.note}" for r in v.failed]
    if v.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in v.notes]
    return "\n".join(lines) + "\n"
