"""The timing harness's statistics and the CPU wall-clock backend; GPU-name matching."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from rooflinecli.bench.environment import match_spec_id
import rooflinecli.bench.timing as timing
from rooflinecli.bench.timing import MIN_SAMPLES, Timing, graph_launches, host_ahead_sleep_s, host_us_per_call, sample_count, time_wall_clock
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
def test_sample_count_keeps_at_least_twenty(estimate_s, budget_s, expected):
    assert MIN_SAMPLES == 20
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
    assert t.host_us_per_call >= 2000


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


# ------------------------------------------------------------------------------------------------
# GPU method choice and ordering, with the CUDA calls stubbed (no GPU here)
# ------------------------------------------------------------------------------------------------


class _FakeFlusher:
    nbytes = 256 * 2**20

    def __init__(self, log=None):
        self.log = log

    def flush(self):
        if self.log is not None:
            self.log.append("flush")


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda.synchronize, Event and _sleep replaced by recorders; returns the call log."""
    import torch

    log: list[str] = []

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            log.append("event")

        def elapsed_time(self, other):
            return 0.05  # ms

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: log.append("sync"))
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append(f"sleep:{cycles}"))
    monkeypatch.setattr(timing, "_SLEEP_CYCLES_PER_S", [1e9])
    return log


def test_graph_replay_is_the_method_when_capture_works(monkeypatch, fake_cuda):
    seen = {}

    def fake_graph(fns, *, min_samples, target_total_s):
        seen["fns"] = list(fns)
        return [5e-6] * min_samples, 400, None

    monkeypatch.setattr(timing, "time_cuda_graph", fake_graph)
    monkeypatch.setattr(timing, "time_events_host_ahead", lambda *a, **k: pytest.fail("no events when capture works"))
    sets = [lambda: None, lambda: None, lambda: None]
    t = timing.time_cuda(lambda: None, _FakeFlusher(), rotating=lambda: sets, min_samples=25)
    assert t.method == "cuda_graph" and len(t.samples_s) == 25 and t.p50_s == pytest.approx(5e-6)
    assert seen["fns"] == sets  # the rotating input sets, not the single call
    assert "400 launches over 3 rotating input sets" in t.note and "no flush in the timed region" in t.note
    assert t.host_us_per_call is not None and t.host_us_per_call >= 0


def test_a_bracket_takes_our_samples_on_both_sides_of_the_crosscheck(monkeypatch):
    """time_cuda_graph(between=...): the samples, then ``between()``, then BRACKET_SAMPLES more
    replays of the same graph; the bracket's figure is the median of the last samples before and
    the fresh ones after, so a clock step between the row's median and the cross-check does not
    count against the method (H200 run 3: 414 -> 472 us within one measurement)."""
    order: list = []
    replays = iter([
        [10e-6] * 3,  # the pilot
        [10e-6] * 20 + [12e-6] * 20,  # the measurement: a clock step half-way
        [12e-6] * timing.BRACKET_SAMPLES,  # after the cross-check
    ])

    def replay(graph, launches, samples, *, sustain_s=0.0, replay_estimate_s=0.0):
        order.append(("replay", samples, sustain_s))
        return next(replays)

    monkeypatch.setattr(timing, "capture_graph", lambda fns, n: object())
    monkeypatch.setattr(timing, "replay_samples", replay)
    samples, launches, bracket = timing.time_cuda_graph([lambda: None], min_samples=40, target_total_s=0.0,
                                                        between=lambda: order.append("between") or 12.5e-6)
    assert order[2] == "between" and order[3] == ("replay", timing.BRACKET_SAMPLES, timing.BRACKET_SUSTAIN_S)
    assert order[1][2] == timing.SUSTAIN_S  # the measurement itself after the sustained replays
    assert statistics.median(samples) == pytest.approx(11e-6)  # the row's median straddles the step
    assert bracket.value == 12.5e-6 and bracket.ours_s == pytest.approx(12e-6)
    assert len(bracket.before_s) == len(bracket.after_s) == timing.BRACKET_SAMPLES
    # without between: no bracket and no extra replays
    replays = iter([[10e-6] * 3, [10e-6] * 40])
    order.clear()
    assert timing.time_cuda_graph([lambda: None], min_samples=40, target_total_s=0.0)[2] is None
    assert len(order) == 2


def test_a_failed_capture_falls_back_to_host_ahead_events(monkeypatch, fake_cuda):
    """A launcher whose capture raises (it synchronizes) is timed with events, the host kept ahead
    by a GPU sleep sized from its host time, even when the invalidated capture raises again at
    the next synchronize."""
    import torch

    syncs = {"n": 0, "fail_at": None}

    def synchronize():
        syncs["n"] += 1
        if syncs["n"] == syncs["fail_at"]:
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")

    def capture_fails(fns, **k):
        syncs["fail_at"] = syncs["n"] + 1  # the synchronize right after the failed capture
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    monkeypatch.setattr(timing, "time_cuda_graph", capture_fails)
    monkeypatch.setattr(timing, "host_us_per_call", lambda fn, sync, reps=7: 300.0)
    monkeypatch.setattr(timing, "host_us_back_to_back", lambda fn, sync, estimate_us: 120.0)

    def events(fn, flusher, *, samples, sleep_s):
        calls.append((samples, sleep_s))
        return [12e-6] * samples

    monkeypatch.setattr(timing, "time_events_host_ahead", events)
    t = timing.time_cuda(lambda: None, _FakeFlusher(), min_samples=20, target_total_s=1e-3)
    assert t.method == "cuda_events_host_ahead"
    assert t.p50_s == pytest.approx(12e-6) and t.host_us_per_call == 120.0  # back to back
    assert "host 120.0 us per call back to back (300.0 with a synchronize before each)" in t.note
    assert "graph capture failed (RuntimeError: CUDA error: operation not permitted" in t.note
    assert "host kept ahead (600 us GPU sleep" in t.note
    sleep = host_ahead_sleep_s(300.0)
    assert sleep == pytest.approx(600e-6)
    assert calls[0] == (3, sleep)  # the estimate
    assert calls[1] == (sample_count(12e-6 + sleep, 1e-3, 20), sleep) and len(t.samples_s) == calls[1][0]
    # --no-graphs: never tries a capture
    monkeypatch.setattr(timing, "time_cuda_graph", lambda *a, **k: pytest.fail("graphs are off"))
    t = timing.time_cuda(lambda: None, _FakeFlusher(), min_samples=20, use_graphs=False)
    assert t.method == "cuda_events_host_ahead" and t.note.startswith("graphs disabled")


def test_host_time_back_to_back_runs_blocks_of_calls_behind_a_gpu_sleep(fake_cuda, monkeypatch):
    """Per block: synchronize, a GPU sleep covering 3x the block's estimated host time (capped),
    then the calls back to back with nothing in between; the median block's wall time per call."""
    log = fake_cuda
    walls = iter([0.0, 10e-3, 0.0, 50e-3, 0.0, 20e-3])  # blocks of 1 ms, 5 ms, 2 ms per call x 10
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(walls))
    us = timing.host_us_back_to_back(lambda: log.append("call"), lambda: log.append("sync"), estimate_us=80.0)
    assert us == pytest.approx(2000.0)
    sleep = f"sleep:{int(3 * 10 * 80e-6 * 1e9)}"
    block = ["sync", sleep] + ["call"] * 10
    assert log == block * 3 + ["sync"]
    log.clear()
    walls = iter([0.0, 1e-3] * 3)
    timing.host_us_back_to_back(lambda: None, lambda: None, estimate_us=1e6)
    assert log == [f"sleep:{int(timing.HOST_BLOCK_SLEEP_MAX_S * 1e9)}"] * 3  # capped


def test_a_launcher_that_synchronizes_keeps_its_synchronized_host_figure(monkeypatch, fake_cuda):
    """Back to back, a synchronizing launcher waits out the GPU sleep under its block: the lower
    of the two figures is the row's."""
    monkeypatch.setattr(timing, "time_cuda_graph", lambda fns, **k: ([5e-6] * 20, 8, None))
    monkeypatch.setattr(timing, "host_us_per_call", lambda fn, sync, reps=7: 300.0)
    monkeypatch.setattr(timing, "host_us_back_to_back", lambda fn, sync, estimate_us: 900.0)
    assert timing.time_cuda(lambda: None, _FakeFlusher()).host_us_per_call == 300.0


def test_host_ahead_order_flush_then_sleep_then_start_event(fake_cuda):
    """Per sample: the flush, then the GPU sleep (the flush stays out of the sample and the host
    queues the call while the GPU sleeps), then start event, the call, end event."""
    log = fake_cuda
    samples = timing.time_events_host_ahead(lambda: log.append("call"), _FakeFlusher(log), samples=2, sleep_s=200e-6)
    assert samples == [50e-6, 50e-6]
    per_sample = ["flush", "sleep:200000", "event", "call", "event"]
    assert log == per_sample * 2 + ["sync"]


def test_replays_are_queued_behind_a_sleep_with_no_flush(fake_cuda):
    log = fake_cuda

    class Graph:
        def replay(self):
            log.append("replay")

    out = timing.replay_samples(Graph(), launches=10, samples=3)
    assert out == [pytest.approx(5e-6)] * 3  # 0.05 ms per replay / 10 launches
    assert log[:2] == ["replay", "sync"]  # upload replay, untimed
    assert log[2].startswith("sleep:") and log[3:] == ["event", "replay", "event"] * 3 + ["sync"]
    assert "flush" not in log


def test_sustained_replays_come_untimed_before_the_samples(fake_cuda):
    """Kernel timing replays the graph for SUSTAIN_S first (no events around those), so the
    timed replays see the clocks of a loaded GPU; the count follows the replay estimate."""
    log = fake_cuda

    class Graph:
        def replay(self):
            log.append("replay")

    timing.replay_samples(Graph(), launches=10, samples=2, sustain_s=0.2, replay_estimate_s=0.05)
    assert log[:2] == ["replay", "sync"] and log[2].startswith("sleep:")
    assert log[3:] == ["replay"] * 4 + ["event", "replay", "event"] * 2 + ["sync"]  # 0.2 s / 0.05 s = 4 untimed
    log.clear()
    timing.replay_samples(Graph(), launches=10, samples=1, sustain_s=0.2, replay_estimate_s=1e-9)
    assert log.count("replay") == 1 + timing.MAX_SUSTAIN_REPLAYS + 1  # capped


@pytest.mark.parametrize(
    "per_launch_s, n_sets, expected",
    [
        (3e-6, 1, 334),  # a replay of >= 1 ms
        (3e-6, 10, 340),  # whole passes over the rotating sets
        (5e-3, 2, 2),  # a long kernel: one pass, already over 1 ms
        (1e-9, 1, timing.MAX_GRAPH_LAUNCHES),  # capped
        (1e-9, 7, (timing.MAX_GRAPH_LAUNCHES // 7) * 7),
        (1e-6, 5000, 5000),  # never fewer than one pass
        (0.0, 3, (timing.MAX_GRAPH_LAUNCHES // 3) * 3),
    ],
)
def test_graph_launches(per_launch_s, n_sets, expected):
    n = graph_launches(per_launch_s, n_sets)
    assert n == expected and n % n_sets == 0


def test_host_ahead_sleep_is_bounded():
    assert host_ahead_sleep_s(None) == timing.HOST_AHEAD_MIN_S
    assert host_ahead_sleep_s(20.0) == timing.HOST_AHEAD_MIN_S
    assert host_ahead_sleep_s(1000.0) == pytest.approx(2e-3)
    assert host_ahead_sleep_s(1e6) == timing.HOST_AHEAD_MAX_S


def test_host_us_per_call_syncs_before_every_call():
    log = []

    def fn():
        log.append("call")
        time.sleep(0.001)

    us = host_us_per_call(fn, lambda: log.append("sync"), reps=5)
    assert log == ["sync", "call"] * 5 + ["sync"]
    assert us >= 1000


def test_the_flush_reads_without_writing(monkeypatch):
    """The L2 flush is a read pass: the buffer is unchanged after it (a write would leave dirty
    lines to be written back inside the next sample)."""
    import torch

    monkeypatch.setattr(timing, "FLUSH_BYTES_MIN", 4096)
    f = timing.L2Flusher("cpu", l2_bytes=2048)
    assert f.nbytes == 8192 and f.buf.numel() == 2048
    f.buf[7] = 3.0
    before = f.buf.clone()
    f.flush()
    assert torch.equal(f.buf, before) and float(f._out) == 3.0


def test_crosscheck_asks_do_bench_cudagraph_for_the_median(monkeypatch):
    import triton.testing

    seen = {}

    def fake(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
        seen.update(rep=rep, return_mode=return_mode)
        fn()
        return 0.125  # ms

    monkeypatch.setattr(triton.testing, "do_bench_cudagraph", fake)
    called = []
    assert timing.crosscheck_s(lambda: called.append(1), rep_ms=50) == pytest.approx(125e-6)
    assert seen == {"rep": 50, "return_mode": "median"} and called == [1]


def _clocked_event(clock: dict):
    """A torch.cuda.Event stand-in stamped from ``clock["ms"]`` (a fake GPU clock)."""

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = clock["ms"]

        def elapsed_time(self, other):
            return other.t - self.t

    return Event


def test_graph_size_comes_from_a_pilot_and_replays_last_a_millisecond(monkeypatch):
    """A 3 us kernel over 3 rotating sets: the pilot (whole passes, >= 8 launches) measures 3 us
    per launch, so the timed graph has 334 launches rounded up to whole passes: 336 (1.008 ms)."""
    import torch

    clock = {"ms": 0.0}
    captured = []

    Event = _clocked_event(clock)

    class Graph:
        def __init__(self, launches):
            self.launches = launches

        def replay(self):
            clock["ms"] += self.launches * 3e-3

    def capture(fns, launches):
        captured.append((len(fns), launches))
        return Graph(launches)

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(timing, "gpu_sleep", lambda s: None)
    monkeypatch.setattr(timing, "capture_graph", capture)
    samples, launches, bracket = timing.time_cuda_graph([lambda: None] * 3, min_samples=20, target_total_s=0.25)
    assert bracket is None
    assert captured == [(3, 9), (3, 336)] and launches == 336
    assert len(samples) == sample_count(336 * 3e-6, 0.25, 20) == 100
    assert all(s == pytest.approx(3e-6) for s in samples)


def test_paired_ratios_survive_a_clock_step(monkeypatch):
    """Interleaved pairs A, B: a clock step that slows everything by 20% half-way moves both
    separate medians but not the per-pair ratio (B is 10% slower than A throughout)."""
    import torch

    clock = {"ms": 0.0, "replays": 0, "slow": 1.0}

    Event = _clocked_event(clock)

    class Graph:
        def __init__(self, per_launch_ms, launches):
            self.per_launch_ms, self.launches = per_launch_ms, launches

        def replay(self):
            clock["replays"] += 1
            if clock["replays"] > 231:  # the step: 10 pilot replays, 200 sustained, then mid-pair in the 40 timed
                clock["slow"] = 1.2
            clock["ms"] += self.launches * self.per_launch_ms * clock["slow"]

    def capture(fns, launches):
        return Graph(fns[0].per_launch_ms, launches)

    def fn(ms):
        f = lambda: None  # noqa: E731
        f.per_launch_ms = ms
        return f

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(timing, "gpu_sleep", lambda s: None)
    monkeypatch.setattr(timing, "capture_graph", capture)
    ratios = timing.paired_ratios([fn(0.010)], [fn(0.011)], pairs=20)
    assert len(ratios) == 20 and clock["slow"] == 1.2  # the step happened while timing
    assert sum(r != pytest.approx(1.1) for r in ratios) == 1  # only the pair it split
    assert statistics.median(ratios) == pytest.approx(1.1)
