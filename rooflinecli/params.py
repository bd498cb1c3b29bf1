"""The ONE inventory of a model's weights.

Every weight matrix of one layer is a ``Linear`` (d_in -> d_out, ``count`` copies, optional bias).
Parameter counts (here) and the analytical model's FLOPs and bytes (``rooflinecli.analysis``) both
walk these same lists, so a matrix can't be counted in one and forgotten in the other.

Per-layer lists: ``attention_linears`` (every layer), ``dense_mlp_linears`` (dense layers only),
``routed_expert_linears`` (ONE routed expert of a MoE layer), ``shared_expert_linears`` and
``router_linear`` (MoE layers). Model-level: ``embedding_params``, ``lm_head_linear`` (None when
tied to the embedding), ``norm_params_per_layer``, ``final_norm_params``.

Active parameters per token: attention + dense MLPs + shared experts + top-k routed experts +
routers + norms + LM head, plus the embedding tables when ``include_embeddings`` (the default).
Publishers differ on that last term: Mixtral-8x7B's 12.9B and Qwen3-30B-A3B's 3.3B include the
embedding table (12.88B / 3.35B with it, 12.75B / 3.04B without); DeepSeek-V3's 37B matches the
count without it (36.63B, 1.0% under; with it 37.55B, 1.5% over). The embedding lookup reads one
row per token, so for bytes moved the figure without embeddings is the meaningful one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rooflinecli.models import ModelConfig

#: component names used in ``Linear.component`` and in ``param_breakdown`` keys
COMPONENTS: tuple[str, ...] = (
    "embeddings",
    "attention",
    "dense_mlp",
    "shared_experts",
    "routed_experts",
    "router",
    "norms",
    "lm_head",
    "mamba",  # a hybrid's state-space mixer layers (Jamba)
)


@dataclass(frozen=True)
class Linear:
    """A weight matrix d_in -> d_out (``count`` identical copies), with an optional bias."""

    name: str
    component: str
    d_in: int
    d_out: int
    count: int = 1
    bias: bool = False

    @property
    def params(self) -> int:
        """count * (d_in*d_out + (d_out if bias else 0))."""
        return self.count * (self.d_in * self.d_out + (self.d_out if self.bias else 0))


def _sum(linears) -> int:
    return sum(lin.params for lin in linears)


# ------------------------------------------------------------------------------------------------
# Per-layer inventories
# ------------------------------------------------------------------------------------------------


def attention_linears(cfg: ModelConfig) -> tuple[Linear, ...]:
    """One layer's attention projections.

    MHA/GQA/MQA: q (d -> H*D), k and v (d -> H_kv*D), o (H*D -> d).
    MLA: q_a (d -> q_lora) and q_b (q_lora -> H*(nope+rope)), or q (d -> H*(nope+rope)) without a
    query LoRA; kv_a (d -> kv_lora + rope: the cached latent and the shared RoPE key); kv_b
    (kv_lora -> H*(nope + v)); o (H*v -> d).
    """
    d, H = cfg.hidden_size, cfg.num_heads
    ob = cfg.attention_out_bias
    if cfg.mla is not None:
        m = cfg.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q = (
                Linear("q_a", "attention", d, m.q_lora_rank, bias=cfg.attention_bias),
                Linear("q_b", "attention", m.q_lora_rank, H * qk),
            )
        else:
            q = (Linear("q", "attention", d, H * qk),)
        return q + (
            Linear("kv_a", "attention", d, m.kv_lora_rank + m.qk_rope_head_dim, bias=cfg.attention_bias),
            Linear("kv_b", "attention", m.kv_lora_rank, H * (m.qk_nope_head_dim + m.v_head_dim)),
            Linear("o", "attention", H * m.v_head_dim, d, bias=ob),
        )
    D, Hkv, qb = cfg.head_dim, cfg.num_kv_heads, cfg.attention_bias
    return (
        Linear("q", "attention", d, H * D, bias=qb),
        Linear("k", "attention", d, Hkv * D, bias=qb),
        Linear("v", "attention", d, Hkv * D, bias=qb),
        Linear("o", "attention", H * D, d, bias=ob),
    )


def _mlp(cfg: ModelConfig, width: int, component: str, count: int = 1, prefix: str = "") -> tuple[Linear, ...]:
    d, b = cfg.hidden_size, cfg.mlp_bias
    if cfg.gated_mlp:
        return (
            Linear(prefix + "gate", component, d, width, count, b),
            Linear(prefix + "up", component, d, width, count, b),
            Linear(prefix + "down", component, width, d, count, b),
        )
    return (
        Linear(prefix + "up", component, d, width, count, b),
        Linear(prefix + "down", component, width, d, count, b),
    )


def dense_mlp_linears(cfg: ModelConfig) -> tuple[Linear, ...]:
    """One dense layer's MLP: gate/up/down (gated, SwiGLU-style) or up/down."""
    return _mlp(cfg, cfg.intermediate_size, "dense_mlp")


def routed_expert_linears(cfg: ModelConfig) -> tuple[Linear, ...]:
    """ONE routed expert's matrices (count = 1); empty for a dense model."""
    if cfg.moe is None:
        return ()
    return _mlp(cfg, cfg.moe.expert_intermediate_size, "routed_experts", prefix="expert_")


def shared_expert_linears(cfg: ModelConfig) -> tuple[Linear, ...]:
    """All shared experts of one MoE layer (count = number of shared experts), plus Qwen2-MoE's
    shared-expert gate; empty when there are none."""
    if cfg.moe is None or cfg.moe.num_shared_experts == 0:
        return ()
    m = cfg.moe
    out = _mlp(cfg, m.shared_expert_intermediate_size, "shared_experts", m.num_shared_experts, prefix="shared_")
    if m.shared_expert_gate:
        out += (Linear("shared_gate", "shared_experts", cfg.hidden_size, 1),)
    return out


def router_linear(cfg: ModelConfig) -> Linear | None:
    """One MoE layer's router d -> E (DeepSeek-V3's score-correction bias counted as its bias)."""
    if cfg.moe is None:
        return None
    return Linear("router", "router", cfg.hidden_size, cfg.moe.num_routed_experts, bias=cfg.router_bias)


def norm_params_per_layer(cfg: ModelConfig) -> int:
    """Norm weights of one layer: ``norms_per_layer`` of width d (two: pre-attention, pre-MLP;
    Gemma-2/3 four; one where attention and MLP share it; LayerNorm has a bias too), MLA's latent
    norms (q_a, kv_a), Qwen3's and Gemma-3's per-head q/k norms."""
    per = 2 if cfg.norm == "layernorm" else 1
    n = cfg.norms_per_layer * per * cfg.hidden_size
    if cfg.mla is not None:
        n += per * ((cfg.mla.q_lora_rank or 0) + cfg.mla.kv_lora_rank)
    if cfg.qk_norm:
        n += 2 * per * cfg.head_dim
    return n


def final_norm_params(cfg: ModelConfig) -> int:
    return (2 if cfg.norm == "layernorm" else 1) * cfg.hidden_size


def embedding_params(cfg: ModelConfig) -> int:
    """Token embedding table (vocab x d) plus learned position embeddings (GPT-2) if any."""
    n = cfg.vocab_size * cfg.hidden_size
    if cfg.position_embedding == "learned":
        n += cfg.max_position_embeddings * cfg.hidden_size
    return n


def lm_head_linear(cfg: ModelConfig) -> Linear | None:
    """The output projection d -> vocab; None when tied to the embedding table."""
    if cfg.tie_embeddings:
        return None
    return Linear("lm_head", "lm_head", cfg.hidden_size, cfg.vocab_size, bias=cfg.lm_head_bias)


def attention_sink_params(cfg: ModelConfig) -> int:
    """Learned attention-sink logits of one attention layer (gpt-oss: one per query head)."""
    return cfg.num_heads if cfg.attention_sinks else 0


def mamba_linears(cfg: ModelConfig) -> tuple[Linear, ...]:
    """One Mamba mixer layer's matrices (inner width E = expand*d, state N, dt rank R): in_proj
    d -> 2E (x and the gate z), x_proj E -> R + 2N (dt, B, C), dt_proj R -> E (bias), out_proj
    E -> d; empty without Mamba layers."""
    m = cfg.mamba
    if m is None:
        return ()
    d = cfg.hidden_size
    E = m.expand * d
    return (
        Linear("in_proj", "mamba", d, 2 * E, bias=m.proj_bias),
        Linear("x_proj", "mamba", E, m.dt_rank + 2 * m.d_state),
        Linear("dt_proj", "mamba", m.dt_rank, E, bias=True),
        Linear("out_proj", "mamba", E, d, bias=m.proj_bias),
    )


def mamba_other_params(cfg: ModelConfig) -> int:
    """One Mamba layer's weights besides its matrices: the depthwise conv (E x d_conv, + E bias),
    A_log (E x N), D (E), and Jamba's dt/B/C RMSNorms (R + 2N)."""
    m = cfg.mamba
    if m is None:
        return 0
    E = m.expand * cfg.hidden_size
    n = E * m.d_conv + (E if m.conv_bias else 0) + E * m.d_state + E
    return n + ((m.dt_rank + 2 * m.d_state) if m.inner_norms else 0)


def mamba_state_elements(cfg: ModelConfig) -> int:
    """Elements one Mamba layer keeps per sequence instead of a KV cache: the SSM state (E x N) and
    the conv window (E x d_conv), whatever the context."""
    m = cfg.mamba
    if m is None:
        return 0
    return m.expand * cfg.hidden_size * (m.d_state + m.d_conv)


def vision_params(cfg: ModelConfig) -> float:
    """The vision tower's parameters (multimodal configs; 0 when not counted or absent)."""
    return float(cfg.vision.params or 0) if cfg.vision is not None else 0.0


def lm_head_matmul_params(cfg: ModelConfig) -> int:
    """Weights the LM-head matmul reads per token: its own, or the tied embedding table's."""
    head = lm_head_linear(cfg)
    return head.params if head is not None else cfg.vocab_size * cfg.hidden_size


# ------------------------------------------------------------------------------------------------
# Totals
# ------------------------------------------------------------------------------------------------


def param_breakdown(cfg: ModelConfig) -> dict[str, float]:
    """Parameters per component (keys: ``COMPONENTS``), whole model; sums to ``total_params``.

    A tied LM head is counted once, under ``embeddings``.
    """
    L, L_moe = cfg.num_layers, cfg.num_moe_layers
    L_dense = L - L_moe
    L_attn = cfg.num_attention_layers
    router = router_linear(cfg)
    head = lm_head_linear(cfg)
    n_routed = cfg.moe.num_routed_experts if cfg.moe is not None else 0
    return {
        "embeddings": float(embedding_params(cfg)),
        "attention": float(L_attn * (_sum(attention_linears(cfg)) + attention_sink_params(cfg))),
        "dense_mlp": float(L_dense * _sum(dense_mlp_linears(cfg))),
        "shared_experts": float(L_moe * _sum(shared_expert_linears(cfg))),
        "routed_experts": float(L_moe * n_routed * _sum(routed_expert_linears(cfg))),
        "router": float(L_moe * router.params) if router is not None else 0.0,
        "norms": float(L * norm_params_per_layer(cfg) + final_norm_params(cfg)),
        "lm_head": float(head.params) if head is not None else 0.0,
        "mamba": float((L - L_attn) * (_sum(mamba_linears(cfg)) + mamba_other_params(cfg))),
    }


def total_params(cfg: ModelConfig) -> float:
    """Every stored parameter of the language model (tied embeddings once; a multimodal config's
    vision tower apart: ``vision_params``)."""
    return sum(param_breakdown(cfg).values())


def active_param_breakdown(cfg: ModelConfig, include_embeddings: bool = True) -> dict[str, float]:
    """Parameters one token uses, per component: routed experts count top-k of E.

    Without ``include_embeddings`` the embedding tables drop out, but a tied LM head still counts
    (its matmul reads the whole table), under ``lm_head``.
    """
    out = param_breakdown(cfg)
    if cfg.moe is not None:
        out["routed_experts"] = float(cfg.num_moe_layers * cfg.moe.top_k * _sum(routed_expert_linears(cfg)))
    if not include_embeddings:
        out["embeddings"] = 0.0
        if cfg.tie_embeddings:
            out["lm_head"] = float(lm_head_matmul_params(cfg))
    return out


def active_params(cfg: ModelConfig, include_embeddings: bool = True) -> float:
    """Parameters used per token (see the module docstring for the embedding convention)."""
    return sum(active_param_breakdown(cfg, include_embeddings).values())


# ------------------------------------------------------------------------------------------------
# Stored bytes (a quantized checkpoint's ``quantization_config``, ``rooflinecli.quant``)
# ------------------------------------------------------------------------------------------------

#: bytes of each weight a checkpoint leaves unconverted (its bf16 / fp16), quantized or not
UNCONVERTED_BYTES = 2.0

#: module path of each inventory matrix inside one decoder layer, as the checkpoint names it
_MODULES: dict[str, str] = {
    "q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
    "q_a": "self_attn.q_a_proj", "q_b": "self_attn.q_b_proj", "kv_a": "self_attn.kv_a_proj_with_mqa",
    "kv_b": "self_attn.kv_b_proj",
    "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj",
    "expert_gate": "mlp.experts.0.gate_proj", "expert_up": "mlp.experts.0.up_proj", "expert_down": "mlp.experts.0.down_proj",
    "shared_gate": "mlp.shared_expert_gate", "router": "mlp.gate",
    "in_proj": "mamba.in_proj", "x_proj": "mamba.x_proj", "dt_proj": "mamba.dt_proj", "out_proj": "mamba.out_proj",
}
_MIXTRAL = {"expert_gate": "block_sparse_moe.experts.0.w1", "expert_up": "block_sparse_moe.experts.0.w3",
            "expert_down": "block_sparse_moe.experts.0.w2", "router": "block_sparse_moe.gate"}


#: the layouts that name their modules otherwise: (layer prefix, {inventory name: module path});
#: fused checkpoint matrices (Phi-3's qkv_proj, Falcon's query_key_value) name each of their parts
_LAYOUTS: dict[str, tuple[str, dict[str, str]]] = {
    "phi3": ("model.layers", {"q": "self_attn.qkv_proj", "k": "self_attn.qkv_proj", "v": "self_attn.qkv_proj",
                              "gate": "mlp.gate_up_proj", "up": "mlp.gate_up_proj"}),
    "falcon": ("transformer.h", {"q": "self_attention.query_key_value", "k": "self_attention.query_key_value",
                                 "v": "self_attention.query_key_value", "o": "self_attention.dense",
                                 "up": "mlp.dense_h_to_4h", "down": "mlp.dense_4h_to_h"}),
    "gptj": ("transformer.h", {"q": "attn.q_proj", "k": "attn.k_proj", "v": "attn.v_proj", "o": "attn.out_proj",
                               "up": "mlp.fc_in", "down": "mlp.fc_out"}),
    "gpt_neox": ("gpt_neox.layers", {"q": "attention.query_key_value", "k": "attention.query_key_value",
                                     "v": "attention.query_key_value", "o": "attention.dense",
                                     "up": "mlp.dense_h_to_4h", "down": "mlp.dense_4h_to_h"}),
    "gpt2": ("transformer.h", {"q": "attn.c_attn", "k": "attn.c_attn", "v": "attn.c_attn", "o": "attn.c_proj",
                               "up": "mlp.c_fc", "down": "mlp.c_proj"}),
    "gpt_oss": ("model.layers", {"expert_gate": "mlp.experts.gate_up_proj", "expert_up": "mlp.experts.gate_up_proj",
                                 "expert_down": "mlp.experts.down_proj", "router": "mlp.router"}),
    "llama4_text": ("model.layers", {"gate": "feed_forward.gate_proj", "up": "feed_forward.up_proj", "down": "feed_forward.down_proj",
                                     "expert_gate": "feed_forward.experts.gate_up_proj", "expert_up": "feed_forward.experts.gate_up_proj",
                                     "expert_down": "feed_forward.experts.down_proj", "router": "feed_forward.router",
                                     "shared_gate": "feed_forward.shared_expert.gate_proj", "shared_up": "feed_forward.shared_expert.up_proj",
                                     "shared_down": "feed_forward.shared_expert.down_proj"}),
    "jamba": ("model.layers", {"gate": "feed_forward.gate_proj", "up": "feed_forward.up_proj", "down": "feed_forward.down_proj",
                               "expert_gate": "feed_forward.experts.0.gate_proj", "expert_up": "feed_forward.experts.0.up_proj",
                               "expert_down": "feed_forward.experts.0.down_proj", "router": "feed_forward.router"}),
}


def module_name(cfg: ModelConfig, lin: Linear, layer: int) -> str:
    """The checkpoint's module name of ``lin`` in ``layer`` ("model.layers.3.self_attn.q_proj");
    the LM head is "lm_head". Quantization configs name the modules they leave out this way."""
    if lin.component == "lm_head":
        return "lm_head"
    name = lin.name
    prefix, layout = _LAYOUTS.get(cfg.model_type, ("model.layers", {}))
    if name in layout:
        return f"{prefix}.{layer}.{layout[name]}"
    if cfg.model_type == "mixtral" and name in _MIXTRAL:
        path = _MIXTRAL[name]
    elif lin.component == "shared_experts" and name != "shared_gate":
        shared = "shared_experts" if cfg.model_type.startswith("deepseek") else "shared_expert"
        path = f"mlp.{shared}.{name.removeprefix('shared_')}_proj"
    else:
        path = _MODULES.get(name, name)
    return f"{prefix}.{layer}.{path}"


def _layers_of(cfg: ModelConfig, lin: Linear) -> list[int]:
    if lin.component == "attention":
        return [i for i in range(cfg.num_layers) if cfg.has_attention(i)]
    if lin.component == "mamba":
        return [i for i in range(cfg.num_layers) if not cfg.has_attention(i)]
    if lin.component == "dense_mlp":
        return [i for i in range(cfg.num_layers) if not cfg.is_moe_layer(i)]
    return [i for i in range(cfg.num_layers) if cfg.is_moe_layer(i)]


@lru_cache(maxsize=4096)
def converted_fraction(cfg: ModelConfig, lin: Linear) -> float:
    """Share of ``lin``'s copies (one per layer that has it) the checkpoint stores quantized: 0 for
    an unquantized model, the embedding, norms and routers; the LM head only where the format
    converts it; excluded modules (``quantization_config``'s ignore lists) left out layer by layer."""
    q = cfg.quantization
    if q is None or lin.component in ("embeddings", "norms", "router"):
        return 0.0
    if lin.component == "lm_head":
        tied = cfg.tie_embeddings  # the tied table is the embedding: stored 16-bit
        return 1.0 if q.lm_head and not tied and not q.is_excluded("lm_head") else 0.0
    layers = _layers_of(cfg, lin)
    if not layers:
        return 0.0
    return sum(not q.is_excluded(module_name(cfg, lin, i)) for i in layers) / len(layers)


def stored_bytes_per_weight(cfg: ModelConfig, lin: Linear) -> float:
    """Bytes one weight of ``lin`` takes in the checkpoint, averaged over its copies: the format's
    data, scales and zero points where converted, 16-bit elsewhere (biases are always 16-bit)."""
    f = converted_fraction(cfg, lin)
    if f == 0.0:
        return UNCONVERTED_BYTES
    return f * cfg.quantization.bytes_per_param(lin.d_in, lin.d_out) + (1.0 - f) * UNCONVERTED_BYTES


def stored_weight_bytes(cfg: ModelConfig) -> dict[str, float]:
    """Bytes of every stored weight per component (keys: ``COMPONENTS``), the checkpoint's own
    format (16-bit without a ``quantization_config``)."""
    b16 = UNCONVERTED_BYTES

    def of(linears, copies: float) -> float:
        total = 0.0
        for lin in linears:
            weights = lin.count * lin.d_in * lin.d_out
            total += weights * stored_bytes_per_weight(cfg, lin) + (lin.count * lin.d_out * b16 if lin.bias else 0.0)
        return copies * total

    L, Lm, L_attn = cfg.num_layers, cfg.num_moe_layers, cfg.num_attention_layers
    head = lm_head_linear(cfg)
    n_routed = cfg.moe.num_routed_experts if cfg.moe is not None else 0
    params = param_breakdown(cfg)
    return {
        "embeddings": params["embeddings"] * b16,
        "attention": of(attention_linears(cfg), L_attn) + L_attn * attention_sink_params(cfg) * b16,
        "dense_mlp": of(dense_mlp_linears(cfg), L - Lm),
        "shared_experts": of(shared_expert_linears(cfg), Lm),
        "routed_experts": of(routed_expert_linears(cfg), Lm * n_routed),
        "router": params["router"] * b16,
        "norms": params["norms"] * b16,
        "lm_head": of((head,), 1) if head is not None else 0.0,
        "mamba": of(mamba_linears(cfg), L - L_attn) + (L - L_attn) * mamba_other_params(cfg) * b16,
    }
