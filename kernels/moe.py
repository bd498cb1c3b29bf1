"""Mixture-of-experts FFN: top-k routing, grouped SwiGLU GEMMs over the routed tokens, combine.

``moe(hidden[T, d], w1[E, 2I, d], w2[E, d, I], topk_ids[T, k], topk_weights[T, k]) -> out[T, d]``
with out[t] = sum_j topk_weights[t, j] * expert_{topk_ids[t, j]}(hidden[t]) and
expert_e(x) = w2[e] @ (silu(w1[e, :I] @ x) * (w1[e, I:] @ x)) (gate rows first, then up rows, as in
vLLM's fused w13). ``route(router_logits, k)`` gives ids and weights from logits (softmax, top-k,
renormalized, Mixtral/Qwen3 style).

Steps (``moe``):
1. Permute (torch, no host sync so the op can be captured in a CUDA graph): the T*k (token, choice)
   slots are sorted by expert and each expert's run is padded to a multiple of ``BLOCK_M``
   (``align_by_expert``); each block of ``BLOCK_M`` sorted slots belongs to one expert.
2. ``_moe_gate_up_kernel`` (Triton): per block, gathers its tokens' rows of ``hidden``, multiplies by
   the expert's gate and up rows of ``w1`` (fp32 accumulation) and writes silu(gate) * up.
3. ``_moe_down_kernel`` (Triton): multiplies by the expert's ``w2``, scales by the routing weight and
   writes each slot's row back at its original (token, choice) position: the un-permute.
4. Combine (torch): sum over the k choices of each token.

Only the experts some token chose are read: bytes = touched experts' weights + activations.

Baseline: ``torch._grouped_mm`` (CUTLASS grouped GEMM, bf16 only, sm_90+) over the same sorted slots
when available and the shapes are 16-byte aligned; otherwise the Hugging Face style loop over experts
(``torch.where`` per expert: host syncs, not capturable in a CUDA graph).

Tile sizes are picked from the average tokens per expert (``moe_config``); they are not autotuned
because ``BLOCK_M`` also sets the padding of step 1. Under ``TRITON_INTERPRET=1`` bf16 tiles are cast
to fp32 before ``tl.dot`` (``UPCAST``; Triton 3.9's interpreter multiplies bf16 bit patterns).
"""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np
import torch
import triton
import triton.language as tl

from kernels.registry import Case, KernelOp
from kernels.testing import device_randn, torch_dtype
from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element


@triton.jit
def _moe_gate_up_kernel(
    x_ptr, w1_ptr, act_ptr, sorted_slots_ptr, block_expert_ptr,
    num_slots, D, I, top_k,
    stride_xt, stride_xd, stride_we, stride_wn, stride_wk, stride_am, stride_ai,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    if expert < 0:  # a block past the last padded expert run
        return
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slots = tl.load(sorted_slots_ptr + offs_m)
    valid = slots < num_slots  # padding slots hold num_slots
    tokens = tl.where(valid, slots // top_k, 0)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_wn = offs_n % I  # columns past I wrap onto valid rows of w1; never stored
    w_base = w1_ptr + expert * stride_we
    gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, D, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_mask = offs_k < D
        x = tl.load(x_ptr + tokens[:, None] * stride_xt + offs_k[None, :] * stride_xd,
                    mask=valid[:, None] & k_mask[None, :], other=0.0)
        wg = tl.load(w_base + offs_wn[:, None] * stride_wn + offs_k[None, :] * stride_wk,
                     mask=k_mask[None, :], other=0.0)
        wu = tl.load(w_base + (offs_wn + I)[:, None] * stride_wn + offs_k[None, :] * stride_wk,
                     mask=k_mask[None, :], other=0.0)
        if UPCAST:
            x = x.to(tl.float32)
            wg = wg.to(tl.float32)
            wu = wu.to(tl.float32)
        gate = tl.dot(x, tl.trans(wg), gate)
        up = tl.dot(x, tl.trans(wu), up)
    act = gate * tl.sigmoid(gate) * up
    a_ptrs = act_ptr + offs_m[:, None] * stride_am + offs_n[None, :] * stride_ai
    tl.store(a_ptrs, act.to(act_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < I))


@triton.jit
def _moe_down_kernel(
    act_ptr, w2_ptr, y_ptr, sorted_slots_ptr, block_expert_ptr, topk_weights_ptr,
    num_slots, D, I,
    stride_am, stride_ai, stride_we, stride_wn, stride_wk, stride_ys, stride_yd,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    if expert < 0:
        return
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slots = tl.load(sorted_slots_ptr + offs_m)
    valid = slots < num_slots
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_wn = offs_n % D
    w_base = w2_ptr + expert * stride_we
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, I, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_mask = offs_k < I
        a = tl.load(act_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ai,
                    mask=valid[:, None] & k_mask[None, :], other=0.0)
        w = tl.load(w_base + offs_wn[:, None] * stride_wn + offs_k[None, :] * stride_wk,
                    mask=k_mask[None, :], other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(a, tl.trans(w), acc)
    route_w = tl.load(topk_weights_ptr + slots, mask=valid, other=0.0).to(tl.float32)
    acc = acc * route_w[:, None]
    safe_slots = tl.where(valid, slots, 0).to(tl.int64)
    y_ptrs = y_ptr + safe_slots[:, None] * stride_ys + offs_n[None, :] * stride_yd
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=valid[:, None] & (offs_n[None, :] < D))


def moe_config(num_slots: int, E: int) -> dict:
    """Tile sizes from the average slots per expert. untuned: decode-like runs (<= 16 slots per
    expert) take BLOCK_M = 16 and stream wide K tiles of the weights, like the skinny GEMM configs;
    prefill-like runs take the compute-friendly 64/128 tiles of Triton's matmul tutorial (the fused
    gate/up kernel holds two accumulators, so its BLOCK_N is half the down kernel's)."""
    per_expert = num_slots / max(E, 1)
    if per_expert <= 16:
        return dict(BLOCK_M=16, BLOCK_N_UP=64, BLOCK_N_DOWN=64, BLOCK_K=128, num_warps=4, num_stages=4)
    if per_expert <= 128:
        return dict(BLOCK_M=64, BLOCK_N_UP=64, BLOCK_N_DOWN=64, BLOCK_K=64, num_warps=4, num_stages=4)
    return dict(BLOCK_M=128, BLOCK_N_UP=64, BLOCK_N_DOWN=128, BLOCK_K=64, num_warps=8, num_stages=3)


#: the config the CPU interpreter runs (small tiles keep the interpreter fast)
INTERPRET_CONFIG = dict(BLOCK_M=16, BLOCK_N_UP=32, BLOCK_N_DOWN=32, BLOCK_K=32, num_warps=4, num_stages=2)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def route(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax over experts in fp32, top-k, weights renormalized to sum to 1 per token.
    Returns (topk_ids [T, k] int32, topk_weights [T, k] fp32)."""
    if router_logits.ndim != 2 or not 1 <= top_k <= router_logits.shape[1]:
        raise ValueError(f"route: logits must be [T, E] with 1 <= k <= E, got {tuple(router_logits.shape)}, k={top_k}")
    probs = torch.softmax(router_logits.float(), dim=-1)
    w, ids = torch.topk(probs, top_k, dim=-1)
    return ids.to(torch.int32), w / w.sum(dim=-1, keepdim=True)


def align_by_expert(topk_ids: torch.Tensor, E: int, block_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort the T*k slots by expert and pad each expert's run to a multiple of ``block_m``.

    Returns ``sorted_slots`` [P] int32 (slot index t*k + j, or T*k for padding) and
    ``block_expert`` [P / block_m] int32 (the expert of each block, -1 past the last run), where
    P = T*k + min(E, T*k) * (block_m - 1) rounded up to ``block_m`` is the worst case, so that no
    step needs the actual counts on the host."""
    device = topk_ids.device
    flat = topk_ids.reshape(-1).to(torch.int64)
    n = flat.numel()
    counts = torch.zeros(E, dtype=torch.int64, device=device).scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    padded_end = torch.cumsum(padded, 0)
    padded_start = padded_end - padded
    count_start = torch.cumsum(counts, 0) - counts
    order = torch.argsort(flat, stable=True)
    sorted_experts = flat[order]
    rank = torch.arange(n, device=device) - count_start[sorted_experts]
    positions = padded_start[sorted_experts] + rank
    P = triton.cdiv(n + min(E, n) * (block_m - 1), block_m) * block_m
    sorted_slots = torch.full((P,), n, dtype=torch.int32, device=device)
    sorted_slots[positions] = order.to(torch.int32)
    block_starts = torch.arange(0, P, block_m, device=device)
    block_expert = torch.searchsorted(padded_end, block_starts, right=True)
    block_expert = torch.where(block_expert < E, block_expert, -1).to(torch.int32)
    return sorted_slots, block_expert


_DTYPES = (torch.bfloat16, torch.float16)


def _check(hidden, w1, w2, topk_ids, topk_weights):
    if hidden.ndim != 2 or w1.ndim != 3 or w2.ndim != 3:
        raise ValueError(
            f"moe: need hidden [T, d], w1 [E, 2I, d], w2 [E, d, I]; got {tuple(hidden.shape)}, "
            f"{tuple(w1.shape)}, {tuple(w2.shape)}"
        )
    T, d = hidden.shape
    E, two_I, d_w1 = w1.shape
    I = two_I // 2
    if two_I % 2 or d_w1 != d or tuple(w2.shape) != (E, d, I):
        raise ValueError(
            f"moe: with hidden [T={T}, d={d}], w1 must be [E, 2I, {d}] and w2 [E, {d}, I]; got "
            f"{tuple(w1.shape)} and {tuple(w2.shape)}"
        )
    if hidden.dtype not in _DTYPES or w1.dtype != hidden.dtype or w2.dtype != hidden.dtype:
        raise ValueError(f"moe: hidden, w1, w2 must share bf16 or fp16, got {hidden.dtype}, {w1.dtype}, {w2.dtype}")
    if topk_ids.ndim != 2 or topk_ids.shape[0] != T or topk_weights.shape != topk_ids.shape:
        raise ValueError(
            f"moe: topk_ids and topk_weights must both be [T={T}, k], got {tuple(topk_ids.shape)} "
            f"and {tuple(topk_weights.shape)}"
        )
    if topk_ids.dtype not in (torch.int32, torch.int64) or not topk_weights.is_floating_point():
        raise ValueError(f"moe: topk_ids must be int32/int64 and topk_weights float, got {topk_ids.dtype}, {topk_weights.dtype}")
    if not topk_ids.shape[1] <= E:
        raise ValueError(f"moe: k = {topk_ids.shape[1]} > E = {E} experts")
    return T, d, E, I, topk_ids.shape[1]


def gate_up_args(hidden, w1, act, sorted_slots, block_expert, top_k: int, cfg: dict) -> dict:
    """Arguments of ``_moe_gate_up_kernel`` (also used to compile it ahead of time in the tests)."""
    T, d = hidden.shape
    return dict(
        x_ptr=hidden, w1_ptr=w1, act_ptr=act, sorted_slots_ptr=sorted_slots, block_expert_ptr=block_expert,
        num_slots=T * top_k, D=d, I=w1.shape[1] // 2, top_k=top_k,
        stride_xt=hidden.stride(0), stride_xd=hidden.stride(1),
        stride_we=w1.stride(0), stride_wn=w1.stride(1), stride_wk=w1.stride(2),
        stride_am=act.stride(0), stride_ai=act.stride(1),
        BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N_UP"], BLOCK_K=cfg["BLOCK_K"],
        UPCAST=_interpreting() and hidden.dtype == torch.bfloat16,
    )


def down_args(act, w2, y, sorted_slots, block_expert, topk_weights_flat, cfg: dict) -> dict:
    """Arguments of ``_moe_down_kernel``; ``y`` [T*k, d] receives each slot's weighted output."""
    return dict(
        act_ptr=act, w2_ptr=w2, y_ptr=y, sorted_slots_ptr=sorted_slots, block_expert_ptr=block_expert,
        topk_weights_ptr=topk_weights_flat,
        num_slots=y.shape[0], D=w2.shape[1], I=w2.shape[2],
        stride_am=act.stride(0), stride_ai=act.stride(1),
        stride_we=w2.stride(0), stride_wn=w2.stride(1), stride_wk=w2.stride(2),
        stride_ys=y.stride(0), stride_yd=y.stride(1),
        BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N_DOWN"], BLOCK_K=cfg["BLOCK_K"],
        UPCAST=_interpreting() and act.dtype == torch.bfloat16,
    )


def moe(
    hidden: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    topk_ids: torch.Tensor | None = None,
    topk_weights: torch.Tensor | None = None,
    router_logits: torch.Tensor | None = None,
    top_k: int | None = None,
    out: torch.Tensor | None = None,
    config: dict | None = None,
) -> torch.Tensor:
    """MoE SwiGLU FFN over routed tokens; returns out [T, d] in hidden's dtype.

    Give either ``topk_ids`` [T, k] (int, values in [0, E): not checked, that would need a device
    sync) with ``topk_weights`` [T, k], or ``router_logits`` [T, E] with ``top_k``."""
    if router_logits is not None:
        if topk_ids is not None or top_k is None:
            raise ValueError("moe: give router_logits with top_k, or topk_ids with topk_weights, not both")
        topk_ids, topk_weights = route(router_logits, top_k)
    elif topk_ids is None or topk_weights is None:
        raise ValueError("moe: give topk_ids and topk_weights, or router_logits and top_k")
    T, d, E, I, k = _check(hidden, w1, w2, topk_ids, topk_weights)
    if out is None:
        out = torch.empty((T, d), dtype=hidden.dtype, device=hidden.device)
    if out.shape != (T, d) or out.dtype != hidden.dtype:
        raise ValueError(f"moe: out must be [{T}, {d}] {hidden.dtype}, got {tuple(out.shape)} {out.dtype}")
    if T == 0:
        return out
    num_slots = T * k
    cfg = config or (INTERPRET_CONFIG if _interpreting() else moe_config(num_slots, E))
    bm = cfg["BLOCK_M"]
    sorted_slots, block_expert = align_by_expert(topk_ids, E, bm)
    weights_flat = topk_weights.reshape(-1).to(torch.float32).contiguous()
    n_blocks = block_expert.numel()
    act = torch.empty((sorted_slots.numel(), I), dtype=hidden.dtype, device=hidden.device)
    y = torch.empty((num_slots, d), dtype=hidden.dtype, device=hidden.device)
    launch = dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    _moe_gate_up_kernel[(n_blocks, triton.cdiv(I, cfg["BLOCK_N_UP"]))](
        **gate_up_args(hidden, w1, act, sorted_slots, block_expert, k, cfg), **launch
    )
    _moe_down_kernel[(n_blocks, triton.cdiv(d, cfg["BLOCK_N_DOWN"]))](
        **down_args(act, w2, y, sorted_slots, block_expert, weights_flat, cfg), **launch
    )
    torch.sum(y.view(T, k, d), dim=1, out=out)  # combine: fp32 accumulation, one rounding
    return out


def reference(hidden, w1, w2, topk_ids, topk_weights) -> torch.Tensor:
    """Every token through each of its chosen experts, in fp64 from the inputs."""
    T, d = hidden.shape
    I = w2.shape[2]
    x = hidden.to(torch.float64)
    out = torch.zeros((T, d), dtype=torch.float64, device=hidden.device)
    for e in torch.unique(topk_ids).tolist():
        tok, choice = torch.where(topk_ids == e)
        h = x[tok] @ w1[e].to(torch.float64).T
        act = torch.nn.functional.silu(h[:, :I]) * h[:, I:]
        y = act @ w2[e].to(torch.float64).T
        out.index_add_(0, tok, y * topk_weights[tok, choice].to(torch.float64)[:, None])
    return out


def _grouped_mm_ok(hidden, w1, w2) -> bool:
    """torch._grouped_mm takes bf16 with 16-byte aligned rows (d, I multiples of 8); on CUDA we use
    it from sm_90 (its CUTLASS kernel; older GPUs take the loop), on the CPU from torch 2.9."""
    if not hasattr(torch, "_grouped_mm") or hidden.dtype != torch.bfloat16:
        return False
    if hidden.shape[1] % 8 or w2.shape[2] % 8:
        return False
    if hidden.device.type == "cpu":
        return tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 9)
    return torch.cuda.get_device_capability(hidden.device) >= (9, 0)


def baseline(hidden, w1, w2, topk_ids, topk_weights) -> torch.Tensor:
    """PyTorch MoE: ``torch._grouped_mm`` over expert-sorted slots when it applies, else a loop over
    experts (Hugging Face Mixtral style)."""
    T, d = hidden.shape
    E, I, k = w1.shape[0], w2.shape[2], topk_ids.shape[1]
    if _grouped_mm_ok(hidden, w1, w2):
        flat = topk_ids.reshape(-1).to(torch.int64)
        order = torch.argsort(flat, stable=True)
        counts = torch.zeros(E, dtype=torch.int64, device=hidden.device).scatter_add_(0, flat, torch.ones_like(flat))
        offs = torch.cumsum(counts, 0).to(torch.int32)
        xs = hidden[order // k]
        h = torch._grouped_mm(xs, w1.transpose(-2, -1), offs=offs)
        act = torch.nn.functional.silu(h[:, :I]) * h[:, I:]
        ys = torch._grouped_mm(act, w2.transpose(-2, -1), offs=offs)
        ys = ys * topk_weights.reshape(-1)[order, None].to(ys.dtype)
        y = torch.empty_like(ys).index_copy_(0, order, ys)
        return y.view(T, k, d).sum(dim=1)
    out = torch.zeros((T, d), dtype=torch.float32, device=hidden.device)
    for e in range(E):
        tok, choice = torch.where(topk_ids == e)
        if tok.numel() == 0:
            continue
        h = hidden[tok] @ w1[e].T
        act = torch.nn.functional.silu(h[:, :I]) * h[:, I:]
        y = act @ w2[e].T
        out.index_add_(0, tok, y.float() * topk_weights[tok, choice, None].float())
    return out.to(hidden.dtype)


# ---------------------------------------------------------------------------------------------
# Cases: routing is drawn from the case's own seed (numpy), so the cost knows which experts it hits
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def case_routing(T: int, E: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform random routing for a case: logits ~ N(0, 1), top-k, renormalized softmax weights.
    Returns (topk_ids [T, k] int32, topk_weights [T, k] float32)."""
    logits = np.random.default_rng(seed).standard_normal((T, E))
    ids = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    chosen = np.take_along_axis(logits, ids, axis=1)
    w = np.exp(chosen - chosen.max(axis=1, keepdims=True))
    return ids.astype(np.int32), (w / w.sum(axis=1, keepdims=True)).astype(np.float32)


def experts_touched(case: Case) -> int:
    """Distinct experts the case's routing hits (the layer reads only these experts' weights)."""
    p = case.params
    ids, _ = case_routing(p["T"], p["E"], p["k"], p["seed"])
    return int(np.unique(ids).size)


def _make_inputs(case: Case, device, generator) -> dict:
    p = case.params
    T, E, k, d, I = p["T"], p["E"], p["k"], p["d"], p["I"]
    dt = torch_dtype(case.dtype)
    ids, weights = case_routing(T, E, k, p["seed"])
    return {
        "hidden": device_randn((T, d), dt, device, generator),
        # weights scaled by 1/sqrt(fan-in), as initialized models are, so outputs stay O(1)
        "w1": device_randn((E, 2 * I, d), dt, device, generator, scale=d**-0.5),
        "w2": device_randn((E, d, I), dt, device, generator, scale=I**-0.5),
        "topk_ids": torch.from_numpy(ids).to(device),
        "topk_weights": torch.from_numpy(weights).to(device),
    }


def _cost(case: Case) -> tuple[float, float]:
    """FLOPs: the two grouped GEMMs over the T*k slots. Bytes: the touched experts' w1 and w2 once,
    hidden read once and out written once (minimum traffic; the kernels' intermediates are extra)."""
    p = case.params
    T, k, d, I = p["T"], p["k"], p["d"], p["I"]
    b = bytes_per_element(case.dtype)
    slots = T * k
    flops = formulas.linear_flops(slots, d, 2 * I) + formulas.linear_flops(slots, I, d)
    expert_bytes = formulas.linear_weight_bytes(d, 2 * I, b) + formulas.linear_weight_bytes(I, d, b)
    bytes_ = experts_touched(case) * expert_bytes + formulas.linear_activation_bytes(T, d, d, b)
    return float(flops), float(bytes_)


def _case(T: int, E: int, k: int, d: int, I: int, dtype: str, seed: int = 0) -> Case:
    params = {"T": T, "E": E, "k": k, "d": d, "I": I, "seed": seed}
    probe = Case(shape="", params=params, dtype=dtype)
    params["experts_touched"] = experts_touched(probe)
    params["expected_experts_touched"] = float(formulas.expected_experts_touched(E, k, T))
    return Case(shape=f"T{T}-E{E}-k{k}-d{d}-I{I}", params=params, dtype=dtype)


def _mixtral(T: int) -> Case:  # Mixtral 8x7B: 8 experts, top-2, d 4096, I 14336
    return _case(T, 8, 2, 4096, 14336, "bf16")


def _qwen3_moe(T: int) -> Case:  # Qwen3-30B-A3B: 128 experts, top-8, d 2048, I 768
    return _case(T, 128, 8, 2048, 768, "bf16")


OP = KernelOp(
    name="moe",
    make_inputs=_make_inputs,
    run=moe,
    reference=reference,
    baseline=baseline,
    cost=_cost,
    cases={
        "test": (
            _case(1, 8, 2, 64, 96, "bf16"),
            _case(7, 8, 2, 200, 56, "bf16"),
            _case(7, 8, 2, 200, 56, "fp16"),
            _case(33, 16, 4, 128, 40, "bf16"),
            _case(50, 6, 3, 72, 100, "fp16"),
        ),
        "quick": (_mixtral(8), _qwen3_moe(16)),
        "full": (
            _mixtral(1), _mixtral(8), _mixtral(64), _mixtral(4096),
            _qwen3_moe(1), _qwen3_moe(16), _qwen3_moe(64), _qwen3_moe(4096),
        ),
    },
    # roundings of the activation and of each choice's output: 2.4x the CPU-measured bf16 error, 5x fp16
    tolerance={"bf16": 1.6e-2, "fp16": 2e-3},
    model_kind="moe",
    dtypes=("bf16", "fp16"),
    notes=(
        "SwiGLU experts, w1 [E, 2I, d] (gate rows then up rows), w2 [E, d, I]; bytes = distinct experts "
        "hit by the case's routing x expert weights + hidden in + out; params carry experts_touched and "
        "formulas.expected_experts_touched; baseline torch._grouped_mm (bf16) or a loop over experts."
    ),
)
