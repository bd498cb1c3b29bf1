"""``roofline model list`` / ``roofline model show`` through the real entry point, and bad configs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.model_registry import preset_ids
from conftest import TINY_DECODER_CONFIG

runner = CliRunner()

GOOD = {"model_type": "llama", **TINY_DECODER_CONFIG}


def invoke(*args):
    return runner.invoke(app, list(args))


def test_model_list_table():
    r = invoke("model", "list")
    assert r.exit_code == 0, r.output
    for model in preset_ids():
        assert model in r.output
    assert "KV bytes/token" in r.output and "mla + MoE" in r.output
    assert "327,680" in r.output  # llama-3-70b at bf16


def test_model_list_json():
    r = invoke("model", "list", "--json")
    assert r.exit_code == 0
    rows = {row["id"]: row for row in json.loads(r.output)}
    assert set(rows) == set(preset_ids())
    assert rows["deepseek-v3"]["attention"] == "mla" and rows["deepseek-v3"]["kv_bytes_per_token"] == 70_272


def test_model_show_json_keys_and_values():
    r = invoke("model", "show", "llama-3-70b", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for key in ("name", "num_layers", "total_params", "active_params", "kv_bytes_per_token", "attention",
                "param_breakdown", "hidden_size", "num_kv_heads", "head_dim", "vocab_size"):
        assert key in d, key
    assert d["name"] == "llama-3-70b" and d["num_layers"] == 80 and d["attention"] == "gqa"
    assert d["kv_bytes_per_token"] == 327_680 and d["kv_dtype"] == "bf16"
    assert abs(d["total_params"] / 70.6e9 - 1) < 0.01
    assert sum(d["param_breakdown"].values()) == pytest.approx(d["total_params"])


@pytest.mark.parametrize("dtype,expected", [("fp32", 655_360), ("bf16", 327_680), ("fp16", 327_680), ("fp8", 163_840), ("int8", 163_840), ("int4", 81_920)])
def test_model_show_kv_dtype(dtype, expected):
    r = invoke("model", "show", "llama-3-70b", "--kv-dtype", dtype, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["kv_bytes_per_token"] == expected


def test_model_show_kv_bits_fractional():
    r = invoke("model", "show", "deepseek-v3", "--kv-bits", "3.5", "--json")
    assert r.exit_code == 0, r.output
    # 61 layers * (512 + 64) * 3.5/8 bytes = 15,372 bytes
    assert json.loads(r.output)["kv_bytes_per_token"] == pytest.approx(61 * 576 * 3.5 / 8)


def test_model_show_table():
    r = invoke("model", "show", "mixtral-8x7b")
    assert r.exit_code == 0, r.output
    assert "8 routed experts, top-2" in r.output and "routed_experts" in r.output
    assert "131,072 B" in r.output


def test_model_show_table_states_published_counts_and_the_convention():
    from rooflinecli import params
    from rooflinecli.model_registry import get_model

    cfg = get_model("deepseek-v3")
    with_, without = params.active_params(cfg), params.active_params(cfg, include_embeddings=False)
    r = runner.invoke(app, ["model", "show", "deepseek-v3"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert f"37 B active (ours {with_ / 37e9 - 1:+.1%}; without embeddings {without / 37e9 - 1:+.1%})" in text
    assert "(ours +1.5%; without embeddings -1.0%)" in text  # 37.55B and 36.63B against 37B
    assert "README_WEIGHTS.md" in text and "36.7B" in text


def test_model_show_config_path(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(GOOD))
    r = invoke("model", "show", str(p), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["num_layers"] == 4 and d["kv_bytes_per_token"] == 2 * 4 * 2 * 8 * 2
    r = invoke("model", "show", str(p))
    assert r.exit_code == 0 and "published" not in r.output  # a bare config.json states no counts


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--kv-bits", "0"], "--kv-bits"),
        (["--kv-bits", "-4"], "--kv-bits"),
        (["--kv-bits", "4", "--kv-dtype", "fp8"], "not both"),
    ],
)
def test_bad_kv_options(args, fragment):
    r = invoke("model", "show", "gpt2", *args)
    assert r.exit_code == 2
    assert fragment in r.output and "Traceback" not in r.output


def test_unknown_kv_dtype_is_rejected():
    r = invoke("model", "show", "gpt2", "--kv-dtype", "fp9")
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_unknown_model_one_line():
    r = invoke("model", "show", "llama-3-7b")
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and r.output.startswith("error: unknown model 'llama-3-7b'")


# ------------------------------------------------------------------------------------------------
# Bad configs: one line naming the file and the field, exit 2, no traceback
# ------------------------------------------------------------------------------------------------


def _with(**changes):
    raw = dict(GOOD)
    for k, v in changes.items():
        if v is _DROP:
            raw.pop(k)
        else:
            raw[k] = v
    return raw


_DROP = object()

BAD_CONFIGS = {
    "not-json": ("{ this is not json", "not valid JSON"),
    "not-an-object": ([1, 2, 3], "must be a JSON object"),
    "unknown-model-type": (_with(model_type="lama"), "field 'model_type': unknown model_type 'lama' (did you mean 'llama'?)"),
    "missing-model-type": (_with(model_type=_DROP), "field 'model_type' is missing"),
    "missing-field": (_with(hidden_size=_DROP), "field 'hidden_size' is missing"),
    "wrong-type": (_with(num_hidden_layers="32"), "field 'num_hidden_layers' must be an integer"),
    "bool-for-int": (_with(vocab_size=True), "field 'vocab_size' must be an integer"),
    "float-for-int": (_with(intermediate_size=128.5), "field 'intermediate_size' must be an integer"),
    "zero": (_with(num_attention_heads=0), "field 'num_attention_heads' must be positive"),
    "negative": (_with(hidden_size=-64), "field 'hidden_size' must be positive"),
    "heads-not-divisible": (_with(num_key_value_heads=3), "field 'num_key_value_heads' (3) must divide num_attention_heads (8)"),
    "more-kv-heads-than-heads": (_with(num_key_value_heads=16), "field 'num_key_value_heads' (16) must divide"),
    "hidden-not-divisible": (_with(hidden_size=60), "field 'hidden_size' (60) must be divisible by num_attention_heads"),
    "wrong-bool": (_with(tie_word_embeddings="yes"), "field 'tie_word_embeddings' must be true or false"),
    "bad-rope-theta": (_with(rope_theta="big"), "field 'rope_theta' must be a number"),
    "top-k-above-experts": (_with(model_type="mixtral", num_local_experts=4, num_experts_per_tok=8), "field 'num_experts_per_tok' (8) must not exceed"),
    "missing-experts": (_with(model_type="mixtral", num_experts_per_tok=2), "field 'num_local_experts' is missing"),
    "mla-missing-kv-lora": (
        _with(model_type="deepseek_v3", qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16),
        "field 'kv_lora_rank' is missing",
    ),
    "negative-first-k-dense": (
        _with(model_type="deepseek_v3", kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
              n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, first_k_dense_replace=-1),
        "field 'first_k_dense_replace' must not be negative",
    ),
    "layer-types-length": (_with(model_type="qwen3", layer_types=["full_attention"]), "field 'layer_types' must be a list of 4"),
    "layer-types-entry": (
        _with(model_type="qwen3", sliding_window=16, layer_types=["full_attention"] * 3 + ["linear_attention"]),
        "field 'layer_types' entry 3",
    ),
    "mlp-only-layers-type": (
        _with(model_type="qwen3_moe", num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, mlp_only_layers="all"),
        "field 'mlp_only_layers' must be a list of integers",
    ),
    "meta-unknown-key": (_with(_rooflinecli={"idd": "x"}), "field '_rooflinecli.idd' is not known"),
}


@pytest.mark.parametrize("kind", sorted(BAD_CONFIGS))
def test_bad_config_one_line_exit_2(tmp_path, kind):
    content, fragment = BAD_CONFIGS[kind]
    p = tmp_path / f"{kind}.json"
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    r = invoke("model", "show", str(p))
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert r.output.count("\n") == 1, r.output
    assert r.output.startswith(f"error: {p}: "), r.output
    assert fragment in r.output, r.output


def test_missing_config_file(tmp_path):
    p = tmp_path / "nope" / "config.json"
    r = invoke("model", "show", str(p))
    assert r.exit_code == 2 and r.output == f"error: {p}: no such model config file\n"


def test_folder_without_config(tmp_path):
    r = invoke("model", "show", str(tmp_path))
    assert r.exit_code == 2 and "no such model config file" in r.output


def test_python_dash_m_entry_point():
    r = subprocess.run(
        [sys.executable, "-m", "rooflinecli", "model", "show", "gpt2", "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kv_bytes_per_token"] == 36_864


def test_show_does_not_import_heavy_packages():
    code = (
        "import sys; from typer.testing import CliRunner; from rooflinecli.cli import app;"
        "r = CliRunner().invoke(app, ['model', 'show', 'llama-3-70b', '--json']); assert r.exit_code == 0;"
        "print(','.join(m for m in ('torch', 'triton', 'pandas', 'plotly') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""
