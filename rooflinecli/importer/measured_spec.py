"""A measured spec (``<gpu>-imported``, ``kind = "measured"`` on the datasheet base) from the
imported calibrations of one GPU: the ceilings NVIDIA's measured per-op tables show.

Only working sets that cannot be served from the L2 count, so that a small GEMM running from the
L2 (above the HBM roof on L40S and A100) never becomes a ceiling:

* ``peak_dense_tflops.<dtype>`` (bf16, fp8): 2·M·N·K / latency of the GEMMs with M, N and K all
  at least ``LARGE_GEMM`` (compute bound on every GPU here); fp8 rows include the activation
  quantization, so the fp8 figure is what a call reaches, a lower bound of the tensor-core peak.
* ``memory.bandwidth_gb_per_s``: the bytes of the bf16 GEMMs with M <= ``SKINNY_M`` tokens whose
  weight is at least ``L2_MULTIPLE`` times the L2 (2·(M·K + N·K + M·N) B, the weight streamed
  once) over their latency.

Each figure is the ``QUANTILE`` quantile of its rows in each engine's genuine table, and the
highest of the engines: a rate the GPU sustains across many shapes, not one lucky row. A figure
above the datasheet base is refused (the loader's plausibility rules would refuse it too).
Figures not set are inherited from the base.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rooflinecli.errors import RooflineError

#: GEMMs with M, N and K all at least this are compute bound on every GPU with imported tables
LARGE_GEMM = 4096
#: GEMMs with at most this many tokens are weight-streaming (memory bound) at every width here
SKINNY_M = 16
#: the weight must exceed the L2 this many times over: a working set no cache holds
L2_MULTIPLE = 8
#: the quantile of a table's rates taken as its ceiling (robust to a few fast outliers)
QUANTILE = 0.9
#: the fewest rows a figure needs from one table
MIN_ROWS = 20

SPEC_NAME = "{gpu}-imported.toml"


@dataclass(frozen=True)
class Ceiling:
    key: str  # "peak_dense_tflops.bf16", "memory.bandwidth_gb_per_s"
    value: float
    engine: str  # the engine whose table gave the highest figure
    rows: int  # rows of that table behind it
    method: str


def _quantile(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.quantile(values, q))


def _gemm_rows(cal) -> list[tuple[str, float, float, float, float]]:
    """(dtype, M, N, K, seconds) of a calibration's gemm table."""
    t = (cal.tables or {}).get("gemm")
    if not t:
        return []
    c = t["columns"]
    return [(d, float(m), float(n), float(k), float(us) * 1e-6) for d, m, n, k, us in zip(c["dtype"], c["M"], c["N"], c["K"], c["latency_us"])]


def table_ceilings(cal, l2_bytes: float) -> dict[str, tuple[float, int]]:
    """key -> (figure, rows) from one imported calibration's GEMM table."""
    rows = _gemm_rows(cal)
    out: dict[str, tuple[float, int]] = {}
    for dtype in ("bf16", "fp8"):
        rates = [2 * m * n * k / s / 1e12 for d, m, n, k, s in rows if d == dtype and min(m, n, k) >= LARGE_GEMM]
        if len(rates) >= MIN_ROWS:
            out[f"peak_dense_tflops.{dtype}"] = (_quantile(rates, QUANTILE), len(rates))
    bw = [2 * (m * k + n * k + m * n) / s / 1e9 for d, m, n, k, s in rows if d == "bf16" and m <= SKINNY_M and 2 * n * k >= L2_MULTIPLE * l2_bytes]
    if len(bw) >= MIN_ROWS:
        out["memory.bandwidth_gb_per_s"] = (_quantile(bw, QUANTILE), len(bw))
    return out


_METHODS = {
    "peak_dense_tflops.bf16": f"2*M*N*K / latency of the bf16 GEMMs with M, N, K >= {LARGE_GEMM}",
    "peak_dense_tflops.fp8": f"2*M*N*K / latency of the fp8 GEMMs (activation quantization included) with M, N, K >= {LARGE_GEMM}",
    "memory.bandwidth_gb_per_s": f"2*(M*K + N*K + M*N) bytes / latency of the bf16 GEMMs with M <= {SKINNY_M} and a weight >= {L2_MULTIPLE}x the L2",
}


def gpu_ceilings(base, calibrations: list[tuple[str, Any]]) -> list[Ceiling]:
    """The ceilings of ``base``'s GPU from its imported calibrations ((engine, Calibration) pairs):
    per figure, the highest engine's quantile. Refuses a figure above the datasheet's."""
    l2 = base.l2_size_mb * 2**20
    best: dict[str, Ceiling] = {}
    for engine, cal in calibrations:
        for key, (value, n) in table_ceilings(cal, l2).items():
            if key not in best or value > best[key].value:
                method = f"{_METHODS[key]}: the {QUANTILE:.0%} quantile of {n} rows of {engine}'s imported table (the highest engine's)"
                best[key] = Ceiling(key, round(value, 1), engine, n, method)
    for c in best.values():
        group, name = c.key.split(".")
        datasheet = base.memory_bandwidth_gb_per_s if group == "memory" else base.peak_dense_tflops.get(name)
        if datasheet and c.value > datasheet:
            raise RooflineError(f"{base.id}: the imported tables' {c.key} {c.value:g} is above the datasheet's {datasheet:g}: the tables are not of this GPU")
    return [best[k] for k in sorted(best)]


def measured_spec_doc(base, calibrations: list[tuple[str, Any]], source: dict) -> dict[str, Any]:
    """The spec document (for ``bench.calibrate.write_spec_file``) of ``base``'s GPU as the
    imported calibrations measured it; ``source``: the package's name, version and license."""
    ceilings = gpu_ceilings(base, calibrations)
    if not ceilings:
        raise RooflineError(f"{base.id}: the imported calibrations hold no GEMM rows that give a ceiling (none with M, N, K >= {LARGE_GEMM} or weight-streaming shapes)")
    doc: dict[str, Any] = {
        "id": f"{base.id}-imported",
        "name": f"{base.name} (imported measurements)",
        "kind": "measured",
        "base": base.id,
    }
    for c in ceilings:
        group, name = c.key.split(".")
        doc.setdefault(group, {})[name] = c.value
    pkg = " ".join(x for x in (source.get("package"), source.get("package_version")) if x) or "?"
    doc["measured_with"] = {
        "source": f"{pkg} ({source.get('license', 'license not stated')}): measured per-op tables of engines {', '.join(sorted({e for e, _ in calibrations}))}",
        "tool": "roofline calibrate --import",
        **{f"method {c.key}": c.method for c in ceilings},
        **{f"engine {c.key}": c.engine for c in ceilings},
    }
    return doc


def spec_comment(base, doc: dict) -> str:
    return (f"{base.name} as NVIDIA's published per-op tables measured it (`roofline calibrate --import`):\n"
            f"ceilings from working sets no cache holds (see [measured_with]); every other figure is\n"
            f"inherited from the datasheet spec \"{base.id}\" and its sources. Achievable times come from the\n"
            f"imported calibrations themselves ({base.id}.<engine>.calibration.json.gz), not from this file.")


def imported_calibrations_of(gpu: str, folder) -> list[tuple[str, Any]]:
    """(engine, Calibration) of every imported calibration of ``gpu`` in ``folder``."""
    from pathlib import Path

    from rooflinecli.achievable import IMPORTED_ENGINES, IMPORTED_NAME
    from rooflinecli.achievable.calibration import load_calibration

    out = []
    for engine in IMPORTED_ENGINES:
        p = Path(folder) / IMPORTED_NAME.format(gpu=gpu, engine=engine)
        if p.is_file():
            out.append((engine, load_calibration(str(p))))
    return out


def write_imported_spec(gpu: str, folder):
    """Write ``<folder>/<gpu>-imported.toml`` from the imported calibrations of ``gpu`` in
    ``folder`` (every engine's: the spec's ceilings are the GPU's, not one engine's); returns
    the loaded spec."""
    from pathlib import Path

    from rooflinecli.bench.calibrate import write_spec_file
    from rooflinecli.hardware import get_spec

    base = get_spec(gpu)
    cals = imported_calibrations_of(gpu, folder)
    if not cals:
        raise RooflineError(f"{folder}: no imported calibration of {gpu} to derive a measured spec from")
    doc = measured_spec_doc(base, cals, cals[0][1].source)
    return write_spec_file(Path(folder) / SPEC_NAME.format(gpu=gpu), doc, spec_comment(base, doc))
