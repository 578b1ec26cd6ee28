"""Timing a callable's work: GPU time with the GPU held, or wall-clock time.

Shared by the pytest fixture (:mod:`pyreduce.pytest_plugin`) and ``python -m
pyreduce bench``. On a CUDA GPU a *round* is :func:`device_seconds`
with one batch: CUDA events around ``reps`` back-to-back calls, queued while a
one-thread kernel holds the GPU (as NVIDIA's nvbench does), so that the events
time the GPU's work and not the host's pace of issuing it. Without a GPU (or in
the CUDA simulator) a round is the wall-clock mean of ``reps`` calls.

Nothing here imports numba-cuda until a GPU is asked about.
"""

from __future__ import annotations

import os
import platform
import statistics
import time

import numpy as np

from .backends import available

__all__ = ["GPU_TIMER", "WALL_TIMER", "gpu_name", "cpu_name", "timing_for", "rounds",
           "device_seconds", "wall_seconds"]

#: How each kind of timing is described in results (``timer`` fields).
GPU_TIMER = ("CUDA events around back-to-back calls queued while the GPU is held "
             "(pyreduce.tuning.device_seconds)")
WALL_TIMER = "wall clock (no CUDA GPU in this process: host time, not GPU time)"


def gpu_name() -> str | None:
    """The current CUDA GPU's name, or None without one (or in the simulator)."""
    if "cuda" not in available():
        return None
    from numba import cuda

    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else name


def cpu_name() -> str:
    """The host CPU, as results name a device: its architecture and core count."""
    return f"CPU ({platform.machine() or 'unknown'}, {os.cpu_count() or 1} cores)"


def timing_for(timer: str) -> tuple[str, str]:
    """``(timing, device)`` for ``timer`` (``"auto"``, ``"gpu"`` or ``"wall"``):
    ``"gpu"`` with the GPU's name, or ``"wall"`` with the CPU's."""
    if timer not in ("auto", "gpu", "wall"):
        raise ValueError(f"timer must be 'auto', 'gpu' or 'wall', got {timer!r}")
    gpu = None if timer == "wall" else gpu_name()
    if gpu is not None:
        return "gpu", gpu
    if timer == "gpu":
        raise RuntimeError("timer='gpu' needs a CUDA GPU, and this process has none "
                           "(or NUMBA_ENABLE_CUDASIM=1 is set)")
    return "wall", cpu_name()


def _wall_round(fn, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def one_round(fn, timing: str, reps: int, hold: bool = True) -> float:
    """Seconds per call of ``fn`` over one round of ``reps`` calls."""
    if timing == "gpu":
        return device_seconds(fn, reps, 1, hold)
    return _wall_round(fn, reps)


def rounds(fn, timing: str, reps: int = 20, count: int = 5, hold: bool = True) -> list:
    """Seconds per call of ``fn`` in each of ``count`` rounds (see the module)."""
    if reps < 1 or count < 1:
        raise ValueError(f"reps and rounds must be at least 1, got {reps} and {count}")
    return [one_round(fn, timing, reps, hold) for _ in range(count)]


def median(samples) -> float:
    return float(statistics.median(samples))


def device_seconds(fn, reps: int = 20, batches: int = 1, hold: bool = True) -> float:
    """Seconds per call of ``fn`` on the device: CUDA events around ``reps``
    back-to-back calls after a warm-up call, the median over ``batches``.

    With ``hold``, the GPU is held by a kernel that sleeps while the host queues
    the calls (as NVIDIA's nvbench does), so that the events time the GPU's work
    and not the pace at which the host issues it: a reduction of 2**24 float32
    takes about as long on an H100 as a Python call takes to issue it. A batch
    whose first event was reached before the last call was queued is timed once
    more with a hold four times as long, unless its first call outlasted the
    hold. A ``fn`` that waits for the GPU itself cannot be held: pass
    ``hold=False`` for one."""
    from numba import cuda

    fn()
    cuda.synchronize()
    t0 = time.perf_counter()
    fn()  # a warm call's host time sizes the hold
    issue = time.perf_counter() - t0
    cuda.synchronize()
    sleeps = int(2 * reps * issue * 1e6) + 100  # microseconds
    times = []
    for _ in range(batches):
        for _ in range(2 if hold else 1):
            start, stop = cuda.event(), cuda.event()
            if hold:
                _hold_kernel()[1, 1](sleeps)
            start.record()
            t0 = time.perf_counter()
            fn()
            waits = time.perf_counter() - t0 > sleeps * 1e-6  # fn synchronizes
            for _ in range(reps - 1):
                fn()
            stop.record()
            early = start.query()  # the GPU was already past the hold
            stop.synchronize()
            if not early or waits:
                break
            sleeps *= 4
        times.append(cuda.event_elapsed_time(start, stop) * 1e-3 / reps)
    return float(np.median(times))


_HOLD = None


def _hold_kernel():
    """A one-thread kernel that sleeps about one microsecond per count."""
    global _HOLD
    if _HOLD is None:
        from numba import cuda, uint32

        one_us = uint32(1000)

        @cuda.jit("void(int64)")
        def hold(count):
            for _ in range(count):
                cuda.nanosleep(one_us)

        _HOLD = hold
    return _HOLD


def wall_seconds(fn, reps: int) -> float:
    """Seconds per call of ``fn`` on the host's clock, after a warm-up call."""
    fn()
    return _wall_round(fn, reps)
