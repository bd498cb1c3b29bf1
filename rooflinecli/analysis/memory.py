"""Memory per GPU: weights + KV cache + activation workspace against the spec's capacity; the
largest batch that fits at a context and the longest context that fits at a batch.

Weights walk the same ``rooflinecli.params`` inventory as the op costs (and as the parameter
count); the KV cache is ``rooflinecli.kv.kv_cache_bytes_for`` (windows, compression, MLA, paging)
scaled to one GPU's share.
"""

from __future__ import annotations

import numpy as np

from rooflinecli import kv as KV
from rooflinecli import params as P
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

from .ops import kv_cache_fraction_per_gpu, linear_split, linear_weight_bytes, weight_bytes
from .workload import Workload


def _linears_bytes(cfg: ModelConfig, wl: Workload, linears, quantized=True) -> float:
    return float(sum(linear_weight_bytes(cfg, wl, lin, wl.tp, quantized) for lin in linears))


def weights_breakdown_per_gpu(cfg: ModelConfig, wl: Workload) -> dict[str, float]:
    """Weight bytes each GPU stores, per ``params.COMPONENTS`` key."""
    L, Lm = cfg.num_layers, cfg.num_moe_layers
    tp, G = wl.tp, wl.num_gpus
    head = P.lm_head_linear(cfg)
    router = P.router_linear(cfg)
    E = cfg.moe.num_routed_experts if cfg.moe is not None else 0
    L_mamba = L - cfg.num_attention_layers
    out = {
        "embeddings": float(weight_bytes(P.embedding_params(cfg) / tp, wl, quantized=False)),
        "attention": cfg.num_attention_layers * _linears_bytes(cfg, wl, P.attention_linears(cfg)),
        "dense_mlp": (L - Lm) * _linears_bytes(cfg, wl, P.dense_mlp_linears(cfg)),
        "shared_experts": Lm * _linears_bytes(cfg, wl, P.shared_expert_linears(cfg)),
        # whole experts split over ep, each expert's matrices over num_gpus / ep
        "routed_experts": float(Lm * E * sum(linear_weight_bytes(cfg, wl, lin, 1) for lin in P.routed_expert_linears(cfg)) / G),
        "router": float(Lm * weight_bytes(router.params, wl, quantized=False)) if router is not None else 0.0,
        "norms": float(weight_bytes(L * P.norm_params_per_layer(cfg) + P.final_norm_params(cfg), wl, quantized=False)),
        "lm_head": float(linear_weight_bytes(cfg, wl, head, tp, quantized=False)) if head is not None else 0.0,
    }
    if cfg.mamba is not None:  # its matrices, and the conv, A, D and inner norms (16-bit) split over tp
        out["mamba"] = L_mamba * (_linears_bytes(cfg, wl, P.mamba_linears(cfg))
                                  + float(weight_bytes(P.mamba_other_params(cfg) / tp, wl, quantized=False)))
    return out


def weights_bytes_per_gpu(cfg: ModelConfig, wl: Workload) -> float:
    return sum(weights_breakdown_per_gpu(cfg, wl).values())


def kv_cache_bytes_per_gpu(cfg: ModelConfig, wl: Workload, context, batch):
    """KV cache each GPU holds for ``batch`` sequences at ``context`` tokens (paged when
    ``wl.kv_block_size``): heads split over tp (replicated when tp > H_kv; MLA's latent is
    replicated), whole sequences split over the data-parallel attention groups (the busiest one's).
    A hybrid's Mamba state (``kv.mamba_state_bytes``) splits over tp with the inner channels."""
    seqs = wl.seqs_per_gpu(batch)
    total = KV.kv_cache_bytes_for(cfg, np.asarray(context, dtype=float), seqs, wl.kv_bytes_per_element, wl.kv_block_size)
    state = KV.mamba_state_bytes(cfg, wl.kv_bytes_per_element) * seqs
    return (total - state) * kv_cache_fraction_per_gpu(cfg, wl.tp) + state / wl.tp


def activation_workspace_bytes_per_gpu(cfg: ModelConfig, wl: Workload, prompt_len, batch):
    """Transient activations at the widest point of a prefill of ``batch`` x ``prompt_len``
    tokens, processed in chunks of at most ``wl.prefill_chunk_tokens`` tokens (None: all at once):
    the residual stream plus the widest layer's input and output per token of a chunk, plus fp32
    logits for the last token of each sequence. An estimate."""
    tp = wl.tp
    seqs = wl.seqs_per_gpu(batch)
    tokens = seqs * np.asarray(prompt_len, dtype=float)
    if wl.prefill_chunk_tokens:
        tokens = np.minimum(tokens, float(wl.prefill_chunk_tokens))
    widths = []
    for lin in P.attention_linears(cfg) + P.dense_mlp_linears(cfg) + P.shared_expert_linears(cfg):
        f_in, f_out = linear_split(cfg, lin, tp)
        widths.append(lin.count * (lin.d_in * f_in + lin.d_out * f_out))
    for lin in P.mamba_linears(cfg):
        f_in, f_out = linear_split(cfg, lin, tp)
        widths.append(lin.d_in * f_in + lin.d_out * f_out)
    if cfg.gated_mlp and cfg.num_dense_layers:
        widths.append(2 * cfg.intermediate_size / tp + cfg.intermediate_size / tp)  # gate, up, act out
    if cfg.moe is not None:
        inner = P.routed_expert_linears(cfg)[-1].d_in
        widths.append(cfg.moe.top_k * (cfg.hidden_size + (3 if cfg.gated_mlp else 2) * inner) / tp)  # k*T/G pairs per GPU = k*tokens/tp
    per_token = 2 * cfg.hidden_size + max(widths)
    return tokens * per_token * wl.act_bytes_per_element + seqs * cfg.vocab_size / tp * 4.0


def memory_totals(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, prompt_len, context, batch) -> dict[str, np.ndarray]:
    """weights_bytes_per_gpu, kv_cache_bytes_per_gpu (at ``context``),
    activation_workspace_bytes_per_gpu (prefill of ``prompt_len``), total_bytes_per_gpu,
    capacity_bytes_per_gpu and fits."""
    w = weights_bytes_per_gpu(cfg, wl)
    kv = kv_cache_bytes_per_gpu(cfg, wl, context, batch)
    act = activation_workspace_bytes_per_gpu(cfg, wl, prompt_len, batch)
    total = w + kv + act
    return {
        "weights_bytes_per_gpu": np.asarray(w, dtype=float),
        "kv_cache_bytes_per_gpu": np.asarray(kv, dtype=float),
        "activation_workspace_bytes_per_gpu": np.asarray(act, dtype=float),
        "total_bytes_per_gpu": np.asarray(total, dtype=float),
        "capacity_bytes_per_gpu": np.asarray(spec.memory_capacity_bytes, dtype=float),
        "fits": np.asarray(total <= spec.memory_capacity_bytes),
    }


def fit_warning(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, prompt_len, context, batch) -> str | None:
    """"does not fit: ... needed per GPU, ... available" for the smallest of ``batch`` (one or
    many) whose weights + KV (at ``context``) + workspace (prefill of ``prompt_len``) exceed one
    GPU's memory, naming the batches from there on when more than one was asked; None when all fit."""
    from rooflinecli.fmt import fmt_bytes

    b = np.atleast_1d(np.asarray(batch, dtype=float))
    mem = memory_totals(cfg, spec, wl, prompt_len, context, b)
    total = np.broadcast_to(mem["total_bytes_per_gpu"], b.shape)
    over = np.flatnonzero(total > spec.memory_capacity_bytes)
    if not len(over):
        return None
    i = int(over[0])
    where = ""
    if len(b) > 1:
        where = f" at batch {int(b[i]):,}" + (" and above" if i < len(b) - 1 else "")
    return f"does not fit{where}: {fmt_bytes(total[i])} needed per GPU, {fmt_bytes(spec.memory_capacity_bytes)} available"


def max_batch_that_fits(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, prompt_len: int, context: int) -> int:
    """Largest batch whose weights + KV (at ``context``) + workspace (prefill of ``prompt_len``)
    fit one GPU; 0 when not even batch 1 fits. Memory grows monotonically with batch (linearly
    apart from paging round-up and the chunked-prefill workspace cap), so: doubling, then bisection."""
    cap = spec.memory_capacity_bytes

    def fits(b: int) -> bool:
        return bool(memory_totals(cfg, spec, wl, prompt_len, context, float(b))["total_bytes_per_gpu"] <= cap)

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, hi * 2
        if hi > 1 << 40:
            return lo
    return _last_fitting(fits, lo, hi)


def max_context_that_fits(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, batch: int, limit: int = 1 << 40) -> int | None:
    """Longest context N (prompt of N tokens, KV cache of N) that fits at ``batch``; 0 when not
    even N = 1 fits; None when it still fits at ``limit`` (e.g. a tiny model)."""

    def fits(n: float) -> bool:
        return bool(memory_totals(cfg, spec, wl, n, n, batch)["fits"])

    if not fits(1):
        return 0
    if fits(limit):
        return None
    return _last_fitting(fits, 1, limit)


def _last_fitting(fits, lo: int, hi: int) -> int:
    """Bisection on a monotone predicate: the largest n in [lo, hi) with fits(n), given fits(lo)
    and not fits(hi)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo
