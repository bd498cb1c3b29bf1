"""The report's serving section: the frontier of tokens/s per GPU against tokens/s per user over
one node's layouts (``serve.search``), and the report's own layout's TTFT and TPOT against load
(closed loop, concurrency 1 up to its KV limit). plotly is imported inside the figure functions."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from rooflinecli.errors import RooflineError

#: the GPU budget the section searches: one node
NODE_GPUS = 8
#: load points of the curve
CURVE_POINTS = 24


def serving_section(cfg, spec, wl) -> dict[str, Any]:
    """JSON-ready serving data for the report; ``{"error": ...}`` where the model cannot be served
    on ``spec`` (the rest of the report still builds)."""
    from rooflinecli.serve.replica import build_replica
    from rooflinecli.serve.search import Slo, row, search
    from rooflinecli.serve.steady import Lengths, aggregated_closed

    isl, osl = int(wl.prompt_len), int(wl.gen_len)
    gpus = max(NODE_GPUS, wl.num_gpus)
    try:
        res = search(cfg, spec, replace(wl, batch=1), gpus=gpus, isl=isl, osl=osl, slo=Slo(), concurrency_points=24)
    except RooflineError as e:
        return {"error": str(e)}
    t = res["candidates"]
    front = np.flatnonzero(t["on_frontier"])
    front = front[np.argsort(t["tokens_per_s_per_user"][front])]
    out: dict[str, Any] = {"gpus": gpus, "isl_tokens": isl, "osl_tokens": osl, "engine": wl.engine, "candidates": res["count"],
                           "frontier": [row(t, int(i)) for i in front], "mode": None, "curve": None, "curve_error": None}
    try:
        rep = build_replica(cfg, spec, replace(wl, batch=1), isl=isl, osl=osl)
    except RooflineError as e:  # the report's own layout does not fit: the frontier still stands
        out["curve_error"] = str(e)
        return out
    conc = np.unique(np.round(np.geomspace(1, max(rep.kv_limit, 1), CURVE_POINTS)))
    curve = aggregated_closed(rep.table, Lengths(isl, osl), conc, rep.kv_limit, rep.workload.prefill_chunk_tokens)
    out.update({
        "mode": rep.table.mode,
        "layout": {"tp": rep.workload.tp, "ep": rep.workload.ep, "attention_dp": rep.workload.attention_dp, "gpus": rep.num_gpus},
        "kv_limit_sequences": rep.kv_limit,
        "curve": {"concurrency": conc.tolist(), **{k: np.asarray(curve[k]).tolist() for k in (
            "ttft_s", "tpot_s", "throughput_tokens_per_s_per_gpu", "tokens_per_s_per_user")}},
    })
    return out


def frontier_figure(d: dict[str, Any]):
    """tokens/s per GPU against tokens/s per user on the frontier, aggregated and disaggregated apart."""
    import plotly.graph_objects as go

    from rooflinecli.report.figures import _fig, _layout

    s = d["serving"]
    traces = []
    for serving, color in (("aggregated", "#636EFA"), ("disaggregated", "#EF553B")):
        pts = [p for p in s["frontier"] if p["serving"] == serving]
        if not pts:
            continue
        hover = [
            (f"{int(p['replicas'])} x (tp {p['tp']}, ep {p['ep']})" if serving == "aggregated" else
             f"{int(p['prefill_instances'])} prefill x tp {p['prefill_tp']} + {int(p['decode_instances'])} decode x tp {p['tp']}, ep {p['ep']}")
            + f"<br>{int(p['gpus_used'])} GPUs, concurrency {int(p['concurrency']):,}<br>TTFT {p['ttft_s'] * 1e3:,.1f} ms, TPOT {p['tpot_s'] * 1e3:,.2f} ms"
            for p in pts
        ]
        traces.append(go.Scatter(x=[p["tokens_per_s_per_user"] for p in pts], y=[p["throughput_tokens_per_s_per_gpu"] for p in pts], mode="markers+lines",
                                 name=serving, marker={"color": color, "size": 7}, line={"color": color, "width": 1}, text=hover,
                                 hovertemplate="%{x:,.1f} tokens/s per user, %{y:,.0f} tokens/s per GPU<br>%{text}<extra>" + serving + "</extra>"))
    title = (f"Serving frontier on up to {s['gpus']} GPUs ({s['candidates']:,} configurations, isl {s['isl_tokens']:,} / osl {s['osl_tokens']:,} tokens)"
             "<br><sup>each point: no other configuration has both more tokens/s per GPU and per user</sup>")
    layout = _layout(title, height=480, xaxis={"type": "log", "title": {"text": "tokens/s per user (1 / TPOT)"}},
                     yaxis={"type": "log", "title": {"text": "output tokens/s per GPU"}})
    return _fig(traces, layout)


def load_curve_figure(d: dict[str, Any]):
    """The report's layout: TTFT and TPOT against concurrency (closed loop)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from rooflinecli.report.figures import _layout

    s = d["serving"]
    c = s["curve"]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    fig.add_trace(go.Scatter(x=c["concurrency"], y=[v * 1e3 for v in c["ttft_s"]], mode="lines+markers", name="TTFT",
                             hovertemplate="concurrency %{x:,}: TTFT %{y:,.1f} ms<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=c["concurrency"], y=[v * 1e3 for v in c["tpot_s"]], mode="lines+markers", name="TPOT",
                             hovertemplate="concurrency %{x:,}: TPOT %{y:,.2f} ms<extra></extra>"), row=2, col=1)
    fig.update_xaxes(type="log", title_text="concurrency (clients, closed loop)", row=2, col=1)
    fig.update_xaxes(type="log", row=1, col=1)
    fig.update_yaxes(type="log", title_text="TTFT (ms)", row=1, col=1)
    fig.update_yaxes(type="log", title_text="TPOT (ms)", row=2, col=1)
    lay = s["layout"]
    title = (f"TTFT and TPOT against load: tp {lay['tp']}, ep {lay['ep']} on {lay['gpus']} GPU(s)"
             f"<br><sup>up to the KV cache's {s['kv_limit_sequences']:,} sequences; {s['mode']} step times</sup>")
    fig.update_layout(**_layout(title, height=560, margin={"l": 70, "r": 30, "t": 80, "b": 60}))
    return fig


def serving_html(d: dict[str, Any], fig) -> str:
    """The section's HTML: its two figures, or the line saying why there is none."""
    from rooflinecli.report.html import e

    s = d.get("serving")
    if not s:
        return ""
    if "error" in s:
        return f'<p class="note">No serving figures: {e(s["error"])}</p>'
    curve = fig("serving-load") if s["curve"] else f'<p class="note">No load curve for the report\'s own layout: {e(s["curve_error"])}</p>'
    return fig("serving-frontier") + curve
