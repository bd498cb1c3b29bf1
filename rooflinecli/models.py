"""Model configs: frozen dataclasses built from presets (``model_presets/*.json``, stored in the
Hugging Face ``config.json`` format) or from a user's own ``config.json`` path, with no network.

Parsing lives in ``rooflinecli.hf_config``; parameter counting in ``rooflinecli.params``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a name in an annotation: rooflinecli.quant is read only for a config that has one
    from rooflinecli.quant import WeightQuant


@dataclass(frozen=True)
class MLAConfig:
    """Multi-head latent attention (DeepSeek-V2/V3)."""

    q_lora_rank: int | None  # None: queries use a plain d -> H*(nope+rope) projection
    kv_lora_rank: int  # latent width cached per token (c_KV)
    qk_nope_head_dim: int
    qk_rope_head_dim: int  # decoupled RoPE key, cached per token beside the latent
    v_head_dim: int


@dataclass(frozen=True)
class MoEConfig:
    """Mixture of experts: routed experts (``top_k`` of them per token), shared experts run for
    every token, and the layers that keep a dense MLP."""

    num_routed_experts: int
    top_k: int  # routed experts per token
    expert_intermediate_size: int  # FFN width of one routed expert
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0  # FFN width of ONE shared expert
    dense_layers: tuple[int, ...] = ()  # layer indices with a dense MLP instead of experts
    shared_expert_gate: bool = False  # Qwen2-MoE: a d -> 1 sigmoid gate on the shared expert


@dataclass(frozen=True)
class CompressedAttention:
    """DeepSeek-V4-style compressed attention (a what-if): ``ratio`` tokens per cached entry,
    ``top_k`` entries attended per query (None: all, as in HCA), plus an uncompressed local
    ``window`` of recent tokens."""

    ratio: float = 4.0
    top_k: int | None = 512
    window: int = 128


@dataclass(frozen=True)
class MambaConfig:
    """Mamba (selective state-space) mixer layers of a hybrid (Jamba): every layer not in
    ``ModelConfig.attention_layers`` runs one instead of attention. Per sequence each such layer
    keeps a state of inner x (d_state + d_conv) elements instead of a KV cache."""

    d_state: int  # N: state size per inner channel
    d_conv: int  # causal conv kernel width
    expand: int  # inner width = expand * hidden_size
    dt_rank: int
    conv_bias: bool = True
    proj_bias: bool = False
    inner_norms: bool = True  # Jamba's RMSNorms on dt, B and C


@dataclass(frozen=True)
class VisionTower:
    """A multimodal config's vision encoder: its parameters are reported, its cost per image is
    left out of every time (the language model is what the analysis times)."""

    model_type: str
    params: float | None  # None: this encoder's layout is not one we count
    note: str = ""


@dataclass(frozen=True)
class RopeScaling:
    """A config's ``rope_scaling``: RoPE stretched ``factor`` times over the
    ``original_context`` it was pre-trained at (``max_position_embeddings`` is then the context
    the scaled model covers)."""

    kind: str  # "linear" | "dynamic" | "yarn" | "llama3" | "longrope"
    factor: float
    original_context: int | None  # None: not given (linear scaling: max_position_embeddings is the scaled context)

    @property
    def label(self) -> str:
        return f"{self.kind} x{self.factor:g}" + (f" over {self.original_context:,}" if self.original_context else "")


@dataclass(frozen=True)
class ModelConfig:
    """One model's architecture as the cost formulas read it (a preset or a user's config.json)."""

    name: str
    model_type: str
    source: str  # "preset:<file>" or the config path
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width
    vocab_size: int
    gated_mlp: bool = True  # SwiGLU-style gate+up+down (3 matrices) vs up+down (2)
    activation: str = "silu"
    tie_embeddings: bool = False
    max_position_embeddings: int = 8192
    rope_theta: float | None = 10000.0
    position_embedding: str = "rope"  # "rope" | "learned"
    norm: str = "rmsnorm"  # "rmsnorm" | "layernorm"
    attention_bias: bool = False  # biases on q/k/v (and o for GPT-2)
    attention_out_bias: bool = False  # bias on the output projection (GPT-2; Llama when attention_bias)
    mlp_bias: bool = False
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3)
    mla: MLAConfig | None = None
    moe: MoEConfig | None = None
    sliding_window: int | None = None
    sliding_window_layers: tuple[int, ...] = ()  # indices of layers that use the window
    #: "sliding" (each token attends the last ``sliding_window`` tokens) or "chunked" (Llama-4: the
    #: token at position p attends the (p mod C) + 1 tokens of its own chunk of C = ``sliding_window``,
    #: ``formulas.chunked_attended_tokens``); both allocate KV for min(N, window) tokens per sequence
    window_kind: str = "sliding"
    compressed: CompressedAttention | None = None
    published_params: float | None = None  # total the publisher states, for reference
    router_bias: bool = False  # DeepSeek-V3: per-expert score-correction bias (E params per layer)
    display_name: str = ""
    published_active_params: float | None = None  # active per token the publisher states
    source_url: str = ""  # where the preset's config.json was published
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: the checkpoint's ``quantization_config`` (None: 16-bit weights, or whatever --weight-dtype says)
    quantization: WeightQuant | None = None
    rope_scaling: RopeScaling | None = None
    rotary_dim: int | None = None  # dims RoPE rotates per head when not all (partial rotary); None: the head dim
    norms_per_layer: int = 2  # pre-attention and pre-MLP; Gemma-2/3: 4 (post norms too); parallel blocks: 1
    lm_head_bias: bool = False  # GPT-J
    attention_sinks: bool = False  # gpt-oss: one learned sink logit per head and layer (no cache)
    parallel_residual: bool = False  # attention and MLP read the same input (GPT-J, NeoX, Falcon): same costs
    mamba: MambaConfig | None = None
    attention_layers: tuple[int, ...] | None = None  # layers with attention when not all (hybrids); the rest run Mamba
    vision: VisionTower | None = None  # multimodal: the language model is this config; the vision tower is reported

    @property
    def attention_kind(self) -> str:
        """"mla", "mqa" (one KV head), "mha" (KV heads = heads) or "gqa"."""
        if self.mla is not None:
            return "mla"
        if self.num_kv_heads == 1 and self.num_heads > 1:
            return "mqa"
        if self.num_kv_heads == self.num_heads:
            return "mha"
        return "gqa"

    def is_moe_layer(self, layer: int) -> bool:
        return self.moe is not None and layer not in self.moe.dense_layers

    @property
    def num_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.num_layers))

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    def has_attention(self, layer: int) -> bool:
        return self.attention_layers is None or layer in self.attention_layers

    @property
    def num_attention_layers(self) -> int:
        return self.num_layers if self.attention_layers is None else len(self.attention_layers)

    def uses_window(self, layer: int) -> bool:
        return self.sliding_window is not None and layer in self.sliding_window_layers

    def with_(self, **changes) -> "ModelConfig":
        return replace(self, **changes)
