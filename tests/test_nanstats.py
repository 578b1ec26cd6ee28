"""pyreduce.nanstats: nanmean, nanvar, nanstd, nanargmax, nanargmin, ptp and
count_nonzero against NumPy (values, dtypes, warnings, errors) on every backend,
over every input dtype, sizes around the simulator's warp and block, NaN-heavy
and all-NaN inputs; and ``correction=`` of var/std."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from pyreduce import backends, structured
from pyreduce.backends import cpu_parallel
from pyreduce.backends.crew import Crew

from conftest import examples
from numpy_compare import host_value
from oracles import on
from test_structured import (
    DTYPES, EPS, HALF, WARP_VARIANTS, close, laid_out, numpy_dtype, same_value, sample, widened,
)

#: around the simulator's warp (32) and its test block (64) and tile, and beyond
EDGES = [1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1025]
#: how many NaNs, as a share of n: none, one, half, all but one, all
NAN_SHARES = [0.0, 0.0, 1e-9, 0.5, 0.999, 1.0]

MOMENTS = {
    "nanmean": lambda dt, ddof: structured.moments_monoid(dt, "nanmean"),
    "nanvar": lambda dt, ddof: structured.moments_monoid(dt, "nanvar", ddof),
    "nanstd": lambda dt, ddof: structured.moments_monoid(dt, "nanstd", ddof),
    "nanargmax": lambda dt, ddof: structured.nanargmax_monoid(dt),
    "nanargmin": lambda dt, ddof: structured.nanargmin_monoid(dt),
    "ptp": lambda dt, ddof: structured.ptp_monoid(dt),
    "count_nonzero": lambda dt, ddof: structured.count_nonzero_monoid(dt),
}


def nan_count(n: int, share: float) -> int:
    return 0 if share == 0 else min(n, max(1, round(n * share)))


def runs(name: str, x, backend: str, ddof=None, variant=None):
    """``pyreduce.<name>(x)`` on ``backend``, as ``(path, outcome)`` pairs, an
    outcome being the result or the exception raised; on cpu also the generated
    ``njit`` folds, which the NumPy fast path (``Monoid.host``) must agree with."""
    kw = {} if ddof is None else {"ddof": ddof}
    calls = [(backend, lambda: getattr(pyreduce, name)(x, **kw, **on(backend, variant)))]
    if backend == "cpu":
        dt = pyreduce.dtypes.check_dtype(x.dtype)
        folds = dataclasses.replace(MOMENTS[name](dt, ddof or 0), host=None)
        calls.append(("cpu folds", lambda: pyreduce.reduce(x, folds, backend="cpu")))
    out = []
    for path, call in calls:
        try:
            # a CuPy input's one value is a 0-d CuPy array (on a GPU): compared on the host
            out.append((path, host_value(call())))
        except (ValueError, TypeError) as exc:
            out.append((path, exc))
    return out


def numpy_outcome(fn, *args, **kwargs):
    """NumPy's result, or the exception it raises, its warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **kwargs)
        except (ValueError, TypeError) as exc:
            return exc


def sizes():
    return st.one_of(st.sampled_from(EDGES), st.integers(1, 300))


# --------------------------------------------------------------------------
# nanmean, nanvar, nanstd


@settings(max_examples=examples(12))
@given(name=st.sampled_from(DTYPES), n=sizes(), seed=st.integers(0, 2**16),
       layout=st.sampled_from(["contiguous", "reversed", "transposed", "device"]),
       ddof=st.sampled_from([0, 1, 2, 1.5]), share=st.sampled_from(NAN_SHARES),
       infs=st.sampled_from([0, 0, 1]))
def test_nan_moments_match_numpy(backend, name, n, seed, layout, ddof, share, infs):
    base = sample(n, seed, name, nans=nan_count(n, share), infs=infs)
    x, host = laid_out(base, layout, backend)
    exact = widened(host)
    finite = exact[np.isfinite(exact)]
    scale = float(np.max(np.abs(finite), initial=1.0))
    for stat in ("nanmean", "nanvar", "nanstd"):
        kw = {} if stat == "nanmean" else {"ddof": ddof}
        # NumPy's nan-statistics of integers and bools are the plain ones (inf, not
        # nan, where no degree of freedom is left): so are the widened values'
        plain = host.dtype.kind in "iub"
        want = numpy_outcome(getattr(np, stat.removeprefix("nan") if plain else stat),
                             exact, **kw)
        want_dtype = numpy_dtype(numpy_outcome(getattr(np, stat), host, **kw), name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got_all = runs(stat, x, backend, None if stat == "nanmean" else ddof)
        for path, got in got_all:
            assert got.dtype == want_dtype, (path, stat, got.dtype, want_dtype)
            s = scale * scale if stat == "nanvar" else scale
            assert close(got, want, EPS[got.dtype], s), (path, stat, got, want)


@pytest.mark.parametrize("n", [0, 1, 33, 257])
def test_nan_moments_of_nothing_warn_as_numpy_does(backend, n):
    """Empty and all-NaN: NaN with NumPy's RuntimeWarning, pointing at the caller;
    no degrees of freedom give NaN (np.nanvar), where var gives inf."""
    for dt in (np.float32, np.complex128, np.float16):
        x = np.full(n, np.nan, dtype=dt)
        with pytest.warns(RuntimeWarning, match="Mean of empty slice") as caught:
            got = pyreduce.nanmean(x, **on(backend))
        assert caught[0].filename == __file__
        assert same_value(got, numpy_outcome(np.nanmean, x))
        for stat in ("nanvar", "nanstd"):
            with pytest.warns(RuntimeWarning, match="Degrees of freedom <= 0"):
                got = getattr(pyreduce, stat)(x, **on(backend))
            assert np.isnan(got)
    x = np.array([1.0, np.nan, 5.0] * 11)  # 22 numbers
    for ddof in (22, 23, 30.5):
        with pytest.warns(RuntimeWarning, match="Degrees of freedom <= 0"):
            got = pyreduce.nanvar(x, ddof=ddof, **on(backend))
        assert np.isnan(got) and np.isnan(numpy_outcome(np.nanvar, x, ddof=ddof))
        with pytest.warns(RuntimeWarning):
            assert pyreduce.var(x[~np.isnan(x)], ddof=ddof, **on(backend)) == np.inf
    with warnings.catch_warnings():  # numbers left: no warning
        warnings.simplefilter("error")
        assert np.isclose(pyreduce.nanvar(x, ddof=21, **on(backend)), np.nanvar(x, ddof=21))
        assert pyreduce.nanmean(np.array([np.nan, 2.0]), **on(backend)) == 2.0


def test_nan_moments_skip_complex_nan_in_either_part(backend):
    rng = np.random.default_rng(3)
    z = rng.standard_normal(300) + 1j * rng.standard_normal(300)
    z[rng.choice(300, 40, replace=False)] = complex(np.nan, 1)
    z[rng.choice(300, 40, replace=False)] = complex(2, np.nan)
    for dt in (np.complex64, np.complex128):
        x = z.astype(dt)
        for stat in ("nanmean", "nanvar", "nanstd"):
            got, want = getattr(pyreduce, stat)(x, **on(backend)), getattr(np, stat)(x)
            assert got.dtype == want.dtype, (stat, got.dtype)
            exact = getattr(np, stat)(widened(x))
            assert close(got, exact, EPS[got.dtype], 10.0), (stat, got, exact)


def test_nan_moments_of_integers_are_the_moments(backend):
    x = np.random.default_rng(1).integers(-50, 50, 129).astype(np.int16)
    for stat in ("mean", "var", "std"):
        got = getattr(pyreduce, "nan" + stat)(x, **on(backend))
        want = getattr(np, "nan" + stat)(x)
        assert got.dtype == want.dtype and np.isclose(got, want, rtol=1e-12)
    assert structured.moments_monoid(np.dtype(np.int16), "nanmean").map is \
        structured.moments_monoid(np.dtype(np.int16), "mean").map


# --------------------------------------------------------------------------
# correction=


def test_correction_is_ddof_under_the_array_api_name(backend):
    x = np.random.default_rng(2).standard_normal(65)
    y = x.copy()
    y[::5] = np.nan
    for stat, data in (("var", x), ("std", x), ("nanvar", y), ("nanstd", y)):
        fn = getattr(pyreduce, stat)
        for c in (0, 1, 2.5):
            got = fn(data, correction=c, **on(backend))
            assert got == fn(data, ddof=c, **on(backend))
            assert np.isclose(got, getattr(np, stat)(data, correction=c), rtol=1e-12)
        assert fn(data, ddof=0, correction=1, **on(backend)) == fn(data, ddof=1, **on(backend))
        with pytest.raises(ValueError, match="ddof= and correction="):
            fn(data, ddof=1, correction=1, **on(backend))
        with pytest.raises(ValueError):  # NumPy's rule, the same
            getattr(np, stat)(data, ddof=1, correction=1)
        with pytest.raises(TypeError, match="correction="):
            fn(data, correction="1", **on(backend))


# --------------------------------------------------------------------------
# nanargmax, nanargmin


@settings(max_examples=examples(12))
@given(name=st.sampled_from(DTYPES), n=sizes(), seed=st.integers(0, 2**16),
       layout=st.sampled_from(["contiguous", "reversed", "transposed", "device"]),
       grid=st.booleans(), share=st.sampled_from(NAN_SHARES), infs=st.integers(0, 2))
def test_nanargmax_nanargmin_match_numpy(backend, name, n, seed, layout, grid, share, infs):
    x, host = laid_out(sample(n, seed, name, nans=nan_count(n, share), infs=infs, grid=grid),
                       layout, backend)
    exact = widened(host) if host.dtype.kind == "V" or name in HALF else host
    for stat in ("nanargmax", "nanargmin"):
        want = numpy_outcome(getattr(np, stat), exact)
        for path, got in runs(stat, x, backend):
            if isinstance(want, Exception):
                assert isinstance(got, ValueError), (path, stat, got)
                assert "All-NaN slice encountered" in str(got), (path, got)
            else:
                assert got == want and got.dtype == np.int64, (path, stat, got, want)


@pytest.mark.parametrize("variant", WARP_VARIANTS[:3])
def test_nanargmax_reads_nan_as_an_infinity_like_numpy(backend, variant):
    """np.nanargmax replaces NaN with -inf: a NaN before the first -inf is the
    answer when -inf is the largest number; ties keep the first index."""
    nan, inf = np.nan, np.inf
    for values in ([nan, -inf], [-inf, nan, -inf], [nan, 3.0, 3.0, nan], [nan] * 40 + [1.0],
                   [2.0] * 70 + [nan] * 70 + [5.0, 5.0], [inf, nan, inf]):
        x = np.array(values)
        assert pyreduce.nanargmax(x, **on(backend, variant)) == np.nanargmax(x), values
        assert pyreduce.nanargmin(-x, **on(backend, variant)) == np.nanargmin(-x), values
    z = np.array([complex(nan, 1), complex(-inf, 0), complex(-inf, -1)] * 30)
    assert pyreduce.nanargmax(z, **on(backend, variant)) == np.nanargmax(z) == 0
    assert pyreduce.nanargmin(z, **on(backend, variant)) == np.nanargmin(z) == 2


def test_nanargmax_errors_are_numpys(backend):
    for dt in (np.float64, np.float16, np.complex64):
        for n in (1, 33, 300):
            x = np.full(n, np.nan, dtype=dt)
            for stat in ("nanargmax", "nanargmin"):
                with pytest.raises(ValueError, match="All-NaN slice encountered"):
                    getattr(pyreduce, stat)(x, **on(backend))
                with pytest.raises(ValueError, match="All-NaN slice encountered"):
                    getattr(np, stat)(x)
        for stat in ("nanargmax", "nanargmin"):
            with pytest.raises(ValueError, match="empty"):
                getattr(pyreduce, stat)(np.zeros(0, dt), **on(backend))
    ints = np.array([3, 9, 1, 9], dtype=np.uint8)  # no NaN: argmax's rule
    assert pyreduce.nanargmax(ints, **on(backend)) == 1
    assert pyreduce.nanargmin(ints, **on(backend)) == 2


# --------------------------------------------------------------------------
# ptp


@settings(max_examples=examples(12))
@given(name=st.sampled_from([d for d in DTYPES if d != "bool"] + ["int8", "uint8", "int32"]),
       n=sizes(), seed=st.integers(0, 2**16),
       layout=st.sampled_from(["contiguous", "reversed", "transposed", "device"]),
       grid=st.booleans(), nans=st.sampled_from([0, 0, 1, 3]), infs=st.integers(0, 2))
def test_ptp_matches_numpy(backend, name, n, seed, layout, grid, nans, infs):
    x, host = laid_out(sample(n, seed, name, nans=nans, infs=infs, grid=grid), layout, backend)
    if name == "int8" and not grid:  # a range beyond int8: NumPy's wrap-around
        host[0], host[-1] = np.int8(-100), np.int8(100)
        if x is not host:
            x = host
    oracle = host.astype(np.float32) if name in HALF else host
    # a C-order copy: complex NaN is minmax's, the first in C order (docs/semantics.md),
    # where NumPy takes the first in memory order
    want = numpy_outcome(np.ptp, np.ascontiguousarray(oracle))
    for path, got in runs("ptp", x, backend):
        assert got.dtype == oracle.dtype, (path, got.dtype, oracle.dtype)
        assert same_value(got, want), (path, got, want)


def test_ptp_wraps_and_refuses_what_numpy_refuses(backend):
    x = np.array([-100, 5, 100] * 30, dtype=np.int8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # wrapped silently, as np.ptp does
        got = pyreduce.ptp(x, **on(backend))
    assert got == np.ptp(x) == -56 and got.dtype == np.int8
    with pytest.raises(TypeError, match="bool"):
        pyreduce.ptp(np.array([True, False]), **on(backend))
    with pytest.raises(ValueError, match="empty"):
        pyreduce.ptp(np.zeros(0), **on(backend))
    assert pyreduce.ptp(np.array([1.0, 4.0], dtype=np.float16), **on(backend)).dtype == \
        np.float32


# --------------------------------------------------------------------------
# count_nonzero


@settings(max_examples=examples(12))
@given(name=st.sampled_from(DTYPES), n=st.one_of(st.just(0), sizes()),
       seed=st.integers(0, 2**16),
       layout=st.sampled_from(["contiguous", "reversed", "transposed", "device"]),
       nans=st.sampled_from([0, 0, 2]))
def test_count_nonzero_matches_numpy(backend, name, n, seed, layout, nans):
    base = sample(max(n, 1), seed, name, nans=nans, grid=True)[:n]  # many zeros
    if name not in ("bool",) and n:
        base[np.random.default_rng(seed).random(n) < 0.1] = -0.0 if name in HALF else 0
    x, host = laid_out(base, layout, backend)
    want = np.count_nonzero(host.astype(np.float32) if name == "bfloat16" else host)
    for path, got in runs("count_nonzero", x, backend):
        assert got == want and got.dtype == np.int64, (path, got, want)


def test_count_nonzero_along_axes_is_numpys(backend):
    rng = np.random.default_rng(6)
    for dt in (np.float32, np.complex64, np.bool_, np.int16):
        x = (rng.integers(0, 3, (5, 7, 33)) * (1 + 1j if dt == np.complex64 else 1)).astype(dt)
        for axis in (0, 1, -1, (0, 2), (0, 1, 2)):
            for keepdims in (False, True):
                got = pyreduce.count_nonzero(x, axis=axis, keepdims=keepdims, **on(backend))
                want = np.count_nonzero(x, axis=axis, keepdims=keepdims)
                assert np.array_equal(got, want) and np.asarray(got).dtype == np.intp, \
                    (dt, axis, keepdims, got, want)
    assert np.array_equal(pyreduce.count_nonzero([[0, 1], [2, 3]], axis=0, **on(backend)),
                          [1, 2])


def test_count_nonzero_keywords_and_errors(backend):
    x = np.arange(6.0).reshape(2, 3)
    got = pyreduce.count_nonzero(x, keepdims=True, **on(backend))  # as NumPy's: [[5]]
    assert np.array_equal(got, np.count_nonzero(x, keepdims=True)) and got.shape == (1, 1)
    with pytest.raises(TypeError, match="count_nonzero.. got an unexpected keyword"):
        pyreduce.count_nonzero(x, dtype=np.int32, **on(backend))
    if backend == "sim":
        from numba import cuda

        with pytest.raises(TypeError, match="CuPy or PyTorch"):
            pyreduce.count_nonzero(cuda.to_device(x), axis=0, **on(backend))
        assert pyreduce.count_nonzero(cuda.to_device(x), **on(backend)) == 5


# --------------------------------------------------------------------------
# keywords, masked arrays, Dask, device inputs


@pytest.mark.parametrize("name", ["nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin",
                                  "ptp"])
def test_numpy_keywords_and_no_others(backend, name):
    """NumPy's keywords are taken (axis=0 of a 1-D input is its one value, as a
    0-d array with keepdims=False); reduce()'s own are not; a one-value result
    asked for on the device is a device array of the value."""
    x = np.array([1.0, np.nan, 3.0])
    fn = getattr(pyreduce, name)
    whole = fn(x, **on(backend))
    along = fn(x, axis=0, **on(backend))
    assert np.array_equal(np.asarray(along), np.asarray(whole), equal_nan=True)
    kept = fn(x, axis=0, keepdims=True, **on(backend))
    assert np.shape(kept) == (1,)
    with pytest.raises(TypeError, match="unexpected keyword argument 'initial'"):
        fn(x, initial=0.0, **on(backend))
    if backend != "cpu":
        got = fn(x, **on(backend, device_result=True))
        assert np.array_equal(np.asarray(got.copy_to_host() if hasattr(got, "copy_to_host")
                                         else got), np.asarray(whole), equal_nan=True)


def test_masked_arrays_reduce_the_unmasked_elements(backend):
    data = np.array([5.0, np.nan, 1.0, 9.0, np.nan, 2.0])
    x = np.ma.array(data, mask=[0, 0, 0, 1, 0, 0])
    kept = np.array([5.0, 1.0, 2.0])
    assert pyreduce.nanmean(x, **on(backend)) == np.mean(kept)
    assert np.isclose(pyreduce.nanvar(x, ddof=1, **on(backend)), np.var(kept, ddof=1))
    assert pyreduce.nanargmax(x, **on(backend)) == 0  # the index in the whole array
    assert pyreduce.nanargmin(x, **on(backend)) == 2
    assert pyreduce.count_nonzero(x, **on(backend)) == 5  # NaN counts; 9 is masked
    assert np.isnan(pyreduce.ptp(x, **on(backend)))
    nothing = np.ma.array(data, mask=True)
    assert pyreduce.nanmean(nothing, **on(backend)) is np.ma.masked
    with pytest.raises(ValueError, match="masked"):
        pyreduce.nanargmax(nothing, **on(backend))


def test_device_inputs(backend):
    if backend == "cpu":
        pytest.skip("device inputs are a GPU backend's")
    from numpy_compare import host_value, to_device

    x = sample(257, 4, "float32", nans=30)
    d = to_device(x)  # a CuPy array where CuPy is present: 0-d CuPy results
    assert host_value(pyreduce.nanargmax(d, **on(backend))) == np.nanargmax(x)
    assert np.isclose(host_value(pyreduce.nanstd(d, **on(backend))), np.nanstd(x), rtol=1e-5)
    assert host_value(pyreduce.count_nonzero(d, **on(backend))) == np.count_nonzero(x)


def test_dask_arrays_are_reduced_chunk_by_chunk():
    da = pytest.importorskip("dask.array")
    x = sample(1000, 9, "float64", nans=300)
    z = sample(1000, 9, "complex64", nans=300, grid=True)
    for data in (x, z):
        d = da.from_array(data, chunks=130)
        for stat in ("nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin", "ptp",
                     "count_nonzero"):
            got = getattr(pyreduce, stat)(d, backend="cpu").compute()
            assert same_value(got, getattr(np, stat)(data)) or np.isclose(
                got, getattr(np, stat)(data), rtol=1e-5), (stat, got)
        got = pyreduce.nanvar(d, correction=1, backend="cpu").compute()
        assert np.isclose(got, np.nanvar(data, ddof=1), rtol=1e-5)
    with pytest.raises(TypeError, match=r"nanmean\(\) got an unexpected keyword argument 'ddof'"):
        pyreduce.nanmean(da.from_array(x, chunks=130), ddof=1)
    m = np.eye(6)
    got = pyreduce.count_nonzero(da.from_array(m, chunks=4), axis=0, backend="cpu").compute()
    assert np.array_equal(got, np.count_nonzero(m, axis=0))


def test_cpu_pieces_keep_the_index_of_every_indexed_accumulator(monkeypatch):
    """The cpu backend splits large inputs into pieces whose indices are made
    global: also for complex values and for the NaN-ignoring ones (split from
    1 MiB here, in pieces of 256 KiB)."""
    monkeypatch.setattr(cpu_parallel, "PIECE_BYTES", 1 << 18)
    monkeypatch.setattr(cpu_parallel, "SPLIT_BYTES", 1 << 20)
    rng = np.random.default_rng(0)
    n = 1 << 20
    z = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    z[rng.choice(n, 1000)] = np.nan
    crew = Crew(4)
    for monoid, data, want in (
            (structured.argmax_monoid(z.dtype), z, np.argmax(z)),
            (structured.nanargmax_monoid(z.dtype), z, np.nanargmax(z)),
            (structured.nanargmin_monoid(z.real.dtype), z.real, np.nanargmin(z.real))):
        assert cpu_parallel.part_count(data, monoid, 4) > 1
        acc = cpu_parallel.reduce_host(data, monoid, crew, 4)
        assert monoid.result(acc) == want, monoid.name


@pytest.mark.skipif("sim" not in backends.available(), reason="needs the simulator")
@settings(max_examples=examples(6))
@given(n=st.sampled_from(EDGES), seed=st.integers(0, 2**16),
       variant=st.sampled_from(WARP_VARIANTS))
def test_every_warp_variant_agrees(n, seed, variant):
    x = sample(n, seed, "float32", nans=nan_count(n - 1, 0.3), grid=True)  # a number left
    assert pyreduce.nanargmax(x, **on("sim", variant)) == np.nanargmax(x)
    assert np.isclose(pyreduce.nanmean(x, **on("sim", variant)), np.nanmean(x), rtol=1e-5)
    assert pyreduce.count_nonzero(x, **on("sim", variant)) == np.count_nonzero(x)


def test_nansum_of_complex_into_a_real_dtype_as_numpy(backend):
    """``nansum``/``nanprod`` of complex input with a real ``dtype=``: NaN (in
    either part) replaced, then the real parts, along any axes, with NumPy's
    ComplexWarning once."""
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (6, 40)) + 1j * rng.integers(-3, 4, (6, 40))
    x[0, 3] = complex(np.nan, 1)
    x[2, 5] = complex(1, np.nan)
    for name in ("nansum", "nanprod"):
        for axis in (None, 0, 1):
            with pytest.warns(np.exceptions.ComplexWarning):
                want = getattr(np, name)(x, axis=axis, dtype=np.float64)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = getattr(pyreduce, name)(x, axis=axis, dtype=np.float64, **on(backend))
            assert [w.category for w in caught] == [np.exceptions.ComplexWarning]
            got = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
            assert got.dtype == np.float64
            assert np.allclose(got, want, rtol=1e-12), (name, axis, got, want)


@pytest.mark.parametrize("name", ["nanvar", "nanstd"])
def test_integer_nan_statistics_are_the_plain_ones_without_degrees_of_freedom(backend,
                                                                                name):
    """Integers have no NaN: np.nanvar of them is np.var, inf where no degree
    of freedom is left and the elements differ (NaN where they are equal)."""
    for values, want in (([1, 2, 3], np.inf), ([2, 2, 2], None)):
        x = np.array(values, np.int16)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = getattr(pyreduce, name)(x, ddof=3, **on(backend))
            numpy = getattr(np, name)(x, ddof=3)
        assert np.isnan(got) if want is None else got == want
        assert np.isnan(numpy) if want is None else numpy == want
