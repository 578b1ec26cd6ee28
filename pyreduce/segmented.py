"""``segmented_reduce``: one reduction per segment of a 1-D array, the segments
given by their offsets (run by :mod:`pyreduce.manyvalues`)."""

from __future__ import annotations

from . import laws, manyvalues, masked
from .interop import checked_device_result, inspect
from .ops import as_monoid
from .planner import Tuning
from .tuning_keywords import tuning_of

__all__ = ["segmented_reduce"]


def segmented_reduce(
    x,
    offsets,
    op,
    identity=None,
    *,
    dtype=None,
    map=None,
    out=None,
    initial=None,
    backend: str = "auto",
    device_result: bool | None = None,
    stream=None,
    check: bool = False,
    tuning: Tuning | None = None,
    **kwargs,
):
    """Reduce each segment ``x[offsets[i] : offsets[i + 1]]`` of the 1-D ``x``
    with ``op``, in order: ``S`` results for ``S + 1`` offsets (the begin and end
    offsets of CUB's and ``cuda.compute``'s ``segmented_reduce`` as one array,
    ``begin = offsets[:-1]``, ``end = offsets[1:]``).

    Args:
        x: a 1-D NumPy or device array, any stride. Never modified. A masked
            array gives a masked result: each segment's unmasked elements,
            masked where there are none.
        offsets: a 1-D integer array of ``S + 1`` boundaries, on the host or the
            device. Host offsets are checked: within ``[0, len(x)]`` and never
            decreasing (ValueError naming the first that is not). Device offsets
            (int32 or int64) are not copied back to be checked: each is clamped
            into ``[0, len(x)]`` and an end below its start makes an empty
            segment, so no offsets make a kernel read outside ``x``. Where an
            empty segment would have no value (an op without identity and no
            ``initial``), device offsets are copied to the host and checked.
        op: as for ``reduce``.
        identity: as for ``reduce``; also the result of an empty segment.
        dtype: the accumulator and result dtype, as for ``reduce``.
        map: ``map(i, v)``, as for ``reduce``, with ``i`` the position of ``v``
            in its segment (``x[offsets[s] + i]``; the unmasked elements of
            the segment, counted, for a masked ``x``). It may return a tuple:
            the result is then a tuple of NumPy arrays, one per field.
        out: an array of ``S`` elements and the result's dtype to write into,
            returned (a NumPy array, or a device array on a GPU backend; not
            for a tuple accumulator).
        initial: combined once, on the left, into every segment's result.
        backend: as for ``reduce``.
        device_result: ``True``: a device array even for a host ``x`` (GPU
            backends). ``None`` (default) and ``False``: a device ``x`` gives
            one of its own library, a host ``x`` a NumPy array.
        stream: as for ``reduce``.
        check: as for ``reduce``.
        tuning: a :class:`pyreduce.Tuning` of the GPU kernels, as for
            ``reduce``: its ``block_size``, ``items_per_thread`` and
            ``warp_size``, and ``max_blocks``, the grid that a few long
            segments may be split over. Its ``variant`` must be ``"auto"``
            (there is one segmented kernel; another is a ValueError). The
            deprecated keywords ``block_size=``, ... as for ``reduce``.

    Returns:
        An array of ``S`` results of the accumulator dtype (for a tuple
        accumulator, a tuple of them, one per field, on the host). An empty
        segment's result is ``initial``, else the identity; without either, an
        empty segment is a ValueError (as ``max`` of an empty array is).

    Example:
        >>> import numpy as np, pyreduce
        >>> x = np.arange(10)
        >>> pyreduce.segmented_reduce(x, np.array([0, 3, 3, 10]), "add", backend="cpu")
        array([ 3,  0, 42])
        >>> pyreduce.segmented_reduce(x, np.array([0, 4, 10]), lambda a, b: b, backend="cpu")
        array([3, 9])
        >>> pyreduce.segmented_reduce(x, np.array([0, 4, 10]), "add", map=lambda i, v: i,
        ...                           backend="cpu")
        array([ 6, 15])
    """
    tuning = tuning_of("segmented_reduce", "auto", tuning, kwargs)
    device_result = checked_device_result(device_result)
    info = inspect(x, masked=True)
    monoid = as_monoid(op, info.dtype, identity, acc_dtype=dtype, map=map)
    if check is not False:
        laws.check_if_requested(monoid, check)
    run = (masked.reduce_segments if info.mask is not None and info.size
           else manyvalues.reduce_segments)
    return run(info, offsets, monoid, initial, backend, tuning, stream, device_result, out)
