"""Prefix scans of rows, a block per tile: the ``scan`` family.

The input is ``R`` rows of ``L`` adjacent elements (``x[r*L : (r+1)*L]``), each
cut into ``P = ceil(L / tile)`` tiles of ``tile = block * items`` elements;
block ``b`` owns tile ``b % P`` of row ``b // P``. A scan takes three phases
(:mod:`pyreduce.prefix` launches them), and this family writes the two kernels:

``split`` (the *totals* kernel), ``(x, L, P, out)``
    ``out[b]`` is the ordered fold of block ``b``'s tile
    (:func:`~pyreduce.variants._blocks.block_fold`).
otherwise (the *scan* kernel), ``(x, L, P, out, seeds, init, shift)``
    every element of block ``b``'s tile gets its inclusive prefix within the
    row, seeded by ``seeds[b - 1]`` (the fold of the row's earlier tiles, read
    only for a tile other than the row's first) and, with ``initial``,
    ``init[0]`` on the left of everything. With ``shift = 1`` the prefix of
    element ``i`` is written to ``out[i + 1]`` and each row's first output is
    ``init[0]``: an exclusive scan.

Within a tile, thread ``t`` owns the ``items`` neighbouring elements from
``t * items``: it folds them to a total, the warp scans its lanes' totals with
shuffles (Hillis-Steele: at step ``d`` lane ``l`` takes lane ``l - d``'s value
on its *left*), the warps' totals meet in shared memory where warp 0 scans them
the same way, and each thread then reads its items again, scanning them in order
from its exclusive prefix. Every combination keeps the operands in index order,
so any associative operator is exact; only lanes and warps holding data combine
(they form a prefix), so no identity is needed.

``finish``: ``x`` holds accumulator values (the totals of an earlier level).
"""

from __future__ import annotations

from ..codegen import render
from ..spec import BatchSpec
from ._blocks import (
    block_fold, combine, element, fold_items, shared_decl, shared_load, shuffle_idx, snippet,
    store, zero,
)

__all__ = ["build", "arguments"]


def arguments(totals: bool) -> tuple[str, ...]:
    """The kernel's parameters: the totals kernel's, or the scan kernel's."""
    if totals:
        return ("x", "L", "P", "out")
    return ("x", "L", "P", "out", "seeds", "init", "shift")


def _tile(dialect) -> str:
    """Locals ``tid``, ``lane``, ``warp``, ``rstart``/``rend`` (this block's
    row), ``part`` and ``base``/``end`` (its tile)."""
    return snippet(f"""
        tid = {dialect.thread_idx()}
        blk = {dialect.block_idx()}
        row = blk // P
        part = blk - row * P
        rstart = row * L
        rend = rstart + L
        base = rstart + part * TILE
        end = min(base + TILE, rend)
    """, 0)


def _totals(spec: BatchSpec, dialect) -> str:
    # block_fold steps a local ``base`` of its own: the tile's start is ``tstart``
    fold = block_fold(spec, dialect, "x", n="rend", bstart="tstart", chunk=str(spec.tile),
                      accs=spec.finish)
    return render(
        """
        ${tile}
        lane = tid % ${W}
        warp = tid // ${W}
        ${shared}
        tstart = base
        ${fold}
        if tid == 0:
            ${write}
        """,
        tile=_tile(dialect).replace("TILE", str(spec.tile)), W=spec.warp,
        shared=shared_decl(spec, dialect, "partials", spec.warps),
        fold=fold, write=store(spec, "out", "blk", "v"),
    )


def _lane_scan(spec, dialect, var: str, valid: str) -> str:
    """``var`` scanned inclusively across the lanes below ``valid`` (a prefix of
    the warp), in lane order; every lane executes every shuffle."""
    s, d, other = f"{var}_s", f"{var}_d", f"{var}_o"
    return "\n".join([
        f"for {s} in range({spec.warp.bit_length() - 1}):",
        f"    {d} = 1 << {s}",
        f"    {other} = {shuffle_idx(spec, dialect, var, f'lane - {d} if lane >= {d} else lane')}",
        f"    if lane >= {d} and lane < {valid}:",
        f"        {var} = {combine(other, var)}",
    ])


def _scan(spec: BatchSpec, dialect) -> str:
    i, accs = spec.items, spec.finish
    earlier = element(spec, "seeds", "blk - 1", accs=True)
    if spec.initial:  # init[0] on the left of every row
        seed = (f"if part > 0:\n    seed = {combine('init[0]', earlier)}\n"
                "else:\n    seed = init[0]\nseeded = True")
    else:
        seed = f"seeded = part > 0\nif seeded:\n    seed = {earlier}"
    return render(
        """
        ${tile}
        lane = tid % ${W}
        warp = tid // ${W}
        ${shared}
        first = base + tid * ${I}
        # threads, and warps, holding data: a prefix of the block
        threads = (end - base + ${I1}) // ${I}
        inwarp = threads - warp * ${W}
        t = ${zero}
        if first < end:
        ${fold}
        ${lane_scan}
        if inwarp > 0 and lane == min(inwarp, ${W}) - 1:
        ${store_warp}
        ${sync}
        if warp == 0:
            used = (threads + ${W1}) // ${W}
            w = ${zero}
            if lane < used:
                w = ${load_lane}
        ${warp_scan}
            if lane < used:
        ${store_lane}
        ${sync}
        left = ${left}
        pre = ${zero}
        have = False
        if warp > 0:
            pre = ${load_prev}
            have = True
        if lane > 0:
            if have:
                pre = ${pre_left}
            else:
                pre = left
            have = True
        seed = ${zero}
        ${seed}
        if seeded:
            if have:
                pre = ${seed_pre}
            else:
                pre = seed
            have = True
        if shift and part == 0 and tid == 0 and L > 0:
            out[rstart] = init[0]
        if first < end:
            for k in range(${I}):
                i = first + k
                if i < end:
                    v = ${item}
                    if have:
                        pre = ${step}
                    else:
                        pre = v
                    have = True
                    if i + shift < rend:
        ${write}
        """,
        tile=_tile(dialect).replace("TILE", str(spec.tile)),
        W=spec.warp, W1=spec.warp - 1, I=i, I1=i - 1, zero=zero(spec),
        shared=shared_decl(spec, dialect, "partials", spec.warps),
        fold=snippet(fold_items(spec, "t", "first", "end", accs=accs), 1),
        lane_scan=_lane_scan(spec, dialect, "t", "inwarp"),
        store_warp=snippet(store(spec, "partials", "warp", "t", shared=True), 1),
        sync=dialect.syncthreads(),
        load_lane=shared_load(spec, "partials", "lane"),
        warp_scan=snippet(_lane_scan(spec, dialect, "w", "used"), 1),
        store_lane=snippet(store(spec, "partials", "lane", "w", shared=True), 2),
        left=shuffle_idx(spec, dialect, "t", "lane - 1 if lane > 0 else 0"),
        load_prev=shared_load(spec, "partials", "warp - 1"),
        pre_left=combine("pre", "left"),
        seed=seed,
        seed_pre=combine("seed", "pre"),
        item=element(spec, "x", "i", accs=accs),
        step=combine("pre", "v"),
        write=snippet(store(spec, "out", "i + shift", "pre"), 6),
    )


def build(spec: BatchSpec, dialect, name: str) -> str:
    body = _totals(spec, dialect) if spec.split else _scan(spec, dialect)
    return render(
        """
        ${decorator}
        def ${name}(${args}):
        ${body}
        """,
        decorator=dialect.decorator(spec.block), name=name,
        args=", ".join(arguments(spec.split)), body=snippet(body, 1),
    )
