"""Reductions whose accumulator is more than one value, and the NaN-ignoring sums.

Each is an ordinary :class:`~pyreduce.ops.Monoid`: an element map, an op over
tuples, an identity and a last step (:mod:`pyreduce.finishers`: on the device
or the host), written as plain Python that every backend compiles, so they run
on every backend and every warp-shuffle variant like a user's own tuple op. A
tuple's fields are real, so a complex input travels as its real and imaginary
parts, with ops of its own.

``argmax``/``argmin``
    ``(value, index)``, or ``(real, imag, index)``; the op keeps the larger
    (smaller) value, complex values ordered as NumPy orders them (real part
    first, then imaginary), and on a tie the smaller index, and treats NaN (in
    either part) as beyond every number, so the result is NumPy's: the first
    index of the extreme, or of the first NaN. The op is commutative as well as
    associative: no order of combining changes it.
``minmax``
    ``(min, max)`` in one pass, NaN propagating into both like ``np.min``/``np.max``;
    ``(min.real, min.imag, max.real, max.imag)`` for complex input, where the
    first NaN is the result, as NumPy's.
``mean``
    ``(count, sum)`` in float64, or ``(count, sum.real, sum.imag)``: counts and
    sums add, so a mean costs what a sum does; finished as the sum over the count.
``var``/``std``
    ``(count, shift, s, q)`` in float64, or ``(count, shift.real, shift.imag,
    s.real, s.imag, q)``: ``s`` and ``q`` the sums of ``x - shift`` and of
    ``|x - shift|**2``. A merge moves the right summary's sums to the left
    one's shift (a few multiply-adds, no division: an element folded into a
    thread's summary costs about what a sum's add does); a summary whose shift
    has drifted from its mean, so that the finish ``m2 = q - |s|**2 / count``
    would cancel more than half of ``q``, is moved to its mean. No second pass,
    and the precision a two-pass method has (``docs/structured.md``). Results have
    NumPy's dtypes, except that half-precision input gives float32
    (:func:`mean_dtype`, :func:`var_dtype`).
``nansum``/``nanprod``
    a map turning NaN (a complex value with NaN in either part) into the identity
    before a plain sum (product), as NumPy does: an op alone cannot tell an input
    NaN from one that ``inf - inf`` made.
``nanmean``/``nanvar``/``nanstd``
    mean's (var's) accumulator and op, with a map that gives a NaN element the
    summary of no elements (count 0), which the merge skips.
``nanargmax``/``nanargmin``
    ``(value, count, index)``, or ``(real, imag, count, index)``: NaN mapped to
    -inf (+inf) with count 0, as ``np.nanargmax`` replaces it, so the index is
    NumPy's; a total count of 0 is NumPy's "All-NaN slice encountered".
``ptp``
    ``minmax``'s pair, finished as ``max - min`` (integers wrap, as ``np.ptp``'s).
``count_nonzero``
    a sum of ``1 if v != 0 else 0`` in int64.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers

import numpy as np

from . import finishers
from .cache import Memo
from .dtypes import (
    check_accumulator, check_dtype, default_accumulator, element, negative_zero, tuple_dtype,
)
from .ops import Monoid, function_key, make_monoid, sum_dtype
from .spec import F32_TILES

__all__ = ["argmax_monoid", "argmin_monoid", "minmax_monoid", "moments_monoid",
           "nansum_monoid", "nanprod_monoid", "mean_dtype", "var_dtype", "STATISTICS",
           "degrees_of_freedom", "nanargmax_monoid", "nanargmin_monoid", "ptp_monoid",
           "count_nonzero_monoid"]

_INF = math.inf
_NAN = math.nan


# --- the device code: plain Python, compiled by each backend. A device function
# cannot call a plain Python helper (each backend compiles only the op and the
# map), so the complex ops repeat the real ones' NaN and tie rules in full.

def _index_map(i, v):
    return (v, i)


def _pair_map(i, v):
    return (v, v)


def _complex_index_map(i, v):
    return (v.real, v.imag, i)


def _complex_pair_map(i, v):
    return (v.real, v.imag, v.real, v.imag)


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


def _argmax_op_compare_first(a, b):
    """:func:`_argmax_op` with the common case first (one value is larger; a
    comparison with NaN is false), then NaN and ties. The same results; on an
    H100 float32 argmax of 2**28 elements took 382 us against 424 with the
    NaN test first (PyTorch 363), while int32 and float64 took 3-4% longer,
    so it serves float32 values only (float16 and bfloat16 too)."""
    if a[0] > b[0]:
        return a
    if b[0] > a[0]:
        return b
    a_nan, b_nan = a[0] != a[0], b[0] != b[0]
    if a_nan != b_nan:
        return a if a_nan else b
    return a if a[1] <= b[1] else b


def _argmin_op_compare_first(a, b):
    if a[0] < b[0]:
        return a
    if b[0] < a[0]:
        return b
    a_nan, b_nan = a[0] != a[0], b[0] != b[0]
    if a_nan != b_nan:
        return a if a_nan else b
    return a if a[1] <= b[1] else b


def _complex_argmax_op(a, b):
    """``(real, imag, index)``: NumPy's order of complex values, real part first."""
    a_nan = a[0] != a[0] or a[1] != a[1]
    b_nan = b[0] != b[0] or b[1] != b[1]
    if a_nan != b_nan:
        return a if a_nan else b
    if a_nan or (a[0] == b[0] and a[1] == b[1]):  # two NaNs, or a tie: the first
        return a if a[2] <= b[2] else b
    return a if (a[0] > b[0] or (a[0] == b[0] and a[1] > b[1])) else b


def _complex_argmin_op(a, b):
    a_nan = a[0] != a[0] or a[1] != a[1]
    b_nan = b[0] != b[0] or b[1] != b[1]
    if a_nan != b_nan:
        return a if a_nan else b
    if a_nan or (a[0] == b[0] and a[1] == b[1]):
        return a if a[2] <= b[2] else b
    return a if (a[0] < b[0] or (a[0] == b[0] and a[1] < b[1])) else b


def _minmax_op(a, b):
    lo = a[0] if (a[0] < b[0] or a[0] != a[0]) else b[0]
    hi = a[1] if (a[1] > b[1] or a[1] != a[1]) else b[1]
    return (lo, hi)


def _complex_minmax_op(a, b):
    """``(min.real, min.imag, max.real, max.imag)``: a NaN in either part wins, the
    left one first (which NaN is the result: not commutative); else NumPy's order,
    the left one on a tie."""
    a_lo_nan, b_lo_nan = a[0] != a[0] or a[1] != a[1], b[0] != b[0] or b[1] != b[1]
    a_hi_nan, b_hi_nan = a[2] != a[2] or a[3] != a[3], b[2] != b[2] or b[3] != b[3]
    keep_lo = a_lo_nan or (not b_lo_nan and (a[0] < b[0] or (a[0] == b[0] and a[1] <= b[1])))
    keep_hi = a_hi_nan or (not b_hi_nan and (a[2] > b[2] or (a[2] == b[2] and a[3] >= b[3])))
    lo_re, lo_im = (a[0], a[1]) if keep_lo else (b[0], b[1])
    hi_re, hi_im = (a[2], a[3]) if keep_hi else (b[2], b[3])
    return (lo_re, lo_im, hi_re, hi_im)


def _moments_map(i, v):
    x = np.float64(v)
    # its own shift: no deviation; q is 0, or NaN for an infinity or a NaN
    return (1.0, x, 0.0, x - x)


def _moments_op(a, b):
    """The merge of ``(count, shift, s, q)`` summaries, ``s`` and ``q`` the sum
    of ``x - shift`` and of its square over the summary's elements: ``b``'s
    sums moved to ``a``'s shift, exactly (no division). Where the shift has
    drifted from the mean so far that ``s*s/count``, which the finisher takes
    from ``q`` (``m2``), is more than half of ``q``, the summary is moved to its
    mean (a division): the finish then never loses more than a bit to
    cancellation, however many elements are folded one by one (an axis
    kernel's lane) or however far the first one lies."""
    if a[0] == 0.0:
        return b
    if b[0] == 0.0:
        return a
    n = a[0] + b[0]
    d = b[1] - a[1]
    s = a[2] + b[2] + b[0] * d
    q = a[3] + b[3] + d * (2.0 * b[2] + b[0] * d)
    if 2.0 * s * s > q * n:
        # the shift moved to the mean as rounded (d exact where the two are
        # close); what the rounding left stays in s, so no later merge loses it
        d = (a[1] + s / n) - a[1]
        return (n, a[1] + d, s - n * d, q - d * (2.0 * s - n * d))
    return (n, a[1], s, q)


def _complex_moments_map(i, v):
    re, im = np.float64(v.real), np.float64(v.imag)
    return (1.0, re, im, 0.0, 0.0, (re - re) + (im - im))


def _complex_moments_op(a, b):
    """:func:`_moments_op` of ``(count, shift.real, shift.imag, s.real, s.imag,
    q)``, ``q`` the sum of ``|x - shift|**2``: each part's sums move as a real
    one's do, and their squares add."""
    if a[0] == 0.0:
        return b
    if b[0] == 0.0:
        return a
    n = a[0] + b[0]
    d_re = b[1] - a[1]
    d_im = b[2] - a[2]
    s_re = a[3] + b[3] + b[0] * d_re
    s_im = a[4] + b[4] + b[0] * d_im
    q = (a[5] + b[5] + d_re * (2.0 * b[3] + b[0] * d_re)
         + d_im * (2.0 * b[4] + b[0] * d_im))
    if 2.0 * (s_re * s_re + s_im * s_im) > q * n:
        e_re = (a[1] + s_re / n) - a[1]
        e_im = (a[2] + s_im / n) - a[2]
        return (n, a[1] + e_re, a[2] + e_im, s_re - n * e_re, s_im - n * e_im,
                q - e_re * (2.0 * s_re - n * e_re) - e_im * (2.0 * s_im - n * e_im))
    return (n, a[1], a[2], s_re, s_im, q)


def _nan_moments_map(i, v):
    # a NaN element: a summary of no elements, which _moments_op skips
    if v != v:
        return (0.0, 0.0, 0.0, 0.0)
    x = np.float64(v)
    return (1.0, x, 0.0, x - x)


def _complex_nan_moments_map(i, v):
    if v != v:  # NaN in either part
        return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    re, im = np.float64(v.real), np.float64(v.imag)
    return (1.0, re, im, 0.0, 0.0, (re - re) + (im - im))


def _sum_map(i, v):
    return (1.0, np.float64(v))


def _nan_sum_map(i, v):
    if v != v:  # a NaN element: counted out, added as nothing
        return (0.0, 0.0)
    return (1.0, np.float64(v))


def _complex_sum_map(i, v):
    return (1.0, np.float64(v.real), np.float64(v.imag))


def _complex_nan_sum_map(i, v):
    if v != v:  # NaN in either part
        return (0.0, 0.0, 0.0)
    return (1.0, np.float64(v.real), np.float64(v.imag))


def _sums_op(a, b):
    """Counts and sums add: a mean's summary costs what a sum costs."""
    return (a[0] + b[0], a[1] + b[1])


def _complex_sums_op(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def _nan_to_zero(i, v):
    # a complex value with NaN in either part is unequal to itself
    return v if v == v else 0.0


def _nan_to_one(i, v):
    return v if v == v else 1.0


def _nan_to_zero_real(i, v):
    # a complex input into a real dtype=: NumPy replaces NaN, then keeps the real part
    return v.real if v == v else 0.0


def _nan_to_one_real(i, v):
    return v.real if v == v else 1.0


def _add(a, b):
    return a + b


def _mul(a, b):
    return a * b


# --- the monoids


def _key(name, fn, fmap):
    return ("mapped", ("structured", name), function_key(fn), function_key(fmap))


#: first passes that may summarise float32 tiles in float32 (KernelSpec.f32_tiles)
F32_TILES[_key("sums", _sums_op, _sum_map)] = "sums"
F32_TILES[_key("moments", _moments_op, _moments_map)] = "moments"
F32_TILES[_key("argmax", _argmax_op_compare_first, _index_map)] = "argmax"
F32_TILES[_key("argmin", _argmin_op_compare_first, _index_map)] = "argmin"


def _parts(dtype: np.dtype) -> np.dtype:
    """The real dtype of a complex dtype's parts."""
    return np.dtype(np.float32) if dtype == np.complex64 else np.dtype(np.float64)


def _arg(name: str, op, complex_op, dtype: np.dtype, numpy_arg, float32_op=None) -> Monoid:
    dt = default_accumulator(check_dtype(dtype))  # float16/bfloat16: float32 values
    if dt == np.float32 and float32_op is not None:
        op = float32_op
    if dt.kind == "c":
        fields, op, fmap = [_parts(dt)] * 2 + [np.int64], complex_op, _complex_index_map

        def host(x):
            i = int(numpy_arg(x))
            return (x.real.flat[i], x.imag.flat[i], i)
    else:
        fields, fmap = [dt, np.int64], _index_map

        def host(x):
            i = int(numpy_arg(x))
            return (x.flat[i], i)

    finisher = finishers.index()
    return Monoid(
        name=name, fn=op, dtype=tuple_dtype(fields), identity=None,
        commutative=True, key=_key(name, op, fmap), empty_ok=False, map=fmap,
        finalize=finisher.scalar, finisher=finisher, host=host,
    )


@functools.lru_cache(maxsize=64)
def argmax_monoid(dtype: np.dtype) -> Monoid:
    """The first index of the largest element (of the first NaN, if any)."""
    return _arg("argmax", _argmax_op, _complex_argmax_op, dtype, np.argmax,
                _argmax_op_compare_first)


@functools.lru_cache(maxsize=64)
def argmin_monoid(dtype: np.dtype) -> Monoid:
    """The first index of the smallest element (of the first NaN, if any)."""
    return _arg("argmin", _argmin_op, _complex_argmin_op, dtype, np.argmin,
                _argmin_op_compare_first)


@functools.lru_cache(maxsize=64)
def minmax_monoid(dtype: np.dtype) -> Monoid:
    """``(min, max)``, NaN propagating into both."""
    dt = default_accumulator(check_dtype(dtype))
    if dt.kind != "c":
        return Monoid(
            name="minmax", fn=_minmax_op, dtype=tuple_dtype([dt, dt]), identity=None,
            commutative=True, key=_key("minmax", _minmax_op, _pair_map), empty_ok=False,
            map=_pair_map, host=lambda x: (np.min(x), np.max(x)),
            finisher=finishers.pair(dt),  # one value: the tuple as it is (no finalize)
        )

    def host(x):
        # NumPy walks a strided view in memory order: its first NaN is the C
        # order's only once flattened in that order (a copy where not contiguous)
        flat = np.ravel(x)
        lo, hi = np.min(flat), np.max(flat)
        return (lo.real, lo.imag, hi.real, hi.imag)

    finisher = finishers.pair(dt)

    return Monoid(
        name="minmax", fn=_complex_minmax_op, dtype=tuple_dtype([_parts(dt)] * 4),
        identity=None, commutative=False,
        key=_key("minmax", _complex_minmax_op, _complex_pair_map), empty_ok=False,
        map=_complex_pair_map, host=host,
        finalize=finisher.scalar, finisher=finisher,
    )


def var_dtype(dtype: np.dtype) -> np.dtype:
    """The result dtype of var and std: NumPy's (float32 for float32 and complex64,
    float64 for the other real, integer, bool and complex inputs), and float32 for
    float16 and bfloat16, which NumPy computes in float32 and rounds to half
    precision (pyreduce keeps float32, as its sum and max of them do)."""
    dt = check_dtype(dtype)
    return np.dtype(np.float32) if default_accumulator(dt) in _SINGLE else \
        np.dtype(np.float64)


_SINGLE = (np.dtype(np.float32), np.dtype(np.complex64))


def mean_dtype(dtype: np.dtype) -> np.dtype:
    """The result dtype of mean: complex input keeps its dtype, as in NumPy; real
    input gets :func:`var_dtype`."""
    dt = check_dtype(dtype)
    return dt if dt.kind == "c" else var_dtype(dt)


#: The statistics :func:`moments_monoid` finishes; the ``nan`` ones skip NaN.
STATISTICS = ("mean", "var", "std", "nanmean", "nanvar", "nanstd")


def moments_monoid(dtype: np.dtype, statistic: str, ddof=0, result=None) -> Monoid:
    """The monoid of ``statistic``: mean or nanmean from ``(count, sum)`` in
    float64 (:func:`_mean_monoid`); var, std, nanvar and nanstd from
    ``(count, shift, s, q)`` in float64 (``(count, shift.real, shift.imag,
    s.real, s.imag, q)`` for complex input). The NaN-ignoring ones map a NaN
    element (NaN in either part of a complex one) to the count 0, so that it
    is skipped. ``result``: a ``dtype=`` the results are finished in, where the
    finisher can (:meth:`pyreduce.finishers.Finisher.to`), rounded once; a
    float64 or complex128 result is computed as NumPy computes it in that
    dtype, without the float32 runs of float32 and half-precision input
    (:attr:`pyreduce.spec.KernelSpec.f32_tiles`)."""
    # ddof's type too: a value equal to a good one (1+0j, Decimal(1)) is refused
    key = (dtype, statistic, type(ddof), ddof, result)
    try:  # a repeat's monoid, without the checks (a tenth of a call's host time)
        found = _MOMENTS.get(key)
    except TypeError:  # an unhashable argument: the checks below name it
        found = key = None
    if found is None:
        found = _checked_moments_monoid(dtype, statistic, ddof, result)
        if key is not None:
            _MOMENTS.put(key, found)
    return found


#: :func:`moments_monoid`'s monoids by its arguments as given (ddof is the user's)
_MOMENTS = Memo("moments monoids", 256)


def _checked_moments_monoid(dtype, statistic: str, ddof, result) -> Monoid:
    check_dtype(dtype)
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, "
                         f"got {statistic!r}")
    _check_real("ddof", ddof)
    result = None if result is None else np.dtype(result)
    if statistic.removeprefix("nan") == "mean":
        return _mean_monoid(dtype, statistic, result)
    return _moments_monoid(dtype, statistic, ddof, result)


def _wide(finisher) -> bool:
    """Whether results are finished wider than float32 (complex64): then
    computed as NumPy computes them in that dtype, without float32 runs (a key
    :data:`F32_TILES` does not hold)."""
    return finisher.dtype.itemsize > (8 if finisher.dtype.kind == "c" else 4)


@functools.lru_cache(maxsize=64)
def _mean_monoid(dtype: np.dtype, statistic: str, result) -> Monoid:
    """mean/nanmean: ``(count, sum)`` in float64 (``(count, sum.real, sum.imag)``
    for complex input), merged by adding, finished as the sum over the count.
    Chan's ``(count, mean, m2)`` update divided at every merge: on an H200 it
    made a float32 mean 2.7 times a sum's time. A mean of float32 or half
    precision finished in float32 or narrower may add a lane's loaded run in
    float32 first (a pairwise sum of its items, 8 or 16 by default, then float64:
    NumPy's own float32 mean adds every element in float32)."""
    is_complex = check_dtype(dtype).kind == "c"
    f8 = np.float64
    skip_nan = statistic == "nanmean" and element(dtype).kind in "fc"
    if is_complex:
        op, width = _complex_sums_op, 3
        fmap = _complex_nan_sum_map if skip_nan else _complex_sum_map
    else:
        op, width = _sums_op, 2
        fmap = _nan_sum_map if skip_nan else _sum_map
    finisher = finishers.mean(mean_dtype(dtype), counted=skip_nan).to(result)
    name = "sums in float64" if _wide(finisher) else "sums"

    def host(x):
        # seeded with -0.0, as the kernels' sums are (cpu_parallel.ufunc_reduce);
        # with +0.0 where a NaN was skipped: the kernels map it to +0.0
        start = -0.0
        if skip_nan:
            kept = x[~np.isnan(x)]
            start, x = (0.0 if kept.size < x.size else -0.0), kept
        parts = (x.real, x.imag) if is_complex else (x,)
        return (f8(x.size),) + tuple(np.add.reduce(p, None, f8, initial=start) for p in parts)

    return Monoid(
        name=statistic, fn=op, dtype=tuple_dtype([f8] * width),
        identity=(f8(0),) * width, commutative=True,
        key=_key(name, op, fmap), map=fmap, finalize=finisher.scalar,
        finisher=finisher, host=host,
    )


@functools.lru_cache(maxsize=256)  # one per (dtype, statistic, ddof): ddof is the user's
def _moments_monoid(dtype: np.dtype, statistic: str, ddof, result) -> Monoid:
    is_complex = check_dtype(dtype).kind == "c"
    f8 = np.float64
    # integers and bools have no NaN: the plain map (and kernels), as NumPy does
    skip_nan = statistic.startswith("nan") and element(dtype).kind in "fc"
    if is_complex:
        op, fmap, width = _complex_moments_op, _complex_moments_map, 6
        if skip_nan:
            fmap = _complex_nan_moments_map
    else:
        op, fmap, width = _moments_op, _moments_map, 4
        if skip_nan:
            fmap = _nan_moments_map
    plain = statistic.removeprefix("nan")
    # integers and bools: np.nanvar is np.var, inf where no degree of freedom is left
    finisher = finishers.variance(var_dtype(dtype), ddof, nan_rule=skip_nan,
                                  root=plain == "std", counted=skip_nan,
                                  complex_parts=is_complex).to(result)

    def host(x):
        if skip_nan:
            x = x[~np.isnan(x)]
            if x.size == 0:  # NumPy would warn here; the finished value warns once
                return (f8(0),) * width
        parts = (x.real, x.imag) if is_complex else (x,)
        means = tuple(np.mean(p, dtype=f8) for p in parts)
        if is_complex:  # as before: the parts' variances (the docs' examples keep its bits)
            m2 = sum(np.var(p, dtype=f8) for p in parts) * x.size
        else:
            m2 = _squared_deviations(x, means[0])
        # centred on the mean: no deviation from the shift
        return (f8(x.size),) + means + (f8(0),) * len(parts) + (m2,)

    return Monoid(
        name=statistic, fn=op, dtype=tuple_dtype([f8] * width),
        identity=(f8(0),) * width, commutative=True,
        key=_key("moments in float64" if _wide(finisher) else "moments", op, fmap), map=fmap,
        finalize=finisher.scalar, finisher=finisher, host=host,
    )


def _squared_deviations(x: np.ndarray, mean) -> np.float64:
    """``sum((x - mean)**2)`` in float64 of a real ``x``, ``mean`` being
    ``np.mean(x, dtype=float64)``:
    ``np.var``'s passes after its mean, one fewer, and divided by the count
    ``np.var``'s value to the bit below the cpu backend's split. Empty: NaN, as
    ``np.var`` of nothing times its size was."""
    if x.size == 0:
        return np.float64(np.nan)
    d = np.subtract(np.atleast_1d(x), mean, dtype=np.float64)  # 0-d: an array too
    np.multiply(d, d, out=d)
    return np.sum(d)


def _nan_monoid(name, op, fmap, identity, dtype: np.dtype, acc_dtype=None,
                numpy_fn=None) -> Monoid:
    dt = check_dtype(dtype)
    acc = check_accumulator(acc_dtype) if acc_dtype is not None else sum_dtype(dt)
    if element(dt).kind not in "fc":  # no NaN to ignore: the plain built-in, as NumPy does
        return make_monoid("add" if op is _add else "mul", dt, acc_dtype=acc)

    # a sum seeded with -0.0, as the kernels' are (cpu_parallel.ufunc_reduce)
    start = {"initial": negative_zero(acc)} if op is _add and acc.kind in "fc" else {}

    def host(x):
        return numpy_fn(x, dtype=acc, **start)

    if dt.kind == "c" and acc.kind != "c":  # complex into a real dtype=: the real parts
        fmap = _REAL_PART[fmap]

        def host(x):  # (the caller gives NumPy's ComplexWarning)
            return numpy_fn(np.where(x == x, x.real, identity), dtype=acc, **start)

    return Monoid(
        name=name, fn=op, dtype=acc, identity=acc.type(identity), commutative=True,
        key=_key(name, op, fmap), map=fmap, host=host,
    )


#: the NaN maps that keep a complex element's real part (a real ``dtype=``)
_REAL_PART = {_nan_to_zero: _nan_to_zero_real, _nan_to_one: _nan_to_one_real}


@functools.lru_cache(maxsize=64)
def nansum_monoid(dtype: np.dtype, acc_dtype=None) -> Monoid:
    """A sum that treats NaN as zero (``np.nansum``); all-NaN and empty give 0."""
    return _nan_monoid("nansum", _add, _nan_to_zero, 0, dtype, acc_dtype, np.nansum)


@functools.lru_cache(maxsize=64)
def nanprod_monoid(dtype: np.dtype, acc_dtype=None) -> Monoid:
    """A product that treats NaN as one (``np.nanprod``)."""
    return _nan_monoid("nanprod", _mul, _nan_to_one, 1, dtype, acc_dtype, np.nanprod)


# --- NumPy's other NaN-aware and statistical reductions (pyreduce.nanstats)


def degrees_of_freedom(ddof, correction):
    """The ``ddof`` of a var/std call given ``ddof=`` (NumPy's) or ``correction=``
    (the array API's name for it): ``correction`` when given, and a ValueError
    when both are, as ``np.var`` raises (a ``ddof`` of 0 counts as not given);
    a TypeError for a ``ddof`` that is not a real number (an array among them)."""
    if correction is None:
        return _check_real("ddof", ddof)
    if not (isinstance(ddof, numbers.Real) and ddof == 0):
        raise ValueError("ddof= and correction= are the same number under two names: "
                         "give one of them")
    return _check_real("correction", correction)


def _check_real(name: str, value):
    """``value`` of the keyword ``name``, or a TypeError where it is not a real
    number (an int, the common case, costs one type check)."""
    if type(value) is not int and not isinstance(value, numbers.Real):
        raise TypeError(f"{name}= must be a real number, got {type(value).__name__}")
    return value


# nanargmax/nanargmin: ``(value, count, index)``; the map puts -inf (+inf) in
# place of a NaN, as np.nanargmax does, with count 0 (else 1), so that the index
# is NumPy's and a count of 0 tells an all-NaN input. The values reaching the op
# are never NaN.

def _nan_below_map(i, v):
    return (v, 1, i) if v == v else (-_INF, 0, i)


def _nan_above_map(i, v):
    return (v, 1, i) if v == v else (_INF, 0, i)


def _complex_nan_below_map(i, v):
    if v == v:
        return (v.real, v.imag, 1, i)
    return (-_INF, 0.0, 0, i)


def _complex_nan_above_map(i, v):
    if v == v:
        return (v.real, v.imag, 1, i)
    return (_INF, 0.0, 0, i)


def _nanargmax_op(a, b):
    n = a[1] + b[1]
    if a[0] > b[0] or (a[0] == b[0] and a[2] <= b[2]):
        return (a[0], n, a[2])
    return (b[0], n, b[2])


def _nanargmin_op(a, b):
    n = a[1] + b[1]
    if a[0] < b[0] or (a[0] == b[0] and a[2] <= b[2]):
        return (a[0], n, a[2])
    return (b[0], n, b[2])


def _complex_nanargmax_op(a, b):
    """``(real, imag, count, index)``: NumPy's order, real part first."""
    n = a[2] + b[2]
    if a[0] > b[0] or (a[0] == b[0] and (a[1] > b[1] or (a[1] == b[1] and a[3] <= b[3]))):
        return (a[0], a[1], n, a[3])
    return (b[0], b[1], n, b[3])


def _complex_nanargmin_op(a, b):
    n = a[2] + b[2]
    if a[0] < b[0] or (a[0] == b[0] and (a[1] < b[1] or (a[1] == b[1] and a[3] <= b[3]))):
        return (a[0], a[1], n, a[3])
    return (b[0], b[1], n, b[3])


def _nonzero(i, v):
    return 1 if v != 0 else 0


def _nanarg(name, plain, op, complex_op, fmap, complex_map, dtype, fill, numpy_arg):
    dt = default_accumulator(check_dtype(dtype))
    if element(dt).kind not in "fc":  # no NaN: argmax's monoid, as NumPy does
        return dataclasses.replace(plain(dt), name=name)
    if dt.kind == "c":
        fields, op, fmap = [_parts(dt)] * 2 + [np.int64] * 2, complex_op, complex_map

        def value(y, i):
            return (y.real.flat[i], y.imag.flat[i])
    else:
        fields = [dt, np.int64, np.int64]

        def value(y, i):
            return (y.flat[i],)

    def host(x):
        nan = np.isnan(x)
        y = np.where(nan, fill, x)
        i = int(numpy_arg(y))
        return value(y, i) + (int(x.size - np.count_nonzero(nan)), i)

    finisher = finishers.checked_index()
    return Monoid(
        name=name, fn=op, dtype=tuple_dtype(fields), identity=None, commutative=True,
        key=_key(name, op, fmap), empty_ok=False, map=fmap, finalize=finisher.scalar,
        finisher=finisher, host=host,
    )


@functools.lru_cache(maxsize=64)
def nanargmax_monoid(dtype: np.dtype) -> Monoid:
    """The first index of the largest element, NaN taken as -inf; all-NaN is
    NumPy's ValueError."""
    return _nanarg("nanargmax", argmax_monoid, _nanargmax_op, _complex_nanargmax_op,
                   _nan_below_map, _complex_nan_below_map, dtype, -_INF, np.argmax)


@functools.lru_cache(maxsize=64)
def nanargmin_monoid(dtype: np.dtype) -> Monoid:
    """The first index of the smallest element, NaN taken as +inf."""
    return _nanarg("nanargmin", argmin_monoid, _nanargmin_op, _complex_nanargmin_op,
                   _nan_above_map, _complex_nan_above_map, dtype, _INF, np.argmin)


@functools.lru_cache(maxsize=64)
def ptp_monoid(dtype: np.dtype) -> Monoid:
    """``max - min`` from :func:`minmax_monoid`'s pair, subtracted as ``np.ptp``
    subtracts (a ufunc: integers wrap silently, NaN propagates)."""
    dt = check_dtype(dtype)
    if dt.kind == "b":
        raise TypeError("ptp of a bool array: NumPy defines no subtraction of booleans "
                        "(np.ptp raises too); use max(x) ^ min(x) or cast to an integer")
    finisher = finishers.difference(default_accumulator(dt))
    return dataclasses.replace(minmax_monoid(dt), name="ptp", finalize=finisher.scalar,
                               finisher=finisher)


@functools.lru_cache(maxsize=64)
def count_nonzero_monoid(dtype: np.dtype) -> Monoid:
    """The number of elements unequal to zero (NaN counts, as in NumPy; a complex
    value is zero when both parts are), in int64."""
    check_dtype(dtype)
    i8 = np.dtype(np.int64)
    return Monoid(
        name="count_nonzero", fn=_add, dtype=i8, identity=i8.type(0), commutative=True,
        key=_key("count_nonzero", _add, _nonzero), map=_nonzero,
        host=lambda x: i8.type(np.count_nonzero(x)),
    )
