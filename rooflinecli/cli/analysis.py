"""CLI: focused what-if commands: ``kv``, ``moe``, ``attention-io``, ``compare``, ``rope``,
``speculative`` and ``disagg``.

Each command parses its options, calls ``rooflinecli.whatif`` / ``rooflinecli.analysis``, and
renders either JSON (``--json``, units in every key) or a rich table. Bad input raises
``RooflineError`` in the library; the root app turns it into ``error: <line>`` and exit 2.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from rooflinecli.cli.options import HwOption, JsonOption
from rooflinecli.errors import RooflineError

# ------------------------------------------------------------------------------------------------
# Rendering helpers
# ------------------------------------------------------------------------------------------------


def _echo_json(obj) -> None:
    typer.echo(json.dumps(obj, indent=2, default=_json_default))


def _json_default(x):
    import numpy as np

    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serializable: {type(x).__name__}")


def _console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def _table(title: str, columns: list[str], rows: list[list[str]], caption: str | None = None):
    from rich.table import Table

    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    for i, c in enumerate(columns):
        t.add_column(c, justify="left" if i == 0 else "right")
    for r in rows:
        t.add_row(*r)
    return t


def _warn(msg: str | None) -> None:
    if msg:
        typer.echo(msg, err=True)


def fmt_bytes(n: float) -> str:
    """Decimal units (GB = 1e9), as GPU datasheets print them."""
    n = float(n)
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    s = float(s)
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"


def fmt_count(n: float) -> str:
    n = float(n)
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.4g}{unit}"
    return f"{n:.4g}"


# ------------------------------------------------------------------------------------------------
# roofline rope
# ------------------------------------------------------------------------------------------------


def rope_cmd(
    model: Annotated[str | None, typer.Option("--model", help="Model preset id or config.json path (gives base, rotary dim, trained context).")] = None,
    target_context: Annotated[int | None, typer.Option("--target-context", help="Context to reach, tokens.")] = None,
    scale: Annotated[float | None, typer.Option("--scale", help="Stretch factor s instead of --target-context.")] = None,
    base: Annotated[float | None, typer.Option("--base", help="RoPE base (theta); default: the model's.")] = None,
    rotary_dim: Annotated[int | None, typer.Option("--rotary-dim", help="Rotated dims per head; default: the model's head dim (MLA: its RoPE dim).")] = None,
    trained_context: Annotated[int | None, typer.Option("--trained-context", help="Trained context, tokens; default: the model's max_position_embeddings.")] = None,
    as_json: JsonOption = False,
) -> None:
    """NTK-aware RoPE base for a context extension: base' = base * s^(D/(D-2))."""
    from rooflinecli.whatif.rope import rope_extension, rope_for_model

    if model is not None:
        from rooflinecli.model_registry import get_model

        ext = rope_for_model(get_model(model), target_context, scale, base, rotary_dim, trained_context)
    else:
        if base is None or rotary_dim is None or trained_context is None:
            raise RooflineError("give --model, or all of --base, --rotary-dim and --trained-context")
        ext = rope_extension(base, rotary_dim, trained_context, target_context, scale)
    if as_json:
        _echo_json(ext.to_json())
        return
    c = _console()
    who = f"{ext.model}: " if ext.model else ""
    c.print(
        f"{who}stretch {ext.trained_context_tokens:,} -> {ext.target_context_tokens:,} tokens "
        f"(s = {ext.scale:.4g}), rotary dim {ext.rotary_dim}"
    )
    if ext.needed:
        c.print(f"NTK-aware RoPE base: {ext.new_base:,.6g}  (was {ext.base:,.6g}; x{ext.new_base / ext.base:.4g})")
    else:
        c.print(f"no extension needed: the target fits the trained context; base stays {ext.base:,.6g}")


# ------------------------------------------------------------------------------------------------
# roofline speculative
# ------------------------------------------------------------------------------------------------


def speculative_cmd(
    draft_tokens: Annotated[int, typer.Option("--draft-tokens", "-k", help="Draft tokens proposed per step (k).")],
    acceptance: Annotated[float, typer.Option("--acceptance", "-a", help="Probability each draft token is accepted (a), 0..1.")],
    draft_cost_ratio: Annotated[float | None, typer.Option("--draft-cost-ratio", "-c", help="One draft step's time over one target step's (c). Default 0, or from the MTP module with --mtp.")] = None,
    mtp: Annotated[bool, typer.Option("--mtp", help="Multi-token prediction: draft cost from one MTP module of --model (one decoder layer + projection + LM head).")] = False,
    model: Annotated[str | None, typer.Option("--model", help="Model, to turn the speed-up into a time per token.")] = None,
    hw: Annotated[str | None, typer.Option("--hw", help="GPU for the model's decode step time.")] = None,
    batch: Annotated[int, typer.Option("--batch", help="Sequences decoded together.")] = 1,
    context: Annotated[int, typer.Option("--context", help="Context tokens at the decode step.")] = 4096,
    dtype: Annotated[str, typer.Option("--dtype", help="Compute dtype.")] = "bf16",
    weight_dtype: Annotated[str, typer.Option("--weight-dtype", help="Stored weight dtype.")] = "bf16",
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="KV cache dtype.")] = "bf16",
    as_json: JsonOption = False,
) -> None:
    """Speculative decoding / MTP: expected tokens per step (1 - a^(k+1)) / (1 - a) and the
    speed-up net of the draft's cost, optionally as a time per token for a model on a GPU."""
    from rooflinecli.whatif.speculative import speculative, speedup_by_draft_tokens

    source = "given"
    step_time = None
    warning = None
    if mtp or (model is not None and hw is not None):
        if model is None:
            raise RooflineError("--mtp needs --model (the MTP module is sized from the model)")
        from rooflinecli.model_registry import get_model
        cfg = get_model(model)
        if mtp:
            if draft_cost_ratio is not None:
                raise RooflineError("give either --mtp or --draft-cost-ratio, not both")
            from rooflinecli.whatif.speculative import mtp_draft_cost_ratio

            draft_cost_ratio = mtp_draft_cost_ratio(cfg)
            source = "mtp"
        if hw is not None:
            from rooflinecli.hardware import get_spec
            from rooflinecli.whatif.rope import context_warning
            from rooflinecli.whatif.speculative import target_step_time_s

            warning = context_warning(cfg, context)
            step_time = target_step_time_s(cfg, get_spec(hw), batch, context, dtype, weight_dtype, kv_dtype)
    elif (model is None) != (hw is None):
        raise RooflineError("--model and --hw go together (the decode step time needs both)")
    res = speculative(draft_tokens, acceptance, draft_cost_ratio or 0.0, step_time, source)
    table = speedup_by_draft_tokens(acceptance, res.draft_cost_ratio, max(8, draft_tokens))
    _warn(warning)
    if as_json:
        _echo_json({**res.to_json(), "by_draft_tokens": [{"draft_tokens": k, "expected_tokens_per_step": t, "speedup": s} for k, t, s in table]})
        return
    c = _console()
    c.print(
        f"k = {res.draft_tokens} drafts, acceptance a = {res.acceptance:g}, draft cost c = {res.draft_cost_ratio:.4g} "
        f"({'MTP module' if source == 'mtp' else 'given'})"
    )
    c.print(f"expected tokens per step: {res.expected_tokens_per_step:.4g}   step cost: {res.step_cost_target_steps:.4g} target steps")
    c.print(f"speed-up over plain decoding: {res.speedup:.3g}x")
    if res.tpot_s is not None:
        c.print(
            f"{model} on {hw}, batch {batch}, context {context:,}: decode step {fmt_time(res.target_step_time_s)} "
            f"-> {fmt_time(res.tpot_s)} per token ({res.tokens_per_s_per_sequence:.4g} tokens/s per sequence)"
        )
    best = max(table, key=lambda r: r[2])
    rows = [[str(k), f"{t:.3f}", f"{s:.3f}x" + (" *" if k == best[0] else "")] for k, t, s in table]
    c.print(_table("speed-up by draft length (* best)", ["draft tokens k", "tokens/step", "speed-up"], rows))


# ------------------------------------------------------------------------------------------------
# roofline attention-io
# ------------------------------------------------------------------------------------------------


def attention_io_cmd(
    seq: Annotated[int, typer.Option("--seq", help="Sequence length N, tokens.")],
    head_dim: Annotated[int, typer.Option("--head-dim", help="Head dimension d.")],
    hw: HwOption = "h100-sxm",
    heads: Annotated[int, typer.Option("--heads", help="Attention heads.")] = 1,
    batch: Annotated[int, typer.Option("--batch", help="Sequences.")] = 1,
    dtype: Annotated[str, typer.Option("--dtype", help="Element dtype of Q, K, V, O (and of the SRAM tiles).")] = "bf16",
    as_json: JsonOption = False,
) -> None:
    """FlashAttention vs standard attention HBM traffic (Dao et al. 2022, Theorem 2), with SRAM M =
    the GPU's shared memory per SM."""
    from rooflinecli.hardware import get_spec
    from rooflinecli.whatif.attention_io import attention_io

    r = attention_io(get_spec(hw), seq, head_dim, heads, batch, dtype)
    if as_json:
        _echo_json(r.to_json())
        return
    c = _console()
    c.print(
        f"{r.hw}: N = {r.seq_tokens:,}, d = {r.head_dim}, {r.heads} heads x {r.batch} sequences, {r.dtype}; "
        f"SRAM M = {r.sram_bytes / 1024:.0f} KiB/SM = {r.sram_elements:,.0f} elements; "
        f"B_c = {r.block_cols}, B_r = {r.block_rows}, T_c = {r.kv_passes} passes"
    )
    rows = [
        ["standard (4Nd + 4N^2)", f"{r.naive_elements_per_head:,.0f}", fmt_bytes(r.naive_bytes), fmt_time(r.naive_time_s)],
        ["FlashAttention (3Nd + 2N + T_c(3Nd + 4N))", f"{r.flash_elements_per_head:,.0f}", fmt_bytes(r.flash_bytes), fmt_time(r.flash_time_s)],
    ]
    c.print(_table("attention forward HBM traffic", ["algorithm", "elements/head", "bytes", "time at HBM BW"], rows,
                   caption=f"standard / flash = {r.naive_over_flash:.3g}x"))


def register(app: typer.Typer) -> None:
    app.command("rope")(rope_cmd)
    app.command("speculative")(speculative_cmd)
    app.command("attention-io")(attention_io_cmd)
