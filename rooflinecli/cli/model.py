"""CLI: ``roofline model list`` and ``roofline model show NAME_OR_CONFIG_PATH``."""

from __future__ import annotations

from dataclasses import asdict
from enum import Enum
from typing import Annotated, Any

import typer

from rooflinecli.fmt import json_dumps

from rooflinecli.cli.options import JsonOption, forgive_model_names
from rooflinecli.errors import RooflineError

model_app = typer.Typer(
    name="model",
    help="Model configs: built-in presets or any Hugging Face config.json; parameters and KV bytes.",
    no_args_is_help=True,
)


class KVDtype(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"
    int8 = "int8"
    int4 = "int4"


KVDtypeOption = Annotated[
    KVDtype | None,
    typer.Option("--kv-dtype", help="KV-cache element type (default bf16).", case_sensitive=False),
]
KVBitsOption = Annotated[
    float | None,
    typer.Option("--kv-bits", help="KV-cache bits per element, any width > 0 (e.g. 3.5); instead of --kv-dtype."),
]


def _kv_choice(kv_dtype: KVDtype | None, kv_bits: float | None) -> tuple[str, float | None, float]:
    """(dtype label, bits or None, bytes per element) from the two options."""
    from rooflinecli.dtypes import kv_bytes_per_element

    if kv_dtype is not None and kv_bits is not None:
        raise RooflineError("give --kv-dtype or --kv-bits, not both")
    if kv_bits is not None:
        return f"{kv_bits:g}-bit", kv_bits, kv_bytes_per_element(kv_bits=kv_bits)
    name = kv_dtype.value if kv_dtype is not None else "bf16"
    return name, None, kv_bytes_per_element(name)


def model_summary(cfg, kv_bytes_per_element: float) -> dict[str, Any]:
    """The figures ``model show --json`` prints beside the config fields."""
    from rooflinecli import kv, params

    stored = params.stored_weight_bytes(cfg)
    return {
        "weight_bytes": sum(stored.values()),
        "weight_bytes_breakdown": stored,
        "attention": cfg.attention_kind,
        "num_moe_layers": cfg.num_moe_layers,
        "num_dense_layers": cfg.num_dense_layers,
        "total_params": params.total_params(cfg),
        "active_params": params.active_params(cfg),
        "active_params_excluding_embeddings": params.active_params(cfg, include_embeddings=False),
        "kv_bytes_per_element": kv_bytes_per_element,
        "kv_bytes_per_token": kv.kv_bytes_per_token(cfg, kv_bytes_per_element),
        "kv_bytes_at_max_context": kv.kv_cache_bytes_for(cfg, cfg.max_position_embeddings, 1, kv_bytes_per_element),
        "mamba_state_bytes_per_sequence": kv.mamba_state_bytes(cfg, kv_bytes_per_element),
        "vision_params": cfg.vision.params if cfg.vision is not None else None,
        "param_breakdown": params.param_breakdown(cfg),
        "active_param_breakdown": params.active_param_breakdown(cfg),
    }


def _human(n: float, unit: str = "") -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {suffix}{unit}"
    return f"{n:.4g}{' ' + unit if unit else ''}"


def _bytes(n: float) -> str:
    """Exact bytes and the decimal figure every other command prints: "131,072 B (131 KB)"."""
    from rooflinecli.fmt import fmt_bytes

    return f"{n:,.0f} B ({fmt_bytes(n)})" if n >= 1e3 else f"{n:,.4g} B"


def _console():
    from rooflinecli.console import make_console

    return make_console()


def list_models(json_out: JsonOption = False) -> None:
    """List the built-in model presets (KV bytes per token at bf16)."""
    from rooflinecli import kv, params
    from rooflinecli.model_registry import all_presets

    rows = []
    for cfg in all_presets():
        rows.append(
            {
                "id": cfg.name,
                "name": cfg.display_name,
                "num_layers": cfg.num_layers,
                "attention": cfg.attention_kind,
                "moe": cfg.moe is not None,
                "total_params": params.total_params(cfg),
                "active_params": params.active_params(cfg),
                "kv_bytes_per_token": kv.kv_bytes_per_token(cfg, 2.0),
                "weight_bytes": sum(params.stored_weight_bytes(cfg).values()),
                "quantization": cfg.quantization.label if cfg.quantization is not None else None,
            }
        )
    if json_out:
        typer.echo(json_dumps(rows))
        return
    from rich import box

    from rooflinecli.console import fit_table

    from rooflinecli.fmt import fmt_bytes

    cols = ["id", "name", "layers", "attention", "total params", "active params", "weights", "KV bytes/token"]
    cells = [[r["id"], r["name"], str(r["num_layers"]), r["attention"] + (" + MoE" if r["moe"] else ""), _human(r["total_params"]),
              _human(r["active_params"]), fmt_bytes(r["weight_bytes"]), f"{r['kv_bytes_per_token']:,.0f}"] for r in rows]
    c = _console()
    c.print(fit_table(c, "Model presets (weights as stored, KV cache at bf16)", cols, cells,
                      justify=["left", "left", "right", "left", "right", "right", "right", "right"], optional=("name", "weights"), box=box.SIMPLE_HEAD))


def show_model(
    name_or_config_path: Annotated[str, typer.Argument(metavar="NAME_OR_CONFIG_PATH", help="Preset id or path to a config.json (or its folder).",
                                                         parser=lambda v: forgive_model_names(v, check=False))],
    kv_dtype: KVDtypeOption = None,
    kv_bits: KVBitsOption = None,
    weight_dtype: Annotated[
        str | None,
        typer.Option("--weight-dtype", help="Weights stored as bf16, fp16, fp32, fp8, int8 or int4 (group-128 scales), "
                     "replacing the checkpoint's own quantization_config."),
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Show one model: config, parameter counts per component, weight bytes as stored (its
    quantization_config read), KV-cache bytes per token."""
    from rooflinecli.model_registry import get_model

    label, bits, b = _kv_choice(kv_dtype, kv_bits)
    if weight_dtype is not None:  # rooflinecli.quant read only then (or for a quantized checkpoint)
        from rooflinecli.quant import plain_weights, weight_dtype_note

        override = plain_weights(weight_dtype)  # a bad dtype: refused before the model loads
    cfg = get_model(name_or_config_path)
    if weight_dtype is not None:
        note = weight_dtype_note(cfg, weight_dtype)
        if note:
            typer.echo(note, err=True)
        cfg = cfg.with_(quantization=override)
    summary = model_summary(cfg, b)
    if json_out:
        out = asdict(cfg)
        out["num_layers"] = cfg.num_layers
        out["kv_dtype"] = label if bits is None else None
        out["kv_bits"] = bits if bits is not None else b * 8
        out.update(summary)
        typer.echo(json_dumps(out))
        return
    _render_show(cfg, summary, label)


def _published(cfg, s: dict[str, Any]) -> str:
    """The publisher's counts and how far ours are from them ("671 B total (ours +0.0%), ...")."""
    vision = s.get("vision_params") or 0.0  # publishers count a multimodal checkpoint's vision tower
    ours = s["total_params"] + vision
    text = f"{_human(cfg.published_params)} total (ours {ours / cfg.published_params - 1:+.1%}" + (" with the vision tower)" if vision else ")")
    if cfg.published_active_params:
        pa = cfg.published_active_params
        text += (
            f", {_human(pa)} active (ours {s['active_params'] / pa - 1:+.1%};"
            f" without embeddings {s['active_params_excluding_embeddings'] / pa - 1:+.1%})"
        )
    return text


def _render_show(cfg, s: dict[str, Any], kv_label: str) -> None:
    from rich.table import Table

    from rooflinecli import params as P

    console = _console()
    t = Table(title=f"{cfg.display_name} ({cfg.name})", show_header=False)
    t.add_column("field")
    t.add_column("value", max_width=100)  # long notes wrap instead of widening the table
    t.add_row("source", cfg.source)
    t.add_row("model type", cfg.model_type)
    t.add_row("layers", f"{cfg.num_layers}" + (f" ({s['num_dense_layers']} dense, {s['num_moe_layers']} MoE)" if cfg.moe else ""))
    t.add_row("hidden size", f"{cfg.hidden_size:,}")
    attn = f"{cfg.attention_kind}: {cfg.num_heads} heads, {cfg.num_kv_heads} KV heads, head dim {cfg.head_dim}"
    if cfg.mla is not None:
        m = cfg.mla
        attn = (
            f"mla: {cfg.num_heads} heads, q_lora {m.q_lora_rank}, kv_lora {m.kv_lora_rank}, "
            f"nope {m.qk_nope_head_dim} + rope {m.qk_rope_head_dim}, v {m.v_head_dim}"
        )
    t.add_row("attention", attn)
    if cfg.sliding_window is not None:
        if cfg.window_kind == "chunked":
            t.add_row("chunked attention", f"{cfg.sliding_window}-token chunks on {len(cfg.sliding_window_layers)} of {cfg.num_layers} layers "
                      "(position p attends the (p mod chunk) + 1 tokens of its chunk; KV allocated for one chunk); full attention on the rest")
        else:
            t.add_row("sliding window", f"{cfg.sliding_window} tokens on {len(cfg.sliding_window_layers)} of {cfg.num_layers} layers")
    if cfg.attention_sinks:
        t.add_row("attention sinks", f"one learned sink logit per head and layer ({cfg.num_heads} a layer; nothing cached)")
    if cfg.parallel_residual:
        t.add_row("block", "parallel attention and MLP (both read the layer's input)")
    if cfg.rotary_dim:
        t.add_row("rotary dim", f"{cfg.rotary_dim} of {cfg.head_dim} per head")
    if cfg.mamba is not None:
        m = cfg.mamba
        t.add_row("Mamba layers", f"{cfg.num_layers - cfg.num_attention_layers} of {cfg.num_layers} (attention on layers "
                  f"{', '.join(map(str, cfg.attention_layers))}): d_state {m.d_state}, d_conv {m.d_conv}, expand {m.expand}, dt_rank {m.dt_rank}")
    t.add_row("MLP", f"{'gated' if cfg.gated_mlp else 'plain'} ({cfg.activation}), width {cfg.intermediate_size:,}")
    if cfg.moe is not None:
        m = cfg.moe
        shared = f" + {m.num_shared_experts} shared (width {m.shared_expert_intermediate_size})" if m.num_shared_experts else ""
        t.add_row("MoE", f"{m.num_routed_experts} routed experts, top-{m.top_k}, width {m.expert_intermediate_size}{shared}")
    t.add_row("vocab", f"{cfg.vocab_size:,}" + (" (tied embeddings)" if cfg.tie_embeddings else ""))
    q = cfg.quantization
    if q is not None:
        t.add_row("quantization", q.label)
        if q.method != "--weight-dtype":
            head = P.lm_head_linear(cfg)
            kept = "embedding, norms, routers" + ("" if head is not None and P.converted_fraction(cfg, head) else ", LM head")
            t.add_row("left 16-bit", kept + (f"; excluded modules: {', '.join(q.excluded)}" if q.excluded else ""))
            t.add_row("compute", f"{q.compute_dtype}: {q.compute_note}")
            if q.kv_cache_dtype:
                t.add_row("KV cache (checkpoint)", f"{q.kv_cache_dtype} scales calibrated; the KV figures here follow --kv-dtype "
                          f"(--kv-dtype {q.kv_cache_dtype} to match)")
    t.add_row("weights stored", _bytes(s["weight_bytes"]))
    rs = cfg.rope_scaling
    t.add_row("max context", f"{cfg.max_position_embeddings:,}" + (f" (RoPE scaling {rs.label})" if rs else ""))
    t.add_row("total params", f"{s['total_params']:,.0f} ({_human(s['total_params'])})")
    t.add_row(
        "active params / token",
        f"{s['active_params']:,.0f} ({_human(s['active_params'])}; {_human(s['active_params_excluding_embeddings'])} without embeddings)",
    )
    if cfg.published_params:
        t.add_row("published", _published(cfg, s))
    for note in cfg.notes:
        t.add_row("note", note)
    t.add_row(f"KV bytes / token ({kv_label})", _bytes(s["kv_bytes_per_token"]))
    if cfg.mamba is not None:
        t.add_row(f"Mamba state / sequence ({kv_label})", _bytes(s["mamba_state_bytes_per_sequence"]) + ", at any context")
    t.add_row(f"KV bytes at {cfg.max_position_embeddings:,} tokens", _bytes(s["kv_bytes_at_max_context"]))
    if cfg.vision is not None:
        v = cfg.vision
        t.add_row("vision tower", (f"{v.params:,.0f} params ({_human(v.params)}); " if v.params is not None else "") + v.note)
    console.print(t)

    b = Table(title="Parameters by component")
    b.add_column("component")
    b.add_column("params", justify="right")
    b.add_column("active params", justify="right")
    b.add_column("% of total", justify="right")
    total = s["total_params"]
    for comp, n in s["param_breakdown"].items():
        if n == 0 and s["active_param_breakdown"][comp] == 0:
            continue
        b.add_row(comp, f"{n:,.0f}", f"{s['active_param_breakdown'][comp]:,.0f}", f"{100 * n / total:.2f}")
    console.print(b)


def register(app: typer.Typer) -> None:
    model_app.command("list")(list_models)
    model_app.command("show")(show_model)
    app.add_typer(model_app, name="model")
