"""Bring a `scripts/gpu_suite.sh` run into the repo: its folder under reports/, and (``--ship``) its
measured spec, calibration and tuned configs where the tool uses them.

    python3 scripts/import_gpu_run.py SUITE (folder or the suite's .tgz) --name h200-2026-12-02-run4 [--ship]

1. Checks the run: ``stages.tsv`` and ``results.json`` (a ``rooflinecli.results/1`` file) must be
   there; every other output is optional and said so when missing. Every file the import reads is
   checked before anything is copied: the suite's JSON outputs must be JSON objects (the
   validation-e2e.json summary the right shape), its text files UTF-8; a folder suite holding a
   symbolic link or anything but plain files and folders is refused, as in the .tgz. With
   ``--ship`` the spec, calibration and tuned files are loaded (step 3) before the copy too.
2. Copies it to ``reports/NAME/`` (refused if that folder exists) and writes ``README.md`` there,
   unless the run has one: what the run is (environment, commit, stages), the suite's summary,
   and a placeholder for the headline figures a person writes.
3. ``--ship``: ``measured_spec.toml`` -> ``hardware_specs/measured/<gpu>.toml`` and its calibration
   -> ``<gpu>-calibration.json`` (the ``calibration`` key re-pointed, a ``source`` naming the
   report folder), ``tuned/*.json`` -> ``kernels/tuned/``; each is loaded first (the spec and its
   achievable fit from a scratch copy; the tuned file against this checkout's autotuners), and
   nothing is shipped unless all of them load.
4. Prints the commands left: the sample report's rebuild and the README validation-table rows.

Exit 0 when done, 2 on bad input (one line, ``error: ...``); nothing is half-written: the report
folder is assembled beside its place and renamed in, shipped files are written atomically.
No torch, no GPU (the tuned-file check imports the kernels, which imports torch and triton).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import stat
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rooflinecli.output import write_text_atomic  # noqa: E402
from rooflinecli.errors import RooflineError, one_line, parse_json_text, parse_toml_text, read_user_file  # noqa: E402

#: a report folder name: lower-case words, digits and dashes (reports/h200-2026-11-30-run2)
NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{2,80}$")
REQUIRED = ("stages.tsv", "results.json")
OPTIONAL = ("summary.txt", "environment.txt", "measured_spec.toml", "measured_spec.calibration.json", "e2e.json",
            "validation.json", "validation-e2e.json", "gate-regress.json", "tuned")
#: the suite's JSON outputs (and tuned/*.json): each, when there, must be a JSON object
JSON_OUTPUTS = ("measured_spec.calibration.json", "e2e.json", "validation.json", "validation-e2e.json", "gate-regress.json")
#: the suite's text files the README is made from: each, when there, must be UTF-8 text
TEXT_OUTPUTS = ("stages.tsv", "summary.txt", "environment.txt")
#: the README validation table's rows: validation-e2e.json's end_to_end_full_summary keys
TABLE_ROWS = {"roof": "roofline on datasheet ceilings (`--hw h200`)",
              "roof_measured": "roofline on measured ceilings (`--hw h200-measured --mode roof`)",
              "achievable": "achievable model (`--hw h200-measured`, engine `torch`)"}


#: the most a suite archive may unpack to (a full run is about 2 MB; logs of a failed one more)
MAX_SUITE_BYTES = 256 * 2**20


def _suite_dir(src: Path, scratch: Path) -> Path:
    """The run's folder: ``src`` itself, or the one folder holding stages.tsv in the .tgz."""
    if src.is_dir():
        return src
    if not src.is_file():
        raise RooflineError(f"{src}: no such folder or file")
    try:
        tar = tarfile.open(src)
    except tarfile.ReadError:  # its text lists every compression tried, one line each
        raise RooflineError(f"{src}: not a readable .tgz (not a gzip/tar file)") from None
    except (tarfile.TarError, OSError, EOFError, ValueError) as e:
        raise RooflineError(f"{src}: not a readable .tgz ({one_line(e)})") from None
    try:
        with tar:
            total = 0
            for m in tar.getmembers():
                if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in Path(m.name).parts:
                    raise RooflineError(f"{src}: refusing archive member {one_line(repr(m.name))} "
                                        "(a link, a device or a path outside the archive)")
                total += m.size if m.isfile() else 0
                if total > MAX_SUITE_BYTES:  # before anything is unpacked: a few MB of zeros can hold GBs
                    raise RooflineError(f"{src}: unpacks to over {MAX_SUITE_BYTES // 2**20} MB (at member {one_line(repr(m.name))}); "
                                        "a suite's output is a few MB: refusing it")
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4+: refuse links, devices, absolute paths
                tar.extractall(scratch, filter="data")
            else:
                tar.extractall(scratch)
    except (tarfile.TarError, OSError, EOFError, ValueError, zlib.error) as e:  # a truncated or corrupt stream
        raise RooflineError(f"{src}: not a readable .tgz ({one_line(e) or type(e).__name__})") from None
    found = sorted(p.parent for p in scratch.rglob("stages.tsv"))
    if len(found) != 1:
        raise RooflineError(f"{src}: expected one suite folder (with stages.tsv) in the archive, found {len(found)}")
    return found[0]


def _check_tree(run: Path) -> None:
    """Only plain files and folders in the suite: a symbolic link (which the copy would follow to
    a file outside the run), a FIFO or a device is refused, naming it."""
    def _unreadable(e: OSError) -> None:
        raise RooflineError(f"{e.filename}: cannot read the suite folder: {e.strerror or type(e).__name__}")

    for dirpath, dirnames, filenames in os.walk(run, onerror=_unreadable):
        for n in sorted(dirnames + filenames):
            p = Path(dirpath) / n
            try:
                mode = os.lstat(p).st_mode
            except OSError as e:
                raise RooflineError(f"{p}: cannot read: {e.strerror or type(e).__name__}") from None
            if stat.S_ISLNK(mode):
                raise RooflineError(f"{p}: a symbolic link in the suite folder; refusing it (copy the file itself in)")
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise RooflineError(f"{p}: not a plain file or folder (a FIFO, socket or device); refusing it")


def _json_object(path: Path, what: str) -> dict:
    """A suite JSON output: readable, valid JSON (no NaN), and an object; else one line."""
    raw = parse_json_text(read_user_file(path, what), str(path))
    if not isinstance(raw, dict):
        raise RooflineError(f"{path}: not a {what} (a JSON {type(raw).__name__}, not an object)")
    return raw


def table_rows(d: dict, where: str) -> list[str]:
    """The README validation table's rows from validation-e2e.json's ``end_to_end_full_summary``;
    a summary of the wrong shape is one line naming the key."""
    s = d.get("end_to_end_full_summary")
    if s is None:
        s = {}
    if not isinstance(s, dict):
        raise RooflineError(f"{where}: end_to_end_full_summary must be an object")
    rows = []
    for key, label in TABLE_ROWS.items():
        per = s.get(key)
        if per is None:
            continue
        if not isinstance(per, dict) or not isinstance(per.get("all", {}), (dict, type(None))):
            raise RooflineError(f"{where}: end_to_end_full_summary.{key} must be an object with an 'all' object")
        a = per.get("all") or {}
        n = a.get("n")
        if not n:
            continue
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise RooflineError(f"{where}: end_to_end_full_summary.{key}.all.n must be a count")
        for f in ("median_abs_error", "p90_abs_error", "median_error"):
            if not isinstance(a.get(f), (int, float)) or isinstance(a.get(f), bool):
                raise RooflineError(f"{where}: end_to_end_full_summary.{key}.all.{f} must be a number")
        rows.append(f"| {label} | {n} | {a['median_abs_error']:.1%} | {a['p90_abs_error']:.1%} | {a['median_error']:+.1%} |")
    return rows


def check_run(run: Path) -> list[str]:
    """One-line errors for what a run must have and for any file the import reads that would not
    read (all before anything is copied); returns notes on what it lacks but may."""
    for name in REQUIRED:
        if not (run / name).exists():
            raise RooflineError(f"{run}: no {name}: not a gpu_suite.sh output folder")
    _check_tree(run)
    from rooflinecli.results import load_results

    load_results(run / "results.json")  # schema and rows, one line if wrong
    for name in TEXT_OUTPUTS:
        if (run / name).exists():
            read_user_file(run / name, "suite text file")  # UTF-8, a plain file
    for name in JSON_OUTPUTS:
        if (run / name).exists():
            d = _json_object(run / name, f"suite output ({name})")
            if name == "validation-e2e.json":
                table_rows(d, str(run / name))
    tuned_dir = run / "tuned"
    if tuned_dir.exists() and not tuned_dir.is_dir():
        raise RooflineError(f"{tuned_dir}: not a folder (the suite's tuned configs)")
    for src in sorted(tuned_dir.glob("*.json")) if tuned_dir.is_dir() else []:
        _json_object(src, "tuned-config file")
    return [f"no {name}" for name in OPTIONAL if not (run / name).exists()]


def _gpu_name(run: Path) -> str:
    from rooflinecli.results import load_results

    return load_results(run / "results.json").gpu_name or "unknown GPU"


def readme_text(run: Path, name: str, notes: list[str]) -> str:
    """A README for reports/NAME/: what the run is, from its own files."""
    from rooflinecli.bench.suite_summary import summary

    env = read_user_file(run / "environment.txt", "suite text file").strip() if (run / "environment.txt").is_file() else "(no environment.txt)"
    summ = read_user_file(run / "summary.txt", "suite text file").strip() if (run / "summary.txt").is_file() else "\n".join(summary(run, "?"))
    files = sorted(p.name + ("/" if p.is_dir() else "") for p in run.iterdir())
    lines = [
        f"# {name}: `scripts/gpu_suite.sh` on one {_gpu_name(run)}",
        "",
        "Imported with `scripts/import_gpu_run.py`. Environment as the suite recorded it:",
        "",
        "```", env, "```",
        "",
        "Files: " + ", ".join(f"`{f}`" for f in files) + ".",
    ]
    if notes:
        lines += ["", "Not in this run: " + "; ".join(notes) + "."]
    lines += [
        "",
        "## Headline figures",
        "",
        "TODO (a person): what the run shows and what is known to be wrong in it, with figures.",
        "",
        "## The suite's own summary",
        "",
        "```", summ, "```",
        "",
    ]
    return "\n".join(lines)


def ship_plan(run: Path, name: str, scratch: Path) -> list[tuple[Path, str]]:
    """(path under the checkout, text) for the measured spec + calibration and the tuned configs,
    each loaded back first (the spec with its achievable fit, from a scratch copy; the tuned
    file against this checkout's autotuners): nothing is written until all of them load."""
    from kernels import tuning
    from rooflinecli.achievable import models_for
    from rooflinecli.hardware import load_spec_file

    plan: list[tuple[Path, str]] = []
    spec_src, cal_src = run / "measured_spec.toml", run / "measured_spec.calibration.json"
    if spec_src.is_file():
        if not cal_src.is_file():
            raise RooflineError(f"{run}: measured_spec.toml without measured_spec.calibration.json: nothing to fit")
        gpu = one_line(_gpu_name(run))  # written into the TOML text below: one line, escaped there
        slug = tuning.gpu_slug(gpu).removeprefix("nvidia-")
        text = read_user_file(spec_src, "measured spec")
        raw = parse_toml_text(text, str(spec_src))  # a file that does not parse says so, not "no key"
        mw = raw.get("measured_with")
        key = 'calibration = "measured_spec.calibration.json"'
        if not isinstance(mw, dict) or mw.get("calibration") != "measured_spec.calibration.json" or key not in text:
            raise RooflineError(f"{spec_src}: its [measured_with] calibration key is not the suite's; fix the file by hand")
        source = json.dumps(f"rooflinecli GPU run on one {gpu} (reports/{name}/)")  # JSON's escapes are TOML's
        text = text.replace(key, f'calibration = "{slug}-calibration.json"\nsource = {source}')
        text = (f"# {gpu} as measured by `scripts/gpu_suite.sh` (reports/{name}/), imported with\n"
                "# scripts/import_gpu_run.py: `roofline calibrate` wrote this file and its calibration file.\n" + text)
        cal = read_user_file(cal_src, "calibration file")
        check = scratch / "spec-check"
        check.mkdir()
        (check / f"{slug}-calibration.json").write_text(cal, encoding="utf-8")
        (check / f"{slug}.toml").write_text(text, encoding="utf-8")
        try:  # errors name the suite's files, not the scratch copies (deleted by the time they print)
            fitted = models_for(load_spec_file(check / f"{slug}.toml"))
        except RooflineError as e:
            raise RooflineError(str(e).replace(str(check / f"{slug}-calibration.json"), str(cal_src))
                                .replace(str(check / f"{slug}.toml"), str(spec_src))) from None
        if fitted is None:
            raise RooflineError(f"{spec_src}: names no calibration after the import")
        plan += [(Path("hardware_specs/measured") / f"{slug}-calibration.json", cal), (Path("hardware_specs/measured") / f"{slug}.toml", text)]
    tuned_dir = run / "tuned"
    for src in sorted(tuned_dir.glob("*.json")) if tuned_dir.is_dir() else []:
        text = read_user_file(src, "tuned-config file")
        raw = _json_object(src, "tuned-config file")
        try:
            tuning.parse_tuned(raw, tuning.discover_autotuners(), str(raw.get("gpu")), str(raw.get("triton")))
            tuning.parse_choices(raw, tuning.discover_choices())
        except ValueError as e:  # TunedFileError is a ValueError
            raise RooflineError(f"{src}: does not load against this checkout's kernels: {one_line(e)}") from None
        plan.append((Path("kernels/tuned") / src.name, text))
    return plan


def readme_table_rows(run: Path) -> list[str]:
    """The README validation table's rows, from validation-e2e.json (the whole-model points);
    ``check_run`` has checked the file, so this never raises."""
    path = run / "validation-e2e.json"
    if not path.exists():
        return ["(no validation-e2e.json: no whole-model table)"]
    try:
        rows = table_rows(_json_object(path, "suite output (validation-e2e.json)"), str(path))
    except RooflineError as e:
        return [f"(no whole-model table: {e})"]
    return rows or ["(validation-e2e.json has no whole-model summary)"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("suite", help="the suite's output folder, or its .tgz")
    p.add_argument("--name", required=True, help="the report folder's name under reports/, e.g. h200-2026-12-02-run4")
    p.add_argument("--ship", action="store_true", help="also install the measured spec, calibration and tuned configs")
    p.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)  # tests: another checkout's root
    a = p.parse_args(argv)
    root = Path(a.root)
    unpacked = None  # the archive's scratch folder: errors name its files as ARCHIVE:MEMBER
    try:
        if not NAME.match(a.name):
            raise RooflineError(f"--name {a.name!r}: use lower-case letters, digits, dots and dashes (like h200-2026-12-02-run4)")
        if not (root / "reports").is_dir():
            raise RooflineError(f"{root / 'reports'}: no such folder (is --root a checkout?)")
        dest = root / "reports" / a.name
        if dest.exists():
            raise RooflineError(f"{dest}: already there; pick another --name")
        with tempfile.TemporaryDirectory(dir=root / "reports") as scratch:
            unpacked = Path(scratch) / "unpacked"
            run = _suite_dir(Path(a.suite), unpacked)
            notes = check_run(run)  # everything the import reads, before anything is copied
            plan = ship_plan(run, a.name, Path(scratch)) if a.ship else []  # loads all it ships, in scratch
            readme = None if (run / "README.md").exists() else readme_text(run, a.name, notes)
            staged = Path(scratch) / "staged"
            shutil.copytree(run, staged)
            if readme is not None:
                write_text_atomic(staged / "README.md", readme)
            staged.rename(dest)
        written = []
        for rel, text in plan:
            write_text_atomic(root / rel, text, make_parents=True)
            written.append(str(rel))
    except RooflineError as e:
        text = str(e)
        if unpacked is not None:  # the scratch copy is gone by now: name the member in the archive
            text = text.replace(f"{unpacked}{os.sep}", f"{a.suite}:")
        print(f"error: {one_line(text)}", file=sys.stderr)
        return 2
    print(f"reports/{a.name}/: imported" + (f" ({'; '.join(notes)})" if notes else ""))
    for w in written:
        print(f"shipped {w}")
    print("next:")
    print(f"  roofline report --hw h200,h100-sxm --results reports/{a.name}/results.json "
          f"--baseline tests/fixtures/h200-2026-11-30/results.json --out reports/roofline-h200-2026-11-30.html")
    print("  README validation table rows (between the validation markers):")
    for row in readme_table_rows(dest):
        print(f"    {row}")
    print(f"  write reports/{a.name}/README.md's headline figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
