"""``reduce``, the general reduction: any associative operator, over every element
or along ``axis``, and the path every public reduction to one value or along axes
takes from an inspected input (``_reduce``): a plain call's remembered decisions
(:mod:`pyreduce.callmemo`), where= and masked inputs, ``axis=``, and one call
prepared and run (:mod:`pyreduce.prepared`). Also what the public calls share:
the keywords ``reduce`` takes, ``deterministic=`` as a variant, and the hand-off
of Dask collections to :mod:`pyreduce.dask`."""

from __future__ import annotations

import warnings

import numpy as np

from . import callmemo, laws, manyvalues, masked, selection
from .axes import normalize_axes
from .dtypes import is_tuple
from .backends import _caller_level
from .interop import Input, checked_device_result, inspect
from .manyvalues import axes_take
from .ops import as_monoid
from .planner import Tuning
from .prepared import prepare
from .tuning_keywords import DEFAULT as _DEFAULT_TUNING
from .tuning_keywords import tuning_of

__all__ = ["reduce", "KEYWORDS", "check_keywords", "scale_out_with", "DETERMINISTIC_VARIANT",
           "deterministic_variant", "deterministic_tuning", "run_whole", "wants_host_result",
           "warn_complex_to_real"]


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
    device_result: bool | None = None,
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
        device_result: where the result lives (``docs/semantics.md``, *Where
            results live*). ``None`` (default): where the input does. A
            reduction to one value of a CuPy array is a 0-d CuPy array, of a
            PyTorch tensor a 0-d tensor on its device, returned without
            waiting for the GPU; of a host input, a Numba device array or
            another device array, a NumPy scalar. ``True``: on the device
            (GPU backends), even for a host input: a 0-d device array, or
            with ``axis`` one of the result's shape, of the input's library
            (CuPy, PyTorch; a Numba device array otherwise). ``False``: a
            reduction to one value is a NumPy scalar, which waits for the
            GPU. An array result (``axis`` short of every axis,
            ``keepdims``) of a device input is an array of its library for
            None and False alike.
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
        One value (no ``keepdims``): a NumPy scalar of the accumulator dtype,
        or for a CuPy or PyTorch input a 0-d array of its library and of that
        dtype (see ``device_result``). Else an array of the result's shape: a
        NumPy array for a host input, a device array of the input's library
        for a device input.
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
            device_result=None, out=None, stream=None, tuning=_DEFAULT_TUNING, check=False,
            map=None, deterministic=False, axis=None, keepdims=False,
            masked_rule=masked.NAMED, where=True):
    """:func:`reduce` of an inspected input (the named reductions inspect first),
    with its :class:`Tuning` (checked already, whatever the backend and size, so
    that a typo never passes silently). ``masked_rule``: what a masked input
    with nothing unmasked reduces to (:mod:`pyreduce.masked`). ``device_result``
    as :func:`reduce` takes it: None follows the input (callers inside the
    library that need a host value pass False)."""
    device_result = checked_device_result(device_result)
    # complex values into a real accumulator: their real parts, as NumPy casts
    real_parts = map is None and info.dtype.kind == "c" and dtype is not None \
        and np.dtype(dtype).kind in "fiu"
    plain = (out is None and map is None and check is False and where is True
             and isinstance(deterministic, (bool, np.bool_))  # else its TypeError below
             and not real_parts)
    if plain:  # a repeat of a plain call skips its decisions (pyreduce.callmemo)
        # a tuning or deterministic=True is part of the call shape
        tuned = None if deterministic is False and (
            tuning is _DEFAULT_TUNING or tuning == _DEFAULT_TUNING) else (tuning, deterministic)
        memo_key, result = _repeat(info, op, identity, initial, dtype, backend, stream,
                                   device_result, axis, keepdims, tuned)
        if result is not _MISS:
            return result
    monoid = as_monoid(op, info.dtype, identity, acc_dtype=dtype, map=map)
    if real_parts:
        info = _real_parts(info)
    if check is not False:
        laws.check_if_requested(monoid, check)
    if deterministic is not False:
        tuning = deterministic_tuning(tuning, deterministic)
        if deterministic and is_tuple(monoid.dtype):
            raise ValueError("deterministic=True takes scalar accumulators, not tuples")
    host_result = wants_host_result(device_result, out)
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
        if plain and memo_key is not None:
            if info.device is None:  # a host key: only what the cpu backend folds
                if call.backend.name == "cpu":  # asked for, or the cost model's choice
                    callmemo.remember_cpu(memo_key, call, op, call.route_holds)
            elif call.plan is not None:
                callmemo.remember(memo_key, call, op)
        return call.run(device_result, out)
    ndim = len(info.shape)
    axes = normalize_axes(axis, ndim)
    if len(axes) < ndim:
        axes_take(monoid, deterministic)
        batched = manyvalues.prepare_axes(info, monoid, axes, keepdims, initial, backend,
                                          tuning, stream, device_result, out)
        if plain and memo_key is not None and batched.repeat is not None:
            callmemo.remember_runner(memo_key, batched.repeat, op)
        return batched.run()
    call = prepare(info, monoid, initial, backend, tuning, stream, host_result)
    return run_whole(call, info, monoid, keepdims, device_result, out)


def wants_host_result(device_result, out) -> bool:
    """Whether a reduction to one value makes its result on the host: no
    ``device_result=True``, and no ``out=`` but a NumPy array."""
    return not device_result and (out is None or isinstance(out, np.ndarray))


def run_whole(call, info, monoid, keepdims: bool, device_result, out):
    """The result of ``call`` (a :class:`~pyreduce.prepared.Prepared` of every
    element) as :func:`reduce` gives it: a scalar, or with ``keepdims`` an
    array of ones in every axis, which stays where the input is (a tuple
    accumulator's: a tuple of host arrays, as along some axes)."""
    ndim = len(info.shape)
    if not keepdims or ndim == 0:  # one value, returned as a scalar, as NumPy does
        return call.run(device_result, out)
    if is_tuple(monoid.dtype):
        manyvalues.check_tuple_outputs(monoid.dtype, out, device_result)
        return call.run(shape=(1,) * ndim)
    on_device = info.on_device and call.backend.name != "cpu" and out is None
    return call.run(device_result or on_device, out, shape=(1,) * ndim)


_MISS = callmemo.MISS


def warn_complex_to_real() -> None:
    """NumPy's ComplexWarning for complex values cast to a real dtype, at the
    caller's line."""
    warnings.warn("Casting complex values to real discards the imaginary part",
                  np.exceptions.ComplexWarning, stacklevel=_caller_level())


def _real_parts(info):
    """A complex input reduced into a real dtype: NumPy's ComplexWarning, and a
    host array's real parts (a view); a device array's kernels take the real
    parts as they load (:func:`pyreduce.variants._blocks.element`)."""
    warn_complex_to_real()
    if info.host is None:
        return info
    real = Input(info.host.real.dtype, info.shape, host=info.host.real, kind=info.kind)
    real.mask = info.mask
    return real


def _plain_axis(axis) -> bool:
    """Whether ``axis`` is None, an integer or a tuple of integers (not bools):
    the axes a repeat's key may hold as given."""
    if isinstance(axis, tuple):
        return all(_integer(a) for a in axis)
    return axis is None or _integer(axis)


def _integer(a) -> bool:
    return isinstance(a, (int, np.integer)) and not isinstance(a, bool)


def plain_repeat(info, monoid, device_result=False):
    """``(call shape, result)`` of a call of ``monoid`` (a structured reduction's,
    nansum's) of ``info`` with no keyword but ``device_result`` (checked), as
    :func:`_reduce` finds it: the result of the call shape's remembered
    decisions, or :data:`_MISS`."""
    return _repeat(info, monoid, None, None, None, "auto", None, device_result, None, False)


def _repeat(info, op, identity, initial, dtype, backend, stream, device_result, axis,
            keepdims, tuned=None):
    """``(call shape, result)`` of a plain call: the result of its remembered
    decisions (:mod:`pyreduce.callmemo`), or :data:`_MISS` when there are none.
    A call along axes has a call shape of its own (the ``axis`` as given, and
    ``keepdims``), and so has a call with ``tuned``, its ``(tuning,
    deterministic)`` (None: the defaults)."""
    if info.device is None:  # a NumPy input: one value, on the host
        if device_result or axis is not None or keepdims or stream is not None:
            return None, _MISS
        k = callmemo.host_key(info, op, identity, initial, dtype, backend)
        if k is not None and tuned is not None:
            k = k + (("tuned", tuned),)
        return k, (_MISS if k is None else callmemo.run(k, info, op, device_result))
    k = callmemo.key(info, op, identity, initial, dtype, backend, stream)
    if k is None:
        return k, _MISS
    if tuned is not None:
        k = k + (("tuned", tuned),)
    if axis is not None or keepdims:
        if not _plain_axis(axis):  # 1.0 and True equal 1 as keys, and must be refused
            return None, _MISS
        k = ("axes", axis, keepdims, k)
    return k, callmemo.run(k, info, op, device_result)
