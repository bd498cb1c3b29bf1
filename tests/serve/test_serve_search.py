"""roofline serve --search: the frontier is Pareto, the best meets the SLO, a miss names the nearest."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from rooflinecli.analysis.workload import Workload
from rooflinecli.cli import app
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model
from rooflinecli.serve.search import Slo, row, search
from conftest import cli_runner


runner = cli_runner()
WL = Workload(batch=1, prompt_len=1024, gen_len=256, mode="datasheet")


@pytest.fixture(scope="module")
def result():
    return search(get_model("llama-3-70b"), get_spec("h100-sxm"), WL, gpus=16, isl=1024, osl=256, slo=Slo(ttft_s=0.5, tpot_s=0.03))


def test_frontier_is_pareto(result):
    t = result["candidates"]
    x, y, on = t["throughput_tokens_per_s_per_gpu"], t["tokens_per_s_per_user"], t["on_frontier"]
    assert on.any() and not on.all()
    fx, fy = x[on], y[on]
    for i in range(len(x)):  # nothing beats a frontier point on both axes; every other point is beaten
        beats = (x > x[i]) & (y > y[i])
        if on[i]:
            assert not beats.any()
    off = np.flatnonzero(~on)
    for i in off[:200]:
        assert np.any((fx >= x[i]) & (fy >= y[i]))


def test_best_meets_the_slo_and_is_the_fastest_that_does(result):
    t = result["candidates"]
    best = row(t, result["best"])
    assert best["meets_slo"] and best["ttft_s"] <= 0.5 and best["tpot_s"] <= 0.03
    met = t["meets_slo"]
    assert best["throughput_tokens_per_s_per_gpu"] == pytest.approx(float(np.max(t["throughput_tokens_per_s_per_gpu"][met])))
    assert np.all(t["gpus_used"] <= 16)
    assert set(t["serving"]) == {"aggregated", "disaggregated"}
    assert (1, 1) not in result["layouts"]  # 70B in bf16 does not fit one 80 GB GPU


def test_cli_search_table_json_and_csv(tmp_path):
    out = tmp_path / "cands.csv"
    args = ["serve", "--search", "--model", "llama-3-8b", "--hw", "h100-sxm", "--mode", "datasheet", "--gpus", "4", "--ttft-ms", "300", "--tpot-ms", "20"]
    r = runner.invoke(app, [*args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "best for the SLO:" in r.stdout and "candidates" in r.stdout
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows and {"serving", "ttft_s", "tpot_s", "throughput_tokens_per_s_per_gpu", "tokens_per_s_per_user", "on_frontier"} <= set(rows[0])
    r = runner.invoke(app, [*args, "--json"])
    d = json.loads(r.stdout)
    assert d["best"]["meets_slo"] and d["candidates"] == len(rows)


def test_cli_slo_nobody_meets_names_the_nearest():
    r = runner.invoke(app, ["serve", "--search", "--model", "llama-3-8b", "--hw", "h100-sxm", "--mode", "datasheet", "--gpus", "2",
                            "--tpot-ms", "0.01", "--json"])
    assert r.exit_code == 0, r.output
    assert sum("no configuration meets the SLO" in line for line in r.stderr.splitlines()) == 1
    d = json.loads(r.stdout)
    assert d["best"] is None and d["nearest"]["tpot_s"] > 0.01e-3


def test_cli_search_needs_gpus_and_a_target():
    r = runner.invoke(app, ["serve", "--search", "--model", "llama-3-8b", "--ttft-ms", "100"])
    assert r.exit_code == 2 and "--gpus" in r.stderr
    r = runner.invoke(app, ["serve", "--search", "--model", "llama-3-8b", "--gpus", "2"])
    assert r.exit_code == 2 and "target" in r.stderr


def test_cli_search_parquet_and_bad_suffix(tmp_path):
    import pyarrow.parquet as pq

    args = ["serve", "--search", "--model", "llama-3-8b", "--hw", "h100-sxm", "--mode", "datasheet", "--gpus", "2", "--tpot-ms", "20"]
    out = tmp_path / "cands.parquet"
    r = runner.invoke(app, [*args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    t = pq.read_table(out)
    assert t.num_rows > 0 and "tokens_per_s_per_user" in t.schema.names
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "cands.txt")])
    assert r.exit_code == 2 and ".csv or .parquet" in r.stderr and not (tmp_path / "cands.txt").exists()
