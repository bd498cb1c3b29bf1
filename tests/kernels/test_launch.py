"""kernels/launch.py: the fast launch path's keys, argument packing, self-check and fallbacks.

No GPU here: a fake compiled kernel stands in for Triton's ``CompiledKernel`` (the object whose
``run`` the fast path calls), and the launch keys are checked against the installed Triton's own
specialization (its argument binder, built for an sm_90 target without a device)."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from kernels import launch as L
from kernels.copy import copy


def _kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr, FLAG: tl.constexpr = True):
    pass  # never compiled: its signature is what the tests need


def _desc_kernel(desc, out_ptr, n, BLOCK: tl.constexpr):
    pass


class FakeCompiled:
    """What the fast path uses of a CompiledKernel: ``run``, ``function``, ``packed_metadata``,
    ``src.fn.arg_names``."""

    def __init__(self, jit, fail=False):
        self.src = type("Src", (), {"fn": jit})()
        self.function = object()
        self.packed_metadata = (4, 1, 0)
        self.calls = []
        self.fail = fail

    def run(self, *a):
        if self.fail:
            raise RuntimeError("launcher rejected the arguments")
        self.calls.append(a)


def _counting_normal(monkeypatch, jit) -> dict:
    """Triton's own launch path replaced: each call counted, returning ``state['compiled']``."""
    state = {"compiled": FakeCompiled(jit), "normal": 0}

    def normal(kernel, grid, args, kwargs):
        state["normal"] += 1
        return state["compiled"]

    monkeypatch.setattr(L, "_normal", normal)
    return state


@pytest.fixture
def fake(monkeypatch):
    """A fresh JIT kernel whose normal launches return ``state['compiled']`` and are counted."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    L.reset()
    L.set_enabled(True)
    jit = JITFunction(_kernel)
    state = _counting_normal(monkeypatch, jit)
    monkeypatch.setattr(L, "_device_and_stream", lambda: (0, 1234))
    monkeypatch.setattr(L, "_VERSION_OK", True)
    yield jit, state
    L.reset()


def _args():
    return torch.randn(64), torch.randn(64), 64, 0.5


def test_interpreter_takes_the_normal_path(monkeypatch):
    """Under TRITON_INTERPRET=1 the launch goes through Triton's interpreter and keeps nothing."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    L.reset()
    assert not L.enabled()
    src = torch.randn(1000, generator=torch.Generator().manual_seed(3))
    out = torch.full_like(src, float("nan"))
    copy(src, out, block=256)
    copy(src, out, block=256)
    assert torch.equal(out, src)
    assert L.stats() == {}  # no kernel table: the fast path never ran


def test_third_call_is_fast_with_packed_arguments(fake):
    jit, state = fake
    args = _args()
    for _ in range(2):  # first: compile and keep; second: the self-check against Triton's lookup
        L.launch(jit, (7, 2), *args, BLOCK=128, num_warps=4)
    assert state["normal"] == 2 and state["compiled"].calls == []
    L.launch(jit, (7, 2), *args, BLOCK=128, num_warps=4)
    assert state["normal"] == 2
    (call,) = state["compiled"].calls
    gx, gy, gz, stream, function, packed, meta, enter, exit_, *kargs = call
    assert (gx, gy, gz, stream) == (7, 2, 1, 1234)
    assert function is state["compiled"].function and packed == (4, 1, 0)
    assert (meta, enter, exit_) == (None, None, None)
    # every argument in signature order, constexprs included (the launcher skips them itself):
    # BLOCK from the keywords, FLAG from its default; num_warps is an option, not an argument
    assert len(kargs) == len(jit.arg_names) == 6
    assert kargs[0] is args[0] and kargs[1] is args[1] and kargs[2:4] == [64, 0.5]
    assert kargs[4:] == [128, True]
    assert L.stats()["_kernel"]["fast_calls"] == 1


def test_new_specialization_takes_the_normal_path(fake):
    jit, state = fake
    x, y, n, s = _args()
    for _ in range(3):
        L.launch(jit, (1,), x, y, n, s, BLOCK=128)
    L.launch(jit, (1,), x[1:], y, n, s, BLOCK=128)  # 4-byte offset: no longer 16-byte aligned
    L.launch(jit, (1,), x, y, n, s, BLOCK=256)  # another constexpr
    L.launch(jit, (1,), x, y, 1, s, BLOCK=128)  # n == 1 is specialized
    assert state["normal"] == 2 + 3 and len(state["compiled"].calls) == 1


def test_failing_fast_launch_falls_back_for_good(fake):
    jit, state = fake
    state["compiled"] = FakeCompiled(jit, fail=True)
    args = _args()
    for _ in range(3):
        L.launch(jit, (1,), *args, BLOCK=128)
    assert state["normal"] == 3  # the failed fast launch was redone the normal way
    reason = L.disabled()["_kernel"]
    assert "fast launch raised RuntimeError" in reason and "rejected" in reason
    state["compiled"] = FakeCompiled(jit)
    for _ in range(3):
        L.launch(jit, (1,), *args, BLOCK=128)
    assert state["normal"] == 6 and state["compiled"].calls == []  # permanently normal


def test_self_check_mismatch_disables(fake):
    jit, state = fake
    args = _args()
    L.launch(jit, (1,), *args, BLOCK=128)
    state["compiled"] = FakeCompiled(jit)  # Triton now returns another kernel for the same key
    L.launch(jit, (1,), *args, BLOCK=128)
    L.launch(jit, (1,), *args, BLOCK=128)
    assert "self-check" in L.disabled()["_kernel"]
    assert state["normal"] == 3 and state["compiled"].calls == []


def test_unknown_triton_version_falls_back(fake, monkeypatch):
    jit, state = fake
    monkeypatch.setattr(L, "_VERSION_OK", False)
    for _ in range(3):
        L.launch(jit, (1,), *_args(), BLOCK=128)
    assert state["normal"] == 3
    assert triton.__version__ in L.disabled()["_kernel"]


def test_version_table():
    from kernels.launch import triton_version_supported

    assert triton_version_supported("3.6.0") and triton_version_supported("3.9.1+git")
    assert not triton_version_supported("3.2.0") and not triton_version_supported("4.0.0")


def test_tensor_keyword_is_refused(fake):
    jit, state = fake
    x, y, n, s = _args()
    for _ in range(3):
        L.launch(jit, (1,), x, y_ptr=y, n=n, scale=s, BLOCK=128)
    assert "keyword argument of type Tensor" in L.disabled()["_kernel"]
    assert state["normal"] == 3


def test_descriptor_passed_whole_to_the_launcher(fake):
    """A host TensorDescriptor goes to ``run`` as one argument: Triton's launcher expands it (TMA
    descriptor, shape, strides); its base swapped between calls keeps the key when alignment holds."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    _, state = fake
    jit = JITFunction(_desc_kernel)
    state["compiled"] = FakeCompiled(jit)
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    out = torch.empty(8)
    d = TensorDescriptor(a, [64, 64], [64, 1], [16, 32])
    for base in (a, b, a):
        d.base = base
        L.launch(jit, (2,), d, out, 8, BLOCK=16)
    (call,) = state["compiled"].calls
    assert call[9] is d and call[9].base is a and call[10:] == (out, 8, 16)
    d.block_shape = [32, 32]  # another tile: another specialization
    L.launch(jit, (2,), d, out, 8, BLOCK=16)
    assert state["normal"] == 3


def _triton_binder(jit):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    return create_function_from_signature(jit.signature, jit.params, make_backend(GPUTarget("cuda", 90, 32)))


def test_keys_refine_tritons_specialization():
    """Equal launch keys must mean equal Triton specializations (the key may split more finely)."""
    jit = JITFunction(_kernel)
    try:
        binder = _triton_binder(jit)
    except Exception as exc:  # noqa: BLE001 - only a Triton without this internal
        pytest.fail(f"installed Triton {triton.__version__} has no usable binder: {exc}")
    x32 = torch.randn(80)
    xb = torch.randn(80).to(torch.bfloat16)
    tensors = (x32, x32[4:], x32[1:], xb, xb[8:], xb[3:])
    ints = (1, 2, 16, 17, 4096, 2**31 - 1, 2**31, 2**40, -16)
    cases = []
    for i, t in enumerate(tensors):
        for n in ints:
            cases.append(((t, tensors[-1 - i], n, 0.25), {"BLOCK": 64}))
            cases.append(((t, t, n, 1.5), {"BLOCK": 128, "FLAG": False}))
    table = L._KernelTable(jit)
    seen = {}
    for args, kwargs in cases:
        key = table.key(args, kwargs, 0)
        _, spec, _ = binder(*args, **kwargs)
        spec = repr(spec)
        assert seen.setdefault(key, spec) == spec, f"launch key {key} covers two specializations"
    assert len(seen) >= 2 * len(ints)  # the keys do separate things


def test_descriptor_keys_refine_tritons_specialization():
    from triton.tools.tensor_descriptor import TensorDescriptor

    jit = JITFunction(_desc_kernel)
    binder = _triton_binder(jit)
    table = L._KernelTable(jit)
    seen = {}
    base = torch.randn(64 * 64 + 8).to(torch.bfloat16)
    for off in (0, 8):  # descriptors require a 16-byte aligned base
        t = base[off:off + 64 * 64].view(64, 64)
        for block in ([16, 32], [32, 32], [64, 16]):
            for dt in (torch.bfloat16, torch.float16):
                d = TensorDescriptor(t.view(dt), [64, 64], [64, 1], block)
                args = (d, base, 8)
                key = table.key(args, {"BLOCK": 16}, 0)
                spec = repr(binder(*args, BLOCK=16)[1])
                assert seen.setdefault(key, spec) == spec
    assert len(seen) == 3 * 2  # dtype and tile split the key


def test_moe_plan_keeps_its_buffers_and_stays_correct():
    """The MoE plan's alignment and activation buffers are allocated once and reused (one stream):
    two calls on different inputs of one shape use the same memory and both match the reference."""
    import kernels.moe as MOE
    from kernels.testing import compare

    case = MOE.OP.cases["test"][0]
    gen = torch.Generator().manual_seed(11)
    ptrs = []
    for _ in range(2):
        inputs = MOE.OP.make_inputs(case, "cpu", gen)
        out = MOE.moe(**inputs)
        c = compare(out, MOE.reference(**inputs), MOE.OP.tolerance[case.dtype])
        assert c.ok, c.message
        plan = next(p for p in MOE._PLANS.values() if p.T == inputs["hidden"].shape[0] and p.bufs is not None)
        ptrs.append((plan.bufs[1].data_ptr(), plan.bufs[2].data_ptr()))
    assert ptrs[0] == ptrs[1]


def test_autotuner_config_and_pre_hook(fake):
    """An autotuned kernel: the chosen config's constexprs fill the argument tail, its pre-hook runs
    before each fast launch (with the arguments by name), and the autotuner's key arguments split
    the launch key (another n: another config may win, so Triton's path again)."""
    jit, state = fake
    hooked = []
    cfg = triton.Config({"BLOCK": 64}, num_warps=4, pre_hook=lambda nargs: hooked.append(dict(nargs)))
    tuner = triton.autotune(configs=[cfg, triton.Config({"BLOCK": 128}, num_warps=8)], key=["n"])(jit)

    def normal(kernel, grid, args, kwargs):
        state["normal"] += 1
        kernel.best_config = cfg  # what Autotuner.run leaves after choosing
        return state["compiled"]

    L._normal = normal  # the fixture's monkeypatch restores it
    x, y, n, s = _args()
    for _ in range(3):
        L.launch(tuner, lambda meta: (meta["n"] // meta["BLOCK"],), x, y, n, s)
    assert state["normal"] == 2
    (call,) = state["compiled"].calls
    assert call[0] == 1  # the grid callable saw BLOCK = 64 from the config
    assert call[9] is x and call[10] is y and call[11:] == (64, 0.5, 64, True)  # BLOCK from the config
    assert hooked and hooked[-1]["n"] == 64 and hooked[-1]["BLOCK"] == 64 and hooked[-1]["x_ptr"] is x
    L.launch(tuner, (1,), x, y, 128, s)  # same specialization, another autotuner key
    assert state["normal"] == 3


def test_bound_launch_goes_direct_once_launch_has_verified_the_key(fake, monkeypatch):
    """Bound: Triton's path for the first two calls (as launch), then the kept kernel directly with
    exactly the arguments launch's own fast path passes, and no launch key per call; a slot tensor
    of another alignment goes back through launch."""
    jit, state = fake
    x, y, n, s = _args()
    bound = L.Bound(jit, (7, 2), [None, y, n, s], {"BLOCK": 128, "num_warps": 4}, slots=(0,))
    bound(x), bound(x)
    assert state["normal"] == 2 and state["compiled"].calls == []
    keys = []
    real_key = L._KernelTable.key
    monkeypatch.setattr(L._KernelTable, "key", lambda self, *a: keys.append(1) or real_key(self, *a))
    x2 = torch.randn(64)  # another tensor, same dtype and alignment
    bound(x2)
    assert state["normal"] == 2 and keys == []
    direct = state["compiled"].calls[-1]
    L.launch(jit, (7, 2), x2, y, n, s, BLOCK=128, num_warps=4)  # launch's fast path, same arguments
    assert state["compiled"].calls[-1] == direct and len(keys) == 1
    assert direct[:4] == (7, 2, 1, 1234) and direct[9] is x2
    bound(x2[1:65] if x2.numel() > 64 else torch.randn(65)[1:])  # 4-byte offset: another specialization
    assert state["normal"] == 3  # through launch: a new key, Triton's path
    assert L.stats()["_kernel"]["fast_calls"] == 2


def test_bound_launch_checks_descriptor_bases_and_hooks(fake, monkeypatch):
    """A descriptor's base of another alignment, or a profiler's launch hook, goes through launch;
    an autotuner pre-hook runs once when marked descriptor_tile_hook, else launch runs it per call."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    jit = JITFunction(_desc_kernel)
    state = _counting_normal(monkeypatch, jit)
    base = torch.randn(64 * 64 + 8).to(torch.bfloat16)
    t = base[:4096].view(64, 64)
    d = TensorDescriptor(t, [64, 64], [64, 1], [16, 32])
    out = torch.empty(16)
    bound = L.Bound(jit, (4,), [d, None, 8], {"BLOCK": 16}, slots=(1,))
    for _ in range(3):
        bound(out)
    assert state["normal"] == 2 and len(state["compiled"].calls) == 1
    d.base = base[4:4100].view(64, 64)  # 8-byte offset
    bound(out)
    assert state["normal"] == 3
    d.base = t
    bound(out)
    assert len(state["compiled"].calls) == 2
    monkeypatch.setattr(L, "_hooks_set", lambda: True)
    bound(out)
    assert state["normal"] == 4  # a hook wants Triton's launch metadata

    hooked = []

    def plain_hook(nargs):
        hooked.append(1)

    marked = L.descriptor_tile_hook(lambda nargs: hooked.append(2))
    monkeypatch.setattr(L, "_hooks_set", lambda: False)
    for hook, expect in ((plain_hook, [1, 1, 1]), (marked, [2])):
        L.reset()
        hooked.clear()
        cfg = triton.Config({"BLOCK": 16}, num_warps=4, pre_hook=hook)
        tuner = triton.autotune(configs=[cfg, triton.Config({"BLOCK": 32}, num_warps=4)], key=["n"])(jit)

        def normal_tuned(kernel, grid, args, kwargs, cfg=cfg):
            kernel.best_config = cfg
            return state["compiled"]

        monkeypatch.setattr(L, "_normal", normal_tuned)
        bound = L.Bound(tuner, (4,), [d, None, 8], {}, slots=(1,))
        for _ in range(5):
            bound(out)
        # marked: once, when Bound learns the verified key (call 2), then direct calls without it;
        # plain: never learned, so launch's fast path runs it on each of calls 3-5
        assert hooked == expect, (hook, hooked)


def test_launch_overhead_benchmark_runs():
    """benchmarks/bench_launch_overhead.py (Triton's launcher stubbed) runs and prints its figures
    (a script prints speed figures; no test asserts on them)."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "benchmarks/bench_launch_overhead.py", "--calls", "300"], cwd=root, env=env,
                         capture_output=True, text=True, timeout=300, check=True).stdout
    figures = re.findall(r"whole fast launch without Triton's launcher ([0-9.]+) us, bound launch ([0-9.]+) us", out)
    assert len(figures) == 2 and all(float(f) > 0 and float(b) > 0 for f, b in figures), out
    assert out.count("the whole launcher with Triton's launcher stubbed") == 2, out
