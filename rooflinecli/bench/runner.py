"""``roofline bench``: check each kernel case against its reference, then time ours and the
PyTorch/cuBLAS baseline in the same run, and write long-format result rows.

Order per case: fresh random inputs -> our kernel vs the reference (relative error, NaN-poisoned
outputs inside the launchers; the first call, so any run-time autotuning happens here and the
config it chose is recorded) -> each baseline candidate (``KernelOp.baselines``, else
``KernelOp.baseline``) checked the same way -> timing (``rooflinecli.bench.timing``: GPU time),
only on a green check; the fastest candidate is the torch row (``backend`` names it, the note
lists the others). A case that fails its check is recorded untimed (``correct = false``, the
error in ``note``); an exception in a launcher is a failed check too, never a crash of the run.

torch and the kernels are imported inside the functions (the CLI starts fast without them).
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rooflinecli import __version__
from rooflinecli.bench.predict import compute_dtype_for, roof
from rooflinecli.bench.timing import MIN_SAMPLES, Timing, cold_sets
from rooflinecli.errors import RooflineError, unknown_name_error
from rooflinecli.hardware import HardwareSpec
from rooflinecli.results import ResultRow, Results

SUITES = ("quick", "full", "test")  # "test": the kernels' tiny CPU-interpreter cases


@dataclass(frozen=True)
class BenchOptions:
    kernels: tuple[str, ...]
    suite: str = "quick"
    device: str = "cuda"  # "cuda", or "cpu" (wall clock under the Triton interpreter; tests only)
    hw: HardwareSpec | None = None  # datasheet spec for predictions
    measured: HardwareSpec | None = None  # measured spec for predictions
    min_samples: int = MIN_SAMPLES
    target_total_s: float = 0.25  # timing budget per (case, impl)
    time_budget_s: float | None = None  # stop starting new cases after this long
    seed: int = 0
    baseline: bool = True
    use_graphs: bool = True
    #: also time each timed case with triton.testing.do_bench_cudagraph and store the ratio
    crosscheck: bool = False
    #: on a GPU, also time ours against the chosen baseline in interleaved replay pairs
    #: (``timing.paired_ratios``): the speedup the targets are judged on
    paired: bool = True
    #: committed tuned-config file, or a folder holding <gpu-slug>-triton<version>.json; None:
    #: kernels/tuned/<gpu-slug>-triton<version>.json on a GPU, none on the CPU
    tuned_file: str | None = None
    #: on the CPU, the GPU name a tuned file is checked against (on a GPU: torch's device name)
    gpu_name: str = ""
    #: only the cases whose id (``M128-N8192-K8192-bf16``) matches one of these shell patterns
    #: (``fnmatch``); empty: every case of the suite
    shapes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    ok: bool
    rel_error: float | None
    message: str


@dataclass
class BenchState:
    """What a run has produced so far (the CLI checkpoints it after every op)."""

    rows: list[ResultRow] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    #: with --crosscheck, per timed row: {op, impl, shape, dtype, backend, ours_us (the row's median),
    #: ours_around_us (our samples just before and after do_bench_cudagraph), do_bench_cudagraph_us,
    #: ratio (ours_around / it: the two methods at one clock state), ratio_row (ours_us / it)}
    crosscheck: list[dict[str, Any]] = field(default_factory=list)
    #: what happened to the committed tuned configs (path, status, message)
    tuned: dict[str, str] = field(default_factory=dict)
    #: per case with ours and a baseline timed on a GPU: {op, shape, dtype, backend, pairs,
    #: speedup (median torch / ours over interleaved replay pairs), speedup_p20, speedup_p80}
    paired: list[dict[str, Any]] = field(default_factory=list)


def parse_kernels(spec: str | None) -> tuple[str, ...]:
    """``"gemm,copy"`` -> ("gemm", "copy") in suite order; None or "all" -> every kernel present."""
    from kernels.registry import KERNEL_NAMES

    if spec is None or spec.strip() in ("", "all"):
        return available_kernels()
    names = [n.strip() for n in spec.split(",") if n.strip()]
    for n in names:
        if n not in KERNEL_NAMES:
            raise unknown_name_error("kernel", n, KERNEL_NAMES)
    return tuple(n for n in KERNEL_NAMES if n in names)


def parse_shapes(spec: str | None) -> tuple[str, ...]:
    """``"M128-*, T1-E128-*"`` -> ("M128-*", "T1-E128-*"); None or blank -> () (every case)."""
    if spec is None:
        return ()
    pats = tuple(p.strip() for p in spec.split(",") if p.strip())
    for p in pats:
        if len(p) > 200 or any(ord(ch) < 32 for ch in p):
            raise RooflineError(f"--shape: pattern {p[:40]!r} is not a case id pattern")
    return pats


def available_kernels() -> tuple[str, ...]:
    """Kernel names whose module exists in ``kernels/``."""
    import importlib.util

    from kernels.registry import KERNEL_NAMES

    return tuple(n for n in KERNEL_NAMES if importlib.util.find_spec(f"kernels.{n}") is not None)


def case_seed(seed: int, case_id: str, impl: str = "") -> int:
    return (seed * 1_000_003 + zlib.crc32(f"{case_id}/{impl}".encode())) % (2**62)


def _as_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


#: outputs this large are compared on their device, failures included (a float64 copy of a
#: multi-GB output on the host, and the element-wise report over it, take tens of seconds)
DEVICE_COMPARE_MIN_ELEMENTS = 1 << 22
_CHUNK = 1 << 24


def _device_rel_error(o, r) -> float | None:
    """||o - r|| / ||r|| computed in float64 chunks on the tensors' device; None when ``o`` has a
    NaN or inf."""
    import torch

    if not bool(torch.isfinite(o).all()):
        return None
    num = torch.zeros((), dtype=torch.float64, device=o.device)
    den = torch.zeros((), dtype=torch.float64, device=o.device)
    for oc, rc in zip(o.reshape(-1).split(_CHUNK), r.reshape(-1).split(_CHUNK)):
        rd = rc.to(torch.float64)
        num += (oc.to(torch.float64) - rd).square().sum()
        den += rd.square().sum()
    return float(num.sqrt()) / max(float(den.sqrt()), 1e-6)


def _device_failure(o, r, rel: float | None, tol: float, abs_floor: float = 1e-6) -> str:
    """The mismatch report of ``kernels.testing.compare`` (counts, first flat index), computed on
    the device chunk by chunk."""
    import torch

    flat_o, flat_r = o.reshape(-1), r.reshape(-1)
    if rel is None:
        n_nan = int(torch.isnan(flat_o).sum())
        n_inf = int(torch.isinf(flat_o).sum())
        first = int(torch.argmax((~torch.isfinite(flat_o)).to(torch.uint8)))
        return f"{n_nan} NaN and {n_inf} inf of {o.numel()} elements (first at flat index {first}; compared on the device)"
    elem_tol = tol * max(float(flat_r.abs().max()), abs_floor)
    n_bad, first = 0, None
    for k, (oc, rc) in enumerate(zip(flat_o.split(_CHUNK), flat_r.split(_CHUNK))):
        bad = (oc.to(torch.float64) - rc.to(torch.float64)).abs() > elem_tol
        c = int(bad.sum())
        if c and first is None:
            first = k * _CHUNK + int(torch.argmax(bad.to(torch.uint8)))
        n_bad += c
    return (
        f"rel error {rel:.3e} > {tol:.1e}; {n_bad} of {o.numel()} elements differ by more than {elem_tol:.2e} "
        f"(first at flat index {first}; compared on the device)"
    )


def compare_output(o, r, tol: float):
    """``kernels.testing.compare``; outputs of ``DEVICE_COMPARE_MIN_ELEMENTS`` or more are compared
    (and a failure described) on their device, without a host copy."""
    from kernels.testing import Comparison, compare

    if getattr(o, "shape", None) == getattr(r, "shape", None) and o.numel() >= DEVICE_COMPARE_MIN_ELEMENTS and o.device == r.device:
        rel = _device_rel_error(o, r)
        if rel is not None and rel <= tol:
            return Comparison(rel, True, f"rel error {rel:.3e} <= {tol:.1e}")
        return Comparison(float("inf") if rel is None else rel, False, _device_failure(o, r, rel, tol))
    return compare(o, r, tol)


def check_outputs(out: Any, ref: Any, tol: float) -> Check:
    """Compare every output with its reference (``kernels.testing.compare``)."""
    outs, refs = _as_tuple(out), _as_tuple(ref)
    if len(outs) != len(refs):
        return Check(False, None, f"{len(outs)} outputs but the reference has {len(refs)}")
    worst = 0.0
    for i, (o, r) in enumerate(zip(outs, refs)):
        c = compare_output(o, r, tol)
        if not c.ok:
            where = f"output {i}: " if len(outs) > 1 else ""
            return Check(False, c.rel_error, where + c.message)
        worst = max(worst, c.rel_error)
    return Check(True, worst, f"rel error {worst:.2e} <= {tol:.1e}")


def run_check(fn: Callable[..., Any], inputs: dict[str, Any], ref: Any, tol: float, sync: Callable[[], None]) -> Check:
    """Run ``fn(**inputs)`` and compare with ``ref``; an exception is a failed check."""
    try:
        out = fn(**inputs)
        sync()
    except Exception as e:  # noqa: BLE001 - a launcher error is a red check, recorded, not a crash
        return Check(False, None, f"raised {type(e).__name__}: {' '.join(str(e).split())[:300]}")
    return check_outputs(out, ref, tol)


def _input_bytes(inputs: dict[str, Any]) -> int:
    total = 0
    for v in inputs.values():
        if hasattr(v, "element_size") and hasattr(v, "numel"):
            total += v.element_size() * v.numel()
    return total


def input_sets(op, case, device: str, seed: int, first: dict[str, Any], l2_bytes: float) -> Callable[[], list[dict[str, Any]]]:
    """A memoized factory of input sets for graph timing: ``first`` plus fresh ones until together
    they follow the one cold-cache rule (``timing.cold_sets``: every launch of a replay reads data
    the L2 has evicted, so no flush sits inside the timed region). Built on first use,
    shared by ours and every baseline candidate of the case."""
    built: list[list[dict[str, Any]]] = []

    def build() -> list[dict[str, Any]]:
        if not built:
            import torch

            per_set = max(_input_bytes(first), 1)
            n_sets = cold_sets(per_set, l2_bytes)
            gen = torch.Generator().manual_seed(case_seed(seed, case.id, "rotate"))
            built.append([first] + [op.make_inputs(case, device, gen) for _ in range(n_sets - 1)])
        return built[0]

    return build


def rotating_calls(sets: Callable[[], list[dict[str, Any]]], make: Callable[..., Callable[[], Any] | None]) -> Callable[[], list]:
    """Zero-argument calls ``make(**inputs)`` over every input set (a set ``make`` refuses is left out)."""

    def build() -> list[Callable[[], Any]]:
        calls = [make(**s) for s in sets()]
        return [c for c in calls if c is not None]

    return build


def _bind(fn: Callable[..., Any]) -> Callable[..., Callable[[], Any]]:
    """``fn`` as a baseline factory: ``factory(**inputs)`` -> ``partial(fn, **inputs)``."""
    return lambda **inputs: partial(fn, **inputs)


#: checked calls after the first, at most, until one runs every launch on kernels/launch.py's direct
#: path (the first call runs under the tuning ``Recorder``, which takes Triton's path; then a launch
#: key's first call is Triton's path, kept, its second a self-check, and gemm's plan adds one call
#: before its ``Bound`` launches: the fifth call is the first direct one there)
DIRECT_CHECK_CALLS = 8


def launch_counts() -> tuple[int, int]:
    """(normal, direct) launches through ``kernels.launch`` so far, over every kernel."""
    from kernels import launch

    rows = launch.stats().values()
    return sum(r["normal_calls"] for r in rows), sum(r["fast_calls"] for r in rows)


def check_direct_path(call_check: Callable[[], Check], calls: int = DIRECT_CHECK_CALLS) -> tuple[Check, bool]:
    """Check calls (``call_check()``) until one launches only on the direct path (direct launches
    and no normal one), or ``calls`` of them: (the last check, or the first wrong one; whether a
    direct-only call was checked). The timed launches are direct: their result must be checked."""
    c = None
    for _ in range(calls):
        normal0, direct0 = launch_counts()
        c = call_check()
        normal1, direct1 = launch_counts()
        if not c.ok:
            return c, False
        if direct1 > direct0 and normal1 == normal0:
            return c, True
    return c, False
#: do_bench_cudagraph's ``rep`` for --crosscheck, ms: each of its 10 replays lasts this long
CROSSCHECK_REP_MS = 25.0
NOT_AVAILABLE = "not available for these inputs"  # a baseline factory returned None


@dataclass
class Measured:
    """One implementation of one case: its check, timing, and where its config came from."""

    check: Check
    timing: Timing | None = None
    backend: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    tuning: str = ""
    crosscheck_s: float | None = None
    factory: Any = None  # a baseline's factory (its rotating calls for the paired timing)
    #: our figure at the moment of the cross-check (median of our samples just before and after it)
    bracket_s: float | None = None
    others: str = ""  # the other baseline candidates, for the note


class Bencher:
    """Runs the cases of the chosen kernels; ``device = "cpu"`` swaps CUDA timing for wall clock.

    On a GPU the committed tuned configs (``kernels.tuning``) are applied to every autotuner first;
    a missing or rejected file leaves run-time autotuning (``tuned_info`` says which)."""

    def __init__(self, opts: BenchOptions) -> None:
        import torch

        from kernels import tuning

        self.opts = opts
        self.torch = torch
        self.cuda = opts.device == "cuda"
        self.flusher = None
        self.l2_bytes = 0.0
        if self.cuda:
            from rooflinecli.bench.timing import L2Flusher, l2_size_bytes

            self.l2_bytes = float(l2_size_bytes(0) or (opts.hw.l2_size_mb * 1e6 if opts.hw else 50e6))
            self.flusher = L2Flusher("cuda", self.l2_bytes)
        self.crosschecks: list[dict[str, Any]] = []  # with opts.crosscheck, one per timed row
        self.paired: list[dict[str, Any]] = []  # on a GPU, one per case with ours and a baseline timed
        self.autotuners = tuning.discover_autotuners()
        if self.cuda:  # keys not committed are tuned at run time on GPU time, not host time
            tuning.use_graph_benchmarks(self.autotuners)
        self.committed = tuning.Committed()
        gpu = torch.cuda.get_device_name() if self.cuda else (opts.gpu_name or "cpu")  # as `roofline tune` writes it
        path = opts.tuned_file
        if (path is None and self.cuda) or (path is not None and Path(path).is_dir()):
            import triton  # the file for this GPU and Triton, in kernels/tuned/ or the folder given

            path = str(tuning.tuned_path(gpu, triton.__version__, *([Path(path)] if path is not None else [])))
        if path is not None:
            import triton

            self.committed = tuning.load_committed(path, self.autotuners, gpu, triton.__version__)
            tuning.apply_committed(self.committed, self.autotuners)

    @property
    def tuned_info(self) -> dict[str, str]:
        return {"path": self.committed.path, "status": self.committed.status, "message": self.committed.message}

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def context_alive(self) -> bool:
        """False after a sticky CUDA error (illegal address, ...): every later call would fail."""
        try:
            self.torch.cuda.synchronize()
            self.torch.zeros(1, device="cuda").add_(1).item()
        except Exception:  # noqa: BLE001
            return False
        return True

    def time(self, fn: Callable[[], Any], rotating: Callable[[], list] | None,
             between: Callable[[], Any] | None = None) -> Timing:
        """``fn`` timed (``timing.time_cuda`` on a GPU); ``between`` runs straight after the
        samples, bracketed by more of them (``Timing.bracket``; GPU only)."""
        from rooflinecli.bench.timing import time_cuda, time_wall_clock

        if not self.cuda:
            return time_wall_clock(fn, samples=self.opts.min_samples, warmup=1)
        return time_cuda(
            fn,
            self.flusher,
            rotating=rotating,
            min_samples=self.opts.min_samples,
            target_total_s=self.opts.target_total_s,
            use_graphs=self.opts.use_graphs,
            between=between,
        )

    def crosscheck(self, fn: Callable[[], Any]) -> float | None:
        """``triton.testing.do_bench_cudagraph``'s median (GPU runs with ``crosscheck`` only)."""
        if not (self.cuda and self.opts.crosscheck):
            return None
        from rooflinecli.bench.timing import crosscheck_s

        try:
            return crosscheck_s(fn, rep_ms=CROSSCHECK_REP_MS)
        except Exception:  # noqa: BLE001 - a launcher it cannot capture: no cross-check, the row stands
            try:
                self.torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - a dead context is caught by the runner's next check
                pass
            return None

    # ------------------------------------------------------------------------------------------
    def supported(self, op, case) -> str | None:
        """None when the case can run here, else the reason it is skipped."""
        if op.supported is None:
            return None
        try:
            ok = op.supported(case, self.opts.hw)
        except Exception as e:  # noqa: BLE001
            return f"supported() raised {type(e).__name__}: {e}"
        return None if ok else "not supported on this device"

    def _measure(self, fn: Callable[[], Any], check: Check, rotating: Callable[[], list] | None,
                 crosscheck: bool = True) -> Measured:
        """Time ``fn`` after a green ``check`` (an error while timing turns the check red); with
        ``crosscheck``, ``do_bench_cudagraph`` runs on it straight after."""
        m = Measured(check)
        if not check.ok:
            return m
        try:
            if crosscheck and self.cuda and self.opts.crosscheck:  # bracketed by our samples
                m.timing = self.time(fn, rotating, between=partial(self.crosscheck, fn))
                if m.timing.bracket is not None:
                    m.crosscheck_s, m.bracket_s = m.timing.bracket.value, m.timing.bracket.ours_s
            else:
                m.timing = self.time(fn, rotating)
                m.crosscheck_s = self.crosscheck(fn) if crosscheck else None
        except Exception as e:  # noqa: BLE001 - an error while timing is recorded on the row
            m.timing = None
            m.check = Check(False, check.rel_error, f"timing raised {type(e).__name__}: {' '.join(str(e).split())[:300]}")
        return m

    def baseline_candidates(self, op) -> list[tuple[str, Callable[..., Callable[[], Any] | None]]]:
        """(backend, factory) pairs: ``op.baselines``, else ``op.baseline`` as backend ``""``."""
        if not self.opts.baseline:
            return []
        if op.baselines:
            return list(op.baselines.items())
        return [("", _bind(op.baseline))] if op.baseline is not None else []

    def bench_case(self, op, case) -> list[ResultRow]:
        """Rows for ours and the fastest baseline candidate on one case (untimed rows for a red
        check)."""
        from kernels.tuning import Recorder, summarize_calls

        torch = self.torch
        device = self.opts.device
        flops, bytes_ = (float(x) for x in op.cost(case))
        tol = float(op.tolerance.get(case.dtype, 0.0))
        gen = torch.Generator().manual_seed(case_seed(self.opts.seed, case.id))
        try:
            inputs = op.make_inputs(case, device, gen)
        except Exception as e:  # noqa: BLE001
            msg = f"make_inputs raised {type(e).__name__}: {' '.join(str(e).split())[:300]}"
            return [self._row(op, case, "triton", flops, bytes_, Measured(Check(False, None, msg)))]
        try:
            ref = op.reference(**inputs)
            self.sync()
        except Exception as e:  # noqa: BLE001
            msg = f"reference raised {type(e).__name__}: {' '.join(str(e).split())[:300]}"
            return [self._row(op, case, "triton", flops, bytes_, Measured(Check(False, None, msg)))]

        with Recorder(self.autotuners, self.committed) as rec:
            ours_check = run_check(op.run, inputs, ref, tol, self.sync)  # the first call: any run-time tuning happens here
        if ours_check.ok and self.cuda:
            # the timed launches take kernels.launch's direct path, a few calls into a launch key:
            # a call on that path is checked too
            again, _ = check_direct_path(lambda: run_check(op.run, inputs, ref, tol, self.sync))
            if not again.ok:
                ours_check = Check(False, again.rel_error, f"direct launch path (kernels/launch.py): {again.message}")
        config, how = summarize_calls(rec.calls)
        if not ours_check.ok and not rec.calls and ours_check.message.startswith("raised "):
            how = ""  # it failed before reaching any kernel: whether one is autotuned is unknown
        candidates = []  # (backend, factory, call or None, check)
        for backend, factory in self.baseline_candidates(op):
            try:
                call = factory(**inputs)
            except Exception as e:  # noqa: BLE001 - a candidate that cannot be set up is left out, noted
                candidates.append((backend, factory, None, Check(False, None, f"setup raised {type(e).__name__}: {' '.join(str(e).split())[:200]}")))
                continue
            if call is None:
                candidates.append((backend, factory, None, Check(False, None, NOT_AVAILABLE)))
                continue
            candidates.append((backend, factory, call, run_check(lambda call=call: call(), {}, ref, tol, self.sync)))
        del ref
        sets = input_sets(op, case, device, self.opts.seed, inputs, self.l2_bytes)
        ours = self._measure(partial(op.run, **inputs), ours_check, rotating_calls(sets, _bind(op.run)))
        ours.config, ours.tuning = config, how
        rows = [self._row(op, case, "triton", flops, bytes_, ours)]
        if candidates:
            best = self._fastest_baseline(candidates, sets)
            paired = self._paired(op, case, best, rotating_calls(sets, _bind(op.run)), rotating_calls(sets, best.factory)) \
                if ours.timing is not None and best.timing is not None and best.factory is not None else ""
            if paired:
                best.others = "; ".join(x for x in (best.others, paired) if x)
            rows.append(self._row(op, case, "torch", flops, bytes_, best))
        del inputs, candidates
        if self.cuda:
            torch.cuda.empty_cache()
        return rows

    def _paired(self, op, case, best: Measured, ours_calls, base_calls) -> str:
        """Ours and the chosen baseline in interleaved replay pairs (GPU, ``opts.paired``): the
        speedup median goes to ``self.paired``; returns the note's sentence ("" when not run)."""
        if not (self.cuda and self.opts.paired):
            return ""
        from rooflinecli.bench.timing import PAIRS, paired_ratios

        try:
            ratios = sorted(paired_ratios(ours_calls(), base_calls(), pairs=PAIRS))
        except Exception as e:  # noqa: BLE001 - no pair figure; the separate medians stand
            try:
                self.torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - a dead context is caught by the runner's next check
                pass
            return f"paired timing not run ({type(e).__name__}: {' '.join(str(e).split())[:120]})"
        from rooflinecli.results import quantiles_s

        p20, p50, p80 = quantiles_s(tuple(ratios))
        self.paired.append({"op": op.name, "shape": case.shape, "dtype": case.dtype, "backend": best.backend,
                            "pairs": len(ratios), "speedup": p50, "speedup_p20": p20, "speedup_p80": p80})
        return (f"paired with ours ({len(ratios)} interleaved replay pairs): this / ours = {p50:.3f} "
                f"(p20 {p20:.3f}, p80 {p80:.3f})")

    def _fastest_baseline(self, candidates, sets) -> Measured:
        """Time every candidate with a green check; the fastest median is the baseline, the note
        lists the others (median, or why not timed).

        With two or more timed candidates the chosen one is timed once more and that second
        measurement is the row (and the one cross-checked): the minimum of several noisy
        medians is biased low (the winner's curse; H200 run 3: two SDPA candidates that dispatch
        to the same cuDNN kernel measured 1,824 and 1,861 us, and the lower one was kept)."""
        measured = []
        single = sum(1 for *_, call, check in candidates if call is not None and check.ok) == 1  # no choice to make
        for backend, factory, call, check in candidates:
            m = self._measure(call, check, rotating_calls(sets, factory), crosscheck=single) if call is not None else Measured(check)
            m.backend, m.factory = backend, factory
            measured.append((m, factory, call))
        timed = [(m, f, c) for m, f, c in measured if m.timing is not None and m.check.ok]
        if not timed:
            if len(measured) > 1:  # every candidate red: one note naming why, each
                return Measured(Check(False, None, "; ".join(f"{m.backend or 'baseline'}: {m.check.message}" for m, _, _ in measured)))
            return measured[0][0]
        best, factory, call = min(timed, key=lambda t: t[0].timing.p50_s)
        notes = [
            f"{m.backend} {m.timing.p50_s * 1e6:.4g} us" if m.timing is not None and m.check.ok else f"{m.backend} not timed ({m.check.message[:80]})"
            for m, _, _ in measured
            if m is not best and m.check.message != NOT_AVAILABLE  # inapplicable ones: not news
        ]
        if len(timed) > 1:
            notes.insert(0, f"{best.backend} {best.timing.p50_s * 1e6:.4g} us when chosen, then re-timed")
            again = self._measure(call, best.check, rotating_calls(sets, factory))
            best.check, best.timing, best.crosscheck_s, best.bracket_s = again.check, again.timing, again.crosscheck_s, again.bracket_s
        elif not single:  # the others failed while timing: the survivor is cross-checked on its own
            best.crosscheck_s = self.crosscheck(call)
        if notes:
            best.others = "other baselines: " + ", ".join(notes)
        return best

    def _row(self, op, case, impl: str, flops: float, bytes_: float, m: Measured) -> ResultRow:
        kind = op.model_kind
        cdt = compute_dtype_for(kind, case.dtype)
        roof_ds = roof(flops, bytes_, self.opts.hw, cdt) if self.opts.hw is not None else None
        roof_ms = roof(flops, bytes_, self.opts.measured, cdt) if self.opts.measured is not None else None
        check, timing = m.check, m.timing
        common = dict(
            op=op.name,
            impl=impl,
            shape=case.shape,
            dtype=case.dtype,
            flops=flops,
            bytes=bytes_,
            params=_jsonable(case.params),
            predicted_s_datasheet=roof_ds.time_s if roof_ds else None,
            predicted_s_measured=roof_ms.time_s if roof_ms else None,
            max_rel_error=check.rel_error if check.rel_error is not None and math.isfinite(check.rel_error) else None,
            model_kind=kind,
            compute_dtype=cdt,
            config=m.config,
            tuning=m.tuning,
            backend=m.backend,
        )
        if timing is None or not check.ok:
            nan = float("nan")
            note = "; ".join(x for x in (check.message, m.others) if x)
            return ResultRow(samples_s=(), p20_s=nan, p50_s=nan, p80_s=nan, correct=False, method="untimed", note=note, **common)
        p20, p50, p80 = timing.quantiles_s
        best = roof_ms or roof_ds
        extra = []
        if m.crosscheck_s is not None:
            around = m.bracket_s if m.bracket_s is not None else p50
            self.crosschecks.append(
                {"op": op.name, "impl": impl, "shape": case.shape, "dtype": case.dtype, "backend": m.backend,
                 "ours_us": p50 * 1e6, "ours_around_us": around * 1e6, "do_bench_cudagraph_us": m.crosscheck_s * 1e6,
                 "ratio": around / m.crosscheck_s, "ratio_row": p50 / m.crosscheck_s}
            )
            extra.append(
                f"do_bench_cudagraph median {m.crosscheck_s * 1e6:.4g} us (ours / it = {around / m.crosscheck_s:.3f}"
                + (f" with our samples just before and after it, {around * 1e6:.4g} us; the row's median / it = {p50 / m.crosscheck_s:.3f})"
                   if m.bracket_s is not None else ")")
            )
        elif self.cuda and self.opts.crosscheck:  # it raised (a launcher it cannot capture)
            self.crosschecks.append(
                {"op": op.name, "impl": impl, "shape": case.shape, "dtype": case.dtype, "backend": m.backend,
                 "ours_us": p50 * 1e6, "do_bench_cudagraph_us": None, "ratio": None}
            )
        if m.others:
            extra.append(m.others)
        return ResultRow(
            samples_s=tuple(timing.samples_s),
            p20_s=p20,
            p50_s=p50,
            p80_s=p80,
            achieved_tflops=flops / p50 / 1e12,
            achieved_gb_per_s=bytes_ / p50 / 1e9,
            pct_of_roof=best.time_s / p50 * 100.0 if best else None,
            correct=True,
            method=timing.method,
            note="; ".join([check.message, timing.note, *extra]),
            host_us_per_call=timing.host_us_per_call,
            **common,
        )


def _jsonable(params) -> dict[str, Any]:
    out = {}
    for k, v in dict(params).items():
        if isinstance(v, (bool, int, float, str)) or v is None:
            out[k] = v
        elif isinstance(v, (tuple, list)):
            out[k] = list(v)
        else:
            out[k] = str(v)
    return out


def select_cases(op, suite: str, shapes: Sequence[str] = ()) -> tuple:
    """The suite's cases of ``op``; with ``shapes``, those whose id matches one of the patterns."""
    if suite not in SUITES:
        raise unknown_name_error("suite", suite, SUITES)
    cases = tuple(op.cases.get(suite, ()))
    if shapes:
        from fnmatch import fnmatchcase

        cases = tuple(c for c in cases if any(fnmatchcase(c.id, p) for p in shapes))
    return cases


def check_cases(opts: BenchOptions) -> None:
    """Raise the one-line error when the options select no case at all."""
    from kernels.registry import load_op

    if not plan_cases([load_op(name) for name in opts.kernels], opts.suite, shapes=opts.shapes):
        which = f" matching --shape {','.join(opts.shapes)}" if opts.shapes else ""
        raise RooflineError(f"no cases in suite '{opts.suite}'{which} for kernels {', '.join(opts.kernels)}")


def plan_cases(ops, suite: str, interleave: bool = False, shapes: Sequence[str] = ()) -> list[tuple[Any, Any]]:
    """(op, case) pairs in suite order: every case of the first op, then the next op. With
    ``interleave`` (a time budget), round-robin over the ops instead (first case of each op, then
    the second, ...), so that a budget that runs out leaves every kernel measured on some shapes
    rather than the last kernels on none."""
    per_op = [[(op, case) for case in select_cases(op, suite, shapes)] for op in ops]
    if not interleave:
        return [pc for cases in per_op for pc in cases]
    out = []
    for i in range(max((len(c) for c in per_op), default=0)):
        out.extend(cases[i] for cases in per_op if i < len(cases))
    return out


def run_bench(
    opts: BenchOptions,
    *,
    on_case: Callable[[str, str, int, int], None] | None = None,
    on_checkpoint: Callable[[BenchState], None] | None = None,
    state: BenchState | None = None,
    on_tuned: Callable[[dict[str, str]], None] | None = None,
) -> BenchState:
    """Check and time every case of ``opts.kernels``; ``on_case`` drives a progress bar and
    ``on_checkpoint`` (the CLI writes the results file) runs after every case, so a run killed by
    a timeout keeps all it finished. With ``opts.time_budget_s`` the cases run round-robin over the
    kernels (``plan_cases``); the rows are put back in suite order at the end. ``on_tuned`` gets
    what became of the committed tuned configs (the CLI prints its message) before the first case."""
    from kernels.registry import load_op

    state = state or BenchState()
    ops = [load_op(n) for n in opts.kernels]
    plan = plan_cases(ops, opts.suite, interleave=opts.time_budget_s is not None, shapes=opts.shapes)
    if not plan:
        check_cases(opts)
    bencher = Bencher(opts)
    state.tuned = bencher.tuned_info
    if on_tuned is not None:
        on_tuned(state.tuned)
    t0 = time.monotonic()
    lost: str | None = None  # the CUDA context died (a sticky error): nothing after it can run
    for i, (op, case) in enumerate(plan):
        if lost is not None:
            state.skipped.append({"op": op.name, "case": case.id, "reason": lost})
            continue
        if on_case is not None:
            on_case(op.name, case.id, i, len(plan))
        if opts.time_budget_s is not None and time.monotonic() - t0 > opts.time_budget_s:
            state.skipped.append({"op": op.name, "case": case.id, "reason": f"time budget of {opts.time_budget_s:g} s spent"})
            continue
        reason = bencher.supported(op, case)
        if reason is not None:
            state.skipped.append({"op": op.name, "case": case.id, "reason": reason})
            continue
        rows = bencher.bench_case(op, case)
        state.rows.extend(rows)
        state.crosscheck = list(bencher.crosschecks)
        state.paired = list(bencher.paired)
        if on_checkpoint is not None:
            on_checkpoint(state)
        if bencher.cuda and any(not r.correct and "CUDA" in r.note for r in rows) and not bencher.context_alive():
            lost = f"skipped: the CUDA context was lost at {op.name} {case.id} (a sticky CUDA error)"
    order = {(op.name, case.id): k for k, (op, case) in enumerate(plan_cases(ops, opts.suite, shapes=opts.shapes))}
    state.rows.sort(key=lambda r: order.get((r.op, f"{r.shape}-{r.dtype}"), len(order)))  # stable: ours, then torch
    state.skipped.sort(key=lambda s: order.get((s["op"], s["case"]), len(order)))
    if on_checkpoint is not None:
        on_checkpoint(state)
    return state


def make_results(opts: BenchOptions, state: BenchState, environment: dict[str, Any], created_utc: str, elapsed_s: float | None = None) -> Results:
    extra: dict[str, Any] = {
        "bench": {
            "device": opts.device,
            "kernels": list(opts.kernels),
            "min_samples": opts.min_samples,
            "target_total_s": opts.target_total_s,
            "seed": opts.seed,
            "skipped": list(state.skipped),
            "tuned_configs": dict(state.tuned),
            "measured_spec_path": opts.measured.path if opts.measured is not None else None,
            "hardware_spec_path": opts.hw.path if opts.hw is not None else None,
        }
    }
    if opts.crosscheck:
        extra["bench"]["crosscheck"] = list(state.crosscheck)
    if state.paired:
        extra["bench"]["paired"] = list(state.paired)
    if elapsed_s is not None:
        extra["bench"]["elapsed_s"] = round(elapsed_s, 2)
    return Results(
        rows=tuple(state.rows),
        environment=environment,
        created_utc=created_utc,
        tool_version=__version__,
        suite=opts.suite,
        hardware_spec=opts.hw.id if opts.hw is not None else None,
        measured_spec=opts.measured.id if opts.measured is not None else None,
        extra=extra,
    )


def default_measured_spec(hw: HardwareSpec | None) -> HardwareSpec | None:
    """The measured spec on file for ``hw`` (``hardware_specs/measured/*.toml`` with base = hw.id)."""
    if hw is None:
        return None
    from rooflinecli.hardware import measured_specs

    found = [s for s in measured_specs().values() if s.base == hw.id]
    found.sort(key=lambda s: (s.id != f"{hw.id}-measured", s.id))
    return found[0] if found else None
