"""The README's commands are exercised here, so the docs cannot drift from the tool."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from rooflinecli.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _tour_module():
    spec = importlib.util.spec_from_file_location("readme_tour", ROOT / "scripts" / "readme_tour.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _first_block() -> list[str]:
    m = re.search(r"```(?:bash|console)?\n(.*?)```", README, re.S)
    assert m, "README has no code block"
    return [line for line in m.group(1).splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_commands_install_run_and_test():
    assert README.index("```") < README.index("## "), "the two commands must come before any section"
    install, test = _first_block()
    assert "pip install" in install and install.rstrip().endswith("roofline analyze")
    assert "pytest" in test


def test_ci_runs_the_readme_commands_verbatim():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for command in _first_block():
        assert command in ci, f".ci/run does not run the README's command: {command}"


def test_tour_output_matches_the_tool():
    tour = _tour_module()
    commands = tour.tour_commands(README)
    assert len(commands) >= 5
    block = re.search(r"## A short tour\n.*?```console\n(.*?)```\n", README, re.S).group(1)
    rendered = tour.render(commands)
    assert rendered == block, "README tour is stale: run `python scripts/readme_tour.py` and review the diff"


def test_every_roofline_command_the_readme_names_exists():
    runner = CliRunner()
    names = set(re.findall(r"^\$ roofline ([a-z][a-z0-9-]*)", README, re.M))
    names |= set(re.findall(r"`roofline ([a-z][a-z0-9-]*)", README))
    assert {"analyze", "report", "bench", "regress", "hw", "model"} <= names
    for name in sorted(names):
        r = runner.invoke(app, [name, "--help"])
        assert r.exit_code == 0, f"README names `roofline {name}`, which does not exist: {r.output}"


def test_readme_links_point_to_files_that_exist():
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if target.startswith("http"):
            continue
        assert (ROOT / target).exists(), f"README links to missing {target}"


def test_readme_console_lines_parse():
    for line in re.findall(r"^\$ (roofline .*)$", README, re.M):
        shlex.split(line.split("#")[0])
