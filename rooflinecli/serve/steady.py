"""The steady state of an in-flight-batching engine, vectorized over loads.

Aggregated serving (one engine holds prefill and decode): every step runs each decoding sequence's
next token plus prompt tokens up to the scheduler's token budget (chunked prefill: a prompt longer
than what is left of the budget is split over several steps). Under a closed loop of ``C`` clients
(benchmark clients: a new request as soon as one ends) ``n = min(C, KV limit)`` requests run;
each lives ``L = p + osl - 1`` steps (``p`` prefill steps, whose last gives the first token, then
one step per further token). Over a request's life the ``n`` running requests start ``n``
prefills: ``s = n p / L`` prefill chunks per step on average. Requests end at independent steps,
so the chunks a step carries are Poisson: a fraction ``1 - exp(-s)`` of the steps carry prefill
tokens (the interference: a decoding sequence waits through those slower steps), and a request's
own prefill step carries the others that coincide with it besides. Then

- TTFT = the request's own ``p`` mixed steps (+ the wait for a free slot when ``C`` exceeds the
  KV limit: the engine queues the rest);
- TPOT = (e2e - TTFT) / (osl - 1), as serving benchmarks define it: the mean of its decode steps,
  the fraction ``1 - exp(-s (n - 1) / n)`` of them carrying another request's prefill;
- request throughput ``n / e2e`` (Little's law); tokens per second per GPU = that x osl / GPUs;
  tokens per second per user = 1 / TPOT.

An arrival rate (open loop) solves ``n = rate x e2e(n)`` and adds the wait for the step in flight
and, near the KV limit, the queue for a slot (Sakasegawa's M/D/c approximation: exact M/D/1 at one
slot, with the request's whole life as its service). A rate beyond the largest batch's throughput has no steady state: the queue grows.

Disaggregated serving: ``P`` prefill instances (prefill-only steps, one prompt at a time, queued
M/D/c) hand each sequence's KV cache over the GPU link to ``D`` decode instances, whose steps
carry decode tokens only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooflinecli.errors import RooflineError

from .steps import StepTable

#: bisection steps of the fixed points (relative precision 2**-60 of the bracket)
_BISECT = 60


@dataclass(frozen=True)
class Lengths:
    """Prompt and output tokens per request (means, for the steady state)."""

    isl: float
    osl: float


def mean_context(isl, osl):
    """Mean cached context of a decode step over a request's life: isl .. isl + osl - 2."""
    return float(isl) + max(float(osl) - 2.0, 0.0) / 2.0


def _mdc_wait(rho, service_s, servers):
    """Mean queueing delay of M/D/c (Sakasegawa's approximation with Poisson arrivals and a
    deterministic service: exact for M/D/1, rho S / (2 (1 - rho)))."""
    rho = np.clip(np.asarray(rho, dtype=float), 0.0, 1.0 - 1e-12)
    c = np.maximum(np.asarray(servers, dtype=float), 1.0)
    return rho ** (np.sqrt(2.0 * (c + 1.0)) - 1.0) / (c * (1.0 - rho)) * np.asarray(service_s, dtype=float) / 2.0


def aggregated_running(table: StepTable, lengths: Lengths, n, token_budget: int, roof: bool = False) -> dict[str, np.ndarray]:
    """Per-request figures with ``n`` requests running (arrays; ``n`` >= 1 continuous)."""
    isl, osl = float(lengths.isl), float(lengths.osl)
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    budget = float(token_budget)
    room = np.maximum(budget - (n - 1.0), 1.0)
    p = np.ceil(isl / np.minimum(room, isl))
    life = p + osl - 1.0
    starts = n * p / life  # prefill chunks per step, on average
    # requests end (and closed-loop clients resend) at independent steps: the prefills a step
    # carries are Poisson with that mean, so a fraction 1 - exp(-starts) of the steps carry any,
    # and a request's own prefill step carries the others that coincide with it besides
    f = -np.expm1(-starts)
    q = starts / np.maximum(f, 1e-300)  # prefills per step that carries any
    q_own = 1.0 + starts * (n - 1.0) / np.maximum(n, 1.0)  # a request's own step: itself and the others' Poisson share
    ctx = mean_context(isl, osl)
    t_dec = table.decode_s(n, ctx, roof)
    a_pre = table.prefill_attention(isl, roof) / p

    def mixed(k):
        return table.mixed_s(np.maximum(n - k, 0.0), ctx, np.minimum(k * isl / p, budget), k * a_pre, roof)

    t_mix = mixed(q)
    t_own = mixed(q_own)
    g = -np.expm1(-starts * (n - 1.0) / n)  # a decoding sequence's steps that carry another's prefill
    tpot = g * t_mix + (1.0 - g) * t_dec if osl > 1 else np.zeros_like(n)
    prefill = p * t_own
    e2e = prefill + (osl - 1.0) * tpot
    mean_step = f * t_mix + (1.0 - f) * t_dec
    return {"n": n, "prefill_steps": p, "mixed_fraction": f, "decode_step_s": t_dec, "mixed_step_s": t_mix,
            "mean_step_s": mean_step, "mean_sq_step_s": f * t_mix**2 + (1.0 - f) * t_dec**2,
            "prefill_s": prefill, "tpot_s": tpot, "e2e_running_s": e2e}


def _finish(out: dict, lengths: Lengths, num_gpus: int, wait) -> dict[str, np.ndarray]:
    osl = float(lengths.osl)
    ttft = wait + out["prefill_s"]
    e2e = ttft + (osl - 1.0) * out["tpot_s"]
    out.update({
        "queue_wait_s": np.asarray(wait, dtype=float),
        "ttft_s": ttft,
        "tpot_s": out["tpot_s"],
        "itl_s": out["tpot_s"],
        "e2e_s": e2e,
        "requests_per_s": out["requests_per_s"],
        "throughput_tokens_per_s_per_gpu": out["requests_per_s"] * osl / num_gpus,
        "input_tokens_per_s_per_gpu": out["requests_per_s"] * float(lengths.isl) / num_gpus,
        "tokens_per_s_per_user": np.where(out["tpot_s"] > 0, 1.0 / np.where(out["tpot_s"] > 0, out["tpot_s"], 1.0), 0.0),
    })
    return out


def aggregated_closed(table: StepTable, lengths: Lengths, concurrency, kv_limit: int, token_budget: int, roof: bool = False) -> dict:
    """Closed loop of ``concurrency`` clients on one aggregated replica that holds at most
    ``kv_limit`` sequences: the rest wait for a slot."""
    c = np.asarray(concurrency, dtype=float)
    n = np.minimum(c, float(kv_limit))
    out = aggregated_running(table, lengths, n, token_budget, roof)
    out["requests_per_s"] = n / out["e2e_running_s"]
    wait = np.maximum(c / out["requests_per_s"] - out["e2e_running_s"], 0.0)
    out["concurrency"] = c
    return _finish(out, lengths, table.num_gpus, wait)


def capacity_requests_per_s(table: StepTable, lengths: Lengths, kv_limit: int, token_budget: int, roof: bool = False) -> float:
    """Largest request rate one aggregated replica sustains: all ``kv_limit`` slots busy."""
    out = aggregated_running(table, lengths, float(kv_limit), token_budget, roof)
    return float(kv_limit / out["e2e_running_s"])


def aggregated_open(table: StepTable, lengths: Lengths, rate, kv_limit: int, token_budget: int, roof: bool = False) -> dict:
    """Open loop: Poisson arrivals at ``rate`` requests/s on one aggregated replica. A rate at or
    beyond the replica's capacity is a RooflineError."""
    rate = np.asarray(rate, dtype=float)
    cap = capacity_requests_per_s(table, lengths, kv_limit, token_budget, roof)
    if np.any(rate >= cap):
        bad = float(np.max(rate))
        raise RooflineError(f"--rate {bad:g} requests/s is beyond this configuration's capacity of {cap:.3g} requests/s "
                            f"(all {kv_limit:,} KV slots busy): the queue grows without bound; lower --rate or add GPUs")
    lo = np.zeros_like(rate)
    hi = np.full_like(rate, float(kv_limit))
    for _ in range(_BISECT):  # n = rate * e2e(n): the running requests by Little's law
        mid = 0.5 * (lo + hi)
        e2e = aggregated_running(table, lengths, mid, token_budget, roof)["e2e_running_s"]
        over = rate * e2e < mid
        hi = np.where(over, mid, hi)
        lo = np.where(over, lo, mid)
    n = 0.5 * (lo + hi)
    out = aggregated_running(table, lengths, n, token_budget, roof)
    # an arrival that finds a slot free still waits for the step in flight: the chance a step runs
    # (a Poisson count of running requests) less the chance every slot is taken (where the slot
    # queue's wait below holds that residual already: one slot is exactly M/D/1)
    busy_free = np.maximum((1.0 - np.exp(-n)) - (n / float(kv_limit)) ** float(kv_limit), 0.0)
    residual = busy_free * out["mean_sq_step_s"] / (2.0 * out["mean_step_s"])
    slot = _mdc_wait(n / float(kv_limit), out["e2e_running_s"], kv_limit)
    out["requests_per_s"] = rate
    out["concurrency"] = n
    return _finish(out, lengths, table.num_gpus, residual + slot)


# ------------------------------------------------------------------------------------------------
# disaggregated
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DisaggPools:
    prefill: StepTable
    decode: StepTable
    prefill_instances: int | np.ndarray  # an array of counts in the search
    decode_instances: int | np.ndarray
    kv_transfer_s: float  # one sequence's KV cache over the link, prefill GPUs to decode GPUs
    decode_kv_limit: int  # sequences one decode instance holds

    @property
    def num_gpus(self) -> int:
        return self.prefill_instances * self.prefill.num_gpus + self.decode_instances * self.decode.num_gpus


def _disagg_figures(pools: DisaggPools, lengths: Lengths, lam, n, roof: bool) -> dict:
    """Figures at request rate ``lam`` with ``n`` sequences per decode instance."""
    isl, osl = float(lengths.isl), float(lengths.osl)
    s_pre = float(pools.prefill.prefill_s(1.0, isl, roof))
    P = np.asarray(pools.prefill_instances, dtype=float)
    shape = np.broadcast_shapes(np.shape(lam), np.shape(n), P.shape, np.shape(pools.decode_instances))
    lam = np.broadcast_to(np.asarray(lam, dtype=float), shape)
    n = np.broadcast_to(np.asarray(n, dtype=float), shape)
    rho = lam * s_pre / P
    wait = np.where(rho < 1.0, _mdc_wait(rho, s_pre, P), np.inf)
    tpot = pools.decode.decode_s(np.maximum(n, 1.0), mean_context(isl, osl), roof) if osl > 1 else np.zeros(shape)
    ttft = wait + s_pre + pools.kv_transfer_s
    e2e = ttft + (osl - 1.0) * tpot
    return {"n": n, "prefill_s": np.full(shape, s_pre + pools.kv_transfer_s), "queue_wait_s": wait, "ttft_s": ttft, "tpot_s": tpot, "itl_s": tpot,
            "e2e_s": e2e, "requests_per_s": lam, "decode_batch_per_instance": n, "kv_transfer_s": np.full(shape, pools.kv_transfer_s),
            "throughput_tokens_per_s_per_gpu": lam * osl / pools.num_gpus, "input_tokens_per_s_per_gpu": lam * isl / pools.num_gpus,
            "tokens_per_s_per_user": np.where(tpot > 0, 1.0 / np.where(tpot > 0, tpot, 1.0), 0.0)}


def disagg_at_decode_batch(pools: DisaggPools, lengths: Lengths, n, roof: bool = False) -> dict:
    """The steady state with ``n`` sequences decoding on each decode instance: the request rate is
    Little's law over the decode pool, rate = n D / ((osl - 1) TPOT(n)); the concurrency it takes is
    rate x e2e (infinite where the prefill pool cannot keep up)."""
    osl = float(lengths.osl)
    n = np.maximum(np.asarray(n, dtype=float), 1e-9)
    tpot = pools.decode.decode_s(np.maximum(n, 1.0), mean_context(lengths.isl, osl), roof)
    lam = n * np.asarray(pools.decode_instances, dtype=float) / (max(osl - 1.0, 1.0) * tpot)
    out = _disagg_figures(pools, lengths, lam, n, roof)
    out["concurrency"] = lam * out["e2e_s"]
    return out


def _disagg(pools: DisaggPools, lengths: Lengths, lam, roof: bool) -> dict:
    """Figures at request rate ``lam``: the decode occupancy solves n = lam / D x (osl - 1) x TPOT(n)."""
    osl = float(lengths.osl)
    lam = np.asarray(lam, dtype=float)
    shape = np.broadcast_shapes(lam.shape, np.shape(pools.prefill_instances), np.shape(pools.decode_instances))
    lam = np.broadcast_to(lam, shape)
    ctx = mean_context(lengths.isl, osl)
    lo = np.zeros(shape)
    hi = np.full(shape, float(pools.decode_kv_limit))
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        over = lam / pools.decode_instances * (osl - 1.0) * pools.decode.decode_s(np.maximum(mid, 1.0), ctx, roof) < mid
        hi = np.where(over, mid, hi)
        lo = np.where(over, lo, mid)
    return _disagg_figures(pools, lengths, lam, 0.5 * (lo + hi), roof)


def disagg_capacity_requests_per_s(pools: DisaggPools, lengths: Lengths, roof: bool = False):
    """The slower pool's largest request rate: prefill instances each busy, or every decode slot full."""
    s_pre = float(pools.prefill.prefill_s(1.0, lengths.isl, roof))
    dec = float(pools.decode.decode_s(pools.decode_kv_limit, mean_context(lengths.isl, lengths.osl), roof))
    decode_cap = pools.decode_instances * pools.decode_kv_limit / (max(lengths.osl - 1.0, 1.0) * dec)
    return np.minimum(np.asarray(pools.prefill_instances, dtype=float) / s_pre, decode_cap)


def disagg_open(pools: DisaggPools, lengths: Lengths, rate, roof: bool = False) -> dict:
    rate = np.asarray(rate, dtype=float)
    cap = disagg_capacity_requests_per_s(pools, lengths, roof)
    if np.any(rate >= cap):
        raise RooflineError(f"--rate {float(np.max(rate)):g} requests/s is beyond the disaggregated pools' capacity of {float(np.min(cap)):.3g} requests/s: "
                            "the queue grows without bound; lower --rate or resize --disagg")
    out = _disagg(pools, lengths, rate, roof)
    out["concurrency"] = rate * out["e2e_s"]
    return out


def disagg_closed(pools: DisaggPools, lengths: Lengths, concurrency, roof: bool = False) -> dict:
    """Closed loop of ``concurrency`` clients over the pools: the decode occupancy whose
    concurrency (``disagg_at_decode_batch``) is the clients'; clients beyond every decode slot wait."""
    c = np.asarray(concurrency, dtype=float)
    shape = np.broadcast_shapes(c.shape, np.shape(pools.prefill_instances), np.shape(pools.decode_instances))
    c = np.broadcast_to(c, shape)
    lo = np.zeros(shape)
    hi = np.full(shape, float(pools.decode_kv_limit))
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        over = disagg_at_decode_batch(pools, lengths, mid, roof)["concurrency"] > c
        hi = np.where(over, mid, hi)
        lo = np.where(over, lo, mid)
    out = disagg_at_decode_batch(pools, lengths, lo, roof)
    extra = np.maximum(c / out["requests_per_s"] - out["e2e_s"], 0.0)  # clients beyond the slots (or the prefill pool) wait
    out["queue_wait_s"] = out["queue_wait_s"] + extra
    out["ttft_s"] = out["ttft_s"] + extra
    out["e2e_s"] = out["e2e_s"] + extra
    out["concurrency"] = c
    return out


# ------------------------------------------------------------------------------------------------
# a benchmark's first wave
# ------------------------------------------------------------------------------------------------


def first_wave_ttft_s(table: StepTable, lengths: Lengths, clients: int, kv_limit: int, token_budget: int, roof: bool = False,
                      mixes_decode: bool = True) -> float:
    """Mean TTFT of the first wave of a closed-loop benchmark: ``clients`` requests that arrive
    together at an idle engine. The scheduler fills each step with prompt tokens up to the budget
    left by the sequences already decoding (first come, first served: vLLM's and SGLang's chunked
    prefill, TensorRT-LLM's in-flight batching), so the ``k``-th prompt's first token comes after
    the steps that prefill the ``k`` prompts before and with it. Only ``kv_limit`` are admitted;
    the rest wait in the steady state's queue and are left out here. ``mixes_decode`` False: the
    prefill steps carry prompt tokens only (see ``lockstep_waves``)."""
    return wave_s(table, lengths, clients, kv_limit, token_budget, roof, mixes_decode)[0]


def wave_s(table: StepTable, lengths: Lengths, clients: int, kv_limit: int, token_budget: int, roof: bool = False,
           mixes_decode: bool = True) -> tuple[float, float]:
    """(mean TTFT, seconds until the last prompt's first token) of ``clients`` prompts arriving
    together at an idle engine (see ``first_wave_ttft_s``)."""
    isl = float(lengths.isl)
    n = int(max(1, min(int(clients), int(kv_limit))))
    budget = float(token_budget)
    a_tok = float(table.prefill_attention(isl, roof)) / isl  # prefill attention per prompt token
    ctx = mean_context(isl, 2.0)
    remaining = n * isl
    done_tokens = 0.0
    decoding = 0
    clock = 0.0
    total = 0.0
    finished = 0
    while finished < n:
        riding = decoding if mixes_decode else 0  # decoders that advance in this step
        room = max(budget - riding, 1.0)
        tokens = min(room, remaining)
        clock += float(table.mixed_s(float(riding), ctx, tokens, tokens * a_tok, roof))
        remaining -= tokens
        done_tokens += tokens
        now_done = min(int(np.floor(done_tokens / isl + 1e-9)), n)
        total += (now_done - finished) * clock
        decoding += now_done - finished
        finished = now_done
    return total / n, clock


def lockstep_waves(table: StepTable, lengths: Lengths, clients: int, kv_limit: int, prefill_tokens: int, roof: bool = False) -> dict:
    """A closed-loop benchmark (fixed lengths, clients starting together) on a scheduler whose
    prefill steps carry prompt tokens only and run before any decode step (SGLang's default): each
    wave of prompts is prefilled in steps of ``prefill_tokens`` while the wave's decoding waits,
    then the wave decodes together, ends on one step, and its clients send the next wave together.
    So every wave is the first: TTFT is the wave's mean; TPOT = (the wave's prefill time after the
    request's first token + (osl - 1) decode steps at the wave's batch) / (osl - 1)."""
    isl, osl = float(lengths.isl), float(lengths.osl)
    n = int(max(1, min(int(clients), int(kv_limit))))
    ttft, wave = wave_s(table, lengths, n, kv_limit, prefill_tokens, roof, mixes_decode=False)
    if osl > 1:
        tpot = (wave - ttft) / (osl - 1.0) + float(table.decode_s(float(n), mean_context(isl, osl), roof))
    else:
        tpot = 0.0
    return {"ttft_s": ttft, "tpot_s": tpot, "wave_s": wave, "e2e_s": ttft + (osl - 1.0) * tpot}
