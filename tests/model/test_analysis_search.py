"""The fast searches of ``analysis.summary`` give exactly what the brute-force ones give: the
compute-bound batch search against a scan of every batch, the KV crossover against a
point-by-point bisection (the implementations they replaced, kept here as references)."""

from __future__ import annotations

import numpy as np
import pytest

from rooflinecli.analysis import Workload
from rooflinecli.analysis.phase import phase_times, sum_ops
from rooflinecli.analysis.summary import decode_compute_bound_batches, kv_crossover_context
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model

CASES = [
    ("llama-3-8b", "h200", Workload(batch=1, prompt_len=1024, gen_len=256)),
    ("llama-3-70b", "h100-sxm", Workload(batch=32, prompt_len=8192, gen_len=512, kv_dtype="fp8", tp=8)),
    ("deepseek-v3", "h200", Workload(batch=4, prompt_len=100_000, gen_len=64, expert_skew=1.5, ep=8, efficiency={"gemm": 0.7})),
    ("mixtral-8x7b", "a100-sxm", Workload(batch=64, prompt_len=512, gen_len=128, weight_dtype="int4", launch_overhead_s=5e-6)),
    ("mistral-7b", "l40s", Workload(batch=8, prompt_len=4096, gen_len=64)),
    ("qwen3-30b-a3b", "mi300x", Workload(batch=16, prompt_len=2048, gen_len=64, kv_bits=4.5)),
]


def scan_compute_bound(cfg, spec, wl, context, max_batch):
    """Reference: every batch 1..max_batch in one pass, the first compute-bound one."""
    batch = np.arange(1, max_batch + 1, dtype=float)
    timed = phase_times(cfg, spec, wl, "decode", batch, float(context))
    out = []
    for subset in (timed, [t for t in timed if t.op.kind in ("gemm", "moe")]):
        idx = np.flatnonzero(sum_ops(subset, batch.shape)["compute_bound"])
        out.append(int(batch[idx[0]]) if idx.size else None)
    return tuple(out)


def bisect_crossover(cfg, spec, wl):
    """Reference: the KV crossover by bisection, one evaluation per step."""

    def diff(N):
        t = sum_ops(phase_times(cfg, spec, wl, "decode", float(wl.batch), np.asarray(N, dtype=float)), np.shape(N))
        return t["kv_read_bytes"] - t["weights_bytes"]

    grid = [2.0**k for k in range(41)]
    diffs = [diff(N) for N in grid]  # one power of two at a time
    if diffs[-1] < 0 or not all(np.isfinite(diffs)):
        return None
    i = next(k for k, v in enumerate(diffs) if v >= 0)
    if i == 0:
        return 1.0
    lo, hi = grid[i - 1], grid[i]
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if diff(mid) >= 0:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-9 * hi:
            break
    return float(0.5 * (lo + hi))


def _case(model, hw, wl):
    cfg = get_model(model)
    return cfg, get_spec(hw), wl


@pytest.mark.parametrize("model,hw,wl", CASES, ids=[c[0] for c in CASES])
def test_compute_bound_batches_equal_a_full_scan(model, hw, wl):
    cfg, spec, wl = _case(model, hw, wl)
    found = []
    for context in (1, 700, wl.prompt_len + wl.gen_len // 2):
        fast = decode_compute_bound_batches(cfg, spec, wl, context)
        assert fast == scan_compute_bound(cfg, spec, wl, context, 1 << 16)
        found += [b for b in fast if b is not None]
    assert found  # the cases do reach compute-bound batches (not all None)


@pytest.mark.parametrize("max_batch", [1, 2, 200, 255, 256, 257, 300, 511, 512, 513, 4099])
def test_compute_bound_batches_edges_of_the_search_grid(max_batch):
    cfg, spec, wl = _case(*CASES[0])
    assert decode_compute_bound_batches(cfg, spec, wl, 100, max_batch) == scan_compute_bound(cfg, spec, wl, 100, max_batch)


def test_compute_bound_batch_inside_a_coarse_bracket():
    """Llama-3-8B on an H200 at context 100: the whole step turns compute-bound past the dense
    prefix (256), so the answer comes from the refined bracket, not a grid point by luck."""
    cfg, spec, wl = _case(*CASES[0])
    step, gemm = decode_compute_bound_batches(cfg, spec, wl, 100)
    assert step > 256 and step % 256 != 0
    assert (step, gemm) == scan_compute_bound(cfg, spec, wl, 100, 1 << 16)


@pytest.mark.parametrize("model,hw,wl", CASES, ids=[c[0] for c in CASES])
def test_kv_crossover_equals_point_by_point_bisection(model, hw, wl):
    cfg, spec, wl = _case(model, hw, wl)
    assert kv_crossover_context(cfg, spec, wl) == bisect_crossover(cfg, spec, wl)
