"""Per-GPU pooled baselines: ``roofline baseline update/show/path`` through the real entry point."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from rooflinecli.gate.baseline import load_baseline, update_baseline
from rooflinecli.cli import app
from rooflinecli.errors import RooflineError
from rooflinecli.gate.sim import slow_down, synthetic_results
from rooflinecli.results import load_results

runner = CliRunner()
KEY = ("gemm", "triton", "M4096-N4096-K4096", "bf16")


def _runs(tmp_path, n, **kw):
    paths = []
    for i in range(n):
        p = tmp_path / f"run{i}.json"
        synthetic_results(seed=100 + i, created_utc=f"2026-02-{i + 1:02d}T00:00:00Z", **kw).save(p)
        paths.append(p)
    return paths


def _row(res, key=KEY):
    return next(r for r in res.rows if r.key == key)


def test_update_pools_last_k_runs(tmp_path):
    runs = _runs(tmp_path, 4)
    bdir = tmp_path / "baselines"
    for i, p in enumerate(runs):
        r = runner.invoke(app, ["baseline", "update", str(p), "--dir", str(bdir), "--keep", "3"])
        assert r.exit_code == 0, r.output
        assert f"pooling {min(i + 1, 3)} run(s), 22 row(s)" in r.output
    assert "1 old run(s) dropped" in r.output
    path = bdir / "nvidia-h200.json"
    base = load_results(path)  # itself a valid results file
    kept = [load_results(p) for p in runs[1:]]
    row = _row(base)
    assert row.p50_s == pytest.approx(statistics.median(_row(k).p50_s for k in kept), rel=1e-15)
    assert row.samples_s == tuple(s for k in kept for s in _row(k).samples_s)
    assert row.p20_s <= row.p50_s <= row.p80_s
    assert row.achieved_tflops == pytest.approx(row.flops / row.p50_s / 1e12)
    info = load_baseline(path)
    assert [x["source"] for x in info.runs] == [str(p) for p in runs[1:]] and info.keep == 3


def test_same_run_is_not_pooled_twice_and_incorrect_rows_are_left_out(tmp_path):
    (p,) = _runs(tmp_path, 1)
    bdir = tmp_path / "b"
    update_baseline(p, bdir)
    out = update_baseline(p, bdir)
    assert not out.added and out.runs == 1
    res = load_results(p)
    bad = replace(res, created_utc="2026-03-01T00:00:00Z", rows=tuple(replace(r, correct=False) if r.key == KEY else r for r in res.rows))
    bad.save(tmp_path / "bad.json")
    out = update_baseline(tmp_path / "bad.json", bdir)
    assert out.added and out.skipped_incorrect == 1
    base = load_results(bdir / "nvidia-h200.json")
    assert len(_row(base).samples_s) == 20  # only the first run's samples for that row


def test_refuses_other_gpu_and_non_runs(tmp_path):
    (p,) = _runs(tmp_path, 1)
    bdir = tmp_path / "b"
    update_baseline(p, bdir)
    # a baseline file named for the H200 but holding another GPU's runs is refused
    raw = json.loads((bdir / "nvidia-h200.json").read_text())
    raw["environment"]["gpu_name"] = "NVIDIA H100"
    (bdir / "nvidia-h200.json").write_text(json.dumps(raw))
    r = runner.invoke(app, ["baseline", "update", str(p), "--dir", str(bdir)])
    assert r.exit_code == 2 and r.output.startswith("error: ") and "refusing to mix" in r.output
    r = runner.invoke(app, ["baseline", "update", str(bdir / "nvidia-h200.json"), "--dir", str(tmp_path / "c")])
    assert r.exit_code == 2 and "is itself a baseline" in r.output
    r = runner.invoke(app, ["baseline", "update", str(p), "--keep", "0", "--dir", str(bdir)])
    assert r.exit_code == 2 and "--keep must be >= 1" in r.output
    with pytest.raises(RooflineError, match="no environment.gpu_name"):
        res = load_results(p)
        replace(res, environment={}, path="nogpu.json").save(tmp_path / "nogpu.json")
        update_baseline(tmp_path / "nogpu.json", bdir)


def test_show_path_and_regress_against_baseline(tmp_path):
    runs = _runs(tmp_path, 3)
    bdir = tmp_path / "b"
    for p in runs:
        update_baseline(p, bdir)
    r = runner.invoke(app, ["baseline", "show", "--dir", str(bdir)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "nvidia-h200.json" in r.output and "NVIDIA H200" in r.output
    r = runner.invoke(app, ["baseline", "show", "NVIDIA H200", "--dir", str(bdir)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "3 run(s) pooled" in r.output and "M4096-N4096-K4096" in r.output and "60" in r.output
    r = runner.invoke(app, ["baseline", "show", "h100", "--dir", str(bdir)])
    assert r.exit_code == 2 and "known: nvidia-h200" in r.output
    r = runner.invoke(app, ["baseline", "path", str(runs[0]), "--dir", str(bdir)])
    assert r.exit_code == 0 and r.output.strip() == str(bdir / "nvidia-h200.json")

    new = tmp_path / "new.json"
    synthetic_results(seed=999).save(new)
    r = runner.invoke(app, ["regress", str(bdir / "nvidia-h200.json"), str(new), "-q"])
    assert r.exit_code == 0, r.output
    slow_down(load_results(new), 1.15, keys=[KEY]).save(tmp_path / "slow.json")
    r = runner.invoke(app, ["regress", str(bdir / "nvidia-h200.json"), str(tmp_path / "slow.json"), "-q"])
    assert r.exit_code == 1 and "1 regression(s)" in r.output


def test_unwritable_baseline_folder_is_one_line_exit_2(tmp_path):
    (p,) = _runs(tmp_path, 1)
    blocker = tmp_path / "file_not_folder"
    blocker.write_text("x")
    r = runner.invoke(app, ["baseline", "update", str(p), "--dir", str(blocker)])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: baseline {blocker / 'nvidia-h200.json'}: cannot write") and r.output.count("\n") == 1


FIXTURES = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "h200-2026-11-30"


def test_old_runs_and_new_fields_pool_together(tmp_path):
    """A run written before host_us_per_call/config/tuning/backend existed (the real H200 fixture)
    and a newer run that records them pool into one baseline; regress reads it."""
    old = FIXTURES / "results.json"
    new_res = load_results(FIXTURES / "bench-run2-results.json")
    cfg = {"gemm_kernel": {"kwargs": {"BLOCK_M": 64}, "num_warps": 4, "num_stages": 3}}
    new_rows = tuple(replace(r, host_us_per_call=12.5, config=cfg if r.op == "gemm" else {}, tuning="committed", backend="")
                     for r in new_res.rows)
    new_path = tmp_path / "new.json"
    replace(new_res, rows=new_rows, created_utc="2026-12-01T00:00:00Z").save(new_path)
    bdir = tmp_path / "b"
    update_baseline(old, bdir)
    out = update_baseline(new_path, bdir)
    assert out.runs == 2 and out.added
    base = load_baseline(out.path).results
    gemm = next(r for r in base.rows if r.op == "gemm" and r.impl == "triton")
    assert gemm.config == cfg and gemm.tuning == "committed" and gemm.host_us_per_call == 12.5  # only the new run recorded it
    assert len(gemm.samples_s) == 200
    r = runner.invoke(app, ["baseline", "show", str(out.path), "--dir", str(bdir)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "2 run(s) pooled" in r.output, r.output
    r = runner.invoke(app, ["regress", str(out.path), str(new_path), "-q"])
    assert r.exit_code in (0, 1) and "compared" in r.output and "Traceback" not in r.output, r.output


def test_a_corrupt_stored_run_is_one_line(tmp_path):
    bdir = tmp_path / "b"
    out = update_baseline(_runs(tmp_path, 1)[0], bdir)
    raw = json.loads(out.path.read_text())
    raw["extra"]["baseline"]["runs"][0]["rows"][0].append("bogus")
    out.path.write_text(json.dumps(raw))
    p2 = tmp_path / "next.json"
    synthetic_results(seed=7, created_utc="2026-03-01T00:00:00Z").save(p2)
    r = runner.invoke(app, ["baseline", "update", str(p2), "--dir", str(bdir)])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert r.output.startswith("error: ") and "runs[0].rows[0] must be [row, n_samples" in r.output


def _tight_run(tmp_path, name, scale, created, bimodal=False, seed=0):
    import numpy as np

    from rooflinecli.results import ResultRow, Results, quantiles_s

    rng = np.random.default_rng(seed)
    s = 100e-6 * scale * (1 + 0.002 * rng.standard_normal(30))
    if bimodal:
        s[:12] *= 1.15
    s = tuple(float(x) for x in s)
    p20, p50, p80 = quantiles_s(s)
    row = ResultRow(op="k", impl="triton", shape="S", dtype="bf16", samples_s=s, p20_s=p20, p50_s=p50, p80_s=p80,
                    flops=1e9, bytes=1e6, method="cuda_graph")
    path = tmp_path / f"{name}.json"
    Results(rows=(row,), environment={"gpu_name": "NVIDIA H200"}, created_utc=created, tool_version="0.1.0").save(path)
    return path


def test_a_pooled_baseline_is_judged_run_by_run(tmp_path):
    """Three tight runs that drifted 4% apart: their concatenation has two modes and a wide spread, but no
    run does, so the pooled baseline is not unstable; when most runs are bimodal, it is."""
    import numpy as np

    from rooflinecli import stats
    from rooflinecli.gate.decision import compare

    bdir = tmp_path / "drift"
    for i, scale in enumerate((1.0, 1.04, 1.0)):
        update_baseline(_tight_run(tmp_path, f"d{i}", scale, f"2026-02-0{i + 1}T00:00:00Z", seed=i), bdir)
    pooled = load_results(bdir / "nvidia-h200.json")
    assert bool(stats.bimodal_split(np.asarray(pooled.rows[0].samples_s))[0])  # the concatenation alone looks bimodal
    cand = load_results(_tight_run(tmp_path, "cand", 1.0, "2026-03-01T00:00:00Z", seed=9))
    c = compare(pooled, cand).comparisons[0]
    assert c.verdict == "pass" and c.unstable_reason == "", c.reason
    slow = load_results(_tight_run(tmp_path, "slow", 1.2, "2026-03-01T00:00:00Z", seed=9))
    assert compare(pooled, slow).comparisons[0].verdict == "regression"

    bdir = tmp_path / "bimodal"
    for i, bi in enumerate((True, False, True)):
        update_baseline(_tight_run(tmp_path, f"b{i}", 1.0, f"2026-02-0{i + 1}T00:00:00Z", bimodal=bi, seed=i), bdir)
    c = compare(load_results(bdir / "nvidia-h200.json"), cand).comparisons[0]
    assert c.verdict == "unstable" and c.unstable_reason.startswith("baseline bimodal in 2 of its 3 pooled runs (runs 1, 3)"), c.reason


def _as_first_format(base_path, run_paths):
    """Rewrite a baseline in the first format: every stored run kept its whole rows."""
    from rooflinecli.gate.baseline import _first_fingerprint
    from rooflinecli.results import _row_json

    raw = json.loads(base_path.read_text())
    info = raw["extra"]["baseline"]
    info["format"] = "rooflinecli.baseline/1"
    del info["run_row"]
    for run, p in zip(info["runs"], run_paths):
        run["rows"] = [_row_json(r) for r in load_results(p).rows if r.correct]
        run["fingerprint"] = _first_fingerprint(load_results(p))  # as the first format stored it
    base_path.write_text(json.dumps(raw))
    return raw


def test_samples_are_stored_once_and_a_first_format_baseline_is_read_and_rewritten(tmp_path):
    runs = _runs(tmp_path, 3)
    direct, old = tmp_path / "direct", tmp_path / "old"
    for p in runs:
        update_baseline(p, direct)
    raw = json.loads((direct / "nvidia-h200.json").read_text())
    info = raw["extra"]["baseline"]
    assert info["format"] == "rooflinecli.baseline/2"
    assert all(isinstance(row, list) for run in info["runs"] for row in run["rows"])  # compact rows: samples held once, in the pooled rows
    for p in runs[:2]:
        update_baseline(p, old)
    first = _as_first_format(old / "nvidia-h200.json", runs[:2])
    assert len(load_baseline(old / "nvidia-h200.json").runs) == 2  # read as it is
    again = update_baseline(runs[1], old)  # a run stored under the first fingerprint is recognised
    assert not again.added and again.runs == 2
    r = runner.invoke(app, ["regress", str(old / "nvidia-h200.json"), str(runs[2]), "--impl", "all", "-q"])
    assert r.exit_code in (0, 1) and "compared" in r.output, r.output
    out = update_baseline(runs[2], old)
    assert out.added and out.runs == 3
    a, b = load_results(direct / "nvidia-h200.json"), load_results(old / "nvidia-h200.json")
    assert json.loads((old / "nvidia-h200.json").read_text())["extra"]["baseline"]["format"] == "rooflinecli.baseline/2"
    assert [(x.key, x.samples_s, x.p50_s, x.p20_s, x.host_us_per_call, x.note) for x in a.rows] == \
           [(x.key, x.samples_s, x.p50_s, x.p20_s, x.host_us_per_call, x.note) for x in b.rows]
    first["extra"]["baseline"]["runs"][0]["rows"][1]["p50_s"] *= 3  # a first-format stored run's own summary
    (old / "nvidia-h200.json").write_text(json.dumps(first))
    r = runner.invoke(app, ["baseline", "update", str(runs[2]), "--dir", str(old)])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "runs[0].rows[1]" in r.output, r.output


def test_a_stored_run_that_does_not_add_up_is_one_line(tmp_path):
    runs = _runs(tmp_path, 2)
    bdir = tmp_path / "b"
    for p in runs:
        update_baseline(p, bdir)
    path = bdir / "nvidia-h200.json"
    good = json.loads(path.read_text())
    n = len(good["rows"])
    for tamper, expect in (
        (lambda rr: rr.__setitem__(0, n), f"a row index below {n:,}"),  # no such pooled row
        (lambda rr: rr.__setitem__(1, 0), "a positive count"),
        (lambda rr: rr.__setitem__(1, rr[1] + 1), "its stored runs"),  # more samples than the row holds
        (lambda rr: rr.__setitem__(3, -1.0), "two numbers or nulls"),
    ):
        raw = json.loads(json.dumps(good))
        tamper(raw["extra"]["baseline"]["runs"][1]["rows"][0])
        path.write_text(json.dumps(raw))
        r = runner.invoke(app, ["regress", str(path), str(runs[1]), "--impl", "all"])
        assert r.exit_code == 2 and r.output.count("\n") == 1 and expect in r.output, (expect, r.output)
    raw = json.loads(json.dumps(good))
    raw["extra"]["baseline"]["runs"][1]["rows"].append(list(raw["extra"]["baseline"]["runs"][1]["rows"][0]))
    path.write_text(json.dumps(raw))
    r = runner.invoke(app, ["regress", str(path), str(runs[1]), "--impl", "all"])
    assert r.exit_code == 2 and "a second time" in r.output, r.output


def test_a_baseline_never_grows_past_what_its_readers_accept(tmp_path, monkeypatch):
    """Where the newest K runs would make a baseline over the results-file limit (a 100,000-row
    baseline of four 20-sample runs: 282 MB), the oldest are dropped until it fits, and said."""
    import rooflinecli.gate.baseline as baseline_mod
    import rooflinecli.results as results_mod

    runs = _runs(tmp_path, 4)
    bdir = tmp_path / "baselines"
    sizes = [update_baseline(p, tmp_path / "free").path.stat().st_size for p in runs[:3]]  # 1, 2, 3 runs pooled
    one = len(update_baseline(runs[0], bdir).path.read_text())
    limit = (sizes[1] + sizes[2]) // 2  # two runs fit, three do not
    monkeypatch.setattr(baseline_mod, "MAX_USER_FILE_BYTES", limit)
    monkeypatch.setattr(results_mod, "MAX_USER_FILE_BYTES", limit)
    assert update_baseline(runs[1], bdir).dropped_for_size == 0
    r = runner.invoke(app, ["baseline", "update", str(runs[2]), "--dir", str(bdir)])
    assert r.exit_code == 0, r.output
    assert "1 older run(s) dropped to keep the file under the results-file limit" in r.output
    path = bdir / "nvidia-h200.json"
    assert path.stat().st_size <= limit
    assert [x["source"] for x in load_baseline(path).runs] == [str(p) for p in runs[1:3]]  # the newest kept
    assert _row(load_results(path)).samples_s == tuple(s for p in runs[1:3] for s in _row(load_results(p)).samples_s)
    monkeypatch.setattr(results_mod, "MAX_USER_FILE_BYTES", one // 2)  # not even the new run alone fits
    monkeypatch.setattr(baseline_mod, "MAX_USER_FILE_BYTES", one // 2)
    before = path.read_bytes()
    r = runner.invoke(app, ["baseline", "update", str(runs[3]), "--dir", str(bdir)])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "over the" in r.output and "nothing written" in r.output, r.output
    assert path.read_bytes() == before


def test_a_results_file_no_reader_would_accept_is_not_written(tmp_path, monkeypatch):
    import rooflinecli.results as results_mod

    res = synthetic_results(seed=1)
    monkeypatch.setattr(results_mod, "MAX_USER_FILE_BYTES", 1000)
    with pytest.raises(RooflineError, match="over the 1,000-byte limit every results reader applies; nothing written"):
        res.save(tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


def test_runs_surely_over_the_limit_are_dropped_before_encoding(tmp_path, monkeypatch):
    """The estimate drops a run only where the rest of the window is over the limit by 3% or more
    (runs of 2,000 samples a row: the samples are most of the file, as in big baselines)."""
    import rooflinecli.gate.baseline as baseline_mod

    runs = _runs(tmp_path, 3, n_samples=2000)
    for p in runs[:2]:
        update_baseline(p, tmp_path / "b")
    path = tmp_path / "b" / "nvidia-h200.json"
    old, two = load_results(path), path.stat().st_size
    _, held, _ = baseline_mod.stored_runs(old)
    held = held + [{r.key: baseline_mod._held(r) for r in load_results(runs[2]).rows}]
    for p in runs:
        update_baseline(p, tmp_path / "free")
    three = (tmp_path / "free" / "nvidia-h200.json").stat().st_size  # the true size of three runs
    assert three > two * 1.3
    for limit, drop in ((three / 1.1, 1), (three / 1.01, 0), (two / 1.1, 2), (three * 2, 0)):
        monkeypatch.setattr(baseline_mod, "MAX_USER_FILE_BYTES", int(limit))
        assert baseline_mod._surely_over(old, held) == drop, limit


def _encoded_baseline(directory, run_paths, keep):
    """The baseline that ``update_baseline`` writes when every sample is encoded again (no copied
    sample text), as parsed JSON."""
    import rooflinecli.gate.baseline as B

    keeping = B.load_results_keeping_sample_text
    try:
        B.load_results_keeping_sample_text = lambda p: (load_results(p), {})
        for i, p in enumerate(run_paths):
            update_baseline(p, directory, keep=keep, now=f"2026-02-0{i + 1}T00:00:00Z")
    finally:
        B.load_results_keeping_sample_text = keeping
    return json.loads(next(directory.glob("*.json")).read_text())


def test_samples_copied_as_the_files_spell_them_pool_as_the_encoded_ones(tmp_path):
    # runs written by another tool (indented, integers among the samples), runs whose rows differ,
    # and a window that drops the oldest run: the copied text must give the same baseline
    runs = []
    for seed in range(4):
        res = synthetic_results(seed=seed, created_utc=f"2026-01-0{seed + 1}T00:00:00Z")
        doc = json.loads(res.text())
        doc["rows"] = doc["rows"][seed % 2:]  # the first row only in every other run
        if seed == 1:
            doc["rows"][0]["samples_s"] = [1] + doc["rows"][0]["samples_s"][1:]
            doc["rows"][0]["p20_s"], doc["rows"][0]["p50_s"], doc["rows"][0]["p80_s"] = _quantiles(doc["rows"][0]["samples_s"])
        p = tmp_path / f"run{seed}.json"
        p.write_text(json.dumps(doc, indent=2 if seed == 2 else None))
        runs.append(p)
    encoded = _encoded_baseline(tmp_path / "encoded", runs, keep=2)
    for i, p in enumerate(runs):
        update_baseline(p, tmp_path / "copied", keep=2, now=f"2026-02-0{i + 1}T00:00:00Z")
    copied_path = next((tmp_path / "copied").glob("*.json"))
    assert json.loads(copied_path.read_text()) == encoded
    assert len(encoded["extra"]["baseline"]["runs"]) == 2
    assert load_results(copied_path).rows == load_results(next((tmp_path / "encoded").glob("*.json"))).rows


def _quantiles(samples):
    from rooflinecli.results import quantiles_s

    return quantiles_s(samples)


def test_sample_text_is_kept_only_where_it_is_each_rows_own(tmp_path):
    from rooflinecli.results import load_results_keeping_sample_text

    res = synthetic_results(seed=5)
    plain = tmp_path / "plain.json"
    res.save(plain)
    got, text = load_results_keeping_sample_text(plain)
    assert got.rows == load_results(plain).rows and len(text) == len(got.rows)
    assert all(json.loads(text[r.key]) == list(r.samples_s) for r in got.rows)
    doc = json.loads(plain.read_text())
    # a row's config holding a samples_s array of its own, the row's own key spelled without a
    # space: the one array the writer's spelling finds is not the row's, so no text is kept
    doc["rows"][0]["config"] = {"samples_s": [9.0, 9.0]}
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(doc).replace('"samples_s": [', '"samples_s":[', 1))
    got, text = load_results_keeping_sample_text(hostile)
    assert text == {} and got.rows == load_results(hostile).rows
    assert list(got.rows[0].samples_s) == doc["rows"][0]["samples_s"] and got.rows[0].config == {"samples_s": [9.0, 9.0]}
    # a file that is not valid JSON keeps the plain reader's error
    broken = tmp_path / "broken.json"
    broken.write_text(plain.read_text()[:-200])
    with pytest.raises(RooflineError) as kept:
        load_results_keeping_sample_text(broken)
    with pytest.raises(RooflineError) as plain_error:
        load_results(broken)
    assert str(kept.value) == str(plain_error.value) and "not valid JSON" in str(kept.value)


def test_raw_json_values_write_the_text_their_values_would():
    from rooflinecli.output import RawJSON, json_text

    rows = [{"op": f"op{i}", "samples_s": [i * 1e-6, 2.5e-6], "p50_s": float("nan") if i == 3 else 1e-6, "config": {"note": "\x00raw-x"}}
            for i in range(30)]
    doc = {"schema": "x", "rows": rows, "extra": {"k": [1, 2]}}
    raw_doc = {**doc, "rows": [{**r, "samples_s": RawJSON(json.dumps(r["samples_s"]))} for r in rows]}
    assert json_text(raw_doc, raw=True) == json_text(doc)
