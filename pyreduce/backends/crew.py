"""A crew of threads that share the pieces of one job: the cpu backend's way
of running a reduction on every core.

The calling thread posts a job (a function and its list of pieces), wakes up to
one waiting thread fewer than the threads the job may use, and takes pieces
itself; every thread claims the next unclaimed piece until none is left, and
the caller returns once the last one is done, with the results in piece order.
A job never has more helpers than it asked for, and once it returns no thread
holds it (nor the user's array its pieces view).
Nothing is handed to a thread one call at a time: on a 16-core host, handing
pieces one by one to a ``concurrent.futures`` pool cost 12 us a piece, 190 us
for 16, where the crew's map of 16 empty pieces took 21 us. A thread that wakes
late finds fewer pieces, or none, and the caller's own work never waits for it.

The pieces release the GIL (NumPy's loops, the ``nogil`` folds) so the threads
run them at once; each piece still takes the GIL to start and to hand back its
result, which under contention costs tens of microseconds, so the owner cuts
few, large pieces (:mod:`pyreduce.backends.cpu_parallel`). An exception in a
piece is raised in the caller once the claimed pieces are done (pieces claimed
after it are skipped). A child process of ``fork()`` has none of the threads: the
owner drops its crew there (:mod:`pyreduce.backends.cpu`) and the child starts
its own.
"""

from __future__ import annotations

import collections
import threading

__all__ = ["Crew"]


class _Job:
    __slots__ = ("fn", "items", "results", "claimed", "left", "slots", "lock", "done", "error")

    def __init__(self, fn, items: list, helpers: int):
        self.fn, self.items = fn, items
        self.results = [None] * len(items)
        self.claimed = 0
        self.left = len(items)
        #: how many helper threads may still join (the caller works it anyway)
        self.slots = helpers
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.error = None

    def open(self) -> bool:
        """Whether a piece is left to claim."""
        return self.claimed < len(self.items)

    def _claim(self) -> int | None:
        with self.lock:
            i = self.claimed
            if i >= len(self.items):
                return None
            self.claimed = i + 1
            return i

    def work(self) -> None:
        """Run unclaimed pieces until none is left."""
        while (i := self._claim()) is not None:
            if self.error is None:
                try:
                    self.results[i] = self.fn(*self.items[i])
                except BaseException as exc:  # raised again in the caller
                    self.error = exc
            with self.lock:
                self.left -= 1
                if not self.left:
                    self.done.set()


class Crew:
    """Helper threads, started as a map first needs them, and the caller."""

    def __init__(self, threads: int, name: str = "pyreduce-cpu"):
        self.threads, self.name = max(1, threads), name
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._jobs: collections.deque = collections.deque()
        self._helpers: list = []

    def map(self, fn, items: list, threads: int | None = None) -> list:
        """``[fn(*item) for item in items]``, run by at most ``threads``
        threads (default: the crew's), the caller among them."""
        items = list(items)
        want = min(self.threads if threads is None else threads, len(items))
        if want <= 1:
            return [fn(*item) for item in items]
        job = _Job(fn, items, want - 1)
        with self._lock:
            self._start(want - 1)
            self._jobs.append(job)
            self._wake.notify(want - 1)
        try:
            job.work()
            job.done.wait()
        finally:
            with self._lock:  # no thread takes it up again, nor keeps its items
                self._jobs.remove(job)
        if job.error is not None:
            raise job.error
        return job.results

    def _start(self, helpers: int) -> None:
        while len(self._helpers) < helpers:
            t = threading.Thread(target=self._help, daemon=True,
                                 name=f"{self.name}-{len(self._helpers)}")
            t.start()
            self._helpers.append(t)

    def _next_job(self):
        """A posted job with a piece left and room for a helper, or None."""
        for job in self._jobs:
            if job.slots > 0 and job.open():
                return job
        return None

    def _help(self) -> None:
        while True:
            with self._lock:
                while (job := self._next_job()) is None:
                    self._wake.wait()
                job.slots -= 1
            job.work()
            del job  # a waiting helper keeps no job's pieces (a user's array) alive
