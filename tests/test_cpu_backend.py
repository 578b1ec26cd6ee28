"""The cpu backend next to the simulator: division by zero inside an op or a map
gives NumPy's results, as ``functools.reduce`` over NumPy scalars does."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pyreduce
from oracles import on

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def first_largest(a, b):
    """Exact, associative, not commutative (ties keep the first) on data without NaN."""
    return a if a >= b else b


# --------------------------------------------------------------------------
# division by zero


def parallel(a, b):
    """The parallel resistance of a and b: associative; 0 once any is 0."""
    return 1 / (1 / a + 1 / b)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_division_by_zero_in_an_op(backend, dt):
    x = np.array([2, 0, 4, 4], dt)
    with np.errstate(divide="ignore"):
        assert functools.reduce(parallel, x) == 0.0
    assert pyreduce.reduce(x, parallel, **on(backend)) == 0.0
    rng = np.random.default_rng(4)
    for n in (1, 2, 15, 16, 17, 129, 300):
        y = (rng.random(n) + 0.5).astype(dt)
        y[rng.integers(n)] = 0
        assert pyreduce.reduce(y, parallel, **on(backend)) == 0.0
        assert pyreduce.reduce(y, parallel, initial=1.0, **on(backend)) == 0.0
    z = np.zeros((3, 20), dt)
    z[1] = 1 + np.arange(20)
    rows = pyreduce.reduce(z, parallel, axis=1, **on(backend))
    segments = pyreduce.segmented_reduce(z.ravel(), np.array([0, 20, 40, 41, 60]), parallel,
                                         **on(backend))
    for got in rows, segments:
        np.testing.assert_allclose(got, [0, 1 / np.sum(1 / z[1]), 0, 0][:got.size],
                                   rtol=1e-5, atol=0)
        assert got[0] == got[-1] == 0
    # a map: 1/0 is inf, and inf is the largest
    inverse = lambda i, v: 1 / v  # noqa: E731
    assert pyreduce.reduce(x, first_largest, map=inverse, **on(backend)) == np.inf


#: ``op(a, b)`` for two elements: one grouping, so the result is the op's own
DIVISIONS = {"floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
             "truediv": lambda a, b: a / b}


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int64, np.uint64, np.float32,
                                np.float64])
def test_division_by_zero_is_numpys(backend, dt):
    """Integers: 0, as NumPy gives (with a warning); floats: inf or NaN."""
    names = ["floordiv", "mod"] + (["truediv"] if np.dtype(dt).kind == "f" else [])
    for a in (7, 0):
        x = np.array([a, 0], dt)
        for name in names:
            with np.errstate(all="ignore"):
                want = np.dtype(dt).type(functools.reduce(DIVISIONS[name], x))
            got = pyreduce.reduce(x, DIVISIONS[name], **on(backend))
            assert got.dtype == dt
            np.testing.assert_array_equal(got, want, err_msg=f"{a} {name} 0")


def keep_unless_zero(a, b):
    """``a`` while ``b`` is not 0, else 0 (an associative op written with a // b)."""
    return a * b // b


def test_integer_division_by_zero_in_a_fold(backend):
    rng = np.random.default_rng(3)
    for n in (2, 17, 40, 300):
        x = rng.integers(1, 100, n)
        with np.errstate(all="ignore"):
            assert pyreduce.reduce(x, keep_unless_zero, **on(backend)) == x[0]
            x[rng.integers(1, n)] = 0
            assert pyreduce.reduce(x, keep_unless_zero, **on(backend)) == 0
            assert functools.reduce(keep_unless_zero, x) == 0
