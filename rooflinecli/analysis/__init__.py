"""The analytical inference model: per-op roofline of prefill and decode.

Data flow: ``ModelConfig`` (weights inventory in ``rooflinecli.params``) + ``HardwareSpec`` +
``Workload`` -> ``ops.phase_ops`` (FLOPs and bytes per op, per layer, per GPU, from
``rooflinecli.formulas``) -> ``phase.time_ops`` (compute/memory/comm time per op, bound) ->
``summary`` (op rows, phase totals, the compute-bound and KV-crossover searches). Pure roofline: it
knows nothing of modes or calibrations; ``rooflinecli.predict`` composes it with the calibrated
model (``rooflinecli.achievable``) into TTFT, TPOT and the rest.
"""

from __future__ import annotations

from .memory import (
    activation_workspace_bytes_per_gpu,
    fit_warning,
    kv_cache_bytes_per_gpu,
    max_batch_that_fits,
    max_context_that_fits,
    memory_totals,
    weights_breakdown_per_gpu,
    weights_bytes_per_gpu,
)
from .ops import OpCost, phase_ops
from .phase import phase_times, phase_totals
from .summary import (
    OpRow,
    PhaseResult,
    decode_compute_bound_batch,
    decode_compute_bound_batches,
    kv_crossover_context,
    phase_result,
)
from .variants import VARIANTS, with_attention_variant
from .workload import MLA_DECODE_FORMS, OP_KINDS, Workload, parse_efficiency, validate_workload

__all__ = [
    "MLA_DECODE_FORMS",
    "OP_KINDS",
    "VARIANTS",
    "OpCost",
    "OpRow",
    "PhaseResult",
    "Workload",
    "activation_workspace_bytes_per_gpu",
    "decode_compute_bound_batch",
    "decode_compute_bound_batches",
    "fit_warning",
    "kv_cache_bytes_per_gpu",
    "kv_crossover_context",
    "max_batch_that_fits",
    "max_context_that_fits",
    "memory_totals",
    "parse_efficiency",
    "phase_result",
    "phase_ops",
    "phase_times",
    "phase_totals",
    "validate_workload",
    "weights_breakdown_per_gpu",
    "weights_bytes_per_gpu",
    "with_attention_variant",
]
