"""Which elements an ``axis=`` reduction combines, and how they lie in memory.

An ``axis=`` reduction of ``x`` is ``M`` reductions of ``K`` elements each: the
result's element for kept index ``m`` folds, in C order of the reduced axes, the
elements that ``x.transpose(kept + reduced).reshape(M, K)[m]`` holds. This module
finds a description of that ``(M, K)`` problem over ``x``'s own memory, a view
and not a copy, whenever one exists:

* the reduced axes are moved last (a permutation: nothing moves in memory);
* axes of extent 1 are dropped (their strides mean nothing);
* neighbouring axes whose strides allow it are merged, the kept ones among
  themselves and the reduced ones among themselves (``stride[i] ==
  stride[i+1] * shape[i+1]``, which holds for C-contiguous runs, reversed runs
  and broadcast axes alike);
* what is left must be at most two kept axes (``Mo`` outer, ``Mi`` inner) and at
  most one reduced axis: element ``k`` of output ``m = mo * Mi + mi`` then lies at
  ``off + mo * so + mi * si + k * ks`` elements from the lowest address the view
  touches (:class:`Strided`).

Anything else (two reduced axes that do not merge, three kept axes that do not
merge, strides that are not a multiple of the item size) has no such
description; the caller gathers the elements into C order of ``kept + reduced``
first. The checks follow NumPy's: the same errors, the same result shapes.

>>> import numpy as np
>>> x = np.zeros((4, 5, 6), np.float32)
>>> describe(x.shape, x.strides, x.itemsize, (1,))
Strided(M=24, Mi=6, so=30, si=1, K=5, ks=6, off=0, span=120)
>>> describe(x.shape, x.strides, x.itemsize, (1, 2))       # rows of 30
Strided(M=4, Mi=4, so=0, si=30, K=30, ks=1, off=0, span=120)
>>> describe(x.shape, x.strides, x.itemsize, (0, 2)) is None   # a gather
True
"""

from __future__ import annotations

import dataclasses
import math
import operator

import numpy as np

try:  # NumPy >= 2.0
    from numpy.lib.array_utils import normalize_axis_tuple as _normalize_axis_tuple
except ImportError:  # pragma: no cover - NumPy 1.x
    from numpy.core.numeric import normalize_axis_tuple as _normalize_axis_tuple

__all__ = ["normalize_axes", "result_shape", "Strided", "describe", "span_view"]


def normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int or a tuple of ints) as sorted non-negative axes,
    with NumPy's errors: ``numpy.exceptions.AxisError`` (a ValueError and an
    IndexError) for an axis out of range, ValueError for a repeated one,
    TypeError for anything that is not an integer. As in NumPy, a 0-d array
    accepts ``axis=0`` and ``axis=-1`` and reduces nothing.

    >>> normalize_axes(None, 3), normalize_axes(-1, 3), normalize_axes((2, 0), 3)
    ((0, 1, 2), (2,), (0, 2))
    >>> normalize_axes(3, 3)
    Traceback (most recent call last):
        ...
    numpy.exceptions.AxisError: axis 3 is out of bounds for array of dimension 3
    """
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (bool, np.bool_)):
        raise TypeError(f"axis must be an integer or a tuple of integers, got {axis!r}")
    if ndim == 0 and not isinstance(axis, tuple):
        if operator.index(axis) in (0, -1):
            return ()
    if isinstance(axis, tuple):
        for a in axis:
            if isinstance(a, (bool, np.bool_)):
                raise TypeError(f"axis must be an integer or a tuple of integers, got {axis!r}")
    elif not isinstance(axis, (int, np.integer)):
        # NumPy's own message for a float, a list, a string
        operator.index(axis)
    axes = _normalize_axis_tuple(axis, ndim, allow_duplicate=True)
    if len(set(axes)) < len(axes):
        raise ValueError("duplicate value in 'axis'")  # what np.sum says
    return tuple(sorted(axes))


def result_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    """The result's shape: ``shape`` less the reduced axes, or with them as 1."""
    if keepdims:
        return tuple(1 if a in axes else n for a, n in enumerate(shape))
    return tuple(n for a, n in enumerate(shape) if a not in axes)


@dataclasses.dataclass(frozen=True)
class Strided:
    """``M`` reductions of ``K`` elements over one block of memory, in elements.

    Output ``m = mo * Mi + mi`` folds, for ``k`` in ``0..K-1`` in order, the
    element at ``off + mo * so + mi * si + k * ks``, counted from the lowest
    address any element has. ``span`` is the number of elements from that
    address to the highest one, inclusive: the 1-D window the kernels read.
    Strides may be negative or zero (a reversed or broadcast axis).
    """

    M: int
    Mi: int
    so: int
    si: int
    K: int
    ks: int
    off: int
    span: int

    @property
    def Mo(self) -> int:
        return self.M // self.Mi if self.Mi else 0

    def offsets(self) -> np.ndarray:
        """The ``(M, K)`` element offsets this describes (for tests and checks)."""
        m = np.arange(self.M)
        k = np.arange(self.K)
        rows = self.off + (m // self.Mi) * self.so + (m % self.Mi) * self.si
        return rows[:, None] + k[None, :] * self.ks


def _merge(dims: list) -> list:
    """Neighbouring ``(extent, stride)`` pairs merged where one stride spans the
    next: the C-order walk over the merged axis visits the same addresses."""
    out: list = []
    for n, s in dims:
        if out and out[-1][1] == s * n:
            out[-1] = (out[-1][0] * n, s)
        else:
            out.append((n, s))
    return out


def describe(shape, strides, itemsize: int, axes) -> Strided | None:
    """The :class:`Strided` description of reducing ``axes`` of an array with
    this ``shape`` and these byte ``strides``, or None when there is none (see
    the module docstring). Every extent must be at least 1."""
    if any(n == 0 for n in shape):
        raise ValueError("describe() needs a non-empty array")
    dims = []
    for n, s in zip(shape, strides):
        if n > 1 and s % itemsize:
            return None
        dims.append((n, s // itemsize if n > 1 else 0))
    kept = _merge([d for a, d in enumerate(dims) if a not in axes and d[0] > 1])
    reduced = _merge([d for a, d in enumerate(dims) if a in axes and d[0] > 1])
    if len(reduced) > 1 or len(kept) > 2:
        return None
    K, ks = reduced[0] if reduced else (1, 0)
    kept = [(1, 0)] * (2 - len(kept)) + kept
    (Mo, so), (Mi, si) = kept
    low = sum(min(0, (n - 1) * s) for n, s in dims)
    high = sum(max(0, (n - 1) * s) for n, s in dims)
    return Strided(M=Mo * Mi, Mi=Mi, so=so, si=si, K=K, ks=ks, off=-low, span=high - low + 1)


def span_view(a: np.ndarray, off: int, span: int) -> np.ndarray:
    """The 1-D window of ``a``'s memory that :func:`describe` names: ``span``
    elements from the lowest address any element of ``a`` has (``off`` elements
    below ``a``'s first one). A view, never a copy."""
    if a.size == 0:
        return a.reshape(0)
    corner = tuple(slice(n - 1, n) if s < 0 else slice(0, 1)
                   for n, s in zip(a.shape, a.strides))
    low = a[corner]  # the element at the lowest address, as a view
    assert math.prod(low.shape) == 1 and off >= 0
    return np.lib.stride_tricks.as_strided(low, shape=(span,), strides=(a.itemsize,),
                                           writeable=False)
