"""The route of a host array on a GPU backend: the GPU or the cpu backend.

A backend named by the caller is used as named. ``backend="auto"`` asks the cost
model (:mod:`pyreduce.costmodel`, numbers from :mod:`pyreduce.calibrate`) for
the faster of the GPU, with the input streamed through pinned buffers, and the
cpu backend; a result asked for on the device goes to the GPU. A repeat of a
call that went to the cpu backend (the same operator, dtype, shape and
strides) takes the remembered route while the model and the GPU are those it
was decided with (:func:`unchanged`).
"""

from __future__ import annotations

from . import backends, calibrate
from .backends import cpu, cpu_parallel, staging
from .costmodel import Route, choose
from .dtypes import storage

__all__ = ["route", "folds_on_cpu", "unchanged"]


def folds_on_cpu(monoid) -> bool:
    """Whether the cpu backend runs ``monoid`` with a generated fold (a user's
    op, a built-in under an element map) rather than a NumPy reduction."""
    if monoid.host is not None:
        return False
    return not (monoid.key[0] == "builtin" and monoid.name in cpu.UFUNCS)


def unchanged(backend):
    """A check, ``check() -> bool``, that the route decided now for ``backend``
    (the GPU backend ``"auto"`` resolved to) would be decided again for a call
    of the same shape: the cost model has not changed since
    (:func:`pyreduce.calibrate.changes`) and the thread's GPU is the same (each
    GPU has its own model). A repeat call that it passes skips the model
    (:mod:`pyreduce.callmemo`)."""
    changes, device = calibrate.changes(), backend.quiet_device()
    return lambda: calibrate.changes() == changes and backend.quiet_device() == device


def route(info, monoid, backend, asked: str, host_result: bool, model=None) -> Route:
    """Where the host input ``info`` is reduced; ``backend`` is the GPU backend
    ``asked`` (a name, or ``"auto"``) resolved to. ``model``: the cost model
    (default: this machine's, :func:`pyreduce.calibrate.model`)."""
    if asked != "auto":
        return Route("gpu", None, None, f"backend={asked!r} was asked for")
    if not host_result:
        return Route("gpu", None, None, "the result is asked for on the device")
    if model is None:
        model = calibrate.model(backend)
    itemsize = storage(info.dtype).itemsize
    threads = backends.get("cpu").threads
    never = 1 << 62
    return choose(
        model, info.size, itemsize, folds_on_cpu(monoid),
        chunk_bytes=staging.chunk_elements(info.size, itemsize) * itemsize,
        split_bytes=cpu_parallel.SPLIT_BYTES if threads > 1 else never,
        split_elements=2 * cpu_parallel.PARALLEL_MIN if threads > 1 else never,
    )
