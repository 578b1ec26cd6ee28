"""Shared-memory tree with sequential addressing, unrolled, first op during load.

The block walks its range in tiles of ``block * items`` elements. Each thread folds
``items`` neighbouring elements while loading (the tutorial's "first add during
load", generalised) and stores the result in shared memory; then the block halves
the active threads each step, thread ``t`` combining slots ``t`` and ``t + s``
(sequential addressing: the tree's reads are free of bank conflicts). The steps are
unrolled with the strides as literals. Thread 0 folds each tile's result into the
block's accumulator.

Sequential addressing on its own pairs slot ``t`` with ``t + B/2``, far apart in the
input, which only a commutative op tolerates. Order is restored by where the values
are stored: thread ``t`` (holding the ``t``-th run of the tile) writes slot
``bitrev(t)``. Before the step with stride ``s`` slot ``u < 2s`` then holds a run of
whole groups starting at ``bitrev(u)``, and slot ``u + s`` holds the group right
after slot ``u``'s, so every step combines neighbours, left operand first. A group is
non-empty exactly when its first run is below ``valid``, the number of runs holding
data, which gives each step its guard: ``bitrev(t) + B/(2s) < valid``.
"""

from __future__ import annotations

from ..codegen import render
from ..spec import KernelSpec
from ._blocks import block_range, combine, fold_items, snippet

DESCRIPTION = "shared-memory tree, sequential addressing, unrolled, op during load"


def _bitrev(var: str, bits: int) -> str:
    """Expression for ``var`` with its low ``bits`` bits reversed."""
    terms = [f"(({var} >> {k}) & 1) << {bits - 1 - k}" for k in range(bits)]
    return " | ".join(terms) if terms else "0"


def _tree(spec: KernelSpec, dialect) -> str:
    steps = []
    s = spec.block // 2
    while s >= 1:
        steps.append(
            f"if tid < {s} and rt + {spec.block // (2 * s)} < valid:\n"
            f"    sdata[tid] = {combine('sdata[tid]', f'sdata[tid + {s}]')}\n"
            f"{dialect.syncthreads()}"
        )
        s //= 2
    return "\n".join(steps)


def build(spec: KernelSpec, dialect, name: str) -> str:
    return render(
        """
        ${decorator}
        def ${name}(x, n, chunk, out):
        ${range}
            sdata = ${shared}
            rt = ${bitrev}
            acc = acc_t(0)
            first = True
            base = bstart
            while base < bend:
                i = base + tid * ${I}
                if base + ${TILE} <= bend:
        ${fold_full}
                    sdata[rt] = v
                elif i < bend:
        ${fold_tail}
                    sdata[rt] = v
                # threads holding data form a prefix of the block
                valid = min((bend - base + ${I1}) // ${I}, ${B})
                ${sync}
        ${tree}
                if tid == 0:
                    if first:
                        acc = sdata[0]
                    else:
                        acc = ${combine_acc}
                first = False
                base += ${TILE}
            if tid == 0:
                out[${bid}] = acc
        """,
        decorator=dialect.decorator(),
        name=name,
        range=snippet(block_range(dialect), 1),
        shared=dialect.shared_array(spec.block),
        bitrev=_bitrev("tid", spec.block.bit_length() - 1),
        B=spec.block, I=spec.items, I1=spec.items - 1, TILE=spec.tile,
        fold_full=snippet(fold_items(spec, "v", "i", None), 3),
        fold_tail=snippet(fold_items(spec, "v", "i", "bend"), 3),
        sync=dialect.syncthreads(),
        tree=snippet(_tree(spec, dialect), 2),
        combine_acc=combine("acc", "sdata[0]"),
        bid=dialect.block_idx(),
    )
