"""`--hw-file PATH` is accepted anywhere a GPU id is: every command whose help offers `--hw` also
offers `--hw-file`, and each command that takes a GPU runs on a spec given by path (a copy of the
H100 SXM spec with its own id and a third of the HBM bandwidth), with that GPU's numbers."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from rooflinecli.cli import COMMAND_MODULE, app
from rooflinecli.hardware import specs_dir
from conftest import cli_runner

#: commands that take a GPU (a test fails if one loses its option, so the walk below is not vacuous)
GPU_COMMANDS = {
    "analyze", "speculative", "attention-io", "kv", "moe", "compare", "disagg", "sweep",
    "bench", "calibrate", "validate", "e2e", "report",
}  # fmt: skip


def run(*args: str):
    return cli_runner().invoke(app, list(args), env={"ROOFLINE_HW": None, "COLUMNS": "200"})


def _subcommands(help_text: str) -> list[str]:
    if "Commands:" not in help_text:
        return []
    block = help_text.split("Commands:", 1)[1]
    return [m.group(1) for m in re.finditer(r"^  ([a-z][a-z0-9-]*)\b", block, flags=re.M)]


def _option_names(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text.split("Options:", 1)[-1]))


def _all_commands() -> dict[str, str]:
    """Every leaf command path ("hw show") -> its help text, walked through the real CLI."""
    out: dict[str, str] = {}
    todo = [[c] for c in dict.fromkeys(COMMAND_MODULE)]
    while todo:
        path = todo.pop()
        r = run(*path, "--help")
        assert r.exit_code == 0, (path, r.output)
        subs = _subcommands(r.output)
        if subs:
            todo += [[*path, s] for s in subs]
        else:
            out[" ".join(path)] = r.output
    return out


def test_every_command_that_takes_hw_also_takes_hw_file():
    commands = _all_commands()
    assert {"hw show", "model show", "regress"} <= set(commands)  # the walk reached sub-apps too
    with_hw = {name for name, text in commands.items() if "--hw" in _option_names(text)}
    assert GPU_COMMANDS <= with_hw, f"commands without --hw: {sorted(GPU_COMMANDS - with_hw)}"
    missing = sorted(name for name in with_hw if "--hw-file" not in _option_names(commands[name]))
    assert not missing, f"--hw without --hw-file in: {missing}"


# ------------------------------------------------------------------------------------------------
# Each GPU command on a spec file given by path
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_gpu(tmp_path_factory) -> Path:
    """h100-sxm with id 'my-gpu' and 1000 GB/s of HBM instead of 3350."""
    text = (specs_dir() / "h100-sxm.toml").read_text()
    text = text.replace('id = "h100-sxm"', 'id = "my-gpu"', 1)
    assert "bandwidth_gb_per_s = 3350" in text
    text = text.replace("bandwidth_gb_per_s = 3350", "bandwidth_gb_per_s = 1000", 1)
    path = tmp_path_factory.mktemp("hwfile") / "my-gpu.toml"
    path.write_text(text)
    return path


def _json(*args: str) -> dict:
    r = run(*args)
    assert r.exit_code == 0, r.output + (r.stderr if hasattr(r, "stderr") else "")
    return json.loads(r.stdout)


# decode of one sequence is memory-bound: a third of the bandwidth makes TPOT 3.35x longer
@pytest.mark.parametrize(
    "args, tpot",
    [
        (["analyze", "--model", "llama-3-8b", "--json"], lambda d: d["tpot_s"]),
        (["speculative", "-k", "3", "-a", "0.7", "--model", "llama-3-8b", "--json"], lambda d: d["target_step_time_s"]),
    ],
    ids=["analyze", "speculative"],
)
def test_hw_file_gives_that_gpus_decode_time(slow_gpu, args, tpot):
    fast = tpot(_json(*args, "--hw", "h100-sxm"))
    slow = tpot(_json(*args, "--hw-file", str(slow_gpu)))
    assert slow / fast == pytest.approx(3.35, rel=0.02)


def test_compare_mixes_ids_and_spec_files(slow_gpu):
    d = _json("compare", "--model", "llama-3-8b", "--hw-file", f"h100-sxm,{slow_gpu}", "--json")
    rows = {r["hw"]: r for r in d["rows"]}
    assert set(rows) == {"h100-sxm", "my-gpu"}
    assert rows["my-gpu"]["tpot_s"] / rows["h100-sxm"]["tpot_s"] == pytest.approx(3.35, rel=0.02)


@pytest.mark.parametrize(
    "args",
    [
        ["kv", "--model", "llama-3-8b", "--json"],
        ["moe", "--model", "mixtral-8x7b", "--json"],
        ["disagg", "--model", "llama-3-8b", "--prompt", "2k", "--gen", "256", "--rate", "1", "--ttft-target", "1", "--tpot-target", "0.05", "--json"],
        ["attention-io", "--seq", "4k", "--head-dim", "128", "--json"],
    ],
    ids=lambda a: a[0],
)
def test_analytical_commands_run_on_a_spec_file(slow_gpu, args):
    r = run(*args, "--hw-file", str(slow_gpu))
    assert r.exit_code == 0, r.output
    json.loads(r.stdout)
    assert "my-gpu" in r.stdout or args[0] == "attention-io"


def test_sweep_rows_name_the_spec_file_gpu(slow_gpu, tmp_path):
    out = tmp_path / "grid.csv"
    r = run("sweep", "--model", "llama-3-8b", "--hw-file", str(slow_gpu), "--out", str(out),
            "--batch", "1", "--context", "1k", "--phase", "decode", "--quiet")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(out.open()))
    assert rows and {row["hw"] for row in rows} == {"my-gpu"}


def test_validate_predicts_from_a_spec_file(slow_gpu):
    results = next((Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "cpu-interpreter").glob("*.json"))
    d = _json("validate", str(results), "--hw-file", str(slow_gpu), "--json")
    assert d["datasheet_spec"] == "my-gpu"


def test_bad_hw_file_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text((specs_dir() / "h100-sxm.toml").read_text().replace("tdp_w = 700", "tdp_w = -1"))
    for args in (["kv", "--model", "llama-3-8b"], ["compare", "--model", "llama-3-8b"]):
        r = run(*args, "--hw-file", str(bad))
        assert r.exit_code == 2
        err = r.stderr.strip()
        assert err.count("\n") == 0 and err.startswith("error: ") and "power.tdp_w" in err and "bad.toml" in err


def test_calibrate_on_a_spec_file_writes_a_measured_spec_that_resolves(slow_gpu, tmp_path, monkeypatch):
    # the measurement itself is stubbed (test_calibrate.py runs it on the CPU): this checks that a
    # base given by path is written as a path the loader resolves, not as an id no lookup finds
    import rooflinecli.bench.calibrate as calibrate
    from rooflinecli.hardware import get_spec

    fake = calibrate.Ceilings(copy_gb_per_s=900.0, matmul_tflops={"bf16": 700.0}, methods={"copy": "stub"})
    monkeypatch.setattr(calibrate, "measure_ceilings", lambda *a, **k: fake)
    out = tmp_path / "measured.toml"
    r = run("calibrate", "--device", "cpu", "--hw-file", str(slow_gpu), "--id", "my-gpu-measured", "--out", str(out))
    assert r.exit_code == 0, r.output
    spec = get_spec(str(out))
    assert (spec.id, spec.base, spec.kind) == ("my-gpu-measured", "my-gpu", "measured")
    assert spec.memory_bandwidth_gb_per_s == 900.0 and spec.peak_dense_tflops["bf16"] == 700.0
    # inherited from the file, at bf16's measured / datasheet ratio (1979 x 700 / 989.5)
    assert spec.l2_size_mb == 50 and spec.peak_dense_tflops["fp8"] == pytest.approx(1979.0 * 700.0 / 989.5)


def test_calibrate_default_out_for_a_spec_file_base_stays_in_measured_folder(slow_gpu):
    from rooflinecli.bench.calibrate import default_out_path

    assert default_out_path(str(slow_gpu)) == specs_dir() / "measured" / "my-gpu.toml"
    assert default_out_path("h200") == specs_dir() / "measured" / "h200.toml"
