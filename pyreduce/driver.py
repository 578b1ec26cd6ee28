"""Running a :class:`~pyreduce.planner.Plan` on a device backend.

Pass 1 launches ``plan.grid`` blocks; each writes its partial into library-owned
scratch in block order. Pass 2 (one block) reduces the partials in that order. An
``initial`` value is placed in front of the partials, so it is combined exactly
once, on the left, on the device: ``op(initial, op(p0, p1, ...))``, which is what
``functools.reduce(op, x, initial)`` computes. The input is only ever read.
"""

from __future__ import annotations

__all__ = ["run"]


def _launch(kernel, grid, block, stream, *args):
    try:
        kernel.launcher(grid, block, stream)(*args)
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
    kernel = backend.kernel(spec, monoid, device)
    result = backend.new_result(spec.acc_dtype, stream) if device_result else None
    stream_key = _stream_key(stream)
    with backend.launch_context(spec.warp), backend.scratch.borrow(
        1, spec.acc_dtype, stream_key
    ) as small:
        out = result if device_result else small
        if plan.finish is None:
            _launch(kernel, 1, spec.block, stream, flat, plan.n, plan.chunk, out)
        else:
            head = 0 if initial is None else 1
            count = plan.grid + head
            with backend.scratch.borrow(count, spec.acc_dtype, stream_key) as partials:
                if head:
                    backend.put_value(partials, initial, stream)
                _launch(kernel, plan.grid, spec.block, stream,
                        flat, plan.n, plan.chunk, partials[head:count])
                finish = backend.kernel(plan.finish, monoid, device)
                tile = plan.finish.tile
                chunk = -(-count // tile) * tile
                _launch(finish, 1, plan.finish.block, stream, partials, count, chunk, out)
        if device_result:
            return result
        return backend.read_value(out, stream)
