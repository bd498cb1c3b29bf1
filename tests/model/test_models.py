"""Hugging Face config.json import for each model type, preset files, registry lookups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflinecli import params
from rooflinecli.errors import RooflineError
from rooflinecli.hf_config import MODEL_TYPES, MULTIMODAL_TYPES, load_hf_config
from rooflinecli.model_registry import get_model, preset_ids, presets_dir
from conftest import TINY_DECODER_CONFIG

BASE = TINY_DECODER_CONFIG


def write(tmp_path: Path, raw: dict, name: str = "config.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(raw))
    return p


def test_llama_tiny_count_by_hand(tmp_path):
    cfg = load_hf_config(write(tmp_path, {"model_type": "llama", **BASE}))
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim) == (4, 64, 8, 2, 8)
    assert cfg.attention_kind == "gqa" and cfg.gated_mlp and not cfg.tie_embeddings
    # per layer: q 64*64 + k 64*16 + v 64*16 + o 64*64 + gate/up/down 3*64*128 + 2 norms 2*64
    per_layer = 64 * 64 + 64 * 16 + 64 * 16 + 64 * 64 + 3 * 64 * 128 + 2 * 64
    assert params.total_params(cfg) == 4 * per_layer + 1000 * 64 * 2 + 64
    assert cfg.name == tmp_path.name  # folder name of .../<model>/config.json


def test_llama_attention_bias_and_defaults(tmp_path):
    raw = {k: v for k, v in BASE.items() if k != "num_key_value_heads"}
    raw["head_dim"] = None  # written as null by recent transformers versions: hidden / heads
    cfg = load_hf_config(write(tmp_path, {"model_type": "llama", "attention_bias": True, "tie_word_embeddings": True, **raw}))
    assert cfg.head_dim == 8
    assert cfg.num_kv_heads == 8 and cfg.attention_kind == "mha"  # KV heads default to heads
    assert cfg.attention_bias and cfg.attention_out_bias and cfg.tie_embeddings
    assert params.lm_head_linear(cfg) is None


def test_mistral_sliding_window_every_layer(tmp_path):
    cfg = load_hf_config(write(tmp_path, {"model_type": "mistral", "sliding_window": 128, **BASE}))
    assert cfg.sliding_window == 128 and cfg.sliding_window_layers == (0, 1, 2, 3)
    cfg = load_hf_config(write(tmp_path, {"model_type": "mistral", "sliding_window": None, **BASE}))
    assert cfg.sliding_window is None and cfg.sliding_window_layers == ()


def test_mixtral_experts(tmp_path):
    cfg = load_hf_config(write(tmp_path, {"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2, **BASE}))
    assert cfg.moe.num_routed_experts == 8 and cfg.moe.top_k == 2
    assert cfg.moe.expert_intermediate_size == 128 and cfg.num_moe_layers == 4


def test_qwen2_biases_and_window_layers(tmp_path):
    raw = {"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 32, "max_window_layers": 2, **BASE}
    cfg = load_hf_config(write(tmp_path, raw))
    assert cfg.attention_bias and not cfg.attention_out_bias  # qkv bias always, o without
    assert cfg.sliding_window == 32 and cfg.sliding_window_layers == (2, 3)
    off = load_hf_config(write(tmp_path, {**raw, "use_sliding_window": False}))
    assert off.sliding_window is None and off.sliding_window_layers == ()
    q = params.attention_linears(cfg)
    assert [lin.bias for lin in q] == [True, True, True, False]


def test_layer_types_list_overrides(tmp_path):
    types = ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]
    raw = {"model_type": "qwen3", "use_sliding_window": True, "sliding_window": 16, "layer_types": types, **BASE}
    cfg = load_hf_config(write(tmp_path, raw))
    assert cfg.sliding_window_layers == (0, 2)


def test_qwen3_head_dim_differs_from_hidden_over_heads(tmp_path):
    cfg = load_hf_config(write(tmp_path, {"model_type": "qwen3", "head_dim": 32, **BASE}))
    assert cfg.head_dim == 32 != cfg.hidden_size // cfg.num_heads
    assert cfg.qk_norm
    q = params.attention_linears(cfg)[0]
    assert (q.d_in, q.d_out) == (64, 8 * 32)


def test_qwen3_moe_sparse_step_and_mlp_only(tmp_path):
    raw = {
        "model_type": "qwen3_moe", "num_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 32,
        "decoder_sparse_step": 2, "mlp_only_layers": [3], **BASE,
    }
    cfg = load_hf_config(write(tmp_path, raw))
    # MoE where (i+1) % 2 == 0 and i not in mlp_only: layer 1 only (layer 3 is MLP-only)
    assert cfg.moe.dense_layers == (0, 2, 3) and cfg.num_moe_layers == 1
    assert cfg.moe.num_shared_experts == 0


def test_qwen2_moe_shared_expert(tmp_path):
    raw = {
        "model_type": "qwen2_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 96, **BASE,
    }
    cfg = load_hf_config(write(tmp_path, raw))
    assert cfg.moe.num_shared_experts == 1 and cfg.moe.shared_expert_intermediate_size == 96
    shared = params.shared_expert_linears(cfg)
    assert sum(lin.params for lin in shared) == 3 * 64 * 96 + 64  # gate/up/down + d -> 1 gate


def deepseek_raw(model_type: str, **over) -> dict:
    raw = {
        "model_type": model_type, **BASE, "num_key_value_heads": 8,
        "q_lora_rank": 48, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
        "n_routed_experts": 8, "n_shared_experts": 2, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
        "first_k_dense_replace": 1, "moe_layer_freq": 1,
    }
    raw.update(over)
    return raw


@pytest.mark.parametrize("model_type", ["deepseek_v2", "deepseek_v3"])
def test_deepseek_mla_and_moe(tmp_path, model_type):
    cfg = load_hf_config(write(tmp_path, deepseek_raw(model_type)))
    assert cfg.attention_kind == "mla"
    assert cfg.mla.q_lora_rank == 48 and cfg.mla.kv_lora_rank == 32 and cfg.mla.qk_rope_head_dim == 8
    assert cfg.moe.dense_layers == (0,) and cfg.moe.num_shared_experts == 2
    assert cfg.moe.shared_expert_intermediate_size == 24
    assert cfg.router_bias == (model_type == "deepseek_v3")
    names = [lin.name for lin in params.attention_linears(cfg)]
    assert names == ["q_a", "q_b", "kv_a", "kv_b", "o"]


def test_deepseek_moe_layer_freq_and_no_q_lora(tmp_path):
    cfg = load_hf_config(write(tmp_path, deepseek_raw("deepseek_v2", q_lora_rank=None, moe_layer_freq=2, n_shared_experts=None)))
    assert cfg.moe.num_shared_experts == 0 and params.shared_expert_linears(cfg) == ()
    # MoE where i >= 1 and i % 2 == 0: layer 2 only
    assert cfg.moe.dense_layers == (0, 1, 3)
    assert cfg.mla.q_lora_rank is None
    assert params.attention_linears(cfg)[0].name == "q"


def test_gpt2_fields(tmp_path):
    raw = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128, "vocab_size": 500}
    cfg = load_hf_config(write(tmp_path, raw))
    assert cfg.intermediate_size == 256 and not cfg.gated_mlp  # n_inner null -> 4 * n_embd
    assert cfg.position_embedding == "learned" and cfg.norm == "layernorm" and cfg.tie_embeddings
    assert params.embedding_params(cfg) == 500 * 64 + 128 * 64


def test_every_model_type_is_covered_here():
    covered = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt2"}
    # hand-derived counts of these in test_checkpoints.py
    covered |= {"falcon", "gemma", "gemma2", "gemma3_text", "gpt_neox", "gpt_oss", "gptj", "jamba", "phi3"}
    covered |= {"llama4_text"}  # test_llama4_pixtral.py
    assert covered == set(MODEL_TYPES)


def test_name_from_name_or_path(tmp_path):
    cfg = load_hf_config(write(tmp_path, {"model_type": "llama", "_name_or_path": "org/My-Model", **BASE}, "x.json"))
    assert cfg.name == "My-Model"


# ------------------------------------------------------------------------------------------------
# Presets and registry
# ------------------------------------------------------------------------------------------------

REQUIRED_PRESETS = {"llama-3-8b", "llama-3-70b", "llama-3.1-405b", "mistral-7b", "mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b", "gpt2"}


def test_required_presets_exist():
    assert REQUIRED_PRESETS <= set(preset_ids())


@pytest.mark.parametrize("path", sorted(presets_dir().glob("*.json")), ids=lambda p: p.stem)
def test_preset_file_metadata(path):
    raw = json.loads(path.read_text())
    meta = raw["_rooflinecli"]
    assert meta["id"] == path.stem
    assert meta["source_url"].startswith("https://huggingface.co/") and meta["source_url"].endswith("config.json")
    assert meta["published_total_params"] > 0 and meta["display_name"]
    assert raw["model_type"] in MODEL_TYPES or raw["model_type"] in MULTIMODAL_TYPES


def test_preset_shapes():
    ds = get_model("deepseek-v3")
    assert ds.moe.num_routed_experts == 256 and ds.moe.num_shared_experts == 1 and ds.moe.top_k == 8
    assert ds.moe.dense_layers == (0, 1, 2) and ds.attention_kind == "mla"
    mistral = get_model("mistral-7b")
    assert mistral.sliding_window == 4096 and len(mistral.sliding_window_layers) == 32
    assert get_model("gpt2").attention_kind == "mha"
    q = get_model("qwen3-30b-a3b")
    assert q.head_dim == 128 and q.hidden_size // q.num_heads == 64


def test_get_model_by_path_and_folder(tmp_path):
    write(tmp_path, {"model_type": "llama", **BASE})
    assert get_model(str(tmp_path / "config.json")).num_layers == 4
    assert get_model(str(tmp_path)).num_layers == 4
    assert get_model(str(presets_dir() / "gpt2.json")).name == "gpt2"


def test_unknown_preset_suggests():
    with pytest.raises(RooflineError, match=r"unknown model 'llama-3-7b' \(did you mean 'llama-3-70b'\?\)|did you mean"):
        get_model("llama-3-7b")
