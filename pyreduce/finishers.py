"""The last step of a structured reduction to many values: an array of tuple
accumulators (a record array, fields ``f0``, ``f1``, ...) made into the values a
user sees, in NumPy's dtypes, all at once.

Each finisher is the array form of a monoid's ``finalize``
(:mod:`pyreduce.structured`), which finishes one accumulator; ``axis=``
reductions (:mod:`pyreduce.along`) and ``keepdims``/``out=`` of a reduction to
one value use these. Warnings are NumPy's, each given once per call however many
results it concerns, as NumPy's reductions along an axis give them.
"""

from __future__ import annotations

import warnings

import numpy as np

from .backends import _caller_level

__all__ = ["index", "checked_index", "pair", "difference", "mean", "variance"]


def _fields(acc: np.ndarray) -> list[np.ndarray]:
    return [acc[name] for name in acc.dtype.names]


def _warn(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=_caller_level())


def index(acc: np.ndarray) -> np.ndarray:
    """argmax/argmin: the last field, the index, as NumPy's ``intp``."""
    return _fields(acc)[-1].astype(np.intp)


def checked_index(acc: np.ndarray) -> np.ndarray:
    """nanargmax/nanargmin: the index, or NumPy's ValueError where a result has
    no element that is a number (the count field, second to last, is 0)."""
    if (_fields(acc)[-2] == 0).any():
        raise ValueError("All-NaN slice encountered")
    return index(acc)


def pair(dtype: np.dtype):
    """minmax: ``acc -> (min, max)``, arrays of ``dtype`` (complex: built from the
    real and imaginary fields)."""
    dtype = np.dtype(dtype)

    def finish(acc):
        f = _fields(acc)
        if dtype.kind != "c":
            return f[0].astype(dtype), f[1].astype(dtype)
        lo, hi = np.empty(f[0].shape, dtype), np.empty(f[0].shape, dtype)
        lo.real, lo.imag, hi.real, hi.imag = f
        return lo, hi

    return finish


def difference(dtype: np.dtype):
    """ptp: ``max - min`` of :func:`pair`'s arrays, subtracted by NumPy (integers
    wrap, NaN propagates)."""
    as_pair = pair(dtype)

    def finish(acc):
        lo, hi = as_pair(acc)
        return np.subtract(hi, lo)

    return finish


def mean(dtype: np.dtype):
    """mean/nanmean from ``(count, sum)`` or ``(count, sum.real, sum.imag)``: the
    sum over the count, NaN where the count is 0 (NumPy's "Mean of empty slice"
    warning); for complex input a non-finite part makes the other NaN, as NumPy's
    division of the sum by the count does."""
    dtype = np.dtype(dtype)

    def finish(acc):
        f = _fields(acc)
        empty = f[0] == 0
        if empty.any():
            _warn("Mean of empty slice")
        with np.errstate(invalid="ignore", divide="ignore"):
            parts = [part / f[0] for part in f[1:]]
        if len(f) == 2:
            return np.where(empty, np.nan, parts[0]).astype(dtype)
        re, im = parts
        bad = ~(np.isfinite(re) & np.isfinite(im))
        with np.errstate(invalid="ignore"):
            re, im = (np.where(bad, re + im * 0.0, re), np.where(bad, im - re * 0.0, im))
        out = np.empty(re.shape, dtype)
        out.real = np.where(empty, np.nan, re)
        out.imag = np.where(empty, np.nan, im)
        return out

    return finish


def variance(dtype: np.dtype, ddof, nan_rule: bool = False, root: bool = False):
    """var/std (nanvar/nanstd with ``nan_rule``): ``m2 / (count - ddof)``, the last
    field over the first. No degrees of freedom left gives inf (NaN where ``m2``
    is 0) as ``np.var`` divides, or NaN under ``nan_rule`` as ``np.nanvar``
    gives, with NumPy's warning; ``root``: the square root (std)."""
    dtype = np.dtype(dtype)

    def finish(acc):
        f = _fields(acc)
        dof = f[0] - ddof
        none_left = dof <= 0
        if none_left.any():
            _warn("Degrees of freedom <= 0 for slice")
        with np.errstate(divide="ignore", invalid="ignore"):
            var = f[-1] / np.where(none_left, 1.0, dof)
        fill = np.nan if nan_rule else np.where(f[-1] > 0, np.inf, np.nan)
        var = np.where(none_left, fill, var)
        return (np.sqrt(var) if root else var).astype(dtype)

    return finish
