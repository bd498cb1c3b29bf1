"""Plausible spec figures: ranges in both directions with the unit a 1,000x slip looks like, the
cross-field rules (L2 above memory bandwidth, fp8 at least bf16, measured at most 1.1x datasheet),
the same rules on `hw validate` and on every load, and the hardware package's one-way imports."""

from __future__ import annotations

import ast
import copy
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooflinecli.errors import RooflineError
from rooflinecli.hardware import get_spec, load_spec_file, parse_spec, specs_dir
from rooflinecli.hardware.plausible import PEAK_RANGES, RANGES, problems, range_for

SHIPPED = sorted(specs_dir().glob("*.toml")) + sorted((specs_dir() / "measured").glob("*.toml"))
DATASHEETS = sorted(specs_dir().glob("*.toml"))


def _roofline(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rooflinecli", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(specs_dir())))
def test_every_shipped_spec_loads_and_is_plausible(path):
    spec = load_spec_file(path)
    base = get_spec(spec.base) if spec.base else None
    assert problems(spec, base) == []


def test_every_figure_of_a_shipped_spec_has_a_range():
    spec = get_spec("h200")
    keys = [f"peak_dense_tflops.{d}" for d in spec.peak_dense_tflops] + list(RANGES)
    assert all(range_for(k) is not None for k in keys)
    assert set(PEAK_RANGES) >= set(spec.peak_dense_tflops)


def _figures(raw: dict) -> list[tuple[str, str]]:
    out = [("peak_dense_tflops", d) for d in raw["peak_dense_tflops"]]
    out += [(t, k) for t in ("memory", "cache", "compute", "interconnect", "power") for k, v in raw[t].items()
            if isinstance(v, (int, float)) and range_for(f"{t}.{k}") is not None]
    return out


CASES = [(p, t, k) for p in DATASHEETS for t, k in _figures(tomllib.loads(p.read_text()))]


@pytest.mark.parametrize("path,table,key", CASES, ids=[f"{p.stem}-{t}.{k}" for p, t, k in CASES])
def test_a_figure_typed_in_a_unit_1000x_off_is_refused_naming_the_unit(path, table, key):
    raw = tomllib.loads(path.read_text())
    value = raw[table][key]
    r = range_for(f"{table}.{key}")
    small = copy.deepcopy(raw)
    small[table][key] = value / 1000  # 3350 GB/s typed as 3.35 (TB/s)
    with pytest.raises(RooflineError) as e:
        parse_spec(small, "slip.toml")
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"slip.toml: {table}.{key}: ")
    assert f"looks like {r.small_looks_like} (write {value:g})" in line
    large = copy.deepcopy(raw)
    large[table][key] = value * 1000  # typed in the unit 1,000x smaller
    with pytest.raises(RooflineError) as e:
        parse_spec(large, "slip.toml")
    line = str(e.value)
    assert line.startswith(f"slip.toml: {table}.{key}: ") and f"looks like {r.large_looks_like} (write {value:g})" in line, line


def _h200(tmp_path: Path, *subs: tuple[str, str], name: str = "x200.toml") -> Path:
    text = (specs_dir() / "h200.toml").read_text().replace('id = "h200"', 'id = "x200"', 1)
    for old, new in subs:
        assert old in text, old
        text = text.replace(old, new, 1)
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "old,new,key,says",
    [
        ("bandwidth_gb_per_s = 4800", "bandwidth_gb_per_s = 4.8", "memory.bandwidth_gb_per_s", "bandwidth_gb_per_s = 4.8 looks like TB/s"),
        ("bf16 = 989.5", "bf16 = 0.9895", "peak_dense_tflops.bf16", "bf16 = 0.9895 looks like PFLOP/s"),
        ("gpu_link_gb_per_s = 900", "gpu_link_gb_per_s = 0.9", "interconnect.gpu_link_gb_per_s", "looks like TB/s"),
        ("boost_clock_mhz = 1980", "boost_clock_mhz = 1.98", "compute.boost_clock_mhz", "looks like GHz"),
        ("l2_bandwidth_gb_per_s = 10000", "l2_bandwidth_gb_per_s = 4000", "cache.l2_bandwidth_gb_per_s",
         "L2 bandwidth 4,000 GB/s is not above the memory bandwidth 4,800 GB/s"),
        ("fp8 = 1979.0", "fp8 = 900.0", "peak_dense_tflops.fp8", "fp8 peak 900 TFLOP/s is below the bf16 peak 989.5"),
    ],
    ids=["hbm-in-tb", "bf16-in-pflops", "link-in-tb", "clock-in-ghz", "l2-slower-than-hbm", "fp8-slower-than-bf16"],
)
def test_validate_and_every_load_refuse_an_implausible_figure(tmp_path, old, new, key, says):
    p = _h200(tmp_path, (old, new))
    for args in (("hw", "validate", str(p)), ("analyze", "--model", "llama-3-8b", "--hw", str(p))):
        r = _roofline(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"{p}: {key}: " in lines[0] and says in lines[0], lines[0]


def _measured(tmp_path: Path, body: str, name: str = "lab.toml") -> Path:
    p = tmp_path / name
    p.write_text('id = "h200-lab"\nkind = "measured"\nbase = "h200"\n' + body)
    return p


def test_a_measured_figure_above_its_datasheet_is_refused_and_validate_lists_each(tmp_path):
    p = _measured(tmp_path, "[peak_dense_tflops]\nbf16 = 1200\n[memory]\nbandwidth_gb_per_s = 6000\n")
    r = _roofline("hw", "validate", str(p))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2, r.stderr
    assert f"{p}: peak_dense_tflops.bf16: measured 1,200 TFLOP/s is above 1.1x the datasheet's 989.5 TFLOP/s (h200)" in lines[0]
    assert f"{p}: memory.bandwidth_gb_per_s: measured 6,000 GB/s is above 1.1x the datasheet's 4,800 GB/s" in lines[1]
    with pytest.raises(RooflineError, match=r"peak_dense_tflops\.bf16: measured 1,200"):
        load_spec_file(p)


def test_measured_caps_cover_measured_with_numbers_and_spare_estimates(tmp_path):
    burst = _measured(tmp_path, '[measured_with]\n"burst peak_dense_tflops.bf16" = "1500"\n', "burst.toml")
    with pytest.raises(RooflineError, match=r"burst\.toml: measured_with\.burst peak_dense_tflops\.bf16: measured 1,500 TFLOP/s"):
        load_spec_file(burst)
    within = _measured(tmp_path, "[memory]\nbandwidth_gb_per_s = 5000\n", "within.toml")  # 1.04x: a boost, not a slip
    assert load_spec_file(within).memory_bandwidth_gb_per_s == 5000
    # the datasheet's L2 bandwidth is an estimate (10,000 GB/s): a measurement above it stands
    est = _measured(tmp_path, "[cache]\nl2_bandwidth_gb_per_s = 14000\n", "est.toml")
    assert load_spec_file(est).l2_bandwidth_gb_per_s == 14000


def test_a_cpu_stand_in_keeps_its_tiny_figures_but_not_figures_above_the_datasheet(tmp_path):
    body = '[peak_dense_tflops]\nbf16 = 0.0003\nfp8 = 0.0001\n[memory]\nbandwidth_gb_per_s = 1.2\n[measured_with]\ngpu_name = "cpu (Triton interpreter)"\n'
    spec = load_spec_file(_measured(tmp_path, body, "cpu.toml"))
    assert spec.memory_bandwidth_gb_per_s == 1.2 and spec.peak_dense_tflops["bf16"] == 0.0003
    gpu = _measured(tmp_path, body.replace("cpu (Triton interpreter)", "NVIDIA H200"), "gpu.toml")
    with pytest.raises(RooflineError, match=r"gpu\.toml: peak_dense_tflops\.bf16: 0\.0003 TFLOP/s is below the plausible 5 TFLOP/s"):
        load_spec_file(gpu)
    fast = _measured(tmp_path, body.replace("bandwidth_gb_per_s = 1.2", "bandwidth_gb_per_s = 9000"), "fast.toml")
    with pytest.raises(RooflineError, match=r"fast\.toml: memory\.bandwidth_gb_per_s: measured 9,000 GB/s is above 1\.1x"):
        load_spec_file(fast)


def test_hardware_modules_import_one_way():
    """spec <- schema <- plausible <- loader <- the package: no module imports one after it."""
    order = ["spec", "schema", "plausible", "loader", "__init__"]
    pkg = Path(__file__).resolve().parents[2] / "rooflinecli" / "hardware"
    assert sorted(p.stem for p in pkg.glob("*.py")) == sorted(order)
    assert not (pkg.parent / "hardware_validate.py").exists() and not (pkg.parent / "hardware.py").exists()
    for i, name in enumerate(order):
        tree = ast.parse((pkg / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rooflinecli.hardware"):
                target = node.module.removeprefix("rooflinecli.hardware").lstrip(".") or "__init__"
                assert target != "__init__" or name == "__init__", f"{name} imports the package front door"
                assert order.index(target) < i, f"{name}.py imports {node.module}"


SPEC_FIGURES = [(p, t, k) for p in DATASHEETS for t, k in _figures(tomllib.loads(p.read_text()))]


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(SPEC_FIGURES), factor=st.one_of(st.floats(1e-12, 10.0), st.floats(0.1, 1e12)))
def test_any_figure_scaled_either_loads_plausibly_or_is_one_line_naming_its_key(case, factor):
    """A shipped figure times any factor: the spec loads with every figure in its range and the
    cross-field rules holding, or it is refused in one line that names the file and that key (or
    the other side of a cross-field rule); about 1,000x off from a plausible value, the line names
    the unit it looks like."""
    path, table, key = case
    raw = tomllib.loads(path.read_text())
    value = raw[table][key] * factor
    raw[table][key] = value
    dotted = f"{table}.{key}"
    try:
        spec = parse_spec(raw, "p.toml")
    except RooflineError as e:
        line = str(e)
        assert "\n" not in line and line.startswith("p.toml: ")
        named = line.split(": ", 2)[1]
        r = range_for(dotted)
        if not r.lo <= value <= r.hi:
            assert named == dotted, line
            near = r.lo <= value * 1000 <= r.hi or r.lo <= value / 1000 <= r.hi
            assert ("looks like" in line) == near, line
        else:  # in range: a cross-field rule, naming one of its two figures
            assert named in (dotted, "cache.l2_bandwidth_gb_per_s", "memory.bandwidth_gb_per_s", "peak_dense_tflops.fp8",
                             "peak_dense_tflops.bf16", "peak_dense_tflops.fp4"), line
        return
    assert problems(spec) == []
    r = range_for(dotted)
    assert r.lo <= value <= r.hi
