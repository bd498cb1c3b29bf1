"""The analytical model's golden file: predictions for every preset model on fixed GPUs at a fixed
workload, so that a change to any formula, spec file or preset that moves a number is a deliberate,
reviewed update of ``tests/golden/predictions.json`` (``roofline golden --update``), never a
silent drift. ``tests/gate/test_golden.py`` recomputes every number and fails on any relative change
beyond ``RTOL``, listing what moved.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rooflinecli.errors import RooflineError

SCHEMA = "rooflinecli.golden/1"
RTOL = 1e-9
#: a golden file's tolerance must be below this: at 1% a moved formula could pass unnoticed
MAX_RTOL = 0.01
HARDWARE = ("h100-sxm", "h200")
#: batch 8, 896-token prompts, 128 generated tokens: the last context (1023) stays inside every
#: preset's trained window (GPT-2: 1024), so no prediction is a what-if beyond it.
WORKLOAD = {"batch": 8, "prompt_len": 896, "gen_len": 128}
KV_DTYPE_BYTES = 2.0  # KV bytes per token are recorded for a bf16 cache
REGENERATE_COMMAND = "roofline golden --update   (or: python -m rooflinecli golden --update)"


def default_path() -> Path:
    """tests/golden/predictions.json of the source checkout this package runs from."""
    root = Path(__file__).resolve().parents[2]
    tests = root / "tests"
    if not tests.is_dir():
        raise RooflineError(f"no tests/ folder beside the package at {root} (not a source checkout); pass --path")
    return tests / "golden" / "predictions.json"


def _phase(p) -> dict[str, float]:
    return {"time_s": float(p.time_s), "flops": float(p.totals["flops"]), "bytes": float(p.totals["bytes"])}


def compute_golden() -> dict[str, Any]:
    """Every golden number, recomputed from the current model."""
    from rooflinecli import kv, params
    from rooflinecli.analysis import Workload
    from rooflinecli.predict import analyze
    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_model, preset_ids

    wl = Workload(**WORKLOAD)
    specs = {h: get_spec(h) for h in HARDWARE}
    entries: dict[str, Any] = {}
    for mid in preset_ids():
        cfg = get_model(mid)
        e: dict[str, Any] = {
            "total_params": float(params.total_params(cfg)),
            "active_params": float(params.active_params(cfg)),
            "kv_bytes_per_token_bf16": float(kv.kv_bytes_per_token(cfg, KV_DTYPE_BYTES)),
        }
        for hid, spec in specs.items():
            a = analyze(cfg, spec, wl)
            pre, dec = _phase(a.prefill), _phase(a.decode)
            h = {
                "ttft_s": float(a.ttft_s),
                "prefill_flops": pre["flops"],
                "prefill_bytes": pre["bytes"],
                "tpot_s": float(a.tpot_s),
                "tpot_first_s": float(a.tpot_first_s),
                "tpot_last_s": float(a.tpot_last_s),
                "decode_step_flops": dec["flops"],
                "decode_step_bytes": dec["bytes"],
            }
            if a.decode_naive_mla is not None:
                h["tpot_naive_mla_s"] = float(a.decode_naive_mla.time_s)
            e[hid] = h
        entries[mid] = e
    return {
        "schema": SCHEMA,
        "about": "Analytical predictions of rooflinecli for every preset model; tests/gate/test_golden.py fails when any moves. "
                 f"Regenerate deliberately with: {REGENERATE_COMMAND}",
        "workload": dict(WORKLOAD, compute_dtype="bf16", weight_dtype="bf16", kv_dtype="bf16", tp=1, efficiency="1.0 (datasheet roofline)"),
        "hardware": list(HARDWARE),
        "rtol": RTOL,
        "entries": entries,
    }


def flatten(entries: dict[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in entries.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def diff(expected: dict[str, Any], actual: dict[str, Any], rtol: float = RTOL) -> list[str]:
    """One line per number that moved, appeared or disappeared."""
    e, a = flatten(expected), flatten(actual)
    lines = []
    for k in sorted(e.keys() | a.keys()):
        if k not in a:
            lines.append(f"{k}: in the golden file ({e[k]!r}) but no longer computed")
        elif k not in e:
            lines.append(f"{k}: computed ({a[k]!r}) but not in the golden file")
        else:
            x, y = e[k], a[k]
            if isinstance(x, (int, float)) and isinstance(y, (int, float)):
                if not math.isclose(x, y, rel_tol=rtol, abs_tol=0.0):
                    rel = (y - x) / x if x else math.inf
                    lines.append(f"{k}: {x!r} -> {y!r} ({rel:+.3e} relative)")
            elif x != y:
                lines.append(f"{k}: {x!r} -> {y!r}")
    return lines


def load_golden(path: str | Path) -> dict[str, Any]:
    from rooflinecli.errors import parse_json_text, read_user_file

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise RooflineError(f"{path}: no golden file; create it with: {REGENERATE_COMMAND}")
    data = parse_json_text(read_user_file(path, "golden file"), str(path))
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("entries"), dict):
        raise RooflineError(f"{path}: not a golden file of schema '{SCHEMA}'")
    rtol = data.get("rtol", RTOL)
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not 0 <= rtol < MAX_RTOL:
        raise RooflineError(f"{path}: 'rtol' must be a relative tolerance in [0, {MAX_RTOL:g}), got {json.dumps(rtol)[:40]}")
    return data


def check_golden(path: str | Path) -> list[str]:
    """Lines describing every golden number that moved (empty: all unchanged)."""
    data = load_golden(path)
    current = compute_golden()
    lines = []
    if data.get("workload") != current["workload"] or data.get("hardware") != current["hardware"]:
        lines.append(f"workload/hardware: {data.get('workload')} on {data.get('hardware')} -> {current['workload']} on {current['hardware']}")
    return lines + diff(data["entries"], current["entries"], float(data.get("rtol", RTOL)))


def write_golden(path: str | Path) -> dict[str, Any]:
    from rooflinecli.output import write_json_atomic

    data = compute_golden()
    try:
        write_json_atomic(path, data, kind="rooflinecli.golden/")  # never over a file of another kind
    except OSError as e:  # a folder in the way, no permission: one line, exit 2
        raise RooflineError(f"--path {path}: cannot write: {e.strerror or e}") from None
    return data
