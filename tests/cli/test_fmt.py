"""The number formats every table and report uses (``rooflinecli.fmt``): the unit is picked for the
number as it prints, and no exponent notation reaches a reader above 1e-4."""

from __future__ import annotations

import pytest

from rooflinecli.fmt import fmt_bytes, fmt_count, fmt_num, fmt_si, fmt_time


@pytest.mark.parametrize(
    "value, text",
    [
        (0.99961, "1 s"),  # rounds to 1 s, not "1e+03 ms"
        (0.0009996, "1 ms"),
        (4.52e-3, "4.52 ms"),
        (70.2e-6, "70.2 us"),
        (3.08e-7, "308 ns"),
        (635.2, "635 s"),
        (123456.0, "123,456 s"),
        (0.0, "0 us"),
    ],
)
def test_fmt_time(value, text):
    assert fmt_time(value) == text


@pytest.mark.parametrize(
    "value, text",
    [(999.6e9, "1 TB"), (1.5e9, "1.5 GB"), (8.66e15, "8.66 PB"), (8.66e18, "8,660 PB"), (512, "512 B"), (131072, "131 KB")],
)
def test_fmt_bytes(value, text):
    assert fmt_bytes(value) == text


@pytest.mark.parametrize(
    "value, text",
    [(1642.7, "1,643"), (0.1234, "0.123"), (12.34, "12.3"), (999.7, "1,000"), (2.5e-6, "2.5e-06"), (0.0, "0"), (-3.456, "-3.46")],
)
def test_fmt_num(value, text):
    assert fmt_num(value) == text


def test_no_exponent_from_1e_minus_4_up():
    values = [m * 10.0**e for e in range(-4, 19) for m in (1.0, 1.2345, 9.9951, 9.99949)]
    for v in values:
        for text in (fmt_time(v), fmt_bytes(v), fmt_count(v), fmt_si(v, "FLOP/s"), fmt_num(v)):
            assert "e+" not in text and "e-" not in text, (v, text)
    assert fmt_count(999.96e9) == "1T" and fmt_si(999.7e12, "FLOP/s") == "1 PFLOP/s"
