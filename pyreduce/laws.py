"""The laws a parallel reduction relies on, evaluated on the host.

The kernels combine elements in a tree, so an operator must be **associative**,
and an identity, if one is given, must be one on **both sides**. Commutativity is
not needed (no kernel reorders a user op) but is worth knowing. This module
evaluates those laws for one operator and dtype on given values, through the
step the kernels compute, ``acc_t(op(a, b))`` compiled by Numba, and words a
counterexample plainly. Floats and complex values are compared within a
tolerance, since float ``+`` is associative only up to rounding; integers
exactly, wrapping in the accumulator like the kernels. A tuple accumulator's
values are tuples, compared field by field.

It needs only NumPy and Numba: ``reduce(..., check=True)`` uses it with a fixed
sample of values (``quick_check``), ``pyreduce.testing`` with values that
hypothesis searches for and shrinks.
"""

from __future__ import annotations

import cmath
import dataclasses
import itertools
import math
from typing import Any, Callable

import numpy as np

from .backends.opcheck import compiled_step
from .cache import KERNELS
from .dtypes import as_value, fields, is_tuple
from .dtypes import name as dtype_name

__all__ = [
    "Law", "LAWS", "Counterexample", "LawReport", "Tolerance", "host_step",
    "counterexample", "sample", "sample_counterexample", "quick_check", "check_if_requested",
]


@dataclasses.dataclass(frozen=True)
class Law:
    """One law: ``sides(op, values)`` gives the two values that must be equal."""

    name: str
    statement: str  # what a counterexample shows, naming the values
    names: tuple  # the values it is stated for; ``e`` is the identity, not drawn
    sides: Callable
    why: str  # what goes wrong in a reduction when it fails
    required: bool = True  # False: a property worth reporting, not a failure


_NOT_IDENTITY = "an empty input returns the identity, and this value is not one"
LAWS = (
    Law("associativity", "op(op(a, b), c) != op(a, op(b, c))", ("a", "b", "c"),
        lambda op, v: (op(op(v["a"], v["b"]), v["c"]), op(v["a"], op(v["b"], v["c"]))),
        "the kernels combine elements in a tree, so the result would depend on how "
        "they are grouped, which differs between backends, variants and sizes"),
    Law("left identity", "op(e, a) != a", ("e", "a"),
        lambda op, v: (op(v["e"], v["a"]), v["a"]), _NOT_IDENTITY),
    Law("right identity", "op(a, e) != a", ("a", "e"),
        lambda op, v: (op(v["a"], v["e"]), v["a"]), _NOT_IDENTITY),
    Law("commutativity", "op(a, b) != op(b, a)", ("a", "b"),
        lambda op, v: (op(v["a"], v["b"]), op(v["b"], v["a"])),
        "not needed: pyreduce keeps the order of the elements", required=False),
)


def laws_for(identity) -> tuple:
    """The laws that apply: the identity laws only with an identity."""
    return tuple(law for law in LAWS if identity is not None or "e" not in law.names)


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How close two results of a float or complex op must be: ``|x - y| <= atol
    + rtol * scale``, where ``scale`` is the largest magnitude among the values
    involved. Integers and bools are compared exactly, tuples field by field. NaN
    equals NaN, infinities only themselves. A complex value with a NaN part is
    NaN, as ``np.isnan`` says, and so is a tuple with a NaN field: an op that
    multiplies one field by another spreads a NaN to other fields in one grouping
    and not in the other (``0 * nan``), as complex ``*`` does."""

    rtol: float = 0.0
    atol: float = 0.0

    @classmethod
    def for_dtype(cls, dtype, rtol=None, atol=None) -> "Tolerance":
        """The default for ``dtype``: for floats and complex values a few units of
        rounding (of the least precise float field of a tuple) relative to the
        largest value (what float ``+`` and ``*`` need on three operands), and the
        smallest normal number absolutely; nothing for the others."""
        dt = np.dtype(dtype)
        for name, value in (("rtol", rtol), ("atol", atol)):
            if value is None:
                continue
            number = isinstance(value, (int, float, np.integer, np.floating))
            if isinstance(value, (bool, np.bool_)) or not number:
                raise TypeError(f"{name} must be a number, got {value!r}")
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
        # complex: np.finfo gives its parts' float type
        infos = [np.finfo(d) for d in fields(dt) if d.kind in "fc"]
        if not infos:
            return cls(0.0, 0.0)
        return cls(
            max(float(16 * i.eps) for i in infos) if rtol is None else float(rtol),
            max(float(i.tiny) for i in infos) if atol is None else float(atol),
        )

    def close(self, x, y, scale: float = 0.0) -> bool:
        if _isnan(x) or _isnan(y):
            return _isnan(x) and _isnan(y)
        if isinstance(x, tuple):
            return (isinstance(y, tuple) and len(x) == len(y)
                    and all(self.close(a, b, scale) for a, b in zip(x, y)))
        if not _inexact(x):
            return x == y
        x, y = complex(x), complex(y)  # a float is a complex value without imaginary part
        return (self._close_part(x.real, y.real, scale)
                and self._close_part(x.imag, y.imag, scale))

    def _close_part(self, x: float, y: float, scale: float) -> bool:
        if x == y:
            return True
        if math.isinf(x) or math.isinf(y):
            return False
        return abs(x - y) <= self.atol + self.rtol * scale


def _inexact(v) -> bool:
    return isinstance(v, (np.inexact, float, complex))


def _isnan(v) -> bool:
    """NaN, a complex value with a NaN part, or a tuple with a NaN field."""
    if isinstance(v, tuple):
        return any(map(_isnan, v))
    return _inexact(v) and cmath.isnan(complex(v))


def magnitude(values) -> float:
    """The largest finite magnitude among ``values`` and their fields (0 for
    integers)."""
    found = [magnitude(v) if isinstance(v, tuple) else abs(complex(v)) for v in values
             if isinstance(v, tuple) or (_inexact(v) and cmath.isfinite(complex(v)))]
    return max(found, default=0.0)


def show(value) -> str:
    """``value`` as a counterexample names it: ``(1.0, 2)`` for a tuple."""
    if isinstance(value, tuple):
        return "(" + ", ".join(str(v) for v in value) + ")"
    return str(value)


def host_step(monoid) -> Callable:
    """``op`` as the kernels apply it, for two values of ``monoid.dtype`` (for a
    tuple accumulator, tuples of its fields' scalars): the op compiled by Numba
    (a TypeError if it cannot be) and its result cast to the accumulator dtype,
    so integers wrap as on every backend."""
    compiled, dtype = compiled_step(monoid), monoid.dtype
    return lambda a, b: as_value(compiled(a, b), dtype)


@dataclasses.dataclass(frozen=True)
class Counterexample:
    """Values for which ``law`` fails: ``left`` and ``right`` are its two sides
    (or ``error`` says what evaluating them raised)."""

    law: Law
    values: dict
    left: Any = None
    right: Any = None
    error: str | None = None

    def __str__(self) -> str:
        given = ", ".join(f"{name}={show(self.values[name])}" for name in self.law.names)
        if self.error is not None:
            return f"{self.law.statement} for {given} (evaluating it raised {self.error})"
        return (f"{self.law.statement} for {given} "
                f"(the left side is {show(self.left)}, the right side {show(self.right)})")


def counterexample(law: Law, step: Callable, values: dict,
                   tolerance: Tolerance) -> Counterexample | None:
    """The counterexample ``values`` make of ``law``, or None if it holds."""
    try:
        left, right = law.sides(step, values)
    except Exception as exc:  # noqa: BLE001 - whatever the op raises is the finding
        return Counterexample(law, values, error=f"{type(exc).__name__}: {exc}")
    scale = magnitude([*values.values(), left, right])
    if tolerance.close(left, right, scale):
        return None
    return Counterexample(law, values, left, right)


@dataclasses.dataclass(frozen=True)
class LawReport:
    """What a law check found for one operator and dtype.

    ``counterexamples`` holds one ``Counterexample`` per law that does not
    hold, in the order of ``LAWS``; commutativity is among them when it fails,
    but is not a failure (``ok`` ignores it): pyreduce never reorders a user op.
    ``examples`` is how many generated examples were tried per law (besides a
    fixed sample, see ``sample_counterexample``).
    """

    op: str
    dtype: np.dtype
    identity: Any
    examples: int
    counterexamples: tuple = ()

    @property
    def failures(self) -> tuple:
        """The counterexamples of laws a reduction relies on."""
        return tuple(c for c in self.counterexamples if c.law.required)

    @property
    def ok(self) -> bool:
        """True if no law a reduction relies on failed."""
        return not self.failures

    def holds(self, name: str) -> bool:
        """True if the law called ``name`` (see ``LAWS``) showed no
        counterexample."""
        if name not in {law.name for law in LAWS}:
            raise ValueError(f"unknown law {name!r}; known: {', '.join(law.name for law in LAWS)}")
        return all(c.law.name != name for c in self.counterexamples)

    @property
    def associative(self) -> bool:
        return self.holds("associativity")

    @property
    def commutative(self) -> bool:
        return self.holds("commutativity")

    def __str__(self) -> str:
        head = f"op {self.op!r} on {dtype_name(self.dtype)}"
        if self.identity is not None:
            head += f" with identity {show(self.identity)}"
        verdict = "fit for a parallel reduction" if self.ok else "unfit for a parallel reduction"
        lines = [f"{head}: {verdict}"]
        found = {c.law.name: c for c in self.counterexamples}
        for law in laws_for(self.identity):
            if law.name not in found:
                lines.append(f"  {law.name} holds (no counterexample found)")
            elif law.required:
                lines.append(f"  {law.name} fails: {found[law.name]}")
            else:
                lines.append(f"  {law.name} does not hold ({law.why}): {found[law.name]}")
        return "\n".join(lines)


# --- the quick check behind reduce(..., check=True)

def sample(dtype: np.dtype, seed: int = 0, infinities: bool = True) -> list:
    """A dozen values of ``dtype``, simplest first (so that the first counterexample
    found is a simple one): small numbers, the extremes, NaN and (with
    ``infinities``) infinities for floats, then a few random ones from a fixed
    seed. Floats stay within 1e6 in magnitude, where float ``+`` and ``*`` are
    associative within the default tolerance.

    Complex values and a tuple's fields (:func:`tuple_sample`) have no infinite
    parts: where an op multiplies one part by another, ``0 * inf`` makes a NaN
    in one grouping only, so IEEE arithmetic does not associate there even for
    ``*`` itself (``(inf * 1) * (2+3j)`` is ``nan+nanj``, ``inf * (1 *
    (2+3j))`` is ``inf+infj``)."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if is_tuple(dt):
        return tuple_sample(dt, seed)
    if dt.kind == "b":
        return [np.False_, np.True_]
    if dt.kind == "f":
        fixed = [0.0, 1.0, -1.0, 0.5, 3.0, -0.0, np.nan, *([np.inf, -np.inf] * infinities)]
        drawn = rng.standard_normal(4) * 10.0 ** rng.integers(-3, 6, 4)
        return [dt.type(v) for v in [*fixed, *drawn]]
    if dt.kind == "c":
        fixed = [0, 1, -1, 1j, -1j, 0.5 - 2j, 3 + 1j, complex(np.nan, 0), complex(0, np.nan)]
        parts = rng.standard_normal((2, 4)) * 10.0 ** rng.integers(-3, 6, 4)
        return [dt.type(v) for v in [*fixed, *(parts[0] + 1j * parts[1])]]
    info = np.iinfo(dt)
    fixed = [0, 1, 2, 3, info.max, info.min, info.max - 1]
    if dt.kind == "i":
        fixed += [-1, -2]
    small = rng.integers(max(info.min, -100), min(info.max, 100), 2, endpoint=True, dtype=dt)
    drawn = rng.integers(info.min, info.max, 3, endpoint=True, dtype=dt)
    return [dt.type(v) for v in [*fixed, *small, *drawn]]


def tuple_sample(dtype: np.dtype, seed: int = 0) -> list:
    """Tuples of a tuple dtype's fields' samples (without infinities), simplest
    first: the first three values in every field (``(0, 0)``, ``(1, 1)``, ...),
    then every value, field ``k`` of tuple ``j`` holding value ``j + k`` of its
    sample, so that fields differ. Some twenty tuples: every combination of
    three is tried for associativity."""
    columns = [sample(d, seed + k, infinities=False) for k, d in enumerate(fields(dtype))]
    same = [tuple(c[j % len(c)] for c in columns) for j in range(3)]
    n = max(len(c) for c in columns)
    return same + [tuple(c[(j + k) % len(c)] for k, c in enumerate(columns)) for j in range(n)]


def sample_counterexample(law: Law, step: Callable, identity, dtype,
                          tolerance: Tolerance) -> Counterexample | None:
    """The first counterexample of ``law`` among all combinations of
    ``sample`` values of ``dtype`` (simplest first), or None."""
    values = sample(dtype)
    drawn = [n for n in law.names if n != "e"]
    for combo in itertools.product(values, repeat=len(drawn)):
        found = counterexample(law, step, {"e": identity, **dict(zip(drawn, combo))}, tolerance)
        if found is not None:
            return found
    return None


def quick_check(monoid) -> None:
    """Associativity, and the identity on both sides when there is one, on every
    combination of ``sample`` values: a ValueError naming the law and the
    counterexample if one fails, a TypeError if Numba cannot compile the op. Runs
    on the host, without kernels, once per op code, dtype and identity."""

    def build():
        step = host_step(monoid)
        tolerance = Tolerance.for_dtype(monoid.dtype)
        for law in laws_for(monoid.identity):
            if not law.required:
                continue
            found = sample_counterexample(law, step, monoid.identity, monoid.dtype, tolerance)
            if found is not None:
                raise ValueError(
                    f"op {monoid.name!r} fails the {law.name} law for "
                    f"{dtype_name(monoid.dtype)}: {found}; {law.why}"
                )
        return True

    KERNELS.get(("laws", monoid.cache_key, _bits(monoid.identity)), build)


def _bits(value):
    """A key for an accumulator value (or None) by its bits: -0.0 is not 0.0."""
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(_bits(v) for v in value)
    return np.asarray(value).tobytes()


def check_if_requested(monoid, check) -> None:
    """``reduce(..., check=check)``: ``quick_check`` for a user op when
    ``check`` is True; built-in ops are known to obey the laws."""
    if not isinstance(check, (bool, np.bool_)):
        raise TypeError(f"check= must be True or False, got {check!r}")
    if check and monoid.key[0] != "builtin":
        quick_check(monoid)
