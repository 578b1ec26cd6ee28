""":func:`pyreduce.backends.fastpath.launch` compiled by Numba.

The driver's ``cuCtxGetDevice`` and ``cuLaunchKernel`` are called through their
addresses, read from the parameter words (:class:`pyreduce.backends.fastpath.PreparedLaunch`
keeps them after the parameters), not baked into the code: code holding this
process's addresses could not be reused by another process, this can, so it is
compiled once and then loaded from the disk cache (:mod:`pyreduce.njitcache`).
Imported only where Numba is wanted: importing it imports Numba.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .. import njitcache

__all__ = ["launcher"]

_I32, _I64 = ir.IntType(32), ir.IntType(64)


@intrinsic
def _cu_ctx_get_device(typingctx, address, out):
    """``cuCtxGetDevice((CUdevice *) out)`` through the function at ``address``."""
    sig = types.int32(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(_I32, [_I64])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [args[1]])

    return sig, codegen


@intrinsic
def _cu_launch_kernel(typingctx, address, function, grid, block, stream, params):
    """``cuLaunchKernel(function, grid, 1, 1, block, 1, 1, 0, stream, params, NULL)``
    through the function at ``address`` (handles and pointers as 64-bit ints)."""
    sig = types.int32(types.int64, types.int64, types.int64, types.int64, types.int64,
                      types.int64)

    def codegen(context, builder, signature, args):
        address, function, grid, block, stream, params = args
        fnty = ir.FunctionType(_I32, [_I64] + [_I32] * 7 + [_I64] * 3)
        one, none32, none64 = ir.Constant(_I32, 1), ir.Constant(_I32, 0), ir.Constant(_I64, 0)
        call = [function, builder.trunc(grid, _I32), one, one, builder.trunc(block, _I32), one,
                one, none32, stream, params, none64]
        return builder.call(builder.inttoptr(address, fnty.as_pointer()), call)

    return sig, codegen


@njit(nogil=True)
def _current_device(values):
    # the words after the parameters: scratch, &cuCtxGetDevice, &cuLaunchKernel.
    # CUdevice is an int: it lands in the low half of the zeroed scratch word
    # (CUDA hosts are little-endian)
    n = values.size - 3
    values[n] = 0
    return values[n] if _cu_ctx_get_device(values[n + 1], values.ctypes.data + 8 * n) == 0 else -1


@njit(nogil=True)
def _launch_kernel(values, function, grid, block, stream, params):
    return _cu_launch_kernel(values[values.size - 1], function, grid, block, stream, params)


def launcher(body):
    """A new dispatcher of the compiled launch, kept in the disk cache: ``body``
    (:func:`pyreduce.backends.fastpath._launcher`) over the calls above."""
    return njitcache.attach(njit(nogil=True)(body(_current_device, _launch_kernel)),
                            ("fastpath.launch",), "the launch path")
