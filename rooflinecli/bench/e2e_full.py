"""``roofline e2e --full``: the whole model, timed. Random bf16 weights (never zeros), Llama-type
models (GQA/MHA, RoPE, RMSNorm, SwiGLU; q/k/v biases and Qwen3's per-head q/k norms when the
config has them), dense or with routed MoE experts (Mixtral, Qwen3-MoE: router GEMM, fp32 softmax,
top-k, ``torch._grouped_mm`` over expert-sorted slots: ``kernels.moe_torch``; our Triton engine
runs ``kernels.moe`` there).

* **decode step** (``torch`` engine): embedding, per layer rmsnorm, qkv GEMM, RoPE, KV-cache write,
  SDPA decode attention over the cache (the fastest SDPA backend with native GQA, picked on layer 0
  and recorded), o GEMM, add, rmsnorm, gate_up GEMM, silu*mul, down GEMM, add; final norm and
  lm_head. Captured in ONE CUDA graph and replayed: GPU time per step = median replay.
* the same step from our Triton kernels (``triton`` engine): ``kernels.rmsnorm``, ``kernels.gemm``
  and ``kernels.decode_attention``; torch for the ops we have no kernel for (embedding, RoPE,
  KV-cache write, silu*mul, adds, biases).
* **prefill** (``torch``, eager, batch 1): the same layers over the prompt with SDPA causal; K/V
  written into a cache; lm_head on the last token. CUDA-event median of whole prefills.
* **sliding window** (Mistral 7B v0.1: W = 4096 on every layer): the cache is a rolling buffer of
  W entries, as serving engines keep it (position p in slot p % W, written after RoPE, so the slot
  order does not matter to attention): a decode step at context N >= W attends over the last W
  tokens, as the analysis counts it. A prompt longer than W is skipped (SDPA has no banded causal
  mode to time it with).

A model whose weights and cache do not fit one GPU runs with fewer layers (``num_hidden_layers``
reduced; the results and the output say so, and predictions use the reduced config). Grid points
that do not fit, or that would start after the time budget is spent, are recorded as skipped.
One failing point is recorded and the rest go on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from rooflinecli.bench import timing
from rooflinecli.bench.primitives import EPS, SDPA_BACKENDS, inv_freq, qk_norm, rope, rope_tables, sdpa_call, silu_mul, write_kv
from rooflinecli.models import ModelConfig

DECODE_BATCHES = (1, 8, 32, 64)
DECODE_CONTEXTS = (512, 2048, 8192)
PREFILL_LENS = (128, 512, 2048)
#: Triton engine: a subset (each new GEMM shape is autotuned once, seconds each)
TRITON_POINTS = ((1, 2048), (32, 2048))
#: weights may take at most this share of usable memory; more and layers are dropped
WEIGHT_SHARE = 0.5
#: usable share of the GPU's free memory (allocator slack, graph pools, the L2 flush buffer)
USABLE = 0.85
REPLAYS = 10

TINY_BATCHES, TINY_CONTEXTS, TINY_PREFILL, TINY_TRITON = (1, 2), (8, 16), (8,), ((2, 16),)


def rel_error(out, ref) -> float:
    """``||out - ref|| / ||ref||`` in float64 (infinite when ``out`` is not finite)."""
    import math

    import torch

    o, r = out.double(), ref.double()
    if not torch.isfinite(o).all():
        return math.inf
    return float(torch.linalg.vector_norm(o - r) / max(float(torch.linalg.vector_norm(r)), 1e-12))


def unsupported_reason(cfg: ModelConfig) -> str | None:
    """Why ``--full`` cannot build ``cfg`` (None when it can)."""
    if cfg.mla is not None:
        return "--full supports Llama-type attention only (no MLA yet)"
    m = cfg.moe
    if m is not None and (m.num_shared_experts or m.dense_layers or m.shared_expert_gate):
        return "--full supports MoE models with routed experts only (no shared experts or dense layers yet)"
    if m is not None and (cfg.hidden_size % 8 or m.expert_intermediate_size % 8):
        return "--full's MoE layers need d and I multiples of 8 (torch._grouped_mm's 16-byte rows)"
    if cfg.num_heads % cfg.num_kv_heads or cfg.head_dim not in (64, 128):
        return "--full needs GQA/MHA attention with head dim 64 or 128"
    if cfg.norm != "rmsnorm" or not cfg.gated_mlp or cfg.position_embedding != "rope":
        return "--full supports RMSNorm, gated-MLP, RoPE models only"
    if cfg.sliding_window is not None and not all(cfg.uses_window(i) for i in range(cfg.num_layers)):
        return "--full supports a sliding window on every layer or on none (one cache length for all layers)"
    return None


def cache_len(cfg: ModelConfig, context: int) -> int:
    """Entries of one layer's KV cache for a decode step at ``context`` (the cached tokens plus
    the new one): all of them, or a rolling buffer of the sliding window's W."""
    n = context + 1
    return n if cfg.sliding_window is None else min(n, int(cfg.sliding_window))


#: the fields of a built config that differ from its preset (tiny or reduced runs); validate
#: rebuilds the config as ``replace(get_model(model_ref), **config)``
CONFIG_FIELDS = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "intermediate_size", "vocab_size")


#: the largest integer a recorded config field may hold (vocabularies are the largest: 152k; 1M is
#: room, and keeps a mistyped 1e30 from predicting 6.5e20 s)
MAX_CONFIG_INT = 1 << 20
#: the MoE fields a tiny run changes (``config["moe"]``)
MOE_FIELDS = ("num_routed_experts", "top_k", "expert_intermediate_size")


def config_fields(cfg: ModelConfig) -> dict:
    out: dict = {k: int(getattr(cfg, k)) for k in CONFIG_FIELDS}
    if cfg.moe is not None:
        out["moe"] = {k: int(getattr(cfg.moe, k)) for k in MOE_FIELDS}
    return out


def rebuild_config(model_ref: str, fields: dict) -> ModelConfig:
    """The config a run built: its preset with ``config_fields``' values (a KeyError, TypeError or
    ValueError, or the registry's RooflineError, on a malformed entry)."""
    from rooflinecli.model_registry import get_model

    def whole(k: str, v) -> int:  # what a build could have used: a positive integer of sane size
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_CONFIG_INT:
            raise ValueError(f"config.{k} must be an integer in [1, {MAX_CONFIG_INT:,}], got {v!r}")
        return v

    fields = dict(fields or {})
    moe = fields.pop("moe", None)
    unknown = set(fields) - set(CONFIG_FIELDS)
    if unknown:
        raise ValueError(f"config has unknown field '{sorted(unknown)[0]}'")
    cfg = replace(get_model(model_ref), **{k: whole(k, v) for k, v in fields.items()})
    if cfg.num_heads % cfg.num_kv_heads:
        raise ValueError(f"config.num_heads {cfg.num_heads} is not a multiple of num_kv_heads {cfg.num_kv_heads}")
    if moe is not None:
        if cfg.moe is None or not isinstance(moe, dict):
            raise ValueError("config.moe given for a model without MoE layers, or not a table")
        cfg = replace(cfg, moe=replace(cfg.moe, **{k: whole(f"moe.{k}", moe[k]) for k in MOE_FIELDS}))
        if cfg.moe.top_k > cfg.moe.num_routed_experts:
            raise ValueError(f"config.moe.top_k {cfg.moe.top_k} is more than its {cfg.moe.num_routed_experts} experts")
    return cfg


def tiny_full_config(cfg: ModelConfig) -> ModelConfig:
    """A few-MB model of the same kind, for the CPU dry run."""
    moe = replace(cfg.moe, num_routed_experts=8, top_k=min(cfg.moe.top_k, 2), expert_intermediate_size=96) if cfg.moe is not None else None
    return replace(cfg, name=f"{cfg.name}-tiny", hidden_size=128, num_heads=4, num_kv_heads=2, head_dim=64, intermediate_size=192, num_layers=2,
                   vocab_size=256, moe=moe)


def weight_bytes(cfg: ModelConfig, layers: int) -> int:
    """Bytes of the random bf16 weights of ``cfg`` with ``layers`` layers: ``params.total_params``,
    the analysis's own count, at 2 bytes each."""
    from rooflinecli.params import total_params

    return int(2 * total_params(replace(cfg, num_layers=layers)))


def kv_bytes(cfg: ModelConfig, layers: int, batch: int, context: int) -> int:
    """Bytes of the bf16 KV caches of a decode step at ``context`` (the cached tokens plus the new
    one; a sliding window's layers hold W): ``kv.kv_cache_bytes_for``, the analysis's own count."""
    from rooflinecli.kv import kv_cache_bytes_for

    return int(kv_cache_bytes_for(replace(cfg, num_layers=layers), context + 1, batch, 2))


def workspace_bytes(cfg: ModelConfig, batch: int, tokens: int) -> int:
    """Activations of one layer (bf16), logits (fp32 worst case) and the prefill's attention scratch."""
    mlp = 2 * cfg.intermediate_size if cfg.moe is None else cfg.moe.top_k * 2 * cfg.moe.expert_intermediate_size
    width = max(cfg.hidden_size, (cfg.num_heads + 2 * cfg.num_kv_heads) * cfg.head_dim, mlp)
    return 16 * batch * tokens * width + 4 * batch * cfg.vocab_size + 2**28


def layers_to_fit(cfg: ModelConfig, usable_bytes: float) -> int:
    """The most layers (<= the model's) whose weights take at most ``WEIGHT_SHARE`` of memory."""
    layers = cfg.num_layers
    while layers > 1 and weight_bytes(cfg, layers) > WEIGHT_SHARE * usable_bytes:
        layers -= 1
    return layers


@dataclass
class Plan:
    cfg: ModelConfig  # with the layers actually built
    layers_full: int
    decode: list[tuple[int, int]]
    prefill: list[int]
    triton: list[tuple[int, int]]
    skipped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reduced(self) -> bool:
        return self.cfg.num_layers < self.layers_full


def make_plan(cfg: ModelConfig, usable_bytes: float, tiny: bool = False, batches=None, contexts=None, prefill=None) -> Plan:
    """Layers that fit, and the grid points whose cache fits beside the weights."""
    batches = batches or (TINY_BATCHES if tiny else DECODE_BATCHES)
    contexts = contexts or (TINY_CONTEXTS if tiny else DECODE_CONTEXTS)
    prefill = prefill or (TINY_PREFILL if tiny else PREFILL_LENS)
    layers = layers_to_fit(cfg, usable_bytes)
    built = replace(cfg, num_layers=layers)
    free = usable_bytes - weight_bytes(built, layers)
    plan = Plan(built, cfg.num_layers, [], [], [])
    for B in batches:
        for N in contexts:
            need = kv_bytes(built, layers, B, N) + workspace_bytes(built, B, 1)
            if need <= free:
                plan.decode.append((B, N))
            else:
                plan.skipped.append({"phase": "decode", "batch": B, "context": N, "reason": f"KV cache + workspace {need / 1e9:.1f} GB > {free / 1e9:.1f} GB free beside the weights"})
    for S in prefill:
        if cfg.sliding_window is not None and S > cfg.sliding_window:
            plan.skipped.append({"phase": "prefill", "batch": 1, "context": S,
                                 "reason": f"prompt longer than the sliding window ({cfg.sliding_window}): no banded causal SDPA to time"})
            continue
        need = kv_bytes(built, layers, 1, S) + workspace_bytes(built, 1, S) + 4 * cfg.num_heads * S * S
        if need <= free:
            plan.prefill.append(S)
        else:
            plan.skipped.append({"phase": "prefill", "batch": 1, "context": S, "reason": f"needs {need / 1e9:.1f} GB > {free / 1e9:.1f} GB free"})
    wanted = TINY_TRITON if tiny else TRITON_POINTS
    plan.triton = [p for p in wanted if p in plan.decode]
    return plan


# ------------------------------------------------------------------------------------------------
# The model
# ------------------------------------------------------------------------------------------------


class Weights:
    """Random bf16 weights of ``cfg`` (``cfg.num_layers`` layers) on ``device``."""

    def __init__(self, cfg: ModelConfig, device: str, seed: int = 0) -> None:
        import torch

        from kernels.testing import device_randn

        g = torch.Generator().manual_seed(seed)
        bf = torch.bfloat16
        d, H, Hkv, D, F = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size

        def w(n_out, n_in):
            return device_randn((n_out, n_in), bf, device, g, scale=n_in**-0.5)

        def norm():
            return (1.0 + 0.1 * device_randn((d,), torch.float32, device, g)).to(bf)

        self.cfg, self.device = cfg, device
        self.embed = device_randn((cfg.vocab_size, d), bf, device, g)
        self.layers = []
        for _ in range(cfg.num_layers):
            layer = {
                "norm1": norm(), "qkv": w((H + 2 * Hkv) * D, d),
                "qkv_bias": 0.1 * device_randn(((H + 2 * Hkv) * D,), bf, device, g) if cfg.attention_bias else None,
                "o": w(d, H * D), "norm2": norm(),
            }
            if cfg.qk_norm:  # per-head RMSNorm weights of q and k (Qwen3)
                layer["q_norm"] = (1.0 + 0.1 * device_randn((D,), torch.float32, device, g)).to(bf)
                layer["k_norm"] = (1.0 + 0.1 * device_randn((D,), torch.float32, device, g)).to(bf)
            if cfg.moe is not None:  # router, w1 [E, 2I, d] (gate rows then up rows), w2 [E, d, I]
                E, I = cfg.moe.num_routed_experts, cfg.moe.expert_intermediate_size
                layer["router"] = w(E, d)
                layer["w1"] = device_randn((E, 2 * I, d), bf, device, g, scale=d**-0.5)
                layer["w2"] = device_randn((E, d, I), bf, device, g, scale=I**-0.5)
            else:
                layer["gate_up"], layer["down"] = w(2 * F, d), w(d, F)
            self.layers.append(layer)
        self.final_norm = norm()
        self.lm_head = self.embed if cfg.tie_embeddings else w(cfg.vocab_size, d)
        self.inv_freq = inv_freq(D, cfg.rope_theta, device)

    def rope_tables(self, positions):
        """cos, sin [T, D] (rotate-half layout) in bf16."""
        return rope_tables(positions, self.inv_freq)


def mlp(ops, x, L, cfg: ModelConfig):
    """The MLP of one layer on x [T, d]: SwiGLU (gate_up GEMM, silu*mul, down GEMM), or the routed
    experts of an MoE layer as torch ops (router GEMM, then ``kernels.moe_torch``: fp32 softmax,
    top-k, torch._grouped_mm over expert-sorted slots, combine)."""
    if cfg.moe is None:
        return ops.linear(silu_mul(ops.linear(x, L["gate_up"]), cfg.intermediate_size), L["down"])
    from kernels.moe_torch import route

    ids, w = route(ops.linear(x, L["router"]), cfg.moe.top_k)
    return ops.experts(x, L["w1"], L["w2"], ids, w)


class TorchOps:
    name = "torch"

    def __init__(self, sdpa_backend: str = "default") -> None:
        self.sdpa_backend = sdpa_backend

    def rmsnorm(self, x, w):
        import torch.nn.functional as F

        return F.rms_norm(x, (x.shape[-1],), w, EPS)

    def linear(self, x, w, b=None):
        import torch.nn.functional as F

        return F.linear(x, w, b)

    def decode_attention(self, q, k_cache, v_cache):
        """q [B, H, D], caches [B, Hkv, N, D] -> [B, H, D]."""
        return sdpa_call(q[:, :, None], k_cache, v_cache, False, self.sdpa_backend)()[:, :, 0]

    def attention(self, q, k, v):
        """Causal prefill attention: q [B, H, S, D], k and v [B, Hkv, S, D] -> [B, H, S, D]."""
        return sdpa_call(q, k, v, True, self.sdpa_backend)()

    def experts(self, x, w1, w2, ids, weights):
        """The routed experts of an MoE layer: torch._grouped_mm (``kernels.moe_torch``)."""
        from kernels.moe_torch import experts

        return experts(x, w1, w2, ids, weights)


class TritonOps(TorchOps):
    name = "triton"
    KERNELS = ("kernels.rmsnorm (norms), kernels.gemm (qkv, o, gate_up, down, router, lm_head), kernels.decode_attention, "
               "kernels.flash_attention (causal prefill), kernels.moe (routed experts)")
    TORCH_GLUE = "embedding, q/k norms, RoPE, KV-cache write, silu*mul, residual adds, q/k/v biases, MoE routing (torch ops: no kernel of ours)"

    def __init__(self) -> None:
        from kernels.decode_attention import decode_attention
        from kernels.flash_attention import flash_attention
        from kernels.gemm import gemm
        from kernels.rmsnorm import rmsnorm

        super().__init__()
        self._gemm, self._rms, self._dec, self._flash = gemm, rmsnorm, decode_attention, flash_attention
        import torch

        if torch.cuda.is_available():  # committed configs, and graph-timed tuning for the rest
            from kernels.tuning import prepare_gpu_tuning

            self.tuned = prepare_gpu_tuning()

    def rmsnorm(self, x, w):
        return self._rms(x, w, EPS)

    def linear(self, x, w, b=None):
        y = self._gemm(x, w)
        return y if b is None else y + b

    def decode_attention(self, q, k_cache, v_cache):
        return self._dec(q.contiguous(), k_cache, v_cache)

    def attention(self, q, k, v):
        return self._flash(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)

    def experts(self, x, w1, w2, ids, weights):
        from kernels.moe import moe

        return moe(x, w1, w2, ids, weights)


class ReferenceOps(TorchOps):
    """The torch ops in float32 (inputs upcast, the result cast back to bf16): the reference the
    torch and Triton engines are checked against. The glue (RoPE, q/k norms, silu*mul, adds) and
    the routed experts run as in the torch engine."""

    name = "reference"

    def rmsnorm(self, x, w):
        import torch.nn.functional as F

        return F.rms_norm(x.float(), (x.shape[-1],), w.float(), EPS).to(x.dtype)

    def linear(self, x, w, b=None):
        import torch.nn.functional as F

        return F.linear(x.float(), w.float(), None if b is None else b.float()).to(x.dtype)

    def decode_attention(self, q, k_cache, v_cache):
        return sdpa_call(q.float()[:, :, None], k_cache.float(), v_cache.float(), False, "default")()[:, :, 0].to(q.dtype)

    def attention(self, q, k, v):
        return sdpa_call(q.float(), k.float(), v.float(), True, "default")().to(q.dtype)


def decode_layer(ops, L, cfg: ModelConfig, h, cos, sin, kc, vc, pos: int):
    """One layer of a decode step: h [B, d] -> [B, d]; K/V of the new token written into the
    layer's caches kc, vc [B, Hkv, C, D] at ``pos`` (its slot of a rolling buffer)."""
    H, Hkv, D = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    B = h.shape[0]
    qkv = ops.linear(ops.rmsnorm(h, L["norm1"]), L["qkv"], L["qkv_bias"]).view(B, H + 2 * Hkv, D)
    q, k = qkv[:, :H], qkv[:, H : H + Hkv]
    if cfg.qk_norm:
        q, k = qk_norm(q, L["q_norm"]), qk_norm(k, L["k_norm"])
    q = rope(q, cos, sin)
    write_kv(kc, vc, rope(k, cos, sin), qkv[:, H + Hkv :], pos)
    o = ops.decode_attention(q, kc, vc).reshape(B, H * D)
    h = h + ops.linear(o, L["o"])
    return h + mlp(ops, ops.rmsnorm(h, L["norm2"]), L, cfg)


def prefill_layer(ops, L, cfg: ModelConfig, h, cos, sin, kc, vc):
    """One layer of a prefill: h [B, S, d] -> [B, S, d]; the prompt's K/V written into the first S
    entries of the layer's caches kc, vc [B, Hkv, C >= S, D]; causal attention over them."""
    H, Hkv, D = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    B, S, d = h.shape
    x = h.reshape(B * S, d)
    qkv = ops.linear(ops.rmsnorm(x, L["norm1"]), L["qkv"], L["qkv_bias"]).view(B, S, H + 2 * Hkv, D)
    q, k = qkv[:, :, :H], qkv[:, :, H : H + Hkv]
    if cfg.qk_norm:
        q, k = qk_norm(q, L["q_norm"]), qk_norm(k, L["k_norm"])
    q = rope(q, cos, sin).transpose(1, 2)
    kc[:, :, :S] = rope(k, cos, sin).transpose(1, 2)
    vc[:, :, :S] = qkv[:, :, H + Hkv :].transpose(1, 2)
    o = ops.attention(q, kc[:, :, :S], vc[:, :, :S])
    x = x + ops.linear(o.transpose(1, 2).reshape(B * S, H * D), L["o"])
    return (x + mlp(ops, ops.rmsnorm(x, L["norm2"]), L, cfg)).view(B, S, d)


def decode_step(W: Weights, ops, tokens, cos, sin, k_caches, v_caches, pos: int):
    """One decode step: tokens [B] -> logits [B, V]; K/V of the new token written at ``pos``."""
    import torch.nn.functional as F

    h = F.embedding(tokens, W.embed)
    for L, kc, vc in zip(W.layers, k_caches, v_caches):
        h = decode_layer(ops, L, W.cfg, h, cos, sin, kc, vc, pos)
    return ops.linear(ops.rmsnorm(h, W.final_norm), W.lm_head)


def prefill(W: Weights, tokens, cos, sin, k_caches, v_caches, sdpa_backend: str = "default", ops=None):
    """Eager prefill of one sequence: tokens [S] -> last-token logits [1, V]; ``ops`` the engine
    (torch ops on ``sdpa_backend`` when not given)."""
    import torch.nn.functional as F

    ops = ops or TorchOps(sdpa_backend)
    h = F.embedding(tokens, W.embed)[None]
    for L, kc, vc in zip(W.layers, k_caches, v_caches):
        h = prefill_layer(ops, L, W.cfg, h, cos, sin, kc, vc)
    return ops.linear(ops.rmsnorm(h[0, -1:], W.final_norm), W.lm_head)


# ------------------------------------------------------------------------------------------------
# Timing
# ------------------------------------------------------------------------------------------------


def _caches(W: Weights, batch: int, context: int, device: str, gen):
    from kernels.testing import device_randn

    import torch

    shape = (batch, W.cfg.num_kv_heads, cache_len(W.cfg, context), W.cfg.head_dim)
    return ([device_randn(shape, torch.bfloat16, device, gen) for _ in W.layers], [device_randn(shape, torch.bfloat16, device, gen) for _ in W.layers])


def graph_replays(fn, device: str, replays: int):
    """(seconds per call of ``fn`` from CUDA-graph replays, method, the output of the last replay
    copied out of the graph's memory); the wall clock on the CPU."""
    held: dict[str, Any] = {}

    def call() -> None:
        held["out"] = fn()

    if device != "cuda":
        call()
        return timing.graph_samples([call], 1, max(3, replays // 3), device), "wall_clock (CPU dry run, not a GPU measurement)", held["out"]
    try:
        samples = timing.graph_samples([call], 1, replays, device)
        return samples, "cuda_graph (whole step as one graph, replays queued back to back behind a GPU sleep)", held["out"].clone()
    finally:
        held.clear()


def eager_runs(fn, device: str, runs: int) -> tuple[list[float], str]:
    fn()
    if device != "cuda":
        return timing.eager_samples([fn], runs, device), "wall_clock (CPU dry run, not a GPU measurement)"
    import torch

    torch.cuda.synchronize()
    return timing.eager_samples([fn], runs, device, sync_each=True), "cuda_events (eager, one prefill per sample, host launch gaps included)"


def pick_decode_backend(W: Weights, batch: int, context: int, device: str, gen, tensor_device: str | None = None) -> tuple[str, str]:
    """The fastest SDPA backend (native GQA) for one layer's decode attention, and the eager times."""
    import torch

    from kernels.testing import device_randn

    cfg = W.cfg
    dev = tensor_device or device
    q = device_randn((batch, cfg.num_heads, 1, cfg.head_dim), torch.bfloat16, dev, gen)
    k = device_randn((batch, cfg.num_kv_heads, context + 1, cfg.head_dim), torch.bfloat16, dev, gen)
    times: dict[str, float] = {}
    for b in SDPA_BACKENDS:
        try:
            fn = sdpa_call(q, k, k, False, b)
            samples, _ = eager_runs(fn, device, 3)
            times[b] = timing.median_s(samples)
        except Exception:  # noqa: BLE001 - a backend without this shape is not a candidate
            sync_quietly(device)
    if not times:
        return "default", "no backend ran in the probe; default dispatch"
    best = min(times, key=times.get)
    return best, "eager us per backend: " + ", ".join(f"{b} {t * 1e6:.1f}" for b, t in sorted(times.items(), key=lambda kv: kv[1]))


def failure_reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"


def sync_quietly(device: str) -> None:
    """Synchronize after a failure; a sticky CUDA error shows up at the next point, which records it."""
    if device != "cuda":
        return
    import torch

    try:
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001
        pass


def _point(phase: str, engine: str, batch: int, context: int, layers: int, samples: list[float], method: str, **extra) -> dict[str, Any]:
    return {"phase": phase, "engine": engine, "batch": batch, "context": context, "layers": layers, "measured_s": timing.median_s(samples),
            "min_s": min(samples), "max_s": max(samples), "samples_s": samples, "method": method, **extra}


#: Triton vs torch logits through every layer in bf16 (different accumulation orders)
TRITON_TOLERANCE = 5e-2


def run_full(cfg: ModelConfig, model_ref: str, device: str = "cuda", tiny: bool = False, budget_s: float = 30.0,
             replays: int = REPLAYS, on_point=None, seed: int = 0, triton: bool = True, checkpoint=None,
             tensor_device: str | None = None) -> dict[str, Any]:
    """Build, time and record the whole model; the ``extra.end_to_end_full.models[<name>]`` dict.
    ``checkpoint(entry)`` is called after every point (a stage killed by its timeout keeps them).
    ``tensor_device``: where tensors live when not ``device`` (tests of the CUDA path on the CPU)."""
    import torch

    t0 = time.monotonic()
    dev = tensor_device or device  # where tensors live (tests: "cpu" under the CUDA timing path)
    if device == "cuda":
        free, _total = torch.cuda.mem_get_info()
        usable = USABLE * free
    else:
        usable = 8e9
    plan = make_plan(cfg, usable, tiny)
    out: dict[str, Any] = {
        "model": cfg.name, "model_ref": model_ref, "layers_full": plan.layers_full, "layers_used": plan.cfg.num_layers,
        "reduced": plan.reduced, "config": config_fields(plan.cfg), "dtype": "bf16", "weights": "random bf16 (never zeros), scaled 1/sqrt(fan_in)",
        "ops": ("embedding; per layer rmsnorm, qkv GEMM, " + ("q/k norms, " if plan.cfg.qk_norm else "") + "RoPE, KV-cache write, SDPA decode attention, "
                "o GEMM, add, rmsnorm, " + ("router GEMM, routing (fp32 softmax, top-k), torch._grouped_mm experts (w13, silu*mul, w2), combine"
                                             if plan.cfg.moe is not None else "gate_up GEMM, silu*mul, down GEMM") + ", add; final norm, lm_head"),
        "triton_engine": {"kernels": TritonOps.KERNELS, "torch_ops": TritonOps.TORCH_GLUE},
        "points": [], "failed": [], "skipped": list(plan.skipped), "budget_s": budget_s,
    }
    if plan.reduced:
        out["note"] = (f"{cfg.name} does not fit one GPU with room for its KV cache: built with {plan.cfg.num_layers} of "
                       f"{plan.layers_full} layers (num_hidden_layers reduced); predictions use the same reduced config")
    try:
        W = Weights(plan.cfg, dev, seed)
    except Exception as e:  # noqa: BLE001 - recorded (say, out of memory); nothing else can run
        out["failed"].append({"phase": "build", "engine": "torch", "batch": 0, "context": 0, "error": failure_reason(e)})
        out["elapsed_s"] = time.monotonic() - t0
        return out
    gen = torch.Generator().manual_seed(seed + 1)
    L = plan.cfg.num_layers

    def over() -> bool:
        return time.monotonic() - t0 >= budget_s

    state: dict[str, Any] = {"triton": None}

    def decode_point(engine: str, B: int, N: int) -> dict[str, Any]:
        kc, vc = _caches(W, B, N, dev, gen)
        tokens = torch.randint(0, plan.cfg.vocab_size, (B,), generator=gen).to(dev)
        cos, sin = W.rope_tables(torch.full((B,), N, device=dev))
        reference = decode_step(W, TorchOps(), tokens, cos, sin, kc, vc, N)  # eager torch, default dispatch
        if engine == "torch":
            backend, how = pick_decode_backend(W, B, N, device, gen, dev)
            ops, extra = TorchOps(backend), {"backend": backend, "backend_probe": how}
        else:
            ops = state["triton"] = state["triton"] or TritonOps()
            err = rel_error(decode_step(W, ops, tokens, cos, sin, kc, vc, N), reference)
            extra = {"check_rel_error_vs_torch": err, "check_ok": err <= TRITON_TOLERANCE}
        try:
            samples, method, last = graph_replays(lambda: decode_step(W, ops, tokens, cos, sin, kc, vc, N), device, replays)
        except Exception as e:  # noqa: BLE001 - a backend that will not capture: default dispatch instead
            if engine != "torch" or ops.sdpa_backend == "default":
                raise
            sync_quietly(device)
            extra.update(backend="default", backend_note=f"{ops.sdpa_backend} failed in graph capture ({type(e).__name__}); default dispatch timed")
            ops = TorchOps("default")
            samples, method, last = graph_replays(lambda: decode_step(W, ops, tokens, cos, sin, kc, vc, N), device, replays)
        # the replayed graph computes what eager torch does (a capture that baked in stale state would not)
        gerr = rel_error(last, reference)
        extra.update(graph_check_rel_error=gerr, graph_check_ok=gerr <= TRITON_TOLERANCE)
        return _point("decode", engine, B, N, L, samples, method, **extra)

    def prefill_point(engine: str, B: int, S: int) -> dict[str, Any]:
        kc, vc = _caches(W, 1, S, dev, gen)
        tokens = torch.randint(0, plan.cfg.vocab_size, (S,), generator=gen).to(dev)
        cos, sin = W.rope_tables(torch.arange(S, device=dev))
        samples, method = eager_runs(lambda: prefill(W, tokens, cos, sin, kc, vc), device, 5)
        return _point("prefill", "torch", 1, S, L, samples, method, backend="default dispatch (SDPA causal, enable_gqa)")

    # prefill first (a few seconds), then torch decode, then the Triton engine (its first calls
    # autotune: slowest last), so a budget cut costs the least informative points
    jobs = [("prefill", "torch", 1, S, prefill_point) for S in plan.prefill] + [("decode", "torch", B, N, decode_point) for B, N in plan.decode]
    jobs += [("decode", "triton", B, N, decode_point) for B, N in plan.triton] if triton else []
    for phase, engine, B, N, run in jobs:
        if over():
            out["skipped"].append({"phase": phase, "engine": engine, "batch": B, "context": N, "reason": "time budget spent"})
            continue
        if on_point:
            on_point(phase, engine, B, N)
        try:
            out["points"].append(run(engine, B, N))
        except Exception as e:  # noqa: BLE001 - one failing point never stops the stage
            out["failed"].append({"phase": phase, "engine": engine, "batch": B, "context": N, "error": failure_reason(e)})
            sync_quietly(device)
        finally:
            if device == "cuda":
                torch.cuda.empty_cache()
        if checkpoint is not None:
            checkpoint({**out, "elapsed_s": time.monotonic() - t0, "partial": True})
    out["elapsed_s"] = time.monotonic() - t0
    del W
    if device == "cuda":
        torch.cuda.empty_cache()
    return out
