"""What the bare-call lookup (:mod:`pyreduce.plaincalls`) saves a repeat: for
``sum``, ``mean``, ``var``, ``argmax`` and ``max`` of 2**24-element CuPy arrays
(float32, float64) and PyTorch tensors (bfloat16, float32), the host's time per
call (bursts of 32 that never fill the launch queue) and the time to a ready
result (each call waited for), with the lookup switched off and on in turns in
one process (three rounds, the median), and the peer's own call's time to a
ready result beside them (CuPy's ``x.sum()``, PyTorch's ``torch.sum(t)``, ...).

    NUMBA_ENABLE_CUDASIM=0 python bench/bare_calls.py

``docs/performance/bare-calls-h100.txt`` is its output on an H100.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _report import has_cuda  # noqa: E402
from _timing import burst_us, median_seconds, steady_gpu  # noqa: E402

N = 2**24
FUNCTIONS = ("sum", "mean", "var", "argmax", "max")
ROUNDS = 3


def ready_us(fn, sync, calls: int = 200) -> float:
    """The median microseconds of single calls of ``fn``, each waited for (the
    GPU idle at each call's start: the call before was waited for)."""
    sync()
    return median_seconds(lambda: (fn(), sync()), calls) * 1e6


def main() -> int:
    if not has_cuda():
        raise SystemExit("bare_calls.py needs a CUDA GPU (and NUMBA_ENABLE_CUDASIM unset or 0)")
    import cupy as cp
    import torch

    import pyreduce
    from pyreduce import callmemo, plaincalls

    steady_gpu()
    sync = cp.cuda.Device().synchronize
    lookup = plaincalls.run

    def switched(on: bool) -> None:
        plaincalls.run = lookup if on else (lambda *args: callmemo.MISS)

    x32 = cp.random.rand(N, dtype=cp.float32)
    torch_peer = {"sum": torch.sum, "mean": torch.mean, "argmax": torch.argmax,
                  "var": lambda t: torch.var(t, correction=0), "max": torch.amax}
    arrays = [("cupy float32", x32), ("cupy float64", cp.random.rand(N, dtype=cp.float64)),
              ("torch bfloat16", torch.rand(N, device="cuda").to(torch.bfloat16)),
              ("torch float32", torch.as_tensor(x32, device="cuda"))]
    print(f"# bench/bare_calls.py on {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}"
          f", 2**24 elements; microseconds, lookup off -> on")
    try:
        for label, a in arrays:
            for name in FUNCTIONS:
                f = getattr(pyreduce, name)

                def call(f=f, a=a):
                    return f(a)

                times = {False: [], True: []}
                for _ in range(ROUNDS):
                    for on in (False, True):
                        switched(on)
                        times[on].append((burst_us(call, sync, rounds=10), ready_us(call, sync)))
                switched(True)
                host = [float(np.median([t[0] for t in times[on]])) for on in (False, True)]
                ready = [float(np.median([t[1] for t in times[on]])) for on in (False, True)]
                peer = getattr(a, name) if label.startswith("cupy") else \
                    (lambda g=torch_peer[name], a=a: g(a))
                print(f"{label:<15} {name:<7} host {host[0]:6.2f} -> {host[1]:6.2f}   "
                      f"ready {ready[0]:7.2f} -> {ready[1]:7.2f}   "
                      f"peer ready {ready_us(peer, sync):8.2f}", flush=True)
    finally:
        switched(True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
