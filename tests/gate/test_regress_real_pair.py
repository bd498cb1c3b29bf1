"""The gate on real data: two ``roofline bench`` runs of the SAME commit on one H200
(tests/fixtures/h200-2026-11-30/results.json and bench-run2-results.json). Nothing changed between
them, so the gate must report no regression; before the ``unstable`` verdict it reported 5, all on
rows whose plain-event timings were host time. A 20% slowdown injected into any stable row must
still be a regression, and only that row."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.gate.decision import GateParams, compare
from rooflinecli.gate.sim import slow_down
from rooflinecli.results import load_results

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "h200-2026-11-30"
BASE, CAND = FIX / "results.json", FIX / "bench-run2-results.json"
runner = CliRunner()

#: the five rows the gate called regressions before (Triton rows, default --impl)
FORMER_REGRESSIONS = {
    ("moe", "triton", "T1-E128-k8-d2048-I768", "bf16"),
    ("gemm", "triton", "M1-N8192-K8192", "bf16"),
    ("decode_attention", "triton", "B1-H32-Hkv8-N131072-D128", "bf16"),
    ("gemm", "triton", "M2-N8192-K8192", "bf16"),
    ("moe", "triton", "T1-E8-k2-d4096-I14336", "bf16"),
}


@pytest.fixture(scope="module")
def pair():
    return load_results(BASE), load_results(CAND)


@pytest.fixture(scope="module")
def report(pair):
    return compare(*pair)


def test_same_commit_has_no_regression(report):
    assert report.count("regression") == 0 and report.exit_code == 0
    assert report.counts == {"failed": 0, "regression": 0, "unstable": 20, "config-changed": 0, "inconclusive": 8, "improvement": 0, "pass": 26}
    by_key = {c.key: c for c in report.comparisons}
    for key in FORMER_REGRESSIONS:
        c = by_key[key]
        # the timing rule alone still says regression (41-133% slower); the samples say why not to believe it
        assert c.verdict == "unstable" and c.timing_verdict == "regression" and c.rel_change > 0.4, c
    # decode B1: the baseline is GPU-tight (IQR/median 1.1%), the candidate host-timed (13.6%)
    assert by_key[("decode_attention", "triton", "B1-H32-Hkv8-N131072-D128", "bf16")].unstable_reason.startswith("spread changed 12.2x (IQR/median 1.1% -> 13.6%)")
    # the others: plain CUDA events with 9-25% spread on both sides, the signature of host time
    gemm_m1 = by_key[("gemm", "triton", "M1-N8192-K8192", "bf16")].unstable_reason
    assert "baseline host-timed: plain CUDA events with IQR/median 24.8%" in gemm_m1 and "candidate host-timed" in gemm_m1


def test_every_stable_row_slowed_20pct_is_a_regression(pair, report):
    base, cand = pair
    stable = [c.key for c in report.comparisons if c.verdict in ("pass", "inconclusive")]
    assert len(stable) == 34
    for key in stable:
        rep = compare(base, slow_down(cand, 1.2, keys=[key]))
        flagged = [(c.key, c.verdict) for c in rep.comparisons if c.verdict not in ("pass", "inconclusive", "unstable")]
        assert flagged == [(key, "regression")], (key, flagged)
        assert rep.exit_code == 1


def test_an_unstable_row_slowed_is_unstable_and_strict_fails_it(pair):
    base, cand = pair
    key = ("flash_attention", "triton", "B4-H32-Hkv8-S4096-D128-causal", "bf16")  # spread 0.4% -> 3.3%
    rep = compare(base, slow_down(cand, 1.2, keys=[key]))
    c = next(c for c in rep.comparisons if c.key == key)
    assert c.verdict == "unstable" and c.timing_verdict == "regression" and rep.exit_code == 0
    assert compare(base, cand, GateParams(strict=True)).exit_code == 1


def test_cli_on_the_real_pair_every_output_shows_unstable(tmp_path):
    md, xml, js = tmp_path / "r.md", tmp_path / "r.xml", tmp_path / "r.json"
    args = ["regress", str(BASE), str(CAND), "--markdown", str(md), "--junit", str(xml), "--json", str(js)]
    r = runner.invoke(app, args, env={"COLUMNS": "250", "GITHUB_STEP_SUMMARY": ""})
    assert r.exit_code == 0, r.output
    assert "PASS: 0 regression(s), 20 unstable, 8 inconclusive, 0 improvement(s), 26 pass (54 compared)" in r.output
    assert "│ unstable " in r.output
    assert "unstable: gemm M1-N8192-K8192 bf16 [triton]: baseline host-timed" in r.output
    text = md.read_text()
    assert "| unstable | gemm | triton | M1-N8192-K8192 | bf16 |" in text
    assert "- `gemm M1-N8192-K8192 bf16` (triton), unstable: baseline host-timed" in text
    root = ET.parse(xml).getroot()
    assert root.get("failures") == "0" and root.get("skipped") == "20"
    skipped = [c.find("skipped").get("message") for c in root.iter("testcase") if c.find("skipped") is not None]
    assert all(m.startswith("unstable, not judged: ") for m in skipped)
    data = json.loads(js.read_text())
    assert data["counts"]["unstable"] == 20 and data["exit_code"] == 0
    row = next(x for x in data["rows"] if (x["op"], x["shape"]) == ("gemm", "M1-N8192-K8192"))
    assert row["verdict"] == "unstable" and row["timing_verdict"] == "regression" and row["unstable_reason"]

    r = runner.invoke(app, [*args, "--strict", "-q"], env={"GITHUB_STEP_SUMMARY": ""})
    assert r.exit_code == 1 and r.output.startswith("UNSTABLE: 0 regression(s), 20 unstable"), r.output
    root = ET.parse(xml).getroot()
    assert root.get("failures") == "20"
    assert {c.find("failure").get("type") for c in root.iter("testcase") if c.find("failure") is not None} == {"unstable"}
