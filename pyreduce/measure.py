"""Timing a callable's work: GPU time with the GPU held, or wall-clock time.

Shared by the pytest fixture (:mod:`pyreduce.pytest_plugin`) and ``python -m
pyreduce bench``. On a CUDA GPU a *round* is :func:`pyreduce.tuning.device_seconds`
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

__all__ = ["GPU_TIMER", "WALL_TIMER", "gpu_name", "cpu_name", "timing_for", "rounds"]

#: How each kind of timing is described in results (``timer`` fields).
GPU_TIMER = ("CUDA events around back-to-back calls queued while the GPU is held "
             "(pyreduce.tuning.device_seconds)")
WALL_TIMER = "wall clock (no CUDA GPU in this process: host time, not GPU time)"


def gpu_name() -> str | None:
    """The current CUDA GPU's name, or None without one (or in the simulator)."""
    import pyreduce

    if "cuda" not in pyreduce.available():
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
        from .tuning import device_seconds

        return device_seconds(fn, reps, 1, hold)
    return _wall_round(fn, reps)


def rounds(fn, timing: str, reps: int = 20, count: int = 5, hold: bool = True) -> list:
    """Seconds per call of ``fn`` in each of ``count`` rounds (see the module)."""
    if reps < 1 or count < 1:
        raise ValueError(f"reps and rounds must be at least 1, got {reps} and {count}")
    return [one_round(fn, timing, reps, hold) for _ in range(count)]


def median(samples) -> float:
    return float(statistics.median(samples))
