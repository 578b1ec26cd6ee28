"""Numba ``njit`` functions kept in the disk cache (:mod:`pyreduce.diskcache`).

Numba's own ``cache=True`` finds a function's cache by its source file and keys
it by the function's bytecode: generated source has no file, and a function
that calls an operator (a global of the generated module, or a closure value) is
not keyed by that operator's code, so it cannot tell two operators apart. Here a
dispatcher gets a cache under a key the caller computes soundly (the generated
source, the operator's code key, the dtypes: :func:`attach`); Numba adds the
argument types and the host CPU's name and features, and pyreduce the versions
of Numba, llvmlite, Python and pyreduce itself. The compiled result is stored
and loaded by Numba's own serialisation (what ``cache=True`` stores), inside the
store's digest-checked files; a file that fails to load is compiled again.
"""

from __future__ import annotations

import sys
import time

from . import diskcache

__all__ = ["attach", "op_text", "compiler_versions"]

KIND = "cpu"


def compiler_versions() -> tuple:
    """Numba's, llvmlite's and Python's versions, and pyreduce's code version."""
    import llvmlite
    import numba

    return (numba.__version__, llvmlite.__version__, sys.version, diskcache.code_version())


def op_text(monoid) -> str | None:
    """The operator's code key and dtype as key text
    (:func:`pyreduce.diskcache.op_key`), or None for an op known only by identity."""
    try:
        return diskcache.op_key(monoid.cache_key)
    except diskcache.Unkeyable:
        return None


def attach(dispatcher, key, what: str):
    """Give the Numba dispatcher ``dispatcher`` a disk cache keyed by ``key`` (a
    tuple of what determines its code besides the argument types; None: leave it
    uncached, e.g. an op known only by identity) and report its compiles as
    ``what`` (:func:`pyreduce.diskcache.report_compile`). Returns the dispatcher."""
    if key is not None and None not in key and diskcache.enabled():
        try:
            text = diskcache.canonical(("njit", key, compiler_versions()))
        except diskcache.Unkeyable:
            text = None
        if text is not None:
            # Numba stores a function's globals by their module's name and imports
            # it to load them; nopython code reads none of them (its callees are
            # compiled in), so generated source names this module
            dispatcher.py_func.__globals__.setdefault("__name__", __name__)
            dispatcher._cache = _StoreCache(text, what)
            return dispatcher
    dispatcher._cache = _TimedNullCache(what)
    return dispatcher


class _TimedNullCache:
    """No cache: only the compile's time is reported (Numba calls ``load`` just
    before it compiles and ``save`` just after)."""

    cache_path = None

    def __init__(self, what: str):
        self._what, self._start = what, None

    def load_overload(self, sig, target_context):
        self._start = time.perf_counter()
        return None

    def save_overload(self, sig, cres):
        if self._start is not None:
            diskcache.report_compile(self._what, time.perf_counter() - self._start)
            self._start = None

    def enable(self):
        pass

    def disable(self):
        pass

    def flush(self):
        pass


class _StoreCache(_TimedNullCache):
    """Numba's cache interface over :mod:`pyreduce.diskcache`: one entry per
    argument types and host CPU, each a pickled Numba compile result."""

    def __init__(self, key_text: str, what: str):
        super().__init__(what)
        self._key = key_text

    def _entry_key(self, sig, codegen) -> str:
        return self._key + "|" + diskcache.canonical((str(sig), repr(codegen.magic_tuple())))

    def load_overload(self, sig, target_context):
        target_context.refresh()
        entry = diskcache.load(KIND, self._entry_key(sig, target_context.codegen()))
        if entry is not None:
            try:
                return _rebuild(target_context, entry.payload)
            except Exception:  # another Numba's data, or damaged in a way the digest allows
                diskcache.log.debug("pyreduce cache: a stored %s did not load", self._what)
        return super().load_overload(sig, target_context)

    def save_overload(self, sig, cres):
        super().save_overload(sig, cres)
        if cres.library.has_dynamic_globals or any(not f.can_cache for f in cres.lifted):
            return  # code holding this process's addresses (as Numba's cache refuses)
        from numba.core.serialize import dumps

        try:
            payload = dumps(cres._reduce())
        except Exception:  # something in the result Numba cannot serialise
            return
        diskcache.store(KIND, self._entry_key(sig, cres.library.codegen),
                        payload, {"what": self._what})


def _rebuild(target_context, payload: bytes):
    import pickle

    from numba.core.compiler import CompileResult

    return CompileResult._rebuild(target_context, *pickle.loads(payload))
