"""The gate's report as a terminal table, JSON, Markdown (a PR comment or a job summary) and JUnit
XML, and the one place those outputs are written (``write_outputs``).

Every string that came from a results file (op, shape, dtype, impl, notes that quote the
environment, paths, times) is data: shown through ``rooflinecli.errors.show_name`` /
``clean_text`` (no terminal escapes, control, bidi or zero-width characters; look-alike names
told apart by their code points), then escaped for the format (Markdown punctuation, XML by
ElementTree, never parsed as Rich markup).
"""

from __future__ import annotations

import math
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rooflinecli.console import TABLE_MAX_ROWS
from rooflinecli.errors import RooflineError, clean_text, one_line, show_name
from rooflinecli.gate.decision import REPORT_SCHEMA, Comparison, RegressReport

MARKDOWN_MARKER = "<!-- rooflinecli-regress -->"
JUNIT_PROLOG = "<?xml"
_VERDICT_STYLE = {"failed": "bold red", "regression": "bold red", "unstable": "magenta", "config-changed": "cyan",
                  "inconclusive": "yellow", "improvement": "green", "pass": ""}


# -- numbers -----------------------------------------------------------------------------------------


def us(s: float) -> str:
    """Seconds as microseconds: 1 decimal from 100 us, else 2; '-' when not finite."""
    if not math.isfinite(s):
        return "-"
    v = s * 1e6
    return f"{v:,.1f}" if v >= 100 else f"{v:.2f}"


def pct(x: float, signed: bool = False) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:+.1%}" if signed else f"{x:.1%}"


def p_value(x: float) -> str:
    return f"{x:.2g}" if math.isfinite(x) else "-"


# -- user strings ------------------------------------------------------------------------------------


def text(value: object) -> str:
    """A user string for one line of any output: cleaned, whitespace folded."""
    return one_line(value)


def kernel(key: tuple[str, str, str, str]) -> str:
    """``op shape dtype [impl]`` of a row key, each name shown distinguishably."""
    op, impl, shape, dtype = key
    return f"{show_name(op)} {show_name(shape)} {show_name(dtype)} [{show_name(impl)}]"


#: what could make a user string emphasis, a link, a code span, HTML or a table cell break
_MD_SPECIAL = set("\\`*[]<>|&~")


def md(value: object) -> str:
    """A user string for Markdown: cleaned, one line, every Markdown / HTML metacharacter escaped."""
    return "".join(f"\\{c}" if c in _MD_SPECIAL else c for c in one_line(value))


def md_name(value: object) -> str:
    return md(show_name(value))


def md_code(value: object) -> str:
    """A user string as a Markdown code span (shown literally: no emphasis, links or HTML):
    cleaned, one line, fenced with more backticks than it holds in a row."""
    t = one_line(value)
    run = max((len(m) for m in re.findall(r"`+", t)), default=0)
    fence = "`" * (run + 1)
    pad = " " if run or t.startswith(" ") or t.endswith(" ") else ""
    return f"{fence}{pad}{t}{pad}{fence}"


def md_kernel(key: tuple[str, str, str, str]) -> str:
    """``op shape dtype (impl)`` of a row key as a code span, each name shown distinguishably."""
    op, impl, shape, dtype = key
    return md_code(f"{show_name(op)} {show_name(shape)} {show_name(dtype)} ({show_name(impl)})")


# -- JSON --------------------------------------------------------------------------------------------


def _json_safe(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def render_json(rep: RegressReport) -> dict[str, Any]:
    """The report as data (strings as the files gave them; JSON escapes what it must)."""
    p = rep.params
    keys = ("op", "impl", "shape", "dtype")
    return {
        "schema": REPORT_SCHEMA,
        "verdict": rep.verdict,
        "exit_code": rep.exit_code,
        "summary": rep.summary_line(),
        "rule": rep.rule_text(),
        "params": {"threshold": p.threshold, "alpha": p.alpha, "min_abs_s": p.min_abs_s, "impls": list(p.impls) if p.impls else "all",
                   "strict": p.strict, "allow_missing": p.allow_missing},
        "baseline": rep.baseline,
        "candidate": rep.candidate,
        "hardware_mismatch": rep.hardware_mismatch,
        "counts": rep.counts,
        "rows": [_json_safe({**asdict(c), "label": c.label}) for c in rep.comparisons],
        "missing": {"rows": len(rep.only_in_baseline), "fail": rep.missing_fail},
        "only_in_baseline": [dict(zip(keys, k)) for k in rep.only_in_baseline],
        "only_in_candidate": [dict(zip(keys, k)) for k in rep.only_in_candidate],
        "not_compared": [{**dict(zip(keys, k)), "why": why} for k, why in rep.not_compared],
        "notes": list(rep.notes),
    }


# -- terminal ----------------------------------------------------------------------------------------


def _capped(items: list, max_rows: int) -> tuple[list, int]:
    """The first ``max_rows`` of ``items`` (all when ``max_rows`` is 0) and how many were left out."""
    if max_rows <= 0 or len(items) <= max_rows:
        return list(items), 0
    return list(items[:max_rows]), len(items) - max_rows


def render_table(rep: RegressReport, con, max_rows: int = TABLE_MAX_ROWS) -> None:
    """The comparison table, the flagged rows' reasons, missing / new rows, notes and the summary
    line, on a Rich console (no markup parsed). At most ``max_rows`` comparisons (0: all), most
    severe first as the report orders them, and as many lines of each list; the JSON, Markdown
    and JUnit outputs always hold every row."""
    from rich.text import Text

    from rooflinecli.console import fit_table

    shown, hidden = _capped(rep.comparisons, max_rows)
    kernel_col = "kernel (op shape dtype [impl])"
    cols = ["verdict", kernel_col, "base p50 us", "cand p50 us", "change", "noise", "p Holm", "n"]
    rows = [[c.label, kernel(c.key), us(c.baseline_median_s), us(c.candidate_median_s), pct(c.rel_change, True), pct(c.noise),
             p_value(c.p_shown), f"{c.n_baseline}/{c.n_candidate}"] for c in shown]
    con.print(fit_table(con, "roofline regress", cols, rows, styles=[_VERDICT_STYLE[c.verdict] or None for c in shown],
                        justify=["left", "left"] + ["right"] * 6, wrap=(kernel_col,), optional=("n", "p Holm", "noise")))
    if hidden:
        left = {}
        for c in rep.comparisons[len(shown):]:
            left[c.label] = left.get(c.label, 0) + 1
        what = ", ".join(f"{n:,} {label}" for label, n in left.items())
        con.print(Text(f"... {hidden:,} more row(s) not shown ({what}); --max-rows 0 shows every row, --json writes them all"))
    for c in shown:
        if c.verdict in ("failed", "regression", "unstable", "config-changed", "inconclusive"):
            con.print(Text(f"{c.label}: {kernel(c.key)}: {text(c.reason)}" + (f" ({text(c.note)})" if c.note else "")))
    missing = "fails the gate; --allow-missing to accept" if rep.missing_fail else "allowed by --allow-missing"
    lists = (
        ("missing from candidate", [f"{kernel(k)} ({missing})" for k in rep.only_in_baseline]),
        ("only in candidate", [f"{kernel(k)} (new, not compared)" for k in rep.only_in_candidate]),
        ("not compared", [f"{kernel(k)}: {text(why)}" for k, why in rep.not_compared]),
    )
    for title, lines in lists:
        shown_lines, more = _capped(lines, max_rows)
        for line in shown_lines:
            con.print(Text(f"{title}: {line}"))
        if more:
            con.print(Text(f"... {more:,} more '{title}' row(s); --max-rows 0 shows every row, --json writes them all"))
    for n in rep.notes:
        con.print(Text(f"note: {text(n)}"))
    con.print(Text(f"rule: {rep.rule_text()}"))
    con.print(Text(rep.summary_line(), style="bold red" if rep.exit_code else "bold"))


# -- Markdown ----------------------------------------------------------------------------------------


def _md_table(rows: list[Comparison]) -> list[str]:
    lines = [
        "| verdict | op | impl | shape | dtype | baseline p50 (us) | candidate p50 (us) | change | noise | p (Holm) | n |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in rows:
        v = f"**{c.label}**" if c.verdict in ("failed", "regression") else c.label
        lines.append(
            f"| {v} | {md_name(c.op)} | {md_name(c.impl)} | {md_name(c.shape)} | {md_name(c.dtype)} | {us(c.baseline_median_s)} | "
            f"{us(c.candidate_median_s)} | {pct(c.rel_change, True)} | {pct(c.noise)} | {p_value(c.p_shown)} | {c.n_baseline}/{c.n_candidate} |"
        )
    return lines


def render_markdown(rep: RegressReport, max_rows: int = 200) -> str:
    """Markdown for a PR comment or a job summary. Passing rows fold into a <details> block."""
    c = rep.counts
    icon = "❌" if rep.exit_code else ("⚠️" if c["inconclusive"] or c["unstable"] or c["config-changed"] else "✅")
    b, cand = rep.baseline, rep.candidate
    lines = [MARKDOWN_MARKER, f"## {icon} Kernel performance gate: {rep.verdict.upper()}", ""]
    lines += [f"**{rep.summary_line()}**", ""]
    lines.append(f"- GPU: baseline {md_code(b['gpu_name'])}, candidate {md_code(cand['gpu_name'])}")
    lines.append(f"- baseline: {md_code(b['path'])} ({md(b['created_utc'])}); candidate: {md_code(cand['path'])} ({md(cand['created_utc'])})")
    lines.append(f"- rule: {md(rep.rule_text())}")
    lines += [f"- note: {md(n)}" for n in rep.notes]
    lines.append("")
    flagged = [x for x in rep.comparisons if x.verdict != "pass"]
    passing = [x for x in rep.comparisons if x.verdict == "pass"]
    if flagged:
        lines += _md_table(flagged[:max_rows])
        if len(flagged) > max_rows:
            lines.append(f"\n_... {len(flagged) - max_rows} more flagged rows in the JSON output_")
        lines.append("")
        why = [f"- {md_code(f'{show_name(x.op)} {show_name(x.shape)} {show_name(x.dtype)}')} ({md_name(x.impl)}), {x.label}: {md(x.reason)}"
               for x in flagged[:max_rows] if x.verdict != "improvement"]
        if why:
            lines += why + [""]
    if passing:
        lines += [f"<details><summary>{len(passing)} passing</summary>", ""]
        lines += _md_table(passing[:max_rows])
        if len(passing) > max_rows:
            lines.append(f"\n_... {len(passing) - max_rows} more passing rows in the JSON output_")
        lines += ["", "</details>", ""]
    missing = "Missing from the candidate (" + ("fails the gate; `--allow-missing` to accept" if rep.missing_fail else "allowed by `--allow-missing`") + ")"
    for title, keys in ((missing, rep.only_in_baseline), ("Only in candidate (new, not compared)", rep.only_in_candidate)):
        if keys:
            lines += ["**" + title + ":** " + ", ".join(md_kernel(k) for k in keys), ""]
    if rep.not_compared:
        lines += ["**Not compared:** " + ", ".join(f"{md_kernel(k)}: {md(why)}" for k, why in rep.not_compared), ""]
    return "\n".join(lines).rstrip() + "\n"


# -- JUnit -------------------------------------------------------------------------------------------


def render_junit(rep: RegressReport) -> str:
    """JUnit XML: one testcase per kernel and shape; a regression, a failed check, a missing row
    (unless --allow-missing) and, with --strict, an unstable row are failures; an unstable row (not
    strict), an allowed missing row and a row only in the candidate are skipped test cases."""
    n_tests = len(rep.comparisons) + len(rep.only_in_baseline) + len(rep.only_in_candidate) + len(rep.not_compared)
    strict = rep.params.strict
    n_missing = len(rep.only_in_baseline)
    n_fail = rep.count("regression") + rep.count("failed") + (rep.count("unstable") if strict else 0) + (n_missing if rep.missing_fail else 0)
    n_skip = len(rep.only_in_candidate) + len(rep.not_compared) + (0 if strict else rep.count("unstable")) + (0 if rep.missing_fail else n_missing)
    root = ET.Element("testsuites", name="roofline regress", tests=str(n_tests), failures=str(n_fail), errors="0", skipped=str(n_skip))
    suite = ET.SubElement(root, "testsuite", name="roofline regress", tests=str(n_tests), failures=str(n_fail), errors="0", skipped=str(n_skip), time="0")
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("baseline", rep.baseline["path"]), ("candidate", rep.candidate["path"]), ("gpu", rep.candidate["gpu_name"]),
        ("threshold", f"{rep.params.threshold:g}"), ("alpha", f"{rep.params.alpha:g}"), ("min_abs_s", f"{rep.params.min_abs_s:g}"),
    ):
        ET.SubElement(props, "property", name=name, value=text(value))

    def case(key: tuple[str, str, str, str], time_s: str = "0") -> ET.Element:
        op, impl, shape, dtype = key
        return ET.SubElement(suite, "testcase", classname=f"regress.{show_name(op)}", name=f"{show_name(shape)} {show_name(dtype)} [{show_name(impl)}]", time=time_s)

    for c in rep.comparisons:
        tc = case(c.key, f"{c.candidate_median_s:.9f}" if math.isfinite(c.candidate_median_s) else "0")
        detail = (
            f"baseline p50 {us(c.baseline_median_s)} us, candidate p50 {us(c.candidate_median_s)} us, "
            f"change {pct(c.rel_change, True)}, noise {pct(c.noise)}, p_slower(Holm) {p_value(c.p_slower_adj)}, "
            f"n {c.n_baseline}/{c.n_candidate}; {text(c.reason)}" + (f"; {text(c.note)}" if c.note else "")
        )
        if c.verdict == "failed":
            ET.SubElement(tc, "failure", message="failed its correctness check (not timed)", type="correctness").text = detail
        elif c.verdict == "regression":
            ET.SubElement(tc, "failure", message=f"{c.label}: {c.rel_change:+.1%} slower", type="regression").text = detail
        elif c.verdict == "unstable" and strict:
            ET.SubElement(tc, "failure", message=f"unstable (--strict): {text(c.unstable_reason)}", type="unstable").text = detail
        elif c.verdict == "unstable":
            ET.SubElement(tc, "skipped", message=f"unstable, not judged: {text(c.unstable_reason)}")
            ET.SubElement(tc, "system-out").text = f"{c.label}: {detail}"
        else:
            ET.SubElement(tc, "system-out").text = f"{c.label}: {detail}"
    for k in rep.only_in_baseline:
        tc = case(k)
        if rep.missing_fail:
            ET.SubElement(tc, "failure", message="missing from the candidate (--allow-missing to accept)", type="missing")
        else:
            ET.SubElement(tc, "skipped", message="missing from the candidate (allowed by --allow-missing)")
    for k in rep.only_in_candidate:
        ET.SubElement(case(k), "skipped", message="only in candidate: not compared")
    for k, why in rep.not_compared:
        ET.SubElement(case(k), "skipped", message=f"not compared: {text(why)}")
    ET.indent(root)
    return JUNIT_PROLOG + ' version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# -- writing -----------------------------------------------------------------------------------------


def named_output(what: str, e: RooflineError) -> RooflineError:
    """A writer's one-line refusal ("<path>: cannot write: ...") prefixed with the option that named it."""
    return RooflineError(f"{what} {e}")


def write_outputs(rep: RegressReport, markdown: str | Path | None = None, junit: str | Path | None = None,
                  json_path: str | Path | None = None, step_summary: bool = True,
                  inputs: dict[str, str | os.PathLike[str] | None] | None = None) -> list[Path]:
    """Write the requested outputs atomically; append the Markdown to ``$GITHUB_STEP_SUMMARY`` when
    set (never when it names one of ``inputs``, a FIFO or a device). A failed write is one line
    naming the option, never a traceback: exit 1 must mean a regression and nothing else."""
    from rooflinecli.output import append_step_summary, json_text, write_text_atomic

    written = []
    md_text = None
    summary = os.environ.get("GITHUB_STEP_SUMMARY") if step_summary else None
    if markdown is not None or summary:
        md_text = render_markdown(rep)
    # each output replaces only a file of its own kind (a config named by mistake is refused)
    for what, path, body, kind in (("--markdown", markdown, lambda: md_text, MARKDOWN_MARKER),
                                   ("--junit", junit, lambda: render_junit(rep), JUNIT_PROLOG),
                                   ("--json", json_path, lambda: json_text(render_json(rep)) + "\n", REPORT_SCHEMA.split("/")[0] + "/")):
        if path is None:
            continue
        try:
            written.append(write_text_atomic(path, body(), kind=kind))
        except RooflineError as e:
            raise named_output(what, e) from None
    if summary:
        p = append_step_summary(md_text, inputs)
        if p is not None:
            written.append(p)
    return written
