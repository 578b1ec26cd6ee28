"""Tuple accumulators and element maps (pyreduce/structured.py, ``map=``): argmax,
argmin, minmax, mean/var/std, nansum/nanprod and users' tuple ops, against NumPy
and ``functools.reduce`` on every backend and on the warp-shuffle variants."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from pyreduce import backends

from oracles import P, affine_data, on

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# the variants that hold tuple accumulators, at tunings the simulator runs fast
WARP_VARIANTS = ["warp_shuffle", "last_block", "warp_shuffle_x2", "warp_reduce",
                 "items_per_thread", "warp_shuffle_x4"]
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


def test_moments_of_nan_inf_and_nothing(backend):
    assert np.isnan(pyreduce.mean(np.zeros(0), **on(backend)))
    assert np.isnan(pyreduce.var(np.ones(1), ddof=1, **on(backend)))
    x = np.array([1.0, np.inf, 2.0] * 30)
    assert pyreduce.mean(x, **on(backend)) == np.inf and np.isnan(pyreduce.var(x, **on(backend)))
    x[40] = np.nan
    assert np.isnan(pyreduce.mean(x, **on(backend))) and np.isnan(pyreduce.std(x, **on(backend)))


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
    with pytest.raises(TypeError, match="device_result"):  # an index made on the host
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
