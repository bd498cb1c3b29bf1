"""End-to-end points of ``roofline validate``: the decoder-layer checks of ``roofline e2e`` and the
whole-model points of ``e2e --full``, each predicted by the one prediction path
(``rooflinecli.predict.predict_step_s``) in every mode, with its error and the roof flags."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rooflinecli.bench.fit import error_stats, rel_error
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.results import Results


def end_to_end_checks(results: Results) -> list[dict[str, Any]]:
    """Errors of the end-to-end layer checks stored by ``roofline e2e`` (``extra.end_to_end``)."""
    e2e = results.extra.get("end_to_end") if isinstance(results.extra, dict) else None
    if not e2e:
        return []
    out = []
    for p in e2e.get("phases", []):
        m = p.get("measured_s")
        if not m:
            continue
        q = dict(p)
        for basis in ("datasheet", "measured", "fitted"):
            t = p.get(f"predicted_s_{basis}")
            q[f"error_{basis}"] = rel_error(t, m) if t else None
        out.append(q)
    return out


# ---- whole-model end to end (e2e --full) ----------------------------------------------------------

#: predictors of a whole-model point: (key, mode of ``rooflinecli.predict``, label)
E2E_PREDICTORS = (("roof", "datasheet", "roof (datasheet)"), ("roof_measured", "measured-roof", "roof (measured roof)"),
                  ("achievable", "achievable", "achievable model"))
#: a point faster than a roof by more than this is flagged (the roof must stay a bound)
ROOF_SLACK = 0.03


def predict_point(cfg, ds: HardwareSpec | None, ms: HardwareSpec | None, phase: str, batch: int, context: int, engine: str, notes: list[str]) -> dict[str, float | None]:
    """{predictor: seconds or None}: each mode of the one prediction path (``predict_step_s``) on
    the measured spec (datasheet: the datasheet spec, else the measured spec's base); achievable for torch engine points only."""
    from rooflinecli.analysis import Workload
    from rooflinecli.predict import predict_step_s

    out: dict[str, float | None] = {}
    wl = Workload(batch=batch, prompt_len=context, gen_len=1)
    for key, mode, _ in E2E_PREDICTORS:
        out[key] = None
        spec = ms if mode != "datasheet" else (ds or ms)
        if spec is None or (mode == "achievable" and engine != "torch"):
            continue
        try:
            out[key] = predict_step_s(cfg, spec, wl, phase, batch, context, mode=mode, engine="torch")
        except RooflineError as e:  # a predictor that cannot run leaves its column empty, said in the notes
            note = f"{key} prediction unavailable: {' '.join(str(e).split())[:200]}"
            if note not in notes:
                notes.append(note)
    return out


def end_to_end_full_checks(results: Results, ds: HardwareSpec | None, ms: HardwareSpec | None, notes: list[str]) -> list[dict[str, Any]]:
    """Per whole-model point of ``extra.end_to_end_full``: measured, each predictor and its error."""
    from rooflinecli.bench.e2e_full import rebuild_config

    section = results.extra.get("end_to_end_full") if isinstance(results.extra, dict) else None
    if not isinstance(section, dict):
        return []
    out = []
    for name, entry in (section.get("models") or {}).items():
        try:
            cfg = rebuild_config(entry["model_ref"], entry.get("config"))
        except (RooflineError, KeyError, TypeError, ValueError) as e:
            notes.append(f"e2e {name}: cannot rebuild its config ({e}); not predicted")
            continue
        for p in entry.get("points", []):
            m = p.get("measured_s")
            if not m:
                continue
            pred = predict_point(cfg, ds, ms, p["phase"], int(p["batch"]), int(p["context"]), p.get("engine", "torch"), notes)
            q = {"model": name, "layers": entry.get("layers_used"), "layers_full": entry.get("layers_full"), "reduced": bool(entry.get("reduced")),
                 "phase": p["phase"], "engine": p.get("engine", "torch"), "batch": p["batch"], "context": p["context"], "measured_s": m}
            for key, _, _ in E2E_PREDICTORS:
                q[f"predicted_s_{key}"] = pred[key]
                q[f"error_{key}"] = rel_error(pred[key], m) if pred[key] else None
            q["faster_than_roof"] = bool(pred["roof"] and m < pred["roof"] * (1 - ROOF_SLACK))
            q["faster_than_measured_roof"] = bool(pred["roof_measured"] and m < pred["roof_measured"] * (1 - ROOF_SLACK))
            out.append(q)
    return out


def e2e_full_stats(points: Sequence[dict[str, Any]], engine: str = "torch") -> dict[str, dict[str, Any]]:
    """Per predictor: median and p90 |error| over the points of ``engine``, overall and per phase."""
    mine = [p for p in points if p["engine"] == engine]
    out = {}
    for key, _, _ in E2E_PREDICTORS:
        out[key] = {"all": error_stats(p[f"error_{key}"] for p in mine).to_json()}
        for phase in ("decode", "prefill"):
            out[key][phase] = error_stats(p[f"error_{key}"] for p in mine if p["phase"] == phase).to_json()
    return out


def e2e_full_flags(points: Sequence[dict[str, Any]]) -> list[str]:
    out = []
    for p in points:
        for flag, key, what in (("faster_than_roof", "roof", "datasheet roof"), ("faster_than_measured_roof", "roof_measured", "measured-ceiling roof")):
            if p.get(flag):
                out.append(f"e2e {p['model']} {p['phase']} {p['engine']} B{p['batch']} N{p['context']}: measured {p['measured_s'] * 1e6:.1f} us is "
                           f"more than {ROOF_SLACK:.0%} faster than the {what} {p[f'predicted_s_{key}'] * 1e6:.1f} us (the roof must bound it: a counting error)")
    return out
