"""The process-wide caches: built kernels, and the bounded memos of decisions.

:data:`KERNELS` holds the built kernels and compiled operators of every backend.
Keys are ``(backend key, KernelSpec)`` and the like; the spec holds the operator's
code key (:func:`pyreduce.ops.function_key`), so two lambdas with the same code and
captured values share one kernel. Each key is built once even when several threads
ask for it at the same moment.

Every cache here is bounded: a long-running process that makes new operators (a
closure over a new array per call) keeps at most :data:`KERNELS_MAXSIZE` kernels
and the operators they call, and drops the least recently used first. Keys hold no
user arrays (an array an op reads is keyed by a digest of its contents), and the
kernels call a copy of the op (:func:`pyreduce.opkey.freeze`), so no cache keeps a
user's array alive. Numba keeps the machine code it compiled whatever is dropped
here (``docs/kernels.md``, "The kernel cache"), so the bound is generous: a
kernel built again is compiled again.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import os
import threading
import weakref
from typing import Callable, Hashable

from .log import logger

__all__ = ["KernelCache", "CacheInfo", "KERNELS", "KERNELS_MAXSIZE", "Memo", "MEMOS"]

#: Kernels and compiled operators kept at most (all backends together).
KERNELS_MAXSIZE = 256


@dataclasses.dataclass(frozen=True)
class CacheInfo:
    """What :func:`pyreduce.cache_info` reports: lookups that found a kernel
    (``hits``), kernels built (``builds``), kernels held now (``size``), the most it
    holds (``maxsize``) and kernels dropped to stay within it (``evictions``)."""

    hits: int
    builds: int
    size: int
    maxsize: int = KERNELS_MAXSIZE
    evictions: int = 0


class KernelCache:
    """A thread-safe cache of built objects, at most ``maxsize`` of them, least
    recently used dropped first. Dropping an entry only forgets it: whoever still
    holds the object (a plan's executable) keeps using it."""

    def __init__(self, maxsize: int = KERNELS_MAXSIZE):
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict = collections.OrderedDict()
        # key -> [lock, threads using it]: one builder per key, forgotten when done
        self._key_locks: dict = {}
        self._hits = self._builds = self._evictions = 0
        self.maxsize = _check_size(maxsize)

    def get(self, key: Hashable, build: Callable):
        """The object for ``key``, built by ``build()`` on a miss."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self._hits += 1
                if logger.isEnabledFor(logging.DEBUG):  # naming the key is not free
                    logger.debug("kernel cache hit: %s", _name(key))
                return found
            slot = self._key_locks.setdefault(key, [threading.Lock(), 0])
            slot[1] += 1
        try:
            with slot[0]:  # one builder per key; others wait and then hit
                with self._lock:
                    found = self._entries.get(key)
                    if found is not None:
                        self._hits += 1
                        return found
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug("kernel cache miss, building: %s", _name(key))
                found = build()
                with self._lock:
                    self._entries[key] = found
                    self._builds += 1
                    self._trim()
                return found
        finally:
            with self._lock:
                slot[1] -= 1
                if not slot[1] and self._key_locks.get(key) is slot:
                    del self._key_locks[key]

    def _trim(self) -> None:
        while len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
            self._evictions += 1

    def resize(self, maxsize: int) -> None:
        """Hold at most ``maxsize`` entries from now on (dropping the oldest)."""
        with self._lock:
            self.maxsize = _check_size(maxsize)
            self._trim()

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._builds, len(self._entries), self.maxsize,
                             self._evictions)

    def renew_locks(self) -> None:
        """New locks, for a child of ``fork()``: a lock another thread held
        during the fork (a kernel being built) would never be released there.
        The entries stay: each was stored whole."""
        self._lock = threading.Lock()
        self._key_locks = {}

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._hits = self._builds = self._evictions = 0


def _check_size(maxsize) -> int:
    if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
        raise ValueError(f"maxsize must be a positive int, got {maxsize!r}")
    return maxsize


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


class Memo:
    """A dict of remembered decisions bounded to ``maxsize`` entries, the least
    recently used dropped first. Safe to share between threads without a lock:
    each step is one operation on an ``OrderedDict``, and a key another thread
    has just dropped is simply not found. ``get``/``put`` raise TypeError for an
    unhashable key, which callers take as "not remembered"."""

    def __init__(self, name: str, maxsize: int):
        self.name = name
        self.maxsize = _check_size(maxsize)
        self._data: collections.OrderedDict = collections.OrderedDict()
        self._owners: dict = {}  # key -> weak reference to what the entry is for
        #: ``peek(key, default=None)``: :meth:`get` without marking the entry used
        #: (a hit does not keep it from being dropped first): one dict lookup
        self.peek = self._data.get
        MEMOS[name] = self

    def get(self, key, default=None):
        data = self._data
        try:
            value = data[key]
            data.move_to_end(key)
        except KeyError:
            return default
        return value

    def put(self, key, value, owner=None) -> None:
        """Remember ``value`` for ``key``; with ``owner`` (a user's function the
        entry is for), only while the owner lives: an entry for a dead function is
        never found again, so it is dropped at once rather than hold what it
        holds until it is the least recently used."""
        data = self._data
        # the entry's key object is this one, which the owner's callback names:
        # a dead owner's key equals nothing, so it is found by identity only
        data.pop(key, None)
        self._owners.pop(key, None)
        data[key] = value
        if owner is not None:
            try:
                self._owners[key] = weakref.ref(owner, functools.partial(self._drop, key))
            except TypeError:  # no weak references to it: kept until dropped
                pass
        while len(data) > self.maxsize:
            try:
                self._owners.pop(data.popitem(last=False)[0], None)
            except KeyError:  # emptied by another thread meanwhile
                break

    def _drop(self, key, _ref=None) -> None:
        self._data.pop(key, None)
        self._owners.pop(key, None)

    def resize(self, maxsize: int) -> None:
        """Hold at most ``maxsize`` entries from now on (dropping the oldest)."""
        self.maxsize = _check_size(maxsize)
        while len(self._data) > self.maxsize:
            self._owners.pop(self._data.popitem(last=False)[0], None)

    def __len__(self) -> int:
        return len(self._data)

    def values(self) -> list:
        """The remembered values, least recently used first."""
        return list(self._data.values())

    def clear(self) -> None:
        self._data.clear()
        self._owners.clear()


#: Every :class:`Memo` by name (emptied by :func:`pyreduce.cache_clear`).
MEMOS: dict = {}
