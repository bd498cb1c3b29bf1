"""The achievable time of one phase: the analytical model's ops (``analysis.phase_ops``) turned
into the kernels an engine launches (``profiles``), each timed by the fitted vendor-kernel models
(``fit``), with the roof time of the same ops beside it.

Per row: ``time_s`` (achievable, summed over the row's layers), ``fixed_s`` (its per-kernel fixed
costs), ``roof_s`` (the roofline time of the analysis ops it covers; 0 for kernels the roofline
model fuses away: RoPE, residual adds, the KV write), ``kernels`` per layer, and
``efficiency`` = roof / (achievable - fixed), at most 1: the roof is on the fastest ceilings measured
(``ceilings.measured_roof_spec``) and no row's work is faster than it. Arrays broadcast over (batch, context).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rooflinecli.analysis.ops import kv_heads_per_gpu, phase_ops, prefill_pairs
from rooflinecli.analysis.phase import time_ops
from rooflinecli.analysis.workload import Workload
from rooflinecli.ceilings import measured_roof_spec
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

from . import mla
from .fit import FittedModels
from .profiles import EngineProfile
from .tables import WEIGHT_ONLY_BYTES, carried, weight_bytes_of

#: what a communication row of the achievable model is (and is not)
#: the analysis ops a torch engine's MoE layer covers in one calibrated call (``moe_experts_torch``)
MOE_EXPERT_OPS = ("moe.expert_gate", "moe.expert_up", "moe.expert_down", "moe.expert_act")
#: its kernels (``kernels.moe_torch``: GROUPED_KERNELS + ROUTE_KERNELS, restated here: the analysis
#: core does not import the measuring code; tests/model/test_achievable.py checks they agree)
MOE_TORCH_KERNELS = 21
COMM_NOTE = "at the link roofline: collective latency not calibrated (one GPU measured)"
#: analysis linear ops fused into one GEMM by ``fuse_qkv`` / ``fuse_gate_up``
FUSED_GEMMS = {"attn.qkv": ("attn.q", "attn.k", "attn.v"), "mlp.gate_up": ("mlp.gate", "mlp.up")}


@dataclass
class StepRow:
    name: str
    kind: str  # gemm | attention | elementwise | moe | comm
    layers: int
    kernels: int  # per layer
    time_s: np.ndarray  # achievable, all layers
    fixed_s: np.ndarray  # fixed costs inside time_s, all layers
    roof_s: np.ndarray  # roofline time of the analysis ops this row covers, all layers
    note: str = ""
    host_s: float = 0.0  # host seconds of one layer's eager calls of this row (eager phases)

    @property
    def efficiency(self):
        """roof / (achievable - fixed): the fraction of the roof's rate the work runs at."""
        work = np.asarray(self.time_s) - np.asarray(self.fixed_s)
        return np.where(work > 0, np.asarray(self.roof_s) / np.where(work > 0, work, 1.0), np.nan)

    def mean_efficiency(self) -> float | None:
        """The efficiency averaged over the grid; None where the row has no work beyond its fixed costs."""
        e = np.asarray(self.efficiency, dtype=float)
        return float(np.nanmean(e)) if np.isfinite(e).any() else None


#: a block-fp8 GEMM table is read only when its smallest call is under this many times the plain
#: fp8 table's (``_Builder.gemm_table``): the shipped SGLang and TensorRT-LLM ones are 0.34-0.92x
BLOCK_FP8_FLOOR_RATIO = 2.0


def gemm_dtype_speedup(spec: HardwareSpec, compute_dtype: str) -> float:
    """How much faster than bf16 a GEMM's compute runs in ``compute_dtype`` (fp8, int8: > 1; bf16,
    fp16: 1), for the bf16-fitted vendor-kernel models: the spec's peak for the dtype over its bf16
    peak measured the same way. A measured spec keeps the burst figures (20 single launches) in
    ``measured_with``; where it has both, the ratio compares burst with burst (``h200-measured``:
    1,449 / 781.9 = 1.85; on H200 fp8 ``_scaled_mm`` at 8192^3 runs 1.91x bf16 cuBLAS); an older
    file with a burst fp8 peak beside a sustained bf16 one compares the fp8 peak with the bf16
    burst. A peak the spec does not measure takes its peer's ratio (the measured
    dtype of the same datasheet peak: int8 -> fp8 on Hopper), else the datasheet's own. Never below 1
    (fp32 and tf32 GEMMs are not modelled slower here)."""
    if compute_dtype in ("bf16", "fp16"):
        return 1.0
    if spec.base and f"peak_dense_tflops.{compute_dtype}" not in spec.measured_keys:
        from rooflinecli.ceilings import measured_peer
        from rooflinecli.hardware import get_spec

        found = measured_peer(spec, compute_dtype)
        if found is not None:
            return gemm_dtype_speedup(spec, found[0])
        try:
            return gemm_dtype_speedup(get_spec(spec.base), compute_dtype)
        except RooflineError:
            return 1.0
    try:
        peak = spec.peak_flops_per_s(compute_dtype)
        bf16 = spec.peak_flops_per_s("bf16")
    except RooflineError:
        return 1.0

    def burst(dt: str) -> float | None:
        try:
            v = float(spec.measured_with.get(f"burst peak_dense_tflops.{dt}", "nan")) * 1e12
        except ValueError:
            return None
        return v if v > 0 else None

    b_dt, b_bf16 = burst(compute_dtype), burst("bf16")
    if b_dt is not None and b_bf16 is not None:
        return max(1.0, b_dt / b_bf16)
    if b_bf16 is not None:
        bf16 = max(bf16, b_bf16)
    return max(1.0, peak / bf16)


class _Builder:
    def __init__(self, cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str, batch, context, models: FittedModels, profile: EngineProfile):
        self.cfg, self.wl, self.phase, self.m, self.p = cfg, wl, phase, models, profile
        self.batch = np.asarray(batch, dtype=float)
        self.context = np.asarray(context, dtype=float)
        self.seqs = wl.seqs_per_gpu(self.batch)
        q = wl.decode_tokens if phase == "decode" else 1  # a verification pass: q tokens per sequence
        self.tokens = self.seqs * self.context if phase == "prefill" else self.seqs * q
        self.last = self.seqs * q  # tokens through the final norm and the LM head
        self.b = wl.act_bytes_per_element
        self.graph = profile.prefill_graph if phase == "prefill" else profile.decode_graph
        self.rows: list[StepRow] = []
        ops = phase_ops(cfg, spec, wl, phase, self.batch, self.context)
        self.ops = {o.name: o for o in ops}
        self.order = [o.name for o in ops]
        pure = Workload(**{**wl.__dict__, "efficiency": {}, "launch_overhead_s": 0.0})
        # the measured roof (the fastest HBM stream measured): no achievable row goes below it
        self._roof_times = lambda some: time_ops(measured_roof_spec(spec, models.streams), pure, wl.compute_dtype, some)
        self.roof = {t.op.name: t.time_s for t in self._roof_times(ops)}
        # a step whose weights outgrow the L2 streams every layer's weights and KV from HBM: a
        # table measured with its few operands cache-resident (L40S GEMMs and decode attention
        # beat the HBM roof in the data) is held at that roof here
        self.streams_hbm = float(sum(float(np.max(o.weights_bytes)) * o.layers for o in ops)) > spec.l2_size_mb * 1e6
        # calibrated (the dtype's GEMM rows against the bf16 fit), else the spec's peak ratio
        self.gemm_speedup = models.gemm_speedup.get(wl.compute_dtype) or gemm_dtype_speedup(spec, wl.compute_dtype)
        self.gemm_speedup_source = "calibrated" if wl.compute_dtype in models.gemm_speedup else "peak ratio"

    def roof_s(self, names) -> np.ndarray:
        """The measured roof of the ops ``names`` together (summed over their layers)."""
        return sum((self.roof[n] for n in names if n in self.roof), np.zeros(()))

    # ---- per-kernel models ----------------------------------------------------------------------
    def copy_like(self, nbytes, kernels: int):
        """``kernels`` single-pass elementwise kernels moving ``nbytes`` together (copy model)."""
        lm = self.m.linear["copy"]
        t, t0 = lm.time_s([1.0, nbytes])
        return t + (kernels - 1) * t0, kernels * t0

    def table_dtype(self, have) -> str:
        """The measured table's dtype for this model's GEMMs and experts: fp8 compute on a checkpoint
        quantized in blocks (``weight_block_size``, e.g. 128 x 128 with per-block scales) is the
        engine's block-scaled fp8 kernel (``fp8_block``) where ``have`` (the table's dtypes) has it;
        per-tensor / per-channel fp8 the plain ``fp8`` kernel; else the compute dtype."""
        dt = self.wl.compute_dtype
        q = getattr(self.cfg, "quantization", None)
        if dt == "fp8" and q is not None and q.weight_dtype == "fp8" and q.group_in and q.group_out and "fp8_block" in have:
            return "fp8_block"
        return dt

    def gemm_table(self):
        """The GEMM table of ``table_dtype``. A block-fp8 table whose smallest call takes over
        ``BLOCK_FP8_FLOOR_RATIO`` times the plain fp8 table's is not the kernel's time: vLLM's
        DeepGEMM rows take 84-101 us on H100/H200 and 177-184 us on B200 at every M from 32 to
        4,096 (smallest call 17-70x the fp8 table's), where SGLang's DeepGEMM takes 9 us at M = 32;
        the fp8 table answers for them."""
        tm = self.m.tables.gemm
        dt = self.table_dtype(tm)
        if dt == "fp8_block" and "fp8" in tm and tm["fp8_block"].floor_s > BLOCK_FP8_FLOOR_RATIO * tm["fp8"].floor_s:
            dt = "fp8"
        return tm.get(dt) or tm["bf16"]

    def unconverted_share(self, parts: tuple[str, ...]) -> float:
        """Share of the weights of the linear ops ``parts`` that the checkpoint stores 16-bit: modules
        its ``quantization_config`` leaves out (an LM head the format does not convert, ignore
        lists, layer by layer). Without a quantization_config, or with ``--weight-dtype`` replacing
        it, the LM head alone, as the roof stores it (``analysis.ops``: 16-bit whatever the weight
        dtype). Those GEMMs run in bf16 whatever the compute dtype of the rest."""
        from rooflinecli import params as P

        cfg = self.cfg
        if cfg.quantization is None or self.wl.weight_dtype_overrides:
            return float(np.mean([1.0 if n == "lm_head" else 0.0 for n in parts])) if parts else 0.0
        lins = {"lm_head": P.lm_head_linear(cfg)}
        for prefix, group in (("attn", P.attention_linears(cfg)), ("mlp", P.dense_mlp_linears(cfg)), ("moe", P.shared_expert_linears(cfg))):
            lins.update({f"{prefix}.{lin.name}": lin for lin in group})
        shares = [1.0 if lins.get(n) is None and n == "lm_head" else 0.0 if lins.get(n) is None else 1.0 - P.converted_fraction(cfg, lins[n])
                  for n in parts]
        return float(np.mean(shares)) if shares else 0.0

    def weight_only_table(self, weight_bytes: float | None):
        """The measured weight-only GEMM table (``tables.WEIGHT_ONLY_BYTES``: int8 or int4 weights,
        16-bit activations) of weights stored at ``weight_bytes`` per weight under a 16-bit compute
        dtype: the one whose weights are nearest in bytes, if it is within a third of them; else
        None (the compute dtype's table, carried to the bytes)."""
        tm = self.m.tables
        if tm is None or weight_bytes is None or self.wl.compute_dtype not in ("bf16", "fp16"):
            return None
        have = [dt for dt in WEIGHT_ONLY_BYTES if dt in tm.gemm]
        if not have:
            return None
        dt = min(have, key=lambda d: abs(np.log(WEIGHT_ONLY_BYTES[d] / weight_bytes)))
        return tm.gemm[dt] if abs(WEIGHT_ONLY_BYTES[dt] / weight_bytes - 1.0) <= 1 / 3 else None

    def gemm(self, M, N, K, nbytes, bf16: bool = False, weight_bytes: float | None = None):
        """Seconds (and fixed seconds) of one GEMM in the compute dtype (``bf16``: a 16-bit weight's
        bf16 GEMM); ``weight_bytes``: bytes per weight as stored (int8 / int4 weights read the
        engine's measured weight-only table where it has one, ``weight_only_table``; narrower
        weights than the table's kernel read are carried to their bytes: ``GemmTable.time_s``)."""
        tm = self.m.tables
        if tm is not None and bf16:
            t = (tm.gemm.get("bf16") or self.gemm_table()).time_s(M, N, K)
            return t, np.minimum(t, self.m.graph_floor_s)
        if tm is not None:  # the engine's measured GEMM table of the compute dtype (fp8: quantization included)
            g = self.weight_only_table(weight_bytes) or self.gemm_table()
            t = g.time_s(M, N, K, weight_bytes)
            if g.dtype == "bf16" and self.wl.compute_dtype != "bf16" and self.gemm_speedup != 1.0:
                t = t / self.gemm_speedup
            return t, np.minimum(t, self.m.graph_floor_s)
        # the vendor-kernel fits are of bf16 GEMMs: another compute dtype runs their compute term
        # ``gemm_speedup`` times faster (bf16-equivalent FLOPs), the bytes as they are
        flops = 2.0 * M * N * K / (1.0 if bf16 else self.gemm_speedup)
        t, t0 = self.m.gemm.time_s(M, N, K, flops, nbytes)
        if self.m.sustained_gemm_flops_per_s:
            t = np.maximum(t, t0 + flops / self.m.sustained_gemm_flops_per_s)
        return t, t0

    def add(self, name, kind, layers, kernels, t, fixed, roof_names=(), note="", timed_as_a_whole=False, host=(None, 0), switches=None, clamp=True):
        """One row of GPU time. In a graph each kernel costs at least the graph floor
        (``timed_as_a_whole``: ``t`` is a calibrated time of all the row's kernels together, which
        holds their floors already), plus the graph's switch cost (``graph_switch_s``; GEMM rows
        ``graph_switch_gemm_s``) for each of the row's ``switches`` per layer: the kernels that follow
        a different kernel in the step but followed the same kernel in their calibration (default:
        every kernel, each timed as one op repeated; see ``_switch_cost``). Eager launches are
        accounted for by ``host_wait``, from ``host`` = (calibrated op, calls per layer): the host's
        cost of those torch calls. No row's work runs faster than the roof of the ops it covers:
        time >= fixed + roof (``clamp``; ``measured_roof_spec``'s ceilings), so its efficiency is at most
        1. A fit read far from its calibrated shapes, or a bytes-only model on an op that is
        compute-bound (MLA's absorbed decode at large batch), would otherwise put it under the
        roof; a row whose roof covers more than its own kernels (the
        main norms of a model with extra norms) shares it with them (``_split_roof``). A measured
        table's GEMM or attention row (``clamp`` False: its own time holds its floors) is held at
        the roof alone where the step streams from HBM (``streams_hbm``)."""
        roof = self.roof_s(roof_names)
        if self.graph:
            t = np.maximum(np.asarray(t, dtype=float), (1 if timed_as_a_whole else kernels) * self.m.graph_floor_s)
            extra = self._switch_cost(kind, kernels if switches is None else switches)
            t, fixed = t + extra, np.asarray(fixed, dtype=float) + extra
        if clamp:
            t = np.maximum(np.asarray(t, dtype=float), np.asarray(fixed, dtype=float) + roof / layers)
        elif kind in ("gemm", "attention") and self.streams_hbm:
            t = np.maximum(np.asarray(t, dtype=float), roof / layers)
        host_s = self.m.host_call_s(host[0], host[1], kernels)
        self.rows.append(StepRow(name, kind, layers, kernels, layers * t, layers * np.asarray(fixed, dtype=float) + 0 * t, roof, note, host_s))

    def _switch_cost(self, kind: str, switches: float) -> float:
        """Seconds of ``switches`` kernel switches in a graph. Every op row of the calibration times
        one op repeated, so its time holds the repeat floor of its kernels but no switch into
        them; the mixed-kernel rows give what a switch adds beyond that floor (``fit.graph_switch_costs_s``:
        interleaved minus grouped time of the same kernels). An op whose calibrated call ends on
        a different kernel than it starts with (RoPE: neg ... add; silu then mul) switched at every
        kernel in its calibration already: 0 switches; a call of one kernel, or of the same kernel
        twice (the KV write's two copies): 1 switch per call that its calibration lacked."""
        per = self.m.graph_switch_gemm_s if kind == "gemm" else self.m.graph_switch_s
        return switches * per

    # ---- ops ------------------------------------------------------------------------------------
    def linear(self, name: str, parts: tuple[str, ...]):
        ops = [self.ops[n] for n in parts]
        d_in, _, count = ops[0].extra["linear"]
        # a GEMM has at least one output column (Qwen2-MoE's d -> 1 shared-expert gate split over
        # TP 2 came out N = 0.5, and log(N) warned)
        N = max(1.0, sum(o.extra["linear"][1] for o in ops))
        nbytes = sum(o.bytes for o in ops)
        M = self.last if name == "lm_head" else self.tokens
        weight_bytes = sum(o.weights_bytes for o in ops) / (d_in * N * count)  # per weight as stored, scales included
        t, t0 = self.gemm(M, N, d_in, nbytes / count, weight_bytes=weight_bytes)
        note = f"{int(d_in)}->{int(N)}" + (f" x{count}" if count > 1 else "")
        less, why = self.static_fp8_saving(name, M, d_in)
        if less is not None:  # kept above the graph floor (a kernel costs at least that much) and the op's roof
            roof = self.roof_s(parts) / (ops[0].layers * count)
            t = np.maximum(t - less, np.minimum(t, np.maximum(self.m.graph_floor_s, roof)))
            t0 = np.minimum(t0, t)
            note += why
        s16 = self.unconverted_share(parts) if self.wl.compute_dtype not in ("bf16", "fp16") else 0.0
        if s16 > 0:  # stored 16-bit (left out of the quantization): a bf16 GEMM
            t16, t016 = self.gemm(M, N, d_in, nbytes / count, bf16=True)
            t, t0 = (1.0 - s16) * t + s16 * t16, (1.0 - s16) * t0 + s16 * t016
            note += "; stored 16-bit (left out of the quantization): bf16 GEMM" if s16 == 1.0 else f"; {s16:.0%} stored 16-bit (left out of the quantization): bf16 GEMM"
        if self.m.tables is not None:
            g = self.weight_only_table(weight_bytes) or self.gemm_table()
            if s16 < 1.0:
                note += f"; {g.dtype} GEMM table ({g.kernel})"
                if weight_bytes < 0.9 * weight_bytes_of(g.dtype):
                    note += f", carried to {weight_bytes:.3g}-byte weights (weight-only quantized: no measured table)"
            self.add(name, "gemm", ops[0].layers, count, count * t, count * t0, parts, note, host=("gemm", count), clamp=False, timed_as_a_whole=True)
            return
        if self.graph and self.m.gemm_stream[0].size:  # weights streamed once per step, as gemm_stream times them
            r = self.m.gemm_stream_ratio(M)
            t, t0 = t * r, np.minimum(t0, t * r)
            note += f"; x{float(np.mean(r)):.3f} streamed (gemm_stream)"
        if self.gemm_speedup != 1.0:
            note += f"; {self.wl.compute_dtype} compute {self.gemm_speedup:.2f}x the bf16 fit ({self.gemm_speedup_source})"
        self.add(name, "gemm", ops[0].layers, count, count * t, count * t0, parts, note, host=("gemm", count))

    def static_fp8_saving(self, name: str, M, K):
        """(seconds less per call, note) for a per-tensor fp8 GEMM of the engine's measured table
        when the engine runs it with a static activation scale (``fp8_static_scale``) but the rows
        were timed with dynamic scaling: what dynamic scaling adds (the ``fp8_scale`` table) comes
        off, and the quantize kernel too (``fp8_quantize``) for a GEMM fed an fp8 tensor
        (``fp8_fed_gemms``, or the GEMMs after a fused all-reduce + RMSNorm + quantize); (None, "")
        where none of this applies."""
        tm = self.m.tables
        # a block-quantized checkpoint scales per token group at run time whatever table answers for it
        if (not self.p.fp8_static_scale or tm is None or name == "lm_head" or tm.fp8_quant is None or self.table_dtype(tm.gemm) != "fp8"
                or self.gemm_table().dtype != "fp8"):
            return None, ""
        q = tm.fp8_quant
        fed = name in self.p.fp8_fed_gemms or (name in ("attn.qkv", "mlp.gate_up") and self.allreduce_norm_fused())
        less = q.scale.time_s(M, K) + (q.quantize.time_s(M, K) if fed else 0.0)
        what = "dynamic scaling and the quantize kernel (its input arrives in fp8)" if fed else "dynamic scaling"
        return less, f"; static activation scale: {float(np.mean(less)) * 1e6:.1f} us of {what} off the table's time"

    def allreduce_norm_fused(self) -> bool:
        """Whether the engine fuses each TP all-reduce with the residual add and the next RMSNorm
        (``allreduce_norm_fusion``) for this model: its model type, a hidden size above the
        engine's threshold, tensor parallelism without attention DP, a dense model, and the
        all-reduces timed from the engine's measured table."""
        p, cfg, wl, tm = self.p, self.cfg, self.wl, self.m.tables
        return (cfg.model_type in p.allreduce_norm_fusion and cfg.hidden_size > p.allreduce_norm_fusion_above and wl.tp > 1
                and wl.attention_dp == 1 and cfg.moe is None and tm is not None and tm.comm is not None
                and any(n.startswith("comm.tp_allreduce") for n in self.ops))

    def _split_roof(self, rows: list[StepRow], weights: list[float]) -> None:
        """Share the first row's roof (it covers all of ``rows``' ops) among ``rows`` by ``weights``
        (their bytes), and clamp each to its share: time >= fixed + roof, row by row. Giving the
        whole roof to the first row printed an efficiency of 1.48 for Qwen3's main norms."""
        roof, total = np.asarray(rows[0].roof_s, dtype=float), float(sum(weights))
        for r, w in zip(rows, weights):
            r.roof_s = roof * (w / total)
            r.time_s = np.maximum(np.asarray(r.time_s, dtype=float), np.asarray(r.fixed_s, dtype=float) + r.roof_s)

    def norms(self, name: str, count: int, width: float, layers: int, roof_names=(), with_add: bool = False, clamp: bool = True):
        """``count`` RMSNorms of ``width`` per layer (fused engines fold the residual add in)."""
        n = self.tokens if name != "final_norm" else self.last
        switches = None
        if self.p.norm == "torch" and "rmsnorm" in self.m.linear:  # F.rms_norm timed alone
            t, f = self.m.linear["rmsnorm"].time_s([1.0, 2.0 * n * width * self.b + 2.0 * width], (int(width),))
            t, f = count * t, count * f
        elif self.p.norm == "torch":  # older calibrations: F.rms_norm + copy_, less the copy
            rc, cp = self.m.linear["rmsnorm_copy"], self.m.linear["copy"]
            t_rc, f_rc = rc.time_s([1.0, 4.0 * n * width * self.b], (int(width),))
            t_cp, f_cp = cp.time_s([1.0, 2.0 * n * width * self.b])
            t, f = count * (t_rc - t_cp), count * (f_rc - f_cp)
            switches = 0  # rmsnorm_copy alternated norm and copy: the difference holds the switches
        else:
            t, f = self.copy_like(count * (4.0 if with_add else 2.0) * n * width * self.b, count)
        self.add(name, "elementwise", layers, count * self.p.norm_kernels, t, f, roof_names, timed_as_a_whole=self.p.norm == "torch",
                 host=("rmsnorm" if self.p.norm == "torch" else None, count), switches=switches, clamp=clamp)

    def attention_table(self, name: str) -> bool:
        """The engine's measured attention call (context: B sequences of S tokens; generation: B
        sequences at N cached tokens) from its tables; False when the calibration has no table for it."""
        tm = self.m.tables
        at = None if tm is None else (tm.context if self.phase == "prefill" else tm.generation)
        if at is None:
            return False
        op, cfg, wl = self.ops[name], self.cfg, self.wl
        h = cfg.num_heads / wl.tp
        if cfg.mla is not None and self.phase == "prefill":  # engines prefill MLA as multi-head attention over up-projected keys
            hkv, D = h, cfg.mla.qk_nope_head_dim + cfg.mla.qk_rope_head_dim
        elif cfg.mla is not None:  # absorbed decode: the latent cache read by every head, one KV head of the latent width
            hkv, D = 1, cfg.mla.kv_lora_rank + cfg.mla.qk_rope_head_dim
        else:
            hkv, D = kv_heads_per_gpu(cfg, wl.tp), cfg.head_dim
        kv = "fp8" if wl.kv_bytes_per_element <= 1 else "bf16"
        length, scale, extra = self.context, 1.0, ""
        if name.endswith(".window") and cfg.sliding_window:  # a sliding-window layer attends over at most W keys
            W = float(cfg.sliding_window)
            if self.phase == "decode":
                length = np.minimum(self.context, W)
            else:  # the full causal call's time, scaled by the share of query-key pairs within the window
                full = np.asarray(prefill_pairs(cfg, "full", self.context), dtype=float)
                scale = np.minimum(1.0, np.asarray(prefill_pairs(cfg, "window", self.context), dtype=float) / np.maximum(full, 1.0))
            extra = f"; window {cfg.sliding_window}"
        t, key = at.time_s(self.seqs, length, max(h, 1.0), max(hkv, 1.0), D, kv)
        t = t * scale
        shape = f"H{key[0]}/KVH{key[1]} D{key[2]} {key[3]}"
        exact = (key[0], key[1], key[2]) == (int(h), int(hkv), int(D))
        includes = " (includes " + " and ".join(self.p.attention_includes) + ")" if self.p.attention_includes else ""
        note = (f"{at.phase} attention table, {at.kernel}{includes}; " + ("measured heads" if exact else f"nearest measured heads {shape}, scaled")
                + ("" if cfg.mla is None else "; MLA as multi-head attention" if self.phase == "prefill" else "; MLA as one latent KV head") + extra)
        self.add(name, "attention", op.layers, 1, t, np.minimum(t, self.m.graph_floor_s), (name,), (op.note + "; " if op.note else "") + note,
                 timed_as_a_whole=True, clamp=False)
        return True

    def comm_table(self, name: str) -> bool:
        """A collective from the measured tables: latency + bandwidth per GPU count and message size."""
        tm = self.m.tables
        if tm is None or tm.comm is None:
            return False
        op = self.ops[name]
        if name.startswith("comm.tp_allreduce"):
            p, what, calls = self.wl.tp, "all_reduce", 1
        elif name == "comm.ep_all_to_all":
            p, what, calls = self.wl.ep, "alltoall", 2
        else:
            return False
        msg = np.asarray(op.comm_bytes, dtype=float) / (2.0 * (p - 1) / p) / calls
        t, src = tm.comm.time_s(what, int(p), msg)
        if t is None:
            return False
        self.add(name, "comm", op.layers, op.kernels, calls * t, 0.0 * t, (name,), (op.note + "; " if op.note else "") + f"measured {what.replace('_', '-')} table ({src})",
                 timed_as_a_whole=True, clamp=False)
        return True

    def moe_table(self, names: tuple[str, ...]) -> bool:
        """The routed experts of a MoE layer from the engine's measured MoE table (the model's own
        shape, dtype and split over GPUs, measured under power-law routing); False when the table
        lacks that shape."""
        tm = self.m.tables
        if tm is None or tm.moe is None:
            return False
        m, cfg, wl = self.cfg.moe, self.cfg, self.wl
        tp, ep = (wl.tp, 1) if wl.ep == 1 else (max(1, wl.tp // wl.ep), wl.ep)
        args = (cfg.hidden_size, m.expert_intermediate_size, m.top_k, m.num_routed_experts, tp, ep)
        dt = self.table_dtype({k[0] for k in tm.moe.curves})
        t = tm.moe.time_s(dt, self.tokens, *args)
        if t is None and dt == "fp8_block":
            dt = wl.compute_dtype
            t = tm.moe.time_s(dt, self.tokens, *args)
        if t is None and dt != "bf16":
            dt = "bf16"
            t = tm.moe.time_s(dt, self.tokens, *args)
        if t is None:
            return False
        slow = ""
        if dt == "fp8" and (blk := tm.moe.time_s("fp8_block", 1.0, *args)) is not None and tm.moe.time_s("fp8", 1.0, *args) > BLOCK_FP8_FLOOR_RATIO * blk:
            # vLLM's per-tensor fp8 experts (ModelOpt, FlashInfer CUTLASS) take 2.6-3.4x its bf16 rows
            # on H100 / H200 at one token: the engine's block-fp8 experts (Triton) answer, as a
            # block-fp8 GEMM table that slow gives way to the fp8 one
            dt, t = "fp8_block", tm.moe.time_s("fp8_block", self.tokens, *args)
            slow = f"; its fp8 rows exceed {BLOCK_FP8_FLOOR_RATIO:g}x these at one token"
        kernel = tm.moe.kernel(dt, *args) or tm.moe.kernels.get("bf16", "")
        ops = [self.ops[n] for n in names]
        t, carry = self._moe_weight_carried(t, dt, ops)
        self.add("moe.experts", "moe", ops[0].layers, 1, t, np.minimum(t, self.m.graph_floor_s), names,
                 f"routed experts as measured ({dt} table, {kernel}; d {args[0]}, I {args[1]}, top-{args[2]} of {args[3]}, tp {tp} ep {ep})" + slow + carry,
                 timed_as_a_whole=True, clamp=False)
        return True

    def _moe_weight_carried(self, t, dt: str, ops):
        """(seconds, note) of a MoE table's time carried to the experts' stored weight bytes where
        they are under nine tenths of the bytes the table's kernel read (int4 experts under a bf16
        table: a weight-only quantized MoE, which no table measured), as ``GemmTable.time_s``
        carries a GEMM: between the experts' roof at the table's weight width and at their own."""
        from rooflinecli import params as P
        from rooflinecli.analysis.ops import linear_params_per_gpu, linear_weight_bytes

        lin = P.routed_expert_linears(self.cfg)[0]
        stored = float(linear_weight_bytes(self.cfg, self.wl, lin, 1)) / max(1.0, float(linear_params_per_gpu(self.cfg, lin, 1)))
        table = weight_bytes_of(dt)
        if stored >= 0.9 * table:
            return t, ""
        wide = [replace(o, weights_bytes=np.asarray(o.weights_bytes, dtype=float) * (table / stored)) for o in ops]
        at_table = sum(x.time_s for x in self._roof_times(wide)) / ops[0].layers
        own = self.roof_s([o.name for o in ops]) / ops[0].layers
        return carried(np.asarray(t, dtype=float), at_table, own), f"; carried to {stored:.3g}-byte expert weights (weight-only quantized: no measured table)"

    def attention_core(self, name: str):
        if mla.attention(self, name) or self.attention_table(name):
            return
        op = self.ops[name]
        cfg, wl = self.cfg, self.wl
        h = cfg.num_heads / wl.tp
        if self.phase == "prefill":
            D = (cfg.mla.qk_nope_head_dim + cfg.mla.qk_rope_head_dim) if cfg.mla is not None else cfg.head_dim
            n = self.p.prefill_layout_copies
            if n:  # q to [B, H, S, D] and the output back to [S, H*D]: read + write of each
                t, f = self.copy_like(n * 2.0 * self.tokens * h * D * self.b, n)
                self.add("attn.layout", "elementwise", op.layers, n, t, f, (), "q and the attention output between token-major and head-major layouts",
                         host=("copy", n))
            model, whole = "sdpa_prefill_causal", False
            t, t0 = self.m.linear[model].time_s([1.0, op.flops, self.seqs * h * self.context * D])
            note = "SDPA causal prefill"
        elif cfg.mla is not None and wl.mla_decode == "absorbed" and "mla_decode_matmul" in self.m.linear:
            model, whole = "mla_decode_matmul", True  # its calibrated time holds its few kernels' floors
            t, t0 = self.m.linear[model].time_s([1.0, op.bytes, op.flops])
            note = "as torch ops (bmm, fp32 softmax, bmm), calibrated"
        else:
            model, whole = "sdpa_decode", False
            key = (int(h), int(kv_heads_per_gpu(cfg, wl.tp)), int(cfg.head_dim)) if cfg.mla is None else None
            t, t0 = self.m.linear[model].time_s([1.0, op.bytes], key, batch=self.seqs)
            note = ("no MLA kernel calibrated: SDPA decode's fit on its bytes, held at least at its roof" if cfg.mla is not None
                    else "SDPA decode over the KV cache")
        self.add(name, "attention", op.layers, 1, t, t0, (name,), (op.note + "; " if op.note else "") + note,
                 timed_as_a_whole=whole, host=(model, 1))

    def elementwise_op(self, name: str):
        """An analysis elementwise op without a dedicated model: single-pass kernels (copy model)."""
        op = self.ops[name]
        t, f = self.copy_like(op.bytes, op.kernels)
        self.add(name, op.kind, op.layers, op.kernels, t, f, (name,), op.note)

    def fitted_form_op(self, name: str):
        """Grouped expert GEMMs and MLA's per-step up-projection: the fitted GEMM form on the op's
        FLOPs and bytes (no (N, K) table for them)."""
        op = self.ops[name]
        g = self.m.gemm
        flops = np.asarray(op.flops, dtype=float) / self.gemm_speedup  # bf16-equivalent, as in gemm()
        t = g.base_s(flops, op.bytes)
        if self.m.sustained_gemm_flops_per_s:
            t = np.maximum(t, g.t0_s + flops / self.m.sustained_gemm_flops_per_s)
        self.add(name, op.kind, op.layers, op.kernels, t, g.t0_s, (name,), op.note + "; fitted GEMM form")

    def moe_experts_torch(self, names: tuple[str, ...]):
        """The routed experts as a torch engine runs them (``kernels.moe_torch``: routing, argsort,
        torch._grouped_mm w13, silu*mul, w2, combine): the calibrated ``moe_grouped`` fit on the
        expert ops' bytes and FLOPs together, by expert shape (E, k, d, I); timed as a whole (its
        calibrated time holds its kernels' floors)."""
        ops = [self.ops[n] for n in names]
        m, cfg = self.cfg.moe, self.cfg
        nbytes = sum(np.asarray(o.bytes, dtype=float) for o in ops)
        flops = sum(np.asarray(o.flops, dtype=float) for o in ops) / self.gemm_speedup
        # the expert shape's curve on one GPU; split over GPUs (--ep, --tp) a GPU's share is another
        # shape: the mean curve of the measured ones, as for any unmeasured shape
        key = ((int(m.num_routed_experts), int(m.top_k), int(cfg.hidden_size), int(m.expert_intermediate_size))
               if self.wl.ep == 1 and self.wl.tp == 1 else None)
        t, t0 = self.m.linear["moe_grouped"].time_s([1.0, nbytes, flops], key)
        # its calibrated call starts and ends on different kernels: it switched at each already
        self.add("moe.experts", "moe", ops[0].layers, MOE_TORCH_KERNELS, t, t0, names,
                 "routing, argsort, torch._grouped_mm (w13), silu*mul, torch._grouped_mm (w2), combine: calibrated",
                 timed_as_a_whole=True, host=("moe_grouped", 1), switches=0)

    def build(self) -> list[StepRow]:
        cfg, p = self.cfg, self.p
        L = cfg.num_layers
        done: set[str] = set()
        fused = {}
        if p.fuse_qkv and all(n in self.ops for n in FUSED_GEMMS["attn.qkv"]):
            fused["attn.q"] = ("attn.qkv", FUSED_GEMMS["attn.qkv"])
        if p.fuse_gate_up and all(n in self.ops for n in FUSED_GEMMS["mlp.gate_up"]):
            fused["mlp.gate"] = ("mlp.gate_up", FUSED_GEMMS["mlp.gate_up"])
        h, hkv, D = cfg.num_heads / self.wl.tp, kv_heads_per_gpu(cfg, self.wl.tp), cfg.head_dim
        for name in self.order:
            if name in done:
                continue
            op = self.ops[name]
            if name in fused:
                fname, parts = fused[name]
                self.linear(fname, parts)
                done.update(parts)
            elif "linear" in op.extra:
                self.linear(name, (name,))
            elif name == "norms" and op.kernels <= 2 and self.allreduce_norm_fused():  # inside the all-reduce kernels: their bytes at the roof
                self.add("norms", "elementwise", L, 0, 0.0, 0.0, ("norms",), "with the residual add, inside the TP all-reduce kernels")
            elif name == "norms":
                self.norms("norms", 2, cfg.hidden_size, L, ("norms",), with_add=p.residual_add_kernels == 0, clamp=op.kernels <= 2)
                if op.kernels > 2:  # MLA latent norms, q/k norms: plain norms of their mean width
                    self.norms("norms.extra", op.kernels - 2, self._extra_norm_width(), L)
                    self._split_roof(self.rows[-2:], [2.0 * cfg.hidden_size, (op.kernels - 2) * self._extra_norm_width()])
            elif name == "final_norm":
                self.norms("final_norm", 1, cfg.hidden_size, 1, ("final_norm",))
            elif op.kind == "attention":
                if name == self._first_attention() and mla.attention_family(self) is None:  # an MLA call includes them
                    self._rope_and_kv(cfg.num_attention_layers, h, hkv, D)  # a hybrid's Mamba layers have none
                self.attention_core(name)
            elif name.endswith(".act") and name.startswith("mlp") and cfg.gated_mlp:
                self._act(op)
            elif op.kind == "comm" and self.comm_table(name):
                pass
            elif op.kind == "comm":  # nothing calibrated: the link's roofline (one GPU cannot time a collective)
                self.add(name, "comm", op.layers, op.kernels, self.roof[name] / op.layers, 0.0, (name,),
                         (op.note + "; " if op.note else "") + COMM_NOTE)
            elif op.kind == "moe" and name in MOE_EXPERT_OPS and self.moe_table(tuple(n for n in MOE_EXPERT_OPS if n in self.ops)):
                done.update(MOE_EXPERT_OPS)
            elif op.kind == "moe" and p.moe_experts == "torch" and "moe_grouped" in self.m.linear and name in MOE_EXPERT_OPS:
                names = tuple(n for n in MOE_EXPERT_OPS if n in self.ops)
                self.moe_experts_torch(names)
                done.update(names)
            elif op.kind == "gemm" and mla.bmm(self, name):
                pass
            elif op.kind in ("moe", "gemm"):
                self.fitted_form_op(name)
            else:
                self.elementwise_op(name)
            done.add(name)
            if name == "attn.o" and p.residual_add_kernels:
                self._residual_adds(L)
        if not self.graph:
            self.host_wait()
        return self.rows

    def host_wait(self):
        """Eager phases: the GPU idles while the host launches. Each row's launches are issued
        evenly over its host time (its torch calls at their calibrated eager cost, ``host_s``),
        one layer after another, and kernel i starts at max(its issue, the end of kernel i - 1);
        the phase ends at max over i of (issue of i + GPU work from kernel i on). For L identical
        layers of H host and G GPU time each that is the GPU work plus
        max(0, (L - 1) * (H - G)) + max over launches within a layer of (host time so far - GPU
        work so far): zero when the GPU is busy long enough for the host to run ahead (long
        prefills), the whole host cost when every kernel is shorter than its launch."""
        L = float(self.cfg.num_layers)
        # per layer: (launches, host seconds, GPU seconds); rows of one layer (lm_head) spread over L
        per_layer = [(r.kernels * r.layers / L, r.host_s * r.layers / L, np.asarray(r.time_s, dtype=float) / L) for r in self.rows]
        H = sum(hs for _, hs, _ in per_layer)
        G = sum((g for _, _, g in per_layer), np.zeros(()))
        lag, h_so_far, g_so_far = np.zeros(()), 0.0, np.zeros(())
        for k, hs, g in per_layer:  # the lag peaks at a row's first or last launch
            if k <= 0:
                continue
            last = h_so_far + hs * (k - 1) / k - g_so_far - g * (k - 1) / k
            lag = np.maximum(lag, np.maximum(h_so_far - g_so_far, last))
            h_so_far, g_so_far = h_so_far + hs, g_so_far + g
        wait = np.maximum(0.0, (L - 1) * (H - G)) + lag
        self.rows.append(StepRow("host launch wait", "host", 1, 0, wait, wait, np.zeros(()),
                                 f"eager: GPU idle while the host launches ({H * 1e6:.0f} us of host calls per layer)"))

    # ---- engine-only kernels ----------------------------------------------------------------------
    def _first_attention(self) -> str:
        return next(n for n in self.order if self.ops[n].kind == "attention")

    def _extra_norm_width(self) -> float:
        cfg = self.cfg
        w, n = 0.0, 0
        if cfg.mla is not None:
            w += (cfg.mla.q_lora_rank or 0) + cfg.mla.kv_lora_rank
            n += 2 if cfg.mla.q_lora_rank else 1
        if cfg.qk_norm:
            w += (cfg.num_heads / self.wl.tp + kv_heads_per_gpu(cfg, self.wl.tp)) * cfg.head_dim
            n += 2
        return w / max(n, 1)

    def _rope_and_kv(self, L, h, hkv, D):
        T, b = self.tokens, self.b
        q, k = T * h * D * b, T * hkv * D * b
        kv = T * hkv * D * self.wl.kv_bytes_per_element
        rope = self.cfg.position_embedding == "rope"
        lin, heads = self.m.linear, (int(h), int(hkv), int(D))
        if self.p.kv_write_kernels:
            if rope and "rope_qkv_strided" in lin:  # e2e_full's RoPE timed on the strided q and k views of the qkv output
                t, f = lin["rope_qkv_strided"].time_s([1.0, 2.0 * (q + k) + 2.0 * T * D * b], heads)
                self.add("attn.rope", "elementwise", L, self.p.rope_kernels, t, f, (), "RoPE on the q and k views of the qkv output, timed as run (fused away in the roofline)",
                         timed_as_a_whole=True, host=("rope_qkv_strided", 1), switches=0)
            elif rope and "rope" in self.m.linear:  # the torch RoPE timed as such (contiguous), on q and on k
                cs = 2.0 * T * D * b  # cos and sin rows
                tq, fq = self.m.linear["rope"].time_s([1.0, 2.0 * q + cs], (int(h), int(D)))
                tk, fk = self.m.linear["rope"].time_s([1.0, 2.0 * k + cs], (int(hkv), int(D)))
                self.add("attn.rope", "elementwise", L, self.p.rope_kernels, tq + tk, fq + fk, (), "RoPE as separate torch ops (fused away in the roofline)",
                         timed_as_a_whole=True, host=("rope", 2), switches=0)
            elif rope:  # torch: mul, neg, cat, mul, add on q and on k: about 10 passes of each in all
                t, f = self.copy_like(10.0 * (q + k), self.p.rope_kernels)
                self.add("attn.rope", "elementwise", L, self.p.rope_kernels, t, f, (), "RoPE as separate torch ops (fused away in the roofline)")
            if self.phase == "decode" and "kv_write" in lin:  # e2e_full's write_kv, timed as run
                # a cache of another dtype (fp8, int4) casts inside the same copy_ (one kernel each
                # for K and V): the calibrated bf16 write on its bytes, bf16 in and the cache's out
                t, f = lin["kv_write"].time_s([1.0, 2.0 * (k + kv)], heads)
                note = "K and V of the new token written into the cache, timed as run" + (
                    "; cast to the cache's dtype within the copy" if self.wl.kv_bytes_per_element != b else "")
                self.add("attn.kv_write", "elementwise", L, self.p.kv_write_kernels, t, f, (), note,
                         timed_as_a_whole=True, host=("kv_write", 1), switches=1)
            else:  # prefill (a [S, KVH, D] block, transposed), or older calibrations: the copy model
                t, f = self.copy_like(2.0 * (k + kv), self.p.kv_write_kernels)
                self.add("attn.kv_write", "elementwise", L, self.p.kv_write_kernels, t, f, (), "K and V copied into the cache",
                         host=("copy", self.p.kv_write_kernels))
        elif "kv_write" in self.p.attention_includes:  # the measured attention call writes the cache
            if rope and "rope" not in self.p.attention_includes:  # RoPE alone: read and write q and k
                t, f = self.copy_like(2.0 * q + 2.0 * k, self.p.rope_kernels)
                self.add("attn.rope", "elementwise", L, self.p.rope_kernels, t, f, (), "RoPE on q and k (the KV-cache write is in the attention call)")
        elif rope:  # fused RoPE + KV write: read q, k, v; write q, k and the cache entries
            t, f = self.copy_like(2.0 * q + 2.0 * k + k + 2.0 * kv, self.p.rope_kernels)
            self.add("attn.rope_kv_write", "elementwise", L, self.p.rope_kernels, t, f, (), "fused RoPE + KV-cache write")
        else:  # fused engines without RoPE: one KV-cache write kernel
            t, f = self.copy_like(2.0 * (k + kv), 1)
            self.add("attn.kv_write", "elementwise", L, 1, t, f, (), "K and V written into the cache")

    def _residual_adds(self, L):
        lm = self.m.linear["add_"]
        n = self.p.residual_add_kernels
        t, t0 = lm.time_s([1.0, 3.0 * self.tokens * self.cfg.hidden_size * self.b], (int(self.cfg.hidden_size),))
        self.add("residual_adds", "elementwise", L, n, n * t, n * t0, (), "x + attn, h + mlp (fused away in the roofline)", host=("add_", n))

    def _act(self, op):
        strided = self.p.act == "torch" and "silu_mul_strided" in self.m.linear
        if strided:  # e2e_full's silu_mul on the halves of the gate_up output, timed as run (bytes: the op's 3 passes)
            key = (int(self.cfg.intermediate_size / self.wl.tp),)
            t, f = self.m.linear["silu_mul_strided"].time_s([1.0, np.asarray(op.activation_bytes, dtype=float)], key)
        elif self.p.act == "torch":
            # silu (read g, write tmp) then mul (read tmp and u, write): 5 passes where the op has 3
            key = (int(self.cfg.intermediate_size / self.wl.tp),)
            t, f = self.m.linear["silu_mul"].time_s([1.0, 5.0 / 3.0 * np.asarray(op.activation_bytes, dtype=float)], key)
        else:
            t, f = self.copy_like(op.activation_bytes, 1)
        self.add(op.name, "elementwise", op.layers, self.p.act_kernels, t, f, (op.name,), op.note, timed_as_a_whole=self.p.act == "torch",
                 host=("silu_mul_strided" if strided else "silu_mul" if self.p.act == "torch" else None, 1),
                 switches=0 if self.p.act == "torch" else None)


def step_rows(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str, batch, context, models: FittedModels, profile: EngineProfile) -> list[StepRow]:
    """Achievable rows of one phase (prefill: the whole prompt of ``context`` tokens per sequence;
    decode: one step at ``context`` cached tokens)."""
    return _Builder(cfg, spec, wl, phase, batch, context, models, profile).build()
