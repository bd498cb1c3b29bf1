"""Grid text for sweeps: comma lists and inclusive ranges.

Syntax (case-insensitive ``k`` suffix = 1024)::

    8                 one value
    1,2,4,8           a list
    1..1024           every integer from 1 to 1024 (inclusive)
    1k..128k:1k       1024, 2048, ..., 131072 (step 1024)
    1..1024:x2        1, 2, 4, ..., 1024 (geometric, factor 2)
    1,16..64:x2,100   items combine

The result is the sorted set of values, as an int64 numpy array.
"""

from __future__ import annotations

import math
import re

import numpy as np

from rooflinecli.errors import RooflineError

#: Largest number of values one grid axis may hold (a typo like ``1..1e9`` must not eat memory).
MAX_AXIS_VALUES = 10_000_000
#: Largest value a grid may hold: 2**53 (exact as a float64, far inside int64).
MAX_GRID_VALUE = 2**53

_HELP = "use comma lists and A..B[:STEP|:xF] ranges, k = 1024 (e.g. 1..1024:x2, 1k..128k:1k)"
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*(k?)\s*$", re.IGNORECASE)


def _number(text: str, option: str, grid: str) -> float:
    m = _NUMBER.match(text)
    if not m:
        raise RooflineError(f"{option}: bad number '{text.strip()}' in '{grid}'; {_HELP}")
    value = float(m.group(1)) * (1024 if m.group(2) else 1)
    if not value <= MAX_GRID_VALUE:  # also inf from 1e400
        raise RooflineError(f"{option}: '{text.strip()}' in '{grid}' is above the limit of 2**53 = {MAX_GRID_VALUE:,}")
    return value


def _integer(text: str, option: str, grid: str) -> int:
    value = _number(text, option, grid)
    if value != math.floor(value):
        raise RooflineError(f"{option}: '{text.strip()}' in '{grid}' is not a whole number")
    return int(value)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values. ``np.unique`` of numpy 2.4 took 22 s on 5M int64 here (hash path);
    a sort and a neighbour mask takes under a second."""
    v = np.sort(values)
    return v[np.concatenate(([True], v[1:] != v[:-1]))] if v.size else v


def parse_grid(text: str, option: str = "grid", minimum: int = 1) -> np.ndarray:
    """Parse grid text (see module docstring) into sorted unique int64 values >= ``minimum``.

    Every problem is a one-line RooflineError naming ``option`` and the offending item.
    """
    if text is None or not str(text).strip():
        raise RooflineError(f"{option}: empty grid; {_HELP}")
    parts: list[np.ndarray] = []
    total = 0
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            raise RooflineError(f"{option}: empty item in '{text}'; {_HELP}")
        if ".." in item:
            lo_text, _, rest = item.partition("..")
            hi_text, colon, step_text = rest.partition(":")
            lo = _integer(lo_text, option, text)
            hi = _integer(hi_text, option, text)
            if hi < lo:
                raise RooflineError(f"{option}: range '{item}' ends before it starts")
            step_text = step_text.strip()
            if colon and not step_text:
                raise RooflineError(f"{option}: range '{item}' has an empty step; {_HELP}")
            if step_text[:1].lower() == "x":
                factor = _number(step_text[1:], option, text)
                if factor <= 1:
                    raise RooflineError(f"{option}: range '{item}' needs a factor above 1, got x{step_text[1:]}")
                if lo < 1:
                    raise RooflineError(f"{option}: geometric range '{item}' must start at 1 or more")
                if total + math.log(hi / lo) / math.log(factor) + 1 > MAX_AXIS_VALUES:  # before the loop
                    raise RooflineError(f"{option}: '{text}' has more than {MAX_AXIS_VALUES:,} values")
                values = []
                v = float(lo)
                while v <= hi:
                    values.append(int(round(v)))
                    v *= factor
                arr = np.unique(np.asarray(values, dtype=np.int64))
            else:
                step = _integer(step_text, option, text) if step_text else 1
                if step < 1:
                    raise RooflineError(f"{option}: range '{item}' needs a step of 1 or more")
                count = (hi - lo) // step + 1
                if total + count > MAX_AXIS_VALUES:
                    raise RooflineError(f"{option}: '{text}' has more than {MAX_AXIS_VALUES:,} values")
                arr = np.arange(lo, hi + 1, step, dtype=np.int64)
        else:
            arr = np.asarray([_integer(item, option, text)], dtype=np.int64)
        total += arr.size
        if total > MAX_AXIS_VALUES:
            raise RooflineError(f"{option}: '{text}' has more than {MAX_AXIS_VALUES:,} values")
        parts.append(arr)
    values = _sorted_unique(np.concatenate(parts))
    if values[0] < minimum:
        raise RooflineError(f"{option}: values must be >= {minimum}, got {int(values[0])} in '{text}'")
    return values


def parse_list(text: str, option: str) -> list[str]:
    """A comma list of names (``bf16,fp8``): stripped, order kept, duplicates dropped."""
    names = [n.strip() for n in str(text).split(",")]
    if not text or any(not n for n in names):
        raise RooflineError(f"{option}: empty name in '{text}'; give a comma list like a,b")
    return list(dict.fromkeys(names))
