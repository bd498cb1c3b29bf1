"""naive_attention (S and P materialized in HBM) against the fp32 attention reference."""

from __future__ import annotations

import math

import pytest
import torch

from kernels import naive_attention as na
from kernels.flash_attention import OP as FLASH
from kernels.flash_attention import _case as flash_case
from kernels.registry import load_op
from kernels.sdpa_baselines import check_candidates
from kernels.testing import compare, poisoned, seeded_generator
from rooflinecli import formulas

OP = na.OP
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


gen = seeded_generator


def test_scores_and_probabilities_are_materialized():
    """The S and P buffers hold scale * Q K^T and its row softmax after the call (poisoned before)."""
    g = gen("materialized")
    B, H, S, D = 1, 2, 45, 64
    q, k, v = (torch.randn(B, H, S, D, generator=g).to(torch.float16).to(DEVICE) for _ in range(3))
    scores = poisoned((B, H, S, S), torch.float16, DEVICE)
    probs = poisoned((B, H, S, S), torch.float16, DEVICE)
    na.naive_attention(q, k, v, causal=True, scores=scores, probs=probs)
    s_ref = q.float() @ k.float().transpose(-1, -2) / math.sqrt(D)
    c = compare(scores, s_ref, 2e-3)
    assert c.ok, c.message
    p = probs.float()
    assert torch.allclose(p.sum(-1), torch.ones(B, H, S, device=DEVICE), atol=1e-2)
    assert float(p.triu(1).abs().max()) == 0.0  # causal: nothing above the diagonal
    p_ref = torch.softmax(s_ref.masked_fill(torch.ones(S, S, dtype=torch.bool, device=DEVICE).triu(1), -math.inf), -1)
    c = compare(p, p_ref, 2e-3)
    assert c.ok, c.message


def test_baseline_matches_reference():
    case = next(c for c in OP.cases["test"] if c.params["causal"])
    inputs = OP.make_inputs(case, DEVICE, gen("baseline"))
    c = compare(OP.baseline(**inputs), OP.reference(**inputs), OP.tolerance[case.dtype])
    assert c.ok, c.message


def test_fair_baseline_candidates():
    case = next(c for c in OP.cases["test"] if c.params["causal"] and c.params["H"] != c.params["H_kv"])
    inputs = OP.make_inputs(case, DEVICE, gen("fair"))
    ran = check_candidates(OP.baselines, inputs, OP.reference(**inputs), OP.tolerance[case.dtype])
    assert sorted(ran) == ["sdpa:math", "torch:matmul-softmax"]


def _t(*shape, dtype=torch.float16):
    return torch.randn(*shape).to(dtype).to(DEVICE)


def test_launcher_checks():
    q = _t(1, 4, 20, 64)
    with pytest.raises(ValueError, match="must divide H"):
        na.naive_attention(q, _t(1, 3, 20, 64), _t(1, 3, 20, 64))
    with pytest.raises(ValueError, match="bf16 or all fp16"):
        na.naive_attention(q, q.float(), q.float())
    with pytest.raises(ValueError, match="do not match q"):
        na.naive_attention(q, _t(1, 4, 21, 64), _t(1, 4, 21, 64))
    with pytest.raises(ValueError, match="scores must be"):
        na.naive_attention(q, q, q, scores=torch.empty(1, 4, 20, 21, dtype=torch.float16, device=DEVICE))
    with pytest.raises(ValueError, match="probs must be"):
        na.naive_attention(q, q, q, probs=torch.empty(1, 4, 20, 20, dtype=torch.bfloat16, device=DEVICE))


def test_cost_by_hand():
    case = na._case(2, 3, 3, 100, 64, False, "fp16")
    flops, bytes_ = OP.cost(case)
    assert flops == 4 * 2 * 3 * 100 * 100 * 64  # both S x S matmuls, 2 FLOPs per multiply-add
    per_head = 4 * 100 * 64 + 4 * 100 * 100  # Q, K, V, O + S written/read + P written/read
    assert bytes_ == per_head * 2 * (2 * 3)
    # same FLOPs as flash attention (non-causal) at far more bytes, the gap growing with S
    flash = FLASH.cost(flash_case(2, 3, 3, 100, 64, False, "fp16"))
    assert flash[0] == flops and flash[1] < bytes_
    ratio = formulas.naive_attention_hbm_elements(8192, 128) / formulas.naive_attention_hbm_elements(1024, 128)
    assert ratio > 40  # ~ (8192/1024)^2 once S >> D


def test_cases_fit_memory():
    assert load_op("naive_attention") is OP
    assert 3 <= len(OP.cases["full"]) <= 8
    for c in OP.cases["full"] + OP.cases["quick"]:
        p = c.params
        assert p["S"] <= 8192 and p["H"] == p["H_kv"]  # MHA: the traffic formula counts K/V per head
        square_bytes = 2 * p["B"] * p["H"] * p["S"] ** 2 * 2  # S and P in bf16
        assert square_bytes <= 4.3e9, c.id


# Lower the GPU matmul and softmax kernels for sm_90 without a GPU (shared memory within 227 KB).
_COMPILE = """
import json, torch
from kernels import naive_attention as na
from kernels.testing import compile_for_gpu

bf = torch.empty(0, dtype=torch.bfloat16)
b = dict(na._MATMUL_BLOCKS_GPU)
w, s = b.pop("num_warps"), b.pop("num_stages")
S, D = 4096, 128
args = dict(A=bf, Bm=bf, C=bf, stride_ab=32 * S * D, stride_ah=S * D, stride_am=D, stride_ak=1,
            stride_bb=32 * S * D, stride_bh=S * D, stride_bk=1, stride_bn=D,
            stride_cb=32 * S * S, stride_ch=S * S, stride_cm=S, stride_cn=1,
            H=32, M=S, N=S, K=D, scale=0.1, GROUP=1, UPCAST=False, **b)
rows = [compile_for_gpu(na._naive_attention_matmul_kernel, args, w, s).metadata.shared]
for BN, warps in ((8192, 8), (1024, 4)):
    args = dict(Sc=bf, P=bf, n_rows=32 * BN, N=BN, stride_row=BN, CAUSAL=True, ROWS=max(1, 2048 // BN), BLOCK_N=BN)
    rows.append(compile_for_gpu(na._naive_attention_softmax_kernel, args, warps, 1).metadata.shared)
print(json.dumps(rows))
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the tests above compile for real")
def test_gpu_kernels_compile_for_h100_h200():
    import json

    from kernels.testing import run_without_interpreter

    rows = json.loads(run_without_interpreter(_COMPILE).splitlines()[-1])
    assert len(rows) == 3 and all(s <= 227 * 1024 for s in rows), rows
