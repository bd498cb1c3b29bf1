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
