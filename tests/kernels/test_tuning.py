"""Reproducible tuning (kernels/tuning.py): autotuner discovery, the committed-config file (bad
files warn once and fall back, never crash), pre-filled caches (a committed key is never tuned),
the record of which config ran, and the near-tie rule. Runs a real ``triton.autotune`` kernel
under the Triton interpreter."""

from __future__ import annotations

import json
import types
import weakref

import pytest
import torch
import triton
import triton.language as tl

from kernels import tuning
from kernels.tuning import (
    Committed,
    Recorder,
    TunedFileError,
    apply_committed,
    call_key,
    config_json,
    discover_autotuners,
    gpu_slug,
    load_committed,
    parse_tuned,
    pick_config,
    simplicity,
    summarize_calls,
    tuned_path,
)


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


_CONFIGS = [triton.Config({"BLOCK": 32}, num_warps=4, num_stages=2), triton.Config({"BLOCK": 64}, num_warps=4, num_stages=3)]


def _toy_autotuner(bench_calls: list | None = None):
    """A real Autotuner; its benchmark (when it tunes) is a stub that records being called and
    prefers BLOCK 64."""

    def do_bench(fn, quantiles=None, **kw):
        bench_calls.append(fn) if bench_calls is not None else None
        return [1.0, 1.0, 1.0]

    at = triton.autotune(configs=list(_CONFIGS), key=["n"], do_bench=do_bench)(_scale_kernel)
    return at


def _launch(at, x):
    out = torch.full_like(x, float("nan"))
    n = x.numel()
    at[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out


def _file(at_name: str, key: list, config: dict, **top) -> dict:
    doc = {"schema": tuning.TUNED_SCHEMA, "gpu": "NVIDIA H200", "triton": "3.6.0", "autotuners": {at_name: [{"key": key, "config": config}]}}
    doc.update(top)
    return doc


def test_gpu_slug_and_file_name():
    assert gpu_slug("NVIDIA H200") == "nvidia-h200"
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert tuned_path("NVIDIA H200", "3.6.0").name == "nvidia-h200-triton3.6.0.json"
    assert tuned_path("NVIDIA H200", "3.6.0").parent.name == "tuned"


def test_discovery_finds_module_level_autotuners_and_those_inside_dicts():
    fake = {"_one": _toy_autotuner(), "_by_block": {16: _toy_autotuner(), 32: _toy_autotuner()}, "_list": [_toy_autotuner()], "_other": 3}
    names = tuning.autotuners_in("fake", fake)
    assert set(names) == {"fake._one", "fake._by_block.16", "fake._by_block.32", "fake._list.0"}
    assert names["fake._by_block.32"] is fake["_by_block"][32]


def test_discovery_over_the_real_kernels_is_generic():
    from triton.runtime.autotuner import Autotuner

    found = discover_autotuners()
    assert found, "the kernels have autotuners"
    for name, at in found.items():
        assert isinstance(at, Autotuner)
        module = name.split(".")[0]
        assert module in tuning.kernel_modules()
    assert len({id(a) for a in found.values()}) == len(found)  # one name per object
    assert not {"registry", "testing", "tuning"} & set(tuning.kernel_modules())


def test_call_key_matches_the_autotuners_own_cache_key():
    """The key we compute for a call is the one Triton stores in ``Autotuner.cache`` (values of
    the key arguments, then str(dtype) of every tensor argument)."""
    bench_calls: list = []
    at = _toy_autotuner(bench_calls)
    x = torch.randn(100, generator=torch.Generator().manual_seed(1))
    out = _launch(at, x)
    assert torch.equal(out, x * 2)
    assert len(at.cache) == 1 and bench_calls  # it tuned (with the stub benchmark)
    (key,) = at.cache
    assert key == call_key(at, (x, out, 100), {}) == (100, "torch.float32", "torch.float32")


def test_a_committed_key_is_never_tuned_and_the_row_says_committed():
    bench_calls: list = []
    at = _toy_autotuner(bench_calls)
    ats = {"toy._at": at}
    x = torch.randn(77, generator=torch.Generator().manual_seed(2))
    raw = _file("toy._at", [77, "torch.float32", "torch.float32"], {"kwargs": {"BLOCK": 32}, "num_warps": 4, "num_stages": 2})
    committed = Committed("f.json", parse_tuned(raw, ats, "NVIDIA H200", "3.6.0"), "applied")
    apply_committed(committed, ats)
    with Recorder(ats, committed) as rec:
        out = _launch(at, x)
    assert torch.equal(out, x * 2)
    assert bench_calls == []  # no benchmarking: the committed config ran
    config, how = summarize_calls(rec.calls)
    assert how == "committed"
    assert config == {"toy._at": {"kwargs": {"BLOCK": 32}, "num_warps": 4, "num_stages": 2}}
    assert "run" not in at.__dict__  # the recorder unwrapped itself

    # another size is not committed: tuned at run time, and the row says so
    with Recorder(ats, committed) as rec:
        _launch(at, torch.randn(300))
    assert bench_calls and summarize_calls(rec.calls)[1] == "autotuned"


def test_pinning_finds_keys_without_tuning():
    bench_calls: list = []
    at = _toy_autotuner(bench_calls)
    with Recorder({"toy": at}, pin_missing=True) as rec:
        _launch(at, torch.randn(50))
    assert bench_calls == [] and rec.calls[0].key == (50, "torch.float32", "torch.float32")
    assert rec.calls[0].config is at.configs[0]


def test_no_autotuner_is_fixed_and_several_keys_are_labelled():
    assert summarize_calls([]) == ({}, "fixed")
    at = _toy_autotuner()
    calls = [tuning.Call("a", (1, "f"), at.configs[0], "committed"), tuning.Call("a", (2, "f"), at.configs[1], "committed")]
    config, how = summarize_calls(calls)
    assert how == "committed" and set(config) == {'a key=[1, "f"]', 'a key=[2, "f"]'}


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d.update(gpu="NVIDIA H100 80GB HBM3"), "tuned on GPU 'NVIDIA H100 80GB HBM3'"),
        (lambda d: d.update(triton="3.5.0"), "tuned with Triton 3.5.0"),
        (lambda d: d.update(colour="red"), "unknown field 'colour'"),
        (lambda d: d.update(schema="x"), "not a tuned-config file"),
        (lambda d: d.update(autotuners={"gone._kernel": []}), "unknown autotuner 'gone._kernel'"),
        (lambda d: d["autotuners"]["toy._at"][0]["config"].update(kwargs={"BLOCK": 128}), "is not one of toy._at's configs"),
        (lambda d: d["autotuners"]["toy._at"][0].update(speed="fast"), "unknown field 'speed'"),
        (lambda d: d["autotuners"]["toy._at"][0].update(key=[]), "shorter than the autotuner's key"),
        (lambda d: d["autotuners"]["toy._at"][0].update(key=[[1, 2], "a", "b"]), "'key' must be a list of numbers, strings"),
        (lambda d: d.update(gpu="NVIDIA\x1b[31mH100"), "tuned on GPU 'NVIDIAH100'"),  # no escape code printed
    ],
)
def test_bad_tuned_files_are_rejected_in_one_line(mutate, needle):
    ats = {"toy._at": _toy_autotuner()}
    raw = _file("toy._at", [77, "torch.float32", "torch.float32"], {"kwargs": {"BLOCK": 32}, "num_warps": 4, "num_stages": 2})
    parse_tuned(json.loads(json.dumps(raw)), ats, "NVIDIA H200", "3.6.0")  # the unmutated file is fine
    mutate(raw)
    with pytest.raises(TunedFileError, match=needle.replace("[", r"\[").replace("(", r"\(")):
        parse_tuned(raw, ats, "NVIDIA H200", "3.6.0")


def test_load_committed_never_raises(tmp_path):
    ats = {"toy._at": _toy_autotuner()}
    missing = load_committed(tmp_path / "none.json", ats, "NVIDIA H200", "3.6.0")
    assert missing.status == "missing" and missing.entries == {}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    c = load_committed(bad, ats, "NVIDIA H200", "3.6.0")
    assert c.status == "rejected" and c.entries == {} and c.message.startswith("warning: ") and "\n" not in c.message
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_file("toy._at", [77], {"kwargs": {"BLOCK": 32}, "num_warps": 4, "num_stages": 2}, gpu="NVIDIA A100")))
    c = load_committed(other, ats, "NVIDIA H200", "3.6.0")
    assert c.status == "rejected" and "autotuning at run time" in c.message
    for text in ("[" * 50_000 + "]" * 50_000, '{"schema": ' + "9" * 5000 + "}"):  # a RecursionError and a ValueError in json
        bad.write_text(text)
        c = load_committed(bad, ats, "NVIDIA H200", "3.6.0")
        assert c.status == "rejected" and c.entries == {} and "\n" not in c.message
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_file("toy._at", [77, "torch.float32", "torch.float32"], {"kwargs": {"BLOCK": 64}, "num_warps": 4, "num_stages": 3})))
    c = load_committed(good, ats, "NVIDIA H200", "3.6.0")
    assert c.status == "applied" and c.entries["toy._at"][(77, "torch.float32", "torch.float32")] is ats["toy._at"].configs[1]


def test_near_ties_go_to_the_simpler_config():
    configs = {
        "big": {"kwargs": {"BLOCK_M": 128, "BLOCK_N": 128}, "num_warps": 8, "num_stages": 4},
        "small": {"kwargs": {"BLOCK_M": 64, "BLOCK_N": 64}, "num_warps": 4, "num_stages": 3},
        "slow": {"kwargs": {"BLOCK_M": 16, "BLOCK_N": 16}, "num_warps": 1, "num_stages": 1},
    }
    assert simplicity(configs["small"]) < simplicity(configs["big"])
    # small is 1.5% slower than big: a near-tie, and simpler
    assert pick_config({"big": 100e-6, "small": 101.5e-6, "slow": 300e-6}, configs) == "small"
    # 3% slower: not a tie
    assert pick_config({"big": 100e-6, "small": 103e-6, "slow": 300e-6}, configs) == "big"
    # a config that failed to compile (inf) never wins
    assert pick_config({"big": float("inf"), "small": 2e-6}, configs) == "small"
    with pytest.raises(ValueError):
        pick_config({"big": float("inf")}, configs)


def test_config_json_round_trips_through_find_config():
    at = _toy_autotuner()
    for c in at.configs:
        assert tuning.find_config(at, json.loads(json.dumps(config_json(c)))) is c
    assert tuning.find_config(at, {"kwargs": {"BLOCK": 16}, "num_warps": 4, "num_stages": 2}) is None


def test_blas_candidates_wrap_the_baseline_and_restore_the_library(monkeypatch):
    from kernels.baselines import blas_candidates

    seen = []

    def baseline(a, w):
        seen.append((a, w))
        return a @ w.T

    cands = blas_candidates(baseline)
    assert set(cands) == {"cublas", "cublaslt"}
    a, w = torch.randn(3, 4), torch.randn(5, 4)
    call = cands["cublas"](a=a, w=w)
    assert torch.equal(call(), a @ w.T) and seen == [(a, w)]
    assert cands["cublaslt"](a=a, w=w) is None  # no cuBLASLt for CPU tensors

    # on CUDA tensors the preference is set around the call and restored after it
    log = []
    state = {"lib": "cublas"}

    def pref(library=None):
        if library is not None:
            log.append(library)
            state["lib"] = library
        return state["lib"]

    monkeypatch.setattr(torch.backends.cuda, "preferred_blas_library", pref)
    cuda_like = types.SimpleNamespace(device=types.SimpleNamespace(type="cuda"))
    assert callable(cands["cublaslt"](a=cuda_like, w=cuda_like))  # available on CUDA inputs
    got = []
    from kernels import baselines

    call = baselines.with_blas_library("cublaslt", lambda: got.append(state["lib"]) or 7)
    assert call() == 7 and got == ["cublaslt"] and state["lib"] == "cublas" and log == ["cublaslt", "cublas"]


# ------------------------------------------------------------------------------------------------
# roofline tune: interleaving and the choice, with the CUDA calls stubbed (no GPU here)
# ------------------------------------------------------------------------------------------------


class _Clock:
    """A fake GPU timeline: graphs advance it by their duration, events stamp it."""

    def __init__(self):
        self.t_ms = 0.0
        self.log: list[str] = []

    def install(self, monkeypatch):
        import rooflinecli.bench.timing as timing

        clock = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = None

            def record(self):
                self.t = clock.t_ms

            def elapsed_time(self, other):
                return other.t - self.t

        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
        monkeypatch.setattr(timing, "gpu_sleep", lambda s: None)


class _Graph:
    def __init__(self, clock: _Clock, name: str, ms: float):
        self.clock, self.name, self.ms = clock, name, ms

    def replay(self):
        self.clock.log.append(self.name)
        self.clock.t_ms += self.ms


def test_interleaved_rounds_rotate_the_order_and_take_medians(monkeypatch):
    from rooflinecli.bench.tuner import interleaved_medians

    clock = _Clock()
    clock.install(monkeypatch)
    graphs = {n: _Graph(clock, n, ms) for n, ms in (("a", 2.0), ("b", 1.0), ("c", 3.0))}
    med = interleaved_medians(graphs, launches=10, rounds=5)
    assert med == {"a": pytest.approx(2e-4), "b": pytest.approx(1e-4), "c": pytest.approx(3e-4)}
    timed = clock.log[3:]  # after one upload replay each
    rounds = [timed[i : i + 3] for i in range(0, 15, 3)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"], ["b", "c", "a"]]


def test_tune_key_times_every_config_and_gives_near_ties_to_the_simpler(monkeypatch):
    import rooflinecli.bench.timing as timing
    from rooflinecli.bench.tuner import tune_key

    clock = _Clock()
    clock.install(monkeypatch)
    configs = [
        triton.Config({"BLOCK": 32}, num_warps=4, num_stages=2),  # simplest, 1% slower than the fastest
        triton.Config({"BLOCK": 64}, num_warps=8, num_stages=3),  # fastest
        triton.Config({"BLOCK": 128}, num_warps=8, num_stages=4),  # fails to compile
    ]
    at = triton.autotune(configs=configs, key=["n"])(_scale_kernel)
    key = (100, "torch.float32", "torch.float32")
    us = {32: 101.0, 64: 100.0}

    def capture(fns, launches):
        block = at.cache[key].kwargs["BLOCK"]  # the config in the cache is what the capture records
        if block == 128:
            raise RuntimeError("out of resource: shared memory")
        return _Graph(clock, str(block), us[block] * launches / 1e3)

    monkeypatch.setattr(timing, "capture_graph", capture)
    chosen, medians, failed = tune_key(at, key, [lambda: None], rounds=5)
    assert chosen is configs[0] and at.cache[key] is configs[0]
    assert sorted(round(v * 1e6, 6) for v in medians.values()) == [100.0, 101.0]
    assert len(failed) == 1 and "out of resource" in next(iter(failed.values()))
    us[32] = 103.0  # 3% slower: no longer a tie
    chosen, _, _ = tune_key(at, key, [lambda: None], rounds=5)
    assert chosen is configs[1]


def test_tune_without_a_gpu_is_one_line_exit_2(tmp_path):
    from typer.testing import CliRunner

    from rooflinecli.cli import app

    assert not torch.cuda.is_available()
    r = CliRunner().invoke(app, ["tune", "--out", str(tmp_path / "t.json")])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no CUDA GPU found") and "roofline tune" in lines[0]
    assert not (tmp_path / "t.json").exists()


def test_tune_key_leaves_out_a_config_with_a_wrong_result(monkeypatch):
    import rooflinecli.bench.timing as timing
    from rooflinecli.bench.tuner import tune_key

    clock = _Clock()
    clock.install(monkeypatch)
    at = triton.autotune(configs=list(_CONFIGS), key=["n"])(_scale_kernel)
    key = (100, "torch.float32", "torch.float32")
    monkeypatch.setattr(timing, "capture_graph", lambda fns, launches: _Graph(clock, str(at.cache[key].kwargs["BLOCK"]), 0.05 * launches if at.cache[key].kwargs["BLOCK"] == 32 else 0.1 * launches))
    # BLOCK 32 is faster but wrong for this shape: BLOCK 64 is chosen
    check = lambda: "rel error 1.0e+00 > 1.0e-05" if at.cache[key].kwargs["BLOCK"] == 32 else None  # noqa: E731
    chosen, medians, failed = tune_key(at, key, [lambda: None], rounds=5, check=check)
    assert chosen.kwargs == {"BLOCK": 64} and len(medians) == 1
    assert list(failed.values()) == ["wrong result: rel error 1.0e+00 > 1.0e-05"]
    # only the configs given (those the autotuner's pruning kept) are timed
    chosen, medians, _ = tune_key(at, key, [lambda: None], rounds=5, configs=[at.configs[0]])
    assert chosen is at.configs[0] and len(medians) == 1


def test_pinning_applies_the_autotuners_own_pruning():
    def keep_small(configs, named_args, **kwargs):
        assert named_args["n"] == 50  # the call's arguments, as Autotuner.run passes them
        return [c for c in configs if c.kwargs["BLOCK"] <= named_args["n"]]

    at = triton.autotune(configs=list(_CONFIGS), key=["n"], prune_configs_by={"early_config_prune": keep_small})(_scale_kernel)
    with Recorder({"toy": at}, pin_missing=True) as rec:
        _launch(at, torch.randn(50))
    (call,) = rec.calls
    assert [c.kwargs["BLOCK"] for c in call.candidates] == [32] and call.config is at.configs[0]


def test_numpy_key_values_are_written_as_numbers_that_match_again():
    import numpy as np

    key = (np.int64(8192), True, np.float32(0.5), "torch.bfloat16", None)
    as_json = json.loads(json.dumps(tuning.key_json(key)))
    assert as_json == [8192, True, 0.5, "torch.bfloat16", None]
    assert {tuple(as_json): 1}.get(key) == 1  # the loaded key finds Triton's own


def test_tune_writes_a_file_that_bench_then_runs_committed(tmp_path, monkeypatch):
    """roofline tune's loop end to end with the graph timing stubbed: it finds the key the case
    hits, times both configs, writes the file atomically; bench applies the file, never tunes, and
    its row says committed with the config tune chose."""
    from dataclasses import replace

    import kernels.registry as registry
    import rooflinecli.bench.timing as timing
    from kernels.registry import Case, load_op
    from rooflinecli.bench.runner import BenchOptions, Bencher
    from rooflinecli.bench.tuner import run_tune

    bench_calls: list = []
    at = _toy_autotuner(bench_calls)

    def run(src):
        return _launch(at, src)

    case = Case("N300", {"n": 300}, "fp32")
    op = replace(load_op("copy"), name="toy", run=run, reference=lambda src: src.double() * 2, tolerance={"fp32": 1e-6}, baseline=None, baselines={}, cases={"test": (case,)})
    monkeypatch.setattr(registry, "load_op", lambda name: op)
    monkeypatch.setattr(tuning, "discover_autotuners", lambda modules=None: {"toy._at": at})
    clock = _Clock()
    clock.install(monkeypatch)
    key = (300, "torch.float32", "torch.float32")
    monkeypatch.setattr(timing, "capture_graph", lambda fns, launches: _Graph(clock, "g", (0.2 if at.cache[key].kwargs["BLOCK"] == 64 else 0.3) * launches))
    (tmp_path / "tuned").mkdir()
    report = run_tune(("toy",), "test", out=tmp_path / "tuned", rounds=5, device="cpu")  # a folder: the file named for GPU and Triton
    out = tmp_path / "tuned" / f"cpu-triton{triton.__version__}.json"
    assert report.path == str(out)
    assert bench_calls == [] and report.skipped == []
    doc = json.loads(out.read_text())
    assert doc["gpu"] == "cpu" and doc["triton"] == triton.__version__
    (entry,) = doc["autotuners"]["toy._at"]
    assert entry["key"] == [300, "torch.float32", "torch.float32"] and entry["config"]["kwargs"] == {"BLOCK": 64}
    assert entry["median_us"] == pytest.approx(200.0) and entry["case"] == "toy N300-fp32"

    at.cache.clear()
    bencher = Bencher(BenchOptions(kernels=("toy",), suite="test", device="cpu", tuned_file=str(tmp_path / "tuned"), baseline=False))
    assert bencher.tuned_info["status"] == "applied", bencher.tuned_info
    (row,) = bencher.bench_case(op, case)
    assert row.correct and row.tuning == "committed" and bench_calls == []
    assert row.config == {"toy._at": {"kwargs": {"BLOCK": 64}, "num_warps": 4, "num_stages": 3}}


def test_tune_writes_the_choices_it_timed_and_bench_runs_them_committed(tmp_path, monkeypatch):
    """A launcher's run-time choice (``tuning.Choice``, decode attention's schedule) is timed on a
    case's first call; ``roofline tune`` writes it under ``choices`` with its times, and bench then
    reads it untimed: the row names it, committed."""
    from dataclasses import replace

    import kernels.registry as registry
    import rooflinecli.bench.timing as timing
    from kernels.registry import Case, load_op
    from rooflinecli.bench.runner import BenchOptions, Bencher
    from rooflinecli.bench.tuner import run_tune

    bench_calls: list = []
    at = _toy_autotuner(bench_calls)
    choice = tuning.Choice("toy.variant", ("plain", "fancy"))
    timed = []

    def run(src):
        if choice.get((int(src.numel()),)) is None:
            timed.append(1)
            choice.put((int(src.numel()),), "fancy", {"plain": 0.02, "fancy": 0.01})
        return _launch(at, src)

    case = Case("N300", {"n": 300}, "fp32")
    op = replace(load_op("copy"), name="toy", run=run, reference=lambda src: src.double() * 2, tolerance={"fp32": 1e-6}, baseline=None, baselines={}, cases={"test": (case,)})
    monkeypatch.setattr(registry, "load_op", lambda name: op)
    monkeypatch.setattr(tuning, "discover_autotuners", lambda modules=None: {"toy._at": at})
    monkeypatch.setattr(tuning, "discover_choices", lambda modules=None: {"toy.variant": choice})
    clock = _Clock()
    clock.install(monkeypatch)
    key = (300, "torch.float32", "torch.float32")
    monkeypatch.setattr(timing, "capture_graph", lambda fns, launches: _Graph(clock, "g", (0.2 if at.cache[key].kwargs["BLOCK"] == 64 else 0.3) * launches))
    report = run_tune(("toy",), "test", out=tmp_path / "t.json", rounds=5, device="cpu")
    assert report.skipped == [] and timed == [1]
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["choices"] == {"toy.variant": [{"key": [300], "value": "fancy", "case": "toy N300-fp32", "times_us": {"plain": 20.0, "fancy": 10.0}}]}

    at.cache.clear()
    choice.cache.clear()
    choice.times.clear()
    bencher = Bencher(BenchOptions(kernels=("toy",), suite="test", device="cpu", tuned_file=str(tmp_path / "t.json"), baseline=False))
    assert bencher.tuned_info["status"] == "applied", bencher.tuned_info
    (row,) = bencher.bench_case(op, case)
    assert row.correct and row.tuning == "committed" and timed == [1]
    assert row.config["toy.variant"] == {"value": "fancy"}


def test_a_key_triton_tunes_under_another_name_is_still_autotuned(monkeypatch):
    """Should a Triton compute its cache key otherwise than ``call_key``, the committed entry is
    not what ran: the new cache entry gives it away, and the row says autotuned."""
    bench_calls: list = []
    at = _toy_autotuner(bench_calls)
    x = torch.randn(77)
    ours = call_key(at, (x, x, 77), {})
    committed = Committed("f", {"toy": {ours: at.configs[0]}}, "applied")
    apply_committed(committed, {"toy": at})
    monkeypatch.setattr(tuning, "call_key", lambda *a, **k: ("not", "triton's", "key"))
    at.cache[("not", "triton's", "key")] = at.configs[0]
    committed.entries["toy"][("not", "triton's", "key")] = at.configs[0]
    at.cache.pop(ours)  # Triton's own key is not in the cache: it tunes
    with Recorder({"toy": at}, committed) as rec:
        _launch(at, x)
    (call,) = rec.calls
    assert bench_calls and call.source == "autotuned" and call.key == ours


def test_graph_benchmarks_replace_the_autotuners_timer():
    """use_graph_benchmarks: an autotuner tunes an uncommitted key with the given timer (one call
    per config), whatever it was built with; the default is the CUDA-graph timer."""
    built_with: list = []
    at = _toy_autotuner(built_with)
    timed: list = []

    def graph_bench(fn, quantiles=None, **kw):
        timed.append(fn)
        return [2.0 if len(timed) == 1 else 1.0] * 3  # the second config (BLOCK 64) is faster

    tuning.use_graph_benchmarks({"toy._at": at}, bench=graph_bench)
    x = torch.randn(100, generator=torch.Generator().manual_seed(3))
    assert torch.equal(_launch(at, x), x * 2)
    assert built_with == [] and len(timed) == len(_CONFIGS)
    assert at.best_config.kwargs == {"BLOCK": 64}
    other = _toy_autotuner()
    tuning.use_graph_benchmarks({"other": other})
    assert other.do_bench.__qualname__.startswith("graph_benchmarker")


def test_graph_benchmarker_uses_do_bench_cudagraph_and_falls_back_to_events(monkeypatch):
    import triton.testing

    calls: list = []

    def cudagraph(fn, rep=None, quantiles=None, **kw):
        calls.append(("graph", rep, quantiles))
        return [0.5, 0.4, 0.6]

    def events(fn, quantiles=None, **kw):
        calls.append(("events", quantiles))
        return [0.7, 0.6, 0.8]

    monkeypatch.setattr(triton.testing, "do_bench_cudagraph", cudagraph)
    monkeypatch.setattr(triton.testing, "do_bench", events)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    bench = tuning.graph_benchmarker(rep_ms=12.0)
    assert bench(lambda: None, quantiles=(0.5, 0.2, 0.8)) == [0.5, 0.4, 0.6]
    assert calls == [("graph", 12.0, (0.5, 0.2, 0.8))]

    def refuses(*a, **k):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(triton.testing, "do_bench_cudagraph", refuses)
    assert bench(lambda: None, quantiles=(0.5, 0.2, 0.8)) == [0.7, 0.6, 0.8]
    assert calls[-1] == ("events", (0.5, 0.2, 0.8))


def test_unrecorded_calls_are_left_out_of_the_row():
    """A launcher's own trial runs (decode attention's schedule choice) are not what the case ran."""
    at = _toy_autotuner([])
    with Recorder({"toy": at}) as rec:
        with tuning.unrecorded():
            _launch(at, torch.randn(40))
        assert rec.calls == []
        _launch(at, torch.randn(40))
    assert len(rec.calls) == 1 and tuning._UNRECORDED == [0]


def test_tune_key_makes_the_launchers_read_each_config_anew(monkeypatch):
    """Launchers keep a plan per shape with the config of its first call (gemm's ``_PLANS``), and
    the fast launch path keeps the first call's config per launch key: tune_key must forget both
    before each config, or it times the first config under every name."""
    import kernels.gemm as gemm
    import rooflinecli.bench.timing as timing
    from rooflinecli.bench.tuner import tune_key

    clock = _Clock()
    clock.install(monkeypatch)
    at = triton.autotune(configs=list(_CONFIGS), key=["n"])(_scale_kernel)
    key = (100, "torch.float32", "torch.float32")
    monkeypatch.setattr(gemm, "_PLANS", {})

    class Plan:  # its buffers are what a captured graph launches on
        def __init__(self, cfg):
            self.cfg = cfg

    def launcher():  # as gemm's plan: the autotuner's choice on the plan's first call, kept
        return gemm._PLANS.setdefault("toy", Plan(at.cache[key])).cfg.kwargs["BLOCK"]

    checked: list[int] = []
    us = {32: 100.0, 64: 50.0}

    def check():
        checked.append(launcher())
        return None

    class PlanGraph(_Graph):  # replaying a graph whose plan was freed would launch on freed buffers
        def __init__(self, *a):
            super().__init__(*a)
            self.plan = weakref.ref(gemm._PLANS["toy"])

        def replay(self):
            assert self.plan() is not None, "a graph replayed after its plan's buffers were freed"
            super().replay()

    monkeypatch.setattr(timing, "capture_graph", lambda fns, launches: PlanGraph(clock, str(launcher()), us[launcher()] * launches / 1e3))
    chosen, medians, _ = tune_key(at, key, [launcher], rounds=5, check=check)
    assert checked == [32, 64]
    assert sorted(round(v * 1e6, 6) for v in medians.values()) == [50.0, 100.0]
    assert chosen.kwargs == {"BLOCK": 64} and launcher() == 64  # the later cases run the choice


def test_forget_plans_clears_plans_and_fast_path_entries_but_not_a_disabled_kernel(monkeypatch):
    import kernels.decode_attention as decode_attention
    import kernels.gemm as gemm
    from kernels import launch

    monkeypatch.setattr(gemm, "_PLANS", {"k": object()})
    monkeypatch.setattr(decode_attention, "_PLANS", {"k": object()})
    launch.reset()
    try:
        kept, off = launch._table(_scale_kernel), launch._table(_CONFIGS_AT)
        kept.reason = None  # under the interpreter the table turns itself off: as on a GPU here
        kept.entries["key"] = object()
        off.disable("unsupported")
        tuning.forget_plans()
        assert gemm._PLANS == {} and decode_attention._PLANS == {}
        assert kept.entries == {} and kept.reason is None and off.reason == "unsupported"
    finally:
        launch.reset()


_CONFIGS_AT = triton.autotune(configs=list(_CONFIGS), key=["n"])(_scale_kernel)


def test_the_suite_summary_shows_how_far_apart_the_tuned_candidates_were(tmp_path):
    """``roofline tune --report`` keeps every candidate's median; the summary prints the spread per
    key, which would sit at 1.00x if every candidate had run one config."""
    from rooflinecli.bench.suite_summary import tuned_lines

    (tmp_path / "tuned").mkdir()
    (tmp_path / "tuned" / "nvidia-h200-triton3.6.0.json").write_text(json.dumps({"autotuners": {"gemm._persistent_16bit": [{}]}}))
    (tmp_path / "tune-report.json").write_text(json.dumps({"tuned": [
        {"autotuner": "gemm._persistent_16bit", "candidates_us": {"a": 177.9, "b": 194.4, "c": 201.0}},
        {"autotuner": "decode_attention._decode_attention_autotuned", "candidates_us": {"a": 257.2, "b": 262.0}}]}))
    line = tuned_lines(tmp_path)[-1]
    assert "1.02x (decode_attention._decode_attention_autotuned) to 1.13x (gemm._persistent_16bit), 2 keys" in line
    # the committed schedule choices, counted by value
    (tmp_path / "tuned" / "nvidia-h200-triton3.6.0.json").write_text(json.dumps({"autotuners": {}, "choices": {"decode_attention.schedule": [
        {"key": [1], "value": "splits"}, {"key": [2], "value": "balanced"}, {"key": [3], "value": "splits"}]}}))
    assert "  tune: choice decode_attention.schedule: 3 shape classes (balanced 1, splits 2)" in tuned_lines(tmp_path)
