"""Per-op costs of one phase: FLOPs and minimum HBM bytes per decoder layer, per GPU.

Every figure comes from ``rooflinecli.formulas`` and every weight shape from ``rooflinecli.params``;
this module only decides which formula applies to which op, with how many tokens, on how many GPUs.
All quantities broadcast over ``batch`` and ``context`` (numpy), so one call serves a single
``analyze`` run and a million-point ``sweep``.

Conventions (docs/analysis.md has the full list):

- prefill: ``batch`` sequences of ``context`` (= S) tokens, causal; decode: one step of ``batch``
  sequences, each attending ``context`` (= N) cached tokens and appending one (``decode_tokens``
  of the workload: q > 1 for a speculative verification pass, q tokens per sequence through every
  layer and the LM head, q queries over the cache, read once).
- Linear layers: weights read once, input read and output written once (``linear_*`` formulas).
  Attention, MLP, shared-expert weights follow ``weight_dtype``; embedding, LM head, router and
  norms stay 16-bit.
- Attention core (flash-style, no N x N matrix in HBM): Q read and O written
  (``attention_qo_bytes``); prefill reads the fresh K and V and writes the cache; decode reads the
  cache and writes one token.
- LM head (and the final norm): prefill computes logits only for the last token of each sequence.
- Residual adds and RoPE are fused into neighbouring kernels and not counted.
- A hybrid's Mamba layers (``_mamba_ops``) run in_proj, conv1d, x_proj, dt_proj, the selective
  scan and out_proj in place of attention; their per-sequence state counts as KV traffic.
- Tensor parallel (tp): heads and MLP widths split; K/V projections and the KV cache are replicated
  when tp > H_kv (each GPU keeps one KV head); MLA's q_a/kv_a projections and its latent cache are
  replicated on every GPU. Experts are split over ``num_gpus = max(tp, ep)`` (whole experts over
  ep, each expert's matrices over num_gpus/ep). With ep > tp, attention runs data-parallel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rooflinecli import formulas as F
from rooflinecli import params as P
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

from .workload import Workload

PHASES: tuple[str, ...] = ("prefill", "decode")


@dataclass
class OpCost:
    """One op of one phase: per layer, per GPU. Array fields broadcast over (batch, context)."""

    name: str  # "attn.q", "attn.core", "mlp.gate", "moe.expert_up", "comm.tp_allreduce", ...
    kind: str  # "gemm" | "attention" | "elementwise" | "moe" | "comm"
    group: str  # which layers: "all", "full", "window", "compressed", "dense", "moe", "model"
    layers: int  # layers this row covers (1 for model-level ops: embedding, final norm, LM head)
    flops: float | np.ndarray = 0.0
    weights_bytes: float | np.ndarray = 0.0
    activation_bytes: float | np.ndarray = 0.0
    kv_read_bytes: float | np.ndarray = 0.0
    kv_write_bytes: float | np.ndarray = 0.0
    comm_bytes: float | np.ndarray = 0.0  # bytes each GPU sends over the link (not HBM)
    comm_time_s: float | np.ndarray = 0.0
    kernels: int = 1  # kernel launches per layer (for the launch overhead)
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def bytes(self):
        return self.weights_bytes + self.activation_bytes + self.kv_read_bytes + self.kv_write_bytes


# ------------------------------------------------------------------------------------------------
# Parallelism and dtypes
# ------------------------------------------------------------------------------------------------


def check_parallel(cfg: ModelConfig, wl: Workload) -> None:
    """TP must divide the query heads, and divide or be a multiple of the KV heads; EP must divide
    the routed experts. One-line RooflineError otherwise."""
    H, Hkv = cfg.num_heads, cfg.num_kv_heads
    if H % wl.tp:
        raise RooflineError(f"--tp {wl.tp} does not divide {cfg.name}'s {H} attention heads")
    if cfg.mla is None and Hkv % wl.tp and wl.tp % Hkv:
        raise RooflineError(f"--tp {wl.tp} neither divides nor is a multiple of {cfg.name}'s {Hkv} KV heads")
    if wl.ep > 1:
        if cfg.moe is None:
            raise RooflineError(f"--ep {wl.ep}: {cfg.name} has no experts (expert parallelism needs a MoE model)")
        if cfg.moe.num_routed_experts % wl.ep:
            raise RooflineError(f"--ep {wl.ep} does not divide {cfg.name}'s {cfg.moe.num_routed_experts} routed experts")
    if wl.expert_skew != 1.0 and cfg.moe is None:
        raise RooflineError(f"--expert-skew {wl.expert_skew:g}: {cfg.name} has no experts (routing skew needs a MoE model)")
    check_skew_limit(cfg, wl.expert_skew)


def check_skew_limit(cfg: ModelConfig, skew: float, option: str = "--expert-skew") -> None:
    """A routing skew (the hottest expert's load over the mean) of at most E / k: beyond, the
    hottest expert would be in more than every token's top-k."""
    m = cfg.moe
    if m is not None and skew > m.num_routed_experts / m.top_k * (1 + 1e-9):
        raise RooflineError(f"{option} {skew:g}: at most {m.num_routed_experts / m.top_k:g} for {cfg.name} (E / k = "
                            f"{m.num_routed_experts} / {m.top_k}: the hottest expert is then in every token's top-{m.top_k})")


def kv_heads_per_gpu(cfg: ModelConfig, tp: int) -> float:
    """KV heads each GPU holds: H_kv / tp, or 1 (replicated) when tp > H_kv."""
    return max(cfg.num_kv_heads / tp, 1.0)


def kv_cache_fraction_per_gpu(cfg: ModelConfig, tp: int) -> float:
    """Fraction of one sequence's KV cache each GPU holds: MLA's latent is replicated (1.0)."""
    if cfg.mla is not None:
        return 1.0
    return kv_heads_per_gpu(cfg, tp) / cfg.num_kv_heads


def link_bytes_per_s_one_way(spec: HardwareSpec) -> float:
    """Bandwidth one GPU sends at over its links: half the spec's ``gpu_link_gb_per_s``, which
    counts both directions (NVLink 4: 900 GB/s = 450 each way). A ring all-reduce or an
    all-to-all sends and receives at once, so its time is bytes sent / this."""
    return spec.gpu_link_bytes_per_s / 2.0


def weight_bytes(n_params, wl: Workload, quantized: bool = True):
    """Bytes of ``n_params`` weights: ``weight_dtype`` (int4 with one 2-byte scale per group via
    ``formulas.quantized_weight_bytes``) when ``quantized``, else 16-bit (32 for fp32 runs)."""
    if not quantized:
        return n_params * wl.unquantized_weight_bytes_per_element
    if wl.weight_dtype == "int4":
        return F.quantized_weight_bytes(n_params, 4, wl.weight_group_size)
    return F.quantized_weight_bytes(n_params, 8.0 * _bpe(wl.weight_dtype))


def linear_weight_bytes(cfg: ModelConfig, wl: Workload, lin: P.Linear, tp: int, quantized: bool = True):
    """Bytes of ``lin``'s weights (all copies) one GPU holds under tensor parallelism ``tp``: as the
    checkpoint stores them when it has a ``quantization_config`` (``params.stored_bytes_per_weight``;
    biases 16-bit), else, or when ``wl.weight_dtype_overrides``, ``weight_bytes`` (``quantized``:
    follows ``weight_dtype``)."""
    n = linear_params_per_gpu(cfg, lin, tp)
    if cfg.quantization is None or wl.weight_dtype_overrides:
        return weight_bytes(n, wl, quantized)
    f_in, f_out = linear_split(cfg, lin, tp)
    bias = lin.count * lin.d_out * f_out if lin.bias else 0.0
    return (n - bias) * P.stored_bytes_per_weight(cfg, lin) + bias * 2.0


def part_weight_bytes(cfg: ModelConfig, wl: Workload, lin: P.Linear, n_params):
    """Bytes of ``n_params`` weights taken from ``lin`` (MLA's absorbed halves of kv_b)."""
    if cfg.quantization is None or wl.weight_dtype_overrides:
        return weight_bytes(n_params, wl)
    return n_params * P.stored_bytes_per_weight(cfg, lin)


def _bpe(dtype: str) -> float:
    from rooflinecli.dtypes import bytes_per_element

    return bytes_per_element(dtype)


def linear_split(cfg: ModelConfig, lin: P.Linear, tp: int) -> tuple[float, float]:
    """(fraction of d_in, fraction of d_out) one GPU holds under tensor parallelism."""
    if tp == 1:
        return 1.0, 1.0
    d = cfg.hidden_size
    if lin.component == "mamba":  # in_proj, dt_proj split their inner outputs; x_proj, out_proj their inner inputs
        return (1.0 / tp, 1.0) if lin.name in ("x_proj", "out_proj") else (1.0, 1.0 / tp)
    if lin.component == "attention":
        if cfg.mla is not None and lin.name in ("q_a", "kv_a"):
            return 1.0, 1.0  # replicated (latent projections)
        if cfg.mla is None and lin.name in ("k", "v"):
            return 1.0, kv_heads_per_gpu(cfg, tp) / cfg.num_kv_heads
    if lin.d_out == d and lin.name in ("o", "down", "expert_down", "shared_down"):
        return 1.0 / tp, 1.0  # row-parallel
    return 1.0, 1.0 / tp  # column-parallel


def linear_params_per_gpu(cfg: ModelConfig, lin: P.Linear, tp: int) -> float:
    """Parameters of ``lin`` (all ``count`` copies, with bias) one GPU holds under tensor parallelism."""
    f_in, f_out = linear_split(cfg, lin, tp)
    d_in, d_out = lin.d_in * f_in, lin.d_out * f_out
    return lin.count * (d_in * d_out + (d_out if lin.bias else 0))


# ------------------------------------------------------------------------------------------------
# Layer groups
# ------------------------------------------------------------------------------------------------


def attention_groups(cfg: ModelConfig) -> dict[str, int]:
    """Layers per attention kind: {"full": n, "window": n} or {"compressed": L}."""
    if cfg.compressed is not None:
        return {"compressed": cfg.num_layers}
    n_window = sum(1 for i in range(cfg.num_layers) if cfg.uses_window(i))
    out = {"full": cfg.num_attention_layers - n_window, "window": n_window}
    return {k: v for k, v in out.items() if v}


def mlp_groups(cfg: ModelConfig) -> dict[str, int]:
    out = {"dense": cfg.num_dense_layers, "moe": cfg.num_moe_layers}
    return {k: v for k, v in out.items() if v}


def cached_entries(cfg: ModelConfig, group: str, N):
    """Entries a layer of this attention group caches at context N. A chunked layer (Llama-4)
    needs only its current chunk, but an engine allocates for a whole one: min(N, chunk), as a
    sliding window's, and as ``kv.kv_cache_bytes_for`` holds."""
    if group == "window":
        return F.effective_context(N, cfg.sliding_window)
    if group == "compressed":
        c = cfg.compressed
        return F.compressed_entries(N, c.ratio, c.window)
    return N


def entries_read(cfg: ModelConfig, group: str, N):
    """Entries a decode query of this attention group reads at context N (a chunked layer: the
    (N mod chunk) + 1 tokens of the new token's own chunk, itself included)."""
    if group == "window":
        if cfg.window_kind == "chunked":
            return F.chunked_attended_tokens(N, cfg.sliding_window)
        return F.effective_context(N, cfg.sliding_window)
    if group == "compressed":
        c = cfg.compressed
        return F.compressed_entries_read(N, c.ratio, c.top_k, c.window)
    return N


def prefill_pairs(cfg: ModelConfig, group: str, S):
    """Scored (query, key) pairs per (sequence, head) of a causal prefill over S tokens."""
    if group == "window":
        if cfg.window_kind == "chunked":
            return F.chunked_causal_pairs(S, cfg.sliding_window)
        return F.causal_pairs(S, cfg.sliding_window)
    if group == "compressed":
        c = cfg.compressed
        return F.compressed_prefill_pairs(S, c.ratio, c.top_k, c.window)
    return F.causal_pairs(S)


def kv_layer_bytes(cfg: ModelConfig, wl: Workload, entries, seqs):
    """Cache bytes of ONE layer on one GPU: ``entries`` tokens for ``seqs`` sequences."""
    b = wl.kv_bytes_per_element
    if cfg.mla is not None:
        return F.mla_kv_cache_bytes(1, cfg.mla.kv_lora_rank, cfg.mla.qk_rope_head_dim, entries, b, seqs)
    return F.kv_cache_bytes(1, kv_heads_per_gpu(cfg, wl.tp), cfg.head_dim, entries, b, seqs)


# ------------------------------------------------------------------------------------------------
# Ops
# ------------------------------------------------------------------------------------------------


def _linear_op(cfg, wl, lin: P.Linear, tokens, prefix: str, kind: str, group: str, layers: int, quantized=True) -> OpCost:
    f_in, f_out = linear_split(cfg, lin, wl.tp)
    d_in, d_out = lin.d_in * f_in, lin.d_out * f_out
    return OpCost(
        name=f"{prefix}.{lin.name}",
        kind=kind,
        group=group,
        layers=layers,
        flops=lin.count * F.linear_flops(tokens, d_in, d_out),
        weights_bytes=linear_weight_bytes(cfg, wl, lin, wl.tp, quantized),
        activation_bytes=lin.count * F.linear_activation_bytes(tokens, d_in, d_out, wl.act_bytes_per_element),
        note=f"{lin.d_in}->{lin.d_out}" + (f" x{lin.count}" if lin.count > 1 else ""),
        extra={"linear": (d_in, d_out, lin.count)},  # per GPU: the achievable model's GEMM shape
    )


def _mlp_act_op(cfg, wl, name, kind, group, layers, tokens, width) -> OpCost:
    gated = cfg.gated_mlp
    return OpCost(
        name=name,
        kind=kind,
        group=group,
        layers=layers,
        flops=F.activation_flops(tokens, width, gated),
        activation_bytes=F.streaming_bytes(tokens * width, wl.act_bytes_per_element, reads=2 if gated else 1, writes=1),
        note=("silu(gate)*up" if gated else cfg.activation),
    )


def _inner_width(linears) -> int:
    """An MLP's inner width: d_in of its down projection (the last matrix)."""
    return linears[-1].d_in


def _attention_core(cfg, wl, phase, group, layers, seqs, ctx) -> list[OpCost]:
    """Attention core (QK^T, softmax, PV) of one attention group; MLA naive decode adds the per-step
    up-projection of the cached latents."""
    b_a, b_kv = wl.act_bytes_per_element, wl.kv_bytes_per_element
    h = cfg.num_heads / wl.tp
    window = f"chunks of {cfg.sliding_window}" if cfg.window_kind == "chunked" else f"window {cfg.sliding_window}"
    window_note = {"window": window, "compressed": "compressed", "full": ""}[group]
    name = "attn.core" if group == "full" else f"attn.core.{group}"
    if phase == "prefill":
        S = ctx
        pairs = prefill_pairs(cfg, group, S)
        if cfg.mla is not None:
            m = cfg.mla
        D, Dv, h_kv = (
            (m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim, h) if cfg.mla is not None else (cfg.head_dim, cfg.head_dim, kv_heads_per_gpu(cfg, wl.tp))
        )
        return [
            OpCost(
                name=name,
                kind="attention",
                group=group,
                layers=layers,
                # 2*B*H*pairs*(D+Dv): the decode formula counts per scored pair
                flops=F.attention_decode_flops(seqs, h, pairs, D, Dv) + F.softmax_flops(seqs, h, pairs),
                activation_bytes=F.attention_qo_bytes(seqs, h, S, D, b_a, Dv) + F.attention_qo_bytes(seqs, h_kv, S, D, b_a, Dv),
                kv_write_bytes=kv_layer_bytes(cfg, wl, cached_entries(cfg, group, S), seqs),
                note=("causal " + window_note).strip(),
            )
        ]
    N = entries_read(cfg, group, ctx)
    q = wl.decode_tokens  # queries per sequence (each over ~N entries); the cache is read once
    if cfg.mla is None:
        D = cfg.head_dim
        h_kv = kv_heads_per_gpu(cfg, wl.tp)
        return [
            OpCost(
                name=name,
                kind="attention",
                group=group,
                layers=layers,
                flops=q * (F.attention_decode_flops(seqs, h, N, D) + F.softmax_flops(seqs, h, N)),
                activation_bytes=F.attention_qo_bytes(seqs, h, q, D, b_a) + F.attention_qo_bytes(seqs, h_kv, q, D, b_a),
                kv_read_bytes=kv_layer_bytes(cfg, wl, N, seqs),
                kv_write_bytes=kv_layer_bytes(cfg, wl, q, seqs),
                note=window_note,
            )
        ]
    m = cfg.mla
    r, rope, nope, v = m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
    if wl.mla_decode == "absorbed":
        return [
            OpCost(
                name=name,
                kind="attention",
                group=group,
                layers=layers,
                # scores over the latent (r + rope per head), PV over the latent (r)
                flops=q * (F.attention_decode_flops(seqs, h, N, r + rope, r) + F.softmax_flops(seqs, h, N)),
                activation_bytes=F.attention_qo_bytes(seqs, h, q, r + rope, b_a, r),
                kv_read_bytes=kv_layer_bytes(cfg, wl, N, seqs),
                kv_write_bytes=kv_layer_bytes(cfg, wl, q, seqs),
                note=("MLA absorbed: attends over the latent " + window_note).strip(),
            )
        ]
    kv_b = next(lin for lin in P.attention_linears(cfg) if lin.name == "kv_b")
    up_out = kv_b.d_out / wl.tp
    return [
        OpCost(
            name="attn.kv_b.naive",
            kind="gemm",
            group=group,
            layers=layers,
            flops=F.linear_flops(seqs * N, kv_b.d_in, up_out),
            weights_bytes=part_weight_bytes(cfg, wl, kv_b, kv_b.d_in * up_out),
            # reads the cached latents, writes per-head K_nope and V
            kv_read_bytes=F.mla_kv_cache_bytes(1, r, 0, N, b_kv, seqs),
            activation_bytes=seqs * N * up_out * b_a,
            note="MLA naive: up-projects every cached latent each step",
        ),
        OpCost(
            name=name,
            kind="attention",
            group=group,
            layers=layers,
            flops=q * (F.attention_decode_flops(seqs, h, N, nope + rope, v) + F.softmax_flops(seqs, h, N)),
            activation_bytes=F.attention_qo_bytes(seqs, h, q, nope + rope, b_a, v),
            # materialized per-head K_nope and V, plus the shared RoPE key from the cache
            kv_read_bytes=F.attention_qo_bytes(seqs, h, N, nope, b_a, v) + F.mla_kv_cache_bytes(1, 0, rope, N, b_kv, seqs),
            kv_write_bytes=kv_layer_bytes(cfg, wl, q, seqs),
            note=("MLA naive: attends over up-projected K/V " + window_note).strip(),
        ),
    ]


def _mamba_ops(cfg: ModelConfig, wl: Workload, phase: str, layers: int, seqs, tokens) -> list[OpCost]:
    """One Mamba mixer layer of a hybrid (``layers`` of them), per GPU: in_proj (d -> 2E: x and the
    gate z), the depthwise causal conv (+ SiLU) over x, x_proj (E -> dt rank R + 2N: dt, B, C),
    dt_proj (R -> E), the selective scan (+ the D skip and the silu(z) gate), out_proj (E -> d).
    Inner channels split over tp. The scan's state (E x N) and the conv window (E x d_conv) per
    sequence are at the KV-cache dtype, as in the memory model: a prefill starts from zeros and
    writes them once; a decode step reads and writes them once. Jamba's RMSNorms on dt, B and C
    (R + 2N per token) are fused into x_proj and not counted."""
    m = cfg.mamba
    b_a, b_s = wl.act_bytes_per_element, wl.kv_bytes_per_element
    E = m.expand * cfg.hidden_size / wl.tp
    reads = 1 if phase == "decode" else 0
    lins = {lin.name: lin for lin in P.mamba_linears(cfg)}

    def linear(name):
        return _linear_op(cfg, wl, lins[name], tokens, "mamba", "gemm", "mamba", layers)

    # each formula's total split into the OpCost columns: weights, per-sequence state (kv_*), activations
    window = seqs * E * m.d_conv * b_s
    conv_weights = 2.0 * E * m.d_conv
    conv = OpCost(
        name="mamba.conv1d",
        kind="elementwise",
        group="mamba",
        layers=layers,
        flops=F.causal_conv1d_flops(tokens, E, m.d_conv),
        weights_bytes=conv_weights,
        kv_read_bytes=reads * window,
        kv_write_bytes=window,
        activation_bytes=F.causal_conv1d_bytes(tokens, seqs, E, m.d_conv, b_a, b_s, reads) - conv_weights - (1 + reads) * window,
        note=f"depthwise causal conv, width {m.d_conv}, + SiLU; conv window per sequence",
    )
    state = seqs * E * m.d_state * b_s
    scan_total = F.selective_scan_bytes(tokens, seqs, E, m.d_state, b_a, b_s, reads)
    weights = 2.0 * E * (m.d_state + 1)
    scan = OpCost(
        name="mamba.scan",
        kind="elementwise",
        group="mamba",
        layers=layers,
        flops=F.selective_scan_flops(tokens, E, m.d_state),
        weights_bytes=weights,
        kv_read_bytes=reads * state,
        kv_write_bytes=state,
        activation_bytes=scan_total - weights - (1 + reads) * state,
        note=(f"selective scan over the prompt, state {m.d_state} per channel" if phase == "prefill"
              else f"one step: reads and writes the {m.d_state}-wide state per channel"),
    )
    return [linear("in_proj"), conv, linear("x_proj"), linear("dt_proj"), scan, linear("out_proj")]


def phase_ops(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str, batch, context) -> list[OpCost]:
    """Every op of one phase, per layer and per GPU, for ``batch`` sequences at ``context``
    (prefill: prompt length S; decode: cached context N). Arrays broadcast."""
    if phase not in PHASES:
        raise RooflineError(f"phase must be 'prefill' or 'decode', got '{phase}'")
    check_parallel(cfg, wl)
    batch = np.asarray(batch, dtype=float)
    context = np.asarray(context, dtype=float)
    b_a = wl.act_bytes_per_element
    d = cfg.hidden_size
    L = cfg.num_layers
    L_attn = cfg.num_attention_layers
    link = link_bytes_per_s_one_way(spec)
    G, tp = wl.num_gpus, wl.tp
    seqs = wl.seqs_per_gpu(batch)  # sequences each GPU attends for (the busiest group's)
    q = wl.decode_tokens if phase == "decode" else 1  # tokens per sequence of a decode step
    tokens_total = batch * context if phase == "prefill" else batch * q  # tokens of the step, whole replica
    tokens = seqs * context if phase == "prefill" else seqs * q  # tokens each GPU's dense part sees
    last = seqs * q  # tokens through the final norm and the LM head (prefill: the last of each sequence)
    ops: list[OpCost] = []

    # ---- embedding (reads one row per token) ----------------------------------------------------
    emb_params = P.embedding_params(cfg)
    ops.append(
        OpCost(
            name="embedding",
            kind="elementwise",
            group="model",
            layers=1,
            weights_bytes=weight_bytes(np.minimum(tokens * d, emb_params / tp), wl, quantized=False),
            activation_bytes=tokens * d * b_a,
            note="gather one row per token",
        )
    )

    # ---- norms of every layer ---------------------------------------------------------------------
    widths = 2 * d  # pre-attention and pre-MLP
    n_norms = 2
    if cfg.mla is not None:
        widths += (cfg.mla.q_lora_rank or 0) + cfg.mla.kv_lora_rank
        n_norms += 2 if cfg.mla.q_lora_rank else 1
    if cfg.qk_norm:
        widths += (cfg.num_heads / tp + kv_heads_per_gpu(cfg, tp)) * cfg.head_dim
        n_norms += 2
    ops.append(
        OpCost(
            name="norms",
            kind="elementwise",
            group="all",
            layers=L,
            flops=F.norm_flops(tokens, widths),
            activation_bytes=F.streaming_bytes(tokens * widths, b_a),
            weights_bytes=weight_bytes(P.norm_params_per_layer(cfg), wl, quantized=False),
            kernels=n_norms,
            note=f"{n_norms} {cfg.norm} per layer",
        )
    )

    # ---- attention projections --------------------------------------------------------------------
    absorbed = phase == "decode" and cfg.mla is not None and wl.mla_decode == "absorbed"
    for lin in P.attention_linears(cfg):
        if cfg.mla is not None and lin.name == "kv_b" and phase == "decode":
            if absorbed:
                m = cfg.mla
                h = cfg.num_heads / tp
                r = m.kv_lora_rank
                kv_b = lin
                for nm, d_head, note in (("kv_b.uk", m.qk_nope_head_dim, "absorbed W_UK: q_nope -> latent"), ("kv_b.uv", m.v_head_dim, "absorbed W_UV: latent -> v")):
                    ops.append(
                        OpCost(
                            name=f"attn.{nm}",
                            kind="gemm",
                            group="all",
                            layers=L,
                            flops=h * F.linear_flops(tokens, r, d_head),
                            weights_bytes=part_weight_bytes(cfg, wl, kv_b, h * r * d_head),
                            activation_bytes=h * F.linear_activation_bytes(tokens, r, d_head, b_a),
                            note=note,
                        )
                    )
            continue  # naive decode: the up-projection over the cache is part of the core below
        ops.append(_linear_op(cfg, wl, lin, tokens, "attn", "gemm", "all" if L_attn == L else "full", L_attn))

    # ---- attention core per attention group -----------------------------------------------------
    for group, n in attention_groups(cfg).items():
        ops.extend(_attention_core(cfg, wl, phase, group, n, seqs, context))

    # ---- a hybrid's Mamba mixers (the layers without attention) -----------------------------------
    if cfg.mamba is not None:
        ops.extend(_mamba_ops(cfg, wl, phase, L - L_attn, seqs, tokens))

    # ---- MLPs -------------------------------------------------------------------------------------
    groups = mlp_groups(cfg)
    if "dense" in groups:
        lins = P.dense_mlp_linears(cfg)
        for lin in lins:
            ops.append(_linear_op(cfg, wl, lin, tokens, "mlp", "gemm", "dense", groups["dense"]))
        ops.append(_mlp_act_op(cfg, wl, "mlp.act", "elementwise", "dense", groups["dense"], tokens, _inner_width(lins) / tp))
    if "moe" in groups:
        Lm = groups["moe"]
        m = cfg.moe
        router = P.router_linear(cfg)
        ops.append(
            OpCost(
                name="moe.router",
                kind="gemm",
                group="moe",
                layers=Lm,
                flops=F.linear_flops(tokens, router.d_in, router.d_out),
                weights_bytes=weight_bytes(router.params, wl, quantized=False),
                activation_bytes=F.linear_activation_bytes(tokens, router.d_in, router.d_out, b_a),
                note=f"{router.d_in}->{router.d_out}, replicated",
            )
        )
        shared = P.shared_expert_linears(cfg)
        for lin in shared:
            ops.append(_linear_op(cfg, wl, lin, tokens, "moe", "gemm", "moe", Lm))
        if shared:
            mlp_shared = [lin for lin in shared if lin.d_out != 1]  # drop a scalar shared-expert gate (Qwen2-MoE)
            width = _inner_width(mlp_shared) * mlp_shared[-1].count / tp
            ops.append(_mlp_act_op(cfg, wl, "moe.shared_act", "elementwise", "moe", Lm, tokens, width))
        # routed experts: k*T token-expert pairs; bytes of the distinct experts the step touches
        touched = F.expected_experts_touched(m.num_routed_experts, m.top_k, tokens_total, wl.expert_skew)
        # the busiest GPU's pairs (skewed routing under expert parallelism): the step waits for it
        hot = F.ep_hot_gpu_load(m.num_routed_experts, m.top_k, wl.ep, wl.expert_skew)
        pairs = m.top_k * tokens_total * hot
        # and reads the weights of the experts it holds that the step touches (all of them, when
        # the hottest experts sit there, even as skew concentrates the rest elsewhere)
        touched_here = F.ep_hot_gpu_experts_touched(m.num_routed_experts, m.top_k, tokens_total, wl.ep, wl.expert_skew)
        experts = P.routed_expert_linears(cfg)
        skewed = f", busiest GPU {hot:.2f}x the mean pairs" if hot != 1.0 else ""
        for lin in experts:
            ops.append(
                OpCost(
                    name=f"moe.{lin.name}",
                    kind="moe",
                    group="moe",
                    layers=Lm,
                    flops=F.linear_flops(pairs, lin.d_in, lin.d_out) / G,
                    weights_bytes=touched_here * linear_weight_bytes(cfg, wl, lin, 1) * wl.ep / G,
                    activation_bytes=F.linear_activation_bytes(pairs, lin.d_in, lin.d_out, b_a) / G,
                    note=f"{lin.d_in}->{lin.d_out}, top-{m.top_k} of {m.num_routed_experts}{skewed}",
                    extra={"experts_touched": touched},
                )
            )
        ops.append(_mlp_act_op(cfg, wl, "moe.expert_act", "moe", "moe", Lm, pairs / G, _inner_width(experts)))

    # ---- communication ----------------------------------------------------------------------------
    if tp > 1:
        ar_bytes = tokens * d * b_a
        n_mlp = groups.get("dense", 0) + (groups.get("moe", 0) if wl.ep == 1 else 0)
        for name, n in (("comm.tp_allreduce.attn", L), ("comm.tp_allreduce.mlp", n_mlp)):
            if n:
                ops.append(
                    OpCost(
                        name=name,
                        kind="comm",
                        group="all" if n == L else "dense",
                        layers=n,
                        comm_bytes=2.0 * (tp - 1) / tp * ar_bytes,  # what each GPU sends in the ring
                        comm_time_s=F.ring_allreduce_time_s(ar_bytes, tp, link),
                        note=f"ring all-reduce of T*d over {tp} GPUs, {link / 1e9:.0f} GB/s each way",
                    )
                )
    if wl.ep > 1 and "moe" in groups:
        Lm = groups["moe"]
        # the busiest GPU receives (and returns) its pairs: ``ep_hot_gpu_load`` x the mean share
        hot = F.ep_hot_gpu_load(cfg.moe.num_routed_experts, cfg.moe.top_k, wl.ep, wl.expert_skew)
        a2a_bytes = tokens_total / G * cfg.moe.top_k * d * b_a * hot
        ops.append(
            OpCost(
                name="comm.ep_all_to_all",
                kind="comm",
                group="moe",
                layers=Lm,
                comm_bytes=2 * (wl.ep - 1) / wl.ep * a2a_bytes,  # each GPU sends all but its own share, twice
                comm_time_s=2 * F.all_to_all_time_s(a2a_bytes, wl.ep, link),
                kernels=2,
                note=f"dispatch + combine over {wl.ep} GPUs",
            )
        )

    # ---- final norm and LM head: last token of each sequence ----------------------------------------
    ops.append(
        OpCost(
            name="final_norm",
            kind="elementwise",
            group="model",
            layers=1,
            flops=F.norm_flops(last, d),
            activation_bytes=F.streaming_bytes(last * d, b_a),
            weights_bytes=weight_bytes(P.final_norm_params(cfg), wl, quantized=False),
            note="last token per sequence" if q == 1 else f"{q} tokens per sequence",
        )
    )
    head = P.lm_head_linear(cfg) or P.Linear("lm_head", "lm_head", d, cfg.vocab_size)  # tied: reads the embedding table
    ops.append(_linear_op(cfg, wl, head, last, "", "gemm", "model", 1, quantized=False))
    ops[-1].name = "lm_head"
    ops[-1].note += (", last token per sequence" if q == 1 else f", {q} tokens per sequence") + (" (tied)" if cfg.tie_embeddings else "")
    return ops
