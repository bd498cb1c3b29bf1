"""The end-to-end layer check's prediction side: one decoder layer's ops from the analytical model
(the layer itself is built, checked and timed in the gpu_suite CPU dry run)."""

from __future__ import annotations

import pytest

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
