"""``roofline kv``: KV-cache bytes per token and for a workload, for a model as configured and for
its MHA / GQA / MQA / MLA / compressed-attention variants (``analysis.with_attention_variant``),
with the context where the KV bytes read per decode step overtake the weight bytes."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

#: Variants shown beside the model as configured.
VARIANTS: tuple[str, ...] = ("mha", "gqa", "mqa", "mla", "compressed")

def describe_attention(cfg: ModelConfig) -> str:
    """Short label of what one layer caches per token: "8 KV x 128", "latent 512+64", plus
    "c4 top-512 +128" for compressed attention and "SWA 4096 (32/32)" for sliding windows."""
    if cfg.mla is not None:
        s = f"latent {cfg.mla.kv_lora_rank}+{cfg.mla.qk_rope_head_dim}"
    else:
        s = f"{cfg.num_kv_heads} KV x {cfg.head_dim}"
    if cfg.compressed is not None:
        c = cfg.compressed
        s += f", c{c.ratio:g} top-{c.top_k if c.top_k is not None else 'all'} +{c.window}"
    if cfg.sliding_window is not None and cfg.sliding_window_layers:
        kind = "chunks" if cfg.window_kind == "chunked" else "SWA"
        s += f", {kind} {cfg.sliding_window} ({len(cfg.sliding_window_layers)}/{cfg.num_layers})"
    return s


def variant_label(cfg: ModelConfig) -> str:
    return "compressed" if cfg.compressed is not None else cfg.attention_kind


@dataclass(frozen=True)
class KVRow:
    variant: str  # "as configured (gqa)", "mha", ...
    attention: str  # describe_attention
    kv_bytes_per_token: float  # one sequence, whole model, uncapped
    kv_cache_bytes: float  # per GPU: B sequences at context N (windows, compression, paging applied; split as --tp/--ep split it)
    kv_read_bytes_per_step: float  # one decode step at context N, B sequences
    weights_bytes_per_step: float  # weights read by that decode step (MoE: experts touched at B)
    decode_step_time_s: float
    crossover_context_tokens: float | None  # N where KV read = weight bytes (analysis.kv_crossover_context); None: never
    kv_cache_vs_configured: float  # this variant's kv_cache_bytes / the configured model's
    fits: bool

    def to_json(self) -> dict:
        return asdict(self)


def _workload(wl_kwargs: dict, batch: int, context: int):
    from rooflinecli.analysis import Workload
    from rooflinecli.analysis.workload import validate_workload

    return validate_workload(Workload(batch=batch, prompt_len=context, gen_len=1, **wl_kwargs))


def decode_point(cfg: ModelConfig, spec: HardwareSpec, wl, batch: int, context) -> dict:
    """phase_grid's decode totals at one batch over one or more contexts (1-D arrays)."""
    from rooflinecli.predict import phase_grid

    ctx = np.atleast_1d(np.asarray(context, dtype=np.int64))
    g = phase_grid(cfg, spec, wl, "decode", np.asarray([batch]), ctx)
    return {k: np.broadcast_to(np.asarray(v), ctx.shape) if np.ndim(v) else np.full(ctx.shape, v) for k, v in g.items()}


def variant_models(cfg: ModelConfig, variants=VARIANTS) -> tuple[list[tuple[str, ModelConfig]], list[str]]:
    """([(label, model)], notes): the configured model first, then each variant (skipping one
    identical to the configured); a variant whose default sizes cannot apply to this model (GQA's
    8 KV heads on 12 heads) is skipped with a note."""
    from rooflinecli.analysis import with_attention_variant
    from rooflinecli.errors import RooflineError

    configured = variant_label(cfg)
    models = [(f"* {configured}", cfg)]
    notes: list[str] = []
    for kind in variants:
        if kind == configured:
            continue  # the configured model already is this variant (its own sizes, not the defaults)
        try:
            models.append((kind, with_attention_variant(cfg, kind)))
        except RooflineError as e:
            notes.append(f"note: variant '{kind}' left out: {e}")
    return models, notes


def kv_rows(cfg: ModelConfig, spec: HardwareSpec, batch: int, context: int, wl_kwargs: dict, variants=VARIANTS) -> list[KVRow]:
    """The rows of ``variant_models`` (its notes are not returned: see that function)."""
    from rooflinecli.analysis import kv_cache_bytes_per_gpu, kv_crossover_context
    from rooflinecli.kv import kv_bytes_per_token

    wl = _workload(wl_kwargs, batch, context)
    b = wl.kv_bytes_per_element
    models, _ = variant_models(cfg, variants)
    rows: list[KVRow] = []
    base_cache = None
    for label, m in models:
        cache = float(kv_cache_bytes_per_gpu(m, wl, context, batch))  # what each GPU holds, as the step's reads are
        if base_cache is None:
            base_cache = cache
        p = decode_point(m, spec, wl, batch, [context])
        rows.append(
            KVRow(
                variant=label,
                attention=describe_attention(m),
                kv_bytes_per_token=float(kv_bytes_per_token(m, b)),
                kv_cache_bytes=cache,
                kv_read_bytes_per_step=float(p["kv_read_bytes"][0]),
                weights_bytes_per_step=float(p["weights_bytes"][0]),
                decode_step_time_s=float(p["time_s"][0]),
                crossover_context_tokens=kv_crossover_context(m, spec, wl),
                kv_cache_vs_configured=cache / base_cache if base_cache else float("nan"),
                fits=bool(p["fits"][0]),
            )
        )
    return rows
