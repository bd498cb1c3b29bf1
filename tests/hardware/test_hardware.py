"""Hardware spec files and their loader (library level): every built-in spec loads and is sane,
ridge points match the datasheet arithmetic, measured specs inherit from their base, and the
loader's directory rules (duplicate ids, measured specs in the wrong folder) hold."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from rooflinecli.dtypes import COMPUTE_DTYPES
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import (
    HardwareSpec,
    builtin_specs,
    get_spec,
    get_specs,
    load_spec_file,
    load_spec_files,
    parse_spec,
    specs_dir,
)

REQUIRED_IDS = ("h100-sxm", "h100-pcie", "h200", "a100-sxm", "b200", "l40s", "rtx-4090", "mi300x")


def test_every_required_gpu_is_built_in():
    assert set(REQUIRED_IDS) <= set(builtin_specs())


@pytest.mark.parametrize("gpu", REQUIRED_IDS)
def test_builtin_spec_is_complete_and_cited(gpu):
    s = get_spec(gpu)
    assert isinstance(s, HardwareSpec) and s.kind == "datasheet" and s.base is None
    assert Path(s.path).name == f"{gpu}.toml"  # one file per id, named after it
    assert {"fp32", "bf16", "fp16"} <= set(s.peak_dense_tflops) <= set(COMPUTE_DTYPES)
    # dense tensor throughput ordering on every part: fp32 <= tf32 <= bf16 (<= fp8 where present)
    p = s.peak_dense_tflops
    assert p["fp32"] <= p.get("tf32", p["fp32"]) <= p["bf16"] == p["fp16"]
    if "fp8" in p:
        assert p["fp8"] == pytest.approx(2 * p["bf16"], rel=0.02)
    assert s.sources and all(src.url.startswith("https://") and src.title for src in s.sources)
    # memory levels kept apart: L2 (MB, whole GPU) is far larger than shared memory per SM (KB)
    assert s.l2_size_mb * 1e6 > 50 * s.smem_per_sm_bytes
    assert s.l2_bandwidth_gb_per_s > s.memory_bandwidth_gb_per_s  # on-chip beats DRAM
    assert "cache.l2_bandwidth_gb_per_s" in s.estimates  # no vendor prints it: always an estimate


def test_bf16_ridge_points_match_datasheet_arithmetic():
    # REFERENCE: H100 SXM about 989/3.35 = 295 FLOP/B; H200 about 989/4.8 = 206.
    assert get_spec("h100-sxm").ridge_point("bf16") == pytest.approx(295, rel=0.01)
    assert get_spec("h200").ridge_point("bf16") == pytest.approx(206, rel=0.01)
    a100 = get_spec("a100-sxm")
    assert a100.ridge_point("bf16") == pytest.approx(312e12 / 2039e9)


def test_derived_units_are_bytes_and_flops_per_second():
    s = get_spec("h100-sxm")
    assert s.peak_flops_per_s("bf16") == pytest.approx(989.5e12)
    assert s.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert s.memory_capacity_bytes == pytest.approx(80e9)
    assert s.smem_per_sm_bytes == 228 * 1024
    assert s.smem_total_bytes == pytest.approx(132 * 228 * 1024)  # about 30 MB, not 50 MB
    assert s.gpu_link_bytes_per_s == pytest.approx(900e9)
    assert s.onchip_to_hbm_bandwidth_ratio == pytest.approx(s.l2_bandwidth_gb_per_s / 3350)


def test_missing_dtype_peak_names_what_the_spec_has():
    with pytest.raises(RooflineError, match=r"a100-sxm: no peak for compute dtype 'fp8'.*bf16"):
        get_spec("a100-sxm").peak_flops_per_s("fp8")


def test_get_spec_by_path_and_list(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text((specs_dir() / "h200.toml").read_text().replace('id = "h200"', 'id = "my-gpu"'))
    assert get_spec(str(p)).id == "my-gpu"
    assert [s.id for s in get_specs(f"h100-sxm, {p}")] == ["h100-sxm", "my-gpu"]
    with pytest.raises(RooflineError, match="unknown GPU 'h100' \\(did you mean 'h100-pcie' or 'h100-sxm'"):
        get_spec("h100")
    with pytest.raises(RooflineError, match="no GPU given"):
        get_specs(" , ")


def _measured(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "lab.toml"
    p.write_text('id = "h200-lab"\nkind = "measured"\nbase = "h200"\n' + body)
    return p


def test_measured_spec_inherits_unset_fields_and_records_provenance(tmp_path):
    p = _measured(tmp_path, (
        "[memory]\nbandwidth_gb_per_s = 4300\n"
        "[peak_dense_tflops]\nbf16 = 780\n"
        "[efficiency.gemm]\nmemory = 0.9\ncompute = 0.8\n"
        '[measured_with]\ngpu = "NVIDIA H200"\n'
    ))
    m, base = load_spec_file(p), get_spec("h200")
    assert (m.kind, m.base, m.id) == ("measured", "h200", "h200-lab")
    assert m.memory_bandwidth_gb_per_s == 4300 and m.peak_dense_tflops["bf16"] == 780
    # not measured: per dtype, the datasheet figure at bf16's measured / datasheet ratio (fp8 has
    # no measured peer of its datasheet figure here), marked an estimate
    assert m.peak_dense_tflops["fp8"] == pytest.approx(base.peak_dense_tflops["fp8"] * 780 / base.peak_dense_tflops["bf16"])
    assert m.is_estimate("peak_dense_tflops.fp8") and not m.is_estimate("peak_dense_tflops.bf16")
    assert m.memory_capacity_gb == base.memory_capacity_gb and m.sources == base.sources
    assert m.efficiency == {"gemm": {"memory": 0.9, "compute": 0.8}}
    derived = {f"method peak_dense_tflops.{d}" for d in base.peak_dense_tflops if d != "bf16"}
    assert set(m.measured_with) == {"gpu"} | derived and m.measured_with["gpu"] == "NVIDIA H200"
    assert m.measured_with["method peak_dense_tflops.fp8"].startswith("not measured: the datasheet's 1979 TFLOP/s x 0.788")
    assert m.provenance("memory.bandwidth_gb_per_s") == "measured"
    assert m.provenance("cache.l2_bandwidth_gb_per_s") == "estimate"  # inherited estimate
    assert m.provenance("memory.capacity_gb") == "datasheet"
    assert m.ridge_point("bf16") == pytest.approx(780 / 4300 * 1e3)



def test_fp64_does_not_take_a_measured_fp32_peak_as_its_peer(tmp_path):
    # H200: fp32 67 (CUDA cores) = fp64 67 (FP64 tensor cores) on the datasheet, by coincidence;
    # an fp32 measured at 40 must not make fp64 40: it derives from bf16's ratio like the rest
    p = _measured(tmp_path, "[peak_dense_tflops]\nbf16 = 700\nfp32 = 40\n")
    m, base = load_spec_file(p), get_spec("h200")
    assert base.peak_dense_tflops["fp64"] == base.peak_dense_tflops["fp32"]
    assert m.peak_dense_tflops["fp64"] == pytest.approx(base.peak_dense_tflops["fp64"] * 700 / base.peak_dense_tflops["bf16"])
    assert "bf16's measured / datasheet ratio" in m.measured_with["method peak_dense_tflops.fp64"]


def test_measured_spec_overriding_an_estimate_clears_it(tmp_path):
    m = load_spec_file(_measured(tmp_path, "[cache]\nl2_bandwidth_gb_per_s = 9100\n"))
    assert not m.is_estimate("cache.l2_bandwidth_gb_per_s")
    assert m.provenance("cache.l2_bandwidth_gb_per_s") == "measured"


def test_measured_base_may_be_a_relative_path(tmp_path):
    (tmp_path / "gpu.toml").write_text((specs_dir() / "h100-sxm.toml").read_text().replace('"h100-sxm"', '"x-gpu"'))
    p = tmp_path / "m.toml"
    p.write_text('id = "x-lab"\nkind = "measured"\nbase = "gpu.toml"\n[power]\ntdp_w = 650\n')
    m = load_spec_file(p)
    assert m.base == "x-gpu" and m.tdp_w == 650 and m.sm_count == 132


def test_duplicate_ids_across_files_are_an_error(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    text = (specs_dir() / "l40s.toml").read_text()
    a.write_text(text)
    b.write_text(text)
    with pytest.raises(RooflineError, match=r"b\.toml: id: duplicate id 'l40s' \(also in .*a\.toml\)"):
        load_spec_files([a, b])


def test_measured_spec_among_datasheets_is_reported_not_resolved(tmp_path):
    p = _measured(tmp_path, "")
    with pytest.raises(RooflineError, match=r"lab\.toml: kind: a 'measured' spec belongs in hardware_specs/measured/"):
        load_spec_files([p], "datasheet")


def test_parse_spec_round_trips_through_to_dict():
    s = get_spec("mi300x")
    d = s.to_dict()
    raw = {k: d[k] for k in ("id", "name", "vendor", "kind", "peak_dense_tflops", "memory", "cache",
                             "compute", "interconnect", "power", "estimates", "sources")}
    again = parse_spec(raw, "roundtrip")
    assert again.to_dict() | {"path": s.path} == d
    assert d["derived"]["bf16_ridge_point_flop_per_byte"] == pytest.approx(1307.4e12 / 5300e9)


def test_spec_files_state_dense_figures_in_their_sources():
    # every NVIDIA/AMD spec says in a source note how sparse figures were handled
    for gpu in REQUIRED_IDS:
        raw = tomllib.loads((specs_dir() / f"{gpu}.toml").read_text())
        notes = " ".join(s.get("note", "") for s in raw["sources"]).lower()
        assert "sparsity" in notes or "sparse" in notes, gpu


def test_a_measured_peak_scaled_to_sustained_is_a_measured_estimate():
    """The shipped H200 file's fp8 peak is its burst scaled by bf16's sustained / burst ratio: set by
    the file, but an estimate ("(m)*" in `hw list`, "measured estimate" in the report); int8, which
    it does not measure, takes fp8's measured / datasheet ratio (it was the datasheet's 1,979)."""
    m = get_spec("h200-measured")
    assert m.provenance("peak_dense_tflops.fp8") == "measured estimate"
    assert m.provenance("peak_dense_tflops.bf16") == "measured"
    assert m.provenance("peak_dense_tflops.int8") == "estimate"
    assert m.peak_dense_tflops["int8"] == pytest.approx(m.peak_dense_tflops["fp8"])
    burst = float(m.measured_with["burst peak_dense_tflops.fp8"])
    ratio = m.peak_dense_tflops["bf16"] / float(m.measured_with["burst peak_dense_tflops.bf16"])
    assert m.peak_dense_tflops["fp8"] == pytest.approx(burst * ratio, rel=1e-3)
    assert m.peak_dense_tflops["fp16"] < m.peak_dense_tflops["bf16"] * 1.0001
    from rooflinecli.ceilings import bound_spec

    bound = bound_spec(m).peak_dense_tflops  # what a measured kernel must not beat: the bursts, int8 through fp8
    assert bound["fp8"] == pytest.approx(burst) and bound["int8"] == pytest.approx(burst)


def _fresh_loader(monkeypatch, folder):
    """The loader reading its built-in specs from ``folder``, its caches emptied (``clear_spec_caches``
    empties them again after the test, so later tests read the real folder)."""
    from rooflinecli.hardware import loader

    for f in (loader.builtin_ids, loader.builtin_spec, loader.builtin_specs):
        f.cache_clear()
    monkeypatch.setattr(loader, "specs_dir", lambda: folder)
    return loader


@pytest.fixture
def clear_spec_caches():
    from rooflinecli.hardware import loader

    yield
    for f in (loader.builtin_ids, loader.builtin_spec, loader.builtin_specs):
        f.cache_clear()


def test_a_builtin_spec_whose_id_is_not_its_file_name_is_refused(tmp_path, monkeypatch, clear_spec_caches):
    (tmp_path / "gpu-a.toml").write_text((specs_dir() / "l40s.toml").read_text())  # id "l40s"
    loader = _fresh_loader(monkeypatch, tmp_path)
    assert loader.builtin_ids() == ("gpu-a",)
    with pytest.raises(RooflineError, match=r"gpu-a\.toml: id: 'l40s' is not the file's name; a built-in spec's id is its file name \('gpu-a'\)"):
        loader.get_spec("gpu-a")
    with pytest.raises(RooflineError, match=r"unknown GPU 'l40s'"):
        loader.get_spec("l40s")


def test_a_gpu_named_by_id_reads_only_its_own_file(tmp_path, monkeypatch, clear_spec_caches):
    """A command names one GPU: its file alone is read (a datasheet spec beside it that would not
    load is not touched), and the name is forgiven from the file names without reading any."""
    from rooflinecli.cli.options import forgive_gpu_names

    (tmp_path / "h200.toml").write_text((specs_dir() / "h200.toml").read_text())
    (tmp_path / "broken.toml").write_text("id = [")
    (tmp_path / "measured").mkdir()
    loader = _fresh_loader(monkeypatch, tmp_path)
    read = []
    real = loader.load_spec_file
    monkeypatch.setattr(loader, "load_spec_file", lambda p, *a, **k: read.append(Path(p).name) or real(p, *a, **k))
    assert forgive_gpu_names(" H200 ") == "h200" and read == []
    assert loader.get_spec("h200").id == "h200" and read == ["h200.toml"]
    with pytest.raises(RooflineError, match=r"broken\.toml"):
        loader.builtin_specs()  # every file, as `hw list` reads them


def test_validating_a_datasheet_spec_in_the_builtin_folder_checks_its_id_is_its_name(tmp_path, monkeypatch, clear_spec_caches):
    """``hw validate`` of a file put among the built-in specs refuses what every command would."""
    p = tmp_path / "gpu-b.toml"
    p.write_text((specs_dir() / "l40s.toml").read_text())
    loader = _fresh_loader(monkeypatch, tmp_path)
    with pytest.raises(RooflineError, match=r"gpu-b\.toml: id: 'l40s' is not the file's name"):
        loader.load_user_spec(p)
    elsewhere = tmp_path.parent / (tmp_path.name + "-elsewhere")
    elsewhere.mkdir()
    (elsewhere / "gpu-c.toml").write_text((specs_dir() / "l40s.toml").read_text().replace('id = "l40s"', 'id = "zz-c"'))
    assert loader.load_user_spec(elsewhere / "gpu-c.toml").id == "zz-c"  # outside that folder: any name
