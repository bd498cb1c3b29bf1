"""The README's commands are exercised here, so the docs cannot drift from the tool."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

from conftest import load_script
from typer.testing import CliRunner

from rooflinecli.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _tour_module():
    return load_script("readme_tour")


def _first_block() -> list[str]:
    m = re.search(r"```(?:bash|console)?\n(.*?)```", README, re.S)
    assert m, "README has no code block"
    return [line for line in m.group(1).splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_commands_install_run_and_test():
    assert README.index("```") < README.index("## "), "the two commands must come before any section"
    install, test = _first_block()
    assert "pip install" in install and install.rstrip().endswith("roofline analyze")
    assert test.strip() == "scripts/test.sh"


def test_the_test_command_installs_chromium_when_missing_and_the_readme_says_so():
    """On a fresh machine the browser test needs Chromium: scripts/test.sh installs it (apt-get)
    or stops with one line naming it, then runs pytest; the README's paragraph says so."""
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert os.access(ROOT / "scripts" / "test.sh", os.X_OK)
    assert "apt-get install -y -q chromium" in script and "-m pytest -q" in script
    from tests.report.test_report_browser import CHROMIUM_NAMES

    for name in CHROMIUM_NAMES:
        assert name in script, f"scripts/test.sh does not look for {name} as the browser test does"
    intro = README[: README.index("## ")]
    assert "Chromium" in intro and "scripts/test.sh" in intro and "python3-venv" in intro


def test_no_code_or_doc_points_outside_the_repository():
    """A user's clone has no shared folder beside it: what the code relies on lives in
    docs/reference.md. (The names are built here, so this file does not match itself.)"""
    outside = ("../" + "shared", "/work/" + "shared")
    offenders = []
    for folder in ("rooflinecli", "kernels", "benchmarks", "scripts", "docs", "tests"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".sh", ".toml") and path.is_file() and "fixtures" not in path.parts:
                text = path.read_text(encoding="utf-8", errors="replace")
                if any(o in text for o in outside):
                    offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"these files point at the shared folder beside the checkout, which a clone does not have: {offenders}"


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


def test_readme_and_docs_quote_the_same_measured_figures():
    """Measured figures are quoted through markers that scripts/figures.py rewrites from one
    measurement (docs/figures.json): the README and the docs cannot disagree."""
    figures = load_script("figures")
    assert figures.mismatches(json.loads((ROOT / "docs" / "figures.json").read_text(encoding="utf-8"))) == []
    quoted = {}
    for path, name, _ in figures.quotes():
        quoted.setdefault(name, set()).add(path.name)
    assert {"README.md", "whatif.md"} <= quoted["sweep_wall_s"], quoted
    assert "README.md" in quoted["startup_model_show_s"]
    # no unmarked copy of the sweep time is left in the README
    assert not re.search(r"about \d+(\.\d+)? s here", README)


