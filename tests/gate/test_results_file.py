"""The results file's reader and writer shortcuts give what the plain paths give: rows built
without the dataclass's per-field setattr, the copy of a row's nested data, and the big-file JSON
writer (one row a line, NaN as null)."""

from __future__ import annotations

import json
import math
import random
from dataclasses import fields

from rooflinecli.output import json_text
from rooflinecli.results import ResultRow, _copied, _row_json, row_from_checked


def _random_row(rng: random.Random) -> dict:
    samples = [rng.uniform(1e-6, 1e-3) for _ in range(rng.randint(1, 30))]
    d = {"op": rng.choice(["gemm", "copy"]), "impl": "triton", "shape": f"M{rng.randint(1, 9999)}", "dtype": "bf16",
         "samples_s": tuple(samples), "p20_s": min(samples), "p50_s": samples[0], "p80_s": max(samples),
         "flops": rng.uniform(0, 1e12), "bytes": rng.uniform(0, 1e9)}
    optional = [f for f in fields(ResultRow) if f.name not in d]
    for f in rng.sample(optional, rng.randint(0, len(optional))):
        d[f.name] = {"params": {"M": rng.randint(1, 99)}, "config": {"k": {"kwargs": {"BLOCK": 64}, "num_warps": 4}},
                     "correct": rng.random() < 0.5, "note": "n", "method": "cuda_graph"}.get(f.name, rng.uniform(0, 10) if "s" in f.name else "x")
    return d


def test_rows_built_from_checked_fields_equal_the_dataclass_s():
    rng = random.Random(3)
    for _ in range(300):
        d = _random_row(rng)
        fast, plain = row_from_checked(dict(d)), ResultRow(**d)
        assert fast == plain and hash(fast.key) == hash(plain.key) and repr(fast) == repr(plain)
    base = {k: v for k, v in _random_row(random.Random(1)).items() if k not in ("params", "config")}
    a, b = row_from_checked(dict(base)), row_from_checked(dict(base))
    a.params["x"] = 1  # a default factory gives each row its own dict
    assert b.params == {} and a.params == {"x": 1}


def test_a_row_s_json_copies_its_nested_data():
    row = ResultRow(**_random_row(random.Random(5)) | {"config": {"k": {"kwargs": {"BLOCK": [64, 32]}}}})
    d = _row_json(row)
    d["config"]["k"]["kwargs"]["BLOCK"].append(1)
    assert row.config["k"]["kwargs"]["BLOCK"] == [64, 32]
    assert _copied({"a": (1, {"b": 2})}) == {"a": [1, {"b": 2}]}


def test_the_big_file_writer_is_strict_json_with_one_row_a_line():
    rows = [{"x": 1.5, "s": [1e-6, 2e-6]}, {"x": math.nan, "s": [math.inf]}, {"y": [{"nested": 1}, {"nested": 2}]}, {"t": "a [{ in text"}]
    text = json_text({"schema": "s", "rows": rows})
    assert json.loads(text) == {"schema": "s", "rows": [rows[0], {"x": None, "s": [None]}, rows[2], rows[3]]}
    lines = text.splitlines()
    assert '    {"x": 1.5, "s": [1e-06, 2e-06]},' in lines and '    {"x": null, "s": [null]},' in lines
    assert '    {"t": "a [{ in text"}' in lines  # a string that looks like a list of objects stays on its line
    assert any(ln.strip() == '"y": [' for ln in lines)  # a row holding a list of objects is indented
    assert "NaN" not in text and "Infinity" not in text
