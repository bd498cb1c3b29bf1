"""The report's serving section (report --serving): the frontier on one node and the report
layout's TTFT / TPOT against load, or one line saying why there is none."""

from __future__ import annotations

import numpy as np
import pytest

from rooflinecli.analysis import Workload
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model
from rooflinecli.report import build_report_data, render_report


@pytest.fixture(scope="module")
def report():
    data = build_report_data(get_model("llama-3-8b"), [get_spec("h100-sxm")], Workload(batch=1, prompt_len=1024, gen_len=256),
                             mode="datasheet", serving=True)
    return data, render_report(data)


def test_serving_section_has_the_frontier_and_the_load_curve(report):
    data, page = report
    s = data["serving"]
    assert s["frontier"] and s["candidates"] >= len(s["frontier"])
    x = np.array([p["tokens_per_s_per_user"] for p in s["frontier"]])
    y = np.array([p["throughput_tokens_per_s_per_gpu"] for p in s["frontier"]])
    assert np.all(np.diff(x) >= 0) and np.all(np.diff(y) <= 1e-9 * y[:-1])  # sorted by per-user speed: per-GPU falls
    c = s["curve"]
    assert c["concurrency"][0] == 1 and c["concurrency"][-1] == s["kv_limit_sequences"]
    assert np.all(np.diff(c["tpot_s"]) > 0) and np.all(np.diff(c["throughput_tokens_per_s_per_gpu"]) > 0)
    assert '<section id="serving">' in page and 'id="fig-serving-frontier"' in page and 'id="fig-serving-load"' in page


def test_no_serving_section_unless_asked():
    data = build_report_data(get_model("llama-3-8b"), [get_spec("h100-sxm")], Workload(batch=1, prompt_len=1024, gen_len=256), mode="datasheet")
    assert "serving" not in data and '<section id="serving">' not in render_report(data)


def test_a_layout_that_does_not_fit_keeps_the_frontier_and_says_why():
    data = build_report_data(get_model("llama-3-70b"), [get_spec("h100-sxm")], Workload(batch=1, prompt_len=1024, gen_len=256), mode="datasheet",
                             serving=True)
    s = data["serving"]
    assert s["frontier"] and all(p["tp"] >= 2 for p in s["frontier"])  # 70B in bf16 needs 2+ GPUs of 80 GB
    assert s["curve"] is None and "not even one sequence" in s["curve_error"]
    page = render_report(data)
    assert 'id="fig-serving-frontier"' in page and "No load curve" in page and 'id="fig-serving-load"' not in page
