"""Tuple accumulators and element maps (pyreduce/structured.py, ``map=``): argmax,
argmin, minmax, mean/var/std, nansum/nanprod and users' tuple ops, against NumPy
and ``functools.reduce`` on every backend and on the warp-shuffle variants."""

from __future__ import annotations

import dataclasses
import functools
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from pyreduce import backends, structured
from pyreduce.dtypes import BFLOAT16
from pyreduce.planner import DeviceInfo, Tuning, make_plan

from numpy_compare import host_value
from oracles import REORDERING, P, affine_data, on

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# the variants that hold tuple accumulators, at tunings the simulator runs fast
WARP_VARIANTS = ["warp_shuffle", "last_block", "warp_shuffle_x2", "warp_reduce",
                 "items_per_thread", "warp_shuffle_x4", "last_block_x2", "last_block_lanes",
                 "warp_shuffle_lanes"]
SIZES = [1, 2, 33, 128, 129, 1500]  # around the simulator's warp (32) and tile (128)


def with_ties_and_nans(n, seed, dtype=np.float32, nans=0):
    """Random values with the extreme repeated (ties) and NaN at random places."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 10).astype(dtype)
    if n > 3:
        top = rng.choice(n, 3, replace=False)
        x[top] = x.max()
        low = rng.choice(n, 2, replace=False)
        x[low] = x.min()
    if nans:
        x[rng.choice(n, min(nans, n), replace=False)] = np.nan
    return x


# --------------------------------------------------------------------------
# argmax / argmin


@pytest.mark.parametrize("variant", WARP_VARIANTS[:3])
@pytest.mark.parametrize("n", SIZES)
def test_argmax_argmin_find_the_first_extreme(backend, variant, n):
    x = with_ties_and_nans(n, seed=n)
    assert pyreduce.argmax(x, **on(backend, variant)) == np.argmax(x)
    assert pyreduce.argmin(x, **on(backend, variant)) == np.argmin(x)


@pytest.mark.parametrize("variant", ["last_block", "warp_shuffle_x2"])
def test_argmax_of_nan_is_the_first_nan(backend, variant):
    for n, nans in ((40, 1), (300, 5), (129, 129)):
        x = with_ties_and_nans(n, seed=n + nans, dtype=np.float64, nans=nans)
        got = pyreduce.argmax(x, **on(backend, variant))
        assert got == np.argmax(x) == np.flatnonzero(np.isnan(x))[0]
        assert pyreduce.argmin(x, **on(backend, variant)) == np.argmin(x)


@pytest.mark.parametrize("dt", [np.bool_, np.int8, np.uint16, np.int64, np.float32])
def test_argmax_every_dtype_and_layout(backend, dt):
    rng = np.random.default_rng(3)
    x = (rng.integers(0, 5, (17, 23)) if dt != np.float32 else rng.random((17, 23))).astype(dt)
    for view in (x, x.T, x[::-1, ::2]):
        assert pyreduce.argmax(view, **on(backend)) == np.argmax(view)
        assert pyreduce.argmin(view, **on(backend)) == np.argmin(view)
    assert pyreduce.argmax(x, **on(backend)).dtype == np.int64


def test_argmax_of_nothing_is_an_error(backend):
    with pytest.raises(ValueError, match="empty"):
        pyreduce.argmax(np.zeros(0), **on(backend))
    with pytest.raises(ValueError, match="empty"):
        pyreduce.minmax(np.zeros((3, 0)), **on(backend))


# --------------------------------------------------------------------------
# minmax


@pytest.mark.parametrize("variant", ["warp_shuffle", "last_block"])
@pytest.mark.parametrize("n", [1, 33, 500])
def test_minmax_is_min_and_max_in_one_pass(backend, variant, n):
    for nans in (0, 2):
        x = with_ties_and_nans(n, seed=7 * n, nans=nans)
        lo, hi = pyreduce.minmax(x, **on(backend, variant))
        assert np.array_equal([lo, hi], [np.min(x), np.max(x)], equal_nan=True)
        assert lo.dtype == hi.dtype == np.float32
    i = np.random.default_rng(n).integers(-(2**62), 2**62, n)
    assert pyreduce.minmax(i, **on(backend, variant)) == (i.min(), i.max())


# --------------------------------------------------------------------------
# mean / var / std


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int16, np.bool_])
def test_moments_match_numpy(backend, dt):
    rng = np.random.default_rng(11)
    for n in (1, 2, 64, 65, 777):
        x = (rng.standard_normal(n) * 5 + 2).astype(dt)
        for ddof in (0, 1):
            got = (pyreduce.mean(x, **on(backend)), pyreduce.var(x, ddof=ddof, **on(backend)),
                   pyreduce.std(x, ddof=ddof, **on(backend)))
            want = (np.mean(x), np.var(x, ddof=ddof), np.std(x, ddof=ddof))
            for g, w in zip(got, want):
                assert g.dtype == w.dtype, (g, w)
                tol = 1e-5 if w.dtype == np.float32 else 1e-12
                assert np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True), (n, ddof, g, w)


def test_variance_is_stable_on_ill_conditioned_data(backend):
    """A large offset: E[x^2] - E[x]^2 in float64 loses everything here; the pairwise
    update keeps what NumPy's two-pass method keeps."""
    rng = np.random.default_rng(5)
    x = 1e9 + rng.standard_normal(3001)
    exact = np.var(x - 1e9)  # the offset removed exactly: the true variance
    naive = np.mean(x * x) - np.mean(x) ** 2
    assert abs(naive - exact) > 0.05 * exact  # the textbook formula fails
    got = pyreduce.var(x, **on(backend))
    assert abs(got - exact) <= 1e-6 * exact
    assert abs(pyreduce.mean(x, **on(backend)) - np.mean(x)) <= 1e-6


@pytest.mark.parametrize("n", [2, 63, 64, 65, 129, 3001])
@pytest.mark.parametrize("case", ["offset", "outlier first", "outlier last", "complex"])
def test_shifted_sums_keep_the_variance(backend, n, case):
    """The summaries are sums about a shift (an element, or a summary's mean):
    far from the mean (an outlier first, whose deviation dominates the sums),
    far from zero, across the sizes where summaries are re-centred, the
    variance keeps NumPy's precision, through the built-in path and the
    generated folds alike."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n)
    if case == "offset":
        x = 1e9 + x
    elif case == "outlier first":
        x[0] = 1e7
    elif case == "outlier last":
        x[-1] = -1e7
    else:
        x = (3e8 + x) + 1j * (rng.standard_normal(n) - 5e7)
    want = np.var(x - x[0])  # the offset (exact for these values) removed
    dt = pyreduce.dtypes.check_dtype(x.dtype)
    folds = dataclasses.replace(structured.moments_monoid(dt, "var"), host=None)
    for got in (pyreduce.var(x, **on(backend)), pyreduce.reduce(x, folds, **on(backend))):
        assert abs(got - want) <= 1e-9 * want, (got, want)


@pytest.mark.parametrize("axis", [0, 1])
def test_shifted_sums_keep_the_variance_along_long_lanes(backend, axis):
    """An axis kernel folds a lane's elements one at a time into one summary:
    with its first element far from the mean, the shift must move towards the
    mean as the lane grows, or the finish cancels all but a few digits
    (2e-10 at 20000 elements, 5e-8 at a million)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((20000, 3))
    x[0] += 1e3
    if axis == 1:
        x = np.ascontiguousarray(x.T)
    for ddof in (0, 1):
        got = pyreduce.var(x, axis=axis, ddof=ddof, **on(backend))
        want = np.var(x.astype(np.longdouble), axis=axis, ddof=ddof)
        assert np.all(np.abs(got - want) <= 1e-12 * want), (ddof, got, want)
    got = pyreduce.nanvar(x, axis=axis, **on(backend))
    assert np.all(np.abs(got - np.var(x.astype(np.longdouble), axis=axis)) <= 1e-12 * got)


def test_moments_of_nan_inf_and_nothing(backend):
    assert np.isnan(pyreduce.mean(np.zeros(0), **on(backend)))
    assert np.isnan(pyreduce.var(np.ones(1), ddof=1, **on(backend)))
    x = np.array([1.0, np.inf, 2.0] * 30)
    assert pyreduce.mean(x, **on(backend)) == np.inf and np.isnan(pyreduce.var(x, **on(backend)))
    x[40] = np.nan
    assert np.isnan(pyreduce.mean(x, **on(backend))) and np.isnan(pyreduce.std(x, **on(backend)))
    for one in (np.inf, -np.inf, np.nan):  # one element, never merged: NumPy's NaN too
        assert np.isnan(pyreduce.var(np.array([one]), **on(backend)))


# --------------------------------------------------------------------------
# nansum / nanprod


def test_nansum_and_nanprod_match_numpy(backend):
    rng = np.random.default_rng(8)
    x = rng.standard_normal(700)
    x[rng.choice(700, 50, replace=False)] = np.nan
    assert np.isclose(pyreduce.nansum(x, **on(backend)), np.nansum(x), rtol=1e-12)
    y = 1 + rng.random(300) / 100
    y[::7] = np.nan
    assert np.isclose(pyreduce.nanprod(y, **on(backend)), np.nanprod(y), rtol=1e-12)
    # NaN made by inf - inf is a result, not an input to skip (an op alone cannot tell)
    z = np.array([np.inf, np.nan, -np.inf, 1.0])
    assert np.isnan(pyreduce.nansum(z, **on(backend))) and np.isnan(np.nansum(z))
    assert pyreduce.nansum(np.full(65, np.nan), **on(backend)) == 0.0
    assert pyreduce.nansum(np.zeros(0), **on(backend)) == 0.0
    ints = np.arange(-50, 50, dtype=np.int8)
    got = pyreduce.nansum(ints, **on(backend))
    assert got == np.nansum(ints) and got.dtype == np.int64
    assert pyreduce.nansum(np.ones(9, np.float32), dtype=np.float64, **on(backend)).dtype == \
        np.float64


# --------------------------------------------------------------------------
# users' maps and tuple ops


def _compose(f, g):
    """Affine maps mod P as (a, b) meaning v -> a*v + b: f then g. Associative,
    not commutative."""
    return ((g[0] * f[0]) % P, (g[0] * f[1] + g[1]) % P)


def _coeffs(i, v):
    return (v % P + 1, (v * 7 + i) % P)


@pytest.mark.parametrize("variant", WARP_VARIANTS)
def test_a_non_commutative_tuple_op_keeps_order(backend, variant):
    if variant in REORDERING:  # refused: they reorder (docs/semantics.md)
        if backend != "cpu":
            with pytest.raises(ValueError, match="commutative"):
                pyreduce.reduce(affine_data(65, seed=1), _compose, map=_coeffs,
                                **on(backend, variant))
        return
    for n in (1, 64, 65, 1000):
        x = affine_data(n, seed=n)
        want = functools.reduce(_compose, [_coeffs(i, int(v)) for i, v in enumerate(x)])
        got = pyreduce.reduce(x, _compose, map=_coeffs, **on(backend, variant))
        assert tuple(int(v) for v in got) == want, (n, got, want)
        assert [v.dtype for v in got] == [np.dtype(np.int64)] * 2


def test_maps_with_scalar_accumulators(backend):
    """A built-in op over mapped elements, on every variant family (the shared-memory
    tree holds scalars, so it takes scalar maps)."""
    x = np.random.default_rng(4).integers(-100, 100, 900).astype(np.int8)
    want = int((x.astype(np.int64) ** 2).sum())
    square = lambda i, v: np.int64(v) * v  # noqa: E731
    for variant in (None, "shared_tree", "double_shared", "naive"):
        got = pyreduce.reduce(x, "add", map=square, **on(backend, variant))
        assert got == want and got.dtype == np.int64, variant
    # the index reaches the map as the flat C-order position
    m = np.arange(60, dtype=np.int32).reshape(6, 10).T
    got = pyreduce.reduce(m, "add", map=lambda i, v: np.int64(i) * 1000 + v, **on(backend))
    flat = m.ravel(order="C")
    assert got == sum(i * 1000 + int(v) for i, v in enumerate(flat))


def test_tuple_identity_initial_and_explicit_dtype(backend):
    pick = lambda a, b: a if a[0] >= b[0] else b  # noqa: E731
    x = np.random.default_rng(2).random(300)
    got = pyreduce.reduce(x, pick, map=lambda i, v: (v, i), dtype=(np.float32, np.int32),
                          **on(backend))
    assert got == (np.float32(x.max()), np.int32(x.argmax()))
    assert [type(v) for v in got] == [np.float32, np.int32]
    empty = pyreduce.reduce(x[:0], pick, identity=(-1.0, -1), map=lambda i, v: (v, i),
                            **on(backend))
    assert empty == (-1.0, -1)
    got = pyreduce.reduce(x[:50], pick, map=lambda i, v: (v, i), initial=(5.0, 99),
                          **on(backend))
    assert got == (5.0, 99)


def test_tuple_results_with_keepdims_are_arrays_of_each_field(backend):
    """Regression: ``keepdims=True`` with a tuple accumulator failed in
    ``np.full`` ("could not broadcast"). Each field comes back as an array of
    extent 1 on every axis, as NumPy's keepdims gives one value."""
    pick = lambda a, b: a if a[0] >= b[0] else b  # noqa: E731
    x = np.random.default_rng(5).random((7, 30))
    for axis in (None, (0, 1)):
        got = pyreduce.reduce(x, pick, map=lambda i, v: (v, i), keepdims=True, axis=axis,
                              **on(backend))
        assert isinstance(got, tuple) and len(got) == 2
        assert [g.shape for g in got] == [(1, 1), (1, 1)]
        assert got[0].dtype == np.float64 and got[1].dtype == np.int64
        assert got[0][0, 0] == x.max() and got[1][0, 0] == x.argmax()


def test_bad_maps_and_tuples_are_refused(backend):
    x = np.arange(10.0)
    before = x.copy()
    with pytest.raises(TypeError, match="map"):
        pyreduce.reduce(x, lambda a, b: a, map=lambda i, v: "text", **on(backend))
    with pytest.raises(TypeError, match="exactly 2 arguments"):
        pyreduce.reduce(x, lambda a, b: a, map=lambda v: v, **on(backend))
    with pytest.raises(TypeError, match="needs map="):
        pyreduce.reduce(x, lambda a, b: a, dtype=(np.float64, np.int64), **on(backend))
    with pytest.raises(TypeError, match="combines scalars"):
        pyreduce.reduce(x, "add", map=lambda i, v: (v, i), **on(backend))
    with pytest.raises(TypeError, match="tuple of 2 values"):
        pyreduce.reduce(x, lambda a, b: a, map=lambda i, v: (v, i), identity=3.0,
                        **on(backend))
    with pytest.raises(TypeError, match="could not be compiled"):
        pyreduce.reduce(x, lambda a, b: a[0], map=lambda i, v: (v, i), **on(backend))
    with pytest.raises(TypeError, match="unexpected keyword"):
        pyreduce.argmax(x, identity=0, **on(backend))
    if backend == "cpu":  # the index, put on the device, needs a GPU backend
        with pytest.raises(ValueError, match="device_result=True needs a GPU backend"):
            pyreduce.argmax(x, device_result=True, **on(backend))
    if backend != "cpu":
        with pytest.raises(ValueError, match="tuple accumulators"):
            pyreduce.argmax(x, **on(backend, "shared_tree"))
    assert np.array_equal(x, before)


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 700), seed=st.integers(0, 2**16),
       variant=st.sampled_from(WARP_VARIANTS))
def test_argmax_property(n, seed, variant):
    for backend in ("sim", "cpu"):
        if backend not in backends.available():
            continue
        x = with_ties_and_nans(n, seed, nans=seed % 3)
        assert pyreduce.argmax(x, **on(backend, variant)) == np.argmax(x)


# --------------------------------------------------------------------------
# every input dtype against NumPy: complex, half precision, integers, bools


#: the input dtypes of the property tests below
DTYPES = ["complex64", "complex128", "float16", "bfloat16", "float32", "float64", "int8",
          "int64", "uint16", "bool"]
HALF = ("float16", "bfloat16")
#: ``float32`` results are float64 ones rounded: a few units of their last place
EPS = {np.dtype(np.float32): 4 * np.finfo(np.float32).eps,
       np.dtype(np.complex64): 4 * np.finfo(np.float32).eps,
       np.dtype(np.float64): 64 * np.finfo(np.float64).eps,
       np.dtype(np.complex128): 64 * np.finfo(np.float64).eps}


def as_dtype(name: str):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def widened(x: np.ndarray) -> np.ndarray:
    """``x`` in float64 (complex128): every value exactly, the oracle's input."""
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def sample(n: int, seed: int, name: str, nans: int = 0, infs: int = 0, grid=False,
           near_one=False) -> np.ndarray:
    """Random values of dtype ``name``: normal, or on a small grid (ties, and for
    complex ties of the real part decided by the imaginary one), or near 1 (for
    products); ``nans`` NaNs and ``infs`` infinities at random places, in either
    part of a complex value."""
    rng = np.random.default_rng(seed)
    dt = as_dtype(name)
    complex_ = np.dtype(dt).kind == "c"
    if name == "bool":
        return rng.random(n) < 0.5
    if np.dtype(dt).kind in "iu":
        lo = 0 if np.dtype(dt).kind == "u" else -1 if near_one else -100
        return rng.integers(lo, 3 if near_one else 100, n).astype(dt)

    def part():
        if grid:
            return rng.integers(-2, 3, n).astype(np.float64)
        v = rng.standard_normal(n) * 10 + 3
        return 1 + v / 1000 if near_one else v

    x = part() + 1j * part() if complex_ else part()
    for count, values in ((nans, [np.nan]), (infs, [np.inf, -np.inf])):
        for i in rng.choice(n, min(count, n), replace=False):
            v = values[rng.integers(len(values))]
            x[i] = (complex(v, x[i].imag) if rng.random() < 0.5 else complex(x[i].real, v)) \
                if complex_ else v
    return x.astype(dt)


def laid_out(x: np.ndarray, layout: str, backend: str):
    """``(what is reduced, its values on the host)``: ``x`` as it is, reversed, as
    a transposed 2-D view, or (GPU backends) copied to the device."""
    if layout == "reversed":
        v = x[::-1]
    elif layout == "transposed" and x.size % 2 == 0:
        v = x.reshape(2, -1).T
    else:
        v = x
    if layout == "device" and backend != "cpu" and x.dtype.kind != "V":  # not bfloat16
        from numpy_compare import to_device

        return to_device(v), v
    return v, v


def close(got, want, tol: float, scale: float) -> bool:
    """Equal within ``tol`` relative to ``|want| + scale``, part by part; the same
    infinity, or NaN in the same part, counts as equal."""
    g, w = np.complex128(got), np.complex128(want)
    return all(a == b or (a != a and b != b) or abs(a - b) <= tol * (abs(b) + scale)
               for a, b in ((g.real, w.real), (g.imag, w.imag)))


def same_value(got, want) -> bool:
    """Equal, NaN equal to NaN part by part (which NaN a complex result is shows)."""
    g, w = np.complex128(got), np.complex128(want)
    return np.array_equal([g.real, g.imag], [w.real, w.imag], equal_nan=True)


def numpy_dtype(result, name: str) -> np.dtype:
    """The result dtype pyreduce promises: NumPy's, but float32 where NumPy's is half
    precision (docs/semantics.md)."""
    return np.dtype(np.float32) if name in HALF else np.asarray(result).dtype


def test_complex_moments_are_numpys(backend):
    """The mean keeps the imaginary part, and var/std are the mean of
    ``|x - mean|**2``, on every backend: NumPy's values and dtypes."""
    rng = np.random.default_rng(12)
    y = rng.standard_normal(300) * 4 + 1j * (rng.standard_normal(300) - 2)
    for dt in (np.complex64, np.complex128):
        for x in (np.array([1 + 2j, 3 + 4j, 5 - 1j], dtype=dt), y.astype(dt),
                  y.astype(dt)[::-3]):
            for stat in ("mean", "var", "std"):
                got, want = getattr(pyreduce, stat)(x, **on(backend)), getattr(np, stat)(x)
                assert got.dtype == want.dtype, (stat, got.dtype, want.dtype)
                exact = getattr(np, stat)(widened(x))
                assert close(got, exact, EPS[got.dtype], float(np.abs(x).max()) ** 2), \
                    (stat, got, exact)


def test_complex_mean_of_infinities_and_nan_is_numpys(backend):
    """NumPy divides the complex sum by the count as a complex division, which
    makes the other part NaN where one part is infinite."""
    inf, nan = np.inf, np.nan
    for values in ([complex(inf, 1), 1 + 1j], [complex(1, inf), 1 + 1j], [complex(inf, inf), 1j],
                   [complex(nan, 1), 1 + 1j], [complex(inf, 1), complex(-inf, 1)],
                   [complex(inf, 2)]):
        x = np.array(values * 40)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = (np.mean(x), np.var(x), np.std(x))
        got = (pyreduce.mean(x, **on(backend)), pyreduce.var(x, **on(backend)),
               pyreduce.std(x, **on(backend)))
        assert all(same_value(g, w) for g, w in zip(got, want)), (values, got, want)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, np.int32, np.bool_])
def test_the_cpu_variance_of_a_whole_array_is_numpys_to_the_bit(dt):
    """The host's float64 moments of a whole real array that one NumPy call
    reduces (below the cpu backend's split over threads, whose parts merge by
    Chan's formula, within an ulp or so) are NumPy's: its mean, then the sum
    of squared deviations from it (``np.var``'s passes after its mean), divided
    once; 0-d input too."""
    rng = np.random.default_rng(5)
    for n in (1, 3, 1000, 100003):
        x = (rng.standard_normal(n) * 40 + 3).astype(dt)
        for ddof in (0, 1):
            if n <= ddof:
                continue
            got = pyreduce.var(x, ddof=ddof, dtype=np.float64, backend="cpu")
            assert float(got) == float(np.var(x, ddof=ddof, dtype=np.float64)), (n, ddof)
    assert float(pyreduce.var(np.array(2.5, dt), backend="cpu")) == 0.0


def test_var_without_degrees_of_freedom_is_numpys(backend):
    """``ddof >= n``: NumPy divides by ``max(n - ddof, 0)`` (inf, or NaN for no
    spread) and warns; so does pyreduce, pointing the warning at the caller."""
    cases = [([1.0, 2.0], 2), ([1.0, 1.0], 2), ([1.0, 2.0], 3), ([], 0), ([3.0], 1),
             ([1 + 1j, 2j], 2), ([1.0, 5.0, 2.0], 4.5)]
    for values, ddof in cases:
        x = np.array(values)
        for stat in ("var", "std"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = getattr(np, stat)(x, ddof=ddof)
            with pytest.warns(RuntimeWarning, match="Degrees of freedom <= 0") as caught:
                got = getattr(pyreduce, stat)(x, ddof=ddof, **on(backend))
            assert same_value(got, want) and got.dtype == want.dtype, (values, ddof, got, want)
            assert caught[0].filename == __file__
    with warnings.catch_warnings():  # degrees of freedom left: no warning
        warnings.simplefilter("error")
        assert pyreduce.var(np.array([1.0, 2.0]), ddof=1, **on(backend)) == 0.5
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        assert np.isnan(pyreduce.mean(np.zeros(0, np.complex64), **on(backend)))
    with pytest.raises(TypeError, match="ddof"):
        pyreduce.var(np.ones(3), ddof="1", **on(backend))


def test_nansum_and_nanprod_ignore_complex_and_bfloat16_nan(backend):
    """A complex NaN (in either part) counts as 0 (1), as in NumPy; so does a
    bfloat16 NaN, as a float16 one does."""
    for dt in (np.complex64, np.complex128):
        for x in (np.array([1 + 1j, complex(np.nan, 0), 2j], dtype=dt),
                  np.array([1 + 1j, complex(0, np.nan), 2j, 3 - 1j] * 20, dtype=dt)):
            for stat in ("nansum", "nanprod"):
                got, want = getattr(pyreduce, stat)(x, **on(backend)), getattr(np, stat)(x)
                assert got.dtype == want.dtype and close(got, want, 1e-6, abs(want)), \
                    (stat, got, want)
    for dt in (ml_dtypes.bfloat16, np.float16):
        x = np.array([1.0, np.nan, 2.5, np.nan] * 20, dtype=dt)
        for stat in ("nansum", "nanprod"):
            got = getattr(pyreduce, stat)(x, **on(backend))
            want = getattr(np, stat)(x.astype(np.float32))
            assert got.dtype == np.float32 and close(got, want, 1e-6, 0), (dt, stat, got, want)


#: the structured reductions as monoids, for the cpu backend's generated folds
MONOIDS = {
    "mean": lambda dt, ddof: structured.moments_monoid(dt, "mean"),
    "var": lambda dt, ddof: structured.moments_monoid(dt, "var", ddof),
    "std": lambda dt, ddof: structured.moments_monoid(dt, "std", ddof),
    "nansum": lambda dt, ddof: structured.nansum_monoid(dt),
    "nanprod": lambda dt, ddof: structured.nanprod_monoid(dt),
    "argmax": lambda dt, ddof: structured.argmax_monoid(dt),
    "argmin": lambda dt, ddof: structured.argmin_monoid(dt),
    "minmax": lambda dt, ddof: structured.minmax_monoid(dt),
}


def runs(name: str, x, backend: str, ddof=None):
    """``pyreduce.<name>(x)`` on ``backend``; on cpu, also the generated ``njit``
    folds, which the NumPy fast path (``Monoid.host``) must agree with. A list of
    ``(path, result)``."""
    kw = {} if ddof is None else {"ddof": ddof}
    # a CuPy input's one value is a 0-d CuPy array (on a GPU): compared on the host
    out = [(backend, host_value(getattr(pyreduce, name)(x, **kw, **on(backend))))]
    if backend == "cpu":
        dt = pyreduce.dtypes.check_dtype(x.dtype)
        folds = dataclasses.replace(MONOIDS[name](dt, ddof or 0), host=None)
        out.append(("cpu folds", pyreduce.reduce(x, folds, backend="cpu")))
    return out


@given(name=st.sampled_from(DTYPES), n=st.integers(1, 200), seed=st.integers(0, 2**16),
       layout=st.sampled_from(["contiguous", "reversed", "transposed", "device"]),
       ddof=st.sampled_from([0, 1, 2, 1.5]), specials=st.sampled_from([0, 0, 1, 2]))
def test_moments_match_numpy_on_every_dtype(backend, name, n, seed, layout, ddof, specials):
    base = sample(n, seed, name, nans=specials // 2, infs=specials % 2)
    x, host = laid_out(base, layout, backend)
    exact = widened(host)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = {"mean": np.mean(exact), "var": np.var(exact, ddof=ddof),
                "std": np.std(exact, ddof=ddof)}
        dtypes = {stat: numpy_dtype(getattr(np, stat)(host), name)
                  for stat in ("mean", "var", "std")}
        for stat in ("mean", "var", "std"):
            scale = float(np.max(np.abs(exact[np.isfinite(exact)]), initial=1.0))
            for path, got in runs(stat, x, backend, None if stat == "mean" else ddof):
                assert got.dtype == dtypes[stat], (path, stat, got.dtype)
                s = scale * scale if stat == "var" else scale
                assert close(got, want[stat], EPS[got.dtype], s), (path, stat, got, want[stat])


@given(name=st.sampled_from(DTYPES), n=st.integers(1, 200), seed=st.integers(0, 2**16),
       layout=st.sampled_from(["contiguous", "reversed", "transposed", "device"]),
       nans=st.integers(0, 3))
def test_nansum_and_nanprod_match_numpy_on_every_dtype(backend, name, n, seed, layout, nans):
    for stat, near_one in (("nansum", False), ("nanprod", True)):
        x, host = laid_out(sample(n, seed, name, nans=nans, near_one=near_one), layout,
                           backend)
        exact = widened(host) if host.dtype.kind in "fcV" else host
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = getattr(np, stat)(exact)
            want_dtype = numpy_dtype(getattr(np, stat)(host), name)
        for path, got in runs(stat, x, backend):
            assert got.dtype == want_dtype, (path, stat, got.dtype)
            if want_dtype.kind in "iub":
                assert got == want, (path, stat, got, want)
            else:  # n roundings of the accumulator's dtype, at most
                tol = n * np.finfo(want_dtype).eps
                scale = float(np.sum(np.abs(np.nan_to_num(exact)))) if stat == "nansum" \
                    else abs(want)  # a complex product's part may cancel
                assert close(got, want, tol, scale), (path, stat, got, want)


@given(name=st.sampled_from(DTYPES), n=st.integers(1, 200), seed=st.integers(0, 2**16),
       layout=st.sampled_from(["contiguous", "reversed", "transposed", "device"]),
       grid=st.booleans(), nans=st.sampled_from([0, 0, 1, 3]), infs=st.integers(0, 2))
def test_argmax_argmin_minmax_match_numpy_on_every_dtype(backend, name, n, seed, layout, grid,
                                                         nans, infs):
    x, host = laid_out(sample(n, seed, name, nans=nans, infs=infs, grid=grid), layout, backend)
    exact = widened(host) if host.dtype.kind == "V" or name in HALF else host
    flat = np.ravel(exact)  # NumPy would take the first NaN in memory order
    lo, hi = np.min(flat), np.max(flat)
    for stat, want in (("argmax", np.argmax(exact)), ("argmin", np.argmin(exact))):
        for path, got in runs(stat, x, backend):
            assert got == want and got.dtype == np.int64, (path, stat, got, want)
    for path, (got_lo, got_hi) in runs("minmax", x, backend):
        assert same_value(got_lo, lo) and same_value(got_hi, hi), (path, got_lo, got_hi, lo, hi)
        want_dtype = np.dtype(np.float32) if name in HALF else host.dtype
        assert got_lo.dtype == got_hi.dtype == want_dtype, (path, got_lo.dtype)


def test_both_orders_of_the_arg_ops_agree():
    """argmax/argmin of float32 compare first and test NaN after (faster there),
    the other dtypes test NaN first: the same index for every pair of values,
    NaNs, infinities, signed zeros and ties included, in either position."""
    import itertools

    from pyreduce.structured import (_argmax_op, _argmax_op_compare_first, _argmin_op,
                                     _argmin_op_compare_first)

    values = [1.0, 2.0, np.nan, -np.inf, np.inf, 2.0, np.nan, -0.0, 0.0]
    pairs = list(itertools.product(list(zip(values, range(len(values)))), repeat=2))
    for nan_first, compare_first in ((_argmax_op, _argmax_op_compare_first),
                                     (_argmin_op, _argmin_op_compare_first)):
        for a, b in pairs:
            assert nan_first(a, b)[1] == compare_first(a, b)[1], (a, b)
    assert structured.argmax_monoid(np.dtype(np.float32)).fn is _argmax_op_compare_first
    assert structured.argmin_monoid(np.dtype(np.float16)).fn is _argmin_op_compare_first
    assert structured.argmax_monoid(np.dtype(np.float64)).fn is _argmax_op
    assert structured.argmin_monoid(np.dtype(np.int32)).fn is _argmin_op


# --------------------------------------------------------------------------
# var of float32 and half precision: each lane's tile summarised in float32
# (KernelSpec.f32_tiles)

_H100_LIKE = DeviceInfo("h100-like", ("g",), 132, 2048, 32, 32, 256, vector_bytes=16,
                        l2_bytes=50 << 20)


def _var_spec(dtype, statistic="var", align=16, **tuning):
    m = structured.moments_monoid(np.dtype(dtype), statistic)
    return make_plan(1 << 20, np.dtype(dtype), m.dtype, m.key, _H100_LIKE, Tuning(**tuning),
                     0, align, m.commutative).spec


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BFLOAT16])
def test_var_summarises_float32_tiles_in_float32(dtype):
    spec = _var_spec(dtype)
    assert spec.f32_tiles and spec.vector > 1 and " t32" in spec.label
    assert _var_spec(dtype, "std").f32_tiles  # std is var's summaries too
    assert not _var_spec(dtype, align=2).f32_tiles  # element loads: element by element
    assert not _var_spec(dtype, "nanvar").f32_tiles  # NaN is counted out per element
    assert not _var_spec(dtype, variant="pairwise").f32_tiles  # the fixed tree's leaves
    mean = _var_spec(dtype, "mean")  # mean's (count, sum): each tile's float32 sum
    assert mean.f32_tiles and " t32" in mean.label
    assert not _var_spec(dtype, "nanmean").f32_tiles


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BFLOAT16])
def test_mean_finished_in_float64_adds_every_element_in_float64(dtype):
    """``dtype=np.float64``: NumPy's float64 mean, no float32 runs."""
    m = structured.moments_monoid(np.dtype(dtype), "mean", result=np.float64)
    assert not make_plan(1 << 20, np.dtype(dtype), m.dtype, m.key, _H100_LIKE, Tuning(),
                         0, 16, m.commutative).spec.f32_tiles


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.complex64])
def test_var_of_other_dtypes_merges_every_element_in_float64(dtype):
    assert not _var_spec(dtype).f32_tiles
    with pytest.raises(ValueError, match="f32_tiles"):
        dataclasses.replace(_var_spec(np.float64), f32_tiles=True)


def _half(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [2, 7, 8, 9, 255, 256, 257, 1500, 4099])
def test_var_in_float32_tiles_is_within_a_few_roundings(gpu_backend, name, n):
    """Sizes around a lane's items and the simulator's tiles: full tiles are
    summarised in float32, the rest element by element; var, std and ddof come
    within a few float32 roundings of the float64 answer, also for data far
    from zero with a small spread, where NumPy's own float32 var is not."""
    rng = np.random.default_rng(n)
    for scale, offset in ((100.0, 3.0), (1e-3 if name == "float32" else 1.0, 1e4)):
        x = (rng.standard_normal(n) * scale + offset).astype(_half(name))
        wide = x.astype(np.float64)
        for ddof in (0, 1):
            exact = np.var(wide, ddof=ddof)
            got = pyreduce.var(x, ddof=ddof, **on(gpu_backend))
            assert got.dtype == np.float32
            assert abs(float(got) - exact) <= 16 * 2**-24 * exact, (scale, ddof, got, exact)
        assert float(pyreduce.std(x, **on(gpu_backend))) == pytest.approx(np.std(wide),
                                                                           rel=2**-20)


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [2, 7, 8, 9, 255, 256, 257, 1500, 4099])
def test_mean_in_float32_tiles_is_within_a_few_roundings(gpu_backend, name, n):
    """Full tiles add in float32 pairwise, then in float64: within a few
    float32 roundings of the mean of the magnitudes, closer than NumPy's own
    float32 mean comes at these sizes; ``dtype=np.float64`` is NumPy's float64
    mean."""
    rng = np.random.default_rng(n)
    for scale, offset in ((100.0, 3.0), (1.0, 1e4 if name != "float16" else 1e3)):
        x = (rng.standard_normal(n) * scale + offset).astype(_half(name))
        wide = x.astype(np.float64)
        exact = np.mean(wide)
        got = pyreduce.mean(x, **on(gpu_backend))
        assert got.dtype == np.float32
        bound = 8 * 2**-24 * np.mean(np.abs(wide)) + np.spacing(np.float32(abs(exact)))
        assert abs(float(got) - exact) <= bound, (scale, float(got), exact)
        assert float(pyreduce.mean(x, dtype=np.float64, **on(gpu_backend))) == \
            pytest.approx(exact, rel=1e-13)


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_mean_of_tiles_past_float32s_range_falls_back_element_by_element(gpu_backend, name):
    """A tile whose float32 sum overflows, or holds an infinity or a NaN, adds
    its elements in float64: values near float32's (float16's) largest have a
    finite mean, and an infinity or a NaN is NumPy's."""
    dt = _half(name)
    big = float(np.finfo(np.float32).max) * 0.9 if name == "float32" else 6e4
    x = np.full(3000, big, dtype=dt)
    assert float(pyreduce.mean(x, **on(gpu_backend))) == float(np.float32(x[0]))
    x[::2] = -x[::2]
    assert float(pyreduce.mean(x, **on(gpu_backend))) == 0.0
    for bad in (np.inf, np.nan):
        y = np.ones(2048, dtype=dt)
        y[333] = bad
        got = float(pyreduce.mean(y, **on(gpu_backend)))
        assert got == bad or (np.isnan(bad) and np.isnan(got))


def test_var_of_tiles_past_float32s_squares_falls_back_element_by_element(gpu_backend):
    """Deviations of 1e19 square past float32's range in a tile: that tile is
    folded in float64, and the variance (1e38, a float32) is not infinite."""
    x = np.zeros(3000, dtype=np.float32)
    x[::2] = 2e19
    got = pyreduce.var(x, **on(gpu_backend))
    assert np.isfinite(got) and float(got) == pytest.approx(np.var(x.astype(np.float64)),
                                                             rel=1e-6)


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_var_in_float32_tiles_keeps_numpys_infinities_and_nan(gpu_backend, name):
    dt = _half(name)
    for bad in (np.inf, -np.inf, np.nan):
        x = np.ones(2048, dtype=dt)
        x[333] = bad
        assert np.isnan(pyreduce.var(x, **on(gpu_backend)))
        assert np.isnan(np.var(x.astype(np.float64)))


def _arg_spec(fn, dtype, align=16, **tuning):
    m = getattr(structured, f"{fn}_monoid")(np.dtype(dtype))
    return make_plan(1 << 20, np.dtype(dtype), m.dtype, m.key, _H100_LIKE, Tuning(**tuning),
                     0, align, m.commutative).spec


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_argmax_of_float32_finds_each_tiles_extreme_in_float32(fn):
    for dtype in (np.float32, np.float16, BFLOAT16):
        assert _arg_spec(fn, dtype).f32_tiles
        assert not _arg_spec(fn, dtype, align=2).f32_tiles
    for dtype in (np.int32, np.float64, np.complex64):  # their ops test NaN first
        assert not _arg_spec(fn, dtype).f32_tiles
    assert not _arg_spec("minmax", np.float32).f32_tiles


_SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 3.5, np.inf, -np.inf, np.nan], np.float32)


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_argmax_in_float32_tiles_keeps_numpys_index(gpu_backend, name):
    """Arrays of few distinct values (ties everywhere), signed zeros,
    infinities and NaN at random places, over sizes around a lane's items and
    the simulator's tiles: the index is NumPy's, the first of the extreme or of
    the first NaN."""
    rng = np.random.default_rng(7)
    for trial in range(12):
        n = int(rng.integers(1, 1200))
        p = rng.dirichlet(np.ones(_SPECIAL.size))
        if trial % 3 == 0:
            p[-1] = 0  # no NaN: the extreme's first index
            p /= p.sum()
        x = rng.choice(_SPECIAL, size=n, p=p).astype(_half(name))
        wide = x.astype(np.float32)
        for fn in ("argmax", "argmin"):
            got = getattr(pyreduce, fn)(x, **on(gpu_backend))
            assert int(got) == int(getattr(np, fn)(wide)), (fn, n, trial)


@pytest.mark.parametrize("name", ["float32", "bfloat16"])
@pytest.mark.parametrize("scale", [1e-18, 1e-21, 1e-23, 1e-25, 1e-30])
def test_std_of_a_tiny_spread_keeps_the_squares_float32_would_lose(gpu_backend, name, scale):
    """Deviations below 1e-19 square under float32's normal range: runs whose
    float32 sum of squares is that small are merged element by element in
    float64, so std of data spread by 1e-25 is the float64 answer (it was a
    third of it), and runs of equal elements stay runs."""
    rng = np.random.default_rng(int(-np.log10(scale)))
    for x in ((scale * rng.standard_normal(1500)).astype(_half(name)),
              np.tile((scale * rng.standard_normal(8)).astype(_half(name)), 200),
              np.r_[np.zeros(512), scale * rng.standard_normal(700)].astype(_half(name))):
        exact = np.std(x.astype(np.float64))
        got = pyreduce.std(x, **on(gpu_backend))
        assert float(got) == pytest.approx(exact, rel=1e-5, abs=0), (got, exact)


def test_correction_that_is_not_a_number_is_named():
    x = np.arange(5.0)
    with pytest.raises(TypeError, match="correction= must be a real number"):
        pyreduce.var(x, correction="a", backend="cpu")
    assert pyreduce.var(x, correction=1, backend="cpu") == np.var(x, correction=1)


@pytest.mark.parametrize("name", ["var", "std", "nanvar", "nanstd"])
@pytest.mark.parametrize("ddof", [np.array([1, 2]), "1", [1], None, 1 + 0j])
def test_ddof_that_is_not_a_real_number_is_named(name, ddof):
    """An array, a string, a list, None or a complex ddof: a TypeError that
    names ddof= (an array of two was NumPy's ValueError about its truth value)."""
    x = np.arange(5.0)
    with pytest.raises(TypeError, match="ddof= must be a real number"):
        getattr(pyreduce, name)(x, ddof=ddof, backend="cpu")
    for good in (1, np.int64(1), 1.0, np.float32(1.0)):
        assert getattr(pyreduce, name)(x, ddof=good, backend="cpu") == pytest.approx(
            getattr(np, name)(x, ddof=1))


def test_a_moments_monoid_is_made_once_and_bad_arguments_are_still_named():
    """moments_monoid remembers its monoids by the arguments as given (a
    repeat's host time) in a bounded memo; arguments it refuses
    are refused on every call, hashable or not, and each ddof keeps its own."""
    from pyreduce import structured

    dt = np.dtype(np.float32)
    assert structured.moments_monoid(dt, "var", 1) is structured.moments_monoid(dt, "var", 1)
    assert structured.moments_monoid(dt, "var", 2).finisher.ddof == 2.0
    assert structured.moments_monoid(dt, "mean", result=np.float64).finisher.dtype == np.float64
    for _ in range(2):
        # values equal to a ddof already remembered, of types refused
        for bad in ("1", 1 + 0j, np.complex128(1), np.True_):
            with pytest.raises(TypeError, match="ddof"):
                structured.moments_monoid(dt, "var", bad)
        with pytest.raises(TypeError, match="ddof"):
            structured.moments_monoid(dt, "var", [1])
        with pytest.raises(ValueError, match="statistic"):
            structured.moments_monoid(dt, "median")
    for ddof in range(structured._MOMENTS.maxsize + 10):
        assert structured.moments_monoid(dt, "std", ddof).finisher.ddof == ddof
    assert len(structured._MOMENTS._data) <= structured._MOMENTS.maxsize
    x = np.arange(10.0)
    assert float(pyreduce.var(x, ddof=3, backend="cpu")) == pytest.approx(np.var(x, ddof=3))
