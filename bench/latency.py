"""Where a small reduction's host time goes, on a GPU.

    python bench/latency.py            # float32 max of 2**10 elements, CuPy input

Times the whole call next to CuPy's and PyTorch's (the best of three interleaved
rounds), with and without :mod:`pyreduce.callmemo`, then each stage of pyreduce's
call path on its own, then a cProfile of many calls (the functions that take the
most time, themselves).
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _timing import burst_us as _burst_us, per_call_us  # noqa: E402


def burst_us(fn, cp) -> float:
    """Host microseconds per call of ``fn`` in bursts of 32 (:func:`_timing.burst_us`),
    the device synchronized between bursts."""
    return _burst_us(fn, cp.cuda.Device().synchronize, 32, 300)


def _full_path(fn):
    """``fn`` with :mod:`pyreduce.callmemo` bypassed: every call decides afresh."""
    from pyreduce import callmemo

    def call():
        run, callmemo.run = callmemo.run, lambda *a: callmemo.MISS
        try:
            return fn()
        finally:
            callmemo.run = run

    return call


def main(n: int = 2**10) -> None:
    import cupy as cp
    from numba import cuda

    import pyreduce
    from pyreduce import backends
    from pyreduce.prepared import prepare
    from pyreduce.backends import results
    from pyreduce.interop import inspect
    from pyreduce.ops import as_monoid

    x = cp.random.default_rng(0).standard_normal(n, dtype=cp.float32)
    xd = cuda.as_cuda_array(x)
    xt = None
    try:
        import torch

        xt = torch.as_tensor(x, device="cuda")
    except ImportError:
        pass
    rows = [
        ("pyreduce.max(cupy) -> host", lambda: pyreduce.max(x, device_result=False)),
        ("pyreduce.max(numba) -> host", lambda: pyreduce.max(xd)),
        ("pyreduce.max(cupy) -> device", lambda: pyreduce.max(x, device_result=True)),
        ("pyreduce.max(numba) -> device", lambda: pyreduce.max(xd, device_result=True)),
        ("  the same, not as repeat calls:", None),
        ("pyreduce.max(cupy) -> host",
         _full_path(lambda: pyreduce.max(x, device_result=False))),
        ("pyreduce.max(cupy) -> device", _full_path(lambda: pyreduce.max(x, device_result=True))),
        ("cupy x.max() -> host", lambda: x.max().item()),
        ("cupy x.max() -> device", lambda: x.max()),
        ("cupy.empty(()) alone", lambda: cp.empty((), dtype=x.dtype)),
        ("cupy 0-d result on a slab alone", lambda: results.cupy_result((), x.dtype, 0, 0)),
        ("numba cuda.device_array(()) alone", lambda: cuda.device_array((), dtype=x.dtype)),
    ]
    if xt is not None:
        rows += [("torch xt.max() -> host", lambda: xt.max().item()),
                 ("torch xt.max() -> device", lambda: xt.max())]
    timed = [(name, fn) for name, fn in rows if fn is not None]
    best: dict = {}
    for _ in range(3):  # interleaved rounds, the best of each: drift favours none
        for i, (_, fn) in enumerate(timed):
            best[i] = min(best.get(i, float("inf")), per_call_us(fn))
    i = 0
    for name, fn in rows:
        if fn is None:
            print(name)
            continue
        print(f"{name:34s} {best[i]:7.2f} us", flush=True)
        i += 1

    # the stages of pyreduce's path, each on its own
    info = inspect(x)
    monoid = as_monoid("max", info.dtype)
    be = backends.get("auto", on_device=True)
    call = prepare(info, monoid, None, "auto", pyreduce.Tuning(), None)
    exe = be.executable(call.plan, monoid, call.device)
    stages = [
        ("inspect (read the CuPy array)", lambda: inspect(x)),
        ("as_monoid", lambda: as_monoid("max", info.dtype)),
        ("backends.get", lambda: backends.get("auto", on_device=True)),
        ("backend.device", lambda: be.device(None)),
        ("prepare (all of the above + plan)", lambda: prepare(info, monoid, None, "auto",
                                                              pyreduce.Tuning(), None)),
        ("executable: launch + read result", lambda: exe(call.flat, call.stream)),
    ]
    for name, fn in stages:
        print(f"  {name:40s} {per_call_us(fn):7.2f} us", flush=True)

    # the launch alone (no result read), and results read by copy or by mapping
    from pyreduce.backends import fastpath

    pool, ws = exe._workspace(call.stream)
    step, dst = ws.steps[0], ws.buffers["result"]
    launch = per_call_us(lambda: step(call.flat, dst, call.stream))
    cp.cuda.Device().synchronize()
    print(f"  {'one launch (cuLaunchKernel), no sync':40s} {launch:7.2f} us "
          "(back to back: the GPU's pace once its queue is full)")
    print(f"  {'the same, host time of bursts of 32':40s} "
          f"{burst_us(lambda: step(call.flat, dst, call.stream), cp):7.2f} us")
    print(f"  {'cupy x.max() -> device, bursts of 32':40s} {burst_us(x.max, cp):7.2f} us")
    pool.append(ws)
    for mapped in (True, False):
        fastpath.MAPPED_RESULTS = mapped
        pyreduce.cache_clear()
        pyreduce.max(x)
        how = "mapped pinned result + sync" if mapped else "device result + cuMemcpyDtoH"
        print(f"  {how:40s} {per_call_us(lambda: pyreduce.max(x)):7.2f} us (whole call)")
    fastpath.MAPPED_RESULTS = True
    pyreduce.cache_clear()

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20000):
        pyreduce.max(x)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2**10)
