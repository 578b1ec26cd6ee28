"""The CPU backend: generated Numba ``njit`` folds, threads over contiguous chunks.

A single accumulator is one long dependency chain, so each fold keeps ``STREAMS``
accumulators and combines them at the end. How elements are dealt to them depends
on what the op allows:

* any associative op (user ops): the range is cut into ``STREAMS`` contiguous
  pieces folded side by side, then combined left to right, so order is kept;
* commutative built-ins: element ``i`` goes to lane ``i % LANES``, a layout the
  compiler turns into SIMD, like NumPy's own loops.

Large inputs are split into contiguous pieces, folded in parallel (``nogil``) by
the backend's crew of threads (:mod:`pyreduce.backends.crew`) and combined in
piece order. A child process made by ``fork()`` has none of the crew's threads:
it starts a crew of its own.

Numba's CPU target has no half precision: float16 elements are widened to
float32 (exactly) before the folds read them, which is also what an element map
sees on every backend. Everything is compiled with NumPy's error model
(:func:`pyreduce.backends.opcheck.host_njit`).

The built-in ops themselves go to NumPy's own reductions (``np.add.reduce`` and
friends, with the accumulator as ``dtype``): they have the semantics decided in
:mod:`pyreduce.ops` (NaN propagates through ``np.maximum`` and is ignored by
``np.fmax``, integers wrap in the accumulator) and SIMD loops with NaN handling
that Numba does not generate for ``a if a > b or a != a else b``. Large inputs
are split over the cores for them too (:mod:`pyreduce.backends.cpu_parallel`).
The generated folds serve every other op.
"""

from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from .. import njitcache
from ..cache import KERNELS
from ..codegen import compile_module, indent, render
from ..dtypes import as_value, code, is_bfloat16, is_tuple
from ..forks import renew_in_child
from ..deterministic import reduce_host as tree_reduce_host
from . import cpu_parallel
from .base import check_stream
from .cpu_batch import reduce_axes, reduce_segments
from .crew import Crew
from .cpu_parallel import UFUNCS, fold_parts, loadable, plain_ufunc, ufunc_reduce
from .opcheck import check_op, compiled_step, host_njit, njit_cast, njit_map, njit_op

__all__ = ["CpuBackend", "shared", "loadable", "UFUNCS"]

STREAMS = 8
LANES = 16


#: Ranges too short to split: one accumulator, left to right. Both folds call it.
SHORT = """
@njit(nogil=True)
def ${name}_short(x, lo, hi):
    acc = ${first}
    for i in range(lo + 1, hi):
        acc = acc_t(op(acc, ${elem_i}))
    return acc
"""


def element(index: str, mapped: bool) -> str:
    """Element ``x[index]`` as an accumulator value (through the op's map, if any)."""
    return f"acc_t(fmap({index}, x[{index}]))" if mapped else f"acc_t(x[{index}])"


def _short(name: str, mapped: bool) -> str:
    return render(SHORT, name=name, first=element("lo", mapped), elem_i=element("i", mapped))


def lanes_source(name: str, lanes: int, mapped: bool = False) -> str:
    """Source of ``name(x, lo, hi)`` folding ``x[lo:hi]`` into interleaved lanes
    (commutative ops with scalar accumulators only)."""
    return _short(name, mapped) + render(
        """
        @njit(nogil=True)
        def ${name}(x, lo, hi):
            m = (hi - lo) // ${K}
            if m < 2:
                return ${name}_short(x, lo, hi)
            lanes = np.empty(${K}, acc_t)
            for k in range(${K}):
                lanes[k] = ${elem_k}
            for i in range(1, m):
                base = lo + i * ${K}
                for k in range(${K}):
                    lanes[k] = acc_t(op(lanes[k], ${elem_bk}))
            acc = lanes[0]
            for k in range(1, ${K}):
                acc = acc_t(op(acc, lanes[k]))
            for i in range(lo + ${K} * m, hi):
                acc = acc_t(op(acc, ${elem_i}))
            return acc
        """,
        name=name, K=lanes, elem_k=element("lo + k", mapped),
        elem_bk=element("base + k", mapped), elem_i=element("i", mapped),
    )


def fold_source(name: str, streams: int, mapped: bool = False) -> str:
    """Source of ``name(x, lo, hi)``: the ordered fold of ``x[lo:hi]``, ``hi > lo``."""
    first = "\n".join(f"a{k} = {element(f'lo + {k} * m', mapped)}" for k in range(streams))
    step = "\n".join(
        f"a{k} = acc_t(op(a{k}, {element(f'lo + {k} * m + i', mapped)}))"
        for k in range(streams)
    )
    join = "\n".join(f"acc = acc_t(op(acc, a{k}))" for k in range(1, streams))
    return _short(name, mapped) + render(
        """
        @njit(nogil=True)
        def ${name}(x, lo, hi):
            m = (hi - lo) // ${K}
            if m < 2:
                return ${name}_short(x, lo, hi)
        ${first}
            for i in range(1, m):
        ${step}
            acc = a0
        ${join}
            for i in range(lo + ${K} * m, hi):
                acc = acc_t(op(acc, ${elem_i}))
            return acc
        """,
        name=name, K=streams, elem_i=element("i", mapped),
        first=indent(first, 1), step=indent(step, 2), join=indent(join, 1),
    )


#: Every CpuBackend, for the fork handler.
_BACKENDS = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for backend in list(_BACKENDS):
        backend._forget_pool()


os.register_at_fork(after_in_child=_after_fork_in_child)


class CpuBackend:
    name = "cpu"

    def __init__(self):
        self._forget_pool()
        self.threads = max(1, min(os.cpu_count() or 1, 32))
        _BACKENDS.add(self)

    def _forget_pool(self):
        """Start without threads: a new backend, or one in a child of ``fork()``,
        where the parent's threads do not exist (work sent to them would wait
        forever) and a lock another thread held at the fork stays held."""
        self._crew = None
        self._pool_lock = threading.Lock()

    def crew(self) -> Crew:
        """The threads that share a reduction's pieces (:mod:`pyreduce.backends.crew`)."""
        crew = self._crew
        if crew is None:
            with self._pool_lock:
                if self._crew is None:
                    self._crew = Crew(self.threads)
                crew = self._crew
        return crew

    def launch_stream(self, stream, info):
        """Nothing to launch on a device: streams do not apply (but a bad one is
        still refused)."""
        check_stream(stream)
        return None

    def fold(self, monoid):
        """The compiled ``fold(x, lo, hi)`` for ``monoid``."""
        def build():
            dt, mapped = code(monoid.dtype), monoid.map is not None
            if monoid.commutative and not is_tuple(monoid.dtype):
                name = f"pyreduce_cpu_lanes_{dt}_l{LANES}"
                source = lanes_source(name, LANES, mapped)
            else:
                name = f"pyreduce_cpu_streams_{dt}_s{STREAMS}"
                source = fold_source(name, STREAMS, mapped)
            namespace = {
                "njit": host_njit, "np": np, "op": njit_op(monoid),
                "acc_t": njit_cast(monoid.dtype),
            }
            if mapped:
                namespace["fmap"] = njit_map(monoid)
            compile_module(source, f"<pyreduce {name}>", namespace)
            return njitcache.attach(namespace[name], (source, njitcache.op_text(monoid)),
                                    f"the cpu fold of {monoid.name} ({monoid.dtype})")

        return KERNELS.get(("cpu", "fold", monoid.cache_key), build)

    def reduce_axes(self, host: np.ndarray, monoid, axes: tuple, initial=None) -> np.ndarray:
        """``axes`` of ``host`` reduced (:mod:`pyreduce.backends.cpu_batch`)."""
        return reduce_axes(self, host, monoid, axes, initial)

    def reduce_segments(self, x, offsets, monoid, initial, empty) -> np.ndarray:
        """Each segment ``x[offsets[i]:offsets[i + 1]]`` reduced."""
        return reduce_segments(self, x, offsets, monoid, initial, empty)

    def plain_fold(self, monoid, initial, tree: bool, info):
        """A repeat's fold of a host input of ``info``'s dtype, shape and strides
        (:func:`pyreduce.callmemo.remember_cpu`): ``fold(host)``, the value
        :meth:`reduce` gives an input too small to split, by the one NumPy call
        it makes, without the decisions around it; None from ``fold`` where the
        input would be split now (a test's smaller split, more threads). None
        where a repeat needs those decisions: an initial value, the fixed tree,
        bfloat16's bits, an empty input, a user's operator."""
        if initial is not None or tree or info.size == 0 or is_bfloat16(info.dtype):
            return None
        fn = monoid.host  # a structured reduction's NumPy function
        if fn is None:
            ufunc = plain_ufunc(monoid)
            if ufunc is None:
                return None
            acc = monoid.dtype

            def fn(x):
                return ufunc_reduce(ufunc, x, acc)

        result = monoid.result

        def fold(x):
            if x.nbytes >= cpu_parallel.SPLIT_BYTES and self.threads > 1:
                return None  # perhaps split: reduce() decides
            with np.errstate(all="ignore"):  # wrap-around and inf are the semantics
                raw = fn(x)
            return result(raw)  # a finisher's own warnings, as reduce()'s caller gives them

        return fold

    def reduce(self, host: np.ndarray, monoid, initial=None, tree: bool = False):
        """The accumulated value of ``host`` (non-empty; a scalar, or a tuple for a
        tuple accumulator), then ``op(initial, result)``; with ``tree``, in the
        fixed tree of :mod:`pyreduce.deterministic`."""
        if tree:
            return tree_reduce_host(host, monoid, initial)
        if monoid.host is not None:  # a built-in with a NumPy implementation
            acc = cpu_parallel.reduce_host(host, monoid, self.crew(), self.threads)
            return acc if initial is None else compiled_step(monoid)(initial, acc)
        ufunc = plain_ufunc(monoid)
        if ufunc is not None:
            result = cpu_parallel.reduce_ufunc(host, ufunc, monoid, self.crew(),
                                               self.threads)
            if initial is not None:
                with np.errstate(all="ignore"):
                    result = ufunc(monoid.dtype.type(initial), result, dtype=monoid.dtype)
            return monoid.dtype.type(result)
        # njit folds read any stride; only N-D needs flattening (a view when it can)
        x = loadable(host if host.ndim == 1 else np.ravel(host, order="C"))
        check_op(monoid)
        fold = self.fold(monoid)
        n = x.size
        parts = fold_parts(n, self.threads)
        if parts <= 1:
            partials = [fold(x, 0, n)]
        else:
            bounds = [n * p // parts for p in range(parts + 1)]
            partials = self.crew().map(
                fold, [(x, bounds[p], bounds[p + 1]) for p in range(parts)], self.threads)
        if initial is not None:
            partials.insert(0, initial)
        # partials are accumulators: combined with the op's step, no map again, each
        # of the accumulator's type (compiled code returns Python ints and floats,
        # and uint64 against int64 would compare in float64)
        step = compiled_step(monoid)
        partials = [as_value(p, monoid.dtype) for p in partials]
        acc = partials[0]
        for p in partials[1:]:
            acc = as_value(step(acc, p), monoid.dtype)
        return acc


_shared = None
_shared_lock = renew_in_child(threading.Lock())


def shared() -> CpuBackend:
    """The process's cpu backend, made on first use: what
    ``pyreduce.backends.get("cpu")`` returns, and whose threads stage host
    inputs for the GPU backends (:mod:`pyreduce.backends.staging`)."""
    global _shared
    if _shared is None:
        with _shared_lock:
            if _shared is None:
                _shared = CpuBackend()
    return _shared
