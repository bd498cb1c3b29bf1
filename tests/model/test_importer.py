"""`roofline calibrate --import`: the audit of a vendor data folder (copies, reuse declarations,
mislabelled versions, missing device columns, repeated keys), the calibration it writes, and its
one-line refusals. The data folders here are small synthetic ones in the vendor's layout."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.importer import miniyaml
from rooflinecli.importer.aiconfigurator import DataRoot, audit, build_calibration, compare_with_audit, version_key

runner = CliRunner()


def _meta(folder: Path, framework: str, version: str, tables: list[str], comment: str = "", provenance: str = "collected") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    body = "\n".join(f"  {t}:\n    status: complete" for t in tables)
    folder.joinpath("collection_meta.yaml").write_text(
        f"# SPDX-License-Identifier: Apache-2.0\n{comment}schema_version: 1\nprovenance: {provenance}\nruntime:\n  framework: {framework}\n"
        f"  version: '{version}'\ntables:\n{body}\n")


def _gemm(folder: Path, framework: str, version: str, device: str | None = "NVIDIA H200", scale: float = 1.0, repeat: bool = False) -> None:
    rows = []
    for dt, ks in (("bfloat16", "torch.nn.functional.linear"), ("fp8", "CutlassFP8ScaledMMLinearKernel")):
        for m in (1, 8, 64, 512, 4096):
            for n in (1024, 4096, 16384):
                for k in (1024, 4096, 8192):
                    flops = 2.0 * m * n * k
                    t_ms = scale * (0.004 + max(flops / (700e12 if dt == "bfloat16" else 1200e12), (n * k * 2) / 3.5e12) * 1e3)
                    rows.append((framework.upper(), version, device, "gemm", ks, dt, m, n, k, t_ms))
    if repeat:
        rows.append(rows[0][:-1] + (rows[0][-1] * 1.01,))
    names = ["framework", "version", "device", "op_name", "kernel_source", "gemm_dtype", "m", "n", "k", "latency"]
    cols = {nm: [r[i] for r in rows] for i, nm in enumerate(names)}
    if device is None:
        del cols["device"]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), folder / "gemm_perf.parquet")


def _allreduce(folder: Path, framework: str, version: str, label_fw: str | None = None, label_version: str | None = None, base_us: float = 4.0) -> None:
    rows = [((label_fw or framework), (label_version or version), "NVIDIA H200", "all_reduce", "custom_graph", "bfloat16", g, 2**e,
             (base_us + 2**e * 2 / 100e9 * 1e6 * (g - 1) / g) / 1e3) for g in (2, 4, 8) for e in range(7, 24)]
    names = ["framework", "version", "device", "op_name", "kernel_source", "allreduce_dtype", "num_gpus", "message_size", "latency"]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({nm: [r[i] for r in rows] for i, nm in enumerate(names)}), folder / "custom_allreduce_perf.parquet")


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    s = root / "h200_sxm"
    _meta(s / "gemm/vllm/0.24.0", "vllm", "0.24.0", ["gemm_perf"], provenance="legacy")
    _gemm(s / "gemm/vllm/0.24.0", "vllm", "0.24.0", repeat=True)
    # a version folder whose rows say another version
    _meta(s / "gemm/vllm/0.25.0", "vllm", "0.25.0", ["gemm_perf"])
    _gemm(s / "gemm/vllm/0.25.0", "vllm", "0.22.0", scale=1.1)
    # a reuse declaration: no rows
    (s / "gemm/trtllm/1.3.0rc23").mkdir(parents=True)
    (s / "gemm/trtllm/1.3.0rc23/reuse.yaml").write_text(
        "schema_version: 1\nreuse:\n- table: gemm_perf\n  from_version: 1.3.0rc20\n  reason: >-\n    the gemm table reuses\n    the rc20 collection\n  approved_by: someone\n")
    _meta(s / "gemm/trtllm/1.3.0rc20", "trtllm", "1.3.0rc20", ["gemm_perf"])
    _gemm(s / "gemm/trtllm/1.3.0rc20", "trtllm", "1.3.0rc20", scale=0.95)
    # no device column
    _meta(s / "gemm/sglang/0.5.14", "sglang", "0.5.14", ["gemm_perf"])
    _gemm(s / "gemm/sglang/0.5.14", "sglang", "0.5.14", device=None, scale=1.05)
    # a genuine custom all-reduce, and a bit-identical copy labelled with the donor's framework
    _meta(s / "comm/vllm/0.24.0", "vllm", "0.24.0", ["custom_allreduce_perf"])
    _allreduce(s / "comm/vllm/0.24.0", "vllm", "0.24.0")
    _meta(s / "comm/trtllm/1.2.0rc5", "trtllm", "1.2.0rc5", ["custom_allreduce_perf"])
    _allreduce(s / "comm/trtllm/1.2.0rc5", "trtllm", "1.2.0rc5", base_us=3.0)
    _meta(s / "comm/sglang/0.5.6", "sglang", "0.5.6", ["custom_allreduce_perf"])
    _allreduce(s / "comm/sglang/0.5.6", "sglang", "0.5.6", label_fw="TRTLLM", label_version="1.2.0rc5", base_us=3.0)
    # a carry-forward declared in a comment, bit-identical to vllm 0.24.0 with consistent columns
    _meta(s / "comm/vllm/0.25.0", "vllm", "0.25.0", ["custom_allreduce_perf"], comment="# Physical carry-forward of the 0.24.0 table.\n")
    _allreduce(s / "comm/vllm/0.25.0", "vllm", "0.25.0")
    return root


def _by_path(audits) -> dict:
    return {a.path: a for a in audits}


def test_audit_finds_every_kind_of_non_measurement(data: Path) -> None:
    a = _by_path(audit(DataRoot(data, "test")))
    assert a["h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"].clean
    assert any("repeat a key" in s for s in a["h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"].soft)
    v = a["h200_sxm/gemm/vllm/0.25.0/gemm_perf.parquet"]
    assert not v.clean and "version column ['0.22.0'] != folder 0.25.0" in v.verdict
    r = a["h200_sxm/gemm/trtllm/1.3.0rc23/gemm_perf.parquet"]
    assert r.reuse_from == "1.3.0rc20" and r.rows == 0 and not r.clean
    assert not a["h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet"].clean
    assert "no device column" in a["h200_sxm/gemm/sglang/0.5.14/gemm_perf.parquet"].verdict
    copy = a["h200_sxm/comm/sglang/0.5.6/custom_allreduce_perf.parquet"]
    assert copy.copies_of == ["h200_sxm/comm/trtllm/1.2.0rc5/custom_allreduce_perf.parquet"]
    assert a["h200_sxm/comm/trtllm/1.2.0rc5/custom_allreduce_perf.parquet"].clean  # the donor stays
    carried = a["h200_sxm/comm/vllm/0.25.0/custom_allreduce_perf.parquet"]
    assert not carried.clean and "carry-forward" in carried.verdict
    assert a["h200_sxm/comm/vllm/0.24.0/custom_allreduce_perf.parquet"].clean


def test_compare_with_a_reference_audit_counts_agreement(data: Path) -> None:
    ours = audit(DataRoot(data, "test"))
    ref = [{"path": "h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet", "verdict": "measured on this GPU (provenance: legacy)"},
           {"path": "h200_sxm/gemm/vllm/0.25.0/gemm_perf.parquet", "verdict": "measured on this GPU (provenance: collected)"},
           {"path": "h200_sxm/gemm/nope/1/gemm_perf.parquet", "verdict": "measured on this GPU"}]
    c = compare_with_audit(ours, ref)
    assert (c["compared"], c["agree"], len(c["differ"]), c["not_found"]) == (3, 1, 1, ["h200_sxm/gemm/nope/1/gemm_perf.parquet"])


def test_build_takes_the_newest_clean_table_with_provenance(data: Path) -> None:
    doc = build_calibration(DataRoot(data, "test"), "h200", "vllm")
    g = doc["tables"]["gemm"]
    # 0.25.0 is mislabelled: 0.24.0 answers, its repeated key merged
    assert g["provenance"]["framework_version"] == "0.24.0" and g["provenance"]["rows_in_table"] == 91
    assert g["provenance"]["rows_kept"] == 90
    assert any("0.25.0" in s["path"] and "version column" in s["why"] for s in doc["skipped_tables"])
    assert g["kernels"] == {"bf16": "torch.nn.functional.linear", "fp8": "CutlassFP8ScaledMMLinearKernel"}
    assert set(g["columns"]["dtype"]) == {"bf16", "fp8"}
    ar = doc["tables"]["custom_allreduce"]
    assert ar["provenance"]["framework_version"] == "0.24.0"  # 0.25.0 declares a carry-forward
    # message_size counts elements: bf16 messages are twice as many bytes
    assert min(ar["columns"]["bytes"]) == 2 * 2**7


def test_cli_writes_a_calibration_the_model_reads(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "h200.vllm.calibration.json.gz"
    r = runner.invoke(app, ["calibrate", "--import", "--system", "h200", "--engine", "vllm", "--data", str(data), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "skipped h200_sxm/gemm/vllm/0.25.0/gemm_perf.parquet" in r.output
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert doc["schema"] == "rooflinecli.calibration/3" and doc["engine"] == "vllm"
    from rooflinecli.achievable.calibration import load_calibration
    from rooflinecli.achievable.fit import fit_models

    cal = load_calibration(str(out))
    m = fit_models(cal)
    g = m.tables.gemm["bf16"]
    # a grid point comes back as measured, a point between grid points between its neighbours
    assert float(g.time_s(64, 4096, 4096)) == pytest.approx((0.004 + max(2 * 64 * 4096**2 / 700e12, 4096**2 * 2 / 3.5e12) * 1e3) * 1e-3, rel=1e-3)
    lo, mid, hi = (float(g.time_s(64, n, 4096)) for n in (1024, 2048, 4096))
    assert lo < mid < hi
    t, src = m.tables.comm.time_s("all_reduce", 8, 2**10)
    assert src == "custom" and float(t) > 4e-6


@pytest.mark.parametrize(
    "args, message",
    [
        (["--system", "h999", "--engine", "vllm"], "--system: unknown 'h999'"),
        (["--system", "h200", "--engine", "tensorflow"], "--engine: unknown 'tensorflow'"),
        (["--system", "h200", "--engine", "sglang"], "gemm_perf: none is a clean measurement"),
    ],
)
def test_cli_bad_input_is_one_line_and_writes_nothing(data: Path, tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "out.json.gz"
    r = runner.invoke(app, ["calibrate", "--import", "--data", str(data), "--out", str(out), *args])
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], r.output
    assert not out.exists()


def test_cli_refuses_another_layout_and_other_units(tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / "something").mkdir(parents=True)
    r = runner.invoke(app, ["calibrate", "--import", "--system", "h200", "--engine", "vllm", "--data", str(other), "--out", str(tmp_path / "o.json.gz")])
    assert r.exit_code == 2 and "not a measured-data folder" in r.output
    root = tmp_path / "units"
    f = root / "h200_sxm/gemm/vllm/0.24.0"
    _meta(f, "vllm", "0.24.0", ["gemm_perf"])
    pq.write_table(pa.table({"framework": ["VLLM"], "version": ["0.24.0"], "device": ["NVIDIA H200"], "kernel_source": ["x"], "gemm_dtype": ["bfloat16"],
                             "m": [1], "n": [1], "k": [1], "latency_us": [1.0]}), f / "gemm_perf.parquet")
    r = runner.invoke(app, ["calibrate", "--import", "--system", "h200", "--engine", "vllm", "--data", str(root), "--out", str(tmp_path / "o.json.gz")])
    assert r.exit_code == 2 and "latency_us" in r.output and "other units" in r.output, r.output
    assert not (tmp_path / "o.json.gz").exists()


def test_miniyaml_reads_the_metadata_subset() -> None:
    doc, comments = miniyaml.load("# carried forward\nschema_version: 1\nruntime:\n  framework: vllm\n  version: '0.24.0'\n"
                                  "reuse:\n- table: gemm_perf\n  reason: >-\n    two\n    lines\n")
    assert comments == ["carried forward"]
    assert doc == {"schema_version": 1, "runtime": {"framework": "vllm", "version": "0.24.0"}, "reuse": [{"table": "gemm_perf", "reason": "two lines"}]}
    with pytest.raises(ValueError):
        miniyaml.load("a: 1\na: 2\n")


def test_version_folders_sort_numerically() -> None:
    assert sorted(["0.5.10", "0.5.9", "0.5.6.post2"], key=version_key) == ["0.5.6.post2", "0.5.9", "0.5.10"]
    assert sorted(["1.3.0rc20", "1.3.0rc5", "1.2.0rc5"], key=version_key) == ["1.2.0rc5", "1.3.0rc5", "1.3.0rc20"]
    assert np.isfinite(len(version_key("2.29.2")))


def test_validate_calibration_prints_the_errors_of_a_shipped_calibration() -> None:
    r = runner.invoke(app, ["validate", "--calibration", "a100-sxm.trtllm", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    fams = {x["family"]: x for x in doc["leave_shape_out"]}
    assert {"gemm bf16", "context attention", "generation attention", "all-reduce"} <= set(fams)
    assert all(x["gpu"] == "a100-sxm" and x["engine"] == "trtllm" for x in doc["leave_shape_out"])
    assert 0 < fams["gemm bf16"]["median_abs_error"] < fams["gemm bf16"]["p90_abs_error"] < 1
    assert {x["check"] for x in doc["cross_framework"]} == {"vllm", "sglang"}
    assert doc["transfer"] and all(x["from"] != "a100-sxm" for x in doc["transfer"])
    r = runner.invoke(app, ["validate", "--calibration", "a100-sxm.tensorflow"])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "no imported calibration 'a100-sxm.tensorflow'" in r.output


# ---- MLA tables --------------------------------------------------------------------------------


def _mla(folder: Path, table: str, framework: str, version: str, scale: float = 1.0) -> None:
    from rooflinecli.achievable.mla import context_flops_bytes, generation_flops_bytes

    rows = []
    for tp, h in ((1, 128), (1, 64), (2, 64), (8, 16)):  # H 64 measured under TP 1 and 2: one call, merged
        for b in (1, 4, 16):
            for n in (1, 127, 1023, 8191):
                if table == "context_mla_perf":
                    fl, nb = context_flops_bytes(b, n, h, 2.0)
                    isl, step = n, 0
                else:
                    fl, nb = generation_flops_bytes(b, n, h, 2.0)
                    isl, step = 1, n
                t_ms = scale * (0.01 + max(fl / 600e12, nb / 3e12) * 1e3) * (1.0 + 0.01 * tp)
                rows.append((framework.upper(), version, "NVIDIA H200", "mla", "default", "bfloat16", "bfloat16", h, b, isl, tp, step, t_ms))
    if table == "context_mla_perf":
        rows.append(rows[0][:11] + (5,) + rows[0][12:])  # a cached prefix: not a plain context call
    names = ["framework", "version", "device", "op_name", "kernel_source", "mla_dtype", "kv_cache_dtype", "num_heads", "batch_size", "isl", "tp_size",
             "step", "latency"]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({nm: [r[i] for r in rows] for i, nm in enumerate(names)}), folder / f"{table}.parquet")


def _bmm(folder: Path, framework: str, version: str) -> None:
    rows = [(framework.upper(), version, "NVIDIA H200", op, ks, dt, t, h, 0.005 + t * h * 1e-7)
            for op in ("mla_gen_pre", "mla_gen_post") for dt, ks in (("bfloat16", "bmm"), ("fp8", "fp8_bmm")) for t in (1, 8, 64, 512) for h in (16, 128)]
    names = ["framework", "version", "device", "op_name", "kernel_source", "bmm_dtype", "num_tokens", "num_heads", "latency"]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({nm: [r[i] for r in rows] for i, nm in enumerate(names)}), folder / "mla_bmm_perf.parquet")


@pytest.fixture()
def mla_data(tmp_path: Path) -> Path:
    s = tmp_path / "data" / "h200_sxm"
    _meta(s / "gemm/trtllm/1.3.0", "trtllm", "1.3.0", ["gemm_perf"])
    _gemm(s / "gemm/trtllm/1.3.0", "trtllm", "1.3.0")
    _meta(s / "mla/trtllm/1.3.0", "trtllm", "1.3.0", ["context_mla_perf", "generation_mla_perf"])
    _mla(s / "mla/trtllm/1.3.0", "context_mla_perf", "trtllm", "1.3.0")
    _mla(s / "mla/trtllm/1.3.0", "generation_mla_perf", "trtllm", "1.3.0")
    _meta(s / "mla_bmm/trtllm/1.3.0", "trtllm", "1.3.0", ["mla_bmm_perf"])
    _bmm(s / "mla_bmm/trtllm/1.3.0", "trtllm", "1.3.0")
    # SGLang's folder holds a bit-identical copy of TensorRT-LLM's generation table: not imported
    _meta(s / "mla/sglang/0.5.14", "sglang", "0.5.14", ["generation_mla_perf"])
    _mla(s / "mla/sglang/0.5.14", "generation_mla_perf", "trtllm", "1.3.0")
    return tmp_path / "data"


def test_mla_tables_imported_with_their_conventions(mla_data: Path) -> None:
    doc = build_calibration(DataRoot(mla_data, "test"), "h200", "trtllm")
    ctx, gen, bmm = (doc["tables"][n] for n in ("context_mla", "generation_mla", "mla_bmm"))
    # 4 (TP, H) x 3 B x 4 lengths measured; H 64 under TP 1 and 2 merged: 3 heads x 12 points
    assert len(ctx["columns"]["latency_us"]) == 36 and len(gen["columns"]["latency_us"]) == 36
    assert any("cached prefix" in s for s in ctx["provenance"]["skipped_rows"])
    assert any("another TP size" in s for s in gen["provenance"]["skipped_rows"])
    assert sorted(set(ctx["columns"]["H"])) == [16, 64, 128] and max(gen["columns"]["N"]) == 8191
    assert set(bmm["columns"]["op"]) == {"pre", "post"} and bmm["kernels"] == {"bf16": "bmm", "fp8": "fp8_bmm"}
    a = {x.path: x for x in audit(DataRoot(mla_data, "test"))}
    copy = a["h200_sxm/mla/sglang/0.5.14/generation_mla_perf.parquet"]
    assert not copy.clean and "bit-identical" in copy.verdict


def test_mla_grid_reads_its_points_as_measured(mla_data: Path) -> None:
    doc = build_calibration(DataRoot(mla_data, "test"), "h200", "trtllm")
    from rooflinecli.achievable.calibration import parse_calibration
    from rooflinecli.achievable.mla import TABLE_DIMS, fit_mla
    from rooflinecli.importer.aiconfigurator import encode

    cal = parse_calibration(json.loads(gzip.decompress(encode(doc, Path("x.json.gz")))), "x")
    mt = fit_mla(cal.tables)
    c = cal.tables["generation_mla"]["columns"]
    i = int(np.flatnonzero((np.asarray(c["H"]) == 16) & (np.asarray(c["B"]) == 4) & (np.asarray(c["N"]) == 1023))[0])
    assert mt.generation.time_s("bf16", 16, 4, 1023) == pytest.approx(c["latency_us"][i] * 1e-6, rel=1e-3)
    # between grid points the time follows the base; beyond the grid the ratio is held
    t = mt.generation.time_s("bf16", 16, 4, np.array([1023.0, 2047.0, 8191.0]))
    assert t[0] < t[1] < t[2]
    assert set(mt.leave_shape_out()) == {"context MLA", "generation MLA", "MLA BMM"}
    assert TABLE_DIMS == (512, 128, 64, 128)


def _large_gemm(folder: Path, framework: str, version: str, bf16_tflops: float, hbm_gb_per_s: float) -> None:
    """GEMMs that give ceilings: M, N, K >= 4096 (compute-bound at ``bf16_tflops``, fp8 at 1.6x)
    and weight-streaming M <= 16 with a weight of 1-2 GiB (at ``hbm_gb_per_s``)."""
    rows = []
    for dt, rate in (("bfloat16", bf16_tflops), ("fp8", 1.6 * bf16_tflops)):
        for m in (4096, 6144, 8192):
            for n in (4096, 8192, 16384):
                for k in (4096, 8192, 16384):
                    rows.append((dt, m, n, k, 2.0 * m * n * k / (rate * 1e12) * 1e3))
    for m in (1, 2, 4, 8, 16):
        for n, k in ((16384, 32768), (32768, 16384), (32768, 32768), (24576, 32768)):
            rows.append(("bfloat16", m, n, k, 2.0 * (m * k + n * k + m * n) / (hbm_gb_per_s * 1e9) * 1e3))
    cols = {"framework": [framework.upper()] * len(rows), "version": [version] * len(rows), "device": ["NVIDIA H200"] * len(rows),
            "op_name": ["gemm"] * len(rows), "kernel_source": ["torch.nn.functional.linear"] * len(rows)}
    for i, nm in enumerate(("gemm_dtype", "m", "n", "k", "latency")):
        cols[nm] = [r[i] for r in rows]
    _meta(folder, framework, version, ["gemm_perf"])
    pq.write_table(pa.table(cols), folder / "gemm_perf.parquet")


def _import(data: Path, out: Path, engine: str, *extra: str):
    return runner.invoke(app, ["calibrate", "--import", "--system", "h200", "--engine", engine, "--data", str(data), "--out", str(out), *extra])


def test_cli_without_ceiling_shapes_writes_the_calibration_and_says_why_no_spec(data: Path, tmp_path: Path) -> None:
    r = _import(data, tmp_path / "h200.vllm.calibration.json.gz", "vllm")
    assert r.exit_code == 0, r.output
    assert "no measured spec: no GEMM of these tables gives a ceiling" in r.output
    assert (tmp_path / "h200.vllm.calibration.json.gz").is_file() and not (tmp_path / "h200-imported.toml").exists()


def test_cli_writes_the_measured_spec_from_every_engine_beside_it(tmp_path: Path) -> None:
    from rooflinecli.hardware import load_spec_file

    data = tmp_path / "data"
    _large_gemm(data / "h200_sxm/gemm/vllm/0.24.0", "vllm", "0.24.0", 700.0, 3900.0)
    _large_gemm(data / "h200_sxm/gemm/trtllm/1.2.0", "trtllm", "1.2.0", 760.0, 3700.0)
    out = tmp_path / "cal"
    out.mkdir()
    r = _import(data, out / "h200.vllm.calibration.json.gz", "vllm")
    assert r.exit_code == 0, r.output
    spec = load_spec_file(out / "h200-imported.toml")
    assert spec.kind == "measured" and spec.base == "h200" and spec.id == "h200-imported"
    assert spec.peak_dense_tflops["bf16"] == pytest.approx(700.0, rel=1e-3) and spec.memory_bandwidth_gb_per_s == pytest.approx(3900.0, rel=1e-3)
    assert spec.peak_dense_tflops["fp8"] == pytest.approx(1120.0, rel=1e-3)
    assert "wrote" in r.output and "measured spec 'h200-imported' on 'h200'" in r.output
    # a second engine's import joins the first: each ceiling the highest engine's
    r = _import(data, out / "h200.trtllm.calibration.json.gz", "trtllm")
    assert r.exit_code == 0, r.output
    spec = load_spec_file(out / "h200-imported.toml")
    assert spec.peak_dense_tflops["bf16"] == pytest.approx(760.0, rel=1e-3) and spec.memory_bandwidth_gb_per_s == pytest.approx(3900.0, rel=1e-3)
    assert "engines trtllm, vllm" in (out / "h200-imported.toml").read_text() or "engines vllm, trtllm" in (out / "h200-imported.toml").read_text()
    # --no-spec leaves the spec as it was
    before = (out / "h200-imported.toml").read_bytes()
    _large_gemm(data / "h200_sxm/gemm/sglang/0.5.6", "sglang", "0.5.6", 800.0, 4000.0)
    r = _import(data, out / "h200.sglang.calibration.json.gz", "sglang", "--no-spec")
    assert r.exit_code == 0 and (out / "h200-imported.toml").read_bytes() == before


def test_cli_refuses_tables_faster_than_the_datasheet_and_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _large_gemm(data / "h200_sxm/gemm/vllm/0.24.0", "vllm", "0.24.0", 1500.0, 3900.0)  # above the H200's 989 TFLOP/s
    out = tmp_path / "h200.vllm.calibration.json.gz"
    r = _import(data, out, "vllm")
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "above the datasheet's" in lines[0] and "not of this GPU" in lines[0], r.output
    assert not out.exists() and not (out.parent / "h200-imported.toml").exists()
def _moe_cols(rows: list[tuple]) -> dict:
    """moe_perf columns from (kernel, dtype, tokens, d, I, k, E, tp, ep, latency ms) rows."""
    names = ("kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size", "latency")
    cols = {n: np.array([r[i] for r in rows]) for i, n in enumerate(names)}
    cols["distribution"] = np.array(["power_law_1.01"] * len(rows))
    return cols


def test_moe_import_keeps_another_kernel_where_the_main_one_was_not_measured() -> None:
    from rooflinecli.importer.aiconfigurator import _moe_table

    shape = (4096, 1536, 8, 128)
    rows = [("cutlass", "fp8_block", T, *shape, 1, ep, 0.3) for ep in (2, 4, 8) for T in (1, 16, 256)]  # 9 rows: the most
    rows += [("triton", "fp8_block", T, *shape, tp, 1, 0.1) for tp in (2, 4) for T in (1, 16, 256)]  # only under TP
    rows += [("triton", "fp8_block", T, *shape, 1, 2, 0.2) for T in (1, 16)]  # a layout cutlass has: left out
    body, skipped = _moe_table(_moe_cols(rows))
    c = body["columns"]
    assert body["kernels"] == {"fp8_block": "cutlass"}
    assert len(c["latency_us"]) == 15 and sorted(set(zip(c["tp"], c["ep"]))) == [(1, 2), (1, 4), (1, 8), (2, 1), (4, 1)]
    assert body["layout_kernels"] == [{"dtype": "fp8_block", "kernel": "triton", "layouts": [[*shape, 2, 1], [*shape, 4, 1]]}]
    assert "2 fp8_block rows of other kernels than cutlass at its layouts" in skipped
    # the EP rows are cutlass's own, the TP rows triton's: the model reads each with its kernel
    from rooflinecli.achievable.tables import fit_moe

    mt = fit_moe({"columns": {"dtype": c["dtype"], "T": c["T"], "d": c["d"], "I": c["I"], "k": c["k"], "E": c["E"], "tp": c["tp"], "ep": c["ep"],
                              "latency_us": c["latency_us"]}, "kernels": body["kernels"], "layout_kernels": body["layout_kernels"]})
    assert mt.kernel("fp8_block", *shape, 2, 1) == "triton" and mt.kernel("fp8_block", *shape, 1, 2) == "cutlass"
    assert float(mt.time_s("fp8_block", 16, *shape, 2, 1)) == pytest.approx(1e-4, rel=1e-6)
    assert float(mt.time_s("fp8_block", 16, *shape, 1, 2)) == pytest.approx(3e-4, rel=1e-6)


def test_moe_import_with_one_kernel_a_dtype_has_no_layout_kernels() -> None:
    from rooflinecli.importer.aiconfigurator import _moe_table

    rows = [("triton", "bfloat16", T, 4096, 1536, 8, 128, tp, 1, 0.1) for tp in (1, 2) for T in (1, 16)]
    body, skipped = _moe_table(_moe_cols(rows))
    assert "layout_kernels" not in body and not any("other kernels" in s for s in skipped)


def _quantize(folder: Path, table: str, rows: list[tuple]) -> None:
    names = ["framework", "version", "device", "op_name", "kernel_source", "m", "k", "quant_dtype", "latency"]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({nm: [r[i] for r in rows] for i, nm in enumerate(names)}), folder / f"{table}.parquet")


def test_fp8_quantize_tables_imported_and_read_as_measured(data: Path) -> None:
    from rooflinecli.achievable.calibration import parse_calibration
    from rooflinecli.achievable.tables import fit_tables

    f = data / "h200_sxm/quantize/trtllm/1.3.0rc20"
    _meta(f, "trtllm", "1.3.0rc20", ["computescale_perf", "scale_matrix_perf"])
    grid = [(m, k) for m in (1, 16, 256, 4096) for k in (1024, 8192)]
    # compute_scale is dynamic minus static, clipped at 0 by the collector: a 0 row is interpolated
    scale = [("TRTLLM", "1.3.0rc20", "NVIDIA H200", "compute_scale", "torch_ops", m, k, "fp8", 0.0 if (m, k) == (16, 1024) else 0.007 + m * k * 3e-12)
             for m, k in grid] + [("TRTLLM", "1.3.0rc20", "NVIDIA H200", "compute_scale", "torch_ops", 1, 1024, "int8", 0.5)]
    _quantize(f, "computescale_perf", scale)
    _quantize(f, "scale_matrix_perf", [("TRTLLM", "1.3.0rc20", "NVIDIA H200", "scale_matrix", "torch_ops", m, k, "fp8", 0.0014 + m * k * 1e-12) for m, k in grid])
    _meta(data / "h200_sxm/gemm/trtllm/1.3.0rc20", "trtllm", "1.3.0rc20", ["gemm_perf"])
    doc = build_calibration(DataRoot(data, "test"), "h200", "trtllm")
    s = doc["tables"]["fp8_scale"]
    assert len(s["columns"]["M"]) == len(grid) - 1 and s["provenance"]["table_path"].endswith("computescale_perf.parquet")
    assert any("rows of 0" in x for x in s["provenance"]["skipped_rows"]) and any("int8" not in x and "other than fp8" in x for x in s["provenance"]["skipped_rows"])
    q = fit_tables(parse_calibration(json.loads(json.dumps(doc)), "test")).fp8_quant
    assert q.scale.time_s(256, 8192) == pytest.approx(0.007e-3 + 256 * 8192 * 3e-15, rel=1e-3)  # a grid point, as measured
    assert q.quantize.time_s(4096, 1024) == pytest.approx(0.0014e-3 + 4096 * 1024 * 1e-15, rel=1e-3)
    between = q.scale.time_s(16, 1024)  # the clipped row, between its neighbours
    assert q.scale.time_s(1, 1024) < between < q.scale.time_s(256, 1024)
    assert q.quantize.time_s(8192, 1024) == pytest.approx(2 * q.quantize.time_s(4096, 1024), rel=1e-9)  # past the edge: by the elements


def test_gemm_import_keeps_the_weight_only_tables_and_counts_smoothquant() -> None:
    """int8 / int4 weight-only GEMM rows (16-bit activations) are kept under their own names, each
    with its kernel; SmoothQuant's int8 x int8 rows are not modelled and are counted as skipped."""
    from rooflinecli.importer.aiconfigurator import _gemm_table

    dts = ["bfloat16", "int8_wo", "int4_wo", "sq"]
    kernel = {"bfloat16": "torch_flow", "int8_wo": "wo_plugin", "int4_wo": "wo_plugin", "sq": "sq_plugin"}
    cols = {"gemm_dtype": np.array(dts * 2), "kernel_source": np.array([kernel[d] for d in dts * 2]),
            "m": np.array([1.0] * 4 + [8.0] * 4), "n": np.full(8, 4096.0), "k": np.full(8, 4096.0),
            "latency": np.array([0.0262, 0.0215, 0.0205, 0.03] * 2)}
    table, skipped = _gemm_table(cols)
    assert table["columns"]["dtype"] == ["bf16", "int8_wo", "int4_wo"] * 2
    assert table["kernels"] == {"bf16": "torch_flow", "int8_wo": "wo_plugin", "int4_wo": "wo_plugin"}
    assert table["columns"]["latency_us"][2] == pytest.approx(20.5)
    assert skipped == ["2 rows of dtype sq (not modelled)"]
