"""The end-to-end layer check's prediction side: one decoder layer's ops from the analytical model
(the layer itself is built, checked and timed in the gpu_suite CPU dry run)."""

from __future__ import annotations

import pytest
import torch

from rooflinecli.analysis import Workload
from rooflinecli.predict import layer_prediction
from rooflinecli.bench.e2e import layer_ops_prediction, tiny_config
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model


@pytest.mark.parametrize("phase, batch, context", [("prefill", 1, 2048), ("decode", 8, 4096)])
def test_layer_prediction_is_the_sum_of_the_per_layer_ops(phase, batch, context):
    cfg, spec = get_model("llama-3-8b"), get_spec("h200")
    total, rows = layer_ops_prediction(cfg, spec, phase, batch, context)
    names = {r["name"] for r in rows}
    assert {"attn.core", "mlp.down", "norms"} <= names
    assert not names & {"embedding", "lm_head", "final_norm"}  # model-level ops are not in one layer
    everything = layer_prediction(cfg, spec, Workload(batch=batch, prompt_len=context, gen_len=1), phase)
    assert total == pytest.approx(sum(r["time_s"] for r in everything if r["group"] != "model"))
    assert total < sum(r["time_s"] for r in everything)


def test_decode_layer_is_weight_bound_and_scales_with_bandwidth():
    cfg = get_model("llama-3-8b")
    t_h100, _ = layer_ops_prediction(cfg, get_spec("h100-sxm"), "decode", 8, 4096)
    t_h200, rows = layer_ops_prediction(cfg, get_spec("h200"), "decode", 8, 4096)
    assert all(r["bound"] == "memory" for r in rows if r["kind"] == "gemm")
    # same compute, 4.8 vs 3.35 TB/s: a memory-bound layer is faster by the bandwidth ratio
    assert t_h100 / t_h200 == pytest.approx(4800 / 3350, rel=1e-6)


def test_tiny_config_keeps_the_kernels_head_dim():
    cfg = tiny_config(get_model("llama-3-8b"))
    assert cfg.head_dim == 64 and cfg.num_heads % cfg.num_kv_heads == 0
    total, _ = layer_ops_prediction(cfg, get_spec("h200"), "prefill", 1, 19)
    assert total > 0


def _tiny_run(model: str = "llama-3-8b"):
    from rooflinecli.bench.e2e import TINY_SHAPES, run_e2e

    return run_e2e(tiny_config(get_model(model)), get_spec("h200"), None, TINY_SHAPES, "cpu", 10)


def test_tiny_layer_runs_the_whole_model_decoder_and_checks_both_engines():
    """The layer is ``e2e_full``'s: our kernels and the torch engine both within the tolerance of
    the float32 reference, each phase timed with the samples asked for and predicted per layer."""
    from rooflinecli.bench.e2e import LAYER_TOLERANCE

    out = _tiny_run()
    assert [p["phase"] for p in out["phases"]] == ["prefill", "decode"]
    for p in out["phases"]:
        assert p["correct"] and p["error"] == "", p["error"]
        assert 0 < p["max_rel_error"] <= LAYER_TOLERANCE and 0 < p["torch_rel_error"] <= LAYER_TOLERANCE
        assert len(p["samples_s"]) >= 10 and p["p20_s"] <= p["measured_s"] <= p["p80_s"]
        assert p["predicted_s_datasheet"] == pytest.approx(sum(o["predicted_s_datasheet"] for o in p["ops"]))
        assert p["predicted_s_measured"] is None and "eager_p50_s" not in p  # no measured spec; the CPU has no eager/graph pair
    assert out["layer"]["num_heads"] == 2 and out["measured_spec"] is None


def test_a_wrong_kernel_fails_the_check_and_skips_the_timing(monkeypatch):
    from rooflinecli.bench import e2e_full as E

    real = E.TritonOps.linear
    monkeypatch.setattr(E.TritonOps, "linear", lambda self, x, w, b=None: 1.5 * real(self, x, w, b))
    for p in _tiny_run()["phases"]:
        assert not p["correct"] and p["error"].startswith("triton rel error") and "measured_s" not in p
        assert p["torch_rel_error"] <= 3e-2  # the torch engine still passes


def test_the_reference_is_float32_torch():
    """ReferenceOps computes in float32: closer to a float64 GEMM than the bf16 torch engine."""
    from rooflinecli.bench import e2e_full as E

    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(16, 256, generator=g).bfloat16(), torch.randn(64, 256, generator=g).bfloat16()
    exact = x.double() @ w.double().T
    ref, bf = E.ReferenceOps().linear(x, w), E.TorchOps().linear(x, w)
    assert ref.dtype == torch.bfloat16
    assert torch.allclose(ref.float(), (x.float() @ w.float().T).bfloat16().float(), rtol=8e-3, atol=1e-3)  # float32 arithmetic, rounded once
    # no worse than the bf16 engine (CPU builds that accumulate bf16 in float32 tie it to ~1e-12)
    assert E.rel_error(ref, exact) <= E.rel_error(bf, exact) * (1 + 1e-6)
