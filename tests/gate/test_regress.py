"""The regression gate: decision rule, refusals, and every output, through the library and the
real ``roofline regress`` entry point."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.errors import RooflineError
from rooflinecli.gate.decision import GateParams, compare, decide, gpu_slug, parse_impls, parse_threshold
from rooflinecli.gate.sim import synthetic_results
from rooflinecli.results import ResultRow, Results, quantiles_s

runner = CliRunner()


def _row(op, samples, impl="triton", shape="S1", dtype="bf16", correct=True):
    samples = tuple(float(s) for s in samples)
    p20, p50, p80 = quantiles_s(samples)
    return ResultRow(op=op, impl=impl, shape=shape, dtype=dtype, samples_s=samples, p20_s=p20, p50_s=p50, p80_s=p80,
                     flops=1e9, bytes=1e6, correct=correct)


def _results(rows, gpu="NVIDIA H200", path="x.json", **env):
    return Results(rows=tuple(rows), environment={"gpu_name": gpu, **env}, created_utc="2026-01-01T00:00:00Z",
                   tool_version="0.1.0", path=path)


def _lognormal(median_s, n, spread, seed):
    return median_s * np.exp(spread * np.random.default_rng(seed).standard_normal(n))


def _by_op(rep):
    return {c.op: c for c in rep.comparisons}


def test_verdicts_for_controlled_changes():
    base, cand = [], []
    # 20 samples, 1% noise, 100 us
    cases = {
        "slow12": 1.12,  # practical and significant -> regression
        "slow2": 1.02,  # significant but under 5% -> inconclusive
        "fast12": 0.88,  # improvement
        "same": 1.0,  # pass
    }
    for i, (name, f) in enumerate(cases.items()):
        base.append(_row(name, _lognormal(100e-6, 20, 0.01, seed=2 * i)))
        cand.append(_row(name, _lognormal(100e-6 * f, 20, 0.01, seed=2 * i + 1)))
    rep = compare(_results(base, path="b.json"), _results(cand, path="c.json"))
    v = {op: c.verdict for op, c in _by_op(rep).items()}
    assert v == {"slow12": "regression", "slow2": "inconclusive", "fast12": "improvement", "same": "pass"}
    assert rep.exit_code == 1
    c = _by_op(rep)["slow12"]
    assert c.rel_change == pytest.approx(c.candidate_median_s / c.baseline_median_s - 1)
    assert c.p_slower_adj >= c.p_slower  # Holm never lowers a p-value
    assert c.p_slower_adj < 0.01
    assert rep.comparisons[0].verdict == "regression"  # worst first


def test_noise_and_min_abs_guard_against_practically_small_changes():
    # 8% slowdown on a kernel with ~6% IQR noise: limit is 2 x noise ~ 12% -> not a regression
    noisy_b = _lognormal(1e-3, 40, 0.045, seed=10)
    noisy_c = _lognormal(1.08e-3, 40, 0.045, seed=11)
    # 20% slowdown of a 2 us kernel is 0.4 us < 1 us: not practical
    tiny_b = _lognormal(2e-6, 20, 0.005, seed=12)
    tiny_c = tiny_b * 1.2
    rep = compare(_results([_row("noisy", noisy_b), _row("tiny", tiny_b)]), _results([_row("noisy", noisy_c), _row("tiny", tiny_c)]))
    v = _by_op(rep)
    assert v["noisy"].limit == pytest.approx(2 * v["noisy"].noise)
    assert v["noisy"].limit > 0.08
    assert v["noisy"].verdict != "regression"
    assert v["tiny"].verdict == "inconclusive" and v["tiny"].p_slower_adj < 0.01
    assert "under 1 us" in v["tiny"].reason
    assert rep.exit_code == 0
    # with --min-abs-us 0.1 the tiny kernel's 0.4 us slowdown counts
    rep2 = compare(_results([_row("tiny", tiny_b)]), _results([_row("tiny", tiny_c)]), GateParams(min_abs_s=0.1e-6))
    assert rep2.comparisons[0].verdict == "regression"


def test_holm_correction_spans_kernels():
    # one kernel with a modest significant shift, then the same plus many unchanged kernels:
    # its corrected p-value grows with the family size
    b = [_row("k", _lognormal(50e-6, 10, 0.01, seed=20))]
    c = [_row("k", _lognormal(50e-6 * 1.1, 10, 0.01, seed=21))]
    alone = compare(_results(b), _results(c)).comparisons[0]
    more_b = b + [_row(f"u{i}", _lognormal(50e-6, 10, 0.01, seed=100 + i)) for i in range(30)]
    more_c = c + [_row(f"u{i}", _lognormal(50e-6, 10, 0.01, seed=200 + i)) for i in range(30)]
    crowd = _by_op(compare(_results(more_b), _results(more_c)))["k"]
    assert crowd.p_slower == alone.p_slower
    assert crowd.p_slower_adj > alone.p_slower_adj


def test_decide_is_elementwise():
    p = GateParams()
    v = decide(np.array([0.1, 0.1, 0.01, -0.1, 0.1]), np.array([1e-5, 1e-5, 1e-6, -1e-5, 1e-5]),
               np.array([0.01, 0.01, 0.01, 0.01, 0.06]), np.array([1e-4, 0.5, 1e-4, 1.0, 1e-4]),
               np.array([1.0, 1.0, 1.0, 1e-4, 1.0]), p)
    assert list(v) == ["regression", "inconclusive", "inconclusive", "improvement", "inconclusive"]


def test_rows_only_in_one_file_are_listed_and_impl_filter():
    b = [_row("a", _lognormal(1e-4, 10, 0.01, 1)), _row("gone", _lognormal(1e-4, 10, 0.01, 2)), _row("a", _lognormal(1e-4, 10, 0.01, 3), impl="torch")]
    c = [_row("a", _lognormal(1e-4, 10, 0.01, 4)), _row("new", _lognormal(1e-4, 10, 0.01, 5)), _row("a", _lognormal(1e-4, 10, 0.01, 6), impl="torch")]
    rep = compare(_results(b), _results(c))
    assert [x.key for x in rep.comparisons] == [("a", "triton", "S1", "bf16")]
    assert rep.only_in_baseline == (("gone", "triton", "S1", "bf16"),)
    assert rep.only_in_candidate == (("new", "triton", "S1", "bf16"),)
    rep_all = compare(_results(b), _results(c), GateParams(impls=None))
    assert {x.impl for x in rep_all.comparisons} == {"triton", "torch"}


def test_refusals():
    a = _results([_row("a", [1e-4] * 10)], gpu="NVIDIA H200", path="a.json")
    h100 = _results([_row("a", [1e-4] * 10)], gpu="NVIDIA H100 80GB HBM3", path="h.json")
    with pytest.raises(RooflineError, match="GPU models differ.*H200.*H100"):
        compare(a, h100)
    rep = compare(a, h100, allow_hardware_mismatch=True)
    assert rep.hardware_mismatch and any("--allow-hardware-mismatch" in n for n in rep.notes)
    with pytest.raises(RooflineError, match="no environment.gpu_name"):
        compare(a, _results([_row("a", [1e-4] * 10)], gpu="unknown"))
    dup = _results([_row("a", [1e-4] * 10), _row("a", [2e-4] * 10)], path="dup.json")
    with pytest.raises(RooflineError, match="dup.json: duplicate row for op 'a'"):
        compare(a, dup)
    with pytest.raises(RooflineError, match="no rows for impl triton"):
        compare(_results([_row("a", [1e-4] * 10, impl="torch")]), _results([_row("a", [1e-4] * 10, impl="torch")]))


def test_parse_options():
    assert parse_threshold("5%") == pytest.approx(0.05)
    assert parse_threshold("0.1") == pytest.approx(0.1)
    for bad in ("5", "abc", "-3%", "inf", "nan%"):
        with pytest.raises(RooflineError, match="--threshold"):
            parse_threshold(bad)
    assert parse_impls("triton,torch") == ("triton", "torch")
    assert parse_impls("all") is None
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"


# -- through the real entry point -----------------------------------------------------------------


@pytest.fixture
def files(tmp_path):
    base = synthetic_results(seed=1)
    same_code = synthetic_results(seed=2)  # a rerun of the same code: new noise
    slow = replace(same_code, rows=tuple(
        replace(r, samples_s=tuple(s * 1.25 for s in r.samples_s), p20_s=r.p20_s * 1.25, p50_s=r.p50_s * 1.25, p80_s=r.p80_s * 1.25)
        if (r.op, r.impl, r.shape) == ("gemm", "triton", "M4096-N4096-K4096") else r
        for r in same_code.rows))
    paths = {"base": tmp_path / "base.json", "rerun": tmp_path / "rerun.json", "slow": tmp_path / "slow.json"}
    base.save(paths["base"])
    same_code.save(paths["rerun"])
    slow.save(paths["slow"])
    return paths


def test_cli_pass_and_regression_exit_codes(files, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    r = runner.invoke(app, ["regress", str(files["base"]), str(files["rerun"])])
    assert r.exit_code == 0, r.output
    assert "PASS: 0 regression(s)" in r.output
    r = runner.invoke(app, ["regress", str(files["base"]), str(files["slow"])], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    assert "REGRESSION: 1 regression(s)" in r.output
    assert re.search(r"regression: gemm M4096-N4096-K4096 bf16 \[triton\]: 2[3-7]\.\d% slower", r.output)
    # a stricter threshold than the change: not practical any more -> inconclusive, exit 0
    r = runner.invoke(app, ["regress", str(files["base"]), str(files["slow"]), "--threshold", "30%", "-q"])
    assert r.exit_code == 0 and "1 inconclusive" in r.output


def test_cli_writes_markdown_junit_json_and_step_summary(files, tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    md, xml, js = tmp_path / "o" / "r.md", tmp_path / "o" / "r.xml", tmp_path / "o" / "r.json"
    (tmp_path / "o").mkdir()  # outputs never create folders (no stray folders from a typo)
    r = runner.invoke(app, ["regress", str(files["base"]), str(files["slow"]), "--impl", "all",
                            "--markdown", str(md), "--junit", str(xml), "--json", str(js)])
    assert r.exit_code == 1, r.output
    text = md.read_text()
    assert text.startswith("<!-- rooflinecli-regress -->")
    assert "| **regression** | gemm | triton | M4096-N4096-K4096 | bf16 |" in text
    assert "<details><summary>21 passing</summary>" in text
    assert summary.read_text() == "# earlier step\n" + text  # appended, earlier content kept

    root = ET.parse(xml).getroot()
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 22 and root.get("failures") == "1"
    failed = [c for c in cases if c.find("failure") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failed] == [("regress.gemm", "M4096-N4096-K4096 bf16 [triton]")]

    data = json.loads(js.read_text())
    assert data["schema"] == "rooflinecli.regress/1" and data["exit_code"] == 1
    assert data["counts"]["regression"] == 1 and len(data["rows"]) == 22
    worst = data["rows"][0]
    assert worst["verdict"] == "regression" and worst["rel_change"] == pytest.approx(0.25, abs=0.02)
    assert not list(tmp_path.glob("o/.*.tmp"))  # atomic writes leave no temp files



def test_cli_terminal_table_stops_at_max_rows_most_severe_first(tmp_path):
    """At most --max-rows rows (and lines of each list) print, the regression first; the JSON holds
    every row; 0 shows all; a negative count is a one-line error."""
    b = [_row(f"k{i}", _lognormal(1e-4, 10, 0.01, 10 + i)) for i in range(6)] + [_row(f"gone{i}", _lognormal(1e-4, 10, 0.01, 30 + i)) for i in range(3)]
    c = [_row(f"k{i}", _lognormal(1e-4 * (1.3 if i == 4 else 1.0), 10, 0.01, 20 + i)) for i in range(6)]
    _results(b).save(tmp_path / "b.json")
    _results(c).save(tmp_path / "c.json")
    args = ["regress", str(tmp_path / "b.json"), str(tmp_path / "c.json"), "--allow-missing", "--json", str(tmp_path / "r.json")]
    r = runner.invoke(app, [*args, "--max-rows", "2"], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    table = r.output.split("... 4 more row(s) not shown (4 pass); --max-rows 0 shows every row")[0]
    assert "k4 S1 bf16 [triton]" in table and table.count("[triton]") == 2
    assert r.output.count("missing from candidate:") == 2 and "... 1 more 'missing from candidate' row(s)" in r.output
    assert len(json.loads((tmp_path / "r.json").read_text())["rows"]) == 6
    r = runner.invoke(app, [*args, "--max-rows", "0"], env={"COLUMNS": "200"})
    assert "not shown" not in r.output and r.output.count("missing from candidate:") == 3
    assert all(f"k{i} S1 bf16 [triton]" in r.output for i in range(6))
    r = runner.invoke(app, [*args, "--max-rows", "-3"])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "--max-rows must be >= 0" in r.output

def test_cli_missing_rows_fail_unless_allowed_and_new_rows_are_listed(tmp_path):
    """A baseline row missing from the candidate (a kernel that crashed or was skipped) fails the
    gate; --allow-missing accepts it, still listed. A row only in the candidate is never a failure."""
    b = _results([_row("a", _lognormal(1e-4, 10, 0.01, 1)), _row("gone", _lognormal(1e-4, 10, 0.01, 2))])
    c = _results([_row("a", _lognormal(1e-4, 10, 0.01, 3)), _row("new", _lognormal(1e-4, 10, 0.01, 4))])
    b.save(tmp_path / "b.json")
    c.save(tmp_path / "c.json")
    xml, js, md = tmp_path / "j.xml", tmp_path / "r.json", tmp_path / "r.md"
    args = ["regress", str(tmp_path / "b.json"), str(tmp_path / "c.json"), "--junit", str(xml), "--json", str(js), "--markdown", str(md)]
    r = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    assert "missing from candidate: gone S1 bf16 [triton] (fails the gate; --allow-missing to accept)" in r.output
    assert "only in candidate: new S1 bf16 [triton]" in r.output
    assert r.output.splitlines()[-4].startswith("MISSING: 0 regression(s)")
    fails = {c.get("classname"): c.find("failure").get("type") for c in ET.parse(xml).getroot().iter("testcase") if c.find("failure") is not None}
    assert fails == {"regress.gone": "missing"}
    data = json.loads(js.read_text())
    assert data["exit_code"] == 1 and data["verdict"] == "missing" and data["missing"] == {"rows": 1, "fail": True}
    assert "Missing from the candidate (fails the gate" in md.read_text() and "`gone S1 bf16 (triton)`" in md.read_text()

    r = runner.invoke(app, [*args, "--allow-missing"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "missing from candidate: gone S1 bf16 [triton] (allowed by --allow-missing)" in r.output
    skipped = [c.find("skipped").get("message") for c in ET.parse(xml).getroot().iter("testcase") if c.find("skipped") is not None]
    assert sorted(skipped) == ["missing from the candidate (allowed by --allow-missing)", "only in candidate: not compared"]
    assert json.loads(js.read_text())["missing"] == {"rows": 1, "fail": False}


def test_cli_empty_candidate_is_exit_2(tmp_path, files):
    """An empty candidate (no rows, none for --impl, or none timed) cannot pass the gate: one line, exit 2."""
    nan = float("nan")
    untimed = ResultRow(op="a", impl="triton", shape="S1", dtype="bf16", samples_s=(), p20_s=nan, p50_s=nan, p80_s=nan,
                        flops=1e9, bytes=1e6, correct=False, method="untimed")
    _results([]).save(tmp_path / "empty.json")
    _results([untimed]).save(tmp_path / "untimed.json")
    _results([_row("a", _lognormal(1e-4, 10, 0.01, 1), impl="torch")]).save(tmp_path / "torch_only.json")
    for name, why in (("empty.json", "candidate has no rows"), ("untimed.json", "was timed"), ("torch_only.json", "candidate has no rows for impl triton")):
        r = runner.invoke(app, ["regress", str(files["base"]), str(tmp_path / name)])
        assert r.exit_code == 2, (name, r.output)
        assert r.output.count("\n") == 1 and r.output.startswith(f"error: {tmp_path / name}: ") and why in r.output, r.output
    # an empty baseline (a wrong file, a crashed baseline run) would pass every candidate: refused too
    r = runner.invoke(app, ["regress", str(tmp_path / "empty.json"), str(files["base"])])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "baseline has no timed rows for impl triton" in r.output, r.output


def test_cli_refuses_other_gpu_and_schema_with_one_line(files, tmp_path):
    other = synthetic_results(seed=3, gpu_name="NVIDIA H100 80GB HBM3")
    other.save(tmp_path / "h100.json")
    r = runner.invoke(app, ["regress", str(files["base"]), str(tmp_path / "h100.json")])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and r.output.startswith("error: GPU models differ")
    r = runner.invoke(app, ["regress", str(files["base"]), str(tmp_path / "h100.json"), "--allow-hardware-mismatch", "-q"])
    assert r.exit_code in (0, 1) and "compared)" in r.output
    raw = json.loads(files["base"].read_text())
    raw["schema"] = "rooflinecli.results/0"
    (tmp_path / "old.json").write_text(json.dumps(raw))
    for extra in ([], ["--allow-hardware-mismatch"]):
        r = runner.invoke(app, ["regress", str(files["base"]), str(tmp_path / "old.json"), *extra])
        assert r.exit_code == 2 and "results schema 'rooflinecli.results/0' is not supported" in r.output
        assert "Traceback" not in r.output
    r = runner.invoke(app, ["regress", str(files["base"]), str(files["rerun"]), "--threshold", "5"])
    assert r.exit_code == 2 and r.output.startswith("error: --threshold 5: write a percentage")


def test_untimed_rows_from_failed_checks(tmp_path):
    """bench stores a row that failed its correctness check untimed (no samples): in the candidate
    that fails the gate (exit 1); in the baseline only, the row is listed as not compared."""
    nan = float("nan")

    def untimed(op):
        return ResultRow(op=op, impl="triton", shape="S1", dtype="bf16", samples_s=(), p20_s=nan, p50_s=nan, p80_s=nan,
                         flops=1e9, bytes=1e6, correct=False, method="untimed", note="max rel error 0.3 > 0.02")

    ok = [_row(op, _lognormal(1e-4, 10, 0.01, i)) for i, op in enumerate(("a", "b"))]
    _results([*ok, untimed("c")]).save(tmp_path / "b.json")
    _results([ok[0], untimed("b"), _row("c", _lognormal(1e-4, 10, 0.01, 9))]).save(tmp_path / "c.json")
    xml, js = tmp_path / "j.xml", tmp_path / "r.json"
    r = runner.invoke(app, ["regress", str(tmp_path / "b.json"), str(tmp_path / "c.json"), "--junit", str(xml), "--json", str(js)], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    assert "failed: b S1 bf16 [triton]: candidate failed its correctness check, so it was not timed: max rel error 0.3" in r.output
    assert "not compared: c S1 bf16 [triton]: baseline row untimed" in r.output
    assert "1 failed correctness, 0 regression(s)" in r.output
    data = json.loads(js.read_text())
    assert [x["verdict"] for x in data["rows"]] == ["failed", "pass"]
    assert data["rows"][0]["candidate_median_s"] is None
    cases = {c.get("name").split()[0] + c.get("classname"): c for c in ET.parse(xml).getroot().iter("testcase")}
    assert cases["S1regress.b"].find("failure").get("type") == "correctness"
    assert cases["S1regress.c"].find("skipped") is not None


def test_example_workflow_uses_real_commands_and_options():
    """Every `roofline ...` call in .github/workflows/gpu-bench.yml names a real command and real
    options, so the example cannot drift from the CLI."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / ".github" / "workflows" / "gpu-bench.yml").read_text()
    text = text.replace("\\\n", " ")
    calls = re.findall(r"\.venv/bin/roofline ([^\n]+)", text)
    assert {c.split()[0] for c in calls} >= {"bench", "regress", "report", "baseline"}
    for call in calls:
        words = call.split()
        path = words[:2] if words[0] == "baseline" else words[:1]
        r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "250"})
        assert r.exit_code == 0, (path, r.output)
        for opt in (w for w in words if w.startswith("--")):
            assert opt in r.output, f"`roofline {' '.join(path)}` has no option {opt}"


@pytest.mark.parametrize("option", ["--markdown", "--junit", "--json", "GITHUB_STEP_SUMMARY"])
def test_an_output_that_cannot_be_written_is_exit_2_not_a_regression(files, tmp_path, monkeypatch, option):
    """Exit 1 means a regression to CI: a failed write (here a folder where the file should go) must
    be a one-line error with exit 2, even when the comparison itself found a regression."""
    in_the_way = tmp_path / "in_the_way"
    in_the_way.mkdir()
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    args = ["regress", str(files["base"]), str(files["slow"]), "-q"]
    if option == "GITHUB_STEP_SUMMARY":
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(in_the_way))
    else:
        args += [option, str(in_the_way)]
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    errors = [line for line in r.output.splitlines() if line.startswith("error: ")]
    shown = "$GITHUB_STEP_SUMMARY" if option == "GITHUB_STEP_SUMMARY" else option
    assert len(errors) == 1 and errors[0].startswith(f"error: {shown} {in_the_way}: ")
    assert in_the_way.is_dir() and not list(tmp_path.glob(".in_the_way*"))  # nothing half-written left behind


def test_inconclusive_when_slower_in_rank_but_not_in_median():
    """The U test can find the candidate significantly slower while its median is lower (here a
    bimodal candidate): only the statistical half holds, so the timing verdict is inconclusive, and
    the reason and table quote the "slower" p-value that makes it so. The candidate is bimodal, so
    the row is shown unstable, with that timing verdict kept."""
    base = np.linspace(90e-6, 110e-6, 20)
    cand = np.array([99.9e-6] * 11 + [150e-6] * 10)
    rep = compare(_results([_row("k", base)]), _results([_row("k", cand)]))
    c = rep.comparisons[0]
    assert c.rel_change < 0 and c.p_slower_adj < 0.01
    assert c.timing_verdict == "inconclusive" and rep.exit_code == 0
    assert c.verdict == "unstable" and c.unstable_reason.startswith("candidate bimodal (11 + 10 samples, 50.2% gap)")
    assert c.p_shown == c.p_slower_adj
    assert c.reason.endswith(f"p={c.p_slower_adj:.2g} < 0.01: significant only, below the practical limit)"), c.reason
    assert "; timing alone: inconclusive (0.1% faster" in c.reason
