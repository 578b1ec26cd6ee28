"""Timing helpers shared by the benchmark files."""

import numpy as np


def device_seconds(fn, reps=20, batches=5, hold=True):
    """Median over batches of the mean device time per call, from CUDA events, with
    the GPU held while the calls are queued (the autotuner's timer)."""
    from pyreduce.tuning import device_seconds as timer

    return timer(fn, reps, batches, hold)


def host_seconds(fn, calls=200, rounds=5):
    """Median over rounds of the mean wall time of a call that returns to the host."""
    import time

    fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return float(np.median(times))


def record(benchmark, nbytes, seconds, **info):
    benchmark.extra_info.update(info)
    benchmark.extra_info["bytes"] = nbytes
    if seconds is not None:
        benchmark.extra_info["device_us"] = seconds * 1e6
        benchmark.extra_info["GBps"] = nbytes / seconds / 1e9
