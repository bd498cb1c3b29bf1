"""Data types by name. Sizes are bytes per element (fractional for sub-byte types)."""

from __future__ import annotations

from rooflinecli.errors import RooflineError, unknown_name_error

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp64": 8.0,
    "fp32": 4.0,
    "tf32": 4.0,  # stored as fp32; tf32 only changes the matrix-unit arithmetic
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
}

#: dtypes a hardware spec may list a dense peak for (``peak_dense_tflops.<dtype>``).
COMPUTE_DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")

#: dtypes accepted for the KV cache (``--kv-dtype``); ``--kv-bits`` takes any width.
KV_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")

#: dtypes accepted for stored weights (``--weight-dtype``).
WEIGHT_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")


def bytes_per_element(dtype: str) -> float:
    """Bytes per element of ``dtype`` ("bf16" -> 2.0, "int4" -> 0.5)."""
    try:
        return BYTES_PER_ELEMENT[dtype]
    except KeyError:
        raise unknown_name_error("dtype", dtype, BYTES_PER_ELEMENT) from None


def check_dtype(dtype: str, allowed: tuple[str, ...], what: str = "dtype") -> str:
    """Return ``dtype`` if it is in ``allowed``, else raise a one-line RooflineError."""
    if dtype not in allowed:
        raise unknown_name_error(what, dtype, allowed)
    return dtype


def kv_bytes_per_element(kv_dtype: str = "bf16", kv_bits: float | None = None) -> float:
    """Bytes per cached element from ``--kv-dtype`` or, when given, ``--kv-bits`` (any width from 1
    to 64 bits, fractional ones included: 1.58 for ternary)."""
    if kv_bits is not None:
        if not 1 <= kv_bits <= 64:  # 1 bit per element is the narrowest cache (1e-300 printed "KV 0 B")
            raise RooflineError(f"--kv-bits must be in [1, 64], got {kv_bits}")
        return kv_bits / 8.0
    check_dtype(kv_dtype, KV_DTYPES, "KV dtype")
    return BYTES_PER_ELEMENT[kv_dtype]
