"""``roofline moe``: total vs active parameters, distinct experts touched per layer by the tokens of
one step (uniform routing and a skew), decode bytes and time vs batch, and expert parallelism."""

from __future__ import annotations

import numpy as np

from rooflinecli import formulas, params
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig


def require_moe(cfg: ModelConfig) -> None:
    if cfg.moe is None:
        raise RooflineError(f"model '{cfg.name}' is dense (no experts); roofline moe needs a mixture-of-experts model")


def param_summary(cfg: ModelConfig) -> dict:
    """Total and active parameters per component (active: top-k of the routed experts)."""
    total = params.param_breakdown(cfg)
    active = params.active_param_breakdown(cfg, include_embeddings=True)
    return {
        "total_params": float(sum(total.values())),
        "active_params": float(sum(active.values())),
        "active_params_without_embeddings": float(params.active_params(cfg, include_embeddings=False)),
        "published_total_params": cfg.published_params,
        "published_active_params": cfg.published_active_params,
        "by_component": [{"component": k, "total_params": total[k], "active_params": active[k]} for k in total],
    }


def experts_touched(cfg: ModelConfig, tokens: np.ndarray, skew: float) -> dict:
    """Expected distinct routed experts one MoE layer reads for T tokens: uniform and skewed."""
    m = cfg.moe
    T = np.asarray(tokens, dtype=float)
    uniform = formulas.expected_experts_touched(m.num_routed_experts, m.top_k, T, 1.0)
    skewed = formulas.expected_experts_touched(m.num_routed_experts, m.top_k, T, skew)
    return {"tokens": T, "uniform": uniform, "skewed": skewed}


def decode_by_batch(cfg: ModelConfig, spec: HardwareSpec, wl, batch: np.ndarray, context: int) -> dict[str, np.ndarray]:
    """Decode step totals at each batch (context fixed), from the analytical model's phase_grid."""
    from rooflinecli.predict import phase_grid

    B = np.asarray(batch, dtype=np.int64)
    g = phase_grid(cfg, spec, wl, "decode", B, np.asarray([context]).reshape(1))
    return {k: np.broadcast_to(np.asarray(v), B.shape).reshape(-1) if np.ndim(v) else np.full(B.shape, v) for k, v in g.items()}


def expert_bytes(cfg: ModelConfig, wl) -> float:
    """Bytes of ONE routed expert (all its matrices) as the analytical model counts them: as the
    checkpoint stores them (its quantization_config), else at the workload's weight width (int4:
    with its group scales)."""
    from rooflinecli.analysis.ops import linear_weight_bytes

    return float(sum(linear_weight_bytes(cfg, wl, lin, 1) for lin in params.routed_expert_linears(cfg)))


def check_skew(skew: float, cfg: ModelConfig | None = None) -> None:
    """``--skew``: at least 1, and at most E / k for ``cfg`` (the analysis's own limit, named for
    this command's option)."""
    from rooflinecli.analysis.ops import check_skew_limit

    if not skew >= 1.0:
        raise RooflineError(f"--skew must be >= 1 (1 = uniform routing), got {skew}")
    if cfg is not None:
        check_skew_limit(cfg, skew, "--skew")
