"""Every variant, float32 sum of 2**24 and 2**28 elements, device time from CUDA
events (``GBps`` in ``extra_info``); the benchmark's own statistics are the host
call with the result left on the device. ``bench/variants.py`` sweeps all sizes."""

import numpy as np
import pytest

import pyreduce

from _timing import device_seconds, record


@pytest.mark.parametrize("n", [2**24, 2**28])
@pytest.mark.parametrize("variant", list(pyreduce.variants))
def test_variant(benchmark, gpu, variant, n):
    cp = pytest.importorskip("cupy")
    from numba import cuda

    x = cp.random.default_rng(1).standard_normal(n, dtype=cp.float32)
    xd = cuda.as_cuda_array(x)

    def call():
        return pyreduce.sum(xd, device_result=True, variant=variant)

    got = float(call().copy_to_host()[0])
    assert np.isclose(got, float(x.sum(dtype=cp.float64)), rtol=1e-3, atol=1e-2 * np.sqrt(n))
    seconds = device_seconds(call)
    benchmark.group = f"variants float32 sum n=2**{n.bit_length() - 1}"
    benchmark(call)
    record(benchmark, x.nbytes, seconds, variant=variant, n=n, gpu=gpu)
