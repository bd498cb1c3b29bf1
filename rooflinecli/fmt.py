"""Human-readable numbers for tables and reports: one definition of each format.

Bytes use decimal units (GB = 1e9), as GPU datasheets print them; times pick s / ms / us.
"""

from __future__ import annotations


def _rounded(x: float, digits: int) -> float:
    """``x`` rounded to ``digits`` significant digits, so that a unit is picked for the number as
    it will print (0.9996 s is "1 s", not "1e+03 ms")."""
    return float(f"{x:.{digits}g}")


def fmt_num(x: float | None, digits: int = 3) -> str:
    """A plain number to ``digits`` significant digits, whole from 10^(digits-1) on, without
    exponent notation: ``1642.7`` -> ``"1,643"``, ``0.1234`` -> ``"0.123"``, ``2.5e-6`` -> ``"2.5e-06"`` only below 1e-4 (where
    a fixed form would be all zeros); None -> ``"-"``."""
    if x is None:
        return "-"
    x = float(x)
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    r = _rounded(x, digits)
    if r == 0:
        return "0"
    if abs(r) >= 10 ** (digits - 1):
        return f"{x:,.0f}"  # whole numbers from there on, every digit shown
    return f"{x:,.{digits}g}"  # below 10^(digits-1): no exponent down to 1e-4


def _scaled(x: float, units: tuple, digits: int, sep: str = " ") -> str | None:
    """``x`` in the first (name, scale) unit it reaches once rounded, or None below them all."""
    r = _rounded(x, digits)
    for unit, scale in units:
        if abs(r) >= scale:
            return f"{fmt_num(x / scale, digits)}{sep}{unit}"
    return None


def fmt_bytes(n: float | None) -> str:
    """``1.5e9`` -> ``"1.5 GB"`` (decimal units); None -> ``"-"``."""
    if n is None:
        return "-"
    n = float(n)
    return _scaled(n, (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)), 3) or f"{n:.0f} B"


def fmt_time(s: float | None) -> str:
    """Seconds as ``"3.2 s"``, ``"4.52 ms"``, ``"70.2 us"`` or ``"310 ns"``; None -> ``"-"``."""
    if s is None:
        return "-"
    s = float(s)
    if s == 0:
        return "0 us"
    return _scaled(s, (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)), 3) or f"{fmt_num(s * 1e9)} ns"


def fmt_us(s: float | None) -> str:
    """Seconds as a bare microsecond figure of 4 significant digits, for a column headed in us:
    ``4.52e-5`` -> ``"45.2"``; None -> ``"-"``."""
    return "-" if s is None else f"{float(s) * 1e6:.4g}"


def fmt_pct(x: float | None, signed: bool = True) -> str:
    """A fraction as a percentage with one decimal: ``-0.048`` -> ``"-4.8%"`` (``signed``: ``"+"``
    on positive values); None -> ``"-"``."""
    if x is None:
        return "-"
    return f"{float(x) * 100:+.1f}%" if signed else f"{float(x) * 100:.1f}%"


def fmt_count(n: float) -> str:
    """A bare count with a T/B/M/k suffix: ``1.1e12`` -> ``"1.1T"``."""
    n = float(n)
    return _scaled(n, (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)), 4, sep="") or fmt_num(n, 4)


def fmt_si(x: float | None, unit: str = "", digits: int = 3) -> str:
    """A quantity with an SI prefix and its unit: ``fmt_si(7.9e14, "FLOP/s")`` -> ``"790 TFLOP/s"``."""
    if x is None:
        return "-"
    x = float(x)
    units = tuple((f"{prefix}{unit}", scale) for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")))
    return _scaled(x, units, digits) or f"{fmt_num(x, digits)} {unit}".strip()


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
