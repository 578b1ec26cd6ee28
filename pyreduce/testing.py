"""Testing reduction operators: hypothesis strategies, a law checker, and a check
of every backend and variant against ``functools.reduce``.

A parallel reduction is right only if its operator is associative (and its
identity, if any, is one on both sides). ``check_laws`` searches for values
that break those laws and reports the smallest it finds in plain words;
``check_backends`` reduces generated arrays with ``pyreduce.reduce`` on every
backend and kernel variant and compares with ``functools.reduce``;
``check_op`` does both and raises ``OpCheckError`` (an
``AssertionError``) on the first problem, so it can be called as it is from a
test::

    def test_my_op():
        pyreduce.testing.check_op(my_op, np.int64, identity=0)

This module needs `hypothesis <https://hypothesis.readthedocs.io>`_ (``pip install
hypothesis``, or ``pyreduce-gpu[test]``); ``import pyreduce`` does not import it.
``reduce(..., check=True)`` checks the laws without it, on a fixed sample.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random

import numpy as np

try:
    from hypothesis import find, settings
    from hypothesis import strategies as st
    from hypothesis.errors import NoSuchExample
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "pyreduce.testing needs hypothesis, which is not installed: "
        "pip install hypothesis (or pip install 'pyreduce-gpu[test]')"
    ) from exc

from . import backends as _backends
from .general import reduce
from .laws import (
    LAWS, Counterexample, LawReport, Tolerance, counterexample, host_step, laws_for, magnitude,
    sample_counterexample,
)
from .dtypes import BFLOAT16
from .ops import as_monoid, cast_value, check_dtype
from .planner import Tuning
from .tuning_keywords import warn_deprecated
from .variants import VARIANTS

__all__ = [
    "values", "sizes", "arrays", "check_laws", "check_backends", "check_op",
    "OpCheckError", "LawReport", "Counterexample", "LAWS", "SIM_TUNING",
]

#: The tuning ``check_backends`` uses in the simulator, where every CUDA thread
#: is a Python thread: tiles of 128 elements, at most three blocks.
SIM_TUNING = Tuning(block_size=64, items_per_thread=2, max_blocks=3)

# per backend: the largest array and the examples per variant, unless given
_MAX_SIZE = {"sim": 400, "cpu": 2000}
_EXAMPLES = {"sim": 5, "cpu": 50}
_GPU_MAX_SIZE, _GPU_EXAMPLES = 5000, 10

#: Float values stay within this magnitude unless told otherwise, so that ``+`` and
#: ``*`` of a few of them neither overflow nor lose all precision.
DEFAULT_MAGNITUDE = 1e6


class OpCheckError(AssertionError):
    """An operator that is unfit for a parallel reduction, or a backend that
    reduced it wrongly; the message says which law, backend or variant, and the
    values."""


# --------------------------------------------------------------------------
# Strategies


def values(dtype, *, allow_nan: bool = True, allow_infinity: bool = True,
           max_magnitude: float | None = None):
    """A hypothesis strategy for scalars of ``dtype`` (NumPy scalars).

    Integers range over the whole dtype (hypothesis favours small ones and the
    extremes), floats over ``[-max_magnitude, max_magnitude]`` (default 1e6 for
    floats, the whole range for integers), with ``-0.0`` and subnormals; one float
    in eight is NaN, ``inf`` or ``-inf`` unless those are turned off.

    >>> import numpy as np
    >>> from hypothesis import find
    >>> v = find(values(np.int8), lambda v: v < -100)
    >>> v.dtype, bool(v < -100)
    (dtype('int8'), True)
    """
    dt = check_dtype(dtype)
    if dt == BFLOAT16:  # float32 values cut to bfloat16, as ml_dtypes scalars
        host = _bfloat16_host()
        return values(np.float32, allow_nan=allow_nan, allow_infinity=allow_infinity,
                      max_magnitude=max_magnitude).map(lambda v: _cut_to_bfloat16(v, host))
    if max_magnitude is not None:
        if isinstance(max_magnitude, (bool, np.bool_)) or not isinstance(
                max_magnitude, (int, float, np.integer, np.floating)):
            raise TypeError(f"max_magnitude must be a number, got {max_magnitude!r}")
        if not max_magnitude >= 0:
            raise ValueError(f"max_magnitude must be >= 0, got {max_magnitude!r}")
    if dt.kind == "b":
        return st.booleans().map(np.bool_)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = int(info.min), int(info.max)
        if max_magnitude is not None:
            m = int(max_magnitude)
            lo, hi = max(lo, -m), min(hi, m)
        return st.integers(lo, hi).map(dt.type)
    if dt.kind == "c":  # real and imaginary parts drawn like floats of their type
        part = values(np.float32 if dt.itemsize == 8 else np.float64, allow_nan=allow_nan,
                      allow_infinity=allow_infinity, max_magnitude=max_magnitude)
        return st.tuples(part, part).map(lambda ri: dt.type(complex(ri[0], ri[1])))
    limit = DEFAULT_MAGNITUDE if max_magnitude is None else float(max_magnitude)
    bound = dt.type(min(limit, float(np.finfo(dt).max)))
    if bound > limit:  # rounded up to the dtype: step back inside the limit
        bound = np.nextafter(bound, dt.type(0))
    finite = st.floats(-float(bound), float(bound), width=8 * dt.itemsize).map(dt.type)
    specials = [v for v, keep in ((np.nan, allow_nan), (np.inf, allow_infinity),
                                  (-np.inf, allow_infinity)) if keep]
    if not specials:
        return finite
    special = st.sampled_from([dt.type(v) for v in specials])
    # one in eight; the finite branch comes first so that shrinking leads to it
    return st.integers(0, 7).flatmap(lambda k: finite if k < 7 else special)


def _cut_to_bfloat16(v, host: np.dtype):
    """A float32 rounded toward zero to bfloat16 (its upper 16 bits), so that it
    stays within the magnitude it was drawn in; NaN and infinities stay what
    they are."""
    bits = np.array([v], np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32).astype(host)[0]


def _bfloat16_host() -> np.dtype:
    """ml_dtypes' bfloat16, NumPy's stand-in for it on the host."""
    try:
        import ml_dtypes
    except ImportError as exc:
        raise TypeError("bfloat16 values on the host need ml_dtypes: pip install ml_dtypes "
                        "(or pip install 'pyreduce-gpu[test]')") from exc
    return np.dtype(ml_dtypes.bfloat16)


def _edges(min_size: int, max_size: int) -> list:
    """Sizes on and around the powers of two and their triples: warp, block, tile
    and grid edges for any power-of-two tuning (and ``max_blocks=3``)."""
    edges = {1, 2, 3}
    j = 3
    while 2 ** j - 1 <= max_size:
        for m in (1, 3):
            edges.update(m * 2 ** j + d for d in (-1, 0, 1))
        j += 1
    return sorted(e for e in edges if min_size <= e <= max_size)


def sizes(max_size: int, *, min_size: int = 0):
    """A strategy for array sizes in ``[min_size, max_size]``: half of them on a
    power-of-two edge (``2**j - 1``, ``2**j``, ``2**j + 1`` and the same around
    ``3 * 2**j``), half anywhere.

    >>> from hypothesis import given
    >>> @given(sizes(300, min_size=1))
    ... def test_in_range(n):
    ...     assert 1 <= n <= 300
    >>> test_in_range()
    """
    for name, v in (("min_size", min_size), ("max_size", max_size)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be an int >= 0, got {v!r}")
    if min_size > max_size:
        raise ValueError(f"min_size={min_size} is larger than max_size={max_size}")
    anywhere = st.integers(min_size, max_size)
    edges = _edges(min_size, max_size)
    return st.one_of(st.sampled_from(edges), anywhere) if edges else anywhere


def arrays(dtype, *, min_size: int = 0, max_size: int = 400, elements=None, **value_options):
    """A strategy for 1-D arrays of ``dtype`` with sizes from ``sizes``.

    ``elements`` is a strategy for the values (default ``values`` of
    ``dtype``, with ``value_options`` passed to it); each value must fit
    ``dtype``. An array deals a pool of up to 16 drawn values out at random
    (from a drawn seed) and plants up to four more at drawn positions: varied
    enough for a non-commutative operator to notice any reordering, cheap to draw
    at any size, and quick to shrink, since a smaller size keeps the same values.

    >>> import numpy as np
    >>> from hypothesis import given
    >>> @given(arrays(np.float32, min_size=1, max_size=50, allow_nan=False))
    ... def test_no_nan(x):
    ...     assert x.dtype == np.float32 and 1 <= x.size <= 50 and not np.isnan(x).any()
    >>> test_no_nan()
    """
    dt = check_dtype(dtype)
    if elements is None:
        elements = values(dt, **value_options)
    elif value_options:
        raise TypeError("pass either elements= or value options, not both: "
                        f"{sorted(value_options)}")
    if dt == BFLOAT16:  # arrays of ml_dtypes' bfloat16, the host's bfloat16
        dt = _bfloat16_host()
        f32 = np.dtype(np.float32)
        scalars = elements.map(lambda v: dt.type(
            cast_value(float(v) if isinstance(v, dt.type) else v, f32, "element")))
    else:
        scalars = elements.map(lambda v: cast_value(v, dt, "element"))
    size = sizes(max_size, min_size=min_size)

    @st.composite
    def draw_array(draw):
        n = draw(size)
        pool = np.array(draw(st.lists(scalars, min_size=1, max_size=16)), dtype=dt)
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        x = pool[rng.integers(0, len(pool), n)]
        if n:
            for pos, v in draw(st.lists(st.tuples(st.integers(0, n - 1), scalars), max_size=4)):
                x[pos] = v
        return x

    return draw_array()


# --------------------------------------------------------------------------
# Laws


def _settings(max_examples: int):
    # no example database: a checker called from user code writes no files
    return settings(max_examples=max_examples, deadline=None, database=None)


def _random(seed):
    return None if seed is None else random.Random(seed)


def _examples(value, what="max_examples") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{what} must be an int >= 1, got {value!r}")
    return int(value)


def check_laws(op, dtype, identity=None, *, elements=None, rtol=None, atol=None,
               max_examples: int = 100, seed: int | None = None) -> LawReport:
    """Search for values that break the laws a parallel reduction relies on.

    For each law (associativity; with ``identity``, that it is an identity on the
    left and on the right; commutativity, which is reported but not required)
    hypothesis tries up to ``max_examples`` values from ``elements`` (default
    ``values`` of ``dtype``: floats within 1e6, with NaN and infinities; complex
    values without infinite parts, see ``pyreduce.laws.sample``) and
    shrinks what breaks it to a minimal counterexample. Without ``elements``,
    every combination of a fixed sample (zero, one, the extremes, NaN and
    infinities) is tried first. ``op`` is applied as the kernels apply it:
    compiled by Numba, every result cast to the accumulator dtype (so integers
    wrap). Floats are compared within ``rtol`` times the largest magnitude
    involved plus ``atol`` (default: 16 units of rounding and the smallest normal
    number), since float ``+`` is associative only up to rounding; integers
    exactly.

    Returns a ``LawReport``; ``report.ok`` is False if a required law
    failed, and ``str(report)`` says which, for which values. An op Numba cannot
    compile raises ``OpCheckError``. ``seed`` makes the search repeatable.

    >>> import numpy as np
    >>> report = check_laws(lambda a, b: a - b, np.int32, seed=0)
    >>> report.ok, report.commutative
    (False, False)
    >>> print(report.failures[0])
    op(op(a, b), c) != op(a, op(b, c)) for a=0, b=0, c=1 (the left side is -1, the right side 1)
    """
    monoid = _monoid(op, dtype, identity)
    step = _step(monoid)
    tolerance = Tolerance.for_dtype(monoid.dtype, rtol, atol)
    scalars = _law_values(monoid, dtype, elements)
    n = _examples(max_examples)
    found = []
    for law in laws_for(monoid.identity):
        if elements is None:
            # NaN, infinities and the extremes, in every combination, first: cheap,
            # and what a random search meets only now and then
            first = sample_counterexample(law, step, monoid.identity, monoid.dtype, tolerance)
            if first is not None:
                found.append(first)
                continue
        drawn = tuple(name for name in law.names if name != "e")

        def breaks(combo, law=law, drawn=drawn):
            given = {"e": monoid.identity, **dict(zip(drawn, combo))}
            return counterexample(law, step, given, tolerance) is not None

        try:
            combo = find(st.tuples(*[scalars] * len(drawn)), breaks,
                         settings=_settings(n), random=_random(seed))
        except NoSuchExample:
            continue
        given = {"e": monoid.identity, **dict(zip(drawn, combo))}
        found.append(counterexample(law, step, given, tolerance))
    return LawReport(monoid.name, monoid.dtype, monoid.identity, n, tuple(found))


def _monoid(op, dtype, identity):
    """The op as ``reduce`` sees it (TypeError/ValueError for what cannot be an op)."""
    return as_monoid(op, check_dtype(dtype), identity)


def _step(monoid):
    try:
        return host_step(monoid)
    except TypeError as exc:
        raise OpCheckError(str(exc)) from exc


def _law_values(monoid, dtype, elements):
    """Values of the accumulator dtype: ``elements`` (values of ``dtype``) cast as
    the kernels load them, or ``values`` of the accumulator dtype."""
    dt, acc = np.dtype(dtype), monoid.dtype
    if elements is None:  # complex: no infinite parts, as in laws.sample (which says why)
        return values(acc, allow_infinity=acc.kind != "c")
    return elements.map(lambda v: np.asarray(cast_value(v, dt, "element")).astype(acc)[()])


# --------------------------------------------------------------------------
# Backends and variants against functools.reduce


def _fold(step, flat: np.ndarray, initial):
    """``functools.reduce(step, flat[, initial])`` and the largest finite magnitude
    of its running value (the scale of its rounding)."""
    peak = [0.0]

    def tracked(a, b):
        out = step(a, b)
        if isinstance(out, np.floating) and math.isfinite(out):
            peak[0] = max(peak[0], abs(float(out)))
        return out

    if initial is None:
        return functools.reduce(tracked, flat), peak[0]
    return functools.reduce(tracked, flat, initial), peak[0]


def _show(x: np.ndarray) -> str:
    items = [str(v) for v in x]
    if len(items) > 64:
        items = items[:32] + ["..."] + items[-32:]
    return f"[{', '.join(items)}] ({x.size} elements of {x.dtype})"


def _call_text(kwargs: dict, initial) -> str:
    args = ["x", "op"]
    if initial is not None:
        args.append(f"initial={initial}")
    return f"pyreduce.reduce({', '.join(args + [_keywords(kwargs)])})"


def _keywords(kwargs: dict) -> str:
    """``kwargs`` as a call would spell them (``tuning=pyreduce.Tuning(...)``)."""
    return ", ".join(f"{k}=pyreduce.{v!r}" if isinstance(v, Tuning) else f"{k}={v!r}"
                     for k, v in kwargs.items())


def _given(tuning) -> dict:
    """The fields ``tuning`` (a Tuning, or None) sets, to lay over the default
    tuning of a backend; ``variants=`` names the variants."""
    if tuning is None:
        return {}
    if isinstance(tuning, dict):  # before tuning= took a Tuning
        given = tuning
        tuning = Tuning(**given)
        warn_deprecated(f"check_backends(tuning={given!r}) is deprecated: pass "
                        f"tuning=pyreduce.{tuning!r}")
    if not isinstance(tuning, Tuning):
        raise TypeError(f"tuning must be a pyreduce.Tuning, got {tuning!r}")
    if tuning.variant != "auto":
        raise ValueError(f"tuning={tuning!r} names a variant: pass variants=[...] instead "
                         "(each is checked with the rest of the tuning)")
    default = Tuning()
    return {f.name: getattr(tuning, f.name) for f in dataclasses.fields(Tuning)
            if getattr(tuning, f.name) != getattr(default, f.name)}


def _runs(backends, variants, tuning, commutative=True):
    """``(backend, variant, reduce keywords)`` for every run asked for. By default
    every variant, less those that reorder where the op is not ``commutative``
    (they refuse it)."""
    present = _backends.available()
    names = list(present) if backends is None else list(backends)
    for name in names:
        if name not in present:
            raise ValueError(f"backend {name!r} is not available in this process "
                             f"(available: {', '.join(present)})")
    chosen = [v for v, spec in VARIANTS.items() if commutative or not spec.commutative_only] \
        if variants is None else list(variants)
    for v in chosen:
        if v not in VARIANTS:
            raise ValueError(f"unknown variant {v!r}; known: {', '.join(VARIANTS)}")
    given = _given(tuning)
    for name in names:
        if name == "cpu":
            yield name, None, {"backend": "cpu"}
            continue
        base = (SIM_TUNING if name == "sim" else Tuning()).replace(**given)
        for v in chosen:
            each = base
            multiple = VARIANTS[v].items_multiple
            items = each.items_per_thread
            if items and items % multiple:
                # several shared slots per thread, or whole leaves, need a multiple
                each = each.replace(items_per_thread=items + multiple - items % multiple)
            yield name, v, {"backend": name, "variant": v, "tuning": each}


def check_backends(op, dtype, identity=None, *, backends=None, variants=None, tuning=None,
                   elements=None, rtol=None, atol=None, max_size: int | None = None,
                   max_examples: int | None = None, seed: int | None = None) -> None:
    """Compare ``pyreduce.reduce`` with ``functools.reduce`` on generated arrays,
    on every backend and variant.

    Arrays come from ``arrays`` (``elements`` as there; sizes around
    power-of-two edges and anywhere up to ``max_size``: 400 on ``sim``, 2000 on
    ``cpu``, 5000 on a GPU), sometimes with an ``initial`` value. The reference
    is ``functools.reduce`` of the same step the kernels take (the op compiled
    by Numba, each result cast to the accumulator dtype). Floats agree within
    ``rtol`` times the size times the largest magnitude seen, plus ``atol`` (see
    ``check_laws``). An empty input must return ``identity``, or raise
    ValueError without one.

    ``backends`` defaults to ``pyreduce.available()``, ``variants`` (GPU
    backends) to every one in ``pyreduce.variants`` that takes the op (one that
    reorders takes the built-ins only). ``tuning`` is a
    :class:`pyreduce.Tuning` for the GPU backends, without a variant; the
    fields it sets are laid over ``SIM_TUNING`` in the simulator, and its
    ``items_per_thread`` is rounded up to what each variant accepts. (A dict
    of the same fields is still taken, with a DeprecationWarning.)
    ``max_examples`` arrays are tried per backend and variant (default 50 on
    ``cpu``, 5 on ``sim``, 10 on a GPU); the first mismatch is shrunk to a
    minimal one and raised as ``OpCheckError``, naming the call, the array
    and both results.

    >>> import numpy as np
    >>> check_backends(lambda a, b: b if b != 0 else a, np.int64, backends=["cpu"], seed=0)
    """
    monoid = _monoid(op, dtype, identity)
    dt = np.dtype(dtype)
    step = _step(monoid)
    tolerance = Tolerance.for_dtype(monoid.dtype, rtol, atol)
    acc = monoid.dtype
    for backend, _variant, kwargs in _runs(backends, variants, tuning, monoid.commutative):
        _check_empty(op, dt, monoid, identity, kwargs)
        limit = max_size if max_size is not None else _MAX_SIZE.get(backend, _GPU_MAX_SIZE)
        n = _examples(max_examples if max_examples is not None
                      else _EXAMPLES.get(backend, _GPU_EXAMPLES))
        initials = st.none() | _law_values(monoid, dt, elements)
        cases = st.tuples(arrays(dt, min_size=1, max_size=limit, elements=elements), initials)

        def mismatch(case, kwargs=kwargs):
            x, initial = case
            given = x.copy()  # the drawn array stays as drawn, for the report
            try:
                got = reduce(given, op, identity, initial=initial, **kwargs)
            except Exception as exc:  # noqa: BLE001 - any error is the finding
                return f"raised {type(exc).__name__}: {exc}"
            if not np.array_equal(given, x, equal_nan=x.dtype.kind == "f"):
                return "modified its input"
            flat = x.astype(acc)  # C casts, as the kernels load elements
            want, peak = _fold(step, flat, initial)
            if not isinstance(got, np.generic) or got.dtype != acc:
                return f"returned {got!r}, not a scalar of {acc}"
            # rounding grows with the number of steps and the largest value seen
            scale = x.size * max(peak, magnitude([*flat, want, got]))
            if tolerance.close(got, want, scale):
                return None
            return f"returned {got} where functools.reduce returned {want}"

        found = []

        def fails(case, mismatch=mismatch, found=found):
            why = mismatch(case)
            if why is not None:  # find returns the last case this held for
                found[:] = [why]
            return why is not None

        try:
            x, initial = find(cases, fails, settings=_settings(n), random=_random(seed))
        except NoSuchExample:
            continue
        raise OpCheckError(f"{_call_text(kwargs, initial)} {found[0]}, for x = {_show(x)}")


def _check_empty(op, dt, monoid, identity, kwargs):
    """An empty input returns the identity (given or inferred), or raises
    ValueError where there is none."""
    options = _keywords(kwargs)
    given = "" if identity is None else f"identity={identity}, "
    call = f"pyreduce.reduce(empty, op, {given}{options})"
    try:
        want = monoid.empty_result()
    except ValueError:
        want = None
    try:
        got = reduce(np.zeros(0, dt), op, identity, **kwargs)
    except ValueError as exc:
        if want is None:
            return
        raise OpCheckError(f"{call} raised ValueError: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - any other error is the finding
        raise OpCheckError(f"{call} raised {type(exc).__name__}: {exc}") from exc
    if want is None:
        raise OpCheckError(f"{call} returned {got} where it should raise ValueError "
                           "(there is no identity)")
    if not Tolerance().close(got, want):
        raise OpCheckError(f"{call} returned {got}, not the identity {want}")


# --------------------------------------------------------------------------
# Both


def check_op(op, dtype, identity=None, *, backends=None, variants=None, tuning=None,
             elements=None, rtol=None, atol=None, max_size: int | None = None,
             law_examples: int = 100, backend_examples: int | None = None,
             seed: int | None = None) -> LawReport:
    """Check that ``op`` is fit for a parallel reduction of ``dtype``, then that
    every backend and variant reduces it like ``functools.reduce``.

    Runs ``check_laws`` (with ``law_examples`` per law) and raises
    ``OpCheckError`` with its report if a law fails, or if Numba cannot
    compile the op; then ``check_backends`` (with ``backend_examples`` per
    backend and variant). ``elements``, ``rtol``, ``atol`` and ``seed`` apply to
    both. Returns the law report, which also says whether the op is commutative.

    >>> import numpy as np
    >>> last_nonzero = lambda a, b: b if b != 0 else a
    >>> check_op(last_nonzero, np.int64, identity=0, backends=["cpu"]).commutative
    False
    """
    report = check_laws(op, dtype, identity, elements=elements, rtol=rtol, atol=atol,
                        max_examples=law_examples, seed=seed)
    if not report.ok:
        raise OpCheckError(str(report))
    check_backends(op, dtype, identity, backends=backends, variants=variants, tuning=tuning,
                   elements=elements, rtol=rtol, atol=atol, max_size=max_size,
                   max_examples=backend_examples, seed=seed)
    return report
