"""The gate's statistics (rooflinecli.stats) against independent references: brute-force permutation
enumeration, a rank-based textbook implementation, and scipy when it happens to be installed."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rooflinecli import stats


def _brute_force_exact_p(x, y) -> float:
    """P(U >= u_obs) over every way of splitting the pooled sample into groups of sizes m and n."""
    pooled = np.concatenate([x, y])
    m = len(x)
    u_obs = _u_by_ranks(x, y)
    hits = total = 0
    for idx in itertools.combinations(range(len(pooled)), m):
        mask = np.zeros(len(pooled), dtype=bool)
        mask[list(idx)] = True
        hits += _u_by_ranks(pooled[mask], pooled[~mask]) >= u_obs - 1e-9
        total += 1
    return hits / total


def _average_ranks(a):
    order = np.argsort(a, kind="stable")
    ranks = np.empty(len(a))
    sorted_a = a[order]
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and sorted_a[j + 1] == sorted_a[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _u_by_ranks(x, y) -> float:
    ranks = _average_ranks(np.concatenate([x, y]))
    return float(ranks[: len(x)].sum() - len(x) * (len(x) + 1) / 2)


def _textbook_asymptotic_p(x, y) -> float:
    m, n = len(x), len(y)
    N = m + n
    u = _u_by_ranks(x, y)
    _, counts = np.unique(np.concatenate([x, y]), return_counts=True)
    var = m * n / 12 * ((N + 1) - float(np.sum(counts**3 - counts)) / (N * (N - 1)))
    z = (u - m * n / 2 - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


@pytest.mark.parametrize("m,n,shift", [(3, 4, 0.0), (5, 5, 0.5), (6, 4, 1.0), (4, 7, -0.3), (7, 7, 0.8)])
def test_exact_p_matches_permutation_enumeration(m, n, shift):
    rng = np.random.default_rng(m * 10 + n)
    x = rng.normal(shift, 1, m)
    y = rng.normal(0, 1, n)
    assert float(stats.mannwhitney_greater(x, y)) == pytest.approx(_brute_force_exact_p(x, y), rel=1e-12)


def test_exact_null_distribution_is_symmetric_and_sums_to_one():
    for m, n in [(1, 1), (2, 9), (10, 10), (13, 17), (30, 30)]:
        c = stats._u_null_counts(m, n)
        assert c.sum() == math.comb(m + n, m)
        assert np.array_equal(c, c[::-1])
        assert np.array_equal(c, stats._u_null_counts(n, m))


@pytest.mark.parametrize("m,n", [(10, 10), (20, 20), (15, 40), (100, 20)])
def test_asymptotic_with_ties_matches_textbook(m, n):
    rng = np.random.default_rng(m + n)
    x = np.round(rng.normal(10.3, 1, m))  # coarse rounding: many ties, like a coarse timer
    y = np.round(rng.normal(10.0, 1, n))
    assert float(stats.mannwhitney_greater(x, y)) == pytest.approx(_textbook_asymptotic_p(x, y), rel=1e-12)
    # without ties the asymptotic form is the same formula with zero tie term
    xs, ys = rng.normal(0.2, 1, m), rng.normal(0, 1, n)
    assert float(stats.mannwhitney_greater(xs, ys, method="asymptotic")) == pytest.approx(_textbook_asymptotic_p(xs, ys), rel=1e-12)


def test_auto_method_switches_to_asymptotic_above_limit():
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.3, 1, 40), rng.normal(0, 1, 40)  # m + n = 80 > EXACT_MAX_TOTAL
    assert float(stats.mannwhitney_greater(x, y)) == float(stats.mannwhitney_greater(x, y, method="asymptotic"))
    x, y = x[:25], y[:25]
    assert float(stats.mannwhitney_greater(x, y)) == float(stats.mannwhitney_greater(x, y, method="exact"))


def test_batched_equals_one_by_one():
    rng = np.random.default_rng(4)
    X = rng.lognormal(0.02, 0.02, size=(3, 4, 12))
    Y = rng.lognormal(0.0, 0.02, size=(3, 4, 9))
    P = stats.mannwhitney_greater(X, Y)
    assert P.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            assert P[i, j] == float(stats.mannwhitney_greater(X[i, j], Y[i, j]))


@pytest.mark.parametrize("m, n, step", [(20, 20, None), (7, 13, 1e-3), (100, 100, 5e-3), (101, 100, None)])
def test_pairwise_and_ranked_counts_agree(m, n, step, monkeypatch):
    """U and the tie term counted pair by pair (short rows) equal the ranked count, with and without
    ties (quantized samples), across block boundaries of the pairwise count."""
    rng = np.random.default_rng(m * n)
    X, Y = rng.lognormal(0.01, 0.03, size=(37, m)), rng.lognormal(0.0, 0.03, size=(37, n))
    if step:
        X, Y = np.round(X / step) * step, np.round(Y / step) * step
    monkeypatch.setattr(stats, "_PAIRWISE_CHUNK", 5 * m * n)  # blocks of 5 rows: the last one partial
    u_pair, tie_pair = stats._rank_counts_pairwise(X, Y)
    u_rank, tie_rank = stats._rank_counts_sorted(X, Y)
    assert np.array_equal(u_pair, u_rank) and np.array_equal(tie_pair, tie_rank)
    assert (tie_pair > 0).any() == bool(step)
    for i in (0, 36):  # and both equal the one-row count
        u1, t1 = stats._rank_counts(X[i], Y[i])
        assert u_pair[i] == u1 and tie_pair[i] == t1


def test_cross_check_against_scipy_when_installed():
    """scipy is not a dependency; where it is importable, agree with it exactly. Always also check
    one textbook value so this test asserts something either way."""
    # x entirely above y, m = n = 10: p = 1 / C(20, 10)
    x = np.arange(11, 21, dtype=float)
    y = np.arange(1, 11, dtype=float)
    assert float(stats.mannwhitney_greater(x, y)) == pytest.approx(1 / math.comb(20, 10), rel=1e-12)
    try:
        import scipy.stats as ss
    except ImportError:
        return
    rng = np.random.default_rng(5)
    for m, n in [(10, 10), (20, 20), (12, 30), (50, 40), (100, 20)]:
        xs, ys = rng.lognormal(0.01, 0.02, m), rng.lognormal(0, 0.02, n)
        method = "exact" if m + n <= stats.EXACT_MAX_TOTAL else "asymptotic"
        ref = ss.mannwhitneyu(xs, ys, alternative="greater", method=method).pvalue
        assert float(stats.mannwhitney_greater(xs, ys)) == pytest.approx(ref, rel=1e-9, abs=1e-15)
        xt, yt = np.round(xs * 200), np.round(ys * 200)
        ref = ss.mannwhitneyu(xt, yt, alternative="greater", method="asymptotic").pvalue
        assert float(stats.mannwhitney_greater(xt, yt)) == pytest.approx(ref, rel=1e-9, abs=1e-15)


def test_exact_refuses_ties_and_bad_input():
    with pytest.raises(ValueError):
        stats.mannwhitney_greater([1.0, 2.0], [2.0, 3.0], method="exact")
    with pytest.raises(ValueError):
        stats.mannwhitney_greater([], [1.0])


def test_holm_matches_definition():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max
    assert np.allclose(stats.holm(p), [0.03, 0.06, 0.06, 0.02])
    assert np.allclose(stats.holm([0.3, 0.2]), [0.4, 0.4])
    assert np.allclose(stats.holm([0.9, 0.8]), [1.0, 1.0])
    batched = stats.holm(np.stack([p, p[::-1]]), axis=-1)
    assert np.allclose(batched[1], stats.holm(p[::-1]))
    assert stats.holm(np.array([])).shape == (0,)


def test_relative_iqr():
    assert float(stats.relative_iqr([1.0, 2.0, 3.0, 4.0, 5.0])) == pytest.approx((4 - 2) / 3)
    assert float(stats.relative_iqr([7.0] * 10)) == 0.0
