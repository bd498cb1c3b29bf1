"""Focused what-if commands through the real CLI entry point: numbers derived by hand here."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from rooflinecli import formulas
from rooflinecli.cli import app
from rooflinecli.hardware import get_spec

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def run_json(*args: str) -> dict:
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout[r.stdout.index("{"):])


def assert_one_line_error(r, *fragments: str) -> None:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert "Traceback" not in r.output
    for f in fragments:
        assert f in lines[0], lines[0]


# ------------------------------------------------------------------------------------------------
# attention-io
# ------------------------------------------------------------------------------------------------


def test_attention_io_follows_algorithm_1_by_hand():
    N, d, H = 4096, 128, 32
    out = run_json("attention-io", "--seq", str(N), "--head-dim", str(d), "--hw", "h100-sxm", "--heads", str(H))
    M = get_spec("h100-sxm").smem_per_sm_kb * 1024 / 2  # bf16 elements of SRAM per SM
    B_c = math.ceil(M / (4 * d))
    T_c = math.ceil(N / B_c)
    naive = 2 * N * d + N * N + N * N + N * N + N * N + N * d + N * d  # read Q,K; write S; read S; write P; read P,V; write O
    flash = (N * d + 2 * N) + 2 * N * d + T_c * (2 * N * d + 2 * N + N * d + 2 * N)  # init; K,V; per pass read Q,O,l,m, write O,l,m
    assert out["block_cols"] == B_c and out["block_rows"] == min(B_c, d) and out["kv_passes"] == T_c
    assert out["naive_elements_per_head"] == naive
    assert out["flash_elements_per_head"] == flash
    assert out["naive_bytes"] == naive * 2 * H
    assert out["naive_over_flash"] == pytest.approx(naive / flash)
    bw = get_spec("h100-sxm").memory_bandwidth_gb_per_s * 1e9
    assert out["flash_time_s"] == pytest.approx(flash * 2 * H / bw)
    assert out["naive_over_flash"] > 1


def test_attention_io_flash_wins_more_with_longer_sequences():
    short = run_json("attention-io", "--seq", "512", "--head-dim", "64")
    long = run_json("attention-io", "--seq", "32768", "--head-dim", "64")
    assert long["naive_over_flash"] > short["naive_over_flash"]


def test_attention_io_table():
    r = run("attention-io", "--seq", "2048", "--head-dim", "64", "--hw", "h200")
    assert r.exit_code == 0, r.output
    assert "FlashAttention" in r.output and "standard / flash" in r.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--seq", "0", "--head-dim", "64"], "--seq"),
        (["--seq", "128", "--head-dim", "64", "--dtype", "bf17"], "bf17"),
        (["--seq", "128", "--head-dim", "64", "--hw", "h10"], "h10"),
    ],
)
def test_attention_io_bad_input(args, fragment):
    assert_one_line_error(run("attention-io", *args), fragment)


# ------------------------------------------------------------------------------------------------
# rope
# ------------------------------------------------------------------------------------------------


def test_rope_explicit_base():
    out = run_json("rope", "--base", "500000", "--rotary-dim", "128", "--trained-context", "8192", "--target-context", "131072")
    assert out["scale"] == 16
    assert out["new_base"] == pytest.approx(500000 * 16 ** (128 / 126))
    assert out["needed"] is True


def test_rope_scale_and_no_extension():
    out = run_json("rope", "--base", "10000", "--rotary-dim", "64", "--trained-context", "4096", "--scale", "0.5")
    assert out["needed"] is False and out["new_base"] == 10000
    r = run("rope", "--base", "10000", "--rotary-dim", "64", "--trained-context", "4096", "--scale", "4")
    assert r.exit_code == 0 and f"{10000 * 4 ** (64 / 62):,.7g}" in r.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--base", "10000", "--rotary-dim", "63", "--trained-context", "4096", "--scale", "2"], "--rotary-dim"),
        (["--base", "10000", "--rotary-dim", "64", "--trained-context", "4096"], "exactly one"),
        (["--base", "10000", "--rotary-dim", "64"], "--model"),
        (["--base", "-1", "--rotary-dim", "64", "--trained-context", "4096", "--scale", "2"], "--base"),
    ],
)
def test_rope_bad_input(args, fragment):
    assert_one_line_error(run("rope", *args), fragment)


# ------------------------------------------------------------------------------------------------
# speculative
# ------------------------------------------------------------------------------------------------


def test_speculative_by_hand():
    out = run_json("speculative", "--draft-tokens", "4", "--acceptance", "0.8", "--draft-cost-ratio", "0.05")
    tokens = 1 + 0.8 + 0.8**2 + 0.8**3 + 0.8**4  # geometric series = (1 - a^5) / (1 - a)
    assert out["expected_tokens_per_step"] == pytest.approx(tokens)
    assert out["speedup"] == pytest.approx(tokens / (1 + 4 * 0.05))
    rows = {row["draft_tokens"]: row for row in out["by_draft_tokens"]}
    assert rows[1]["expected_tokens_per_step"] == pytest.approx(1.8)


def test_speculative_perfect_acceptance_and_free_draft():
    out = run_json("speculative", "-k", "3", "-a", "1")
    assert out["expected_tokens_per_step"] == 4 and out["speedup"] == 4


def test_speculative_verification_cost_grows_with_batch():
    """With a model the verification pass (k + 1 tokens per sequence, weights and cache read once)
    is timed by the model: about one step at batch 1, memory-bound; several at batch 256, where
    the GEMMs of 5 x 256 tokens are compute-bound. The speed-up falls with it, and the table's
    rows each carry their own k's cost."""
    args = ("-k", "4", "-a", "0.7", "--model", "llama-3-8b", "--hw", "h100-sxm", "--context", "1024")
    one, big = run_json("speculative", *args), run_json("speculative", *args, "--batch", "256")
    assert 1.0 <= one["verify_cost_target_steps"] < 1.01 and big["verify_cost_target_steps"] > 1.8
    assert big["speedup"] == pytest.approx(big["expected_tokens_per_step"] / big["verify_cost_target_steps"])
    assert big["speedup"] < 0.6 * one["speedup"]
    rows = {r["draft_tokens"]: r["speedup"] for r in big["by_draft_tokens"]}
    assert sorted(rows) == list(range(1, 9)) and rows[4] == pytest.approx(big["speedup"])
    assert max(rows, key=rows.get) < 8  # past the best k, longer drafts cost more than they bring
    # without a model the paper's assumption stands, and the text says so
    r = run("speculative", "-k", "4", "-a", "0.7")
    assert "verification taken as one target step: give --model for its cost" in r.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["-k", "0", "-a", "0.5"], "--draft-tokens"),
        (["-k", "2", "-a", "1.5"], "--acceptance"),
        (["-k", "2", "-a", "0.5", "-c", "-1"], "--draft-cost-ratio"),
        (["-k", "2", "-a", "0.5", "--mtp"], "--model"),
    ],
)
def test_speculative_bad_input(args, fragment):
    assert_one_line_error(run("speculative", *args), fragment)


# ------------------------------------------------------------------------------------------------
# commands on a model: rope, speculative, kv, moe, compare, disagg
# ------------------------------------------------------------------------------------------------


def test_rope_from_model():
    out = run_json("rope", "--model", "llama-3-8b", "--target-context", "131072")
    # Llama 3 8B: rope_theta 500000, head dim 128, trained 8192 tokens -> s = 16
    assert out["base"] == 500000 and out["rotary_dim"] == 128 and out["trained_context_tokens"] == 8192
    assert out["new_base"] == pytest.approx(500000 * 16 ** (128 / 126))


def test_rope_mla_uses_rope_dim_and_gpt2_has_no_rope():
    assert run_json("rope", "--model", "deepseek-v3", "--scale", "2")["rotary_dim"] == 64  # decoupled RoPE key
    assert_one_line_error(run("rope", "--model", "gpt2", "--target-context", "4096"), "learned")


def test_speculative_with_model_time_and_mtp():
    from rooflinecli.analysis import Workload
    from rooflinecli.predict import analyze
    from rooflinecli.model_registry import get_model

    out = run_json("speculative", "-k", "2", "-a", "0.7", "-c", "0.1", "--model", "llama-3-8b", "--hw", "h100-sxm", "--context", "2048")
    step = analyze(get_model("llama-3-8b"), get_spec("h100-sxm"), Workload(batch=1, prompt_len=2048, gen_len=1)).tpot_s
    assert out["target_step_time_s"] == pytest.approx(step, rel=1e-9)
    tokens = 1 + 0.7 + 0.49
    # the verification pass (3 tokens per sequence at batch 1) costs the model about one step
    v = out["verify_cost_target_steps"]
    assert 1.0 <= v < 1.02
    assert out["tpot_s"] == pytest.approx(step * (v + 2 * 0.1) / tokens)
    # --model alone times the step on the default GPU (h100-sxm), like every other command
    alone = run_json("speculative", "-k", "2", "-a", "0.7", "-c", "0.1", "--model", "llama-3-8b", "--context", "2048")
    assert alone["target_step_time_s"] == pytest.approx(step, rel=1e-12)
    assert_one_line_error(run("speculative", "-k", "2", "-a", "0.7", "--hw", "h200"), "--model")


def test_speculative_takes_its_default_gpu_from_roofline_hw(monkeypatch):
    from rooflinecli.analysis import Workload
    from rooflinecli.predict import analyze
    from rooflinecli.model_registry import get_model

    monkeypatch.setenv("ROOFLINE_HW", "h200")
    out = run_json("speculative", "-k", "2", "-a", "0.7", "--model", "llama-3-8b", "--context", "2048")
    step = analyze(get_model("llama-3-8b"), get_spec("h200"), Workload(batch=1, prompt_len=2048, gen_len=1)).tpot_s
    assert out["target_step_time_s"] == pytest.approx(step, rel=1e-12)
    # without --model the variable asks for no step time (an explicit --hw would be refused)
    assert run_json("speculative", "-k", "2", "-a", "0.7")["target_step_time_s"] is None
    mtp = run_json("speculative", "-k", "1", "-a", "0.85", "--mtp", "--model", "deepseek-v3")
    # one extra MoE layer + projection + LM head of 61 layers: a few percent of a target step
    assert mtp["draft_cost_source"] == "mtp" and 0.01 < mtp["draft_cost_ratio"] < 0.1
    assert mtp["speedup"] == pytest.approx(1.85 / (mtp["verify_cost_target_steps"] + mtp["draft_cost_ratio"]))


LLAMA3_8B_KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # 2 (K,V) * L * H_kv * D * 2 bytes


def test_kv_by_hand_llama3_8b():
    out = run_json("kv", "--model", "llama-3-8b", "--batch", "4", "--context", "1000")
    rows = {r["variant"]: r for r in out["variants"]}
    assert list(rows) == ["* gqa", "mha", "mqa", "mla", "compressed"]
    gqa = rows["* gqa"]
    assert gqa["kv_bytes_per_token"] == LLAMA3_8B_KV_PER_TOKEN
    assert gqa["kv_cache_bytes"] == LLAMA3_8B_KV_PER_TOKEN * 1000 * 4
    assert gqa["kv_read_bytes_per_step"] == pytest.approx(LLAMA3_8B_KV_PER_TOKEN * 1000 * 4, rel=1e-9)
    assert rows["mha"]["kv_bytes_per_token"] == 2 * 32 * 32 * 128 * 2
    assert rows["mqa"]["kv_bytes_per_token"] == 2 * 32 * 1 * 128 * 2
    assert rows["mla"]["kv_bytes_per_token"] == 32 * (512 + 64) * 2  # default latent 4D + rope D/2
    # crossover N* = weight bytes / (KV bytes per token * B), from the step's own weight bytes
    assert gqa["crossover_context_tokens"] == pytest.approx(gqa["weights_bytes_per_step"] / (LLAMA3_8B_KV_PER_TOKEN * 4), rel=1e-6)
    # weight bytes per step ~ the 8.0B parameters at 2 bytes (embedding table not read whole)
    assert 15.0e9 < gqa["weights_bytes_per_step"] < 16.2e9
    # compressed: top-512 entries + 128-token window read per step, so KV reads never catch up
    assert rows["compressed"]["crossover_context_tokens"] is None
    assert rows["mqa"]["kv_cache_bytes"] < gqa["kv_cache_bytes"] < rows["mha"]["kv_cache_bytes"]


def test_kv_bits_paging_and_window():
    out = run_json("kv", "--model", "llama-3-8b", "--context", "1000", "--kv-bits", "4", "--kv-block-size", "256", "--variants", "mqa")
    gqa = out["variants"][0]
    assert gqa["kv_bytes_per_token"] == LLAMA3_8B_KV_PER_TOKEN / 4
    assert gqa["kv_cache_bytes"] == LLAMA3_8B_KV_PER_TOKEN / 4 * 1024  # 1000 tokens -> 4 blocks of 256
    m = run_json("kv", "--model", "mistral-7b", "--context", "20000", "--variants", "mqa")
    swa = m["variants"][0]
    assert swa["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 4096  # every layer capped at W = 4096
    assert swa["crossover_context_tokens"] is None


def test_kv_beyond_trained_context_warns_and_suggests_rope():
    r = run("kv", "--model", "llama-3-8b", "--context", "32768", "--variants", "mqa")
    assert r.exit_code == 0
    assert "warning" in r.output and "trained limit of 8,192" in r.output and "roofline rope --model llama-3-8b --target-context 32769" in r.output


def test_kv_table():
    r = run("kv", "--model", "deepseek-v3", "--context", "4096")
    assert r.exit_code == 0, r.output
    assert "latent 512+64" in r.output and "crossover" in r.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--model", "llama-3-8b", "--batch", "0"], "--batch"),
        (["--model", "llama-3-8b", "--context", "-5"], "--context"),
        (["--model", "llama-3-8b", "--kv-bits", "0"], "--kv-bits"),
        (["--model", "llama-3-8b", "--kv-dtype", "fp7"], "fp7"),
        (["--model", "llama-3-8b", "--variants", "mha,xyz"], "xyz"),
        (["--model", "llama-4"], "llama-4"),
    ],
)
def test_kv_bad_input(args, fragment):
    assert_one_line_error(run("kv", *args), fragment)


def test_moe_by_hand_mixtral():
    out = run_json("moe", "--model", "mixtral-8x7b", "--batch", "1,4,64", "--skew", "2")
    assert out["num_routed_experts"] == 8 and out["top_k"] == 2
    assert out["routed_expert_bytes"] == 3 * 4096 * 14336 * 2  # gate, up, down at bf16
    rows = {r["batch"]: r for r in out["decode_by_batch"]}
    assert rows[1]["experts_touched_uniform"] == pytest.approx(2.0)
    assert rows[4]["experts_touched_uniform"] == pytest.approx(8 * (1 - 0.75**4))
    # skew 2: the hottest expert takes twice the mean load; loads fall off exponentially to the coldest
    q = formulas.routing_shares(8, 2, 2.0)
    assert q.sum() == pytest.approx(2.0) and q[0] * 8 / 2 == pytest.approx(2.0) and (q[:-1] > q[1:]).all()
    assert rows[4]["experts_touched_skewed"] == pytest.approx(float((1 - (1 - q) ** 4).sum()))
    assert rows[1]["experts_touched_skewed"] == pytest.approx(2.0)  # one token: its k experts
    assert out["active_params"] < out["total_params"]
    assert out["total_params"] == pytest.approx(46.7e9, rel=0.01)  # published
    # decode weight bytes grow with batch (more experts touched), then saturate: even skewed, every
    # expert keeps a share, so 64 tokens read nearly all 8 (32 layers x about 8 - 2 more than at batch 1)
    w = [rows[b]["weights_bytes"] for b in (1, 4, 64)]
    assert w[0] < w[1] < w[2]
    assert w[2] - w[0] == pytest.approx(32 * (rows[64]["experts_touched_skewed"] - 2) * out["routed_expert_bytes"], rel=1e-4)  # + embedding rows
    assert rows[64]["experts_touched_skewed"] > 7.99
    uniform = run_json("moe", "--model", "mixtral-8x7b", "--batch", "1,64")["decode_by_batch"]
    assert uniform[1]["weights_bytes"] - uniform[0]["weights_bytes"] == pytest.approx(32 * (8 - 2) * out["routed_expert_bytes"], rel=0.001)


def test_moe_expert_parallel_and_table():
    out = run_json("moe", "--model", "deepseek-v3", "--batch", "1,256", "--ep", "8", "--hw", "h200")
    assert out["routed_experts_per_gpu"] == 32
    r = out["decode_by_batch"][-1]
    assert r["time_s"] < r["time_s_ep1"]  # EP splits the expert reads over 8 GPUs
    t = run("moe", "--model", "qwen3-30b-a3b", "--batch", "1..16:x4")
    assert t.exit_code == 0, t.output
    assert "experts/layer" in t.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--model", "llama-3-8b"], "dense"),
        (["--model", "mixtral-8x7b", "--skew", "0.5"], "--skew"),
        (["--model", "mixtral-8x7b", "--batch", "1..x"], "--batch"),
    ],
)
def test_moe_bad_input(args, fragment):
    assert_one_line_error(run("moe", *args), fragment)


def test_compare_gpus_memory_bound_decode_scales_with_bandwidth():
    out = run_json("compare", "--model", "llama-3-70b", "--hw", "h100-sxm,h200", "--batch", "1", "--prompt", "512", "--gen", "16")
    h100, h200 = out["rows"]
    assert (h100["hw"], h200["hw"]) == ("h100-sxm", "h200")
    bw_ratio = get_spec("h200").memory_bandwidth_gb_per_s / get_spec("h100-sxm").memory_bandwidth_gb_per_s
    assert h100["decode_bound"] == "memory"
    assert h100["tpot_s"] / h200["tpot_s"] == pytest.approx(bw_ratio, rel=0.02)
    # published anchor: batch-1 decode TPOT within 5% of weight bytes / HBM bandwidth
    assert h100["tpot_s"] == pytest.approx(h100["memory_weights_bytes"] / (get_spec("h100-sxm").memory_bandwidth_gb_per_s * 1e9), rel=0.05)
    assert h100["cost_per_million_output_tokens_usd"] is None
    # with a price: USD/h x GPUs / 3600 x latency / (batch x gen) x 1e6, on each GPU's own latency
    priced = run_json("compare", "--model", "llama-3-8b", "--hw", "h100-sxm,h200", "--tp", "2", "--batch", "8", "--gen", "64",
                      "--price-per-gpu-hour", "2.5")
    for row in priced["rows"]:
        assert row["cost_per_million_output_tokens_usd"] == pytest.approx(2.5 * 2 / 3600 * row["e2e_latency_s"] / (8 * 64) * 1e6, rel=1e-12)
    assert "USD per M output tokens" in run("compare", "--model", "llama-3-8b", "--price-per-gpu-hour", "2.5").output


def test_compare_variants():
    out = run_json("compare", "--model", "llama-3-8b", "--variants", "mha,gqa,mqa,mla,compressed", "--prompt", "4096", "--gen", "64", "--batch", "8")
    rows = {r["label"]: r for r in out["rows"]}
    assert list(rows) == ["* gqa", "mha", "mqa", "mla", "compressed"]
    assert rows["mqa"]["memory_kv_cache_bytes"] < rows["* gqa"]["memory_kv_cache_bytes"] < rows["mha"]["memory_kv_cache_bytes"]
    assert rows["mqa"]["tpot_s"] < rows["* gqa"]["tpot_s"] < rows["mha"]["tpot_s"]
    t = run("compare", "--model", "llama-3-8b", "--hw", "h100-sxm,a100-sxm")
    assert t.exit_code == 0 and "a100-sxm" in t.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--model", "llama-3-8b", "--hw", "h100-sxm,h200", "--variants", "mqa"], "single --hw"),
        (["--model", "llama-3-8b", "--variants", "gqa,foo"], "foo"),
        (["--model", "llama-3-8b", "--tp", "3"], "3"),
        (["--model", "llama-3-8b", "--batch", "0"], "--batch"),
        (["--model", "llama-3-8b", "--dtype", "bf17"], "bf17"),
    ],
)
def test_compare_bad_input(args, fragment):
    assert_one_line_error(run("compare", *args), fragment)


def test_disagg_plan_by_hand():
    from rooflinecli.analysis import Workload
    from rooflinecli.predict import analyze
    from rooflinecli.model_registry import get_model

    rate, gen = 10.0, 128
    out = run_json("disagg", "--model", "llama-3-8b", "--hw", "h100-sxm", "--prompt", "2048", "--gen", str(gen), "--rate", str(rate),
                   "--ttft-target", "0.5", "--tpot-target", "0.03", "--max-batch", "256")
    assert out["feasible"] is True
    assert out["prefill_time_s"] <= 0.5 and out["decode_tpot_s"] <= 0.03
    # prefill time is analyze's TTFT at that batch; instance counts are ceil(rate / per-instance rate)
    a = analyze(get_model("llama-3-8b"), get_spec("h100-sxm"), Workload(batch=out["prefill_batch"], prompt_len=2048, gen_len=gen))
    assert out["prefill_time_s"] == pytest.approx(a.ttft_s, rel=1e-9)
    assert out["prefill_instances"] == math.ceil(rate / (out["prefill_batch"] / out["prefill_time_s"]))
    assert out["decode_instances"] == math.ceil(rate * gen * out["decode_tpot_s"] / out["decode_batch"])
    # every decode step of the generation is timed (128 <= 256 sampled contexts): TPOT is analyze's mean
    b = analyze(get_model("llama-3-8b"), get_spec("h100-sxm"), Workload(batch=out["decode_batch"], prompt_len=2048, gen_len=gen))
    assert out["decode_tpot_s"] == pytest.approx(b.tpot_s, rel=1e-9)
    assert out["total_gpus"] == out["prefill_gpus"] + out["decode_gpus"]


def test_disagg_light_load_plans_the_batch_that_forms():
    """A light load never forms a large batch: at 1e-7 req/s both pools plan batch 1 (one prompt's
    TTFT); as the rate grows the batches grow, each the smallest one instance that keeps up with
    the rate, until one instance no longer does and the plan takes the most requests per second."""
    args = ("--model", "llama-3-8b", "--hw", "h100-sxm", "--prompt", "1024", "--gen", "256", "--ttft-target", "0.5", "--tpot-target", "0.05")
    low = run_json("disagg", *args, "--rate", "0.0000001")
    assert (low["prefill_batch"], low["decode_batch"], low["total_gpus"]) == (1, 1, 2)
    mid = run_json("disagg", *args, "--rate", "10")
    assert mid["decode_instances"] == 1 and 1 < mid["decode_batch"] and mid["decode_requests_per_s_per_instance"] >= 10
    high = run_json("disagg", *args, "--rate", "1000")
    assert high["decode_batch"] > mid["decode_batch"] and high["decode_instances"] > 1
    assert high["prefill_requests_per_s_per_instance"] >= mid["prefill_requests_per_s_per_instance"]


def test_disagg_instances_fit_in_memory():
    """Long prompts: the prefill batch with the best rate must still hold its prompts' KV cache
    (Llama-3-8B, 32k prompts: 4 GiB of KV each on an 80 GB H100), and the decode batch its cache at
    the last token; memory is analysis.memory_totals, as in analyze."""
    from rooflinecli.analysis import Workload, memory_totals
    from rooflinecli.model_registry import get_model

    prompt, gen = 32768, 256
    out = run_json("disagg", "--model", "llama-3-8b", "--hw", "h100-sxm", "--prompt", str(prompt), "--gen", str(gen), "--rate", "10",
                   "--ttft-target", "60", "--tpot-target", "0.05")
    assert out["feasible"] is True
    cfg, spec, wl = get_model("llama-3-8b"), get_spec("h100-sxm"), Workload(1, prompt, gen)
    bp, bd = out["prefill_batch"], out["decode_batch"]
    assert memory_totals(cfg, spec, wl, prompt, prompt, bp)["fits"] and not memory_totals(cfg, spec, wl, prompt, prompt, bp + 1)["fits"]
    assert memory_totals(cfg, spec, wl, 1, prompt + gen, bd)["fits"]
    # 16 GB of weights + 4.3 GB of KV per 32k prompt: about 14 prompts fit, far fewer than the 76 the
    # TTFT target alone would allow
    assert 10 <= bp <= 16
    one_gpu = run_json("disagg", "--model", "llama-3-70b", "--hw", "h100-sxm", "--prompt", "8192", "--gen", "64", "--rate", "1",
                       "--ttft-target", "60", "--tpot-target", "0.05")
    assert one_gpu["feasible"] is False and "memory" in one_gpu["reason"]


def test_disagg_infeasible_and_table():
    out = run_json("disagg", "--model", "llama-3-8b", "--hw", "h100-sxm", "--prompt", "8192", "--gen", "64", "--rate", "1",
                   "--ttft-target", "0.01", "--tpot-target", "0.05")
    assert out["feasible"] is False and "TTFT" in out["reason"]
    r = run("disagg", "--model", "llama-3-70b", "--hw", "h200", "--tp", "4", "--prompt", "2048", "--gen", "256", "--rate", "10",
            "--ttft-target", "0.5", "--tpot-target", "0.05")
    assert r.exit_code == 0 and "prefill:decode" in r.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--rate", "0"], "--rate"),
        (["--rate", "1", "--prompt", "0"], "--prompt"),
        (["--rate", "1", "--tpot-target", "-1"], "--tpot-target"),
    ],
)
def test_disagg_bad_input(args, fragment):
    base = {"--prompt": "512", "--gen": "64", "--ttft-target": "1", "--tpot-target": "0.05"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    flat = [x for kv in base.items() for x in kv]
    assert_one_line_error(run("disagg", "--model", "llama-3-8b", *flat), fragment)


def test_speculative_says_when_no_draft_length_pays():
    """With no acceptance every draft is wasted: no row is starred best and the caption says plain
    decoding wins; with free drafts the best sits at the table's edge and the caption says so."""
    r = run("speculative", "-k", "4", "-a", "0", "-c", "0.5")
    assert r.exit_code == 0, r.output
    assert "*" not in r.output and "no draft length pays" in r.output
    r = run("speculative", "-k", "4", "-a", "0.8")
    assert r.exit_code == 0 and "still rises at k = 8" in " ".join(r.output.split())


def test_whatifs_name_their_mode_and_warn_when_nothing_fits():
    """On a calibrated spec kv, moe, speculative and disagg say their times are achievable (or the
    roof with --mode roof); moe and speculative warn, as analyze does, when the workload does not fit."""
    r = run("moe", "--model", "mixtral-8x7b", "--hw", "h200-measured", "--batch", "1")
    assert r.exit_code == 0 and "(achievable, torch engine)" in r.output
    r = run("kv", "--model", "llama-3-8b", "--hw", "h200-measured", "--mode", "roof")
    assert r.exit_code == 0 and "decode step: measured roof" in r.output
    r = run("speculative", "-k", "4", "-a", "0.8", "--model", "llama-3-8b", "--hw", "h200-measured")
    assert r.exit_code == 0 and "h200-measured (achievable, torch engine)" in r.output
    r = run("disagg", "--model", "llama-3-8b", "--hw", "h200-measured", "--prompt", "1024", "--gen", "256", "--rate", "10",
            "--ttft-target", "0.5", "--tpot-target", "0.05")
    assert r.exit_code == 0 and "(achievable, torch engine;" in r.output
    r = run("moe", "--model", "deepseek-v3", "--hw", "h100-sxm")
    assert r.exit_code == 0 and "warning: does not fit at batch 1 and above: 1.34 TB needed per GPU, 80 GB available" in r.output
    r = run("speculative", "-k", "8", "-a", "0.9", "--model", "llama-3-8b", "--hw", "h100-sxm", "--batch", "65536")
    assert r.exit_code == 0 and "warning: does not fit: " in r.output and "needed per GPU, 80 GB available" in r.output
    r = run("speculative", "-k", "8", "-a", "0.9", "--model", "llama-3-8b", "--hw", "h100-sxm", "--batch", "1")
    assert r.exit_code == 0 and "does not fit" not in r.output


def test_whatif_json_says_its_mode():
    """kv, moe, speculative and disagg JSON name the mode (and engine) of their times."""
    common = ("--model", "llama-3-8b", "--hw", "h200-measured")
    assert run_json("kv", *common)["mode"] == "achievable"
    assert run_json("kv", *common, "--mode", "roof")["mode"] == "measured-roof"
    moe = run_json("moe", "--model", "mixtral-8x7b", "--hw", "h200-measured", "--batch", "1")
    assert moe["mode"] == "achievable" and moe["engine"] == "torch" and "tokens_per_s_per_replica" in moe["decode_by_batch"][0]
    assert run_json("speculative", "-k", "2", "-a", "0.7", *common)["mode"] == "achievable"
    assert run_json("disagg", *common, "--prompt", "1024", "--gen", "64", "--rate", "1", "--ttft-target", "1",
                    "--tpot-target", "0.05", "--engine", "fused")["engine"] == "fused"
