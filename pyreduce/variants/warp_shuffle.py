"""Warp reductions everywhere, partials through shared memory.

Each warp owns a contiguous ``chunk / warps`` slice of its block's range and walks
it in warp tiles of ``warp * items`` elements: every lane folds ``items``
neighbouring elements, the warp combines its lanes with shuffles (deltas 1, 2, 4,
... so lane order is kept), and lane 0 folds the tile into a running accumulator.
No barrier is needed until the end, where the warps' results meet in shared memory
and warp 0 reduces them in warp order.
"""

from __future__ import annotations

from ..codegen import render
from ..spec import KernelSpec
from ._blocks import block_range, combine, fold_items, snippet, warp_reduce

DESCRIPTION = "warp shuffles per warp tile, warp partials through shared memory"


def build(spec: KernelSpec, dialect, name: str) -> str:
    w, i = spec.warp, spec.items
    return render(
        """
        ${decorator}
        def ${name}(x, n, chunk, out):
        ${range}
            lane = tid % ${W}
            warp = tid // ${W}
            wchunk = chunk // ${NW}
            start = bstart + warp * wchunk
            end = min(start + wchunk, bend)
            partials = ${shared}
            acc = acc_t(0)
            have = False
            base = start
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
                v = acc_t(0)
                if i < end:
        ${fold_tail}
                lanes = (end - base + ${I1}) // ${I}
        ${reduce_tail}
                if have:
                    acc = ${combine_acc}
                else:
                    acc = v
            if lane == 0:
                partials[warp] = acc
            ${sync}
            if warp == 0:
                # warps holding data form a prefix of the block
                used = min((bend - bstart + wchunk - 1) // wchunk, ${NW})
                v = acc_t(0)
                if lane < used:
                    v = partials[lane]
        ${reduce_warps}
                if lane == 0:
                    out[${bid}] = v
        """,
        decorator=dialect.decorator(),
        name=name,
        range=snippet(block_range(dialect), 1),
        W=w, I=i, I1=i - 1, NW=spec.warps, WTILE=w * i,
        shared=dialect.shared_array(spec.warps),
        fold_full=snippet(fold_items(spec, "v", "i", None), 2),
        reduce_full=snippet(warp_reduce(spec, dialect, "v", "lane", None), 2),
        combine_acc=combine("acc", "v"),
        fold_tail=snippet(fold_items(spec, "v", "i", "end"), 3),
        reduce_tail=snippet(warp_reduce(spec, dialect, "v", "lane", "lanes"), 2),
        sync=dialect.syncthreads(),
        reduce_warps=snippet(warp_reduce(spec, dialect, "v", "lane", "used"), 2),
        bid=dialect.block_idx(),
    )
