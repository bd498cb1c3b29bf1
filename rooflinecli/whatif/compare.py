"""``roofline compare``: one workload across GPUs, or across attention variants of one model, each
row a full ``analysis.analyze`` run."""

from __future__ import annotations

from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

#: fields of ``Analysis.to_json()`` each comparison row keeps (dotted paths)
ROW_FIELDS: tuple[str, ...] = (
    "mode",
    "ttft_s",
    "tpot_s",
    "roof_ttft_s",
    "roof_tpot_s",
    "prefill.time_s",
    "prefill.bound",
    "decode.bound",
    "memory.weights_bytes",
    "memory.kv_cache_bytes",
    "memory.fits",
)


def _get(obj: dict, dotted: str):
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def summary_row(label: str, cfg: ModelConfig, spec: HardwareSpec, wl, mode: str | None = "roof", price_for=None) -> dict:
    """One analyze run reduced to a flat row with units in the keys. ``mode`` None: achievable on
    a calibrated spec, roof otherwise (``predict.resolve_mode``). ``price_for``: spec -> USD per
    GPU-hour (None: the workload's one price)."""
    from dataclasses import replace

    from rooflinecli.predict import analyze, resolve_mode

    price = {"price_per_gpu_hour": price_for(spec)} if price_for is not None else {}
    j = analyze(cfg, spec, replace(wl, mode=resolve_mode(spec, mode, wl.engine), **price)).to_json()
    row = {"label": label, "model": cfg.name, "hw": spec.id, "price_usd_per_gpu_hour": j["workload"].get("price_per_gpu_hour")}
    for f in ROW_FIELDS:
        row[f.replace(".", "_")] = _get(j, f)
    tpot = row["tpot_s"]
    row["decode_tokens_per_s"] = wl.batch / tpot if tpot else None
    row["decode_tokens_per_s_per_gpu"] = row["decode_tokens_per_s"] / wl.num_gpus if tpot else None
    for extra in ("e2e_latency_s", "cost_per_million_output_tokens_usd", "decode_compute_bound_batch"):
        if extra in j:
            row[extra] = j[extra]
    return row


def compare_gpus(cfg: ModelConfig, specs: list[HardwareSpec], wl, mode: str | None = "roof", price_for=None) -> list[dict]:
    return [summary_row(spec.id, cfg, spec, wl, mode, price_for) for spec in specs]


def compare_variants(cfg: ModelConfig, spec: HardwareSpec, wl, kinds: list[str], mode: str | None = "roof", price_for=None) -> list[dict]:
    """The model as configured (label "* <kind>"), then each other attention variant of it."""
    from rooflinecli.analysis import with_attention_variant
    from rooflinecli.whatif.kv_variants import variant_label

    configured = variant_label(cfg)
    rows = [summary_row(f"* {configured}", cfg, spec, wl, mode, price_for)]
    for kind in kinds:
        if kind == configured:
            continue  # the configured model already is this variant
        rows.append(summary_row(kind, with_attention_variant(cfg, kind), spec, wl, mode, price_for))
    return rows
