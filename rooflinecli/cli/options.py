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

#: one GPU, by id or path; env ROOFLINE_HW sets the default.
HwOption = Annotated[
    str,
    typer.Option("--hw", "--hw-file", help=HW_HELP, envvar="ROOFLINE_HW", show_envvar=True),
]

#: several GPUs, comma-separated ids or paths ("h100-sxm,h200,my-gpu.toml").
HwListOption = Annotated[
    str,
    typer.Option("--hw", "--hw-file", help="Comma-separated GPUs: ids or spec file paths.", envvar="ROOFLINE_HW"),
]

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of tables.")]


def parse_tokens(value) -> int:
    """A token count: ``4096``, ``4k`` (k = 1024) or ``1.5k``; used by --prompt/--gen/--context/--seq."""
    if isinstance(value, int):
        return value
    text = str(value).strip().lower()
    scale = 1024 if text.endswith("k") else 1
    number = text[:-1] if scale > 1 else text
    try:
        tokens = float(number) * scale
    except ValueError:
        raise typer.BadParameter(f"'{value}' is not a token count (e.g. 4096 or 32k, k = 1024)") from None
    if tokens != int(tokens):
        raise typer.BadParameter(f"'{value}' is not a whole number of tokens")
    return int(tokens)


def tokens_option(*names: str, help: str) -> typer.models.OptionInfo:  # noqa: A002 - typer's own word
    """A Typer option for a token count that accepts a ``k`` suffix (``--prompt 32k``)."""
    return typer.Option(*names, help=help + " Accepts a k suffix (32k = 32768).", parser=parse_tokens, metavar="TOKENS")
