"""The one prediction path: (model config, workload, GPU spec, mode, engine) -> per-op rows and
phase times. ``analyze``, ``sweep``, ``compare``, ``report``, ``validate``, the what-ifs and
serving all call it; nothing else composes the roofline (``rooflinecli.analysis``) with the
calibrated model (``rooflinecli.achievable``).

Modes, each named for what it is and printed with its ceilings and ridge point:

- ``datasheet``: the roofline on the vendor's figures (a measured spec's base spec);
- ``measured-roof``: the roofline on a measured spec's measured roof (``ceilings.measured_roof_spec``:
  sustained peaks, the fastest HBM stream measured on that GPU);
- ``achievable``: the calibrated vendor-kernel model of an engine, with the measured roof beside it.

``roof`` is taken as the roofline on the spec's own kind of figures: ``datasheet`` on a datasheet
spec, ``measured-roof`` on a measured one. No mode (None): ``achievable`` where the spec has a
calibration for the engine, else that roof.

Entry points: ``resolve_mode``, ``roof_ceilings``, ``predict_phase`` (per-op rows and totals of one
phase over a (batch, context) grid), ``phase_grid`` (its totals with memory, for sweeps),
``predict_step_breakdown`` / ``predict_step_s`` (one point) and ``analyze`` (a whole workload).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

from rooflinecli import ceilings
from rooflinecli.analysis.memory import fit_warning, max_batch_that_fits, max_context_that_fits, memory_totals, weights_breakdown_per_gpu
from rooflinecli.analysis.ops import check_parallel, kv_heads_per_gpu
from rooflinecli.analysis.phase import TOTAL_FIELDS, OpTime, phase_times, sum_ops
from rooflinecli.analysis.summary import OpRow, PhaseResult, decode_compute_bound_batches, kv_crossover_context, phase_result
from rooflinecli.analysis.workload import Workload, validate_workload
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

DATASHEET = "datasheet"
MEASURED_ROOF = "measured-roof"
ACHIEVABLE = "achievable"
#: the modes, in the order they are listed
MODES: tuple[str, ...] = (DATASHEET, MEASURED_ROOF, ACHIEVABLE)
#: the roofline on the spec's own kind of figures (datasheet or measured roof)
ROOF = "roof"
#: what each mode's ceilings are, for summary lines
MODE_CEILINGS = {
    DATASHEET: "the datasheet's figures",
    MEASURED_ROOF: "the measured roof (sustained peaks, fastest measured HBM stream)",
    ACHIEVABLE: "the calibrated kernel model, with the measured roof beside it",
}


def _normal_mode(mode: str | None) -> str | None:
    return None if mode is None else mode.strip().lower().replace("_", "-")


def default_engine(spec: HardwareSpec, engine: str | None = None, mode: str | None = None) -> str:
    """The engine a prediction runs: ``engine`` checked; else the spec's default (torch, the
    engine of the project's own calibration), except that ``achievable`` asked for on a GPU whose
    only calibrations are imported (or transferred) ones takes the first of those
    (imported or transferred: the first of vllm, trtllm, sglang)."""
    from rooflinecli.achievable import default_engine as spec_default
    from rooflinecli.achievable import get_engine, has_calibration, serving_engine

    if engine is not None:
        get_engine(engine)
        return engine
    name = spec_default(spec)
    if _normal_mode(mode) == ACHIEVABLE and not has_calibration(spec, name):
        name = serving_engine(spec) or name
    return name


def resolve_mode(spec: HardwareSpec, mode: str | None, engine: str | None = None, option: str = "--mode") -> str:
    """The mode a prediction runs in (see the module's docstring). ``achievable`` on a spec without
    a calibration for the engine is a RooflineError naming ``option``."""
    from rooflinecli.achievable import has_calibration, require_models

    roof = MEASURED_ROOF if spec.kind == "measured" else DATASHEET
    name = default_engine(spec, engine, mode)
    if mode is None:
        return ACHIEVABLE if has_calibration(spec, name) else roof
    m = _normal_mode(mode)
    if m == ROOF:
        return roof
    if m not in MODES:
        raise RooflineError(f"{option}: unknown mode '{mode}'; known: {', '.join((ROOF, *MODES))}")
    if m == MEASURED_ROOF and spec.kind != "measured":
        raise RooflineError(f"{option} {MEASURED_ROOF} needs a measured spec (e.g. --hw h200-measured); {spec.id} is {spec.kind}: use --mode {DATASHEET}")
    if m == ACHIEVABLE:
        require_models(spec, name)
    return m


def roof_ceilings(spec: HardwareSpec, mode: str, engine: str | None = None) -> HardwareSpec:
    """The ceilings of ``mode``'s roofline on ``spec`` (a resolved mode): the datasheet's, or the
    measured roof (with the calibration's fastest stream, when the spec has one)."""
    if mode == DATASHEET:
        return ceilings.datasheet_spec(spec)
    if spec.kind != "measured":
        return spec
    return ceilings.measured_roof_spec(spec, _streams(spec, engine))


def _streams(spec: HardwareSpec, engine: str | None):
    from rooflinecli.achievable import models_for

    models = models_for(spec, default_engine(spec, engine))
    return models.streams if models is not None else ()


def roof_bandwidth_source(spec: HardwareSpec, engine: str | None = None) -> str:
    """Where the measured roof's HBM bandwidth on ``spec`` comes from, in words."""
    return ceilings.measured_roof_bandwidth(spec, _streams(spec, engine))[1]


def fastest_ceilings(spec: HardwareSpec, engine: str | None = None) -> HardwareSpec:
    """The fastest measured ceilings of ``spec`` (``ceilings.fastest_spec``), with its
    calibration's streams where one is named and loads (the spec's own figures where it does not)."""
    try:
        streams = _streams(spec, engine)
    except RooflineError:
        streams = ()
    return ceilings.fastest_spec(spec, streams)


def _roofline_workload(wl: Workload, mode: str) -> Workload:
    """The workload the roofline times: achievable mode's roof is the pure roofline (the
    efficiency and launch-overhead knobs shape the roof modes only)."""
    if mode == ACHIEVABLE and (wl.efficiency or wl.launch_overhead_s):
        return replace(wl, efficiency={}, launch_overhead_s=0.0)
    return wl


@dataclass
class PhasePrediction:
    """One phase over a (batch, context) grid: the roofline per op (``roof``, on ``ceilings``) and,
    in achievable mode, the calibrated rows (``achievable.step.StepRow``)."""

    phase: str
    mode: str
    engine: str | None
    ceilings: HardwareSpec
    roof: list[OpTime]
    achievable: list | None
    shape: tuple

    @property
    def roof_time_s(self) -> np.ndarray:
        return sum_ops(self.roof, self.shape)["time_s"]

    @property
    def time_s(self) -> np.ndarray:
        """The mode's seconds over the grid."""
        if self.achievable is None:
            return self.roof_time_s
        total = np.zeros(self.shape)
        for r in self.achievable:
            total = total + r.time_s
        return total

    def rows(self) -> list[dict]:
        """Per-op rows summed over the grid: name, kind, layers, kernels, time_s (the mode's),
        roof_s, fixed_s, efficiency, note (achievable rows add host_s: the host's seconds per layer
        of the row's eager calls)."""
        if self.achievable is not None:
            return [
                {"name": r.name, "kind": r.kind, "layers": r.layers, "kernels": r.kernels, "time_s": float(np.sum(r.time_s)),
                 "roof_s": float(np.sum(r.roof_s)), "fixed_s": float(np.sum(r.fixed_s)), "efficiency": r.mean_efficiency(), "note": r.note,
                 "host_s": r.host_s}
                for r in self.achievable
            ]
        return [
            {"name": t.name, "kind": t.op.kind, "layers": t.op.layers, "kernels": t.op.kernels, "time_s": float(np.sum(t.time_s)),
             "roof_s": float(np.sum(t.time_s)), "fixed_s": 0.0, "efficiency": 1.0, "note": t.op.note}
            for t in self.roof
        ]


def predict_phase(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str, batch, context,
                  mode: str | None = None, engine: str | None = None) -> PhasePrediction:
    """Phase "prefill" (the whole prefill of ``context`` prompt tokens per sequence) or "decode"
    (one decode step at ``context`` cached tokens) over broadcasting ``batch`` and ``context``.
    ``mode`` / ``engine`` default to the workload's."""
    validate_workload(wl)
    mode = mode if mode is not None else wl.mode
    engine = default_engine(spec, engine if engine is not None else wl.engine, mode)
    mode = resolve_mode(spec, mode, engine)
    batch = np.asarray(batch, dtype=float)
    context = np.asarray(context, dtype=float)
    shape = np.broadcast_shapes(batch.shape, context.shape)
    roof_spec = roof_ceilings(spec, mode, engine)
    roof = phase_times(cfg, roof_spec, _roofline_workload(wl, mode), phase, batch, context)
    ach = None
    if mode == ACHIEVABLE:
        from rooflinecli.achievable import phase_achievable

        ach = phase_achievable(cfg, spec, _roofline_workload(wl, mode), phase, batch, context, engine)
    return PhasePrediction(phase, mode, engine if mode == ACHIEVABLE else None, roof_spec, roof, ach, shape)


def phase_grid(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str, batch, context) -> dict[str, np.ndarray]:
    """Vectorized totals of one phase over broadcasting ``batch`` and ``context`` arrays (prefill:
    context = prompt length; decode: one step at cached context N), in the workload's mode.

    Keys: time_s (the mode's), roof_time_s, flops, bytes, compute_time_s, memory_time_s,
    comm_time_s, overhead_s, weights_bytes, activation_bytes, kv_read_bytes, kv_write_bytes,
    comm_bytes, compute_bound, and memory at that context (prompt = context for the workspace):
    weights_bytes_per_gpu, kv_cache_bytes_per_gpu, activation_workspace_bytes_per_gpu,
    total_bytes_per_gpu, fits.
    """
    p = predict_phase(cfg, spec, wl, phase, batch, context)
    out = sum_ops(p.roof, p.shape)
    out["roof_time_s"] = out["time_s"]
    if p.achievable is not None:
        out["time_s"] = p.time_s
    context = np.asarray(context, dtype=float)
    mem = memory_totals(cfg, spec, wl, context, context, np.asarray(batch, dtype=float))
    for k in ("weights_bytes_per_gpu", "kv_cache_bytes_per_gpu", "activation_workspace_bytes_per_gpu", "total_bytes_per_gpu", "fits"):
        out[k] = np.broadcast_to(mem[k], p.shape)
    return out


def predict_step_breakdown(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str, batch, context, *,
                           mode: str | None = None, engine: str | None = None) -> list[dict]:
    """Per-op rows of one phase at one (batch, context) point (``PhasePrediction.rows``)."""
    return predict_phase(cfg, spec, wl, phase, float(batch), float(context), mode, engine).rows()


def predict_step_s(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str, batch, context, *,
                   mode: str | None = None, engine: str | None = None) -> float:
    """Seconds of one phase on one GPU of the replica at one point."""
    return float(np.sum(predict_phase(cfg, spec, wl, phase, float(batch), float(context), mode, engine).time_s))


def layer_prediction(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str) -> list[dict]:
    """Per-layer roofline rows of one phase at the workload's batch (prefill: S tokens; decode: one
    step at context S), in the workload's roof (a datasheet spec: its datasheet), for checking the
    model against kernels timed one layer at a time. Each row holds name, kind, group, layers and
    per-layer flops, bytes (split), compute/memory/comm time, time_s and bound."""
    p = predict_phase(cfg, spec, wl, phase, float(wl.batch), float(wl.prompt_len))
    rows = []
    for t in p.roof:
        r = asdict(OpRow.from_timed(t))
        L = max(t.op.layers, 1)
        for k in TOTAL_FIELDS:
            r[k] = r[k] / L
        r["per_layer"] = True
        rows.append(r)
    return rows


def _scalar(x):
    a = np.asarray(x)
    if a.dtype == bool:
        return bool(a)
    if a.dtype.kind in "US":
        return str(a)
    return float(a)


@dataclass
class Analysis:
    """One (model, GPU, workload) analysed: both phases' rows and totals, memory, the crossovers."""

    model: ModelConfig
    spec: HardwareSpec
    workload: Workload
    prefill: PhaseResult
    decode: PhaseResult  # per-op means over the G decode steps
    decode_naive_mla: PhaseResult | None  # MLA models: the other decode form, for comparison
    ttft_s: float
    tpot_first_s: float
    tpot_last_s: float
    tpot_s: float  # mean over the G decode steps
    e2e_latency_s: float
    tokens_per_s_per_sequence: float
    tokens_per_s_per_gpu: float  # decode throughput: batch / TPOT / GPUs
    end_to_end_tokens_per_s_per_gpu: float  # batch * G / latency / GPUs (prefill included)
    decode_compute_bound_batch: int | None  # whole step (None: attention keeps it memory-bound)
    decode_gemm_compute_bound_batch: int | None  # the matmuls alone (gemm + moe ops)
    decode_compute_bound_context: int
    ridge_point_flop_per_byte: float  # of the roof's ceilings (``roof_spec``)
    kv_crossover_context: float | None
    cost_per_million_output_tokens_usd: float | None
    memory: dict
    warnings: list[str] = field(default_factory=list)
    #: "datasheet", "measured-roof" or "achievable": which model ttft_s / tpot_s and the throughputs come from
    mode: str = DATASHEET
    engine: str | None = None
    roof_ttft_s: float = 0.0  # the roofline's figures on ``roof_spec`` (= ttft_s in a roof mode)
    roof_tpot_s: float = 0.0
    calibration: dict | None = None  # source of the calibration (achievable mode)
    #: achievable mode: per-op rows {"prefill": [...], "decode": [...]} (decode: mean over steps)
    achievable_ops: dict | None = None
    #: the ceilings of the roofline figures (``roof_ceilings``)
    roof_spec: HardwareSpec | None = None

    @property
    def num_gpus(self) -> int:
        return self.workload.num_gpus

    def to_json(self) -> dict:
        from rooflinecli.quant import weights_label

        wl = self.workload
        w = asdict(wl)
        w["efficiency"] = dict(wl.efficiency)
        w["num_gpus"] = wl.num_gpus
        w["kv_bytes_per_element"] = wl.kv_bytes_per_element
        w["weights_format"] = weights_label(self.model, wl)  # the weights as read: "gptq int4", "fp8", or weight_dtype
        return {
            "model": self.model.name,
            "hardware": self.spec.id,
            "hardware_kind": self.spec.kind,
            "workload": w,
            "mode": self.mode,
            "engine": self.engine,
            "calibration": self.calibration,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "roof_ttft_s": self.roof_ttft_s,
            "roof_tpot_s": self.roof_tpot_s,
            "roof_memory_bandwidth_gb_per_s": (self.roof_spec or self.spec).memory_bandwidth_gb_per_s,
            "roof_peak_tflops": (self.roof_spec or self.spec).peak_flops_per_s(self.workload.compute_dtype) / 1e12,
            "tpot_first_s": self.tpot_first_s,
            "tpot_last_s": self.tpot_last_s,
            "e2e_latency_s": self.e2e_latency_s,
            "tokens_per_s_per_sequence": self.tokens_per_s_per_sequence,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "end_to_end_tokens_per_s_per_gpu": self.end_to_end_tokens_per_s_per_gpu,
            "decode_compute_bound_batch": self.decode_compute_bound_batch,
            "decode_gemm_compute_bound_batch": self.decode_gemm_compute_bound_batch,
            "decode_compute_bound_context": self.decode_compute_bound_context,
            "ridge_point_flop_per_byte": self.ridge_point_flop_per_byte,
            "kv_crossover_context": self.kv_crossover_context,
            "cost_per_million_output_tokens_usd": self.cost_per_million_output_tokens_usd,
            "prefill": self.prefill.to_json(),
            "decode": self.decode.to_json(),
            "decode_naive_mla": self.decode_naive_mla.to_json() if self.decode_naive_mla else None,
            "memory": self.memory,
            "warnings": list(self.warnings),
            "achievable_ops": self.achievable_ops,
        }


def analyze(cfg: ModelConfig, spec: HardwareSpec, wl: Workload) -> Analysis:
    """The whole workload in its mode: prefill of B x S, then G decode steps at contexts S .. S+G-1."""
    validate_workload(wl)
    check_parallel(cfg, wl)
    B, S, G = wl.batch, wl.prompt_len, wl.gen_len
    engine = default_engine(spec, wl.engine, wl.mode)
    mode = resolve_mode(spec, wl.mode, engine)
    wl = replace(wl, mode=mode, engine=engine)
    warnings: list[str] = []
    if mode == ACHIEVABLE and (wl.efficiency or wl.launch_overhead_s):
        warnings.append("achievable mode: --efficiency and --launch-overhead-us apply to the roofline modes only (ignored)")

    steps = np.arange(S, S + G, dtype=float)
    pre = predict_phase(cfg, spec, wl, "prefill", float(B), float(S))
    dec = predict_phase(cfg, spec, wl, "decode", float(B), steps)
    rspec, rwl = pre.ceilings, _roofline_workload(wl, mode)
    prefill = phase_result("prefill", B, str(S), pre.roof)
    decode = phase_result("decode", B, f"{S}..{S + G - 1}", dec.roof)
    naive = None
    if cfg.mla is not None:
        other = "naive" if wl.mla_decode == "absorbed" else "absorbed"
        naive = phase_result("decode", B, f"{S}..{S + G - 1}", phase_times(cfg, rspec, replace(rwl, mla_decode=other), "decode", float(B), steps))
        naive.phase = f"decode ({other} MLA)"

    roof_ttft, roof_tpot = prefill.time_s, float(np.mean(dec.roof_time_s))
    step_times = np.broadcast_to(dec.time_s, steps.shape)
    ttft = float(np.sum(pre.time_s))
    tpot = float(np.mean(step_times))
    e2e = ttft + float(np.sum(step_times))
    n_gpus = wl.num_gpus
    cost = None
    if wl.price_per_gpu_hour is not None:
        cost = wl.price_per_gpu_hour * n_gpus / 3600.0 * e2e / (B * G) * 1e6

    mid = S + G // 2
    cb_step, cb_gemm = decode_compute_bound_batches(cfg, rspec, rwl, mid)
    mem = memory_totals(cfg, spec, wl, S, S + G, float(B))
    memory = {k: _scalar(v) for k, v in mem.items()}
    memory["weights_bytes"] = memory["weights_bytes_per_gpu"]
    memory["kv_cache_bytes"] = memory["kv_cache_bytes_per_gpu"]
    memory["activation_workspace_bytes"] = memory["activation_workspace_bytes_per_gpu"]
    memory["kv_cache_context"] = S + G
    memory["weights_breakdown_bytes_per_gpu"] = weights_breakdown_per_gpu(cfg, wl)
    memory["max_batch_at_context"] = max_batch_that_fits(cfg, spec, wl, S, S + G)
    memory["max_context_at_batch"] = max_context_that_fits(cfg, spec, wl, B)
    memory["per_gpu"] = True

    if S + G > cfg.max_position_embeddings:
        from rooflinecli.rope import context_warning

        msg = context_warning(cfg, S + G) or ""
        warnings.append(msg.removeprefix("warning: ") or f"context {S + G} exceeds {cfg.name}'s trained limit of {cfg.max_position_embeddings}; see `roofline rope`")
    if cfg.mla is None and wl.tp > cfg.num_kv_heads:
        warnings.append(f"--tp {wl.tp} > {cfg.num_kv_heads} KV heads: each GPU keeps {kv_heads_per_gpu(cfg, wl.tp):g} KV head (replicated), so KV bytes per GPU stop shrinking")
    if cfg.mla is not None and wl.tp > 1:
        warnings.append(f"--tp {wl.tp}: MLA's latent KV cache is replicated on every GPU")
    fit = fit_warning(cfg, spec, wl, S, S + G, float(B))
    if fit:
        warnings.append(fit)

    ach = _achievable_extras(cfg, spec, wl, pre, dec, warnings) if mode == ACHIEVABLE else None
    return Analysis(
        model=cfg,
        spec=spec,
        workload=wl,
        prefill=prefill,
        decode=decode,
        decode_naive_mla=naive,
        ttft_s=ttft,
        tpot_first_s=float(step_times[0]),
        tpot_last_s=float(step_times[-1]),
        tpot_s=tpot,
        e2e_latency_s=e2e,
        tokens_per_s_per_sequence=1.0 / tpot,
        tokens_per_s_per_gpu=B / tpot / n_gpus,
        end_to_end_tokens_per_s_per_gpu=B * G / e2e / n_gpus,
        decode_compute_bound_batch=cb_step,
        decode_gemm_compute_bound_batch=cb_gemm,
        decode_compute_bound_context=mid,
        ridge_point_flop_per_byte=rspec.ridge_point(wl.compute_dtype),
        kv_crossover_context=kv_crossover_context(cfg, spec, wl),
        cost_per_million_output_tokens_usd=cost,
        memory=memory,
        warnings=warnings,
        mode=mode,
        engine=engine if mode == ACHIEVABLE else None,
        roof_ttft_s=roof_ttft,
        roof_tpot_s=roof_tpot,
        calibration=ach["calibration"] if ach else None,
        achievable_ops=ach["ops"] if ach else None,
        roof_spec=rspec,
    )


#: MoE prefill warns (no grouped-GEMM calibration) from this many tokens per routed expert: the
#: dense-GEMM form holds at decode sizes (within 15% of a fused MoE kernel at 1-64 tokens)
MOE_WARN_TOKENS_PER_EXPERT = 128


def _achievable_extras(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, pre: PhasePrediction, dec: PhasePrediction, warnings: list[str]) -> dict:
    """Achievable mode's per-op rows, calibration source and warnings."""
    from rooflinecli.achievable import calibration_for, get_engine, models_for

    engine = dec.engine
    models = models_for(spec, engine)
    if any(r.kind == "comm" for r in dec.achievable) and not getattr(models, "collectives", None):
        calls = sum(r.layers * r.kernels for r in dec.achievable if r.kind == "comm")
        warnings.append(
            f"achievable mode, {wl.num_gpus} GPUs: the {calls:g} collectives of a decode step are timed at the link's "
            "roofline plus the graph floor; their latency is not calibrated (this calibration has no collective "
            "timings), so multi-GPU decode is optimistic by about one small-message all-reduce latency per collective"
        )
    if cfg.moe is not None and any(r.kind == "moe" for r in pre.achievable) and "moe.experts" not in {r.name for r in pre.achievable}:
        from rooflinecli.formulas import expected_experts_touched

        tokens = float(wl.batch) * wl.prompt_len
        per_expert = tokens * cfg.moe.top_k / float(expected_experts_touched(cfg.moe.num_routed_experts, cfg.moe.top_k, tokens, wl.expert_skew))
        torch_engine = get_engine(engine).moe_experts == "torch"
        if per_expert >= MOE_WARN_TOKENS_PER_EXPERT or torch_engine:
            warnings.append(
                "achievable mode: the routed experts are timed by the dense-GEMM fit on their FLOPs and bytes"
                + (" (this calibration has no moe_grouped fit for the torch engine's torch._grouped_mm: it takes 4 rows)" if torch_engine else "")
                + (f"; at prefill sizes ({per_expert:,.0f} tokens per expert here) grouped kernels run below dense "
                   "efficiency (1.2-5x the dense form at 4,096 tokens): MoE prefill is optimistic" if per_expert >= MOE_WARN_TOKENS_PER_EXPERT else "")
            )

    def rows(rs):
        return [
            {"name": r.name, "kind": r.kind, "layers": r.layers, "kernels_per_layer": r.kernels,
             "roof_time_s": float(np.mean(r.roof_s)), "time_s": float(np.mean(r.time_s)), "fixed_s": float(np.mean(r.fixed_s)),
             "efficiency": r.mean_efficiency(), "note": r.note}
            for r in rs
        ]

    cal = calibration_for(spec, engine)
    return {
        "ops": {"prefill": rows(pre.achievable), "decode": rows(dec.achievable)},
        "calibration": {**cal.describe(), "spec": spec.id, "fit": models.to_dict()},
    }


__all__ = [
    "ACHIEVABLE",
    "DATASHEET",
    "MEASURED_ROOF",
    "MODES",
    "ROOF",
    "Analysis",
    "OpRow",
    "PhasePrediction",
    "analyze",
    "default_engine",
    "layer_prediction",
    "phase_grid",
    "predict_phase",
    "predict_step_breakdown",
    "predict_step_s",
    "resolve_mode",
    "fastest_ceilings",
    "roof_bandwidth_source",
    "roof_ceilings",
]
