"""A mixture-of-experts layer as torch ops (no Triton): what a torch engine runs, and the baseline
of ``kernels.moe``. Used by ``kernels.moe`` (its ``baseline`` and ``route``) and by ``roofline
calibrate``'s ``moe_grouped`` rows (``rooflinecli.bench.opgrid``), which need torch only.

* ``route(router_logits, k)``: softmax over experts in fp32, top-k, weights renormalized to sum to
  1 per token (Mixtral / Qwen3 style).
* ``experts(hidden, w1, w2, topk_ids, topk_weights)``: the routed SwiGLU experts and the combine.
  With ``torch._grouped_mm`` (CUTLASS grouped GEMM, bf16, 16-byte aligned rows, sm_90+; on the CPU
  from torch 2.9): the T*k slots sorted by expert, one grouped GEMM with w13, silu(gate) * up, one
  grouped GEMM with w2, scaled by the routing weights, un-permuted and summed over the k choices.
  No host sync: the layer can be captured in a CUDA graph. Otherwise the Hugging Face style loop
  over experts (``torch.where`` per expert: host syncs, not capturable).

w1 [E, 2I, d] (gate rows then up rows), w2 [E, d, I], hidden [T, d], ids and weights [T, k].
"""

from __future__ import annotations

import torch

#: kernels of ``experts`` on its grouped path, and of ``route`` (torch 2.11 on CUDA: argsort,
#: zeros + scatter_add, cumsum + cast, index div + gather, grouped GEMM, silu, mul, grouped GEMM,
#: weight gather + mul, empty + index_copy, sum; route: fp32 cast, softmax, top-k, int32 cast,
#: sum, div)
GROUPED_KERNELS = 15
ROUTE_KERNELS = 6


def route(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax over experts in fp32, top-k, weights renormalized to sum to 1 per token.
    Returns (topk_ids [T, k] int32, topk_weights [T, k] fp32)."""
    if router_logits.ndim != 2 or not 1 <= top_k <= router_logits.shape[1]:
        raise ValueError(f"route: logits must be [T, E] with 1 <= k <= E, got {tuple(router_logits.shape)}, k={top_k}")
    probs = torch.softmax(router_logits.float(), dim=-1)
    w, ids = torch.topk(probs, top_k, dim=-1)
    return ids.to(torch.int32), w / w.sum(dim=-1, keepdim=True)


def grouped_mm_ok(hidden, w1, w2) -> bool:
    """torch._grouped_mm takes bf16 with 16-byte aligned rows (d, I multiples of 8); on CUDA we use
    it from sm_90 (its CUTLASS kernel; older GPUs take the loop), on the CPU from torch 2.9."""
    if not hasattr(torch, "_grouped_mm") or hidden.dtype != torch.bfloat16:
        return False
    if hidden.shape[1] % 8 or w2.shape[2] % 8:
        return False
    if hidden.device.type == "cpu":
        return tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 9)
    return torch.cuda.get_device_capability(hidden.device) >= (9, 0)


def experts(hidden, w1, w2, topk_ids, topk_weights) -> torch.Tensor:
    """PyTorch MoE: ``torch._grouped_mm`` over expert-sorted slots when it applies, else a loop over
    experts (Hugging Face Mixtral style). Returns [T, d] in hidden's dtype."""
    T, d = hidden.shape
    E, I, k = w1.shape[0], w2.shape[2], topk_ids.shape[1]
    if grouped_mm_ok(hidden, w1, w2):
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
