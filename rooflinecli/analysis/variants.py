"""Attention variants of one model, for what-ifs (``roofline compare``, ``roofline kv``): the same
model with MHA, GQA, MQA, MLA or DeepSeek-V4-style compressed attention."""

from __future__ import annotations

from rooflinecli.errors import RooflineError
from rooflinecli.models import CompressedAttention, MLAConfig, ModelConfig

VARIANTS: tuple[str, ...] = ("mha", "gqa", "mqa", "mla", "compressed")


def with_attention_variant(cfg: ModelConfig, kind: str, **knobs) -> ModelConfig:
    """``cfg`` with its attention replaced; everything else (layers, MLP, experts, windows) kept.

    Knobs: gqa ``kv_heads`` (default: the model's own when it is GQA, else 8, capped at H);
    mla ``kv_lora_rank`` (4*D), ``qk_rope_head_dim`` (D/2), ``qk_nope_head_dim`` (D),
    ``v_head_dim`` (D), ``q_lora_rank`` (None); compressed ``ratio`` (4), ``top_k`` (512; None =
    attend every entry), ``window`` (128) on top of the model's own attention. Going from MLA to a
    head-based variant uses D = v_head_dim. Unknown kinds or knobs: one-line RooflineError.
    """
    allowed = {
        "mha": set(),
        "gqa": {"kv_heads"},
        "mqa": set(),
        "mla": {"kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank"},
        "compressed": {"ratio", "top_k", "window"},
    }
    if kind not in allowed:
        raise RooflineError(f"unknown attention variant '{kind}'; known: {', '.join(VARIANTS)}")
    bad = set(knobs) - allowed[kind]
    if bad:
        raise RooflineError(f"attention variant '{kind}' takes {', '.join(sorted(allowed[kind])) or 'no options'}; got {', '.join(sorted(bad))}")
    H = cfg.num_heads
    D = cfg.mla.v_head_dim if cfg.mla is not None else cfg.head_dim
    name = f"{cfg.name}[{kind}]"
    if kind == "compressed":
        top_k = knobs.get("top_k", 512)
        c = CompressedAttention(ratio=float(knobs.get("ratio", 4.0)), top_k=None if top_k is None else int(top_k), window=int(knobs.get("window", 128)))
        if not c.ratio >= 1 or (c.top_k is not None and c.top_k < 1) or c.window < 0:
            raise RooflineError(f"compressed attention needs ratio >= 1, top_k >= 1 and window >= 0; got {c}")
        return cfg.with_(name=name, compressed=c)
    if kind == "mla":
        m = MLAConfig(
            q_lora_rank=knobs.get("q_lora_rank"),
            kv_lora_rank=int(knobs.get("kv_lora_rank", 4 * D)),
            qk_nope_head_dim=int(knobs.get("qk_nope_head_dim", D)),
            qk_rope_head_dim=int(knobs.get("qk_rope_head_dim", D // 2)),
            v_head_dim=int(knobs.get("v_head_dim", D)),
        )
        return cfg.with_(name=name, mla=m, num_kv_heads=H, head_dim=m.qk_nope_head_dim + m.qk_rope_head_dim, compressed=None)
    if kind == "mha":
        kv = H
    elif kind == "mqa":
        kv = 1
    else:
        default = cfg.num_kv_heads if cfg.attention_kind == "gqa" else min(8, H)
        kv = int(knobs.get("kv_heads", default))
        if kv < 1 or H % kv:
            raise RooflineError(f"gqa kv_heads {kv} must divide {cfg.name}'s {H} attention heads")
    return cfg.with_(name=name, mla=None, num_kv_heads=kv, head_dim=D, compressed=None)
