"""Per-GPU performance baselines pooled over the last K benchmark runs.

A baseline lives at ``<dir>/<gpu-slug>.json`` (``reports/baselines/nvidia-h200.json``) and is itself a
valid results file (``rooflinecli.results``), so ``roofline regress BASELINE CANDIDATE`` reads it
like any run. Its ``extra["baseline"]`` keeps the last K runs: each run's identity, environment
and, per row, how many of the pooled row's samples are its own, with its host time, % of roof and
tuned config (``results.BASELINE_RUN_ROW``). The samples are stored once, in the pooled rows; a
run's samples are its slice of them. Baselines written in the first format (every stored run kept
whole rows, so every sample twice) are read, and rewritten in the current one by the next update.

Pooling, per row (op, impl, shape, dtype), over the kept runs that have that row:
- ``p50_s`` = the median of the runs' medians, each derived from that run's samples (one slow or
  fast run cannot move it far; ``results.pooled_median_s``);
- ``samples_s`` = the runs' raw samples concatenated, oldest run first, unshifted, so the
  baseline's noise (IQR/median) and the Mann-Whitney test include run-to-run drift, not only
  within-run jitter;
- ``p20_s``/``p80_s`` = quantiles of the pooled samples; achieved TFLOP/s and GB/s recomputed from
  the pooled median; ``host_us_per_call`` = the median over the runs that recorded it (None when
  none did: runs written before the field); the other fields (``config``, ``tuning``, ``backend``,
  ``method``) come from the newest run that has the row, and the row's note says when the runs'
  tuned configs differ.

A stored run that does not add up (a count that does not sum to its row's samples, a row index out
of range), a stored row of the first format with an unknown or missing key or a field of the wrong
type, or a summary its samples contradict is a one-line error naming the baseline file and the
row. Rows whose correctness check failed are not taken into a baseline.

``update_baseline`` holds a lock on the baselines folder while it reads, pools and rewrites a
baseline, so concurrent updates (two CI jobs on one GPU type) serialize and every run is kept.
A baseline never grows past the size every results reader accepts (``MAX_USER_FILE_BYTES``): where
the newest K runs would, the oldest of them are dropped until it fits, and the update says how many.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import struct
from dataclasses import MISSING, dataclass, fields, replace
from datetime import datetime, timezone
from itertools import chain, islice
from pathlib import Path
from typing import Any

from rooflinecli.bulk import bulk
from rooflinecli.errors import MAX_USER_FILE_BYTES, RooflineError, one_line
from rooflinecli.gate.decision import _gpu_of, gpu_slug
from rooflinecli.output import locked, resolve_output
from rooflinecli.results import (BASELINE_FORMAT, BASELINE_FORMAT_V1, BASELINE_RUN_ROW, RESULTS_KIND, ResultRow, Results, baseline_info,
                                 check_row, load_results, load_results_keeping_sample_text, median_s, quantiles_s, row_from_checked, summary_mismatch)

DEFAULT_DIR = "reports/baselines"
DEFAULT_KEEP = 5


#: the prefix of a fingerprint of the current definition (samples hashed as doubles); a stored
#: run without it was fingerprinted by the first one (samples hashed as JSON text)
FINGERPRINT_PREFIX = "d-"


def run_fingerprint(res: Results) -> str:
    """Identity of a run (time, environment, every sample): the same run is not pooled twice.
    The samples are hashed as their IEEE doubles (a row's key and sample count framing them):
    exact, and a tenth of the cost of hashing their JSON text at 100,000 rows."""
    h = hashlib.sha256()
    h.update(json.dumps([res.created_utc, res.environment], sort_keys=True, default=str).encode())
    key_text = json.JSONEncoder().encode  # json.dumps's defaults, without its per-call checks
    packers: dict[int, struct.Struct] = {}
    parts = []
    for r in sorted(res.rows, key=lambda r: r.key):
        n = len(r.samples_s)
        pack = packers.get(n) or packers.setdefault(n, struct.Struct(f"<q{n}d"))
        parts.append(key_text(r.key).encode())
        parts.append(pack.pack(n, *r.samples_s))
    h.update(b"".join(parts))  # one update of the same bytes: the same digest
    return FINGERPRINT_PREFIX + h.hexdigest()[:16]


def _first_fingerprint(res: Results) -> str:
    """A run's fingerprint as baselines written before ``FINGERPRINT_PREFIX`` stored it."""
    h = hashlib.sha256()
    h.update(json.dumps([res.created_utc, res.environment], sort_keys=True, default=str).encode())
    for r in sorted(res.rows, key=lambda r: r.key):
        h.update(json.dumps([r.key, list(r.samples_s)]).encode())
    return h.hexdigest()[:16]


def _already_held(res: Results, fp: str, headers: list[dict[str, Any]]) -> bool:
    """Whether a stored run is ``res`` (fingerprint ``fp``, or the first definition's)."""
    stored = {h.get("fingerprint") for h in headers}
    if fp in stored:
        return True
    old = any(isinstance(x, str) and not x.startswith(FINGERPRINT_PREFIX) for x in stored)
    return old and _first_fingerprint(res) in stored


#: the longest GPU slug that names a baseline file (real names: "nvidia-h200", 11 characters)
MAX_GPU_SLUG = 100


def baseline_path(gpu_name: str, directory: str | Path = DEFAULT_DIR) -> Path:
    return Path(directory) / f"{gpu_slug(gpu_name)}.json"


def baseline_path_for(results: Results, directory: str | Path = DEFAULT_DIR) -> Path:
    gpu = _gpu_of(results)
    if gpu is None:
        raise RooflineError(f"{results.path}: no environment.gpu_name, so its baseline file cannot be named")
    if len(gpu_slug(gpu)) > MAX_GPU_SLUG:  # checked before the folder is made: a 400-character name left it empty
        raise RooflineError(f"{results.path}: environment.gpu_name is {len(gpu):,} characters; a GPU name of at most {MAX_GPU_SLUG} names its baseline file")
    return baseline_path(gpu, directory)


def _run_header(res: Results, fingerprint: str) -> dict[str, Any]:
    """A stored run's identity (its rows are added when the baseline is written)."""
    return {
        "fingerprint": fingerprint,
        "source": res.path,
        "created_utc": res.created_utc,
        "tool_version": res.tool_version,
        "suite": res.suite,
        "hardware_spec": res.hardware_spec,
        "measured_spec": res.measured_spec,
        "environment": res.environment,
    }


def _runs_of(base: Results) -> list[dict[str, Any]]:
    info = baseline_info(base.extra)
    if info is None:
        raise RooflineError(f"{base.path}: not a rooflinecli baseline (no extra.baseline with format '{BASELINE_FORMAT}')")
    keep = info.get("keep", DEFAULT_KEEP)
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise RooflineError(f"{base.path}: extra.baseline.keep must be a positive integer, got {json.dumps(keep)[:40]}")
    for i, run in enumerate(info["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("rows"), list) or not isinstance(run.get("environment", {}), dict):
            raise RooflineError(f"{base.path}: extra.baseline.runs[{i}] is not a stored run (an object with a 'rows' list)")
        for k in _RUN_TEXT:
            v = run.get(k)
            if v is not None and (not isinstance(v, str) or len(v) > 4096):
                raise RooflineError(f"{base.path}: extra.baseline.runs[{i}].{k} must be a string, got {json.dumps(v)[:40]}")
    return info["runs"]


#: a stored run's text fields (shown by ``baseline show``; null allowed)
_RUN_TEXT = ("fingerprint", "source", "created_utc", "tool_version", "suite", "hardware_spec", "measured_spec")


_ROW_FIELDS = {f.name for f in fields(ResultRow)}
_REQUIRED = {f.name for f in fields(ResultRow) if f.default is MISSING and f.default_factory is MISSING}


def _stored_row(raw: Any, where: str) -> ResultRow:
    """A row of a stored run; old runs lack the newer fields (defaults), anything else is refused."""
    if not isinstance(raw, dict):
        raise RooflineError(f"{where}: not an object")
    unknown = set(raw) - _ROW_FIELDS
    missing = _REQUIRED - set(raw)
    if unknown or missing:
        raise RooflineError(f"{where}: " + (f"unknown key '{sorted(unknown)[0]}'" if unknown else f"lacks key '{sorted(missing)[0]}'"))
    check_row(where, raw)
    r = dict(raw)
    samples = r["samples_s"]
    if not isinstance(samples, list) or not samples or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in samples):
        raise RooflineError(f"{where}: 'samples_s' must be a non-empty list of seconds")
    r["samples_s"] = tuple(float(x) for x in samples)
    if not all(math.isfinite(x) and x > 0 for x in r["samples_s"]):
        raise RooflineError(f"{where}: 'samples_s' must be a non-empty list of positive seconds")
    for k in ("p20_s", "p50_s", "p80_s", "flops", "bytes"):
        if r[k] is None:
            raise RooflineError(f"{where}: '{k}' must be a number, got null")
    bad = summary_mismatch(sorted(r["samples_s"]), r)
    if bad is not None:
        raise RooflineError(f"{where}: stored {bad[0]} {bad[1]:.6g} s disagrees with its {len(r['samples_s']):,} samples "
                            f"({bad[0]} of the samples: {bad[2]:.6g} s); summaries are derived from samples, never trusted")
    return row_from_checked(r)


@dataclass(frozen=True)
class _RunRow:
    """One stored run's share of a row: its samples and its own figures."""

    samples_s: tuple[float, ...]
    host_us_per_call: float | None
    pct_of_roof: float | None
    config: dict[str, Any]


def _held(row: ResultRow, samples: tuple[float, ...] | None = None) -> _RunRow:
    return _RunRow(row.samples_s if samples is None else samples, row.host_us_per_call, row.pct_of_roof, row.config)


def stored_runs(base: Results) -> tuple[list[dict[str, Any]], list[dict[tuple, _RunRow]], dict[tuple, ResultRow]]:
    """A loaded baseline's stored runs (oldest first): their headers, each run's rows by key, and
    per key the fields of the newest run that has it (pooled rows carry them; first-format stored
    rows are read and checked whole)."""
    runs = _runs_of(base)
    headers = [{k: v for k, v in run.items() if k != "rows"} for run in runs]
    fields_of: dict[tuple, ResultRow] = {}
    held: list[dict[tuple, _RunRow]] = []
    if baseline_info(base.extra).get("format") == BASELINE_FORMAT_V1:
        for i, run in enumerate(runs):
            mine: dict[tuple, _RunRow] = {}
            for j, raw in enumerate(run["rows"]):
                row = _stored_row(raw, f"{base.path}: extra.baseline.runs[{i}].rows[{j}]")
                mine[row.key] = _held(row)
                fields_of[row.key] = row
            held.append(mine)
        return headers, held, fields_of
    keys = [r.key for r in base.rows]
    offsets = [0] * len(keys)
    for run in runs:  # the reader checked that every run's counts add up (results.stored_run_samples)
        mine = {}
        for i, n, host, pct, config in run["rows"]:
            r = base.rows[i]
            mine[keys[i]] = _RunRow(r.samples_s[offsets[i]:offsets[i] + n], host, pct, config)
            offsets[i] += n
        held.append(mine)
    fields_of = {r.key: r for r in base.rows}
    return headers, held, fields_of


def pool_runs(held: list[dict[tuple, _RunRow]], fields_of: dict[tuple, ResultRow]) -> tuple[ResultRow, ...]:
    """Pool the stored runs' rows (oldest run first) into baseline rows (see the module doc);
    ``fields_of``: per key, the row of the newest run that has it."""
    per_key: dict[tuple, list[_RunRow]] = {}
    for mine in held:
        for key, rr in mine.items():
            per_key.setdefault(key, []).append(rr)
    pooled = []
    for key, rows in per_key.items():  # first seen first: the oldest run's order, then newer rows
        newest, last = fields_of[key], rows[-1]
        samples = rows[0].samples_s if len(rows) == 1 else tuple(chain.from_iterable(r.samples_s for r in rows))
        medians = [median_s(r.samples_s) for r in rows]
        p50 = median_s(medians)  # results.pooled_median_s, each run's median taken once
        p20, _, p80 = quantiles_s(samples)
        pct = last.pct_of_roof * medians[-1] / p50 if last.pct_of_roof is not None else None
        hosts = [r.host_us_per_call for r in rows if r.host_us_per_call is not None]
        configs = {json.dumps(r.config, sort_keys=True, default=str) for r in rows if r.config}
        d = dict(newest.__dict__)
        d.update(
            samples_s=samples, p20_s=p20, p50_s=p50, p80_s=p80,
            achieved_tflops=newest.flops / p50 / 1e12 if newest.flops else newest.achieved_tflops,
            achieved_gb_per_s=newest.bytes / p50 / 1e9 if newest.bytes else newest.achieved_gb_per_s,
            pct_of_roof=pct, config=last.config,
            host_us_per_call=float(statistics.median(hosts)) if hosts else None,
            note=f"baseline: median of {len(rows)} run median(s); {len(samples)} samples pooled from {len(rows)} run(s)"
            + (f"; the runs' tuned configs differ ({len(configs)} distinct), the newest is kept" if len(configs) > 1 else ""),
        )
        pooled.append(row_from_checked(d))
    return tuple(pooled)


def _stored_rows(held: dict[tuple, _RunRow], index: dict[tuple, int]) -> list[list[Any]]:
    """A run's rows as stored: ``results.BASELINE_RUN_ROW`` lists, in pooled-row order."""
    out = [[index[k], len(r.samples_s), r.host_us_per_call, r.pct_of_roof, r.config] for k, r in held.items()]
    out.sort(key=lambda x: x[0])
    return out


@dataclass(frozen=True)
class UpdateOutcome:
    path: Path
    runs: int
    rows: int
    added: bool  # False when this run was already in the baseline
    dropped: int  # runs that fell out of the window
    skipped_incorrect: int
    dropped_for_size: int = 0  # older runs dropped besides, so the file stays readable (MAX_USER_FILE_BYTES)


#: bytes of a results file's head read for its environment before the whole file is parsed
SNIFF_BYTES = 1 << 16


def _sniffed_baseline(results_path: str | Path, directory: str | Path) -> Path | None:
    """The existing baseline file the run at ``results_path`` names in the head of its file
    (``environment.gpu_name`` within the first ``SNIFF_BYTES``), read without parsing the rest; a
    guess that ``update_baseline`` checks once the run is read. None when the head does not say
    or no regular file is there."""
    import stat

    try:
        with open(results_path, "rb") as fh:
            head = fh.read(SNIFF_BYTES).decode("utf-8", "replace")
        i = head.find('"environment"')
        j = head.find("{", i) if i >= 0 else -1
        env, _ = json.JSONDecoder().raw_decode(head, j) if j >= 0 else (None, 0)
    except (OSError, ValueError, RecursionError):
        return None
    gpu = env.get("gpu_name") if isinstance(env, dict) else None
    if not isinstance(gpu, str) or not gpu.strip() or gpu.strip().lower() == "unknown" or len(gpu_slug(gpu.strip())) > MAX_GPU_SLUG:
        return None
    guess = baseline_path(gpu.strip(), directory)
    try:
        return guess if stat.S_ISREG(os.stat(guess).st_mode) else None
    except (OSError, ValueError):
        return None


def _checked_run(res: Results) -> Results:
    if not res.rows:
        raise RooflineError(f"{res.path}: no rows to take into a baseline")
    if isinstance(res.extra.get("baseline"), dict):
        raise RooflineError(f"{res.path}: is itself a baseline; update from a benchmark run's results file")
    return res


def _resolved(path: Path) -> Path:
    try:  # makes the baselines folder (the tool's own); refuses a device, FIFO or non-results file
        resolve_output(path, make_parents=True, kind=RESULTS_KIND)
    except RooflineError as e:
        raise RooflineError(f"baseline {e}") from None
    return path


def _read_run(path: str) -> tuple[Results, list[dict], dict[tuple, str], str]:
    """A run to take into a baseline, read with its samples' text and fingerprinted: (the results
    without rows, the rows' fields as plain dicts, which pickle at twice the speed of the frozen
    rows, per row key the samples' JSON text, the fingerprint), as a forked child sends them."""
    res, text = load_results_keeping_sample_text(path)
    return replace(res, rows=()), [vars(r) for r in res.rows], text, run_fingerprint(res)


def _start_run_read(path: str | Path, beside: Path | None):
    """``_read_run`` started in a forked child when the run and the baseline ``beside`` it are
    both big (``results.BACKGROUND_MIN_BYTES``: a forked child's value costs its pickling), else
    deferred to ``_run_result``."""
    from rooflinecli import forked, results

    def size(p) -> int:
        try:
            return os.stat(p).st_size
        except (OSError, ValueError):
            return 0

    big = beside is not None and min(size(path), size(beside)) >= results.BACKGROUND_MIN_BYTES
    return forked.start(_read_run, str(path), worth_it=big)


def _run_result(pending) -> tuple[Results, dict[tuple, str], str]:
    """The started ``_read_run``'s (results, samples' text, fingerprint), or its one-line error."""
    res, rows, text, fp = pending.result()
    return replace(res, rows=tuple(row_from_checked(d) for d in rows)), text, fp


@bulk
def update_baseline(results_path: str | Path, directory: str | Path = DEFAULT_DIR, keep: int = DEFAULT_KEEP, now: str | None = None) -> UpdateOutcome:
    """Add a run to its GPU's baseline, keep the newest ``keep`` runs, rewrite the pooled rows.

    Two big files (the run and an existing baseline) are read at once: the run in a forked child
    (which fingerprints it too) while this process, holding the folder's lock, reads the baseline
    its head names (``_sniffed_baseline``). Errors come in the serial order (the run's first), and
    a guess the run's rows contradict is dropped for the serial read. The pooled rows' samples are
    written as the text the two files spell them in (``Results.chunks``'s ``sample_text``), so the
    millions of floats of a big baseline are parsed once and never encoded again."""
    if keep < 1:
        raise RooflineError(f"--keep must be >= 1, got {keep}")
    guess = _sniffed_baseline(results_path, directory)
    run = _start_run_read(results_path, guess)
    try:
        got = None
        if run.forked:
            with locked(guess.parent):  # read, pool and rewrite as one step: concurrent updates each keep their run
                try:
                    old, old_error = load_results_keeping_sample_text(guess), None
                except RooflineError as e:
                    old, old_error = None, e
                got = _run_result(run)
                _checked_run(got[0])
                path = baseline_path_for(got[0], directory)
                if path == guess:
                    _resolved(path)
                    if old_error is not None:
                        raise old_error
                    return _pooled_and_written(got, path, old, keep, now)
        got = got if got is not None else _run_result(run)
        _checked_run(got[0])
        path = _resolved(baseline_path_for(got[0], directory))
        with locked(path.parent):  # read, pool and rewrite as one step: concurrent updates each keep their run
            return _pooled_and_written(got, path, load_results_keeping_sample_text(path) if path.exists() else None, keep, now)
    finally:
        run.cancel()


def _pooled_and_written(run: tuple[Results, dict[tuple, str], str], path: Path, old: tuple[Results, dict[tuple, str]] | None, keep: int,
                        now: str | None) -> UpdateOutcome:
    """The baseline at ``path`` (``old``: its results and samples' text, as read under the
    folder's lock) with the run (``_read_run``'s results, samples' text and fingerprint) added,
    pooled and written."""
    res, run_text, fp = run
    headers: list[dict[str, Any]] = []
    held: list[dict[tuple, _RunRow]] = []
    fields_of: dict[tuple, ResultRow] = {}
    old_text: dict[tuple, str] = {}
    if old is not None:
        old, old_text = old
        headers, held, fields_of = stored_runs(old)
        if _gpu_of(old) is None or " ".join(_gpu_of(old).lower().split()) != " ".join(_gpu_of(res).lower().split()):
            raise RooflineError(f"{path}: baseline is for GPU '{one_line(old.gpu_name)}', but {res.path} ran on '{one_line(res.gpu_name)}'; refusing to mix them")
    old_held = list(held)
    added = not _already_held(res, fp, headers)
    if added:
        headers.append(_run_header(res, fp))
        correct = [r for r in res.rows if r.correct]
        held.append({r.key: _held(r) for r in correct})
        fields_of.update((r.key, r) for r in correct)  # the newest run's fields
    dropped = max(0, len(headers) - keep)
    headers, held = headers[dropped:], held[dropped:]
    for_size = _surely_over(old, held)
    headers, held = headers[for_size:], held[for_size:]
    while True:
        base = _pooled(res, headers, held, fields_of, keep, now)
        gone = dropped + for_size  # the oldest runs dropped: all stored ones (the newest run stays)
        text = base.chunks(_sample_text(base.rows, old_held, gone, old_text, held[-1] if added else None, run_text))
        size = sum(map(len, text))
        if size <= MAX_USER_FILE_BYTES or len(headers) == 1:
            break
        k = _oldest_over(held, size)
        headers, held, for_size = headers[k:], held[k:], for_size + k
    try:
        base.save(path, text=text)
    except RooflineError as e:
        raise RooflineError(f"baseline {e}") from None
    return UpdateOutcome(path=path, runs=len(headers), rows=len(base.rows), added=added, dropped=dropped, skipped_incorrect=sum(1 for r in res.rows if not r.correct),
                         dropped_for_size=for_size)


def _sample_text(rows: tuple[ResultRow, ...], old_held: list[dict[tuple, _RunRow]], gone: int, old_text: dict[tuple, str],
                 new: dict[tuple, _RunRow] | None, run_text: dict[tuple, str]) -> dict[tuple, str]:
    """Per pooled row key, the JSON text of its samples, cut from the files' own: the old pooled
    row's array less the samples of the ``gone`` oldest stored runs (a prefix: runs are pooled
    oldest first), then the new run's array (``new``: its rows, when it was added). A row whose
    text is not known (a first-format baseline, a file in another layout) or does not count its
    samples is left out: it is encoded."""
    stored: dict[tuple, int] = {}
    cut: dict[tuple, int] = {}
    for mine in old_held[:gone]:
        for key, rr in mine.items():
            cut[key] = cut.get(key, 0) + len(rr.samples_s)
    if cut:
        for mine in old_held:
            for key, rr in mine.items():
                stored[key] = stored.get(key, 0) + len(rr.samples_s)
    else:  # nothing cut: a row has stored samples when a stored run holds it
        stored = dict.fromkeys(chain.from_iterable(old_held), 1)
    out: dict[tuple, str] = {}
    for row in rows:
        key = row.key
        parts = []
        d = cut.get(key, 0)
        if stored.get(key, 0) > d:
            t = old_text.get(key)
            if t is None:
                continue
            inner = t[1:-1]
            parts.append((inner.split(",", d)[d] if d else inner).strip())
        if new is not None and key in new:
            t = run_text.get(key)
            if t is None:
                continue
            parts.append(t[1:-1].strip())
        text = "[" + ", ".join(parts) + "]"
        if text.count(",") + 1 == len(row.samples_s):
            out[key] = text
    return out


def _pooled(res: Results, headers: list[dict[str, Any]], held: list[dict[tuple, _RunRow]], fields_of: dict[tuple, ResultRow], keep: int, now: str | None) -> Results:
    """The baseline of the stored runs ``headers`` / ``held`` (oldest first), pooled."""
    rows = pool_runs(held, fields_of)
    if not rows:
        raise RooflineError(f"{res.path}: every row failed its correctness check; nothing to take into a baseline")
    index = {r.key: i for i, r in enumerate(rows)}
    runs = [{**h, "rows": _stored_rows(mine, index)} for h, mine in zip(headers, held)]
    newest = headers[-1]
    return Results(
        rows=rows,
        environment=dict(newest.get("environment") or {}),
        created_utc=now or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        tool_version=str(newest.get("tool_version") or ""),
        suite=str(newest.get("suite") or "full"),
        hardware_spec=newest.get("hardware_spec"),
        measured_spec=newest.get("measured_spec"),
        extra={"baseline": {"format": BASELINE_FORMAT, "keep": keep, "pooling": "p50_s = median of run medians; samples_s = raw samples of the runs concatenated, oldest run first",
                            "run_row": list(BASELINE_RUN_ROW), "runs": runs}},
    )


def _surely_over(old: Results | None, held: list[dict[tuple, _RunRow]]) -> int:
    """How many of the oldest runs ``held`` must go before a baseline of the rest can fit under
    ``MAX_USER_FILE_BYTES``, estimated from the old file (its size, less its samples' text, plus the
    text of the samples held, at the bytes per sample of up to 1,000 rows of them) and counted
    only while the estimate is over by 3% or more: the exact check after encoding drops the rest,
    so a run that fits is never dropped on a guess. Saves encoding a too-big baseline first."""
    try:
        size = os.stat(old.path).st_size if old is not None and old.path else 0
    except (OSError, ValueError):
        return 0
    if not size or size < MAX_USER_FILE_BYTES // 2:
        return 0
    rows = [r.samples_s for mine in held for r in islice(mine.values(), 1000)]
    n = sum(map(len, rows))
    per_sample = sum(len(repr(x)) + 2 for s in rows for x in s) / n if n else 0.0
    counts = _sample_counts(held)
    old_samples = sum(len(r.samples_s) for r in old.rows)
    return _drop_until(counts, lambda k: size + per_sample * (sum(counts[k:]) - old_samples), MAX_USER_FILE_BYTES * 1.03)


def _oldest_over(held: list[dict[tuple, _RunRow]], size: int) -> int:
    """How many of the oldest runs to drop (at least one, never the newest) so that a baseline of
    ``size`` bytes, whose text is mostly its samples, comes under ``MAX_USER_FILE_BYTES``: each
    run's share of the bytes taken as its share of the samples."""
    counts = _sample_counts(held)
    per_sample = size / max(1, sum(counts))
    return _drop_until(counts, lambda k: per_sample * sum(counts[k:]), MAX_USER_FILE_BYTES * 0.99, at_least=1)


def _sample_counts(held: list[dict[tuple, _RunRow]]) -> list[int]:
    return [sum(len(r.samples_s) for r in mine.values()) for mine in held]


def _drop_until(counts: list[int], size_without, limit: float, at_least: int = 0) -> int:
    """The fewest oldest runs (from ``at_least``, never the newest) whose dropping brings the
    estimated size ``size_without(k)`` (bytes with the oldest k runs gone) to ``limit`` or under."""
    k = at_least
    while k < len(counts) - 1 and size_without(k) > limit:
        k += 1
    return k


@dataclass(frozen=True)
class BaselineInfo:
    path: Path
    gpu_name: str
    updated_utc: str
    keep: int
    runs: tuple[dict[str, Any], ...]  # created_utc, source, fingerprint, rows
    results: Results


def load_baseline(path: str | Path) -> BaselineInfo:
    res = load_results(path)
    runs = _runs_of(res)
    info = res.extra["baseline"]
    return BaselineInfo(
        path=Path(path), gpu_name=res.gpu_name, updated_utc=res.created_utc, keep=int(info.get("keep", DEFAULT_KEEP)),
        runs=tuple({"created_utc": r.get("created_utc"), "source": r.get("source"), "fingerprint": r.get("fingerprint"), "rows": len(r.get("rows", []))} for r in runs),
        results=res,
    )


def list_baselines(directory: str | Path = DEFAULT_DIR) -> list[BaselineInfo]:
    d = Path(directory)
    if not d.is_dir():
        return []
    return [load_baseline(p) for p in sorted(d.glob("*.json"))]


def resolve_baseline(name_or_path: str, directory: str | Path = DEFAULT_DIR) -> Path:
    """A baseline file path, a GPU slug ('nvidia-h200') or a GPU name ('NVIDIA H200')."""
    p = Path(name_or_path)
    if p.suffix == ".json" and p.exists():
        return p
    cand = baseline_path(name_or_path, directory)
    if cand.exists():
        return cand
    known = sorted(x.stem for x in Path(directory).glob("*.json")) if Path(directory).is_dir() else []
    raise RooflineError(f"no baseline '{name_or_path}' in {directory}; known: {', '.join(known) if known else '(none)'}")
