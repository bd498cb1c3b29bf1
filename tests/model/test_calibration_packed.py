"""Packed numeric table columns (calibration schema 3): the importer's encoding reads back to the
same values, schema 2's lists still read, and a bad packed column is one line naming it."""

from __future__ import annotations

import base64
import gzip
import json

import numpy as np
import pytest

from rooflinecli.achievable.calibration import load_calibration, pack_column, parse_calibration
from rooflinecli.errors import RooflineError
from rooflinecli.importer.aiconfigurator import encode

PROV = {"package": "test", "table_path": "x/gemm_perf.parquet"}


def _doc(schema: str, columns: dict) -> dict:
    return {"schema": schema, "gpu": "G", "engine": "vllm", "rows": [],
            "tables": {"gemm": {"columns": columns, "provenance": PROV}}}


COLS = {"dtype": ["bf16", "bf16", "fp8"], "M": [1, 64, 4096], "N": [4096, 4096, 14336], "K": [4096, 4096, 4096],
        "latency_us": [7.25, 9.125, 301.0625]}


def test_encode_packs_numbers_and_reads_back_the_same(tmp_path) -> None:
    p = tmp_path / "g.calibration.json.gz"
    p.write_bytes(encode(_doc("rooflinecli.calibration/3", COLS), p))
    raw = json.loads(gzip.decompress(p.read_bytes()))
    cols = raw["tables"]["gemm"]["columns"]
    assert cols["dtype"] == COLS["dtype"]  # text stays a list
    assert cols["M"]["packed"] == "<i4" and cols["latency_us"]["packed"] == "<f8"
    back = load_calibration(str(p)).tables["gemm"]["columns"]
    for c in ("M", "N", "K", "latency_us"):
        assert np.array_equal(back[c], np.asarray(COLS[c], dtype=float))
    assert list(back["dtype"]) == COLS["dtype"]


def test_schema_2_lists_still_read() -> None:
    cal = parse_calibration(_doc("rooflinecli.calibration/2", COLS), "old.json")
    assert cal.tables["gemm"]["columns"]["latency_us"].tolist() == COLS["latency_us"]


def test_whole_numbers_past_int32_pack_as_float64() -> None:
    assert pack_column([1, 2**40])["packed"] == "<f8"


@pytest.mark.parametrize("column, says", [
    ({"packed": "<i8", "base64": ""}, "columns.M: not a list nor a packed column"),
    ({"packed": "<i4", "base64": "@@@"}, "columns.M: base64: not valid base64"),
    ({"packed": "<i4", "base64": base64.b64encode(b"\x01\x00\x00").decode()}, "not a whole number of <i4 values"),
    (pack_column([1, 64]), "columns.M: 2 values where the other columns have 3"),
    ({"packed": "<f8", "base64": base64.b64encode(np.array([1.0, -2.0, 3.0]).tobytes()).decode()}, "columns.M[1]: must be a positive finite number"),
])
def test_bad_packed_column_is_one_line(column, says) -> None:
    with pytest.raises(RooflineError) as e:
        parse_calibration(_doc("rooflinecli.calibration/3", {**COLS, "M": column}), "bad.json")
    assert says in str(e.value) and "\n" not in str(e.value)
