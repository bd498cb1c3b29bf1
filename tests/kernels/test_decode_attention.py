"""decode_attention (split-KV, GQA, paged) against its fp32 reference."""

from __future__ import annotations

import pytest
import torch

from kernels import decode_attention as da
from kernels import launch as launch_module
from kernels.registry import load_op
from kernels.tuning import Choice
from kernels.sdpa_baselines import check_candidates
from kernels.testing import compare, poisoned, seeded_generator

OP = da.OP
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


gen = seeded_generator


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
def test_baseline_matches_reference(paged):
    case = next(c for c in OP.cases["test"] if c.params.get("varlen") and bool(c.params.get("page_size")) == paged)
    inputs = OP.make_inputs(case, DEVICE, gen("baseline"))
    c = compare(OP.baseline(**inputs), OP.reference(**inputs), OP.tolerance[case.dtype])
    assert c.ok, c.message


@pytest.mark.parametrize("case", [c for c in OP.cases["test"] if c.dtype == "fp16"], ids=lambda c: c.id)
def test_pointer_loads_match_reference(case, monkeypatch):
    """The pointer-load path (the autotuner's non-TMA configs) on the same cases."""
    monkeypatch.setattr(da, "_INTERPRET_TMA", False)
    monkeypatch.setattr(da, "_PLANS", {})
    inputs = OP.make_inputs(case, DEVICE, gen(case.id + "-ptr"))
    out = poisoned(inputs["q"].shape, inputs["q"].dtype, DEVICE)
    da.decode_attention(**inputs, out=out)
    c = compare(out, OP.reference(**inputs), OP.tolerance[case.dtype])
    assert c.ok, f"{case.id}: {c.message}"


@pytest.mark.parametrize("schedule", ["splits", "balanced"])
@pytest.mark.parametrize("tma", [True, False], ids=["tma", "pointers"])
def test_unwritten_slots_past_a_length_are_never_used(tma, schedule, monkeypatch):
    """Cache slots past a sequence's length may hold NaN (never written): the output ignores them."""
    monkeypatch.setattr(da, "_INTERPRET_TMA", tma)
    monkeypatch.setattr(da, "_PLANS", {})
    case = da._case(2, 8, 2, 100, 64, "fp16", varlen=True)
    inputs = OP.make_inputs(case, DEVICE, gen("nan-slots"))
    lens = inputs["seq_lens"]
    ref = OP.reference(**inputs)
    for name in ("k_cache", "v_cache"):
        inputs[name] = inputs[name].clone()
        inputs[name][1, :, int(lens[1]) :] = float("nan")
    how = dict(num_splits=2) if schedule == "splits" else dict(schedule="balanced", num_programs=3)
    c = compare(da.decode_attention(**inputs, **how), ref, OP.tolerance["fp16"])
    assert c.ok, c.message


@pytest.mark.parametrize("varlen", [False, True], ids=["full", "varlen"])
def test_fair_baseline_candidates(varlen):
    """Every candidate either declines the inputs (None) or matches the reference; the matmul path
    always runs; SDPA on a paged cache only through the timed gather."""
    case = next(c for c in OP.cases["test"] if bool(c.params.get("varlen")) == varlen and not c.params.get("page_size"))
    inputs = OP.make_inputs(case, DEVICE, gen("fair"))
    ref = OP.reference(**inputs)
    ran = check_candidates(OP.baselines, inputs, ref, OP.tolerance[case.dtype])
    assert "torch:matmul" in ran and "sdpa:gather" not in ran
    paged = next(c for c in OP.cases["test"] if c.params.get("page_size"))
    paged_inputs = OP.make_inputs(paged, DEVICE, gen("fair-paged"))
    ran = check_candidates(OP.baselines, paged_inputs, OP.reference(**paged_inputs), OP.tolerance[paged.dtype])
    assert sorted(ran) == ["sdpa:gather", "torch:matmul"]


# Balanced schedule on tiny shapes with the program count forced (P), so the interesting cases
# happen: (B, H, H_kv, N, D, dtype, page_size, P, seq_lens) with G = B * H_kv groups of
# ceil(N / 16) units (16-token units when interpreting), U = G * units.
_BALANCED = {
    # G 2 < P 5, U 14: runs of 2-3 units, the third crosses from group 0 into group 1; GQA 4
    "groups<P-crossing": (1, 8, 2, 100, 64, "fp16", None, 5, None),
    # G 16 > P 5, U 48 not divisible by 5: each run spans 3-5 groups; lengths 40, 1, 17, 33
    "groups>P-varlen": (4, 16, 4, 40, 128, "bf16", None, 5, [40, 1, 17, 33]),
    # G 16 == P 16: one group per program; GQA 1
    "groups=P": (2, 8, 8, 64, 64, "bf16", None, 16, None),
    # U 3 < P 8: three one-unit programs (no empty program is launched); GQA 8
    "P>U": (1, 8, 1, 40, 128, "fp16", None, 8, None),
    # paged, 32-token pages, 16-token tiles; G 3 < P 7, lengths 96, 50, 1; GQA 8
    "paged32-varlen": (3, 8, 1, 96, 64, "fp16", 32, 7, [96, 50, 1]),
    # paged, 16-token pages; G 8 > P 3, runs of 13-14 units across 3-4 groups; GQA 1
    "paged16-groups>P": (2, 4, 4, 80, 128, "bf16", 16, 3, [23, 80]),
}


def _balanced_inputs(name, tag):
    B, H, H_kv, N, D, dtype, page, P, lens = _BALANCED[name]
    inputs = OP.make_inputs(da._case(B, H, H_kv, N, D, dtype, page_size=page), DEVICE, gen(name + tag))
    if lens is not None:
        inputs["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device=DEVICE)
    return inputs, P, dtype


def _check_per_sequence(out, inputs, dtype, label):
    ref = OP.reference(**inputs)
    for b in range(out.shape[0]):  # per sequence: a wrong short sequence is not lost in the norm
        c = compare(out[b], ref[b], OP.tolerance[dtype])
        assert c.ok, f"{label}, sequence {b}: {c.message}"


@pytest.mark.parametrize("tma", [True, False], ids=["tma", "pointers"])
@pytest.mark.parametrize("name", list(_BALANCED))
def test_balanced_matches_reference(name, tma, monkeypatch):
    monkeypatch.setattr(da, "_INTERPRET_TMA", tma)
    monkeypatch.setattr(da, "_PLANS", {})
    inputs, P, dtype = _balanced_inputs(name, "")
    out = poisoned(inputs["q"].shape, inputs["q"].dtype, DEVICE)
    assert da.decode_attention(**inputs, out=out, schedule="balanced", num_programs=P) is out
    _check_per_sequence(out, inputs, dtype, name)


def test_balanced_repeated_calls_reset_the_counters_and_are_deterministic(monkeypatch):
    """Second call, new inputs: right (the last arrivers reset every counter); identical inputs
    give bit-identical outputs (partials combined in slot order, not in order of arrival)."""
    monkeypatch.setattr(da, "_PLANS", {})
    first, P, dtype = _balanced_inputs("groups>P-varlen", "1")
    second, _, _ = _balanced_inputs("groups>P-varlen", "2")
    run = dict(schedule="balanced", num_programs=P)
    out1 = da.decode_attention(**first, **run)
    out2 = poisoned(second["q"].shape, second["q"].dtype, DEVICE)
    da.decode_attention(**second, out=out2, **run)
    assert len(da._PLANS) == 1
    counter = next(iter(da._PLANS.values()))[3][3]
    assert counter.shape == (4 * 4,) and not counter.any()
    _check_per_sequence(out1, first, dtype, "first call")
    _check_per_sequence(out2, second, dtype, "second call")
    again = poisoned(first["q"].shape, first["q"].dtype, DEVICE)
    da.decode_attention(**first, out=again, **run)
    assert torch.equal(again, out1)


def test_balanced_agrees_with_splits_and_defaults_to_one_program_per_sm():
    case = da._case(3, 8, 2, 300, 64, "fp16", varlen=True)
    inputs = OP.make_inputs(case, DEVICE, gen("schedules"))
    splits = da.decode_attention(**inputs)
    balanced = da.decode_attention(**inputs, schedule="balanced")
    assert compare(balanced, splits.float(), 1e-3).ok
    plan = next(p for k, p in da._PLANS.items() if "balanced" in k)
    assert plan[1] == (da.sm_count(torch.device(DEVICE)),)  # 6 groups x 19 units > 8 SMs: P = SMs


def test_balanced_plan_covers_every_unit_once():
    """Against a brute force: no program is empty, every unit is in exactly one run, and no group
    is spread over more programs than the partial slots the plan sizes the buffers for; the
    kernel's closed form for a group's first and last program names exactly those programs."""
    for groups in (1, 2, 3, 7, 16, 33):
        for upg in (1, 2, 5, 16, 40):
            for sms in (1, 3, 8, 13, 132):
                P, slots = da.balanced_plan(groups, upg, sms)
                U = groups * upg
                assert P == min(sms, U)
                lo = [p * U // P for p in range(P + 1)]
                assert lo[0] == 0 and lo[-1] == U and all(a < b for a, b in zip(lo, lo[1:]))
                for g in range(groups):
                    x, y = g * upg, (g + 1) * upg - 1
                    covering = [p for p in range(P) if lo[p] <= y and lo[p + 1] > x]
                    p_first, p_last = ((x + 1) * P - 1) // U, ((y + 1) * P - 1) // U
                    assert covering == list(range(p_first, p_last + 1)), (groups, upg, sms, g)
                    assert len(covering) <= slots, (groups, upg, sms, g)
    # H200 (132 SMs), 128-token units: B1 Hkv8 128k spreads a group over 17 programs (18 slots)
    assert da.balanced_plan(8, 1024, 132) == (132, 18)
    assert da.balanced_plan(512, 128, 132) == (132, 2)  # B64 Hkv8 16k: ~3.9 groups per program


def test_schedule_checks():
    q, k = _t(2, 8, 64), _t(2, 2, 50, 64)
    with pytest.raises(ValueError, match="schedule = 'fast' is not one of 'splits', 'balanced'"):
        da.decode_attention(q, k, k, schedule="fast")
    with pytest.raises(ValueError, match="num_splits applies to schedule='splits' only"):
        da.decode_attention(q, k, k, schedule="balanced", num_splits=2)
    with pytest.raises(ValueError, match="num_programs applies to schedule='balanced' only"):
        da.decode_attention(q, k, k, num_programs=4)
    with pytest.raises(ValueError, match="num_programs = 0 must be >= 1"):
        da.decode_attention(q, k, k, schedule="balanced", num_programs=0)


def test_autotune_key_covers_the_grid():
    """B1 and B64 (and different split counts) never share a tuned config: the grid differs."""
    key = da._decode_attention_autotuned.keys
    assert {"B", "H_kv", "SPLITS"} <= set(key)
    assert "chunk" not in key  # a growing context would retune every CHUNK_ALIGN tokens
    # balanced: grid (P,); B and H_kv set how many groups a program walks; not the unit counts
    key = da._decode_attention_balanced_autotuned.keys
    assert {"B", "H_kv", "P"} <= set(key)
    assert not {"units_per_group", "n_units"} & set(key)


def test_repeated_calls_reuse_the_plan():
    case = da._case(2, 8, 2, 70, 64, "fp16", varlen=True)
    first = OP.make_inputs(case, DEVICE, gen("plan1"))
    da.decode_attention(**first)
    n = len(da._PLANS)
    second = OP.make_inputs(case, DEVICE, gen("plan2"))
    out = poisoned(second["q"].shape, second["q"].dtype, DEVICE)
    da.decode_attention(**second, out=out)  # the fused reduce's counter was reset by the first call
    assert len(da._PLANS) == n
    c = compare(out, OP.reference(**second), OP.tolerance["fp16"])
    assert c.ok, c.message


def test_plans_stay_bounded_as_a_context_grows(monkeypatch):
    """A decode loop over a growing cache makes a new shape each step: old plans are dropped."""
    monkeypatch.setattr(da, "_PLANS", {})
    monkeypatch.setattr(launch_module, "MAX_PLANS", 4)
    q = torch.randn(1, 4, 64).half().to(DEVICE)
    for n in range(20, 30):
        k = torch.randn(1, 2, n, 64).half().to(DEVICE)
        da.decode_attention(q, k, k, num_splits=1)
    assert len(da._PLANS) == 4


def test_split_count_does_not_change_the_result():
    case = da._case(2, 8, 2, 300, 64, "fp16", varlen=True)
    inputs = OP.make_inputs(case, DEVICE, gen("splits"))
    outs = [da.decode_attention(**inputs, num_splits=s) for s in (1, 3, 10)]
    assert da.split_plan(300, 10, da._INTERPRET_BLOCK_N)[1] > 3  # really more chunks than 3
    for o in outs[1:]:
        assert compare(o, outs[0].float(), 1e-3).ok


def test_paged_equals_contiguous():
    """The same tokens through a shuffled page table give the same output as the contiguous cache."""
    g = gen("paged")
    B, H, H_kv, N, D, page = 2, 4, 2, 80, 64, 16
    q = torch.randn(B, H, D, generator=g).half().to(DEVICE)
    k = torch.randn(B, H_kv, N, D, generator=g).half().to(DEVICE)
    v = torch.randn(B, H_kv, N, D, generator=g).half().to(DEVICE)
    n_pages = N // page
    table = torch.randperm(B * n_pages, generator=g).view(B, n_pages).to(torch.int32)
    k_pages = torch.empty(B * n_pages, page, H_kv, D, dtype=torch.float16)
    v_pages = torch.empty_like(k_pages)
    for b in range(B):
        for i in range(n_pages):
            k_pages[table[b, i]] = k[b, :, i * page : (i + 1) * page].transpose(0, 1).cpu()
            v_pages[table[b, i]] = v[b, :, i * page : (i + 1) * page].transpose(0, 1).cpu()
    lens = torch.tensor([80, 37], dtype=torch.int32, device=DEVICE)
    contiguous = da.decode_attention(q, k, v, seq_lens=lens, num_splits=2)
    paged = da.decode_attention(q, k_pages.to(DEVICE), v_pages.to(DEVICE), seq_lens=lens, block_table=table.to(DEVICE), num_splits=2)
    assert compare(paged, contiguous.float(), 1e-3).ok
    # the second sequence ignores everything past its 37 tokens
    k2 = k.clone()
    k2[1, :, 37:] = 100.0
    assert torch.equal(da.decode_attention(q, k2, v, seq_lens=lens, num_splits=2)[1], contiguous[1])


def _t(*shape, dtype=torch.float16):
    return torch.randn(*shape).to(dtype).to(DEVICE)


def test_launcher_checks():
    q, k = _t(2, 8, 64), _t(2, 2, 50, 64)
    with pytest.raises(ValueError, match=r"q must be \[B, H, D\]"):
        da.decode_attention(q[:, None], k, k)
    with pytest.raises(ValueError, match="must divide H"):
        da.decode_attention(q, _t(2, 3, 50, 64), _t(2, 3, 50, 64))
    with pytest.raises(ValueError, match="head dim"):
        da.decode_attention(q, _t(2, 2, 50, 32), _t(2, 2, 50, 32))
    with pytest.raises(ValueError, match="bf16 or all fp16"):
        da.decode_attention(q, k.bfloat16(), k.bfloat16())
    with pytest.raises(ValueError, match="seq_lens must be"):
        da.decode_attention(q, k, k, seq_lens=torch.tensor([5, 6], device=DEVICE))  # int64
    with pytest.raises(ValueError, match="block_table must be"):
        da.decode_attention(q, _t(8, 16, 2, 64), _t(8, 16, 2, 64), block_table=torch.zeros(2, 4, device=DEVICE))
    with pytest.raises(ValueError, match="page_size = 8 must be a power of two >= 16"):
        da.decode_attention(q, _t(8, 8, 2, 64), _t(8, 8, 2, 64), block_table=torch.zeros(2, 4, dtype=torch.int32, device=DEVICE))
    with pytest.raises(ValueError, match="16-byte"):
        da.decode_attention(q, _t(2, 2, 50, 65)[..., 1:], _t(2, 2, 50, 64))
    with pytest.raises(ValueError, match="page_size = 12"):
        da.decode_attention(q, _t(8, 12, 2, 64), _t(8, 12, 2, 64), block_table=torch.zeros(2, 4, dtype=torch.int32, device=DEVICE))
    with pytest.raises(ValueError, match="num_splits"):
        da.decode_attention(q, k, k, num_splits=0)
    with pytest.raises(ValueError, match="batch"):
        da.decode_attention(q, _t(3, 2, 50, 64), _t(3, 2, 50, 64))


def test_split_plan_and_choice():
    assert da.split_plan(1000, 4, 128) == (256, 4)
    assert da.split_plan(123, 3, 128) == (128, 1)  # rounding up to whole tiles leaves one chunk
    assert da.split_plan(131072, 64, 128) == (2048, 64)
    # B * H_kv = 8 on 132 SMs: many chunks; B * H_kv = 1024 (> 4 per SM): one; at most MAX_SPLITS
    assert da.choose_splits(8, 131072, 132) == da.MAX_SPLITS
    assert da.choose_splits(1024, 4096, 132) == 1
    assert da.choose_splits(512, 4096, 132) == 2
    assert da.choose_splits(8, 300, 132) == 2  # chunks of at least 256 tokens
    # decode attention's own choice: one program per SM at most (B1 H_kv 8: 16 chunks, B8: 2,
    # B16 and beyond: 1), never fewer than one split, chunks of at least 256 tokens
    assert da.one_wave_splits(8, 131072, 132) == 16 and da.one_wave_splits(64, 32768, 132) == 2
    assert da.one_wave_splits(128, 131072, 132) == da.one_wave_splits(256, 4096, 132) == 1
    assert da.one_wave_splits(1, 131072, 132) == da.MAX_SPLITS
    assert da.one_wave_splits(8, 1000, 132) == 4
    for groups in (1, 2, 8, 64, 100, 132):
        assert groups * da.one_wave_splits(groups, 1 << 20, 132) <= max(132, groups)


def test_cost_by_hand():
    flops, bytes_ = OP.cost(da._case(4, 32, 8, 1000, 128, "bf16"))
    assert flops == 4 * 4 * 32 * 1000 * 128
    kv = 2 * 4 * 8 * 1000 * 128 * 2  # K and V, B * H_kv * N * D elements each, 2 bytes
    assert bytes_ == kv + 2 * 4 * 32 * 128 * 2  # + q read and o written


def test_cases():
    assert load_op("decode_attention") is OP
    assert 3 <= len(OP.cases["full"]) <= 10
    full = OP.cases["full"]
    # every balanced variant is timed beside the same shape on the default schedule
    balanced = [c for c in full if c.params.get("schedule") == "balanced"]
    assert len(balanced) == 4 and all(c.id.endswith("-bal-bf16") for c in balanced)
    for c in balanced:
        twin = {k: v for k, v in c.params.items() if k != "schedule"}
        assert any(dict(o.params) == twin for o in full), c.id
    inputs = OP.make_inputs(next(c for c in OP.cases["test"] if c.params.get("schedule")), DEVICE, gen("cases"))
    assert inputs["schedule"] == "balanced"  # the case's schedule reaches the launcher
    assert {c.params["H"] for c in full} == {32} and {c.params["H_kv"] for c in full} == {8}
    assert min(c.params["B"] for c in full) == 1 and max(c.params["B"] for c in full) == 64
    assert min(c.params["N"] for c in full) == 4096 and max(c.params["N"] for c in full) == 131072
    assert any(c.params.get("page_size") for c in full)
    # memory-bound and sized past the 50 MB L2 by far, under ~9 GB so the check fits beside it
    for c in full:
        _, bytes_ = OP.cost(c)
        assert 2e8 < bytes_ < 9e9, c.id


# Lower every GPU autotune config the autotuner may run (contiguous; paged with 16-token pages),
# for both schedules' kernels, and the reduce kernel for sm_90 without a GPU and read the cubin: shared memory within 227 KB, no
# register spills, and TMA loads in the TMA configs.
_COMPILE = """
import json, torch
from triton.tools.tensor_descriptor import TensorDescriptor
from kernels import decode_attention as da
from kernels import flash_attention as fa_module
from kernels.cubin_report import cubin_report
from kernels.testing import compile_for_gpu

rows = []
bf, f32, i32 = (torch.empty(0, dtype=d) for d in (torch.bfloat16, torch.float32, torch.int32))
for paged, schedule, kernel, configs, extra in (
    (paged, schedule, kernel, configs, extra) for paged in (False, True) for schedule, kernel, configs, extra in (
        ("splits", da._decode_attention_kernel, da._GPU_CONFIGS, dict(chunk=4096, SPLITS=8)),
        ("balanced", da._decode_attention_balanced_kernel, da._BALANCED_CONFIGS,
         dict(units_per_group=256, n_units=16 * 8 * 256, P=132, UNIT=da.CHUNK_ALIGN)))):
    page = 16 if paged else 1
    for cfg in da._keep_fitting_tiles(configs, {}, PAGED=paged, PAGE_SIZE=page):
        n = cfg.kwargs["BLOCK_N"]
        cache = torch.empty((64, 16, 8, 128) if paged else (2, 8, 32768, 128), dtype=torch.bfloat16)
        view = [64, 16, 8, 128] if paged else [2, 32768, 8, 128]
        st = [16 * 8 * 128, 8 * 128, 128, 1] if paged else [8 * 32768 * 128, 128, 32768 * 128, 1]
        desc = TensorDescriptor(cache, view, st, [1, n, 1, 128])
        args = dict(Q=bf, K=bf, V=bf, desc_k=desc, desc_v=desc, Seq_lens=i32, Block_table=i32, M_part=f32,
                    L_part=f32, Acc_part=f32, O=bf, Counter=i32, stride_ob=4096, stride_oh=128, stride_qb=4096, stride_qh=128, stride_kb=st[0], stride_kh=st[2],
                    stride_kn=st[1], stride_vb=st[0], stride_vh=st[2], stride_vn=st[1], stride_bt=2048,
                    stride_pb=32 * 8, stride_ph=8, stride_ab=32 * 8 * 128, stride_ah=8 * 128, stride_as=128,
                    H_kv=8, GROUP=4, N_ctx=32768, qk_scale=0.1, B=16,
                    BLOCK_G=16, D=128, VARLEN=paged, PAGED=paged, PAGE_SIZE=page, UPCAST=False, **cfg.kwargs)
        k = compile_for_gpu(kernel, args | extra, cfg.num_warps, cfg.num_stages)
        rows.append({"name": f"{schedule} paged={paged} {cfg.kwargs} w{cfg.num_warps} s{cfg.num_stages}",
                     "tma": cfg.kwargs["TMA"], **cubin_report(k)})
k = compile_for_gpu(da._decode_attention_reduce_kernel, dict(M_part=f32, L_part=f32, Acc_part=f32, O=bf,
    stride_pb=256, stride_ph=8, stride_ab=32768, stride_ah=1024, stride_as=128, stride_ob=4096, stride_oh=128,
    H=32, n_splits=8, BLOCK_D=128, BLOCK_S=64))
rows.append({"name": "reduce", "tma": False, **cubin_report(k)})
print(json.dumps(rows))
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the tests above compile and autotune for real")
def test_gpu_configs_compile_for_h100_h200():
    import json

    from kernels.testing import run_without_interpreter

    rows = json.loads(run_without_interpreter(_COMPILE).splitlines()[-1])
    # every config of both schedules, contiguous and paged (as pruned), and the reduce
    assert len(rows) >= len(da._GPU_CONFIGS) + len(da._BALANCED_CONFIGS) + 3
    assert sum(r["name"].startswith("balanced") for r in rows) >= len(da._BALANCED_CONFIGS) + 1
    assert len(da._BALANCED_CONFIGS) == len(da._GPU_CONFIGS)
    for row in rows:
        assert row["shared_bytes"] <= 227 * 1024, row
        assert row["stack_bytes"] == 0 and row["LDL"] == 0 and row["STL"] == 0, f"register spill: {row}"
        assert (row["UTMALDG"] > 0) == row["tma"], row


def test_the_schedule_is_chosen_by_timing_both_once_per_shape_class(monkeypatch):
    """On a GPU, no schedule given: the first call of a shape class times both schedules (graph
    replay there; a stand-in timer here, the interpreter's kernels run for real) and keeps the
    faster; "balanced" needs more than SCHEDULE_MARGIN; later calls of the class reuse the choice,
    and an explicit schedule, num_splits or num_programs is never overridden."""
    times = {"splits": 1.0, "balanced": 0.5}
    seen = []

    def timer(fn):
        fn()
        seen.append(len(seen))
        return times[da.SCHEDULES[(len(seen) - 1) % 2]]

    monkeypatch.setattr(da, "_auto_enabled", lambda q: True)
    monkeypatch.setattr(da, "_graph_time_ms", timer)
    monkeypatch.setattr(da, "SCHEDULE_CHOICE", Choice("decode_attention.schedule", da.SCHEDULES))
    monkeypatch.setattr(da, "_PLANS", {})
    assert da.choose_schedule(lambda s: {"splits": 1.0, "balanced": 0.99}[s])[0] == "splits"  # a near-tie keeps splits
    assert da.choose_schedule(lambda s: {"splits": 1.0, "balanced": 0.97}[s])[0] == "balanced"
    g = gen("auto-schedule")
    q = torch.randn(2, 4, 64, generator=g).to(torch.bfloat16).to(DEVICE)
    k = torch.randn(2, 2, 40, 64, generator=g).to(torch.bfloat16).to(DEVICE)
    v = torch.randn(2, 2, 40, 64, generator=g).to(torch.bfloat16).to(DEVICE)
    out = da.decode_attention(q, k, v)
    assert len(seen) == 2 and list(da.SCHEDULE_CHOICE.cache.values()) == ["balanced"]
    ref = da.decode_reference(q, k, v)
    assert compare(out, ref, OP.tolerance["bf16"]).ok
    da.decode_attention(q, k, v)
    da.decode_attention(q, k[:, :, :33].contiguous(), v[:, :, :33].contiguous())  # same power of two of length: same class
    assert len(seen) == 2
    da.decode_attention(q, k, v, num_splits=2)  # explicit: no choice
    da.decode_attention(q, k, v, schedule="splits")
    assert len(seen) == 2
    da.decode_attention(q, k[:, :, :8].contiguous(), v[:, :, :8].contiguous())  # another class: timed again
    assert len(seen) == 4 and len(da.SCHEDULE_CHOICE.cache) == 2


def test_a_committed_schedule_is_used_untimed_and_rows_say_which_ran(monkeypatch, tmp_path):
    """The schedule choice is tuned like a config: a tuned file's ``choices`` fill the table, a
    committed key is never timed, and a Recorder (bench's) names the choice and its source; a
    timed one is "autotuned" and keeps its times for ``roofline tune`` to write."""
    import json

    from kernels.tuning import Recorder, apply_committed, load_committed, summarize_calls

    choice = Choice("decode_attention.schedule", da.SCHEDULES)
    monkeypatch.setattr(da, "SCHEDULE_CHOICE", choice)
    monkeypatch.setattr(da, "_auto_enabled", lambda q: True)
    monkeypatch.setattr(da, "_PLANS", {})
    timed = []
    monkeypatch.setattr(da, "_graph_time_ms", lambda fn: (fn(), timed.append(1), 1.0)[2])
    g = gen("committed-schedule")
    q = torch.randn(2, 4, 64, generator=g).to(torch.bfloat16).to(DEVICE)
    k = torch.randn(2, 2, 40, 64, generator=g).to(torch.bfloat16).to(DEVICE)
    key = da._schedule_class(q, k, None, None)
    assert key == (2, 4, 64, 2, "torch.bfloat16", False, 1, False, 6)
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"schema": "rooflinecli.tuned/1", "gpu": "NVIDIA H200", "triton": "3.6.0", "autotuners": {},
                             "choices": {"decode_attention.schedule": [{"key": list(key), "value": "balanced", "times_us": {"splits": 9.0, "balanced": 7.0}}]}}))
    committed = load_committed(f, {}, "NVIDIA H200", "3.6.0", {choice.name: choice})
    assert committed.status == "applied" and "1 choices" in committed.message
    apply_committed(committed, {}, {choice.name: choice})
    with Recorder({}) as rec:
        out = da.decode_attention(q, k, k)
    assert not timed and summarize_calls(rec.calls) == ({"decode_attention.schedule": {"value": "balanced"}}, "committed")
    assert compare(out, da.decode_reference(q, k, k), OP.tolerance["bf16"]).ok
    k2 = k[:, :, :8].contiguous()  # another class: timed (both schedules), recorded as autotuned
    with Recorder({}) as rec:
        da.decode_attention(q, k2, k2)
    assert len(timed) == 2 and summarize_calls(rec.calls)[1] == "autotuned"
    assert choice.times[da._schedule_class(q, k2, None, None)] == {"splits": 1.0, "balanced": 1.0}
    # a value no schedule has, or an unknown choice name: the file is rejected in one line
    for bad, needle in (({"decode_attention.schedule": [{"key": list(key), "value": "fast"}]}, "is not one of"),
                        ({"gone.choice": []}, "unknown choice 'gone.choice'")):
        f.write_text(json.dumps({"schema": "rooflinecli.tuned/1", "gpu": "NVIDIA H200", "triton": "3.6.0", "autotuners": {}, "choices": bad}))
        c = load_committed(f, {}, "NVIDIA H200", "3.6.0", {choice.name: choice})
        assert c.status == "rejected" and needle in c.message and "\n" not in c.message


def test_a_schedule_that_fails_is_not_chosen_and_bad_input_still_raises(monkeypatch):
    monkeypatch.setattr(da, "_auto_enabled", lambda q: True)
    monkeypatch.setattr(da, "SCHEDULE_CHOICE", Choice("decode_attention.schedule", da.SCHEDULES))
    monkeypatch.setattr(da, "_PLANS", {})
    real = da._plan

    def plan(*args):
        if args[7] == "balanced":  # the schedule argument
            raise RuntimeError("compile error")
        return real(*args)

    monkeypatch.setattr(da, "_plan", plan)
    monkeypatch.setattr(da, "_graph_time_ms", lambda fn: (fn(), 1.0)[1])
    g = gen("auto-fail")
    q = torch.randn(1, 4, 64, generator=g).to(torch.bfloat16).to(DEVICE)
    k = torch.randn(1, 2, 24, 64, generator=g).to(torch.bfloat16).to(DEVICE)
    out = da.decode_attention(q, k, k)
    assert list(da.SCHEDULE_CHOICE.cache.values()) == ["splits"]
    assert compare(out, da.decode_reference(q, k, k), OP.tolerance["bf16"]).ok
    with pytest.raises(ValueError, match="head dim"):
        da.decode_attention(torch.zeros(1, 4, 96, dtype=torch.bfloat16), torch.zeros(1, 2, 24, 96, dtype=torch.bfloat16),
                            torch.zeros(1, 2, 24, 96, dtype=torch.bfloat16))
