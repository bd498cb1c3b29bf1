"""The timing harness's statistics and the CPU wall-clock backend; GPU-name matching."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from rooflinecli.bench.environment import match_spec_id
from rooflinecli.bench.timing import MIN_SAMPLES, Timing, sample_count, time_wall_clock
from rooflinecli.results import quantiles_s


def test_quantiles_are_the_median_and_the_20th_80th_percentiles():
    rng = np.random.default_rng(3)
    samples = tuple(float(x) for x in rng.lognormal(-9, 0.3, size=37))
    t = Timing(samples, "cuda_events")
    p20, p50, p80 = t.quantiles_s
    assert p50 == pytest.approx(statistics.median(samples))
    s = sorted(samples)
    # linear interpolation between order statistics, as numpy's default percentile
    for q, value in ((0.2, p20), (0.8, p80)):
        pos = q * (len(s) - 1)
        lo = int(pos)
        assert value == pytest.approx(s[lo] + (pos - lo) * (s[lo + 1] - s[lo]))
    assert p20 <= p50 <= p80
    assert t.p50_s == p50
    assert quantiles_s(list(samples)) == t.quantiles_s


def test_quantiles_ignore_order_and_survive_an_outlier():
    base = [1e-3 * (1 + 0.01 * i) for i in range(10)]
    spiked = base[:-1] + [1.0]  # one sample hit by a clock change or a context switch
    assert quantiles_s(base)[1] == quantiles_s(list(reversed(base)))[1]
    assert quantiles_s(spiked)[1] == pytest.approx(quantiles_s(base)[1])


@pytest.mark.parametrize(
    "estimate_s, budget_s, expected",
    [(1e-3, 0.25, 100), (0.1, 0.25, MIN_SAMPLES), (2.0**-7, 0.25, 32), (0.0, 0.25, 100), (float("nan"), 0.25, 100)],
)
def test_sample_count_keeps_at_least_ten(estimate_s, budget_s, expected):
    n = sample_count(estimate_s, budget_s)
    assert MIN_SAMPLES <= n <= 100
    assert n == expected


def test_wall_clock_keeps_every_sample_and_times_the_call():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.002)

    t = time_wall_clock(fn, samples=12, warmup=2)
    assert t.method == "wall_clock"
    assert len(t.samples_s) == 12
    assert len(calls) == 14  # warm-up calls are not samples
    assert min(t.samples_s) >= 0.002
    assert "not a GPU" in t.note


def test_wall_clock_rejects_zero_samples():
    with pytest.raises(ValueError):
        time_wall_clock(lambda: None, samples=0)


@pytest.mark.parametrize(
    "name, spec_id",
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("NVIDIA L40S", "l40s"),
        ("AMD Instinct MI300X", "mi300x"),
        ("NVIDIA H100 NVL", None),  # no datasheet spec for it: no guess
        ("Tesla T4", None),
    ],
)
def test_gpu_name_matches_a_datasheet_spec(name, spec_id):
    known = {"h200", "h100-sxm", "h100-pcie", "a100-sxm", "rtx-4090", "l40s", "mi300x", "b200"}
    assert match_spec_id(name, known) == spec_id


def test_gpu_name_match_never_returns_a_missing_spec():
    assert match_spec_id("NVIDIA H200", known={"h100-sxm"}) is None
    assert match_spec_id("NVIDIA H200") == "h200"  # the built-in specs have it


def test_a_failed_graph_capture_falls_back_to_the_event_samples(monkeypatch):
    """A kernel under 50 us whose graph capture fails (a launcher that syncs with the host) keeps
    its event samples, labelled, even when the invalidated capture raises again at the next
    synchronize. The CUDA calls are stubbed: this is the fallback's logic, not a GPU."""
    import torch

    import rooflinecli.bench.timing as timing

    syncs = {"n": 0}

    def synchronize():
        syncs["n"] += 1
        if syncs["n"] == 3:  # the one after the failed capture
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")

    def capture_fails(*a, **k):
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    monkeypatch.setattr(timing, "time_cuda_events", lambda fn, flusher, samples: [12e-6] * samples)
    monkeypatch.setattr(timing, "time_cuda_graph", capture_fails)
    flusher = type("F", (), {"nbytes": 256 * 2**20, "flush": lambda self: None})()
    t = timing.time_cuda(lambda: None, flusher, min_samples=20, target_total_s=1e-3)
    assert t.method == "cuda_events" and len(t.samples_s) == timing.sample_count(12e-6, 1e-3, 20) == 83
    assert t.p50_s == pytest.approx(12e-6)
    assert "graph capture failed (RuntimeError" in t.note and "include launch overhead" in t.note
    assert syncs["n"] == 3
    # a kernel over 50 us never tries a graph
    monkeypatch.setattr(timing, "time_cuda_events", lambda fn, flusher, samples: [80e-6] * samples)
    t = timing.time_cuda(lambda: None, flusher, min_samples=10)
    assert t.method == "cuda_events" and "graph" not in t.note
