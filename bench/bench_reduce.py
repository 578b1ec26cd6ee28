"""pyreduce against NumPy on the CPU and against CuPy, PyTorch, cuda.compute and
numba.cuda.reduce on the GPU (the libraries and cases of ``bench/peers.py``, which
``bench/compare.py`` also uses).

Run: ``python -m pytest bench --benchmark-json=bench.json``. Each GPU case records
device time (CUDA events, the GPU held while the calls are queued, median of
batches) and GB/s in ``extra_info``; the
benchmark's own statistics are the host call latency (host scalar returned).
Compile time is measured on its own (``test_compile_time``).
"""

import time

import numpy as np
import pytest

import pyreduce

from _timing import device_seconds, record
from peers import CASES, LIBS, UNHELD, calls, data, expected

SIZES_GPU = [2**10, 2**20, 2**28]
SIZES_CPU = [2**10, 2**20, 10_000_000]


# --- CPU: pyreduce's cpu backend against NumPy

@pytest.mark.parametrize("n", SIZES_CPU)
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("lib", ["pyreduce", "numpy"])
def test_cpu(benchmark, lib, op, n):
    x = np.random.default_rng(0).standard_normal(n)
    fn = {
        ("pyreduce", "sum"): lambda: pyreduce.sum(x, backend="cpu"),
        ("pyreduce", "max"): lambda: pyreduce.max(x, backend="cpu"),
        ("numpy", "sum"): lambda: np.sum(x),
        ("numpy", "max"): lambda: np.max(x),
    }[lib, op]
    fn()
    benchmark.group = f"cpu {op} float64 n={n}"
    result = benchmark(fn)
    assert np.isclose(result, np.sum(x) if op == "sum" else np.max(x))
    record(benchmark, x.nbytes, None, lib=lib, op=op, n=n, dtype="float64")


# --- GPU: pyreduce against its peers on the same device array (bench/peers.py)


@pytest.mark.parametrize("n", SIZES_GPU, ids=lambda n: f"2**{n.bit_length() - 1}")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name.replace(" ", "-"))
@pytest.mark.parametrize("lib", LIBS)
def test_gpu(benchmark, gpu, lib, case, n):
    pytest.importorskip("cupy")
    x = data(case, n)
    made = calls(lib, case, x)
    if made is None:
        pytest.skip(f"{lib} cannot do {case.name} here")
    device_fn, host_fn = made
    seconds = device_seconds(device_fn, hold=lib not in UNHELD)
    benchmark.group = f"gpu {case.name} n=2**{n.bit_length() - 1}"
    result = benchmark(host_fn)
    want = expected(case, x)
    if case.op == "sum" and case.dtype.startswith("float"):
        assert np.isclose(float(result), want, rtol=1e-3, atol=1e-3 * np.sqrt(n))
    else:
        assert float(result) == float(want)
    record(benchmark, x.nbytes, seconds, lib=lib, case=case.name, op=case.op,
           dtype=case.dtype, n=n, gpu=gpu)


def test_gpu_copy_ceiling(benchmark, gpu):
    """Device-to-device copy of 2**28 float32: the bandwidth ceiling (read + write)."""
    cp = pytest.importorskip("cupy")
    x = cp.ones(2**28, dtype=cp.float32)
    y = cp.empty_like(x)
    seconds = device_seconds(lambda: cp.copyto(y, x))
    benchmark.group = "gpu copy ceiling"
    benchmark(lambda: (cp.copyto(y, x), cp.cuda.Device().synchronize()))
    record(benchmark, 2 * x.nbytes, seconds, lib="cupy.copyto", n=x.size, gpu=gpu)


def test_compile_time(benchmark, gpu):
    """First call with a new op: code generation and compilation, then a second
    lambda with the same code (a cache hit)."""
    x = np.arange(1000, dtype=np.float32)
    salt = time.time_ns()  # a closure value never seen before: a genuinely new op

    def first():
        pyreduce.reduce(x, lambda a, b: a + b + np.float32(salt * 0))

    t0 = time.perf_counter()
    first()
    compile_s = time.perf_counter() - t0
    builds = pyreduce.cache_info().builds
    t0 = time.perf_counter()
    first()  # new lambda object, same code and closure: no build
    second_s = time.perf_counter() - t0
    assert pyreduce.cache_info().builds == builds
    benchmark.extra_info.update(first_call_s=compile_s, same_code_second_call_s=second_s)
    benchmark.pedantic(first, rounds=3)
