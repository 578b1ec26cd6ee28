"""Building kernels ahead of time: :func:`warmup` and ``python -m pyreduce warmup``.

A container image or a CI job runs it once; later processes then find the
kernels in the disk cache (:mod:`pyreduce.diskcache`) and skip the compiles. It
reduces inputs of each chosen dtype with each op on the chosen backend, at sizes
on both sides of the planner's choice between a one-launch kernel (inputs that
fit the L2 cache) and a two-pass one (larger inputs), so the kernels a program
meets at any size are built. On a GPU the inputs are views of one uninitialised
device buffer: no data is copied, and the values do not matter.
"""

from __future__ import annotations

import dataclasses
import sys
import time

import numpy as np

from . import diskcache, general, named
from .backends import BackendNotice, get

__all__ = ["warmup", "Warmup", "DEFAULT_OPS", "DEFAULT_DTYPES"]

#: What :func:`warmup` builds by default: the named reductions users call most,
DEFAULT_OPS = ("sum", "max", "min")
#: for the dtypes arrays most often have.
DEFAULT_DTYPES = ("float32", "float64", "int32", "int64")

#: Elements of the small inputs (one block's worth or so).
SMALL = 1 << 12


@dataclasses.dataclass(frozen=True)
class Warmup:
    """What :func:`warmup` did: ``cases`` reductions run on ``backend`` in
    ``seconds``; ``compiled`` kernels stored in the disk cache and ``loaded`` found
    there (both 0 when the cache is off)."""

    backend: str
    cases: int
    seconds: float
    compiled: int
    loaded: int


def warmup(ops=None, dtypes=None, backend: str = "auto", sizes=None,
           progress: bool = True, stream=None) -> Warmup:
    """Build and cache the kernels for ``ops`` and ``dtypes`` on ``backend``.

    Args:
        ops: named reductions (``"sum"``, ``"max"``, ``"min"``, ``"prod"``,
            ``"any"``, ``"all"``, ``"nanmax"``, ``"nanmin"``) or user operators
            (functions of two values, as ``pyreduce.reduce`` takes them);
            default :data:`DEFAULT_OPS`.
        dtypes: dtypes (anything ``np.dtype`` takes); default :data:`DEFAULT_DTYPES`.
        backend: ``"auto"`` (the GPU if present, else the CPU), ``"cuda"``,
            ``"cpu"``, ...; on the CPU only user operators compile anything.
        sizes: element counts to reduce; default a small one and, on a GPU, one
            past twice its L2 cache (in bytes of each dtype).
        progress: a progress bar on stderr (plain lines when stderr is not a
            terminal).
        stream: where progress goes (default ``sys.stderr``).

    Returns:
        A :class:`Warmup`.
    """
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BackendNotice)
        be = get(backend)
    dts = [_dtype(d) for d in (dtypes if dtypes is not None else DEFAULT_DTYPES)]
    calls = [_call(op) for op in (ops if ops is not None else DEFAULT_OPS)]
    counts = {dt: _counts(be, dt, sizes) for dt in dts}
    arrays = _inputs(be, dts, counts)
    cases = [(label, fn, dt, n) for label, fn in calls for dt in dts for n in counts[dt]]
    before = diskcache.stats().get(be.name, {})
    bar = _Progress(len(cases), stream or sys.stderr, progress)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Numba's small-grid notes, wrap-around
        for label, fn, dt, n in cases:
            bar.step(f"{label} {dt} n={n:,}")
            fn(arrays[dt][:n], backend=be.name)
    bar.done()
    after = diskcache.stats().get(be.name, {})  # the kinds are the backends' names
    return Warmup(be.name, len(cases), time.perf_counter() - start,
                  after.get("stores", 0) - before.get("stores", 0),
                  after.get("hits", 0) - before.get("hits", 0))


def _dtype(d) -> np.dtype:
    try:
        return np.dtype(d)
    except TypeError:
        raise TypeError(f"dtypes= must hold dtypes, got {d!r}") from None


_NAMED = ("sum", "prod", "max", "min", "nanmax", "nanmin", "any", "all", "nansum", "nanprod")


def _call(op):
    """``(label, fn(x, backend=...))`` for a named reduction or a user operator."""
    if isinstance(op, str):
        if op not in _NAMED:
            raise ValueError(f"ops= names unknown reduction {op!r}; known: {', '.join(_NAMED)}")
        return op, getattr(named, op)
    if not callable(op):
        raise TypeError(f"ops= must hold reduction names or functions, got {op!r}")

    def reduce(x, backend):
        return general.reduce(x, op, backend=backend)

    return getattr(op, "__name__", "op"), reduce


def _counts(be, dt: np.dtype, sizes) -> list:
    """The element counts to reduce of dtype ``dt``: ``sizes``, or by default a
    small count and, on a GPU whose L2 size is known, one past twice its L2."""
    if sizes is not None:
        counts = sorted(set(int(n) for n in sizes))
        if not counts or counts[0] < 1:
            raise ValueError(f"sizes= must be element counts of at least 1, got {sizes!r}")
        return counts
    l2 = 0 if be.name in ("cpu", "sim") else getattr(be.device(), "l2_bytes", 0)
    return [SMALL, 2 * l2 // dt.itemsize + 1] if l2 else [SMALL]


def _inputs(be, dts, counts: dict) -> dict:
    """``{dtype: a 1-D array of the largest count}`` where ``be`` reduces."""
    if be.name in ("cpu", "sim"):
        rng = np.random.default_rng(0)
        return {dt: (rng.random(max(counts[dt])) * 100).astype(dt) for dt in dts}
    nbytes = max(max(counts[dt]) * dt.itemsize for dt in dts)
    buffer = be.gpu.device_array(nbytes, dtype=np.uint8)
    return {dt: buffer[:max(counts[dt]) * dt.itemsize].view(dt) for dt in dts}


class _Progress:
    """A one-line bar on a terminal, else a line per step."""

    def __init__(self, total: int, stream, on: bool):
        self.total, self.stream, self.on, self.done_count = total, stream, on, 0
        self.tty = on and hasattr(stream, "isatty") and stream.isatty()
        self.start = time.perf_counter()

    def step(self, label: str) -> None:
        self.done_count += 1
        if not self.on:
            return
        head = f"pyreduce warmup {self.done_count}/{self.total}"
        if self.tty:
            width = 24
            filled = width * (self.done_count - 1) // self.total
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(f"\r[{bar}] {head}: {label}".ljust(78)[:78])
        else:
            self.stream.write(f"{head}: {label}\n")
        self.stream.flush()

    def done(self) -> None:
        if not self.on:
            return
        seconds = time.perf_counter() - self.start
        end = f"pyreduce warmup: {self.total} reductions in {seconds:.1f} s"
        self.stream.write(("\r" + end.ljust(78) + "\n") if self.tty else end + "\n")
        self.stream.flush()
