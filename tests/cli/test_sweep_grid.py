"""Grid text parsing for ``roofline sweep``."""

from __future__ import annotations

import numpy as np
import pytest

from rooflinecli.errors import RooflineError
from rooflinecli.whatif.grid import parse_grid, parse_list


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8", [8]),
        ("4,1,2,2", [1, 2, 4]),
        ("1..5", [1, 2, 3, 4, 5]),
        ("1..1024:x2", [2**i for i in range(11)]),
        ("1k..4k:1k", [1024, 2048, 3072, 4096]),
        ("2K", [2048]),
        ("0.5k", [512]),
        ("1,16..64:x2,100", [1, 16, 32, 64, 100]),
        ("10..20:4", [10, 14, 18]),
        ("3..100:x3", [3, 9, 27, 81]),
    ],
)
def test_parse_grid(text, expected):
    assert parse_grid(text, "--batch").tolist() == expected


def test_issue_grid_sizes():
    assert parse_grid("1..1024").size == 1024
    ctx = parse_grid("1k..128k:1k")
    assert ctx.size == 128 and ctx[0] == 1024 and ctx[-1] == 128 * 1024
    assert ctx.dtype == np.int64


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        ("1,,2", "empty item"),
        ("abc", "bad number 'abc'"),
        ("-5", "bad number '-5'"),
        ("5..1", "ends before it starts"),
        ("1..8:0", "step of 1 or more"),
        ("1..8:x1", "factor above 1"),
        ("1..8:", "empty step"),
        ("1.5", "not a whole number"),
        ("0..4", ">= 1"),
        ("1..100000000", "more than"),
    ],
)
def test_parse_grid_errors(text, fragment):
    with pytest.raises(RooflineError) as e:
        parse_grid(text, "--context")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("--context") and fragment in msg


def test_parse_list():
    assert parse_list("bf16, fp8,bf16", "--dtype") == ["bf16", "fp8"]
    with pytest.raises(RooflineError, match="--dtype"):
        parse_list("bf16,", "--dtype")
