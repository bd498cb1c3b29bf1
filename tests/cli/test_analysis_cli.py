"""`roofline analyze` through the real entry point: defaults, JSON keys, options, bad input."""

from __future__ import annotations

import json
import math

import pytest

from rooflinecli.cli import app
from conftest import cli_runner


runner = cli_runner()


def run(*args):
    return runner.invoke(app, ["analyze", *args])


def test_default_run_is_useful():
    r = run()
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "llama-3-8b on h100-sxm" in out and "batch 1, prompt 1,024, gen 256" in out
    for word in ("TTFT", "TPOT", "ridge point 295", "attn.core", "mlp.down", "lm_head", "memory per GPU"):
        assert word in out


def test_sliding_window_model_fits_any_context():
    r = run("--model", "mistral-7b", "--prompt", "32k", "--gen", "16", "--no-ops")
    assert r.exit_code == 0, r.output
    assert "at context 32,784; any context (the KV cache stops growing) at batch 1" in r.stdout
    j = json.loads(run("--model", "mistral-7b", "--prompt", "32k", "--gen", "16", "--json").stdout)
    assert j["memory"]["max_context_at_batch"] is None and j["kv_crossover_context"] is None


def test_largest_batch_line_says_why_there_is_none():
    """A model whose weights fill the GPU has no largest batch: the line says why, not "batch 0";
    a batch too large for any context says "not even", with the largest batch beside it."""
    r = run("--model", "llama-3-70b", "--hw", "h200", "--no-ops")
    assert r.exit_code == 0, r.output
    assert "none: the weights alone (141 GB per GPU) leave no room in 141 GB" in r.stdout
    assert "batch 0" not in r.stdout
    r = run("--model", "llama-3-8b", "--hw", "h200", "--batch", "2000000", "--prompt", "32k", "--no-ops")
    assert r.exit_code == 0, r.output
    j = json.loads(run("--model", "llama-3-8b", "--hw", "h200", "--batch", "2000000", "--prompt", "32k", "--json").stdout)
    mb = j["memory"]["max_batch_at_context"]
    assert 0 < mb < 2000000 and j["memory"]["max_context_at_batch"] == 0
    assert f"batch {mb:,} at context" in r.stdout and "not even 1 token of context at batch 2,000,000" in r.stdout


def test_json_keys_and_consistency():
    r = run("--model", "llama-3-8b", "--batch", "4", "--prompt", "512", "--gen", "32", "--json", "--price-per-gpu-hour", "2")
    assert r.exit_code == 0, r.output
    j = json.loads(r.stdout)
    for key in ("ttft_s", "tpot_s", "tpot_first_s", "tpot_last_s", "e2e_latency_s", "tokens_per_s_per_gpu", "ridge_point_flop_per_byte",
                "decode_compute_bound_batch", "kv_crossover_context", "cost_per_million_output_tokens_usd", "warnings"):
        assert key in j
    for phase in ("prefill", "decode"):
        p = j[phase]
        assert p["bound"] in ("compute", "memory")
        assert math.isclose(p["time_s"], sum(op["time_s"] for op in p["ops"]), rel_tol=1e-9)
        assert math.isclose(p["flops"], sum(op["flops"] for op in p["ops"]), rel_tol=1e-9)
        assert {"name", "kind", "flops", "bytes", "weights_bytes", "kv_read_bytes", "compute_time_s", "memory_time_s", "time_s", "bound"} <= set(p["ops"][0])
    assert math.isclose(j["ttft_s"], j["prefill"]["time_s"]) and math.isclose(j["tpot_s"], j["decode"]["time_s"])
    m = j["memory"]
    assert m["fits"] is True and m["weights_bytes"] > 16e9 and m["kv_cache_bytes"] > 0
    assert j["prefill"]["bound"] == "compute" and j["decode"]["bound"] == "memory"


def test_options_move_the_numbers():
    def tpot(*args):
        r = run("--json", "--gen", "8", *args)
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["tpot_s"]

    base = tpot()
    assert tpot("--weight-dtype", "int4") < 0.35 * base
    assert tpot("--efficiency", "0.5") > 1.9 * base
    assert tpot("--efficiency", "gemm=0.8,attention=0.7") > base
    assert tpot("--tp", "2") < 0.6 * base
    assert tpot("--launch-overhead-us", "4") > base
    assert tpot("--prompt", "65536", "--kv-bits", "4") < tpot("--prompt", "65536")


def test_memory_and_routing_options_move_the_numbers():
    def j(*args):
        r = run("--json", "--gen", "4", *args)
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    # workspace: one 8192-token chunk by default, the whole 8 x 32k prefill with --prefill-chunk 0
    chunked = j("--batch", "8", "--prompt", "32k")["memory"]
    whole = j("--batch", "8", "--prompt", "32k", "--prefill-chunk", "0")["memory"]
    small = j("--batch", "8", "--prompt", "32k", "--prefill-chunk", "1k")["memory"]
    assert small["activation_workspace_bytes"] < chunked["activation_workspace_bytes"] < whole["activation_workspace_bytes"]
    assert whole["max_batch_at_context"] < chunked["max_batch_at_context"] <= small["max_batch_at_context"]
    # paging rounds every sequence's cache up to whole blocks: 1000 + 4 tokens -> 4 blocks of 256
    plain = j("--prompt", "1000")["memory"]["kv_cache_bytes"]
    paged = j("--prompt", "1000", "--kv-block-size", "256")["memory"]["kv_cache_bytes"]
    assert math.isclose(paged / plain, 1024 / 1004, rel_tol=1e-12)
    # skewed routing picks the hot experts again: 4 tokens touch fewer distinct experts, so the MoE
    # decode step reads fewer bytes (32 layers x the experts not touched x one expert's bytes)
    from rooflinecli import formulas

    uni = j("--model", "mixtral-8x7b", "--batch", "4")["decode"]["weights_bytes"]
    skew = j("--model", "mixtral-8x7b", "--batch", "4", "--expert-skew", "2")["decode"]["weights_bytes"]
    fewer = float(formulas.expected_experts_touched(8, 2, 4) - formulas.expected_experts_touched(8, 2, 4, 2.0))
    assert 0.3 < fewer < 1.0 and math.isclose(uni - skew, 32 * fewer * 3 * 4096 * 14336 * 2, rel_tol=1e-9)
    # MLA: the naive decode is the main result with --mla-decode naive, the absorbed one beside it
    absorbed = j("--model", "deepseek-v2-lite")
    naive = j("--model", "deepseek-v2-lite", "--mla-decode", "naive")
    assert math.isclose(naive["tpot_s"], absorbed["decode_naive_mla"]["time_s"], rel_tol=1e-12)
    assert math.isclose(absorbed["tpot_s"], naive["decode_naive_mla"]["time_s"], rel_tol=1e-12)


def test_moe_mla_model_and_hw_path(tmp_path):
    from rooflinecli.hardware import specs_dir

    path = specs_dir() / "h200.toml"
    r = run("--model", "deepseek-v3", "--hw", str(path), "--tp", "8", "--ep", "8", "--weight-dtype", "fp8", "--gen", "4", "--json")
    assert r.exit_code == 0, r.output
    j = json.loads(r.stdout)
    assert j["hardware"] == "h200" and j["memory"]["fits"] is True
    assert j["decode_naive_mla"]["time_s"] > j["tpot_s"]
    names = {op["name"] for op in j["decode"]["ops"]}
    assert {"attn.kv_b.uk", "moe.expert_up", "comm.ep_all_to_all", "comm.tp_allreduce.attn"} <= names
    assert "MLA's latent KV cache is replicated" in r.stderr


MEASURED = """id = "h200-lab"
kind = "measured"
base = "h200"

[memory]
bandwidth_gb_per_s = 4300

[peak_dense_tflops]
bf16 = 780

[efficiency.gemm]
memory = 0.90
compute = 0.82
"""


def test_measured_spec_file_replaces_the_datasheet_ceilings(tmp_path):
    """A measured spec's ceilings replace the datasheet ones (its [efficiency] table is a validation
    record that no prediction reads: the former --fitted-efficiency option is gone)."""
    path = tmp_path / "h200-lab.toml"
    path.write_text(MEASURED)
    plain = json.loads(run("--hw", str(path), "--gen", "4", "--json").stdout)
    assert plain["hardware"] == "h200-lab" and plain["hardware_kind"] == "measured"
    assert math.isclose(plain["ridge_point_flop_per_byte"], 780e12 / 4300e9)
    for op in plain["decode"]["ops"]:
        assert math.isclose(op["memory_time_s"], op["bytes"] / 4300e9, rel_tol=1e-12), op["name"]
    r = run("--hw", "h200", "--gen", "4", "--fitted-efficiency", "--no-ops")
    assert r.exit_code == 2 and "--fitted-efficiency" in r.stderr

def test_context_beyond_trained_limit_warns_but_runs():
    r = run("--prompt", "9000", "--gen", "16", "--json")
    assert r.exit_code == 0
    j = json.loads(r.stdout)
    assert j["warnings"] and "trained limit" in j["warnings"][0] and "roofline rope" in j["warnings"][0]
    assert "warning:" in r.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--batch", "0"], "--batch"),
        (["--prompt", "-5"], "--prompt"),
        (["--dtype", "bf17"], "bf17"),
        (["--weight-dtype", "int3"], "int3"),
        (["--kv-bits", "0"], "--kv-bits"),
        (["--tp", "3"], "--tp 3"),
        (["--ep", "2"], "no experts"),
        (["--efficiency", "gemm=1.5"], "--efficiency"),
        (["--model", "llama-9"], "unknown model"),
        (["--hw", "h10"], "unknown GPU"),
        (["--gen", "0"], "--gen"),
        (["--model", "llama-3-70b", "--tp", "5"], "--tp 5"),
        (["--kv-dtype", "fp9"], "fp9"),
        (["--kv-block-size", "0"], "--kv-block-size"),
        (["--prefill-chunk", "-1"], "--prefill-chunk"),
        (["--expert-skew", "0.5"], "--expert-skew"),
        (["--mla-decode", "folded"], "absorbed, naive"),
        (["--weight-group-size", "0"], "--weight-group-size"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle):
    r = run(*args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.stderr
    assert "Traceback" not in r.output
