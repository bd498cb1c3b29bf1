"""The compute and KV-cache dtypes a checkpoint's quantization_config implies apply in every
command that takes a model and a workload (analyze, report, compare, sweep, serve and the
what-ifs), alike, unless --dtype / --kv-dtype / --kv-bits is given, which then says what it replaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app

runner = CliRunner()
PRESETS = Path(__file__).resolve().parents[2] / "rooflinecli" / "model_presets"

#: a decode step that reads much KV (batch 64 at 8,192 tokens): the fp8 cache the checkpoint
#: declares halves its KV bytes, so a command that ignored it would time another step
BATCH, CONTEXT = 64, 8192


@pytest.fixture(scope="module")
def fp8_checkpoint(tmp_path_factory) -> str:
    """Qwen3-30B-A3B as a ModelOpt FP8 checkpoint with an fp8 KV cache (W8A8: fp8 GEMMs)."""
    raw = json.loads((PRESETS / "qwen3-30b-a3b.json").read_text())
    raw.pop("_rooflinecli")
    raw["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}
    p = tmp_path_factory.mktemp("Qwen3-30B-A3B-FP8") / "config.json"
    p.write_text(json.dumps(raw))
    return str(p)


def _json(*args) -> tuple[dict, str]:
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    text = r.stdout
    return json.loads(text[text.index("{"):]), r.stderr


def _notes(name: str) -> list[str]:
    own = f"{name}'s modelopt fp8 checkpoint"
    return [f"fp8 compute: {own} implies it (--dtype replaces it)", f"KV fp8: {own} declares it (--kv-dtype replaces it)"]


def _analyze(model, *more) -> dict:
    return _json("analyze", "--model", model, "--hw", "h200", "--batch", BATCH, "--prompt", CONTEXT, "--gen", 1, "--json", *more)[0]


def _sweep_decode_s(tmp_path, model, *more) -> tuple[float, dict, str]:
    import pandas as pd

    out = tmp_path / "s.csv"
    r = runner.invoke(app, ["sweep", "--model", model, "--hw", "h200", "--batch", str(BATCH), "--context", str(CONTEXT),
                            "--phase", "decode", "--out", str(out), *more])
    assert r.exit_code == 0, r.output
    row = pd.read_csv(out).iloc[0]
    return float(row.time_s), row, r.stderr


def test_compare_and_sweep_time_an_fp8_checkpoint_as_analyze_does(tmp_path, fp8_checkpoint):
    name = Path(fp8_checkpoint).parent.name
    a = _analyze(fp8_checkpoint)
    assert (a["workload"]["compute_dtype"], a["workload"]["kv_dtype"]) == ("fp8", "fp8") and a["dtype_notes"] == _notes(name)
    c, stderr = _json("compare", "--model", fp8_checkpoint, "--hw", "h200", "--batch", BATCH, "--prompt", CONTEXT, "--gen", 1, "--json")
    assert (c["dtype"], c["kv"], c["dtype_notes"]) == ("fp8", "fp8", _notes(name))
    assert all(f"note: {n}" in stderr for n in _notes(name))
    (row,) = c["rows"]
    assert row["tpot_s"] == pytest.approx(a["tpot_s"], rel=1e-12) and row["ttft_s"] == pytest.approx(a["ttft_s"], rel=1e-12)
    decode_s, srow, stderr = _sweep_decode_s(tmp_path, fp8_checkpoint)
    assert decode_s == pytest.approx(a["tpot_s"], rel=1e-9)
    assert (srow["dtype"], srow["kv_dtype"]) == ("fp8", "fp8") and all(f"note: {n}" in stderr for n in _notes(name))
    # what they would time without the checkpoint's dtypes: a slower step (the bf16 cache is twice the bytes)
    bf16 = _analyze(fp8_checkpoint, "--dtype", "bf16", "--kv-dtype", "bf16")
    assert bf16["tpot_s"] > 1.2 * a["tpot_s"]


def test_given_options_replace_the_checkpoint_dtypes_in_compare_and_sweep_and_say_so(tmp_path, fp8_checkpoint):
    name = Path(fp8_checkpoint).parent.name
    own = f"{name}'s modelopt fp8 checkpoint"
    given = ("--dtype", "bf16", "--kv-dtype", "bf16")
    a = _analyze(fp8_checkpoint, *given)
    c, _ = _json("compare", "--model", fp8_checkpoint, "--hw", "h200", "--batch", BATCH, "--prompt", CONTEXT, "--gen", 1, "--json", *given)
    assert (c["dtype"], c["kv"]) == ("bf16", "bf16")
    assert c["dtype_notes"] == a["dtype_notes"] == [f"--dtype bf16 replaces the fp8 compute that {own} implies",
                                                    f"--kv-dtype / --kv-bits (bf16) replaces the fp8 KV cache that {own} declares"]
    assert c["rows"][0]["tpot_s"] == pytest.approx(a["tpot_s"], rel=1e-12)
    decode_s, srow, stderr = _sweep_decode_s(tmp_path, fp8_checkpoint, *given)
    assert decode_s == pytest.approx(a["tpot_s"], rel=1e-9) and (srow["dtype"], srow["kv_dtype"]) == ("bf16", "bf16")
    assert f"note: --dtype bf16 replaces the fp8 compute that {own} implies" in stderr


def test_the_what_ifs_time_the_step_analyze_times(fp8_checkpoint):
    name = Path(fp8_checkpoint).parent.name
    step_s = _analyze(fp8_checkpoint)["tpot_s"]
    kv, _ = _json("kv", "--model", fp8_checkpoint, "--hw", "h200", "--batch", BATCH, "--context", CONTEXT, "--variants", "gqa", "--json")
    configured = next(v for v in kv["variants"] if v["variant"].startswith("*"))
    assert configured["decode_step_time_s"] == pytest.approx(step_s, rel=1e-9)
    assert (kv["compute_dtype"], kv["kv_bytes_per_element"], kv["dtype_notes"]) == ("fp8", 1.0, _notes(name))
    moe, _ = _json("moe", "--model", fp8_checkpoint, "--hw", "h200", "--batch", BATCH, "--context", CONTEXT, "--json")
    assert moe["decode_by_batch"][0]["time_s"] == pytest.approx(step_s, rel=1e-9) and moe["kv"] == "fp8"
    spec, _ = _json("speculative", "-k", 2, "-a", 0.7, "--model", fp8_checkpoint, "--hw", "h200", "--batch", BATCH, "--context", CONTEXT, "--json")
    assert spec["target_step_time_s"] == pytest.approx(step_s, rel=1e-9) and spec["dtype_notes"] == _notes(name)
    plan, _ = _json("disagg", "--model", fp8_checkpoint, "--hw", "h200", "--rate", 2, "--ttft-target", 2, "--tpot-target", 0.1, "--json")
    assert plan["compute_dtype"] == "fp8" and plan["dtype_notes"] == _notes(name)
    serve, stderr = _json("serve", "--model", fp8_checkpoint, "--hw", "h200", "--concurrency", 8, "--json")
    assert all(f"note: {n}" in stderr for n in _notes(name))


def test_an_unquantized_model_keeps_the_options_and_says_nothing():
    c, stderr = _json("compare", "--model", "llama-3-8b", "--hw", "h200", "--json")
    assert (c["dtype"], c["kv"], c["dtype_notes"]) == ("bf16", "bf16", []) and "note:" not in stderr
