"""Vector loads for generated kernels: ``vloadN(x, i)`` reads ``x[i : i + N]`` with one
wide load and returns the ``N`` values as a tuple.

Numba emits one scalar load per element. Where a lane reads several neighbouring
elements (the order-keeping layout every kernel here uses: lane ``l`` owns items
``l*I .. l*I + I-1``), scalar loads make each warp-wide load instruction touch
every fourth word of a 512-byte span, and the load units, not DRAM, become the
limit. One 16-byte load per lane is what CUB does (``ld.global.v4``), and what lets
a kernel keep the order of a non-commutative op at full bandwidth.

:func:`cuda_vload` builds the load as a Numba ``@intrinsic``: a pointer to
``x[i]`` cast to a vector type and loaded with the vector's alignment. Narrow
elements (1 and 2 bytes) are loaded as 32-bit words and split, because the NVPTX
backend turns a ``<16 x i8>`` load into four 4-byte loads. The caller guarantees
the alignment: ``x`` is contiguous, its address is a multiple of the vector's
size, and ``i`` is a multiple of ``N`` (the planner checks the first two, the
kernels' layout gives the third).

:func:`sim_vload` is the same contract for the CUDA simulator, in plain Python,
with the alignment of ``i`` asserted, so the simulator tests catch a kernel that
would issue a misaligned vector load on a GPU.
"""

from __future__ import annotations

import functools

__all__ = ["cuda_vload", "sim_vload", "VECTOR_BYTES"]

#: The widest load a lane issues (``ld.global.v4.u32``).
VECTOR_BYTES = 16

#: Mark the loads invariant, so the NVPTX backend emits ``ld.global.nc`` (the
#: read-only data path CUB's reductions use): the input is never written while a
#: reduction reads it.
NONCOHERENT = True


@functools.lru_cache(maxsize=None)
def cuda_vload(count: int):
    """The intrinsic ``vload<count>(x, i)`` for numba-cuda kernels."""
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    i32 = ir.IntType(32)
    invariant = NONCOHERENT

    def split_words(builder, vec, count, itemsize, elty):
        """Elements of ``itemsize`` bytes from a vector of 32-bit words (little endian)."""
        per, small = 4 // itemsize, ir.IntType(8 * itemsize)
        out = []
        for k in range(count):
            word = builder.extract_element(vec, ir.Constant(i32, k // per))
            shift = (k % per) * 8 * itemsize
            if shift:
                word = builder.lshr(word, ir.Constant(i32, shift))
            value = builder.trunc(word, small)
            out.append(value if elty == small else builder.bitcast(value, elty))
        return out

    @intrinsic
    def vload(typingctx, arr, idx):
        if not (isinstance(arr, types.Array) and arr.ndim == 1
                and isinstance(idx, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            arrty, idxty = sig.args
            ary = context.make_array(arrty)(context, builder, args[0])
            index = context.cast(builder, args[1], idxty, types.intp)
            ptr = builder.gep(ary.data, [index])
            model = context.data_model_manager[arrty.dtype]
            elty = model.get_data_type()
            itemsize = context.get_abi_sizeof(elty)
            nbytes = count * itemsize
            wide = itemsize >= 4 or nbytes < 4
            vecty = ir.VectorType(elty, count) if wide else ir.VectorType(i32, nbytes // 4)
            vec = builder.load(builder.bitcast(ptr, vecty.as_pointer()), align=nbytes)
            if invariant:
                vec.set_metadata("invariant.load", builder.module.add_metadata([]))
            if wide:
                raw = [builder.extract_element(vec, ir.Constant(i32, k)) for k in range(count)]
            else:
                raw = split_words(builder, vec, count, itemsize, elty)
            values = [model.from_data(builder, v) for v in raw]
            return context.make_tuple(builder, sig.return_type, values)

        return types.UniTuple(arr.dtype, count)(arr, idx), codegen

    vload.__name__ = f"vload{count}"
    return vload


@functools.lru_cache(maxsize=None)
def sim_vload(count: int):
    """``vload<count>(x, i)`` for the CUDA simulator: element loads, alignment checked."""

    def vload(arr, i):
        if i % count:
            raise AssertionError(
                f"vload{count} at index {i}: not a multiple of {count}, so the "
                "load would be misaligned on a GPU"
            )
        return tuple(arr[i + k] for k in range(count))

    vload.__name__ = f"vload{count}"
    return vload
