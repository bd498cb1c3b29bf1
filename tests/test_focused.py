"""Focused what-if commands through the real CLI entry point: numbers derived by hand here."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.hardware import get_spec

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def run_json(*args: str) -> dict:
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout[r.stdout.index("{"):])


def assert_one_line_error(r, *fragments: str) -> None:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert "Traceback" not in r.output
    for f in fragments:
        assert f in lines[0], lines[0]


# ------------------------------------------------------------------------------------------------
# attention-io
# ------------------------------------------------------------------------------------------------


def test_attention_io_follows_algorithm_1_by_hand():
    N, d, H = 4096, 128, 32
    out = run_json("attention-io", "--seq", str(N), "--head-dim", str(d), "--hw", "h100-sxm", "--heads", str(H))
    M = get_spec("h100-sxm").smem_per_sm_kb * 1024 / 2  # bf16 elements of SRAM per SM
    B_c = math.ceil(M / (4 * d))
    T_c = math.ceil(N / B_c)
    naive = 2 * N * d + N * N + N * N + N * N + N * N + N * d + N * d  # read Q,K; write S; read S; write P; read P,V; write O
    flash = (N * d + 2 * N) + 2 * N * d + T_c * (2 * N * d + 2 * N + N * d + 2 * N)  # init; K,V; per pass read Q,O,l,m, write O,l,m
    assert out["block_cols"] == B_c and out["block_rows"] == min(B_c, d) and out["kv_passes"] == T_c
    assert out["naive_elements_per_head"] == naive
    assert out["flash_elements_per_head"] == flash
    assert out["naive_bytes"] == naive * 2 * H
    assert out["naive_over_flash"] == pytest.approx(naive / flash)
    bw = get_spec("h100-sxm").memory_bandwidth_gb_per_s * 1e9
    assert out["flash_time_s"] == pytest.approx(flash * 2 * H / bw)
    assert out["naive_over_flash"] > 1


def test_attention_io_flash_wins_more_with_longer_sequences():
    short = run_json("attention-io", "--seq", "512", "--head-dim", "64")
    long = run_json("attention-io", "--seq", "32768", "--head-dim", "64")
    assert long["naive_over_flash"] > short["naive_over_flash"]


def test_attention_io_table():
    r = run("attention-io", "--seq", "2048", "--head-dim", "64", "--hw", "h200")
    assert r.exit_code == 0, r.output
    assert "FlashAttention" in r.output and "standard / flash" in r.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--seq", "0", "--head-dim", "64"], "--seq"),
        (["--seq", "128", "--head-dim", "64", "--dtype", "bf17"], "bf17"),
        (["--seq", "128", "--head-dim", "64", "--hw", "h10"], "h10"),
    ],
)
def test_attention_io_bad_input(args, fragment):
    assert_one_line_error(run("attention-io", *args), fragment)


# ------------------------------------------------------------------------------------------------
# rope
# ------------------------------------------------------------------------------------------------


def test_rope_explicit_base():
    out = run_json("rope", "--base", "500000", "--rotary-dim", "128", "--trained-context", "8192", "--target-context", "131072")
    assert out["scale"] == 16
    assert out["new_base"] == pytest.approx(500000 * 16 ** (128 / 126))
    assert out["needed"] is True


def test_rope_scale_and_no_extension():
    out = run_json("rope", "--base", "10000", "--rotary-dim", "64", "--trained-context", "4096", "--scale", "0.5")
    assert out["needed"] is False and out["new_base"] == 10000
    r = run("rope", "--base", "10000", "--rotary-dim", "64", "--trained-context", "4096", "--scale", "4")
    assert r.exit_code == 0 and f"{10000 * 4 ** (64 / 62):,.6g}" in r.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--base", "10000", "--rotary-dim", "63", "--trained-context", "4096", "--scale", "2"], "--rotary-dim"),
        (["--base", "10000", "--rotary-dim", "64", "--trained-context", "4096"], "exactly one"),
        (["--base", "10000", "--rotary-dim", "64"], "--model"),
        (["--base", "-1", "--rotary-dim", "64", "--trained-context", "4096", "--scale", "2"], "--base"),
    ],
)
def test_rope_bad_input(args, fragment):
    assert_one_line_error(run("rope", *args), fragment)


# ------------------------------------------------------------------------------------------------
# speculative
# ------------------------------------------------------------------------------------------------


def test_speculative_by_hand():
    out = run_json("speculative", "--draft-tokens", "4", "--acceptance", "0.8", "--draft-cost-ratio", "0.05")
    tokens = 1 + 0.8 + 0.8**2 + 0.8**3 + 0.8**4  # geometric series = (1 - a^5) / (1 - a)
    assert out["expected_tokens_per_step"] == pytest.approx(tokens)
    assert out["speedup"] == pytest.approx(tokens / (1 + 4 * 0.05))
    rows = {row["draft_tokens"]: row for row in out["by_draft_tokens"]}
    assert rows[1]["expected_tokens_per_step"] == pytest.approx(1.8)


def test_speculative_perfect_acceptance_and_free_draft():
    out = run_json("speculative", "-k", "3", "-a", "1")
    assert out["expected_tokens_per_step"] == 4 and out["speedup"] == 4


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["-k", "0", "-a", "0.5"], "--draft-tokens"),
        (["-k", "2", "-a", "1.5"], "--acceptance"),
        (["-k", "2", "-a", "0.5", "-c", "-1"], "--draft-cost-ratio"),
        (["-k", "2", "-a", "0.5", "--mtp"], "--model"),
    ],
)
def test_speculative_bad_input(args, fragment):
    assert_one_line_error(run("speculative", *args), fragment)
