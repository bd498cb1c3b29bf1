"""MLA from the engines' measured MLA tables (context MLA, generation MLA, the absorbed decode
BMMs) read at their grid points by heads per GPU on the shipped calibrations, and the 16-bit modules of a quantized checkpoint (its LM head) timed as bf16 GEMMs."""

from __future__ import annotations

import pytest

from rooflinecli.achievable import calibration_for, models_for
from rooflinecli.analysis.workload import Workload
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model
from rooflinecli.predict import predict_step_breakdown


def _rows(cfg, spec, wl, phase, B, ctx, engine):
    return {r["name"]: r for r in predict_step_breakdown(cfg, spec, wl, phase, B, ctx, mode="achievable", engine=engine)}


@pytest.mark.parametrize("engine", ["trtllm", "sglang"])
def test_deepseek_attention_from_the_shipped_mla_tables(engine: str) -> None:
    spec, cfg = get_spec("h200"), get_model("deepseek-v3")
    cal = calibration_for(spec, engine)
    L = cfg.num_layers
    for tp, B, n in ((8, 8, 1023), (1, 1, 1023)):
        wl = Workload(batch=B, prompt_len=n, gen_len=1, tp=tp)
        rows = _rows(cfg, spec, wl, "decode", B, n, engine)
        g = cal.tables["generation_mla"]["columns"]
        j = next(j for j in range(len(g["B"])) if (g["kv_dtype"][j], g["B"][j], g["N"][j], g["H"][j]) == ("bf16", B, n, 128 // tp))
        assert rows["attn.core"]["time_s"] == pytest.approx(L * g["latency_us"][j] * 1e-6, rel=1e-3)
        assert "generation MLA table" in rows["attn.core"]["note"]
        assert "MLA BMM table (pre" in rows["attn.kv_b.uk"]["note"] and "MLA BMM table (post" in rows["attn.kv_b.uv"]["note"]
        assert "attn.rope" not in rows  # inside the MLA call
    wl = Workload(batch=1, prompt_len=1024, gen_len=1, tp=8)
    rows = _rows(cfg, spec, wl, "prefill", 1, 1024, engine)
    c = cal.tables["context_mla"]["columns"]
    j = next(j for j in range(len(c["B"])) if (c["kv_dtype"][j], c["B"][j], c["S"][j], c["H"][j]) == ("bf16", 1, 1024, 16))
    assert rows["attn.core"]["time_s"] == pytest.approx(L * c["latency_us"][j] * 1e-6, rel=1e-3)


def test_fp8_checkpoint_bmms_in_fp8_and_its_lm_head_in_bf16() -> None:
    spec, cfg = get_spec("h200"), get_model("deepseek-r1")
    assert cfg.quantization is not None and cfg.quantization.is_excluded("lm_head")
    wl = Workload(batch=1, prompt_len=1023, gen_len=1, tp=8, compute_dtype="fp8", weight_dtype="fp8")
    rows = _rows(cfg, spec, wl, "decode", 1, 1023, "trtllm")
    assert "fp8" in rows["attn.kv_b.uk"]["note"]
    # the unquantized LM head: the bf16 GEMM table at M = 1, N = vocab / TP, K = hidden
    g = models_for(spec, "trtllm").tables.gemm
    t16 = float(g["bf16"].time_s(1, cfg.vocab_size / 8, cfg.hidden_size))
    assert rows["lm_head"]["time_s"] == pytest.approx(t16, rel=1e-6)
    assert "stored 16-bit" in rows["lm_head"]["note"]
    assert float(g["fp8"].time_s(1, cfg.vocab_size / 8, cfg.hidden_size)) != pytest.approx(t16, rel=0.05)
