"""The running Click context, found through whichever click typer uses."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from rooflinecli.cli import current_click_context
from rooflinecli.cli.options import _option_name


def test_current_click_context_is_the_running_command():
    app = typer.Typer()
    seen = []

    @app.command()
    def tokens(draft_tokens: int = typer.Option(1, "-k", "--draft")):
        ctx = current_click_context()
        seen.append((ctx.command.name, "draft_tokens" in [p.name for p in ctx.command.params], _option_name("draft_tokens")))

    r = CliRunner().invoke(app, ["-k", "2"])
    assert r.exit_code == 0, r.output
    # the option's own spelling, read off the running command (not the parameter's name, --draft-tokens)
    assert seen == [("tokens", True, "--draft")]


def test_no_click_context_outside_a_command():
    assert current_click_context() is None
