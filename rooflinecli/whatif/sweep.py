"""``roofline sweep``: the analytical model over a grid of models x GPUs x dtypes x batch x context.

The grid is vectorized: for each (model, GPU, dtype, KV dtype) combination ``analysis.phase_grid``
evaluates every (batch, context) point at once through numpy broadcasting; Python loops only over
the combinations. Rows are long-format, one per (combination, phase, batch, context):

- prefill rows: ``batch`` sequences of ``context_tokens`` prompt tokens prefilled together;
- decode rows: one decode step of ``batch`` sequences at ``context_tokens`` tokens of context.

``tokens_per_s_per_replica`` is per model replica (``tp`` GPUs): prefill batch*context/time_s,
decode batch/time_s. Memory columns are per GPU, ``kv_cache_bytes_per_gpu`` included (heads split
over tp, replicated past the KV heads; MLA's latent on every GPU), as ``analyze`` counts it.
``total_bytes_per_gpu`` and ``fits`` are ``analysis.memory_totals`` at prompt = cache =
``context_tokens``: weights + KV cache + the workspace of a prefill run in chunks of
``prefill_chunk_tokens`` (8192 by default, as in ``analyze``; None: unchunked).

Memory is bounded: a (combination, phase) grid is evaluated in chunks of at most ``CHUNK_ROWS``
rows (``grid_chunks``; whole batch rows while they fit, else slices of one batch row's contexts),
and each chunk is written (a Parquet row group, a CSV batch) before the one after the next is
computed, so peak memory does not grow with the grid. ``estimate`` sizes a sweep (rows, output
bytes, peak memory) before any work, from per-row costs measured on this writer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from rooflinecli.analysis.workload import DEFAULT_PREFILL_CHUNK_TOKENS
from rooflinecli.dtypes import WEIGHT_DTYPES, check_dtype
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig
from rooflinecli.quant import weights_label

PHASES: tuple[str, ...] = ("prefill", "decode")

#: Output columns in order; the first six are labels (dictionary-encoded in Parquet).
LABEL_COLUMNS: tuple[str, ...] = ("model", "hw", "phase", "dtype", "weight_dtype", "kv_dtype", "mode")
NUMBER_COLUMNS: tuple[str, ...] = (
    "batch",
    "context_tokens",
    "time_s",
    "roof_time_s",
    "compute_time_s",
    "memory_time_s",
    "flops",
    "bytes",
    "arithmetic_intensity_flop_per_byte",
    "compute_bound",
    "tokens_per_s_per_replica",
    "weights_bytes",
    "kv_read_bytes",
    "kv_cache_bytes_per_gpu",
    "total_bytes_per_gpu",
    "fits",
)
COLUMNS: tuple[str, ...] = LABEL_COLUMNS + NUMBER_COLUMNS


@dataclass(frozen=True)
class Combo:
    cfg: ModelConfig
    spec: HardwareSpec
    dtype: str  # compute dtype
    weight_dtype: str
    kv_dtype: str
    mode: str = "roof"  # a mode of ``rooflinecli.predict`` (``time_s``; ``roof_time_s`` is always the roof's)
    engine: str = "torch"
    kv_bits: float | None = None  # overrides kv_dtype (``--kv-bits``)
    weight_dtype_overrides: bool = False  # --weight-dtype given: it replaces a quantized checkpoint's own format


@dataclass(frozen=True)
class Block:
    """The rows of one (combination, phase) over one chunk of its grid (``grid_chunks``): column
    name -> 1-D array (labels are strings)."""

    combo: Combo
    phase: str
    columns: dict[str, object]

    @property
    def rows(self) -> int:
        return int(np.asarray(self.columns["batch"]).size)


#: the most rows evaluated and held at once (per chunk; the prefetching worker holds one more).
#: 2^17: deepseek-v3 in achievable mode peaked at 1.65 GB RSS with chunks of 2^19 rows
CHUNK_ROWS = 1 << 17
#: measured per-row costs (llama-3-8b, llama-3-70b, mixtral-8x7b and deepseek-v3 grids on h100-sxm,
#: h200 and h200-measured): the written file (Parquet with snappy: 77-83 B; CSV: 313 B), and the
#: working memory of one chunk (the grid's op arrays and the output columns: at most about 1,340 B
#: per row, deepseek-v3 in achievable mode)
PARQUET_BYTES_PER_ROW = 85
CSV_BYTES_PER_ROW = 320
CHUNK_WORKING_BYTES_PER_ROW = 1500
#: the interpreter with numpy and pyarrow loaded, before any chunk (about 150 MB)
BASE_MEMORY_BYTES = 200 << 20


@dataclass(frozen=True)
class SweepEstimate:
    """A sweep's size before any work: rows, output file bytes and peak memory (both estimates)."""

    rows: int
    output_bytes: int
    peak_memory_bytes: int


def estimate(rows: int, fmt: str, chunk_rows: int = CHUNK_ROWS) -> SweepEstimate:
    """Rows, output bytes and peak memory of a sweep of ``rows`` rows written as ``fmt``
    ("parquet" or "csv"): memory is two chunks at most (the one being written and the one the
    worker computes), whatever the number of rows."""
    per_row = PARQUET_BYTES_PER_ROW if fmt == "parquet" else CSV_BYTES_PER_ROW
    held = 2 * min(rows, chunk_rows) * CHUNK_WORKING_BYTES_PER_ROW
    return SweepEstimate(rows, rows * per_row, BASE_MEMORY_BYTES + held)


def grid_chunks(batch: np.ndarray, context: np.ndarray, chunk_rows: int = CHUNK_ROWS) -> list[tuple[np.ndarray, np.ndarray]]:
    """The batch x context grid as (batch, context) sub-grids of at most ``chunk_rows`` rows, in
    the grid's batch-major row order: whole batch rows while they fit, else one batch value at a
    time over slices of the contexts."""
    chunk_rows = max(1, int(chunk_rows))
    if context.size <= chunk_rows:
        step = chunk_rows // context.size
        return [(batch[i : i + step], context) for i in range(0, batch.size, step)]
    return [(batch[i : i + 1], context[j : j + chunk_rows]) for i in range(batch.size) for j in range(0, context.size, chunk_rows)]


def make_combos(
    cfgs: list[ModelConfig],
    specs: list[HardwareSpec],
    dtypes: list[str],
    kv_dtypes: list[str],
    weight_dtypes: list[str] | None = None,
    mode: str | None = "roof",
    engine: str | None = None,
    kv_bits: float | None = None,
) -> list[Combo]:
    """Every (model, GPU, dtype, weight dtype, KV dtype). Without ``weight_dtypes`` the weights
    are stored in the compute dtype (``--dtype fp8`` means fp8 weights and fp8 GEMMs). ``mode``
    None: achievable on calibrated specs, the roof of the spec's own kind on the others
    (``predict.resolve_mode``)."""
    from rooflinecli.predict import default_engine, resolve_mode

    combos = []
    for cfg in cfgs:
        for spec in specs:
            spec_engine = default_engine(spec, engine, mode)
            spec_mode = resolve_mode(spec, mode, spec_engine)
            for dtype in dtypes:
                spec.peak_flops_per_s(dtype)  # one-line error if the GPU has no peak for it
                wds = weight_dtypes
                if wds is None:
                    wds = [check_dtype(dtype, WEIGHT_DTYPES, "weight dtype (from --dtype; pass --weight-dtype)")]
                for wd in wds:
                    for kd in kv_dtypes:
                        combos.append(Combo(cfg, spec, dtype, wd, kd, spec_mode, spec_engine, kv_bits, weight_dtypes is not None))
    return combos


def block_columns(
    combo: Combo, phase: str, batch: np.ndarray, context: np.ndarray, tp: int = 1, kv_block_size: int | None = None,
    prefill_chunk_tokens: int | None = DEFAULT_PREFILL_CHUNK_TOKENS, ep: int = 1,
) -> dict[str, np.ndarray]:
    """Numeric columns of one (combination, phase) over the batch x context grid, flattened
    batch-major (row i*len(context) + j is batch[i], context[j])."""
    from rooflinecli.analysis import Workload, kv_cache_bytes_per_gpu
    from rooflinecli.predict import phase_grid
    from rooflinecli.analysis.workload import validate_workload

    wl = validate_workload(
        Workload(
            batch=int(batch[0]),
            prompt_len=int(context[0]),
            gen_len=1,
            compute_dtype=combo.dtype,
            weight_dtype=combo.weight_dtype,
            weight_dtype_overrides=combo.weight_dtype_overrides,
            kv_dtype=combo.kv_dtype,
            kv_bits=combo.kv_bits,
            tp=tp,
            ep=ep,
            kv_block_size=kv_block_size,
            prefill_chunk_tokens=prefill_chunk_tokens,
            mode=combo.mode,
            engine=combo.engine,
        )
    )
    B = np.asarray(batch, dtype=np.int64)[:, None]
    N = np.asarray(context, dtype=np.int64)[None, :]
    g = phase_grid(combo.cfg, combo.spec, wl, phase, B, N)
    shape = (B.shape[0], N.shape[1])

    def col(x, dtype=np.float64):
        return np.ascontiguousarray(np.broadcast_to(np.asarray(x, dtype=dtype), shape)).reshape(-1)

    time_s = col(g["time_s"])
    flops = col(g["flops"])
    bytes_ = col(g["bytes"])
    Bf, Nf = B.astype(np.float64), N.astype(np.float64)
    tokens = Bf * Nf if phase == "prefill" else Bf
    with np.errstate(divide="ignore", invalid="ignore"):
        ai = np.where(bytes_ > 0, flops / bytes_, np.inf)
        tps = col(tokens) / time_s
    return {
        "batch": col(B, np.int32),
        "context_tokens": col(N, np.int32),
        "time_s": time_s,
        "roof_time_s": col(g["roof_time_s"]),
        "compute_time_s": col(g["compute_time_s"]),
        "memory_time_s": col(g["memory_time_s"]),
        "flops": flops,
        "bytes": bytes_,
        "arithmetic_intensity_flop_per_byte": ai,
        "compute_bound": col(g["compute_bound"], np.bool_),
        "tokens_per_s_per_replica": tps,
        "weights_bytes": col(g["weights_bytes"]),
        "kv_read_bytes": col(g["kv_read_bytes"]),
        "kv_cache_bytes_per_gpu": col(kv_cache_bytes_per_gpu(combo.cfg, wl, Nf, Bf)),
        "total_bytes_per_gpu": col(g["total_bytes_per_gpu"]),
        "fits": col(g["fits"], np.bool_),
    }


def iter_blocks(
    combos: list[Combo], batch: np.ndarray, context: np.ndarray, phases: tuple[str, ...] = PHASES, tp: int = 1, kv_block_size: int | None = None,
    prefetch: bool = True, prefill_chunk_tokens: int | None = DEFAULT_PREFILL_CHUNK_TOKENS, ep: int = 1,
    chunk_rows: int = CHUNK_ROWS,
) -> Iterator[Block]:
    """Blocks in (combination, phase, chunk) order, each at most ``chunk_rows`` rows
    (``grid_chunks``). With ``prefetch`` the next block is computed on a worker thread while the
    caller writes the current one (numpy and pyarrow release the GIL): two blocks live at most."""
    chunks = grid_chunks(batch, context, chunk_rows)
    jobs = [(combo, phase, b, n) for combo in combos for phase in phases for b, n in chunks]

    def compute(job):
        combo, phase, b, n = job
        return Block(combo, phase, block_columns(combo, phase, b, n, tp, kv_block_size, prefill_chunk_tokens, ep))

    if not prefetch or len(jobs) < 2:
        for job in jobs:
            yield compute(job)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweep") as pool:
        pending = pool.submit(compute, jobs[0])
        for job in jobs[1:]:
            block = pending.result()
            pending = pool.submit(compute, job)
            yield block
        yield pending.result()


def _arrow_table(block: Block):
    import pyarrow as pa

    n = block.rows
    c = block.combo
    labels = {
        "model": c.cfg.name,
        "hw": c.spec.id,
        "phase": block.phase,
        "dtype": c.dtype,
        "weight_dtype": weights_label(c.cfg, c),  # a quantized checkpoint swept as stored: its own format
        "kv_dtype": c.kv_dtype if c.kv_bits is None else f"{c.kv_bits:g}-bit",
        "mode": c.mode,
    }
    arrays = [pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int8)), pa.array([labels[k]])) for k in LABEL_COLUMNS]
    arrays += [pa.array(block.columns[k]) for k in NUMBER_COLUMNS]
    return pa.Table.from_arrays(arrays, names=list(COLUMNS))


def output_format(path: str) -> str:
    lower = str(path).lower()
    if lower.endswith(".parquet") or lower.endswith(".pq"):
        return "parquet"
    if lower.endswith(".csv"):
        return "csv"
    raise RooflineError(f"--out {path}: unknown file type; use .parquet or .csv")


def write_sweep(path: str, blocks: Iterator[Block], on_block: Callable[[Block], None] | None = None) -> int:
    """Stream blocks into one Parquet or CSV file (by extension), written atomically: each block
    is one Parquet row group or one CSV batch, written as it comes. Returns the number of rows."""
    import pyarrow as pa

    from rooflinecli.output import atomic_output

    fmt = output_format(path)
    rows = 0
    with atomic_output(path) as tmp:
        writer = None
        try:
            for block in blocks:
                table = _arrow_table(block)
                if fmt == "parquet":
                    import pyarrow.parquet as pq

                    if writer is None:
                        # dictionary-encode only the label columns: trying it on a million distinct floats
                        # per column costs more than the rest of the write
                        writer = pq.ParquetWriter(tmp, table.schema, compression="snappy", use_dictionary=list(LABEL_COLUMNS))
                    writer.write_table(table)
                else:
                    import pyarrow.csv as pcsv

                    # plain strings in CSV (dictionary columns would need a cast per block)
                    table = pa.Table.from_arrays(
                        [col.cast(pa.string()) if i < len(LABEL_COLUMNS) else col for i, col in enumerate(table.columns)],
                        names=table.column_names,
                    )
                    if writer is None:
                        writer = pcsv.CSVWriter(str(tmp), table.schema)
                    writer.write_table(table)
                rows += block.rows
                if on_block is not None:
                    on_block(block)
        finally:
            if writer is not None:
                writer.close()
    return rows
