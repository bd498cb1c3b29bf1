"""flash_attention against its fp32 reference (Triton interpreter on the CPU, the GPU when present)."""

from __future__ import annotations

import math

import pytest
import torch

from kernels import flash_attention as fa
from kernels.registry import load_op
from kernels.sdpa_baselines import check_candidates
from kernels.testing import compare, seeded_generator

OP = fa.OP
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


gen = seeded_generator


def test_baseline_matches_reference():
    case = next(c for c in OP.cases["test"] if c.params["causal"] and c.params["H"] != c.params["H_kv"])
    inputs = OP.make_inputs(case, DEVICE, gen("baseline"))
    c = compare(OP.baseline(**inputs), OP.reference(**inputs), OP.tolerance[case.dtype])
    assert c.ok, c.message


@pytest.mark.parametrize("backend", sorted(OP.baselines))
def test_fair_baseline_candidates(backend):
    """Each SDPA backend either declines these inputs (None) or matches the reference; GQA runs
    through enable_gqa or K/V expanded in the factory. The default dispatch always runs."""
    case = next(c for c in OP.cases["test"] if c.params["causal"] and c.params["H"] != c.params["H_kv"])
    inputs = OP.make_inputs(case, DEVICE, gen("fair-" + backend))
    ran = check_candidates({backend: OP.baselines[backend]}, inputs, OP.reference(**inputs), OP.tolerance[case.dtype])
    if backend == "sdpa:default":
        assert ran == [backend]


def test_sdpa_backend_missing_or_failing_gives_none(monkeypatch):
    from kernels import sdpa_baselines as sb

    q = _t(1, 4, 16, 64)
    assert sb.sdpa_call(q, q[:, :2], q[:, :2], "NO_SUCH_BACKEND") is None  # a torch without it

    def boom(*a, **k):
        raise RuntimeError("No available kernel")

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", boom)
    assert sb.sdpa_call(q, q[:, :2], q[:, :2], None) is None


def test_repeated_calls_reuse_the_plan():
    """The second call with the same shapes takes the cached plan, on new tensors (new data)."""
    g = gen("plan")
    shapes = (1, 2, 40, 64)
    q, k, v = (torch.randn(*shapes, generator=g).half().to(DEVICE) for _ in range(3))
    fa.flash_attention(q, k, v, causal=True)
    n = len(fa._PLANS)
    q2, k2, v2 = (torch.randn(*shapes, generator=g).half().to(DEVICE) for _ in range(3))
    out = fa.flash_attention(q2, k2, v2, causal=True)
    assert len(fa._PLANS) == n
    c = compare(out, fa.attention_reference(q2, k2, v2, causal=True), OP.tolerance["fp16"])
    assert c.ok, c.message


def test_sm_scale_and_causal_change_the_result():
    g = gen("scale")
    q, k, v = (torch.randn(1, 2, 40, 64, generator=g).to(torch.float16).to(DEVICE) for _ in range(3))
    ref = fa.attention_reference(q, k, v, causal=True, sm_scale=0.3)
    c = compare(fa.flash_attention(q, k, v, causal=True, sm_scale=0.3), ref, OP.tolerance["fp16"])
    assert c.ok, c.message
    # the first query sees only key 0 under a causal mask: its output is v[..., 0, :]
    out = fa.flash_attention(q, k, v, causal=True)
    assert torch.allclose(out[:, :, 0].float(), v[:, :, 0].float(), atol=1e-3)
    assert not compare(fa.flash_attention(q, k, v, causal=False), ref, 0.05).ok


def test_gqa_heads_share_kv():
    """With identical query heads in a group, the group's outputs are identical."""
    g = gen("gqa")
    q = torch.randn(1, 1, 50, 64, generator=g).repeat(1, 4, 1, 1).to(torch.bfloat16).to(DEVICE)
    k = torch.randn(1, 2, 50, 64, generator=g).to(torch.bfloat16).to(DEVICE)
    v = torch.randn(1, 2, 50, 64, generator=g).to(torch.bfloat16).to(DEVICE)
    out = fa.flash_attention(q, k, v)
    assert torch.equal(out[:, 0], out[:, 1]) and torch.equal(out[:, 2], out[:, 3])
    assert not torch.equal(out[:, 1], out[:, 2])  # heads 0-1 read KV head 0, heads 2-3 KV head 1


def _t(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape).to(dtype).to(DEVICE)


@pytest.mark.parametrize(
    "q, k, v, match",
    [
        (_t(2, 4, 16, 64), _t(2, 3, 16, 64), _t(2, 3, 16, 64), "must divide H"),
        (_t(2, 4, 16, 64), _t(2, 4, 17, 64), _t(2, 4, 17, 64), "do not match q"),
        (_t(2, 4, 16, 96), _t(2, 4, 16, 96), _t(2, 4, 16, 96), "head dim D = 96 not supported"),
        (_t(2, 4, 16, 64, dtype=torch.float32), _t(2, 4, 16, 64), _t(2, 4, 16, 64), "bf16 or all fp16"),
        (_t(2, 4, 16, 64), _t(2, 4, 16, 64, dtype=torch.float16), _t(2, 4, 16, 64), "bf16 or all fp16"),
        (_t(4, 16, 64), _t(4, 16, 64), _t(4, 16, 64), r"\[B, H, S, D\]"),
        (_t(2, 4, 16, 64), _t(2, 4, 16, 64), _t(2, 2, 16, 64), "must have one shape"),
        (_t(2, 4, 64, 16).transpose(2, 3), _t(2, 4, 16, 64), _t(2, 4, 16, 64), "contiguous"),
        (_t(2, 4, 16, 68)[..., :64], _t(2, 4, 16, 64), _t(2, 4, 16, 64), "16-byte multiples"),
        (_t(2, 4, 16, 65)[..., 1:], _t(2, 4, 16, 64), _t(2, 4, 16, 64), "16-byte"),
    ],
    ids=["gqa-ratio", "seq-mismatch", "head-dim", "fp32", "mixed-dtype", "3d", "kv-shapes", "strided-d", "tma-stride", "tma-base"],
)
def test_launcher_rejects_bad_inputs(q, k, v, match):
    with pytest.raises(ValueError, match=match):
        fa.flash_attention(q, k, v)


def test_launcher_rejects_non_positive_scale():
    q = _t(1, 2, 16, 64)
    with pytest.raises(ValueError, match="sm_scale = -0.1 must be > 0"):
        fa.flash_attention(q, q, q, sm_scale=-0.1)


def test_launcher_rejects_bad_out():
    q = _t(1, 2, 16, 64)
    with pytest.raises(ValueError, match="out must be"):
        fa.flash_attention(q, q, q, out=torch.empty(1, 2, 16, 64, dtype=torch.float16, device=DEVICE))


def test_cost_by_hand():
    case = fa._case(2, 4, 2, 100, 64, True, "bf16")
    flops, bytes_ = OP.cost(case)
    pairs = 100 * 101 / 2  # causal: keys 0..i for query i
    assert flops == 2 * 2 * 4 * pairs * 64 * 2  # QK^T and PV, 2 FLOPs per multiply-add
    q_o = 2 * (2 * 4 * 100 * 64) * 2  # Q read + O written, bf16
    k_v = 2 * (2 * 2 * 100 * 64) * 2  # K and V of the 2 KV heads
    assert bytes_ == q_o + k_v
    full, _ = OP.cost(fa._case(2, 4, 2, 100, 64, False, "bf16"))
    assert full == 4 * 2 * 4 * 100 * 100 * 64


def test_cases_and_registry():
    assert load_op("flash_attention") is OP
    assert OP.model_kind == "attention"
    for suite in ("test", "quick", "full"):
        ids = [c.id for c in OP.cases[suite]]
        assert len(ids) == len(set(ids)), suite
        for c in OP.cases[suite]:
            assert c.dtype in OP.dtypes and c.params["D"] in fa.HEAD_DIMS
            assert c.params["H"] % c.params["H_kv"] == 0
    assert 3 <= len(OP.cases["full"]) <= 8
    seqs = {c.params["S"] for c in OP.cases["full"]}
    assert min(seqs) == 1024 and max(seqs) == 16384
    # every full case is far past launch overhead: > 0.1 ms even at 1 PFLOP/s
    assert all(OP.cost(c)[0] > 1e11 for c in OP.cases["full"])
    assert {c.params["D"] for c in OP.cases["full"]} == {64, 128}
    assert math.isclose(fa.LOG2E, 1 / math.log(2))


# Lower every GPU autotune config for sm_90 (H100/H200) without a GPU and read the cubin: wgmma
# (HGMMA) for both matmuls, TMA loads and the TMA store, shared memory within the 227 KB one block
# may use, and no register spills (stack frame 0, no local loads/stores). Causal D = 128 is the
# variant timed most: every config; D = 64 non-causal with the first.
_COMPILE = """
import json, torch
from triton.tools.tensor_descriptor import TensorDescriptor
from kernels import flash_attention as fa
from kernels.cubin_report import cubin_report
from kernels.testing import compile_for_gpu

rows = []
variants = [(128, True, c) for c in fa._GPU_CONFIGS] + [(64, False, fa._GPU_CONFIGS[0])]
for D, causal, cfg in variants:
    t = torch.empty((1, 8, 1024, D), dtype=torch.bfloat16)
    kw = cfg.kwargs
    dq = fa.make_descriptor(t, [1, 1, kw["BLOCK_M"], D])
    dkv = fa.make_descriptor(t, [1, 1, kw["BLOCK_N"], D])
    args = dict(desc_q=dq, desc_k=dkv, desc_v=dkv, desc_o=dq, H=8, S=1024, GROUP=4, qk_scale=0.1,
                D=D, CAUSAL=causal, UPCAST=False, **kw)
    k = compile_for_gpu(fa._flash_attention_kernel, args, cfg.num_warps, cfg.num_stages)
    rows.append({"name": f"D{D} causal={causal} {kw} w{cfg.num_warps} s{cfg.num_stages}", **cubin_report(k)})
print(json.dumps(rows))
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the tests above compile and autotune for real")
def test_gpu_configs_compile_for_h100_h200():
    import json

    from kernels.testing import run_without_interpreter

    rows = json.loads(run_without_interpreter(_COMPILE).splitlines()[-1])
    assert len(rows) == len(fa._GPU_CONFIGS) + 1
    for row in rows:
        assert row["shared_bytes"] <= 227 * 1024, row
        assert row["HGMMA"] > 0 and row["UTMALDG"] > 0 and row["UTMASTG"] > 0, row
        assert row["stack_bytes"] == 0 and row["LDL"] == 0 and row["STL"] == 0, f"register spill: {row}"
