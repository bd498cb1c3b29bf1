"""End-to-end check: one decoder layer built from the project's kernels, timed, against the
analytical model's prediction for that layer (``rooflinecli.predict.layer_prediction``).

The layer (Llama style, pre-norm, SwiGLU, GQA, RoPE):

    h = x + o_proj(attention(rope(qkv_proj(rmsnorm(x)))))
    y = h + down(silu(gate(rmsnorm(h))) * up(rmsnorm(h)))

Ours: ``kernels.rmsnorm``, ``kernels.gemm`` (q/k/v fused into one GEMM, gate/up into one),
``kernels.flash_attention`` (prefill, causal) and ``kernels.decode_attention`` (one decode step
over a KV cache of ``context`` tokens). Glue in torch, counted in the measured time but not in
the model: RoPE, the SiLU-times-up product (the model has it as ``mlp.act``), residual adds, the
head transposes and the KV-cache write. The layer is checked against a float32 torch reference of
the same weights before it is timed; it is timed by the bench's one timer (``timing.time_cuda``:
CUDA-graph replays of the whole layer, what serving engines do for decode; host-ahead events after
an L2 flush when capture fails).

Predictions: the per-layer ops of ``layer_prediction`` (every op repeated per layer: the model's
embedding, final norm and LM head are left out), summed, with the datasheet spec, the measured
spec, and the measured spec with its fitted efficiency table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from rooflinecli.bench.primitives import inv_freq, rope, rope_tables
from rooflinecli.hardware import HardwareSpec
from rooflinecli.models import ModelConfig

#: Llama-3-8B's layer: d 4096, 32 heads, 8 KV heads, head dim 128, SwiGLU 14336
DEFAULT_MODEL = "llama-3-8b"


@dataclass(frozen=True)
class E2EShapes:
    prefill_batch: int = 1
    prompt_len: int = 2048
    decode_batch: int = 8
    context: int = 4096  # tokens already in the cache at the decode step


#: tiny dims for the CPU interpreter (tests): the same code path, seconds not hours
TINY_SHAPES = E2EShapes(prefill_batch=1, prompt_len=19, decode_batch=2, context=21)


def tiny_config(cfg: ModelConfig) -> ModelConfig:
    """``cfg`` shrunk to a few heads of dim 64 (the flash/decode kernels' smallest head dim)."""
    return replace(cfg, name=f"{cfg.name}-tiny", hidden_size=64, num_heads=2, num_kv_heads=1, head_dim=64, intermediate_size=96, num_layers=2)


def layer_ops_prediction(cfg: ModelConfig, spec: HardwareSpec, phase: str, batch: int, context: int, fitted: bool = False) -> tuple[float, list[dict]]:
    """Sum of the model's per-layer op times for one decoder layer (model-level ops left out).
    ``fitted``: each row's compute and memory times divided by the spec's per-kernel efficiency
    fit (its ``[efficiency]`` table, a validation figure: no prediction mode uses it)."""
    from rooflinecli.analysis import Workload
    from rooflinecli.predict import layer_prediction

    wl = Workload(batch=batch, prompt_len=context, gen_len=1)
    rows = [r for r in layer_prediction(cfg, spec, wl, phase) if r["group"] != "model"]
    if not fitted:
        return float(sum(r["time_s"] for r in rows)), rows
    total = 0.0
    for r in rows:
        eff = spec.efficiency.get(r["kind"], {}) if r["kind"] != "comm" else {}
        total += max(r["compute_time_s"] / eff.get("compute", 1.0), r["memory_time_s"] / eff.get("memory", 1.0)) + r["comm_time_s"] + r["overhead_s"]
    return total, rows


class Layer:
    """Weights and kernels of one decoder layer on ``device``."""

    def __init__(self, cfg: ModelConfig, device: str, dtype_name: str = "bf16", seed: int = 0) -> None:
        import torch

        from kernels.testing import device_randn, torch_dtype

        self.cfg = cfg
        self.device = device
        self.dtype = torch_dtype(dtype_name)
        d, H, Hkv, D, F = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size
        self.d, self.H, self.Hkv, self.D, self.F = d, H, Hkv, D, F
        g = torch.Generator().manual_seed(seed)

        def w(n_out: int, n_in: int):
            return device_randn((n_out, n_in), self.dtype, device, g, scale=n_in**-0.5)

        self.w_qkv = w((H + 2 * Hkv) * D, d)  # [N, K]: nn.Linear layout, as kernels.gemm takes
        self.w_o = w(d, H * D)
        self.w_gate_up = w(2 * F, d)
        self.w_down = w(d, F)
        self.norm1 = (1.0 + 0.1 * device_randn((d,), torch.float32, device, g)).to(self.dtype)
        self.norm2 = (1.0 + 0.1 * device_randn((d,), torch.float32, device, g)).to(self.dtype)
        self.inv_freq = inv_freq(D, cfg.rope_theta, device)
        self.g = g

    # ---- RoPE (torch glue: the decoder's primitives) --------------------------------------------
    def rope_tables(self, positions):
        """cos, sin [T, D] (rotate-half layout) in the layer's dtype."""
        return rope_tables(positions, self.inv_freq, self.dtype)

    @staticmethod
    def rope(x, cos, sin):
        """x [..., T, heads, D] rotated (rotate-half form)."""
        return rope(x, cos, sin)

    # ---- ours ----------------------------------------------------------------------------------
    def prefill(self, x, cos, sin, ops):
        """x [B, S, d] -> (y [B, S, d], k, v [B, Hkv, S, D]) with ``ops`` the kernels (or refs)."""
        import torch

        B, S, d = x.shape
        H, Hkv, D = self.H, self.Hkv, self.D
        xs = x.reshape(B * S, d)
        qkv = ops.gemm(ops.rmsnorm(xs, self.norm1), self.w_qkv).view(B, S, H + 2 * Hkv, D)
        q = self.rope(qkv[:, :, :H], cos, sin).transpose(1, 2).contiguous()
        k = self.rope(qkv[:, :, H : H + Hkv], cos, sin).transpose(1, 2).contiguous()
        v = qkv[:, :, H + Hkv :].transpose(1, 2).contiguous()
        o = ops.attention(q, k, v).transpose(1, 2).reshape(B * S, H * D)
        h = xs + ops.gemm(o, self.w_o)
        gu = ops.gemm(ops.rmsnorm(h, self.norm2), self.w_gate_up)
        act = (torch.nn.functional.silu(gu[:, : self.F].float()) * gu[:, self.F :].float()).to(x.dtype)
        y = h + ops.gemm(act, self.w_down)
        return y.view(B, S, d), k, v

    def decode(self, x, cos, sin, k_cache, v_cache, pos: int, ops):
        """One decode step: x [B, d], caches [B, Hkv, pos + 1, D] holding ``pos`` tokens; the new
        token's K and V are written at ``pos``, then attention runs over pos + 1 tokens."""
        import torch

        B, d = x.shape
        H, Hkv, D = self.H, self.Hkv, self.D
        qkv = ops.gemm(ops.rmsnorm(x, self.norm1), self.w_qkv).view(B, 1, H + 2 * Hkv, D)
        q = self.rope(qkv[:, :, :H], cos, sin)[:, 0]  # [B, H, D]
        k_cache[:, :, pos] = self.rope(qkv[:, :, H : H + Hkv], cos, sin)[:, 0]
        v_cache[:, :, pos] = qkv[:, 0, H + Hkv :]
        o = ops.decode_attention(q.contiguous(), k_cache, v_cache).reshape(B, H * D)
        h = x + ops.gemm(o, self.w_o)
        gu = ops.gemm(ops.rmsnorm(h, self.norm2), self.w_gate_up)
        act = (torch.nn.functional.silu(gu[:, : self.F].float()) * gu[:, self.F :].float()).to(x.dtype)
        return h + ops.gemm(act, self.w_down)


class KernelOps:
    """The project's Triton kernels."""

    def __init__(self) -> None:
        from kernels.decode_attention import decode_attention
        from kernels.flash_attention import flash_attention
        from kernels.gemm import gemm
        from kernels.rmsnorm import rmsnorm

        self.gemm = gemm
        self.rmsnorm = rmsnorm
        self.attention = lambda q, k, v: flash_attention(q, k, v, causal=True)
        self.decode_attention = decode_attention


class ReferenceOps:
    """float32 torch: the check the layer passes before it is timed."""

    def __init__(self, dtype) -> None:
        import torch

        self.dtype = dtype
        self.t = torch

    def gemm(self, a, w):
        return (a.float() @ w.float().T).to(self.dtype)

    def rmsnorm(self, x, w, eps: float = 1e-6):
        xf = x.float()
        return (xf * self.t.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(self.dtype)

    def attention(self, q, k, v):
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, 1).float(), v.repeat_interleave(rep, 1).float()
        return self.t.nn.functional.scaled_dot_product_attention(q.float(), k, v, is_causal=True).to(self.dtype)

    def decode_attention(self, q, k_cache, v_cache):
        rep = q.shape[1] // k_cache.shape[1]
        k, v = k_cache.repeat_interleave(rep, 1).float(), v_cache.repeat_interleave(rep, 1).float()
        o = self.t.nn.functional.scaled_dot_product_attention(q.float()[:, :, None], k, v)
        return o[:, :, 0].to(self.dtype)


def _rel_error(out, ref) -> float:
    import torch

    o, r = out.double(), ref.double()
    if not torch.isfinite(o).all():
        return math.inf
    return float(torch.linalg.vector_norm(o - r) / max(float(torch.linalg.vector_norm(r)), 1e-12))


#: bf16 through ~8 chained ops against an fp32 reference: per-op errors near 4e-3 add up
LAYER_TOLERANCE = 3e-2


def run_e2e(
    cfg: ModelConfig,
    datasheet: HardwareSpec,
    measured: HardwareSpec | None,
    shapes: E2EShapes = E2EShapes(),
    device: str = "cuda",
    min_samples: int = 10,
    seed: int = 0,
) -> dict[str, Any]:
    """Build, check and time the layer's prefill and decode step; the ``extra.end_to_end`` dict."""
    import torch

    from kernels.testing import device_randn

    layer = Layer(cfg, device, "bf16", seed)
    ours, ref = KernelOps(), ReferenceOps(layer.dtype)
    phases = []

    # ---- prefill -------------------------------------------------------------------------------
    B, S = shapes.prefill_batch, shapes.prompt_len
    x = device_randn((B, S, layer.d), layer.dtype, device, layer.g)
    cos, sin = layer.rope_tables(torch.arange(S, device=device))
    check = _check(lambda ops: layer.prefill(x, cos, sin, ops)[0], ours, ref)
    phases.append(_phase("prefill", cfg, datasheet, measured, B, S, check, lambda: layer.prefill(x, cos, sin, ours), device, min_samples))
    del x

    # ---- decode step -----------------------------------------------------------------------------
    B, N = shapes.decode_batch, shapes.context
    x = device_randn((B, layer.d), layer.dtype, device, layer.g)
    k_cache = device_randn((B, layer.Hkv, N + 1, layer.D), layer.dtype, device, layer.g)
    v_cache = device_randn((B, layer.Hkv, N + 1, layer.D), layer.dtype, device, layer.g)
    cos, sin = layer.rope_tables(torch.tensor([N], device=device))

    def step(ops):
        return layer.decode(x, cos, sin, k_cache, v_cache, N, ops)

    check = _check(step, ours, ref)
    phases.append(_phase("decode", cfg, datasheet, measured, B, N, check, lambda: step(ours), device, min_samples))
    return {
        "model": cfg.name,
        "layer": {"hidden_size": cfg.hidden_size, "num_heads": cfg.num_heads, "num_kv_heads": cfg.num_kv_heads, "head_dim": cfg.head_dim, "intermediate_size": cfg.intermediate_size, "dtype": "bf16"},
        "kernels": ["rmsnorm", "gemm (qkv, o, gate+up, down)", "flash_attention (prefill, causal)", "decode_attention (decode)"],
        "unmodelled_glue": "RoPE, residual adds, head transposes, KV-cache write (torch; in the measured time, not in the prediction)",
        "datasheet_spec": datasheet.id,
        "measured_spec": measured.id if measured is not None else None,
        "phases": phases,
    }


def _check(fn, ours, ref) -> dict[str, Any]:
    try:
        out = fn(ours)
        expect = fn(ref)
        err = _rel_error(out, expect)
    except Exception as e:  # noqa: BLE001 - recorded as a red check, the phase is not timed
        return {"correct": False, "max_rel_error": None, "error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
    ok = err <= LAYER_TOLERANCE
    return {"correct": ok, "max_rel_error": err, "error": "" if ok else f"rel error {err:.3e} > {LAYER_TOLERANCE:.1e}"}


def _phase(name, cfg, ds, ms, batch, context, check, fn, device, min_samples) -> dict[str, Any]:
    t_ds, rows = layer_ops_prediction(cfg, ds, name, batch, context)
    out: dict[str, Any] = {
        "phase": name,
        "batch": batch,
        "context": context,
        "predicted_s_datasheet": t_ds,
        "predicted_s_measured": layer_ops_prediction(cfg, ms, name, batch, context)[0] if ms is not None else None,
        "predicted_s_fitted": layer_ops_prediction(cfg, ms, name, batch, context, fitted=True)[0] if ms is not None and ms.efficiency else None,
        "ops": [{"name": r["name"], "kind": r["kind"], "bound": r["bound"], "flops": r["flops"], "bytes": r["bytes"], "predicted_s_datasheet": r["time_s"]} for r in rows],
        **check,
    }
    if not check["correct"]:
        return out
    timing, eager = _time_layer(fn, device, min_samples)
    p20, p50, p80 = timing.quantiles_s
    out.update(measured_s=p50, p20_s=p20, p80_s=p80, samples_s=list(timing.samples_s), method=timing.method, timing_note=timing.note)
    if eager is not None:
        out["eager_p50_s"] = eager
    return out


def _time_layer(fn, device: str, min_samples: int):
    """(timing, eager median or None): the one timer (``timing.time_cuda``: the whole layer as a
    CUDA graph, host-ahead events when capture fails) and the median of flushed eager launches;
    the wall clock on the CPU."""
    from rooflinecli.bench.timing import L2Flusher, median_s, time_cuda, time_cuda_events, time_wall_clock

    if device != "cuda":
        return time_wall_clock(fn, samples=min_samples, warmup=1), None
    import torch

    flusher = L2Flusher("cuda")
    fn()
    torch.cuda.synchronize()
    eager_p50 = median_s(time_cuda_events(fn, flusher, samples=max(min_samples, 10)))
    return time_cuda(fn, flusher, min_samples=min_samples, target_total_s=0.3), eager_p50
