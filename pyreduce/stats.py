"""The structured reductions, on tuple accumulators (:mod:`pyreduce.structured`)
and with NumPy's keywords: ``argmax``, ``argmin``, ``minmax``, ``mean``,
``var`` and ``std``; along axes finished where the results go (:mod:`pyreduce.along`).
Their NaN-ignoring counterparts build on them (:mod:`pyreduce.nanstats`)."""

from __future__ import annotations

import numpy as np

from . import along, callmemo, masked, plaincalls, selection, structured
from .axes import normalize_axes
from .general import _on_dask, _reduce, _scale_out, check_keywords, plain_repeat
from .callmemo import MISS
from .interop import checked_device_result, inspect, one_value_follows
from .tuning_keywords import DEFAULT as _DEFAULT_TUNING
from .tuning_keywords import settle

__all__ = ["argmax", "argmin", "minmax", "mean", "var", "std"]


#: what the structured reductions pass on: backend, stream and the tuning
#: (``variant=`` and the deprecated tuning keywords settled into it first)
_TUNED = frozenset({"backend", "stream", "tuning"})
#: what mean, var and std pass on
_MOMENTS = _TUNED | {"where"}


def _tuned(kwargs: dict, name: str, allowed=_TUNED) -> dict:
    """The keywords a structured reduction passes on: backend, stream and tuning
    (and those of ``allowed``), the tuning settled into one ``tuning``."""
    kwargs = settle(name, kwargs)
    check_keywords(name, kwargs, allowed)
    return kwargs


def _structured(name: str, x, monoid, axis, keepdims, out, dtype, device_result, kwargs,
                allowed=_TUNED, rule=masked.NAMED, one_axis=False, fill=None, bare_name=None):
    """A structured reduction with NumPy's keywords (:mod:`pyreduce.along`):
    ``monoid(dtype)`` its accumulator; ``one_axis``: ``axis`` is an int or None,
    as for NumPy's argmax; ``fill``: what a masked element reads as along axes
    (the argmax family); ``bare_name``: what, with the array's attributes, fixes
    the call shape of a call with no other argument than ``device_result``
    (:mod:`pyreduce.plaincalls`; default ``name``: var's and std's add ddof;
    False: none, the full path)."""
    bare = (bare_name is not False and axis is None and out is None and keepdims is False
            and dtype is None and not kwargs and plaincalls.plain(device_result))
    if bare:  # a repeat by the array's attributes
        found = plaincalls.run(bare_name or name, x, device_result)
        if found is not MISS:
            return found
    device_result = checked_device_result(device_result)
    info = inspect(x, masked=True)
    if bare and not device_result and info.host is not None and info.mask is None:
        # a NumPy array's plain call: straight to its repeat, its value on the host
        m = monoid(info.dtype)
        k, found = plain_repeat(info, m)
        plaincalls.learn(bare_name or name, device_result, info, k, m, False)
        if found is not MISS:
            return found
    if (not kwargs and axis is None and out is None and not keepdims and dtype is None
            and info.device is not None):
        # the commonest call of a device array: straight to its repeat (a device
        # result, or the finished value read back)
        m = monoid(info.dtype)
        to_device = one_value_follows(device_result, info, "auto")
        if to_device or m.finisher.read_alone:  # else finished on the host
            k = along.repeat_shape(info, m, _DEFAULT_TUNING)
            if bare:
                plaincalls.learn(bare_name or name, device_result, info, k, m, to_device)
            found = MISS if k is None else callmemo.run(k, info, m, to_device)
            if found is not MISS:
                return found
    if (not kwargs and axis is not None and out is None and info.device is not None
            and (not one_axis or isinstance(axis, (int, np.integer)))):
        # a plain call along axes of a device array: straight to its repeat (a bad
        # axis takes the full path, which names what is wrong with it)
        try:
            axes = normalize_axes(axis, len(info.shape))
        except (TypeError, ValueError, IndexError):
            axes = None
        if axes is not None and len(axes) < len(info.shape):
            found = along.repeat_axes(info, monoid(info.dtype), axes, keepdims, dtype,
                                      device_result, _DEFAULT_TUNING)
            if found is not MISS:
                return found
    kwargs = _tuned(kwargs, name, allowed)
    if one_axis and axis is not None and not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{name}() takes an int axis or None, as NumPy's does; "
                        f"got axis={axis!r}")
    m = monoid(info.dtype)
    ndim = len(info.shape)
    axes = normalize_axes(axis, ndim)
    backend, stream = kwargs.get("backend", "auto"), kwargs.get("stream")
    where = kwargs.pop("where", True)
    if len(axes) == ndim:  # one value
        # device_result=None: a CuPy or PyTorch input's is a 0-d array of its
        # library. Where it goes to the device it is finished there, after the
        # whole input's 1-D plan (the batched kernels of one lane were slower:
        # argmin of 2**24 float32 on an H100, 283 us against 114 us); else on the host
        on_device = one_value_follows(device_result, info, backend, out, stream=stream)
        shape = (1,) * ndim if keepdims else ()
        to_device = on_device or (keepdims and info.on_device)  # keepdims: an array
        if (to_device or (info.device is not None and backend != "cpu")) and out is None \
                and where is True and info.mask is None and info.size:
            # a device input's host value too: finished on the device, read back
            found = along.one_value(info, m, shape, dtype, backend, kwargs.get("tuning",
                                    _DEFAULT_TUNING), stream, to_device)
            if found is not None:
                return found
        value = _reduce(info, m, None, masked_rule=rule, where=where, device_result=False,
                        **kwargs)
        if keepdims and info.mask is not None and fill is None and out is None \
                and not on_device:  # np.ma's: a masked array of the result's dtype
            return _masked_array(value, m, shape, dtype)
        if value is np.ma.masked:
            return value if not keepdims else _masked_array(value, m, shape, dtype)
        if out is None and not keepdims and not on_device:
            return value if dtype is None else _cast(value, dtype)
        # the host value placed: in out=, or copied to the device (it waited for the GPU)
        return along.place(value, info, shape, dtype, out, on_device, backend, stream)
    if info.mask is not None and fill is not None:
        info = along.fill_masked(info, fill(info.dtype))
    left_out = selection.left_out(where, info.shape) if where is not True else None
    tuning = kwargs.get("tuning", _DEFAULT_TUNING)
    return along.reduce(info, m, axes, keepdims, dtype, out, device_result, backend, tuning,
                        stream, left_out)


def _masked_array(value, monoid, shape: tuple, dtype):
    """A masked input's one value (``np.ma.masked`` where nothing was unmasked;
    a pair of them for minmax) as NumPy's masked reductions give it with
    ``keepdims=True``: a masked array of ``shape``, of ``dtype`` or the
    finished result's."""
    fin = monoid.finisher
    dt = np.dtype(dtype) if dtype is not None else fin.dtype if fin is not None \
        else monoid.dtype
    parts = tuple(np.ma.masked_all(shape, dt) if v is np.ma.masked
                  else np.ma.MaskedArray(np.full(shape, v, dtype=dt), mask=False)
                  for v in (value if isinstance(value, tuple) else (value,)))
    return parts if isinstance(value, tuple) else parts[0]


def _cast(value, dtype):
    """A host result (a scalar, or a tuple of them) as a NumPy scalar of ``dtype``."""
    if isinstance(value, tuple):
        return tuple(_cast(v, dtype) for v in value)
    return np.asarray(value, dtype=dtype)[()]


def _lowest(dt: np.dtype):
    """What a masked element reads as for argmax (NumPy's ``maximum_fill_value``)."""
    return np.ma.maximum_fill_value(np.empty(0, dt))


def _highest(dt: np.dtype):
    return np.ma.minimum_fill_value(np.empty(0, dt))


def _dask(name: str, x, kwargs: dict, **numpy_keywords):
    """A structured reduction of a Dask array: of every element, with the call's
    backend and tuning keywords (NumPy's keywords are not taken there yet)."""
    given = [k for k, v in numpy_keywords.items() if v is not None and v is not False]
    if given:
        raise TypeError(f"{name}() of a Dask array reduces every element: "
                        f"{', '.join(f'{k}=' for k in given)} not taken for Dask arrays")
    return _scale_out(name, {"x": x, "kwargs": kwargs})


def argmax(x, axis=None, out=None, *, keepdims=False, device_result=None, **kwargs):
    """The index of the largest element, the first one if there are ties, like
    ``np.argmax``: the flat (C-order) index, or with ``axis`` (an int) the index
    along that axis for every other position. NaN counts as the largest, so the
    first NaN's index if there is one (for complex input, NaN in either part;
    complex values are ordered by the real part, then the imaginary one, as in
    NumPy). An empty input (lane) raises ValueError. ``out``, ``keepdims`` and
    ``device_result`` as for ``reduce``; a masked element reads as the lowest
    value along an axis (NumPy's masked argmax). Keywords: ``backend``,
    ``stream``, ``variant`` and ``tuning``, as for ``reduce``.

    >>> import numpy as np, pyreduce
    >>> int(pyreduce.argmax(np.array([3, 9, 1, 9]), backend="cpu"))
    1
    >>> pyreduce.argmax(np.array([[3, 9, 1], [7, 2, 7]]), axis=1, backend="cpu")
    array([1, 0])
    """
    return index_reduction("argmax", x, structured.argmax_monoid, _lowest, axis, out, keepdims,
                           device_result, kwargs)


def argmin(x, axis=None, out=None, *, keepdims=False, device_result=None, **kwargs):
    """The index of the smallest element (the first; the first NaN's if any),
    like ``np.argmin``. Keywords as for ``argmax`` (a masked element reads as
    the highest value along an axis)."""
    return index_reduction("argmin", x, structured.argmin_monoid, _highest, axis, out,
                           keepdims, device_result, kwargs)


def index_reduction(name, x, monoid, fill, axis, out, keepdims, device_result, kwargs):
    """``name`` (the argmax family) of ``x`` with ``monoid(dtype)``: NumPy's int
    axis, a masked element read as ``fill(dtype)`` along an axis (NumPy's masked
    argmax), Dask collections chunk by chunk."""
    if _on_dask(x):
        return _dask(name, x, kwargs, axis=axis, out=out, keepdims=keepdims,
                     device_result=device_result)
    return _structured(name, x, monoid, axis, keepdims, out, None, device_result, kwargs,
                       rule=masked.INDEX, one_axis=True, fill=fill)


def minmax(x, axis=None, out=None, *, keepdims=False, device_result=None, **kwargs):
    """``(min, max)`` in one pass over the input (with ``axis``, a pair of
    arrays); NaN propagates into both, as with ``np.min`` and ``np.max`` (for
    complex input, the first NaN in C order). ``out``: a pair of arrays.
    Other keywords as for ``argmax``.

    >>> import numpy as np, pyreduce
    >>> tuple(float(v) for v in pyreduce.minmax(np.array([2.0, -1.0, 5.0]), backend="cpu"))
    (-1.0, 5.0)
    """
    if _on_dask(x):
        return _dask("minmax", x, kwargs, axis=axis, out=out, keepdims=keepdims,
                     device_result=device_result)
    return _structured("minmax", x, structured.minmax_monoid, axis, keepdims, out, None,
                       device_result, kwargs)


def mean(x, axis=None, dtype=None, out=None, keepdims=False, *, device_result=None,
         **kwargs):
    """The mean, in one pass: a float64 sum and a count, divided once,
    of NumPy's dtype: complex input keeps its dtype, float32 gives float32, other
    real input float64, except that float16 and bfloat16 give float32
    (``docs/semantics.md``); ``dtype=``: the result's dtype (the accumulation
    stays float64). An empty input (lane) gives NaN, with NumPy's
    RuntimeWarning. ``axis``, ``out``, ``keepdims`` and ``device_result`` as for
    ``reduce``; ``where=``: the mean of the selected elements (none selected:
    NaN with the warning). Other keywords as for ``argmax``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.mean(np.array([1, 2, 3, 4]), backend="cpu"))
    2.5
    >>> pyreduce.mean(np.array([[1, 2], [3, 5]]), axis=0, backend="cpu")
    array([2. , 3.5])
    """
    if _on_dask(x):
        return _dask("mean", x, kwargs, axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                     device_result=device_result)
    return _structured("mean", x, lambda dt: structured.moments_monoid(dt, "mean", result=dtype),
                       axis, keepdims, out, dtype, device_result, kwargs, _MOMENTS)


def _moments(name, x, axis, dtype, out, ddof, keepdims, correction, device_result, kwargs):
    if _on_dask(x):
        kwargs = dict(kwargs, ddof=ddof, correction=correction)
        return _dask(name, x, kwargs, axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                     device_result=device_result)
    ddof = structured.degrees_of_freedom(ddof, correction)
    return _structured(name, x,
                       lambda dt: structured.moments_monoid(dt, name, ddof, result=dtype),
                       axis, keepdims, out, dtype, device_result, kwargs, _MOMENTS,
                       # a NaN ddof equals no other: a key never found again
                       bare_name=(name, type(ddof), ddof) if ddof == ddof else False)


def var(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None,
        device_result=None, **kwargs):
    """The variance (``ddof``: delta degrees of freedom, as in ``np.var``, or
    ``correction``, the array API's name for it; giving both is a ValueError, as
    in NumPy), in one pass: the mean of ``|x - mean|**2``, real for complex
    input (float32 for complex64, float32 and half precision, float64
    otherwise). Where ``ddof >= n`` it divides by 0, as NumPy does (inf, or NaN
    where every element is the mean), with NumPy's RuntimeWarning. The keywords
    in NumPy's order; ``axis``, ``dtype``, ``out``, ``keepdims``, ``where`` and
    the others as for ``mean``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.var(np.array([1.0, 2.0, 3.0, 4.0]), ddof=1, backend="cpu"))
    1.6666666666666667
    """
    return _moments("var", x, axis, dtype, out, ddof, keepdims, correction, device_result,
                    kwargs)


def std(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None,
        device_result=None, **kwargs):
    """The standard deviation, ``sqrt(var(x, ddof))`` (``correction``: as for
    ``var``). Keywords as for ``var``."""
    return _moments("std", x, axis, dtype, out, ddof, keepdims, correction, device_result,
                    kwargs)
