"""Statistics for the regression gate, in plain numpy (no scipy dependency).

Every function works along the LAST axis and broadcasts over leading (batch) axes, so the same code
decides one real comparison and a million simulated ones (``rooflinecli.regress_sim``).

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


def u_statistic(x, y) -> np.ndarray:
    """U of x: #(x_i > y_j) + 0.5 * #(x_i == y_j), along the last axes (broadcast over the rest)."""
    x = np.asarray(x, dtype=float)[..., :, None]
    y = np.asarray(y, dtype=float)[..., None, :]
    return (x > y).sum(axis=(-2, -1)) + 0.5 * (x == y).sum(axis=(-2, -1))


def _normal_sf(z: np.ndarray) -> np.ndarray:
    erfc = np.vectorize(math.erfc, otypes=[float])
    return 0.5 * erfc(np.asarray(z, dtype=float) / math.sqrt(2.0))


def mannwhitney_greater(x, y, method: str = "auto") -> np.ndarray:
    """One-sided p-value of the Mann-Whitney U test, H1: x is stochastically greater than y.

    ``x`` has shape (..., m) and ``y`` (..., n); leading axes broadcast. ``method``: "auto" (exact
    without ties when m + n <= EXACT_MAX_TOTAL, else asymptotic), "exact" or "asymptotic".
    """
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
    u = u_statistic(x, y)

    # tie correction term sum(t^3 - t) over groups of equal values in the pooled sample, computed as
    # sum_i (c_i^2 - 1) with c_i the number of pooled values equal to value i (sum_g t^3 = sum_i t_g(i)^2)
    pooled = np.concatenate([x, y], axis=-1)
    N = m + n
    equal_counts = (pooled[..., :, None] == pooled[..., None, :]).sum(axis=-1).astype(float)
    tie_term = (equal_counts**2 - 1.0).sum(axis=-1)
    has_ties = tie_term > 0

    mu = m * n / 2.0
    var = m * n / 12.0 * ((N + 1) - tie_term / (N * (N - 1))) if N > 1 else np.zeros(batch)
    sigma = np.sqrt(np.maximum(var, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (u - mu - 0.5) / sigma
    p_asym = np.where(sigma > 0, _normal_sf(z), 1.0)

    if method == "asymptotic":
        return np.clip(p_asym, 0.0, 1.0)
    use_exact = ~has_ties if method == "exact" else (~has_ties) & (N <= EXACT_MAX_TOTAL)
    if method == "exact" and has_ties.any():
        raise ValueError("the exact Mann-Whitney distribution needs samples without ties")
    if not np.any(use_exact):
        return np.clip(p_asym, 0.0, 1.0)
    tail = _u_upper_tail(m, n)
    # without ties U is an integer
    p_exact = tail[np.clip(np.rint(u).astype(np.int64), 0, m * n)]
    return np.clip(np.where(use_exact, p_exact, p_asym), 0.0, 1.0)


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
