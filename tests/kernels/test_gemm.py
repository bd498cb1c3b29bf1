"""kernels/gemm.py against its fp64 reference: odd shapes through both kernels (persistent TMA for
M > 256, swap-AB skinny for M <= 256), every dtype, the serial fix-up split-K, grouped ordering and
both epilogues, strided operands, launcher checks, cost by hand, and every GPU config compiled for
sm_90 (wgmma, TMA, no spills, shared memory)."""

from __future__ import annotations

import pytest
import torch

from kernels import gemm as G
from kernels.gemm import OP, baseline, gemm, quantize_fp8, reference
from kernels.registry import Case, load_op
from kernels.testing import compare, poisoned, randn
from rooflinecli import formulas
from rooflinecli.hardware import get_spec

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(7)


def _check(out, inputs, dtype):
    c = compare(out, reference(**inputs), OP.tolerance[dtype])
    assert c.ok, c.message


def _pair(M, N, K, dtype, gen):
    if dtype == "fp8":
        a, a_scale = quantize_fp8(randn((M, K), torch.bfloat16, DEVICE, gen))
        w, w_scale = quantize_fp8(randn((N, K), torch.bfloat16, DEVICE, gen))
        return {"a": a, "w": w, "a_scale": a_scale, "w_scale": w_scale}
    dt = torch.bfloat16 if dtype == "bf16" else torch.float16
    return {"a": randn((M, K), dt, DEVICE, gen), "w": randn((N, K), dt, DEVICE, gen)}


def _out_dtype(dtype):
    return torch.float16 if dtype == "fp16" else torch.bfloat16


def test_registry_finds_op():
    assert load_op("gemm") is OP
    assert OP.model_kind == "gemm"


def test_test_cases_reach_both_kernels_and_every_dtype():
    ms = {c.params["M"] for c in OP.cases["test"]}
    assert any(m > G.SKINNY_MAX_M for m in ms) and any(m <= G.NO_WORKSPACE_MAX_M for m in ms)
    assert {c.dtype for c in OP.cases["test"] if c.params["M"] > G.SKINNY_MAX_M} == {"bf16", "fp16", "fp8"}
    assert "fp8" in {c.dtype for c in OP.cases["test"] if c.params["M"] <= G.SKINNY_MAX_M}


# 500 -> 496 of K in 16 k-tiles of 32: split 3 leaves an uneven last split, 5 gives 3-4 tiles each
# and 7 leaves the last split a single tile; M = 40 takes two 32-token tiles (several tiles per split)
@pytest.mark.parametrize("split_k", [2, 3, 5, 7])
@pytest.mark.parametrize("M", [1, 5, 40])
def test_skinny_split_k_serial_fixup(split_k, M, gen):
    inputs = _pair(M, 123, 496, "bf16", gen)
    out = poisoned((M, 123), torch.bfloat16, DEVICE)
    gemm(**inputs, out=out, config=dict(BLOCK_K=32, SPLIT_K=split_k))
    _check(out, inputs, "bf16")
    # the last split to arrive leaves every tile's counter at zero for the next launch
    _, counts = G._WORKSPACE[str(out.device)]
    assert int(counts.abs().sum()) == 0
    # a second launch on the same workspace gives the same result bit for bit
    again = gemm(**inputs, config=dict(BLOCK_K=32, SPLIT_K=split_k))
    assert torch.equal(again, out)


# a 128-row band of W per program (``BLOCK_N`` 128, the 128-token configs): N = 300 leaves the
# last band partial (44 rows), M = 100 one partial 128-token tile; unsplit, and split 2 and 3
@pytest.mark.parametrize("split_k", [1, 2, 3])
def test_skinny_band_of_128_rows(split_k, gen):
    inputs = _pair(100, 300, 256, "bf16", gen)
    out = poisoned((100, 300), torch.bfloat16, DEVICE)
    gemm(**inputs, out=out, config=dict(BLOCK_K=32, SPLIT_K=split_k, BLOCK_N=128))
    _check(out, inputs, "bf16")
    if split_k > 1:
        _, counts = G._WORKSPACE[str(out.device)]
        assert int(counts.abs().sum()) == 0
        again = gemm(**inputs, config=dict(BLOCK_K=32, SPLIT_K=split_k, BLOCK_N=64))  # the other band: same C
        _check(again, inputs, "bf16")


def test_skinny_band_outside_the_sized_workspace_is_refused():
    a = torch.randn(4, 64).to(torch.bfloat16)
    w = torch.randn(40, 64).to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"BLOCK_N \(rows of W per program\) must be one of \(64, 128\), got 256"):
        gemm(a, w, config=dict(BLOCK_K=16, SPLIT_K=1, BLOCK_N=256))


def test_skinny_fp8_split_k(gen):
    inputs = _pair(9, 80, 256, "fp8", gen)
    out = gemm(**inputs, config=dict(BLOCK_K=32, SPLIT_K=3))
    assert out.dtype == torch.bfloat16
    _check(out, inputs, "fp8")


@pytest.mark.parametrize(("subtile", "flatten"), [(True, True), (False, False)])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_persistent_grouped_ordering_and_epilogues(dtype, subtile, flatten, gen):
    # 290 x 200: 10 row tiles of 32 in groups of 4 (a partial last group) x 7 column tiles, the
    # last row and column tiles partial; the epilogue in two halves (loops flattened) or in one (nested)
    inputs = _pair(290, 200, 160, dtype, gen)
    out = poisoned((290, 200), _out_dtype(dtype), DEVICE)
    cfg = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4, EPILOGUE_SUBTILE=subtile, FLATTEN=flatten)
    gemm(**inputs, out=out, config=cfg)
    _check(out, inputs, dtype)


def test_persistent_programs_loop_over_tiles(gen, monkeypatch):
    # 3 programs for 9 x 4 tiles: each walks 12 tiles, the epilogue of one under the next's loads
    monkeypatch.setattr(G, "num_sms_of", lambda device: 3)
    monkeypatch.setattr(G, "_PLANS", {})  # a fresh plan (NUM_SMS is part of it), dropped afterwards
    inputs = _pair(263, 123, 96, "fp16", gen)
    out = poisoned((263, 123), torch.float16, DEVICE)
    gemm(**inputs, out=out)
    _check(out, inputs, "fp16")


def test_strided_operands_and_out(gen):
    # A and W as row slices of wider buffers (row strides 320 and 336, 16-byte aligned), out as a
    # column slice of a wider buffer: through the TMA store (rows 16-byte aligned) on the
    # persistent path and the pointer store on the skinny one; nothing is written outside
    for M in (300, 7):
        a_wide = randn((M, 320), torch.float16, DEVICE, gen)
        w_wide = randn((45, 336), torch.float16, DEVICE, gen)
        a, w = a_wide[:, 16:304], w_wide[:, :288]
        wide = poisoned((M, 72), torch.float16, DEVICE)
        out = wide[:, 8:53]
        gemm(a, w, out=out)
        _check(out, {"a": a, "w": w}, "fp16")
        assert torch.isnan(wide[:, :8]).all() and torch.isnan(wide[:, 53:]).all()


def test_single_row_of_any_stride(gen):
    # M = 1 from expand (row stride 0) and N = 1 from a row slice: one row's stride is never used
    row = randn((1, 64), torch.bfloat16, DEVICE, gen)
    a = row.expand(1, 64)
    w = randn((3, 64), torch.bfloat16, DEVICE, gen)[1:2]
    a0 = torch.as_strided(row, (1, 64), (0, 1))
    for lhs in (a, a0):
        out = gemm(lhs, w)
        _check(out, {"a": lhs, "w": w}, "bf16")


def test_unaligned_out_takes_pointer_epilogue(gen):
    # N = 45 rows of 90 bytes: the TMA engine cannot store them, the masked pointer epilogue does
    inputs = _pair(270, 45, 64, "bf16", gen)
    assert G._tma_problem(torch.empty((270, 45), dtype=torch.bfloat16)) is not None
    out = poisoned((270, 45), torch.bfloat16, DEVICE)
    gemm(**inputs, out=out)
    _check(out, inputs, "bf16")


def test_fp8_scales_applied(gen):
    case = next(c for c in OP.cases["test"] if c.dtype == "fp8")
    if not OP.supported(case, None):
        pytest.skip("fp8 needs compute capability >= 8.9")
    for M in (20, 300):  # skinny and persistent
        a, a_scale = quantize_fp8(randn((M, 96), torch.bfloat16, DEVICE, gen, scale=30.0))
        w, w_scale = quantize_fp8(randn((40, 96), torch.bfloat16, DEVICE, gen, scale=0.01))
        assert abs(float(a_scale) - 1.0) > 0.01 and abs(float(w_scale) - 1.0) > 0.5  # scales far from 1
        out = gemm(a, w, a_scale, w_scale)
        assert out.dtype == torch.bfloat16
        _check(out, {"a": a, "w": w, "a_scale": a_scale, "w_scale": w_scale}, "fp8")


@pytest.mark.parametrize("case", [c for c in OP.cases["test"] if c.dtype != "fp8"], ids=lambda c: c.id)
def test_baseline_matches_reference(case, gen):
    inputs = OP.make_inputs(case, DEVICE, gen)
    _check(baseline(**inputs), inputs, case.dtype)


def test_launcher_rejects_bad_arguments(gen):
    a = randn((4, 32), torch.bfloat16, DEVICE, gen)
    w = randn((16, 32), torch.bfloat16, DEVICE, gen)
    with pytest.raises(ValueError, match="inner dimensions"):
        gemm(a, w[:, :31])
    with pytest.raises(ValueError, match="K = 24 must be a multiple of 16"):
        gemm(a[:, :24], w[:, :24])
    with pytest.raises(ValueError, match=r"\[M, K\]"):
        gemm(a[0], w)
    with pytest.raises(ValueError, match="share a dtype"):
        gemm(a, w.half())
    with pytest.raises(ValueError, match="share a dtype"):
        gemm(a.float(), w.float())
    with pytest.raises(ValueError, match="fp8 inputs only"):
        gemm(a, w, torch.ones(1), torch.ones(1))
    a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="a_scale"):
        gemm(a8, w8)
    with pytest.raises(ValueError, match="w_scale"):
        gemm(a8, w8, torch.ones(1, device=DEVICE), torch.ones(2, device=DEVICE))
    with pytest.raises(ValueError, match="out must be"):
        gemm(a, w, out=torch.empty((4, 16), dtype=torch.float32, device=DEVICE))
    with pytest.raises(ValueError, match="a must be contiguous along its last dimension"):
        gemm(randn((32, 4), torch.bfloat16, DEVICE, gen).T, w)
    with pytest.raises(ValueError, match="w must be 16-byte aligned"):
        gemm(a, randn((16, 40), torch.bfloat16, DEVICE, gen)[:, 4:36])
    with pytest.raises(ValueError, match="SPLIT_K"):
        gemm(a, w, config=dict(BLOCK_K=16, SPLIT_K=0))


def test_cost_by_hand():
    bf16 = Case("M63-N123-K500", {"M": 63, "N": 123, "K": 500}, "bf16")
    assert OP.cost(bf16) == (2 * 63 * 123 * 500, (63 * 500 + 123 * 500) * 2 + 63 * 123 * 2)
    fp8 = Case("M63-N123-K500", {"M": 63, "N": 123, "K": 500}, "fp8")
    assert OP.cost(fp8) == (2 * 63 * 123 * 500, (63 * 500 + 123 * 500) * 1 + 63 * 123 * 2)  # bf16 out


def test_skinny_tiles_and_workspace():
    assert [G.skinny_block_m(m) for m in (1, 16, 17, 32, 33, 64, 65, 128, 129, 256)] == [
        16, 16, 32, 32, 64, 64, 128, 128, 256, 256]
    # M <= 16: one launch with no workspace (every config SPLIT_K = 1)
    assert {c.kwargs["SPLIT_K"] for c in G.skinny_configs(16)} == {1}
    assert max(c.kwargs["SPLIT_K"] for bm in G.SKINNY_BLOCK_MS for c in G.skinny_configs(bm)) == G.MAX_SPLIT_K
    # N = 8192: 128 programs of 64 W rows, one per SM of 132 (one wave); M = 64, split 2: 4 MiB
    assert triton_cdiv(8192, G.SKINNY_BLOCK_N) == 128 == G.skinny_tiles(64, 8192)
    assert G.skinny_workspace_floats(64, 8192, 2) * 4 == 4 * 2**20
    # 128 tokens: a 128-row band gives 64 tiles, split 2 makes one wave of 128 programs
    band128 = [c for c in G.skinny_configs(128) if c.kwargs["BLOCK_N"] == 128]
    assert band128 and all(c.kwargs["SPLIT_K"] * G.skinny_tiles(128, 8192, 128) == 128 for c in band128)
    assert {c.kwargs["BLOCK_N"] for bm in G.SKINNY_BLOCK_MS for c in G.skinny_configs(bm)} == set(G.SKINNY_BANDS)
    # N = 8200 is not a whole number of either band: the workspace covers the larger padding
    assert G.skinny_workspace_floats(128, 8200, 2) == triton_cdiv(8200, 128) * 128 * 128 * 2
    # few configs per token tile: the decode sweep autotunes within the GPU run's bench budget
    assert sum(len(G.skinny_configs(bm)) for bm in G.SKINNY_BLOCK_MS) <= 20


def triton_cdiv(a, b):
    return -(-a // b)


def test_skinny_sweep_crosses_the_ridge_point():
    # the decode-like sweep starts deep in the memory-bound region and ends past the H200 bf16 ridge
    ridge = get_spec("h200").ridge_point("bf16")
    sweep = sorted((c for c in OP.cases["full"] if c.params["N"] == c.params["K"] == 8192 and c.params["M"] <= 256),
                   key=lambda c: c.params["M"])
    assert [c.params["M"] for c in sweep] == list(G.SKINNY_MS)
    assert {1, 8, 16, 64, 128, 256} <= set(G.SKINNY_MS)
    ai = [float(formulas.arithmetic_intensity(*OP.cost(c))) for c in sweep]
    assert ai == sorted(ai)
    assert ai[0] < 1.5 and ai[-1] > ridge
    weight_bytes = 8192 * 8192 * 2
    assert weight_bytes > 2 * 50e6  # weights stream from HBM, not L2


def test_full_suite_has_square_prefill_shapes():
    square = {(c.params["M"], c.dtype) for c in OP.cases["full"] if c.params["M"] == c.params["N"] == c.params["K"]}
    assert {(4096, "bf16"), (8192, "bf16"), (8192, "fp8")} <= square


# Every GPU config lowered for sm_90 with Triton's bundled ptxas, read back with cuobjdump. Skinny:
# every (BLOCK_K, stages) per token tile at its largest SPLIT_K (the fix-up path holds the most
# registers), plus every bm16 config; persistent: every config, TMA and pointer epilogues; fp8 too.
_COMPILE = """
import json, torch
from triton.tools.tensor_descriptor import TensorDescriptor
from kernels import gemm as G
from kernels.testing import compile_for_gpu
from kernels.cubin_report import cubin_report
def desc(t, block): return TensorDescriptor(t, list(t.shape), list(t.stride()), block)
bf, f8 = torch.bfloat16, torch.float8_e4m3fn
rows = []
def add(name, kernel, args, cfg):
    k = compile_for_gpu(kernel, {**args, **cfg.kwargs}, cfg.num_warps, cfg.num_stages)
    rows.append({"name": f"{name} {cfg.kwargs} w{cfg.num_warps} s{cfg.num_stages}", **cubin_report(k)})
for dt, configs in ((bf, G.PERSISTENT_16BIT), (f8, G.PERSISTENT_FP8)):
    for i, cfg in enumerate(configs):
        kw = cfg.kwargs
        a, w, out = torch.empty((8192, 8192), dtype=dt), torch.empty((8192, 8192), dtype=dt), torch.empty((8192, 8192), dtype=bf)
        for c_tma in ((True, False) if i == 0 else (True,)):
            bn_c = kw["BLOCK_N"] // 2 if kw["EPILOGUE_SUBTILE"] else kw["BLOCK_N"]
            args = dict(a_desc=desc(a, [kw["BLOCK_M"], kw["BLOCK_K"]]), w_desc=desc(w, [kw["BLOCK_N"], kw["BLOCK_K"]]),
                        c_desc=desc(out, [kw["BLOCK_M"], bn_c]) if c_tma else out, c_ptr=out,
                        a_scale_ptr=torch.ones(1), w_scale_ptr=torch.ones(1), M=8192, N=8192, K=8192,
                        stride_cm=8192, stride_cn=1, NUM_SMS=132, C_TMA=c_tma, HAS_SCALES=dt is f8, UPCAST=False)
            add(f"persistent {dt} c_tma={c_tma}", G._persistent_kernel, args, cfg)
for bm in G.SKINNY_BLOCK_MS:
    configs = G.skinny_configs(bm)
    top = max(c.kwargs["SPLIT_K"] for c in configs)
    for dt in ((bf, f8) if bm in (16, 64) else (bf,)):
        for cfg in configs:
            # 128 tokens: every config (two bands, 4 and 8 warps); the others at their top split
            if (bm != 128 and cfg.kwargs["SPLIT_K"] != top) or (dt is f8 and cfg is not configs[-1]):
                continue
            bk, band = cfg.kwargs["BLOCK_K"], cfg.kwargs["BLOCK_N"]
            a, w, out = torch.empty((bm, 8192), dtype=dt), torch.empty((8192, 8192), dtype=dt), torch.empty((bm, 8192), dtype=bf)
            args = dict(a_desc=desc(a, [bm, bk]), w_desc=desc(w, [band, bk]), c_ptr=out,
                        ws_ptr=torch.empty(1), count_ptr=torch.empty(1, dtype=torch.int32),
                        a_scale_ptr=torch.ones(1), w_scale_ptr=torch.ones(1), M=bm, N=8192, K=8192,
                        stride_cm=8192, stride_cn=1, BLOCK_M=bm, HAS_SCALES=dt is f8, UPCAST=False)
            add(f"skinny {dt} bm{bm}", G._skinny_kernel, args, cfg)
print(json.dumps(rows))
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the tests above compile and autotune for real")
def test_gpu_configs_compile_to_wgmma_and_tma_for_h200():
    import json

    from kernels.testing import run_without_interpreter

    rows = json.loads(run_without_interpreter(_COMPILE, timeout_s=600).splitlines()[-1])
    # persistent: every config + a pointer epilogue each for bf16 and fp8; skinny: 3 (bm16) + 2 x 3
    # (bm32, bm64, bm256 at split 2) + 4 (bm128, every config) + 2 fp8
    assert len(rows) == len(G.PERSISTENT_16BIT) + len(G.PERSISTENT_FP8) + 2 + 15
    limit = get_spec("h200").smem_per_sm_bytes - 1024
    for row in rows:
        fp8 = "float8" in row["name"]
        # warpgroup MMA (HGMMA, fp8: QGMMA), TMA tensor loads, no local-memory spills, fits smem
        assert row["QGMMA" if fp8 else "HGMMA"] > 0, row
        assert row["UTMALDG"] > 0 and row["stack_bytes"] == 0 and row["LDL"] == row["STL"] == 0, row
        assert row["shared_bytes"] <= limit, row
        # the persistent kernel's TMA epilogue stores through the TMA engine (two half tiles)
        if "c_tma=True" in row["name"]:
            assert row["UTMASTG"] > 0, row


@pytest.mark.parametrize("case", [c for c in OP.cases["test"] if c.params["M"] > G.SKINNY_MAX_M], ids=lambda c: c.id)
def test_named_baselines_match_reference(case, gen):
    # each dtype has at least one candidate torch path, and every candidate computes the same C
    if not OP.supported(case, None):
        pytest.skip(f"{case.dtype} needs compute capability >= 8.9")
    inputs = OP.make_inputs(case, DEVICE, gen)
    runs = {name: f(**inputs) for name, f in OP.baselines.items()}
    runs = {name: r for name, r in runs.items() if r is not None}
    assert runs, case.id
    for name, run in runs.items():
        c = compare(run(), reference(**inputs), OP.tolerance[case.dtype])
        assert c.ok, f"{name}: {c.message}"


@pytest.mark.parametrize("M", [3, 270])
def test_repeated_calls_reuse_the_plan_with_new_tensors(M, gen):
    # the second call of a shape reuses the cached plan (descriptors re-pointed at the new tensors),
    # including into a caller's out buffer
    first, second = _pair(M, 40, 64, "fp16", gen), _pair(M, 40, 64, "fp16", gen)
    gemm(**first)
    n_plans = len(G._PLANS)
    out = poisoned((M, 40), torch.float16, DEVICE)
    gemm(**second, out=out)
    _check(out, second, "fp16")
    _check(gemm(**second), second, "fp16")
    _check(gemm(**first), first, "fp16")
    assert len(G._PLANS) == n_plans + 1  # one more plan: the given out (its layout is part of the key)


@pytest.mark.parametrize("M", [20, 270])
def test_autotuned_path_then_direct_launch(M, gen, monkeypatch):
    # The GPU path: the first call of a shape goes through the autotuner (one config here, so the
    # interpreter needs no benchmark), later calls launch its choice straight through the JIT kernel
    # with the descriptors' tile shapes set by the config's pre-hook. fp16: no UPCAST needed.
    import triton

    # the skinny config takes a 128-row band of W: the grid and the W descriptor follow the config
    skinny = triton.autotune(configs=[G._skinny_cfg(32, 2, 4, 2, band=128)], key=["M", "N", "K", "HAS_SCALES"])(G._skinny_kernel)
    persistent = triton.autotune(configs=[G._persistent_cfg(32, 32, 32, 4, 2)], key=G._PERSISTENT_KEY)(G._persistent_kernel)
    monkeypatch.setattr(G, "_interpreting", lambda: False)
    monkeypatch.setattr(G, "_skinny", {bm: skinny for bm in G.SKINNY_BLOCK_MS})
    monkeypatch.setattr(G, "_persistent_16bit", persistent)
    monkeypatch.setattr(G, "_PLANS", {})
    first, second = _pair(M, 72, 160, "fp16", gen), _pair(M, 72, 160, "fp16", gen)
    _check(gemm(**first), first, "fp16")
    (plan,) = G._PLANS.values()
    assert plan.kernel is not None and plan.meta["BLOCK_K"] == 32  # the autotuner's choice, kept
    assert plan.w_desc.block_shape[1] == 32
    _check(gemm(**second), second, "fp16")


def test_plans_stay_bounded_over_many_shapes(monkeypatch, gen):
    """Each shape's plan holds its last call's tensors: past ``MAX_PLANS`` the oldest is dropped."""
    from kernels import launch

    monkeypatch.setattr(G, "_PLANS", {})
    monkeypatch.setattr(launch, "MAX_PLANS", 3)
    for m in range(300, 306):  # the persistent kernel's M (> SKINNY_MAX_M): a plan per shape
        inputs = _pair(m, 32, 64, "fp16", gen)
        _check(gemm(**inputs), inputs, "fp16")
    assert len(G._PLANS) == 3 and {k[0][0] for k in G._PLANS} == {303, 304, 305}
