"""NTK-aware RoPE base for a context extension, and the trained-context warning that points to it."""

from __future__ import annotations

import math

from dataclasses import asdict, dataclass

from rooflinecli import formulas
from rooflinecli.errors import RooflineError
from rooflinecli.models import ModelConfig


@dataclass(frozen=True)
class RopeExtension:
    """base' = base * s^(D/(D-2)) for a stretch s = target / trained context, rotary dim D."""

    base: float
    rotary_dim: int
    trained_context_tokens: int
    target_context_tokens: int
    scale: float
    new_base: float
    model: str | None = None
    #: the model's own ``rope_scaling`` (None: unscaled): its type, factor and pre-training context;
    #: the stretch starts from the context the scaled model covers (``trained_context_tokens``)
    rope_scaling_type: str | None = None
    rope_scaling_factor: float | None = None
    original_context_tokens: int | None = None
    #: the ``rope_scaling.factor`` of the same type that covers the target: target / original
    rope_scaling_factor_for_target: float | None = None

    @property
    def needed(self) -> bool:
        return self.scale > 1.0

    def to_json(self) -> dict:
        return {**asdict(self), "needed": self.needed}


#: the largest --base and --scale taken (bases in use are 1e4-1e8, and a config's rope_theta is
#: taken up to 1e30, ``hf_config``; a stretch of 1e6 turns 4k tokens into 4 billion)
MAX_BASE = 1e30
MAX_SCALE = 1e6


def rotary_dim_of(cfg: ModelConfig) -> int:
    """Dimensions RoPE rotates per head: the decoupled RoPE key under MLA, the partial rotary dim
    (Phi, GPT-J, GPT-NeoX), else the head dim."""
    if cfg.mla is not None:
        return cfg.mla.qk_rope_head_dim
    return cfg.rotary_dim or cfg.head_dim


def rope_extension(
    base: float,
    rotary_dim: int,
    trained_context: int,
    target_context: int | None = None,
    scale: float | None = None,
    model: str | None = None,
) -> RopeExtension:
    """The NTK-aware base for stretching ``trained_context`` to ``target_context`` (or by ``scale``).

    A stretch of 1 or less needs no change (new_base = base).
    """
    if not 0 < base <= MAX_BASE:
        raise RooflineError(f"--base must be in (0, {MAX_BASE:g}], got {base}")
    if rotary_dim <= 2 or rotary_dim % 2:
        raise RooflineError(f"--rotary-dim must be an even number above 2, got {rotary_dim}")
    if trained_context is None or trained_context < 1:
        raise RooflineError(f"--trained-context must be >= 1, got {trained_context}")
    if (target_context is None) == (scale is None):
        raise RooflineError("give exactly one of --target-context and --scale")
    if scale is None:
        if target_context < 1:
            raise RooflineError(f"--target-context must be >= 1, got {target_context}")
        scale = target_context / trained_context
    else:
        if not 0 < scale <= MAX_SCALE:
            raise RooflineError(f"--scale must be in (0, {MAX_SCALE:g}], got {scale}")
        target_context = int(round(trained_context * scale))
    try:
        new_base = float(formulas.ntk_rope_base(base, scale, rotary_dim)) if scale > 1.0 else float(base)
    except OverflowError:
        new_base = math.inf
    if not math.isfinite(new_base):
        raise RooflineError(f"the NTK-aware base for base {base:g}, stretch {scale:g} and rotary dim {rotary_dim} overflows a float; "
                            "a smaller --base or stretch")
    return RopeExtension(
        base=float(base),
        rotary_dim=int(rotary_dim),
        trained_context_tokens=int(trained_context),
        target_context_tokens=int(target_context),
        scale=float(scale),
        new_base=new_base,
        model=model,
    )


def rope_for_model(
    cfg: ModelConfig,
    target_context: int | None = None,
    scale: float | None = None,
    base: float | None = None,
    rotary_dim: int | None = None,
    trained_context: int | None = None,
) -> RopeExtension:
    """``rope_extension`` with the base, rotary dim and trained context taken from the model: a
    model with ``rope_scaling`` starts from the context its scaling covers, and the factor of that
    scaling that would cover the target is given beside the NTK-aware base."""
    if base is None:
        if cfg.position_embedding != "rope" or cfg.rope_theta is None:
            raise RooflineError(
                f"model '{cfg.name}' uses {cfg.position_embedding} position embeddings, not RoPE; "
                "pass --base and --rotary-dim to compute a RoPE base anyway"
            )
        base = cfg.rope_theta
    ext = rope_extension(
        base=base,
        rotary_dim=rotary_dim if rotary_dim is not None else rotary_dim_of(cfg),
        trained_context=trained_context if trained_context is not None else cfg.max_position_embeddings,
        target_context=target_context,
        scale=scale,
        model=cfg.name,
    )
    rs = cfg.rope_scaling
    if rs is None:
        return ext
    from dataclasses import replace

    original = rs.original_context or ext.trained_context_tokens / rs.factor  # linear: the context before the stretch
    return replace(ext, rope_scaling_type=rs.kind, rope_scaling_factor=rs.factor, original_context_tokens=rs.original_context,
                   rope_scaling_factor_for_target=max(rs.factor, ext.target_context_tokens / original))


def context_warning(cfg: ModelConfig, context_tokens: int) -> str | None:
    """A one-line warning when ``context_tokens`` exceeds the model's trained limit (a what-if is
    still computed), naming the ``roofline rope`` command and the base it would suggest."""
    limit = cfg.max_position_embeddings
    if context_tokens is None or context_tokens <= limit:
        return None
    msg = (
        f"warning: context {int(context_tokens):,} tokens exceeds {cfg.name}'s trained limit of "
        f"{limit:,} (computed anyway as a what-if)"
    )
    if cfg.position_embedding == "rope" and cfg.rope_theta:
        try:
            ext = rope_for_model(cfg, target_context=int(context_tokens))
        except RooflineError:  # no NTK-aware base for this rotary dim: the warning stands alone
            return msg
        if ext.rope_scaling_type is not None:
            msg += (f"; its {cfg.rope_scaling.label} RoPE scaling would need factor {ext.rope_scaling_factor_for_target:.4g}"
                    f" (or NTK-aware base {ext.new_base:,.0f} on top)")
        else:
            msg += f"; NTK-aware RoPE base {ext.new_base:,.0f} (from {ext.base:,.0f}) would cover it"
        msg += f": roofline rope --model {cfg.name} --target-context {int(context_tokens)}"
    return msg
