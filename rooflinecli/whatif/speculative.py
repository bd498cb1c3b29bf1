"""Speculative decoding and multi-token prediction (MTP): tokens per step and net speed-up."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from rooflinecli import formulas
from rooflinecli.errors import RooflineError


@dataclass(frozen=True)
class SpeculativeResult:
    draft_tokens: int
    acceptance: float
    draft_cost_ratio: float  # one draft step's time over one target decode step's time
    expected_tokens_per_step: float  # (1 - a^(k+1)) / (1 - a)
    step_cost_target_steps: float  # v + k*c: verification (v target steps) plus k draft steps
    speedup: float  # expected_tokens_per_step / step_cost_target_steps
    target_step_time_s: float | None = None  # the model's plain decode step, when a model is given
    tpot_s: float | None = None  # effective time per output token with speculation
    draft_cost_source: str = "given"  # "given" | "mtp" (derived from the model's MTP module)
    #: v: the verification pass (k + 1 tokens per sequence) over one plain decode step; 1 without a
    #: model (the memory-bound assumption), else the model's own ratio (``verify_cost``)
    verify_cost_target_steps: float = 1.0

    @property
    def tokens_per_s_per_sequence(self) -> float | None:
        return None if self.tpot_s is None else 1.0 / self.tpot_s

    def to_json(self) -> dict:
        return {**asdict(self), "tokens_per_s_per_sequence": self.tokens_per_s_per_sequence}


def check_inputs(draft_tokens: int, acceptance: float, draft_cost_ratio: float) -> None:
    if draft_tokens < 1:
        raise RooflineError(f"--draft-tokens must be >= 1, got {draft_tokens}")
    if not 0.0 <= acceptance <= 1.0:
        raise RooflineError(f"--acceptance must be in [0, 1], got {acceptance}")
    if not draft_cost_ratio >= 0.0:
        raise RooflineError(f"--draft-cost-ratio must be >= 0, got {draft_cost_ratio}")


def speculative(
    draft_tokens: int,
    acceptance: float,
    draft_cost_ratio: float = 0.0,
    target_step_time_s: float | None = None,
    draft_cost_source: str = "given",
    verify_cost: float = 1.0,
) -> SpeculativeResult:
    """Expected tokens per verification step and speed-up net of the draft's cost and of the
    verification pass's (``verify_cost`` target steps)."""
    check_inputs(draft_tokens, acceptance, draft_cost_ratio)
    tokens = float(formulas.speculative_expected_tokens(acceptance, draft_tokens))
    speedup = float(formulas.speculative_speedup(acceptance, draft_tokens, draft_cost_ratio, verify_cost))
    cost = verify_cost + draft_tokens * draft_cost_ratio
    tpot = None if target_step_time_s is None else target_step_time_s * cost / tokens
    return SpeculativeResult(
        draft_tokens=int(draft_tokens),
        acceptance=float(acceptance),
        draft_cost_ratio=float(draft_cost_ratio),
        expected_tokens_per_step=tokens,
        step_cost_target_steps=cost,
        speedup=speedup,
        target_step_time_s=target_step_time_s,
        tpot_s=tpot,
        draft_cost_source=draft_cost_source,
        verify_cost_target_steps=float(verify_cost),
    )


def speedup_by_draft_tokens(acceptance: float, draft_cost_ratio: float, max_draft_tokens: int = 8,
                            verify_costs: dict | None = None) -> list[tuple[int, float, float]]:
    """(k, expected tokens per step, speed-up) for k = 1..max_draft_tokens: where more drafts stop
    paying. ``verify_costs`` ({k: the verification pass's cost in plain steps}, ``verify_costs``):
    the rows are its k, each at its own cost; None: every k up to the largest at cost 1."""
    import numpy as np

    ks = sorted(verify_costs) if verify_costs else range(1, max_draft_tokens + 1)
    k = np.asarray(list(ks))
    v = np.asarray([verify_costs[i] for i in ks], dtype=float) if verify_costs else np.ones(k.shape)
    tokens = formulas.speculative_expected_tokens(acceptance, k)
    speed = formulas.speculative_speedup(acceptance, k, draft_cost_ratio, v)
    return [(int(a), float(b), float(c)) for a, b, c in zip(k, tokens, speed)]


def verify_costs(cfg, spec, batch: int, context: int, draft_tokens, **kw) -> tuple[float, dict]:
    """(the plain decode step's seconds, {k: verification pass / plain step} for each k of
    ``draft_tokens``): the target model run over k + 1 tokens per sequence at once
    (``Workload.decode_tokens``: the weights and the KV cache read once, the GEMMs and attention
    over k + 1 times the tokens). At batch 1 it stays near 1 (memory-bound); at large batch the
    GEMMs turn compute-bound and the pass costs more plain steps, and an MoE model's k + 1 tokens
    touch more experts: that is where speculation stops paying."""
    step = target_step_time_s(cfg, spec, batch, context, **kw)
    return step, {int(k): target_step_time_s(cfg, spec, batch, context, decode_tokens=int(k) + 1, **kw) / step for k in draft_tokens}


def mtp_module_params(cfg) -> float:
    """Parameters one multi-token-prediction module reads per draft token (DeepSeek-V3 style): one
    more decoder layer (active weights: attention, the MLP or shared + top-k routed experts and
    router, norms), the 2d -> d projection joining hidden state and next-token embedding, its two
    norms, and the shared LM head (the embedding lookup reads one row and is left out)."""
    from rooflinecli import params

    d = cfg.hidden_size
    layer = sum(lin.params for lin in params.attention_linears(cfg)) + params.norm_params_per_layer(cfg)
    if cfg.moe is not None:
        router = params.router_linear(cfg)
        layer += sum(lin.params for lin in params.shared_expert_linears(cfg))
        layer += cfg.moe.top_k * sum(lin.params for lin in params.routed_expert_linears(cfg))
        layer += router.params if router is not None else 0
    else:
        layer += sum(lin.params for lin in params.dense_mlp_linears(cfg))
    return float(layer + 2 * d * d + 2 * d + params.lm_head_matmul_params(cfg))


def mtp_draft_cost_ratio(cfg) -> float:
    """Draft cost c of one MTP module relative to one target decode step, as the ratio of weights
    read (decode is memory-bound): MTP module params / the model's active params without embeddings."""
    from rooflinecli import params

    return mtp_module_params(cfg) / params.active_params(cfg, include_embeddings=False)


def target_step_time_s(cfg, spec, batch: int, context: int, decode_tokens: int = 1, **workload) -> float:
    """The model's decode step time (the analytical model's ``phase_grid``, in the workload's mode)
    at one point: plain (one token per sequence) or a verification pass (``decode_tokens`` per
    sequence). ``workload``: further ``Workload`` fields (compute_dtype, tp, ep, kv_bits, mode, ...)."""
    import numpy as np

    from rooflinecli.analysis import Workload
    from rooflinecli.predict import phase_grid
    from rooflinecli.analysis.workload import validate_workload

    wl = validate_workload(Workload(batch=batch, prompt_len=context, gen_len=1, decode_tokens=decode_tokens, **workload))
    grid = phase_grid(cfg, spec, wl, "decode", np.asarray([batch]), np.asarray([context]))
    return float(np.asarray(grid["time_s"]).reshape(-1)[0])
