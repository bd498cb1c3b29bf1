#!/usr/bin/env python3
"""Regenerate (or check) the README's tour: the first ```console block under "A short tour".

Each `$ roofline ...` line in that block is run as a subprocess at a fixed width, and its output
(trailing spaces stripped) follows it. `tests/project/test_readme.py` runs the same commands and fails if the
README no longer matches, so the docs cannot drift from the tool.

    python scripts/readme_tour.py           # rewrite README.md's tour in place
    python scripts/readme_tour.py --check   # exit 1 if it is stale
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
WIDTH = "172"
_BLOCK = re.compile(r"(## A short tour\n.*?```console\n)(.*?)(```\n)", re.S)


def tour_commands(readme: str) -> list[str]:
    m = _BLOCK.search(readme)
    if not m:
        raise SystemExit("README.md has no console block under '## A short tour'")
    return [line[2:] for line in m.group(2).splitlines() if line.startswith("$ roofline ")]


def run(command: str) -> tuple[int, str]:
    env = dict(os.environ, COLUMNS=WIDTH, PYTHONPATH=str(ROOT))
    env.pop("NO_COLOR", None)
    argv = shlex.split(command)
    proc = subprocess.run(
        [sys.executable, "-m", "rooflinecli", *argv[1:]], capture_output=True, text=True, env=env, cwd=ROOT
    )
    text = proc.stderr + proc.stdout
    return proc.returncode, "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def render(commands: list[str]) -> str:
    parts = []
    for command in commands:
        code, out = run(command)
        if code != 0:
            raise SystemExit(f"`{command}` exited {code}:\n{out}")
        parts.append(f"$ {command}\n{out}\n")
    return "\n".join(parts)


def main() -> int:
    readme = README.read_text(encoding="utf-8")
    block = render(tour_commands(readme))
    new = _BLOCK.sub(lambda m: m.group(1) + block + m.group(3), readme, count=1)
    if "--check" in sys.argv:
        if new != readme:
            print("README.md's tour is stale: run python scripts/readme_tour.py")
            return 1
        return 0
    if new != readme:
        from rooflinecli.output import write_text_atomic

        write_text_atomic(README, new)
        print("README.md tour updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
