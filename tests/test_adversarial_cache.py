"""The kernel cache against everything an op captures, and calls from several
threads at once.

Kernels are cached by an op's code and what it captures. A wrong key shares a
kernel between ops that compute different things (a wrong answer) or builds
again what it has (a slow one): same-code ops that capture equal values must
share a kernel, ops that capture different values (closure cells, a cell
rebound after use, a jitted helper they call) must each get their own answer,
which ``functools.reduce`` of the same op gives. (Globals, module attributes
and arrays an op reads are covered in ``test_ops.py``.)"""

from __future__ import annotations

import functools
import math
import threading

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from conftest import examples
from numpy_compare import to_device
from oracles import affine, affine_data, last_nonzero, on

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def skipping(k):
    """The last element that is not ``k`` (associative, not commutative)."""
    return lambda a, b: b if b != k else a


def skipping_either(pair):
    return lambda a, b: b if b != pair[0] and b != pair[1] else a


def oracle(x, op):
    return functools.reduce(op, x.ravel().tolist())


#: values an op may capture, equal ones of types that must not share a kernel
#: among them (a short list: each new one is a Numba compilation)
CAPTURES = st.sampled_from([0, 1, 0.0, -0.0, math.nan, np.float32(1.0), True])
#: integer captures (each new one is a compilation, as above)
SMALL = st.integers(0, 2)


def _data(seed, dtype, tail=()):
    """Small integers, then ``tail``: ``skipping(k)`` of data ending in ``k2, k1``
    tells ``k1`` from ``k2``."""
    head = np.random.default_rng(seed).integers(0, 5, 40)
    return np.concatenate([head, np.asarray(tail, dtype=np.float64)]).astype(dtype)


@settings(max_examples=examples(10))
@given(k1=CAPTURES, k2=CAPTURES, seed=st.integers(0, 2 ** 16))
def test_closure_captures(backend, k1, k2, seed):
    """Two ops made from one lambda: the same capture shares one kernel (no
    build for the second); another value gets its own answer (a shared kernel
    would give the first one's)."""
    x = _data(seed, np.float64, tail=[k2, k1])
    first = pyreduce.reduce(x, skipping(k1), **on(backend))
    np.testing.assert_equal(first, oracle(x, skipping(k1)))
    builds = pyreduce.cache_info().builds
    np.testing.assert_equal(pyreduce.reduce(x, skipping(k1), **on(backend)), first)
    assert pyreduce.cache_info().builds == builds, "the same capture built again"
    second = pyreduce.reduce(x, skipping(k2), **on(backend))
    np.testing.assert_equal(second, oracle(x, skipping(k2)))


def test_captured_tuples(backend):
    """A captured tuple is keyed by its items, in order."""
    x = _data(5, np.int64, tail=[1, 2])
    for pair in ((0, 1), (0, 2), (2, 0)):
        assert pyreduce.reduce(x, skipping_either(pair), **on(backend)) == \
            oracle(x, skipping_either(pair))


def _calls(backend, x):
    """(input, keywords) of the calls made for ``x``: on a GPU backend also
    plain calls with a device input, twice (the second a repeat,
    :mod:`pyreduce.callmemo`)."""
    calls = [(x, on(backend))]
    if backend != "cpu":
        calls += [(to_device(x), {"backend": backend})] * 2
    return calls


def _rebindable(k):
    def op(a, b):
        return b if b != k else a

    def rebind(value):
        nonlocal k
        k = value

    return op, rebind


@settings(max_examples=examples(3))
@given(ks=st.lists(SMALL, min_size=2, max_size=3), seed=st.integers(0, 2 ** 16))
def test_closure_cell_rebound_after_use(backend, ks, seed):
    """One op object whose closure cell is rebound between calls (repeat calls
    included) computes with the current value each time, as Python does."""
    x = _data(seed, np.int64, tail=[0, 1])
    op, rebind = _rebindable(ks[0])
    for k in ks:
        rebind(k)
        calls = _calls(backend, x)
        assert [pyreduce.reduce(a, op, **kw) for a, kw in calls] == [oracle(x, op)] * len(calls)


def test_a_cell_rebound_after_its_kernel_was_built(backend):
    """Regression (sim): the simulator's kernel called the op object it was
    built for, reading its cells as they are now; once one was rebound, a new
    op capturing the value the kernel was built (and cached) for got the
    rebound value's answer. Compiled code freezes what it captures, and so
    does the simulator's kernel now."""
    x = _data(1, np.int64, tail=[2, 1])
    first, rebind = _rebindable(1)
    assert pyreduce.reduce(x, first, **on(backend)) == 2
    rebind(2)
    assert pyreduce.reduce(x, first, **on(backend)) == 1
    second, _ = _rebindable(1)
    assert pyreduce.reduce(x, second, **on(backend)) == 2


def _with_helper(k):
    keep = numba.njit(lambda v: v != k)
    return lambda a, b: b if keep(b) else a


@settings(max_examples=examples(3))
@given(k1=SMALL, k2=SMALL, seed=st.integers(0, 2 ** 16))
def test_jitted_helpers_in_closures(backend, k1, k2, seed):
    """An op that calls a jitted helper of its closure: helpers that capture
    different values make different ops."""
    x = _data(seed, np.int64)
    for k in (k1, k2, k1):
        assert pyreduce.reduce(x, _with_helper(k), **on(backend)) == oracle(x, skipping(k))


def _dispatchers(backend, k):
    """The same op as a Numba dispatcher: ``njit``, and on a GPU backend a CUDA
    device function."""
    made = [numba.njit(skipping(k))]
    if backend != "cpu":
        from numba import cuda

        made.append(cuda.jit(device=True)(skipping(k)))
    return made


@settings(max_examples=examples(3))
@given(k1=SMALL, k2=SMALL, seed=st.integers(0, 2 ** 16))
def test_dispatchers_as_ops(backend, k1, k2, seed):
    """A dispatcher is keyed by its Python function: as the plain lambda, it
    shares its kernel, and its captures key it."""
    x = _data(seed, np.int64)
    pyreduce.reduce(x, skipping(k1), **on(backend))
    builds = pyreduce.cache_info().builds
    for op in _dispatchers(backend, k1):
        assert pyreduce.reduce(x, op, **on(backend)) == oracle(x, skipping(k1))
    assert pyreduce.cache_info().builds == builds
    for op in _dispatchers(backend, k2):
        assert pyreduce.reduce(x, op, **on(backend)) == oracle(x, skipping(k2))


def _with_inner(k):
    def op(a, b):
        def keep(v, m=k):  # a nested function, its default read from op's closure
            return v != m

        return b if keep(b) else a

    return op


def test_functions_nested_in_the_op(backend):
    """A function defined inside the op, whose default comes from the op's
    closure: the capture keys the op."""
    x = _data(2, np.int64, tail=[1, 0])
    for k in (0, 1, 0):
        assert pyreduce.reduce(x, _with_inner(k), **on(backend)) == oracle(x, skipping(k))


def test_ops_differing_in_an_unused_default(backend):
    """A default the op never uses (it is always called with two arguments)
    changes nothing in its result."""
    x = _data(3, np.int64)
    results = set()
    for default in (0, 1):
        def op(a, b=default):
            return b if b != 2 else a

        results.add(int(pyreduce.reduce(x, op, **on(backend))))
    assert results == {oracle(x, skipping(2))}


# --------------------------------------------------------------------------
# Threads


def _thread_jobs(backend):
    """(op, inputs) of ops that differ: same-code closures of captures no
    earlier call used (their first builds race), built-ins and order-sensitive
    user ops; each thread reduces its own inputs."""
    base = 10 ** 6
    ops = [skipping(np.int64(base + k)) for k in (1, 2, 3)] + [
        "add", "max", last_nonzero, affine]
    n = 3000 if backend == "cpu" else 300
    rng = np.random.default_rng(0)

    def data(op, r):
        return affine_data(n - r, seed=r) if op is affine else base + rng.integers(0, 5, n - r)

    return [(op, [data(op, r) for r in range(3)]) for op in ops]


def _want(op, x):
    if op == "add":
        return x.sum()
    if op == "max":
        return x.max()
    return oracle(x, op)


def test_threads_with_different_ops(backend):
    """Several threads start at once, each reducing with its own op (new
    same-code closures among them, so their first builds race): each gets its
    own answer, every time."""
    jobs = [(op, [(x, _calls(backend, x)) for x in inputs])
            for op, inputs in _thread_jobs(backend)]
    barrier = threading.Barrier(len(jobs))
    results, errors = {}, []

    def work(i, op, prepared):
        try:
            barrier.wait()
            results[i] = [[pyreduce.reduce(a, op, **kw) for a, kw in calls]
                          for _, calls in prepared]
        except Exception as exc:  # reported below, with the thread's op
            errors.append((op, exc))

    threads = [threading.Thread(target=work, args=(i, op, prepared))
               for i, (op, prepared) in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    assert not errors, errors
    for i, (op, prepared) in enumerate(jobs):
        assert results[i] == [[_want(op, x)] * len(calls) for x, calls in prepared], op
