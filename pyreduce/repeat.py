"""Repeat calls: a reduction's decisions remembered per call shape.

Before a call on a GPU backend launches anything it settles the operator
(:func:`~pyreduce.ops.as_monoid`), the backend, the device, the stream and the
plan: several microseconds of Python, a good part of a small reduction's call.
Programs make the same call on new arrays of one shape over and over, so the
:class:`~pyreduce.api.Prepared` call is remembered per *call shape*: the operator,
identity, initial value, accumulator dtype, backend and stream asked for, and the
input's kind, dtype, shape and producer stream. A repeat reads the new array's
address, checks that the remembered decisions still hold (the operator's
bindings, as :func:`~pyreduce.ops.as_monoid` checks them; the current device; the
address's alignment, which the plan depends on) and launches. Where one does not
hold, the call takes the full path, which remembers its own decisions instead.

Only the plain call comes here: a reduction to one value on a GPU backend, with
no ``axis``, ``keepdims``, ``out``, ``map``, ``check``, ``deterministic`` or
tuning keyword. The memo holds its keys (the operator, a stream object) and is
emptied when it grows past :data:`LIMIT` entries, and whenever plans are
forgotten (:func:`pyreduce.cache_clear`, new autotuner choices).
"""

from __future__ import annotations

from .ops import _bindings, _same
from .planner import on_clear_plans

__all__ = ["key", "lookup", "remember", "clear", "LIMIT"]

#: Entries kept before the memo starts over (call shapes of short-lived lambdas).
LIMIT = 1024

_MEMO: dict = {}


class _Entry:
    __slots__ = ("call", "bound", "align", "device")

    def __init__(self, call, bound, align, device):
        self.call, self.bound, self.align, self.device = call, bound, align, device


def key(info, op, identity, initial, dtype, backend, stream):
    """The call shape of a plain call, or None for an input on the host. (A key
    with an unhashable part is never found nor remembered.)"""
    if info.device is None:
        return None
    fields = info.fields
    return (op, type(identity), identity, type(initial), initial, dtype, backend, stream,
            info.kind, info.dtype, info.shape, None if fields is None else fields.stream)


def lookup(k, info, op):
    """``(call, flat)``: the remembered :class:`~pyreduce.api.Prepared` call for
    call shape ``k`` and this input's flat device array; or None."""
    try:
        entry = _MEMO.get(k)
    except TypeError:  # an unhashable argument: no memo
        return None
    if entry is None:
        return None
    call = entry.call
    be = call.backend
    if entry.bound and not _same(entry.bound, _bindings(op)):
        return None
    if be.device_id() != entry.device:
        return None
    flat = be.flat_input(info, call.stream)
    if be.alignment(flat) != entry.align:
        return None
    return call, flat


def remember(k, call, op) -> None:
    """Remember ``call`` (a :class:`~pyreduce.api.Prepared` with a plan) for ``k``."""
    try:
        hash(k)
    except TypeError:  # an unhashable argument: no memo
        return
    if len(_MEMO) >= LIMIT:
        _MEMO.clear()
    be = call.backend
    _MEMO[k] = _Entry(call.detached(), _bindings(op), be.alignment(call.flat),
                      be.device_id())


def clear() -> None:
    """Forget every remembered call."""
    _MEMO.clear()


on_clear_plans(clear)
