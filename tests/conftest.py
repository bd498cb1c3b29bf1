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


def load_script(name: str):
    """``scripts/<name>.py`` as a module (the scripts are not a package), for tests that call its
    functions or ``main``."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
