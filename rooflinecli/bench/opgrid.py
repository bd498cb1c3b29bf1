"""The calibration grid of ``roofline calibrate``: vendor kernels through torch, timed on cold data,
written as a calibration file (``achievable.calibration.SCHEMA``) that a measured spec names.

Per shape (``measure_case``):

* ``t_graph``: a CUDA graph of ``n`` launches cycling over ``sets`` input sets (together at least
  ``timing.COLD_L2_MULTIPLE`` x the L2, at most ``timing.COLD_MAX_SETS`` sets), replayed ``REPLAYS`` times (>= 7) back to back
  behind a GPU sleep (``timing.replay_samples``); per-launch time = median replay / ``n``. Launch
  gaps vanish, every launch reads data the previous ones evicted;
* ``t_eager``: the CUDA-event median of single launches (host gaps included).

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

Robust by construction: each shape runs under ``try``; a failure is recorded in ``failed`` and the
grid goes on. Under a time budget (GPU seconds): the categories are visited round-robin, small
shapes first, and no new shape starts once the budget is spent (``skipped`` counts the rest).
torch is imported inside the functions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rooflinecli import formulas
from rooflinecli.achievable.calibration import SCHEMA
from rooflinecli.bench import timing
from rooflinecli.bench import primitives
from rooflinecli.bench.primitives import SDPA_BACKENDS, sdpa_call

REPLAYS = 7
#: input sets of one shape at most (the cold-cache rule's cap, ``timing.cold_sets``)
MAX_SETS = timing.COLD_MAX_SETS
#: launches per graph at most: one pass over the most sets the cold-cache rule allows
MAX_LAUNCHES = timing.COLD_MAX_SETS
#: launches per graph of a mixed-kernel row (``measure_mixed``), a multiple of k
MIXED_LAUNCHES = 128
#: a replay lasts about this long (enough launches that event resolution does not matter)
REPLAY_TARGET_S = 2e-3
#: no single input set above this (bytes): the largest grid shapes stay well inside 141 GB
MAX_SET_BYTES = 12 * 2**30

M_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
#: (name prefix, preset id) whose projection shapes the GEMM grid covers
GEMM_PRESETS = (("llama8b", "llama-3-8b"), ("llama70b", "llama-3-70b"), ("qwen7b", "qwen2.5-7b"))
SQUARE = (1024, 2048, 4096, 8192)
ELEMENTWISE_T = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)
#: (H, KVH, D) of the attention grid: Llama-3-8B, Llama-3-70B, Qwen2.5-7B, MHA, head dim 64
ATTN_HEADS = ((32, 8, 128), (64, 8, 128), (28, 4, 128), (32, 32, 128), (32, 8, 64))
PREFILL_S = (256, 512, 1024, 2048, 4096, 8192)
PREFILL_TOKENS = 16384  # the batched prefill point: B = tokens / S
DECODE_B = (1, 8, 32, 64, 128)
#: the decode step's small ops on their real layouts (``e2e_full``): tokens (decode batches and
#: prefill lengths), (H, KVH, D) of the qkv output, F of the gate_up output, cache batches
STRIDED_T = (1, 8, 32, 64, 512, 2048)
STRIDED_HEADS = ((32, 8, 128), (64, 8, 128))
STRIDED_F = (14336, 28672, 18944)
KV_WRITE_B = (1, 8, 32, 64)
#: cache positions of the KV-write cases (the write's cost does not depend on it; the smallest e2e context)
KV_WRITE_N = 512
DECODE_S = (512, 1024, 2048, 4096, 8192, 16384)
#: distinct tiny kernels of ``launch_floor_mixed`` (each one kernel on one float or one row of
#: 4096, the decode step's hidden size), in the order the first k are taken
MIXED_KERNELS = ("add_1", "rms_norm_4096", "mul_4096", "copy_4096", "silu_4096", "index_copy_kv", "neg_4096", "add_4096")
#: (flops, bytes) of each: inputs read once, outputs written once (bf16 rows, fp32 scalar, int64 index)
MIXED_WORK = {"add_1": (1, 8), "rms_norm_4096": (4 * 4096, 3 * 8192), "mul_4096": (4096, 3 * 8192), "copy_4096": (0, 2 * 8192),
              "silu_4096": (4 * 4096, 2 * 8192), "index_copy_kv": (0, 2 * 2048 + 8), "neg_4096": (4096, 2 * 8192), "add_4096": (4096, 3 * 8192)}
MIXED_K = (2, 4, 8)
#: the GEMMs of ``launch_floor_mixed_gemm`` (M, N, K): a tiny one (what the fit uses) and, as a
#: diagnostic, a decode-sized one (Llama-3-8B's o projection at batch 1: ~14 us), whether a
#: switch still shows behind a long kernel
MIXED_GEMMS = ((1, 256, 256), (1, 4096, 4096))
COPY_BYTES = tuple(4096 * 4**k for k in range(10))  # 4 KiB .. 1 GiB
#: absorbed MLA decode: (heads, batches) at R 512, P 64 over MLA_S cached tokens
MLA_SHAPES = ((16, (1, 8, 32)), (128, (1, 8)))
MLA_S = (1024, 8192, 32768)
MLA_R, MLA_P = 512, 64
#: ``moe_grouped``: a torch MoE layer's routed experts (``kernels.moe_torch``: routing, then
#: torch._grouped_mm over expert-sorted slots) at Mixtral 8x7B's and Qwen3-30B-A3B's expert shapes
#: (E, k, d, I), decode to prefill token counts (grouped kernels run far below dense-GEMM efficiency
#: at prefill: H200 run 2's bench, Qwen3 at 4,096 tokens: 1,391 us against 552 from the dense fit)
MOE_SHAPES = ((8, 2, 4096, 14336), (128, 8, 2048, 768))
MOE_T = (1, 4, 16, 64, 256, 1024, 4096)
#: ``gemm_stream``: decode-sized GEMMs over ``STREAM_LAYERS`` layers of distinct Llama-3-8B weights
#: (qkv, o, gate_up, down: 436 MB a layer; 32 layers, 14 GB, as many as the model has) in one pass,
#: as a decode step streams them (more than any TLB or cache could keep between passes)
STREAM_M = (1, 8, 32, 64)
STREAM_LAYERS = 32

METHOD = (
    "graph: per-launch time = median over {replays} replays of a CUDA graph of n launches cycling over "
    "`sets` input sets that together exceed {cold:g}x L2 (at most {max_sets} sets; tiny ops stay L2-resident), "
    "divided by n; eager: median of CUDA-event-timed single launches (host gaps included). Random bf16 "
    "inputs (never zeros). SDPA: fastest of the cuDNN, flash, efficient and default-dispatch backends "
    "(GQA through enable_gqa, else K/V expanded to H heads outside the timed region), recorded per row"
)


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


@dataclass
class GridResult:
    rows: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    elapsed_s: float = 0.0


# ------------------------------------------------------------------------------------------------
# The grid
# ------------------------------------------------------------------------------------------------


def projection_shapes(cfg) -> list[tuple[str, int, int]]:
    """(projection, N, K) of a dense model's linears: fused qkv, o, fused gate_up, down, lm_head."""
    d, H, Hkv, D, F = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size
    return [("qkv", (H + 2 * Hkv) * D, d), ("o", d, H * D), ("gate_up", 2 * F if cfg.gated_mlp else F, d), ("down", d, F), ("lm_head", cfg.vocab_size, d)]


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


def stream_grid(tiny: bool = False) -> dict[str, list[Case]]:
    """``gemm_stream`` at the decode batches ``STREAM_M`` (Llama-3-8B widths; ``tiny``: CPU sizes)."""
    if tiny:
        return {"gemm_stream": [gemm_stream_case(M, 2, 64, 96, 96) for M in (1, 8)]}
    return {"gemm_stream": [gemm_stream_case(M, STREAM_LAYERS, 4096, 14336, 6144) for M in STREAM_M]}


def mixed_grid() -> dict[str, list[Case]]:
    """The graph's per-kernel cost when consecutive kernels differ: one small category placed right
    after the launch floor (5 cases, two graphs of 128 launches each: ~4 ms of GPU time in all)."""
    return {"floor_mixed": [launch_floor_mixed_case(k) for k in MIXED_K] + [launch_floor_mixed_gemm_case(*mnk) for mnk in MIXED_GEMMS]}


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


def strided_grid(tokens=STRIDED_T, heads=STRIDED_HEADS, widths=STRIDED_F, batches=KV_WRITE_B, N: int = KV_WRITE_N) -> dict[str, list[Case]]:
    """The decode step's RoPE, SiLU*mul and KV write on their real layouts: three small categories
    placed right after the launch floor, so the round-robin reaches all of them early."""
    return {
        "rope_qkv_strided": [rope_qkv_strided_case(T, H, KVH, D) for H, KVH, D in heads for T in tokens],
        "silu_mul_strided": [silu_mul_strided_case(T, F_) for F_ in widths for T in tokens],
        "kv_write": [kv_write_case(B, H, KVH, N, D) for H, KVH, D in heads[:1] for B in batches],
    }


#: fp8 GEMM rows (``gemm_fp8``): tokens x Llama-3-8B's qkv, gate_up and down, and two squares;
#: M a multiple of 16 (``torch._scaled_mm``'s rule)
FP8_M = (16, 256, 4096)
FP8_SQUARE = (4096, 8192)


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


def build_grid(tiny: bool = False, presets: tuple[tuple[str, str], ...] = GEMM_PRESETS) -> dict[str, list[Case]]:
    """The grid by category, each sorted small to large. ``tiny``: a few small shapes (CPU tests)."""
    from rooflinecli.model_registry import get_model

    if tiny:
        return {
            "floor": [launch_floor_case()],
            **mixed_grid(),
            **stream_grid(tiny=True),
            **strided_grid((1, 4), ((4, 2, 64),), (96,), (1, 2), 16),
            "gemm": [gemm_case(M, 96, 64, "tiny.qkv") for M in (1, 8, 32)] + [gemm_case(64, 64, 64, "square")],
            "elementwise": [c for T in (1, 16) for c in elementwise_cases(T, 64, 96)] + [rope_case(4, 3, 64)],
            "copy": [copy_case(b) for b in (4096, 65536)],
            "decode": [attention_case("sdpa_decode", 2, 4, 2, 64, 64)],
            "prefill": [attention_case("sdpa_prefill_causal", 1, 4, 2, 32, 64)],
            "mla": [mla_decode_case(B, 4, 64, 64, 16) for B in (1, 2, 3)],
            "moe": [moe_grouped_case(T, 8, 2, 64, 96) for T in (1, 4, 16, 64)],
        }
    gemm = []
    for prefix, preset in presets:
        cfg = get_model(preset)
        for proj, N, K in projection_shapes(cfg):
            gemm += [gemm_case(M, N, K, f"{prefix}.{proj}") for M in M_GRID]
    gemm += [gemm_case(n, n, n, "square") for n in SQUARE]
    fp8 = [gemm_fp8_case(M, N, K, f"llama-3-8b.{proj}") for proj, N, K in projection_shapes(get_model("llama-3-8b"))
           if proj in ("qkv", "gate_up", "down") for M in FP8_M]
    fp8 += [gemm_fp8_case(n, n, n, "square") for n in FP8_SQUARE]
    elem = [c for T in ELEMENTWISE_T for D, F_ in ((4096, 14336), (8192, 28672)) for c in elementwise_cases(T, D, F_)]
    elem += [rope_case(T, 48, 128) for T in ELEMENTWISE_T]  # q + k heads of Llama-3-8B (32 + 8), rounded
    decode = [attention_case("sdpa_decode", B, H, KVH, S, D) for H, KVH, D in ATTN_HEADS for B in DECODE_B for S in DECODE_S
              if 4 * B * KVH * S * D <= MAX_SET_BYTES]
    prefill = []
    for H, KVH, D in ATTN_HEADS:
        for S in PREFILL_S:
            for B in sorted({1, max(1, PREFILL_TOKENS // S)}):
                prefill.append(attention_case("sdpa_prefill_causal", B, H, KVH, S, D))
    mla = [mla_decode_case(B, H, S) for H, batches in MLA_SHAPES for B in batches for S in MLA_S]
    moe = [moe_grouped_case(T, E, k, d, I) for E, k, d, I in MOE_SHAPES for T in MOE_T]
    grid = {"floor": [launch_floor_case()], **mixed_grid(), **stream_grid(), **strided_grid(), "gemm": gemm, "elementwise": elem,
            "copy": [copy_case(b) for b in COPY_BYTES], "decode": decode, "prefill": prefill, "gemm_fp8": fp8, "mla": mla, "moe": moe}
    return {k: sorted(v, key=lambda c: c.cost_s) for k, v in grid.items()}


def round_robin(grid: dict[str, list[Case]]) -> Iterator[Case]:
    """One case of each category in turn (small first), so a budget cut leaves every category some."""
    queues = [list(v) for v in grid.values()]
    while any(queues):
        for q in queues:
            if q:
                yield q.pop(0)


# ------------------------------------------------------------------------------------------------
# Timing one case
# ------------------------------------------------------------------------------------------------


def sets_for(set_bytes: float, l2_bytes: int) -> int:
    """Input sets of one shape: the one cold-cache rule (``timing.cold_sets``)."""
    return timing.cold_sets(set_bytes, l2_bytes, MAX_SETS)


def launches_for(estimate_s: float, sets: int) -> int:
    """Launches per graph: a replay of about ``REPLAY_TARGET_S``, at least one pass over the sets."""
    want = math.ceil(REPLAY_TARGET_S / max(estimate_s, 1e-7))
    return int(min(MAX_LAUNCHES, max(sets, want, 1)))


class Timer:
    """The grid's settings for the one timer (``bench.timing``): the device ("cuda"; "cpu": the
    wall clock, for dry runs only), the L2 size, and how many replays and eager samples a shape gets."""

    def __init__(self, device: str, l2_bytes: int, replays: int = REPLAYS, eager_samples: int = 10, tensor_device: str | None = None) -> None:
        self.device, self.l2_bytes, self.replays, self.eager_samples = device, l2_bytes, replays, eager_samples
        #: where inputs live: ``device`` (tests pass "cpu" to run the CUDA timing path on stand-ins)
        self.tensor_device = tensor_device or device

    def sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def eager(self, fns: list[Callable[[], Any]], samples: int) -> float:
        """Median seconds of single launches, cycling over ``fns``."""
        return timing.median_s(timing.eager_samples(fns, samples, self.device))

    def graph(self, fns: list[Callable[[], Any]], n: int) -> float:
        """Median per-launch seconds over ``replays`` replays of a graph of ``n`` launches."""
        return timing.median_s(timing.graph_samples(fns, n, self.replays, self.device))


def _fns(case: Case, sets: int, device: str, gen, **kw) -> list[Callable[[], Any]]:
    fns = [case.make(device, gen, **kw) for _ in range(sets)]
    for f in fns:
        f()
    return fns


def _rank_backends(case: Case, timer: Timer, gen) -> tuple[list[tuple[str, bool]], str]:
    """SDPA paths that ran ``case``, fastest first (eager-timed on one set), and a note of the times."""
    tried: dict[tuple[str, bool], float] = {}
    errors: list[str] = []
    for b in case.backends:
        for expand in (False, True):
            if expand and (case.shape["KVH"] == case.shape["H"] or case.set_bytes * case.shape["H"] / case.shape["KVH"] > MAX_SET_BYTES):
                continue  # nothing to expand, or the expanded K/V would not be a sane allocation
            label = f"{b}{'+expanded_kv' if expand else ''}"
            try:
                fns = _fns(case, 1, timer.tensor_device, gen, backend=b, expand=expand)
                timer.sync()
                tried[(b, expand)] = timer.eager(fns, 3)
                del fns
                break  # GQA worked natively on this backend: no need to expand
            except Exception as e:  # noqa: BLE001 - a backend that cannot run this shape is skipped
                errors.append(f"{label}: {type(e).__name__}")
                _recover(timer)
    if not tried:
        raise RuntimeError("no SDPA backend ran this shape (" + "; ".join(errors)[:300] + ")")
    ranked = sorted(tried, key=tried.get)
    note = "eager ms per backend: " + ", ".join(f"{b}{'+expanded_kv' if x else ''} {tried[(b, x)] * 1e3:.3g}" for b, x in ranked)
    if errors:
        note += "; not runnable: " + ", ".join(errors)
    return ranked, note


def _recover(timer: Timer) -> None:
    try:
        timer.sync()
    except Exception:  # noqa: BLE001 - a sticky error surfaces at the next case, which records it
        pass


def _time_sets(case: Case, timer: Timer, gen, **kw) -> tuple[float, float, int, int]:
    """(t_graph, t_eager, n, sets) of ``case`` on cold input sets."""
    sets = sets_for(case.set_bytes, timer.l2_bytes)
    fns = _fns(case, sets, timer.tensor_device, gen, **kw)
    timer.sync()
    t_eager = timer.eager(fns, timer.eager_samples if case.cost_s < 1e-3 else 5)
    n = launches_for(t_eager, sets)  # the eager time bounds the launch from above
    if timer.device != "cuda":
        n = min(n, 4)
    return timer.graph(fns, n), t_eager, n, sets


def measure_mixed(case: Case, timer: Timer, gen) -> dict[str, Any]:
    """A mixed-kernel row: per-kernel seconds of the case's k distinct kernels in one graph of
    ``MIXED_LAUNCHES`` (rounded down to a multiple of k) launches, interleaved (``t_graph``: each
    kernel follows a different one) and grouped (``t_blocked``: each kernel repeated, as in every
    other row); ``t_eager``: single launches cycling over them."""
    fns = case.make_kernels(timer.tensor_device, gen)
    for f in fns:
        f()
    timer.sync()
    k = len(fns)
    reps = MIXED_LAUNCHES // k if timer.device == "cuda" else 2
    n = k * reps
    t_eager = timer.eager(fns, timer.eager_samples)
    t_mixed = timer.graph(fns, n)
    t_blocked = timer.graph([f for f in fns for _ in range(reps)], n)  # i % n: A..A B..B ...
    row: dict[str, Any] = {"op": case.op, "shape": dict(case.shape), "flops": case.flops, "bytes": case.bytes,
                           "t_graph": t_mixed, "t_blocked": t_blocked, "t_eager": t_eager, "n": n, "sets": k}
    if case.note:
        row["note"] = case.note
    return row


def measure_case(case: Case, timer: Timer, gen) -> dict[str, Any]:
    """One calibration row (raises on failure; ``run_grid`` records it). SDPA: the fastest backend
    whose graph capture works (a backend that fails capture gives way to the next)."""
    if case.make_kernels is not None:
        return measure_mixed(case, timer, gen)
    notes = [case.note] if case.note else []
    if case.backends:
        ranked, how = _rank_backends(case, timer, gen)
        notes.append(how)
        last: Exception | None = None
        for backend, expand in ranked:
            try:
                t_graph, t_eager, n, sets = _time_sets(case, timer, gen, backend=backend, expand=expand)
                break
            except Exception as e:  # noqa: BLE001 - e.g. a capture this backend does not support
                last = e
                notes.append(f"{backend}: graph timing failed ({type(e).__name__})")
                _recover(timer)
        else:
            raise RuntimeError(f"graph timing failed on every backend: {type(last).__name__}: {last}")
        case.backend = backend + (" (K/V expanded to H heads, not timed)" if expand else "")
    else:
        t_graph, t_eager, n, sets = _time_sets(case, timer, gen)
    row: dict[str, Any] = {"op": case.op}
    if case.name:
        row["name"] = case.name
    row.update(shape=dict(case.shape), flops=case.flops, bytes=case.bytes, t_graph=t_graph, t_eager=t_eager, n=n, sets=sets)
    if notes:
        row["note"] = "; ".join(notes)
    if case.backend:
        row["backend"] = case.backend
    return row


def run_grid(
    grid: dict[str, list[Case]],
    device: str,
    l2_bytes: int,
    budget_s: float,
    on_case: Callable[[int, int, Case], None] | None = None,
    seed: int = 1234,
    on_checkpoint: Callable[[GridResult], None] | None = None,
    checkpoint_every_s: float = 5.0,
    tensor_device: str | None = None,
) -> GridResult:
    """Every case of ``grid`` in round-robin order until ``budget_s`` (wall seconds) is spent;
    ``on_checkpoint(result so far)`` at most every ``checkpoint_every_s``."""
    import torch

    out = GridResult()
    timer = Timer(device, l2_bytes, tensor_device=tensor_device)
    gen = torch.Generator().manual_seed(seed)
    cases = list(round_robin(grid))
    t0 = last = time.monotonic()
    for i, case in enumerate(cases):
        if time.monotonic() - t0 >= budget_s:
            out.skipped = len(cases) - i
            break
        if on_case is not None:
            on_case(i, len(cases), case)
        try:
            out.rows.append(measure_case(case, timer, gen))
        except Exception as e:  # noqa: BLE001 - one failing shape never stops the grid
            _recover(timer)
            out.failed.append({"op": case.op, "shape": dict(case.shape), "error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"})
        finally:
            if device == "cuda":
                torch.cuda.empty_cache()
        if on_checkpoint is not None and time.monotonic() - last >= checkpoint_every_s:
            out.elapsed_s = time.monotonic() - t0
            on_checkpoint(out)
            last = time.monotonic()
    out.elapsed_s = time.monotonic() - t0
    return out


def calibration_doc(result: GridResult, environment: dict[str, Any], l2_bytes: int, sustained: dict[str, float], extra_rows: list[dict[str, Any]] = (), budget_s: float | None = None) -> dict[str, Any]:
    """The calibration file's JSON document."""
    from rooflinecli.bench.environment import utc_now

    method = METHOD.format(replays=REPLAYS, cold=timing.COLD_L2_MULTIPLE, max_sets=MAX_SETS)
    if environment.get("device") == "cpu":
        method = "CPU wall clock (dry run, not a GPU measurement); " + method
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "created_utc": utc_now(),
        "gpu": environment.get("gpu_name"),
        "environment": dict(environment),
        "method": method,
        "l2_bytes": int(l2_bytes),
        "rows": list(result.rows) + list(extra_rows),
        "sustained": dict(sustained),
    }
    doc["failed"] = list(result.failed)
    doc["grid"] = {"elapsed_s": result.elapsed_s, "budget_s": budget_s, "skipped_for_budget": result.skipped}
    return doc
