"""Warp intrinsics for numba-cuda's CUDA simulator.

numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``) runs every CUDA thread of a
block as a Python thread but has no warp-level intrinsics: a kernel calling
``cuda.shfl_down_sync`` fails with an AttributeError. :func:`install` adds them,
so the same ``@cuda.jit`` source runs on a GPU and in the simulator unchanged::

    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"   # before numba.cuda is imported
    from pyreduce.backends import simwarp
    simwarp.install()
    with simwarp.warp_size(64):
        kernel[blocks, threads](x, out)

Added to the ``cuda`` a simulated kernel sees: ``shfl_sync``,
``shfl_up_sync``, ``shfl_down_sync``, ``shfl_xor_sync``, ``syncwarp``,
``ballot_sync``, ``all_sync``, ``any_sync``, ``eq_sync``, ``match_any_sync``,
``match_all_sync``, ``activemask``, ``lanemask_lt``, with numba.cuda's
signatures; ``warpsize`` and ``laneid`` follow the configured warp size.

Private simulator internals
---------------------------
This module relies on private parts of ``numba.cuda.simulator.kernel``. That
is why the numba-cuda versions it supports are pinned
(:data:`SUPPORTED_NUMBA_CUDA`) and why :func:`install` checks each assumption
below before changing anything, raising RuntimeError that names what differs:

* ``FakeCUDAKernel.__call__`` looks up the module globals ``FakeCUDAModule``
  (instantiated per launch and injected as ``cuda`` into the kernel's globals)
  and ``BlockManager`` (``BlockManager(f, grid_dim, block_dim, debug)
  .run(grid_point, *args)`` runs one block) at every launch. :func:`install`
  rebinds both names to subclasses. Nothing in site-packages is edited.
* ``BlockThread.__init__(f, manager, blockIdx, threadIdx, debug)`` sets exactly
  the attributes listed in ``_BLOCK_THREAD_ATTRS``; ``BlockThread.run`` calls
  ``super().run()`` and stores a kernel exception in ``self.exception`` as
  ``(exception, traceback)``.
* The kernel API finds its simulated thread with ``threading.current_thread()``.

Design
------
*One meeting mechanism.* Everything that makes threads wait for each other is
a meeting point (:class:`_Meeting`): a warp intrinsic is a meeting of the lanes
named in its mask, ``syncthreads`` (and ``syncthreads_count/_and/_or``) a
meeting of every live thread of the block. The intrinsics differ only in a
small function that turns what the participants brought into each one's result
(:data:`_KINDS`). As with PTX ``shfl.sync``, ``bar.warp.sync`` and
``vote.sync``, nobody leaves before every participant has arrived, and each
lane's warp calls are matched in program order.

*Turn taking.* The replacement BlockManager does not busy-poll like the stock
one. Exactly one simulated thread runs at a time; when it waits in a meeting or
exits, it hands the turn to the next runnable thread (a FIFO), waking that one
thread only. The last thread to arrive at a warp meeting fills in every
participant's result, makes them runnable, and keeps running. When no thread
is runnable, every live thread waits: the block barrier completes if all of
them wait in it, and otherwise nothing can ever move again, which is raised as
a :class:`WarpDeadlockError` naming each waiting thread and its source line
(a hang on hardware). The schedule is deterministic. A kernel that spins on
memory written by another thread of its block (without a meeting in the loop)
never gives up its turn and hangs.

*Pooled threads.* Starting an OS thread costs about as much as simulating a
small kernel, so the Python threads are kept in a pool and reused by later
blocks and launches; a job rebinds the per-thread attributes that
``BlockThread.__init__`` sets.

*Speed.* The stock simulator busy-polls; a smaller ``sys.setswitchinterval``
helped it. With turn taking the GIL is never contended, and lowering the
interval measured slower (5e-4 s: about 1.4x slower), so it is left alone.

Undefined behaviour is an error
-------------------------------
The simulator is stricter than hardware wherever hardware is undefined. These
raise :class:`WarpSimError` (and, as in the stock simulator, an error in one
thread aborts the block): reading a lane that is in range but not in the mask;
a mask naming a lane that does not exist (partial last warp) or has exited; a
caller outside its own mask; lanes whose pending calls disagree on the
intrinsic or the mask; shuffling a type numba-cuda cannot compile; a negative
shuffle offset.

Warp size is 32 or 64 (:func:`set_warp_size`, :func:`warp_size`) and is read
when a kernel is launched. Masks are 32-bit for warp 32 and 64-bit for warp 64
(wider masks are truncated, as the hardware does). Masks returned
(``ballot_sync``, ``match_any_sync``, ``activemask``, ``lanemask_lt``) are
``np.uint32`` or ``np.uint64``; compiled numba-cuda types ``ballot_sync`` as
int32, so there lane 31 is the sign bit. ``activemask()`` is the set of lanes
of the warp that call it before the warp's other lanes wait elsewhere or exit
(what a converged warp reports; lanes that returned early are not in it).
Shuffles out of the warp's range (source lane < 0 or >= warp size) return the
caller's own value; ``shfl_sync`` takes ``src_lane`` modulo the warp size.
"""

from __future__ import annotations

import collections
import contextlib
import dis
import inspect
import operator
import os
import sys
import threading
from importlib import metadata

import numpy as np

__all__ = [
    "SUPPORTED_NUMBA_CUDA",
    "WARP_SIZES",
    "WarpSimError",
    "WarpDeadlockError",
    "install",
    "uninstall",
    "is_installed",
    "set_warp_size",
    "get_warp_size",
    "warp_size",
]

#: numba-cuda versions whose simulator internals this module was checked
#: against, as ``(lowest, first unsupported)`` (major, minor): >=0.30,<0.31.
SUPPORTED_NUMBA_CUDA = ((0, 30), (0, 31))

WARP_SIZES = (32, 64)


class WarpSimError(RuntimeError):
    """A warp intrinsic used in a way that is undefined on hardware."""


class WarpDeadlockError(WarpSimError):
    """Every live thread of a block waits and no meeting point can complete."""


# --------------------------------------------------------------------------
# Warp size

_warp_size = 32


def set_warp_size(n: int) -> None:
    """Warp size (32 or 64) of simulated launches started from now on."""
    global _warp_size
    if n not in WARP_SIZES:
        raise ValueError(f"warp size must be one of {WARP_SIZES}, not {n!r}")
    kernel = sys.modules.get("numba.cuda.simulator.kernel")
    if kernel is not None and kernel._get_kernel_context() is not None:
        # A running launch laid its threads out in warps of the old size.
        raise RuntimeError("cannot change the warp size during a simulated launch")
    _warp_size = int(n)


def get_warp_size() -> int:
    return _warp_size


@contextlib.contextmanager
def warp_size(n: int):
    """Launches inside ``with warp_size(64):`` use 64-lane warps."""
    previous = _warp_size
    set_warp_size(n)
    try:
        yield
    finally:
        set_warp_size(previous)


# --------------------------------------------------------------------------
# Meetings and what each intrinsic computes


class _Meeting:
    """One warp call (or the block barrier) gathering its participants.

    ``mask`` names the lanes (None for the barrier). ``arrived`` maps each
    lane (thread_id for the barrier) that has arrived to its thread, whose
    ``_value`` and ``_arg`` hold what it brought.
    """

    __slots__ = ("kind", "mask", "arrived", "arrived_bits")

    def __init__(self, kind, mask):
        self.kind = kind
        self.mask = mask
        self.arrived = {}
        self.arrived_bits = 0


# Shuffles: the lane each caller reads; outside the warp, its own lane.
def _src_idx(lane, src_lane, size):
    return src_lane % size


def _src_up(lane, delta, size):
    return lane - delta if lane - delta >= 0 else lane


def _src_down(lane, delta, size):
    return lane + delta if lane + delta < size else lane


def _src_xor(lane, lane_mask, size):
    return lane ^ lane_mask if lane ^ lane_mask < size else lane


def _shuffle(source_lane):
    def finish(meeting, manager):
        arrived = meeting.arrived
        for lane, t in arrived.items():
            src = source_lane(lane, t._arg, manager.warp_size)
            if src == lane:
                t._result = t._value
            elif src in arrived:
                t._result = _like(t._value, arrived[src]._value)
            else:
                t._error = WarpSimError(
                    f"{meeting.kind}: {_lane_name(t)} reads lane {src}, which is not "
                    f"in mask {meeting.mask:#x} (lanes {_lanes(meeting.mask)}); its "
                    "value is undefined on hardware"
                )

    return finish


def _same_for_all(fn):
    """A meeting whose participants all get ``fn(meeting, manager)``."""

    def finish(meeting, manager):
        result = fn(meeting, manager)
        for t in meeting.arrived.values():
            t._result = result

    return finish


def _values(meeting):
    return [t._value for t in meeting.arrived.values()]


def _ballot(meeting, manager):
    bits = 0
    for lane, t in meeting.arrived.items():
        if t._value:
            bits |= 1 << lane
    return manager.mask_type(bits)


def _match_any(meeting, manager):
    lanes_with = collections.defaultdict(int)
    for lane, t in meeting.arrived.items():
        lanes_with[t._value] |= 1 << lane
    for t in meeting.arrived.values():
        t._result = manager.mask_type(lanes_with[t._value])


def _match_all(meeting, manager):
    same = len(set(_values(meeting))) == 1
    return manager.mask_type(meeting.mask if same else 0), same


# Who meets: the lanes of the mask; every live thread of the block; or, for
# activemask, the lanes of the warp that arrive before the rest of it waits
# elsewhere or exits (as lanes running converged would).
_WARP, _BLOCK, _CONVERGED = "warp", "block", "converged"

#: intrinsic -> (scope, function filling in each participant's _result/_error)
_KINDS = {
    "syncthreads": (_BLOCK, _same_for_all(lambda m, mgr: None)),
    "syncthreads_count": (_BLOCK, _same_for_all(lambda m, mgr: sum(map(bool, _values(m))))),
    "syncthreads_and": (_BLOCK, _same_for_all(lambda m, mgr: int(all(_values(m))))),
    "syncthreads_or": (_BLOCK, _same_for_all(lambda m, mgr: int(any(_values(m))))),
    "syncwarp": (_WARP, _same_for_all(lambda m, mgr: None)),
    "shfl_sync": (_WARP, _shuffle(_src_idx)),
    "shfl_up_sync": (_WARP, _shuffle(_src_up)),
    "shfl_down_sync": (_WARP, _shuffle(_src_down)),
    "shfl_xor_sync": (_WARP, _shuffle(_src_xor)),
    "ballot_sync": (_WARP, _same_for_all(_ballot)),
    "all_sync": (_WARP, _same_for_all(lambda m, mgr: all(_values(m)))),
    "any_sync": (_WARP, _same_for_all(lambda m, mgr: any(_values(m)))),
    "eq_sync": (_WARP, _same_for_all(lambda m, mgr: len(set(_values(m))) == 1)),
    "match_any_sync": (_WARP, _match_any),
    "match_all_sync": (_WARP, _same_for_all(_match_all)),
    "activemask": (_CONVERGED, _same_for_all(lambda m, mgr: mgr.mask_type(m.arrived_bits))),
}

# numba-cuda compiles shuffles of these types only (TypingError otherwise).
_SHUFFLE_TYPES = {int, float, np.int32, np.int64, np.float32, np.float64}


def _check_shuffle_value(kind, value):
    if type(value) in _SHUFFLE_TYPES:
        return
    if isinstance(value, np.generic) and value.dtype.kind in "if" and value.itemsize in (4, 8):
        return  # e.g. np.longlong: another name for a 64-bit int
    raise WarpSimError(
        f"{kind}: a value of type {type(value).__name__} would not compile with "
        "numba-cuda, which shuffles only int32, int64, float32 and float64"
    )


_PYTHON_DTYPES = {int: np.dtype(np.int64), float: np.dtype(np.float64)}


def _like(own, other):
    """``other`` returned to a lane whose own value is ``own``.

    Normally both have the same type, which is kept. Compiled code gives a
    variable one type in all lanes, but simulated lanes may differ (``v = 0``
    in some, ``v = x[i]`` in others): then unify as numba would.
    """
    if type(other) is type(own):
        return other
    a = _PYTHON_DTYPES.get(type(own)) or own.dtype
    b = _PYTHON_DTYPES.get(type(other)) or other.dtype
    return np.promote_types(a, b).type(other)


def _lanes(bits):
    """Lane bit set -> compact text, e.g. '0-15, 17'."""
    out, lane, start = [], 0, None
    while bits or start is not None:
        if bits & 1 and start is None:
            start = lane
        elif not bits & 1 and start is not None:
            out.append(str(start) if start == lane - 1 else f"{start}-{lane - 1}")
            start = None
        bits >>= 1
        lane += 1
    return ", ".join(out) or "none"


def _lane_name(thread):
    return (f"warp {thread._warp.index} lane {thread.lane} "
            f"(threadIdx {tuple(thread.threadIdx)})")


def _call(kind, mask, thread):
    return f"{kind}(mask={mask:#x}) in {_lane_name(thread)}"


# --------------------------------------------------------------------------
# Simulator classes. The mixins are combined with the simulator's classes by
# install(), so importing this module never imports the simulator.


class _Warp:
    __slots__ = ("index", "exists", "exited", "meetings", "unsettled", "converged")

    def __init__(self, index, nlanes):
        self.index = index
        self.exists = (1 << nlanes) - 1  # fewer lanes in a partial last warp
        self.exited = 0
        self.meetings = {}  # mask -> _Meeting still gathering
        self.unsettled = nlanes  # lanes running or runnable
        self.converged = None  # the activemask() _Meeting gathering, if any


class _ManagerMixin:
    """Mixed into BlockManager: runs one block, one thread at a time."""

    def __init__(self, f, grid_dim, block_dim, debug):
        super().__init__(f, grid_dim, block_dim, debug)
        context = _kernel._get_kernel_context()  # this launch's cuda module
        self.warp_size = getattr(context, "_simwarp_size", _warp_size)
        self.full_mask = (1 << self.warp_size) - 1
        self.mask_type = np.uint32 if self.warp_size == 32 else np.uint64
        nthreads = int(np.prod(block_dim))
        self._warps = [
            _Warp(w, min(self.warp_size, nthreads - w * self.warp_size))
            for w in range(-(-nthreads // self.warp_size))
        ]
        self._lock = threading.Lock()  # guards everything below
        self._threads = []
        self._runnable = collections.deque()  # threads waiting for the turn
        self._live = nthreads  # threads that have not exited
        self._barrier = None  # the block barrier gathering, if any
        self._failure = None  # (exception, traceback) that ended the block
        self._done = threading.Event()  # finished or failed
        self._all_exited = threading.Event()

    # ---- the launching thread -------------------------------------------

    def run(self, grid_point, *args):
        f = self._f

        def job():
            f(*args)

        points = list(np.ndindex(*self._block_dim))
        try:
            self._threads = _pool.take(self, job, grid_point, points, self._debug)
            self._runnable.extend(self._threads)
            with self._lock:
                self._hand_over()
            self._done.wait()
        except BaseException:  # e.g. KeyboardInterrupt: stop the threads
            with self._lock:
                self._abort(None)
            raise
        if self._failure is not None:
            # The other threads raise, in turn, at their waits; let them
            # unwind so that no thread of this block outlives the launch.
            self._all_exited.wait(timeout=2.0)
            exc, tb = self._failure
            raise exc.with_traceback(tb)

    # ---- simulated threads ------------------------------------------------

    def meet(self, thread, kind, mask, value, arg=None):
        """``thread`` enters meeting ``kind``; returns its result."""
        scope, finish = _KINDS[kind]
        with self._lock:
            if self._failure is not None:
                raise RuntimeError("block aborted: another thread failed")
            if scope is _WARP:
                meeting, key = self._warp_meeting(thread, kind, mask), thread.lane
            elif scope is _BLOCK:
                meeting, key = self._barrier_meeting(thread, kind), thread.thread_id
            else:
                meeting, key = self._converged_meeting(thread, kind), thread.lane
            thread._value, thread._arg = value, arg
            meeting.arrived[key] = thread
            meeting.arrived_bits |= 1 << key
            if scope is _WARP:
                if meeting.arrived_bits == meeting.mask:
                    # Last to arrive: fill in all results and keep the turn.
                    del thread._warp.meetings[meeting.mask]
                    finish(meeting, self)
                    for t in meeting.arrived.values():
                        if t is not thread:
                            self._ready(t)
                    return self._outcome(thread)
            # (The barrier completes in _hand_over, once nobody can run.)
            thread._meeting = meeting
            # Where it waits, for a deadlock report; its own frame, since
            # sys._current_frames() can deadlock the interpreter (CPython 3.11
            # before 3.11.9, gh-106883: it collects garbage under a runtime lock)
            thread._waits_at = sys._getframe()
            self._settle(thread._warp)
            self._hand_over()
        thread._wake.acquire()  # until the turn comes back
        thread._waits_at = None  # the frame refers to the thread: no cycle kept
        return self._outcome(thread)

    def _warp_meeting(self, thread, kind, mask):
        warp = thread._warp
        try:
            mask = operator.index(mask) & self.full_mask  # as hardware truncates
        except TypeError:
            raise WarpSimError(f"{kind}: the mask must be an integer, not {mask!r}") from None
        if not mask >> thread.lane & 1 or mask & ~(warp.exists & ~warp.exited):
            raise WarpSimError(self._bad_mask(thread, kind, mask))
        meeting = warp.meetings.get(mask)
        if meeting is None:
            # Calls are matched in order per lane: a lane named by two
            # gathering calls with different masks cannot take part in both.
            for other in warp.meetings.values():
                if other.mask & mask:
                    raise WarpSimError(
                        f"{_call(kind, mask, thread)}: lanes {_lanes(other.arrived_bits)}"
                        f" wait in {other.kind}(mask={other.mask:#x}); the masks overlap "
                        "but differ, so the calls cannot be matched"
                    )
            meeting = warp.meetings[mask] = _Meeting(kind, mask)
        elif meeting.kind != kind:
            raise WarpSimError(
                f"{_call(kind, mask, thread)}: lanes {_lanes(meeting.arrived_bits)} wait "
                f"in {meeting.kind} with the same mask; all lanes must make the same call"
            )
        return meeting

    @staticmethod
    def _bad_mask(thread, kind, mask):
        warp, where = thread._warp, _call(kind, mask, thread)
        if not mask >> thread.lane & 1:
            return f"{where}: the calling lane is not in the mask"
        if mask & ~warp.exists:
            return (
                f"{where}: the mask names lanes {_lanes(mask & ~warp.exists)}, which "
                f"do not exist (warp {warp.index} has lanes {_lanes(warp.exists)})"
            )
        return (f"{where}: the mask names lanes {_lanes(mask & warp.exited)}, "
                "which have already exited")

    def _barrier_meeting(self, thread, kind):
        if self._barrier is None:
            self._barrier = _Meeting(kind, None)
        elif self._barrier.kind != kind:
            raise WarpSimError(
                f"{kind} in threadIdx {tuple(thread.threadIdx)}: other threads wait in "
                f"{self._barrier.kind}; all threads must make the same call"
            )
        return self._barrier

    def _converged_meeting(self, thread, kind):
        warp = thread._warp
        if warp.converged is None:
            warp.converged = _Meeting(kind, None)
        return warp.converged

    def _settle(self, warp):
        """A lane of ``warp`` starts waiting or exits."""
        warp.unsettled -= 1
        if warp.unsettled == 0 and warp.converged is not None:
            # Nobody else in the warp can reach activemask() now.
            meeting, warp.converged = warp.converged, None
            _KINDS[meeting.kind][1](meeting, self)
            for t in meeting.arrived.values():
                self._ready(t)

    def _ready(self, t, error=None):
        """``t`` leaves its meeting and queues for the turn."""
        t._error = error
        t._meeting = None
        t._warp.unsettled += 1
        self._runnable.append(t)

    @staticmethod
    def _outcome(thread):
        error = thread._error
        if error is not None:
            thread._error = None
            raise error
        return thread._result

    def _hand_over(self):
        """The running thread stops (it waits or exits): pass the turn on."""
        while not self._runnable:
            if self._live == 0 or self._failure is not None:
                self._done.set()
                return
            # Nobody can run, so every live thread waits somewhere.
            barrier = self._barrier
            if barrier is not None and len(barrier.arrived) == self._live:
                self._barrier = None
                _KINDS[barrier.kind][1](barrier, self)
                for t in barrier.arrived.values():
                    self._ready(t)
            else:
                self._abort((WarpDeadlockError(self._deadlock_report()), None))
        self._runnable.popleft()._wake.release()

    def _exited(self, thread):
        with self._lock:
            self._live -= 1
            warp, bit = thread._warp, 1 << thread.lane
            warp.exited |= bit
            self._settle(warp)
            if thread.exception is not None:
                self._abort(thread.exception)
            # Lanes waiting for this one would wait forever.
            for mask, meeting in list(warp.meetings.items()):
                if mask & bit:
                    del warp.meetings[mask]
                    for t in meeting.arrived.values():
                        self._ready(t, WarpSimError(
                            f"{_call(meeting.kind, mask, t)}: lane {thread.lane}, "
                            "named in the mask, exited without making the call"
                        ))
            # The thread's attributes are no longer needed: a later block may
            # take it (this block cannot be done before the lines below).
            _pool.give_back(thread)
            if self._live == 0:
                self._all_exited.set()
            self._hand_over()

    def _abort(self, failure):
        """End the block: the first failure wins, every other thread raises."""
        if self._failure is None:
            self._failure = failure or (RuntimeError("simulated block interrupted"), None)
        aborted = RuntimeError("block aborted: another thread failed")
        for t in self._runnable:
            t._error = aborted
        for t in self._threads:
            t.abort = True  # the stock flag
            if t._meeting is not None:
                self._ready(t, aborted)
        for warp in self._warps:
            warp.meetings.clear()
            warp.converged = None
        self._barrier = None
        self._done.set()

    def _deadlock_report(self):
        rows = collections.defaultdict(int)  # (warp, call, line) -> lanes
        for t in self._threads:
            m = t._meeting
            if m is None:
                continue
            if m.mask is None:
                call = m.kind
            else:
                missing = _lanes(m.mask & ~m.arrived_bits)
                call = f"{m.kind}(mask={m.mask:#x}) waiting for lanes {missing}"
            rows[t._warp.index, call, _kernel_line(t._waits_at)] |= 1 << t.lane
        lines = [f"  warp {w} lanes {_lanes(bits)}: {call} at {where}"
                 for (w, call, where), bits in sorted(rows.items())]
        return (
            f"deadlock in block {tuple(self._threads[0].blockIdx)} (warp size "
            f"{self.warp_size}): all {self._live} live threads wait and no meeting "
            "can complete:\n" + "\n".join(lines)
        )


_SKIP_FILES = {os.path.abspath(__file__), os.path.abspath(threading.__file__)}


def _kernel_line(frame):
    """'file:line' of the innermost frame of kernel code (not machinery)."""
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if name not in _SKIP_FILES and "numba" not in name.split(os.sep)[-4:-1]:
            return f"{os.path.basename(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


#: What BlockThread.__init__ sets; _ThreadMixin._assign rebinds the per-job ones.
_BLOCK_THREAD_ATTRS = {
    "syncthreads_event", "syncthreads_blocked", "_manager", "blockIdx", "threadIdx",
    "exception", "daemon", "abort", "debug", "thread_id",
}


class _ThreadMixin:
    """Mixed into BlockThread: a pooled thread that plays one simulated CUDA
    thread per job (see :class:`_Pool`)."""

    def __init__(self, manager, blockIdx, threadIdx, debug):
        super().__init__(None, manager, blockIdx, threadIdx, debug)
        # Locked while the thread may not run: it waits by acquiring it, and
        # whoever gives it the turn releases it.
        self._wake = threading.Lock()
        self._wake.acquire()
        self._assign(manager, None, blockIdx, threadIdx, debug)

    def _assign(self, manager, job, blockIdx, threadIdx, debug):
        """Become thread ``threadIdx`` of block ``blockIdx`` of ``manager``."""
        self._manager = manager
        self._job = job
        self.blockIdx = _kernel.Dim3(*blockIdx)
        self.threadIdx = _kernel.Dim3(*threadIdx)
        bx, by, _ = manager._block_dim
        x, y, z = threadIdx
        self.thread_id = x + bx * (y + by * z)  # CUDA's linear thread index
        self.exception = None
        self.abort = False
        self.debug = debug
        self.lane = self.thread_id % manager.warp_size
        self._warp = manager._warps[self.thread_id // manager.warp_size]
        self._meeting = None  # the meeting this thread waits in, if any
        self._waits_at = None  # the frame of meet() while it waits there
        self._value = self._arg = self._result = self._error = None

    def run(self):
        while True:  # one job per block this thread plays a part in
            self._wake.acquire()  # the job's first turn
            manager = self._manager
            errstate = np.seterr(divide="raise") if self.debug else None  # as stock
            try:
                if manager._failure is None:
                    super().run()  # BlockThread.run: an exception goes to .exception
            except BaseException as exc:
                # BlockThread.run rebuilds the kernel's exception as type(e)(msg),
                # which itself fails for exceptions that take no message (NumPy's
                # _UFuncNoLoopError): keep the original rather than lose the block
                self.exception = (
                    RuntimeError(f"tid={list(self.threadIdx)} ctaid={list(self.blockIdx)}: "
                                 f"{type(exc).__name__}: {exc}"),
                    exc.__traceback__,
                )
            finally:
                if errstate is not None:
                    np.seterr(**errstate)
                manager._exited(self)

    # BlockThread's barrier API (used by the stock cuda module), as meetings.
    def syncthreads(self):
        self._manager.meet(self, "syncthreads", None, None)

    def syncthreads_count(self, value):
        return self._manager.meet(self, "syncthreads_count", None, value)

    def syncthreads_and(self, value):
        return self._manager.meet(self, "syncthreads_and", None, value)

    def syncthreads_or(self, value):
        return self._manager.meet(self, "syncthreads_or", None, value)


class _RunJob(threading.Thread):
    """Sits between BlockThread and Thread in the MRO: the ``super().run()`` in
    ``BlockThread.run`` (which wraps kernel exceptions) runs the current job."""

    def run(self):
        self._job()


class _Pool:
    """Idle simulated-thread workers, reused by later blocks and launches."""

    def __init__(self):
        self._lock = threading.Lock()
        self._idle = []

    def take(self, manager, job, grid_point, block_points, debug):
        with self._lock:
            n = min(len(self._idle), len(block_points))
            reused = self._idle[len(self._idle) - n:]
            del self._idle[len(self._idle) - n:]
        threads = []
        for i, block_point in enumerate(block_points):
            if i < n:
                t = reused[i]
                t._assign(manager, job, grid_point, block_point, debug)
            else:
                t = _Thread(manager, grid_point, block_point, debug)
                t._job = job
                t.start()  # it waits for its first turn
            threads.append(t)
        return threads

    def give_back(self, thread):
        with self._lock:
            self._idle.append(thread)

    def clear(self):
        # A child process after fork() has none of these threads.
        self._lock = threading.Lock()
        self._idle = []


_pool = _Pool()
os.register_at_fork(after_in_child=_pool.clear)


class _ModuleMixin:
    """Mixed into FakeCUDAModule: the ``cuda`` a simulated kernel sees."""

    def __init__(self, grid_dim, block_dim, dynshared_size):
        super().__init__(grid_dim, block_dim, dynshared_size)
        self._simwarp_size = _warp_size  # fixed for this launch

    @property
    def warpsize(self):
        return self._simwarp_size

    @property
    def laneid(self):
        return threading.current_thread().lane

    def _meet(self, kind, mask, value, arg=None):
        t = threading.current_thread()
        return t._manager.meet(t, kind, mask, value, arg)

    def syncwarp(self, mask=None):
        if mask is None:
            mask = (1 << self._simwarp_size) - 1
        self._meet("syncwarp", mask, None)

    def shfl_sync(self, mask, value, src_lane):
        _check_shuffle_value("shfl_sync", value)
        return self._meet("shfl_sync", mask, value, operator.index(src_lane))

    def shfl_up_sync(self, mask, value, delta):
        return self._shuffle_by("shfl_up_sync", mask, value, delta)

    def shfl_down_sync(self, mask, value, delta):
        return self._shuffle_by("shfl_down_sync", mask, value, delta)

    def shfl_xor_sync(self, mask, value, lane_mask):
        return self._shuffle_by("shfl_xor_sync", mask, value, lane_mask)

    def _shuffle_by(self, kind, mask, value, offset):
        _check_shuffle_value(kind, value)
        offset = operator.index(offset)
        if offset < 0:
            raise WarpSimError(f"{kind}: negative lane offset {offset}")
        return self._meet(kind, mask, value, offset)

    def ballot_sync(self, mask, predicate):
        return self._meet("ballot_sync", mask, bool(predicate))

    def all_sync(self, mask, predicate):
        return self._meet("all_sync", mask, bool(predicate))

    def any_sync(self, mask, predicate):
        return self._meet("any_sync", mask, bool(predicate))

    def eq_sync(self, mask, predicate):
        return self._meet("eq_sync", mask, bool(predicate))

    def match_any_sync(self, mask, value):
        return self._meet("match_any_sync", mask, value)

    def match_all_sync(self, mask, value):
        return self._meet("match_all_sync", mask, value)

    def activemask(self):
        return self._meet("activemask", None, None)

    def lanemask_lt(self):
        t = threading.current_thread()
        return t._manager.mask_type((1 << t.lane) - 1)


# --------------------------------------------------------------------------
# install()

_kernel = None  # numba.cuda.simulator.kernel, once installed
_Thread = None  # the BlockThread subclass built by install()
_installed = None  # (stock FakeCUDAModule, stock BlockManager, ours, ours)


def _simulator_kernel_module():
    """numba.cuda.simulator.kernel; RuntimeError if the simulator is not active."""
    import numba.cuda

    try:
        from numba.cuda.simulator import api, kernel
    except ImportError as e:
        raise RuntimeError(f"numba-cuda's simulator cannot be imported: {e}") from e
    if getattr(numba.cuda, "jit", None) is not api.jit:
        raise RuntimeError(
            "the CUDA simulator is not active (numba.cuda is the real CUDA target); "
            "set NUMBA_ENABLE_CUDASIM=1 before numba.cuda is first imported"
        )
    return kernel


def _check_version():
    version = metadata.version("numba-cuda")
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    low, high = SUPPORTED_NUMBA_CUDA
    if not low <= parts < high:
        raise RuntimeError(
            f"numba-cuda {version} is outside the versions pyreduce.backends.simwarp "
            f"supports (>={low[0]}.{low[1]},<{high[0]}.{high[1]}); it relies on private "
            "simulator internals: check them against the module docstring, then "
            "update SUPPORTED_NUMBA_CUDA"
        )


def _check_internals(kernel):
    """Every assumption about the simulator, checked before patching it."""
    problems = []

    def parameters(fn, expected, name):
        try:
            got = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            got = None
        if got != expected:
            problems.append(f"{name} takes {got}, expected {expected}")

    def uses(fn, names, name):
        missing = set(names) - set(getattr(getattr(fn, "__code__", None), "co_names", ()))
        if missing:
            problems.append(f"{name} no longer uses {sorted(missing)}")

    for attr in ("FakeCUDAKernel", "FakeCUDAModule", "BlockManager", "BlockThread",
                 "Dim3", "_get_kernel_context"):
        if not hasattr(kernel, attr):
            problems.append(f"numba.cuda.simulator.kernel.{attr} is missing")
    if problems:
        raise RuntimeError("numba-cuda's simulator internals changed; "
                           "pyreduce.backends.simwarp cannot install: " + "; ".join(problems))

    uses(kernel.FakeCUDAKernel.__call__, ["FakeCUDAModule", "BlockManager"],
         "FakeCUDAKernel.__call__")
    parameters(kernel.FakeCUDAModule.__init__,
               ["self", "grid_dim", "block_dim", "dynshared_size"], "FakeCUDAModule.__init__")
    parameters(kernel.BlockManager.__init__,
               ["self", "f", "grid_dim", "block_dim", "debug"], "BlockManager.__init__")
    parameters(kernel.BlockManager.run, ["self", "grid_point", "args"], "BlockManager.run")
    parameters(kernel.BlockThread.__init__,
               ["self", "f", "manager", "blockIdx", "threadIdx", "debug"],
               "BlockThread.__init__")
    uses(kernel.BlockThread.run, ["super", "run", "exception"], "BlockThread.run")
    if not issubclass(kernel.BlockThread, threading.Thread):
        problems.append("BlockThread is no longer a threading.Thread")
    else:
        sets = {i.argval for i in dis.get_instructions(kernel.BlockThread.__init__)
                if i.opname == "STORE_ATTR"}
        if sets != _BLOCK_THREAD_ATTRS:
            problems.append(
                f"BlockThread.__init__ sets {sorted(sets)}, expected "
                f"{sorted(_BLOCK_THREAD_ATTRS)} (pooled threads rebind them per block)"
            )
    if problems:
        raise RuntimeError("numba-cuda's simulator internals changed; "
                           "pyreduce.backends.simwarp cannot install: " + "; ".join(problems))


def install() -> None:
    """Give the CUDA simulator warp intrinsics. Idempotent.

    Raises RuntimeError if the simulator is not active, or if the numba-cuda
    version or the simulator internals this relies on are not as expected.
    """
    kernel = _simulator_kernel_module()
    with _install_lock:  # two threads' first launches must not both patch
        if is_installed():
            return
        _install(kernel)


_install_lock = threading.Lock()


def _install(kernel) -> None:
    global _kernel, _Thread, _installed
    _check_version()
    _check_internals(kernel)
    module_cls = type("WarpFakeCUDAModule", (_ModuleMixin, kernel.FakeCUDAModule), {})
    manager_cls = type("WarpBlockManager", (_ManagerMixin, kernel.BlockManager), {})
    _Thread = type("WarpBlockThread", (_ThreadMixin, kernel.BlockThread, _RunJob), {})
    _kernel = kernel
    _installed = (kernel.FakeCUDAModule, kernel.BlockManager, module_cls, manager_cls)
    kernel.FakeCUDAModule, kernel.BlockManager = module_cls, manager_cls


def uninstall() -> None:
    """Restore the stock simulator classes (no-op if not installed)."""
    global _installed
    if is_installed():
        _kernel.FakeCUDAModule, _kernel.BlockManager = _installed[:2]
    _installed = None


def is_installed() -> bool:
    return (_installed is not None
            and (_kernel.FakeCUDAModule, _kernel.BlockManager) == _installed[2:])
