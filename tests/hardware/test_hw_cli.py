"""`roofline hw list | show | validate` through the real entry point (Typer's CliRunner on
rooflinecli.cli.app): JSON for machines, tables for people, and one-line errors (exit 2, no
traceback, naming the file and the key) for every kind of bad spec file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflinecli.cli import app
from rooflinecli.hardware import specs_dir
from conftest import cli_runner

GOOD = (specs_dir() / "h100-sxm.toml").read_text()


def run(*args: str):
    return cli_runner().invoke(app, list(args))


# ------------------------------------------------------------------------------------------------
# Good input
# ------------------------------------------------------------------------------------------------


def test_hw_list_json_has_every_gpu_with_ridge_and_ratio():
    r = run("hw", "list", "--json")
    assert r.exit_code == 0, r.output
    rows = {d["id"]: d for d in json.loads(r.stdout)}
    assert {"h100-sxm", "h100-pcie", "h200", "a100-sxm", "b200", "l40s", "rtx-4090", "mi300x"} <= set(rows)
    h100, h200 = rows["h100-sxm"], rows["h200"]
    assert h100["derived"]["bf16_ridge_point_flop_per_byte"] == pytest.approx(295, rel=0.01)
    assert h200["derived"]["bf16_ridge_point_flop_per_byte"] == pytest.approx(206, rel=0.01)
    assert h100["derived"]["l2_to_hbm_bandwidth_ratio"] == pytest.approx(
        h100["cache"]["l2_bandwidth_gb_per_s"] / h100["memory"]["bandwidth_gb_per_s"]
    )
    assert "cache.l2_bandwidth_gb_per_s" in h100["estimates"]
    assert all(s["url"].startswith("https://") for s in h100["sources"])


def test_hw_list_table_shows_ridge_and_the_l2_vs_smem_sentence():
    r = run("hw", "list")
    assert r.exit_code == 0, r.output
    assert "bf16 ridge FLOP/B" in r.stdout and "L2/HBM BW" in r.stdout
    h200_row = next(line for line in r.stdout.splitlines() if " h200 " in line)
    assert " 206 " in h200_row and "4,800" in h200_row
    assert "50 MB is its L2, not SRAM per SM" in r.stdout


def test_hw_show_json_by_id():
    r = run("hw", "show", "b200", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["id"] == "b200" and d["peak_dense_tflops"]["fp4"] == 9000
    assert d["derived"]["ridge_point_flop_per_byte"]["bf16"] == pytest.approx(2250 / 8.0)
    assert {"compute.sm_count", "cache.l2_size_mb"} <= set(d["estimates"])


def test_hw_show_table_marks_estimates_and_lists_sources():
    r = run("hw", "show", "h100-sxm")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "bf16 ridge point: 295." in out
    assert "10,000 GB/s *" in out  # the L2 bandwidth estimate is starred
    assert "estimates: cache.l2_bandwidth_gb_per_s" in out
    assert "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet" in out
    assert "228 KB" in out and "50 MB" in out
    # the optional shared-memory bandwidth is shown, starred as the estimate the file says it is
    assert "shared memory bandwidth (all SMs)" in out and "33,454 GB/s *" in out


def test_hw_show_by_path_with_measured_spec(tmp_path):
    p = tmp_path / "lab.toml"
    p.write_text('id = "h200-lab"\nkind = "measured"\nbase = "h200"\n[memory]\nbandwidth_gb_per_s = 4300\n'
                 '[efficiency.gemm]\nmemory = 0.85\ncompute = 0.8\n')
    r = run("hw", "show", str(p), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert (d["kind"], d["base"], d["memory"]["bandwidth_gb_per_s"]) == ("measured", "h200", 4300)
    assert d["memory"]["capacity_gb"] == 141 and d["measured_keys"] == ["memory.bandwidth_gb_per_s"]
    r = run("hw", "show", str(p))
    assert "4,300 GB/s (m)" in r.stdout and "gemm" in r.stdout
    assert "achievable mode's roof" not in r.stdout  # no calibration named


def test_hw_show_names_the_achievable_roofs_bandwidth(tmp_path):
    r = run("hw", "show", "h200-measured")
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("measured roof (the achievable mode's roof): "))
    assert "HBM 4,576 GB/s, ridge 147 FLOP/B bf16 (fastest calibration stream, sdpa_decode B128" in line, line
    # a spec naming a calibration that does not load: shown, with one line saying so
    p = tmp_path / "lab.toml"
    p.write_text('id = "h200-lab"\nkind = "measured"\nbase = "h200"\n[memory]\nbandwidth_gb_per_s = 4300\n'
                 '[measured_with]\ncalibration = "missing.json"\n')
    r = run("hw", "show", str(p))
    assert r.exit_code == 0 and "4,300 GB/s (m)" in r.stdout
    assert "calibration: does not load (" in r.stdout and "no such calibration file" in r.stdout


def test_hw_validate_reports_each_file(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text(GOOD.replace('id = "h100-sxm"', 'id = "good-gpu"'))
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace("tdp_w = 700", "tdp_w = 0"))
    r = run("hw", "validate", str(good), str(bad))
    assert r.exit_code == 2
    assert f"ok: {good} (good-gpu, datasheet)" in r.stdout
    assert r.stderr.strip() == f"error: {bad}: power.tdp_w: must be > 0, got 0"
    assert run("hw", "validate", *sorted(str(p) for p in specs_dir().glob("*.toml"))).exit_code == 0


# ------------------------------------------------------------------------------------------------
# Bad spec files: one line on stderr naming file and key, exit 2, no traceback
# ------------------------------------------------------------------------------------------------


def _sub(old: str, new: str, text: str = GOOD) -> str:
    assert old in text, old  # the mutation must apply, or the case tests nothing
    return text.replace(old, new, 1)


MEASURED = 'id = "lab"\nkind = "measured"\nbase = "h200"\n'

BAD_SPECS = {
    # case id: (file text, key the message must name, what it must say)
    "missing-required-key": (_sub("bandwidth_gb_per_s = 3350\n", ""), "memory.bandwidth_gb_per_s", "missing required key"),
    "unknown-key-suggests-closest": (
        _sub("bandwidth_gb_per_s = 3350", "bandwith_gb_per_s = 3350"),
        "memory.bandwith_gb_per_s", "unknown key; did you mean 'memory.bandwidth_gb_per_s'?",
    ),
    "key-at-wrong-level": (_sub('vendor = "nvidia"', 'vendor = "nvidia"\ncapacity_gb = 80'), "capacity_gb", "did you mean 'memory.capacity_gb'?"),
    "wrong-type-string": (_sub("sm_count = 132", 'sm_count = "132"'), "compute.sm_count", "must be an integer, got string '132'"),
    "wrong-type-float-count": (_sub("sm_count = 132", "sm_count = 132.5"), "compute.sm_count", "must be an integer, got number 132.5"),
    "wrong-type-table": (
        _sub('vendor = "nvidia"', 'vendor = "nvidia"\npower = 700', _sub("[power]\ntdp_w = 700", "")),
        "power", "must be a table ([power]), got integer",
    ),
    "non-positive-value": (_sub("bandwidth_gb_per_s = 3350", "bandwidth_gb_per_s = -3"), "memory.bandwidth_gb_per_s", "must be > 0, got -3"),
    "absurd-bandwidth": (
        _sub("bandwidth_gb_per_s = 3350", "bandwidth_gb_per_s = 3350000"),
        "memory.bandwidth_gb_per_s", "absurd value 3350000: above 100000 GB/s (100 TB/s)",
    ),
    "absurd-bf16-peak": (_sub("bf16 = 989.5", "bf16 = 989500"), "peak_dense_tflops.bf16", "absurd value 989500"),
    "unknown-dtype": (_sub("fp8 = 1979.0", "fp9 = 1979.0"), "peak_dense_tflops.fp9", "unknown dtype 'fp9' (did you mean 'fp8'?)"),
    "missing-bf16-peak": (_sub("bf16 = 989.5", ""), "peak_dense_tflops.bf16", "missing required key"),
    "source-without-url": (
        _sub('url = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"\n', ""),
        "sources[0].url", "missing required key",
    ),
    "source-url-not-http": (
        _sub('url = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"', 'url = "datasheet.pdf"'),
        "sources[0].url", "must be an http(s) URL, got 'datasheet.pdf'",
    ),
    "sources-not-an-array": (
        _sub('vendor = "nvidia"', 'vendor = "nvidia"\nsources = "the datasheet"', GOOD[: GOOD.index("[[sources]]")]),
        "sources", "must be a non-empty array of tables",
    ),
    "key-in-wrong-table": (GOOD + "tdp_w = 650\n", "sources[2].tdp_w", "unknown key; did you mean 'power.tdp_w'?"),
    "no-sources": (GOOD[: GOOD.index("[[sources]]")], "sources", "missing required key"),
    "estimate-names-missing-key": (
        _sub('estimates = ["cache.l2_bandwidth_gb_per_s", ', 'estimates = ["cache.l2_bandwith_gb_per_s", '),
        "estimates[0]", "names 'cache.l2_bandwith_gb_per_s', which is not a figure in this spec (did you mean 'cache.l2_bandwidth_gb_per_s'?)",
    ),
    "bad-kind": (_sub('kind = "datasheet"', 'kind = "guess"'), "kind", "must be one of datasheet, measured, got 'guess'"),
    "bad-id": (_sub('id = "h100-sxm"', 'id = "H100 SXM"'), "id", "must be lower-case letters"),
    "datasheet-with-base": (_sub('kind = "datasheet"', 'kind = "datasheet"\nbase = "h200"'), "base", "only measured specs"),
    "measured-unknown-base": (MEASURED.replace('"h200"', '"h201"'), "base", "unknown base GPU 'h201' (did you mean 'h200'?)"),
    "measured-without-base": ('id = "lab"\nkind = "measured"\n', "base", "missing required key"),
    "efficiency-out-of-range": (MEASURED + "[efficiency.gemm]\nmemory = 2.0\n", "efficiency.gemm.memory", "absurd value 2.0: above 1.5"),
    "efficiency-unknown-regime": (MEASURED + "[efficiency.gemm]\nmemry = 0.9\n", "efficiency.gemm.memry", "did you mean 'efficiency.gemm.memory'?"),
    "measured-with-not-string": (MEASURED + "[measured_with]\ndriver = 550\n", "measured_with.driver", "must be a string, got integer 550"),
    "not-toml": ("id = \n", "", "not valid TOML"),
}


@pytest.mark.parametrize("case", list(BAD_SPECS))
def test_bad_spec_is_one_line_naming_file_and_key(case, tmp_path):
    text, key, what = BAD_SPECS[case]
    p = tmp_path / f"{case}.toml"
    p.write_text(text)
    r = run("hw", "show", str(p))
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    assert line.startswith(f"error: {p}: "), line
    if key:
        assert f": {key}: " in line, line
    assert what in line, line


def test_duplicate_id_across_files(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(GOOD.replace('id = "h100-sxm"', 'id = "my-gpu"'))
    b.write_text(GOOD.replace('id = "h100-sxm"', 'id = "my-gpu"'))
    r = run("hw", "validate", str(a), str(b))
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.stderr.strip() == f"error: {b}: id: duplicate id 'my-gpu' (also in {a})"


def test_a_user_spec_reusing_a_builtin_id_is_refused_by_validate_and_by_every_command(tmp_path):
    """"Adding a GPU", step 1 copies h100-sxm.toml: until its id changes, it must fail `hw validate`
    exactly as it fails loading (`compare` once showed two rows named h100-sxm)."""
    copy = tmp_path / "my-gpu.toml"
    copy.write_text(GOOD)
    want = f"error: {copy}: id: duplicate id 'h100-sxm' (also in {specs_dir() / 'h100-sxm.toml'}); give this GPU its own id"
    for args in (("hw", "validate", str(copy)), ("hw", "show", str(copy)), ("compare", "--model", "gpt2", "--hw", f"h100-sxm,{copy}"),
                 ("analyze", "--hw", str(copy), "--no-ops")):
        r = run(*args)
        assert r.exit_code == 2 and r.stderr.strip() == want, (args, r.output)
    # the built-in file itself validates; the same id twice in one --hw list is refused
    assert run("hw", "validate", str(specs_dir() / "h100-sxm.toml")).exit_code == 0
    r = run("compare", "--model", "gpt2", "--hw", "h200,h200")
    assert r.exit_code == 2 and "given twice" in r.stderr


def test_a_cycle_of_base_references_is_one_line(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('id = "a-lab"\nkind = "measured"\nbase = "b.toml"\n')
    b.write_text('id = "b-lab"\nkind = "measured"\nbase = "a.toml"\n')
    r = run("hw", "validate", str(a))
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "base" in r.stderr and "datasheet" in r.stderr, r.stderr
    c = tmp_path / "c.toml"
    c.write_text('id = "c-lab"\nkind = "measured"\nbase = "c.toml"\n')
    r = run("hw", "show", str(c))
    assert r.exit_code == 2 and "its own base" in r.stderr


@pytest.mark.parametrize(
    "old, new, key, what",
    [
        ("bf16 = 989.5", "bf16 = 1e-300", "peak_dense_tflops.bf16", "below 1e-06"),
        ("bf16 = 989.5", "bf16 = 1e40", "peak_dense_tflops.bf16", "above 100000"),
        ("capacity_gb = 80", "capacity_gb = 1e-9", "memory.capacity_gb", "below 0.001"),
        ("tdp_w = 700", "tdp_w = nan", "power.tdp_w", "must be > 0"),
        ("tdp_w = 700", "tdp_w = inf", "power.tdp_w", "must be > 0"),
        ("sm_count = 132", "sm_count = 99999999999999999999", "compute.sm_count", "absurd"),
    ],
)
def test_absurd_figures_are_refused(tmp_path, old, new, key, what):
    text = GOOD.replace('id = "h100-sxm"', 'id = "my-gpu"')
    assert old in text
    p = tmp_path / "s.toml"
    p.write_text(text.replace(old, new, 1))
    r = run("hw", "validate", str(p))
    assert r.exit_code == 2 and f": {key}: " in r.stderr and what in r.stderr, r.stderr


def test_unknown_efficiency_kind_is_refused(tmp_path):
    from rooflinecli.analysis.workload import OP_KINDS
    from rooflinecli.hardware.schema import EFFICIENCY_KINDS

    assert set(OP_KINDS) <= set(EFFICIENCY_KINDS)
    p = tmp_path / "m.toml"
    p.write_text('id = "h200-x"\nkind = "measured"\nbase = "h200"\n[efficiency.gemmm]\nmemory = 0.9\n')
    r = run("hw", "validate", str(p))
    assert r.exit_code == 2 and "efficiency.gemmm: unknown key; did you mean 'efficiency.gemm'" in r.stderr, r.stderr


def test_missing_spec_file_and_unknown_id(tmp_path):
    missing = tmp_path / "nope.toml"
    r = run("hw", "show", str(missing))
    assert r.exit_code == 2 and r.stderr.strip() == f"error: {missing}: no such spec file"
    r = run("hw", "show", "h100")
    assert r.exit_code == 2
    assert r.stderr.strip().startswith("error: unknown GPU 'h100' (did you mean 'h100-pcie' or 'h100-sxm' or 'h100-sxm-imported'?); known: a100-sxm")


def test_every_case_mutates_a_valid_file():
    # guard: the unmutated file is valid, so each failure above comes from its one mutation
    assert GOOD.count("[[sources]]") >= 2 and Path(specs_dir() / "h100-sxm.toml").is_file()
    r = run("hw", "validate", str(specs_dir() / "h100-sxm.toml"))
    assert r.exit_code == 0, r.output


def test_hw_commands_do_not_import_heavy_packages():
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from rooflinecli.cli import app\n"
        "r = CliRunner().invoke(app, ['hw', 'show', 'h200', '--json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "heavy = sorted({'torch', 'triton', 'pandas', 'plotly'} & set(sys.modules))\n"
        "print(','.join(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"hw show imported: {proc.stdout.strip()}"
