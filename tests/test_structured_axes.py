"""argmax, argmin, minmax, mean, var and std with NumPy's keywords (axis,
keepdims, out, dtype, where, ddof/correction; pyreduce.along) against NumPy, on
every backend: random values with ties and NaN, every axis of 1- to 3-D
inputs, transposed and reversed layouts, masked arrays; and the errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce

from oracles import on

DTYPES = [np.float32, np.float64, np.int16, np.complex64]
SHAPES = [(7,), (5, 33), (3, 65, 2), (1, 4, 1)]


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, shape).astype(np.float64)  # small values: ties
    if np.dtype(dtype).kind in "fc":
        x[rng.random(shape) < 0.05] = np.nan
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.integers(-2, 3, shape)
    return x.astype(dtype)


def _layout(x, name):
    return {"C": x, "T": x.T, "reversed": x[::-1]}[name]


def _same(got, want, exact):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if exact:
        assert np.array_equal(got, want, equal_nan=got.dtype.kind in "fc"), (got, want)
    else:
        tol = 1e-5 if got.dtype in (np.float32, np.complex64) else 1e-12
        assert np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True), (got, want)


@settings(max_examples=12, deadline=None)
@given(shape=st.sampled_from(SHAPES), dtype=st.sampled_from(DTYPES),
       layout=st.sampled_from(["C", "T", "reversed"]), seed=st.integers(0, 2**31),
       data=st.data())
def test_along_every_axis_as_numpy(backend, shape, dtype, layout, seed, data):
    x = _layout(_data(shape, dtype, seed), layout)
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1) | st.none(), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    kw = on(backend)
    for name in ("argmax", "argmin"):
        got = getattr(pyreduce, name)(x, axis=axis, keepdims=keepdims, **kw)
        want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
        _same(got, want, exact=True)
        assert np.asarray(got).dtype == np.intp
    lo, hi = pyreduce.minmax(x, axis=axis, keepdims=keepdims, **kw)
    if np.dtype(dtype).kind != "c":  # NumPy's complex min picks among NaNs by memory order
        _same(lo, np.min(x, axis=axis, keepdims=keepdims), exact=True)
        _same(hi, np.max(x, axis=axis, keepdims=keepdims), exact=True)
    ddof = data.draw(st.integers(0, 2), label="ddof")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        wide = x.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
        m = pyreduce.mean(x, axis=axis, keepdims=keepdims, **kw)
        _same(m, np.mean(wide, axis=axis, keepdims=keepdims), exact=False)
        assert m.dtype == pyreduce.mean(x, **kw).dtype
        v = pyreduce.var(x, axis=axis, ddof=ddof, keepdims=keepdims, **kw)
        _same(v, np.var(wide, axis=axis, ddof=ddof, keepdims=keepdims), exact=False)
        s = pyreduce.std(x, axis=axis, correction=ddof, keepdims=keepdims, **kw)
        _same(s, np.std(wide, axis=axis, ddof=ddof, keepdims=keepdims), exact=False)


def test_tuple_axes_out_dtype_and_where(backend):
    x = _data((4, 6, 5), np.float64, 3)
    x = np.nan_to_num(x)
    kw = on(backend)
    _same(pyreduce.mean(x, axis=(0, 2), **kw), np.mean(x, axis=(0, 2)), exact=False)
    _same(pyreduce.var(x, axis=(2, 0), keepdims=True, **kw),
          np.var(x, axis=(0, 2), keepdims=True), exact=False)
    out = np.empty(6, np.float32)
    got = pyreduce.std(x, axis=(0, 2), dtype=np.float32, out=out, **kw)
    assert got is out and out.dtype == np.float32
    _same(out, np.std(x, axis=(0, 2)).astype(np.float32), exact=False)
    where = x > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _same(pyreduce.mean(x, axis=1, where=where, **kw), np.mean(x, axis=1, where=where),
              exact=False)
        _same(pyreduce.var(x, axis=2, where=where, ddof=1, **kw),
              np.var(x, axis=2, where=where, ddof=1), exact=False)
    idx = np.empty((4, 5), np.intp)
    assert pyreduce.argmax(x, axis=1, out=idx, **kw) is idx
    _same(idx, np.argmax(x, axis=1), exact=True)
    lo, hi = np.empty(4), np.empty(4)
    got = pyreduce.minmax(x, axis=(1, 2), out=(lo, hi), **kw)
    assert got[0] is lo and got[1] is hi
    _same(lo, x.min(axis=(1, 2)), exact=True)
    _same(hi, x.max(axis=(1, 2)), exact=True)
    # one value, shaped or written
    _same(pyreduce.mean(x, keepdims=True, **kw), np.mean(x, keepdims=True), exact=False)
    one = np.empty((), np.float32)
    assert pyreduce.var(x, out=one, dtype=np.float32, **kw) is one
    _same(one, np.float32(np.var(x)), exact=False)


def test_masked_arrays_along_axes(backend):
    x = _data((6, 9), np.float64, 5)
    x = np.nan_to_num(x)
    mask = np.random.default_rng(1).random(x.shape) < 0.4
    mask[2] = True  # a lane with nothing unmasked
    m = np.ma.MaskedArray(x, mask=mask)
    kw = on(backend)
    got = pyreduce.mean(m, axis=1, **kw)
    want = np.ma.mean(m, axis=1)
    assert isinstance(got, np.ma.MaskedArray)
    assert np.array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(want))
    assert np.allclose(got.compressed(), want.compressed())
    got = pyreduce.var(m, axis=0, **kw)
    want = np.ma.var(m, axis=0)
    assert np.allclose(np.ma.filled(got, -1), np.ma.filled(want, -1))
    for axis in (0, 1):  # masked elements read as the lowest (highest) value
        _same(pyreduce.argmax(m, axis=axis, **kw), np.ma.argmax(m, axis=axis), exact=True)
        _same(pyreduce.argmin(m, axis=axis, **kw), np.ma.argmin(m, axis=axis), exact=True)


def test_errors_name_the_call():
    x = np.arange(12.0).reshape(3, 4)
    with pytest.raises(TypeError, match=r"argmax\(\) takes an int axis"):
        pyreduce.argmax(x, axis=(0, 1), backend="cpu")
    with pytest.raises(np.exceptions.AxisError):
        pyreduce.mean(x, axis=2, backend="cpu")
    with pytest.raises(ValueError, match="out= must be a tuple of 2"):
        pyreduce.minmax(x, axis=0, out=np.empty(4), backend="cpu")
    with pytest.raises(ValueError, match="ddof= and correction="):
        pyreduce.var(x, axis=0, ddof=1, correction=1, backend="cpu")
    with pytest.raises(ValueError):  # an empty lane has no argmax
        pyreduce.argmax(np.empty((3, 0)), axis=1, backend="cpu")
    with pytest.raises(TypeError, match="mean"):
        pyreduce.mean(x, axis=0, bogus=1, backend="cpu")


@settings(max_examples=8, deadline=None)
@given(shape=st.sampled_from(SHAPES[1:]), dtype=st.sampled_from([np.float32, np.float64]),
       layout=st.sampled_from(["C", "T"]), seed=st.integers(0, 2**31), data=st.data())
def test_nan_statistics_along_axes(backend, shape, dtype, layout, seed, data):
    x = _layout(_data(shape, dtype, seed), layout)
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    kw = on(backend)
    wide = x.astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _same(pyreduce.nanmean(x, axis=axis, keepdims=keepdims, **kw),
              np.nanmean(wide, axis=axis, keepdims=keepdims), exact=False)
        _same(pyreduce.nanvar(x, axis=axis, ddof=1, keepdims=keepdims, **kw),
              np.nanvar(wide, axis=axis, ddof=1, keepdims=keepdims), exact=False)
        _same(pyreduce.nanstd(x, axis=axis, keepdims=keepdims, **kw),
              np.nanstd(wide, axis=axis, keepdims=keepdims), exact=False)
    _same(pyreduce.ptp(x, axis=axis, keepdims=keepdims, **kw),
          np.ptp(x, axis=axis, keepdims=keepdims), exact=True)
    lanes = np.isnan(x).all(axis=axis)
    for name in ("nanargmax", "nanargmin"):
        if lanes.any():  # NumPy's error for an all-NaN lane
            with pytest.raises(ValueError, match="All-NaN slice"):
                getattr(pyreduce, name)(x, axis=axis, **kw)
        else:
            _same(getattr(pyreduce, name)(x, axis=axis, keepdims=keepdims, **kw),
                  getattr(np, name)(x, axis=axis, keepdims=keepdims), exact=True)
