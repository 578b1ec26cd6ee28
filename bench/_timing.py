"""The benchmarks' one timer module: every way a study times a call.

* :func:`device_seconds`: GPU time per call, CUDA events with the GPU held (the
  autotuner's timer), and :func:`copy_GBps` / :func:`copy_ceiling` on it;
* :func:`piped_seconds`: time per call of calls queued back to back, from CUDA
  events (device-bound or host-bound, as a loop that never waits is);
* :func:`host_seconds`: the median of rounds of the mean wall time per call;
* :func:`interleaved_seconds`: the same for calls of several libraries taking
  turns on a warm GPU (:func:`interleaved_rounds`: each round's times);
* :func:`wall_seconds` and :func:`median_seconds`: the median of single timed
  calls after an untimed one (what a call that compiles first, or a Dask
  compute, is timed by);
* :func:`per_call_us` and :func:`burst_us`: the host's cost of a call, the best
  of rounds or the median over bursts that never fill the GPU's queue;
* :func:`ready_span_us`: a call's time to a ready result and the GPU's span
  around it, from CUDA events;
* :func:`fresh_process`: a command in a new process, timed from outside;
* :func:`steady_gpu`: the GPU's clocks up and pyreduce's launch path in its
  steady state, before a study times its first case.
"""

import subprocess
import time

import numpy as np


def device_seconds(fn, reps=20, batches=5, hold=True):
    """Median over batches of the mean device time per call, from CUDA events, with
    the GPU held while the calls are queued (the autotuner's timer)."""
    from pyreduce.tuning import device_seconds as timer

    return timer(fn, reps, batches, hold)


def piped_seconds(fn, calls: int = 20, rounds: int = 7) -> float:
    """Median over rounds of the time per call of ``calls`` calls queued back to
    back as fast as the host makes them, from CUDA events (CuPy's) on the
    current stream: the device's time where the GPU bounds the calls, the
    host's where the host does (what a loop of calls that never wait gets)."""
    import cupy as cp

    for _ in range(5):
        fn()
    cp.cuda.Device().synchronize()
    start, stop, times = cp.cuda.Event(), cp.cuda.Event(), []
    for _ in range(rounds):
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / calls)
    return float(np.median(times))


def steady_gpu(seconds: float = 1.0) -> None:
    """Before the first timed case: keep the GPU busy for ``seconds`` (its clocks
    rise from idle) and move pyreduce's launch path to its compiled form, as a
    long-running process has it (:func:`pyreduce.backends.fastpath.launch`: it
    takes a fraction of a second once, which inside a timed case would be that
    case's)."""
    import cupy as cp

    import pyreduce
    from pyreduce.backends import fastpath

    x = cp.ones(2**24, dtype=cp.float32)
    fastpath.use_compiled_launch()
    for _ in range(10):
        pyreduce.sum(x[:1024])
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        x.sum()
        cp.cuda.Device().synchronize()


def copy_GBps(src, dst, reps=10) -> float:
    """GB/s of the device-to-device copy of the CuPy array ``src`` into ``dst``,
    read + write bytes."""
    import cupy as cp

    seconds = device_seconds(lambda: cp.copyto(dst, src), reps=reps)
    return 2 * src.nbytes / seconds / 1e9


def copy_ceiling(n: int = 2**28, reps: int = 10) -> float:
    """GB/s of a device-to-device copy of ``n`` float32, read + write bytes: the
    bandwidth the memory sustains."""
    import cupy as cp

    src = cp.ones(n, dtype=cp.float32)
    dst = cp.empty_like(src)
    return copy_GBps(src, dst, reps)


def host_seconds(fn, calls=200, rounds=5, min_seconds=0.0):
    """Median over rounds of the mean wall time of a call that returns to the host.
    With ``min_seconds``, a round makes more than ``calls`` calls (up to 20 times
    as many) where ``calls`` would take less: a round of microsecond calls then
    spans the pauses (garbage collection, deferred frees) that a short one
    catches or misses by chance."""
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


def interleaved_seconds(fns: dict, calls=10, rounds=7, warm_seconds=0.05) -> dict:
    """``{name: seconds}``: the median over rounds of each call's mean wall time
    (:func:`interleaved_rounds`)."""
    return {name: float(np.median(t))
            for name, t in interleaved_rounds(fns, calls, rounds, warm_seconds).items()}


def interleaved_rounds(fns: dict, calls=10, rounds=7, warm_seconds=0.05) -> dict:
    """``{name: [seconds of each round]}``: each call's mean wall time in every
    round, the calls of ``fns`` taking turns within every round (the first to go
    changing from round to round), after each has run for ``warm_seconds``. A
    call timed alone after seconds of host work (drawing the next case's data)
    would run on a GPU whose clocks had dropped, and the first library timed
    would pay for it; taking turns gives every library the same GPU, and the
    times of one round may be compared as a pair."""
    names = list(fns)
    if not names:
        return {}
    count = {}
    for name in names:
        t0 = time.perf_counter()
        fns[name]()
        made = 1
        while time.perf_counter() < t0 + warm_seconds:
            fns[name]()
            made += 1
        each = (time.perf_counter() - t0) / made
        # a slow call (tens of milliseconds) is timed fewer times a round
        count[name] = max(1, min(calls, int(warm_seconds / each)))
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            for _ in range(count[name]):
                fns[name]()
            times[name].append((time.perf_counter() - t0) / count[name])
    return times


def ready_span_us(call, events: str = "cupy", reps: int = 300) -> tuple:
    """Medians of a call's time to a ready result (after a synchronisation, to
    the end of an event recorded after it) and of the GPU's span between
    events recorded before and after it (it holds the host's time before the
    launch, which the GPU waits for), in us: CuPy's events on its current
    stream, or PyTorch's on its own (``events="torch"``)."""
    if events == "torch":
        import torch

        stream, sync = torch.cuda.current_stream(), torch.cuda.synchronize
        e0, e1 = (torch.cuda.Event(enable_timing=True) for _ in range(2))

        def elapsed_ms():
            return e0.elapsed_time(e1)
    else:
        import cupy as cp

        stream, sync = cp.cuda.get_current_stream(), cp.cuda.Device().synchronize
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()

        def elapsed_ms():
            return cp.cuda.get_elapsed_time(e0, e1)
    ready, span = [], []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        e0.record(stream)
        call()
        e1.record(stream)
        e1.synchronize()
        ready.append((time.perf_counter() - t0) * 1e6)
        span.append(elapsed_ms() * 1e3)
    return float(np.median(ready)), float(np.median(span))


def median_seconds(fn, reps: int) -> float:
    """The median wall time of ``reps`` calls of ``fn``, each timed on its own."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def wall_seconds(fn, budget: float = 1.0, most: int = 25) -> float:
    """The median wall time of repeated calls of ``fn`` after one untimed call
    (which compiles), as many as fit ``budget`` seconds (3 at least)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    return median_seconds(fn, max(3, min(most, int(budget / max(first, 1e-6)))))


def per_call_us(fn, calls=20000) -> float:
    """Microseconds per call of ``fn``: the best of five rounds of back-to-back
    calls, after one untimed call."""
    fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls // 5):
            fn()
        best = min(best, (time.perf_counter() - t0) / (calls // 5))
    return best * 1e6


def burst_us(fn, sync, burst: int = 32, rounds: int = 300) -> float:
    """Host microseconds per call of ``fn`` in bursts of ``burst`` calls, short
    enough that the GPU's launch queue never fills (``sync()`` waits for the
    device between bursts, off the clock): what issuing a call costs the host.
    The median over ``rounds``."""
    fn()
    sync()
    times = []
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        for _ in range(burst):
            fn()
        times.append((time.perf_counter() - t0) / burst)
    sync()
    return float(np.median(times)) * 1e6


def result_line(proc, wall: float, tail: int = 3) -> dict:
    """The JSON a finished process printed on its ``RESULT`` line, with its
    ``process_seconds`` (``wall``), or ``{"error": ...}`` with the last ``tail``
    lines of what it printed where there is none."""
    import json

    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            out = json.loads(line[len("RESULT "):])
            out["process_seconds"] = wall
            return out
    lines = (proc.stderr or proc.stdout).strip().splitlines()[-tail:]
    return {"error": " | ".join(lines), "returncode": proc.returncode}


def fresh_process(argv, env: dict, timeout: float, cwd: str):
    """``argv`` run in a new process: the finished process (its output captured
    as text) and the wall seconds it took, start to exit."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)
    return proc, time.perf_counter() - t0
