"""Few kernels per program: a program reducing arrays of many sizes with one op
and dtype builds at most two kernels (the one-launch kernel for inputs that fit
the L2 cache, the two-pass kernel for larger ones, which also finishes its own
partials: :func:`pyreduce.planner.reads_partials`)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pyreduce
from oracles import last_nonzero
from pyreduce.driver import schedule
from pyreduce.dtypes import default_accumulator
from pyreduce.occupancy import SMLimits
from pyreduce.ops import as_monoid, sum_dtype
from pyreduce.planner import DeviceInfo, Tuning, make_plan

# GPUs as their backend describes them: SMs, L2 size, "auto" block
GPUS = {
    "H100": DeviceInfo("H100", ("cuda", 0, (9, 0)), 132, 2048, 32, 32, limits=SMLimits(),
                       vector_bytes=16, l2_bytes=50 << 20, auto_block=512),
    "H200": DeviceInfo("H200", ("cuda", 0, (9, 0)), 132, 2048, 32, 32, limits=SMLimits(),
                       vector_bytes=16, l2_bytes=60 << 20, auto_block=512),
}

#: the issue's program: 1e3, 1e4, ..., 1e8 elements, and sizes between
SIZES = sorted({10**k for k in range(3, 9)} | {2 * 10**7, 5 * 10**7, 3 * 10**5, 12_345_678})


def kernels_built(device, in_dtype, acc_dtype, op_key, sizes, extra_partials=0,
                  commutative=False, **tuning) -> set:
    """The kernel specs a program reducing each of ``sizes`` elements launches
    (``extra_partials``: 1 with an initial value; ``commutative``: the op's
    ``Monoid.commutative``)."""
    specs = set()
    for n in sizes:
        plan = make_plan(n, np.dtype(in_dtype), np.dtype(acc_dtype), op_key, device,
                         Tuning(**tuning), extra_partials, align=16, commutative=commutative)
        specs |= {step.spec for step in schedule(plan).steps}
    return specs


@pytest.mark.parametrize("gpu", sorted(GPUS))
@pytest.mark.parametrize("op", ["max", "min", "add", "mul", "user"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int64", "int8", "float16",
                                   "complex64"])
def test_a_size_sweep_builds_at_most_two_kernels(gpu, op, dtype):
    dt = np.dtype(dtype)
    if op in ("max", "min") and dt.kind == "c":
        return  # no order on complex numbers
    acc = sum_dtype(dt) if op in ("add", "mul") else default_accumulator(dt)
    monoid = as_monoid(last_nonzero if op == "user" else op, acc)
    specs = kernels_built(GPUS[gpu], dt, acc, monoid.key, SIZES,
                          commutative=monoid.commutative)
    assert 1 <= len(specs) <= 2, sorted(s.label for s in specs)


#: variants with a finishing pass whose tree does not depend on the pass
FINISHING = [name for name, v in pyreduce.variants.items()
             if v.layout != "single_pass" and not v.fixed_tree]


@pytest.mark.parametrize("variant", FINISHING)
def test_one_kernel_serves_both_passes(variant):
    specs = kernels_built(GPUS["H200"], "float32", "float32", ("builtin", "add"),
                          [10**6, 10**7], variant=variant)
    assert len(specs) == 1


def test_a_fixed_tree_is_one_kernel():
    """The fixed tree's last block runs the finishing pass's steps in the same
    kernel: one kernel for a size inside the L2 and one past it (a layout of
    its own), with or without an initial value."""
    for extra in (0, 1):
        specs = kernels_built(GPUS["H200"], "float32", "float32", ("builtin", "add"),
                              [10**6], variant="pairwise", extra_partials=extra)
        assert [s.finish for s in specs] == [False]
    specs = kernels_built(GPUS["H200"], "float32", "float32", ("builtin", "add"),
                          [10**6, 10**8], variant="pairwise")
    assert sorted(s.items for s in specs) == [4, 16] and not any(s.finish for s in specs)


def test_a_widening_sum_finishes_with_its_own_kernel():
    # int8 elements, int64 partials: the first pass cannot read its partials
    specs = kernels_built(GPUS["H200"], "int8", "int64", ("builtin", "add"), SIZES)
    assert sorted(s.finish for s in specs) == [False, True]


@pytest.mark.sim
@pytest.mark.parametrize("variant", ["warp_shuffle", "warp_shuffle_x2", "double_shared",
                                     "unrolled"])
@pytest.mark.parametrize("initial", [None, 5])
def test_the_shared_kernel_finishes_in_order(variant, initial):
    """On the simulator, across sizes: a non-commutative op gives what
    functools.reduce gives when the first pass's kernel also reduces the
    partials (vector loads over them included)."""
    rng = np.random.default_rng(len(variant))
    for n in (1, 63, 64 * 9 + 1, 5000):
        x = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 99, n)).astype(np.int64)
        want = functools.reduce(last_nonzero, x, initial) if initial is not None else \
            functools.reduce(last_nonzero, x)
        got = pyreduce.reduce(x, last_nonzero, backend="sim", variant=variant,
                              tuning=Tuning(block_size=64, items_per_thread=4, max_blocks=7),
                              initial=initial)
        assert got == want, (n, got, want)
