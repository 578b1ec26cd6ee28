"""Where a whole-array call's time goes, for pyreduce and its peers: the host's
cost of issuing the call, the wall time to a ready result, and the device time
of calls back to back, for the named reductions of :mod:`targets` at one size.

    NUMBA_ENABLE_CUDASIM=0 python bench/call_cost.py --log2 24 --out cost.json
    NUMBA_ENABLE_CUDASIM=0 python bench/call_cost.py --profile mean mean:float16  # cProfile

A call timed to its ready result (``bench/targets.py``) costs about its host
time before the launch, then the kernel, then the wait; at 2**24 the kernels
take about half of it. Columns, each the same calls of the same data as
``bench/targets.py`` (device results, CuPy arrays; bfloat16 as PyTorch
tensors):

* ``host``: host microseconds per call in bursts of 32 that never fill the
  GPU's queue (``_timing.burst_us``);
* ``ready``: microseconds per call to its result being ready (each call
  followed by a device synchronisation; the median of interleaved rounds, as
  ``bench/targets.py`` times it);
* ``device``: microseconds per call of calls queued back to back, from CUDA
  events (``_timing.piped_seconds``).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _report import meta, save  # noqa: E402
from _timing import burst_us, interleaved_seconds, piped_seconds, steady_gpu  # noqa: E402
from targets import DISTS, library_calls  # noqa: E402

#: the calls of the study: each kind of kernel once (plain, widening tuple,
#: moments, index, pair), float32, and the half-precision means
CASES = [("sum", "float32"), ("max", "float32"), ("mean", "float32"), ("var", "float32"),
         ("argmax", "float32"), ("minmax", "float32"), ("sum", "float64"),
         ("mean", "float64"), ("mean", "float16"), ("mean", "bfloat16"), ("max", "int32")]


def calls(fn: str, dtype: str, n: int) -> dict:
    """``{library: call}`` of ``fn`` on the data of ``bench/targets.py``, for
    the libraries that have it."""
    _, found = library_calls(fn, dtype, n, "gpu")
    return {lib: call for lib, call in found.items() if call is not None}


def measure(fn: str, dtype: str, n: int) -> dict:
    import cupy as cp

    sync = cp.cuda.Device().synchronize
    found = calls(fn, dtype, n)
    row = {"function": fn, "dtype": dtype, "n": n}
    for lib, call in found.items():
        each = _seconds(call, sync)
        # bursts that fit a second (CuPy's var of 2**28 elements takes 0.2 s a call)
        bursts = max(3, min(100, int(1.0 / (32 * each))))
        row[lib] = {"host_us": burst_us(call, sync, 32, bursts),
                    "device_us": piped_seconds(call, rounds=3 if each > 0.01 else 7) * 1e6}

    def ready(call):
        def timed():
            call()
            sync()
        return timed

    waits = interleaved_seconds({lib: ready(c) for lib, c in found.items()}, calls=5, rounds=7)
    for lib, seconds in waits.items():
        row[lib]["ready_us"] = seconds * 1e6
    cells = "  ".join(f"{lib} host {v['host_us']:6.1f} ready {v['ready_us']:6.1f} "
                      f"device {v['device_us']:6.1f}"
                      for lib, v in row.items() if isinstance(v, dict))
    print(f"{fn} {dtype} 2**{n.bit_length() - 1}: {cells}", flush=True)
    return row


def _seconds(call, sync) -> float:
    """One call's time to its ready result, after one untimed call."""
    call()
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    return time.perf_counter() - t0


def profile(fn: str, dtype: str, n: int, count: int = 5000) -> None:
    """The functions that take the most host time, themselves, over ``count``
    calls of pyreduce's ``fn`` (the device synchronized every 32 calls)."""
    import cupy as cp

    call = calls(fn, dtype, n)["pyreduce"]
    for _ in range(50):
        call()
    cp.cuda.Device().synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for i in range(count):
        call()
        if i % 32 == 31:
            cp.cuda.Device().synchronize()
    prof.disable()
    print(f"--- cProfile of {count} calls of pyreduce.{fn}, {dtype} 2**{n.bit_length() - 1}")
    pstats.Stats(prof).sort_stats("tottime").print_stats(22)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log2", type=int, default=24)
    p.add_argument("--only", nargs="*", default=(), help="functions (all of CASES by default)")
    p.add_argument("--profile", nargs="*", default=None,
                   help="cProfile pyreduce's call of these functions instead (NAME or "
                        "NAME:DTYPE, float32 by default)")
    p.add_argument("--out", help="JSON of the rows")
    args = p.parse_args(argv)
    n = 2**args.log2
    steady_gpu()
    if args.profile is not None:
        for name in args.profile:
            fn, _, dtype = name.partition(":")
            profile(fn, dtype or "float32", n)
        return 0
    rows = [measure(fn, dt, n) for fn, dt in CASES if not args.only or fn in args.only]
    if args.out:
        save(args.out, {"meta": meta(DISTS), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
