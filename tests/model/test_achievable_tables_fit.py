"""The measured tables' interpolation: glitch removal, the working-set byte rate, and a
leave-slice-out that never reads the slice it predicts."""

import numpy as np

from rooflinecli.achievable.tables import Rates, _despiked, _grid, envelope


def _axes(*sizes):
    return [np.log(np.arange(1.0, n + 1.0)) for n in sizes]


def test_an_isolated_slow_cell_is_a_glitch_a_shared_slow_regime_is_not():
    g = np.zeros((5, 5))
    g[2, 1] = np.log(2.2)  # one call measured 2.2x its neighbours
    g[:, 3:] = np.log(3.0)  # a 3x step along N that every M shares (a kernel choice)
    d = _despiked(g, _axes(5, 5))
    assert d[2, 1] == 0.0 and np.allclose(d[:, 3:], np.log(3.0))
    fast = g.copy()
    fast[2, 1] = -np.log(2.2)  # a fast outlier is kept: a measurement only adds time
    assert _despiked(fast, _axes(5, 5))[2, 1] == fast[2, 1]
    assert _despiked(g, _axes(5, 5), None) is g


def test_the_byte_rate_steps_down_past_a_cache_sized_working_set():
    nbytes = np.geomspace(1e6, 1e9, 31)
    t = nbytes / np.where(nbytes <= 1e8, 4e12, 8e11)  # 4 TB/s while resident, 0.8 TB/s beyond
    r = envelope(np.ones_like(t), nbytes, t)
    assert np.allclose(r.bytes_rate(nbytes), np.where(nbytes <= 1e8, 4e12, 8e11))
    assert np.allclose(r.base_s(np.ones_like(t), nbytes), t)  # the ratio left to interpolate: 1, no cliff
    assert Rates(1.0, 4e12).bytes_rate(nbytes) == 4e12
    s = r.scaled(2.0, 0.5)
    assert np.isclose(s.bytes_per_s, 2e12) and np.allclose(s.bytes_rate(nbytes), r.bytes_rate(nbytes) * 0.5)


def test_leave_slice_out_never_reads_the_slice_it_predicts():
    rng = np.random.default_rng(0)
    B, L = np.meshgrid(2.0 ** np.arange(6), 2.0 ** np.arange(7), indexing="ij")
    ratio = rng.normal(0, 0.05, B.shape)
    keep = ~((B >= 16) & (L >= 32))  # an unmeasured corner, filled from the rest
    a = _grid([B[keep], L[keep]], ratio[keep], None)
    b_ratio = ratio.copy()
    b_ratio[2] += 1.0  # the slice B = 4 made 2.7x slower
    b = _grid([B[keep], L[keep]], b_ratio[keep], None)
    ea, eb = a.leave_slice_out(0), b.leave_slice_out(0)
    n = np.isfinite(a.raw[2]).sum()
    # B = 4's own predictions see its new times only as the measurement they are judged against
    assert np.allclose((1 + ea[n:2 * n]) / (1 + eb[n:2 * n]), np.e)
