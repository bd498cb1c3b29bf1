"""The calibration file ``roofline calibrate`` writes (``achievable.calibration.SCHEMA``): the grid's
rows, the sustained ceilings, the method and the run's environment, and the checkpoint writer that
keeps it on disk while the grid runs (a run killed by its timeout keeps its last checkpoint)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rooflinecli.achievable.calibration import SCHEMA
from rooflinecli.bench import timing
from rooflinecli.bench.opgrid import MAX_SETS, REPLAYS, GridResult

METHOD = (
    "graph: per-launch time = median over {replays} replays of a CUDA graph of n launches cycling over "
    "`sets` input sets that together exceed {cold:g}x L2 (at most {max_sets} sets; tiny ops stay L2-resident), "
    "divided by n; eager: median of CUDA-event-timed single launches (host gaps included). Random bf16 "
    "inputs (never zeros). SDPA: fastest of the cuDNN, flash, efficient and default-dispatch backends "
    "(GQA through enable_gqa, else K/V expanded to H heads outside the timed region), recorded per row"
)


def calibration_doc(result: GridResult, environment: dict[str, Any], l2_bytes: int, sustained: dict[str, float], extra_rows: list[dict[str, Any]] = (), budget_s: float | None = None) -> dict[str, Any]:
    """The calibration file's JSON document."""
    from rooflinecli.bench.environment import utc_now

    method = METHOD.format(replays=REPLAYS, cold=timing.COLD_L2_MULTIPLE, max_sets=MAX_SETS)
    if environment.get("device") == "cpu":
        method = "CPU wall clock (dry run, not a GPU measurement); " + method
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "created_utc": utc_now(),
        "gpu": environment.get("gpu_name"),
        "environment": dict(environment),
        "method": method,
        "l2_bytes": int(l2_bytes),
        "rows": list(result.rows) + list(extra_rows),
        "sustained": dict(sustained),
    }
    doc["failed"] = list(result.failed)
    doc["grid"] = {"elapsed_s": result.elapsed_s, "budget_s": budget_s, "skipped_for_budget": result.skipped}
    return doc


def calibration_checkpointer(path: Path, environment: Mapping[str, Any], l2_bytes: int, sustained: Mapping[str, float],
                             extra_rows: Sequence[dict[str, Any]], budget_s: float | None) -> Callable[[GridResult], None]:
    """``checkpoint(result)``: the calibration file of the grid so far, written atomically to ``path``."""
    from rooflinecli.output import write_json_atomic

    def checkpoint(result: GridResult) -> None:
        write_json_atomic(path, calibration_doc(result, dict(environment), l2_bytes, dict(sustained), list(extra_rows), budget_s),
                          kind="rooflinecli.calibration/")  # never over a file of another kind

    return checkpoint
