"""The named reductions, each ``reduce`` with one built-in operator and NumPy's
keywords: ``sum``, ``prod``, ``max``, ``min``, ``nanmax``, ``nanmin``, ``any``,
``all``, and ``nansum`` and ``nanprod`` (NaN taken as the identity). A plain
call goes straight to its remembered decisions (:mod:`pyreduce.callmemo`), the
others through :func:`pyreduce.general.reduce`'s path."""

from __future__ import annotations

from . import plaincalls, structured
from .dtypes import default_accumulator
from .general import (KEYWORDS, _MISS, _on_dask, _reduce, _repeat, _scale_out, check_keywords,
                      plain_repeat, warn_complex_to_real)
from .interop import checked_device_result, inspect
from .ops import sum_dtype
from .tuning_keywords import DEFAULT as _DEFAULT_TUNING
from .tuning_keywords import settle

__all__ = ["sum", "prod", "max", "min", "nanmax", "nanmin", "any", "all", "nansum", "nanprod"]


#: the keywords of a plain call that goes straight to its repeat
_PLAIN = frozenset({"device_result", "deterministic"})


def _named(name, op, dtype_rule, x, axis, dtype, out, keepdims, identity, initial, kwargs,
           allowed=KEYWORDS):
    """The named reduction ``name`` (``sum``, ...) with ``op``; ``kwargs`` are
    the keywords it passes on to ``reduce``, of those ``allowed``."""
    # the array and device_result alone: a repeat by the array's attributes
    bare = (axis is None and dtype is None and out is None and keepdims is False
            and identity is None and initial is None and _bare(kwargs))
    if bare:
        found = plaincalls.run((name, op), x, kwargs.get("device_result"))
        if found is not _MISS:
            return found
    info = inspect(x, masked=True)
    acc = dtype_rule(info.dtype) if dtype is None else dtype
    if out is None and _PLAIN.issuperset(kwargs) and allowed.issuperset(kwargs):
        # the commonest plain calls, straight to their repeat (pyreduce.callmemo);
        # deterministic=True under the call shape the full path remembers it by
        det = kwargs.get("deterministic", False)
        if det is False or det is True:
            device_result = checked_device_result(kwargs.get("device_result"))
            k, result = _repeat(info, op, identity, initial, acc, "auto", None, device_result,
                                axis, keepdims, (_DEFAULT_TUNING, True) if det else None)
            if bare:
                plaincalls.learn((name, op), device_result, info, k, op, device_result)
            if result is not _MISS:
                return result
    kwargs = settle(name, kwargs)
    check_keywords(name, kwargs, allowed)
    return _reduce(info, op, identity, initial, acc, out=out, axis=axis, keepdims=keepdims,
                   **kwargs)


def _bare(kwargs) -> bool:
    """Whether ``kwargs`` hold no keyword but a plain ``device_result``
    (:func:`pyreduce.plaincalls.plain`)."""
    return not kwargs or (len(kwargs) == 1 and plaincalls.plain(kwargs.get("device_result", 0)))


#: what ``any`` and ``all`` pass on: they take no dtype=, initial= or identity=
_LOGICAL_KEYWORDS = KEYWORDS - {"dtype", "initial"}


def _same(dt):
    """The input's own dtype as the accumulator (float16 accumulates in float32)."""
    return default_accumulator(dt)


def sum(x, axis=None, dtype=None, out=None, keepdims=False, *, identity=None, initial=None,
        **kwargs):
    """Sum of the elements, over ``axis`` if given, accumulated like ``np.sum``
    (bool and small ints in 64 bits). The positional order is ``np.sum``'s; other
    keywords as for ``reduce``. ``where=m`` (a boolean mask broadcast against
    ``x``) sums the elements where ``m`` is True, as ``np.sum(x, where=m)``; a
    lane with none is ``initial`` or 0.

    >>> import numpy as np, pyreduce
    >>> int(pyreduce.sum(np.array([200, 100], dtype=np.uint8), backend="cpu"))
    300
    >>> pyreduce.sum(np.arange(6, dtype=np.int8).reshape(2, 3), axis=0, backend="cpu")
    array([3, 5, 7])
    >>> x = np.arange(6).reshape(2, 3)
    >>> pyreduce.sum(x, axis=1, where=np.array([True, False, True]), backend="cpu")
    array([2, 8])
    """
    if _on_dask(x):
        return _scale_out("sum", locals())
    return _named("sum", "add", sum_dtype, x, axis, dtype, out, keepdims, identity, initial,
                  kwargs)


def prod(x, axis=None, dtype=None, out=None, keepdims=False, *, identity=None, initial=None,
         **kwargs):
    """Product of the elements, over ``axis`` if given, accumulated like
    ``np.prod``. The positional order is ``np.prod``'s; other keywords as for
    ``reduce`` (``where=`` as for ``sum``; a lane with none is ``initial`` or 1)."""
    if _on_dask(x):
        return _scale_out("prod", locals())
    return _named("prod", "mul", sum_dtype, x, axis, dtype, out, keepdims, identity, initial,
                  kwargs)


def max(x, axis=None, out=None, keepdims=False, *, identity=None, initial=None, dtype=None,
        **kwargs):
    """Largest element, over ``axis`` if given; NaN propagates and an empty
    reduction raises ValueError (unless ``initial`` or ``identity`` is given), as
    with ``np.max``, whose positional order this follows. Other keywords as for
    ``reduce``; with ``where=`` (as for ``sum``) ``initial`` is required, as in
    NumPy: the value of a lane with no selected element.

    >>> import numpy as np, pyreduce
    >>> pyreduce.max(np.array([[1.0, np.nan], [3.0, 2.0]]), axis=1, backend="cpu")
    array([nan,  3.])
    """
    if _on_dask(x):
        return _scale_out("max", locals())
    return _named("max", "max", _same, x, axis, dtype, out, keepdims, identity, initial,
                  kwargs)


def min(x, axis=None, out=None, keepdims=False, *, identity=None, initial=None, dtype=None,
        **kwargs):
    """Smallest element, over ``axis`` if given; NaN propagates and an empty
    reduction raises ValueError, as with ``np.min``. Keywords as for ``max``."""
    if _on_dask(x):
        return _scale_out("min", locals())
    return _named("min", "min", _same, x, axis, dtype, out, keepdims, identity, initial,
                  kwargs)


def nanmax(x, axis=None, out=None, keepdims=False, *, identity=None, initial=None, dtype=None,
           **kwargs):
    """Largest element ignoring NaN, like ``np.nanmax``: NaN only if every
    element is NaN (without NumPy's RuntimeWarning), and an empty reduction raises
    ValueError. Integers and bools are reduced as by ``max``. The operator is
    ``np.fmax``, also accepted by ``reduce``. Keywords as for ``max``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.nanmax(np.array([np.nan, 2.0, np.nan, -1.0]), backend="cpu"))
    2.0
    >>> float(pyreduce.nanmax(np.array([np.nan, np.nan]), backend="cpu"))
    nan
    """
    if _on_dask(x):
        return _scale_out("nanmax", locals())
    return _named("nanmax", "nanmax", _same, x, axis, dtype, out, keepdims, identity, initial,
                  kwargs)


def nanmin(x, axis=None, out=None, keepdims=False, *, identity=None, initial=None, dtype=None,
           **kwargs):
    """Smallest element ignoring NaN, like ``np.nanmin`` (see ``nanmax``); the
    operator is ``np.fmin``. Keywords as for ``max``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.nanmin(np.array([3.0, np.nan, -1.0]), backend="cpu"))
    -1.0
    """
    if _on_dask(x):
        return _scale_out("nanmin", locals())
    return _named("nanmin", "nanmin", _same, x, axis, dtype, out, keepdims, identity, initial,
                  kwargs)


def any(x, axis=None, out=None, keepdims=False, **kwargs):
    """True where any element is non-zero, like ``np.any`` (False for an empty
    reduction, or one whose ``where=`` selects nothing). Other keywords as for
    ``reduce``.

    >>> import numpy as np, pyreduce
    >>> bool(pyreduce.any(np.array([0, 0, 3]), backend="cpu"))
    True
    """
    if _on_dask(x):
        return _scale_out("any", locals())
    return _named("any", "logical_or", _same, x, axis, None, out, keepdims, None, None, kwargs,
                  _LOGICAL_KEYWORDS)


def all(x, axis=None, out=None, keepdims=False, **kwargs):
    """True where every element is non-zero, like ``np.all`` (True for an empty
    reduction, or one whose ``where=`` selects nothing). Other keywords as for
    ``reduce``."""
    if _on_dask(x):
        return _scale_out("all", locals())
    return _named("all", "logical_and", _same, x, axis, None, out, keepdims, None, None,
                  kwargs, _LOGICAL_KEYWORDS)


for _fn, _op in ((sum, "add"), (prod, "mul"), (max, "max"), (min, "min"), (nanmax, "nanmax"),
                 (nanmin, "nanmin"), (any, "logical_or"), (all, "logical_and")):
    _fn.__pyreduce_op__ = _op  # reduce(x, pyreduce.max) reduces with "max"
del _fn, _op


#: what nansum and nanprod pass on (their map is their own)
_NAN_KEYWORDS = KEYWORDS - {"map"}


def nansum(x, *, dtype=None, **kwargs):
    """The sum with NaN taken as zero, like ``np.nansum`` (accumulated like
    ``np.sum``, or in ``dtype``): a complex value with NaN in either part counts as
    zero. Keywords: ``initial``, ``where`` (as for ``sum``), ``device_result``,
    ``out`` and those of ``argmax``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.nansum(np.array([1.0, np.nan, 2.0]), backend="cpu"))
    3.0
    """
    return _nan_fold("nansum", structured.nansum_monoid, x, dtype, kwargs)


def nanprod(x, *, dtype=None, **kwargs):
    """The product with NaN taken as one, like ``np.nanprod``. Keywords as for
    ``nansum``."""
    return _nan_fold("nanprod", structured.nanprod_monoid, x, dtype, kwargs)


def _nan_fold(name: str, monoid_of, x, dtype, kwargs: dict):
    """``name`` (nansum, nanprod) of ``x`` with ``monoid_of(dtype, dtype=)``: a
    built-in fold whose map takes NaN as its identity."""
    if _on_dask(x):
        return _scale_out(name, {"x": x, "dtype": dtype, "kwargs": kwargs})
    bare = dtype is None and _bare(kwargs)
    if bare:  # a repeat by the array's attributes, as for sum
        found = plaincalls.run((name, None), x, kwargs.get("device_result"))
        if found is not _MISS:
            return found
    info = inspect(x, masked=True)
    kwargs = settle(name, kwargs)
    check_keywords(name, kwargs, _NAN_KEYWORDS)
    monoid = monoid_of(info.dtype, dtype)
    if info.dtype.kind == "c" and monoid.dtype.kind != "c":  # as NumPy's cast warns
        warn_complex_to_real()
    if bare:  # straight to its repeat, the call shape _reduce would find
        device_result = checked_device_result(kwargs.get("device_result"))
        k, result = plain_repeat(info, monoid, device_result)
        plaincalls.learn((name, None), device_result, info, k, monoid, device_result)
        if result is not _MISS:
            return result
    return _reduce(info, monoid, None, **kwargs)
