"""Calibration files: vendor-kernel timings of one GPU (cuBLAS GEMMs, SDPA, torch elementwise ops,
the per-kernel floor in a CUDA graph, the sustained matmul rate) that the achievable model is
fitted from.

Three layouts are read:

- ``rooflinecli.calibration/3`` (what ``roofline calibrate --import`` writes, gzip-compressed when
  the name ends in .gz): ``rows`` (may be empty) plus ``tables``, per-op-family measured tables,
  column-wise, latencies in ``latency_us``, each with its ``provenance`` (package, version, source
  table path, framework and version, table provenance, row counts, what was skipped and why).
  Text columns are JSON lists; a numeric column is a list or packed, ``{"packed": "<i4" | "<f8",
  "base64": ...}`` (little-endian int32 or float64 values; ``pack_column``). Schema 2 is the same
  with every column a list::

    {"schema": "rooflinecli.calibration/3", "gpu": "NVIDIA H100 80GB HBM3", "engine": "vllm",
     "source": {"package": "aiconfigurator-core", "package_version": "0.12.0", "license": "Apache-2.0"},
     "rows": [], "tables": {"gemm": {"columns": {"dtype": [...], "M": {"packed": "<i4", "base64": "..."},
     ..., "latency_us": {"packed": "<f8", "base64": "..."}}, "kernels": {"bf16": "..."}, "provenance": {...}}, ...},
     "skipped_tables": [...], "audit": [...]}

- ``rooflinecli.calibration/1`` (what ``roofline calibrate --ops`` writes)::

    {"schema": "rooflinecli.calibration/1", "created_utc": "...", "gpu": "NVIDIA H200",
     "environment": {...}, "method": "...", "l2_bytes": 62914560,
     "rows": [{"op": "gemm", "shape": {"M": 1, "N": 6144, "K": 4096}, "flops": ..., "bytes": ...,
               "t_graph": 1.6e-05, "t_eager": 6.9e-05, "n": 44, "sets": 4, "backend": "cublas"}, ...],
     "sustained": {"gemm_bf16_tflops": 677.4, "copy_gb_per_s": 4200.0}}

- the raw ``torch-op-timings.json`` of a GPU run (no ``schema`` key; ``gpu``, ``torch``,
  ``method`` and ``rows`` at the top level).

``t_graph`` is seconds per launch inside a CUDA graph on cold data (input sets that together
exceed the L2); ``t_eager`` the CUDA-event median of single eager launches (host time included).
The mixed-kernel rows (``launch_floor_mixed``, ``launch_floor_mixed_gemm``) add ``t_blocked``: the
same kernels' per-kernel time when each is repeated instead of interleaved.
Every problem is one ``RooflineError`` line naming the file and the row; rows of an op the model
does not know are kept out and counted in ``notes``.
"""

from __future__ import annotations

from collections import Counter

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from rooflinecli.bulk import bulk
from rooflinecli.errors import RooflineError, one_line, parse_json_text, read_user_file

#: what ``calibrate --ops`` writes: timed rows only
SCHEMA = "rooflinecli.calibration/1"
#: version 2 adds ``tables``: per-op-family measured tables (imported vendor data), each with its
#: provenance; ``rows`` may then be empty. Version 3 (what ``calibrate --import`` writes) packs their
#: numeric columns (``pack_column``). All three are read.
SCHEMA_TABLES = "rooflinecli.calibration/3"
#: schema 2: the same tables with every column a JSON list (still read)
SCHEMA_TABLES_LISTS = "rooflinecli.calibration/2"
SCHEMAS = (SCHEMA, SCHEMA_TABLES_LISTS, SCHEMA_TABLES)
#: packed numeric columns of schema 3: little-endian int32 (whole numbers that fit) or float64
PACKED_DTYPES = ("<i4", "<f8")
#: table name -> (key columns, numeric key columns); every table has ``latency_us``
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "gemm": ("dtype", "M", "N", "K"),
    "context_attention": ("kv_dtype", "B", "S", "H", "KVH", "D"),
    "generation_attention": ("kv_dtype", "B", "N", "H", "KVH", "D"),
    "nccl": ("op", "gpus", "bytes"),
    "custom_allreduce": ("op", "gpus", "bytes"),
    # routed experts of one MoE layer: T tokens into the layer, hidden d, expert width I, top-k of E,
    # the experts split over tp x ep GPUs
    "moe": ("dtype", "T", "d", "I", "k", "E", "tp", "ep"),
    # MLA attention calls by heads per GPU H: context (B sequences of S tokens), generation (B at N
    # cached tokens); the absorbed decode BMMs (op pre / post) of T tokens
    "context_mla": ("kv_dtype", "B", "S", "H"),
    "generation_mla": ("kv_dtype", "B", "N", "H"),
    "mla_bmm": ("op", "dtype", "T", "H"),
    # per-tensor fp8 quantization of an M x K activation: what dynamic scaling adds to the static
    # kernel (``fp8_scale``), and the static quantize kernel itself (``fp8_quantize``)
    "fp8_scale": ("M", "K"),
    "fp8_quantize": ("M", "K"),
}
TEXT_COLUMNS = ("dtype", "kv_dtype", "op")

#: op -> shape keys it needs. Times come from ``t_graph`` except ``gemm_sustained`` (``t_series``).
OP_SHAPES: dict[str, tuple[str, ...]] = {
    "gemm": ("M", "N", "K"),
    # torch._scaled_mm, fp8 e4m3 inputs, bf16 out (fast accumulation): the fp8 speedup of the fit
    "gemm_fp8": ("M", "N", "K"),
    "rmsnorm_copy": ("T", "D"),
    "rmsnorm": ("T", "D"),
    "rope": ("T", "H", "D"),
    "add_": ("T", "D"),
    "silu_mul": ("T", "F"),
    # the decode step's ops on its real (strided) layouts, as ``roofline e2e --full`` runs them
    "rope_qkv_strided": ("T", "H", "KVH", "D"),
    "silu_mul_strided": ("T", "F"),
    "kv_write": ("B", "H", "KVH", "N", "D"),
    "copy": ("bytes",),
    "sdpa_prefill_causal": ("B", "H", "KVH", "S", "D"),
    "sdpa_prefill_causal_expanded": ("B", "H", "KVH", "S", "D"),
    "sdpa_decode": ("B", "H", "KVH", "S", "D"),
    "matmul_decode_attention": ("B", "H", "KVH", "S", "D"),
    # absorbed MLA decode as torch ops (bmm, fp32 softmax, bmm) over a latent cache [B, S, R + P]
    "mla_decode_matmul": ("B", "H", "S", "R", "P"),
    # a torch MoE layer's routed experts: routing, torch._grouped_mm w13, silu*mul, w2, combine
    "moe_grouped": ("T", "E", "k", "d", "I"),
    "launch_floor": (),
    # k distinct tiny kernels interleaved in one graph (``t_graph``) and grouped (``t_blocked``)
    "launch_floor_mixed": ("k",),
    "launch_floor_mixed_gemm": ("k", "M", "N", "K"),
    # one pass of M-token GEMMs over L layers of distinct qkv [Q, D], o [D, D], gate_up [2F, D],
    # down [D, F] weights (``t_graph``: seconds per pass)
    "gemm_stream": ("M", "L", "D", "F", "Q"),
    "gemm_sustained": ("M", "N", "K"),
    "copy_sustained": ("bytes",),
}
#: ops whose rows may count no bytes (the floor rows time launches, not traffic)
ZERO_BYTES_OPS = ("launch_floor", "launch_floor_mixed", "launch_floor_mixed_gemm")
#: ops with a ``t_series`` of back-to-back runs instead of one time
SERIES_OPS = ("gemm_sustained", "copy_sustained")

#: ops the achievable model needs, with the fewest rows each ("a|b": either)
REQUIRED_ROWS: dict[str, int] = {
    "gemm": 3, "launch_floor": 1, "copy": 2, "add_": 2, "silu_mul": 2, "rmsnorm|rmsnorm_copy": 2,
    "sdpa_decode": 2, "sdpa_prefill_causal": 2,
}

#: calibration files are a few hundred rows; anything over 50 MB is not one
MAX_CALIBRATION_BYTES = 50_000_000


@dataclass(frozen=True)
class Row:
    """One timed op: ``t_graph_s`` per launch in a CUDA graph, ``t_eager_s`` eager (or None)."""

    op: str
    shape: dict
    flops: float
    bytes: float
    t_graph_s: float
    t_eager_s: float | None = None
    name: str = ""
    backend: str = ""
    #: mixed-kernel rows: per-kernel seconds of the same kernels grouped (each repeated), or None
    t_blocked_s: float | None = None


@dataclass(frozen=True)
class Calibration:
    path: str
    gpu: str
    created_utc: str
    method: str
    rows: tuple[Row, ...]
    #: per-launch seconds of 10 back-to-back 8192^3 GEMMs over ~3 s (empty when not measured)
    sustained_series_s: tuple[float, ...] = ()
    sustained_flops: float = 0.0  # FLOPs of one launch of the sustained GEMM
    sustained: dict = field(default_factory=dict)  # "gemm_bf16_tflops", "copy_gb_per_s", ...
    environment: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: schema 2: table name -> {"columns": {name: list}, "provenance": {...}, "kernels": {...}}
    tables: dict = field(default_factory=dict, hash=False, compare=False)
    engine: str = ""  # the engine whose kernels the tables measured ("" for our own calibrations)
    source: dict = field(default_factory=dict, hash=False, compare=False)

    def of(self, op: str) -> list[Row]:
        return [r for r in self.rows if r.op == op]

    def describe(self) -> dict:
        """JSON-ready provenance: where the calibration comes from."""
        out = {"path": self.path, "gpu": self.gpu, "created_utc": self.created_utc, "rows": len(self.rows), "notes": list(self.notes)}
        if self.tables:
            out["engine"] = self.engine
            out["source"] = dict(self.source)
            out["tables"] = {k: {"rows": len(v["columns"]["latency_us"]), **{f: v["provenance"].get(f) for f in ("table_path", "framework", "framework_version", "table_provenance")}}
                             for k, v in self.tables.items()}
        return out


#: the largest shape value, FLOP count and byte count a calibration row may give (one launch of
#: 1e18 FLOPs or 1e15 bytes would take hours on any GPU: beyond them a figure is corrupt)
MAX_SHAPE, MAX_ROW_FLOPS, MAX_ROW_BYTES = 1e12, 1e18, 1e15
#: ``sustained`` figures by their unit suffix: (least, most)
SUSTAINED_RANGES = {"_tflops": (1e-3, 1e5), "_gb_per_s": (1e-3, 1e7)}


def _number(value, where: str, *, positive: bool, most: float = 1e30, least: float = 0.0) -> float:
    try:  # an integer of hundreds of digits passes json but not float()
        x = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:
        x = math.inf
    ok = math.isfinite(x) and (x > 0 if positive else x >= 0) and least <= x <= most
    if not ok:
        want = "a positive finite number" if positive else "a finite number >= 0"
        raise RooflineError(f"{where}: must be {want} in [{least:g}, {most:g}], got {one_line(repr(value))[:40]}")
    return x


#: a timed row's seconds: no GPU kernel takes under 10 ns (a launch costs about 1 us), and a row
#: over 10,000 s is not one launch (1e-300 s made the GEMM fit's least squares fail to converge)
MIN_ROW_S, MAX_ROW_S = 1e-8, 1e4


def _seconds(value, where: str) -> float:
    t = _number(value, where, positive=True)
    if not MIN_ROW_S <= t <= MAX_ROW_S:
        raise RooflineError(f"{where}: {t:g} s is not a kernel time (expected {MIN_ROW_S:g} to {MAX_ROW_S:g} s)")
    return t


def _row(raw, where: str) -> Row | str:
    """A validated Row, or the op name when the op is unknown (the caller notes it)."""
    if not isinstance(raw, dict):
        raise RooflineError(f"{where}: must be an object, got {type(raw).__name__}")
    op = raw.get("op")
    if not isinstance(op, str) or not op:
        raise RooflineError(f"{where}: op: missing or not a string")
    if op not in OP_SHAPES:
        return op
    where = f"{where} ({op})"
    shape = raw.get("shape")
    if not isinstance(shape, dict):
        raise RooflineError(f"{where}: shape: missing or not an object")
    for k in OP_SHAPES[op]:
        if k not in shape:
            raise RooflineError(f"{where}: shape.{k}: missing")
        _number(shape[k], f"{where}: shape.{k}", positive=True, most=MAX_SHAPE)
    for k in ("flops", "bytes"):
        if k not in raw:
            raise RooflineError(f"{where}: {k}: missing")
    flops = _number(raw["flops"], f"{where}: flops", positive=False, most=MAX_ROW_FLOPS)
    byts = _number(raw["bytes"], f"{where}: bytes", positive=op not in ZERO_BYTES_OPS, most=MAX_ROW_BYTES)  # the fits divide by it
    if op in SERIES_OPS:
        series = raw.get("t_series")
        if not isinstance(series, list) or not series:
            raise RooflineError(f"{where}: t_series: missing or empty")
        return Row(op, shape, flops, byts, min(_seconds(t, f"{where}: t_series[{i}]") for i, t in enumerate(series)),
                   None, str(raw.get("name", "")), str(raw.get("backend", "")))
    if "t_graph" not in raw:
        raise RooflineError(f"{where}: t_graph: missing")
    t_graph = _seconds(raw["t_graph"], f"{where}: t_graph")
    t_eager, t_blocked = raw.get("t_eager"), raw.get("t_blocked")
    if t_eager is not None:
        t_eager = _seconds(t_eager, f"{where}: t_eager")
    if t_blocked is not None:
        t_blocked = _seconds(t_blocked, f"{where}: t_blocked")
    return Row(op, dict(shape), flops, byts, t_graph, t_eager, str(raw.get("name", "")), str(raw.get("backend", "")), t_blocked)


def _sustained_range(key: str) -> dict:
    for suffix, (least, most) in SUSTAINED_RANGES.items():
        if key.endswith(suffix):
            return {"least": least, "most": most}
    return {}


def parse_calibration(doc, path: str) -> Calibration:
    """Validate a parsed calibration document (either layout); one-line RooflineError otherwise."""
    if not isinstance(doc, dict):
        raise RooflineError(f"{path}: a calibration file must be a JSON object")
    schema = doc.get("schema")
    if schema is not None and schema not in SCHEMAS:
        raise RooflineError(f"{path}: schema: unknown '{schema}' (this version reads {', '.join(repr(s) for s in SCHEMAS)})")
    tables = _tables(doc.get("tables"), path) if schema in (SCHEMA_TABLES, SCHEMA_TABLES_LISTS) else {}
    rows_raw = doc.get("rows")
    if tables and rows_raw == []:
        if "gemm" not in tables:
            raise RooflineError(f"{path}: tables: no 'gemm' table (the achievable model needs it)")
        return Calibration(path=path, gpu=str(doc.get("gpu") or ""), created_utc=str(doc.get("created_utc") or ""), method=str(doc.get("method", "")),
                           rows=(), tables=tables, engine=str(doc.get("engine") or ""), source=dict(doc.get("source") or {}))
    if not isinstance(rows_raw, list) or not rows_raw:
        raise RooflineError(f"{path}: rows: missing or empty")
    rows: list[Row] = []
    unknown: dict[str, int] = {}
    series: tuple[float, ...] = ()
    sustained_flops = 0.0
    for i, raw in enumerate(rows_raw):
        r = _row(raw, f"{path}: rows[{i}]")
        if isinstance(r, str):
            unknown[r] = unknown.get(r, 0) + 1
            continue
        if r.op == "gemm_sustained":
            series = tuple(float(t) for t in raw["t_series"])
            sustained_flops = r.flops
        if r.op in SERIES_OPS:  # folded into ``sustained`` (calibrate writes the figures there)
            continue
        rows.append(r)
    sustained = doc.get("sustained") or {}
    if not isinstance(sustained, dict):
        raise RooflineError(f"{path}: sustained: must be an object")
    sustained = {k: _number(v, f"{path}: sustained.{k}", positive=True, **_sustained_range(k)) for k, v in sustained.items()}
    if "gemm_bf16_tflops" not in sustained and series and sustained_flops > 0:
        sustained["gemm_bf16_tflops"] = sustained_gemm_tflops(series, sustained_flops)
    counts = Counter(r.op for r in rows)  # one pass (a count per op was one pass per op)
    for op, least in REQUIRED_ROWS.items():
        alternatives = op.split("|")
        if max(counts[a] for a in alternatives) < least:
            what = " or ".join(f"'{a}'" for a in alternatives)
            raise RooflineError(f"{path}: rows: fewer than {least} {what} rows (the achievable model needs them)")
    env = doc.get("environment") if isinstance(doc.get("environment"), dict) else {k: doc[k] for k in ("torch",) if k in doc}
    notes = tuple(f"ignored {n} row(s) of unknown op '{op}'" for op, n in sorted(unknown.items()))
    for k in ("gpu", "created_utc", "method"):
        if doc.get(k) is not None and not isinstance(doc[k], str):
            raise RooflineError(f"{path}: {k}: must be a string, got {json.dumps(doc[k])[:40]}")
    return Calibration(
        path=path,
        gpu=str(doc.get("gpu") or ""),
        created_utc=str(doc.get("created_utc") or ""),
        method=str(doc.get("method", "")),
        rows=tuple(rows),
        sustained_series_s=series,
        sustained_flops=sustained_flops,
        sustained=sustained,
        environment=dict(env),
        notes=notes,
        tables=tables,
        engine=str(doc.get("engine") or ""),
    )


def _positive_numbers(values: list):
    """``values`` as a float array when every value is an int or float (not a bool), finite and
    > 0, else None (numpy: tables hold 100,000s)."""
    import numpy as np

    if not set(map(type, values)) <= {int, float}:
        return None
    try:
        a = np.array(values, dtype=float)
    except (OverflowError, ValueError):
        return None
    return a if bool(np.all(np.isfinite(a)) and np.all(a > 0)) else None


def pack_column(values) -> dict:
    """A numeric column as schema 3 stores it: {"packed": dtype, "base64": little-endian bytes}
    (decoding a list of 100,000s of JSON numbers costs more than the fit that reads them)."""
    import base64

    import numpy as np

    a = np.asarray(values, dtype=float)
    whole = bool(np.all(a == np.round(a)) and np.all(np.abs(a) < 2**31))
    dtype = "<i4" if whole else "<f8"
    return {"packed": dtype, "base64": base64.b64encode(a.astype(dtype).tobytes()).decode("ascii")}


def _unpacked(v, where: str):
    """The float array of a packed column (``pack_column``); RooflineError when it is not one."""
    import base64
    import binascii

    import numpy as np

    if set(v) != {"packed", "base64"} or v["packed"] not in PACKED_DTYPES or not isinstance(v["base64"], str):
        raise RooflineError(f"{where}: not a list nor a packed column ({{'packed': one of {', '.join(PACKED_DTYPES)}, 'base64': ...}})")
    try:
        raw = base64.b64decode(v["base64"], validate=True)
    except (binascii.Error, ValueError):
        raise RooflineError(f"{where}: base64: not valid base64") from None
    size = np.dtype(v["packed"]).itemsize
    if len(raw) % size:
        raise RooflineError(f"{where}: base64: {len(raw)} bytes is not a whole number of {v['packed']} values")
    return np.frombuffer(raw, dtype=v["packed"]).astype(float)


def _tables(raw, path: str) -> dict:
    """Validated schema-2 tables: equal-length columns, known names, positive finite numbers (numeric
    columns as float arrays)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RooflineError(f"{path}: tables: must be an object")
    import numpy as np

    out = {}
    for name, t in raw.items():
        where = f"{path}: tables.{name}"
        if name not in TABLE_COLUMNS:
            raise RooflineError(f"{where}: unknown table; known: {', '.join(TABLE_COLUMNS)}")
        if not isinstance(t, dict) or not isinstance(t.get("columns"), dict):
            raise RooflineError(f"{where}: columns: missing or not an object")
        cols, arrays = t["columns"], {}
        n = None
        for c in (*TABLE_COLUMNS[name], "latency_us"):
            v = cols.get(c)
            if isinstance(v, dict) and c not in TEXT_COLUMNS:
                v = _unpacked(v, f"{where}: columns.{c}")
            elif not isinstance(v, list):
                raise RooflineError(f"{where}: columns.{c}: missing or not a list")
            if n is None:
                n = len(v)
            elif len(v) != n:
                raise RooflineError(f"{where}: columns.{c}: {len(v)} values where the other columns have {n}")
            if c in TEXT_COLUMNS:
                if not set(map(type, v)) <= {str}:
                    raise RooflineError(f"{where}: columns.{c}: every value must be a string")
                arrays[c] = v
            elif not isinstance(v, list):  # a packed column
                if not (np.all(np.isfinite(v)) and np.all(v > 0)):
                    bad = int(np.flatnonzero(~(np.isfinite(v) & (v > 0)))[0])
                    raise RooflineError(f"{where}: columns.{c}[{bad}]: must be a positive finite number, got {v[bad]!r}")
                arrays[c] = v
            elif (a := _positive_numbers(v)) is not None:
                arrays[c] = a
            else:
                bad = next(i for i, x in enumerate(v) if type(x) not in (int, float) or not (math.isfinite(x) and x > 0))
                raise RooflineError(f"{where}: columns.{c}[{bad}]: must be a positive finite number, got {one_line(repr(v[bad]))[:40]}")
        if not n:
            raise RooflineError(f"{where}: no rows")
        if not isinstance(t.get("provenance"), dict):
            raise RooflineError(f"{where}: provenance: missing (every imported table says where it comes from)")
        out[name] = {"columns": {**cols, **arrays}, "provenance": t["provenance"], "kernels": dict(t.get("kernels") or {}),
                     "layout_kernels": _layout_kernels(t.get("layout_kernels"), where)}
    return out


def _layout_kernels(raw, where: str) -> list[dict]:
    """A table's kernels measured only at some layouts (the MoE table's other kernels: dtype, kernel
    and their [d, I, k, E, tp, ep] layouts); [] when absent."""
    if raw is None:
        return []
    ok = isinstance(raw, list) and all(isinstance(x, dict) and isinstance(x.get("dtype"), str) and isinstance(x.get("kernel"), str)
                                       and isinstance(x.get("layouts"), list) and all(isinstance(r, list) and len(r) == 6 for r in x["layouts"])
                                       for x in raw)
    if not ok:
        raise RooflineError(f"{where}: layout_kernels: expected a list of {{dtype, kernel, layouts: [[d, I, k, E, tp, ep], ...]}}")
    return [dict(x) for x in raw]


def sustained_gemm_tflops(series_s, flops: float) -> float:
    """Median rate of the sustained-GEMM series, first entry (warm-up) left out."""
    ts = sorted(series_s[1:] if len(series_s) > 2 else series_s)
    mid = len(ts) // 2
    median = ts[mid] if len(ts) % 2 else 0.5 * (ts[mid - 1] + ts[mid])
    return flops / median / 1e12


@lru_cache(maxsize=8)
@bulk
def load_calibration(path: str) -> Calibration:
    """Read and validate a calibration file (cached per path)."""
    p = Path(path)
    if p.name.endswith(".gz"):
        import gzip
        import zlib

        from rooflinecli.errors import read_user_bytes

        try:
            text = gzip.decompress(read_user_bytes(p, "calibration file")).decode("utf-8")
        except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
            raise RooflineError(f"{p}: not a gzip-compressed calibration file ({one_line(e)})") from None
    else:
        text = read_user_file(p, "calibration file")
    if len(text) > MAX_CALIBRATION_BYTES:
        raise RooflineError(f"{p}: calibration file larger than {MAX_CALIBRATION_BYTES // 1_000_000} MB")
    return parse_calibration(parse_json_text(text, str(p)), str(p))
