"""docs/serve.md shows real output: its steady-state transcripts are re-run and compared line by line."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from rooflinecli.cli import app
from conftest import cli_runner

DOC = Path(__file__).resolve().parents[2] / "docs" / "serve.md"


def _transcripts() -> list[tuple[str, list[str]]]:
    """(command, its output lines) of each full transcript block (no elided lines) of the page."""
    out = []
    for block in re.findall(r"```\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S):
        lines = block.rstrip("\n").splitlines()
        if lines and lines[0].startswith("$ roofline serve --model") and "..." not in lines:
            out.append((lines[0][2:], lines[1:]))
    return out


def test_the_page_has_full_transcripts():
    assert len(_transcripts()) >= 2


@pytest.mark.parametrize("command,lines", _transcripts(), ids=lambda x: x if isinstance(x, str) else "")
def test_transcript_matches_the_tool(command, lines):
    runner = cli_runner()
    r = runner.invoke(app, shlex.split(command)[1:])
    assert r.exit_code == 0, r.output
    assert r.stdout.rstrip("\n").splitlines() == lines
