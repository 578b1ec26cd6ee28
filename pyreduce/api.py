"""The public calls: ``reduce``, the named reductions, ``segmented_reduce`` and
``Reduce``."""

from __future__ import annotations

import numpy as np

from . import along, laws, masked, partial, repeat, selection, structured
from .axes import normalize_axes
from .interop import inspect
from .dtypes import default_accumulator, is_tuple
from .ops import as_monoid, sum_dtype
from .partial import axes_take
from .planner import Tuning
from .prepared import prepare
from .tuning_keywords import DEFAULT as _DEFAULT_TUNING
from .tuning_keywords import settle, tuning_of

__all__ = [
    "reduce", "sum", "prod", "max", "min", "any", "all", "nanmax", "nanmin", "Reduce",
    "segmented_reduce", "argmax", "argmin", "minmax", "mean", "var", "std", "nansum",
    "nanprod",
]


def reduce(
    x,
    op,
    identity=None,
    *,
    axis=None,
    dtype=None,
    out=None,
    keepdims: bool = False,
    initial=None,
    where=True,
    map=None,
    backend: str = "auto",
    device_result: bool = False,
    stream=None,
    deterministic: bool = False,
    check: bool = False,
    split_every: int | None = None,
    variant: str = "auto",
    tuning: Tuning | None = None,
    **kwargs,
):
    """Reduce the elements of ``x`` with the associative operator ``op``: all of
    them, or along ``axis``.

    The result equals ``functools.reduce(op, x.ravel(order="C"))`` with each step
    cast to the accumulator dtype; the order of the operands is kept, so ``op``
    need not be commutative. With ``axis``, each element of the result is that
    fold over the elements it covers, in C order of the reduced axes (the rows of
    ``x.transpose(kept + reduced).reshape(M, K)``), with NumPy's result shapes.

    Args:
        x: a NumPy array, or a device array (CuPy, PyTorch, Numba: anything with
            ``__cuda_array_interface__``), of any shape and strides. Never modified.
            Also what NumPy takes: a masked array (its unmasked elements are
            reduced), an array in non-native byte order, a buffer
            (``array.array``), Python lists and numbers (``docs/semantics.md``).
        op: ``max``, ``min``, ``operator.add/mul/and_/or_/xor``, the matching NumPy
            ufuncs, a name such as ``"add"``, or a Python function of two arguments
            that Numba can compile.
        identity: the value ``e`` with ``op(e, v) == op(v, e) == v``; returned for an
            empty input. Inferred for built-in ops, except that ``max``/``min`` of an
            empty array raise ValueError as in NumPy.
        axis: ``None`` (default: every element, one value), an int or a tuple of
            ints, negative ones counted from the end, as in NumPy (an axis out of
            range is ``numpy.exceptions.AxisError``, a repeated one ValueError).
            ``axis=()`` reduces nothing: each element is cast (and combined with
            ``initial``) on its own.
        dtype: the accumulator and result dtype (default: the input's; ``bool`` for
            the logical ops). Input values are cast to it as they are loaded. With
            ``map=``, a tuple of dtypes for a tuple accumulator.
        out: an array to write the result into, returned: for a reduction to one
            value an array of one element, else one of the result's shape, of the
            result's dtype. A NumPy array, or a device array (GPU backends; written
            on the device, with no allocation; C-contiguous).
        keepdims: keep the reduced axes in the result, with extent 1.
        initial: a value combined once, on the left, like ``functools.reduce``'s
            (with ``axis``: once into each element of the result).
        where: a boolean mask broadcast against ``x``, as NumPy's ``where=``:
            only the elements where it is True are reduced, in C order (per lane
            with ``axis``); a reduction that selects none gives ``initial``, else
            the identity, and an ``op`` without identity needs ``initial`` (a
            ValueError otherwise). ``True`` (default): every element. A device
            mask is copied to the host, and the selected elements are gathered
            on the host (``docs/semantics.md``). ``map``'s index ``i`` then
            counts the selected elements (it is the position in ``x[mask]``;
            with ``axis``, among the selected elements of its lane).
        map: ``map(i, v)``, applied to element ``v`` at flat index ``i`` as it is
            loaded: what is reduced is ``map(i, x[i])``. It may return a tuple
            (a tuple accumulator: ``op`` then combines tuples, and ``identity``
            and the result are tuples), e.g. ``lambda i, v: (v, i)`` for an
            argmax. Without ``dtype=`` the accumulator is what ``map`` returns.
            With ``axis``, ``i`` is the element's position in its lane (0 to
            ``K - 1``, in C order of the reduced axes), not in ``x``: the
            index field of ``reduce(x, op, map=lambda i, v: (v, i), axis=1)``
            is ``np.argmax(x, axis=1)`` for an ``op`` keeping the larger value
            and, on a tie, the first.
        backend: ``"auto"``, ``"cuda"``, ``"hip"`` (AMD, ``pyreduce-gpu[rocm]``; compiled
            for gfx942/gfx1100 but not yet run on AMD hardware), ``"sim"`` or ``"cpu"``.
        device_result: return the result on the device (GPU backends): a 0-d
            device array instead of a NumPy scalar, or with ``axis`` a device array
            of the result's shape even for a host input. A CuPy array for a CuPy
            input, a PyTorch tensor for a PyTorch one, a Numba device array
            otherwise. (With ``axis``, a device input's result is always such an
            array.)
        stream: the CUDA stream to launch on: a Numba, CuPy or PyTorch stream or
            a handle. ``None`` (default): the stream the input's producer works on
            (CuPy's or PyTorch's current stream; the default stream otherwise),
            so the reduction follows the work that made its input.
        deterministic: combine the elements in one fixed tree that depends on the
            size alone (``docs/deterministic.md``), so that a float sum is bitwise
            the same for every block size, items per thread, warp size, grid, GPU
            and backend, and equals ``pyreduce.reference(x, op, ...)``. On a GPU
            it selects variant ``"pairwise"`` (another ``variant=`` is a
            ValueError) and needs items per thread to be a multiple of 4.
        check: before the first use of a user ``op`` with this dtype (and
            identity), check on a fixed sample of values, on the host, that it is
            associative and that ``identity`` is one on both sides; a ValueError
            names the law and a counterexample. Built-in ops skip it.
            ``pyreduce.testing`` checks more thoroughly.
        split_every: for a Dask array ``x``, how many neighbouring chunks' results
            one step of Dask's tree combines (``docs/scaling.md``); only for Dask
            arrays.
        variant: a name from ``pyreduce.variants``: the GPU kernel to run
            (default ``"auto"``: the planner's choice). The short way to give
            ``tuning=pyreduce.Tuning(variant=...)``; with a ``tuning`` of
            another variant it is a ValueError.
        tuning: a :class:`pyreduce.Tuning`: the variant, block size, items per
            thread, warp size, grid bound and vector loads of the GPU kernels
            (``cuda``, ``hip``, ``sim``; the ``cpu`` backend has none and
            ignores it), each the planner's choice where it is not given.
            ``None`` (default): the planner chooses all. The keywords
            ``block_size=``, ``items_per_thread=``, ``warp_size=``,
            ``max_blocks=`` and ``vector_loads=``, which ``tuning=`` replaces,
            are still taken, with a DeprecationWarning, until the next release.

    Returns:
        A NumPy scalar of the accumulator dtype when the result is one value (no
        ``keepdims``); else an array of the result's shape: a NumPy array for a
        host input, a device array of the input's library for a device input.
        A tuple accumulator gives a tuple of NumPy scalars for one value, else
        a tuple of NumPy arrays of the result's shape, one per field, also for
        a device input (reduced on the device, the results copied back); with
        ``axis`` or ``keepdims``, ``out=`` and ``device_result=True`` then
        raise ValueError.
        For a Dask array ``x``, a lazy Dask array of that value (0-d for one
        value), as ``dask.array.sum`` gives (``docs/scaling.md``).

    Example:
        >>> import numpy as np, pyreduce
        >>> x = np.array([3, 0, 7, 0, 2, 0], dtype=np.int64)
        >>> int(pyreduce.reduce(x, lambda a, b: b if b != 0 else a, backend="cpu"))
        2
        >>> float(pyreduce.reduce(np.arange(5.0), max, backend="cpu"))
        4.0
        >>> m = np.array([[3, 0, 7], [0, 2, 0]])
        >>> pyreduce.reduce(m, lambda a, b: b if b != 0 else a, axis=1, backend="cpu")
        array([7, 2])
        >>> pyreduce.reduce(m, "add", axis=0, keepdims=True, backend="cpu")
        array([[3, 2, 7]])
    """
    if split_every is not None or _on_dask(x):
        args = locals()
        if where is True:  # the Dask reductions do not take where= (a TypeError)
            del args["where"]
        return _scale_out("reduce", args)
    return _reduce(inspect(x, masked=True), op, identity, initial, dtype, backend,
                   device_result, out, stream, tuning_of("reduce", variant, tuning, kwargs),
                   check, map, deterministic, axis, keepdims, masked.FOLD, where)


#: The keywords of ``reduce`` after ``x``, ``op`` and ``identity``: what the
#: named reductions pass on to it (``variant=`` and the deprecated tuning
#: keywords settled into ``tuning=`` first: :func:`settle`).
KEYWORDS = frozenset(reduce.__kwdefaults__)


def check_keywords(name: str, given: dict, allowed) -> None:
    """A TypeError naming the public function ``name`` for a keyword in ``given``
    that it does not take (Python would name the function the keywords are
    passed on to)."""
    for k in given:
        if k not in allowed:
            raise TypeError(f"{name}() got an unexpected keyword argument {k!r}")


def _on_dask(x) -> bool:
    """Whether ``x`` is a Dask collection, told by its type's module alone, so that
    ``import pyreduce`` never imports Dask."""
    return type(x).__module__.startswith("dask.")


#: What reduces a Dask collection: :func:`pyreduce.dask.call`, which builds on this
#: module, handed down by the package when it is imported (:func:`scale_out_with`).
_SCALE_OUT = None


def scale_out_with(call) -> None:
    """Reduce Dask collections with ``call(name, args)`` (:func:`pyreduce.dask.call`)."""
    global _SCALE_OUT
    _SCALE_OUT = call


def _scale_out(name: str, args: dict):
    """``name(**args)`` of a Dask array (:mod:`pyreduce.dask`); ``args`` is the
    public function's ``locals()`` on entry: its arguments."""
    return _SCALE_OUT(name, args)


#: The variant that computes the fixed tree of deterministic=True.
DETERMINISTIC_VARIANT = "pairwise"


def deterministic_variant(variant: str, deterministic) -> str:
    """The variant a call with ``deterministic=`` uses: ``variant`` unchanged for
    False, :data:`DETERMINISTIC_VARIANT` for True (``variant=`` may only name it)."""
    if not isinstance(deterministic, (bool, np.bool_)):
        raise TypeError(f"deterministic= must be True or False, got {deterministic!r}")
    if not deterministic:
        return variant
    if variant not in ("auto", DETERMINISTIC_VARIANT):
        raise ValueError(
            f"deterministic=True computes the fixed tree of variant "
            f"{DETERMINISTIC_VARIANT!r}; variant={variant!r} cannot give it"
        )
    return DETERMINISTIC_VARIANT


def deterministic_tuning(tuning: Tuning, deterministic) -> Tuning:
    """``tuning`` with the variant of :func:`deterministic_variant`."""
    variant = deterministic_variant(tuning.variant, deterministic)
    return tuning if variant == tuning.variant else tuning.replace(variant=variant)


def _reduce(info, op, identity, initial=None, dtype=None, backend="auto",
            device_result=False, out=None, stream=None, tuning=_DEFAULT_TUNING, check=False,
            map=None, deterministic=False, axis=None, keepdims=False,
            masked_rule=masked.NAMED, where=True):
    """:func:`reduce` of an inspected input (the named reductions inspect first),
    with its :class:`Tuning` (checked already, whatever the backend and size, so
    that a typo never passes silently). ``masked_rule``: what a masked input
    with nothing unmasked reduces to (:mod:`pyreduce.masked`)."""
    plain = (axis is None and not keepdims and out is None and map is None and check is False
             and deterministic is False and where is True
             and (tuning is _DEFAULT_TUNING or tuning == _DEFAULT_TUNING))
    if plain:  # a repeat of a plain call skips its decisions (pyreduce.repeat)
        memo_key, result = _repeat(info, op, identity, initial, dtype, backend, stream,
                                   device_result)
        if result is not _MISS:
            return result
    monoid = as_monoid(op, info.dtype, identity, acc_dtype=dtype, map=map)
    if check is not False:
        laws.check_if_requested(monoid, check)
    if deterministic is not False:
        tuning = deterministic_tuning(tuning, deterministic)
        if deterministic and is_tuple(monoid.dtype):
            raise ValueError("deterministic=True takes scalar accumulators, not tuples")
    host_result = not device_result and (out is None or isinstance(out, np.ndarray))
    if where is not True:  # pyreduce.selection
        left_out = selection.left_out(where, info.shape)
        if left_out is not None and info.mask is not None:  # and masked: both left out
            info.mask = info.mask | left_out
        elif left_out is not None:
            return selection.reduce(info, monoid, left_out, normalize_axes(axis, len(info.shape)),
                                    keepdims, initial, backend, tuning, stream, device_result,
                                    out, deterministic)
    if info.mask is not None and info.size:  # without elements: as a plain empty array
        return masked.reduce(info, monoid, masked_rule, normalize_axes(axis, len(info.shape)),
                             keepdims, initial, backend, tuning, stream, device_result, out,
                             deterministic)
    if axis is None and not keepdims:  # the common case first, untouched
        call = prepare(info, monoid, initial, backend, tuning, stream, host_result)
        if plain and memo_key is not None and call.plan is not None:
            repeat.remember(memo_key, call, op)
        return call.run(device_result, out)
    ndim = len(info.shape)
    axes = normalize_axes(axis, ndim)
    if len(axes) < ndim:
        axes_take(monoid, deterministic)
        return partial.reduce_axes(info, monoid, axes, keepdims, initial, backend, tuning,
                                   stream, device_result, out)
    call = prepare(info, monoid, initial, backend, tuning, stream, host_result)
    if not keepdims or ndim == 0:  # one value, returned as a scalar, as NumPy does
        return call.run(device_result, out)
    # every axis kept with extent 1: an array, which stays where the input is
    # (a tuple accumulator's: a tuple of host arrays, as along some axes)
    if is_tuple(monoid.dtype):
        partial.check_tuple_outputs(monoid.dtype, out, device_result)
        return call.run(shape=(1,) * ndim)
    on_device = info.on_device and call.backend.name != "cpu" and out is None
    return call.run(device_result or on_device, out, shape=(1,) * ndim)


_MISS = repeat.MISS


def _repeat(info, op, identity, initial, dtype, backend, stream, device_result):
    """``(call shape, result)`` of a plain call: the result of its remembered
    decisions (:mod:`pyreduce.repeat`), or :data:`_MISS` when there are none."""
    k = repeat.key(info, op, identity, initial, dtype, backend, stream)
    if k is None:
        return k, _MISS
    return k, repeat.run(k, info, op, device_result)


def _named(name, op, dtype_rule, x, axis, dtype, out, keepdims, identity, initial, kwargs,
           allowed=KEYWORDS):
    """The named reduction ``name`` (``sum``, ...) with ``op``; ``kwargs`` are
    the keywords it passes on to ``reduce``, of those ``allowed``."""
    info = inspect(x, masked=True)
    acc = dtype_rule(info.dtype) if dtype is None else dtype
    if (axis is None and out is None and not keepdims
            and (not kwargs or (len(kwargs) == 1 and "device_result" in kwargs))):
        # the commonest plain call, straight to its repeat (pyreduce.repeat)
        result = _repeat(info, op, identity, initial, acc, "auto", None,
                         kwargs.get("device_result", False))[1]
        if result is not _MISS:
            return result
    kwargs = settle(name, kwargs)
    check_keywords(name, kwargs, allowed)
    return _reduce(info, op, identity, initial, acc, out=out, axis=axis, keepdims=keepdims,
                   **kwargs)


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
    device_result: bool = False,
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
        device_result: return a device array even for a host ``x`` (GPU
            backends); a device ``x`` always gives one, of its own library.
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
    info = inspect(x, masked=True)
    monoid = as_monoid(op, info.dtype, identity, acc_dtype=dtype, map=map)
    if check is not False:
        laws.check_if_requested(monoid, check)
    run = (masked.reduce_segments if info.mask is not None and info.size
           else partial.reduce_segments)
    return run(info, offsets, monoid, initial, backend, tuning, stream, device_result, out)


#: what the structured reductions pass on: backend, stream and the tuning
#: (``variant=`` and the deprecated tuning keywords settled into it first)
_TUNED = frozenset({"backend", "stream", "tuning"})
#: what nansum and nanprod pass on (their map is their own)
_NAN_KEYWORDS = KEYWORDS - {"map"}
#: what mean, var and std pass on
_MOMENTS = _TUNED | {"where"}


def _tuned(kwargs: dict, name: str, allowed=_TUNED) -> dict:
    """The keywords a structured reduction passes on: backend, stream and tuning
    (and those of ``allowed``), the tuning settled into one ``tuning``."""
    kwargs = settle(name, kwargs)
    check_keywords(name, kwargs, allowed)
    return kwargs


def _structured(name: str, x, monoid, axis, keepdims, out, dtype, device_result, kwargs,
                allowed=_TUNED, rule=masked.NAMED, one_axis=False, fill=None):
    """A structured reduction with NumPy's keywords (:mod:`pyreduce.along`):
    ``monoid(dtype)`` its accumulator; ``one_axis``: ``axis`` is an int or None,
    as for NumPy's argmax; ``fill``: what a masked element reads as along axes
    (the argmax family)."""
    kwargs = _tuned(kwargs, name, allowed)
    if one_axis and axis is not None and not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{name}() takes an int axis or None, as NumPy's does; "
                        f"got axis={axis!r}")
    info = inspect(x, masked=True)
    m = monoid(info.dtype)
    ndim = len(info.shape)
    axes = normalize_axes(axis, ndim)
    backend, stream = kwargs.get("backend", "auto"), kwargs.get("stream")
    where = kwargs.pop("where", True)
    if len(axes) == ndim:  # one value
        value = _reduce(info, m, None, masked_rule=rule, where=where, **kwargs)
        if out is None and not keepdims and dtype is None and not device_result:
            return value
        shape = (1,) * ndim if keepdims else ()
        if value is np.ma.masked:
            return value if not keepdims else np.ma.masked_all(shape, dtype or m.dtype)
        return along.place(value, info, shape, dtype, out, device_result, backend, stream)
    if info.mask is not None and fill is not None:
        info = along.fill_masked(info, fill(info.dtype))
    left_out = selection.left_out(where, info.shape) if where is not True else None
    tuning = kwargs.get("tuning", _DEFAULT_TUNING)
    values = along.reduce(info, m, axes, keepdims, backend, tuning, stream, left_out)
    return along.place(values, info, along.keepdims_shape(info.shape, axes, keepdims), dtype,
                       out, device_result, backend, stream)


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


def argmax(x, axis=None, out=None, *, keepdims=False, device_result=False, **kwargs):
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
    if _on_dask(x):
        return _dask("argmax", x, kwargs, axis=axis, out=out, keepdims=keepdims,
                     device_result=device_result)
    return _structured("argmax", x, structured.argmax_monoid, axis, keepdims, out, None,
                       device_result, kwargs, rule=masked.INDEX, one_axis=True, fill=_lowest)


def argmin(x, axis=None, out=None, *, keepdims=False, device_result=False, **kwargs):
    """The index of the smallest element (the first; the first NaN's if any),
    like ``np.argmin``. Keywords as for ``argmax`` (a masked element reads as
    the highest value along an axis)."""
    if _on_dask(x):
        return _dask("argmin", x, kwargs, axis=axis, out=out, keepdims=keepdims,
                     device_result=device_result)
    return _structured("argmin", x, structured.argmin_monoid, axis, keepdims, out, None,
                       device_result, kwargs, rule=masked.INDEX, one_axis=True, fill=_highest)


def minmax(x, axis=None, out=None, *, keepdims=False, device_result=False, **kwargs):
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


def mean(x, axis=None, dtype=None, out=None, keepdims=False, *, device_result=False,
         **kwargs):
    """The mean, in one pass with float64 accumulators (Chan's pairwise update),
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
    return _structured("mean", x, lambda dt: structured.moments_monoid(dt, "mean"), axis,
                       keepdims, out, dtype, device_result, kwargs, _MOMENTS)


def _moments(name, x, axis, dtype, out, ddof, keepdims, correction, device_result, kwargs):
    if _on_dask(x):
        kwargs = dict(kwargs, ddof=ddof, correction=correction)
        return _dask(name, x, kwargs, axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                     device_result=device_result)
    ddof = structured.degrees_of_freedom(ddof, correction)
    return _structured(name, x, lambda dt: structured.moments_monoid(dt, name, ddof), axis,
                       keepdims, out, dtype, device_result, kwargs, _MOMENTS)


def var(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None,
        device_result=False, **kwargs):
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
        device_result=False, **kwargs):
    """The standard deviation, ``sqrt(var(x, ddof))`` (``correction``: as for
    ``var``). Keywords as for ``var``."""
    return _moments("std", x, axis, dtype, out, ddof, keepdims, correction, device_result,
                    kwargs)


def nansum(x, *, dtype=None, **kwargs):
    """The sum with NaN taken as zero, like ``np.nansum`` (accumulated like
    ``np.sum``, or in ``dtype``): a complex value with NaN in either part counts as
    zero. Keywords: ``initial``, ``where`` (as for ``sum``), ``device_result``,
    ``out`` and those of ``argmax``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.nansum(np.array([1.0, np.nan, 2.0]), backend="cpu"))
    3.0
    """
    if _on_dask(x):
        return _scale_out("nansum", locals())
    info = inspect(x, masked=True)
    kwargs = settle("nansum", kwargs)
    check_keywords("nansum", kwargs, _NAN_KEYWORDS)
    return _reduce(info, structured.nansum_monoid(info.dtype, dtype), None, **kwargs)


def nanprod(x, *, dtype=None, **kwargs):
    """The product with NaN taken as one, like ``np.nanprod``. Keywords as for
    ``nansum``."""
    if _on_dask(x):
        return _scale_out("nanprod", locals())
    info = inspect(x, masked=True)
    kwargs = settle("nanprod", kwargs)
    check_keywords("nanprod", kwargs, _NAN_KEYWORDS)
    return _reduce(info, structured.nanprod_monoid(info.dtype, dtype), None, **kwargs)


class Reduce:
    """A reusable reduction with a user operator: a drop-in for ``numba.cuda.Reduce``.

    ``Reduce(f)(arr, size=None, res=None, init=0, stream=0)`` returns
    ``functools.reduce(f, arr[:size], init)``; with ``res`` (a device array) the
    result is written to ``res[0]`` and None is returned. Kernels are cached by the
    operator's code, so a new ``Reduce`` of the same lambda does not recompile.

    >>> import numpy as np, pyreduce
    >>> R = pyreduce.Reduce(lambda a, b: a + b)
    >>> float(R(np.arange(1.0, 11.0), init=3, backend="cpu"))
    58.0
    """

    def __init__(self, functor, **unexpected):
        check_keywords("Reduce", unexpected, ())
        self._functor = functor

    def __call__(self, arr, size=None, res=None, init=0, stream=0, *, backend="auto",
                 **unexpected):
        check_keywords("Reduce(f)", unexpected, ())
        if getattr(arr, "ndim", None) != 1:
            raise TypeError("only support 1D array")
        if size is not None:
            arr = arr[:size]
        dtype = np.dtype(arr.dtype)
        init = dtype.type(init)
        if arr.size < 1:
            return init
        if res is None:
            return reduce(arr, self._functor, initial=init, backend=backend, stream=stream)
        reduce(arr, self._functor, initial=init, backend=backend, out=res[:1], stream=stream)
        return None
