"""Repeat calls: a reduction's decisions remembered per call shape.

Before a call on a GPU backend launches anything it settles the operator
(:func:`~pyreduce.ops.as_monoid`), the backend, the device, the stream and the
plan: several microseconds of Python, a good part of a small reduction's call.
Programs make the same call on new arrays of one shape over and over, so the
:class:`~pyreduce.prepared.Prepared` call is remembered per *call shape*: the operator,
identity, initial value, accumulator dtype, backend and stream asked for, and the
input's kind, dtype, shape, strides, producer stream and GPU. A repeat reads the new
array's address, checks that the remembered decisions still hold (the operator's
bindings, as :func:`~pyreduce.ops.as_monoid` checks them; the current device; the
address's alignment, which the plan depends on) and launches. Where one does not
hold, the call takes the full path, which remembers its own decisions instead.
On the ``cuda`` backend a repeat whose plan is one launch runs in one step
(:mod:`pyreduce.backends.express`), which checks the device as it launches.

Three kinds of call come here. The plain call: a reduction to one value on a GPU
backend, with no ``axis``, ``keepdims``, ``out``, ``map`` or ``check``; a tuning
(``variant=``, ``tuning=``) or ``deterministic=True`` is added to its call shape
(:func:`pyreduce.general._repeat`), so a tuned call finds only the decisions of
calls with the same tuning; a NumPy input's plain call that the cpu backend reduced is
remembered too, under its own key (:func:`host_key`: dtype, shape, strides), and a
repeat folds the new array at once. The same call along some axes of a device input
that is read in place (:func:`pyreduce.manyvalues.prepare_axes`), whose call shape
adds the ``axis`` as given and ``keepdims``, and whose runner checks the input's
strides too (the simulator's arrays have none in the key). And a structured
reduction's one value finished on the device (:func:`pyreduce.along.one_value`),
whose call shape adds the result's shape (``keepdims``), its ``dtype=`` and the
tuning, under a key of its own (:func:`remember_runner`, :func:`guarded`). The memo
holds its keys (a weak reference to a user's operator, a stream object) and their
decisions for at most :data:`LIMIT` call shapes, the least recently used dropped
first, an operator's as soon as it is garbage; it is emptied whenever plans are
forgotten (:func:`pyreduce.cache_clear`, new autotuner choices). Identity and
initial values are told apart by their bits, so ``initial=-0.0`` is not
``initial=0.0``.
"""

from __future__ import annotations

from .cache import Memo
from .opkey import bindings, op_ref, same, value_key
from .planner import on_clear_plans

__all__ = ["key", "host_key", "run", "remember", "remember_cpu", "remember_runner", "guarded",
           "clear", "LIMIT", "MISS"]

#: Call shapes remembered at most (short-lived lambdas make new ones).
LIMIT = 256

#: :func:`run`'s result when there are no remembered decisions that hold.
MISS = object()

_MEMO = Memo("repeat calls", LIMIT)
#: host inputs' call shapes (:func:`host_key`), kept apart so that a loop over
#: arrays of many shapes does not push the device calls' decisions out
_HOST_MEMO = Memo("repeat host calls", LIMIT)


def _memo(k) -> Memo:
    return _HOST_MEMO if k[0] == "host" else _MEMO


class _Entry:
    __slots__ = ("run", "bound")

    def __init__(self, run, bound):
        self.run, self.bound = run, bound


def key(info, op, identity, initial, dtype, backend, stream):
    """The call shape of a plain call, or None for an input on the host. (A key
    with an unhashable part is never found nor remembered.)"""
    if info.device is None:
        return None
    fields = info.fields  # None: the simulator's arrays
    return (op_ref(op), _values(identity, initial), dtype, backend, stream, info.kind,
            info.dtype, info.shape,
            None if fields is None else (fields.strides, fields.stream, fields.device))


def host_key(info, op, identity, initial, dtype, backend):
    """The call shape of a plain call of an unmasked NumPy input on ``auto`` or
    ``cpu``: the operator, values and dtype as :func:`key` has them, and the
    array's dtype, shape and strides; None for any other input. Only a call
    the cpu backend reduced is remembered under it (``cpu``, or ``auto`` with
    no GPU or with a cost model that chose the cpu backend: its repeat checks
    that the model and the thread's GPU are unchanged, else the model decides
    again)."""
    host = info.host
    if host is None or info.mask is not None or backend not in ("auto", "cpu"):
        return None
    return ("host", op_ref(op), _values(identity, initial), dtype, backend, info.dtype,
            info.shape, host.strides)


def _values(identity, initial) -> tuple:
    """The identity and initial value of a key, told apart by their bits (a
    value of another kind makes an unhashable key, never remembered)."""
    try:
        return (None if identity is None else value_key(identity),
                None if initial is None else value_key(initial))
    except TypeError:
        return ([],)


def run(k, info, op, device_result):
    """The result of call shape ``k``'s remembered decisions on this input, or
    :data:`MISS` where there are none or one does not hold."""
    try:
        entry = _memo(k).get(k)
    except TypeError:  # an unhashable argument: no memo
        return MISS
    if entry is None:
        return MISS
    if entry.bound and not same(entry.bound, bindings(op)):
        return MISS
    # the address's alignment and the device are checked by the runner: the
    # backend's express one (which checks the device as it launches) or run_on's
    return entry.run(info, device_result)


def remember(k, call, op) -> None:
    """Remember ``call`` (a :class:`~pyreduce.prepared.Prepared` with a plan) for ``k``."""
    be = call.backend
    device = be.device_id()
    if (runner := be.express(call, device)) is None:
        detached = call.detached()
        runner = guarded(be, call.stream, device, be.alignment(call.flat), detached.run_on)
    remember_runner(k, runner, op)


def remember_cpu(k, call, op, holds=None) -> None:
    """Remember ``call`` (a :class:`~pyreduce.prepared.Prepared` the cpu backend
    runs, of a host input) for ``k``: a repeat folds the new array with the
    same operator, without deciding anything again. ``holds``: where the cost
    model chose the cpu backend, the check that it would choose it again
    (:func:`pyreduce.hostroute.unchanged`)."""
    detached = call.detached()
    # the one NumPy call of an input too small to split, without run_on's decisions
    fold = call.backend.plain_fold(call.monoid, call.initial, call.fixed_tree, call.info)

    def runner(info, device_result):
        if holds is not None and not holds():
            return MISS
        if fold is not None and not device_result:
            value = fold(info.host)
            if value is not None:
                return value
        return detached.run_on(info, None, device_result)

    remember_runner(k, runner, op)


def remember_runner(k, runner, op) -> None:
    """Remember ``runner(info, device_result)`` for ``k``: it returns the call's
    result, or :data:`MISS` where one of its decisions does not hold for ``info``."""
    try:
        hash(k)
    except TypeError:  # an unhashable argument: no memo
        return
    bound = bindings(op)
    _memo(k).put(k, _Entry(runner, bound), owner=op if bound else None)


def guarded(be, stream, device: int, align: int, run):
    """A runner for :func:`remember_runner`: ``run(info, flat, device_result)``,
    ``flat`` the input's flat view on ``be`` (read on ``stream``), where the
    thread's device is still ``device`` and that view has the alignment
    ``align`` (the plan's), else :data:`MISS`."""

    def runner(info, device_result):
        if be.device_id() != device:
            return MISS
        flat = be.flat_input(info, stream)
        if be.alignment(flat) != align:
            return MISS
        return run(info, flat, device_result)

    return runner


def clear() -> None:
    """Forget every remembered call."""
    _MEMO.clear()
    _HOST_MEMO.clear()


on_clear_plans(clear)
