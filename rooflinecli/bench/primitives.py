"""The torch primitives every measurement builds on: RoPE, SiLU * up, the KV-cache write, per-head
q/k norms and SDPA on a chosen backend. The decoder (``bench.e2e_full``) runs them, and the
calibration grid (``bench.opgrid``) times these very functions on the layouts the decoder gives
them, so a calibration row and the step it predicts execute the same code.

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

#: RMSNorm epsilon of every norm the decoder runs
EPS = 1e-5
#: SDPA backends tried, in this order; "default" is torch's own dispatch
SDPA_BACKENDS = ("cudnn", "flash", "efficient", "default")


def inv_freq(head_dim: int, theta: float | None, device):
    """RoPE inverse frequencies [D / 2] (fp32) of base ``theta`` (10,000 when None)."""
    import torch

    base = float(theta or 10000.0)
    return 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))


def rope_tables(positions, inv, dtype=None):
    """cos, sin [T, D] (rotate-half layout) of ``positions`` [T] with inverse frequencies ``inv``
    [D / 2]; bf16 unless ``dtype`` says otherwise."""
    import torch

    ang = positions.to(torch.float32)[:, None] * inv[None, :]
    ang = torch.cat((ang, ang), dim=-1)
    dt = dtype or torch.bfloat16
    return torch.cos(ang).to(dt), torch.sin(ang).to(dt)


def rope(x, cos, sin):
    """x [T, heads, D] rotated with cos/sin [T, D] (torch ops: slice, neg, cat, mul, mul, add)."""
    import torch

    half = x.shape[-1] // 2
    c, s = cos[:, None, :], sin[:, None, :]
    return x * c + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * s


def silu_mul(gu, F: int):
    """SiLU(gate) * up on the two halves of the fused gate_up output gu [T, 2F] (strided views)."""
    import torch.nn.functional as F_

    return F_.silu(gu[:, :F]) * gu[:, F:]


def qk_norm(x, w):
    """Per-head RMSNorm of q or k, x [T, heads, D] (Qwen3): one F.rms_norm over the head dim."""
    import torch.nn.functional as F_

    return F_.rms_norm(x, (x.shape[-1],), w, EPS)


def write_kv(kc, vc, k, v, pos: int) -> None:
    """The new token's K [B, Hkv, D] and V (a strided view of the qkv output) into the caches
    [B, Hkv, C, D] at slot ``pos % C``: ``pos`` itself in a cache of every token (C = N + 1), the
    oldest entry's slot in a sliding window's rolling buffer (C = W)."""
    slot = pos % kc.shape[2]
    kc[:, :, slot] = k
    vc[:, :, slot] = v


def sdpa_call(q, k, v, causal: bool, backend: str):
    """A zero-argument SDPA call on ``backend`` (one of ``SDPA_BACKENDS``), q [B, H, Sq, D], k and
    v [B, KVH, S, D] (GQA through ``enable_gqa`` when KVH < H)."""
    import torch.nn.functional as F

    gqa = k.shape[-3] != q.shape[-3]
    kw = {"enable_gqa": True} if gqa else {}
    if backend == "default":
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]

    def fn():
        with sdpa_kernel([b]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)

    return fn
