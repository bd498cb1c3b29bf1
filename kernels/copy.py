"""Streaming copy: the HBM bandwidth ceiling.

``copy(src, out=None) -> out`` copies a contiguous tensor of any shape element by element. Each
program moves one block of ``BLOCK`` elements (a few KB), so the grid is large enough to keep every
SM's load/store units busy and the compiler emits 128-bit vector accesses. Bytes moved = read +
write (``formulas.streaming_bytes``); there are no FLOPs. The baseline is ``dst.copy_(src)``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import launch
from kernels.registry import Case, KernelOp, output_like
from kernels.testing import device_randn, torch_dtype
from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element

# the fixed config (CPU interpreter, an explicit ``block``, and what the H200 runs timed): 8192
# elements (16 KB of bf16) per program with 8 warps gives each thread 32 elements, i.e. four
# 128-bit loads in flight. It reached 3.84-3.88 TB/s on the H200 (run 2), 0.91x torch's copy_ (4.21).
BLOCK = 8192
NUM_WARPS = 8
#: (elements per program, warps) the GPU autotuner chooses from: 16 to 64 elements a thread (2-8
#: 128-bit bf16 loads in flight), the fixed config among them; graph-timed at run time, or committed
#: under kernels/tuned/ by ``roofline tune``
GPU_TILES = ((4096, 4), (8192, 8), (16384, 8), (16384, 16), (32768, 16))


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n_elements, SIZE_CLASS, BLOCK: tl.constexpr):
    # SIZE_CLASS (n_elements' bit length) is the autotuner's key only: one tuning per power of two
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(src_ptr + offs, mask=mask, eviction_policy="evict_first")
    tl.store(dst_ptr + offs, x, mask=mask, cache_modifier=".cs")


_copy_tuned = triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in GPU_TILES], key=["SIZE_CLASS"]
)(_copy_kernel)


def _grid(meta):
    return (triton.cdiv(meta["n_elements"], meta["BLOCK"]),)


def copy(src: torch.Tensor, out: torch.Tensor | None = None, block: int | None = None) -> torch.Tensor:
    """Copy ``src`` (contiguous, any shape and dtype) into ``out`` (same shape, dtype, device;
    allocated when None) and return ``out``. ``block`` (a power of two) fixes the elements per
    program; None: the autotuned tile on a GPU (one tuning per power of two of the size), the
    fixed ``BLOCK`` elsewhere."""
    if not src.is_contiguous():
        raise ValueError(f"copy: src must be contiguous, got strides {tuple(src.stride())}")
    if out is None:
        out = torch.empty_like(src)
    if out.shape != src.shape or out.dtype != src.dtype or out.device != src.device:
        raise ValueError(
            f"copy: out {tuple(out.shape)} {out.dtype} on {out.device} must match src "
            f"{tuple(src.shape)} {src.dtype} on {src.device}"
        )
    if not out.is_contiguous():
        raise ValueError(f"copy: out must be contiguous, got strides {tuple(out.stride())}")
    if block is not None and (block <= 0 or block & (block - 1)):
        raise ValueError(f"copy: block must be a power of two, got {block}")
    n = src.numel()
    if n == 0:
        return out
    if block is None and src.is_cuda:
        launch(_copy_tuned, _grid, src, out, n, n.bit_length())
        return out
    block = BLOCK if block is None else block
    launch(_copy_kernel, (triton.cdiv(n, block),), src, out, n, n.bit_length(), BLOCK=block, num_warps=NUM_WARPS)
    return out


def reference(src: torch.Tensor) -> torch.Tensor:
    return src.clone()


def baseline(src: torch.Tensor) -> torch.Tensor:
    """What PyTorch users write: ``dst.copy_(src)`` into a preallocated tensor (cudaMemcpy-like)."""
    return torch.empty_like(src).copy_(src)


#: bytes per ``copy_`` of the chunked baseline. A contiguous device-to-device ``copy_`` captured in
#: a CUDA graph is a memcpy node, and memcpy nodes of exactly 512 MiB and of 1 GiB or more run at
#: about half bandwidth (pytorch/pytorch#191284; on our H200 run 2: 2.77 TB/s against 4.21 eager),
#: while 256 MiB nodes run at full speed: the issue's workaround, and the fastest copy torch offers
#: for those sizes in a graph
CHUNK_BYTES = 256 << 20


def _copy_factory(**inputs):
    """``dst.copy_(src)`` into a destination allocated once, outside the timing."""
    src = inputs["src"]
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def _chunked_copy_factory(**inputs):
    """``copy_`` in ``CHUNK_BYTES`` pieces (one memcpy node each in a graph); declines a tensor of
    one chunk or less (the same call as ``copy_``)."""
    src = inputs["src"]
    chunk = max(1, CHUNK_BYTES // src.element_size())
    if src.numel() <= chunk:
        return None
    dst = torch.empty_like(src)
    pairs = list(zip(dst.view(-1).split(chunk), src.view(-1).split(chunk)))

    def run():
        for d, s_ in pairs:
            d.copy_(s_)
        return dst

    return run


def _make_inputs(case: Case, device, generator) -> dict:
    return {"src": device_randn((case.params["n"],), torch_dtype(case.dtype), device, generator)}


def _cost(case: Case) -> tuple[float, float]:
    n = case.params["n"]
    return 0.0, float(formulas.streaming_bytes(n, bytes_per_element(case.dtype), reads=1, writes=1))


def _case(n: int, dtype: str) -> Case:
    return Case(shape=f"N{n}", params={"n": n}, dtype=dtype)


_MiB = 1 << 20

OP = KernelOp(
    name="copy",
    make_inputs=_make_inputs,
    run=copy,
    output=output_like("src"),
    reference=reference,
    baseline=baseline,
    baselines={"copy_": _copy_factory, "copy_:chunked": _chunked_copy_factory},
    cost=_cost,
    cases={
        "test": tuple(_case(n, dt) for n in (1, 63, 1000, 8193) for dt in ("bf16", "fp32")),
        # 256 MiB read + 256 MiB written: well past launch overhead and 5x the 50 MB L2
        "quick": (_case(128 * _MiB, "bf16"),),
        # 0.5, 1 and 2 GiB moved (read + write) in bf16, 2 GiB in fp32 (same bytes, wider elements);
        # capped at 512M elements: a few GB is well past L2 and launch overhead; more only costs time
        "full": (
            _case(128 * _MiB, "bf16"),
            _case(256 * _MiB, "bf16"),
            _case(512 * _MiB, "bf16"),
            _case(256 * _MiB, "fp32"),
        ),
    },
    tolerance={"bf16": 0.0, "fp16": 0.0, "fp32": 0.0},
    model_kind="copy",
    dtypes=("bf16", "fp16", "fp32"),
    notes="bytes = read + write of n elements; baseline torch copy_, whole or in 256 MiB pieces "
    "(graph memcpy nodes of 512 MiB and >= 1 GiB run at half speed: pytorch#191284), the faster.",
)
