"""Step times of an in-flight-batching engine, tabulated once from the one prediction path.

An engine step runs every token scheduled in it through the model at once: ``b`` decoding
sequences (one token each, at their cached contexts) plus ``c`` prompt tokens of prefill chunks.
``rooflinecli.predict.predict_phase`` times the two phases the analysis knows; a step is composed
from its per-op rows, split by kind:

- the token-parallel ops (every row but attention: GEMMs, norms, MoE, collectives, host rows)
  of a decode-only step at batch ``b``: the decode phase at batch ``b``;
- the same ops of a step that carries prefill tokens (``b + c`` tokens, run eagerly as a prefill
  is): the prefill phase of one ``b + c``-token sequence, attention rows left out;
- decode attention at ``b`` sequences of mean context ``N``: the decode phase's attention rows;
- a prefill chunk's attention, the chunk's ``c`` tokens after ``p`` already prefilled: the prefill
  attention of ``p + c`` tokens less that of ``p`` (causal attention's work is exactly that).

So a decode-only step is the decode phase and a prefill-only step of one sequence is the prefill
phase, exactly. Each table is computed once on a grid of batches, tokens and contexts and
interpolated (linearly: the roofline terms are linear in tokens and context between grid points).
The mode's seconds and the roof's seconds are tabulated side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rooflinecli.analysis.workload import Workload
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

#: grid points per table axis (log-spaced, whole numbers, the ends included)
GRID_POINTS = 28


def _grid(hi: float, points: int = GRID_POINTS, lo: float = 1.0) -> np.ndarray:
    hi = max(float(hi), lo + 1.0)
    g = np.unique(np.round(np.geomspace(lo, hi, points)))
    return np.unique(np.concatenate([[lo], g, [np.ceil(hi)]]))


def _split(pred) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mode seconds without attention, mode attention seconds, roof without, roof attention) of a
    ``PhasePrediction`` over its grid."""
    shape = pred.shape
    rest, attn, rrest, rattn = (np.zeros(shape) for _ in range(4))
    if pred.achievable is not None:
        for r in pred.achievable:
            if r.kind == "attention":
                attn = attn + r.time_s
                rattn = rattn + r.roof_s
            else:
                rest = rest + r.time_s
                rrest = rrest + r.roof_s
    else:
        for t in pred.roof:
            if t.op.kind == "attention":
                attn = attn + t.time_s
            else:
                rest = rest + t.time_s
        rrest, rattn = rest, attn
    return (np.broadcast_to(a, shape).astype(float) for a in (rest, attn, rrest, rattn))


def _interp2(x, y, gx, gy, table):
    """Bilinear interpolation of ``table`` (len(gx), len(gy)) at broadcasting ``x``, ``y`` (clamped)."""
    x = np.clip(np.asarray(x, dtype=float), gx[0], gx[-1])
    y = np.clip(np.asarray(y, dtype=float), gy[0], gy[-1])
    i = np.clip(np.searchsorted(gx, x, side="right") - 1, 0, len(gx) - 2)
    j = np.clip(np.searchsorted(gy, y, side="right") - 1, 0, len(gy) - 2)
    fx = (x - gx[i]) / (gx[i + 1] - gx[i])
    fy = (y - gy[j]) / (gy[j + 1] - gy[j])
    t00, t10, t01, t11 = table[i, j], table[i + 1, j], table[i, j + 1], table[i + 1, j + 1]
    return (1 - fx) * ((1 - fy) * t00 + fy * t01) + fx * ((1 - fy) * t10 + fy * t11)


@dataclass
class StepTable:
    """Tabulated step times of one replica (one engine instance) for one model, GPU and workload."""

    mode: str
    engine: str | None
    num_gpus: int
    batch_grid: np.ndarray
    context_grid: np.ndarray
    token_grid: np.ndarray
    prefill_grid: np.ndarray
    #: [0] mode seconds, [1] roof seconds
    decode_rest_s: tuple[np.ndarray, np.ndarray]  # over batch_grid
    decode_attention_s: tuple[np.ndarray, np.ndarray]  # over (batch_grid, context_grid)
    mixed_rest_s: tuple[np.ndarray, np.ndarray]  # over token_grid
    prefill_attention_s: tuple[np.ndarray, np.ndarray]  # over prefill_grid (one sequence)

    def decode_s(self, batch, context, roof: bool = False):
        """One decode-only step: ``batch`` sequences at mean cached context ``context``."""
        k = int(roof)
        b = np.maximum(np.asarray(batch, dtype=float), 1.0)
        rest = np.interp(b, self.batch_grid, self.decode_rest_s[k])
        return rest + _interp2(b, context, self.batch_grid, self.context_grid, self.decode_attention_s[k])

    def prefill_attention(self, tokens, roof: bool = False):
        """Causal prefill attention of the first ``tokens`` tokens of one sequence (0 at 0)."""
        t = np.asarray(tokens, dtype=float)
        v = np.interp(np.maximum(t, 1.0), self.prefill_grid, self.prefill_attention_s[int(roof)])
        return np.where(t > 0, v, 0.0)

    def chunk_attention_s(self, done, chunk, roof: bool = False):
        """Attention of a prefill chunk of ``chunk`` tokens after ``done`` tokens already prefilled."""
        return self.prefill_attention(np.asarray(done, dtype=float) + chunk, roof) - self.prefill_attention(done, roof)

    def mixed_s(self, batch, context, prefill_tokens, prefill_attention_s, roof: bool = False):
        """One step carrying ``prefill_tokens`` prompt tokens (whose attention costs
        ``prefill_attention_s``) besides ``batch`` decoding sequences at mean context ``context``;
        a decode-only step where ``prefill_tokens`` is 0."""
        k = int(roof)
        b = np.asarray(batch, dtype=float)
        c = np.asarray(prefill_tokens, dtype=float)
        dec = self.decode_s(b, context, roof)
        rest = np.interp(np.maximum(b + c, 1.0), self.token_grid, self.mixed_rest_s[k])
        attn = np.where(b > 0, _interp2(np.maximum(b, 1.0), context, self.batch_grid, self.context_grid, self.decode_attention_s[k]), 0.0)
        return np.where(c > 0, rest + attn + prefill_attention_s, np.where(b > 0, dec, 0.0))

    def prefill_s(self, seqs, length, roof: bool = False):
        """A prefill-only step of ``seqs`` whole prompts of ``length`` tokens each."""
        m = np.asarray(seqs, dtype=float)
        s = np.asarray(length, dtype=float)
        return self.mixed_s(0.0, 1.0, m * s, m * self.prefill_attention(s, roof), roof)


def build_step_table(cfg: ModelConfig, spec: HardwareSpec, wl: Workload, *, max_batch: int, max_context: int, max_tokens: int,
                     max_prompt: int, mode: str | None = None, engine: str | None = None, points: int = GRID_POINTS) -> StepTable:
    """Tabulate the step times of ``wl``'s replica (its tp / ep, dtypes, mode and engine) for
    batches up to ``max_batch``, cached contexts up to ``max_context``, tokens per step up to
    ``max_tokens`` and prompts up to ``max_prompt`` tokens."""
    from rooflinecli.predict import predict_phase

    wl = replace(wl, batch=1, prompt_len=max(1, int(max_prompt)))
    bg = _grid(max_batch, points)
    ng = _grid(max_context, points)
    tg = _grid(max_tokens, points + 8)
    pg = _grid(max_prompt, points)
    dec = predict_phase(cfg, spec, wl, "decode", bg[:, None], ng[None, :], mode, engine)
    d_rest, d_attn, r_rest, r_attn = _split(dec)
    mix = predict_phase(cfg, spec, wl, "prefill", 1.0, tg, mode, engine)
    m_rest, _, rm_rest, _ = _split(mix)
    pre = predict_phase(cfg, spec, wl, "prefill", 1.0, pg, mode, engine)
    _, p_attn, _, rp_attn = _split(pre)
    return StepTable(
        mode=dec.mode,
        engine=dec.engine,
        num_gpus=wl.num_gpus,
        batch_grid=bg,
        context_grid=ng,
        token_grid=tg,
        prefill_grid=pg,
        decode_rest_s=(d_rest[:, 0].copy(), r_rest[:, 0].copy()),
        decode_attention_s=(d_attn, r_attn),
        mixed_rest_s=(m_rest.copy(), rm_rest.copy()),
        prefill_attention_s=(p_attn.copy(), rp_attn.copy()),
    )
