"""Benchmark results: one versioned JSON schema shared by ``bench``, ``validate``, ``report``,
``regress`` and ``baseline``.

A results file::

    {
      "schema": "rooflinecli.results/1",
      "created_utc": "2026-11-29T19:00:00Z",
      "tool_version": "0.1.0",
      "suite": "full",
      "hardware_spec": "h200",                 # datasheet spec id used for predictions
      "measured_spec": "h200-measured" | null, # measured spec id used for predictions
      "environment": {"gpu_name": "NVIDIA H200", "driver": "...", "cuda": "...", "torch": "...",
                      "triton": "...", "python": "...", "sm_clock_mhz": 1980, "mem_clock_mhz": 3201},
      "rows": [ResultRow, ...]
    }

Rows are long-format: one per (op, impl, shape, dtype), carrying every raw sample. A row whose
correctness check failed has ``correct = false``, no samples and null quantiles: it was not timed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rooflinecli.atomic import write_json_atomic
from rooflinecli.errors import RooflineError

SCHEMA = "rooflinecli.results/1"


@dataclass(frozen=True)
class ResultRow:
    op: str  # kernel name: copy, gemm, flash_attention, decode_attention, ...
    impl: str  # "triton" (ours) or "torch" (the PyTorch/cuBLAS equivalent timed in the same run)
    shape: str  # readable id, e.g. "M4096-N4096-K4096"
    dtype: str
    samples_s: tuple[float, ...]  # every timed sample, seconds
    p20_s: float
    p50_s: float
    p80_s: float
    flops: float  # from the model's formulas (rooflinecli.formulas)
    bytes: float  # minimum HBM bytes, from the model's formulas
    params: dict[str, Any] = field(default_factory=dict)  # shape parameters {"M": 4096, ...}
    achieved_tflops: float | None = None
    achieved_gb_per_s: float | None = None
    predicted_s_datasheet: float | None = None
    predicted_s_measured: float | None = None
    pct_of_roof: float | None = None  # roofline time (best available ceilings) / measured time * 100
    correct: bool = True
    max_rel_error: float | None = None
    #: how the samples were taken: "cuda_graph" (graph replay over rotating inputs, GPU time),
    #: "cuda_events_host_ahead" (events with the host kept ahead of the GPU), "cuda_events" (plain
    #: events: may include host time; old files), "wall_clock" (CPU interpreter, tests only)
    method: str = "cuda_events"
    note: str = ""
    #: host microseconds per call of the launcher (eager loop, GPU work included only where the
    #: host waits for it); None in files written before the field existed
    host_us_per_call: float | None = None
    #: the config every autotuned kernel of the case ran with: {autotuner name: {"kwargs": {...},
    #: "num_warps": w, "num_stages": s}}; {} when the launcher has no autotuner
    config: dict[str, Any] = field(default_factory=dict)
    #: where that config came from: "committed" (kernels/tuned/<gpu>-triton<ver>.json),
    #: "autotuned" (tuned at run time: the row ran untuned), "fixed" (no autotuner), "" (unknown)
    tuning: str = ""
    #: for a torch row, which path ran ("sdpa:cudnn", "cublas", ...); "" when there is one path
    backend: str = ""
    #: op kind in the analytical model ("copy", "gemm", "attention", "elementwise", "moe")
    model_kind: str = ""
    #: the peak the row is held to ("bf16"; "tf32" for an fp32 matrix kernel)
    compute_dtype: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.op, self.impl, self.shape, self.dtype)

    @property
    def name(self) -> str:
        return f"{self.op}[{self.impl}] {self.shape} {self.dtype}"


@dataclass(frozen=True)
class Results:
    rows: tuple[ResultRow, ...]
    environment: dict[str, Any]
    created_utc: str
    tool_version: str
    suite: str = "full"
    hardware_spec: str | None = None
    measured_spec: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # calibration, end-to-end checks, ...
    path: str = ""

    @property
    def gpu_name(self) -> str:
        return str(self.environment.get("gpu_name", "unknown"))

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "created_utc": self.created_utc,
            "tool_version": self.tool_version,
            "suite": self.suite,
            "hardware_spec": self.hardware_spec,
            "measured_spec": self.measured_spec,
            "environment": self.environment,
            "rows": [_row_json(r) for r in self.rows],
            "extra": self.extra,
        }

    def save(self, path: str | Path, *, make_parents: bool = False) -> Path:
        return write_json_atomic(path, self.to_json(), make_parents=make_parents)


def _row_json(r: ResultRow) -> dict[str, Any]:
    d = asdict(r)
    d["samples_s"] = list(r.samples_s)
    for k in ("p20_s", "p50_s", "p80_s"):  # NaN (an untimed, failed row) is written as null
        if d[k] != d[k]:
            d[k] = None
    return d


_ROW_FIELDS = {f.name for f in fields(ResultRow)}
_REQUIRED_ROW = {"op", "impl", "shape", "dtype", "samples_s", "p20_s", "p50_s", "p80_s", "flops", "bytes"}


def load_results(path: str | Path) -> Results:
    """Load a results file; a file of another schema or a malformed row is a one-line error."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RooflineError(f"{path}: no such results file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RooflineError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(raw, dict) or "schema" not in raw:
        raise RooflineError(f"{path}: not a rooflinecli results file (no 'schema' key)")
    if raw["schema"] != SCHEMA:
        raise RooflineError(f"{path}: results schema '{raw['schema']}' is not supported; expected '{SCHEMA}'")
    rows_raw = raw.get("rows")
    if not isinstance(rows_raw, list):
        raise RooflineError(f"{path}: 'rows' must be a list")
    rows = []
    for i, r in enumerate(rows_raw):
        if not isinstance(r, dict):
            raise RooflineError(f"{path}: rows[{i}] is not an object")
        missing = _REQUIRED_ROW - r.keys()
        if missing:
            raise RooflineError(f"{path}: rows[{i}] lacks key '{sorted(missing)[0]}'")
        unknown = set(r) - _ROW_FIELDS
        if unknown:
            raise RooflineError(f"{path}: rows[{i}] has unknown key '{sorted(unknown)[0]}'")
        samples = r["samples_s"]
        untimed = r.get("correct") is False and samples == []  # failed its check: not timed
        if not untimed and (not isinstance(samples, list) or not samples or not all(isinstance(x, (int, float)) and x > 0 for x in samples)):
            raise RooflineError(f"{path}: rows[{i}] ({r['op']} {r['shape']}): 'samples_s' must be a non-empty list of positive seconds")
        r = dict(r)
        r["samples_s"] = tuple(float(x) for x in samples)
        for k in ("p20_s", "p50_s", "p80_s"):
            if r[k] is None and untimed:
                r[k] = float("nan")
        rows.append(ResultRow(**r))
    env = raw.get("environment")
    if not isinstance(env, dict):
        raise RooflineError(f"{path}: 'environment' must be an object")
    return Results(
        rows=tuple(rows),
        environment=env,
        created_utc=str(raw.get("created_utc", "")),
        tool_version=str(raw.get("tool_version", "")),
        suite=str(raw.get("suite", "full")),
        hardware_spec=raw.get("hardware_spec"),
        measured_spec=raw.get("measured_spec"),
        extra=raw.get("extra") or {},
        path=str(path),
    )


def quantiles_s(samples: list[float] | tuple[float, ...]) -> tuple[float, float, float]:
    """(p20, p50, p80) of timing samples, linear interpolation."""
    import numpy as np

    a = np.asarray(samples, dtype=float)
    p20, p50, p80 = np.percentile(a, [20, 50, 80])
    return float(p20), float(p50), float(p80)
