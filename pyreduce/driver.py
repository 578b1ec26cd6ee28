"""Running a :class:`~pyreduce.planner.Plan` on a device backend.

A plan is turned once into a :class:`Schedule`: the scratch buffers it needs and
the launches it makes, each with its arguments. The first pass launches
``plan.grid`` blocks; each writes its partial into library-owned scratch, in
block order. What follows depends on the layout: ``two_pass`` reduces the
partials with one block, ``multi_pass`` repeats passes of one tile per block until
one value is left, and a ``single_pass`` kernel's last block finishes by itself.
An ``initial`` value is placed in front of the first partials, so it is combined
exactly once, on the left, on the device: ``op(initial, op(p0, p1, ...))``, which
is what ``functools.reduce(op, x, initial)`` computes; a fixed tree
(``deterministic=True``, single-pass) combines it after the tree's root
instead, in its last block. The input is only ever read.

Per call only the placeholders change: the input, the output (the caller's
buffer, or the workspace's result slot) and, for segmented reductions, the
offsets. Everything else (kernels, grids, scratch) is fixed for a plan, so an
:class:`Executable` holds the kernels and a pool of *workspaces*: the scratch of
one call, with each launch prepared against it by the backend
(``backend.prepare``). A call checks a workspace out of the pool of its stream,
launches, and puts it back. Work on one stream runs in order, so a workspace put
back after its launches were enqueued is safe to reuse on that stream;
concurrent calls never share one (``list.pop``/``append`` are atomic).
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np

from .spec import KernelSpec

__all__ = ["INPUT", "OUTPUT", "OFFSETS", "Ref", "Step", "Schedule", "schedule", "Executable"]

#: Argument placeholders for the call's input array, its result buffer and the
#: segment offsets of a segmented reduction.
INPUT, OUTPUT, OFFSETS = "input", "output", "offsets"

#: Streams whose idle workspaces an :class:`Executable` keeps: a program that
#: makes a stream per task leaves the oldest ones' workspaces to be freed.
POOL_STREAMS = 16


@dataclasses.dataclass(frozen=True)
class Ref:
    """``buffer[start:stop]`` of a workspace."""

    buffer: str
    start: int
    stop: int


@dataclasses.dataclass(frozen=True)
class Step:
    """One launch: ``kernel(spec)[grid, spec.block](*args)``; an argument is
    :data:`INPUT`, :data:`OUTPUT`, :data:`OFFSETS`, a :class:`Ref` or an int.
    ``spec`` is a ``KernelSpec`` or a ``BatchSpec``."""

    spec: KernelSpec
    grid: int
    args: tuple


@dataclasses.dataclass(frozen=True)
class Schedule:
    """``buffers``: name -> (elements, dtype, zeroed) of each scratch buffer.
    ``initial``: where an initial value goes (None without one). ``outputs``:
    None for a reduction to one value (read back as a scalar), else the number
    of elements the last step writes to :data:`OUTPUT` (read back as an array)."""

    buffers: tuple
    steps: tuple
    initial: Ref | None
    outputs: int | None = None


def schedule(plan, finisher=None) -> Schedule:
    """The launches and scratch of ``plan`` (see the module docstring). Made once
    per plan and backend, by its :class:`Executable`, which keeps it.
    ``finisher``: the last launch finishes the reduction
    (``KernelSpec.finisher``, whose variant must be able to), writing its
    ``outputs`` results to :data:`OUTPUT` instead of the accumulator."""
    if finisher is not None:
        found = schedule(plan)
        *first, last = found.steps
        outputs = finisher[2]
        last = dataclasses.replace(last, spec=dataclasses.replace(last.spec, finisher=finisher))
        return dataclasses.replace(found, steps=(*first, last),
                                   outputs=None if outputs == 1 else outputs)
    spec, acc, head = plan.spec, plan.spec.acc_dtype, plan.head
    # a fixed tree (pyreduce.deterministic, single-pass) must not depend on the
    # grid, so its head value is not among its leaves: its last block combines
    # it with the root
    if plan.fixed_tree and plan.layout != "single_pass":
        raise ValueError("a fixed tree is laid out in one pass")
    initial = Ref("partials", 0, 1) if head else None
    if plan.layout == "single_pass":
        buffers = (("partials", plan.grid + head, acc, False), ("ticket", 1, np.int32, True))
        args = (INPUT, plan.n, plan.chunk, OUTPUT, Ref("partials", 0, plan.grid + head), head,
                Ref("ticket", 0, 1))
        return Schedule(buffers, (Step(spec, plan.grid, args),), initial)
    steps, src, count, grid, chunk = [], INPUT, plan.n, plan.grid, plan.chunk
    sizes: dict = {}  # scratch buffer -> elements; passes alternate between two
    dst = "partials"
    while grid > 1 or head:
        sizes[dst] = max(sizes.get(dst, 0), grid + head)
        steps.append(Step(spec, grid, (src, count, chunk, Ref(dst, head, grid + head))))
        spec, src, count, head = plan.finish, Ref(dst, 0, grid + head), grid + head, 0
        dst = "partials2" if dst == "partials" else "partials"
        tiles = -(-count // spec.tile)
        grid = 1 if plan.layout == "two_pass" else tiles
        chunk = tiles * spec.tile if plan.layout == "two_pass" else spec.tile
    steps.append(Step(spec, 1, (src, count, chunk, OUTPUT)))
    buffers = tuple((name, size, acc, False) for name, size in sizes.items())
    return Schedule(buffers, tuple(steps), initial)


class Executable:
    """A plan's kernels and its pools of prepared workspaces, for one backend. A
    plan either knows its schedule (``plan.schedule``: the batched reductions of
    :mod:`pyreduce.batchplanner`) or is a 1-D :class:`~pyreduce.planner.Plan`, laid out
    by :func:`schedule`."""

    def __init__(self, backend, plan, monoid, device, finished=None):
        self.backend = backend
        self.plan = plan
        #: ``(KernelSpec.finisher, result dtype)`` where the last launch finishes
        #: a structured reduction into results of that dtype; else None
        self.finished = finished
        batched = getattr(plan, "schedule", None)
        if batched is not None and finished is not None:  # the last step finishes
            last = batched.steps[-1]
            last = dataclasses.replace(last, spec=dataclasses.replace(
                last.spec, finisher=finished[0]))
            batched = dataclasses.replace(batched, steps=batched.steps[:-1] + (last,))
        self.schedule = batched or schedule(plan, None if finished is None else finished[0])
        ref = self.schedule.initial
        # Where no kernel writes the initial value's buffer, a value written once
        # stays: a workspace rewrites it only when the call's value differs (a
        # segmented reduction passes its constant identity on every call).
        self._initial_kept = ref is not None and all(
            a == ref or not (isinstance(a, Ref) and a.buffer == ref.buffer)
            for step in self.schedule.steps for a in step.args
        )
        self.kernels = {step.spec: backend.kernel(step.spec, monoid, device)
                        for step in self.schedule.steps}
        self._pools: dict = {}

    def pool(self, stream) -> list:
        """The prepared workspaces not in use on ``stream``: a call pops one (or
        makes one, :meth:`workspace`) and appends it when its launches are queued."""
        key = stream_key(stream)
        pool = self._pools.get(key)
        if pool is None:
            pools = self._pools
            pool = pools.setdefault(key, [])
            if len(pools) > POOL_STREAMS:
                try:  # the oldest stream's pool; a caller holding it keeps it
                    del pools[next(iter(pools))]
                except (KeyError, RuntimeError):  # another thread changed the dict
                    pass
        return pool

    def workspace(self) -> "Workspace":
        """A new workspace: the plan's scratch, each launch prepared against it."""
        be = self.backend
        buffers = {name: be.allocate(count, np.dtype(dt), zeroed)
                   for name, count, dt, zeroed in self.schedule.buffers}
        outputs = self.schedule.outputs
        result = self.plan.spec.acc_dtype if self.finished is None else self.finished[1]
        buffers["result"] = be.allocate_result(result, 1 if outputs is None else outputs)
        steps = [be.prepare(self.kernels[s.spec], s, buffers) for s in self.schedule.steps]
        return Workspace(buffers, steps)

    def _workspace(self, stream):
        pool = self.pool(stream)
        try:
            return pool, pool.pop()
        except IndexError:
            return pool, self.workspace()

    def __call__(self, flat, stream, initial=None, out=None, offsets=None, then=None):
        """Reduce the flat device array ``flat``: into ``out`` (a device buffer of
        the plan's outputs) if given, else return the value as a NumPy scalar (an
        array of ``schedule.outputs`` elements for a batched plan). ``offsets``
        fills :data:`OFFSETS`. ``then``: nothing is read back; ``then(buffer)``
        is called with the device buffer of the results (the workspace's, or
        ``out``) while the workspace is held, to queue more work on ``stream``
        that reads it (a finishing kernel), and its value is returned."""
        be = self.backend
        pool = ws = None
        with be.launch_context(self.plan.spec.warp):
            try:
                pool, ws = self._workspace(stream)  # may compile: typing errors here
                if initial is not None:
                    ref = self.schedule.initial
                    bits = np.asarray(initial, self.plan.spec.acc_dtype).tobytes()
                    if not (self._initial_kept and ws.initial == bits):
                        be.put_value(be.slice(ws.buffers[ref.buffer], ref.start, ref.stop),
                                     initial, stream)
                        ws.initial = bits
                dst = ws.buffers["result"] if out is None else out
                for step in ws.steps:
                    step(flat, dst, stream, offsets)
                if then is not None:
                    return then(dst)
                if out is not None:
                    return None
                if self.schedule.outputs is None:
                    return be.read_value(dst, stream)
                return be.read_array(dst, self.schedule.outputs, stream)
            except Exception as exc:
                err = typing_error(exc, self.plan.spec)
                if err is not None:
                    raise err from exc
                raise
            finally:
                if ws is not None:
                    pool.append(ws)


@dataclasses.dataclass
class Workspace:
    buffers: dict
    steps: list  # callables (input, output, stream, offsets) from backend.prepare
    initial: bytes | None = None  # the initial value last written, where it is kept


def resolve(backend, args, buffers, flat, out, offsets=None) -> tuple:
    """The launch arguments of a step with its placeholders filled in."""
    found = []
    for a in args:
        if a is INPUT:
            a = flat
        elif a is OUTPUT:
            a = out
        elif a is OFFSETS:
            a = offsets
        elif isinstance(a, Ref):
            a = backend.slice(buffers[a.buffer], a.start, a.stop)
        found.append(a)
    return tuple(found)


#: ``CU_STREAM_PER_THREAD``: the handle of every host thread's own default stream
PER_THREAD_STREAM = 2


def stream_key(stream):
    """A hashable name for the stream: its handle, 0 for the default stream; the
    per-thread default stream's handle (:data:`PER_THREAD_STREAM`, CuPy's under
    ``CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1``) names another stream in each
    thread, so it is named with the thread: work queued by one thread is not
    ordered before another's on it, and a workspace whose scratch a queued
    kernel still reads must not pass to another thread."""
    if not stream:
        return 0
    try:
        handle = int(stream)
    except TypeError:
        return id(stream)
    return (handle, threading.get_ident()) if handle == PER_THREAD_STREAM else handle


def typing_error(exc, spec) -> Exception | None:
    """A TypeError for a Numba typing error (an op that cannot compile), else None."""
    try:
        from numba.core.errors import TypingError
    except ImportError:  # pragma: no cover
        return None
    if isinstance(exc, TypingError):
        return TypeError(
            f"the op could not be compiled for {spec.label}: {str(exc).splitlines()[0]}"
        )
    return None
