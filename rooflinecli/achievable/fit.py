"""Fitted time models of vendor kernels, one per op kind, from a ``Calibration``.

Every model has the same explainable form: time = fixed cost + work / achieved rate(size).

- **GEMM** (cuBLAS): ``t0 + smooth_max(bytes / BW, flops / peak)`` (``SMOOTH_MAX_P``), fitted over
  every GEMM row; then, for an (N, K) the calibration measured, the measured/fitted ratio
  interpolated in log M (flat beyond the measured M range). Unseen (N, K) get the mean ratio of
  the ``NEAREST_FAMILIES`` measured shapes nearest in weight size.
- **SDPA prefill** (causal): ``t0 + flops / P + c * S * D``: the last term is the critical path
  of the longest query tile (it scans all S keys), which is why short sequences reach a small
  fraction of the peak.
- **Absorbed MLA decode** (torch ops, ``mla_decode_matmul``): ``t0 + a * bytes + b * FLOPs``:
  memory-bound at few heads, compute-bound at many (used only when the calibration has the rows).
- **Decode attention**, **elementwise ops** (rmsnorm, add, SiLU*mul, copy): ``t0 + bytes / BW``,
  with the measured/fitted ratio of the row's family (RMSNorm and add by width, SiLU*mul by F,
  decode attention by heads and head dim: ``FAMILY_FIELDS``) interpolated in log bytes (the
  bandwidth reached at that size and shape; rows within 5% of one size merged). Decode attention
  also reads the ratio by batch (``LinearModel.by_batch``): per measured batch a curve in log
  bytes per sequence, interpolated in log B, carried past its largest size by the by-bytes curve
  and fading into it, so the time grows with the context at every batch.
- **Graph floor**: the time of one tiny kernel inside a CUDA graph (``launch_floor``).
- **Graph switch**: what a kernel costs in a graph on top of its calibrated time when the kernel
  before it is a different one (``graph_switch_costs_s``): every other row times one op repeated,
  so its ``t_graph`` already holds that op's repeat floor, and only the difference between the
  interleaved and the grouped times of the mixed-kernel rows is added (0 without those rows).
- **Eager launch cost**: the median eager (host-bound) time of the tiny elementwise launches.
- **Fastest HBM stream**: the highest bytes / time of the memory-bound rows of at least
  ``STREAM_MIN_BYTES`` that does not exceed the datasheet (``ceilings.fastest_stream``): what the
  measured roof (``ceilings.measured_roof_spec``) uses for HBM, since reads (decode attention)
  outrun the copy that the spec's bandwidth measures.
- **Streamed GEMMs**: a ``gemm_stream`` row (one pass of decode-sized GEMMs over 32 layers of
  distinct weights) over what the GEMM model predicts for its GEMMs, per M
  (``gemm_stream_ratio``); graph-captured phases scale their GEMMs by it.

Everything evaluates on numpy arrays (a million-point sweep is one pass per model).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rooflinecli import formulas

from .calibration import Calibration, Row

#: ops timed by bytes (t0 + bytes / BW)
BYTES_OPS = ("rmsnorm_copy", "rmsnorm", "rope", "add_", "silu_mul", "copy", "sdpa_decode", "matmul_decode_attention",
             "rope_qkv_strided", "silu_mul_strided", "kv_write")
PREFILL_OPS = ("sdpa_prefill_causal", "sdpa_prefill_causal_expanded")
#: ops timed by bytes and FLOPs together (t0 + a * bytes + b * FLOPs), with the rows they need
BYTES_FLOPS_OPS = {"mla_decode_matmul": 3, "moe_grouped": 4}
#: rows that time launches of distinct tiny kernels (interleaved and grouped), not an op
MIXED_OPS = ("launch_floor_mixed", "launch_floor_mixed_gemm")
#: rows kept out of the host-cost medians: the floor rows are not ops an engine calls
FLOOR_OPS = ("launch_floor", *MIXED_OPS)


def _interp_log(x, xs: np.ndarray, ys: np.ndarray):
    """ys interpolated at log(x) over the sorted log-abscissae xs, flat beyond the ends."""
    if xs.size == 0:
        return 0.0
    if xs.size == 1:
        return float(ys[0])
    return np.interp(np.log(x), xs, ys)


#: abscissae of one family closer than this (log scale: 5%) are one point of its ratio curve, at
#: their mean: decode-attention rows of near-equal bytes but other batch x context splits
#: (67.1, 67.2, 67.6 MB: 23.1, 22.5, 20.0 us on the H200) otherwise make the curve jump 13%
#: between neighbours; GEMM M values and elementwise sizes are a factor of 2 or more apart
MERGE_LOG_X = float(np.log(1.05))


def _merge_close(xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (x, mean y) with runs of x within ``MERGE_LOG_X`` of the run's first x merged (mean x)."""
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    gx, gy, start = [], [], 0
    for i in range(1, len(xs) + 1):
        if i == len(xs) or xs[i] - xs[start] > MERGE_LOG_X:
            gx.append(float(xs[start:i].mean()))
            gy.append(float(ys[start:i].mean()))
            start = i
    return np.array(gx), np.array(gy)


def _residual_table(keys, log_x: np.ndarray, log_ratio: np.ndarray) -> dict:
    """key -> (sorted log x, mean log ratio at each; abscissae within 5% merged)."""
    out = {}
    keys = list(keys)
    for key in set(keys):
        idx = [i for i, k in enumerate(keys) if k == key]
        out[key] = _merge_close(np.asarray(log_x[idx], dtype=float), np.asarray(log_ratio[idx], dtype=float))
    return out


def _nnls_relative(features: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Non-negative coefficients c minimizing sum((features @ c) / t - 1)^2 (relative error);
    a feature whose coefficient comes out negative is dropped and the rest refitted."""
    a = features / t[:, None]
    b = np.ones_like(t)
    active = list(range(features.shape[1]))
    while active:
        c, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        if (c >= 0).all():
            out = np.zeros(features.shape[1])
            out[active] = c
            return out
        active.pop(int(np.argmin(c)))
    return np.zeros(features.shape[1])


# ------------------------------------------------------------------------------------------------
# GEMM
# ------------------------------------------------------------------------------------------------

#: exponent of the smooth max of memory and compute time: (m^p + c^p)^(1/p). A hard max (p = inf)
#: or wave quantization of fixed 128 x 256 tiles over the SMs both fit the H200 data worse
#: (leave-one-out p90 8.7% and 10.3% against 7.9%): cuBLAS picks its tile per shape.
SMOOTH_MAX_P = 4.0


def smooth_max(a, b, p: float = SMOOTH_MAX_P):
    if p == 4.0:  # the fitted form's own p, in multiplies and square roots (pow is ~10x slower)
        a2, b2 = a * a, b * b
        return np.sqrt(np.sqrt(a2 * a2 + b2 * b2))
    return (a**p + b**p) ** (1.0 / p)


#: measured (N, K) whose ratio curves an unseen GEMM shape borrows: chosen by leaving each
#: measured (N, K) of an H200 op grid (``tests/model/test_achievable.py``'s fixture: 155 GEMMs over 9
#: shapes) out in turn and predicting its M sweep: the 3 nearest in weight size give median |error| 4.1%, p90 10.4%; 1, 2
#: or 4 nearest: 6.3 / 4.9 / 4.6% median; the mean over every shape: 5.2%, p90 10.4%
NEAREST_FAMILIES = 3


@dataclass
class GemmModel:
    t0_s: float
    bytes_per_s: float
    flops_per_s: float
    #: (N, K) -> (log M, log measured/fitted)
    families: dict = field(default_factory=dict)
    #: (log M, mean over all the measured (N, K) of log measured/fitted)
    generic: tuple = (np.zeros(0), np.zeros(0))
    _near: dict = field(default_factory=dict, repr=False, compare=False)

    def base_s(self, flops, nbytes):
        """The fitted form: t0 + smoothmax(bytes / BW, flops / peak)."""
        return self.t0_s + smooth_max(np.asarray(nbytes, dtype=float) / self.bytes_per_s, np.asarray(flops, dtype=float) / self.flops_per_s)

    def nearest_curve(self, N: int, K: int) -> tuple:
        """The correction an unseen (N, K) gets: the mean ratio curve of the ``NEAREST_FAMILIES``
        measured shapes closest in weight size (log N*K). How cuBLAS's efficiency moves with M
        depends on the shape's size: small projections get faster from M = 32 to 64 on the H200,
        big ones slower; the mean over every shape carried the small ones' dip to the lm_head."""
        key = (N, K)
        if key not in self._near:
            size = np.log(float(N) * float(K))
            near = sorted(self.families, key=lambda nk: (abs(np.log(float(nk[0]) * float(nk[1])) - size), nk))[:NEAREST_FAMILIES]
            self._near[key] = _mean_curve({k: self.families[k] for k in near}) if near else self.generic
        return self._near[key]

    def time_s(self, M, N, K, flops, nbytes):
        """(time, fixed part) of an M x K by K x N GEMM of ``flops`` moving ``nbytes``."""
        t = self.base_s(flops, nbytes)
        fam = self.families.get((int(N), int(K)))
        if fam is None:
            fam = self.nearest_curve(int(N), int(K))
        return t * np.exp(_interp_log(M, *fam)), self.t0_s


def _best_t0(g: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The t0 >= 0 minimizing sum(((t0 + g) / t - 1)^2) for each row of g (closed form)."""
    w = 1.0 / t**2
    return np.maximum(((t - g) * w).sum(axis=-1) / w.sum(), 0.0)


def _gemm_base_fit(flops, nbytes, t):
    """(t0, BW, peak) minimizing the relative error of the fitted form: a grid over (peak, BW),
    refined twice, with the best t0 in closed form at each point."""
    peaks, bws = np.linspace(300e12, 1200e12, 19), np.linspace(1500e9, 6000e9, 19)
    for _ in range(3):
        g = smooth_max(nbytes / bws[None, :, None], flops / peaks[:, None, None])
        t0 = _best_t0(g, t)
        err = (((t0[..., None] + g) / t - 1.0) ** 2).sum(axis=-1)
        i, j = np.unravel_index(int(np.argmin(err)), err.shape)
        best = (float(t0[i, j]), float(bws[j]), float(peaks[i]))
        dp, db = peaks[1] - peaks[0], bws[1] - bws[0]
        peaks, bws = np.linspace(peaks[i] - dp, peaks[i] + dp, 9), np.linspace(bws[j] - db, bws[j] + db, 9)
    return best


def _gemm_arrays(rows: list[Row]):
    M, N, K = (np.array([r.shape[k] for r in rows], dtype=float) for k in ("M", "N", "K"))
    return M, N, K, 2.0 * M * N * K, np.array([r.bytes for r in rows], dtype=float), np.array([r.t_graph_s for r in rows], dtype=float)


def fit_gemm(rows: list[Row]) -> GemmModel:
    M, N, K, fl, nb, t = _gemm_arrays(rows)
    model = GemmModel(*_gemm_base_fit(fl, nb, t))
    model.families = _residual_table(zip(N.astype(int), K.astype(int)), np.log(M), np.log(t / model.base_s(fl, nb)))
    model.generic = _mean_curve(model.families)
    return model


def _mean_curve(families: dict) -> tuple:
    """The mean of the families' residual curves on the union of their abscissae."""
    grid = np.unique(np.concatenate([xs for xs, _ in families.values()]))
    return grid, np.mean([np.interp(grid, xs, ys) for xs, ys in families.values()], axis=0)


# ------------------------------------------------------------------------------------------------
# Linear forms: t0 + sum(c_i * feature_i)
# ------------------------------------------------------------------------------------------------


def bytes_features(nbytes):
    """Elementwise ops and decode attention: [1, bytes]."""
    return [np.ones_like(nbytes), nbytes]


def bytes_flops_features(nbytes, flops):
    """Absorbed MLA decode: [1, bytes, FLOPs]."""
    return [np.ones_like(nbytes), nbytes, flops]


def prefill_features(flops, qo_elements):
    """SDPA prefill: [1, FLOPs, B*H*S*D]. The last is the query/output traffic, which the
    kernel does not hide under its matmuls (it costs about 4 bytes per element at HBM speed)."""
    return [np.ones_like(flops), flops, qo_elements]


#: the shape fields that name a family of a bytes op's rows (its size varies within a family):
#: RMSNorm's time depends on the row width D, not only on the bytes (one row of 8192 takes 7.0 us
#: on the H200, one of 4096 4.2 us: the same fitted line cannot hold both); decode attention on
#: its heads and head dim
FAMILY_FIELDS = {"rmsnorm": ("D",), "rmsnorm_copy": ("D",), "add_": ("D",), "silu_mul": ("F",), "rope": ("H", "D"),
                 "sdpa_decode": ("H", "KVH", "D"), "matmul_decode_attention": ("H", "KVH", "D"), "copy": (),
                 "rope_qkv_strided": ("H", "KVH", "D"), "silu_mul_strided": ("F",), "kv_write": ("H", "KVH", "D"),
                 "moe_grouped": ("E", "k", "d", "I")}


def family_key(op: str, shape: dict) -> tuple | None:
    """The family of a calibration row of ``op`` (None: the op has no families)."""
    fields = FAMILY_FIELDS.get(op)
    return None if fields is None else tuple(int(shape[f]) for f in fields)


@dataclass
class LinearModel:
    """time = (coef[0] + sum(coef[i] * feature_i)) x the measured/fitted ratio of the row's family
    interpolated in log bytes (flat beyond the measured sizes); a family the calibration did not
    measure gets the mean ratio of the measured ones (as for GEMM shapes)."""

    op: str
    coef: np.ndarray
    #: family key -> (log bytes, log measured/fitted)
    families: dict = field(default_factory=dict)
    generic: tuple = (np.zeros(0), np.zeros(0))
    #: decode attention (``BATCHED_OPS``): family key -> (sorted log B, [(log bytes per sequence,
    #: log measured/fitted)] per B): the ratio at the query's batch and per-sequence size
    by_batch: dict = field(default_factory=dict)

    def time_s(self, features: list, key: tuple | None = None, batch=None):
        """Seconds (and the fixed part) at ``features``; a decode-attention model given the
        ``batch`` reads its family's ratio at that batch (interpolated in log B between the measured
        batches) and the bytes per sequence, not at the bytes alone, wherever the calibration
        measured around that point: rows of one size but different batches differ (H200: 67 MB
        took 23.1 us at B1 x 16k, 20.0 at B32 x 512). Outside them, the ratio by bytes."""
        t = self.coef[0] + sum(c * f for c, f in zip(self.coef[1:], features[1:]))
        if not self.families:
            return t, self.coef[0]
        ratio = np.exp(_interp_log(features[1], *self.families.get(key, self.generic)))
        if batch is not None and key in self.by_batch:  # inside the measured batches and sizes only
            by_b, w = _batch_ratio(features[1], batch, *self.by_batch[key], self.families.get(key, self.generic))
            ratio = np.exp(w * by_b + (1.0 - w) * np.log(ratio))
        return t * ratio, self.coef[0] * ratio  # the fixed part scaled alike (time >= fixed)

    @property
    def fixed_s(self) -> float:
        return float(self.coef[0])


def _features_of(op: str, rows: list[Row]) -> list:
    if op in BYTES_FLOPS_OPS:
        return bytes_flops_features(np.array([r.bytes for r in rows], dtype=float), np.array([r.flops for r in rows], dtype=float))
    if op in PREFILL_OPS:
        fl = np.array([r.flops for r in rows], dtype=float)
        qo = np.array([r.shape["B"] * r.shape["H"] * r.shape["S"] * r.shape["D"] for r in rows], dtype=float)
        return prefill_features(fl, qo)
    return bytes_features(np.array([r.bytes for r in rows], dtype=float))


#: ops whose fitted time is min(t_graph, t_eager) (``fit_target_s``): the memory-bound ones
EAGER_CHECKED_OPS = BYTES_OPS
#: memory-bound ops whose bytes formula is the traffic of one pass over HBM (the strided variants
#: are left out: their reads of part of a row may move more than they count)
STREAM_OPS = ("copy", "add_", "silu_mul", "rmsnorm", "sdpa_decode", "matmul_decode_attention", "kv_write")
#: rows smaller than this could be served partly from L2 (the largest GPU here has 126 MB)
STREAM_MIN_BYTES = 512e6


def fit_target_s(r: Row) -> float:
    """The GPU seconds a row's model is fitted to: ``t_graph``, except for a memory-bound op
    (``EAGER_CHECKED_OPS``) whose eager time is lower. CUDA events around an eager launch can only
    add host gaps to the kernel's time, never remove any, and a memory-bound kernel barely moves
    with the SM clock (the burst/sustained gap that makes eager GEMMs faster), so an eager time
    under the graph time says the graph figure is off. On H200 that is a 1 GiB copy (graph
    774.6 us, eager 506.2, 2 s back to back 505.1: a graph memcpy node of 1 GiB
    runs at half bandwidth, pytorch/pytorch#191284), the RMSNorm rows whose copy_ is 512 MiB or
    more (1.2x), and 16 GQA decode-attention rows of 1.07 and 2.15 GB, 1.11-1.14x their eager
    times while the MHA rows of the same bytes agree within 1% (and the whole-model decode graphs
    ran those shapes at the eager rate)."""
    if r.op in EAGER_CHECKED_OPS and r.t_eager_s:
        return min(r.t_graph_s, r.t_eager_s)
    return r.t_graph_s


def _batch_ratio(nbytes, batch, log_b: np.ndarray, curves: list, by_bytes: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(log ratio, weight) at (batch, nbytes). Each measured batch's curve is read at the bytes per
    sequence, log(nbytes / batch) (flat below its smallest size, capped at its largest), and the two
    measured batches around the query are interpolated linearly in log B. Past the largest size
    the by-bytes curve ``by_bytes`` carries it on: plus by_bytes(query) - by_bytes(at the cap), so
    the ratio is continuous there, and it fades into the by-bytes ratio over a factor of 4 in size
    (at large sizes bytes, not the batch split, set the time: the H200's B1 x 128k decode ran at
    the bandwidth of B8-B32 rows of the same bytes). ``weight``: 1 within the measured batches (5%
    slack), fading to 0 over a factor of 2 (``BATCH_FADE_OUT_LOG_B``) beyond them, where the caller
    takes the by-bytes ratio (a grid cut short by its budget measures few batches); a hard switch
    would make batch 135 faster than 134 on the H200 fit. Broadcasts over arrays of both."""
    b = np.maximum(np.asarray(batch, dtype=float), 1.0)
    nb, b = np.broadcast_arrays(np.asarray(nbytes, dtype=float), b)
    lx, lb = np.log(np.maximum(nb, 1.0) / b).ravel(), np.log(b).ravel()
    hi_x = np.array([xs[-1] for xs, _ in curves])
    if len(log_b) == 1:
        lo = hi = np.zeros(lx.size, dtype=int)
        w = np.zeros(lx.size)
    else:
        hi = np.clip(np.searchsorted(log_b, lb), 1, len(log_b) - 1)
        lo = hi - 1
        w = np.clip((lb - log_b[lo]) / (log_b[hi] - log_b[lo]), 0.0, 1.0)
    cap = np.minimum(lx, np.minimum(hi_x[lo], hi_x[hi]))
    vals = np.stack([np.interp(cap, xs, ys) for xs, ys in curves])  # (measured B, points)
    cols = np.arange(lx.size)
    r = vals[lo, cols] * (1.0 - w) + vals[hi, cols] * w
    bx, by = by_bytes
    if bx.size:  # past the cap: carried on by the by-bytes curve, becoming it over BATCH_FADE_LOG_X
        at = np.interp(lb + lx, bx, by)
        carried = r + at - np.interp(lb + cap, bx, by)
        fade = np.clip((lx - cap) / BATCH_FADE_LOG_X, 0.0, 1.0)
        r = carried * (1.0 - fade) + at * fade
    outside = np.maximum(np.maximum(log_b[0] - MERGE_LOG_X - lb, lb - log_b[-1] - MERGE_LOG_X), 0.0)
    weight = np.clip(1.0 - outside / BATCH_FADE_OUT_LOG_B, 0.0, 1.0)
    return r.reshape(nb.shape), weight.reshape(nb.shape)


#: beyond the measured batches, the by-batch ratio fades into the by-bytes one over this (log: 2x)
BATCH_FADE_OUT_LOG_B = float(np.log(2.0))
#: past a batch curve's largest size, its ratio becomes the by-bytes one over this (log: 4x)
BATCH_FADE_LOG_X = float(np.log(4.0))

#: ops whose family ratio also depends on the batch (``LinearModel.by_batch``): decode attention
BATCHED_OPS = ("sdpa_decode", "matmul_decode_attention")


def _by_batch_table(op: str, rows: list[Row], log_ratio: np.ndarray) -> dict:
    """family key -> (sorted log B, [(sorted unique log bytes per sequence, mean log ratio)] per B)."""
    out: dict = {}
    for key in {family_key(op, r.shape) for r in rows}:
        idx = [i for i, r in enumerate(rows) if family_key(op, r.shape) == key]
        batches = sorted({int(rows[i].shape["B"]) for i in idx})
        curves = []
        for B in batches:
            j = [i for i in idx if int(rows[i].shape["B"]) == B]
            curves.append(_residual_table([0] * len(j), np.log(np.array([rows[i].bytes / B for i in j], dtype=float)), log_ratio[j])[0])
        out[key] = (np.log(np.array(batches, dtype=float)), curves)
    return out


def fit_linear(op: str, rows: list[Row]) -> LinearModel:
    t = np.array([fit_target_s(r) for r in rows], dtype=float)
    feats = _features_of(op, rows)
    model = LinearModel(op, _nnls_relative(np.stack(feats, axis=1), t))
    if op in FAMILY_FIELDS:
        base, _ = model.time_s(feats)
        log_ratio = np.log(t / base)
        model.families = _residual_table([family_key(op, r.shape) for r in rows], np.log(feats[1]), log_ratio)
        model.generic = _mean_curve(model.families)
        if op in BATCHED_OPS:
            model.by_batch = _by_batch_table(op, rows, log_ratio)
    return model


# ------------------------------------------------------------------------------------------------
# All of it
# ------------------------------------------------------------------------------------------------


@dataclass
class FittedModels:
    gemm: GemmModel
    linear: dict  # op -> LinearModel
    graph_floor_s: float
    eager_launch_s: float
    sustained_gemm_flops_per_s: float | None
    #: op -> host seconds of one eager call of it (``eager_call_costs_s``)
    eager_call_s: dict = field(default_factory=dict)
    #: seconds a kernel in a graph pays beyond its calibrated (repeated) time when it follows a
    #: different kernel: elementwise / attention kernels, and cuBLAS GEMMs (``graph_switch_costs_s``)
    graph_switch_s: float = 0.0
    graph_switch_gemm_s: float = 0.0
    #: compute dtype -> how much faster than the bf16 GEMM fit its GEMMs compute (``fit_gemm_speedup``
    #: on that dtype's rows, e.g. ``gemm_fp8``); absent: the spec's peak ratio stands in
    gemm_speedup: dict = field(default_factory=dict)
    #: (log M, log ratio): a ``gemm_stream`` pass over its single-GEMM predictions (``gemm_stream_table``);
    #: empty without those rows (ratio 1)
    gemm_stream: tuple = (np.zeros(0), np.zeros(0))
    #: the calibration's HBM streams (``stream_rates``: bytes/s and the row, fastest first); empty
    #: without memory-bound rows of at least ``STREAM_MIN_BYTES``
    streams: tuple = ()
    #: imported calibrations: the measured tables' models (``tables.TableModels``), else None
    tables: object = None

    @property
    def collectives(self):
        """The measured collective tables (``tables.CommTable``: all-reduce, all-to-all per GPU
        count and message size) of an imported calibration, or None."""
        return None if self.tables is None else self.tables.comm

    def gemm_stream_ratio(self, M):
        """How much slower (> 1) or faster GEMMs of M tokens run streamed through distinct weights,
        as a graph-captured decode step runs them, than the single-GEMM rows say: the measured
        ratio interpolated in log M, flat beyond the measured M; 1 without ``gemm_stream`` rows."""
        xs, ys = self.gemm_stream
        if xs.size == 0:
            return 1.0
        return np.exp(_interp_log(np.maximum(np.asarray(M, dtype=float), 1.0), xs, ys))

    def host_call_s(self, op: str | None, calls: float, kernels: float) -> float:
        """Host seconds of ``calls`` eager calls of ``op`` (its calibrated cost per call); an op
        without host-bound eager rows: ``kernels`` x the tiny-launch cost."""
        if op in self.eager_call_s:
            return calls * self.eager_call_s[op]
        return kernels * self.eager_launch_s

    def row_time_s(self, row: Row) -> float:
        """The model's time for a calibration row (what leave-one-out compares)."""
        s = row.shape
        if row.op == "gemm":
            t, _ = self.gemm.time_s(s["M"], s["N"], s["K"], 2.0 * s["M"] * s["N"] * s["K"], row.bytes)
        elif row.op in GEMM_DTYPE_OPS and GEMM_DTYPE_OPS[row.op] in self.gemm_speedup:
            flops = 2.0 * s["M"] * s["N"] * s["K"] / self.gemm_speedup[GEMM_DTYPE_OPS[row.op]]
            t, _ = self.gemm.time_s(s["M"], s["N"], s["K"], flops, row.bytes)
        elif row.op == "launch_floor":
            return self.graph_floor_s
        elif row.op in MIXED_OPS:  # the repeat floor of the same kernels plus one switch each
            return (row.t_blocked_s or self.graph_floor_s) + (self.graph_switch_gemm_s if row.op == "launch_floor_mixed_gemm" else self.graph_switch_s)
        else:
            t, _ = self.linear[row.op].time_s([f[0] for f in _features_of(row.op, [row])], family_key(row.op, row.shape),
                                              batch=s["B"] if row.op in BATCHED_OPS else None)
        return float(np.maximum(t, self.graph_floor_s))

    def to_dict(self) -> dict:
        """The fitted parameters, JSON-ready (for `--json` and the docs)."""
        g = self.gemm
        return {
            "gemm": {"fixed_s": float(g.t0_s), "bandwidth_gb_per_s": float(g.bytes_per_s / 1e9), "peak_tflops": float(g.flops_per_s / 1e12),
                     "shapes_nk": sorted(f"{n}x{k}" for n, k in g.families)},
            **{op: {"fixed_s": m.fixed_s, "coef": [float(c) for c in m.coef]} for op, m in self.linear.items()},
            "graph_floor_s": float(self.graph_floor_s),
            "gemm_speedup": {dt: float(v) for dt, v in self.gemm_speedup.items()},
            "gemm_stream_ratio": {str(int(round(float(np.exp(x))))): float(np.exp(y)) for x, y in zip(*self.gemm_stream)},
            "eager_launch_s": float(self.eager_launch_s),
            "eager_call_s": {op: float(v) for op, v in sorted(self.eager_call_s.items())},
            "graph_switch_s": float(self.graph_switch_s),
            "graph_switch_gemm_s": float(self.graph_switch_gemm_s),
            "sustained_gemm_tflops": None if self.sustained_gemm_flops_per_s is None else self.sustained_gemm_flops_per_s / 1e12,
            "fastest_stream_gb_per_s": self.streams[0][0] / 1e9 if self.streams else None,
            "fastest_stream_row": self.streams[0][1] if self.streams else None,
        }


def stream_rates(rows: list[Row]) -> list[tuple[float, str]]:
    """(bytes/s, which row) of every HBM stream among the memory-bound rows (``STREAM_OPS``) of at
    least ``STREAM_MIN_BYTES``, each at its fitted time (``fit_target_s``), fastest first."""
    out = []
    for r in rows:
        if r.op not in STREAM_OPS or not r.bytes or r.bytes < STREAM_MIN_BYTES:
            continue
        bw = r.bytes / fit_target_s(r)
        shape = " ".join(f"{k}{v}" for k, v in r.shape.items())
        out.append((bw, f"{r.op} {shape}: {r.bytes / 1e9:.3g} GB at {bw / 1e9:,.0f} GB/s"))
    return sorted(out, key=lambda x: -x[0])


def eager_launch_cost_s(rows: list[Row], floor_s: float) -> float:
    """Median eager time of the launches that take under 2 graph floors on the GPU: host-bound
    launches, so their eager time is the host's per-launch cost."""
    tiny = sorted(r.t_eager_s for r in rows if r.t_eager_s and r.t_graph_s < 2.0 * floor_s and r.op not in FLOOR_OPS)
    if not tiny:
        return 0.0
    return float(tiny[len(tiny) // 2])


def eager_call_costs_s(rows: list[Row]) -> dict:
    """op -> median eager time of its host-bound rows (GPU time under half the eager time): the
    host's cost of one call of that torch op (Python, dispatch and every launch of the call, as
    CUDA events see it). A RoPE call launches five kernels, so costs about five times an add."""
    by_op: dict[str, list[float]] = {}
    for r in rows:
        if r.t_eager_s and r.t_graph_s < 0.5 * r.t_eager_s and r.op not in FLOOR_OPS:
            by_op.setdefault(r.op, []).append(r.t_eager_s)
    return {op: float(np.median(v)) for op, v in by_op.items()}


def graph_switch_costs_s(rows: list[Row], floor_s: float) -> tuple[float, float]:
    """(elementwise, GEMM) seconds a graph kernel pays beyond its calibrated time when the kernel
    before it differs. A mixed row's switch cost is ``t_graph`` (its k kernels interleaved) minus
    ``t_blocked`` (the same kernels, each repeated: their repeat floor, which every op row's own
    ``t_graph`` already holds); a row without ``t_blocked`` subtracts the ``launch_floor`` instead.
    Elementwise: the median over the ``launch_floor_mixed`` rows of the largest k (the most distinct
    kernels, nearest a decode layer's ~15); GEMM: the median over the ``launch_floor_mixed_gemm``
    rows of the smallest GEMM (a tiny cuBLAS GEMM alternating with an add; the decode-sized GEMM
    row is a diagnostic, not used), else the elementwise figure. Negative differences
    (noise) count as 0; no mixed rows: (0, 0), today's model."""
    def switch(r: Row) -> float:
        return max(0.0, r.t_graph_s - (r.t_blocked_s or floor_s))

    mixed = [r for r in rows if r.op == "launch_floor_mixed"]
    elem = 0.0
    if mixed:
        k = max(r.shape["k"] for r in mixed)
        elem = float(np.median([switch(r) for r in mixed if r.shape["k"] == k]))
    gemm_rows = [r for r in rows if r.op == "launch_floor_mixed_gemm"]
    if not gemm_rows:
        return elem, elem
    small = min(r.shape["N"] * r.shape["K"] for r in gemm_rows)  # the tiny GEMM: nothing hides the switch
    return elem, float(np.median([switch(r) for r in gemm_rows if r.shape["N"] * r.shape["K"] == small]))


#: |log| bound of a streamed/single-GEMM ratio (0.5x .. 2x): beyond it a row is garbage, not physics
STREAM_RATIO_LOG_LIMIT = float(np.log(2.0))


def stream_gemm_shapes(shape: dict) -> list[tuple[int, int]]:
    """(N, K) of the GEMMs of one layer of a ``gemm_stream`` row: qkv, o, gate_up, down."""
    D, F, Q = int(shape["D"]), int(shape["F"]), int(shape["Q"])
    return [(Q, D), (D, D), (2 * F, D), (D, F)]


def stream_pass_s(gemm: GemmModel, shape: dict, switch_s: float = 0.0, floor_s: float = 0.0) -> float:
    """A ``gemm_stream`` pass as the single-GEMM fit predicts it: L x its 4 GEMMs (each at least
    the graph floor), plus a graph switch per GEMM (the step charges those separately)."""
    M, L = float(shape["M"]), float(shape["L"])
    one = 0.0
    for N, K in stream_gemm_shapes(shape):
        t, _ = gemm.time_s(M, N, K, formulas.gemm_flops(M, N, K), formulas.gemm_min_bytes(M, N, K, 2))  # bf16 rows
        one += max(float(t), floor_s) + switch_s
    return L * one


def gemm_stream_table(gemm: GemmModel, rows: list[Row], switch_s: float = 0.0, floor_s: float = 0.0) -> tuple:
    """(sorted unique log M, mean log(measured pass / predicted pass) at each) over the
    ``gemm_stream`` rows: how a decode step's GEMMs, each weight read once per step, compare with
    the single-GEMM rows, which repeat one weight matrix or a few."""
    if not rows:
        return (np.zeros(0), np.zeros(0))
    logm = np.log(np.array([float(r.shape["M"]) for r in rows]))
    with np.errstate(all="ignore"):  # absurd shapes in a hand-edited file: clipped below, not a crash
        ratio = np.log(np.array([r.t_graph_s / stream_pass_s(gemm, r.shape, switch_s, floor_s) for r in rows], dtype=float))
    ratio = np.clip(np.nan_to_num(ratio, nan=0.0), -STREAM_RATIO_LOG_LIMIT, STREAM_RATIO_LOG_LIMIT)
    return _residual_table([0] * len(rows), logm, ratio)[0]  # one family: mean per M


#: calibration ops of GEMMs in another compute dtype -> that dtype
GEMM_DTYPE_OPS = {"gemm_fp8": "fp8"}


def fit_gemm_speedup(gemm: GemmModel, rows: list[Row]) -> float | None:
    """The factor s in [1, 4] by which the bf16 GEMM fit's compute runs faster for these rows (their
    own bytes as measured): the s minimizing the squared log error of ``gemm.time_s(M, N, K,
    2MNK / s, bytes)`` against their graph times (a grid, then a finer one around the best). None
    without rows."""
    if not rows:
        return None
    M, N, K = (np.array([r.shape[k] for r in rows], dtype=float) for k in ("M", "N", "K"))
    t = np.array([r.t_graph_s for r in rows], dtype=float)
    nbytes = np.array([r.bytes for r in rows], dtype=float)

    def err(s: float) -> float:
        pred = np.array([gemm.time_s(m, n, k, 2.0 * m * n * k / s, b)[0] for m, n, k, b in zip(M, N, K, nbytes)], dtype=float)
        return float(np.sum(np.log(pred / t) ** 2))

    grid = np.linspace(1.0, 4.0, 61)
    best = float(grid[np.argmin([err(s) for s in grid])])
    fine = np.linspace(max(1.0, best - 0.05), min(4.0, best + 0.05), 21)
    return float(fine[np.argmin([err(s) for s in fine])])


#: every how-many-th bf16 GEMM table row the fitted GEMM form of an imported calibration is fitted on
#: (the form only times what has no table: grouped experts, MLA's up-projection; 1 in 16 of the
#: ~35,000 rows fits it as well as all of them, in a fraction of the time)
TABLE_FORM_STRIDE = 16


def fit_table_models(cal: Calibration) -> FittedModels:
    """An imported calibration (tables, no rows): the tables' models, plus what the step needs
    beside them from the same data: the fitted GEMM form on the bf16 GEMM table; the graph floor
    as the smallest GEMM time measured (a call that does next to nothing); single-pass
    elementwise kernels (the data times no elementwise op) at that floor plus their bytes at the
    form's bandwidth. The form's own fixed cost (a GEMM's setup and tail, 3-4 us) is not an
    elementwise kernel's."""
    from .tables import fit_tables

    tm = fit_tables(cal)
    c = cal.tables["gemm"]["columns"]
    dt = np.asarray(c["dtype"])
    sel = np.flatnonzero(dt == ("bf16" if (dt == "bf16").any() else dt[0]))[::TABLE_FORM_STRIDE]
    M, N, K = (np.asarray(c[k], dtype=float)[sel] for k in ("M", "N", "K"))
    t = np.asarray(c["latency_us"], dtype=float)[sel] * 1e-6
    t0, bw, peak = _gemm_base_fit(2.0 * M * N * K, 2.0 * (M * K + N * K + M * N), t)
    floor = float(np.min(np.asarray(c["latency_us"], dtype=float))) * 1e-6
    return FittedModels(gemm=GemmModel(t0, bw, peak), linear={"copy": LinearModel("copy", np.array([floor, 1.0 / bw]))},
                        graph_floor_s=floor, eager_launch_s=0.0, sustained_gemm_flops_per_s=None, tables=tm)


def fit_models(cal: Calibration, rows: list[Row] | None = None) -> FittedModels:
    """Fit every model from ``rows`` (default: all of the calibration's rows)."""
    if cal.tables and not cal.rows and rows is None:
        return fit_table_models(cal)
    rows = list(cal.rows if rows is None else rows)
    by_op: dict[str, list[Row]] = {}
    for r in rows:
        by_op.setdefault(r.op, []).append(r)
    floor = min(r.t_graph_s for r in by_op.get("launch_floor", [])) if by_op.get("launch_floor") else min(r.t_graph_s for r in rows)
    linear = {op: fit_linear(op, by_op[op]) for op in (*BYTES_OPS, *PREFILL_OPS) if len(by_op.get(op, ())) >= 2}
    linear.update({op: fit_linear(op, by_op[op]) for op, least in BYTES_FLOPS_OPS.items() if len(by_op.get(op, ())) >= least})
    sustained = cal.sustained.get("gemm_bf16_tflops")
    switch_s, switch_gemm_s = graph_switch_costs_s(rows, floor)
    gemm = fit_gemm(by_op["gemm"])
    speedup = {dt: fit_gemm_speedup(gemm, by_op[op]) for op, dt in GEMM_DTYPE_OPS.items() if by_op.get(op)}
    return FittedModels(
        gemm=gemm,
        gemm_speedup=speedup,
        gemm_stream=gemm_stream_table(gemm, by_op.get("gemm_stream", []), switch_gemm_s, floor),
        linear=linear,
        graph_floor_s=floor,
        eager_launch_s=eager_launch_cost_s(rows, floor),
        sustained_gemm_flops_per_s=sustained * 1e12 if sustained else None,
        eager_call_s=eager_call_costs_s(rows),
        graph_switch_s=switch_s,
        graph_switch_gemm_s=switch_gemm_s,
        streams=tuple(stream_rates(rows)),
    )


def leave_one_out(cal: Calibration) -> list[tuple[Row, float]]:
    """For every timed row (not the launch floor): refit its op's model without it, predict it.
    Returns (row, relative error = predicted / measured - 1)."""
    from dataclasses import replace

    full = fit_models(cal)
    rows = list(cal.rows)
    out = []
    for i, r in enumerate(rows):
        rest = [x for j, x in enumerate(rows) if j != i and x.op == r.op]
        if r.op == "gemm" and len(rest) >= 2:
            m = replace(full, gemm=fit_gemm(rest))
        elif r.op in full.linear and len(rest) >= 2:
            m = replace(full, linear={**full.linear, r.op: fit_linear(r.op, rest)})
        else:
            continue
        out.append((r, m.row_time_s(r) / fit_target_s(r) - 1.0))
    return out
