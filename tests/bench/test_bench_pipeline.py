"""``roofline bench`` end to end on the CPU: correctness check -> wall-clock timing -> rows -> JSON,
under the Triton interpreter on the kernels' "test" cases; a red check is never timed; without a
GPU the command says so in one line."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest
import torch
from typer.testing import CliRunner

from kernels.registry import Case, KernelOp, load_op
from kernels.testing import compare
from rooflinecli.bench.runner import DEVICE_COMPARE_MIN_ELEMENTS, BenchOptions, BenchState, Bencher, compare_output, make_results, run_bench
from rooflinecli.cli import app
from rooflinecli.hardware import get_spec
from rooflinecli.results import load_results

runner = CliRunner()


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "results.json"
    r = runner.invoke(app, ["bench", "--device", "cpu", "--suite", "test", "--kernel", "copy,rmsnorm", "--hw", "h200", "--out", str(out)])
    return r, out


def test_bench_on_cpu_writes_results_that_load(bench_run):
    r, out = bench_run
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.output
    res = load_results(out)
    expected = {(op, c.shape, c.dtype) for op in ("copy", "rmsnorm") for c in load_op(op).cases["test"]}
    assert {(row.op, row.shape, row.dtype) for row in res.rows} == expected
    assert {row.impl for row in res.rows} == {"triton", "torch"}
    assert len(res.rows) == 2 * len(expected)
    assert res.hardware_spec == "h200" and res.suite == "test"
    for key in ("gpu_name", "torch", "triton", "python", "date_utc"):
        assert res.environment.get(key), key


def test_bench_rows_carry_samples_check_and_predictions(bench_run):
    _, out = bench_run
    h200 = get_spec("h200")
    for row in load_results(out).rows:
        assert row.correct, row.note
        assert len(row.samples_s) >= 10 and all(s > 0 for s in row.samples_s)
        assert row.p20_s <= row.p50_s <= row.p80_s
        assert row.method == "wall_clock"
        assert row.max_rel_error is not None and row.max_rel_error <= load_op(row.op).tolerance[row.dtype]
        flops, bytes_ = load_op(row.op).cost(Case(row.shape, row.params, row.dtype))
        assert (row.flops, row.bytes) == (flops, bytes_)
        roof = max(flops / h200.peak_flops_per_s(row.dtype), bytes_ / h200.memory_bandwidth_bytes_per_s)
        assert row.predicted_s_datasheet == pytest.approx(roof)
        assert row.predicted_s_measured is None
        assert row.pct_of_roof == pytest.approx(roof / row.p50_s * 100)
        assert row.achieved_gb_per_s == pytest.approx(bytes_ / row.p50_s / 1e9)
        assert row.model_kind == load_op(row.op).model_kind


def _broken_op(calls: dict) -> KernelOp:
    """The copy op with a launcher that gets every other element wrong (or raises)."""
    copy = load_op("copy")

    def run(src):
        calls["run"] += 1
        if calls.get("raise"):
            raise ValueError("launcher exploded")
        out = src.clone()
        out[::2] = 0
        return out

    return replace(copy, name="broken", run=run, baseline=None, baselines={})


def test_a_red_check_is_recorded_and_not_timed(tmp_path):
    calls = {"run": 0}
    op = _broken_op(calls)
    case = Case("N1000", {"n": 1000}, "fp32")
    opts = BenchOptions(kernels=("broken",), suite="test", device="cpu", hw=get_spec("h200"))
    rows = Bencher(opts).bench_case(op, case)
    assert len(rows) == 1
    row = rows[0]
    assert not row.correct and row.samples_s == () and row.method == "untimed"
    assert "rel error" in row.note and "elements differ" in row.note
    assert row.max_rel_error > 0
    assert calls["run"] == 1  # the check's call only: never timed

    assert row.tuning == "fixed"  # it ran, and no autotuner was involved
    calls["raise"] = True
    row = Bencher(opts).bench_case(op, case)[0]
    assert not row.correct and "raised ValueError: launcher exploded" in row.note
    assert row.tuning == ""  # raised before any kernel: unknown

    # an untimed row survives the results file
    res = make_results(opts, BenchState(rows=[row]), {"gpu_name": "cpu"}, "2026-01-01T00:00:00Z")
    res.save(tmp_path / "r.json")
    back = load_results(tmp_path / "r.json").rows[0]
    assert not back.correct and back.samples_s == () and back.note == row.note
    assert json.loads((tmp_path / "r.json").read_text())["rows"][0]["p50_s"] is None


def test_run_bench_times_good_ops_beside_a_broken_one(monkeypatch):
    import kernels.registry as registry

    calls = {"run": 0}
    broken = _broken_op(calls)
    broken = replace(broken, cases={"test": (Case("N63", {"n": 63}, "fp32"),)})
    good = load_op("copy")
    good = replace(good, cases={"test": (Case("N63", {"n": 63}, "fp32"),)})
    monkeypatch.setattr(registry, "load_op", lambda name: {"broken": broken, "copy": good}[name])
    seen = []
    checkpoints = []
    state = run_bench(
        BenchOptions(kernels=("copy", "broken"), suite="test", device="cpu", min_samples=10),
        on_case=lambda op, case, i, n: seen.append((op, case, i, n)),
        on_checkpoint=lambda s: checkpoints.append(len(s.rows)),
    )
    assert [(s[0], s[2], s[3]) for s in seen] == [("copy", 0, 2), ("broken", 1, 2)]
    assert checkpoints == [2, 3, 3]  # after each case (copy: two rows, broken: one), then at the end
    by = {(r.op, r.impl): r for r in state.rows}
    assert by[("copy", "triton")].correct and len(by[("copy", "triton")].samples_s) == 10
    assert by[("copy", "torch")].correct
    assert not by[("broken", "triton")].correct and calls["run"] == 1


def test_time_budget_skips_the_rest(monkeypatch):
    import kernels.registry as registry

    good = replace(load_op("copy"), cases={"test": (Case("N63", {"n": 63}, "fp32"), Case("N64", {"n": 64}, "fp32"))})
    monkeypatch.setattr(registry, "load_op", lambda name: good)
    state = run_bench(BenchOptions(kernels=("copy",), suite="test", device="cpu", time_budget_s=0.0))
    assert len(state.skipped) >= 1 and "time budget" in state.skipped[-1]["reason"]


def test_bench_without_gpu_is_one_line_exit_2(tmp_path):
    assert not torch.cuda.is_available()
    for args in (["bench", "--out", str(tmp_path / "r.json")], ["calibrate", "--out", str(tmp_path / "s.toml")], ["e2e", "--results", str(tmp_path / "r.json")]):
        r = runner.invoke(app, args)
        assert r.exit_code == 2, (args, r.output)
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: no CUDA GPU found"), r.output
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "s.toml").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--kernel", "gemmm"], "unknown kernel 'gemmm'"),
        (["--samples", "10"], "--samples must be >= 20"),
        (["--hw", "h10"], "unknown GPU 'h10'"),
        (["--kernel", "gemm", "--shape", "M7-*"], "no cases in suite 'test' matching --shape M7-* for kernels gemm"),
        (["--shape", "M1\x01"], "--shape: pattern"),
    ],
)
def test_bench_bad_options_are_one_line_errors(tmp_path, args, needle):
    r = runner.invoke(app, ["bench", "--device", "cpu", "--suite", "test", "--out", str(tmp_path / "r.json"), *args])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and needle in r.output


def test_shape_patterns_pick_cases_by_id(tmp_path):
    from rooflinecli.bench.runner import parse_shapes, select_cases

    gemm = load_op("gemm")
    assert parse_shapes(None) == () and parse_shapes(" , ") == ()
    assert [c.id for c in select_cases(gemm, "full", parse_shapes("M128-*, M8192-*-fp8"))] == [
        "M8192-N8192-K8192-fp8", "M128-N8192-K8192-bf16"]
    assert len(select_cases(gemm, "full", ())) == len(gemm.cases["full"])
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["bench", "--device", "cpu", "--allow-cpu", "--suite", "test", "--kernel", "gemm,copy",
                            "--shape", "M1-*,M5-*", "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert sorted({(row.op, row.shape) for row in load_results(out).rows}) == [("gemm", "M1-N123-K496"), ("gemm", "M5-N64-K256")]


def test_large_outputs_compare_on_device_like_the_cpu_report():
    g = torch.Generator().manual_seed(5)
    ref = torch.randn(DEVICE_COMPARE_MIN_ELEMENTS + 3, generator=g)
    out = ref + 2e-3 * torch.randn(ref.shape, generator=g)
    fast, slow = compare_output(out, ref, 1e-2), compare(out, ref, 1e-2)
    assert fast.ok and slow.ok and fast.rel_error == pytest.approx(slow.rel_error, rel=1e-9)
    out[7] = float("nan")
    c = compare_output(out, ref, 1e-2)
    assert not c.ok and "1 NaN and 0 inf" in c.message and "flat index 7" in c.message
    bad = ref.clone()
    bad[DEVICE_COMPARE_MIN_ELEMENTS - 5 :] *= 1e4  # the last elements only, past the first chunk's start
    c, slow = compare_output(bad, ref, 1e-2), compare(bad, ref, 1e-2)
    assert not c.ok and not slow.ok and c.rel_error == pytest.approx(slow.rel_error, rel=1e-9)
    n_slow = int(slow.message.split("; ")[1].split(" of ")[0])  # the CPU report's count
    assert f"; {n_slow} of {bad.numel()} elements differ" in c.message and n_slow >= 1
    first = int((bad - ref).abs().gt(1e-2 * ref.abs().max()).nonzero()[0])
    assert f"flat index {first};" in c.message and first >= DEVICE_COMPARE_MIN_ELEMENTS - 5


def test_a_time_budget_interleaves_the_kernels_and_rows_come_back_in_suite_order(monkeypatch):
    """Under a budget the cases run round-robin (every kernel gets its first shapes timed before
    any gets its last), and the rows are stored in suite order."""
    import kernels.registry as registry
    from rooflinecli.bench.runner import plan_cases

    cases = {"test": tuple(Case(f"N{n}", {"n": n}, "fp32") for n in (63, 64, 65))}
    a = replace(load_op("copy"), name="a", cases=cases)
    b = replace(load_op("copy"), name="b", cases={"test": cases["test"][:1]})
    assert [(op.name, c.shape) for op, c in plan_cases([a, b], "test")] == [("a", "N63"), ("a", "N64"), ("a", "N65"), ("b", "N63")]
    assert [(op.name, c.shape) for op, c in plan_cases([a, b], "test", interleave=True)] == [("a", "N63"), ("b", "N63"), ("a", "N64"), ("a", "N65")]
    monkeypatch.setattr(registry, "load_op", lambda name: {"a": a, "b": b}[name])
    seen = []
    state = run_bench(
        BenchOptions(kernels=("a", "b"), suite="test", device="cpu", time_budget_s=600.0, baseline=False),
        on_case=lambda op, case, i, n: seen.append((op, case)),
    )
    assert seen == [("a", "N63-fp32"), ("b", "N63-fp32"), ("a", "N64-fp32"), ("a", "N65-fp32")]
    assert [(r.op, r.shape) for r in state.rows] == [("a", "N63"), ("a", "N64"), ("a", "N65"), ("b", "N63")]


def test_a_lost_cuda_context_skips_the_remaining_cases(monkeypatch):
    """After a sticky CUDA error every later call fails: the rest are recorded as skipped."""
    import kernels.registry as registry
    import rooflinecli.bench.runner as runner_mod
    from rooflinecli.bench.timing import time_wall_clock

    class FakeCudaBencher(Bencher):
        def __init__(self, opts):
            super().__init__(opts)
            self.cuda = True  # behave as on a GPU whose context just died

        def sync(self):
            pass

        def time(self, fn, rotating):
            return time_wall_clock(fn, samples=10)

        def context_alive(self):
            return False

    def crash(src):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    cases = {"test": (Case("N63", {"n": 63}, "fp32"), Case("N64", {"n": 64}, "fp32"))}
    crashing = replace(load_op("copy"), name="crashing", run=crash, cases=cases)
    good = replace(load_op("copy"), cases=cases)
    monkeypatch.setattr(registry, "load_op", lambda name: {"crashing": crashing, "copy": good}[name])
    monkeypatch.setattr(runner_mod, "Bencher", FakeCudaBencher)
    state = run_bench(BenchOptions(kernels=("crashing", "copy"), suite="test", device="cpu"))
    assert [(r.op, r.shape, r.correct) for r in state.rows if r.impl == "triton"] == [("crashing", "N63", False)]
    assert [(s["op"], s["case"]) for s in state.skipped] == [("crashing", "N64-fp32"), ("copy", "N63-fp32"), ("copy", "N64-fp32")]
    assert all("CUDA context was lost at crashing N63-fp32" in s["reason"] for s in state.skipped)


# ------------------------------------------------------------------------------------------------
# the new row fields, fair baselines, committed tuning, crosscheck, old files
# ------------------------------------------------------------------------------------------------


def test_rows_store_host_time_tuning_and_backend(bench_run):
    _, out = bench_run
    for row in load_results(out).rows:
        assert row.host_us_per_call is not None and row.host_us_per_call > 0
        if row.impl == "triton":
            assert row.tuning == "fixed" and row.config == {}  # no autotuner runs under the interpreter
        else:  # copy names its candidates (the chunked one declines these small tensors); rmsnorm has one baseline
            assert row.backend == ("copy_" if row.op == "copy" else "") and row.tuning == ""


def _sleepy(seconds: float, wrong: bool = False):
    def make(src):
        def call():
            time.sleep(seconds)
            out = src.clone()
            if wrong:
                out[0] += 1
            return out

        return call

    return make


def test_the_fastest_baseline_candidate_is_the_torch_row():
    """Every candidate is checked like ours; the fastest green one is the row (its backend named),
    the note lists the others: timed ones with their median, the rest with why not."""
    copy = load_op("copy")
    cands = {
        "slow": _sleepy(0.004),
        "fast": _sleepy(0.0),
        "wrong": _sleepy(0.0, wrong=True),
        "absent": lambda src: None,
        "broken": lambda src: 1 / 0,
    }
    op = replace(copy, baselines=cands)
    case = Case("N1000", {"n": 1000}, "fp32")
    rows = Bencher(BenchOptions(kernels=("copy",), suite="test", device="cpu", min_samples=20)).bench_case(op, case)
    torch_row = next(r for r in rows if r.impl == "torch")
    assert torch_row.correct and torch_row.backend == "fast"
    assert torch_row.p50_s < 0.004
    note = torch_row.note
    slow_us = float(note.split("slow ")[1].split(" us")[0])
    assert slow_us >= 4000
    assert "wrong not timed (rel error" in note
    assert "absent" not in note  # a path that does not apply to these inputs is not news
    assert "broken not timed (setup raised ZeroDivisionError" in note
    # every candidate red: an untimed torch row that says why for each
    op = replace(copy, baselines={"wrong": _sleepy(0.0, wrong=True), "absent": lambda src: None})
    torch_row = next(r for r in Bencher(BenchOptions(kernels=("copy",), suite="test", device="cpu")).bench_case(op, case) if r.impl == "torch")
    assert not torch_row.correct and "wrong: rel error" in torch_row.note and "absent: not available" in torch_row.note
    assert "other baselines" not in torch_row.note and torch_row.samples_s == ()


def test_the_chosen_baseline_is_timed_again_and_only_it_is_crosschecked():
    """The minimum of several noisy medians is biased low, so the chosen candidate is measured a
    second time and that measurement is the row; do_bench_cudagraph runs once per row, on it."""
    from rooflinecli.bench.timing import Timing

    copy = load_op("copy")
    firsts = {"a": 3e-3, "b": 2e-3, "c": 5e-3}  # b wins the choosing pass
    timed: list = []
    crosschecked: list = []

    class Scripted(Bencher):
        def time(self, fn, rotating):
            backend = fn.backend if hasattr(fn, "backend") else "ours"
            timed.append(backend)
            t = firsts.get(backend, 1e-3) if timed.count(backend) == 1 else 2.5e-3
            return Timing((t,) * 20, "wall_clock", host_us_per_call=1.0)

        def crosscheck(self, fn):
            crosschecked.append(getattr(fn, "backend", "ours"))
            return 2.4e-3

    def tagged(name):
        def make(src):
            def call():
                return src.clone()

            call.backend = name
            return call

        return make

    op = replace(copy, baselines={name: tagged(name) for name in firsts})
    case = Case("N1000", {"n": 1000}, "fp32")
    bencher = Scripted(BenchOptions(kernels=("copy",), suite="test", device="cpu", crosscheck=True))
    rows = bencher.bench_case(op, case)
    torch_row = next(r for r in rows if r.impl == "torch")
    assert timed == ["ours", "a", "b", "c", "b"]
    assert crosschecked == ["ours", "b"]
    assert torch_row.backend == "b" and torch_row.p50_s == pytest.approx(2.5e-3)  # the second measurement
    assert "b 2000 us when chosen, then re-timed" in torch_row.note
    assert "a 3000 us" in torch_row.note and "c 5000 us" in torch_row.note
    assert "ours / it = 1.042" in torch_row.note
    # a single candidate is timed once and cross-checked once
    timed.clear(), crosschecked.clear()
    rows = bencher.bench_case(replace(copy, baselines={"a": tagged("a")}), case)
    assert timed == ["ours", "a"] and crosschecked == ["ours", "a"]
    assert next(r for r in rows if r.impl == "torch").p50_s == pytest.approx(3e-3)


def test_on_a_gpu_the_crosscheck_is_bracketed_by_our_own_samples():
    """With --crosscheck on a GPU, do_bench_cudagraph runs inside the measurement (timing's
    ``between``): its ratio is taken against our samples just before and after it, and the row's
    median ratio is kept beside it. A single baseline candidate is measured once, bracketed."""
    from rooflinecli.bench.timing import Bracket, Timing

    brackets: list = []

    class GpuLike(Bencher):
        def sync(self):
            pass

        def time(self, fn, rotating, between=None):
            assert between is not None  # every timed row is cross-checked this way
            value = between()
            brackets.append(getattr(fn, "backend", "ours"))
            return Timing((1.0e-3,) * 20, "cuda_graph", bracket=Bracket(value, (1.10e-3,) * 10, (1.12e-3,) * 10))

        def crosscheck(self, fn):
            return 1.1e-3

    def only(src):
        def call():
            return src.clone()

        call.backend = "only"
        return call

    bencher = GpuLike(BenchOptions(kernels=("copy",), suite="test", device="cpu", crosscheck=True))
    bencher.cuda = True
    op = replace(load_op("copy"), baselines={"only": only})
    rows = bencher.bench_case(op, Case("N1000", {"n": 1000}, "fp32"))
    assert brackets == ["ours", "only"]  # one measurement each
    assert len(bencher.crosschecks) == 2
    for c, row in zip(bencher.crosschecks, rows):
        assert c["ours_us"] == pytest.approx(1000) and c["ours_around_us"] == pytest.approx(1110)
        assert c["ratio"] == pytest.approx(1.11 / 1.1) and c["ratio_row"] == pytest.approx(1.0 / 1.1)
        assert "ours / it = 1.009 with our samples just before and after it, 1110 us; the row's median / it = 0.909" in row.note


def test_on_a_gpu_ours_and_the_chosen_baseline_are_also_timed_in_pairs(monkeypatch, tmp_path):
    """After the separate measurements, ours and the chosen baseline run in interleaved replay
    pairs (timing.paired_ratios, ours first): its median speedup goes to extra.bench.paired and
    the torch row's note; --no-paired (paired=False) skips it."""
    import rooflinecli.bench.timing as timing_mod
    from rooflinecli.bench.timing import Timing

    seen: list = []

    def fake_pairs(fns_a, fns_b, *, pairs):
        seen.append(([f() for f in fns_a], [getattr(f, "backend", "?") for f in fns_b], pairs))
        return [1.05, 1.03, 1.04, 1.20, 1.04]

    monkeypatch.setattr(timing_mod, "paired_ratios", fake_pairs)

    class GpuLike(Bencher):
        def sync(self):
            pass

        def time(self, fn, rotating, between=None):
            return Timing((1.0e-3,) * 20, "cuda_graph")

    def fast(src):
        def call():
            return src.clone()

        call.backend = "fast"
        return call

    op = replace(load_op("copy"), baselines={"fast": fast})
    case = Case("N1000", {"n": 1000}, "fp32")
    bencher = GpuLike(BenchOptions(kernels=("copy",), suite="test", device="cpu"))
    bencher.cuda = True
    rows = bencher.bench_case(op, case)
    assert len(seen) == 1 and seen[0][1] == ["fast"] and seen[0][2] == 20
    (p,) = bencher.paired
    assert p["op"] == "copy" and p["shape"] == "N1000" and p["backend"] == "fast" and p["pairs"] == 5
    assert p["speedup"] == pytest.approx(1.04)
    torch_row = next(r for r in rows if r.impl == "torch")
    assert "paired with ours (5 interleaved replay pairs): this / ours = 1.040" in torch_row.note
    state = BenchState(rows=list(rows), paired=list(bencher.paired))
    extra = make_results(bencher.opts, state, {"gpu_name": "NVIDIA H200"}, "2026-11-30T00:00:00Z").extra["bench"]
    assert extra["paired"] == bencher.paired
    off = GpuLike(BenchOptions(kernels=("copy",), suite="test", device="cpu", paired=False))
    off.cuda = True
    off.bench_case(op, case)
    assert len(seen) == 1 and off.paired == []


def test_on_a_gpu_the_direct_launch_path_is_checked_too(monkeypatch):
    """The timed calls launch through kernels/launch.py's direct path, which a plan such as gemm's
    reaches at its fifth call (Recorder, autotuner, kept, self-check, direct): bench checks calls
    until one ran on the direct path alone, and a wrong one is a red row."""
    import rooflinecli.bench.runner as runner

    calls = {"n": 0, "wrong_from": 5}
    copy = load_op("copy")
    # (normal, direct) launches through kernels.launch after call n, as gemm's plan makes them
    monkeypatch.setattr(runner, "launch_counts", lambda: (max(0, min(calls["n"], 4) - 2), max(0, calls["n"] - 4)))

    def run(src):
        calls["n"] += 1
        out = copy.run(src)
        if calls["n"] >= calls["wrong_from"]:  # Triton's path right, the direct path wrong
            out[0] += 1
        return out

    class GpuLike(Bencher):
        def sync(self):
            pass

    bencher = GpuLike(BenchOptions(kernels=("copy",), suite="test", device="cpu", baseline=False))
    bencher.cuda = True
    (row,) = bencher.bench_case(replace(copy, run=run), Case("N1000", {"n": 1000}, "fp32"))
    assert not row.correct and row.method == "untimed" and calls["n"] == 5
    assert row.note.startswith("direct launch path (kernels/launch.py): rel error")
    calls.update(n=0, wrong_from=10**9)  # right on every call: checked up to the first direct one, then timed
    bencher.time = lambda fn, rotating, between=None: __import__("rooflinecli.bench.timing", fromlist=["Timing"]).Timing((1e-3,) * 20, "cuda_graph")
    (row,) = bencher.bench_case(replace(copy, run=run), Case("N1000", {"n": 1000}, "fp32"))
    assert row.correct and calls["n"] == 5


def test_direct_path_checks_stop_at_the_first_call_without_a_normal_launch(monkeypatch):
    import rooflinecli.bench.runner as runner
    from rooflinecli.bench.runner import Check, check_direct_path

    counts = iter([(0, 0), (1, 0), (1, 0), (2, 0), (2, 0), (2, 1), (2, 1), (3, 2)])  # before/after each call
    monkeypatch.setattr(runner, "launch_counts", lambda: next(counts))
    n = {"calls": 0}

    def ok():
        n["calls"] += 1
        return Check(True, 0.0, "ok")

    # call 1 launched normally, call 2 too, call 3 directly only; call 4 (direct and normal) never runs
    assert check_direct_path(ok) == (Check(True, 0.0, "ok"), True) and n["calls"] == 3
    # no launch through kernels.launch at all (torch-only, or the interpreter): every call is checked
    monkeypatch.setattr(runner, "launch_counts", lambda: (0, 0))
    n["calls"] = 0
    assert check_direct_path(ok, calls=4) == (Check(True, 0.0, "ok"), False) and n["calls"] == 4


def _toy_op(bench_calls: list):
    """A copy-like op launched through a real triton.autotune kernel (its benchmark stubbed)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    def do_bench(fn, quantiles=None, **kw):
        bench_calls.append(1)
        return [1.0, 1.0, 1.0]

    configs = [triton.Config({"BLOCK": 32}, num_warps=4, num_stages=2), triton.Config({"BLOCK": 64}, num_warps=4, num_stages=3)]
    at = triton.autotune(configs=configs, key=["n"], do_bench=do_bench)(_k)

    def run(src):
        out = torch.full_like(src, float("nan"))
        n = src.numel()
        at[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](src, out, n)
        return out

    return replace(load_op("copy"), name="toy", run=run, baseline=None), at


def test_committed_configs_are_used_and_a_bad_file_falls_back_to_autotuning(tmp_path, monkeypatch):
    import kernels.tuning as tuning

    bench_calls: list = []
    op, at = _toy_op(bench_calls)
    monkeypatch.setattr(tuning, "discover_autotuners", lambda modules=None: {"toy._at": at})
    case = Case("N1000", {"n": 1000}, "fp32")
    key = [1000, "torch.float32", "torch.float32"]
    good = tmp_path / "nvidia-h200-triton.json"
    doc = {"schema": tuning.TUNED_SCHEMA, "gpu": "NVIDIA H200", "triton": __import__("triton").__version__,
           "autotuners": {"toy._at": [{"key": key, "config": {"kwargs": {"BLOCK": 64}, "num_warps": 4, "num_stages": 3}}]}}
    good.write_text(json.dumps(doc))
    opts = BenchOptions(kernels=("toy",), suite="test", device="cpu", tuned_file=str(good), gpu_name="NVIDIA H200", baseline=False)
    bencher = Bencher(opts)
    assert bencher.tuned_info["status"] == "applied"
    (row,) = bencher.bench_case(op, case)
    assert row.correct and row.tuning == "committed" and bench_calls == []
    assert row.config == {"toy._at": {"kwargs": {"BLOCK": 64}, "num_warps": 4, "num_stages": 3}}

    at.cache.clear()
    doc["gpu"] = "NVIDIA A100-SXM4-80GB"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    bencher = Bencher(replace(opts, tuned_file=str(other)))
    assert bencher.tuned_info["status"] == "rejected"
    assert "tuned on GPU 'NVIDIA A100-SXM4-80GB', this is 'NVIDIA H200'" in bencher.tuned_info["message"]
    (row,) = bencher.bench_case(op, case)
    assert row.correct and row.tuning == "autotuned" and bench_calls  # tuned at run time, and says so
    assert set(row.config) == {"toy._at"}


def test_bench_cli_warns_in_one_line_about_a_bad_tuned_file(tmp_path):
    bad = tmp_path / "tuned.json"
    bad.write_text('{"schema": "rooflinecli.tuned/1", "gpu": "NVIDIA H200", "triton": "0", "autotuners": {}}')
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["bench", "--device", "cpu", "--suite", "test", "--kernel", "copy", "--tuned", str(bad), "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    warnings = [line for line in r.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and str(bad) in warnings[0] and "autotuning at run time" in warnings[0]
    res = load_results(out)
    assert res.extra["bench"]["tuned_configs"]["status"] == "rejected"
    assert all(row.correct for row in res.rows)


def test_crosscheck_ratio_is_stored(monkeypatch):
    import rooflinecli.bench.runner as runner_mod

    class CrossBencher(Bencher):
        def crosscheck(self, fn):
            fn()
            return 1e-3

    monkeypatch.setattr(runner_mod, "Bencher", CrossBencher)
    good = replace(load_op("copy"), cases={"test": (Case("N63", {"n": 63}, "fp32"),)})
    import kernels.registry as registry

    monkeypatch.setattr(registry, "load_op", lambda name: good)
    opts = BenchOptions(kernels=("copy",), suite="test", device="cpu", crosscheck=True)
    state = run_bench(opts)
    assert len(state.crosscheck) == 2 and {c["impl"] for c in state.crosscheck} == {"triton", "torch"}
    for c, row in zip(state.crosscheck, state.rows):
        assert c["ratio"] == pytest.approx(row.p50_s / 1e-3) and c["do_bench_cudagraph_us"] == pytest.approx(1000)
        assert "do_bench_cudagraph median 1000 us (ours / it = " in row.note
    extra = make_results(opts, state, {"gpu_name": "cpu"}, "2026-01-01T00:00:00Z").extra["bench"]
    assert extra["crosscheck"] == state.crosscheck


def test_old_results_without_host_times_still_load():
    from pathlib import Path

    res = load_results(Path(__file__).parent.parent / "fixtures" / "h200-2026-11-30" / "results.json")
    assert len(res.rows) == 108
    for row in res.rows:
        assert row.host_us_per_call is None and row.config == {} and row.tuning == "" and row.backend == ""
        assert row.method == "cuda_events" or row.method == "cuda_graph"


def test_quality_lines_name_the_rows_off_target():
    from rooflinecli.bench.run_summary import quality_lines
    from rooflinecli.results import ResultRow

    def row(shape, p20, p50, p80):
        return ResultRow(op="gemm", impl="triton", shape=shape, dtype="bf16", samples_s=(p20, p50, p80), p20_s=p20, p50_s=p50, p80_s=p80, flops=1.0, bytes=1.0)

    rows = [row("tight", 99e-6, 100e-6, 101e-6), row("wide", 80e-6, 100e-6, 120e-6), row("tiny", 1e-6, 5e-6, 9e-6)]
    cc = [
        {"op": "gemm", "impl": "triton", "shape": "tight", "dtype": "bf16", "ours_us": 100.0, "ratio": 1.01},
        {"op": "gemm", "impl": "triton", "shape": "wide", "dtype": "bf16", "ours_us": 100.0, "ratio": 1.2},
        {"op": "gemm", "impl": "triton", "shape": "tiny", "dtype": "bf16", "ours_us": 5.0, "ratio": 3.0},  # under 20 us: not held to it
        {"op": "gemm", "impl": "torch", "shape": "tight", "dtype": "bf16", "ours_us": 90.0, "ratio": None},
    ]
    spread, steady, agree = quality_lines(rows, cc)
    assert spread.startswith("spread: 1 of 2 timed rows >= 20 us have p80/p20 <= 1.1; widest: gemm[triton] wide bf16 1.50")
    assert steady.startswith("drift: 0 of 2 timed rows >= 20 us moved more than 3%")
    assert agree.startswith("crosscheck: 1 of 2 rows >= 20 us within 5% of do_bench_cudagraph (1 could not run it); worst: gemm[triton] wide bf16 1.200")
    assert len(quality_lines(rows)) == 2


def test_drift_is_the_last_third_against_the_first_in_the_order_taken():
    """H200 run 3's torch naive-attention row, time-ordered: 414 -> 424 -> 453 -> 472 us in steps
    while its p80/p20 was 1.045: the drift line names it."""
    import json
    from pathlib import Path

    from rooflinecli.bench.run_summary import drift, quality_lines
    from rooflinecli.results import load_results

    assert drift([1.0] * 9) == 0.0 and drift([1.0] * 5) is None
    assert drift([1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 1.1, 1.1, 1.1]) == pytest.approx(0.1)
    assert drift(sorted([3.0, 1.0, 2.0] * 3)) == pytest.approx(2.0)  # order matters, not the spread
    run3 = Path(__file__).resolve().parents[2] / "reports" / "h200-2026-11-30-run3" / "results.json"
    res = load_results(run3)
    naive = next(r for r in res.rows if r.op == "naive_attention" and r.impl == "torch" and r.shape == "B4-H32-Hkv32-S1024-D128-full")
    assert naive.p80_s / naive.p20_s < 1.10 and drift(naive.samples_s) > 0.10
    line = quality_lines(res.rows)[1]
    assert line.startswith("drift: ") and "naive_attention[torch] B4-H32-Hkv32-S1024-D128-full bf16 +1" in line
    assert json.dumps(line)  # one plain line
