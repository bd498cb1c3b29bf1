"""The analytical commands must start fast: none of them may import torch, triton, pandas or plotly,
and the commands that answer from a spec or a config alone (model show / list, hw list / show) do
not import numpy either (about 0.1 s of start-up)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "triton", "pandas", "plotly")
#: commands that must not import numpy either
NO_NUMPY = ("model show llama-3-70b --json", "model show mistral-7b", "model list", "hw show h200 --json", "hw list")

COMMANDS = [
    "analyze --json",
    "analyze --model deepseek-v3 --hw h200 --tp 8 --ep 8 --weight-dtype fp8 --batch 64",
    "kv --model deepseek-v3 --json",
    "moe --model mixtral-8x7b --json",
    "attention-io --seq 4096 --head-dim 128 --json",
    "compare --model llama-3-8b --hw h100-sxm,h200 --json",
    "rope --model llama-3-8b --target-context 32k --json",
    "speculative -k 3 --acceptance 0.8 --json",
    "disagg --model llama-3-8b --prompt 1k --gen 128 --rate 5 --ttft-target 0.5 --tpot-target 0.05 --json",
    "model show llama-3-70b --json",
    "model list",
    "hw show h200 --json",
    "hw list",
]

PROBE = """
import runpy, sys
sys.argv = ["roofline", *sys.argv[1:]]
try:
    runpy.run_module("rooflinecli", run_name="__main__")
except SystemExit as e:
    code = e.code or 0
else:
    code = 0
heavy = [m for m in %r if m in sys.modules]
sys.stderr.write("HEAVY=" + ",".join(heavy) + "\\n")
sys.stderr.write("NUMPY=" + str("numpy" in sys.modules) + "\\n")
import gc
sys.stderr.write("GC=" + str(gc.isenabled()) + "\\n")
sys.stderr.write("OWN=" + ",".join(sorted(m for m in sys.modules if m.startswith("rooflinecli"))) + "\\n")
sys.exit(code)
""" % (HEAVY,)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.split(" --")[0].replace(" ", "-"))
def test_analytical_command_imports_nothing_heavy(command):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *command.split()], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("HEAVY=")][-1]
    assert line == "HEAVY=", f"`roofline {command}` imported {line[6:]}"


@pytest.mark.parametrize("command", NO_NUMPY, ids=lambda c: c.split(" --")[0].replace(" ", "-"))
def test_spec_and_config_commands_do_not_import_numpy(command):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *command.split()], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "NUMPY=False" in proc.stderr.splitlines(), f"`roofline {command}` imported numpy"


def test_every_command_is_mapped_to_the_module_that_registers_it():
    """`roofline X` builds only X's module (start-up time); the map must name every command."""
    from rooflinecli.cli import COMMAND_MODULE, MODULES, build_app

    for module in MODULES:
        sub = build_app((module,))
        names = [c.name or c.callback.__name__ for c in sub.registered_commands] + [g.name for g in sub.registered_groups]
        assert names, f"module {module} registers nothing"
        for name in names:
            assert COMMAND_MODULE.get(name) == module, f"command '{name}' of module {module} is not in COMMAND_MODULE"
    full = build_app()
    total = len(full.registered_commands) + len(full.registered_groups)
    assert total == len(COMMAND_MODULE)


def test_console_script_runs_a_command_and_prints_help():
    for args, needle in ((["model", "show", "gpt2", "--json"], '"num_layers": 12'), (["--help"], "regress")):
        proc = subprocess.run([sys.executable, "-m", "rooflinecli", *args], capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert needle in proc.stdout


@pytest.mark.parametrize(("command", "collector"), [
    ("analyze --no-ops", False),
    ("hw list", False),
    ("model show llama-3-8b --json", False),
    ("kv --json", False),
    ("sweep --help", True),
    ("serve --help", True),
    ("--help", True),
])
def test_the_quick_commands_run_with_the_cyclic_collector_paused(command, collector):
    """The entry pauses the cyclic garbage collector for start-up; only the quick analytical
    commands keep it paused (the measuring, report, serving and gate commands run for minutes)."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *command.split()], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert f"GC={collector}" in proc.stderr.splitlines(), proc.stderr[-500:]


@pytest.mark.parametrize(("command", "unread"), [
    ("model show llama-3-70b --json", ("rooflinecli.quant",)),  # a 16-bit checkpoint
    ("hw list", ("rooflinecli.quant", "rooflinecli.achievable.profiles")),
])
def test_the_spec_and_config_commands_read_only_what_they_answer_from(command, unread):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *command.split()], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    own = next(ln for ln in proc.stderr.splitlines() if ln.startswith("OWN=")).removeprefix("OWN=").split(",")
    assert not set(unread) & set(own), f"`roofline {command}` imported {sorted(set(unread) & set(own))}"
