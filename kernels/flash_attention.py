"""FlashAttention forward (Dao et al., 2022) in Triton: causal or not, GQA, head dim 64 and 128.

Layout [B, H, S, D] for Q and O, [B, H_kv, S, D] for K and V (H_kv divides H; query head h reads
key/value head h // (H / H_kv)). One program computes a BLOCK_M x D tile of O for one (batch, head),
streaming K and V through on-chip memory in BLOCK_N tiles with an online softmax in fp32 (the
structure of Triton's fused-attention tutorial), so the S x S scores never reach HBM.

Hopper path: Q, K, V and O move through TMA tensor descriptors (4-d, over the tensors' own strides,
so [B, S, H, D] views work too; rows past S read as zero and are never written); both matmuls are
wgmma; softmax in base 2 with the scale folded into one FMA per score; the causal mask only on the
diagonal tiles and the ragged last tile; heaviest causal query blocks first. Warp specialization
(``tl.range(..., warp_specialize=True)``) is plumbed through as a config flag but no config sets it:
Triton 3.6 and 3.9 emit the same PTX for this loop on sm_90 with it as without it (or fail to
compile the 4-warp configs), so it buys nothing here yet. Nor does reordering the loop by hand:
compiled for sm_90, FlashAttention-3's intra-warpgroup order (QK of the next tile and PV of this
one issued before this tile's softmax) and a QK-ahead order both have Triton 3.6 and 3.9 wait
for every wgmma straight after issuing it (``pendings = 0``, before any exponential), so the softmax never overlaps a matrix multiply; that overlap is what FA3 and cuDNN
have over this kernel (H200: 0.82-0.93x the fastest SDPA backend).

Minimum HBM traffic: read Q, K, V once and write O once (``formulas.attention_qo_bytes`` +
``formulas.kv_cache_bytes`` with L = 1). FLOPs: ``formulas.attention_prefill_flops`` (QK^T and PV;
a causal mask keeps S(S+1)/2 pairs).
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels.launch import Bound, descriptor_tile_hook, remember
from kernels.registry import Case, KernelOp, output_like
from kernels.sdpa_baselines import sdpa_factories
from kernels.testing import device_randn, torch_dtype
from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element

LOG2E = 1.4426950408889634  # softmax runs in base 2: exp(x) = exp2(x * log2(e))
HEAD_DIMS = (64, 128)
DTYPES = ("bf16", "fp16")


def interpreting() -> bool:
    """True when Triton runs kernels on the CPU through its interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def check_device(*tensors: torch.Tensor) -> None:
    """All tensors on one device, and that device usable by Triton (CUDA, or CPU when interpreting)."""
    dev = tensors[0].device
    for t in tensors[1:]:
        if t.device != dev:
            raise ValueError(f"all inputs must be on one device, got {dev} and {t.device}")
    if dev.type != "cuda" and not interpreting():
        raise ValueError(f"inputs on {dev}: Triton kernels need a CUDA device (or TRITON_INTERPRET=1 on the CPU)")


def upcast_dots(dtype: torch.dtype) -> bool:
    """Whether the kernels must cast bf16 dot operands to fp32 first: Triton's interpreter (3.9)
    multiplies bf16 operands as their raw uint16 bits. bf16 x bf16 products are exact in fp32, so
    the cast changes nothing but summation order; compiled GPU code never takes this path."""
    return interpreting() and dtype == torch.bfloat16


@triton.jit
def dot(a, b, UPCAST: tl.constexpr):
    """a @ b in fp32 (fp32 operands when UPCAST, see ``upcast_dots``)."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    return tl.dot(a, b)


@triton.jit
def dot_acc(a, b, acc, UPCAST: tl.constexpr):
    """acc + a @ b, accumulated in the MMA (fp32 operands when UPCAST, see ``upcast_dots``)."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    return tl.dot(a, b, acc)


def make_descriptor(t: torch.Tensor, block: list[int]):
    """A TMA tensor descriptor over all of ``t`` (any rank <= 5, strides as they are) with tile
    ``block``; out-of-range rows read as zero and are never written. The TMA engine needs a 16-byte
    aligned base and 16-byte multiples for every stride but the last (which must be 1)."""
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block)


def launch_key(*items) -> tuple:
    """A key for the per-shape launch plans: each tensor by (shape, strides, dtype, device), None
    and plain values as they are."""
    T = torch.Tensor  # ``type(t) is T`` first: isinstance through torch's metaclass costs ~1 us
    return tuple((t.shape, t.stride(), t.dtype, t.device) if type(t) is T or isinstance(t, T) else t for t in items)


def tma_ready(*tensors: torch.Tensor) -> str | None:
    """None if the TMA engine can address every tensor, else why not (for one clear ValueError)."""
    for t in tensors:
        if t.stride(-1) != 1:
            return "contiguous in the last (head) dimension"
        if t.data_ptr() % 16 or any((s * t.element_size()) % 16 for s in t.stride()[:-1]):
            return "16-byte aligned with strides of whole 16-byte multiples (the TMA engine's rule)"
    return None


@triton.jit
def _flash_attention_tiles(
    acc, l_i, m_i, q, desc_k, desc_v, b, h_kv,
    lo, hi, offs_m, S, qk_scale,
    D: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
):
    # One stretch [lo, hi) of keys, K and V tiles fetched by the TMA engine (rows past S read as 0).
    # MASKED: the stretch may cross S (or the causal diagonal); only those tiles pay for the mask.
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = desc_k.load([b, h_kv, start_n, 0]).reshape(BLOCK_N, D)
        qk = dot(q, tl.trans(k), UPCAST)
        if MASKED:
            offs_n = start_n + offs_n0
            keep = offs_n[None, :] < S
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            p = tl.math.exp2(qk - m_new[:, None])
        else:
            # scale folded into one FMA per score: exp2(qk * scale - m)
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([b, h_kv, start_n, 0]).reshape(BLOCK_N, D)
        acc = dot_acc(p.to(v.dtype), v, acc, UPCAST)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _flash_attention_kernel(
    desc_q, desc_k, desc_v, desc_o,  # TMA descriptors over q, o [B, H, S, D] and k, v [B, H_kv, S, D]
    H, S, GROUP, qk_scale,  # GROUP = H / H_kv query heads per key/value head
    D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,  # interpreter-only bf16 workaround (``upcast_dots``)
    WARP_SPECIALIZE: tl.constexpr,  # producer (TMA) / consumer (wgmma + softmax) warps, per config
):
    # Causal work grows with the query block: run the heaviest blocks first (better tail balance).
    n_m = tl.num_programs(0)
    pid_m = (n_m - 1 - tl.program_id(0)) if CAUSAL else tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    h_kv = h // GROUP
    start_m = pid_m * BLOCK_M

    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = desc_q.load([b, h, start_m, 0]).reshape(BLOCK_M, D)  # stays on chip for the whole loop
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)

    if CAUSAL:
        # keys strictly before this query block: no mask; then the diagonal block, masked
        acc, l_i, m_i = _flash_attention_tiles(
            acc, l_i, m_i, q, desc_k, desc_v, b, h_kv, 0, start_m, offs_m, S, qk_scale,
            D, BLOCK_N, False, True, UPCAST, WARP_SPECIALIZE,
        )
        acc, l_i, m_i = _flash_attention_tiles(
            acc, l_i, m_i, q, desc_k, desc_v, b, h_kv, start_m, tl.minimum(start_m + BLOCK_M, S), offs_m, S,
            qk_scale, D, BLOCK_N, True, True, UPCAST, False,
        )
    else:
        # whole key tiles without a mask, then the ragged last tile (if S % BLOCK_N) with one
        S_even = (S // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _flash_attention_tiles(
            acc, l_i, m_i, q, desc_k, desc_v, b, h_kv, 0, S_even, offs_m, S, qk_scale,
            D, BLOCK_N, False, False, UPCAST, WARP_SPECIALIZE,
        )
        acc, l_i, m_i = _flash_attention_tiles(
            acc, l_i, m_i, q, desc_k, desc_v, b, h_kv, S_even, S, offs_m, S, qk_scale,
            D, BLOCK_N, True, False, UPCAST, False,
        )

    o = acc / l_i[:, None]
    desc_o.store([b, h, start_m, 0], o.to(desc_o.dtype).reshape(1, 1, BLOCK_M, D))  # rows past S dropped


@descriptor_tile_hook
def _set_blocks(nargs):
    """Autotune pre-hook: the descriptors' tiles follow the config being run."""
    q_block = [1, 1, nargs["BLOCK_M"], nargs["D"]]
    kv_block = [1, 1, nargs["BLOCK_N"], nargs["D"]]
    nargs["desc_q"].block_shape = q_block
    nargs["desc_o"].block_shape = q_block
    nargs["desc_k"].block_shape = kv_block
    nargs["desc_v"].block_shape = kv_block


def _config(bm, bn, warps, stages, ws=False):
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "WARP_SPECIALIZE": ws}, num_warps=warps, num_stages=stages, pre_hook=_set_blocks
    )


# GPU configs, not tuned on a GPU: the Hopper part of the space Triton's fused-attention
# tutorial searches with TMA descriptors, kept to those that compile for sm_90 with wgmma and
# without register spills under Triton 3.6, 3.8 and 3.9 (test_flash_attention's
# compile check; 128 x 64 tiles on 4 warps spilled 96 bytes under 3.6). BLOCK_M is a multiple of
# BLOCK_N (the causal diagonal stretch starts on a key-tile boundary). No config sets
# WARP_SPECIALIZE (see the module docstring).
_GPU_CONFIGS = [
    _config(128, 128, 8, 2),
    _config(128, 128, 8, 3),
    _config(128, 64, 8, 2),
    _config(128, 64, 8, 3),
    _config(128, 64, 8, 4),
    _config(64, 64, 4, 3),
    # two and three resident CTAs per SM (83 KB and 67 KB of shared memory, 138 and 116 registers
    # under both Triton 3.6 and 3.9): CTAs that drift out of phase let one's softmax run under
    # another's wgmma, the overlap one CTA's own loop cannot get (it waits for each wgmma at once)
    _config(64, 64, 4, 2),
    _config(64, 32, 4, 3),
]
_flash_attention_autotuned = triton.autotune(configs=_GPU_CONFIGS, key=["S", "GROUP", "D", "CAUSAL"])(
    _flash_attention_kernel
)
# Interpreter: one fixed config, no autotuning (the interpreter would run every config). 32 x 32
# tiles keep the numpy work per program small while odd S still crosses several tiles.
_INTERPRET_BLOCKS = {"BLOCK_M": 32, "BLOCK_N": 32, "WARP_SPECIALIZE": False}


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int, int, int]:
    """Check q [B, H, S, D] and k, v [B, H_kv, S, D] (H_kv divides H; all bf16 or all fp16; one
    device); return (B, H, H_kv, S, D). Shared by the attention launchers."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k, v must be [B, H, S, D], got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    B, H, S, D = q.shape
    if k.shape != v.shape:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have one shape")
    Bk, H_kv, Sk, Dk = k.shape
    if Bk != B or Sk != S or Dk != D:
        raise ValueError(f"k/v {tuple(k.shape)} do not match q {tuple(q.shape)} in B, S or D")
    if H_kv < 1 or H % H_kv:
        raise ValueError(f"H_kv = {H_kv} must divide H = {H}")
    if q.dtype not in (torch.bfloat16, torch.float16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must all be bf16 or all fp16, got {q.dtype}, {k.dtype}, {v.dtype}")
    check_device(q, k, v)
    return B, H, H_kv, S, D


#: per-shape launch plans: (descriptors, grid, constexprs), so a repeated call costs a dict lookup,
#: four base swaps and the launch (no re-checking, no new descriptors)
_PLANS: dict = {}


def _plan(q, k, v, out, causal, sm_scale):
    """Check the inputs once per shape and build the launch: TMA descriptors, grid, constexprs."""
    B, H, H_kv, S, D = check_qkv(q, k, v)
    if D not in HEAD_DIMS:
        raise ValueError(f"head dim D = {D} not supported; supported: {HEAD_DIMS}")
    if out.shape != q.shape or out.dtype != q.dtype or out.device != q.device:
        raise ValueError(f"out must be {tuple(q.shape)} {q.dtype} on {q.device}, contiguous in D")
    why = tma_ready(q, k, v, out)
    if why:
        raise ValueError(f"q, k, v and out must be {why}")
    interp = interpreting()
    bm = _INTERPRET_BLOCKS["BLOCK_M"] if interp else 128
    bn = _INTERPRET_BLOCKS["BLOCK_N"] if interp else 64
    descs = (
        make_descriptor(q, [1, 1, bm, D]),
        make_descriptor(k, [1, 1, bn, D]),
        make_descriptor(v, [1, 1, bn, D]),
        make_descriptor(out, [1, 1, bm, D]),
    )
    if sm_scale is not None and not sm_scale > 0:
        raise ValueError(f"sm_scale = {sm_scale} must be > 0 (the kernel takes the row max before scaling)")
    qk_scale = (1.0 / math.sqrt(D) if sm_scale is None else sm_scale) * LOG2E
    scalars = (H, S, H // H_kv, qk_scale)
    consts = {"D": D, "CAUSAL": bool(causal), "UPCAST": upcast_dots(q.dtype)}
    if interp:
        consts.update(_INTERPRET_BLOCKS)
        return descs, scalars, (triton.cdiv(S, bm), B * H), _flash_attention_kernel, consts

    def grid(meta):
        return (triton.cdiv(S, meta["BLOCK_M"]), B * H)

    return descs, scalars, grid, _flash_attention_autotuned, consts


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    sm_scale: float | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention forward. q [B, H, S, D]; k, v [B, H_kv, S, D] with H_kv dividing H; bf16 or fp16;
    D in (64, 128); last dim contiguous, other strides 16-byte multiples (TMA). ``causal``: query i
    sees keys 0..i. ``sm_scale`` defaults to 1/sqrt(D). Returns o [B, H, S, D] in q's dtype
    (written into ``out`` when given)."""
    if out is None:
        out = torch.empty_like(q)
    key = launch_key(q, k, v, out, bool(causal), sm_scale)
    plan = _PLANS.get(key)
    if plan is None:
        if q.dim() == 4 and (q.shape[2] == 0 or q.shape[0] * q.shape[1] == 0):
            check_qkv(q, k, v)
            return out
        descs, scalars, grid, kernel, consts = _plan(q, k, v, out, causal, sm_scale)
        # every argument fixed: the four descriptors' bases are swapped per call
        plan = remember(_PLANS, key, (descs, scalars, grid, kernel, consts, Bound(kernel, grid, [*descs, *scalars], consts, ())))
    elif (q.data_ptr() | k.data_ptr() | v.data_ptr() | out.data_ptr()) % 16:
        raise ValueError("q, k, v and out must be 16-byte aligned (the TMA engine's rule)")
    for d, t in zip(plan[0], (q, k, v, out)):
        d.base = t
    plan[5]()
    return out


# ------------------------------------------------------------------------------------------------
# Reference, baseline, cost, cases
# ------------------------------------------------------------------------------------------------

#: fp32 score elements the reference materializes at once (bounds its memory on the full cases)
_REF_CHUNK_ELEMENTS = 1 << 27


class full_fp32:
    """Context: fp32 matmuls in full fp32, never TF32 (a caller may have allowed TF32 globally;
    TF32's ~1e-3 error would swamp the fp16 tolerance). Used by the attention references."""

    def __enter__(self):
        self.prev = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")

    def __exit__(self, *exc):
        torch.set_float32_matmul_precision(self.prev)


def attention_reference(q, k, v, causal=False, sm_scale=None, **_):
    """softmax(Q K^T * scale) V in fp32, K/V heads repeated for GQA; query rows in chunks so the
    fp32 scores stay under ~512 MB even at S = 16k. Returns fp32 [B, H, S, D]."""
    B, H, S, D = q.shape
    group = H // k.shape[1]
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    rows = max(1, _REF_CHUNK_ELEMENTS // max(1, H * S))
    with full_fp32():
        _attention_reference_into(out, q, k, v, causal, scale, group, rows)
    return out


def _attention_reference_into(out, q, k, v, causal, scale, group, rows):
    B, H, S, D = q.shape
    for b in range(B):
        kf = k[b].float().repeat_interleave(group, dim=0)  # [H, S, D]
        vf = v[b].float().repeat_interleave(group, dim=0)
        for i0 in range(0, S, rows):
            i1 = min(S, i0 + rows)
            s = torch.matmul(q[b, :, i0:i1].float(), kf.transpose(-1, -2)) * scale  # [H, rows, S]
            if causal:
                i = torch.arange(i0, i1, device=q.device)[:, None]
                j = torch.arange(S, device=q.device)[None, :]
                s.masked_fill_(j > i, float("-inf"))
            out[b, :, i0:i1] = torch.matmul(torch.softmax(s, dim=-1), vf)


def sdpa_baseline(q, k, v, causal=False, sm_scale=None, **_):
    """torch SDPA, default dispatch, GQA through enable_gqa (the plain call a user would write)."""
    import torch.nn.functional as F

    gqa = q.shape[1] != k.shape[1]
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale, enable_gqa=gqa)


def sdpa_inputs(q, k, v, causal=False, sm_scale=None, **_):
    """SDPA's arguments for q, k, v [B, H(_kv), S, D] (also naive_attention's)."""
    return q, k, v, {"is_causal": causal, "scale": sm_scale}


def make_inputs(case: Case, device, generator) -> dict:
    p = case.params
    dt = torch_dtype(case.dtype)
    B, H, H_kv, S, D = p["B"], p["H"], p["H_kv"], p["S"], p["D"]
    return {
        "q": device_randn((B, H, S, D), dt, device, generator),
        "k": device_randn((B, H_kv, S, D), dt, device, generator),
        "v": device_randn((B, H_kv, S, D), dt, device, generator),
        "causal": bool(p["causal"]),
    }


def cost(case: Case) -> tuple[float, float]:
    """FLOPs (QK^T + PV, causal pairs only when causal) and minimum bytes (Q, K, V read, O written)."""
    p = case.params
    b = bytes_per_element(case.dtype)
    flops = formulas.attention_prefill_flops(p["B"], p["H"], p["S"], p["D"], causal=bool(p["causal"]))
    bytes_ = formulas.attention_qo_bytes(p["B"], p["H"], p["S"], p["D"], b) + formulas.kv_cache_bytes(
        1, p["H_kv"], p["D"], p["S"], b, p["B"]
    )
    return float(flops), float(bytes_)


def _case(B, H, H_kv, S, D, causal, dtype) -> Case:
    mask = "causal" if causal else "full"
    return Case(f"B{B}-H{H}-Hkv{H_kv}-S{S}-D{D}-{mask}", {"B": B, "H": H, "H_kv": H_kv, "S": S, "D": D, "causal": causal}, dtype)


# "test": odd S crossing several 32-wide interpreter tiles, GQA and MHA, both head dims.
_TEST = tuple(
    _case(B, H, H_kv, S, D, causal, dt)
    for (B, H, H_kv, S, D, causal) in [
        (1, 2, 2, 63, 64, False),
        (2, 4, 2, 123, 64, True),
        (1, 4, 1, 100, 128, True),
        (1, 2, 1, 77, 128, False),
        (1, 1, 1, 500, 64, True),
    ]
    for dt in DTYPES
)
# "quick": a few GPU shapes; "full": seq 1k..16k at about 256M-2G tokens x heads of work, B*H >= 64
# so every query-block x head grid has thousands of programs for 132 SMs.
_QUICK = (
    _case(4, 32, 8, 2048, 128, True, "bf16"),
    _case(4, 32, 8, 2048, 128, False, "bf16"),
)
_FULL = (
    _case(16, 32, 8, 1024, 128, True, "bf16"),
    _case(4, 32, 8, 4096, 128, True, "bf16"),
    _case(4, 32, 8, 4096, 128, False, "bf16"),
    _case(2, 32, 8, 8192, 128, True, "bf16"),
    _case(1, 32, 8, 16384, 128, True, "bf16"),
    _case(4, 64, 64, 4096, 64, True, "bf16"),
    _case(4, 32, 8, 4096, 128, True, "fp16"),
)

OP = KernelOp(
    name="flash_attention",
    make_inputs=make_inputs,
    run=flash_attention,
    output=output_like("q"),
    reference=attention_reference,
    cost=cost,
    cases={"test": _TEST, "quick": _QUICK, "full": _FULL},
    # the kernel rounds P to the input dtype before PV and O at the end: a few ulps of each dtype
    tolerance={"bf16": 1e-2, "fp16": 1e-3},
    baseline=sdpa_baseline,
    baselines=sdpa_factories(sdpa_inputs),
    model_kind="attention",
    dtypes=DTYPES,
    notes="TMA descriptors, causal mask on diagonal tiles only; baseline the fastest SDPA backend "
    "(cuDNN, flash, efficient, default dispatch; GQA by enable_gqa or K/V expanded untimed).",
)
