"""Masked arrays (``numpy.ma``): reductions of the unmasked elements.

What is reduced is what NumPy's masked reductions reduce: the unmasked elements,
in C order (``x.compressed()``), so ``reduce(x, op)`` is
``functools.reduce(op, x.compressed())`` and ``pyreduce.sum(x)`` is
``np.ma.sum(x)``. Where nothing is left:

* a reduction to one value: the named reductions (``sum``, ``max``, ``mean``,
  ...) return ``np.ma.masked``, as NumPy's do (``minmax`` a pair of them);
  ``reduce`` keeps its rule for an empty input (``initial``, the identity, or a
  ValueError); ``argmax``/``argmin`` raise ValueError (NumPy's 0 would name a
  masked element);
* with ``axis=`` (or ``keepdims=``) the result is a masked array, masked where a
  lane has no unmasked element, whatever the operator; ``segmented_reduce`` the
  same per segment.

The same machinery reduces the elements that ``where=`` selects
(:mod:`pyreduce.selection`): rule :data:`WHERE`, under which an empty lane is
not masked but gets ``initial`` or the identity, in a plain array.

A masked array without elements reduces as the plain empty array does. The
lanes of an ``axis=`` reduction are reduced as the segments of their unmasked
elements, by the segmented kernels, so any operator (commutative or not, with an
identity or not) gets the fold over exactly those elements, in order, and an
element map's index counts the unmasked elements of the lane (segment). A tuple
accumulator's result is a tuple of masked arrays, one per field (a record
array with ``raw=True``).
"""

from __future__ import annotations

import math

import numpy as np

from .axes import result_shape
from .dtypes import fields, is_tuple
from .backends.base import to_host
from .interop import Input, inspect
from . import manyvalues
from .prepared import prepare

__all__ = ["FOLD", "NAMED", "INDEX", "WHERE", "compressed", "reduce", "reduce_segments"]

#: ``reduce``: nothing unmasked is an empty input
FOLD = "fold"
#: the named reductions: nothing unmasked is ``np.ma.masked``
NAMED = "named"
#: ``argmax``/``argmin``: an index into the whole array; nothing unmasked is an error
INDEX = "index"
#: ``where=``: nothing selected is an empty input, and an empty lane of an
#: ``axis=`` reduction gets ``initial`` or the identity (a plain array)
WHERE = "where"


def _refuse_outputs(out, device_result) -> None:
    if out is not None or device_result:
        raise ValueError("a masked array's result is a masked array or np.ma.masked on the "
                         "host, as NumPy's masked reductions return it: out= and "
                         "device_result=True do not apply")


def compressed(info: Input) -> Input:
    """The unmasked elements of a masked input, 1-D in C order."""
    host = info.host[~info.mask]
    return Input(info.dtype, host.shape, host=host)


def reduce(info: Input, monoid, rule: str, axes: tuple, keepdims: bool, initial, backend,
           tuning, stream, device_result, out, deterministic=False, raw: bool = False):
    """The reduction of ``axes`` (normalised) of a masked input (see the module
    docstring); ``rule`` says what a reduction to one value with nothing
    unmasked gives. ``raw`` (along axes): the accumulators as one array of
    ``monoid.dtype``, a record array for a tuple accumulator, unfinished
    (:func:`pyreduce.manyvalues.reduce_axes_raw`)."""
    _refuse_outputs(out, device_result)
    ndim = len(info.shape)
    if len(axes) == ndim and (not keepdims or ndim == 0):
        return _one(info, monoid, rule, initial, backend, tuning, stream)
    manyvalues.axes_take(monoid, deterministic)
    if not raw:
        manyvalues.check_no_finish(monoid)
    kept = tuple(a for a in range(ndim) if a not in axes)
    lanes = math.prod(info.shape[a] for a in kept)
    keep = ~info.mask.transpose(kept + axes).reshape(lanes, -1)
    host = info.host.transpose(kept + axes).reshape(lanes, -1)[keep]
    offsets = np.concatenate(([0], np.cumsum(keep.sum(axis=1))))
    values = _segments(Input(info.dtype, host.shape, host=host), offsets, monoid, initial,
                       backend, tuning, stream, empty_masked=rule != WHERE)
    values = values.reshape(result_shape(info.shape, axes, keepdims))
    return values if raw else manyvalues.as_fields(values)


def _one(info: Input, monoid, rule: str, initial, backend, tuning, stream):
    sub = compressed(info)
    if sub.size == 0 and info.size > 0:
        if rule == NAMED:
            return _nothing(monoid)
        if rule == INDEX:
            raise ValueError(f"{monoid.name} of a masked array whose every element is "
                             "masked: there is no index to return")
    value = prepare(sub, monoid, initial, backend, tuning, stream).run()
    if rule == INDEX:
        return np.int64(np.flatnonzero(~info.mask)[value])
    return value


def _nothing(monoid):
    """``np.ma.masked`` in the form of the result: one per field of a tuple
    returned as it is (``minmax``)."""
    if is_tuple(monoid.dtype) and monoid.finalize is None:
        return tuple(np.ma.masked for _ in fields(monoid.dtype))
    return np.ma.masked


def reduce_segments(info: Input, offsets, monoid, initial, backend, tuning, stream,
                    device_result, out):
    """``segmented_reduce`` of a masked 1-D input: each segment's unmasked
    elements, masked where there are none."""
    _refuse_outputs(out, device_result)
    if len(info.shape) != 1:
        raise ValueError(f"segmented_reduce needs a 1-D x, got shape {tuple(info.shape)}")
    off = inspect(offsets)
    host = off.host if off.host is not None else to_host(off)
    bounds = manyvalues.validate_offsets(host, info.size)
    # where each boundary falls among the unmasked elements
    before = np.concatenate(([0], np.cumsum(~info.mask)))
    return manyvalues.as_fields(_segments(compressed(info), before[bounds], monoid, initial,
                                          backend, tuning, stream))


def _segments(values: Input, offsets: np.ndarray, monoid, initial, backend, tuning,
              stream, empty_masked: bool = True):
    """The segments ``offsets`` of the unmasked ``values`` reduced, as a masked
    array masked where a segment is empty. Only the non-empty ones are reduced:
    an empty one has no value, whether the op has an identity or not. Unless
    ``empty_masked`` is False: then a plain array, an empty segment's value
    ``initial`` or the identity (the caller makes sure one of them exists).
    The accumulators: a record array for a tuple accumulator, unfinished."""
    if not empty_masked:
        return manyvalues.reduce_segments(values, offsets, monoid, initial, backend, tuning,
                                          stream, False, None, raw=True)
    lengths = np.diff(offsets)
    full = lengths > 0
    bounds = offsets[np.concatenate(([True], full))]  # consecutive: the empty ones drop out
    data = np.zeros(lengths.size, dtype=monoid.dtype)
    data[full] = manyvalues.reduce_segments(values, bounds, monoid, initial, backend, tuning,
                                            stream, False, None, raw=True)
    return np.ma.MaskedArray(data, mask=~full)
