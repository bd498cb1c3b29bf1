"""Host microseconds that ``kernels.launch.launch`` itself adds per fast launch, on the host's CPU.

Triton's own launcher (``CompiledKernel.run``: argument parsing, TMA descriptor encoding,
``cuLaunchKernelEx``) needs a GPU, so it is replaced by a no-op here: the figure is the part of a
launch that is our Python (launch key, table lookup, grid), i.e. what this project can cut without
a GPU. The argument lists are the real ones of the decode-attention kernel (35 arguments, two TMA
descriptors) and the skinny GEMM (12 arguments), on CPU tensors.

    python benchmarks/bench_launch_overhead.py [--calls 20000]

Prints one line per case: median of 5 repeats of ``--calls`` calls, microseconds per call, for the
launch key alone, ``launch`` (fast path) and a plan's ``Bound`` launch (one per-call tensor).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


class _FakeCompiled:
    def __init__(self, jit) -> None:
        self.src = type("Src", (), {"fn": jit})()
        self.function = object()
        self.packed_metadata = (4, 1, 0)

    def run(self, *args) -> None:
        pass


def _cases():
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    from kernels import decode_attention as DA
    from kernels import gemm as G

    q = torch.randn(8, 32, 128).to(torch.bfloat16)
    k = torch.randn(8, 8, 4096, 128).to(torch.bfloat16)
    descs = [TensorDescriptor(k, [8, 4096, 8, 128], [k.stride(0), k.stride(2), k.stride(1), 1], [1, 64, 1, 128]) for _ in range(2)]
    parts = [torch.empty(8, 32, 4), torch.empty(8, 32, 4), torch.empty(8, 32, 4, 128)]
    counter = torch.zeros(64, dtype=torch.int32)
    decode_args = (q, k, k, *descs, q, q, *parts, q, counter, *range(1, 21), 0.125, 8, 4)
    decode_consts = dict(BLOCK_G=16, D=128, VARLEN=False, PAGED=False, PAGE_SIZE=1, UPCAST=False,
                         BLOCK_N=64, TMA=True, num_warps=4, num_stages=3)
    a = torch.randn(16, 8192).to(torch.bfloat16)
    w = torch.randn(1024, 8192).to(torch.bfloat16)
    out = torch.empty(16, 1024).to(torch.bfloat16)
    a_desc = TensorDescriptor(a, [16, 8192], [8192, 1], [16, 128])
    w_desc = TensorDescriptor(w, [1024, 8192], [8192, 1], [128, 128])
    gemm_args = (a_desc, w_desc, out, out, out, out, out, out, 16, 1024, 8192, 1024, 1)
    gemm_consts = dict(BLOCK_M=16, BLOCK_N=128, HAS_SCALES=False, UPCAST=False, BLOCK_K=128, SPLIT_K=1,
                       num_warps=4, num_stages=4)
    return [  # (name, kernel, grid, arguments, constexprs, the per-call tensor's position)
        ("decode_attention (35 args, 2 descriptors)", DA._decode_attention_kernel, (64, 4), decode_args, decode_consts, 0),
        ("skinny gemm (13 args, 2 descriptors)", G._skinny_kernel, (8, 1), gemm_args, gemm_consts, 2),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args(argv)
    os.environ.pop("TRITON_INTERPRET", None)
    from kernels import launch as L

    L.reset()
    L.set_enabled(True)
    L._VERSION_OK = True
    L._device_and_stream = lambda: (0, 0)
    for name, kernel, grid, kargs, consts, slot in _cases():
        compiled = _FakeCompiled(L._jit_of(kernel))
        L._normal = lambda k, g, a, kw, compiled=compiled: compiled
        for _ in range(3):  # keep, self-check, then fast
            L.launch(kernel, grid, *kargs, **consts)
        table = L._table(kernel)
        if table.reason is not None:
            print(f"{name}: fast path off ({table.reason})")
            continue
        key_us, launch_us = [], []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                table.key(kargs, consts, 0)
            key_us.append((time.perf_counter() - t0) / args.calls * 1e6)
            t0 = time.perf_counter()
            for _ in range(args.calls):
                L.launch(kernel, grid, *kargs, **consts)
            launch_us.append((time.perf_counter() - t0) / args.calls * 1e6)
        bound = L.Bound(kernel, grid, kargs, consts, slots=(slot,))
        for _ in range(3):
            bound(kargs[slot])
        bound_us = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                bound(kargs[slot])
            bound_us.append((time.perf_counter() - t0) / args.calls * 1e6)
        print(f"{name}: launch key {statistics.median(key_us):.2f} us, whole fast launch without Triton's "
              f"launcher {statistics.median(launch_us):.2f} us, bound launch {statistics.median(bound_us):.2f} us "
              f"per call (median of 5 x {args.calls})")
    for name, call in _wrappers(L):
        us = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                call()
            us.append((time.perf_counter() - t0) / args.calls * 1e6)
        print(f"{name}: {statistics.median(us):.2f} us per call, the whole launcher with Triton's launcher stubbed "
              f"(median of 5 x {args.calls})")
    return 0


def _wrappers(L):
    """(name, call) for whole launchers on CPU tensors: plan lookup, output allocation, Bound;
    Triton's own path returns a stub compiled kernel (its first config for an autotuner), and the
    CUDA-device check is skipped (these tensors live on the CPU)."""
    import torch

    from kernels import decode_attention as DA

    stubs: dict = {}

    def normal(kernel, grid, args, kwargs):
        if hasattr(kernel, "configs"):  # an autotuner: as if it had chosen its first config
            kernel.best_config = kernel.configs[0]
        jit = L._jit_of(kernel)
        return stubs.setdefault(id(jit), _FakeCompiled(jit))

    L._normal = normal
    DA.check_device = lambda *tensors: None
    q = torch.randn(8, 32, 128).to(torch.bfloat16)
    k = torch.randn(8, 8, 4096, 128).to(torch.bfloat16)
    v = torch.randn_like(k)
    out = torch.empty_like(q)
    calls = [  # (gemm's first call goes through its autotuner object, which needs a GPU driver)
        ("decode_attention(q, k, v, out=out), B8 H32 Hkv8 N4096", lambda: DA.decode_attention(q, k, v, out=out)),
        ("decode_attention(q, k, v), output allocated", lambda: DA.decode_attention(q, k, v)),
    ]
    for _, call in calls:
        for _ in range(3):  # Triton's path twice, then direct
            call()
    return calls


if __name__ == "__main__":
    raise SystemExit(main())
