"""The calibration grid of ``roofline calibrate``: vendor kernels through torch, timed on cold data,
written by ``bench.calibration_file`` as the calibration file a measured spec names.

Per shape (``measure_case``):

* ``t_graph``: a CUDA graph of ``n`` launches cycling over ``sets`` input sets (together at least
  ``timing.COLD_L2_MULTIPLE`` x the L2, at most ``timing.COLD_MAX_SETS`` sets), replayed ``REPLAYS`` times (>= 7) back to back
  behind a GPU sleep (``timing.replay_samples``); per-launch time = median replay / ``n``. Launch
  gaps vanish, every launch reads data the previous ones evicted;
* ``t_eager``: the CUDA-event median of single launches (host gaps included).

Robust by construction: each shape runs under ``try``; a failure is recorded in ``failed`` and the
grid goes on. Under a time budget (GPU seconds): the categories are visited round-robin, small
shapes first, and no new shape starts once the budget is spent (``skipped`` counts the rest).
torch is imported inside the functions.


The shapes and their FLOPs and bytes: ``bench.op_cases``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rooflinecli.bench import timing
from rooflinecli.bench.op_cases import (
    Case,
    attention_case,
    copy_case,
    elementwise_cases,
    gemm_case,
    gemm_fp8_case,
    gemm_stream_case,
    kv_write_case,
    launch_floor_case,
    launch_floor_mixed_case,
    launch_floor_mixed_gemm_case,
    mla_decode_case,
    moe_grouped_case,
    rope_case,
    rope_qkv_strided_case,
    silu_mul_strided_case,
)

REPLAYS = 7
#: input sets of one shape at most (the cold-cache rule's cap, ``timing.cold_sets``)
MAX_SETS = timing.COLD_MAX_SETS
#: launches per graph at most: one pass over the most sets the cold-cache rule allows
MAX_LAUNCHES = timing.COLD_MAX_SETS
#: input sets and launches per graph at most in a CPU dry run
DRY_RUN_LAUNCHES = 4
#: launches per graph of a mixed-kernel row (``measure_mixed``), a multiple of k
MIXED_LAUNCHES = 128
#: a replay lasts about this long (enough launches that event resolution does not matter)
REPLAY_TARGET_S = 2e-3
#: no single input set above this (bytes): the largest grid shapes stay well inside 141 GB
MAX_SET_BYTES = 12 * 2**30

M_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
#: (name prefix, preset id) whose projection shapes the GEMM grid covers
GEMM_PRESETS = (("llama8b", "llama-3-8b"), ("llama70b", "llama-3-70b"), ("qwen7b", "qwen2.5-7b"))
SQUARE = (1024, 2048, 4096, 8192)
ELEMENTWISE_T = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)
#: (H, KVH, D) of the attention grid: Llama-3-8B, Llama-3-70B, Qwen2.5-7B, MHA, head dim 64
ATTN_HEADS = ((32, 8, 128), (64, 8, 128), (28, 4, 128), (32, 32, 128), (32, 8, 64))
PREFILL_S = (256, 512, 1024, 2048, 4096, 8192)
PREFILL_TOKENS = 16384  # the batched prefill point: B = tokens / S
DECODE_B = (1, 8, 32, 64, 128)
#: the decode step's small ops on their real layouts (``e2e_full``): tokens (decode batches and
#: prefill lengths), (H, KVH, D) of the qkv output, F of the gate_up output, cache batches
STRIDED_T = (1, 8, 32, 64, 512, 2048)
STRIDED_HEADS = ((32, 8, 128), (64, 8, 128))
STRIDED_F = (14336, 28672, 18944)
KV_WRITE_B = (1, 8, 32, 64)
#: cache positions of the KV-write cases (the write's cost does not depend on it; the smallest e2e context)
KV_WRITE_N = 512
DECODE_S = (512, 1024, 2048, 4096, 8192, 16384)
MIXED_K = (2, 4, 8)
#: the GEMMs of ``launch_floor_mixed_gemm`` (M, N, K): a tiny one (what the fit uses) and, as a
#: diagnostic, a decode-sized one (Llama-3-8B's o projection at batch 1: ~14 us), whether a
#: switch still shows behind a long kernel
MIXED_GEMMS = ((1, 256, 256), (1, 4096, 4096))
COPY_BYTES = tuple(4096 * 4**k for k in range(10))  # 4 KiB .. 1 GiB
#: absorbed MLA decode: (heads, batches) at R 512, P 64 over MLA_S cached tokens
MLA_SHAPES = ((16, (1, 8, 32)), (128, (1, 8)))
MLA_S = (1024, 8192, 32768)
#: ``moe_grouped``: a torch MoE layer's routed experts (``kernels.moe_torch``: routing, then
#: torch._grouped_mm over expert-sorted slots) at Mixtral 8x7B's and Qwen3-30B-A3B's expert shapes
#: (E, k, d, I), decode to prefill token counts (grouped kernels run far below dense-GEMM efficiency
#: at prefill: H200 run 2's bench, Qwen3 at 4,096 tokens: 1,391 us against 552 from the dense fit)
MOE_SHAPES = ((8, 2, 4096, 14336), (128, 8, 2048, 768))
MOE_T = (1, 4, 16, 64, 256, 1024, 4096)
#: ``gemm_stream``: decode-sized GEMMs over ``STREAM_LAYERS`` layers of distinct Llama-3-8B weights
#: (qkv, o, gate_up, down: 436 MB a layer; 32 layers, 14 GB, as many as the model has) in one pass,
#: as a decode step streams them (more than any TLB or cache could keep between passes)
STREAM_M = (1, 8, 32, 64)
STREAM_LAYERS = 32

@dataclass
class GridResult:
    rows: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    elapsed_s: float = 0.0


# ------------------------------------------------------------------------------------------------
# The grid
# ------------------------------------------------------------------------------------------------


def projection_shapes(cfg) -> list[tuple[str, int, int]]:
    """(projection, N, K) of a dense model's linears: fused qkv, o, fused gate_up, down, lm_head."""
    d, H, Hkv, D, F = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size
    return [("qkv", (H + 2 * Hkv) * D, d), ("o", d, H * D), ("gate_up", 2 * F if cfg.gated_mlp else F, d), ("down", d, F), ("lm_head", cfg.vocab_size, d)]


def stream_grid(tiny: bool = False) -> dict[str, list[Case]]:
    """``gemm_stream`` at the decode batches ``STREAM_M`` (Llama-3-8B widths; ``tiny``: CPU sizes)."""
    if tiny:
        return {"gemm_stream": [gemm_stream_case(M, 2, 64, 96, 96) for M in (1, 8)]}
    return {"gemm_stream": [gemm_stream_case(M, STREAM_LAYERS, 4096, 14336, 6144) for M in STREAM_M]}


def mixed_grid() -> dict[str, list[Case]]:
    """The graph's per-kernel cost when consecutive kernels differ: one small category placed right
    after the launch floor (5 cases, two graphs of 128 launches each: ~4 ms of GPU time in all)."""
    return {"floor_mixed": [launch_floor_mixed_case(k) for k in MIXED_K] + [launch_floor_mixed_gemm_case(*mnk) for mnk in MIXED_GEMMS]}


def strided_grid(tokens=STRIDED_T, heads=STRIDED_HEADS, widths=STRIDED_F, batches=KV_WRITE_B, N: int = KV_WRITE_N) -> dict[str, list[Case]]:
    """The decode step's RoPE, SiLU*mul and KV write on their real layouts: three small categories
    placed right after the launch floor, so the round-robin reaches all of them early."""
    return {
        "rope_qkv_strided": [rope_qkv_strided_case(T, H, KVH, D) for H, KVH, D in heads for T in tokens],
        "silu_mul_strided": [silu_mul_strided_case(T, F_) for F_ in widths for T in tokens],
        "kv_write": [kv_write_case(B, H, KVH, N, D) for H, KVH, D in heads[:1] for B in batches],
    }


#: fp8 GEMM rows (``gemm_fp8``): tokens x Llama-3-8B's qkv, gate_up and down, and two squares;
#: M a multiple of 16 (``torch._scaled_mm``'s rule)
FP8_M = (16, 256, 4096)
FP8_SQUARE = (4096, 8192)


def build_grid(tiny: bool = False, presets: tuple[tuple[str, str], ...] = GEMM_PRESETS) -> dict[str, list[Case]]:
    """The grid by category, each sorted small to large. ``tiny``: a few small shapes (CPU tests)."""
    from rooflinecli.model_registry import get_model

    if tiny:
        return {
            "floor": [launch_floor_case()],
            **mixed_grid(),
            **stream_grid(tiny=True),
            **strided_grid((1, 4), ((4, 2, 64),), (96,), (1, 2), 16),
            "gemm": [gemm_case(M, 96, 64, "tiny.qkv") for M in (1, 8, 32)] + [gemm_case(64, 64, 64, "square")],
            "elementwise": [c for T in (1, 16) for c in elementwise_cases(T, 64, 96)] + [rope_case(4, 3, 64)],
            "copy": [copy_case(b) for b in (4096, 65536)],
            "decode": [attention_case("sdpa_decode", 2, 4, 2, 64, 64)],
            "prefill": [attention_case("sdpa_prefill_causal", 1, 4, 2, 32, 64)],
            "mla": [mla_decode_case(B, 4, 64, 64, 16) for B in (1, 2, 3)],
            "moe": [moe_grouped_case(T, 8, 2, 64, 96) for T in (1, 4, 16, 64)],
        }
    gemm = []
    for prefix, preset in presets:
        cfg = get_model(preset)
        for proj, N, K in projection_shapes(cfg):
            gemm += [gemm_case(M, N, K, f"{prefix}.{proj}") for M in M_GRID]
    gemm += [gemm_case(n, n, n, "square") for n in SQUARE]
    fp8 = [gemm_fp8_case(M, N, K, f"llama-3-8b.{proj}") for proj, N, K in projection_shapes(get_model("llama-3-8b"))
           if proj in ("qkv", "gate_up", "down") for M in FP8_M]
    fp8 += [gemm_fp8_case(n, n, n, "square") for n in FP8_SQUARE]
    elem = [c for T in ELEMENTWISE_T for D, F_ in ((4096, 14336), (8192, 28672)) for c in elementwise_cases(T, D, F_)]
    elem += [rope_case(T, 48, 128) for T in ELEMENTWISE_T]  # q + k heads of Llama-3-8B (32 + 8), rounded
    decode = [attention_case("sdpa_decode", B, H, KVH, S, D) for H, KVH, D in ATTN_HEADS for B in DECODE_B for S in DECODE_S
              if 4 * B * KVH * S * D <= MAX_SET_BYTES]
    prefill = []
    for H, KVH, D in ATTN_HEADS:
        for S in PREFILL_S:
            for B in sorted({1, max(1, PREFILL_TOKENS // S)}):
                prefill.append(attention_case("sdpa_prefill_causal", B, H, KVH, S, D))
    mla = [mla_decode_case(B, H, S) for H, batches in MLA_SHAPES for B in batches for S in MLA_S]
    moe = [moe_grouped_case(T, E, k, d, I) for E, k, d, I in MOE_SHAPES for T in MOE_T]
    grid = {"floor": [launch_floor_case()], **mixed_grid(), **stream_grid(), **strided_grid(), "gemm": gemm, "elementwise": elem,
            "copy": [copy_case(b) for b in COPY_BYTES], "decode": decode, "prefill": prefill, "gemm_fp8": fp8, "mla": mla, "moe": moe}
    return {k: sorted(v, key=lambda c: c.cost_s) for k, v in grid.items()}


def round_robin(grid: dict[str, list[Case]]) -> Iterator[Case]:
    """One case of each category in turn (small first), so a budget cut leaves every category some."""
    queues = [list(v) for v in grid.values()]
    while any(queues):
        for q in queues:
            if q:
                yield q.pop(0)


# ------------------------------------------------------------------------------------------------
# Timing one case
# ------------------------------------------------------------------------------------------------


def sets_for(set_bytes: float, l2_bytes: int) -> int:
    """Input sets of one shape: the one cold-cache rule (``timing.cold_sets``)."""
    return timing.cold_sets(set_bytes, l2_bytes, MAX_SETS)


def launches_for(estimate_s: float, sets: int) -> int:
    """Launches per graph: a replay of about ``REPLAY_TARGET_S``, at least one pass over the sets."""
    want = math.ceil(REPLAY_TARGET_S / max(estimate_s, 1e-7))
    return int(min(MAX_LAUNCHES, max(sets, want, 1)))


class Timer:
    """The grid's settings for the one timer (``bench.timing``): the device ("cuda"; "cpu": the
    wall clock, for dry runs only), the L2 size, and how many replays and eager samples a shape gets."""

    def __init__(self, device: str, l2_bytes: int, replays: int = REPLAYS, eager_samples: int = 10, tensor_device: str | None = None) -> None:
        self.device, self.l2_bytes, self.replays, self.eager_samples = device, l2_bytes, replays, eager_samples
        #: where inputs live: ``device`` (tests pass "cpu" to run the CUDA timing path on stand-ins)
        self.tensor_device = tensor_device or device

    def sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def eager(self, fns: list[Callable[[], Any]], samples: int) -> float:
        """Median seconds of single launches, cycling over ``fns``."""
        return timing.median_s(timing.eager_samples(fns, samples, self.device))

    def graph(self, fns: list[Callable[[], Any]], n: int) -> float:
        """Median per-launch seconds over ``replays`` replays of a graph of ``n`` launches."""
        return timing.median_s(timing.graph_samples(fns, n, self.replays, self.device))


def _fns(case: Case, sets: int, device: str, gen, **kw) -> list[Callable[[], Any]]:
    fns = [case.make(device, gen, **kw) for _ in range(sets)]
    for f in fns:
        f()
    return fns


def _rank_backends(case: Case, timer: Timer, gen) -> tuple[list[tuple[str, bool]], str]:
    """SDPA paths that ran ``case``, fastest first (eager-timed on one set), and a note of the times."""
    tried: dict[tuple[str, bool], float] = {}
    errors: list[str] = []
    for b in case.backends:
        for expand in (False, True):
            if expand and (case.shape["KVH"] == case.shape["H"] or case.set_bytes * case.shape["H"] / case.shape["KVH"] > MAX_SET_BYTES):
                continue  # nothing to expand, or the expanded K/V would not be a sane allocation
            label = f"{b}{'+expanded_kv' if expand else ''}"
            try:
                fns = _fns(case, 1, timer.tensor_device, gen, backend=b, expand=expand)
                timer.sync()
                tried[(b, expand)] = timer.eager(fns, 3)
                del fns
                break  # GQA worked natively on this backend: no need to expand
            except Exception as e:  # noqa: BLE001 - a backend that cannot run this shape is skipped
                errors.append(f"{label}: {type(e).__name__}")
                _recover(timer)
    if not tried:
        raise RuntimeError("no SDPA backend ran this shape (" + "; ".join(errors)[:300] + ")")
    ranked = sorted(tried, key=tried.get)
    note = "eager ms per backend: " + ", ".join(f"{b}{'+expanded_kv' if x else ''} {tried[(b, x)] * 1e3:.3g}" for b, x in ranked)
    if errors:
        note += "; not runnable: " + ", ".join(errors)
    return ranked, note


def _recover(timer: Timer) -> None:
    try:
        timer.sync()
    except Exception:  # noqa: BLE001 - a sticky error surfaces at the next case, which records it
        pass


def _time_sets(case: Case, timer: Timer, gen, **kw) -> tuple[float, float, int, int]:
    """(t_graph, t_eager, n, sets) of ``case`` on cold input sets."""
    sets = sets_for(case.set_bytes, timer.l2_bytes)
    if timer.device != "cuda":  # a CPU dry run checks the code path, it measures nothing: a few sets
        sets = min(sets, DRY_RUN_LAUNCHES)
    fns = _fns(case, sets, timer.tensor_device, gen, **kw)
    timer.sync()
    t_eager = timer.eager(fns, timer.eager_samples if case.cost_s < 1e-3 else 5)
    n = launches_for(t_eager, sets)  # the eager time bounds the launch from above
    if timer.device != "cuda":
        n = min(n, DRY_RUN_LAUNCHES)
    return timer.graph(fns, n), t_eager, n, sets


def measure_mixed(case: Case, timer: Timer, gen) -> dict[str, Any]:
    """A mixed-kernel row: per-kernel seconds of the case's k distinct kernels in one graph of
    ``MIXED_LAUNCHES`` (rounded down to a multiple of k) launches, interleaved (``t_graph``: each
    kernel follows a different one) and grouped (``t_blocked``: each kernel repeated, as in every
    other row); ``t_eager``: single launches cycling over them."""
    fns = case.make_kernels(timer.tensor_device, gen)
    for f in fns:
        f()
    timer.sync()
    k = len(fns)
    reps = MIXED_LAUNCHES // k if timer.device == "cuda" else 2
    n = k * reps
    t_eager = timer.eager(fns, timer.eager_samples)
    t_mixed = timer.graph(fns, n)
    t_blocked = timer.graph([f for f in fns for _ in range(reps)], n)  # i % n: A..A B..B ...
    row: dict[str, Any] = {"op": case.op, "shape": dict(case.shape), "flops": case.flops, "bytes": case.bytes,
                           "t_graph": t_mixed, "t_blocked": t_blocked, "t_eager": t_eager, "n": n, "sets": k}
    if case.note:
        row["note"] = case.note
    return row


def measure_case(case: Case, timer: Timer, gen) -> dict[str, Any]:
    """One calibration row (raises on failure; ``run_grid`` records it). SDPA: the fastest backend
    whose graph capture works (a backend that fails capture gives way to the next)."""
    if case.make_kernels is not None:
        return measure_mixed(case, timer, gen)
    notes = [case.note] if case.note else []
    if case.backends:
        ranked, how = _rank_backends(case, timer, gen)
        notes.append(how)
        last: Exception | None = None
        for backend, expand in ranked:
            try:
                t_graph, t_eager, n, sets = _time_sets(case, timer, gen, backend=backend, expand=expand)
                break
            except Exception as e:  # noqa: BLE001 - e.g. a capture this backend does not support
                last = e
                notes.append(f"{backend}: graph timing failed ({type(e).__name__})")
                _recover(timer)
        else:
            raise RuntimeError(f"graph timing failed on every backend: {type(last).__name__}: {last}")
        case.backend = backend + (" (K/V expanded to H heads, not timed)" if expand else "")
    else:
        t_graph, t_eager, n, sets = _time_sets(case, timer, gen)
    row: dict[str, Any] = {"op": case.op}
    if case.name:
        row["name"] = case.name
    row.update(shape=dict(case.shape), flops=case.flops, bytes=case.bytes, t_graph=t_graph, t_eager=t_eager, n=n, sets=sets)
    if notes:
        row["note"] = "; ".join(notes)
    if case.backend:
        row["backend"] = case.backend
    return row


def run_grid(
    grid: dict[str, list[Case]],
    device: str,
    l2_bytes: int,
    budget_s: float,
    on_case: Callable[[int, int, Case], None] | None = None,
    seed: int = 1234,
    on_checkpoint: Callable[[GridResult], None] | None = None,
    checkpoint_every_s: float = 5.0,
    tensor_device: str | None = None,
) -> GridResult:
    """Every case of ``grid`` in round-robin order until ``budget_s`` (wall seconds) is spent;
    ``on_checkpoint(result so far)`` at most every ``checkpoint_every_s``."""
    import torch

    out = GridResult()
    timer = Timer(device, l2_bytes, tensor_device=tensor_device)
    gen = torch.Generator().manual_seed(seed)
    cases = list(round_robin(grid))
    t0 = last = time.monotonic()
    for i, case in enumerate(cases):
        if time.monotonic() - t0 >= budget_s:
            out.skipped = len(cases) - i
            break
        if on_case is not None:
            on_case(i, len(cases), case)
        try:
            out.rows.append(measure_case(case, timer, gen))
        except Exception as e:  # noqa: BLE001 - one failing shape never stops the grid
            _recover(timer)
            out.failed.append({"op": case.op, "shape": dict(case.shape), "error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"})
        finally:
            if device == "cuda":
                torch.cuda.empty_cache()
        if on_checkpoint is not None and time.monotonic() - last >= checkpoint_every_s:
            out.elapsed_s = time.monotonic() - t0
            on_checkpoint(out)
            last = time.monotonic()
    out.elapsed_s = time.monotonic() - t0
    return out


