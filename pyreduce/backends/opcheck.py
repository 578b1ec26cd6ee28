"""Compile-checking a user's operator before any kernel uses it.

Every backend calls :func:`check_op` on first use of an op: it compiles
``acc_t(op(a, b))`` with Numba's ``njit`` for two accumulator values, so an op Numba
cannot compile, or whose result cannot be cast to the accumulator (a tuple, a
string), is a TypeError naming the op and the dtype, raised before a kernel is
generated or launched. The check runs once per op code and dtype, and keeps the
compiled step (:func:`compiled_step`) for whatever else runs the op on the host.

Everything the host compiles around a user's code uses :func:`host_njit`: Numba's
``njit`` with NumPy's error model, so that a division by zero gives what NumPy
scalars, the simulator and the CUDA target give (``inf``, NaN, or ``0`` for
integers) instead of raising ``ZeroDivisionError``.
"""

from __future__ import annotations

from ..cache import KERNELS
from ..codegen import compile_module
from ..dtypes import fields, is_tuple

__all__ = ["check_op", "compiled_step", "host_njit", "njit_cast", "njit_map", "njit_op"]


def host_njit(*args, **options):
    """``numba.njit`` (as a decorator, with or without options) with
    ``error_model="numpy"``: NumPy's arithmetic, not Python's exceptions."""
    from numba import njit

    return njit(*args, error_model="numpy", **options)


def njit_op(monoid):
    """The operator compiled with ``njit``, shared by everything that calls it."""
    return KERNELS.get(("cpu", "op", monoid.key), lambda: host_njit(monoid.fn))


def njit_map(monoid):
    """The element map compiled with ``njit``, shared by everything that calls it."""
    return KERNELS.get(("cpu", "map", monoid.key), lambda: host_njit(monoid.map))


def njit_cast(dtype):
    """``acc_t`` for ``njit`` code: the scalar type, or for a tuple dtype a compiled
    function casting every field (a Numba tuple cannot be cast by one call)."""
    if not is_tuple(dtype):
        return dtype.type

    def build():
        parts = fields(dtype)
        cast = ", ".join(f"f{k}_t(v[{k}])" for k in range(len(parts)))
        names = {"njit": host_njit, **{f"f{k}_t": d.type for k, d in enumerate(parts)}}
        source = f"@njit\ndef acc_t(v):\n    return ({cast})\n"
        return compile_module(source, "<pyreduce tuple cast>", names)["acc_t"]

    return KERNELS.get(("cpu", "cast", tuple(dtype.descr)), build)


def check_op(monoid) -> None:
    """A TypeError if Numba cannot compile ``monoid``'s op for its dtype. The
    built-in operators are the library's own, defined per dtype and tested on
    every dtype they accept, so they are not compiled on the host just to be
    checked (which would cost a first call a tenth of a second or more)."""
    if isinstance(monoid.key, tuple) and monoid.key[:1] == ("builtin",):
        return
    compiled_step(monoid)


def compiled_step(monoid):
    """``acc_t(op(a, b))`` compiled with ``njit``: one step of a reduction as the
    kernels compute it, to be called with two scalars of ``monoid.dtype``. A
    TypeError if Numba cannot compile the op for that dtype."""

    def build():
        from numba import typeof
        from numba.core import types
        from numba.core.errors import NumbaError

        from .. import njitcache  # late: it brings the disk cache
        op, acc_t = njit_op(monoid), njit_cast(monoid.dtype)

        def combine(a, b):
            return acc_t(op(a, b))

        parts = [typeof(d.type(0)) for d in fields(monoid.dtype)]
        t = types.Tuple(parts) if is_tuple(monoid.dtype) else parts[0]
        why = None
        try:
            compiled = njitcache.attach(host_njit(combine), ("step", njitcache.op_text(monoid)),
                                        f"the op {monoid.name} ({monoid.dtype})")
            compiled.compile((t, t))
            returned = compiled.nopython_signatures[0].return_type
            scalar = isinstance(returned, (types.Number, types.Boolean))
            if scalar == is_tuple(monoid.dtype):
                # np.float64((a, b)) types as an array, not as an error
                what = "a tuple" if is_tuple(monoid.dtype) else "a scalar"
                why = f"it returns {returned}, not {what}"
        except NumbaError as exc:
            why = str(exc).strip().splitlines()[0]
        if why:
            raise TypeError(
                f"op {monoid.name!r} could not be compiled by Numba for {monoid.dtype} "
                f"(it must take and return values castable to {monoid.dtype}): {why}"
            )
        return compiled

    return KERNELS.get(("check", monoid.cache_key), build)
