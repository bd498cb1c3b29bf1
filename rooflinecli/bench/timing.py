"""Timing: CUDA events with an L2 flush, CUDA graphs over rotating inputs for short kernels, and a
wall-clock backend for the CPU (tests under ``TRITON_INTERPRET=1`` only).

Method (``../shared/REFERENCE.md`` section 4):

* warm up first (compilation, autotuning and handle creation stay out of the samples);
* ``cuda_events``: before each sample, write a buffer larger than L2 (256 MB or 4x L2, whichever is
  larger) so the kernel starts with a cold cache; the flush also gives the CPU time to queue the
  launch, so launch latency stays out of the sample;
* ``cuda_graph`` (kernels under ``SHORT_KERNEL_S``): capture ``n`` launches cycling over input sets
  whose total exceeds twice the L2, replay, and divide: launch gaps vanish and every launch reads
  cold data; the L2 is flushed before each replay as well;
* at least ``MIN_SAMPLES`` samples, all kept; quote the median with p20/p80;
* the CUDA error state is checked after the first launch and after every batch of samples
  (``torch.cuda.synchronize`` raises on an asynchronous error).

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rooflinecli.results import quantiles_s

MIN_SAMPLES = 10
#: kernels faster than this are timed with CUDA graphs (launch overhead would dominate otherwise)
SHORT_KERNEL_S = 50e-6
#: smallest L2 flush buffer; 4x the GPU's L2 when that is larger
FLUSH_BYTES_MIN = 256 * 2**20
#: a CUDA graph replays at least this long, so event resolution (~0.5 us) is negligible
GRAPH_REPLAY_TARGET_S = 500e-6
MAX_GRAPH_LAUNCHES = 200


@dataclass(frozen=True)
class Timing:
    """Every sample of one measurement (seconds per launch), and how they were taken."""

    samples_s: tuple[float, ...]
    method: str  # "cuda_events" | "cuda_graph" | "wall_clock"
    note: str = ""

    @property
    def quantiles_s(self) -> tuple[float, float, float]:
        """(p20, p50, p80)."""
        return quantiles_s(self.samples_s)

    @property
    def p50_s(self) -> float:
        return self.quantiles_s[1]


def sample_count(estimate_s: float, target_total_s: float, min_samples: int = MIN_SAMPLES, max_samples: int = 100) -> int:
    """How many samples fit in ``target_total_s`` at ``estimate_s`` each, within [min, max]."""
    if estimate_s <= 0 or not math.isfinite(estimate_s):
        return max_samples
    return int(min(max_samples, max(min_samples, target_total_s // estimate_s)))


# ------------------------------------------------------------------------------------------------
# CPU wall clock (tests only: it times the interpreter, not a GPU)
# ------------------------------------------------------------------------------------------------


def time_wall_clock(
    fn: Callable[[], Any],
    *,
    samples: int = MIN_SAMPLES,
    warmup: int = 1,
    sync: Callable[[], None] | None = None,
) -> Timing:
    """``time.perf_counter`` around synchronized calls. For the CPU pipeline tests; never a GPU
    figure."""
    if samples < 1:
        raise ValueError("samples must be >= 1")
    sync = sync or (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(max(time.perf_counter() - t0, 1e-9))
    return Timing(tuple(out), "wall_clock", "CPU wall clock (perf_counter), not a GPU measurement")


# ------------------------------------------------------------------------------------------------
# CUDA
# ------------------------------------------------------------------------------------------------


class L2Flusher:
    """A device buffer larger than the L2; ``flush()`` writes all of it (a cold cache after)."""

    def __init__(self, device: Any = "cuda", l2_bytes: float | None = None) -> None:
        import torch

        if l2_bytes is None:
            l2_bytes = l2_size_bytes(device)
        self.nbytes = int(max(FLUSH_BYTES_MIN, 4 * (l2_bytes or 0)))
        self.buf = torch.empty(self.nbytes // 4, dtype=torch.int32, device=device)

    def flush(self) -> None:
        self.buf.zero_()


def l2_size_bytes(device: Any = "cuda") -> int:
    """The GPU's L2 size from torch's device properties (0 when unknown)."""
    import torch

    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "L2_cache_size", 0) or 0)


def _events(n: int):
    import torch

    return [torch.cuda.Event(enable_timing=True) for _ in range(n)], [torch.cuda.Event(enable_timing=True) for _ in range(n)]


def time_cuda_events(
    fn: Callable[[], Any],
    flusher: L2Flusher,
    *,
    samples: int = MIN_SAMPLES,
) -> list[float]:
    """One sample per launch of ``fn``, each after an L2 flush; seconds."""
    import torch

    starts, ends = _events(samples)
    for i in range(samples):
        flusher.flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)]


def capture_graph(fns: Sequence[Callable[[], Any]], launches: int):
    """A CUDA graph of ``launches`` calls cycling over ``fns`` (already warmed up)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # torch's recipe: run once on a side stream before capture
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(launches):
            fns[i % len(fns)]()
    torch.cuda.synchronize()
    return graph


def time_cuda_graph(
    fns: Sequence[Callable[[], Any]],
    flusher: L2Flusher,
    *,
    estimate_s: float,
    samples: int = MIN_SAMPLES,
) -> tuple[list[float], int]:
    """Replay a graph of ``launches`` calls (cycling over ``fns``) after an L2 flush; returns the
    per-launch seconds of each replay and the launch count."""
    import torch

    launches = int(min(MAX_GRAPH_LAUNCHES, max(len(fns), math.ceil(GRAPH_REPLAY_TARGET_S / max(estimate_s, 1e-7)))))
    graph = capture_graph(fns, launches)
    graph.replay()  # warm the graph itself (first replay uploads it)
    torch.cuda.synchronize()
    starts, ends = _events(samples)
    for i in range(samples):
        flusher.flush()
        starts[i].record()
        graph.replay()
        ends[i].record()
    torch.cuda.synchronize()
    out = [s.elapsed_time(e) * 1e-3 / launches for s, e in zip(starts, ends)]
    del graph
    return out, launches


def time_cuda(
    fn: Callable[[], Any],
    flusher: L2Flusher,
    *,
    rotating: Callable[[], Sequence[Callable[[], Any]]] | None = None,
    min_samples: int = MIN_SAMPLES,
    target_total_s: float = 0.25,
    warmup: int = 3,
    use_graphs: bool = True,
) -> Timing:
    """Time ``fn``: warm-up, a quick estimate, then CUDA events with an L2 flush per sample.

    A kernel under ``SHORT_KERNEL_S`` is re-timed with a CUDA graph cycling over ``rotating()``
    (the same call on other input sets; built only when needed). If graph capture fails (say, a
    launcher that synchronizes with the host), the event samples stand and the note says that they
    include launch overhead.
    """
    import torch

    fn()
    torch.cuda.synchronize()  # surfaces a failed launch at once, before any sample
    for _ in range(max(0, warmup - 1)):
        fn()
    torch.cuda.synchronize()
    estimate = sorted(time_cuda_events(fn, flusher, samples=3))[1]
    n = sample_count(estimate, target_total_s, min_samples)
    samples = time_cuda_events(fn, flusher, samples=n)
    median = sorted(samples)[len(samples) // 2]
    events_note = f"L2 flushed ({flusher.nbytes / 2**20:.0f} MB) before each sample"
    if not use_graphs or median >= SHORT_KERNEL_S:
        return Timing(tuple(samples), "cuda_events", events_note)
    try:
        fns = list(rotating()) if rotating is not None else [fn]
        n_graph = sample_count(median * 50, target_total_s, min_samples, 50)
        graph_samples, launches = time_cuda_graph(fns, flusher, estimate_s=median, samples=n_graph)
    except Exception as e:  # noqa: BLE001 - any capture failure falls back to the event samples
        try:
            torch.cuda.synchronize()  # an invalidated capture may report its error once more here
        except Exception:  # noqa: BLE001 - a dead context is caught by the runner's next check
            pass
        reason = " ".join(str(e).split())[:160]
        return Timing(
            tuple(samples),
            "cuda_events",
            f"{events_note}; under {SHORT_KERNEL_S * 1e6:.0f} us but graph capture failed "
            f"({type(e).__name__}: {reason}), so samples include launch overhead",
        )
    return Timing(
        tuple(graph_samples),
        "cuda_graph",
        f"CUDA graph of {launches} launches over {len(fns)} rotating input sets, L2 flushed before each replay; "
        f"event-timed median was {median * 1e6:.1f} us per launch",
    )
