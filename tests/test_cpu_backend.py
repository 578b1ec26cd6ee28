"""The cpu backend next to the simulator: a forked child process reduces like its
parent, float16 and bfloat16 reach every path (a map sees them as float32 on
every backend), and division by zero inside an op or a map gives NumPy's
results, as ``functools.reduce`` over NumPy scalars does."""

from __future__ import annotations

import functools
import multiprocessing
import threading

import ml_dtypes
import numpy as np
import pytest

import pyreduce
from pyreduce import backends
from pyreduce.backends import cpu_parallel
from pyreduce.cache import KERNELS
from oracles import affine, affine_data, last_nonzero, on

#: the backends this process has (the ``backend`` fixture takes each of them)
BACKENDS = [b for b in ("cuda", "sim", "cpu") if b in backends.available()]
#: a child that has not finished by then hangs
CHILD_TIMEOUT = 60

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def first_largest(a, b):
    """Exact, associative, not commutative (ties keep the first) on data without NaN."""
    return a if a >= b else b


# --------------------------------------------------------------------------
# fork()


def _in_child(conn, fn):
    try:
        conn.send(("ok", fn()))
    except BaseException as exc:  # noqa: BLE001 - whatever it was goes to the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_forked(fn):
    """``fn()`` in a child process made by ``fork()``; a child that is not done
    within CHILD_TIMEOUT seconds hangs, and is killed."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_in_child, args=(send, fn), daemon=True)
    child.start()
    send.close()
    finished = receive.poll(CHILD_TIMEOUT)
    if not finished:
        child.kill()
        child.join()
        pytest.fail(f"the forked child did not finish within {CHILD_TIMEOUT} s: it hangs")
    status, value = receive.recv()
    child.join(CHILD_TIMEOUT)
    assert status == "ok", value
    assert child.exitcode == 0
    return value


@pytest.fixture
def threaded_cpu(monkeypatch):
    """The cpu backend splitting 4096 elements or more over two threads, on any
    number of cores (the pool is used as it is for 2**21 elements)."""
    be = backends.get("cpu")
    monkeypatch.setattr(be, "threads", 2)
    monkeypatch.setattr(cpu_parallel, "PARALLEL_MIN", 2048)
    return be


def _pool_threads():
    return [t for t in threading.enumerate() if t.name.startswith("pyreduce-cpu")]


def test_forked_child_reduces_after_the_parent_used_the_pool(threaded_cpu):
    x = affine_data(5000, seed=3)
    want = functools.reduce(affine, x)
    assert pyreduce.reduce(x, affine, backend="cpu") == want
    assert _pool_threads()  # the parent's pool runs: the child has none of its threads
    assert run_forked(lambda: int(pyreduce.reduce(x, affine, backend="cpu"))) == want
    # and with a lock held by the forking thread, which the child cannot release
    with threaded_cpu._pool_lock:
        got = run_forked(lambda: int(pyreduce.reduce(x[::-1], affine, backend="cpu")))
    assert got == functools.reduce(affine, x[::-1])
    assert pyreduce.reduce(x, affine, backend="cpu") == want  # the parent's pool still works


def test_forked_child_builds_what_another_thread_was_building():
    """A kernel cache entry being built by another thread at the fork: the child,
    which does not have that thread, builds it itself."""
    key = ("test_cpu_backend", "being built at the fork")
    started, release = threading.Event(), threading.Event()

    def slow_build():
        started.set()
        release.wait(CHILD_TIMEOUT)
        return "parent"

    builder = threading.Thread(target=KERNELS.get, args=(key, slow_build))
    builder.start()
    try:
        assert started.wait(CHILD_TIMEOUT)
        assert run_forked(lambda: KERNELS.get(key, lambda: "child")) == "child"
    finally:
        release.set()
        builder.join()
    assert KERNELS.get(key, lambda: "again") == "parent"


# --------------------------------------------------------------------------
# float16 and bfloat16


HALF = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]


def half_data(rng, shape, dt):
    """Random halves, a third of them zero (last_nonzero skips those)."""
    x = rng.standard_normal(shape) * 100
    x[rng.random(shape) < 0.3] = 0
    return x.astype(dt)


def fold_rows(x, op, axes, acc):
    """``functools.reduce`` of ``op`` over ``axes`` of ``x`` (elements cast to
    ``acc``, in C order of the reduced axes)."""
    kept = [a for a in range(x.ndim) if a not in axes]
    rows = x.transpose(kept + list(axes)).reshape(-1, int(np.prod([x.shape[a] for a in axes])))
    out = [functools.reduce(op, row.astype(acc)) for row in rows]
    return np.array(out, acc).reshape([x.shape[a] for a in kept])


@pytest.mark.parametrize("dt", HALF, ids=str)
def test_half_inputs_along_axes(backend, dt):
    rng = np.random.default_rng(5)
    f32 = np.dtype(np.float32)
    for shape, axis in [((3, 17), 1), ((33, 2), 0), ((4, 15, 3), (0, 2)), ((2, 3, 16), 2)]:
        x = half_data(rng, shape, dt)
        given = x.copy()
        axes = axis if isinstance(axis, tuple) else (axis,)
        for op in (last_nonzero, first_largest):
            got = pyreduce.reduce(x, op, axis=axis, **on(backend))
            assert got.dtype == f32
            np.testing.assert_array_equal(got, fold_rows(x, op, axes, f32))
        got = pyreduce.reduce(x, last_nonzero, axis=axis, dtype=np.float64, initial=0.5,
                              **on(backend))
        want = fold_rows(x, last_nonzero, axes, np.float64)
        np.testing.assert_array_equal(got, np.where(want != 0, want, 0.5))
        assert np.array_equal(x.view(np.uint16), given.view(np.uint16))


@pytest.mark.parametrize("dt", HALF, ids=str)
def test_half_inputs_in_segments(backend, dt):
    rng = np.random.default_rng(6)
    x = half_data(rng, 90, dt)
    offsets = np.array([0, 0, 1, 17, 17, 33, 90])
    segments = [x[lo:hi].astype(np.float32) for lo, hi in zip(offsets[:-1], offsets[1:])]
    got = pyreduce.segmented_reduce(x, offsets, first_largest, initial=-1000.0,
                                    **on(backend))
    want = [functools.reduce(first_largest, s, np.float32(-1000.0)) for s in segments]
    np.testing.assert_array_equal(got, np.array(want, np.float32))
    got = pyreduce.segmented_reduce(x, offsets, last_nonzero, 0.0, **on(backend))
    want = [functools.reduce(last_nonzero, s, np.float32(0)) for s in segments]
    np.testing.assert_array_equal(got, np.array(want, np.float32))


def square(i, v):
    return v * v


@pytest.mark.parametrize("dt", HALF, ids=str)
def test_a_map_sees_half_elements_as_float32(backend, dt):
    """Without dtype= the accumulator is what the map returns for a float32; with
    it, the map still computes in float32 (a float16 square would round)."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(150) * 50).astype(dt)
    squares = x.astype(np.float32) ** 2
    got = pyreduce.reduce(x, first_largest, map=square, **on(backend))
    assert got.dtype == np.float32 and got == squares.max()
    got = pyreduce.reduce(x, first_largest, map=square, dtype=np.float64, **on(backend))
    assert got.dtype == np.float64 and got == squares.max()
    if dt == np.float16:  # the test tells the two apart
        assert (x * x).astype(np.float32).max() != squares.max()
    # a tuple accumulator: (square, index) of the first largest square
    pick = lambda a, b: a if a[0] >= b[0] else b  # noqa: E731
    value, index = pyreduce.reduce(x, pick, map=lambda i, v: (v * v, i), **on(backend))
    assert value == squares.max() and index == np.argmax(squares)


@pytest.mark.parametrize("dt", HALF, ids=str)
def test_half_inputs_with_a_map_in_the_fixed_tree(dt):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(300) * 50).astype(dt)
    op = lambda a, b: a + b  # noqa: E731
    want = pyreduce.reference(x, op, map=square)
    assert want.dtype == np.float32
    assert abs(want - np.sum(x.astype(np.float64) ** 2)) <= 1e-4 * want
    for backend in BACKENDS:
        got = pyreduce.reduce(x, op, map=square, deterministic=True, **on(backend))
        assert got.tobytes() == want.tobytes(), backend


# --------------------------------------------------------------------------
# division by zero


def parallel(a, b):
    """The parallel resistance of a and b: associative; 0 once any is 0."""
    return 1 / (1 / a + 1 / b)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_division_by_zero_in_an_op(backend, dt):
    x = np.array([2, 0, 4, 4], dt)
    with np.errstate(divide="ignore"):
        assert functools.reduce(parallel, x) == 0.0
    assert pyreduce.reduce(x, parallel, **on(backend)) == 0.0
    rng = np.random.default_rng(4)
    for n in (1, 2, 15, 16, 17, 129, 300):
        y = (rng.random(n) + 0.5).astype(dt)
        y[rng.integers(n)] = 0
        assert pyreduce.reduce(y, parallel, **on(backend)) == 0.0
        assert pyreduce.reduce(y, parallel, initial=1.0, **on(backend)) == 0.0
    z = np.zeros((3, 20), dt)
    z[1] = 1 + np.arange(20)
    rows = pyreduce.reduce(z, parallel, axis=1, **on(backend))
    segments = pyreduce.segmented_reduce(z.ravel(), np.array([0, 20, 40, 41, 60]), parallel,
                                         **on(backend))
    for got in rows, segments:
        np.testing.assert_allclose(got, [0, 1 / np.sum(1 / z[1]), 0, 0][:got.size],
                                   rtol=1e-5, atol=0)
        assert got[0] == got[-1] == 0
    # a map: 1/0 is inf, and inf is the largest
    inverse = lambda i, v: 1 / v  # noqa: E731
    assert pyreduce.reduce(x, first_largest, map=inverse, **on(backend)) == np.inf


#: ``op(a, b)`` for two elements: one grouping, so the result is the op's own
DIVISIONS = {"floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
             "truediv": lambda a, b: a / b}


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int64, np.uint64, np.float32,
                                np.float64])
def test_division_by_zero_is_numpys(backend, dt):
    """Integers: 0, as NumPy gives (with a warning); floats: inf or NaN."""
    names = ["floordiv", "mod"] + (["truediv"] if np.dtype(dt).kind == "f" else [])
    for a in (7, 0):
        x = np.array([a, 0], dt)
        for name in names:
            with np.errstate(all="ignore"):
                want = np.dtype(dt).type(functools.reduce(DIVISIONS[name], x))
            got = pyreduce.reduce(x, DIVISIONS[name], **on(backend))
            assert got.dtype == dt
            np.testing.assert_array_equal(got, want, err_msg=f"{a} {name} 0")


def keep_unless_zero(a, b):
    """``a`` while ``b`` is not 0, else 0 (an associative op written with a // b)."""
    return a * b // b


def test_integer_division_by_zero_in_a_fold(backend):
    rng = np.random.default_rng(3)
    for n in (2, 17, 40, 300):
        x = rng.integers(1, 100, n)
        with np.errstate(all="ignore"):
            assert pyreduce.reduce(x, keep_unless_zero, **on(backend)) == x[0]
            x[rng.integers(1, n)] = 0
            assert pyreduce.reduce(x, keep_unless_zero, **on(backend)) == 0
            assert functools.reduce(keep_unless_zero, x) == 0
