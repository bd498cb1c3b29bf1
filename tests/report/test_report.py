"""``roofline report``: the sections are there, the embedded JSON is the analysis's own numbers,
user strings are escaped, the page makes no request to another host, the default invocation works,
and bad input is one line with exit 2. (The page in a real browser: test_report_browser.py.)"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rooflinecli import formulas
from rooflinecli.analysis import Workload, memory_totals
from rooflinecli.predict import analyze, phase_grid
from rooflinecli.cli import app
from rooflinecli.hardware import get_spec, specs_dir
from rooflinecli.model_registry import get_model
from rooflinecli.report import extract_report_data
from rooflinecli.results import ResultRow, Results, quantiles_s

runner = CliRunner()
HOSTILE = "<script>alert(1)</script>"
HOSTILE_GPU = '<img src=x onerror="alert(2)">'
HOSTILE_ROW = "</script><script>alert(3)</script>"


def hostile_config() -> dict:
    """A small Llama-style config whose id is a script tag."""
    return {
        "_rooflinecli": {"id": HOSTILE, "display_name": HOSTILE_GPU},
        "model_type": "llama",
        "hidden_size": 1024,
        "intermediate_size": 2816,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
    }


def _row(op, impl, shape, dtype, flops, bytes_, t, kind, params, seed):
    rng = np.random.default_rng(seed)
    samples = tuple(float(x) for x in t * np.exp(0.01 * rng.standard_normal(12)))
    p20, p50, p80 = quantiles_s(samples)
    return ResultRow(op=op, impl=impl, shape=shape, dtype=dtype, samples_s=samples, p20_s=p20, p50_s=p50, p80_s=p80,
                     flops=float(flops), bytes=float(bytes_), params=params, model_kind=kind, compute_dtype=dtype)


def write_results(path: Path, slow: float = 1.0, gpu_name: str = "NVIDIA H200", hostile: bool = False) -> Path:
    """Synthetic H200 results: each time is the H200 datasheet roof times a factor (> 1: below the
    roof; the rmsnorm row is faster than its roof, a counting error to flag), times ``slow``."""
    spec = get_spec("h200")
    peak, bw = spec.peak_flops_per_s("bf16"), spec.memory_bandwidth_bytes_per_s

    def roof(f, b):
        return max(f / peak, b / bw)

    g = (formulas.gemm_flops(4096, 4096, 4096), formulas.gemm_min_bytes(4096, 4096, 4096, 2))
    s = (formulas.gemm_flops(1, 8192, 8192), formulas.gemm_min_bytes(1, 8192, 8192, 2))
    fa = (formulas.attention_prefill_flops(1, 32, 4096, 128), formulas.attention_qo_bytes(1, 32, 4096, 128, 2) + 2 * 4096 * 8 * 128 * 2)
    cp = (0.0, formulas.streaming_bytes(2**28, 2))
    nb = 3e8
    shape_g = HOSTILE_ROW if hostile else "M4096-N4096-K4096"
    rows = [
        _row("gemm", "triton", shape_g, "bf16", *g, 1.30 * slow * roof(*g), "gemm", {"M": 4096, "N": 4096, "K": 4096}, 1),
        _row("gemm", "torch", shape_g, "bf16", *g, 1.25 * slow * roof(*g), "gemm", {"M": 4096, "N": 4096, "K": 4096}, 2),
        _row("gemm", "triton", "M1-N8192-K8192", "bf16", *s, 1.15 * slow * roof(*s), "gemm", {"M": 1, "N": 8192, "K": 8192}, 3),
        _row("flash_attention", "triton", "B1-H32-S4096-D128", "bf16", *fa, 1.6 * slow * roof(*fa), "attention", {"B": 1, "H": 32, "S": 4096, "D": 128}, 4),
        _row("copy", "triton", "N268435456", "bf16", *cp, 1.1 * slow * roof(*cp), "copy", {"n": 2**28}, 5),
        _row("rmsnorm", "triton", "M16384-D4096", "bf16", 0.0, nb, 0.8 * roof(0.0, nb), "elementwise", {"M": 16384, "D": 4096}, 6),
    ]
    res = Results(rows=tuple(rows), environment={"gpu_name": HOSTILE_GPU if hostile else gpu_name, "driver": "580"},
                  created_utc="2026-11-29T00:00:00Z", tool_version="0.1.0", hardware_spec="h200")
    res.save(path)
    return path


def run_report(tmp_path: Path, *args: str, name: str = "r.html") -> tuple[str, dict, Path]:
    out = tmp_path / name
    r = runner.invoke(app, ["report", *args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.output
    page = out.read_text(encoding="utf-8")
    return page, extract_report_data(page), out


def without_plotly(page: str) -> str:
    """The page minus plotly's own bundle (the one <script> that starts with its banner)."""
    parts = re.split(r"<script>\s*/\*\*\s*\n\* plotly\.js v", page)
    assert len(parts) == 2, "plotly.js must be embedded exactly once"
    rest = parts[1][parts[1].index("</script>"):]
    return parts[0] + rest


@pytest.fixture(scope="module")
def default_report(tmp_path_factory):
    return run_report(tmp_path_factory.mktemp("default"))


@pytest.fixture(scope="module")
def full_report(tmp_path_factory):
    d = tmp_path_factory.mktemp("full")
    res = write_results(d / "results.json", slow=1.0)
    base = write_results(d / "baseline.json", slow=0.8)
    return run_report(d, "--model", "deepseek-v3", "--hw", "h200,b200,h100-sxm", "--tp", "8", "--batch", "4", "--prompt", "2048", "--gen", "128",
                      "--results", str(res), "--baseline", str(base))


# ------------------------------------------------------------------------------------------------
# Sections and contents
# ------------------------------------------------------------------------------------------------

SECTIONS = ("summary", "roofline", "breakdown", "kv", "batch", "variants", "ops", "inputs", "data")
FIGURES = ("roofline", "breakdown", "kv-vs-weights", "memory-vs-batch", "batch-sweep", "attention-variants", "moe")


def test_default_report_has_every_section(default_report):
    page, data, out = default_report
    for s in SECTIONS:
        assert f'<section id="{s}">' in page, s
    for f in FIGURES:
        assert f'id="fig-{f}"' in page and f'id="figdata-{f}"' in page, f
    for absent in ("gpus", "validation", "regress"):
        assert f'<section id="{absent}">' not in page
    assert data["schema"] == "rooflinecli.report/1"
    assert data["tool_version"] and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["generated_utc"])
    assert data["assumptions"] and "ASSUMPTIONS" not in page
    assert 'table class="sortable" id="ops-table"' in page
    assert out.stat().st_size < 10e6


def test_roofline_figure_has_labelled_ceilings_ridges_and_every_op(default_report):
    page, data, _ = default_report
    fig = json.loads(re.search(r'id="figdata-roofline">(.*?)</script>', page, re.S).group(1))
    names = [tr.get("name", "") for tr in fig["data"]]
    spec = get_spec("h100-sxm")
    # one compute ceiling per distinct LLM peak (bf16/fp16 share one; fp64, fp32 and tf32 are not
    # drawn for a bf16 workload), HBM / L2 / shared memory labelled with their source
    peaks = [n for n in names if " peak " in n]
    assert [n.split(" peak ")[0] for n in peaks] == ["fp8/int8", "bf16/fp16"], peaks
    assert not any(dt in n for n in peaks for dt in ("fp64", "fp32", "tf32"))
    assert any(n.startswith("HBM") and "(datasheet)" in n for n in names)
    assert any(n.startswith("L2") and "(estimate)" in n for n in names)
    assert spec.smem_bandwidth_gb_per_s and any(n.startswith("shared memory") and "(estimate)" in n for n in names)
    ridge = next(tr for tr in fig["data"] if tr.get("name", "").startswith("ridge points"))
    assert spec.ridge_point("bf16") in ridge["x"]
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"
    assert "FLOP/byte" in fig["layout"]["xaxis"]["title"]["text"] and "TFLOP/s" in fig["layout"]["yaxis"]["title"]["text"]
    placed = [p for p in data["ops"] if p["placed"]]
    for phase in ("prefill", "decode"):
        tr = next(t for t in fig["data"] if t.get("name", "").startswith(f"{phase} ops"))
        want = [p for p in placed if p["phase"] == phase]
        assert len(tr["x"]) == len(want) > 5
        assert tr["x"] == pytest.approx([p["arithmetic_intensity_flop_per_byte"] for p in want])
        sizes = tr["marker"]["size"]
        big = max(range(len(want)), key=lambda i: want[i]["share_of_phase"])
        assert sizes[big] == max(sizes)  # marker size grows with the share of time
    # a prediction never lies above its roof
    for p in placed:
        assert p["achieved_flops_per_s"] <= p["roof_flops_per_s"] * (1 + 1e-9)


def test_embedded_json_is_the_analysis(default_report):
    _, data, _ = default_report
    cfg, spec = get_model("llama-3-8b"), get_spec("h100-sxm")
    wl = Workload(batch=1, prompt_len=1024, gen_len=256)
    a = analyze(cfg, spec, wl)
    j = json.loads(json.dumps(a.to_json()))
    assert data["analysis"]["ttft_s"] == j["ttft_s"] and data["analysis"]["tpot_s"] == j["tpot_s"]
    assert data["analysis"]["decode"]["ops"] == j["decode"]["ops"]
    ops = {(p["phase"], p["name"]): p for p in data["ops"]}
    for phase in (a.prefill, a.decode):
        for r in phase.ops:
            p = ops[(phase.phase, r.name)]
            assert p["time_s"] == r.time_s and p["flops"] == r.flops and p["bytes"] == r.bytes
    for ph, phase in (("prefill", a.prefill), ("decode", a.decode)):
        assert sum(data["breakdown_s"][ph].values()) == pytest.approx(phase.time_s, rel=1e-12)
    # sweeps are phase_grid / memory_totals at the same points
    s = data["batch_sweep"]
    g = phase_grid(cfg, spec, wl, "decode", np.asarray(s["batch"], dtype=float), np.asarray([float(s["context"])]))
    assert s["tpot_s"] == pytest.approx(np.broadcast_to(g["time_s"], (len(s["batch"]),)).tolist(), rel=1e-12)
    assert s["compute_bound_batch"] == a.decode_compute_bound_batch
    assert s["gemm_compute_bound_batch"] == a.decode_gemm_compute_bound_batch and a.decode_gemm_compute_bound_batch in s["batch"]
    if a.decode_compute_bound_batch is None:  # attention keeps the whole step memory-bound
        assert not any(s["compute_bound"])
    else:
        i = s["batch"].index(a.decode_compute_bound_batch)
        assert s["compute_bound"][i] and not s["compute_bound"][i - 1]
    m = data["memory_vs_batch"]
    k = m["batch"].index(wl.batch)
    assert m["total_bytes_per_gpu"][k] == pytest.approx(a.memory["total_bytes_per_gpu"], rel=1e-12)
    mt = memory_totals(cfg, spec, wl, 1024.0, 1280.0, np.asarray(m["batch"], dtype=float))
    assert m["kv_cache_bytes_per_gpu"] == pytest.approx(mt["kv_cache_bytes_per_gpu"].tolist(), rel=1e-12)
    kv = data["kv_vs_weights"]
    assert kv["crossover_context"] == a.kv_crossover_context
    below = [c for c in kv["context"] if c < a.kv_crossover_context]
    above = [c for c in kv["context"] if c > a.kv_crossover_context]
    ix, jx = kv["context"].index(below[-1]), kv["context"].index(above[0])
    assert kv["kv_read_bytes_per_step"][ix] < kv["weights_read_bytes_per_step"][ix]
    assert kv["kv_read_bytes_per_step"][jx] > kv["weights_read_bytes_per_step"][jx]


def test_attention_variants_and_moe_sections(full_report):
    page, data, _ = full_report
    from rooflinecli.whatif.compare import compare_variants

    cfg, spec = get_model("deepseek-v3"), get_spec("h200")
    wl = Workload(batch=4, prompt_len=2048, gen_len=128, tp=8)
    rows = {r["label"]: r for r in compare_variants(cfg, spec, wl, ["mha", "gqa", "mqa", "mla", "compressed"])}
    got = {r["variant"]: r for r in data["attention_variants"]["rows"]}
    assert set(got) == set(rows) == {"* mla", "mha", "gqa", "mqa", "compressed"}
    for label, r in rows.items():
        assert got[label]["tpot_s"] == r["tpot_s"] and got[label]["ttft_s"] == r["ttft_s"]
    assert got["mha"]["kv_bytes_per_token"] > got["gqa"]["kv_bytes_per_token"] > got["mqa"]["kv_bytes_per_token"]
    moe = data["moe"]
    assert moe["is_moe"] and moe["active_params"] < moe["total_params"]
    from rooflinecli import params as P

    assert moe["total_params"] == P.total_params(cfg) and moe["active_params"] == P.active_params(cfg)
    et = moe["experts_touched"]
    assert et["uniform"][0] == pytest.approx(cfg.moe.top_k) and et["uniform"][-1] <= cfg.moe.num_routed_experts


def test_gpus_side_by_side(full_report):
    page, data, _ = full_report
    assert '<section id="gpus">' in page and 'id="fig-gpus"' in page and 'id="fig-gpu-ceilings"' in page
    assert [g["hw"] for g in data["gpus"]] == ["h200", "b200", "h100-sxm"]
    wl = Workload(batch=4, prompt_len=2048, gen_len=128, tp=8)
    for g in data["gpus"]:
        a = analyze(get_model("deepseek-v3"), get_spec(g["hw"]), wl)
        assert g["tpot_s"] == a.tpot_s and g["ttft_s"] == a.ttft_s


def test_results_give_validation_measured_points_and_flag(full_report):
    page, data, _ = full_report
    assert '<section id="validation">' in page and 'id="validation-table"' in page and 'id="fig-validation"' in page
    v = data["validation"]
    assert v["datasheet_spec"] == "h200" and len(v["rows"]) == 6
    pts = {(p["op"], p["impl"], p["shape"]): p for p in data["measured_points"]}
    g = pts[("gemm", "triton", "M4096-N4096-K4096")]
    assert g["measured_s"] / g["predicted_s"] == pytest.approx(1.30, rel=0.03)
    assert g["pct_of_roof"] == pytest.approx(100 / 1.30, rel=0.03)
    assert not pts[("copy", "triton", "N268435456")]["placed"]  # no FLOPs: no place on a FLOP/s axis
    assert pts[("rmsnorm", "triton", "M16384-D4096")]["above_roof"]
    assert not any(p["above_roof"] for k, p in pts.items() if k[0] != "rmsnorm")
    assert "ABOVE ROOF" in page
    fig = json.loads(re.search(r'id="figdata-roofline">(.*?)</script>', page, re.S).group(1))
    names = [t.get("name", "") for t in fig["data"]]
    assert "measured kernels" in names and "measured to predicted" in names
    link = next(t for t in fig["data"] if t.get("name") == "measured to predicted")
    assert len([x for x in link["x"] if x is None]) == sum(1 for p in data["measured_points"] if p["placed"])


def test_baseline_gives_the_regress_comparison(full_report):
    page, data, _ = full_report
    assert '<section id="regress">' in page and 'id="regress-table"' in page
    r = data["regress"]
    by = {(c["op"], c["impl"], c["shape"]): c for c in r["rows"]}
    # the candidate is 1/0.8 = 1.25x slower than the baseline on every row but rmsnorm (not slowed)
    assert by[("gemm", "triton", "M4096-N4096-K4096")]["verdict"] == "regression"
    assert by[("gemm", "triton", "M4096-N4096-K4096")]["rel_change"] == pytest.approx(0.25, rel=0.05)
    assert by[("rmsnorm", "triton", "M16384-D4096")]["verdict"] == "pass"


def test_measured_ceilings_drawn_apart(tmp_path):
    from rooflinecli.bench.calibrate import Ceilings, measured_doc, write_spec_file

    spec_path = write_spec_file(tmp_path / "h200-measured.toml", measured_doc(get_spec("h200"), Ceilings(copy_gb_per_s=4300.0, l2_gb_per_s=9000.0, matmul_tflops={"bf16": 780.0}), {"gpu_name": "NVIDIA H200"}))
    page, data, _ = run_report(tmp_path, "--hw", "h200", "--measured-hw", str(spec_path.path))
    ms = data["ceilings"]["measured"]
    assert {c["label"] for c in ms["compute"]} == {"bf16"} and ms["compute"][0]["peak_flops_per_s"] == 780e12
    assert {m["level"] for m in ms["memory"]} == {"HBM", "L2"}
    fig = json.loads(re.search(r'id="figdata-roofline">(.*?)</script>', page, re.S).group(1))
    measured = [t for t in fig["data"] if "(measured)" in t.get("name", "") and "lines" in t["mode"]]
    assert len(measured) == 3 and all(t["line"]["dash"] == "dash" for t in measured)
    assert any(t["name"] == "ridge points vs HBM (measured)" for t in fig["data"])
    r = runner.invoke(app, ["report", "--hw", "h200", "--measured-hw", "h100-sxm", "--out", str(tmp_path / "x.html")])
    assert r.exit_code == 2 and r.output.strip() == "error: --measured-hw h100-sxm: is a datasheet spec, not a measured one (kind = \"measured\")"


# ------------------------------------------------------------------------------------------------
# Escaping and offline
# ------------------------------------------------------------------------------------------------


def _assert_escaped(page: str, needle: str) -> None:
    assert needle not in page, f"raw {needle!r} in the page"
    assert html.escape(needle) in page, f"{needle!r} not shown as text"


def test_hostile_model_gpu_and_result_strings_are_escaped(tmp_path):
    cfg_path = tmp_path / "config.json"
    cfg_path.write_text(json.dumps(hostile_config()))
    spec_text = (specs_dir() / "h200.toml").read_text()
    spec_text = re.sub(r'^id = ".*"$', 'id = "evil-gpu"', spec_text, flags=re.M)
    spec_text = re.sub(r"^name = .*$", "name = " + json.dumps(HOSTILE_GPU + HOSTILE), spec_text, flags=re.M)
    spec_path = tmp_path / "evil.toml"
    spec_path.write_text(spec_text)
    res = write_results(tmp_path / "evil-results.json", hostile=True)
    page, data, _ = run_report(tmp_path, "--model", str(cfg_path), "--hw", f"{spec_path},h100-sxm", "--results", str(res))
    for needle in (HOSTILE, HOSTILE_GPU, HOSTILE_ROW):
        _assert_escaped(page, needle)
    assert "<script" not in without_plotly(page).replace("<script>", "").replace('<script type="application/json"', "")
    assert data["model"]["name"] == HOSTILE and data["model"]["display_name"] == HOSTILE_GPU
    assert data["hardware"][0]["name"] == HOSTILE_GPU + HOSTILE
    assert any(p["shape"] == HOSTILE_ROW for p in data["measured_points"])
    # every JSON block parses (no string broke out of its <script> element)
    blocks = re.findall(r'<script type="application/json" id="([^"]+)">(.*?)</script>', page, re.S)
    assert len(blocks) >= 10
    for _, body in blocks:
        json.loads(body)


def test_offline_no_external_urls(full_report):
    page, _, _ = full_report
    rest = without_plotly(page)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", rest, re.I), "a src/href to another host"
    assert not re.search(r"<(?:link|iframe|img|object|embed)\b", rest, re.I)
    assert "mathjax" not in rest.lower()
    assert rest.count("<script") == 2 + len(re.findall(r'<script type="application/json"', rest))  # + loader, sorting
    assert "cdn.plot.ly" not in rest


def test_cli_import_does_not_load_plotly():
    code = "import sys, rooflinecli.cli; bad = [m for m in ('plotly', 'torch', 'pandas', 'triton') if m in sys.modules]; print(bad); sys.exit(bool(bad))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# ------------------------------------------------------------------------------------------------
# Default invocation, bad input
# ------------------------------------------------------------------------------------------------


def test_default_invocation_writes_the_documented_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["report"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "reports" / "roofline-llama-3-8b-h100-sxm.html"
    assert r.output.startswith(f"wrote {Path('reports') / out.name} (")
    assert out.is_file() and out.stat().st_mode & 0o044 == 0o044  # readable by others: a report is shared
    assert not list((tmp_path / "reports").glob(".*.tmp"))
    d = extract_report_data(out.read_text())
    assert d["model"]["name"] == "llama-3-8b" and d["hardware"][0]["id"] == "h100-sxm"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "llama-9"], "unknown model"),
        (["--hw", "h10"], "unknown GPU 'h10'"),
        (["--batch", "0"], "Invalid value for '--batch'"),
        (["--efficiency", "2"], "--efficiency"),
        (["--baseline", "b.json"], "--baseline needs --results"),
        (["--results", "missing.json"], "missing.json: no such results file"),
        (["--results", "bad.json"], "bad.json: not a rooflinecli results file"),
        (["--model", "deepseek-v3", "--tp", "3"], "--tp 3 does not divide"),
        (["--out", "."], "--out .: is a folder"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text("[1, 2]")
    r = runner.invoke(app, ["report", *args])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.output
    assert not (tmp_path / "reports").exists()


def test_documented_sample_command_runs_and_matches_the_committed_sample(tmp_path, monkeypatch):
    """docs/report.md's sample command (run from the repo root) makes a report with the same
    sections and inputs as the committed reports/roofline-h200-2026-11-30.html."""
    repo = Path(__file__).resolve().parents[2]
    doc = (repo / "docs" / "report.md").read_text()
    cmd = re.search(r"^roofline report (--hw h200,h100-sxm --results .*?)$\n^\s+(--baseline .*?) --out (\S+)$", doc, re.M)
    assert cmd, "sample command not found in docs/report.md"
    sample = repo / cmd.group(3)
    monkeypatch.chdir(repo)
    args = (cmd.group(1).rstrip(" \\") + " " + cmd.group(2)).split()
    page, data, _ = run_report(tmp_path, *args)
    committed = sample.read_text(encoding="utf-8")
    old = extract_report_data(committed)
    sections = re.findall(r'<section id="([^"]+)">', page)
    assert sections == re.findall(r'<section id="([^"]+)">', committed)
    assert {"validation", "regress", "gpus"} <= set(sections)
    assert old["inputs"] == data["inputs"] and old["schema"] == data["schema"]
    assert old["validation"]["gpu_name"] == data["validation"]["gpu_name"] == "NVIDIA H200"  # a real GPU run
    assert len(old["measured_points"]) == len(data["measured_points"]) > 0
    # every flagged point sits above a drawn line, and every unflagged one under the fastest drawn:
    # the fastest measured ceilings (burst bf16 peak, fastest stream) are drawn with the measured ones
    levels = [m["level"] for m in data["ceilings"]["measured"]["memory"]]
    labels = [c["label"] for c in data["ceilings"]["measured"]["compute"]]
    assert "HBM, fastest measured stream" in levels and "bf16 burst" in labels
    # the comparison lists the rows only one side has, as the verdict line counts them
    missing = len(data["regress"]["only_in_baseline"])
    assert missing > 0 and page.count('class="verdict-missing"') == missing


def test_preset_report_is_fast_and_small():
    """Issue target: a preset model's report in under 3 s (data + figures + page, in process; the
    CLI's start-up is measured by benchmarks/bench_report.py) and under 10 MB."""
    import time

    from rooflinecli.report import build_report_data, render_report

    t0 = time.perf_counter()
    page = render_report(build_report_data(get_model("deepseek-v3"), [get_spec("h200"), get_spec("h100-sxm")], Workload(batch=8, prompt_len=4096, gen_len=512, tp=8)))
    elapsed = time.perf_counter() - t0
    assert elapsed < 3.0, f"{elapsed:.2f} s"
    assert len(page.encode()) < 10e6


def test_report_takes_every_workload_option_of_analyze():
    """`roofline report` keeps the workload options of `roofline analyze` (the issue: "workload
    options as in analyze"), so a new analyze option fails here until report has it too."""
    import inspect

    from rooflinecli.cli.analyze import analyze_cmd
    from rooflinecli.cli.report import report_cmd

    analyze_opts = set(inspect.signature(analyze_cmd).parameters) - {"ops", "as_json", "hw"}
    missing = analyze_opts - set(inspect.signature(report_cmd).parameters)
    assert not missing, f"report lacks analyze's options: {sorted(missing)}"
    r = runner.invoke(app, ["report", "--help"])
    for opt in ("--prompt", "--prefill-chunk", "--results", "--baseline", "--measured-hw", "--out"):
        assert opt in r.output


def _figure(page: str, fid: str) -> dict:
    return json.loads(re.search(rf'id="figdata-{fid}">(.*?)</script>', page, re.S).group(1))


def test_roofline_hover_has_shape_and_ceiling_labels_sit_above_the_markers(default_report):
    page, data, _ = default_report
    fig = _figure(page, "roofline")
    wl = data["analysis"]["workload"]
    s, g = wl["prompt_len"], wl["gen_len"]
    for phase, step in (("prefill", f"shape B=1 x S={s:,}"), ("decode", f"shape B=1, context {s:,}..{s + g - 1:,}")):
        tr = next(t for t in fig["data"] if t.get("name", "").startswith(f"{phase} ops"))
        want = [p for p in data["ops"] if p["placed"] and p["phase"] == phase]
        for p, hover in zip(want, tr["text"]):
            assert step in hover, hover
            for part in ("FLOP/byte", "FLOP/s predicted", "% of the compute peak", "% of the HBM bandwidth", "time ", "-bound"):
                assert part in hover, (part, hover)
            if p["kind"] == "gemm":
                assert re.search(r"\d+-&gt;\d+", hover), hover  # d_in->d_out, escaped for plotly's renderer
    # ceiling labels are layout annotations (drawn above every trace, unlike a trace's text), placed
    # in log10 units on the log axes, one per ceiling line, on or above their line
    peaks = [t for t in fig["data"] if " peak " in t.get("name", "")]
    notes = {a["text"]: a for a in fig["layout"]["annotations"]}
    assert len(peaks) >= 2
    for tr in peaks:
        a = notes[html.escape(tr["name"], quote=False)]
        assert a["y"] >= np.log10(tr["y"][-1]) - 1e-9 and a["x"] == pytest.approx(np.log10(tr["x"][-1]))
        assert a["showarrow"] is False and a["bgcolor"]
    memory = [t for t in fig["data"] if " TB/s (" in t.get("name", "")]
    assert {html.escape(t["name"], quote=False) for t in memory} <= set(notes)


def _label_rows(fig: dict) -> list[list[float]]:
    """The y (log10) of the ceiling labels, per column of labels (same x)."""
    cols: dict[float, list[float]] = {}
    for a in fig["layout"]["annotations"]:
        cols.setdefault(round(a["x"], 6), []).append(a["y"])
    return list(cols.values())


@pytest.mark.parametrize("hw", ["h200-measured", "h100-sxm"])
def test_ceiling_labels_never_overlap(tmp_path, hw):
    """L2 / HBM / the fastest measured HBM stream, and bf16 beside fp16 on a measured spec, sit
    close together: their labels are spread at least one label height apart."""
    page, data, _ = run_report(tmp_path, "--hw", hw)
    fig = _figure(page, "roofline")
    lo, hi = fig["layout"]["yaxis"]["range"]
    gap = (hi - lo) * 14 / (640 - 120)  # one label height in log10 units
    rows = _label_rows(fig)
    assert sum(len(r) for r in rows) >= 5
    for ys in rows:
        ys = sorted(ys)
        assert all(b - a >= gap * 0.999 for a, b in zip(ys, ys[1:])), ys
        assert ys[-1] <= hi


def test_a_workload_in_fp32_draws_its_own_ceiling(tmp_path):
    page, _, _ = run_report(tmp_path, "--hw", "h100-sxm", "--dtype", "fp32")
    names = [t.get("name", "") for t in _figure(page, "roofline")["data"] if " peak " in t.get("name", "")]
    assert any(n.startswith("fp32 peak") for n in names) and not any("tf32" in n or "fp64" in n for n in names), names


def test_each_gpus_mode_is_marked(tmp_path):
    from rooflinecli.report.figures import mode_label

    page, data, _ = run_report(tmp_path, "--hw", "h200-measured,h100-sxm")
    modes = {g["hw"]: g["mode"] for g in data["gpus"]}
    assert modes["h100-sxm"] == "datasheet" and modes["h200-measured"] in ("measured-roof", "achievable"), modes
    bars = _figure(page, "gpus")["data"][0]["x"]
    assert bars == [f"h200-measured<br>({mode_label(modes['h200-measured'])})", "h100-sxm<br>(datasheet roof)"]
    lines = {t["name"]: t["line"]["dash"] for t in _figure(page, "gpu-ceilings")["data"]}
    assert lines == {f"h200-measured ({mode_label(modes['h200-measured'])}; measured ceilings)": "dash", "h100-sxm (datasheet roof; datasheet ceilings)": "solid"}
    assert f"{mode_label(modes['h200-measured'])})" in _figure(page, "roofline")["layout"]["title"]["text"]


def test_ops_table_says_what_each_op_uses_of_the_gpu(default_report):
    """% of roof is 100% wherever the roof alone sets the time; the table shows the share of the
    compute peak and of the HBM bandwidth instead: a decode matmul uses little of the peak, a
    prefill matmul nearly all of it, and each op is at 100% of the one that binds it."""
    page, data, _ = default_report
    assert "<th title=\"sort\">% of compute peak</th>" in page and "% of HBM bandwidth" in page and ">% of roof<" not in page
    gemm = {p["phase"]: p for p in data["ops"] if p["kind"] == "gemm" and p["placed"] and "mlp" in p["name"]}
    assert gemm["decode"]["pct_of_peak_flops"] < 5 and gemm["decode"]["pct_of_bandwidth"] == pytest.approx(100, rel=0.02)
    assert gemm["prefill"]["pct_of_peak_flops"] == pytest.approx(100, rel=0.02) and gemm["prefill"]["pct_of_bandwidth"] < 100
    shares = [p["pct_of_peak_flops"] for p in data["ops"] if p["placed"]]
    assert min(shares) < 5 and max(shares) > 95


def test_figure_labels_and_tables_avoid_exponent_notation(full_report):
    """Bar labels and the validation / regress tables print 4,000 or 304,300, never 4.00e+3."""
    page, _, _ = full_report
    for fid in ("attention-variants", "gpus"):
        labels = [c for tr in _figure(page, fid)["data"] for c in tr["customdata"]]
        assert labels and all(re.fullmatch(r"[\d,]+(\.\d+)?", c) for c in labels), labels
        assert all(tr["texttemplate"] == "%{customdata}" for tr in _figure(page, fid)["data"])
    for tid in ("validation-table", "regress-table"):  # the time columns (p-values keep their exponent)
        table_html = re.search(rf'id="{tid}">(.*?)</table>', page, re.S).group(1)
        head = re.findall(r"<th[^>]*>([^<]*)</th>", table_html)
        cols = [i for i, h in enumerate(head) if h.endswith(" us") or " us " in h]
        rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", table_html.split("<tbody>")[1])]
        cells = [r[i] for r in rows for i in cols]
        assert len(cols) >= 2 and cells and not [c for c in cells if re.search(r"\de[+-]\d", c)], (tid, cells)
    # the batch sweep's notes go on a second title line (one long line ran off the figure)
    title = _figure(page, "batch-sweep")["layout"]["title"]["text"]
    head, _, notes = title.partition("<br>")
    assert len(head) < 60 and "compute-bound" in notes and "does not fit" in notes
    from rooflinecli.report.html import _us

    assert [_us(x) for x in (0.3043, 8.123e-4, 4.19e-8, None)] == ["304,300", "812.3", "0.0419", "-"]


def test_report_sections_time_as_its_analysis_on_a_calibrated_gpu():
    """On a calibrated spec (mode None, as `roofline report` passes it) the analysis is achievable; the batch sweep, the attention variants
    and the GPUs table must say the same TPOT at the workload's batch (they used to time the roof),
    and each GPU row names its mode."""
    from rooflinecli.report import build_report_data

    cfg = get_model("llama-3-8b")
    d = build_report_data(cfg, [get_spec("h200-measured"), get_spec("h100-sxm")], Workload(batch=8, prompt_len=4096, gen_len=1), mode=None)
    tpot = d["analysis"]["tpot_s"]
    assert d["analysis"]["tpot_s"] != pytest.approx(d["analysis"]["roof_tpot_s"], rel=1e-3)  # achievable, not the roof
    sweep = d["batch_sweep"]
    assert sweep["tpot_s"][sweep["batch"].index(8)] == pytest.approx(tpot, rel=1e-9)
    configured = [r for r in d["attention_variants"]["rows"] if r["configured"]][0]
    assert configured["tpot_s"] == pytest.approx(tpot, rel=1e-9)
    assert [(g["hw"], g["mode"]) for g in d["gpus"]] == [("h200-measured", "achievable"), ("h100-sxm", "datasheet")]
    assert d["gpus"][0]["tpot_s"] == pytest.approx(tpot, rel=1e-9)


def test_achievable_report_adds_up_and_says_so():
    """On a calibrated spec the breakdown's bars add up to the achievable TTFT / TPOT the summary
    states (the ops' roof times plus what lies beyond the roof), the summary names the mode and the
    roof beside it, no op is drawn above the ceiling its time was computed on, and no table cell
    uses exponent notation."""
    from rooflinecli.report import build_report_data, render_report

    d = build_report_data(get_model("qwen3-30b-a3b"), [get_spec("h200-measured")], Workload(batch=1, prompt_len=1024, gen_len=16), mode=None)
    a = d["analysis"]
    assert a["mode"] == "achievable"
    assert sum(d["breakdown_s"]["decode"].values()) == pytest.approx(a["tpot_s"], rel=1e-9)
    assert sum(d["breakdown_s"]["prefill"].values()) == pytest.approx(a["ttft_s"], rel=1e-9)
    assert max(p["pct_of_roof"] for p in d["ops"] if p["pct_of_roof"] is not None) <= 100.0 + 1e-6
    page = render_report(d)
    assert "achievable: the calibrated vendor-kernel model" in page and "roof " + fmt_time_of(a["roof_tpot_s"]) in page
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page)
    assert not [c for c in cells if re.search(r"\de[+]\d", c)]


def fmt_time_of(s):
    from rooflinecli.fmt import fmt_time

    return fmt_time(s)
