"""Prefix scans: ``scan`` with any associative operator, and NumPy's and the
array API's cumulative sums and products on it.

``scan(x, op)[i]`` is ``op(...op(op(x[0], x[1]), x[2])..., x[i])``, the operands
in exactly that order, so ``op`` need not be commutative. A GPU backend runs the
three phases of :mod:`pyreduce.prefix`; the cpu backend an ordered ``njit``
loop (:mod:`pyreduce.backends.cpu_scan`).
"""

from __future__ import annotations

import math

import numpy as np

from . import backends, laws
from .axes import normalize_axes
from .backends.base import to_host
from .backends.cpu_scan import scan_rows as cpu_scan_rows
from .dtypes import bfloat16_to_float32, is_bfloat16, is_tuple
from .interop import inspect
from .ops import as_monoid, cast_value, sum_dtype
from .manyvalues import Result
from .planner import Tuning
from .prefix import Scan, scan_rows
from .tuning_keywords import DEFAULT as DEFAULT_TUNING
from .tuning_keywords import tuning_of

__all__ = ["scan", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod"]


def scan(x, op, identity=None, *, axis=None, dtype=None, out=None, inclusive: bool = True,
         initial=None, backend: str = "auto", stream=None, check: bool = False,
         tuning: Tuning | None = None, **kwargs):
    """The prefix scan of ``x`` with the associative operator ``op``.

    Inclusive (the default): ``out[i] = op(...op(op(x[0], x[1]), x[2])..., x[i])``,
    with each step cast to the accumulator dtype and the operands in exactly
    that order, so ``op`` need not be commutative; ``initial``, if given, is
    combined once on the left of each scan. Exclusive (``inclusive=False``):
    ``out[0]`` is ``initial`` (or, without it, the identity) and ``out[i]`` the
    scan of the elements before ``i``.

    Args:
        x: a NumPy array or a device array, of any shape and strides, as
            :func:`pyreduce.reduce` takes it. Never modified.
        op: what :func:`pyreduce.reduce` takes: a built-in operator (``"add"``,
            ``operator.mul``, ``np.maximum``, ``max``, ...) or a Python function
            of two arguments that Numba can compile. Scalar accumulators only.
        identity: the value ``e`` with ``op(e, v) == op(v, e) == v``; an
            exclusive scan without ``initial`` starts with it. Inferred for
            built-in ops.
        axis: ``None`` (default): the scan of the flattened array, in C order,
            as ``numpy.cumsum``; an int: each line along that axis scanned on its
            own, the result of ``x``'s shape.
        dtype: the accumulator and result dtype (default: the input's). Input
            values are cast to it as they are loaded.
        out: an array of the result's shape and dtype to write the result into
            (a NumPy array, or a C-contiguous device array on a GPU backend),
            which is returned, as NumPy's ``out=``.
        inclusive: ``False`` for an exclusive scan (it needs ``initial`` or an
            identity).
        initial: a value combined once on the left of every scan.
        backend: ``"auto"``, ``"cuda"``, ``"hip"``, ``"sim"`` or ``"cpu"``.
        stream: the stream to launch on (GPU backends), as for ``reduce``.
        check: check the laws of a user ``op`` first, as ``reduce(check=True)``.
        tuning: a :class:`pyreduce.Tuning` of the GPU kernels: its
            ``block_size`` (default: the device's default block),
            ``items_per_thread`` (default 4: the elements each thread scans) and
            ``warp_size`` (32, or 64 in the simulator). A scan has one kernel
            and no grid bound: a Tuning with a ``variant``, ``max_blocks`` or
            ``vector_loads`` is a ValueError. The deprecated keywords
            ``block_size=``, ``items_per_thread=`` and ``warp_size=``: as for
            ``reduce``.

    Returns:
        An array of the accumulator dtype: of ``x``'s shape with ``axis``, 1-D
        without. A NumPy array for a host input; on a GPU backend a device array
        of the input's library for a device input.

    A float scan on a GPU combines tiles of elements before combining them with
    the prefix, so its rounding differs from a sequential loop's, as a float
    reduction's does; integer and other exact operators give identical results
    on every backend.

    Example:
        >>> import numpy as np, pyreduce
        >>> pyreduce.scan(np.array([3, 1, 4, 1, 5]), max, backend="cpu")
        array([3, 3, 4, 4, 5])
        >>> pyreduce.scan(np.array([1, 2, 3]), "add", inclusive=False, backend="cpu")
        array([0, 1, 3])
        >>> pyreduce.scan(np.array([[1, 2], [3, 4]]), lambda a, b: 10 * a + b, axis=1,
        ...               backend="cpu")
        array([[ 1, 12],
               [ 3, 34]])
    """
    tuning = _scan_tuning("scan", tuning, kwargs)
    info = inspect(x)
    return _scan(info, op, identity, axis, dtype, inclusive, initial, backend, stream,
                 tuning, check, out=out)


def cumsum(x, axis=None, dtype=None, out=None, **kwargs):
    """``numpy.cumsum``: the inclusive scan with ``"add"`` (see :func:`scan`,
    whose keywords after ``dtype`` it takes). The accumulator is that of
    :func:`pyreduce.sum`: NumPy's (booleans and small integers in int64, small
    unsigned ones in uint64), except that float16 and bfloat16 accumulate, and
    are returned, in float32.

    >>> import numpy as np, pyreduce
    >>> pyreduce.cumsum(np.array([[1, 2], [3, 4]], dtype=np.int8), backend="cpu")
    array([ 1,  3,  6, 10])
    """
    return _named("cumsum", "add", inspect(x), axis, dtype, kwargs, out=out)


def cumprod(x, axis=None, dtype=None, out=None, **kwargs):
    """``numpy.cumprod``: the inclusive scan with ``"mul"``, with
    :func:`cumsum`'s accumulator dtypes.

    >>> import numpy as np, pyreduce
    >>> pyreduce.cumprod(np.array([1, 2, 3, 4]), backend="cpu")
    array([ 1,  2,  6, 24])
    """
    return _named("cumprod", "mul", inspect(x), axis, dtype, kwargs, out=out)


def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False,
                   **kwargs):
    """The array API's ``cumulative_sum``: :func:`cumsum`, except that ``axis``
    is needed for an array of more than one dimension, and that with
    ``include_initial=True`` each line starts with a zero (and is one longer).
    With ``include_initial`` a GPU backend's result passes through the host.

    >>> import numpy as np, pyreduce
    >>> pyreduce.cumulative_sum(np.array([1, 2, 3]), include_initial=True, backend="cpu")
    array([0, 1, 3, 6])
    """
    return _cumulative("cumulative_sum", "add", x, axis, dtype, include_initial, kwargs, out)


def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False,
                    **kwargs):
    """The array API's ``cumulative_prod``: :func:`cumprod`, with the axis rule
    and ``include_initial`` (each line starts with a one) of
    :func:`cumulative_sum`.

    >>> import numpy as np, pyreduce
    >>> pyreduce.cumulative_prod(np.array([1, 2, 3]), include_initial=True, backend="cpu")
    array([1, 1, 2, 6])
    """
    return _cumulative("cumulative_prod", "mul", x, axis, dtype, include_initial, kwargs,
                       out)


def _cumulative(name, op, x, axis, dtype, include_initial, kwargs, out):
    """The array API's cumulative ``name`` with ``op``: ``axis`` needed above 1-D."""
    info = inspect(x)
    if axis is None:
        if len(info.shape) > 1:
            raise ValueError(f"{name} of a {len(info.shape)}-D array needs axis=")
        axis = 0  # of a 0-d array too: NumPy scans it as one of 1 element
    return _named(name, op, info, axis, dtype, kwargs, include_initial=bool(include_initial),
                  out=out)


#: the keywords of :func:`scan` the named scans pass on
_KEYWORDS = ("backend", "stream", "tuning")

#: what a Tuning may set for a scan (the others are a reduction's)
_SCAN_FIELDS = ("block_size", "items_per_thread", "warp_size")


def _scan_tuning(name: str, tuning, deprecated: dict) -> Tuning:
    """The checked Tuning of a scan: of its fields, those a scan has."""
    for key in deprecated:
        if key not in _SCAN_FIELDS:
            raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
    tuning = tuning_of(name, "auto", tuning, deprecated)
    for field in ("variant", "max_blocks", "vector_loads"):
        if getattr(tuning, field) != getattr(DEFAULT_TUNING, field):
            raise ValueError(f"{name}(): a scan has one kernel and no grid bound; "
                             f"tuning={tuning!r} sets {field}, which only reductions take")
    return tuning


def _named(name, op, info, axis, dtype, kwargs, include_initial=False, out=None):
    kwargs = dict(kwargs)
    tuning = kwargs.pop("tuning", None)
    deprecated = {k: kwargs.pop(k) for k in _SCAN_FIELDS if k in kwargs}
    for key in kwargs:
        if key not in _KEYWORDS:
            raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
    acc = sum_dtype(info.dtype) if dtype is None else dtype
    return _scan(info, op, None, axis, acc, True, None, kwargs.get("backend", "auto"),
                 kwargs.get("stream"), _scan_tuning(name, tuning, deprecated), False,
                 include_initial, out)


def _scan(info, op, identity, axis, dtype, inclusive, initial, backend, stream, tuning,
          check, include_initial=False, out=None):
    """:func:`scan` of an inspected input; ``include_initial``: each line
    starts with ``initial`` (or the identity), and is one longer; ``out``: the
    array the result is written into (:class:`pyreduce.manyvalues.Result`)."""
    monoid = as_monoid(op, info.dtype, identity, acc_dtype=dtype)
    if monoid.map is not None or is_tuple(monoid.dtype):
        raise ValueError(f"{monoid.name}: scan takes scalar ops without an element map")
    if check is not False:
        laws.check_if_requested(monoid, check)
    init = None if initial is None else cast_value(initial, monoid.dtype, "initial")
    lead = init  # an exclusive scan's first output, and include_initial's
    # an exclusive scan's first output exists where there is an element; a line
    # that includes the initial value always has one
    if (include_initial or (not inclusive and info.size)) and lead is None:
        if monoid.identity is None or not monoid.empty_ok:
            raise ValueError(f"an exclusive scan with op {monoid.name!r} needs initial= or "
                             "identity= (its first output)")
        lead = monoid.identity
    if not inclusive:
        init = lead
    shape = tuple(info.shape)
    if axis is not None and isinstance(axis, tuple):  # NumPy's scans take one axis
        raise TypeError(f"a scan takes an int axis or None, as NumPy's cumsum does; "
                        f"got axis={axis!r}")
    if axis is not None and not shape:  # NumPy scans a 0-d array as one of 1 element
        normalize_axes(axis, 1)  # NumPy's AxisError for any axis but 0 and -1
        axis = None
    if axis is None:
        line, lines = info.size, 1
        moved = None
    else:
        ndim = len(shape)
        (axis,) = normalize_axes(axis, ndim)
        line = shape[axis]
        lines = math.prod(shape[:axis] + shape[axis + 1:])
        moved = None if axis == ndim - 1 else axis
    be = backends.get(backend, on_device=info.on_device)
    stream = be.launch_stream(stream, info)
    grown = 1 if include_initial else 0
    out_shape = ((line + grown,) if axis is None
                 else shape[:axis] + (line + grown,) + shape[axis + 1:])
    result = Result(be, monoid.dtype, out_shape, info, out, False, stream)

    def finish(values):  # scanned rows on the host: the result
        if grown:
            values = np.concatenate([np.full((lines, 1), lead, monoid.dtype), values], 1)
        return result.host(_unrows(values, out_shape, axis))

    if info.size == 0:
        return finish(np.zeros((lines, line), monoid.dtype))
    if be.name == "cpu":
        host = info.host if info.host is not None else to_host(info)
        host = bfloat16_to_float32(host) if is_bfloat16(info.dtype) else host
        rows = _rows(host, axis)
        return finish(cpu_scan_rows(rows, monoid, init, exclusive=not inclusive))
    device = be.device(tuning.warp_size)
    call = Scan(be, device, monoid, tuning.block_size or device.default_block,
                tuning.items_per_thread or 4, stream)
    call.spec(info.dtype, False, False, init is not None)  # a bad tuning: ValueError here
    if moved is None:
        src = be.flat_input(info, stream)
    elif info.on_device:
        perm = tuple(a for a in range(len(shape)) if a != moved) + (moved,)
        src = be.gather_input(info, perm, stream)
    else:
        src = be.to_device(_rows(info.host, axis), stream)
    init_buf = None
    if init is not None:
        init_buf = be.allocate(1, monoid.dtype)
        be.put_array(init_buf, np.asarray([init], dtype=monoid.dtype), stream)
    # an exclusive scan writes each tile's last prefix into the next tile's first
    # output: where out= may be the input, the scan goes through a buffer of its own
    # (an out= sharing the input's memory elsewhere gets one from Result)
    direct = (moved is None and not grown and result.buffer is not None
              and (inclusive or out is None))
    dst = result.buffer if direct else be.allocate(info.size, monoid.dtype)
    scan_rows(call, src, info.dtype, lines, line, dst, init_buf, exclusive=not inclusive)
    if direct:
        return result.placed()
    return finish(be.read_array(dst, info.size, stream).reshape(lines, line))


def _rows(host: np.ndarray, axis) -> np.ndarray:
    """The lines to scan, as the rows of a 2-D C-order array."""
    if axis is None:
        return np.ascontiguousarray(host).reshape(1, -1)
    lines = np.moveaxis(host, axis, -1)
    return np.ascontiguousarray(lines).reshape(-1, host.shape[axis])


def _unrows(values: np.ndarray, shape: tuple, axis) -> np.ndarray:
    """Scanned rows back in the input's layout (1-D without ``axis``)."""
    if axis is None:
        return values.reshape(-1)
    moved = shape[:axis] + shape[axis + 1:] + (shape[axis],)
    return np.moveaxis(values.reshape(moved), -1, axis)
