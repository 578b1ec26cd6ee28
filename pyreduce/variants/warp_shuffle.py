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
Global Data Share step).
"""

from __future__ import annotations

import dataclasses

from ..codegen import render
from ..spec import KernelSpec
from ._blocks import (
    combine, fold_items, prelude, shared_decl, shared_load, snippet, store, warp_reduce, zero,
)

@dataclasses.dataclass(frozen=True)
class Options:
    last_block: bool = False
    #: warp tiles loaded per loop iteration before any is reduced: more bytes in
    #: flight per warp, and independent shuffle chains to overlap
    tiles: int = 1


def _multi_tile(spec: KernelSpec, dialect, src: str, tiles: int, vector: int,
                accs: bool) -> str:
    """A loop over ``tiles`` warp tiles at a time: all loads first, then the
    reductions, then the tiles folded into ``acc`` in order."""
    w, i = spec.warp, spec.items
    loads, reduces, folds = [], [], []
    for u in range(tiles):
        loads.append(f"i = base + {u * w * i} + lane * {i}")
        loads.append(fold_items(spec, f"t{u}", "i", None, src, vector=vector, accs=accs))
        reduces.append(warp_reduce(spec, dialect, f"t{u}", "lane", None))
        first = f"if have:\n    acc = {combine('acc', 't0')}\nelse:\n    acc = t0" if u == 0 \
            else f"acc = {combine('acc', f't{u}')}"
        folds.append(first)
    body = "\n".join(loads + reduces + folds) + f"\nhave = True\nbase += {tiles * w * i}"
    return f"while base + {tiles * w * i} <= end:\n" + snippet(body, 1)


def _block_result(
    spec: KernelSpec, dialect, src: str, n: str, bstart: str, chunk: str, tiles: int = 1,
    vector: int = 1, accs: bool = False,
) -> str:
    """Code leaving the ordered fold of ``src[bstart : bstart + chunk]`` (clipped at
    ``n``) in ``v`` of thread 0. Uses locals ``tid``, ``lane``, ``warp``, ``partials``.
    Full warp tiles are read ``vector`` elements at a time; ``accs``: ``src`` holds
    accumulator values, not elements."""
    w, i = spec.warp, spec.items
    return render(
        """
        bend = min(${bstart} + ${chunk}, ${n})
        wchunk = ${chunk} // ${NW}
        start = ${bstart} + warp * wchunk
        end = min(start + wchunk, bend)
        acc = ${zero}
        have = False
        base = start
        ${multi}
        while base + ${WTILE} <= end:
            i = base + lane * ${I}
        ${fold_full}
        ${reduce_full}
            if have:
                acc = ${combine_acc}
            else:
                acc = v
            have = True
            base += ${WTILE}
        if base < end:
            i = base + lane * ${I}
            v = ${zero}
            if i < end:
        ${fold_tail}
            lanes = (end - base + ${I1}) // ${I}
        ${reduce_tail}
            if have:
                acc = ${combine_acc}
            else:
                acc = v
        if lane == 0:
        ${store_partial}
        ${sync}
        v = ${zero}
        if warp == 0:
            # warps holding data form a prefix of the block
            used = min((bend - ${bstart} + wchunk - 1) // wchunk, ${NW})
            if lane < used:
                v = ${load_partial}
        ${reduce_warps}
        """,
        src=src, n=n, bstart=bstart, chunk=chunk,
        multi=_multi_tile(spec, dialect, src, tiles, vector, accs) if tiles > 1 else "",
        zero=zero(spec),
        store_partial=snippet(store(spec, "partials", "warp", "acc", shared=True), 1),
        load_partial=shared_load(spec, "partials", "lane"),
        W=w, I=i, I1=i - 1, NW=spec.warps, WTILE=w * i,
        fold_full=snippet(fold_items(spec, "v", "i", None, src, vector=vector, accs=accs), 1),
        reduce_full=snippet(warp_reduce(spec, dialect, "v", "lane", None), 1),
        combine_acc=combine("acc", "v"),
        fold_tail=snippet(fold_items(spec, "v", "i", "end", src, accs=accs), 2),
        reduce_tail=snippet(warp_reduce(spec, dialect, "v", "lane", "lanes"), 1),
        sync=dialect.syncthreads(),
        reduce_warps=snippet(
            "if warp == 0:\n" + snippet(warp_reduce(spec, dialect, "v", "lane", "used"), 1), 0
        ),
    )


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
        body=snippet(_block_result(spec, dialect, "x", "n", f"{dialect.block_idx()} * chunk",
                                   "chunk", options.tiles, spec.vector, accs=spec.finish), 1),
    )
    head = prelude(spec, dialect) + head
    if not options.last_block:
        put = store(spec, "out", dialect.block_idx(), "v")
        return head + snippet("if tid == 0:\n" + snippet(put, 1), 1) + "\n"
    # `blocks` holds `head` leading values (an initial value) then one partial per
    # block; the last block to finish reduces all of them in order.
    finish = render(
        """
        last = ${flag}
        if tid == 0:
        ${put_block}
            ${fence}
            last[0] = ${ticket} == ${grid} - 1
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
        fence=dialect.threadfence(),
        ticket=dialect.atomic_inc("ticket"),
        grid=dialect.grid_dim(),
        sync=dialect.syncthreads(),
        TILE=spec.tile, TILE1=spec.tile - 1,
        put_block=snippet(store(spec, "blocks", f"head + {dialect.block_idx()}", "v"), 1),
        put_out=snippet(store(spec, "out", "0", "v"), 2),
        body=snippet(_block_result(spec, dialect, "blocks", "count", "0", "chunk2",
                                   accs=True), 1),
    )
    return head + snippet(finish, 1) + "\n"
