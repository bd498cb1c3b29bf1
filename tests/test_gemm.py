"""kernels/gemm.py against its fp64 reference: odd shapes, every dtype (fp8 where it runs), split-K
and grouped tile ordering, strided A, launcher checks, cost by hand, config and case sanity."""

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


def test_registry_finds_op():
    assert load_op("gemm") is OP
    assert OP.model_kind == "gemm"


@pytest.mark.parametrize("case", OP.cases["test"], ids=lambda c: c.id)
def test_gemm_matches_reference(case, gen):
    if not OP.supported(case, None):
        pytest.skip(f"{case.dtype} needs compute capability >= 8.9")
    inputs = OP.make_inputs(case, DEVICE, gen)
    out_dtype = torch.bfloat16 if case.dtype == "fp8" else inputs["a"].dtype
    out = poisoned((case.params["M"], case.params["N"]), out_dtype, DEVICE)
    assert gemm(**inputs, out=out) is out
    _check(out, inputs, case.dtype)


# split 3 over 16 k-blocks of 32 leaves an uneven last split; split 5 gives each split 3-4 blocks
@pytest.mark.parametrize("split_k", [2, 3, 5])
@pytest.mark.parametrize("M", [1, 5, 63])
def test_split_k(split_k, M, gen):
    inputs = {"a": randn((M, 500), torch.bfloat16, DEVICE, gen), "w": randn((123, 500), torch.bfloat16, DEVICE, gen)}
    out = poisoned((M, 123), torch.bfloat16, DEVICE)
    cfg = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, GROUP_M=2, SPLIT_K=split_k)
    gemm(**inputs, out=out, config=cfg)
    _check(out, inputs, "bf16")


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_even_k_and_grouped_ordering(dtype, gen):
    # K = 256 divides BLOCK_K * SPLIT_K (no K masks); 6 row tiles in groups of 4 (one partial group)
    dt = torch.bfloat16 if dtype == "bf16" else torch.float16
    inputs = {"a": randn((90, 256), dt, DEVICE, gen), "w": randn((70, 256), dt, DEVICE, gen)}
    out = poisoned((90, 70), dt, DEVICE)
    gemm(**inputs, out=out, config=dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=64, GROUP_M=4, SPLIT_K=2))
    _check(out, inputs, dtype)


def test_strided_a_and_out(gen):
    # A as the transpose of a [K, M] buffer (strides (1, M)); out as a column slice of a wider buffer
    a_t = randn((300, 37), torch.float16, DEVICE, gen)
    w = randn((45, 300), torch.float16, DEVICE, gen)
    wide = poisoned((37, 60), torch.float16, DEVICE)
    out = wide[:, 5:50]
    gemm(a_t.T, w, out=out)
    _check(out, {"a": a_t.T, "w": w}, "fp16")
    assert torch.isnan(wide[:, :5]).all() and torch.isnan(wide[:, 50:]).all()  # nothing written outside


def test_fp8_scales_applied(gen):
    case = next(c for c in OP.cases["test"] if c.dtype == "fp8")
    if not OP.supported(case, None):
        pytest.skip("fp8 needs compute capability >= 8.9")
    a, a_scale = quantize_fp8(randn((20, 96), torch.bfloat16, DEVICE, gen, scale=30.0))
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
    with pytest.raises(ValueError, match="SPLIT_K"):
        gemm(a, w, config=dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=1, SPLIT_K=0))


def test_cost_by_hand():
    bf16 = Case("M63-N123-K500", {"M": 63, "N": 123, "K": 500}, "bf16")
    assert OP.cost(bf16) == (2 * 63 * 123 * 500, (63 * 500 + 123 * 500) * 2 + 63 * 123 * 2)
    fp8 = Case("M63-N123-K500", {"M": 63, "N": 123, "K": 500}, "fp8")
    assert OP.cost(fp8) == (2 * 63 * 123 * 500, (63 * 500 + 123 * 500) * 1 + 63 * 123 * 2)  # bf16 out


def test_split_k_heuristic():
    assert G.split_k_for(1, 8192, 8192, num_sms=132) == 2  # 128 tiles -> 256 programs
    assert G.split_k_for(1, 8192, 8192, num_sms=1000) == 8
    assert G.split_k_for(1, 8192, 1024, num_sms=1000) == 1  # keep >= 1024 of K per split
    assert G.split_k_for(256, 8192, 8192, num_sms=132) == 1  # not skinny
    assert [G.skinny_block_m(m) for m in (1, 16, 17, 32, 33, 64)] == [16, 16, 32, 32, 64, 64]


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200"])
def test_configs_fit_shared_memory(gpu):
    smem = get_spec(gpu).smem_per_sm_bytes
    for configs, elem in ((G.LARGE_16BIT, 2), (G.LARGE_FP8, 1), *((G._skinny_configs(bm), 2) for bm in (16, 32, 64))):
        for cfg in configs:
            kw = cfg.kwargs
            need = (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * elem * cfg.num_stages
            assert need <= smem - 1024, (kw, cfg.num_stages, need)


def test_skinny_sweep_crosses_the_ridge_point():
    # the decode-like sweep starts deep in the memory-bound region and ends past the H200 bf16 ridge
    ridge = get_spec("h200").ridge_point("bf16")
    sweep = sorted((c for c in OP.cases["full"] if c.params["N"] == c.params["K"] == 8192 and c.params["M"] <= 256),
                   key=lambda c: c.params["M"])
    assert [c.params["M"] for c in sweep] == list(G.SKINNY_MS)
    ai = [float(formulas.arithmetic_intensity(*OP.cost(c))) for c in sweep]
    assert ai == sorted(ai)
    assert ai[0] < 1.5 and ai[-1] > ridge
    weight_bytes = 8192 * 8192 * 2
    assert weight_bytes > 2 * 50e6  # weights stream from HBM, not L2


def test_full_suite_has_square_prefill_shapes():
    square = {c.params["M"] for c in OP.cases["full"] if c.params["M"] == c.params["N"] == c.params["K"]}
    assert {4096, 8192} <= square
    assert any(c.dtype == "fp8" for c in OP.cases["full"])


_COMPILE = """
import json, torch
from kernels import gemm as G
from kernels.testing import compile_for_gpu
rows = []
sets = [("bf16", G.LARGE_16BIT), ("fp8", G.LARGE_FP8), ("bf16", G._skinny_configs(16)), ("bf16", G._skinny_configs(64))]
for dtype, configs in sets:
    for cfg in configs:
        M = cfg.kwargs["BLOCK_M"] * 4
        dt = torch.float8_e4m3fn if dtype == "fp8" else torch.bfloat16
        a, w = torch.empty((M, 8192), dtype=dt), torch.empty((8192, 8192), dtype=dt)
        out, scale = torch.empty((M, 8192), dtype=torch.bfloat16), torch.ones(1)
        split = 2 if cfg.kwargs["BLOCK_M"] <= G.SKINNY_MAX_M else 1
        scales = (scale, scale) if dtype == "fp8" else (None, None)
        args = G.kernel_args(a, w, out, torch.empty(0), *scales, split)
        k = compile_for_gpu(G._gemm_kernel, {**args, **cfg.kwargs, "EVEN_K": True}, cfg.num_warps, cfg.num_stages)
        ptx = k.asm["ptx"]
        rows.append({"name": f"{dtype} {cfg.kwargs} w{cfg.num_warps} s{cfg.num_stages} split{split}",
                     "block_m": cfg.kwargs["BLOCK_M"], "shared": k.metadata.shared, "wgmma": "wgmma" in ptx,
                     "mma": "mma.sync" in ptx or "wgmma" in ptx, "cp_async": "cp.async" in ptx})
k = compile_for_gpu(G._splitk_reduce_kernel, dict(ws_ptr=torch.empty(0), c_ptr=torch.empty(0, dtype=torch.bfloat16),
                    M=1, N=8192, stride_cm=8192, stride_cn=1, SPLIT_K=2, BLOCK=1024))
rows.append({"name": "splitk reduce", "block_m": 0, "shared": k.metadata.shared, "wgmma": False, "mma": False, "cp_async": False})
print(json.dumps(rows))
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the tests above compile and autotune for real")
def test_autotune_configs_compile_for_h100_h200():
    # every config the GPU run autotunes over lowers for sm_90 with tensor-core MMA (Hopper wgmma
    # from BLOCK_M = 64; mma.sync below, where a 64-row warpgroup MMA would be mostly padding) and
    # cp.async software pipelining, within the 227 KB of shared memory one block may use
    import json

    from kernels.testing import run_without_interpreter

    rows = json.loads(run_without_interpreter(_COMPILE).splitlines()[-1])
    n_configs = len(G.LARGE_16BIT) + len(G.LARGE_FP8) + 2 * len(G._skinny_configs(16))
    assert len(rows) == n_configs + 1
    limit = get_spec("h200").smem_per_sm_bytes - 1024
    for row in rows[:-1]:
        assert row["shared"] <= limit and row["mma"] and row["cp_async"], row
        assert row["wgmma"] == (row["block_m"] >= 64), row
    assert rows[-1]["shared"] <= limit
