"""The structured reductions (``argmax``, ``mean``, ``var``, ``minmax``, the NaN
statistics, ``ptp``) along axes, and with ``keepdims=``, ``out=`` and ``dtype=``.

Along axes that leave some out, every lane's accumulator comes from the batched
kernels, the element map's index counting within the lane, so an argmax's
index is NumPy's index along the axis. The accumulators are finished all at
once by the monoid's finisher (:mod:`pyreduce.finishers`), cast to ``dtype=``
where given, and placed where every ``axis=`` result goes
(:class:`pyreduce.manyvalues.Result`): ``out=``, else a device array of the
input's library for a device input (or ``device_result=True``), else a NumPy
array. Where that is a device array and a GPU backend reduces, they are
finished on the device, into it (:func:`pyreduce.manyvalues.reduce_axes_finished`):
the accumulators never come to the host. Otherwise, and for masked arrays and
``where=`` (gathered on the host through :mod:`pyreduce.masked` and
:mod:`pyreduce.selection`), they are finished on the host. A reduction to one
value whose result goes to a device array (:func:`one_value`) is finished on
the device the same way, after the whole input's 1-D plan, and so is one of a
device input whose value goes to the host where the plan's last launch
finishes it (its value is then read back, as a plain reduction's is); one
with ``out=`` or another host result is the one value finished on the host,
shaped and placed as above.

A masked array: mean, var and the other statistics of the unmasked elements of
each lane, masked where a lane has none (as ``np.ma.mean(x, axis)``); the
argmax family reads masked elements as NumPy's masked argmax does, as the
lowest (for argmin: the highest) value, so an index is one along the axis of
the whole array.
"""

from __future__ import annotations

import numpy as np

from . import backends, callmemo, manyvalues, masked, selection
from .axes import result_shape
from .interop import Input
from .ops import Monoid
from .planner import DEFAULT_TUNING as _DEFAULT  # the tuning of a call that names none
from .prepared import prepare

__all__ = ["reduce", "one_value", "repeat_shape", "place", "fill_masked"]


def _results(finished) -> tuple:
    return finished if isinstance(finished, tuple) else (finished,)


def place(values, info: Input, keepdims_shape: tuple, dtype, out, device_result: bool,
          backend: str, stream):
    """Finished ``values`` (an array, or a tuple of them: minmax) cast to
    ``dtype`` (None: as they are), shaped ``keepdims_shape`` and placed (see
    the module docstring); ``out`` a tuple of arrays where the values are."""
    parts = _results(values)
    outs = manyvalues.result_outputs(out, len(parts))
    be = backends.get(backend, on_device=info.on_device)
    placed = []
    for part, o in zip(parts, outs):
        if isinstance(part, np.ma.MaskedArray):
            if o is not None or device_result:
                raise ValueError("a masked array's result is a masked array on the host: "
                                 "out= and device_result=True do not apply")
            placed.append(part.reshape(keepdims_shape).astype(dtype or part.dtype))
            continue
        part = np.asarray(part, dtype=dtype or np.asarray(part).dtype).reshape(keepdims_shape)
        result = manyvalues.Result(be, part.dtype, keepdims_shape, info, o, device_result,
                                   be.launch_stream(stream, info) if be.name != "cpu" else stream)
        placed.append(result.host(part))
    return tuple(placed) if isinstance(values, tuple) else placed[0]


def one_value(info: Input, monoid: Monoid, keepdims_shape: tuple, dtype, backend: str,
              tuning, stream, device_result: bool = True):
    """The one value of a structured reduction of an unmasked, non-empty input, as
    a device array of ``keepdims_shape`` (a pair of them: minmax) finished on the
    device where a GPU backend reduces it
    (:func:`pyreduce.manyvalues.one_finished`): no accumulator comes
    back, and the call does not wait for the GPU. None where the value is
    finished on the host instead (the cpu backend, or a ``dtype=`` the
    finishing kernel does not store as NumPy casts). ``device_result=False``
    (a device input's): the one value read back as a NumPy scalar, for a
    single result whose flag does not come back (not minmax's pair, not the
    NaN statistics); else None."""
    fin = monoid.finisher
    if not fin.stores(fin.dtype if dtype is None else np.dtype(dtype)):
        return None
    if not device_result and not fin.read_alone:  # finished on the host
        return None
    k = _call_shape(info, monoid, keepdims_shape, dtype, backend, tuning, stream)
    if k is not None:  # a repeat: its decisions remembered (pyreduce.callmemo)
        found = callmemo.run(k, info, monoid, device_result)
        if found is not callmemo.MISS:
            return found
    if not device_result and k is None:  # read back by a remembered runner only
        return None
    call = prepare(info, monoid, None, backend, tuning, stream, host_result=False)
    if call.backend.name == "cpu":
        return None
    launch = manyvalues.one_finished(call, keepdims_shape, dtype)
    if k is not None:  # a device input: its repeats check the device and alignment first
        callmemo.remember_runner(
            k, manyvalues.one_finished_runner(call, keepdims_shape, dtype, launch), monoid)
    if not device_result:
        found = callmemo.run(k, info, monoid, False)
        return None if found is callmemo.MISS else found
    return launch(info, call.flat, True)  # the input prepare placed (a host one uploaded once)


def _call_shape(info: Input, monoid: Monoid, keepdims_shape: tuple, dtype, backend: str,
                tuning, stream):
    """:func:`one_value`'s call shape: callmemo's, with what this call adds to it
    (its tuning too); None for a host input."""
    shape = ("finished", keepdims_shape, None if dtype is None else np.dtype(dtype),
             _tuning_key(tuning))
    return callmemo.key(info, monoid, None, None, shape, backend, stream)


def _tuning_key(tuning):
    """The tuning in a call shape: None for the default object (a repeat hashes
    its key twice, and a Tuning hashes every field), else the tuning."""
    return None if tuning is _DEFAULT else tuning


def axes_call_shape(info: Input, monoid: Monoid, axes: tuple, keepdims: bool, dtype,
                    backend: str, tuning, stream):
    """The call shape of a structured reduction along ``axes`` (normalised) of a
    device input, whose results are made by the call (no ``out=``): callmemo's,
    with the axes, ``keepdims``, ``dtype=`` and the tuning; None for a host input."""
    shape = ("finished axes", axes, keepdims, None if dtype is None else np.dtype(dtype),
             _tuning_key(tuning))
    return callmemo.key(info, monoid, None, None, shape, backend, stream)


def repeat_axes(info: Input, monoid: Monoid, axes: tuple, keepdims: bool, dtype,
                device_result, tuning):
    """The result of a plain call along ``axes`` (no keyword but
    ``device_result``, no ``out=``) made by its remembered decisions, or
    :data:`~pyreduce.callmemo.MISS`."""
    k = axes_call_shape(info, monoid, axes, keepdims, dtype, "auto", tuning, None)
    return callmemo.MISS if k is None else callmemo.run(k, info, monoid, device_result)


def repeat_shape(info: Input, monoid: Monoid, tuning):
    """The call shape of a plain call of a structured reduction (no keyword but
    ``device_result``) of a device input, under which :func:`one_value`
    remembered its decisions: ``pyreduce.callmemo.run(k, info, monoid,
    device_result)`` makes its one value (``device_result``: a device array,
    else a NumPy scalar) without the checks of a call that may be new. None for
    a host input."""
    return _call_shape(info, monoid, (), None, "auto", tuning, None)


def fill_masked(info: Input, fill) -> Input:
    """A masked input with its masked elements replaced by ``fill`` and no mask
    (the argmax family's reading of a masked array, NumPy's)."""
    host = np.where(info.mask, np.asarray(fill, dtype=info.host.dtype), info.host)
    return Input(info.dtype, info.shape, host=host)


def reduce(info: Input, monoid: Monoid, axes: tuple, keepdims: bool, dtype, out,
           device_result: bool, backend: str, tuning, stream, left_out=None):
    """The reduction of ``axes`` (normalised, not all of them) finished, cast to
    ``dtype`` and placed (see the module docstring): an array of the result's
    shape (with ``keepdims``), or a tuple of them, masked arrays for a masked
    input. ``left_out``: the elements ``where=`` leaves out
    (:func:`pyreduce.selection.left_out`)."""
    if left_out is None and info.mask is None:
        plain = out is None and backend == "auto" and stream is None and tuning == _DEFAULT
        k = axes_call_shape(info, monoid, axes, keepdims, dtype, backend, tuning,
                            stream) if plain else None  # what repeat_axes can find
        return manyvalues.reduce_axes_finished(info, monoid, axes, keepdims, dtype, out,
                                               device_result, backend, tuning, stream, k)
    if left_out is not None:
        raw = selection.reduce(info, monoid, left_out, axes, keepdims, None, backend, tuning,
                               stream, False, None, raw=True)
    else:
        raw = masked.reduce(info, monoid, masked.NAMED, axes, keepdims, None, backend, tuning,
                            stream, False, None, raw=True)
    shape = keepdims_shape(info.shape, axes, keepdims)
    return place(_on_host(monoid, raw), info, shape, dtype, out, device_result, backend, stream)


def _on_host(monoid: Monoid, raw):
    """The accumulators ``raw`` (a record array, or a masked one) finished on the host."""
    if not isinstance(raw, np.ma.MaskedArray):
        return _finish(monoid, raw)
    lanes = np.ma.getmaskarray(raw)
    lanes = lanes[lanes.dtype.names[0]] if lanes.dtype.names else lanes
    data = np.ascontiguousarray(raw.data)
    if lanes.all():  # nothing unmasked anywhere: every result masked
        template = _finish(monoid, data.reshape(-1)[:0])
        return _masked_like(template, lambda part: np.ma.masked_all(lanes.shape, part.dtype))
    data[lanes] = data[~lanes].reshape(-1)[0]  # a lane's stand-in: finished, then masked
    return _masked_like(_finish(monoid, data), lambda part: np.ma.MaskedArray(part, mask=lanes))


def _finish(monoid: Monoid, raw: np.ndarray):
    return raw if monoid.finisher is None else monoid.finisher.array(raw)


def _masked_like(finished, make):
    parts = tuple(make(p) for p in _results(finished))
    return parts if isinstance(finished, tuple) else parts[0]


def keepdims_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    """The result's shape (NumPy's)."""
    return result_shape(shape, axes, keepdims)
