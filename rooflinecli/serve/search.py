"""SLO search: every layout of a GPU budget, aggregated and disaggregated, at every load.

Candidates: each replica layout (TP, and for MoE models EP with attention data parallel when
EP > TP) that fits in memory, as aggregated replicas (as many as the budget holds) at each
concurrency per replica, and as disaggregated pools (a prefill layout x a decode layout x
prefill and decode instance counts within the budget) at each concurrency per decode instance.
One step table per layout, then every candidate of that layout at once (the steady state is
vectorized over loads and pool sizes). The frontier: the candidates no other beats on both
tokens/s per GPU and tokens/s per user. The best for the SLO: the most tokens/s per GPU among
those that meet it; when none does, the nearest (the smallest worst ratio of figure to target).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooflinecli.analysis.workload import Workload
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

from .replica import DEFAULT_MEMORY_FRACTION, DEFAULT_TOKEN_BUDGET, build_replica
from .run import kv_transfer_s
from .steady import DisaggPools, Lengths, aggregated_closed, disagg_at_decode_batch

#: concurrencies tried per replica (aggregated) or per decode instance (disaggregated)
CONCURRENCY_POINTS = 40
#: columns of the candidate table, in order
COLUMNS = ("serving", "replicas", "prefill_instances", "decode_instances", "tp", "ep", "attention_dp", "prefill_tp",
           "gpus_used", "concurrency", "ttft_s", "tpot_s", "throughput_tokens_per_s_per_gpu", "tokens_per_s_per_user", "meets_slo", "on_frontier")


@dataclass(frozen=True)
class Slo:
    ttft_s: float | None = None
    tpot_s: float | None = None
    min_tokens_per_s_per_user: float | None = None

    def check(self) -> Slo:
        for name, v in (("--ttft-ms", self.ttft_s), ("--tpot-ms", self.tpot_s), ("--min-tokens-per-s-per-user", self.min_tokens_per_s_per_user)):
            if v is not None and not v > 0:
                raise RooflineError(f"{name} must be > 0, got {v:g}")
        return self

    def ratio(self, ttft, tpot, tps_user) -> np.ndarray:
        """The worst of figure / target over the targets (<= 1: met)."""
        r = np.zeros(np.shape(ttft))
        if self.ttft_s is not None:
            r = np.maximum(r, ttft / self.ttft_s)
        if self.tpot_s is not None:
            r = np.maximum(r, tpot / self.tpot_s)
        if self.min_tokens_per_s_per_user is not None:
            r = np.maximum(r, self.min_tokens_per_s_per_user / np.maximum(tps_user, 1e-300))
        return r


def layouts(cfg: ModelConfig, gpus: int, max_gpus_per_replica: int = 8) -> list[tuple[int, int]]:
    """(tp, ep) replica layouts within ``gpus`` (and one node of ``max_gpus_per_replica``): TP
    dividing the attention heads; for MoE models EP too (attention data parallel when EP > TP)."""
    from rooflinecli.analysis.ops import check_parallel

    sizes = [s for s in (1, 2, 4, 8, 16, 32, 64) if s <= min(gpus, max_gpus_per_replica)]
    out = []
    for tp in sizes:
        for ep in (sizes if cfg.moe is not None else [1]):
            if tp % ep and ep % tp:
                continue
            try:
                check_parallel(cfg, Workload(batch=1, prompt_len=1, gen_len=1, tp=tp, ep=ep))
            except RooflineError:
                continue
            out.append((tp, ep))
    return out


def _conc_grid(limit: int, points: int) -> np.ndarray:
    return np.unique(np.round(np.geomspace(1, max(limit, 1), points))).astype(float)


def _pareto(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mask of the points no other point beats on both x and y (maximizing both)."""
    order = np.lexsort((-y, -x))  # x descending, then y descending
    best_y = -np.inf
    keep = np.zeros(len(x), dtype=bool)
    for i in order:
        if y[i] > best_y:
            keep[i] = True
            best_y = y[i]
    return keep


def search(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, *, gpus: int, isl: int, osl: int, slo: Slo,
           token_budget: int = DEFAULT_TOKEN_BUDGET, memory_fraction: float = DEFAULT_MEMORY_FRACTION, disagg: bool = True,
           concurrency_points: int = CONCURRENCY_POINTS, max_gpus_per_replica: int = 8) -> dict:
    """All candidates (columns ``COLUMNS``), the frontier, the best for ``slo`` (or the nearest)."""
    from dataclasses import replace

    slo.check()
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise RooflineError(f"--gpus must be a whole number >= 1, got {gpus!r}")
    lengths = Lengths(isl, osl)
    agg_reps, pre_reps, skipped, notes = {}, {}, [], []
    for tp, ep in layouts(cfg, gpus, max_gpus_per_replica):
        w = replace(wl, tp=tp, ep=ep)
        try:
            agg_reps[(tp, ep)] = build_replica(cfg, spec, w, isl=isl, osl=osl, token_budget=token_budget, memory_fraction=memory_fraction)
            if disagg:
                pre_reps[(tp, ep)] = build_replica(cfg, spec, w, isl=isl, osl=1, token_budget=token_budget, memory_fraction=memory_fraction)
        except RooflineError as e:
            skipped.append(f"tp {tp}, ep {ep}: {e}")
    if not agg_reps:
        raise RooflineError(f"no layout of {cfg.name} on up to {min(gpus, max_gpus_per_replica)} x {spec.id} fits in memory at {isl + osl:,} tokens per sequence")
    for r in agg_reps.values():
        notes += [n for n in r.notes if n not in notes]
    cols: dict[str, list] = {c: [] for c in COLUMNS}

    def add(serving, n, **kw):
        for c in COLUMNS:
            if c in ("meets_slo", "on_frontier"):
                continue
            v = kw.get(c, serving if c == "serving" else 0)
            cols[c].append(np.broadcast_to(np.asarray(v), (n,)))

    for (tp, ep), rep in agg_reps.items():
        g = rep.num_gpus
        replicas = gpus // g
        conc = _conc_grid(rep.kv_limit, concurrency_points)
        out = aggregated_closed(rep.table, lengths, conc, rep.kv_limit, token_budget)
        add("aggregated", len(conc), replicas=replicas, tp=tp, ep=ep, attention_dp=rep.workload.attention_dp, prefill_tp=0, gpus_used=replicas * g,
            concurrency=conc * replicas, ttft_s=out["ttft_s"], tpot_s=out["tpot_s"],
            throughput_tokens_per_s_per_gpu=out["throughput_tokens_per_s_per_gpu"], tokens_per_s_per_user=out["tokens_per_s_per_user"])
    if disagg:
        for (ptp, pep), prep in pre_reps.items():
            for (tp, ep), drep in agg_reps.items():
                gp, gd = prep.num_gpus, drep.num_gpus
                P, D = np.meshgrid(np.arange(1, gpus // gp + 1), np.arange(1, gpus // gd + 1), indexing="ij")
                ok = P * gp + D * gd <= gpus
                P, D = P[ok].astype(float), D[ok].astype(float)
                if not len(P):
                    continue
                batch = _conc_grid(drep.kv_limit, concurrency_points)  # sequences per decode instance
                Pg, Bg = np.meshgrid(P, batch, indexing="ij")
                Dg, _ = np.meshgrid(D, batch, indexing="ij")
                pools = DisaggPools(prep.table, drep.table, Pg, Dg, kv_transfer_s(cfg, spec, prep.workload, drep.workload, isl), drep.kv_limit)
                out = disagg_at_decode_batch(pools, lengths, Bg)
                ok = np.isfinite(out["ttft_s"]).ravel()  # the prefill pool keeps up
                if not ok.any():
                    continue
                add("disaggregated", int(ok.sum()), replicas=1, prefill_instances=Pg.ravel()[ok], decode_instances=Dg.ravel()[ok], tp=tp, ep=ep,
                    attention_dp=drep.workload.attention_dp, prefill_tp=ptp, gpus_used=(Pg * gp + Dg * gd).ravel()[ok],
                    concurrency=np.round(out["concurrency"].ravel()[ok]), ttft_s=out["ttft_s"].ravel()[ok], tpot_s=out["tpot_s"].ravel()[ok],
                    throughput_tokens_per_s_per_gpu=out["throughput_tokens_per_s_per_gpu"].ravel()[ok],
                    tokens_per_s_per_user=out["tokens_per_s_per_user"].ravel()[ok])
    table = {c: np.concatenate(v) for c, v in cols.items() if v}
    x, y = table["throughput_tokens_per_s_per_gpu"], table["tokens_per_s_per_user"]
    ratio = slo.ratio(table["ttft_s"], table["tpot_s"], y)
    table["meets_slo"] = ratio <= 1.0
    table["on_frontier"] = _pareto(x, y)
    met = np.flatnonzero(table["meets_slo"])
    if len(met):
        best = int(met[np.argmax(x[met])])
        nearest = None
    else:
        best = None
        nearest = int(np.argmin(ratio))
    return {"candidates": table, "count": int(len(x)), "best": best, "nearest": nearest, "nearest_ratio": float(ratio[nearest]) if nearest is not None else None,
            "skipped_layouts": skipped, "notes": notes, "layouts": sorted(agg_reps)}


def row(table: dict, i: int) -> dict:
    """Candidate ``i`` as a plain dict."""
    out = {}
    for c in COLUMNS:
        v = table[c][i]
        out[c] = v.item() if hasattr(v, "item") else v
    return out
