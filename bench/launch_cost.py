"""What one kernel launch costs the host, and what that cost depends on.

    python bench/launch_cost.py [--out FILE]

Each row is the host time of one ``cuLaunchKernel`` (one block of 256 threads),
the median over bursts of 32 launches that never fill the GPU's queue (the
device is synchronized between bursts, off the clock). The kernels are Numba's:

* ``empty(1 int)``: an empty kernel with one int64 parameter;
* ``empty(31 ints)``: an empty kernel with 31 int64 parameters (248 bytes, as
  many as the reduction kernel's four arrays and three ints in Numba's ABI);
* ``empty(4 arrays + 3 ints)``: an empty kernel with the reduction kernel's
  signature;
* ``reduce kernel``: pyreduce's float32 max kernel for 2**10 elements;

each through ``cuda.bindings`` on the legacy default stream, on a non-blocking
stream, and (the first and last) through ``ctypes`` straight into ``libcuda``,
from Python and from a Numba ``njit`` function. Then the
calls of CuPy and PyTorch for comparison, and each kernel's pace back to back
(CUDA events), which is the host's pace of issuing it.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _report import gpu_name, today, write  # noqa: E402
from _timing import burst_us as _burst_us  # noqa: E402

BURST = 32


def burst_us(fn, sync) -> float:
    """Median host microseconds per call of ``fn`` over bursts of :data:`BURST`
    (:func:`_timing.burst_us`), 400 of them."""
    return _burst_us(fn, sync, BURST, 400)


def _empty_kernel(cuda, types: str, nargs: int):
    """An empty Numba kernel of ``nargs`` parameters, compiled for ``types``."""
    names = ", ".join(f"a{i}" for i in range(nargs))
    src = f"def k({names}):\n    pass\n"
    scope: dict = {}
    exec(src, scope)
    return cuda.jit(types, lineinfo=False)(scope["k"])


def _handle(dispatcher):
    (compiled,) = dispatcher.overloads.values()
    return compiled._codelibrary.get_cufunc().handle


class Params:
    """A kernel parameter buffer of int64 words and the pointer array to it."""

    def __init__(self, words):
        self.values = np.array(words, dtype=np.int64)
        self.pointers = np.arange(len(words), dtype=np.uint64) * 8 + self.values.ctypes.data
        self.address = int(self.pointers.ctypes.data)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="also write the lines to this file")
    args = p.parse_args(argv)

    import cupy as cp
    from cuda.bindings import driver as cu
    from numba import cuda

    import pyreduce
    from pyreduce.prepared import prepare
    from pyreduce.interop import inspect
    from pyreduce.ops import as_monoid

    lines = []

    def say(text):
        print(text, flush=True)
        lines.append(text)

    sync = cp.cuda.Device().synchronize
    name = gpu_name("cupy")
    err, drv = cu.cuDriverGetVersion()
    say(f"# bench/launch_cost.py on {name}, {today()}, driver {drv}, "
        f"CUDA_MODULE_LOADING={os.environ.get('CUDA_MODULE_LOADING', '(unset)')}; "
        f"host us per launch, median of bursts of {BURST}")

    # pyreduce's own kernel and prepared launch, for 2**10 float32 (max)
    x = cp.random.default_rng(0).standard_normal(2**10, dtype=cp.float32)
    pyreduce.max(x)
    info = inspect(x)
    monoid = as_monoid("max", info.dtype)
    call = prepare(info, monoid, None, "auto", pyreduce.Tuning(), None)
    exe = call.backend.executable(call.plan, monoid, call.device)
    exe(call.flat, call.stream)
    pool, ws = exe._workspace(call.stream)
    step, dst = ws.steps[0], ws.buffers["result"]
    step(call.flat, dst, 0)
    reduce_handle = next(iter(step._handles.values()))
    words = step.values.tolist()
    say(f"reduce kernel: {len(words)} parameter words, grid {step.grid}, block {step.block}")

    k1 = _empty_kernel(cuda, "void(int64)", 1)
    k31 = _empty_kernel(cuda, "void(" + ", ".join(["int64"] * 31) + ")", 31)
    sig = "void(float32[::1], int64, int64, float32[::1], float32[::1], int64, int32[::1])"
    karr = _empty_kernel(cuda, sig, 7)
    kernels = [
        ("empty(1 int)", _handle(k1), Params([7])),
        ("empty(31 ints)", _handle(k31), Params(list(range(31)))),
        ("empty(4 arrays + 3 ints)", _handle(karr), Params(words)),
        ("reduce kernel", reduce_handle, Params(words)),
    ]
    err, nb_stream = cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
    streams = [("default stream", 0), ("non-blocking stream", nb_stream)]

    def launcher(handle, params, stream):
        def launch():
            cu.cuLaunchKernel(handle, 1, 1, 1, 256, 1, 1, 0, stream, params.address, 0)
        return launch

    def sync_all():
        sync()
        cu.cuStreamSynchronize(nb_stream)

    for label, handle, params in kernels:
        for sname, stream in streams:
            us = burst_us(launcher(handle, params, stream), sync_all)
            say(f"  {label:26s} {sname:20s} {us:6.2f} us")

    # the same launch through ctypes, into libcuda directly
    libcuda = ctypes.CDLL("libcuda.so.1")
    launch_c = libcuda.cuLaunchKernel
    launch_c.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 6 + [
        ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    for label, handle, params in (kernels[0], kernels[3]):
        h = int(handle)
        us = burst_us(lambda: launch_c(h, 1, 1, 1, 256, 1, 1, 0, None, params.address, None),
                      sync_all)
        say(f"  {label:26s} {'ctypes, default':20s} {us:6.2f} us")

    # the same call compiled: a Numba njit function calling cuLaunchKernel through
    # a ctypes function pointer (no per-argument conversion in Python)
    from numba import njit

    u64, u32 = ctypes.c_uint64, ctypes.c_uint
    proto = ctypes.CFUNCTYPE(ctypes.c_int, u64, u32, u32, u32, u32, u32, u32, u32, u64, u64, u64)
    launch_fp = proto(("cuLaunchKernel", libcuda))

    @njit
    def nj_launch(f, grid, block, stream, params):
        return launch_fp(f, grid, 1, 1, block, 1, 1, 0, stream, params, 0)

    for label, handle, params in (kernels[0], kernels[3]):
        h, a = int(handle), params.address
        nj_launch(h, 1, 256, 0, a)
        us = burst_us(lambda: nj_launch(h, 1, 256, 0, a), sync_all)
        say(f"  {label:26s} {'njit + ctypes ptr':20s} {us:6.2f} us")

    @njit
    def nj_noop(f, grid, block, stream, params):
        return 0

    h, a = int(kernels[3][1]), kernels[3][2].address
    say(f"  {'njit call of 5 ints, no launch (floor)':47s} "
        f"{burst_us(lambda: nj_noop(h, 1, 256, 0, a), sync_all):6.2f} us")

    # Python's own floor: a call into cuda.bindings that does no work on the GPU
    say(f"  {'cuCtxGetDevice (binding floor)':47s} "
        f"{burst_us(cu.cuCtxGetDevice, sync_all):6.2f} us")

    # the peers' launch paths
    raw = cp.RawKernel(r'extern "C" __global__ void k(long long a) {}', "k")
    raw((1,), (256,), (np.int64(7),))
    say(f"  {'cupy RawKernel empty(1 int)':47s} "
        f"{burst_us(lambda: raw((1,), (256,), (np.int64(7),)), sync_all):6.2f} us")
    say(f"  {'cupy x.max() (whole call)':47s} {burst_us(x.max, sync_all):6.2f} us")
    try:
        import torch

        xt = torch.as_tensor(x, device="cuda")
        say(f"  {'torch xt.max() (whole call)':47s} {burst_us(xt.max, sync_all):6.2f} us")
    except ImportError:
        pass
    say(f"  {'pyreduce.max(x, device_result=True)':47s} "
        f"{burst_us(lambda: pyreduce.max(x, device_result=True), sync_all):6.2f} us")

    # GPU time per kernel, back to back, by events
    for label, handle, params in kernels:
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        fn = launcher(handle, params, 0)
        for _ in range(100):
            fn()
        start.record()
        for _ in range(2000):
            fn()
        stop.record()
        stop.synchronize()
        gpu = cp.cuda.get_elapsed_time(start, stop) * 1e3 / 2000
        say(f"  {label:26s} back to back: {gpu:6.2f} us per kernel (events; the host's pace)")
    pool.append(ws)
    if args.out:
        write(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
