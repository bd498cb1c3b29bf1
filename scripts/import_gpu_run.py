"""Bring a `scripts/gpu_suite.sh` run into the repo: its folder under reports/, and (``--ship``) its
measured spec, calibration and tuned configs where the tool uses them.

    python3 scripts/import_gpu_run.py SUITE (folder or the suite's .tgz) --name h200-2026-12-02-run4 [--ship]

1. Checks the run: ``stages.tsv`` and ``results.json`` (a ``rooflinecli.results/1`` file) must be
   there; every other output is optional and said so when missing.
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
import re
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rooflinecli.atomic import write_text_atomic  # noqa: E402
from rooflinecli.errors import RooflineError  # noqa: E402

#: a report folder name: lower-case words, digits and dashes (reports/h200-2026-11-30-run2)
NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{2,80}$")
REQUIRED = ("stages.tsv", "results.json")
OPTIONAL = ("summary.txt", "environment.txt", "measured_spec.toml", "measured_spec.calibration.json", "e2e.json",
            "validation.json", "validation-e2e.json", "gate-regress.json", "tuned")


def _suite_dir(src: Path, scratch: Path) -> Path:
    """The run's folder: ``src`` itself, or the one folder holding stages.tsv in the .tgz."""
    if src.is_dir():
        return src
    if not src.is_file():
        raise RooflineError(f"{src}: no such folder or file")
    try:
        with tarfile.open(src) as tar:
            for m in tar.getmembers():
                if m.issym() or m.islnk() or m.name.startswith("/") or ".." in Path(m.name).parts:
                    raise RooflineError(f"{src}: refusing archive member {m.name!r} (a link or a path outside the archive)")
            if hasattr(tarfile, "data_filter"):  # Python 3.12+: refuse links, devices, absolute paths
                tar.extractall(scratch, filter="data")
            else:
                tar.extractall(scratch)
    except (tarfile.TarError, OSError) as e:
        raise RooflineError(f"{src}: not a readable .tgz ({e})") from None
    found = sorted(p.parent for p in scratch.rglob("stages.tsv"))
    if len(found) != 1:
        raise RooflineError(f"{src}: expected one suite folder (with stages.tsv) in the archive, found {len(found)}")
    return found[0]


def check_run(run: Path) -> list[str]:
    """One-line errors for what a run must have; returns notes on what it lacks but may."""
    for name in REQUIRED:
        if not (run / name).exists():
            raise RooflineError(f"{run}: no {name}: not a gpu_suite.sh output folder")
    from rooflinecli.results import load_results

    load_results(run / "results.json")  # schema and rows, one line if wrong
    return [f"no {name}" for name in OPTIONAL if not (run / name).exists()]


def _gpu_name(run: Path) -> str:
    from rooflinecli.results import load_results

    return load_results(run / "results.json").gpu_name or "unknown GPU"


def readme_text(run: Path, name: str, notes: list[str]) -> str:
    """A README for reports/NAME/: what the run is, from its own files."""
    from rooflinecli.bench.suite_summary import summary

    env = (run / "environment.txt").read_text(encoding="utf-8").strip() if (run / "environment.txt").is_file() else "(no environment.txt)"
    summ = (run / "summary.txt").read_text(encoding="utf-8").strip() if (run / "summary.txt").is_file() else "\n".join(summary(run, "?"))
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
        gpu = _gpu_name(run)
        slug = tuning.gpu_slug(gpu).removeprefix("nvidia-")
        text = spec_src.read_text(encoding="utf-8")
        key = 'calibration = "measured_spec.calibration.json"'
        if key not in text:
            raise RooflineError(f"{spec_src}: its [measured_with] calibration key is not the suite's; fix the file by hand")
        text = text.replace(key, f'calibration = "{slug}-calibration.json"\nsource = "rooflinecli GPU run on one {gpu} (reports/{name}/)"')
        text = (f"# {gpu} as measured by `scripts/gpu_suite.sh` (reports/{name}/), imported with\n"
                "# scripts/import_gpu_run.py: `roofline calibrate` wrote this file and its calibration file.\n" + text)
        cal = cal_src.read_text(encoding="utf-8")
        check = scratch / "spec-check"
        check.mkdir()
        (check / f"{slug}-calibration.json").write_text(cal, encoding="utf-8")
        (check / f"{slug}.toml").write_text(text, encoding="utf-8")
        if models_for(load_spec_file(check / f"{slug}.toml")) is None:
            raise RooflineError(f"{spec_src}: names no calibration after the import")
        plan += [(Path("hardware_specs/measured") / f"{slug}-calibration.json", cal), (Path("hardware_specs/measured") / f"{slug}.toml", text)]
    tuned_dir = run / "tuned"
    for src in sorted(tuned_dir.glob("*.json")) if tuned_dir.is_dir() else []:
        text = src.read_text(encoding="utf-8")
        try:
            raw = json.loads(text)
            tuning.parse_tuned(raw, tuning.discover_autotuners(), str(raw.get("gpu")), str(raw.get("triton")))
        except (ValueError, AttributeError) as e:  # TunedFileError is a ValueError, as is bad JSON
            raise RooflineError(f"{src}: does not load against this checkout's kernels: {e}") from None
        plan.append((Path("kernels/tuned") / src.name, text))
    return plan


def readme_table_rows(run: Path) -> list[str]:
    """The README validation table's rows, from validation-e2e.json (the whole-model points)."""
    d = None
    try:
        d = json.loads((run / "validation-e2e.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ["(no validation-e2e.json: no whole-model table)"]
    s = (d or {}).get("end_to_end_full_summary") or {}
    names = {"roof": "roofline on datasheet ceilings (`--hw h200`)",
             "roof_measured": "roofline on measured ceilings (`--hw h200-measured --mode roof`)",
             "achievable": "achievable model (`--hw h200-measured`, engine `torch`)"}
    rows = []
    for key, label in names.items():
        a = (s.get(key) or {}).get("all") or {}
        if a.get("n"):
            rows.append(f"| {label} | {a['n']} | {a['median_abs_error']:.1%} | {a['p90_abs_error']:.1%} | {a['median_error']:+.1%} |")
    return rows or ["(validation-e2e.json has no whole-model summary)"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("suite", help="the suite's output folder, or its .tgz")
    p.add_argument("--name", required=True, help="the report folder's name under reports/, e.g. h200-2026-12-02-run4")
    p.add_argument("--ship", action="store_true", help="also install the measured spec, calibration and tuned configs")
    p.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)  # tests: another checkout's root
    a = p.parse_args(argv)
    root = Path(a.root)
    try:
        if not NAME.match(a.name):
            raise RooflineError(f"--name {a.name!r}: use lower-case letters, digits, dots and dashes (like h200-2026-12-02-run4)")
        dest = root / "reports" / a.name
        if dest.exists():
            raise RooflineError(f"{dest}: already there; pick another --name")
        with tempfile.TemporaryDirectory(dir=root / "reports") as scratch:
            run = _suite_dir(Path(a.suite), Path(scratch) / "unpacked")
            notes = check_run(run)
            staged = Path(scratch) / "staged"
            shutil.copytree(run, staged)
            if not (staged / "README.md").exists():
                write_text_atomic(staged / "README.md", readme_text(run, a.name, notes))
            plan = ship_plan(run, a.name, Path(scratch)) if a.ship else []
            staged.rename(dest)
        written = []
        for rel, text in plan:
            write_text_atomic(root / rel, text, make_parents=True)
            written.append(str(rel))
    except RooflineError as e:
        print(f"error: {e}", file=sys.stderr)
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
