"""Small terminals through the real entry point: every table fits 80 columns with its numbers
whole (narrow layouts leave columns out or stack them), COLUMNS=0 falls back to 80, and
``roofline analyze | head -1`` exits 0."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.fmt import fmt_time

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "cpu-interpreter"
runner = CliRunner()

COMMANDS = {
    "analyze": ["analyze"],
    "analyze-no-ops": ["analyze", "--no-ops"],
    "analyze-moe-tp": ["analyze", "--model", "mixtral-8x7b", "--tp", "2", "--ep", "2", "--price", "3.5"],
    "kv": ["kv"],
    "kv-paged": ["kv", "--kv-bits", "4", "--kv-block-size", "16", "--tp", "2"],
    "compare": ["compare", "--hw", "h100-sxm,h200,b200", "--price", "h100-sxm=2.49,h200=3.5,b200=6"],
    "compare-variants": ["compare", "--variants", "mha,gqa,mqa,mla"],
    "hw-list": ["hw", "list"],
    "hw-show": ["hw", "show", "h200-measured"],
    "moe": ["moe", "--model", "mixtral-8x7b", "--ep", "2", "--skew", "1.5"],
    "speculative": ["speculative", "-k", "3", "-a", "0.7", "--model", "llama-3-8b"],
    "disagg": ["disagg", "--rate", "10", "--ttft-target", "0.5", "--tpot-target", "0.05"],
    "model-show": ["model", "show", "deepseek-v3"],
    "model-list": ["model", "list"],
    "attention-io": ["attention-io", "--seq", "4096", "--head-dim", "128"],
    "regress": ["regress", str(FIXTURES / "cpu-interpreter-run-seed0.json"), str(FIXTURES / "cpu-interpreter-run-seed1.json")],
}


def run_at(columns: str, args: list[str]):
    return runner.invoke(app, args, env={"COLUMNS": columns})


def assert_fits(out: str, width: int = 80) -> None:
    assert out.strip(), "printed nothing"
    for line in out.splitlines():
        if line.strip().startswith("https://") and " " not in line.strip():
            continue  # a source's URL stays whole on its own line, to be copied or clicked
        assert cell_len(line.rstrip()) <= width, f"{cell_len(line.rstrip())} columns: {line!r}"
    assert "…" not in out and "..." not in out, "a cell was cut"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_table_fits_80_columns_with_nothing_cut(name):
    r = run_at("80", COMMANDS[name])
    assert r.exit_code in (0, 1), r.output  # regress exits 1 on its regressions
    assert_fits(r.stdout)


def test_narrow_analyze_keeps_every_op_and_its_numbers_whole():
    a = json.loads(runner.invoke(app, ["analyze", "--json"]).stdout)
    out = run_at("80", ["analyze"]).stdout
    for phase in ("prefill", "decode"):
        for op in a[phase]["ops"]:
            assert f" {op['name']} " in out, op["name"]
            assert fmt_time(op["time_s"]) in out, (op["name"], fmt_time(op["time_s"]))
    assert fmt_time(a["ttft_s"]) in out and fmt_time(a["tpot_s"]) in out
    assert "left out at 80 columns:" in out  # it says which columns it left out


def test_narrow_kv_keeps_the_crossover_contexts_whole():
    rows = json.loads(runner.invoke(app, ["kv", "--json"]).stdout)["variants"]
    out = run_at("80", ["kv"]).stdout
    for r in rows:
        c = r["crossover_context_tokens"]
        assert (f"{math.ceil(c):,}" if c is not None else "never") in out


def test_regress_keeps_its_kernel_column_at_80():
    out = run_at("80", COMMANDS["regress"]).stdout
    assert "kernel" in out and "rmsnorm" in out and "decode_attention" in out


def test_wide_output_is_the_full_table():
    """Without COLUMNS, output that is not a terminal gets 200 columns: every column, no note."""
    out = runner.invoke(app, ["kv"]).stdout
    assert "cached per layer" in out and "left out" not in out


@pytest.mark.parametrize("value", ["0", "", "abc", "-5", "3"])
def test_a_columns_value_that_is_not_a_width_falls_back_to_80(value):
    expected = run_at("80", ["kv"]).stdout
    r = run_at(value, ["kv"])
    assert r.exit_code == 0 and r.stdout == expected


def _cli(shell: str, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(["bash", "-c", f"set -o pipefail; {shell}"], capture_output=True, text=True, env=full, timeout=120, cwd=ROOT)


def test_a_closed_pipe_exits_0_quietly():
    r = _cli(f"'{sys.executable}' -m rooflinecli analyze | head -1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("llama-3-8b on h100-sxm") and r.stderr == ""


def test_columns_0_on_a_real_run_prints_the_80_column_layout():
    r = _cli(f"'{sys.executable}' -m rooflinecli kv", COLUMNS="0")
    assert r.returncode == 0, r.stderr
    assert_fits(r.stdout)
