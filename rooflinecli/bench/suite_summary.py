"""The last lines of ``scripts/gpu_suite.sh``: stage statuses, timing quality (spread, the
``do_bench_cudagraph`` cross-check), the gate's false-alarm count on an unchanged commit, the kernel
targets, and the whole-model validation (roof, measured roof, achievable).

    python -m rooflinecli.bench.suite_summary OUT_DIR TOTAL_SECONDS

Reads only what the stages wrote; a missing file is one line saying so, never a traceback (a stage
that failed must not hide the others' figures). No plotly, no torch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def stage_lines(out: Path) -> list[str]:
    try:
        lines = (out / "stages.tsv").read_text().splitlines()[1:]
    except OSError:
        return ["  no stages.tsv"]
    rows = [line.split("\t") for line in lines if line.count("\t") == 2]
    return [f"  {name:<13} {status:<18} {secs:>4} s" for name, status, secs in rows]


def bench_lines(out: Path) -> list[str]:
    from rooflinecli.errors import RooflineError
    from rooflinecli.results import load_results

    path = out / "results.json"
    if not path.is_file():
        return ["  bench: no results.json"]
    try:
        res = load_results(path)
    except RooflineError as e:
        return [f"  bench: {e}"]
    from rooflinecli.bench.run_summary import quality_lines

    timed = [r for r in res.rows if r.correct and r.samples_s]
    methods: dict[str, int] = {}
    tuning: dict[str, int] = {}
    for r in timed:
        methods[r.method] = methods.get(r.method, 0) + 1
        if r.impl == "triton":
            tuning[r.tuning or "?"] = tuning.get(r.tuning or "?", 0) + 1
    host = sorted(r.host_us_per_call for r in timed if r.impl == "triton" and r.host_us_per_call is not None)
    lines = [
        f"  bench: {len(res.rows)} rows, {len(timed)} timed, {len(res.rows) - len(timed)} failed checks; methods "
        + ", ".join(f"{k} {v}" for k, v in sorted(methods.items()))
        + "; triton tuning " + ", ".join(f"{k} {v}" for k, v in sorted(tuning.items()))
    ]
    if host:
        lines.append(f"  host us per call (triton): median {host[len(host) // 2]:.1f}, max {host[-1]:.1f}; over 30 us: "
                     f"{sum(h > 30 for h in host)} of {len(host)}")
    bench_extra = res.extra.get("bench", {}) if isinstance(res.extra, dict) else {}
    cc = bench_extra.get("crosscheck") if isinstance(bench_extra, dict) else None
    lines += [f"  {line}" for line in quality_lines(res.rows, cc if isinstance(cc, list) else None)]
    return lines


def gate_lines(out: Path) -> list[str]:
    g = _load(out / "gate-regress.json")
    if not isinstance(g, dict):
        return ["  gate (same commit twice): no gate-regress.json"]
    counts: dict[str, int] = {}
    for row in g.get("rows", []) if isinstance(g.get("rows"), list) else []:
        v = str(row.get("verdict", "?")) if isinstance(row, dict) else "?"
        counts[v] = counts.get(v, 0) + 1
    return ["  gate (same commit twice): " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no rows")
            + f"; exit {g.get('exit_code', '?')}"]


def tuned_lines(out: Path) -> list[str]:
    files = sorted((out / "tuned").glob("*.json")) if (out / "tuned").is_dir() else []
    if not files:
        return ["  tune: no tuned file"]
    lines = []
    for f in files:
        d = _load(f)
        n = sum(len(v) for v in d.get("autotuners", {}).values()) if isinstance(d, dict) and isinstance(d.get("autotuners"), dict) else "?"
        lines.append(f"  tune: {f.name} ({n} keys)")
        choices = d.get("choices") if isinstance(d, dict) else None
        for name, entries in choices.items() if isinstance(choices, dict) else ():
            picked = [e.get("value") for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
            counts = ", ".join(f"{v} {picked.count(v)}" for v in sorted(set(map(str, picked))))
            lines.append(f"  tune: choice {name}: {len(picked)} shape classes ({counts})")
    rep = _load(out / "tune-report.json")
    spreads = []
    for t in rep.get("tuned", []) if isinstance(rep, dict) and isinstance(rep.get("tuned"), list) else []:
        c = [v for v in (t.get("candidates_us") or {}).values() if isinstance(v, (int, float)) and v > 0] if isinstance(t, dict) else []
        if len(c) > 1:
            spreads.append((max(c) / min(c), str(t.get("autotuner")), len(c)))
    if spreads:  # all near 1.00x would say every candidate ran one config (the bug fixed in 226966a)
        lo, hi = min(spreads), max(spreads)
        lines.append(f"  tune: slowest / fastest candidate per key {lo[0]:.2f}x ({lo[1]}) to {hi[0]:.2f}x ({hi[1]}), {len(spreads)} keys")
    return lines


def e2e_lines(out: Path) -> list[str]:
    d = _load(out / "validation-e2e.json")
    if not isinstance(d, dict):
        return ["  no validation-e2e.json"]
    return full_model_lines(d)


def full_model_lines(d: dict[str, Any]) -> list[str]:
    """Every whole-model point with the three predictions' errors, then their median / p90."""
    lines = []
    for p in d.get("end_to_end_full", []):
        lines.append(
            f"  e2e {p['model']:<14} {p['phase']:<7} {p['engine']:<6} B{p['batch']:<3} N{p['context']:<5} {p['measured_s'] * 1e3:8.3f} ms"
            f"  roof {_pct(p.get('error_roof'))}  roof-meas {_pct(p.get('error_roof_measured'))}  achievable {_pct(p.get('error_achievable'))}"
        )
    summ = d.get("end_to_end_full_summary") or {}
    for key in ("roof", "roof_measured", "achievable"):
        for scope in ("all", "decode", "prefill"):
            st = (summ.get(key) or {}).get(scope) or {}
            if st.get("n"):
                lines.append(f"  e2e {key:<13} {scope:<7}: median |err| {_pct(st.get('median_abs_error'))}, p90 {_pct(st.get('p90_abs_error'))} (n {st.get('n')})")
    return lines


def validation_lines(out: Path) -> list[str]:
    d = _load(out / "validation.json")
    if not isinstance(d, dict):
        return ["  no validation.json"]
    lines = [f"  GPU {d.get('gpu_name')}; specs {d.get('datasheet_spec')} / {d.get('measured_spec')}"]
    for basis, s in (d.get("summary") or {}).items():
        o = s.get("overall", {})
        lines.append(f"  kernels vs {basis:<9}: median |err| {_pct(o.get('median_abs_error'))}, p90 {_pct(o.get('p90_abs_error'))} (n {o.get('n')})")
    for t in d.get("targets", []):
        val = "-" if t.get("value") is None else f"{t['value']:.2f}"
        lines.append(f"  target {t['name']:<22} {t['status']:<12} {val:>6}  {t['detail']}")
    flags = d.get("flags", [])
    lines += [f"  flag: {f}" for f in flags[:5]] + ([f"  ... {len(flags) - 5} more flags in validation.json"] if len(flags) > 5 else [])
    lines.append(f"  flags: {len(flags)}; failed checks: {len(d.get('failed', []))}")
    return lines


def calibration_lines(out: Path) -> list[str]:
    """The measured spec's ceilings (sustained, burst, read-only) and what the achievable model
    fitted from the calibration that matters for the next decisions: the streamed-GEMM ratio."""
    spec_path = out / "measured_spec.toml"
    if not spec_path.is_file():
        return ["  no measured_spec.toml"]
    from rooflinecli.hardware import load_spec_file

    spec = load_spec_file(spec_path)
    mw = spec.measured_with
    lines = [f"  calibrate: bf16 {spec.peak_dense_tflops.get('bf16', 0):.1f} TFLOP/s sustained (burst {mw.get('burst peak_dense_tflops.bf16', '-')}), "
             f"copy {spec.memory_bandwidth_gb_per_s:.0f} GB/s sustained (burst {mw.get('burst memory.bandwidth_gb_per_s', '-')}), "
             f"read-only {mw.get('read memory.bandwidth_gb_per_s', '-')} GB/s"]
    from rooflinecli.achievable import models_for
    from rooflinecli.errors import RooflineError

    try:
        m = models_for(spec)
    except RooflineError as e:  # a partial grid (a dry run, a cut budget) may not fit
        return lines + [f"  achievable fit: none ({e})"]
    if m is not None:
        ratio = m.to_dict().get("gemm_stream_ratio") or {}
        lines.append("  gemm_stream ratio (streamed / single-GEMM fit) per M: "
                     + (", ".join(f"M{k} {v:.3f}" for k, v in ratio.items()) if ratio else "no gemm_stream rows"))
        mla = m.linear.get("mla_decode_matmul")
        lines.append("  absorbed MLA decode (torch ops): " + (
            f"t0 {mla.coef[0] * 1e6:.1f} us, {1 / mla.coef[1] / 1e9:,.0f} GB/s, {1 / mla.coef[2] / 1e12:,.0f} TFLOP/s (fitted, summed terms)"
            if mla is not None and mla.coef[1] > 0 and mla.coef[2] > 0 else
            "fitted" if mla is not None else "no mla_decode_matmul rows"))
        lines.append("  torch MoE experts (moe_grouped): " + _moe_lines(m, spec))
    return lines


def _moe_lines(m, spec) -> str:
    """Each measured expert shape's rows: TFLOP/s and GB/s at its smallest and largest token count."""
    from rooflinecli.achievable import calibration_for

    moe = m.linear.get("moe_grouped")
    if moe is None:
        return "no moe_grouped rows"
    rows = sorted((r for r in calibration_for(spec).rows if r.op == "moe_grouped"), key=lambda r: (r.shape["E"], r.shape["T"]))
    parts = []
    for E in sorted({r.shape["E"] for r in rows}):
        fam = [r for r in rows if r.shape["E"] == E]
        parts += [f"E{E} T{r.shape['T']} {r.t_graph_s * 1e6:,.0f} us ({r.flops / r.t_graph_s / 1e12:,.0f} TFLOP/s, "
                  f"{r.bytes / r.t_graph_s / 1e9:,.0f} GB/s)" for r in (fam[0], fam[-1])]
    return "; ".join(parts) + " (fitted per expert shape)"


def summary(out: Path, total_s: str) -> list[str]:
    lines = [f"\ngpu_suite summary ({total_s} s), {out}"]
    for part in (stage_lines, tuned_lines, calibration_lines, bench_lines, gate_lines, e2e_lines, validation_lines):
        try:
            lines += part(out)
        except Exception as e:  # noqa: BLE001 - one broken part must not hide the others
            lines.append(f"  {part.__name__}: could not summarize ({type(e).__name__}: {e})")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m rooflinecli.bench.suite_summary OUT_DIR TOTAL_SECONDS", file=sys.stderr)
        return 2
    print("\n".join(summary(Path(argv[0]), argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
