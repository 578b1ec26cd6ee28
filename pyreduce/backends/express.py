"""Repeat calls on a GPU in one step.

A repeat of a plain call (:mod:`pyreduce.repeat`) whose plan is a single launch
with no initial value (the single-pass kernel, the default at every size) runs
here, without the general path's layers (:meth:`pyreduce.api.Prepared.run_on`,
:class:`pyreduce.driver.Executable`). It takes a prepared workspace of its
stream, makes the result (a device array from :mod:`pyreduce.backends.results`,
or the workspace's mapped result slot), and launches through one compiled call
(:func:`pyreduce.backends.fastpath.launch`) that also checks the thread's
device, the last of the remembered decisions. Where the device is another, it
launches nothing and the call takes the full path.
"""

from __future__ import annotations

from ..repeat import MISS
from .fastpath import read_scalar
from .results import maker

__all__ = ["Express", "express"]


class Express:
    """The remembered call of one call shape: ``(info, flat, device_result)`` ->
    the result, or :data:`pyreduce.repeat.MISS` when it cannot be made here."""

    __slots__ = ("exe", "pool", "stream", "device", "dtype", "finish", "new")

    def __init__(self, exe, monoid, kind: str, stream: int, device: int):
        self.exe, self.stream, self.device = exe, stream, device
        self.pool = exe.pool(stream)
        self.dtype, self.finish = monoid.dtype, monoid.result
        # an op finished on the host has no device result: the full path says so
        self.new = None if monoid.finalize is not None else maker(kind, monoid.dtype)

    def __call__(self, info, flat, device_result):
        if device_result:
            if self.new is None:
                return MISS
            user, ptr = self.new((), self.dtype, self.device, self.stream, info.device)
        pool = self.pool
        try:
            ws = pool.pop()
        except IndexError:
            ws = self.exe.workspace()
        try:
            slot = ws.buffers["result"]
            if not ws.steps[0].launch_on(flat, ptr if device_result else slot.ptr, slot,
                                         self.stream, self.device):
                return MISS
            if device_result:
                return user
            return self.finish(read_scalar(slot, self.stream))
        finally:
            pool.append(ws)


def express(backend, call, device: int) -> Express | None:
    """The :class:`Express` of the :class:`~pyreduce.api.Prepared` ``call`` on
    ``device``, or None where its plan is not one launch without an initial value."""
    if call.initial is not None or call.fixed_tree:
        return None
    exe = backend.executable(call.plan, call.monoid, call.device)
    sched = exe.schedule
    if len(sched.steps) != 1 or sched.outputs is not None or sched.initial is not None:
        return None
    return Express(exe, call.monoid, call.info.kind, call.stream, device)
