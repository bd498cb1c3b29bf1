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
