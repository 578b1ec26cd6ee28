"""What a child process of ``fork()`` must start anew.

The child has only the thread that called ``fork()`` (multiprocessing's default
on Linux). A lock that another thread held at that moment stays held in the
child, where nothing will release it, so the child's first call that takes it
would wait forever. Modules register their process-wide locks here where they
make them; the kernel cache renews its own (:mod:`pyreduce.cache`), and the cpu
backend drops its thread pool, whose threads the child does not have
(:mod:`pyreduce.backends.cpu`).
"""

from __future__ import annotations

import os

__all__ = ["renew_in_child"]


def renew_in_child(lock):
    """``lock`` (a ``threading.Lock`` or ``RLock``), returned; in a child of
    ``fork()`` it is released and owned by no thread."""
    # _at_fork_reinit is what threading, logging and concurrent.futures use for theirs
    os.register_at_fork(after_in_child=lock._at_fork_reinit)
    return lock
