"""Nothing silently wrong, nothing lost: summaries derived from samples, one writer for every
output (closed pipes, full disks, devices, FIFOs, the command's own inputs, the installed package,
files of another kind, SIGTERM, concurrent baseline updates), user strings shown as data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.errors import RooflineError, clean_text, show_name
from rooflinecli.gate.baseline import load_baseline
from rooflinecli.output import inside_package, json_text, write_text_atomic
from rooflinecli.results import load_results, quantiles_s

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "h200-2026-11-30" / "results.json"
runner = CliRunner()


def _small(tmp_path: Path, name: str = "r.json", rows: int = 6, **changes) -> Path:
    raw = json.loads(FIXTURE.read_text(encoding="utf-8"))
    raw["rows"] = raw["rows"][:rows]
    raw.update(changes)
    p = tmp_path / name
    p.write_text(json.dumps(raw), encoding="utf-8")
    return p


def _roofline(*args: str, cwd: Path, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rooflinecli", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, **kw)


def _one_error(r, needle: str = "") -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.output
    return lines[0]


# -- summaries are derived, never trusted ---------------------------------------------------------


def test_a_ten_times_slower_candidate_with_its_old_p50_is_refused_by_regress_and_validate(tmp_path):
    base = _small(tmp_path, "base.json")
    raw = json.loads(base.read_text())
    raw["rows"][2]["samples_s"] = [x * 10 for x in raw["rows"][2]["samples_s"]]  # p50_s left as it was
    cand = tmp_path / "cand.json"
    cand.write_text(json.dumps(raw))
    line = _one_error(runner.invoke(app, ["regress", str(base), str(cand)]), "rows[2]")
    assert "p20_s" in line and "disagrees with its 100 samples" in line
    _one_error(runner.invoke(app, ["validate", str(cand)]), "rows[2]")
    raw["rows"][2]["p50_s"] *= 100  # a p50 100x every sample
    cand.write_text(json.dumps(raw))
    _one_error(runner.invoke(app, ["validate", str(cand)]), "rows[2]")


def test_summaries_of_another_quantile_rule_are_accepted(tmp_path):
    """A file whose quantiles were taken with numpy's 'lower' or 'weibull' rule agrees with its samples."""
    import numpy as np

    for method in ("lower", "higher", "nearest", "weibull", "hazen"):
        raw = json.loads(_small(tmp_path).read_text())
        for r in raw["rows"]:
            s = np.asarray(r["samples_s"][:11])  # odd count: the rules differ most
            r["samples_s"] = s.tolist()
            r["p20_s"], r["p50_s"], r["p80_s"] = (float(x) for x in np.percentile(s, [20, 50, 80], method=method))
        p = tmp_path / f"{method}.json"
        p.write_text(json.dumps(raw))
        assert len(load_results(p).rows) == 6


def test_the_gate_takes_medians_from_samples_and_a_tampered_pooled_baseline_is_refused(tmp_path):
    a = _small(tmp_path, "a.json", rows=4)
    r = runner.invoke(app, ["baseline", "update", str(a), "--dir", str(tmp_path / "bl")])
    assert r.exit_code == 0, r.output
    bfile = next((tmp_path / "bl").glob("*.json"))
    assert len(load_baseline(bfile).results.rows) == 4
    raw = json.loads(bfile.read_text())
    raw["rows"][1]["p50_s"] *= 3  # the pooled median no longer the median of its runs' medians
    bfile.write_text(json.dumps(raw))
    _one_error(runner.invoke(app, ["regress", str(bfile), str(a), "--impl", "all"]), "rows[1]")
    raw["rows"][1]["p50_s"] /= 3
    raw["extra"]["baseline"]["runs"][0]["rows"][1][1] -= 1  # a stored run's share of the samples no longer adds up
    bfile.write_text(json.dumps(raw))
    _one_error(runner.invoke(app, ["baseline", "update", str(a), "--dir", str(tmp_path / "bl")]), "rows[1]")


# -- standard output ------------------------------------------------------------------------------


def test_a_closed_pipe_exits_0_quietly(tmp_path):
    for args in (["hw", "list"], ["analyze", "--model", "llama-3-8b", "--hw", "h100-sxm"], ["kv", "--model", "llama-3-8b"]):
        p = subprocess.Popen([sys.executable, "-m", "rooflinecli", *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.readline()
        p.stdout.close()  # `| head -1`
        err = p.stderr.read().decode()
        assert p.wait(timeout=60) == 0 and err == "", (args, err)


def test_a_full_disk_on_stdout_is_one_line_exit_2(tmp_path):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    for args in (["hw", "list"], ["analyze", "--model", "llama-3-8b", "--hw", "h200", "--json"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run([sys.executable, "-m", "rooflinecli", *args], cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
        assert r.returncode == 2 and r.stderr.splitlines() == ["error: standard output: cannot write: no space left on the device"], r.stderr


def test_an_ascii_terminal_shows_non_ascii_names_as_escapes(tmp_path):
    base = _small(tmp_path, "b.json")
    raw = json.loads(base.read_text())
    raw["rows"][0]["op"] = raw["rows"][1]["op"] = "cöpy"
    cand = tmp_path / "c.json"
    cand.write_text(json.dumps(raw))
    r = _roofline("regress", str(base), str(cand), "--impl", "all", "--allow-missing", cwd=tmp_path, env={"PYTHONIOENCODING": "ascii", "COLUMNS": "200"})
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    assert "c\\xf6py" in r.stdout and "U+00F6" in r.stdout


# -- where outputs go -------------------------------------------------------------------------------


def test_job_summary_at_a_fifo_a_device_or_the_baseline_is_refused_at_once(tmp_path):
    base = _small(tmp_path, "b.json")
    before = base.read_bytes()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, needle in ((fifo, "is a FIFO"), ("/dev/zero", "is a device"), (base, "is also the baseline")):
        t0 = time.perf_counter()
        r = runner.invoke(app, ["regress", str(base), str(base), "-q"], env={"GITHUB_STEP_SUMMARY": str(target)})
        assert time.perf_counter() - t0 < 5
        assert "$GITHUB_STEP_SUMMARY" in _one_error(r, needle)
    assert base.read_bytes() == before
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    r = runner.invoke(app, ["regress", str(base), str(base), "-q"], env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert r.exit_code == 0 and summary.read_text().startswith("earlier step\n<!-- rooflinecli-regress -->")


def test_outputs_never_replace_a_file_of_another_kind(tmp_path):
    base = _small(tmp_path, "b.json")
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "llama"}')
    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n")
    for opt, target in (("--json", config), ("--markdown", notes), ("--junit", notes)):
        _one_error(runner.invoke(app, ["regress", str(base), str(base), "-q", opt, str(target)]), "refusing to replace it")
    assert config.read_text() == '{"model_type": "llama"}' and notes.read_text() == "# my notes\n"
    res = load_results(base)
    with pytest.raises(RooflineError, match="is not a rooflinecli.results file"):
        res.save(config)
    res.save(tmp_path / "b2.json")
    res.save(tmp_path / "b2.json")  # a results file is replaced by a results writer
    (tmp_path / "bl").mkdir()
    (tmp_path / "bl" / "nvidia-h200.json").write_text('{"a": 1}')
    _one_error(runner.invoke(app, ["baseline", "update", str(base), "--dir", str(tmp_path / "bl")]), "refusing to replace it")


def test_calibrate_never_rewrites_the_packaged_spec_unasked(tmp_path):
    spec = ROOT / "hardware_specs" / "measured" / "h200.toml"
    assert inside_package(spec)
    before = spec.read_bytes()
    r = runner.invoke(app, ["calibrate", "--from-results", str(FIXTURE), "--measured", "h200-measured"])
    _one_error(r, "part of the installed package")
    assert spec.read_bytes() == before


def test_sigterm_removes_the_temporary_file(tmp_path):
    target = tmp_path / "big.parquet"
    code = (
        "import sys, time\n"
        "from rooflinecli.output import atomic_output\n"
        f"with atomic_output({str(target)!r}) as tmp:\n"
        "    open(tmp, 'wb').write(b'x' * 1000)\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(60)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    assert len(list(tmp_path.iterdir())) == 1  # the hidden temporary file
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == -signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_six_concurrent_baseline_updates_keep_all_six_runs(tmp_path):
    runs = []
    for i in range(6):
        runs.append(_small(tmp_path, f"run{i}.json", rows=3, created_utc=f"2026-12-01T10:0{i}:00Z"))
    procs = [subprocess.Popen([sys.executable, "-m", "rooflinecli", "baseline", "update", str(p), "--dir", str(tmp_path / "bl"), "--keep", "10"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in runs]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert all("run added" in o for o, _ in outs)
    info = load_baseline(next((tmp_path / "bl").glob("*.json")))
    assert sorted(r["created_utc"] for r in info.runs) == [f"2026-12-01T10:0{i}:00Z" for i in range(6)]
    assert [p.name for p in (tmp_path / "bl").iterdir()] == ["nvidia-h200.json"]  # no lock or temp files left


def test_a_negative_golden_tolerance_is_one_line(tmp_path):
    g = tmp_path / "golden.json"
    g.write_text(json.dumps({"schema": "rooflinecli.golden/1", "entries": {}, "rtol": -1e-9}))
    _one_error(runner.invoke(app, ["golden", "--path", str(g)]), "'rtol' must be a relative tolerance")


# -- user strings -------------------------------------------------------------------------------------


def test_show_name_strips_and_tells_look_alikes_apart():
    assert clean_text("a\u202eb\u200bc\u2066d\ufeff\x1b[31me") == "abcde"
    assert show_name("gemm") == "gemm"
    assert show_name("g\u0435mm") == "g\u0435mm <U+0435>"  # Cyrillic e
    assert show_name("gem\u200bm") == "gemm <U+200B>"  # a zero-width space, removed and named
    assert show_name("caf\u00e9") != show_name("cafe\u0301")  # NFC and NFD


def test_json_text_is_strict_json_with_one_row_per_line():
    obj = {"schema": "x", "rows": [{"a": 1.5, "b": float("nan"), "c": [1, 2]}, {"a": 2}], "extra": {"k": {"runs": [{"rows": [{"z": 1}]}]}}}
    text = json_text(obj)
    assert json.loads(text) == {"schema": "x", "rows": [{"a": 1.5, "b": None, "c": [1, 2]}, {"a": 2}], "extra": {"k": {"runs": [{"rows": [{"z": 1}]}]}}}
    assert '    {"a": 1.5, "b": null, "c": [1, 2]},' in text.splitlines()


def test_write_refuses_devices_and_fifos(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/zero")):
        with pytest.raises(RooflineError, match="is a (FIFO|device)"):
            write_text_atomic(target, "x")
    assert quantiles_s([1.0, 2.0, 3.0]) == (1.4, 2.0, 2.6)


# -- linear-time checks give the answers of the plain ones ------------------------------------------


def test_leave_one_shape_out_efficiencies_equal_a_refit_without_each_shape():
    """``loo_efficiencies`` (sorted once, O(n log n)) gives exactly what refitting without each
    (op, shape, dtype) gives (O(n^2)), on the committed run's rows."""
    from rooflinecli.bench.fit import fit_efficiency, loo_efficiencies, points_from_rows
    from rooflinecli.hardware import get_spec

    res = load_results(FIXTURE)
    for impls in (("triton",), ("triton", "torch")):
        points = points_from_rows(res.rows, get_spec("h200"), impls=impls)
        fast = loo_efficiencies(points)
        assert set(fast) == {p.shape_key for p in points}
        for key in fast:
            assert fast[key] == fit_efficiency(q for q in points if q.shape_key != key), key


def test_batched_gate_statistics_equal_row_by_row(tmp_path):
    """The gate computes its statistics for all rows of one sample count at once; each row's
    numbers equal those of the row alone."""
    import numpy as np

    from rooflinecli import stats
    from rooflinecli.gate.decision import GateParams, compare

    raw = json.loads(FIXTURE.read_text())
    for j, r in enumerate(raw["rows"]):  # mixed sample counts: 100, 37 and 11
        n = (100, 37, 11)[j % 3]
        if r["samples_s"]:
            r["samples_s"] = r["samples_s"][:n]
            r["p20_s"], r["p50_s"], r["p80_s"] = quantiles_s(r["samples_s"])
    p = tmp_path / "mixed.json"
    p.write_text(json.dumps(raw))
    base = load_results(p)
    cand = load_results(FIXTURE)
    rep = compare(base, cand, GateParams(impls=None))
    rows = {r.key: r for r in base.rows}
    crow = {r.key: r for r in cand.rows}
    for c in rep.comparisons:
        if c.verdict == "failed":
            continue
        b, cc = np.asarray(rows[c.key].samples_s), np.asarray(crow[c.key].samples_s)
        assert c.baseline_median_s == float(np.median(b)) and c.candidate_median_s == float(np.median(cc))
        assert c.baseline_noise == float(stats.relative_iqr(b))
        assert c.p_slower == float(stats.mannwhitney_both(cc, b)[0])


def test_regress_keeps_its_verdict_when_the_pipe_closes(tmp_path):
    """`roofline regress ... | head -1` still exits 1 on a regression (a CI step must not pass it)."""
    from rooflinecli.gate.sim import slow_down, synthetic_results

    base = synthetic_results(seed=3)
    base.save(tmp_path / "b.json")
    slow_down(synthetic_results(seed=4), 2.0).save(tmp_path / "c.json")
    for pair, code in (((tmp_path / "b.json", tmp_path / "c.json"), 1), ((tmp_path / "b.json", tmp_path / "b.json"), 0)):
        p = subprocess.Popen([sys.executable, "-m", "rooflinecli", "regress", *map(str, pair), "--impl", "all"], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "120", "GITHUB_STEP_SUMMARY": ""})
        p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) == code and err == "", err


def test_quantiles_are_numpys_bit_for_bit():
    import random

    import numpy as np

    rng = random.Random(0)
    for n in (*range(1, 40), 100, 101):
        x = [rng.lognormvariate(-9, 0.3) for _ in range(n)]
        assert quantiles_s(x) == tuple(float(v) for v in np.percentile(np.asarray(x), [20, 50, 80]))
