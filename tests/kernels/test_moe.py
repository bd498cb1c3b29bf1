"""kernels/moe.py against its fp64 reference: routed SwiGLU experts over odd token counts, both
dtypes, the permutation step, router-logit input, every tile regime, launcher checks, cost."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import moe as MOE
from kernels.moe import OP, align_by_expert, baseline, case_routing, moe, reference, route
from kernels.registry import load_op
from kernels.testing import compare, poisoned, randn
from rooflinecli import formulas

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(5)


def _check(out, inputs, dtype):
    c = compare(out, reference(**inputs), OP.tolerance[dtype])
    assert c.ok, c.message


def test_registry_finds_op():
    assert load_op("moe") is OP
    assert OP.model_kind == "moe"


@pytest.mark.parametrize(
    "cfg",
    [
        dict(BLOCK_M=16, BLOCK_N_UP=16, BLOCK_N_DOWN=64, BLOCK_K=16, num_warps=4, num_stages=2),
        dict(BLOCK_M=32, BLOCK_N_UP=64, BLOCK_N_DOWN=32, BLOCK_K=64, num_warps=4, num_stages=2),
        MOE.NARROW_DECODE_CONFIG,
    ],
    ids=["bm16", "bm32", "narrow-decode"],
)
def test_tile_configs(cfg, gen):
    # 19 tokens, 5 experts, top-3: uneven runs per expert, several blocks and a partial last tile
    T, E, k, d, I = 19, 5, 3, 80, 48
    ids, weights = case_routing(T, E, k, seed=3)
    inputs = {
        "hidden": randn((T, d), torch.bfloat16, DEVICE, gen),
        "w1": randn((E, 2 * I, d), torch.bfloat16, DEVICE, gen, scale=d**-0.5),
        "w2": randn((E, d, I), torch.bfloat16, DEVICE, gen, scale=I**-0.5),
        "topk_ids": torch.from_numpy(ids).to(DEVICE),
        "topk_weights": torch.from_numpy(weights).to(DEVICE),
    }
    out = poisoned((T, d), torch.bfloat16, DEVICE)
    moe(**inputs, out=out, config=cfg)
    _check(out, inputs, "bf16")


def test_router_logits_path(gen):
    T, E, k, d, I = 9, 6, 2, 64, 32
    logits = randn((T, E), torch.float32, DEVICE, gen)
    hidden = randn((T, d), torch.float16, DEVICE, gen)
    w1 = randn((E, 2 * I, d), torch.float16, DEVICE, gen, scale=0.125)
    w2 = randn((E, d, I), torch.float16, DEVICE, gen, scale=0.125)
    out = moe(hidden, w1, w2, router_logits=logits, top_k=k)
    ids, weights = route(logits, k)
    assert ids.dtype == torch.int32 and torch.allclose(weights.sum(-1), torch.ones(T, device=DEVICE))
    # the top-k are the largest logits
    assert torch.equal(torch.sort(ids.long(), -1).values, torch.sort(torch.topk(logits, k).indices, -1).values)
    _check(out, {"hidden": hidden, "w1": w1, "w2": w2, "topk_ids": ids, "topk_weights": weights}, "fp16")


def _align_by_expert_torch(ids: torch.Tensor, E: int, block_m: int):
    """The same permutation from torch ops (stable sort): what the one-launch kernel replaces."""
    flat = ids.reshape(-1).to(torch.int64)
    n = flat.numel()
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + block_m - 1) // block_m * block_m
    ends = torch.cumsum(padded, 0)
    order = torch.argsort(flat, stable=True)
    rank = torch.arange(n) - (torch.cumsum(counts, 0) - counts)[flat[order]]
    P = MOE.padded_slots(n, E, block_m)
    sorted_slots = torch.full((P,), n, dtype=torch.int32)
    sorted_slots[(ends - padded)[flat[order]] + rank] = order.to(torch.int32)
    block_expert = torch.searchsorted(ends, torch.arange(0, P, block_m), right=True)
    return sorted_slots, torch.where(block_expert < E, block_expert, -1).to(torch.int32)


@pytest.mark.parametrize("block_m", [1, 4, 16])
def test_align_by_expert(block_m):
    ids = torch.tensor([[3, 0], [3, 1], [0, 3], [4, 2], [3, 4]], dtype=torch.int32)  # E=6: expert 5 unused
    E, n = 6, ids.numel()
    sorted_slots, block_expert = align_by_expert(ids.to(DEVICE), E, block_m)
    sorted_slots, block_expert = sorted_slots.cpu(), block_expert.cpu()
    assert sorted_slots.numel() % block_m == 0 and block_expert.numel() == sorted_slots.numel() // block_m
    real = sorted_slots[sorted_slots < n]
    assert sorted(real.tolist()) == list(range(n))  # each (token, choice) slot exactly once
    assert torch.all(sorted_slots[sorted_slots >= n] == n)  # padding holds the sentinel
    flat = ids.reshape(-1)
    for b, e in enumerate(block_expert.tolist()):
        block = sorted_slots[b * block_m:(b + 1) * block_m]
        members = block[block < n]
        if e < 0:
            assert members.numel() == 0  # past the last run
        else:
            assert members.numel() > 0 and torch.all(flat[members.long()] == e)  # one expert per block
    used = [e for e in block_expert.tolist() if e >= 0]
    assert used == sorted(used) and 5 not in used


@pytest.mark.parametrize(
    ("T", "E", "k", "block_m", "dtype"),
    [(1, 8, 2, 16, torch.int32), (16, 128, 8, 16, torch.int64), (77, 8, 2, 64, torch.int32), (40, 20, 5, 32, torch.int64)],
    ids=["mixtral-T1", "qwen3-T16", "several-chunks", "E20"],
)
def test_align_kernel_matches_torch_permutation(T, E, k, block_m, dtype):
    # the one-launch kernel gives exactly the stable torch permutation, over several 64-slot chunks
    ids, _ = case_routing(T, E, k, seed=T + E)
    ids = torch.from_numpy(ids).to(dtype)
    got_slots, got_blocks = align_by_expert(ids.to(DEVICE), E, block_m)
    want_slots, want_blocks = _align_by_expert_torch(ids, E, block_m)
    assert torch.equal(got_slots.cpu(), want_slots)
    assert torch.equal(got_blocks.cpu(), want_blocks)


def _routing(kind: str, n: int, E: int, seed: int) -> torch.Tensor:
    """n expert ids: uniform over E, over a random third of the experts (the rest get no slot), or
    all to one random expert."""
    g = torch.Generator().manual_seed(seed)
    if kind == "one":
        return torch.full((n,), int(torch.randint(0, E, (1,), generator=g)), dtype=torch.int32)
    pool = torch.randperm(E, generator=g)[: max(1, E // 3)] if kind == "sparse" else torch.arange(E)
    return pool[torch.randint(0, pool.numel(), (n,), generator=g)].to(torch.int32)


@pytest.mark.parametrize(
    ("n", "E", "block_m", "kind"),
    [
        (MOE.ALIGN_MULTI_MIN_CHUNKS * MOE.ALIGN_CHUNK - 1, 8, 16, "uniform"),  # just below the threshold
        (MOE.ALIGN_MULTI_MIN_CHUNKS * MOE.ALIGN_CHUNK, 128, 64, "uniform"),  # at it: still one program
        (MOE.ALIGN_MULTI_MIN_CHUNKS * MOE.ALIGN_CHUNK + 1, 8, 128, "uniform"),  # just above: three launches
        (200, 128, 64, "sparse"),  # most experts without a slot
        (130, 128, 128, "one"),  # every slot to one expert, a 2-slot last chunk
        (300, 256, 16, "uniform"),  # E_PAD 512
        (320, 256, 128, "sparse"),  # whole chunks only
        (64, 8, 64, "uniform"),  # one chunk
        (77, 20, 16, "one"),
    ],
    ids=["below", "at", "above", "sparse-E128", "one-expert", "E256", "whole-chunks", "one-chunk", "E20-one"],
)
def test_multi_program_align_matches_one_program_and_torch(n, E, block_m, kind, monkeypatch):
    # the three-launch alignment writes every position of a poisoned buffer, exactly as the
    # one-program kernel and the stable torch permutation do, also over a kept buffer's stale
    # scratch and with the chunk scan in steps of 2 chunks (its carry)
    assert MOE.align_multi(n) == (n > MOE.ALIGN_MULTI_MIN_CHUNKS * MOE.ALIGN_CHUNK)
    P, e_pad = MOE.padded_slots(n, E, block_m), MOE.triton.next_power_of_2(E + 1)
    nb = P // block_m
    buf = torch.empty((P + nb + MOE.align_scratch_elems(n, E, True),), dtype=torch.int32, device=DEVICE)
    for scan_chunks, ids in ((MOE.ALIGN_SCAN_CHUNKS, _routing(kind, n, E, seed=n * E + block_m)),
                             (2, _routing("uniform", n, E, seed=n + 1))):
        monkeypatch.setattr(MOE, "ALIGN_SCAN_CHUNKS", scan_chunks)
        want_slots, want_blocks = _align_by_expert_torch(ids, E, block_m)
        one_slots, one_blocks = align_by_expert(ids.to(DEVICE), E, block_m, multi=False)
        assert torch.equal(one_slots.cpu(), want_slots) and torch.equal(one_blocks.cpu(), want_blocks)
        buf[:P + nb] = -7777  # poison the outputs; the scratch keeps the previous call's values
        got_slots, got_blocks = MOE._align(ids.to(DEVICE), E, block_m, P, e_pad, buf, multi=True)
        assert torch.equal(got_slots.cpu(), want_slots)
        assert torch.equal(got_blocks.cpu(), want_blocks)


def test_multi_program_align_int64_ids_and_default_path():
    # [T, k] int64 ids above the threshold take the three launches by default
    T, E, k = 40, 16, 8
    ids = torch.from_numpy(case_routing(T, E, k, seed=9)[0]).to(torch.int64)
    assert MOE.align_multi(T * k)
    got = align_by_expert(ids.to(DEVICE), E, 32)
    want = _align_by_expert_torch(ids, E, 32)
    assert torch.equal(got[0].cpu(), want[0]) and torch.equal(got[1].cpu(), want[1])


def test_moe_through_multi_program_align(gen, monkeypatch):
    # the whole layer with the three-launch alignment (forced on a small shape), twice: the second
    # call reuses the plan's kept buffer with its stale scratch
    monkeypatch.setattr(MOE, "ALIGN_MULTI_MIN_CHUNKS", 0)
    monkeypatch.setattr(MOE, "_PLANS", {})
    case = next(c for c in OP.cases["test"] if c.id == "T33-E16-k4-d128-I40-bf16")
    for _ in range(2):
        inputs = OP.make_inputs(case, DEVICE, gen)
        out = poisoned((case.params["T"], case.params["d"]), inputs["hidden"].dtype, DEVICE)
        moe(**inputs, out=out)
        _check(out, inputs, case.dtype)
    (plan,) = MOE._PLANS.values()
    assert plan.align_multi


def test_baseline_both_paths_match_reference(gen):
    for case in OP.cases["test"]:  # bf16 cases take torch._grouped_mm where present, fp16 the loop
        inputs = OP.make_inputs(case, DEVICE, gen)
        c = compare(baseline(**inputs), reference(**inputs), OP.tolerance[case.dtype])
        assert c.ok, f"{case.id}: {c.message}"


def test_launcher_rejects_bad_arguments(gen):
    T, E, k, d, I = 4, 3, 2, 16, 8
    h = randn((T, d), torch.bfloat16, DEVICE, gen)
    w1 = randn((E, 2 * I, d), torch.bfloat16, DEVICE, gen)
    w2 = randn((E, d, I), torch.bfloat16, DEVICE, gen)
    ids = torch.zeros((T, k), dtype=torch.int32, device=DEVICE)
    wts = torch.full((T, k), 0.5, device=DEVICE)
    with pytest.raises(ValueError, match=r"w2 \[E, 16, I\]; got \(3, 16, 16\) and \(3, 16, 7\)"):
        moe(h, w1, w2[:, :, :7], ids, wts)
    with pytest.raises(ValueError, match=r"w1 must be \[E, 2I, 16\]"):
        moe(h, w1[:, :, :15], w2, ids, wts)
    with pytest.raises(ValueError, match="share bf16 or fp16"):
        moe(h.float(), w1.float(), w2.float(), ids, wts)
    with pytest.raises(ValueError, match=r"\[T=4, k\]"):
        moe(h, w1, w2, ids[:3], wts[:3])
    with pytest.raises(ValueError, match="int32/int64"):
        moe(h, w1, w2, ids.float(), wts)
    with pytest.raises(ValueError, match="k = 4 > E = 3"):
        moe(h, w1, w2, torch.zeros((T, 4), dtype=torch.int32, device=DEVICE), torch.ones((T, 4), device=DEVICE))
    with pytest.raises(ValueError, match="give"):
        moe(h, w1, w2)
    with pytest.raises(ValueError, match="not both"):
        moe(h, w1, w2, ids, wts, router_logits=torch.zeros((T, E), device=DEVICE), top_k=2)
    with pytest.raises(ValueError, match="out must be"):
        moe(h, w1, w2, ids, wts, out=torch.empty((T, d), dtype=torch.float16, device=DEVICE))
    # d = 12: weight rows of 24 bytes, which the TMA engine cannot address
    with pytest.raises(ValueError, match="d = 12 and I = 8 must be multiples of 8"):
        moe(h[:, :12], w1[:, :, :12], w2[:, :12].contiguous(), ids, wts)
    with pytest.raises(ValueError, match="w1 must be contiguous"):
        moe(h, w1.transpose(1, 2).contiguous().transpose(1, 2), w2, ids, wts)


def test_cost_by_hand():
    case = next(c for c in OP.cases["test"] if c.id == "T7-E8-k2-d200-I56-bf16")
    ids, _ = case_routing(7, 8, 2, case.params["seed"])
    touched = len(set(ids.ravel().tolist()))
    assert case.params["experts_touched"] == touched
    flops, bytes_ = OP.cost(case)
    slots = 7 * 2
    assert flops == 2 * slots * 200 * (2 * 56) + 2 * slots * 56 * 200
    assert bytes_ == touched * (200 * 2 * 56 + 56 * 200) * 2 + 7 * (200 + 200) * 2


def test_cases_record_touched_and_expected_experts():
    for case in OP.cases["test"] + OP.cases["full"]:
        p = case.params
        assert p["expected_experts_touched"] == pytest.approx(float(formulas.expected_experts_touched(p["E"], p["k"], p["T"])))
        assert min(p["k"], p["E"]) <= p["experts_touched"] <= min(p["E"], p["T"] * p["k"])
    full = {c.shape: c.params for c in OP.cases["full"]}
    assert full["T1-E8-k2-d4096-I14336"]["experts_touched"] == 2
    assert full["T4096-E128-k8-d2048-I768"]["experts_touched"] == 128
    # decode-like (T <= 64) and prefill-like (T = 4096) for both the Mixtral and Qwen3 shapes
    for E, k in ((8, 2), (128, 8)):
        Ts = {p["T"] for p in full.values() if (p["E"], p["k"]) == (E, k)}
        assert min(Ts) == 1 and 4096 in Ts and any(1 < t <= 64 for t in Ts)


def test_case_routing_is_deterministic_and_uniformish():
    a = case_routing(4096, 128, 8, 0)
    b = case_routing(4096, 128, 8, 0)
    assert np.array_equal(a[0], b[0]) and np.allclose(a[1].sum(1), 1.0, atol=1e-5)
    counts = np.bincount(a[0].ravel(), minlength=128)
    assert counts.min() > 0.5 * counts.mean() and counts.max() < 1.5 * counts.mean()  # uniform routing


def test_moe_config_table():
    # per-M configs by average slots per expert: decode (Mixtral T <= 64, Qwen3 T <= 256) streams
    # weights with 16-token blocks; prefill takes compute tiles
    assert MOE.moe_config(1 * 2, 8)["BLOCK_M"] == 16 and MOE.moe_config(16 * 8, 128)["BLOCK_M"] == 16
    assert MOE.moe_config(64 * 2, 8)["BLOCK_M"] == 16  # 16 slots per expert
    assert MOE.moe_config(500, 8)["BLOCK_M"] == 64
    assert MOE.moe_config(4096 * 2, 8)["BLOCK_M"] == 128
    # with I: a decode grid under one w13 program per H200 SM takes 32-row bands (Qwen3 T = 1: 8
    # experts x 12 bands = 96 programs -> 192); Qwen3 T = 4 (up to 32 experts) and Mixtral keep 64
    assert MOE.moe_config(1 * 8, 128, 768) is MOE.NARROW_DECODE_CONFIG
    assert MOE.moe_config(4 * 8, 128, 768)["BLOCK_N_UP"] == 64
    assert MOE.moe_config(1 * 2, 8, 14336)["BLOCK_N_UP"] == 64
    assert MOE.moe_config(4096 * 8, 128, 768)["BLOCK_M"] == 128  # prefill rows never narrow
    limits = [limit for limit, _ in MOE.MOE_CONFIGS]
    assert limits == sorted(limits) and limits[-1] == float("inf")


def test_padded_slots_worst_case():
    # every touched expert may waste block_m - 1 slots; never fewer slots than T*k
    assert MOE.padded_slots(8, 128, 16) == 8 * 16  # Qwen3 T = 1: one 16-slot block per expert
    assert MOE.padded_slots(2, 8, 16) == 32
    assert MOE.padded_slots(8192, 8, 128) == 8192 + 8 * 128


# Both GEMMs in every config regime and the alignment kernel, lowered for sm_90 with Triton's
# bundled ptxas at the Mixtral and Qwen3 shapes, read back with cuobjdump.
_COMPILE = """
import json, torch
from kernels import moe as MOE
from kernels.testing import compile_for_gpu
from kernels.cubin_report import cubin_report
rows = []
bf, i32 = torch.bfloat16, torch.int32
for (num_slots, E, d, I) in ((2, 8, 4096, 14336), (8, 128, 2048, 768), (128, 128, 2048, 768), (500, 8, 4096, 14336),
                             (8192, 8, 4096, 14336)):
    cfg = MOE.moe_config(num_slots, E, I)
    k = 2 if E == 8 else 8
    T = num_slots // k
    hidden, w1, w2 = torch.empty((T, d), dtype=bf), torch.empty((E, 2 * I, d), dtype=bf), torch.empty((E, d, I), dtype=bf)
    P = MOE.padded_slots(num_slots, E, cfg["BLOCK_M"])
    act, y = torch.empty((P, I), dtype=bf), torch.empty((num_slots, d), dtype=bf)
    slots, blocks, wts = torch.empty(P, dtype=i32), torch.empty(P // cfg["BLOCK_M"], dtype=i32), torch.empty(num_slots)
    for name, kernel, args in (
        ("gate_up", MOE._moe_gate_up_kernel, MOE.gate_up_args(hidden, w1, act, slots, blocks, k, cfg)),
        ("down", MOE._moe_down_kernel, MOE.down_args(act, w2, y, slots, blocks, wts, cfg)),
    ):
        c = compile_for_gpu(kernel, {**args, "UPCAST": False}, cfg["num_warps"], cfg["num_stages"])
        rows.append({"name": f"{name} E{E} slots{num_slots} {cfg}", **cubin_report(c)})
    c = compile_for_gpu(MOE._align_kernel, dict(ids_ptr=torch.empty(1, dtype=i32), sorted_slots_ptr=slots,
                        block_expert_ptr=blocks, num_slots=num_slots, E=E, P=P, NB=P // cfg["BLOCK_M"],
                        BLOCK_M=cfg["BLOCK_M"], E_PAD=MOE.triton.next_power_of_2(E + 1), CHUNK=MOE.ALIGN_CHUNK),
                        num_warps=MOE.ALIGN_WARPS)
    rows.append({"name": f"align E{E} slots{num_slots}", **cubin_report(c)})
# the three multi-program alignment kernels at Qwen3 and Mixtral T = 4096 and at 256 experts (E_PAD 512)
t = torch.empty(1, dtype=i32)
for (n, E, bm) in ((32768, 128, 128), (8192, 8, 128), (4096, 256, 64)):
    P, e_pad, chunks = MOE.padded_slots(n, E, bm), MOE.triton.next_power_of_2(E + 1), -(-n // MOE.ALIGN_CHUNK)
    for kernel, args in (
        (MOE._align_count_kernel, dict(ids_ptr=t, counts_ptr=t, rank_ptr=t, num_slots=n, E=E, E_PAD=e_pad,
                                       CHUNK=MOE.ALIGN_CHUNK)),
        (MOE._align_scan_kernel, dict(counts_ptr=t, totals_ptr=t, num_chunks=chunks, E=E, EB=MOE.ALIGN_SCAN_EXPERTS,
                                      CB=min(MOE.triton.next_power_of_2(chunks), MOE.ALIGN_SCAN_CHUNKS))),
        (MOE._align_scatter_kernel, dict(ids_ptr=t, counts_ptr=t, rank_ptr=t, totals_ptr=t, sorted_slots_ptr=t,
                                         block_expert_ptr=t, num_slots=n, E=E, NB=P // bm, BLOCK_M=bm, E_PAD=e_pad,
                                         CHUNK=MOE.ALIGN_CHUNK)),
    ):
        c = compile_for_gpu(kernel, args, MOE.ALIGN_MULTI_WARPS)
        rows.append({"name": f"align_multi {kernel.__name__} E{E} slots{n}", **cubin_report(c)})
print(json.dumps(rows))
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the tests above compile the kernels for real")
def test_kernels_compile_for_h200():
    # both GEMMs: warpgroup MMA (HGMMA) on TMA-loaded weight tiles (UTMALDG), but the narrow decode
    # w13 (32-row bands: below the warpgroup MMA's 64 rows); every kernel without register spills and
    # within the 227 KB of shared memory one block may use
    import json

    from kernels.testing import run_without_interpreter
    from rooflinecli.hardware import get_spec

    rows = json.loads(run_without_interpreter(_COMPILE, timeout_s=600).splitlines()[-1])
    assert len(rows) == 15 + 9
    limit = get_spec("h200").smem_per_sm_bytes - 1024
    narrow = f"gate_up E128 slots8 {MOE.NARROW_DECODE_CONFIG}"
    assert narrow in {row["name"] for row in rows}
    for row in rows:
        assert row["shared_bytes"] <= limit and row["stack_bytes"] == 0 and row["LDL"] == row["STL"] == 0, row
        if not row["name"].startswith("align"):
            assert row["UTMALDG"] > 0 and (row["HGMMA"] > 0 or row["name"] == narrow), row


def test_repeated_calls_reuse_the_plan_with_new_tensors(gen):
    # the second call of a shape reuses the cached plan (descriptors re-pointed at the new weights)
    case = OP.cases["test"][1]
    first = OP.make_inputs(case, DEVICE, gen)
    moe(**first)
    second = OP.make_inputs(case, DEVICE, gen)
    assert not torch.equal(first["w1"], second["w1"])
    n_plans = len(MOE._PLANS)
    _check(moe(**second), second, case.dtype)
    assert len(MOE._PLANS) == n_plans
    _check(moe(**first), first, case.dtype)


@pytest.mark.parametrize("ids_dtype", [torch.int32, torch.int64])
def test_one_token_skips_the_alignment(ids_dtype, gen, monkeypatch):
    """T = 1 with int32 ids: block j is slot j alone, its expert read from the ids, no alignment
    launch (three launches in all); int64 ids take the alignment as before. Both match the
    reference, repeated ids included (slot 2 repeats expert 5: computed twice, summed twice)."""
    E, k, d, I = 7, 3, 64, 48
    inputs = {
        "hidden": randn((1, d), torch.bfloat16, DEVICE, gen),
        "w1": randn((E, 2 * I, d), torch.bfloat16, DEVICE, gen, scale=d**-0.5),
        "w2": randn((E, d, I), torch.bfloat16, DEVICE, gen, scale=I**-0.5),
        "topk_ids": torch.tensor([[5, 0, 5]], dtype=ids_dtype, device=DEVICE),
        "topk_weights": torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float32, device=DEVICE),
    }
    monkeypatch.setattr(MOE, "_PLANS", {})
    out = poisoned((1, d), torch.bfloat16, DEVICE)
    moe(**inputs, out=out)
    _check(out, inputs, "bf16")
    (plan,) = MOE._PLANS.values()
    assert plan.direct and plan.P == k * plan.cfg["BLOCK_M"] and plan.nb == k
    aligned = []
    real = plan.bound_align
    plan.bound_align = lambda *a: (aligned.append(a), real(*a))  # count the alignment launches
    out = poisoned((1, d), torch.bfloat16, DEVICE)
    moe(**inputs, out=out)  # the repeated call, through the plan
    _check(out, inputs, "bf16")
    assert len(aligned) == (0 if ids_dtype == torch.int32 else 1)
    bm = plan.cfg["BLOCK_M"]
    assert MOE.direct_slots(k, bm).tolist() == [j if i == 0 else k for j in range(k) for i in range(bm)]
    # the same plan given a strided view of the ids (every other entry of [1, 2k]): the same
    # result, and the plan's slot pattern intact for the next contiguous call
    wide = torch.stack([inputs["topk_ids"][0], torch.zeros_like(inputs["topk_ids"][0])], dim=1).reshape(1, 2 * k)
    strided = dict(inputs, topk_ids=wide[:, ::2])
    assert not strided["topk_ids"].is_contiguous() and torch.equal(strided["topk_ids"], inputs["topk_ids"])
    for call in (strided, inputs):
        out = poisoned((1, d), torch.bfloat16, DEVICE)
        moe(**call, out=out)
        _check(out, inputs, "bf16")
    assert len(aligned) == (0 if ids_dtype == torch.int32 else 3)
