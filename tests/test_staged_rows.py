"""The ``staged`` group of the ``segments`` family: short rows that lie one
after another in memory (``(M, K)`` C-order, or the last axis of any C-order
array), copied by a block into shared memory with adjacent loads and folded
there a thread per row (:mod:`pyreduce.variants.segments`), in the simulator
and (on a GPU machine, ``NUMBA_ENABLE_CUDASIM=0``) on the GPU; warps of 64
lanes in the simulator only.

Every case checks that the planner chose the staged kernel (or, for rows that
are not one after another, that it did not) and compares the results exactly
with ``functools.reduce`` over each row or with NumPy: every row length the
group takes, row counts around the block's edge (a last block with one row, a
full one, one short of full), rows that start at odd element offsets, operators
that are not commutative (the affine composition, a product of 2x2 matrices
carried as a tuple accumulator whose element map reads the element's position),
``argmax``'s index-keyed tuples, ``initial=``, and every input dtype the group
takes (bfloat16 and float16 included).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from numpy_compare import check
from oracles import affine, affine_data
from pyreduce import batchplanner
from pyreduce.planner import Tuning
from pyreduce.spec import BatchSpec
from pyreduce.variants.segments import staged_words
from test_axes_mapped import keyed, lanes_oracle, same, ties
from test_segment_lanes import IDENTITY, fold_rows, matmul2, named_statistics_agree, shear

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

#: every row length the group takes
LENGTHS = [k for k in range(2, batchplanner.STAGED_MAX + 1) if k % 16]


@pytest.fixture
def backend(gpu_backend):
    """The backends that run these kernels: cuda (on a GPU machine) and sim."""
    return gpu_backend


def calls_on(backend, warp=32, block=64):
    if warp != 32 and backend != "sim":
        pytest.skip("warps of 64 lanes: the simulator's (numba-cuda's warps are 32)")
    return dict(backend=backend, tuning=Tuning(block_size=block, warp_size=warp))


def staged_plan(x, op, axis, options, **kwargs):
    """``(first pass's spec, result)``, the spec checked to be the staged group's."""
    e = pyreduce.explain(x, op, axis=axis, **options, **kwargs)
    spec = e.plan.spec
    assert spec.group == "staged" and spec.row == x.shape[axis], spec.label
    assert e.plan.parts == 1 and len(e.plan.schedule.steps) == 1
    return spec, e.result


@pytest.mark.parametrize("warp", [32, 64])
def test_every_length_and_row_count_in_order(backend, warp):
    """The affine composition (exact, in order) of every row: 1 row, one short
    of a thread's first rows, one short of a block's rows and one past them,
    with and without ``initial``."""
    options = calls_on(backend, warp)
    block = options["tuning"].block_size
    for K in LENGTHS:
        each = batchplanner.staged_rows_each(K, np.dtype(np.int64))
        for M in (1, block - 1, block * each - 1, block * each + 1):
            x = affine_data(M * K, seed=K * 131 + M).reshape(M, K)
            _, got = staged_plan(x, affine, 1, options, identity=IDENTITY)
            np.testing.assert_array_equal(got, fold_rows(affine, x), err_msg=f"K={K} M={M}")
        init = int(affine_data(1, seed=K)[0])
        got = pyreduce.reduce(x, affine, IDENTITY, axis=1, initial=init, **options)
        np.testing.assert_array_equal(got, fold_rows(affine, x, initial=init))


@pytest.mark.parametrize("K", [3, 8, 15, 27])
def test_views_that_start_anywhere(backend, K):
    """Device views whose first row starts 1, 2 or 3 elements into the buffer
    (every alignment), read in place; and the last axis of a 3-D array."""
    from numpy_compare import to_device

    options = calls_on(backend)
    flat = affine_data(70 * K + 3, seed=K)
    d = to_device(flat)
    for start in (1, 2, 3, 0):
        rows = flat[start:start + 70 * K].reshape(70, K)
        view = d[start:start + 70 * K].reshape(70, K)
        _, got = staged_plan(view, affine, 1, options, identity=IDENTITY)
        got = got.get() if hasattr(got, "get") else got.copy_to_host()
        np.testing.assert_array_equal(got, fold_rows(affine, rows))
    cube = affine_data(3 * 5 * K, seed=K + 1).reshape(3, 5, K)
    _, got = staged_plan(cube, affine, 2, options, identity=IDENTITY)
    np.testing.assert_array_equal(got, fold_rows(affine, cube.reshape(15, K)).reshape(3, 5))


@pytest.mark.parametrize("warp", [32, 64])
@pytest.mark.parametrize("K", [3, 7, 12])
def test_matrix_product_tuple(backend, warp, K):
    """A tuple accumulator whose op is not commutative and whose map reads the
    element's position in its row."""
    x = np.random.default_rng(K).integers(0, 1000, (70, K))
    options = calls_on(backend, warp)
    dtypes = (np.dtype(np.int64),) * 4
    spec, got = staged_plan(x, matmul2, 1, options, map=shear)
    assert spec.mapped
    same(got, lanes_oracle(x, matmul2, shear, 1, dtypes))
    init = (np.int64(2), np.int64(3), np.int64(5), np.int64(7))
    got = pyreduce.reduce(x, matmul2, map=shear, axis=1, initial=init, **options)
    same(got, lanes_oracle(x, matmul2, shear, 1, dtypes, initial=init))


@pytest.mark.parametrize("dtype", [np.int8, np.float16, ml_dtypes.bfloat16, np.float32,
                                   np.complex64])
@pytest.mark.parametrize("K", [3, 6, 13])
def test_first_max_pairs(backend, dtype, K):
    """``(value, index)`` of the first maximum (ties everywhere): the index is
    ``np.argmax`` of the row."""
    x = ties((80, K), dtype=np.float32, seed=K)
    x = (x + 1j * ties((80, K), seed=K + 1)).astype(dtype) if np.dtype(dtype).kind == "c" \
        else x.astype(dtype)
    op, fmap, dtypes, _ = keyed(x.dtype)
    _, got = staged_plan(x, op, 1, calls_on(backend), map=fmap)
    same(got, lanes_oracle(x, op, fmap, 1, dtypes))
    if np.dtype(dtype).kind != "c":
        np.testing.assert_array_equal(got[1], np.argmax(x.astype(np.float32), axis=1))


@pytest.mark.parametrize("K", [5, 9])
def test_named_statistics(backend, K):
    """``argmax``, ``argmin``, ``mean`` and ``var`` of staged rows."""
    data = np.random.default_rng(K).integers(-9, 9, (90, K))
    named_statistics_agree(data, calls_on(backend), ddof=1)


@pytest.mark.parametrize("dtype,op,acc", [
    (np.int8, "add", None), (np.int8, "max", None), (np.uint16, "add", np.uint16),
    (np.float16, "add", None), (ml_dtypes.bfloat16, "max", None), (np.float32, "add", None),
    (np.float64, "mul", None), (np.complex64, "add", None), (np.complex128, "add", None),
    (np.int64, "min", None),
])
@pytest.mark.parametrize("K", [4, 15, 31])
def test_dtypes(backend, dtype, op, acc, K):
    """Built-in operators on short rows of every kind of input the group takes
    (NumPy's accumulators and wrapping)."""
    rng = np.random.default_rng(K)
    data = rng.integers(-60, 60, (70, K))
    x = (data + 1j * rng.integers(-3, 4, data.shape)).astype(dtype) \
        if np.dtype(dtype).kind == "c" else data.astype(dtype)
    options = calls_on(backend)
    staged_plan(x, op, 1, options, dtype=acc)

    def body(lib):
        return lib.reduce(lib.asarray(x), op, axis=1, dtype=acc)

    check(body, backend, False, options=options)


def test_which_rows_are_staged(backend):
    """Rows one after another, 2 to STAGED_MAX long, of any type but bool,
    except rows of 16: staged. Rows apart (a device view of every other
    column), reversed or of columns, a row of one element, longer rows, bool
    rows and rows of 16: not."""
    from numpy_compare import to_device

    options = calls_on(backend)

    def group(x, axis=1):
        return pyreduce.explain(x, "add", axis=axis, **options).plan.spec.group

    for K in (2, 4, 15, 17, 24, batchplanner.STAGED_MAX):
        assert group(np.zeros((50, K))) == group(np.zeros((50, K), np.int8)) == "staged"
    assert group(np.zeros((50, 1))) == "thread"
    assert group(np.zeros((50, 16))) != "staged"
    assert group(np.zeros((50, batchplanner.STAGED_MAX + 1))) != "staged"
    assert group(np.zeros((50, 5), bool)) != "staged"
    d = to_device(np.zeros((50, 10)))
    assert group(d[:, :5]) != "staged"      # rows 10 apart
    assert group(d[:, ::-1]) != "staged"    # reversed
    assert group(d, axis=0) != "staged"     # columns


@pytest.mark.parametrize("warp", [32, 64])
def test_shared_memory_and_spec_bounds(warp):
    """The tile stays within its budget (wider elements, fewer rows a block;
    rows of which one warp's would pass it are not staged), and the spec
    refuses what the kernel cannot do."""
    from pyreduce.axes import describe

    device = batchplanner.DeviceInfo("gpu-like", ("g",), 132, 2048, 32, warp, 256,
                                     vector_bytes=16)
    for dtype in (np.float32, np.float64, np.complex128):
        for K in LENGTHS:
            x = np.zeros((1 << 20, K), dtype)
            d = describe(x.shape, x.strides, x.itemsize, (1,))
            plan = batchplanner.plan_strided(d, x.dtype, x.dtype, ("builtin", "add"), device)
            spec = plan.spec
            if staged_words(warp, K) * x.itemsize > batchplanner.STAGED_BYTES:
                assert spec.group != "staged", spec.label  # complex128, warps of 64
                continue
            assert spec.group == "staged" and spec.row == K
            each = spec.items
            assert each == batchplanner.staged_rows_each(K, x.dtype)
            assert each * K * x.itemsize <= max(K * x.itemsize, 64)
            assert staged_words(spec.block, K, each) * x.itemsize <= batchplanner.STAGED_BYTES
            assert spec.block >= 32 and plan.grid * spec.block * each >= x.shape[0]
            assert (plan.grid - 1) * spec.block * each < x.shape[0]
    f4 = np.dtype(np.float32)
    with pytest.raises(ValueError, match="staged"):
        BatchSpec("segments", f4, f4, "k", group="staged", row=1)
    with pytest.raises(ValueError, match="staged"):
        BatchSpec("segments", f4, f4, "k", group="staged", row=5, unit=False)
    with pytest.raises(ValueError, match="row="):
        BatchSpec("segments", f4, f4, "k", group="warp", row=5)
    with pytest.raises(ValueError, match="row="):
        BatchSpec("segments", f4, f4, "k", group="staged")


@settings(max_examples=12, deadline=None)
@given(K=st.integers(2, batchplanner.STAGED_MAX), M=st.integers(1, 300),
       start=st.integers(0, 3), warp=st.sampled_from([32, 64]), on_device=st.booleans(),
       with_initial=st.booleans())
def test_property_rows(backend, K, M, start, warp, on_device, with_initial):
    """Rows of any length the group takes, any count, from any start, against
    NumPy's reference fold."""
    options = calls_on(backend, warp) if warp == 32 or backend == "sim" else None
    if options is None:
        return
    base = affine_data(M * K + start, seed=K * M)
    rows = base[start:].reshape(M, K)
    init = int(affine_data(1, seed=M)[0]) if with_initial else None

    def body(lib):
        return lib.reduce(lib.asarray(rows), affine, IDENTITY, axis=1, initial=init)

    check(body, backend, on_device, options=options)
