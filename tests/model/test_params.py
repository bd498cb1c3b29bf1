"""Parameter counts against published totals, KV bytes derived by hand, and invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooflinecli import formulas, kv, params
from rooflinecli.model_registry import get_model, preset_ids
from rooflinecli.models import CompressedAttention, MLAConfig, ModelConfig, MoEConfig

# ------------------------------------------------------------------------------------------------
# Published totals
# ------------------------------------------------------------------------------------------------

# The figures, written here (not read from the preset files) so a wrong preset fails.
PUBLISHED_TOTAL = {
    "llama-3-8b": 8.03e9,
    "llama-3-70b": 70.6e9,
    "llama-3.1-405b": 405e9,
    "mixtral-8x7b": 46.7e9,
    "deepseek-v3": 671e9,
    "mistral-7b": 7.24e9,
    "qwen3-30b-a3b": 30.5e9,
    "qwen2.5-7b": 7.61e9,
    "deepseek-v2-lite": 15.7e9,
    "llama-2-7b": 6.74e9,
    "llama-2-13b": 13.0e9,
    "llama-2-70b": 69.0e9,
    "llama-3.1-8b": 8.03e9,
    "llama-3.1-70b": 70.6e9,
    "llama-3.3-70b": 70.6e9,
    "llama-3.1-8b-fp8": 8.03e9,
    "llama-3.3-70b-fp8": 70.6e9,
    "qwen2.5-72b": 72.7e9,
    "qwen3-8b": 8.2e9,
    "qwen3-32b": 32.8e9,
    "qwen3-235b-a22b": 235e9,
    "qwen3-235b-a22b-fp8": 235e9,
    "gpt-oss-20b": 20.91e9,
    "gpt-oss-120b": 116.83e9,
    "deepseek-r1": 671e9,
    "gemma-2-9b": 9.24e9,
    "gemma-2-27b": 27.2e9,
    "gemma-3-27b": 27.4e9,  # with the vision tower
    "phi-4": 14.7e9,
    "mixtral-8x22b": 141e9,
    "falcon-180b": 180e9,
    "gpt-j-6b": 6_053_381_344,
    "kimi-k2": 1.03e12,  # the checkpoint's own count (tests/model/test_llama4_pixtral.py: its safetensors index)
    "llama-4-scout": 109e9,  # with the vision tower
    "llama-4-maverick": 400e9,  # with the vision tower
    "gpt2": 124_439_808,
}

#: published figures given to fewer figures than 1% needs (none left: Kimi K2's "1T" gave way to its
#: checkpoint's own 1.03T)
ROUNDED: dict[str, float] = {}


def _total_as_published(cfg) -> float:
    """What a publisher counts: the language model, plus a multimodal config's vision tower."""
    return params.total_params(cfg) + params.vision_params(cfg)


@pytest.mark.parametrize("model", sorted(PUBLISHED_TOTAL))
def test_total_params_within_one_percent_of_published(model):
    cfg = get_model(model)
    total = _total_as_published(cfg)
    assert abs(total / PUBLISHED_TOTAL[model] - 1) < ROUNDED.get(model, 0.01), f"{model}: {total / 1e9:.3f}B"


def test_every_preset_matches_its_own_published_total():
    for model in preset_ids():
        cfg = get_model(model)
        assert cfg.published_params is not None, model
        assert model in PUBLISHED_TOTAL, model
        assert abs(_total_as_published(cfg) / cfg.published_params - 1) < ROUNDED.get(model, 0.01), model


PUBLISHED_ACTIVE = {  # (published, counted with the embedding table?)
    "qwen3-235b-a22b": (22e9, True),
    "mixtral-8x22b": (39e9, True),
    "gpt-oss-20b": (3.61e9, False),  # OpenAI counts the unembedding, not the embedding
    "gpt-oss-120b": (5.13e9, False),
    "deepseek-r1": (37e9, False),
    "kimi-k2": (32e9, False),
    "llama-4-scout": (17e9, True),  # Meta's "17B" (two figures): 17.17B with the embedding, 16.14B without
    "llama-4-maverick": (17e9, True),  # 17.18B with the embedding
}


@pytest.mark.parametrize("model", sorted(PUBLISHED_ACTIVE))
def test_active_params_of_new_moe_presets(model):
    want, with_embeddings = PUBLISHED_ACTIVE[model]
    got = params.active_params(get_model(model), include_embeddings=with_embeddings)
    assert abs(got / want - 1) < 0.015, f"{model}: {got / 1e9:.3f}B"


def test_gpt2_count_is_exact():
    # transformers' GPT2LMHeadModel (tied head) has 124,439,808 parameters:
    # wte 50257*768 + wpe 1024*768 + 12 * (2 LayerNorms 2*2*768 + c_attn 768*2304+2304
    # + c_proj 768*768+768 + c_fc 768*3072+3072 + mlp c_proj 3072*768+768) + ln_f 2*768.
    per_layer = 2 * 2 * 768 + (768 * 2304 + 2304) + (768 * 768 + 768) + (768 * 3072 + 3072) + (3072 * 768 + 768)
    expected = 50257 * 768 + 1024 * 768 + 12 * per_layer + 2 * 768
    assert expected == 124_439_808
    assert params.total_params(get_model("gpt2")) == expected


def test_mixtral_active_counts_embeddings():
    # Mistral AI's "12.9B active" matches the count WITH the embedding table (12.88B); without it
    # the count is 12.75B, 1.2% short.
    cfg = get_model("mixtral-8x7b")
    assert abs(params.active_params(cfg) / 12.9e9 - 1) < 0.01
    assert abs(params.active_params(cfg, include_embeddings=False) / 12.9e9 - 1) > 0.01


def test_deepseek_v3_active_matches_without_embeddings():
    # DeepSeek's "37B activated" (two significant figures): the count without the embedding table
    # is 36.63B, which rounds to 37B; with it, 37.55B rounds to 38B.
    cfg = get_model("deepseek-v3")
    without = params.active_params(cfg, include_embeddings=False)
    with_ = params.active_params(cfg)
    assert round(without / 1e9) == 37
    assert round(with_ / 1e9) == 38
    assert abs(without / 37e9 - 1) < abs(with_ / 37e9 - 1) < 0.015
    # by hand: per layer MLA 187,107,328 (+ 2*7168 norms); 3 dense MLPs 3*7168*18432*3;
    # 58 MoE layers of 9 experts (1 shared + 8 routed) 9*3*7168*2048 + router 256*7168 (+256 bias);
    # LM head 129280*7168; final norm 7168.
    attn = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168 + 1536 + 512
    by_hand = 61 * (attn + 2 * 7168) + 3 * 3 * 7168 * 18432 + 58 * (9 * 3 * 7168 * 2048 + 256 * 7168 + 256) + 129280 * 7168 + 7168
    assert without == by_hand


def test_deepseek_v3_total_is_main_model_without_mtp():
    cfg = get_model("deepseek-v3")
    assert abs(params.total_params(cfg) / 671e9 - 1) < 0.001  # 671.03B
    b = params.param_breakdown(cfg)
    assert b["routed_experts"] == 58 * 256 * 3 * 7168 * 2048
    assert b["shared_experts"] == 58 * 1 * 3 * 7168 * 2048


def test_deepseek_v3_active_is_forced_by_the_total_and_matches_readme_weights_without_embeddings():
    # With the total at the published 671B, the active count is total minus the idle routed experts:
    # 248 of 256 per MoE layer, 58 layers, 3 x 7168 x 2048 each. DeepSeek's README_WEIGHTS.md says
    # 36.7B "including 0.9B for Embedding and 0.9B for the output Head"; that figure matches the
    # count with only one of the two 0.93B matrices (ours without the embedding table).
    cfg = get_model("deepseek-v3")
    total = params.total_params(cfg)
    idle = (256 - 8) * 3 * 7168 * 2048 * 58
    assert params.active_params(cfg) == total - idle
    assert abs(total / 671e9 - 1) < 0.001
    without = params.active_params(cfg, include_embeddings=False)
    assert params.active_params(cfg) - without == 129280 * 7168
    assert abs(without / 36.7e9 - 1) < 0.003
    assert params.active_params(cfg) / 36.7e9 - 1 > 0.02  # both matrices: 37.55B, not 36.7B


def test_breakdown_sums_to_total_and_active_never_exceeds_total():
    for model in preset_ids():
        cfg = get_model(model)
        b = params.param_breakdown(cfg)
        assert set(b) == set(params.COMPONENTS)
        assert math.isclose(sum(b.values()), params.total_params(cfg))
        assert params.active_params(cfg, include_embeddings=False) <= params.active_params(cfg) <= params.total_params(cfg)
        if cfg.moe is None:
            assert params.active_params(cfg) == params.total_params(cfg)
        else:
            assert params.active_params(cfg) < params.total_params(cfg)


def test_mla_inventory_names_and_shapes():
    cfg = get_model("deepseek-v3")
    lins = {lin.name: lin for lin in params.attention_linears(cfg)}
    assert list(lins) == ["q_a", "q_b", "kv_a", "kv_b", "o"]
    assert (lins["kv_a"].d_in, lins["kv_a"].d_out) == (7168, 512 + 64)
    assert (lins["kv_b"].d_in, lins["kv_b"].d_out) == (512, 128 * (128 + 128))
    lite = get_model("deepseek-v2-lite")  # no query LoRA: a plain q projection
    assert [lin.name for lin in params.attention_linears(lite)][0] == "q"
    assert params.routed_expert_linears(cfg)[0].count == 1
    assert params.shared_expert_linears(lite)[0].count == 2
    assert params.router_linear(get_model("llama-3-8b")) is None
    assert params.lm_head_linear(get_model("gpt2")) is None  # tied


def test_linear_params_formula():
    assert params.Linear("x", "attention", 10, 20).params == 200
    assert params.Linear("x", "attention", 10, 20, count=3, bias=True).params == 3 * (200 + 20)


# ------------------------------------------------------------------------------------------------
# KV bytes per token, derived by hand
# ------------------------------------------------------------------------------------------------


def test_kv_bytes_per_token_mha_gpt2_by_hand():
    # GPT-2: 12 layers, MHA (12 KV heads), head dim 768/12 = 64, bf16 (2 bytes):
    # K and V: 2 * 12 layers * 12 heads * 64 * 2 bytes = 36,864 bytes per token.
    assert 2 * 12 * 12 * 64 * 2 == 36_864
    assert kv.kv_bytes_per_token(get_model("gpt2"), 2.0) == 36_864


def test_kv_bytes_per_token_gqa_llama3_70b_by_hand():
    # Llama-3-70B: 80 layers, 8 KV heads, head dim 8192/64 = 128, bf16:
    # 2 * 80 * 8 * 128 * 2 = 327,680 bytes (320 KiB) per token.
    assert 2 * 80 * 8 * 128 * 2 == 327_680
    assert kv.kv_bytes_per_token(get_model("llama-3-70b"), 2.0) == 327_680
    # fp8: half; int4: a quarter.
    assert kv.kv_bytes_per_token(get_model("llama-3-70b"), 1.0) == 163_840
    assert kv.kv_bytes_per_token(get_model("llama-3-70b"), 0.5) == 81_920


def test_kv_bytes_per_token_mla_deepseek_v3_by_hand():
    # DeepSeek-V3 MLA: one latent (kv_lora_rank 512) plus the shared RoPE key (64) per layer,
    # 61 layers, bf16: 61 * (512 + 64) * 2 = 70,272 bytes per token (vs MHA-equivalent
    # 2 * 61 * 128 heads * 192 * 2 = 5,996,544).
    assert 61 * (512 + 64) * 2 == 70_272
    assert kv.kv_bytes_per_token(get_model("deepseek-v3"), 2.0) == 70_272


def test_kv_cache_sliding_window_caps_context():
    # Mistral-7B: W = 4096 on all 32 layers. At N = 10,000, B = 2, bf16:
    # 2 * 32 * 8 * 128 * 4096 * 2 bytes * 2 sequences = 1,073,741,824 bytes.
    cfg = get_model("mistral-7b")
    assert kv.kv_cache_bytes_for(cfg, 10_000, 2, 2.0) == 2 * 32 * 8 * 128 * 4096 * 2 * 2
    assert kv.kv_cache_bytes_for(cfg, 1_000, 2, 2.0) == 2 * 32 * 8 * 128 * 1000 * 2 * 2


def test_kv_cache_mixed_window_layers():
    cfg = get_model("llama-3-8b").with_(sliding_window=100, sliding_window_layers=tuple(range(0, 32, 2)))
    # 16 full layers at N = 1000, 16 window layers at 100
    expected = formulas.kv_cache_bytes(16, 8, 128, 1000, 2, 1) + formulas.kv_cache_bytes(16, 8, 128, 100, 2, 1)
    assert kv.kv_cache_bytes_for(cfg, 1000, 1, 2.0) == expected


def test_kv_cache_paged_and_compressed():
    cfg = get_model("llama-3-8b")
    # 100 tokens in blocks of 16 -> 7 blocks = 112 tokens
    assert kv.kv_cache_bytes_for(cfg, 100, 1, 2.0, block_size=16) == kv.kv_cache_bytes_for(cfg, 112, 1, 2.0)
    comp = cfg.with_(compressed=CompressedAttention(ratio=4.0, top_k=None, window=128))
    # N = 1000: ceil(1000/4) = 250 compressed entries + 128 local tokens = 378 entries per layer
    assert kv.kv_cache_bytes_for(comp, 1000, 1, 2.0) == kv.kv_cache_bytes_for(cfg, 378, 1, 2.0)


def test_kv_cache_broadcasts_over_arrays():
    cfg = get_model("mistral-7b")
    N = np.array([[100], [5000], [20000]])
    B = np.array([[1, 8]])
    got = kv.kv_cache_bytes_for(cfg, N, B, 1.0)
    assert got.shape == (3, 2)
    for i in range(3):
        for j in range(2):
            assert got[i, j] == kv.kv_cache_bytes_for(cfg, int(N[i, 0]), int(B[0, j]), 1.0)
    assert isinstance(kv.kv_cache_bytes_for(cfg, 100, 1, 2.0), float)


# ------------------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------------------


def _cfg(L=4, d=256, H=8, H_kv=8, D=32, **kw) -> ModelConfig:
    return ModelConfig(
        name="t", model_type="llama", source="test", num_layers=L, hidden_size=d, num_heads=H,
        num_kv_heads=H_kv, head_dim=D, intermediate_size=4 * d, vocab_size=1000, **kw,
    )


_FULL_MODELS = ["gpt2", "llama-3-70b", "deepseek-v3", "qwen3-30b-a3b"]


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(_FULL_MODELS),
    N=st.integers(1, 1 << 20),
    B=st.integers(1, 512),
    a=st.integers(1, 16),
    b=st.sampled_from([0.5, 1.0, 2.0, 4.0, 0.4375]),
)
def test_kv_bytes_linear_in_context_and_batch(model, N, B, a, b):
    cfg = get_model(model)
    base = kv.kv_cache_bytes_for(cfg, N, B, b)
    assert math.isclose(kv.kv_cache_bytes_for(cfg, a * N, B, b), a * base, rel_tol=1e-12)
    assert math.isclose(kv.kv_cache_bytes_for(cfg, N, a * B, b), a * base, rel_tol=1e-12)
    assert math.isclose(base, N * B * kv.kv_bytes_per_token(cfg, b), rel_tol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    L=st.integers(1, 128),
    H=st.sampled_from([2, 4, 8, 16, 32, 64, 128]),
    D=st.sampled_from([32, 64, 80, 128, 256]),
    g=st.integers(1, 7),
    N=st.integers(1, 1 << 18),
)
def test_mqa_le_gqa_le_mha(L, H, D, g, N):
    groups = [h for h in range(1, H + 1) if H % h == 0]
    H_kv = groups[g % len(groups)]
    mqa = _cfg(L=L, H=H, H_kv=1, D=D)
    gqa = _cfg(L=L, H=H, H_kv=H_kv, D=D)
    mha = _cfg(L=L, H=H, H_kv=H, D=D)
    assert mqa.attention_kind == "mqa"
    assert mha.attention_kind == "mha"
    k = [kv.kv_cache_bytes_for(c, N, 1, 2.0) for c in (mqa, gqa, mha)]
    assert k[0] <= k[1] <= k[2]
    assert k[2] == H * k[0]


@settings(max_examples=80, deadline=None)
@given(
    L=st.integers(1, 16),
    E=st.integers(1, 64),
    k_frac=st.floats(0.0, 1.0),
    shared=st.integers(0, 2),
    dense_first=st.integers(0, 4),
    tie=st.booleans(),
    mla=st.booleans(),
)
def test_active_le_total(L, E, k_frac, shared, dense_first, tie, mla):
    top_k = max(1, round(k_frac * E))
    moe = MoEConfig(
        num_routed_experts=E, top_k=top_k, expert_intermediate_size=64, num_shared_experts=shared,
        shared_expert_intermediate_size=64 if shared else 0, dense_layers=tuple(range(min(dense_first, L))),
    )
    m = MLAConfig(q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16) if mla else None
    cfg = _cfg(L=L, moe=moe, tie_embeddings=tie, mla=m)
    total, active = params.total_params(cfg), params.active_params(cfg)
    assert 0 < params.active_params(cfg, include_embeddings=False) <= active <= total
    # routed experts beyond top-k are exactly the gap
    gap = cfg.num_moe_layers * (E - top_k) * sum(lin.params for lin in params.routed_expert_linears(cfg))
    assert math.isclose(total - active, gap)
