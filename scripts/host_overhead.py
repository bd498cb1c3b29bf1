"""Host time per launcher call, fast launch path on and off, beside the torch baseline (GPU only).

    PYTHONPATH=. python3 scripts/host_overhead.py OUT.json [--kernel copy,gemm] [--budget-s 45]

For each kernel's quick-suite cases: check our output against the reference once (fresh random
inputs), then time the launcher's host cost with ``kernels.launch`` on and off and the torch
baseline's:

- ``*_eager_us``: median host us of one call made after ``torch.cuda.synchronize()`` (50 calls);
- ``*_back_to_back_us``: wall us per call of 200 calls without syncs (the host's launch rate while
  the GPU queue fills; GPU-bound for large cases);

plus ``tma_encode_us_per_call`` / ``tma_encodes_per_call``: the host time a call spends in
Triton's TMA descriptor encoding (``fill_tma_descriptor``, ``..._tiled`` in newer Triton: one
``cuTensorMapEncodeTiled`` per host ``TensorDescriptor`` per launch), timed by wrapping it during
one more back-to-back pass, to tell that cost from the rest of the launch; then capture the
launcher in a CUDA graph, put fresh random values into the floating-point inputs,
replay it once and check the output against the reference again. Committed tuned configs
(``kernels/tuned/``) are applied first and a key without one runs the autotuner's first config
(no run-time tuning: it would spend the budget compiling every config); a case that would start
after ``--budget-s`` (45 s: the whole run stays within 60 s on an H200) is listed as skipped.
The JSON (written after every case) holds every figure, the fast path's per-kernel counts and any
reason it turned itself off.
Exit 0 when every case ran and passed, 1 otherwise, 2 without a GPU or on bad arguments.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

KERNELS = ("copy", "rmsnorm", "gemm", "flash_attention", "naive_attention", "decode_attention", "mla_decode", "moe")
EAGER_CALLS = 50
BACK_TO_BACK_CALLS = 200


def _eager_us(fn, sync, calls: int = EAGER_CALLS) -> float:
    out = []
    for _ in range(calls):
        sync()
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    sync()
    return statistics.median(out)


def _back_to_back_us(fn, sync, calls: int = BACK_TO_BACK_CALLS) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    sync()
    return (t1 - t0) * 1e6 / calls


def _fast_calls(launch) -> int:
    return sum(v["fast_calls"] for v in launch.stats().values())


#: Triton's host functions that encode one TMA descriptor (3.6: the first; 3.9: the others)
TMA_ENCODERS = ("fill_tma_descriptor", "fill_tma_descriptor_tiled", "fill_tma_descriptor_im2col")


class TmaEncodeTimer:
    """While entered, every call of ``utils``' TMA encoders (``TMA_ENCODERS``, those it has) is
    counted and timed; ``utils`` defaults to ``triton.runtime.driver.active.utils``. Restores
    the originals on exit."""

    def __init__(self, utils=None):
        self.utils, self.calls, self.seconds, self._saved = utils, 0, 0.0, {}

    def __enter__(self):
        if self.utils is None:
            import triton

            self.utils = triton.runtime.driver.active.utils
        for name in TMA_ENCODERS:
            fn = getattr(self.utils, name, None)
            if fn is None:
                continue
            self._saved[name] = fn

            def timed(*args, _fn=fn):
                t0 = time.perf_counter()
                try:
                    return _fn(*args)
                finally:
                    self.seconds += time.perf_counter() - t0
                    self.calls += 1

            setattr(self.utils, name, timed)
        return self

    def __exit__(self, *exc) -> None:
        for name, fn in self._saved.items():
            setattr(self.utils, name, fn)
        self._saved = {}


def _tma_encode_per_call(fn, sync, calls: int, utils=None) -> tuple[float, float]:
    """(us of TMA encoding per call, encodes per call) over ``calls`` back-to-back calls."""
    with TmaEncodeTimer(utils) as t:
        _back_to_back_us(fn, sync, calls)
    return t.seconds * 1e6 / calls, t.calls / calls


def _first(x):
    return x[0] if isinstance(x, (tuple, list)) else x


def _refresh(inputs: dict, gen) -> None:
    """New random values, in place, in every floating-point input tensor (ints, indices stay)."""
    import torch

    from kernels.testing import device_randn

    for v in inputs.values():
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.element_size() >= 2:
            v.copy_(device_randn(v.shape, v.dtype, v.device, gen))


def _apply_tuned():
    """The autotuners and the committed tuned configs for this GPU and Triton, applied."""
    import torch
    import triton

    from kernels import tuning

    tuners = tuning.discover_autotuners()
    committed = tuning.load_committed(tuning.tuned_path(torch.cuda.get_device_name(), triton.__version__),
                                      tuners, torch.cuda.get_device_name(), triton.__version__)
    tuning.apply_committed(committed, tuners)
    return tuners, committed


def _run_case(op, case, gen, device: str = "cuda", tuned=None) -> dict:
    """``tuned``: (autotuners, committed); the first call pins any autotuner key without a
    committed config to its first config (host time does not depend on the tile, and run-time
    tuning would spend the budget compiling every config)."""
    import contextlib

    import torch

    from kernels import launch, tuning
    from kernels.testing import compare

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    n_eager, n_b2b = (EAGER_CALLS, BACK_TO_BACK_CALLS) if device == "cuda" else (3, 3)  # the interpreter is slow
    row: dict = {"kernel": op.name, "case": case.id}
    tol = op.tolerance[case.dtype]
    inputs = op.make_inputs(case, device, gen)
    launch.set_enabled(True)
    t0 = time.perf_counter()
    rec = tuning.Recorder(tuned[0], tuned[1], pin_missing=True) if tuned else contextlib.nullcontext()
    with rec:
        out = _first(op.run(**inputs))
    sync()
    row["first_call_s"] = time.perf_counter() - t0
    if tuned:
        row["config"], row["tuning"] = tuning.summarize_calls(rec.calls)
    c = compare(out, _first(op.reference(**inputs)), tol)
    row["check_rel_error"], row["check_ok"], row["check_message"] = c.rel_error, c.ok, c.message
    del out

    def ours():
        return op.run(**inputs)

    for _ in range(5):  # gemm's switch from its autotuner; keep, self-check, first fast launch
        ours()
    fast_before = _fast_calls(launch)
    row["fast_eager_us"] = _eager_us(ours, sync, n_eager)
    row["fast_back_to_back_us"] = _back_to_back_us(ours, sync, n_b2b)
    # launches the fast path made while timing "fast" (n_eager + n_b2b calls x kernels per call)
    row["fast_launches"] = _fast_calls(launch) - fast_before
    if device == "cuda":
        row["tma_encode_us_per_call"], row["tma_encodes_per_call"] = _tma_encode_per_call(ours, sync, n_b2b)
    launch.set_enabled(False)
    row["normal_eager_us"] = _eager_us(ours, sync, n_eager)
    row["normal_back_to_back_us"] = _back_to_back_us(ours, sync, n_b2b)
    launch.set_enabled(True)
    if op.baseline is not None:
        def base():
            return op.baseline(**inputs)

        base()
        row["torch_eager_us"] = _eager_us(base, sync, n_eager)
        row["torch_back_to_back_us"] = _back_to_back_us(base, sync, n_b2b)
    if device != "cuda":  # the CPU plumbing run (tests): no graphs
        row["graph_ok"], row["graph_message"] = True, "no CUDA graph on the CPU"
        return row
    # graph capture of the launcher (fast path on), replayed once on fresh inputs
    try:
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            ours()  # warm-up on a side stream, as torch recommends before capture
        torch.cuda.current_stream().wait_stream(side)
        sync()
        with torch.cuda.graph(graph):
            captured = _first(ours())
        _refresh(inputs, gen)
        captured.fill_(float("nan"))
        graph.replay()
        sync()
        c = compare(captured, _first(op.reference(**inputs)), tol)
        row["graph_rel_error"], row["graph_ok"], row["graph_message"] = c.rel_error, c.ok, c.message
        del graph, captured
    except Exception as e:  # noqa: BLE001 - reported in the row, the next case still runs
        row["graph_ok"], row["graph_message"] = False, f"capture failed: {type(e).__name__}: {e}"[:300]
        sync()
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="JSON file to write")
    p.add_argument("--kernel", default=",".join(KERNELS), help="comma-separated kernel names")
    p.add_argument("--budget-s", type=float, default=45.0, help="start no case after this many seconds")
    p.add_argument("--cpu-dryrun", action="store_true",
                   help="tests only: the kernels' tiny 'test' cases on the CPU (TRITON_INTERPRET=1), no graphs")
    a = p.parse_args(argv)
    names = [n for n in a.kernel.split(",") if n]
    bad = [n for n in names if n not in KERNELS]
    if bad:
        print(f"error: --kernel: unknown kernel {bad[0]!r} (known: {', '.join(KERNELS)})", file=sys.stderr)
        return 2
    import torch

    device, suite = ("cpu", "test") if a.cpu_dryrun else ("cuda", "quick")
    if not a.cpu_dryrun and not torch.cuda.is_available():
        print("error: host_overhead.py needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    import triton

    from kernels import launch
    from kernels.registry import load_op
    from rooflinecli.output import write_json_atomic

    start = time.perf_counter()
    tuned = _apply_tuned() if device == "cuda" else None
    doc = {"gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu (interpreter dry run)",
           "torch": torch.__version__, "triton": triton.__version__,
           "python": sys.version.split()[0], "fast_path_supported": launch.triton_version_supported(),
           "tuned": tuned[1].message if tuned else "none (CPU)", "eager_calls": EAGER_CALLS if device == "cuda" else 3,
           "back_to_back_calls": BACK_TO_BACK_CALLS if device == "cuda" else 3,
           "rows": [], "skipped": [], "errors": []}
    gen = torch.Generator().manual_seed(20261130)  # make_inputs draws its seeds on the CPU
    for name in names:
        op = load_op(name)
        for case in op.cases[suite]:
            if time.perf_counter() - start > a.budget_s:
                doc["skipped"].append(f"{name} {case.id}")
                continue
            try:
                row = _run_case(op, case, gen, device, tuned)
            except Exception as e:  # noqa: BLE001 - one failing case does not stop the others
                doc["errors"].append(f"{name} {case.id}: {type(e).__name__}: {e}"[:400])
                if device == "cuda":
                    torch.cuda.synchronize()
                continue
            doc["rows"].append(row)
            print(f"{name:17s} {case.id:40s} ours fast {row['fast_eager_us']:6.1f} us, normal "
                  f"{row['normal_eager_us']:6.1f} us, torch {row.get('torch_eager_us', float('nan')):6.1f} us "
                  f"(eager, sync before each); back-to-back fast {row['fast_back_to_back_us']:6.1f} us "
                  f"(TMA encoding {row.get('tma_encode_us_per_call', float('nan')):.1f} us); "
                  f"check {'ok' if row['check_ok'] else 'FAIL'}, graph {'ok' if row['graph_ok'] else 'FAIL'}",
                  flush=True)
            doc["launch_stats"], doc["launch_disabled"] = launch.stats(), launch.disabled()
            doc["elapsed_s"] = time.perf_counter() - start
            write_json_atomic(a.out, doc, make_parents=True)
    doc["launch_stats"], doc["launch_disabled"] = launch.stats(), launch.disabled()
    doc["elapsed_s"] = time.perf_counter() - start
    write_json_atomic(a.out, doc, make_parents=True)
    ok = not doc["skipped"] and not doc["errors"] and all(r["check_ok"] and r["graph_ok"] for r in doc["rows"])
    print(f"{len(doc['rows'])} cases in {doc['elapsed_s']:.1f} s; skipped {len(doc['skipped'])}, "
          f"errors {len(doc['errors'])}; fast path off for: {doc['launch_disabled'] or 'none'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
