"""The kernel targets of ``roofline validate``: our kernels against the fastest torch paths and the
copy bandwidth (docs/reference.md, section 3), each met / missed / not measured with its figures.
Reported, never asserted."""

from __future__ import annotations

import math

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rooflinecli.hardware import HardwareSpec
from rooflinecli.results import ResultRow


def target_value_text(value: float | None, unit: str) -> str:
    """A target's value with its unit, for tables: "0.91x torch", "0.80 of copy BW", "-"."""
    if value is None:
        return "-"
    return f"{value:.2f}{unit}" if unit.startswith("x") else f"{value:.2f} {unit}".rstrip()


@dataclass(frozen=True)
class Target:
    name: str
    goal: str
    value: float | None
    threshold: float
    detail: str
    #: what ``value`` (and ``threshold``) count: "x torch" (our speed over the fastest torch path),
    #: "of copy BW", "of datasheet BW", "of 350 TFLOP/s", "limit / worst"
    unit: str = "x torch"
    #: the value as a reader wants it where the ratio reads poorly ("467 us worst" beside 30 us / 467 us)
    shown: str | None = None

    def value_text(self) -> str:
        return self.shown if self.shown and self.value is not None else target_value_text(self.value, self.unit)

    @property
    def status(self) -> str:
        if self.value is None:
            return "not measured"
        return "met" if self.value >= self.threshold else "missed"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "goal": self.goal, "value": self.value, "unit": self.unit, "threshold": self.threshold,
                "status": self.status, "detail": self.detail, "value_text": self.value_text()}




def _p50(r: ResultRow) -> float:
    return float(r.p50_s)


def _param(r: ResultRow, *names: str) -> Any:
    for n in names:
        if n in r.params:
            return r.params[n]
    return None


class TimedRows(tuple):
    """A run's rows with its timed, correct rows indexed by (op, impl) and (None, impl) once: the
    targets ask for them twenty times, and a 100,000-row file made each scan cost."""

    def __new__(cls, rows: Sequence[ResultRow]):
        self = super().__new__(cls, rows)
        self.by: dict[tuple[str | None, str], list[ResultRow]] = {}
        for r in self:
            if r.correct and r.samples_s:
                self.by.setdefault((r.op, r.impl), []).append(r)
                self.by.setdefault((None, r.impl), []).append(r)
        return self


def _timed(rows: Sequence[ResultRow], op: str | None, impl: str = "triton") -> list[ResultRow]:
    """Timed, correct rows of ``op`` (every op when None) and ``impl``."""
    if isinstance(rows, TimedRows):
        return list(rows.by.get((op, impl), ()))
    return [r for r in rows if (op is None or r.op == op) and r.impl == impl and r.correct and r.samples_s]


def _gbps(r: ResultRow) -> float:
    return r.bytes / _p50(r) / 1e9


def paired_speedups(extra: Any) -> dict[tuple[str, str, str], float]:
    """``extra.bench.paired`` of a results file as {(op, shape, dtype): speedup}; {} when absent
    or malformed (files written before it)."""
    bench = extra.get("bench") if isinstance(extra, dict) else None
    items = bench.get("paired") if isinstance(bench, dict) else None
    out: dict[tuple[str, str, str], float] = {}
    for p in items if isinstance(items, list) else []:
        try:
            v = float(p["speedup"])
            if math.isfinite(v) and v > 0:
                out[(str(p["op"]), str(p["shape"]), str(p["dtype"]))] = v
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _speedups(rows: Sequence[ResultRow], paired: Mapping[tuple[str, str, str], float], op: str, select) -> list[tuple[ResultRow, float]]:
    """(our row, torch time / ours) for each shape with both timed: the interleaved pairs' median
    where bench measured one (``paired``: both figures at one clock state), else torch p50 / our
    p50."""
    torch_rows = {(r.shape, r.dtype): r for r in _timed(rows, op, "torch")}
    out = []
    for r in _timed(rows, op):
        t = torch_rows.get((r.shape, r.dtype))
        if t is not None and select(r):
            out.append((r, paired.get((op, r.shape, r.dtype), _p50(t) / _p50(r))))
    return out


def copy_bandwidth_gb_per_s(rows: Sequence[ResultRow], ms: HardwareSpec | None) -> tuple[float | None, str]:
    """The measured copy bandwidth the bandwidth targets are held to."""
    if ms is not None and ms.kind == "measured":
        return ms.memory_bandwidth_gb_per_s, f"measured copy BW {ms.memory_bandwidth_gb_per_s:.0f} GB/s ({ms.id})"
    copies = _timed(rows, "copy") + _timed(rows, "copy", "torch")
    if copies:
        best = max(_gbps(r) for r in copies)
        return best, f"best copy in this run {best:.0f} GB/s (no measured spec)"
    return None, "no measured copy bandwidth"


#: the kernel targets (graph-timed, against the fastest torch path the installed torch offers);
#: the copy ones from docs/reference.md
LAUNCHER_HOST_US_MAX = 30.0


def kernel_targets(rows: Sequence[ResultRow], ds: HardwareSpec | None, ms: HardwareSpec | None,
                   paired: Mapping[tuple[str, str, str], float] | None = None) -> list[Target]:
    """The kernel targets (docs/reference.md, section 3); ``paired`` (``paired_speedups``): the speedups measured in interleaved
    replay pairs, used instead of the ratio of separate medians where present."""
    paired = paired or {}
    rows = rows if isinstance(rows, TimedRows) else TimedRows(rows)
    targets: list[Target] = []
    copy_bw, copy_src = copy_bandwidth_gb_per_s(rows, ms)

    # copy >= 90% of datasheet bandwidth (largest case), >= 0.95x torch copy
    copies = _timed(rows, "copy")
    if copies and ds is not None:
        r = max(copies, key=lambda r: r.bytes)
        frac = _gbps(r) / ds.memory_bandwidth_gb_per_s
        targets.append(Target("copy_bandwidth", ">= 90% of datasheet HBM bandwidth", frac, 0.90, f"{r.shape} {r.dtype}: {_gbps(r):.0f} GB/s of {ds.memory_bandwidth_gb_per_s:.0f} ({ds.id})", "of datasheet BW"))
    else:
        targets.append(Target("copy_bandwidth", ">= 90% of datasheet HBM bandwidth", None, 0.90, "no timed copy rows", "of datasheet BW"))
    sp = _speedups(rows, paired, "copy", lambda r: True)
    targets.append(_worst("copy_vs_torch", ">= 0.95x torch copy_", sp, 0.95))

    def dims(r: ResultRow) -> list:
        return [_param(r, "M"), _param(r, "N"), _param(r, "K")]

    def big_gemm(r: ResultRow) -> bool:
        return all(isinstance(d, int) and 4096 <= d <= 8192 for d in dims(r))

    # GEMM bf16 at 4096-8192 >= 0.95x cuBLAS; fp8 >= 1.0x torch._scaled_mm
    targets.append(_worst("gemm_vs_torch", "bf16 M,N,K in 4096..8192: >= 0.95x cuBLAS", _speedups(rows, paired, "gemm", lambda r: r.dtype == "bf16" and big_gemm(r)), 0.95))
    targets.append(_worst("gemm_fp8_vs_torch", "fp8 M,N,K in 4096..8192: >= 1.0x torch._scaled_mm", _speedups(rows, paired, "gemm", lambda r: r.dtype == "fp8" and big_gemm(r)), 1.0))
    # skinny GEMM, M <= 256: >= 0.95x cuBLAS (every M)
    targets.append(_worst("skinny_gemm_vs_torch", "M <= 256: >= 0.95x cuBLAS", _speedups(rows, paired, "gemm", lambda r: isinstance(_param(r, "M"), int) and _param(r, "M") <= 256), 0.95))
    # skinny gemm at M = 1 >= 85% of measured copy bandwidth (largest weight)
    skinny = [r for r in _timed(rows, "gemm") if _param(r, "M") == 1]
    targets.append(_bandwidth_target("skinny_gemm_m1", ">= 85% of measured copy BW at M = 1", skinny, copy_bw, copy_src, 0.85))

    # flash attention prefill (hdim 128, seq >= 4k) >= 1.0x the best SDPA backend
    def long_flash(r: ResultRow) -> bool:
        return _param(r, "D") == 128 and (_param(r, "S", "N") or 0) >= 4096

    targets.append(_worst("flash_vs_sdpa", "hdim 128, seq >= 4k: >= 1.0x the fastest SDPA backend", _speedups(rows, paired, "flash_attention", long_flash), 1.0))

    # MLA decode: >= 350 TFLOP/s where compute-bound (datasheet ridge), >= 80% of copy BW where memory-bound
    mla = _timed(rows, "mla_decode")
    ridge = ds.ridge_point("bf16") if ds is not None else None
    compute_bound = [ridge is not None and r.bytes > 0 and r.flops / r.bytes >= ridge for r in mla]  # one pass: `r not in list` was O(n^2)
    mla_c = [r for r, c in zip(mla, compute_bound) if c]
    mla_m = [r for r, c in zip(mla, compute_bound) if not c]
    if mla_c:
        r = min(mla_c, key=lambda r: r.flops / _p50(r))
        tf = r.flops / _p50(r) / 1e12
        targets.append(Target("mla_decode_tflops", ">= 350 TFLOP/s compute-bound", tf / 350.0, 1.0, f"worst of {len(mla_c)}: {r.shape} {r.dtype} at {tf:.0f} TFLOP/s", "of 350 TFLOP/s"))
    else:
        targets.append(Target("mla_decode_tflops", ">= 350 TFLOP/s compute-bound", None, 1.0, "no compute-bound MLA rows timed", "of 350 TFLOP/s"))
    targets.append(_bandwidth_target("mla_decode_bw", ">= 80% of measured copy BW memory-bound", mla_m, copy_bw, copy_src, 0.80))

    # decode attention >= 1.0x SDPA (every shape); >= 80% of copy BW at the longest context
    # the launcher's default schedule (cases without a "schedule" param); the balanced schedule's
    # cases (bench's -bal twins) as their own line, to decide whether it should be the default
    def default_schedule(r: ResultRow) -> bool:
        return _param(r, "schedule") is None

    targets.append(_worst("decode_vs_sdpa", ">= 1.0x the fastest SDPA path", _speedups(rows, paired, "decode_attention", default_schedule), 1.0))
    balanced = _speedups(rows, paired, "decode_attention", lambda r: _param(r, "schedule") == "balanced")
    if balanced:
        targets.append(_worst("decode_balanced_vs_sdpa", "schedule='balanced': >= 1.0x the fastest SDPA path", balanced, 1.0))
    dec = [r for r in _timed(rows, "decode_attention") if default_schedule(r)]
    if dec:
        longest = max((_param(r, "N", "context", "S") or 0) for r in dec)
        dec = [r for r in dec if (_param(r, "N", "context", "S") or 0) == longest]
    targets.append(_bandwidth_target("decode_attention_bw", ">= 80% of measured copy BW at long context", dec, copy_bw, copy_src, 0.80))

    # MoE decode, T <= 16: >= 70% of copy bandwidth over the experts touched, every shape (worst)
    moe = [r for r in _timed(rows, "moe") if isinstance(_param(r, "T"), int) and _param(r, "T") <= 16]
    if moe and copy_bw is not None:
        r = min(moe, key=_gbps)
        targets.append(Target("moe_decode_bw", "T <= 16: >= 70% of copy BW over touched experts", _gbps(r) / copy_bw, 0.70,
                              f"worst of {len(moe)}: {r.shape} {r.dtype}: {_gbps(r):.0f} GB/s vs {copy_src}", "of copy BW"))
    else:
        targets.append(Target("moe_decode_bw", "T <= 16: >= 70% of copy BW over touched experts", None, 0.70, "no timed rows" if not moe else copy_src,
                              "of copy BW"))

    # every launcher <= 30 us of host time per call (eager, after a synchronize)
    hosted = [r for r in _timed(rows, None) if r.host_us_per_call is not None]
    if hosted:
        r = max(hosted, key=lambda r: r.host_us_per_call)
        over = sum(x.host_us_per_call > LAUNCHER_HOST_US_MAX for x in hosted)
        targets.append(Target("launcher_host_us", f"<= {LAUNCHER_HOST_US_MAX:g} us host time per call", LAUNCHER_HOST_US_MAX / r.host_us_per_call, 1.0,
                              f"worst {r.op} {r.shape} {r.dtype} at {r.host_us_per_call:.0f} us; {over} of {len(hosted)} launchers over",
                              f"of {LAUNCHER_HOST_US_MAX:g} us / worst us", shown=f"{r.host_us_per_call:,.0f} us worst"))
    else:
        targets.append(Target("launcher_host_us", f"<= {LAUNCHER_HOST_US_MAX:g} us host time per call", None, 1.0, "no host times (results written before they were recorded)",
                              f"of {LAUNCHER_HOST_US_MAX:g} us / worst us"))
    return targets


def _is_decode(r: ResultRow) -> bool:
    phase = _param(r, "phase", "regime")
    if isinstance(phase, str):
        return phase == "decode"
    t = _param(r, "T", "tokens", "M")
    return isinstance(t, int) and t <= 64


def _worst(name: str, goal: str, pairs: list[tuple[ResultRow, float]], threshold: float) -> Target:
    if not pairs:
        return Target(name, goal, None, threshold, "no shape with both ours and the baseline timed")
    r, s = min(pairs, key=lambda x: x[1])
    detail = f"worst of {len(pairs)}: {r.shape} {r.dtype} at {s:.2f}x"
    if len(pairs) > 1:
        detail += f" (median {float(np.median([x[1] for x in pairs])):.2f}x)"
    return Target(name, goal, s, threshold, detail)


def _bandwidth_target(name: str, goal: str, rows: list[ResultRow], copy_bw: float | None, copy_src: str, threshold: float) -> Target:
    unit = "of copy BW"
    if not rows:
        return Target(name, goal, None, threshold, "no timed rows", unit)
    if copy_bw is None:
        return Target(name, goal, None, threshold, copy_src, unit)
    r = max(rows, key=lambda r: r.bytes)
    return Target(name, goal, _gbps(r) / copy_bw, threshold, f"{r.shape} {r.dtype}: {_gbps(r):.0f} GB/s vs {copy_src}", unit)
