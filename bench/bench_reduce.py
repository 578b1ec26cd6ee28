"""pyreduce against NumPy on the CPU and against CuPy and PyTorch on the GPU.

Run: ``python -m pytest bench --benchmark-json=bench.json``. Each GPU case records
device time (CUDA events, median of batches) and GB/s in ``extra_info``; the
benchmark's own statistics are the host call latency (host scalar returned).
Compile time is measured on its own (``test_compile_time``).
"""

import time

import numpy as np
import pytest

import pyreduce

from _timing import device_seconds, record

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


# --- GPU: pyreduce against CuPy and PyTorch on the same device array

def _gpu_case(lib, op, x_cupy):
    """``(device_fn, host_fn)``: the first leaves the result on the device."""
    if lib == "pyreduce":
        red = pyreduce.sum if op == "sum" else pyreduce.max
        return (lambda: red(x_cupy, device_result=True)), (lambda: red(x_cupy))
    if lib == "pyreduce-numba-array":
        from numba import cuda

        xd = cuda.as_cuda_array(x_cupy)  # a Numba device array as the input
        red = pyreduce.sum if op == "sum" else pyreduce.max
        return (lambda: red(xd, device_result=True)), (lambda: red(xd))
    if lib == "pyreduce-lambda":
        f = (lambda a, b: a + b) if op == "sum" else (lambda a, b: a if a > b else b)
        return (
            lambda: pyreduce.reduce(x_cupy, f, device_result=True),
            lambda: pyreduce.reduce(x_cupy, f),
        )
    if lib == "cupy":
        red = x_cupy.sum if op == "sum" else x_cupy.max
        return red, (lambda: float(red()))
    if lib == "torch":
        torch = pytest.importorskip("torch")
        xt = torch.as_tensor(x_cupy, device="cuda")
        red = xt.sum if op == "sum" else xt.max
        return red, (lambda: red().item())
    if lib == "numba.cuda.reduce":
        from numba import cuda

        xd = cuda.as_cuda_array(x_cupy)
        f = cuda.Reduce((lambda a, b: a + b) if op == "sum" else (lambda a, b: max(a, b)))
        res = cuda.device_array(1, dtype=xd.dtype)
        return (lambda: f(xd, res=res)), (lambda: f(xd))
    raise AssertionError(lib)


@pytest.mark.parametrize("n", SIZES_GPU)
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize(
    "lib",
    ["pyreduce", "pyreduce-numba-array", "pyreduce-lambda", "cupy", "torch", "numba.cuda.reduce"],
)
def test_gpu(benchmark, gpu, lib, op, n):
    cp = pytest.importorskip("cupy")
    x = cp.random.default_rng(0).standard_normal(n, dtype=cp.float32)
    device_fn, host_fn = _gpu_case(lib, op, x)
    expected = float(x.sum(dtype=cp.float64)) if op == "sum" else float(x.max())
    seconds = device_seconds(device_fn)
    benchmark.group = f"gpu {op} float32 n=2**{n.bit_length() - 1}"
    result = benchmark(host_fn)
    assert np.isclose(float(result), expected, rtol=1e-3, atol=1e-3 * np.sqrt(n))
    record(benchmark, x.nbytes, seconds, lib=lib, op=op, n=n, dtype="float32", gpu=gpu)


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
