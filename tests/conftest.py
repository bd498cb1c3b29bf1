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
