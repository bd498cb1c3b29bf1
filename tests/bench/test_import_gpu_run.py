"""scripts/import_gpu_run.py on the real H200 run 2 folder: into a scratch checkout, from a folder
and from the suite's .tgz; shipped spec, calibration and tuned configs load back; bad input is one
line, exit 2, nothing written."""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
RUN2 = ROOT / "reports" / "h200-2026-11-30-run2"


@pytest.fixture(scope="module")
def tool():
    return load_script("import_gpu_run")


@pytest.fixture
def suite(tmp_path):
    """Run 2's suite folder as the suite wrote it (no README of ours), its tuned file the
    committed one (run 2's predates the skinny GEMM's BLOCK_N config key)."""
    s = tmp_path / "suite"
    shutil.copytree(RUN2, s, ignore=shutil.ignore_patterns("README.md"))
    shutil.copy(ROOT / "kernels" / "tuned" / "nvidia-h200-triton3.6.0.json", s / "tuned" / "nvidia-h200-triton3.6.0.json")
    return s


def _checkout(tmp_path) -> Path:
    root = tmp_path / "checkout"
    (root / "reports").mkdir(parents=True)
    return root


def test_import_and_ship_from_a_folder(tool, suite, tmp_path, capsys):
    from kernels import tuning
    from rooflinecli.achievable import models_for
    from rooflinecli.hardware import load_spec_file

    root = _checkout(tmp_path)
    assert tool.main([str(suite), "--name", "h200-2026-12-02-run4", "--ship", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    rep = root / "reports" / "h200-2026-12-02-run4"
    assert (rep / "results.json").is_file() and (rep / "logs" / "bench.log").is_file()
    readme = (rep / "README.md").read_text()
    assert readme.startswith("# h200-2026-12-02-run4: `scripts/gpu_suite.sh` on one NVIDIA H200")
    assert "commit 0d21157" in readme and "gpu_suite summary (297 s)" in readme and "TODO (a person)" in readme
    spec = load_spec_file(root / "hardware_specs" / "measured" / "h200.toml")
    assert spec.id == "h200-measured" and spec.measured_with["calibration"] == "h200-calibration.json"
    assert "reports/h200-2026-12-02-run4/" in spec.measured_with["source"]
    assert models_for(spec) is not None and spec.memory_bandwidth_gb_per_s == pytest.approx(4252.0)
    tuned = root / "kernels" / "tuned" / "nvidia-h200-triton3.6.0.json"
    assert tuning.load_committed(tuned, tuning.discover_autotuners(), "NVIDIA H200", "3.6.0").status == "applied"
    # the README validation table rows, from the run's own validation-e2e.json (run 2: 44 points)
    assert "| achievable model (`--hw h200-measured`, engine `torch`) | 44 |" in out
    assert "roofline report --hw h200,h100-sxm --results reports/h200-2026-12-02-run4/results.json" in out
    # the same name twice: refused, nothing changed
    assert tool.main([str(suite), "--name", "h200-2026-12-02-run4", "--root", str(root)]) == 2
    assert "already there" in capsys.readouterr().err


def test_import_from_the_suite_tgz_without_shipping(tool, suite, tmp_path):
    root = _checkout(tmp_path)
    tgz = tmp_path / "suite.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(suite, arcname="suite")
    assert tool.main([str(tgz), "--name", "h200-run5", "--root", str(root)]) == 0
    assert (root / "reports" / "h200-run5" / "stages.tsv").is_file()
    assert not (root / "hardware_specs").exists() and not (root / "kernels").exists()  # not shipped


@pytest.mark.parametrize("breakage, message", [
    ("no-results", "no results.json: not a gpu_suite.sh output folder"),
    ("old-tuned", "does not load against this checkout's kernels"),
    ("bad-name", "--name 'Run 4': use lower-case letters"),
    ("schema", "results schema"),
])
def test_bad_runs_are_one_line_and_write_nothing(tool, suite, tmp_path, capsys, breakage, message):
    root = _checkout(tmp_path)
    name = "h200-bad"
    if breakage == "no-results":
        (suite / "results.json").unlink()
    elif breakage == "old-tuned":
        shutil.copy(RUN2 / "tuned" / "nvidia-h200-triton3.6.0.json", suite / "tuned" / "nvidia-h200-triton3.6.0.json")
    elif breakage == "bad-name":
        name = "Run 4"
    elif breakage == "schema":
        (suite / "results.json").write_text('{"schema": "rooflinecli.calibration/1", "rows": []}')
    assert tool.main([str(suite), "--name", name, "--ship", "--root", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert sorted(p.name for p in (root / "reports").iterdir()) == []  # no report, no scratch left
    assert not (root / "hardware_specs").exists() and not (root / "kernels").exists()


def _refused(tool, capsys, root, argv, message):
    """``argv`` is refused: exit 2, one ``error:`` line holding ``message``, nothing written."""
    assert tool.main([*argv, "--root", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err, err
    assert sorted(p.name for p in (root / "reports").iterdir()) == []  # no report, no scratch left
    assert not (root / "hardware_specs").exists() and not (root / "kernels").exists()
    return err


@pytest.mark.parametrize("contents, message", [
    ("NaN", "validation-e2e.json: not valid JSON: NaN is not a JSON number"),
    ("1", "validation-e2e.json: not a suite output (validation-e2e.json) (a JSON int, not an object)"),
    ('"x"', "validation-e2e.json: not a suite output (validation-e2e.json) (a JSON str, not an object)"),
    ('{"end_to_end_full_summary": []}', "end_to_end_full_summary must be an object"),
    ('{"end_to_end_full_summary": {"achievable": {"all": {"n": 3, "median_abs_error": "x"}}}}',
     "end_to_end_full_summary.achievable.all.median_abs_error must be a number"),
])
def test_a_malformed_validation_e2e_json_is_refused_before_the_copy(tool, suite, tmp_path, capsys, contents, message):
    # it used to crash in readme_table_rows (AttributeError) after reports/NAME/ was renamed in
    (suite / "validation-e2e.json").write_text(contents + "\n")
    _refused(tool, capsys, _checkout(tmp_path), [str(suite), "--name", "h200-bad"], message)


@pytest.mark.parametrize("name", ["validation.json", "gate-regress.json", "measured_spec.calibration.json", "tuned/x.json"])
def test_other_suite_json_outputs_must_be_json_objects(tool, suite, tmp_path, capsys, name):
    (suite / name).write_text("[1, 2]\n")
    _refused(tool, capsys, _checkout(tmp_path), [str(suite), "--name", "h200-bad"], f"{name}: not a ")


@pytest.mark.parametrize("where", ["summary.txt", "logs/outside", "logs/outside-dir", "fifo"])
def test_a_symlink_or_fifo_in_a_suite_folder_is_refused(tool, suite, tmp_path, capsys, where):
    # a link was followed and the file outside the run copied into reports/ (the .tgz refused it)
    outside = tmp_path / "outside.txt"
    outside.write_text("not part of the run\n")
    if where == "fifo":
        os.mkfifo(suite / where)
        message = f"{suite / where}: not a plain file or folder"
    else:
        if (suite / where).exists():
            (suite / where).unlink()
        (suite / where).symlink_to(tmp_path if where.endswith("-dir") else outside)
        message = f"{suite / where}: a symbolic link in the suite folder; refusing it"
    _refused(tool, capsys, _checkout(tmp_path), [str(suite), "--name", "h200-bad"], message)


@pytest.mark.parametrize("contents", [b"x\n", b""])
def test_a_tgz_that_is_not_a_tar_file_is_one_line(tool, tmp_path, capsys, contents):
    # tarfile's ReadError text lists each compression tried, one line each
    tgz = tmp_path / "n.tgz"
    tgz.write_bytes(contents)
    _refused(tool, capsys, _checkout(tmp_path), [str(tgz), "--name", "h200-bad"], f"{tgz}: not a readable .tgz (not a gzip/tar file)")


def test_a_truncated_tgz_is_one_line(tool, suite, tmp_path, capsys):
    full = tmp_path / "full.tgz"
    with tarfile.open(full, "w:gz") as tar:
        tar.add(suite, arcname="suite")
    tgz = tmp_path / "cut.tgz"
    tgz.write_bytes(full.read_bytes()[:100_000])
    _refused(tool, capsys, _checkout(tmp_path), [str(tgz), "--name", "h200-bad"], f"{tgz}: not a readable .tgz (")


def test_ship_with_an_unparsable_measured_spec_names_the_toml_error(tool, suite, tmp_path, capsys):
    # it used to say "its [measured_with] calibration key is not the suite's"
    (suite / "measured_spec.toml").write_text("x = [\n")
    _refused(tool, capsys, _checkout(tmp_path), [str(suite), "--name", "h200-bad", "--ship"],
             f"{suite / 'measured_spec.toml'}: not valid TOML: ")


def test_a_non_utf8_environment_txt_is_one_line(tool, suite, tmp_path, capsys):
    (suite / "environment.txt").write_bytes(b"\xff\xfe commit")
    _refused(tool, capsys, _checkout(tmp_path), [str(suite), "--name", "h200-bad"], "environment.txt: cannot read suite text file: not UTF-8")


def test_a_bad_file_inside_a_tgz_is_named_as_archive_member(tool, suite, tmp_path, capsys):
    # the scratch copy it was read from is deleted by the time the error prints
    (suite / "measured_spec.toml").write_text("x = [\n")
    tgz = tmp_path / "suite.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(suite, arcname="suite")
    err = _refused(tool, capsys, _checkout(tmp_path), [str(tgz), "--name", "h200-bad", "--ship"],
                   f"{tgz}:suite/measured_spec.toml: not valid TOML: ")
    assert "unpacked" not in err and "/tmp" not in err.replace(str(tmp_path), "")


def test_an_archive_that_unpacks_too_large_is_refused_before_unpacking(tool, suite, tmp_path, capsys, monkeypatch):
    # a 1 GiB member of zeros compresses to 5 MB; the limit is checked on the members' sizes
    monkeypatch.setattr(tool, "MAX_SUITE_BYTES", 100_000)
    tgz = tmp_path / "suite.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(suite, arcname="suite")
    _refused(tool, capsys, _checkout(tmp_path), [str(tgz), "--name", "h200-bad"], "unpacks to over 0 MB")


def test_ship_errors_name_the_suite_files_and_the_gpu_name_is_escaped(tool, suite, tmp_path, capsys):
    import json

    cal = suite / "measured_spec.calibration.json"
    doc = json.loads(cal.read_text())
    cal.write_text(json.dumps({**doc, "schema": "x"}))
    tgz = tmp_path / "suite.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(suite, arcname="suite")
    err = _refused(tool, capsys, _checkout(tmp_path), [str(tgz), "--name", "h200-bad", "--ship"],
                   f"{tgz}:suite/measured_spec.calibration.json: schema: unknown 'x'")
    assert "spec-check" not in err
    # a GPU name with a quote: the shipped spec's source line stays valid TOML
    cal.write_text(json.dumps(doc))
    res = json.loads((suite / "results.json").read_text())
    res["environment"]["gpu_name"] = 'NVIDIA H200 "lab"'
    (suite / "results.json").write_text(json.dumps(res))
    root = _checkout(tmp_path / "ok")
    assert tool.main([str(suite), "--name", "h200-quoted", "--ship", "--root", str(root)]) == 0, capsys.readouterr().err
    from rooflinecli.hardware import load_spec_file

    spec = load_spec_file(root / "hardware_specs" / "measured" / "h200-lab.toml")
    assert 'one NVIDIA H200 "lab" (reports/h200-quoted/)' in spec.measured_with["source"]
