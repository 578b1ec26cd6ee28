"""Operators: what a reduction combines with, and the semantics decided once.

Every entry point turns the user's ``op`` into a :class:`Monoid` here: the binary
function the kernels call, whether it may be reordered, its identity for the
accumulator dtype, and a key made of its code and the values it reads
(:mod:`pyreduce.opkey`), so that two identical lambdas share one compiled kernel
and a lambda over changed values gets its own.

Semantics (also in ``docs/semantics.md``):

* The accumulator dtype is the input's dtype unless ``dtype=`` says otherwise; the
  logical ops accumulate in ``bool``. Every value the op returns is cast back to the
  accumulator dtype, so integers wrap like NumPy's fixed-width integers.
* ``max``/``min`` (the builtins, ``np.maximum``/``np.minimum``) propagate NaN like
  ``np.max``; ``nanmax``/``nanmin`` (``np.fmax``/``np.fmin``) ignore it like
  ``np.nanmax``: NaN only when every element is NaN.
* Identities are inferred for the built-in ops; user ops have none unless given.
  The kernels never need one: an identity only decides what an empty input returns.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
from typing import Any, Callable, Hashable

import numpy as np

__all__ = ["Monoid", "as_monoid", "SUPPORTED_DTYPES", "check_dtype", "sum_dtype", "cast_value"]

from .cache import Memo  # noqa: E402
from .dtypes import (  # noqa: E402  (SUPPORTED_DTYPES, check_dtype re-exported)
    SUPPORTED_DTYPES, as_value, check_accumulator, check_dtype, default_accumulator, element,
    fields, is_tuple, tuple_dtype,
)


# --- the built-in ops, written once as plain Python so every backend compiles the same code

def _add(a, b):
    return a + b


def _mul(a, b):
    return a * b


def _max(a, b):
    # NaN propagates from either side, like np.maximum: a NaN `a` is kept by the
    # `a != a` test, a NaN `b` wins because `a > nan` is False.
    return a if (a > b or a != a) else b


def _min(a, b):
    return a if (a < b or a != a) else b


def _nanmax(a, b):
    # NaN is ignored from either side, like np.fmax: a NaN `b` keeps `a` by the
    # `b != b` test, a NaN `a` loses because `nan > b` is False. Two NaNs give NaN,
    # so the kernels, which fold without an identity, return NaN exactly when every
    # element is NaN. Ties keep `b`, as `_max` does, so the op picks the last
    # largest non-NaN element however it is grouped: associative on every input.
    return a if (a > b or b != b) else b


def _nanmin(a, b):
    return a if (a < b or b != b) else b


def _and(a, b):
    return a & b


def _or(a, b):
    return a | b


def _xor(a, b):
    return a ^ b


def _logical_and(a, b):
    return a and b


def _logical_or(a, b):
    return a or b


def _zero(dt):
    return 0


def _one(dt):
    return 1


def _nan_or_lowest(dt):
    # NaN is the true identity of nanmax on floats: op(nan, v) == v for every v,
    # NaN included, which -inf is not (op(-inf, nan) is -inf)
    return np.nan if dt.kind == "f" else _lowest(dt)


def _nan_or_highest(dt):
    return np.nan if dt.kind == "f" else _highest(dt)


def _lowest(dt):
    if dt.kind == "f":
        return -np.inf
    if dt.kind == "b":
        return False
    return np.iinfo(dt).min


def _highest(dt):
    if dt.kind == "f":
        return np.inf
    if dt.kind == "b":
        return True
    return np.iinfo(dt).max


def _all_ones(dt):
    if dt.kind == "b":
        return True
    return np.iinfo(dt).max if dt.kind == "u" else -1


@dataclasses.dataclass(frozen=True)
class _Builtin:
    name: str
    fn: Callable
    identity: Callable[[np.dtype], Any]
    kinds: str  # dtype kinds the op is defined for
    logical: bool = False  # accumulates in bool
    empty_ok: bool = True  # False: empty input without identity= is an error (np.max)


_BUILTINS = {
    b.name: b
    for b in (
        _Builtin("add", _add, _zero, "biufc"),
        _Builtin("mul", _mul, _one, "biufc"),
        _Builtin("max", _max, _lowest, "biuf", empty_ok=False),
        _Builtin("min", _min, _highest, "biuf", empty_ok=False),
        _Builtin("nanmax", _nanmax, _nan_or_lowest, "biuf", empty_ok=False),
        _Builtin("nanmin", _nanmin, _nan_or_highest, "biuf", empty_ok=False),
        _Builtin("and", _and, _all_ones, "biu"),
        _Builtin("or", _or, _zero, "biu"),
        _Builtin("xor", _xor, _zero, "biu"),
        _Builtin("logical_and", _logical_and, lambda dt: True, "biuf", logical=True),
        _Builtin("logical_or", _logical_or, lambda dt: False, "biuf", logical=True),
    )
}

# The objects users pass, mapped to a builtin name. Looked up by identity.
_ALIASES = [
    (max, "max"), (min, "min"),
    (operator.add, "add"), (operator.mul, "mul"),
    (operator.and_, "and"), (operator.or_, "or"), (operator.xor, "xor"),
    (np.add, "add"), (np.multiply, "mul"),
    (np.maximum, "max"), (np.minimum, "min"),
    (np.fmax, "nanmax"), (np.fmin, "nanmin"),
    (np.logical_and, "logical_and"), (np.logical_or, "logical_or"),
    (np.bitwise_and, "and"), (np.bitwise_or, "or"), (np.bitwise_xor, "xor"),
]


def _builtin_name(op) -> str | None:
    if isinstance(op, str):
        return op if op in _BUILTINS else None
    # pyreduce.max and friends name the op they reduce with
    tagged = getattr(op, "__pyreduce_op__", None)
    if isinstance(tagged, str):
        return tagged
    for obj, name in _ALIASES:
        if op is obj:
            return name
    return None


def sum_dtype(dt: np.dtype) -> np.dtype:
    """NumPy's accumulator for ``np.sum``/``np.prod``: small ints widen to 64 bits;
    float16 and bfloat16 sum in float32 (NumPy keeps float16)."""
    acc = _SUM_DTYPES.get(dt)  # a repeat call of pyreduce.sum makes this one
    if acc is None:
        acc = default_accumulator(dt)
        if acc.kind == "b" or (acc.kind == "i" and acc.itemsize < 8):
            acc = np.dtype(np.int64)
        elif acc.kind == "u" and acc.itemsize < 8:
            acc = np.dtype(np.uint64)
        _SUM_DTYPES.put(dt, acc)
    return acc


_SUM_DTYPES = Memo("sum dtypes", 64)


# --- cache keys from code and the values it reads (pyreduce.opkey)

from .opkey import bindings, freeze, function_key, op_ref, same, value_key  # noqa: E402


# --- the normalised operator

@dataclasses.dataclass(frozen=True, eq=False)
class Monoid:
    """An associative binary operator with its accumulator dtype.

    ``fn`` is a plain Python function; each backend compiles it (``cuda.jit`` device
    function, ``njit``) or, in the simulator, calls it as is. For a user's op it
    is :func:`pyreduce.opkey.freeze` of the op: a copy reading the values ``key``
    was made from. ``identity`` is a NumPy
    scalar of ``dtype`` or None. ``commutative`` is True only for built-in ops, where
    the library may reorder; user ops are combined strictly in index order.
    """

    name: str
    fn: Callable
    dtype: np.dtype
    identity: Any
    commutative: bool
    key: Hashable
    empty_ok: bool = True
    #: ``map(i, v)``: element ``v`` at flat index ``i`` as an accumulator value,
    #: applied as elements are loaded (None: the element cast to ``dtype``)
    map: Callable | None = None
    #: the accumulator as the user sees the result (argmax: its index; mean: the
    #: sum over the count), applied on the host; None: as it is
    finalize: Callable | None = None
    #: the last step of a structured reduction written once, as a scalar
    #: function that Numba compiles (a :class:`pyreduce.finishers.Finisher`):
    #: what finishes an array of accumulators (a record array), on the host or
    #: on a GPU; None: returned as it is
    finisher: Any = None
    #: the accumulated value of a host array computed by NumPy (the cpu backend's
    #: fast path for built-in reductions); None: the generated folds
    host: Callable | None = None

    @property
    def cache_key(self) -> Hashable:
        return (self.key, self.dtype.str if self.dtype.names is None
                else tuple(self.dtype.descr))

    def empty_result(self):
        """What a reduction of no elements accumulates: the identity, or a ValueError."""
        if self.identity is None or not self.empty_ok:
            raise ValueError(
                f"reduction of an empty array with op {self.name!r} has no identity; "
                "pass identity= (or initial=) to define the result"
            )
        return self.identity

    def result(self, raw):
        """An accumulator value read back (a scalar or a record) as the result."""
        value = as_value(raw, self.dtype)
        return value if self.finalize is None else self.finalize(value)


def cast_value(value, dtype: np.dtype, what: str):
    """``value`` as a scalar of ``dtype``; a TypeError naming ``what`` (the
    argument: ``initial``, ``identity``) if it is not a value of it. Every number
    type (Python's, NumPy's scalars, ml_dtypes' bfloat16) is checked the same
    way: a bool accumulator takes 0 and 1; an integer one the whole numbers in
    its range; a float one any real number, a finite one only if it stays finite
    (no overflow to infinity); a complex one any number, each part as a float
    one would. A complex value for a real accumulator, strings, arrays and other
    objects are refused. For a tuple dtype, a tuple of one such value per field."""
    if is_tuple(dtype):
        parts = fields(dtype)
        if not isinstance(value, (tuple, list, np.void)) or len(value) != len(parts):
            raise TypeError(f"{what}={_shown(value)} must be a tuple of {len(parts)} values "
                            f"({', '.join(p.name for p in parts)})")
        return tuple(cast_value(v, d, what) for v, d in zip(value, parts))
    kind, number = _number(value)
    if kind is None:
        raise TypeError(f"{what} must be a number (bool, int, float, complex or a NumPy "
                        f"scalar) for dtype {dtype}, got {type(value).__name__}")
    if dtype.kind == "c":
        re, im = (number.real, number.imag) if kind == "c" else (number, 0)
        return dtype.type(complex(_as_float(re, dtype, value, what),
                                  _as_float(im, dtype, value, what)))
    if kind == "c":
        raise TypeError(f"{what}={_shown(value)} is complex, and dtype {dtype} is real")
    if dtype.kind == "f":
        return dtype.type(_as_float(number, dtype, value, what))
    if kind == "f" and not (np.isfinite(number) and int(number) == number):
        raise TypeError(f"{what}={_shown(value)} is not a whole number, so not a value of "
                        f"dtype {dtype}")
    whole = int(number)
    if dtype.kind == "b":
        if whole not in (0, 1):
            raise TypeError(f"{what}={_shown(value)} is not a bool (0 or 1)")
    else:
        info = np.iinfo(dtype)
        if not info.min <= whole <= info.max:
            raise TypeError(f"{what}={_shown(value)} does not fit in {dtype}")
    return dtype.type(whole)


def _shown(value) -> str:
    """``repr(value)`` for a message, a long one (a 400-digit int) cut short."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]}"


def _number(value) -> tuple:
    """``(kind, number)``: the kind of number ``value`` is (``b``, ``i``, ``f``,
    ``c``; None: not a number) and the number, ml_dtypes' bfloat16 as a float."""
    if isinstance(value, (bool, np.bool_)):
        return "b", value
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.timedelta64):
        return "i", value
    if isinstance(value, (float, np.floating)):
        return "f", value
    if isinstance(value, (complex, np.complexfloating)):
        return "c", value
    if isinstance(value, np.generic) and value.dtype.name == "bfloat16":
        return "f", float(value)
    return None, value


def _as_float(part, dtype: np.dtype, value, what: str) -> float:
    """The real number ``part`` of ``value`` as a Python float, where a float (or
    complex) ``dtype`` holds it: a TypeError if a finite one would overflow to
    infinity there. NaN and infinities are values of every float dtype."""
    try:
        f = float(part)
        finite = not isinstance(part, (float, np.floating)) or bool(np.isfinite(part))
    except OverflowError:  # a Python int beyond float64
        f, finite = float("inf"), True
    if finite and not abs(f) < _overflow_at(dtype):
        raise TypeError(f"{what}={_shown(value)} does not fit in {dtype} (it would overflow to "
                        "infinity)")
    return f


def _overflow_at(dtype: np.dtype) -> float:
    """The smallest magnitude that rounds to infinity in ``dtype``'s floats: the
    largest finite one plus half its spacing (infinity for float64, whose floats
    are Python's)."""
    found = _OVERFLOW_AT.get(dtype)
    if found is None:
        fi = np.finfo(dtype)
        found = _OVERFLOW_AT[dtype] = float(fi.max) + 2.0 ** (fi.maxexp - fi.nmant - 2)
    return found


_OVERFLOW_AT: dict = {}


#: (op, ...) -> (monoid, bindings); holds neither the op nor the arrays it reads
#: (weak references; the monoid's op is its frozen copy)
_MONOIDS = Memo("monoids", 256)


def as_monoid(op, dtype, identity=None, *, acc_dtype=None, map=None) -> Monoid:
    """Normalise ``op`` for input ``dtype`` (see :func:`make_monoid`), remembering
    the answer per op object: building one costs microseconds, and keying a user
    function walks its bytecode, constants and globals. The remembered answer is
    used while what the op reads is unchanged (:func:`pyreduce.opkey.bindings`: the
    same closure values, globals, defaults and module attributes, and arrays among
    them with the same contents, checked by a digest on every call), so rebinding
    a value the op uses, or changing an array it reads in place, gives it a new
    key, as a new function would. ``identity`` is told apart by its bits
    (``-0.0`` is not ``0.0``)."""
    try:
        key = (op_ref(op), dtype, value_key(identity), acc_dtype,
               None if map is None else op_ref(map))
        found = _MONOIDS.get(key)
    except TypeError:  # something unhashable: no memo
        return make_monoid(op, dtype, identity, acc_dtype=acc_dtype, map=map)
    bound = bindings(op) if map is None else bindings(op) + bindings(map)
    if found is not None and same(found[1], bound):
        return found[0]
    monoid = make_monoid(op, dtype, identity, acc_dtype=acc_dtype, map=map)
    _MONOIDS.put(key, (monoid, bound), owner=op)
    return monoid


def make_monoid(op, dtype, identity=None, *, acc_dtype=None, map=None) -> Monoid:
    """Normalise ``op`` for input ``dtype``.

    ``op`` is a built-in (``max``, ``operator.add``, ``np.maximum``, ... or a name
    such as ``"add"``), a Python function of two arguments, or a ready
    :class:`Monoid` (returned as it is). ``acc_dtype`` overrides the accumulator
    dtype: a dtype, or a tuple of dtypes for a tuple accumulator. ``map`` is an
    element map ``map(i, v)``; without ``acc_dtype`` the accumulator is what it
    returns for this input dtype (a tuple of values makes a tuple accumulator).
    Raises TypeError for what cannot be an op or a value.
    """
    if isinstance(op, Monoid):
        return op
    dt = check_dtype(dtype)
    if map is not None:
        return _mapped(op, dt, identity, acc_dtype, map)
    if isinstance(acc_dtype, (tuple, list)) or getattr(acc_dtype, "names", None):
        raise TypeError("a tuple dtype= needs map=, the function that makes each element "
                        "a tuple")
    name = _builtin_name(op)
    if name is not None:
        b = _BUILTINS[name]
        acc = np.dtype(np.bool_) if b.logical else check_accumulator(
            acc_dtype or default_accumulator(dt))
        if acc.kind not in b.kinds:
            raise TypeError(f"op {name!r} is not defined for dtype {acc}")
        given = identity is not None
        ident = cast_value(identity if given else b.identity(acc), acc, "identity")
        return Monoid(
            name=name, fn=b.fn, dtype=acc, identity=ident, commutative=True,
            key=("builtin", name), empty_ok=b.empty_ok or given,
        )
    if isinstance(op, str):
        raise ValueError(f"unknown op name {op!r}; known: {', '.join(_BUILTINS)}")
    if isinstance(op, np.ufunc):
        raise TypeError(
            f"ufunc {op.__name__!r} is not a supported reduction op "
            "(supported ufuncs: add, multiply, maximum, minimum, fmax, fmin, "
            "logical_and, logical_or, bitwise_and, bitwise_or, bitwise_xor)"
        )
    fn = getattr(op, "py_func", op)  # accept a Numba @njit / @cuda.jit(device=True)
    if isinstance(fn, functools.partial) or not isinstance(fn, types.FunctionType):
        if callable(op):
            raise TypeError(
                f"op {op!r} is not a Python function or a supported built-in; "
                "wrap it in a def or lambda that Numba can compile"
            )
        raise TypeError(f"op must be callable, got {type(op).__name__}")
    if fn.__code__.co_argcount != 2:
        raise TypeError(
            f"op {fn.__name__!r} must take exactly two arguments, "
            f"takes {fn.__code__.co_argcount}"
        )
    acc = check_accumulator(acc_dtype or default_accumulator(dt))
    ident = None if identity is None else cast_value(identity, acc, "identity")
    fn = freeze(fn)  # what the kernels call: the values its key is made from
    return Monoid(
        name=fn.__name__, fn=fn, dtype=acc, identity=ident, commutative=False,
        key=function_key(fn),
    )


def _function(fn, what: str, argcount: int) -> types.FunctionType:
    """``fn`` as a plain Python function of ``argcount`` arguments (a Numba
    dispatcher gives its ``py_func``), else a TypeError naming ``what``."""
    fn = getattr(fn, "py_func", fn)
    if isinstance(fn, functools.partial) or not isinstance(fn, types.FunctionType):
        raise TypeError(f"{what} must be a Python function (a def or lambda Numba can "
                        f"compile), got {type(fn).__name__}")
    if fn.__code__.co_argcount != argcount:
        raise TypeError(f"{what} {fn.__name__!r} must take exactly {argcount} arguments, "
                        f"takes {fn.__code__.co_argcount}")
    return fn


def _mapped(op, dt: np.dtype, identity, acc_dtype, map) -> Monoid:
    """An op with an element map: ``reduce(x, op, map=map)`` folds
    ``map(i, x[i])``. The accumulator is ``acc_dtype`` or what the map returns."""
    fmap = freeze(_function(map, "map", 2))
    if acc_dtype is None:
        acc = map_dtype(fmap, element(dt))
    elif isinstance(acc_dtype, (tuple, list)):
        acc = tuple_dtype(acc_dtype)
    else:
        acc = np.dtype(acc_dtype)
        for d in fields(acc):
            check_accumulator(d)
    name = _builtin_name(op)
    if name is not None:  # a built-in op over mapped elements (a sum of squares)
        if is_tuple(acc):
            raise TypeError(f"built-in op {name!r} combines scalars; map= returns a tuple")
        base = make_monoid(name, acc, identity, acc_dtype=acc)
        return dataclasses.replace(base, map=fmap,
                                   key=("mapped", base.key, function_key(fmap)))
    fn = freeze(_function(op, "op", 2))
    ident = None if identity is None else cast_value(identity, acc, "identity")
    return Monoid(name=fn.__name__, fn=fn, dtype=acc, identity=ident, commutative=False,
                  key=("mapped", function_key(fn), function_key(fmap)), map=fmap)


def map_dtype(fmap, in_dtype: np.dtype) -> np.dtype:
    """The accumulator dtype ``fmap(i, v)`` returns for elements ``v`` of
    ``in_dtype``, as Numba types it (a tuple of values: a tuple dtype).
    ``in_dtype`` is what the map sees (:func:`pyreduce.dtypes.element`)."""
    from numba import njit, typeof
    from numba.core import types as nt
    from numba.core.errors import NumbaError
    from numba.np.numpy_support import as_dtype

    try:
        compiled = njit(fmap)
        compiled.compile((nt.int64, typeof(in_dtype.type(0))))
        ret = compiled.nopython_signatures[0].return_type
    except (NumbaError, NotImplementedError) as exc:  # NotImplementedError: a dtype Numba lacks
        raise TypeError(f"map {fmap.__name__!r} could not be compiled by Numba for "
                        f"{in_dtype}: {str(exc).strip().splitlines()[0]}") from exc
    try:
        if isinstance(ret, nt.BaseTuple):
            return tuple_dtype([as_dtype(t) for t in ret])
        return check_accumulator(as_dtype(ret), "map result")
    except (TypeError, NotImplementedError, NumbaError) as exc:
        raise TypeError(f"map {fmap.__name__!r} returns {ret}, not a supported scalar or a "
                        f"tuple of them") from exc
