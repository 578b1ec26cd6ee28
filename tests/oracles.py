"""Order-sensitive operators and their data, shared by the test files.

``affine`` composes affine maps of the integers mod ``P`` packed as ``a*P + b``
(first ``u``, then ``v``): associative and not commutative, with an exact int64
reference, so any reordering or dropped element shows.
"""

import numpy as np

import pyreduce
from pyreduce import Tuning

P = 1000003

#: variants that keep order (any associative op) and those that reorder
#: (``commutative_only``: the built-ins only)
ORDERED = [n for n, v in pyreduce.variants.items() if not v.commutative_only]
REORDERING = [n for n, v in pyreduce.variants.items() if v.commutative_only]


def last_nonzero(a, b):
    return b if b != 0 else a


def first_nonzero(a, b):
    return a if a != 0 else b


def affine(u, v):
    """Compose x -> ua*x+ub, then x -> va*x+vb (mod P); packed as a*P + b."""
    ua, ub = u // 1000003, u % 1000003
    va, vb = v // 1000003, v % 1000003
    return ((va * ua) % 1000003) * 1000003 + (va * ub + vb) % 1000003


def affine_data(n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(1, P, n) * P + rng.integers(0, P, n)).astype(np.int64)


#: A tuning the simulator runs quickly (each simulated thread is a Python thread).
SIM_TUNING = Tuning(block_size=64, max_blocks=3)


def on(backend, variant=None, **extra):
    """Keywords for a call on ``backend``: the simulator's small tuning, and
    ``variant`` where the backend has variants (the cpu backend has none)."""
    out = {"backend": backend, **extra}
    if backend == "sim":
        out["tuning"] = SIM_TUNING
    if variant is not None and backend != "cpu":
        out["variant"] = variant
    return out


def lane_layout(shape: tuple, axis, keepdims: bool):
    """How an ``axis=`` reduction of an array of ``shape`` is laid out, for the
    oracles: ``(perm, rows, result_shape)``, where ``x.transpose(perm)
    .reshape(rows)`` has one row per output element, the reduced axes in C
    order along it."""
    ndim = len(shape)
    axes = tuple(range(ndim)) if axis is None else tuple(sorted(
        a % ndim for a in (axis if isinstance(axis, tuple) else (axis,))))
    kept = tuple(a for a in range(ndim) if a not in axes)
    lanes = k = 1
    for a in kept:
        lanes *= shape[a]
    for a in axes:
        k *= shape[a]
    result = (tuple(1 if a in axes else n for a, n in enumerate(shape)) if keepdims
              else tuple(shape[a] for a in kept))
    return kept + axes, (lanes, k), result


#: every public reduction to one value, called as ``f(x, **keywords)``
ONE_VALUE = {
    "reduce": lambda x, **k: pyreduce.reduce(x, "add", **k),
    "reduce_user_op": lambda x, **k: pyreduce.reduce(x, lambda a, b: b if b != 0 else a, **k),
    **{name: getattr(pyreduce, name) for name in (
        "sum", "prod", "max", "min", "nanmax", "nanmin", "any", "all", "nansum", "nanprod",
        "argmax", "argmin", "mean", "var", "std", "nanmean", "nanvar", "nanstd",
        "nanargmax", "nanargmin", "ptp", "count_nonzero")},
}
#: those that take ``axis=`` (all but nansum and nanprod)
WITH_AXIS = [n for n in ONE_VALUE if n not in ("nansum", "nanprod")]
