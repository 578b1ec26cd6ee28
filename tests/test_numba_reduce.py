"""numba-cuda's own ``cuda.Reduce`` tests
(``numba/cuda/tests/cudapy/test_reduction.py``), ported to ``pyreduce.Reduce`` and
run on every backend. The sizes are numba's non-simulator list on cuda and cpu;
on the simulator a smaller list that still crosses warp, block, tile and grid
edges of the simulator's default plan (64 threads, 2 blocks)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pyreduce

# Avoid recompilation of the sum_reduce function by keeping it at global scope
sum_reduce = pyreduce.Reduce(lambda a, b: a + b)

NUMBA_SIZES = [
    1, 15, 16, 17, 127, 128, 129, 1023, 1024, 1025, 1536,
    1048576, 1049600, 1049728, 34567,
]
SIM_SIZES = [1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
             511, 512, 513, 1023, 1024, 1025, 1536]


def sizes(backend):
    return SIM_SIZES if backend == "sim" else NUMBA_SIZES


def to_device(a):
    from numba import cuda

    return cuda.to_device(a)


class TestReduction:
    def _sum_reduce(self, n, backend):
        A = np.arange(n, dtype=np.float64) + 1
        expect = A.sum()
        got = sum_reduce(A, backend=backend)
        assert expect == got
        assert got.dtype == np.float64

    def test_sum_reduce(self, backend):
        for n in sizes(backend):
            self._sum_reduce(n, backend)

    def test_empty_array_host(self, backend):
        A = np.arange(0, dtype=np.float64) + 1
        expect = A.sum()
        got = sum_reduce(A, backend=backend)
        assert expect == got

    def test_empty_array_device(self, gpu_backend):
        A = np.arange(0, dtype=np.float64) + 1
        dA = to_device(A)
        expect = A.sum()
        got = sum_reduce(dA, backend=gpu_backend)
        assert expect == got

    def test_prod_reduce(self, backend):
        prod_reduce = pyreduce.Reduce(lambda a, b: a * b)
        A = np.arange(64, dtype=np.float64) + 1
        expect = A.prod()
        got = prod_reduce(A, init=1, backend=backend)
        np.testing.assert_allclose(expect, got)

    def test_max_reduce(self, backend):
        max_reduce = pyreduce.Reduce(lambda a, b: max(a, b))
        A = np.arange(3717, dtype=np.float64) + 1
        expect = A.max()
        got = max_reduce(A, init=0, backend=backend)
        assert expect == got

    def test_non_identity_init(self, backend):
        init = 3
        A = np.arange(10, dtype=np.float64) + 1
        expect = A.sum() + init
        got = sum_reduce(A, init=init, backend=backend)
        assert expect == got

    def test_result_on_device(self, gpu_backend):
        A = np.arange(10, dtype=np.float64) + 1
        got = to_device(np.zeros(1, dtype=np.float64))
        expect = A.sum()
        res = sum_reduce(A, res=got, backend=gpu_backend)
        assert res is None
        assert expect == got[0]


# --------------------------------------------------------------------------
# Beyond the port: the rest of numba's documented Reduce interface


def test_device_input_every_size(gpu_backend):
    for n in sizes(gpu_backend)[:: 2 if gpu_backend == "sim" else 1]:
        A = np.arange(n, dtype=np.float64) + 1
        assert sum_reduce(to_device(A), backend=gpu_backend) == A.sum()


def test_result_on_device_multi_block(gpu_backend):
    n = 1025 if gpu_backend == "sim" else 1049600
    A = np.arange(n, dtype=np.int64)
    res = to_device(np.full(3, -1, dtype=np.int64))
    assert sum_reduce(to_device(A), res=res, init=5, backend=gpu_backend) is None
    # only res[0] is written
    assert res.copy_to_host().tolist() == [A.sum() + 5, -1, -1]


def test_size_argument(backend):
    A = np.arange(100, dtype=np.float64) + 1
    assert sum_reduce(A, size=5, backend=backend) == 15.0
    assert sum_reduce(A, size=0, backend=backend) == 0.0
    assert sum_reduce(A, size=0, init=4, backend=backend) == 4.0
    assert sum_reduce(A, size=1000, backend=backend) == A.sum()


def test_stream(gpu_backend):
    from numba import cuda

    stream = cuda.stream()
    A = np.arange(1, 600, dtype=np.float64)
    assert sum_reduce(A, stream=stream, backend=gpu_backend) == A.sum()
    res = cuda.device_array(1, dtype=np.float64, stream=stream)
    assert sum_reduce(to_device(A), res=res, stream=stream, backend=gpu_backend) is None
    stream.synchronize()
    assert res.copy_to_host()[0] == A.sum()


@pytest.mark.parametrize("dt", [np.int8, np.int32, np.uint16, np.int64, np.float32])
def test_result_dtype_is_the_input_dtype(backend, dt):
    A = (np.arange(300) % 7).astype(dt)
    got = sum_reduce(A, backend=backend)
    assert got.dtype == np.dtype(dt)
    assert got == A.sum(dtype=dt)


def test_init_is_cast_to_the_dtype(backend):
    A = np.arange(1, 11, dtype=np.int32)
    got = sum_reduce(A, init=2.0, backend=backend)
    assert got == 57 and got.dtype == np.int32
    # a value the dtype does not hold is refused, as initial= is, not truncated
    for bad, why in ((2.5, "not a whole number"), (2**40, "does not fit in int32"),
                     (1j, "init=")):
        with pytest.raises(TypeError, match=why):
            sum_reduce(A, init=bad, backend=backend)
        with pytest.raises(TypeError, match=why):
            sum_reduce(A[:0], init=bad, backend=backend)  # the empty input's result too


def test_non_commutative_functor_with_init(backend):
    last = pyreduce.Reduce(lambda a, b: b if b != 0 else a)
    first = pyreduce.Reduce(lambda a, b: a if a != 0 else b)
    A = np.zeros(1300, dtype=np.int64)
    A[[5, 700, 1200]] = [3, 4, 6]
    assert last(A, backend=backend) == 6
    assert first(A, backend=backend) == 3
    assert first(A, init=9, backend=backend) == 9
    assert last(A[:700], init=9, backend=backend) == 3
    assert functools.reduce(lambda a, b: a if a != 0 else b, A[:700], 0) == 3


def test_a_new_reduce_of_the_same_lambda_does_not_rebuild(backend):
    A = np.arange(1, 301, dtype=np.float64)
    assert sum_reduce(A, backend=backend) == A.sum()
    builds = pyreduce.cache_info().builds
    again = pyreduce.Reduce(lambda a, b: a + b)
    assert again(A, backend=backend) == A.sum()
    assert pyreduce.cache_info().builds == builds
