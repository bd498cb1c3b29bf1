"""Checkpoints as users deploy them: JSON readers that refuse a key given twice, defaults that
cannot apply skipped with a note, and (below) quantized configs, RoPE scaling, per-layer attention
and the architectures beyond Llama, each against a hand-derived count."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.errors import RooflineError, parse_json_text
from rooflinecli.hf_config import load_hf_config, parse_hf_config

runner = CliRunner()

#: a small Llama with a 512-token context
LLAMA_TINY = dict(model_type="llama", hidden_size=64, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                  intermediate_size=128, vocab_size=1000, max_position_embeddings=512)


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def write(tmp_path, raw: dict | str, name: str = "config.json"):
    p = tmp_path / name
    p.write_text(raw if isinstance(raw, str) else json.dumps(raw))
    return p


def parse(raw: dict, name: str = "m"):
    return parse_hf_config(raw, where="cfg.json", name=name)


# ------------------------------------------------------------------------------------------------
# JSON readers and defaults
# ------------------------------------------------------------------------------------------------


def test_duplicate_key_refused_naming_key_and_file(tmp_path):
    text = json.dumps(LLAMA_TINY)[:-1] + ', "num_hidden_layers": 1}'
    p = write(tmp_path, text)
    with pytest.raises(RooflineError, match=r'config\.json: key "num_hidden_layers" appears twice'):
        load_hf_config(p)
    r = invoke("model", "show", p)
    assert r.exit_code == 2
    assert r.output.strip() == f'error: {p}: key "num_hidden_layers" appears twice in one object; give it once'


def test_duplicate_key_in_a_nested_object_refused():
    with pytest.raises(RooflineError, match=r'x\.json: key "bits" appears twice'):
        parse_json_text('{"quantization_config": {"bits": 4, "bits": 8}}', "x.json")
    assert parse_json_text('{"a": {"b": 1}, "c": {"b": 2}}', "x.json") == {"a": {"b": 1}, "c": {"b": 2}}


def test_kv_gpt2_skips_the_gqa_variant_with_a_note():
    r = runner.invoke(app, ["kv", "--model", "gpt2", "--context", "1000"])
    assert r.exit_code == 0, r.output
    assert "note: variant 'gqa' left out: gqa kv_heads 8 must divide gpt2's 12 attention heads" in r.output
    assert "mqa" in r.output and "* mha" in r.output


# ------------------------------------------------------------------------------------------------
# quantization_config: weight bytes with scales and zero points, by hand on Llama-3-8B
# ------------------------------------------------------------------------------------------------

from pathlib import Path  # noqa: E402

from rooflinecli import params as P  # noqa: E402

PRESETS = Path(__file__).resolve().parents[2] / "rooflinecli" / "model_presets"


def preset_raw(preset: str) -> dict:
    raw = json.loads((PRESETS / f"{preset}.json").read_text())
    raw.pop("_rooflinecli")
    return raw


def quantized(qc: dict, preset: str = "llama-3-8b"):
    raw = preset_raw(preset)
    raw["quantization_config"] = qc
    return parse(raw)


# Llama-3-8B, one layer: q, k, v, o (4096 -> 4096, 1024, 1024; 4096 -> 4096), gate, up (4096 -> 14336), down
L8 = 32
MATS = [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096), (4096, 14336), (4096, 14336), (14336, 4096)]
N_CONV = L8 * sum(a * b for a, b in MATS)  # 6,979,321,856 converted weights
OUT_ROWS = L8 * sum(b for _, b in MATS)  # output channels of those: one scale each when per channel
EMB = 128256 * 4096
REST16 = 2 * (2 * EMB + L8 * 2 * 4096 + 4096)  # embedding + LM head + norms, bf16


def blocks(bi: int, bo: int) -> int:
    return L8 * sum(-(-a // bi) * -(-b // bo) for a, b in MATS)


def test_hand_counts_of_llama_3_8b():
    assert N_CONV == 6_979_321_856 and OUT_ROWS == 32 * 43_008
    cfg = parse(preset_raw("llama-3-8b"))
    assert sum(P.stored_weight_bytes(cfg).values()) == 2 * N_CONV + REST16 == 16_060_522_496


FORMATS = {
    # id: (quantization_config, stored bytes of the whole model by hand, implied compute dtype)
    "gptq-int4-g128": ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False},
                       N_CONV * 0.5 + N_CONV / 128 * (2 + 0.5) + REST16, "bf16"),
    "gptq-int8-g128": ({"quant_method": "gptq", "bits": 8, "group_size": 128},
                       N_CONV * 1.0 + N_CONV / 128 * (2 + 1) + REST16, "bf16"),
    "gptq-int4-channel": ({"quant_method": "gptq", "bits": 4, "group_size": -1},
                          N_CONV * 0.5 + OUT_ROWS * 2.5 + REST16, "bf16"),
    "awq-int4-g128": ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"},
                      N_CONV * 0.5 + N_CONV / 128 * 2.5 + REST16, "bf16"),
    "awq-int4-g64-symmetric": ({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": False},
                               N_CONV * 0.5 + N_CONV / 64 * 2 + REST16, "bf16"),
    "ct-w8a8-int8-channel": ({"quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ["lm_head"], "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True},
                    "input_activations": {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True}}}},
        N_CONV * 1.0 + OUT_ROWS * 2 + REST16, "int8"),
    "ct-fp8-dynamic": ({"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"], "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True},
                    "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}}},
        N_CONV * 1.0 + OUT_ROWS * 2 + REST16, "fp8"),
    "ct-fp8-tensor": ({"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"},
                    "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor"}}}},
        N_CONV * 1.0 + L8 * len(MATS) * 2 + REST16, "fp8"),
    "ct-w4a16-g128-asym": ({"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"], "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
                                                        "symmetric": False}, "input_activations": None}}},
        N_CONV * 0.5 + N_CONV / 128 * (2 + 0.5) + REST16, "bf16"),
    "ct-nvfp4": ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ["lm_head"], "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16},
                    "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}},
        N_CONV * 0.5 + N_CONV / 16 * 1 + REST16, "fp4"),
    "fbgemm-fp8": ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": []},
                   N_CONV * 1.0 + OUT_ROWS * 4 + REST16, "fp8"),
    "fp8-block-128": ({"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
                      N_CONV * 1.0 + blocks(128, 128) * 4 + REST16, "fp8"),
    "fp8-tensor": ({"quant_method": "fp8", "activation_scheme": "static"}, N_CONV * 1.0 + L8 * len(MATS) * 4 + REST16, "fp8"),
    "bnb-nf4-double": ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                        "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16"},
                       N_CONV * 0.5 + N_CONV / 64 * (1 + 4 / 256) + REST16, "bf16"),
    "bnb-fp4": ({"load_in_4bit": True}, N_CONV * 0.5 + N_CONV / 64 * 4 + REST16, "fp32"),
    "bnb-int8": ({"quant_method": "bitsandbytes", "load_in_8bit": True}, N_CONV * 1.0 + OUT_ROWS * 4 + REST16, "int8"),
    "mxfp4-mlp-only": ({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head", "model.embed_tokens"]},
                       L8 * 3 * 4096 * 14336 * (0.5 + 1 / 32) + L8 * 2 * (4096 * 4096 + 4096 * 1024) * 2 + REST16, "bf16"),
    "modelopt-nvfp4": ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": "FP8",
                        "exclude_modules": ["lm_head"]}, N_CONV * 0.5 + N_CONV / 16 + REST16, "fp4"),
    "modelopt-nvfp4-head-too": ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16},
                                N_CONV * 0.5 + N_CONV / 16 + REST16 - 2 * EMB + EMB * (0.5 + 1 / 16), "fp4"),
    "modelopt-fp8": ({"quant_method": "modelopt", "quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head"]}},
                     N_CONV * 1.0 + L8 * len(MATS) * 4 + REST16, "fp8"),
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_weight_bytes_of_each_format(fmt):
    qc, want, compute = FORMATS[fmt]
    cfg = quantized(qc)
    assert sum(P.stored_weight_bytes(cfg).values()) == pytest.approx(want, rel=1e-12)
    assert cfg.quantization.compute_dtype == compute
    assert P.total_params(cfg) == 8_030_261_248  # parameters do not change, bytes do


def test_gptq_4bit_llama_3_8b_decode_reads_4_68_gb_not_15():
    from rooflinecli.analysis import Workload
    from rooflinecli.hardware import get_spec
    from rooflinecli.predict import analyze

    wl = Workload(batch=1, prompt_len=1024, gen_len=16)
    spec = get_spec("h100-sxm")
    plain = analyze(parse(preset_raw("llama-3-8b")), spec, wl)
    gptq = analyze(quantized(FORMATS["gptq-int4-g128"][0]), spec, wl)
    # a decode step reads every converted matrix, the 16-bit LM head and norms, and one embedding row
    per_step = N_CONV * 0.5 + N_CONV / 128 * 2.5 + 2 * (EMB + L8 * 2 * 4096 + 4096) + 2 * 4096
    assert per_step == 4_677_189_632
    assert gptq.decode.totals["weights_bytes"] == pytest.approx(per_step, rel=1e-12)
    assert plain.decode.totals["weights_bytes"] == pytest.approx(2 * N_CONV + 2 * (EMB + L8 * 2 * 4096 + 4096) + 2 * 4096, rel=1e-12)
    assert gptq.memory["weights_bytes_per_gpu"] == pytest.approx(FORMATS["gptq-int4-g128"][1], rel=1e-12)
    assert gptq.decode.time_s < plain.decode.time_s / 3


def test_excluded_modules_layer_by_layer():
    # compressed-tensors int8 with layer 0's down projection and every k projection left out
    qc = json.loads(json.dumps(FORMATS["ct-w8a8-int8-channel"][0]))
    qc["ignore"] = ["lm_head", "model.layers.0.mlp.down_proj", "re:.*k_proj$"]
    cfg = quantized(qc)
    down, k = 14336 * 4096, 4096 * 1024
    want = FORMATS["ct-w8a8-int8-channel"][1] - (down + 4096 * 2) + 2 * down - L8 * (k + 1024 * 2) + L8 * 2 * k
    assert sum(P.stored_weight_bytes(cfg).values()) == pytest.approx(want, rel=1e-12)


def test_compressed_tensors_without_ignore_converts_the_lm_head():
    qc = json.loads(json.dumps(FORMATS["ct-fp8-tensor"][0]))
    del qc["ignore"]
    cfg = quantized(qc)
    assert P.stored_weight_bytes(cfg)["lm_head"] == EMB * 1 + 2  # one bf16 scale


def test_model_show_says_what_it_read_and_weight_dtype_overrides(tmp_path):
    raw = preset_raw("llama-3-8b")
    raw["quantization_config"] = FORMATS["gptq-int4-g128"][0]
    p = write(tmp_path, raw)
    r = invoke("model", "show", p)
    assert r.exit_code == 0, r.output
    assert "gptq int4, group 128, fp16 scales, 4-bit zero points" in r.output
    assert "5,727,854,592 B (5.73 GB)" in r.output and "embedding, norms, routers, LM head" in r.output
    d = json.loads(invoke("model", "show", p, "--json").output)
    assert d["quantization"]["method"] == "gptq" and d["weight_bytes"] == 5_727_854_592
    r = invoke("model", "show", p, "--weight-dtype", "bf16")
    assert r.exit_code == 0
    assert "note: --weight-dtype bf16 replaces" in r.output and "16,060,522,496 B" in r.output
    r = invoke("model", "show", p, "--weight-dtype", "int4", "--json")
    d = json.loads(r.output[r.output.index("{"):])
    assert d["weight_bytes"] == N_CONV * 0.5 + N_CONV / 128 * 2 + REST16


BAD_QUANT = [
    ({"quant_method": "hqq"}, "'quantization_config.quant_method': unknown quantization method 'hqq'"),
    ({"quant_method": "gptq", "bits": 3, "group_size": 128}, "'quantization_config.bits' is 3; supported: 4, 8"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 0}, "'quantization_config.group_size' must be a positive group size"),
    ({"quant_method": "awq", "bits": 4, "group_size": -5}, "'quantization_config.group_size' must be a positive group size"),
    ({"quant_method": "fp8", "weight_block_size": [0, 128]}, "'quantization_config.weight_block_size' must be two positive integers"),
    ({"quant_method": "bitsandbytes"}, "'quantization_config.load_in_4bit' or 'load_in_8bit' must be true"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "int2"}, "'quantization_config.bnb_4bit_quant_type' is \"int2\""),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 3}}}},
     "'quantization_config.config_groups.g.weights.num_bits' is 3; supported: 4, 8"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": {
        "num_bits": 4, "strategy": "group", "group_size": 0}}}}, "'quantization_config.config_groups.g.weights.group_size' must be a positive"),
    ({"quant_method": "compressed-tensors", "ignore": ["re:("], "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8}}}},
     "'quantization_config.ignore' holds \"re:(\", not a regular expression"),
    ({"quant_method": "modelopt", "quant_algo": "INT4_AWQ"}, "'quantization_config.quant_algo' is \"INT4_AWQ\"; supported: nvfp4, fp8"),
    ("gptq", "field 'quantization_config' must be an object"),
    ({"quant_method": "compressed-tensors", "sparsity_config": {"format": "sparse-24-bitmask", "sparsity_structure": "2:4"},
      "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8}}}},
     "'quantization_config.sparsity_config' is set (\"sparse-24-bitmask\"): sparse weights are not modelled"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["re:.*mlp.*"], "weights": {"num_bits": 8}}}},
     "'quantization_config.config_groups.g.targets' is [\"re:.*mlp.*\"]; only [\"Linear\"] (every linear layer) is modelled"),
]


@pytest.mark.parametrize("qc,message", BAD_QUANT, ids=[str(i) for i in range(len(BAD_QUANT))])
def test_bad_quantization_config_is_one_line_naming_field_and_file(tmp_path, qc, message):
    raw = preset_raw("llama-3-8b")
    raw["quantization_config"] = qc
    p = write(tmp_path, raw)
    r = invoke("model", "show", p)
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {p}: field ") and message in lines[0], r.output


# ------------------------------------------------------------------------------------------------
# rope_scaling: the trained context and the rope what-if start from the scaled model
# ------------------------------------------------------------------------------------------------


def test_llama3_scaling_read_and_rope_starts_from_it():
    from rooflinecli.model_registry import get_preset
    from rooflinecli.rope import rope_for_model

    cfg = get_preset("llama-3.1-405b")
    assert (cfg.rope_scaling.kind, cfg.rope_scaling.factor, cfg.rope_scaling.original_context) == ("llama3", 8.0, 8192)
    assert cfg.max_position_embeddings == 131072
    ext = rope_for_model(cfg, target_context=262144)
    assert ext.trained_context_tokens == 131072 and ext.scale == 2.0
    assert ext.rope_scaling_factor_for_target == 262144 / 8192 == 32
    assert ext.to_json()["rope_scaling_type"] == "llama3"


def test_yarn_deepseek_v2_lite_factor_40_over_4096():
    from rooflinecli.model_registry import get_preset
    from rooflinecli.rope import context_warning, rope_for_model

    cfg = get_preset("deepseek-v2-lite")
    assert cfg.rope_scaling.label == "yarn x40 over 4,096" and cfg.max_position_embeddings == 4096 * 40
    ext = rope_for_model(cfg, target_context=327680)
    assert ext.trained_context_tokens == 163840 and ext.rope_scaling_factor_for_target == 80
    w = context_warning(cfg, 200_000)
    assert "trained limit of 163,840" in w and "yarn x40 over 4,096 RoPE scaling would need factor 48.83" in w


def test_yarn_added_to_qwen2_5_covers_original_times_factor(tmp_path):
    raw = preset_raw("qwen2.5-7b")
    raw["max_position_embeddings"] = 32768  # as Qwen2.5's instructions have it: yarn factor 4 over 32k
    raw["rope_scaling"] = {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}
    cfg = parse(raw)
    assert cfg.max_position_embeddings == 131072
    r = invoke("model", "show", write(tmp_path, raw))
    assert "131,072 (RoPE scaling yarn x4 over 32,768)" in r.output


def test_linear_and_dynamic_scaling_default_to_max_position_embeddings():
    raw = dict(LLAMA_TINY, rope_scaling={"type": "linear", "factor": 2.0})  # max_position_embeddings is the scaled context
    assert parse(raw).max_position_embeddings == 512 and parse(raw).rope_scaling.label == "linear x2"
    raw = dict(LLAMA_TINY, rope_scaling={"type": "linear", "factor": 4.0, "original_max_position_embeddings": 256})
    assert parse(raw).max_position_embeddings == 1024
    raw = dict(LLAMA_TINY, rope_scaling={"rope_type": "dynamic", "factor": 4})
    assert parse(raw).rope_scaling.original_context == 512 and parse(raw).max_position_embeddings == 2048
    raw = dict(LLAMA_TINY, rope_scaling={"rope_type": "default"})
    assert parse(raw).rope_scaling is None and parse(raw).max_position_embeddings == 512


BAD_ROPE = [
    ({"type": "yarn", "factor": -4}, "'rope_scaling.factor' must be in [1, 1e6] (a stretch of the context), got -4"),
    ({"type": "linear", "factor": "2"}, "'rope_scaling.factor' must be a number, got \"2\""),
    ({"type": "ntk-by-parts", "factor": 2}, "'rope_scaling.type': unknown RoPE scaling type 'ntk-by-parts'"),
    ({"factor": 2}, "'rope_scaling.rope_type' is missing"),
    ({"type": "yarn", "rope_type": "linear", "factor": 2}, "'rope_scaling.type' (\"yarn\") and 'rope_scaling.rope_type' (\"linear\") disagree"),
    ({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4},
     "'rope_scaling.original_max_position_embeddings' is missing"),
    ({"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1, "original_max_position_embeddings": 128},
     "'rope_scaling.high_freq_factor' (1) must not be below low_freq_factor (4)"),
    ({"type": "yarn", "factor": 4, "original_max_position_embeddings": 0}, "'rope_scaling.original_max_position_embeddings' must be positive"),
    ({"type": "yarn", "factor": 4, "beta_fast": 1, "beta_slow": 32}, "'rope_scaling.beta_fast' (1) must not be below beta_slow (32)"),
    ({"type": "longrope", "short_factor": [1.0] * 3, "long_factor": [1.0] * 4, "original_max_position_embeddings": 128},
     "'rope_scaling.short_factor' must be a list of 4 positive numbers"),
    ([2.0], "'rope_scaling' must be an object or null"),
]


@pytest.mark.parametrize("rope,message", BAD_ROPE, ids=[str(i) for i in range(len(BAD_ROPE))])
def test_bad_rope_scaling_is_one_line_naming_field_and_file(tmp_path, rope, message):
    p = write(tmp_path, dict(LLAMA_TINY, rope_scaling=rope))
    r = invoke("model", "show", p)
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {p}: field ") and message in lines[0], r.output


# ------------------------------------------------------------------------------------------------
# Architectures: parameters and KV bytes per token by hand, against the published figure
# ------------------------------------------------------------------------------------------------

GEMMA_1 = {"model_type": "gemma", "hidden_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 8, "num_key_value_heads": 1,
           "head_dim": 256, "intermediate_size": 16384, "vocab_size": 256000, "max_position_embeddings": 8192, "hidden_act": "gelu"}
FALCON_7B = {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "num_hidden_layers": 32, "multi_query": True,
             "parallel_attn": True, "new_decoder_architecture": False, "bias": False, "alibi": False, "vocab_size": 65024}
NEOX_20B = {"model_type": "gpt_neox", "hidden_size": 6144, "num_attention_heads": 64, "num_hidden_layers": 44, "intermediate_size": 24576,
            "rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": True, "vocab_size": 50432,
            "max_position_embeddings": 2048, "tie_word_embeddings": False}
PHI_4_MINI = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 24, "num_key_value_heads": 8, "num_hidden_layers": 32,
              "intermediate_size": 8192, "partial_rotary_factor": 0.75, "vocab_size": 200064, "tie_word_embeddings": True,
              "max_position_embeddings": 131072, "sliding_window": 262144,
              "rope_scaling": {"type": "longrope", "long_factor": [1.0] * 48, "short_factor": [1.0] * 48},
              "original_max_position_embeddings": 4096}
JAMBA = {"model_type": "jamba", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "intermediate_size": 14336, "num_experts": 16, "num_experts_per_tok": 2, "attn_layer_period": 8, "attn_layer_offset": 4,
         "expert_layer_period": 2, "expert_layer_offset": 1, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
         "mamba_dt_rank": "auto", "mamba_conv_bias": True, "mamba_proj_bias": False, "vocab_size": 65536,
         "max_position_embeddings": 262144, "tie_word_embeddings": False, "sliding_window": None}
LLAVA = {"model_type": "llava", "text_config": dict(preset_raw("llama-2-7b"), vocab_size=32064),
         "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                           "patch_size": 14, "image_size": 336, "num_attention_heads": 16}}
QWEN2_VL = dict(preset_raw("qwen2.5-7b"), model_type="qwen2_vl", vocab_size=152064, hidden_size=3584, intermediate_size=18944,
                num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False,
                vision_config={"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "hidden_size": 3584, "patch_size": 14,
                               "spatial_merge_size": 2, "temporal_patch_size": 2, "in_chans": 3})

#: every new architecture: its config (a preset's, or a published config.json's fields)
ARCHITECTURES = {
    "gemma": GEMMA_1, "gemma2": preset_raw("gemma-2-9b"), "gemma3": preset_raw("gemma-3-27b"), "phi3": preset_raw("phi-4"),
    "phi3-partial": PHI_4_MINI, "falcon-7b": FALCON_7B, "falcon-180b": preset_raw("falcon-180b"), "gptj": preset_raw("gpt-j-6b"),
    "gpt_neox": NEOX_20B, "gpt_oss": preset_raw("gpt-oss-20b"), "jamba": JAMBA, "llava": LLAVA, "qwen2_vl": QWEN2_VL,
}


def test_gemma_2_9b_by_hand_and_the_issue_kv():
    cfg = parse(ARCHITECTURES["gemma2"])
    d, L, D, ffn, V = 3584, 42, 256, 14336, 256000
    attn = d * 16 * D + 2 * d * 8 * D + 16 * D * d
    per_layer = attn + 3 * d * ffn + 4 * d  # four RMSNorms a layer
    total = L * per_layer + V * d + d  # tied embeddings
    assert total == 9_241_705_984 and P.total_params(cfg) == total
    assert abs(total / 9.24e9 - 1) < 0.01
    assert cfg.sliding_window == 4096 and cfg.sliding_window_layers == tuple(range(0, 42, 2))
    from rooflinecli import kv

    per_token = 2 * L * 8 * D * 2
    assert kv.kv_bytes_per_token(cfg, 2.0) == per_token == 344_064
    # at 8,192 tokens: 21 full layers hold 8,192, 21 window layers 4,096: 2.11 GB, not 2.82 GB
    assert kv.kv_cache_bytes_for(cfg, 8192, 1, 2.0) == 2 * 8 * D * 2 * (21 * 8192 + 21 * 4096) == 2_113_929_216
    assert per_token * 8192 == 2_818_572_288
    assert any("soft-capping" in n for n in cfg.notes) and cfg.tie_embeddings and cfg.activation == "gelu_pytorch_tanh"


def test_gemma_3_27b_text_model_and_vision_tower():
    cfg = parse(ARCHITECTURES["gemma3"])
    d, L, D, ffn, V = 5376, 62, 128, 21504, 262208
    per_layer = 2 * d * 32 * D + 2 * d * 16 * D + 3 * d * ffn + 4 * d + 2 * D  # q/k norms
    assert P.total_params(cfg) == L * per_layer + V * d + d == 27_009_346_304
    # SigLIP: 27 layers of width 1152 (MLP 4304), 64 x 64 patches of 14 x 14 x 3, post-LayerNorm; projector 1152 -> 5376 + its norm
    h, i = 1152, 4304
    vision = 27 * (4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h) + 3 * 14 * 14 * h + h + 64 * 64 * h + 2 * h + h * d + h
    assert P.vision_params(cfg) == vision == 423_060_336
    assert abs((P.total_params(cfg) + vision) / 27.4e9 - 1) < 0.01
    assert len(cfg.sliding_window_layers) == 52 and 5 not in cfg.sliding_window_layers and cfg.sliding_window == 1024
    assert cfg.qk_norm and cfg.max_position_embeddings == 131072 and "not timed" in cfg.vision.note
    from rooflinecli import kv

    assert kv.kv_bytes_per_token(cfg, 2.0) == 2 * L * 16 * D * 2 == 507_904


def test_gemma_1_defaults():
    cfg = parse(GEMMA_1)
    assert cfg.tie_embeddings and cfg.norms_per_layer == 2 and cfg.attention_kind == "mqa" and cfg.sliding_window is None
    d = 2048
    assert P.total_params(cfg) == 18 * (d * 2048 + 2 * d * 256 + 2048 * d + 3 * d * 16384 + 2 * d) + 256000 * d + d  # 2.51B


def test_phi_4_by_hand():
    cfg = parse(ARCHITECTURES["phi3"])
    d, L, ffn, V = 5120, 40, 17920, 100352
    total = L * (2 * d * d + 2 * d * 1280 + 3 * d * ffn + 2 * d) + 2 * V * d + d
    assert P.total_params(cfg) == total and abs(total / 14.7e9 - 1) < 0.01
    assert cfg.sliding_window is None
    from rooflinecli import kv

    assert kv.kv_bytes_per_token(cfg, 2.0) == 2 * L * 10 * 128 * 2 == 204_800


def test_phi_partial_rotary_and_longrope():
    from rooflinecli.rope import rotary_dim_of

    cfg = parse(PHI_4_MINI)
    assert cfg.rotary_dim == 96 and rotary_dim_of(cfg) == 96  # 0.75 of head dim 128
    assert cfg.rope_scaling.kind == "longrope" and cfg.rope_scaling.factor == 32 and cfg.max_position_embeddings == 131072
    assert cfg.sliding_window == 262144 and len(cfg.sliding_window_layers) == 32


def test_falcon_7b_multi_query_parallel_attention():
    cfg = parse(FALCON_7B)
    d, L, ffn = 4544, 32, 4 * 4544
    assert cfg.attention_kind == "mqa" and cfg.norms_per_layer == 1 and cfg.parallel_residual and cfg.tie_embeddings
    total = L * (d * d + 2 * d * 64 + d * d + 2 * d * ffn + 2 * d) + 65024 * d + 2 * d  # one LayerNorm (weight + bias) a layer
    assert P.total_params(cfg) == total == 6_921_720_704
    from rooflinecli import kv

    assert kv.kv_bytes_per_token(cfg, 2.0) == 2 * L * 1 * 64 * 2 == 8192


def test_falcon_180b_new_decoder_architecture():
    cfg = parse(ARCHITECTURES["falcon-180b"])
    d, L, ffn = 14848, 80, 4 * 14848
    assert cfg.num_kv_heads == 8 and cfg.norms_per_layer == 2 and cfg.head_dim == 64
    total = L * (2 * d * d + 2 * d * 8 * 64 + 2 * d * ffn + 2 * 2 * d) + 65024 * d + 2 * d
    assert P.total_params(cfg) == total == 178_557_088_768
    assert abs(total / 180e9 - 1) < 0.01  # TII: 180B
    from rooflinecli import kv

    assert kv.kv_bytes_per_token(cfg, 2.0) == 2 * L * 8 * 64 * 2 == 163_840


def test_gpt_j_6b():
    cfg = parse(ARCHITECTURES["gptj"])
    d, L, V = 4096, 28, 50400
    per_layer = 4 * d * d + (d * 4 * d + 4 * d) + (4 * d * d + d) + 2 * d  # q, k, v, out; fc_in, fc_out with biases; ln_1
    total = L * per_layer + V * d + (d * V + V) + 2 * d  # wte; lm_head with its bias; ln_f
    assert P.total_params(cfg) == total == 6_050_882_784
    assert abs(total / 6_053_381_344 - 1) < 0.001  # EleutherAI's model card
    assert cfg.rotary_dim == 64 and cfg.parallel_residual
    from rooflinecli import kv

    assert kv.kv_bytes_per_token(cfg, 2.0) == 2 * L * 16 * 256 * 2 == 458_752


def test_gpt_neox_20b_exact():
    cfg = parse(NEOX_20B)
    d, L, V = 6144, 44, 50432
    per_layer = (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + 2 * 2 * d
    total = L * per_layer + 2 * V * d + 2 * d
    assert total == 20_554_567_680 == P.total_params(cfg)  # the GPT-NeoX-20B paper's count
    assert cfg.rotary_dim == 24
    from rooflinecli import kv

    assert kv.kv_bytes_per_token(cfg, 2.0) == 2 * L * 64 * 96 * 2 == 1_081_344


def test_gpt_oss_20b_experts_sinks_windows_and_mxfp4():
    cfg = parse(ARCHITECTURES["gpt_oss"])
    d, L, E, V = 2880, 24, 32, 201088
    attn = (d * 4096 + 4096) + 2 * (d * 512 + 512) + (4096 * d + d) + 64  # biases on q, k, v, o; 64 sink logits
    expert = 3 * (d * d + d)  # gate, up, down with biases
    router = d * E + E
    total = L * (attn + 2 * d + router + E * expert) + 2 * V * d + d
    assert P.total_params(cfg) == total == 20_914_757_184
    active = L * (attn + 2 * d + router + 4 * expert) + V * d + d  # OpenAI counts the unembedding, not the embedding
    assert P.active_params(cfg, include_embeddings=False) == active == 3_608_307_264
    assert abs(total / 20.91e9 - 1) < 0.001 and abs(active / 3.61e9 - 1) < 0.001
    assert cfg.sliding_window == 128 and cfg.sliding_window_layers == tuple(range(0, 24, 2)) and cfg.attention_sinks
    from rooflinecli import kv

    assert kv.kv_bytes_per_token(cfg, 2.0) == 2 * L * 8 * 64 * 2 == 49_152
    assert kv.kv_cache_bytes_for(cfg, 8192, 1, 2.0) == 2 * 8 * 64 * 2 * (12 * 8192 + 12 * 128)
    # MXFP4 experts: 0.5 byte a weight + one e8m0 scale per 32; biases, attention, router, embedding and head bf16
    expert_weights = L * E * 3 * d * d
    stored = expert_weights * (0.5 + 1 / 32) + (total - expert_weights) * 2
    assert sum(P.stored_weight_bytes(cfg).values()) == stored == 13_761_264_768


def test_jamba_state_instead_of_kv_on_mamba_layers():
    cfg = parse(JAMBA)
    d, E, N, R = 4096, 8192, 16, 256
    assert cfg.attention_layers == (4, 12, 20, 28) and cfg.moe.dense_layers == tuple(range(0, 32, 2))
    mamba = d * 2 * E + E * (R + 2 * N) + (R * E + E) + E * d + (E * 4 + E) + E * N + E + (R + 2 * N)
    attn = 2 * d * d + 2 * d * 1024
    mlp = 3 * d * 14336
    total = 4 * attn + 28 * mamba + 16 * mlp + 16 * (16 * mlp + d * 16) + 32 * 2 * d + 2 * 65536 * d + d
    assert P.total_params(cfg) == total == 51_570_323_328
    assert abs(total / 51.6e9 - 1) < 0.01  # AI21: 52B total (51.6B), 12B active
    assert abs(P.active_params(cfg) / 12e9 - 1) < 0.02
    from rooflinecli import kv

    assert kv.kv_bytes_per_token(cfg, 2.0) == 2 * 4 * 8 * 128 * 2 == 16_384  # attention layers only
    assert kv.mamba_state_bytes(cfg, 2.0) == 28 * E * (N + 4) * 2 == 9_175_040  # per sequence, any context
    assert kv.kv_cache_bytes_for(cfg, 1000, 2, 2.0) == 2 * (16_384 * 1000 + 9_175_040)


def _jamba_ops(phase, batch, context, **wl):
    from rooflinecli.analysis import Workload
    from rooflinecli.analysis.ops import phase_ops
    from rooflinecli.hardware import get_spec

    w = Workload(batch=batch, prompt_len=context, gen_len=1, **wl)
    return {op.name: op for op in phase_ops(parse(JAMBA), get_spec("h200"), w, phase, batch, context)}


def test_jamba_decode_step_per_layer_type_by_hand():
    d, E, N, R, K, b = 4096, 8192, 16, 256, 4, 2  # bf16 weights, activations and state
    ops = _jamba_ops("decode", 1, 1000)
    # (layers, FLOPs, weight bytes, state/KV read, state/KV write, activation bytes) of one layer, one token
    want = {
        "mamba.in_proj": (28, 2 * d * 2 * E, d * 2 * E * b, 0, 0, (d + 2 * E) * b),
        "mamba.conv1d": (28, 2 * E * K, E * K * b, E * K * b, E * K * b, 2 * E * b),
        "mamba.x_proj": (28, 2 * E * (R + 2 * N), E * (R + 2 * N) * b, 0, 0, (E + R + 2 * N) * b),
        "mamba.dt_proj": (28, 2 * R * E, (R * E + E) * b, 0, 0, (R + E) * b),
        # 8 FLOPs per (channel, state element), 5 per channel; A (E x N) and D (E) read; x, dt, z, B, C in, y out
        "mamba.scan": (28, E * (8 * N + 5), E * (N + 1) * b, E * N * b, E * N * b, (4 * E + 2 * N) * b),
        "mamba.out_proj": (28, 2 * E * d, E * d * b, 0, 0, (E + d) * b),
        # attention layers: QK^T and PV of 32 heads x 128 over 1,000 keys + softmax; K and V of 8 KV heads read, one written
        "attn.core": (4, 4 * 32 * 1000 * 128 + 5 * 32 * 1000, 0, 2 * 8 * 128 * 1000 * b, 2 * 8 * 128 * b, 2 * (32 + 8) * 128 * b),
        "attn.q": (4, 2 * d * d, d * d * b, 0, 0, 2 * d * b),
        "attn.k": (4, 2 * d * 1024, d * 1024 * b, 0, 0, (d + 1024) * b),
    }
    for name, (layers, flops, w, kv_r, kv_w, act) in want.items():
        op = ops[name]
        got = (op.layers, float(op.flops), float(op.weights_bytes), float(op.kv_read_bytes), float(op.kv_write_bytes), float(op.activation_bytes))
        assert got == (layers, flops, w, kv_r, kv_w, act), name
    # every layer has its two norms and a residual stream; the MLPs split 16 dense and 16 MoE
    assert ops["norms"].layers == 32 and ops["mlp.gate"].layers == 16 and ops["moe.expert_gate"].layers == 16
    # the step's state traffic is the memory model's state, read and written once
    from rooflinecli import kv

    state = sum(float(ops[n].kv_read_bytes) * ops[n].layers for n in ("mamba.conv1d", "mamba.scan"))
    assert state == kv.mamba_state_bytes(parse(JAMBA), 2.0) == 28 * E * (N + K) * b


def test_jamba_prefill_scans_the_prompt_and_writes_the_state_once():
    E, N, K, b, S = 8192, 16, 4, 2, 2048
    ops = _jamba_ops("prefill", 2, S)
    scan, conv = ops["mamba.scan"], ops["mamba.conv1d"]
    assert float(scan.flops) == 2 * S * E * (8 * N + 5) and float(conv.flops) == 2 * S * 2 * E * K
    assert float(scan.kv_read_bytes) == 0 and float(scan.kv_write_bytes) == 2 * E * N * b  # from zeros; the final state
    assert float(scan.activation_bytes) == 2 * S * (4 * E + 2 * 16) * b
    # the state does not grow with the prompt, the attention layers' KV does
    longer = _jamba_ops("prefill", 2, 2 * S)
    assert float(longer["mamba.scan"].kv_write_bytes) == float(scan.kv_write_bytes)
    assert float(longer["attn.core"].kv_write_bytes) == 2 * float(ops["attn.core"].kv_write_bytes)


def test_jamba_tensor_parallel_splits_the_inner_channels_and_the_state():
    from rooflinecli.analysis import Workload
    from rooflinecli.analysis.memory import kv_cache_bytes_per_gpu, weights_breakdown_per_gpu
    from rooflinecli.analysis.ops import linear_split

    cfg = parse(JAMBA)
    one, two = _jamba_ops("decode", 1, 1000), _jamba_ops("decode", 1, 1000, tp=2)
    for name in ("mamba.in_proj", "mamba.conv1d", "mamba.x_proj", "mamba.dt_proj", "mamba.scan", "mamba.out_proj"):
        assert float(two[name].flops) == float(one[name].flops) / 2, name
    lins = {lin.name: lin for lin in P.mamba_linears(cfg)}
    assert linear_split(cfg, lins["out_proj"], 2) == (0.5, 1.0) and linear_split(cfg, lins["in_proj"], 2) == (1.0, 0.5)
    w1 = Workload(batch=3, prompt_len=1000, gen_len=1)
    w2 = Workload(batch=3, prompt_len=1000, gen_len=1, tp=2)
    assert float(kv_cache_bytes_per_gpu(cfg, w2, 1000, 3)) == float(kv_cache_bytes_per_gpu(cfg, w1, 1000, 3)) / 2
    # the weights as stored: every parameter at 2 bytes, the Mamba layers under their own key
    stored = weights_breakdown_per_gpu(cfg, w1)
    assert sum(stored.values()) == 2 * P.total_params(cfg)
    assert stored["mamba"] == 2 * P.param_breakdown(cfg)["mamba"] and stored["attention"] == 2 * P.param_breakdown(cfg)["attention"]


def test_jamba_analyzed_through_the_cli(tmp_path):
    p = write(tmp_path, JAMBA)
    r = invoke("analyze", "--model", p, "--hw", "h200", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    text = json.dumps(doc)
    assert "mamba.scan" in text and "mamba.in_proj" in text
    r = invoke("analyze", "--model", p, "--hw", "h200-measured")  # achievable: GEMMs on the GEMM model, scan and conv as streams
    assert r.exit_code == 0, r.output
    assert "mamba.scan" in r.output and "mamba.out_proj" in r.output
    r = invoke("model", "show", p)
    assert r.exit_code == 0 and "Mamba state / sequence" in r.output and "9,175,040 B" in r.output


def test_llava_text_model_analyzed_vision_reported():
    cfg = parse(LLAVA)
    assert cfg.model_type == "llama" and P.total_params(cfg) == 6_738_415_616 + 64 * 4096 * 2
    h, i = 1024, 4096
    vision = 24 * (4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h) + 3 * 14 * 14 * h + h + 577 * h + 4 * h
    vision += h * 4096 + 4096 + 4096 * 4096 + 4096  # the two-layer projector
    assert P.vision_params(cfg) == vision == 324_487_168
    assert abs((P.total_params(cfg) + vision) / 7.06e9 - 1) < 0.01  # Llava-1.5-7B


def test_qwen2_vl_top_level_text_fields():
    cfg = parse(QWEN2_VL)
    assert P.total_params(cfg) == 7_615_616_512  # the Qwen2-7B language model
    e = 1280
    block = 4 * e * e + 4 * e + 2 * e * 4 * e + 4 * e + e + 4 * e
    vision = 32 * block + 3 * 2 * 14 * 14 * e + 2 * e + (4 * e) ** 2 + 4 * e + 4 * e * 3584 + 3584
    assert P.vision_params(cfg) == vision == 675_759_104
    assert abs((P.total_params(cfg) + vision) / 8.29e9 - 1) < 0.01  # Qwen2-VL-7B


def test_multimodal_with_an_unknown_text_model_is_one_line(tmp_path):
    raw = {"model_type": "llava", "text_config": {"model_type": "olmo2", "hidden_size": 8}, "vision_config": {}}
    p = write(tmp_path, raw)
    r = invoke("model", "show", p)
    assert r.exit_code == 2 and r.output.startswith(f"error: {p}: field 'text_config.model_type': unknown model_type 'olmo2'")


BAD_LAYERS = [
    (dict(preset_raw("gpt-oss-20b"), layer_types=["full_attention"] * 23),
     "field 'layer_types' must be a list of 24 strings, one per layer (num_hidden_layers); got 23 entries"),
    (dict(preset_raw("gpt-oss-20b"), layer_types=["chunked_attention"] * 24), "field 'layer_types' entry 0 is \"chunked_attention\""),
    (dict(preset_raw("qwen2.5-72b"), layer_types=["sliding_attention"] * 80),
     "field 'use_sliding_window' is false (or missing) but layer_types lists sliding_attention layers"),
    (dict(JAMBA, attn_layer_offset=9), "field 'attn_layer_offset' (9) must be below attn_layer_period (8)"),
    (dict(JAMBA, mamba_dt_rank=0), "field 'mamba_dt_rank' must be a positive integer or \"auto\""),
    (dict(NEOX_20B, rotary_pct=1.5), "field 'rotary_pct' must be a number in (0, 1]"),
    (dict(PHI_4_MINI, partial_rotary_factor=0), "field 'partial_rotary_factor' must be a number in (0, 1]"),
    (dict(FALCON_7B, new_decoder_architecture=True, num_kv_heads=7), "field 'num_key_value_heads' (7) must divide"),
]


@pytest.mark.parametrize("raw,message", BAD_LAYERS, ids=[str(i) for i in range(len(BAD_LAYERS))])
def test_bad_architecture_fields_are_one_line(tmp_path, raw, message):
    p = write(tmp_path, raw)
    r = invoke("model", "show", p)
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {p}: ") and message in lines[0], r.output


def test_analyze_reads_the_quantization_and_weight_dtype_replaces_it(tmp_path):
    raw = preset_raw("llama-3-8b")
    raw["quantization_config"] = FORMATS["gptq-int4-g128"][0]
    p = write(tmp_path, raw)

    def decode_weights(*extra):
        r = runner.invoke(app, ["analyze", "--model", str(p), "--hw", "h200", "--json", *extra])
        assert r.exit_code == 0, r.output
        return json.loads(r.output[r.output.index("{"):])["decode"]["weights_bytes"]

    assert decode_weights() == pytest.approx(4_677_189_632, rel=1e-12)  # as stored: GPTQ int4
    assert decode_weights("--weight-dtype", "bf16") == pytest.approx(15_009_857_536, rel=1e-12)  # replaced by 16-bit
    assert decode_weights("--weight-dtype", "int4") == pytest.approx(N_CONV * (0.5 + 2 / 128) + 2 * (EMB + L8 * 2 * 4096 + 4096) + 2 * 4096, rel=1e-12)


def test_rope_on_linear_scaling_without_an_original_context():
    from rooflinecli.model_registry import get_preset
    from rooflinecli.rope import rope_for_model

    cfg = get_preset("gemma-3-27b")  # linear x8, max_position_embeddings 131,072: the scaled context
    ext = rope_for_model(cfg, target_context=262144)
    assert ext.trained_context_tokens == 131072 and ext.original_context_tokens is None
    assert ext.rope_scaling_factor_for_target == 16  # twice the stretch: 262,144 over 131,072 / 8


def test_moe_expert_bytes_as_stored():
    from rooflinecli.analysis import Workload
    from rooflinecli.model_registry import get_preset
    from rooflinecli.whatif.moe import expert_bytes

    cfg = get_preset("gpt-oss-20b")
    d = 2880  # gate, up, down: mxfp4 data + one e8m0 scale per 32, biases bf16
    assert expert_bytes(cfg, Workload(batch=1, prompt_len=1, gen_len=1)) == 3 * (d * d * 0.5 + d // 32 * d + 2 * d) == 13_236_480
    replaced = Workload(batch=1, prompt_len=1, gen_len=1, weight_dtype="bf16", weight_dtype_overrides=True)
    assert expert_bytes(cfg, replaced) == 3 * 2 * (d * d + d)
    r = runner.invoke(app, ["moe", "--model", "gpt-oss-20b"])
    assert r.exit_code == 0 and "one routed expert = 13.2 MB (mxfp4)" in r.output


def test_analyze_a_multimodal_config_says_the_vision_tower_is_left_out():
    r = runner.invoke(app, ["analyze", "--model", "gemma-3-27b", "--no-ops"])
    assert r.exit_code == 0, r.output
    assert "note: gemma-3-27b: vision tower (siglip ViT, 27 layers of width 1152) reported, not timed" in r.output


def test_exclusions_follow_each_layouts_module_names():
    ct8 = {"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float"},
                                                                         "input_activations": {"num_bits": 8, "type": "float"}}}}
    raw = preset_raw("phi-4")  # fused qkv_proj and gate_up_proj in the checkpoint
    raw["quantization_config"] = dict(ct8, ignore=["lm_head", "re:.*qkv_proj$"])
    cfg = parse(raw)
    b = P.stored_weight_bytes(cfg)
    d, L = 5120, 40
    assert b["attention"] == L * (2 * (d * d + 2 * d * 1280) + (d * d * 1 + 2))  # q, k, v 16-bit; o fp8 with one bf16 scale
    raw["quantization_config"] = dict(ct8, ignore=["lm_head", "language_model.model.layers.0.mlp"])  # a longer path to layer 0's MLP
    b = P.stored_weight_bytes(parse(raw))
    assert b["dense_mlp"] == pytest.approx(3 * 5120 * 17920 * 2 + 39 * 3 * (5120 * 17920 + 2), rel=1e-12)


def test_kv_cache_dtype_of_the_checkpoint_is_shown(tmp_path):
    raw = preset_raw("llama-3-8b")
    raw["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}
    assert parse(raw).quantization.kv_cache_dtype == "fp8"
    r = invoke("model", "show", write(tmp_path, raw))
    assert "fp8 scales calibrated; the KV figures here follow --kv-dtype (--kv-dtype fp8 to match)" in r.output.replace("\n│", "")
    raw["quantization_config"]["kv_cache_quant_algo"] = "INT2"
    r = invoke("model", "show", write(tmp_path, raw))
    assert r.exit_code == 2 and "field 'quantization_config.kv_cache_quant_algo' is \"INT2\"" in r.output


def test_sweep_sweeps_a_quantized_checkpoint_as_stored_unless_weight_dtype_is_given():
    from rooflinecli.hardware import get_spec
    from rooflinecli.whatif.sweep import block_columns, make_combos

    raw = preset_raw("llama-3-8b")
    raw["quantization_config"] = FORMATS["gptq-int4-g128"][0]
    cfg = parse(raw)
    from rooflinecli.quant import weights_label

    for weight_dtypes, label, weights in ((None, "gptq int4", 4_677_189_632), (["bf16"], "bf16", 15_009_857_536)):
        (combo,) = make_combos([cfg], [get_spec("h200")], ["bf16"], ["bf16"], weight_dtypes)
        cols = block_columns(combo, "decode", np.asarray([1.0]), np.asarray([1024.0]))
        assert cols["weights_bytes"][0] == pytest.approx(weights, rel=1e-12)
        assert weights_label(combo.cfg, combo) == label  # the sweep's weight_dtype column


def test_model_show_compares_a_multimodal_total_with_its_vision_tower():
    r = invoke("model", "show", "gemma-3-27b")
    assert r.exit_code == 0
    assert "27.4 B total (ours +0.1% with the vision tower)" in r.output
    assert "423,060,336 params (423 M)" in r.output


def test_sparse_text_configs_take_the_transformers_defaults_and_say_so():
    sparse = {"model_type": "llava", "text_config": {"model_type": "llama", "vocab_size": 32064, "max_position_embeddings": 4096,
                                                     "rms_norm_eps": 1e-05}, "vision_config": LLAVA["vision_config"]}
    cfg = parse(sparse)  # as llava-hf/llava-1.5-7b-hf publishes it: the Llama-2-7B shape left to LlamaConfig
    assert P.total_params(cfg) == P.total_params(parse(LLAVA))
    assert "take transformers' defaults: hidden_size 4096, intermediate_size 11008, num_attention_heads 32, num_hidden_layers 32" in cfg.vision.note
    g3 = preset_raw("gemma-3-27b")
    del g3["text_config"]["vocab_size"], g3["text_config"]["max_position_embeddings"]
    assert P.total_params(parse(g3)) == 27_009_346_304 and parse(g3).max_position_embeddings == 131072


def test_per_layer_type_costs_of_gpt_oss_decode_and_prefill():
    from rooflinecli.analysis import Workload
    from rooflinecli.analysis.ops import phase_ops
    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_preset

    cfg, spec, wl = get_preset("gpt-oss-20b"), get_spec("h200"), Workload(batch=1, prompt_len=8192, gen_len=1)
    dec = {op.name: op for op in phase_ops(cfg, spec, wl, "decode", 1, 8192)}
    full, window = dec["attn.core"], dec["attn.core.window"]
    assert (full.layers, window.layers) == (12, 12)
    per_entry = 2 * 8 * 64 * 2  # K and V, 8 KV heads x 64, bf16
    assert float(full.kv_read_bytes) == 8192 * per_entry and float(window.kv_read_bytes) == 128 * per_entry
    assert float(full.flops) == 4 * 64 * 8192 * 64 + 5 * 64 * 8192  # QK^T and PV over 8,192 keys (64 heads), softmax
    pre = {op.name: op for op in phase_ops(cfg, spec, wl, "prefill", 1, 8192)}
    # causal pairs: all of them for the full layers, at most 128 a query for the window layers
    assert float(pre["attn.core.window"].flops) < float(pre["attn.core"].flops) / 30


def test_a_tuned_file_with_a_key_given_twice_is_rejected(tmp_path):
    from kernels.tuning import load_committed

    p = tmp_path / "tuned.json"
    p.write_text('{"schema": 1, "gpu": "x", "gpu": "y", "autotuners": {}}')
    c = load_committed(p, {}, "y", "3.0")
    assert c.status == "rejected" and 'key "gpu" appears twice in one object' in c.message


@pytest.mark.parametrize("arch", sorted(a for a in ARCHITECTURES if a != "gpt_oss"))
def test_unquantized_architectures_store_two_bytes_a_parameter(arch):
    cfg = parse(ARCHITECTURES[arch])
    assert cfg.quantization is None
    assert sum(P.stored_weight_bytes(cfg).values()) == 2 * P.total_params(cfg)


def _analyze_json(*args):
    r = runner.invoke(app, ["analyze", *map(str, args), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_the_compute_dtype_a_w8a8_format_implies_applies_unless_dtype_is_given():
    r = runner.invoke(app, ["analyze", "--model", "llama-3.1-8b-fp8", "--hw", "h200", "--no-ops"])
    assert r.exit_code == 0
    header = r.output.splitlines()
    assert header[0].endswith("fp8 compute, compressed-tensors fp8 weights, KV bf16")
    assert header[1] == "fp8 compute: llama-3.1-8b-fp8's compressed-tensors fp8 checkpoint implies it (--dtype replaces it)"
    own, given = _analyze_json("--model", "llama-3.1-8b-fp8", "--hw", "h200"), _analyze_json("--model", "llama-3.1-8b-fp8", "--hw", "h200", "--dtype", "bf16")
    assert own["workload"]["compute_dtype"] == "fp8" and given["workload"]["compute_dtype"] == "bf16"
    assert own["roof_peak_tflops"] == 2 * given["roof_peak_tflops"]  # h200: 1,979 fp8 vs 989.5 bf16 dense
    assert given["dtype_notes"] == ["--dtype bf16 replaces the fp8 compute that llama-3.1-8b-fp8's compressed-tensors fp8 checkpoint implies"]
    assert own["ttft_s"] < given["ttft_s"]  # the compute-bound prefill runs at the fp8 peak
    # --weight-dtype replaces the checkpoint's format, and with it the format's compute
    bf16 = _analyze_json("--model", "llama-3.1-8b-fp8", "--hw", "h200", "--weight-dtype", "bf16")
    assert bf16["workload"]["compute_dtype"] == "bf16" and bf16["dtype_notes"] == [] and bf16["workload"]["weights_format"] == "bf16"


def test_the_kv_cache_dtype_a_checkpoint_declares_applies_unless_kv_dtype_is_given(tmp_path):
    raw = preset_raw("llama-3-8b")
    raw["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}
    p = write(tmp_path, raw)
    own = _analyze_json("--model", p, "--hw", "b200", "--prompt", 4096)
    assert (own["workload"]["compute_dtype"], own["workload"]["kv_dtype"], own["workload"]["kv_bytes_per_element"]) == ("fp4", "fp8", 1.0)
    assert own["workload"]["weights_format"] == "modelopt fp4"
    name = tmp_path.name
    assert own["dtype_notes"] == [f"fp4 compute: {name}'s modelopt fp4 checkpoint implies it (--dtype replaces it)",
                                  f"KV fp8: {name}'s modelopt fp4 checkpoint declares it (--kv-dtype replaces it)"]
    given = _analyze_json("--model", p, "--hw", "b200", "--prompt", 4096, "--kv-dtype", "bf16")
    assert given["workload"]["kv_dtype"] == "bf16"
    assert given["dtype_notes"][1] == f"--kv-dtype / --kv-bits (bf16) replaces the fp8 KV cache that {name}'s modelopt fp4 checkpoint declares"
    # the KV cache held: 32 layers x 2 x 8 KV heads x 128 x 1 byte (fp8) vs 2 bytes a token
    per_token = 32 * 2 * 8 * 128
    assert own["memory"]["kv_cache_bytes_per_gpu"] == pytest.approx(per_token * (4096 + 256), rel=1e-12)
    assert given["memory"]["kv_cache_bytes_per_gpu"] == pytest.approx(2 * per_token * (4096 + 256), rel=1e-12)
    # a GPU without an fp4 peak (Hopper) keeps bf16 and says why
    hopper = _analyze_json("--model", p, "--hw", "h200")
    assert hopper["workload"]["compute_dtype"] == "bf16"
    assert hopper["dtype_notes"][0] == f"bf16 compute: {name}'s modelopt fp4 checkpoint implies fp4, for which h200 has no peak"


def test_the_report_names_the_weights_as_read(tmp_path):
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", "--model", "llama-3.1-8b-fp8", "--hw", "h200", "--out", str(out)])
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert "fp8 compute, compressed-tensors fp8 weights, KV bf16" in html and "bf16 weights" not in html
def test_qwen2_5_vl_vision_tower():
    raw = dict(QWEN2_VL, model_type="qwen2_5_vl",
               vision_config={"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "out_hidden_size": 3584,
                              "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_chans": 3, "hidden_act": "silu"})
    cfg = parse(raw)
    e, i = 1280, 3420
    block = 4 * e * e + 4 * e + 2 * (e * i + i) + i * e + e + 2 * e  # qkv, proj; gate, up, down with biases; two RMSNorms
    vision = 32 * block + 3 * 2 * 14 * 14 * e + e + (4 * e) ** 2 + 4 * e + 4 * e * 3584 + 3584
    assert P.vision_params(cfg) == vision == 676_550_144
    assert abs((P.total_params(cfg) + vision) / 8.29e9 - 1) < 0.01  # Qwen2.5-VL-7B


def test_an_encoder_not_counted_is_named_as_such():
    raw = {"model_type": "llava", "text_config": dict(preset_raw("mistral-7b")),
           "vision_config": {"model_type": "intern_vit_6b", "hidden_size": 3200, "num_hidden_layers": 45}}
    cfg = parse(raw)
    assert cfg.vision.params is None and P.vision_params(cfg) == 0
    assert cfg.vision.note.startswith('vision tower (model_type "intern_vit_6b") neither counted nor timed')
    assert P.total_params(cfg) == P.total_params(parse(preset_raw("mistral-7b")))


#: every command that takes a model and a context, at its defaults (plus the options it requires)
DEFAULT_COMMANDS = (("analyze", "--no-ops"), ("kv",), ("speculative", "-k", "4", "-a", "0.7"), ("compare",),
                    ("disagg", "--rate", "2", "--ttft-target", "1", "--tpot-target", "0.1"))


def test_no_command_warns_about_the_context_at_its_defaults_on_short_context_presets():
    from rooflinecli.model_registry import get_preset, preset_ids

    short = [i for i in preset_ids() if get_preset(i).max_position_embeddings <= 8192]
    assert {"gpt2", "llama-3-8b", "llama-2-7b", "gemma-2-9b", "gpt-j-6b"} <= set(short)
    for preset in short:
        for cmd in DEFAULT_COMMANDS:
            r = invoke(*cmd, "--model", preset)
            assert r.exit_code == 0, (preset, cmd, r.output)
            assert "trained limit" not in r.output, (preset, cmd, r.output)


def test_defaults_shrink_to_gpt2s_1024_positions_and_given_values_stay():
    r = invoke("analyze", "--model", "gpt2", "--no-ops")
    assert "note: gpt2 is trained on 1,024 positions: --prompt 768 (default 1,024) to fit them" in r.output
    assert "batch 1, prompt 768, gen 256;" in r.output  # the last decode step holds 768 + 256 = 1,024 positions
    r = invoke("kv", "--model", "gpt2", "--json")
    assert "--context 1,023 (default 1,024)" in r.output  # a step at context N holds N + 1 positions
    r = invoke("analyze", "--model", "gpt2", "--no-ops", "--prompt", "1024")
    assert "batch 1, prompt 1,024, gen 256;" in r.output and "context 1,280 tokens exceeds gpt2's trained limit of 1,024" in r.output
    r = invoke("kv", "--model", "gpt2", "--context", "1024")
    assert "context 1,025 tokens exceeds gpt2's trained limit" in r.output and "note: gpt2 is trained" not in r.output
