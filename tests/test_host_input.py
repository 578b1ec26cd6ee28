"""Host arrays on the fastest path: the cpu backend's built-ins split over its
threads (:mod:`pyreduce.backends.cpu_parallel`), host inputs streamed to a GPU
through pinned buffers (:mod:`pyreduce.backends.staging`, run here in the
simulator with chunks a few elements long) and the cost model that chooses
between them (:mod:`pyreduce.costmodel`, :mod:`pyreduce.hostroute`)."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from pyreduce import backends, calibrate, costmodel, hostroute, tuned, tuning
from pyreduce.backends import cpu_parallel, staging
from pyreduce.interop import inspect
from pyreduce.ops import as_monoid
from pyreduce.planner import Tuning
from pyreduce.prepared import prepare

from oracles import SIM_TUNING, affine, affine_data, last_nonzero

# --------------------------------------------------------------------------
# the cpu backend's built-ins on several threads


@pytest.fixture
def split(monkeypatch):
    """The cpu backend splitting built-ins from 128 bytes, 64 bytes a piece, for
    5 threads."""
    be = backends.get("cpu")
    monkeypatch.setattr(cpu_parallel, "PIECE_BYTES", 64)
    monkeypatch.setattr(cpu_parallel, "SPLIT_BYTES", 128)
    monkeypatch.setattr(be, "threads", 5)
    return be


def _data(dtype, n, seed=0, nans=True):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(n) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    x = (rng.standard_normal(n) * 10).astype(dt)
    if nans:
        x[rng.integers(0, n, 3)] = np.nan
    return x


EXACT_CASES = [
    ("max", np.maximum, ["float64", "float32", "float16", "int8", "uint64", "bool"]),
    ("min", np.minimum, ["float64", "float16", "int32"]),
    ("nanmax", np.fmax, ["float64", "float32", "int16"]),
    ("nanmin", np.fmin, ["float64", "float16"]),
    ("and", np.bitwise_and, ["int64", "uint8", "bool"]),
    ("or", np.bitwise_or, ["int32", "bool"]),
    ("xor", np.bitwise_xor, ["uint16", "int64"]),
    ("logical_and", np.logical_and, ["float64", "int8", "bool"]),
    ("logical_or", np.logical_or, ["float32", "bool"]),
    ("add", np.add, ["int8", "int64", "uint32", "bool"]),  # integers: wrap, exact
    ("mul", np.multiply, ["int64", "uint8"]),
]


@pytest.mark.parametrize("n", [3, 40, 41, 1001])
@pytest.mark.parametrize("name,ufunc,dtypes", EXACT_CASES, ids=[c[0] for c in EXACT_CASES])
def test_exact_builtins_split_give_numpy_bit_for_bit(split, n, name, ufunc, dtypes):
    for dtype in dtypes:
        x = _data(dtype, n, seed=n)
        for acc in [None] + ([x.dtype] if dtype not in ("bool", "float16") else []):
            monoid = as_monoid(name, x.dtype, acc_dtype=acc)
            got = split.reduce(x, monoid)
            with np.errstate(all="ignore"):
                want = ufunc.reduce(x, dtype=monoid.dtype)
            assert got.dtype == monoid.dtype
            assert np.array_equal(got, want, equal_nan=True), (name, dtype, got, want)
            if n * x.itemsize >= 128:  # the split did happen
                assert cpu_parallel.part_count(x, monoid, 5) > 1


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128", "complex64"])
def test_float_sums_split_are_within_pairwise_bounds(split, dtype):
    x = _data(dtype, 5003, nans=False)
    monoid = as_monoid("add", x.dtype)
    assert cpu_parallel.part_count(x, monoid, 5) == 5 * cpu_parallel.PIECES_PER_THREAD
    got = split.reduce(x, monoid)
    exact = complex(math.fsum(x.real.astype(float)), math.fsum(x.imag.astype(float)))
    eps = np.finfo(x.real.dtype).eps
    bound = 4 * eps * math.log2(x.size) * np.abs(x).sum(dtype=np.float64)
    assert got.dtype == x.dtype and abs(complex(got) - exact) <= bound


NEGATIVE_ZEROS = [np.float64(-0.0), np.float32(-0.0), np.complex128(complex(-0.0, -0.0))]


def _signs(value) -> tuple:
    v = np.asarray(value)
    return (tuple(np.signbit(v.real).ravel()), tuple(np.signbit(v.imag).ravel())) \
        if v.dtype.kind == "c" else tuple(np.signbit(v).ravel())


@pytest.mark.parametrize("zero", NEGATIVE_ZEROS, ids=lambda z: z.dtype.name)
@pytest.mark.parametrize("n", [1, 5, 1001])
def test_sums_of_negative_zeros_are_negative_split_or_not(split, zero, n):
    """The IEEE fold's sign (functools.reduce's), which NumPy's sums, seeded
    with +0.0, lose: whole, split over threads, along axes, as a mean, and a
    sum with one +0.0 among them is +0.0."""
    x = np.full(n, zero)
    want = functools.reduce(lambda a, b: a + b, x)
    assert np.signbit(want.real)
    for kwargs in ({}, {"deterministic": True}):
        got = pyreduce.sum(x, backend="cpu", **kwargs)
        assert got == 0 and _signs(got) == _signs(want), (kwargs, got)
    m = x.reshape(1, n) if n % 5 else x.reshape(5, n // 5)
    for axis in (0, 1):
        along = pyreduce.sum(m, axis=axis, backend="cpu")
        assert all(_signs(along)) if zero.dtype.kind != "c" else all(map(all, _signs(along)))
    assert _signs(pyreduce.nansum(x, backend="cpu")) == _signs(want)
    if zero.dtype.kind == "f":
        assert np.signbit(pyreduce.mean(x, backend="cpu"))
    y = x.copy()
    y[n // 2] = 0.0
    assert not np.signbit(pyreduce.sum(y, backend="cpu").real)
    if zero.dtype.kind == "f" and n > 1:  # a NaN counts as +0.0 in nansum and nanmean
        z = x.copy()
        z[n // 2] = np.nan
        for name in ("nansum", "nanmean"):
            for backend in ("cpu", "sim"):
                got = getattr(pyreduce, name)(z, backend=backend)
                assert got == 0 and not np.signbit(got), (name, backend, got)


def test_float16_sums_are_numpys_own_call(split):
    """NumPy sums float16 in float32 buffers added one by one: the result of a
    single call is kept, bit for bit."""
    x = _data("float16", 4001, nans=False)
    for name, fn in (("add", np.add), ("mul", np.multiply)):
        monoid = as_monoid(name, x.dtype)
        assert cpu_parallel.part_count(x, monoid, 5) == 1
        with np.errstate(over="ignore"):
            assert split.reduce(x, monoid) == fn.reduce(x, dtype=np.float32)
    assert pyreduce.nansum(x, backend="cpu") == np.nansum(x, dtype=np.float32)


def test_initial_is_combined_once_on_the_left(split):
    x = _data("int64", 999)
    got = pyreduce.reduce(x, "add", initial=7, backend="cpu")
    assert got == np.add.reduce(x) + 7
    y = _data("float64", 999, nans=False)
    assert pyreduce.reduce(y, "max", initial=np.inf, backend="cpu") == np.inf
    assert pyreduce.reduce(y, "max", initial=-np.inf, backend="cpu") == y.max()


def test_argmax_split_keeps_the_first_index_and_the_first_nan(split):
    x = np.zeros(1000)
    x[[250, 420, 900]] = 5.0  # ties in three pieces: the first wins
    assert pyreduce.argmax(x, backend="cpu") == 250
    assert pyreduce.argmin(-x, backend="cpu") == 250
    x[[610, 980]] = np.nan  # NaN counts as the largest, the first of them
    assert pyreduce.argmax(x, backend="cpu") == np.argmax(x) == 610
    assert pyreduce.argmin(x, backend="cpu") == np.argmin(x) == 610
    y = _data("int16", 1000, seed=3)
    assert pyreduce.argmin(y, backend="cpu") == np.argmin(y)


def test_structured_reductions_split(split):
    x = _data("float64", 2001, nans=False) + 100.0
    assert np.isclose(pyreduce.mean(x, backend="cpu"), np.mean(x), rtol=1e-14, atol=0)
    assert np.isclose(pyreduce.var(x, backend="cpu"), np.var(x), rtol=1e-12, atol=0)
    assert np.isclose(pyreduce.std(x, ddof=1, backend="cpu"), np.std(x, ddof=1), rtol=1e-12)
    lo, hi = pyreduce.minmax(x, backend="cpu")
    assert (lo, hi) == (x.min(), x.max())
    x[1500] = np.nan
    assert all(np.isnan(v) for v in pyreduce.minmax(x, backend="cpu"))
    assert np.isnan(pyreduce.mean(x, backend="cpu"))
    assert np.isclose(pyreduce.nansum(x, backend="cpu"), np.nansum(x), rtol=1e-13)
    z = 1 + _data("float32", 2001, nans=True) / 1000
    assert np.isclose(pyreduce.nanprod(z, backend="cpu"), np.nanprod(z), rtol=1e-4)
    assert pyreduce.mean(x.astype(np.float32)[:1000], backend="cpu").dtype == np.float32


def _views(a):
    yield a
    yield a[::3]
    yield a[::-1]
    m = a[: a.size // 60 * 60].reshape(12, -1, 5)
    yield m
    yield m.transpose(2, 0, 1)
    yield m[::2, ::-1, 1:]
    yield np.asfortranarray(m)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_any_layout_splits_in_c_order(split, dtype):
    a = _data(dtype, 6000, nans=False)
    for v in _views(a):
        assert pyreduce.max(v, backend="cpu") == v.max()
        assert pyreduce.argmax(v, backend="cpu") == np.argmax(v)
        assert pyreduce.argmin(v, backend="cpu") == np.argmin(v)
        if dtype == "int32":
            assert pyreduce.sum(v, backend="cpu") == v.sum()


def test_the_input_is_not_modified(split):
    x = _data("float64", 3000)
    before = x.copy()
    for fn in (pyreduce.sum, pyreduce.max, pyreduce.argmax, pyreduce.var, pyreduce.nansum):
        fn(x, backend="cpu")
    assert np.array_equal(x, before, equal_nan=True)


def test_reads_index():
    def nested(i, v):
        return (lambda: i)() + v

    def shadowed(i, v):
        i = 2  # noqa: F841  (an argument shadowed, on purpose)
        return v

    assert cpu_parallel.reads_index(lambda i, v: v * i)
    assert cpu_parallel.reads_index(lambda i, v: (v, i))
    assert cpu_parallel.reads_index(nested)
    assert not cpu_parallel.reads_index(lambda i, v: v * v)
    assert not cpu_parallel.reads_index(lambda i, v: (v, v))
    assert not cpu_parallel.reads_index(shadowed)


def test_a_map_is_read_once_per_code_object(monkeypatch):
    """A structured reduction of a NumPy array asks whether its element map reads
    the index on every call: the bytecode of one function is read once (reading
    it took most of a small mean's host time), and a small input asks nothing."""
    import dis

    cpu_parallel._code_reads_index.cache_clear()  # this test's own function read afresh
    reads = []
    real = dis.get_instructions
    monkeypatch.setattr(dis, "get_instructions", lambda code: reads.append(code) or real(code))

    def scaled(i, v):
        return v * i

    assert cpu_parallel.reads_index(scaled) and cpu_parallel.reads_index(scaled)
    assert reads == [scaled.__code__]
    x = np.arange(1000.0)
    for _ in range(3):
        assert pyreduce.mean(x, backend="cpu") == np.mean(x)
        assert pyreduce.argmax(x[::-1], backend="cpu") == 0
    assert reads == [scaled.__code__]


# --------------------------------------------------------------------------
# streaming to a GPU: the simulator, with chunks of 64 to 256 bytes


@pytest.fixture
def chunks(monkeypatch):
    """Stagers with slots of 256 bytes, chunks of 64 to 256 bytes, every input
    staged (none copied directly)."""
    monkeypatch.setattr(staging, "CHUNK_BYTES", 256)
    monkeypatch.setattr(staging, "MIN_CHUNK_BYTES", 64)
    monkeypatch.setattr(staging, "DIRECT_BYTES", 0)
    staging.reset()
    yield
    staging.reset()


#: the GPU backend of this process: the simulator's small tunings fit either
GPU = "cuda" if "cuda" in pyreduce.available() else "sim"
SIM = dict(backend=GPU, tuning=SIM_TUNING)


def test_chunk_elements_are_powers_of_two_within_bounds():
    for n in (1, 7, 100, 10**5, 10**7, 10**9):
        for itemsize in (1, 2, 4, 8, 16):
            size = staging.chunk_elements(n, itemsize)
            nbytes = size * itemsize
            assert staging.MIN_CHUNK_BYTES <= nbytes <= staging.CHUNK_BYTES
            assert nbytes & (nbytes - 1) == 0
            if n * itemsize >= staging.CHUNKS * staging.CHUNK_BYTES:
                assert nbytes == staging.CHUNK_BYTES


@settings(max_examples=60)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.data())
def test_c_order_pieces_cover_a_range_exactly(shape, data):
    a = np.arange(math.prod(shape) * 4).reshape([s * 2 for s in shape[:1]] + shape[1:] + [2])
    view = a[::2, ..., ::-1] if a.ndim > 1 else a[::2]
    view = view.transpose(*data.draw(st.permutations(range(view.ndim))))
    flat = view.ravel()
    lo = data.draw(st.integers(0, flat.size))
    hi = data.draw(st.integers(lo, flat.size))
    found = list(staging.c_order_pieces(view, lo, hi))
    got = np.concatenate([p.ravel() for p in found]) if found else np.empty(0, a.dtype)
    assert np.array_equal(got, flat[lo:hi])
    assert len(found) <= 2 * view.ndim + 1


@pytest.mark.parametrize("n", [1, 31, 32, 33, 100, 257])
def test_ordered_op_streamed_in_chunks(chunks, n):
    x = affine_data(n, seed=n)
    call = prepare(inspect(x), as_monoid(affine, x.dtype), None, GPU,
                   SIM_TUNING, None)
    assert call.streamed is not None and call.streamed.count == -(-n // call.streamed.chunk)
    assert call.run() == functools.reduce(affine, x)
    init = np.int64(affine_data(1, seed=99)[0])
    assert pyreduce.reduce(x, affine, initial=init, **SIM) == functools.reduce(affine, x, init)


def test_non_contiguous_inputs_stream_in_c_order(chunks):
    a = np.where(np.random.default_rng(2).random((9, 14, 3)) < 0.5, 0,
                 np.arange(9 * 14 * 3).reshape(9, 14, 3))
    for v in (a[::2, ::-1], a.transpose(2, 0, 1), a[:, 3:11, 1]):
        assert pyreduce.reduce(v, last_nonzero, **SIM) == functools.reduce(last_nonzero,
                                                                           v.ravel())
        assert pyreduce.sum(v, **SIM) == v.sum()


def test_chunks_staged_in_pieces_by_the_crew_keep_c_order(chunks, monkeypatch):
    """Pieces of 16 bytes: each chunk of a strided input is copied into its
    pinned buffer by several of the cpu backend's threads, and an ordered op
    still sees C order; so does an upload of the whole input (a result that
    stays on the device)."""
    monkeypatch.setattr(staging, "COPY_PIECE_BYTES", 16)
    monkeypatch.setattr(staging.cpu_backend(), "threads", 2)
    seen = []
    real = staging._copy_range

    def copy_range(x, lo, hi, dst):
        seen.append((lo, hi))
        real(x, lo, hi, dst)

    monkeypatch.setattr(staging, "_copy_range", copy_range)
    chunks_staged = []
    stage = staging.Stager.stage
    monkeypatch.setattr(staging.Stager, "stage",
                        lambda st, *a: chunks_staged.append(a) or stage(st, *a))
    a = affine_data(23 * 19, seed=8).reshape(23, 19)
    for v in (a[::-2, 1:], a.T[3:]):
        seen.clear()
        chunks_staged.clear()
        assert pyreduce.reduce(v, affine, **SIM) == functools.reduce(affine, v.ravel())
        assert len(chunks_staged) > 1 and len(seen) == 2 * len(chunks_staged)  # two threads
        covered = sorted(seen)
        assert covered[0][0] == 0 and covered[-1][1] == v.size
        assert all(p[1] == q[0] for p, q in zip(covered, covered[1:]))
        seen.clear()
        got = pyreduce.reduce(v, affine, device_result=True, **SIM)  # one upload
        assert np.asarray(got.copy_to_host()).reshape(()) == functools.reduce(affine, v.ravel())
        assert len(seen) > 1


def test_a_piece_that_fails_midway_leaves_the_stager_whole(chunks, monkeypatch):
    """A copy piece that raises in the third chunk: the error reaches the
    caller as it was raised, and the stager, given back, serves the next call
    right."""
    monkeypatch.setattr(staging, "COPY_PIECE_BYTES", 16)
    monkeypatch.setattr(staging.cpu_backend(), "threads", 2)
    real, calls = staging._copy_range, []

    def copy_range(x, lo, hi, dst):
        calls.append(lo)
        if len(calls) == 5:
            raise MemoryError("a piece failed")
        real(x, lo, hi, dst)

    monkeypatch.setattr(staging, "_copy_range", copy_range)
    x = affine_data(300, seed=10)
    with pytest.raises(MemoryError, match="a piece failed"):
        pyreduce.reduce(x, affine, **SIM)
    assert pyreduce.reduce(x, affine, **SIM) == functools.reduce(affine, x)


def test_argmax_streamed_has_global_indices(chunks):
    x = np.zeros(150)  # chunks of 32 elements: ties in chunks 1 and 3
    x[[40, 100]] = 3.0
    assert pyreduce.argmax(x, **SIM) == 40
    x[[70, 130]] = np.nan
    assert pyreduce.argmax(x, **SIM) == 70
    assert pyreduce.argmin(x, **SIM) == 70
    y = np.random.default_rng(5).standard_normal(150).astype(np.float32)
    assert pyreduce.argmin(y, **SIM) == np.argmin(y)


def test_tuple_accumulator_streamed(chunks):
    x = np.random.default_rng(6).integers(-50, 50, 123)

    def pair(a, b):
        return (a[0] + b[0], b[1] if b[1] != 0 else a[1])

    got = pyreduce.reduce(x, pair, map=lambda i, v: (v * v, v), **SIM)
    nz = x[x != 0]
    assert tuple(got) == ((x * x).sum(), nz[-1])
    lo, hi = pyreduce.minmax(x.astype(np.float64), **SIM)
    assert (lo, hi) == (x.min(), x.max())
    assert np.isclose(pyreduce.var(x, **SIM), np.var(x), rtol=1e-12)


def test_a_map_reading_its_index_is_copied_whole(chunks):
    x = np.arange(100, dtype=np.int64)
    monoid = as_monoid("add", x.dtype, map=lambda i, v: v * i)
    call = prepare(inspect(x), monoid, None, GPU, SIM_TUNING, None)
    assert call.streamed is None and call.flat is not None
    assert call.run() == (x * np.arange(100)).sum()


def test_deterministic_is_copied_whole(chunks):
    x = np.random.default_rng(7).standard_normal(200)
    got = pyreduce.sum(x, deterministic=True, backend=GPU,
                       tuning=SIM_TUNING.replace(items_per_thread=4))
    assert got == pyreduce.reference(x, "add")


def test_device_result_of_a_streamed_call(chunks):
    x = np.arange(77, dtype=np.int32)
    got = pyreduce.sum(x, device_result=True, dtype=np.int32, **SIM)
    assert got.copy_to_host()[()] == x.sum()
    x_call = prepare(inspect(x), as_monoid("add", x.dtype), None, GPU,
                     SIM_TUNING, None)
    assert x_call.streamed is not None  # and a device result copies it whole instead:
    assert x_call.run(device_result=True).copy_to_host()[()] == x.sum()


@pytest.mark.parametrize("zero", NEGATIVE_ZEROS, ids=lambda z: z.dtype.name)
def test_streamed_sums_of_negative_zeros_are_negative(chunks, zero):
    """Chunks' partials combined on the host keep the kernels' sign."""
    x = np.full(301, zero)
    call = prepare(inspect(x), as_monoid("add", x.dtype), None, GPU, SIM_TUNING, None)
    assert call.streamed is not None and call.streamed.count > 1
    got = call.run()
    assert got == 0 and _signs(got) == _signs(functools.reduce(lambda a, b: a + b, x))
    assert _signs(pyreduce.sum(x, **SIM)) == _signs(got)


def test_the_input_is_not_modified_when_streamed(chunks):
    x = affine_data(100)
    before = x.copy()
    pyreduce.reduce(x, affine, **SIM)
    pyreduce.sum(x[::2], **SIM)
    assert np.array_equal(x, before)


def test_axis_inputs_are_staged(chunks):
    m = np.random.default_rng(8).integers(0, 9, (6, 20))
    assert np.array_equal(pyreduce.sum(m, axis=1, **SIM), m.sum(axis=1))


def test_a_failing_op_gives_its_stager_back(chunks, monkeypatch):
    monkeypatch.setattr(staging, "MOST", 1)
    x = np.arange(100.0)
    with pytest.raises(TypeError):
        pyreduce.reduce(x, lambda a, b: "no", **SIM)
    assert pyreduce.reduce(x, lambda a, b: a + b, **SIM) == x.sum()  # no wait: it is back


def test_concurrent_calls_share_at_most_most_stagers(chunks, monkeypatch):
    monkeypatch.setattr(staging, "MOST", 2)
    made = []
    real = staging.Stager.__init__

    def counting(self, *args, **kwargs):
        made.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(staging.Stager, "__init__", counting)
    _reduce_at_once([affine_data(90, seed=s) for s in range(6)], SIM)
    assert 1 <= len(made) <= 2


def test_stagers_are_as_large_as_their_chunks(chunks, monkeypatch):
    """A small input's stager has slots of its chunk, not of CHUNK_BYTES; a
    larger input, with one stager at most, replaces the idle one that is too
    small; the small input then reuses the larger one."""
    monkeypatch.setattr(staging, "MOST", 1)
    sizes = []
    real = staging.Stager.__init__

    def counting(self, backend, nbytes=staging.CHUNK_BYTES):
        sizes.append(nbytes)
        real(self, backend, nbytes)

    monkeypatch.setattr(staging.Stager, "__init__", counting)
    small, large = affine_data(20, seed=1), affine_data(300, seed=2)
    for x in (small, large, small):
        assert pyreduce.reduce(x, affine, **SIM) == functools.reduce(affine, x)
    assert sizes == [staging.slot_bytes(20, 8), staging.CHUNK_BYTES]
    assert staging.slot_bytes(20, 8) < staging.CHUNK_BYTES


def _reduce_at_once(xs, keywords):
    """Reduce each of ``xs`` with ``affine`` in its own thread, all at once."""
    results = [None] * len(xs)

    def work(k):
        results[k] = pyreduce.reduce(xs[k], affine, **keywords)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert results == [functools.reduce(affine, x) for x in xs]


def test_small_inputs_are_copied_directly(monkeypatch):
    monkeypatch.setattr(staging, "DIRECT_BYTES", 1 << 10)
    x = np.arange(100, dtype=np.int64)  # 800 bytes
    call = prepare(inspect(x), as_monoid("add", x.dtype), None, GPU,
                   SIM_TUNING, None)
    assert call.streamed is None and call.run() == x.sum()


# --------------------------------------------------------------------------
# the cost model and the route


def _model(**numbers):
    base = dict(h2d_GBps=50, stage_GBps=60, gpu_GBps=3000, gpu_call_us=30, gpu_chunk_us=0,
                cpu_GBps=20,
                cpu_serial_GBps=10, cpu_user_ns=0.5, cpu_user_serial_ns=2, cpu_call_us=2,
                cpu_split_us=40)
    return costmodel.HostModel(**{**base, **numbers}, source="test")


def test_gpu_time_is_the_slowest_stage_after_the_first_chunk():
    m = _model()
    chunk = 8 << 20
    big = 10**10
    t = costmodel.gpu_seconds(m, big, chunk)
    assert t == pytest.approx(big / 50e9, rel=1e-3)
    assert costmodel.gpu_seconds(_model(stage_GBps=5), big, chunk) == pytest.approx(
        big / 5e9, rel=1e-3)
    fill = chunk / 60e9 + chunk / 50e9 + chunk / 3000e9
    assert costmodel.gpu_seconds(m, chunk, chunk) == pytest.approx(30e-6 + fill)


def test_gpu_time_counts_each_chunks_host_cost():
    chunk = 1 << 20
    for nbytes, chunks in ((1, 1), (chunk, 1), (chunk + 1, 2), (8 * chunk, 8)):
        extra = (costmodel.gpu_seconds(_model(gpu_chunk_us=100), nbytes, chunk)
                 - costmodel.gpu_seconds(_model(), nbytes, chunk))
        assert extra == pytest.approx(chunks * 100e-6), nbytes


#: The quick model measured on an H100 machine with 16 cores (2026-11-27), where
#: the streamed GPU path took 4.2 ms for 2**20 float64 elements with a lambda and
#: the cpu backend 1.2 ms on one thread (0.46 ms in pieces of 2**18 elements).
H100_QUICK = dict(h2d_GBps=44.2, stage_GBps=8.53, gpu_GBps=500.0, gpu_call_us=200.0,
                  gpu_chunk_us=390.0, cpu_GBps=51.7, cpu_serial_GBps=15.7, cpu_user_ns=0.155,
                  cpu_user_serial_ns=2.04, cpu_call_us=7.3, cpu_split_us=50.0)


@pytest.mark.parametrize("user", [False, True])
@pytest.mark.parametrize("n", [10**3, 2**20, 10**7, 10**8])
def test_a_measured_16_core_machine_keeps_host_inputs_on_the_cpu(n, user):
    """With that machine's numbers and the backends' own thresholds, every host
    array stays on the cpu backend (as measured there), a lambda of 2**20
    elements included, which the model without a cost per chunk sent to the GPU."""
    m = costmodel.HostModel(**H100_QUICK, source="test")
    chunk_bytes = staging.chunk_elements(n, 8) * 8
    route = costmodel.choose(m, n, 8, user, chunk_bytes=chunk_bytes,
                             split_bytes=cpu_parallel.SPLIT_BYTES,
                             split_elements=2 * cpu_parallel.PARALLEL_MIN)
    assert route.path == "cpu", route


def test_cpu_time_splits_at_the_backends_thresholds():
    m = _model()
    below = costmodel.cpu_seconds(m, 1000, 8, False, split_bytes=8001, split_elements=10)
    above = costmodel.cpu_seconds(m, 1000, 8, False, split_bytes=100, split_elements=10)
    assert below == pytest.approx(2e-6 + 8000 / 10e9)
    assert above == pytest.approx(42e-6 + 8000 / 20e9)
    user = costmodel.cpu_seconds(m, 1000, 8, True, split_bytes=100, split_elements=10**6)
    assert user == pytest.approx(2e-6 + 1000 * 2e-9)


def test_choose_takes_the_faster_path():
    fast_gpu, slow_gpu = _model(), _model(h2d_GBps=2, stage_GBps=2)
    assert costmodel.choose(fast_gpu, 10**9, 8, False).path == "gpu"
    assert costmodel.choose(slow_gpu, 10**9, 8, False).path == "cpu"
    assert costmodel.choose(fast_gpu, 100, 8, False).path == "cpu"  # the fixed costs
    # a small input whose copy is cheap still goes to a faster GPU
    slow_cpu = _model(cpu_serial_GBps=0.05, cpu_GBps=0.05, cpu_user_serial_ns=100)
    assert costmodel.choose(slow_cpu, 10**4, 8, False).path == "gpu"
    assert costmodel.choose(slow_cpu, 10**4, 8, True).path == "gpu"
    r = costmodel.choose(fast_gpu, 10**9, 8, True)
    assert r.gpu_s < r.cpu_s and "ms on the GPU" in str(r) and "test" in str(r)


def test_host_model_from_the_store_ignores_unknown_and_fills_missing():
    m = costmodel.HostModel.from_dict({"h2d_GBps": 1.5, "future_number": 3})
    assert m.h2d_GBps == 1.5 and m.cpu_GBps == costmodel.DEFAULTS.cpu_GBps


def test_folds_on_cpu():
    f8 = np.dtype(np.float64)
    assert not hostroute.folds_on_cpu(as_monoid("max", f8))
    assert not hostroute.folds_on_cpu(pyreduce.structured.argmax_monoid(f8))
    assert hostroute.folds_on_cpu(as_monoid(lambda a, b: a + b, f8))
    assert hostroute.folds_on_cpu(as_monoid("add", f8, map=lambda i, v: v * v))


@pytest.mark.sim
def test_auto_takes_the_simulator_for_no_gpu():
    x = np.arange(10.0)
    call = prepare(inspect(x), as_monoid("add", x.dtype), None, "auto", Tuning(), None)
    assert call.backend.name == "cpu" and call.route is None


def test_auto_without_a_gpu_keeps_host_inputs_on_the_cpu(monkeypatch):
    x = np.arange(10.0)
    monkeypatch.setattr(backends, "_numba_cuda_mode", lambda: None)
    monkeypatch.setattr(backends, "_hip_present", lambda: False)
    call = prepare(inspect(x), as_monoid("add", x.dtype), None, "auto", Tuning(), None)
    assert call.backend.name == "cpu" and call.route is None
    assert pyreduce.explain(x, "add").route is None


@pytest.fixture
def fake_gpu(monkeypatch, chunks):
    """``auto`` finds a "GPU": the simulator, with the cost model ``models[0]``."""
    sim = backends.get(GPU)
    monkeypatch.setattr(backends, "_numba_cuda_mode", lambda: "cuda")
    monkeypatch.setitem(backends._instances, "cuda", sim)
    models = [_model(cpu_serial_GBps=0.01, cpu_GBps=0.01, cpu_user_serial_ns=1000,
                     cpu_user_ns=1000)]  # a slow cpu: the GPU wins at every size
    monkeypatch.setattr(calibrate, "model", lambda be: models[0])
    return models


def test_auto_routes_host_inputs_by_the_model(fake_gpu):
    x = affine_data(300)
    call = prepare(inspect(x), as_monoid(affine, x.dtype), None, "auto",
                   SIM_TUNING, None)
    assert call.backend.name == GPU and call.route.path == "gpu"
    assert call.run() == functools.reduce(affine, x)
    fake_gpu[0] = _model(h2d_GBps=0.001)
    e = pyreduce.explain(x, affine)
    assert e.backend == "cpu" and e.route.path == "cpu" and e.route.cpu_s < e.route.gpu_s
    assert e.result == functools.reduce(affine, x) and "cpu backend" in str(e)


def test_auto_keeps_a_device_result_on_the_gpu(fake_gpu):
    fake_gpu[0] = _model(h2d_GBps=0.001)  # the cpu would be faster
    x = np.arange(50, dtype=np.int64)
    got = pyreduce.sum(x, device_result=True, tuning=SIM_TUNING)
    assert got.copy_to_host()[()] == x.sum()


def test_explain_shows_the_route_and_the_chunks(fake_gpu):
    x = np.arange(100, dtype=np.int64)
    e = pyreduce.explain(x, "add", tuning=SIM_TUNING)
    size = staging.chunk_elements(100, 8)
    assert size < 100 and e.chunks == (-(-100 // size), size)
    assert e.backend == GPU and e.route.path == "gpu"
    text = str(e)
    assert "streamed through pinned buffers" in text
    assert f"{e.chunks[0]} of up to {size} elements" in text
    assert e.result == x.sum()


# --------------------------------------------------------------------------
# the model's numbers in the tuning store


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("PYREDUCE_TUNING_FILE", str(tmp_path / "tuning.json"))
    tuned._loaded = None
    calibrate.forget()
    yield tmp_path / "tuning.json"
    tuned._loaded = None
    calibrate.forget()


def test_host_models_and_choices_share_the_store(store):
    choice = tuning.Choice("warp_shuffle", 256, 4, None, 100.0, "2026-01-01")
    tuned._save(table={"gpu|float32|float32|add|2**20": choice})
    tuning.save_host_model("gpu|16 cpus", {"h2d_GBps": 42.0})
    tuned._loaded = None
    assert tuning.host_model("gpu|16 cpus") == {"h2d_GBps": 42.0}
    assert tuning.host_model("other") is None
    assert list(tuning.choices().values()) == [choice]
    assert "host inputs on gpu|16 cpus: h2d_GBps 42" in tuning.show()
    tuned._save(table={})  # saving choices keeps the host models
    tuned._loaded = None
    assert tuning.host_model("gpu|16 cpus") == {"h2d_GBps": 42.0}
    tuning.reset()
    assert tuning.host_model("gpu|16 cpus") is None


def test_quick_model_is_measured_once_and_recorded(store, chunks, monkeypatch):
    sim = backends.get(GPU)
    first = calibrate.model(sim)
    assert first.source.startswith("quick") and first.h2d_GBps > 0 and first.cpu_GBps > 0
    assert calibrate.model(sim) is first
    calibrate.forget()  # a new process: read from the store, not measured again
    monkeypatch.setattr(calibrate, "cheap_numbers", lambda be: pytest.fail("measured again"))
    tuned._loaded = None
    assert calibrate.model(sim) == first


def test_a_failed_measurement_gives_the_defaults(store, monkeypatch):
    def broken(be):
        raise RuntimeError("no pinned memory")

    monkeypatch.setattr(calibrate, "cheap_numbers", broken)
    calibrate.forget()  # a model measured earlier in this process would be kept
    with pytest.warns(UserWarning, match="no pinned memory"):
        assert calibrate.model(backends.get(GPU)) is costmodel.DEFAULTS


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "float16", "bfloat16", "complex64",
                                   "float64"])
def test_every_dtype_streams(chunks, dtype):
    import ml_dtypes

    rng = np.random.default_rng(11)
    ints = rng.integers(-50, 50, (2, 150))  # small integers: every sum is exact
    if dtype == "bool":
        x = ints[0] > 0
    elif dtype == "complex64":
        x = (ints[0] + 1j * ints[1]).astype(dtype)
    else:
        x = ints[0].astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    ref = x.astype(np.float32) if dtype in ("float16", "bfloat16") else x
    assert pyreduce.sum(x, **SIM) == pyreduce.sum(ref, backend="cpu")
    if np.dtype(ref.dtype).kind != "c":
        assert pyreduce.max(x, **SIM) == ref.max()
        assert pyreduce.argmin(x, **SIM) == np.argmin(ref)


# --------------------------------------------------------------------------
# on a real GPU (NUMBA_ENABLE_CUDASIM=0): pinned buffers, streams and events


@pytest.fixture
def gpu_chunks(monkeypatch):
    """Chunks of 1 MiB (at most 2 MiB), staged from 64 KiB up, host copies in
    parts of 256 KiB: several chunks, parts and slot reuses at modest sizes."""
    monkeypatch.setattr(staging, "CHUNK_BYTES", 2 << 20)
    monkeypatch.setattr(staging, "MIN_CHUNK_BYTES", 1 << 20)
    monkeypatch.setattr(staging, "COPY_PIECE_BYTES", 256 << 10)
    staging.reset()
    yield
    staging.reset()


@pytest.mark.gpu
@pytest.mark.parametrize("n", [2**17 + 3, 2**20 + 5, 3 * 2**20 + 1])
def test_gpu_ordered_op_streamed(gpu_chunks, n):
    x = affine_data(n, seed=n)
    call = prepare(inspect(x), as_monoid(affine, x.dtype), None, "cuda", Tuning(), None)
    assert call.streamed is not None
    assert call.run() == functools.reduce(affine, x)
    init = np.int64(affine_data(1, seed=1)[0])
    assert pyreduce.reduce(x, affine, initial=init, backend="cuda") == functools.reduce(
        affine, x, init)


@pytest.mark.gpu
def test_gpu_streamed_builtins_layouts_and_indices(gpu_chunks):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(3 * 2**20 + 7)
    x[[2**19, 2**21 + 5]] = x.max() + 1  # ties in two chunks
    assert pyreduce.argmax(x, backend="cuda") == 2**19
    x[[2**20 + 9, 3 * 2**20]] = np.nan
    assert pyreduce.argmax(x, backend="cuda") == 2**20 + 9
    assert np.isnan(pyreduce.max(x, backend="cuda"))
    assert pyreduce.nanmax(x, backend="cuda") == np.nanmax(x)
    ints = rng.integers(-1000, 1000, (1500, 700))
    for v in (ints, ints[::2, ::-3], ints.T):
        assert pyreduce.sum(v, backend="cuda") == v.sum()
        assert pyreduce.reduce(v, last_nonzero, backend="cuda") == functools.reduce(
            last_nonzero, v.ravel())
    f32 = rng.standard_normal(2**22).astype(np.float32)
    assert np.isclose(pyreduce.sum(f32, backend="cuda"), f32.sum(dtype=np.float64),
                      rtol=1e-4)
    assert np.isclose(pyreduce.var(f32, backend="cuda"), np.var(f32), rtol=1e-6)


@pytest.mark.gpu
def test_gpu_uploads_and_device_results(gpu_chunks):
    x = np.arange(3 * 2**20 + 3, dtype=np.int64)
    got = pyreduce.sum(x, device_result=True, backend="cuda")
    assert int(np.asarray(got.copy_to_host())) == x.sum()
    m = x[: 2**20 * 3].reshape(3 * 2**10, 2**10)
    assert np.array_equal(pyreduce.sum(m, axis=1, backend="cuda"), m.sum(axis=1))
    assert pyreduce.reduce(x, "add", map=lambda i, v: v * (i % 3), backend="cuda") == (
        x * (np.arange(x.size) % 3)).sum()


@pytest.mark.gpu
def test_gpu_concurrent_streamed_calls(gpu_chunks, monkeypatch):
    monkeypatch.setattr(staging, "MOST", 2)
    _reduce_at_once([affine_data(2**20 + k, seed=k) for k in range(6)], {"backend": "cuda"})


@pytest.mark.gpu
def test_gpu_auto_route_is_explained(gpu_chunks, store):
    x = np.random.default_rng(4).standard_normal(2**20)
    e = pyreduce.explain(x, "max")
    assert e.route is not None and e.route.gpu_s is not None and e.result == x.max()
    assert e.backend == ("cuda" if e.route.path == "gpu" else "cpu")


def test_per_element_rates_leave_out_each_calls_fixed_cost():
    """Regression (H100): a parallel fold's rate was its time over 2 million
    elements, split and join included, 5 times its rate at 1e8: ``auto`` then sent
    float32 lambdas to the GPU, 3.7 to 10.5 times slower than the CPU."""
    fixed, rate = 300e-6, 0.1e-9
    assert calibrate.slope(lambda k: fixed + k * rate, 2 << 20) == pytest.approx(rate)
    # noise that makes the half look slower than the whole: the plain average
    assert calibrate.slope(lambda k: 1e-3 if k < 2 << 20 else 0.9e-3, 2 << 20) == \
        pytest.approx(0.9e-3 / (2 << 20))


@pytest.mark.gpu
def test_a_host_array_reduced_on_the_cpu_makes_no_cuda_context(tmp_path):
    """The cost model's key needs the GPU's name, not a context (0.1 s to make):
    a fresh process whose host array the model sends to the cpu backend makes
    none. Run in a new process, since this one has contexts already."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import numpy as np
        import pyreduce
        from pyreduce import backends, calibrate, costmodel
        be = backends.get("cuda")
        slow_gpu = costmodel.HostModel.from_dict(dict(h2d_GBps=0.001, stage_GBps=0.001))
        calibrate.remember(be, slow_gpu)
        x = np.random.default_rng(0).random(2**20)
        assert pyreduce.max(x) == x.max()
        from cuda.bindings import driver as cu
        err, ctx = cu.cuCtxGetCurrent()
        assert int(err) == 0, err
        print("CONTEXT", int(ctx))
    """)
    env = dict(os.environ, PYREDUCE_CACHE_DIR=str(tmp_path), NUMBA_ENABLE_CUDASIM="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "CONTEXT 0" in out.stdout, out.stdout


def test_auto_on_a_gpu_machine_remembers_a_cpu_route_while_the_model_holds(
        fake_gpu, prepares, monkeypatch):
    """A host input that ``auto`` sent to the cpu backend is remembered: a repeat
    skips the cost model while the model (:func:`pyreduce.calibrate.changes`)
    and the thread's GPU are those it was decided with; after either changes the
    model decides again, and a call it sends to the GPU is not remembered."""
    from pyreduce import calibrate, callmemo

    fake_gpu[0] = _model(h2d_GBps=0.001)  # the cpu is faster
    x = np.arange(300, dtype=np.int64)
    for _ in range(3):
        assert pyreduce.reduce(x, affine) == functools.reduce(affine, x)
    assert prepares[0] == 1 and len(callmemo._HOST_MEMO) == 1
    # another GPU current in this thread: its own model decides
    sim = backends.get("cuda")  # the simulator, as the fixture made it
    other = dataclasses.replace(sim.quiet_device(), name="another GPU")
    with monkeypatch.context() as m:
        m.setattr(sim, "quiet_device", lambda: other)
        assert pyreduce.reduce(x, affine) == functools.reduce(affine, x)
        assert prepares[0] == 2
    # a new model (a calibration, or the models forgotten): the GPU is faster now
    fake_gpu[0] = _model(cpu_serial_GBps=0.01, cpu_GBps=0.01, cpu_user_serial_ns=1000,
                         cpu_user_ns=1000)
    calibrate.forget()
    assert pyreduce.explain(x, affine).backend == GPU
    for k in range(2):
        assert pyreduce.reduce(x, affine) == functools.reduce(affine, x)
        assert prepares[0] == 3 + k  # each call streamed, each decided by the model
