"""The analytical model gates itself: every golden prediction (tests/golden/predictions.json) is
recomputed and must match to 1e-9 relative. A change that moves one is a deliberate update:
``roofline golden --update``, reviewed in the diff of the golden file."""

from __future__ import annotations

import copy
import json

import pytest

from typer.testing import CliRunner

from rooflinecli.gate import golden
from rooflinecli.cli import app
from rooflinecli.model_registry import preset_ids

runner = CliRunner()


@pytest.fixture(scope="module")
def current():
    """One recomputation of every golden number (about 20 analyze runs), shared by the tests."""
    return golden.compute_golden()


@pytest.fixture
def reuse_current(current, monkeypatch):
    monkeypatch.setattr(golden, "compute_golden", lambda: copy.deepcopy(current))


def test_golden_predictions_unchanged(reuse_current):
    path = golden.default_path()
    moved = golden.check_golden(path)
    assert not moved, (
        f"{len(moved)} golden prediction(s) moved:\n  " + "\n  ".join(moved)
        + f"\nIf the change is intended, regenerate and review the diff: {golden.REGENERATE_COMMAND}"
    )


def test_golden_file_covers_every_preset_on_both_gpus():
    data = golden.load_golden(golden.default_path())
    assert sorted(data["entries"]) == sorted(preset_ids())
    for mid, e in data["entries"].items():
        for key in ("total_params", "active_params", "kv_bytes_per_token_bf16"):
            assert e[key] > 0, (mid, key)
        assert e["active_params"] <= e["total_params"]
        for hw in ("h100-sxm", "h200"):
            h = e[hw]
            assert h["ttft_s"] > 0 and h["tpot_first_s"] <= h["tpot_s"] <= h["tpot_last_s"], (mid, hw)
        # same work on both GPUs; the H200's faster HBM makes memory-bound decode faster
        assert e["h200"]["decode_step_bytes"] == e["h100-sxm"]["decode_step_bytes"]
        assert e["h200"]["tpot_s"] < e["h100-sxm"]["tpot_s"]


def test_a_moved_number_is_reported_with_its_key_and_the_command(tmp_path, reuse_current):
    data = golden.load_golden(golden.default_path())
    bad = copy.deepcopy(data)
    bad["entries"]["llama-3-8b"]["h200"]["tpot_s"] *= 1 + 1e-6  # far below any visible change, above 1e-9
    del bad["entries"]["gpt2"]["total_params"]
    bad["entries"]["mistral-7b"]["h100-sxm"]["ttft_s"] *= 1 + 1e-10  # within tolerance: not reported
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps(bad))
    moved = golden.check_golden(path)
    assert len(moved) == 2
    assert moved[0].startswith("gpt2/total_params: computed")
    assert moved[1].startswith("llama-3-8b/h200/tpot_s: ") and "relative" in moved[1]
    r = runner.invoke(app, ["golden", "--path", str(path)])
    assert r.exit_code == 1
    assert "llama-3-8b/h200/tpot_s" in r.output and "roofline golden --update" in r.output
    r = runner.invoke(app, ["golden", "--path", str(tmp_path / "fresh.json"), "--update"])
    assert r.exit_code == 0 and f"({len(preset_ids())} entries)" in r.output
    assert golden.check_golden(tmp_path / "fresh.json") == []
    r = runner.invoke(app, ["golden", "--path", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and r.output.startswith("error: ") and "roofline golden --update" in r.output
    r = runner.invoke(app, ["golden", "--path", str(tmp_path), "--update"])  # a folder in the way
    assert r.exit_code == 2 and r.output == f"error: --path {tmp_path}: cannot write: is a folder; name a file for the output\n"
