"""Request streams: arrival times and (input, output) lengths, seeded.

- arrivals: Poisson at a rate, or bursty (gamma inter-arrival gaps with the same mean; shape
  ``burstiness`` as vLLM's benchmark client takes it: 1 is Poisson, below 1 burstier);
- lengths: fixed, or uniform within ``spread`` of the mean (vLLM's ``--random-range-ratio``);
- a trace file: CSV rows ``arrival_s,input_tokens,output_tokens`` (a header naming them first).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rooflinecli.errors import RooflineError

TRACE_COLUMNS = ("arrival_s", "input_tokens", "output_tokens")


@dataclass(frozen=True)
class Stream:
    """Requests in arrival order: arrival_s (None for a closed loop: clients send on completion),
    input_tokens, output_tokens."""

    arrival_s: np.ndarray | None
    input_tokens: np.ndarray
    output_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.input_tokens)


def lengths(rng: np.random.Generator, n: int, mean: int, spread: float, option: str) -> np.ndarray:
    """``n`` token counts: ``mean`` each, or uniform whole numbers within ``spread`` x mean of it (>= 1)."""
    if not 0.0 <= spread < 1.0:
        raise RooflineError(f"{option}: spread must be in [0, 1), got {spread:g}")
    if spread == 0.0:
        return np.full(n, int(mean), dtype=np.int64)
    lo = max(1, int(math.floor(mean * (1.0 - spread))))
    hi = max(lo, int(math.ceil(mean * (1.0 + spread))))
    return rng.integers(lo, hi + 1, size=n, dtype=np.int64)


def arrivals(rng: np.random.Generator, n: int, rate_per_s: float, burstiness: float = 1.0) -> np.ndarray:
    """``n`` arrival times (s) at ``rate_per_s``: gamma gaps of shape ``burstiness`` (1: Poisson)."""
    if not rate_per_s > 0:
        raise RooflineError(f"--rate must be > 0 requests/s, got {rate_per_s:g}")
    if not burstiness > 0:
        raise RooflineError(f"--burstiness must be > 0 (1 = Poisson), got {burstiness:g}")
    gaps = rng.gamma(burstiness, 1.0 / (rate_per_s * burstiness), size=n)
    return np.cumsum(gaps) - gaps[0]


def read_trace(path: str | Path) -> Stream:
    """A trace file's requests, sorted by arrival. A bad row is a RooflineError naming its line."""
    p = Path(path)
    if not p.is_file():
        raise RooflineError(f"--trace {p}: no such file")
    rows: list[tuple[float, int, int]] = []
    with p.open(newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        names = [h.strip().lower() for h in header] if header else []
        if any(c not in names for c in TRACE_COLUMNS):
            raise RooflineError(f"{p}:1: the header must name the columns {', '.join(TRACE_COLUMNS)}; got {', '.join(names) or 'nothing'}")
        idx = [names.index(c) for c in TRACE_COLUMNS]
        for line, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) < len(names):
                raise RooflineError(f"{p}:{line}: {len(row)} fields, the header has {len(names)}")
            a, i, o = (row[k].strip() for k in idx)
            try:
                arrival = float(a)
            except ValueError:
                raise RooflineError(f"{p}:{line}: arrival_s '{a}' is not a number") from None
            if not math.isfinite(arrival) or arrival < 0:
                raise RooflineError(f"{p}:{line}: arrival_s must be a finite number >= 0, got '{a}'")
            counts = []
            for name, v in (("input_tokens", i), ("output_tokens", o)):
                if not v.isdigit() or int(v) < 1:
                    raise RooflineError(f"{p}:{line}: {name} must be a whole number >= 1, got '{v}'")
                counts.append(int(v))
            rows.append((arrival, counts[0], counts[1]))
    if not rows:
        raise RooflineError(f"{p}: no requests (rows of {', '.join(TRACE_COLUMNS)})")
    rows.sort(key=lambda r: r[0])
    a = np.array([r[0] for r in rows], dtype=float)
    return Stream(a - a[0], np.array([r[1] for r in rows], dtype=np.int64), np.array([r[2] for r in rows], dtype=np.int64))
