"""The CPU backend: generated Numba ``njit`` folds, threads over contiguous chunks.

Order is kept without giving up speed: a range is cut into ``STREAMS`` contiguous
pieces folded side by side in one loop (independent dependency chains the core can
overlap), and the pieces are then combined left to right. Large inputs are split
into one chunk per core, folded in parallel (``nogil``) and combined in chunk
order. Only associativity is assumed, never commutativity.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading

import numpy as np

from ..cache import KERNELS
from ..codegen import compile_module, indent, render

__all__ = ["CpuBackend"]

STREAMS = 8
#: Below this many elements one thread does it all.
PARALLEL_MIN = 1 << 20


def fold_source(name: str, streams: int) -> str:
    """Source of ``name(x, lo, hi)``: the ordered fold of ``x[lo:hi]``, ``hi > lo``."""
    first = "\n".join(f"a{k} = acc_t(x[lo + {k} * m])" for k in range(streams))
    step = "\n".join(
        f"a{k} = acc_t(op(a{k}, acc_t(x[lo + {k} * m + i])))" for k in range(streams)
    )
    join = "\n".join(f"acc = acc_t(op(acc, a{k}))" for k in range(1, streams))
    return render(
        """
        @njit(nogil=True)
        def ${name}(x, lo, hi):
            m = (hi - lo) // ${K}
            if m < 2:
                acc = acc_t(x[lo])
                for i in range(lo + 1, hi):
                    acc = acc_t(op(acc, acc_t(x[i])))
                return acc
        ${first}
            for i in range(1, m):
        ${step}
            acc = a0
        ${join}
            for i in range(lo + ${K} * m, hi):
                acc = acc_t(op(acc, acc_t(x[i])))
            return acc
        """,
        name=name, K=streams,
        first=indent(first, 1), step=indent(step, 2), join=indent(join, 1),
    )


class CpuBackend:
    name = "cpu"

    def __init__(self):
        self._pool = None
        self._pool_lock = threading.Lock()
        self.threads = max(1, min(os.cpu_count() or 1, 32))

    def _executor(self):
        with self._pool_lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self.threads, thread_name_prefix="pyreduce-cpu"
                )
            return self._pool

    def op(self, monoid):
        """The operator compiled with ``njit``, shared by every fold that calls it."""
        from numba import njit

        return KERNELS.get(("cpu", "op", monoid.key), lambda: njit(monoid.fn))

    def fold(self, monoid):
        """The compiled ``fold(x, lo, hi)`` for ``monoid``."""
        from numba import njit

        def build():
            name = f"pyreduce_cpu_fold_{monoid.dtype.str[1:]}_s{STREAMS}"
            namespace = {"njit": njit, "op": self.op(monoid), "acc_t": monoid.dtype.type}
            compile_module(fold_source(name, STREAMS), f"<pyreduce {name}>", namespace)
            return namespace[name]

        return KERNELS.get(("cpu", "fold", monoid.cache_key), build)

    def check_op(self, monoid):
        """Compile ``op(acc, acc)`` now, so a bad op is a TypeError before any launch."""
        from numba import typeof
        from numba.core.errors import NumbaError

        fn = self.op(monoid)
        t = typeof(monoid.dtype.type(0))
        try:
            fn.compile((t, t))
        except NumbaError as exc:
            raise TypeError(
                f"op {monoid.name!r} could not be compiled by Numba for {monoid.dtype}: "
                f"{str(exc).strip().splitlines()[0]}"
            ) from exc

    def reduce(self, host: np.ndarray, monoid, initial=None):
        # njit folds read any stride; only N-D needs flattening (a view when it can)
        x = host if host.ndim == 1 else np.ravel(host, order="C")
        self.check_op(monoid)
        fold = self.fold(monoid)
        n = x.size
        parts = min(self.threads, n // PARALLEL_MIN)
        if parts <= 1:
            partials = [fold(x, 0, n)]
        else:
            bounds = [n * p // parts for p in range(parts + 1)]
            futures = [
                self._executor().submit(fold, x, bounds[p], bounds[p + 1])
                for p in range(parts)
            ]
            partials = [f.result() for f in futures]
        if initial is not None:
            partials.insert(0, monoid.dtype.type(initial))
        if len(partials) == 1:
            return monoid.dtype.type(partials[0])
        return monoid.dtype.type(fold(np.asarray(partials, dtype=monoid.dtype), 0, len(partials)))
