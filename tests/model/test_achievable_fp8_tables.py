"""Which measured table an fp8 checkpoint reads: a block-quantized one (weight_block_size) the
block-fp8 GEMM and MoE tables, a per-tensor one the fp8 table; checked against the tables' own
rows."""

from __future__ import annotations

import numpy as np
import pytest

from rooflinecli.achievable import calibration_for, models_for
from rooflinecli.achievable.step import BLOCK_FP8_FLOOR_RATIO
from rooflinecli.analysis.workload import Workload
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model
from rooflinecli.predict import predict_step_breakdown


def _rows(cfg, spec, wl, B, ctx, engine):
    return {r["name"]: r for r in predict_step_breakdown(cfg, spec, wl, "decode", B, ctx, mode="achievable", engine=engine)}


def _gemm_row(spec, engine, dtype, M, N, K) -> float:
    c = calibration_for(spec, engine).tables["gemm"]["columns"]
    m = (np.asarray(c["dtype"]) == dtype) & (c["M"] == M) & (c["N"] == N) & (c["K"] == K)
    assert m.sum() == 1
    return float(c["latency_us"][m][0]) * 1e-6


def _wl(B, **kw):
    return Workload(batch=B, prompt_len=1024, gen_len=1, compute_dtype="fp8", weight_dtype="fp8", **kw)


def test_block_fp8_checkpoint_reads_the_block_fp8_gemm_table_at_its_own_rows():
    spec, cfg, B = get_spec("h200"), get_model("qwen3-235b-a22b-fp8"), 32
    assert cfg.quantization.group_in == cfg.quantization.group_out == 128
    rows = _rows(cfg, spec, _wl(B), B, 1024, "sglang")
    # o_proj 8192 -> 4096 (64 heads of 128), M = 32: a grid point of the block-fp8 table, read as measured
    assert "fp8_block GEMM table" in rows["attn.o"]["note"]
    assert rows["attn.o"]["time_s"] == pytest.approx(cfg.num_layers * _gemm_row(spec, "sglang", "fp8_block", 32, 4096, 8192), rel=1e-6)


def test_per_tensor_fp8_checkpoint_reads_the_fp8_table():
    spec, cfg, B = get_spec("h200"), get_model("llama-3.1-8b-fp8"), 32
    assert not (cfg.quantization.group_in and cfg.quantization.group_out)
    rows = _rows(cfg, spec, _wl(B), B, 1024, "sglang")
    assert "fp8 GEMM table" in rows["attn.o"]["note"]
    assert rows["attn.o"]["time_s"] == pytest.approx(cfg.num_layers * _gemm_row(spec, "sglang", "fp8", 32, 4096, 4096), rel=1e-6)


def test_a_block_fp8_table_slower_than_its_floor_allows_gives_way_to_fp8():
    # vLLM's block-fp8 rows take ~85 us whatever the shape: the fp8 table answers
    spec, cfg, B = get_spec("h200"), get_model("qwen3-235b-a22b-fp8"), 32
    g = models_for(spec, "vllm").tables.gemm
    assert g["fp8_block"].floor_s > BLOCK_FP8_FLOOR_RATIO * g["fp8"].floor_s
    rows = _rows(cfg, spec, _wl(B), B, 1024, "vllm")
    assert "fp8 GEMM table" in rows["attn.o"]["note"]
    assert rows["attn.o"]["time_s"] == pytest.approx(cfg.num_layers * _gemm_row(spec, "vllm", "fp8", 32, 4096, 8192), rel=1e-6)


def test_block_fp8_moe_reads_the_block_fp8_moe_rows():
    spec, cfg = get_spec("h200"), get_model("qwen3-235b-a22b-fp8")
    m = cfg.moe
    c = calibration_for(spec, "vllm").tables["moe"]["columns"]
    sel = (np.asarray(c["dtype"]) == "fp8_block") & (c["d"] == cfg.hidden_size) & (c["I"] == m.expert_intermediate_size) \
        & (c["k"] == m.top_k) & (c["E"] == m.num_routed_experts) & (c["tp"] == 1) & (c["ep"] == 4)
    assert sel.any()
    T = float(np.sort(np.unique(c["T"][sel]))[min(3, int(np.unique(c["T"][sel]).size) - 1)])
    want = float(np.mean(c["latency_us"][sel & (c["T"] == T)])) * 1e-6
    rows = _rows(cfg, spec, _wl(int(T), tp=4, ep=4), T, 1024, "vllm")
    assert "fp8_block table" in rows["moe.experts"]["note"]
    assert rows["moe.experts"]["time_s"] == pytest.approx(cfg.num_layers * want, rel=1e-6)


def test_block_fp8_moe_under_tp_reads_the_kernel_measured_there():
    # vLLM's block-fp8 experts: the table holds its main kernel under EP only and another kernel
    # under TP; a TP 2 replica reads the TP rows (that kernel's), not the per-tensor fp8 table's
    spec, cfg = get_spec("h200"), get_model("qwen3-235b-a22b-fp8")
    m = cfg.moe
    t = calibration_for(spec, "vllm").tables["moe"]
    c = t["columns"]
    shape = (c["d"] == cfg.hidden_size) & (c["I"] == m.expert_intermediate_size) & (c["k"] == m.top_k) & (c["E"] == m.num_routed_experts)
    sel = (np.asarray(c["dtype"]) == "fp8_block") & shape & (c["tp"] == 2) & (c["ep"] == 1)
    assert sel.any()
    other = next(x["kernel"] for x in t["layout_kernels"] if x["dtype"] == "fp8_block"
                 and [cfg.hidden_size, m.expert_intermediate_size, m.top_k, m.num_routed_experts, 2, 1] in x["layouts"])
    assert other != t["kernels"]["fp8_block"]
    T = float(np.sort(np.unique(c["T"][sel]))[min(3, int(np.unique(c["T"][sel]).size) - 1)])
    want = float(np.mean(c["latency_us"][sel & (c["T"] == T)])) * 1e-6
    rows = _rows(cfg, spec, _wl(int(T), tp=2), T, 1024, "vllm")
    assert "fp8_block table" in rows["moe.experts"]["note"] and other in rows["moe.experts"]["note"]
    assert rows["moe.experts"]["time_s"] == pytest.approx(cfg.num_layers * want, rel=1e-6)


def _quant_row(spec, engine, table, M, K) -> float:
    c = calibration_for(spec, engine).tables[table]["columns"]
    m = (c["M"] == M) & (c["K"] == K)
    assert m.sum() == 1
    return float(c["latency_us"][m][0]) * 1e-6


def test_trtllm_per_tensor_fp8_gemms_run_with_the_static_scale():
    # llama-3.1-8b on H200, TP 1, batch 32: the fp8 rows were timed with dynamic scaling; a static
    # scale takes the measured scaling step off every GEMM, and the quantize kernel off those fed fp8
    spec, cfg, B = get_spec("h200"), get_model("llama-3.1-8b"), 32
    rows = _rows(cfg, spec, _wl(B), B, 1024, "trtllm")
    L = cfg.num_layers
    scale, quantize = _quant_row(spec, "trtllm", "fp8_scale", 32, 4096), _quant_row(spec, "trtllm", "fp8_quantize", 32, 4096)
    assert scale > 3 * quantize > 0  # amax + scale is the larger part of dynamic quantization
    qkv = _gemm_row(spec, "trtllm", "fp8", 32, 6144, 4096)
    assert rows["attn.qkv"]["time_s"] == pytest.approx(L * (qkv - scale), rel=1e-6)
    assert "static activation scale" in rows["attn.qkv"]["note"] and "input arrives in fp8" not in rows["attn.qkv"]["note"]
    o = _gemm_row(spec, "trtllm", "fp8", 32, 4096, 4096)  # fed by attention's fp8 output
    assert rows["attn.o"]["time_s"] == pytest.approx(L * (o - scale - quantize), rel=1e-6)
    assert "input arrives in fp8" in rows["attn.o"]["note"]
    # hidden 4,096 and TP 1: the norms keep their kernels
    assert rows["norms"]["kernels"] == 2


def test_other_engines_and_bf16_keep_the_table_as_measured():
    spec, cfg, B = get_spec("h200"), get_model("llama-3.1-8b"), 32
    rows = _rows(cfg, spec, _wl(B), B, 1024, "vllm")
    assert "static activation scale" not in rows["attn.o"]["note"]
    assert rows["attn.o"]["time_s"] == pytest.approx(cfg.num_layers * _gemm_row(spec, "vllm", "fp8", 32, 4096, 4096), rel=1e-6)
    wl = Workload(batch=B, prompt_len=1024, gen_len=1)
    rows = _rows(cfg, spec, wl, B, 1024, "trtllm")
    assert "static activation scale" not in rows["attn.o"]["note"]


def test_trtllm_llama_all_reduce_carries_the_norms_and_their_quantization():
    spec, cfg, B = get_spec("h200"), get_model("llama-3.1-70b"), 8
    assert cfg.hidden_size > 4096
    tp8 = _rows(cfg, spec, _wl(B, tp=8), B, 1024, "trtllm")
    assert tp8["norms"]["kernels"] == 0 and "all-reduce" in tp8["norms"]["note"]
    assert tp8["norms"]["time_s"] == pytest.approx(tp8["norms"]["roof_s"], rel=1e-9)  # its bytes at the roof, no kernel
    assert "input arrives in fp8" in tp8["attn.qkv"]["note"] and "input arrives in fp8" in tp8["mlp.gate_up"]["note"]
    tp1 = _rows(cfg, spec, _wl(B), B, 1024, "trtllm")  # no all-reduce to fuse into
    assert tp1["norms"]["kernels"] == 2 and "input arrives in fp8" not in tp1["attn.qkv"]["note"]
    qwen = get_model("qwen3-32b")  # Qwen3's decoder layer runs its norms on their own
    assert _rows(qwen, spec, _wl(B, tp=8), B, 1024, "trtllm")["norms"]["kernels"] == 2
    vllm = _rows(cfg, spec, _wl(B, tp=8), B, 1024, "vllm")
    assert vllm["norms"]["kernels"] == 2


def test_the_lm_head_of_a_quantized_run_reads_the_bf16_table_as_the_roof_stores_it():
    # no quantization_config, --weight-dtype fp8: the roof keeps the LM head 16-bit, and so does the table read
    spec, cfg, B = get_spec("h100-sxm"), get_model("qwen3-32b"), 32
    rows = _rows(cfg, spec, _wl(B, tp=2), B, 1024, "trtllm")
    head = rows["lm_head"]
    assert "stored 16-bit" in head["note"] and head["time_s"] >= head["roof_s"]
    assert head["time_s"] == pytest.approx(models_for(spec, "trtllm").tables.gemm["bf16"].time_s(B, cfg.vocab_size / 2, cfg.hidden_size), rel=1e-6)


def test_the_static_scale_saving_never_takes_a_gemm_under_its_roof():
    spec, cfg = get_spec("h200"), get_model("llama-3-70b")
    wl = Workload(batch=64, prompt_len=1024, gen_len=1, compute_dtype="fp8", weight_dtype="fp8", tp=8)
    rows = predict_step_breakdown(cfg, spec, wl, "prefill", 64, 1024, mode="achievable", engine="trtllm")
    qkv = next(r for r in rows if r["name"] == "attn.qkv")
    assert "static activation scale" in qkv["note"]
    assert all(r["time_s"] >= r["roof_s"] * (1 - 1e-9) for r in rows if r["kind"] == "gemm")


def test_per_tensor_fp8_experts_slower_than_the_block_rows_allow_give_way_to_them():
    """vLLM's per-tensor fp8 MoE rows on H100 (ModelOpt, FlashInfer CUTLASS) take 370 us at one
    token for Mixtral's experts at TP 2, its bf16 rows 142 us: the block-fp8 rows (Triton) answer."""
    spec, cfg = get_spec("h100-sxm"), get_model("mixtral-8x7b")
    mt = models_for(spec, "vllm").tables.moe
    args = (4096, 14336, 2, 8, 2, 1)
    assert mt.time_s("fp8", 1.0, *args) > BLOCK_FP8_FLOOR_RATIO * mt.time_s("fp8_block", 1.0, *args)
    row = _rows(cfg, spec, _wl(1, tp=2), 1, 128, "vllm")["moe.experts"]
    assert "fp8_block table" in row["note"] and "its fp8 rows exceed" in row["note"]
    assert row["time_s"] == pytest.approx(cfg.num_layers * float(mt.time_s("fp8_block", 1.0, *args)), rel=1e-6)
