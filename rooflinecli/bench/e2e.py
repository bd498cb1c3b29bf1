"""End-to-end check: one decoder layer of the whole-model decoder (``bench.e2e_full``: its
``Weights``, ``prefill_layer`` and ``decode_layer``) run on our Triton kernels, checked, timed,
and set against the analytical model's prediction for that layer
(``rooflinecli.predict.layer_prediction``).

The layer (Llama style, pre-norm, SwiGLU, GQA, RoPE; q/k/v biases and q/k norms when the config
has them):

    h = x + o_proj(attention(rope(qkv_proj(rmsnorm(x)))))
    y = h + down(silu(gate(rmsnorm(h))) * up(rmsnorm(h)))

Ours (``e2e_full.TritonOps``): ``kernels.rmsnorm``, ``kernels.gemm`` (q/k/v fused into one GEMM,
gate/up into one), ``kernels.flash_attention`` (prefill, causal) and ``kernels.decode_attention``
(one decode step over a KV cache of ``context`` tokens). Glue in torch, counted in the measured
time but not in the model: RoPE, the SiLU-times-up product (the model has it as ``mlp.act``),
residual adds, the head transposes and the KV-cache write. Before it is timed the layer is checked
against ``e2e_full.ReferenceOps`` (the torch ops in float32, same weights), and so is the torch
engine (``e2e_full.TorchOps``). It is timed by the bench's one timer (``timing``: CUDA-graph
replays of the whole layer, what serving engines do for decode, beside the median of eager
launches; eager launches alone when capture fails).

Predictions: the per-layer ops of ``layer_prediction`` (every op repeated per layer: the model's
embedding, final norm and LM head are left out), summed, with the datasheet spec, the measured
spec, and the measured spec with its fitted efficiency table.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rooflinecli.bench.e2e_full import rel_error
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
    from rooflinecli.bench.e2e_full import ReferenceOps, TorchOps, TritonOps, Weights, cache_len, decode_layer, prefill_layer

    # one layer; the embedding and LM head are not run, so their vocabulary is cut to a few rows
    W = Weights(replace(cfg, num_layers=1, vocab_size=8), device, seed)
    L, bf = W.layers[0], torch.bfloat16
    d, Hkv, D = cfg.hidden_size, cfg.num_kv_heads, cfg.head_dim
    engines = {"triton": TritonOps(), "torch": TorchOps(), "reference": ReferenceOps()}
    g = torch.Generator().manual_seed(seed + 1)
    phases = []

    # ---- prefill -------------------------------------------------------------------------------
    B, S = shapes.prefill_batch, shapes.prompt_len
    x = device_randn((B, S, d), bf, device, g)
    kc, vc = (device_randn((B, Hkv, S, D), bf, device, g) for _ in range(2))
    cos, sin = W.rope_tables(torch.arange(S, device=device))

    def prefill_fn(ops):
        return prefill_layer(ops, L, cfg, x, cos, sin, kc, vc)

    check = _check(prefill_fn, engines)
    phases.append(_phase("prefill", cfg, datasheet, measured, B, S, check, lambda: prefill_fn(engines["triton"]), device, min_samples))
    del x, kc, vc

    # ---- decode step -----------------------------------------------------------------------------
    B, N = shapes.decode_batch, shapes.context
    x = device_randn((B, d), bf, device, g)
    kc, vc = (device_randn((B, Hkv, cache_len(cfg, N), D), bf, device, g) for _ in range(2))
    cos, sin = W.rope_tables(torch.full((B,), N, device=device))

    def decode_fn(ops):
        return decode_layer(ops, L, cfg, x, cos, sin, kc, vc, N)

    check = _check(decode_fn, engines)
    phases.append(_phase("decode", cfg, datasheet, measured, B, N, check, lambda: decode_fn(engines["triton"]), device, min_samples))
    return {
        "model": cfg.name,
        "layer": {"hidden_size": cfg.hidden_size, "num_heads": cfg.num_heads, "num_kv_heads": cfg.num_kv_heads, "head_dim": cfg.head_dim, "intermediate_size": cfg.intermediate_size, "dtype": "bf16"},
        "kernels": ["rmsnorm", "gemm (qkv, o, gate+up, down)", "flash_attention (prefill, causal)", "decode_attention (decode)"],
        "unmodelled_glue": "RoPE, residual adds, head transposes, KV-cache write (torch; in the measured time, not in the prediction)",
        "datasheet_spec": datasheet.id,
        "measured_spec": measured.id if measured is not None else None,
        "phases": phases,
    }


def _check(fn, engines: dict) -> dict[str, Any]:
    """Our kernels' layer (``max_rel_error``) and the torch engine's (``torch_rel_error``) against
    the float32 reference; both must be within ``LAYER_TOLERANCE``."""
    try:
        expect = fn(engines["reference"])
        err = rel_error(fn(engines["triton"]), expect)
        torch_err = rel_error(fn(engines["torch"]), expect)
    except Exception as e:  # noqa: BLE001 - recorded as a red check, the phase is not timed
        return {"correct": False, "max_rel_error": None, "torch_rel_error": None, "error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
    bad = [f"{who} rel error {e:.3e} > {LAYER_TOLERANCE:.1e}" for who, e in (("triton", err), ("torch", torch_err)) if not e <= LAYER_TOLERANCE]
    return {"correct": not bad, "max_rel_error": err, "torch_rel_error": torch_err, "error": "; ".join(bad)}


def _phase(name, cfg, ds, ms, batch, context, check, fn, device, min_samples) -> dict[str, Any]:
    from rooflinecli.bench import timing
    from rooflinecli.bench.e2e_full import eager_runs, graph_replays, sync_quietly, failure_reason
    from rooflinecli.results import quantiles_s

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
    eager, eager_method = eager_runs(fn, device, max(min_samples, 10))
    samples, method, note = eager, eager_method, ""  # the CPU: wall-clock calls
    if device == "cuda":
        try:
            samples, method, _last = graph_replays(fn, device, max(min_samples, 10))
        except Exception as e:  # noqa: BLE001 - a layer that will not capture is timed eagerly
            sync_quietly(device)
            samples, method, note = eager, eager_method, f"CUDA-graph capture failed ({failure_reason(e)}); eager launches timed"
    p20, p50, p80 = quantiles_s(samples)
    out.update(measured_s=p50, p20_s=p20, p80_s=p80, samples_s=list(samples), method=method, timing_note=note)
    if device == "cuda":
        out["eager_p50_s"] = timing.median_s(eager)
    return out
