"""Correctness helpers shared by the tests and the benchmark's pre-timing check."""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: default relative-error tolerances ||out - ref|| / ||ref|| per dtype
DEFAULT_TOLERANCE = {"fp32": 1e-4, "tf32": 2e-3, "bf16": 1.6e-2, "fp16": 4e-3, "fp8": 8e-2}

TORCH_DTYPES = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp64": torch.float64,
}


def torch_dtype(name: str) -> torch.dtype:
    if name == "fp8":
        return torch.float8_e4m3fn
    return TORCH_DTYPES[name]


def poisoned(shape, dtype, device) -> torch.Tensor:
    """An output buffer filled with NaN, so an element a kernel forgets to write fails the check."""
    if dtype in (torch.float8_e4m3fn,):
        return torch.full(shape, float("nan"), dtype=torch.float32, device=device).to(dtype)
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def randn(shape, dtype, device, generator, scale: float = 1.0) -> torch.Tensor:
    """Fresh standard-normal values (never zeros), drawn in fp32 then cast."""
    x = torch.randn(shape, generator=generator, device="cpu", dtype=torch.float32) * scale
    return x.to(device=device).to(dtype)


@dataclass(frozen=True)
class Comparison:
    rel_error: float
    ok: bool
    message: str


def compare(out: torch.Tensor, ref: torch.Tensor, tol: float, abs_floor: float = 1e-6) -> Comparison:
    """Relative error ||out - ref|| / max(||ref||, floor), with a readable mismatch report:
    how many elements differ, where the first ones are, NaN and inf counted apart."""
    if out.shape != ref.shape:
        return Comparison(float("inf"), False, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    o = out.detach().to(torch.float64).cpu()
    r = ref.detach().to(torch.float64).cpu()
    n_nan = int(torch.isnan(o).sum())
    n_inf = int(torch.isinf(o).sum())
    if n_nan or n_inf:
        bad = torch.nonzero(~torch.isfinite(o))[:5].tolist()
        return Comparison(
            float("inf"), False, f"{n_nan} NaN and {n_inf} inf of {o.numel()} elements (first at {bad})"
        )
    denom = max(float(torch.linalg.vector_norm(r)), abs_floor)
    rel = float(torch.linalg.vector_norm(o - r)) / denom
    if rel <= tol:
        return Comparison(rel, True, f"rel error {rel:.3e} <= {tol:.1e}")
    elem_tol = tol * max(float(r.abs().max()), abs_floor)
    diff = (o - r).abs() > elem_tol
    where = torch.nonzero(diff)[:5].tolist()
    return Comparison(
        rel,
        False,
        f"rel error {rel:.3e} > {tol:.1e}; {int(diff.sum())} of {o.numel()} elements differ by more than "
        f"{elem_tol:.2e} (first at {where})",
    )


def assert_close(out: torch.Tensor, ref: torch.Tensor, tol: float, what: str = "") -> float:
    c = compare(out, ref, tol)
    assert c.ok, f"{what}: {c.message}"
    return c.rel_error


def device_randn(shape, dtype, device, generator, scale: float = 1.0) -> torch.Tensor:
    """Like ``randn``, but drawn on ``device`` itself from a generator seeded by ``generator``:
    fresh random values for GPU inputs of several GB without a CPU round trip (``randn`` draws on
    the CPU, which takes tens of seconds at that size). On the CPU it is ``randn``."""
    if torch.device(device).type == "cpu":
        return randn(shape, dtype, device, generator, scale)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    direct = dtype in (torch.float32, torch.bfloat16, torch.float16)  # no fp32 copy at full size
    x = torch.randn(shape, generator=g, device=device, dtype=dtype if direct else torch.float32)
    if scale != 1.0:
        x.mul_(scale)
    return x if direct else x.to(dtype)


_TRITON_TYPES = {
    torch.float32: "fp32",
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.float64: "fp64",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.float8_e4m3fn: "fp8e4nv",
}


def compile_for_gpu(kernel, args: dict, num_warps: int = 4, num_stages: int = 3, arch: int = 90):
    """Compile a ``@triton.jit`` kernel for an NVIDIA GPU of compute capability ``arch`` (90: H100 and
    H200) without a GPU: Triton's NVIDIA backend and its bundled ptxas lower the kernel to a cubin.
    A CPU-only CI thereby catches code the interpreter accepts but the compiler rejects, and shared
    memory over budget (``.metadata.shared``, bytes).

    ``args`` maps every parameter name to a launch value, as the launcher would pass it: tensors
    (only their dtype is used: pointers are taken as 16-byte aligned, as PyTorch allocates them),
    ints (specialized like the JIT does: 1 becomes a constant, multiples of 16 are marked so),
    floats and the constexprs. ``kernel`` may be wrapped in ``triton.heuristics``/``autotune``.

    Call it in a process where TRITON_INTERPRET is unset (``run_without_interpreter``): with it set,
    Triton's own library functions (``tl.cdiv``, ``tl.sigmoid``, ...) are interpreter objects that
    the compiler cannot lower."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from triton.runtime.jit import JITFunction

    fn = kernel
    while not isinstance(fn, JITFunction) and hasattr(fn, "fn"):
        fn = fn.fn  # through autotune / heuristics, or to the Python function under the interpreter
    if not isinstance(fn, JITFunction):
        fn = JITFunction(fn)  # TRITON_INTERPRET=1 made @triton.jit an InterpretedFunction
    signature, constexprs, attrs = {}, {}, {}
    for i, p in enumerate(fn.params):
        value = args[p.name]
        if p.is_constexpr or (isinstance(value, int) and not isinstance(value, bool) and value == 1):
            signature[p.name] = "constexpr"
            constexprs[(i,)] = value
        elif type(value).__name__ == "TensorDescriptor":  # host-side TMA descriptor
            from triton.runtime.jit import mangle_type

            signature[p.name] = mangle_type(value)
        elif isinstance(value, torch.Tensor):
            signature[p.name] = "*" + _TRITON_TYPES[value.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, bool):
            signature[p.name] = "i1"
        elif isinstance(value, int):
            signature[p.name] = "i32" if -(2**31) <= value < 2**31 else "i64"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[p.name] = "fp32"
        else:
            raise TypeError(f"compile_for_gpu: no Triton type for {p.name} = {value!r}")
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps, "num_stages": num_stages})


def run_without_interpreter(code: str, timeout_s: float = 300.0) -> str:
    """Run Python ``code`` in a fresh process from the repository root with TRITON_INTERPRET unset
    (the tests' own process has it set on a machine without a GPU); returns its stdout, raising
    with its stderr's tail when it fails."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s
    )
    if proc.returncode != 0:
        raise RuntimeError(f"subprocess exited {proc.returncode}: {proc.stderr[-3000:]}")
    return proc.stdout


def seeded_generator(tag: str) -> torch.Generator:
    """A CPU generator seeded from a test id: fresh inputs per case, reproducible per case."""
    import zlib

    return torch.Generator().manual_seed(zlib.crc32(tag.encode()))


def cubin_stack_bytes(compiled) -> int:
    """Per-thread stack frame (register spills show up here) of a kernel compiled with
    ``compile_for_gpu``, read with the cuobjdump that Triton's NVIDIA backend ships."""
    import os
    import re
    import subprocess
    import tempfile

    import triton

    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    try:
        out = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    return int(re.search(r"STACK:(\d+)", out).group(1))
