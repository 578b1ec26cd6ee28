"""NumPy's NaN-ignoring statistics and the other whole-array reductions built on
the tuple accumulators of :mod:`pyreduce.structured`: ``nanmean``, ``nanvar``,
``nanstd``, ``nanargmax``, ``nanargmin``, ``ptp`` and ``count_nonzero``.

Like ``mean``, ``argmax`` and ``minmax``, each reduces in one pass, on every
backend, and takes NumPy's keywords in NumPy's order (``axis``, ``dtype``,
``out``, ``keepdims``, ``where``, ``ddof``/``correction`` where NumPy's
function has them), ``device_result=`` and ``backend=``, ``stream=``,
``variant=`` and ``tuning=``, as :func:`pyreduce.reduce` does
(:mod:`pyreduce.along`). A masked array's unmasked elements are reduced, and a
Dask array gives a lazy result, as for the other reductions
(``docs/semantics.md``).
"""

from __future__ import annotations

import numpy as np

from . import masked, structured
from .general import _on_dask, _reduce
from .named import sum as _sum
from .stats import (_MOMENTS, _TUNED, _dask, _highest, _lowest, _moments, _structured, _tuned,
                    index_reduction)
from .axes import normalize_axes
from .interop import inspect

__all__ = ["nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin", "ptp", "count_nonzero"]


def _whole(name: str, x, monoid_of, kwargs: dict, rule=masked.NAMED):
    """``x`` reduced to one value with the monoid ``monoid_of(dtype)``; ``kwargs``
    are the call's backend, stream and tuning keywords (``variant=``,
    ``tuning=``)."""
    info = inspect(x, masked=True)
    return _reduce(info, monoid_of(info.dtype), None, masked_rule=rule,
                   **_tuned(kwargs, name, _TUNED | {"device_result"}))


def nanmean(x, axis=None, dtype=None, out=None, keepdims=False, *, device_result=None,
            **kwargs):
    """The mean of the elements that are not NaN, like ``np.nanmean``: a complex
    value with NaN in either part is skipped. Dtypes as for ``mean`` (float32
    for float16 and bfloat16 input, where NumPy returns float16); integers and
    bools have no NaN, so their mean is ``mean``'s. An empty or all-NaN input
    gives NaN with NumPy's RuntimeWarning ("Mean of empty slice"), as does such
    a lane along ``axis``. Keywords as for ``mean``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.nanmean(np.array([1.0, np.nan, 3.0]), backend="cpu"))
    2.0
    >>> complex(pyreduce.nanmean(np.array([1 + 1j, complex(np.nan, 5), 3j]), backend="cpu"))
    (0.5+2j)
    """
    if _on_dask(x):
        return _dask("nanmean", x, kwargs, axis=axis, dtype=dtype, out=out,
                     keepdims=keepdims, device_result=device_result)
    return _structured("nanmean", x,
                       lambda dt: structured.moments_monoid(dt, "nanmean", result=dtype),
                       axis, keepdims, out, dtype, device_result, kwargs, _MOMENTS)


def nanvar(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None,
           device_result=None, **kwargs):
    """The variance of the elements that are not NaN, like ``np.nanvar``: real for
    complex input, dtypes as for ``var``. ``ddof`` (NumPy's) or ``correction`` (the
    array API's name for it; giving both is a ValueError, as in NumPy) is
    subtracted from the count of numbers. Where none is left (all-NaN, empty, or
    ``ddof`` at least the count) the result is NaN with NumPy's RuntimeWarning
    ("Degrees of freedom <= 0 for slice"); ``var`` gives inf there, as NumPy's
    does. Keywords as for ``var``.

    >>> import numpy as np, pyreduce
    >>> x = np.array([1.0, np.nan, 2.0, 3.0, 4.0])
    >>> float(pyreduce.nanvar(x, backend="cpu"))
    1.25
    >>> float(pyreduce.nanvar(x, correction=1, backend="cpu"))
    1.6666666666666667
    """
    return _moments("nanvar", x, axis, dtype, out, ddof, keepdims, correction, device_result,
                    kwargs)


def nanstd(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None,
           device_result=None, **kwargs):
    """``sqrt(nanvar(x, ddof))``, like ``np.nanstd``. Keywords as for ``nanvar``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.nanstd(np.array([2.0, np.nan, 4.0]), backend="cpu"))
    1.0
    """
    return _moments("nanstd", x, axis, dtype, out, ddof, keepdims, correction, device_result,
                    kwargs)


def nanargmax(x, axis=None, out=None, *, keepdims=False, device_result=None, **kwargs):
    """The flat (C-order) index of the largest element that is not NaN, the first
    on ties, like ``np.nanargmax``, which reads a NaN as -inf (so where the
    largest number is -inf, a NaN before it can be the answer, as in NumPy). A
    complex value with NaN in either part is NaN; complex values are ordered by
    the real part, then the imaginary one. An all-NaN input raises NumPy's
    ValueError ("All-NaN slice encountered"), an empty one ValueError too.
    Integers and bools: ``argmax``. Result int64 (``intp``). Keywords as for
    ``argmax``.

    >>> import numpy as np, pyreduce
    >>> int(pyreduce.nanargmax(np.array([np.nan, 3.0, 7.0, np.nan, 7.0]), backend="cpu"))
    2
    >>> pyreduce.nanargmax(np.array([np.nan, np.nan]), backend="cpu")
    Traceback (most recent call last):
        ...
    ValueError: All-NaN slice encountered
    """
    return index_reduction("nanargmax", x, structured.nanargmax_monoid, _lowest, axis, out,
                           keepdims, device_result, kwargs)


def nanargmin(x, axis=None, out=None, *, keepdims=False, device_result=None, **kwargs):
    """The flat index of the smallest element that is not NaN (NaN read as +inf),
    like ``np.nanargmin``. Errors and keywords as for ``nanargmax``.

    >>> import numpy as np, pyreduce
    >>> int(pyreduce.nanargmin(np.array([4.0, np.nan, -2.0]), backend="cpu"))
    2
    """
    return index_reduction("nanargmin", x, structured.nanargmin_monoid, _highest, axis, out,
                           keepdims, device_result, kwargs)


def ptp(x, axis=None, out=None, keepdims=False, *, device_result=None, **kwargs):
    """Peak to peak, ``max(x) - min(x)``, in one pass, like ``np.ptp``: of the
    input's dtype, integers wrapping as NumPy's do (int8 ``[-100, 100]`` gives
    -56), NaN propagating, complex values ordered by the real part, then the
    imaginary one. float16 and bfloat16 give float32 (``max`` and ``min`` of
    them do). A bool input is a TypeError, as in NumPy, and an empty one a
    ValueError. Keywords as for ``minmax``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.ptp(np.array([3.0, -1.5, 2.0]), backend="cpu"))
    4.5
    >>> pyreduce.ptp(np.array([-100, 100], dtype=np.int8), backend="cpu")
    np.int8(-56)
    """
    if _on_dask(x):
        return _dask("ptp", x, kwargs, axis=axis, out=out, keepdims=keepdims,
                     device_result=device_result)
    return _structured("ptp", x, structured.ptp_monoid, axis, keepdims, out, None,
                       device_result, kwargs)


def count_nonzero(x, axis=None, *, keepdims=False, device_result=None, **kwargs):
    """The number of elements unequal to zero, like ``np.count_nonzero``: NaN
    counts, a complex value is zero only when both parts are, and every dtype
    (bool, float16, bfloat16, complex) is counted in one pass as it is loaded.
    Without ``axis``, or with one covering every axis, the result is one int64
    value (see ``reduce``'s ``device_result``). With ``axis`` (an int or a
    tuple) short of every axis it is ``sum(x != 0, axis, dtype=intp)``, an
    array of NumPy's ``intp``, computed by the input's own
    library first (NumPy, CuPy, PyTorch, Dask: the comparison stays on the
    device); a Numba device array has no ``!=`` and takes only an ``axis``
    covering every axis.
    ``keepdims=True`` is computed the same way, with or without ``axis``
    (NumPy's ``[[n]]`` for every axis of a 2-D input). A masked array's masked elements are not
    counted (NumPy's ``count_nonzero`` counts them). Keywords: ``device_result``,
    ``backend``, ``stream``, ``variant`` and ``tuning``, as for ``reduce`` (a
    CuPy or PyTorch input's count is a 0-d array of its library).

    >>> import numpy as np, pyreduce
    >>> int(pyreduce.count_nonzero(np.array([0.0, -0.0, np.nan, 2.0, 0.0]), backend="cpu"))
    2
    >>> pyreduce.count_nonzero(np.array([[0, 1, 2], [3, 0, 0]]), axis=1, backend="cpu")
    array([2, 1])
    """
    if axis is not None and not keepdims and not _on_dask(x):
        info = inspect(x, masked=True)
        if len(normalize_axes(axis, len(info.shape))) == len(info.shape):
            axis = None  # every axis: the one value, as axis=None gives it
    if axis is not None or keepdims:
        return _counted_along(x, axis, keepdims, dict(kwargs, device_result=device_result))
    if _on_dask(x):
        return _dask("count_nonzero", x, kwargs, device_result=device_result)
    return _whole("count_nonzero", x, structured.count_nonzero_monoid,
                  dict(kwargs, device_result=device_result))


def _counted_along(x, axis, keepdims: bool, kwargs: dict):
    """``count_nonzero`` with ``axis`` or ``keepdims``: a sum of ``x != 0``,
    compared by the input's library."""
    if not isinstance(x, np.ndarray) and not _on_dask(x):
        info = inspect(x)
        if info.on_device and info.kind not in ("cupy", "torch"):
            raise TypeError(f"count_nonzero(axis=...) compares x with 0 first, which a "
                            f"{type(x).__module__}.{type(x).__name__} cannot do; pass a "
                            "CuPy or PyTorch array, or no axis")
        if info.host is not None:  # a list, a buffer, a number: as NumPy takes it
            x = info.host
    return _sum(x != 0, axis=axis, dtype=np.intp, keepdims=keepdims,
                **_tuned(kwargs, "count_nonzero", _TUNED | {"device_result"}))
