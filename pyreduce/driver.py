"""Running a :class:`~pyreduce.planner.Plan` on a device backend.

The first pass launches ``plan.grid`` blocks; each writes its partial into
library-owned scratch, in block order. What follows depends on the layout:
``two_pass`` reduces the partials with one block, ``multi_pass`` repeats passes of
one tile per block until one value is left, and a ``single_pass`` kernel's last
block finishes by itself. An ``initial`` value is placed in front of the first
partials, so it is combined exactly once, on the left, on the device:
``op(initial, op(p0, p1, ...))``, which is what ``functools.reduce(op, x, initial)``
computes. The input is only ever read.
"""

from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["run"]


def _launch(backend, kernel, grid, block, stream, *args):
    try:
        backend.launch(kernel, grid, block, stream, args)
    except Exception as exc:
        if _is_typing_error(exc):
            raise TypeError(
                f"the op could not be compiled for {kernel.spec.label}: "
                f"{str(exc).splitlines()[0]}"
            ) from exc
        raise


def _is_typing_error(exc) -> bool:
    try:
        from numba.core.errors import TypingError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, TypingError)


def _stream_key(stream):
    """A hashable name for the stream (its handle), 0 for the default stream."""
    if not stream:
        return 0
    try:
        return int(stream)
    except TypeError:
        return id(stream)


def run(backend, flat, plan, monoid, device, *, initial=None, stream=0, device_result=False):
    """Reduce the 1-D device array ``flat``. Returns a NumPy scalar, or a 1-element
    device array when ``device_result`` is set."""
    spec = plan.spec
    acc = spec.acc_dtype
    kernel = backend.kernel(spec, monoid, device)
    key = _stream_key(stream)
    result = backend.new_result(acc, stream) if device_result else None
    with backend.launch_context(spec.warp), contextlib.ExitStack() as scratch:

        def borrow(count, dtype=acc, zeroed=False):
            pool = backend.counters if zeroed else backend.scratch
            return scratch.enter_context(pool.borrow(count, np.dtype(dtype), key))

        out = result if device_result else borrow(1)
        head = plan.head
        if plan.layout == "single_pass":
            blocks = borrow(plan.grid + head)
            if head:
                backend.put_value(blocks, initial, stream)
            _launch(backend, kernel, plan.grid, spec.block, stream, flat, plan.n, plan.chunk,
                    out, blocks, head, borrow(1, np.int32, zeroed=True))
        else:
            src, count, grid, chunk = flat, plan.n, plan.grid, plan.chunk
            while grid > 1 or head:
                partials = borrow(grid + head)
                if head:
                    backend.put_value(partials, initial, stream)
                _launch(backend, kernel, grid, spec.block, stream,
                        src, count, chunk, backend.slice(partials, head, grid + head))
                kernel = backend.kernel(plan.finish, monoid, device)
                spec, src, count, head = plan.finish, partials, grid + head, 0
                tiles = -(-count // spec.tile)
                grid = 1 if plan.layout == "two_pass" else tiles
                chunk = tiles * spec.tile if plan.layout == "two_pass" else spec.tile
            _launch(backend, kernel, 1, spec.block, stream, src, count, chunk, out)
        if device_result:
            return backend.result_array(result)
        return backend.read_value(out, stream)
