"""The CUDA-only timing branches of the calibration grid, the sustained series and ``e2e --full``,
run on the CPU against a stand-in for CUDA events and graphs (the real ``replay_samples`` and the
callers' arithmetic run; only ``torch.cuda.Event``, ``synchronize``, graph capture and the GPU sleep
are replaced). They run once on a real GPU later: a wrong name or a wrong unit would cost that run."""

from __future__ import annotations

import time

import pytest
import torch

from rooflinecli.bench import timing


class FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.t = None

    def record(self) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, other: "FakeEvent") -> float:  # milliseconds, as CUDA events give
        return (other.t - self.t) * 1e3


class FakeGraph:
    def __init__(self, fns, launches: int) -> None:
        self.fns, self.launches = list(fns), launches
        for i in range(launches):  # "capture" runs each launch once, as torch.cuda.graph does
            self.fns[i % len(self.fns)]()

    def replay(self) -> None:
        for i in range(self.launches):
            self.fns[i % len(self.fns)]()


SLEEP_S = 2e-4


@pytest.fixture
def fake_cuda(monkeypatch):
    calls = {"graphs": []}

    def capture(fns, launches):
        g = FakeGraph(fns, launches)
        calls["graphs"].append(launches)
        return g

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda *a, **k: None)
    monkeypatch.setattr(timing, "capture_graph", capture)
    monkeypatch.setattr(timing, "gpu_sleep", lambda s: None)
    return calls


def sleeper(seconds: float, out=None):
    def fn():
        t = time.perf_counter()
        while time.perf_counter() - t < seconds:
            pass
        return out

    return fn


def test_grid_timer_cuda_branch_gives_seconds_per_launch(fake_cuda):
    from rooflinecli.bench.opgrid import REPLAYS, Timer

    t = Timer("cuda", 60 * 2**20)
    eager = t.eager([sleeper(SLEEP_S), sleeper(SLEEP_S)], 5)
    assert SLEEP_S <= eager < SLEEP_S * 5
    per_launch = t.graph([sleeper(SLEEP_S)] * 3, 6)  # replay / n
    assert SLEEP_S <= per_launch < SLEEP_S * 5
    assert fake_cuda["graphs"] == [6] and REPLAYS >= 7


def test_sustained_series_cuda_branch_is_per_launch(fake_cuda):
    s = timing.series_samples(sleeper(SLEEP_S), "cuda", chunk=4, chunks=3)
    assert len(s) == 3 and all(x >= SLEEP_S for x in s) and sorted(s)[1] < SLEEP_S * 5  # a busy CPU may stretch one


def test_e2e_graph_and_eager_cuda_branches(fake_cuda):
    from rooflinecli.bench.e2e_full import eager_runs, graph_replays

    x = torch.arange(4.0)
    samples, method, last = graph_replays(sleeper(SLEEP_S, x), "cuda", 10)
    assert len(samples) == 10 and all(s >= SLEEP_S for s in samples) and sorted(samples)[5] < SLEEP_S * 5
    assert method.startswith("cuda_graph") and torch.equal(last, x) and last is not x  # copied out of the graph
    samples, method = eager_runs(sleeper(SLEEP_S), "cuda", 4)
    assert len(samples) == 4 and all(s >= SLEEP_S for s in samples) and sorted(samples)[2] < SLEEP_S * 5 and method.startswith("cuda_events")


def test_the_whole_tiny_grid_through_the_cuda_path(fake_cuda):
    """Every case of the tiny grid through ``run_grid(device="cuda")`` (inputs on the CPU): backend
    ranking, sets, launch counts, graph and eager timing, the row fields."""
    from rooflinecli.bench.opgrid import MAX_LAUNCHES, build_grid, run_grid, sets_for

    grid = build_grid(tiny=True)
    l2 = 2**16  # a small L2: the tiny shapes need few rotating sets, so the CPU stand-in stays quick
    res = run_grid(grid, "cuda", l2, budget_s=120, tensor_device="cpu")
    assert res.failed == [] and len(res.rows) == sum(len(v) for v in grid.values())
    mixed = [r for r in res.rows if "t_blocked" in r]  # the mixed-kernel rows: k kernels, two graphs
    assert {r["op"] for r in mixed} == {"launch_floor_mixed", "launch_floor_mixed_gemm"} and len(mixed) == 5
    stream = [r for r in res.rows if r["op"] == "gemm_stream"]  # one pass over distinct weights per launch
    assert [r["shape"]["M"] for r in stream] == [1, 8]
    for r in res.rows:
        assert r["t_graph"] > 0 and r["t_eager"] > 0 and 1 <= r["n"] <= MAX_LAUNCHES and r["n"] >= r["sets"]
        if r in mixed:
            assert r["t_blocked"] > 0 and r["sets"] == r["shape"]["k"] and r["n"] % r["sets"] == 0
            continue
        assert r["sets"] == sets_for(next(c.set_bytes for v in grid.values() for c in v if c.op == r["op"] and c.shape == r["shape"]), l2)
    assert len(fake_cuda["graphs"]) == len(res.rows) + len(mixed)  # one graph per row (two per mixed row): no backend probe captured
    assert all(r["backend"] for r in res.rows if r["op"].startswith("sdpa"))


def test_e2e_full_through_the_cuda_path(fake_cuda, monkeypatch):
    """``run_full(device="cuda")`` with tensors on the CPU: memory plan from ``mem_get_info``,
    backend probe, graph replays with the graph check, eager prefill; Triton left out (the
    interpreter cannot take the CUDA path)."""
    from rooflinecli.bench import e2e_full as E
    from rooflinecli.model_registry import get_model

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (2e9, 4e9))
    cfg = E.tiny_full_config(get_model("qwen2.5-7b"))
    out = E.run_full(cfg, "qwen2.5-7b", "cuda", tiny=True, budget_s=120, triton=False, tensor_device="cpu", replays=7)
    assert out["failed"] == [] and out["skipped"] == []
    dec = [p for p in out["points"] if p["phase"] == "decode"]
    assert len(dec) == len(E.TINY_BATCHES) * len(E.TINY_CONTEXTS)
    assert all(p["method"].startswith("cuda_graph") and len(p["samples_s"]) == 7 and p["graph_check_ok"] for p in dec)
    pre = [p for p in out["points"] if p["phase"] == "prefill"]
    assert pre and all(p["method"].startswith("cuda_events") for p in pre)
    assert len(fake_cuda["graphs"]) == len(dec)
