"""Warp reductions everywhere, partials through shared memory.

Each warp owns a contiguous ``chunk / warps`` slice of its block's range and walks
it in warp tiles of ``warp * items`` elements: every lane folds ``items``
neighbouring elements, the warp combines its lanes with shuffles (deltas 1, 2, 4,
... so lane order is kept), and lane 0 folds the tile into a running accumulator.
No barrier is needed until the end, where the warps' results meet in shared memory
and warp 0 reduces them in warp order.

With ``last_block`` set the kernel also finishes the reduction in one launch: each
block writes its partial, fences, and takes a ticket from an atomic counter; the
block that draws the last ticket has seen every other block's partial and reduces
them, in block order, with the same code (the NVIDIA counterpart of the tutorial's
Global Data Share step). A grid of one block with no initial value writes its
result directly.

With ``lanes`` set (commutative ops only) a lane keeps one accumulator over all of
its warp's tiles and the warp shuffles once, after the last tile: the same loads
without each tile's shuffle reduction. (On an H100 it was no faster, and took
more registers: docs/kernels.md.)
"""

from __future__ import annotations

import dataclasses

from ..codegen import render
from ..spec import KernelSpec
from ._blocks import block_fold, prelude, put_result, shared_decl, snippet, store

#: the kernel that writes the result may finish it (``spec.finisher``:
#: :func:`pyreduce.variants._blocks.put_result`)
FINISHES = True


@dataclasses.dataclass(frozen=True)
class Options:
    last_block: bool = False
    #: warp tiles loaded per loop iteration before any is reduced: more bytes in
    #: flight per warp, and independent shuffle chains to overlap
    tiles: int = 1
    #: each lane accumulates its own items across tiles, combined once at the end:
    #: reorders elements, so commutative ops only (``_blocks.lane_fold``)
    lanes: bool = False
    #: with ``lanes``: the block reads each block tile as one run, its warps
    #: taking turns and each warp's loads adjacent vectors
    #: (``_blocks.block_fold``), as CUB's striped loads do
    striped: bool = False


def build(spec: KernelSpec, dialect, name: str, options: Options = Options()) -> str:
    head = render(
        """
        ${decorator}
        def ${name}(${args}):
            tid = ${tid}
            lane = tid % ${W}
            warp = tid // ${W}
        ${shared}
        ${body}
        """,
        decorator=dialect.decorator(spec.block),
        name=name,
        args="x, n, chunk, out" + (", blocks, head, ticket" if options.last_block else ""),
        tid=dialect.thread_idx(),
        W=spec.warp,
        shared=snippet(shared_decl(spec, dialect, "partials", spec.warps), 1),
        body=snippet(block_fold(spec, dialect, "x", "n", f"{dialect.block_idx()} * chunk",
                                "chunk", options.tiles, spec.vector, accs=spec.finish,
                                lanes=options.lanes, striped=options.striped), 1),
    )
    head = prelude(spec, dialect) + head
    if not options.last_block:
        put = put_result(spec, "out", dialect.block_idx(), "v")
        return head + snippet("if tid == 0:\n" + snippet(put, 1), 1) + "\n"
    # `blocks` holds `head` leading values (an initial value) then one partial per
    # block; the last block to finish reduces all of them in order. A lone block
    # with nothing ahead of it holds the result already: it skips the fence, the
    # ticket and the second fold (a small input's whole kernel is latency).
    finish = render(
        """
        last = ${flag}
        if tid == 0:
            if ${grid} == 1 and head == 0:
        ${put_out}
                last[0] = 0
            else:
        ${put_block}
        ${ticket}
        ${sync}
        if last[0]:
            count = head + ${grid}
            chunk2 = (count + ${TILE1}) // ${TILE} * ${TILE}
        ${body}
            if tid == 0:
        ${put_out}
                ticket[0] = 0
        """,
        flag=dialect.shared_array(1, "i32"),
        bid=dialect.block_idx(),
        ticket=snippet(dialect.draw_ticket("ticket", "last[0]", dialect.grid_dim()), 2),
        grid=dialect.grid_dim(),
        sync=dialect.syncthreads(),
        TILE=spec.tile, TILE1=spec.tile - 1,
        put_block=snippet(store(spec, "blocks", f"head + {dialect.block_idx()}", "v"), 2),
        put_out=snippet(put_result(spec, "out", "0", "v"), 2),
        body=snippet(block_fold(spec, dialect, "blocks", "count", "0", "chunk2", accs=True,
                                lanes=options.lanes), 1),
    )
    return head + snippet(finish, 1) + "\n"
