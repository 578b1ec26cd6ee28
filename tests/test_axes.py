"""``axis=`` reductions against NumPy, CuPy's way (:mod:`numpy_compare`): each test
body runs once with NumPy (``functools.reduce`` over the rows for user ops) and
once with pyreduce on each backend (``cpu``, ``sim``; ``cuda`` on a GPU), with
host and (GPU backends) device inputs, and the outcomes are compared: results,
their types, shapes and dtypes, or the exceptions raised.

Shapes cover 1-sized and 0-sized axes; views are transposed, strided, reversed
and broadcast; order-sensitive operators (:mod:`oracles`) check that each result
folds its elements in C order of the reduced axes. In the simulator each CUDA
thread is a Python thread, so arrays stay small while still crossing warp and
block edges (the simulator's blocks are 64 threads) and every kernel kind (a
thread, warp or block per row, rows cut into parts, columns, columns cut into
parts, a gather) is reached; ``test_kernel_kinds`` says which shapes reach which.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from numpy_compare import check, numpy_pyreduce, to_device
from oracles import P, affine, affine_data, first_nonzero, last_nonzero
from pyreduce import axes as axes_mod
from pyreduce import batchplanner
from pyreduce.planner import Tuning

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def ints(shape, seed=0, low=-50, high=50, dtype=np.int64):
    return np.random.default_rng(seed).integers(low, high, shape).astype(dtype)


def sparse(shape, seed=0):
    """Mostly zeros, for the non-zero selections."""
    rng = np.random.default_rng(seed)
    return (rng.integers(1, 9, shape) * (rng.random(shape) < 0.3)).astype(np.int64)


# --------------------------------------------------------------------------
# Named reductions: shapes, axes, keepdims


SHAPE_AXES = [
    ((7,), 0), ((7,), -1), ((7,), ()), ((3, 4), 0), ((3, 4), 1), ((3, 4), -2),
    ((3, 4), (0, 1)), ((3, 4), (1, -2)), ((1, 7), 0), ((7, 1), 1), ((1, 1), 0),
    ((0, 4), 1), ((0, 4), 0), ((4, 0), 1), ((4, 0), 0), ((2, 0, 3), (0, 2)),
    ((2, 3, 4), 1), ((2, 3, 4), (0, 2)), ((2, 3, 4), (-1, 0)), ((2, 1, 33), (0, 2)),
    ((5, 65), 1), ((65, 5), 0), ((2, 3, 4, 5), (1, 3)), ((2, 3, 4, 5), (0, 1, 2)),
    ((), None), ((), ()), ((), 0),
]


@pytest.mark.parametrize("shape,axis", SHAPE_AXES)
@pytest.mark.parametrize("keepdims", [False, True])
@numpy_pyreduce()
def test_sum_max(lib, shape, axis, keepdims):
    x = lib.asarray(ints(shape, seed=len(shape)).astype(np.float64))
    return (lib.sum(x, axis=axis, keepdims=keepdims),
            lib.max(x, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("name", ["prod", "min", "nanmax", "nanmin"])
@pytest.mark.parametrize("shape,axis", [((3, 40), 1), ((40, 3), 0), ((2, 3, 4), (0, 2)),
                                        ((3, 0), 0)])
@numpy_pyreduce()
def test_other_named(lib, name, shape, axis):
    rng = np.random.default_rng(1)
    data = rng.choice(np.array([1.0, -1.0, 2.0, 0.5, np.nan]), shape)
    return getattr(lib, name)(lib.asarray(data), axis=axis)


@pytest.mark.parametrize("dt,dtype", [(np.int8, None), (np.int8, np.int64), (np.uint8, None),
                                      (np.bool_, None), (np.int32, np.float64),
                                      (np.float32, np.float64)])
@numpy_pyreduce()
def test_sum_dtypes(lib, dt, dtype):
    """``dtype=`` is the accumulator: int8 data summed in int64 (also NumPy's
    default for sum), float32 in float64; the result has that dtype."""
    data = ints((6, 70), seed=3, low=0 if dt in (np.uint8, np.bool_) else -128, high=127)
    x = lib.asarray(data.astype(dt))
    return lib.sum(x, axis=1, dtype=dtype), lib.sum(x, axis=0, dtype=dtype)


@numpy_pyreduce()
def test_wrapping_accumulator(lib):
    """``reduce(x, "add")`` keeps the input's dtype: int8 wraps, like NumPy's
    ``np.add.reduce`` with ``dtype=int8``."""
    x = lib.asarray(np.full((3, 50), 100, np.int8))
    return lib.reduce(x, "add", axis=1, dtype=np.int8), lib.reduce(x, "add", axis=0)


# --------------------------------------------------------------------------
# Views of every kind, with an order-sensitive operator


VIEWS = {
    "c": lambda a: a,
    "transposed": lambda a: a.transpose((2, 0, 1)),
    "reversed": lambda a: a[::-1, :, ::-1],
    "strided": lambda a: a[:, ::2, 1::3],
    "sliced": lambda a: a[1:, 3:40, :],
}


@pytest.mark.parametrize("view,axis", [
    ("c", 1), ("c", (0, 2)), ("transposed", 0), ("transposed", (1, 2)), ("reversed", 2),
    ("reversed", (0, 1)), ("strided", 0), ("strided", (0, 2)), ("sliced", 1), ("sliced", 2),
])
@numpy_pyreduce()
def test_views_in_order(lib, view, axis):
    """The affine composition (associative, not commutative) over every view:
    any element dropped, repeated or reordered changes the result. ``(0, 2)``
    has no strided description: a gather on the device."""
    data = affine_data(3 * 41 * 7, seed=5).reshape(3, 41, 7)
    x = VIEWS[view](lib.asarray(data))
    return lib.reduce(x, affine, axis=axis)


@pytest.mark.parametrize("op,shape,axis", [
    (last_nonzero, (5, 200), 1), (first_nonzero, (200, 5), 0),
    (first_nonzero, (3, 150, 2), 1), (last_nonzero, (2, 3), ()),
])
@numpy_pyreduce()
def test_selections_in_order(lib, op, shape, axis):
    return lib.reduce(lib.asarray(sparse(shape, seed=7)), op, axis=axis)


def _broadcast_body(lib):
    x = np.broadcast_to(affine_data(50, seed=2), (3, 50))
    return lib.reduce(x, affine, axis=1), lib.reduce(x, affine, axis=0)


def test_broadcast_input(backend):
    """A stride-0 axis: every row reads the same elements, uploaded once (a host
    array: a device broadcast view would be a CuPy one)."""
    check(_broadcast_body, backend)


# --------------------------------------------------------------------------
# initial, identity, empty reductions, out=


@pytest.mark.parametrize("shape,axis", [((4, 90), 1), ((90, 4), 0), ((4, 0), 1),
                                        ((0, 4), 1), ((3, 2), ())])
@numpy_pyreduce()
def test_initial(lib, shape, axis):
    """``initial`` is combined once into every result, on the left (the affine
    map composed first), also where nothing is reduced."""
    data = affine_data(int(np.prod(shape)), seed=9).reshape(shape)
    x = lib.asarray(data)
    init = int(affine_data(1, seed=10)[0])
    return (lib.reduce(x, affine, axis=axis, initial=init),
            lib.sum(x % 1000, axis=axis, initial=5),
            lib.max(x, axis=axis, initial=-1))


@pytest.mark.parametrize("shape,axis", [((3, 0), 1), ((0, 0), 0), ((0, 3), 1)])
@numpy_pyreduce()
def test_empty_reductions(lib, shape, axis):
    """Reducing an empty axis gives the identity (sum) or raises (max, a user op
    without one), even where there are no outputs, as NumPy does; a user op
    with an identity gives it."""
    x = lib.asarray(np.zeros(shape, np.int64))
    assert lib.sum(x, axis=axis).shape == tuple(n for a, n in enumerate(shape) if a != axis)
    ident = lib.reduce(x, affine, 1 * P, axis=axis)
    return ident, lib.max(x, axis=axis)


@pytest.mark.parametrize("axis,keepdims", [(1, False), (0, True), ((0, 1), True)])
@numpy_pyreduce()
def test_out(lib, axis, keepdims):
    """``out=`` of the result's shape and dtype is written and returned."""
    x = lib.asarray(ints((5, 70), seed=11))
    shape = np.sum(np.zeros((5, 70)), axis=axis, keepdims=keepdims).shape
    out = lib.empty(shape, np.int64)
    got = lib.sum(x, axis=axis, keepdims=keepdims, out=out)
    return got is out, lib.tohost(out)


@numpy_pyreduce()
def test_out_of_wrong_shape(lib):
    x = lib.asarray(ints((5, 70), seed=11))
    return lib.sum(x, axis=1, out=lib.empty((70,), np.int64))


# --------------------------------------------------------------------------
# Axis errors: NumPy's types


@pytest.mark.parametrize("axis", [2, -3, (0, 0), (1, -1), 1.0, [0], (0, 1.5), True])
@numpy_pyreduce()
def test_bad_axis(lib, axis):
    return lib.sum(lib.asarray(np.ones((2, 3))), axis=axis)


def test_axis_error_is_numpys(backend):
    x = np.ones((2, 3))
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
        pyreduce.sum(x, axis=2, backend=backend)
    with pytest.raises(ValueError, match="duplicate value in 'axis'"):
        pyreduce.max(x, axis=(0, -2), backend=backend)
    with pytest.raises(IndexError):  # AxisError is an IndexError too
        pyreduce.reduce(x, affine, axis=(0, 5), backend=backend)


# --------------------------------------------------------------------------
# Property test: any shape, axes, view


@st.composite
def cases(draw, max_side):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, max_side]), min_size=ndim,
                                max_size=ndim)))
    perm = draw(st.permutations(range(ndim)))
    steps = tuple(draw(st.sampled_from([1, -1, 2])) for _ in range(ndim))
    kind = draw(st.sampled_from(["all", "subset", "int", "none"]))
    if kind == "int":
        axis = draw(st.integers(-ndim, ndim - 1))
    elif kind == "none":
        axis = None
    else:
        chosen = draw(st.lists(st.integers(0, ndim - 1), unique=True))
        axis = tuple(a - ndim if draw(st.booleans()) else a for a in chosen)
    return shape, tuple(perm), steps, axis, draw(st.booleans()), draw(st.booleans())


def _property_body(lib, shape, perm, steps, axis, keepdims, with_initial):
    big = tuple(n * abs(s) for n, s in zip(shape, steps))
    data = affine_data(int(np.prod(big)), seed=sum(big)).reshape(big)
    x = lib.asarray(data)[tuple(slice(None, None, s) for s in steps)].transpose(perm)
    init = int(affine_data(1, seed=1)[0]) if with_initial else None
    ident = None if with_initial else 1 * P
    return lib.reduce(x, affine, ident, axis=axis, keepdims=keepdims, initial=init)


@settings(max_examples=60)
@given(case=cases(40))
def test_property_cpu(case):
    check(_property_body, "cpu", False, *case)


@pytest.mark.sim
@settings(max_examples=12)
@given(case=cases(9), on_device=st.booleans())
def test_property_sim(case, on_device):
    check(_property_body, "sim", on_device, *case)


# --------------------------------------------------------------------------
# Where results go


def test_device_results(gpu_backend):
    """A device input's result is a device array of its library, of the
    result's shape; ``device_result=True`` puts a host input's there too; a
    device ``out=`` is written in place; a reduction over every axis follows the
    input as one without ``axis=`` does (``docs/semantics.md``)."""
    data = ints((4, 50), seed=4)
    d = to_device(data)
    got = pyreduce.sum(d, axis=1, backend=gpu_backend)
    assert type(got) is type(d) and got.shape == (4,)
    assert np.array_equal(np.asarray(got.copy_to_host() if hasattr(got, "copy_to_host")
                                     else got.get()), data.sum(axis=1))
    kept = pyreduce.sum(data, axis=0, keepdims=True, device_result=True, backend=gpu_backend)
    assert kept.shape == (1, 50) and not isinstance(kept, np.ndarray)
    out = to_device(np.zeros(50, np.int64))
    assert pyreduce.sum(d, axis=0, out=out, backend=gpu_backend) is out
    assert np.array_equal(_host(out), data.sum(axis=0))
    whole = pyreduce.sum(d, axis=(0, 1), backend=gpu_backend)
    if hasattr(d, "get"):  # CuPy (on a GPU): a 0-d CuPy array, as CuPy's own sum gives
        assert type(whole) is type(d) and whole.shape == () and int(whole.get()) == data.sum()
    else:  # a Numba device array (the simulator's): a NumPy scalar, as Numba's Reduce
        assert isinstance(whole, np.int64) and whole == data.sum()
    full = pyreduce.sum(d, axis=None, keepdims=True, backend=gpu_backend)
    assert full.shape == (1, 1) and int(_host(full)[0, 0]) == data.sum()
    cube = to_device(ints((2, 5, 10), seed=5))
    transposed_out = to_device(np.zeros((10, 5), np.int64)).T  # (5, 10), not C-contiguous
    with pytest.raises(ValueError, match="C-contiguous"):
        pyreduce.sum(cube, axis=0, out=transposed_out, backend=gpu_backend)
    with pytest.raises(ValueError, match="C-contiguous"):
        pyreduce.sum(d, axis=0, out=to_device(np.zeros(100, np.int64))[::2],
                     backend=gpu_backend)


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else a.get()


def test_cpu_backend_refuses_device_results():
    x = np.ones((3, 4))
    with pytest.raises(ValueError, match="needs a GPU backend"):
        pyreduce.sum(x, axis=0, device_result=True, backend="cpu")


def test_out_dtype_must_match(backend):
    """Unlike NumPy, which casts into ``out``, the result's dtype is checked."""
    with pytest.raises(TypeError, match="dtype"):
        pyreduce.sum(np.ones((3, 4)), axis=0, out=np.empty(4, np.float32), backend=backend)


def test_input_untouched(backend):
    data = affine_data(3 * 70, seed=8).reshape(3, 70)
    before = data.copy()
    pyreduce.reduce(data[:, ::-1], affine, axis=0, backend=backend)
    pyreduce.reduce(data.T, affine, axis=1, initial=5, backend=backend)
    assert np.array_equal(data, before)


def test_variant_applies_to_full_reductions_only(gpu_backend):
    with pytest.raises(ValueError, match="variant="):
        pyreduce.sum(np.ones((3, 4)), axis=0, variant="naive", backend=gpu_backend)


# --------------------------------------------------------------------------
# Layouts and kernel choices (no kernels run)


def test_describe_matches_numpy():
    """The strided description addresses exactly the rows NumPy's transpose and
    reshape give, for every view and axis subset."""
    base = np.arange(4 * 5 * 6).reshape(4, 5, 6)
    for view in list(VIEWS.values()) + [lambda a: np.broadcast_to(a[:1], (3, 5, 6))]:
        x = view(base)
        for r in range(1, x.ndim):
            for axis in itertools.combinations(range(x.ndim), r):
                d = axes_mod.describe(x.shape, x.strides, x.itemsize, axis)
                if d is None:
                    continue
                kept = [a for a in range(x.ndim) if a not in axis]
                rows = x.transpose(kept + list(axis)).reshape(d.M, d.K)
                window = axes_mod.span_view(x, d.off, d.span)
                assert np.array_equal(window[d.offsets()], rows), (x.strides, axis)


def test_describe_none_only_without_a_view():
    x = np.zeros((4, 5, 6))
    assert axes_mod.describe(x.shape, x.strides, 8, (0, 2)) is None       # two reduced runs
    y = np.zeros((2, 3, 4, 5))[:, :, ::2, :]
    assert axes_mod.describe(y.shape, y.strides, 8, (1,)) is None          # three kept runs
    assert axes_mod.describe(y.shape, y.strides, 8, (2,)) is not None


SIM_DEVICE = batchplanner.DeviceInfo("sim-like", ("t",), 2, 64, 1, 32, 64, vector_bytes=16)
GPU_DEVICE = batchplanner.DeviceInfo("h100-like", ("g",), 132, 2048, 32, 32, 256, vector_bytes=16)


@pytest.mark.parametrize("device,shape,axis,kind,group,parts", [
    (SIM_DEVICE, (3, 50, 40), 2, "rows", "lanes8", 1),   # 8 lanes of 8 items
    (SIM_DEVICE, (3, 50, 9), 2, "rows", "staged", 1),    # rows one after another
    (SIM_DEVICE, (3, 20, 100), 2, "rows", "lanes16", 1),
    (SIM_DEVICE, (3, 20, 200), 2, "rows", "warp", 1),
    (SIM_DEVICE, (1, 600), 1, "rows", "block", 3),       # tiles of 256: 3 parts
    (SIM_DEVICE, (300, 3), 1, "rows", "staged", 1),
    (SIM_DEVICE, (50, 40), 0, "columns", "block", 4),
    (SIM_DEVICE, (9, 70), 0, "columns", "block", 3),     # parts of 3 rows
    (GPU_DEVICE, (2**14, 2**14), 1, "rows", "block", 1),
    (GPU_DEVICE, (2**14, 2**14), 0, "columns", "block", 17),  # 272 blocks: 2 an SM
    (GPU_DEVICE, (2**20, 100), 1, "rows", "lanes16", 1),  # 8 items a lane from 16
    (GPU_DEVICE, (2**20, 300), 1, "rows", "warp", 1),
    (GPU_DEVICE, (2**24, 16), 1, "rows", "lanes2", 1),   # the tall-skinny case
    (GPU_DEVICE, (2**20, 32), 1, "rows", "lanes4", 1),   # longer than staged rows
    (GPU_DEVICE, (2**20, 64), 1, "rows", "lanes8", 1),
    (GPU_DEVICE, (2**20, 65), 1, "rows", "lanes16", 1),
    (GPU_DEVICE, (2**20, 9), 1, "rows", "staged", 1),
    (GPU_DEVICE, (2**20, 5), 1, "rows", "staged", 1),
    (GPU_DEVICE, (2**20, 4), 1, "rows", "staged", 1),
    (GPU_DEVICE, (2**20, 24), 1, "rows", "staged", 1),
    (GPU_DEVICE, (2**20, 31), 1, "rows", "staged", 1),
    (GPU_DEVICE, (2**20, 15), 1, "rows", "staged", 1),
    (GPU_DEVICE, (2**20, 16), 1, "rows", "lanes2", 1),
    (GPU_DEVICE, (4, 2**26), 1, "rows", "block", 525),
    (GPU_DEVICE, (2**17, 2**17), 1, "rows", "block", 1),      # 2**34 elements
])
def test_kernel_kinds(device, shape, axis, kind, group, parts):
    x = np.broadcast_to(np.float32(0), shape)  # strides: the planner sees C strides
    strides = tuple(4 * int(np.prod(shape[a + 1:])) for a in range(len(shape)))
    d = axes_mod.describe(shape, strides, 4, (axis,))
    plan = batchplanner.plan_strided(d, x.dtype, x.dtype, ("builtin", "add"), device, Tuning(),
                                     align=16)
    spec = plan.spec
    chosen = f"lanes{spec.lanes}" if spec.group == "lanes" else spec.group
    assert (plan.kind, chosen if kind == "rows" else "block", plan.parts) == (kind, group, parts)
    if plan.spec.unit and plan.kind == "rows" and group not in ("thread", "staged"):
        # aligned rows of float32: 16-byte loads (rows of 9 or 65: scalar)
        assert plan.spec.vector == (4 if shape[-1] % 4 == 0 else 1)
    assert plan.grid < 2**31


@pytest.mark.parametrize("shape,fields,parts", [
    ((4096, 4096), 1, 66),        # 4 tiles of 1024 columns: 264 blocks, 2 an SM
    ((16384, 16384), 1, 17),      # 16 tiles: 272 blocks
    ((16384, 16384), 4, 32),      # var's summaries: parts of at most HEAVY_ROWS rows
    ((4096, 4096), 4, 66),        # parts short enough already
    ((16384, 16384), 2, 17),      # mean's (count, sum), argmax's (value, index): as a sum
    ((2**20, 32), 1, 2110),       # blocks of a warp: a quarter of the threads, in blocks
    ((2**24, 64), 4, 4224),       # heavy and long: as many parts as blocks stay resident
    ((1024, 65536), 1, 5),        # 64 tiles
])
def test_split_columns_aim_at_a_quarter_of_the_threads(shape, fields, parts):
    """A split columns pass aims at a quarter of the threads the GPU holds (two
    blocks of 256 threads an SM, at least two blocks an SM), since each thread
    keeps rows of loads in flight; an accumulator of more than two fields (var)
    is cut into parts of at most ``HEAVY_ROWS`` rows, up to every block
    resident. ``max_blocks`` overrides both."""
    acc = np.dtype([(f"f{i}", np.float64) for i in range(fields)]) if fields > 1 else \
        np.dtype(np.float32)
    d = axes_mod.describe(shape, (4 * shape[1], 4), 4, (0,))

    def plan(tuning):
        return batchplanner.plan_strided(d, np.dtype(np.float32), acc, ("builtin", "add"),
                                         GPU_DEVICE, tuning, align=16, mapped=fields > 1)

    assert plan(Tuning()).parts == parts
    forced = plan(Tuning(max_blocks=2112))
    tiles = -(-shape[1] // (forced.spec.block * forced.spec.items))
    assert forced.parts == batchplanner._whole_parts(shape[0], min(-(-2112 // tiles),
                                                                    -(-shape[0] // 4)))


def test_a_warp_a_row_keeps_lane_accumulators_for_commutative_ops_only():
    """Rows a warp reduces each: a commutative op's lanes keep their own
    accumulators across the row's tiles (one shuffle reduction a row); an op
    not known to commute keeps the ordered fold, a shuffle reduction a tile."""
    d = axes_mod.describe((2**20, 300), (1200, 4), 4, (1,))
    for commutative in (True, False):
        plan = batchplanner.plan_strided(d, np.dtype(np.float32), np.dtype(np.float32),
                                         ("builtin", "add"), GPU_DEVICE, Tuning(), align=16,
                                         commutative=commutative)
        assert plan.spec.group == "warp" and plan.spec.lane_accs == commutative
        assert ("rows_warp_accs" in plan.spec.label) == commutative
    d = axes_mod.describe((4096, 16384), (65536, 4), 4, (1,))
    for commutative in (True, False):  # a block a row
        plan = batchplanner.plan_strided(d, np.dtype(np.float32), np.dtype(np.float32),
                                         ("builtin", "add"), GPU_DEVICE, Tuning(), align=16,
                                         commutative=commutative)
        assert plan.spec.group == "block" and plan.spec.lane_accs == commutative
    with pytest.raises(ValueError, match="lane_accs applies to the first pass of a warp"):
        dataclasses.replace(plan.spec, group="thread", lane_accs=True)
    with pytest.raises(ValueError, match="lane_accs applies to the first pass of a warp"):
        dataclasses.replace(plan.spec, finish=True, vector=1, lane_accs=True)


@pytest.mark.parametrize("K", [1, 31, 64, 127, 128, 129, 200, 256, 300, 383, 385])
def test_lane_accumulators_along_rows(gpu_backend, K):
    """Rows of a warp each, of every length around the tile edges (a warp's
    tile is 32 x 4 float32 in the simulator, 32 x 8 of float64), reduced with
    lane accumulators where the op commutes and in order where it does not."""
    rng = np.random.default_rng(K)
    x = rng.standard_normal((40, K)).astype(np.float32)
    x[3, K // 2] = x[3].max() + 1  # a row's maximum, in the middle of it
    on = {"backend": gpu_backend}
    np.testing.assert_allclose(pyreduce.sum(x, axis=1, **on), x.sum(1, dtype=np.float64),
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(pyreduce.mean(x, axis=1, **on), x.mean(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pyreduce.var(x, axis=1, **on), x.var(1), rtol=1e-4, atol=1e-5)
    assert np.array_equal(pyreduce.max(x, axis=1, **on), x.max(1))
    ties = np.round(x)  # many equal values: the first index of the largest
    assert np.array_equal(pyreduce.argmax(ties, axis=1, **on), ties.argmax(1))
    y = affine_data(40 * K).reshape(40, K)
    want = [functools.reduce(affine, row) for row in y]
    assert pyreduce.reduce(y, affine, axis=1, **on).tolist() == want


def test_lane_accumulators_load_more_items_a_lane():
    """A scalar accumulator's lanes that keep their own accumulators load two
    16-byte vectors of 4-byte elements a tile in a warp a row, four in a
    block; the ordered fold, element loads and 8-byte elements keep one."""
    def spec(shape, dtype=np.float32, commutative=True, pitch=None, **tuning):
        dt = np.dtype(dtype)
        d = axes_mod.describe(shape, ((pitch or shape[1]) * dt.itemsize, dt.itemsize),
                              dt.itemsize, (1,))
        return batchplanner.plan_strided(d, dt, dt, ("builtin", "add"), GPU_DEVICE,
                                         Tuning(**tuning), align=16,
                                         commutative=commutative).spec

    rows, square = (2**17, 300), (16384, 16384)
    assert (spec(rows).group, spec(rows).items, spec(rows).vector) == ("warp", 8, 4)
    assert (spec(square).group, spec(square).items) == ("block", 16)
    assert spec(rows, commutative=False).items == 4
    assert spec(square, commutative=False).items == 4
    assert spec((2**17, 301), pitch=303).items == 4  # unaligned rows: element loads
    assert spec(rows, np.float64).items == spec(rows, np.float64, commutative=False).items
    assert spec(square, items_per_thread=4).items == 4


@pytest.mark.parametrize("K", [65, 66, 97, 127, 129, 131, 257, 261, 301, 387])
def test_lane_accumulators_along_aligned_rows_of_any_length(gpu_backend, K):
    """Rows of a wider device array whose row pitch keeps them 16 bytes
    aligned while their length is no multiple of 4: the lanes read the tail
    after the last full tile in vectors, and the last ``K % 4`` elements one at
    a time, in the lane whose vector they would begin."""
    from numba import cuda

    rng = np.random.default_rng(K)
    pitch = K + (-K) % 4 + 4
    wide = rng.standard_normal((24, pitch)).astype(np.float32)
    wide[:, K:] = np.nan  # past each row's end: any read of it shows
    wide[5, K - 1] = 50.0  # a row's maximum at its last element
    x = wide[:, :K]
    d = cuda.to_device(wide)[:, :K]
    on = {"backend": gpu_backend}
    np.testing.assert_allclose(pyreduce.sum(d, axis=1, **on).copy_to_host(),
                               x.sum(1, dtype=np.float64), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(pyreduce.mean(d, axis=1, **on).copy_to_host(), x.mean(1),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pyreduce.var(d, axis=1, **on).copy_to_host(), x.var(1),
                               rtol=1e-4, atol=1e-5)
    assert np.array_equal(pyreduce.max(d, axis=1, **on).copy_to_host(), x.max(1))
    assert np.array_equal(pyreduce.argmax(d, axis=1, **on).copy_to_host(), x.argmax(1))
    # a warp a row on any device: rows of at most two warp tiles (32 x 4, or
    # 32 x 8 past 256); rows shorter than a tile are all tail, which only the
    # first lanes reach
    tuned = dict(on, tuning=Tuning(items_per_thread=4 if K <= 256 else 8))
    plan = pyreduce.explain(d, "add", axis=1, **tuned).plan
    assert plan.spec.lane_accs and plan.spec.vector == 4, plan.spec.label
    np.testing.assert_allclose(pyreduce.sum(d, axis=1, **tuned).copy_to_host(),
                               x.sum(1, dtype=np.float64), rtol=1e-5, atol=1e-4)
    assert np.array_equal(pyreduce.max(d, axis=1, **tuned).copy_to_host(), x.max(1))
    assert np.array_equal(pyreduce.argmax(d, axis=1, **tuned).copy_to_host(), x.argmax(1))


@pytest.mark.parametrize("K", [4096, 4097, 4100, 4103, 6001])
def test_lane_accumulators_where_a_block_reduces_a_row(gpu_backend, K):
    """Long rows a block (or the blocks of a split row) reduces: each lane
    keeps its accumulator across the tiles it reads where the op commutes
    (rows 16 bytes aligned whatever their length, in a wider device array),
    the ordered fold where it does not."""
    from numba import cuda

    rng = np.random.default_rng(K)
    pitch = K + (-K) % 4 + 4
    wide = rng.standard_normal((3, pitch)).astype(np.float32)
    wide[:, K:] = np.nan  # past each row's end: any read of it shows
    wide[1, K - 1] = 50.0
    x = wide[:, :K]
    d = cuda.to_device(wide)[:, :K]
    on = {"backend": gpu_backend}
    plan = pyreduce.explain(d, "add", axis=1, **on).plan
    assert plan.spec.group == "block" and plan.spec.lane_accs, plan.spec.label
    assert plan.spec.vector == 4, plan.spec.label
    np.testing.assert_allclose(pyreduce.sum(d, axis=1, **on).copy_to_host(),
                               x.sum(1, dtype=np.float64), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(pyreduce.mean(d, axis=1, **on).copy_to_host(), x.mean(1),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pyreduce.var(d, axis=1, **on).copy_to_host(), x.var(1),
                               rtol=1e-4)
    assert np.array_equal(pyreduce.max(d, axis=1, **on).copy_to_host(), x.max(1))
    assert np.array_equal(pyreduce.argmax(d, axis=1, **on).copy_to_host(), x.argmax(1))
    y = affine_data(3 * K).reshape(3, K)
    assert not pyreduce.explain(y, affine, axis=1, **on).plan.spec.lane_accs
    want = [functools.reduce(affine, row) for row in y]
    assert pyreduce.reduce(y, affine, axis=1, **on).tolist() == want


@pytest.mark.parametrize("kind", ["rows", "columns"])
def test_vector_loads_need_aligned_rows(kind):
    """Rows (of outputs, for columns) 4100 and 41 float32 long start 16400 and
    164 bytes apart: no vector loads."""
    shape = (40, 13) if kind == "rows" else (13, 41)
    axis = 1 if kind == "rows" else 0
    strides = (4 * shape[1], 4)
    d = axes_mod.describe(shape, strides, 4, (axis,))
    if kind == "rows":
        d = axes_mod.Strided(M=2**12, Mi=2**12, so=0, si=2**12 + 13, K=2**12 + 13, ks=1,
                             off=0, span=(2**12) * (2**12 + 13))
    f4 = np.dtype(np.float32)
    plan = batchplanner.plan_strided(d, f4, f4, ("builtin", "add"), GPU_DEVICE, Tuning(), align=16)
    assert plan.kind == kind and plan.spec.vector == 1
    with pytest.raises(ValueError, match="vector_loads=True"):
        batchplanner.plan_strided(d, f4, f4, ("builtin", "add"), GPU_DEVICE,
                                  Tuning(vector_loads=True), align=16)


def test_generated_source_keeps_order_and_64_bit_indices():
    """The kernels index with the int64 arguments (so > 2**31 elements work) and
    write each row's fold once, in row order."""
    from pyreduce.dialect import CUDA
    from pyreduce.spec import BatchSpec
    from pyreduce.variants import generate

    spec = BatchSpec("segments", np.float32, np.float32, "op", 256, 32, 4, 4)
    src = generate(spec, CUDA)[1]
    assert "origin = off + (seg // Mi) * so + (seg % Mi) * si" in src
    assert "vload4(x, i)" in src and "out[seg] = v" in src
    cols = generate(BatchSpec("columns", np.float32, np.float32, "op", 256, 32, 4, 4), CUDA)[1]
    assert "base = off + mo * so + mi * si" in cols and "vload4(x, p0)" in cols


# --------------------------------------------------------------------------
# Split columns whose finishing pass would leave SMs idle: an intermediate pass


@pytest.mark.parametrize("shape,sub", [((4096, 4096), 8), ((300, 4096), 7), ((64, 4096), 0),
                                       ((16, 2**24), 0), ((128, 32), 4), ((1024, 256), 32)])
def test_split_columns_finish_through_an_intermediate_pass(shape, sub):
    """Where a split columns pass's finishing grid is below the SMs, its
    partials' rows are cut into parts again (``batchplanner._finish_parts``),
    however few bytes they hold: parts of at least FINISH_ROWS rows, about two
    blocks an SM, four parts at least; the last pass reads one row a part.
    Otherwise (few rows of partials, or a narrow finish) two passes;
    ``describe_plan`` names the intermediate pass."""
    x = np.broadcast_to(np.float32(0), shape)
    d = axes_mod.describe(shape, (4 * shape[1], 4), 4, (0,))
    plan = batchplanner.plan_strided(d, x.dtype, x.dtype, ("builtin", "add"), GPU_DEVICE,
                                     Tuning(), align=16)
    steps = plan.schedule.steps
    first, last = steps[0], steps[-1]
    assert first.args[8] == plan.parts and last.args[8] == 1  # parts argument
    if not sub:
        assert len(steps) <= 2
        return
    assert len(steps) == 3
    mid = steps[1]
    assert mid.spec.split and mid.spec.finish and not mid.spec.initial
    assert mid.args[6] == plan.parts and mid.args[8] == sub  # K rows in, sub parts out
    assert -(-plan.parts // sub) >= batchplanner.FINISH_ROWS
    assert mid.grid == last.grid * sub and last.grid < GPU_DEVICE.sm_count
    assert last.args[6] == sub and last.args[0] == mid.args[10]  # reads what mid wrote
    assert plan.finish == last.spec and not last.spec.split
    assert f"cut into {sub} by {mid.spec.label} then" in batchplanner.describe_plan(plan)


# 40 columns of 300 rows in 60 parts (max_blocks=64) finish in one block,
# fewer than the SMs of the simulator (2) and of a GPU: an intermediate pass
# cuts them into parts
THREE_PASSES = Tuning(max_blocks=64)


def _three_passes_body(lib):
    data = affine_data(300 * 40, seed=21).reshape(300, 40)
    f = np.random.default_rng(22).standard_normal((300, 40)).astype(np.float32)
    return (lib.reduce(lib.asarray(data), affine, axis=0),
            lib.reduce(lib.asarray(data), affine, axis=0, initial=int(data[0, 0])),
            lib.sum(lib.asarray(data % 1000), axis=0), lib.min(lib.asarray(f), axis=0))


@pytest.mark.parametrize("on_device", [False, True])
def test_three_pass_columns_keep_order_and_finish(gpu_backend, on_device):
    """The three passes give NumPy's answers: an operator that does not commute
    (parts stay in order through both finishing passes), an initial value
    (combined by the last pass only), and the structured reductions whose last
    pass finishes their values."""
    from pyreduce import backends

    device = backends.get(gpu_backend).device()
    d = axes_mod.describe((300, 40), (4 * 40, 4), 4, (0,))
    plan = batchplanner.plan_strided(d, np.dtype(np.float32), np.dtype(np.float32),
                                     ("builtin", "add"), device, THREE_PASSES, align=16)
    assert plan.passes == 3, batchplanner.describe_plan(plan)
    check(_three_passes_body, gpu_backend, on_device, tol=1e-5,
          options=dict(tuning=THREE_PASSES))
    # 140 columns, a warp's loads and more: the structured (commutative) calls
    # take the columns kernel's three passes too (rows of 40 go narrow)
    wide = batchplanner.plan_strided(axes_mod.describe((300, 140), (4 * 140, 4), 4, (0,)),
                                     np.dtype(np.float32), np.dtype(np.float32),
                                     ("builtin", "add"), device, THREE_PASSES, align=16,
                                     commutative=True)
    assert wide.passes == 3 and not wide.spec.narrow, batchplanner.describe_plan(wide)
    f = np.random.default_rng(23).standard_normal((300, 140)).astype(np.float32)
    x = to_device(f) if on_device else f
    kw = dict(axis=0, backend=gpu_backend, tuning=THREE_PASSES)
    # with the columns' float32 runs of rows (on by default): within a few
    # roundings of a column's magnitudes (a mean near zero has few correct
    # digits of its own); merged element by element, 1e-6 of the mean
    runs = 8 * 2**-24 * np.abs(f).astype(np.float64).mean(axis=0) * batchplanner.COLUMN_RUNS
    for name, want, tol in [("mean", f.astype(np.float64).mean(axis=0), 1e-6),
                            ("var", f.astype(np.float64).var(axis=0, ddof=1), 1e-5),
                            ("argmax", f.argmax(axis=0), 0), ("argmin", f.argmin(axis=0), 0)]:
        extra = dict(ddof=1) if name == "var" else {}
        got = np.asarray(getattr(pyreduce, name)(x, **kw, **extra)
                         if not on_device else
                         _host(getattr(pyreduce, name)(x, **kw, **extra)))
        if name == "mean":
            assert np.all(np.abs(got - want) <= tol * np.abs(want) + runs), name
        elif tol:
            np.testing.assert_allclose(got, want, rtol=tol, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)



@pytest.mark.parametrize("axis,row", [(1, 0), (1, -1), (0, 0), (0, -1)])
def test_out_sharing_the_inputs_memory(gpu_backend, axis, row):
    """``out=`` a row of the device input itself (NumPy buffers such a
    call): every result is that of the values the input held. The kernels
    wrote ``out=`` while other blocks still read the row it lies in."""
    from numba import cuda

    shape = (64, 300) if axis == 1 else (300, 64)
    data = affine_data(shape[0] * shape[1], seed=31).reshape(shape)
    floats = np.random.default_rng(32).standard_normal(shape)
    lanes = np.moveaxis(data, axis, -1).tolist()
    cases = [("affine", data, dict(op=affine), np.array([functools.reduce(affine, v)
                                                         for v in lanes])),
             ("sum", floats, {}, floats.sum(axis=axis)),
             ("mean", floats, {}, floats.mean(axis=axis))]
    for name, h, kw, want in cases:
        fn = pyreduce.reduce if name == "affine" else getattr(pyreduce, name)
        d = cuda.to_device(h)
        out = d[row, :64]
        assert fn(d, axis=axis, out=out, backend=gpu_backend, **kw) is out
        got = out.copy_to_host()
        if name == "affine":
            assert np.array_equal(got, want), name
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=name)
