"""kernels/copy.py against its reference: exact copies of odd sizes, launcher checks, cost."""

from __future__ import annotations

import pytest
import torch

from kernels.copy import OP, baseline, copy, reference
from kernels.registry import load_op
from kernels.testing import poisoned, randn, torch_dtype

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


def test_registry_finds_op():
    assert load_op("copy") is OP
    assert OP.model_kind == "copy"


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "bf16"])
def test_copy_multidim_many_programs(dtype, gen):
    # 3*5*67 = 1005 elements over blocks of 64: 16 programs, the last one partial
    src = randn((3, 5, 67), torch_dtype(dtype), DEVICE, gen)
    out = poisoned(src.shape, src.dtype, DEVICE)
    copy(src, out=out, block=64)
    assert torch.equal(out, src)


def test_copy_allocates_output(gen):
    src = randn((123,), torch.bfloat16, DEVICE, gen)
    out = copy(src)
    assert out.data_ptr() != src.data_ptr() and torch.equal(out, src)


def test_baseline_matches_reference(gen):
    src = randn((500,), torch.float32, DEVICE, gen)
    assert torch.equal(baseline(src), reference(src))


def test_baseline_candidates_copy_whole_and_in_chunks(gen, monkeypatch):
    """Both torch candidates give the exact copy; the chunked one cuts the copy into CHUNK_BYTES
    pieces (graph memcpy nodes of 512 MiB and >= 1 GiB run at half speed) and declines a tensor
    that is one chunk or less."""
    import kernels.copy as C

    assert set(OP.baselines) == {"copy_", "copy_:chunked"}
    monkeypatch.setattr(C, "CHUNK_BYTES", 4 * 100)  # 100 fp32 elements a piece
    src = randn((3, 167), torch.float32, DEVICE, gen)
    calls = []
    real = torch.Tensor.copy_
    monkeypatch.setattr(torch.Tensor, "copy_", lambda self, other, *a, **k: (calls.append(other.numel()), real(self, other, *a, **k))[1])
    for name, factory in OP.baselines.items():
        calls.clear()
        run = factory(src=src)
        out = run()
        assert torch.equal(out, reference(src)) and out.data_ptr() != src.data_ptr(), name
        assert calls == ([501] if name == "copy_" else [100, 100, 100, 100, 100, 1]), (name, calls)
    assert OP.baselines["copy_:chunked"](src=src[0, :100].contiguous()) is None


def test_launcher_rejects_bad_arguments(gen):
    src = randn((8, 6), torch.float32, DEVICE, gen)
    with pytest.raises(ValueError, match="contiguous"):
        copy(src.T)
    with pytest.raises(ValueError, match="must match"):
        copy(src, out=torch.empty((8, 6), dtype=torch.float16, device=DEVICE))
    with pytest.raises(ValueError, match="must match"):
        copy(src, out=torch.empty((48,), dtype=torch.float32, device=DEVICE))
    with pytest.raises(ValueError, match="power of two"):
        copy(src, block=100)


def test_cost_by_hand():
    case = next(c for c in OP.cases["test"] if c.id == "N1000-bf16")
    flops, bytes_ = OP.cost(case)
    assert flops == 0.0
    assert bytes_ == 1000 * 2 * 2  # read 1000 bf16 + write 1000 bf16
    fp32 = next(c for c in OP.cases["full"] if c.dtype == "fp32")
    assert OP.cost(fp32)[1] == fp32.params["n"] * 4 * 2


def test_full_cases_stream_well_past_l2():
    # every timed shape moves at least 10x a 50 MB L2 and fits easily in 141 GB
    for case in OP.cases["full"] + OP.cases["quick"]:
        _, bytes_ = OP.cost(case)
        assert 500e6 <= bytes_ <= 20e9, case.id


_COMPILE = """
import json, re, torch
from kernels.copy import BLOCK, GPU_TILES, NUM_WARPS, _copy_kernel, _copy_tuned
from kernels.cubin_report import cubin_report
from kernels.testing import compile_for_gpu
src = torch.empty(0, dtype=torch.bfloat16)
rows = []
tiles = [(c.kwargs["BLOCK"], c.num_warps) for c in _copy_tuned.configs]
for block, warps in [(BLOCK, NUM_WARPS)] + tiles:
    k = compile_for_gpu(_copy_kernel, dict(src_ptr=src, dst_ptr=src, n_elements=2**29, SIZE_CLASS=30, BLOCK=block), warps)
    ptx = k.asm["ptx"]
    rows.append({"tile": [block, warps], "shared": k.metadata.shared, "v4_load": re.search(r"ld\\.global\\.L1::evict_first[.\\w:]*\\.v4\\.b32", ptx) is not None,
                 "v4_store_cs": "st.global.cs.v4.b32" in ptx, **cubin_report(k)})
print(json.dumps({"tiles": [list(t) for t in GPU_TILES], "configs": [list(t) for t in tiles], "rows": rows}))
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the tests above compile the kernel for real")
def test_compiles_for_h100_h200():
    # the fixed config and every autotune config lowered through Triton's NVIDIA backend for sm_90
    # without a GPU: 128-bit vector loads (evict-first) and streaming stores, no shared memory, no spills
    import json

    from kernels.testing import run_without_interpreter

    result = json.loads(run_without_interpreter(_COMPILE).splitlines()[-1])
    assert result["configs"] == result["tiles"] and len(result["rows"]) == 6
    for row in result["rows"]:
        assert row["shared"] == 0 and row["v4_load"] and row["v4_store_cs"], row
        assert row["stack_bytes"] == 0 and row["LDL"] == 0 and row["STL"] == 0, row


def test_the_gpu_path_autotunes_one_size_class_per_power_of_two():
    import kernels.copy as C

    assert C._copy_tuned.keys == ["SIZE_CLASS"] and C._copy_tuned.fn is C._copy_kernel
    assert (C.BLOCK, C.NUM_WARPS) in C.GPU_TILES
    assert C._grid({"n_elements": 10_000, "BLOCK": 4096}) == (3,)
