"""The cpu backend's built-in reductions on every core.

The built-in ops run NumPy's own reductions (``ufunc.reduce`` with the
accumulator as ``dtype``, and the structured reductions' ``Monoid.host``
functions: ``np.argmax``, ``np.mean``, ...). NumPy runs each on one thread, but
releases the GIL while it loops over numeric data, so a large input is cut
into contiguous pieces of at least :data:`PIECE_BYTES`, up to
:data:`PIECES_PER_THREAD` for each core; the backend's crew of threads, the
calling thread among them, reduces them at once (:mod:`pyreduce.backends.crew`)
and their partial results are combined with the op, in piece order
(:func:`combine`; a float sum's partials pairwise, as NumPy sums). A piece is
a range of the C-order flattening of a C-contiguous or 1-D input, or a range
of rows (along axis 0) of any other N-D one.

What changes with the split, and what does not:

* max, min, nanmax, nanmin, the bitwise and logical ops, integer sums and
  products (wrapping in the accumulator), argmax, argmin and minmax are exact:
  the result is the one-thread result, bit for bit (NaN propagates from any
  piece through ``np.maximum``, ``np.fmax`` ignores it);
* float and complex sums: each piece is NumPy's pairwise sum, the partials are
  then summed, so the rounding error bound is at most NumPy's own;
* products, ``nansum``/``nanprod`` and ``mean``/``var``/``std`` (whose pieces'
  ``(count, shift, s, q)`` summaries merge as the GPU kernels merge
  theirs) round differently from one NumPy call, within the same bounds;
* a float16 input whose result rounds is reduced by one NumPy call, as before:
  NumPy converts it to float32 in buffers whose sums it adds one by one, a
  rounding a split cannot reproduce.
"""

from __future__ import annotations

import functools

import numpy as np

from ..dtypes import as_value, negative_zero
from .opcheck import compiled_step

__all__ = ["PIECE_BYTES", "SPLIT_BYTES", "PIECES_PER_THREAD", "fold_parts", "pieces",
           "part_count", "reduce_ufunc", "plain_ufunc",
           "reduce_host", "combine", "shift_index", "shifts_index", "reads_index",
           "builtin_ufunc", "ufunc_reduce", "EXACT", "PARALLEL_MIN", "UFUNCS", "loadable"]

#: The least input a piece of a built-in reads, in bytes; an input of less
#: than :data:`SPLIT_BYTES` is one NumPy call. A piece costs its thread two
#: takes of the GIL (to start NumPy's loop, and to hand back its result),
#: which under contention on a 16-core host took tens of microseconds each: in
#: pieces of 256 KiB a float64 ``max`` of 1e6 elements took 1.3-1.5 ms against
#: NumPy's 0.34 ms in one call, and in pieces of 1 MiB 0.5-0.65 ms
#: (``bench/cpu_pieces.py``), so pieces stay large and one a thread. Under
#: 16 MiB NumPy's loop reads from the cache, fast enough that a split lost:
#: 2**20 float64 elements (8 MiB) on a 2-core host took 0.15 ms in two pieces
#: against NumPy's 0.10 ms in one call.
PIECE_BYTES = 1 << 22
SPLIT_BYTES = 1 << 24

#: The most pieces an input is cut into, per thread: more pieces than threads
#: cost more takes of the GIL than a late thread's share is worth.
PIECES_PER_THREAD = 1

#: The least elements a piece of a generated fold reads (a range of a 1-D
#: input, or the rows of an axis= or segmented reduction,
#: :mod:`pyreduce.backends.cpu_batch`): below twice this many one thread does
#: it all. A fold of ``a if a > b else b`` takes some 0.5-1 ns an element on a
#: 16-core host, 0.13-0.26 ms for a piece of 2**18 elements.
PARALLEL_MIN = 1 << 18


def fold_parts(n: int, threads: int) -> int:
    """How many pieces a generated fold of ``n`` elements is cut into."""
    if threads <= 1 or n < 2 * PARALLEL_MIN:
        return 1
    return min(PIECES_PER_THREAD * threads, n // PARALLEL_MIN)


#: Built-in op name -> the NumPy ufunc with the same semantics.
UFUNCS = {
    "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
    "nanmax": np.fmax, "nanmin": np.fmin,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "logical_and": np.logical_and, "logical_or": np.logical_or,
}


def plain_ufunc(monoid):
    """NumPy's ufunc for a built-in op without an element map, else None."""
    return UFUNCS.get(monoid.name) if monoid.key[0] == "builtin" else None


def ufunc_reduce(ufunc, values, acc: np.dtype, axis=None):
    """``ufunc.reduce(values, axis, dtype=acc)``, a float or complex sum seeded
    with -0.0, the exact identity of IEEE addition: NumPy seeds its sums with
    0.0, so that a sum of negative zeros would be +0.0 where the kernels' fold
    (and ``functools.reduce``) gives -0.0. Every other value is NumPy's, bit for
    bit (``x + -0.0`` is ``x``). ``values`` has at least one element."""
    if ufunc is np.add and acc.kind in "fc":
        return ufunc.reduce(values, axis=axis, dtype=acc, initial=negative_zero(acc))
    return ufunc.reduce(values, axis=axis, dtype=acc)


def loadable(x: np.ndarray) -> np.ndarray:
    """``x`` as the generated folds read it: float16, which Numba's CPU target
    lacks, widened to float32 (every float16 is a float32)."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


#: Ops whose partials combine without rounding: any split gives NumPy's result.
EXACT = frozenset({"max", "min", "nanmax", "nanmin", "and", "or", "xor", "logical_and",
                   "logical_or", "argmax", "argmin", "minmax", "nanargmax", "nanargmin"})


def library_op(monoid):
    """``("builtin", name)`` or ``("structured", name)`` for the library's own
    ops (a built-in also under an element map), None for a user's op."""
    key = monoid.key
    if key[0] == "mapped":
        key = key[1]
    if isinstance(key, tuple) and len(key) == 2 and key[0] in ("builtin", "structured"):
        return key
    return None


def _exact(monoid) -> bool:
    if monoid.dtype.names is None and monoid.dtype.kind in "biu":
        return True
    op = library_op(monoid)
    return op is not None and op[1] in EXACT


def part_count(x: np.ndarray, monoid, threads: int) -> int:
    """How many pieces to reduce ``x`` in: 1 (one NumPy call) where the input is
    small, the split would change a float16 result, or the host function cannot
    be split (an element map reading the index that is not the argmax's)."""
    if threads <= 1 or x.nbytes < SPLIT_BYTES:  # the commonest answer, and the cheapest
        return 1
    if x.dtype == np.float16 and not _exact(monoid):
        return 1
    if monoid.host is not None and monoid.map is not None and not _splittable_map(monoid):
        return 1
    rows = x.shape[0] if x.ndim > 1 and not x.flags.c_contiguous else x.size
    return max(1, min(PIECES_PER_THREAD * threads, x.nbytes // PIECE_BYTES, rows))


def _splittable_map(monoid) -> bool:
    return not reads_index(monoid.map) or shifts_index(monoid)


def reads_index(fmap) -> bool:
    """Whether the element map ``fmap(i, v)`` may read ``i`` (its bytecode
    names it anywhere but in a store): a piece's map would then see indices
    counted from the piece's start."""
    return _code_reads_index(fmap.__code__)


@functools.lru_cache(maxsize=256)  # by code object: reading its bytecode takes tens of us
def _code_reads_index(code) -> bool:
    import dis

    name = code.co_varnames[0]
    if name in code.co_cellvars:  # captured by a nested function
        return True
    for ins in dis.get_instructions(code):
        names = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
        if name not in names or ins.opname in _STORES:
            continue
        if ins.opname == "STORE_FAST_LOAD_FAST" and names[1] != name:
            continue  # (3.13+) stores ``i``, loads another name
        return True
    return False


_STORES = frozenset({"STORE_FAST", "STORE_FAST_STORE_FAST", "DELETE_FAST"})


def pieces(x: np.ndarray, parts: int) -> list:
    """``(offset, view)`` for ``parts`` contiguous ranges of ``x``'s C-order
    flattening (``offset``: the flat index of the view's first element)."""
    if x.ndim <= 1 or x.flags.c_contiguous:
        flat = x.reshape(-1)
        bounds = [flat.size * p // parts for p in range(parts + 1)]
        return [(lo, flat[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]
    inner = x.size // x.shape[0]
    bounds = [x.shape[0] * p // parts for p in range(parts + 1)]
    return [(lo * inner, x[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]


def reduce_ufunc(x: np.ndarray, ufunc, monoid, crew, threads: int):
    """``ufunc.reduce`` of every element of ``x`` into ``monoid.dtype``, on up to
    ``threads`` threads of ``crew`` (a :class:`~pyreduce.backends.crew.Crew`),
    the calling thread among them."""
    acc = monoid.dtype
    parts = part_count(x, monoid, threads)

    def one(offset, piece):
        with np.errstate(all="ignore"):  # wrap-around and inf are the semantics
            return ufunc_reduce(ufunc, piece, acc)

    if parts == 1:
        return acc.type(one(0, x))
    partials = np.asarray(crew.map(one, pieces(x, parts), threads), dtype=acc)
    with np.errstate(all="ignore"):
        if ufunc is np.add and acc.kind in "fc":
            return acc.type(pairwise_sum(partials))
        return acc.type(ufunc_reduce(ufunc, partials, acc))


def pairwise_sum(values: np.ndarray):
    """The sum of ``values`` in a balanced tree of additions (neighbours first,
    as NumPy's pairwise sum adds its blocks): the pieces' sums of a float input
    keep the error bound of one NumPy call."""
    while values.size > 1:
        odd = values[-1:] if values.size % 2 else values[:0]
        values = np.concatenate((values[0:values.size - 1:2] + values[1::2], odd))
    return values[0]


def reduce_host(x: np.ndarray, monoid, crew, threads: int):
    """``monoid.host`` of ``x`` (a structured reduction's NumPy function), split
    into pieces whose accumulators are combined with the op."""
    parts = part_count(x, monoid, threads)

    def one(offset, piece):
        with np.errstate(all="ignore"):
            return shift_index(monoid.host(piece), offset, monoid)

    if parts == 1:
        return one(0, x)
    return combine(crew.map(one, pieces(x, parts), threads), monoid)


#: The structured reductions whose accumulator's last field is a flat index.
_INDEXED = frozenset(("structured", name)
                     for name in ("argmax", "argmin", "nanargmax", "nanargmin"))


def shifts_index(monoid) -> bool:
    """True for the argmax/argmin accumulators (``(value, index)``, and the
    others whose last field is the index), whose index a piece counts from its
    own start (:func:`shift_index`)."""
    return library_op(monoid) in _INDEXED


def shift_index(partial, offset: int, monoid):
    """A piece's accumulator with the index counted from the whole input's start
    (for accumulators ending in an index; others are returned as they are)."""
    if offset and shifts_index(monoid):
        return tuple(partial[:-1]) + (partial[-1] + offset,)
    return partial


def builtin_ufunc(monoid):
    """The NumPy ufunc of a built-in op (also under an element map), else None."""
    op = library_op(monoid)
    return UFUNCS.get(op[1]) if op is not None and op[0] == "builtin" else None


def combine(partials, monoid, initial=None):
    """``op(initial, op(p0, op(p1, ...)))`` folded left to right, each step
    cast to the accumulator: with the ufunc for a built-in op (NumPy's
    semantics), the plain-Python op for the library's structured reductions,
    else the op compiled as the kernels compile it (a user's op)."""
    dt = monoid.dtype
    values = list(partials) if initial is None else [initial, *partials]
    ufunc = builtin_ufunc(monoid)
    if ufunc is not None:
        with np.errstate(all="ignore"):
            return dt.type(ufunc_reduce(ufunc, np.asarray(values, dtype=dt), dt))
    step = monoid.fn if monoid.host is not None else compiled_step(monoid)
    acc = as_value(values[0], dt)
    with np.errstate(all="ignore"):
        for value in values[1:]:
            acc = as_value(step(acc, as_value(value, dt)), dt)
    return acc
