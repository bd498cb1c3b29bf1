"""Typer option types shared by the command modules.

``--hw`` takes a built-in GPU id (``h100-sxm``), a measured spec id, or a path to a spec file
(``my-gpu.toml``); ``--hw-file`` is the same option. Resolve the value with
``rooflinecli.hardware.get_spec`` (one GPU) or ``get_specs`` (a comma-separated list)::

    from rooflinecli.cli.options import HwOption

    def analyze(hw: HwOption = "h100-sxm") -> None:
        spec = get_spec(hw)
"""

from __future__ import annotations

from typing import Annotated

import typer

HW_HELP = "GPU: a built-in id (see `roofline hw list`), a measured spec id, or a spec file path (.toml)."


def _forgiven(value: str, known) -> str:
    """A name as the user typed it, forgiven surrounding spaces and case when that makes it a known
    id (``" Llama-3-8B"`` -> ``llama-3-8b``); an existing path is left as it is."""
    import os

    if os.path.exists(value):
        return value
    name = value.strip()
    if name in known:
        return name
    return name.lower() if name.lower() in known else name


def _bad(e: Exception) -> typer.BadParameter:
    """A loader's one-line error as a BadParameter, which Click reports under the option's name."""
    return typer.BadParameter(str(e).removeprefix("error: "))


def forgive_gpu_names(value: str, check: bool = True) -> str:
    """``--hw``: each comma-separated GPU id forgiven case and surrounding spaces; with ``check``
    an unknown id is refused here, so the error names the option (a spec file path is left to its
    loader). Without, an unknown name is left to the loader too (a command's one argument)."""
    from rooflinecli.errors import RooflineError
    from rooflinecli.hardware import builtin_ids, get_spec, is_spec_path, measured_specs

    # the datasheet ids first (file names, no file read): the measured specs are read only for a name that is not one of them
    known = set(builtin_ids())
    if any(_forgiven(v, known) not in known for v in str(value).split(",")):
        known |= set(measured_specs())
    names = [_forgiven(v, known) for v in str(value).split(",")]
    if not check:
        return ",".join(names)
    if not any(n.strip() for n in names):
        raise typer.BadParameter("give a GPU: an id (see `roofline hw list`) or a spec file path")
    for n in names:
        if n.strip() and n not in known and not is_spec_path(n):
            try:
                get_spec(n)
            except RooflineError as e:
                raise _bad(e) from None
    return ",".join(names)


def forgive_model_names(value: str, check: bool = True) -> str:
    """``--model``: each comma-separated preset id forgiven case and surrounding spaces; with
    ``check`` an unknown id is refused here, so the error names the option (a config path is left
    to its loader). Without, an unknown name is left to the loader too (a command's one argument)."""
    import os

    from rooflinecli.errors import unknown_name_error
    from rooflinecli.model_registry import preset_ids

    known = set(preset_ids())
    names = [_forgiven(v, known) for v in str(value).split(",")]
    for n in names if check else ():
        if not n.strip():
            raise typer.BadParameter("give a model: a preset id (see `roofline model list`) or a config.json path")
        path_like = n.endswith(".json") or "/" in n or "\\" in n or n.startswith(".") or os.path.exists(n)
        if n not in known and not path_like:
            raise _bad(unknown_name_error("model", n, sorted(known)))
    return ",".join(names)


def forgive_dtype_names(value: str) -> str:
    """A name (or a comma list of them) forgiven case and surrounding spaces: ``" BF16"`` -> ``bf16``."""
    return ",".join(v.strip().lower() for v in str(value).split(","))


def dtype_parser(allowed: tuple[str, ...], what: str):
    """A parser for a dtype option (or a comma list of dtypes): forgiven case and spaces, and one
    of ``allowed`` or refused under the option's own name."""
    from rooflinecli.errors import unknown_name_error

    def parse(value) -> str:
        names = forgive_dtype_names(value)
        for n in names.split(","):
            if n not in allowed:
                raise _bad(unknown_name_error(what, n, allowed))
        return names

    return parse


def engine_name(value) -> str:
    """``--engine``: an engine profile (``achievable.ENGINES``), forgiven case and spaces."""
    from rooflinecli.achievable.profiles import get_engine
    from rooflinecli.errors import RooflineError

    name = forgive_dtype_names(value)
    try:
        get_engine(name)
    except RooflineError as e:
        raise _bad(e) from None
    return name


def mode_name(value) -> str:
    """``--mode``: roof or one of ``predict.MODES``, forgiven case and spaces (whether the GPU
    has what the mode needs is checked once the GPU is known)."""
    from rooflinecli.predict import MODES, ROOF

    name = forgive_dtype_names(value).replace("_", "-")
    if name not in (ROOF, *MODES):
        raise typer.BadParameter(f"unknown mode '{name}'; known: {', '.join((ROOF, *MODES))}")
    return name


#: one GPU, by id or path; env ROOFLINE_HW sets the default.
HwOption = Annotated[
    str,
    typer.Option("--hw", "--hw-file", help=HW_HELP, envvar="ROOFLINE_HW", show_envvar=True, parser=forgive_gpu_names, metavar="GPU"),
]

#: several GPUs, comma-separated ids or paths ("h100-sxm,h200,my-gpu.toml").
HwListOption = Annotated[
    str,
    typer.Option("--hw", "--hw-file", help="Comma-separated GPUs: ids or spec file paths.", envvar="ROOFLINE_HW", parser=forgive_gpu_names, metavar="GPUS"),
]

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of tables.")]


#: the largest token count any option takes (prompt, context, sequence): 2**30 = 1,073,741,824
MAX_TOKENS = 1 << 30
#: the largest --gen: every generated token is one decode step the analysis computes (4,194,304
#: steps take about 1.5 s and 0.6 GB; 1e8 would take 31 s and 14 GB)
MAX_GEN_TOKENS = 1 << 22
#: options whose token limit is not MAX_TOKENS
TOKEN_LIMITS: dict[str, int] = {"--gen": MAX_GEN_TOKENS}

#: every integer option: at most 2**53 in size (exact as a float64, far inside int64)
MAX_OPTION_INT = 1 << 53
#: per-parameter maxima, checked before any work (parameter name -> (limit, what it is))
PARAM_MAXIMA: dict[str, tuple[float, str]] = {
    "draft_tokens": (1024, "draft tokens per step"),
    "batch": (1 << 24, "sequences per batch"),
    "launch_overhead_us": (1e6, "us per kernel launch"),
    "price_per_gpu_hour": (1e6, "USD per GPU-hour"),
    "rate": (1e9, "requests per second"),
}


def parse_tokens(value, limit: int = MAX_TOKENS) -> int:
    """A token count: ``4096``, ``4k`` (k = 1024) or ``1.5k``; used by --prompt/--gen/--context/--seq.
    Not a number, not whole, infinite, negative or above ``limit`` is a BadParameter (one line)."""
    if isinstance(value, int) and not isinstance(value, bool):
        tokens: float = value
    else:
        text = str(value).strip().lower()
        scale = 1024 if text.endswith("k") else 1
        number = text[:-1] if scale > 1 else text
        try:
            tokens = float(number) * scale
        except (ValueError, OverflowError):
            raise typer.BadParameter(f"'{value}' is not a token count (e.g. 4096 or 32k, k = 1024)") from None
    if tokens != tokens or tokens in (float("inf"), float("-inf")):
        raise typer.BadParameter(f"'{value}' is not a finite token count")
    if tokens < 0:
        raise typer.BadParameter(f"'{value}' is negative; a token count is >= 0")
    if tokens > limit:
        raise typer.BadParameter(f"'{value}' is above the limit of {limit:,} tokens")
    if tokens != int(tokens):
        raise typer.BadParameter(f"'{value}' is not a whole number of tokens")
    return int(tokens)


def tokens_option(*names: str, help: str, minimum: int = 0) -> typer.models.OptionInfo:  # noqa: A002 - typer's own word
    """A Typer option for a token count that accepts a ``k`` suffix (``--prompt 32k``); below
    ``minimum`` is a BadParameter, which Click reports under the option's own name."""
    limit = min((TOKEN_LIMITS.get(n, MAX_TOKENS) for n in names), default=MAX_TOKENS)

    def parse(v) -> int:
        tokens = parse_tokens(v, limit)
        if tokens < minimum:
            raise typer.BadParameter(f"'{v}' is below {minimum}; give at least {minimum} token{'s' if minimum > 1 else ''}")
        return tokens

    return typer.Option(
        *names,
        help=help + f" Accepts a k suffix (32k = 32768); at most {limit:,}.",
        parser=parse,
        metavar="TOKENS",
    )


def _option_name(param: str) -> str:
    """The command-line spelling of a callback parameter (``draft_tokens`` -> ``--draft-tokens``),
    taken from the running Click command when there is one."""
    try:
        from rooflinecli.cli import current_click_context

        ctx = current_click_context()
        for p in ctx.command.params if ctx is not None else ():
            if p.name == param:
                return max(p.opts, key=len) if getattr(p, "opts", None) else param
    except Exception:  # noqa: BLE001 - only for the message; the fallback is just as clear
        pass
    return "--" + param.replace("_", "-")


def check_option_values(kwargs: dict) -> None:
    """Every number the user gave an option is finite and within range, before any work: floats
    finite (``inf``, ``nan``, ``1e400`` refused), integers at most 2**53 in size, and the
    per-parameter maxima of ``PARAM_MAXIMA``. Raises a one-line RooflineError naming the option."""
    import math

    from rooflinecli.errors import RooflineError

    for name, value in kwargs.items():
        values = value if isinstance(value, (list, tuple)) else (value,)
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if isinstance(v, float) and not math.isfinite(v):
                raise RooflineError(f"{_option_name(name)}: must be a finite number, got {v}")
            if isinstance(v, int) and abs(v) > MAX_OPTION_INT:
                raise RooflineError(f"{_option_name(name)}: {v} is out of range (at most 2**53 = {MAX_OPTION_INT:,})")
            if name in PARAM_MAXIMA and v > PARAM_MAXIMA[name][0]:
                limit, what = PARAM_MAXIMA[name]
                raise RooflineError(f"{_option_name(name)}: {v:g} {what} is above the limit of {limit:,g}")


def model_and_spec_files(cfgs, specs) -> dict[str, str]:
    """The files a run reads to build its models and GPUs, for ``refuse_overwriting_inputs``: each
    config.json given by path, each spec file (built-in ones too) and each calibration file a
    measured spec names. ``report --model cfg.json --out cfg.json`` replaced the config."""
    from rooflinecli.achievable import calibration_path

    files: dict[str, str] = {}
    for cfg in cfgs:
        if cfg.source and not cfg.source.startswith("preset:"):
            files[f"--model's config file ({cfg.name})"] = cfg.source
    for spec in specs:
        if spec is None:
            continue
        if spec.path:
            files[f"--hw's spec file ({spec.id})"] = str(spec.path)
        cal = calibration_path(spec)
        if cal is not None:
            files[f"{spec.id}'s calibration file"] = str(cal)
    return files
