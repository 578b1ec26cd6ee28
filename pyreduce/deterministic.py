"""The reproducible reduction tree: its definition, and its evaluation on the host.

``reduce(..., deterministic=True)`` combines the elements in one fixed tree that
depends on nothing but ``n``: not on the block size, the items per thread, the
warp size, the grid, the GPU or the backend. For a float sum this makes the
result bitwise identical everywhere. :func:`reference` evaluates the same tree
on the host; it is the specification the GPU kernels
(:mod:`pyreduce.variants.pairwise`) are tested against, bit for bit.

The tree
--------
``n`` elements are cut into *leaves* of :data:`LEAF` consecutive elements (the
last one shorter where ``n`` is not a multiple), each folded left to right. The
leaves are level 0. Node ``j`` of level ``k + 1`` is ``op(a, b)`` of nodes
``2j`` (``a``) and ``2j + 1`` (``b``) of level ``k``; where node ``2j + 1``
does not exist, node ``2j`` passes up unchanged. The one node of the last level
is the root. For 22 elements (6 leaves)::

    elements  x0..x3  x4..x7  x8..x11  x12..x15  x16..x19  x20 x21
    leaves    l0      l1      l2       l3        l4        l5
    level 1   (l0 l1)         (l2 l3)            (l4 l5)
    level 2   ((l0 l1) (l2 l3))                  (l4 l5)    <- passed up
    level 3   (((l0 l1) (l2 l3)) (l4 l5))

An ``initial`` value is combined once, after the tree: ``op(initial, root)``.
The operands of every ``op`` keep their order, so for an associative operator
the root equals ``functools.reduce(op, x)`` whatever the tree, and a
non-commutative operator stays correct.

Passing a node up is what padding the leaves to a power of two with an *exact*
identity ``e`` (``op(v, e) == v`` bit for bit) would give, without needing one.
The two differ where the identity is not exact: ``0.0`` is not one for float
addition (``-0.0 + 0.0`` is ``+0.0``), so a tree padded with ``0.0`` would turn a
``-0.0`` node into ``+0.0``; this tree keeps it, as padding with ``-0.0`` would.

Three facts the GPU kernels rest on (proofs in :mod:`pyreduce.variants.pairwise`):

1. *Subtrees.* The node over an aligned span of ``2**k`` leaves (cut short by the
   end of the data) is the tree of that span alone, so it can be computed anywhere.
   Equivalently the tree of a span of ``m > 1`` leaves is ``op`` of the tree of its
   first ``h`` leaves and the tree of the rest, ``h`` the largest power of two
   below ``m``.
2. *Grouping.* Replace each aligned group of ``2**g`` leaves (the last may be
   shorter) by its node, and treat those as leaves: the tree over them has the
   same root. A pass over block results therefore continues the same tree.
3. *Counting.* Pushing nodes of equal size one by one onto a stack, combining the
   top two while they cover equal spans, and finally folding the stack from the
   top down (right to left) gives the root of the tree over them.

The leaf size
-------------
``LEAF = 4``, for every dtype. A float sum's rounding error is bounded by
``d * u * sum(|x|)`` (to first order, ``u`` the unit roundoff), where ``d`` is the
number of operations on the longest path from an element to the root
(:func:`rounding_depth`): ``LEAF - 1`` in the leaf, then one per level,
``log2(n) - 2`` of them: ``log2(n) + 1`` in all, one more than a tree with no
leaves at all (``LEAF = 8`` gives ``log2(n) + 4``, ``16`` gives ``log2(n) + 11``).
On a GPU the leaf size changes nothing in the work (a tree of ``n`` elements
takes ``n - 1`` operations whatever its shape) but it bounds the choice of items
per thread, which must hold whole leaves: 4, 8 or 16. A float32 leaf is exactly
one 16-byte vector load; a float64 leaf two.

Bits
----
Every backend evaluates the same tree with the same operations, so a built-in
operator (one IEEE operation, or a comparison) gives the same bits everywhere.
Two exceptions: a NaN result is NaN everywhere, but its payload and sign differ
(a GPU returns the canonical NaN; a CPU propagates an operand's); and a user
operator is only as reproducible as its code: a GPU compiler contracts
``a * b + c`` into a fused multiply-add where the CPU's does not, and math
functions differ between libraries.

>>> import numpy as np, pyreduce
>>> x = np.float32([1e8, 1.0, -1e8, 1.0, 3.0])
>>> float(pyreduce.reference(x, "add"))
4.0
>>> rounding_depth(2**24)
25
"""

from __future__ import annotations

import numpy as np

from .backends.base import to_host
from .backends.opcheck import compiled_step, njit_cast, njit_map
from .cache import KERNELS
from .dtypes import bfloat16_to_float32, is_bfloat16, is_tuple
from .interop import inspect
from .ops import Monoid, as_monoid, cast_value
from .spec import LEAF

__all__ = ["LEAF", "reference", "reduce_host", "tree_root", "pairwise_root", "nodes_root",
           "rounding_depth"]

#: Leaves folded per NumPy step, so the temporaries stay in cache.
_BLOCK = 1 << 15


def rounding_depth(n: int) -> int:
    """The most operations on a path from one of ``n >= 1`` elements to the root:
    ``min(n, LEAF) - 1`` in its leaf, one per level of the tree above the leaves.
    A float sum's error is then at most ``d*u/(1 - d*u) * sum(|x|)``."""
    leaves = -(-n // LEAF)
    return min(n, LEAF) - 1 + (leaves - 1).bit_length()


def reference(x, op, identity=None, *, dtype=None, initial=None, map=None):
    """The result of ``reduce(x, op, ..., deterministic=True)``, computed on the host:
    the tree of the module docstring, evaluated with NumPy (built-in operators, with
    exactly their semantics) or a Numba loop (user operators).

    Args:
        x: a NumPy array (or device array, copied to the host), any shape; reduced in
            C order. Never modified.
        op: as for :func:`pyreduce.reduce`.
        identity: returned for an empty input, as for :func:`pyreduce.reduce`.
        dtype: the accumulator and result dtype, as for :func:`pyreduce.reduce`.
        initial: combined once, after the tree: ``op(initial, root)``.
        map: an element map, as for :func:`pyreduce.reduce` (scalar results).

    Returns:
        A NumPy scalar of the accumulator dtype, bitwise what every backend returns
        with ``deterministic=True`` (NaN payloads and user ops aside: see
        ``docs/deterministic.md``).

    >>> import numpy as np, pyreduce
    >>> x = np.arange(10, dtype=np.float32) / 10
    >>> pyreduce.reference(x, "add") == pyreduce.sum(x, deterministic=True, backend="cpu")
    np.True_
    >>> int(pyreduce.reference(np.array([3, 0, 7, 0]), lambda a, b: b if b != 0 else a))
    7
    """
    info = inspect(x)
    monoid = as_monoid(op, info.dtype, identity, acc_dtype=dtype, map=map)
    if initial is not None:
        initial = cast_value(initial, monoid.dtype, "initial")
    if info.size == 0:
        return monoid.result(initial if initial is not None else monoid.empty_result())
    host = info.host if info.host is not None else to_host(info)
    if is_bfloat16(info.dtype):
        host = bfloat16_to_float32(host)
    return monoid.result(reduce_host(host, monoid, initial))


def reduce_host(host: np.ndarray, monoid: Monoid, initial=None):
    """The tree's root over the non-empty ``host`` (C order), then ``op(initial,
    root)`` if given: what the ``cpu`` backend computes with ``deterministic=True``."""
    if is_tuple(monoid.dtype):
        raise ValueError("deterministic=True takes scalar accumulators, not tuples")
    combine = _combiner(monoid)
    flat = np.ravel(host, order="C")
    if monoid.map is not None:  # the leaves fold mapped elements
        from .backends.cpu_parallel import loadable  # late: the cpu backend's module

        flat = KERNELS.get(("cpu", "map-array", monoid.cache_key), lambda: _map_array(monoid))(
            loadable(flat))
    root = tree_root(flat, monoid.dtype, combine)
    if initial is not None:
        root = combine(np.asarray([initial], monoid.dtype), np.asarray([root], monoid.dtype))[0]
    return monoid.dtype.type(root)


def tree_root(flat: np.ndarray, acc: np.dtype, combine):
    """The root of the tree over the 1-D ``flat`` (``n >= 1``), each element cast to
    ``acc`` as it is read; ``combine(a, b)`` applies the operator element by element
    to two arrays of ``acc``."""
    return pairwise_root(_leaves(flat, acc, combine), acc, combine)


def pairwise_root(level: np.ndarray, acc: np.dtype, combine):
    """The root over one level of nodes (``level.size >= 1``): node ``j`` of the
    next level is ``combine`` of nodes ``2j`` and ``2j + 1``; a node without a
    right sibling passes up unchanged."""
    while level.size > 1:
        pairs = level.size // 2
        up = np.empty(level.size - pairs, acc)
        up[:pairs] = combine(level[0:2 * pairs:2], level[1:2 * pairs:2])
        up[pairs:] = level[2 * pairs:]  # no right sibling: passed up unchanged
        level = up
    return level[0]


def nodes_root(nodes: np.ndarray, monoid: Monoid, initial=None):
    """The root of the tree whose lowest level is ``nodes`` (scalar accumulators,
    at least one), then ``op(initial, root)`` if given. By *Grouping*, where each
    node is the tree's node over an aligned span of ``2**g`` leaves (the last may
    be cut short), this is the root of the tree over all their elements: how the
    results of a chunked array's chunks continue one tree (:mod:`pyreduce.dask`)."""
    acc, combine = monoid.dtype, _combiner(monoid)
    root = pairwise_root(np.ravel(np.asarray(nodes, acc)), acc, combine)
    if initial is not None:
        root = combine(np.asarray([initial], acc), np.asarray([root], acc))[0]
    return acc.type(root)


def _leaves(flat: np.ndarray, acc: np.dtype, combine) -> np.ndarray:
    """Level 0: each run of LEAF elements folded left to right, column by column
    (leaf ``j`` is row ``j`` of ``flat`` viewed as rows of LEAF elements)."""
    n = flat.size
    full = n // LEAF
    out = np.empty(-(-n // LEAF), acc)
    for lo in range(0, full, _BLOCK):
        hi = min(full, lo + _BLOCK)
        rows = flat[lo * LEAF:hi * LEAF].reshape(hi - lo, LEAF)
        v = rows[:, 0].astype(acc)
        for k in range(1, LEAF):
            v = combine(v, rows[:, k].astype(acc))
        out[lo:hi] = v
    if full < out.size:  # the last leaf, cut short by n
        rest = flat[full * LEAF:].astype(acc)
        v = rest[0:1]
        for k in range(1, rest.size):
            v = combine(v, rest[k:k + 1])
        out[full] = v[0]
    return out


def _where(choose_a):
    def combine(a, b):
        return np.where(choose_a(a, b), a, b)

    return combine


#: The built-in operators on arrays, with exactly the semantics of their scalar
#: code in pyreduce.ops. np.maximum and friends are not used: which operand they
#: return on ties (the sign of a zero) is NumPy's choice, unspecified and free to
#: differ between its SIMD loops, where ``a if a > b ... else b`` fixes it.
_ARRAY_OPS = {
    "add": np.add,
    "mul": np.multiply,
    "max": _where(lambda a, b: (a > b) | (a != a)),
    "min": _where(lambda a, b: (a < b) | (a != a)),
    "nanmax": _where(lambda a, b: (a > b) | (b != b)),
    "nanmin": _where(lambda a, b: (a < b) | (b != b)),
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
}


def _combiner(monoid: Monoid):
    """``combine(a, b)``: ``acc_t(op(a[i], b[i]))`` for every ``i``, as an array."""
    if monoid.key[0] == "builtin":
        ufunc = _ARRAY_OPS[monoid.name]

        def builtin(a, b):
            with np.errstate(all="ignore"):  # wrap-around and inf are the semantics
                return ufunc(a, b)

        return builtin
    pairs = KERNELS.get(("cpu", "pairs", monoid.cache_key), lambda: _pairs(monoid))

    def user(a, b):
        out = np.empty(a.size, monoid.dtype)
        # contiguous copies of the strided levels: one compiled signature, not four
        pairs(np.ascontiguousarray(a), np.ascontiguousarray(b), out)
        return out

    return user


def _map_array(monoid: Monoid):
    """A Numba loop making ``acc_t(map(i, x[i]))`` for every ``i``."""
    from numba import njit

    fmap, acc_t, acc = njit_map(monoid), njit_cast(monoid.dtype), monoid.dtype

    @njit(nogil=True)
    def fill(x, out):
        for i in range(x.size):
            out[i] = acc_t(fmap(i, x[i]))

    def mapped(x):
        out = np.empty(x.size, acc)
        fill(x, out)
        return out

    return mapped


def _pairs(monoid: Monoid):
    """A Numba loop applying the operator's compiled step to pairs of elements."""
    from numba import njit

    step = compiled_step(monoid)  # a TypeError here if Numba cannot compile the op

    @njit(nogil=True)
    def pairs(a, b, out):
        for i in range(out.size):
            out[i] = step(a[i], b[i])

    return pairs

