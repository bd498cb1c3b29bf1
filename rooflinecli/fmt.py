"""Human-readable numbers for tables and reports: one definition of each format.

Bytes use decimal units (GB = 1e9), as GPU datasheets print them; times pick s / ms / us.
"""

from __future__ import annotations


def fmt_bytes(n: float | None) -> str:
    """``1.5e9`` -> ``"1.5 GB"`` (decimal units); None -> ``"-"``."""
    if n is None:
        return "-"
    n = float(n)
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{_sig3(n / scale)} {unit}"
    return f"{n:.0f} B"


def _sig3(x: float) -> str:
    """Three significant digits, whole numbers with thousands separators past 999 (never ``1e+03``)."""
    return f"{x:.3g}" if abs(x) < 999.5 else f"{x:,.0f}"


def fmt_time(s: float | None) -> str:
    """Seconds as ``"3.2 s"``, ``"4.52 ms"`` or ``"70.2 us"``; None -> ``"-"``."""
    if s is None:
        return "-"
    s = float(s)
    if s >= 1:
        return f"{_sig3(s)} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"


def fmt_count(n: float) -> str:
    """A bare count with a T/B/M/k suffix: ``1.1e12`` -> ``"1.1T"``."""
    n = float(n)
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.4g}{unit}" if abs(n / scale) < 9999.5 else f"{n / scale:,.0f}{unit}"
    return f"{n:.4g}"


def fmt_si(x: float | None, unit: str = "", digits: int = 3) -> str:
    """A quantity with an SI prefix and its unit: ``fmt_si(7.9e14, "FLOP/s")`` -> ``"790 TFLOP/s"``."""
    if x is None:
        return "-"
    x = float(x)
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.{digits}g} {prefix}{unit}"
    return f"{x:.{digits}g} {unit}".strip()


def json_safe(x):
    """``x`` with every float that JSON cannot hold (NaN, +-Infinity) replaced by None, through
    dicts, lists and tuples; numpy scalars and arrays become Python values. A value that is
    legitimately undefined (a ratio of zero, an untimed row) is null in JSON, never ``NaN``."""
    if isinstance(x, float):
        return x if x == x and x not in (float("inf"), float("-inf")) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if type(x).__module__ == "numpy":
        return json_safe(json_default(x))
    return x


def json_dumps(obj, indent: int | None = 2, **kwargs) -> str:
    """The one JSON serializer of command output: strict JSON (``allow_nan=False``) after
    ``json_safe``, so no output ever holds ``NaN`` or ``Infinity``."""
    import json

    return json.dumps(json_safe(obj), indent=indent, allow_nan=False, default=json_default, **kwargs)


def json_default(x):
    """``json.dumps(default=...)`` for numpy scalars and arrays (numpy imported only if needed)."""
    import numpy as np

    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serializable: {type(x).__name__}")
