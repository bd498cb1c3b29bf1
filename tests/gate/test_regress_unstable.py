"""The gate's own verdicts beyond the timing rule: unstable (bimodal samples, a spread that changed
several-fold, host-timed rows), config-changed, and a million samples a side without an n^2 array."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from rooflinecli import stats
from rooflinecli.cli import app
from rooflinecli.gate.decision import GateParams, compare
from rooflinecli.gate.sim import draw_timings
from rooflinecli.results import ResultRow, Results, quantiles_s

runner = CliRunner()


def _row(op, samples, method="cuda_graph", **kw):
    samples = tuple(float(s) for s in samples)
    p20, p50, p80 = quantiles_s(samples)
    return ResultRow(op=op, impl="triton", shape="S1", dtype="bf16", samples_s=samples, p20_s=p20, p50_s=p50, p80_s=p80,
                     flops=1e9, bytes=1e6, method=method, **kw)


def _results(rows, path):
    return Results(rows=tuple(rows), environment={"gpu_name": "NVIDIA H200"}, created_utc="2026-01-01T00:00:00Z", tool_version="0.1.0", path=path)


def _lognormal(median_s, n, spread, seed):
    return draw_timings(np.random.default_rng(seed), np.asarray(median_s), n, spread, 0.0)


# -- the tests themselves --------------------------------------------------------------------------


def test_bimodal_split_finds_two_modes_and_ignores_outliers_and_unimodal_noise():
    rng = np.random.default_rng(0)
    two = np.concatenate([100e-6 * (1 + 0.003 * rng.standard_normal(60)), 130e-6 * (1 + 0.003 * rng.standard_normal(40))])
    found, gap, lower = stats.bimodal_split(rng.permutation(two))
    assert bool(found) and int(lower) == 60 and 0.2 < float(gap) < 0.3
    # three outliers at +50% are not a mode (a cluster needs >= 10% of the samples)
    outliers = np.concatenate([100e-6 * (1 + 0.003 * rng.standard_normal(97)), [150e-6, 151e-6, 152e-6]])
    assert not bool(stats.bimodal_split(outliers)[0])
    # a wide gap inside a tight cluster but under 2% of the median (quantized timer) is not bimodal
    quantized = np.array([100.0] * 50 + [101.0] * 50) * 1e-6
    assert not bool(stats.bimodal_split(quantized)[0])
    # too few samples for two clusters of 3
    assert not bool(stats.bimodal_split([1.0, 1.0, 2.0, 2.0, 2.0])[0])
    # unimodal lognormal timings (1-10% spread, 3% outliers): rarely bimodal, never at 100 samples
    for n, limit in ((20, 0.02), (100, 0.0)):
        for spread in (0.01, 0.03, 0.10):
            t = draw_timings(np.random.default_rng(n), np.full(2000, 1e-4), n, spread, 0.03)
            assert float(stats.bimodal_split(t)[0].mean()) <= limit, (n, spread)
    # batched along leading axes = one by one
    batch = np.stack([two, outliers])
    assert stats.bimodal_split(batch)[0].tolist() == [True, False]


def test_spread_changed_needs_a_ratio_and_a_floor():
    assert bool(stats.spread_changed(0.011, 0.136))  # the real decode B1 row: 12x
    assert bool(stats.spread_changed(0.004, 0.033))
    assert not bool(stats.spread_changed(0.002, 0.007))  # 3.5x but both tiny
    assert not bool(stats.spread_changed(0.10, 0.25))  # 2.5x
    assert bool(stats.spread_changed(0.0, 0.03))  # a zero spread (quantized timer) against a real one


def test_sort_based_u_matches_brute_force_with_ties_batched_and_not():
    rng = np.random.default_rng(3)
    for m, n in ((1, 1), (4, 9), (30, 25), (70, 5)):
        x = rng.integers(0, 6, size=(5, m)).astype(float)
        y = rng.integers(0, 6, size=(5, n)).astype(float)
        brute = (x[:, :, None] > y[:, None, :]).sum((1, 2)) + 0.5 * (x[:, :, None] == y[:, None, :]).sum((1, 2))
        assert stats.u_statistic(x, y).tolist() == brute.tolist()
        for i in range(5):
            assert float(stats.u_statistic(x[i], y[i])) == brute[i]
            pg, pl = stats.mannwhitney_both(x[i], y[i])
            assert float(pg) == pytest.approx(float(stats.mannwhitney_greater(x[i], y[i])), rel=1e-12)
            assert float(pl) == pytest.approx(float(stats.mannwhitney_greater(y[i], x[i])), rel=1e-12)
            assert float(stats.mannwhitney_both(x, y)[0][i]) == pytest.approx(float(pg), rel=1e-12)


def test_a_million_samples_a_side_is_fast_and_small():
    """The tie count used to build an n x n array: 1e6 samples would need 8 TB. Now one sort."""
    rng = np.random.default_rng(0)
    n = 1_000_000
    base = (100e-6 * np.exp(0.01 * rng.standard_normal(n))).round(9)  # rounded: ties, the costly case
    cand = (120e-6 * np.exp(0.01 * rng.standard_normal(n))).round(9)
    b, c = _results([_row("big", base)], "b.json"), _results([_row("big", cand)], "c.json")
    t0 = time.perf_counter()
    rep = compare(b, c)
    elapsed = time.perf_counter() - t0
    assert elapsed < 5.0, f"compare of 1e6 samples a side took {elapsed:.1f} s"
    x = rep.comparisons[0]
    assert x.verdict == "regression" and x.rel_change == pytest.approx(0.2, rel=0.01) and x.n_baseline == n


def test_host_timed_rows_are_unstable_from_host_time_or_spread():
    base = _lognormal(100e-6, 40, 0.01, 1)
    cand = _lognormal(100e-6, 40, 0.01, 2)
    # new files: host time per call >= half the median on a plain-event row -> the host set the time
    rows_b = [_row("host", base, method="cuda_events", host_us_per_call=80.0), _row("gpu", base, method="cuda_events", host_us_per_call=10.0),
              _row("graph", base, method="cuda_graph", host_us_per_call=400.0)]
    rows_c = [_row("host", cand, method="cuda_events", host_us_per_call=80.0), _row("gpu", cand, method="cuda_events", host_us_per_call=10.0),
              _row("graph", cand, method="cuda_graph", host_us_per_call=400.0)]
    rep = compare(_results(rows_b, "b.json"), _results(rows_c, "c.json"))
    v = {c.op: c for c in rep.comparisons}
    assert v["host"].verdict == "unstable" and "host 80 us per call >= 50% of the" in v["host"].unstable_reason
    assert v["gpu"].verdict != "unstable" and v["graph"].verdict != "unstable"  # a graph replay never waits for the host
    # old files (no host_us_per_call): a plain-event row with IQR/median >= 8% is host-timed; a graph row is just noisy
    wide_b, wide_c = _lognormal(100e-6, 40, 0.15, 3), _lognormal(100e-6, 40, 0.15, 4)
    rep = compare(_results([_row("ev", wide_b, method="cuda_events"), _row("gr", wide_b)], "b.json"),
                  _results([_row("ev", wide_c, method="cuda_events"), _row("gr", wide_c)], "c.json"))
    v = {c.op: c for c in rep.comparisons}
    assert v["ev"].verdict == "unstable" and "plain CUDA events with IQR/median" in v["ev"].unstable_reason
    assert v["gr"].verdict != "unstable"


def test_spread_change_needs_20_samples_a_side():
    tight, wide = _lognormal(100e-6, 10, 0.003, 5), _lognormal(100e-6, 10, 0.05, 6)
    rep = compare(_results([_row("k", tight)], "b.json"), _results([_row("k", wide)], "c.json"))
    assert "spread changed" not in rep.comparisons[0].unstable_reason
    tight, wide = _lognormal(100e-6, 20, 0.003, 5), _lognormal(100e-6, 20, 0.05, 6)
    rep = compare(_results([_row("k", tight)], "b.json"), _results([_row("k", wide)], "c.json"))
    assert rep.comparisons[0].unstable_reason.startswith("spread changed")


CFG_A = {"gemm_kernel": {"kwargs": {"BLOCK_M": 64, "BLOCK_N": 128}, "num_warps": 4, "num_stages": 3}}
CFG_B = {"gemm_kernel": {"kwargs": {"BLOCK_M": 128, "BLOCK_N": 128}, "num_warps": 8, "num_stages": 3}}


def _config_pair(tmp_path):
    same, slow = _lognormal(100e-6, 30, 0.01, 7), _lognormal(100e-6, 30, 0.01, 8)
    two = np.concatenate([_lognormal(100e-6, 18, 0.003, 15), _lognormal(125e-6, 12, 0.003, 16)])
    b = _results([_row("retuned", same, config=CFG_A), _row("retuned_slow", same, config=CFG_A), _row("kept", same, config=CFG_A),
                  _row("old_file", same), _row("bimodal_retuned", two, config=CFG_A)], "b.json")
    c = _results([_row("retuned", _lognormal(100e-6, 30, 0.01, 9), config=CFG_B), _row("retuned_slow", slow * 1.3, config=CFG_B),
                  _row("kept", _lognormal(100e-6, 30, 0.01, 10), config=CFG_A), _row("old_file", _lognormal(100e-6, 30, 0.01, 11), config=CFG_B),
                  _row("bimodal_retuned", two, config=CFG_B)], "c.json")
    b.save(tmp_path / "b.json")
    c.save(tmp_path / "c.json")
    return b, c


def test_config_changed_is_its_own_verdict_and_a_slower_retune_is_still_a_regression(tmp_path):
    b, c = _config_pair(tmp_path)
    rep = compare(b, c)
    v = {x.op: x for x in rep.comparisons}
    assert v["retuned"].verdict == "config-changed" and v["retuned"].timing_verdict == "pass"
    assert v["retuned"].label == "config-changed (pass)"
    assert 'gemm_kernel: {"kwargs":{"BLOCK_M":64,"BLOCK_N":128},"num_stages":3,"num_warps":4} -> {"kwargs":{"BLOCK_M":128' in v["retuned"].config_diff
    assert v["retuned_slow"].verdict == "regression" and v["retuned_slow"].label == "regression (config changed)"
    assert v["kept"].verdict == "pass" and not v["kept"].config_changed
    assert v["bimodal_retuned"].label == "unstable (config changed)" and "tuned config changed: gemm_kernel" in v["bimodal_retuned"].reason
    assert v["old_file"].verdict == "pass" and not v["old_file"].config_changed  # no config in the baseline (an old file)
    assert rep.exit_code == 1 and rep.counts["config-changed"] == 1

    xml, js, md = tmp_path / "r.xml", tmp_path / "r.json", tmp_path / "r.md"
    r = runner.invoke(app, ["regress", str(tmp_path / "b.json"), str(tmp_path / "c.json"), "--junit", str(xml), "--json", str(js), "--markdown", str(md)],
                      env={"COLUMNS": "250", "GITHUB_STEP_SUMMARY": ""})
    assert r.exit_code == 1, r.output
    assert "config-changed (pass): retuned S1 bf16 [triton]" in r.output and "tuned config changed: gemm_kernel" in r.output
    assert "1 regression(s), 1 unstable, 0 inconclusive, 0 improvement(s), 1 config-changed, 2 pass" in r.output
    rows = {x["op"]: x for x in json.loads(js.read_text())["rows"]}
    assert rows["retuned"]["label"] == "config-changed (pass)" and rows["retuned"]["config_changed"] is True
    assert rows["retuned_slow"]["label"] == "regression (config changed)"
    text = md.read_text()
    assert "| config-changed (pass) | retuned |" in text and "| **regression (config changed)** | retuned_slow |" in text
    fails = [c.get("classname") for c in ET.parse(xml).getroot().iter("testcase") if c.find("failure") is not None]
    assert fails == ["regress.retuned_slow"]


def test_strict_fails_on_unstable_only(tmp_path):
    rng = np.random.default_rng(12)
    two = np.concatenate([100e-6 * (1 + 0.003 * rng.standard_normal(30)), 120e-6 * (1 + 0.003 * rng.standard_normal(20))])
    b = _results([_row("bi", two), _row("ok", _lognormal(100e-6, 50, 0.01, 13))], "b.json")
    c = _results([_row("bi", rng.permutation(two)), _row("ok", _lognormal(100e-6, 50, 0.01, 14))], "c.json")
    assert compare(b, c).exit_code == 0 and compare(b, c).count("unstable") == 1
    strict = compare(b, c, GateParams(strict=True))
    assert strict.exit_code == 1 and strict.verdict == "unstable"
    assert "unstable = bimodal samples" in strict.rule_text() and "fails: --strict" in strict.rule_text()
    assert replace(strict.params, strict=False) == GateParams()


def test_host_timed_mask_matches_the_written_rule():
    """The gate's all-rows host-timed mask flags exactly the rows whose reason text is non-empty:
    plain CUDA events with the host share at, under and over the bound, with and without a host
    figure, spreads either side of the host-timed spread, and graph-timed rows."""
    from rooflinecli.gate.decision import HOST_BOUND_FRACTION, HOST_SPREAD, _host_timed, _host_timed_mask

    rng = np.random.default_rng(11)
    rows, spreads = [], []
    for i in range(400):
        samples = 1e-4 * (1 + 0.01 * rng.standard_normal(20))
        med_us = quantiles_s(tuple(samples))[1] * 1e6
        host = [None, HOST_BOUND_FRACTION * med_us, HOST_BOUND_FRACTION * med_us * (1 + rng.uniform(-0.5, 0.5))][i % 3]
        rows.append(_row(f"op{i}", samples, method=["cuda_events", "cuda_graph"][i % 5 == 0], host_us_per_call=host))
        spreads.append([HOST_SPREAD, HOST_SPREAD * rng.uniform(0.5, 1.5)][i % 2])
    mask = _host_timed_mask(rows, np.array(spreads))
    expected = [bool(_host_timed(r, s)) for r, s in zip(rows, spreads)]
    assert mask.tolist() == expected
    assert 50 < sum(expected) < 350  # both verdicts are exercised
