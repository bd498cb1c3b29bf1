"""What each engine's scheduler does with a step, by default: whether a step that prefills new
prompts also advances the sequences already decoding, and the prompt tokens one step takes.

- vLLM (V1 engine): one unified scheduler; each step schedules the running (decoding) requests
  first, then waiting prompts, chunked, within ``max_num_batched_tokens`` (8,192 for the API server
  on GPUs of 70 GiB or more): prefill and decode mix in a step
  (``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``; ``vllm/engine/arg_utils.py``).
- TensorRT-LLM: in-flight batching; each iteration holds context (prefill) and generation
  requests together, within ``max_num_tokens`` (8,192): prefill and decode mix
  (``tensorrt_llm/_torch/pyexecutor/scheduler.py``; ``tensorrt_llm/llmapi/llm_args.py``).
- SGLang: a step is either a prefill (extend) batch or a decode batch. ``enable_mixed_chunk``
  defaults to False, and ``Scheduler.get_next_batch_to_run`` runs a new prefill batch whenever
  waiting requests can be admitted, before the running decode batch
  (``python/sglang/srt/server_args.py``, ``python/sglang/srt/managers/scheduler.py``). A prefill
  batch takes up to ``chunked_prefill_size`` prompt tokens: 8,192 on GPUs under 160 GiB
  (H100, H200), 16,384 at or above (B200) (``ServerArgs`` post-init, by GPU memory).

An engine not named here is taken to mix, within the given token budget.
"""

from __future__ import annotations

from dataclasses import dataclass

#: SGLang's chunked_prefill_size by GPU memory (see the module docstring)
SGLANG_LARGE_GPU_BYTES = 160 * 1024**3
SGLANG_CHUNK_TOKENS = 8192
SGLANG_LARGE_GPU_CHUNK_TOKENS = 16384


@dataclass(frozen=True)
class StepPolicy:
    """``mixes_decode``: a step that prefills also decodes every running sequence (False: prefill
    steps carry prompt tokens only, and decoding waits); ``prefill_tokens``: prompt tokens one step
    takes at most."""

    mixes_decode: bool
    prefill_tokens: int


def step_policy(engine: str | None, memory_capacity_bytes: float, token_budget: int) -> StepPolicy:
    """The default step policy of ``engine`` on a GPU of ``memory_capacity_bytes``; ``token_budget``
    for engines whose budget is the caller's (vLLM, TensorRT-LLM and the rest)."""
    if engine == "sglang":
        chunk = SGLANG_LARGE_GPU_CHUNK_TOKENS if float(memory_capacity_bytes) >= SGLANG_LARGE_GPU_BYTES else SGLANG_CHUNK_TOKENS
        return StepPolicy(mixes_decode=False, prefill_tokens=chunk)
    return StepPolicy(mixes_decode=True, prefill_tokens=int(token_budget))
