"""Where a host array is reduced on a GPU machine: on the GPU, streamed through
pinned buffers (:mod:`pyreduce.backends.staging`), or on the cpu backend.

``backend="auto"`` with a NumPy input asks :func:`choose` on every call. The
answer is a pure function of the call's size and kind and of a few numbers
measured once per machine (:class:`HostModel`), kept in the tuning store
(:mod:`pyreduce.tuning`):

* the GPU path costs a fixed ``gpu_call_us``, ``gpu_chunk_us`` for each chunk
  (the host's hand-offs, copy and launch calls and events: on an H100 machine
  some 0.4 ms a chunk, more than the chunk's copy), then its three stages (the
  host threads' copy into pinned memory, the copy to the device, the
  reduction) one after another for the first chunk and overlapped for the
  rest, at the pace of the slowest;
* the cpu backend costs a fixed ``cpu_call_us``, ``cpu_split_us`` more where it
  splits the input over its threads, and then a rate: bytes per second for the
  built-in ops (NumPy's loops, which memory bounds), nanoseconds per element
  for a user's op (the generated folds, which the op's dependency chain bounds),
  each on one thread below the size it splits at and on all of them above.

Without measurements (:data:`DEFAULTS`) the GPU side is assumed slow, so that a
machine not yet measured keeps host arrays on the host unless the GPU is far
ahead; :mod:`pyreduce.calibrate` measures the cheap numbers on first need and
the rest with ``python -m pyreduce tune``.

>>> m = HostModel(h2d_GBps=50, stage_GBps=50, gpu_GBps=3000, gpu_call_us=30,
...               gpu_chunk_us=20, cpu_GBps=10, cpu_serial_GBps=10, cpu_user_ns=1,
...               cpu_user_serial_ns=1, cpu_call_us=2, cpu_split_us=40)
>>> choose(m, 10**8, 8, user=False).path, choose(m, 1000, 8, user=False).path
('gpu', 'cpu')
"""

from __future__ import annotations

import dataclasses

__all__ = ["HostModel", "DEFAULTS", "Route", "choose", "gpu_seconds", "cpu_seconds"]


@dataclasses.dataclass(frozen=True)
class HostModel:
    """The measured numbers of one machine (rates in 1e9 bytes per second)."""

    #: pinned host memory to the device (the copy engine)
    h2d_GBps: float
    #: the user's array into pinned memory, by the host threads together
    stage_GBps: float
    #: a reduction of device memory on the device
    gpu_GBps: float
    #: the GPU path's fixed cost per call: launches, events, reading the result
    gpu_call_us: float
    #: the GPU path's host cost per chunk, beyond the time its bytes take
    gpu_chunk_us: float
    #: the cpu backend's built-in ops on all threads, and on one
    cpu_GBps: float
    cpu_serial_GBps: float
    #: the cpu backend's fold of a user's op, per element, on all threads and on one
    cpu_user_ns: float
    cpu_user_serial_ns: float
    #: the cpu backend's fixed cost per call, and its extra cost where it splits
    cpu_call_us: float
    cpu_split_us: float
    #: where the numbers come from: "defaults", "quick <date>" (measured on a
    #: first call) or "measured <date>" (python -m pyreduce tune)
    source: str = "defaults"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, found: dict) -> "HostModel":
        """A model from the store; unknown keys are ignored, missing ones are
        :data:`DEFAULTS`'."""
        names = {f.name for f in dataclasses.fields(cls)}
        return dataclasses.replace(DEFAULTS, **{k: v for k, v in found.items() if k in names})


#: A machine not measured yet: a slow copy and a slow-to-start GPU path, so that
#: the cpu backend keeps what it does about as fast.
DEFAULTS = HostModel(
    h2d_GBps=8.0, stage_GBps=8.0, gpu_GBps=500.0, gpu_call_us=200.0, gpu_chunk_us=400.0,
    cpu_GBps=10.0, cpu_serial_GBps=10.0, cpu_user_ns=1.0, cpu_user_serial_ns=1.0,
    cpu_call_us=5.0, cpu_split_us=50.0,
)


@dataclasses.dataclass(frozen=True)
class Route:
    """Where a host input goes: ``path`` is ``"gpu"`` or ``"cpu"``; ``gpu_s`` and
    ``cpu_s`` are the model's estimates (None where no model was asked: a
    backend named by the caller)."""

    path: str
    gpu_s: float | None
    cpu_s: float | None
    why: str

    def __str__(self) -> str:
        where = ("the GPU, streamed through pinned buffers" if self.path == "gpu"
                 else "the cpu backend")
        if self.gpu_s is None:
            return f"host input: reduced on {where} ({self.why})"
        return (f"host input: reduced on {where}: estimated {_ms(self.gpu_s)} on the GPU, "
                f"{_ms(self.cpu_s)} on the cpu backend ({self.why})")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def gpu_seconds(m: HostModel, nbytes: int, chunk_bytes: int) -> float:
    """The GPU path's time for ``nbytes`` of input in chunks of ``chunk_bytes``."""
    first = min(nbytes, chunk_bytes)
    chunks = -(-nbytes // chunk_bytes)
    stages = (m.stage_GBps, m.h2d_GBps, m.gpu_GBps)
    fill = sum(first / (rate * 1e9) for rate in stages)
    fixed = (m.gpu_call_us + chunks * m.gpu_chunk_us) * 1e-6
    return fixed + fill + (nbytes - first) / (min(stages) * 1e9)


def cpu_seconds(m: HostModel, n: int, itemsize: int, user: bool, split_bytes: int,
                split_elements: int) -> float:
    """The cpu backend's time for ``n`` elements of ``itemsize`` bytes: with a
    user's op (``user``) it splits from ``split_elements`` elements, a built-in
    from ``split_bytes`` bytes."""
    nbytes = n * itemsize
    split = n >= split_elements if user else nbytes >= split_bytes
    fixed = (m.cpu_call_us + (m.cpu_split_us if split else 0.0)) * 1e-6
    if user:
        return fixed + n * (m.cpu_user_ns if split else m.cpu_user_serial_ns) * 1e-9
    return fixed + nbytes / ((m.cpu_GBps if split else m.cpu_serial_GBps) * 1e9)


def choose(m: HostModel, n: int, itemsize: int, user: bool, *, chunk_bytes: int = 8 << 20,
           split_bytes: int = 8 << 20, split_elements: int = 2 << 18) -> Route:
    """The faster path for ``n`` elements of ``itemsize`` bytes (``user``: the op
    is a user's, which the cpu backend folds with generated code). The
    thresholds are the backends' (:mod:`pyreduce.backends.staging`,
    :mod:`pyreduce.backends.cpu_parallel`, :mod:`pyreduce.backends.cpu`)."""
    gpu = gpu_seconds(m, n * itemsize, chunk_bytes)
    cpu = cpu_seconds(m, n, itemsize, user, split_bytes, split_elements)
    path = "gpu" if gpu < cpu else "cpu"
    return Route(path, gpu, cpu, f"cost model: {m.source}")
