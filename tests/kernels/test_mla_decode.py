"""mla_decode (absorbed MLA over the latent cache) against its fp32 reference and the naive MLA."""

from __future__ import annotations

import math

import pytest
import torch

from kernels import mla_decode as mla
from kernels.registry import load_op
from kernels.sdpa_baselines import check_candidates
from kernels.testing import compare, poisoned, seeded_generator
from rooflinecli import formulas

OP = mla.OP
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


gen = seeded_generator


@pytest.mark.parametrize("fused", [True, False], ids=["fused-reduce", "reduce-launch"])
def test_both_reduce_paths(fused, monkeypatch):
    """The fused reduce (last program per head block combines) and the separate reduce launch agree
    with the reference, also on a second call (the fused path's counters reset themselves)."""
    monkeypatch.setattr(mla, "FUSED_REDUCE", fused)
    monkeypatch.setattr(mla, "_PLANS", {})
    case = mla._case(2, 20, 123, 64, 32, "fp16", varlen=True, splits=3)
    for tag in ("first", "second"):
        inputs = OP.make_inputs(case, DEVICE, gen("reduce-" + tag))
        out = poisoned(inputs["q_latent"].shape, inputs["q_latent"].dtype, DEVICE)
        mla.mla_decode(**inputs, out=out)
        c = compare(out, OP.reference(**inputs), OP.tolerance["fp16"])
        assert c.ok, f"{tag}: {c.message}"


def test_many_splits_take_the_reduce_launch(monkeypatch):
    """Above FUSED_REDUCE_MAX_SPLITS splits the plan launches reduce_splits even where the fused
    reduce compiles (one program per head block combining every partial was B1's tail); at or
    below it the reduce stays fused. Both match the reference."""
    monkeypatch.setattr(mla, "FUSED_REDUCE", True)
    for splits, fused in ((mla.FUSED_REDUCE_MAX_SPLITS + 2, False), (3, True)):
        monkeypatch.setattr(mla, "_PLANS", {})
        case = mla._case(1, 20, 16 * (mla.FUSED_REDUCE_MAX_SPLITS + 2), 64, 32, "fp16", splits=splits)
        inputs = OP.make_inputs(case, DEVICE, gen(f"splits-{splits}"))
        out = poisoned(inputs["q_latent"].shape, inputs["q_latent"].dtype, DEVICE)
        mla.mla_decode(**inputs, out=out)
        (plan,) = mla._PLANS.values()
        assert plan[5]["FUSED_REDUCE"] is fused and plan[1][1] == splits, (splits, plan[1])
        c = compare(out, OP.reference(**inputs), OP.tolerance["fp16"])
        assert c.ok, f"{splits} splits: {c.message}"


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
def test_baseline_matches_reference(paged):
    case = next(c for c in OP.cases["test"] if c.params.get("varlen") and bool(c.params.get("page_size")) == paged)
    inputs = OP.make_inputs(case, DEVICE, gen("baseline"))
    c = compare(OP.baseline(**inputs), OP.reference(**inputs), OP.tolerance[case.dtype])
    assert c.ok, c.message


@pytest.mark.parametrize("varlen", [False, True], ids=["full", "varlen"])
def test_fair_baseline_candidates(varlen):
    """Every candidate either declines the inputs (None) or matches the reference; the matmul path
    always runs; SDPA declines a paged cache."""
    case = next(c for c in OP.cases["test"] if bool(c.params.get("varlen")) == varlen and not c.params.get("page_size"))
    inputs = OP.make_inputs(case, DEVICE, gen("fair"))
    assert "torch:matmul" in check_candidates(OP.baselines, inputs, OP.reference(**inputs), OP.tolerance[case.dtype])
    paged = next(c for c in OP.cases["test"] if c.params.get("page_size"))
    paged_inputs = OP.make_inputs(paged, DEVICE, gen("fair-paged"))
    ran = check_candidates(OP.baselines, paged_inputs, OP.reference(**paged_inputs), OP.tolerance[paged.dtype])
    assert ran == ["torch:matmul"]


def test_absorbed_equals_naive_mla():
    """Absorbing W_UK into the query and applying W_UV after gives the naive MLA's output, where
    keys and values are first decompressed per head from the latent cache."""
    g = gen("absorb")
    B, H, N, R, P, dn, dv = 2, 4, 57, 64, 16, 32, 32
    c_kv = torch.randn(B, N, R, generator=g)
    k_rope = torch.randn(B, N, P, generator=g)
    q_nope = torch.randn(B, H, dn, generator=g)
    q_rope = torch.randn(B, H, P, generator=g)
    W_UK = torch.randn(H, R, dn, generator=g) / math.sqrt(R)
    W_UV = torch.randn(H, R, dv, generator=g) / math.sqrt(R)
    scale = 1.0 / math.sqrt(dn + P)
    # naive: per-head keys [c_kv W_UK[h] | k_rope], values c_kv W_UV[h]
    k_nope = torch.einsum("bnr,hrd->bhnd", c_kv, W_UK)
    v = torch.einsum("bnr,hrd->bhnd", c_kv, W_UV)
    s = (torch.einsum("bhd,bhnd->bhn", q_nope, k_nope) + torch.einsum("bhp,bnp->bhn", q_rope, k_rope)) * scale
    naive = torch.einsum("bhn,bhnd->bhd", torch.softmax(s, -1), v)
    # absorbed, through the kernel (fp16)
    q_latent = torch.einsum("bhd,hrd->bhr", q_nope, W_UK)
    cache = torch.cat([c_kv, k_rope], dim=-1)
    half = lambda t: t.half().to(DEVICE)  # noqa: E731
    latent_out = mla.mla_decode(half(q_latent), half(q_rope), half(cache), sm_scale=scale, num_splits=2)
    absorbed = torch.einsum("bhr,hrd->bhd", latent_out.float().cpu(), W_UV)
    c = compare(absorbed, naive, 2e-3)
    assert c.ok, c.message


def test_split_count_and_lengths():
    case = mla._case(2, 16, 200, 64, 32, "fp16", varlen=True)
    inputs = OP.make_inputs(case, DEVICE, gen("splits"))
    outs = [mla.mla_decode(**inputs, num_splits=s) for s in (1, 4)]
    assert compare(outs[1], outs[0].float(), 1e-3).ok
    lens = inputs["seq_lens"]
    cache = inputs["cache"].clone()
    cache[1, int(lens[1]) :] = float("nan")  # past sequence 1's length: unwritten slots may hold NaN
    assert torch.equal(mla.mla_decode(**{**inputs, "cache": cache}, num_splits=4)[1], outs[1][1])


def _t(*shape, dtype=torch.float16):
    return torch.randn(*shape).to(dtype).to(DEVICE)


def test_launcher_checks():
    ql, qr, cache = _t(2, 16, 64), _t(2, 16, 32), _t(2, 40, 96)
    with pytest.raises(ValueError, match=r"R \+ P = 96"):
        mla.mla_decode(ql, qr, _t(2, 40, 100))
    with pytest.raises(ValueError, match="kv_lora_rank R = 48"):
        mla.mla_decode(_t(2, 16, 48), qr, _t(2, 40, 80))
    with pytest.raises(ValueError, match="does not match"):
        mla.mla_decode(ql, _t(2, 8, 32), cache)
    with pytest.raises(ValueError, match="bf16 or all fp16"):
        mla.mla_decode(ql, qr, cache.bfloat16())
    with pytest.raises(ValueError, match="cache batch"):
        mla.mla_decode(ql, qr, _t(3, 40, 96))
    with pytest.raises(ValueError, match="block_table must be"):
        mla.mla_decode(ql, qr, _t(8, 16, 96), block_table=torch.zeros(2, 3, dtype=torch.int64, device=DEVICE))
    with pytest.raises(ValueError, match="seq_lens must be"):
        mla.mla_decode(ql, qr, cache, seq_lens=torch.ones(3, dtype=torch.int32, device=DEVICE))
    with pytest.raises(ValueError, match=r"kv_lora_rank R = 1024 must be a power of two in \[16, 512\]"):
        mla.mla_decode(_t(2, 16, 1024), qr, _t(2, 40, 1056))
    with pytest.raises(ValueError, match="page_size = 8"):
        mla.mla_decode(ql, qr, _t(8, 8, 96), block_table=torch.zeros(2, 3, dtype=torch.int32, device=DEVICE))
    with pytest.raises(ValueError, match="16-byte"):
        mla.mla_decode(ql, qr, _t(2, 40, 97)[..., 1:])  # base off by one element, rows of 97
    with pytest.raises(ValueError, match="16-byte"):
        mla.mla_decode(_t(2, 16, 65)[..., 1:], qr, cache)


def test_cost_by_hand():
    flops, bytes_ = OP.cost(mla._case(4, 128, 1000, 512, 64, "bf16"))
    assert flops == 2 * 4 * 128 * 1000 * (512 + 64) + 2 * 4 * 128 * 1000 * 512
    cache = 4 * 1000 * (512 + 64) * 2  # one latent per token, shared by all heads
    q_out = 4 * 128 * (512 + 64) * 2 + 4 * 128 * 512 * 2
    assert bytes_ == cache + q_out
    assert bytes_ == formulas.mla_kv_cache_bytes(1, 512, 64, 1000, 2, 4) + q_out


def test_cases():
    assert load_op("mla_decode") is OP
    assert 3 <= len(OP.cases["full"]) <= 8
    for c in OP.cases["full"]:
        p = c.params
        assert (p["H"], p["R"], p["P"]) == (128, 512, 64), c.id  # DeepSeek-V3
        assert 1e8 < OP.cost(c)[1] < 3e9, c.id


def test_config_pruning_follows_cache_layout():
    """A paged cache keeps only tiles that divide its page; each variant keeps its listed tiles."""
    keep = mla._keep_fitting_tiles
    for paged in (False, True):
        for varlen in (False, True):
            page = 64 if paged else 1
            kept = keep(mla._GPU_CONFIGS, {}, PAGED=paged, VARLEN=varlen, PAGE_SIZE=page)
            assert kept, (paged, varlen)
            listed = mla.TILES[(paged, varlen)]
            if listed:
                assert all(mla._tile(c) in listed for c in kept)
            if paged:
                assert all(64 % c.kwargs["BLOCK_N"] == 0 for c in kept)
    small = keep(mla._GPU_CONFIGS, {}, PAGED=True, VARLEN=False, PAGE_SIZE=16)
    assert small and all(c.kwargs["BLOCK_N"] == 16 for c in small)
    assert keep(mla._GPU_CONFIGS, {}, PAGED=True, VARLEN=True, PAGE_SIZE=16)[0].kwargs["BLOCK_N"] == 16
    assert all(c.kwargs["BLOCK_H"] == 64 and c.num_warps == 8 for c in mla._GPU_CONFIGS)


# Lower every tile listed as spill-free for the installed Triton (contiguous and paged with 64-token
# pages, with and without per-sequence lengths) for sm_90 without a GPU at DeepSeek-V3's dims and
# read the cubin: wgmma (HGMMA) for the score and output matmuls, TMA loads of the latent tiles,
# shared memory within 227 KB, no register spills.
_COMPILE = """
import json, torch
from kernels import mla_decode as ml
from kernels.cubin_report import cubin_report
from kernels.flash_attention import make_descriptor
from kernels.testing import compile_for_gpu

rows = []
f32, i32 = (torch.empty(0, dtype=d) for d in (torch.float32, torch.int32))
ql, qr = torch.empty((16, 128, 512), dtype=torch.bfloat16), torch.empty((16, 128, 64), dtype=torch.bfloat16)
for paged in (False, True):
  for varlen in (False, True):
    cache = torch.empty((64, 64, 576) if paged else (16, 1024, 576), dtype=torch.bfloat16)
    for t in ml.TILES[(paged, varlen)]:
        cfg = ml._config(*t)
        n = cfg.kwargs["BLOCK_N"]
        args = dict(desc_ql=make_descriptor(ql, [1, 64, 256]), desc_qr=make_descriptor(qr, [1, 64, 64]),
                    desc_ckv=make_descriptor(cache, [1, n, 256]), desc_kpe=make_descriptor(cache, [1, n, 64]),
                    Seq_lens=i32, Block_table=i32, M_part=f32, L_part=f32, Acc_part=f32, O=ql, Counter=i32,
                    stride_ob=128 * 512, stride_oh=512, stride_bt=512,
                    stride_pb=128 * 8, stride_ph=8, stride_ab=128 * 8 * 512, stride_ah=8 * 512, stride_as=512,
                    H=128, N_ctx=32768, chunk=4096, qk_scale=0.1, B=16, SPLITS=8, R=512, P=64,
                    VARLEN=varlen, PAGED=paged, PAGE_SIZE=64 if paged else 1, UPCAST=False,
                    FUSED_REDUCE=ml.FUSED_REDUCE, **cfg.kwargs)
        k = compile_for_gpu(ml._mla_decode_kernel, args, cfg.num_warps, cfg.num_stages)
        rows.append({"name": f"paged={paged} varlen={varlen} {t}", **cubin_report(k)})
print(json.dumps(rows))
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the tests above compile and autotune for real")
def test_gpu_configs_compile_for_h100_h200():
    import json

    from kernels.testing import run_without_interpreter

    rows = json.loads(run_without_interpreter(_COMPILE).splitlines()[-1])
    assert len(rows) >= 2
    for row in rows:
        assert row["shared_bytes"] <= 227 * 1024 and row["HGMMA"] > 0 and row["UTMALDG"] > 0, row
        assert row["stack_bytes"] == 0 and row["LDL"] == 0 and row["STL"] == 0, f"register spill: {row}"
