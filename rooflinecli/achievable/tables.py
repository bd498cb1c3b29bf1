"""Time models read straight off measured per-op tables (schema-2 calibrations, ``calibration``):
GEMMs by dtype, context and generation attention, collectives.

Every table is interpolated the same way: the log of measured time over a roofline-shaped base
time (``base_s``: max(FLOPs / P, bytes / BW), P and BW the fastest rates the table itself reaches;
for attention BW the fastest at that working set or above, ``envelope``: an L2-resident KV cache
streams faster than HBM), GEMM glitches removed first (``_despiked``),
multilinear over the log of the grid's axes, with the ratio held flat beyond the grid's edges, so
that outside the measured shapes the time follows the roofline's shape from the nearest measured
point. Measured (the leave-shape-out error, ``validation_report``), this beats a parametric fit
(fixed cost + work / rate) on these tables: a GEMM's efficiency moves in steps with its tile
shapes, which a smooth form cannot follow, while neighbouring grid points share them.

- **GEMM**: a dense (M, N, K) grid per dtype (bf16, fp8 including the activation quantization,
  fp8_block, nvfp4 where measured); a grid cell the data lacks is filled from its neighbours.
- **Context attention** (b sequences of S tokens, causal) on a (B, S) grid per (H, KVH, D, KV dtype);
  an unmeasured head shape takes the ratio of the nearest measured one (same D, nearest H and
  group size), its base scaled to its own heads.
- **Generation attention** (b sequences, one query each, N cached tokens) on a (B, N) grid alike:
  the per-sequence cost at large batch is in the data.
- **Collectives**: latency per (op, GPU count) over message bytes, interpolated in log-log;
  beyond the largest message at its bandwidth, below the smallest at its latency. All-reduce
  prefers the engine's custom all-reduce (CUDA-graph variant) where it measured that size and
  GPU count, else NCCL.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from . import ceilings_of, nearest_gpu

#: bytes per element of a GEMM's inputs by dtype (the output is bf16)
GEMM_INPUT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5625}
#: weight-only quantized GEMM tables (16-bit activations, int8 / int4 weights with per-channel
#: scales: TensorRT-LLM's weight_only_quant_matmul): bytes per weight
WEIGHT_ONLY_BYTES = {"int8_wo": 1.0, "int4_wo": 0.5}
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


def weight_bytes_of(dtype: str) -> float:
    """Bytes per weight a GEMM (or MoE) table's kernel reads."""
    return WEIGHT_ONLY_BYTES.get(dtype) or GEMM_INPUT_BYTES.get(dtype, 2.0)


def _axis_neighbours(g: np.ndarray, ax: int, shift: int) -> np.ndarray:
    """``g`` moved ``shift`` cells along ``ax``, NaN where that runs past the edge."""
    nb = np.roll(g, shift, axis=ax)
    edge = [slice(None)] * g.ndim
    edge[ax] = slice(0, shift) if shift > 0 else slice(shift, None)
    nb[tuple(edge)] = np.nan
    return nb


def _filled(grid: np.ndarray) -> np.ndarray:
    """NaN cells filled, repeated until none is left: each with the mean over the axes of its
    neighbours' trend (the line through the two nearest filled cells along that axis; the nearest
    alone where it has one filled cell there), held within the measured range. An attention
    table's unmeasured corner (many long sequences) so follows the ratio's trend toward it."""
    g = grid.copy()
    if not np.isfinite(g).any():
        return np.zeros_like(g)
    lo, hi = np.nanmin(g), np.nanmax(g)
    for _ in range(64):
        nan = np.isnan(g)
        if not nan.any():
            return g
        acc, cnt = np.zeros_like(g), np.zeros_like(g)
        for ax in range(g.ndim):
            for shift in (1, -1):
                nb, nb2 = _axis_neighbours(g, ax, shift), _axis_neighbours(g, ax, 2 * shift)
                trend = np.where(np.isnan(nb2), nb, 2.0 * nb - nb2)
                ok = ~np.isnan(trend)
                acc[ok] += trend[ok]
                cnt[ok] += 1
        fill = nan & (cnt > 0)
        g[fill] = np.clip(acc[fill] / cnt[fill], lo, hi)
        if not fill.any():
            break
    return np.where(np.isnan(g), np.nanmean(g), g)


def _interp_axis(x: np.ndarray, axis: np.ndarray):
    """(lower index, weight of the upper) of each x on a sorted axis, clamped to its ends."""
    x = np.clip(x, axis[0], axis[-1])
    if axis.size == 1:
        return np.zeros(x.shape, dtype=int), np.zeros(x.shape)
    i = np.clip(np.searchsorted(axis, x, side="right") - 1, 0, axis.size - 2)
    w = (x - axis[i]) / (axis[i + 1] - axis[i])
    return i, w


def multilinear(grid: np.ndarray, axes: list[np.ndarray], points: list[np.ndarray]) -> np.ndarray:
    """``grid`` (over ``axes``) interpolated multilinearly at ``points`` (one array per axis), clamped."""
    idx = [_interp_axis(np.asarray(p, dtype=float), a) for p, a in zip(points, axes)]
    shape = np.broadcast(*[p for p in points]).shape
    out = np.zeros(shape)
    for corner in range(2 ** len(axes)):
        w = np.ones(shape)
        sel = []
        for d, (i, wt) in enumerate(idx):
            up = (corner >> d) & 1
            sel.append(np.minimum(i + up, axes[d].size - 1) if axes[d].size > 1 else i)
            w = w * (wt if up else 1.0 - wt)
        out = out + w * grid[tuple(np.broadcast_to(s, shape) for s in sel)]
    return out


#: a measured cell this much (log) slower than the median of its axis neighbours is a glitch of the
#: measurement (1.35x: isolated spikes, e.g. B200 vLLM fp8 GEMMs of 8 us measured at 18 us between
#: 8 us neighbours), replaced by what they predict before interpolating; a slow step that runs
#: across the other axes (a library's kernel choice over a range of shapes) is kept
SPIKE_LOG = 0.3


#: attention grids keep their spikes: removing them raised L40S decode's leave-shape-out p90 (21.4%
#: -> 22.1%; their slow cells are a kernel's steps in B and length, not glitches)
ATTENTION_SPIKE_LOG = None


def _despiked(grid: np.ndarray, axes: list, spike_log: float | None = SPIKE_LOG) -> np.ndarray:
    """``grid`` (NaN where unmeasured) with each upward spike set to what its neighbours predict:
    per axis whose two neighbours are measured, their interpolation (in the log of the axis); a
    cell over the median of these by more than ``spike_log`` is a spike. A measurement only adds
    time, so only slow outliers are taken as glitches. ``spike_log`` None: ``grid`` unchanged."""
    if spike_log is None:
        return grid
    preds = []
    for ax, a in enumerate(axes):
        if a.size < 3:
            continue
        sl = lambda lo, hi: tuple(slice(lo, hi) if d == ax else slice(None) for d in range(grid.ndim))  # noqa: E731
        w = ((a[1:-1] - a[:-2]) / (a[2:] - a[:-2])).reshape([-1 if d == ax else 1 for d in range(grid.ndim)])
        p = np.full(grid.shape, np.nan)
        p[sl(1, -1)] = (1 - w) * grid[sl(0, -2)] + w * grid[sl(2, None)]
        preds.append(p)
    if not preds:
        return grid
    preds = np.stack(preds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # cells with no axis to predict them from
        med = np.nanmedian(preds, axis=0)
    voices = np.isfinite(preds).sum(axis=0)  # an edge cell with one predicting axis is not judged
    spike = np.isfinite(grid) & (voices >= min(2, len(preds))) & (grid - med > spike_log)
    return np.where(spike, med, grid)


@dataclass
class Grid:
    """log(time / base) on a grid over the log of its axes: ``raw`` as measured (NaN where the data
    has no cell), ``ratio`` what is interpolated (spikes removed, ``_despiked``; gaps filled)."""

    axes: list  # sorted log values per axis
    ratio: np.ndarray  # despiked, filled
    measured: np.ndarray  # bool, same shape
    raw: np.ndarray | None = None  # as measured, NaN where not
    spike_log: float | None = SPIKE_LOG  # ``_despiked``'s threshold; None: spikes kept

    def at(self, *log_points) -> np.ndarray:
        return multilinear(self.ratio, self.axes, list(log_points))

    def leave_slice_out(self, axis: int) -> np.ndarray:
        """Relative errors (predicted / measured - 1) of every measured cell of each interior slice
        of ``axis``, each predicted by the grid refitted without that slice (spikes and gaps of the
        rest, then interpolated from the slices either side), against the cell as measured."""
        raw = self.raw if self.raw is not None else np.where(self.measured, self.ratio, np.nan)
        ax = self.axes[axis]
        errs = []
        for i in range(1, ax.size - 1):
            rest = _filled(_despiked(np.delete(raw, i, axis=axis), [np.delete(a, i) if d == axis else a for d, a in enumerate(self.axes)], self.spike_log))
            w = (ax[i] - ax[i - 1]) / (ax[i + 1] - ax[i - 1])
            lo, hi = np.take(rest, i - 1, axis=axis), np.take(rest, i, axis=axis)
            mid = np.take(raw, i, axis=axis)
            m = np.isfinite(mid)
            errs.append(np.exp((1 - w) * lo[m] + w * hi[m] - mid[m]) - 1.0)
        return np.concatenate(errs) if errs else np.zeros(0)


def _grid(keys: list[np.ndarray], ratio: np.ndarray, spike_log: float | None = SPIKE_LOG) -> Grid:
    """A Grid of ``ratio`` (log) over the log of ``keys`` (one array per axis); repeated points:
    mean; upward spikes over ``spike_log`` removed (None: kept)."""
    axes, index = [], []
    for k in keys:
        lk = np.log(np.asarray(k, dtype=float))
        u, inv = np.unique(lk, return_inverse=True)
        axes.append(u)
        index.append(inv)
    shape = tuple(a.size for a in axes)
    acc, cnt = np.zeros(shape), np.zeros(shape)
    np.add.at(acc, tuple(index), ratio)
    np.add.at(cnt, tuple(index), 1)
    measured = cnt > 0
    g = np.where(measured, acc / np.maximum(cnt, 1), np.nan)
    return Grid(axes, _filled(_despiked(g, axes, spike_log)), measured, g, spike_log)


# ------------------------------------------------------------------------------------------------


def gemm_flops_bytes(dtype: str, M, N, K):
    a = 2.0 if dtype in WEIGHT_ONLY_BYTES else GEMM_INPUT_BYTES.get(dtype, 2.0)  # activation bytes
    M, N, K = (np.asarray(x, dtype=float) for x in (M, N, K))
    return 2.0 * M * N * K, a * M * K + weight_bytes_of(dtype) * N * K + 2.0 * M * N


def context_flops_bytes(B, S, H, KVH, D, kv_bytes):
    B, S, H, KVH, D = (np.asarray(x, dtype=float) for x in (B, S, H, KVH, D))
    return 2.0 * B * H * S * S * D, B * S * D * (2.0 * H * 2.0 + 2.0 * KVH * kv_bytes)  # causal QK^T + PV; q, o, k, v


def generation_flops_bytes(B, N, H, KVH, D, kv_bytes):
    B, N, H, KVH, D = (np.asarray(x, dtype=float) for x in (B, N, H, KVH, D))
    return 4.0 * B * H * N * D, B * (2.0 * KVH * N * D * kv_bytes + 2.0 * H * D * 2.0)


@dataclass
class Rates:
    """The roofline-shaped base of a table: FLOPs at ``flops_per_s``, bytes at ``bytes_per_s`` or,
    where ``step_log_bytes`` is set (attention), at the fastest rate the table reaches at that many
    bytes or more (``envelope``): an L2-resident working set streams several times faster than one
    from HBM (L40S decode: 3.9 TB/s up to about 100 MB, 0.76 TB/s beyond), so the ratio left to
    interpolate has no cliff at the cache's size."""

    flops_per_s: float
    bytes_per_s: float
    step_log_bytes: np.ndarray | None = None  # the log bytes at which each step of the rate ends
    step_bytes_per_s: np.ndarray | None = None

    def bytes_rate(self, nbytes):
        if self.step_log_bytes is None:
            return self.bytes_per_s
        i = np.searchsorted(self.step_log_bytes, np.log(np.maximum(nbytes, 1.0)), side="left")
        return self.step_bytes_per_s[np.minimum(i, self.step_bytes_per_s.size - 1)]

    def base_s(self, flops, nbytes):
        nbytes = np.asarray(nbytes, dtype=float)
        return np.maximum(np.asarray(flops, dtype=float) / self.flops_per_s, nbytes / self.bytes_rate(nbytes))

    def scaled(self, flops_factor: float, bytes_factor: float) -> Rates:
        steps = None if self.step_bytes_per_s is None else self.step_bytes_per_s * bytes_factor
        return Rates(self.flops_per_s * flops_factor, self.bytes_per_s * bytes_factor, self.step_log_bytes, steps)


def _rates(flops: np.ndarray, nbytes: np.ndarray, t: np.ndarray) -> Rates:
    return Rates(float(np.max(flops / t)), float(np.max(nbytes / t)))


def envelope(flops: np.ndarray, nbytes: np.ndarray, t: np.ndarray) -> Rates:
    """Rates whose byte rate at B bytes is the fastest measured among the rows of B bytes or more
    (non-increasing in B: a cache-resident size is fast, a larger one not)."""
    o = np.argsort(nbytes, kind="stable")
    x, bw = np.log(nbytes[o]), (nbytes / t)[o]
    env = np.maximum.accumulate(bw[::-1])[::-1]
    end = np.flatnonzero(np.r_[env[1:] != env[:-1], True])
    return Rates(float(np.max(flops / t)), float(env[0]), x[end], env[end])


def carried(t, base, target_base):
    """A time measured on one GPU (``t``, its roofline base ``base``) carried to another whose base
    is ``target_base``: the share of the time that is work (base / t, the efficiency) scales with
    the roofline, the rest (launch, setup, tail) stays: t x (target_base / base) ^ (base / t)."""
    eff = np.clip(base / t, 0.0, 1.0)
    return t * (target_base / base) ** eff


@dataclass
class GemmTable:
    dtype: str
    rates: Rates
    grid: Grid
    kernel: str = ""
    #: transferred tables: the target GPU's rates (``carried``), else None
    target: Rates | None = None
    #: the smallest time the table measured (a call that does next to nothing)
    floor_s: float = 0.0

    def time_s(self, M, N, K, weight_bytes: float | None = None):
        """Seconds of one GEMM: the grid's ratio to the roofline base, interpolated. A shape below
        the grid's smallest M, N or K (a router of 8 experts: N = 8 where the grid starts at 32)
        is its edge's time carried to its own work (``carried``): the launch and setup stay, as
        they do under the edge, rather than shrinking with the bytes. ``weight_bytes``: bytes per
        weight as stored where they are under nine tenths of what the table's kernel read
        (int8 or int4 weights under a bf16 or fp8 table: a weight-only quantized GEMM, which no
        table measured); the time is carried to the fewer weight bytes the same way (a decode
        GEMM, all weight traffic, speeds up with them; a compute-bound one does not)."""
        M, N, K = (np.maximum(np.asarray(x, dtype=float), 1.0) for x in (M, N, K))
        edge = [np.maximum(x, np.exp(a[0])) for x, a in zip((M, N, K), self.grid.axes)]
        r = self.grid.at(*(np.log(x) for x in edge))
        fl, nb = gemm_flops_bytes(self.dtype, M, N, K)
        base, base_edge = self.rates.base_s(fl, nb), self.rates.base_s(*gemm_flops_bytes(self.dtype, *edge))
        t = carried(base_edge * np.exp(r), base_edge, base)
        if weight_bytes is not None and weight_bytes < 0.9 * weight_bytes_of(self.dtype):
            nb_w = nb - (weight_bytes_of(self.dtype) - weight_bytes) * N * K
            base_w = self.rates.base_s(fl, nb_w)
            t = carried(t, base, base_w)
            base, nb = base_w, nb_w
        return t if self.target is None else carried(t, base, self.target.base_s(fl, nb))


class Lazy(dict):
    """key -> value, each made on first use by ``make(key)`` from a known set of keys (a table
    holds hundreds of head shapes and several GEMM dtypes; a prediction reads one or two)."""

    def __init__(self, keys, make):
        super().__init__()
        self.known = list(keys)
        self._set = set(self.known)
        self.make = make

    def __missing__(self, key):
        if key not in self._set:
            raise KeyError(key)
        self[key] = v = self.make(key)
        return v

    def get(self, key, default=None):
        return self[key] if key in self._set else default

    def __contains__(self, key) -> bool:
        return key in self._set

    def __iter__(self):
        return iter(self.known)

    def __len__(self) -> int:
        return len(self.known)

    def keys(self):
        return list(self.known)

    def values(self):
        return [self[k] for k in self.known]

    def items(self):
        return [(k, self[k]) for k in self.known]


def LazyGrids(rows: dict) -> Lazy:
    """(H, KVH, D, kv) -> Grid over (B, length), built on first use from its rows (B, length, log ratio)."""
    return Lazy(rows, lambda key: _grid(list(rows[key][:2]), rows[key][2], ATTENTION_SPIKE_LOG))


@dataclass
class AttentionTable:
    """One of context / generation attention: per (H, KVH, D, kv dtype) a Grid over (B, length)."""

    phase: str  # "context" | "generation"
    grids: Lazy  # (H, KVH, D, kv) -> Grid
    rates: Rates
    kernel: str = ""
    target: Rates | None = None  # transferred tables: the target GPU's rates (``carried``)
    #: (H, KVH, D, kv) -> the rows as measured (B, length, seconds, FLOPs, bytes), for ``leave_slices_out``
    measured: dict = field(default_factory=dict, repr=False)

    def leave_slices_out(self) -> np.ndarray:
        """Relative errors of every measured point of every head shape, each slice of its (B,
        length) grid left out in turn (``Grid.leave_slice_out``); the base's rates are refitted
        without the head shape's rows, so no held-out time sets the base it is judged on."""
        keys = list(self.measured)
        cols = [np.concatenate([self.measured[k][j] for k in keys]) for j in range(5)]
        owner = np.repeat(np.arange(len(keys)), [self.measured[k][0].size for k in keys])
        _, _, t, fl, nb = cols
        errs = []
        for i, k in enumerate(keys):
            B, L, tk, flk, nbk = self.measured[k]
            rest = owner != i
            rates = envelope(fl[rest], nb[rest], t[rest]) if rest.any() else self.rates
            g = _grid([B, L], np.log(tk / rates.base_s(flk, nbk)), ATTENTION_SPIKE_LOG)
            errs += [g.leave_slice_out(0), g.leave_slice_out(1)]
        return np.concatenate(errs) if errs else np.zeros(0)

    def _fb(self, B, L, H, KVH, D, kv):
        f = context_flops_bytes if self.phase == "context" else generation_flops_bytes
        return f(B, L, H, KVH, D, KV_BYTES.get(kv, 2.0))

    def nearest(self, H, KVH, D, kv) -> tuple:
        """The measured head shape nearest (H, KVH, D) in (log D, log group size, log H), same KV dtype if measured."""
        keys = [k for k in self.grids if k[3] == kv] or list(self.grids)
        return min(keys, key=lambda k: (abs(np.log(k[2] / D)), abs(np.log((k[0] / k[1]) / (H / KVH))), abs(np.log(k[0] / H)), k))

    def time_s(self, B, L, H, KVH, D, kv="bf16"):
        """Seconds of the call at (B, L) for heads (H, KVH, D). A head shape the table did not
        measure reads the nearest measured one at the batch that gives it as many heads to run,
        B x H / H_near: heads and sequences are both parallel work of one attention call, so an MHA
        decode call (Llama 2 7B, H32/KVH32, from H8/KVH8) at batch 1 costs what H8/KVH8 costs at
        batch 4, a short context's launch-bound 12 us, and at large batches four times as much.
        What that leaves different (the head width D, the KV dtype: an fp8 cache from bf16 rows)
        scales the time past the grid's smallest call (the launch: ``floor_s``) by the roofline
        base of the work, the same kernel at the same efficiency."""
        key = self.nearest(float(H), float(KVH), float(D), kv)
        g = self.grids[key]
        B, L = np.maximum(np.asarray(B, dtype=float), 1.0), np.maximum(np.asarray(L, dtype=float), 1.0)
        fl, nb = self._fb(B, L, H, KVH, D, kv)
        base = self.rates.base_s(fl, nb)
        if (key[0], key[1], key[2], key[3]) == (H, KVH, D, kv):
            t = base * np.exp(g.at(np.log(B), np.log(L)))
        else:  # another head shape or KV dtype
            Bk = B * (float(H) / key[0])  # as many heads to run, as sequences of the measured shape
            Bc = np.maximum(Bk, np.exp(g.axes[0][0]))
            base_k = self.rates.base_s(*self._fb(Bc, L, key[0], key[1], key[2], key[3]))
            t_k = base_k * np.exp(g.at(np.log(Bc), np.log(L)))
            own = self.rates.base_s(*self._fb(Bk, L, key[0], key[1], D, kv))  # the work at that batch, in the target's D and KV dtype
            floor = self.floor_s(key)
            t = floor + np.maximum(t_k - floor, 0.0) * (own / base_k)
        return (t if self.target is None else carried(t, base, self.target.base_s(fl, nb))), key

    def floor_s(self, key) -> float:
        """Seconds of the smallest call measured for ``key`` (its grid's first B and length)."""
        g = self.grids[key]
        B0, L0 = np.exp(g.axes[0][0]), np.exp(g.axes[1][0])
        return float(self.rates.base_s(*self._fb(B0, L0, key[0], key[1], key[2], key[3])) * np.exp(g.at(np.log(B0), np.log(L0))))


@dataclass
class CommTable:
    """(op, GPU count) -> (log bytes, log seconds), per source (the engine's custom all-reduce, NCCL)."""

    curves: dict  # (source, op, gpus) -> (log bytes, log s)

    def sources(self, op: str, gpus: int) -> list:
        return [s for s in ("custom", "nccl") if (s, op, gpus) in self.curves]

    def time_s(self, op: str, gpus: int, nbytes, prefer_custom: bool = True):
        """(seconds, source) of one ``op`` of ``nbytes`` over ``gpus`` GPUs; a GPU count not
        measured takes the nearest one's curve, its bandwidth part scaled by the ring factor."""
        nbytes = np.maximum(np.asarray(nbytes, dtype=float), 1.0)
        counts = sorted({g for (_, o, g) in self.curves if o == op})
        if not counts:
            return None, ""
        g = min(counts, key=lambda c: (abs(np.log(c / gpus)), c))
        srcs = self.sources(op, g)
        if not prefer_custom:
            srcs = [s for s in srcs if s == "nccl"] or srcs
        src = srcs[0]
        xs, ys = self.curves[(src, op, g)]
        if src == "custom" and "nccl" in srcs:  # custom all-reduce only up to its largest measured message
            xn, yn = self.curves[("nccl", op, g)]
            t = np.where(np.log(nbytes) <= xs[-1], _loglog(nbytes, xs, ys), _loglog(nbytes, xn, yn))
        else:
            t = _loglog(nbytes, xs, ys)
        if g != gpus:
            t = t * ((gpus - 1) / gpus) / ((g - 1) / g)
        return t, src if g == gpus else f"{src}, {g} GPUs' curve scaled"

    def leave_size_out(self, source: str, op: str, gpus: int) -> np.ndarray:
        xs, ys = self.curves[(source, op, gpus)]
        out = []
        for i in range(1, xs.size - 1):
            w = (xs[i] - xs[i - 1]) / (xs[i + 1] - xs[i - 1])
            out.append(np.exp((1 - w) * ys[i - 1] + w * ys[i + 1] - ys[i]) - 1.0)
        return np.array(out)


def _loglog(x, xs, ys):
    """exp of log y interpolated in log x; flat (latency) below, linear in x (bandwidth) above."""
    lx = np.log(x)
    y = np.exp(np.interp(lx, xs, ys))
    return np.where(lx > xs[-1], np.exp(ys[-1]) * x / np.exp(xs[-1]), y)


@dataclass
class MoeTable:
    """Routed experts of one MoE layer, per measured model shape (dtype, d, I, k, E, tp, ep): the
    time over the tokens entering the layer, in log-log; flat below the fewest tokens measured,
    linear in the tokens beyond the most (compute-bound there)."""

    curves: dict  # (dtype, d, I, k, E, tp, ep) -> (log T, log s)
    kernels: dict = field(default_factory=dict)
    #: (dtype, d, I, k, E, tp, ep) -> the kernel measured there where it is not the dtype's main one
    layout_kernels: dict = field(default_factory=dict)

    def kernel(self, dtype: str, d, I, k, E, tp, ep) -> str:
        """The kernel measured for ``dtype`` at that layout."""
        key = (dtype, int(d), int(I), int(k), int(E), int(tp), int(ep))
        return self.layout_kernels.get(key) or self.kernels.get(dtype, "")

    def time_s(self, dtype: str, T, d, I, k, E, tp, ep):
        key = (dtype, int(d), int(I), int(k), int(E), int(tp), int(ep))
        if key not in self.curves:
            return None
        xs, ys = self.curves[key]
        return _loglog(np.maximum(np.asarray(T, dtype=float), 1.0), xs, ys)

    def leave_tokens_out(self) -> np.ndarray:
        out = []
        for xs, ys in self.curves.values():
            for i in range(1, xs.size - 1):
                w = (xs[i] - xs[i - 1]) / (xs[i + 1] - xs[i - 1])
                out.append(np.exp((1 - w) * ys[i - 1] + w * ys[i + 1] - ys[i]) - 1.0)
        return np.array(out)


@dataclass
class QuantTable:
    """Seconds of one per-tensor fp8 quantization step of an M x K bf16 activation, as the engine
    measured it: the log time interpolated over (log M, log K) (a few microseconds, mostly
    latency, at decode sizes); past the grid's edges, the edge's time scaled by the elements."""

    grid: Grid

    def time_s(self, M, K):
        M, K = (np.maximum(np.asarray(x, dtype=float), 1.0) for x in (M, K))
        (am, ak) = self.grid.axes
        Mc, Kc = np.exp(np.clip(np.log(M), am[0], am[-1])), np.exp(np.clip(np.log(K), ak[0], ak[-1]))
        return np.exp(self.grid.at(np.log(Mc), np.log(Kc))) * np.maximum(1.0, M * K / (Mc * Kc))


def fit_quant_table(table: dict) -> QuantTable:
    c = _cols(table)
    return QuantTable(_grid([c["M"], c["K"]], np.log(c["latency_us"] * 1e-6)))


@dataclass
class Fp8QuantTables:
    """The engine's per-tensor fp8 activation quantization: ``scale`` what dynamic scaling (amax,
    then the scale) adds to the static kernel, ``quantize`` the static quantize kernel."""

    scale: QuantTable
    quantize: QuantTable


class TableModels:
    """The tables' models of one calibration: ``gemm`` (dtype -> GemmTable) and the families
    ``context``, ``generation`` (AttentionTable), ``comm`` (CommTable), ``moe`` (MoeTable) and
    ``fp8_quant`` (Fp8QuantTables), each a value or None, or given as a zero-argument function that
    fits it when first read (a dense model never fits the MoE table)."""

    FAMILIES = ("context", "generation", "comm", "moe", "mla", "fp8_quant")

    def __init__(self, gemm=None, context=None, generation=None, comm=None, moe=None, provenance=None,
                 engine: str = "", transferred_from: str | None = None, mla=None, fp8_quant=None):
        self.gemm = {} if gemm is None else gemm
        self._family = {"context": context, "generation": generation, "comm": comm, "moe": moe, "mla": mla, "fp8_quant": fp8_quant}
        self.provenance = dict(provenance or {})  # table -> provenance
        self.engine = engine
        self.transferred_from = transferred_from  # the measured GPU these tables were carried from, if any

    def _get(self, name: str):
        v = self._family[name]
        if callable(v):
            self._family[name] = v = v()
        return v

    context = property(lambda self: self._get("context"))
    generation = property(lambda self: self._get("generation"))
    comm = property(lambda self: self._get("comm"))
    moe = property(lambda self: self._get("moe"))
    mla = property(lambda self: self._get("mla"))  # ``mla.MlaTables``
    fp8_quant = property(lambda self: self._get("fp8_quant"))

    def describe(self) -> dict:
        return {"engine": self.engine, "gemm_dtypes": sorted(self.gemm), "tables": {k: v.get("table_path") for k, v in self.provenance.items()}}


def _cols(table: dict) -> dict:
    c = table["columns"]
    return {k: (np.asarray(v) if k in ("dtype", "kv_dtype", "op") else np.asarray(v, dtype=float)) for k, v in c.items()}


def fit_gemm_tables(table: dict) -> Lazy:
    """dtype -> GemmTable, each fitted when first asked for."""
    c = _cols(table)
    kernels = table.get("kernels", {})

    def make(dt: str) -> GemmTable:
        m = c["dtype"] == dt
        M, N, K, t = c["M"][m], c["N"][m], c["K"][m], c["latency_us"][m] * 1e-6
        fl, nb = gemm_flops_bytes(dt, M, N, K)
        rates = _rates(fl, nb, t)
        return GemmTable(dt, rates, _grid([M, N, K], np.log(t / rates.base_s(fl, nb))), kernels.get(dt, ""), floor_s=float(t.min()))

    return Lazy(sorted(set(c["dtype"].tolist())), make)


def fit_attention_table(table: dict, phase: str) -> AttentionTable:
    c = _cols(table)
    L = c["S"] if phase == "context" else c["N"]
    t = c["latency_us"] * 1e-6
    kvb = np.array([KV_BYTES.get(k, 2.0) for k in c["kv_dtype"]])
    f = context_flops_bytes if phase == "context" else generation_flops_bytes
    fl, nb = f(c["B"], L, c["H"], c["KVH"], c["D"], kvb)
    rates = envelope(fl, nb, t)
    ratio = np.log(t / rates.base_s(fl, nb))
    kv_names, kv_idx = np.unique(c["kv_dtype"], return_inverse=True)
    keys = np.stack([c["H"], c["KVH"], c["D"], kv_idx.astype(float)], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(len(uniq) + 1))
    rows, measured = {}, {}
    for i, (h, k, d, kv) in enumerate(uniq.tolist()):
        sel = order[bounds[i]:bounds[i + 1]]
        key = (int(h), int(k), int(d), str(kv_names[int(kv)]))
        rows[key] = (c["B"][sel], L[sel], ratio[sel])
        measured[key] = (c["B"][sel], L[sel], t[sel], fl[sel], nb[sel])
    return AttentionTable(phase, LazyGrids(rows), rates, table.get("kernels", {}).get("attention", ""), measured=measured)


def fit_comm(tables: dict) -> CommTable | None:
    curves = {}
    for source, name in (("custom", "custom_allreduce"), ("nccl", "nccl")):
        if name not in tables:
            continue
        c = _cols(tables[name])
        for op in sorted(set(c["op"].tolist())):
            for g in sorted(set(c["gpus"][c["op"] == op].astype(int).tolist())):
                m = (c["op"] == op) & (c["gpus"] == g)
                curves[(source, op, g)] = _mean_curve(np.log(c["bytes"][m]), np.log(c["latency_us"][m] * 1e-6))
    return CommTable(curves) if curves else None


def _mean_curve(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct x, mean y at each)."""
    ux, inv = np.unique(x, return_inverse=True)
    return ux, np.bincount(inv, weights=y, minlength=ux.size) / np.bincount(inv, minlength=ux.size)


def fit_moe(table: dict) -> MoeTable:
    c = _cols(table)
    dt_names, dt_idx = np.unique(c["dtype"], return_inverse=True)
    shape = ("d", "I", "k", "E", "tp", "ep")
    keys = np.stack([dt_idx.astype(float), *(c[k] for k in shape)], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(len(uniq) + 1))
    x, y = np.log(c["T"]), np.log(c["latency_us"] * 1e-6)
    curves = {}
    for i, row in enumerate(uniq.tolist()):
        sel = order[bounds[i]:bounds[i + 1]]
        ux, uy = _mean_curve(x[sel], y[sel])
        if ux.size >= 2:
            curves[(str(dt_names[int(row[0])]), *(int(v) for v in row[1:]))] = (ux, uy)
    by_layout = {(x["dtype"], *(int(v) for v in r)): x["kernel"] for x in table.get("layout_kernels") or () for r in x["layouts"]}
    return MoeTable(curves, dict(table.get("kernels") or {}), by_layout)


def fit_tables(cal) -> TableModels:
    """The tables' models of ``cal``, each family (and each GEMM dtype) fitted when first read."""
    t = cal.tables
    return TableModels(
        gemm=fit_gemm_tables(t["gemm"]),
        context=(lambda: fit_attention_table(t["context_attention"], "context")) if "context_attention" in t else None,
        generation=(lambda: fit_attention_table(t["generation_attention"], "generation")) if "generation_attention" in t else None,
        comm=lambda: fit_comm(t),
        moe=(lambda: fit_moe(t["moe"])) if "moe" in t else None,
        provenance={k: v["provenance"] for k, v in t.items()},
        engine=cal.engine,
        mla=lambda: _fit_mla(t),
        fp8_quant=(lambda: Fp8QuantTables(fit_quant_table(t["fp8_scale"]), fit_quant_table(t["fp8_quantize"])))
        if "fp8_scale" in t and "fp8_quantize" in t else None,
    )


def _fit_mla(tables: dict):
    from .mla import fit_mla

    return fit_mla(tables)


# ------------------------------------------------------------------------------------------------
# accuracy
# ------------------------------------------------------------------------------------------------

#: op family -> (median, p90) |error| targets of the leave-shape-out check
TARGETS = {"gemm bf16": (0.05, 0.15), "gemm fp8": (0.07, 0.20), "gemm fp8_block": (0.07, 0.20), "context attention": (0.08, 0.20),
           "generation attention": (0.08, 0.20), "all-reduce": (0.10, 0.25)}


def _stats(errs: np.ndarray) -> dict:
    errs = np.asarray(errs, dtype=float)
    errs = errs[np.isfinite(errs)]
    if errs.size == 0:
        return {"n": 0, "median_abs_error": float("nan"), "p90_abs_error": float("nan"), "signed_median_error": float("nan")}
    a = np.abs(errs)
    return {"n": int(errs.size), "median_abs_error": float(np.median(a)), "p90_abs_error": float(np.percentile(a, 90)),
            "signed_median_error": float(np.median(errs))}


def leave_shape_out(tm: TableModels) -> dict:
    """op family -> relative errors of every measured point predicted with its grid slice left out:
    GEMMs by N and by K (the weight shape), attention by B and by length, collectives by size."""
    out = {}
    for dt, g in tm.gemm.items():
        out[f"gemm {dt}"] = np.concatenate([g.grid.leave_slice_out(1), g.grid.leave_slice_out(2)])
    for name, at in (("context attention", tm.context), ("generation attention", tm.generation)):
        if at is not None:
            out[name] = at.leave_slices_out()
    if tm.comm is not None:
        errs = [tm.comm.leave_size_out(s, o, g) for (s, o, g) in tm.comm.curves if o == "all_reduce"]
        if errs:
            out["all-reduce"] = np.concatenate(errs)
    if tm.moe is not None and tm.moe.curves:
        out["moe experts"] = tm.moe.leave_tokens_out()
    if tm.mla is not None:
        out.update(tm.mla.leave_shape_out())
    return out


def _table_points(cal, name: str) -> dict:
    return _cols(cal.tables[name]) if name in cal.tables else {}


def cross_errors(fit: TableModels, check_cal) -> dict:
    """op family -> errors of ``fit``'s tables against another calibration's measurements."""
    out = {}
    c = _table_points(check_cal, "gemm")
    for dt, g in fit.gemm.items():
        if c:
            m = c["dtype"] == dt
            if m.any():
                out[f"gemm {dt}"] = g.time_s(c["M"][m], c["N"][m], c["K"][m]) / (c["latency_us"][m] * 1e-6) - 1.0
    for name, at, L in (("context attention", fit.context, "S"), ("generation attention", fit.generation, "N")):
        c = _table_points(check_cal, name.replace(" ", "_"))
        if at is None or not c:
            continue
        errs = []
        for key in {(int(h), int(k), int(d), str(kv)) for h, k, d, kv in zip(c["H"], c["KVH"], c["D"], c["kv_dtype"])}:
            if key not in at.grids:
                continue
            m = (c["H"] == key[0]) & (c["KVH"] == key[1]) & (c["D"] == key[2]) & (c["kv_dtype"] == key[3])
            t, _ = at.time_s(c["B"][m], c[L][m], *key)
            errs.append(t / (c["latency_us"][m] * 1e-6) - 1.0)
        if errs:
            out[name] = np.concatenate(errs)
    if fit.mla is not None:
        out.update(fit.mla.cross_errors(check_cal.tables))
    return out


def _shipped() -> list:
    """(gpu, engine, path) of every imported calibration shipped in hardware_specs/measured/."""
    from . import imported_calibrations

    return imported_calibrations()


def validation_report(target: str | None = None) -> dict:
    """Leave-shape-out, cross-framework and leave-one-GPU-out transfer errors of the shipped
    imported calibrations (``target``: a GPU id or "gpu.engine"; None: all)."""
    from rooflinecli.errors import RooflineError

    from .calibration import load_calibration
    from .mla import TARGETS as MLA_TARGETS

    entries = _shipped()
    if target is not None:
        chosen = [e for e in entries if target in (e[0], f"{e[0]}.{e[1]}")]
        if not chosen:
            known = sorted({e[0] for e in entries} | {f"{e[0]}.{e[1]}" for e in entries})
            raise RooflineError(f"--calibration: no imported calibration '{target}'; known: all, {', '.join(known)}")
    else:
        chosen = entries
    paths = {(g, e): str(p) for g, e, p in entries}

    class _Lazy(dict):  # (gpu, engine) -> fitted tables / calibration, loaded when first asked for
        def __init__(self, make):
            super().__init__()
            self.make = make

        def __missing__(self, key):
            self[key] = v = self.make(key)
            return v

    cals = _Lazy(lambda k: load_calibration(paths[k]))
    fitted = _Lazy(lambda k: fit_tables(cals[k]))
    lso, cross, transfer = [], [], []
    for g, e, _ in chosen:
        for fam, errs in leave_shape_out(fitted[(g, e)]).items():
            s = _stats(errs)
            tgt = TARGETS.get(fam) or MLA_TARGETS.get(fam)
            lso.append({"gpu": g, "engine": e, "family": fam, **s, "target": f"{tgt[0]:.0%} / {tgt[1]:.0%}" if tgt else "-",
                        "meets_target": None if tgt is None else bool(s["median_abs_error"] <= tgt[0] and s["p90_abs_error"] <= tgt[1])})
        for g2, e2, _ in entries:
            if g2 == g and e2 != e:
                for fam, errs in cross_errors(fitted[(g, e)], cals[(g2, e2)]).items():
                    cross.append({"gpu": g, "fit": e, "check": e2, "family": fam, **_stats(errs)})
        donor = nearest_gpu(g, [x for x, y, _ in entries if y == e and x != g])
        if donor is not None:
            for fam, errs in transfer_errors(fitted[(donor, e)], donor, g, cals[(g, e)]).items():
                transfer.append({"gpu": g, "engine": e, "from": donor, "family": fam, **_stats(errs)})
    return {"leave_shape_out": lso, "cross_framework": cross, "transfer": transfer}


# ------------------------------------------------------------------------------------------------
# transfer to a GPU without data
# ------------------------------------------------------------------------------------------------


def transferred(tm: TableModels, donor: str, gpu) -> TableModels:
    """``tm`` (measured on ``donor``) carried to ``gpu`` (an id, a spec, or its ``ceilings_of``):
    each table's roofline base rescaled by the two GPUs' datasheet ceilings, each time carried by
    its efficiency (``carried``: a latency-bound call moves little, an efficient one with the
    roofline). Collectives are kept as measured (the link is not scaled), and so is the fp8
    activation quantization the GEMM rows' times hold (``fp8_quant``: a few microseconds a call,
    latency-bound: 6.9 us on H200 and 8.5 us on B200 to scale 1 x 1,024)."""
    from dataclasses import replace

    (pd, bd), (pg, bg) = ceilings_of(donor), (gpu if isinstance(gpu, tuple) else ceilings_of(gpu))

    def scale(r: Rates) -> Rates:
        return r.scaled(pg / pd, bg / bd)

    def carried_to(at):
        return (lambda: replace(at(), target=scale(at().rates)) if at() else None)

    return TableModels(
        gemm=Lazy(tm.gemm.keys(), lambda dt: replace(tm.gemm[dt], target=scale(tm.gemm[dt].rates))),
        context=carried_to(lambda: tm.context),
        generation=carried_to(lambda: tm.generation),
        comm=lambda: tm.comm,
        moe=lambda: tm.moe,
        mla=lambda: tm.mla.transferred(scale) if tm.mla is not None else None,
        fp8_quant=lambda: tm.fp8_quant,
        provenance=tm.provenance,
        engine=f"{tm.engine}, transferred from {donor}",
        transferred_from=donor,
    )


def transfer_errors(tm: TableModels, donor: str, gpu: str, check_cal) -> dict:
    return cross_errors(transferred(tm, donor, gpu), check_cal)
