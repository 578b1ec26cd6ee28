"""Dask arrays (pyreduce/dask.py): lazy results, chunks reduced by pyreduce and
combined in order, against ``functools.reduce`` over each lane's C order and
NumPy, over random chunkings (uneven, empty chunks, 1-D to 3-D, every axis) with
Dask's synchronous scheduler, and across processes with ``distributed``."""

from __future__ import annotations

import functools
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from oracles import P, SIM_TUNING, affine, affine_data, last_nonzero

da = pytest.importorskip("dask.array")
import dask  # noqa: E402  (after the skip: the test extra installs it)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# example counts: PYREDUCE_EXAMPLES_SCALE times those below (see tests/conftest.py)
_PROFILE_SCALE = {"thorough": "10", "dev": "0.2"}.get(os.environ.get("HYPOTHESIS_PROFILE"), "1")
SCALE = float(os.environ.get("PYREDUCE_EXAMPLES_SCALE", _PROFILE_SCALE))


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


def compute(*results):
    """The values, computed by Dask's synchronous scheduler (in this thread)."""
    values = dask.compute(*results, scheduler="synchronous")
    return values[0] if len(values) == 1 else values


# --------------------------------------------------------------------------
# random chunkings


@st.composite
def chunking(draw, n: int) -> tuple:
    """Chunk sizes summing to ``n``, uneven, with empty chunks among them."""
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
    bounds = [0, *cuts, n]
    return tuple(b - a for a, b in zip(bounds, bounds[1:]))


@st.composite
def arrays(draw, max_ndim=3, max_extent=6, min_extent=0):
    """``(shape, chunks, axis)``: a shape of 1 to ``max_ndim`` axes, a chunking of
    each, and an ``axis=`` (None, an int, negative ones too, or a tuple)."""
    ndim = draw(st.integers(1, max_ndim))
    shape = tuple(draw(st.lists(st.integers(min_extent, max_extent), min_size=ndim,
                                max_size=ndim)))
    chunks = tuple(draw(chunking(n)) for n in shape)
    axis = draw(st.one_of(
        st.none(), st.integers(-ndim, ndim - 1),
        st.sets(st.integers(0, ndim - 1), min_size=1).map(tuple)))
    return shape, chunks, axis


def lanes(a: np.ndarray, axis) -> tuple[np.ndarray, tuple]:
    """``a``'s lanes as rows, each in C order of the reduced axes, and the kept shape."""
    axes = tuple(range(a.ndim)) if axis is None else tuple(
        sorted(d % a.ndim for d in ((axis,) if isinstance(axis, int) else axis)))
    kept = [d for d in range(a.ndim) if d not in axes]
    kept_shape = tuple(a.shape[d] for d in kept)
    k = math.prod(a.shape[d] for d in axes)
    return np.transpose(a, kept + list(axes)).reshape(math.prod(kept_shape), k), kept_shape


def fold_lanes(a, op, axis, keepdims=False, initial=None, identity=None, dtype=None):
    """The oracle: ``functools.reduce`` over each lane in C order, ``initial`` first."""
    rows, kept_shape = lanes(a, axis)
    start = () if initial is None else (initial,)
    out = np.array([functools.reduce(op, row, *start) if row.size or start else identity
                    for row in rows], dtype=dtype or a.dtype).reshape(kept_shape)
    if keepdims:
        out = out.reshape(np.sum(np.zeros(a.shape), axis=axis, keepdims=True).shape)
    return out


def runs(chunks) -> bool:
    """Whether each chunk is one run of the C order of the array (all axes
    reduced): the reduced axes before the last one split into several non-empty
    chunks have chunks of 1."""
    filled = [[c for c in axis if c] for axis in chunks]
    split = [a for a, axis in enumerate(filled) if len(axis) > 1]
    return all(max(filled[a], default=1) == 1 for a in range(split[-1] if split else 0))


def same(got, want):
    """Equal values (NaN equal to NaN), shapes and dtypes."""
    got = np.asarray(got)
    assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype, (got, want)
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------
# import and laziness


def test_import_pyreduce_does_not_import_dask():
    """Dask is an extra: importing pyreduce, and reducing NumPy arrays, leaves it
    unimported."""
    code = ("import sys, numpy as np, pyreduce; pyreduce.sum(np.ones(3), backend='cpu'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('dask', 'distributed')))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_results_are_lazy_dask_arrays():
    """Every reduction returns a Dask array (0-d for one value) and reads no chunk
    until computed."""
    reads = []

    def counted(block):
        reads.append(block.shape)
        return block

    data = np.random.default_rng(0).random((6, 8))
    x = da.from_array(data, chunks=(3, 4)).map_blocks(counted, meta=np.empty((0, 0)))
    results = {
        "reduce": pyreduce.reduce(x, lambda a, b: b if b != 0 else a, identity=0.0),
        "sum": pyreduce.sum(x, axis=0), "argmax": pyreduce.argmax(x), "var": pyreduce.var(x),
        "max": pyreduce.max(x, axis=1, keepdims=True), "nansum": pyreduce.nansum(x),
        "minmax": pyreduce.minmax(x)[0], "all": pyreduce.all(x), "mean": pyreduce.mean(x),
    }
    assert reads == []
    for name, r in results.items():
        assert isinstance(r, da.Array), name
    assert results["reduce"].shape == () and results["sum"].shape == (8,)
    assert results["max"].shape == (6, 1)
    compute(*results.values())
    assert len(reads) >= 4


def test_the_example_of_the_issue():
    """The calls users make, on a Dask array of random chunks."""
    x = da.random.random((2**14,), chunks=2**10)
    data = compute(x)
    last = pyreduce.reduce(x, op=lambda a, b: b if b != 0 else a, identity=0.0)
    assert compute(last) == data[-1]
    np.testing.assert_allclose(compute(pyreduce.sum(x, axis=0)), data.sum(), rtol=1e-12)
    assert compute(pyreduce.argmax(x)) == data.argmax()
    np.testing.assert_allclose(compute(pyreduce.var(x)), data.var(), rtol=1e-12)


# --------------------------------------------------------------------------
# order: non-commutative operators over random chunkings


@settings(max_examples=examples(40))
@given(case=arrays(), keepdims=st.booleans(), init=st.booleans(),
       split_every=st.sampled_from([None, 2, 3]), seed=st.integers(0, 2**16))
def test_affine_in_c_order(case, keepdims, init, split_every, seed):
    """The affine composition (associative, not commutative) over any chunking,
    axes and tree: exactly ``functools.reduce`` over each lane in C order, with
    ``initial`` once on the left and the identity where a lane is empty."""
    shape, chunks, axis = case
    data = affine_data(math.prod(shape), seed).reshape(shape)
    initial = int(affine_data(1, seed + 1)[0]) if init else None
    x = da.from_array(data, chunks=chunks)
    got = pyreduce.reduce(x, affine, 1 * P, axis=axis, keepdims=keepdims, initial=initial,
                          split_every=split_every)
    assert isinstance(got, da.Array)
    same(compute(got), fold_lanes(data, affine, axis, keepdims, initial, identity=1 * P))


@settings(max_examples=examples(25))
@given(case=arrays(min_extent=1), seed=st.integers(0, 2**16))
def test_selection_in_c_order(case, seed):
    """Last non-zero of sparse floats: picks the element C order says."""
    shape, chunks, axis = case
    rng = np.random.default_rng(seed)
    data = rng.random(shape) * (rng.random(shape) < 0.3)
    got = pyreduce.reduce(da.from_array(data, chunks=chunks), last_nonzero, axis=axis)
    same(compute(got), fold_lanes(data, last_nonzero, axis))


@pytest.mark.parametrize("chunks", [(2, 3, 4), (1, 1, 4), (1, 3, 2), (4, 1, 1), (3, 2, 1)])
def test_tuple_op_runs(chunks):
    """A user's tuple op (map=): exact where each chunk is one run of the C order;
    refused, saying how to rechunk, where it is not."""
    data = affine_data(4 * 3 * 4, seed=1).reshape(4, 3, 4)
    x = da.from_array(data, chunks=chunks)

    def pair(a, b):  # the last non-zero, and a sum
        return (b[0] if b[0] != 0 else a[0], a[1] + b[1])

    if not runs(x.chunks):
        with pytest.raises(ValueError, match=r"rechunk"):
            pyreduce.reduce(x, pair, map=lambda i, v: (v % 3, v % 7))
        return
    got = compute(*pyreduce.reduce(x, pair, map=lambda i, v: (v % 3, v % 7)))
    flat = data.ravel()
    assert got == (functools.reduce(last_nonzero, flat % 3), (flat % 7).sum())


# --------------------------------------------------------------------------
# the named reductions against NumPy


NAMED = ["sum", "prod", "max", "min", "nanmax", "nanmin", "any", "all"]


def numeric(shape, seed, dt):
    rng = np.random.default_rng(seed)
    if np.dtype(dt).kind == "f":
        a = rng.standard_normal(shape).astype(dt)
        a[rng.random(shape) < 0.1] = np.nan
        return a
    return rng.integers(-3, 4, shape).astype(dt)


@pytest.mark.parametrize("name", ["max", "min", "sum"])
def test_an_empty_chunk_of_a_kept_axis(name):
    """A chunk of size 0 along an axis that is kept: Dask's reshape of the
    partials left an empty block along the folded axis, and folding it asked
    max for an identity it has not."""
    for shape, chunks in (((1, 1, 1), ((1,), (1,), (0, 1))),
                          ((1, 2, 3), ((1,), (1, 1), (0, 1, 2)))):
        x = np.arange(float(np.prod(shape))).reshape(shape)[..., ::-1]
        d = da.from_array(x, chunks=chunks)
        for axis in ((0, 1), 1):
            got = getattr(pyreduce, name)(d, axis=axis).compute()
            np.testing.assert_array_equal(got, getattr(np, name)(x, axis=axis))


@settings(max_examples=examples(30))
@given(case=arrays(min_extent=1), name=st.sampled_from(NAMED), keepdims=st.booleans(),
       dt=st.sampled_from([np.float64, np.int32, np.float32]), seed=st.integers(0, 2**16))
def test_named_like_numpy(case, name, keepdims, dt, seed):
    """Values, dtypes and shapes of NumPy's reductions, NaN policy included."""
    shape, chunks, axis = case
    data = numeric(shape, seed, dt)
    got = compute(getattr(pyreduce, name)(da.from_array(data, chunks=chunks), axis=axis,
                                          keepdims=keepdims))
    want = getattr(np, name)(data, axis=axis, keepdims=keepdims)
    assert np.asarray(got).shape == np.shape(want) and np.asarray(got).dtype == want.dtype
    if name in ("sum", "nansum") and dt == np.float32:
        # float32 additions in another order: within a sum's error bound, which
        # is relative to the sum of the magnitudes, not to the sum (one that
        # nearly cancelled was 1.03e-5 off relative to itself)
        scale = np.nansum(np.abs(data).astype(np.float64), axis=axis, keepdims=keepdims)
        g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
        with np.errstate(invalid="ignore"):
            close = (np.abs(g - w) <= 1e-5 * scale) | (g == w) | (np.isnan(g) & np.isnan(w))
        assert np.all(close), (got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5)


@settings(max_examples=examples(30))
@given(case=arrays(min_extent=1), seed=st.integers(0, 2**16),
       dt=st.sampled_from([np.float64, np.float32, np.int16, np.complex128]))
def test_structured_like_numpy(case, seed, dt):
    """argmax/argmin: global flat indices (ties: the first; NaN: the first NaN);
    mean/var/std from merged (count, shift, s, q) partials; minmax; nansum/nanprod.
    Complex minmax, which returns the first NaN in C order (not commutative),
    needs chunks that are runs of the C order and refuses others."""
    shape, chunks, _ = case
    data = numeric(shape, seed, dt if dt != np.complex128 else np.float64)
    if dt == np.complex128:
        data = data + 1j * numeric(shape, seed + 1, np.float64)
    x = da.from_array(data, chunks=chunks)
    got = compute(pyreduce.argmax(x), pyreduce.argmin(x), pyreduce.mean(x),
                  pyreduce.var(x, ddof=1), pyreduce.std(x), pyreduce.nansum(x),
                  pyreduce.nanprod(x))
    want = (np.argmax(data), np.argmin(data), np.mean(data), np.var(data, ddof=1),
            np.std(data), np.nansum(data), np.nanprod(data))
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype, (g, w)
    assert got[:2] == want[:2]
    tol = 1e-5 if dt == np.float32 else 1e-9  # a mean near 0 differs in the last bits
    np.testing.assert_allclose(got[2:], want[2:], rtol=tol, atol=tol)
    if dt == np.complex128 and not runs(chunks):
        with pytest.raises(ValueError, match=r"x.rechunk\("):
            pyreduce.minmax(x)
    else:
        same(compute(*pyreduce.minmax(x)), (np.min(data), np.max(data)))


def test_argmax_index_is_global_in_every_chunk():
    """The maximum in each chunk of a 3-D grid in turn: its global flat index."""
    shape, chunks = (5, 4, 6), (2, 3, 4)
    for at in range(0, 5 * 4 * 6, 7):
        data = np.zeros(shape)
        data.flat[at] = 1.0
        data.flat[(at * 13) % data.size] = -1.0
        x = da.from_array(data, chunks=chunks)
        assert compute(pyreduce.argmax(x), pyreduce.argmin(x)) == (np.argmax(data),
                                                                   np.argmin(data))


def test_half_and_bfloat16_chunks():
    """float16 and bfloat16 chunks accumulate in float32, as for one array."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    data = np.random.default_rng(4).random(1000)
    for dt in (np.float16, ml_dtypes.bfloat16):
        x = da.from_array(data.astype(dt), chunks=130)
        got = compute(pyreduce.sum(x), pyreduce.max(x), pyreduce.mean(x))
        want = (pyreduce.sum(data.astype(dt), backend="cpu"),
                pyreduce.max(data.astype(dt), backend="cpu"),
                pyreduce.mean(data.astype(dt), backend="cpu"))
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6)


# --------------------------------------------------------------------------
# empty arrays and empty chunks


def test_empty_arrays():
    """No elements: initial, else the identity, else NumPy's ValueError, raised at
    the call (as NumPy does, even where the result has no elements); the mean of
    nothing is NaN with NumPy's warning, when computed."""
    e = da.from_array(np.zeros((0, 3)), chunks=((0,), (2, 1)))
    same(compute(pyreduce.sum(e)), np.float64(0))
    same(compute(pyreduce.sum(e, axis=0)), np.zeros(3))
    same(compute(pyreduce.max(e, axis=1)), np.zeros(0))
    same(compute(pyreduce.reduce(e, affine, initial=7, axis=0, dtype=np.int64)),
         np.full(3, 7))
    with pytest.raises(ValueError, match="empty"):
        pyreduce.max(e)
    with pytest.raises(ValueError, match="empty"):
        pyreduce.max(e, axis=0)
    with pytest.raises(ValueError, match="empty"):
        pyreduce.argmax(e)
    with pytest.raises(ValueError, match="empty"):
        pyreduce.reduce(e, affine)
    mean = pyreduce.mean(e)
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        assert np.isnan(compute(mean))


def test_empty_chunks_between_data():
    """Chunks of extent 0 along a reduced axis stand for nothing (max has no
    identity to stand for them)."""
    data = affine_data(12, seed=3).reshape(3, 4)
    x = da.from_array(data, chunks=((0, 2, 0, 1, 0), (0, 4, 0)))
    same(compute(pyreduce.max(x)), data.max())
    same(compute(pyreduce.reduce(x, affine, axis=1)), fold_lanes(data, affine, 1))
    assert compute(pyreduce.argmin(x)) == np.argmin(data)


def test_nan_policy_across_chunks():
    """NaN rules hold across chunks: a chunk's NaN partial (inf - inf) is not an
    element for nansum to drop; max propagates a NaN from any chunk, nanmax ignores
    an all-NaN chunk; argmax finds the first NaN in C order."""
    inf, nan = np.inf, np.nan
    data = np.array([[inf, -inf, 1.0], [2.0, nan, 3.0], [nan, nan, nan], [4.0, 5.0, 6.0]])
    x = da.from_array(data, chunks=(1, 2))
    flat = da.from_array(data[:1, :2].ravel().tolist() + [1.0, 2.0], chunks=2)
    got = compute(pyreduce.nansum(flat), pyreduce.max(x, axis=1), pyreduce.nanmax(x, axis=1),
                  pyreduce.nanmin(x), pyreduce.argmax(x), pyreduce.argmin(x[1:]))
    want = (np.nansum([inf, -inf, 1.0, 2.0]), np.max(data, axis=1),
            np.nanmax(data, axis=1), np.nanmin(data), np.argmax(data), np.argmin(data[1:]))
    for g, w in zip(got, want):
        same(g, w)


def test_zero_dimensional():
    """A 0-d array is one element: reduced to a scalar, keepdims or not."""
    x = da.from_array(np.array(2.5))
    same(compute(pyreduce.sum(x)), np.float64(2.5))
    assert compute(pyreduce.argmax(x)) == 0
    data = affine_data(2, seed=4)
    got = pyreduce.reduce(da.from_array(data[0]), affine, initial=data[1], keepdims=True)
    same(compute(got), np.int64(affine(data[1], data[0])))


def test_axis_empty_tuple_casts_each_element():
    data = np.arange(6, dtype=np.int16).reshape(2, 3)
    got = pyreduce.reduce(da.from_array(data, chunks=(1, 2)), "add", axis=(), initial=1,
                          dtype=np.int64)
    same(compute(got), data.astype(np.int64) + 1)


# --------------------------------------------------------------------------
# deterministic=True


@pytest.mark.parametrize("shape,chunks,split_every", [
    ((1000,), 64, 2), ((1000,), 256, 8), ((1000,), 16, None), ((1024,), 4, 4),
    ((30, 64), (1, 64), 2), ((30, 64), (1, 32), 4), ((30, 64), (2, 64), 2), ((7,), 7, None),
    ((100,), 1000, 2),
])
def test_deterministic_gives_the_single_arrays_bits(shape, chunks, split_every):
    """Chunks of ``4 * 2**k`` consecutive elements (the last shorter) continue the
    single array's tree: the same bits as ``reference`` and as one array."""
    rng = np.random.default_rng(7)
    data = (rng.standard_normal(shape) * np.exp(rng.uniform(-8, 8, shape))).astype(np.float32)
    x = da.from_array(data, chunks=chunks)
    got = compute(pyreduce.sum(x, deterministic=True, split_every=split_every),
                  pyreduce.reduce(x, "add", deterministic=True, initial=np.float32(0.5)))
    want = (pyreduce.sum(data, deterministic=True, backend="cpu"),
            pyreduce.reduce(data, "add", deterministic=True, initial=np.float32(0.5),
                            backend="cpu"))
    assert got[0].tobytes() == want[0].tobytes() == pyreduce.reference(data, "add").tobytes()
    assert got[1].tobytes() == want[1].tobytes()


@pytest.mark.parametrize("shape,chunks,kwargs", [
    ((1000,), 60, {}), ((1000,), (500, 500), {}), ((1000,), 2, {}),
    ((1000,), 64, {"split_every": 3}), ((30, 64), (1, 64), {"axis": 1}),
    ((30, 64), (2, 32), {}), ((30, 64), (3, 64), {}),
])
def test_deterministic_refuses_other_chunkings(shape, chunks, kwargs):
    """Chunks the tree cannot continue, a split_every that groups nodes unevenly,
    axis=: a ValueError, not other bits."""
    x = da.from_array(np.ones(shape, np.float32), chunks=chunks)
    with pytest.raises(ValueError, match="deterministic=True"):
        pyreduce.sum(x, deterministic=True, **kwargs)


def test_deterministic_chunked_sum_differs_from_the_plain_fold():
    """What the pairwise tree buys: on data where grouping matters, the chunked
    deterministic sum matches the single array's bits where a left-to-right fold
    of the chunks' sums does not."""
    data = np.float32([1e8, 1, -1e8, 1] * 64 + [3.0, 1e-3] * 32)
    x = da.from_array(data, chunks=16)
    got = compute(pyreduce.sum(x, deterministic=True, split_every=2))
    sequential = functools.reduce(np.add, [pyreduce.sum(data[i:i + 16], deterministic=True,
                                                        backend="cpu")
                                           for i in range(0, data.size, 16)])
    want = pyreduce.reference(data, "add")
    assert got.tobytes() == want.tobytes()
    assert sequential.tobytes() != want.tobytes()


# --------------------------------------------------------------------------
# keywords and errors


def test_refused_keywords():
    x = da.ones(10, chunks=3)
    for kwargs, what in (({"out": np.empty(())}, "out="), ({"device_result": True},
                         "device_result="), ({"stream": 0}, "stream=")):
        with pytest.raises(ValueError, match=what):
            pyreduce.sum(x, **kwargs)
    with pytest.raises(TypeError, match=r"sum\(\) got an unexpected keyword argument 'bogus'"):
        pyreduce.sum(x, bogus=1)
    with pytest.raises(TypeError, match=r"argmax\(\) of a Dask array reduces every element: "
                                        r"axis= not taken"):
        pyreduce.argmax(x, axis=0)
    with pytest.raises(TypeError, match=r"mean\(\) got an unexpected keyword argument 'ddof'"):
        pyreduce.mean(x, ddof=1)
    same(compute(pyreduce.sum(x, device_result=np.False_, out=None)), np.float64(10))
    with pytest.raises(TypeError, match="split_every= must be an int"):
        pyreduce.sum(x, split_every=1)
    with pytest.raises(TypeError, match="split_every= applies to Dask arrays"):
        pyreduce.reduce(np.ones(3), "add", split_every=4)
    with pytest.raises(ValueError, match="unknown backend"):
        pyreduce.max(x, backend="gpu")
    with pytest.raises(ValueError, match="block_size"):
        pyreduce.max(x, block_size=3)  # the deprecated keyword, checked before its warning
    with pytest.raises(ValueError, match="name two variants"):
        pyreduce.max(x, variant="naive", tuning=pyreduce.Tuning(variant="last_block"))
    with pytest.raises(TypeError, match="tuning= must be a pyreduce.Tuning"):
        pyreduce.argmax(x, tuning={"block_size": 64})
    with pytest.raises(TypeError, match="initial=0.5 is not a whole number"):
        pyreduce.sum(x.astype(np.int32), initial=0.5)
    with pytest.raises(TypeError, match="dask.array.Array"):
        pyreduce.sum(dask.delayed(np.ones)(3))


def test_unknown_chunk_sizes():
    x = da.from_array(np.arange(10.0), chunks=3)
    y = x[x > 4]
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        pyreduce.sum(y)
    same(compute(pyreduce.sum(y.compute_chunk_sizes())), np.float64(35))


def test_map_of_the_value_only():
    """map= sees chunk-local indices: a map of the value alone works, one that
    reads its index is refused."""
    data = np.arange(20.0)
    x = da.from_array(data, chunks=6)
    same(compute(pyreduce.reduce(x, "add", map=lambda i, v: v * v)), (data * data).sum())
    with pytest.raises(ValueError, match="reads its index argument 'i'"):
        pyreduce.reduce(x, "add", map=lambda i, v: v * i)
    with pytest.raises(ValueError, match="axis="):
        pyreduce.reduce(x.reshape(4, 5), "add", map=lambda i, v: v * v, axis=0)


def test_check_runs_before_the_graph():
    x = da.ones(10, chunks=3)
    with pytest.raises(ValueError, match="associativity law"):
        pyreduce.reduce(x, lambda a, b: a - b, check=True)


@pytest.mark.sim
def test_simulated_kernels_on_chunks():
    """An explicit backend is honoured: the simulator's kernels on each chunk and on
    the partials (a user op and argmax)."""
    data = affine_data(300, seed=8)
    x = da.from_array(data, chunks=(90, 110, 100))
    kw = dict(backend="sim", tuning=SIM_TUNING)
    assert compute(pyreduce.reduce(x, affine, **kw)) == functools.reduce(affine, data)
    assert compute(pyreduce.argmax(x, **kw)) == np.argmax(data)


# --------------------------------------------------------------------------
# other processes: distributed


@pytest.fixture(scope="module")
def cluster_client():
    """A two-process ``distributed`` cluster for this module, closed at its end."""
    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, death_timeout=60)
        client = distributed.Client(cluster, timeout=60)
    yield client
    client.close(timeout=30)
    cluster.close(timeout=30)


def test_closures_and_structured_across_processes(cluster_client):
    """A user's closure (over a value) and pyreduce's own operators travel to
    worker processes, by cloudpickle as Dask ships them; the results are those of
    one process."""
    data = np.random.default_rng(11).integers(0, 1000, 240).astype(np.int64)
    scale = 3

    def last_multiple(a, b):  # the last multiple of scale (the first element if none)
        return b if b % scale == 0 else a

    x = da.from_array(data, chunks=35)
    grid = da.from_array(data.reshape(6, 40), chunks=(4, 15))
    futures = cluster_client.compute([
        pyreduce.reduce(x, last_multiple, split_every=2), pyreduce.argmax(grid),
        pyreduce.var(grid), pyreduce.sum(grid, axis=0, split_every=2)])
    from distributed import wait

    wait(futures, timeout=180)  # a TimeoutError, not a hang
    got = cluster_client.gather(futures)
    assert got[0] == functools.reduce(last_multiple, data)
    assert got[1] == np.argmax(data)
    np.testing.assert_allclose(got[2], np.var(data), rtol=1e-12)
    same(got[3], data.reshape(6, 40).sum(axis=0))


# --------------------------------------------------------------------------
# a GPU: CuPy chunks


@pytest.mark.gpu
def test_cupy_chunks_on_the_gpu():
    """CuPy chunks are reduced on the GPU: full reductions to host values, axis
    reductions to CuPy arrays, user ops in order."""
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(12)
    data = rng.standard_normal((300, 700)).astype(np.float32)
    x = da.from_array(data, chunks=(128, 256)).map_blocks(cp.asarray)
    with dask.config.set(scheduler="threads"):
        total, where, var, cols = dask.compute(
            pyreduce.sum(x), pyreduce.argmax(x), pyreduce.var(x), pyreduce.max(x, axis=0))
        last = pyreduce.reduce(x, lambda a, b: b if b > 0 else a, identity=np.float32(0),
                               axis=1).compute()
    np.testing.assert_allclose(total, data.sum(dtype=np.float64), rtol=1e-4)
    assert where == np.argmax(data)
    np.testing.assert_allclose(var, data.var(), rtol=1e-5)
    assert isinstance(cols, cp.ndarray)
    same(cp.asnumpy(cols), data.max(axis=0))
    same(cp.asnumpy(last), fold_lanes(data, lambda a, b: b if b > 0 else a, 1))
