"""Hugging Face ``config.json`` -> ``ModelConfig``, from a local path, with no network.

Model types: ``MODEL_TYPES`` (Llama, Mistral/Mixtral, Qwen2/3 and their MoE, DeepSeek-V2/V3,
GPT-2, Gemma 1/2/3, Phi-3/4, Falcon, GPT-J, GPT-NeoX, gpt-oss, Jamba, Llama-4), and the multimodal
``MULTIMODAL_TYPES`` whose ``text_config`` is the language model. Field names and defaults follow
the ``transformers`` config classes of each type; ``rope_scaling`` is read here, a
``quantization_config`` by ``rooflinecli.quant``. Every problem (missing file, not JSON, a key given
twice, unknown model type, missing field, wrong type, non-positive value, inconsistent heads, a
layout the model cannot represent) is ONE ``RooflineError`` line naming the file and the field.

A config may carry an extra ``"_rooflinecli"`` object (the built-in presets do)::

    "_rooflinecli": {"id": "llama-3-8b", "display_name": "Llama 3 8B",
                     "source_url": "https://huggingface.co/...", "published_total_params": 8.03e9,
                     "published_active_params": 8.03e9, "note": "..."}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rooflinecli.errors import RooflineError, has_control, one_line, parse_json_text, read_user_file, unknown_name_error
from rooflinecli.models import MLAConfig, ModelConfig, MoEConfig, RopeScaling

MODEL_TYPES: tuple[str, ...] = (
    "deepseek_v2",
    "deepseek_v3",
    "falcon",
    "gemma",
    "gemma2",
    "gemma3_text",
    "gpt2",
    "gpt_neox",
    "gpt_oss",
    "gptj",
    "jamba",
    "llama",
    "llama4_text",
    "mistral",
    "mixtral",
    "phi3",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
)

#: multimodal configs: the language model is the ``text_config`` (or, for Qwen2-VL, the top level);
#: the vision tower (``vision_config``) is reported, its cost left out
MULTIMODAL_TYPES: dict[str, str] = {
    "gemma3": "gemma3_text",
    "llama4": "llama4_text",
    "llava": "llama",
    "llava_next": "llama",
    "mistral3": "mistral",
    "qwen2_vl": "qwen2",
    "qwen2_5_vl": "qwen2",
}
#: defaults of the transformers config classes that published multimodal configs rely on (Llava's
#: text_config gives little beyond its vocab; Gemma-3's omits vocab and context)
_TEXT_DEFAULTS: dict[str, dict[str, float]] = {
    "llama": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
              "vocab_size": 32000, "max_position_embeddings": 2048},
    "gemma3_text": {"vocab_size": 262208, "max_position_embeddings": 131072, "rope_theta": 1_000_000.0},
    "llama4_text": {"hidden_size": 5120, "intermediate_size": 8192, "num_hidden_layers": 48, "num_attention_heads": 40,
                    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 202048, "max_position_embeddings": 131072,
                    "rope_theta": 500_000.0},
}
#: text_config model types that share a layout above
_TEXT_ALIASES: dict[str, str] = {"qwen2_vl_text": "qwen2", "qwen2_5_vl_text": "qwen2"}

#: activations whose MLP is gated (gate * act(up) -> down) in these architectures
_GATED_TYPES = frozenset(MODEL_TYPES) - {"gpt2", "falcon", "gptj", "gpt_neox"}
_GEMMA = ("gemma", "gemma2", "gemma3_text")

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
    "num_kv_heads": 100_000, "experts_per_token": 100_000, "attn_layer_period": 10_000, "expert_layer_period": 10_000,
    "sliding_window_pattern": 10_000, "num_ln_in_parallel_attn": 10, "mamba_expand": 1_000, "mamba_d_conv": 1_000,
    "interleave_moe_layer_step": 10_000, "no_rope_layer_interval": 10_000, "spatial_merge_size": 1_000,
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
    meta = _meta(f)
    if meta.get("id"):
        name = meta["id"]
    vision = None
    if model_type in MULTIMODAL_TYPES:
        f, model_type, vision = _text_model(f, model_type)
    if model_type not in MODEL_TYPES:
        err = unknown_name_error("model_type", model_type, MODEL_TYPES + tuple(MULTIMODAL_TYPES))
        raise RooflineError(f"{where}: field '{f.prefix}model_type': {err}")
    builders = {"gpt2": _gpt2, "falcon": _falcon, "gptj": _gptj, "gpt_neox": _gpt_neox}
    if model_type in builders:
        cfg = builders[model_type](f, name)
    else:
        cfg = _decoder(f, model_type, name)
    if vision is not None:
        cfg = cfg.with_(vision=vision)
    if cfg.position_embedding == "rope":
        cfg = _with_rope_scaling(f, cfg)  # the language model's own fields (a multimodal config's text_config)
    return cfg.with_(
        quantization=_quantization(raw.get("quantization_config"), where),
        source=source or where,
        display_name=meta.get("display_name") or name,
        published_params=meta.get("published_total_params"),
        published_active_params=meta.get("published_active_params"),
        source_url=meta.get("source_url", ""),
        notes=cfg.notes + ((meta["note"],) if meta.get("note") else ()),
    )


def _quantization(raw: Any, where: str):
    """The config's ``quantization_config`` read (``rooflinecli.quant``, imported only for a config
    that has one), or None."""
    if raw is None:
        return None
    from rooflinecli.quant import parse_quantization

    return parse_quantization(raw, where)


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


def _text_model(f: _Fields, model_type: str) -> tuple[_Fields, str, Any]:
    """(fields of the language model, its model_type, the vision tower) of a multimodal config."""
    from rooflinecli.models import VisionTower

    text = f.raw.get("text_config")
    if text is None and model_type in ("qwen2_vl", "qwen2_5_vl"):
        tf, text_type = f, "qwen2"  # Qwen2-VL keeps the language model's fields at the top level
    else:
        if not isinstance(text, dict):
            raise f.fail("text_config", f"must be an object (the language model of this {model_type} config)")
        text_type = text.get("model_type", MULTIMODAL_TYPES[model_type])
        defaults = _TEXT_DEFAULTS.get(text_type, {}) if model_type != "mistral3" else {}
        taken = sorted(k for k in defaults if k not in text)
        if taken:  # published multimodal configs leave these to the transformers class
            text = {**defaults, **text}
        tf = _Fields(text, f.where, f.prefix + "text_config.")
        if not isinstance(text_type, str):
            raise tf.fail("model_type", f"must be a string, got {json.dumps(text_type)}")
        text_type = _TEXT_ALIASES.get(text_type, text_type)
    vc = f.raw.get("vision_config")
    if vc is not None and not isinstance(vc, dict):
        raise f.fail("vision_config", "must be an object")
    params, what = _vision_params(_Fields(vc or {}, f.where, f.prefix + "vision_config."), model_type, tf, f)
    note = (f"vision tower ({what}) reported, not timed: costs are the language model's, per token"
            if params is not None else f"vision tower ({what}) neither counted nor timed: costs are the language model's, per token")
    if text is not None and taken:
        note += "; text_config fields not given take transformers' defaults: " + ", ".join(f"{k} {defaults[k]:g}" for k in taken)
    return tf, text_type, VisionTower(model_type=model_type, params=params, note=note)


def _vision_params(v: _Fields, model_type: str, text: _Fields, top: _Fields) -> tuple[float | None, str]:
    """Parameters of the vision encoder and its projector into the language model: CLIP / SigLIP
    ViTs (Llava, Gemma-3), Pixtral (Llava, Mistral-3), Llama-4's ViT and Qwen2-VL's ViT; None for
    a layout not counted. ``top`` is the multimodal config itself (the projector's own fields)."""
    if not v.raw:
        return None, "no vision_config"
    d_text = text.raw.get("hidden_size")
    if model_type == "qwen2_vl":
        e, depth = v.int_("embed_dim"), v.int_("depth")
        mlp = int(e * v.float_("mlp_ratio", 4.0))
        p, t, c, m = v.int_("patch_size", 14), v.int_("temporal_patch_size", 2), v.int_("in_chans", 3), v.int_("spatial_merge_size", 2)
        out = v.int_("hidden_size", d_text)
        block = 3 * e * e + 3 * e + e * e + e + 2 * e * mlp + mlp + e + 4 * e
        merger = 2 * e + (e * m * m) ** 2 + e * m * m + e * m * m * out + out
        return float(depth * block + c * t * p * p * e + merger), f"Qwen2-VL ViT, {depth} blocks of width {e}"
    if model_type == "qwen2_5_vl":  # RMSNorms, a gated MLP with biases, out_hidden_size out of the merger
        e, i, depth = v.int_("hidden_size"), v.int_("intermediate_size"), v.int_("depth")
        p, t, m = v.int_("patch_size", 14), v.int_("temporal_patch_size", 2), v.int_("spatial_merge_size", 2)
        c = v.int_("in_channels", v.raw.get("in_chans", 3))
        out = v.int_("out_hidden_size", d_text)
        block = 3 * e * e + 3 * e + e * e + e + 2 * (e * i + i) + i * e + e + 2 * e
        merger = e + (e * m * m) ** 2 + e * m * m + e * m * m * out + out
        return float(depth * block + c * t * p * p * e + merger), f"Qwen2.5-VL ViT, {depth} blocks of width {e}"
    if model_type == "llama4":
        return _llama4_vision_params(v, d_text)
    vt = v.raw.get("model_type", "")
    if vt not in ("clip_vision_model", "siglip_vision_model", "pixtral"):
        return None, f"model_type {json.dumps(vt)}"
    if vt == "pixtral":
        return _pixtral_params(v, model_type, d_text, top)
    h, i, L = v.int_("hidden_size"), v.int_("intermediate_size"), v.int_("num_hidden_layers")
    p, size, c = v.int_("patch_size"), v.int_("image_size"), v.int_("num_channels", 3)
    patches = (size // p) ** 2
    layers = L * (4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h)  # q, k, v, o; fc1, fc2; two LayerNorms
    if vt == "clip_vision_model":  # conv without bias, class token, pre- and post-LayerNorm
        embed = c * p * p * h + h + (patches + 1) * h + 4 * h
    else:  # SigLIP: conv with bias, no class token, post-LayerNorm
        embed = c * p * p * h + h + patches * h + 2 * h
    if isinstance(d_text, int) and model_type == "gemma3":
        proj = h * d_text + h  # mm_input_projection and its soft-embedding norm
    elif isinstance(d_text, int):
        proj = h * d_text + d_text + d_text * d_text + d_text  # two-layer MLP projector
    else:
        proj = 0
    return float(layers + embed + proj), f"{vt.removesuffix('_vision_model')} ViT, {L} layers of width {h}"


def _llama4_vision_params(v: _Fields, d_text: Any) -> tuple[float, str]:
    """Llama-4's ViT (transformers' ``Llama4VisionModel``): an unfolded patch projection without
    bias, a class token and (patches + 1) learned positions, pre- and post-LayerNorm; per layer
    q, k, v, o with biases, fc1/fc2 (GELU) with biases, two LayerNorms; the pixel-shuffle adapter
    (intermediate_size -> projector_input_dim -> projector_output_dim, no biases); the projector
    vision_output_dim -> the text hidden size (no bias). Its 2D RoPE has no weights."""
    h, i, L = v.int_("hidden_size", 768), v.int_("intermediate_size", 5632), v.int_("num_hidden_layers", 34)
    p, size, c = v.int_("patch_size", 14), v.int_("image_size", 448), v.int_("num_channels", 3)
    p_in, p_out, out = v.int_("projector_input_dim", 4096), v.int_("projector_output_dim", 4096), v.int_("vision_output_dim", 7680)
    patches = (size // p) ** 2
    layers = L * (4 * (h * h + h) + (h * i + i) + (i * h + h) + 2 * 2 * h)
    embed = c * p * p * h + h + (patches + 1) * h + 2 * 2 * h
    adapter = i * p_in + p_out * p_out
    proj = out * d_text if isinstance(d_text, int) else 0
    return float(layers + embed + adapter + proj), f"Llama-4 ViT, {L} layers of width {h}"


def _pixtral_params(v: _Fields, model_type: str, d_text: Any, top: _Fields) -> tuple[float, str]:
    """Pixtral's ViT (transformers' ``PixtralVisionModel``): a patch conv without bias and an
    RMSNorm before the blocks; per block q, k, v, o without biases (width -> width), a gated MLP
    (gate, up, down, no biases) and two RMSNorms; 2D RoPE without weights. Then the projector:
    Llava's two linears (vision width x feature layers -> text, text -> text, biases by
    ``multimodal_projector_bias``, default true); Mistral-3's RMSNorm, patch merger
    (width x spatial_merge_size^2 -> width, no bias) and the same two linears (bias default false)."""
    h, i, L = v.int_("hidden_size"), v.int_("intermediate_size"), v.int_("num_hidden_layers")
    p, c = v.int_("patch_size"), v.int_("num_channels", 3)
    layers = L * (4 * h * h + 3 * h * i + 2 * h)
    embed = c * p * p * h + h
    proj = 0
    if isinstance(d_text, int):
        layer = top.raw.get("vision_feature_layer", -1)
        feature_layers = len(layer) if isinstance(layer, list) and layer else 1
        bias = top.bool_("multimodal_projector_bias", model_type != "mistral3")
        proj = h * feature_layers * d_text + d_text * d_text + (2 * d_text if bias else 0)
        if model_type == "mistral3":
            m = top.int_("spatial_merge_size", 2)
            proj += h + h * m * m * h
    return float(layers + embed + proj), f"Pixtral ViT, {L} layers of width {h}"


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


def _falcon(f: _Fields, name: str) -> ModelConfig:
    """Falcon: multi-query attention (7B), or grouped KV heads with ``new_decoder_architecture``
    (40B, 180B); parallel attention and MLP off one (old) or two (new) LayerNorms."""
    d, heads, L = f.int_("hidden_size"), f.int_("num_attention_heads"), f.int_("num_hidden_layers")
    if d % heads:
        raise f.fail("hidden_size", f"({d}) must be divisible by num_attention_heads ({heads})")
    new = f.bool_("new_decoder_architecture", False)
    if new:
        kv = f.int_("num_kv_heads", heads)
        _check_heads(f, heads, kv)
    else:
        kv = 1 if f.bool_("multi_query", True) else heads
    parallel = f.bool_("parallel_attn", True)
    if new:
        norms = f.int_("num_ln_in_parallel_attn", 2, nullable=True) or 2
    else:
        norms = 1 if parallel else 2
    alibi = f.bool_("alibi", False)
    bias = f.bool_("bias", False)
    ffn = f.int_("ffn_hidden_size", None, nullable=True) or 4 * d
    return ModelConfig(
        name=name, model_type="falcon", source="", num_layers=L, hidden_size=d, num_heads=heads, num_kv_heads=kv,
        head_dim=d // heads, intermediate_size=ffn, vocab_size=f.int_("vocab_size"), gated_mlp=False,
        activation=f.str_("activation", "gelu"), tie_embeddings=f.bool_("tie_word_embeddings", True),
        max_position_embeddings=f.int_("max_position_embeddings", 2048),
        rope_theta=None if alibi else f.float_("rope_theta", 10000.0), position_embedding="alibi" if alibi else "rope",
        norm="layernorm", attention_bias=bias, attention_out_bias=bias, mlp_bias=bias,
        norms_per_layer=norms, parallel_residual=parallel,
    )


def _gptj(f: _Fields, name: str) -> ModelConfig:
    """GPT-J: parallel attention and MLP off one LayerNorm, RoPE on ``rotary_dim`` of each head,
    biases on the MLP and the LM head only."""
    d, heads = f.int_("n_embd"), f.int_("n_head")
    if d % heads:
        raise f.fail("n_embd", f"({d}) must be divisible by n_head ({heads})")
    rotary = f.int_("rotary_dim", None, nullable=True)
    if rotary is not None and (rotary > d // heads or rotary % 2):
        raise f.fail("rotary_dim", f"({rotary}) must be even and at most the head dim ({d // heads})")
    return ModelConfig(
        name=name, model_type="gptj", source="", num_layers=f.int_("n_layer"), hidden_size=d, num_heads=heads,
        num_kv_heads=heads, head_dim=d // heads, intermediate_size=f.int_("n_inner", None, nullable=True) or 4 * d,
        vocab_size=f.int_("vocab_size"), gated_mlp=False, activation=f.str_("activation_function", "gelu_new"),
        tie_embeddings=f.bool_("tie_word_embeddings", False), max_position_embeddings=f.int_("n_positions", 2048),
        rope_theta=10000.0, norm="layernorm", mlp_bias=True, norms_per_layer=1, lm_head_bias=True,
        parallel_residual=True, rotary_dim=rotary,
    )


def _gpt_neox(f: _Fields, name: str) -> ModelConfig:
    """GPT-NeoX / Pythia: fused qkv with biases, RoPE on ``rotary_pct`` of each head, two
    LayerNorms per layer, parallel residual (``use_parallel_residual``), untied embed_out."""
    d, heads = f.int_("hidden_size"), f.int_("num_attention_heads")
    if d % heads:
        raise f.fail("hidden_size", f"({d}) must be divisible by num_attention_heads ({heads})")
    D = d // heads
    pct = f.get("rotary_pct", 0.25)
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not 0 < pct <= 1:
        raise f.fail("rotary_pct", f"must be a number in (0, 1], got {json.dumps(pct)}")
    bias = f.bool_("attention_bias", True)
    return ModelConfig(
        name=name, model_type="gpt_neox", source="", num_layers=f.int_("num_hidden_layers"), hidden_size=d,
        num_heads=heads, num_kv_heads=heads, head_dim=D, intermediate_size=f.int_("intermediate_size"),
        vocab_size=f.int_("vocab_size"), gated_mlp=False, activation=f.str_("hidden_act", "gelu"),
        tie_embeddings=f.bool_("tie_word_embeddings", False), max_position_embeddings=f.int_("max_position_embeddings", 2048),
        rope_theta=f.float_("rotary_emb_base", None) or f.float_("rope_theta", 10000.0), norm="layernorm",
        attention_bias=bias, attention_out_bias=bias, mlp_bias=True,
        parallel_residual=f.bool_("use_parallel_residual", True), rotary_dim=int(D * pct) if pct < 1 else None,
    )


def _jamba_layers(f: _Fields, L: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(attention layers, MoE layers) of a Jamba config: layer i has attention when
    i % attn_layer_period == attn_layer_offset, experts when i % expert_layer_period == expert_layer_offset."""
    out = []
    for what in ("attn", "expert"):
        period = f.int_(f"{what}_layer_period", 8 if what == "attn" else 2)
        offset = f.int_(f"{what}_layer_offset", 4 if what == "attn" else 1, positive=False)
        if offset >= period:
            raise f.fail(f"{what}_layer_offset", f"({offset}) must be below {what}_layer_period ({period})")
        out.append(tuple(i for i in range(L) if i % period == offset))
    return out[0], out[1]


def _mamba(f: _Fields):
    from rooflinecli.models import MambaConfig

    d = f.int_("hidden_size")
    rank = f.get("mamba_dt_rank", "auto")
    if rank == "auto":
        rank = -(-d // 16)
    elif isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise f.fail("mamba_dt_rank", f"must be a positive integer or \"auto\", got {json.dumps(rank)}")
    return MambaConfig(
        d_state=f.int_("mamba_d_state", 16), d_conv=f.int_("mamba_d_conv", 4), expand=f.int_("mamba_expand", 2),
        dt_rank=rank, conv_bias=f.bool_("mamba_conv_bias", True), proj_bias=f.bool_("mamba_proj_bias", False),
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
    attention_out_bias = attention_bias if model_type in ("llama", "llama4_text", "deepseek_v2", "deepseek_v3", "gpt_oss") else False
    window, window_layers = _sliding_window(f, model_type, L)
    moe = _moe(f, model_type, L)
    intermediate = f.int_("intermediate_size_mlp", 16384) if model_type == "llama4_text" else f.int_("intermediate_size")
    extra: dict[str, Any] = {}
    if model_type == "llama4_text":
        extra = dict(window_kind="chunked", notes=_llama4_notes(f))
    if model_type in _GEMMA:
        extra = dict(norms_per_layer=2 if model_type == "gemma" else 4)
        caps = [f"{k} {f.raw[k]:g}" for k in ("attn_logit_softcapping", "final_logit_softcapping")
                if isinstance(f.raw.get(k), (int, float)) and not isinstance(f.raw.get(k), bool)]
        if caps:  # a tanh per score / logit: elementwise, not counted
            extra["notes"] = ("soft-capping (" + ", ".join(caps) + ") is elementwise and not counted",)
    if model_type == "phi3":
        frac = f.get("partial_rotary_factor", 1.0)
        if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac <= 1:
            raise f.fail("partial_rotary_factor", f"must be a number in (0, 1], got {json.dumps(frac)}")
        if frac < 1:
            extra["rotary_dim"] = int(head_dim * frac)
    if model_type == "gpt_oss":
        extra = dict(attention_sinks=True)
    if model_type == "jamba":
        attn_layers, moe_layers = _jamba_layers(f, L)
        extra = dict(mamba=_mamba(f), attention_layers=attn_layers)
        if moe is not None:
            moe = replace(moe, dense_layers=tuple(i for i in range(L) if i not in moe_layers))
    tied_default = model_type in _GEMMA
    act_key = "hidden_activation" if model_type in _GEMMA and isinstance(f.raw.get("hidden_activation"), str) else "hidden_act"
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
        activation=f.str_(act_key, "gelu_pytorch_tanh" if model_type in _GEMMA else "silu") or "gelu_pytorch_tanh",
        tie_embeddings=f.bool_("tie_word_embeddings", tied_default),
        max_position_embeddings=f.int_("max_position_embeddings", {"llama": 2048, "llama4_text": 131072}.get(model_type, 4096)),
        rope_theta=f.float_("rope_theta", 500_000.0 if model_type == "llama4_text" else 10000.0),
        position_embedding="rope",
        norm="rmsnorm",
        attention_bias=attention_bias,
        attention_out_bias=attention_out_bias,
        mlp_bias=f.bool_("mlp_bias", False) if model_type == "llama" else model_type == "gpt_oss",
        qk_norm=model_type in ("qwen3", "qwen3_moe", "gemma3_text"),
        mla=mla,
        moe=moe,
        sliding_window=window,
        sliding_window_layers=window_layers,
        router_bias=(model_type == "deepseek_v3" and f.str_("topk_method", "noaux_tc") == "noaux_tc") or model_type == "gpt_oss",
        **extra,
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
    r = _Fields(block, f.where, f.prefix + "rope_scaling.")
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
        raise RooflineError(f"{f.where}: field '{r.prefix}{key}': {err}")
    if kind == "default":
        return cfg
    max_pos = cfg.max_position_embeddings
    if "original_max_position_embeddings" not in block and "original_max_position_embeddings" in f.raw:
        r = _Fields({**block, "original_max_position_embeddings": f.raw["original_max_position_embeddings"]}, f.where, r.prefix)  # Phi-3 keeps it at the top
    if kind == "llama3":  # Llama 3.1's max_position_embeddings is already the scaled context
        original = r.int_("original_max_position_embeddings")
    elif kind == "linear":  # positions divided by factor: max_position_embeddings is the scaled context (Gemma-3)
        original = r.int_("original_max_position_embeddings", None)
    else:  # dynamic, yarn, longrope: transformers takes max_position_embeddings as the original
        original = r.int_("original_max_position_embeddings", max_pos)
    factor = r.get("factor", max_pos / original if kind == "longrope" else None)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise r.fail("factor", f"must be a number, got {json.dumps(factor)}")
    if not 1.0 <= factor <= 1e6:
        raise r.fail("factor", f"must be in [1, 1e6] (a stretch of the context), got {factor:g}")
    if kind == "llama3":
        low, high = r.float_("low_freq_factor"), r.float_("high_freq_factor")
        if high < low:  # equal: one hard cut between scaled and unscaled bands (Llama-4 Scout: 1 and 1)
            raise r.fail("high_freq_factor", f"({high:g}) must not be below low_freq_factor ({low:g})")
    if kind == "yarn":
        fast, slow = r.float_("beta_fast", 32.0), r.float_("beta_slow", 1.0)
        if not fast >= slow:
            raise r.fail("beta_fast", f"({fast:g}) must not be below beta_slow ({slow:g})")
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
    covered = max(max_pos, int(round(original * factor))) if original is not None else max_pos
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
    """(window, layer indices using it). Mistral/Mixtral/Phi-3: every layer when ``sliding_window``
    is set. Qwen2/Qwen3: only with ``use_sliding_window``, layers >= ``max_window_layers``.
    Gemma-2 and gpt-oss: every other layer (0, 2, ...); Gemma-3: all but every
    ``sliding_window_pattern``-th (default 6). An explicit ``layer_types`` list
    ("sliding_attention" / "full_attention") overrides these."""
    if model_type in ("llama", "gpt2", "gemma") or model_type.startswith("deepseek"):
        return None, ()
    if model_type == "llama4_text":
        return _llama4_chunks(f, L)
    if model_type == "jamba":
        if f.raw.get("sliding_window") is not None:
            raise f.fail("sliding_window", "is set: a sliding window on a hybrid's attention layers is not modelled")
        return None, ()
    qwen = model_type.startswith("qwen")
    window = f.int_("sliding_window", 4096 if model_type in ("gemma2", "gemma3_text") else None)
    if model_type in ("mistral", "mixtral", "phi3"):
        layers = tuple(range(L)) if window is not None else ()
    elif model_type in ("gemma2", "gpt_oss"):
        layers = tuple(range(0, L, 2)) if window is not None else ()
    elif model_type == "gemma3_text":
        pattern = f.int_("sliding_window_pattern", 6)
        layers = tuple(i for i in range(L) if (i + 1) % pattern) if window is not None else ()
    else:  # qwen2, qwen2_moe, qwen3, qwen3_moe
        if not f.bool_("use_sliding_window", False):
            window = None
        first = f.int_("max_window_layers", L, positive=False)
        layers = tuple(i for i in range(L) if i >= first) if window is not None else ()
    listed = _layers_of_type(f, L, "sliding_attention")
    if listed is not None:
        if listed and window is None:
            if qwen and f.raw.get("sliding_window") is not None:
                raise f.fail("use_sliding_window", "is false (or missing) but layer_types lists sliding_attention layers")
            raise f.fail("sliding_window", "must be set when layer_types lists sliding_attention layers")
        layers = listed
    if not layers:
        window = None
    return window, layers


def _layers_of_type(f: _Fields, L: int, kind: str) -> tuple[int, ...] | None:
    """The layers a ``layer_types`` list marks ``kind`` (the others: "full_attention"); None
    without the list. A list of another length, or another entry, is refused naming the field."""
    types = f.raw.get("layer_types")
    if types is None:
        return None
    allowed = tuple(sorted((kind, "full_attention")))
    if not isinstance(types, list) or len(types) != L:
        got = f"{len(types)} entries" if isinstance(types, list) else json.dumps(types)[:80]
        raise f.fail("layer_types", f"must be a list of {L} strings, one per layer (num_hidden_layers); got {got}")
    for i, t in enumerate(types):
        if t not in allowed:
            raise f.fail("layer_types", f"entry {i} is {json.dumps(t)[:80]}; modelled: {', '.join(allowed)}")
    return tuple(i for i, t in enumerate(types) if t == kind)


def _llama4_chunks(f: _Fields, L: int) -> tuple[int | None, tuple[int, ...]]:
    """(chunk size, layers attending within chunks) of a Llama-4 text config: the RoPE layers
    (``no_rope_layers[i]`` 1; without the list, all but every ``no_rope_layer_interval``-th) attend
    inside chunks of ``attention_chunk_size`` tokens; the NoPE layers attend the whole context. An
    explicit ``layer_types`` ("chunked_attention" / "full_attention") overrides these."""
    chunk = f.int_("attention_chunk_size", 8192, nullable=True)
    flags = f.raw.get("no_rope_layers")
    if flags:
        if not isinstance(flags, list) or len(flags) < L or any(v not in (0, 1) or isinstance(v, bool) for v in flags):
            got = f"{len(flags)} entries" if isinstance(flags, list) and len(flags) < L else json.dumps(flags)[:80]
            raise f.fail("no_rope_layers", f"must be a list of {L} entries of 0 (NoPE, full attention) or 1 (RoPE, chunked), one per layer; got {got}")
        layers = tuple(i for i in range(L) if flags[i])
    else:
        interval = f.int_("no_rope_layer_interval", 4)
        layers = tuple(i for i in range(L) if (i + 1) % interval)
    listed = _layers_of_type(f, L, "chunked_attention")
    if listed is not None:
        layers = listed
    if chunk is None or not layers:
        return None, ()
    return chunk, layers


def _llama4_notes(f: _Fields) -> tuple[str, ...]:
    notes = ["chunked attention is costed as a sliding window of the chunk size (KV held and read: min(N, chunk)), "
             "an upper bound: a token attends only the tokens of its own chunk"]
    if f.bool_("use_qk_norm", True):
        notes.append("q/k L2 norms on the RoPE layers have no weights and are elementwise: not counted")
    tuning = f.raw.get("attn_temperature_tuning", True)
    if tuning not in (False, 0, None):
        notes.append("attention temperature tuning on the NoPE layers scales the queries: elementwise, not counted")
    return tuple(notes)


def _moe(f: _Fields, model_type: str, L: int) -> MoEConfig | None:
    if model_type == "llama4_text":
        return _llama4_moe(f, L)
    if model_type in ("mixtral", "gpt_oss", "jamba"):
        E = f.int_("num_local_experts" if model_type != "jamba" else "num_experts")
        if model_type == "jamba" and E == 1:
            return None
        key = "experts_per_token" if model_type == "gpt_oss" and "num_experts_per_tok" not in f.raw else "num_experts_per_tok"
        k = f.int_(key)
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
    return _checked_moe(f, E, k, width, shared, shared_width, dense, gate)


def _llama4_moe(f: _Fields, L: int) -> MoEConfig:
    """Llama-4's feed-forward: on the MoE layers (``moe_layers``, else every
    ``interleave_moe_layer_step``-th from step - 1) ``num_local_experts`` routed experts of width
    ``intermediate_size``, top ``num_experts_per_tok``, plus one shared expert of the same width;
    the other layers a dense MLP of width ``intermediate_size_mlp``."""
    E, k = f.int_("num_local_experts", 16), f.int_("num_experts_per_tok", 1)
    width = f.int_("intermediate_size", 8192)
    listed = f.raw.get("moe_layers")
    if listed is not None:
        moe_layers = set(f.int_list("moe_layers"))
        if any(not 0 <= i < L for i in moe_layers):
            raise f.fail("moe_layers", f"lists layer {max(moe_layers, key=abs)}; layers are 0 to {L - 1}")
    else:
        step = f.int_("interleave_moe_layer_step", 1)
        moe_layers = set(range(step - 1, L, step))
    dense = tuple(i for i in range(L) if i not in moe_layers)
    return _checked_moe(f, E, k, width, 1, width, dense, False)


def _checked_moe(f: _Fields, E: int, k: int, width: int, shared: int, shared_width: int, dense: tuple[int, ...], gate: bool) -> MoEConfig:
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
