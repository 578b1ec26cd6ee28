"""Where a repeated call's host time goes before its kernel starts, for pyreduce,
with PyTorch's call beside it: the microseconds from the call's start to the
express runner (:mod:`pyreduce.backends.express`), to the result's memory
reserved, to the first launch and its return, and to the call's return; then
the call's time to a ready result and the GPU's span from an event recorded
before the call to one after it (the GPU waits for the launch, so the span
holds the host's time before it), for both libraries. Calls of 2**24 elements
(CuPy arrays, PyTorch a zero-copy tensor of them; the cases marked ``torch``
give pyreduce the tensor, bfloat16 among them), each stage the median of 600
calls, after a synchronisation (``sync``: as a call timed to its ready result
starts) and in bursts of 32 (``burst``).

    NUMBA_ENABLE_CUDASIM=0 python bench/call_stages.py

``docs/performance/call-stages-h200.txt`` is its output on an H200.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _report import has_cuda  # noqa: E402

CASES = [("sum", "float32", "cupy"), ("max", "int32", "cupy"), ("mean", "float32", "cupy"),
         ("mean", "float16", "cupy"), ("argmax", "float32", "cupy"), ("sum", "float64", "cupy"),
         ("sum", "float16", "torch"), ("sum", "bfloat16", "torch"), ("mean", "bfloat16", "torch")]
N = 2**24
STAGES = ("express", "made", "launch", "launched")


def main() -> int:
    if not has_cuda():
        raise SystemExit("call_stages.py needs a CUDA GPU (and NUMBA_ENABLE_CUDASIM unset or 0)")
    import cupy as cp
    import torch

    from _timing import ready_span_us, steady_gpu

    import pyreduce
    from pyreduce import callmemo
    from pyreduce.backends import fastpath as fp

    steady_gpu()
    sync = cp.cuda.Device().synchronize
    marks: dict = {}

    def stamp(name):
        marks[name] = time.perf_counter()

    real_launch = fp.launch

    def launch(*args):
        if "launch" not in marks:
            stamp("launch")
        r = real_launch(*args)
        if "launched" not in marks:
            stamp("launched")
        return r

    class Reserved:  # the runner's result maker, stamped when the memory is reserved
        def __init__(self, inner):
            self.inner = inner

        def reserve(self, *args):
            r = self.inner.reserve(*args)
            stamp("made")
            return r

        def array(self, *args):
            return self.inner.array(*args)

    for fn, dt, kind in CASES:
        if dt == "bfloat16":
            t = torch.rand(N, device="cuda").to(torch.bfloat16)
        else:
            x = (cp.arange(N, dtype=cp.int32) if dt == "int32" else
                 cp.asarray(np.random.default_rng(0).random(N).astype(dt)))
            t = torch.as_tensor(x, device="cuda")
        if kind == "torch":  # pyreduce given the tensor: a PyTorch result
            x = t
        f = getattr(pyreduce, fn)
        peer = {"sum": t.sum, "mean": t.mean, "argmax": t.argmax, "max": t.max}[fn]
        callmemo.clear()
        for _ in range(300):
            f(x)
            peer()
        sync()
        (entry,) = callmemo._MEMO._data.values()
        runner, maker = entry.run, entry.run.new

        def run(info, device_result, runner=runner):
            stamp("express")
            return runner(info, device_result)

        entry.run, runner.new, fp.launch = run, Reserved(maker), launch
        rows: dict = {"sync": [], "burst": []}
        for regime in rows:
            for i in range(600):
                if regime == "sync" or i % 32 == 0:
                    sync()
                marks.clear()
                t0 = time.perf_counter()
                f(x)
                t1 = time.perf_counter()
                rows[regime].append([(marks[m] - t0) * 1e6 for m in STAGES] + [(t1 - t0) * 1e6])
        entry.run, runner.new, fp.launch = runner, maker, real_launch
        sync()
        ready, span = ready_span_us(lambda: f(x))
        peer_ready, peer_span = ready_span_us(peer)
        for regime, found in rows.items():
            m = np.median(np.array(found), axis=0)
            print(f"{fn} {dt} {kind} {regime:5s}: express at {m[0]:.1f}  reserved {m[1]:.1f}  "
                  f"launch at {m[2]:.1f}  launched {m[3]:.1f}  return {m[4]:.1f} us", flush=True)
        print(f"{fn} {dt} {kind} ready {ready:.1f} span {span:.1f} | torch ready {peer_ready:.1f} "
              f"span {peer_span:.1f}", flush=True)
    return 0



if __name__ == "__main__":
    sys.exit(main())
