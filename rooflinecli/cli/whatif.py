"""CLI: focused what-if commands: ``kv``, ``moe``, ``attention-io``, ``compare``, ``rope``,
``speculative`` and ``disagg``.

Each command parses its options, calls ``rooflinecli.whatif`` / ``rooflinecli.analysis``, and
renders either JSON (``--json``, units in every key) or a rich table. Bad input raises
``RooflineError`` in the library; the root app turns it into ``error: <line>`` and exit 2.
"""

from __future__ import annotations

import json
import math
import os
from typing import Annotated

import typer

from rooflinecli.fmt import fmt_bytes, fmt_count, fmt_num, fmt_time
from rooflinecli.fmt import json_default as _json_default
from rooflinecli.cli.options import HW_HELP, HwOption, JsonOption, dtype_parser, forgive_gpu_names, forgive_model_names, tokens_option
from rooflinecli.cli.workload_options import (DEFAULT_WORKLOAD, REQUIRED, SHARED, Prices, checkpoint_workload, checkpoint_workload_fields,
                                              echo_dtype_notes, workload_options)
from rooflinecli.errors import RooflineError
from rooflinecli.quant import weights_label

# ------------------------------------------------------------------------------------------------
# Rendering helpers
# ------------------------------------------------------------------------------------------------

#: batches of the ``moe`` table at most (one row each)
MOE_MAX_BATCHES = 1000


def _echo_json(obj) -> None:
    from rooflinecli.fmt import json_dumps

    typer.echo(json_dumps(obj))


def _console():
    from rooflinecli.console import make_console

    return make_console()


def _table(console, title: str, columns: list[str], rows: list[list[str]], caption: str | None = None, optional: tuple[str, ...] = ()):
    """The command's table, fitted to the console's width (``console.fit_table``)."""
    from rooflinecli.console import fit_table

    return fit_table(console, title, columns, rows, caption=caption, optional=optional)


def _fit_context(cfg, context: int) -> tuple[int, str | None]:
    """``context`` as given, or its default shrunk to fit the model's trained context, and the note
    saying so (printed once the command's work succeeded)."""
    from rooflinecli.cli.workload_options import tokens_within_trained_context

    fitted, note = tokens_within_trained_context(cfg, context=context)
    return fitted["context"], note


def _fit_prompt_gen(cfg, prompt: int, gen: int) -> tuple[int, int, str | None]:
    """``prompt`` and ``gen`` as given, or their defaults shrunk to fit the model's trained context,
    and the note saying so."""
    from rooflinecli.cli.workload_options import tokens_within_trained_context

    fitted, note = tokens_within_trained_context(cfg, prompt=prompt, gen=gen)
    return fitted["prompt"], fitted["gen"], note


def _warn(msg: str | None) -> None:
    if msg:
        typer.echo(msg, err=True)


# ------------------------------------------------------------------------------------------------
# roofline rope
# ------------------------------------------------------------------------------------------------


def rope_cmd(
    model: Annotated[str | None, typer.Option("--model", help="Model preset id or config.json path (gives base, rotary dim, trained context).",
                                              parser=forgive_model_names, metavar="MODEL")] = None,
    target_context: Annotated[int | None, tokens_option("--target-context", help="Context to reach, tokens.")] = None,
    scale: Annotated[float | None, typer.Option("--scale", help="Stretch factor s instead of --target-context.")] = None,
    base: Annotated[float | None, typer.Option("--base", help="RoPE base (theta); default: the model's.")] = None,
    rotary_dim: Annotated[int | None, typer.Option("--rotary-dim", help="Rotated dims per head; default: the model's head dim (MLA: its RoPE dim).")] = None,
    trained_context: Annotated[int | None, tokens_option("--trained-context", help="Trained context, tokens; default: the model's max_position_embeddings.")] = None,
    as_json: JsonOption = False,
) -> None:
    """NTK-aware RoPE base for a context extension: base' = base * s^(D/(D-2))."""
    from rooflinecli.rope import rope_extension, rope_for_model

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
        c.print(f"NTK-aware RoPE base: {fmt_num(ext.new_base, 7)}  (was {fmt_num(ext.base, 7)}; x{fmt_num(ext.new_base / ext.base, 4)})")
    else:
        c.print(f"no extension needed: the target fits the trained context; base stays {ext.base:,.6g}")


# ------------------------------------------------------------------------------------------------
# roofline speculative
# ------------------------------------------------------------------------------------------------


@workload_options
def speculative_cmd(
    draft_tokens: Annotated[int, typer.Option("--draft-tokens", "-k", help="Draft tokens proposed per step (k).")],
    acceptance: Annotated[float, typer.Option("--acceptance", "-a", help="Probability each draft token is accepted (a), 0..1.")],
    draft_cost_ratio: Annotated[float | None, typer.Option("--draft-cost-ratio", "-c", help="One draft step's time over one target step's (c). Default 0, or from the MTP module with --mtp.")] = None,
    mtp: Annotated[bool, typer.Option("--mtp", help="Multi-token prediction: draft cost from one MTP module of --model (one decoder layer + projection + LM head).")] = False,
    model: Annotated[str | None, typer.Option("--model", help="Model, to turn the speed-up into a time per token.", parser=forgive_model_names, metavar="MODEL")] = None,
    hw: Annotated[str | None, typer.Option("--hw", "--hw-file", help=HW_HELP + " With --model and no --hw: env ROOFLINE_HW, else h100-sxm.",
                                           parser=forgive_gpu_names, metavar="GPU")] = None,
    batch=SHARED, context=SHARED, dtype=SHARED, weight_dtype=SHARED, kv_dtype=SHARED, kv_bits=SHARED, tp=SHARED, ep=SHARED,
    mode=SHARED, engine=SHARED,
    as_json: JsonOption = False,
) -> None:
    """Speculative decoding / MTP: expected tokens per step (1 - a^(k+1)) / (1 - a) and the
    speed-up net of the draft's cost, optionally as a time per token for a model on a GPU."""
    from rooflinecli.whatif.speculative import check_inputs, speculative, speedup_by_draft_tokens

    check_inputs(draft_tokens, acceptance, draft_cost_ratio or 0.0)  # before any model work

    source = "given"
    dtype_notes: list[str] = []
    step_time = None
    verify = None  # the verification pass's cost in plain steps, per k = 1.. (with a model)
    warning = None
    if model is not None and hw is None:  # the default GPU of every other command
        hw = forgive_gpu_names(os.environ.get("ROOFLINE_HW") or DEFAULT_WORKLOAD.hw)
    if mtp or (model is not None and hw is not None):
        if model is None:
            raise RooflineError("--mtp needs --model (the MTP module is sized from the model)")
        from rooflinecli.model_registry import get_model
        cfg = get_model(model)
        context, fit_note = _fit_context(cfg, context)
        if mtp:
            if draft_cost_ratio is not None:
                raise RooflineError("give either --mtp or --draft-cost-ratio, not both")
            from rooflinecli.whatif.speculative import mtp_draft_cost_ratio

            draft_cost_ratio = mtp_draft_cost_ratio(cfg)
            source = "mtp"
        if hw is not None:
            from rooflinecli.hardware import get_spec
            from rooflinecli.rope import context_warning
            from rooflinecli.whatif.speculative import verify_costs

            from rooflinecli.analysis import fit_warning

            warning = "\n".join(w for w in (fit_note, context_warning(cfg, context + 1)) if w) or None  # a step at N holds N + 1 positions
            spec = get_spec(hw)
            wl_kw, dtype_notes = checkpoint_workload_fields(cfg, _wl_kwargs(dtype, weight_dtype, kv_dtype, kv_bits, None, tp, ep), [spec])
            fit = fit_warning(cfg, spec, _workload(batch, context, 1, **wl_kw), context, context, batch)
            warning = "\n".join(w for w in (warning, f"warning: {fit}" if fit else None) if w) or None
            # the table's k = 1..8 and the k asked for, each verification pass timed by the model
            mk = _mode_kwargs(spec, mode, engine)
            step_time, verify = verify_costs(cfg, spec, batch, context, sorted({*range(1, 9), draft_tokens}), **wl_kw, **mk)
    elif hw is not None:
        raise RooflineError("--hw needs --model (the decode step time is the model's)")
    res = speculative(draft_tokens, acceptance, draft_cost_ratio or 0.0, step_time, source,
                      verify[draft_tokens] if verify else 1.0)
    table = speedup_by_draft_tokens(acceptance, res.draft_cost_ratio, max(8, draft_tokens), verify)
    _warn(warning)
    echo_dtype_notes(dtype_notes)
    if as_json:
        timed = {**mk, "batch": batch, "context_tokens": context, "tp": tp, "ep": ep, "compute_dtype": wl_kw["compute_dtype"],
                 "kv": _workload(batch, context, 1, **wl_kw).kv_label, "dtype_notes": dtype_notes} if hw is not None else {}
        _echo_json({**res.to_json(), **timed, "by_draft_tokens": [{"draft_tokens": k, "expected_tokens_per_step": t, "speedup": s} for k, t, s in table]})
        return
    c = _console()
    c.print(
        f"k = {res.draft_tokens} drafts, acceptance a = {res.acceptance:g}, draft cost c = {res.draft_cost_ratio:.4g} "
        f"({'MTP module' if source == 'mtp' else 'given'})"
    )
    c.print(f"expected tokens per step: {res.expected_tokens_per_step:.4g}   step cost: {res.step_cost_target_steps:.4g} target steps "
            + (f"(verifying {res.draft_tokens + 1} tokens per sequence: {res.verify_cost_target_steps:.3f} steps, from the model)" if verify
               else "(verification taken as one target step: give --model for its cost)"))
    c.print(f"speed-up over plain decoding: {res.speedup:.3g}x")
    if res.tpot_s is not None:
        c.print(
            f"{model} on {hw} ({_mode_phrase(mk)}), batch {batch}, context {context:,}{_parallel_phrase(tp, ep)}: decode step {fmt_time(res.target_step_time_s)} "
            f"-> {fmt_time(res.tpot_s)} per token ({fmt_num(res.tokens_per_s_per_sequence, 4)} tokens/s per sequence)"
        )
    best = max(table, key=lambda r: r[2])
    pays = best[2] > 1.0
    rows = [[str(k), f"{t:.3f}", f"{s:.3f}x" + (" *" if pays and k == best[0] else "")] for k, t, s in table]
    if not pays:
        caption = "no draft length pays: plain decoding (1x) is faster than every k here"
    elif best[0] == table[-1][0]:
        caption = f"* best of the table; the speed-up still rises at k = {best[0]}: longer drafts may pay more"
    else:
        caption = None
    c.print(_table(c, "speed-up by draft length" + (" (* best)" if pays else ""), ["draft tokens k", "tokens/step", "speed-up"], rows, caption=caption))


# ------------------------------------------------------------------------------------------------
# roofline attention-io
# ------------------------------------------------------------------------------------------------


def attention_io_cmd(
    seq: Annotated[int, tokens_option("--seq", help="Sequence length N, tokens.")],
    head_dim: Annotated[int, typer.Option("--head-dim", help="Head dimension d.")],
    hw: HwOption = "h100-sxm",
    heads: Annotated[int, typer.Option("--heads", help="Attention heads.")] = 1,
    batch: Annotated[int, typer.Option("--batch", help="Sequences.")] = 1,
    dtype: Annotated[str, typer.Option("--dtype", help="Element dtype of Q, K, V, O (and of the SRAM tiles).",
                                       parser=dtype_parser(("fp32", "bf16", "fp16", "fp8"), "attention dtype"), metavar="DTYPE")] = "bf16",
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
    c.print(_table(c, "attention forward HBM traffic", ["algorithm", "elements/head", "bytes", "time at HBM BW"], rows,
                   caption=f"standard / flash = {r.naive_over_flash:.3g}x"))


# ------------------------------------------------------------------------------------------------
# Shared workload options
# ------------------------------------------------------------------------------------------------

def _wl_kwargs(dtype: str, weight_dtype: str, kv_dtype: str, kv_bits: float | None, kv_block_size: int | None, tp: int = 1, ep: int = 1, **more) -> dict:
    from rooflinecli.cli.workload_options import option_given

    return dict(compute_dtype=dtype, weight_dtype=weight_dtype, kv_dtype=kv_dtype, kv_bits=kv_bits, kv_block_size=kv_block_size, tp=tp, ep=ep,
                weight_dtype_overrides=option_given("weight_dtype"), **more)  # --weight-dtype replaces a quantized checkpoint's format


def _mode_kwargs(spec, mode: str | None, engine: str | None) -> dict:
    """Workload fields of --mode/--engine for one GPU (achievable by default on a calibrated spec)."""
    from rooflinecli.predict import default_engine, resolve_mode

    engine = default_engine(spec, engine, mode)
    return {"mode": resolve_mode(spec, mode, engine), "engine": engine}


def _mode_phrase(kw: dict) -> str:
    """What the times of ``_mode_kwargs``' workload are: the calibrated model's or which roof's."""
    if kw["mode"] == "achievable":
        return f"achievable, {kw['engine']} engine"
    return "measured roof" if kw["mode"] == "measured-roof" else f"{kw['mode']} roof"


def _workload(batch: int, prompt: int, gen: int, **kwargs):
    from rooflinecli.analysis import Workload
    from rooflinecli.analysis.workload import validate_workload

    return validate_workload(Workload(batch=batch, prompt_len=prompt, gen_len=gen, **kwargs))


def _parallel_phrase(tp: int, ep: int) -> str:
    """", TP 2, EP 4" for a replica of several GPUs; "" for one."""
    return f", TP {tp}" + (f", EP {ep}" if ep > 1 else "") if max(tp, ep) > 1 else ""


def _check_parallel(cfg, wl) -> None:
    """--tp / --ep fit the model (the heads split evenly, the experts too), before any work."""
    from rooflinecli.analysis.ops import check_parallel

    check_parallel(cfg, wl)


# ------------------------------------------------------------------------------------------------
# roofline kv
# ------------------------------------------------------------------------------------------------


@workload_options
def kv_cmd(
    model=SHARED, batch=SHARED, context=SHARED, kv_dtype=SHARED, kv_bits=SHARED, kv_block_size=SHARED, dtype=SHARED, weight_dtype=SHARED,
    tp=SHARED, ep=SHARED,
    hw: HwOption = DEFAULT_WORKLOAD.hw,
    variants: Annotated[str, typer.Option("--variants", help="Attention variants beside the configured model.")] = "mha,gqa,mqa,mla,compressed",
    mode=SHARED, engine=SHARED,
    as_json: JsonOption = False,
) -> None:
    """KV-cache bytes per token and for a workload, for the model and its MHA / GQA / MQA / MLA /
    compressed variants side by side, with the context where the KV read per decode step
    overtakes the weight bytes. (--hw only sets the memory capacity and the step time.)"""
    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_model
    from rooflinecli.whatif.grid import parse_list
    from rooflinecli.whatif.kv_variants import VARIANTS, kv_rows, variant_models
    from rooflinecli.rope import context_warning

    kinds = parse_list(variants, "--variants")
    for k in kinds:
        if k not in VARIANTS:
            from rooflinecli.errors import unknown_name_error

            raise unknown_name_error("attention variant (--variants)", k, VARIANTS)
    cfg, spec = get_model(model), get_spec(hw)
    context, fit_note = _fit_context(cfg, context)
    mk = _mode_kwargs(spec, mode, engine)
    wl, dtype_notes = checkpoint_workload_fields(cfg, _wl_kwargs(dtype, weight_dtype, kv_dtype, kv_bits, kv_block_size, tp, ep, **mk), [spec])
    kv_dtype, kv_bits = wl["kv_dtype"], wl["kv_bits"]  # as applied: the checkpoint's own unless given
    _check_parallel(cfg, _workload(batch, context, 1, **wl))
    rows = kv_rows(cfg, spec, batch, context, wl, kinds)
    for note in variant_models(cfg, kinds)[1]:
        _warn(note)
    _warn(fit_note)
    _warn(context_warning(cfg, context + 1))  # the step at N holds N + 1 positions, as analyze counts them
    echo_dtype_notes(dtype_notes)
    if as_json:
        _echo_json({"model": cfg.name, "hw": spec.id, **mk, "batch": batch, "context_tokens": context, "tp": tp, "ep": ep,
                    "compute_dtype": wl["compute_dtype"], "kv_bytes_per_element": _kv_bpe(kv_dtype, kv_bits), "kv_block_size": kv_block_size,
                    "dtype_notes": dtype_notes, "variants": [r.to_json() for r in rows]})
        return
    c = _console()
    kv = f"{kv_bits:g}-bit" if kv_bits is not None else kv_dtype
    c.print(f"{cfg.name}: batch {batch}, context {context:,}, KV {kv}" + (f", paged {kv_block_size}-token blocks" if kv_block_size else "")
            + f"; weights {weights_label(cfg, _workload(batch, context, 1, **wl))}; {spec.id} ({fmt_bytes(spec.memory_capacity_bytes)}){_parallel_phrase(tp, ep)}; decode step: {_mode_phrase(mk)}")
    table_rows = [
        [r.variant, r.attention, fmt_bytes(r.kv_bytes_per_token), fmt_bytes(r.kv_cache_bytes),
         fmt_bytes(r.kv_read_bytes_per_step), fmt_bytes(r.weights_bytes_per_step),
         f"{math.ceil(r.crossover_context_tokens):,}" if r.crossover_context_tokens is not None else "never",
         fmt_time(r.decode_step_time_s), "yes" if r.fits else "NO"]
        for r in rows
    ]
    c.print(_table(c, "KV cache by attention variant",
                   ["variant", "cached per layer", "KV/token", "KV cache", "KV read/step", "weights/step",
                    "crossover context", "decode step", "fits"], table_rows,
                   caption="* as configured; crossover: context at which one decode step reads as many KV bytes as weight bytes",
                   optional=("cached per layer", "weights/step", "KV/token")))


def _kv_bpe(kv_dtype: str, kv_bits: float | None) -> float:
    from rooflinecli.dtypes import kv_bytes_per_element

    return kv_bytes_per_element(kv_dtype, kv_bits)


# ------------------------------------------------------------------------------------------------
# roofline moe
# ------------------------------------------------------------------------------------------------


@workload_options
def moe_cmd(
    model=REQUIRED,
    batch: Annotated[str, typer.Option("--batch", help="Batch grid for the decode table (e.g. 1..1024:x2, 1,8,64).")] = "1..1024:x4",
    context=SHARED,
    skew: Annotated[float, typer.Option("--skew", help="Routing skew >= 1: the hottest expert's load over the mean (1 = uniform); loads fall off exponentially to the coldest expert.")] = 1.0,
    ep=SHARED, tp=SHARED,
    hw: HwOption = DEFAULT_WORKLOAD.hw,
    dtype=SHARED, weight_dtype=SHARED, kv_dtype=SHARED, kv_bits=SHARED, mode=SHARED, engine=SHARED,
    as_json: JsonOption = False,
) -> None:
    """Mixture of experts: total vs active parameters, distinct experts touched per layer by the
    tokens of one step (uniform and skewed routing), decode bytes and time vs batch, and the
    per-GPU expert weights under expert parallelism."""

    from rooflinecli import formulas
    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_model
    from rooflinecli.whatif import moe as M
    from rooflinecli.whatif.grid import parse_grid
    from rooflinecli.rope import context_warning

    cfg = get_model(model)
    M.require_moe(cfg)
    context, fit_note = _fit_context(cfg, context)
    M.check_skew(skew, cfg)
    B = parse_grid(batch, "--batch")
    if len(B) > MOE_MAX_BATCHES:  # one table row each: 100,000 took a minute and 700 MB
        raise RooflineError(f"--batch: '{batch}' gives {len(B):,} batches; the table takes at most {MOE_MAX_BATCHES:,} (e.g. 1..1M:x2)")
    spec = get_spec(hw)
    mk = _mode_kwargs(spec, mode, engine)
    fields, dtype_notes = checkpoint_workload_fields(cfg, _wl_kwargs(dtype, weight_dtype, kv_dtype, kv_bits, None, tp, ep, expert_skew=skew, **mk), [spec])
    wl = _workload(int(B[0]), context, 1, **fields)
    wl1 = _workload(int(B[0]), context, 1, **{**fields, "ep": 1})
    m = cfg.moe
    ps = M.param_summary(cfg)
    touched = M.experts_touched(cfg, B, skew)
    dec = M.decode_by_batch(cfg, spec, wl, B, context)
    dec1 = M.decode_by_batch(cfg, spec, wl1, B, context) if ep > 1 else dec
    expert_b = M.expert_bytes(cfg, wl)
    all_experts = float(formulas.expected_experts_touched(m.num_routed_experts, m.top_k, 10**9, 1.0))
    _warn(fit_note)
    _warn(context_warning(cfg, context + 1))
    from rooflinecli.analysis import fit_warning

    fit = fit_warning(cfg, spec, wl, context, context, B)
    _warn(f"warning: {fit}" if fit else None)
    echo_dtype_notes(dtype_notes)
    out = {
        "model": cfg.name, "hw": spec.id, **mk, "context_tokens": context, "skew": skew, "ep": ep, "tp": tp,
        "compute_dtype": wl.compute_dtype, "kv": wl.kv_label, "dtype_notes": dtype_notes,
        "num_routed_experts": m.num_routed_experts, "top_k": m.top_k, "num_shared_experts": m.num_shared_experts,
        "num_moe_layers": cfg.num_moe_layers, "routed_expert_bytes": expert_b,
        "routed_experts_per_gpu": m.num_routed_experts / ep,
        **{k: v for k, v in ps.items() if k != "by_component"},
        "params_by_component": ps["by_component"],
        "decode_by_batch": [
            {"batch": int(b), "tokens_in_step": int(b), "experts_touched_uniform": float(tu), "experts_touched_skewed": float(ts),
             "weights_bytes": float(wb), "kv_read_bytes": float(kr), "time_s": float(t), "tokens_per_s_per_replica": float(b / t),
             "compute_bound": bool(cb), "weights_bytes_per_gpu": float(wpg),
             "time_s_ep1": float(t1)}
            for b, tu, ts, wb, kr, t, cb, wpg, t1 in zip(B, touched["uniform"], touched["skewed"], dec["weights_bytes"],
                                                      dec["kv_read_bytes"], dec["time_s"], dec["compute_bound"],
                                                      dec["weights_bytes_per_gpu"], dec1["time_s"])
        ],
    }
    if as_json:
        _echo_json(out)
        return
    c = _console()
    c.print(
        f"{cfg.name}: {m.num_routed_experts} routed experts (top-{m.top_k}) + {m.num_shared_experts} shared, "
        f"{cfg.num_moe_layers}/{cfg.num_layers} MoE layers; one routed expert = {fmt_bytes(expert_b)} ({weights_label(cfg, wl)})"
    )
    c.print(
        f"params: total {fmt_count(ps['total_params'])}, active per token {fmt_count(ps['active_params'])} "
        f"({fmt_count(ps['active_params_without_embeddings'])} without embeddings)"
        + (f"; published {fmt_count(cfg.published_params)} / {fmt_count(cfg.published_active_params)}" if cfg.published_params and cfg.published_active_params else "")
    )
    comp = [[r["component"], fmt_count(r["total_params"]), fmt_count(r["active_params"])] for r in ps["by_component"] if r["total_params"]]
    c.print(_table(c, "parameters by component", ["component", "total", "active/token"], comp))
    rows = [
        [f"{r['batch']:,}", f"{r['experts_touched_uniform']:.1f}", *([f"{r['experts_touched_skewed']:.1f}"] if skew != 1 else []),
         fmt_bytes(r["weights_bytes"]), fmt_bytes(r["kv_read_bytes"]), fmt_time(r["time_s"]), fmt_num(r["tokens_per_s_per_replica"]),
         "compute" if r["compute_bound"] else "memory"]
        + ([fmt_bytes(r["weights_bytes_per_gpu"]), fmt_time(r["time_s_ep1"])] if ep > 1 else [])
        for r in out["decode_by_batch"]
    ]
    cols = ["batch (tokens)", "experts/layer (uniform)", *([f"experts/layer (skew {skew:g})"] if skew != 1 else []),
            "weights read", "KV read", "decode step", "tokens/s per replica", "bound"]
    if ep > 1:
        cols += [f"weights/GPU (EP {ep})", "step at EP 1"]
    c.print(_table(c, f"decode step vs batch on {spec.id} ({_mode_phrase(mk)}), context {context:,}", cols, rows,
                   caption=f"experts/layer: E(1-(1-k/E)^T) of {m.num_routed_experts}; all {all_experts:.0f} read once T is large"
                   + (f"; skew {skew:g}: the hottest expert takes {skew:g}x the mean load, the coldest "
                      f"{float(formulas.routing_shares(m.num_routed_experts, m.top_k, skew)[-1]) * m.num_routed_experts / m.top_k:.2f}x" if skew != 1 else ""),
                   optional=("KV read", "step at EP 1", "weights read")))


# ------------------------------------------------------------------------------------------------
# roofline compare
# ------------------------------------------------------------------------------------------------


@workload_options
def compare_cmd(
    model=SHARED,
    hw: Annotated[str, typer.Option("--hw", "--hw-file", help="One GPU, or a comma list to compare GPUs (ids or spec paths).", envvar="ROOFLINE_HW",
                                    parser=forgive_gpu_names, metavar="GPUS")] = DEFAULT_WORKLOAD.hw,
    variants: Annotated[str | None, typer.Option("--variants", help="Compare attention variants instead: mha,gqa,mqa,mla,compressed.")] = None,
    batch=SHARED, prompt=SHARED, gen=SHARED, dtype=SHARED, weight_dtype=SHARED, kv_dtype=SHARED, kv_bits=SHARED, tp=SHARED, ep=SHARED,
    price=SHARED, mode=SHARED, engine=SHARED,
    as_json: JsonOption = False,
) -> None:
    """The same workload across GPUs (--hw a,b,c) or across attention variants of one model
    (--variants mha,gqa,mqa,mla,compressed)."""
    from rooflinecli.hardware import get_specs
    from rooflinecli.model_registry import get_model
    from rooflinecli.whatif import compare as C
    from rooflinecli.whatif.grid import parse_list
    from rooflinecli.whatif.kv_variants import VARIANTS
    from rooflinecli.rope import context_warning

    cfg = get_model(model)
    prompt, gen, fit_note = _fit_prompt_gen(cfg, prompt, gen)
    specs = get_specs(hw)
    if not specs:
        raise RooflineError("--hw: give at least one GPU")
    wl = _workload(batch, prompt, gen, **_wl_kwargs(dtype, weight_dtype, kv_dtype, kv_bits, None, tp, ep, engine=engine))
    wl, dtype_notes = checkpoint_workload(cfg, wl, specs)
    dtype = wl.compute_dtype  # as applied: the checkpoint's own unless --dtype was given
    _check_parallel(cfg, wl)
    prices = price or Prices()
    prices.check_gpus(specs)
    priced = any(prices.for_gpu(s) is not None for s in specs)
    if variants is not None:
        if len(specs) > 1:
            raise RooflineError("--variants compares one GPU; give a single --hw")
        kinds = parse_list(variants, "--variants")
        for k in kinds:
            if k not in VARIANTS:
                from rooflinecli.errors import unknown_name_error

                raise unknown_name_error("attention variant (--variants)", k, VARIANTS)
        rows = C.compare_variants(cfg, specs[0], wl, kinds, mode, prices.for_gpu)
        title = f"{cfg.name} attention variants on {specs[0].id}"
    else:
        rows = C.compare_gpus(cfg, specs, wl, mode, prices.for_gpu)
        title = f"{cfg.name} across GPUs"
    _warn(fit_note)
    _warn(context_warning(cfg, prompt + gen))
    echo_dtype_notes(dtype_notes)
    if as_json:
        _echo_json({"model": cfg.name, "batch": batch, "prompt_tokens": prompt, "gen_tokens": gen, "dtype": dtype,
                    "weight_dtype": weight_dtype, "kv": wl.kv_label, "tp": tp, "ep": ep, "dtype_notes": dtype_notes, "rows": rows})
        return
    ach = any(r["mode"] == "achievable" for r in rows)  # mode and roof columns only when they differ
    table = [
        [r["label"], *([r["mode"]] if ach else []), fmt_time(r["ttft_s"]), fmt_time(r["tpot_s"]), *([fmt_time(r["roof_tpot_s"])] if ach else []), fmt_num(r['decode_tokens_per_s']) if r["decode_tokens_per_s"] else "-",
         f"{r['prefill_bound']}/{r['decode_bound']}", fmt_bytes(r["memory_weights_bytes"]), fmt_bytes(r["memory_kv_cache_bytes"]),
         "yes" if r["memory_fits"] else "NO"]
        + ([f"${fmt_num(r['cost_per_million_output_tokens_usd'])}" if r.get("cost_per_million_output_tokens_usd") is not None else "-"] if priced else [])
        for r in rows
    ]
    cols = ["", *(["mode"] if ach else []), "TTFT", "TPOT (mean)", *(["roof TPOT"] if ach else []), "decode tokens/s per replica", "bound (prefill/decode)", "weights per GPU", "KV cache per GPU", "fits"]
    if priced:
        cols.append("USD per M output tokens")
    c = _console()
    c.print(_table(c, title, cols, table,
                            caption=f"batch {batch}, prompt {prompt:,}, gen {gen:,}, {dtype} compute, {weights_label(cfg, wl)} weights, KV {wl.kv_label}, TP {tp}"
                            + (f", EP {ep}" if ep > 1 else "") + f"; a replica is {wl.num_gpus} GPU{'s' if wl.num_gpus > 1 else ''}",
                   optional=("bound (prefill/decode)", "weights per GPU", "roof TPOT")))


# ------------------------------------------------------------------------------------------------
# roofline disagg
# ------------------------------------------------------------------------------------------------


@workload_options
def disagg_cmd(
    rate: Annotated[float, typer.Option("--rate", help="Requests per second to serve.")],
    ttft_target: Annotated[float, typer.Option("--ttft-target", help="Time-to-first-token target, seconds.")],
    tpot_target: Annotated[float, typer.Option("--tpot-target", help="Mean time-per-output-token target, seconds.")],
    model=SHARED, prompt=SHARED, gen=SHARED,
    hw: HwOption = DEFAULT_WORKLOAD.hw,
    tp=SHARED, ep=SHARED,
    max_batch: Annotated[int, typer.Option("--max-batch", min=1, help="Largest batch an instance may run.")] = 1024,
    dtype=SHARED, weight_dtype=SHARED, kv_dtype=SHARED, kv_bits=SHARED, mode=SHARED, engine=SHARED,
    as_json: JsonOption = False,
) -> None:
    """Prefill/decode disaggregation: prefill and decode GPUs needed for a request rate within
    TTFT and TPOT targets (each instance is max(--tp, --ep) GPUs; no queueing modelled)."""
    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_model
    from rooflinecli.whatif.disagg import plan
    from rooflinecli.rope import context_warning

    cfg, spec = get_model(model), get_spec(hw)
    prompt, gen, fit_note = _fit_prompt_gen(cfg, prompt, gen)
    mk = _mode_kwargs(spec, mode, engine)
    fields, dtype_notes = checkpoint_workload_fields(cfg, _wl_kwargs(dtype, weight_dtype, kv_dtype, kv_bits, None, tp, ep, **mk), [spec])
    p = plan(cfg, spec, fields, prompt, gen, rate, ttft_target, tpot_target, max_batch)
    _warn(fit_note)
    _warn(context_warning(cfg, prompt + gen))
    echo_dtype_notes(dtype_notes)
    if as_json:
        _echo_json({**p.to_json(), **mk, "compute_dtype": fields["compute_dtype"], "dtype_notes": dtype_notes})
        return
    c = _console()
    c.print(f"{cfg.name} on {spec.id} ({_mode_phrase(mk)}; instances of {p.gpus_per_instance} GPU): {rate:g} req/s of {prompt:,} in + {gen:,} out tokens; "
            f"TTFT <= {fmt_time(ttft_target)}, TPOT <= {fmt_time(tpot_target)}")
    if not p.feasible:
        from rooflinecli.errors import markup_safe

        c.print(f"[bold red]infeasible[/]: {markup_safe(p.reason)}", markup=True)
        return
    rows = [
        ["prefill", str(p.prefill_batch), f"TTFT {fmt_time(p.prefill_time_s)}", f"{fmt_num(p.prefill_requests_per_s_per_instance)} req/s",
         f"{p.prefill_instances:,}", f"{p.prefill_gpus:,}"],
        ["decode", str(p.decode_batch), f"TPOT {fmt_time(p.decode_tpot_s)}",
         f"{p.decode_tokens_per_s_per_instance:,.0f} tok/s = {fmt_num(p.decode_requests_per_s_per_instance)} req/s",
         f"{p.decode_instances:,}", f"{p.decode_gpus:,}"],
    ]
    c.print(_table(c, "disaggregated serving plan", ["pool", "batch", "latency", "per instance", "instances", "GPUs"], rows,
                   caption=f"total {p.total_gpus:,} GPUs; prefill:decode = {p.prefill_to_decode_gpu_ratio:.3g}"))


def register(app: typer.Typer) -> None:
    app.command("rope")(rope_cmd)
    app.command("speculative")(speculative_cmd)
    app.command("attention-io")(attention_io_cmd)
    app.command("kv")(kv_cmd)
    app.command("moe")(moe_cmd)
    app.command("compare")(compare_cmd)
    app.command("disagg")(disagg_cmd)
