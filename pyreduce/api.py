"""The public calls: ``reduce``, the named reductions and ``Reduce``."""

from __future__ import annotations

import numpy as np

from . import backends, laws
from .interop import inspect
from .backends.base import check_out
from .ops import Monoid, as_monoid, cast_value, sum_dtype
from .planner import Tuning, make_plan
from .variants import VARIANTS

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
    out=None,
    stream=None,
    variant: str = "auto",
    block_size: int | None = None,
    items_per_thread: int | None = None,
    warp_size: int | None = None,
    max_blocks: int | None = None,
    vector_loads: bool | None = None,
    check: bool = False,
    deterministic: bool = False,
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
        device_result: return the result as a 0-d device array instead of a NumPy
            scalar (GPU backends): a CuPy array for a CuPy input, a PyTorch tensor
            for a PyTorch one, a Numba device array otherwise.
        out: an array of one element and the result's dtype to write the result
            into, returned: a NumPy array, or a device array (GPU backends; written
            on the device, with no allocation).
        stream: the CUDA stream to launch on: a Numba, CuPy or PyTorch stream or
            a handle. ``None`` (default): the stream the input's producer works on
            (CuPy's or PyTorch's current stream; the default stream otherwise),
            so the reduction follows the work that made its input.
        variant: a name from ``pyreduce.variants`` (default: the planner's choice).
        block_size: threads per block (``None``: the planner's choice).
        items_per_thread: elements each thread folds per step.
        warp_size: 32, or 64 in the simulator (AMD wavefronts); on ``hip`` the
            device's wavefront size.
        max_blocks: an upper bound on the first pass's grid.
        vector_loads: ``None`` (default): read the input with 16-byte vector loads
            where it is contiguous and aligned; ``False``: element loads only;
            ``True``: vector loads or a ValueError. These six tune the GPU kernels
            (``cuda``, ``sim``); the ``cpu`` backend ignores them.
        check: before the first use of a user ``op`` with this dtype (and
            identity), check on a fixed sample of values, on the host, that it is
            associative and that ``identity`` is one on both sides; a ValueError
            names the law and a counterexample. Built-in ops skip it.
            ``pyreduce.testing`` checks more thoroughly.
        deterministic: combine the elements in one fixed tree that depends on the
            size alone (``docs/deterministic.md``), so that a float sum is bitwise
            the same for every block size, items per thread, warp size, grid, GPU
            and backend, and equals ``pyreduce.reference(x, op, ...)``. On a GPU
            it selects variant ``"pairwise"`` (another ``variant=`` is a
            ValueError) and needs items per thread to be a multiple of 4.

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
    return _reduce(inspect(x), op, identity, initial, dtype, backend, device_result, out,
                   stream, variant, block_size, items_per_thread, warp_size, max_blocks,
                   vector_loads, check, deterministic)


_DEFAULT_TUNING = Tuning()

#: The variant that computes the fixed tree of deterministic=True.
DETERMINISTIC_VARIANT = "pairwise"


def deterministic_variant(variant: str, deterministic) -> str:
    """The variant a call with ``deterministic=`` uses: ``variant`` unchanged for
    False, :data:`DETERMINISTIC_VARIANT` for True (``variant=`` may only name it)."""
    if not isinstance(deterministic, (bool, np.bool_)):
        raise TypeError(f"deterministic= must be True or False, got {deterministic!r}")
    if not deterministic:
        return variant
    if variant not in ("auto", DETERMINISTIC_VARIANT):
        raise ValueError(
            f"deterministic=True computes the fixed tree of variant "
            f"{DETERMINISTIC_VARIANT!r}; variant={variant!r} cannot give it"
        )
    return DETERMINISTIC_VARIANT


def _reduce(info, op, identity, initial=None, dtype=None, backend="auto",
            device_result=False, out=None, stream=None, variant="auto", block_size=None,
            items_per_thread=None, warp_size=None, max_blocks=None, vector_loads=None,
            check=False, deterministic=False):
    """:func:`reduce` of an inspected input (the named reductions inspect first)."""
    monoid = as_monoid(op, info.dtype, identity, acc_dtype=dtype)
    if check is not False:
        laws.check_if_requested(monoid, check)
    if deterministic is not False:
        variant = deterministic_variant(variant, deterministic)
    if (variant == "auto" and block_size is None and items_per_thread is None
            and warp_size is None and max_blocks is None and vector_loads is None):
        tuning = _DEFAULT_TUNING
    else:  # checked here, whatever the backend and size, so a typo never passes silently
        tuning = Tuning(variant, block_size, items_per_thread, warp_size, max_blocks,
                        vector_loads)
    return prepare(info, monoid, initial, backend, tuning, stream).run(device_result, out)


class Prepared:
    """A reduction with every decision taken and nothing launched yet: the backend,
    the operator, and on a GPU backend the flat device input and the plan. ``run``
    performs it; :func:`pyreduce.explain` reads it."""

    __slots__ = ("backend", "monoid", "info", "initial", "stream", "device", "flat", "plan",
                 "fixed_tree")

    def __init__(self, backend, monoid: Monoid, info, initial, stream, fixed_tree=False):
        self.backend, self.monoid, self.info = backend, monoid, info
        self.initial, self.stream = initial, stream
        self.device = self.flat = self.plan = None
        #: compute pyreduce.deterministic's tree (the cpu backend too)
        self.fixed_tree = fixed_tree

    def run(self, device_result: bool = False, out=None):
        be, monoid, stream = self.backend, self.monoid, self.stream
        if out is not None and device_result:
            raise ValueError("pass out= or device_result=True, not both")
        if isinstance(out, np.ndarray):  # a host array: the value, copied in
            check_out(out.shape, out.dtype, monoid.dtype)
            out[...] = self.run()
            return out
        user = buffer = None
        if out is not None or device_result:
            if be.name == "cpu":
                what = "device_result=True" if device_result else "a device out= array"
                raise ValueError(f"{what} needs a GPU backend, not 'cpu'")
            if out is not None:
                user, buffer = out, be.out_buffer(out, monoid.dtype)
            else:
                user, buffer = be.new_result(monoid.dtype, stream, self.info)
        if self.info.size == 0:
            value = self.initial if self.initial is not None else monoid.empty_result()
            value = monoid.dtype.type(value)
            if buffer is None:
                return value
            be.put_value(buffer, value, stream)
            return user
        if be.name == "cpu":
            host = self.info.host if self.info.host is not None else _to_host(self.info.device)
            return be.reduce(host, monoid, self.initial, tree=self.fixed_tree)
        run = be.executable(self.plan, monoid, self.device)
        if buffer is None:
            return run(self.flat, stream, self.initial)
        run(self.flat, stream, self.initial, buffer)
        return user


def prepare(info, monoid: Monoid, initial, backend_name, tuning, stream) -> Prepared:
    """Choose the backend, flatten the input on the device and plan the launches."""
    if initial is not None:
        initial = cast_value(initial, monoid.dtype, "initial")
    be = backends.get(backend_name, on_device=info.on_device)
    fixed_tree = tuning.variant != "auto" and VARIANTS[tuning.variant].fixed_tree
    call = Prepared(be, monoid, info, initial, be.launch_stream(stream, info), fixed_tree)
    if be.name == "cpu" or info.size == 0:
        return call
    call.device = device = be.device(tuning.warp_size)
    call.flat = be.flat_input(info, call.stream)
    call.plan = plan = make_plan(
        info.size, info.dtype, monoid.dtype, monoid.key, device, tuning,
        extra_partials=0 if initial is None else 1, align=be.alignment(call.flat),
    )
    if _needs_commutative(plan.spec.variant) and not monoid.commutative:
        raise ValueError(
            f"variant {plan.spec.variant!r} reorders elements and needs a commutative "
            f"op; {monoid.name!r} is not known to be commutative"
        )
    return call


def _needs_commutative(variant: str) -> bool:
    return VARIANTS[variant].commutative_only


def _to_host(device_array) -> np.ndarray:
    if hasattr(device_array, "copy_to_host"):  # Numba's (and the simulator's) arrays
        return device_array.copy_to_host()
    from numba import cuda

    return cuda.as_cuda_array(device_array).copy_to_host()


def _named(op, dtype_rule):
    def reduction(x, *, identity=None, dtype=None, **kwargs):
        info = inspect(x)
        acc = dtype_rule(info.dtype) if dtype is None else dtype
        return _reduce(info, op, identity, dtype=acc, **kwargs)

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
        if res is None:
            return reduce(arr, self._functor, initial=init, backend=backend, stream=stream)
        reduce(arr, self._functor, initial=init, backend=backend, out=res[:1], stream=stream)
        return None
