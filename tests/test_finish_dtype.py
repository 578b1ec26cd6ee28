"""``dtype=`` of the statistics that finish in a wider type than their default
result (mean, var, std and their NaN-ignoring counterparts): the values are
rounded once, to the dtype asked for, on every path that finishes them (one
value, along axes on the host, the finishing kernel, the kernel that writes the
outputs, a remembered repeat); a complex ``dtype=`` of real input gives what
NumPy's complex arithmetic gives, infinite and NaN results included."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import pyreduce
from oracles import on

MOMENTS = ["mean", "var", "std", "nanmean", "nanvar", "nanstd"]


def _device(x, backend):
    if backend == "cpu":
        return x
    from numba import cuda

    return cuda.to_device(x)


def _host(r):
    return r.copy_to_host() if hasattr(r, "copy_to_host") else np.asarray(r)


def _numpy(name, x, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(np, name)(x, **kw)


def _pyreduce(name, x, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(pyreduce, name)(x, **kw)


def _float32_data(shape, seed=0):
    """float32 values far from 0 with a small spread: a float32 rounding of
    the result is a relative error near 1e-8, float64's near 1e-16."""
    rng = np.random.default_rng(seed)
    return (1e4 + 10 * rng.standard_normal(shape)).astype(np.float32)


# shapes around the simulator tuning's block of 64 and the rows/columns plans
SHAPES_AXES = [((5, 300), 1), ((5, 300), 0), ((3, 70, 4), 1), ((257,), None), ((6, 7), None)]


@pytest.mark.parametrize("name", MOMENTS)
@pytest.mark.parametrize("shape,axis", SHAPES_AXES)
def test_a_float64_dtype_of_float32_input_is_rounded_once(backend, name, shape, axis):
    x = _float32_data(shape)
    x.flat[3] = np.nan if name.startswith("nan") else x.flat[3]
    kw = {"ddof": 1} if name.endswith(("var", "std")) else {}
    want = _numpy(name, x.astype(np.float64), axis=axis, **kw)
    for given in ({}, {"device_result": True}) if backend != "cpu" else ({},):
        got = _pyreduce(name, _device(x, backend), axis=axis, dtype=np.float64,
                        **on(backend), **kw, **given)
        got = _host(got)
        assert got.dtype == np.float64
        # float32 rounding on the way would be a relative error near 1e-8
        assert np.allclose(got, want, rtol=1e-12, atol=0, equal_nan=True), (got, want)


@pytest.mark.sim
@pytest.mark.parametrize("name", ["mean", "var", "std"])
def test_a_plain_device_call_with_dtype_and_its_repeat(name):
    """The call that goes straight to its remembered decisions (no keyword but
    ``axis``, ``dtype``) finishes in ``dtype`` too, the first time and again."""
    x = _float32_data((4, 130), seed=2)
    want = _numpy(name, x.astype(np.float64), axis=1)
    d = _device(x, "sim")
    for _ in range(2):
        got = _host(getattr(pyreduce, name)(d, axis=1, dtype=np.float64))
        assert got.dtype == np.float64
        assert np.allclose(got, want, rtol=1e-12, atol=0), (got, want)
    # and the default dtype, after it: float32, not the remembered float64
    assert _host(getattr(pyreduce, name)(d, axis=1)).dtype == np.float32


EDGES = [np.inf, -np.inf, np.nan, 1.0, -2.0]


def _same(got, want):
    """Equal as NumPy's, part by part, NaN where NumPy has NaN (inf+nanj is not
    inf+0j), with a relative tolerance for rounding."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        assert np.array_equal(np.isnan(g), np.isnan(w)), (got, want)
        assert np.allclose(g, w, rtol=1e-6, atol=0, equal_nan=True), (got, want)


@pytest.mark.parametrize("name", MOMENTS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_a_complex_dtype_of_real_input_as_numpy(backend, name, dtype):
    """Every pair of edge values (and one of them alone, where no degree of
    freedom is left), one value and along an axis."""
    ddofs = (0, 1, 2) if name.endswith(("var", "std")) else (None,)
    rows = [np.array(p, np.float32) for p in itertools.product(EDGES, repeat=2)]
    lanes = np.stack(rows)  # one lane per pair: along axis 1
    for ddof in ddofs:
        kw = {} if ddof is None else {"ddof": ddof}
        want = _numpy(name, lanes, axis=1, dtype=dtype, **kw)
        got = _host(_pyreduce(name, _device(lanes, backend), axis=1, dtype=dtype,
                              **on(backend), **kw))
        _same(got, want)
        for row in rows[:: 7]:
            want = _numpy(name, row, dtype=dtype, **kw)
            got = _pyreduce(name, row, dtype=dtype, **on(backend), **kw)
            _same(got, want)


@pytest.mark.parametrize("name", MOMENTS)
def test_complex_input_to_complex128(backend, name):
    rng = np.random.default_rng(5)
    z = (rng.standard_normal((3, 90)) + 1j * rng.standard_normal((3, 90))).astype(np.complex64)
    z = z + (1e3 + 1e3j)
    kw = {"ddof": 1} if name.endswith(("var", "std")) else {}
    # NumPy's result dtype for var/std of complex input with a complex dtype=
    want = _numpy(name, z.astype(np.complex128), axis=1, dtype=np.complex128, **kw)
    got = _host(_pyreduce(name, _device(z, backend), axis=1, dtype=np.complex128,
                          **on(backend), **kw))
    assert got.dtype == want.dtype
    assert np.allclose(got, want, rtol=1e-12, atol=0), (got, want)


@pytest.mark.parametrize("name", ["mean", "nanmean"])
def test_a_real_dtype_of_a_complex_mean_is_its_real_part_unrounded(backend, name):
    """A complex64 mean with ``dtype=np.float64``: the real part of the mean
    finished in complex128 (not rounded through complex64 first), with
    NumPy's ComplexWarning."""
    rng = np.random.default_rng(1)
    z = (1e3 + rng.standard_normal((4, 65)) + 1j * rng.standard_normal((4, 65)))
    z = z.astype(np.complex64)
    for axis in (None, 1):
        with pytest.warns(np.exceptions.ComplexWarning):
            want = getattr(np, name)(z, axis=axis, dtype=np.float64)
        with pytest.warns(np.exceptions.ComplexWarning):
            got = _host(getattr(pyreduce, name)(_device(z, backend), axis=axis,
                                                dtype=np.float64, **on(backend)))
        assert got.dtype == np.float64
        assert np.allclose(got, want, rtol=1e-12, atol=0), (got, want)


def test_the_dtypes_left_to_a_cast_keep_numpys_result_dtype(backend):
    """Integer and half-precision ``dtype=``: the default result cast, as before."""
    x = _float32_data((3, 40))
    for dtype in (np.int32, np.float16):
        got = _host(_pyreduce("mean", _device(x, backend), axis=1, dtype=dtype, **on(backend)))
        assert got.dtype == dtype
        assert np.array_equal(got, x.astype(np.float64).mean(1).astype(np.float32).astype(dtype))

