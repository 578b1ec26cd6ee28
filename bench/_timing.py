"""Timing helpers shared by the benchmark files."""

import numpy as np


def device_seconds(fn, reps=20, batches=5, hold=True):
    """Median over batches of the mean device time per call, from CUDA events, with
    the GPU held while the calls are queued (the autotuner's timer)."""
    from pyreduce.tuning import device_seconds as timer

    return timer(fn, reps, batches, hold)


def host_seconds(fn, calls=200, rounds=5, min_seconds=0.0):
    """Median over rounds of the mean wall time of a call that returns to the host.
    With ``min_seconds``, a round makes more than ``calls`` calls (up to 20 times
    as many) where ``calls`` would take less: a round of microsecond calls then
    spans the pauses (garbage collection, deferred frees) that a short one
    catches or misses by chance."""
    import time

    fn()
    if min_seconds:
        t0 = time.perf_counter()
        for _ in range(10):
            fn()
        each = max((time.perf_counter() - t0) / 10, 1e-9)
        calls = max(calls, min(20 * calls, int(min_seconds / each)))
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return float(np.median(times))
