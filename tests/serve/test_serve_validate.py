"""roofline serve validate on an excerpt of aiconfigurator-core's silicon_sample.csv
(tests/fixtures/serve/NOTICE): represented points run, the rest are counted by reason, and the
errors are the predictions' against the measurements."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflinecli.cli import app
from rooflinecli.serve.validate import BENCHMARK_REQUESTS_PER_CLIENT, point, validate
from conftest import cli_runner

EXCERPT = Path(__file__).parent.parent / "fixtures" / "serve" / "silicon_excerpt.csv"


@pytest.fixture(scope="module")
def result():
    return validate(EXCERPT)


def test_points_are_counted_by_reason(result):
    assert result["rows"] == 8
    assert result["represented"] + result["unrepresented"] == 8
    reasons = result["reasons"]
    assert reasons.get("system gb200 has no spec (or is multi-node)") == 1  # Qwen3-32B on GB200
    assert reasons.get("model moonshotai/Kimi-K2.5 has no preset") == 1
    assert reasons.get("weights nvfp4: no such weight dtype") == 1
    assert result["represented"] == 5


def test_errors_are_prediction_over_measurement(result):
    for q in result["points"]:
        assert q["ttft_error"] == pytest.approx(q["ttft_s"] / q["measured_ttft_s"] - 1)
        assert q["tpot_error"] == pytest.approx(q["tpot_s"] / q["measured_tpot_s"] - 1)
    agg = [q for q in result["points"] if q["serving"] == "aggregated"]
    assert result["overall"]["aggregated"]["tpot_mape"] == pytest.approx(sum(abs(q["tpot_error"]) for q in agg) / len(agg))


def test_a_row_maps_to_its_layout():
    row = {"model_path": "deepseek-ai/DeepSeek-V3", "system": "h200_sxm", "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8", "backend": "sglang",
           "isl": "1024", "osl": "1024", "silicon_data_source": "x; silicon_concurrency=64; y", "mode": "agg", "tp_size": "1", "pp_size": "1",
           "attention_dp_size": "8", "moe_tp_size": "1", "moe_ep_size": "8"}
    p, why = point(row)
    assert why is None and (p["tp"], p["ep"], p["concurrency"]) == (1, 8, 64)
    p, why = point({**row, "moe_tp_size": "2", "moe_ep_size": "4", "attention_dp_size": "1", "tp_size": "8"})
    assert p is None and why == "MoE TP x EP hybrid"
    p, why = point({**row, "system": "gb200"})
    assert p is None and why.startswith("system gb200")
    p, why = point({**row, "moe_quant_mode": "nvfp4"})
    assert p is None and "nvfp4" in why


def test_cli_validate_from_file():
    r = cli_runner().invoke(app, ["serve", "validate", "--from", str(EXCERPT), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["represented"] == 5 and "aggregated" in d["overall"]
    r = cli_runner().invoke(app, ["serve", "validate", "--from", str(EXCERPT / "missing.csv")])
    assert r.exit_code == 2 and r.stderr.startswith("error: ")


def test_benchmark_ttft_weighs_the_first_wave(result):
    """A closed-loop benchmark's mean TTFT: its first wave (clients arriving together) and the
    steady state for the rest of its requests per client; one request per client is the wave."""
    for q in result["points"]:
        if q["serving"] != "aggregated":
            continue
        k = BENCHMARK_REQUESTS_PER_CLIENT
        assert q["ttft_s"] == pytest.approx((q["first_wave_ttft_s"] + (k - 1) * q["steady_ttft_s"]) / k)
    steady = validate(EXCERPT, requests_per_client=1)
    for a, b in zip(result["points"], steady["points"]):
        if a["serving"] == "aggregated":
            assert b["ttft_s"] == pytest.approx(b["first_wave_ttft_s"])


def test_deepseek_v3_fp8_runs_read_its_block_fp8_checkpoint():
    from rooflinecli.model_registry import get_model
    from rooflinecli.serve.validate import _model_and_spec

    row = {"model_path": "deepseek-ai/DeepSeek-V3", "system": "h200_sxm", "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8", "backend": "trtllm",
           "isl": "1024", "osl": "1024", "silicon_data_source": "x; silicon_concurrency=8; y", "mode": "agg", "tp_size": "8", "pp_size": "1",
           "attention_dp_size": "", "moe_tp_size": "8", "moe_ep_size": "1"}
    p, _ = point(row)
    cache: dict = {}
    cfg, _ = _model_and_spec(p, cache)
    assert get_model("deepseek-v3").quantization is None  # the preset is the 16-bit layout
    assert cfg.quantization == get_model("deepseek-r1").quantization and cfg.quantization.group_in == cfg.quantization.group_out == 128
    assert cfg.num_layers == get_model("deepseek-v3").num_layers
    bf16, _ = point({**row, "gemm_quant_mode": "", "moe_quant_mode": ""})
    assert "quantization_from" not in bf16 and _model_and_spec(bf16, cache)[0].quantization is None
