"""Discrete-event simulation of one aggregated in-flight-batching replica over a request stream.

The scheduler is the one the steady state assumes (vLLM-style chunked prefill, first come first
served): each step every running sequence decodes one token, then waiting prompts take what is
left of the token budget (a prompt that does not fit is split over steps). A request is admitted
when a slot is free and the KV cache still free holds its mean context (prompt + half its output:
the paged cache grows with the sequence, as in the steady state); until then it and everyone
behind it wait. Step times come from the ``StepTable`` (the one
prediction path). Decode-only stretches between events are advanced in one go (the contexts grow
by one per step: the stretch's mean context times it), so the cost is per event, not per token.

A closed loop (``concurrency``) starts that many clients at once, each sending its next request
when the last one ends; an open loop takes the stream's arrival times.

``mixes_decode`` False is a scheduler whose prefill steps carry prompt tokens only (SGLang's
default, ``serve.schedulers``): while prompts can be admitted the step prefills them, up to the
whole budget, and the running sequences wait; their next token's gap holds that wait.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass

import numpy as np

from .arrivals import Stream
from .steps import StepTable


@dataclass
class SimResult:
    """Per-request times (s) in request order, and the inter-token gaps (each gap's seconds and how
    many tokens waited it)."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    gap_s: np.ndarray
    gap_tokens: np.ndarray
    num_gpus: int
    steps: int
    #: (start, end) of the window the throughputs count (None: from the first arrival to the last finish)
    span: tuple[float, float] | None = None
    #: requests and output tokens finished inside ``span``
    finished_in_span: tuple[int, float] | None = None

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> np.ndarray:
        return self.finish_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """(e2e - TTFT) / (output tokens - 1) of the requests with more than one output token."""
        m = self.output_tokens > 1
        return (self.finish_s[m] - self.first_token_s[m]) / (self.output_tokens[m] - 1)

    def window(self, skip_fraction: float) -> SimResult:
        """The requests between the first and last ``skip_fraction`` (by arrival): a steady window."""
        n = len(self.arrival_s)
        order = np.argsort(self.arrival_s, kind="stable")
        k = int(n * skip_fraction)
        keep = np.sort(order[k: n - k]) if n - 2 * k > 0 else order
        t0, t1 = float(self.arrival_s[order[k]]), float(self.arrival_s[order[max(n - k - 1, k)]])
        done = (self.finish_s >= t0) & (self.finish_s < t1)  # any request's: the engine's rate inside the window
        return SimResult(self.arrival_s[keep], self.first_token_s[keep], self.finish_s[keep], self.input_tokens[keep],
                         self.output_tokens[keep], self.gap_s, self.gap_tokens, self.num_gpus, self.steps,
                         (t0, t1), (int(np.sum(done)), float(np.sum(self.output_tokens[done]))))

    def summary(self) -> dict:
        """Means and p50 / p90 / p99 of TTFT, TPOT, ITL and e2e (s), and the throughputs."""
        def pct(x):
            x = np.asarray(x, dtype=float)
            if not len(x):
                return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0}
            p50, p90, p99 = np.percentile(x, [50, 90, 99])
            return {"mean": float(np.mean(x)), "p50": float(p50), "p90": float(p90), "p99": float(p99)}

        if self.span is not None and self.span[1] > self.span[0]:
            span = self.span[1] - self.span[0]
            count, tokens = self.finished_in_span
        else:
            span = float(np.max(self.finish_s) - np.min(self.arrival_s))
            count, tokens = len(self.arrival_s), float(np.sum(self.output_tokens))
        itl = {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0}
        if len(self.gap_s) and np.sum(self.gap_tokens) > 0:
            order = np.argsort(self.gap_s)
            cum = np.cumsum(self.gap_tokens[order]) / np.sum(self.gap_tokens)
            g = self.gap_s[order]
            itl = {"mean": float(np.sum(self.gap_s * self.gap_tokens) / np.sum(self.gap_tokens)),
                   **{f"p{q}": float(g[min(np.searchsorted(cum, q / 100.0), len(g) - 1)]) for q in (50, 90, 99)}}
        tpot = self.tpot_s
        return {
            "requests": int(len(self.arrival_s)),
            "ttft_s": pct(self.ttft_s),
            "tpot_s": pct(tpot),
            "itl_s": itl,
            "e2e_s": pct(self.e2e_s),
            "requests_per_s": count / span if span > 0 else 0.0,
            "throughput_tokens_per_s_per_gpu": tokens / span / self.num_gpus if span > 0 else 0.0,
            "tokens_per_s_per_user": float(np.mean(1.0 / tpot)) if len(tpot) else 0.0,
            "steps": self.steps,
        }


class _Times:
    """Scalar step times from a ``StepTable``, precomputed on whole batches and tokens (plain
    Python floats: a step costs a few list look-ups, not numpy calls)."""

    def __init__(self, table: StepTable, max_batch: int, max_tokens: int, max_prompt: int) -> None:
        b = np.arange(0, max_batch + 1, dtype=float)
        self.ctx = [float(x) for x in table.context_grid]
        bb = np.maximum(b, 1.0)
        self.rest = [float(x) for x in np.interp(bb, table.batch_grid, table.decode_rest_s[0])]
        attn = np.stack([np.interp(bb, table.batch_grid, table.decode_attention_s[0][:, j]) for j in range(len(self.ctx))], axis=1)
        self.attn = [[float(x) for x in row] for row in attn]
        self.mixed = [float(x) for x in np.interp(np.maximum(np.arange(0, max_tokens + 1, dtype=float), 1.0), table.token_grid, table.mixed_rest_s[0])]
        self.pre_attn = [float(x) for x in table.prefill_attention(np.arange(0, max_prompt + 1, dtype=float))]

    def attention(self, d: int, ctx: float) -> float:
        g = self.ctx
        row = self.attn[d]
        if ctx <= g[0]:
            return row[0]
        if ctx >= g[-1]:
            return row[-1]
        j = bisect_right(g, ctx) - 1
        f = (ctx - g[j]) / (g[j + 1] - g[j])
        return row[j] + f * (row[j + 1] - row[j])

    def decode(self, d: int, ctx: float) -> float:
        return self.rest[d] + self.attention(d, ctx)


def simulate(table: StepTable, stream: Stream, *, token_budget: int, kv_tokens: int, max_seqs: int,
             concurrency: int | None = None, mixes_decode: bool = True) -> SimResult:
    """Simulate ``stream`` on one replica. ``kv_tokens``: the KV cache's capacity in tokens (a
    request takes its mean context, prompt + half its output, at admission); ``max_seqs``: the most sequences running at
    once; ``concurrency``: a closed loop of that many clients (``stream.arrival_s`` unused)."""
    n = len(stream)
    isl = [int(x) for x in stream.input_tokens]
    osl = [int(x) for x in stream.output_tokens]
    need = [a + max(b - 2, 0) // 2 for a, b in zip(isl, osl)]
    closed = concurrency is not None
    max_tokens = token_budget + max_seqs
    T = _Times(table, max_seqs, max_tokens, max(isl))
    arrival = [0.0] * n
    first = [0.0] * n
    finish = [0.0] * n
    if closed:  # the clients' first requests, all at time 0
        issued = min(int(concurrency), n)
    else:
        arrival = [float(x) for x in stream.arrival_s]
        issued = n
    gaps: list[float] = []
    gap_tokens: list[int] = []
    t = 0.0
    G = 0  # decode steps so far: a running request finishes at its own G
    heap: list[tuple[int, int]] = []  # (finish G, request)
    sum_ctx = 0.0
    reserved = 0
    waiting: deque = deque()  # [request, prompt tokens done, admitted]
    nxt = 0  # open loop: next arrival index
    done_count = 0
    steps = 0
    stall = 0.0  # prefill-only time the running sequences have waited since their last token

    def finished(i: int) -> None:
        nonlocal reserved, issued, done_count
        finish[i] = t
        reserved -= need[i]
        done_count += 1
        if closed and issued < n:
            arrival[issued] = t
            waiting.append([issued, 0, False])
            issued += 1

    if closed:
        for i in range(issued):
            waiting.append([i, 0, False])
    while done_count < n:
        if not closed:
            while nxt < n and arrival[nxt] <= t:
                waiting.append([nxt, 0, False])
                nxt += 1
        d = len(heap)
        if d == 0 and not waiting:
            t = max(t, arrival[nxt])
            continue
        # prefill chunks of this step: FCFS within the budget left by the decodes
        budget = token_budget - d if mixes_decode else token_budget
        chunks = []
        running = d
        for w in waiting:
            if budget <= 0:
                break
            i = w[0]
            if not w[2]:
                if running >= max_seqs or (reserved + need[i] > kv_tokens and reserved > 0):
                    break
                w[2] = True
                reserved += need[i]
            running += 1
            c = min(isl[i] - w[1], budget)
            chunks.append((w, c))
            budget -= c
        if not chunks:
            if d == 0:  # the head cannot be admitted and nothing runs: it can never be (refused earlier)
                raise RuntimeError("a request larger than the KV cache reached the simulation")
            # a decode-only stretch up to the next event: a completion or (open loop) an arrival
            k = heap[0][0] - G
            ctx = sum_ctx / d
            dt = T.decode(d, ctx)
            if not closed and nxt < n:
                k = max(1, min(k, int((arrival[nxt] - t) / dt) + 1))
            dt = T.decode(d, ctx + (k - 1) / 2.0)
            t += k * dt
            G += k
            sum_ctx += k * d
            steps += k
            if stall > 0.0:
                gaps.append(dt + stall)
                gap_tokens.append(d)
                stall = 0.0
                k -= 1
            gaps.append(dt)
            gap_tokens.append(k * d)
        else:
            c_total = 0
            attn = 0.0
            for w, c in chunks:
                attn += T.pre_attn[w[1] + c] - T.pre_attn[w[1]]
                c_total += c
            if not mixes_decode:  # a prefill-only step: the running sequences wait it out
                dt = T.mixed[c_total] + attn
                stall += dt if d else 0.0
            else:
                ctx = sum_ctx / d if d else 1.0
                dt = T.mixed[d + c_total] + (T.attention(d, ctx) if d else 0.0) + attn
            t += dt
            steps += 1
            if d and mixes_decode:
                G += 1
                sum_ctx += d
                gaps.append(dt)
                gap_tokens.append(d)
            for w, c in chunks:
                w[1] += c
            # every prompt done this step (a chunked one behind the head may finish first) gives its first token
            for w in [w for w, _ in chunks if w[1] >= isl[w[0]]]:
                waiting.remove(w)
                i = w[0]
                first[i] = t
                if osl[i] <= 1:
                    finished(i)
                else:
                    heapq.heappush(heap, (G + osl[i] - 1, i))
                    sum_ctx += isl[i]
        while heap and heap[0][0] <= G:
            _, i = heapq.heappop(heap)
            sum_ctx -= isl[i] + osl[i] - 1
            finished(i)
    return SimResult(np.array(arrival), np.array(first), np.array(finish), np.asarray(stream.input_tokens), np.asarray(stream.output_tokens),
                     np.array(gaps), np.array(gap_tokens, dtype=float), table.num_gpus, steps)
