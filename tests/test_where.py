"""``where=`` against NumPy's ``where=`` (``np.sum(x, where=m)``, ...) on every
backend: shapes from 0-d to 3-D (0-sized axes included), axes (None, ints,
tuples, negatives), ``keepdims``, masks of ``x``'s shape and broadcast ones
(``(1, n)``, fewer axes, 0-d, Python bools), all-False masks, ``initial``, every
dtype kind; and ``reduce`` with a non-commutative operator against
``functools.reduce`` over the selected elements in C order.

Data are small integers, so that sums and products are exact in any order of
combination; NaN appears where the NaN-ignoring reductions are tested.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import adversarial as adv
import pyreduce
from oracles import P, affine, affine_data, lane_layout, on

pytestmark = pytest.mark.filterwarnings(
    # NumPy's oracles warn on empty means and integer wrap-around
    "ignore::RuntimeWarning",
)

DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int32, np.int64, np.uint8, np.uint64,
                                np.float16, np.float32, np.float64, np.complex64,
                                np.complex128)]
REAL = [d for d in DTYPES if d.kind != "c"]
FLOAT = [d for d in DTYPES if d.kind == "f"]


def _values(dt: np.dtype, shape: tuple, rng, nan: bool = False) -> np.ndarray:
    """Small integers of ``dt`` (0/1 for bool, non-negative for unsigned; real
    or imaginary for complex, so products stay exact), NaN among floats if
    ``nan``."""
    n = math.prod(shape)
    low = 0 if dt.kind in "bu" else -2
    v = rng.integers(low, 2 if dt.kind == "b" else 3, n).astype(dt)
    if dt.kind == "c":
        v[rng.random(n) < 0.5] *= 1j
    if nan and dt.kind == "f":
        v[rng.random(n) < 0.2] = np.nan
    return v.reshape(shape)


@st.composite
def cases(draw, dtypes, nan: bool = False, max_dims: int = 3):
    """``(x, where)``: ``x`` of 0 to ``max_dims`` axes of extent 0 to 5, and a
    mask that broadcasts to it: of its shape, with some axes 1 or leading axes
    dropped, 0-d, a Python bool, or all False."""
    dt = draw(st.sampled_from(dtypes), label="dtype")
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=max_dims), label="shape"))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = _values(dt, shape, rng, nan)
    kind = draw(st.sampled_from(["full", "full", "broadcast", "0-d", "bool", "none"]),
                label="mask")
    if kind == "bool":
        return x, draw(st.booleans())
    if kind == "0-d":
        return x, np.array(draw(st.booleans()))
    if kind == "none":
        return x, np.zeros(shape, dtype=bool)
    mshape = shape
    if kind == "broadcast" and shape:
        ones = draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
        mshape = tuple(1 if o else n for o, n in zip(ones, shape))
        mshape = mshape[draw(st.integers(0, len(shape))):]
    p = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    return x, rng.random(mshape) >= p


@st.composite
def axes_of(draw, ndim: int):
    """``axis=``: None, an int or a tuple of distinct axes, negatives included."""
    if ndim == 0:
        return draw(st.sampled_from([None, ()]))
    return draw(adv.axes(ndim))


def _copy(where):
    return where.copy() if isinstance(where, np.ndarray) else where


def _same(got, want, exact: bool = True, dtype: bool = True) -> None:
    """A plain result (never masked) against NumPy's: its shape, dtype (where
    ``dtype``) and values."""
    assert not isinstance(got, np.ma.MaskedArray) and got is not np.ma.masked
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    if dtype:
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
    g, w = g.astype(np.complex128), w.astype(np.complex128)
    if exact:
        assert np.array_equal(g, w, equal_nan=True), (g, w)
    else:
        assert np.allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True), (g, w)


def _numpy_kwargs(x: np.ndarray, name: str) -> dict:
    """pyreduce accumulates float16 sums and products in float32 (as the
    results' dtype): NumPy is asked for the same."""
    if x.dtype == np.float16 and name in ("sum", "prod", "nansum", "nanprod"):
        return {"dtype": np.float32}
    return {}


#: the reductions that take axis=, their NumPy twin and dtypes; max-like ones
#: need initial= with a mask
AXIS_NAMED = {
    "sum": (np.sum, DTYPES), "prod": (np.prod, DTYPES), "any": (np.any, DTYPES),
    "all": (np.all, DTYPES), "max": (np.max, REAL), "min": (np.min, REAL),
    "nanmax": (np.nanmax, REAL), "nanmin": (np.nanmin, REAL),
}
NEEDS_INITIAL = {"max", "min", "nanmax", "nanmin"}


@pytest.mark.parametrize("name", sorted(AXIS_NAMED))
@settings(deadline=None)
@given(data=st.data())
def test_named_reductions_match_numpy(backend, name, data):
    """Each named reduction with ``where=`` (with ``axis=``, ``keepdims=`` and,
    where it is taken, ``initial=``) is NumPy's: the same values, shape and
    dtype, as a plain array; the user's arrays are not modified."""
    fn, dtypes = AXIS_NAMED[name]
    x, where = data.draw(cases(dtypes, nan=name.startswith("nan")), label="case")
    axis = data.draw(axes_of(x.ndim), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    kwargs = dict(axis=axis, keepdims=keepdims, where=where)
    if name in NEEDS_INITIAL or (name in ("sum", "prod") and data.draw(st.booleans())):
        kwargs["initial"] = data.draw(st.integers(0 if x.dtype.kind in "bu" else -3,
                                                  1 if x.dtype.kind == "b" else 3))
    x0, w0 = x.copy(), _copy(where)
    want = fn(x, **kwargs, **_numpy_kwargs(x, name))
    got = getattr(pyreduce, name)(x, **kwargs, **on(backend))
    _same(got, want, dtype=x.dtype != np.float16)
    assert np.array_equal(x, x0, equal_nan=True)
    assert np.array_equal(where, w0)


#: the reductions to one value only: their NumPy twin, dtypes and exactness
ONE_VALUE = {
    "nansum": (np.nansum, DTYPES, True), "nanprod": (np.nanprod, DTYPES, True),
    "mean": (np.mean, REAL, False), "var": (np.var, REAL, False),
    "std": (np.std, REAL, False),
}


@pytest.mark.parametrize("name", sorted(ONE_VALUE))
@settings(deadline=None)
@given(data=st.data())
def test_one_value_reductions_match_numpy(backend, name, data):
    """nansum, nanprod, mean, var and std with ``where=``: NumPy's value of the
    selected elements; nothing selected is 0, 1 or NaN (with NumPy's
    RuntimeWarning for the mean)."""
    fn, dtypes, exact = ONE_VALUE[name]
    x, where = data.draw(cases(dtypes, nan=name.startswith("nan")), label="case")
    kwargs = _numpy_kwargs(x, name)
    if name in ("mean", "var", "std"):
        kwargs["dtype"] = np.float64  # pyreduce's moments accumulate in float64
    want = fn(x, where=where, **kwargs)
    got = getattr(pyreduce, name)(x, where=where, **on(backend))
    _same(got, want, exact, dtype=exact and x.dtype != np.float16)


def test_mean_of_nothing_selected_warns(backend):
    x = np.arange(6.0).reshape(2, 3)
    with pytest.warns(RuntimeWarning):
        assert np.isnan(pyreduce.mean(x, where=False, backend=backend))
    with pytest.warns(RuntimeWarning):
        assert np.isnan(pyreduce.var(x, where=np.zeros(3, bool), backend=backend))


def _lanes(x: np.ndarray, keep: np.ndarray, axis, keepdims: bool, op, first):
    """The oracle of ``reduce(x, op, axis=axis, where=keep)`` with ``op``'s
    identity ``first``: each lane's selected elements folded by
    ``functools.reduce`` in C order of the reduced axes."""
    perm, rows_shape, shape = lane_layout(x.shape, axis, keepdims)
    rows = x.transpose(perm).reshape(rows_shape)
    masks = keep.transpose(perm).reshape(rows_shape)
    out = np.array([functools.reduce(op, r[m], first) for r, m in zip(rows, masks)],
                   dtype=x.dtype)
    return out.reshape(shape)


@settings(deadline=None)
@given(data=st.data())
def test_reduce_with_an_order_sensitive_op(backend, data):
    """``reduce(x, op, where=m, identity=e)`` with a non-commutative ``op`` folds
    exactly the selected elements in C order, whole or per lane (a lane with
    none: the identity, or ``initial``, which is combined on the left of
    every lane); without identity or initial it is a ValueError."""
    n = data.draw(st.integers(0, 200), label="n")
    shape = data.draw(st.sampled_from([(n,), (2, -(-n // 2)), (3, 2, -(-n // 6))]),
                      label="shape")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = affine_data(math.prod(shape), int(rng.integers(2**31))).reshape(shape)
    p = data.draw(st.sampled_from([0.0, 0.5, 1.0]))
    mshape = data.draw(st.sampled_from([shape, shape[-1:], (1,) + shape[1:]]), label="mask")
    where = rng.random(mshape) >= p
    keep = np.broadcast_to(where, shape)
    x0, w0 = x.copy(), where.copy()
    one = affine_data(1, int(rng.integers(2**31)))[0]
    assert pyreduce.reduce(x, affine, P, where=where, **on(backend)) == \
        functools.reduce(affine, x[keep], P)
    assert pyreduce.reduce(x, affine, where=where, initial=one, **on(backend)) == \
        functools.reduce(affine, x[keep], one)
    with pytest.raises(ValueError, match="initial"):
        pyreduce.reduce(x, affine, where=where, **on(backend))
    axis = data.draw(axes_of(x.ndim), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    got = pyreduce.reduce(x, affine, P, axis=axis, keepdims=keepdims, where=where,
                          **on(backend))
    _same(got, _lanes(x, keep, axis, keepdims, affine, P))
    got = pyreduce.reduce(x, affine, axis=axis, keepdims=keepdims, where=where,
                          initial=one, **on(backend))
    _same(got, _lanes(x, keep, axis, keepdims, affine, one))
    assert np.array_equal(x, x0) and np.array_equal(where, w0)


@pytest.mark.parametrize("where", [True, np.True_, np.array(True), 1])
def test_where_true_is_the_call_without_it(backend, where):
    """A mask selecting everything as a scalar is no mask: the same results,
    and ``max`` needs no ``initial``."""
    x = np.arange(12.0).reshape(3, 4)
    assert pyreduce.max(x, where=where, backend=backend) == 11.0
    _same(pyreduce.sum(x, axis=0, where=where, backend=backend), np.sum(x, axis=0))


def test_where_false_empties_every_lane(backend):
    x = np.arange(12).reshape(3, 4)
    for where in (False, np.False_, np.array(False), 0, np.zeros((1, 4), bool)):
        _same(pyreduce.sum(x, axis=1, where=where, backend=backend), np.zeros(3, np.int64))
        _same(pyreduce.prod(x, where=where, backend=backend), np.int64(1))
        _same(pyreduce.min(x, axis=0, where=where, initial=7, backend=backend),
              np.full(4, 7))
        _same(pyreduce.any(x, where=where, backend=backend), np.False_)
        _same(pyreduce.all(x, axis=0, where=where, backend=backend), np.ones(4, bool))


def test_a_plain_call_still_repeats(prepares):
    """Without ``where=`` (or with ``where=True``) a plain call on a GPU backend
    takes the remembered decisions of :mod:`pyreduce.callmemo` on its repeat; a
    masked call of the same shape is never answered by them."""
    from numba import cuda

    if "sim" not in pyreduce.backends.available():
        pytest.skip("the simulator is not enabled")
    x = cuda.to_device(np.arange(100.0))
    for _ in range(3):
        assert pyreduce.sum(x, backend="sim") == 4950.0
    assert prepares[0] == 1
    for _ in range(2):
        assert pyreduce.reduce(x, "add", where=True, backend="sim") == 4950.0
    assert prepares[0] == 2
    m = np.arange(100) % 2 == 0
    assert pyreduce.sum(x, where=m, backend="sim") == 2450.0
    assert pyreduce.sum(x, where=~m, backend="sim") == 2500.0
    assert pyreduce.sum(x, backend="sim") == 4950.0
    assert prepares[0] == 2


def test_device_inputs_and_masks():
    """A device input with a host or device mask: the selected elements are
    reduced; an axis= result is a device array, as without where=."""
    from numba import cuda

    if "sim" not in pyreduce.backends.available():
        pytest.skip("the simulator is not enabled")
    x = np.arange(24.0).reshape(2, 3, 4)
    m = x % 3 != 1
    d = cuda.to_device(x)
    for mask in (m, cuda.to_device(m)):
        assert pyreduce.sum(d, where=mask, backend="sim") == np.sum(x, where=m)
        got = pyreduce.sum(d, axis=(0, 2), where=mask, backend="sim")
        assert hasattr(got, "copy_to_host")
        _same(got.copy_to_host(), np.sum(x, axis=(0, 2), where=m))
        got = pyreduce.max(d, where=mask, initial=-1.0, device_result=True, backend="sim")
        assert got.shape == () and got.copy_to_host() == np.max(x, where=m, initial=-1.0)
    out = np.zeros(3)
    assert pyreduce.sum(x, axis=(0, 2), where=m, out=out, backend="cpu") is out
    _same(out, np.sum(x, axis=(0, 2), where=m))


def test_masked_arrays_and_where(backend):
    """On a masked array an element counts when it is unmasked and selected;
    the masked-array rules apply, and the user's mask is left as it was."""
    x = np.ma.array([[1, 2, 3], [4, 5, 6]], mask=[[0, 1, 0], [1, 1, 0]])
    before = np.ma.getmaskarray(x).copy()
    where = np.array([True, True, False])
    assert pyreduce.sum(x, where=where, backend=backend) == 1
    got = pyreduce.sum(x, axis=1, where=where, backend=backend)
    assert got.tolist() == [1, None]
    assert np.array_equal(np.ma.getmaskarray(x), before)


@pytest.mark.parametrize("name", ["max", "min", "nanmax", "nanmin"])
def test_no_identity_needs_initial(name):
    """As in NumPy: an operator without identity and a mask, without
    ``initial``, is a ValueError, even where every lane has an element."""
    x = np.arange(6.0)
    with pytest.raises(ValueError) as numpy_error:
        getattr(np, name)(x, where=np.ones(6, bool))
    with pytest.raises(ValueError, match="no identity.*initial=") as ours:
        getattr(pyreduce, name)(x, where=np.ones(6, bool), backend="cpu")
    assert "identity" in str(numpy_error.value) and "_" not in str(ours.value).split("'")[0]
    assert getattr(pyreduce, name)(x, where=x > 2, initial=-1.0, backend="cpu") == \
        getattr(np, name)(x, where=x > 2, initial=-1.0)


def test_bad_masks():
    """A mask that does not broadcast is a ValueError naming both shapes; one
    that is not boolean a TypeError (NumPy 2 does not cast it either)."""
    x = np.arange(6).reshape(2, 3)
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        pyreduce.sum(x, where=np.ones((3, 2), bool), backend="cpu")
    with pytest.raises(ValueError):
        np.sum(x, where=np.ones((3, 2), bool))
    for bad in (np.array([1, 0, 1]), np.array([1.0, 0.0, 1.0])):
        with pytest.raises(TypeError):
            np.sum(x, where=bad)
        with pytest.raises(TypeError, match="boolean.*" + str(bad.dtype)):
            pyreduce.sum(x, where=bad, backend="cpu")
    for bad in (None, "yes", 2):
        with pytest.raises(TypeError, match="where="):
            pyreduce.sum(x, where=bad, backend="cpu")
    with pytest.raises(TypeError, match="argmax"):
        pyreduce.argmax(x, where=True)


def test_lists_of_bools():
    x = np.arange(6).reshape(2, 3)
    _same(pyreduce.sum(x, axis=1, where=[True, False, True], backend="cpu"),
          np.sum(x, axis=1, where=[True, False, True]))


def test_where_is_refused_where_not_taken():
    """``explain`` and the reductions of Dask arrays do not take ``where=``: a
    TypeError naming the function, not a mask silently ignored."""
    x = np.arange(6.0)
    with pytest.raises(TypeError, match=r"^explain\(\) .* 'where'"):
        pyreduce.explain(x, "add", where=x > 2, backend="cpu")
    da = pytest.importorskip("dask.array")
    for call in (lambda d: pyreduce.reduce(d, "add", where=x > 2),
                 lambda d: pyreduce.sum(d, where=x > 2)):
        with pytest.raises(TypeError, match="'where'"):
            call(da.from_array(x, chunks=3))
    assert float(pyreduce.reduce(da.from_array(x, chunks=3), "add", backend="cpu")) == 15.0


def test_map_index_counts_the_selected_elements(backend):
    """``map``'s index is the position among the selected elements (in
    ``x[mask]``), as for masked arrays."""
    x = np.arange(1.0, 9.0)
    keep = x % 3 != 0
    got = pyreduce.reduce(x, "add", where=keep, map=lambda i, v: v * i, **on(backend))
    assert got == np.sum(x[keep] * np.arange(keep.sum()))
