"""GEMM against a weight: C[M, N] = A[M, K] @ W[N, K]^T, fp32 accumulation.

Layout: the weight is given as ``W[N, K]`` (``nn.Linear`` layout, K contiguous), the matrix a decode
step streams from HBM; ``gemm(a, w)`` equals ``torch.nn.functional.linear(a, w)``. Baselines
(``BASELINES``, the fastest kept): ``torch.matmul(a, w.T)`` and ``F.linear`` (cuBLAS). The same
layout is what fp8 tensor-core MMAs want (both operands K-major).

Dtypes: bf16 or fp16 in, same dtype out; fp8 e4m3 in (``a_scale``, ``w_scale``: per-tensor fp32
scales, C = (A @ W^T) * a_scale * w_scale) with bf16 out, on GPUs with compute capability >= 8.9;
the fp8 baselines are ``torch._scaled_mm`` with and without fast accumulation.

Two kernels, both loading A and W through TMA tensor descriptors (host-side
``triton.tools.tensor_descriptor.TensorDescriptor``; out-of-range rows and columns read as zero):

- ``_persistent_kernel`` (M > ``SKINNY_MAX_M``): one program per SM (grid = number of SMs), each
  walking output tiles strided by the grid in grouped order (``GROUP_M`` row tiles share a column
  band of W, for L2 reuse). The accumulator is stored in two halves (epilogue subtile,
  ``EPILOGUE_SUBTILE``) through a TMA store when the output rows are 16-byte aligned, else through
  masked pointer stores; the next tile's loads are issued while the epilogue drains.
- ``_skinny_kernel`` (M <= ``SKINNY_MAX_M``, decode-like): swap-AB, C^T = W @ A^T, so the weight's
  rows fill the wgmma M dimension and the few tokens its N dimension (8..256). Each program owns
  one band of W (``BLOCK_N``: 64 rows, or 128 in some 128-token configs) and either all of K (``SPLIT_K`` = 1: one launch, no workspace) or 1/SPLIT_K
  of it; split programs write fp32 partials to a cached workspace and bump a per-tile counter, and
  the last one to arrive sums the partials in split order (deterministic) and writes C, then resets
  the counter: still one launch (a "serial fix-up" split-K, no reduce kernel).

Launch cost: the checks, descriptors and grid for a shape are built once and cached (``_PLANS``);
the autotuner runs on the first call of a shape and later calls launch its best config directly.

Under ``TRITON_INTERPRET=1`` (CPU tests) autotuning is bypassed: the launcher runs one explicit
small config (``INTERPRET_*``, or the ``config=`` a test passes). Triton 3.9's interpreter multiplies
bf16 dot operands as their raw uint16 bit patterns; the ``UPCAST`` flag (set only when interpreting
bf16) casts tiles to fp32 before ``tl.dot``. Compiled runs never set it.
"""

from __future__ import annotations

import os
from functools import lru_cache

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels.baselines import blas_candidates
from kernels.launch import Bound, descriptor_tile_hook, remember
from kernels.registry import Case, KernelOp
from kernels.testing import device_randn, torch_dtype
from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element

#: M at or below which the skinny (swap-AB, split-K) kernel is used
SKINNY_MAX_M = 256
#: M at or below which the skinny kernel runs with SPLIT_K = 1 only (one launch, no workspace)
NO_WORKSPACE_MAX_M = 16
#: rows of W per skinny program (the wgmma M dimension of the swapped product): the default band,
#: and every band a config may take (``BLOCK_N``; the workspace and counters are sized for all)
SKINNY_BLOCK_N = 64
SKINNY_BANDS = (64, 128)
#: the K split the skinny configs may take above NO_WORKSPACE_MAX_M (sizes the workspace)
MAX_SPLIT_K = 2
#: largest fp8 e4m3 magnitude, for per-tensor scaling
FP8_E4M3_MAX = 448.0
#: K must be a multiple of this (TMA: 16-byte aligned rows for fp8 and 16-bit types alike)
K_MULTIPLE = 16
#: SMs assumed when no GPU is present (H100 SXM / H200: 132)
DEFAULT_NUM_SMS = 132


# ---------------------------------------------------------------------------------------------
# Configs (untuned: no GPU was available while writing them; the reasons are given per list)
# ---------------------------------------------------------------------------------------------


def _persistent_cfg(bm, bn, bk, warps, stages, subtile=True, flatten=True, group_m=8):
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, "EPILOGUE_SUBTILE": subtile,
         "FLATTEN": flatten},
        num_warps=warps, num_stages=stages, pre_hook=_set_block_shapes,
    )


@descriptor_tile_hook
def _set_block_shapes(nargs):
    """Autotune pre-hook: give the host descriptors the config's tile shapes."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["w_desc"].block_shape = [bn, bk]
    c = nargs["c_desc"]
    if isinstance(c, TensorDescriptor):
        c.block_shape = [bm, bn // 2 if nargs["EPILOGUE_SUBTILE"] else bn]


# untuned: the Hopper entries of Triton's persistent-matmul tutorial (128 x 128/256 tiles, BLOCK_K
# 64, 3-4 stages, 8 warps = two consumer warpgroups), trimmed to five so first-call autotuning stays
# a few seconds. FLATTEN (the tutorial's Hopper setting without warp specialization) merges the tile
# and K loops for the software pipeliner, so the next tile's loads are in flight during this tile's
# epilogue; one config keeps the loops nested for comparison. Shared memory of the largest: (128 + 256) * 64 * 2 B * 3 stages = 147 KB plus the
# epilogue half-tile (128 * 128 * 2 B = 32 KB) < 227 KB.
PERSISTENT_16BIT = [
    _persistent_cfg(128, 256, 64, 8, 3),
    _persistent_cfg(128, 128, 64, 8, 4),
    _persistent_cfg(128, 128, 64, 4, 4),
    _persistent_cfg(128, 256, 64, 8, 4),
    _persistent_cfg(128, 256, 64, 8, 3, flatten=False),
]
# untuned: fp8 takes BLOCK_K = 128 (128 bytes per row, one TMA swizzle span), as the tutorial's fp8
PERSISTENT_FP8 = [
    _persistent_cfg(128, 256, 128, 8, 3),
    _persistent_cfg(128, 128, 128, 8, 4),
    _persistent_cfg(128, 128, 128, 4, 4),
]


def _skinny_cfg(bk, split, warps, stages, band=SKINNY_BLOCK_N):
    return triton.Config({"BLOCK_K": bk, "SPLIT_K": split, "BLOCK_N": band}, num_warps=warps, num_stages=stages,
                         pre_hook=_set_skinny_block_shapes)


@descriptor_tile_hook
def _set_skinny_block_shapes(nargs):
    bk = nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [nargs["BLOCK_M"], bk]
    nargs["w_desc"].block_shape = [nargs["BLOCK_N"], bk]


# untuned: a decode GEMM streams W; each SM needs about 36 KB in flight (Little's law: 4.8 TB/s x
# ~1 us / 132 SMs), so the configs keep 3-6 stages of 16-32 KB W tiles (BLOCK_K 128-256; the TMA
# box is at most 256 elements per dimension). N = 8192 gives 128 programs of 64 W rows, one wave of
# 132 SMs; above 16 tokens a split config (K in 2) doubles that, for N too small to fill the GPU.
# (The first H200 run found split 4 faster for the old pointer kernel at M = 1, 37.3 us vs 43.1 us
# unsplit; M <= 16 stays unsplit here: one launch, no workspace.)
def skinny_configs(block_m: int) -> list:
    """The autotune configs of the skinny kernel for a token tile of ``block_m`` (16..256)."""
    splits = (1,) if block_m <= NO_WORKSPACE_MAX_M else (1, MAX_SPLIT_K)
    # (BLOCK_K, stages) within 227 KB: (64 + block_m) * BLOCK_K * 2 B * stages; (128, 4) at 16-32
    # tokens uses 82-99 KB, so two programs share an SM (a finer tail when N / 64 is not a whole
    # number of waves, e.g. N = 28672: 448 programs). Few configs per token tile: the first GPU run
    # autotunes every M of the decode sweep within the bench stage's time budget. 128 tokens: the
    # second H200 run picked (64, 4) split 2 (45.4 us, 0.84x cuBLAS) over (128, 3), while 256 tokens
    # won with (64, 5) unsplit; (64, 6) unsplit (147 KB, one program per SM, 128 programs) replaces
    # (128, 3), the deep single-pass pipeline of the 256-token tile.
    #
    # 128 tokens (0.84x cuBLAS on the second run, 378 TFLOP/s against 644 at 256 tokens): with 8
    # warps a 64-row W band splits into two m64n64 wgmmas, half the width the 256-token tile runs
    # at. Two configs attack that: a 128-row band (``BLOCK_N`` 128: two m64n128 wgmmas, 64 programs
    # at N = 8192, split 2 for one wave of 128, and half the re-reads of the token tile from L2)
    # and the 64-row band with 4 warps (one m64n128 wgmma per program, 128 programs unsplit); they
    # replace the unmeasured (64, 4) unsplit and (64, 6) split-2 configs of the 8-warp band.
    if block_m == 128:
        return [_skinny_cfg(64, 2, 8, 4), _skinny_cfg(64, 1, 8, 6), _skinny_cfg(64, 2, 8, 4, band=128), _skinny_cfg(64, 1, 4, 6)]
    bk_stages = {16: ((256, 4), (128, 6), (128, 4)), 32: ((256, 4), (128, 4)), 64: ((256, 3), (128, 6)),
                 256: ((64, 4), (64, 5))}[block_m]
    return [_skinny_cfg(bk, split, 8 if block_m >= 128 else 4, stages) for split in splits for bk, stages in bk_stages]


#: token tiles of the skinny kernel (the wgmma N dimension): the smallest of these that covers M
SKINNY_BLOCK_MS = (16, 32, 64, 128, 256)

#: the configs the CPU interpreter runs (small tiles: the interpreter's cost is per tile op)
INTERPRET_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4, "EPILOGUE_SUBTILE": True, "FLATTEN": True}
INTERPRET_SKINNY_CONFIG = {"BLOCK_K": 32, "SPLIT_K": 1, "BLOCK_N": SKINNY_BLOCK_N}


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped ordering: GROUP_M row tiles walk one column band of W together (W reused from L2)."""
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % num_pid_in_group) % group_size_m
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _store_tile(c_desc, c_ptr, acc, off_m, off_n, M, N, stride_cm, stride_cn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, C_TMA: tl.constexpr):
    """Store one [BLOCK_M, BLOCK_N] fp32 tile, cast to C's dtype: TMA store or masked pointers."""
    if C_TMA:
        c_desc.store([off_m, off_n], acc.to(c_ptr.dtype.element_ty))
    else:
        offs_m = off_m + tl.arange(0, BLOCK_M)
        offs_n = off_n + tl.arange(0, BLOCK_N)
        ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _persistent_kernel(
    a_desc, w_desc, c_desc, c_ptr, a_scale_ptr, w_scale_ptr,
    M, N, K, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr, FLATTEN: tl.constexpr, NUM_SMS: tl.constexpr, C_TMA: tl.constexpr,
    HAS_SCALES: tl.constexpr, UPCAST: tl.constexpr,
):
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    scale = 1.0
    if HAS_SCALES:
        scale = tl.load(a_scale_ptr) * tl.load(w_scale_ptr)
    # the epilogue recomputes its tile's coordinates from its own counter, so the compiler can
    # software-pipeline the next tile's loads under this tile's epilogue
    tile_id_c = start_pid - NUM_SMS
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=FLATTEN):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_am = pid_m * BLOCK_M
        off_wn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BLOCK_K
            a = a_desc.load([off_am, off_k])
            w = w_desc.load([off_wn, off_k])
            if UPCAST:
                a = a.to(tl.float32)
                w = w.to(tl.float32)
            acc = tl.dot(a, w.T, acc)
        tile_id_c += NUM_SMS
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        off_cm = pid_m * BLOCK_M
        off_cn = pid_n * BLOCK_N
        if HAS_SCALES:
            acc = acc * scale
        if EPILOGUE_SUBTILE:
            # two [BLOCK_M, BLOCK_N / 2] halves: half the epilogue registers and staging smem
            acc = tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2))
            acc = tl.permute(acc, (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            _store_tile(c_desc, c_ptr, acc0, off_cm, off_cn, M, N, stride_cm, stride_cn,
                        BLOCK_M, BLOCK_N // 2, C_TMA)
            _store_tile(c_desc, c_ptr, acc1, off_cm, off_cn + BLOCK_N // 2, M, N, stride_cm, stride_cn,
                        BLOCK_M, BLOCK_N // 2, C_TMA)
        else:
            _store_tile(c_desc, c_ptr, acc, off_cm, off_cn, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_TMA)


@triton.jit
def _skinny_kernel(
    a_desc, w_desc, c_ptr, ws_ptr, count_ptr, a_scale_ptr, w_scale_ptr,
    M, N, K, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
    HAS_SCALES: tl.constexpr, UPCAST: tl.constexpr,
):
    tile = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_n = tile % num_pid_n  # neighbouring programs stream neighbouring bands of W
    pid_m = tile // num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_tiles, SPLIT_K)
    kt_start = pid_k * per_split
    kt_end = min(kt_start + per_split, k_tiles)
    off_n = pid_n * BLOCK_N
    off_m = pid_m * BLOCK_M
    # swap-AB: acc = W_band @ A_rows^T, [BLOCK_N, BLOCK_M] (W rows on the MMA's M side)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for kt in range(kt_start, kt_end):
        w = w_desc.load([off_n, kt * BLOCK_K])
        a = a_desc.load([off_m, kt * BLOCK_K])
        if UPCAST:
            w = w.to(tl.float32)
            a = a.to(tl.float32)
        acc = tl.dot(w, a.T, acc)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    offs_m = off_m + tl.arange(0, BLOCK_M)
    c_ptrs = c_ptr + offs_m[None, :] * stride_cm + offs_n[:, None] * stride_cn
    c_mask = (offs_n[:, None] < N) & (offs_m[None, :] < M)
    if SPLIT_K == 1:
        if HAS_SCALES:
            acc = acc * (tl.load(a_scale_ptr) * tl.load(w_scale_ptr))
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)
    else:
        # serial fix-up: publish this split's partial, count arrivals; the last one reduces
        offs_t = tl.arange(0, BLOCK_N)[:, None] * BLOCK_M + tl.arange(0, BLOCK_M)[None, :]
        tile_ws = ws_ptr + tile.to(tl.int64) * (SPLIT_K * BLOCK_N * BLOCK_M)
        tl.store(tile_ws + pid_k * (BLOCK_N * BLOCK_M) + offs_t, acc)
        tl.debug_barrier()  # every thread's partial is written before the (release) count
        arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            total = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            for s in range(SPLIT_K):  # fixed order: the result does not depend on arrival order
                total += tl.load(tile_ws + s * (BLOCK_N * BLOCK_M) + offs_t, cache_modifier=".cg")
            if HAS_SCALES:
                total = total * (tl.load(a_scale_ptr) * tl.load(w_scale_ptr))
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=c_mask)
            tl.atomic_xchg(count_ptr + tile, 0)  # ready for the next launch (graph replays too)


_PERSISTENT_KEY = ["M", "N", "K", "NUM_SMS", "C_TMA", "HAS_SCALES"]
_persistent_16bit = triton.autotune(configs=PERSISTENT_16BIT, key=_PERSISTENT_KEY)(_persistent_kernel)
_persistent_fp8 = triton.autotune(configs=PERSISTENT_FP8, key=_PERSISTENT_KEY)(_persistent_kernel)
#: one autotuner per token tile (BLOCK_M sets the grid); SPLIT_K is a tuned value and sets the rest
_skinny = {
    bm: triton.autotune(configs=skinny_configs(bm), key=["M", "N", "K", "HAS_SCALES"])(_skinny_kernel)
    for bm in SKINNY_BLOCK_MS
}

_FP8 = torch.float8_e4m3fn
_IN_DTYPES = (torch.bfloat16, torch.float16, _FP8)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def skinny_block_m(M: int) -> int:
    """Token tile of the skinny kernel: the smallest of ``SKINNY_BLOCK_MS`` that covers M."""
    return next(bm for bm in SKINNY_BLOCK_MS if M <= bm)


@lru_cache(maxsize=16)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def num_sms_of(device: torch.device) -> int:
    """SMs of a CUDA device (cached: the property query costs microseconds); 132 off the GPU."""
    if device.type != "cuda":
        return DEFAULT_NUM_SMS
    return _num_sms(device.index if device.index is not None else torch.cuda.current_device())


# ---------------------------------------------------------------------------------------------
# Launcher
# ---------------------------------------------------------------------------------------------


def _row_stride(t: torch.Tensor) -> int:
    """The row stride the TMA descriptor takes: a single row's stride is never used (any value is
    allowed there, 0 from ``expand`` too), so it counts as contiguous."""
    return t.stride(0) if t.shape[0] > 1 else t.shape[1]


def _tma_problem(t: torch.Tensor) -> str | None:
    """None if the TMA engine can address ``t`` (2-D), else why not."""
    if t.stride(1) != 1 and t.shape[1] > 1:
        return f"contiguous along its last dimension (strides {tuple(t.stride())})"
    if t.data_ptr() % 16 or (_row_stride(t) * t.element_size()) % 16:
        return "16-byte aligned with a row stride of whole 16 bytes (the TMA engine's rule)"
    return None


def check_gemm_args(a, w, a_scale, w_scale, out):
    """Validate the inputs; one ``ValueError`` naming the limit. Returns (M, N, K, out dtype)."""
    if a.ndim != 2 or w.ndim != 2:
        raise ValueError(f"gemm: a must be [M, K] and w [N, K], got {tuple(a.shape)} and {tuple(w.shape)}")
    M, K = a.shape
    N, K_w = w.shape
    if K != K_w:
        raise ValueError(f"gemm: inner dimensions differ: a is [M={M}, K={K}], w is [N={N}, K={K_w}]")
    if a.dtype not in _IN_DTYPES or w.dtype != a.dtype:
        raise ValueError(f"gemm: a and w must share a dtype in bf16/fp16/fp8 e4m3, got {a.dtype} and {w.dtype}")
    if a.device != w.device:
        raise ValueError(f"gemm: a on {a.device} and w on {w.device}")
    if K % K_MULTIPLE:
        raise ValueError(f"gemm: K = {K} must be a multiple of {K_MULTIPLE} (16-byte aligned TMA rows)")
    fp8 = a.dtype == _FP8
    if fp8:
        for name, s in (("a_scale", a_scale), ("w_scale", w_scale)):
            if s is None or s.numel() != 1 or s.dtype != torch.float32 or s.device != a.device:
                raise ValueError(f"gemm: fp8 inputs need {name} as a one-element fp32 tensor on {a.device} (per-tensor scale)")
    elif a_scale is not None or w_scale is not None:
        raise ValueError("gemm: a_scale/w_scale are for fp8 inputs only")
    for name, t in (("a", a), ("w", w)):
        why = _tma_problem(t) if t.numel() else None
        if why:
            raise ValueError(f"gemm: {name} must be {why}")
    out_dtype = torch.bfloat16 if fp8 else a.dtype
    if out is not None and (tuple(out.shape) != (M, N) or out.dtype != out_dtype or out.device != a.device):
        raise ValueError(f"gemm: out must be [{M}, {N}] {out_dtype} on {a.device}, got {tuple(out.shape)} {out.dtype}")
    if max(M * K, N * K, M * N) >= 2**31:
        raise ValueError("gemm: operands above 2^31 elements are not supported (32-bit offsets)")
    return M, N, K, out_dtype


#: fp32 split-K partials and per-tile arrival counters per device, grown on demand, never freed: a
#: launch leaves its counters at zero, so the buffers are reused by the next launch and graph replay
_WORKSPACE: dict = {}


def _workspace(device: torch.device, floats: int, tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
    key = str(device)
    ws, counts = _WORKSPACE.get(key, (None, None))
    if ws is None or ws.numel() < floats or counts.numel() < tiles:
        ws = torch.empty(max(floats, 1), dtype=torch.float32, device=device)
        counts = torch.zeros(max(tiles, 1), dtype=torch.int32, device=device)
        _WORKSPACE[key] = (ws, counts)
    return ws, counts


def skinny_workspace_floats(M: int, N: int, split_k: int) -> int:
    """fp32 partials the serial fix-up needs: one [band, BLOCK_M] tile per program, for the band of
    ``SKINNY_BANDS`` that needs the most (N padded to it)."""
    bm = skinny_block_m(M)
    return max(triton.cdiv(N, band) * band for band in SKINNY_BANDS) * triton.cdiv(M, bm) * split_k * bm


def skinny_tiles(M: int, N: int, band: int = SKINNY_BLOCK_N) -> int:
    """Output tiles (programs per K split) of the skinny kernel: bands of W x token tiles."""
    return triton.cdiv(N, band) * triton.cdiv(M, skinny_block_m(M))


class _Plan:
    """One shape's launch, built once: TMA descriptors (their ``base`` swapped per call), grid,
    constexpr flags, workspace, and the kernel (a fixed config, or the autotuner until it has
    chosen, then the JIT kernel with the chosen config)."""

    __slots__ = ("a_desc", "w_desc", "c_desc", "ws", "counts", "M", "N", "K", "flags", "grid", "tuner", "kernel",
                 "meta", "fp8", "bound")

    def launch(self, a, w, out, a_scale, w_scale):
        self.a_desc.base = a
        self.w_desc.base = w
        c = out
        if self.c_desc is not None:
            self.c_desc.base = out
            c = self.c_desc
        s_a, s_w = (a_scale, w_scale) if self.fp8 else (out, out)  # never read unless HAS_SCALES
        if self.ws is None:  # persistent
            args = (self.a_desc, self.w_desc, c, out, s_a, s_w, self.M, self.N, self.K, out.stride(0), out.stride(1))
            slots = (3, 4, 5) if self.c_desc is not None else (2, 3, 4, 5)  # the per-call tensors
        else:
            args = (self.a_desc, self.w_desc, out, self.ws, self.counts, s_a, s_w, self.M, self.N, self.K,
                    out.stride(0), out.stride(1))
            slots = (2, 5, 6)
        if self.kernel is not None:
            if self.bound is None:  # everything but the slots is fixed from here on
                self.bound = Bound(self.kernel, self.grid(self.meta), args, {**self.flags, **self.meta}, slots)
            self.bound(*(args[i] for i in slots))
            return
        tuner = self.tuner
        # the first call goes through the autotuner (it benchmarks its configs, or takes the committed
        # one); later calls launch its choice directly, unless kernels.tuning.Recorder is watching it
        # (an instance-level ``run``)
        tuner[self.grid](*args, **self.flags)
        if "run" not in tuner.__dict__:
            best = tuner.best_config
            nargs = dict(zip(tuner.arg_names, args))
            nargs.update(self.flags, **best.kwargs)
            if best.pre_hook is not None:
                best.pre_hook(nargs)  # the descriptors keep the chosen tile shapes from now on
            self.kernel, self.meta = tuner.fn, {**best.all_kwargs()}


def _plan(a, w, out, a_scale, w_scale, M, N, K, config) -> _Plan:
    interp = _interpreting()
    plan = _Plan()
    plan.M, plan.N, plan.K = M, N, K
    plan.fp8 = a.dtype == _FP8
    plan.tuner = plan.kernel = plan.bound = None
    plan.meta = {}
    upcast = interp and a.dtype == torch.bfloat16
    if M <= SKINNY_MAX_M:
        bm = skinny_block_m(M)
        tiles = max(skinny_tiles(M, N, band) for band in SKINNY_BANDS)  # the counters: one per tile
        cfg = config if config is not None else (INTERPRET_SKINNY_CONFIG if interp else None)
        band = cfg.get("BLOCK_N", SKINNY_BLOCK_N) if cfg is not None else SKINNY_BLOCK_N
        if band not in SKINNY_BANDS:
            raise ValueError(f"gemm: the skinny kernel's BLOCK_N (rows of W per program) must be one of {SKINNY_BANDS}, got {band}")
        max_split = cfg["SPLIT_K"] if cfg is not None else (1 if bm <= NO_WORKSPACE_MAX_M else MAX_SPLIT_K)
        if max_split < 1:
            raise ValueError(f"gemm: SPLIT_K must be >= 1, got {max_split}")
        if max_split > 1:
            plan.ws, plan.counts = _workspace(a.device, skinny_workspace_floats(M, N, max_split), tiles)
        else:
            plan.ws = plan.counts = out  # never touched with SPLIT_K = 1
        bk = cfg["BLOCK_K"] if cfg is not None else 16  # the autotuner's pre-hook sets its own
        plan.a_desc = TensorDescriptor(a, [M, K], [_row_stride(a), 1], [bm, bk])
        plan.w_desc = TensorDescriptor(w, [N, K], [_row_stride(w), 1], [band, bk])
        plan.c_desc = None
        plan.flags = dict(BLOCK_M=bm, HAS_SCALES=plan.fp8, UPCAST=upcast)
        plan.grid = lambda meta: (skinny_tiles(M, N, meta["BLOCK_N"]), meta["SPLIT_K"])
        if cfg is not None:
            plan.kernel = _skinny_kernel
            plan.meta = dict(BLOCK_K=cfg["BLOCK_K"], SPLIT_K=cfg["SPLIT_K"], BLOCK_N=band,
                             num_warps=cfg.get("num_warps", 4), num_stages=cfg.get("num_stages", 3))
        else:
            plan.tuner = _skinny[bm]
        return plan
    cfg = config if config is not None else (INTERPRET_CONFIG if interp else None)
    c_tma = _tma_problem(out) is None
    sms = num_sms_of(a.device)
    plan.ws = plan.counts = None
    plan.a_desc = TensorDescriptor(a, [M, K], [_row_stride(a), 1], [64, 16])
    plan.w_desc = TensorDescriptor(w, [N, K], [_row_stride(w), 1], [64, 16])
    plan.c_desc = TensorDescriptor(out, [M, N], [_row_stride(out), 1], [64, 16]) if c_tma else None
    plan.flags = dict(NUM_SMS=sms, C_TMA=c_tma, HAS_SCALES=plan.fp8, UPCAST=upcast)
    plan.grid = lambda meta: (min(sms, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)
    if cfg is not None:
        meta = {k: cfg[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
        meta["EPILOGUE_SUBTILE"] = cfg.get("EPILOGUE_SUBTILE", True)
        meta["FLATTEN"] = cfg.get("FLATTEN", True)
        _set_block_shapes({"a_desc": plan.a_desc, "w_desc": plan.w_desc, "c_desc": plan.c_desc, **meta})
        plan.kernel = _persistent_kernel
        plan.meta = {**meta, "num_warps": cfg.get("num_warps", 4), "num_stages": cfg.get("num_stages", 3)}
    else:
        plan.tuner = _persistent_fp8 if plan.fp8 else _persistent_16bit
    return plan


#: launch plans by everything that decides them (shapes, strides, dtypes, device, scales given, out
#: layout and alignment): a repeated call costs a key, a lookup, three base swaps and the launch
_PLANS: dict = {}


def _plan_key(a, w, a_scale, w_scale, out):
    scales = None if a_scale is None or w_scale is None else (a_scale.shape, a_scale.dtype, a_scale.device,
                                                               w_scale.shape, w_scale.dtype, w_scale.device)
    o = None if out is None else (out.shape, out.stride(), out.dtype, out.device, out.data_ptr() % 16 == 0)
    return (a.shape, a.stride(), a.dtype, w.shape, w.stride(), w.dtype, a.device, w.device,
            a_scale is None, w_scale is None, scales, o)


def gemm(
    a: torch.Tensor,
    w: torch.Tensor,
    a_scale: torch.Tensor | None = None,
    w_scale: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    config: dict | None = None,
) -> torch.Tensor:
    """C[M, N] = A[M, K] @ W[N, K]^T (times ``a_scale * w_scale`` for fp8).

    a: [M, K] and w: [N, K], both bf16, both fp16, or both fp8 e4m3 (then ``a_scale`` and
    ``w_scale`` are one-element fp32 tensors and C is bf16); K a multiple of 16, rows contiguous
    and 16-byte aligned (TMA). ``config`` bypasses autotuning: for M > ``SKINNY_MAX_M`` it holds
    BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M (optional EPILOGUE_SUBTILE, num_warps, num_stages), for
    M <= ``SKINNY_MAX_M`` BLOCK_K and SPLIT_K (optional BLOCK_N, the band of W rows per program,
    one of ``SKINNY_BANDS``; num_warps, num_stages)."""
    key = None
    if config is None:
        key = _plan_key(a, w, a_scale, w_scale, out)
        plan = _PLANS.get(key)
        if plan is not None and not (a.data_ptr() % 16 or w.data_ptr() % 16):
            if out is None:
                out = torch.empty((plan.M, plan.N), dtype=torch.bfloat16 if plan.fp8 else a.dtype, device=a.device)
            plan.launch(a, w, out, a_scale, w_scale)
            return out
    M, N, K, out_dtype = check_gemm_args(a, w, a_scale, w_scale, out)
    if out is None:
        out = torch.empty((M, N), dtype=out_dtype, device=a.device)
    if M == 0 or N == 0:
        return out
    if K == 0:
        return out.zero_()
    plan = _plan(a, w, out, a_scale, w_scale, M, N, K, config)
    if key is not None:
        remember(_PLANS, key, plan)
    plan.launch(a, w, out, a_scale, w_scale)
    return out


def reference(a, w, a_scale=None, w_scale=None) -> torch.Tensor:
    """A @ W^T in fp64 from the inputs (times the scales for fp8)."""
    c = a.to(torch.float64) @ w.to(torch.float64).T
    if a_scale is not None:
        c = c * (a_scale.to(torch.float64) * w_scale.to(torch.float64))
    return c


def baseline(a, w, a_scale=None, w_scale=None) -> torch.Tensor:
    """cuBLAS: ``torch.matmul(a, w.T)``; fp8: ``torch._scaled_mm`` (cuBLASLt, bf16 out)."""
    if a.dtype == _FP8:
        return torch._scaled_mm(a, w.T, scale_a=a_scale, scale_b=w_scale, out_dtype=torch.bfloat16)
    return torch.matmul(a, w.T)


def _cublas_matmul(a, w, a_scale=None, w_scale=None):
    if a.dtype == _FP8:
        return None
    return lambda: torch.matmul(a, w.T)


def _cublas_linear(a, w, a_scale=None, w_scale=None):
    if a.dtype == _FP8:
        return None
    return lambda: torch.nn.functional.linear(a, w)


def _scaled_mm(fast_accum: bool):
    def factory(a, w, a_scale=None, w_scale=None):
        if a.dtype != _FP8:
            return None
        return lambda: torch._scaled_mm(a, w.T, scale_a=a_scale, scale_b=w_scale, out_dtype=torch.bfloat16,
                                        use_fast_accum=fast_accum)

    return factory


_CUBLASLT = blas_candidates(baseline)["cublaslt"]


def _cublaslt_matmul(a, w, a_scale=None, w_scale=None):
    """The same matmul with torch's preferred BLAS library set to cuBLASLt around the call (its own
    heuristics and kernels); fp8 already goes through cuBLASLt in ``_scaled_mm``."""
    return None if a.dtype == _FP8 else _CUBLASLT(a=a, w=w)


#: torch paths timed beside ours, the fastest kept: cuBLAS through matmul and through linear (they
#: may pick different cuBLAS algorithms), the same under cuBLASLt; fp8: _scaled_mm with and without
#: fast accumulation (Triton's fp8 dot on Hopper accumulates the fast way by default, so the
#: fast-accumulate one is the fair peer)
BASELINES = {
    "cublas": _cublas_matmul,
    "cublas:linear": _cublas_linear,
    "cublaslt": _cublaslt_matmul,
    "scaled_mm": _scaled_mm(False),
    "scaled_mm:fast_accum": _scaled_mm(True),
}


def quantize_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor fp8 e4m3 quantization: (x / scale).to(fp8) with scale = amax / 448."""
    scale = (x.abs().amax().float() / FP8_E4M3_MAX).clamp(min=1e-12).reshape(1)
    return (x.float() / scale).to(_FP8), scale


def _make_inputs(case: Case, device, generator) -> dict:
    M, N, K = case.params["M"], case.params["N"], case.params["K"]
    if case.dtype == "fp8":
        a, a_scale = quantize_fp8(device_randn((M, K), torch.bfloat16, device, generator))
        w, w_scale = quantize_fp8(device_randn((N, K), torch.bfloat16, device, generator))
        return {"a": a, "w": w, "a_scale": a_scale, "w_scale": w_scale}
    dt = torch_dtype(case.dtype)
    return {"a": device_randn((M, K), dt, device, generator), "w": device_randn((N, K), dt, device, generator)}


def _cost(case: Case) -> tuple[float, float]:
    M, N, K = case.params["M"], case.params["N"], case.params["K"]
    b = bytes_per_element(case.dtype)
    out_b = bytes_per_element("bf16") if case.dtype == "fp8" else b
    return float(formulas.gemm_flops(M, N, K)), float(formulas.gemm_min_bytes(M, N, K, b, out_b))


def _output(case: Case, inputs) -> tuple[tuple[int, int], torch.dtype]:
    """C [M, N]: fp16 for fp16 inputs, bf16 otherwise (fp8 inputs give bf16)."""
    return (case.params["M"], case.params["N"]), torch.float16 if case.dtype == "fp16" else torch.bfloat16


def _supported(case: Case, spec=None) -> bool:
    """fp8 needs fp8 tensor cores: compute capability >= 8.9 (Ada, Hopper and later)."""
    if case.dtype != "fp8":
        return True
    if not torch.cuda.is_available():
        return _interpreting()  # the CPU interpreter emulates fp8 dots in fp16
    return torch.cuda.get_device_capability() >= (8, 9)


def _case(M: int, N: int, K: int, dtype: str) -> Case:
    return Case(shape=f"M{M}-N{N}-K{K}", params={"M": M, "N": N, "K": K}, dtype=dtype)


#: decode-like sweep: M tokens against an 8192 x 8192 weight (128 MiB of bf16, 2.7x the L2)
SKINNY_MS = (1, 2, 4, 8, 16, 32, 64, 128, 256)

OP = KernelOp(
    name="gemm",
    make_inputs=_make_inputs,
    run=gemm,
    output=_output,
    reference=reference,
    baseline=baseline,
    baselines=BASELINES,
    cost=_cost,
    cases={
        # persistent (M > 256: several tiles per program at the interpreter's 32 x 32 tiles with a
        # partial last row and column tile) and skinny (M = 1, 5, 63) paths, every dtype
        "test": (
            *(_case(263, 123, 496, dt) for dt in ("bf16", "fp16", "fp8")),
            _case(1, 123, 496, "bf16"),
            _case(5, 64, 256, "fp16"),
            _case(63, 90, 208, "fp8"),
        ),
        "quick": (_case(4096, 4096, 4096, "bf16"), _case(1, 8192, 8192, "bf16"), _case(64, 8192, 8192, "bf16")),
        "full": (
            _case(4096, 4096, 4096, "bf16"),
            _case(8192, 8192, 8192, "bf16"),
            _case(8192, 8192, 8192, "fp8"),
            *(_case(m, 8192, 8192, "bf16") for m in SKINNY_MS),
        ),
    },
    # one final rounding to the output dtype (fp8 inputs are exact; their output is bf16): 2-3x the
    # CPU-measured bf16 error (the interpreter truncates to bf16), 10x the fp16 one
    tolerance={"bf16": 8e-3, "fp16": 2e-3, "fp8": 8e-3},
    model_kind="gemm",
    dtypes=("bf16", "fp16", "fp8"),
    supported=_supported,
    notes=(
        "C = A @ W^T with W [N, K] (nn.Linear layout), K a multiple of 16; persistent TMA kernel for "
        "M > 256, swap-AB skinny kernel (split-K by serial fix-up, one launch) for M <= 256; baseline "
        "torch.matmul(a, w.T) / torch._scaled_mm for fp8."
    ),
)
