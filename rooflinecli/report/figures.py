"""Plotly figures of the report, drawn from the report's data dict (``report.data``) only.

plotly is imported inside each function (the report command is the only caller). Every string that
came from the user (model and GPU names, result rows) is HTML-escaped before it goes into a figure:
plotly.js renders its text through its own tag parser, so an escaped ``&lt;script&gt;`` shows as
text and nothing else. Axes carry their units; log axes where the quantity spans decades.
"""

from __future__ import annotations

from rooflinecli.fmt import fmt_num, fmt_si, fmt_time

import html
import math
from typing import Any

#: colours per op category / phase (plotly's default qualitative palette, fixed order)
PALETTE = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF", "#FECB52")
PHASE_STYLE = {"prefill": ("circle", "#636EFA"), "decode": ("square", "#EF553B")}
MEMORY_STYLE = {"HBM": "#222222", "L2": "#7F7F7F", "shared memory": "#BCBD22"}
TFLOP = 1e12
GB = 1e9
#: the tensor dtypes LLM inference runs in (fp64, fp32 and tf32 are for training and HPC): the
#: roofline draws the workload's compute dtype, the narrower ones and the measured kernels' dtypes
LLM_DTYPES = ("bf16", "fp16", "fp8", "int8", "fp4", "int4")
#: the dtypes narrower than 16 bits: drawn beside any compute dtype (what quantizing would buy)
NARROW_DTYPES = ("fp8", "int8", "fp4", "int4")
#: how each mode's times are made, as the charts name it
MODE_LABELS = {"datasheet": "datasheet roof", "measured-roof": "measured roof", "achievable": "achievable", "roof": "roof"}
#: the roofline chart's plot area (px): its height less the margins, for spacing labels apart
ROOFLINE_PLOT_PX = 640 - 60 - 60
#: the vertical room one ceiling label needs (px, font 10 plus padding)
LABEL_PX = 14


def t(s: Any) -> str:
    """A user-provided string, escaped for plotly's text renderer."""
    return html.escape(str(s), quote=False)


def _layout(title: str, **kw) -> dict[str, Any]:
    base = {
        "title": {"text": title, "x": 0.01, "xanchor": "left"},
        "template": "plotly_white",
        "height": 480,
        "margin": {"l": 70, "r": 30, "t": 60, "b": 60},
        "legend": {"font": {"size": 11}},
        "hoverlabel": {"align": "left"},
    }
    base.update(kw)
    return base


def _fig(data: list, layout: dict):
    import plotly.graph_objects as go

    return go.Figure(data=data, layout=layout)


# ------------------------------------------------------------------------------------------------
# The roofline chart
# ------------------------------------------------------------------------------------------------


def _axis_range(values: list[float], pad: float = 3.0) -> tuple[float, float]:
    vals = [v for v in values if v and v > 0]
    return (min(vals) / pad, max(vals) * pad)


def mode_label(mode: str | None) -> str:
    """A GPU's mode as the charts mark it ("datasheet roof", "measured roof", "achievable")."""
    return MODE_LABELS.get(mode or "", mode or "roof")


def drawn_compute(ceilings: list[dict[str, Any]], keep: set[str]) -> list[dict[str, Any]]:
    """The compute ceilings of a dtype in ``keep``, each labelled with its LLM dtypes only: a line
    bf16 shares with fp16 stays one line labelled bf16/fp16; an fp16 line of its own (a measured
    spec's) goes when only bf16 is kept, and so do fp64, fp32 and tf32 lines."""
    out = []
    for c in ceilings:
        if not any(dt in keep for dt in c.get("dtypes", [])):
            continue
        dtypes = [dt for dt in c["dtypes"] if dt in keep or dt in LLM_DTYPES]
        label = "/".join(dtypes) + (" burst" if c["label"].endswith(" burst") else "") + (" (TOP/s)" if all(dt.startswith("int") for dt in dtypes) else "")
        out.append({**c, "label": label})
    return out


def spread(ys: list[float], gap: float, top: float | None = None) -> list[float]:
    """Label positions (log10 units) at least ``gap`` apart, each as near its own ``ys`` as the
    others let it: pushed up from the lowest, then down from ``top`` if the stack ran past it.
    Keeps the order of ``ys``."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    out = list(ys)
    for a, b in zip(order, order[1:]):
        out[b] = max(out[b], out[a] + gap)
    if top is not None and order and out[order[-1]] > top:
        out[order[-1]] = top
        for a, b in zip(order[::-1], order[-2::-1]):
            out[b] = min(out[b], out[a] - gap)
    return out


def roofline(d: dict[str, Any]):
    """Log-log roofline of the first GPU: compute ceilings per precision, HBM / L2 / shared-memory
    ceilings, ridge points, datasheet vs measured ceilings, every op of prefill and decode (marker
    area by share of the phase's time), measured kernels linked to their predictions."""
    import plotly.graph_objects as go

    wl = d["analysis"]["workload"]
    ops = [p for p in d["ops"] if p["placed"]]
    meas = [p for p in d["measured_points"] if p["placed"]]
    keep = {wl["compute_dtype"], *NARROW_DTYPES, *(p["dtype"] for p in meas)}
    ds, ms = d["ceilings"]["datasheet"], d["ceilings"]["measured"]
    ds = {**ds, "compute": drawn_compute(ds["compute"], keep)}
    ms = {**ms, "compute": drawn_compute(ms["compute"], keep)} if ms else ms
    hbm = next(m["bandwidth_bytes_per_s"] for m in ds["memory"] if m["level"] == "HBM")
    xs = [p["arithmetic_intensity_flop_per_byte"] for p in ops + meas] + [c["ridge_point_flop_per_byte"] for c in ds["compute"]]
    x_lo, x_hi = _axis_range(xs + [0.5, 2000.0])
    peaks = [c["peak_flops_per_s"] for c in ds["compute"]] + ([c["peak_flops_per_s"] for c in ms["compute"]] if ms else [])
    top = max(peaks)
    traces = []
    # ceiling labels: annotations, drawn above every trace (a trace's text hides under later
    # markers); compute labels at the right edge, memory labels near the left, spread apart below
    compute_labels: list[dict[str, Any]] = []
    memory_labels: list[dict[str, Any]] = []
    x_memory_label = x_lo * 1.3

    def ceiling_traces(c: dict[str, Any], measured: bool) -> None:
        dash = "dash" if measured else "solid"
        for comp in c["compute"]:
            src = comp["source"] if comp["source"] == "measured estimate" or not measured else "measured"
            p = comp["peak_flops_per_s"]
            unit = "TOP/s" if comp["label"].endswith("(TOP/s)") else "TFLOP/s"
            name = f"{comp['label'].replace(' (TOP/s)', '')} peak {p / TFLOP:,.4g} {unit} ({src})"
            x0 = max(x_lo, comp["ridge_point_flop_per_byte"])
            traces.append(
                go.Scatter(
                    x=[x0, x_hi], y=[p / TFLOP, p / TFLOP], mode="lines", name=name, legendgroup="ceilings",
                    line={"color": "#444" if not measured else "#2CA02C", "width": 1.5, "dash": dash},
                    hovertemplate=f"{t(name)}<extra></extra>",
                )
            )
            # annotation coordinates on a log axis are log10 of the value
            compute_labels.append({"x": _log10(x_hi), "y": _log10(p / TFLOP), "text": t(name), "showarrow": False, "xanchor": "right", "yanchor": "bottom",
                                   "font": {"size": 10, "color": "#2CA02C" if measured else "#222"}, "bgcolor": "rgba(255,255,255,0.8)", "borderpad": 1})
        for m in c["memory"]:
            bw = m["bandwidth_bytes_per_s"]
            src_m = "measured" if measured else m["source"]
            name = f"{m['level']} {bw / 1e12:,.3g} TB/s ({src_m})"
            x1 = min(x_hi, top / bw)
            color = "#2CA02C" if measured else MEMORY_STYLE.get(m["level"], "#444")
            traces.append(
                go.Scatter(
                    x=[x_lo, x1], y=[x_lo * bw / TFLOP, x1 * bw / TFLOP], mode="lines", name=name, legendgroup="ceilings",
                    line={"color": color, "width": 1.5, "dash": dash if measured else ("dot" if m["level"] != "HBM" else "solid")},
                    hovertemplate=f"{t(name)}<br>attainable = AI x bandwidth<extra></extra>",
                )
            )
            memory_labels.append({"x": _log10(x_memory_label), "y": _log10(x_memory_label * bw / TFLOP), "text": t(name), "showarrow": False, "xanchor": "left",
                                  "yanchor": "bottom", "font": {"size": 10, "color": color}, "bgcolor": "rgba(255,255,255,0.8)", "borderpad": 1})
        if c["compute"]:
            rp = [comp["ridge_point_flop_per_byte"] for comp in c["compute"]]
            traces.append(
                go.Scatter(
                    x=rp, y=[comp["peak_flops_per_s"] / TFLOP for comp in c["compute"]], mode="markers",
                    name=f"ridge points vs HBM ({'measured' if measured or c.get('kind') == 'measured' else 'datasheet'})", legendgroup="ceilings",
                    marker={"symbol": "diamond", "size": 9, "color": "#2CA02C" if measured else "#444"},
                    text=[f"ridge point {comp['label']}: {comp['ridge_point_flop_per_byte']:,.0f} FLOP/byte" for comp in c["compute"]],
                    hovertemplate="%{text}<extra></extra>",
                )
            )

    ceiling_traces(ds, False)
    if ms and (ms["compute"] or ms["memory"]):
        # a measured spec's ridge points are against its own (measured or inherited) HBM figure
        ceiling_traces(ms, True)

    mode = mode_label(wl.get("mode"))
    for phase in ("prefill", "decode"):
        pts = [p for p in ops if p["phase"] == phase]
        if not pts:
            continue
        symbol, color = PHASE_STYLE[phase]
        traces.append(
            go.Scatter(
                x=[p["arithmetic_intensity_flop_per_byte"] for p in pts],
                y=[p["achieved_flops_per_s"] / TFLOP for p in pts],
                mode="markers", name=f"{phase} ops (predicted, {mode}; size = share of {phase} time)",
                marker={"symbol": symbol, "color": color, "opacity": 0.75, "size": [7 + 38 * (p["share_of_phase"] ** 0.5) for p in pts], "line": {"width": 1, "color": "white"}},
                text=[_op_hover(p, d["analysis"]["workload"]) for p in pts], hovertemplate="%{text}<extra></extra>",
            )
        )

    if meas:
        lx, ly = [], []
        for p in meas:
            if p["predicted_flops_per_s"]:
                lx += [p["arithmetic_intensity_flop_per_byte"], p["arithmetic_intensity_flop_per_byte"], None]
                ly += [p["predicted_flops_per_s"] / TFLOP, p["measured_flops_per_s"] / TFLOP, None]
        traces.append(go.Scatter(x=lx, y=ly, mode="lines", name="measured to predicted", line={"color": "#9467BD", "width": 1}, hoverinfo="skip"))
        pred = [p for p in meas if p["predicted_flops_per_s"]]
        traces.append(
            go.Scatter(
                x=[p["arithmetic_intensity_flop_per_byte"] for p in pred], y=[p["predicted_flops_per_s"] / TFLOP for p in pred],
                mode="markers", name="kernel prediction (datasheet roof)", marker={"symbol": "circle-open", "size": 9, "color": "#9467BD"},
                text=[_measured_hover(p, predicted=True) for p in pred], hovertemplate="%{text}<extra></extra>",
            )
        )
        for flagged in (False, True):
            sel = [p for p in meas if p["above_roof"] == flagged]
            if not sel:
                continue
            traces.append(
                go.Scatter(
                    x=[p["arithmetic_intensity_flop_per_byte"] for p in sel], y=[p["measured_flops_per_s"] / TFLOP for p in sel],
                    mode="markers+text" if flagged else "markers",
                    name="ABOVE ITS ROOF: counting error" if flagged else "measured kernels",
                    marker={"symbol": "x" if flagged else "star", "size": 13 if flagged else 11, "color": "#D62728" if flagged else "#9467BD"},
                    text=[_measured_hover(p) for p in sel], textposition="top center",
                    texttemplate="above roof!" if flagged else None, hovertemplate="%{text}<extra></extra>",
                )
            )

    gpu = d["hardware"][0]
    m = d["model"]
    title = (
        f"Roofline: {t(m['name'])} on {t(gpu['name'])} ({wl['compute_dtype']} compute, {mode}), batch {wl['batch']}, "
        f"prompt {wl['prompt_len']:,}, gen {wl['gen_len']:,}"
    )
    y_lo = min([x_lo * hbm / TFLOP / 2] + [p["achieved_flops_per_s"] / TFLOP / 2 for p in ops] + [p["measured_flops_per_s"] / TFLOP / 2 for p in meas])
    y_range = (_log10(y_lo), _log10(top / TFLOP * 2.5))
    gap = (y_range[1] - y_range[0]) * LABEL_PX / ROOFLINE_PLOT_PX
    for group in (compute_labels, memory_labels):
        for a, y in zip(group, spread([a["y"] for a in group], gap, y_range[1] - gap)):
            a["y"] = y
    layout = _layout(
        title,
        height=640,
        xaxis={"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte of HBM traffic)"}, "range": [_log10(x_lo), _log10(x_hi)]},
        yaxis={"type": "log", "title": {"text": "performance (TFLOP/s)"}, "range": list(y_range), "exponentformat": "power"},
        legend={"font": {"size": 10}, "x": 1.01, "y": 1},
        margin={"l": 70, "r": 20, "t": 60, "b": 60},
        annotations=compute_labels + memory_labels,
    )
    return _fig(traces, layout)


def _log10(x: float) -> float:
    import math

    return math.log10(x)


def op_shape(p: dict[str, Any], wl: dict[str, Any]) -> str:
    """The shape an op runs at: batch and prompt (prefill) or context range (decode), and its
    per-layer dimensions (``d_in->d_out``) as the analysis notes them."""
    b, s, g = wl["batch"], wl["prompt_len"], wl["gen_len"]
    step = f"B={b:,} x S={s:,}" if p["phase"] == "prefill" else f"B={b:,}, context {s:,}..{s + max(g - 1, 0):,} (mean of the steps)"
    return step + (f"; {p['note']}" if p.get("note") else "")


def _op_hover(p: dict[str, Any], wl: dict[str, Any]) -> str:
    return (
        f"<b>{t(p['name'])}</b> ({p['phase']}, {p['kind']}, {p['layers']} layer(s))<br>"
        f"shape {t(op_shape(p, wl))}<br>"
        f"AI {fmt_num(p['arithmetic_intensity_flop_per_byte'])} FLOP/byte<br>"
        f"{fmt_si(p['achieved_flops_per_s'], 'FLOP/s')} predicted: {_pct(p.get('pct_of_peak_flops'))} of the compute peak, "
        f"{_pct(p.get('pct_of_bandwidth'))} of the HBM bandwidth<br>"
        f"time {fmt_time(p['time_s'])} ({p['share_of_phase']:.1%} of {p['phase']})<br>"
        f"FLOPs {fmt_si(p['flops'], 'FLOP')}, bytes {fmt_si(p['bytes'], 'B')}<br>{p['bound']}-bound"
    )


def _pct(v: float | None) -> str:
    """A percentage to two significant figures (0.52%, 46%, 100%)."""
    return "-" if v is None else f"{fmt_num(v, 2)}%"


def _measured_hover(p: dict[str, Any], predicted: bool = False) -> str:
    head = f"<b>{t(p['name'])}</b> {t(p['shape'])} {t(p['dtype'])}" + (" (prediction)" if predicted else "") + "<br>"
    pct = "-" if p["pct_of_roof"] is None else f"{p['pct_of_roof']:.0f}% of the {p.get('pct_of_roof_basis', 'datasheet')} roof"
    if p.get("pct_of_roof_basis") == "measured ceilings" and p.get("pct_of_datasheet_roof") is not None:
        pct += f" ({p['pct_of_datasheet_roof']:.0f}% of the datasheet's)"
    rate = "FLOP/s" if p["flops"] else "B/s"  # a copy has no FLOPs: its bandwidth
    measured = p["measured_flops_per_s"] if p["flops"] else p.get("measured_bytes_per_s")
    predicted = p["predicted_flops_per_s"] if p["flops"] else (p["bytes"] / p["predicted_s"] if p.get("predicted_s") else None)
    body = (
        f"AI {fmt_num(p['arithmetic_intensity_flop_per_byte'])} FLOP/byte<br>"
        f"measured {fmt_time(p['measured_s'])}: {fmt_si(measured, rate)}<br>"
        f"predicted on the datasheet roof {fmt_time(p['predicted_s'])}: {fmt_si(predicted, rate)}<br>"
        f"{t(p['bound'])}-bound, {pct}"
    )
    if p["above_roof"]:
        body += "<br><b>faster than its roof: FLOPs or bytes over-counted</b>"
    return head + body


# ------------------------------------------------------------------------------------------------
# Breakdown, KV, memory, batch
# ------------------------------------------------------------------------------------------------


def time_breakdown(d: dict[str, Any]):
    """Stacked bars: share of each phase's predicted time per op category."""
    import plotly.graph_objects as go

    b = d["breakdown_s"]
    phases = [ph for ph in ("prefill", "decode") if ph in b]
    labels = {"prefill": "prefill (whole prompt)", "decode": "decode (one step, mean)"}
    cats = list(b[phases[0]]) if phases else []
    traces = []
    for i, c in enumerate(cats):
        tot = [sum(b[ph].values()) or 1.0 for ph in phases]
        traces.append(
            go.Bar(
                x=[labels[ph] for ph in phases], y=[b[ph][c] / tt * 100 for ph, tt in zip(phases, tot)], name=c,
                marker={"color": PALETTE[i % len(PALETTE)]},
                text=[f"{c}: {fmt_time(b[ph][c])}" for ph in phases], hovertemplate="%{text} (%{y:.1f}%)<extra></extra>",
                texttemplate="%{y:.0f}%", textposition="inside",
            )
        )
    a = d["analysis"]
    layout = _layout(
        f"Where the time goes: prefill {fmt_time(a['ttft_s'])} (TTFT), decode {fmt_time(a['tpot_s'])} per step (TPOT)",
        barmode="stack", yaxis={"title": {"text": "share of the phase's time (%)"}, "range": [0, 100]}, xaxis={"title": {"text": "phase"}},
        uniformtext={"mode": "hide", "minsize": 9},
    )
    return _fig(traces, layout)


def kv_vs_weights(d: dict[str, Any]):
    """KV bytes vs weight bytes read per decode step over context, with the crossover."""
    import plotly.graph_objects as go

    k = d["kv_vs_weights"]
    x = k["context"]
    hover = "context %{x:,} tokens: %{y:,.3~r} GB<extra>%{fullData.name}</extra>"
    traces = [
        go.Scatter(x=x, y=[v / GB for v in k["kv_read_bytes_per_step"]], mode="lines", name="KV cache read per decode step (GB)", line={"color": "#EF553B", "width": 2.5}, hovertemplate=hover),
        go.Scatter(x=x, y=[v / GB for v in k["weights_read_bytes_per_step"]], mode="lines", name="weights read per decode step (GB)", line={"color": "#636EFA", "width": 2.5}, hovertemplate=hover),
        go.Scatter(x=x, y=[v / GB for v in k["kv_cache_bytes_per_gpu"]], mode="lines", name="KV cache held per GPU (GB)", line={"color": "#EF553B", "dash": "dot"}, hovertemplate=hover),
        go.Scatter(x=x, y=[v / GB for v in k["weights_bytes_per_gpu"]], mode="lines", name="weights held per GPU (GB)", line={"color": "#636EFA", "dash": "dot"}, hovertemplate=hover),
    ]
    ys = [v for v in k["kv_read_bytes_per_step"] + k["weights_read_bytes_per_step"] + k["kv_cache_bytes_per_gpu"] + k["weights_bytes_per_gpu"] if v]
    lo, hi = min(ys) / GB / 2, max(ys) / GB * 2
    n = k["crossover_context"]
    title = f"KV cache vs weights per decode step, batch {k['batch']}: "
    if n:
        traces.append(
            go.Scatter(x=[n, n], y=[lo, hi], mode="lines+text", name=f"crossover: context {math.ceil(n):,}", line={"color": "#000", "dash": "dash"},
                       text=["", f"KV = weights at {math.ceil(n):,} tokens"], textposition="bottom left")
        )
        title += f"KV reads overtake weight reads at context {math.ceil(n):,}"
    else:
        title += "KV reads never overtake weight reads"
    w = k["workload_context"]
    traces.append(go.Scatter(x=[w, w], y=[lo, hi], mode="lines", name=f"this workload's final context ({w:,})", line={"color": "#888", "dash": "dot"}))
    layout = _layout(
        title,
        xaxis={"type": "log", "title": {"text": "context (tokens per sequence)"}},
        yaxis={"type": "log", "title": {"text": "bytes per GPU (GB)"}, "range": [_log10(lo), _log10(hi)]},
    )
    return _fig(traces, layout)


def memory_vs_batch(d: dict[str, Any]):
    """Stacked memory per GPU over batch (weights, KV cache, prefill workspace) and the capacity."""
    import plotly.graph_objects as go

    m = d["memory_vs_batch"]
    x = m["batch"]
    traces = []
    for key, name, color in (
        ("weights_bytes_per_gpu", "weights", "#636EFA"),
        ("kv_cache_bytes_per_gpu", f"KV cache at context {m['context']:,}", "#EF553B"),
        ("activation_workspace_bytes_per_gpu", "prefill activation workspace", "#00CC96"),
    ):
        traces.append(go.Scatter(x=x, y=[v / GB for v in m[key]], mode="lines", stackgroup="mem", name=name, line={"color": color}, hovertemplate="batch %{x}: %{y:,.3~r} GB<extra>" + name + "</extra>"))
    cap = m["capacity_bytes_per_gpu"] / GB
    traces.append(go.Scatter(x=[x[0], x[-1]], y=[cap, cap], mode="lines+text", name=f"capacity {cap:,.0f} GB", line={"color": "#000", "dash": "dash", "width": 2}, text=["", f"capacity {cap:,.0f} GB"], textposition="top left"))
    mb = m["max_batch_that_fits"]
    top = max(max(m["total_bytes_per_gpu"]) / GB, cap) * 1.1
    if mb:
        traces.append(go.Scatter(x=[mb, mb], y=[0, top], mode="lines", name=f"largest batch that fits: {mb:,}", line={"color": "#888", "dash": "dot"}))
    layout = _layout(
        f"Memory per GPU vs batch (context {m['context']:,}): " + (f"up to batch {mb:,} fits" if mb else "batch 1 does not fit"),
        xaxis={"type": "log", "title": {"text": "batch (sequences)"}, "range": [_log10(x[0]), _log10(x[-1])]},
        yaxis={"title": {"text": "memory per GPU (GB)"}, "range": [0, top]},
    )
    return _fig(traces, layout)


def batch_sweep(d: dict[str, Any]):
    """TPOT and decode throughput vs batch; compute-bound batches marked."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    s = d["batch_sweep"]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    x = s["batch"]
    for bound, color in ((False, "#636EFA"), (True, "#D62728")):
        idx = [i for i, cb in enumerate(s["compute_bound"]) if cb == bound]
        if not idx:
            continue
        name = "compute-bound step" if bound else "memory-bound step"
        fits = [s["fits"][i] for i in idx]
        marker = {"color": color, "size": 5, "symbol": ["circle" if f else "circle-open" for f in fits]}
        fig.add_trace(go.Scatter(x=[x[i] for i in idx], y=[s["tpot_s"][i] * 1e3 for i in idx], mode="markers", name=name, legendgroup=name, marker=marker,
                                 hovertemplate="batch %{x}: TPOT %{y:,.4~r} ms<extra>" + name + "</extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(x=[x[i] for i in idx], y=[s["tokens_per_s_per_gpu"][i] for i in idx], mode="markers", name=name, legendgroup=name, showlegend=False, marker=marker,
                                 hovertemplate="batch %{x}: %{y:,.0f} tokens/s per GPU<extra>" + name + "</extra>"), row=2, col=1)
    notes = []
    for key, label, color in (("gemm_compute_bound_batch", "matmuls compute-bound", "#FFA15A"), ("compute_bound_batch", "whole step compute-bound", "#D62728")):
        b = s[key]
        if b:
            notes.append(f"{label} from batch {b:,}")
            for row, ys in ((1, [v * 1e3 for v in s["tpot_s"]]), (2, s["tokens_per_s_per_gpu"])):
                fig.add_trace(go.Scatter(x=[b, b], y=[min(ys), max(ys)], mode="lines", name=f"{label}: batch {b:,}", legendgroup=label, showlegend=row == 1,
                                         line={"color": color, "dash": "dash"}, hoverinfo="skip"), row=row, col=1)
    if not s["compute_bound_batch"]:
        notes.append("the whole step stays memory-bound up to batch 65,536")
    fig.update_xaxes(type="log", title_text="batch (sequences)", row=2, col=1)
    fig.update_xaxes(type="log", row=1, col=1)
    fig.update_yaxes(type="log", title_text="TPOT (ms per step)", row=1, col=1)
    fig.update_yaxes(type="log", title_text="decode tokens/s per GPU", row=2, col=1)
    title = f"Decode batch sweep at context {s['context']:,}<br><sup>" + "; ".join(notes) + "; open markers: the batch does not fit in memory</sup>"
    fig.update_layout(**_layout(title, height=640, margin={"l": 70, "r": 30, "t": 80, "b": 60}))
    return fig


# ------------------------------------------------------------------------------------------------
# Variants, MoE, GPUs, validation
# ------------------------------------------------------------------------------------------------


def _bar_label(v: float | None) -> str:
    """Three significant figures, never in exponent notation (``4,000``, ``0.0899``)."""
    if v is None:
        return ""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def attention_variants(d: dict[str, Any]):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    v = d["attention_variants"]
    rows = v["rows"]
    labels = [t(r["variant"]) for r in rows]
    hover = [f"{t(r['variant'])}: {t(r['attention'])}" for r in rows]
    colors = ["#D62728" if r["configured"] else "#636EFA" for r in rows]
    fig = make_subplots(rows=1, cols=4, subplot_titles=(f"KV cache per GPU at {v['context']:,} tokens (GB)", "KV bytes per token (KB)", "TPOT (ms)", "TTFT (ms)"))
    for col, key, scale, unit in ((1, "kv_cache_bytes", 1 / GB, "GB"), (2, "kv_bytes_per_token", 1e-3, "KB"), (3, "tpot_s", 1e3, "ms"), (4, "ttft_s", 1e3, "ms")):
        fig.add_trace(
            go.Bar(x=labels, y=[(r[key] * scale if r[key] is not None else None) for r in rows], marker={"color": colors}, showlegend=False,
                   text=hover, customdata=[_bar_label(r[key] * scale if r[key] is not None else None) for r in rows],
                   hovertemplate="%{text}<br>%{y:,.4~r} " + unit + "<extra></extra>", texttemplate="%{customdata}", textposition="outside"),
            row=1, col=col,
        )
    fig.update_layout(**_layout(f"Attention variants of {t(d['model']['name'])} (* = as configured), batch {v['batch']}", height=440))
    return fig


def moe(d: dict[str, Any]):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    m = d["moe"]
    comps = [c for c in m["components"] if c["total_params"] > 0]
    et = m["experts_touched"]
    fig = make_subplots(rows=1, cols=2 if et else 1, subplot_titles=("parameters per component (billions)",) + (("distinct routed experts read per MoE layer",) if et else ()))
    for key, name, color in (("total_params", "total", "#636EFA"), ("active_params", "active per token", "#EF553B")):
        fig.add_trace(go.Bar(x=[c["component"] for c in comps], y=[c[key] / 1e9 for c in comps], name=name, marker={"color": color},
                             hovertemplate="%{x}: %{y:,.4~r} B params<extra>" + name + "</extra>"), row=1, col=1)
    if et:
        fig.add_trace(go.Scatter(x=et["tokens"], y=et["uniform"], mode="lines", name="experts touched (uniform routing)", line={"color": "#00CC96"}), row=1, col=2)
        if et["skew"] != 1:
            fig.add_trace(go.Scatter(x=et["tokens"], y=et["skewed"], mode="lines", name=f"experts touched (skew {et['skew']:g})", line={"color": "#AB63FA"}), row=1, col=2)
        fig.update_xaxes(type="log", title_text="tokens in the step (decode: batch)", row=1, col=2)
        fig.update_yaxes(title_text=f"experts (of {et['num_routed_experts']}, top-{et['top_k']})", row=1, col=2)
    fig.update_yaxes(title_text="parameters (billions)", row=1, col=1)
    kind = "MoE" if m["is_moe"] else "dense: every parameter is active"
    fig.update_layout(**_layout(f"Total vs active parameters ({kind}), {m['total_params'] / 1e9:,.3g} B total, {m['active_params'] / 1e9:,.3g} B active per token", barmode="group"))
    return fig


def gpus(d: dict[str, Any]):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    g = d["gpus"]
    names = [f"{t(x['hw'])}<br>({mode_label(x.get('mode'))})" for x in g]
    fig = make_subplots(rows=1, cols=4, subplot_titles=("TTFT (ms)", "TPOT (ms)", "decode tokens/s per GPU", "ridge point (FLOP/byte)"))
    for col, key, scale, unit in ((1, "ttft_s", 1e3, "ms"), (2, "tpot_s", 1e3, "ms"), (3, "tokens_per_s_per_gpu", 1.0, "tokens/s per GPU"),
                                  (4, "ridge_point_flop_per_byte", 1.0, "FLOP/byte")):
        fig.add_trace(go.Bar(x=names, y=[x[key] * scale for x in g], marker={"color": [PALETTE[i % len(PALETTE)] for i in range(len(g))]}, showlegend=False,
                             text=[t(x["name"]) for x in g], customdata=[_bar_label(x[key] * scale) for x in g],
                             hovertemplate="%{text}: %{y:,.4~r} " + unit + "<extra></extra>", texttemplate="%{customdata}", textposition="outside"), row=1, col=col)
    fig.update_layout(**_layout("GPUs side by side (same model and workload; each GPU's mode under its name)", height=440))
    return fig


def gpu_ceilings(d: dict[str, Any]):
    """Each GPU's compute-dtype ceiling and HBM ceiling on one log-log chart."""
    import plotly.graph_objects as go

    g = d["gpus"]
    x_lo, x_hi = 0.5, 4 * max(x["ridge_point_flop_per_byte"] for x in g)
    traces = []
    for i, x in enumerate(g):
        rp, peak, bw = x["ridge_point_flop_per_byte"], x["peak_flops_per_s"], x["memory_bandwidth_bytes_per_s"]
        how = mode_label(x.get("mode"))
        source = "datasheet" if x.get("kind", "datasheet") == "datasheet" else "measured"
        traces.append(go.Scatter(x=[x_lo, rp, x_hi], y=[x_lo * bw / TFLOP, peak / TFLOP, peak / TFLOP], mode="lines+markers", name=f"{t(x['hw'])} ({how}; {source} ceilings)",
                                 line={"color": PALETTE[i % len(PALETTE)], "dash": "solid" if source == "datasheet" else "dash"}, marker={"size": [0, 9, 0]},
                                 hovertemplate=f"{t(x['name'])} ({how})<br>" + "AI %{x:,.3~r} FLOP/byte: %{y:,.4~r} TFLOP/s<extra></extra>"))
    wl = d["analysis"]["workload"]
    layout = _layout(f"Rooflines of the GPUs ({wl['compute_dtype']} compute, HBM; dashed: measured ceilings)", xaxis={"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}},
                     yaxis={"type": "log", "title": {"text": "performance (TFLOP/s)"}})
    return _fig(traces, layout)


def validation(d: dict[str, Any]):
    """Predicted vs measured time per kernel row, with the y = x line."""
    import plotly.graph_objects as go

    pts = [p for p in d["measured_points"] if p["predicted_s"] and p["measured_s"]]
    vals = [p["predicted_s"] * 1e6 for p in pts] + [p["measured_s"] * 1e6 for p in pts]
    lo, hi = (min(vals) / 1.5, max(vals) * 1.5) if vals else (1.0, 10.0)
    traces = [go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="measured = predicted", line={"color": "#888", "dash": "dash"}, hoverinfo="skip")]
    for impl in sorted({p["impl"] for p in pts}):
        sel = [p for p in pts if p["impl"] == impl]
        traces.append(go.Scatter(
            x=[p["predicted_s"] * 1e6 for p in sel], y=[p["measured_s"] * 1e6 for p in sel], mode="markers", name=f"impl {t(impl)}",
            marker={"size": 9, "symbol": ["x" if p["above_roof"] else "circle" for p in sel], "color": ["#D62728" if p["above_roof"] else PALETTE[0 if impl == 'triton' else 2] for p in sel]},
            text=[_measured_hover(p) for p in sel], hovertemplate="%{text}<extra></extra>",
        ))
    layout = _layout("Kernels: measured vs predicted time (datasheet roof; above the line = slower than the roof)",
                     xaxis={"type": "log", "title": {"text": "predicted time (us)"}}, yaxis={"type": "log", "title": {"text": "measured median time (us)"}})
    return _fig(traces, layout)


def all_figures(d: dict[str, Any]) -> dict[str, Any]:
    """Figure id -> plotly Figure, in page order; sections without data have no figure."""
    figs = {
        "roofline": roofline(d),
        "breakdown": time_breakdown(d),
        "kv-vs-weights": kv_vs_weights(d),
        "memory-vs-batch": memory_vs_batch(d),
        "batch-sweep": batch_sweep(d),
        "attention-variants": attention_variants(d),
        "moe": moe(d),
    }
    if len(d["gpus"]) > 1:
        figs["gpus"] = gpus(d)
        figs["gpu-ceilings"] = gpu_ceilings(d)
    if d["measured_points"]:
        figs["validation"] = validation(d)
    if d.get("serving") and "error" not in d["serving"]:
        from rooflinecli.report.serving import frontier_figure, load_curve_figure

        figs["serving-frontier"] = frontier_figure(d)
        if d["serving"]["curve"]:
            figs["serving-load"] = load_curve_figure(d)
    return figs
