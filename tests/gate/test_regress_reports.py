"""``roofline regress`` on every results file under reports/ (the committed CPU-interpreter sample
runs, and real GPU runs when committed, whatever their file names) and on a realistic synthetic run,
so this test is never vacuous: a run against itself passes (exit 0); the same run with one kernel's
samples slowed by 20% fails (exit 1), with exactly that kernel flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rooflinecli import stats
from rooflinecli.cli import app
from rooflinecli.gate.decision import instability
from rooflinecli.gate.sim import slow_down, synthetic_results
from rooflinecli.results import SCHEMA, load_results

REPO = Path(__file__).resolve().parents[2]


def _is_results_file(p: Path) -> bool:
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
        return d.get("schema") == SCHEMA and bool(d.get("rows"))  # e2e.json holds whole models, no kernel rows
    except (ValueError, AttributeError, OSError):
        return False


#: every committed run under reports/ whatever its name (bench writes results.json, the gate
#: gate-run*.json), told apart from other JSON by its schema; pooled baselines are not runs
REAL = sorted(p for p in (REPO / "reports").rglob("*.json") if "baselines" not in p.parts and _is_results_file(p))
SYNTHETIC = "synthetic-h200"

runner = CliRunner()


def _source(tmp_path: Path, which: str) -> Path:
    if which == SYNTHETIC:
        path = tmp_path / "synthetic_results.json"
        synthetic_results(seed=42, n_samples=20).save(path)
        return path
    return REPO / which


def _target_row(res):
    """The row to slow: a Triton row whose 20% slowdown must count: >= 10 samples, >= 10 us, noise
    under 8% (so 2 x noise < 20%), and no sample 20% above another, so that the slowed samples all
    lie above the originals (with 10 samples one outlier above them all would cap the U test at
    p ~ 5e-4, which Holm over this file's rows may lift above 0.01: inconclusive, see
    docs/regress.md), and stable (not bimodal, not host-timed: an unstable row's slowdown is shown,
    not failed); the least noisy of those."""
    ok = [r for r in res.rows if r.impl == "triton" and r.correct and len(r.samples_s) >= 10 and r.p50_s >= 10e-6
          and float(stats.relative_iqr(r.samples_s)) < 0.08 and max(r.samples_s) < 1.2 * min(r.samples_s)
          and not instability(r, r, float(stats.relative_iqr(r.samples_s)), float(stats.relative_iqr(r.samples_s)))]  # stable
    assert ok, (f"{res.path}: no Triton row with >= 10 samples, >= 10 us, IQR/median < 8% and a spread under 20%: "
                "the gate cannot judge this run")
    return min(ok, key=lambda r: float(stats.relative_iqr(r.samples_s)))


@pytest.mark.parametrize("which", [SYNTHETIC] + [str(p.relative_to(REPO)) for p in REAL])
def test_regress_on_results_file(which, tmp_path):
    path = _source(tmp_path, which)
    res = load_results(path)

    self_json = tmp_path / "self.json"
    r = runner.invoke(app, ["regress", str(path), str(path), "-q", "--json", str(self_json)])
    # a run against itself has no regression; only a Triton row that failed its correctness check
    # (stored untimed) may fail the gate, as "failed"; a row may be unstable (its own samples are
    # bimodal or host-timed, whatever they are compared with) but its timing verdict is pass
    failed = {r_.key for r_ in res.rows if r_.impl == "triton" and not r_.samples_s}
    rows = json.loads(self_json.read_text())["rows"]
    verdicts = {(x["op"], x["impl"], x["shape"], x["dtype"]): x["verdict"] for x in rows}
    assert {k for k, v in verdicts.items() if v not in ("pass", "unstable")} == failed
    for x in rows:
        if x["verdict"] == "unstable":
            assert x["timing_verdict"] == "pass" and "spread changed" not in x["unstable_reason"], x
    assert r.exit_code == (1 if failed else 0), r.output
    assert "0 regression(s)" in r.output

    target = _target_row(res)
    slowed = tmp_path / "slowed.json"
    slow_down(res, 1.2, keys=[target.key]).save(slowed)
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["regress", str(path), str(slowed), "--json", str(out), "-q"])
    assert r.exit_code == 1, r.output
    data = json.loads(out.read_text())
    flagged = [(x["op"], x["impl"], x["shape"], x["dtype"]) for x in data["rows"] if x["verdict"] == "regression"]
    assert flagged == [target.key]
    assert data["rows"][0]["rel_change"] == pytest.approx(0.2, rel=1e-9)


def test_synthetic_file_is_a_valid_realistic_results_file(tmp_path):
    path = _source(tmp_path, SYNTHETIC)
    res = load_results(path)
    assert res.gpu_name == "NVIDIA H200"
    assert {r.impl for r in res.rows} == {"triton", "torch"}
    assert all(len(r.samples_s) == 20 and r.p20_s <= r.p50_s <= r.p80_s for r in res.rows)
    assert all(0.0 < float(stats.relative_iqr(r.samples_s)) < 0.1 for r in res.rows)
