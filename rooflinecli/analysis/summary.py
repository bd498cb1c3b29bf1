"""The roofline's per-phase results: op rows and phase totals (``OpRow``, ``PhaseResult``), the
decode compute-bound batch search and the KV crossover context. Pure
roofline: the modes and the calibrated model compose with these in ``rooflinecli.predict``."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

from .ops import phase_ops
from .phase import TOTAL_FIELDS, OpTime, phase_times, sum_ops
from .workload import Workload

#: largest batch searched for the decode compute-bound point
MAX_BATCH_SEARCH = 1 << 16
#: the compute-bound batch search evaluates every batch up to this one, then every this-many-th
SEARCH_DENSE_BATCHES = 256
#: bisection steps of the KV crossover search evaluated in one vectorized pass (2**n - 1 points)
BISECTION_ROUND = 8


@dataclass
class OpRow:
    """One op of a phase, totals over its layers, per GPU (decode: mean over the generation)."""

    name: str
    kind: str
    group: str
    layers: int
    flops: float
    bytes: float
    weights_bytes: float
    activation_bytes: float
    kv_read_bytes: float
    kv_write_bytes: float
    comm_bytes: float
    arithmetic_intensity_flop_per_byte: float | None
    compute_time_s: float
    memory_time_s: float
    comm_time_s: float
    overhead_s: float
    time_s: float
    bound: str
    note: str = ""

    @classmethod
    def from_timed(cls, t: OpTime, reduce=np.mean) -> "OpRow":
        vals = {k: float(reduce(np.asarray(getattr(t, k), dtype=float))) for k in TOTAL_FIELDS}
        ai = vals["flops"] / vals["bytes"] if vals["bytes"] > 0 else None
        if vals["comm_time_s"] > max(vals["compute_time_s"], vals["memory_time_s"]):
            bound = "comm"
        else:
            bound = "compute" if vals["compute_time_s"] >= vals["memory_time_s"] else "memory"
        return cls(
            name=t.op.name, kind=t.op.kind, group=t.op.group, layers=t.op.layers, arithmetic_intensity_flop_per_byte=ai, bound=bound, note=t.op.note, **vals
        )


@dataclass
class PhaseResult:
    """One phase (prefill or decode) at one batch: its per-op rows and their totals."""

    phase: str
    batch: int
    context: str  # "S" for prefill, "S..S+G-1" for decode
    ops: list[OpRow]
    totals: dict[str, float]

    @property
    def time_s(self) -> float:
        return self.totals["time_s"]

    @property
    def bound(self) -> str:
        return "compute" if self.totals["compute_time_s"] >= self.totals["memory_time_s"] else "memory"

    def to_json(self) -> dict:
        t = self.totals
        return {
            "phase": self.phase,
            "batch": self.batch,
            "context": self.context,
            "time_s": t["time_s"],
            "flops": t["flops"],
            "bytes": t["bytes"],
            "bound": self.bound,
            "arithmetic_intensity_flop_per_byte": t["flops"] / t["bytes"] if t["bytes"] else None,
            "compute_time_s": t["compute_time_s"],
            "memory_time_s": t["memory_time_s"],
            "comm_time_s": t["comm_time_s"],
            "overhead_s": t["overhead_s"],
            "weights_bytes": t["weights_bytes"],
            "activation_bytes": t["activation_bytes"],
            "kv_read_bytes": t["kv_read_bytes"],
            "kv_write_bytes": t["kv_write_bytes"],
            "comm_bytes": t["comm_bytes"],
            "ops": [asdict(r) for r in self.ops],
        }


def phase_result(phase: str, batch: int, context_label: str, timed: list[OpTime]) -> PhaseResult:
    rows = [OpRow.from_timed(t) for t in timed]
    totals = {k: sum(getattr(r, k) for r in rows) for k in TOTAL_FIELDS}
    return PhaseResult(phase, batch, context_label, rows, totals)


def decode_compute_bound_batches(
    cfg: ModelConfig, spec: HardwareSpec, wl: Workload, context: int, max_batch: int = MAX_BATCH_SEARCH
) -> tuple[int | None, int | None]:
    """(whole step, matmuls only): the smallest batch at which one decode step at ``context`` is
    compute-bound (summed compute time >= summed memory time), searched over 1..max_batch; None
    where no batch is. "Matmuls only" sums the gemm and moe ops (the weight streaming ones, which
    turn compute-bound near the ridge point; attention over the cache keeps a whole step
    memory-bound at long contexts).

    Two vectorized passes instead of all max_batch batches: every batch up to
    ``SEARCH_DENSE_BATCHES`` and every ``SEARCH_DENSE_BATCHES``-th one beyond, then every batch of
    the bracket where the step first turns compute-bound. Compute time grows linearly with the
    batch and memory time no faster (weights are read once; expert weights touched saturate), so
    once compute-bound a step stays so and the bracket holds the first such batch: the answer
    equals a scan of every batch (tests/model/test_analysis_search.py checks it against one)."""
    dense = min(SEARCH_DENSE_BATCHES, max_batch)
    coarse = np.concatenate([np.arange(1, dense + 1), np.arange(2 * dense, max_batch + 1, dense)]).astype(float)
    if coarse[-1] < max_batch:
        coarse = np.append(coarse, float(max_batch))
    out: list[int | None] = []
    brackets: list[tuple[float, float] | None] = []
    for flags in _decode_compute_bound_flags(cfg, spec, wl, context, coarse):
        idx = np.flatnonzero(flags)
        first = int(idx[0]) if idx.size else None
        if first is None or coarse[first] <= dense:  # none, or inside the dense prefix: exact
            out.append(None if first is None else int(coarse[first]))
            brackets.append(None)
        else:
            out.append(int(coarse[first]))
            brackets.append((coarse[first - 1] + 1.0, coarse[first]))
    if any(brackets):
        fine = np.concatenate([np.arange(b[0], b[1] + 1.0) for b in brackets if b])
        for j, flags in enumerate(_decode_compute_bound_flags(cfg, spec, wl, context, fine)):
            if brackets[j]:
                lo, hi = brackets[j]
                idx = np.flatnonzero(flags & (fine >= lo) & (fine <= hi))
                out[j] = int(fine[idx[0]]) if idx.size else out[j]
    return out[0], out[1]


def _decode_compute_bound_flags(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, context: int, batch: np.ndarray) -> list[np.ndarray]:
    """Compute-bound flags of one decode step at ``context`` over ``batch``: [whole step, gemm and moe ops only]."""
    timed = phase_times(cfg, spec, wl, "decode", batch, float(context))
    return [sum_ops(subset, batch.shape)["compute_bound"] for subset in (timed, [t for t in timed if t.op.kind in ("gemm", "moe")])]


def decode_compute_bound_batch(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, context: int, max_batch: int = MAX_BATCH_SEARCH) -> int | None:
    """Smallest batch at which a whole decode step at ``context`` is compute-bound (None: none)."""
    return decode_compute_bound_batches(cfg, spec, wl, context, max_batch)[0]


def kv_crossover_context(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, limit: float = 2.0**40) -> float | None:
    """Context N at which the KV bytes one decode step reads equal the weight bytes it reads (at
    the workload's batch), solved by bisection (windows and compression make KV reads nonlinear in
    N); None when KV reads never catch up (e.g. every layer windowed).

    The bisection runs BISECTION_ROUND steps at a time: every midpoint those steps could visit is
    evaluated in one vectorized pass, then the steps are replayed from the signs, so the result is
    the one a point-by-point bisection gives, in a few passes instead of ~30."""

    def diff(N):
        N = np.asarray(N, dtype=float)
        kv, weights = np.zeros(N.shape), np.zeros(N.shape)
        for op in phase_ops(cfg, spec, wl, "decode", float(wl.batch), N):  # the bytes alone: no times needed
            L = float(op.layers)
            kv += L * np.asarray(op.kv_read_bytes, dtype=float)
            weights += L * np.asarray(op.weights_bytes, dtype=float)
        return kv - weights

    grid = 2.0 ** np.arange(0, 41)
    d = diff(grid)
    if d[-1] < 0 or not np.isfinite(d).all():
        return None
    if d[0] >= 0:
        return 1.0
    i = int(np.flatnonzero(d >= 0)[0])
    lo, hi = grid[i - 1], grid[i]
    steps = 0
    while steps < 80:  # continuous bisection to relative precision
        depth = min(BISECTION_ROUND, 80 - steps)
        mids = _bisection_midpoints(lo, hi, depth)
        at_or_above = dict(zip(mids, diff(np.array(mids)) >= 0))
        for _ in range(depth):
            mid = 0.5 * (lo + hi)
            if at_or_above[mid]:
                hi = mid
            else:
                lo = mid
            steps += 1
            if hi - lo <= 1e-9 * hi:
                return float(0.5 * (lo + hi))
    return float(0.5 * (lo + hi))


def _bisection_midpoints(lo: float, hi: float, depth: int) -> list[float]:
    """Every midpoint ``depth`` bisection steps on [lo, hi] could visit, computed as they compute it."""
    if depth == 0:
        return []
    mid = 0.5 * (lo + hi)
    return [mid, *_bisection_midpoints(lo, mid, depth - 1), *_bisection_midpoints(mid, hi, depth - 1)]
