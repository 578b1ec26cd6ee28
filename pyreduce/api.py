"""The public calls: ``reduce``, the named reductions and ``Reduce``."""

from __future__ import annotations

import numpy as np

from . import backends, driver, laws
from .interop import inspect
from .ops import Monoid, as_monoid, cast_value, sum_dtype
from .planner import Tuning, make_plan

__all__ = ["reduce", "sum", "prod", "max", "min", "nanmax", "nanmin", "Reduce"]


def reduce(
    x,
    op,
    identity=None,
    *,
    initial=None,
    dtype=None,
    backend: str = "auto",
    device_result: bool = False,
    stream=0,
    variant: str = "auto",
    block_size: int | None = None,
    items_per_thread: int | None = None,
    warp_size: int | None = None,
    max_blocks: int | None = None,
    check: bool = False,
):
    """Reduce every element of ``x`` with the associative operator ``op``.

    The result equals ``functools.reduce(op, x.ravel(order="C"))`` with each step
    cast to the accumulator dtype; the order of the operands is kept, so ``op``
    need not be commutative.

    Args:
        x: a NumPy array, or a device array (CuPy, PyTorch, Numba: anything with
            ``__cuda_array_interface__``), of any shape and strides. Never modified.
        op: ``max``, ``min``, ``operator.add/mul/and_/or_/xor``, the matching NumPy
            ufuncs, a name such as ``"add"``, or a Python function of two arguments
            that Numba can compile.
        identity: the value ``e`` with ``op(e, v) == op(v, e) == v``; returned for an
            empty input. Inferred for built-in ops, except that ``max``/``min`` of an
            empty array raise ValueError as in NumPy.
        initial: a value combined once, on the left, like ``functools.reduce``'s.
        dtype: the accumulator and result dtype (default: the input's; ``bool`` for
            the logical ops). Input values are cast to it as they are loaded.
        backend: ``"auto"``, ``"cuda"``, ``"hip"`` (AMD, ``pyreduce[rocm]``; compiled
            for gfx942/gfx1100 but not yet run on AMD hardware), ``"sim"`` or ``"cpu"``.
        device_result: return a 1-element device array instead of a NumPy scalar
            (GPU backends).
        stream: a Numba CUDA stream to launch on.
        variant: a name from ``pyreduce.variants`` (default: the planner's choice).
        block_size: threads per block (``None``: the planner's choice).
        items_per_thread: elements each thread folds per step.
        warp_size: 32, or 64 in the simulator (AMD wavefronts); on ``hip`` the
            device's wavefront size.
        max_blocks: an upper bound on the first pass's grid. These five tune the
            GPU kernels (``cuda``, ``sim``); the ``cpu`` backend ignores them.
        check: before the first use of a user ``op`` with this dtype (and
            identity), check on a fixed sample of values, on the host, that it is
            associative and that ``identity`` is one on both sides; a ValueError
            names the law and a counterexample. Built-in ops skip it.
            ``pyreduce.testing`` checks more thoroughly.

    Returns:
        A NumPy scalar of the accumulator dtype.

    Example:
        >>> import numpy as np, pyreduce
        >>> x = np.array([3, 0, 7, 0, 2, 0], dtype=np.int64)
        >>> int(pyreduce.reduce(x, lambda a, b: b if b != 0 else a, backend="cpu"))
        2
        >>> float(pyreduce.reduce(np.arange(5.0), max, backend="cpu"))
        4.0
    """
    info = inspect(x)
    monoid = as_monoid(op, info.dtype, identity, acc_dtype=dtype)
    laws.check_if_requested(monoid, check)
    # checked here, whatever the backend and size, so a typo never passes silently
    tuning = Tuning(variant, block_size, items_per_thread, warp_size, max_blocks)
    return _run(info, monoid, initial, backend, tuning, device_result, stream)


def _run(info, monoid: Monoid, initial, backend_name, tuning, device_result, stream):
    if initial is not None:
        initial = cast_value(initial, monoid.dtype, "initial")
    be = backends.get(backend_name, on_device=info.on_device)
    if info.size == 0:
        value = initial if initial is not None else monoid.empty_result()
        return _deliver(be, value, monoid, device_result, stream)
    if be.name == "cpu":
        if device_result:
            raise ValueError("device_result=True needs a GPU backend, not 'cpu'")
        host = info.host if info.host is not None else _to_host(info.device)
        return be.reduce(host, monoid, initial)
    device = be.device(tuning.warp_size)
    plan = make_plan(
        info.size, info.dtype, monoid.dtype, monoid.key, device, tuning,
        extra_partials=0 if initial is None else 1,
    )
    if _needs_commutative(plan.spec.variant) and not monoid.commutative:
        raise ValueError(
            f"variant {plan.spec.variant!r} reorders elements and needs a commutative "
            f"op; {monoid.name!r} is not known to be commutative"
        )
    if info.on_device:
        flat = be.flat_view(be.as_device_array(info.device), stream)
    else:
        flat = be.to_device(info.host, stream)
    return driver.run(
        be, flat, plan, monoid, device,
        initial=initial, stream=stream, device_result=device_result,
    )


def _needs_commutative(variant: str) -> bool:
    from .variants import VARIANTS

    return VARIANTS[variant].commutative_only


def _to_host(device_array) -> np.ndarray:
    if hasattr(device_array, "copy_to_host"):  # Numba's (and the simulator's) arrays
        return device_array.copy_to_host()
    from numba import cuda

    return cuda.as_cuda_array(device_array).copy_to_host()


def _deliver(be, value, monoid, device_result, stream):
    value = monoid.dtype.type(value)
    if not device_result:
        return value
    if be.name == "cpu":
        raise ValueError("device_result=True needs a GPU backend, not 'cpu'")
    out = be.new_result(monoid.dtype, stream)
    be.put_value(out, value, stream)
    return be.result_array(out)


def _named(op, dtype_rule):
    def reduction(x, *, identity=None, **kwargs):
        info = inspect(x)
        if "dtype" not in kwargs or kwargs["dtype"] is None:
            kwargs["dtype"] = dtype_rule(info.dtype)
        return reduce(x, op, identity, **kwargs)

    reduction.__pyreduce_op__ = op
    return reduction


def _same(dt):
    return dt


sum = _named("add", sum_dtype)
sum.__name__ = sum.__qualname__ = "sum"
sum.__doc__ = """Sum of all elements, accumulated like ``np.sum`` (bool and small ints in
64 bits). Keywords as for ``reduce``.

    >>> import numpy as np, pyreduce
    >>> int(pyreduce.sum(np.array([200, 100], dtype=np.uint8), backend="cpu"))
    300
"""
prod = _named("mul", sum_dtype)
prod.__name__ = prod.__qualname__ = "prod"
prod.__doc__ = """Product of all elements, accumulated like ``np.prod``. Keywords as for
``reduce``."""
max = _named("max", _same)
max.__name__ = max.__qualname__ = "max"
max.__doc__ = """Largest element; NaN propagates and an empty input raises ValueError,
as with ``np.max``. Keywords as for ``reduce``."""
min = _named("min", _same)
min.__name__ = min.__qualname__ = "min"
min.__doc__ = """Smallest element; NaN propagates and an empty input raises ValueError,
as with ``np.min``. Keywords as for ``reduce``."""
nanmax = _named("nanmax", _same)
nanmax.__name__ = nanmax.__qualname__ = "nanmax"
nanmax.__doc__ = """Largest element ignoring NaN, like ``np.nanmax``: NaN only if every
element is NaN (without NumPy's RuntimeWarning), and an empty input raises
ValueError. Integers and bools are reduced as by ``max``. The operator is
``np.fmax``, also accepted by ``reduce``. Keywords as for ``reduce``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.nanmax(np.array([np.nan, 2.0, np.nan, -1.0]), backend="cpu"))
    2.0
    >>> float(pyreduce.nanmax(np.array([np.nan, np.nan]), backend="cpu"))
    nan
"""
nanmin = _named("nanmin", _same)
nanmin.__name__ = nanmin.__qualname__ = "nanmin"
nanmin.__doc__ = """Smallest element ignoring NaN, like ``np.nanmin`` (see ``nanmax``); the
operator is ``np.fmin``. Keywords as for ``reduce``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.nanmin(np.array([3.0, np.nan, -1.0]), backend="cpu"))
    -1.0
"""


class Reduce:
    """A reusable reduction with a user operator: a drop-in for ``numba.cuda.Reduce``.

    ``Reduce(f)(arr, size=None, res=None, init=0, stream=0)`` returns
    ``functools.reduce(f, arr[:size], init)``; with ``res`` (a device array) the
    result is written to ``res[0]`` and None is returned. Kernels are cached by the
    operator's code, so a new ``Reduce`` of the same lambda does not recompile.

    >>> import numpy as np, pyreduce
    >>> R = pyreduce.Reduce(lambda a, b: a + b)
    >>> float(R(np.arange(1.0, 11.0), init=3, backend="cpu"))
    58.0
    """

    def __init__(self, functor):
        self._functor = functor

    def __call__(self, arr, size=None, res=None, init=0, stream=0, *, backend="auto"):
        if getattr(arr, "ndim", None) != 1:
            raise TypeError("only support 1D array")
        if size is not None:
            arr = arr[:size]
        dtype = np.dtype(arr.dtype)
        init = dtype.type(init)
        if arr.size < 1:
            return init
        result = reduce(
            arr, self._functor, initial=init, backend=backend,
            device_result=res is not None, stream=stream,
        )
        if res is None:
            return result
        res[:1].copy_to_device(result, stream=stream)
        return None
