"""Hugging Face ``config.json`` -> ``ModelConfig``, from a local path, with no network.

Model types: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v2,
deepseek_v3, gpt2. Field names and defaults follow the ``transformers`` config classes of each
type. Every problem (missing file, not JSON, unknown model type, missing field, wrong type,
non-positive value, inconsistent heads) is ONE ``RooflineError`` line naming the file and the field.

A config may carry an extra ``"_rooflinecli"`` object (the built-in presets do)::

    "_rooflinecli": {"id": "llama-3-8b", "display_name": "Llama 3 8B",
                     "source_url": "https://huggingface.co/...", "published_total_params": 8.03e9,
                     "published_active_params": 8.03e9, "note": "..."}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rooflinecli.errors import RooflineError, has_control, one_line, parse_json_text, read_user_file, unknown_name_error
from rooflinecli.models import MLAConfig, ModelConfig, MoEConfig, RopeScaling

MODEL_TYPES: tuple[str, ...] = (
    "deepseek_v2",
    "deepseek_v3",
    "gpt2",
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
)

#: activations whose MLP is gated (gate * act(up) -> down) in these architectures
_GATED_TYPES = frozenset(MODEL_TYPES) - {"gpt2"}

_MISSING = object()

#: a model config is a few KB of JSON; over 4 MB is not one
MAX_CONFIG_FILE_BYTES = 4_000_000

#: upper bounds on config integers, checked before any work: a layer or expert count of 1e9 would
#: make every per-layer loop and table hang. Generous beside the largest real models (DeepSeek-V3:
#: 61 layers, 256 experts, 129,280 vocab; Llama-3.1-405B: 126 layers, 16,384 hidden).
INT_MAX: dict[str, int] = {
    "num_hidden_layers": 10_000, "n_layer": 10_000, "max_window_layers": 10_000, "first_k_dense_replace": 10_000,
    "num_attention_heads": 100_000, "n_head": 100_000, "num_key_value_heads": 100_000,
    "num_local_experts": 100_000, "num_experts": 100_000, "n_routed_experts": 100_000, "n_shared_experts": 100_000,
    "num_experts_per_tok": 100_000, "decoder_sparse_step": 10_000, "moe_layer_freq": 10_000,
}
#: every other config integer (widths, vocab, context): below 2**40 (about 1.1e12)
INT_MAX_DEFAULT = 2**40
#: the longest string field (an id, a display name, a note)
MAX_STRING_CHARS = 1000
#: every config float (rope_theta): finite and at most 1e30
FLOAT_MAX = 1e30


class _Fields:
    """Typed, validated access to one config's fields; errors name the file and the key."""

    def __init__(self, raw: Mapping[str, Any], where: str, prefix: str = ""):
        self.raw = raw
        self.where = where
        self.prefix = prefix  # "_rooflinecli." for the fields of that block

    def fail(self, key: str, what: str) -> RooflineError:
        return RooflineError(f"{self.where}: field '{self.prefix}{key}' {what}")

    def get(self, key: str, default: Any = _MISSING) -> Any:
        value = self.raw.get(key, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise self.fail(key, "is missing")
            return default
        return value

    def int_(self, key: str, default: Any = _MISSING, *, positive: bool = True, nullable: bool = False) -> Any:
        value = self.get(key, default)
        if value is None and (nullable or default is None):
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {json.dumps(value)}")
        if positive and value <= 0:
            raise self.fail(key, f"must be positive, got {value}")
        if not positive and value < 0:
            raise self.fail(key, f"must not be negative, got {value}")
        limit = INT_MAX.get(key, INT_MAX_DEFAULT)
        if value > limit:
            raise self.fail(key, f"is absurd: {value} is above the limit of {limit:,}")
        return value

    def float_(self, key: str, default: Any = _MISSING) -> Any:
        value = self.get(key, default)
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"must be a number, got {json.dumps(value)}")
        if not value > 0:
            raise self.fail(key, f"must be positive, got {value}")
        if not value <= FLOAT_MAX:
            raise self.fail(key, f"is absurd: {value:g} is above the limit of {FLOAT_MAX:g}")
        return float(value)

    def bool_(self, key: str, default: Any = _MISSING) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {json.dumps(value)}")
        return value

    def str_(self, key: str, default: Any = _MISSING) -> Any:
        value = self.get(key, default)
        if value is None and default is None:
            return None
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {json.dumps(value)}")
        if has_control(value):
            raise self.fail(key, "must not hold control characters or terminal escape codes")
        if len(value) > MAX_STRING_CHARS:
            raise self.fail(key, f"is {len(value):,} characters long; the limit is {MAX_STRING_CHARS:,}")
        return value

    def int_list(self, key: str, default: Any = _MISSING) -> tuple[int, ...]:
        value = self.get(key, default)
        if value is None:
            return ()
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise self.fail(key, f"must be a list of integers, got {json.dumps(value)}")
        return tuple(value)


# ------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------


def read_config_json(path: str | Path) -> dict[str, Any]:
    """The JSON object in ``path``; missing file, unreadable file or non-object is one line."""
    path = Path(path)
    raw = parse_json_text(read_user_file(path, "model config file", MAX_CONFIG_FILE_BYTES), str(path))
    if not isinstance(raw, dict):
        raise RooflineError(f"{path}: a model config must be a JSON object, got {type(raw).__name__}")
    return raw


def load_hf_config(path: str | Path, name: str | None = None) -> ModelConfig:
    """Parse the Hugging Face ``config.json`` at ``path``.

    The model's name is ``name``, else the ``_rooflinecli.id``, else ``_name_or_path``, else the
    folder name (``.../Llama-3-8B/config.json`` -> ``Llama-3-8B``) or the file stem.
    """
    path = Path(path)
    raw = read_config_json(path)
    if name is None:
        p = path.resolve()
        name = p.parent.name if p.stem == "config" and p.parent.name else p.stem
        if isinstance(raw.get("_name_or_path"), str) and raw["_name_or_path"]:
            name = raw["_name_or_path"].rstrip("/").split("/")[-1]
        name = one_line(name)[:MAX_STRING_CHARS] or "model"  # a folder or path name is data: no control codes
    return parse_hf_config(raw, where=str(path), name=name, source=str(path))


# ------------------------------------------------------------------------------------------------
# Parsing
# ------------------------------------------------------------------------------------------------


def parse_hf_config(raw: Mapping[str, Any], where: str, name: str, source: str | None = None) -> ModelConfig:
    """Validate a config.json object and build its ``ModelConfig`` (errors name ``where``)."""
    f = _Fields(raw, where)
    model_type = f.get("model_type")
    if not isinstance(model_type, str):
        raise f.fail("model_type", f"must be a string, got {json.dumps(model_type)}")
    if model_type not in MODEL_TYPES:
        err = unknown_name_error("model_type", model_type, MODEL_TYPES)
        raise RooflineError(f"{where}: field 'model_type': {err}")

    meta = _meta(f)
    if meta.get("id"):
        name = meta["id"]
    if model_type == "gpt2":
        cfg = _gpt2(f, name)
    else:
        cfg = _decoder(f, model_type, name)
    from rooflinecli.quant import parse_quantization

    if cfg.position_embedding == "rope":
        cfg = _with_rope_scaling(f, cfg)
    return cfg.with_(
        quantization=parse_quantization(raw.get("quantization_config"), where),
        source=source or where,
        display_name=meta.get("display_name") or name,
        published_params=meta.get("published_total_params"),
        published_active_params=meta.get("published_active_params"),
        source_url=meta.get("source_url", ""),
        notes=(meta["note"],) if meta.get("note") else (),
    )


def _meta(f: _Fields) -> dict[str, Any]:
    block = f.raw.get("_rooflinecli")
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise f.fail("_rooflinecli", "must be an object")
    m = _Fields(block, f.where, "_rooflinecli.")
    known = {"id", "display_name", "source_url", "published_total_params", "published_active_params", "note"}
    for key in block:
        if key not in known:
            raise RooflineError(f"{f.where}: field '_rooflinecli.{key}' is not known; known: {', '.join(sorted(known))}")
    out: dict[str, Any] = {}
    for key in ("id", "display_name", "source_url", "note"):
        if key in block:
            out[key] = m.str_(key)
    for key in ("published_total_params", "published_active_params"):
        if key in block:
            out[key] = m.float_(key)
    return out


def _check_heads(f: _Fields, heads: int, kv_heads: int, heads_key: str = "num_attention_heads") -> None:
    if kv_heads > heads or heads % kv_heads:
        raise f.fail(
            "num_key_value_heads",
            f"({kv_heads}) must divide {heads_key} ({heads})",
        )


def _gpt2(f: _Fields, name: str) -> ModelConfig:
    d = f.int_("n_embd")
    heads = f.int_("n_head")
    if d % heads:
        raise f.fail("n_embd", f"({d}) must be divisible by n_head ({heads})")
    inner = f.int_("n_inner", None)
    return ModelConfig(
        name=name,
        model_type="gpt2",
        source="",
        num_layers=f.int_("n_layer"),
        hidden_size=d,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=d // heads,
        intermediate_size=inner if inner is not None else 4 * d,
        vocab_size=f.int_("vocab_size"),
        gated_mlp=False,
        activation=f.str_("activation_function", "gelu_new"),
        tie_embeddings=f.bool_("tie_word_embeddings", True),
        max_position_embeddings=f.int_("n_positions"),
        rope_theta=None,
        position_embedding="learned",
        norm="layernorm",
        attention_bias=True,
        attention_out_bias=True,
        mlp_bias=True,
    )


def _decoder(f: _Fields, model_type: str, name: str) -> ModelConfig:
    d = f.int_("hidden_size")
    L = f.int_("num_hidden_layers")
    heads = f.int_("num_attention_heads")
    kv_heads = f.int_("num_key_value_heads", heads, nullable=True)
    if kv_heads is None:
        kv_heads = heads
    is_deepseek = model_type.startswith("deepseek")
    mla = _mla(f) if is_deepseek else None
    if mla is not None:
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    else:
        _check_heads(f, heads, kv_heads)
        head_dim = f.int_("head_dim", None)
        if head_dim is None:
            if d % heads:
                raise f.fail("hidden_size", f"({d}) must be divisible by num_attention_heads ({heads}) when head_dim is not given")
            head_dim = d // heads

    # Qwen2/Qwen2-MoE always put biases on q/k/v (no config key); others read attention_bias.
    attention_bias = True if model_type in ("qwen2", "qwen2_moe") else f.bool_("attention_bias", False)
    attention_out_bias = attention_bias if model_type in ("llama", "deepseek_v2", "deepseek_v3") else False
    window, window_layers = _sliding_window(f, model_type, L)
    moe = _moe(f, model_type, L)
    intermediate = f.int_("intermediate_size")
    return ModelConfig(
        name=name,
        model_type=model_type,
        source="",
        num_layers=L,
        hidden_size=d,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=f.int_("vocab_size"),
        gated_mlp=model_type in _GATED_TYPES,
        activation=f.str_("hidden_act", "silu"),
        tie_embeddings=f.bool_("tie_word_embeddings", False),
        max_position_embeddings=f.int_("max_position_embeddings", 2048 if model_type == "llama" else 4096),
        rope_theta=f.float_("rope_theta", 10000.0),
        position_embedding="rope",
        norm="rmsnorm",
        attention_bias=attention_bias,
        attention_out_bias=attention_out_bias,
        mlp_bias=f.bool_("mlp_bias", False) if model_type == "llama" else False,
        qk_norm=model_type in ("qwen3", "qwen3_moe"),
        mla=mla,
        moe=moe,
        sliding_window=window,
        sliding_window_layers=window_layers,
        router_bias=model_type == "deepseek_v3" and f.str_("topk_method", "noaux_tc") == "noaux_tc",
    )


ROPE_TYPES: tuple[str, ...] = ("default", "dynamic", "linear", "llama3", "longrope", "yarn")


def _with_rope_scaling(f: _Fields, cfg: ModelConfig) -> ModelConfig:
    """``cfg`` with its ``rope_scaling`` (``type`` or ``rope_type``; "su" is longrope's old name,
    "mrope" Qwen2-VL's unscaled multimodal RoPE) read and checked field by field.
    ``max_position_embeddings`` becomes the context the scaled model covers: the larger of the
    config's own and original x factor."""
    block = f.raw.get("rope_scaling")
    if block is None or block == {}:
        return cfg
    if not isinstance(block, dict):
        raise f.fail("rope_scaling", f"must be an object or null, got {json.dumps(block)[:200]}")
    r = _Fields(block, f.where, "rope_scaling.")
    kinds = {k: block[k] for k in ("type", "rope_type") if k in block}
    if not kinds:
        raise r.fail("rope_type", "is missing (or 'type')")
    if len(set(map(str, kinds.values()))) > 1:
        raise r.fail("type", f"({json.dumps(kinds['type'])}) and 'rope_scaling.rope_type' ({json.dumps(kinds['rope_type'])}) disagree")
    key, kind = next(iter(kinds.items()))
    kind = r.str_(key)
    kind = {"su": "longrope", "mrope": "default"}.get(kind, kind)
    if kind not in ROPE_TYPES:
        err = unknown_name_error("RoPE scaling type", kind, ROPE_TYPES)
        raise RooflineError(f"{f.where}: field 'rope_scaling.{key}': {err}")
    if kind == "default":
        return cfg
    max_pos = cfg.max_position_embeddings
    if kind == "llama3":  # Llama 3.1's max_position_embeddings is already the scaled context
        original = r.int_("original_max_position_embeddings")
    else:
        original = r.int_("original_max_position_embeddings", max_pos)
    factor = r.get("factor", None if kind != "longrope" else max_pos / original)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise r.fail("factor", f"must be a number, got {json.dumps(factor)}")
    if not 1.0 <= factor <= 1e6:
        raise r.fail("factor", f"must be in [1, 1e6] (a stretch of the context), got {factor:g}")
    if kind == "llama3":
        low, high = r.float_("low_freq_factor"), r.float_("high_freq_factor")
        if not high > low:
            raise r.fail("high_freq_factor", f"({high:g}) must be above low_freq_factor ({low:g})")
    if kind == "yarn":
        fast, slow = r.float_("beta_fast", 32.0), r.float_("beta_slow", 1.0)
        if not fast > slow:
            raise r.fail("beta_fast", f"({fast:g}) must be above beta_slow ({slow:g})")
        for key in ("mscale", "mscale_all_dim", "attention_factor"):
            value = block.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1e3):
                raise r.fail(key, f"must be a number in [0, 1000], got {json.dumps(value)}")
    if kind == "longrope":
        half = (cfg.rotary_dim or cfg.head_dim) // 2
        for key in ("short_factor", "long_factor"):
            value = block.get(key)
            if (not isinstance(value, list) or len(value) != half
                    or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1e6 for v in value)):
                raise r.fail(key, f"must be a list of {half} positive numbers (half the rotary dim), got {json.dumps(value)[:80]}")
    scaling = RopeScaling(kind=kind, factor=float(factor), original_context=original)
    covered = max(max_pos, int(round(original * factor)))
    return cfg.with_(rope_scaling=scaling, max_position_embeddings=covered)


def _mla(f: _Fields) -> MLAConfig:
    return MLAConfig(
        q_lora_rank=f.int_("q_lora_rank", None, nullable=True),
        kv_lora_rank=f.int_("kv_lora_rank"),
        qk_nope_head_dim=f.int_("qk_nope_head_dim"),
        qk_rope_head_dim=f.int_("qk_rope_head_dim"),
        v_head_dim=f.int_("v_head_dim"),
    )


def _sliding_window(f: _Fields, model_type: str, L: int) -> tuple[int | None, tuple[int, ...]]:
    """(window, layer indices using it). Mistral/Mixtral: every layer when ``sliding_window`` is
    set. Qwen2/Qwen3: only with ``use_sliding_window``, layers >= ``max_window_layers``. An explicit
    ``layer_types`` list ("sliding_attention" / "full_attention") overrides both."""
    if model_type in ("llama", "gpt2") or model_type.startswith("deepseek"):
        return None, ()
    window = f.int_("sliding_window", None)
    if model_type in ("mistral", "mixtral"):
        layers = tuple(range(L)) if window is not None else ()
    else:  # qwen2, qwen2_moe, qwen3, qwen3_moe
        if not f.bool_("use_sliding_window", False):
            window = None
        first = f.int_("max_window_layers", L, positive=False)
        layers = tuple(i for i in range(L) if i >= first) if window is not None else ()
    types = f.raw.get("layer_types")
    if types is not None:
        allowed = ("full_attention", "sliding_attention")
        if not isinstance(types, list) or len(types) != L:
            raise f.fail("layer_types", f"must be a list of {L} strings (one per layer: num_hidden_layers)")
        for i, t in enumerate(types):
            if t not in allowed:
                raise f.fail("layer_types", f"entry {i} is {json.dumps(t)}; allowed: {', '.join(allowed)}")
        layers = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
        if layers and window is None:
            raise f.fail("sliding_window", "must be set when layer_types lists sliding_attention layers")
    if not layers:
        window = None
    return window, layers


def _moe(f: _Fields, model_type: str, L: int) -> MoEConfig | None:
    if model_type == "mixtral":
        E = f.int_("num_local_experts")
        k = f.int_("num_experts_per_tok")
        width = f.int_("intermediate_size")
        dense: tuple[int, ...] = ()
        shared, shared_width, gate = 0, 0, False
    elif model_type in ("qwen2_moe", "qwen3_moe"):
        E = f.int_("num_experts")
        k = f.int_("num_experts_per_tok")
        width = f.int_("moe_intermediate_size")
        step = f.int_("decoder_sparse_step", 1)
        mlp_only = set(f.int_list("mlp_only_layers", []))
        if any(not 0 <= i < L for i in mlp_only):
            raise f.fail("mlp_only_layers", f"lists layer {max(mlp_only, key=lambda i: abs(i))}; layers are 0 to {L - 1}")
        dense = tuple(i for i in range(L) if i in mlp_only or (i + 1) % step != 0)
        shared_width = f.int_("shared_expert_intermediate_size", 0, positive=False) if model_type == "qwen2_moe" else 0
        shared = 1 if shared_width else 0
        gate = bool(shared)
    elif model_type in ("deepseek_v2", "deepseek_v3"):
        E = f.int_("n_routed_experts", None)
        if E is None:
            return None
        k = f.int_("num_experts_per_tok")
        width = f.int_("moe_intermediate_size")
        first = f.int_("first_k_dense_replace", 0, positive=False)
        if first > L:  # 100 on a 61-layer DeepSeek-V3 showed "61 dense, 0 MoE" beside 256 routed experts
            raise f.fail("first_k_dense_replace", f"({first}) is more than the {L} layers (num_hidden_layers)")
        freq = f.int_("moe_layer_freq", 1)
        dense = tuple(i for i in range(L) if not (i >= first and i % freq == 0))
        shared = f.int_("n_shared_experts", 0, positive=False, nullable=True) or 0
        shared_width = width if shared else 0
        gate = False
    else:
        return None
    if k > E:
        raise f.fail("num_experts_per_tok", f"({k}) must not exceed the number of experts ({E})")
    return MoEConfig(
        num_routed_experts=E,
        top_k=k,
        expert_intermediate_size=width,
        num_shared_experts=shared,
        shared_expert_intermediate_size=shared_width,
        dense_layers=dense,
        shared_expert_gate=gate,
    )
