"""Property test: random malformed spec files, model configs, results files and option values thrown
at the CLI. Every one ends in a correct answer (exit 0) or ONE ``error: ...`` line and exit 2 (the
regress gate may also answer 1, its verdict), with no traceback, in bounded time, and nothing
written outside the temporary folder the test works in.

Runs in process (``CliRunner``) for speed, plus a few real subprocesses for the exit code and
stream a user sees. The number of hostile inputs tried is printed at the end (``-s`` shows it) and
asserted to be at least ``MIN_TRIED``. CI cost: about 30-60 s on 2 cores.
"""

from __future__ import annotations

import json
import os
import string
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.hardware import specs_dir
from rooflinecli.model_registry import presets_dir

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_RESULTS = ROOT / "tests" / "fixtures" / "h200-2026-11-30" / "results.json"
#: seconds one hostile input may take in process (the issue: under 5 s each)
MAX_S = 5.0
MIN_TRIED = 350
TRIED: list[str] = []

SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# ---- hostile atoms -------------------------------------------------------------------------------

HOSTILE_WORDS = [
    "inf", "-inf", "nan", "NaN", "1e400", "-1e400", "-1", "0", "-0", "1e-300", "1e308", "1e40",
    "99999999999999999999999", str(2**63), str(2**63 - 1), str(-(2**63)), "1e8", "100000000",
    "", " ", "abc", "1k", "1.5k", "0.5", "1e", "0x10", "1_000", "[/]", "[bold]x[/]", "\x1b[31mred",
    "\x1b]0;title\x07", "a\nb", "\t", "\x00", "../../etc/passwd", "/dev/zero", "/dev/null", "-", "--", "-h2",
]
hostile_word = st.one_of(
    st.sampled_from(HOSTILE_WORDS),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet=string.printable, max_size=12),
)

JSON_HOSTILE = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 1e-300, 1e300, 2**63, 10**30, 10**9, "", "[/]", "\x1b[2J", "12",
                     [], [1, "x"], {}, {"a": {"b": {}}}, 0.5, 1.5]),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
TOML_HOSTILE = st.sampled_from([
    "nan", "inf", "-inf", "-1", "0", "1e40", "1e-300", "99999999999999999999", "true", '"[/]"', '"\\u001b[31m"',
    '""', "[1, 2]", "{ a = 1 }", '"x"', "0.0", "1e308", "[[1]]", '"h100-sxm"', "2026-01-01", "=", "[", '"',
])


# ---- harness -------------------------------------------------------------------------------------


#: the repository's data folders, where a command that writes by default would write (source files
#: are left out: other work may edit them while the suite runs)
DATA_DIRS = ("hardware_specs", "reports", "tests/fixtures", "tests/golden", "rooflinecli/model_presets", "kernels/tuned")


#: top-level folders the test tools themselves create while the suite runs (in parallel runs,
#: another worker may create them in the middle of this module)
TOOL_CACHES = frozenset({".hypothesis", ".pytest_cache"})


def _snapshot() -> dict[str, tuple[float, int]]:
    """mtime and size of every file in the data folders, and the names of the repository's
    top-level entries and of the temporary folder's (nothing may appear or change there)."""
    out: dict[str, tuple[float, int]] = {}
    for top in DATA_DIRS:
        for p in (ROOT / top).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                st_ = p.stat()
                out[str(p)] = (st_.st_mtime, st_.st_size)
    for p in ROOT.iterdir():
        if p.name not in TOOL_CACHES:
            out[str(p)] = (0.0, 0)
    return out


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The one folder the commands may write in (the cwd while they run); the repository must be
    untouched afterwards."""
    before = _snapshot()
    d = tmp_path_factory.mktemp("hostile")
    old = os.getcwd()
    os.chdir(d)
    try:
        yield d
    finally:
        os.chdir(old)
    after = _snapshot()
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"hostile inputs touched files outside the temporary folder: {changed[:10]}"
    print(f"\nhostile inputs tried: {len(TRIED)}")


runner = CliRunner()


def check(args: list[str], ok_codes=(0, 2)) -> None:
    TRIED.append(" ".join(args))
    t0 = time.perf_counter()
    r = runner.invoke(app, args)
    took = time.perf_counter() - t0
    out = r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{args}: {r.exception!r}\n{out}"
    assert "Traceback" not in out, f"{args}:\n{out}"
    assert r.exit_code in ok_codes, f"{args}: exit {r.exit_code}\n{out}"
    if r.exit_code == 2:
        errors = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(errors) >= 1 and errors[-1].startswith("error: "), f"{args}: not one error line:\n{out}"
    assert took < MAX_S, f"{args}: took {took:.1f} s"


# ---- option values -------------------------------------------------------------------------------

#: (command template, options that may be corrupted); {v} is replaced by the hostile value
TEMPLATES: list[tuple[list[str], list[str]]] = [
    (["analyze", "--no-ops", "--json"], ["--prompt", "--gen", "--batch", "--tp", "--ep", "--kv-bits", "--efficiency", "--expert-skew",
                                         "--launch-overhead-us", "--kv-block-size", "--prefill-chunk", "--model", "--hw", "--kv-dtype"]),
    (["kv", "--model", "llama-3-8b", "--json"], ["--context", "--batch", "--kv-dtype", "--model"]),
    (["moe", "--model", "mixtral-8x7b", "--json"], ["--batch", "--context", "--skew"]),
    (["attention-io", "--seq", "4096", "--head-dim", "128", "--json"], ["--seq", "--head-dim", "--batch", "--heads"]),
    (["compare", "--model", "gpt2", "--hw", "h100-sxm,h200", "--json"], ["--hw", "--batch", "--prompt", "--gen"]),
    (["rope", "--model", "llama-3-8b", "--target-context", "32k", "--json"], ["--target-context", "--trained-context"]),
    (["speculative", "-k", "3", "--acceptance", "0.8", "--json"], ["-k", "--acceptance", "--draft-cost-ratio"]),
    (["disagg", "--model", "gpt2", "--prompt", "1k", "--gen", "128", "--rate", "5", "--ttft-target", "0.5", "--tpot-target", "0.05", "--json"],
     ["--rate", "--ttft-target", "--tpot-target", "--prompt", "--gen", "--tp"]),
    (["sweep", "--model", "gpt2", "--hw", "h100-sxm", "--out", "s.csv", "--batch", "1,8", "--context", "1k", "--quiet"],
     ["--batch", "--context", "--out", "--tp", "--prefill-chunk", "--phase"]),
    (["model", "show", "gpt2", "--json"], []),
    (["hw", "show", "h200", "--json"], []),
]


@settings(max_examples=160, **SETTINGS)
@given(data=st.data())
def test_hostile_option_values(work, data):
    base, options = data.draw(st.sampled_from(TEMPLATES))
    args = list(base)
    value = data.draw(hostile_word)
    if options and data.draw(st.booleans()):
        opt = data.draw(st.sampled_from(options))
        if opt in args:
            args[args.index(opt) + 1] = value
        else:
            args += [opt, value]
    else:  # a positional, an unknown option, or a missing value
        how = data.draw(st.sampled_from(["positional", "unknown", "dangling"]))
        if how == "positional" and base[0] in ("model", "hw"):
            args[2] = value
        elif how == "unknown":
            args += ["--no-such-option-" + "".join(c for c in value if c.isalnum())[:8], value]
        else:
            args += [options[0]] if options else ["--json", "--json"]
    check(args)


# ---- spec files ----------------------------------------------------------------------------------

SPEC_TEXT = (specs_dir() / "h100-sxm.toml").read_text(encoding="utf-8").replace('id = "h100-sxm"', 'id = "hostile-gpu"')
SPEC_LINES = [i for i, ln in enumerate(SPEC_TEXT.splitlines()) if "=" in ln and not ln.lstrip().startswith("#")]


@settings(max_examples=60, **SETTINGS)
@given(data=st.data())
def test_hostile_spec_files(work, data):
    lines = SPEC_TEXT.splitlines()
    how = data.draw(st.sampled_from(["value", "delete", "junk", "deep", "base"]))
    if how == "value":
        i = data.draw(st.sampled_from(SPEC_LINES))
        lines[i] = lines[i].split("=")[0] + "= " + data.draw(TOML_HOSTILE)
    elif how == "delete":
        del lines[data.draw(st.sampled_from(SPEC_LINES))]
    elif how == "junk":
        lines.insert(data.draw(st.integers(0, len(lines))), data.draw(st.text(max_size=30)))
    elif how == "deep":
        lines.insert(1, "deep = " + "[" * data.draw(st.integers(100, 5000)))
    else:
        lines = ['id = "loop-a"', 'kind = "measured"', f'base = "{data.draw(st.sampled_from(["spec.toml", "../spec.toml", "h200", "nope", "/dev/zero"]))}"']
    path = work / "spec.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    command = data.draw(st.sampled_from([["hw", "show", str(path)], ["hw", "validate", str(path)], ["analyze", "--hw", str(path), "--no-ops"],
                                         ["compare", "--model", "gpt2", "--hw", f"h200,{path}"]]))
    check(command)


# ---- model configs -------------------------------------------------------------------------------

PRESETS = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(presets_dir().glob("*.json"))}


@settings(max_examples=60, **SETTINGS)
@given(data=st.data())
def test_hostile_model_configs(work, data):
    raw = json.loads(json.dumps(PRESETS[data.draw(st.sampled_from(sorted(PRESETS)))]))
    keys = [k for k in raw if k != "_rooflinecli"]
    how = data.draw(st.sampled_from(["value", "value", "delete", "meta", "deep"]))
    if how == "value":
        raw[data.draw(st.sampled_from(keys + ["num_hidden_layers", "rope_theta", "sliding_window"]))] = data.draw(JSON_HOSTILE)
    elif how == "delete":
        del raw[data.draw(st.sampled_from(keys))]
    elif how == "meta":
        raw["_rooflinecli"] = {"id": data.draw(st.sampled_from(["[/]", "\x1b[31mx", "a" * 5000, "ok-id"])),
                               "display_name": data.draw(JSON_HOSTILE)}
    text = json.dumps(raw)
    if how == "deep":
        text = "[" * data.draw(st.integers(100, 100_000)) + "]" * 3
    path = work / "config.json"
    path.write_text(text, encoding="utf-8")
    command = data.draw(st.sampled_from([["model", "show", str(path)], ["kv", "--model", str(path)], ["analyze", "--model", str(path), "--no-ops"],
                                         ["model", "show", str(path), "--json"]]))
    check(command)


# ---- results files -------------------------------------------------------------------------------

RESULTS = json.loads(FIXTURE_RESULTS.read_text(encoding="utf-8"))
RESULTS["rows"] = RESULTS["rows"][:6]
ROW_KEYS = sorted({k for r in RESULTS["rows"] for k in r})


@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_hostile_results_files(work, data):
    raw = json.loads(json.dumps(RESULTS))
    how = data.draw(st.sampled_from(["field", "field", "drop", "top", "samples"]))
    row = raw["rows"][data.draw(st.integers(0, len(raw["rows"]) - 1))]
    if how == "field":
        row[data.draw(st.sampled_from(ROW_KEYS))] = data.draw(JSON_HOSTILE)
    elif how == "drop":
        del row[data.draw(st.sampled_from(ROW_KEYS))]
    elif how == "top":
        raw[data.draw(st.sampled_from(["rows", "schema", "environment", "hardware_spec"]))] = data.draw(JSON_HOSTILE)
    else:
        row["samples_s"] = [1e-3] * data.draw(st.sampled_from([0, 1, 2, 100_001]))
    path = work / "results.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    good = work / "good.json"
    if not good.exists():
        good.write_text(json.dumps(RESULTS), encoding="utf-8")
    command = data.draw(st.sampled_from([(["validate", str(path), "--json"], (0, 2)), (["regress", str(good), str(path)], (0, 1, 2)),
                                         (["regress", str(path), str(good)], (0, 1, 2))]))
    check(command[0], ok_codes=command[1])


# ---- summaries that their samples contradict -----------------------------------------------------

#: how a row's summary or samples are tampered with: (field, factor); p50 x 10 with the samples
#: unchanged is the classic (a candidate 10x slower whose p50_s was left as it was)
TAMPER = st.tuples(st.sampled_from(["p20_s", "p50_s", "p80_s", "samples_s"]),
                   st.sampled_from([10.0, 0.1, 100.0, 1e-3, 3.0, 0.5, 1.0 + 1e-9]))


@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_hostile_summaries_are_refused(work, data):
    """A timed row whose stored p20/p50/p80 its samples contradict is refused by every reader (one
    line naming the row); a rounding-size difference is accepted."""
    raw = json.loads(json.dumps(RESULTS))
    i = data.draw(st.integers(0, len(raw["rows"]) - 1))
    field_, factor = data.draw(TAMPER)
    row = raw["rows"][i]
    if field_ == "samples_s":
        row["samples_s"] = [x * factor for x in row["samples_s"]]
    else:
        row[field_] *= factor
    path = work / "tampered.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    good = work / "good.json"
    good.write_text(json.dumps(RESULTS), encoding="utf-8")
    command = data.draw(st.sampled_from([["validate", str(path), "--json"], ["regress", str(good), str(path), "-q"],
                                         ["regress", str(path), str(good), "-q"], ["baseline", "update", str(path), "--dir", str(work / "bl")]]))
    TRIED.append(" ".join(command))
    r = runner.invoke(app, command)
    assert "Traceback" not in r.output and (r.exception is None or isinstance(r.exception, SystemExit)), r.output
    if factor == 1.0 + 1e-9:
        assert r.exit_code in (0, 1), r.output
    else:
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
        assert r.exit_code == 2 and len(errors) == 1 and f"rows[{i}]" in errors[0] and "disagrees" in errors[0], r.output


# ---- user strings: escapes, bidi, zero-width, look-alikes ------------------------------------------

#: characters that must never reach a terminal, Markdown or XML raw
INVISIBLE = ["\u202e", "\u202d", "\u2066", "\u2069", "\u200b", "\u200d", "\u2060", "\ufeff", "\u061c", "\u00ad"]
NAME_PARTS = st.sampled_from(["gemm", "g\u0435mm", "gem\u200bm", "caf\u00e9", "cafe\u0301", "[/]", "[bold]x[/]", "<b>x</b>", "a|b", "`x`",
                              "*x*", "&amp;", "\u202egemm", "x\u2066y\u2069", "\ufeffop", "\u05d0\u05d1"])


@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_hostile_names_are_data_in_every_renderer(work, data):
    """Op names with markup, bidi, zero-width and look-alike characters, and an environment field
    with a terminal escape: the terminal table, Markdown and JUnit show none of those characters
    raw, and two names that differ only in such characters are shown differently."""
    raw = json.loads(json.dumps(RESULTS))
    cand = json.loads(json.dumps(RESULTS))
    a, b = data.draw(NAME_PARTS), data.draw(NAME_PARTS)
    raw["rows"][0]["op"], cand["rows"][0]["op"] = a, b  # a only in the baseline, b only in the candidate (when a != b)
    raw["environment"]["driver"] = "550\x1b]0;owned\x07\u202e"
    cand["environment"]["driver"] = "560\x1b[2J"
    bp, cp = work / "nb.json", work / "nc.json"
    bp.write_text(json.dumps(raw), encoding="utf-8")
    cp.write_text(json.dumps(cand), encoding="utf-8")
    md, xml = work / "n.md", work / "n.xml"
    for p in (md, xml):
        p.unlink(missing_ok=True)
    args = ["regress", str(bp), str(cp), "--impl", "all", "--markdown", str(md), "--junit", str(xml), "--allow-missing"]
    TRIED.append(" ".join(args))
    r = runner.invoke(app, args, env={"COLUMNS": "250", "GITHUB_STEP_SUMMARY": ""})
    assert r.exit_code in (0, 1), r.output
    for text in (r.output, md.read_text(encoding="utf-8"), xml.read_text(encoding="utf-8")):
        assert "\x1b" not in text and "\x07" not in text and not any(c in text for c in INVISIBLE), ascii(text[:400])
    if a != b:
        missing = next(ln for ln in r.output.splitlines() if ln.startswith("missing from candidate: "))
        new = next(ln for ln in r.output.splitlines() if ln.startswith("only in candidate: "))
        assert missing.split(": ", 1)[1].split(" (")[0] != new.split(": ", 1)[1].split(" (")[0], (missing, new)


# ---- output targets ------------------------------------------------------------------------------

@settings(max_examples=30, **SETTINGS)
@given(data=st.data())
def test_hostile_output_targets(work, data):
    """Outputs named at a FIFO, a device, a folder, the command's own input, or a file of another
    kind: one line and exit 2, nothing written, the inputs unchanged, in bounded time."""
    fifo = work / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    good = work / "good.json"
    good.write_text(json.dumps(RESULTS), encoding="utf-8")
    spec = work / "not-results.toml"
    spec.write_text('id = "mine"\n', encoding="utf-8")
    target = data.draw(st.sampled_from([str(fifo), "/dev/zero", "/dev/full", "/dev/null", str(work), str(good), str(spec)]))
    how = data.draw(st.sampled_from(["--json", "--markdown", "--junit", "GITHUB_STEP_SUMMARY", "baseline"]))
    before = {p: p.read_bytes() for p in (good, spec)}
    env = {"GITHUB_STEP_SUMMARY": ""}
    if how == "GITHUB_STEP_SUMMARY":
        args, env = ["regress", str(good), str(good), "-q"], {"GITHUB_STEP_SUMMARY": target}
    elif how == "baseline":  # the baseline file is a FIFO, a device, a folder or another kind of file
        bl = work / "bl-target"
        bl.mkdir(exist_ok=True)
        dest = bl / "nvidia-h200.json"
        if dest.is_symlink() or dest.exists():
            dest.unlink() if not dest.is_dir() or dest.is_symlink() else None
        os.symlink(target, dest)
        args = ["baseline", "update", str(good), "--dir", str(bl)]
    else:
        args = ["regress", str(good), str(good), "-q", how, target]
    TRIED.append(f"{how}={target}")
    t0 = time.perf_counter()
    r = runner.invoke(app, args, env=env)
    assert time.perf_counter() - t0 < MAX_S
    assert "Traceback" not in r.output and (r.exception is None or isinstance(r.exception, SystemExit)), r.output
    if how == "GITHUB_STEP_SUMMARY" and target == str(spec):  # a regular file that is no input: appended to
        assert r.exit_code == 0 and spec.read_bytes().startswith(before[spec]), r.output
        spec.write_text('id = "mine"\n', encoding="utf-8")
        return
    assert {p: p.read_bytes() for p in before} == before
    if target == "/dev/null" and how != "baseline":
        assert r.exit_code in (0, 2), r.output  # /dev/null refused as a file, or appended to harmlessly: never blocks
    else:
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
        assert r.exit_code == 2 and len(errors) == 1, r.output


# ---- corrupt baseline files ----------------------------------------------------------------------


def _paths(o, pre=()):
    yield pre
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, pre + (k,))
    elif isinstance(o, list):
        for j, v in enumerate(o[:2]):
            yield from _paths(v, pre + (j,))


@settings(max_examples=50, **SETTINGS)
@given(data=st.data())
def test_hostile_baseline_files(work, data):
    """A baseline file with any field replaced by a hostile value: ``baseline show``, ``baseline
    update`` and ``regress`` answer or say one line, exit 2."""
    src = work / "bsrc.json"
    bdir = work / "bsrc-dir"
    if not src.exists():
        src.write_text(json.dumps(RESULTS), encoding="utf-8")
        r = runner.invoke(app, ["baseline", "update", str(src), "--dir", str(bdir)])
        assert r.exit_code == 0, r.output
    good = json.loads(next(bdir.glob("*.json")).read_text(encoding="utf-8"))
    paths = [p for p in _paths(good) if p]
    path = data.draw(st.sampled_from(paths))
    doc = json.loads(json.dumps(good))
    o = doc
    for k in path[:-1]:
        o = o[k]
    o[path[-1]] = data.draw(JSON_HOSTILE)
    d = work / "bcorrupt"
    d.mkdir(exist_ok=True)
    f = d / "nvidia-h200.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    command = data.draw(st.sampled_from([(["baseline", "show", "nvidia-h200", "--dir", str(d)], (0, 2)), (["baseline", "show", "--dir", str(d)], (0, 2)),
                                         (["baseline", "update", str(src), "--dir", str(d)], (0, 2)), (["regress", str(f), str(src), "-q"], (0, 1, 2))]))
    check(command[0], ok_codes=command[1])


# ---- a few real processes ------------------------------------------------------------------------

SUBPROCESS_CASES = [
    ["analyze", "--prompt", "inf"],
    ["kv", "--model", "llama-3-8b", "--context", "99999999999999999999999"],
    ["analyze", "--batch", "x"],
    ["hw", "show"],
    ["model", "show", "/dev/zero"],
    ["report", "--model", "gpt2", "--hw", "h100-sxm", "--out", "/dev/full"],
    ["golden", "--path", "{negative_rtol}"],
]


@pytest.mark.parametrize("args", SUBPROCESS_CASES, ids=lambda a: "-".join(a[:2]))
def test_real_process_prints_one_error_line_and_exits_2(args, tmp_path):
    TRIED.append(" ".join(args))
    golden = tmp_path / "golden.json"
    golden.write_text(json.dumps({"schema": "rooflinecli.golden/1", "entries": {}, "rtol": -1}), encoding="utf-8")
    args = [str(golden) if a == "{negative_rtol}" else a for a in args]
    proc = subprocess.run([sys.executable, "-m", "rooflinecli", *args], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    assert Path("/dev/full").is_char_device() if Path("/dev/full").exists() else True


def test_count_of_hostile_inputs(work):
    """Runs last in this module: the property tests above tried at least MIN_TRIED inputs."""
    print(f"\nhostile inputs tried so far: {len(TRIED)}")
    assert len(TRIED) >= MIN_TRIED
