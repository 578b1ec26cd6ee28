"""Snippets shared by the kernel factories: the unrolled pieces every variant needs.

The calling convention of every generated kernel is ``kernel(x, n, chunk, out)``:
``x`` is the 1-D input (any stride), ``n`` its length, ``chunk`` the number of
elements each block owns (a multiple of the spec's tile, so warps and threads get
whole tiles), and ``out[blockIdx]`` receives the block's result. Block ``b`` owns
``x[b*chunk : (b+1)*chunk]``; blocks are combined in block order by the driver, so
ranges never interleave and non-commutative ops stay in order.

No kernel needs an identity: out-of-range elements are never combined. Whatever is
valid is always a *prefix* (of a thread's items, of a warp's lanes, of a block's
threads), so one count says what may be combined.
"""

from __future__ import annotations

from ..codegen import indent, render

__all__ = ["combine", "load_items", "fold_items", "warp_reduce", "block_range", "warp_fold", "block_fold"]


def combine(a: str, b: str) -> str:
    """``op(a, b)`` cast back to the accumulator: integers wrap, as in NumPy."""
    return f"acc_t(op({a}, {b}))"


def block_range(dialect) -> str:
    """Locals ``tid``, ``bstart``, ``bend``: this block's slice of ``x``."""
    return f"""
        tid = {dialect.thread_idx()}
        bstart = {dialect.block_idx()} * chunk
        bend = min(bstart + chunk, n)
    """


def load_items(dst: str, first: str, count: int, vector: int = 1, src: str = "x",
               at=None) -> tuple[list, list]:
    """``(lines, items)``: the statements loading ``src[first : first + count]``
    and the expression of each item. With ``vector > 1`` they are read ``vector``
    at a time with ``vloadN`` into locals ``{dst}_{k}`` (``first`` must then be a
    multiple of ``vector``, and ``src`` aligned: only the kernel input
    qualifies); otherwise each item is its own load, ``at(index)`` (default
    ``src[index]``)."""
    if at is None:
        at = f"{src}[{{}}]".format
    if vector > 1:
        lines = [f"{dst}_{k} = vload{vector}({src}, {first}{f' + {k}' if k else ''})"
                 for k in range(0, count, vector)]
        return lines, [f"{dst}_{k - k % vector}[{k % vector}]" for k in range(count)]
    return [], [at(f"{first}{f' + {k}' if k else ''}") for k in range(count)]


def fold_items(
    spec, dst: str, first: str, end: str | None, src: str = "x",
    count: int | None = None, vector: int = 1, at=None,
) -> str:
    """Fold ``src[first : first + count]`` (``count`` defaults to the spec's items)
    in order into ``dst``, unrolled.

    With ``end`` given, items at or past ``end`` are skipped (the caller ensures
    ``first < end``, so ``dst`` always holds at least one element). Without it the
    items are read ``vector`` at a time (:func:`load_items`). ``at`` maps an
    index expression to the expression loading that element, for inputs not
    addressed as ``src[index]`` (a strided row); it reads one element at a time.
    """
    count = spec.items if count is None else count
    width = min(vector, count) if end is None and at is None else 1
    loads, item = load_items(dst, first, count, width, src, at)
    lines = loads + [f"{dst} = acc_t({item[0]})"]
    for k in range(1, count):
        step = f"{dst} = {combine(dst, f'acc_t({item[k]})')}"
        lines.append(step if end is None else f"if {first} + {k} < {end}:\n    {step}")
    return "\n".join(lines)


def warp_reduce(spec, dialect, var: str, lane: str, valid: str | None) -> str:
    """Reduce ``var`` across a warp into lane 0, in lane order.

    Deltas grow 1, 2, 4, ...: after the step with delta ``d`` a lane that is a
    multiple of ``2d`` holds its own ``2d`` lanes combined left to right, so lane 0
    ends with the ordered fold of the warp. With ``valid`` given, only lanes below
    it hold data (a prefix), and a lane combines with its right neighbour only if
    that neighbour is one of them. Every lane executes every shuffle.
    """
    lines = []
    d = 1
    while d < spec.warp:
        other = f"{var}_{d}"
        lines.append(f"{other} = {dialect.shfl_down(var, d, spec.warp)}")
        step = f"{var} = {combine(var, other)}"
        lines.append(step if valid is None else f"if {lane} + {d} < {valid}:\n    {step}")
        d *= 2
    return "\n".join(lines)


def _multi_tile(spec, dialect, src: str, tiles: int, vector: int, at) -> str:
    """A loop over ``tiles`` warp tiles at a time: all loads first, then the
    reductions, then the tiles folded into ``acc`` in order."""
    w, i = spec.warp, spec.items
    loads, reduces, folds = [], [], []
    for u in range(tiles):
        loads.append(f"i = base + {u * w * i} + lane * {i}")
        loads.append(fold_items(spec, f"t{u}", "i", None, src, vector=vector, at=at))
        reduces.append(warp_reduce(spec, dialect, f"t{u}", "lane", None))
        first = f"if have:\n    acc = {combine('acc', 't0')}\nelse:\n    acc = t0" if u == 0 \
            else f"acc = {combine('acc', f't{u}')}"
        folds.append(first)
    body = "\n".join(loads + reduces + folds) + f"\nhave = True\nbase += {tiles * w * i}"
    return f"while base + {tiles * w * i} <= end:\n" + snippet(body, 1)


def warp_fold(spec, dialect, src: str = "x", tiles: int = 1, vector: int = 1,
              at=None) -> str:
    """One warp's ordered fold of ``src[start:end]`` (locals ``start``, ``end``,
    ``lane``) in warp tiles of ``warp * items``: each lane folds its neighbouring
    items, the warp combines its lanes with shuffles, and lane 0 folds the tile
    into ``acc``, which lane 0 holds at the end when the range is not empty.
    Full tiles are read ``vector`` elements at a time, ``tiles`` of them
    per loop iteration; ``at`` as for :func:`fold_items`."""
    w, i = spec.warp, spec.items
    return render(
        """
        acc = acc_t(0)
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
            v = acc_t(0)
            if i < end:
        ${fold_tail}
            lanes = (end - base + ${I1}) // ${I}
        ${reduce_tail}
            if have:
                acc = ${combine_acc}
            else:
                acc = v
        """,
        multi=_multi_tile(spec, dialect, src, tiles, vector, at) if tiles > 1 else "",
        I=i, I1=i - 1, WTILE=w * i,
        fold_full=snippet(fold_items(spec, "v", "i", None, src, vector=vector, at=at), 1),
        reduce_full=snippet(warp_reduce(spec, dialect, "v", "lane", None), 1),
        combine_acc=combine("acc", "v"),
        fold_tail=snippet(fold_items(spec, "v", "i", "end", src, at=at), 2),
        reduce_tail=snippet(warp_reduce(spec, dialect, "v", "lane", "lanes"), 1),
    )


def block_fold(
    spec, dialect, src: str, n: str, bstart: str, chunk: str, tiles: int = 1,
    vector: int = 1, at=None,
) -> str:
    """Code leaving the ordered fold of ``src[bstart : bstart + chunk]`` (clipped at
    ``n``, never empty) in ``v`` of thread 0. ``chunk`` is a multiple of the tile,
    so each warp owns a contiguous slice of whole warp tiles (:func:`warp_fold`);
    the warps' results meet in shared memory and warp 0 reduces them in warp
    order. Uses locals ``tid``, ``lane``, ``warp``, ``partials`` (shared, one slot
    per warp); every thread of the block must run it (it has a barrier)."""
    return render(
        """
        bend = min(${bstart} + ${chunk}, ${n})
        wchunk = ${chunk} // ${NW}
        start = ${bstart} + warp * wchunk
        end = min(start + wchunk, bend)
        ${fold}
        if lane == 0:
            partials[warp] = acc
        ${sync}
        v = acc_t(0)
        if warp == 0:
            # warps holding data form a prefix of the block
            used = min((bend - ${bstart} + wchunk - 1) // wchunk, ${NW})
            if lane < used:
                v = partials[lane]
        ${reduce_warps}
        """,
        n=n, bstart=bstart, chunk=chunk, NW=spec.warps,
        fold=warp_fold(spec, dialect, src, tiles, vector, at).strip("\n"),
        sync=dialect.syncthreads(),
        reduce_warps=snippet(
            "if warp == 0:\n" + snippet(warp_reduce(spec, dialect, "v", "lane", "used"), 1), 0
        ),
    )


def snippet(code: str, level: int) -> str:
    """A snippet indented for the body of a generated function."""
    return indent(code, level)
