"""MLA (multi-head latent attention, DeepSeek-V2/V3/R1, Kimi-K2) from an engine's measured MLA
tables (imported: ``context_mla``, ``generation_mla``, ``mla_bmm``), the conventions of those tables:

- **context MLA**: one call of b sequences of S tokens each, causal, no cached prefix, for H heads
  on one GPU (the model's heads / TP); it takes q (qk_nope + qk_rope per head), k and v expanded by
  ``kv_b`` and writes the latent cache: RoPE and the cache write are inside the call (the tables'
  own model runs no separate kernel for them).
- **generation MLA**: one absorbed decode call of b sequences, one query each, over N cached
  latents (kv_lora_rank + qk_rope_head_dim per token, shared by the H heads of the GPU).
- **MLA BMM**: the absorbed up-projections of decode as batched GEMMs over the H heads of the GPU:
  ``pre`` (q_nope, T x qk_nope, into the latent space) and ``post`` (the attention output out of
  it into v_head_dim), by dtype (fp8 where the checkpoint quantizes ``kv_b``).

Each table is interpolated like the others (``tables``): the log of the measured time over a
roofline-shaped base, multilinear over the log of its axes (H, B, length; H, T), held flat beyond
them. The base is the call's FLOPs and bytes at the shapes the tables were measured with
(``TABLE_DIMS``, DeepSeek-V3's); a model of other MLA widths gets the ratio of the same grid point
over its own base.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .tables import KV_BYTES, Rates, _cols, _grid, _rates, carried, envelope

#: the MLA widths the tables were measured at (the collector's DeepSeek-V3 shapes, its
#: config.json: kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128)
TABLE_DIMS = (512, 128, 64, 128)
#: op families of ``leave_shape_out`` -> (median, p90) |error| targets (as attention's)
TARGETS = {"context MLA": (0.08, 0.20), "generation MLA": (0.08, 0.20)}
#: the decode analysis ops the BMM table times -> its op
BMM_OPS = {"attn.kv_b.uk": "pre", "attn.kv_b.uv": "post"}
#: bytes per weight of a BMM by its dtype
BMM_WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


def dims_of(mla) -> tuple[int, int, int, int]:
    """(kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim) of a model's ``MLAConfig``."""
    return (int(mla.kv_lora_rank), int(mla.qk_nope_head_dim), int(mla.qk_rope_head_dim), int(mla.v_head_dim))


def context_flops_bytes(B, S, H, kv_bytes, dims=TABLE_DIMS):
    """Causal QK^T (qk_nope + qk_rope per head) and PV (v_head_dim) of B sequences of S tokens; q,
    k, v read and o written in 16 bits, the latent cache written."""
    r, nope, rope, v = dims
    B, S, H = (np.asarray(x, dtype=float) for x in (B, S, H))
    dqk = nope + rope
    return B * H * S * S * (dqk + v), B * S * (H * (2.0 * dqk + 2.0 * v) * 2.0 + (r + rope) * np.asarray(kv_bytes, dtype=float))


def generation_flops_bytes(B, N, H, kv_bytes, dims=TABLE_DIMS):
    """Absorbed decode: every head's query (latent + rope) against the N cached latents, its output
    in the latent space; the cache read once per sequence."""
    r, _, rope, _ = dims
    B, N, H = (np.asarray(x, dtype=float) for x in (B, N, H))
    return 2.0 * B * H * N * (2.0 * r + rope), B * (N * (r + rope) * np.asarray(kv_bytes, dtype=float) + H * (2.0 * r + rope) * 2.0)


def bmm_flops_bytes(op: str, dtype: str, T, H, dims=TABLE_DIMS):
    """One absorbed up-projection of T tokens over H heads: (T x d) x (d x kv_lora_rank) per head,
    d = qk_nope (pre) or v_head_dim (post); weights at the dtype's width, activations 16-bit."""
    r, nope, _, v = dims
    d = nope if op == "pre" else v
    T, H = np.asarray(T, dtype=float), np.asarray(H, dtype=float)
    return 2.0 * T * H * d * r, H * d * r * BMM_WEIGHT_BYTES.get(dtype, 2.0) + T * H * (d + r) * 2.0


@dataclass
class MlaGrid:
    """One measured family: per key (KV dtype; or (op, dtype) for the BMMs) a Grid over the log
    of its axes, the base's rates, and the rows as measured (for the leave-shape-out check)."""

    kind: str  # "context" | "generation" | "bmm"
    grids: dict  # key -> Grid
    rates: Rates
    kernels: dict = field(default_factory=dict)  # dtype (BMM) or "attention" -> the kernel measured
    target: Rates | None = None  # transferred tables: the target GPU's rates (``carried``)

    def _fb(self, key, axes, dims=TABLE_DIMS):
        if self.kind == "bmm":
            return bmm_flops_bytes(key[0], key[1], axes[1], axes[0], dims)
        f = context_flops_bytes if self.kind == "context" else generation_flops_bytes
        return f(axes[1], axes[2], axes[0], KV_BYTES.get(key, 2.0), dims)

    def time_s(self, key, *axes, dims=TABLE_DIMS):
        """Seconds of one call at ``axes`` ((H, B, S or N); (H, T) for the BMMs) for a model of MLA
        widths ``dims``: the table's time at that grid point (below the grid's smallest value on
        an axis, at its edge), carried to the model's own work (``carried``: the work share
        scales with the base, the launch stays; the same point and widths: the table's ratio
        over the base)."""
        g = self.grids[key]
        axes = [np.maximum(np.asarray(a, dtype=float), 1.0) for a in axes]
        edge = [np.maximum(a, np.exp(ax[0])) for a, ax in zip(axes, g.axes)]
        fl, nb = self._fb(key, axes, dims)
        base, base_edge = self.rates.base_s(fl, nb), self.rates.base_s(*self._fb(key, edge))
        t = carried(base_edge * np.exp(g.at(*(np.log(a) for a in edge))), base_edge, base)
        return t if self.target is None else carried(t, base, self.target.base_s(fl, nb))

    def leave_slices_out(self) -> np.ndarray:
        """Relative errors of every measured point, each slice of its grid along B and length (the
        BMMs: T) left out in turn (``Grid.leave_slice_out``)."""
        axes = (1,) if self.kind == "bmm" else (1, 2)
        errs = [g.leave_slice_out(a) for g in self.grids.values() for a in axes]
        return np.concatenate(errs) if errs else np.zeros(0)


def _fit(kind: str, table: dict) -> MlaGrid:
    c = _cols(table)
    t = c["latency_us"] * 1e-6
    if kind == "bmm":
        keys = list(zip(c["op"].tolist(), c["dtype"].tolist()))
        cols = [c["H"], c["T"]]
        fl, nb = zip(*(bmm_flops_bytes(o, d, T, H) for (o, d), T, H in zip(keys, c["T"], c["H"]))) if keys else ((), ())
        fl, nb = np.asarray(fl, dtype=float), np.asarray(nb, dtype=float)
        rates = _rates(fl, nb, t)
    else:
        keys = c["kv_dtype"].tolist()
        L = c["S"] if kind == "context" else c["N"]
        cols = [c["H"], c["B"], L]
        kvb = np.array([KV_BYTES.get(k, 2.0) for k in keys])
        f = context_flops_bytes if kind == "context" else generation_flops_bytes
        fl, nb = f(c["B"], L, c["H"], kvb)
        rates = envelope(fl, nb, t)
    ratio = np.log(t / rates.base_s(fl, nb))
    grids: dict = {}
    for key in sorted(set(keys)):
        m = np.array([k == key for k in keys])
        grids[key] = _grid([x[m] for x in cols], ratio[m])
    return MlaGrid(kind, grids, rates, dict(table.get("kernels") or {}))


@dataclass
class MlaTables:
    """The MLA families of one engine's calibration (each None where it has no table)."""

    context: MlaGrid | None = None
    generation: MlaGrid | None = None
    bmm: MlaGrid | None = None

    def transferred(self, scale) -> MlaTables:
        """Carried to another GPU: ``scale`` maps each family's rates to the target's."""
        return MlaTables(*(None if g is None else replace(g, target=scale(g.rates)) for g in (self.context, self.generation, self.bmm)))

    def leave_shape_out(self) -> dict:
        out = {}
        for name, g in (("context MLA", self.context), ("generation MLA", self.generation), ("MLA BMM", self.bmm)):
            if g is not None:
                out[name] = g.leave_slices_out()
        return out

    def cross_errors(self, check_tables: dict) -> dict:
        """op family -> errors of these tables against another engine's measurements of the same shapes."""
        out = {}
        for name, g, tname, L in (("context MLA", self.context, "context_mla", "S"), ("generation MLA", self.generation, "generation_mla", "N")):
            if g is None or tname not in check_tables:
                continue
            c = _cols(check_tables[tname])
            errs = [g.time_s(kv, c["H"][m], c["B"][m], c[L][m]) / (c["latency_us"][m] * 1e-6) - 1.0
                    for kv in sorted(set(c["kv_dtype"].tolist()) & set(g.grids)) for m in [c["kv_dtype"] == kv]]
            if errs:
                out[name] = np.concatenate(errs)
        return out


MLA_TABLES = ("context_mla", "generation_mla", "mla_bmm")


def fit_mla(tables: dict) -> MlaTables | None:
    """The MLA families of a calibration's ``tables``; None where it has none of them."""
    if not any(n in tables for n in MLA_TABLES):
        return None
    return MlaTables(*(_fit(kind, tables[n]) if n in tables else None for kind, n in zip(("context", "generation", "bmm"), MLA_TABLES)))


# ------------------------------------------------------------------------------------------------
# the step builder's MLA rows (``step._Builder``)
# ------------------------------------------------------------------------------------------------


def _tables(b) -> MlaTables | None:
    tm = b.m.tables
    return None if tm is None or b.cfg.mla is None else tm.mla


def attention_family(b) -> MlaGrid | None:
    """The MLA table that answers this phase's attention core, if any: context MLA in prefill,
    generation MLA in an absorbed decode (the naive form attends over the expanded cache: not this call)."""
    mt = _tables(b)
    if mt is None:
        return None
    if b.phase == "prefill":
        return mt.context
    return mt.generation if b.wl.mla_decode == "absorbed" else None


def attention(b, name: str) -> bool:
    """The attention core of an MLA model from the engine's MLA table; False where it has none."""
    g = attention_family(b)
    if g is None or name != "attn.core":
        return False
    op, cfg, wl = b.ops[name], b.cfg, b.wl
    H = cfg.num_heads / wl.tp
    kv = "fp8" if wl.kv_bytes_per_element <= 1 else "bf16"
    key = kv if kv in g.grids else next(iter(g.grids))
    t = g.time_s(key, H, b.seqs, b.context, dims=dims_of(cfg.mla))
    what = "b x S tokens, causal, RoPE and the latent-cache write included" if g.kind == "context" else "absorbed, over the cached latents"
    note = f"{g.kind} MLA table, {g.kernels.get('attention', '')} ({what}; {H:g} heads per GPU, KV {key})"
    b.add(name, "attention", op.layers, 1, t, np.minimum(t, b.m.graph_floor_s), (name,), (op.note + "; " if op.note else "") + note,
          timed_as_a_whole=True, clamp=False)
    return True


def bmm_dtype(b) -> str:
    """The absorbed BMMs' dtype: fp8 where the compute is fp8, the checkpoint quantizes ``kv_b``
    and the table has fp8 rows (TensorRT-LLM's block-scaled BMM, SGLang's fp8 BMM), else bf16."""
    from rooflinecli import params as P

    mt = _tables(b)
    have = {k[1] for k in mt.bmm.grids} if mt is not None and mt.bmm is not None else set()
    kv_b = next((lin for lin in P.attention_linears(b.cfg) if lin.name == "kv_b"), None)
    quantized = kv_b is not None and P.converted_fraction(b.cfg, kv_b) > 0.5
    return "fp8" if b.wl.compute_dtype == "fp8" and quantized and "fp8" in have else "bf16"


def bmm(b, name: str) -> bool:
    """An absorbed decode up-projection (``BMM_OPS``) from the engine's MLA BMM table; False where it has none."""
    mt = _tables(b)
    if mt is None or mt.bmm is None or name not in BMM_OPS:
        return False
    op, cfg = b.ops[name], b.cfg
    which, dt = BMM_OPS[name], bmm_dtype(b)
    key = (which, dt)
    if key not in mt.bmm.grids:
        return False
    H = cfg.num_heads / b.wl.tp
    t = mt.bmm.time_s(key, H, b.tokens, dims=dims_of(cfg.mla))
    note = f"{op.note}; MLA BMM table ({which}, {dt}; {mt.bmm.kernels.get(dt, '')}; {H:g} heads per GPU)"
    b.add(name, "gemm", op.layers, 1, t, np.minimum(t, b.m.graph_floor_s), (name,), note, timed_as_a_whole=True, clamp=False)
    return True

