"""``roofline tune``: regenerate the committed tuned configs (``kernels/tuned/<gpu>-triton<ver>.json``)
on a GPU, graph-timed, with repeats interleaved across configs.

For each bench case (in suite order, round-robin over kernels under a time budget):

1. fresh inputs and the rotating input sets ``bench`` uses (together over 4x the L2);
2. one call with every autotuner *pinned* (a key not yet tuned runs the autotuner's first config,
   ``kernels.tuning.Recorder(pin_missing=True)``): which (autotuner, key) pairs the case hits, and
   which configs the autotuner's own ``prune_configs_by`` keeps for each;
3. for each pair not tuned yet in this run: every kept config is put in the cache for that key
   (the other autotuners keep their choice so far; the launchers' plans and fast-path entries,
   which keep the config of their first call, are forgotten: ``kernels.tuning.forget_plans``),
   the launcher's output is checked against the
   reference (a wrong result leaves the config out), and the whole launcher is captured as a CUDA
   graph of ``n`` launches over the rotating sets (``n`` from a pilot replay: a replay lasts
   >= 1 ms); a config that fails to compile or capture is left out, noted;
4. ``rounds`` (>= 5) rounds, each replaying every config's graph once, in an order rotated by one
   each round (round-robin interleaving: clock drift and heat hit every config alike);
5. the fastest median wins, except that a config within 2% of it that is simpler
   (``kernels.tuning.simplicity``) wins the near-tie. The choice stays in the cache for the later
   cases.

The file is written atomically; entries of the same GPU and Triton already in it are kept for
keys this run did not tune.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rooflinecli.errors import RooflineError

MIN_ROUNDS = 5
NEAR_TIE = 0.02


@dataclass
class TuneReport:
    path: str
    tuned: list[dict[str, Any]] = field(default_factory=list)  # one per (autotuner, key)
    skipped: list[dict[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0


def interleaved_medians(graphs: dict[str, Any], launches: int, rounds: int) -> dict[str, float]:
    """Per-launch median seconds of each graph over ``rounds`` rounds; each round replays every
    graph once, the order rotated by one per round, queued behind a GPU sleep (host ahead)."""
    import statistics

    import torch

    from rooflinecli.bench.timing import _events, gpu_sleep

    names = list(graphs)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for g in graphs.values():  # upload each graph once
        g.replay()
    torch.cuda.synchronize()
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        starts, ends = _events(len(order))
        gpu_sleep(1e-3)
        for n, s, e in zip(order, starts, ends):
            s.record()
            graphs[n].replay()
            e.record()
        torch.cuda.synchronize()
        for n, s, e in zip(order, starts, ends):
            samples[n].append(s.elapsed_time(e) * 1e-3 / launches)
    return {n: float(statistics.median(v)) for n, v in samples.items()}


def tune_key(
    at,
    key: tuple,
    fns: list[Callable[[], Any]],
    rounds: int,
    configs: tuple | list | None = None,
    check: Callable[[], str | None] | None = None,
) -> tuple[Any, dict[str, float], dict[str, str]]:
    """Time every config of ``at`` (or ``configs``: those its pruning keeps) for ``key`` (graph
    replay of the whole launcher over ``fns``); ``check()`` (None when the output is right, else
    why not) runs first with each config, and a config with a wrong result is left out. Returns
    (chosen Config, {config json: median s}, {config json: failure})."""
    import torch

    from kernels.tuning import config_json, forget_plans, pick_config
    from rooflinecli.bench.timing import capture_graph, graph_launches, replay_samples

    graphs: dict[str, Any] = {}
    failed: dict[str, str] = {}
    by_id: dict[str, Any] = {}
    launches = None
    held: list = []  # the plans each graph launches on (their buffers), alive until the graphs go
    for cfg in list(configs if configs is not None else at.configs):
        cid = json.dumps(config_json(cfg), sort_keys=True)
        by_id[cid] = cfg
        at.cache[key] = cfg
        held += forget_plans()  # else the launchers' plans and the fast path keep launching the first config
        try:
            wrong = check() if check is not None else None
            if wrong is not None:
                failed[cid] = f"wrong result: {wrong}"
                continue
            if launches is None:
                pilot = capture_graph(fns, len(fns))
                per_launch = sorted(replay_samples(pilot, len(fns), 3))[1]
                launches = graph_launches(per_launch, len(fns))
                del pilot
            graphs[cid] = capture_graph(fns, launches)
        except Exception as e:  # noqa: BLE001 - a config that cannot compile or capture is left out
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001
                pass
            failed[cid] = f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"
    if not graphs:
        raise RooflineError(f"no config of this autotuner ran: {next(iter(failed.values()), 'no configs')}")
    medians = interleaved_medians(graphs, launches, rounds)
    del graphs
    chosen = pick_config(medians, {k: json.loads(k) for k in medians}, NEAR_TIE)
    at.cache[key] = by_id[chosen]
    forget_plans()  # the later cases launch the chosen config
    del held  # the graphs that launched on these plans' buffers are gone
    return by_id[chosen], medians, failed


def existing_entries(path: Path, autotuners, gpu: str, triton_version: str, section: str = "autotuners") -> dict[str, dict[tuple, dict]]:
    """Entries of ``section`` ("autotuners" or "choices") of a valid file of this GPU and Triton at
    ``path`` (to keep keys not re-tuned)."""
    from kernels.tuning import load_committed

    c = load_committed(path, autotuners, gpu, triton_version)
    if c.status != "applied":
        return {}
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {name: {tuple(e["key"]): e for e in entries} for name, entries in raw.get(section, {}).items()}


def run_tune(
    kernels: tuple[str, ...],
    suite: str,
    *,
    out: Path | None = None,
    time_budget_s: float | None = None,
    rounds: int = 7,
    seed: int = 0,
    on_case: Callable[[str, str, int, int], None] | None = None,
    device: str = "cuda",
) -> TuneReport:
    """Tune every autotuner the cases hit; write the tuned file; see the module docstring.
    ``device = "cpu"`` is for tests with the graph timing stubbed (the file then names GPU "cpu")."""
    import torch
    import triton

    from kernels.registry import load_op
    from kernels.tuning import Recorder, config_json, discover_autotuners, discover_choices, key_json, tuned_path
    from rooflinecli.output import resolve_output, write_json_atomic
    from rooflinecli.bench.environment import utc_now
    from rooflinecli.bench.runner import _bind, case_seed, input_sets, plan_cases, rotating_calls, run_check
    from rooflinecli.bench.timing import l2_size_bytes

    if rounds < MIN_ROUNDS:
        raise RooflineError(f"--rounds must be >= {MIN_ROUNDS}, got {rounds}")
    cuda = device == "cuda"
    gpu = torch.cuda.get_device_name() if cuda else "cpu"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if out is None or Path(out).is_dir():  # a folder: the file name for this GPU and Triton in it
        path = tuned_path(gpu, triton.__version__, *([Path(out)] if out is not None else []))
    else:
        path = Path(out)
    # before any tuning: the default (kernels/tuned/) is inside the package, written only when named
    resolve_output(path, make_parents=True, default=out is None)
    autotuners = discover_autotuners()
    entries = existing_entries(path, autotuners, gpu, triton.__version__) if path.is_file() else {}
    choice_entries = existing_entries(path, autotuners, gpu, triton.__version__, "choices") if path.is_file() else {}
    for at in autotuners.values():
        at.cache.clear()
    choices = discover_choices()  # the launchers' run-time choices (decode attention's schedule): timed afresh
    for ch in choices.values():
        ch.cache.clear()
        ch.times.clear()
        ch.committed.clear()
    report = TuneReport(str(path))
    ops = [load_op(n) for n in kernels]
    plan = plan_cases(ops, suite, interleave=time_budget_s is not None)
    l2 = float(l2_size_bytes(0)) if cuda else 0.0
    done: set[tuple[str, tuple]] = set()
    t0 = time.monotonic()
    for i, (op, case) in enumerate(plan):
        if on_case is not None:
            on_case(op.name, case.id, i, len(plan))
        if time_budget_s is not None and time.monotonic() - t0 > time_budget_s:
            report.skipped.append({"op": op.name, "case": case.id, "reason": f"time budget of {time_budget_s:g} s spent"})
            continue
        try:
            if op.supported is not None and not op.supported(case, None):
                report.skipped.append({"op": op.name, "case": case.id, "reason": "not supported on this device"})
                continue
        except Exception:  # noqa: BLE001 - supported() that needs a spec: try the case
            pass
        try:
            gen = torch.Generator().manual_seed(case_seed(seed, case.id))
            inputs = op.make_inputs(case, device, gen)
            fns = rotating_calls(input_sets(op, case, device, seed, inputs, l2), _bind(op.run))()
            timed_before = {name: set(ch.times) for name, ch in choices.items()}
            with Recorder(autotuners, pin_missing=True) as rec:
                fns[0]()
            sync()
            for name, ch in choices.items():  # a choice the case's first call timed (graph replay, both variants)
                for key in set(ch.times) - timed_before[name]:
                    choice_entries.setdefault(name, {})[key] = {
                        "key": key_json(key), "value": ch.cache[key], "case": f"{op.name} {case.id}",
                        "times_us": {v: round(ms * 1e3, 3) for v, ms in ch.times[key].items()}}
            hits = {}
            for c in rec.calls:
                if c.source != "fixed" and c.name in autotuners and (c.name, c.key) not in done:  # not a Choice's call
                    hits.setdefault((c.name, c.key), c.candidates)
            ref = op.reference(**inputs) if hits else None
            tol = float(op.tolerance.get(case.dtype, 0.0))

            def check() -> str | None:
                c = run_check(op.run, inputs, ref, tol, sync)
                return None if c.ok else c.message

            for (name, key), candidates in hits.items():
                chosen, medians, failed = tune_key(autotuners[name], key, fns, rounds, candidates, check)
                done.add((name, key))
                entry = {"key": key_json(key), "config": config_json(chosen), "median_us": round(medians[json.dumps(config_json(chosen), sort_keys=True)] * 1e6, 3), "case": f"{op.name} {case.id}"}
                entries.setdefault(name, {})[key] = entry
                report.tuned.append({**entry, "autotuner": name, "candidates_us": {k: round(v * 1e6, 3) for k, v in medians.items()}, "failed": failed})
        except Exception as e:  # noqa: BLE001 - one case that fails must not stop the others
            report.skipped.append({"op": op.name, "case": case.id, "reason": f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"})
        finally:
            inputs = fns = ref = None  # noqa: F841 - free the case's tensors before the next
            if cuda:
                torch.cuda.empty_cache()
    doc = {
        "schema": "rooflinecli.tuned/1",
        "gpu": gpu,
        "triton": triton.__version__,
        "torch": torch.__version__,
        "created_utc": utc_now(),
        "note": f"roofline tune --suite {suite}: graph replay over rotating inputs, {rounds} interleaved rounds, near-ties within {NEAR_TIE:.0%} to the simpler config",
        "autotuners": {n: [e for _, e in sorted(t.items(), key=lambda kv: json.dumps(key_json(kv[0])))] for n, t in sorted(entries.items())},
    }
    if choice_entries:
        doc["choices"] = {n: [e for _, e in sorted(t.items(), key=lambda kv: json.dumps(key_json(kv[0])))] for n, t in sorted(choice_entries.items())}
    write_json_atomic(path, doc, make_parents=True)
    report.elapsed_s = time.monotonic() - t0
    return report
