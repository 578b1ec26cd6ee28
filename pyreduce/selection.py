"""``where=``: reductions of the elements a boolean mask selects, as NumPy's.

``pyreduce.sum(x, where=m)`` is ``np.sum(x, where=m)``: ``m`` is broadcast
against ``x`` and the elements where it is False are left out. What is reduced
is the selected elements in C order, whole or per lane of an ``axis=``
reduction, by the machinery of masked arrays (:mod:`pyreduce.masked`, rule
``WHERE``): so a user operator, commutative or not, folds exactly the selected
elements in order. A lane (or a whole reduction) with nothing selected gets
``initial`` if given, else the operator's identity; an operator without one
(``max``, ``min``, a user operator without ``identity=``) needs ``initial`` as
soon as a mask is given, as in NumPy. The result is a plain array or scalar.

``where=True`` (a Python bool, a NumPy bool or a 0-d array of True) selects
every element and changes nothing: the call is the call without ``where=``.

Where the work happens: the mask may be a host array or a device array; a
device mask is copied to the host. The selected elements are gathered on the
host (a device input is copied there first) and reduced by the backend asked
for; a device input's ``axis=`` result is returned, as without ``where=``, as an
array of its own library on the device (a tuple accumulator's, as without
``where=``, as a tuple of NumPy arrays). An element map's index counts the
selected elements: of the whole input, or of the lane with ``axis=``.
"""

from __future__ import annotations

import numpy as np

from . import backends, masked
from .axes import result_shape
from .backends.base import to_host
from .interop import Input, inspect, one_value_follows
from .ops import cast_value
from .manyvalues import Result, check_no_finish, filled
from .prepared import prepare

__all__ = ["left_out", "reduce"]


def left_out(where, shape: tuple) -> np.ndarray | None:
    """The elements of an input of ``shape`` that ``where=`` leaves out (True:
    left out), of ``shape`` (possibly a broadcast view); None where it selects
    every element. TypeError for a mask that is not boolean, ValueError for one
    that does not broadcast to ``shape``."""
    if type(where) is int and where in (0, 1):  # NumPy takes these Python ints
        where = bool(where)
    if isinstance(where, (bool, np.bool_)):
        return None if where else np.broadcast_to(np.True_, shape)
    try:
        info = inspect(where)
    except TypeError:
        raise TypeError(f"where= must be a boolean array or a bool, got "
                        f"{type(where).__name__}") from None
    mask = to_host(info) if info.on_device else info.host
    if mask.dtype != np.bool_:
        raise TypeError(f"where= must be a boolean mask, got dtype {mask.dtype}: it is not "
                        f"cast (NumPy 2 refuses it too); pass e.g. where=(m != 0)")
    if mask.ndim == 0:
        return None if mask else np.broadcast_to(np.True_, shape)
    try:
        mask = np.broadcast_to(mask, shape)
    except ValueError:
        raise ValueError(f"where= of shape {mask.shape} does not broadcast to the input's "
                         f"shape {tuple(shape)}") from None
    return ~mask


def reduce(info: Input, monoid, out_mask: np.ndarray, axes: tuple, keepdims: bool, initial,
           backend, tuning, stream, device_result, out, deterministic=False,
           raw: bool = False):
    """The reduction of ``axes`` (normalised) of the elements of ``info`` that
    ``out_mask`` (from :func:`left_out`) does not leave out. ``raw`` (along
    axes): the accumulators as a host array, as
    :func:`pyreduce.manyvalues.reduce_axes_raw` returns them."""
    empty = _empty_value(monoid, initial)
    host = info.host if info.host is not None else to_host(info)
    selected = Input(info.dtype, info.shape, host=host)
    selected.mask = out_mask
    ndim = len(info.shape)
    host_result = not device_result and (out is None or isinstance(out, np.ndarray))
    if len(axes) == ndim and (not keepdims or ndim == 0):  # one value
        call = prepare(masked.compressed(selected), monoid, initial, backend, tuning, stream,
                       host_result)
        if device_result is None:  # where the same call without where= puts it
            device_result = one_value_follows(None, info, backend, out, monoid, stream)
        if not (device_result and info.on_device):
            return call.run(device_result, out)
        value = call.run()  # then a 0-d array of the input's library, as without where=
        return _placed(np.asarray(value), info, backend, stream, None, True)
    if not raw:
        check_no_finish(monoid)
    shape = result_shape(info.shape, axes, keepdims)
    if info.size == 0:
        values = filled(shape, empty, monoid.dtype)
    else:
        values = masked.reduce(selected, monoid, masked.WHERE, axes, keepdims, initial,
                               backend, tuning, stream, False, None, deterministic, raw=True)
    return values if raw else _placed(values, info, backend, stream, out, device_result)


def _placed(values: np.ndarray, info: Input, backend, stream, out, device_result):
    """``values``, computed on the host, where the same call without ``where=``
    puts its result (:class:`pyreduce.manyvalues.Result`; a tuple accumulator's
    record array as a tuple of arrays, one per field)."""
    be = backends.get(backend, on_device=info.on_device)
    return Result(be, values.dtype, values.shape, info, out, device_result,
                  be.launch_stream(stream, info)).host(values)


def _empty_value(monoid, initial):
    """What a lane with nothing selected gets: ``initial``, else the identity;
    a ValueError for an operator without one."""
    if initial is not None:
        return cast_value(initial, monoid.dtype, "initial")
    if monoid.identity is None or not monoid.empty_ok:
        raise ValueError(f"the operator {monoid.name!r} has no identity, so a reduction "
                         f"with a where= mask needs initial=: the value of a reduction "
                         f"that selects no element")
    return monoid.identity
