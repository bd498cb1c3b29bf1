"""Hostile inputs, one by one: each ends in one ``error:`` line and exit 2 (or a
correct answer), fast, with nothing clobbered. The random search over the same classes is
tests/cli/test_hostile_props.py."""

from __future__ import annotations

import json
import os
import re
import threading
import time

import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.errors import RooflineError, markup_safe, one_line, read_user_file
from rooflinecli.fmt import json_dumps
from rooflinecli.model_registry import presets_dir

runner = CliRunner()


def run(*args: str):
    t0 = time.perf_counter()
    r = runner.invoke(app, list(args))
    assert time.perf_counter() - t0 < 5, f"{args} took over 5 s"
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    return r


def one_error(r, *needles: str) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# ---- the reader ----------------------------------------------------------------------------------


def test_reader_refuses_folder_device_fifo_and_oversized_files_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    done: list[str] = []

    def read_fifo():  # a reader that opened the FIFO would block here forever
        try:
            read_user_file(fifo, "model config file")
        except RooflineError as e:
            done.append(str(e))

    t = threading.Thread(target=read_fifo, daemon=True)
    t.start()
    t.join(5)
    assert done and "is a FIFO" in done[0]
    for path, needle in ((tmp_path, "is a folder"), ("/dev/zero", "is a device"), (tmp_path / "nope.json", "no such")):
        with pytest.raises(RooflineError, match=needle):
            read_user_file(path, "model config file")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2000)
    with pytest.raises(RooflineError, match=r"2,000 bytes is too large .*limit 1,000 bytes"):
        read_user_file(big, "model config file", max_bytes=1000)
    for args in (("model", "show", str(fifo)), ("hw", "show", "/dev/zero"), ("validate", str(tmp_path)), ("model", "show", "/dev/zero")):
        one_error(run(*args))


@pytest.mark.parametrize("depth", [1000, 200_000])
def test_deep_nesting_is_one_line(tmp_path, depth):
    cfg = tmp_path / "config.json"
    cfg.write_text("[" * depth + "]" * depth)
    one_error(run("model", "show", str(cfg)), str(cfg))
    spec = tmp_path / "gpu.toml"
    spec.write_text("x = " + "[" * depth + "]" * depth + "\n")
    one_error(run("hw", "show", str(spec)), str(spec))


def test_non_utf8_and_nan_literals_are_one_line(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_bytes(b"\xff\xfe{}")
    one_error(run("model", "show", str(bad)), "not UTF-8")
    raw = json.loads((presets_dir() / "gpt2.json").read_text())
    bad.write_text(json.dumps(raw).replace('"n_embd": 768', '"n_embd": NaN'))
    one_error(run("model", "show", str(bad)), "NaN is not a JSON number")


# ---- bounds before any work ---------------------------------------------------------------------


def _config(tmp_path, **changes):
    raw = json.loads((presets_dir() / "llama-3-8b.json").read_text())
    raw.update(changes)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(raw))
    return str(p)


def test_model_sizes_are_bounded(tmp_path):
    one_error(run("analyze", "--model", _config(tmp_path, num_hidden_layers=10**9), "--no-ops"),
              "num_hidden_layers", "limit of 10,000")
    one_error(run("model", "show", _config(tmp_path, rope_theta=1e300)), "rope_theta")
    one_error(run("model", "show", _config(tmp_path, hidden_size=2**64)), "hidden_size")


@pytest.mark.parametrize(
    "args, needles",
    [
        (("analyze", "--gen", "100000000"), ("--gen", "limit of 4,194,304")),
        (("analyze", "--prompt", "inf"), ("--prompt", "finite")),
        (("analyze", "--prompt", "1e400"), ("--prompt", "finite")),
        (("analyze", "--prompt", "-5"), ("--prompt", "negative")),
        (("kv", "--model", "llama-3-8b", "--context", "99999999999999999999999"), ("--context", "limit")),
        (("kv", "--model", "llama-3-8b", "--batch", "99999999999999999999999"), ("--batch", "2**53")),
        (("moe", "--model", "mixtral-8x7b", "--batch", "99999999999999999999999"), ("--batch", "2**53")),
        (("speculative", "--draft-tokens", "100000000", "--acceptance", "0.5"), ("--draft-tokens", "limit of 1,024")),
        (("rope", "--model", "llama-3-8b", "--scale", "inf"), ("--scale", "finite")),
        (("disagg", "--model", "gpt2", "--prompt", "1k", "--gen", "128", "--rate", "inf", "--ttft-target", "0.5", "--tpot-target", "0.05"),
         ("--rate", "finite")),
        (("sweep", "--model", "gpt2", "--hw", "h100-sxm", "--out", "x.csv", "--batch", "1..5000000", "--context", "1..5000000"),
         ("rows", "limit of 100,000,000")),
        (("sweep", "--model", "gpt2", "--hw", "h100-sxm", "--out", "x.csv", "--batch", "1..9000000000000000:x1.0000001"),
         ("--batch", "10,000,000 values")),
    ],
)
def test_absurd_option_values_are_refused_before_any_work(tmp_path, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    one_error(run(*args), *needles)
    assert not (tmp_path / "x.csv").exists()


# ---- parse errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, needle",
    [
        (("analyze", "--batch", "x"), "Invalid value for '--batch'"),
        (("analyze", "--no-such-option"), "No such option: --no-such-option"),
        (("hw", "show"), "Missing argument"),
        (("no-such-command",), "No such command"),
        (("moe",), "Missing option '--model'"),  # kv has the default workload's model; moe needs an MoE one
    ],
)
def test_parse_errors_are_one_line_not_the_usage_box(args, needle):
    r = run(*args)
    assert "Usage:" not in r.output and "Try '" not in r.output
    one_error(r, needle)


def test_help_still_prints_usage():
    for args in (("-h",), ("analyze", "-h"), ("hw", "--help")):
        r = run(*args)
        assert r.exit_code == 0 and "Usage:" in r.output


# ---- names are data ------------------------------------------------------------------------------


def test_markup_in_names_prints_as_itself(tmp_path):
    raw = json.loads((presets_dir() / "llama-3-8b.json").read_text())
    raw["_rooflinecli"] = {"id": "evil[/]x", "display_name": "[bold]shout[/] [red]"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(raw))
    for args in (("model", "show", str(p)), ("analyze", "--model", str(p), "--no-ops"), ("compare", "--model", str(p), "--hw", "h100-sxm,h200"),
                 ("kv", "--model", str(p))):
        r = run(*args)
        assert r.exit_code == 0, r.output
        assert "evil[/]x" in r.stdout
    assert "[bold]shout[/] [red]" in run("model", "show", str(p)).stdout


def test_escape_codes_in_names_are_refused_and_never_printed(tmp_path):
    raw = json.loads((presets_dir() / "gpt2.json").read_text())
    raw["_rooflinecli"] = {"id": "x\x1b[2Jy"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(raw))
    line = one_error(run("model", "show", str(p)), "field '_rooflinecli.id' must not hold control characters")
    assert "\x1b" not in line
    assert one_line("a\x1b[31mb\x07c\nd") == "abc d"
    assert markup_safe("[/]\x1b[0m") == "\\[/]"


# ---- JSON output ---------------------------------------------------------------------------------


def test_json_output_never_holds_nan_or_infinity():
    text = json_dumps({"ratio": float("nan"), "inf": float("inf"), "rows": [1.0, float("-inf")]})
    assert json.loads(text) == {"ratio": None, "inf": None, "rows": [1.0, None]}
    for args in (("analyze", "--json", "--gen", "1"), ("kv", "--model", "deepseek-v3", "--json"), ("moe", "--model", "mixtral-8x7b", "--json"),
                 ("attention-io", "--seq", "4096", "--head-dim", "128", "--json"), ("hw", "list", "--json"), ("model", "list", "--json"),
                 ("speculative", "-k", "3", "--acceptance", "1.0", "--json"), ("compare", "--model", "gpt2", "--hw", "h100-sxm,h200", "--json")):
        r = run(*args)
        assert r.exit_code == 0, r.output
        json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{args}: {c} in JSON output"))


def test_written_paths_are_printed_without_escape_codes(tmp_path):
    """An output path is user text too: the 'wrote ...' line carries no terminal escape code."""
    import subprocess
    import sys

    out = tmp_path / "r\x1b[31mred.html"
    p = subprocess.run([sys.executable, "-m", "rooflinecli", "report", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert out.is_file()
    assert "\x1b" not in p.stdout + p.stderr and "wrote " in p.stdout


# ---- found by the fuzz of 2026-12-01 -------------------------------------------------------------

RUN2 = os.path.join(os.path.dirname(__file__), "..", "..", "reports", "h200-2026-11-30-run2")


def _results(tmp_path, name: str, mutate) -> str:
    doc = json.load(open(os.path.join(RUN2, "results.json")))
    mutate(doc)
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d["rows"][0].update(p50_s=None), "'p50_s' must be at least 1e-09 s in a timed row"),
    (lambda d: d["rows"][0].update(p50_s=0), "'p50_s' must be at least 1e-09 s in a timed row"),
    # a report's roofline divided FLOPs by 1e-300 s and met None; baseline update pooled a repeated
    # row as a second run (2x its median); kernel_targets compared "4096" with 4096
    (lambda d: d["rows"][0].update(samples_s=[1e-300] * 5, p20_s=1e-300, p50_s=1e-300, p80_s=1e-300), "'samples_s' must be a non-empty list of seconds in [1e-09"),
    (lambda d: d["rows"].append(dict(d["rows"][4])), "repeats rows[4]"),
    (lambda d: next(r for r in d["rows"] if r["op"] == "decode_attention")["params"].update(N="4096"), "params.N must be a number"),
    (lambda d: next(r for r in d["rows"] if r["op"] == "flash_attention")["params"].update(S={"a": 1}), "params.S must be a number"),
    (lambda d: d["rows"][0]["params"].update(extra=[1, 2]), "must be a number, a string, true/false or null"),
    (lambda d: d["environment"].update(gpu_name="NVIDIA\nH200"), "environment.gpu_name must be a string"),
    (lambda d: d["rows"][0].update(p80_s=None), "'p80_s'"),
    (lambda d: d["rows"][0].update(flops=None), "'flops' must be a number in a timed row"),
    (lambda d: d.update(measured_spec=True), "'measured_spec' must be a spec id or path"),
    (lambda d: d.update(extra=1), "'extra' must be an object"),
    (lambda d: d["extra"].update(bench="x"), "extra.bench must be an object"),
    (lambda d: d["extra"].update(end_to_end=[1]), "extra.end_to_end must be an object"),
    (lambda d: d["extra"].update(end_to_end_full={"models": {"m": {"points": [{"measured_s": "x"}]}}}), "measured_s must be positive seconds"),
])
def test_a_results_file_with_a_null_zero_or_mistyped_field_is_one_line_for_every_reader(tmp_path, mutate, needle):
    """Each was a TypeError, ZeroDivisionError or AttributeError in validate, report, baseline
    update or calibrate --from-results; the loader now names the field."""
    bad = _results(tmp_path, "bad.json", mutate)
    for args in (["validate", bad], ["report", "--model", "gpt2", "--results", bad, "--out", str(tmp_path / "r.html")],
                 ["baseline", "update", bad, "--dir", str(tmp_path / "bd")],
                 ["calibrate", "--from-results", bad, "--measured", "h200-measured", "--out", str(tmp_path / "c.toml")]):
        one_error(run(*args), needle)
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "c.toml").exists()


def test_a_recorded_spec_path_that_is_not_a_path_is_ignored(tmp_path):
    """A number, a list or an impossible name in extra.bench.*_spec_path was a TypeError in validate
    and report; the recorded spec id decides instead."""
    for value in (5, [1], "a" * 5000):
        bad = _results(tmp_path, "p.json", lambda d: d["extra"]["bench"].update(measured_spec_path=value, hardware_spec_path=value))
        r = run("validate", bad)
        assert r.exit_code == 0, r.output


def test_a_file_name_too_long_for_the_os_is_one_line(tmp_path):
    long = "a" * 300
    for args in (["model", "show", f"{long}.json"], ["analyze", "--model", f"{long}.json"], ["golden", "--path", long],
                 ["report", "--model", "gpt2", "--out", f"{long}.html"], ["baseline", "update", os.path.join(RUN2, "results.json"), "--dir", long]):
        one_error(run(*args), "File name too long", "300 characters" if args[0] == "golden" else "characters")


def test_an_output_that_is_an_input_is_refused_and_the_input_kept(tmp_path):
    src = _results(tmp_path, "in.json", lambda d: None)
    before = open(src).read()
    one_error(run("validate", src, "--out", src), "--out", "is also the results file")
    one_error(run("validate", src, "--markdown", src), "--markdown", "is also the results file")
    other = _results(tmp_path, "b.json", lambda d: None)
    one_error(run("regress", src, other, "--json", other), "is also the candidate")
    one_error(run("regress", src, other, "--markdown", str(tmp_path / "x"), "--junit", str(tmp_path / "x")), "--junit", "is also --markdown")
    one_error(run("report", "--model", "gpt2", "--results", src, "--out", src), "is also --results")
    assert open(src).read() == before


def test_report_and_sweep_refuse_to_write_over_their_model_or_spec_files(tmp_path):
    """``report --model cfg.json --out cfg.json`` replaced the config with HTML (exit 0); the same
    for a spec file given to --hw or --measured-hw, and for sweep's --model / --hw."""
    cfg = tmp_path / "cfg.json"
    cfg.write_text(open(os.path.join(presets_dir(), "llama-3-8b.json")).read())
    spec = tmp_path / "mine.toml"
    spec.write_text(open(os.path.join(presets_dir(), "..", "..", "hardware_specs", "h200.toml")).read().replace('id = "h200"', 'id = "mine"'))
    measured = os.path.join(presets_dir(), "..", "..", "hardware_specs", "measured", "h200.toml")
    copy = tmp_path / "m.toml"
    copy.write_text(open(measured).read())
    (tmp_path / "h200-calibration.json").write_text(open(os.path.join(os.path.dirname(measured), "h200-calibration.json")).read())
    before = {p: p.read_text() for p in (cfg, spec, copy, tmp_path / "h200-calibration.json")}
    one_error(run("report", "--model", str(cfg), "--hw", "h200", "--out", str(cfg)), "--out", "is also --model's config file")
    one_error(run("report", "--hw", str(spec), "--out", str(spec)), "is also --hw's spec file (mine)")
    one_error(run("report", "--hw", "h200", "--measured-hw", str(copy), "--out", str(copy)), "spec file (h200-measured)")
    one_error(run("report", "--hw", "h200", "--measured-hw", str(copy), "--out", str(tmp_path / "h200-calibration.json")), "h200-measured's calibration file")
    csv = tmp_path / "cfg.csv"
    csv.write_text(cfg.read_text())
    one_error(run("sweep", "--model", str(csv), "--hw", "h200", "--batch", "1", "--context", "1k", "--out", str(csv), "-q"), "is also --model's config file")
    assert {p: p.read_text() for p in before} == before and csv.read_text() == cfg.read_text()


@pytest.mark.parametrize("args, needle", [
    (["rope", "--scale", "1e300", "--base", "1e10", "--rotary-dim", "4", "--trained-context", "1"], "--scale must be in"),
    (["rope", "--model", "llama-3-8b", "--base", "1e31", "--target-context", "1024k"], "--base must be in"),
    (["analyze", "--no-ops", "--efficiency", "1e-300"], "must be in [0.001, 1]"),
    (["analyze", "--no-ops", "--launch-overhead-us", "1e300"], "--launch-overhead-us"),
    (["analyze", "--no-ops", "--price-per-gpu-hour", "1e308"], "--price-per-gpu-hour"),
    (["analyze", "--no-ops", "--kv-bits", "1e-300"], "--kv-bits must be in [1, 64]"),
    (["moe", "--model", "mixtral-8x7b", "--batch", "1..100000"], "the table takes at most 1,000"),
    (["disagg", "--model", "gpt2", "--prompt", "1k", "--gen", "128", "--rate", "1e300", "--ttft-target", "0.5", "--tpot-target", "0.05"], "--rate"),
])
def test_numbers_that_only_print_nonsense_are_refused(args, needle):
    """They printed a 300-digit context, an inf RoPE base, a TTFT of 1.6e298 s, "KV 0 B", a
    100,000-row table after a minute, or 300-digit GPU counts, with exit 0 (rope: a traceback)."""
    one_error(run(*args), needle)


def test_a_calibration_row_with_an_absurd_time_is_one_line(tmp_path):
    """t_graph 1e-300 s made the GEMM fit's least squares fail to converge (LinAlgError) or print
    TTFT nan; a calibration's gpu of NaN printed "calibrated on nan"."""
    spec = open(os.path.join(presets_dir(), "..", "..", "hardware_specs", "measured", "h200.toml")).read()
    cal = json.load(open(os.path.join(presets_dir(), "..", "..", "hardware_specs", "measured", "h200-calibration.json")))
    (tmp_path / "m.toml").write_text(spec.replace('calibration = "h200-calibration.json"', 'calibration = "cal.json"').replace('id = "h200-measured"', 'id = "fz"'))
    for mutate, needle in ((lambda d: next(r for r in d["rows"] if r["op"] == "gemm").update(t_graph=1e-300), "is not a kernel time"),
                           (lambda d: d.update(gpu=float("nan")), "NaN is not a JSON number"),
                           (lambda d: d.update(gpu=5), "gpu: must be a string")):
        doc = json.loads(json.dumps(cal))
        mutate(doc)
        (tmp_path / "cal.json").write_text(json.dumps(doc))
        one_error(run("analyze", "--no-ops", "--hw", str(tmp_path / "m.toml")), needle)


def test_a_calibration_file_with_absurd_figures_or_deep_junk_is_one_line(tmp_path):
    """Sustained 1e-308 TFLOP/s printed TTFT nan and ten numpy warnings (exit 0); a 5,000-digit
    integer and 50,000 nested lists were a ValueError and a RecursionError."""
    spec = open(os.path.join(presets_dir(), "..", "..", "hardware_specs", "measured", "h200.toml")).read()
    text = open(os.path.join(presets_dir(), "..", "..", "hardware_specs", "measured", "h200-calibration.json")).read()
    (tmp_path / "m.toml").write_text(spec.replace('calibration = "h200-calibration.json"', 'calibration = "cal.json"').replace('id = "h200-measured"', 'id = "fz"'))
    cases = [
        (text.replace('"gemm_bf16_tflops": ', '"gemm_bf16_tflops": 1e-308, "x": ', 1), "sustained.gemm_bf16_tflops: must be a positive finite number in [0.001, 100000]"),
        (text.replace('"flops": 1.0', '"flops": 1e300', 1), "flops: must be a finite number >= 0 in [0, 1e+18]"),
        (text.replace('"flops": 1.0', '"flops": 1' + "0" * 400, 1), "flops: must be"),
        (text.replace('"flops": 1.0', '"flops": 1' + "0" * 5000, 1), "not valid JSON"),
        (text.rstrip()[:-1] + ', "junk": ' + "[" * 50_000 + "]" * 50_000 + "}", "nested too deeply"),
    ]
    for body, needle in cases:
        assert body != text
        (tmp_path / "cal.json").write_text(body)
        for args in (["analyze", "--no-ops", "--hw", str(tmp_path / "m.toml")], ["hw", "validate", str(tmp_path / "m.toml")]):
            one_error(run(*args), needle)


def test_a_spec_number_of_hundreds_of_digits_is_one_line(tmp_path):
    base = open(os.path.join(presets_dir(), "..", "..", "hardware_specs", "h200.toml")).read().replace('id = "h200"', 'id = "fz"')
    for value, needle in (("9" * 400, "power.tdp_w: absurd value 999"), ("-" + "9" * 400, "power.tdp_w: must be > 0"),
                          ("9" * 5000, "not valid TOML: Exceeds the limit")):  # tomllib's own ValueError
        (tmp_path / "f.toml").write_text(re.sub(r"(?m)^tdp_w = .*$", f"tdp_w = {value}", base))
        one_error(run("hw", "validate", str(tmp_path / "f.toml")), needle)


def test_more_dense_layers_than_layers_is_one_line(tmp_path):
    doc = json.load(open(os.path.join(presets_dir(), "deepseek-v3.json")))
    doc.pop("_rooflinecli", None)
    doc["first_k_dense_replace"] = 100
    (tmp_path / "c.json").write_text(json.dumps(doc))
    one_error(run("model", "show", str(tmp_path / "c.json")), "first_k_dense_replace", "more than the 61 layers")


def test_a_gpu_name_too_long_to_name_a_baseline_leaves_no_folder(tmp_path):
    bad = _results(tmp_path, "g.json", lambda d: d["environment"].update(gpu_name="a" * 400))
    one_error(run("baseline", "update", bad, "--dir", str(tmp_path / "bd")), "environment.gpu_name is 400 characters")
    assert not (tmp_path / "bd").exists()


def test_calibrate_refuses_to_write_over_its_results_before_measuring(tmp_path):
    """--calibration-out naming the --from-results file, or a results file that sits where the
    spec's default calibration file goes: refused up front (it was overwritten, then refused)."""
    src = _results(tmp_path, "r.json", lambda d: None)
    before = open(src).read()
    t0 = time.perf_counter()
    one_error(run("calibrate", "--device", "cpu", "--base", "h200", "--from-results", src, "--out", str(tmp_path / "y.toml"),
                  "--calibration-out", src, "--budget-s", "3"), "--calibration-out", "is also --from-results")
    assert time.perf_counter() - t0 < 3 and open(src).read() == before and not (tmp_path / "y.toml").exists()
    beside = _results(tmp_path, "foo.calibration.json", lambda d: None)
    one_error(run("calibrate", "--device", "cpu", "--base", "h200", "--from-results", beside, "--out", str(tmp_path / "foo.toml"),
                  "--budget-s", "3"), "is also --from-results")
    assert open(beside).read() == before


# ---- found by the second fuzz of 2026-12-01 ------------------------------------------------------


def test_achievable_mode_ignores_the_roofline_knobs_in_its_roof_too():
    """``--efficiency 0.5`` and ``--launch-overhead-us`` were said to be ignored in achievable
    mode but slowed its roof: TTFT 27.6 ms "(roof 36.9 ms, x0.75)", beyond roof negative."""
    base = json.loads(run("analyze", "--model", "qwen3-30b-a3b", "--hw", "h200-measured", "--json").stdout)
    for knob in (["--efficiency", "0.5"], ["--launch-overhead-us", "50"], ["--efficiency", "moe=0.5"]):
        r = run("analyze", "--model", "qwen3-30b-a3b", "--hw", "h200-measured", "--json", *knob)
        d = json.loads(r.stdout)
        assert d["roof_ttft_s"] == base["roof_ttft_s"] and d["roof_tpot_s"] == base["roof_tpot_s"]
        assert d["roof_ttft_s"] <= d["ttft_s"] and d["roof_tpot_s"] <= d["tpot_s"]
    roof_mode = json.loads(run("analyze", "--model", "llama-3-8b", "--hw", "h200", "--efficiency", "0.5", "--json").stdout)
    plain = json.loads(run("analyze", "--model", "llama-3-8b", "--hw", "h200", "--json").stdout)
    assert roof_mode["ttft_s"] == pytest.approx(2 * plain["ttft_s"], rel=1e-6)  # roof mode still applies it


def test_calibrate_reads_its_results_and_outputs_before_measuring(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "x"}')
    for args, needle in ((["--from-results", str(bad), "--out", str(tmp_path / "x.toml")], "results schema 'x'"),
                         (["--out", str(tmp_path)], "is a folder"), (["--out", "."], "is a folder")):
        one_error(run("calibrate", "--device", "cpu", "--base", "h200", "--budget-s", "3", *args), needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def test_a_spec_written_from_a_measured_spec_elsewhere_still_finds_its_calibration(tmp_path):
    """--measured h200-measured --out elsewhere.toml copied the relative calibration key, so the
    new spec pointed at a file that is not there; --out naming that calibration file overwrote it."""
    from rooflinecli.achievable import calibration_for
    from rooflinecli.hardware import get_spec, load_spec_file

    out = tmp_path / "sub" / "o.toml"
    out.parent.mkdir()
    r = run("calibrate", "--device", "cpu", "--from-results", os.path.join(RUN2, "results.json"), "--measured", "h200-measured", "--out", str(out))
    assert r.exit_code == 0, r.output
    assert len(calibration_for(load_spec_file(out)).rows) == len(calibration_for(get_spec("h200-measured")).rows)
    cal = os.path.join(os.path.dirname(get_spec("h200-measured").path), "h200-calibration.json")
    before = open(cal).read()
    one_error(run("calibrate", "--device", "cpu", "--from-results", os.path.join(RUN2, "results.json"), "--measured", "h200-measured",
                  "--out", cal), "is also the measured spec's calibration file")
    assert open(cal).read() == before


def _e2e_file(tmp_path, mutate) -> str:
    doc = json.load(open(os.path.join(RUN2, "e2e.json")))
    entry = next(iter(doc["extra"]["end_to_end_full"]["models"].values()))
    mutate(entry)
    p = tmp_path / "e.json"
    p.write_text(json.dumps(doc))
    return str(p)


@pytest.mark.parametrize("mutate, needle", [
    (lambda e: e["points"][0].update(batch="abc"), ".batch must be an integer"),
    (lambda e: e["points"][0].pop("batch"), ".batch must be an integer"),
    (lambda e: e["points"][0].update(context=None), ".context must be an integer"),
    (lambda e: e["points"][0].pop("phase"), "phase must be 'decode' or 'prefill'"),
    (lambda e: e["points"][0].update(engine=3), "engine a string"),
    (lambda e: e["points"][0].update(batch=-4), ".batch must be an integer"),
])
def test_a_malformed_whole_model_point_is_one_line_for_validate_and_report(tmp_path, mutate, needle):
    bad = _e2e_file(tmp_path, mutate)
    one_error(run("validate", bad), needle)
    one_error(run("report", "--model", "llama-3-8b", "--hw", "h200", "--results", bad, "--out", str(tmp_path / "x.html")), needle)


def test_a_recorded_config_out_of_range_is_not_predicted(tmp_path):
    """num_layers -2, a 1e30 expert width or top_k past the experts predicted up to 6.5e20 s."""
    for mutate in (lambda e: e["config"].update(num_layers=-2), lambda e: e["config"].update(hidden_size=10**30),
                   lambda e: e["config"].update(num_kv_heads=7)):
        r = run("validate", _e2e_file(tmp_path, mutate), "--json")
        d = json.loads(r.stdout)
        assert not any(q["model"] == "llama-3-8b" for q in d["end_to_end_full"]) and d["end_to_end_full"]  # the others still are
        assert any("llama-3-8b: cannot rebuild its config" in n for n in d["notes"]), d["notes"]


def test_bad_ceiling_entries_in_measured_with_are_refused(tmp_path):
    spec = open(os.path.join(os.path.dirname(__file__), "..", "..", "hardware_specs", "measured", "h200.toml")).read()
    cal = os.path.join(os.path.dirname(__file__), "..", "..", "hardware_specs", "measured", "h200-calibration.json")
    spec = spec.replace('calibration = "h200-calibration.json"', f'calibration = "{os.path.abspath(cal)}"')
    for old, new in (('"burst memory.bandwidth_gb_per_s" = "4201.0"', '"burst memory.bandwidth_gb_per_s" = "1e300"'),
                     ('"burst peak_dense_tflops.bf16" = "781.9"', '"burst peak_dense_tflops.bf16" = "fast"'),
                     ('"burst peak_dense_tflops.bf16" = "781.9"', '"burst peak_dense_tflops.bf16" = "-781.9"')):
        (tmp_path / "m.toml").write_text(spec.replace(old, new))
        one_error(run("hw", "show", str(tmp_path / "m.toml")), "measured_with.burst")


def test_whole_model_runs_of_two_machines_do_not_share_a_file(tmp_path):
    """A CPU dry run merged into a GPU run's e2e.json relabelled its H200 points as CPU runs."""
    import shutil

    g = tmp_path / "g.json"
    shutil.copy(os.path.join(RUN2, "e2e.json"), g)
    before = g.read_text()
    one_error(run("e2e", "--full", "--device", "cpu", "--tiny", "-m", "mixtral-8x7b", "-r", str(g)), "holds whole-model runs on 'NVIDIA H200'")
    assert g.read_text() == before


def test_a_shared_expert_gate_split_over_gpus_warns_nothing(tmp_path):
    """Qwen2-MoE's d -> 1 shared-expert gate at TP 2 came out N = 0.5 and numpy warned log(0)."""
    doc = json.load(open(os.path.join(presets_dir(), "qwen3-30b-a3b.json")))
    doc.pop("_rooflinecli", None)
    doc.update(model_type="qwen2_moe", shared_expert_intermediate_size=5632)
    (tmp_path / "q2.json").write_text(json.dumps(doc))
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run("analyze", "--model", str(tmp_path / "q2.json"), "--hw", "h200-measured", "--tp", "2")
    assert r.exit_code == 0 and "nan" not in r.stdout.lower(), r.stderr
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]


def test_hw_validate_checks_a_measured_specs_calibration_and_configs_their_layer_lists(tmp_path):
    spec = open(os.path.join(os.path.dirname(__file__), "..", "..", "hardware_specs", "measured", "h200.toml")).read()
    (tmp_path / "nc.toml").write_text(spec.replace('calibration = "h200-calibration.json"', 'calibration = "nope.json"'))
    one_error(run("hw", "validate", str(tmp_path / "nc.toml")), "no such calibration file")
    doc = json.load(open(os.path.join(presets_dir(), "qwen3-30b-a3b.json")))
    doc.pop("_rooflinecli", None)
    doc["mlp_only_layers"] = [999]
    (tmp_path / "q.json").write_text(json.dumps(doc))
    one_error(run("model", "show", str(tmp_path / "q.json")), "mlp_only_layers", "layers are 0 to 47")


def test_routing_skew_past_e_over_k_is_one_line_naming_each_commands_option():
    one_error(run("moe", "--model", "mixtral-8x7b", "--skew", "5"), "--skew 5: at most 4 for mixtral-8x7b")
    one_error(run("analyze", "--model", "mixtral-8x7b", "--expert-skew", "5", "--no-ops"), "--expert-skew 5: at most 4")


def test_routing_skew_on_a_dense_model_is_one_line():
    one_error(run("analyze", "--model", "llama-3-8b", "--expert-skew", "4", "--no-ops"), "--expert-skew 4", "has no experts")
