"""Finding and loading spec files: the built-in ones under ``hardware_specs/`` (datasheet) and
``hardware_specs/measured/``, a file given by path, a GPU named by id. The ceilings a measured
spec derives from them (``bound_spec``, ``measured_peer``) are ``rooflinecli.ceilings``'.

Imports run one way: ``spec`` (dataclasses) <- ``schema`` (parsing, bases resolved by a function
passed in) and ``plausible`` (ranges and cross-field rules) <- this module, which passes
``resolve_base`` to the schema and applies the rules to every file it loads.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from rooflinecli.errors import RooflineError, closest, parse_toml_text, read_user_file, unknown_name_error
from rooflinecli.hardware.plausible import check as check_plausible
from rooflinecli.hardware.plausible import slip
from rooflinecli.hardware.schema import parse_spec as parse_schema
from rooflinecli.hardware.spec import HardwareSpec

#: a spec file is a page of TOML; anything over 1 MB is not one
MAX_SPEC_FILE_BYTES = 1_000_000


# ------------------------------------------------------------------------------------------------
# Locating and loading
# ------------------------------------------------------------------------------------------------


def specs_dir() -> Path:
    """The folder of built-in spec files: inside the package in a wheel, the repo root otherwise."""
    here = Path(__file__).resolve().parent.parent  # the rooflinecli package
    for candidate in (here / "hardware_specs", here.parent / "hardware_specs"):
        if candidate.is_dir():
            return candidate
    raise RooflineError(f"hardware_specs folder not found beside {here}")


def read_spec_toml(path: str | Path) -> dict:
    """The parsed TOML of a spec file, or a one-line RooflineError naming the file."""
    path = Path(path)
    return parse_toml_text(read_user_file(path, "spec file", MAX_SPEC_FILE_BYTES), str(path))


def load_spec_file(path: str | Path, expect_kind: str | None = None) -> HardwareSpec:
    """Load and validate one spec file; every problem is a one-line RooflineError naming the file.

    ``expect_kind`` ("datasheet" or "measured") is checked before anything else, so that a measured
    spec dropped among the datasheets is reported rather than resolved against itself.
    """
    raw = read_spec_toml(path)
    if expect_kind is not None:
        kind = raw.get("kind", "datasheet")
        if kind != expect_kind:
            where = "hardware_specs/measured/" if kind == "measured" else "hardware_specs/"
            raise RooflineError(f"{path}: kind: a '{kind}' spec belongs in {where}, not beside {expect_kind} specs")
    return parse_spec(raw, str(path))


def resolve_base(base: str, path: str) -> HardwareSpec:
    """The datasheet spec a measured spec at ``path`` names as ``base``: a built-in id, or a spec
    file (relative to ``path``'s folder) that is itself a datasheet spec (no chain, no cycle)."""
    if base.endswith(".toml") or "/" in base:
        p = Path(base)
        if not p.is_absolute():
            p = Path(path).parent / p
        if not p.is_file():
            raise RooflineError(f"base spec file '{base}' not found")
        if p.resolve() == Path(path).resolve():
            raise RooflineError("a spec cannot be its own base")
        try:
            return load_spec_file(p, expect_kind="datasheet")
        except RooflineError as e:
            raise RooflineError(f"base spec file '{base}' does not load: {e}") from None
    ids = builtin_ids()
    if base not in ids:
        hint = closest(base, ids)
        tail = f" (did you mean '{hint}'?)" if hint else ""
        raise RooflineError(f"unknown base GPU '{base}'{tail}; known: {', '.join(ids)}")
    return builtin_spec(base)


def parse_spec(raw: dict, path: str) -> HardwareSpec:
    """A parsed spec file -> its ``HardwareSpec``: the schema (``schema.parse_spec``, bases found by
    ``resolve_base``), then the plausibility rules (``plausible.check``: ranges in both directions,
    L2 above HBM, fp8 at least bf16, a measured figure at most 1.1x its datasheet figure). One
    RooflineError line naming the file and the key otherwise."""
    bases: list[HardwareSpec] = []

    def resolve(base: str, at: str) -> HardwareSpec:
        bases.append(resolve_base(base, at))
        return bases[-1]

    spec = parse_schema(raw, path, resolve, slip)
    check_plausible(spec, bases[-1] if bases else None)
    return spec


def load_spec_files(paths: list[Path], expect_kind: str | None = None) -> dict[str, HardwareSpec]:
    """Several spec files by id; a duplicate id is an error naming both files."""
    specs: dict[str, HardwareSpec] = {}
    for p in paths:
        spec = load_spec_file(p, expect_kind)
        if spec.id in specs:
            raise RooflineError(f"{p}: id: duplicate id '{spec.id}' (also in {specs[spec.id].path})")
        specs[spec.id] = spec
    return specs


@lru_cache(maxsize=None)
def builtin_ids() -> tuple[str, ...]:
    """Ids of the datasheet specs, sorted: the names of ``hardware_specs/*.toml`` (a built-in
    spec's id is its file's name, so a command reads only the files of the GPUs it names)."""
    return tuple(sorted(p.stem for p in specs_dir().glob("*.toml")))


@lru_cache(maxsize=None)
def builtin_spec(spec_id: str) -> HardwareSpec:
    """One datasheet spec by id, its file alone read; an unknown id or a file whose ``id`` is not
    its name is a one-line RooflineError."""
    if spec_id not in builtin_ids():
        raise unknown_name_error("GPU", spec_id, builtin_ids())
    path = specs_dir() / f"{spec_id}.toml"
    return _named_as_file(load_spec_file(path, "datasheet"), path)


def _named_as_file(spec: HardwareSpec, path: Path) -> HardwareSpec:
    """``spec`` (a datasheet spec in ``hardware_specs/``), refused unless its id is its file's name."""
    if spec.id != path.stem:
        raise RooflineError(f"{path}: id: '{spec.id}' is not the file's name; a built-in spec's id is its file name ('{path.stem}')")
    return spec


@lru_cache(maxsize=None)
def builtin_specs() -> dict[str, HardwareSpec]:
    """Every datasheet spec in ``hardware_specs/*.toml`` by id (``builtin_spec`` of each)."""
    return {spec_id: builtin_spec(spec_id) for spec_id in builtin_ids()}


def measured_specs() -> dict[str, HardwareSpec]:
    """Measured specs in ``hardware_specs/measured/*.toml`` by id (not cached: calibrate adds them)."""
    d = specs_dir() / "measured"
    if not d.is_dir():
        return {}
    specs = load_spec_files(sorted(d.glob("*.toml")), "measured")
    for spec_id, spec in specs.items():
        if spec_id in builtin_ids():
            raise RooflineError(f"{spec.path}: id: duplicate id '{spec_id}' (also in {specs_dir() / (spec_id + '.toml')})")
    return specs


def all_specs() -> dict[str, HardwareSpec]:
    """Built-in datasheet specs, then measured ones, by id."""
    return {**builtin_specs(), **measured_specs()}


def _ids_on_disk(measured: bool) -> dict[str, list[Path]]:
    """The ``id`` of every built-in (and, if ``measured``, measured) spec file, read without
    validating the files (so that a bad file among them cannot hide a clash): id -> its files."""
    d = specs_dir()
    ids: dict[str, list[Path]] = {}
    for p in sorted(d.glob("*.toml")) + (sorted((d / "measured").glob("*.toml")) if measured else []):
        try:
            spec_id = read_spec_toml(p).get("id")
        except RooflineError:
            continue
        if isinstance(spec_id, str):
            ids.setdefault(spec_id, []).append(p)
    return ids


def load_user_spec(path: str | Path) -> HardwareSpec:
    """A spec file named by path (``--hw my-gpu.toml``, ``hw validate``): the checks of
    ``load_spec_file`` plus its id being unique among the built-in datasheet specs (a copy of
    ``h100-sxm.toml`` that keeps ``id = "h100-sxm"`` would make two GPUs of one name) and, for a
    file inside ``hardware_specs/`` (where a clash breaks every command), among the measured specs
    too. ``hw validate`` and every command load a path through this one function, so a file that
    validates loads everywhere."""
    spec = load_spec_file(path)
    here = Path(path).resolve()
    inside = specs_dir().resolve() in here.parents
    if here.parent == specs_dir().resolve() and spec.kind == "datasheet":
        _named_as_file(spec, Path(path))
    others = [p for p in _ids_on_disk(measured=inside).get(spec.id, []) if p.resolve() != here]
    if others:
        raise RooflineError(f"{path}: id: duplicate id '{spec.id}' (also in {others[0]}); give this GPU its own id")
    return spec


def is_spec_path(name_or_path: str) -> bool:
    """Whether ``--hw`` names a file rather than an id."""
    return name_or_path.endswith(".toml") or "/" in name_or_path or "\\" in name_or_path


def get_spec(name_or_path: str) -> HardwareSpec:
    """A spec by id (built-in or measured) or by path to a .toml file."""
    name_or_path = name_or_path.strip()
    if is_spec_path(name_or_path):
        return load_user_spec(name_or_path)
    if name_or_path in builtin_ids():
        return builtin_spec(name_or_path)
    measured = measured_specs()
    if name_or_path in measured:
        return measured[name_or_path]
    known = sorted([*builtin_ids(), *measured])
    prefixed = [k for k in known if k.startswith(name_or_path)]  # "h100" -> "h100-pcie" beats "h200"
    if name_or_path and prefixed:
        hint = " or ".join(f"'{k}'" for k in prefixed)
        raise RooflineError(f"unknown GPU '{name_or_path}' (did you mean {hint}?); known: {', '.join(known)}")
    raise unknown_name_error("GPU", name_or_path, known)


def get_specs(names: str) -> list[HardwareSpec]:
    """Comma-separated ids or paths -> specs."""
    specs = [get_spec(n) for n in names.split(",") if n.strip()]
    if not specs:
        raise RooflineError("no GPU given: pass an id (see `roofline hw list`) or a spec file path")
    seen: dict[str, HardwareSpec] = {}
    for s in specs:
        if s.id in seen:
            where = f" ({seen[s.id].path} and {s.path})" if seen[s.id].path != s.path else ""
            raise RooflineError(f"--hw: GPU '{s.id}' given twice{where}; each GPU needs its own id")
        seen[s.id] = s
    return specs
