"""A plain repeat's call shape from its array alone.

A named reduction called with nothing but its array and ``device_result``
(``pyreduce.sum(x)``, ``pyreduce.mean(x, device_result=False)``, ``pyreduce.var(x)``)
has a call shape (:mod:`pyreduce.callmemo`) that its name and the array's own
attributes decide: the accumulator, the operator, the result's placement and
the kernel's call shape all follow from the dtype, shape, strides, stream, GPU and
kind of array that the array's reader (:func:`pyreduce.interop.inspect`) gives.
So the call shape those attributes were seen with is remembered by them
(:func:`learn`, called by the full path of such a call), and a repeat on a
device array of a type read before (:func:`run`) reads them, finds the call
shape and runs its remembered decisions, without working the call shape out
again (``bench/bare_calls.py`` times a repeat with and without it). A NumPy
array (of type ``np.ndarray`` itself, read as itself: not one of another byte
order or of bfloat16, which are read as a copy or as bits) is looked up by its
dtype, shape and strides alike; its remembered decisions are the cpu
backend's one NumPy call where the cost model chose that backend
(:meth:`pyreduce.backends.cpu.CpuBackend.plain_fold`). A call
shape found here that the repeat memo no longer holds (dropped, or
:func:`pyreduce.cache_clear`) is a miss, and the call takes its full path.
"""

from __future__ import annotations

import numpy as np

from .cache import Memo
from .callmemo import MISS
from .callmemo import run as run_call_shape
from .interop import Input, reader_of

__all__ = ["plain", "run", "learn", "LIMIT", "KINDS"]

#: The call shapes remembered at most, the oldest dropped first (a hit does not
#: refresh one: a dropped one is learnt again by its next call's full path).
LIMIT = 1024

#: The kinds of array whose attributes are looked up: the libraries' own
#: arrays, read by their cheapest accessors. Other producers (the CUDA Array
#: Interface's, DLPack's) are read once a call, by the full path.
KINDS = frozenset({"cupy", "torch", "numba"})

#: :func:`_key` -> ``(call shape, operator, dtype, device_result)`` of
#: :func:`pyreduce.callmemo.run`
_SHAPES = Memo("plain call shapes", LIMIT)


def plain(device_result) -> bool:
    """Whether ``device_result=`` is one a plain call's key may hold as given:
    None, True or False (a NumPy bool is checked on the full path)."""
    return device_result is None or device_result is True or device_result is False


def run(name, x, device_result):
    """The result of the plain call ``name`` (a hashable name of the reduction
    and whatever else fixes its operator) of ``x`` with ``device_result`` (see
    :func:`plain`) by the call shape :func:`learn` was told for such an array,
    or :data:`~pyreduce.callmemo.MISS`."""
    if type(x) is np.ndarray:  # a NumPy array: its own attributes
        try:
            hit = _SHAPES.peek((name, device_result, "numpy", x.dtype, x.shape, x.strides))
        except TypeError:  # an unhashable name
            return MISS
        if hit is None:
            return MISS
        k, op, dtype, follows = hit
        return run_call_shape(k, Input(dtype, x.shape, host=x), op, follows)
    found = reader_of(type(x))
    if found is None:  # not a device array of a type read before
        return MISS
    read, kind = found
    if kind not in KINDS:  # read once, by the full path (a DLPack export has a cost)
        return MISS
    fields = read(x)
    if fields is None:  # a host tensor
        return MISS
    try:
        hit = _SHAPES.peek(_key(name, device_result, kind, fields))
    except TypeError:  # an unhashable attribute: never remembered
        return MISS
    if hit is None:
        return MISS
    k, op, dtype, follows = hit
    return run_call_shape(k, Input(dtype, fields.shape, None, x, fields, kind), op, follows)


def learn(name, device_result, info: Input, k, op, follows) -> None:
    """Remember that the plain call ``name`` with ``device_result`` of an array
    read as ``info`` has call shape ``k``, run as
    ``pyreduce.callmemo.run(k, info, op, follows)``. Nothing for an input
    without device fields (a host array, the simulator's) or no call shape."""
    if k is None or info.mask is not None:
        return
    host, fields = info.host, info.fields
    if host is not None:
        # the array the folds read (a native copy of another byte order is keyed as
        # the native arrays that share its call shape); bfloat16's bits are not keyed
        if type(host) is not np.ndarray or host.dtype != info.dtype:
            return
        key = (name, device_result, "numpy", host.dtype, host.shape, host.strides)
    elif fields is None or info.kind not in KINDS:
        return
    else:
        key = _key(name, device_result, info.kind, fields)
    try:
        _SHAPES.put(key, (k, op, info.dtype, follows))
    except TypeError:
        pass


def _key(name, device_result, kind, fields) -> tuple:
    """The key of a plain call ``name`` of an array of ``kind`` read as
    ``fields`` (the reader's dtype, before :func:`pyreduce.interop.inspect`
    names it)."""
    return (name, device_result, kind, fields.dtype, fields.shape, fields.strides,
            fields.stream, fields.device)
