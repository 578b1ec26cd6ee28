"""Cache-key soundness and bounded caches (``pyreduce/opkey.py``, ``pyreduce/cache.py``).

Numba compiles the values an operator reads (globals, closure cells, module
attributes, the contents of arrays among them) into its code as constants, so a
kernel is right only for those values. Every test here changes such a value
between calls (in place, by rebinding, in another namespace) and checks each
result against ``functools.reduce`` over the same op, evaluated now; and that
the memos tell apart values ``==`` does not (``-0.0``, NaN payloads); and that
caches stay within their bounds and keep no user's array alive.
"""

from __future__ import annotations

import functools
import gc
import math
import operator
import struct
import threading
import tracemalloc
import types
import weakref

import numpy as np
import pytest
from numba import njit

import pyreduce
from pyreduce import opkey, ops
from pyreduce.cache import KERNELS, KERNELS_MAXSIZE, MEMOS, CacheInfo, KernelCache, Memo

# a small device for the simulator: every sim call below runs this tuning
SIM = dict(tuning=pyreduce.Tuning(block_size=64, items_per_thread=2, max_blocks=3))
TILE = 128  # block_size * items_per_thread: sizes below straddle its edges


def kw(backend):
    return {"backend": backend, **(SIM if backend == "sim" else {})}


def oracle(op, x):
    """The op folded left to right in Python, reading its globals as they are now."""
    return functools.reduce(op, list(x))


def data(n, seed):
    return np.random.default_rng(seed).integers(-1000, 1000, n).astype(np.int64)


# module state the ops below read; each test restores what it changes
W = np.array([1, 7], dtype=np.int64)
PAIR = (np.array([2], dtype=np.int64), 5)
CONSTANTS = types.ModuleType("pyreduce_test_constants")
CONSTANTS.K = 3
CONSTANTS.inner = types.ModuleType("pyreduce_test_constants.inner")
CONSTANTS.inner.T = np.array([10, 20], dtype=np.int64)
HELPER_TABLE = np.array([100], dtype=np.int64)


@njit
def helper(a):
    return a + HELPER_TABLE[0]


@pytest.fixture
def restore_globals():
    global PAIR
    saved = W.copy(), PAIR, CONSTANTS.K, CONSTANTS.inner.T.copy(), HELPER_TABLE.copy()
    yield
    W[:], PAIR = saved[0], saved[1]
    CONSTANTS.K = saved[2]
    CONSTANTS.inner.T[:] = saved[3]
    HELPER_TABLE[:] = saved[4]
    helper.recompile()


# --------------------------------------------------------------------------
# Item: an array changed in place, a module attribute rebound


@pytest.mark.parametrize("n", [TILE - 1, TILE + 1, 2 * TILE + 3])
def test_a_global_array_changed_in_place_gives_new_results(backend, restore_globals, n):
    """Regression: the key held the array by identity, so a new lambda over the
    same (changed) array reused the kernel compiled with the old contents."""
    x = data(n, n)
    first = lambda a, b: a + b + W[0]  # noqa: E731  (one op object, called again)
    for value in (1, 2, -5, 1):
        W[0] = value
        op = lambda a, b: a + b + W[0]  # noqa: E731
        assert pyreduce.reduce(x, op, **kw(backend)) == oracle(op, x), value
        assert pyreduce.reduce(x, first, **kw(backend)) == oracle(first, x), value


def test_a_closure_array_changed_in_place_gives_new_results(backend):
    x = data(TILE + 5, 1)
    table = np.array([3, 1], dtype=np.int64)

    def op(a, b):
        return a + b + table[1]

    for value in (1, 4, 1, -2):
        table[1] = value
        assert pyreduce.reduce(x, op, **kw(backend)) == oracle(op, x), value


def test_a_global_array_rebound_gives_new_results(backend, restore_globals):
    global PAIR
    x = data(TILE + 3, 2)
    op = lambda a, b: a + b + PAIR[0][0] * PAIR[1]  # noqa: E731
    for first, second in ((2, 5), (3, 5), (3, 6), (2, 5)):
        PAIR = (np.array([first], dtype=np.int64), second)
        assert pyreduce.reduce(x, op, **kw(backend)) == oracle(op, x), (first, second)
    PAIR[0][0] = 9  # the array inside the tuple, changed in place
    assert pyreduce.reduce(x, op, **kw(backend)) == oracle(op, x)


def test_module_attributes_rebound_or_changed_give_new_results(backend, restore_globals):
    """Regression: a module was keyed by its name, so ``mod.K`` rebound (or an
    array ``mod.inner.T`` changed) reused the kernel compiled with the old value."""
    x = data(TILE + 7, 3)
    op = lambda a, b: a + b + CONSTANTS.K * CONSTANTS.inner.T[1]  # noqa: E731
    for k, t in ((3, 20), (4, 20), (4, -1), (3, 20)):
        CONSTANTS.K = k
        CONSTANTS.inner.T[1] = t
        fresh = lambda a, b: a + b + CONSTANTS.K * CONSTANTS.inner.T[1]  # noqa: E731
        assert pyreduce.reduce(x, op, **kw(backend)) == oracle(op, x), (k, t)
        assert pyreduce.reduce(x, fresh, **kw(backend)) == oracle(fresh, x), (k, t)


def test_ops_over_equal_arrays_share_a_kernel_and_part_when_one_changes(backend):
    """Two closures over distinct arrays with equal contents share one kernel;
    changing the first array later must not change what the second computes
    (in the simulator the shared kernel calls the first op as Python)."""
    x = data(TILE + 9, 4)

    def make(table):
        return lambda a, b: a + b + table[0]

    one, two = np.array([3], dtype=np.int64), np.array([3], dtype=np.int64)
    f, g = make(one), make(two)
    assert pyreduce.reduce(x, f, **kw(backend)) == oracle(f, x)
    builds = pyreduce.cache_info().builds
    assert pyreduce.reduce(x, g, **kw(backend)) == oracle(g, x)
    assert pyreduce.cache_info().builds == builds, "equal contents built a new kernel"
    one[0] = 5
    assert pyreduce.reduce(x, g, **kw(backend)) == oracle(g, x)
    assert pyreduce.reduce(x, f, **kw(backend)) == oracle(f, x)


def test_same_code_in_other_namespaces_stays_apart_after_rebinding(backend):
    """One source run in two namespaces with equal globals shares a kernel;
    rebinding the global in one must not reach the other's results."""
    src = "def op(a, b):\n    return a + b + K\n"
    g, h = {"K": 2}, {"K": 2}
    exec(src, g)
    exec(src, h)
    x = data(TILE - 3, 5)
    assert pyreduce.reduce(x, g["op"], **kw(backend)) == oracle(g["op"], x)
    g["K"] = 7
    assert pyreduce.reduce(x, h["op"], **kw(backend)) == oracle(h["op"], x)
    assert pyreduce.reduce(x, g["op"], **kw(backend)) == oracle(g["op"], x)


@pytest.mark.parametrize("backend", ["sim", "cpu"])
def test_an_njit_helper_computes_as_it_does_called_from_python(backend, restore_globals):
    """A Numba-compiled function the op calls keeps what Numba froze when it
    compiled it, as it does when the op runs as Python; ``recompile()`` updates
    it, and the op's kernels follow."""
    x = data(TILE + 1, 6)
    op = lambda a, b: helper(a) + b  # noqa: E731
    assert pyreduce.reduce(x, op, **kw(backend)) == oracle(op, x)
    HELPER_TABLE[0] = 5
    assert pyreduce.reduce(x, op, **kw(backend)) == oracle(op, x)
    helper.recompile()
    assert oracle(op, x) == x.sum() + 5 * (x.size - 1)
    assert pyreduce.reduce(x, op, **kw(backend)) == oracle(op, x)


def test_an_array_of_objects_is_refused(backend):
    table = np.array([1, None], dtype=object)
    with pytest.raises(TypeError, match="dtype object"):
        pyreduce.reduce(np.arange(5.0), lambda a, b: a + b + table[0], **kw(backend))


# --------------------------------------------------------------------------
# Keys and the frozen copy


def _keyed(value):
    return ops.function_key((lambda v: lambda a, b: a + b + v)(value))


def test_keys_tell_apart_what_equality_does_not():
    nan_a = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    nan_b = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000002))[0]
    distinct = [0.0, -0.0, nan_a, nan_b, 1, 1.0, True, np.float32(0), np.float64(0),
                np.float16(-0.0), np.float16(0.0), complex(0, -0.0), complex(0, 0.0),
                np.array([0], np.int64), np.array([0.0]), np.zeros((2, 3)), np.zeros((3, 2))]
    keys = [_keyed(v) for v in distinct]
    assert len(set(keys)) == len(distinct)
    assert _keyed(np.arange(4)) == _keyed(np.arange(4))  # contents, not identity
    assert _keyed(nan_a) == _keyed(nan_a)


def test_value_keys_tell_apart_what_equality_does_not():
    values = [0.0, -0.0, 1, 1.0, True, np.float64(-0.0), np.float64(0.0), np.float32(1),
              complex(-0.0, 0), complex(0, 0), (0.0, 1), (-0.0, 1), None]
    assert len({opkey.value_key(v) for v in values}) == len(values)
    with pytest.raises(TypeError):
        opkey.value_key(object())


def test_a_key_does_not_keep_the_array_alive():
    table = np.arange(1000.0)
    ref = weakref.ref(table)
    key = _keyed(table)
    del table
    gc.collect()
    assert ref() is None
    assert key == _keyed(np.arange(1000.0))


def test_the_frozen_op_reads_copies_taken_when_it_was_made():
    table = np.array([1.0, 2.0])
    op = lambda a, b: a + b * table[1]  # noqa: E731
    frozen = opkey.freeze(op)
    table[1] = 10.0
    assert frozen(1.0, 1.0) == 3.0 and op(1.0, 1.0) == 11.0
    copy = frozen.__closure__[0].cell_contents
    assert copy is not table and not copy.flags.writeable
    plain = lambda a, b: a + b  # noqa: E731
    assert opkey.freeze(plain) is plain


def test_the_monoid_memo_sees_an_array_changed_in_place():
    table = np.array([1, 2], dtype=np.int64)
    op = lambda a, b: a + b + table[0]  # noqa: E731
    before = ops.as_monoid(op, np.dtype(np.int64))
    assert ops.as_monoid(op, np.dtype(np.int64)) is before  # remembered
    table[0] = 3
    after = ops.as_monoid(op, np.dtype(np.int64))
    assert after.key != before.key and after.fn(0, 0) == 3
    table[0] = 1
    assert ops.as_monoid(op, np.dtype(np.int64)).key == before.key


# --------------------------------------------------------------------------
# Item: the sign of zero (and NaN payloads) in the memos


def _bits(value) -> bytes:
    return np.asarray(value, np.float64).tobytes()


@pytest.mark.parametrize("op", ["add", np.add, lambda a, b: a + b], ids=["name", "ufunc", "lambda"])
def test_identity_keeps_its_sign_and_payload(backend, op):
    """Regression: the memo of as_monoid compared identity values with ==, so
    ``identity=-0.0`` after ``identity=0.0`` returned ``+0.0``."""
    nan_a = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    nan_b = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000002))[0]
    empty = np.array([], np.float64)
    for identity in (0.0, -0.0, 0.0, nan_a, nan_b, np.float64(-0.0)):
        got = pyreduce.reduce(empty, op, identity=identity, **kw(backend))
        assert _bits(got) == _bits(identity), identity


@pytest.mark.parametrize("op", ["add", lambda a, b: a + b], ids=["name", "lambda"])
def test_initial_keeps_its_sign_on_a_device_input(gpu_backend, op):
    """Regression: the repeat memo compared initial values with ==, so on the
    simulator ``initial=-0.0`` after ``initial=0.0`` returned ``0.0``."""
    from numba import cuda

    x = np.full(TILE + 1, -0.0)
    d = cuda.to_device(x)
    for initial in (0.0, -0.0, 0.0, -0.0):
        # a plain call (no tuning keyword), which the repeat memo remembers
        got = pyreduce.reduce(d, op, initial=initial, backend=gpu_backend)
        assert _bits(got) == _bits(functools.reduce(operator.add, list(x), initial)), initial


def test_tuple_accumulators_of_other_dtypes_are_planned_apart(backend):
    """Regression: plans were keyed by one-letter dtype codes, and every tuple
    accumulator's is 'V': a float32 pair reused the float64 pair's plan."""
    x = np.random.default_rng(8).standard_normal(TILE + 5)
    op = lambda a, b: (a[0] + b[0], a[1] * b[1])  # noqa: E731
    pair = lambda i, v: (v, v)  # noqa: E731

    def call(dtype):
        return pyreduce.reduce(x, op, map=pair, dtype=(dtype, dtype), **kw(backend))

    pyreduce.cache_clear()
    fresh = call(np.float32)
    pyreduce.cache_clear()
    call(np.float64)
    again = call(np.float32)
    assert [type(v) for v in again] == [np.float32, np.float32]
    assert np.asarray(again).tobytes() == np.asarray(fresh).tobytes()


# --------------------------------------------------------------------------
# Item: bounded caches that keep no user's array


def test_the_kernel_cache_drops_the_least_recently_used():
    cache = KernelCache(maxsize=3)
    for k in "abc":
        cache.get(k, lambda k=k: k.upper())
    cache.get("a", lambda: pytest.fail("a was dropped"))
    cache.get("d", lambda: "D")
    assert cache.info() == CacheInfo(1, 4, 3, 3, 1)
    assert cache.get("b", lambda: "rebuilt") == "rebuilt"  # b was the oldest
    with pytest.raises(ZeroDivisionError):
        cache.get("e", lambda: 1 / 0)
    assert not cache._key_locks and cache.info().size == 3
    with pytest.raises(ValueError, match="maxsize"):
        cache.resize(0)


def test_the_kernel_cache_builds_each_key_once_under_threads():
    cache, built = KernelCache(maxsize=2), []
    barrier = threading.Barrier(8)

    def build():
        built.append(1)
        return object()

    def worker():
        barrier.wait()
        for k in range(20):
            cache.get(k % 4, build)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.info().size <= 2 and not cache._key_locks
    assert len(built) == cache.info().builds


def test_a_memo_forgets_entries_of_dead_functions():
    memo = Memo("test memo", 2)
    try:
        op = lambda a, b: a  # noqa: E731
        memo.put(("x", opkey.op_ref(op)), "for op", owner=op)
        assert memo.get(("x", opkey.op_ref(op))) == "for op"
        del op
        gc.collect()
        assert len(memo) == 0
        for k in range(5):
            memo.put(k, k)
        assert len(memo) == 2 and memo.get(3) == 3 and memo.get(0) is None
    finally:
        del MEMOS["test memo"]


def test_cache_info_reports_the_bound():
    info = pyreduce.cache_info()
    assert info.maxsize == KERNELS_MAXSIZE == KERNELS.maxsize
    assert info.size <= info.maxsize


def _closure_over(table):
    return lambda a, b: a + b + table[1]


#: one block of one warp: the cheapest simulated launch, for many calls
TINY = dict(tuning=pyreduce.Tuning(block_size=32, items_per_thread=1, max_blocks=1))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sim", "cpu"])
def test_300_closures_over_arrays_release_them(backend):
    """Regression: the kernel cache kept every array an op closed over alive (100
    closures added about 440 MB). 300 closures over distinct 64 KiB arrays with
    three contents: every array is released and every cache stays within its
    bound. On the cpu backend traced memory is measured too: it does not grow
    between the 100th and the 300th closure (keeping the arrays would add
    200 * 64 KiB = 12.5 MiB). The simulator's launches, each a Python thread per
    simulated thread, are too slow to run 300 of under tracemalloc."""
    x = data(31, 9)
    tune = {"backend": backend, **(TINY if backend == "sim" else {})}
    contents = [np.full(8192, k, dtype=np.int64) for k in range(3)]
    for table in contents:  # compiled before memory is traced
        op = _closure_over(table.copy())
        assert pyreduce.reduce(x, op, **tune) == oracle(op, x)
    refs, traced = [], []
    trace = backend == "cpu"
    if trace:
        tracemalloc.start()
    try:
        for k in range(300):
            table = contents[k % 3].copy()
            refs.append(weakref.ref(table))
            op = _closure_over(table)
            assert pyreduce.reduce(x, op, **tune) == oracle(op, x)
            del table, op
            if trace and k in (99, 299):
                gc.collect()
                traced.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    gc.collect()
    assert sum(r() is not None for r in refs) == 0
    if trace:
        assert traced[1] - traced[0] < 1 << 20, traced
    info = pyreduce.cache_info()
    assert info.size <= info.maxsize
    assert all(len(memo) <= memo.maxsize for memo in MEMOS.values())


@pytest.mark.parametrize("backend", ["sim"])
def test_an_executable_keeps_idle_workspaces_of_few_streams(backend):
    """Regression: an executable kept a pool of workspaces (device scratch) for
    every stream it ever ran on, so a program making a stream per task grew."""
    from numba import cuda

    from pyreduce import driver, planner

    x = data(TILE + 1, 11)
    d = cuda.to_device(x)
    streams = [cuda.stream() for _ in range(driver.POOL_STREAMS + 5)]
    for s in streams:
        assert pyreduce.reduce(d, "add", backend=backend, stream=s) == x.sum()
    executables = [e for plan in list(planner._plans._data.values())
                   for e in plan.executables.values()]
    assert executables
    assert all(len(e._pools) <= driver.POOL_STREAMS for e in executables)


@pytest.fixture
def small_caches():
    saved = {memo: memo.maxsize for memo in MEMOS.values()}
    KERNELS.resize(4)
    for memo in saved:
        memo.resize(2)
    yield
    pyreduce.cache_clear()
    KERNELS.resize(KERNELS_MAXSIZE)
    for memo, maxsize in saved.items():
        memo.resize(maxsize)


@pytest.mark.slow
@pytest.mark.sim
def test_distinct_ops_past_the_bounds_are_dropped(small_caches):
    """Ops with distinct captured contents, more than the caches hold: each
    cache stays within its (shrunk) bound and the frozen copies that dropped
    entries held are released."""
    x = data(TILE + 1, 10)
    copies = []
    for k in range(10):
        op = _closure_over(np.array([0, k], dtype=np.int64))
        assert pyreduce.reduce(x, op, **kw("sim")) == oracle(op, x)
        copies.append(weakref.ref(ops.as_monoid(op, x.dtype).fn.__closure__[0].cell_contents))
        info = pyreduce.cache_info()
        assert info.size <= 4 and all(len(m) <= 2 for m in MEMOS.values())
    del op
    gc.collect()
    assert info.evictions > 0
    # what can still hold a copy: the 4 kernel cache entries and the 2 plans
    assert sum(r() is not None for r in copies) <= 6


def test_math_attribute_in_an_op_is_keyed_by_value(monkeypatch):
    """``math.pi`` is a module attribute Numba compiles in as a constant."""
    op = lambda a, b: a + b * math.pi  # noqa: E731
    before = ops.function_key(op)
    monkeypatch.setattr(math, "pi", 3.0)
    assert ops.function_key(op) != before
