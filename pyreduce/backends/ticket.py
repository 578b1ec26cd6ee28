"""The single-pass ticket on NVIDIA GPUs: one ``atom.acq_rel.gpu.add``.

A ``last_block`` kernel ends with every block writing its partial and drawing a
ticket from a counter; the block that draws the last ticket reduces the
partials. The draw must *release* the block's partial (the write is visible
before the counter moves) and, for the last block, *acquire* everyone else's
(its later reads see the partials released before the other draws).

``cuda.threadfence()`` followed by ``cuda.atomic.add`` gives that with
``membar.gl``, which PTX defines as ``fence.sc.gpu``: a sequentially consistent
fence, stronger than the release/acquire pair this needs. :func:`cuda_ticket`
asks for exactly the pair, in the atomic itself (PTX ISA 6.0, ``sm_70`` and
later), the way CUTLASS's semaphores use ``red.release.gpu`` and
``ld.acquire.gpu``. The other threads of the last block read the partials after
a ``syncthreads`` that follows the draw, which orders them after its acquire.
"""

from __future__ import annotations

import functools

__all__ = ["cuda_ticket", "PTX"]

#: The instruction: add one to the 32-bit counter, return its old value.
PTX = "atom.acq_rel.gpu.add.u32 $0, [$1], 1;"


@functools.lru_cache(maxsize=None)
def cuda_ticket():
    """``ticket_acq_rel(a)``: add one to ``a[0]`` (an ``int32`` array) with
    acquire-release semantics at device scope, and return the old value."""
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def ticket_acq_rel(typingctx, array):
        if not (isinstance(array, types.Array) and array.dtype == types.int32):
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            i32 = ir.IntType(32)
            ptr = builder.bitcast(ary.data, i32.as_pointer())
            asm = ir.InlineAsm(ir.FunctionType(i32, [ptr.type]), PTX, "=r,l",
                               side_effect=True)
            return builder.call(asm, [ptr])

        return types.int32(array), codegen

    return ticket_acq_rel
