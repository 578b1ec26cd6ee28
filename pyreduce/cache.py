"""The process-wide cache of built kernels, safe under concurrent calls.

Keys are ``(backend key, KernelSpec)``; the spec holds the operator's code key, so
two lambdas with the same code and captured values share one kernel. Each key is
built once even when several threads ask for it at the same moment.
"""

from __future__ import annotations

import dataclasses
import os
import logging
import threading
from typing import Callable, Hashable

from .log import logger

__all__ = ["KernelCache", "CacheInfo", "KERNELS"]


@dataclasses.dataclass(frozen=True)
class CacheInfo:
    hits: int
    builds: int
    size: int


class KernelCache:
    def __init__(self):
        self._lock = threading.Lock()
        self._entries: dict = {}
        self._key_locks: dict = {}
        self._hits = 0
        self._builds = 0

    def get(self, key: Hashable, build: Callable):
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._hits += 1
                if logger.isEnabledFor(logging.DEBUG):  # naming the key is not free
                    logger.debug("kernel cache hit: %s", _name(key))
                return found
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # one builder per key; others wait and then hit
            with self._lock:
                found = self._entries.get(key)
            if found is None:
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug("kernel cache miss, building: %s", _name(key))
                found = build()
                with self._lock:
                    self._entries[key] = found
                    self._builds += 1
            else:
                with self._lock:
                    self._hits += 1
        return found

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._builds, len(self._entries))

    def renew_locks(self) -> None:
        """New locks, for a child of ``fork()``: a lock another thread held
        during the fork (a kernel being built) would never be released there.
        The entries stay: each was stored whole."""
        self._lock = threading.Lock()
        self._key_locks = {}

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._key_locks.clear()
            self._hits = self._builds = 0


def _name(key) -> str:
    """A cache key as a log record names it: kernel specs by their label, user
    operators by their function's name (not their bytecode)."""
    if getattr(key, "label", None):
        return key.label
    if isinstance(key, tuple):
        if key[:1] == ("fn",) and len(key) > 1:
            return f"op {key[1]}"
        return " ".join(filter(None, (_name(part) for part in key)))
    return "" if isinstance(key, bytes) else str(key)


#: Kernels of every backend, and the compiled operators they call.
KERNELS = KernelCache()
os.register_at_fork(after_in_child=KERNELS.renew_locks)
