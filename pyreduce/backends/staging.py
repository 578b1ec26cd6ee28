"""Host arrays on a GPU: streamed through pinned staging buffers, in chunks.

A copy to the device from ordinary (pageable) host memory goes through the
driver's own staging, one buffer at a time on one thread: 9 GB/s on an H200
machine, against 55 GB/s from pinned memory. So a host input on a GPU backend
is copied in chunks of its C-order flattening through a few pinned buffers
(*slots*), each with a device buffer of the same size:

1. the host threads (the cpu backend's crew, the calling thread among them)
   copy chunk ``c + 1`` of the user's array into a free slot's pinned buffer
   (``np.copyto``, in pieces of at least :data:`COPY_PIECE_BYTES`), while
2. the copy stream moves chunk ``c`` from its pinned buffer to the slot's device
   buffer, and
3. the compute stream reduces chunk ``c - 1`` into one partial, once the copy
   stream's event says it has arrived.

Chunks and pieces are large because every hand-off costs the host: on an H100
machine (16 cores, float64, 800 MB, 2026-11-27,
``docs/performance/host-stages-h100.txt``) the staging alone ran at 9.4 GB/s
in 8 MiB chunks of 16 pieces, 21.4 in 8 pieces and 31.0 in 32 MiB chunks of 8
pieces (the threads take the GIL to start and end each piece), and each call
that queued an 8 MiB chunk's copy took 0.27-0.31 ms of the host's time. The
streamed ``sum`` went from 6.3 GB/s (8 MiB chunks, 1 MiB pieces handed to a
pool of threads) to 17.6 on another such machine, where the copy from pinned
memory alone ran at 52 GB/s and the cpu backend read the array at 74 GB/s.

Events order the reuse: a pinned buffer is refilled once the host has seen its
last copy's event, a device buffer once the copy stream has seen its last
reduction's. The partials (one accumulator per chunk, in a device buffer) are
read back at the end and combined on the host in chunk order
(:func:`pyreduce.backends.cpu_parallel.combine`), so a non-commutative op gets
what one pass over the array gives; ``initial`` is combined on their left. An
``(value, index)`` accumulator (argmax) has its indices counted from its chunk's
start, and moved to the array's start before combining. Where a reduction cannot
be split into chunks (the fixed tree of ``deterministic=True``; an element map
that reads its index; a result that stays on the device), the chunks are copied
through the same slots into one device array of the whole input
(:meth:`Stager.upload`), which is reduced as a device input is.

A :class:`Stager` (its slots, two streams and their events) serves one call at a
time. Its slots are as large as the call's chunks (:func:`slot_bytes`), so a
small input does not pin :data:`CHUNK_BYTES` three times over; a call takes an
idle stager whose slots hold its chunks, else makes one. Stagers are made on
first use, kept per device (at most :data:`KEPT` idle, at most :data:`MOST` at
once: a further call waits for one, or replaces an idle one too small for it)
and released at exit.

The code is Numba's CUDA API only (``pinned_array``, ``stream``, ``event``,
``copy_to_device``), so the simulator runs it too: there the copies are
synchronous and the events do nothing, and the order of the partials, the chunk
boundaries and the index shifts are what its tests check.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading

import numpy as np

from ..dtypes import as_value, storage
from ..planner import make_plan
from .cpu import shared as cpu_backend
from .cpu_parallel import combine, reads_index, shift_index, shifts_index

__all__ = ["CHUNK_BYTES", "MIN_CHUNK_BYTES", "SLOTS", "COPY_PIECE_BYTES", "DIRECT_BYTES",
           "Stager", "Streamed", "chunk_elements", "slot_bytes", "streamable", "stager",
           "c_order_pieces", "upload", "reset"]

#: The largest chunk, in bytes: the size of each slot's pinned and device buffer.
CHUNK_BYTES = 32 << 20
#: The smallest chunk, in bytes (the last of an input may be shorter). Between
#: the two, an input is cut into about :data:`CHUNKS` chunks, a power of two in
#: bytes each, so that even a small input's copy overlaps its staging.
MIN_CHUNK_BYTES = 1 << 20
#: Chunks an input is cut into, where the chunk sizes allow it.
CHUNKS = 8
#: Slots per stager: a chunk is staged while the one before it is copied and
#: the one before that reduced.
SLOTS = 3
#: The least part of a chunk one host thread copies into the pinned buffer.
COPY_PIECE_BYTES = 4 << 20
#: Idle stagers kept per device (each holds :data:`SLOTS` pinned buffers of up
#: to :data:`CHUNK_BYTES`), and the most per device at once.
KEPT, MOST = 1, 4
#: Inputs of at most this many bytes are copied straight from the user's array
#: (the driver stages them itself) and reduced as device inputs are: for them
#: the pipeline's events and hand-offs cost more than the faster copy saves.
DIRECT_BYTES = 64 << 10


def chunk_elements(n: int, itemsize: int, largest: int | None = None) -> int:
    """Elements per chunk for ``n`` elements of ``itemsize`` bytes: about
    ``n / CHUNKS`` rounded up to a power of two in bytes, within
    [:data:`MIN_CHUNK_BYTES`, ``largest`` (:data:`CHUNK_BYTES`)]."""
    largest = CHUNK_BYTES if largest is None else largest
    smallest = min(MIN_CHUNK_BYTES, largest)
    want = max(1, -(-n * itemsize // CHUNKS))
    size = min(largest, max(smallest, 1 << (want - 1).bit_length()))
    return max(1, size // itemsize)


def slot_bytes(n: int, itemsize: int) -> int:
    """The bytes of the slots that stage ``n`` elements of ``itemsize``
    bytes: one chunk's (:func:`chunk_elements`)."""
    return chunk_elements(n, itemsize) * itemsize


def streamable(monoid, fixed_tree: bool) -> bool:
    """Whether a reduction can run chunk by chunk, each to a partial: not the
    fixed tree of ``deterministic=True`` (its shape depends on the whole size),
    and no element map that reads its index, but argmax's, whose index is moved."""
    if fixed_tree:
        return False
    return monoid.map is None or shifts_index(monoid) or not reads_index(monoid.map)


def c_order_pieces(x: np.ndarray, lo: int, hi: int):
    """Views of ``x`` that together hold elements ``lo:hi`` of its C-order
    flattening, in that order: one for a 1-D or C-contiguous ``x``, a few
    blocks of rows otherwise, so that no more than those elements are read."""
    if lo >= hi:
        return
    if x.ndim <= 1 or x.flags.c_contiguous:
        yield x.reshape(-1)[lo:hi]
        return
    inner = x.size // x.shape[0]
    row, start = divmod(lo, inner)
    if start:  # the first row, from its middle
        end = min(hi, (row + 1) * inner)
        yield from c_order_pieces(x[row], start, end - row * inner)
        lo, row = end, row + 1
    whole = (hi - lo) // inner
    if whole:
        yield x[row:row + whole]
        lo, row = lo + whole * inner, row + whole
    if lo < hi:  # the last row, up to its middle
        yield from c_order_pieces(x[row], 0, hi - lo)


def _copy_range(x: np.ndarray, lo: int, hi: int, dst: np.ndarray) -> None:
    """Elements ``lo:hi`` of ``x`` (C order) into the 1-D ``dst``."""
    at = 0
    for piece in c_order_pieces(x, lo, hi):
        np.copyto(dst[at:at + piece.size].reshape(piece.shape), piece, casting="no")
        at += piece.size


def _event(gpu):
    try:
        return gpu.event(timing=False)
    except TypeError:  # the simulator's events take no arguments
        return gpu.event()


class Stager:
    """The pinned and device buffers, streams and events of one call at a time."""

    def __init__(self, backend, slot_bytes: int = CHUNK_BYTES):
        gpu = backend.gpu
        self.backend, self.slot_bytes = backend, slot_bytes
        self.pinned = [gpu.pinned_array(slot_bytes, dtype=np.uint8) for _ in range(SLOTS)]
        self.device = [gpu.device_array(slot_bytes, dtype=np.uint8) for _ in range(SLOTS)]
        self.copied = [_event(gpu) for _ in range(SLOTS)]  # a slot's copy arrived
        self.reduced = [_event(gpu) for _ in range(SLOTS)]  # a slot's device buffer read
        self.copy_stream, self.compute_stream = gpu.stream(), gpu.stream()
        self._partials: dict = {}  # accumulator dtype -> (device buffer, capacity)

    # --- the host side: the user's array into the pinned buffers

    def stage(self, x: np.ndarray, lo: int, hi: int, slot: int) -> None:
        """Copy elements ``lo:hi`` of ``x`` into ``slot``'s pinned buffer, in
        pieces of at least :data:`COPY_PIECE_BYTES` shared by the cpu
        backend's crew of threads (the caller among them)."""
        cpu = cpu_backend()
        dst = self.pinned[slot][:(hi - lo) * x.itemsize].view(x.dtype)
        parts = max(1, min(cpu.threads, (hi - lo) * x.itemsize // COPY_PIECE_BYTES))
        if parts == 1:
            _copy_range(x, lo, hi, dst)
            return
        bounds = [lo + (hi - lo) * p // parts for p in range(parts + 1)]
        cpu.crew().map(_copy_range, [(x, a, b, dst[a - lo:b - lo])
                                     for a, b in zip(bounds, bounds[1:])])

    def _chunks(self, x: np.ndarray, size: int):
        """``(index, lo, hi, slot)`` of each chunk of ``size`` elements once its
        elements are in the slot's pinned buffer; once the caller has queued
        the chunk's copy, the next chunk is staged while that copy runs. The
        device buffer of the slot is free for it once the copy stream waits for
        ``self.reduced[slot]``."""
        n = x.size
        count = -(-n // size)
        self.stage(x, 0, min(size, n), 0)
        for c in range(count):
            lo, hi = c * size, min(n, (c + 1) * size)
            yield c, lo, hi, c % SLOTS
            if c + 1 < count:
                nxt = (c + 1) % SLOTS
                self.copied[nxt].synchronize()  # its pinned buffer was copied out
                self.stage(x, hi, min(n, hi + size), nxt)

    def _send(self, slot: int, dst, nbytes: int) -> None:
        """The slot's first ``nbytes`` of pinned memory to the device array
        ``dst`` on the copy stream, after the slot's last reduction."""
        self.reduced[slot].wait(self.copy_stream)
        src = self.pinned[slot][:nbytes].view(dst.dtype)
        dst.copy_to_device(src, stream=self.copy_stream)
        self.copied[slot].record(self.copy_stream)

    def _finish(self) -> None:
        self.copy_stream.synchronize()
        self.compute_stream.synchronize()

    # --- what a call asks for

    def upload(self, x: np.ndarray):
        """``x`` (any layout) in a new flat C-order device array, complete on
        return."""
        gpu, dt = self.backend.gpu, x.dtype
        out = gpu.device_array(x.size, dtype=dt)
        size = chunk_elements(x.size, dt.itemsize, self.slot_bytes)
        chunks = contextlib.closing(self._chunks(x, size))
        try:
            with chunks as each:
                for _, lo, hi, slot in each:
                    self._send(slot, out[lo:hi], (hi - lo) * dt.itemsize)
        finally:
            self._finish()
        return out

    def reduce(self, x: np.ndarray, monoid, initial, plan_for, device):
        """The accumulated value of ``x`` (a host array of the input's storage
        dtype), chunk by chunk (:func:`chunk_elements`), each chunk reduced on
        the device by the plan ``plan_for(elements, alignment)``; then
        ``op(initial, ...)``."""
        be, acc = self.backend, monoid.dtype
        size = chunk_elements(x.size, x.itemsize, self.slot_bytes)
        count = -(-x.size // size)
        partials = self._partials_buffer(acc, count)
        stream = be.stream_arg(self.compute_stream)
        try:
            with contextlib.closing(self._chunks(x, size)) as each:
                for c, lo, hi, slot in each:
                    nbytes = (hi - lo) * x.itemsize
                    dst = self.device[slot][:nbytes].view(x.dtype)
                    self._send(slot, dst, nbytes)
                    self.copied[slot].wait(self.compute_stream)
                    flat = be.as_flat(dst)
                    run = be.executable(plan_for(hi - lo, be.alignment(flat)), monoid, device)
                    run(flat, stream, None, be.slice(partials, c, c + 1))
                    self.reduced[slot].record(self.compute_stream)
            found = be.read_array(partials, count, stream)
        finally:
            self._finish()
        values = [shift_index(as_value(found[c], acc), c * size, monoid) for c in range(count)]
        return combine(values, monoid, initial)

    def _partials_buffer(self, acc: np.dtype, count: int):
        """A device buffer of at least ``count`` accumulators, kept for the next
        call (grown by doubling)."""
        buf, capacity = self._partials.get(acc, (None, 0))
        if capacity < count:
            capacity = max(count, 2 * capacity, 64)
            buf = self.backend.allocate(capacity, acc)
            self._partials[acc] = (buf, capacity)
        return buf


# --- the stagers of each device


class _Stagers:
    """The stagers of one device: made on demand, at most :data:`MOST` at once;
    a call beyond that waits for one to come back."""

    def __init__(self):
        self.cond = threading.Condition()
        self.idle: list = []
        self.made = 0

    def take(self, backend, nbytes: int) -> Stager:
        """An idle stager whose slots hold ``nbytes`` (the smallest such), else a
        new one of ``nbytes`` slots: while :data:`MOST` exist, an idle one too
        small is dropped for it, or the call waits for one to come back."""
        with self.cond:
            while True:
                fit = [st for st in self.idle if st.slot_bytes >= nbytes]
                if fit:
                    st = min(fit, key=lambda st: st.slot_bytes)
                    self.idle.remove(st)
                    return st
                if self.made >= MOST and self.idle:
                    self.idle.pop(0)  # too small: its buffers go as Numba frees them
                    self.made -= 1
                if self.made < MOST:
                    break
                self.cond.wait()
            self.made += 1
        try:
            return Stager(backend, nbytes)
        except BaseException:
            with self.cond:
                self.made -= 1
                self.cond.notify()
            raise

    def give(self, st: Stager) -> None:
        with self.cond:
            if len(self.idle) < KEPT:
                self.idle.append(st)
            else:
                self.made -= 1
            self.cond.notify()


_lock = threading.Lock()
_STAGERS: dict = {}  # (backend name, device id) -> _Stagers
_ORPHANS: list = []  # a forked child's inherited stagers, never touched


class stager:
    """``with stager(backend, nbytes) as st:`` a :class:`Stager` of the current
    device whose slots hold ``nbytes`` (default :data:`CHUNK_BYTES`) for the
    block, given back after it."""

    def __init__(self, backend, nbytes: int | None = None):
        key = (backend.name, backend.device_id())
        with _lock:
            self._pool = _STAGERS.get(key) or _STAGERS.setdefault(key, _Stagers())
        self._backend = backend
        self._nbytes = CHUNK_BYTES if nbytes is None else nbytes

    def __enter__(self) -> Stager:
        self._st = self._pool.take(self._backend, self._nbytes)
        return self._st

    def __exit__(self, *exc):
        self._pool.give(self._st)


def reset() -> None:
    """Release every idle stager (their buffers are freed as Numba frees them)."""
    with _lock:
        pools = list(_STAGERS.values())
        _STAGERS.clear()
    for pool in pools:
        with pool.cond:
            pool.idle.clear()


def _forget_in_child() -> None:
    """After ``fork``: the parent's CUDA buffers are not the child's to free."""
    global _lock
    _ORPHANS.append(dict(_STAGERS))
    _STAGERS.clear()
    _lock = threading.Lock()


atexit.register(reset)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def upload(backend, x: np.ndarray):
    """The host array ``x`` (any layout) as a new flat C-order device array of
    ``backend``'s kernel module, complete on return: copied directly when it
    has at most :data:`DIRECT_BYTES`, else through a stager."""
    if x.nbytes <= DIRECT_BYTES:
        return backend.gpu.to_device(np.ascontiguousarray(x).reshape(-1))
    with stager(backend, slot_bytes(x.size, x.itemsize)) as st:
        return st.upload(x)


class Streamed:
    """A host input's reduction on a GPU backend, chunk by chunk through a
    stager (what :class:`pyreduce.prepared.Prepared` runs for one): the chunks'
    plans, and the call."""

    def __init__(self, backend, monoid, in_dtype: np.dtype, device, tuning, size: int):
        self.backend, self.monoid, self.in_dtype = backend, monoid, in_dtype
        self.device, self.tuning = device, tuning
        #: elements per chunk (the last may have fewer), and chunks
        self.chunk = chunk_elements(size, storage(in_dtype).itemsize)
        self.count = -(-size // self.chunk)
        self.size = size

    def first_plan(self):
        """The first chunk's plan (what :func:`pyreduce.explain` shows)."""
        return self.plan(min(self.chunk, self.size))

    def plan(self, elements: int, align: int = 16):
        """The plan that reduces one chunk of ``elements`` elements to one
        partial (no initial value: that is combined on the host)."""
        m = self.monoid
        return make_plan(elements, self.in_dtype, m.dtype, m.key, self.device, self.tuning,
                         0, align, m.commutative)

    def __call__(self, x: np.ndarray, initial=None):
        """The accumulated value of the host array ``x``, then ``op(initial, .)``."""
        with stager(self.backend, self.chunk * storage(self.in_dtype).itemsize) as st:
            return st.reduce(x, self.monoid, initial, self.plan, self.device)
