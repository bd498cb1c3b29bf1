"""``roofline e2e --full``: the whole-model plan (layers reduced to fit, points that do not fit
skipped), the torch decode step against the prefill it continues, and the CPU dry run through the
CLI (points, failures and the time budget recorded, never a crash)."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from rooflinecli.bench import e2e_full as E
from rooflinecli.cli import app
from rooflinecli.model_registry import get_model

runner = CliRunner()
H200_USABLE = 0.85 * 140e9


def test_plan_reduces_llama70b_layers_and_skips_caches_that_do_not_fit():
    plan = E.make_plan(get_model("llama-3-70b"), H200_USABLE)
    assert plan.reduced and 1 <= plan.cfg.num_layers < 80 and plan.layers_full == 80
    assert E.weight_bytes(plan.cfg, plan.cfg.num_layers) <= E.WEIGHT_SHARE * H200_USABLE
    assert E.weight_bytes(plan.cfg, plan.cfg.num_layers + 1) > E.WEIGHT_SHARE * H200_USABLE  # the most that fit
    free = H200_USABLE - E.weight_bytes(plan.cfg, plan.cfg.num_layers)
    for B, N in plan.decode:
        assert E.kv_bytes(plan.cfg, plan.cfg.num_layers, B, N) < free
    assert (64, 8192) not in plan.decode and any(s["batch"] == 64 and s["context"] == 8192 for s in plan.skipped)
    assert (1, 512) in plan.decode and plan.prefill == [128, 512, 2048]


def test_plan_keeps_llama8b_whole_with_its_grid():
    plan = E.make_plan(get_model("llama-3-8b"), H200_USABLE)
    assert not plan.reduced and plan.cfg.num_layers == 32
    assert len(plan.decode) == len(E.DECODE_BATCHES) * len(E.DECODE_CONTEXTS) and plan.skipped == []
    assert set(plan.triton) <= set(plan.decode) and plan.triton
    # 16 GB of bf16 weights: the count matches the parameter count of the preset within 1%
    assert E.weight_bytes(plan.cfg, 32) / 2 == pytest.approx(8.03e9, rel=0.01)


@pytest.mark.parametrize("model", ["qwen2.5-7b", "qwen3-30b-a3b", "mixtral-8x7b"])  # q/k/v biases; MoE + q/k norms; MoE
def test_decode_step_continues_the_prefill(model):
    """The decode step at position N from a cache filled by prefill gives the logits of a prefill
    over N + 1 tokens (same random weights, bf16 torch ops both ways)."""
    cfg = E.tiny_full_config(get_model(model))
    W = E.Weights(cfg, "cpu", seed=3)
    N = 11
    tokens = torch.randint(0, cfg.vocab_size, (N + 1,), generator=torch.Generator().manual_seed(5))
    shape = (1, cfg.num_kv_heads, N + 1, cfg.head_dim)
    kc = [torch.full(shape, float("nan"), dtype=torch.bfloat16) for _ in W.layers]  # poisoned: every read slot is written first
    vc = [torch.full(shape, float("nan"), dtype=torch.bfloat16) for _ in W.layers]
    cos, sin = W.rope_tables(torch.arange(N))
    E.prefill(W, tokens[:N], cos, sin, kc, vc)
    cos1, sin1 = W.rope_tables(torch.tensor([N]))
    step = E.decode_step(W, E.TorchOps(), tokens[N:], cos1, sin1, kc, vc, N).float()
    kc2 = [torch.empty(shape, dtype=torch.bfloat16) for _ in W.layers]
    vc2 = [torch.empty(shape, dtype=torch.bfloat16) for _ in W.layers]
    cos2, sin2 = W.rope_tables(torch.arange(N + 1))
    whole = E.prefill(W, tokens, cos2, sin2, kc2, vc2).float()
    assert torch.isfinite(step).all() and step.abs().max() > 0
    assert float((step - whole).norm() / whole.norm()) < 3e-2
    other = E.decode_step(W, E.TorchOps(), (tokens[N:] + 1) % cfg.vocab_size, cos1, sin1, kc, vc, N).float()
    assert float((other - whole).norm() / whole.norm()) > 0.1  # the check can fail


def test_a_sliding_window_decode_attends_over_the_last_w_tokens_of_a_rolling_cache():
    """Mistral's window (here W = 8 on a tiny model): the cache is a rolling buffer of W slots
    (position p in slot p % W); a decode step at N = 13 writes slot 13 % 8 and attends over
    positions 6..13, as a step over a cache of exactly those positions does, and unlike a step
    over all 14 (the check can fail). The plan sizes caches and skips prompts past the window."""
    from dataclasses import replace

    cfg = replace(E.tiny_full_config(get_model("mistral-7b")), sliding_window=8)
    assert E.unsupported_reason(cfg) is None and E.cache_len(cfg, 13) == 8 and E.cache_len(cfg, 5) == 6
    W = E.Weights(cfg, "cpu", seed=4)
    N, Wn = 13, 8
    g = torch.Generator().manual_seed(6)
    full = [(torch.randn(1, cfg.num_kv_heads, N + 1, cfg.head_dim, generator=g).to(torch.bfloat16),
             torch.randn(1, cfg.num_kv_heads, N + 1, cfg.head_dim, generator=g).to(torch.bfloat16)) for _ in W.layers]
    ring = []
    for k, v in full:  # positions N - W + 1 .. N - 1 in their slots p % W (the new token's slot is written by the step)
        rk, rv = torch.full_like(k[:, :, :Wn], float("nan")), torch.full_like(v[:, :, :Wn], float("nan"))
        for pos in range(N - Wn + 1, N):
            rk[:, :, pos % Wn], rv[:, :, pos % Wn] = k[:, :, pos], v[:, :, pos]
        ring.append((rk, rv))
    last = [(k[:, :, N - Wn + 1:].clone(), v[:, :, N - Wn + 1:].clone()) for k, v in full]  # positions N-W+1..N, the new one last
    token = torch.tensor([3])
    cos, sin = W.rope_tables(torch.tensor([N]))
    got = E.decode_step(W, E.TorchOps(), token, cos, sin, [k for k, _ in ring], [v for _, v in ring], N).float()
    want = E.decode_step(W, E.TorchOps(), token, cos, sin, [k for k, _ in last], [v for _, v in last], Wn - 1).float()
    every = E.decode_step(W, E.TorchOps(), token, cos, sin, [k for k, _ in full], [v for _, v in full], N).float()
    assert torch.isfinite(got).all() and float((got - want).norm() / want.norm()) < 2e-2
    assert float((every - want).norm() / want.norm()) > 0.05
    plan = E.make_plan(replace(get_model("mistral-7b"), sliding_window=4096), 120e9, batches=(8,), contexts=(8192,), prefill=(2048, 8192))
    assert plan.decode == [(8, 8192)] and plan.prefill == [2048] and "sliding window" in plan.skipped[-1]["reason"]
    assert E.kv_bytes(get_model("mistral-7b"), 32, 8, 8192) == 2 * 2 * 32 * 8 * 8 * 4096 * 128


def test_plan_keeps_qwen3_moe_whole_and_counts_its_experts():
    """Qwen3-30B-A3B's 128 experts x 48 layers: 61 GB of bf16 weights, within 1% of its parameters."""
    cfg = get_model("qwen3-30b-a3b")
    assert E.unsupported_reason(cfg) is None and E.unsupported_reason(get_model("mixtral-8x7b")) is None
    assert E.weight_bytes(cfg, cfg.num_layers) / 2 == pytest.approx(30.5e9, rel=0.01)
    assert E.rebuild_config("qwen3-30b-a3b", E.config_fields(E.tiny_full_config(cfg))) == E.tiny_full_config(cfg).__class__(
        **{**E.tiny_full_config(cfg).__dict__, "name": cfg.name})


def test_unsupported_models_are_one_line():
    r = runner.invoke(app, ["e2e", "--full", "--device", "cpu", "--tiny", "-m", "deepseek-v3"])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "no MLA yet" in r.output
    r = runner.invoke(app, ["e2e", "--full", "--device", "cpu", "--tiny", "--budget-s", "0"])
    assert r.exit_code == 2 and "--budget-s" in r.output


def test_full_dry_run_writes_every_point_and_the_triton_engine(tmp_path):
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["e2e", "--full", "--device", "cpu", "--tiny", "-m", "llama-3-8b", "-r", str(out)])
    assert r.exit_code == 0, r.output
    section = json.loads(out.read_text())["extra"]["end_to_end_full"]
    assert section["schema"] == "rooflinecli.e2e_full/1" and section["datasheet_spec"] == "h200"
    entry = section["models"]["llama-3-8b-tiny"]
    assert entry["model_ref"] == "llama-3-8b" and entry["config"]["num_layers"] == entry["layers_used"] == 2
    assert "partial" not in entry and entry["failed"] == [] and entry["skipped"] == []
    pts = entry["points"]
    decode = {(p["batch"], p["context"]) for p in pts if p["phase"] == "decode" and p["engine"] == "torch"}
    assert decode == {(b, n) for b in E.TINY_BATCHES for n in E.TINY_CONTEXTS}
    assert [p["context"] for p in pts if p["phase"] == "prefill"] == list(E.TINY_PREFILL)
    tri = [p for p in pts if p["engine"] == "triton"]
    assert len(tri) == len(E.TINY_TRITON) and all(p["check_ok"] and p["check_rel_error_vs_torch"] < E.TRITON_TOLERANCE for p in tri)
    assert all(p["measured_s"] > 0 and len(p["samples_s"]) >= 3 and p["layers"] == 2 for p in pts)
    assert all(p["graph_check_ok"] and p["graph_check_rel_error"] < E.TRITON_TOLERANCE for p in pts if p["phase"] == "decode")
    assert "kernels.gemm" in entry["triton_engine"]["kernels"] and "RoPE" in entry["triton_engine"]["torch_ops"]
    # a second model accumulates beside the first
    r = runner.invoke(app, ["e2e", "--full", "--device", "cpu", "--tiny", "--no-triton", "-m", "qwen2.5-7b", "-r", str(out)])
    assert r.exit_code == 0, r.output
    models = json.loads(out.read_text())["extra"]["end_to_end_full"]["models"]
    assert set(models) == {"llama-3-8b-tiny", "qwen2.5-7b-tiny"}
    assert not any(p["engine"] == "triton" for p in models["qwen2.5-7b-tiny"]["points"])


def test_a_failing_point_is_recorded_the_rest_run_and_the_budget_stops_new_points(monkeypatch):
    cfg = E.tiny_full_config(get_model("llama-3-8b"))
    real = E.pick_decode_backend

    def flaky(W, batch, context, device, gen, *rest):
        if batch == 2:
            raise RuntimeError("CUDA error: out of memory\nmore")
        return real(W, batch, context, device, gen, *rest)

    monkeypatch.setattr(E, "pick_decode_backend", flaky)
    seen = []
    out = E.run_full(cfg, "llama-3-8b", "cpu", tiny=True, budget_s=60, triton=False, checkpoint=lambda e: seen.append(len(e["points"]) + len(e["failed"])))
    assert [(f["batch"], f["error"]) for f in out["failed"]] == [(2, "RuntimeError: CUDA error: out of memory more")] * 2
    assert {p["batch"] for p in out["points"] if p["phase"] == "decode"} == {1} and any(p["phase"] == "prefill" for p in out["points"])
    assert seen == list(range(1, len(seen) + 1))  # a checkpoint after every point
    cut = E.run_full(cfg, "llama-3-8b", "cpu", tiny=True, budget_s=1e-9)
    assert cut["points"] == [] and all(s["reason"] == "time budget spent" for s in cut["skipped"]) and len(cut["skipped"]) >= 5


def test_moe_dry_run_times_both_engines_and_validate_rebuilds_the_tiny_experts(tmp_path):
    """Qwen3-MoE (routed experts, q/k norms) through the CLI on the CPU: torch points (routing +
    torch._grouped_mm) and the Triton engine (kernels.moe) checked against torch; validate
    predicts the points from the tiny config it ran (its 8 experts, not the preset's 128)."""
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["e2e", "--full", "--device", "cpu", "--tiny", "-m", "qwen3-30b-a3b", "-r", str(out)])
    assert r.exit_code == 0, r.output
    entry = json.loads(out.read_text())["extra"]["end_to_end_full"]["models"]["qwen3-30b-a3b-tiny"]
    assert entry["failed"] == [] and entry["config"]["moe"] == {"num_routed_experts": 8, "top_k": 2, "expert_intermediate_size": 96}
    assert "torch._grouped_mm experts" in entry["ops"] and "q/k norms" in entry["ops"]
    tri = [p for p in entry["points"] if p["engine"] == "triton"]
    assert tri and all(p["check_ok"] for p in tri)
    v = runner.invoke(app, ["validate", str(out), "--out", str(tmp_path / "v.json")])
    assert v.exit_code in (0, 1), v.output
    rows = json.loads((tmp_path / "v.json").read_text())["end_to_end_full"]
    from dataclasses import replace

    from rooflinecli.predict import predict_step_s
    from rooflinecli.analysis import Workload
    from rooflinecli.hardware import get_spec

    tiny = E.tiny_full_config(get_model("qwen3-30b-a3b"))
    preset_experts = replace(tiny, moe=get_model("qwen3-30b-a3b").moe)
    q = next(x for x in rows if x["phase"] == "decode" and x["engine"] == "torch")
    wl = Workload(batch=q["batch"], prompt_len=q["context"], gen_len=1)

    def roof(cfg):
        return float(predict_step_s(cfg, get_spec("h200"), wl, "decode", q["batch"], q["context"], mode="roof", engine="torch"))

    assert q["predicted_s_roof"] == pytest.approx(roof(tiny), rel=1e-9) and roof(preset_experts) > 1.5 * roof(tiny)
