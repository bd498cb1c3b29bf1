"""The achievable model on imported calibrations (hardware_specs/measured/<gpu>.<engine>.calibration.json.gz):
looked up by (GPU, engine), GEMMs / attention / all-reduce read off the engine's measured tables,
fp8 at its own measured cost, GPUs without data transferred from the nearest measured one, and
the tables' leave-shape-out error within the targets where the data is regular."""

from __future__ import annotations

import numpy as np
import pytest

from rooflinecli.achievable import calibration_for, default_engine, imported_calibrations, models_for, transfer_donor
from rooflinecli.achievable.tables import _stats, leave_shape_out
from rooflinecli.analysis.workload import Workload
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model
from rooflinecli.predict import predict_step_breakdown, resolve_mode


@pytest.fixture(scope="module")
def h100():
    return get_spec("h100-sxm")


def _rows(cfg, spec, wl, phase, B, ctx, engine):
    return {r["name"]: r for r in predict_step_breakdown(cfg, spec, wl, phase, B, ctx, mode="achievable", engine=engine)}


def test_shipped_calibrations_cover_five_gpus_and_three_engines():
    have = {(g, e) for g, e, _ in imported_calibrations()}
    for gpu in ("h100-sxm", "h200", "b200", "a100-sxm", "l40s"):
        for engine in ("vllm", "sglang", "trtllm"):
            assert (gpu, engine) in have


def test_the_gpu_is_hw_and_the_engine_picks_the_calibration(h100):
    cal = calibration_for(h100, "vllm")
    assert cal.engine == "vllm" and "H100" in cal.gpu and cal.tables["gemm"]["provenance"]["package"] == "aiconfigurator-core"
    assert calibration_for(h100, "trtllm").path != cal.path
    assert calibration_for(h100, "torch") is None and default_engine(h100) == "torch"
    assert resolve_mode(h100, None, "vllm") == "achievable"  # a calibration exists: achievable by default
    assert resolve_mode(h100, None) == "datasheet"
    # a measured spec of the same GPU reads the same imported calibration for a serving engine
    assert calibration_for(get_spec("h200-measured"), "sglang").path == calibration_for(get_spec("h200"), "sglang").path


def test_decode_reads_the_engine_tables_at_their_grid_points(h100):
    cfg, B, ctx = get_model("llama-3-8b"), 8, 1023
    rows = _rows(cfg, h100, Workload(batch=B, prompt_len=ctx, gen_len=1), "decode", B, ctx, "vllm")
    tm = models_for(h100, "vllm").tables
    L = cfg.num_layers
    # o_proj 4096 -> 4096 at M = 8: a grid point of the bf16 table, read as measured
    c = calibration_for(h100, "vllm").tables["gemm"]["columns"]
    i = next(j for j in range(len(c["M"])) if (c["dtype"][j], c["M"][j], c["N"][j], c["K"][j]) == ("bf16", 8, 4096, 4096))
    assert rows["attn.o"]["time_s"] == pytest.approx(L * c["latency_us"][i] * 1e-6, rel=1e-6)
    assert "bf16 GEMM table" in rows["attn.o"]["note"]
    # generation attention: B sequences at the step's context, 32 / 8 heads of 128
    g = calibration_for(h100, "vllm").tables["generation_attention"]["columns"]
    j = next(j for j in range(len(g["B"])) if (g["kv_dtype"][j], g["B"][j], g["N"][j], g["H"][j], g["KVH"][j], g["D"][j]) == ("bf16", 8, 1023, 32, 8, 128))
    assert rows["attn.core"]["time_s"] == pytest.approx(L * g["latency_us"][j] * 1e-6, rel=1e-6)
    assert "includes kv_write" in rows["attn.core"]["note"] and "attn.kv_write" not in rows
    assert tm.generation.kernel.startswith("vllm_flash_attn")


def test_fp8_gemms_at_their_own_measured_cost(h100):
    cfg, B = get_model("llama-3-8b"), 8
    bf = _rows(cfg, h100, Workload(batch=B, prompt_len=1024, gen_len=1), "decode", B, 1024, "vllm")
    f8 = _rows(cfg, h100, Workload(batch=B, prompt_len=1024, gen_len=1, compute_dtype="fp8", weight_dtype="fp8"), "decode", B, 1024, "vllm")
    tm = models_for(h100, "vllm").tables
    assert "fp8 GEMM table" in f8["mlp.down"]["note"]
    assert f8["mlp.down"]["time_s"] == pytest.approx(cfg.num_layers * float(tm.gemm["fp8"].time_s(B, cfg.hidden_size, cfg.intermediate_size)), rel=1e-9)
    # not the peak ratio: the measured fp8 call (quantization included) is not twice as fast
    assert bf["mlp.down"]["time_s"] / f8["mlp.down"]["time_s"] < 1.9


def test_tensor_parallel_all_reduce_from_the_measured_tables():
    spec, cfg, B = get_spec("h200"), get_model("llama-3-70b"), 64
    wl = Workload(batch=B, prompt_len=2048, gen_len=1, tp=8)
    rows = _rows(cfg, spec, wl, "decode", B, 2048, "trtllm")
    ar = rows["comm.tp_allreduce.attn"]
    assert "measured all-reduce table (custom)" in ar["note"]
    tm = models_for(spec, "trtllm").tables
    t, src = tm.comm.time_s("all_reduce", 8, B * cfg.hidden_size * 2.0)
    assert ar["time_s"] == pytest.approx(cfg.num_layers * float(t), rel=1e-9) and src == "custom"
    # latency-bound: a tiny message still costs microseconds, far over the link roofline
    tiny, _ = tm.comm.time_s("all_reduce", 8, 4096.0)
    assert float(tiny) > 2e-6
    # beyond the largest measured message: its bandwidth, so twice the bytes take twice the time
    big = max(float(np.exp(tm.comm.curves[(src, "all_reduce", 8)][0][-1])) for src in ("nccl", "custom"))
    a, _ = tm.comm.time_s("all_reduce", 8, 2 * big)
    b, _ = tm.comm.time_s("all_reduce", 8, 4 * big)
    assert float(b) == pytest.approx(2 * float(a), rel=1e-9)


def test_a_gpu_without_data_is_transferred_and_says_so():
    mi = get_spec("mi300x")
    donor = transfer_donor(mi, "vllm")
    assert donor in {"h100-sxm", "h200", "b200", "a100-sxm", "l40s"}
    assert f"transferred to {mi.id}" in calibration_for(mi, "vllm").gpu
    m, d = models_for(mi, "vllm"), models_for(get_spec(donor), "vllm")
    assert m.tables.transferred_from == donor
    ratio = (mi.memory_bandwidth_gb_per_s / get_spec(donor).memory_bandwidth_gb_per_s)
    assert m.tables.generation.target.bytes_per_s == pytest.approx(d.tables.generation.rates.bytes_per_s * ratio)
    # carried by efficiency: a long, bandwidth-bound decode call moves nearly with the bandwidth,
    # a tiny latency-bound one hardly at all
    big = [float(x.tables.generation.time_s(256, 32767, 32, 8, 128)[0]) for x in (m, d)]
    small = [float(x.tables.generation.time_s(1, 1, 32, 8, 128)[0]) for x in (m, d)]
    assert 1.0 / ratio < big[0] / big[1] * 1.35 and big[0] / big[1] < 1.0
    assert small[0] / small[1] > 0.8
    assert transfer_donor(get_spec("h200"), "vllm") is None and transfer_donor(mi, "torch") is None
    with pytest.raises(RooflineError, match="no calibration for engine torch"):
        resolve_mode(mi, "achievable", "torch")


@pytest.mark.parametrize("gpu, engine", [("h100-sxm", "vllm"), ("h200", "trtllm")])
def test_leave_shape_out_error_within_the_targets(gpu, engine):
    """Every measured grid point predicted with its slice of the grid (one N, K, B or length
    value) left out: the targets hold on these regular tables."""
    errs = leave_shape_out(models_for(get_spec(gpu), engine).tables)
    for fam, (median, p90) in {"gemm bf16": (0.05, 0.15), "gemm fp8": (0.07, 0.20), "context attention": (0.08, 0.20),
                               "generation attention": (0.08, 0.20), "all-reduce": (0.10, 0.25)}.items():
        s = _stats(errs[fam])
        assert s["n"] > 100 and s["median_abs_error"] <= median and s["p90_abs_error"] <= p90, (fam, s)


def test_sliding_window_layers_attend_over_the_window_only(h100):
    cfg = get_model("mistral-7b")
    W = cfg.sliding_window

    def core(phase, ctx):
        rows = _rows(cfg, h100, Workload(batch=4, prompt_len=ctx, gen_len=1), phase, 4, ctx, "vllm")
        return rows["attn.core.window"]["time_s"]

    assert core("decode", 4 * W) == pytest.approx(core("decode", 2 * W), rel=1e-9)  # past the window: W keys
    assert core("decode", W // 2) < core("decode", W)
    at = models_for(h100, "vllm").tables.context
    full, _ = at.time_s(4, 2 * W, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim)
    assert core("prefill", 2 * W) < 0.9 * cfg.num_layers * float(full)  # fewer query-key pairs than a full causal call


def test_moe_experts_from_the_engine_table_at_the_model_shape():
    spec, cfg, B = get_spec("h200"), get_model("mixtral-8x7b"), 16
    rows = _rows(cfg, spec, Workload(batch=B, prompt_len=1024, gen_len=1), "decode", B, 1024, "vllm")
    ex = rows["moe.experts"]
    assert "routed experts as measured" in ex["note"] and "top-2 of 8" in ex["note"]
    assert not any(n in rows for n in ("moe.expert_gate", "moe.expert_up", "moe.expert_down"))
    m = cfg.moe
    t = models_for(spec, "vllm").tables.moe.time_s("bf16", B, cfg.hidden_size, m.expert_intermediate_size, m.top_k, m.num_routed_experts, 1, 1)
    assert ex["time_s"] == pytest.approx(cfg.num_layers * float(t), rel=1e-9)
    # a shape the table lacks (split over 3 GPUs) falls back to the fitted GEMM form per op
    assert models_for(spec, "vllm").tables.moe.time_s("bf16", B, cfg.hidden_size, m.expert_intermediate_size, m.top_k, m.num_routed_experts, 3, 1) is None


def test_imported_calibrations_expose_their_collectives(h100):
    assert models_for(h100, "vllm").collectives is not None
    assert models_for(get_spec("h200-measured"), "torch").collectives is None  # one GPU measured: none


def test_deepseek_fp8_experts_on_b200_are_tensorrt_llms_deepgemm_rows():
    """TensorRT-LLM's block-fp8 (DeepSeek-R1 FP8) experts on B200 run the DEEPGEMM backend (its
    DeepSeek-R1 deployment guide: the one MoE backend for FP8 on B200 at EP <= 8; the default
    CUTLASS does not run it), and those are the imported rows. They cost a part that grows with
    the experts held per GPU (256 at MoE TP 8, 32 at EP 8) and, once every expert is touched
    (32 tokens x top-8 = 256), stop growing with the tokens."""
    moe = models_for(get_spec("b200"), "trtllm").tables.moe
    d, I, k, E = 7168, 2048, 8, 256
    assert moe.kernel("fp8_block", d, I, k, E, 8, 1) == "deepgemm"
    tp8 = {T: float(moe.time_s("fp8_block", T, d, I, k, E, 8, 1)) for T in (1, 4, 32, 128)}
    ep8 = {T: float(moe.time_s("fp8_block", T, d, I, k, E, 1, 8)) for T in (1, 4)}
    assert tp8[1] > 1.8 * ep8[1] and tp8[4] > 1.3 * ep8[4]
    assert tp8[1] < tp8[4] < tp8[32]
    assert tp8[128] < 1.5 * tp8[32]


def test_an_unmeasured_head_shape_carries_its_launch_cost_not_its_head_count():
    """A100 vLLM measured GQA decode attention only: an MHA shape (H32/KVH32, Llama 2 7B) reads the
    nearest measured one (H8/KVH8); the latency-bound call at a short context costs about what
    that one does (the table holds 11-13 us for every head count there), a bandwidth-bound call
    about four times as much (four times the KV bytes)."""
    g = models_for(get_spec("a100-sxm"), "vllm").tables.generation
    short8, key = g.time_s(1, 127, 8.0, 8.0, 128.0)
    short32, key32 = g.time_s(1, 127, 32.0, 32.0, 128.0)
    assert key32[:3] == key[:3] == (8.0, 8.0, 128.0)
    assert short8 == pytest.approx(short32, rel=0.1)
    long8, _ = g.time_s(256, 8191, 8.0, 8.0, 128.0)
    long32, _ = g.time_s(256, 8191, 32.0, 32.0, 128.0)
    assert 3.5 < long32 / long8 <= 4.0


def test_a_gemm_below_the_grid_keeps_its_edge_launch_cost():
    """The GEMM grids start at N = K = 32: an 8-expert router (N = 8) costs about what the edge's
    call costs (mostly launch), not a quarter of it; inside the grid and above it nothing changes."""
    g = models_for(get_spec("a100-sxm"), "vllm").tables.gemm["bf16"]
    assert float(np.exp(g.grid.axes[1][0])) == 32.0
    edge, router = float(g.time_s(1, 32, 4096)), float(g.time_s(1, 8, 4096))
    assert 0.8 * edge <= router <= edge
    big, bigger = float(g.time_s(8192, 8192, 8192)), float(g.time_s(16384, 8192, 8192))
    assert bigger == pytest.approx(2 * big, rel=0.01)  # compute-bound past the grid's M: the ratio to the roof holds


def test_weight_only_quantized_gemms_are_carried_to_their_weight_bytes():
    """vLLM's A100 tables measured no int8 / int4 weights under 16-bit compute: the bf16 table's
    time is carried to the fewer weight bytes, so a decode step (weight traffic) speeds up and a
    compute-bound prefill step does not; never under the roof."""
    spec, cfg = get_spec("a100-sxm"), get_model("llama-2-7b")

    def step(weight_dtype, phase, B, ctx):
        wl = Workload(batch=B, prompt_len=ctx, gen_len=1, weight_dtype=weight_dtype)
        rows = [r for r in predict_step_breakdown(cfg, spec, wl, phase, B, ctx, mode="achievable", engine="vllm") if r["kind"] == "gemm"]
        assert all(r["time_s"] >= r["roof_s"] for r in rows)
        return sum(r["time_s"] for r in rows), rows

    bf16, _ = step("bf16", "decode", 1, 128)
    int8, rows = step("int8", "decode", 1, 128)
    int4, _ = step("int4", "decode", 1, 128)
    assert int4 < int8 < 0.75 * bf16
    assert "carried to" in next(r for r in rows if r["name"] == "attn.qkv")["note"]
    assert "carried to" not in next(r for r in rows if r["name"] == "lm_head")["note"]  # the LM head stays 16-bit
    pre16, _ = step("bf16", "prefill", 8, 2048)
    pre4, _ = step("int4", "prefill", 8, 2048)
    assert pre4 == pytest.approx(pre16, rel=0.05)


def test_weight_only_quantized_gemms_read_the_engines_measured_weight_only_table():
    """TensorRT-LLM's A100 tables measured its weight-only kernels (int8 and int4 weights, 16-bit
    activations): those rows answer, at their measured cost. At one token the int4 kernel takes
    24.6 us for Llama 2 7B's 4096 -> 12288 QKV (the bf16 GEMM 66.7 us: 2.7x, not the bytes' 3.6x),
    and at 64 tokens it is slower than int8, which no carrying by bytes would give."""
    spec, cfg = get_spec("a100-sxm"), get_model("llama-2-7b")

    def gemms(weight_dtype, B):
        wl = Workload(batch=B, prompt_len=128, gen_len=1, weight_dtype=weight_dtype)
        rows = [r for r in predict_step_breakdown(cfg, spec, wl, "decode", B, 128, mode="achievable", engine="trtllm") if r["kind"] == "gemm"]
        assert all(r["time_s"] >= r["roof_s"] for r in rows)
        return {r["name"]: r for r in rows}

    int4 = gemms("int4", 1)
    assert "int4_wo GEMM table" in int4["attn.qkv"]["note"] and "carried to" not in int4["attn.qkv"]["note"]
    assert "bf16 GEMM table" in int4["lm_head"]["note"]  # the LM head stays 16-bit
    assert "int8_wo GEMM table" in gemms("int8", 1)["attn.qkv"]["note"]
    assert int4["attn.qkv"]["time_s"] / cfg.num_layers == pytest.approx(24.6e-6, rel=0.05)
    total = {wd: sum(r["time_s"] for r in gemms(wd, 64).values()) for wd in ("bf16", "int8", "int4")}
    assert total["int8"] < total["int4"] < total["bf16"]


def test_weight_only_quantized_experts_are_carried_to_their_weight_bytes(h100):
    """Mixtral's experts at int4 under H100 vLLM's bf16 MoE rows: the decode step's experts (all
    weight traffic) take about a quarter of the bf16 time, and the note says why."""
    cfg = get_model("mixtral-8x7b")

    def experts(weight_dtype):
        wl = Workload(batch=4, prompt_len=128, gen_len=1, weight_dtype=weight_dtype, tp=2)
        return next(r for r in predict_step_breakdown(cfg, h100, wl, "decode", 4, 128, mode="achievable", engine="vllm") if r["name"] == "moe.experts")

    bf16, int4 = experts("bf16"), experts("int4")
    assert "carried to" not in bf16["note"] and "carried to 0.516-byte expert weights" in int4["note"]
    assert 0.2 < int4["time_s"] / bf16["time_s"] < 0.35


def test_an_fp8_kv_cache_read_from_bf16_rows_halves_the_work_not_the_launch():
    g = models_for(get_spec("a100-sxm"), "vllm").tables.generation
    assert {k[3] for k in g.grids} == {"bf16"}  # A100's vLLM rows hold a bf16 cache only
    (short16, _), (short8, key) = g.time_s(1, 127, 32.0, 8.0, 128.0, "bf16"), g.time_s(1, 127, 32.0, 8.0, 128.0, "fp8")
    assert key[3] == "bf16" and short8 == pytest.approx(short16, rel=0.05)
    (long16, _), (long8, _) = g.time_s(256, 8191, 32.0, 8.0, 128.0, "bf16"), g.time_s(256, 8191, 32.0, 8.0, 128.0, "fp8")
    assert 0.5 <= long8 / long16 < 0.6


def test_a_head_width_the_tables_lack_is_not_read_under_its_roof(h100):
    """GPT-J's heads are 256 wide; H100 vLLM measured D 256 at H1/KVH1 only: read at the batch
    that gives H1 as many heads, its decode attention stays at or above the roof."""
    cfg = get_model("gpt-j-6b")
    wl = Workload(batch=32, prompt_len=2048, gen_len=1)
    row = next(r for r in predict_step_breakdown(cfg, h100, wl, "decode", 32, 2048, mode="achievable", engine="vllm") if r["name"] == "attn.core")
    assert "nearest measured heads H1/KVH1 D256" in row["note"]
    assert 1.0 <= row["time_s"] / row["roof_s"] < 2.0


def test_cache_resident_table_rows_are_held_at_the_hbm_roof_in_a_whole_model_step():
    """L40S's tables beat the HBM roof where their operands stayed in its 96 MB L2 (Llama 2 7B's
    qkv, 100 MB of weights, at 1.0 TB/s where HBM streams 0.83); a decode step streams every
    layer's weights from HBM, so no GEMM or attention row of it is under the roof."""
    spec, cfg = get_spec("l40s"), get_model("llama-2-7b")
    g = models_for(spec, "trtllm").tables.gemm["bf16"]
    assert float(g.time_s(1, 12288, 4096)) < 4096 * 12288 * 2 / (0.9 * spec.memory_bandwidth_bytes_per_s)  # the table, cache-resident
    wl = Workload(batch=1, prompt_len=2048, gen_len=1)
    rows = predict_step_breakdown(cfg, spec, wl, "decode", 1, 2048, mode="achievable", engine="trtllm")
    assert all(r["time_s"] >= r["roof_s"] * (1 - 1e-9) for r in rows if r["kind"] in ("gemm", "attention"))


def test_mla_prefill_without_mla_tables_reads_the_context_table_as_multi_head_attention():
    """A100 vLLM has no MLA tables: DeepSeek-V2-Lite's prefill attention is the context table's
    multi-head call (16 heads of 192: nope + rope), as the engines run it, not one latent head of
    576, which read it at 9x its roof; decode keeps the absorbed latent form."""
    spec, cfg = get_spec("a100-sxm"), get_model("deepseek-v2-lite")
    wl = Workload(batch=1, prompt_len=2048, gen_len=1)
    pre = next(r for r in predict_step_breakdown(cfg, spec, wl, "prefill", 1, 2048, mode="achievable", engine="vllm") if r["name"] == "attn.core")
    dec = next(r for r in predict_step_breakdown(cfg, spec, wl, "decode", 1, 2048, mode="achievable", engine="vllm") if r["name"] == "attn.core")
    assert "MLA as multi-head attention" in pre["note"] and "MLA as one latent KV head" in dec["note"]
    assert 1.0 <= pre["time_s"] / pre["roof_s"] < 5.0
