"""The package's structure: no import circle between rooflinecli's units (its subpackages and
top-level modules), lazy imports inside functions included, and no unit imports one of a higher
layer. The layers, bottom up: plain helpers; hardware specs and model configs; the pure roofline
(``analysis``); the ceiling sets and the calibrated model (``ceilings``, ``achievable``); the one
prediction path (``predict``); what is built on it (what-ifs, reports, measuring, the gate,
serving, importers); the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "rooflinecli"

#: unit -> layer; a unit may import units of its own layer or lower only
LAYERS: dict[str, int] = {}
for layer, units in enumerate(
    (
        ("errors", "fmt", "console", "formulas", "dtypes", "stats", "output", "quant", "bulk", "forked", "__init__"),
        ("hardware", "models", "hf_config", "model_registry", "params", "kv", "rope", "results"),
        ("analysis",),
        ("ceilings", "achievable"),
        ("predict",),
        ("whatif", "report", "bench", "gate", "serve", "importer"),
        ("cli", "__main__"),
    )
):
    for u in units:
        LAYERS[u] = layer


#: the units by name: a subpackage or a top-level module; any other name imported from the
#: package (``from rooflinecli import __version__``) is the package's ``__init__``
UNITS = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()} | {p.stem for p in PKG.glob("*.py")}


def _unit(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> set[str]:
    """rooflinecli units imported anywhere in ``path`` (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(PKG)
    out: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(rel.parts[:-1])[: len(rel.parts) - node.level]
                mod = ".".join(["rooflinecli", *base, *([node.module] if node.module else [])])
                names = [mod] if node.module else [f"{mod}.{a.name}" for a in node.names]
            elif node.module:
                names = [node.module] + ([f"{node.module}.{a.name}" for a in node.names] if node.module == "rooflinecli" else [])
        for n in names:
            parts = n.split(".")
            if parts[0] == "rooflinecli" and len(parts) > 1:
                out.add(parts[1] if parts[1] in UNITS else "__init__")
    return out


def _graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        u = _unit(path)
        g.setdefault(u, set()).update(d for d in _imports(path) if d != u)
    return g


def test_every_unit_has_a_layer():
    assert set(_graph()) <= set(LAYERS), f"units without a layer: {sorted(set(_graph()) - set(LAYERS))}"


def test_no_unit_imports_a_higher_layer():
    up = sorted((u, d) for u, deps in _graph().items() for d in deps if LAYERS.get(d, 99) > LAYERS.get(u, -1))
    assert not up, f"upward imports (unit -> higher unit): {up}"


def test_no_import_circle_between_units():
    g = _graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(u: str, stack: list[str]) -> None:
        state[u] = 1
        for d in sorted(g.get(u, ())):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d] if d in stack else [u, d])
            elif d not in state:
                visit(d, [*stack, d])
        state[u] = 2

    for u in sorted(g):
        if u not in state:
            visit(u, [u])
    assert not cycles, f"import circles: {cycles}"


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """The graph reads imports inside functions and resolves relative ones (or it would pass vacuously)."""
    g = _graph()
    assert "achievable" in g["predict"]  # imported lazily inside predict's functions
    assert "analysis" in g["achievable"]
    assert "hardware" in g["analysis"]
