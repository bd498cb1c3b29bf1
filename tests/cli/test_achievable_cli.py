"""--mode / --engine through the real CLI: analyze (JSON and tables), compare, sweep, what-ifs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app

runner = CliRunner()
ARGS = ["--model", "llama-3-8b", "--batch", "64", "--prompt", "2k", "--gen", "4"]


def _json(args):
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_calibrated_spec_is_achievable_by_default_with_the_roof_beside():
    j = _json(["analyze", "--hw", "h200-measured", *ARGS])
    assert (j["mode"], j["engine"], j["hardware"]) == ("achievable", "torch", "h200-measured")
    assert j["calibration"]["gpu"] == "NVIDIA H200" and j["calibration"]["path"].endswith("h200-calibration.json")
    assert j["tpot_s"] > j["roof_tpot_s"] > 0 and j["ttft_s"] > j["roof_ttft_s"] > 0
    dec = j["achievable_ops"]["decode"]
    assert abs(sum(r["time_s"] for r in dec) - j["tpot_s"]) < 1e-9 * j["tpot_s"]
    assert abs(sum(r["roof_time_s"] for r in dec) - j["roof_tpot_s"]) < 1e-9 * j["roof_tpot_s"]
    roof = _json(["analyze", "--hw", "h200-measured", *ARGS, "--mode", "roof"])
    assert roof["mode"] == "measured-roof" and roof["engine"] is None and roof["calibration"] is None
    # one measured roof: the roof beside achievable is the measured-roof mode's (the fastest HBM
    # stream measured, over the spec's 4,252 GB/s sustained copy)
    assert j["roof_memory_bandwidth_gb_per_s"] == roof["roof_memory_bandwidth_gb_per_s"] > 4252.0
    assert j["roof_peak_tflops"] == roof["roof_peak_tflops"]
    assert j["roof_tpot_s"] == roof["tpot_s"] < j["tpot_s"] and j["roof_ttft_s"] == roof["ttft_s"] < j["ttft_s"]
    fused = _json(["analyze", "--hw", "h200-measured", *ARGS, "--engine", "fused"])
    assert fused["engine"] == "fused" and fused["roof_tpot_s"] < fused["tpot_s"] < j["tpot_s"]


def test_datasheet_spec_stays_pure_roof_and_says_so():
    j = _json(["analyze", "--hw", "h200", *ARGS])
    assert j["mode"] == "datasheet" and j["tpot_s"] == j["roof_tpot_s"] and j["calibration"] is None
    r = runner.invoke(app, ["analyze", "--hw", "h200", *ARGS, "--no-ops"])
    assert r.exit_code == 0 and ("mode datasheet: pure roofline on datasheet figures; calibrated engines on h200: vllm, trtllm, sglang "
                                 "(--engine vllm gives achievable times)") in " ".join(r.output.split())
    # achievable asked for without an engine: the GPU's first serving engine, said so
    j = _json(["analyze", "--hw", "h200", *ARGS, "--mode", "achievable"])
    assert (j["mode"], j["engine"]) == ("achievable", "vllm") and j["calibration"]["path"].endswith("h200.vllm.calibration.json.gz")


def test_per_op_table_explains_the_decode_step():
    r = runner.invoke(app, ["analyze", "--hw", "h200-measured", *ARGS], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "mode achievable: engine torch, calibrated on NVIDIA H200 (2026-11-30" in r.output
    table = r.output.split("decode (torch, CUDA graph)")[1]
    for col in ("roof time", "achievable", "fixed cost", "efficiency", "kernels/L", "beyond roof"):
        assert col in table
    for op in ("attn.rope", "attn.kv_write", "residual_adds", "attn.qkv", "mlp.gate_up", "attn.core", "lm_head"):
        assert f" {op} " in table
    assert "TPOT first / mean / last" in r.output and "(roof " in r.output


@pytest.mark.parametrize(
    "args, expect",
    [
        (["analyze", "--hw", "h200-measured", "--engine", "tensorrt"], "'--engine': unknown engine 'tensorrt'"),
        (["analyze", "--hw", "h200-measured", "--mode", "fast"], "'--mode': unknown mode 'fast'; known: roof, datasheet, measured-roof, achievable"),
        (["analyze", "--hw", "h200", "--mode", "achievable", "--engine", "torch"], "error: h200: no calibration for engine torch (achievable mode needs one: this GPU has sglang, trtllm, vllm)"),
        (["compare", "--model", "llama-3-8b", "--hw", "h200-measured", "--engine", "x"], "'--engine': unknown engine 'x'"),
        (["kv", "--model", "llama-3-8b", "--hw", "mi300x", "--mode", "achievable", "--engine", "torch"], "mi300x: no calibration for engine torch (achievable mode needs one: a measured spec"),
    ],
    ids=["engine", "mode", "datasheet-achievable", "compare-engine", "kv-datasheet"],
)
def test_bad_mode_or_engine_is_one_line_exit_2(args, expect):
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and expect in lines[0]


def test_compare_mixes_modes_per_gpu():
    j = _json(["compare", "--model", "llama-3-8b", "--hw", "h200,h200-measured", "--batch", "8"])
    by = {r["hw"]: r for r in j["rows"]}
    assert by["h200"]["mode"] == "datasheet" and by["h200-measured"]["mode"] == "achievable"
    assert by["h200-measured"]["tpot_s"] > by["h200-measured"]["roof_tpot_s"]
    j = _json(["compare", "--model", "llama-3-8b", "--hw", "h200-measured", "--batch", "8", "--mode", "roof"])
    assert j["rows"][0]["tpot_s"] == j["rows"][0]["roof_tpot_s"]


def test_sweep_writes_mode_and_roof_columns(tmp_path):
    pd = pytest.importorskip("pandas")
    out = tmp_path / "s.csv"
    r = runner.invoke(app, ["sweep", "--model", "llama-3-8b", "--hw", "h200-measured,h200", "--batch", "1,64", "--context", "1k,4k", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    d = pd.read_csv(out)
    ach, roof = d[d["hw"] == "h200-measured"], d[d["hw"] == "h200"]
    assert set(ach["mode"]) == {"achievable"} and set(roof["mode"]) == {"datasheet"}
    assert (ach["time_s"] > ach["roof_time_s"]).all() and (roof["time_s"] == roof["roof_time_s"]).all()
    one = _json(["analyze", "--hw", "h200-measured", "--model", "llama-3-8b", "--batch", "64", "--prompt", "4k", "--gen", "1"])
    row = ach[(ach["phase"] == "decode") & (ach["batch"] == 64) & (ach["context_tokens"] == 4096)].iloc[0]
    assert row["time_s"] == pytest.approx(one["tpot_s"], rel=1e-9)


def test_what_ifs_take_the_mode():
    roof = _json(["speculative", "-k", "3", "-a", "0.7", "--model", "llama-3-8b", "--hw", "h200-measured", "--mode", "roof"])
    ach = _json(["speculative", "-k", "3", "-a", "0.7", "--model", "llama-3-8b", "--hw", "h200-measured"])
    assert ach["target_step_time_s"] > roof["target_step_time_s"]
    kv_r = _json(["kv", "--model", "llama-3-8b", "--hw", "h200-measured", "--mode", "roof", "--variants", "gqa"])
    kv_a = _json(["kv", "--model", "llama-3-8b", "--hw", "h200-measured", "--variants", "gqa"])
    assert kv_a["variants"][0]["decode_step_time_s"] > kv_r["variants"][0]["decode_step_time_s"]


def test_wheel_carries_the_calibrated_h200(tmp_path_factory, tmp_path):
    """The wheel holds hardware_specs/measured/ (spec and calibration file): `analyze --hw
    h200-measured` runs achievable from an unzipped wheel, outside the repository."""
    from tests.project.test_packaging import _run_from_outside, unzipped_wheel

    site = unzipped_wheel.__wrapped__(tmp_path_factory)
    assert (site / "rooflinecli" / "hardware_specs" / "measured" / "h200-calibration.json").is_file()
    proc = _run_from_outside(site, tmp_path, "-m", "rooflinecli", "analyze", "--hw", "h200-measured", "--json")
    assert proc.returncode == 0, proc.stderr
    j = json.loads(proc.stdout)
    assert j["mode"] == "achievable" and j["calibration"]["path"].startswith(str(site.resolve()))
