"""The ``roofline`` command line: one Typer sub-app (or command module) per area.

Commands are thin: parse, call the library, render. Heavy packages (torch, triton, pandas, plotly)
are imported inside the commands that need them, never here. Every command callback is wrapped so
that a ``RooflineError`` (bad input) prints one line, ``error: ...``, and exits with code 2.
"""

from __future__ import annotations

import functools

import typer

from rooflinecli.errors import RooflineError

app = typer.Typer(
    name="roofline",
    help="How fast an LLM should run on a GPU: roofline model of prefill and decode, checked against Triton kernels timed on real hardware.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        from rooflinecli import __version__

        typer.echo(f"rooflinecli {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True, callback=_version_callback),
) -> None:
    """How fast an LLM should run on a GPU."""


def one_line_errors(fn):
    """Wrap a command callback: RooflineError -> ``error: <message>`` on stderr, exit 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RooflineError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        except BrokenPipeError:
            raise typer.Exit(0) from None

    wrapper.__rooflinecli_wrapped__ = True
    return wrapper


def _wrap_all(t: typer.Typer) -> None:
    for info in t.registered_commands:
        if info.callback is not None and not getattr(info.callback, "__rooflinecli_wrapped__", False):
            info.callback = one_line_errors(info.callback)
    for group in t.registered_groups:
        if group.typer_instance is not None:
            _wrap_all(group.typer_instance)


def _register() -> None:
    from rooflinecli.cli import analysis, analyze, hw, measure, model, regress, report, sweep

    for module in (hw, model, analyze, analysis, sweep, measure, report, regress):
        module.register(app)
    _wrap_all(app)


_register()


def main() -> None:
    """Console-script entry point (``roofline``) and ``python -m rooflinecli``."""
    app()
