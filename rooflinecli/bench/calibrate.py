"""``roofline calibrate``: measure the GPU's real ceilings and write them as a measured spec file.

Measured on random data (never zeros), each figure the median of >= 10 event-timed samples:

* HBM bandwidth: a device-to-device ``copy_`` of 1 GiB, bytes read + bytes written counted;
* L2 bandwidth: ``copy_`` between two buffers that together fill a quarter of the L2, replayed
  from a CUDA graph without a flush (the data stays in L2), read + write counted;
* matmul peak per dtype: ``torch.matmul`` at 8192^3 for bf16, fp16, tf32 (fp32 with
  ``allow_tf32``) and fp32 (``allow_tf32`` off), fp8 e4m3 through ``torch._scaled_mm`` when the
  GPU and torch have it.

Burst and sustained: bf16 matmul at 8192^3 and the 1 GiB copy are also run back to
back for >= 2 s (``measure_sustained``); the sustained figure (median of the second half of that
series) becomes the spec's ``peak_dense_tflops.bf16`` and ``memory.bandwidth_gb_per_s``, the burst
figure is kept in ``[measured_with]`` as ``burst <key>``, and the method strings say which is which.

The spec file (``kind = "measured"``, ``base = <datasheet id>``, id ``<base>-measured``) sets only
what was measured; everything else is inherited from the base. ``[measured_with]`` records the GPU,
driver, date and methods. ``--from-results`` fits the calibrated efficiency table from a bench run
(``rooflinecli.bench.fit``) and embeds it. The TOML is written by ``toml_dumps`` below (no extra
dependency), reloaded through ``rooflinecli.hardware.load_spec_file`` and only then moved into place.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rooflinecli.output import discard_temp, resolve_output, temp_beside, write_text_atomic
from rooflinecli.bench import timing
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec, load_spec_file

MATMUL_DTYPES = ("bf16", "fp16", "fp8", "tf32", "fp32")

# ------------------------------------------------------------------------------------------------
# A tiny TOML writer: strings, numbers, booleans, arrays of those, tables, arrays of tables.
# ------------------------------------------------------------------------------------------------


def _toml_key(k: str) -> str:
    if k and all(c.isalnum() or c in "-_" for c in k):
        return k
    return _toml_str(k)


def _toml_str(s: str) -> str:
    out = ['"']
    for c in s:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _toml_value(v: Any, where: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"{where}: TOML cannot hold {v!r} here")
        r = repr(v)
        return r if ("." in r or "e" in r or "inf" in r or "nan" in r) else r + ".0"
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x, where) for x in v) + "]"
    raise ValueError(f"{where}: cannot write {type(v).__name__} to TOML")


def _is_table_array(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and bool(v) and all(isinstance(x, Mapping) for x in v)


def toml_dumps(doc: Mapping[str, Any], comment: str = "") -> str:
    """Serialize a dict of the shapes spec files use; ``tomllib.loads(toml_dumps(d)) == d``."""
    lines = [f"# {line}".rstrip() for line in comment.splitlines()] if comment else []

    def emit(table: Mapping[str, Any], prefix: str) -> None:
        scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping) and not _is_table_array(v)]
        for k, v in scalars:
            lines.append(f"{_toml_key(k)} = {_toml_value(v, prefix + k)}")
        for k, v in table.items():
            name = f"{prefix}{_toml_key(k)}"
            if isinstance(v, Mapping):
                has_scalars = any(not isinstance(x, Mapping) and not _is_table_array(x) for x in v.values())
                if has_scalars or not v:
                    lines.extend(["", f"[{name}]"])
                emit(v, name + ".")
            elif _is_table_array(v):
                for item in v:
                    lines.extend(["", f"[[{name}]]"])
                    emit(item, name + ".")

    emit(doc, "")
    return "\n".join(lines).lstrip("\n") + "\n"


def write_spec_file(path: str | Path, doc: Mapping[str, Any], comment: str = "") -> HardwareSpec:
    """Write ``doc`` as a spec file at ``path``: validated by loading a temporary copy beside it
    through ``load_spec_file`` (relative ``base`` paths resolve the same), then written atomically."""
    path = Path(path)
    text = toml_dumps(doc, comment)
    resolve_output(path, make_parents=True)  # refuses devices, FIFOs, folders; makes hardware_specs/measured/
    try:  # tracked: removed on SIGTERM / SIGHUP like every other temporary file
        tmp = temp_beside(path, suffix=".check.toml")
    except OSError as e:
        raise RooflineError(f"{path}: cannot write there: {e.strerror or type(e).__name__}") from None
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            load_spec_file(tmp)
        except RooflineError as e:  # named after the file the user asked for, not the check copy
            raise RooflineError(f"{path}: the spec written would not load: {str(e).replace(tmp, str(path))}") from None
    finally:
        discard_temp(tmp)
    write_text_atomic(path, text)
    return load_spec_file(path)


def read_spec_doc(path: str | Path) -> dict[str, Any]:
    """The raw TOML table of a spec file (to add an efficiency table and write it back)."""
    from rooflinecli.hardware import read_spec_toml

    return read_spec_toml(path)


# ------------------------------------------------------------------------------------------------
# Measuring
# ------------------------------------------------------------------------------------------------


@dataclass
class Ceilings:
    """Measured ceilings: bandwidths in GB/s, peaks in TFLOP/s, with how each was measured."""

    copy_gb_per_s: float | None = None
    #: read-only HBM bandwidth (the fastest of torch's read-only reductions): a bound, not what
    #: predictions use (they take the copy figure); written to ``[measured_with]``
    read_gb_per_s: float | None = None
    l2_gb_per_s: float | None = None
    matmul_tflops: dict[str, float] = field(default_factory=dict)
    methods: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    #: burst figures ({"gemm_bf16_tflops", "copy_gb_per_s"}) and sustained ones (>= 2 s back to back)
    burst: dict[str, float] = field(default_factory=dict)
    sustained: dict[str, float] = field(default_factory=dict)
    #: calibration-file rows of the sustained runs (``gemm_sustained``, ``copy_sustained``, with ``t_series``)
    sustained_rows: list[dict[str, Any]] = field(default_factory=list)
    #: the other dtypes' burst peaks, where ``use_sustained`` scaled them to sustained estimates
    burst_peaks: dict[str, float] = field(default_factory=dict)

    def use_sustained(self) -> None:
        """Make the sustained figures the ceilings (what predictions use); the burst ones stay in
        ``burst``. Only bf16 runs long enough to throttle: the other dtypes' burst peaks are scaled
        by bf16's sustained / burst ratio (estimates, their burst figures kept in ``burst_peaks``),
        so that every peak of the spec is of one kind (a sustained bf16 beside a burst fp16 made
        fp16 11% faster than bf16 on the H200)."""
        if "gemm_bf16_tflops" in self.sustained and "bf16" in self.matmul_tflops:
            self.matmul_tflops["bf16"] = self.sustained["gemm_bf16_tflops"]
            self.methods["peak_dense_tflops.bf16"] = self.methods.get("sustained gemm_bf16_tflops", "") + (
                f"; burst {self.burst['gemm_bf16_tflops']:.1f} TFLOP/s in [measured_with] 'burst peak_dense_tflops.bf16'")
            ratio = self.sustained["gemm_bf16_tflops"] / self.burst["gemm_bf16_tflops"] if self.burst.get("gemm_bf16_tflops") else None
            for dt in [d for d in self.matmul_tflops if d != "bf16" and d not in self.burst_peaks] if ratio else []:
                self.burst_peaks[dt] = burst = self.matmul_tflops[dt]
                self.matmul_tflops[dt] = burst * ratio
                self.methods[f"peak_dense_tflops.{dt}"] = self.methods.get(f"peak_dense_tflops.{dt}", "") + (
                    f"; x {ratio:.3f} (bf16's sustained / burst): a sustained estimate; burst {burst:.1f} TFLOP/s in "
                    f"[measured_with] 'burst peak_dense_tflops.{dt}'")
        if "copy_gb_per_s" in self.sustained and self.copy_gb_per_s:
            self.copy_gb_per_s = self.sustained["copy_gb_per_s"]
            self.methods["memory.bandwidth_gb_per_s"] = self.methods.get("sustained copy_gb_per_s", "") + (
                f"; burst {self.burst['copy_gb_per_s']:.0f} GB/s in [measured_with] 'burst memory.bandwidth_gb_per_s'")


@dataclass(frozen=True)
class CalibrationSizes:
    copy_bytes: int = 2**30  # 1 GiB each way: 20x the L2
    l2_fraction: float = 0.25  # source + destination fill this fraction of the L2
    matmul_n: int = 8192
    samples: int = 20
    sustained_s: float = 2.0  # back-to-back run of each sustained figure
    chunk: int = 10  # launches per timed entry of a sustained series


CPU_SIZES = CalibrationSizes(copy_bytes=8 * 2**20, matmul_n=128, samples=10, sustained_s=0.05)


def measure_ceilings(device: str = "cuda", sizes: CalibrationSizes | None = None, dtypes: tuple[str, ...] = MATMUL_DTYPES, sustained: bool = True) -> Ceilings:
    """Copy bandwidth, L2 bandwidth and matmul peak per dtype on ``device``; with ``sustained``,
    burst and sustained bf16 matmul and copy, the sustained ones as the ceilings."""
    import torch

    from kernels.testing import device_randn

    sizes = sizes or (CPU_SIZES if device == "cpu" else CalibrationSizes())
    samples = timing.flushed_sampler(device)
    gen = torch.Generator().manual_seed(1234)
    c = Ceilings()

    # HBM: copy_ of a large random buffer, read + write counted
    n = sizes.copy_bytes // 2
    src = device_randn((n,), torch.bfloat16, device, gen)
    dst = torch.empty_like(src)
    t = timing.median_s(samples(lambda: dst.copy_(src), sizes.samples))
    c.copy_gb_per_s = 2 * n * 2 / t / 1e9
    c.methods["memory.bandwidth_gb_per_s"] = (
        f"copy_ of {n * 2 / 2**30:.2f} GiB bf16 random data, read + write counted, median of {sizes.samples}"
    )
    del dst

    # HBM read-only: a stream of reads beats a copy's read + write mix (H200 run 2: decode attention
    # read 4.5-4.6 TB/s where copy_ moved 4.25), so the fastest of two read-only reductions over
    # the same buffer is the read ceiling, the bound a read-bound kernel is checked against
    best, how = None, ""
    for name, fn in (("torch.sum (fp32 accumulation)", lambda: torch.sum(src, dtype=torch.float32)), ("torch.amax", lambda: torch.amax(src))):
        t = timing.median_s(samples(fn, sizes.samples))
        if best is None or t < best:
            best, how = t, name
    c.read_gb_per_s = n * 2 / best / 1e9
    c.methods["read memory.bandwidth_gb_per_s"] = (
        f"{how} of {n * 2 / 2**30:.2f} GiB bf16 random data, the faster of torch.sum and torch.amax, bytes read counted, "
        f"median of {sizes.samples}: a bound for read-bound kernels; predictions use the copy figure"
    )
    del src

    # L2: copy_ between buffers that stay resident in L2, replayed back to back
    l2_bytes = device_l2_bytes(device)
    if l2_bytes:
        m = max(1, int(l2_bytes * sizes.l2_fraction / 2) // 2)  # bf16 elements per buffer
        src = device_randn((m,), torch.bfloat16, device, gen)
        dst = torch.empty_like(src)
        reps = 50
        fn = _replayed(device, lambda: dst.copy_(src), reps)
        t = timing.median_s(samples(fn, sizes.samples, flush=False)) / reps
        c.l2_gb_per_s = 2 * m * 2 / t / 1e9
        c.methods["cache.l2_bandwidth_gb_per_s"] = (
            f"copy_ between two {m * 2 / 2**20:.1f} MiB buffers ({sizes.l2_fraction:.0%} of the {l2_bytes / 2**20:.0f} MiB L2), "
            f"{reps} back-to-back copies per sample{' (one CUDA graph)' if device == 'cuda' else ''}, read + write counted, median of {sizes.samples}"
        )
        del src, dst
    else:
        c.skipped["cache.l2_bandwidth_gb_per_s"] = "L2 size unknown on this device"

    # matmul peak per dtype at N^3
    N = sizes.matmul_n
    for dt in dtypes:
        try:
            tflops, how = _matmul_peak(dt, N, device, gen, samples, sizes.samples)
        except Exception as e:  # noqa: BLE001 - a dtype the GPU or torch lacks is skipped, with why
            c.skipped[f"peak_dense_tflops.{dt}"] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
            continue
        c.matmul_tflops[dt] = tflops
        c.methods[f"peak_dense_tflops.{dt}"] = how
    if sustained:
        measure_sustained(c, device, sizes)
        c.use_sustained()
    return c


def steady_state_s(series: list[float]) -> float:
    """The sustained per-launch time: median of the series' second half (after any clock drop)."""
    return timing.median_s(series[len(series) // 2 :])


def measure_sustained(c: Ceilings, device: str, sizes: CalibrationSizes) -> None:
    """Burst and sustained (``sizes.sustained_s`` back to back) bf16 matmul at N^3 and HBM copy;
    fills ``c.burst``, ``c.sustained``, ``c.sustained_rows`` (a failure goes to ``c.skipped``)."""
    import torch

    from kernels.testing import device_randn

    gen = torch.Generator().manual_seed(4321)
    N, n = sizes.matmul_n, sizes.copy_bytes // 2
    recipes = (
        ("gemm_bf16_tflops", "gemm_sustained", {"M": N, "N": N, "K": N}, 2.0 * N**3, 6.0 * N * N,
         lambda: (device_randn((N, N), torch.bfloat16, device, gen), device_randn((N, N), torch.bfloat16, device, gen)),
         lambda a, b: (lambda: torch.matmul(a, b)), 1e12, f"torch.matmul bf16 {N}x{N}x{N}"),
        ("copy_gb_per_s", "copy_sustained", {"bytes": 2 * n}, 0.0, 4.0 * n,
         lambda: (device_randn((n,), torch.bfloat16, device, gen), None),
         lambda a, _: (lambda d=torch.empty_like(a): d.copy_(a)), 1e9, f"copy_ of {n * 2 / 2**30:.2f} GiB bf16"),
    )
    timer = timing.flushed_sampler(device)
    for key, op, shape, flops, nbytes, inputs, call, unit, what in recipes:
        try:
            fn = call(*inputs())
            burst = timing.median_s(timer(fn, sizes.samples))
            chunks = max(3, math.ceil(sizes.sustained_s / (sizes.chunk * burst)))
            series = timing.series_samples(fn, device, sizes.chunk, chunks)
        except Exception as e:  # noqa: BLE001 - recorded, the rest of the calibration goes on
            c.skipped[f"sustained {key}"] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
            continue
        work = flops if flops else nbytes
        c.burst[key] = work / burst / unit
        c.sustained[key] = work / steady_state_s(series) / unit
        c.methods[f"burst {key}"] = f"{what}, median of {sizes.samples} single launches (L2 flushed between)"
        c.methods[f"sustained {key}"] = (
            f"{what}, {chunks * sizes.chunk} launches back to back ({sum(series) * sizes.chunk:.2f} s); "
            f"median of the second half of {chunks} entries of {sizes.chunk} launches each (sustained: what predictions use)"
        )
        c.sustained_rows.append({"op": op, "shape": shape, "flops": flops, "bytes": nbytes, "t_series": series,
                                 "note": f"each entry: mean of {sizes.chunk} back-to-back launches; {sum(series) * sizes.chunk:.2f} s in all"})
        del fn
        if device == "cuda":
            torch.cuda.empty_cache()


def device_l2_bytes(device: str) -> int:
    """The L2 size of the GPU (a nominal 4 MiB on the CPU, where only the code path is exercised)."""
    if device != "cuda":
        return 4 * 2**20  # a nominal 4 MiB on the CPU: tests exercise the code path only
    return timing.l2_size_bytes(0)


def _replayed(device: str, fn: Callable[[], Any], reps: int) -> Callable[[], None]:
    """``reps`` calls of ``fn`` as one CUDA graph replay (a plain loop on the CPU)."""
    if device != "cuda":

        def loop() -> None:
            for _ in range(reps):
                fn()

        return loop
    graph = timing.capture_graph([fn], reps)
    return graph.replay


def _matmul_peak(dt: str, N: int, device: str, gen, samples, n_samples: int) -> tuple[float, str]:
    import torch

    from kernels.testing import device_randn

    flops = 2.0 * N * N * N
    what = f"{N}x{N}x{N} random, median of {n_samples}"
    if dt in ("bf16", "fp16"):
        tdt = torch.bfloat16 if dt == "bf16" else torch.float16
        a, b = device_randn((N, N), tdt, device, gen), device_randn((N, N), tdt, device, gen)
        t = timing.median_s(samples(lambda: torch.matmul(a, b), n_samples))
        return flops / t / 1e12, f"torch.matmul {dt} {what}"
    if dt in ("tf32", "fp32"):
        a, b = device_randn((N, N), torch.float32, device, gen), device_randn((N, N), torch.float32, device, gen)
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
        try:
            t = timing.median_s(samples(lambda: torch.matmul(a, b), n_samples))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev
        return flops / t / 1e12, f"torch.matmul fp32 with allow_tf32={dt == 'tf32'} {what}"
    if dt == "fp8":
        if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
            raise RuntimeError("torch has no _scaled_mm / float8_e4m3fn")
        if device == "cuda" and torch.cuda.get_device_capability(0) < (8, 9):
            raise RuntimeError("fp8 matmul needs compute capability 8.9 or newer")
        a = device_randn((N, N), torch.float32, device, gen).to(torch.float8_e4m3fn)
        b = device_randn((N, N), torch.float32, device, gen).to(torch.float8_e4m3fn)  # (N, K) row-major
        one = torch.ones((), dtype=torch.float32, device=device)
        bt = b.t()  # (K, N) column-major, as _scaled_mm wants

        def mm():
            return torch._scaled_mm(a, bt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        mm()
        t = timing.median_s(samples(mm, n_samples))
        return flops / t / 1e12, f"torch._scaled_mm fp8 e4m3 -> bf16 {what}"
    raise RuntimeError(f"no matmul recipe for {dt}")


# ------------------------------------------------------------------------------------------------
# The spec document
# ------------------------------------------------------------------------------------------------


def _round(x: float, digits: int = 4) -> float:
    """Round to ``digits`` significant figures (the measurements are not better than that)."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, -int(math.floor(math.log10(abs(x)))) + digits - 1)


def _base_ref(base: HardwareSpec) -> str:
    """How a measured spec names its base: the id of a built-in spec, else the base file's absolute
    path (a spec given as ``--hw-file my-gpu.toml`` has an id no lookup would find)."""
    from rooflinecli.hardware import builtin_specs

    builtin = builtin_specs().get(base.id)
    if builtin is not None and Path(builtin.path).resolve() == Path(base.path).resolve():
        return base.id
    return str(Path(base.path).resolve())


#: sustained/burst figure -> the spec key it sets
_BURST_KEYS = {"gemm_bf16_tflops": "peak_dense_tflops.bf16", "copy_gb_per_s": "memory.bandwidth_gb_per_s"}


def measured_doc(base: HardwareSpec, ceilings: Ceilings, environment: Mapping[str, Any], spec_id: str | None = None) -> dict[str, Any]:
    """A measured spec document: only the measured figures; the rest is inherited from ``base``."""
    if base.kind != "datasheet":
        raise RooflineError(f"--base '{base.id}' is a measured spec; name a datasheet spec (e.g. h200)")
    doc: dict[str, Any] = {
        "id": spec_id or f"{base.id}-measured",
        "name": f"{environment.get('gpu_name') or base.name} (measured)",
        "kind": "measured",
        "base": _base_ref(base),
    }
    if ceilings.matmul_tflops:
        doc["peak_dense_tflops"] = {dt: _round(v) for dt, v in ceilings.matmul_tflops.items()}
    if ceilings.copy_gb_per_s:
        doc["memory"] = {"bandwidth_gb_per_s": _round(ceilings.copy_gb_per_s)}
    if ceilings.l2_gb_per_s:
        doc["cache"] = {"l2_bandwidth_gb_per_s": _round(ceilings.l2_gb_per_s)}
    mw: dict[str, str] = {}
    for key in ("gpu_name", "driver", "cuda", "torch", "triton", "date_utc", "sm_clock_mhz", "mem_clock_mhz", "sm_clock_max_mhz", "host"):
        if environment.get(key) not in (None, ""):
            mw[key] = str(environment[key])
    for key, how in ceilings.methods.items():
        mw[f"method {key}"] = how
    for key, value in ceilings.burst.items():
        mw[f"burst {_BURST_KEYS[key]}"] = f"{_round(value)}"
    for key, value in ceilings.sustained.items():
        mw[f"sustained {_BURST_KEYS[key]}"] = f"{_round(value)}"
    for dt, value in ceilings.burst_peaks.items():
        mw[f"burst peak_dense_tflops.{dt}"] = f"{_round(value)}"
    if ceilings.burst_peaks:  # scaled from a burst: estimates, and the spec says so
        doc["estimates"] = [f"peak_dense_tflops.{dt}" for dt in ceilings.burst_peaks if dt in ceilings.matmul_tflops]
    if ceilings.read_gb_per_s:  # ceilings.bound_spec reads it
        mw["read memory.bandwidth_gb_per_s"] = f"{_round(ceilings.read_gb_per_s)}"
    for key, why in ceilings.skipped.items():
        mw[f"skipped {key}"] = why
    mw["tool"] = "roofline calibrate"
    doc["measured_with"] = mw
    return doc


def add_efficiency(doc: dict[str, Any], efficiency: Mapping[str, Mapping[str, float]], provenance: Mapping[str, str]) -> dict[str, Any]:
    """``doc`` with its ``[efficiency]`` table replaced by ``efficiency`` and the fit recorded."""
    doc = dict(doc)
    doc["efficiency"] = {k: {r: _round(float(v), 4) for r, v in regs.items()} for k, regs in efficiency.items() if regs}
    mw = dict(doc.get("measured_with", {}))
    mw.update({f"efficiency {k}": str(v) for k, v in provenance.items()})
    doc["measured_with"] = mw
    # keep tables after the scalars and the efficiency before measured_with, for readability
    order = ["id", "name", "vendor", "kind", "base", "estimates", "peak_dense_tflops", "memory", "cache", "compute", "interconnect", "power", "efficiency", "measured_with", "sources"]
    return {k: doc[k] for k in order if k in doc} | {k: v for k, v in doc.items() if k not in order}


def set_calibration(doc: dict[str, Any], relative_path: str) -> dict[str, Any]:
    """``doc`` naming its calibration file: ``calibration = "<path relative to the spec>"`` when the
    spec loader knows that key, else ``[measured_with] calibration`` (an older loader)."""
    from rooflinecli.hardware.schema import TOP_LEVEL

    doc = dict(doc)
    if "calibration" in TOP_LEVEL:
        doc["calibration"] = relative_path
        order = ["id", "name", "vendor", "kind", "base", "calibration"]
        return {k: doc[k] for k in order if k in doc} | {k: v for k, v in doc.items() if k not in order}
    doc["measured_with"] = {**doc.get("measured_with", {}), "calibration": relative_path}
    return doc


def default_out_path(base_id: str) -> Path:
    """``hardware_specs/measured/<base>.toml``; a base given by path contributes its file stem only."""
    from rooflinecli.hardware import specs_dir

    name = Path(base_id).stem if base_id.endswith(".toml") else base_id
    return specs_dir() / "measured" / f"{name}.toml"


SPEC_COMMENT = (
    "Measured ceilings written by `roofline calibrate`; figures not set here are inherited from the\n"
    "datasheet spec named as base. [measured_with] records the GPU, driver, date and each method."
)
