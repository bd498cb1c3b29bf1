"""scripts/attention_targets.py: its shapes stay in the ops' full suites; bad input and a machine
without a GPU give one error line and exit code 2."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import attention_targets as at  # noqa: E402


def test_targets_are_full_suite_cases():
    for _, module, args in at.TARGETS:
        mod = importlib.import_module(f"kernels.{module}")
        case = mod._case(*args)
        assert case.id in {c.id for c in mod.OP.cases["full"]}, case.id
        assert mod.OP.baselines, module


def test_unknown_group_is_one_error_line(capsys):
    assert at.main(["--only", "flash,nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --only: unknown group(s) nope; known: flash, mla, decode"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only answer")
def test_without_a_gpu_says_so(capsys):
    assert at.main([]) == 2
    assert capsys.readouterr().err.strip() == "error: attention_targets needs a CUDA GPU (graph timing)"
