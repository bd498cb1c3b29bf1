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
import math
import os
import re
from dataclasses import MISSING, dataclass, field, fields, replace
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

from rooflinecli.bulk import bulk
from rooflinecli.errors import MAX_USER_FILE_BYTES, RooflineError, one_line
from rooflinecli.output import RawJSON, json_chunks, write_chunks_atomic

SCHEMA = "rooflinecli.results/1"
#: the schema prefix of every version of the results file (``output.resolve_output``'s ``kind``)
RESULTS_KIND = "rooflinecli.results/"


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

    def to_json(self, sample_text: dict[tuple, str] | None = None) -> dict[str, Any]:
        """The file's object; ``sample_text``: per row key, its samples' JSON text to copy
        (``output.RawJSON``) instead of the floats, for ``chunks``."""
        return {
            "schema": SCHEMA,
            "created_utc": self.created_utc,
            "tool_version": self.tool_version,
            "suite": self.suite,
            "hardware_spec": self.hardware_spec,
            "measured_spec": self.measured_spec,
            "environment": self.environment,
            "rows": [_row_json(r) for r in self.rows] if not sample_text else [_row_json(r, sample_text.get(r.key)) for r in self.rows],
            "extra": self.extra,
        }

    def text(self) -> str:
        """The file's text (ASCII: its length is its size in bytes)."""
        return "".join(self.chunks())

    def chunks(self, sample_text: dict[tuple, str] | None = None) -> list[str]:
        """The file's text in pieces (``output.json_chunks``; ASCII: their lengths sum to its
        size in bytes). ``sample_text``: per row key, the JSON text of exactly its samples
        (``load_results_keeping_sample_text``), copied into the file rather than encoded again:
        the same numbers, spelled as the file it came from."""
        out = json_chunks(self.to_json(sample_text), raw=bool(sample_text))
        out.append("\n")
        return out

    def save(self, path: str | Path, *, make_parents: bool = False, text: str | list[str] | None = None) -> Path:
        """Write atomically (``text``: this object's ``text()`` or ``chunks()``, when the caller
        already made it); an existing file at ``path`` must be a results file (a config, a spec
        or a log named by mistake is refused, not replaced), and a file no reader would accept
        (over ``MAX_USER_FILE_BYTES``) is refused before anything is written."""
        chunks = self.chunks() if text is None else [text] if isinstance(text, str) else text
        size = sum(map(len, chunks))
        if size > MAX_USER_FILE_BYTES:
            raise RooflineError(f"{path}: the results would be {size:,} bytes, over the {MAX_USER_FILE_BYTES:,}-byte limit "
                                "every results reader applies; nothing written")
        return write_chunks_atomic(path, chunks, make_parents=make_parents, kind=RESULTS_KIND)


def _row_json(r: ResultRow, sample_text: str | None = None) -> dict[str, Any]:
    d = dict(zip(_ROW_FIELD_ORDER, _ROW_VALUES(r.__dict__)))  # not asdict: it deep-copies every sample
    d["samples_s"] = list(r.samples_s) if sample_text is None else RawJSON(sample_text)
    d["params"], d["config"] = dict(r.params), _copied(r.config)  # params hold scalars only (check_row)
    for k in ("p20_s", "p50_s", "p80_s"):  # NaN (an untimed, failed row) is written as null
        if d[k] != d[k]:
            d[k] = None
    return d


def _copied(x: Any) -> Any:
    """A copy of JSON-like data (dicts and lists copied, scalars shared): ``copy.deepcopy``'s
    result for what a row holds, at a fraction of its cost."""
    if isinstance(x, dict):
        return {k: _copied(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_copied(v) for v in x]
    return x


_ROW_FIELD_ORDER = tuple(f.name for f in fields(ResultRow))
_ROW_VALUES = itemgetter(*_ROW_FIELD_ORDER)  # a row's fields in order, from its __dict__ (which holds every field)
_ROW_DEFAULTS = {f.name: f.default for f in fields(ResultRow) if f.default is not MISSING}
_ROW_FACTORIES = {f.name: f.default_factory for f in fields(ResultRow) if f.default_factory is not MISSING}


def row_from_checked(d: dict[str, Any]) -> ResultRow:
    """The ``ResultRow`` of fields already checked (every key a field, the required ones present):
    ``ResultRow(**d)`` without the frozen dataclass's one ``object.__setattr__`` per field, which
    is a third of reading a 100,000-row file. Same object, same equality and hash. ``d`` becomes
    the row's state (missing fields filled with their defaults): pass a dict nothing else keeps."""
    if len(d) != len(_ROW_FIELD_ORDER):
        for k, v in _ROW_DEFAULTS.items():
            d.setdefault(k, v)
        for k, make in _ROW_FACTORIES.items():
            if k not in d:
                d[k] = make()
    row = object.__new__(ResultRow)
    object.__setattr__(row, "__dict__", d)
    return row


_ROW_FIELDS = set(_ROW_FIELD_ORDER)
_REQUIRED_ROW = {"op", "impl", "shape", "dtype", "samples_s", "p20_s", "p50_s", "p80_s", "flops", "bytes"}


#: samples one row may hold: real runs keep tens to hundreds; rank statistics on a row are O(n^2)
MAX_SAMPLES_PER_ROW = 100_000
#: rows one results file may hold (a full suite is a few hundred)
MAX_ROWS = 100_000
#: the largest figure a row may give (FLOPs, bytes, seconds, ...): beyond it a value is corrupt
MAX_ROW_NUMBER = 1e30
#: the shortest sample a timed row may hold: a nanosecond is far below any kernel launch (about
#: 1 us in a CUDA graph), and FLOPs / 1e-300 s is infinite
MIN_SAMPLE_S = 1e-9
#: shape parameters that readers compare as numbers (the targets' shape filters, the report's axes)
NUMERIC_PARAMS = frozenset({"B", "H", "H_kv", "KVH", "N", "S", "D", "Dv", "M", "K", "T", "E", "k", "d", "I", "R", "P", "context"})
_ROW_STR = ("op", "impl", "shape", "dtype", "method", "note", "tuning", "backend", "model_kind", "compute_dtype")
_ROW_NUM = ("flops", "bytes", "p20_s", "p50_s", "p80_s", "achieved_tflops", "achieved_gb_per_s", "predicted_s_datasheet",
            "predicted_s_measured", "pct_of_roof", "max_rel_error", "host_us_per_call")


#: what ``errors.has_control`` refuses in a name: C0 (tabs and newlines too), DEL and C1 characters
_CONTROL_OR_ESCAPE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_row(where: str, r: dict) -> None:
    """Types and ranges of one row's fields (``where`` names the row in the error): strings are
    strings without control characters, numbers are finite, non-negative and below MAX_ROW_NUMBER
    (or null where optional), ``correct`` a boolean."""
    texts = [r[k] for k in _ROW_STR if k in r]
    # one pass for the common case (every string short and clean); the field is named on failure
    if not all(type(t) is str and len(t) <= 1000 for t in texts) or _CONTROL_OR_ESCAPE.search("".join(texts)):
        from rooflinecli.errors import has_control

        for k in _ROW_STR:
            if k in r and (not isinstance(r[k], str) or has_control(r[k]) or len(r[k]) > 1000):
                raise RooflineError(f"{where}: '{k}' must be a string of at most 1000 characters without control characters")
    for k in _ROW_NUM:
        v = r.get(k)
        if v is None:
            continue
        if type(v) not in (int, float) or not 0 <= v <= MAX_ROW_NUMBER:
            raise RooflineError(f"{where} ({r['op']} {r['shape']}): '{k}' must be a number in [0, {MAX_ROW_NUMBER:g}], got {json.dumps(v)[:40]}")
    if "correct" in r and not isinstance(r["correct"], bool):
        raise RooflineError(f"{where}: 'correct' must be true or false, got {json.dumps(r['correct'])[:40]}")
    for k in ("params", "config"):
        if k in r and not isinstance(r[k], dict):
            raise RooflineError(f"{where}: '{k}' must be an object")
    for name, v in (r.get("params") or {}).items():  # shape parameters: readers compare and multiply them
        numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not (numeric and math.isfinite(v) and abs(v) <= MAX_ROW_NUMBER) and not (isinstance(v, (str, bool)) or v is None):
            raise RooflineError(f"{where}: params.{one_line(name)[:40]} must be a number, a string, true/false or null, got {json.dumps(v)[:40]}")
        if name in NUMERIC_PARAMS and not numeric:
            raise RooflineError(f"{where}: params.{name} must be a number, got {json.dumps(v)[:40]}")
    samples = r.get("samples_s")
    if isinstance(samples, list) and len(samples) > MAX_SAMPLES_PER_ROW:
        raise RooflineError(f"{where} ({r['op']} {r['shape']}): {len(samples):,} samples; the limit is {MAX_SAMPLES_PER_ROW:,} per row")


#: the sections of ``extra`` that readers walk (each an object when present)
_EXTRA_SECTIONS = ("bench", "baseline", "end_to_end", "end_to_end_full")
#: the largest batch or context a whole-model point may record
MAX_E2E_INT = 1 << 24


def _objects(items: Any, where: str) -> list[dict]:
    if not isinstance(items, list) or not all(isinstance(p, dict) for p in items):
        raise RooflineError(f"{where} must be a list of objects")
    return items


def _check_measured_s(p: dict, where: str) -> None:
    v = p.get("measured_s")
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= MAX_ROW_NUMBER):
        raise RooflineError(f"{where}.measured_s must be positive seconds, got {json.dumps(v)[:40]}")


def _check_extra(path: Path, extra: Any) -> None:
    """``extra`` is an object, and the sections readers walk have the types they expect: a results
    file of another tool, or edited by hand, is one line, not an AttributeError deep in a reader.
    ``end_to_end.phases`` [{measured_s}], ``end_to_end_full.models`` {name: {points: [{phase,
    engine, batch, context, measured_s}]}}."""
    if extra is None:
        return
    if not isinstance(extra, dict):
        raise RooflineError(f"{path}: 'extra' must be an object, got {type(extra).__name__}")
    for name in _EXTRA_SECTIONS:
        if extra.get(name) is not None and not isinstance(extra[name], dict):
            raise RooflineError(f"{path}: extra.{name} must be an object, got {type(extra[name]).__name__}")
    phases = (extra.get("end_to_end") or {}).get("phases")
    for j, p in enumerate(_objects(phases, f"{path}: extra.end_to_end.phases") if phases is not None else []):
        _check_measured_s(p, f"{path}: extra.end_to_end.phases[{j}]")
    models = (extra.get("end_to_end_full") or {}).get("models")
    if models is None:
        return
    if not isinstance(models, dict) or not all(isinstance(m, dict) for m in models.values()):
        raise RooflineError(f"{path}: extra.end_to_end_full.models must be an object of objects")
    for mname, m in models.items():
        for j, p in enumerate(_objects(m.get("points", []), f"{path}: extra.end_to_end_full.models.{mname}.points")):
            where = f"{path}: extra.end_to_end_full.models.{mname}.points[{j}]"
            _check_measured_s(p, where)
            if p.get("phase") not in ("decode", "prefill") or not isinstance(p.get("engine", "torch"), str):
                raise RooflineError(f"{where}: phase must be 'decode' or 'prefill' and engine a string")
            for k in ("batch", "context"):
                n = p.get(k)
                if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_E2E_INT:
                    raise RooflineError(f"{where}.{k} must be an integer in [1, {MAX_E2E_INT:,}], got {json.dumps(n)[:40]}")


#: a stored quantile agrees with its samples when it lies between the order statistics one rank
#: either side of numpy's linear-rule position (so files written with another quantile rule, such
#: as 'lower', 'nearest' or 'weibull', agree), with this much relative slack for rounding
SUMMARY_RTOL = 1e-6
_QUANTILES = (("p20_s", 0.2), ("p50_s", 0.5), ("p80_s", 0.8))


def median_s(samples) -> float:
    """The median of timing samples (linear interpolation, as ``quantiles_s``), pure Python."""
    a = sorted(samples)
    n = len(a)
    return float(a[n // 2]) if n % 2 else (a[n // 2 - 1] + a[n // 2]) / 2.0


def pooled_median_s(runs) -> float:
    """A pooled baseline's median: the median of its runs' medians, each derived from that run's
    samples (one slow or fast run cannot move it far)."""
    return median_s([median_s(run) for run in runs])


def summary_mismatch(sorted_samples, stored: dict[str, float], quantiles=_QUANTILES) -> tuple[str, float, float] | None:
    """(field, stored value, value derived from the samples) of the first summary field that the
    sorted samples contradict, or None when every one agrees (see ``SUMMARY_RTOL``)."""
    a = sorted_samples
    n = len(a)
    for key, q in quantiles:
        v = stored[key]
        pos = q * (n - 1)
        lo, hi = a[max(0, math.floor(pos) - 1)], a[min(n - 1, math.ceil(pos) + 1)]
        if not lo * (1 - SUMMARY_RTOL) <= v <= hi * (1 + SUMMARY_RTOL):
            f = pos - math.floor(pos)
            derived = a[math.floor(pos)] * (1 - f) + a[min(n - 1, math.floor(pos) + 1)] * f
            return key, v, derived
    return None


#: a pooled baseline (``roofline baseline``): its rows are the pooled rows, ``extra.baseline.runs``
#: the stored runs. In /2 a stored run's rows are ``BASELINE_RUN_ROW`` lists and the samples live
#: once, in the pooled rows (each pooled row's ``samples_s`` is its runs' samples, oldest run first);
#: in /1 (still read) every stored run kept whole rows, so each sample was stored twice
BASELINE_FORMAT = "rooflinecli.baseline/2"
BASELINE_FORMAT_V1 = "rooflinecli.baseline/1"
#: a /2 stored run's row: the index of its pooled row, how many of that row's samples are this
#: run's, and the run's own host_us_per_call, pct_of_roof (null or a number) and tuned config
BASELINE_RUN_ROW = ("row", "n_samples", "host_us_per_call", "pct_of_roof", "config")


def baseline_info(extra: Any) -> dict | None:
    """``extra.baseline`` of a pooled baseline (a dict whose ``format`` is known), else None."""
    info = extra.get("baseline") if isinstance(extra, dict) else None
    if isinstance(info, dict) and info.get("format") in (BASELINE_FORMAT, BASELINE_FORMAT_V1) and isinstance(info.get("runs"), list):
        return info
    return None


def _optional_number(v: Any) -> bool:
    return v is None or (type(v) in (int, float) and 0 <= v <= MAX_ROW_NUMBER)


def stored_run_samples(info: dict, keys: list[tuple], samples: list, where: str) -> dict[tuple, list]:
    """Per row key, the samples of each stored run that holds the row, oldest run first (slices of
    the pooled row's ``samples``; /1: the stored rows' own). ``keys``/``samples``: the pooled rows'
    keys and samples, in file order. A /2 stored run that does not add up (an index out of range,
    a row twice in one run, counts that do not sum to the pooled row's samples) is a one-line error
    naming ``where``; /1 stored rows that cannot be read are left out (pooling refuses them)."""
    out: dict[tuple, list] = {}
    if info.get("format") == BASELINE_FORMAT_V1:
        for run in info["runs"]:
            for row in run.get("rows", ()) if isinstance(run, dict) and isinstance(run.get("rows"), list) else ():
                if not isinstance(row, dict):
                    continue
                key = tuple(row.get(k) for k in ("op", "impl", "shape", "dtype"))
                s = row.get("samples_s")
                if all(isinstance(x, str) for x in key) and _seconds_list(s):
                    out.setdefault(key, []).append(s)
        return out
    n_rows = len(keys)
    offsets = [0] * n_rows
    for j, run in enumerate(info["runs"]):
        rows = run.get("rows") if isinstance(run, dict) else None
        if not isinstance(rows, list):
            raise RooflineError(f"{where}: extra.baseline.runs[{j}] has no 'rows' list")
        seen: set[int] = set()
        for m, rr in enumerate(rows):
            if not (type(rr) is list and len(rr) == len(BASELINE_RUN_ROW) and type(rr[0]) is int and 0 <= rr[0] < n_rows
                    and type(rr[1]) is int and rr[1] >= 1 and _optional_number(rr[2]) and _optional_number(rr[3]) and type(rr[4]) is dict):
                raise RooflineError(f"{where}: extra.baseline.runs[{j}].rows[{m}] must be [{', '.join(BASELINE_RUN_ROW)}] "
                                    f"(a row index below {n_rows:,}, a positive count, two numbers or nulls, an object), got {json.dumps(rr, default=str)[:60]}")
            i, n = rr[0], rr[1]
            if i in seen:
                raise RooflineError(f"{where}: extra.baseline.runs[{j}].rows[{m}] names rows[{i}] a second time")
            seen.add(i)
            start = offsets[i]
            offsets[i] = start + n
            out.setdefault(keys[i], []).append(samples[i][start:start + n])
    for i, used in enumerate(offsets):
        if used != len(samples[i]):
            raise RooflineError(f"{where}: rows[{i}] holds {len(samples[i]):,} samples, its stored runs {used:,}; "
                                "a pooled row's samples are its runs' samples")
    return out


def _check_summary(path: Path, i: int, r: dict, pooled: dict[tuple, list[list[float]]] | None) -> None:
    """A timed row's p20/p50/p80 are derived from its samples, never trusted: a row whose stored
    summary the samples contradict is refused. In a baseline file p50_s is the median of the
    stored runs' medians (``pooled_median_s``), p20/p80 quantiles of the pooled samples."""
    a = sorted(r["samples_s"])

    def where() -> str:  # built only for an error
        return f"{path}: rows[{i}] ({one_line(r['op'])[:60]} {one_line(r['shape'])[:60]} {one_line(r['dtype'])[:20]} [{one_line(r['impl'])[:20]}])"

    quantiles = _QUANTILES
    if pooled is not None:
        runs = pooled.get((r["op"], r["impl"], r["shape"], r["dtype"]))
        if not runs:
            raise RooflineError(f"{where()}: no stored run of the baseline holds this row, so its p50_s cannot be derived")
        derived = pooled_median_s(runs)
        if not abs(r["p50_s"] - derived) <= SUMMARY_RTOL * derived:
            raise RooflineError(f"{where()}: stored p50_s {r['p50_s']:.6g} s disagrees with the median of its {len(runs)} stored run(s) "
                                f"({derived:.6g} s); summaries are derived from samples, never trusted")
        quantiles = (_QUANTILES[0], _QUANTILES[2])
    bad = summary_mismatch(a, r, quantiles)
    if bad is not None:
        key, v, derived = bad
        raise RooflineError(f"{where()}: stored {key} {v:.6g} s disagrees with its {len(a):,} samples ({key} of the samples: {derived:.6g} s); "
                            "summaries are derived from samples, never trusted")


def _seconds_list(samples) -> bool:
    """Whether ``samples`` is a non-empty list of numbers (not booleans) in [MIN_SAMPLE_S, MAX_ROW_NUMBER]."""
    if not isinstance(samples, list) or not samples or not set(map(type, samples)) <= {int, float}:
        return False
    return MIN_SAMPLE_S <= min(samples) and max(samples) <= MAX_ROW_NUMBER


def _check_raw_row(path: Path, i: int, r: Any) -> None:
    """Every check one parsed row must pass, in order; the first that fails is a one-line error
    naming the row and the field. ``rows_pass_checks`` makes the same checks over all rows at once."""
    if not isinstance(r, dict):
        raise RooflineError(f"{path}: rows[{i}] is not an object")
    if not r.keys() >= _REQUIRED_ROW:
        raise RooflineError(f"{path}: rows[{i}] lacks key '{sorted(_REQUIRED_ROW - r.keys())[0]}'")
    if not _ROW_FIELDS.issuperset(r):
        raise RooflineError(f"{path}: rows[{i}] has unknown key '{sorted(r.keys() - _ROW_FIELDS)[0]}'")
    check_row(f"{path}: rows[{i}]", r)
    samples = r["samples_s"]
    untimed = r.get("correct") is False and samples == []  # failed its check: not timed
    if not untimed and not _seconds_list(samples):
        raise RooflineError(f"{path}: rows[{i}] ({r['op']} {r['shape']}): 'samples_s' must be a non-empty list of seconds in [{MIN_SAMPLE_S:g}, {MAX_ROW_NUMBER:g}]")
    if not untimed:  # a timed row's quantiles and cost are what every reader divides by
        for k in ("p20_s", "p50_s", "p80_s"):
            if r[k] is None or not r[k] >= MIN_SAMPLE_S:
                raise RooflineError(f"{path}: rows[{i}] ({r['op']} {r['shape']}): '{k}' must be at least {MIN_SAMPLE_S:g} s in a timed row, got {json.dumps(r[k])}")
        for k in ("flops", "bytes"):
            if r[k] is None:
                raise RooflineError(f"{path}: rows[{i}] ({r['op']} {r['shape']}): '{k}' must be a number in a timed row, got null")


_NUMBER = frozenset({int, float})
_NUMBER_OR_NULL = frozenset({int, float, type(None)})
_PARAM_TYPES = frozenset({int, float, str, bool, type(None)})


def rows_pass_checks(rows_raw: list) -> bool:
    """Whether every parsed row passes every check of ``_check_raw_row``, tested a column at a time
    over the rows that share one set of keys (each check one pass at C speed: a 100,000-row file
    in under a second). False says only that some row may fail: ``_check_raw_row`` then finds and
    names it."""
    if not all(type(r) is dict for r in rows_raw):
        return False
    groups: dict[tuple, list[dict]] = {}
    for r in rows_raw:  # rows written by one tool share their keys (and their order)
        groups.setdefault(tuple(r), []).append(r)
    return all(_group_passes(set(keys), rows) for keys, rows in groups.items())


def _column(rows: list[dict], keys: list[str]) -> list:
    """The values of ``keys`` in every row, one flat list (each row holds every key)."""
    if not keys:
        return []
    if len(keys) == 1:
        return list(map(itemgetter(keys[0]), rows))
    return list(chain.from_iterable(map(itemgetter(*keys), rows)))


def _group_passes(keys: set[str], rows: list[dict]) -> bool:
    """``rows_pass_checks`` for rows that all hold exactly ``keys``."""
    if not (keys >= _REQUIRED_ROW and keys <= _ROW_FIELDS):
        return False
    texts = _column(rows, [k for k in _ROW_STR if k in keys])
    if set(map(type, texts)) != {str} or max(map(len, texts)) > 1000:
        return False
    joined = "".join(texts)
    if not joined.isprintable() and _CONTROL_OR_ESCAPE.search(joined):  # isprintable: C0, DEL and C1 are not
        return False
    lowest: dict[str, float | None] = {}  # per number column: its least value, None when a row gives null
    for k in _ROW_NUM:
        if k not in keys:
            continue
        col = list(map(itemgetter(k), rows))
        types = set(map(type, col))
        if not types <= _NUMBER_OR_NULL:
            return False
        nulls = type(None) in types
        if nulls:
            col = [v for v in col if v is not None]
        lo = min(col) if col else None
        if lo is not None and not (lo >= 0 and max(col) <= MAX_ROW_NUMBER):  # JSON has no NaN
            return False
        lowest[k] = None if nulls else lo
    if "correct" in keys and not set(map(type, _column(rows, ["correct"]))) <= {bool}:
        return False
    for k in ("params", "config"):
        if k in keys and not set(map(type, _column(rows, [k]))) <= {dict}:
            return False
    if "params" in keys:
        params = _column(rows, ["params"])
        values = list(chain.from_iterable(map(dict.values, params)))
        if not set(map(type, values)) <= _PARAM_TYPES:
            return False
        numbers = [v for v in values if type(v) in _NUMBER]
        if numbers and not max(map(abs, numbers)) <= MAX_ROW_NUMBER:  # an infinity fails
            return False
        names = chain.from_iterable(map(dict.keys, params))
        if any(n in NUMERIC_PARAMS and t not in _NUMBER for n, t in set(zip(names, map(type, values)))):
            return False
    samples = _column(rows, ["samples_s"])
    if set(map(type, samples)) != {list} or max(map(len, samples)) > MAX_SAMPLES_PER_ROW:
        return False
    timed = [r for r, x in zip(rows, samples) if x]
    if len(timed) != len(rows):  # an empty row must be one that failed its check
        if "correct" not in keys or any(r["correct"] is not False for r, x in zip(rows, samples) if not x):
            return False
    if not timed:
        return True
    flat = list(chain.from_iterable(x for x in samples if x))
    if not (set(map(type, flat)) <= _NUMBER and min(flat) >= MIN_SAMPLE_S and max(flat) <= MAX_ROW_NUMBER):
        return False
    if len(timed) == len(rows):  # the column minima above hold for the timed rows
        return (all(lowest[k] is not None and lowest[k] >= MIN_SAMPLE_S for k in ("p20_s", "p50_s", "p80_s"))
                and lowest["flops"] is not None and lowest["bytes"] is not None)
    quantiles = _column(timed, ["p20_s", "p50_s", "p80_s"])
    if None in quantiles or not min(quantiles) >= MIN_SAMPLE_S:
        return False
    return None not in _column(timed, ["flops", "bytes"])


def check_summaries(path: Path, rows_raw: list, timed: list[int], pooled: dict[tuple, list] | None) -> None:
    """``_check_summary`` for every timed row: the quantile bounds are tested at once for all rows
    of one sample count (numpy), a pooled baseline's p50 row by row; a row that fails is then
    named by ``_check_summary``."""
    import numpy as np

    by_n: dict[int, list[int]] = {}
    for i in timed:
        by_n.setdefault(len(rows_raw[i]["samples_s"]), []).append(i)
    quantiles = _QUANTILES if pooled is None else (_QUANTILES[0], _QUANTILES[2])
    bad: list[int] = []
    for n, idx in by_n.items():
        a = np.sort(np.array([rows_raw[i]["samples_s"] for i in idx], dtype=float), axis=1)
        ok = np.ones(len(idx), dtype=bool)
        for key, q in quantiles:
            pos = q * (n - 1)
            lo, hi = a[:, max(0, math.floor(pos) - 1)], a[:, min(n - 1, math.ceil(pos) + 1)]
            v = np.array([rows_raw[i][key] for i in idx], dtype=float)
            ok &= (lo * (1 - SUMMARY_RTOL) <= v) & (v <= hi * (1 + SUMMARY_RTOL))
        bad.extend(np.asarray(idx)[~ok].tolist())
    if pooled is not None:  # p50 = the median of the stored runs' medians
        for i in timed:
            r = rows_raw[i]
            runs = pooled.get((r["op"], r["impl"], r["shape"], r["dtype"]))
            derived = pooled_median_s(runs) if runs else None
            if derived is None or not abs(r["p50_s"] - derived) <= SUMMARY_RTOL * derived:
                bad.append(i)
    for i in sorted(bad):
        _check_summary(path, i, rows_raw[i], pooled)


#: a row's samples key and the array's opening bracket, as this tool's writers spell them
_SAMPLES_TEXT = '"samples_s": ['


def _sample_spans(text: str, n_rows: int) -> list[str] | None:
    """The JSON text of each row's ``samples_s`` array in a results file's ``text`` (row order,
    brackets included), or None where the text does not show them unambiguously.

    Taken only when the file has no ``\\u`` escape (so the key can be spelled only one way), holds
    ``"samples_s"`` exactly once per row (so every one is a row's own key: no config, note or
    string holds it), and each is followed by ``: [`` as this tool writes it. The i-th is then the
    i-th row's, and its array (numbers only, which the row checks confirm) ends at the first
    ``]``. A few scans of the text at C speed, no second parse."""
    key = '"samples_s"'
    if n_rows == 0 or "\\u" in text or text.count(key) != n_rows:
        return None
    spans, find, pos, skip = [], text.find, 0, len(_SAMPLES_TEXT) - 1
    for _ in range(n_rows):
        i = find(_SAMPLES_TEXT, pos)
        if i < 0:
            return None
        a = i + skip
        pos = find("]", a) + 1
        if pos == 0:
            return None
        spans.append(text[a:pos])
    return spans


@bulk
def load_results(path: str | Path) -> Results:
    """Load a results file; a file of another schema or a malformed row is a one-line error."""
    return _loaded(Path(path), keep_sample_text=False)[0]


@bulk
def load_results_keeping_sample_text(path: str | Path) -> tuple[Results, dict[tuple, str]]:
    """``load_results`` and, per timed row's key, the JSON text of its samples array as the file
    spells it (brackets included; empty when the file's rows are not in this tool's layout):
    ``Results.chunks(sample_text=...)`` copies it rather than encoding the floats again."""
    return _loaded(Path(path), keep_sample_text=True)


def _loaded(path: Path, keep_sample_text: bool) -> tuple[Results, dict[tuple, str]]:
    from rooflinecli.errors import has_control, parse_json_text, read_user_file

    text = read_user_file(path, "results file")
    raw = parse_json_text(text, str(path))
    n_rows = len(raw["rows"]) if keep_sample_text and isinstance(raw, dict) and isinstance(raw.get("rows"), list) else 0
    spans = _sample_spans(text, n_rows) if n_rows else None
    del text
    if not isinstance(raw, dict) or "schema" not in raw:
        raise RooflineError(f"{path}: not a rooflinecli results file (no 'schema' key)")
    if raw["schema"] != SCHEMA:
        raise RooflineError(f"{path}: results schema '{raw['schema']}' is not supported; expected '{SCHEMA}'")
    rows_raw = raw.get("rows")
    if not isinstance(rows_raw, list):
        raise RooflineError(f"{path}: 'rows' must be a list")
    if len(rows_raw) > MAX_ROWS:
        raise RooflineError(f"{path}: {len(rows_raw):,} rows; the limit is {MAX_ROWS:,}")
    if not rows_pass_checks(rows_raw):  # one bulk pass over the columns; row by row only to name a fault
        for i, r in enumerate(rows_raw):
            _check_raw_row(path, i, r)
    rows = []
    timed: list[int] = []
    nan = float("nan")
    floats = set(map(type, chain.from_iterable(map(itemgetter("samples_s"), rows_raw)))) <= {float}  # else ints among them
    for i, r in enumerate(rows_raw):
        samples = r["samples_s"]
        if samples:
            timed.append(i)
            r["samples_s"] = tuple(samples) if floats else tuple(map(float, samples))  # the parsed row is this reader's own
        else:  # failed its check: not timed
            r["samples_s"] = ()
            for k in ("p20_s", "p50_s", "p80_s"):
                if r[k] is None:
                    r[k] = nan
        rows.append(row_from_checked(r))
    if len({r.key for r in rows}) != len(rows):  # one row per (op, impl, shape, dtype): a second would pool as another run
        seen: dict[tuple, int] = {}
        for i, row in enumerate(rows):
            if row.key in seen:
                raise RooflineError(f"{path}: rows[{i}] repeats rows[{seen[row.key]}] (op '{row.op}', impl '{row.impl}', shape '{row.shape}', "
                                    f"dtype '{row.dtype}'); one row per case")
            seen[row.key] = i
    info = baseline_info(raw.get("extra"))  # a pooled baseline: its p50_s is derived from its stored runs
    pooled = stored_run_samples(info, [r.key for r in rows], [r.samples_s for r in rows], str(path)) if info is not None else None
    check_summaries(path, rows_raw, timed, pooled)
    env = raw.get("environment")
    if not isinstance(env, dict):
        raise RooflineError(f"{path}: 'environment' must be an object")
    gpu = env.get("gpu_name")  # printed in warnings and baseline names: a newline would split them
    if gpu is not None and (not isinstance(gpu, str) or has_control(gpu) or len(gpu) > 1000):
        raise RooflineError(f"{path}: environment.gpu_name must be a string of at most 1000 characters without control characters")
    for k in ("hardware_spec", "measured_spec"):
        if raw.get(k) is not None and (not isinstance(raw[k], str) or has_control(raw[k]) or len(raw[k]) > 4096):
            raise RooflineError(f"{path}: '{k}' must be a spec id or path (a string), got {json.dumps(raw[k])[:40]}")
    _check_extra(path, raw.get("extra"))
    sample_text = {}
    if spans is not None:  # a count that disagrees would be a file this reader misread: none kept
        sample_text = {rows[i].key: spans[i] for i in timed if spans[i].count(",") + 1 == len(rows[i].samples_s)}
        if len(sample_text) != len(timed):
            sample_text = {}
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
    ), sample_text



#: both files of a pair at least this big: read the second in a forked child (``forked.start``).
#: A file's parsed rows come back pickled at about a quarter of the cost of reading it; a 100,000-row
#: file is 120 MB, a full suite's run under 1 MB.
BACKGROUND_MIN_BYTES = 16 * 1024 * 1024


def _load_portable(path: str) -> tuple[Results, list[dict]]:
    """``load_results`` as (the results without rows, each row's fields): plain dicts pickle and
    unpickle at twice the speed of the frozen rows."""
    res = load_results(path)
    return replace(res, rows=()), [vars(r) for r in res.rows]


def _from_portable(sent: tuple[Results, list[dict]]) -> Results:
    res, rows = sent
    return replace(res, rows=tuple(row_from_checked(d) for d in rows))


class _Rebuilt:
    """A pending ``_load_portable`` whose ``result()`` is the ``Results`` (read here when the
    load was not forked)."""

    def __init__(self, pending, path: str):
        self._pending, self._path = pending, path

    @property
    def forked(self) -> bool:
        return self._pending.forked

    @bulk
    def result(self) -> Results:
        return _from_portable(self._pending.result()) if self._pending.forked else load_results(self._path)

    def cancel(self) -> None:
        self._pending.cancel()


def load_results_in_background(path: str | Path, beside: str | Path | None = None) -> _Rebuilt:
    """``load_results(path)`` started now in a forked child when both ``path`` and the file read
    ``beside`` it are big and forking is safe here (``forked.can_fork``); else run when asked.
    ``.result()`` returns the ``Results`` or raises the load's one-line error; ``.cancel()`` stops
    it (call it in a ``finally``)."""
    from rooflinecli import forked

    def size(p) -> int:
        try:
            return os.stat(p).st_size
        except (OSError, ValueError):
            return 0

    big = size(path) >= BACKGROUND_MIN_BYTES and (beside is None or size(beside) >= BACKGROUND_MIN_BYTES)
    return _Rebuilt(forked.start(_load_portable, str(path), worth_it=big), str(path))

def quantiles_s(samples: list[float] | tuple[float, ...]) -> tuple[float, float, float]:
    """(p20, p50, p80) of timing samples, linear interpolation: numpy's ``percentile`` rule and
    arithmetic (bit for bit), in plain Python (a numpy call per row cost 0.3 ms; a big file has
    100,000 rows)."""
    a = sorted(map(float, samples))
    if not a:
        raise ValueError("quantiles of no samples")
    n = len(a)
    out = []
    for q in (0.2, 0.5, 0.8):
        pos = q * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        t = pos - lo
        x, y = a[lo], a[hi]
        d = y - x
        out.append(y - d * (1 - t) if t >= 0.5 else x + d * t)  # numpy's _lerp
    return out[0], out[1], out[2]
