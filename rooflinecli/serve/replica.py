"""One engine instance (a replica): its step table, its KV capacity and its memory per GPU.

The KV cache gets what is left of ``memory_fraction`` of each GPU after the weights and the
activation workspace of one token-budget step (the engines' own rule: vLLM's
``gpu_memory_utilization`` and TensorRT-LLM's ``free_gpu_memory_fraction`` default to 0.9, SGLang's
``mem_fraction_static`` to about 0.9 on 80 GB+ GPUs). The engines page the cache, allocating as a
sequence grows, so a running sequence holds its mean context over its life (prompt + half the
output) on average: the KV limit is the free bytes over that (a sequence of the longest context
must fit on its own). Past the limit the engine queues requests (and preempts when growth
overflows, which is not modelled), so concurrency beyond it adds waiting, not throughput.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from rooflinecli.analysis.memory import activation_workspace_bytes_per_gpu, kv_cache_bytes_per_gpu, weights_bytes_per_gpu
from rooflinecli.analysis.workload import Workload, validate_workload
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

from .steps import StepTable, build_step_table

#: the engines' default share of GPU memory for weights + KV cache + workspace (see the module docstring)
DEFAULT_MEMORY_FRACTION = 0.9
#: the scheduler's token budget per step (vLLM's ``max_num_batched_tokens``, TensorRT-LLM's
#: ``max_num_tokens`` and SGLang's ``chunked_prefill_size`` all default to 8,192 on these GPUs)
DEFAULT_TOKEN_BUDGET = 8192


@dataclass
class Replica:
    table: StepTable
    workload: Workload
    kv_limit: int  # sequences at their mean context that fit (all attention-DP groups)
    kv_tokens: int  # tokens the KV cache holds (all groups)
    memory: dict
    notes: list[str] = field(default_factory=list)
    cfg: ModelConfig | None = None

    @property
    def num_gpus(self) -> int:
        return self.workload.num_gpus

    def memory_at(self, running: float) -> dict:
        """Bytes per GPU with ``running`` sequences at their mean context."""
        m = dict(self.memory)
        m["kv_cache_bytes_per_gpu"] = float(kv_cache_bytes_per_gpu(self.cfg, self.workload, self.memory["mean_context_tokens"], max(running, 0.0)))
        m["total_bytes_per_gpu"] = m["weights_bytes_per_gpu"] + m["kv_cache_bytes_per_gpu"] + m["activation_workspace_bytes_per_gpu"]
        return m


def calibration_note(spec: HardwareSpec, engine: str | None, mode: str) -> str | None:
    """A line saying the figures are the roof's when ``engine`` has no calibration on ``spec``."""
    from rooflinecli.predict import ACHIEVABLE

    if mode == ACHIEVABLE or engine is None:
        return None
    return f"no {engine} calibration for {spec.id}: {mode} figures (the roofline), not achievable ones"


def build_replica(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, *, isl: int, osl: int, max_isl: int | None = None,
                  max_context: int | None = None, token_budget: int = DEFAULT_TOKEN_BUDGET,
                  memory_fraction: float = DEFAULT_MEMORY_FRACTION, max_seqs: int | None = None, option: str = "--concurrency") -> Replica:
    """The replica of ``wl`` (tp, ep, dtypes, mode, engine) serving prompts of ``isl`` and outputs of
    ``osl`` tokens (``max_isl`` / ``max_context``: the longest of a stream). Not even one sequence
    fitting is a RooflineError."""
    from rooflinecli.fmt import fmt_bytes
    from rooflinecli.predict import default_engine, resolve_mode

    if not 0.0 < memory_fraction <= 1.0:
        raise RooflineError(f"--memory-fraction must be in (0, 1], got {memory_fraction:g}")
    if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
        raise RooflineError(f"--token-budget must be a whole number of tokens >= 1, got {token_budget!r}")
    wl = validate_workload(replace(wl, batch=1, prompt_len=int(isl), gen_len=int(osl), prefill_chunk_tokens=token_budget))
    engine = default_engine(spec, wl.engine)
    mode = resolve_mode(spec, wl.mode, engine)
    notes = []
    if wl.engine is not None and wl.engine != default_engine(spec):
        note = calibration_note(spec, wl.engine, mode)
        if note:
            notes.append(note)
    max_isl = int(max_isl or isl)
    full = int(max_context or (isl + osl))
    weights = float(weights_bytes_per_gpu(cfg, wl))
    work = float(activation_workspace_bytes_per_gpu(cfg, wl, min(token_budget, max_isl), 1.0))
    budget_bytes = memory_fraction * spec.memory_capacity_bytes
    free = budget_bytes - weights - work
    groups = wl.attention_dp
    mean_ctx = float(isl) + max(osl - 2, 0) / 2.0
    per_seq = float(kv_cache_bytes_per_gpu(cfg, wl, mean_ctx, 1.0))
    per_full = float(kv_cache_bytes_per_gpu(cfg, wl, float(full), 1.0))
    if free <= 0 or per_full > free:
        raise RooflineError(
            f"{cfg.name} on {wl.num_gpus} x {spec.id} (--tp {wl.tp}, --ep {wl.ep}): not even one sequence of {full:,} tokens fits: "
            f"weights {fmt_bytes(weights)} + workspace {fmt_bytes(work)} + KV {fmt_bytes(per_full)} per GPU, "
            f"{fmt_bytes(budget_bytes)} usable ({memory_fraction:g} of {fmt_bytes(spec.memory_capacity_bytes)}); add GPUs (--tp) or shorten the requests"
        )
    kv_limit = int(math.floor(free / per_seq)) * groups
    kv_tokens = int(math.floor(free / per_seq * mean_ctx)) * groups
    if max_seqs is not None:
        kv_limit = min(kv_limit, int(max_seqs))
    table = build_step_table(cfg, spec, wl, max_batch=max(kv_limit, 1), max_context=full, max_tokens=token_budget + max(kv_limit, 1),
                             max_prompt=max(max_isl, 1), mode=mode, engine=engine)
    memory = {"weights_bytes_per_gpu": weights, "activation_workspace_bytes_per_gpu": work, "usable_bytes_per_gpu": budget_bytes,
              "capacity_bytes_per_gpu": float(spec.memory_capacity_bytes), "kv_free_bytes_per_gpu": free,
              "kv_bytes_per_sequence_per_gpu": per_seq, "mean_context_tokens": mean_ctx}
    return Replica(table=table, workload=wl, kv_limit=kv_limit, kv_tokens=kv_tokens, memory=memory, notes=notes, cfg=cfg)
