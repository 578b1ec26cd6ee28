"""The reductions over Dask arrays: each chunk reduced by pyreduce where it lives,
the chunks' results combined by Dask, in order.

``pyreduce.reduce`` and the named reductions hand a Dask array here (the check in
:mod:`pyreduce.general` reads the type's module name, so ``import pyreduce`` never
imports Dask; this module imports it only when called). The result is a lazy
Dask array, as ``dask.array.sum`` gives: nothing runs until it is computed, by
whatever scheduler the user runs Dask with.

Two stages:

1. **Chunks.** ``map_blocks`` reduces each chunk with pyreduce, on the backend
   the chunk lives on (``backend="auto"``: the GPU for a CuPy chunk, the ``cpu``
   backend for a NumPy one; another ``backend=`` is used as given), to its *raw
   accumulator*: argmax's ``(value, index)`` with the index made global,
   mean's ``(count, sum)``, var's ``(count, shift, s, q)``, never the finished value.
2. **Partials.** The chunks' accumulators are laid out along one axis in C order
   of the reduced axes (a transpose and a reshape of the small array of
   partials), and ``dask.array.reduction`` combines them with the same operator,
   ``split_every`` neighbours at a time, left to right. The last step combines
   ``initial`` once, on the left, and finishes the value (``Monoid.finalize``).

Order. The result is ``functools.reduce`` over the C-order flattening of each
lane's reduced axes whenever every partial is one run of that order. For a
commutative operator (the built-ins, argmax, the statistics) any grouping
gives it, and each chunk is reduced whole. For any other operator, a chunk is
one run when, of the reduced axes, those after the last one split into
several chunks are whole in it and those before it have extent 1; otherwise
each chunk is reduced only along the reduced axes from that last split one on,
which leaves one partial per run. An operator with ``map=`` or a tuple
accumulator is not reduced along some axes of a chunk here (its chunks' lanes
would number their elements from the chunk's start), so chunks that are not
runs are refused with a ValueError saying how to rechunk, and so is ``axis=``
short of every axis.

``deterministic=True`` gives the bits of the single-array result, or a
ValueError: each chunk's own fixed tree is the tree's node over an aligned
span (``pyreduce.deterministic``, *Subtrees* and *Grouping*) when the chunks
are consecutive runs of the C order of ``LEAF * 2**k`` elements each (the
last may be shorter), and ``split_every`` is a power of two.
"""

from __future__ import annotations

import dataclasses
import dis
import functools
import itertools
import math
import operator
import warnings

import numpy as np

from . import general, laws, manyvalues, stats, structured
from .axes import normalize_axes
from .backends import BACKENDS
from .deterministic import LEAF, nodes_root
from .dtypes import as_value, check_dtype, default_accumulator, is_tuple
from .interop import inspect
from .ops import Monoid, as_monoid, cast_value, sum_dtype
from .planner import Tuning
from .tuning_keywords import DEFAULT as DEFAULT_TUNING
from .tuning_keywords import settle

__all__ = ["call", "run"]

#: The keywords every reduction of a Dask array takes, with their defaults
#: (``variant=`` and the deprecated tuning keywords settled into ``tuning`` first).
_OPTIONS = {"axis": None, "keepdims": False, "initial": None, "backend": "auto",
            "device_result": False, "out": None, "stream": None, "check": False,
            "deterministic": False, "split_every": None, "tuning": DEFAULT_TUNING}
#: What a lazy result cannot take: each has no meaning before the value exists.
_REFUSED = {
    "out": "out= does not apply to a Dask array: the result is a new lazy Dask array",
    "device_result": "device_result= does not apply to a Dask array: a chunk's partial "
                     "stays where its chunk is, and the result is a lazy Dask array",
    "stream": "stream= does not apply to a Dask array: each chunk is reduced on its "
              "worker's current stream",
}


def call(name: str, args: dict):
    """``pyreduce.<name>(**args)`` for a Dask array ``x``: ``args`` is the public
    function's arguments as it received them (its ``**kwargs`` under ``kwargs``)."""
    args = dict(args)
    kwargs = args.pop("kwargs", None) or {}
    return _ENTRIES[name](name, **args, **kwargs)


# --- the entry points, one per kind of public function


def _reduce(name, x, op, identity=None, *, map=None, dtype=None, **options):
    x = _dask_array(x, options.get("split_every"))
    monoid = as_monoid(op, check_dtype(x.dtype), identity, acc_dtype=dtype, map=map)
    return run(x, monoid, name, options)


#: The named reductions: their operator and accumulator rule (None: the op's own).
_NAMED = {"sum": ("add", sum_dtype), "prod": ("mul", sum_dtype),
          "max": ("max", default_accumulator), "min": ("min", default_accumulator),
          "nanmax": ("nanmax", default_accumulator), "nanmin": ("nanmin", default_accumulator),
          "any": ("logical_or", None), "all": ("logical_and", None)}


def _named(name, x, axis=None, dtype=None, out=None, keepdims=False, identity=None,
           initial=None, **options):
    x = _dask_array(x)
    op, rule = _NAMED[name]
    dt = check_dtype(x.dtype)
    acc = rule(dt) if dtype is None and rule is not None else dtype
    monoid = as_monoid(op, dt, identity, acc_dtype=acc)
    return run(x, monoid, name, dict(options, axis=axis, out=out, keepdims=keepdims,
                                      initial=initial))


def _structured(name, x, **kwargs):
    x = _dask_array(x)
    dt = check_dtype(x.dtype)
    if name in ("mean", "nanmean"):
        monoid = structured.moments_monoid(dt, name)
    elif name in structured.STATISTICS:  # var, std and theirs: ddof= and correction=
        ddof = structured.degrees_of_freedom(kwargs.pop("ddof"), kwargs.pop("correction"))
        monoid = structured.moments_monoid(dt, name, ddof)
    else:
        monoid = getattr(structured, f"{name}_monoid")(dt)
    split_every = kwargs.pop("split_every", None)
    options = dict(stats._tuned(kwargs, name), split_every=split_every)
    return run(x, monoid, name, options, index=name in _INDEXED)


#: The structured reductions whose accumulator ends in a flat index.
_INDEXED = ("argmax", "argmin", "nanargmax", "nanargmin")


def _nan(name, x, dtype=None, **options):
    x = _dask_array(x)
    monoid = getattr(structured, f"{name}_monoid")(check_dtype(x.dtype), dtype)
    return run(x, monoid, name, options)


_ENTRIES = {"reduce": _reduce, **dict.fromkeys(_NAMED, _named),
            **dict.fromkeys(("argmax", "argmin", "minmax", "mean", "var", "std", "nanmean",
                             "nanvar", "nanstd", "nanargmax", "nanargmin", "ptp",
                             "count_nonzero"), _structured),
            "nansum": _nan, "nanprod": _nan}


def _dask_array(x, split_every=None):
    import dask.array as da

    if not isinstance(x, da.Array):
        if split_every is not None:
            raise TypeError(f"split_every= applies to Dask arrays; x is a "
                            f"{type(x).__module__}.{type(x).__name__}")
        raise TypeError(f"x: a {type(x).__module__}.{type(x).__name__} is not an array "
                        "pyreduce reduces; of Dask's collections it takes dask.array.Array")
    return x


# --- the reduction


@dataclasses.dataclass(frozen=True)
class _Call:
    """A call's keywords, checked: what the graph is built from."""

    name: str
    backend: str
    tuning: Tuning  # with the fixed tree's variant, for deterministic=True
    deterministic: bool
    initial: object  # a value of the accumulator dtype, or None
    split_every: int
    index: bool  # argmax, argmin: the accumulator's last field is a flat index


def run(x, monoid: Monoid, name: str, options: dict, index: bool = False):
    """The lazy reduction of the Dask array ``x`` with ``monoid``, as
    ``pyreduce.<name>`` with keywords ``options`` (those of ``reduce`` that apply,
    and ``split_every``) gives it. ``index``: the accumulator's last field is a flat
    index (argmax, argmin), made global per chunk."""
    o = _options(name, options)
    call = _checked(x, monoid, o, name, index)
    axes = normalize_axes(o["axis"], x.ndim)
    # the result's axes, None where keepdims keeps a reduced one
    at = (tuple(None if a in axes else slice(None) for a in range(x.ndim))
          if o["keepdims"] else None)
    if x.ndim == 0:  # one element: reduced as a 1-D array of it
        x, axes = x.reshape(1), (0,)
    elif len(axes) < x.ndim:
        manyvalues.axes_take(monoid, call.deterministic)
        _scalar_along_axes(monoid, name)
    raw = _raw(monoid)
    if not axes:  # axis=(): each element on its own
        each = _Chunks(raw, (), call.backend, dict(tuning=call.tuning, initial=call.initial))
        return x.map_blocks(each, dtype=raw.dtype, meta=_meta(x._meta, x.ndim, raw.dtype),
                            token="pyreduce-" + name)
    if any(x.shape[a] == 0 for a in axes):
        acc = _empty(x, monoid, axes, call.initial)
    else:
        acc = _reduced(_without_empty_chunks(x, axes), monoid, axes, call)
    return _finished(acc, monoid, at, name)


def _scalar_along_axes(monoid: Monoid, name: str) -> None:
    """A ValueError for an element map or a tuple accumulator along some axes:
    a chunk's lanes would number their elements from the chunk's start, and
    its tuple partials are not combined along axes."""
    if monoid.map is not None or is_tuple(monoid.dtype):
        raise ValueError(f"{name}: over a Dask array, axis= takes operators without an "
                         "element map or a tuple accumulator (map=, argmax, mean, nansum, "
                         "...); reduce every axis, or compute the array first")


def _options(name: str, options: dict) -> dict:
    options = settle(name, options)
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise TypeError(f"{name}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    o = {**_OPTIONS, **options}
    for key, why in _REFUSED.items():
        value = o[key]
        if value is not None and not (isinstance(value, (bool, np.bool_)) and not value):
            raise ValueError(why)
    return o


def _checked(x, monoid: Monoid, o: dict, name: str, index: bool) -> _Call:
    """The keywords checked now, so that a mistake fails at the call, not in a
    worker when the graph runs."""
    if o["backend"] not in BACKENDS:
        raise ValueError(f"unknown backend {o['backend']!r}; choose from {', '.join(BACKENDS)}")
    tuning = o["tuning"]
    laws.check_if_requested(monoid, o["check"])
    deterministic = o["deterministic"]
    if deterministic is not False:
        tuning = general.deterministic_tuning(tuning, deterministic)
        if deterministic and is_tuple(monoid.dtype):
            raise ValueError("deterministic=True takes scalar accumulators, not tuples")
    initial = None if o["initial"] is None else cast_value(o["initial"], monoid.dtype, "initial")
    if monoid.map is not None and not index:
        _index_free(monoid.map)
    if any(math.isnan(c) for chunks in x.chunks for c in chunks):
        raise ValueError("x has chunks of unknown size; call x.compute_chunk_sizes() first")
    return _Call(name, o["backend"], tuning, bool(deterministic), initial,
                 _split_every(o["split_every"], deterministic), index)


def _reduced(x, monoid: Monoid, axes, call: _Call):
    """The accumulators of the reduction of ``x`` (no empty chunk along ``axes``)."""
    inner = _chunk_axes(x, axes, ordered=call.deterministic or not monoid.commutative)
    if inner != axes and (monoid.map is not None or is_tuple(monoid.dtype)):
        raise ValueError(_not_runs(call.name, x, axes, inner))
    if call.deterministic:
        _check_tree(x, inner, axes)
    partials = _partials(x, _raw(monoid), inner, call)
    return _combine(partials, axes, _accumulators(monoid), call)


def _split_every(split_every, deterministic) -> int:
    """The number of neighbouring partials one step combines (Dask's default: its
    ``split_every`` setting, else 4)."""
    if split_every is None:
        import dask

        split_every = dask.config.get("split_every", None) or 4
    if isinstance(split_every, bool) or not isinstance(split_every, int) or split_every < 2:
        raise TypeError(f"split_every= must be an int of at least 2, got {split_every!r}")
    if deterministic and split_every & (split_every - 1):
        raise ValueError(f"deterministic=True combines chunks in pairs of aligned subtrees: "
                         f"split_every= must be a power of two, got {split_every}")
    return split_every


def _index_free(fmap) -> None:
    """A ValueError if ``map(i, v)`` may read ``i``: a chunk numbers its elements
    from 0, so over a Dask array the index would be the chunk's, not the array's."""
    code = fmap.__code__
    index = code.co_varnames[0]
    reads = index in code.co_cellvars or any(
        index == ins.argval or (isinstance(ins.argval, tuple) and index in ins.argval)
        for ins in dis.get_instructions(code) if isinstance(ins.argval, (str, tuple)))
    if reads:
        raise ValueError(f"map {fmap.__name__!r} reads its index argument {index!r}: over a "
                         "Dask array each chunk numbers its elements from 0, so map= takes "
                         "a function of the value alone (its index unused)")


def _raw(monoid: Monoid) -> Monoid:
    """The operator a chunk accumulates with: the same kernels, nothing finished."""
    return monoid if monoid.finalize is None else dataclasses.replace(monoid, finalize=None)


def _accumulators(monoid: Monoid) -> Monoid:
    """The operator over accumulators: no element map (nansum's would take a NaN
    partial for zero), nothing finished, no NumPy shortcut over elements."""
    if monoid.map is None and monoid.finalize is None and monoid.host is None:
        return monoid
    return dataclasses.replace(monoid, map=None, finalize=None, host=None,
                               key=("accumulators", monoid.key))


def _meta(meta, ndim: int, dtype):
    from dask.array.utils import meta_from_array

    return meta_from_array(meta, ndim=ndim, dtype=dtype)


def _empty(x, monoid: Monoid, axes, initial):
    """The accumulator of a reduction over no elements: ``initial``, else the
    identity, else (max, a user op without identity) NumPy's ValueError, now."""
    import dask.array as da

    value = initial if initial is not None else monoid.empty_result()
    kept = [a for a in range(x.ndim) if a not in axes]
    if not kept:  # a scalar, as the other full reductions' last step returns
        return da.from_array(np.asarray(value, monoid.dtype)).map_blocks(
            operator.itemgetter(()), dtype=monoid.dtype)
    return da.full(tuple(x.shape[a] for a in kept), value, dtype=monoid.dtype,
                   chunks=tuple(x.chunks[a] for a in kept))


def _without_empty_chunks(x, axes):
    """``x`` without its chunks of extent 0 along the reduced axes (nothing to
    fold, and no partial to stand for them); the others are the same tasks."""
    for a in axes:
        if 0 in x.chunks[a]:
            keep = [i for i, c in enumerate(x.chunks[a]) if c]
            x = x.blocks[(slice(None),) * a + (keep,)]
    return x


def _chunk_axes(x, axes, ordered: bool) -> tuple:
    """The reduced axes each chunk folds: all of them where any grouping is right
    or each chunk is one run of the C order; else those from the last reduced
    axis split into several chunks on (one partial per run)."""
    split = [a for a in axes if x.numblocks[a] > 1]
    if not ordered or not split:
        return axes
    last = split[-1]
    if all(max(x.chunks[a]) == 1 for a in axes if a < last):
        return axes
    return tuple(a for a in axes if a >= last)


def _not_runs(name, x, axes, inner) -> str:
    last = inner[0]
    before = [a for a in axes if a < last and max(x.chunks[a]) > 1]
    return (f"{name}: this operator is not commutative and has an element map or a tuple "
            f"accumulator, so each chunk must be one run of the C order of the reduced "
            f"axes; here reduced axis {last} is split into several chunks while reduced "
            f"axis {before[0]} before it has chunks longer than 1. Rechunk so that axis "
            f"{last} is one chunk (x.rechunk({{{last}: -1}})) or the axes before it have "
            f"chunks of 1")


def _check_tree(x, inner, axes) -> None:
    """A ValueError unless the chunks' fixed trees are nodes of the array's tree."""
    sizes = [math.prod(c) for c in itertools.product(*x.chunks)]
    first = sizes[0]
    spans = first % LEAF == 0 and (first // LEAF) & (first // LEAF - 1) == 0
    if inner != axes or (len(sizes) > 1 and not (
            spans and all(s == first for s in sizes[:-1]) and sizes[-1] <= first)):
        raise ValueError(
            "deterministic=True over a Dask array gives the single array's bits only where "
            f"the chunks are consecutive runs of its C order of {LEAF} * 2**k elements "
            f"each (the last may be shorter): rechunk, e.g. x.rechunk({LEAF * 2**14}) "
            "for a 1-D array")


# --- the callables in the tasks


class _Task:
    """A dataclass whose Dask token is its fields with the operator named by its
    code (``Monoid.cache_key``: what the kernels are cached by), not pickled whole
    on every call; a finishing step's ``finalize`` (var's ``ddof``) is tokenized by
    Dask itself."""

    def __dask_tokenize__(self):
        from dask.base import normalize_token

        parts = [type(self).__name__]
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Monoid):
                value = (value.cache_key, value.name, repr(value.identity),
                         value.finalize and normalize_token(value.finalize))
            parts.append(value)
        return normalize_token(tuple(parts))


# --- stage 1: each chunk to its accumulator


@dataclasses.dataclass(frozen=True, eq=False)
class _Chunks(_Task):
    """Reduces one chunk along ``axes`` to raw accumulators, keeping its axes
    (``None``: every axis, a host value). Picklable: shipped with the tasks."""

    monoid: Monoid
    axes: tuple | None
    backend: str
    options: dict  # tuning and deterministic (and initial, for axis=())
    #: argmax/argmin: where each axis's chunks start, and the array's shape
    starts: tuple | None = None
    shape: tuple | None = None

    def __call__(self, chunk, block_id=None):
        info = inspect(chunk)
        backend = "cpu" if self.backend == "auto" and not info.on_device else self.backend
        if self.axes is not None:
            return general._reduce(info, self.monoid, None, backend=backend,
                                   axis=self.axes, keepdims=True, **self.options)
        # a host value, whatever the chunk's library: the partials are a host array
        value = general._reduce(info, self.monoid, None, backend=backend, device_result=False,
                                **self.options)
        if self.starts is not None:
            value = value[:-1] + (self._global(int(value[-1]), chunk.shape, block_id),)
        return np.asarray(value, self.monoid.dtype).reshape((1,) * chunk.ndim)

    def _global(self, i: int, shape, block_id) -> np.int64:
        """The array's flat index of the chunk's flat index ``i``."""
        local = np.unravel_index(i, shape)
        at = tuple(int(s[b]) + j for s, b, j in zip(self.starts, block_id, local))
        return np.int64(np.ravel_multi_index(at, self.shape))


def _partials(x, raw: Monoid, inner, call: _Call):
    """Stage 1: a Dask array of the chunks' accumulators, the axes in ``inner`` cut
    to one element per chunk."""
    whole = len(inner) == x.ndim  # one host value per chunk
    starts = tuple(tuple(np.cumsum((0,) + c[:-1])) for c in x.chunks) if call.index else None
    each = _Chunks(raw, None if whole else inner, call.backend,
                   dict(tuning=call.tuning, deterministic=call.deterministic), starts,
                   x.shape if call.index else None)
    chunks = tuple((1,) * x.numblocks[a] if a in inner else c for a, c in enumerate(x.chunks))
    meta = np.empty((0,) * x.ndim, raw.dtype) if whole else _meta(x._meta, x.ndim, raw.dtype)
    return x.map_blocks(each, chunks=chunks, dtype=raw.dtype, meta=meta,
                        token=f"pyreduce-{call.name}-chunk")


# --- stage 2: the accumulators combined, in order


@dataclasses.dataclass(frozen=True, eq=False)
class _Fold(_Task):
    """Folds a block of accumulators along its last axis, left to right (Dask's
    ``chunk``, ``combine`` and, with ``initial``, ``aggregate``)."""

    monoid: Monoid  # over accumulators: no map, nothing finished
    backend: str
    deterministic: bool
    initial: object = None  # given to the last step only

    def __call__(self, p, axis, keepdims, computing_meta=False):
        dt = self.monoid.dtype
        if computing_meta:  # Dask asks for the type of what a block gives: p's
            return p
        if p.shape[-1] == 1 and self.initial is None:
            return p if keepdims else p[..., 0]
        if is_tuple(dt):  # records: a full reduction, so p is 1-D and short
            value = self._records(p)
        elif self.deterministic:  # the partials are aligned nodes of one tree
            value = nodes_root(p, self.monoid, self.initial)
        else:
            info = inspect(p)
            backend = "cpu" if self.backend == "auto" and not info.on_device else self.backend
            return general._reduce(info, self.monoid, None, initial=self.initial,
                                   backend=backend, axis=axis, keepdims=keepdims,
                                   device_result=False)
        out = np.asarray(value, dt)
        return out.reshape(1) if keepdims else out[()]

    def _records(self, p):
        """The op called as Python on tuples of NumPy scalars, as the simulator
        calls it: one record per chunk, too few to be worth compiling for."""
        dt, op = self.monoid.dtype, self.monoid.fn
        values = [as_value(r, dt) for r in p]
        if self.initial is not None:
            values.insert(0, self.initial)
        with np.errstate(all="ignore"):  # wrap-around and inf are the semantics
            return functools.reduce(lambda a, b: as_value(op(a, b), dt), values)


def _combine(partials, axes, monoid: Monoid, call: _Call):
    """Stage 2: ``partials`` laid out along one last axis in C order of the reduced
    ``axes``, kept axes first, then folded by Dask's tree of ``split_every``."""
    import dask.array as da

    kept = [a for a in range(partials.ndim) if a not in axes]
    if any(partials.shape[a] == 0 for a in kept):  # no lane: nothing to combine
        return da.empty(tuple(partials.shape[a] for a in kept), dtype=monoid.dtype,
                        chunks=tuple(partials.chunks[a] for a in kept))
    if kept + list(axes) != list(range(partials.ndim)):
        partials = partials.transpose(kept + list(axes))
    nkept = len(kept)
    if len(axes) > 1:
        n = math.prod(partials.shape[nkept:])
        partials = partials.reshape(partials.shape[:nkept] + (n,))
    if 0 in partials.chunks[-1] and any(partials.chunks[-1]):
        # Dask's reshape can leave an empty block along the folded axis, which
        # no fold could give a value for (max has no identity): dropped
        partials = partials.rechunk({nkept: tuple(c for c in partials.chunks[-1] if c)})
    if call.deterministic and any(c != 1 for c in partials.chunks[-1]):
        partials = partials.rechunk({nkept: 1})  # each block one aligned node
    fold = _Fold(monoid, call.backend, call.deterministic)
    return da.reduction(
        partials, fold, dataclasses.replace(fold, initial=call.initial), combine=fold,
        axis=nkept, keepdims=False, dtype=monoid.dtype, split_every=call.split_every,
        concatenate=True, meta=_meta(partials._meta, nkept, monoid.dtype),
        name="pyreduce-" + call.name)


# --- the result


@dataclasses.dataclass(frozen=True, eq=False)
class _Finish(_Task):
    """The user's value of a combined accumulator: ``Monoid.result``, or one field
    of it (a tuple result: minmax, a user's tuple op)."""

    monoid: Monoid
    field: int | None

    def __call__(self, acc):
        value = self.monoid.result(np.asarray(acc)[()])
        return value if self.field is None else value[self.field]


def _finished(acc, monoid: Monoid, at, name: str):
    """The lazy result from the accumulator array ``acc``: as it is for a plain
    scalar op, else finished, a tuple result as a tuple of arrays (the fields of
    one graph, computed once by ``dask.compute``); with ``at``, the reduced axes
    put back with extent 1 (keepdims)."""
    if monoid.finalize is None and not is_tuple(monoid.dtype):
        return acc if at is None else acc[at]
    with warnings.catch_warnings():  # the result's dtypes, from a sample accumulator
        warnings.simplefilter("ignore")
        sample = monoid.result(np.ones((), monoid.dtype)[()])

    def field(k, value):
        dt = np.asarray(value).dtype
        done = acc.map_blocks(_Finish(monoid, k), dtype=dt, meta=np.empty((), dt),
                              token="pyreduce-" + name)
        return done if at is None else done[at]

    if isinstance(sample, tuple):
        return tuple(field(k, v) for k, v in enumerate(sample))
    return field(None, sample)
