"""The report's HTML: one self-contained page.

- plotly.js is inlined ONCE (``plotly.offline.get_plotlyjs()``); each figure is a JSON block drawn
  with ``Plotly.newPlot``; no CDN, no MathJax, no request to any host.
- Every user-provided string is escaped: ``html.escape`` in the markup, and every JSON block
  (figures and the report data, ``<script type="application/json" id="report-data">``) has ``<``,
  ``>``, ``&`` and the JS line separators written as ``\\uXXXX`` escapes, so no string can close
  its ``<script>`` element.
- Tables with class ``sortable`` sort on a header click (a few lines of inline JS, no library);
  cells carry their raw number in ``data-v``.
- Source URLs of the spec files are shown as text, not links: the page holds no ``src``/``href``
  to another host outside plotly's own bundle.
"""

from __future__ import annotations

from rooflinecli.fmt import fmt_bytes, fmt_num, fmt_si

import html
import json
import math
from typing import Any

from rooflinecli.fmt import fmt_time


def e(x: Any) -> str:
    """Escape for HTML text and attribute values."""
    return html.escape("" if x is None else str(x), quote=True)


def safe_json(obj: Any) -> str:
    """JSON that can sit inside a ``<script>`` element: no raw ``<``, ``>`` or ``&`` (they can only
    occur inside strings, where ``\\u003c`` is the same character), no U+2028/2029."""
    text = obj if isinstance(obj, str) else json.dumps(obj, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    return (
        text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x * 100:+.1f}%" if signed else f"{x * 100:.1f}%"


def _num(x: float | None, fmt: str = ".3g") -> str:
    """``x`` in ``fmt``; a general ("g") format goes through ``fmt_num`` (no exponent above 1e-4:
    "1,240" where ``.3g`` says "1.24e+03"), keeping its significant digits."""
    if x is None:
        return "-"
    if fmt.endswith("g") and abs(x) >= 1e-4:
        return fmt_num(x, int(fmt.strip(",.g") or 6))
    return format(x, fmt)


class Cell:
    """A table cell: shown text and the raw value it sorts by."""

    def __init__(self, text: Any, value: Any = None, cls: str = ""):
        self.text, self.value, self.cls = text, value, cls

    def render(self) -> str:
        v = "" if self.value is None else f' data-v="{e(self.value)}"'
        c = f' class="{e(self.cls)}"' if self.cls else ""
        return f"<td{v}{c}>{e(self.text)}</td>"


def table(columns: list[str], rows: list[list[Any]], sortable: bool = True, cls: str = "", tid: str = "") -> str:
    head = "".join(f'<th title="sort">{e(c)}</th>' if sortable else f"<th>{e(c)}</th>" for c in columns)
    body = []
    for r in rows:
        body.append("<tr>" + "".join(c.render() if isinstance(c, Cell) else f"<td>{e(c)}</td>" for c in r) + "</tr>")
    classes = " ".join(x for x in ("sortable" if sortable else "", cls) if x)
    idattr = f' id="{e(tid)}"' if tid else ""
    return f'<table class="{classes}"{idattr}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def kv_table(pairs: list[tuple[str, Any]]) -> str:
    return '<table class="kv"><tbody>' + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in pairs) + "</tbody></table>"


def figure_block(fig_id: str, fig_json: str, caption: str = "") -> str:
    cap = f'<p class="caption">{e(caption)}</p>' if caption else ""
    return (
        f'<div class="figure" id="fig-{fig_id}" data-fig="figdata-{fig_id}"></div>{cap}\n'
        f'<script type="application/json" id="figdata-{fig_id}">{safe_json(fig_json)}</script>\n'
    )


# ------------------------------------------------------------------------------------------------
# Sections
# ------------------------------------------------------------------------------------------------


def _summary(d: dict[str, Any]) -> str:
    a, m, gpu = d["analysis"], d["model"], d["hardware"][0]
    wl = a["workload"]
    mem = a["memory"]
    cb = a["decode_compute_bound_batch"]
    cbg = a["decode_gemm_compute_bound_batch"]
    ach = a.get("mode") == "achievable"
    pairs = [
        ("model", f"{m['display_name']} ({m['name']}; {m['attention']}, {m['num_layers']} layers, {m['total_params'] / 1e9:.3g} B params, {m['active_params'] / 1e9:.3g} B active)"),
        ("GPU", f"{gpu['name']} ({gpu['id']}, {gpu['kind']}); {wl['num_gpus']} GPU(s) per replica (TP {wl['tp']}, EP {wl['ep']})"),
        ("workload", f"batch {wl['batch']}, prompt {wl['prompt_len']:,}, gen {wl['gen_len']:,}; {wl['compute_dtype']} compute, {wl.get('weights_format', wl['weight_dtype'])} weights, KV {wl['kv_dtype'] if wl['kv_bits'] is None else str(wl['kv_bits']) + '-bit'}"),
        ("times", (f"achievable: the calibrated vendor-kernel model ({a.get('engine')} engine), the measured roof beside; the per-op "
                   "numbers and the roofline chart's op markers are the roof's" if ach else f"{a.get('mode', 'datasheet')}: the roofline (no calibration)")),
        ("TTFT (prefill)", f"{fmt_time(a['ttft_s'])} ({a['prefill']['bound']}-bound)" + (f"; roof {fmt_time(a['roof_ttft_s'])}" if ach else "")),
        ("TPOT first / mean / last", f"{fmt_time(a['tpot_first_s'])} / {fmt_time(a['tpot_s'])} / {fmt_time(a['tpot_last_s'])} ({a['decode']['bound']}-bound)"
         + (f"; roof {fmt_time(a['roof_tpot_s'])} (mean)" if ach else "")),
        ("end-to-end latency", fmt_time(a["e2e_latency_s"])),
        ("decode throughput", f"{a['tokens_per_s_per_sequence']:,.1f} tokens/s per sequence, {a['tokens_per_s_per_gpu']:,.0f} per GPU"),
        ("ridge point", f"{a['ridge_point_flop_per_byte']:,.0f} FLOP/byte ({wl['compute_dtype']} peak / HBM bandwidth of the roof's ceilings)"),
        ("decode turns compute-bound at", (f"batch {cbg:,} for the matmuls; " if cbg else "matmuls: beyond batch 65,536; ")
         + (f"batch {cb:,} for the whole step" if cb else "whole step: never up to batch 65,536")
         + f" (context {a['decode_compute_bound_context']:,})"),
        ("KV read = weight read at", f"context {math.ceil(a['kv_crossover_context']):,}" if a["kv_crossover_context"] else "never"),
        ("memory per GPU", f"weights {fmt_bytes(mem['weights_bytes'])} + KV {fmt_bytes(mem['kv_cache_bytes'])} + workspace {fmt_bytes(mem['activation_workspace_bytes'])} = {fmt_bytes(mem['total_bytes_per_gpu'])} of {fmt_bytes(mem['capacity_bytes_per_gpu'])}: {'fits' if mem['fits'] else 'DOES NOT FIT'}"),
    ]
    if a.get("cost_per_million_output_tokens_usd") is not None:
        pairs.append(("cost", f"USD {fmt_num(a['cost_per_million_output_tokens_usd'])} per million output tokens (GPU time of the whole request: prefill and decode)"))
    warn = "".join(f'<p class="warning">warning: {e(w)}</p>' for w in d["warnings"])
    return kv_table(pairs) + warn


def _ops_table(d: dict[str, Any]) -> str:
    cols = ["phase", "op", "category", "kind", "layers", "FLOPs", "bytes", "weights", "KV r+w", "activations", "AI (FLOP/B)", "time", "share of phase", "% of compute peak", "% of HBM bandwidth", "bound"]
    rows = []
    for p in d["ops"]:
        rows.append([
            p["phase"], p["name"], p["category"], p["kind"], Cell(p["layers"], p["layers"]),
            Cell(fmt_si(p["flops"], "FLOP"), p["flops"]), Cell(fmt_bytes(p["bytes"]), p["bytes"]), Cell(fmt_bytes(p["weights_bytes"]), p["weights_bytes"]),
            Cell(fmt_bytes(p["kv_bytes"]), p["kv_bytes"]), Cell(fmt_bytes(p["activation_bytes"]), p["activation_bytes"]),
            Cell(_num(p["arithmetic_intensity_flop_per_byte"]), p["arithmetic_intensity_flop_per_byte"]),
            Cell(fmt_time(p["time_s"]), p["time_s"]), Cell(_pct(p["share_of_phase"]), p["share_of_phase"]),
            *(Cell(_num(v, ".2g") + "%" if v is not None else "-", v) for v in (p.get("pct_of_peak_flops"), p.get("pct_of_bandwidth"))), p["bound"],
        ])
    return table(cols, rows, tid="ops-table")


def _variants_table(d: dict[str, Any]) -> str:
    v = d["attention_variants"]
    cols = ["variant", "attention", "KV bytes/token", f"KV cache per GPU at {v['context']:,}", "vs configured", "KV = weights at context", "TTFT", "TPOT", "decode tokens/s per GPU", "fits"]
    rows = [[
        r["variant"], r["attention"], Cell(fmt_bytes(r["kv_bytes_per_token"]), r["kv_bytes_per_token"]), Cell(fmt_bytes(r["kv_cache_bytes"]), r["kv_cache_bytes"]),
        Cell(_num(r["kv_cache_vs_configured"], ".3g") + "x" if r["kv_cache_vs_configured"] is not None else "-", r["kv_cache_vs_configured"]),
        Cell(f"{math.ceil(r['crossover_context_tokens']):,}" if r["crossover_context_tokens"] else "never", r["crossover_context_tokens"]),
        Cell(fmt_time(r["ttft_s"]), r["ttft_s"]), Cell(fmt_time(r["tpot_s"]), r["tpot_s"]),
        Cell(_num(r["decode_tokens_per_s_per_gpu"], ",.0f"), r["decode_tokens_per_s_per_gpu"]), "yes" if r["fits"] else "no",
    ] for r in v["rows"]]
    notes = "".join(f'<p class="note">{e(n)}</p>' for n in v["notes"])
    return table(cols, rows) + notes


def _moe_table(d: dict[str, Any]) -> str:
    m = d["moe"]
    rows = [[c["component"], Cell(f"{c['total_params'] / 1e9:.4g}", c["total_params"]), Cell(f"{c['active_params'] / 1e9:.4g}", c["active_params"])] for c in m["components"]]
    rows.append(["total", Cell(f"{m['total_params'] / 1e9:.4g}", m["total_params"]), Cell(f"{m['active_params'] / 1e9:.4g}", m["active_params"])])
    pub = []
    if m["published_total_params"]:
        pub.append(f"Published total {m['published_total_params'] / 1e9:.4g} B")
    if m["published_active_params"]:
        pub.append(f"published active {m['published_active_params'] / 1e9:.4g} B")
    note = f'<p class="note">Active counts top-k of the routed experts and includes embeddings; without them: {m["active_params_without_embeddings"] / 1e9:.4g} B. {e("; ".join(pub))}</p>'
    return table(["component", "total params (B)", "active params (B)"], rows) + note


def _gpus_table(d: dict[str, Any]) -> str:
    cols = ["GPU", "name", "kind", "times", "TTFT", "TPOT", "decode tokens/s per GPU", "ridge (FLOP/B)", "memory per GPU", "fits", "whole step compute-bound at batch"]
    rows = [[
        g["hw"], g["name"], g["kind"], g.get("mode", "roof"), Cell(fmt_time(g["ttft_s"]), g["ttft_s"]), Cell(fmt_time(g["tpot_s"]), g["tpot_s"]),
        Cell(f"{g['tokens_per_s_per_gpu']:,.0f}", g["tokens_per_s_per_gpu"]), Cell(f"{g['ridge_point_flop_per_byte']:,.0f}", g["ridge_point_flop_per_byte"]),
        Cell(f"{fmt_bytes(g['total_bytes_per_gpu'])} of {fmt_bytes(g['memory_capacity_bytes'])}", g["total_bytes_per_gpu"]), "yes" if g["fits"] else "no",
        Cell(f"{g['decode_compute_bound_batch']:,}" if g["decode_compute_bound_batch"] else "never", g["decode_compute_bound_batch"]),
    ] for g in d["gpus"]]
    return table(cols, rows)


def _us(s: float | None) -> str:
    """Seconds as microseconds, 4 significant figures, never in exponent notation: ``304,300``,
    ``812.3``, ``0.0419`` (the column header carries the unit)."""
    if s is None:
        return "-"
    us = float(f"{s * 1e6:.4g}")
    return f"{us:,.0f}" if abs(us) >= 1000 else f"{us:.4g}"


def _validation(d: dict[str, Any]) -> str:
    v = d["validation"]
    out = [f"<p>Results <code>{e(v['results'])}</code> from <b>{e(v['gpu_name'])}</b>; datasheet spec <code>{e(v['datasheet_spec'])}</code>, "
           f"measured spec <code>{e(v['measured_spec'] or '-')}</code>. Error = (predicted - measured) / measured.</p>"]
    srows = []
    for basis, s in v["summary"].items():
        o = s["overall"]
        srows.append([basis, Cell(o["n"], o["n"]), Cell(_pct(o["median_abs_error"]), o["median_abs_error"]), Cell(_pct(o["p90_abs_error"]), o["p90_abs_error"]), Cell(_pct(o["median_error"], True), o["median_error"])])
    out.append(table(["prediction from", "points", "median |error|", "p90 |error|", "median error"], srows))
    cols = ["op", "impl", "shape", "dtype", "bound", "measured us (p20-p80)", "TFLOP/s", "GB/s", "datasheet us", "error", "measured-ceiling us", "error", "% of roof (measured ceilings, else datasheet)", "flag"]
    by_key = {(p["op"], p["impl"], p["shape"], p["dtype"]): p for p in d["measured_points"]}
    rows = []
    for r in v["rows"]:
        p = by_key.get((r["op"], r["impl"], r["shape"], r["dtype"]), {})
        flag = "ABOVE ROOF" if (r["above_roof"] or r["above_measured_roof"]) else ""
        rows.append([
            r["op"], r["impl"], r["shape"], r["dtype"], r["bound"],
            Cell(f"{_us(r['measured_s'])} ({_us(r['p20_s'])}-{_us(r['p80_s'])})", r["measured_s"]),
            Cell(_num(r["achieved_tflops"], ".4g") if r["flops"] else "-", r["achieved_tflops"]), Cell(_num(r["achieved_gb_per_s"], ",.4g"), r["achieved_gb_per_s"]),
            Cell(_us(r["predicted_datasheet_s"]), r["predicted_datasheet_s"]), Cell(_pct(r["error_datasheet"], True), r["error_datasheet"]),
            Cell(_us(r["predicted_measured_s"]), r["predicted_measured_s"]), Cell(_pct(r["error_measured"], True), r["error_measured"]),
            Cell(_num(p.get("pct_of_roof"), ".0f") + ("%" if p.get("pct_of_roof") is not None else ""), p.get("pct_of_roof")), Cell(flag, 1 if flag else 0, "flag" if flag else ""),
        ])
    out.append(table(cols, rows, tid="validation-table"))
    if v.get("targets"):
        from rooflinecli.bench.kernel_targets import target_value_text

        trows = [[x["name"], x["goal"], Cell(x.get("value_text") or target_value_text(x["value"], x.get("unit", "")), x["value"]), x["status"], x["detail"]]
                 for x in v["targets"]]
        out.append("<h3>Kernel targets</h3>" + table(["target", "goal", "value (unit)", "status", "detail"], trows))
    if v.get("end_to_end"):
        erows = [[p.get("phase"), Cell(_us(p.get("measured_s")), p.get("measured_s")), Cell(_us(p.get("predicted_s_datasheet")), p.get("predicted_s_datasheet")),
                  Cell(_pct(p.get("error_datasheet"), True), p.get("error_datasheet")), Cell(_us(p.get("predicted_s_measured")), p.get("predicted_s_measured")),
                  Cell(_pct(p.get("error_measured"), True), p.get("error_measured"))] for p in v["end_to_end"]]
        out.append("<h3>End to end (one decoder layer)</h3>" + table(["phase", "measured us", "datasheet us", "error", "measured-ceiling us", "error"], erows))
    for f in v.get("flags", []):
        out.append(f'<p class="warning">{e(f)}</p>')
    for f in v.get("failed", []):
        out.append(f'<p class="warning">failed its correctness check (not timed): {e(f["op"])}[{e(f["impl"])}] {e(f["shape"])} {e(f["dtype"])}: {e(f["error"])}</p>')
    for n in v.get("notes", []):
        out.append(f'<p class="note">{e(n)}</p>')
    return "\n".join(out)


def _regress(d: dict[str, Any]) -> str:
    r = d["regress"]
    out = [f'<p class="verdict verdict-{e(r["verdict"])}">{e(r["summary"])}</p>',
           f"<p>baseline <code>{e(r['baseline'].get('path'))}</code> ({e(r['baseline'].get('gpu_name'))}, {e(r['baseline'].get('created_utc'))}) vs "
           f"candidate <code>{e(r['candidate'].get('path'))}</code> ({e(r['candidate'].get('gpu_name'))}, {e(r['candidate'].get('created_utc'))})</p>",
           f'<p class="note">rule: {e(r["rule"])}</p>']
    cols = ["verdict", "op", "impl", "shape", "dtype", "baseline p50 us", "candidate p50 us", "change", "noise", "p (Holm)", "reason"]
    rows = []
    for c in r["rows"]:
        p = c["p_slower_adj"] if (c["rel_change"] or 0) >= 0 else c["p_faster_adj"]
        rows.append([
            Cell(c["verdict"], c["verdict"], f"verdict-{c['verdict']}"), c["op"], c["impl"], c["shape"], c["dtype"],
            Cell(_us(c["baseline_median_s"]), c["baseline_median_s"]), Cell(_us(c["candidate_median_s"]), c["candidate_median_s"]),
            Cell(_pct(c["rel_change"], True), c["rel_change"]), Cell(_pct(c["noise"]), c["noise"]), Cell(_num(p, ".2g"), p), c["reason"],
        ])
    for key, verdict, why in (("only_in_baseline", "missing", "in the baseline, not in the candidate"),
                              ("only_in_candidate", "new", "in the candidate, not in the baseline")):
        for k in r.get(key, []):
            rows.append([Cell(verdict, verdict, f"verdict-{verdict}"), k["op"], k["impl"], k["shape"], k["dtype"], "-", "-", "-", "-", "-", why])
    out.append(table(cols, rows, tid="regress-table"))
    for n in r.get("notes", []):
        out.append(f'<p class="note">{e(n)}</p>')
    return "\n".join(out)


def _value_text(v: Any) -> str:
    """An input's value as a reader wants it: "-" for none / empty, "gemm=0.8, attention=0.7" for a
    mapping, "yes"/"no", whole numbers with thousands separators, others without exponent."""
    if v is None or v == {} or v == []:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_value_text(x)}" for k, x in v.items())
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.0f}" if v.is_integer() and abs(v) < 1e15 else fmt_num(v, 6)
    return str(v)


def _inputs(d: dict[str, Any]) -> str:
    a, m = d["analysis"], d["model"]
    pairs = [(k, _value_text(v)) for k, v in d["inputs"].items()]
    pairs += [("model source", m["source"]), ("model type", m["model_type"]),
              ("model shape", f"{m['num_layers']} layers, d={m['hidden_size']}, {m['num_heads']} heads, {m['num_kv_heads']} KV heads x {m['head_dim']}, vocab {m['vocab_size']:,}"),
              ("KV bytes per token", fmt_bytes(m["kv_bytes_per_token"]))]
    pairs += [(f"workload.{k}", _value_text(v)) for k, v in a["workload"].items()]
    out = [kv_table(pairs), "<h3>Hardware specs</h3>"]
    specs = list(d["hardware"]) + ([d["measured_hardware"]] if d["measured_hardware"] else [])
    for s in specs:
        peaks = ", ".join(f"{k} {fmt_num(v, 4)}" for k, v in s["peak_dense_tflops"].items())
        est = f"; estimates: {', '.join(s['estimates'])}" if s["estimates"] else ""
        meas = f"; measured here: {', '.join(s['measured_keys'])} (base {s['base']})" if s["measured_keys"] else ""
        out.append(f"<p><b>{e(s['id'])}</b> ({e(s['kind'])}): {e(s['name'])}. Dense peaks (TFLOP/s): {e(peaks)}; "
                   f"HBM {e(_value_text(s['memory']['bandwidth_gb_per_s']))} GB/s, {e(_value_text(s['memory']['capacity_gb']))} GB; "
                   f"L2 {e(_value_text(s['cache']['l2_bandwidth_gb_per_s']))} GB/s{e(est)}{e(meas)}. "
                   f"File: <code>{e(s['path'])}</code></p>")
        src = "".join(f"<li>{e(x['title'])}: <code>{e(x['url'])}</code>{(' (' + e(x['note']) + ')') if x['note'] else ''}</li>" for x in s["sources"])
        out.append(f"<ul class='sources'>{src}</ul>")
    out.append("<h3>Assumptions</h3><ul>" + "".join(f"<li>{e(x)}</li>" for x in d["assumptions"]) + "</ul>")
    return "\n".join(out)


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0 auto;max-width:1280px;padding:16px 24px;color:#222;background:#fff}
h1{font-size:1.5em;margin-bottom:0.2em} h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:4px} h3{margin-top:1.2em}
.meta{color:#666;font-size:0.9em} .note{color:#555;font-size:0.9em} .caption{color:#555;font-size:0.9em;margin-top:0}
.warning{color:#a00} .figure{width:100%;min-height:420px}
table{border-collapse:collapse;font-size:0.85em;margin:0.6em 0} th,td{border:1px solid #ddd;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f4f4f4} td:first-child,th:first-child{text-align:left} table.kv th{text-align:left;white-space:nowrap} table.kv td{text-align:left}
table.sortable th{cursor:pointer;user-select:none} table.sortable th[data-dir=asc]::after{content:" \\25B2"} table.sortable th[data-dir=desc]::after{content:" \\25BC"}
td.flag,td.verdict-regression{color:#a00;font-weight:bold} .verdict{font-weight:bold} .verdict-regression{color:#a00}
nav a{margin-right:12px} code{background:#f6f6f6;padding:0 3px}
"""

SORT_JS = """
(function(){
  function key(td){var v=td.getAttribute('data-v');if(v===null){v=td.textContent;}var n=parseFloat(v);return (v!==''&&isFinite(n)&&String(n)===String(Number(v)))?n:v.toLowerCase();}
  document.querySelectorAll('table.sortable').forEach(function(tbl){
    tbl.querySelectorAll('thead th').forEach(function(th,idx){
      th.addEventListener('click',function(){
        var asc=th.getAttribute('data-dir')!=='asc';
        tbl.querySelectorAll('thead th').forEach(function(o){o.removeAttribute('data-dir');});
        th.setAttribute('data-dir',asc?'asc':'desc');
        var body=tbl.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
        rows.sort(function(a,b){var x=key(a.cells[idx]),y=key(b.cells[idx]);
          if(typeof x!==typeof y){x=String(x);y=String(y);}
          return (x<y?-1:x>y?1:0)*(asc?1:-1);});
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
  });
})();
"""

PLOT_JS = """
(function(){
  window.reportFiguresRendered=0;window.reportFigureErrors=[];
  var cfg={displaylogo:false,responsive:true,showSendToCloud:false,showEditInChartStudio:false,typesetMath:false};
  document.querySelectorAll('div.figure[data-fig]').forEach(function(div){
    try{
      var spec=JSON.parse(document.getElementById(div.getAttribute('data-fig')).textContent);
      Plotly.newPlot(div,spec.data,spec.layout,cfg).then(function(){window.reportFiguresRendered++;},function(err){window.reportFigureErrors.push(String(err));console.error(err);});
    }catch(err){window.reportFigureErrors.push(String(err));console.error(err);}
  });
})();
"""


def _unplaced(d: dict[str, Any]) -> str:
    """The caption's note of what a log-log FLOP/s chart cannot show (no FLOPs or no HBM bytes)."""
    ops: dict[str, list[str]] = {}
    for p in d["ops"]:
        if not p["placed"]:
            ops.setdefault(p["name"], []).append(p["phase"])
    meas = sorted({f"{p['name']} {p['shape']}" for p in d["measured_points"] if not p["placed"]})
    parts = [f"{n} ({', '.join(ph)})" for n, ph in ops.items()]
    if meas:
        parts.append(f"{len(meas)} measured row(s) without FLOPs (e.g. {meas[0]})")
    return " Not on the chart (no FLOPs or no HBM bytes; see the tables): " + "; ".join(parts) + "." if parts else ""


def render_page(d: dict[str, Any], figure_json: dict[str, str], plotly_js: str) -> str:
    """The whole page. ``figure_json``: figure id -> plotly JSON text; ``plotly_js``: the bundle."""
    m, gpu = d["model"], d["hardware"][0]
    title = f"Roofline report: {m['name']} on {', '.join(h['id'] for h in d['hardware'])}"
    sections: list[tuple[str, str, str]] = []  # (anchor, heading, html)

    def fig(fid: str, caption: str = "") -> str:
        return figure_block(fid, figure_json[fid], caption) if fid in figure_json else ""

    sections.append(("summary", "Summary", _summary(d)))
    sections.append(("roofline", "Roofline", fig("roofline",
        "Solid lines: the first GPU's own ceilings (its spec file's: datasheet, or measured for a measured spec; dotted: L2 / shared memory; "
        "labels give each figure's source); green dashed: the measured ceilings the validation uses. "
        "Circles: prefill ops, squares: decode ops (per decode step), marker area by share of the phase's time; FLOP/s at the predicted time, so an op "
        "below its roof pays launch overhead, communication or an efficiency < 1. Stars: measured kernels, joined to their predictions (open circles); "
        "a red x marks a measured point more than 5% above the fastest ceiling measured on its GPU (burst peak, fastest measured stream: "
        "the extra green lines), a counting error; a prediction never lies above its roof." + _unplaced(d))))
    sections.append(("breakdown", "Time breakdown", fig("breakdown", "Share of each phase's predicted time per op category; hover for absolute times.")))
    sections.append(("kv", "KV cache vs weights", fig("kv-vs-weights") + fig("memory-vs-batch")))
    sections.append(("batch", "Batch sweep", fig("batch-sweep", "TPOT and decode throughput of one step at the middle of the generation; red: the step is compute-bound.")))
    sections.append(("variants", "Attention variants and MoE", fig("attention-variants") + _variants_table(d) + fig("moe") + _moe_table(d)))
    if len(d["gpus"]) > 1:
        sections.append(("gpus", "GPUs side by side", fig("gpus") + fig("gpu-ceilings") + _gpus_table(d)))
    if d["validation"]:
        sections.append(("validation", "Validation: predicted vs measured", fig("validation") + _validation(d)))
    if d["regress"]:
        sections.append(("regress", "Comparison of two runs (regress)", _regress(d)))
    if d.get("serving"):
        from rooflinecli.report.serving import serving_html

        sections.append(("serving", "Serving under load", serving_html(d, fig)))
    sections.append(("ops", "Per-op numbers", '<p class="note">Click a column header to sort. Totals over each op\'s layers, per GPU; decode rows are one step (mean over the generation).'
                                       + (" Times here are the roof's (the summary's TTFT and TPOT are achievable)." if d["analysis"].get("mode") == "achievable" else "") + '</p>' + _ops_table(d)))
    sections.append(("inputs", "Inputs and assumptions", _inputs(d)))
    sections.append(("data", "Data", '<p class="note">Every number above is embedded as JSON in <code>&lt;script type="application/json" id="report-data"&gt;</code>: '
                     "<code>json.loads(re.search(r'id=\"report-data\"&gt;(.*?)&lt;/script&gt;', html, re.S).group(1))</code> in Python, or "
                     "<code>JSON.parse(document.getElementById('report-data').textContent)</code> in the browser.</p>"))

    nav = "".join(f'<a href="#{a}">{e(h)}</a>' for a, h, _ in sections)
    body = "\n".join(f'<section id="{a}"><h2>{e(h)}</h2>\n{content}\n</section>' for a, h, content in sections)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="rooflinecli {e(d['tool_version'])}">
<title>{e(title)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>{e(title)}</h1>
<p class="meta">rooflinecli {e(d['tool_version'])}, generated {e(d['generated_utc'])}; {e(gpu['name'])}; model {e(m['display_name'])}. Works offline: plotly.js is embedded below.</p>
<nav>{nav}</nav>
{body}
<script type="application/json" id="report-data">{safe_json(d)}</script>
<script>{plotly_js}</script>
<script>{PLOT_JS}</script>
<script>{SORT_JS}</script>
</body>
</html>
"""
