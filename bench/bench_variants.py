"""Every variant, float32 sum of 2**24 and 2**28 elements, timed by the
``gpu_benchmark`` fixture (device time per call with the result left on the
device; GB/s in ``extra_info``). ``bench/variants.py`` sweeps all sizes."""

import numpy as np
import pytest

import pyreduce


@pytest.mark.parametrize("n", [2**24, 2**28])
@pytest.mark.parametrize("variant", list(pyreduce.variants))
def test_variant(gpu_benchmark, gpu, variant, n):
    cp = pytest.importorskip("cupy")
    from numba import cuda

    x = cp.random.default_rng(1).standard_normal(n, dtype=cp.float32)
    xd = cuda.as_cuda_array(x)

    def call():
        return pyreduce.sum(xd, device_result=True, variant=variant)

    gpu_benchmark.group = f"variants float32 sum n=2**{n.bit_length() - 1}"
    got = gpu_benchmark.pedantic(call, nbytes=x.nbytes, timer="gpu")
    assert np.isclose(float(got.copy_to_host().reshape(-1)[0]), float(x.sum(dtype=cp.float64)),
                      rtol=1e-3, atol=1e-2 * np.sqrt(n))
    gpu_benchmark.extra_info.update(variant=variant, n=n)
