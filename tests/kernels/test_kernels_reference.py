"""Every kernel of the registry against its PyTorch reference, on every "test" case of its ``OP``
(odd shapes, every dtype it supports, per-dtype tolerances): the launcher fills a NaN-poisoned
``out=`` buffer and returns it, and any mismatch is reported readably (how many elements differ,
where the first ones are, NaN and inf apart). Triton interpreter on the CPU, the GPU when present."""

from __future__ import annotations

import pytest
import torch

from kernels.registry import KERNEL_NAMES, load_op
from kernels.testing import compare, poisoned, seeded_generator

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

#: (kernel, case) for every test case of every op the GPU (or the interpreter) supports
CASES = [(name, case) for name in KERNEL_NAMES for case in load_op(name).cases["test"]
         if load_op(name).supported is None or load_op(name).supported(case, None)]


def test_every_kernel_has_test_cases_and_an_output_shape():
    for name in KERNEL_NAMES:
        op = load_op(name)
        assert op.name == name and op.cases["test"] and op.output is not None, name
        assert {c.dtype for c in op.cases["test"]} <= set(op.tolerance), name
    assert {name for name, _ in CASES} == set(KERNEL_NAMES)


@pytest.mark.parametrize(("name", "case"), CASES, ids=[f"{n}-{c.id}" for n, c in CASES])
def test_kernel_matches_reference(name, case):
    op = load_op(name)
    inputs = op.make_inputs(case, DEVICE, seeded_generator(f"{name}:{case.id}"))
    shape, dtype = op.output(case, inputs)
    out = poisoned(shape, dtype, DEVICE)
    assert op.run(**inputs, out=out) is out
    c = compare(out, op.reference(**inputs), op.tolerance[case.dtype])
    assert c.ok, f"{name} {case.id}: {c.message}"


def test_an_unwritten_or_wrong_element_fails_readably():
    """What the check above reports: a poisoned element a kernel forgot (NaN, counted, located), and
    values off by more than the tolerance (how many, where)."""
    ref = torch.arange(12, dtype=torch.float32).reshape(3, 4) + 1
    out = poisoned((3, 4), torch.float32, "cpu")
    out[:2] = ref[:2]
    c = compare(out, ref, 1e-3)
    assert not c.ok and c.message.startswith("4 NaN and 0 inf of 12 elements (first at [[2, 0], [2, 1]")
    out = ref.clone()
    out[1, 2] += 5.0
    c = compare(out, ref, 1e-3)
    assert not c.ok and "1 of 12 elements differ" in c.message and "[[1, 2]]" in c.message
    assert compare(ref.clone(), ref, 0.0).ok  # exact kernels (copy) at tolerance 0
