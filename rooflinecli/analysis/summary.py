"""``analyze``: one workload end to end (TTFT, TPOT, latency, throughput, cost, memory, the
crossovers), and ``phase_grid``: the same per-op code over a (batch, context) grid."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

from .memory import fit_warning, max_batch_that_fits, max_context_that_fits, memory_totals, weights_breakdown_per_gpu
from .ops import check_parallel, kv_heads_per_gpu, phase_ops
from .phase import TOTAL_FIELDS, OpTime, phase_times, sum_ops
from .workload import Workload, validate_workload

#: largest batch searched for the decode compute-bound point
MAX_BATCH_SEARCH = 1 << 16
#: the compute-bound batch search evaluates every batch up to this one, then every this-many-th
SEARCH_DENSE_BATCHES = 256
#: bisection steps of the KV crossover search evaluated in one vectorized pass (2**n - 1 points)
BISECTION_ROUND = 8


def phase_grid(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str, batch, context) -> dict[str, np.ndarray]:
    """Vectorized totals of one phase over broadcasting ``batch`` and ``context`` arrays (prefill:
    context = prompt length; decode: one step at cached context N).

    Keys: time_s (the workload's mode: roof or achievable), roof_time_s, flops, bytes, compute_time_s, memory_time_s, comm_time_s, overhead_s,
    weights_bytes, activation_bytes, kv_read_bytes, kv_write_bytes, comm_bytes, compute_bound,
    and memory at that context (prompt = context for the workspace): weights_bytes_per_gpu,
    kv_cache_bytes_per_gpu, activation_workspace_bytes_per_gpu, total_bytes_per_gpu, fits.
    """
    validate_workload(wl)
    batch = np.asarray(batch, dtype=float)
    context = np.asarray(context, dtype=float)
    shape = np.broadcast_shapes(batch.shape, context.shape)
    out = sum_ops(phase_times(cfg, roof_spec_of(spec, wl), wl, phase, batch, context), shape)
    out["roof_time_s"] = out["time_s"]
    if wl.mode == "achievable":
        from rooflinecli.achievable import phase_achievable

        total = np.zeros(shape)
        for r in phase_achievable(cfg, spec, wl, phase, batch, context, wl.engine):
            total += r.time_s
        out["time_s"] = total
    mem = memory_totals(cfg, spec, wl, context, context, batch)
    for k in ("weights_bytes_per_gpu", "kv_cache_bytes_per_gpu", "activation_workspace_bytes_per_gpu", "total_bytes_per_gpu", "fits"):
        out[k] = np.broadcast_to(mem[k], shape)
    return out


def roof_spec_of(spec: HardwareSpec, wl: Workload) -> HardwareSpec:
    """The ceilings of the roofline figures of a workload: the spec's own in roof mode; in
    achievable mode the fastest measured ones (``achievable.roof_spec``), the roof that no
    achievable time goes below."""
    if wl.mode != "achievable":
        return spec
    from rooflinecli.achievable import models_for, roof_spec

    return roof_spec(spec, models_for(spec))


def _scalar(x):
    a = np.asarray(x)
    if a.dtype == bool:
        return bool(a)
    if a.dtype.kind in "US":
        return str(a)
    return float(a)


@dataclass
class OpRow:
    """One op of a phase, totals over its layers, per GPU (decode: mean over the generation)."""

    name: str
    kind: str
    group: str
    layers: int
    flops: float
    bytes: float
    weights_bytes: float
    activation_bytes: float
    kv_read_bytes: float
    kv_write_bytes: float
    comm_bytes: float
    arithmetic_intensity_flop_per_byte: float | None
    compute_time_s: float
    memory_time_s: float
    comm_time_s: float
    overhead_s: float
    time_s: float
    bound: str
    note: str = ""

    @classmethod
    def from_timed(cls, t: OpTime, reduce=np.mean) -> "OpRow":
        vals = {k: float(reduce(np.asarray(getattr(t, k), dtype=float))) for k in TOTAL_FIELDS}
        ai = vals["flops"] / vals["bytes"] if vals["bytes"] > 0 else None
        if vals["comm_time_s"] > max(vals["compute_time_s"], vals["memory_time_s"]):
            bound = "comm"
        else:
            bound = "compute" if vals["compute_time_s"] >= vals["memory_time_s"] else "memory"
        return cls(
            name=t.op.name, kind=t.op.kind, group=t.op.group, layers=t.op.layers, arithmetic_intensity_flop_per_byte=ai, bound=bound, note=t.op.note, **vals
        )


@dataclass
class PhaseResult:
    phase: str
    batch: int
    context: str  # "S" for prefill, "S..S+G-1" for decode
    ops: list[OpRow]
    totals: dict[str, float]

    @property
    def time_s(self) -> float:
        return self.totals["time_s"]

    @property
    def bound(self) -> str:
        return "compute" if self.totals["compute_time_s"] >= self.totals["memory_time_s"] else "memory"

    def to_json(self) -> dict:
        t = self.totals
        return {
            "phase": self.phase,
            "batch": self.batch,
            "context": self.context,
            "time_s": t["time_s"],
            "flops": t["flops"],
            "bytes": t["bytes"],
            "bound": self.bound,
            "arithmetic_intensity_flop_per_byte": t["flops"] / t["bytes"] if t["bytes"] else None,
            "compute_time_s": t["compute_time_s"],
            "memory_time_s": t["memory_time_s"],
            "comm_time_s": t["comm_time_s"],
            "overhead_s": t["overhead_s"],
            "weights_bytes": t["weights_bytes"],
            "activation_bytes": t["activation_bytes"],
            "kv_read_bytes": t["kv_read_bytes"],
            "kv_write_bytes": t["kv_write_bytes"],
            "comm_bytes": t["comm_bytes"],
            "ops": [asdict(r) for r in self.ops],
        }


def _phase_result(phase: str, batch: int, context_label: str, timed: list[OpTime]) -> PhaseResult:
    rows = [OpRow.from_timed(t) for t in timed]
    totals = {k: sum(getattr(r, k) for r in rows) for k in TOTAL_FIELDS}
    return PhaseResult(phase, batch, context_label, rows, totals)


@dataclass
class Analysis:
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
    ridge_point_flop_per_byte: float
    kv_crossover_context: float | None
    cost_per_million_output_tokens_usd: float | None
    memory: dict
    warnings: list[str] = field(default_factory=list)
    #: "roof" or "achievable": which model ttft_s / tpot_s and the throughputs come from
    mode: str = "roof"
    engine: str | None = None
    roof_ttft_s: float = 0.0  # the roofline's figures on the same spec (= ttft_s in roof mode)
    roof_tpot_s: float = 0.0
    calibration: dict | None = None  # source of the calibration (achievable mode)
    #: achievable mode: per-op rows {"prefill": [...], "decode": [...]} (decode: mean over steps)
    achievable_ops: dict | None = None
    #: the ceilings of the roofline figures (``roof_spec_of``): ``spec`` in roof mode
    roof_spec: HardwareSpec | None = None

    @property
    def num_gpus(self) -> int:
        return self.workload.num_gpus

    def to_json(self) -> dict:
        wl = self.workload
        w = asdict(wl)
        w["efficiency"] = dict(wl.efficiency)
        w["num_gpus"] = wl.num_gpus
        w["kv_bytes_per_element"] = wl.kv_bytes_per_element
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


def decode_compute_bound_batches(
    cfg: ModelConfig, spec: HardwareSpec, wl: Workload, context: int, max_batch: int = MAX_BATCH_SEARCH
) -> tuple[int | None, int | None]:
    """(whole step, matmuls only): the smallest batch at which one decode step at ``context`` is
    compute-bound (summed compute time >= summed memory time), searched over 1..max_batch; None
    where no batch is. "Matmuls only" sums the gemm and moe ops (the weight streaming ones, which
    turn compute-bound near the ridge point; attention over the cache keeps a whole step
    memory-bound at long contexts).

    Two vectorized passes instead of all max_batch batches: every batch up to
    ``SEARCH_DENSE_BATCHES`` and every ``SEARCH_DENSE_BATCHES``-th one beyond, then every batch of
    the bracket where the step first turns compute-bound. Compute time grows linearly with the
    batch and memory time no faster (weights are read once; expert weights touched saturate), so
    once compute-bound a step stays so and the bracket holds the first such batch: the answer
    equals a scan of every batch (tests/test_analysis_search.py checks it against one)."""
    dense = min(SEARCH_DENSE_BATCHES, max_batch)
    coarse = np.concatenate([np.arange(1, dense + 1), np.arange(2 * dense, max_batch + 1, dense)]).astype(float)
    if coarse[-1] < max_batch:
        coarse = np.append(coarse, float(max_batch))
    out: list[int | None] = []
    brackets: list[tuple[float, float] | None] = []
    for flags in _decode_compute_bound_flags(cfg, spec, wl, context, coarse):
        idx = np.flatnonzero(flags)
        first = int(idx[0]) if idx.size else None
        if first is None or coarse[first] <= dense:  # none, or inside the dense prefix: exact
            out.append(None if first is None else int(coarse[first]))
            brackets.append(None)
        else:
            out.append(int(coarse[first]))
            brackets.append((coarse[first - 1] + 1.0, coarse[first]))
    if any(brackets):
        fine = np.concatenate([np.arange(b[0], b[1] + 1.0) for b in brackets if b])
        for j, flags in enumerate(_decode_compute_bound_flags(cfg, spec, wl, context, fine)):
            if brackets[j]:
                lo, hi = brackets[j]
                idx = np.flatnonzero(flags & (fine >= lo) & (fine <= hi))
                out[j] = int(fine[idx[0]]) if idx.size else out[j]
    return out[0], out[1]


def _decode_compute_bound_flags(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, context: int, batch: np.ndarray) -> list[np.ndarray]:
    """Compute-bound flags of one decode step at ``context`` over ``batch``: [whole step, gemm and moe ops only]."""
    timed = phase_times(cfg, spec, wl, "decode", batch, float(context))
    return [sum_ops(subset, batch.shape)["compute_bound"] for subset in (timed, [t for t in timed if t.op.kind in ("gemm", "moe")])]


def decode_compute_bound_batch(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, context: int, max_batch: int = MAX_BATCH_SEARCH) -> int | None:
    """Smallest batch at which a whole decode step at ``context`` is compute-bound (None: none)."""
    return decode_compute_bound_batches(cfg, spec, wl, context, max_batch)[0]


def kv_crossover_context(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, limit: float = 2.0**40) -> float | None:
    """Context N at which the KV bytes one decode step reads equal the weight bytes it reads (at
    the workload's batch), solved by bisection (windows and compression make KV reads nonlinear in
    N); None when KV reads never catch up (e.g. every layer windowed).

    The bisection runs BISECTION_ROUND steps at a time: every midpoint those steps could visit is
    evaluated in one vectorized pass, then the steps are replayed from the signs, so the result is
    the one a point-by-point bisection gives, in a few passes instead of ~30."""

    def diff(N):
        N = np.asarray(N, dtype=float)
        kv, weights = np.zeros(N.shape), np.zeros(N.shape)
        for op in phase_ops(cfg, spec, wl, "decode", float(wl.batch), N):  # the bytes alone: no times needed
            L = float(op.layers)
            kv += L * np.asarray(op.kv_read_bytes, dtype=float)
            weights += L * np.asarray(op.weights_bytes, dtype=float)
        return kv - weights

    grid = 2.0 ** np.arange(0, 41)
    d = diff(grid)
    if d[-1] < 0 or not np.isfinite(d).all():
        return None
    if d[0] >= 0:
        return 1.0
    i = int(np.flatnonzero(d >= 0)[0])
    lo, hi = grid[i - 1], grid[i]
    steps = 0
    while steps < 80:  # continuous bisection to relative precision
        depth = min(BISECTION_ROUND, 80 - steps)
        mids = _bisection_midpoints(lo, hi, depth)
        at_or_above = dict(zip(mids, diff(np.array(mids)) >= 0))
        for _ in range(depth):
            mid = 0.5 * (lo + hi)
            if at_or_above[mid]:
                hi = mid
            else:
                lo = mid
            steps += 1
            if hi - lo <= 1e-9 * hi:
                return float(0.5 * (lo + hi))
    return float(0.5 * (lo + hi))


def _bisection_midpoints(lo: float, hi: float, depth: int) -> list[float]:
    """Every midpoint ``depth`` bisection steps on [lo, hi] could visit, computed as they compute it."""
    if depth == 0:
        return []
    mid = 0.5 * (lo + hi)
    return [mid, *_bisection_midpoints(lo, mid, depth - 1), *_bisection_midpoints(mid, hi, depth - 1)]


def analyze(cfg: ModelConfig, spec: HardwareSpec, wl: Workload) -> Analysis:
    """The whole workload: prefill of B x S, then G decode steps at contexts S .. S+G-1."""
    validate_workload(wl)
    check_parallel(cfg, wl)
    B, S, G = wl.batch, wl.prompt_len, wl.gen_len
    warnings: list[str] = []
    if wl.use_fitted_efficiency and not spec.efficiency:
        warnings.append(
            f"--fitted-efficiency: {spec.id} has no fitted efficiency table, so efficiency stays 1.0 "
            "(measured specs carry one: `roofline calibrate --from-results`)"
        )

    rspec = roof_spec_of(spec, wl)
    prefill = _phase_result("prefill", B, str(S), phase_times(cfg, rspec, wl, "prefill", float(B), float(S)))
    steps = np.arange(S, S + G, dtype=float)
    timed = phase_times(cfg, rspec, wl, "decode", float(B), steps)
    decode = _phase_result("decode", B, f"{S}..{S + G - 1}", timed)
    step_times = sum_ops(timed, steps.shape)["time_s"]
    naive = None
    if cfg.mla is not None:
        other = "naive" if wl.mla_decode == "absorbed" else "absorbed"
        from dataclasses import replace

        naive = _phase_result("decode", B, f"{S}..{S + G - 1}", phase_times(cfg, rspec, replace(wl, mla_decode=other), "decode", float(B), steps))
        naive.phase = f"decode ({other} MLA)"

    roof_ttft, roof_tpot = prefill.time_s, float(np.mean(step_times))
    ach = None
    if wl.mode == "achievable":
        ach = _achievable(cfg, spec, wl, steps, warnings)
        step_times = ach["step_times_s"]
    ttft = ach["ttft_s"] if ach else roof_ttft
    tpot = float(np.mean(step_times))
    e2e = ttft + float(np.sum(step_times))
    n_gpus = wl.num_gpus
    cost = None
    if wl.price_per_gpu_hour is not None:
        cost = wl.price_per_gpu_hour * n_gpus / 3600.0 * e2e / (B * G) * 1e6

    mid = S + G // 2
    cb_step, cb_gemm = decode_compute_bound_batches(cfg, rspec, wl, mid)
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
        from rooflinecli.whatif.rope import context_warning

        msg = context_warning(cfg, S + G) or ""
        warnings.append(msg.removeprefix("warning: ") or f"context {S + G} exceeds {cfg.name}'s trained limit of {cfg.max_position_embeddings}; see `roofline rope`")
    if cfg.mla is None and wl.tp > cfg.num_kv_heads:
        warnings.append(f"--tp {wl.tp} > {cfg.num_kv_heads} KV heads: each GPU keeps {kv_heads_per_gpu(cfg, wl.tp):g} KV head (replicated), so KV bytes per GPU stop shrinking")
    if cfg.mla is not None and wl.tp > 1:
        warnings.append(f"--tp {wl.tp}: MLA's latent KV cache is replicated on every GPU")
    fit = fit_warning(cfg, spec, wl, S, S + G, float(B))
    if fit:
        warnings.append(fit)

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
        mode=wl.mode,
        engine=wl.engine if ach else None,
        roof_ttft_s=roof_ttft,
        roof_tpot_s=roof_tpot,
        calibration=ach["calibration"] if ach else None,
        achievable_ops=ach["ops"] if ach else None,
        roof_spec=rspec,
    )


#: MoE prefill warns (no grouped-GEMM calibration) from this many tokens per routed expert: decode
#: sizes (H200 run 2's bench, T <= 64: the fit within 15% of our fused kernel) stay quiet
MOE_WARN_TOKENS_PER_EXPERT = 128


def _achievable(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, steps: np.ndarray, warnings: list[str]) -> dict:
    """Achievable prefill time, decode step times and per-op rows (``rooflinecli.achievable``)."""
    from rooflinecli.achievable import calibration_for, models_for, phase_achievable
    from rooflinecli.achievable.profiles import get_engine

    if wl.efficiency or wl.use_fitted_efficiency or wl.launch_overhead_s:
        warnings.append("achievable mode: --efficiency, --fitted-efficiency and --launch-overhead-us apply to the roofline only (ignored)")
    B = float(wl.batch)
    pre = phase_achievable(cfg, spec, wl, "prefill", B, float(wl.prompt_len), wl.engine)
    dec = phase_achievable(cfg, spec, wl, "decode", B, steps, wl.engine)
    calls = sum(r.layers * r.kernels for r in dec if r.kind == "comm")
    if calls:
        warnings.append(
            f"achievable mode, {wl.num_gpus} GPUs: the {calls:g} collectives of a decode step are timed at the link's "
            "roofline plus the graph floor; their latency (NCCL's small-message all-reduce) was not calibrated "
            "(one GPU measured), so multi-GPU decode is optimistic by about that latency per collective"
        )

    if cfg.moe is not None and any(r.kind == "moe" for r in pre) and "moe.experts" not in {r.name for r in pre}:
        from rooflinecli.formulas import expected_experts_touched

        tokens = B * wl.prompt_len
        per_expert = tokens * cfg.moe.top_k / float(expected_experts_touched(cfg.moe.num_routed_experts, cfg.moe.top_k, tokens, wl.expert_skew))
        torch_engine = get_engine(wl.engine).moe_experts == "torch"
        if per_expert >= MOE_WARN_TOKENS_PER_EXPERT or torch_engine:
            warnings.append(
                "achievable mode: the routed experts are timed by the dense-GEMM fit on their FLOPs and bytes"
                + (" (this calibration has no moe_grouped fit for the torch engine's torch._grouped_mm: it takes 4 rows)" if torch_engine else "")
                + ". On H200 run 2's bench that fit came within 15% of our fused Triton MoE kernel at 1-64 tokens"
                + (", and torch's grouped path took 1.5-2.8x our kernel's time" if torch_engine else "")
                + (f"; at prefill sizes ({per_expert:,.0f} tokens per expert here) grouped kernels ran below dense efficiency "
                   "(4,096 tokens: Qwen3's 128 x 768 experts 2.5x the prediction with torch._grouped_mm, 4.9x with ours; "
                   "Mixtral's 8 x 14,336 1.2-1.3x): MoE prefill is optimistic" if per_expert >= MOE_WARN_TOKENS_PER_EXPERT else "")
            )

    def rows(rs):
        return [
            {"name": r.name, "kind": r.kind, "layers": r.layers, "kernels_per_layer": r.kernels,
             "roof_time_s": float(np.mean(r.roof_s)), "time_s": float(np.mean(r.time_s)), "fixed_s": float(np.mean(r.fixed_s)),
             "efficiency": r.mean_efficiency(), "note": r.note}
            for r in rs
        ]

    cal = calibration_for(spec)
    return {
        "ttft_s": float(sum(np.sum(r.time_s) for r in pre)),
        "step_times_s": sum((np.broadcast_to(r.time_s, steps.shape) for r in dec), np.zeros(steps.shape)),
        "ops": {"prefill": rows(pre), "decode": rows(dec)},
        "calibration": {**cal.describe(), "spec": spec.id, "fit": models_for(spec).to_dict()},
    }


def layer_prediction(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str) -> list[dict]:
    """Per-layer op rows of one phase at the workload's batch (prefill: S tokens; decode: one step
    at context S), for checking the model against kernels timed one layer at a time. Each row holds
    name, kind, group, layers and per-layer flops, bytes (split), compute/memory/comm time, time_s
    and bound."""
    validate_workload(wl)
    rows = []
    for t in phase_times(cfg, spec, wl, phase, float(wl.batch), float(wl.prompt_len)):
        r = asdict(OpRow.from_timed(t))
        L = max(t.op.layers, 1)
        for k in TOTAL_FIELDS:
            r[k] = r[k] / L
        r["per_layer"] = True
        rows.append(r)
    return rows
