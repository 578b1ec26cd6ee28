"""Reductions whose accumulator is more than one value, and the NaN-ignoring sums.

Each is an ordinary :class:`~pyreduce.ops.Monoid`: an element map, an op over
tuples, an identity and a last step on the host, written as plain Python that
every backend compiles, so they run on every backend and every warp-shuffle
variant like a user's own tuple op.

``argmax``/``argmin``
    ``(value, index)``; the op keeps the larger (smaller) value and, on a tie, the
    smaller index, and treats NaN as beyond every number, so the result is
    NumPy's: the first index of the extreme, or of the first NaN. The op is
    commutative as well as associative: no order of combining changes it.
``minmax``
    ``(min, max)`` in one pass, NaN propagating into both like ``np.min``/``np.max``.
``mean``/``var``/``std``
    ``(count, mean, m2)`` in float64, merged with Chan et al.'s pairwise update
    (``m2`` is the sum of squared deviations from the mean), which needs no second
    pass and keeps the precision a two-pass method has; results have NumPy's
    dtypes (float32 for float32 input, float64 otherwise).
``nansum``/``nanprod``
    a map turning NaN into the identity before a plain sum (product), as NumPy does:
    an op alone cannot tell an input NaN from one that ``inf - inf`` made.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .dtypes import check_accumulator, check_dtype, default_accumulator, tuple_dtype
from .ops import Monoid, function_key, make_monoid, sum_dtype

__all__ = ["argmax_monoid", "argmin_monoid", "minmax_monoid", "moments_monoid",
           "nansum_monoid", "nanprod_monoid", "FLOAT_RESULT"]

_INF = math.inf
_NAN = math.nan


# --- the device code: plain Python, compiled by each backend

def _index_map(i, v):
    return (v, i)


def _pair_map(i, v):
    return (v, v)


def _argmax_op(a, b):
    a_nan, b_nan = a[0] != a[0], b[0] != b[0]
    if a_nan or b_nan:
        if a_nan and b_nan:
            return a if a[1] <= b[1] else b
        return a if a_nan else b
    if a[0] > b[0] or (a[0] == b[0] and a[1] <= b[1]):
        return a
    return b


def _argmin_op(a, b):
    a_nan, b_nan = a[0] != a[0], b[0] != b[0]
    if a_nan or b_nan:
        if a_nan and b_nan:
            return a if a[1] <= b[1] else b
        return a if a_nan else b
    if a[0] < b[0] or (a[0] == b[0] and a[1] <= b[1]):
        return a
    return b


def _minmax_op(a, b):
    lo = a[0] if (a[0] < b[0] or a[0] != a[0]) else b[0]
    hi = a[1] if (a[1] > b[1] or a[1] != a[1]) else b[1]
    return (lo, hi)


def _moments_map(i, v):
    return (1.0, np.float64(v), 0.0)


def _moments_op(a, b):
    """Chan, Golub and LeVeque's merge of (count, mean, m2) summaries."""
    if a[0] == 0.0:
        return b
    if b[0] == 0.0:
        return a
    n = a[0] + b[0]
    if not (abs(a[1]) < _INF and abs(b[1]) < _INF):  # an infinity or a NaN:
        return (n, a[1] + b[1], _NAN)  # NumPy's mean is then inf or nan, its var nan
    d = b[1] - a[1]
    w = b[0] / n
    return (n, a[1] + d * w, a[2] + b[2] + d * d * a[0] * w)


def _nan_to_zero(i, v):
    return v if v == v else 0.0


def _nan_to_one(i, v):
    return v if v == v else 1.0


def _add(a, b):
    return a + b


def _mul(a, b):
    return a * b


# --- the monoids


def _key(name, fn, fmap):
    return ("mapped", ("structured", name), function_key(fn), function_key(fmap))


def _arg(name: str, op, dtype: np.dtype, numpy_arg) -> Monoid:
    dt = default_accumulator(check_dtype(dtype))  # float16/bfloat16: float32 values

    def host(x):
        i = int(numpy_arg(x))
        return (x.flat[i], i)

    return Monoid(
        name=name, fn=op, dtype=tuple_dtype([dt, np.int64]), identity=None,
        commutative=True, key=_key(name, op, _index_map), empty_ok=False, map=_index_map,
        finalize=lambda acc: acc[1], host=host,
    )


@functools.lru_cache(maxsize=64)
def argmax_monoid(dtype: np.dtype) -> Monoid:
    """The first index of the largest element (of the first NaN, if any)."""
    return _arg("argmax", _argmax_op, dtype, np.argmax)


@functools.lru_cache(maxsize=64)
def argmin_monoid(dtype: np.dtype) -> Monoid:
    """The first index of the smallest element (of the first NaN, if any)."""
    return _arg("argmin", _argmin_op, dtype, np.argmin)


@functools.lru_cache(maxsize=64)
def minmax_monoid(dtype: np.dtype) -> Monoid:
    dt = default_accumulator(check_dtype(dtype))
    return Monoid(
        name="minmax", fn=_minmax_op, dtype=tuple_dtype([dt, dt]), identity=None,
        commutative=True, key=_key("minmax", _minmax_op, _pair_map), empty_ok=False,
        map=_pair_map, host=lambda x: (np.min(x), np.max(x)),
    )


#: NumPy's result dtype of mean/var/std: float32 stays, everything else is float64
def FLOAT_RESULT(dtype: np.dtype) -> np.dtype:  # noqa: N802 (a dtype rule, like sum_dtype)
    return np.dtype(np.float32) if dtype == np.float32 else np.dtype(np.float64)


@functools.lru_cache(maxsize=64)
def moments_monoid(dtype: np.dtype, statistic: str, ddof: float = 0) -> Monoid:
    """``(count, mean, m2)`` in float64, finished as ``statistic``: mean, var or std."""
    check_dtype(dtype)
    if statistic not in ("mean", "var", "std"):
        raise ValueError(f"statistic must be mean, var or std, got {statistic!r}")
    out = FLOAT_RESULT(dtype).type

    def finalize(acc):
        n, mean, m2 = (float(v) for v in acc)
        if statistic == "mean":
            return out(mean if n > 0 else np.nan)
        var = m2 / (n - ddof) if n - ddof > 0 else np.nan
        return out(var if statistic == "var" else math.sqrt(var) if var == var else var)

    f8 = np.float64

    def host(x):
        mean = np.mean(x, dtype=f8)
        return (f8(x.size), mean, np.var(x, dtype=f8) * x.size)

    return Monoid(
        name=statistic, fn=_moments_op, dtype=tuple_dtype([f8, f8, f8]),
        identity=(f8(0), f8(0), f8(0)), commutative=True,
        key=_key("moments", _moments_op, _moments_map), map=_moments_map,
        finalize=finalize, host=host,
    )


def _nan_monoid(name, op, fmap, identity, dtype: np.dtype, acc_dtype=None,
                numpy_fn=None) -> Monoid:
    dt = check_dtype(dtype)
    acc = check_accumulator(acc_dtype) if acc_dtype is not None else sum_dtype(dt)
    if dt.kind != "f":  # no NaN to ignore: the plain built-in, as NumPy does
        return make_monoid("add" if op is _add else "mul", dt, acc_dtype=acc)
    return Monoid(
        name=name, fn=op, dtype=acc, identity=acc.type(identity), commutative=True,
        key=_key(name, op, fmap), map=fmap, host=lambda x: numpy_fn(x, dtype=acc),
    )


@functools.lru_cache(maxsize=64)
def nansum_monoid(dtype: np.dtype, acc_dtype=None) -> Monoid:
    """A sum that treats NaN as zero (``np.nansum``); all-NaN and empty give 0."""
    return _nan_monoid("nansum", _add, _nan_to_zero, 0, dtype, acc_dtype, np.nansum)


@functools.lru_cache(maxsize=64)
def nanprod_monoid(dtype: np.dtype, acc_dtype=None) -> Monoid:
    """A product that treats NaN as one (``np.nanprod``)."""
    return _nan_monoid("nanprod", _mul, _nan_to_one, 1, dtype, acc_dtype, np.nanprod)
