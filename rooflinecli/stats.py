"""Statistics for the regression gate, in plain numpy (no scipy dependency).

Every function works along the LAST axis and broadcasts over leading (batch) axes, so the same code
decides one real comparison and a million simulated ones (``rooflinecli.gate.sim``).

- ``relative_iqr``: noise as IQR / median.
- ``mannwhitney_greater``: one-sided Mann-Whitney U p-value for "x tends to be larger than y"
  (candidate slower than baseline). Exact null distribution when there are no ties and the samples
  are small enough (m + n <= ``EXACT_MAX_TOTAL``); otherwise the normal approximation with tie and
  continuity correction. Matches ``scipy.stats.mannwhitneyu(x, y, alternative="greater",
  method="exact"|"asymptotic")``.
- ``holm``: Holm-Bonferroni adjusted p-values across a family (kernels).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

# C(66, 33) ~ 7.2e18 still fits an int64; stay a little below so the arithmetic is exact.
EXACT_MAX_TOTAL = 60


def median(a) -> np.ndarray:
    return np.median(np.asarray(a, dtype=float), axis=-1)


def relative_iqr(a) -> np.ndarray:
    """(p75 - p25) / p50 along the last axis (linear interpolation)."""
    a = np.asarray(a, dtype=float)
    q25, q50, q75 = np.percentile(a, [25, 50, 75], axis=-1)
    return (q75 - q25) / q50


@lru_cache(maxsize=256)
def _u_null_counts(m: int, n: int) -> np.ndarray:
    """Counts of each U value 0..m*n over all C(m+n, m) rankings without ties.

    They are the coefficients of the Gaussian binomial [m+n choose m]_q, built factor by factor:
    [n+i choose i] = [n+i-1 choose i-1] * (1 - q^(n+i)) / (1 - q^i); dividing by (1 - q^i) is a
    cumulative sum with stride i.
    """
    if m > n:
        m, n = n, m  # the distribution is symmetric in (m, n)
    size = m * n + 1
    # exact integers while C(m+n, m) fits an int64; floats (relative error ~1e-16 per step) beyond
    dtype = np.int64 if m + n <= EXACT_MAX_TOTAL else np.float64
    c = np.zeros(size, dtype=dtype)
    c[0] = 1
    for i in range(1, m + 1):
        shift = n + i
        if shift < size:
            c[shift:] -= c[: size - shift].copy()
        pad = (-size) % i
        strided = np.concatenate([c, np.zeros(pad, dtype=dtype)]).reshape(-1, i)
        c = np.cumsum(strided, axis=0).reshape(-1)[:size]
    return c


@lru_cache(maxsize=256)
def _u_upper_tail(m: int, n: int) -> np.ndarray:
    """P(U >= u) for u = 0..m*n under H0 (no ties)."""
    c = _u_null_counts(m, n)
    tail = np.cumsum(c[::-1])[::-1]
    return tail.astype(float) / float(tail[0])


def _rank_counts(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(U of x, tie term) by sorting the pooled sample: O(N log N) per batch row, never an N x N array.

    U of x = sum over x_i of (#y below x_i + 0.5 #y equal to x_i). The tie term is sum(t^3 - t) over
    groups of equal pooled values, computed as the sum over elements of (t^2 - 1) with t the size of
    the element's group."""
    N = x.shape[-1] + y.shape[-1]
    if x.ndim == 1:  # one comparison (the real gate): direct sorts and binary searches, no index arrays
        xs, ys = np.sort(x), np.sort(y)
        lo = np.searchsorted(ys, xs, side="left")
        hi = np.searchsorted(ys, xs, side="right")
        v = np.sort(np.concatenate([xs, ys]), kind="stable")  # two sorted runs: a merge
        bounds = np.concatenate([[0], np.flatnonzero(v[1:] != v[:-1]) + 1, [N]])
        t = np.diff(bounds).astype(float)
        return np.float64(lo.sum() + 0.5 * (hi - lo).sum()), np.float64((t**3 - t).sum())
    if x.shape[-1] * y.shape[-1] <= PAIRWISE_MAX_PAIRS:
        return _rank_counts_pairwise(x, y)
    return _rank_counts_sorted(x, y)


#: batch rows with at most this many (x, y) pairs count U by comparing every pair (up to about
#: 100 samples a side, where it is still faster than ranking); longer rows rank the pooled sample
PAIRWISE_MAX_PAIRS = 10_000
#: elements compared at once in the pairwise count (memory: a few bytes each)
_PAIRWISE_CHUNK = 1 << 22


def _rank_counts_pairwise(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_rank_counts`` of batched short rows: U from every (x_i, y_j) pair, a block of rows at a
    time (two to six times faster than ranking for 10 to 40 samples a side); the tie term from the
    sorted pooled rows, ranked only for the rows that have a tie. Same values (small integers and
    halves, exact in floating point)."""
    m, n = x.shape[-1], y.shape[-1]
    batch = x.shape[:-1]
    xf, yf = x.reshape(-1, m), y.reshape(-1, n)
    rows = xf.shape[0]
    u = np.empty(rows)
    step = max(1, _PAIRWISE_CHUNK // max(1, m * n))
    for a in range(0, rows, step):
        xa, ya = xf[a:a + step, :, None], yf[a:a + step, None, :]
        below = np.count_nonzero(ya < xa, axis=(1, 2))
        equal = np.count_nonzero(ya == xa, axis=(1, 2))
        u[a:a + step] = below + 0.5 * equal
    pooled = np.sort(np.concatenate([xf, yf], axis=-1), axis=-1)
    tie = np.zeros(rows)
    tied = np.flatnonzero((pooled[:, 1:] == pooled[:, :-1]).any(axis=-1))
    if tied.size:
        tie[tied] = _tie_term_sorted(pooled[tied])
    return u.reshape(batch), tie.reshape(batch)


def _tie_term_sorted(v: np.ndarray) -> np.ndarray:
    """Per row of ``v`` (rows sorted), sum(t^3 - t) over its groups of equal values: the groups'
    sizes from where each row's values change, all rows at once (integers, exact in floating point)."""
    rows, N = v.shape
    starts = np.ones(v.shape, dtype=bool)
    starts[:, 1:] = v[:, 1:] != v[:, :-1]
    first = np.flatnonzero(starts)  # a group's first element, in the flattened rows (each row starts one)
    t = np.diff(np.append(first, rows * N)).astype(float)
    return np.bincount(first // N, weights=t**3 - t, minlength=rows)


def _rank_counts_sorted(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_rank_counts`` of batched rows by ranking the pooled sample: O(N log N) per row."""
    N = x.shape[-1] + y.shape[-1]
    pooled = np.concatenate([x, y], axis=-1)
    is_y = np.concatenate([np.zeros(x.shape, dtype=np.int64), np.ones(y.shape, dtype=np.int64)], axis=-1)
    order = np.argsort(pooled, axis=-1)  # ties are grouped by value below, so any sort order will do
    v = np.take_along_axis(pooled, order, axis=-1)
    ys = np.take_along_axis(is_y, order, axis=-1)
    idx = np.broadcast_to(np.arange(N), v.shape)
    starts = np.ones(v.shape, dtype=bool)
    starts[..., 1:] = v[..., 1:] != v[..., :-1]
    ends = np.ones(v.shape, dtype=bool)
    ends[..., :-1] = starts[..., 1:]
    first = np.maximum.accumulate(np.where(starts, idx, 0), axis=-1)  # start of each element's tie group
    last = np.flip(np.minimum.accumulate(np.flip(np.where(ends, idx, N - 1), axis=-1), axis=-1), axis=-1)
    cum_y = np.cumsum(ys, axis=-1)  # y elements at or before each position
    y_below = np.take_along_axis(cum_y - ys, first, axis=-1)  # y strictly below the group
    y_equal = np.take_along_axis(cum_y, last, axis=-1) - y_below
    u = np.where(ys == 0, y_below + 0.5 * y_equal, 0.0).sum(axis=-1)
    t = (last - first + 1).astype(float)
    return u, (t**2 - 1.0).sum(axis=-1)


def u_statistic(x, y) -> np.ndarray:
    """U of x: #(x_i > y_j) + 0.5 * #(x_i == y_j), along the last axes (broadcast over the rest)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    batch = np.broadcast_shapes(x.shape[:-1], y.shape[:-1])
    return _rank_counts(np.broadcast_to(x, batch + x.shape[-1:]), np.broadcast_to(y, batch + y.shape[-1:]))[0]


def _normal_sf(z: np.ndarray) -> np.ndarray:
    erfc = np.vectorize(math.erfc, otypes=[float])
    return 0.5 * erfc(np.asarray(z, dtype=float) / math.sqrt(2.0))


def mannwhitney_greater(x, y, method: str = "auto") -> np.ndarray:
    """One-sided p-value of the Mann-Whitney U test, H1: x is stochastically greater than y.

    ``x`` has shape (..., m) and ``y`` (..., n); leading axes broadcast. ``method``: "auto" (exact
    without ties when m + n <= EXACT_MAX_TOTAL, else asymptotic), "exact" or "asymptotic".
    """
    return mannwhitney_both(x, y, method)[0]


def mannwhitney_both(x, y, method: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """(p for "x greater than y", p for "y greater than x") from one ranking of the pooled samples
    (U of y = m n - U of x, same tie term): the gate's two one-sided tests for the price of one."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    m, n = x.shape[-1], y.shape[-1]
    if m == 0 or n == 0:
        raise ValueError("mannwhitney_greater needs at least one sample on each side")
    if method not in ("auto", "exact", "asymptotic"):
        raise ValueError(f"unknown method {method!r}")
    batch = np.broadcast_shapes(x.shape[:-1], y.shape[:-1])
    x = np.broadcast_to(x, batch + (m,))
    y = np.broadcast_to(y, batch + (n,))
    u, tie_term = _rank_counts(x, y)  # sort-based: a million samples a side is fine
    N = m + n
    has_ties = tie_term > 0
    if method == "exact" and has_ties.any():
        raise ValueError("the exact Mann-Whitney distribution needs samples without ties")
    mu = m * n / 2.0
    var = m * n / 12.0 * ((N + 1) - tie_term / (N * (N - 1))) if N > 1 else np.zeros(batch)
    sigma = np.sqrt(np.maximum(var, 0.0))
    use_exact = ~has_ties if method == "exact" else (~has_ties) & (N <= EXACT_MAX_TOTAL)
    if method == "asymptotic":
        use_exact = np.zeros(batch, dtype=bool)
    out = []
    for u_side in (u, m * n - u):
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (u_side - mu - 0.5) / sigma
        p = np.where(sigma > 0, _normal_sf(z), 1.0)
        if np.any(use_exact):
            # without ties U is an integer; the null distribution is symmetric in (m, n)
            p_exact = _u_upper_tail(m, n)[np.clip(np.rint(u_side).astype(np.int64), 0, m * n)]
            p = np.where(use_exact, p_exact, p)
        out.append(np.clip(p, 0.0, 1.0))
    return out[0], out[1]


def holm(p, axis: int = -1) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values along ``axis``: adj_(i) = max_{j<=i} min(1, (k-j+1) p_(j))."""
    p = np.moveaxis(np.asarray(p, dtype=float), axis, -1)
    k = p.shape[-1]
    if k == 0:
        return np.moveaxis(p.copy(), -1, axis)
    order = np.argsort(p, axis=-1, kind="stable")
    sorted_p = np.take_along_axis(p, order, axis=-1)
    factors = np.arange(k, 0, -1, dtype=float)
    adj_sorted = np.minimum(1.0, np.maximum.accumulate(sorted_p * factors, axis=-1))
    adj = np.empty_like(adj_sorted)
    np.put_along_axis(adj, order, adj_sorted, axis=-1)
    return np.moveaxis(adj, -1, axis)


# -- stability of a sample distribution ---------------------------------------------------------------

#: smallest share of the samples that counts as a cluster (a mode, not a handful of outliers)
BIMODAL_MIN_FRACTION = 0.10
BIMODAL_MIN_CLUSTER = 3
#: the gap between the clusters must be this many times the wider cluster's IQR ...
BIMODAL_GAP_RATIO = 3.0
#: ... and at least this fraction of the median (so quantized, very tight timings never qualify)
BIMODAL_GAP_FLOOR = 0.02


def _interp_sorted(s: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Linear interpolation into sorted ``s`` (..., n) at fractional positions ``pos`` (k,) -> (..., k)."""
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, s.shape[-1] - 1)
    w = pos - lo
    return s[..., lo] * (1.0 - w) + s[..., hi] * w


def bimodal_split(a) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gap test for two modes, along the last axis: (is_bimodal, gap / median, size of the lower cluster).

    Sort the samples; for every split that leaves at least ``BIMODAL_MIN_FRACTION`` of them (and at
    least ``BIMODAL_MIN_CLUSTER``) on each side, compare the empty gap at the split with the spread
    inside the two clusters (the larger of their IQRs). The samples are bimodal when, at the best
    split, the gap is >= ``BIMODAL_GAP_RATIO`` x that spread AND >= ``BIMODAL_GAP_FLOOR`` x the median.
    A unimodal sample's largest interior gap is a small fraction of its clusters' IQR, and a few
    outliers are not a cluster. O(n log n): one sort, then O(1) per split. Rows too small for two
    clusters are never bimodal.
    """
    s = np.sort(np.asarray(a, dtype=float), axis=-1)
    n = s.shape[-1]
    k = max(BIMODAL_MIN_CLUSTER, math.ceil(BIMODAL_MIN_FRACTION * n))
    batch = s.shape[:-1]
    if n < 2 * k:
        return np.zeros(batch, dtype=bool), np.zeros(batch), np.zeros(batch, dtype=np.int64)
    i = np.arange(k, n - k + 1)  # split before index i: clusters s[:i] and s[i:]
    gap = s[..., i] - s[..., i - 1]
    iqr_lo = _interp_sorted(s, 0.75 * (i - 1)) - _interp_sorted(s, 0.25 * (i - 1))
    iqr_hi = _interp_sorted(s, i + 0.75 * (n - i - 1)) - _interp_sorted(s, i + 0.25 * (n - i - 1))
    spread = np.maximum(iqr_lo, iqr_hi)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(spread > 0, gap / spread, np.where(gap > 0, np.inf, 0.0))
    med = np.median(s, axis=-1)
    ok = (score >= BIMODAL_GAP_RATIO) & (gap >= BIMODAL_GAP_FLOOR * med[..., None])
    best = np.argmax(np.where(ok, gap, -1.0), axis=-1)  # the widest qualifying gap
    found = ok.any(axis=-1)
    gap_rel = np.take_along_axis(gap, best[..., None], axis=-1)[..., 0] / med
    return found, np.where(found, gap_rel, 0.0), np.where(found, i[best], 0)


#: the spread (IQR/median) of one run is this many times the other's ...
SPREAD_CHANGE_RATIO = 3.0
#: ... and the larger is at least this (two tiny spreads, 0.2% and 0.7%, are both stable)
SPREAD_CHANGE_FLOOR = 0.02


def spread_changed(spread_a, spread_b) -> np.ndarray:
    """True where two runs' IQR/median differ >= SPREAD_CHANGE_RATIO-fold with the larger >= SPREAD_CHANGE_FLOOR."""
    a = np.asarray(spread_a, dtype=float)
    b = np.asarray(spread_b, dtype=float)
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    return (hi >= SPREAD_CHANGE_FLOOR) & (hi >= SPREAD_CHANGE_RATIO * lo)
