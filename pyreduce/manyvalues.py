"""Reductions to many values: ``axis=`` reductions that keep some axes, and
``segmented_reduce``. From a validated call to its result.

Where the result goes (:class:`Result`): the caller's ``out=`` if given; else a
device array of the input's own library when the input lives on a device (or
``device_result=True``) and a GPU backend runs it; else a NumPy array.

How the input reaches the kernels (:func:`device_layout`): a device input is
read in place, through the 1-D window of its memory that
:func:`pyreduce.axes.describe` names, whenever its strides give a rows or columns
description; otherwise it is gathered into C order of ``kept + reduced`` first.
A host input is uploaded as it lies in memory when that window holds no more
than its elements (a transposed or reversed array is not transposed on the
host), else as a dense copy.

Element maps and tuple accumulators: ``map(k, v)`` gets ``k``, the position of
``v`` in its lane (0 .. K-1, in C order of the reduced axes) or segment. The
kernels write a tuple accumulator's results to a record array (dtype fields
``f0, f1, ...``), which comes back to the host; the caller gets a tuple of
NumPy arrays, one per field (:func:`as_fields`), as the full reduction with
``keepdims=True`` gives them, and ``out=`` and ``device_result=True`` do not
apply. :func:`reduce_axes_raw` returns the record array itself, for reductions
that finish their accumulators on the host. The structured reductions
(:func:`reduce_axes_finished`) finish them where the results go: on a GPU, for
a result on the device, the record array stays there and a finishing kernel
(:mod:`pyreduce.finishing`) reads it and writes the results in place.
"""

from __future__ import annotations

import math

import numpy as np

from . import backends, callmemo
from .axes import describe, result_shape, span_view
from .backends.base import check_out, check_out_array, to_host
from .backends.results import parts
from .batchplanner import plan_segments, plan_strided
from .dtypes import bfloat16_to_float32, fields, is_bfloat16, is_tuple
from .interop import aliases, c_strides, inspect
from .ops import Monoid, cast_value

__all__ = ["Result", "Batched", "prepare_axes", "reduce_axes_raw",
           "reduce_axes_finished", "one_finished", "result_outputs",
           "reduce_segments", "device_layout", "validate_offsets", "as_fields", "filled",
           "check_no_finish", "check_tuple_outputs"]


class Result:
    """Where a result of ``shape`` goes, and how it is returned (see the module
    docstring). Every way of producing it ends in :meth:`host` or :meth:`launch`.
    ``raw``: the accumulators as a host array of ``dtype`` (a record array for a
    tuple accumulator), not split into fields, and never left on the device."""

    def __init__(self, be, dtype: np.dtype, shape: tuple, info, out, device_result: bool,
                 stream, raw: bool = False):
        if out is not None and device_result:
            raise ValueError("pass out= or device_result=True, not both")
        self.be, self.dtype, self.shape, self.stream = be, dtype, shape, stream
        self.host_out = self.user = self.buffer = None
        #: out='s own buffer where the kernels write another (:meth:`placed`)
        self._into = None
        self.raw = raw
        check_tuple_outputs(dtype, out, device_result)
        if raw or is_tuple(dtype):  # on the host
            return
        if isinstance(out, np.ndarray):
            check_out(out.shape, out.dtype, dtype, shape)
            self.host_out = out
            return
        check_out_array(out)
        if be.name == "cpu":
            if out is not None or device_result:
                what = "device_result=True" if device_result else "a device out= array"
                raise ValueError(f"{what} needs a GPU backend, not 'cpu'")
            return
        if out is not None:
            self.user, self.buffer = out, be.out_buffer(out, dtype, shape)
            if info.on_device and aliases(info.device, out):
                # out= shares the input's memory: kernels writing it would read
                # elements they had written, so they write a buffer of their own,
                # copied into out= when they are done (NumPy buffers such calls)
                self._into = self.buffer
                self.buffer = be.new_result(dtype, stream, info, shape)[1]
        elif device_result or info.on_device:
            self.user, self.buffer = be.new_result(dtype, stream, info, shape)

    def host(self, values: np.ndarray):
        """The result from values computed (or known) on the host."""
        values = np.asarray(values, dtype=self.dtype).reshape(self.shape)
        if self.raw:
            return values
        if is_tuple(self.dtype):
            return as_fields(values)
        if self.buffer is not None:
            self.be.put_array(self.buffer, values.reshape(-1), self.stream)
            return self.placed()
        if self.host_out is not None:
            self.host_out[...] = values
            return self.host_out
        return values

    def fill(self, value):
        """Every element ``value`` (nothing to compute: an empty reduction)."""
        return self.host(filled(self.shape, value, self.dtype))

    def launch(self, run, src, init, offsets=None):
        """The result of an :class:`~pyreduce.driver.Executable`: written in place
        on the device, or read back."""
        if self.buffer is not None:
            run(src, self.stream, init, self.buffer, offsets)
            return self.placed()
        return self.host(run(src, self.stream, init, None, offsets))

    def placed(self):
        """The device result, once the kernels have written :attr:`buffer`:
        the user's ``out=`` (given the buffer's values, where the kernels
        wrote one of their own) or the new array."""
        if self._into is not None:
            self.be.copy_buffer(self._into, self.buffer, self.stream)
            self._into = None
        return self.user


#: why a tuple accumulator's axis= or segmented result has no device form
_TUPLE_OUTPUTS = ("a tuple accumulator's result along axes (axis=, keepdims=) or of "
                  "segmented_reduce is a tuple of {fields} NumPy arrays, one per field, on "
                  "the host: out= and device_result=True do not apply")


def check_tuple_outputs(dtype: np.dtype, out, device_result: bool) -> None:
    """A ValueError for ``out=`` or ``device_result=True`` with a tuple
    accumulator along axes: its result is a tuple of host arrays."""
    if is_tuple(dtype) and (out is not None or device_result):
        raise ValueError(_TUPLE_OUTPUTS.format(fields=len(fields(dtype))))


def as_fields(values: np.ndarray):
    """A result array as it is returned: for a tuple accumulator (a record
    array) a tuple of arrays, one per field, each of its field's dtype and the
    result's shape (masked arrays for a masked one); else ``values`` itself."""
    if not is_tuple(values.dtype):
        return values
    if isinstance(values, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(values)
        return tuple(np.ma.MaskedArray(np.ascontiguousarray(values.data[name]),
                                       mask=mask[name]) for name in values.dtype.names)
    return tuple(np.ascontiguousarray(values[name]) for name in values.dtype.names)


def filled(shape: tuple, value, dtype: np.dtype) -> np.ndarray:
    """An array of ``shape`` whose every element is ``value`` (a tuple for a
    tuple accumulator, which ``np.full`` does not take)."""
    values = np.empty(shape, dtype)
    values[...] = value
    return values


def axes_take(monoid: Monoid, deterministic) -> None:
    """What an ``axis=`` reduction's kernels (rows, columns, segments) do not
    take: ``deterministic=True``."""
    if deterministic:
        raise ValueError("deterministic=True reduces all elements to one value; with "
                         "axis= the result depends on the kernels' layout")


def _host_input(info) -> np.ndarray:
    """The input on the host, as the cpu backend folds it (bfloat16 as float32)."""
    host = info.host if info.host is not None else to_host(info)
    return bfloat16_to_float32(host) if is_bfloat16(info.dtype) else host


class _Source:
    """The input on the device for a batched plan (:func:`device_layout`), with
    the :class:`~pyreduce.axes.Strided` description and whether the input's own
    strides gave it (``described``), so that another input with those strides
    is read in place the same way."""

    __slots__ = ("window", "d", "described", "strides")

    def __init__(self, window, d, described, strides=None):
        self.window, self.d, self.described, self.strides = window, d, described, strides


def device_layout(be, info, axes: tuple, stream) -> _Source:
    """The input on the device as a 1-D window and the
    :class:`~pyreduce.axes.Strided` description of the reduction over it (see
    the module docstring), as a :class:`_Source`."""
    ndim = len(info.shape)
    kept = tuple(a for a in range(ndim) if a not in axes)
    perm = kept + axes
    itemsize = info.dtype.itemsize
    last = tuple(range(len(kept), ndim))  # the reduced axes after the permutation
    if info.on_device:
        strides = be.input_strides(info)
        d = None if strides is None else describe(info.shape, strides, itemsize, axes)
        if d is not None:
            return _Source(be.input_span(info, d.off, d.span, stream), d, True, strides)
        flat = be.gather_input(info, perm, stream)
        shape = tuple(info.shape[a] for a in perm)
        return _Source(flat, describe(shape, c_strides(shape, itemsize), itemsize, last), False)
    host = info.host
    d = describe(host.shape, host.strides, itemsize, axes)
    if d is None or d.span > host.size:  # a sliced view: upload only its elements
        host = np.array(host, order="K")
        d = describe(host.shape, host.strides, itemsize, axes)
    if d is None:  # no strided description: rows of the reduced elements
        host = np.ascontiguousarray(host.transpose(perm))
        d = describe(host.shape, host.strides, itemsize, last)
    return _Source(be.upload(span_view(host, d.off, d.span), stream), d, False)


class Batched:
    """A reduction to many values with every decision taken: the backend and, on
    a GPU backend with work to do, the device and the
    :class:`~pyreduce.batchplanner.BatchPlan`. ``run()`` performs it;
    :func:`pyreduce.explain` reads it."""

    def __init__(self, backend, run, device=None, plan=None, monoid=None, repeat=None):
        self.backend, self.run, self.device, self.plan = backend, run, device, plan
        self.monoid = monoid
        #: ``repeat(info, device_result)``: the same call on another input of the
        #: same call shape, without its decisions, or ``callmemo.MISS`` where one
        #: does not hold (:func:`_repeat_runner`); None where a call cannot repeat
        self.repeat = repeat


def prepare_axes(info, monoid: Monoid, axes: tuple, keepdims: bool, initial, backend_name,
                 tuning, stream, device_result: bool, out, raw: bool = False) -> Batched:
    """Plan the reduction of ``axes`` (normalised, not all of them) of the
    inspected input (nothing runs before ``run()``, except a device input's
    gather). ``raw``: ``run()`` returns the accumulators (:func:`reduce_axes_raw`)."""
    if initial is not None:
        initial = cast_value(initial, monoid.dtype, "initial")
    if not raw:
        check_no_finish(monoid)
    be = backends.get(backend_name, on_device=info.on_device)
    stream = be.launch_stream(stream, info)
    shape = info.shape
    result = Result(be, monoid.dtype, result_shape(shape, axes, keepdims), info, out,
                    device_result, stream, raw)
    K = math.prod(shape[a] for a in axes)
    if K == 0:  # NumPy raises here even when there are no outputs
        value = initial if initial is not None else monoid.empty_result()
        return Batched(be, lambda: result.fill(value))
    if info.size == 0:
        return Batched(be, lambda: result.fill(0))
    if be.name == "cpu":
        return Batched(be, lambda: result.host(
            be.reduce_axes(_host_input(info), monoid, axes, initial)))
    device, src, plan = _strided_plan(be, info, monoid, axes, tuning, stream,
                                      initial is not None)
    run = lambda: result.launch(be.executable(plan, monoid, device), src.window, initial)  # noqa: E731
    repeat = None
    if out is None and not raw and info.on_device and src.described:
        repeat = _repeat_runner(be, monoid, plan, device, src, result.shape, initial, stream)
    return Batched(be, run, device, plan, monoid, repeat)


def _strided_plan(be, info, monoid: Monoid, axes: tuple, tuning, stream, initial: bool):
    """``(device, src, plan)``: the device, the input there (a :class:`_Source`
    of :func:`device_layout`) and the batched plan of the reduction of ``axes``
    on a GPU backend."""
    device = be.device(tuning.warp_size)
    src = device_layout(be, info, axes, stream)
    plan = plan_strided(src.d, info.dtype, monoid.dtype, monoid.key, device, tuning, initial,
                        be.alignment(src.window), monoid.map is not None, monoid.commutative)
    return device, src, plan


def _window_of(be, src, stream):
    """``window(info)``: the 1-D window of another device input of a call shape
    (dtype, shape, strides, producer stream: :mod:`pyreduce.callmemo`'s key)
    read in place as ``src`` was, or :data:`~pyreduce.callmemo.MISS` where
    what the key does not hold differs: the thread's device, the input's
    strides (the simulator's arrays have none in the key) or the window's
    alignment (the plan's)."""
    device_id, d, strides = be.device_id(), src.d, src.strides
    align = be.alignment(src.window)

    def window(info):
        if be.device_id() != device_id or be.input_strides(info) != strides:
            return callmemo.MISS
        found = be.input_span(info, d.off, d.span, stream)
        return found if be.alignment(found) == align else callmemo.MISS

    return window


def _repeat_runner(be, monoid: Monoid, plan, device, src, shape: tuple, initial, stream):
    """A runner for :func:`pyreduce.callmemo.remember_runner`: the reduction
    planned for ``src`` on another device input of the same call shape,
    launched without inspecting its layout or planning again."""
    window_of, executable = _window_of(be, src, stream), None

    def runner(info, device_result):
        nonlocal executable
        window = window_of(info)
        if window is callmemo.MISS:
            return window
        if executable is None:
            executable = be.executable(plan, monoid, device)
        result = Result(be, monoid.dtype, shape, info, None, device_result, stream)
        return result.launch(executable, window, initial)

    return runner


def reduce_axes_raw(info, monoid: Monoid, axes: tuple, keepdims: bool, initial, backend_name,
                    tuning, stream) -> np.ndarray:
    """The accumulators of the reduction of ``axes`` (normalised: sorted,
    non-negative, unique; any of them, all or none) of the inspected, unmasked
    input ``info``, unfinished, for reductions that finish them on the host.

    Returns a host NumPy array of the result's shape (NumPy's, with
    ``keepdims``) and dtype ``monoid.dtype``: for a tuple accumulator a record
    array with fields ``f0, f1, ...`` (argmax's ``(value, index)``, the mean's
    ``(count, sum)``, the variance's ``(count, shift, s, q)``), one record per
    lane, ``Monoid.finalize`` not applied. Lane ``m`` folds ``map(k, v)`` for
    its elements ``v`` in C order of the reduced axes, ``k = 0 .. K-1`` their
    positions in the lane, with ``initial`` (cast to ``monoid.dtype``) combined
    once on the left. A reduced extent of 0 gives ``initial``, else the
    identity, else ValueError. A device input is reduced on the device and the
    array copied back. Masked inputs and
    ``where=`` masks go through :func:`pyreduce.masked.reduce` and
    :func:`pyreduce.selection.reduce` with ``raw=True``."""
    if info.mask is not None:
        raise ValueError("reduce_axes_raw takes unmasked inputs: reduce a masked one "
                         "with pyreduce.masked.reduce(..., raw=True)")
    return prepare_axes(info, monoid, axes, keepdims, initial, backend_name, tuning, stream,
                        False, None, raw=True).run()


def reduce_axes_finished(info, monoid: Monoid, axes: tuple, keepdims: bool, dtype, out,
                         device_result: bool, backend_name, tuning, stream, remember=None):
    """A structured reduction of ``axes`` (normalised, not all of them) of the
    inspected, unmasked input ``info``: every lane's accumulator finished by
    ``monoid.finisher`` (:class:`pyreduce.finishers.Finisher`), cast to
    ``dtype`` (None: the finisher's) and placed as every result is
    (:class:`Result`); an array, or a tuple of them (minmax; ``out`` a tuple).

    Where the results go to a device (a device input's, ``device_result=True``,
    a device ``out=``) and a GPU backend reduces, the accumulators never leave
    it: the finishing kernel reads them where the kernels wrote them and writes
    the results in place (:meth:`pyreduce.backends.base.GeneratedBackend.finish`),
    and only a flag comes back, where a lane's emptiness depends on the data
    (the NaN-ignoring statistics); a ``dtype=`` the kernel does not store as
    NumPy casts (see :meth:`~pyreduce.finishers.Finisher.stores`) is cast on
    the host. Otherwise the accumulators come to the host
    (:func:`reduce_axes_raw`) and are finished there. NumPy's warning for an
    empty lane is given once either way; its ValueError (nanargmax of an
    all-NaN lane) comes after the finishing kernel has written the other lanes
    into a device ``out=``. ``remember``: a call shape under which a call that
    reads a device input in place and makes its own results is remembered for
    its repeats (:func:`pyreduce.callmemo.remember_runner`)."""
    fin = monoid.finisher
    be = backends.get(backend_name, on_device=info.on_device)
    on = be.launch_stream(stream, info)
    shape = result_shape(info.shape, axes, keepdims)
    want = fin.dtype if dtype is None else np.dtype(dtype)
    results = [Result(be, want, shape, info, o, device_result, on)
               for o in result_outputs(out, fin.outputs)]
    K = math.prod(info.shape[a] for a in axes)
    if (be.name == "cpu" or K == 0 or info.size == 0 or not fin.stores(want)
            or any(r.buffer is None for r in results)):
        values = fin.array(reduce_axes_raw(info, monoid, axes, keepdims, None, backend_name,
                                           tuning, stream))
        parts = values if fin.outputs > 1 else (values,)
        placed = tuple(r.host(v) for r, v in zip(results, parts))
        return placed if fin.outputs > 1 else placed[0]
    device, src, plan = _strided_plan(be, info, monoid, axes, tuning, on, False)
    count, known = math.prod(shape), _known_flag(fin, K, monoid)
    if _finishes_in_kernel(plan, fin):  # the kernel that writes the outputs finishes them
        executable = be.executable(plan, monoid, device, (_finisher_spec(fin), want))

        def run(window, results):
            executable(window, on, out=results[0].buffer)
            fin.report(known)
            return results[0].placed()
    else:
        executable = be.executable(plan, monoid, device)
        kernel = be.finish_kernel(fin, monoid.dtype, fin.counted)  # looked up once

        def run(window, results):
            _run_finished(be, fin, executable, window, on, [r.buffer for r in results],
                          count, known, kernel)
            users = tuple(r.placed() for r in results)
            return users if fin.outputs > 1 else users[0]

    if remember is not None and out is None and src.described:
        window_of = _window_of(be, src, on)

        def runner(info, device_result):
            window = window_of(info)
            if window is callmemo.MISS:
                return window
            return run(window, [Result(be, want, shape, info, None, device_result, on)
                                for _ in range(fin.outputs)])

        callmemo.remember_runner(remember, runner, monoid)
    return run(src.window, results)


def _finishes_in_kernel(plan, fin) -> bool:
    """Whether the kernel of a rows or columns plan that writes the outputs
    finishes them itself (``BatchSpec.finisher``), saving the finishing
    kernel's launch: a finisher of one result whose flag of an empty lane does
    not depend on the data (the NaN-ignoring statistics read theirs back) and
    whose ``ddof`` is finite (a literal of the kernel's source). minmax's two
    results keep the finishing kernel."""
    return (plan.kind in ("rows", "columns") and fin.outputs == 1 and not fin.counted
            and math.isfinite(fin.ddof))


def _known_flag(fin, K: int, monoid: Monoid):
    """Whether a lane of ``K`` elements is flagged, where that is all it depends
    on; None where it depends on the data (the flag comes back from the GPU)."""
    return None if fin.counted else fin.flagged_at(K, monoid.dtype)


def _run_finished(be, fin, run, src, stream, buffers, count: int, known, kernel=None):
    """``run`` (an :class:`~pyreduce.driver.Executable`) on ``src``, its
    ``count`` accumulators finished by the finishing kernel into the device
    ``buffers`` (one per result), and NumPy's warning or error for an empty
    lane given once: ``known`` (:func:`_known_flag`), or the flag read back."""

    def finish(acc):
        return be.finish(fin, acc, buffers, count, stream, fin.counted, kernel)

    flagged = run(src, stream, then=finish)
    fin.report(flagged if known is None else known)


def one_finished(call, keepdims_shape: tuple, dtype):
    """How the one value of a structured reduction is finished on the device:
    ``launch(info, flat, device_result)`` for every input of ``call``'s call
    shape (``call``: the :class:`~pyreduce.prepared.Prepared` of a non-empty,
    unmasked input on a GPU backend; ``flat``: the input's flat view there),
    which reduces the whole input by its 1-D plan and finishes the one
    accumulator by the finishing kernel straight into a new device array of
    the input's library of ``keepdims_shape`` (a pair of them for minmax),
    with no wait for the GPU unless the flag of an empty lane depends on the
    data; with ``device_result`` False, the one value read back as a NumPy
    scalar (:data:`~pyreduce.callmemo.MISS` for a pair, and where the flag
    comes back: the host finishes those from one read). Every decision is
    taken here, once: a call makes the results and launches
    (:func:`pyreduce.callmemo.guarded` makes it a remembered runner).
    ``dtype`` (None: the finisher's) must be one the finishing kernel stores
    (:meth:`~pyreduce.finishers.Finisher.stores`)."""
    monoid, be, stream = call.monoid, call.backend, call.stream
    fin = monoid.finisher
    want = fin.dtype if dtype is None else np.dtype(dtype)
    known = _known_flag(fin, call.info.size, monoid)
    if be.finishes(call.plan, fin):
        return _finished_in_the_last_launch(call, keepdims_shape, want, known)
    run = be.executable(call.plan, monoid, call.device)
    kernel = be.finish_kernel(fin, monoid.dtype, fin.counted)

    def launch(info, flat, device_result):
        if not device_result and not fin.read_alone:
            return callmemo.MISS
        made = [be.new_result(want, stream, info, keepdims_shape) for _ in range(fin.outputs)]
        _run_finished(be, fin, run, flat, stream, [m[1] for m in made], 1, known, kernel)
        if not device_result:
            return be.read_value(made[0][1], stream)
        users = tuple(m[0] for m in made)
        return users if fin.outputs > 1 else users[0]

    return launch


def _finished_in_the_last_launch(call, keepdims_shape: tuple, want: np.dtype, known):
    """:func:`one_finished`'s launch where the plan's last kernel finishes the
    value itself (:meth:`pyreduce.backends.base.GeneratedBackend.finishes`): one
    launch fewer, the results written by that kernel into a new device array
    (for two results, minmax's, one of two elements, whose halves are
    returned; with ``device_result`` False, the one value read back from the
    workspace's result slot, or MISS for a pair)."""
    monoid, be, stream = call.monoid, call.backend, call.stream
    fin = monoid.finisher
    run = be.executable(call.plan, monoid, call.device, (_finisher_spec(fin), want))
    pair = fin.outputs > 1

    def launch(info, flat, device_result):
        if not device_result:
            if pair:
                return callmemo.MISS
            value = run(flat, stream)  # into the workspace's slot, then read back
            fin.report(known)
            return value
        user, buffer = be.new_result(want, stream, info,
                                     (fin.outputs,) if pair else keepdims_shape)
        run(flat, stream, out=buffer)
        fin.report(known)
        return parts(user, fin.outputs, keepdims_shape) if pair else user

    return launch


def _finisher_spec(fin) -> tuple:
    """``KernelSpec.finisher`` of a kernel that finishes by ``fin``."""
    return (fin.key, fin.ddof, fin.outputs)


def one_finished_runner(call, keepdims_shape: tuple, dtype, launch):
    """The remembered runner (:mod:`pyreduce.callmemo`) of :func:`one_finished`'s
    ``launch`` for ``call``'s call shape: the backend's express runner where
    the plan is one launch that finishes the value
    (:func:`pyreduce.backends.express.express`), else ``launch`` after the
    checks of :func:`pyreduce.callmemo.guarded`."""
    be, monoid = call.backend, call.monoid
    fin = monoid.finisher
    device = be.device_id()
    if be.finishes(call.plan, fin):
        want = fin.dtype if dtype is None else np.dtype(dtype)
        known = _known_flag(fin, call.info.size, monoid)
        report = (lambda: fin.report(known)) if known else None
        runner = be.express(call, device, (_finisher_spec(fin), want, keepdims_shape, report))
        if runner is not None:
            return runner
    return callmemo.guarded(be, call.stream, device, be.alignment(call.flat), launch)


def result_outputs(out, count: int) -> tuple:
    """``out=`` as one entry per result (``count``: minmax has two, and its
    ``out`` is a tuple of two arrays); Nones where it is not given."""
    outs = out if isinstance(out, tuple) else (out,) * count if out is None else (out,)
    if len(outs) != count:
        raise ValueError(f"out= must be a tuple of {count} arrays, one per result")
    return outs


def check_no_finish(monoid: Monoid) -> None:
    """A ValueError for an operator whose accumulators are finished on the host
    (argmax's index, mean's mean): its lanes come from :func:`reduce_axes_raw`."""
    if monoid.finalize is not None:
        raise ValueError(f"{monoid.name} finishes its accumulators on the host: along "
                         f"axes, reduce them with pyreduce.manyvalues.reduce_axes_raw and "
                         f"finish them")


def reduce_segments(info, offsets, monoid: Monoid, initial, backend_name, tuning, stream,
                    device_result: bool, out, raw: bool = False):
    """``x[offsets[i] : offsets[i + 1]]`` reduced for every ``i`` (see
    :func:`pyreduce.segmented_reduce`); ``raw``: the accumulators, as
    :func:`reduce_axes_raw` returns them."""
    if not raw:
        check_no_finish(monoid)
    if len(info.shape) != 1:
        raise ValueError(f"segmented_reduce needs a 1-D x, got shape {tuple(info.shape)}")
    if initial is not None:
        initial = cast_value(initial, monoid.dtype, "initial")
    n = info.size
    off_info = inspect(offsets)
    if len(off_info.shape) != 1 or off_info.size < 1:
        raise ValueError(f"offsets must be a 1-D array of S + 1 segment boundaries "
                         f"(at least one), got shape {tuple(off_info.shape)}")
    has_identity = monoid.identity is not None and monoid.empty_ok
    empty = initial if initial is not None else monoid.identity if has_identity else None
    host_offsets = _checked_offsets(off_info, n, empty, monoid)
    be = backends.get(backend_name, on_device=info.on_device or off_info.on_device)
    stream = be.launch_stream(stream, info)
    S = off_info.size - 1
    result = Result(be, monoid.dtype, (S,), info, out, device_result, stream, raw)
    if S == 0:
        return result.fill(0)
    if be.name == "cpu":
        if host_offsets is None:
            host_offsets = validate_offsets(to_host(off_info), n)
        return result.host(be.reduce_segments(_host_input(info), host_offsets, monoid,
                                              initial, empty))
    if n == 0:  # every segment is empty
        return result.fill(empty)
    device = be.device(tuning.warp_size)
    plan = plan_segments(S, n, info.dtype, monoid.dtype, monoid.key, device, tuning,
                         initial is not None, monoid.map is not None)
    flat = be.flat_input(info, stream)
    device_offsets = be.offsets_input(host_offsets if host_offsets is not None
                                      else off_info.device, stream)
    return result.launch(be.executable(plan, monoid, device), flat, empty, device_offsets)


def _checked_offsets(off_info, n: int, empty, monoid: Monoid) -> np.ndarray | None:
    """The offsets on the host, validated, where they are there or must be
    looked at (an empty segment would have no value: ``empty`` is None); None
    for device offsets used as they are."""
    if not off_info.on_device:
        host_offsets = validate_offsets(off_info.host, n)
    elif off_info.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"device offsets must be int32 or int64, got {off_info.dtype}")
    elif empty is None:
        host_offsets = validate_offsets(to_host(off_info), n)
    else:
        return None
    if empty is None:
        lengths = np.diff(host_offsets)
        if (lengths == 0).any():
            i = int(np.flatnonzero(lengths == 0)[0])
            raise ValueError(f"segment {i} is empty and op {monoid.name!r} has no identity; "
                             "pass identity= (or initial=) to define its result")
    return host_offsets


def validate_offsets(offsets: np.ndarray, n: int) -> np.ndarray:
    """Host ``offsets`` as int64, checked: 1-D integers, at least one, within
    ``[0, n]``, never decreasing. ValueError names the first that is not."""
    if offsets.ndim != 1 or offsets.size < 1:
        raise ValueError(f"offsets must be a 1-D array of S + 1 segment boundaries "
                         f"(at least one), got shape {offsets.shape}")
    if offsets.dtype.kind not in "iu":
        raise TypeError(f"offsets must be integers, got dtype {offsets.dtype}")
    if offsets.dtype.kind == "u" and offsets.size and offsets.max() > np.iinfo(np.int64).max:
        raise ValueError("offsets do not fit in int64")
    off = offsets.astype(np.int64)
    bad = np.flatnonzero((off < 0) | (off > n))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"offsets must lie in [0, len(x)] = [0, {n}]: offsets[{i}] = {off[i]}")
    bad = np.flatnonzero(off[1:] < off[:-1])
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"offsets must not decrease: offsets[{i}] = {off[i]} > "
                         f"offsets[{i + 1}] = {off[i + 1]}")
    return off
