"""The shapes the calibration grid times (``bench.opgrid``): one ``Case`` per op and shape, with
its FLOPs and bytes (each input read once, each output written once, from ``rooflinecli.formulas``)
and a factory of the call on fresh random inputs (torch imported inside the factories).

Ops and shape keys (those of the H200 calibration fixture): ``gemm`` {M, N, K} with a ``name``
such as ``llama8b.qkv``; ``rmsnorm_copy`` and ``rmsnorm`` {T, D}; ``add_`` {T, D}; ``silu_mul``
{T, F}; ``rope`` {T, H, D}; ``copy`` {bytes}; ``sdpa_prefill_causal`` and ``sdpa_decode`` {B, H,
KVH, S, D} with the fastest SDPA ``backend``; ``launch_floor`` {}; ``gemm_sustained`` and
``copy_sustained`` with ``t_series`` (added by ``calibrate`` from its ceiling runs). ``flops`` and
``bytes``: each input read once, each output written once.

The decode step's small ops on the layouts ``roofline e2e --full`` runs them on (the very functions
of ``bench.primitives`` that the decoder calls): ``rope_qkv_strided`` {T, H, KVH, D} (``rope`` on the q and k views of a fused
qkv output [T, (H + 2 KVH) D]), ``silu_mul_strided`` {T, F} (``silu_mul`` on the halves of a gate_up
output [T, 2F]; bytes: 3 passes of T x F), ``kv_write`` {B, H, KVH, N, D} (``write_kv``: K and V of
one new token into caches [B, KVH, N + 1, D] at N, V a view of the qkv output; bytes: K and V read
once, written once).

The per-kernel cost of a CUDA graph when consecutive kernels differ (a real decode step: ~23
different kernels per layer, where every other row repeats one op): ``launch_floor_mixed`` {k}
cycles through the first k of ``MIXED_KERNELS`` (tiny torch kernels, k in ``MIXED_K``), and
``launch_floor_mixed_gemm`` {k, M, N, K} alternates a cuBLAS GEMM (M 1, N = K = 256; and
N = K = 4096 as a diagnostic: does a switch show behind a 14 us kernel?) with ``x.add_(1)``. Each such row holds two times per kernel of the same kernels on the same inputs:
``t_graph`` interleaved (A B C A B C ...) and ``t_blocked`` grouped (A A ... B B ... C C ...,
each kernel repeated as every other row repeats its op); ``t_graph - t_blocked`` is the cost of a
switch between different kernels, which no other row holds (``sets`` = k, two graphs per row;
``flops`` and ``bytes``: of the k kernels together, one launch of each).

Absorbed MLA decode as a torch engine runs it (``kernels.mla_decode.matmul_baseline``'s ops):
``mla_decode_matmul`` {B, H, S, R, P}: scores = [q_latent | q_rope] @ [c_kv | k_rope]^T over a
latent cache [B, S, R + P] (one bmm), softmax in fp32, then @ c_kv (FLOPs and bytes: the analysis
op's formulas, ``attention_decode_flops`` + ``softmax_flops`` and ``mla_kv_cache_bytes`` +
``attention_qo_bytes``). DeepSeek-V2-Lite's 16 heads and V3's 128, R 512, P 64.

A torch MoE layer's routed experts (``kernels.moe_torch``, torch only): ``moe_grouped``
{T, E, k, d, I}, fp32 softmax routing + top-k, then torch._grouped_mm over expert-sorted slots
(w13, silu*mul, w2) and the combine, at Mixtral 8x7B's and Qwen3-30B-A3B's expert shapes for 1 to
4,096 tokens (FLOPs and bytes: ``moe_experts_work``, the analysis's expert ops).

The GEMMs of a decode step as it streams its weights: ``gemm_stream`` {M, L, D, F, Q}, one pass
over L layers of distinct qkv [Q, D], o [D, D], gate_up [2F, D] and down [D, F] weights (Llama-3-8B
widths, 32 layers, 14 GB: Llama-3-8B's own layer weights) per launch, against which the fit checks the single-GEMM rows, each of
which repeats one weight matrix or a few.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rooflinecli import formulas
from rooflinecli.bench import primitives
from rooflinecli.bench.primitives import SDPA_BACKENDS, sdpa_call

#: distinct tiny kernels of ``launch_floor_mixed`` (each one kernel on one float or one row of
#: 4096, the decode step's hidden size), in the order the first k are taken
MIXED_KERNELS = ("add_1", "rms_norm_4096", "mul_4096", "copy_4096", "silu_4096", "index_copy_kv", "neg_4096", "add_4096")
#: (flops, bytes) of each: inputs read once, outputs written once (bf16 rows, fp32 scalar, int64 index)
MIXED_WORK = {"add_1": (1, 8), "rms_norm_4096": (4 * 4096, 3 * 8192), "mul_4096": (4096, 3 * 8192), "copy_4096": (0, 2 * 8192),
              "silu_4096": (4 * 4096, 2 * 8192), "index_copy_kv": (0, 2 * 2048 + 8), "neg_4096": (4096, 2 * 8192), "add_4096": (4096, 3 * 8192)}
#: absorbed MLA decode: latent rank and RoPE width (DeepSeek-V2/V3)
MLA_R, MLA_P = 512, 64


@dataclass
class Case:
    """One shape: ``make(set_index)`` returns the call on that input set (allocated on first use)."""

    op: str
    shape: dict[str, int]
    flops: float
    bytes: float
    set_bytes: float
    make: Callable[[Any, Any], Callable[[], Any]]  # (device, generator) -> fn on fresh inputs
    name: str | None = None
    #: mixed-kernel cases: (device, generator) -> the k distinct kernels (``measure_mixed``)
    make_kernels: Callable[[Any, Any], list[Callable[[], Any]]] | None = None
    note: str | None = None
    cost_s: float = 0.0  # a rough size for ordering (bytes / 3 TB/s + flops / 500 TFLOP/s)
    backends: tuple[str, ...] = ()  # SDPA: candidate backends; make gets the chosen one via Case.backend
    backend: str | None = None

    def __post_init__(self) -> None:
        self.cost_s = self.bytes / 3e12 + self.flops / 5e14


def _randn(shape, device, gen, dtype=None):
    import torch

    from kernels.testing import device_randn

    return device_randn(tuple(shape), dtype or torch.bfloat16, device, gen)


def gemm_case(M: int, N: int, K: int, name: str) -> Case:
    def make(device, gen):
        import torch.nn.functional as F

        a, w = _randn((M, K), device, gen), _randn((N, K), device, gen, None)
        return lambda: F.linear(a, w)

    b = float(formulas.gemm_min_bytes(M, N, K, 2))
    return Case("gemm", {"M": M, "N": N, "K": K}, float(formulas.gemm_flops(M, N, K)), b, b, make, name=name, note="F.linear bf16 (cuBLAS)")


def elementwise_cases(T: int, D: int, F_: int) -> list[Case]:
    def rms_copy(device, gen):
        import torch
        import torch.nn.functional as F

        x, w, out = _randn((T, D), device, gen), 1 + 0.1 * _randn((D,), device, gen), torch.empty((T, D), dtype=torch.bfloat16, device=device)
        return lambda: out.copy_(F.rms_norm(x, (D,), w, 1e-6))

    def rms(device, gen):
        import torch.nn.functional as F

        x, w = _randn((T, D), device, gen), 1 + 0.1 * _randn((D,), device, gen)
        return lambda: F.rms_norm(x, (D,), w, 1e-6)

    def add(device, gen):
        x, y = _randn((T, D), device, gen), _randn((T, D), device, gen)
        return lambda: x.add_(y)

    def silu_mul(device, gen):
        import torch.nn.functional as F

        g, u = _randn((T, F_), device, gen), _randn((T, F_), device, gen)
        return lambda: F.silu(g) * u

    n, nf = T * D * 2, T * F_ * 2
    return [
        Case("rmsnorm_copy", {"T": T, "D": D}, 4.0 * T * D, 4 * n, 2 * n, rms_copy, note="F.rms_norm then copy_ into a preallocated output (two kernels' traffic counted)"),
        Case("rmsnorm", {"T": T, "D": D}, 4.0 * T * D, 2 * n + 2 * D, n, rms, note="F.rms_norm alone (read x and the weight, write y)"),
        Case("add_", {"T": T, "D": D}, float(T * D), 3 * n, 2 * n, add, note="x.add_(y) in place"),
        Case("silu_mul", {"T": T, "F": F_}, 5.0 * T * F_, 5 * nf, 2 * nf, silu_mul, note="silu (read g, write tmp) then mul (read tmp, u; write out): 5 passes of T x F"),
    ]


def rope_case(T: int, H: int, D: int) -> Case:
    def make(device, gen):
        import torch

        x = _randn((T, H, D), device, gen)
        ang = torch.rand((T, D // 2), device=device, dtype=torch.float32) * 6.283
        cos, sin = torch.cos(ang).to(torch.bfloat16), torch.sin(ang).to(torch.bfloat16)
        c, s = torch.cat((cos, cos), -1)[:, None, :], torch.cat((sin, sin), -1)[:, None, :]
        half = D // 2

        def rope():
            rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
            return x * c + rot * s

        return rope

    n = T * H * D * 2
    return Case("rope", {"T": T, "H": H, "D": D}, 3.0 * T * H * D, 2 * n + 2 * T * D * 2, n, make,
                note="rotate-half RoPE as torch ops (neg, cat, 2 mul, add: several kernels); x read once, cos/sin read once, out written once")


def rope_qkv_strided_case(T: int, H: int, KVH: int, D: int) -> Case:
    """RoPE of the q and k heads as the decode step runs it (``primitives.rope``), on the strided
    q and k views of a fused qkv output [T, (H + 2 KVH) * D]."""

    def make(device, gen):
        import torch

        qkv = _randn((T, (H + 2 * KVH) * D), device, gen).view(T, H + 2 * KVH, D)
        ang = torch.rand((T, D // 2), device=device, dtype=torch.float32) * 6.283
        ang = torch.cat((ang, ang), -1)
        cos, sin = torch.cos(ang).to(torch.bfloat16), torch.sin(ang).to(torch.bfloat16)
        return lambda: (primitives.rope(qkv[:, :H], cos, sin), primitives.rope(qkv[:, H : H + KVH], cos, sin))

    n = T * (H + KVH) * D * 2
    return Case("rope_qkv_strided", {"T": T, "H": H, "KVH": KVH, "D": D}, 3.0 * T * (H + KVH) * D, 2 * n + 2 * T * D * 2, T * (H + 2 * KVH) * D * 2 + 2 * T * D * 2, make,
                note="primitives.rope on q and on k: strided views of the fused qkv output; q and k read once, cos/sin read once, the rotated q and k written once")


def silu_mul_strided_case(T: int, F_: int) -> Case:
    """SiLU(gate) * up as the decode step runs it (``primitives.silu_mul``) on the two halves of a
    fused gate_up output [T, 2F]."""

    def make(device, gen):
        gu = _randn((T, 2 * F_), device, gen)
        return lambda: primitives.silu_mul(gu, F_)

    nf = T * F_ * 2
    return Case("silu_mul_strided", {"T": T, "F": F_}, 5.0 * T * F_, 3 * nf, 3 * nf, make,
                note="primitives.silu_mul on the halves of gate_up [T, 2F] (silu then mul: two kernels); gate and up read once, the output written once")


def kv_write_case(B: int, H: int, KVH: int, N: int, D: int) -> Case:
    """The new token's K and V written into caches [B, KVH, N + 1, D] at position N as the decode
    step does it (``primitives.write_kv``): K contiguous (the RoPE output), V a strided view of the
    qkv output [B, H + 2 KVH, D]."""

    def make(device, gen):
        import torch

        qkv = _randn((B, H + 2 * KVH, D), device, gen)
        k, v = _randn((B, KVH, D), device, gen), qkv[:, H + KVH :]
        # the cache contents do not change the write: allocated, not filled (GBs at large B)
        kc = torch.empty((B, KVH, N + 1, D), dtype=torch.bfloat16, device=device)
        vc = torch.empty_like(kc)
        return lambda: primitives.write_kv(kc, vc, k, v, N)

    n = B * KVH * D * 2
    cache = 2 * B * KVH * (N + 1) * D * 2
    return Case("kv_write", {"B": B, "H": H, "KVH": KVH, "N": N, "D": D}, 0.0, 4.0 * n, cache + B * (H + 3 * KVH) * D * 2, make,
                note="primitives.write_kv: kc[:, :, N] = k, vc[:, :, N] = v (two copy kernels); k and v read once, the cache entries written once")


def copy_case(nbytes: int) -> Case:
    def make(device, gen):
        import torch

        src = _randn((nbytes // 2,), device, gen)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    return Case("copy", {"bytes": nbytes}, 0.0, 2.0 * nbytes, 2.0 * nbytes, make, note="dst.copy_(src) bf16")


def launch_floor_case() -> Case:
    def make(device, gen):
        import torch

        x = torch.ones(1, dtype=torch.float32, device=device)
        return lambda: x.add_(1)

    return Case("launch_floor", {}, 1.0, 8.0, 4.0, make, note="x.add_(1) on one float")


def _mixed_kernel(name: str, device, gen) -> Callable[[], Any]:
    """One tiny kernel of ``MIXED_KERNELS`` on its own inputs (idempotent or harmless when repeated)."""
    import torch
    import torch.nn.functional as F

    if name == "add_1":
        x = torch.ones(1, dtype=torch.float32, device=device)
        return lambda: x.add_(1)
    if name == "index_copy_kv":  # one token's K into a [1, 8, 16, 128] cache at position 5
        cache, new = _randn((1, 8, 16, 128), device, gen), _randn((1, 8, 1, 128), device, gen)
        pos = torch.tensor([5], dtype=torch.long, device=device)
        return lambda: cache.index_copy_(2, pos, new)
    x, y = _randn((1, 4096), device, gen), _randn((1, 4096), device, gen)
    if name == "rms_norm_4096":
        w = 1 + 0.1 * _randn((4096,), device, gen)
        return lambda: F.rms_norm(x, (4096,), w, 1e-6)
    if name == "mul_4096":
        return lambda: torch.mul(x, y)
    if name == "copy_4096":
        return lambda: y.copy_(x)
    if name == "silu_4096":
        return lambda: F.silu(x)
    if name == "neg_4096":
        return lambda: torch.neg(x)
    if name == "add_4096":
        return lambda: torch.add(x, y)
    raise ValueError(f"unknown mixed kernel {name!r}")


def launch_floor_mixed_case(k: int) -> Case:
    """k distinct tiny kernels cycled in one graph (``measure_mixed``)."""
    names = MIXED_KERNELS[:k]

    def kernels(device, gen):
        return [_mixed_kernel(n, device, gen) for n in names]

    flops, nbytes = (float(sum(MIXED_WORK[n][i] for n in names)) for i in (0, 1))
    return Case("launch_floor_mixed", {"k": k}, flops, nbytes, nbytes, lambda device, gen: kernels(device, gen)[0],
                make_kernels=kernels, note="kernels: " + ", ".join(names) + "; t_graph interleaved, t_blocked each kernel repeated")


def launch_floor_mixed_gemm_case(M: int, N: int, K: int) -> Case:
    """A cuBLAS GEMM alternating with ``x.add_(1)`` (``measure_mixed``)."""

    def kernels(device, gen):
        import torch.nn.functional as F

        a, w = _randn((M, K), device, gen), _randn((N, K), device, gen)
        return [lambda: F.linear(a, w), _mixed_kernel("add_1", device, gen)]

    flops = float(formulas.gemm_flops(M, N, K)) + MIXED_WORK["add_1"][0]
    nbytes = float(formulas.gemm_min_bytes(M, N, K, 2)) + MIXED_WORK["add_1"][1]
    return Case("launch_floor_mixed_gemm", {"k": 2, "M": M, "N": N, "K": K}, flops, nbytes, nbytes, lambda device, gen: kernels(device, gen)[0],
                make_kernels=kernels, note="F.linear bf16 (cuBLAS) alternating with x.add_(1); t_graph interleaved, t_blocked each kernel repeated")


def gemm_stream_case(M: int, L: int, D: int, F: int, Q: int) -> Case:
    """One pass of decode-sized GEMMs over ``L`` layers of distinct weights, in a decode step's
    order: qkv [Q, D], o [D, D], gate_up [2F, D], down [D, F] per layer, M tokens. Every other GEMM
    row repeats one weight matrix (or cycles a few); this one reads each weight once per pass,
    14 GB of them, so nothing of the last layer's weights, TLB entries included, helps the next:
    the fit compares it with the sum of its GEMMs' own rows (``fit.gemm_stream_table``).
    ``t_graph`` / ``t_eager`` are seconds per pass."""
    shapes = [(Q, D), (D, D), (2 * F, D), (D, F)]

    def make(device, gen):
        import torch.nn.functional as Fn

        xs = {K: _randn((M, K), device, gen) for K in (D, F)}
        ws = [_randn((N, K), device, gen) for _ in range(L) for N, K in shapes]

        def one_pass():
            for w in ws:
                Fn.linear(xs[w.shape[1]], w)

        return one_pass

    flops = float(L * sum(formulas.gemm_flops(M, N, K) for N, K in shapes))
    b = float(L * sum(formulas.gemm_min_bytes(M, N, K, 2) for N, K in shapes))
    return Case("gemm_stream", {"M": M, "L": L, "D": D, "F": F, "Q": Q}, flops, b, b, make,
                note=f"F.linear bf16 (cuBLAS) over {L} layers of distinct qkv / o / gate_up / down weights, one pass per launch")


def attention_case(op: str, B: int, H: int, KVH: int, S: int, D: int) -> Case:
    causal = op == "sdpa_prefill_causal"
    Sq = S if causal else 1

    def make(device, gen, backend="default", expand=False):
        q = _randn((B, H, Sq, D), device, gen)
        k, v = _randn((B, KVH, S, D), device, gen), _randn((B, KVH, S, D), device, gen)
        if expand and KVH != H:  # expansion outside the timed region
            k, v = k.repeat_interleave(H // KVH, 1), v.repeat_interleave(H // KVH, 1)
        return sdpa_call(q, k, v, causal, backend)

    if causal:
        flops = 2.0 * B * H * S * S * D  # QK^T and PV, causal half of 4 B H S^2 D
    else:
        flops = 4.0 * B * H * S * D
    b = 2.0 * (2 * B * H * Sq * D + 2 * B * KVH * S * D)
    return Case(op, {"B": B, "H": H, "KVH": KVH, "S": S, "D": D}, flops, b, b, make, backends=SDPA_BACKENDS)


def mla_decode_case(B: int, H: int, S: int, R: int = MLA_R, P: int = MLA_P) -> Case:
    """Absorbed MLA decode through torch: one bmm for the scores over the whole latent row, softmax
    in fp32, one bmm with c_kv (the ops of ``kernels.mla_decode.matmul_baseline``, written here so
    that calibrate needs torch only)."""

    def make(device, gen):
        import torch

        q = _randn((B, H, R + P), device, gen)
        cache = _randn((B, S, R + P), device, gen)
        scale = 1.0 / math.sqrt(R + P)

        def fn():
            s = torch.matmul(q, cache.transpose(1, 2))  # [B, H, S]
            p = torch.softmax(s.float() * scale, dim=-1).to(q.dtype)
            return torch.matmul(p, cache[:, :, :R])

        return fn

    flops = float(formulas.attention_decode_flops(B, H, S, R + P, R) + formulas.softmax_flops(B, H, S))
    nbytes = float(formulas.mla_kv_cache_bytes(1, R, P, S, 2, B) + formulas.attention_qo_bytes(B, H, 1, R + P, 2, R))
    return Case("mla_decode_matmul", {"B": B, "H": H, "S": S, "R": R, "P": P}, flops, nbytes, nbytes, make,
                note="absorbed MLA decode as torch ops: bmm scores over [c_kv | k_rope], fp32 softmax, bmm with c_kv")


def moe_experts_work(T: int, E: int, k: int, d: int, I: int, b: float = 2.0, touched: float | None = None) -> tuple[float, float]:
    """(FLOPs, bytes) of T tokens through top-k of E SwiGLU experts (d -> I -> d) at ``b`` bytes
    per element, as the analysis counts its ``moe.expert_gate/up/down`` and ``moe.expert_act`` ops
    (the ``touched`` experts' weights read once, by default the uniform-routing expectation
    ``formulas.expected_experts_touched``; each linear's activations in and out; the activation's
    three passes). Tested against the analysis."""
    pairs = T * k
    touched = float(formulas.expected_experts_touched(E, k, T)) if touched is None else float(touched)
    flops = 2 * formulas.linear_flops(pairs, d, I) + formulas.linear_flops(pairs, I, d) + formulas.activation_flops(pairs, I, True)
    nbytes = (touched * 3 * formulas.linear_weight_bytes(d, I, b) + 2 * formulas.linear_activation_bytes(pairs, d, I, b)
              + formulas.linear_activation_bytes(pairs, I, d, b) + formulas.streaming_bytes(pairs * I, b, reads=2, writes=1))
    return float(flops), float(nbytes)


def moe_grouped_case(T: int, E: int, k: int, d: int, I: int) -> Case:
    """A torch MoE layer's routed experts: ``kernels.moe_torch.route`` on random router logits, then
    ``kernels.moe_torch.experts`` (torch._grouped_mm on sm_90+ and torch >= 2.9 on the CPU). A
    calibration without these rows took them from bench's torch ``moe`` rows: their median plus the
    routing's 6 kernels at the launch floor (the shipped H200 calibration's 10 rows)."""

    def make(device, gen):
        from kernels.moe_torch import experts, route

        x = _randn((T, d), device, gen)
        logits = _randn((T, E), device, gen)
        w1 = _randn((E, 2 * I, d), device, gen) * d**-0.5
        w2 = _randn((E, d, I), device, gen) * I**-0.5

        def fn():
            ids, w = route(logits, k)
            return experts(x, w1, w2, ids, w)

        return fn

    flops, nbytes = moe_experts_work(T, E, k, d, I)
    set_bytes = 2.0 * (E * 3 * d * I + T * (d + E))
    return Case("moe_grouped", {"T": T, "E": E, "k": k, "d": d, "I": I}, flops, nbytes, set_bytes, make,
                note="torch MoE experts: fp32 softmax routing, top-k, argsort by expert, torch._grouped_mm (w13), silu*mul, "
                     "torch._grouped_mm (w2), routing weights, un-permute, sum over k")


def gemm_fp8_case(M: int, N: int, K: int, name: str) -> Case:
    """``torch._scaled_mm`` of fp8 e4m3 A [M, K] and W [N, K] (per-tensor scales of 1: the random
    inputs are within e4m3's range), bf16 out, fast accumulation: what the achievable model's fp8
    GEMM speedup is fitted from."""
    def make(device, gen):
        import torch

        a = _randn((M, K), device, gen).to(torch.float8_e4m3fn)
        w = _randn((N, K), device, gen).to(torch.float8_e4m3fn)
        one = torch.ones(1, dtype=torch.float32, device=device)  # as bench's fp8 inputs (GPU-run shape)
        return lambda: torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)

    b = float(formulas.gemm_min_bytes(M, N, K, 1, 2))  # fp8 in, bf16 out
    return Case("gemm_fp8", {"M": M, "N": N, "K": K}, float(formulas.gemm_flops(M, N, K)), b, b, make, name=name,
                note="torch._scaled_mm fp8 e4m3 -> bf16, fast accumulation")
