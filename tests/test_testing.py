"""``pyreduce.testing`` and ``reduce(..., check=True)``: the checker passes the
operators the project relies on, on every backend and variant, and fails unfit
ones, and broken backends, with a plain-words message that names the law or the
backend and variant, the values and both results."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

import pyreduce
from pyreduce import laws
from pyreduce import testing as pt
from oracles import P, affine, affine_data, first_nonzero, last_nonzero, on

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

#: affine maps x -> a*x + b (mod P), packed as a*P + b (tests/oracles.py)
AFFINE_MAPS = st.builds(lambda a, b: a * P + b, st.integers(1, P - 1), st.integers(0, P - 1))
AFFINE_IDENTITY = 1 * P + 0  # x -> x


def user_add(a, b):
    return a + b


def user_max(a, b):
    return a if a > b else b


def user_mul(a, b):
    return a * b


def refuses_zero(a, b):
    if b == 0:
        raise ValueError("b is 0")
    return a * b


# --------------------------------------------------------------------------
# Laws: what holds


LAWFUL = [
    # (op, dtype, identity, elements, commutative)
    ("add", np.float32, None, None, True),  # the identity 0 is inferred
    (user_add, np.float64, 0.0, None, True),  # float + within the default tolerance
    (user_add, np.int8, 0, None, True),  # wraps in the accumulator, still associative
    (max, np.float64, None, None, True),  # NaN propagates from both sides
    ("min", np.uint16, None, None, True),
    ("nanmax", np.float32, None, None, True),  # NaN is its identity
    (last_nonzero, np.int64, 0, None, False),
    (first_nonzero, np.float64, 0.0, None, False),
    (affine, np.int64, AFFINE_IDENTITY, AFFINE_MAPS, False),
    (user_add, np.complex64, 0, None, True),  # complex within the default tolerance
    (user_mul, np.complex128, 1, None, True),
]


@pytest.mark.parametrize("op,dt,identity,elements,commutative", LAWFUL,
                         ids=[f"{getattr(c[0], '__name__', c[0])}-{np.dtype(c[1])}"
                              for c in LAWFUL])
def test_laws_hold(op, dt, identity, elements, commutative):
    report = pt.check_laws(op, dt, identity, elements=elements, max_examples=50, seed=1)
    assert report.ok, str(report)
    assert report.associative and report.commutative == commutative, str(report)
    assert report.failures == ()
    if report.identity is not None:
        assert report.holds("left identity") and report.holds("right identity")
    text = str(report)
    assert text.splitlines()[0].endswith(": fit for a parallel reduction")
    assert "associativity holds" in text
    if not commutative:
        assert "commutativity does not hold (not needed" in text
        assert "op(a, b) != op(b, a) for a=" in text


# --------------------------------------------------------------------------
# Laws: what fails, in plain words (without elements=, a fixed sample is tried
# first, simplest values first, so these counterexamples are deterministic)


UNLAWFUL = [
    # (op, dtype, identity, law, counterexample)
    (lambda a, b: a - b, np.float64, None, "associativity",
     "op(op(a, b), c) != op(a, op(b, c)) for a=0.0, b=0.0, c=1.0 "
     "(the left side is -1.0, the right side 1.0)"),
    (lambda a, b: (a + b) / 2, np.float32, None, "associativity",
     "op(op(a, b), c) != op(a, op(b, c)) for a=0.0, b=0.0, c=1.0 "
     "(the left side is 0.5, the right side 0.25)"),
    (lambda a, b: (a + b) // 2, np.int16, None, "associativity",
     "op(op(a, b), c) != op(a, op(b, c)) for a=0, b=0, c=2 "
     "(the left side is 1, the right side 0)"),
    # the conventional max: a NaN in the middle decides which side wins
    (user_max, np.float64, None, "associativity",
     "op(op(a, b), c) != op(a, op(b, c)) for a=0.0, b=nan, c=-1.0 "
     "(the left side is -1.0, the right side 0.0)"),
    (user_add, np.int32, 1, "left identity",
     "op(e, a) != a for e=1, a=0 (the left side is 1, the right side 0)"),
    # "the first element": 0 is an identity on the right only
    (lambda a, b: a, np.float64, 0.0, "left identity",
     "op(e, a) != a for e=0.0, a=1.0 (the left side is 0.0, the right side 1.0)"),
    (lambda a, b: b, np.uint8, 7, "right identity",
     "op(a, e) != a for a=0, e=7 (the left side is 7, the right side 0)"),
    # an op that raises is a counterexample too
    (refuses_zero, np.int64, None, "associativity",
     "op(op(a, b), c) != op(a, op(b, c)) for a=0, b=0, c=0 "
     "(evaluating it raised ValueError: b is 0)"),
    (lambda a, b: a - b, np.complex64, None, "associativity",
     "op(op(a, b), c) != op(a, op(b, c)) for a=0j, b=0j, c=(1+0j) "
     "(the left side is (-1+0j), the right side (1+0j))"),
    (lambda a, b: a * np.conj(b), np.complex128, None, "associativity",
     "op(op(a, b), c) != op(a, op(b, c)) for a=(1+0j), b=(1+0j), c=1j "
     "(the left side is -1j, the right side 1j)"),
    (user_mul, np.complex128, 1j, "left identity",
     "op(e, a) != a for e=1j, a=(1+0j) (the left side is 1j, the right side (1+0j))"),
]


@pytest.mark.parametrize("op,dt,identity,law,text", UNLAWFUL,
                         ids=["sub", "mean", "int_mean", "user_max", "wrong_identity",
                              "first", "last", "raises", "complex_sub", "complex_conj",
                              "complex_identity"])
def test_laws_fail_in_plain_words(op, dt, identity, law, text):
    report = pt.check_laws(op, dt, identity, max_examples=50, seed=2)
    assert not report.ok and not report.holds(law)
    assert [str(c) for c in report.failures if c.law.name == law] == [text]
    assert f"  {law} fails: {text}" in str(report)
    assert str(report).splitlines()[0].endswith(": unfit for a parallel reduction")
    # check_op stops at the laws, with the report as its message
    with pytest.raises(pt.OpCheckError) as info:
        pt.check_op(op, dt, identity, law_examples=10, backends=["cpu"], seed=2)
    assert isinstance(info.value, AssertionError) and text in str(info.value)
    # and reduce(check=True) refuses the op with the same counterexample
    with pytest.raises(ValueError, match=f"fails the {law} law for {np.dtype(dt)}") as info:
        pyreduce.reduce(np.ones(5, dt), op, identity, backend="cpu", check=True)
    assert text in str(info.value)


def test_one_sided_identity_names_the_side():
    report = pt.check_laws(lambda a, b: a, np.int32, 0, max_examples=20, seed=0)
    assert not report.holds("left identity") and report.holds("right identity")
    assert report.associative and not report.commutative


def test_user_max_without_nan_is_lawful():
    """The conventional max fails only through NaN: values without NaN pass."""
    no_nan = pt.values(np.float64, allow_nan=False)
    assert pt.check_laws(user_max, np.float64, elements=no_nan, max_examples=100, seed=0).ok


def test_float_tolerance():
    # float + is associative only up to rounding: exactly, it is not
    exact = pt.check_laws(user_add, np.float64, rtol=0, atol=0, max_examples=100, seed=0)
    assert not exact.associative and "associativity fails" in str(exact)
    # a generous tolerance lets a slightly non-associative op through, a tight one not
    nudge = lambda a, b: a + b + 1e-9 * a  # noqa: E731
    assert not pt.check_laws(nudge, np.float64, max_examples=100, seed=0).ok
    assert pt.check_laws(nudge, np.float64, rtol=1e-6, max_examples=100, seed=0).ok
    for bad, exc in ((-1.0, ValueError), (float("inf"), ValueError), ("1e-6", TypeError),
                     (True, TypeError)):
        with pytest.raises(exc, match="rtol"):
            pt.check_laws(user_add, np.float64, rtol=bad)


def test_uncompilable_op():
    bad = lambda a, b: a + "x"  # noqa: E731
    with pytest.raises(pt.OpCheckError, match="could not be compiled by Numba for float64"):
        pt.check_laws(bad, np.float64)
    with pytest.raises(pt.OpCheckError, match="could not be compiled"):
        pt.check_op(bad, np.float64, backends=["cpu"])
    with pytest.raises(TypeError, match="could not be compiled"):
        pyreduce.reduce(np.ones(3), bad, backend="cpu", check=True)
    # what cannot be an op at all is the caller's error, as in reduce
    with pytest.raises(TypeError, match="two arguments"):
        pt.check_laws(lambda a: a, np.float64)
    with pytest.raises(TypeError, match="not supported"):
        pt.check_laws(user_add, np.longdouble)


# --------------------------------------------------------------------------
# Every backend and variant against functools.reduce


VARIANTS = list(pyreduce.variants)
ORDERED = [v for v in VARIANTS if not pyreduce.variants[v].commutative_only]
REORDERING = [v for v in VARIANTS if v not in ORDERED]

PROJECT_OPS = [
    # (op, dtype, identity, elements, variants on the GPU backends); every op runs
    # on every backend, the variants are shared out to keep the simulator's
    # launches few, with affine composition, which notices any reordering, on all
    # that keep order (None: the default, every variant that takes the op)
    (affine, np.int64, AFFINE_IDENTITY, AFFINE_MAPS, None),
    (user_add, np.int8, 0, None, ORDERED[0::4]),  # wraps
    (max, np.float32, None, None, VARIANTS[1::4]),
    ("min", np.float64, None, None, VARIANTS[2::4] + REORDERING),
    (last_nonzero, np.float64, 0.0, None, ORDERED[3::4]),
]


@pytest.mark.parametrize("op,dt,identity,elements,variants", PROJECT_OPS,
                         ids=[getattr(c[0], "__name__", c[0]) for c in PROJECT_OPS])
def test_check_op_passes_the_project_ops(op, dt, identity, elements, variants):
    report = pt.check_op(op, dt, identity, elements=elements, variants=variants,
                         law_examples=50, backend_examples=2, seed=3)
    assert report.ok


@pytest.mark.parametrize("op,dt", [("add", np.float32), (np.logical_or, np.float64),
                                   ("nanmin", np.int16), ("mul", np.uint8)],
                         ids=["add", "logical_or", "nanmin", "mul"])
def test_builtins_pass_on_cpu(op, dt):
    """Inferred identities (and none for nanmin), a bool accumulator for float input."""
    report = pt.check_op(op, dt, backends=["cpu"], law_examples=30, backend_examples=10, seed=5)
    assert report.ok and report.commutative


@pytest.fixture
def shrinking():
    """Hypothesis with its shrink phase whatever the profile (``triage`` has none)."""
    settings.load_profile("ci")
    yield
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def test_backend_mismatch_is_shrunk_and_named(shrinking):
    """``a - b`` skips the laws here: the CPU fold splits 16 or more elements into
    8 streams, so the smallest array that shows it has 16 elements."""
    op = lambda a, b: a - b  # noqa: E731
    with pytest.raises(pt.OpCheckError) as info:
        pt.check_backends(op, np.float64, backends=["cpu"], seed=0)
    # the example hypothesis shrinks to (all 1.0 with its current shrinker) is
    # whatever it is: the message must name it and both results truly
    found = re.fullmatch(
        r"pyreduce\.reduce\(x, op, backend='cpu'\) returned (\S+) where functools\.reduce "
        r"returned (\S+), for x = \[(.*)\] \((\d+) elements of float64\)", str(info.value))
    assert found is not None, str(info.value)
    x = np.array([float(v) for v in found[3].split(", ")])
    assert x.size == int(found[4]) >= 16
    assert float(found[1]) == pyreduce.reduce(x, op, backend="cpu")
    assert float(found[2]) == functools.reduce(op, x) != float(found[1])


def _broken(bug):
    """``pyreduce.reduce`` with one bug, on the simulator's ``last_block`` only
    (computed on the CPU backend, so that shrinking launches nothing)."""
    real = pyreduce.reduce

    def broken(x, op, identity=None, **kwargs):
        if kwargs.get("variant") != "last_block":
            return real(x, op, identity, **kwargs)
        kwargs = {k: v for k, v in kwargs.items() if k == "initial"}
        if bug == "drops the last element" and x.size > 1:
            x = x[:-1]
        if bug == "modifies its input" and x.size:
            x[0] = 5
        if bug == "raises":
            raise RuntimeError("launch failed")
        if bug == "wrong identity" and x.size == 0:
            return np.int64(42)
        got = real(x, op, identity, backend="cpu", **kwargs)
        return got.astype(np.int32) if bug == "wrong dtype" else got

    return broken


@pytest.mark.sim
@pytest.mark.parametrize("bug,message", [
    ("drops the last element", r"returned \d+ where functools.reduce returned \d+, for x = \["),
    ("modifies its input", r"modified its input, for x = \["),
    ("raises", r"reduce\(empty, op, identity=0, backend='sim', variant='last_block', "
               r".*\) raised RuntimeError: launch failed"),
    ("wrong dtype", r"returned np.int32\(\d+\), not a scalar of int64, for x = \["),
    ("wrong identity", r"pyreduce.reduce\(empty, op, identity=0, backend='sim', "
                       r"variant='last_block', .*\) returned 42, not the identity"),
])
def test_broken_backend_is_caught(monkeypatch, bug, message):
    monkeypatch.setattr(pt, "reduce", _broken(bug))
    with pytest.raises(pt.OpCheckError, match=message) as info:
        pt.check_backends(last_nonzero, np.int64, 0, backends=["sim"], variants=["last_block"],
                          elements=st.integers(0, 3), max_examples=10, seed=4)
    if "x = [" in str(info.value):
        assert str(info.value).startswith(
            "pyreduce.reduce(x, op, backend='sim', variant='last_block', tuning=pyreduce.Tuning("
            "block_size=64, items_per_thread=2, max_blocks=3)) ")


def test_empty_input_without_identity_must_raise(monkeypatch):
    real = pyreduce.reduce

    def lenient(x, op, identity=None, **kwargs):
        return np.int64(0) if x.size == 0 else real(x, op, identity, **kwargs)

    monkeypatch.setattr(pt, "reduce", lenient)
    with pytest.raises(pt.OpCheckError, match=r"reduce\(empty, op, backend='cpu'\) returned 0 "
                                              r"where it should raise ValueError"):
        pt.check_backends(last_nonzero, np.int64, backends=["cpu"])


@pytest.mark.sim
def test_tuning_is_laid_over_the_simulators(monkeypatch):
    """The fields a tuning sets replace SIM_TUNING's, the others stay; items per
    thread are rounded up per variant; a dict of fields (the form before
    pyreduce.Tuning) still works, with a DeprecationWarning."""
    real, seen = pyreduce.reduce, []

    def spy(x, op, identity=None, **kwargs):
        seen.append((kwargs["variant"], kwargs["tuning"]))
        return real(x, op, identity, **kwargs)

    monkeypatch.setattr(pt, "reduce", spy)
    pt.check_backends(user_add, np.int32, backends=["sim"], variants=["naive", "pairwise"],
                      tuning=pyreduce.Tuning(block_size=32, items_per_thread=1),
                      max_examples=1, max_size=40, seed=1)
    assert dict(seen) == {
        "naive": pyreduce.Tuning(block_size=32, items_per_thread=1, max_blocks=3),
        "pairwise": pyreduce.Tuning(block_size=32, items_per_thread=4, max_blocks=3)}
    seen.clear()
    with pytest.warns(DeprecationWarning, match=r"tuning=pyreduce.Tuning\(block_size=32\)"):
        pt.check_backends(user_add, np.int32, backends=["sim"], variants=["naive"],
                          tuning={"block_size": 32}, max_examples=1, max_size=40, seed=1)
    assert {t for _, t in seen} == {pt.SIM_TUNING.replace(block_size=32)}


def test_bad_arguments():
    with pytest.raises(ValueError, match="backend 'gpu' is not available"):
        pt.check_backends(user_add, np.int32, backends=["gpu"])
    with pytest.raises(ValueError, match="unknown variant 'fast'"):
        pt.check_backends(user_add, np.int32, variants=["fast"])
    with pytest.raises(TypeError, match="tuning must be a pyreduce.Tuning"):
        pt.check_backends(user_add, np.int32, backends=["cpu"], tuning=64)
    with pytest.raises(TypeError, match="unexpected keyword argument 'block'"):
        pt.check_backends(user_add, np.int32, backends=["cpu"], tuning={"block": 64})
    with pytest.raises(ValueError, match="pass variants="):
        pt.check_backends(user_add, np.int32, backends=["cpu"],
                          tuning=pyreduce.Tuning(variant="naive"))
    with pytest.raises(ValueError, match="max_examples must be an int >= 1"):
        pt.check_laws(user_add, np.int32, max_examples=0)
    with pytest.raises(ValueError, match="max_size"):
        pt.sizes(-1)
    with pytest.raises(ValueError, match="larger than max_size"):
        pt.sizes(3, min_size=4)
    with pytest.raises(TypeError, match="not supported"):
        pt.values(np.longdouble)
    with pytest.raises(ValueError, match="max_magnitude"):
        pt.values(np.float64, max_magnitude=-1)
    with pytest.raises(TypeError, match="max_magnitude"):
        pt.values(np.float64, max_magnitude="big")
    with pytest.raises(TypeError, match="either elements= or value options"):
        pt.arrays(np.int8, elements=pt.values(np.int8), allow_nan=False)


# --------------------------------------------------------------------------
# Strategies


@settings(max_examples=60)
@given(data=st.data())
def test_values_respect_their_options(data):
    dt = np.dtype(data.draw(st.sampled_from(pyreduce.ops.SUPPORTED_DTYPES)))
    nan, inf = data.draw(st.booleans()), data.draw(st.booleans())
    v = data.draw(pt.values(dt, allow_nan=nan, allow_infinity=inf))
    small = data.draw(pt.values(dt, max_magnitude=100))
    # bfloat16 comes as ml_dtypes' scalars, whose dtype pyreduce reads as BFLOAT16
    for s in (v, small):
        assert isinstance(s, np.generic) and pyreduce.ops.check_dtype(s.dtype) == dt
    if dt == pyreduce.dtypes.BFLOAT16:  # checked as the float32 values they are
        dt, v, small = np.dtype(np.float32), np.float32(v), np.float32(small)
    if dt.kind == "f":
        assert nan or not np.isnan(v)
        assert inf or not np.isinf(v)
        assert np.isnan(v) or np.isinf(v) or abs(v) <= 1e6
    assert (dt.kind == "b" or np.isnan(small) or np.isinf(small)
            or abs(int(small) if dt.kind != "f" else small) <= 100)


def test_bfloat16_arrays_are_ml_dtypes_arrays():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = find(pt.arrays(pyreduce.dtypes.BFLOAT16, min_size=3, allow_nan=False),
             lambda a: a.size >= 3 and len(set(a.astype(np.float32).tolist())) >= 2)
    assert x.dtype == np.dtype(ml_dtypes.bfloat16) and x.size >= 3
    assert pyreduce.sum(x, backend="cpu") == pytest.approx(
        float(x.astype(np.float64).sum()), rel=1e-5)


@settings(max_examples=30)
@given(x=pt.arrays(np.int8, min_size=2, max_size=300), y=pt.arrays(
    np.int64, max_size=50, elements=st.integers(-3, 3)))
def test_arrays(x, y):
    assert x.dtype == np.int8 and x.ndim == 1 and 2 <= x.size <= 300
    assert y.dtype == np.int64 and y.size <= 50 and np.all(np.abs(y) <= 3)


def test_array_sizes_sit_on_edges():
    # warp, block, tile and grid edges of SIM_TUNING: 32/64 threads, tiles of 128, 3 blocks
    edges = pt._edges(0, 400)
    assert {31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 383, 384, 385} <= set(edges)
    assert max(edges) <= 400 and pt._edges(5, 9) == [7, 8, 9]


def test_elements_that_do_not_fit_are_refused():
    from hypothesis import find

    with pytest.raises(TypeError, match="element=300 does not fit in int8"):
        find(pt.arrays(np.int8, min_size=1, elements=st.just(300)), lambda x: True)


# --------------------------------------------------------------------------
# reduce(..., check=True)


def test_check_true_leaves_results_alone(backend):
    rng = np.random.default_rng(9)
    x = np.where(rng.random(150) < 0.7, 0, rng.integers(-99, 99, 150))
    k = {"backend": backend}
    if backend == "sim":
        k["tuning"] = pyreduce.Tuning(block_size=64, items_per_thread=2, max_blocks=3)
    got = pyreduce.reduce(x, last_nonzero, check=True, **k)
    assert got == x[x != 0][-1] == pyreduce.reduce(x, last_nonzero, **k)
    # built-in ops skip it, through the named reductions too
    assert pyreduce.sum(x, check=True, **k) == x.sum()
    assert pyreduce.nanmax(x.astype(np.float64), check=True, **k) == x.max()


def test_check_true_knows_no_domain():
    """Affine composition is associative on encoded maps only; on arbitrary int64
    values its products overflow, and the quick check, which draws from the whole
    dtype, says so (pyreduce.testing takes elements= for such ops)."""
    with pytest.raises(ValueError, match="fails the associativity law for int64"):
        pyreduce.reduce(affine_data(10), affine, backend="cpu", check=True)


def test_check_true_runs_once_per_op_dtype_and_identity(monkeypatch):
    calls = []
    real = laws.sample_counterexample

    def counting(*args, **kwargs):
        calls.append(args[0].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(laws, "sample_counterexample", counting)
    # empty inputs with initial=: the check runs, no fold is compiled
    x = np.zeros(0, np.int32)
    op = lambda a, b: a * b + 0 * 12345  # noqa: E731 - a code no other test uses
    assert pyreduce.reduce(x, op, initial=7, check=True, backend="cpu") == 7
    assert calls == ["associativity"]
    same_code = lambda a, b: a * b + 0 * 12345  # noqa: E731
    pyreduce.reduce(x, same_code, initial=7, check=True, backend="cpu")
    pyreduce.reduce(x, op, initial=7, backend="cpu")  # check=False checks nothing
    assert calls == ["associativity"]
    pyreduce.reduce(x, op, 1, check=True, backend="cpu")  # an identity: both sides too
    assert calls == ["associativity", "associativity", "left identity", "right identity"]
    pyreduce.reduce(x.astype(np.int64), op, initial=7, check=True, backend="cpu")
    assert len(calls) == 5  # another dtype


def compose(f, g):
    """x -> f0*x + f1, then x -> g0*x + g1: affine maps as (a, b) pairs."""
    return (f[0] * g[0], f[1] * g[0] + g[1])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_check_true_takes_tuple_accumulators(backend, dt):
    """Tuple ops that hold pass the quick check and reduce as functools.reduce does."""
    rng = np.random.default_rng(11)
    x = rng.uniform(0.5, 1.5, 70).astype(dt)
    as_map = lambda i, v: (v, 1.0)  # noqa: E731 - element v: the map x -> v*x + 1
    got = pyreduce.reduce(x, compose, (1.0, 0.0), map=as_map, check=True, **on(backend))
    want = functools.reduce(compose, [as_map(i, np.float64(v)) for i, v in enumerate(x)])
    np.testing.assert_allclose(got, want, rtol=1e-5 if dt == np.float32 else 1e-12)
    assert pyreduce.reduce(x[:0], compose, (1.0, 0.0), map=as_map, check=True,
                           **on(backend)) == (1.0, 0.0)
    count_sum = lambda a, b: (a[0] + b[0], a[1] + b[1])  # noqa: E731 - (int64, float)
    n, total = pyreduce.reduce(x, count_sum, map=lambda i, v: (1, v), check=True,
                               **on(backend))
    assert n == x.size and np.isclose(total, x.sum(dtype=np.float64), rtol=1e-5)


UNLAWFUL_TUPLES = [
    # (op, map, identity, law and dtype, counterexample)
    (lambda f, g: (f[0] * g[0], f[1] * g[0] - g[1]), lambda i, v: (v, 1.0), None,
     "associativity law for (float64, float64)",
     "op(op(a, b), c) != op(a, op(b, c)) for a=(0.0, 0.0), b=(0.0, 0.0), c=(1.0, 1.0) "
     "(the left side is (0.0, -1.0), the right side (0.0, 1.0))"),
    (lambda f, g: (f[0] or g[0], f[1] - g[1]), lambda i, v: (v > 2, i), None,
     "associativity law for (bool, int64)",
     "op(op(a, b), c) != op(a, op(b, c)) for a=(False, 0), b=(False, 0), c=(True, 1) "
     "(the left side is (True, -1), the right side (True, 1))"),
    (compose, lambda i, v: (v, 1.0), (0.0, 0.0), "left identity law for (float64, float64)",
     "op(e, a) != a for e=(0.0, 0.0), a=(1.0, 1.0) "
     "(the left side is (0.0, 1.0), the right side (1.0, 1.0))"),
]


@pytest.mark.parametrize("op,fmap,identity,law,text", UNLAWFUL_TUPLES,
                         ids=["affine_sub", "bool_int_sub", "wrong_identity"])
def test_check_true_refuses_unlawful_tuple_ops(op, fmap, identity, law, text):
    with pytest.raises(ValueError) as info:
        pyreduce.reduce(np.arange(1.0, 6.0), op, identity, map=fmap, backend="cpu",
                        check=True)
    assert f"fails the {law}: {text}; " in str(info.value)


def test_tolerance_of_complex_and_tuple_values():
    """Complex values: NaN if either part is (np.isnan's rule), otherwise part by
    part, an infinite part equal only to itself; tuples field by field."""
    tol = laws.Tolerance.for_dtype(np.complex64)
    assert tol == laws.Tolerance.for_dtype(np.float32) and tol.rtol > 0
    c = np.complex64
    assert tol.close(c(complex(np.nan, 1)), c(complex(2, np.nan)))
    assert not tol.close(c(complex(np.nan, 1)), c(2))
    assert tol.close(c(complex(1e6, np.inf)), c(complex(1e6 + 0.0625, np.inf)), 1e6)
    assert not tol.close(c(complex(1, np.inf)), c(complex(1, -np.inf)), 1e6)
    assert not tol.close(c(1 + 1j), c(1 + 1.5j), 1.0)
    pair = laws.Tolerance.for_dtype(np.dtype([("f0", "f8"), ("f1", "i8")]))
    assert pair.rtol == laws.Tolerance.for_dtype(np.float64).rtol
    assert pair.close((np.float64(1.0), np.int64(2)), (np.float64(1.0 + 1e-15), np.int64(2)), 1)
    assert not pair.close((np.float64(1.0), np.int64(2)), (np.float64(1.0), np.int64(3)), 1)
    assert pair.close((np.float64(np.nan), np.int64(2)), (np.float64(1.0), np.float64(np.nan)))
    assert not pair.close((np.float64(np.nan), np.int64(2)), (np.float64(1.0), np.int64(2)))


def test_check_must_be_a_bool():
    with pytest.raises(TypeError, match="check= must be True or False"):
        pyreduce.reduce(np.ones(3), user_add, check="yes", backend="cpu")


_NO_HYPOTHESIS = textwrap.dedent(
    """
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import numpy as np, pyreduce
    out = {"imported": sorted(m for m in sys.modules if m.split(".")[0] == "hypothesis")}
    sys.modules["hypothesis"] = None  # as if it were not installed
    try:
        pyreduce.reduce(np.ones(4), lambda a, b: a - b, backend="cpu", check=True)
    except ValueError as exc:
        out["check"] = str(exc)
    out["good"] = float(pyreduce.reduce(np.ones(4), lambda a, b: a + b, 0.0, backend="cpu",
                                        check=True))
    try:
        pyreduce.testing  # imported on first use
    except ImportError as exc:
        out["testing"] = str(exc)
    print(json.dumps(out))
    """
)


def test_without_hypothesis():
    """``import pyreduce`` does not import hypothesis, ``check=True`` works without
    it, and ``pyreduce.testing`` says what it needs."""
    env = dict(os.environ, PYTHONPATH=REPO, NUMBA_ENABLE_CUDASIM="0")
    proc = subprocess.run([sys.executable, "-c", _NO_HYPOTHESIS], capture_output=True,
                          text=True, timeout=120, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["imported"] == []
    assert "fails the associativity law for float64: op(op(a, b), c) != op(a, op(b, c))" \
        in out["check"]
    assert out["good"] == 4.0
    assert out["testing"].startswith("pyreduce.testing needs hypothesis, which is not installed")
