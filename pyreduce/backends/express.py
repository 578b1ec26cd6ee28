"""Repeat calls on a GPU in one step.

A repeat of a plain call (:mod:`pyreduce.callmemo`) whose plan has no initial
value (one launch, the fixed tree of ``deterministic=True`` among them, or the
two of a two-pass plan) runs here, without the
general path's layers (:meth:`pyreduce.prepared.Prepared.run_on`,
:class:`pyreduce.driver.Executable`, the backend's ``flat_input``).
The call shape fixes the input's dtype, shape and strides, so its flat view
differs from the remembered call's only in its address: a repeat reads the
address, checks its alignment (the plan depends on it), takes a prepared
workspace of its stream, reserves the result's memory (a device array's from
:mod:`pyreduce.backends.results`, or the workspace's mapped result slot), and
launches each kernel through one compiled call
(:func:`pyreduce.backends.fastpath.launch`); the first also checks the
thread's device, the last of the remembered decisions. A device result's
array object is made after the launches, while the kernels run.
Where the device is another, it launches nothing and the call takes the full
path.
"""

from __future__ import annotations

from ..driver import PER_THREAD_STREAM
from ..dtypes import storage
from ..planner import address_alignment
from ..callmemo import MISS
from . import fastpath
from .fastpath import (
    ANY_DEVICE, WRONG_DEVICE, DeviceView, check_driver, read_scalar, sync_producer,
)
from .results import maker, parts

__all__ = ["Express", "express", "SPARE_BYTES"]


class Express:
    """The remembered call of one call shape: ``(info, device_result)`` -> the
    result, or :data:`pyreduce.callmemo.MISS` when it cannot be made here
    (``device_result`` None, True or False, as the full path takes it)."""

    __slots__ = ("exe", "pool", "stream", "device", "dtype", "finish", "new", "follows", "size",
                 "stride", "align", "key", "handles", "shape", "parts", "report", "spare")

    def __init__(self, exe, monoid, kind: str, flat, align: int, stream: int, device: int,
                 follows: bool = False, finished=None):
        self.exe, self.stream, self.device = exe, stream, device
        # a result whose memory comes only with its array object (a PyTorch
        # tensor's) is made after an earlier call's launch where the kernel
        # outlasts the host's work after its own (SPARE_BYTES;
        # pyreduce.backends.results.TorchResults)
        self.spare = flat.size * flat.dtype.itemsize >= SPARE_BYTES
        self.pool = exe.pool(stream)
        # what a device result is made as: of ``shape``, cut into ``parts`` of
        # that shape where the kernel writes several results (None: it is one)
        self.shape, self.parts, self.report = (), None, None
        if finished is None:
            self.dtype, self.finish = monoid.dtype, monoid.result
            # an op finished on the host has no device result: the full path says so
            self.new = None if monoid.finalize is not None else maker(kind, monoid.dtype)
        else:  # the kernel finishes a structured reduction (exe.finished)
            want, self.shape, self.report = finished
            self.dtype, self.finish, self.new = want, None, maker(kind, want)
            outputs = monoid.finisher.outputs
            if outputs > 1:
                self.shape, self.parts = (outputs,), (self.shape, outputs)
            else:  # a host value: the one finished value, read from the result slot
                self.finish = _finished
        # device_result=None: where the full path puts it
        # (:meth:`pyreduce.prepared.Prepared.follows`; the call shape fixes it)
        self.follows = follows
        # what the call shape fixes: the flat view's length, stride and kernel
        self.size, self.stride, self.key = flat.size, flat.stride, (flat.dtype.char, flat.layout)
        self.align = align  # 0: not contiguous, nothing to check
        self.handles = None  # the compiled kernels' (one a launch), known after the first call

    def __call__(self, info, device_result):
        fields = info.fields
        ptr = fields.ptr
        if self.align and address_alignment(ptr, True) != self.align:
            return MISS  # planned for another alignment
        sync_producer(fields, self.stream)
        if device_result is None:
            device_result = self.follows
        if device_result:
            if self.new is None:
                return MISS
            # the result's memory now, its array object once the kernels are queued
            # (what comes before the launch is what a ready result waits for)
            token, out = self.new.reserve(self.shape, self.dtype, self.device, self.stream,
                                          info.device, fields.stream if self.spare else None)
        elif self.finish is None:  # it finishes into a device result only
            return MISS
        # the per-thread default stream is another stream in each thread: its
        # pool is the calling thread's (pyreduce.driver.stream_key)
        pool = self.pool if self.stream != PER_THREAD_STREAM else self.exe.pool(self.stream)
        try:
            ws = pool.pop()
        except IndexError:
            ws = self.exe.workspace()
        try:
            slot = ws.buffers["result"]
            steps = ws.steps
            if not device_result:
                out = slot.ptr
            if self.handles is None:  # the first call compiles (or looks up) the kernels
                flat = DeviceView(ptr, self.size, self.stride, storage(fields.dtype))
                self.handles = [step.handle(flat, slot, self.key) for step in steps]
            # the first launch checks the device (nothing launched if it is another)
            device = self.device
            for step, handle in zip(steps, self.handles):
                err = fastpath.launch(step.values, step.input_at, step.output_at, self.size,
                                      ptr, self.stride, out, device, handle, step.grid,
                                      step.block, self.stream, step.params)
                device = ANY_DEVICE
                if err:
                    if err == WRONG_DEVICE:
                        return MISS
                    check_driver(err)
            if device_result:
                user = self.new.array(token, self.shape, self.dtype, out)
                if self.report is not None:
                    self.report()
                if self.parts is not None:
                    shape, count = self.parts
                    return parts(user, count, shape)
                return user
            value = self.finish(read_scalar(slot, self.stream))
            if self.report is not None:  # a finished value's warning, as on the device
                self.report()
            return value
        finally:
            pool.append(ws)


#: The input bytes from which a repeat's PyTorch result is the tensor the call
#: before made after its launch (:class:`pyreduce.backends.results.TorchResults`):
#: from there the kernel outlasts the host's work after the launch. On an H100
#: (2026-12-07, ``bench/torch_results.py``, ``docs/performance/torch-spare-h100.txt``:
#: tensors, each call waited for, timed by CUDA events, the two ways taking
#: turns in three rounds) a call waited for took 1.7-2.2 us less at 8 and 16
#: MiB (bfloat16 ``sum`` of 2**22 25.1 us against 26.8, PyTorch 23.6), 2.2-4.2
#: less at 32 and 64 MiB (bfloat16 ``sum`` of 2**24 28.1 against 30.3, PyTorch
#: 27.9) but for bfloat16 ``mean`` of 2**25 (59.9 against 54.7, past the L2,
#: where the rule before took the spare too); at 2 and 4 MiB between 0.3 more
#: and 2.0 less, and 0.5-2.4 more at 8 and 16 KiB, where the kernel ends before
#: the host's work does. (The rule before took the spare past the L2 only.)
SPARE_BYTES = 2**23


def _finished(value):
    """A value the kernel finished: as it is read back."""
    return value


def express(backend, call, device: int, finished=None) -> Express | None:
    """The :class:`Express` of the :class:`~pyreduce.prepared.Prepared` ``call`` on
    ``device``, or None where its plan has an initial value, or its flat input
    is not a view of the input's own memory (an N-D array that is not
    C-contiguous is gathered into a copy on every call). ``finished``:
    ``(KernelSpec.finisher, result dtype, result shape, report)``, the kernel
    finishing a structured reduction into a device array of that dtype and
    shape, ``report()`` giving the finisher's warning (or None)."""
    # a fixed tree (deterministic=True) is a one-launch plan like any other: its
    # launch and grid are the plan's, so a repeat here gives its bits
    if call.initial is not None:
        return None
    if call.flat.owner is not call.info.device:
        return None
    exe = backend.executable(call.plan, call.monoid, call.device,
                             None if finished is None else finished[:2])
    sched = exe.schedule
    if sched.initial is not None or (sched.outputs is not None and finished is None):
        return None
    return Express(exe, call.monoid, call.info.kind, call.flat, backend.alignment(call.flat),
                   call.stream, device, finished is not None or call.follows(call.info),
                   None if finished is None else finished[1:])
