"""Element maps (``map=``) and tuple accumulators along axes and in segments,
against ``functools.reduce`` over each lane (``oracles.lane_layout``) or
segment, on every backend (``cpu``, ``sim``; ``cuda`` on a GPU).

The map's index is the element's position in its lane (segment), so the
``(value, index)`` pair of ``first_max`` (the larger value, the left one on a
tie: not commutative) gives ``np.argmax`` along the axis: any element folded
out of order, or numbered from the wrong origin, shows in the index. Data are
small integers, with many ties. In the simulator the shapes and tunings below
reach every kernel kind (a thread, warp or block per row, strided or not, rows
cut into parts, columns, columns cut into parts; segments likewise), which
``test_kernel_kinds`` and ``test_segment_kernels`` check; the tuning is fixed
(64 threads per block) so that examples share kernels.
"""

from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from adversarial import axes as axes_of, inputs
from numpy_compare import to_device
from oracles import P, affine, lane_layout, on
from pyreduce import backends, batchplanner, manyvalues, structured
from pyreduce.interop import inspect
from pyreduce.ops import make_monoid
from pyreduce.planner import Tuning

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

BF16 = np.dtype(ml_dtypes.bfloat16)


# --------------------------------------------------------------------------
# Operators, maps and the oracles


def first_max(a, b):
    """``(value, index)``: the larger value; on a tie the left operand."""
    return a if a[0] >= b[0] else b


def first_max_complex(a, b):
    """``(real, imag, index)``: NumPy's order of complex values; the left on a tie."""
    if a[0] > b[0] or (a[0] == b[0] and a[1] >= b[1]):
        return a
    return b


def pair(i, v):
    return (v, i)


def complex_triple(i, v):
    return (v.real, v.imag, i)


def square(i, v):
    return v * v


def index_if_nonzero(i, v):
    return i if v != 0 else -1


def last_index(a, b):
    return b if b >= 0 else a


def indexed_affine(i, v):
    """The affine map ``x -> (i + 1) * x + v`` (mod P): order and index both show."""
    return ((i % 1000 + 1) * P) + v % P


def chan(a, b):
    """Chan's merge of ``(count, mean, m2)`` summaries."""
    if a[0] == 0.0:
        return b
    if b[0] == 0.0:
        return a
    n = a[0] + b[0]
    d = b[1] - a[1]
    w = b[0] / n
    return (n, a[1] + d * w, a[2] + b[2] + d * d * a[0] * w)


def summary(i, v):
    return (1.0, np.float64(v), 0.0)


def seen_dtype(dtype) -> np.dtype:
    """The dtype a map sees elements of ``dtype`` as: half precision as
    float32; native byte order."""
    dt = np.dtype(dtype)
    dt = dt.newbyteorder("=") if dt.byteorder not in "=|" else dt
    return np.dtype(np.float32) if dt in (np.float16, BF16) else dt


def seen(x: np.ndarray) -> np.ndarray:
    """The elements as a map sees them."""
    return x.astype(seen_dtype(x.dtype))


def keyed(dtype: np.dtype):
    """``(op, map, field dtypes, identity)`` of the first-max pair for ``dtype``."""
    dt = seen_dtype(dtype)
    if dt.kind == "c":
        part = np.dtype(np.float32 if dt == np.complex64 else np.float64)
        return first_max_complex, complex_triple, (part, part, np.dtype(np.int64)), \
            (-np.inf, -np.inf, -1)
    low = -np.inf if dt.kind == "f" else False if dt.kind == "b" else np.iinfo(dt).min
    return first_max, pair, (dt, np.dtype(np.int64)), (low, -1)


def fold(op, fmap, lane, dtypes, initial=None, empty=None):
    """``functools.reduce(op, [fmap(k, v) ...], initial)``, each step cast to
    the accumulator (``dtypes``: its fields, or one dtype for a scalar)."""
    if isinstance(dtypes, tuple):
        def cast(t):
            return tuple(d.type(f) for d, f in zip(dtypes, t))
    else:
        cast = dtypes.type
    values = [cast(fmap(k, v)) for k, v in enumerate(lane)]
    if initial is not None:
        values.insert(0, cast(initial))
    if not values:
        return cast(empty)
    with np.errstate(all="ignore"):
        return functools.reduce(lambda a, b: cast(op(a, b)), values)


def as_arrays(values: list, shape: tuple, dtypes):
    """Lane results as the reduction returns them: a tuple of arrays (one per
    field) for a tuple accumulator, else one array."""
    if isinstance(dtypes, tuple):
        return tuple(np.array([v[k] for v in values], d).reshape(shape)
                     for k, d in enumerate(dtypes))
    return np.array(values, dtypes).reshape(shape)


def lanes_oracle(x, op, fmap, axis, dtypes, keepdims=False, initial=None, empty=None):
    """The reduction of each lane of ``x`` along ``axis``."""
    perm, rows, shape = lane_layout(x.shape, axis, keepdims)
    lanes = seen(np.asarray(x)).transpose(perm).reshape(rows)
    return as_arrays([fold(op, fmap, lane, dtypes, initial, empty) for lane in lanes],
                     shape, dtypes)


def segments_oracle(x, offsets, op, fmap, dtypes, initial=None, empty=None):
    lanes = [seen(x)[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    return as_arrays([fold(op, fmap, lane, dtypes, initial, empty) for lane in lanes],
                     (len(lanes),), dtypes)


def same(got, want):
    """Equal values (NaN where NaN), dtypes and shapes, field by field."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), got
        for g, w in zip(got, want):
            same(g, w)
        return
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    np.testing.assert_array_equal(got, want)


def ties(shape, dtype=np.float32, seed=0):
    """Small integers with many ties, as ``dtype``."""
    return np.random.default_rng(seed).integers(0, 4, shape).astype(dtype)


# --------------------------------------------------------------------------
# Every kernel kind: the index field is np.argmax along the axis


SIM = dict(block_size=64, max_blocks=3)

#: (name, base shape, view, axis, tuning, (kind, group, unit, split)) in the simulator
KINDS = [
    ("thread", (5, 3), None, 1, {}, ("rows", "thread", True, False)),
    ("staged", (9, 11), None, 1, {}, ("rows", "staged", True, False)),
    ("staged, three axes", (4, 6, 5), None, 2, {}, ("rows", "staged", True, False)),
    ("thread strided", (3, 4), "T", 1, {"items_per_thread": 1},
     ("rows", "thread", False, False)),
    ("lanes vector", (5, 40), None, 1, {}, ("rows", "lanes", True, False)),
    ("lanes odd", (9, 11), None, 1, {}, ("rows", "lanes", True, False)),
    ("warp vector", (5, 200), None, 1, {}, ("rows", "warp", True, False)),
    ("warp strided", (90, 3), "T", -1, {"items_per_thread": 1}, ("rows", "warp", False, False)),
    ("middle axis", (3, 40, 5), None, 1, {}, ("rows", "lanes", False, False)),
    ("middle axis warp", (3, 200, 2), None, 1, {}, ("rows", "warp", False, False)),
    ("block", (3, 600), None, 1, {"items_per_thread": 1}, ("rows", "block", True, False)),
    ("block split", (1, 300), None, 1, {"items_per_thread": 2},
     ("rows", "block", True, True)),
    ("block split strided", (600, 2), "T", 1, {"items_per_thread": 1},
     ("rows", "block", False, True)),
    ("columns", (3, 6, 40), None, 1, {"items_per_thread": 1},
     ("columns", "block", True, False)),
    ("columns split", (9, 70), None, 0, {}, ("columns", "block", True, True)),
    ("columns reversed split", (9, 70), "reversed", 0, {},
     ("columns", "block", False, True)),
    ("two axes, columns", (9, 3, 70), None, (0, 1), {}, ("columns", "block", True, True)),
    ("two axes apart", (4, 3, 5), None, (0, 2), {}, ("rows", "lanes", True, False)),
]

VIEWS = {None: lambda a: a, "T": lambda a: a.T, "reversed": lambda a: a[:, ::-1]}


@pytest.fixture
def fresh_plans():
    """Plans made by a test with the planner's constants patched are forgotten
    after it."""
    yield
    batchplanner.clear_plans()


@pytest.mark.parametrize("name,shape,view,axis,tuning,kind", KINDS, ids=[k[0] for k in KINDS])
def test_kernel_kinds(backend, name, shape, view, axis, tuning, kind, fresh_plans, monkeypatch):
    """The first index of the maximum of every lane, and the maximum, on every
    kernel kind, for host inputs and (GPU backends) the same view of a device
    array, read in place or gathered; the index sums ``sum(i)`` (``K (K - 1) /
    2`` per lane) too. Short rows one after another take the staged group
    except where a case names another kernel."""
    if kind[1] != "staged":
        monkeypatch.setattr(batchplanner, "STAGED_MAX", 0)
    batchplanner.clear_plans()
    base = ties(shape, seed=len(name))
    x = VIEWS[view](base)
    options = dict(backend=backend)
    if backend != "cpu":
        options["tuning"] = Tuning(**SIM, **tuning)
    op, fmap, dtypes, _ = keyed(x.dtype)
    if backend == "sim":
        e = pyreduce.explain(x, op, map=fmap, axis=axis, **options)
        plan = e.plan
        spec = plan.spec
        assert (plan.kind, spec.group, spec.unit, plan.parts > 1) == kind
        assert spec.mapped and (plan.finish is None or not plan.finish.mapped)
        got = e.result
    else:
        got = pyreduce.reduce(x, op, map=fmap, axis=axis, **options)
    want = lanes_oracle(x, op, fmap, axis, dtypes)
    same(got, want)
    if isinstance(axis, int):
        np.testing.assert_array_equal(got[1], np.argmax(x, axis=axis))
    if backend != "cpu":
        d = VIEWS[view](to_device(base))
        same(pyreduce.reduce(d, op, map=fmap, axis=axis, **options), want)
    K = math.prod(x.shape[a] for a in np.atleast_1d(axis))
    counted = pyreduce.reduce(x, "add", map=lambda i, v: i, axis=axis, dtype=np.int64,
                              **options)
    assert (np.asarray(counted) == K * (K - 1) // 2).all()


def test_few_long_rows_on_the_cpu():
    """The cpu backend reduces a few long rows each in parallel pieces: the
    pieces' indices still count from the row's start."""
    data = np.random.default_rng(2).integers(0, 1000, (1, (1 << 21) + 5)).astype(np.float32)
    late = data.shape[1] * 3 // 4
    data[0, [late, late + 7]] = 1000  # the first maximum in the last piece
    value, index = pyreduce.reduce(data, first_max, map=pair, axis=1, backend="cpu")
    np.testing.assert_array_equal(index, np.argmax(data, axis=1))
    np.testing.assert_array_equal(value, data.max(axis=1))


# --------------------------------------------------------------------------
# Any input: dtypes, layouts, axes, keepdims, initial


MAPPED_DTYPES = tuple(np.dtype(t) for t in (
    np.int8, np.uint16, np.int64, np.float16, BF16, np.float32, np.float64, np.complex64,
    np.complex128, np.bool_))


def _property(backend, case, axis, keepdims, with_initial):
    x = case.array(np)
    op, fmap, dtypes, identity = keyed(x.dtype)
    initial = None
    if with_initial:
        initial = (1,) * (len(dtypes) - 1) + (-7,)
    got = pyreduce.reduce(x, op, identity, map=fmap, axis=axis, keepdims=keepdims,
                          initial=initial, **on(backend))
    want = lanes_oracle(x, op, fmap, axis, dtypes, keepdims, initial, identity)
    if not isinstance(got[0], np.ndarray):  # one value: a tuple of NumPy scalars
        assert [type(g) for g in got] == [d.type for d in dtypes]
    same(tuple(np.asarray(g) for g in got), want)


@settings(max_examples=25)
@given(data=st.data())
def test_property_cpu(data):
    case = data.draw(inputs("cpu", MAPPED_DTYPES, ndims=(1, 2, 3), profile="order",
                            specials=(0.0,)))
    _property("cpu", case, data.draw(axes_of(len(case.shape))), data.draw(st.booleans()),
              data.draw(st.booleans()))


@pytest.mark.sim
@settings(max_examples=10)
@given(data=st.data())
def test_property_sim(data):
    case = data.draw(inputs("sim", MAPPED_DTYPES, ndims=(2, 3), profile="order",
                            specials=(0.0,)))
    _property("sim", case, data.draw(axes_of(len(case.shape))), data.draw(st.booleans()),
              data.draw(st.booleans()))


@pytest.mark.parametrize("dtype", [np.int8, np.float16, BF16, np.complex64, np.complex128])
@pytest.mark.parametrize("axis", [0, 1, -1, (0, 1)])
def test_dtypes(backend, dtype, axis):
    """The pair's fields have the dtypes the map returns (half precision seen
    as float32, complex as two real parts), on rows and on columns."""
    data = np.random.default_rng(3).integers(-3, 4, (6, 70))
    x = (data + 1j * data[::-1]).astype(dtype) if np.dtype(dtype).kind == "c" \
        else data.astype(dtype)
    op, fmap, dtypes, _ = keyed(x.dtype)
    got = pyreduce.reduce(x, op, map=fmap, axis=axis, **on(backend))
    same(got, lanes_oracle(x, op, fmap, axis, dtypes))


# --------------------------------------------------------------------------
# Scalar maps, and a (count, mean, m2) tuple


@pytest.mark.parametrize("axis", [0, 1, -1, (0, 2), (1, 2)])
def test_scalar_maps(backend, axis):
    """A built-in op over mapped elements (a sum of squares, with initial); a
    user op over mapped indices (the index of the last non-zero element of each
    lane); the affine composition of index-dependent maps (order and index
    both show)."""
    rng = np.random.default_rng(4)
    x = (rng.integers(1, 9, (3, 70, 5)) * (rng.random((3, 70, 5)) < 0.3)).astype(np.float64)
    got = pyreduce.reduce(x, "add", map=square, axis=axis, initial=5, **on(backend))
    np.testing.assert_array_equal(got, 5 + (x * x).sum(axis=axis))
    i8 = np.dtype(np.int64)
    got = pyreduce.reduce(x, last_index, map=index_if_nonzero, axis=axis, dtype=i8,
                          **on(backend))
    same(got, lanes_oracle(x, last_index, index_if_nonzero, axis, i8))
    a = x.astype(np.int64) * 7919
    got = pyreduce.reduce(a, affine, map=indexed_affine, axis=axis, **on(backend))
    same(got, lanes_oracle(a, affine, indexed_affine, axis, i8))


@pytest.mark.parametrize("axis", [0, 1, (0, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_moments_tuple(backend, axis, dtype):
    """``(count, mean, m2)`` merged by Chan's update: the count exactly, the
    mean and variance as NumPy's."""
    x = np.random.default_rng(5).integers(-50, 50, (4, 70, 3)).astype(dtype)
    n, mean, m2 = pyreduce.reduce(x, chan, map=summary, axis=axis, **on(backend))
    assert n.dtype == mean.dtype == m2.dtype == np.float64
    np.testing.assert_array_equal(n, np.full(n.shape, x.size / n.size))
    np.testing.assert_allclose(mean, np.mean(x, axis=axis, dtype=np.float64), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(m2 / n, np.var(x, axis=axis, dtype=np.float64), rtol=1e-10)


# --------------------------------------------------------------------------
# Segments: the index counts from each segment's start


#: segment lengths: empty ones, singles, warp edges, and long ones cut into parts
SEGMENTS = {
    "mixed": [0, 3, 0, 1, 2, 70, 0, 65, 4, 5],
    "singles": [1] * 40,
    "warp_edges": [31, 32, 33, 64, 65, 129, 2],
    "long": [700, 0, 700, 699, 701, 700],
    "long_and_empty": [1400, 0, 700],
}
#: the simulator's tuning for segments: one item per thread, up to 5 blocks
SEGMENT_TUNING = dict(block_size=64, items_per_thread=1, max_blocks=5)


def _offsets(lengths, start=3):
    return np.concatenate([[start], start + np.cumsum(lengths)]).astype(np.int64)


@pytest.mark.sim
def test_segment_kernels():
    """The simulator's plans for ``SEGMENTS`` reach a thread, a group of lanes,
    a warp and a block per segment, and segments cut into parts."""
    sim = backends.get("sim").device(32)
    f4 = np.dtype(np.float32)
    seen_kinds = set()
    for lengths in SEGMENTS.values():
        plan = batchplanner.plan_segments(len(lengths), sum(lengths), f4, f4, "op", sim,
                                          Tuning(**SEGMENT_TUNING), mapped=True)
        seen_kinds.add((plan.spec.group, plan.parts > 1))
        assert plan.spec.mapped and (plan.finish is None or not plan.finish.mapped)
    assert seen_kinds == {("thread", False), ("lanes", False), ("warp", False),
                          ("block", False), ("block", True)}


@pytest.mark.parametrize("name", list(SEGMENTS))
def test_segments(backend, name):
    """Each segment's first maximum and its index in the segment; an empty
    segment's result is the identity (or ``initial``); the index sums."""
    off = _offsets(SEGMENTS[name])
    x = ties(int(off[-1]) + 4, seed=len(name))
    op, fmap, dtypes, _ = keyed(x.dtype)
    options = dict(backend=backend)
    if backend != "cpu":
        options["tuning"] = Tuning(**SEGMENT_TUNING)
    empty = (-1.0, -1)
    got = pyreduce.segmented_reduce(x, off, op, empty, map=fmap, **options)
    same(got, segments_oracle(x, off, op, fmap, dtypes, empty=empty))
    got = pyreduce.segmented_reduce(x, off, op, map=fmap, initial=(2.0, -5), **options)
    same(got, segments_oracle(x, off, op, fmap, dtypes, initial=(2.0, -5)))
    lengths = np.diff(off)
    counted = pyreduce.segmented_reduce(x, off, "add", map=lambda i, v: i, dtype=np.int64,
                                        **options)
    np.testing.assert_array_equal(counted, lengths * (lengths - 1) // 2)


def test_segments_need_an_identity_for_empty_ones(backend):
    x = ties(10)
    with pytest.raises(ValueError, match="segment 1 is empty"):
        pyreduce.segmented_reduce(x, np.array([0, 4, 4, 10]), first_max, map=pair,
                                  **on(backend))


# --------------------------------------------------------------------------
# Masked arrays and where=: the index counts the lane's elements taken


@pytest.mark.parametrize("axis", [0, 1, (0, 2)])
def test_masked(backend, axis):
    """A tuple of masked arrays, masked where a lane has nothing unmasked; each
    lane's result is the fold of its unmasked elements, numbered from 0."""
    rng = np.random.default_rng(6)
    data = ties((3, 40, 4), seed=6)
    mask = rng.random(data.shape) < 0.5
    mask[:, :, 0] = True  # lanes with nothing unmasked
    x = np.ma.array(data, mask=mask)
    op, fmap, dtypes, _ = keyed(data.dtype)
    got = pyreduce.reduce(x, op, map=fmap, axis=axis, **on(backend))
    perm, rows, shape = lane_layout(data.shape, axis, False)
    lanes = data.transpose(perm).reshape(rows)
    keep = ~mask.transpose(perm).reshape(rows)
    empty = ~keep.any(axis=1)
    want = as_arrays([fold(op, fmap, lane[k], dtypes, empty=(0, 0))
                      for lane, k in zip(lanes, keep)], shape, dtypes)
    assert isinstance(got, tuple) and all(isinstance(g, np.ma.MaskedArray) for g in got)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.ma.getmaskarray(g), empty.reshape(shape))
        np.testing.assert_array_equal(g.filled(0), np.where(empty.reshape(shape), 0, w))
        assert g.dtype == w.dtype


def test_masked_segments(backend):
    x = np.ma.array(ties(12), mask=[0, 1, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0])
    got = pyreduce.segmented_reduce(x, np.array([0, 4, 9, 12]), first_max, map=pair,
                                    **on(backend))
    taken = [x[a:b].compressed() for a, b in ((0, 4), (4, 9), (9, 12))]
    want = [fold(first_max, pair, t, keyed(np.float32)[2]) for t in taken]
    assert [int(i) for i in got[1]] == [w[1] for w in want]
    assert isinstance(got[0], np.ma.MaskedArray) and not got[0].mask.any()


@pytest.mark.parametrize("axis", [0, 1, -1, (0, 1)])
def test_where(backend, axis):
    """``where=`` along axes with a map: the index counts each lane's selected
    elements; a lane with none selected gets ``initial``, else the identity."""
    rng = np.random.default_rng(7)
    data = ties((5, 40), seed=7)
    where = rng.random((1, 40)) < 0.5
    where[0, :3] = False
    op, fmap, dtypes, _ = keyed(data.dtype)
    for initial, identity in ((None, (-1.0, -1)), ((2.0, -9), None)):
        got = pyreduce.reduce(data, op, identity, map=fmap, axis=axis, where=where,
                              initial=initial, **on(backend))
        perm, rows, shape = lane_layout(data.shape, axis, False)
        keep = np.broadcast_to(where, data.shape).transpose(perm).reshape(rows)
        lanes = data.transpose(perm).reshape(rows)
        same(got, as_arrays([fold(op, fmap, lane[k], dtypes, initial, identity)
                             for lane, k in zip(lanes, keep)], shape, dtypes))
    counted = pyreduce.reduce(data, "add", map=lambda i, v: i, axis=1, where=where,
                              dtype=np.int64, **on(backend))
    n = where.sum()
    np.testing.assert_array_equal(counted, np.full(5, n * (n - 1) // 2))


# --------------------------------------------------------------------------
# Where results go


def test_tuple_results_are_host_arrays(backend):
    """A tuple accumulator's result is a tuple of NumPy arrays, one per field,
    of the result's shape (with keepdims too), also for a device input; out=
    and device_result=True raise ValueError, naming them. A scalar map keeps
    the usual places (a device input's result on the device)."""
    x = ties((4, 50))
    got = pyreduce.reduce(x, first_max, map=pair, axis=0, keepdims=True, **on(backend))
    assert [type(g) for g in got] == [np.ndarray, np.ndarray]
    assert [g.shape for g in got] == [(1, 50), (1, 50)]
    for kwargs in (dict(out=np.empty(50, got[0].dtype)), dict(device_result=True)):
        with pytest.raises(ValueError, match="out= and device_result=True"):
            pyreduce.reduce(x, first_max, map=pair, axis=0, **kwargs, **on(backend))
        with pytest.raises(ValueError, match="out= and device_result=True"):
            pyreduce.segmented_reduce(x[0], np.array([0, 50]), first_max, map=pair, **kwargs,
                                      **on(backend))
    if backend == "cpu":
        return
    d = to_device(x)
    got = pyreduce.reduce(d, first_max, map=pair, axis=1, **on(backend))
    assert [type(g) for g in got] == [np.ndarray, np.ndarray]
    np.testing.assert_array_equal(got[1], np.argmax(x, axis=1))
    whole = pyreduce.reduce(d, first_max, map=pair, keepdims=True, **on(backend))
    assert [(type(g), g.shape) for g in whole] == [(np.ndarray, (1, 1))] * 2
    assert whole[1][0, 0] == np.argmax(x)
    with pytest.raises(ValueError, match="out= and device_result=True"):
        pyreduce.reduce(x, first_max, map=pair, keepdims=True, device_result=True,
                        **on(backend))
    squares = pyreduce.reduce(d, "add", map=square, axis=1, **on(backend))
    assert type(squares) is type(d)
    np.testing.assert_array_equal(squares.copy_to_host() if hasattr(squares, "copy_to_host")
                                  else squares.get(), (x * x).sum(axis=1))


def test_deterministic_along_axes_is_refused(backend):
    with pytest.raises(ValueError, match="deterministic=True"):
        pyreduce.reduce(ties((3, 4)), first_max, map=pair, axis=0, deterministic=True,
                        backend=backend)


# --------------------------------------------------------------------------
# The raw accumulators (pyreduce.manyvalues.reduce_axes_raw)


@pytest.mark.parametrize("axis,keepdims", [(1, False), (0, True), ((0, 2), False),
                                           ((0, 1, 2), False), ((0, 1, 2), True)])
def test_raw_accumulators(backend, axis, keepdims):
    """A record array of the result's shape, unfinished: argmax's ``(value,
    index)`` with the index within the lane, the moments' ``(count, shift,
    s, q)``; ``initial`` on the left; a scalar op's plain array; every axis
    reduced is one lane. The named monoids, which finish on the host, are
    refused along some axes by the splitting path."""
    x = ties((3, 40, 5), seed=8)
    x[1, 20:, 3] = 5  # the whole array's first maximum is not its first element
    axes = tuple(int(a) for a in np.atleast_1d(axis) % x.ndim)
    tuning = on(backend).get("tuning", Tuning())

    def raw(monoid, initial=None, data=x):
        return manyvalues.reduce_axes_raw(inspect(data), monoid, axes, keepdims, initial,
                                          backend, tuning, None)

    _, _, shape = lane_layout(x.shape, axis, keepdims)
    argmax = structured.argmax_monoid(x.dtype)
    got = raw(argmax)
    assert type(got) is np.ndarray and got.dtype == argmax.dtype and got.shape == shape
    assert got.dtype.names == ("f0", "f1")
    same((got["f0"], got["f1"]), lanes_oracle(x, first_max, pair, axis,
                                              keyed(x.dtype)[2], keepdims))
    got = raw(argmax, initial=(9.0, 99))
    assert (got["f0"] == 9.0).all() and (got["f1"] == 99).all()  # above every element
    moments = raw(structured.moments_monoid(x.dtype, "var"))
    f8 = np.float64
    n, shift, s, q = (moments[f] for f in ("f0", "f1", "f2", "f3"))  # shifted sums
    np.testing.assert_allclose(shift + s / n, np.mean(x, axis, f8, keepdims=keepdims),
                               rtol=1e-12)
    np.testing.assert_allclose((q - s * s / n) / n, np.var(x, axis, f8, keepdims=keepdims),
                               rtol=1e-10)
    summed = raw(make_monoid("add", x.dtype))
    assert summed.dtype == np.float32 and summed.shape == shape
    if len(axes) < x.ndim:  # (over every axis, reduce finishes the one value)
        with pytest.raises(ValueError, match="finishes its accumulators on the host"):
            pyreduce.reduce(x, argmax, axis=axis, backend=backend)
    empty = np.zeros(tuple(0 if a in axes else n for a, n in enumerate(x.shape)), x.dtype)
    with pytest.raises(ValueError, match="no identity"):
        raw(argmax, data=empty)
    identity = raw(structured.moments_monoid(x.dtype, "mean"), data=empty)
    assert identity.shape == lane_layout(empty.shape, axis, keepdims)[2]
    assert (identity["f0"] == 0).all()
