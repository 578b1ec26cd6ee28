"""The public calls: ``reduce``, the named reductions and ``Reduce``."""

from __future__ import annotations

import numpy as np

from . import backends, laws, structured
from .interop import inspect
from .backends.base import check_out
from .dtypes import bfloat16_to_float32, default_accumulator, is_bfloat16, is_tuple
from .ops import Monoid, as_monoid, cast_value, sum_dtype
from .planner import Tuning, make_plan
from .variants import VARIANTS

__all__ = [
    "reduce", "sum", "prod", "max", "min", "any", "all", "nanmax", "nanmin", "Reduce",
    "argmax", "argmin", "minmax", "mean", "var", "std", "nansum", "nanprod",
]


def reduce(
    x,
    op,
    identity=None,
    *,
    map=None,
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
        map: ``map(i, v)``, applied to element ``v`` at flat index ``i`` as it is
            loaded: what is reduced is ``map(i, x[i])``. It may return a tuple
            (a tuple accumulator: ``op`` then combines tuples, and ``identity``
            and the result are tuples), e.g. ``lambda i, v: (v, i)`` for an
            argmax. Without ``dtype=`` the accumulator is what ``map`` returns.
        initial: a value combined once, on the left, like ``functools.reduce``'s.
        dtype: the accumulator and result dtype (default: the input's; ``bool`` for
            the logical ops). Input values are cast to it as they are loaded. With
            ``map=``, a tuple of dtypes for a tuple accumulator.
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
                   vector_loads, check, map, deterministic)


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
            check=False, map=None, deterministic=False):
    """:func:`reduce` of an inspected input (the named reductions inspect first)."""
    monoid = as_monoid(op, info.dtype, identity, acc_dtype=dtype, map=map)
    if check is not False:
        laws.check_if_requested(monoid, check)
    if deterministic is not False:
        variant = deterministic_variant(variant, deterministic)
        if deterministic and is_tuple(monoid.dtype):
            raise ValueError("deterministic=True takes scalar accumulators, not tuples")
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
            if monoid.finalize is not None:
                raise ValueError(f"{monoid.name} finishes its result on the host: "
                                 "device_result=True and a device out= do not apply")
            if out is not None:
                user, buffer = out, be.out_buffer(out, monoid.dtype)
            else:
                user, buffer = be.new_result(monoid.dtype, stream, self.info)
        if self.info.size == 0:
            value = self.initial if self.initial is not None else monoid.empty_result()
            if buffer is None:
                return monoid.result(value)
            be.put_value(buffer, value, stream)
            return user
        if be.name == "cpu":
            host = self.info.host if self.info.host is not None else _to_host(self.info)
            if is_bfloat16(self.info.dtype):  # the cpu backend folds float32
                host = bfloat16_to_float32(host)
            return monoid.result(be.reduce(host, monoid, self.initial, tree=self.fixed_tree))
        run = be.executable(self.plan, monoid, self.device)
        if buffer is None:
            return monoid.result(run(self.flat, stream, self.initial))
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


def _to_host(info) -> np.ndarray:
    """A device input copied to the host, for the cpu backend."""
    x = info.device
    if hasattr(x, "copy_to_host"):  # Numba's (and the simulator's) arrays
        return x.copy_to_host()
    if info.kind == "torch":
        return inspect(x.cpu()).host
    from numba import cuda

    return cuda.as_cuda_array(x).copy_to_host()


def _named(op, dtype_rule):
    def reduction(x, *, identity=None, dtype=None, **kwargs):
        info = inspect(x)
        acc = dtype_rule(info.dtype) if dtype is None else dtype
        return _reduce(info, op, identity, dtype=acc, **kwargs)

    reduction.__pyreduce_op__ = op
    return reduction


def _same(dt):
    """The input's own dtype as the accumulator (float16 accumulates in float32)."""
    return default_accumulator(dt)


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
any = _named("logical_or", _same)
any.__name__ = any.__qualname__ = "any"
any.__doc__ = """True if any element is non-zero, like ``np.any`` (False for an empty
input). Keywords as for ``reduce``.

    >>> import numpy as np, pyreduce
    >>> bool(pyreduce.any(np.array([0, 0, 3]), backend="cpu"))
    True
"""
all = _named("logical_and", _same)
all.__name__ = all.__qualname__ = "all"
all.__doc__ = """True if every element is non-zero, like ``np.all`` (True for an empty
input). Keywords as for ``reduce``."""

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


def _tuned(kwargs: dict, name: str) -> dict:
    """The keywords a structured reduction passes on: backend, stream and tuning."""
    allowed = {"backend", "stream", "variant", "block_size", "items_per_thread",
               "warp_size", "max_blocks", "vector_loads"}
    unknown = set(kwargs) - allowed
    if unknown:
        raise TypeError(f"{name}() got unexpected keyword argument(s) "
                        f"{', '.join(sorted(unknown))}")
    return kwargs


def argmax(x, **kwargs):
    """The flat (C-order) index of the largest element, the first one if there are
    ties, like ``np.argmax``: NaN counts as the largest, so the first NaN's index
    if there is one. An empty input raises ValueError. Keywords: ``backend``,
    ``stream`` and the tuning keywords of ``reduce``.

    >>> import numpy as np, pyreduce
    >>> int(pyreduce.argmax(np.array([3, 9, 1, 9]), backend="cpu"))
    1
    """
    info = inspect(x)
    return _reduce(info, structured.argmax_monoid(info.dtype), None, **_tuned(kwargs, "argmax"))


def argmin(x, **kwargs):
    """The flat index of the smallest element (the first; the first NaN's if any),
    like ``np.argmin``. Keywords as for ``argmax``."""
    info = inspect(x)
    return _reduce(info, structured.argmin_monoid(info.dtype), None, **_tuned(kwargs, "argmin"))


def minmax(x, **kwargs):
    """``(min, max)`` in one pass over the input; NaN propagates into both, as
    with ``np.min`` and ``np.max``. Keywords as for ``argmax``.

    >>> import numpy as np, pyreduce
    >>> tuple(float(v) for v in pyreduce.minmax(np.array([2.0, -1.0, 5.0]), backend="cpu"))
    (-1.0, 5.0)
    """
    info = inspect(x)
    return _reduce(info, structured.minmax_monoid(info.dtype), None, **_tuned(kwargs, "minmax"))


def mean(x, **kwargs):
    """The mean, in one pass with float64 accumulators (Chan's pairwise update);
    float32 input gives a float32 result, others float64, like ``np.mean``. An
    empty input gives NaN. Keywords as for ``argmax``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.mean(np.array([1, 2, 3, 4]), backend="cpu"))
    2.5
    """
    info = inspect(x)
    return _reduce(info, structured.moments_monoid(info.dtype, "mean"), None,
                   **_tuned(kwargs, "mean"))


def var(x, ddof=0, **kwargs):
    """The variance (``ddof``: delta degrees of freedom, as in ``np.var``), in one
    pass. Keywords as for ``argmax``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.var(np.array([1.0, 2.0, 3.0, 4.0]), ddof=1, backend="cpu"))
    1.6666666666666667
    """
    info = inspect(x)
    return _reduce(info, structured.moments_monoid(info.dtype, "var", ddof), None,
                   **_tuned(kwargs, "var"))


def std(x, ddof=0, **kwargs):
    """The standard deviation, ``sqrt(var(x, ddof))``. Keywords as for ``argmax``."""
    info = inspect(x)
    return _reduce(info, structured.moments_monoid(info.dtype, "std", ddof), None,
                   **_tuned(kwargs, "std"))


def nansum(x, *, dtype=None, **kwargs):
    """The sum with NaN taken as zero, like ``np.nansum`` (accumulated like
    ``np.sum``, or in ``dtype``). Keywords: ``initial``, ``device_result``, ``out``
    and those of ``argmax``.

    >>> import numpy as np, pyreduce
    >>> float(pyreduce.nansum(np.array([1.0, np.nan, 2.0]), backend="cpu"))
    3.0
    """
    info = inspect(x)
    return _reduce(info, structured.nansum_monoid(info.dtype, dtype), None, **kwargs)


def nanprod(x, *, dtype=None, **kwargs):
    """The product with NaN taken as one, like ``np.nanprod``. Keywords as for
    ``nansum``."""
    info = inspect(x)
    return _reduce(info, structured.nanprod_monoid(info.dtype, dtype), None, **kwargs)


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
