"""roofline serve: the step table against the one prediction path, the steady state against the
simulation, the M/D/1 queue, the CLI contract and its bad-input lines."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rooflinecli.analysis.workload import Workload
from rooflinecli.cli import app
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model
from rooflinecli.predict import predict_step_s
from rooflinecli.serve.arrivals import Stream, arrivals, lengths
from rooflinecli.serve.replica import build_replica
from rooflinecli.serve.sim import simulate
from rooflinecli.serve.schedulers import StepPolicy, step_policy
from rooflinecli.serve.steady import Lengths, aggregated_closed, aggregated_open, first_wave_ttft_s, lockstep_waves
from rooflinecli.serve.steps import StepTable
from conftest import cli_runner


runner = cli_runner()
CFG = get_model("llama-3-8b")
SPEC = get_spec("h100-sxm")
WL = Workload(batch=1, prompt_len=1024, gen_len=256, mode="datasheet")


def serve(*args):
    return runner.invoke(app, ["serve", *args])


@pytest.fixture(scope="module")
def replica():
    return build_replica(CFG, SPEC, WL, isl=1024, osl=256)


def test_steps_are_the_prediction_paths_phases(replica):
    """A decode-only step is the decode phase; a prefill-only step of one prompt is the prefill phase."""
    t = replica.table
    for b, n in ((1, 1024), (64, 1200), (replica.kv_limit, 1100)):
        want = predict_step_s(CFG, SPEC, WL, "decode", b, n)
        assert float(t.decode_s(b, n)) == pytest.approx(want, rel=0.02)
    for s in (300, 1024):  # the table covers prompts up to the isl
        want = predict_step_s(CFG, SPEC, WL, "prefill", 1, s)
        assert float(t.prefill_s(1, s)) == pytest.approx(want, rel=0.02)


def test_mixed_step_costs_more_than_either_part(replica):
    t = replica.table
    dec = float(t.decode_s(32, 1100))
    pre = float(t.prefill_s(1, 1024))
    mixed = float(t.mixed_s(32, 1100, 1024, t.prefill_attention(1024)))
    assert max(dec, pre) < mixed < dec + pre


def test_tpot_is_the_benchmark_definition(replica):
    out = aggregated_closed(replica.table, Lengths(1024, 256), 16.0, replica.kv_limit, 8192)
    assert float(out["e2e_s"]) == pytest.approx(float(out["ttft_s"]) + 255 * float(out["tpot_s"]), rel=1e-9)
    assert float(out["tokens_per_s_per_user"]) == pytest.approx(1.0 / float(out["tpot_s"]))
    assert float(out["throughput_tokens_per_s_per_gpu"]) == pytest.approx(float(out["requests_per_s"]) * 256)


@pytest.mark.parametrize("conc", [4, 16, 64, 200])
def test_steady_state_agrees_with_the_simulation(replica, conc):
    """A steady closed loop (lengths spread so clients do not move in lockstep): TTFT, TPOT and
    throughput within 5%."""
    rng = np.random.default_rng(1)
    n = 3000
    stream = Stream(None, lengths(rng, n, 1024, 0.0, "isl"), lengths(rng, n, 256, 0.5, "osl"))
    res = simulate(replica.table, stream, token_budget=8192, kv_tokens=replica.kv_tokens, max_seqs=replica.kv_limit, concurrency=conc)
    s = res.window(0.1).summary()
    steady = aggregated_closed(replica.table, Lengths(float(np.mean(stream.input_tokens)), float(np.mean(stream.output_tokens))),
                               float(conc), replica.kv_limit, 8192)
    assert s["ttft_s"]["mean"] == pytest.approx(float(steady["ttft_s"]), rel=0.05)
    assert s["tpot_s"]["mean"] == pytest.approx(float(steady["tpot_s"]), rel=0.05)
    assert s["throughput_tokens_per_s_per_gpu"] == pytest.approx(float(steady["throughput_tokens_per_s_per_gpu"]), rel=0.05)


@pytest.mark.parametrize("clients,isl", [(1, 1024), (8, 1024), (32, 1024), (24, 3000)])
def test_first_wave_agrees_with_the_simulation(replica, clients, isl):
    """Clients that arrive together at an idle engine: the analytic first wave's mean TTFT is the
    simulation's (one request per client), and it grows with the wave (each prompt waits for the
    steps that prefill those before it)."""
    rep = build_replica(CFG, SPEC, WL, isl=isl, osl=64) if isl != 1024 else replica
    stream = Stream(None, np.full(clients, isl), np.full(clients, 64))
    s = simulate(rep.table, stream, token_budget=8192, kv_tokens=rep.kv_tokens, max_seqs=rep.kv_limit, concurrency=clients).summary()
    first = first_wave_ttft_s(rep.table, Lengths(isl, 64), clients, rep.kv_limit, 8192)
    assert s["ttft_s"]["mean"] == pytest.approx(first, rel=0.05)
    if clients == 1:
        assert first == pytest.approx(float(rep.table.prefill_s(1, isl)), rel=0.02)
    else:
        assert first > 1.5 * float(rep.table.prefill_s(1, isl))


def test_open_loop_agrees_with_the_simulation(replica):
    rng = np.random.default_rng(2)
    n = 4000
    rate = 0.5 * 64 / float(aggregated_closed(replica.table, Lengths(1024, 256), 64.0, replica.kv_limit, 8192)["e2e_s"])
    stream = Stream(arrivals(rng, n, rate), lengths(rng, n, 1024, 0.0, "isl"), lengths(rng, n, 256, 0.0, "osl"))
    s = simulate(replica.table, stream, token_budget=8192, kv_tokens=replica.kv_tokens, max_seqs=replica.kv_limit).window(0.1).summary()
    steady = aggregated_open(replica.table, Lengths(1024, 256), rate, replica.kv_limit, 8192)
    assert s["ttft_s"]["mean"] == pytest.approx(float(steady["ttft_s"]), rel=0.05)
    assert s["tpot_s"]["mean"] == pytest.approx(float(steady["tpot_s"]), rel=0.05)
    assert s["throughput_tokens_per_s_per_gpu"] == pytest.approx(float(steady["throughput_tokens_per_s_per_gpu"]), rel=0.05)


def test_simulation_reproduces_md1_queueing(replica):
    """One slot, one output token: each request is a deterministic prefill of S seconds; Poisson
    arrivals at utilization rho wait rho S / (2 (1 - rho)) on average (M/D/1)."""
    service = float(replica.table.prefill_s(1, 1024))
    rng = np.random.default_rng(3)
    n = 40000
    for rho in (0.5, 0.8):
        stream = Stream(arrivals(rng, n, rho / service), np.full(n, 1024), np.full(n, 1))
        res = simulate(replica.table, stream, token_budget=8192, kv_tokens=replica.kv_tokens, max_seqs=1)
        wait = float(np.mean(res.ttft_s)) - service
        assert wait == pytest.approx(rho * service / (2 * (1 - rho)), rel=0.06)
        steady = aggregated_open(replica.table, Lengths(1024, 1), rho / service, 1, 8192)
        assert float(steady["queue_wait_s"]) == pytest.approx(rho * service / (2 * (1 - rho)), rel=0.01)


def test_simulation_is_seeded(replica):
    def run(seed):
        rng = np.random.default_rng(seed)
        stream = Stream(arrivals(rng, 500, 20.0, 0.5), lengths(rng, 500, 512, 0.5, "isl"), lengths(rng, 500, 128, 0.5, "osl"))
        return simulate(replica.table, stream, token_budget=2048, kv_tokens=replica.kv_tokens, max_seqs=replica.kv_limit).summary()

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_cli_contract_keys():
    r = serve("--model", "llama-3-8b", "--hw", "h100-sxm", "--tp", "1", "--isl", "1024", "--osl", "256", "--concurrency", "32", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for k in ("ttft_s", "tpot_s", "itl_s", "throughput_tokens_per_s_per_gpu", "tokens_per_s_per_user", "mode", "engine", "calibration"):
        assert k in d
    assert d["tpot_s"] > 0 and d["ttft_s"] > 0
    assert d["tokens_per_s_per_user"] == pytest.approx(1 / d["tpot_s"])
    assert d["roof"]["tpot_s"] <= d["tpot_s"] * (1 + 1e-9)


def test_cli_rate_and_disagg():
    r = serve("--model", "llama-3-8b", "--hw", "h100-sxm", "--mode", "datasheet", "--rate", "5", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["requests_per_s"] == pytest.approx(5.0)
    r = serve("--model", "llama-3-8b", "--hw", "h100-sxm", "--mode", "datasheet", "--concurrency", "32", "--disagg", "1:2", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["serving"] == "disaggregated" and d["layout"]["gpus"] == 3 and d["kv_transfer_s"] > 0


def test_cli_simulate_prints_percentiles():
    r = serve("--model", "llama-3-8b", "--hw", "h100-sxm", "--mode", "datasheet", "--rate", "5", "--simulate", "--requests", "300", "--json")
    assert r.exit_code == 0, r.output
    sim = json.loads(r.stdout)["simulation"]
    assert sim["requests"] == 300
    assert sim["ttft_s"]["p50"] <= sim["ttft_s"]["p90"] <= sim["ttft_s"]["p99"]


def _one_error_line(r, *words):
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "Traceback" not in r.output, err
    for w in words:
        assert w in err, err


def test_bad_trace_row_is_named(tmp_path):
    p = tmp_path / "trace.csv"
    p.write_text("arrival_s,input_tokens,output_tokens\n0.0,100,10\n0.5,abc,10\n")
    r = serve("--model", "llama-3-8b", "--mode", "datasheet", "--rate", "1", "--simulate", "--trace", str(p))
    _one_error_line(r, "trace.csv:3", "input_tokens")


def test_rate_beyond_capacity_is_an_error():
    r = serve("--model", "llama-3-8b", "--mode", "datasheet", "--rate", "100000")
    _one_error_line(r, "capacity")


def test_concurrency_beyond_kv_capacity_is_said():
    r = serve("--model", "llama-3-8b", "--mode", "datasheet", "--isl", "8192", "--osl", "8192", "--concurrency", "5000", "--json")
    assert r.exit_code == 0, r.output
    assert sum("beyond the KV cache" in line for line in r.stderr.splitlines()) == 1
    d = json.loads(r.stdout)
    assert d["running_sequences"] == d["kv_limit_sequences"] < 5000
    assert d["queue_wait_s"] > 0


def test_model_that_does_not_fit_is_an_error():
    r = serve("--model", "llama-3-70b", "--hw", "h100-sxm", "--mode", "datasheet", "--concurrency", "1")
    _one_error_line(r, "not even one sequence")


def test_engine_without_calibration_says_roof():
    r = serve("--model", "llama-3-8b", "--hw", "h100-sxm", "--engine", "fused", "--concurrency", "4", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["calibration"] is None and d["mode"] == "datasheet" and d["engine"] == "fused"
    assert sum("no fused calibration for h100-sxm" in line for line in r.stderr.splitlines()) == 1


def test_one_load_only():
    r = serve("--model", "llama-3-8b", "--mode", "datasheet", "--concurrency", "4", "--rate", "2")
    _one_error_line(r, "one load")


def test_trace_sets_lengths_and_rate(tmp_path):
    p = tmp_path / "trace.csv"
    p.write_text("arrival_s,input_tokens,output_tokens\n0.0,900,200\n0.1,1100,300\n0.25,1000,250\n0.4,1000,250\n")
    r = serve("--model", "llama-3-8b", "--mode", "datasheet", "--simulate", "--trace", str(p), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert (d["isl_tokens"], d["osl_tokens"]) == (1000, 250)
    assert d["rate_requests_per_s"] == pytest.approx(3 / 0.4)
    assert d["simulation"]["requests"] == 4
    r = serve("--model", "llama-3-8b", "--mode", "datasheet", "--trace", str(p))
    _one_error_line(r, "--simulate")


def test_bursty_arrivals_fatten_the_tail(replica):
    """Gamma gaps of shape 0.2 (same mean rate) queue more than Poisson: a higher p99 TTFT."""
    rate = 0.7 * 64 / float(aggregated_closed(replica.table, Lengths(1024, 256), 64.0, replica.kv_limit, 8192)["e2e_s"])

    def p99(burstiness):
        rng = np.random.default_rng(5)
        n = 3000
        stream = Stream(arrivals(rng, n, rate, burstiness), np.full(n, 1024), np.full(n, 256))
        return simulate(replica.table, stream, token_budget=8192, kv_tokens=replica.kv_tokens, max_seqs=replica.kv_limit).summary()["ttft_s"]["p99"]

    assert p99(0.2) > 1.2 * p99(1.0)


def _constant_table(decode_s: float, s_per_prefill_token: float) -> StepTable:
    """A step table whose decode step costs ``decode_s`` at any batch and context and whose
    prefill steps cost ``s_per_prefill_token`` a prompt token (no attention terms)."""
    g = np.array([1.0, 1e5])
    z = np.zeros((2, 2))
    return StepTable(mode="datasheet", engine=None, num_gpus=1, batch_grid=g, context_grid=g, token_grid=g, prefill_grid=g,
                     decode_rest_s=(np.full(2, decode_s), np.full(2, decode_s)), decode_attention_s=(z, z),
                     mixed_rest_s=(g * s_per_prefill_token, g * s_per_prefill_token), prefill_attention_s=(np.zeros(2), np.zeros(2)))


@pytest.mark.parametrize("clients,isl,budget", [(16, 1024, 8192), (6, 1000, 2000), (1, 512, 8192)])
def test_lockstep_waves_on_a_constant_service_model(clients, isl, budget):
    """Clients in step on a scheduler whose prefill steps do not decode: with m prompts a step, k
    steps a wave of step time s, every wave's mean TTFT is s (k + 1) / 2 and TPOT adds the wave's
    remaining prefill to the decode steps; the simulation of 10 requests per client gives both."""
    dec, per_tok, osl = 0.01, 1e-5, 50
    table = _constant_table(dec, per_tok)
    m = budget // isl
    k = -(-clients // m)
    s = m * isl * per_tok if clients >= m else clients * isl * per_tok
    ttft = s * (k + 1) / 2.0
    tpot = (k * s - ttft) / (osl - 1) + dec
    w = lockstep_waves(table, Lengths(isl, osl), clients, 10_000, m * isl)
    assert w["ttft_s"] == pytest.approx(ttft, rel=1e-9)
    assert w["tpot_s"] == pytest.approx(tpot, rel=1e-9)
    stream = Stream(None, np.full(10 * clients, isl), np.full(10 * clients, osl))
    sim = simulate(table, stream, token_budget=m * isl, kv_tokens=10**9, max_seqs=10_000, concurrency=clients, mixes_decode=False).summary()
    assert sim["ttft_s"]["mean"] == pytest.approx(ttft, rel=1e-9)
    assert sim["tpot_s"]["mean"] == pytest.approx(tpot, rel=1e-9)
    mixing = simulate(table, stream, token_budget=m * isl, kv_tokens=10**9, max_seqs=10_000, concurrency=clients).summary()
    if k > 1:  # a mixing scheduler lets the clients drift apart: fewer prompts wait for a whole wave
        assert mixing["ttft_s"]["mean"] < ttft


@pytest.mark.parametrize("clients,isl,osl", [(8, 1024, 256), (64, 1024, 256), (24, 3000, 128)])
def test_lockstep_waves_agree_with_the_simulation(replica, clients, isl, osl):
    rep = build_replica(CFG, SPEC, WL, isl=isl, osl=osl)
    stream = Stream(None, np.full(10 * clients, isl), np.full(10 * clients, osl))
    s = simulate(rep.table, stream, token_budget=8192, kv_tokens=rep.kv_tokens, max_seqs=rep.kv_limit, concurrency=clients, mixes_decode=False).summary()
    w = lockstep_waves(rep.table, Lengths(isl, osl), clients, rep.kv_limit, 8192)
    assert s["ttft_s"]["mean"] == pytest.approx(w["ttft_s"], rel=0.01)
    assert s["tpot_s"]["mean"] == pytest.approx(w["tpot_s"], rel=0.01)
    assert w["ttft_s"] > float(aggregated_closed(rep.table, Lengths(isl, osl), clients, rep.kv_limit, 8192)["ttft_s"])


def test_step_policies_are_the_engines_defaults():
    gib = 1024**3
    assert step_policy("sglang", 141e9, 8192) == StepPolicy(mixes_decode=False, prefill_tokens=8192)  # H200: 8k chunks
    assert step_policy("sglang", 180e9, 8192) == StepPolicy(mixes_decode=False, prefill_tokens=16384)  # B200
    assert step_policy("sglang", 159 * gib, 8192).prefill_tokens == 8192
    for engine in ("vllm", "trtllm", None):
        assert step_policy(engine, 80e9, 4096) == StepPolicy(mixes_decode=True, prefill_tokens=4096)
