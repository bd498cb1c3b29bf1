"""``roofline calibrate``: the TOML writer round-trips, the measured spec it writes loads through
``load_spec_file`` (inheriting from its base), a spec that would not load is never written, and the
whole measure -> write path runs on the CPU."""

from __future__ import annotations

import tomllib

import pytest
from typer.testing import CliRunner

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
    assert spec.peak_dense_tflops["fp16"] == base.peak_dense_tflops["fp16"]  # not measured: inherited
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


def test_calibrate_cli_errors_are_one_line(tmp_path):
    r = runner.invoke(app, ["calibrate", "--device", "cpu", "--out", str(tmp_path / "x.toml")])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "pass --base" in r.output
    r = runner.invoke(app, ["calibrate", "--from-results", str(tmp_path / "r.json"), "--measured", "h200"])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "is a datasheet spec" in r.output
