"""The workload options every command shares: one definition, one help text and one default each.

A command names the shared options it takes by giving them the default ``SHARED`` (or
``REQUIRED``); ``@workload_options`` puts in the shared type, help and default::

    @workload_options
    def kv_cmd(model=SHARED, batch=SHARED, context=SHARED, kv_bits=SHARED, tp=SHARED, ...) -> None:
        ...

So analyze, report, sweep, compare, kv, moe, speculative and disagg cannot drift apart: the same
``--prompt`` means the same thing, with the same default, everywhere (``DEFAULT_WORKLOAD``).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from rooflinecli.cli.achievable_options import EngineOption, ModeOption
from rooflinecli.cli.options import dtype_parser, forgive_dtype_names, forgive_model_names, tokens_option
from rooflinecli.dtypes import COMPUTE_DTYPES, KV_DTYPES, WEIGHT_DTYPES


@dataclass(frozen=True)
class DefaultWorkload:
    """The one default workload: every command that takes these options defaults to these."""

    model: str = "llama-3-8b"
    hw: str = "h100-sxm"
    batch: int = 1
    prompt_tokens: int = 1024
    gen_tokens: int = 256
    #: the single decode step of kv, moe and speculative: the first decode step of the default
    #: workload, which reads the prompt's cached tokens
    context_tokens: int = 1024


DEFAULT_WORKLOAD = DefaultWorkload()


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: a parameter default: "take the shared option with its shared default"
SHARED: Any = _Marker("SHARED")
#: a parameter default: "take the shared option; the user must give it"
REQUIRED: Any = _Marker("REQUIRED")


# ------------------------------------------------------------------------------------------------
# --price: one USD figure, or one per GPU
# ------------------------------------------------------------------------------------------------

#: the largest price taken, USD per GPU-hour
MAX_PRICE_USD_PER_GPU_HOUR = 1e6


@dataclass(frozen=True)
class Prices:
    """``--price``: one USD-per-GPU-hour figure for every GPU, or one per GPU id."""

    all_usd_per_gpu_hour: float | None = None
    by_gpu_usd_per_gpu_hour: dict[str, float] = field(default_factory=dict)

    def for_gpu(self, spec) -> float | None:
        """The price of ``spec``: given for its id, else given for all, else the spec file's own
        cited price (``[price] usd_per_gpu_hour``), else None (no cost line)."""
        if spec.id in self.by_gpu_usd_per_gpu_hour:
            return self.by_gpu_usd_per_gpu_hour[spec.id]
        if self.all_usd_per_gpu_hour is not None:
            return self.all_usd_per_gpu_hour
        return getattr(spec, "price_usd_per_gpu_hour", None)

    def check_gpus(self, specs) -> None:
        """Every GPU priced by id is one of the command's GPUs (a typo would price nothing)."""
        from rooflinecli.errors import RooflineError

        ids = [s.id for s in specs]
        for gpu in self.by_gpu_usd_per_gpu_hour:
            if gpu not in ids:
                raise RooflineError(f"--price: GPU '{gpu}' is not among --hw ({', '.join(ids)})")


def _usd(text: str, gpu: str | None = None) -> float:
    where = f"{gpu}: " if gpu else ""
    try:
        usd = float(text)
    except ValueError:
        raise typer.BadParameter(f"{where}'{text}' is not a price in USD per GPU-hour (e.g. 2.5, or h100-sxm=2.49,h200=3.5)") from None
    if not math.isfinite(usd) or usd < 0:
        raise typer.BadParameter(f"{where}{text} must be a finite price >= 0 USD per GPU-hour")
    if usd > MAX_PRICE_USD_PER_GPU_HOUR:
        raise typer.BadParameter(f"{where}{text} USD per GPU-hour is above the limit of {MAX_PRICE_USD_PER_GPU_HOUR:,g}")
    return usd


def parse_prices(value) -> Prices:
    """``2.5`` (every GPU) or ``h100-sxm=2.49,h200=3.5`` (per GPU id; ids forgiven case and spaces)."""
    if isinstance(value, Prices):
        return value
    text = str(value).strip()
    if "=" not in text:
        return Prices(all_usd_per_gpu_hour=_usd(text))
    by_gpu: dict[str, float] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        gpu, sep, usd = item.partition("=")
        gpu = gpu.strip().lower()
        if not sep or not gpu:
            raise typer.BadParameter(f"'{item.strip()}' is not GPU=USD (e.g. h100-sxm=2.49,h200=3.5)")
        if gpu in by_gpu:
            raise typer.BadParameter(f"GPU '{gpu}' is priced twice")
        by_gpu[gpu] = _usd(usd.strip(), gpu)
    if not by_gpu:
        raise typer.BadParameter("give a price: 2.5, or per GPU h100-sxm=2.49,h200=3.5")
    return Prices(by_gpu_usd_per_gpu_hour=by_gpu)


# ------------------------------------------------------------------------------------------------
# The shared options
# ------------------------------------------------------------------------------------------------

_D = DEFAULT_WORKLOAD


def _dtype(name: str, help: str, allowed: tuple[str, ...], what: str):  # noqa: A002 - typer's own word
    return Annotated[str, typer.Option(name, help=help, parser=dtype_parser(allowed, what), metavar="DTYPE")]


def mla_form(value) -> str:
    """``--mla-decode``: absorbed or naive, forgiven case and spaces."""
    from rooflinecli.analysis.workload import MLA_DECODE_FORMS
    from rooflinecli.errors import unknown_name_error

    name = forgive_dtype_names(value)
    if name not in MLA_DECODE_FORMS:
        raise typer.BadParameter(str(unknown_name_error("MLA decode form", name, MLA_DECODE_FORMS)))
    return name


#: parameter name -> (annotated type, default); a default of REQUIRED is never used here
WORKLOAD_OPTIONS: dict[str, tuple[Any, Any]] = {
    "model": (Annotated[str, typer.Option("--model", help="Model preset id (see `roofline model list`) or a config.json path.",
                                          parser=forgive_model_names, metavar="MODEL")], _D.model),
    "batch": (Annotated[int, typer.Option("--batch", min=1, help="Sequences in flight (decoded together).")], _D.batch),
    "prompt": (Annotated[int, tokens_option("--prompt", minimum=1, help="Prompt tokens per sequence (prefill).")], _D.prompt_tokens),
    "gen": (Annotated[int, tokens_option("--gen", minimum=1,
                                         help="Generated tokens per sequence (decode steps at contexts prompt .. prompt+gen-1).")], _D.gen_tokens),
    "context": (Annotated[int, tokens_option("--context", minimum=1, help="Context tokens per sequence at the decode step (cached tokens).")],
                _D.context_tokens),
    "dtype": (_dtype("--dtype", "Compute dtype; the GPU's peak for it is used (fp8 -> fp8 peak).", COMPUTE_DTYPES, "compute dtype"), "bf16"),
    "weight_dtype": (_dtype("--weight-dtype", "Stored weights: bf16, fp16, fp32, fp8, int8, int4 (with group scales).", WEIGHT_DTYPES,
                            "weight dtype"), "bf16"),
    "kv_dtype": (_dtype("--kv-dtype", "KV cache dtype: bf16, fp16, fp32, fp8, int8, int4.", KV_DTYPES, "KV dtype"), "bf16"),
    "kv_bits": (Annotated[float | None, typer.Option("--kv-bits", help="KV cache bits per element, any width (overrides --kv-dtype).")], None),
    "kv_block_size": (Annotated[int | None, typer.Option("--kv-block-size", min=1, help="Paged KV cache: tokens per block.")], None),
    "tp": (Annotated[int, typer.Option("--tp", min=1, help="Tensor-parallel GPUs per model replica (must divide the heads).")], 1),
    "ep": (Annotated[int, typer.Option("--ep", min=1, help="Expert-parallel GPUs per model replica (MoE models).")], 1),
    "weight_group_size": (Annotated[int, typer.Option("--weight-group-size", min=1, help="int4 weights: elements per 2-byte scale.")], 128),
    "efficiency": (Annotated[str | None, typer.Option(
        "--efficiency", help="Fraction of the roofline reached: one number (0.8) or per op kind (gemm=0.8,attention=0.7,elementwise=..,moe=..).")], None),
    "launch_overhead_us": (Annotated[float, typer.Option("--launch-overhead-us", help="Fixed cost per kernel launch, microseconds.")], 0.0),
    "price": (Annotated[Prices | None, typer.Option(
        "--price", "--price-per-gpu-hour", parser=parse_prices, metavar="USD|GPU=USD,..",
        help="USD per GPU-hour, for the cost per million output tokens: one figure (2.5) or per GPU (h100-sxm=2.49,h200=3.5); "
             "default: the spec file's cited price, if any.")], None),
    "prefill_chunk": (Annotated[int, tokens_option(
        "--prefill-chunk", help="Memory: size the activation workspace for prefill chunks of this many tokens (0 = unchunked).")],
        8192),  # = analysis.workload.DEFAULT_PREFILL_CHUNK_TOKENS (not imported: numpy at start-up; a test keeps them equal)
    "expert_skew": (Annotated[float, typer.Option(
        "--expert-skew", help="MoE routing skew >= 1: the hottest expert's load over the mean (1 = uniform).")], 1.0),
    "mla_decode": (Annotated[str, typer.Option(
        "--mla-decode", help="MLA decode form: absorbed (default) or naive; the other is shown for comparison.", parser=mla_form, metavar="FORM")],
        "absorbed"),
    "mode": (ModeOption, None),
    "engine": (EngineOption, None),
}


def workload_options(fn):
    """Give every parameter of ``fn`` whose default is ``SHARED`` (or ``REQUIRED``) the shared
    option's type, help and default (none for ``REQUIRED``). Parameters become keyword-only, so a
    required one may follow one with a default; Typer calls the command with keywords."""
    sig = inspect.signature(fn, eval_str=True)
    params = []
    for p in sig.parameters.values():
        if p.default is SHARED or p.default is REQUIRED:
            if p.name not in WORKLOAD_OPTIONS:
                raise TypeError(f"{fn.__name__}: no shared option '{p.name}'; known: {', '.join(WORKLOAD_OPTIONS)}")
            annotation, default = WORKLOAD_OPTIONS[p.name]
            p = p.replace(annotation=annotation, default=inspect.Parameter.empty if p.default is REQUIRED else default)
        params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))
    fn.__signature__ = sig.replace(parameters=params)
    fn.__shared_options__ = tuple(p.name for p in sig.parameters.values() if p.default is SHARED or p.default is REQUIRED)
    return fn


def shared_default(name: str):
    """The one default of the shared option ``name`` (``shared_default("prompt")`` -> 1024)."""
    return WORKLOAD_OPTIONS[name][1]


def option_given(name: str) -> bool:
    """Whether the running command's option ``name`` came from the command line or the
    environment, not from its default (False outside a command)."""
    from rooflinecli.cli import current_click_context

    ctx = current_click_context()
    source = ctx.get_parameter_source(name) if ctx is not None else None
    return source is not None and source.name != "DEFAULT"


def workload_from_options(*, batch: int, prompt: int, gen: int, price_usd_per_gpu_hour: float | None = None, **options):
    """The validated ``analysis.Workload`` of the shared options a command was given (by their
    parameter names; any not given take their shared default)."""
    from rooflinecli.analysis import Workload, parse_efficiency, validate_workload

    o = {name: options.get(name, shared_default(name)) for name in (
        "dtype", "weight_dtype", "kv_dtype", "kv_bits", "weight_group_size", "tp", "ep", "efficiency",
        "launch_overhead_us", "kv_block_size", "prefill_chunk", "expert_skew", "mla_decode", "engine")}
    unknown = set(options) - set(o) - {"mode"}
    if unknown:
        raise TypeError(f"workload_from_options: not workload options: {', '.join(sorted(unknown))}")
    wl = Workload(
        batch=batch, prompt_len=prompt, gen_len=gen, compute_dtype=o["dtype"], weight_dtype=o["weight_dtype"], kv_dtype=o["kv_dtype"],
        kv_bits=o["kv_bits"], weight_group_size=o["weight_group_size"], tp=o["tp"], ep=o["ep"], efficiency=parse_efficiency(o["efficiency"]),
        launch_overhead_s=o["launch_overhead_us"] * 1e-6, expert_skew=o["expert_skew"], kv_block_size=o["kv_block_size"],
        prefill_chunk_tokens=o["prefill_chunk"] or None, price_per_gpu_hour=price_usd_per_gpu_hour,
        mla_decode=o["mla_decode"], engine=o["engine"],
        weight_dtype_overrides=option_given("weight_dtype"),  # replaces a quantized checkpoint's own format
    )
    return validate_workload(wl)


def checkpoint_workload(cfg, wl, specs=()):
    """(workload, notes): ``wl`` with the compute dtype ``cfg``'s ``quantization_config`` implies
    (W8A8 fp8 / int8, NVFP4) and the KV-cache dtype it declares, where the running command was not
    given --dtype / --kv-dtype / --kv-bits; a given option stays and a note says what it replaces
    (``quant.checkpoint_dtypes``; ``specs``: the command's GPUs, for the peaks). Every command that
    takes a model and a workload reads its dtypes through here, so analyze, report, compare, sweep,
    serve and the what-ifs time one checkpoint alike."""
    from rooflinecli.quant import checkpoint_dtypes

    return checkpoint_dtypes(cfg, wl, option_given("dtype"), option_given("kv_dtype") or option_given("kv_bits"), specs)


def checkpoint_workload_fields(cfg, fields: dict, specs=()) -> tuple[dict, list[str]]:
    """``checkpoint_workload`` for commands that hand ``Workload`` fields on as keywords (kv, moe,
    speculative, disagg): (the fields with compute_dtype, kv_dtype and kv_bits as applied, notes)."""
    from rooflinecli.analysis import Workload

    wl, notes = checkpoint_workload(cfg, Workload(batch=1, prompt_len=1, gen_len=1, **fields), specs)
    return {**fields, "compute_dtype": wl.compute_dtype, "kv_dtype": wl.kv_dtype, "kv_bits": wl.kv_bits}, notes


def echo_dtype_notes(notes) -> None:
    """Print ``checkpoint_workload``'s notes, one ``note:`` line each, on stderr."""
    for note in notes:
        typer.echo(f"note: {note}", err=True)


def tokens_within_trained_context(cfg, **tokens: int) -> tuple[dict[str, int], str | None]:
    """The shared token options (``prompt`` and ``gen``, or a decode step's ``context``) a command
    was not given, shrunk to fit ``cfg``'s trained context, so that a command at its defaults warns
    about nothing (gpt2's 1,024 positions hold neither prompt 1,024 + gen 256 nor a decode step at
    context 1,024, which holds 1,025): (the values, a note naming what changed, or None). A value
    given on the command line is kept, and so is the other of prompt and gen (the context warning
    then speaks of them)."""
    limit = cfg.max_position_embeddings
    out = dict(tokens)
    if "context" in out:  # a decode step at context N holds N + 1 positions
        if out["context"] + 1 > limit and not option_given("context"):
            out["context"] = max(1, limit - 1)
    elif not option_given("prompt") and not option_given("gen"):  # the last decode step holds prompt + gen positions
        over = out["prompt"] + out["gen"] - limit
        for name in ("prompt", "gen"):  # the prompt first, down to one token, then the generation
            cut = max(0, min(over, out[name] - 1))
            out[name] -= cut
            over -= cut
    changed = [f"--{k} {v:,} (default {tokens[k]:,})" for k, v in out.items() if v != tokens[k]]
    if not changed:
        return out, None
    return out, f"note: {cfg.name} is trained on {limit:,} positions: " + ", ".join(changed) + " to fit them"
