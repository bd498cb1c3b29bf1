"""Test set-up. Without a CUDA GPU, Triton kernels run on the CPU through Triton's interpreter:
TRITON_INTERPRET must be set before triton is first imported, so it is decided here."""

from __future__ import annotations

import os


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# pytest-xdist workers run with COLUMNS=80 and LINES=24 set; the tests see output as a pipe or a
# file does (the tool's 200-column default), as they do in one process. A test of a width sets it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


def load_script(name: str):
    """``scripts/<name>.py`` as a module (the scripts are not a package), for tests that call its
    functions or ``main``."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cli_runner():
    """A ``CliRunner`` that keeps stderr apart from stdout (older Click-based typer mixes them
    unless told not to; newer ones always keep them apart and take no such option)."""
    from typer.testing import CliRunner

    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


#: the fields of a tiny decoder's config.json (4 layers, GQA 8/2); a test adds its ``model_type``
TINY_DECODER_CONFIG = {
    "hidden_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
}
