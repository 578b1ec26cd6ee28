"""pyreduce against NumPy on the CPU and against CuPy, PyTorch, cuda.compute and
numba.cuda.reduce on the GPU (the libraries and cases of ``bench/peers.py``, which
``bench/compare.py`` also uses).

Run: ``python -m pytest bench --benchmark-json=bench.json``. GPU cases are timed
by the ``gpu_benchmark`` fixture (:mod:`pyreduce.pytest_plugin`): the benchmark's
statistics are device time per call (CUDA events, the GPU held while the calls
are queued), ``extra_info`` has GB/s, the device and ``host_us``, the wall time
of a call that returns a host scalar. Compile time is measured on its own
(``test_compile_time``).
"""

import time

import numpy as np
import pytest

import pyreduce

from _timing import host_seconds
from peers import CASES, LIBS, UNHELD, calls, data, expected

SIZES_GPU = [2**10, 2**20, 2**28]
SIZES_CPU = [2**10, 2**20, 10_000_000]


# --- CPU: pyreduce's cpu backend against NumPy

@pytest.mark.parametrize("n", SIZES_CPU)
@pytest.mark.parametrize("op", ["sum", "max", "mean", "var", "argmax"])
@pytest.mark.parametrize("lib", ["pyreduce", "pyreduce-auto", "numpy"])
def test_cpu(gpu_benchmark, lib, op, n):
    """``pyreduce``: the cpu backend asked for; ``pyreduce-auto``: the plain call
    a user writes (``pyreduce.sum(x)``), the cpu backend on a machine without a
    GPU, the cost model's choice on one with a GPU."""
    x = np.random.default_rng(0).standard_normal(n)
    mine, numpys = getattr(pyreduce, op), getattr(np, op)
    fn = {"pyreduce": lambda: mine(x, backend="cpu"), "pyreduce-auto": lambda: mine(x),
          "numpy": lambda: numpys(x)}[lib]
    gpu_benchmark.group = f"cpu {op} float64 n={n}"
    result = gpu_benchmark.pedantic(fn, nbytes=x.nbytes, timer="wall")
    assert np.isclose(result, numpys(x), rtol=1e-12)
    gpu_benchmark.extra_info.update(lib=lib, op=op, n=n, dtype="float64")


# --- GPU: pyreduce against its peers on the same device array (bench/peers.py)


@pytest.mark.parametrize("n", SIZES_GPU, ids=lambda n: f"2**{n.bit_length() - 1}")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name.replace(" ", "-"))
@pytest.mark.parametrize("lib", LIBS)
def test_gpu(gpu_benchmark, gpu, lib, case, n):
    pytest.importorskip("cupy")
    x = data(case, n)
    made = calls(lib, case, x)
    if made is None:
        pytest.skip(f"{lib} cannot do {case.name} here")
    device_fn, host_fn = made
    gpu_benchmark.group = f"gpu {case.name} n=2**{n.bit_length() - 1}"
    gpu_benchmark.pedantic(device_fn, nbytes=x.nbytes, hold=lib not in UNHELD, timer="gpu")
    result = host_fn()
    want = expected(case, x)
    if case.op == "sum" and case.dtype.startswith("float"):
        assert np.isclose(float(result), want, rtol=1e-3, atol=1e-3 * np.sqrt(n))
    else:
        assert float(result) == float(want)
    gpu_benchmark.extra_info.update(lib=lib, case=case.name, op=case.op, dtype=case.dtype,
                                    n=n, host_us=host_seconds(host_fn) * 1e6)


def test_gpu_copy_ceiling(gpu_benchmark, gpu):
    """Device-to-device copy of 2**28 float32: the bandwidth ceiling (read + write)."""
    cp = pytest.importorskip("cupy")
    x = cp.ones(2**28, dtype=cp.float32)
    y = cp.empty_like(x)
    gpu_benchmark.group = "gpu copy ceiling"
    gpu_benchmark.pedantic(lambda: cp.copyto(y, x), nbytes=2 * x.nbytes, timer="gpu")
    gpu_benchmark.extra_info.update(lib="cupy.copyto", n=x.size)


def test_compile_time(benchmark, gpu):
    """First call with a new op: code generation and compilation, then a second
    lambda with the same code (a cache hit). Host time: pytest-benchmark's own."""
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
