"""Checkpoints as users deploy them: JSON readers that refuse a key given twice, defaults that
cannot apply skipped with a note, and (below) quantized configs, RoPE scaling, per-layer attention
and the architectures beyond Llama, each against a hand-derived count."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.errors import RooflineError, parse_json_text
from rooflinecli.hf_config import load_hf_config, parse_hf_config

runner = CliRunner()

LLAMA_TINY = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
}


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

PRESETS = Path(__file__).resolve().parents[1] / "rooflinecli" / "model_presets"


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
    from rooflinecli.whatif.rope import rope_for_model

    cfg = get_preset("llama-3.1-405b")
    assert (cfg.rope_scaling.kind, cfg.rope_scaling.factor, cfg.rope_scaling.original_context) == ("llama3", 8.0, 8192)
    assert cfg.max_position_embeddings == 131072
    ext = rope_for_model(cfg, target_context=262144)
    assert ext.trained_context_tokens == 131072 and ext.scale == 2.0
    assert ext.rope_scaling_factor_for_target == 262144 / 8192 == 32
    assert ext.to_json()["rope_scaling_type"] == "llama3"


def test_yarn_deepseek_v2_lite_factor_40_over_4096():
    from rooflinecli.model_registry import get_preset
    from rooflinecli.whatif.rope import context_warning, rope_for_model

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
    raw = dict(LLAMA_TINY, rope_scaling={"type": "linear", "factor": 2.0})
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
     "'rope_scaling.high_freq_factor' (1) must be above low_freq_factor (4)"),
    ({"type": "yarn", "factor": 4, "original_max_position_embeddings": 0}, "'rope_scaling.original_max_position_embeddings' must be positive"),
    ({"type": "yarn", "factor": 4, "beta_fast": 1, "beta_slow": 32}, "'rope_scaling.beta_fast' (1) must be above beta_slow (32)"),
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
