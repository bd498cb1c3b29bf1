"""Can Triton overlap flash attention's softmax with its matrix multiplies on sm_90? A compile-only
probe (no GPU): three versions of the inner loop are compiled for sm_90 and their TritonGPU IR is
read for where each async warpgroup MMA (``ttng.warp_group_dot``, SASS HGMMA) is waited for
(``ttng.warp_group_dot_wait {pendings = N}``).

* ``plain``: this project's loop (QK(j), softmax(j), PV(j));
* ``qk_ahead``: QK(j+1) issued before softmax(j);
* ``fa3_order``: FlashAttention-3's intra-warpgroup order, QK(j+1) and PV(j) issued before
  softmax(j+1), so that the exponentials run while PV(j) is in flight.

The overlap needs a wait with ``pendings >= 1`` (or a wait after the exponentials). Triton 3.6.0 and
3.9.0 (2026-11-30): every wait in every variant is ``pendings = 0`` placed straight after its dot,
before any ``math.exp2``, i.e. no overlap; the extra registers of the reordered loops buy nothing.
This is why ``kernels/flash_attention.py`` keeps the plain loop (docs/kernels_b.md). The last
line reads this project's MLA decode kernel the same way: its three chained QK dots (two 256-wide
latent halves and the RoPE part, one accumulator) are each waited for before the next is issued.

    python scripts/flash_overlap_probe.py        # prints one line per variant and config
"""
from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import re  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from kernels.flash_attention import _flash_attention_tiles, dot, dot_acc  # noqa: E402

PLAIN, QK_AHEAD, FA3_ORDER = 0, 1, 2
VARIANTS = {"plain": PLAIN, "qk_ahead": QK_AHEAD, "fa3_order": FA3_ORDER}


@triton.jit
def _softmax_step(qk, m_i, l_i, acc, qk_scale):
    """One tile's online softmax: p, the new max and sum, and acc rescaled."""
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    return p, m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None]


@triton.jit
def _tiles_qk_ahead(acc, l_i, m_i, q, desc_k, desc_v, b, h_kv, lo, hi, qk_scale,
                    D: tl.constexpr, BLOCK_N: tl.constexpr):
    # QK of tile j+1 issued before the softmax of tile j (hi - lo >= BLOCK_N)
    qk = dot(q, tl.trans(desc_k.load([b, h_kv, lo, 0]).reshape(BLOCK_N, D)), False)
    for start_n in tl.range(lo, hi - BLOCK_N, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        qk_next = dot(q, tl.trans(desc_k.load([b, h_kv, start_n + BLOCK_N, 0]).reshape(BLOCK_N, D)), False)
        p, m_i, l_i, acc = _softmax_step(qk, m_i, l_i, acc, qk_scale)
        v = desc_v.load([b, h_kv, start_n, 0]).reshape(BLOCK_N, D)
        acc = dot_acc(p.to(v.dtype), v, acc, False)
        qk = qk_next
    p, m_i, l_i, acc = _softmax_step(qk, m_i, l_i, acc, qk_scale)
    v = desc_v.load([b, h_kv, hi - BLOCK_N, 0]).reshape(BLOCK_N, D)
    return dot_acc(p.to(v.dtype), v, acc, False), l_i, m_i


@triton.jit
def _tiles_fa3_order(acc, l_i, m_i, q, desc_k, desc_v, b, h_kv, lo, hi, qk_scale,
                     D: tl.constexpr, BLOCK_N: tl.constexpr):
    # FlashAttention-3's order: QK(j+1) and PV(j) issued, then softmax(j+1) while PV(j) runs
    qk = dot(q, tl.trans(desc_k.load([b, h_kv, lo, 0]).reshape(BLOCK_N, D)), False)
    p, m_i, l_i, acc = _softmax_step(qk, m_i, l_i, acc, qk_scale)
    for start_n in tl.range(lo, hi - BLOCK_N, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        qk_next = dot(q, tl.trans(desc_k.load([b, h_kv, start_n + BLOCK_N, 0]).reshape(BLOCK_N, D)), False)
        v = desc_v.load([b, h_kv, start_n, 0]).reshape(BLOCK_N, D)
        acc = dot_acc(p.to(v.dtype), v, acc, False)
        p, m_i, l_i, acc = _softmax_step(qk_next, m_i, l_i, acc, qk_scale)
    v = desc_v.load([b, h_kv, hi - BLOCK_N, 0]).reshape(BLOCK_N, D)
    return dot_acc(p.to(v.dtype), v, acc, False), l_i, m_i


@triton.jit
def probe_kernel(desc_q, desc_k, desc_v, desc_o, H, S, GROUP, qk_scale,
                 D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, VARIANT: tl.constexpr):
    """Non-causal attention over whole tiles, the inner loop in one of three orders (VARIANT);
    PLAIN is kernels/flash_attention.py's own loop (``_flash_attention_tiles``)."""
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    start_m = tl.program_id(0) * BLOCK_M
    q = desc_q.load([b, h, start_m, 0]).reshape(BLOCK_M, D)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    if VARIANT == 0:
        acc, l_i, m_i = _flash_attention_tiles(acc, l_i, m_i, q, desc_k, desc_v, b, h // GROUP, 0, S,
                                               start_m + tl.arange(0, BLOCK_M), S, qk_scale,
                                               D, BLOCK_N, False, False, False, False)
    elif VARIANT == 1:
        acc, l_i, m_i = _tiles_qk_ahead(acc, l_i, m_i, q, desc_k, desc_v, b, h // GROUP, 0, S, qk_scale, D, BLOCK_N)
    else:
        acc, l_i, m_i = _tiles_fa3_order(acc, l_i, m_i, q, desc_k, desc_v, b, h // GROUP, 0, S, qk_scale, D, BLOCK_N)
    desc_o.store([b, h, start_m, 0], (acc / l_i[:, None]).to(desc_o.dtype).reshape(1, 1, BLOCK_M, D))


def probe(variant: str, block_m: int, block_n: int, warps: int, stages: int) -> dict:
    """Compile ``probe_kernel`` in one loop order for sm_90 and read the IR's main loop: its async
    dots, their waits' pendings, and whether an exponential lies between an async dot and its
    wait (the softmax overlapping a matrix multiply)."""
    from kernels.testing import compile_for_gpu

    B, H, S, D = 4, 32, 4096, 128
    x = torch.empty(B, H, S, D, dtype=torch.bfloat16)
    dq = TensorDescriptor(x, [B, H, S, D], list(x.stride()), [1, 1, block_m, D])
    dk = TensorDescriptor(x, [B, H, S, D], list(x.stride()), [1, 1, block_n, D])
    args = dict(desc_q=dq, desc_k=dk, desc_v=dk, desc_o=dq, H=H, S=S, GROUP=4, qk_scale=0.1, D=D,
                BLOCK_M=block_m, BLOCK_N=block_n, VARIANT=VARIANTS[variant])
    ir = compile_for_gpu(probe_kernel, args, warps, stages).asm["ttgir"]
    start = ir.index("scf.for")
    lines = ir[start:ir.index("scf.yield", start)].splitlines()
    overlap = False
    for i, line in enumerate(lines):
        if "warp_group_dot " in line and "isAsync = true" in line:
            for later in lines[i + 1:]:
                if "warp_group_dot_wait" in later:
                    break
                overlap = overlap or "math.exp2" in later
    return {**loop_waits(ir), "exp2_in_flight": overlap}


def loop_waits(ir: str) -> dict:
    """The main loop's async dots and wait pendings, in order, from TritonGPU IR."""
    start = ir.index("scf.for")
    body = ir[start:ir.index("scf.yield", start)]
    return {"async_dots": body.count("isAsync = true"),
            "wait_pendings": [int(p) for p in re.findall(r"warp_group_dot_wait .*pendings = (\d+)", body)]}


def probe_mla() -> dict:
    """The same reading for this project's MLA decode kernel (first tile config, contiguous cache):
    its three chained QK dots (latent halves and RoPE part) and two PV dots per tile."""
    from kernels import mla_decode as ml
    from kernels.flash_attention import make_descriptor
    from kernels.testing import compile_for_gpu

    f32, i32 = (torch.empty(0, dtype=d) for d in (torch.float32, torch.int32))
    ql, qr = torch.empty((16, 128, 512), dtype=torch.bfloat16), torch.empty((16, 128, 64), dtype=torch.bfloat16)
    cache = torch.empty((16, 1024, 576), dtype=torch.bfloat16)
    cfg = ml._config(*ml.TILES[(False, False)][0])
    n = cfg.kwargs["BLOCK_N"]
    args = dict(desc_ql=make_descriptor(ql, [1, 64, 256]), desc_qr=make_descriptor(qr, [1, 64, 64]),
                desc_ckv=make_descriptor(cache, [1, n, 256]), desc_kpe=make_descriptor(cache, [1, n, 64]),
                Seq_lens=i32, Block_table=i32, M_part=f32, L_part=f32, Acc_part=f32, O=ql, Counter=i32,
                stride_ob=128 * 512, stride_oh=512, stride_bt=512, stride_pb=128 * 8, stride_ph=8,
                stride_ab=128 * 8 * 512, stride_ah=8 * 512, stride_as=512, H=128, N_ctx=32768, chunk=4096,
                qk_scale=0.1, B=16, SPLITS=8, R=512, P=64, VARLEN=False, PAGED=False, PAGE_SIZE=1, UPCAST=False,
                FUSED_REDUCE=ml.FUSED_REDUCE, **cfg.kwargs)
    return {"config": str(cfg), **loop_waits(compile_for_gpu(ml._mla_decode_kernel, args, cfg.num_warps, cfg.num_stages).asm["ttgir"])}


def main() -> int:
    print(f"Triton {triton.__version__}, sm_90, B4 H32 S4096 D128 bf16")
    for bm, bn, warps, stages in ((64, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 2)):
        for name in VARIANTS:
            r = probe(name, bm, bn, warps, stages)
            print(f"{bm}x{bn} {warps} warps {stages} stages {name:9s}: async dots in the loop {r['async_dots']}, "
                  f"wait pendings {r['wait_pendings']}, softmax overlaps an MMA: {'yes' if r['exp2_in_flight'] else 'no'}")
    r = probe_mla()
    print(f"mla_decode ({r['config']}): async dots in the loop {r['async_dots']}, wait pendings {r['wait_pendings']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
