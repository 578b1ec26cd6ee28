"""The CPU backend's reductions to many values: ``axis=`` and segments.

Built-in ops go to NumPy (``ufunc.reduce`` with ``axis=`` and the accumulator as
``dtype``; ``ufunc.reduceat`` over the non-empty segments), which has their
semantics (:mod:`pyreduce.ops`). Every other op runs generated ``njit`` loops
that keep the order: an ``axis=`` reduction is first viewed as an ``(M, K)``
array (``x.transpose(kept + reduced).reshape(M, K)``, a copy only where NumPy
needs one), then

* where each row is contiguous, every row goes through the backend's ordered
  ``fold`` (:func:`pyreduce.backends.cpu.fold_source`);
* otherwise the rows are walked together, ``k`` outer and ``m`` inner, so that
  the loads follow memory, each output still folded in ``k`` order.

Rows (segments) are split into contiguous ranges, shared by the backend's crew
of threads (up to :data:`~pyreduce.backends.cpu_parallel.PIECES_PER_THREAD` a
core), when there is enough work; a few long rows are each reduced by the
parallel 1-D path instead.

An element map sees each element's position in its row (segment), from 0: a
row is folded as a 1-D array of its own. Tuple accumulators are written to
record arrays field by field (Numba does not assign a tuple to a record).
"""

from __future__ import annotations

import numpy as np

from ..cache import KERNELS
from ..codegen import compile_module, indent, render
from ..dtypes import as_value, fields, is_tuple
from . import cpu_parallel
from .cpu_parallel import loadable, plain_ufunc, ufunc_reduce
from .opcheck import check_op, host_njit, njit_cast, njit_map, njit_op

__all__ = ["reduce_axes", "reduce_segments"]

_SOURCE = """
@njit(nogil=True)
def rows(x, out, lo, hi):
    for m in range(lo, hi):
${put_row}


@njit(nogil=True)
def columns(x, out, lo, hi):
    for m in range(lo, hi):
${put_first}
    for k in range(1, x.shape[1]):
        for m in range(lo, hi):
${put_step}


@njit(nogil=True)
def segments(x, offsets, out, lo, hi):
    for s in range(lo, hi):
        if offsets[s + 1] > offsets[s]:
${put_segment}


@njit(nogil=True)
def left(init, out):
    for m in range(out.shape[0]):
${put_left}
"""


def _put(dtype, index: str, value: str, level: int) -> str:
    """``out[index] = value``, field by field for a tuple accumulator."""
    if not is_tuple(dtype):
        return indent(f"out[{index}] = {value}", level)
    lines = [f"v = {value}"] + [f"out[{index}]['f{k}'] = v[{k}]"
                                for k in range(len(fields(dtype)))]
    return indent("\n".join(lines), level)


def _get(dtype, index: str) -> str:
    """``out[index]`` as an accumulator value (a tuple for a tuple accumulator)."""
    if not is_tuple(dtype):
        return f"out[{index}]"
    return "(" + ", ".join(f"out[{index}]['f{k}']" for k in range(len(fields(dtype)))) + ")"


def _element(monoid, k: str) -> str:
    """Element ``x[m, k]``, the ``k``-th of its row, as an accumulator value."""
    if monoid.map is not None:
        return f"acc_t(fmap({k}, x[m, {k}]))"
    return f"acc_t(x[m, {k}])"


def _source(monoid) -> str:
    dt = monoid.dtype
    segment = "fold(x[offsets[s]:offsets[s + 1]], 0, offsets[s + 1] - offsets[s])"
    return render(
        _SOURCE,
        put_row=_put(dt, "m", "fold(x[m], 0, x.shape[1])", 2),
        put_first=_put(dt, "m", _element(monoid, "0"), 2),
        put_step=_put(dt, "m", f"acc_t(op({_get(dt, 'm')}, {_element(monoid, 'k')}))", 3),
        put_segment=_put(dt, "s", segment, 3),
        put_left=_put(dt, "m", f"acc_t(op(init, {_get(dt, 'm')}))", 2),
    )


def _loops(cpu, monoid) -> dict:
    """The compiled loops for ``monoid`` (``rows``, ``columns``, ``segments``,
    ``left``), around the backend's ordered ``fold``."""
    def build():
        namespace = {"njit": host_njit, "op": njit_op(monoid),
                     "acc_t": njit_cast(monoid.dtype), "fold": cpu.fold(monoid)}
        if monoid.map is not None:
            namespace["fmap"] = njit_map(monoid)
        compile_module(_source(monoid), f"<pyreduce cpu batch {monoid.dtype}>", namespace)
        return {name: namespace[name] for name in ("rows", "columns", "segments", "left")}

    return KERNELS.get(("cpu", "batch", monoid.cache_key), build)


def _ranges(cpu, count: int, work: int) -> list:
    """``count`` outputs cut into contiguous ranges of at least
    :data:`~pyreduce.backends.cpu_parallel.PARALLEL_MIN` elements of ``work``
    each, up to :data:`~pyreduce.backends.cpu_parallel.PIECES_PER_THREAD` a thread."""
    parts = max(1, min(cpu_parallel.PIECES_PER_THREAD * cpu.threads, count,
                       work // cpu_parallel.PARALLEL_MIN))
    bounds = [count * p // parts for p in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _run(cpu, fn, ranges, *args) -> None:
    if len(ranges) == 1:
        fn(*args, *ranges[0])
        return
    cpu.crew().map(fn, [(*args, lo, hi) for lo, hi in ranges], cpu.threads)


def _with_initial(cpu, monoid, out: np.ndarray, initial) -> np.ndarray:
    if initial is not None:
        _loops(cpu, monoid)["left"](as_value(initial, monoid.dtype), out)
    return out


def reduce_axes(cpu, host: np.ndarray, monoid, axes: tuple, initial) -> np.ndarray:
    """The reduction of ``axes`` of ``host`` (every extent at least 1), as an
    array of the kept axes' shape."""
    acc = monoid.dtype
    ufunc = plain_ufunc(monoid)
    if ufunc is not None:
        with np.errstate(all="ignore"):  # wrap-around and inf are the semantics
            result = ufunc_reduce(ufunc, host, acc, axes)
            if initial is not None:
                result = ufunc(acc.type(initial), result, dtype=acc)
        return np.asarray(result, dtype=acc)
    check_op(monoid)
    kept = [a for a in range(host.ndim) if a not in axes]
    kept_shape = tuple(host.shape[a] for a in kept)
    M = int(np.prod(kept_shape, dtype=np.int64))
    x = loadable(host).transpose(kept + list(axes)).reshape(M, -1)
    out = np.empty(M, acc)
    loops = _loops(cpu, monoid)
    if M < cpu.threads and x.size >= 2 * M * cpu_parallel.PARALLEL_MIN:
        for m in range(M):  # a few long rows: each one in parallel pieces
            out[m] = cpu.reduce(x[m], monoid)
    else:
        rowwise = abs(x.strides[1]) <= abs(x.strides[0])
        _run(cpu, loops["rows" if rowwise else "columns"], _ranges(cpu, M, x.size), x, out)
    return _with_initial(cpu, monoid, out, initial).reshape(kept_shape)


def reduce_segments(cpu, x: np.ndarray, offsets: np.ndarray, monoid, initial,
                    empty) -> np.ndarray:
    """``x[offsets[i] : offsets[i + 1]]`` reduced for each ``i``; empty segments
    get ``empty`` (validated offsets: non-decreasing, within ``x``)."""
    acc = monoid.dtype
    S = offsets.size - 1
    out = np.empty(S, acc)
    nonempty = offsets[1:] > offsets[:-1]
    if not nonempty.all():
        out[~nonempty] = empty
    if not nonempty.any():
        return out
    ufunc = plain_ufunc(monoid)
    if ufunc is not None:
        starts = offsets[:-1][nonempty]
        # consecutive non-empty segments tile x[starts[0]:end]: reduceat's runs
        span = x[starts[0]:offsets[-1]]
        with np.errstate(all="ignore"):
            values = ufunc.reduceat(span, starts - starts[0], dtype=acc)
            if initial is not None:
                values = ufunc(acc.type(initial), values, dtype=acc)
        out[nonempty] = values
        return out
    check_op(monoid)
    filled = np.empty(S, acc)
    _run(cpu, _loops(cpu, monoid)["segments"], _ranges(cpu, S, x.size), loadable(x), offsets,
         filled)
    out[nonempty] = _with_initial(cpu, monoid, filled[nonempty], initial)
    return out
