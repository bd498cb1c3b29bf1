"""The built wheel carries its data: hardware specs (force-included as rooflinecli/hardware_specs)
and model presets (rooflinecli/model_presets) are found from an unzipped wheel, run from a working
directory outside the repository, with no help from the source tree."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def unzipped_wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)]
    if importlib.util.find_spec("hatchling") is not None:
        cmd.insert(4, "--no-build-isolation")  # offline: use the installed build backend
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("rooflinecli-*.whl")
    site = out / "site"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert "rooflinecli/hardware_specs/h100-sxm.toml" in names
        assert any(n.startswith("rooflinecli/model_presets/") and n.endswith(".json") for n in names)
        assert not any(n.startswith("tests/") for n in names)
        z.extractall(site)
    return site


def _run_from_outside(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("ROOFLINE_HW", None)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_wheel_finds_hardware_specs_and_model_presets(unzipped_wheel, tmp_path):
    script = """
import json, rooflinecli
from pathlib import Path
from rooflinecli.hardware import builtin_specs, get_spec, specs_dir
pkg = Path(rooflinecli.__file__).resolve().parent
presets = sorted(p.name for p in (pkg / "model_presets").glob("*.json"))
print(json.dumps({
    "package": str(pkg),
    "specs_dir": str(specs_dir()),
    "spec_ids": sorted(builtin_specs()),
    "h200_ridge": get_spec("h200").ridge_point("bf16"),
    "presets": presets,
}))
"""
    proc = _run_from_outside(unzipped_wheel, tmp_path, "-c", script)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    site = str(unzipped_wheel.resolve())
    assert info["package"].startswith(site), info  # the wheel's copy, not the repo's
    assert info["specs_dir"] == str(Path(info["package"]) / "hardware_specs")
    assert {"h100-sxm", "h100-pcie", "h200", "a100-sxm", "b200", "l40s", "rtx-4090", "mi300x"} <= set(info["spec_ids"])
    assert abs(info["h200_ridge"] - 206) < 2
    assert info["presets"], "model_presets folder missing or empty in the wheel"


def test_wheel_cli_runs_hw_show(unzipped_wheel, tmp_path):
    proc = _run_from_outside(unzipped_wheel, tmp_path, "-m", "rooflinecli", "hw", "show", "h100-sxm", "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["path"].startswith(str(unzipped_wheel.resolve()))
    assert abs(d["derived"]["bf16_ridge_point_flop_per_byte"] - 295) < 3


def test_wheel_cli_runs_model_show_on_a_preset(unzipped_wheel, tmp_path):
    # presets are looked up by id through the wheel's model_registry, not just listed
    proc = _run_from_outside(unzipped_wheel, tmp_path, "-m", "rooflinecli", "model", "show", "deepseek-v3", "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["source"] == "preset:deepseek-v3.json" and d["kv_bytes_per_token"] == 61 * (512 + 64) * 2
    assert abs(d["total_params"] / 671e9 - 1) < 0.01
