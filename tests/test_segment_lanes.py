"""The ``lanes`` group of the ``segments`` family: ``G`` lanes of a warp per row
or segment (:mod:`pyreduce.variants.segments`), in the simulator and (on a GPU
machine, ``NUMBA_ENABLE_CUDASIM=0``) on the GPU; warps of 64 lanes in the
simulator only.

Every case checks which kernel the planner chose (a group of lanes, and how
many) and compares the results exactly with NumPy or ``functools.reduce`` over
each row (segment): row lengths around the group's tile (``G * items``), rows
that start at odd element offsets (no vector loads), strided and reversed rows,
segments of 0 to 40 elements, operators that are not commutative (the affine
composition, the last non-zero, a product of 2x2 matrices carried as a tuple
accumulator), the index-keyed tuples of ``argmax``, ``mean`` and ``var``,
element maps, ``initial=``, several input dtypes and warps of 32 and 64 lanes.
Arrays stay small: the simulator runs a Python thread per CUDA thread.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import pyreduce
from numpy_compare import check
from oracles import P, affine, affine_data, last_nonzero
from pyreduce import batchplanner
from pyreduce.planner import DeviceInfo, Tuning
from test_axes_mapped import keyed, lanes_oracle, same, segments_oracle, ties

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

#: the affine map x -> 1*x + 0: the identity of ``affine``
IDENTITY = 1 * P


def tuning(items=4, warp=32, block=None):
    return Tuning(block_size=block or max(64, warp), warp_size=warp, items_per_thread=items,
                  max_blocks=3)


@pytest.fixture
def backend(gpu_backend):
    """The backends that run these kernels: cuda (on a GPU machine) and sim."""
    return gpu_backend


@pytest.fixture(autouse=True)
def lanes_not_staged(monkeypatch):
    """Short rows that lie one after another go to the ``staged`` group
    (``tests/test_staged_rows.py``); here they keep the lanes and thread kernels
    that every other short row takes, so that those are tested on every length."""
    monkeypatch.setattr(batchplanner, "STAGED_MAX", 0)
    batchplanner.clear_plans()
    yield
    batchplanner.clear_plans()


def calls_on(backend, items=4, warp=32):
    """The keywords of a call on ``backend`` (``gpu_backend``: cuda, sim) with
    :func:`tuning`; a warp of 64 lanes is the simulator's only."""
    if warp != 32 and backend != "sim":
        pytest.skip("warps of 64 lanes: the simulator's (numba-cuda's warps are 32)")
    return dict(backend=backend, tuning=tuning(items, warp))


def expected_lanes(K: int, items: int, warp: int) -> int:
    """The planner's rule: lanes (0: another group) for rows of ``K``."""
    if K <= batchplanner.THREAD_MAX or K > warp // 2 * items:
        return 0
    return max(2, 1 << (-(-K // items) - 1).bit_length())


def plan_of(x, op, axis, options, **kwargs):
    """``(first pass's spec, result)`` of ``reduce(x, op, axis=axis)``."""
    e = pyreduce.explain(x, op, axis=axis, **options, **kwargs)
    return e.plan.spec, e.result


def affine_rows(M, K, seed=0):
    return affine_data(M * K, seed=seed).reshape(M, K)


def fold_rows(op, rows, initial=None):
    out = []
    for row in rows:
        values = ([initial] if initial is not None else []) + list(row)
        out.append(functools.reduce(op, values))
    return np.array(out, dtype=np.int64)


# --------------------------------------------------------------------------
# Row lengths around the group's edges


def edge_lengths(items: int, warp: int) -> list[int]:
    """1 to 3, the thread edge, and ``G * items - 1, G * items, G * items + 1``
    for every group width G up to half the warp, and one past the last."""
    edges = {1, 2, 3, batchplanner.THREAD_MAX, batchplanner.THREAD_MAX + 1}
    g = 2
    while g <= warp // 2:
        edges |= {g * items - 1, g * items, g * items + 1}
        g *= 2
    return sorted(k for k in edges if k >= 1)


@pytest.mark.parametrize("items,warp", [(1, 32), (2, 32), (4, 32), (4, 64)])
def test_row_lengths_around_the_group_edges(backend, items, warp):
    """The affine composition (in order, exact) of 37 rows of each length; the
    group is the planner's: ``G`` lanes with ``G * items >= K``."""
    options = calls_on(backend, items, warp)
    for K in edge_lengths(items, warp):
        x = affine_rows(37, K, seed=K)
        spec, got = plan_of(x, affine, 1, options)
        lanes = expected_lanes(K, items, warp)
        assert (spec.group == "lanes", spec.lanes) == (bool(lanes), lanes), (K, spec.label)
        np.testing.assert_array_equal(got, fold_rows(affine, x), err_msg=f"K={K}")


@pytest.mark.parametrize("K", [5, 8, 13, 16, 31, 32])
def test_vector_loads(backend, K):
    """float32 rows (sum and max, exactly: small integers) of lengths that are,
    and are not, multiples of the vector width: aligned rows of a multiple of
    4 elements load 16 bytes at a time."""
    x = np.random.default_rng(K).integers(-20, 20, (70, K)).astype(np.float32)
    options = calls_on(backend)
    spec, got = plan_of(x, "add", 1, options)
    assert spec.group == "lanes" and spec.vector == (4 if K % 4 == 0 else 1), spec.label
    np.testing.assert_array_equal(got, x.sum(axis=1))
    np.testing.assert_array_equal(pyreduce.max(x, axis=1, **options), x.max(axis=1))


@pytest.mark.parametrize("dtype,K,lanes,items", [
    (np.int8, 16, 2, 8), (np.int8, 5, 2, 4), (np.int8, 33, 4, 16), (np.float16, 9, 2, 8),
    (np.float32, 16, 2, 8), (np.float32, 9, 4, 4), (np.float64, 5, 4, 2),
])
def test_items_of_two_lanes(backend, dtype, K, lanes, items):
    """Without a tuning's items, 2 lanes of a short row of narrow elements take
    no more items than cover the row (16 int8: 2 x 8, one 8-byte load each); a
    float32 row of 16 or more, two 16-byte loads a lane (2 x 8), a shorter one
    one (9: 4 x 4)."""
    x = np.random.default_rng(K).integers(-9, 9, (80, K)).astype(dtype)
    spec, got = plan_of(x, "add", 1, dict(backend=backend, tuning=Tuning(block_size=64)),
                        dtype=np.float64)
    assert (spec.group, spec.lanes, spec.items) == ("lanes", lanes, items), spec.label
    np.testing.assert_array_equal(got, x.astype(np.float64).sum(axis=1))


# --------------------------------------------------------------------------
# Where the rows are: odd starts, strides, reversed


def _views(K):
    """``(name, view, axis)`` of rows of ``K`` elements that are not aligned,
    not adjacent or not in memory order."""
    base = affine_data(60 * (2 * K + 3) + 1, seed=K)
    yield "odd start", base[1:60 * K + 1].reshape(60, K), 1
    yield "odd row stride", base[:60 * (K + 3)].reshape(60, K + 3)[:, 1:K + 1], 1
    yield "every other", base[:60 * 2 * K].reshape(60, 2 * K)[:, ::2], 1      # ks = 2
    yield "reversed rows", base[:60 * K].reshape(60, K)[:, ::-1], 1           # ks = -1
    yield "rows backwards", base[:60 * K].reshape(60, K)[::-1], 1             # so < 0
    yield "both reversed", base[:60 * K].reshape(60, K)[::-1, ::-1], -1
    yield "transposed", base[:5 * K].reshape(K, 5).T, 1                       # ks = 5
    yield "axis 0 of a transpose", base[:5 * K].reshape(K, 5), 0              # ks = 5, M = 5


@pytest.mark.parametrize("K", [7, 16, 29])
def test_views(backend, K):
    options = calls_on(backend, 2)
    for name, x, axis in _views(K):
        spec, got = plan_of(x, affine, axis, options)
        assert spec.group == "lanes" and spec.lanes == expected_lanes(K, 2, 32), (name, spec)
        rows = np.moveaxis(x, axis, -1)
        np.testing.assert_array_equal(got, fold_rows(affine, rows), err_msg=name)
        init = int(affine_data(1, seed=3)[0])
        got = pyreduce.reduce(x, affine, axis=axis, initial=init, **options)
        np.testing.assert_array_equal(got, fold_rows(affine, rows, init), err_msg=name)


# --------------------------------------------------------------------------
# Operators that are not commutative, tuple accumulators, element maps


def matmul2(a, b):
    """The product of 2x2 matrices ``(a00, a01, a10, a11)``, entries mod 1009."""
    return ((a[0] * b[0] + a[1] * b[2]) % 1009, (a[0] * b[1] + a[1] * b[3]) % 1009,
            (a[2] * b[0] + a[3] * b[2]) % 1009, (a[2] * b[1] + a[3] * b[3]) % 1009)


def shear(k, v):
    """Element ``v`` at ``k``: ``[[1, v], [k + 1, 1]]`` (mod 1009)."""
    return (np.int64(1), np.int64(v % 1009), np.int64((k + 1) % 1009), np.int64(1))


@pytest.mark.parametrize("items,warp", [(2, 32), (4, 64)])
@pytest.mark.parametrize("K", [5, 12, 17, 30])
def test_matrix_product_tuple(backend, items, warp, K):
    """A tuple accumulator whose op is not commutative and whose map reads the
    element's index in its row: any lane folded out of order, or numbered from
    the wrong origin, shows."""
    x = np.random.default_rng(K).integers(0, 1000, (45, K + 1))[:, 1:]  # odd starts
    options = calls_on(backend, items, warp)
    dtypes = (np.dtype(np.int64),) * 4
    spec, got = plan_of(x, matmul2, 1, options, map=shear)
    assert spec.group == "lanes" and spec.mapped, spec.label
    same(got, lanes_oracle(x, matmul2, shear, 1, dtypes))
    init = (np.int64(2), np.int64(3), np.int64(5), np.int64(7))
    got = pyreduce.reduce(x, matmul2, map=shear, axis=1, initial=init, **options)
    same(got, lanes_oracle(x, matmul2, shear, 1, dtypes, initial=init))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.float16, np.float32, np.complex64])
@pytest.mark.parametrize("K", [6, 16, 23])
def test_first_max_pairs(backend, dtype, K):
    """``(value, index)`` of the first maximum (ties everywhere): the index is
    ``np.argmax`` of the row, through a tuple accumulator."""
    x = ties((40, K), dtype=np.float32, seed=K)
    x = (x + 1j * ties((40, K), seed=K + 1)).astype(dtype) if np.dtype(dtype).kind == "c" \
        else x.astype(dtype)
    op, fmap, dtypes, _ = keyed(x.dtype)
    options = calls_on(backend)
    spec, got = plan_of(x, op, 1, options, map=fmap)
    assert spec.group == "lanes", spec.label
    same(got, lanes_oracle(x, op, fmap, 1, dtypes))
    if np.dtype(dtype).kind != "c":
        np.testing.assert_array_equal(got[1], np.argmax(x, axis=1))


@pytest.mark.parametrize("K", [5, 16, 31])
def test_named_statistics(backend, K):
    """``argmax``, ``argmin``, ``mean`` and ``var`` along the last axis of short
    rows (their records through the same kernels)."""
    named_statistics_agree(np.random.default_rng(K).integers(-9, 9, (50, K)), calls_on(backend))


def named_statistics_agree(data, options, ddof=0):
    """``argmax``, ``argmin``, ``mean`` and ``var`` (``ddof``) of float32 ``data``
    along its last axis, against NumPy's."""
    x = data.astype(np.float32)
    np.testing.assert_array_equal(pyreduce.argmax(x, axis=-1, **options), np.argmax(x, axis=-1))
    np.testing.assert_array_equal(pyreduce.argmin(x, axis=-1, **options), np.argmin(x, axis=-1))
    np.testing.assert_allclose(pyreduce.mean(x, axis=-1, **options),
                               np.mean(x, axis=-1, dtype=np.float64), rtol=1e-6)
    np.testing.assert_allclose(pyreduce.var(x, axis=-1, ddof=ddof, **options),
                               np.var(x, axis=-1, ddof=ddof, dtype=np.float64), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("dtype,op,acc", [
    (np.bool_, "add", np.int64), (np.int8, "add", None), (np.int8, "max", None),
    (np.float16, "add", None), (np.complex64, "add", None), (np.float64, "mul", None),
])
def test_dtypes(backend, dtype, op, acc):
    """Built-in operators on short rows of several input dtypes (NumPy's
    accumulators and wrapping; float16 loaded as float32)."""
    rng = np.random.default_rng(1)
    data = rng.integers(-3, 4, (60, 19))
    x = (data + 1j * rng.integers(-3, 4, data.shape)).astype(dtype) \
        if np.dtype(dtype).kind == "c" else data.astype(dtype)

    def body(lib):
        return lib.reduce(lib.asarray(x), op, axis=1, dtype=acc)

    check(body, backend, False, options=dict(tuning=tuning(items=2)))


def test_last_nonzero_and_scalar_map(backend):
    """The last non-zero of each row (not commutative) and an element map that
    reads the index: ``sum(k * v)``."""
    rng = np.random.default_rng(2)
    x = (rng.integers(1, 9, (64, 21)) * (rng.random((64, 21)) < 0.3)).astype(np.int64)
    options = calls_on(backend)
    spec, got = plan_of(x, last_nonzero, 1, options, identity=0)
    assert spec.group == "lanes"
    np.testing.assert_array_equal(got, fold_rows(last_nonzero, x))
    got = pyreduce.reduce(x, "add", map=lambda k, v: k * v, axis=1, **options)
    np.testing.assert_array_equal(got, (x * np.arange(21)).sum(axis=1))


# --------------------------------------------------------------------------
# Segments of 0 to 40 elements


def offsets_of(lengths, start=0):
    return np.concatenate([[start], start + np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)


def segment_plan(lengths, items, warp):
    sim = DeviceInfo("sim-like", ("t",), 2, 2 * warp, 1, warp, 2 * warp, vector_bytes=16)
    f4 = np.dtype(np.float32)
    return batchplanner.plan_segments(len(lengths), int(sum(lengths)), f4, f4, "op", sim,
                                      tuning(items, warp))


@pytest.mark.parametrize("items,warp", [(2, 32), (4, 32), (1, 64)])
def test_segments_of_0_to_40(backend, items, warp):
    """Empty segments (their output: the identity, or ``initial``), single
    elements and up to 40; segments of one warp loop different numbers of
    times, each group shuffling among its own lanes."""
    lengths = list(np.random.default_rng(items * warp).integers(0, 41, 45)) + [0, 1, 40, 0]
    assert segment_plan(lengths, items, warp).spec.group == "lanes"
    off = offsets_of(lengths, start=3)
    data = affine_data(int(off[-1]) + 2, seed=warp)
    options = calls_on(backend, items, warp)
    init = int(affine_data(1, seed=2)[0])

    def body(lib):
        x, o = lib.asarray(data), lib.asarray(off)
        return (lib.segmented_reduce(x, o, affine, IDENTITY),
                lib.segmented_reduce(x, o, affine, initial=init))

    check(body, backend, False, options=dict(tuning=options["tuning"]))
    x = ties(int(off[-1]) + 2, seed=items)
    op, fmap, dtypes, empty = keyed(x.dtype)
    got = pyreduce.segmented_reduce(x, off, op, empty, map=fmap, **options)
    same(got, segments_oracle(x, off, op, fmap, dtypes, empty=empty))


@settings(max_examples=10)
@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=30),
       start=st.integers(0, 3), items=st.sampled_from([1, 2, 4]),
       warp=st.sampled_from([32, 64]), with_initial=st.booleans(),
       on_device=st.booleans())
def test_property_segments(backend, lengths, start, items, warp, with_initial, on_device):
    assume(warp == 32 or backend == "sim")
    off = offsets_of(lengths, start)
    data = affine_data(int(off[-1]) + 1, seed=len(lengths))
    init = int(affine_data(1, seed=5)[0]) if with_initial else None

    def body(lib):
        return lib.segmented_reduce(lib.asarray(data), lib.asarray(off), affine, IDENTITY,
                                    initial=init)

    check(body, backend, on_device, options=dict(tuning=tuning(items, warp)))


@settings(max_examples=10)
@given(K=st.integers(1, 70), M=st.integers(1, 40), step=st.sampled_from([1, 2, -1]),
       start=st.integers(0, 1), items=st.sampled_from([1, 2, 4]),
       warp=st.sampled_from([32, 64]), on_device=st.booleans())
def test_property_rows(backend, K, M, step, start, items, warp, on_device):
    """Rows of any short length, in any of the views above, against NumPy's
    reference fold."""
    assume(warp == 32 or backend == "sim")
    base = affine_data(M * K * abs(step) + start, seed=K)
    rows = base[start:].reshape(M, K * abs(step))

    def body(lib):
        return lib.reduce(lib.asarray(rows)[:, ::step], affine, IDENTITY, axis=1)

    check(body, backend, on_device, options=dict(tuning=tuning(items, warp)))
