"""Llama-4 (interleaved MoE with a shared expert, chunked attention on the RoPE layers, a
ViT counted but not timed), Pixtral's vision tower and Kimi-K2's checkpoint, each by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rooflinecli import kv
from rooflinecli import params as P
from rooflinecli.cli import app
from rooflinecli.errors import RooflineError
from rooflinecli.hf_config import parse_hf_config
from rooflinecli.model_registry import get_model

runner = CliRunner()
PRESETS = Path(__file__).resolve().parents[2] / "rooflinecli" / "model_presets"


def preset_raw(preset: str) -> dict:
    raw = json.loads((PRESETS / f"{preset}.json").read_text())
    raw.pop("_rooflinecli")
    return raw


def parse(raw: dict):
    return parse_hf_config(raw, where="cfg.json", name="m")


# Llama-4 text model, shared by Scout and Maverick: d 5120, 48 layers, 40 heads, 8 KV heads of 128,
# experts (and the shared expert) of width 8192, dense MLPs of width 16384, vocab 202048, untied.
D, L, V = 5120, 48, 202_048
ATTN = D * 40 * 128 + 2 * D * 8 * 128 + 40 * 128 * D  # q, k, v, o: 62,914,560
EXPERT = 3 * D * 8192  # gate, up, down: 125,829,120
DENSE = 3 * D * 16384
NORMS = L * 2 * D + D  # input and post-attention RMSNorms, the final norm (the q/k L2 norms have no weights)
EMB = V * D  # the embedding, and the LM head again

# The ViT (Llama4VisionModel), both models: width 1408, 34 layers, MLP 5632, 336 / 14 = 24 x 24 patches
H, I = 1408, 5632
VIT_LAYER = 4 * (H * H + H) + (H * I + I) + (I * H + H) + 2 * 2 * H  # q, k, v, o and fc1, fc2 with biases; two LayerNorms
VIT = 34 * VIT_LAYER + 3 * 14 * 14 * H + H + (24 * 24 + 1) * H + 2 * 2 * H  # patch linear, class token, positions, pre/post LN
ADAPTER = I * 4096 + 4096 * 4096  # pixel-shuffle MLP: fc1 5632 -> 4096, fc2 4096 -> 4096
PROJECTOR = 4096 * D  # vision_output_dim -> text hidden, no bias
VISION = VIT + ADAPTER + PROJECTOR


def test_llama_4_scout_by_hand():
    cfg = get_model("llama-4-scout")
    moe_layer = 16 * EXPERT + EXPERT + D * 16  # 16 routed, 1 shared, the router (no bias)
    total = L * (ATTN + moe_layer) + NORMS + 2 * EMB
    assert P.total_params(cfg) == total == 107_769_861_120
    assert P.vision_params(cfg) == VISION == 871_932_416
    assert abs((total + VISION) / 109e9 - 1) < 0.01  # Meta: 109B total (the vision tower included)
    active = L * (ATTN + 2 * EXPERT + D * 16) + NORMS + 2 * EMB  # top-1 routed + the shared expert
    assert P.active_params(cfg) == active == 17_172_894_720
    assert round(active / 1e9) == 17  # Meta: 17B active (two figures), with the embedding
    assert sum(P.stored_weight_bytes(cfg).values()) == 2 * total  # bf16
    assert cfg.num_moe_layers == 48 and cfg.intermediate_size == 16384
    assert cfg.rope_scaling.kind == "llama3" and cfg.rope_scaling.factor == 16 and cfg.max_position_embeddings == 10_485_760


def test_llama_4_maverick_by_hand():
    cfg = get_model("llama-4-maverick")
    moe_layer = 128 * EXPERT + EXPERT + D * 128
    total = L * ATTN + 24 * moe_layer + 24 * DENSE + NORMS + 2 * EMB  # MoE on layers 1, 3, ..., 47
    assert P.total_params(cfg) == total == 400_711_848_960
    assert abs((total + P.vision_params(cfg)) / 400e9 - 1) < 0.01  # Meta: 400B total
    assert cfg.moe.dense_layers == tuple(range(0, 48, 2))
    active = L * ATTN + 24 * (2 * EXPERT + D * 128) + 24 * DENSE + NORMS + 2 * EMB
    assert P.active_params(cfg) == active and round(active / 1e9) == 17
    assert cfg.rope_scaling is None and cfg.max_position_embeddings == 1_048_576


@pytest.mark.parametrize("preset", ["llama-4-scout", "llama-4-maverick"])
def test_llama_4_kv_by_hand_chunked_layers_hold_one_chunk(preset):
    cfg = get_model(preset)
    # NoPE (full attention) on layers 3, 7, ..., 47; the 36 others attend within 8,192-token chunks
    assert cfg.window_kind == "chunked" and cfg.sliding_window == 8192
    assert cfg.sliding_window_layers == tuple(i for i in range(48) if (i + 1) % 4)
    per_layer_token = 2 * 8 * 128 * 2  # K and V, 8 heads of 128, bf16
    assert kv.kv_bytes_per_token(cfg, 2.0) == 48 * per_layer_token == 196_608
    assert kv.kv_cache_bytes_for(cfg, 4096, 1, 2.0) == 48 * 4096 * per_layer_token  # inside one chunk: every layer holds N
    assert kv.kv_cache_bytes_for(cfg, 32768, 2, 2.0) == 2 * (12 * 32768 + 36 * 8192) * per_layer_token == 5_637_144_576


def test_llama_4_decode_reads_its_own_chunk_on_chunked_layers():
    from rooflinecli.analysis import Workload
    from rooflinecli.hardware import get_spec
    from rooflinecli.predict import analyze

    cfg = get_model("llama-4-scout")
    a = analyze(cfg, get_spec("h200"), Workload(batch=1, prompt_len=32768, gen_len=1, mode="roof"))
    attn = {op.group: op for op in a.decode.ops if op.kind == "attention"}
    per_token = 2 * 8 * 128 * 2
    # the new token at position 32,768 = 4 x 8,192 opens a chunk: it attends itself alone
    assert attn["window"].kv_read_bytes == 36 * 1 * per_token and attn["window"].note == "chunks of 8192"
    assert attn["full"].kv_read_bytes == 12 * 32768 * per_token


def test_a_text_only_llama_4_config_reads_as_its_language_model():
    raw = preset_raw("llama-4-maverick")["text_config"]  # Llama4ForCausalLM
    cfg = parse(raw)
    assert cfg.model_type == "llama4_text" and cfg.vision is None
    assert P.total_params(cfg) == P.total_params(get_model("llama-4-maverick"))


def test_llama_4_explicit_layer_lists():
    raw = dict(preset_raw("llama-4-scout")["text_config"], moe_layers=[1, 5], layer_types=["full_attention"] * 47 + ["chunked_attention"])
    cfg = parse(raw)
    assert cfg.moe.dense_layers == tuple(i for i in range(48) if i not in (1, 5)) and cfg.sliding_window_layers == (47,)
    assert parse(dict(raw, attention_chunk_size=None)).sliding_window is None


BAD_LLAMA4 = [
    (dict(no_rope_layers=[1, 0]), "field 'text_config.no_rope_layers' must be a list of 48 entries of 0 (NoPE, full attention) or 1"),
    (dict(no_rope_layers=[2] * 48), "field 'text_config.no_rope_layers' must be a list of 48 entries"),
    (dict(moe_layers=[0, 48]), "field 'text_config.moe_layers' lists layer 48; layers are 0 to 47"),
    (dict(layer_types=["sliding_attention"] * 48), "field 'text_config.layer_types' entry 0 is \"sliding_attention\"; modelled: chunked_attention"),
    (dict(attention_chunk_size=0), "field 'text_config.attention_chunk_size' must be positive, got 0"),
    (dict(num_experts_per_tok=17), "field 'text_config.num_experts_per_tok' (17) must not exceed the number of experts (16)"),
]


@pytest.mark.parametrize("change,message", BAD_LLAMA4, ids=[str(i) for i in range(len(BAD_LLAMA4))])
def test_bad_llama_4_fields_are_one_line(tmp_path, change, message):
    raw = preset_raw("llama-4-scout")
    raw["text_config"] = dict(raw["text_config"], **change)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(raw))
    r = runner.invoke(app, ["model", "show", str(p)])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {p}: ") and message in lines[0], r.output


def test_model_show_names_chunked_attention_and_the_vision_tower():
    r = runner.invoke(app, ["model", "show", "llama-4-scout"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "8192-token chunks on 36 of 48 layers" in r.output and "(p mod chunk) + 1 tokens of its chunk" in r.output
    assert "as a window" not in r.output
    assert not any(line.startswith("│ sliding window") for line in r.output.splitlines())
    assert "871,932,416 params" in r.output and "reported, not timed" in r.output


def test_kv_what_if_names_the_chunks():
    r = runner.invoke(app, ["kv", "--model", "llama-4-scout", "--hw", "h200", "--context", "100000", "--variants", "gqa", "--json"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["variants"]
    assert row["attention"] == "8 KV x 128, chunks 8192 (36/48)"
    assert row["kv_cache_bytes"] == (12 * 100_000 + 36 * 8192) * 2 * 8 * 128 * 2
    # the step reads the 1,697 tokens of position 100,000's chunk (100,000 = 12 x 8,192 + 1,696)
    assert row["kv_read_bytes_per_step"] == (12 * 100_000 + 36 * 1697) * 2 * 8 * 128 * 2


def test_llama_3_band_factors_may_be_equal():
    raw = dict(preset_raw("llama-3.1-8b"))
    raw["rope_scaling"] = dict(raw["rope_scaling"], low_freq_factor=1.0, high_freq_factor=1.0)
    assert parse(raw).rope_scaling.factor == 8


# ------------------------------------------------------------------------------------------------
# Pixtral's vision tower (Pixtral-12B as Llava, Mistral-Small-3.1 as Mistral-3)
# ------------------------------------------------------------------------------------------------

PIXTRAL = {"model_type": "pixtral", "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
           "head_dim": 64, "patch_size": 16, "image_size": 1024, "num_channels": 3, "hidden_act": "silu", "rope_theta": 10000.0}
#: Pixtral-ViT: q, k, v, o (1024 -> 1024, no biases), gated MLP 1024 -> 4096 -> 1024, two RMSNorms; patch conv + ln_pre
PIXTRAL_VIT = 24 * (4 * 1024 * 1024 + 3 * 1024 * 4096 + 2 * 1024) + 3 * 16 * 16 * 1024 + 1024


def _mistral_text(**changes) -> dict:
    return dict(preset_raw("mistral-7b"), hidden_size=5120, num_hidden_layers=40, num_attention_heads=32, num_key_value_heads=8,
                head_dim=128, intermediate_size=14336, vocab_size=131072, **changes)


def test_pixtral_12b_vision_tower_by_hand():
    raw = {"model_type": "llava", "text_config": _mistral_text(), "vision_config": PIXTRAL, "vision_feature_layer": -1,
           "projector_hidden_act": "gelu"}
    cfg = parse(raw)
    projector = 1024 * 5120 + 5120 + 5120 * 5120 + 5120  # Llava's two linears, biases by default
    assert P.vision_params(cfg) == PIXTRAL_VIT + projector == 434_957_312
    assert PIXTRAL_VIT == 403_489_792 and abs(PIXTRAL_VIT / 400e6 - 1) < 0.01  # Mistral AI: "a 400M vision encoder"
    assert cfg.vision.note.startswith("vision tower (Pixtral ViT, 24 layers of width 1024) reported, not timed")
    text = 2 * 131072 * 5120 + 40 * (2 * 5120 * 4096 + 2 * 5120 * 1024 + 3 * 5120 * 14336 + 2 * 5120) + 5120
    assert P.total_params(cfg) == text


def test_mistral_3_pixtral_with_its_patch_merger():
    raw = {"model_type": "mistral3", "text_config": _mistral_text(), "vision_config": PIXTRAL, "spatial_merge_size": 2,
           "multimodal_projector_bias": False, "vision_feature_layer": -1}
    cfg = parse(raw)
    projector = 1024 + 1024 * 4 * 1024 + 1024 * 5120 + 5120 * 5120  # RMSNorm, merger 2x2 patches -> 1024, two linears without bias
    assert P.vision_params(cfg) == PIXTRAL_VIT + projector
    two_layers = parse(dict(raw, vision_feature_layer=[-1, -2]))  # the features of two layers, concatenated
    assert P.vision_params(two_layers) == P.vision_params(cfg) + 1024 * 5120


def test_pixtral_bad_fields_are_named():
    raw = {"model_type": "mistral3", "text_config": _mistral_text(), "vision_config": dict(PIXTRAL, intermediate_size=0)}
    with pytest.raises(RooflineError, match=r"field 'vision_config.intermediate_size' must be positive, got 0"):
        parse(raw)
    with pytest.raises(RooflineError, match=r"field 'multimodal_projector_bias' must be true or false"):
        parse(dict(raw, vision_config=PIXTRAL, multimodal_projector_bias="no"))


# ------------------------------------------------------------------------------------------------
# Kimi-K2: the checkpoint's own count
# ------------------------------------------------------------------------------------------------

#: moonshotai/Kimi-K2-Instruct's model.safetensors.index.json: "total_size" of its 61 layers in bytes
#: (fp8 e4m3 weights with fp32 128x128 block scales, bf16 embedding, LM head, norms and routers)
KIMI_K2_SAFETENSORS_BYTES = 1_029_173_256_720


def test_kimi_k2_stored_bytes_match_its_safetensors_index():
    cfg = get_model("kimi-k2")
    stored = sum(P.stored_weight_bytes(cfg).values())
    assert abs(stored / KIMI_K2_SAFETENSORS_BYTES - 1) < 1e-6  # 1,029,173,203,808 B counted: 52,912 B short
    assert abs(P.total_params(cfg) / 1.03e12 - 1) < 0.01  # 1.026T: the checkpoint's 1.03T (no MTP module is stored)


def _scout_fp8():
    """Llama-4-Scout as an fbgemm FP8 checkpoint that converts only the routed experts: attention,
    the shared expert, the router, the LM head and the vision tower stay 16-bit, named as the
    multimodal checkpoint names them (``language_model.model.layers.<i>...``)."""
    raw = preset_raw("llama-4-scout")
    keep = [f"language_model.model.layers.{i}.{m}" for i in range(L) for m in ("self_attn", "feed_forward.shared_expert", "feed_forward.router")]
    raw["quantization_config"] = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                                  "modules_to_not_convert": keep + ["lm_head", "vision_model", "multi_modal_projector"]}
    return parse(raw)


def test_llama_4_fp8_checkpoint_stores_the_routed_experts_in_fp8_by_hand():
    cfg = _scout_fp8()
    w = P.stored_weight_bytes(cfg)
    # 48 MoE layers x 16 routed experts: gate, up, down in fp8, one fp32 scale per output row
    assert w["routed_experts"] == L * 16 * (EXPERT * 1 + (8192 + 8192 + 5120) * 4) == 96_702_824_448
    assert w["attention"] == L * ATTN * 2 and w["shared_experts"] == L * EXPERT * 2
    assert w["lm_head"] == EMB * 2 and w["embeddings"] == EMB * 2 and w["router"] == L * D * 16 * 2
    total = sum(w.values())
    assert total == 96_702_824_448 + 2 * (L * (ATTN + EXPERT + D * 16) + NORMS + 2 * EMB)
    # against 2 bytes a weight: the routed experts are 89.9% of the weights, so the file is 55% as large
    assert total / (2 * P.total_params(cfg)) == pytest.approx(0.551, abs=0.001)
    assert cfg.quantization.compute_dtype == "fp8" and P.total_params(cfg) == 107_769_861_120


def test_llama_4_fp8_checkpoint_decode_reads_one_fp8_expert_per_layer():
    from rooflinecli.analysis import Workload
    from rooflinecli.hardware import get_spec
    from rooflinecli.predict import analyze

    cfg = _scout_fp8()
    a = analyze(cfg, get_spec("h200"), Workload(batch=1, prompt_len=1024, gen_len=16))
    # batch 1, top-1: each MoE layer reads one routed expert (fp8 + scales), the 16-bit rest, one embedding row
    per_step = (L * (EXPERT + (8192 + 8192 + 5120) * 4) + 2 * (L * (ATTN + EXPERT + D * 16) + NORMS + EMB) + 2 * D)
    assert a.decode.totals["weights_bytes"] == pytest.approx(per_step, rel=1e-9)
    assert a.memory["weights_bytes_per_gpu"] == pytest.approx(sum(P.stored_weight_bytes(cfg).values()), rel=1e-12)
