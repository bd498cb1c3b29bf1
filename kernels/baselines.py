"""Candidate torch paths for a fair baseline (``KernelOp.baselines``): factories called as
``factory(**inputs)`` that return a zero-argument callable, or None when the path cannot run
these inputs. The bench runner checks and times every candidate and keeps the fastest.

``blas_candidates(baseline)``: the op's own torch baseline (``torch.matmul``/``F.linear``, both
the same ``at::mm`` call) under each of torch's BLAS libraries, ``torch.backends.cuda.
preferred_blas_library``: ``"cublas"`` (torch's default) and ``"cublaslt"`` (cuBLASLt, a different
heuristic and kernel set, sometimes faster on skinny and fp16/bf16 shapes). The preference is set
around each call and restored after it, so a CUDA graph captured through the callable records
that library's kernel. On the CPU "cublas" is the plain call and "cublaslt" is not available.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any


def _on_cuda(inputs: dict[str, Any]) -> bool:
    return any(getattr(getattr(v, "device", None), "type", None) == "cuda" for v in inputs.values())


def with_blas_library(library: str, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` called with torch's preferred BLAS library set to ``library`` (restored after)."""

    def call():
        import torch

        prev = torch.backends.cuda.preferred_blas_library()
        torch.backends.cuda.preferred_blas_library(library)
        try:
            return fn()
        finally:
            torch.backends.cuda.preferred_blas_library(prev)

    return call


def blas_candidates(baseline: Callable[..., Any], libraries: tuple[str, ...] = ("cublas", "cublaslt")) -> dict[str, Callable[..., Callable[[], Any] | None]]:
    """``{library: factory}`` for ``baseline`` under each BLAS library."""

    def factory(library: str, **inputs):
        call = partial(baseline, **inputs)
        if not _on_cuda(inputs):
            return call if library == "cublas" else None
        return with_blas_library(library, call)

    return {lib: partial(factory, lib) for lib in libraries}
