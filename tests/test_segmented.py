"""``pyreduce.segmented_reduce`` against a reference that folds each segment
``x[o[i]:o[i+1]]`` with ``functools.reduce`` (NumPy's ``ufunc.reduce`` for the
built-in ops), CuPy's way (:mod:`numpy_compare`): one body, run with the
reference and with pyreduce on each backend, host and (GPU backends) device
inputs and offsets.

Segment lengths cover empty segments, segments of one element, lengths around
the warp (32) and the simulator's block tiles, and one or two segments long
enough to be cut into parts with a finishing pass; ``test_kernel_choice`` says
which lengths reach which kernel.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from numpy_compare import check, numpy_pyreduce, to_device
from oracles import P, affine, affine_data, last_nonzero
from pyreduce import batchplanner
from pyreduce.planner import DeviceInfo, Tuning

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

#: the affine map x -> 1*x + 0: the identity of ``affine``
IDENTITY = 1 * P

LENGTHS = {
    "singles": [1] * 70,
    "mixed": [0, 3, 0, 1, 2, 70, 0, 65, 4, 5],
    "warp_edges": [31, 32, 33, 64, 65, 129, 2],
    "all_empty": [0, 0, 0],
    "none": [],
    "long_and_empty": [2100, 0, 1200],
}


def offsets_of(lengths, start=0) -> np.ndarray:
    return np.concatenate([[start], start + np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)


@pytest.mark.parametrize("name", list(LENGTHS))
@numpy_pyreduce()
def test_in_order(lib, name):
    """The affine composition in every segment (any element dropped, moved or
    repeated shows), with and without ``initial`` (combined once, on the left;
    also the result of an empty segment)."""
    lengths = LENGTHS[name]
    off = offsets_of(lengths, start=3)
    data = affine_data(int(off[-1]) + 5, seed=len(lengths))
    x, o = lib.asarray(data), lib.asarray(off)
    init = int(affine_data(1, seed=2)[0])
    return (lib.segmented_reduce(x, o, affine, IDENTITY),
            lib.segmented_reduce(x, o, affine, initial=init))


@pytest.mark.parametrize("name", ["mixed", "warp_edges", "long_and_empty"])
@numpy_pyreduce()
def test_builtin_ops(lib, name):
    """Sums (float, and int8 widened to int64), and max, which has no identity:
    an empty segment raises ValueError, as ``np.max`` of an empty array does."""
    off = offsets_of(LENGTHS[name])
    rng = np.random.default_rng(4)
    f = lib.asarray(rng.standard_normal(int(off[-1])))
    i8 = lib.asarray(rng.integers(-128, 128, int(off[-1])).astype(np.int8))
    o = lib.asarray(off)
    sums = (lib.segmented_reduce(f, o, "add"), lib.segmented_reduce(i8, o, "add", dtype=np.int64),
            lib.segmented_reduce(i8, o, "add"))
    return sums + (lib.segmented_reduce(f, o, "max"),)


@numpy_pyreduce()
def test_max_with_identity_and_strided_x(lib):
    """A strided, reversed ``x``; ``identity=`` gives empty segments a value."""
    off = offsets_of(LENGTHS["mixed"])
    data = np.random.default_rng(5).integers(-9, 9, 2 * int(off[-1]) + 1)
    x = lib.asarray(data)[::-2]
    return lib.segmented_reduce(x, lib.asarray(off), "max", identity=-100), \
        lib.segmented_reduce(x, lib.asarray(off), last_nonzero, 0)


@numpy_pyreduce()
def test_out(lib):
    off = offsets_of(LENGTHS["warp_edges"])
    x = lib.asarray(np.arange(int(off[-1]), dtype=np.int64))
    out = lib.empty(off.size - 1, np.int64)
    got = lib.segmented_reduce(x, lib.asarray(off), "add", out=out)
    return got is out, lib.tohost(out)


@pytest.mark.parametrize("offsets", [[0, 5, 3], [0, 11], [-1, 2], [2.0, 3.0], [[0, 1]], []])
@numpy_pyreduce()
def test_bad_offsets(lib, offsets):
    """Decreasing, out of range, not integers, not 1-D, no boundary at all."""
    x = lib.asarray(np.arange(10))
    return lib.segmented_reduce(x, np.asarray(offsets), "add")


def test_error_messages(backend):
    x = np.arange(10.0)
    before = x.copy()
    with pytest.raises(ValueError, match=r"must not decrease: offsets\[1\] = 5 > offsets\[2\] = 3"):
        pyreduce.segmented_reduce(x, np.array([0, 5, 3]), "add", backend=backend)
    with pytest.raises(ValueError, match=r"\[0, 10\]: offsets\[1\] = 11"):
        pyreduce.segmented_reduce(x, np.array([0, 11]), "add", backend=backend)
    with pytest.raises(ValueError, match="segment 1 is empty and op 'max' has no identity"):
        pyreduce.segmented_reduce(x, np.array([0, 4, 4, 10]), "max", backend=backend)
    with pytest.raises(ValueError, match="1-D x"):
        pyreduce.segmented_reduce(x.reshape(2, 5), np.array([0, 1]), "add", backend=backend)
    with pytest.raises(TypeError, match="integers"):
        pyreduce.segmented_reduce(x, np.array([0.0, 1.0]), "add", backend=backend)
    with pytest.raises(TypeError, match="expected an array"):
        pyreduce.segmented_reduce(x, "01", "add", backend=backend)
    # Python data is an array as NumPy makes it (docs/semantics.md#inputs)
    assert pyreduce.segmented_reduce(x, [0, 3], "add", backend=backend).tolist() == [3.0]
    assert np.array_equal(x, before)


def test_device_offsets(gpu_backend):
    """Device offsets are not read back: out-of-range ones are clamped into
    ``[0, len(x)]`` and an end below its start is an empty segment, so nothing
    outside ``x`` is read. Where an empty segment would have no value (max), they
    are read back and checked."""
    x = np.arange(1, 11, dtype=np.int64)
    clamped = to_device(np.array([-5, 3, 100, 50, 2], np.int64))
    got = pyreduce.segmented_reduce(x, clamped, "add", backend=gpu_backend)
    assert np.array_equal(got, [6, 49, 0, 0])  # [0,3), [3,10), [10,10), [10,10)
    with pytest.raises(ValueError, match="segment 1 is empty"):
        pyreduce.segmented_reduce(x, to_device(np.array([0, 4, 4, 10])), "max",
                                  backend=gpu_backend)
    with pytest.raises(TypeError, match="int32 or int64"):
        pyreduce.segmented_reduce(x, to_device(np.array([0, 4], np.uint8)), "add",
                                  backend=gpu_backend)
    small = to_device(np.array([0, 4, 10], np.int32))
    assert np.array_equal(pyreduce.segmented_reduce(x, small, "max", backend=gpu_backend), [4, 10])


def test_device_results(gpu_backend):
    x = to_device(np.arange(10, dtype=np.int64))
    got = pyreduce.segmented_reduce(x, np.array([0, 4, 10]), "add", backend=gpu_backend)
    assert type(got) is type(x) and got.shape == (2,)
    host = pyreduce.segmented_reduce(np.arange(10), np.array([0, 4, 10]), "add",
                                     device_result=True, backend=gpu_backend)
    assert not isinstance(host, np.ndarray) and host.shape == (2,)


# --------------------------------------------------------------------------
# Property test: any lengths


def _lengths_body(lib, lengths, start, with_initial):
    off = offsets_of(lengths, start)
    data = affine_data(int(off[-1]) + 2, seed=len(lengths) + start)
    init = int(affine_data(1, seed=3)[0]) if with_initial else None
    return lib.segmented_reduce(lib.asarray(data), lib.asarray(off), affine, IDENTITY,
                                initial=init)


_lengths = st.lists(st.one_of(st.integers(0, 3), st.integers(0, 300)), max_size=40)


@settings(max_examples=40)
@given(lengths=_lengths, start=st.integers(0, 2), with_initial=st.booleans())
def test_property_cpu(lengths, start, with_initial):
    check(_lengths_body, "cpu", False, lengths, start, with_initial)


@pytest.mark.sim
@settings(max_examples=8)
@given(lengths=st.lists(st.integers(0, 70), max_size=12), start=st.integers(0, 2),
       with_initial=st.booleans(), on_device=st.booleans())
def test_property_sim(lengths, start, with_initial, on_device):
    check(_lengths_body, "sim", on_device, lengths, start, with_initial)


# --------------------------------------------------------------------------
# Kernel choice (no kernels run)


GPU = DeviceInfo("h100-like", ("g",), 132, 2048, 32, 32, 256, vector_bytes=16)


@pytest.mark.parametrize("segments,size,group,parts", [
    (2**26, 1, "thread", 1),         # segments of one element
    (2**21, 32, "lanes8", 1),       # short segments: 8 lanes each, 4 per warp
    (2**21, 100, "warp", 1),
    (2**16, 1024, "warp", 1),        # enough segments for every resident warp
    (64, 2**20, "block", 33),        # few long ones: parts, then a finishing pass
    (5000, 2**14, "block", 1),
])
def test_kernel_choice(segments, size, group, parts):
    f4 = np.dtype(np.float32)
    plan = batchplanner.plan_segments(segments, segments * size, f4, f4, ("builtin", "add"), GPU,
                                      Tuning())
    spec = plan.spec
    assert (f"lanes{spec.lanes}" if spec.lanes else spec.group, plan.parts) == (group, parts)
    assert plan.spec.vector == 1 and plan.passes == (2 if parts > 1 else 1)
