"""Measuring the host-input cost model (:mod:`pyreduce.costmodel`) of a machine.

:func:`model` gives the numbers for the GPU a call would use: the ones recorded
in the tuning store, else (the first host-array call with ``backend="auto"`` on
a machine) a quick measurement of the numbers that need no compiled kernel: the
pinned copy to the device, the host threads' copy into pinned memory, the
host's cost of each chunk (one chunk through the staging slots) and the cpu
backend's built-in rate, some 20-50 ms of work, recorded for later
processes. Until ``python -m pyreduce tune`` (:func:`pyreduce.tuning.calibrate`)
measures the rest, which take compiles, the GPU path's fixed cost per call and
reduction rate keep :data:`pyreduce.costmodel.DEFAULTS`, and the cpu backend's fold of a
user's op is taken to fold a float64 per 8 bytes of the built-in rate on all
threads and at a quarter of it on one (where it keeps one dependency chain per
stream and no SIMD: on a 2-core host it took about 4 times NumPy's ``max``).
"""

from __future__ import annotations

import datetime
import os
import threading
import time

import numpy as np

from . import costmodel, tuned
from .backends import get, staging
from .backends.cpu_parallel import SPLIT_BYTES
from .ops import as_monoid

__all__ = ["model", "machine", "forget", "remember", "cheap_numbers", "best_seconds", "slope",
           "SAMPLE_BYTES", "CPU_SAMPLE_BYTES"]

#: Bytes of the arrays the copies are timed on (twice a staging slot: two
#: chunks in flight).
SAMPLE_BYTES = 16 << 20
#: Bytes of the array the cpu backend's rates are timed on: on 16 cores, 16 MiB
#: gave each thread so little that its rates came out 2-7 times below those of
#: 1e8 elements, and ``auto`` sent a float32 lambda to a 4-8 times slower GPU path.
CPU_SAMPLE_BYTES = 64 << 20
#: Timed repeats; the fastest counts.
REPEATS = 3

_models: dict = {}
_lock = threading.Lock()
#: How many times this process's models were recorded or forgotten
#: (:func:`changes`)
_changes = 0


#: How the numbers are measured; models recorded another way are measured again.
#: 2: per-element rates from the difference of two sizes (:func:`slope`);
#: 3: the cpu backend's rates on :data:`CPU_SAMPLE_BYTES`. (A model recorded
#: before the GPU path's cost per chunk was measured takes its default.)
METHOD = 3


def machine(backend) -> str:
    """The tuning store's name for this machine's model: the GPU, the host's
    cores and :data:`METHOD`."""
    return f"{tuned.device_label(backend.quiet_device())}|{os.cpu_count()} cpus|method {METHOD}"


def model(backend) -> costmodel.HostModel:
    """The cost model of this machine with ``backend``'s current GPU: recorded,
    else measured quickly now (and recorded), else the defaults."""
    key = machine(backend)
    found = _models.get(key)
    if found is not None:
        return found
    with _lock:
        found = _models.get(key)
        if found is None:
            recorded = tuned.host_model(key)
            if recorded is not None:
                found = costmodel.HostModel.from_dict(recorded)
            else:
                found = _quick(backend, key)
            _models[key] = found
    return found


def forget() -> None:
    """Drop the models this process has read (the store keeps them)."""
    global _changes
    with _lock:
        _models.clear()
        _changes += 1


def changes() -> int:
    """A number that changes whenever a model this process uses may have: one
    recorded (:func:`remember`) or the models forgotten (:func:`forget`)."""
    return _changes


def remember(backend, found: costmodel.HostModel) -> None:
    """Record ``found`` as this machine's model, on disk and in this process."""
    global _changes
    tuned.save_host_model(machine(backend), found.as_dict())
    with _lock:
        _models[machine(backend)] = found
        _changes += 1


def _quick(backend, key: str) -> costmodel.HostModel:
    try:
        found = costmodel.HostModel.from_dict(
            dict(cheap_numbers(backend), source=f"quick {datetime.date.today().isoformat()}"))
    except Exception as exc:  # a failed measurement must not fail the user's call
        import warnings

        warnings.warn(f"pyreduce: could not measure the host-input cost model ({exc}); "
                      "using defaults", stacklevel=4)
        return costmodel.DEFAULTS
    try:
        tuned.save_host_model(key, found.as_dict())
    except OSError:
        pass  # a read-only cache: measured again by the next process
    return found


def slope(seconds, n: int) -> float:
    """Seconds per element of a call whose time for ``k`` elements is
    ``seconds(k)``: the difference between ``n`` and ``n // 2`` elements, so that
    what a call costs whatever its size (the thread pool's split and join) does
    not count per element: at the sample's 2 million float64 elements that was
    most of a parallel fold's time, which then looked 5 times slower per element
    than it is at 1e8. The plain average where noise makes the difference
    meaningless."""
    full, half = seconds(n), seconds(n // 2)
    per = (full - half) / (n - n // 2)
    return per if 0 < per <= full / (n - n // 2) else full / n


def best_seconds(fn, repeats: int = REPEATS) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def cheap_numbers(backend) -> dict:
    """The numbers measured without a compiled kernel, in 1e9 bytes/s."""
    src = np.ones(SAMPLE_BYTES // 8)
    out = {}
    with staging.stager(backend) as st:
        slot = st.slot_bytes
        one = src[: slot // 8]  # what one slot holds of the sample

        def send():
            for k in range(staging.SLOTS):
                st.device[k].copy_to_device(st.pinned[k], stream=st.copy_stream)
            st.copy_stream.synchronize()

        def stage():
            st.stage(one, 0, one.size, 0)

        out["h2d_GBps"] = staging.SLOTS * slot / best_seconds(send) / 1e9
        out["stage_GBps"] = one.nbytes / best_seconds(stage) / 1e9
        # one smallest chunk through the slots, less the time of its bytes: what
        # every chunk costs the host beyond its copies
        chunk = src[: staging.MIN_CHUNK_BYTES // 8]
        bytes_s = chunk.nbytes / (out["h2d_GBps"] * 1e9) + chunk.nbytes / (out["stage_GBps"] * 1e9)
        out["gpu_chunk_us"] = max(0.0, best_seconds(lambda: st.upload(chunk)) - bytes_s) * 1e6
    out.update(_cpu_builtin(np.ones(CPU_SAMPLE_BYTES // 8)))
    return out


def _cpu_builtin(src: np.ndarray) -> dict:
    cpu = get("cpu")
    add = as_monoid("add", src.dtype)
    serial = src[: SPLIT_BYTES // src.itemsize - 1]  # one piece: one thread
    tiny = src[:8]
    parallel_GBps = src.itemsize / slope(
        lambda k: best_seconds(lambda: cpu.reduce(src[:k], add)), src.size) / 1e9
    serial_GBps = serial.nbytes / best_seconds(lambda: cpu.reduce(serial, add)) / 1e9
    return {
        "cpu_GBps": parallel_GBps, "cpu_serial_GBps": serial_GBps,
        "cpu_user_ns": 8 / parallel_GBps, "cpu_user_serial_ns": 4 * 8 / serial_GBps,
        "cpu_call_us": best_seconds(lambda: cpu.reduce(tiny, add), 50) * 1e6,
    }
