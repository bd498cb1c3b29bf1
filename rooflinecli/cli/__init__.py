"""The ``roofline`` command line: one Typer sub-app (or command module) per area.

Commands are thin: parse, call the library, render. Heavy packages (torch, triton, pandas, plotly)
are imported inside the commands that need them, never here. Every command callback is wrapped so
that a ``RooflineError`` (bad input) prints one line, ``error: ...``, and exits with code 2.
"""

from __future__ import annotations

import functools
import sys

import typer
from typer.core import TyperGroup

from rooflinecli.errors import RooflineError, one_line


def _click_exception_types() -> tuple[type, type]:
    """(ClickException, Abort) of whichever click this typer uses: typer >= 0.29 vendors click as
    ``typer._click``, older typer uses the ``click`` package; ``typer.BadParameter`` subclasses both."""
    click_exc = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    return click_exc, typer.Abort


def current_click_context():
    """The running Click context (of whichever click typer uses: ``click`` or typer's bundled
    ``typer._click``, whose package does not re-export it; both define it in ``.globals``), or None."""
    import importlib

    package = typer.BadParameter.__mro__[1].__module__.rsplit(".", 1)[0]
    return importlib.import_module(package + ".globals").get_current_context(silent=True)


class OneLineErrorGroup(TyperGroup):
    """The root command group: Click's parse errors (bad option value, missing argument, unknown
    option) become ``error: <what>`` and exit 2, instead of the usage box; ``-h`` still prints usage.

    Overriding ``main`` covers both ``roofline ...`` and ``CliRunner.invoke(app, ...)``.
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        click_exc, abort = _click_exception_types()
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra)
        except click_exc as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # `roofline` or `roofline hw` alone: usage
                typer.echo(e.ctx.get_help() if e.ctx is not None else e.format_message())
                code = 0
            else:
                typer.echo(f"error: {one_line(e.format_message())}", err=True)
                code = 2
            if not standalone_mode:
                return code
            sys.exit(code)
        except abort:
            typer.echo("error: aborted", err=True)
            if not standalone_mode:
                return 1
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


def _version_callback(value: bool) -> None:
    if value:
        from rooflinecli import __version__

        typer.echo(f"rooflinecli {__version__}")
        raise typer.Exit(0)


def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True, callback=_version_callback),
) -> None:
    """How fast an LLM should run on a GPU."""


def one_line_errors(fn):
    """Wrap a command callback: RooflineError -> ``error: <message>`` on stderr, exit 2; an OSError
    on a named path (a file name too long, a symlink loop, no permission) -> ``error: <path>:
    <reason>``, exit 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            from rooflinecli.cli.options import check_option_values

            check_option_values(kwargs)
            return fn(*args, **kwargs)
        except RooflineError as e:
            typer.echo(f"error: {one_line(str(e))}", err=True)
            raise typer.Exit(2) from None
        except BrokenPipeError:
            raise typer.Exit(0) from None
        except OSError as e:  # a path the user gave that the OS refuses (too long, a loop, no access)
            if e.filename is None:
                raise
            name = str(e.filename)
            name = name if len(name) <= 80 else name[:60] + f"... ({len(name):,} characters)"
            typer.echo(f"error: {one_line(name)}: {e.strerror or type(e).__name__}", err=True)
            raise typer.Exit(2) from None

    wrapper.__rooflinecli_wrapped__ = True
    return wrapper


def _wrap_all(t: typer.Typer) -> None:
    for info in t.registered_commands:
        if info.callback is not None and not getattr(info.callback, "__rooflinecli_wrapped__", False):
            info.callback = one_line_errors(info.callback)
    for group in t.registered_groups:
        if group.typer_instance is not None:
            _wrap_all(group.typer_instance)


#: command modules, in help order; each exposes ``register(app)``
MODULES: tuple[str, ...] = ("hw", "model", "analyze", "whatif", "sweep", "serve", "measure", "tune", "report", "regress")

#: which module registers each top-level command (a test checks this against the full app), so that
#: ``roofline model show ...`` builds only the ``model`` commands: Typer inspects every registered
#: command's signature when it starts, which costs start-up time for nothing.
COMMAND_MODULE: dict[str, str] = {
    "hw": "hw",
    "model": "model",
    "analyze": "analyze",
    **{c: "whatif" for c in ("kv", "moe", "attention-io", "compare", "rope", "speculative", "disagg")},
    "sweep": "sweep",
    "serve": "serve",
    **{c: "measure" for c in ("bench", "calibrate", "validate", "e2e")},
    "tune": "tune",
    "report": "report",
    **{c: "regress" for c in ("regress", "golden", "baseline")},
}


def build_app(modules: tuple[str, ...] = MODULES) -> typer.Typer:
    """The ``roofline`` Typer app with the commands of ``modules`` registered and wrapped."""
    import importlib

    app = typer.Typer(
        name="roofline",
        cls=OneLineErrorGroup,
        help="How fast an LLM should run on a GPU: roofline model of prefill and decode, checked against Triton kernels timed on real hardware.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    for name in modules:
        importlib.import_module(f"rooflinecli.cli.{name}").register(app)
    _wrap_all(app)
    return app


def _modules_for(argv: list[str]) -> tuple[str, ...]:
    """Only the module of the command being run; every module for help or an unknown command."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first in COMMAND_MODULE and not any(a in ("-h", "--help") for a in argv[: argv.index(first)]):
        return (COMMAND_MODULE[first],)
    return MODULES


def __getattr__(name: str):
    """``rooflinecli.cli.app``: the full app (tests and ``CliRunner`` use it), built on first use."""
    if name == "app":
        full = build_app()
        globals()["app"] = full
        return full
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: modules whose commands answer in a fraction of a second from specs, configs and formulas: they
#: run with the cyclic garbage collector paused (``rooflinecli.__main__``); the measuring, report,
#: serving and gate commands run for seconds to minutes and keep it on
QUICK_MODULES: tuple[str, ...] = ("hw", "model", "analyze", "whatif")


def main() -> None:
    """The command line (``rooflinecli.__main__``: the ``roofline`` script, ``python -m rooflinecli``)."""
    import gc
    import os
    import sys

    # One BLAS thread unless the user sets one: the commands do elementwise array math, and OpenBLAS
    # starting a thread per core at numpy's import costs ~0.05 s of start-up on a busy 2-core machine.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from rooflinecli.output import guard_stdout  # a closed pipe exits 0, a full disk is one line

    modules = _modules_for(sys.argv[1:])
    if set(modules) <= set(QUICK_MODULES):  # short-lived: the collector would only walk start-up's objects
        gc.disable()
    else:
        gc.enable()
    guard_stdout(lambda: build_app(modules)(prog_name="roofline"))
