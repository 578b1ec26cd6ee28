"""Narrow columns: ``axis=`` reductions whose adjacent outputs are fewer than a
warp (``sum(x, axis=0)`` of a tall-skinny ``(K, M)`` array), which a commutative
op reduces with the narrow columns kernel (:mod:`pyreduce.variants.columns`):
``g`` rows read as one wide row, the rows cut into parts, the leftover rows
(``K % g``) folded by the last part, the groups of each block folded in shared
memory, and a finishing pass of the same kernel.

Every result is compared with NumPy on every backend (``cpu``, ``sim``;
``cuda`` on a GPU), for ``K`` around multiples of ``g`` (the simulator
tuning's: :func:`wide_rows`), so that an element lost or counted twice, a
leftover row dropped or an index numbered from the wrong row shows: values are
small integers (exact sums, many ties for argmax and argmin). An op that is not
commutative keeps the order (the rows kernel), which the affine composition
checks. The plan tests pin the choice of kernel, so a return to the strided
rows kernel for narrow columns fails here.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pyreduce
from numpy_compare import to_device, to_host
from oracles import SIM_TUNING, affine, affine_data, on
from pyreduce import axes as axes_mod
from pyreduce import batchplanner

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SIM_DEVICE = batchplanner.DeviceInfo("sim-like", ("t",), 2, 64, 1, 32, 64, vector_bytes=16)
GPU_DEVICE = batchplanner.DeviceInfo("h100-like", ("g",), 132, 2048, 32, 32, 256,
                                     vector_bytes=16)
ADD = ("builtin", "add")
WIDTHS = [1, 2, 3, 5, 8, 16, 17, 31]
DTYPES = [np.float32, np.float64, np.int32, np.complex64]


def _describe(shape, axis, itemsize=4):
    """The Strided description of a C-contiguous array of ``shape``."""
    strides = tuple(itemsize * int(np.prod(shape[a + 1:])) for a in range(len(shape)))
    return axes_mod.describe(shape, strides, itemsize, (axis,))


def _plan(shape, axis, dtype=np.float32, device=GPU_DEVICE, tuning=pyreduce.Tuning(),
          commutative=True, acc=None, key=ADD):
    dt = np.dtype(dtype)
    return batchplanner.plan_strided(_describe(shape, axis, dt.itemsize), dt,
                                     np.dtype(acc or dt), key, device, tuning, align=16,
                                     commutative=commutative)


@functools.lru_cache(maxsize=None)
def wide_rows(M: int, dtype) -> int:
    """``g``, the rows the narrow kernel reads as one, for ``M`` outputs of
    ``dtype`` with the simulator's tuning (``oracles.SIM_TUNING``)."""
    return _plan((2**16, max(M, 2)), 0, dtype, SIM_DEVICE, SIM_TUNING).wide_rows


def _rows(g: int) -> list[int]:
    """Row counts around multiples of ``g``: fewer than one wide row (the rows
    kernel), one, one and leftovers, and enough for parts (the simulator
    tuning's 3 parts: 2, then 3 of even and uneven lengths)."""
    return sorted({1, 2, g - 1, g, g + 1, 2 * g - 1, 9 * g - 1, 9 * g, 10 * g + 1} - {0})


def _cases():
    for dtype in DTYPES:
        for M in WIDTHS:
            for K in _rows(wide_rows(M, dtype)):
                yield pytest.param(dtype, M, K, id=f"{np.dtype(dtype).name}-M{M}-K{K}")


def _data(shape, dtype, seed=0):
    """Small integers (exact sums, ties for argmax); complex with both parts."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.integers(-2, 3, shape)
    return x.astype(dtype)


def _same(got, want, exact=True):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _as_numpy(x, axis, backend, tuning=None):
    """sum, max, argmax, argmin, mean, var and minmax of ``x`` along ``axis``
    against NumPy's (max on the real part of a complex input, which has no
    order of its own for ``max``). Max and argmax also of ``x - 10``, all
    negative, where a stray zero would win. ``tuning``: a GPU backend's,
    instead of the simulator's usual one."""
    kw = on(backend)
    if tuning is not None and backend != "cpu":
        kw["tuning"] = tuning
    _same(pyreduce.sum(x, axis=axis, **kw), np.sum(x, axis=axis))
    real = x.real if x.dtype.kind == "c" else x
    _same(pyreduce.max(real, axis=axis, **kw), np.max(real, axis=axis))
    _same(pyreduce.max(real - 10, axis=axis, **kw), np.max(real - 10, axis=axis))
    _same(pyreduce.argmax(x, axis=axis, **kw), np.argmax(x, axis=axis))
    _same(pyreduce.argmax(x - 10, axis=axis, **kw), np.argmax(x - 10, axis=axis))
    _same(pyreduce.argmin(x, axis=axis, **kw), np.argmin(x, axis=axis))
    lo, hi = pyreduce.minmax(x, axis=axis, **kw)
    _same(lo, np.min(x, axis=axis))
    _same(hi, np.max(x, axis=axis))
    wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    _same(pyreduce.mean(x, axis=axis, **kw), np.mean(wide, axis=axis), exact=False)
    _same(pyreduce.var(x, axis=axis, **kw), np.var(wide, axis=axis), exact=False)


@pytest.mark.parametrize("dtype,M,K", list(_cases()))
def test_columns_as_numpy(backend, dtype, M, K):
    _as_numpy(_data((K, M), dtype, seed=K * 37 + M), 0, backend)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("wide,extra", [(1, -1), (1, 0), (1, 1), (9, 0), (9, 1)])
def test_middle_axis_as_numpy(backend, dtype, wide, extra):
    """The middle axis of ``(3, K, 5)``, ``K = wide * g + extra``: three
    blocks of 5 outputs side by side (``Mo = 3``), each with its own parts
    (3 with 9 wide rows: a tuning of 9 blocks) and leftover rows."""
    tuning = SIM_TUNING.replace(max_blocks=9)
    K = wide * wide_rows(5, dtype) + extra
    plan = _plan((3, K, 5), 1, dtype, SIM_DEVICE, tuning)
    assert plan.spec.narrow == (wide > 1 or extra >= 0)
    assert plan.parts == (3 if wide > 1 else 1)
    _as_numpy(_data((3, K, 5), dtype, seed=K), 1, backend, tuning)


VIEWS = {"reversed": lambda a: a[::-1, :7], "sliced": lambda a: a[:, 2:9],
         "every other row": lambda a: a[::2, :7], "every other column": lambda a: a[:, 1:15:2]}


@pytest.mark.parametrize("view", list(VIEWS))
def test_views(backend, view):
    """Rows that are not adjacent in memory (reversed, sliced, strided views):
    the narrow kernel's columns at their own offsets; and (GPU backends) the
    same view of a device array, read in place, its structured results
    finished on the device."""
    g = wide_rows(7, np.float32)
    base = _data((4 * g + 3, 20), np.float32, seed=3)
    x = VIEWS[view](base)
    _as_numpy(x, 0, backend)
    if backend != "cpu":
        d = VIEWS[view](to_device(base))
        kw = on(backend)
        _same(to_host(pyreduce.sum(d, axis=0, **kw), True), x.sum(axis=0))
        _same(to_host(pyreduce.argmin(d, axis=0, **kw), True), x.argmin(axis=0))
        _same(to_host(pyreduce.mean(d, axis=0, **kw), True), x.mean(axis=0), exact=False)


@pytest.mark.parametrize("n", [0, 1, 5, 9])  # K = n * g + 3: the first pass split, or not
def test_positions_and_initial(backend, n):
    """An element map sees each element's row (``sum(i * v)`` along the
    axis, against NumPy's); ``initial`` is combined once per output, by the
    first pass or by the finishing pass."""
    K = n * wide_rows(6, np.int64) + 3
    x = _data((K, 6), np.int64, seed=K)
    kw = on(backend)
    got = pyreduce.reduce(x, "add", map=lambda i, v: i * v, axis=0, dtype=np.int64, **kw)
    _same(got, np.arange(K) @ x)
    if backend == "sim" and n:
        e = pyreduce.explain(x, "add", map=lambda i, v: i * v, axis=0, dtype=np.int64, **kw)
        assert e.plan.spec.narrow and e.plan.spec.mapped
    _same(pyreduce.sum(x, axis=0, initial=100, **kw), x.sum(axis=0) + 100)
    _same(pyreduce.max(x, axis=0, initial=2, **kw), np.max(x, axis=0, initial=2))


def test_finish_with_full_wide_rows(backend):
    """Parts enough that the finishing pass itself reads whole wide rows of
    partials (and leftover ones), with float64 sums and argmax."""
    tuning = pyreduce.Tuning(block_size=64, max_blocks=12)
    x = _data((40 * 31 + 5, 31), np.float64, seed=5)
    kw = on(backend)
    if backend != "cpu":
        kw["tuning"] = tuning
    plan = _plan(x.shape, 0, np.float64, SIM_DEVICE, tuning)
    fin = plan.schedule.steps[1]
    assert plan.parts > fin.args[-3]  # more parts of partials than rows to a wide row
    _same(pyreduce.sum(x, axis=0, **kw), x.sum(axis=0))
    _same(pyreduce.argmax(x, axis=0, **kw), x.argmax(axis=0))


#: rows of a warp's outputs or more that still take the narrow kernel: fewer
#: than a warp's loads (``warp * items``: 128 float32 or int32, 512 int8).
#: Rows of 100 and 200 have more outputs than the simulator tuning's block of
#: 64 threads, which then write several outputs each.
WARP_WIDE = [(np.float32, 32), (np.float32, 100), (np.int32, 48), (np.int8, 100),
             (np.int8, 200)]


@pytest.mark.parametrize("dtype,M", WARP_WIDE)
def test_warp_wide_rows_take_the_narrow_kernel(backend, dtype, M):
    """Rows of outputs as wide as a warp but under a warp's loads: the narrow
    kernel (wide rows, every lane loading), on the simulator and an H100-like
    device; from a warp's loads on, and for an op that does not commute, the
    columns kernel. Results against NumPy with leftover rows and
    parts."""
    g = wide_rows(M, dtype)
    assert _plan((2**16, M), 0, dtype, SIM_DEVICE, SIM_TUNING).spec.narrow
    assert _plan((2**20, M), 0, dtype).spec.narrow
    loads = 32 * (16 // np.dtype(dtype).itemsize)  # a warp of 16-byte items
    assert not _plan((2**20, loads), 0, dtype).spec.narrow
    assert not _plan((2**20, M), 0, dtype, commutative=False).spec.narrow
    for K in (g + 1, 9 * g - 1):
        _as_numpy(_data((K, M), dtype, seed=K + M), 0, backend)


def test_warp_wide_middle_axis(backend):
    """The middle axis of ``(3, K, 40)``: three blocks of 40 outputs side by
    side, each more than the simulator's warp and fewer than its loads, with
    parts and leftover rows."""
    tuning = SIM_TUNING.replace(max_blocks=9)
    K = 9 * wide_rows(40, np.float32) + 1
    plan = _plan((3, K, 40), 1, np.float32, SIM_DEVICE, tuning)
    assert plan.spec.narrow and plan.parts == 3
    _as_numpy(_data((3, K, 40), np.float32, seed=K), 1, backend, tuning)


@pytest.mark.parametrize("M", [3, 16])
def test_non_commutative_op_keeps_order(backend, M):
    """The affine composition (associative, not commutative) along axis 0 of
    a narrow array folds every column in row order: never the narrow kernel."""
    K = 9 * wide_rows(M, np.int64) + 1
    x = affine_data(K * M, seed=M).reshape(K, M)
    kw = on(backend)
    want = np.array([functools.reduce(affine, x[:, j].tolist()) for j in range(M)])
    _same(pyreduce.reduce(x, affine, axis=0, **kw), want)
    if backend == "sim":
        plan = pyreduce.explain(x, affine, axis=0, **kw).plan
        assert plan.kind == "rows" and not plan.spec.narrow


# --------------------------------------------------------------------------
# The plans


def test_tall_skinny_plan():
    """The issue's case, ``(2**24, 16)`` float32 along axis 0 on an H100-like
    device: 64 rows to a wide row of 1024 columns (a 256-thread block of 16-byte
    vector loads), 2098 parts of 125 wide rows, one finishing block."""
    plan = _plan((2**24, 16), 0)
    spec = plan.spec
    assert (plan.kind, spec.narrow, plan.wide_rows, spec.block, spec.vector) == \
        ("columns", True, 64, 256, 4)
    assert (plan.parts, plan.grid, plan.passes) == (2098, 2098, 2)
    fin = plan.finish
    assert fin.narrow and fin.finish and plan.schedule.steps[1].grid == 1
    assert "64 rows per wide row" in batchplanner.describe_plan(plan)
    # an op that is not known to commute keeps the strided rows kernel
    assert _plan((2**24, 16), 0, commutative=False).kind == "rows"


@pytest.mark.parametrize("shape,axis,g,parts,finish", [
    ((2**24, 16), 0, 64, 2098, "narrow"),
    ((2**24, 3), 0, 340, 2056, "narrow"),      # wide rows of 1020: whole items a thread
    ((2**24, 31), 0, 32, 2106, "narrow"),
    ((3, 2**20, 5), 1, 204, 643, "narrow"),    # 15 outputs: still narrow partials
    ((40, 2**16, 8), 1, 128, 52, "columns"),   # 320 outputs: the columns finish
    ((2**12, 2**14, 2), 1, 512, 1, None),      # many outputs: no parts
])
def test_narrow_plans(shape, axis, g, parts, finish):
    plan = _plan(shape, axis)
    assert (plan.kind, plan.spec.narrow, plan.wide_rows, plan.parts) == \
        ("columns", True, g, parts)
    width = g * shape[-1]
    assert width % plan.spec.items == 0 and width <= plan.spec.block * plan.spec.items
    if finish is None:
        assert plan.finish is None
    else:
        assert plan.finish.narrow == (finish == "narrow")


def test_wide_accumulators_fit_shared_memory():
    """The shared memory a block folds in stays within FOLD_BYTES: wide
    accumulators (var's three float64 fields) give narrower wide rows."""
    from pyreduce import structured
    from pyreduce.variants.columns import FOLD_BYTES

    m = structured.moments_monoid(np.dtype(np.float32), "var")
    plan = batchplanner.plan_strided(_describe((2**22, 16), 0), np.dtype(np.float32), m.dtype,
                                     m.key, GPU_DEVICE, pyreduce.Tuning(), align=16,
                                     mapped=True, commutative=True)
    assert plan.spec.narrow and plan.wide_rows * 16 * m.dtype.itemsize <= FOLD_BYTES


@pytest.mark.parametrize("shape,axis", [((500, 16), 0), ((3, 100, 5), 1)])
def test_explain_shows_the_narrow_kernel(shape, axis):
    """Through the public call on the simulator: sum and argmax of narrow
    columns take the narrow kernel (the first pass's, and the finishing pass's
    where there are parts)."""
    if "sim" not in pyreduce.backends.available():
        pytest.skip("the simulator is not enabled in this process")
    x = _data(shape, np.float32)
    e = pyreduce.explain(x, "add", axis=axis, **on("sim"))
    assert e.plan.kind == "columns" and e.plan.spec.narrow
    assert all(k.spec.narrow for k in e.kernels)
    _same(e.result, x.sum(axis=axis))
