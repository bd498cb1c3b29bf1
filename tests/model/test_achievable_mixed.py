"""The graph's per-kernel switch cost: the mixed-kernel microbenchmarks of the op grid
(``launch_floor_mixed``, ``launch_floor_mixed_gemm``), their calibration rows, the fitted switch
cost, and what it adds to a decode step (graph) but not to an eager prefill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflinecli.achievable import calibration_for, models_for
from rooflinecli.predict import predict_step_breakdown
from rooflinecli.achievable.calibration import SCHEMA, parse_calibration
from rooflinecli.achievable.fit import MIXED_OPS, graph_switch_costs_s
from rooflinecli.achievable.profiles import ENGINES
from rooflinecli.analysis import Workload
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model

ROOT = Path(__file__).resolve().parents[2]
#: the shipped calibration of the full H200 run: it has the strided rows (RoPE, silu*mul and the KV
#: write timed as the decode step runs them) and rmsnorm, so every torch-engine row takes its
#: calibrated path
CALIBRATION = ROOT / "hardware_specs" / "measured" / "h200-calibration.json"
CFG = get_model("llama-3-8b")

# ------------------------------------------------------------------------------------------------
# The op grid
# ------------------------------------------------------------------------------------------------


def test_the_mixed_cases_are_in_the_grid_and_early_in_the_round_robin():
    from rooflinecli.bench.opgrid import MIXED_K, build_grid, round_robin

    for tiny in (False, True):
        grid = build_grid(tiny=tiny)
        assert list(grid)[:2] == ["floor", "floor_mixed"]
        mixed = grid["floor_mixed"]
        assert sorted(c.shape["k"] for c in mixed if c.op == "launch_floor_mixed") == list(MIXED_K) == [2, 4, 8]
        assert sorted((c.shape["N"], c.shape) for c in mixed if c.op == "launch_floor_mixed_gemm") == [
            (256, {"k": 2, "M": 1, "N": 256, "K": 256}), (4096, {"k": 2, "M": 1, "N": 4096, "K": 4096})]
        order = list(round_robin(grid))
        # one mixed case per round of the categories: all five within the first five rounds
        assert max(i for i, c in enumerate(order) if c.op in MIXED_OPS) < 5 * len(grid)
        # cheap: 2 graphs x 128 launches of at most the 14 us GEMM + an add, all five cases
        gemm = next(c for c in mixed if c.shape.get("N") == 4096)
        assert gemm.bytes == 2 * (4096 + 4096 * 4096 + 4096) + 8 and 2 * 128 * (gemm.bytes / 3e12 + 2e-6) < 0.01


def _inputs(fn) -> dict:
    """The tensors a kernel's closure holds (its inputs), by name."""
    return dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))


def test_the_mixed_kernels_are_distinct_single_torch_ops_that_run_repeatedly():
    """Each of the eight kernels runs on the CPU on random inputs and computes what its name says;
    running them again (as the graph does, hundreds of times) keeps every input finite."""
    import torch
    import torch.nn.functional as F

    from rooflinecli.bench.op_cases import MIXED_KERNELS, launch_floor_mixed_case

    gen = torch.Generator().manual_seed(5)
    fns = launch_floor_mixed_case(8).make_kernels("cpu", gen)
    assert len(fns) == len(set(MIXED_KERNELS)) == 8
    k = dict(zip(MIXED_KERNELS, fns))
    assert k["add_1"]().item() == 2.0  # x.add_(1) on one float of 1
    x, w = _inputs(k["rms_norm_4096"])["x"], _inputs(k["rms_norm_4096"])["w"]
    assert x.std() > 0.5  # random, not zeros
    torch.testing.assert_close(k["rms_norm_4096"]().float(), (x.float() * torch.rsqrt(x.float().pow(2).mean() + 1e-6) * w.float()), atol=3e-2, rtol=3e-2)
    i = _inputs(k["mul_4096"])
    torch.testing.assert_close(k["mul_4096"]().float(), (i["x"].float() * i["y"].float()), atol=3e-2, rtol=3e-2)
    i = _inputs(k["copy_4096"])
    assert not torch.equal(i["x"], i["y"]) and torch.equal(k["copy_4096"](), i["x"])
    torch.testing.assert_close(k["silu_4096"]().float(), F.silu(_inputs(k["silu_4096"])["x"].float()), atol=3e-2, rtol=3e-2)
    i = _inputs(k["index_copy_kv"])
    assert torch.equal(k["index_copy_kv"]()[:, :, 5:6], i["new"]) and i["pos"].tolist() == [5]
    assert torch.equal(k["neg_4096"](), -_inputs(k["neg_4096"])["x"])
    i = _inputs(k["add_4096"])
    torch.testing.assert_close(k["add_4096"]().float(), i["x"].float() + i["y"].float(), atol=3e-2, rtol=3e-2)
    for _ in range(50):
        for f in fns:
            f()
    assert all(torch.isfinite(f().float()).all() for f in fns)


def test_measure_mixed_times_interleaved_and_grouped_graphs_of_the_same_kernels(monkeypatch):
    """On the CUDA path (graph capture replaced by a recorder): two graphs of MAX_LAUNCHES // k * k
    launches of the same k kernels, the first interleaved (A B A B ...), the second grouped
    (A A ... B B ...); the row carries both per-kernel times."""
    import torch

    from rooflinecli.bench import op_cases, opgrid, timing

    captured = []

    def capture(fns, launches):
        captured.append([fns[i % len(fns)] for i in range(launches)])
        return object()

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(timing, "capture_graph", capture)
    # per-launch seconds of the replays: 3 us interleaved, 2 us grouped
    monkeypatch.setattr(timing, "replay_samples", lambda g, n, samples: [3e-6 if len(captured) == 1 else 2e-6] * samples)
    monkeypatch.setattr(opgrid.Timer, "eager", lambda self, fns, samples: 7e-6)
    timer = opgrid.Timer("cuda", 60 * 2**20, tensor_device="cpu")
    case = op_cases.launch_floor_mixed_case(4)
    row = opgrid.measure_case(case, timer, torch.Generator().manual_seed(1))
    assert row["op"] == "launch_floor_mixed" and row["shape"] == {"k": 4} and row["sets"] == 4
    assert row["n"] == 128 and row["t_graph"] == pytest.approx(3e-6) and row["t_blocked"] == pytest.approx(2e-6) and row["t_eager"] == 7e-6
    inter, grouped = captured
    assert len(inter) == len(grouped) == 128 and set(inter) == set(grouped) and len(set(inter)) == 4
    assert all(inter[i] is not inter[i + 1] for i in range(127))  # every launch follows a different kernel
    assert sum(grouped[i] is not grouped[i + 1] for i in range(127)) == 3  # three switches in all
    # the calibration reader takes the row as written
    cal = parse_calibration(_doc([row]), "cal.json")
    (r,) = cal.of("launch_floor_mixed")
    assert r.t_blocked_s == pytest.approx(2e-6) and r.t_graph_s == pytest.approx(3e-6)


# ------------------------------------------------------------------------------------------------
# Calibration rows and the fit
# ------------------------------------------------------------------------------------------------


def _doc(extra_rows):
    doc = json.loads(CALIBRATION.read_text())
    doc["schema"] = SCHEMA
    doc["rows"] += extra_rows
    return doc


def _mixed(k, t_graph, t_blocked=None):
    r = {"op": "launch_floor_mixed", "shape": {"k": k}, "flops": 0, "bytes": 0, "t_graph": t_graph, "t_eager": 2e-5, "n": 128, "sets": k}
    if t_blocked is not None:
        r["t_blocked"] = t_blocked
    return r


def _mixed_gemm(t_graph, t_blocked=None, nk=256):
    r = {"op": "launch_floor_mixed_gemm", "shape": {"k": 2, "M": 1, "N": nk, "K": nk}, "flops": 0, "bytes": 0, "t_graph": t_graph, "t_eager": 3e-5, "n": 128, "sets": 2}
    if t_blocked is not None:
        r["t_blocked"] = t_blocked
    return r


#: synthetic: 8 distinct kernels cost 1.3 us more each interleaved; a GEMM next to an add 0.8 us
SWITCH_S, SWITCH_GEMM_S = 1.3e-6, 0.8e-6
ROWS = [_mixed(2, 1.5e-6, 1.2e-6), _mixed(4, 2.0e-6, 1.25e-6), _mixed(8, 1.2e-6 + SWITCH_S, 1.2e-6), _mixed_gemm(3.2e-6 + SWITCH_GEMM_S, 3.2e-6),
        _mixed_gemm(8.0e-6, 7.9e-6, nk=4096)]  # the decode-sized GEMM: a diagnostic the fit leaves out


def test_a_bad_t_blocked_is_one_line_naming_the_row():
    with pytest.raises(RooflineError, match=r"rows\[\d+\] \(launch_floor_mixed\): t_blocked: must be a positive finite number"):
        parse_calibration(_doc([_mixed(2, 1e-6, -1.0)]), "cal.json")
    with pytest.raises(RooflineError, match=r"launch_floor_mixed_gemm\): shape.N: missing"):
        parse_calibration(_doc([{**_mixed_gemm(1e-6), "shape": {"k": 2, "M": 1, "K": 256}}]), "cal.json")


def test_the_switch_cost_is_interleaved_minus_grouped_at_the_largest_k():
    cal = parse_calibration(_doc(ROWS), "cal.json")
    floor = min(r.t_graph_s for r in cal.of("launch_floor"))
    assert graph_switch_costs_s(list(cal.rows), floor) == pytest.approx((SWITCH_S, SWITCH_GEMM_S))
    # without t_blocked the repeat floor subtracted is the launch floor's
    rows = list(parse_calibration(_doc([_mixed(8, 2.5e-6), _mixed_gemm(4e-6)]), "c").rows)
    assert graph_switch_costs_s(rows, floor) == pytest.approx((2.5e-6 - floor, 4e-6 - floor))
    # no GEMM row: GEMMs get the elementwise figure; interleaved faster than grouped (noise): 0
    rows = list(parse_calibration(_doc([_mixed(8, 1.0e-6, 1.1e-6)]), "c").rows)
    assert graph_switch_costs_s(rows, floor) == (0.0, 0.0)
    rows = list(parse_calibration(_doc([_mixed(4, 2.0e-6, 1.5e-6)]), "c").rows)
    assert graph_switch_costs_s(rows, floor) == pytest.approx((0.5e-6, 0.5e-6))
    # no mixed rows: nothing added (today's model)
    assert graph_switch_costs_s(list(parse_calibration(_doc([]), "c").rows), floor) == (0.0, 0.0)


def test_the_mixed_rows_leave_the_other_fits_alone(tmp_path):
    """The floor, the host costs and every op model are the same with and without the mixed rows."""
    from rooflinecli.achievable.fit import fit_models

    old, new = fit_models(parse_calibration(_doc([]), "a")), fit_models(parse_calibration(_doc(ROWS), "b"))
    assert (new.graph_floor_s, new.eager_launch_s, new.eager_call_s) == (old.graph_floor_s, old.eager_launch_s, old.eager_call_s)
    assert set(new.linear) == set(old.linear) and (old.graph_switch_s, old.graph_switch_gemm_s) == (0.0, 0.0)
    assert new.to_dict()["graph_switch_s"] == pytest.approx(SWITCH_S) and new.to_dict()["graph_switch_gemm_s"] == pytest.approx(SWITCH_GEMM_S)
    cal = parse_calibration(_doc(ROWS), "b")
    r8 = next(r for r in cal.of("launch_floor_mixed") if r.shape["k"] == 8)
    assert new.row_time_s(r8) == pytest.approx(r8.t_graph_s)


# ------------------------------------------------------------------------------------------------
# The decode step
# ------------------------------------------------------------------------------------------------


def _spec(tmp_path, extra_rows):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cal.json").write_text(json.dumps(_doc(extra_rows)))
    p = tmp_path / "lab.toml"
    p.write_text('id = "lab"\nkind = "measured"\nbase = "h200"\n[measured_with]\ncalibration = "cal.json"\n')
    return get_spec(str(p))


def _rows(spec, phase, batch, context, engine):
    wl = Workload(batch=batch, prompt_len=context if phase == "prefill" else 1, gen_len=1)
    return {r["name"]: r for r in predict_step_breakdown(CFG, spec, wl, phase, batch, context, mode="achievable", engine=engine)}


def _switches(rows, engine):
    """(elementwise, GEMM) kernel switches per step the calibration's op rows lack: every kernel,
    except the torch engine's RoPE and silu*mul (their calls start and end on different kernels,
    so they switched at every kernel when calibrated) and one of the KV write's two copies."""
    p = ENGINES[engine]
    skip = {"attn.rope": p.rope_kernels, "mlp.act": p.act_kernels, "attn.kv_write": p.kv_write_kernels - 1} if engine == "torch" else {}
    gemm = sum(r["kernels"] * r["layers"] for r in rows.values() if r["kind"] == "gemm")
    elem = sum((r["kernels"] - skip.get(n, 0)) * r["layers"] for n, r in rows.items() if r["kind"] != "gemm")
    return elem, gemm


@pytest.mark.parametrize("engine", ["torch", "fused"])
@pytest.mark.parametrize("B", [1, 64])
def test_the_decode_step_grows_by_the_switch_cost_times_its_kernels(tmp_path, engine, B):
    base = _rows(_spec(tmp_path / "base", []), "decode", B, 2048, engine)
    spec = _spec(tmp_path / "mixed", ROWS)
    assert models_for(spec).graph_switch_s == pytest.approx(SWITCH_S) and calibration_for(spec).notes == ()
    rows = _rows(spec, "decode", B, 2048, engine)
    assert rows.keys() == base.keys()
    elem, gemm = _switches(base, engine)
    kernels = sum(r["kernels"] * r["layers"] for r in base.values())
    assert kernels > (23 if engine == "torch" else 9) * CFG.num_layers and gemm == 4 * CFG.num_layers + 1  # qkv, o, gate_up, down per layer; the lm_head
    assert elem + gemm == (kernels - (10 + 2 + 1) * CFG.num_layers if engine == "torch" else kernels)
    grow = sum(r["time_s"] for r in rows.values()) - sum(r["time_s"] for r in base.values())
    assert grow == pytest.approx(elem * SWITCH_S + gemm * SWITCH_GEMM_S, rel=1e-9)
    L = CFG.num_layers
    for name, r in rows.items():  # per row: the switches of its kernels, also inside its fixed cost
        per = SWITCH_GEMM_S if r["kind"] == "gemm" else SWITCH_S
        n = r["kernels"] * r["layers"] - ({"attn.rope": L * ENGINES[engine].rope_kernels, "mlp.act": L * ENGINES[engine].act_kernels,
                                            "attn.kv_write": L * (ENGINES[engine].kv_write_kernels - 1)}.get(name, 0) if engine == "torch" else 0)
        assert r["time_s"] - base[name]["time_s"] == pytest.approx(n * per, rel=1e-6, abs=1e-12), name
        assert r["fixed_s"] - base[name]["fixed_s"] == pytest.approx(n * per, rel=1e-6, abs=1e-12), name
    if engine == "torch":  # RoPE and silu*mul gain nothing, the KV write one switch per layer
        assert rows["attn.rope"]["time_s"] == base["attn.rope"]["time_s"] and rows["mlp.act"]["time_s"] == base["mlp.act"]["time_s"]


def test_an_eager_prefill_pays_no_graph_switches(tmp_path):
    base = _rows(_spec(tmp_path / "base", []), "prefill", 1, 512, "torch")
    rows = _rows(_spec(tmp_path / "mixed", ROWS), "prefill", 1, 512, "torch")
    assert {n: r["time_s"] for n, r in rows.items()} == {n: r["time_s"] for n, r in base.items()}
