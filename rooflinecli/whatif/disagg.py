"""``roofline disagg``: prefill/decode disaggregation. How many prefill and how many decode GPUs
serve ``rate`` requests per second of ``prompt`` input and ``gen`` output tokens within a TTFT and
a TPOT target.

Model (capacity planning, no queueing):

- a prefill instance (``tp`` GPUs) prefills ``b_p`` prompts at once in t_p(b_p) (``phase_grid``,
  prefill); TTFT is taken as t_p(b_p). Candidates: the batches with t_p(b_p) <= the TTFT target
  whose weights + KV cache of the prompts + chunked prefill workspace fit in memory. When one
  instance of some candidate keeps up with the rate (b_p / t_p(b_p) >= rate), b_p is the smallest
  such batch (a light load never forms a large batch, and a smaller one prefills sooner);
  otherwise the candidate with the most requests per second. Instances = ceil(rate * t_p(b_p) / b_p);
- a decode instance runs ``b_d`` sequences; its TPOT is the mean ``phase_grid`` decode step time
  over contexts prompt .. prompt + gen - 1. Candidates: the batches whose TPOT meets the target
  and whose weights + KV cache at the last token + one step's workspace fit in memory. One
  instance finishes b_d / (gen * TPOT) requests per second; b_d is the smallest candidate whose one
  instance keeps up with the rate (Little's law: rate * gen * TPOT sequences in flight), else the
  largest; instances = ceil(rate * gen * TPOT / b_d).

Memory is ``analysis.memory.memory_totals``, as in ``analyze``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

#: decode step times are averaged over at most this many evenly spaced contexts (endpoints kept)
MAX_CONTEXT_SAMPLES = 2048


@dataclass(frozen=True)
class DisaggPlan:
    model: str
    hw: str
    prompt_tokens: int
    gen_tokens: int
    rate_requests_per_s: float
    ttft_target_s: float
    tpot_target_s: float
    gpus_per_instance: int
    feasible: bool
    reason: str  # why not, when infeasible
    prefill_batch: int | None = None
    prefill_time_s: float | None = None  # = TTFT
    prefill_requests_per_s_per_instance: float | None = None
    prefill_instances: int | None = None
    prefill_gpus: int | None = None
    decode_batch: int | None = None
    decode_tpot_s: float | None = None  # mean step time over the generation
    decode_tokens_per_s_per_instance: float | None = None
    decode_requests_per_s_per_instance: float | None = None
    decode_instances: int | None = None
    decode_gpus: int | None = None
    total_gpus: int | None = None
    prefill_to_decode_gpu_ratio: float | None = None

    def to_json(self) -> dict:
        return asdict(self)


def _check(prompt: int, gen: int, rate: float, ttft_target: float, tpot_target: float, max_batch: int) -> None:
    for name, v in (("--prompt", prompt), ("--gen", gen), ("--max-batch", max_batch)):
        if v < 1:
            raise RooflineError(f"{name} must be >= 1, got {v}")
    for name, v in (("--rate", rate), ("--ttft-target", ttft_target), ("--tpot-target", tpot_target)):
        if not v > 0:
            raise RooflineError(f"{name} must be > 0, got {v}")


def candidate_batches(max_batch: int) -> np.ndarray:
    """Every batch 1..max_batch (capped at 4096 candidates, geometric beyond that)."""
    if max_batch <= 4096:
        return np.arange(1, max_batch + 1, dtype=np.int64)
    return np.unique(np.round(np.geomspace(1, max_batch, 4096)).astype(np.int64))


def decode_contexts(prompt: int, gen: int) -> np.ndarray:
    """The contexts of the generation's decode steps, subsampled evenly when there are many."""
    if gen <= MAX_CONTEXT_SAMPLES:
        return np.arange(prompt, prompt + gen, dtype=np.int64)
    return np.unique(np.round(np.linspace(prompt, prompt + gen - 1, MAX_CONTEXT_SAMPLES)).astype(np.int64))


def plan(
    cfg: ModelConfig,
    spec: HardwareSpec,
    wl_kwargs: dict,
    prompt: int,
    gen: int,
    rate: float,
    ttft_target_s: float,
    tpot_target_s: float,
    max_batch: int = 1024,
) -> DisaggPlan:
    from rooflinecli.analysis import Workload, memory_totals
    from rooflinecli.predict import phase_grid
    from rooflinecli.analysis.workload import validate_workload

    _check(prompt, gen, rate, ttft_target_s, tpot_target_s, max_batch)
    wl = validate_workload(Workload(batch=1, prompt_len=prompt, gen_len=gen, **wl_kwargs))
    gpus = wl.num_gpus
    common = dict(
        model=cfg.name, hw=spec.id, prompt_tokens=prompt, gen_tokens=gen, rate_requests_per_s=rate,
        ttft_target_s=ttft_target_s, tpot_target_s=tpot_target_s, gpus_per_instance=gpus,
    )
    B = candidate_batches(max_batch)

    # prefill: the batch with the best request rate among those meeting the TTFT target that fit
    # (weights + the prompts' KV cache + the chunked prefill workspace)
    p = phase_grid(cfg, spec, wl, "prefill", B, np.asarray([prompt]))
    t_p = np.broadcast_to(np.asarray(p["time_s"], dtype=float), B.shape)
    p_fits = np.broadcast_to(memory_totals(cfg, spec, wl, prompt, prompt, B)["fits"], B.shape)
    ok = (t_p <= ttft_target_s) & p_fits
    if not ok.any():
        why = ("does not fit in memory; raise --tp (or --ep for MoE)" if not p_fits[0] else
               f"takes {t_p[0]:.4g} s, above the TTFT target {ttft_target_s:g} s; raise --tp (or --ep for MoE) or the target")
        return DisaggPlan(**common, feasible=False, reason=f"prefill of one {prompt:,}-token prompt on {gpus} GPU(s) {why}")
    rps = np.where(ok, B / t_p, -1.0)
    keeps_up = np.flatnonzero(rps >= rate)
    i = int(keeps_up[0]) if keeps_up.size else int(np.argmax(rps))
    b_p, tp_time, p_rps = int(B[i]), float(t_p[i]), float(rps[i])
    p_inst = max(1, math.ceil(rate / p_rps - 1e-12))

    # decode: the largest batch meeting the TPOT target that fits at the last token
    ctx = decode_contexts(prompt, gen)
    d = phase_grid(cfg, spec, wl, "decode", B[:, None], ctx[None, :])
    step = np.broadcast_to(np.asarray(d["time_s"], dtype=float), (B.size, ctx.size))
    tpot = step.mean(axis=1)
    # a decode instance never prefills: weights + KV at the last token + one step's workspace
    fits = np.broadcast_to(memory_totals(cfg, spec, wl, 1, prompt + gen, B)["fits"], B.shape)
    good = (tpot <= tpot_target_s) & fits
    if not good.any():
        why = "does not fit in memory" if not fits[0] else f"has TPOT {tpot[0]:.4g} s, above the target {tpot_target_s:g} s"
        return DisaggPlan(**common, feasible=False, reason=f"decode at batch 1 {why} on {gpus} GPU(s); raise --tp (or --ep for MoE) or the target",
                          prefill_batch=b_p, prefill_time_s=tp_time, prefill_requests_per_s_per_instance=p_rps,
                          prefill_instances=p_inst, prefill_gpus=p_inst * gpus)
    keeps_up = np.flatnonzero(good & (B / (gen * tpot) >= rate))
    j = int(keeps_up[0]) if keeps_up.size else int(np.nonzero(good)[0][-1])
    b_d, tpot_d = int(B[j]), float(tpot[j])
    d_tps = b_d / tpot_d
    d_rps = d_tps / gen
    d_inst = max(1, math.ceil(rate / d_rps - 1e-12))
    return DisaggPlan(
        **common, feasible=True, reason="",
        prefill_batch=b_p, prefill_time_s=tp_time, prefill_requests_per_s_per_instance=p_rps,
        prefill_instances=p_inst, prefill_gpus=p_inst * gpus,
        decode_batch=b_d, decode_tpot_s=tpot_d, decode_tokens_per_s_per_instance=d_tps,
        decode_requests_per_s_per_instance=d_rps, decode_instances=d_inst, decode_gpus=d_inst * gpus,
        total_gpus=(p_inst + d_inst) * gpus, prefill_to_decode_gpu_ratio=p_inst / d_inst,
    )
