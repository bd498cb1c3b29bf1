"""scripts/moe_rows_from_bench.py: the shipped calibration's moe_grouped rows are what it makes of
run 2's bench rows; it refuses a calibration that has such rows, and results of another GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent
RUN2 = ROOT / "reports" / "h200-2026-11-30-run2" / "results.json"
SHIPPED = ROOT / "hardware_specs" / "measured" / "h200-calibration.json"


@pytest.fixture(scope="module")
def tool():
    return load_script("moe_rows_from_bench")


def test_it_rebuilds_the_shipped_rows_and_refuses_to_add_them_twice(tool, tmp_path, capsys):
    doc = json.loads(SHIPPED.read_text())
    shipped = [r for r in doc["rows"] if r["op"] == "moe_grouped"]
    doc["rows"] = [r for r in doc["rows"] if r["op"] != "moe_grouped"]
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(doc))
    assert tool.main([str(RUN2), str(cal)]) == 0
    made = [r for r in json.loads(cal.read_text())["rows"] if r["op"] == "moe_grouped"]
    assert len(made) == len(shipped) == 10
    for a, b in zip(made, shipped):
        assert {k: a[k] for k in ("shape", "flops", "bytes", "t_graph")} == {k: b[k] for k in ("shape", "flops", "bytes", "t_graph")}
    # the bytes count the experts each case really touched: Mixtral at 4 tokens hit 5 of 8, not 5.47
    t4 = next(r for r in made if r["shape"]["E"] == 8 and r["shape"]["T"] == 4)
    assert t4["bytes"] == pytest.approx(5 * 3 * 4096 * 14336 * 2, rel=0.01)
    before = cal.read_text()
    assert tool.main([str(RUN2), str(cal)]) == 2
    assert "already has moe_grouped rows" in capsys.readouterr().err and cal.read_text() == before


def test_results_of_another_gpu_are_refused(tool, tmp_path, capsys):
    doc = json.loads(SHIPPED.read_text())
    doc["rows"] = [r for r in doc["rows"] if r["op"] != "moe_grouped"]
    doc["gpu"] = "NVIDIA H100 80GB HBM3"
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(doc))
    assert tool.main([str(RUN2), str(cal)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "measured on 'NVIDIA H200'" in err and "\n" not in err.strip()
