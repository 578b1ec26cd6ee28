"""Compile-checking a user's operator before any kernel uses it.

Every backend checks an op on first use: :func:`check_op` compiles
``acc_t(op(a, b))`` with Numba's ``njit`` for two accumulator values, so an op Numba
cannot compile, or whose result cannot be cast to the accumulator (a tuple, a
string), is a TypeError naming the op and the dtype, raised before a kernel is
generated or launched. The check runs once per op code and dtype, and keeps the
compiled step (:func:`compiled_step`) for whatever else runs the op on the host.
A CUDA GPU's kernels check the op on the CUDA target instead
(:func:`check_device_op`): the kernel's compile reuses that compile of the op, and
no host compile is needed.

Everything the host compiles around a user's code uses :func:`host_njit`: Numba's
``njit`` with NumPy's error model, so that a division by zero gives what NumPy
scalars, the simulator and the CUDA target give (``inf``, NaN, or ``0`` for
integers) instead of raising ``ZeroDivisionError``.
"""

from __future__ import annotations

import re

from ..cache import KERNELS
from ..codegen import compile_module, field_cast
from ..dtypes import fields, is_tuple, name

__all__ = ["check_op", "check_device_op", "compiled_step", "host_njit", "njit_cast", "njit_map",
           "njit_op"]


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
        names = {"njit": host_njit, **{f"f{k}_t": d.type for k, d in enumerate(parts)}}
        source = f"@njit\ndef acc_t(v):\n    return {field_cast(len(parts))}\n"
        return compile_module(source, "<pyreduce tuple cast>", names)["acc_t"]

    return KERNELS.get(("cpu", "cast", tuple(dtype.descr)), build)


def _library_builtin(monoid) -> bool:
    """A built-in operator: the library's own, defined per dtype and tested on
    every dtype it accepts, so never compiled only to be checked."""
    return isinstance(monoid.key, tuple) and monoid.key[:1] == ("builtin",)


def check_op(monoid) -> None:
    """A TypeError if Numba cannot compile ``monoid``'s op for its dtype (not
    for a built-in: compiling one on the host just to check it would cost a
    first call a tenth of a second or more)."""
    if _library_builtin(monoid):
        return
    compiled_step(monoid)


def check_device_op(monoid, device_op, gpu) -> None:
    """:func:`check_op` on the CUDA target, for a GPU backend's kernels:
    ``acc_t(op(a, b))`` compiled as a device function of ``gpu`` (``numba.cuda``)
    for two accumulators, ``op`` being ``device_op`` (the op as the kernels call
    it). The kernel's own compile then finds the op compiled for those types,
    so the check costs a first call a small function's compile, where a host
    compile would ready Numba's CPU target for it (a few tenths of a second in
    a new process)."""
    if _library_builtin(monoid):
        return

    def build():
        from numba.core.errors import NumbaError
        from numba.cuda import types
        from numba.cuda.np.numpy_support import from_dtype

        parts = [from_dtype(d) for d in fields(monoid.dtype)]
        t = types.Tuple(parts) if is_tuple(monoid.dtype) else parts[0]
        names = {"gpu": gpu, "op": device_op, "acc_t": monoid.dtype.type}
        if is_tuple(monoid.dtype):  # cast field by field, as the kernels' acc_t does
            cast = field_cast(len(parts))
            names.update({f"f{k}_t": d.type for k, d in enumerate(fields(monoid.dtype))})
        else:
            cast = "acc_t(v)"
        source = (f"@gpu.jit(device=True)\ndef step(a, b):\n    v = op(a, b)\n"
                  f"    return {cast}\n")
        step = compile_module(source, "<pyreduce op check>", names)["step"]
        try:
            # the op's own type first: a tuple where a scalar is due fails the
            # cast, and says less than "it returns a tuple" does
            why = _wrong_result(device_op.compile_device((t, t)).signature.return_type,
                                monoid.dtype, types)
            if why is None:
                step.compile_device((t, t))
        except NumbaError as exc:
            why = numba_reason(exc)
        if why:
            raise TypeError(_uncompiled(monoid, why))
        return True

    KERNELS.get(("check", "cuda", monoid.cache_key), build)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def numba_reason(exc) -> str:
    """The line of a Numba compile error that says what went wrong: its first
    line that is not Numba's "Failed in ... pipeline" header, without the
    terminal's colour codes."""
    lines = [_ANSI.sub("", line).strip() for line in str(exc).splitlines()]
    lines = [line for line in lines if line]
    for line in lines:
        if not line.startswith("Failed in "):
            return line
    return lines[0] if lines else type(exc).__name__


def _wrong_result(returned, dtype, types) -> str | None:
    """Why an op returning the Numba type ``returned`` cannot give an
    accumulator of ``dtype`` (a scalar, or a tuple for a tuple dtype), or None."""
    scalar = isinstance(returned, (types.Number, types.Boolean))
    if scalar == is_tuple(dtype):
        # np.float64((a, b)) types as an array, not as an error
        what = "a tuple" if is_tuple(dtype) else "a scalar"
        return f"it returns {returned}, not {what}"
    return None


def _uncompiled(monoid, why: str) -> str:
    dtype = name(monoid.dtype)
    return (f"op {monoid.name!r} could not be compiled by Numba for {dtype} "
            f"(it must take and return values castable to {dtype}): {why}")


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
            why = _wrong_result(compiled.nopython_signatures[0].return_type, monoid.dtype,
                                types)
        except NumbaError as exc:
            why = numba_reason(exc)
        if why:
            raise TypeError(_uncompiled(monoid, why))
        return compiled

    return KERNELS.get(("check", monoid.cache_key), build)
