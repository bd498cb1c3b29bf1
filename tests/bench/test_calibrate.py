"""``roofline calibrate``: the TOML writer round-trips, the measured spec it writes loads through
``load_spec_file`` (inheriting from its base), a spec that would not load is never written, and the
whole measure -> write path runs on the CPU."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rooflinecli.achievable.calibration import SCHEMA as CALIBRATION_SCHEMA
from rooflinecli.bench.calibrate import Ceilings, add_efficiency, measured_doc, toml_dumps, write_spec_file
from rooflinecli.cli import app
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import get_spec, load_spec_file

runner = CliRunner()


def test_toml_writer_round_trips_every_shape_spec_files_use():
    doc = {
        "id": "x-measured",
        "name": 'He said "hi" \\ then\nleft\ttab é',
        "count": 3,
        "ratio": 0.1,
        "big": 1e22,
        "whole_float": 4800.0,
        "flag": True,
        "estimates": ["cache.l2_bandwidth_gb_per_s", "memory.type"],
        "peak_dense_tflops": {"bf16": 781.25, "fp8": 1502.0},
        "efficiency": {"gemm": {"memory": 0.86, "compute": 0.78}, "copy": {"memory": 0.93}},
        "measured_with": {"method memory.bandwidth_gb_per_s": "copy_ of 1 GiB", "gpu_name": "NVIDIA H200"},
        "sources": [{"title": "a", "url": "https://example.org/a"}, {"title": "b", "url": "https://example.org/b", "note": "n"}],
    }
    text = toml_dumps(doc, comment="two\nlines")
    assert text.startswith("# two\n# lines\n")
    back = tomllib.loads(text)
    assert back == doc
    assert type(back["whole_float"]) is float and type(back["count"]) is int


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), object()])
def test_toml_writer_refuses_values_toml_cannot_hold(bad):
    with pytest.raises(ValueError):
        toml_dumps({"x": {"y": bad}})


def _env():
    return {"gpu_name": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0", "torch": "2.11.0", "date_utc": "2026-11-29T00:00:00Z"}


def test_measured_spec_writes_loads_and_inherits(tmp_path):
    base = get_spec("h200")
    c = Ceilings(copy_gb_per_s=4312.3456, l2_gb_per_s=9876.5, matmul_tflops={"bf16": 781.2345, "fp8": 1400.0}, methods={"memory.bandwidth_gb_per_s": "copy_"}, skipped={"peak_dense_tflops.fp32": "RuntimeError: no"})
    doc = add_efficiency(measured_doc(base, c, _env()), {"gemm": {"compute": 0.81234, "memory": 0.9}}, {"points": "12"})
    path = tmp_path / "measured" / "h200.toml"
    spec = write_spec_file(path, doc)
    assert spec == load_spec_file(path)
    assert (spec.id, spec.kind, spec.base) == ("h200-measured", "measured", "h200")
    assert spec.memory_bandwidth_gb_per_s == pytest.approx(4312.3456, rel=1e-3)
    assert spec.l2_bandwidth_gb_per_s == pytest.approx(9876.5, rel=1e-3)
    assert spec.peak_dense_tflops["bf16"] == pytest.approx(781.2345, rel=1e-3)
    # not measured: the datasheet figure at its peer's measured / datasheet ratio (fp16 -> bf16), an estimate
    assert spec.peak_dense_tflops["fp16"] == pytest.approx(base.peak_dense_tflops["fp16"] * spec.peak_dense_tflops["bf16"] / base.peak_dense_tflops["bf16"])
    assert spec.is_estimate("peak_dense_tflops.fp16") and "bf16's measured / datasheet ratio" in spec.measured_with["method peak_dense_tflops.fp16"]
    assert spec.memory_capacity_gb == base.memory_capacity_gb and spec.sm_count == base.sm_count
    assert spec.efficiency["gemm"]["compute"] == pytest.approx(0.81234, rel=1e-3)
    assert spec.measured_with["gpu_name"] == "NVIDIA H200" and spec.measured_with["driver"] == "580.159.04"
    assert spec.measured_with["skipped peak_dense_tflops.fp32"].startswith("RuntimeError")
    assert "cache.l2_bandwidth_gb_per_s" not in spec.estimates  # measured now, no longer an estimate
    assert get_spec(str(path)).id == "h200-measured"  # usable anywhere a spec is
    assert sorted(p.name for p in path.parent.iterdir()) == ["h200.toml"]  # no temporary left


def test_a_spec_that_would_not_load_is_not_written(tmp_path):
    doc = measured_doc(get_spec("h200"), Ceilings(copy_gb_per_s=4300.0), _env())
    doc["efficiency"] = {"gemm": {"memory": 3.0}}  # above the validator's 1.5
    path = tmp_path / "s.toml"
    with pytest.raises(RooflineError) as e:
        write_spec_file(path, doc)
    assert "efficiency.gemm.memory" in str(e.value) and "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []
    path.write_text("old")  # an existing file is left as it was
    with pytest.raises(RooflineError):
        write_spec_file(path, doc)
    assert path.read_text() == "old"


def test_measured_doc_needs_a_datasheet_base(tmp_path):
    spec = write_spec_file(tmp_path / "m.toml", measured_doc(get_spec("h200"), Ceilings(copy_gb_per_s=4000.0), _env()))
    with pytest.raises(RooflineError, match="datasheet"):
        measured_doc(spec, Ceilings(), _env())


def test_calibrate_cli_measures_on_cpu_and_writes_a_loadable_spec(tmp_path):
    out = tmp_path / "cpu.toml"
    r = runner.invoke(app, ["calibrate", "--device", "cpu", "--base", "h200", "--id", "cpu-test", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.output and "measured ceilings vs h200" in r.output
    spec = load_spec_file(out)
    assert spec.id == "cpu-test" and spec.kind == "measured"
    assert 0 < spec.memory_bandwidth_gb_per_s < get_spec("h200").memory_bandwidth_gb_per_s
    assert spec.peak_dense_tflops["bf16"] > 0 and "method peak_dense_tflops.bf16" in spec.measured_with
    assert "method memory.bandwidth_gb_per_s" in spec.measured_with
    # the read-only ceiling: a bound beside the copy figure, not what predictions use
    assert float(spec.measured_with["read memory.bandwidth_gb_per_s"]) > 0
    assert "torch.sum" in spec.measured_with["method read memory.bandwidth_gb_per_s"]
    from rooflinecli.ceilings import bound_spec

    b = bound_spec(spec)
    assert b.memory_bandwidth_gb_per_s == pytest.approx(max(spec.memory_bandwidth_gb_per_s, float(spec.measured_with["read memory.bandwidth_gb_per_s"]),
                                                            float(spec.measured_with["burst memory.bandwidth_gb_per_s"])), rel=1e-9)


def test_calibrate_cli_errors_are_one_line(tmp_path):
    r = runner.invoke(app, ["calibrate", "--device", "cpu", "--out", str(tmp_path / "x.toml")])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "pass --base" in r.output
    run2 = Path(__file__).resolve().parents[2] / "reports" / "h200-2026-11-30-run2" / "results.json"
    r = runner.invoke(app, ["calibrate", "--from-results", str(run2), "--measured", "h200"])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "is a datasheet spec" in r.output
    r = runner.invoke(app, ["calibrate", "--from-results", str(tmp_path / "r.json"), "--measured", "h200"])  # read first
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "no such results file" in r.output


# ---- burst and sustained ceilings, the op grid and its calibration file -------------------------

FIXTURE_OPS = json.loads((Path(__file__).parent.parent / "fixtures" / "h200-2026-11-30" / "torch-op-timings.json").read_text())["rows"]


def test_calibrate_cli_writes_sustained_ceilings_burst_beside_and_a_calibration_file(tmp_path):
    out = tmp_path / "m" / "cpu.toml"
    r = runner.invoke(app, ["calibrate", "--device", "cpu", "--base", "h200", "--out", str(out)])
    assert r.exit_code == 0, r.output
    spec = load_spec_file(out)
    mw = spec.measured_with
    # sustained figures are the ceilings; the burst ones are kept beside them, the methods say so
    assert float(mw["sustained peak_dense_tflops.bf16"]) == pytest.approx(spec.peak_dense_tflops["bf16"], rel=1e-3)
    assert float(mw["sustained memory.bandwidth_gb_per_s"]) == pytest.approx(spec.memory_bandwidth_gb_per_s, rel=1e-3)
    assert float(mw["burst peak_dense_tflops.bf16"]) > 0 and float(mw["burst memory.bandwidth_gb_per_s"]) > 0
    assert "sustained" in mw["method peak_dense_tflops.bf16"] and "burst" in mw["method peak_dense_tflops.bf16"]
    cal_path = out.with_name("cpu.calibration.json")
    named = getattr(spec, "calibration", None) or mw.get("calibration")
    assert str(named).endswith("cpu.calibration.json") and cal_path.is_file()
    cal = json.loads(cal_path.read_text())
    assert cal["schema"] == CALIBRATION_SCHEMA
    assert set(cal) >= {"created_utc", "gpu", "environment", "method", "l2_bytes", "rows", "sustained"}
    assert set(cal["environment"]) >= {"gpu_name", "torch", "date_utc", "device"}
    assert set(cal["sustained"]) == {"gemm_bf16_tflops", "copy_gb_per_s"} and all(v > 0 for v in cal["sustained"].values())
    fixture_keys = {(r["op"], tuple(sorted(r["shape"]))) for r in FIXTURE_OPS}
    ops = {r["op"] for r in cal["rows"]}
    assert {"launch_floor", "gemm", "rmsnorm_copy", "add_", "silu_mul", "copy", "sdpa_prefill_causal", "sdpa_decode", "gemm_sustained", "rope", "copy_sustained"} <= ops
    for row in cal["rows"]:
        if row["op"] in {op for op, _ in fixture_keys}:  # the fixture's op names with its shape keys
            assert (row["op"], tuple(sorted(row["shape"]))) in fixture_keys, row
        if "t_series" in row:
            assert len(row["t_series"]) >= 3 and all(t > 0 for t in row["t_series"])
            continue
        assert row["t_graph"] > 0 and row["t_eager"] > 0 and row["n"] >= 1 and row["sets"] >= 1 and row["bytes"] > 0
        if row["op"].startswith("sdpa"):
            assert row["backend"] in ("cudnn", "flash", "efficient", "default") or "expanded" in row["backend"]
    gemm = [r for r in cal["rows"] if r["op"] == "gemm"]
    assert all(r["flops"] == 2 * r["shape"]["M"] * r["shape"]["N"] * r["shape"]["K"] for r in gemm) and all(r["name"] for r in gemm)
    assert cal["failed"] == [] and cal["grid"]["skipped_for_budget"] == 0


def test_calibrate_no_ops_writes_no_calibration_file(tmp_path):
    out = tmp_path / "cpu.toml"
    r = runner.invoke(app, ["calibrate", "--device", "cpu", "--base", "h200", "--out", str(out), "--no-ops"])
    assert r.exit_code == 0, r.output
    assert not out.with_name("cpu.calibration.json").exists()
    assert "calibration" not in load_spec_file(out).measured_with


def test_grid_projection_shapes_come_from_the_presets():
    from rooflinecli.bench.opgrid import M_GRID, build_grid, projection_shapes
    from rooflinecli.model_registry import get_model

    assert projection_shapes(get_model("llama-3-8b")) == [("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096), ("down", 4096, 14336), ("lm_head", 128256, 4096)]
    grid = build_grid()
    names = {(c.name, c.shape["N"], c.shape["K"]) for c in grid["gemm"]}
    assert ("qwen7b.qkv", (28 + 8) * 128, 3584) in names and ("llama70b.down", 8192, 28672) in names
    assert sorted(c.shape["M"] for c in grid["gemm"] if c.name == "llama8b.o") == list(M_GRID)
    for fx in FIXTURE_OPS:  # every GEMM of the H200 fixture is on the grid, under the same name
        if fx["op"] == "gemm" and fx.get("name") != "square":
            assert (fx["name"], fx["shape"]["N"], fx["shape"]["K"]) in names
    assert {c.shape["D"] for c in grid["prefill"]} == {64, 128} and max(c.shape["S"] for c in grid["prefill"]) == 8192


def test_sets_and_launches_follow_the_one_cold_cache_rule_and_a_replay_target():
    from rooflinecli.bench.opgrid import MAX_LAUNCHES, MAX_SETS, launches_for, sets_for
    from rooflinecli.bench.timing import COLD_L2_MULTIPLE, COLD_MAX_SETS, cold_sets

    l2 = 60 * 2**20
    assert COLD_L2_MULTIPLE == 4 and MAX_SETS == COLD_MAX_SETS and sets_for(50e6, l2) == cold_sets(50e6, l2)
    assert sets_for(50e6, l2) * 50e6 >= 4 * l2 and (sets_for(50e6, l2) - 1) * 50e6 < 4 * l2
    assert sets_for(10, l2) == MAX_SETS and sets_for(4e9, l2) == 1
    assert launches_for(1e-6, 4) == MAX_LAUNCHES and launches_for(50e-3, 1) == 1 and launches_for(1e-3, 8) == 8


def test_a_failing_shape_is_recorded_and_the_grid_goes_on_and_the_budget_stops_new_shapes():
    from rooflinecli.bench.op_cases import Case
    from rooflinecli.bench.opgrid import build_grid, run_grid

    def broken(device, gen):
        def fn():
            raise RuntimeError("boom\nsecond line")

        return fn

    grid = build_grid(tiny=True)
    grid["gemm"].insert(0, Case("gemm", {"M": 1, "N": 2, "K": 3}, 12.0, 24.0, 24.0, broken, name="bad"))
    res = run_grid(grid, "cpu", 4 * 2**20, budget_s=60)
    assert res.failed == [{"op": "gemm", "shape": {"M": 1, "N": 2, "K": 3}, "error": "RuntimeError: boom second line"}]
    assert len(res.rows) == sum(len(v) for v in grid.values()) - 1 and res.skipped == 0
    cut = run_grid(build_grid(tiny=True), "cpu", 4 * 2**20, budget_s=1e-9)
    assert len(cut.rows) <= 1 and cut.skipped >= sum(len(v) for v in grid.values()) - 2


def test_steady_state_is_the_second_half_of_a_throttling_series():
    from rooflinecli.bench.calibrate import steady_state_s

    series = [1.41e-3] * 10 + [1.65e-3] * 10
    assert steady_state_s(series) == pytest.approx(1.65e-3)
    fixture = next(r for r in FIXTURE_OPS if r["op"] == "gemm_sustained")
    tflops = fixture["flops"] / steady_state_s(fixture["t_series"]) / 1e12
    assert 560 < tflops < 700  # the issue: 585-650 sustained against ~790 burst


@pytest.mark.parametrize("args, msg", [(["--budget-s", "0"], "--budget-s"), (["--sustained-s", "-1"], "--sustained-s")])
def test_calibrate_bad_budgets_are_one_line(tmp_path, args, msg):
    r = runner.invoke(app, ["calibrate", "--device", "cpu", "--base", "h200", "--out", str(tmp_path / "x.toml"), *args])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and msg in r.output


def test_the_efficiency_fit_keeps_the_calibration_reference(tmp_path):
    from rooflinecli.bench.calibrate import set_calibration

    fixture = Path(__file__).parent.parent / "fixtures" / "h200-2026-11-30" / "torch-op-timings.json"
    (tmp_path / "h200.calibration.json").write_text(fixture.read_text())  # a loader that opens it finds one
    doc = set_calibration(measured_doc(get_spec("h200"), Ceilings(copy_gb_per_s=4300.0), _env()), "h200.calibration.json")
    doc = add_efficiency(doc, {"gemm": {"memory": 0.9}}, {"points": "3"})
    spec = write_spec_file(tmp_path / "h200.toml", doc)
    named = getattr(spec, "calibration", None) or spec.measured_with.get("calibration")
    assert str(named).endswith("h200.calibration.json") and spec.efficiency["gemm"]["memory"] == pytest.approx(0.9)


def test_grid_checkpoints_while_it_runs():
    from rooflinecli.bench.opgrid import build_grid, run_grid

    seen = []
    res = run_grid(build_grid(tiny=True), "cpu", 4 * 2**20, budget_s=60, on_checkpoint=lambda r: seen.append(len(r.rows) + len(r.failed)), checkpoint_every_s=0)
    assert seen == list(range(1, len(res.rows) + 1))


def test_a_calibration_killed_mid_grid_leaves_the_spec_and_a_loadable_calibration_file(tmp_path, monkeypatch):
    from rooflinecli.bench import opgrid

    def killed(*a, **k):
        raise KeyboardInterrupt  # what a stage timeout's SIGTERM amounts to, mid-grid

    monkeypatch.setattr(opgrid, "run_grid", killed)
    out = tmp_path / "cpu.toml"
    r = runner.invoke(app, ["calibrate", "--device", "cpu", "--base", "h200", "--out", str(out)])
    assert r.exit_code != 0
    spec = load_spec_file(out)  # the ceilings are on disk
    assert spec.peak_dense_tflops["bf16"] > 0
    cal = json.loads(out.with_name("cpu.calibration.json").read_text())
    assert cal["schema"] == CALIBRATION_SCHEMA and {r["op"] for r in cal["rows"]} == {"gemm_sustained", "copy_sustained"}
