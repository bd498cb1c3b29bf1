"""``roofline serve``'s figures for one configuration: the steady state (aggregated or
disaggregated, closed or open loop), with the roof beside, and optionally the simulation."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rooflinecli.analysis.memory import kv_cache_bytes_per_gpu
from rooflinecli.analysis.ops import link_bytes_per_s_one_way
from rooflinecli.analysis.workload import Workload
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

from .replica import DEFAULT_MEMORY_FRACTION, DEFAULT_TOKEN_BUDGET, Replica
from .replica import build_replica as _build
from .steady import DisaggPools, Lengths, aggregated_closed, aggregated_open, disagg_closed, disagg_open

#: the per-request figures every serve result carries (JSON keys)
FIGURES = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_wait_s", "requests_per_s", "throughput_tokens_per_s_per_gpu",
           "input_tokens_per_s_per_gpu", "tokens_per_s_per_user")


@dataclass(frozen=True)
class Load:
    """A fixed concurrency (closed loop) or an arrival rate (open loop, requests/s): one of them."""

    concurrency: int | None = None
    rate_per_s: float | None = None

    def check(self) -> Load:
        if (self.concurrency is None) == (self.rate_per_s is None):
            raise RooflineError("give one load: --concurrency C (clients, closed loop) or --rate R (requests/s, open loop)")
        if self.concurrency is not None and (isinstance(self.concurrency, bool) or self.concurrency < 1):
            raise RooflineError(f"--concurrency must be a whole number >= 1, got {self.concurrency!r}")
        if self.rate_per_s is not None and not self.rate_per_s > 0:
            raise RooflineError(f"--rate must be > 0 requests/s, got {self.rate_per_s:g}")
        return self


def parse_disagg(text: str | None) -> tuple[int, int] | None:
    """``--disagg P:D``: prefill and decode instance counts."""
    if text is None or not text.strip():
        return None
    p, sep, d = text.strip().partition(":")
    if not sep or not p.strip().isdigit() or not d.strip().isdigit() or int(p) < 1 or int(d) < 1:
        raise RooflineError(f"--disagg must be P:D, whole numbers >= 1 of prefill and decode instances (e.g. 1:3), got '{text}'")
    return int(p), int(d)


def kv_transfer_s(cfg: ModelConfig, spec: HardwareSpec, prefill: Workload, decode: Workload, isl: int) -> float:
    """One sequence's KV cache of ``isl`` tokens from the prefill GPUs to the decode GPUs: each
    prefill GPU sends its share over its own link, one way (``ops.link_bytes_per_s_one_way``); a
    receiving side with fewer GPUs takes it at its own links' rate."""
    per_gpu_sent = float(kv_cache_bytes_per_gpu(cfg, prefill, float(isl), 1.0))
    total = per_gpu_sent * prefill.tp
    lanes = min(prefill.tp, decode.tp)
    return total / lanes / link_bytes_per_s_one_way(spec)


def calibration_source(spec: HardwareSpec, table) -> dict | None:
    """Where the achievable step times come from (the calibration's own description), or None
    when the figures are the roof's."""
    if table.engine is None:
        return None
    from rooflinecli.achievable import calibration_for

    cal = calibration_for(spec, table.engine)
    if cal is None:
        return None
    d = cal.describe()
    return {**{k: d[k] for k in ("path", "gpu", "created_utc", "source") if k in d}, "spec": spec.id, "engine": table.engine}


def _scalars(d: dict) -> dict:
    return {k: float(np.asarray(v)) for k, v in d.items() if np.asarray(v).shape == ()}


def steady_aggregated(rep: Replica, isl: int, osl: int, load: Load, token_budget: int, roof: bool = False) -> dict:
    lengths = Lengths(isl, osl)
    if load.concurrency is not None:
        return _scalars(aggregated_closed(rep.table, lengths, float(load.concurrency), rep.kv_limit, token_budget, roof))
    return _scalars(aggregated_open(rep.table, lengths, float(load.rate_per_s), rep.kv_limit, token_budget, roof))


def replica_key(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, **kw) -> tuple:
    """The key ``serve_point`` keeps a replica under in its ``replicas`` dict."""
    return (cfg.name, repr(cfg.quantization), spec.id, repr(wl), tuple(sorted(kw.items())))


def serve_point(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, *, isl: int, osl: int, load: Load, disagg: tuple[int, int] | None = None,
                prefill_tp: int | None = None, decode_tp: int | None = None, decode_ep: int | None = None,
                token_budget: int = DEFAULT_TOKEN_BUDGET, memory_fraction: float = DEFAULT_MEMORY_FRACTION, max_seqs: int | None = None,
                replicas: dict | None = None) -> dict:
    """The steady-state figures of one configuration, as ``roofline serve --json`` prints them.
    ``replicas``: a dict that keeps the replicas built, for many loads of the same configurations."""
    load.check()

    def build_replica(cfg, spec, wl, **kw):
        if replicas is None:
            return _build(cfg, spec, wl, **kw)
        key = replica_key(cfg, spec, wl, **kw)
        if key not in replicas:
            replicas[key] = _build(cfg, spec, wl, **kw)
        return replicas[key]

    notes: list[str] = []
    if disagg is None:
        rep = build_replica(cfg, spec, wl, isl=isl, osl=osl, token_budget=token_budget, memory_fraction=memory_fraction, max_seqs=max_seqs)
        notes += rep.notes
        fig = steady_aggregated(rep, isl, osl, load, token_budget)
        roof_fig = steady_aggregated(rep, isl, osl, load, token_budget, roof=True)
        if load.concurrency is not None and load.concurrency > rep.kv_limit:
            notes.append(f"--concurrency {load.concurrency:,} is beyond the KV cache's {rep.kv_limit:,} sequences of {isl + osl:,} tokens: "
                         f"{rep.kv_limit:,} run, the other {load.concurrency - rep.kv_limit:,} wait in the engine's queue (TTFT includes the wait)")
        gpus = rep.num_gpus
        layout = {"tp": rep.workload.tp, "ep": rep.workload.ep, "attention_dp": rep.workload.attention_dp, "gpus": gpus}
        memory = rep.memory_at(fig.get("n", 0.0))
        kv_limit = rep.kv_limit
        table = rep.table
    else:
        P, D = disagg
        wl_p = replace(wl, tp=prefill_tp or wl.tp)
        wl_d = replace(wl, tp=decode_tp or wl.tp, ep=decode_ep or wl.ep)
        rp = build_replica(cfg, spec, wl_p, isl=isl, osl=1, token_budget=token_budget, memory_fraction=memory_fraction, max_seqs=max_seqs)
        rd = build_replica(cfg, spec, wl_d, isl=isl, osl=osl, token_budget=token_budget, memory_fraction=memory_fraction, max_seqs=max_seqs)
        notes += list(dict.fromkeys(rp.notes + rd.notes))
        pools = DisaggPools(rp.table, rd.table, P, D, kv_transfer_s(cfg, spec, rp.workload, rd.workload, isl), rd.kv_limit)
        lengths = Lengths(isl, osl)
        if load.concurrency is not None:
            fig = _scalars(disagg_closed(pools, lengths, float(load.concurrency)))
            roof_fig = _scalars(disagg_closed(pools, lengths, float(load.concurrency), roof=True))
        else:
            fig = _scalars(disagg_open(pools, lengths, float(load.rate_per_s)))
            roof_fig = _scalars(disagg_open(pools, lengths, float(load.rate_per_s), roof=True))
        if load.concurrency is not None and load.concurrency > D * rd.kv_limit:
            notes.append(f"--concurrency {load.concurrency:,} is beyond the decode pool's KV cache of {D * rd.kv_limit:,} sequences: the rest wait")
        gpus = pools.num_gpus
        layout = {"prefill_instances": P, "decode_instances": D, "prefill_tp": rp.workload.tp, "decode_tp": rd.workload.tp,
                  "decode_ep": rd.workload.ep, "gpus": gpus}
        memory = {"prefill": rp.memory_at(1.0), "decode": rd.memory_at(fig.get("n", 0.0))}
        kv_limit = rd.kv_limit
        table = rd.table
    out = {
        "model": cfg.name,
        "hardware": spec.id,
        "serving": "disaggregated" if disagg else "aggregated",
        "mode": table.mode,
        "engine": wl.engine,
        "calibration": calibration_source(spec, table),
        "isl_tokens": isl,
        "osl_tokens": osl,
        "concurrency": load.concurrency,
        "rate_requests_per_s": load.rate_per_s,
        "token_budget_tokens": token_budget,
        "memory_fraction": memory_fraction,
        "kv_limit_sequences": kv_limit,
        "running_sequences": fig.get("n"),
        "layout": layout,
        **{k: fig[k] for k in FIGURES if k in fig},
        "roof": {k: roof_fig[k] for k in FIGURES if k in roof_fig},
        "memory_bytes_per_gpu": memory,
        "notes": notes,
    }
    if disagg:
        out["kv_transfer_s"] = fig.get("kv_transfer_s")
    return out
