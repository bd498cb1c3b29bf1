"""The kernel registry: every op in ``kernels/`` describes itself with one ``KernelOp``.

A kernel module ``kernels/<op>.py`` holds a private ``@triton.jit`` kernel, a launcher that checks
shapes and dtypes, allocates, sizes the grid and launches, a PyTorch reference, and ``OP``: a
``KernelOp`` naming the cases it is tested and timed on and its cost from ``rooflinecli.formulas``.
The timing harness (``rooflinecli.bench``), the tests and ``scripts/gpu_suite.sh`` all read
``OP`` from here, so a kernel is added in one place.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Kernel modules, in suite order.
KERNEL_NAMES: tuple[str, ...] = (
    "copy",
    "rmsnorm",
    "gemm",
    "flash_attention",
    "naive_attention",
    "decode_attention",
    "mla_decode",
    "moe",
)


@dataclass(frozen=True)
class Case:
    """One shape of one op. ``params`` holds the shape letters (``{"M": 4096, "N": 4096, ...}``)
    and flags (``{"causal": True}``); ``shape`` is its readable id (``M4096-N4096-K4096``)."""

    shape: str
    params: Mapping[str, Any]
    dtype: str  # "bf16", "fp16", "fp32", "fp8"

    @property
    def id(self) -> str:
        return f"{self.shape}-{self.dtype}"


@dataclass(frozen=True)
class KernelOp:
    name: str
    #: (case, device, torch.Generator) -> dict of fresh random input tensors (never zeros)
    make_inputs: Callable[..., dict[str, Any]]
    #: our Triton launcher, called as run(**inputs) -> output tensor (or tuple)
    run: Callable[..., Any]
    #: PyTorch reference computed in higher precision, called as reference(**inputs)
    reference: Callable[..., Any]
    #: (case) -> (flops, min_hbm_bytes), from rooflinecli.formulas
    cost: Callable[[Case], tuple[float, float]]
    #: "test": tiny odd shapes for the CPU interpreter; "quick" and "full": GPU timing suites
    cases: Mapping[str, tuple[Case, ...]]
    #: relative-error tolerance ||out - ref|| / ||ref|| per dtype
    tolerance: Mapping[str, float]
    #: (case, inputs) -> (shape, torch dtype) of the output that run(**inputs, out=...) fills: the
    #: tests hand the launcher a NaN-poisoned buffer of it, so an element left unwritten fails
    output: Callable[[Case, Mapping[str, Any]], tuple[tuple[int, ...], Any]] | None = None
    #: the PyTorch/cuBLAS equivalent timed beside ours in the same run, run(**inputs); None if none
    baseline: Callable[..., Any] | None = None
    #: candidate torch paths for the fair baseline, by backend name ("sdpa:cudnn", "sdpa:flash",
    #: "cublas", ...): each is a factory called as factory(**inputs) that does any untimed setup
    #: (say, expanding GQA K/V for a backend without GQA) and returns a zero-argument callable to
    #: check and time, or None when that backend cannot run these inputs. The runner checks and
    #: times every candidate and keeps the fastest as the row's baseline (``ResultRow.backend``).
    #: Empty: ``baseline`` alone is the baseline.
    baselines: Mapping[str, Callable[..., Callable[[], Any] | None]] = field(default_factory=dict)
    #: op kind in the analytical model: "copy", "gemm", "attention", "elementwise", "moe"
    model_kind: str = "gemm"
    #: dtypes the kernel supports
    dtypes: tuple[str, ...] = ("bf16", "fp16")
    #: optional (case, spec) -> bool: whether the GPU supports the case (e.g. fp8 needs sm_89+)
    supported: Callable[..., bool] | None = None
    notes: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


def load_op(name: str) -> KernelOp:
    """Import ``kernels/<name>.py`` and return its ``OP``."""
    if name not in KERNEL_NAMES:
        from rooflinecli.errors import unknown_name_error

        raise unknown_name_error("kernel", name, KERNEL_NAMES)
    return importlib.import_module(f"kernels.{name}").OP


def all_ops() -> list[KernelOp]:
    return [load_op(n) for n in KERNEL_NAMES]


def output_like(key: str) -> Callable[[Case, Mapping[str, Any]], tuple[tuple[int, ...], Any]]:
    """``KernelOp.output`` for a kernel whose output has the shape and dtype of input ``key``."""
    return lambda case, inputs: (tuple(inputs[key].shape), inputs[key].dtype)
