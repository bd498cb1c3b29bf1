"""Import NVIDIA's measured per-op tables (``aiconfigurator-core`` / ``aisimulate``, Apache-2.0)
into a calibration file of ours (``rooflinecli.calibration/3``: per-op-family tables).

The data layout: ``<root>/<system>/<family>/<framework>/<version>/<table>.parquet`` beside a
``collection_meta.yaml`` (provenance, runtime) or a ``reuse.yaml`` (a declaration that another
version's table stands in: no rows here). Latencies are milliseconds per call.

Not every table is a measurement of that GPU and version, so every table of the families we read
is audited first (``audit``), and only the clean ones are imported:

- no ``device`` column, or a device that is not the system's GPU;
- a ``version`` or ``framework`` column that differs from the folder's;
- a ``reuse.yaml`` declaration (no rows: served from another version);
- a ``collection_meta.yaml`` whose comments declare a carry-forward or copy;
- a latency column bit-identical to another folder's table of the same name (any version,
  framework or GPU): the one whose columns do not match its folder is the copy (if both do, the
  later one in folder order);
- repeated keys (soft: merged as their median, and said so).

pyarrow reads the parquet files (a project dependency); the package itself is only needed to find
its data folder. Nothing at run time needs either: the result is a JSON file.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rooflinecli.achievable.calibration import SCHEMA_TABLES, TEXT_COLUMNS, pack_column
from rooflinecli.errors import RooflineError, one_line

from . import miniyaml

#: packages that ship the data, in the order they are looked for
PACKAGES = ("aiconfigurator_core", "aisimulate")
LICENSE = "Apache-2.0"
#: our datasheet spec id -> the system folder of the data
SYSTEMS = {"h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "a100-sxm": "a100_sxm", "l40s": "l40s"}
#: the GPU name a system's ``device`` column must contain
SYSTEM_DEVICE = {"h100_sxm": "H100", "h200_sxm": "H200", "b200_sxm": "B200", "a100_sxm": "A100", "l40s": "L40S"}
#: the frameworks (our engine names) whose kernels the data measures
FRAMEWORKS = ("vllm", "sglang", "trtllm")

#: (family folder, table) -> the columns it must have (latency in milliseconds per call)
TABLES: dict[tuple[str, str], tuple[str, ...]] = {
    ("gemm", "gemm_perf"): ("device", "framework", "version", "kernel_source", "gemm_dtype", "m", "n", "k", "latency"),
    ("attention", "context_attention_perf"): ("device", "framework", "version", "kernel_source", "batch_size", "isl", "num_heads",
                                              "num_key_value_heads", "head_dim", "kv_cache_dtype", "window_size", "latency"),
    ("attention", "generation_attention_perf"): ("device", "framework", "version", "kernel_source", "batch_size", "step", "num_heads",
                                                 "num_key_value_heads", "head_dim", "kv_cache_dtype", "window_size", "latency"),
    ("comm", "nccl_perf"): ("device", "framework", "version", "op_name", "nccl_dtype", "num_gpus", "message_size", "latency"),
    ("comm", "custom_allreduce_perf"): ("device", "framework", "version", "kernel_source", "allreduce_dtype", "num_gpus", "message_size", "latency"),
    ("moe", "moe_perf"): ("device", "framework", "version", "kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk",
                          "num_experts", "moe_tp_size", "moe_ep_size", "distribution", "latency"),
    # MLA (DeepSeek's latent attention): ``num_heads`` are the heads on one GPU (128 / TP for DeepSeek-V3)
    ("mla", "context_mla_perf"): ("device", "framework", "version", "kernel_source", "mla_dtype", "kv_cache_dtype", "num_heads", "batch_size",
                                  "isl", "step", "tp_size", "latency"),
    ("mla", "generation_mla_perf"): ("device", "framework", "version", "kernel_source", "mla_dtype", "kv_cache_dtype", "num_heads", "batch_size",
                                     "step", "tp_size", "latency"),
    ("mla_bmm", "mla_bmm_perf"): ("device", "framework", "version", "op_name", "kernel_source", "bmm_dtype", "num_tokens", "num_heads", "latency"),
    # per-tensor fp8 quantization of an M x K activation: ``scale_matrix`` is the static quantize
    # kernel (a known scale), ``compute_scale`` what dynamic quantization (amax, then scale) adds
    ("quantize", "computescale_perf"): ("device", "framework", "version", "kernel_source", "m", "k", "quant_dtype", "latency"),
    ("quantize", "scale_matrix_perf"): ("device", "framework", "version", "kernel_source", "m", "k", "quant_dtype", "latency"),
}
#: the key columns of each table (rows repeating them are merged)
KEYS: dict[str, tuple[str, ...]] = {
    "gemm_perf": ("kernel_source", "gemm_dtype", "m", "n", "k"),
    "context_attention_perf": ("kernel_source", "batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "kv_cache_dtype", "window_size"),
    "generation_attention_perf": ("kernel_source", "batch_size", "step", "num_heads", "num_key_value_heads", "head_dim", "kv_cache_dtype", "window_size"),
    "nccl_perf": ("op_name", "nccl_dtype", "num_gpus", "message_size"),
    "custom_allreduce_perf": ("kernel_source", "allreduce_dtype", "num_gpus", "message_size"),
    "moe_perf": ("kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size", "distribution"),
    "context_mla_perf": ("kernel_source", "mla_dtype", "kv_cache_dtype", "num_heads", "batch_size", "isl", "step", "tp_size"),
    "generation_mla_perf": ("kernel_source", "mla_dtype", "kv_cache_dtype", "num_heads", "batch_size", "step", "tp_size"),
    "mla_bmm_perf": ("op_name", "kernel_source", "bmm_dtype", "num_tokens", "num_heads"),
    "computescale_perf": ("kernel_source", "quant_dtype", "m", "k"),
    "scale_matrix_perf": ("kernel_source", "quant_dtype", "m", "k"),
}
#: a newer clean table with fewer than this share of the rows of the largest clean one is a partial
#: re-collection (a few shapes for a new model): the largest answers, and the newer one is named
PARTIAL_SHARE = 0.5
#: MoE routing distribution kept: the collector's power law (real routers are imbalanced), else balanced
MOE_DISTRIBUTIONS = ("power_law_1.01", "balanced")
#: columns an older table may lack -> the value they mean (None: checked by the audit instead)
OPTIONAL_COLUMNS = {"device": None, "window_size": 0, "beam_width": 1, "tp_size": 1}
#: a latency column under another name is a table in other units: refused, not converted
UNIT_COLUMNS = re.compile(r"^latency_|_(us|ms|ns|s)$")
#: words in collection_meta.yaml comments that declare the table a copy of another
COPY_WORDS = re.compile(r"carry[- ]forward|carried forward|\bcop(y|ied)\b", re.IGNORECASE)
#: element sizes of the comm tables' dtypes (message_size counts elements)
ELEMENT_BYTES = {"half": 2, "bfloat16": 2, "float16": 2, "fp16": 2, "int8": 1, "float": 4, "float32": 4}
#: GEMM dtypes imported, by their name in the data -> ours
GEMM_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "nvfp4"}
#: the GEMM table's weight-only quantized dtypes (16-bit activations, int8 / int4 weights), kept
#: under their own names (``achievable.tables.WEIGHT_ONLY_BYTES``); SmoothQuant's int8 x int8 ("sq")
#: is not modelled
GEMM_WEIGHT_ONLY_DTYPES = {"int8_wo": "int8_wo", "int4_wo": "int4_wo"}
KV_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8"}
#: latency significant digits kept in the file (0.01%: far under the tables' run-to-run noise)
SIG_DIGITS = 4


def version_key(v: str) -> tuple:
    """Sort key of a version folder: numeric parts as numbers ("0.5.10" after "0.5.9", rc after its number)."""
    parts = re.findall(r"\d+|[a-zA-Z]+", v)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


# ------------------------------------------------------------------------------------------------
# where the data is
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataRoot:
    path: Path
    package: str  # "aiconfigurator-core 0.12.0", or "data folder"
    package_version: str = ""


def find_data_root(data: Path | None = None) -> DataRoot:
    """The data folder given (checked for the layout), else the installed package's."""
    if data is not None:
        p = Path(data)
        if not p.is_dir():
            raise RooflineError(f"--data {p}: no such folder")
        if (p / "systems" / "data").is_dir():
            p = p / "systems" / "data"
        if not any((p / s).is_dir() and any((p / s / f).is_dir() for f in ("gemm", "attention", "comm")) for s in _dirs(p)):
            raise RooflineError(f"--data {data}: not a measured-data folder (expected <system>/gemm|attention|comm/<framework>/<version>/*.parquet)")
        return _package_root(p) or DataRoot(p, "data folder")
    import importlib.metadata
    import importlib.util

    for name in PACKAGES:
        found = importlib.util.find_spec(name)
        if found is None or not found.submodule_search_locations:
            continue
        root = Path(list(found.submodule_search_locations)[0]) / "systems" / "data"
        if root.is_dir():
            dist = name.replace("_", "-")
            try:
                version = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                version = ""
            return DataRoot(root, dist, version)
    raise RooflineError("calibrate --import: neither aiconfigurator-core nor aisimulate is installed; pip install aiconfigurator-core, or pass --data <folder>")


def _package_root(p: Path) -> DataRoot | None:
    """``p`` as a package's data when it is ``<site>/<package>/systems/data`` of an installed
    (unpacked) package beside its ``.dist-info``: provenance names the package and its version."""
    import importlib.metadata

    pkg = p.resolve().parent.parent
    if pkg.name not in PACKAGES:
        return None
    for info in sorted(pkg.parent.glob(f"{pkg.name}-*.dist-info")):
        version = importlib.metadata.PathDistribution(info).version
        if version:
            return DataRoot(p, pkg.name.replace("_", "-"), version)
    return None


def _dirs(p: Path) -> list[str]:
    return sorted(d.name for d in p.iterdir() if d.is_dir())


def system_folder(root: DataRoot, system: str) -> str:
    """The data's folder of ``system`` (our spec id or the data's own name)."""
    name = SYSTEMS.get(system, system)
    if not (root.path / name).is_dir():
        known = sorted({k for k, v in SYSTEMS.items() if (root.path / v).is_dir()} | set(_dirs(root.path)))
        raise RooflineError(f"--system: unknown '{system}' in {root.package}; known: {', '.join(known)}")
    return name


# ------------------------------------------------------------------------------------------------
# the audit
# ------------------------------------------------------------------------------------------------


@dataclass
class TableAudit:
    system: str
    family: str
    framework: str
    version: str
    table: str
    path: str  # relative to the data root
    rows: int = 0
    provenance: str | None = None
    reasons: list[str] = field(default_factory=list)  # why it is not a measurement of this GPU and version
    soft: list[str] = field(default_factory=list)  # kept, with a note (repeated keys merged)
    copies_of: list[str] = field(default_factory=list)
    reuse_from: str | None = None
    latency_hash: str = ""
    layout_error: str = ""  # the table is not in the layout this importer reads (refused when it would be imported)

    @property
    def clean(self) -> bool:
        return not self.reasons

    @property
    def verdict(self) -> str:
        if self.reuse_from is not None:
            return f"reuse declaration: no rows here, served from {self.reuse_from}"
        if self.clean:
            return f"measured on this GPU (provenance: {self.provenance})"
        return "not a measurement of this GPU and version: " + "; ".join(self.reasons)

    def to_dict(self) -> dict:
        return {"path": self.path, "family": self.family, "framework": self.framework, "version": self.version, "table": self.table,
                "rows": self.rows, "provenance": self.provenance, "clean": self.clean, "verdict": self.verdict, "soft": self.soft}


def _read_yaml(path: Path) -> tuple[dict, list[str]]:
    try:
        return miniyaml.load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise RooflineError(f"{path}: not readable metadata ({one_line(e)})") from None


def read_table(path: Path, table: str, columns: tuple[str, ...] | None = None) -> dict:
    """The columns of a parquet table as numpy arrays; a missing column or a latency in another
    unit is one RooflineError naming the file."""
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(path)
    except Exception as e:  # pyarrow raises its own error types for a truncated or foreign file
        raise RooflineError(f"{path}: not a readable parquet table ({one_line(e)[:120]})") from None
    names = t.column_names
    want = columns or next(cols for (_, tb), cols in TABLES.items() if tb == table)
    odd = [n for n in names if n != "latency" and UNIT_COLUMNS.search(n) and "latency" in n]
    if odd:
        raise RooflineError(f"{path}: column {odd[0]} is a latency in other units than this importer reads (latency, milliseconds)")
    missing = [c for c in want if c not in names and c not in OPTIONAL_COLUMNS]
    if missing:
        raise RooflineError(f"{path}: columns differ from the {table} layout: missing {', '.join(missing)}")
    cols = {n: t.column(n).to_numpy(zero_copy_only=False) for n in names}
    for c, default in OPTIONAL_COLUMNS.items():
        if c in want and c not in cols and default is not None:
            cols[c] = np.full(t.num_rows, default)
    return cols


def _hash_latency(lat: np.ndarray) -> str:
    return hashlib.sha256(np.sort(np.asarray(lat, dtype=np.float64)).tobytes()).hexdigest()


def _audit_one(root: Path, system: str, family: str, framework: str, version: str, table: str) -> TableAudit | None:
    folder = root / system / family / framework / version
    rel = f"{system}/{family}/{framework}/{version}/{table}.parquet"
    f = folder / f"{table}.parquet"
    a = TableAudit(system, family, framework, version, table, rel)
    if (folder / "reuse.yaml").is_file() and not f.is_file():
        doc, _ = _read_yaml(folder / "reuse.yaml")
        for entry in doc.get("reuse") or []:
            if isinstance(entry, dict) and entry.get("table") == table:
                a.reuse_from = str(entry.get("from_version"))
                a.reasons.append(f"reuse.yaml declares it served from {a.reuse_from}")
                return a
        return None
    if not f.is_file():
        return None
    meta_path = folder / "collection_meta.yaml"
    if meta_path.is_file():
        meta, comments = _read_yaml(meta_path)
        a.provenance = meta.get("provenance")
        if any(COPY_WORDS.search(c) for c in comments):
            a.reasons.append("collection_meta.yaml declares a carry-forward/copy")
    else:
        a.soft.append("no collection_meta.yaml")
    try:
        cols = read_table(f, table)
    except RooflineError as e:
        a.reasons.append("layout: " + str(e).replace(str(root) + "/", ""))
        a.layout_error = str(e)
        return a
    a.rows = len(cols["latency"])
    if "device" not in cols:
        a.reasons.append("no device column")
    else:
        devices = sorted({str(d) for d in cols["device"]})
        want = SYSTEM_DEVICE.get(system, system.split("_")[0].upper())
        if not all(want.lower() in d.lower() for d in devices):
            a.reasons.append(f"device column {devices} is not {want}")
    versions = sorted({str(v) for v in cols["version"]})
    if versions != [version]:
        a.reasons.append(f"version column {versions} != folder {version}")
    if framework != "nccl":  # nccl tables name the framework that ran nccl-tests
        fws = sorted({str(v) for v in cols["framework"]})
        if [x.lower() for x in fws] != [framework.lower()]:
            a.reasons.append(f"framework column {fws} != folder {framework}")
    keys = KEYS[table]
    n_keys = len({tuple(str(cols[k][i]) for k in keys) for i in range(a.rows)}) if a.rows else 0
    if n_keys < a.rows:
        a.soft.append(f"{a.rows - n_keys} of {a.rows} rows repeat a key: merged as their median")
    a.latency_hash = _hash_latency(cols["latency"])
    return a


def audit(root: DataRoot, systems: list[str] | None = None) -> list[TableAudit]:
    """Audit every table of the families we import, for ``systems`` (default: all), comparing
    latency columns across every folder of the data (all systems) for copies."""
    everything: list[TableAudit] = []
    for system in _dirs(root.path):
        for (family, table) in TABLES:
            base = root.path / system / family
            if not base.is_dir():
                continue
            for framework in _dirs(base):
                for version in sorted(_dirs(base / framework), key=version_key):
                    a = _audit_one(root.path, system, family, framework, version, table)
                    if a is not None:
                        everything.append(a)
    by_hash: dict[tuple[str, str], list[TableAudit]] = {}
    for a in everything:
        if a.latency_hash:
            by_hash.setdefault((a.table, a.latency_hash), []).append(a)
    for group in by_hash.values():
        if len(group) < 2:
            continue
        consistent = [a for a in group if not any(r.startswith(("version column", "framework column", "collection_meta")) for r in a.reasons)]
        donor = consistent[0] if consistent else group[0]
        for a in group:
            if a is donor:
                a.soft.append("donor of bit-identical copies: " + ", ".join(b.path for b in group if b is not a))
                continue
            a.copies_of.append(donor.path)
            a.reasons.append(f"latency column bit-identical to {donor.path}")
    if systems is not None:
        everything = [a for a in everything if a.system in systems]
    return everything


def compare_with_audit(ours: list[TableAudit], reference: list[dict]) -> dict:
    """Agreement with a reference audit (entries with ``path`` or gpu/family/framework/version/table,
    and ``verdict``: "measured on this GPU..." is clean): counts and the disagreements."""
    mine = {a.path: a for a in ours}
    agree, differ, missing = 0, [], []
    for ref in reference:
        path = ref.get("path") or f"{ref['gpu']}/{ref['family']}/{ref['framework']}/{ref['version']}/{ref['table']}.parquet"
        ref_clean = str(ref.get("verdict", "")).startswith("measured on this GPU")
        a = mine.get(path)
        if a is None:
            missing.append(path)
        elif a.clean == ref_clean:
            agree += 1
        else:
            differ.append({"path": path, "ours": a.verdict, "reference": ref.get("verdict")})
    return {"compared": len(reference), "agree": agree, "differ": differ, "not_found": missing}


# ------------------------------------------------------------------------------------------------
# building the calibration
# ------------------------------------------------------------------------------------------------


def _sig(x: np.ndarray) -> list[float]:
    return [float(f"{v:.{SIG_DIGITS}g}") for v in np.asarray(x, dtype=float)]


def _merge_repeats(cols: dict[str, np.ndarray], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """One row per key, its latency the median of the key's rows."""
    index: dict[tuple, list[int]] = {}
    for i in range(len(cols["latency"])):
        index.setdefault(tuple(cols[k][i].item() if hasattr(cols[k][i], "item") else cols[k][i] for k in keys), []).append(i)
    if len(index) == len(cols["latency"]):
        return cols
    first = [v[0] for v in index.values()]
    out = {k: np.asarray(cols[k])[first] for k in keys}
    out["latency"] = np.array([float(np.median(np.asarray(cols["latency"], dtype=float)[v])) for v in index.values()])
    return out


def _pick(a: list[TableAudit], table: str, framework: str) -> tuple[TableAudit | None, list[TableAudit]]:
    """(the newest clean table of ``framework`` with at least ``PARTIAL_SHARE`` of the rows of the
    largest clean one, the ones passed over)."""
    cands = sorted((x for x in a if x.table == table and x.framework == framework), key=lambda x: version_key(x.version))
    clean = [x for x in cands if x.clean]
    most = max((x.rows for x in clean), default=0)
    full = [x for x in clean if x.rows >= PARTIAL_SHARE * most]
    chosen = full[-1] if full else None
    return chosen, [x for x in cands if x is not chosen]


def _most_rows(values: np.ndarray, mask: np.ndarray) -> str | None:
    vals, counts = np.unique(values[mask].astype(str), return_counts=True)
    return None if vals.size == 0 else str(vals[int(np.argmax(counts))])


def _gemm_table(cols: dict) -> tuple[dict, list[str]]:
    ks, dts = cols["kernel_source"].astype(str), cols["gemm_dtype"].astype(str)
    keep = np.zeros(len(ks), dtype=bool)
    kernels, skipped = {}, []
    names = {**GEMM_DTYPES, **GEMM_WEIGHT_ONLY_DTYPES}
    for dt in sorted(set(dts)):
        if dt not in names:
            skipped.append(f"{int((dts == dt).sum())} rows of dtype {dt} (not modelled)")
            continue
        k = _most_rows(ks, dts == dt)
        kernels[names[dt]] = k
        sel = (dts == dt) & (ks == k)
        others = int(((dts == dt) & (ks != k)).sum())
        if others:
            skipped.append(f"{others} {dt} rows of other kernels than {k} (one kernel per dtype: the one with most rows)")
        keep |= sel
    out = {"dtype": [names[d] for d in dts[keep]], "M": cols["m"][keep].astype(int).tolist(), "N": cols["n"][keep].astype(int).tolist(),
           "K": cols["k"][keep].astype(int).tolist(), "latency_us": _sig(np.asarray(cols["latency"], dtype=float)[keep] * 1e3)}
    return {"columns": out, "kernels": kernels}, skipped


def _attention_table(cols: dict, length: str) -> tuple[dict, list[str]]:
    ks, kv = cols["kernel_source"].astype(str), cols["kv_cache_dtype"].astype(str)
    win = cols["window_size"].astype(int)
    skipped = []
    full = win == 0
    if (~full).any():
        skipped.append(f"{int((~full).sum())} sliding-window rows (window > 0)")
    k = _most_rows(ks, full)
    keep = full & (ks == k) & np.isin(kv, list(KV_DTYPES))
    other = int((full & (ks != k)).sum())
    if other:
        skipped.append(f"{other} rows of other kernels than {k}")
    if "beam_width" in cols:
        beam = cols["beam_width"].astype(int) == 1
        if (keep & ~beam).any():
            skipped.append(f"{int((keep & ~beam).sum())} rows of beam width > 1")
        keep &= beam
    src = "isl" if length == "S" else "step"
    out = {"kv_dtype": [KV_DTYPES[x] for x in kv[keep]], "B": cols["batch_size"][keep].astype(int).tolist(), length: cols[src][keep].astype(int).tolist(),
           "H": cols["num_heads"][keep].astype(int).tolist(), "KVH": cols["num_key_value_heads"][keep].astype(int).tolist(),
           "D": cols["head_dim"][keep].astype(int).tolist(), "latency_us": _sig(np.asarray(cols["latency"], dtype=float)[keep] * 1e3)}
    return {"columns": out, "kernels": {"attention": k}}, skipped


def _comm_table(cols: dict, op_col: str | None, dtype_col: str) -> tuple[dict, list[str]]:
    dts = cols[dtype_col].astype(str)
    skipped = []
    ok = np.isin(dts, ["half", "bfloat16", "float16"])
    if (~ok).any():
        skipped.append(f"{int((~ok).sum())} rows of dtype {', '.join(sorted(set(dts[~ok])))} (16-bit messages kept)")
    keep = ok
    kernels = {}
    if "kernel_source" in cols and op_col is None:  # custom all-reduce: the CUDA-graph variant, as decode runs it
        ks = cols["kernel_source"].astype(str)
        graph = np.array(["graph" in k.lower() for k in ks])
        k = _most_rows(ks, keep & graph) if (keep & graph).any() else _most_rows(ks, keep)
        if (keep & (ks != k)).any():
            skipped.append(f"{int((keep & (ks != k)).sum())} rows of other variants than {k}")
        keep &= ks == k
        kernels["all_reduce"] = k
    ops = cols[op_col].astype(str)[keep].tolist() if op_col else ["all_reduce"] * int(keep.sum())
    elem = np.array([ELEMENT_BYTES[d] for d in dts[keep]], dtype=float)
    out = {"op": ops, "gpus": cols["num_gpus"][keep].astype(int).tolist(),
           "bytes": (np.asarray(cols["message_size"], dtype=float)[keep] * elem).astype(int).tolist(),
           "latency_us": _sig(np.asarray(cols["latency"], dtype=float)[keep] * 1e3)}
    return {"columns": out, "kernels": kernels}, skipped


def _one_kernel_per_dtype(dts, ks, rows, skipped: list[str], skip_empty: bool = False):
    """Rows to keep and the kernel kept per modelled dtype: among ``rows``, for each dtype of
    ``GEMM_DTYPES`` the kernel with most rows; other dtypes and kernels are counted in
    ``skipped`` (as are dtypes with no such row, with ``skip_empty``)."""
    keep = np.zeros(len(ks), dtype=bool)
    kernels = {}
    for dt in sorted(set(dts)):
        sel = (dts == dt) & rows
        if dt not in GEMM_DTYPES or (skip_empty and not sel.any()):
            skipped.append(f"{int((dts == dt).sum())} rows of dtype {dt} (not modelled)")
            continue
        if not sel.any():
            continue
        k = _most_rows(ks, sel)
        kernels[GEMM_DTYPES[dt]] = k
        if (sel & (ks != k)).any():
            skipped.append(f"{int((sel & (ks != k)).sum())} {dt} rows of other kernels than {k}")
        keep |= sel & (ks == k)
    return keep, kernels


def _moe_table(cols: dict) -> tuple[dict, list[str]]:
    dist = cols["distribution"].astype(str)
    keep_dist = next((d for d in MOE_DISTRIBUTIONS if (dist == d).any()), None)
    skipped = []
    if keep_dist is None:
        return {"columns": {k: [] for k in ("dtype", "T", "d", "I", "k", "E", "tp", "ep", "latency_us")}, "kernels": {}}, ["no power-law or balanced routing rows"]
    if (dist != keep_dist).any():
        skipped.append(f"{int((dist != keep_dist).sum())} rows of other routing distributions than {keep_dist}")
    ks, dts = cols["kernel_source"].astype(str), cols["moe_dtype"].astype(str)
    keep, kernels = _one_kernel_per_dtype(dts, ks, dist == keep_dist, skipped)
    keep, layout_kernels = _moe_layout_kernels(cols, dts, ks, dist == keep_dist, keep, kernels, skipped)
    out = {"dtype": [GEMM_DTYPES[d] for d in dts[keep]], "T": cols["num_tokens"][keep].astype(int).tolist(), "d": cols["hidden_size"][keep].astype(int).tolist(),
           "I": cols["inter_size"][keep].astype(int).tolist(), "k": cols["topk"][keep].astype(int).tolist(), "E": cols["num_experts"][keep].astype(int).tolist(),
           "tp": cols["moe_tp_size"][keep].astype(int).tolist(), "ep": cols["moe_ep_size"][keep].astype(int).tolist(),
           "latency_us": _sig(np.asarray(cols["latency"], dtype=float)[keep] * 1e3)}
    return {"columns": out, "kernels": kernels, **({"layout_kernels": layout_kernels} if layout_kernels else {}), "distribution": keep_dist}, skipped


#: the MoE table's layout of one routed-expert call: hidden, expert width, top-k, experts, TP, EP
MOE_LAYOUT_COLUMNS = ("hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size")


def _moe_layout_kernels(cols: dict, dts, ks, rows, keep, kernels: dict, skipped: list[str]):
    """The rows of a dtype's other kernels at layouts (model shape and TP / EP split) its main kernel
    (``kernels``) was not measured at: the engine picks its MoE kernel per layout (vLLM's block-fp8
    experts: Triton under TP, FlashInfer CUTLASS under EP), so those rows are the engine's kernel
    there, not a rival of the main one. Returns the rows kept and, per such kernel, its dtype and
    layouts; the skipped-rows note of the dtype is restated for the rows still left out."""
    lay = np.stack([np.asarray(cols[c]).astype(np.int64) for c in MOE_LAYOUT_COLUMNS], axis=1)
    extra = []
    for dt_raw, main in [(d, k) for d in sorted(set(dts)) if d in GEMM_DTYPES and (k := kernels.get(GEMM_DTYPES[d]))]:
        sel = (dts == dt_raw) & rows
        covered = {tuple(r) for r in lay[sel & (ks == main)].tolist()}
        added = 0
        for k in sorted(set(ks[sel & (ks != main)].tolist())):
            mine = sel & (ks == k)
            layouts = sorted({tuple(r) for r in lay[mine].tolist()} - covered)
            if not layouts:
                continue
            wanted = set(layouts)
            take = mine & np.fromiter((tuple(r) in wanted for r in lay.tolist()), dtype=bool, count=len(lay))
            keep = keep | take
            covered |= set(layouts)
            added += int(take.sum())
            extra.append({"dtype": GEMM_DTYPES[dt_raw], "kernel": k, "layouts": [list(map(int, r)) for r in layouts]})
        if added:  # restate _one_kernel_per_dtype's note for the rows still left out
            was = f"{int((sel & (ks != main)).sum())} {dt_raw} rows of other kernels than {main}"
            left = int((sel & ~keep).sum())
            i = skipped.index(was)
            skipped[i:i + 1] = [f"{left} {dt_raw} rows of other kernels than {main} at its layouts"] if left else []
    return keep, extra


#: the MLA attention kernel's compute dtype imported (the tables' ``mla_dtype``)
MLA_DTYPES = ("bfloat16",)
#: mla_bmm ``op_name`` -> ours: the absorbed up-projections of decode, q_nope into the latent
#: space before attention (pre), the attention output out of it after (post)
MLA_BMM_OPS = {"mla_gen_pre": "pre", "mla_gen_post": "post"}


def _mla_table(cols: dict, length: str) -> tuple[dict, list[str]]:
    """Context (B sequences of S tokens, causal, no cached prefix) or generation (B sequences at N
    cached tokens) MLA calls by heads per GPU H. A (H, B, length) measured under several TP sizes
    (the same call on one GPU) is merged as its median."""
    ks, kv, dt = cols["kernel_source"].astype(str), cols["kv_cache_dtype"].astype(str), cols["mla_dtype"].astype(str)
    skipped = []
    keep = np.isin(dt, MLA_DTYPES) & np.isin(kv, list(KV_DTYPES))
    if (~keep).any():
        skipped.append(f"{int((~keep).sum())} rows of another attention or KV dtype than {', '.join(MLA_DTYPES)} / {', '.join(KV_DTYPES)}")
    if length == "S":
        prefix = cols["step"].astype(int) != 0
        if (keep & prefix).any():
            skipped.append(f"{int((keep & prefix).sum())} rows with a cached prefix (step > 0)")
        keep &= ~prefix
    k = _most_rows(ks, keep)
    if (keep & (ks != k)).any():
        skipped.append(f"{int((keep & (ks != k)).sum())} rows of other kernels than {k}")
    keep &= ks == k
    src = "isl" if length == "S" else "step"
    sub = {"kv": kv[keep], "B": cols["batch_size"][keep].astype(int), "L": cols[src][keep].astype(int), "H": cols["num_heads"][keep].astype(int),
           "latency": np.asarray(cols["latency"], dtype=float)[keep]}
    n = len(sub["latency"])
    sub = _merge_repeats(sub, ("kv", "B", "L", "H"))
    if len(sub["latency"]) < n:
        skipped.append(f"{n - len(sub['latency'])} rows repeating a (heads, batch, length) under another TP size: merged as their median")
    out = {"kv_dtype": [KV_DTYPES[x] for x in sub["kv"]], "B": sub["B"].astype(int).tolist(), length: sub["L"].astype(int).tolist(),
           "H": sub["H"].astype(int).tolist(), "latency_us": _sig(sub["latency"] * 1e3)}
    return {"columns": out, "kernels": {"attention": k}}, skipped


def _mla_bmm_table(cols: dict) -> tuple[dict, list[str]]:
    """The absorbed decode BMMs (pre, post) by dtype, T tokens and heads per GPU H: one kernel per
    dtype (the one with most rows)."""
    ops, ks, dts = cols["op_name"].astype(str), cols["kernel_source"].astype(str), cols["bmm_dtype"].astype(str)
    skipped: list[str] = []
    keep, kernels = _one_kernel_per_dtype(dts, ks, np.isin(ops, list(MLA_BMM_OPS)), skipped, skip_empty=True)
    out = {"op": [MLA_BMM_OPS[o] for o in ops[keep]], "dtype": [GEMM_DTYPES[d] for d in dts[keep]], "T": cols["num_tokens"][keep].astype(int).tolist(),
           "H": cols["num_heads"][keep].astype(int).tolist(), "latency_us": _sig(np.asarray(cols["latency"], dtype=float)[keep] * 1e3)}
    return {"columns": out, "kernels": kernels}, skipped


def _quant_table(cols: dict) -> tuple[dict, list[str]]:
    """fp8 rows of a quantize table (one kernel source: the one with most rows). ``compute_scale``
    is measured as dynamic minus static quantization and clipped at 0: a row of 0 (the two equally
    fast at that shape) is left to the grid's interpolation, as a table holds positive times."""
    ks, qd = cols["kernel_source"].astype(str), cols["quant_dtype"].astype(str)
    lat = np.asarray(cols["latency"], dtype=float)
    skipped = []
    if (qd != "fp8").any():
        skipped.append(f"{int((qd != 'fp8').sum())} rows of quant dtypes other than fp8 (not modelled)")
    k = _most_rows(ks, qd == "fp8")
    keep = (qd == "fp8") & (ks == k) & (lat > 0)
    other = int(((qd == "fp8") & (ks != k)).sum())
    if other:
        skipped.append(f"{other} fp8 rows of other kernels than {k} (one kernel: the one with most rows)")
    zero = int(((qd == "fp8") & (ks == k) & ~(lat > 0)).sum())
    if zero:
        skipped.append(f"{zero} rows of 0 (dynamic no slower than static there; interpolated)")
    out = {"M": cols["m"][keep].astype(int).tolist(), "K": cols["k"][keep].astype(int).tolist(), "latency_us": _sig(lat[keep] * 1e3)}
    return {"columns": out, "kernels": {"fp8": k} if k else {}}, skipped


#: our table name -> (data table, framework folder: None = the engine's own, builder)
IMPORTS = {
    "gemm": ("gemm_perf", None, lambda c: _gemm_table(c)),
    "context_attention": ("context_attention_perf", None, lambda c: _attention_table(c, "S")),
    "generation_attention": ("generation_attention_perf", None, lambda c: _attention_table(c, "N")),
    "nccl": ("nccl_perf", "nccl", lambda c: _comm_table(c, "op_name", "nccl_dtype")),
    "custom_allreduce": ("custom_allreduce_perf", None, lambda c: _comm_table(c, None, "allreduce_dtype")),
    "moe": ("moe_perf", None, _moe_table),
    "context_mla": ("context_mla_perf", None, lambda c: _mla_table(c, "S")),
    "generation_mla": ("generation_mla_perf", None, lambda c: _mla_table(c, "N")),
    "mla_bmm": ("mla_bmm_perf", None, _mla_bmm_table),
    "fp8_scale": ("computescale_perf", None, _quant_table),
    "fp8_quantize": ("scale_matrix_perf", None, _quant_table),
}
#: tables a calibration cannot do without (the rest are used where present)
REQUIRED_TABLES = ("gemm",)


def build_calibration(root: DataRoot, system: str, framework: str, audits: list[TableAudit] | None = None) -> dict:
    """The calibration document of (system, framework): each table from its newest clean folder,
    with provenance; RooflineError when the framework has no clean GEMM table on that system."""
    from rooflinecli.bench.environment import utc_now

    sysname = system_folder(root, system)
    if framework not in FRAMEWORKS:
        raise RooflineError(f"--framework: unknown '{framework}'; known: {', '.join(FRAMEWORKS)}")
    audits = audit(root, None) if audits is None else audits
    mine = [a for a in audits if a.system == sysname]
    tables, skipped_tables = {}, []
    device = ""
    for name, (table, fw, builder) in IMPORTS.items():
        fw = fw or framework
        chosen, passed = _pick(mine, table, fw)
        bad = [p for p in passed if p.layout_error and (chosen is None or version_key(p.version) > version_key(chosen.version))]
        if bad:
            raise RooflineError(bad[-1].layout_error)
        for p in passed:
            why = (p.verdict if not p.clean else f"a partial collection ({p.rows:,} rows against {chosen.rows:,} in {chosen.version})"
                   if chosen is not None and p.rows < PARTIAL_SHARE * chosen.rows else f"an older clean version than {chosen.version if chosen else '-'}")
            skipped_tables.append({"table": name, "path": p.path, "why": why})
        if chosen is None:
            if name in REQUIRED_TABLES:
                found = [p.path for p in passed]
                why = f"none is a clean measurement ({'; '.join(p.verdict for p in passed)[:300]})" if found else "no such table"
                raise RooflineError(f"{sysname}/{TABLES_BY_NAME[table]}/{framework}: {table}: {why}")
            continue
        cols = read_table(root.path / chosen.path, table)
        cols = _merge_repeats(cols, KEYS[table])
        device = device or (str(cols["device"][0]) if "device" in cols else "")
        body, skipped = builder(cols)
        n = len(body["columns"]["latency_us"])
        if n == 0:
            skipped_tables.append({"table": name, "path": chosen.path, "why": "no rows left after the filters: " + "; ".join(skipped)})
            continue
        tables[name] = {
            **body,
            "provenance": {
                "package": root.package, "package_version": root.package_version, "license": LICENSE, "table_path": chosen.path,
                "framework": fw, "framework_version": chosen.version, "table_provenance": chosen.provenance,
                "rows_in_table": chosen.rows, "rows_kept": n, "skipped_rows": skipped, "notes": chosen.soft,
            },
        }
    return {
        "schema": SCHEMA_TABLES,
        "created_utc": utc_now(),
        "gpu": device,
        "system": sysname,
        "engine": framework,
        "method": f"imported from {root.package} {root.package_version}".strip() + f": measured per-op tables of {sysname}, {framework} kernels",
        "source": {"package": root.package, "package_version": root.package_version, "license": LICENSE},
        "rows": [],
        "tables": tables,
        "skipped_tables": skipped_tables,
    }


TABLES_BY_NAME = {table: family for (family, table) in TABLES}


def encode(doc: dict, path: Path) -> bytes:
    """The file's bytes: compact JSON, numeric table columns packed (``pack_column``), gzip-compressed
    when ``path`` ends in .gz (deterministic: no time stamp in the gzip header)."""
    doc = {**doc, "tables": {name: {**t, "columns": {c: (v if c in TEXT_COLUMNS else pack_column(v)) for c, v in t["columns"].items()}}
                             for name, t in doc.get("tables", {}).items()}}
    text = json.dumps(doc, separators=(",", ":"), sort_keys=False).encode("utf-8")
    if path.name.endswith(".gz"):
        return gzip.compress(text, compresslevel=9, mtime=0)
    return text
