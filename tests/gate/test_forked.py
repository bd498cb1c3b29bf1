"""Work in a forked child (``rooflinecli.forked``) and the results reader that uses it: the same
values, the same errors and nothing left behind, forked or not. Run in a fresh interpreter: a test
worker has threads, and ``start`` forks only a single-threaded process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_start_returns_values_raises_user_errors_and_reruns_failures_here():
    got = _run("""
        import json, os
        from rooflinecli import forked
        from rooflinecli.errors import RooflineError

        def pid_and(x):
            return os.getpid(), x * 2

        def user_error():
            raise RooflineError("f.json: rows[3] lacks key 'op'")

        calls = []
        def crash():  # fails in the child; run again here it records the call and fails the same way
            calls.append(os.getpid())
            raise ZeroDivisionError("boom")

        def unpicklable():
            return lambda: os.getpid()

        out = {"can_fork": forked.can_fork(), "me": os.getpid()}
        p = forked.start(pid_and, 21)
        out["forked"] = p.forked
        out["pid"], out["value"] = p.result()
        try:
            forked.start(user_error).result()
        except RooflineError as e:
            out["error"] = str(e)
        try:
            forked.start(crash).result()
        except ZeroDivisionError as e:
            out["crash"] = [str(e), calls == [os.getpid()]]
        out["lambda_pid"] = forked.start(unpicklable).result()()
        p = forked.start(pid_and, 1)
        child = p._pid
        p.cancel()
        try:
            os.waitpid(child, os.WNOHANG) if child else None
            out["reaped"] = child is None
        except ChildProcessError:
            out["reaped"] = True
        out["inline"] = forked.start(pid_and, 5, worth_it=False).forked
        print(json.dumps(out))
    """)
    assert got["forked"] == got["can_fork"]
    assert got["value"] == 42
    assert (got["pid"] != got["me"]) == got["can_fork"]  # computed in the child where it forks
    assert got["error"] == "f.json: rows[3] lacks key 'op'"
    assert got["crash"] == ["boom", True]  # the child's failure ran again here, with its own error
    assert got["lambda_pid"] == got["me"]
    assert got["reaped"] is True
    assert got["inline"] is False


def test_results_read_in_background_equal_the_plain_read_and_keep_its_errors(tmp_path):
    from rooflinecli.gate.sim import synthetic_results

    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    synthetic_results(seed=3).save(good)
    doc = json.loads(good.read_text())
    doc["rows"][2]["p50_s"] = doc["rows"][2]["p50_s"] * 10  # a summary its samples contradict
    bad.write_text(json.dumps(doc))
    got = _run(f"""
        import json
        from rooflinecli import forked, results
        from rooflinecli.errors import RooflineError

        results.BACKGROUND_MIN_BYTES = 0  # small files: forked anyway
        p = results.load_results_in_background({str(good)!r}, beside={str(good)!r})
        out = {{"can_fork": forked.can_fork(), "forked": p._pending.forked, "same": p.result() == results.load_results({str(good)!r})}}
        try:
            results.load_results_in_background({str(bad)!r}).result()
        except RooflineError as e:
            out["error"] = str(e)
        try:
            results.load_results({str(bad)!r})
        except RooflineError as e:
            out["plain_error"] = str(e)
        results.BACKGROUND_MIN_BYTES = 1 << 40
        out["small_forked"] = results.load_results_in_background({str(good)!r})._pending.forked
        print(json.dumps(out))
    """)
    assert got["same"] is True
    assert got["error"] == got["plain_error"] and "rows[2]" in got["error"] and "never trusted" in got["error"]
    assert got["small_forked"] is False
    assert got["forked"] == got["can_fork"]


def test_baseline_update_read_beside_its_baseline_writes_what_the_serial_update_writes(tmp_path):
    from rooflinecli.gate.sim import synthetic_results

    runs = []
    for seed in (3, 4):
        p = tmp_path / f"run{seed}.json"
        synthetic_results(seed=seed).save(p)
        runs.append(str(p))
    bad = tmp_path / "bad.json"
    doc = json.loads(Path(runs[1]).read_text())
    doc["rows"][2]["p50_s"] = doc["rows"][2]["p50_s"] * 10
    bad.write_text(json.dumps(doc))
    got = _run(f"""
        import json, shutil
        from pathlib import Path
        from rooflinecli import forked, results
        from rooflinecli.errors import RooflineError
        from rooflinecli.gate import baseline as B

        out = {{"can_fork": forked.can_fork(), "forked": []}}
        plain = B._start_run_read
        def recorded(*a, **k):
            p = plain(*a, **k)
            out["forked"].append(p.forked)
            return p
        B._start_run_read = recorded
        tmp = Path({str(tmp_path)!r})
        for name, size in (("parallel", 0), ("serial", 1 << 40)):
            results.BACKGROUND_MIN_BYTES = size
            d = tmp / name
            B.update_baseline({runs[0]!r}, d, now="2026-01-01T00:00:00Z")
            out[name + "_guess"] = str(B._sniffed_baseline({runs[1]!r}, d))
            o = B.update_baseline({runs[1]!r}, d, now="2026-01-01T00:00:00Z")
            out[name] = [o.runs, o.added, (d / o.path.name).read_text()]
            try:
                B.update_baseline({str(bad)!r}, d)
            except RooflineError as e:
                out[name + "_error"] = str(e)
            out[name + "_after"] = (d / o.path.name).read_text() == out[name][2]
        print(json.dumps(out))
    """)
    assert got["parallel"][:2] == [2, True] and got["parallel"] == got["serial"]
    assert got["parallel_guess"].endswith(".json") and got["parallel_guess"] != "None"
    assert got["parallel_error"] == got["serial_error"] and "rows[2]" in got["parallel_error"]
    assert got["parallel_after"] and got["serial_after"]  # a refused run leaves the baseline as it was
    # the first update of each folder has no baseline to read beside; then forked only when big enough
    assert got["forked"] == [False, got["can_fork"], got["can_fork"], False, False, False]


def test_long_lists_written_in_two_halves_read_as_one():
    got = _run("""
        import json
        from rooflinecli import forked, output

        rows = [{"op": f"op{i}", "samples_s": [i * 1e-6, float("nan") if i == 7 else 2e-6], "nested": [{"a": i}] if i % 5 == 0 else []}
                for i in range(101)]
        doc = {"schema": "x", "rows": rows}
        output.PARALLEL_ROWS = 1 << 40
        whole = output.json_text(doc)
        output.PARALLEL_ROWS = 10
        halves = output.json_text(doc)
        print(json.dumps({"can_fork": forked.can_fork(), "same": halves == whole, "reads": json.loads(halves)["rows"][7]["samples_s"]}))
    """)
    assert got["same"] is True and got["reads"][0] == 7e-6 and got["reads"][1] is None
