"""Timing: GPU time, never host time. CUDA-graph replay over rotating inputs, CUDA events with the
host kept ahead of the GPU where a launcher cannot be captured, the host cost of each launcher
beside it, and a wall-clock backend for the CPU (tests under ``TRITON_INTERPRET=1`` only).

Method (``docs/measure.md``, "Timing method"):

* warm up first (compilation, autotuning and handle creation stay out of the samples);
* ``cuda_graph`` (every case whose launcher can be captured): a CUDA graph of ``n`` launches
  cycling over input sets that together exceed the L2 several times, so every launch reads cold
  data and no flush sits inside the timed region; ``n`` is chosen so that one replay lasts at
  least ``GRAPH_REPLAY_TARGET_S``; per-launch time = replay time / n; replays are queued back to
  back behind a GPU sleep, so the GPU never waits for the host, and ``SUSTAIN_S`` of untimed
  replays come first, so the samples see sustained clocks, not a burst; at least ``MIN_SAMPLES``
  replays, all kept;
* ``cuda_events_host_ahead`` (capture raised: a launcher that synchronizes, or calls the host in
  between): per sample, an L2 flush, then ``torch.cuda._sleep`` long enough to cover the
  launcher's host time, then the start event, the call and the end event. The GPU is busy with
  the sleep while the host runs the launcher, so the start event is not stamped until the host is
  ahead. The flush is a read-only pass over a buffer of 4x the L2 (written once, at construction):
  it leaves the L2 full of *clean* lines, so no write-back of the flush lands in the timed region;
* every row also gets ``host_us_per_call``: host (``perf_counter``) microseconds per call of the
  launcher in an eager loop, calls issued back to back while a GPU sleep keeps the GPU busy
  (``host_us_back_to_back``: what an eager decode loop pays per call; the synchronized figure
  when lower, as for a launcher that synchronizes and so waits out the sleep); the note keeps
  the figure with a ``synchronize`` before each call beside it. A launcher that synchronizes with the GPU
  (``.item()``, a host copy) includes that GPU time in its host figure;
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

from rooflinecli import stats
from rooflinecli.results import quantiles_s

#: timed samples per measurement, at least (graph replays or host-ahead events); all are kept
MIN_SAMPLES = 20
#: the one cold-cache rule: rotating input sets (and the flush buffer) span 4x the L2, at most
#: COLD_MAX_SETS sets; 4x, not 3x, because the L2 is not a strict LRU and a 3x rotation lets it keep lines
COLD_L2_MULTIPLE = 4.0
COLD_MAX_SETS = 256
#: smallest L2 flush buffer; COLD_L2_MULTIPLE x the GPU's L2 when that is larger
FLUSH_BYTES_MIN = 256 * 2**20
#: one CUDA graph replay lasts at least this long, so event resolution (~0.5 us) and the replay's
#: own start-up are negligible against it
GRAPH_REPLAY_TARGET_S = 1e-3
MAX_GRAPH_LAUNCHES = 2000
#: kernel timing (bench): untimed replays fill this long before the samples, so every case is timed
#: at the clocks the GPU settles to under load. Measured on the H200 (2026-11-30 run 2): replays
#: taken straight after an idle gap ran compute-bound GEMMs and flash attention 4-11% faster than
#: ``do_bench_cudagraph``'s 10 x 25 ms replays (burst clocks; `calibrate` saw 782 TFLOP/s burst
#: against 671 sustained on 8192^3), memory-bound kernels within 1%
SUSTAIN_S = 0.2
MAX_SUSTAIN_REPLAYS = 1000
#: launches in the pilot graph that estimates the per-launch time (whole passes over the sets)
PILOT_LAUNCHES = 8
#: host-ahead events: the GPU sleep before each start event covers this multiple of the launcher's
#: host time, within [HOST_AHEAD_MIN_S, HOST_AHEAD_MAX_S]
HOST_AHEAD_MARGIN = 2.0
HOST_AHEAD_MIN_S = 100e-6
HOST_AHEAD_MAX_S = 20e-3
#: eager calls whose host time is the median ``host_us_per_call``
HOST_REPS = 7
#: ``host_us_back_to_back``: blocks of this many calls, this many blocks (the median block counts)
HOST_BLOCK = 10
HOST_BLOCKS = 3
#: the GPU sleep under one block covers this multiple of its estimated host time, at most this long
HOST_BLOCK_MARGIN = 3.0
HOST_BLOCK_SLEEP_MAX_S = 50e-3


#: samples on each side of a bracketed figure (``Bracket``): the measurement's last ones, and as
#: many fresh replays of the same graph straight after
BRACKET_SAMPLES = 10
#: untimed replays before the fresh samples of a bracket, seconds (the GPU stays loaded)
BRACKET_SUSTAIN_S = 0.02


@dataclass(frozen=True)
class Bracket:
    """What ``between()`` returned when called straight after a measurement (``--crosscheck``:
    ``do_bench_cudagraph``'s median, seconds), with our own samples just before and just after it.

    A GPU need not hold one clock through a bench run: samples can step down in levels of a few
    percent within 0.1 s (``reports/h200-2026-11-30-run3``). Two figures taken a few hundred ms
    apart then differ by the step, not by their method. ``ours_s``, the median of the samples on both sides, is our
    figure at the moment ``between()`` ran, so ``ours_s / value`` compares the two methods at one
    clock state."""

    value: Any
    before_s: tuple[float, ...]
    after_s: tuple[float, ...]

    @property
    def ours_s(self) -> float:
        return median_s(self.before_s + self.after_s)


@dataclass(frozen=True)
class Timing:
    """Every sample of one measurement (seconds per launch, in the order taken), and how they were
    taken."""

    samples_s: tuple[float, ...]
    method: str  # "cuda_graph" | "cuda_events_host_ahead" | "cuda_events" | "wall_clock"
    note: str = ""
    #: median host microseconds per launcher call (eager loop), None when not measured
    host_us_per_call: float | None = None
    #: with ``time_cuda(between=...)``: its result, bracketed by our samples
    bracket: Bracket | None = None

    @property
    def quantiles_s(self) -> tuple[float, float, float]:
        """(p20, p50, p80)."""
        return quantiles_s(self.samples_s)

    @property
    def p50_s(self) -> float:
        return self.quantiles_s[1]


def cold_sets(set_bytes: float, l2_bytes: float, max_sets: int = COLD_MAX_SETS) -> int:
    """Input sets that together span ``COLD_L2_MULTIPLE`` x the L2 (1 .. ``max_sets``), so every
    launch of a rotation reads data the previous ones evicted."""
    if set_bytes <= 0:
        return 1
    return int(min(max_sets, max(1, math.ceil(COLD_L2_MULTIPLE * l2_bytes / set_bytes))))


def median_s(samples) -> float:
    """The median of ``samples`` as a plain float (``stats.median``: the one median)."""
    return float(stats.median(list(samples)))


def sample_count(estimate_s: float, target_total_s: float, min_samples: int = MIN_SAMPLES, max_samples: int = 100) -> int:
    """How many samples fit in ``target_total_s`` at ``estimate_s`` each, within [min, max]."""
    if estimate_s <= 0 or not math.isfinite(estimate_s):
        return max(max_samples, min_samples)
    return int(min(max(max_samples, min_samples), max(min_samples, target_total_s // estimate_s)))


def graph_launches(per_launch_s: float, n_sets: int, target_s: float = GRAPH_REPLAY_TARGET_S, cap: int = MAX_GRAPH_LAUNCHES) -> int:
    """Launches in one graph: enough for a replay of ``target_s``, a whole number of passes over the
    ``n_sets`` rotating input sets (so each replay reads every set, cold), at most ``cap`` (but at
    least one pass)."""
    n_sets = max(1, n_sets)
    want = math.ceil(target_s / per_launch_s) if per_launch_s > 0 and math.isfinite(per_launch_s) else cap
    passes = math.ceil(max(want, n_sets) / n_sets)
    return max(n_sets, min(passes * n_sets, (cap // n_sets) * n_sets))


def host_ahead_sleep_s(host_us_per_call: float | None) -> float:
    """GPU sleep queued before each host-ahead sample: ``HOST_AHEAD_MARGIN`` x the launcher's host
    time, within [``HOST_AHEAD_MIN_S``, ``HOST_AHEAD_MAX_S``]."""
    host_s = (host_us_per_call or 0.0) * 1e-6
    return min(HOST_AHEAD_MAX_S, max(HOST_AHEAD_MIN_S, HOST_AHEAD_MARGIN * host_s))


def host_us_per_call(fn: Callable[[], Any], sync: Callable[[], None], reps: int = HOST_REPS) -> float:
    """Median host microseconds of one call of ``fn`` (``perf_counter``), each call made with an
    empty launch queue (``sync()`` before it). A launcher that synchronizes includes GPU time."""
    out = []
    for _ in range(max(1, reps)):
        sync()
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    sync()
    return median_s(out)


def host_us_back_to_back(fn: Callable[[], Any], sync: Callable[[], None], estimate_us: float,
                         block: int = HOST_BLOCK, blocks: int = HOST_BLOCKS) -> float:
    """Host microseconds per call of ``fn`` as an eager loop pays them: ``block`` calls issued back
    to back while a GPU sleep (``HOST_BLOCK_MARGIN`` x the block's estimated host time, from
    ``estimate_us``) keeps the GPU busy, so no call waits for the GPU and none follows an idle
    one; the median over ``blocks`` blocks of wall time / ``block``. ``host_us_per_call`` (a
    synchronize before each call) also counts what the first launch after an idle GPU costs: on
    the H200 host 18-40 us more for the attention launchers (run 3, ``host_overhead.txt``)."""
    out = []
    for _ in range(max(1, blocks)):
        sync()
        gpu_sleep(min(HOST_BLOCK_SLEEP_MAX_S, HOST_BLOCK_MARGIN * block * max(estimate_us, 1.0) * 1e-6))
        t0 = time.perf_counter()
        for _ in range(block):
            fn()
        out.append((time.perf_counter() - t0) / block * 1e6)
    sync()
    return median_s(out)


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
    host = median_s(out) * 1e6
    return Timing(tuple(out), "wall_clock", "CPU wall clock (perf_counter), not a GPU measurement", host_us_per_call=host)


def _wall_samples(run: Callable[[], Any], samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        run()
        out.append(time.perf_counter() - t0)
    return out


# ------------------------------------------------------------------------------------------------
# Device-agnostic samplers: CUDA events / graphs on "cuda", the wall clock elsewhere (tests only)
# ------------------------------------------------------------------------------------------------


def eager_samples(fns: Sequence[Callable[[], Any]], samples: int, device: str, *, sync_each: bool = False) -> list[float]:
    """Seconds of ``samples`` single launches cycling over ``fns`` (CUDA events around each, no
    flush; host gaps included). ``sync_each``: a synchronize after every sample (long launches
    such as a whole prefill, one at a time)."""
    fns = list(fns)
    it = iter(range(samples))
    if device != "cuda":
        return _wall_samples(lambda: fns[next(it) % len(fns)](), samples)
    import torch

    starts, ends = _events(samples)
    for i in range(samples):
        starts[i].record()
        fns[i % len(fns)]()
        ends[i].record()
        if sync_each:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)]


def graph_samples(fns: Sequence[Callable[[], Any]], launches: int, replays: int, device: str) -> list[float]:
    """Per-launch seconds of ``replays`` replays of one CUDA graph of ``launches`` calls cycling
    over ``fns``, queued back to back behind a GPU sleep (``replay_samples``); on the CPU the same
    loop of calls under the wall clock."""
    fns = list(fns)
    if device != "cuda":
        def loop() -> None:
            for i in range(launches):
                fns[i % len(fns)]()

        return [t / launches for t in _wall_samples(loop, replays)]
    g = capture_graph(fns, launches)
    try:
        return replay_samples(g, launches, replays)
    finally:
        del g


def series_samples(fn: Callable[[], Any], device: str, chunk: int, chunks: int) -> list[float]:
    """Seconds per launch of ``chunks`` entries, each the mean of ``chunk`` back-to-back launches,
    all queued without a host sync in between (a sustained run: clocks settle as it goes)."""
    def block() -> None:
        for _ in range(chunk):
            fn()

    if device != "cuda":
        return [t / chunk for t in _wall_samples(block, chunks)]
    import torch

    fn()
    torch.cuda.synchronize()
    return [t / chunk for t in eager_samples([block], chunks, device)]


def flushed_sampler(device: str) -> Callable[..., list[float]]:
    """``samples(fn, n, flush=True)`` -> seconds per call: after two warm-up calls, CUDA events
    around single launches with an L2 flush before each (``flush``) on a GPU; the wall clock on the
    CPU (tests only)."""
    if device != "cuda":
        return lambda fn, n, flush=True: list(time_wall_clock(fn, samples=n, warmup=1).samples_s)
    import torch

    flusher = L2Flusher("cuda")

    def samples(fn, n, flush=True):
        fn()
        torch.cuda.synchronize()
        fn()
        if flush:
            return time_cuda_events(fn, flusher, samples=n)
        return eager_samples([fn], n, device)

    return samples


# ------------------------------------------------------------------------------------------------
# CUDA
# ------------------------------------------------------------------------------------------------


class L2Flusher:
    """A device buffer of ``COLD_L2_MULTIPLE`` x the L2 (at least ``FLUSH_BYTES_MIN``), written once here;
    ``flush()`` reads all of it. Reading evicts every line of the kernel under test (dirty lines
    are written back during the flush, not after it) and leaves the L2 holding clean lines of this
    buffer only: nothing from the flush is written back inside the timed region."""

    def __init__(self, device: Any = "cuda", l2_bytes: float | None = None) -> None:
        import torch

        if l2_bytes is None:
            l2_bytes = l2_size_bytes(device)
        self.nbytes = int(max(FLUSH_BYTES_MIN, COLD_L2_MULTIPLE * (l2_bytes or 0)))
        self.buf = torch.ones(self.nbytes // 4, dtype=torch.float32, device=device)
        self._out = torch.empty((), dtype=torch.float32, device=device)

    def flush(self) -> None:
        import torch

        torch.amax(self.buf, dim=0, out=self._out)  # a read-only pass over the whole buffer


def l2_size_bytes(device: Any = "cuda") -> int:
    """The GPU's L2 size from torch's device properties (0 when unknown)."""
    import torch

    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "L2_cache_size", 0) or 0)


def _events(n: int):
    import torch

    return [torch.cuda.Event(enable_timing=True) for _ in range(n)], [torch.cuda.Event(enable_timing=True) for _ in range(n)]


_SLEEP_CYCLES_PER_S: list[float] = []  # measured once per process


def sleep_cycles_per_s() -> float:
    """Clock cycles per second of ``torch.cuda._sleep``, measured once (events around a 2M-cycle
    sleep, median of three)."""
    if not _SLEEP_CYCLES_PER_S:
        import torch

        cycles = 2_000_000
        torch.cuda._sleep(cycles)  # warm (module load)
        starts, ends = _events(3)
        for s, e in zip(starts, ends):
            s.record()
            torch.cuda._sleep(cycles)
            e.record()
        torch.cuda.synchronize()
        secs = sorted(s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends))[1]
        _SLEEP_CYCLES_PER_S.append(cycles / max(secs, 1e-6))
    return _SLEEP_CYCLES_PER_S[0]


def gpu_sleep(seconds: float) -> None:
    """Queue a kernel that keeps the GPU busy for about ``seconds`` (the host returns at once)."""
    import torch

    torch.cuda._sleep(max(1, int(seconds * sleep_cycles_per_s())))


def time_cuda_events(
    fn: Callable[[], Any],
    flusher: L2Flusher,
    *,
    samples: int = MIN_SAMPLES,
) -> list[float]:
    """One sample per launch of ``fn``, each after an L2 flush; seconds. The GPU may wait for the
    host here: ``time_events_host_ahead`` is the GPU-time version."""
    import torch

    starts, ends = _events(samples)
    for i in range(samples):
        flusher.flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)]


def time_events_host_ahead(fn: Callable[[], Any], flusher: L2Flusher, *, samples: int, sleep_s: float) -> list[float]:
    """One sample per launch of ``fn``: flush, GPU sleep of ``sleep_s``, start event, call, end
    event. The host queues the call while the GPU sleeps, so the sample is GPU time."""
    import torch

    starts, ends = _events(samples)
    for i in range(samples):
        flusher.flush()
        gpu_sleep(sleep_s)
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


def replay_samples(graph, launches: int, samples: int, *, sustain_s: float = 0.0, replay_estimate_s: float = 0.0) -> list[float]:
    """Per-launch seconds of ``samples`` replays queued back to back behind a GPU sleep (the host
    stays ahead: no replay waits for a launch). With ``sustain_s``, untimed replays fill that many
    seconds first (``replay_estimate_s`` each), so the samples are taken at the clocks the GPU
    settles to under sustained load rather than in the burst after an idle gap."""
    import torch

    graph.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    starts, ends = _events(samples)
    gpu_sleep(2e-3)
    warm = min(MAX_SUSTAIN_REPLAYS, math.ceil(sustain_s / replay_estimate_s)) if sustain_s > 0 and replay_estimate_s > 0 else 0
    for _ in range(warm):
        graph.replay()
    for i in range(samples):
        starts[i].record()
        graph.replay()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e-3 / launches for s, e in zip(starts, ends)]


def time_cuda_graph(
    fns: Sequence[Callable[[], Any]],
    *,
    min_samples: int = MIN_SAMPLES,
    target_total_s: float = 0.25,
    target_replay_s: float = GRAPH_REPLAY_TARGET_S,
    between: Callable[[], Any] | None = None,
) -> tuple[list[float], int, Bracket | None]:
    """Graph replay over ``fns`` (the same call on rotating input sets): a pilot graph of whole
    passes over the sets (at least ``PILOT_LAUNCHES`` launches) gives the per-launch time, then a
    graph of ``graph_launches`` launches is replayed ``sample_count`` times. With ``between``: it is
    called straight after, then ``BRACKET_SAMPLES`` more replays of the same graph bracket it.
    Returns the per-launch seconds of each replay, the launch count and the bracket (or None)."""
    graph, launches, per_launch = _sized_graph(fns, target_replay_s)
    n = sample_count(per_launch * launches, target_total_s, min_samples)
    replay_s = per_launch * launches
    out = replay_samples(graph, launches, n, sustain_s=SUSTAIN_S, replay_estimate_s=replay_s)
    bracket = None
    if between is not None:
        value = between()
        after = replay_samples(graph, launches, BRACKET_SAMPLES, sustain_s=BRACKET_SUSTAIN_S, replay_estimate_s=replay_s)
        bracket = Bracket(value, tuple(out[-BRACKET_SAMPLES:]), tuple(after))
    del graph
    return out, launches, bracket


#: pairs of interleaved replays in ``paired_ratios``
PAIRS = 20


def _sized_graph(fns: Sequence[Callable[[], Any]], target_replay_s: float):
    """(graph, launches, per-launch estimate s): whole passes over ``fns`` lasting about
    ``target_replay_s`` per replay, sized from a pilot graph as ``time_cuda_graph`` does."""
    fns = list(fns)
    pilot_n = len(fns) * math.ceil(PILOT_LAUNCHES / len(fns))  # amortizes the replay's own start-up
    pilot = capture_graph(fns, pilot_n)
    per_launch = sorted(replay_samples(pilot, pilot_n, 3))[1]
    launches = graph_launches(per_launch, len(fns), target_replay_s)
    graph = pilot if launches == pilot_n else capture_graph(fns, launches)
    return graph, launches, per_launch


def paired_ratios(
    fns_a: Sequence[Callable[[], Any]],
    fns_b: Sequence[Callable[[], Any]],
    *,
    pairs: int = PAIRS,
    target_replay_s: float = GRAPH_REPLAY_TARGET_S,
) -> list[float]:
    """B's per-launch time / A's, once per pair of back-to-back replays A, B (each a graph over its
    own rotating calls, as ``time_cuda_graph`` builds them), after ``SUSTAIN_S`` of alternating
    untimed replays, all queued behind a GPU sleep. Both figures of a pair are taken within a few
    milliseconds of each other, so a clock step shifts both: the ratio is the comparison of two
    implementations that does not depend on when each was measured."""
    import torch

    graph_a, n_a, est_a = _sized_graph(fns_a, target_replay_s)
    graph_b, n_b, est_b = _sized_graph(fns_b, target_replay_s)
    graph_a.replay(), graph_b.replay()
    torch.cuda.synchronize()
    events = _events(2 * pairs + 1)[0]  # boundaries: each replay's end is the next one's start
    gpu_sleep(2e-3)
    warm = min(MAX_SUSTAIN_REPLAYS, math.ceil(SUSTAIN_S / max(est_a * n_a + est_b * n_b, 1e-9)))
    for _ in range(warm):
        graph_a.replay()
        graph_b.replay()
    events[0].record()
    for i in range(pairs):
        graph_a.replay()
        events[2 * i + 1].record()
        graph_b.replay()
        events[2 * i + 2].record()
    torch.cuda.synchronize()
    out = []
    for i in range(pairs):
        t_a = events[2 * i].elapsed_time(events[2 * i + 1]) / n_a
        t_b = events[2 * i + 1].elapsed_time(events[2 * i + 2]) / n_b
        out.append(t_b / t_a)
    del graph_a, graph_b
    return out


def _one_line(e: BaseException, limit: int = 160) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:limit]}"


def time_cuda(
    fn: Callable[[], Any],
    flusher: L2Flusher,
    *,
    rotating: Callable[[], Sequence[Callable[[], Any]]] | None = None,
    min_samples: int = MIN_SAMPLES,
    target_total_s: float = 0.25,
    warmup: int = 3,
    use_graphs: bool = True,
    between: Callable[[], Any] | None = None,
) -> Timing:
    """Time ``fn`` as GPU time: warm-up, the launcher's host time, then graph replay over
    ``rotating()`` (the same call on other input sets; ``[fn]`` when None); if capture raises,
    host-ahead events (the note says why). ``between`` (``--crosscheck``) is called straight after
    the samples and bracketed by ours (``Timing.bracket``)."""
    import torch

    fn()
    torch.cuda.synchronize()  # surfaces a failed launch at once, before any sample
    for _ in range(max(0, warmup - 1)):
        fn()
    torch.cuda.synchronize()
    host_us = host_us_per_call(fn, torch.cuda.synchronize)  # sizes the host-ahead sleep below
    # a launcher that synchronizes waits out the GPU sleep under its block: the lower figure counts
    host_b2b = min(host_us, host_us_back_to_back(fn, torch.cuda.synchronize, host_us))
    host_note = f"; host {host_b2b:.1f} us per call back to back ({host_us:.1f} with a synchronize before each)"
    why = "graphs disabled (--no-graphs)"
    if use_graphs:
        try:
            fns = list(rotating()) if rotating is not None else [fn]
            extra = {"between": between} if between is not None else {}
            samples, launches, bracket = time_cuda_graph(fns, min_samples=min_samples, target_total_s=target_total_s, **extra)
            return Timing(
                tuple(samples),
                "cuda_graph",
                f"CUDA graph of {launches} launches over {len(fns)} rotating input sets, {len(samples)} replays, no flush in the timed region"
                + host_note,
                host_us_per_call=host_b2b,
                bracket=bracket,
            )
        except Exception as e:  # noqa: BLE001 - any capture failure falls back to host-ahead events
            try:
                torch.cuda.synchronize()  # an invalidated capture may report its error once more here
            except Exception:  # noqa: BLE001 - a dead context is caught by the runner's next check
                pass
            why = f"graph capture failed ({_one_line(e)})"
    sleep_s = host_ahead_sleep_s(host_us)
    estimate = sorted(time_events_host_ahead(fn, flusher, samples=3, sleep_s=sleep_s))[1]
    n = sample_count(estimate + sleep_s, target_total_s, min_samples)
    samples = time_events_host_ahead(fn, flusher, samples=n, sleep_s=sleep_s)
    bracket = None
    if between is not None:
        value = between()
        after = time_events_host_ahead(fn, flusher, samples=BRACKET_SAMPLES, sleep_s=sleep_s)
        bracket = Bracket(value, tuple(samples[-BRACKET_SAMPLES:]), tuple(after))
    return Timing(
        tuple(samples),
        "cuda_events_host_ahead",
        f"{why}; CUDA events with the host kept ahead ({sleep_s * 1e6:.0f} us GPU sleep before each start event), "
        f"L2 flushed by a read pass ({flusher.nbytes / 2**20:.0f} MB) before each sleep" + host_note,
        host_us_per_call=host_b2b,
        bracket=bracket,
    )


def crosscheck_s(fn: Callable[[], Any], rep_ms: float = 100.0) -> float:
    """``triton.testing.do_bench_cudagraph``'s median of ``fn``, seconds: an independent figure
    to compare ours with. It replays the same inputs (a warm L2 for inputs under the L2's size)."""
    import inspect

    from triton.testing import do_bench_cudagraph

    kwargs: dict[str, Any] = {"rep": rep_ms}
    if "return_mode" in inspect.signature(do_bench_cudagraph).parameters:
        kwargs["return_mode"] = "median"
    else:  # older Triton: quantiles, the median first
        kwargs["quantiles"] = [0.5]
    ms = do_bench_cudagraph(fn, **kwargs)
    if isinstance(ms, (list, tuple)):
        ms = ms[0]
    return float(ms) * 1e-3
