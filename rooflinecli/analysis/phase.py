"""Roofline times of one phase: per op, compute time = FLOPs / (peak * eff), memory time =
bytes / (BW * eff), time = max of the two (+ link time for communication, + launch overhead);
phase totals are sums over ops and layers. Everything broadcasts over (batch, context)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooflinecli import formulas as F
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

from .ops import OpCost, phase_ops
from .workload import Workload, validate_workload

#: per-op array fields that are summed (times layers) into phase totals
TOTAL_FIELDS: tuple[str, ...] = (
    "time_s",
    "flops",
    "bytes",
    "compute_time_s",
    "memory_time_s",
    "comm_time_s",
    "overhead_s",
    "weights_bytes",
    "activation_bytes",
    "kv_read_bytes",
    "kv_write_bytes",
    "comm_bytes",
)


def efficiencies(wl: Workload, kind: str) -> tuple[float, float]:
    """(compute, memory) efficiency of an op kind: the user's ``efficiency`` when given for the
    kind, else 1.0 (the pure roofline; measured behaviour is the achievable model's, not a knob)."""
    if kind in wl.efficiency:
        e = float(wl.efficiency[kind])
        return e, e
    return 1.0, 1.0


@dataclass
class OpTime:
    """An op with its times; every array field is the TOTAL over the op's layers, per GPU."""

    op: OpCost
    flops: np.ndarray
    bytes: np.ndarray
    weights_bytes: np.ndarray
    activation_bytes: np.ndarray
    kv_read_bytes: np.ndarray
    kv_write_bytes: np.ndarray
    comm_bytes: np.ndarray
    compute_time_s: np.ndarray
    memory_time_s: np.ndarray
    comm_time_s: np.ndarray
    overhead_s: np.ndarray
    time_s: np.ndarray

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def arithmetic_intensity(self):
        return F.arithmetic_intensity(self.flops, self.bytes)

    @property
    def bound(self):
        """"compute", "memory" or "comm" (elementwise over the grid)."""
        comm = np.asarray(self.comm_time_s) > np.maximum(self.compute_time_s, self.memory_time_s)
        return np.where(comm, "comm", np.where(np.asarray(self.compute_time_s) >= self.memory_time_s, "compute", "memory"))


def time_ops(spec: HardwareSpec, wl: Workload, compute_dtype: str, ops: list[OpCost]) -> list[OpTime]:
    peak = spec.peak_flops_per_s(compute_dtype)
    bw = spec.memory_bandwidth_bytes_per_s
    out = []
    for op in ops:
        e_c, e_m = efficiencies(wl, op.kind) if op.kind != "comm" else (1.0, 1.0)
        L = float(op.layers)
        flops = np.asarray(op.flops, dtype=float)
        byts = np.asarray(op.bytes, dtype=float)
        # L is folded into the scalar divisor: one pass over each array
        compute = F.compute_time_s(flops, peak / L, e_c)
        memory = F.memory_time_s(byts, bw / L, e_m)
        comm = L * np.asarray(op.comm_time_s, dtype=float)
        overhead = L * op.kernels * wl.launch_overhead_s
        time = np.maximum(compute, memory)
        if comm.any():
            time = time + comm
        if overhead:
            time = time + overhead
        out.append(
            OpTime(
                op=op,
                flops=L * flops,
                bytes=L * byts,
                weights_bytes=L * np.asarray(op.weights_bytes, dtype=float),
                activation_bytes=L * np.asarray(op.activation_bytes, dtype=float),
                kv_read_bytes=L * np.asarray(op.kv_read_bytes, dtype=float),
                kv_write_bytes=L * np.asarray(op.kv_write_bytes, dtype=float),
                comm_bytes=L * np.asarray(op.comm_bytes, dtype=float),
                compute_time_s=compute,
                memory_time_s=memory,
                comm_time_s=comm,
                overhead_s=np.asarray(overhead),
                time_s=time,
            )
        )
    return out


def phase_times(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str, batch, context) -> list[OpTime]:
    """Timed ops of one phase (see ``phase_ops``)."""
    return time_ops(spec, wl, wl.compute_dtype, phase_ops(cfg, spec, wl, phase, batch, context))


def sum_ops(timed: list[OpTime], shape=()) -> dict[str, np.ndarray]:
    """Phase totals: every ``TOTAL_FIELDS`` entry summed over ops, plus ``compute_bound``."""
    tot = {k: np.zeros(shape) for k in TOTAL_FIELDS}
    for t in timed:
        for k in TOTAL_FIELDS:
            v = getattr(t, k)
            if np.ndim(v) or v:  # skip scalar zeros
                tot[k] += v
    tot["compute_bound"] = tot["compute_time_s"] >= tot["memory_time_s"]
    return tot


def phase_totals(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, phase: str, batch, context) -> dict[str, np.ndarray]:
    """Totals of one phase over a (batch, context) grid; the per-op code of ``analyze``."""
    validate_workload(wl)
    batch = np.asarray(batch, dtype=float)
    context = np.asarray(context, dtype=float)
    shape = np.broadcast_shapes(batch.shape, context.shape)
    return sum_ops(phase_times(cfg, spec, wl, phase, batch, context), shape)
