"""The decode step's small ops calibrated on their real layouts (``rope_qkv_strided``,
``silu_mul_strided``, ``kv_write``): the op grid times e2e_full's own functions, and the
achievable model uses those rows when the calibration has them, the contiguous curves otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflinecli.achievable import calibration_for, models_for
from rooflinecli.predict import predict_step_breakdown
from rooflinecli.achievable.calibration import SCHEMA
from rooflinecli.analysis import Workload
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "h200-2026-11-30" / "torch-op-timings.json"
STRIDED_OPS = ("rope_qkv_strided", "silu_mul_strided", "kv_write")

# ------------------------------------------------------------------------------------------------
# The op grid
# ------------------------------------------------------------------------------------------------


def test_the_grid_has_the_strided_cases_with_their_traffic():
    from rooflinecli.bench.opgrid import build_grid

    grid = build_grid()
    rope = {(c.shape["T"], c.shape["H"], c.shape["KVH"], c.shape["D"]) for c in grid["rope_qkv_strided"]}
    assert rope == {(T, H, 8, 128) for T in (1, 8, 32, 64, 512, 2048) for H in (32, 64)}
    silu = {(c.shape["T"], c.shape["F"]) for c in grid["silu_mul_strided"]}
    assert silu == {(T, F) for T in (1, 8, 32, 64, 512, 2048) for F in (14336, 28672, 18944)}
    kv = grid["kv_write"]
    assert sorted(c.shape["B"] for c in kv) == [1, 8, 32, 64] and all(c.shape["KVH"] == 8 and c.shape["D"] == 128 for c in kv)
    for c in grid["rope_qkv_strided"]:  # q and k read once, cos and sin read once, q and k written once
        s = c.shape
        assert c.bytes == 2 * (2 * s["T"] * (s["H"] + s["KVH"]) * s["D"]) + 2 * 2 * s["T"] * s["D"]
    for c in grid["silu_mul_strided"]:  # gate and up read, the product written: 3 passes of T x F
        assert c.bytes == 3 * 2 * c.shape["T"] * c.shape["F"]
    for c in kv:  # K and V of one token read and written
        assert c.bytes == 4 * 2 * c.shape["B"] * c.shape["KVH"] * c.shape["D"]


def test_the_strided_cases_are_cheap_and_early_in_the_round_robin():
    """All of them fall before the 175th case (what a 20 s grid budget reaches), and their rough
    cost (bytes at 3 TB/s) stays under 10 ms, far below the ~3 s they take with timing overhead."""
    from rooflinecli.bench.opgrid import build_grid, round_robin

    grid = build_grid()
    order = list(round_robin(grid))
    last = max(i for i, c in enumerate(order) if c.op in STRIDED_OPS)
    assert last < 175
    strided = [c for c in order if c.op in STRIDED_OPS]
    assert len(strided) == 12 + 18 + 4 and sum(c.cost_s for c in strided) < 0.01


def test_the_strided_cases_call_e2e_fulls_own_functions(monkeypatch):
    """The calibration times the very code of the decode step: each case calls the primitive
    the decoder runs, and what it computes is that function's result on the strided views."""
    import torch

    import rooflinecli.bench.primitives as E
    from rooflinecli.bench.op_cases import kv_write_case, rope_qkv_strided_case, silu_mul_strided_case

    calls: dict[str, list] = {"rope": [], "silu_mul": [], "write_kv": []}
    for name in calls:
        real = getattr(E, name)

        def spy(*a, _real=real, _name=name):
            calls[_name].append(a)
            return _real(*a)

        monkeypatch.setattr(E, name, spy)
    gen = torch.Generator().manual_seed(3)
    q, k = rope_qkv_strided_case(3, 4, 2, 64).make("cpu", gen)()
    assert q.shape == (3, 4, 64) and k.shape == (3, 2, 64) and len(calls["rope"]) == 2
    (xq, cos, sin), (xk, _, _) = calls["rope"]
    assert not xq.is_contiguous() and xq.stride(1) == 64 and xq.stride(0) == (4 + 2 * 2) * 64  # views of the qkv output
    assert xk.data_ptr() == xq.data_ptr() + 4 * 64 * xq.element_size()
    half = 32  # the rotate-half reference, computed here
    ref = xq.float() * cos[:, None].float() + torch.cat((-xq[..., half:], xq[..., :half]), -1).float() * sin[:, None].float()
    torch.testing.assert_close(q.float(), ref, atol=2e-2, rtol=2e-2)

    out = silu_mul_strided_case(5, 96).make("cpu", gen)()
    (gu, F_), = calls["silu_mul"]
    assert F_ == 96 and gu.shape == (5, 192) and out.shape == (5, 96)
    torch.testing.assert_close(out.float(), (torch.nn.functional.silu(gu[:, :96].float()) * gu[:, 96:].float()), atol=3e-2, rtol=3e-2)

    kv_write_case(2, 4, 2, 16, 64).make("cpu", gen)()
    (kc, vc, kn, vn, pos), = calls["write_kv"]
    assert kc.shape == vc.shape == (2, 2, 17, 64) and pos == 16 and kn.is_contiguous() and not vn.is_contiguous()
    assert torch.equal(kc[:, :, 16], kn) and torch.equal(vc[:, :, 16], vn)


# ------------------------------------------------------------------------------------------------
# The achievable model
# ------------------------------------------------------------------------------------------------

CFG = get_model("llama-3-8b")
H, HKV, D, FI = 32, 8, 128, 14336


def _strided_rows():
    """Synthetic rows, deliberately slower than the contiguous curves (what the strided layouts cost)."""
    rows = []
    for T in (1, 8, 32, 64, 512, 2048):
        b = 2 * (2 * T * (H + HKV) * D) + 4 * T * D
        rows.append({"op": "rope_qkv_strided", "shape": {"T": T, "H": H, "KVH": HKV, "D": D}, "flops": 3 * T * (H + HKV) * D, "bytes": b, "t_graph": 30e-6 + b / 1.5e12})
        b = 6 * T * FI
        rows.append({"op": "silu_mul_strided", "shape": {"T": T, "F": FI}, "flops": 5 * T * FI, "bytes": b, "t_graph": 9e-6 + b / 2e12})
    for B in (1, 8, 32, 64):
        b = 8 * B * HKV * D
        rows.append({"op": "kv_write", "shape": {"B": B, "H": H, "KVH": HKV, "N": 512, "D": D}, "flops": 0, "bytes": b, "t_graph": 7e-6 + b / 1e12})
    return rows


def _spec(tmp_path, extra_rows):
    doc = json.loads(FIXTURE.read_text())
    doc["schema"] = SCHEMA
    doc["rows"] += extra_rows
    (tmp_path / "cal.json").write_text(json.dumps(doc))
    p = tmp_path / "lab.toml"
    p.write_text('id = "lab"\nkind = "measured"\nbase = "h200"\n[measured_with]\ncalibration = "cal.json"\n')
    return get_spec(str(p))


def _rows(spec, phase, batch, context):
    wl = Workload(batch=batch, prompt_len=context if phase == "prefill" else 1, gen_len=1)
    return {r["name"]: r for r in predict_step_breakdown(CFG, spec, wl, phase, batch, context, mode="achievable")}


@pytest.mark.parametrize("B", [1, 32])
def test_decode_takes_rope_silu_and_kv_write_from_the_strided_rows(tmp_path, B):
    spec = _spec(tmp_path, _strided_rows())
    assert {r.op for r in calibration_for(spec).rows} >= set(STRIDED_OPS) and calibration_for(spec).notes == ()
    m = models_for(spec)
    rows = _rows(spec, "decode", B, 2048)
    L = CFG.num_layers
    rope = m.linear["rope_qkv_strided"].time_s([1.0, 2.0 * 2 * B * (H + HKV) * D + 4.0 * B * D], (H, HKV, D))[0]
    silu = m.linear["silu_mul_strided"].time_s([1.0, 6.0 * B * FI], (FI,))[0]
    kv = m.linear["kv_write"].time_s([1.0, 8.0 * B * HKV * D], (H, HKV, D))[0]
    assert rows["attn.rope"]["time_s"] == pytest.approx(L * max(rope, m.graph_floor_s))
    assert rows["mlp.act"]["time_s"] == pytest.approx(L * max(silu, m.graph_floor_s))
    assert rows["attn.kv_write"]["time_s"] == pytest.approx(L * max(kv, m.graph_floor_s))
    # the rows fit what they were made from (30 us + bytes / 1.5 TB/s for RoPE at a measured T)
    assert rope == pytest.approx(30e-6 + (4 * B * (H + HKV) * D + 4 * B * D) / 1.5e12, rel=0.02)
    # slower than the contiguous curves of the same calibration: the step gets slower
    (tmp_path / "old").mkdir()
    base = _rows(_spec(tmp_path / "old", []), "decode", B, 2048)
    for name in ("attn.rope", "mlp.act", "attn.kv_write"):
        assert rows[name]["time_s"] > base[name]["time_s"]


def test_prefill_takes_rope_and_silu_from_the_strided_rows_and_the_kv_block_from_the_copy_model(tmp_path):
    spec = _spec(tmp_path, _strided_rows())
    m = models_for(spec)
    S = 512
    rows = _rows(spec, "prefill", 1, S)
    L = CFG.num_layers
    rope = m.linear["rope_qkv_strided"].time_s([1.0, 2.0 * 2 * S * (H + HKV) * D + 4.0 * S * D], (H, HKV, D))[0]
    assert rows["attn.rope"]["time_s"] == pytest.approx(L * rope)
    assert rows["mlp.act"]["time_s"] == pytest.approx(L * m.linear["silu_mul_strided"].time_s([1.0, 6.0 * S * FI], (FI,))[0])
    k = 2.0 * S * HKV * D
    t, t0 = m.linear["copy"].time_s([1.0, 2.0 * (k + k)])
    assert rows["attn.kv_write"]["time_s"] == pytest.approx(L * (t + t0))  # two copy kernels


def test_without_strided_rows_the_contiguous_curves_are_used(tmp_path):
    """An older calibration (the 2026-11-30 fixture): silu_mul at 5/3 of the op's bytes, the K/V
    write from the copy model, as before."""
    spec = _spec(tmp_path, [])
    m = models_for(spec)
    assert not set(STRIDED_OPS) & set(m.linear)
    B = 8
    rows = _rows(spec, "decode", B, 2048)
    L = CFG.num_layers
    silu = m.linear["silu_mul"].time_s([1.0, 5.0 / 3.0 * 6.0 * B * FI], (FI,))[0]
    assert rows["mlp.act"]["time_s"] == pytest.approx(L * max(silu, m.graph_floor_s))
    k = 2.0 * B * HKV * D
    t, t0 = m.linear["copy"].time_s([1.0, 2.0 * (k + k)])
    assert rows["attn.kv_write"]["time_s"] == pytest.approx(L * max(t + t0, 2 * m.graph_floor_s))
    assert "copied" in rows["attn.kv_write"]["note"]
