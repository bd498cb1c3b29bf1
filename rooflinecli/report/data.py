"""The report's data: every number the HTML shows, assembled from the analytical model (and, when
given, measured results and a baseline) into one JSON-ready dict.

The figures and tables are drawn from this dict only, and the dict itself is embedded in the page
(``<script type="application/json" id="report-data">``), so what is plotted is what can be pulled
back out. Nothing here re-derives a formula: op costs and times come from ``analysis.analyze``,
sweeps from ``analysis.phase_grid`` / ``analysis.memory_totals``, variants from
``whatif.compare`` and ``whatif.kv_variants``, parameters from ``params``, measured points from
``bench.validate`` and the run comparison from ``regress``. numpy only; no plotly, no torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

import numpy as np

from rooflinecli import formulas as F
from rooflinecli import params as P
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

SCHEMA = "rooflinecli.report/1"

#: op categories of the time breakdown, in stacking order
CATEGORIES: tuple[str, ...] = (
    "attention projections",
    "attention core",
    "dense MLP",
    "routed experts",
    "shared experts",
    "router",
    "norms and activations",
    "embedding and LM head",
    "communication",
    "other",
)

#: largest decode batch swept (the analysis searches the compute-bound batch up to the same)
MAX_SWEEP_BATCH = 1 << 16


def op_category(name: str, kind: str) -> str:
    """Which stacked-bar category an analysis op belongs to (by its name, then its kind)."""
    if kind == "comm" or name.startswith("comm."):
        return "communication"
    if kind == "attention" or name == "attn.core":
        return "attention core"
    if name.endswith(".act") or name.endswith("_act") or "norm" in name:
        return "norms and activations"
    if name.startswith("attn."):
        return "attention projections"
    if name.startswith("mlp."):
        return "dense MLP"
    if name.startswith("moe.expert"):
        return "routed experts"
    if name.startswith("moe.shared"):
        return "shared experts"
    if name.startswith("moe.router"):
        return "router"
    if name in ("embedding", "lm_head"):
        return "embedding and LM head"
    return "other"


def finite(x: Any) -> Any:
    """JSON-safe: NaN and infinities become None; numpy scalars and arrays become Python ones."""
    if isinstance(x, dict):
        return {str(k): finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    if isinstance(x, np.ndarray):
        return finite(x.tolist())
    if isinstance(x, np.generic):
        return finite(x.item())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


# ------------------------------------------------------------------------------------------------
# Ceilings
# ------------------------------------------------------------------------------------------------


def ceilings(spec: HardwareSpec, only_measured: bool = False) -> dict[str, Any]:
    """Compute ceilings (one per distinct peak; dtypes with the same peak share a line), memory
    ceilings (HBM, L2, shared memory when the spec gives its bandwidth) and the ridge point of each
    compute ceiling against HBM, each with its source ("datasheet", "estimate", "measured" or
    "measured estimate").

    ``only_measured``: a measured spec's ceilings that it measured itself (not those inherited
    from its datasheet base), so the chart can tell the two apart."""

    def keep(key: str) -> bool:
        return not only_measured or key in spec.measured_keys

    compute: dict[float, dict[str, Any]] = {}
    for dtype, tflops in spec.peak_dense_tflops.items():
        key = f"peak_dense_tflops.{dtype}"
        if not keep(key):
            continue
        c = compute.setdefault(float(tflops), {"dtypes": [], "peak_flops_per_s": float(tflops) * 1e12, "source": spec.provenance(key)})
        c["dtypes"].append(dtype)
        if spec.provenance(key) != "datasheet":
            c["source"] = spec.provenance(key)
    memory = []
    for level, attr, key in (
        ("HBM", "memory_bandwidth_gb_per_s", "memory.bandwidth_gb_per_s"),
        ("L2", "l2_bandwidth_gb_per_s", "cache.l2_bandwidth_gb_per_s"),
        ("shared memory", "smem_bandwidth_gb_per_s", "cache.smem_bandwidth_gb_per_s"),
    ):
        gbps = getattr(spec, attr, None)
        if gbps and keep(key):
            memory.append({"level": level, "bandwidth_bytes_per_s": float(gbps) * 1e9, "source": spec.provenance(key)})
    hbm = spec.memory_bandwidth_bytes_per_s
    out_compute = sorted(compute.values(), key=lambda c: -c["peak_flops_per_s"])
    for c in out_compute:
        c["label"] = "/".join(c["dtypes"]) + (" (TOP/s)" if all(d.startswith("int") for d in c["dtypes"]) else "")
        c["ridge_point_flop_per_byte"] = c["peak_flops_per_s"] / hbm
    return {"spec": spec.id, "kind": spec.kind, "compute": out_compute, "memory": memory}


# ------------------------------------------------------------------------------------------------
# Predicted ops
# ------------------------------------------------------------------------------------------------


def op_points(analysis) -> list[dict[str, Any]]:
    """One row per op and phase of an ``Analysis``: its FLOPs, bytes, AI, predicted time, share of
    the phase, achieved FLOP/s at the prediction and % of its roof at its AI (on the mode's roof,
    ``Analysis.roof_spec``: the datasheet's or the measured roof, drawn as its own line; below 100%
    where launch overhead, communication or an efficiency < 1 apply), and the share of the compute
    peak and of the HBM bandwidth it uses (``pct_of_peak_flops``, ``pct_of_bandwidth``: the
    per-op table's columns; % of roof is 100% wherever the roof alone sets an op's time).
    ``placed``: whether it can sit on a log-log roofline (it has FLOPs and HBM bytes)."""
    wl = analysis.workload
    spec = analysis.roof_spec or analysis.spec  # the ceilings the ops' times were computed on (the mode's roof)
    peak = spec.peak_flops_per_s(wl.compute_dtype)
    bw = spec.memory_bandwidth_bytes_per_s
    rows = []
    for phase in (analysis.prefill, analysis.decode):
        total = phase.time_s or 1.0
        for r in phase.ops:
            ai = r.arithmetic_intensity_flop_per_byte
            placed = bool(r.flops > 0 and r.bytes > 0 and r.time_s > 0)
            achieved = r.flops / r.time_s if r.time_s > 0 else None
            roof = float(F.attainable_flops_per_s(ai, peak, bw)) if ai else None
            rows.append(
                {
                    "phase": phase.phase,
                    "name": r.name,
                    "kind": r.kind,
                    "category": op_category(r.name, r.kind),
                    "group": r.group,
                    "layers": r.layers,
                    "flops": r.flops,
                    "bytes": r.bytes,
                    "weights_bytes": r.weights_bytes,
                    "kv_bytes": r.kv_read_bytes + r.kv_write_bytes,
                    "activation_bytes": r.activation_bytes,
                    "comm_bytes": r.comm_bytes,
                    "arithmetic_intensity_flop_per_byte": ai,
                    "time_s": r.time_s,
                    "share_of_phase": r.time_s / total,
                    "achieved_flops_per_s": achieved,
                    "roof_flops_per_s": roof,
                    "pct_of_roof": (achieved / roof * 100.0) if (achieved and roof) else None,
                    # what the op uses of the GPU: 100% on one of the two where the roof binds it
                    "pct_of_peak_flops": (achieved / peak * 100.0) if achieved else None,
                    "pct_of_bandwidth": (r.bytes / r.time_s / bw * 100.0) if r.time_s > 0 and r.bytes > 0 else None,
                    "bound": r.bound,
                    "placed": placed,
                    "note": r.note,
                }
            )
    return rows


#: the breakdown's share of an achievable phase that its ops' roof times leave out
BEYOND_ROOF = "beyond the roof (fixed costs, efficiency)"


def _with_hbm(c: dict[str, Any], bw: float, below: float, level: str) -> dict[str, Any]:
    """``c`` with one more HBM ceiling of ``bw`` bytes/s (measured) when it is above ``below``."""
    if bw <= below * (1 + 1e-6):
        return c
    return {**c, "memory": [*c["memory"], {"level": level, "bandwidth_bytes_per_s": bw, "source": "measured"}]}


def _with_model_roof(c: dict[str, Any], a) -> dict[str, Any]:
    """``c`` plus, in achievable mode, the HBM ceiling the analysis's roof uses when it is not the
    spec's (the fastest measured stream): the op markers sit under it, not above the spec's line."""
    if a.mode != "achievable" or a.roof_spec is None:
        return c
    return _with_hbm(c, a.roof_spec.memory_bandwidth_bytes_per_s, a.spec.memory_bandwidth_bytes_per_s,
                     "HBM, fastest measured stream (the achievable mode's roof)")


#: the dtypes whose burst peak the roofline draws (those our kernels and their baselines run)
BURST_DRAWN = ("bf16", "fp16", "fp8")


def _with_fastest(c: dict[str, Any], measured: HardwareSpec) -> dict[str, Any]:
    """A measured spec's ceilings plus the fastest ones it knows of where they are higher
    (``ceilings.fastest_spec``: burst peaks, the fastest measured stream): the ceilings
    a measured kernel is flagged against (5% slack), drawn so a point under them is seen to be."""
    from rooflinecli.predict import fastest_ceilings

    try:
        f = fastest_ceilings(measured)
    except RooflineError:
        return c
    compute = list(c["compute"])
    for dtype, tflops in sorted(f.peak_dense_tflops.items()):
        if dtype not in BURST_DRAWN:
            continue
        if tflops > measured.peak_dense_tflops.get(dtype, float("inf")) * (1 + 1e-6) and f"peak_dense_tflops.{dtype}" in measured.measured_keys:
            compute.append({"dtypes": [dtype], "peak_flops_per_s": float(tflops) * 1e12, "source": "measured", "label": f"{dtype} burst",
                            "ridge_point_flop_per_byte": float(tflops) * 1e12 / measured.memory_bandwidth_bytes_per_s})
    return _with_hbm({**c, "compute": compute}, f.memory_bandwidth_bytes_per_s, measured.memory_bandwidth_bytes_per_s, "HBM, fastest measured stream")


def breakdown(points: list[dict[str, Any]], beyond_roof_s: dict[str, float] | None = None) -> dict[str, dict[str, float]]:
    """Predicted time per category and phase (prefill: the whole prompt; decode: one step): the
    ops' roof times, plus ``beyond_roof_s`` per phase (achievable mode: achievable - roof) so the
    bars add up to the phase's TTFT / TPOT as the summary states them."""
    out: dict[str, dict[str, float]] = {}
    for p in points:
        d = out.setdefault(p["phase"], {c: 0.0 for c in CATEGORIES})
        d[p["category"]] += p["time_s"]
    used = [c for c in CATEGORIES if any(d[c] > 0 for d in out.values())]
    res = {ph: {c: d[c] for c in used} for ph, d in out.items()}
    extra = {ph: float(x) for ph, x in (beyond_roof_s or {}).items() if ph in res and x > 0}
    if extra:  # one more category, in every phase (as the others are)
        for ph, d in res.items():
            d[BEYOND_ROOF] = extra.get(ph, 0.0)
    return res


# ------------------------------------------------------------------------------------------------
# Sweeps (all from the analysis's vectorized phase_grid / memory_totals)
# ------------------------------------------------------------------------------------------------


def _log_ints(lo: float, hi: float, n: int, extra=()) -> np.ndarray:
    pts = np.unique(np.round(np.geomspace(max(lo, 1.0), max(hi, lo + 1.0), n)).astype(np.int64))
    extra = [int(x) for x in extra if x is not None and lo <= x <= hi]
    return np.unique(np.concatenate([pts, np.asarray(extra, dtype=np.int64)]))


def kv_vs_weights(cfg: ModelConfig, spec: HardwareSpec, wl, crossover: float | None) -> dict[str, Any]:
    """Bytes one decode step reads from the KV cache and from the weights, over context, at the
    workload's batch; and the KV cache held vs the weights held. ``crossover``: the analysis's
    ``kv_crossover_context``."""
    from rooflinecli.predict import phase_grid

    end = wl.prompt_len + wl.gen_len
    hi = max(4 * end, 4 * (crossover or 0), 1 << 17)
    hi = min(hi, max(1 << 24, 4 * end))
    ctx = _log_ints(16, hi, 90, [end, round(crossover) if crossover else None])
    g = phase_grid(cfg, spec, wl, "decode", np.asarray([float(wl.batch)]), ctx.astype(float))
    return {
        "batch": wl.batch,
        "context": ctx,
        "kv_read_bytes_per_step": g["kv_read_bytes"],
        "weights_read_bytes_per_step": g["weights_bytes"],
        "kv_cache_bytes_per_gpu": g["kv_cache_bytes_per_gpu"],
        "weights_bytes_per_gpu": np.broadcast_to(g["weights_bytes_per_gpu"], ctx.shape),
        "crossover_context": crossover,
        "workload_context": end,
    }


def memory_vs_batch(cfg: ModelConfig, spec: HardwareSpec, wl, max_batch_fits: int) -> dict[str, Any]:
    """Weights, KV cache (at context prompt + gen) and prefill workspace per GPU over batch, with
    the capacity: ``analysis.memory_totals``, the function ``analyze``'s memory figures use."""
    from rooflinecli.analysis import memory_totals

    S, end = wl.prompt_len, wl.prompt_len + wl.gen_len
    hi = max(256, 4 * max_batch_fits, 4 * wl.batch)
    b = _log_ints(1, min(hi, MAX_SWEEP_BATCH), 70, [wl.batch, max_batch_fits or None])
    m = memory_totals(cfg, spec, wl, float(S), float(end), b.astype(float))
    return {
        "context": end,
        "batch": b,
        "weights_bytes_per_gpu": np.broadcast_to(m["weights_bytes_per_gpu"], b.shape),
        "kv_cache_bytes_per_gpu": m["kv_cache_bytes_per_gpu"],
        "activation_workspace_bytes_per_gpu": m["activation_workspace_bytes_per_gpu"],
        "total_bytes_per_gpu": m["total_bytes_per_gpu"],
        "capacity_bytes_per_gpu": float(spec.memory_capacity_bytes),
        "max_batch_that_fits": max_batch_fits,
    }


def batch_sweep(cfg: ModelConfig, spec: HardwareSpec, wl, context: int, marks: dict[str, int | None]) -> dict[str, Any]:
    """One decode step at ``context`` over batch 1..65536: TPOT, decode throughput per GPU,
    whether the step is compute-bound, and whether it fits in memory. ``marks``: the analysis's
    compute-bound batches (whole step and matmuls only)."""
    from rooflinecli.predict import phase_grid

    b = _log_ints(1, MAX_SWEEP_BATCH, 120, [wl.batch, *marks.values()])
    g = phase_grid(cfg, spec, wl, "decode", b.astype(float), np.asarray([float(context)]))
    t = np.broadcast_to(g["time_s"], b.shape)
    return {
        "context": context,
        "batch": b,
        "tpot_s": t,
        "tokens_per_s_per_gpu": b / t / wl.num_gpus,
        "compute_time_s": np.broadcast_to(g["compute_time_s"], b.shape),
        "memory_time_s": np.broadcast_to(g["memory_time_s"], b.shape),
        "compute_bound": np.broadcast_to(g["compute_bound"], b.shape),
        "fits": np.broadcast_to(g["fits"], b.shape),
        "compute_bound_batch": marks.get("whole step"),
        "gemm_compute_bound_batch": marks.get("matmuls"),
    }


def attention_variants(cfg: ModelConfig, spec: HardwareSpec, wl) -> dict[str, Any]:
    """The model as configured and its MHA / GQA / MQA / MLA / compressed variants: KV bytes per
    token and cached at the workload's context, TTFT, TPOT and decode throughput, each a full
    analysis run (``whatif.compare.summary_row``, ``whatif.kv_variants.kv_rows``)."""
    from rooflinecli.analysis import VARIANTS, with_attention_variant
    from rooflinecli.whatif.compare import summary_row
    from rooflinecli.whatif.kv_variants import describe_attention, kv_rows, variant_label

    configured = variant_label(cfg)
    wl_kwargs = {k: v for k, v in asdict(wl).items() if k not in ("batch", "prompt_len", "gen_len")}
    end = wl.prompt_len + wl.gen_len
    rows, notes = [], []
    kv_by_label = {}
    try:
        for r in kv_rows(cfg, spec, wl.batch, end, wl_kwargs):
            kv_by_label[r.variant] = r
    except RooflineError as e:
        notes.append(f"KV figures of the variants unavailable: {e}")
    for kind in (configured, *[v for v in VARIANTS if v != configured]):
        label = f"* {configured}" if kind == configured else kind
        try:
            m = cfg if kind == configured else with_attention_variant(cfg, kind)
            s = summary_row(label, m, spec, wl, wl.mode)
        except RooflineError as e:
            notes.append(f"{kind}: {e}")
            continue
        kv = kv_by_label.get(label)
        rows.append(
            {
                "variant": label,
                "configured": kind == configured,
                "attention": describe_attention(m),
                "kv_bytes_per_token": kv.kv_bytes_per_token if kv else None,
                "kv_cache_bytes": kv.kv_cache_bytes if kv else None,
                "kv_cache_vs_configured": kv.kv_cache_vs_configured if kv else None,
                "crossover_context_tokens": kv.crossover_context_tokens if kv else None,
                "ttft_s": s["ttft_s"],
                "tpot_s": s["tpot_s"],
                "decode_tokens_per_s_per_gpu": s["decode_tokens_per_s_per_gpu"],
                "weights_bytes_per_gpu": s["memory_weights_bytes"],
                "kv_cache_bytes_per_gpu": s["memory_kv_cache_bytes"],
                "fits": s["memory_fits"],
            }
        )
    return {"context": end, "batch": wl.batch, "rows": rows, "notes": notes}


def moe_section(cfg: ModelConfig, wl) -> dict[str, Any]:
    """Total vs active parameters per component (``params``); for MoE models also the expected
    distinct experts one layer reads for T tokens (uniform routing and the workload's skew)."""
    total = P.param_breakdown(cfg)
    active = P.active_param_breakdown(cfg, include_embeddings=True)
    out: dict[str, Any] = {
        "is_moe": cfg.moe is not None,
        "components": [{"component": k, "total_params": total[k], "active_params": active[k]} for k in total],
        "total_params": float(sum(total.values())),
        "active_params": float(sum(active.values())),
        "active_params_without_embeddings": float(P.active_params(cfg, include_embeddings=False)),
        "published_total_params": cfg.published_params,
        "published_active_params": cfg.published_active_params,
        "experts_touched": None,
    }
    if cfg.moe is not None:
        from rooflinecli.whatif.moe import experts_touched

        T = _log_ints(1, 1 << 14, 60, [wl.batch])
        e = experts_touched(cfg, T.astype(float), wl.expert_skew)
        out["experts_touched"] = {
            "tokens": T,
            "uniform": e["uniform"],
            "skewed": e["skewed"],
            "skew": wl.expert_skew,
            "num_routed_experts": cfg.moe.num_routed_experts,
            "top_k": cfg.moe.top_k,
        }
    return out


# ------------------------------------------------------------------------------------------------
# Measured points, validation and regress
# ------------------------------------------------------------------------------------------------


def measured_points(validation: dict[str, Any]) -> list[dict[str, Any]]:
    """Each validated kernel row as a measured point beside its prediction on the datasheet roof
    (the same AI; FLOP/s = FLOPs / time). % of roof = predicted time (measured ceilings when
    available, else datasheet) / measured time x 100. Rows without FLOPs (copy) have no place on a
    log FLOP/s axis: ``placed`` False."""
    out = []
    for r in validation.get("rows", []):
        m = r["measured_s"]
        pred = r.get("predicted_datasheet_s")
        best = r.get("predicted_measured_s") or pred
        ai = r.get("ai_flops_per_byte")
        out.append(
            {
                "name": f"{r['op']}[{r['impl']}]",
                "op": r["op"],
                "impl": r["impl"],
                "shape": r["shape"],
                "dtype": r["dtype"],
                "kind": r["kind"],
                "bound": r["bound"],
                "arithmetic_intensity_flop_per_byte": ai,
                "flops": r["flops"],
                "bytes": r["bytes"],
                "measured_s": m,
                "measured_flops_per_s": r["flops"] / m if m else None,
                "measured_bytes_per_s": r["bytes"] / m if m else None,
                "predicted_s": pred,
                "predicted_flops_per_s": r["flops"] / pred if pred else None,
                "pct_of_roof": best / m * 100.0 if (best and m) else None,
                "pct_of_roof_basis": "measured ceilings" if r.get("predicted_measured_s") else "datasheet",
                "pct_of_datasheet_roof": pred / m * 100.0 if (pred and m) else None,
                "error_datasheet": r.get("error_datasheet"),
                "error_measured": r.get("error_measured"),
                "above_roof": bool(r.get("above_roof") or r.get("above_measured_roof")),
                "placed": bool(r["flops"] > 0 and r["bytes"] > 0 and ai),
            }
        )
    return out


# ------------------------------------------------------------------------------------------------
# The whole report
# ------------------------------------------------------------------------------------------------


ASSUMPTIONS: tuple[str, ...] = (
    "Roofline per op: time = max(FLOPs / (peak x efficiency), bytes / (HBM bandwidth x efficiency)) + link time for communication + launch overhead; a phase is the sum of its ops over the layers.",
    "Bytes are minimum HBM traffic: weights read once per step, each op's input read and output written once; attention is flash-style (no N x N matrix in HBM); residual adds and RoPE are fused and not counted.",
    "Prefill: batch x prompt tokens, causal; the LM head runs only for the last token of each sequence. Decode: one step per generated token at contexts prompt .. prompt + gen - 1; per-op decode figures are means over those steps.",
    "Times, bytes and memory are per GPU of one replica: max(TP, EP) GPUs, the experts split over EP of them, attention data-parallel over EP / TP groups when EP > TP.",
    "MoE: expected distinct experts touched under uniform routing, E x (1 - (1 - k/E)^T), with the skew factor for imbalanced routing.",
    "Memory: weights + KV cache at context prompt + gen + the transient activations of a prefill (sized for one chunk of --prefill-chunk tokens; prefill time is modelled unchunked), against the spec's capacity.",
    "Ceilings come from spec files with their sources; a measured spec's ceilings are drawn apart from the datasheet ones. No point predicted by the model can lie above its roof; a measured point above its roof means FLOPs or bytes were over-counted (or data came from cache) and is flagged.",
)


def build_report_data(
    cfg: ModelConfig,
    specs: list[HardwareSpec],
    wl,
    *,
    inputs: dict[str, Any] | None = None,
    results=None,
    baseline=None,
    measured_spec: str | None = None,
    now: datetime | None = None,
    mode: str | None = "roof",
    price_for=None,
    serving: bool = False,
) -> dict[str, Any]:
    """Everything the report shows, JSON-ready (numpy arrays as lists, NaN as null).

    ``specs``: the GPUs (the first is analysed in depth; several are compared side by side).
    ``results`` / ``baseline``: loaded ``Results``; with results the validation (measured points,
    predicted vs measured) is included, with a baseline also the regress comparison (baseline vs
    results). ``measured_spec``: a measured spec id or path for the measured ceilings (default: the
    one the results name). ``mode``: the TTFT/TPOT of a mode of ``rooflinecli.predict`` ("datasheet",
    "measured-roof", "roof" or "achievable"); None:
    achievable on calibrated specs, roof on the others (``predict.resolve_mode``)."""
    from rooflinecli import __version__
    from rooflinecli.analysis import validate_workload
    from rooflinecli.predict import analyze
    from rooflinecli.analysis.ops import check_parallel
    from rooflinecli.kv import kv_bytes_per_token

    if not specs:
        raise RooflineError("no GPU given: pass --hw with an id (see `roofline hw list`) or a spec file path")
    if baseline is not None and results is None:
        raise RooflineError("--baseline needs --results: the baseline is compared with the results run")
    validate_workload(wl)
    check_parallel(cfg, wl)
    spec = specs[0]
    from dataclasses import replace

    from rooflinecli.predict import resolve_mode

    # ``price_for``: spec -> USD per GPU-hour (per-GPU prices); None keeps the workload's one price
    analyses = [analyze(cfg, s, replace(wl, mode=resolve_mode(s, mode, wl.engine),
                                        **({"price_per_gpu_hour": price_for(s)} if price_for else {}))) for s in specs]
    a = analyses[0]
    wl = a.workload  # the first GPU's mode, resolved: every section of it times as its analysis does

    # measured ceilings: --measured-hw, else the measured spec the validation resolved
    validation = None
    measured = None
    extra_warnings: list[str] = []
    if results is not None:
        from rooflinecli.bench.validate import validate

        # the specs the run recorded (else the report's first GPU), so each kernel is held to the GPU it ran on
        v = validate(results, hw=None if results.hardware_spec else spec.id, measured=measured_spec)
        validation = v.to_json()
        measured = v.measured
        if v.datasheet is not None and v.datasheet.id != spec.id:
            extra_warnings.append(
                f"the measured kernels ran on {v.gpu_name} and are held to {v.datasheet.id}'s roofs; the roofline chart's ceilings are {spec.id}'s"
            )
    elif measured_spec is not None:
        from rooflinecli.hardware import get_spec

        measured = get_spec(measured_spec)
    if measured is not None and measured.kind != "measured":
        raise RooflineError(f"--measured-hw {measured.id}: is a {measured.kind} spec, not a measured one (kind = \"measured\")")

    regress = None
    if baseline is not None:
        from rooflinecli.gate.decision import GateParams, compare
        from rooflinecli.gate.render import render_json

        regress = render_json(compare(baseline, results, GateParams(impls=None), allow_hardware_mismatch=True))

    points = op_points(a)
    mid = a.decode_compute_bound_context
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "tool": "rooflinecli",
        "tool_version": __version__,
        "generated_utc": (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "inputs": dict(inputs or {}),
        "assumptions": list(ASSUMPTIONS),
        "warnings": list(a.warnings) + extra_warnings,
        "model": {
            "name": cfg.name,
            "display_name": cfg.display_name or cfg.name,
            "source": cfg.source,
            "model_type": cfg.model_type,
            "attention": cfg.attention_kind,
            "num_layers": cfg.num_layers,
            "hidden_size": cfg.hidden_size,
            "num_heads": cfg.num_heads,
            "num_kv_heads": cfg.num_kv_heads,
            "head_dim": cfg.head_dim,
            "vocab_size": cfg.vocab_size,
            "total_params": P.total_params(cfg),
            "active_params": P.active_params(cfg),
            "kv_bytes_per_token": kv_bytes_per_token(cfg, wl.kv_bytes_per_element),
            "is_moe": cfg.moe is not None,
        },
        "hardware": [s.to_dict() for s in specs],
        "measured_hardware": measured.to_dict() if measured is not None else None,
        "analysis": a.to_json(),
        "ceilings": {
            "datasheet": _with_model_roof(ceilings(spec), a),
            "measured": _with_fastest(ceilings(measured, only_measured=True), measured) if measured is not None else None,
        },
        "ops": points,
        "breakdown_s": breakdown(points, {"prefill": a.ttft_s - a.roof_ttft_s, "decode": a.tpot_s - a.roof_tpot_s} if a.mode == "achievable" else None),
        "kv_vs_weights": kv_vs_weights(cfg, spec, wl, a.kv_crossover_context),
        "memory_vs_batch": memory_vs_batch(cfg, spec, wl, a.memory["max_batch_at_context"]),
        "batch_sweep": batch_sweep(cfg, spec, wl, mid, {"whole step": a.decode_compute_bound_batch, "matmuls": a.decode_gemm_compute_bound_batch}),
        "attention_variants": attention_variants(cfg, spec, wl),
        "moe": moe_section(cfg, wl),
        "gpus": [
            {
                "hw": s.id,
                "name": s.name,
                "kind": s.kind,
                "mode": x.workload.mode,
                "ttft_s": x.ttft_s,
                "tpot_s": x.tpot_s,
                "e2e_latency_s": x.e2e_latency_s,
                "tokens_per_s_per_gpu": x.tokens_per_s_per_gpu,
                "prefill_bound": x.prefill.bound,
                "decode_bound": x.decode.bound,
                "ridge_point_flop_per_byte": x.ridge_point_flop_per_byte,
                "peak_flops_per_s": s.peak_flops_per_s(wl.compute_dtype),
                "memory_bandwidth_bytes_per_s": s.memory_bandwidth_bytes_per_s,
                "memory_capacity_bytes": s.memory_capacity_bytes,
                "total_bytes_per_gpu": x.memory["total_bytes_per_gpu"],
                "fits": x.memory["fits"],
                "decode_compute_bound_batch": x.decode_compute_bound_batch,
                "cost_per_million_output_tokens_usd": x.cost_per_million_output_tokens_usd,
            }
            for s, x in zip(specs, analyses)
        ],
        "measured_points": measured_points(validation) if validation else [],
        "validation": validation,
        "regress": regress,
    }
    if serving:  # the serving section (report/serving.py): the frontier on one node, TTFT/TPOT against load
        from rooflinecli.report.serving import serving_section

        data["serving"] = serving_section(cfg, spec, wl)
    return finite(data)

