"""Reducing across rows: the ``columns`` family.

Output ``m = mo * Mi + mi`` folds, for ``k`` in order, the element at
``off + mo * so + mi * si + k * ks`` (the description of
:class:`pyreduce.axes.Strided`) where the *outputs* are the adjacent ones
(``si == 1``): a sum over axis 0 of a C-contiguous matrix, say. Each thread owns
``items`` neighbouring outputs and walks ``k`` in order, so a warp's loads of
one row are adjacent in memory (coalesced) and, where the rows are aligned, one
vector load per thread (``vector``) brings all of its outputs' elements of that
row. Rows are loaded ``ROWS`` at a time before any is combined, to keep bytes in
flight; each output is still folded in ``k`` order.

The kernel is ``(x, off, M, Mi, so, si, K, ks, parts, grain, out, init)``, the
``rows`` convention of :mod:`pyreduce.variants.segments` (``grain`` unused,
except by the narrow kernel below).
Block ``b`` covers outputs ``[t * block * items, (t + 1) * block * items)`` of
outer index ``mo`` for rows ``[part * R, (part + 1) * R)``, ``R = ceil(K /
parts)``, where ``t = b % tiles``, ``mo = (b // tiles) % Mo`` and ``part = b //
(tiles * Mo)``: neighbouring blocks read neighbouring columns of the same rows.
With ``split`` (``parts > 1``: few outputs, many rows) block part ``p`` writes
``out[p * M + m]``, and a finishing pass of this same kernel reduces those
``parts`` rows of ``M`` partials (``off = so = 0``, ``si = 1``, ``ks = M``). With
``initial`` each output is ``op(init[0], fold)``.

Narrow columns (``narrow``: fewer outputs ``Mi`` than a warp's loads,
commutative ops only): a row of ``Mi`` outputs would leave lanes of a warp idle
and its loads short, so the kernel reads ``g = grain`` consecutive rows as one
*wide row* of ``W = g * Mi`` columns (the planner makes ``W`` a multiple of ``items`` and at
most :func:`fold_width`): column ``c`` of wide row ``w`` is element ``c % Mi``
of row ``w * g + c // Mi``. Where the rows are adjacent (``unit``: ``si == 1``
and ``ks == Mi``) a wide row is ``W`` adjacent elements, read as the columns
kernel reads a row (vector loads where aligned); otherwise each column's offset
is computed once per thread. A block (one per ``mo`` and part: ``mo = b % Mo``,
``part = b // Mo``) walks wide rows ``[part * R, (part + 1) * R)`` of the ``Kw =
K // g`` full ones, ``R = ceil(Kw / parts)``; the last part also folds the
``K - Kw * g`` rows left over, which lie in wide row ``Kw`` as its first
columns. The block then folds its ``g`` groups of ``Mi`` columns into ``Mi``
values in shared memory (a tree, which reorders: hence commutative ops only)
and writes them as the columns kernel writes outputs (``out[part * M + m]``
with ``split``), each thread every ``block``-th output from its index on. The
finishing pass reads those ``parts`` rows of ``M`` partials as one row of ``M``
outputs (``Mi = M``): this kernel again, with ``finish``, where ``M`` is below
a warp, else the columns kernel.

With an element map (``mapped``) the element of row ``k`` is reduced as
``fmap(k, element)``: its position in the output's lane, whatever part it lies
in (in a wide row ``w``, column ``c``'s row ``w * g + c // Mi``). Tuple
accumulators go through the helpers of :mod:`pyreduce.variants._blocks`
(``out``, ``init``, the partials and the narrow kernel's shared memory are then
record arrays or one array per field).
"""

from __future__ import annotations

import numpy as np

from ..codegen import render
from ..spec import BatchSpec
from ._blocks import (
    acc_load, combine, element, fold_loop, load_items, prelude, put_result, shared_decl,
    shared_load, snippet, store, tile_summary, zero,
)
from .segments import arguments

__all__ = ["build", "fold_width", "ROWS", "FOLD_BYTES"]

#: rows loaded per loop iteration before they are combined
ROWS = 4
#: the most shared memory a narrow kernel folds its wide row's columns in: 8
#: blocks of it fit an SM's shared memory with room to spare, and it is below
#: every GPU's 48 KiB of static shared memory per block
FOLD_BYTES = 16384


def fold_width(block: int, items: int, acc_dtype) -> int:
    """The most columns of a wide row a narrow kernel of ``block`` threads of
    ``items`` outputs folds: its threads' outputs, as far as :data:`FOLD_BYTES`
    of accumulators allow. The planner's wide rows and the kernel's shared
    array both follow it."""
    return min(block * items, FOLD_BYTES // np.dtype(acc_dtype).itemsize)


def _write(spec: BatchSpec, index: str, value: str) -> str:
    """Output ``index``'s ``value`` written: a part's partial, or the output
    (``initial`` combined on its left; finished where the spec finishes)."""
    if spec.split:
        return store(spec, "out", f"part * M + {index}", value)
    if spec.initial:
        value = combine(acc_load(spec, "init", "0"), value)
    return put_result(spec, "out", index, value)


def _position(spec: BatchSpec, k: str, j: int | None) -> str:
    """The element map's index of item ``j`` of (wide) row ``k``: ``k`` itself,
    or in a wide row the row its column ``j`` lies in (``r{j}``)."""
    if not spec.narrow:
        return k
    return f"({k}) * g + r{j}" if " " in k else f"{k} * g + r{j}"


def _element(spec: BatchSpec, index: str, value: str, k: str, j: int | None = None) -> str:
    """Element ``x[index]`` (``value`` holds it), item ``j`` of row ``k``, as an
    accumulator: through the element map, or read as one by a finishing pass."""
    return element(spec, "x", index, value, spec.finish, _position(spec, k, j))


def _stride(spec: BatchSpec) -> str:
    """Elements from a row the thread walks to the next: ``ks``, or ``G = g *
    ks`` between wide rows."""
    return "G" if spec.narrow else "ks"


def _index(spec: BatchSpec, first: str, j: int) -> str:
    """The index into ``x`` of this thread's item ``j`` of the row whose first
    item is ``x[first]``: adjacent items, every ``si``-th, or a wide row's
    columns at their own offsets ``o{j}`` (from ``first``, the row's start)."""
    if spec.narrow and not spec.unit:
        return f"{first} + o{j}"
    if not j:
        return first
    return f"{first} + {j}" if spec.unit else f"{first} + {j} * si"


def _row(spec: BatchSpec, dst: str, first: str) -> tuple[list, list, list]:
    """``(loads, values, indices)``: loads of this thread's ``items`` outputs'
    elements of the row at ``x[first]`` (see :func:`_index`), the expression of
    each and its index into ``x``."""
    index = [_index(spec, first, j) for j in range(spec.items)]
    if spec.unit:
        return (*load_items(dst, first, "x", spec.items, spec.vector), index)
    return [], [f"x[{i}]" for i in index], index


def _rows_at(spec: BatchSpec, k: str) -> tuple[list, list]:
    """``(loads, rows)``: the loads of the :data:`ROWS` rows from row ``k`` on
    and, for each row, a ``(loaded value, element as an accumulator)`` pair
    for each of the thread's outputs."""
    stride, loads, rows = _stride(spec), [], []
    for r in range(ROWS):
        row_loads, values, index = _row(spec, f"r{r}", f"p{r}")
        loads += [f"p{r} = base + ({k} + {r}) * {stride}" if r else f"p0 = base + {k} * {stride}",
                  *row_loads]
        at = f"{k} + {r}" if r else k
        rows.append([(values[j], _element(spec, index[j], values[j], at, j))
                     for j in range(spec.items)])
    return loads, rows


def _runs(spec: BatchSpec, k: str) -> str:
    """The :data:`ROWS` rows from row ``k`` on folded into ``a0, a1, ...``:
    each row's elements in order, or with :attr:`BatchSpec.f32_tiles` each
    output's run of them summarised in float32 first (``u{j}``) and folded
    once (a run float32 cannot summarise folded element by element, its rows
    after the first loaded again, :func:`_run_again`)."""
    loads, rows = _rows_at(spec, k)
    steps = []
    if spec.f32_tiles:
        for j in range(spec.items):
            run = [rows[r][j] for r in range(ROWS)]
            steps += tile_summary(spec, f"u{j}", [v for v, _ in run],
                                  _run_again(spec, f"u{j}", k, j, run[0][1]), k)
            steps.append(f"a{j} = {combine(f'a{j}', f'u{j}')}")
    else:
        for r in range(ROWS):
            steps += [f"a{j} = {combine(f'a{j}', rows[r][j][1])}" for j in range(spec.items)]
    return "\n".join(loads + steps)


def _run_again(spec: BatchSpec, dst: str, k: str, j: int, first: str) -> list[str]:
    """Lines folding into ``dst`` output ``j``'s elements of the :data:`ROWS`
    rows from row ``k`` on, one by one: ``first`` (the first row's, as loaded),
    then the others read again by a loop (:func:`pyreduce.variants._blocks.fold_loop`)."""
    def item(r):
        if r is None:
            return first
        index = _index(spec, f"base + ({k} + {r}) * {_stride(spec)}", j)
        return _element(spec, index, f"x[{index}]", f"{k} + {r}", j)

    return fold_loop(dst, ROWS, item)


def _walk(spec: BatchSpec) -> str:
    """Every one of the thread's ``items`` outputs exists: ``a0, a1, ...`` fold
    rows ``[k0, k1)`` (``k1 > k0``) from ``x[base]`` on, unrolled, no guards:
    the first row, then :data:`ROWS` rows at a time (:func:`_runs`: one copy of
    their code, which :attr:`BatchSpec.f32_tiles` makes long), then one at a
    time."""
    c, stride = spec.items, _stride(spec)
    first_loads, first_items, first_index = _row(spec, "f", "p")
    start = ["p = base + k0 * " + stride, *first_loads]
    start += [f"a{j} = {_element(spec, first_index[j], first_items[j], 'k0', j)}"
              for j in range(c)]
    one_loads, one_items, one_index = _row(spec, "q", "p")
    one = [f"a{j} = {combine(f'a{j}', _element(spec, one_index[j], one_items[j], 'k', j))}"
           for j in range(c)]
    return "\n".join(start) + "\nk = k0 + 1\n" + render(
        """
        while k + ${R} <= k1:
        ${step}
            k += ${R}
        while k < k1:
            p = base + k * ${stride}
        ${one}
            k += 1
        """,
        R=ROWS, stride=stride, step=snippet(_runs(spec, "k"), 1),
        one=snippet("\n".join(one_loads + one), 1),
    )


def _full(spec: BatchSpec) -> str:
    """The columns kernel's thread of ``items`` outputs that all exist: its walk,
    then its writes."""
    writes = [_write(spec, f"m + {j}" if j else "m", f"a{j}") for j in range(spec.items)]
    return _walk(spec) + "\n".join(writes) + "\n"


def _tail(spec: BatchSpec) -> str:
    """The last outputs of a row of outputs, fewer than ``items``: one at a time."""
    return render(
        """
        c = 0
        while mi + c < Mi:
            q = base + c * si
            a = ${first}
            k = k0 + 1
            while k < k1:
                a = ${step}
                k += 1
            ${write}
            c += 1
        """,
        first=_element(spec, "q + k0 * ks", "x[q + k0 * ks]", "k0"),
        step=combine("a", _element(spec, "q + k * ks", "x[q + k * ks]", "k")),
        write=snippet(_write(spec, "m + c", "a"), 1).lstrip(),
    )


def _columns(spec: BatchSpec, dialect, name: str) -> str:
    span = spec.block * spec.items
    return render(
        """
        ${decorator}
        def ${name}(${args}):
            tid = ${tid}
            tiles = (Mi + ${SPAN1}) // ${SPAN}
            t = ${bid} % tiles
            rest = ${bid} // tiles
            Mo = M // Mi
            mo = rest % Mo
            part = rest // Mo
            mi = t * ${SPAN} + tid * ${C}
            if mi < Mi:
                rows = (K + parts - 1) // parts
                k0 = part * rows
                k1 = min(k0 + rows, K)
                base = off + mo * so + mi * si
                m = mo * Mi + mi
                if mi + ${C} <= Mi:
        ${full}
                else:
        ${tail}
        """,
        decorator=dialect.decorator(spec.block), name=name,
        args=", ".join(arguments("rows")), tid=dialect.thread_idx(), bid=dialect.block_idx(),
        SPAN=span, SPAN1=span - 1, C=spec.items,
        full=snippet(_full(spec), 3), tail=snippet(_tail(spec), 3),
    )


def _wide_columns(spec: BatchSpec) -> str:
    """Locals ``r{j}`` (the row in its wide row of the thread's column ``c + j``)
    and, where the wide row is not adjacent elements, ``o{j}`` (that column's
    offset from the wide row's start)."""
    column = [f"c + {j}" if j else "c" for j in range(spec.items)]
    lines = [f"r{j} = ({c}) // Mi" if j else "r0 = c // Mi" for j, c in enumerate(column)]
    if not spec.unit:
        lines += [f"o{j} = r{j} * ks + ({c} - r{j} * Mi) * si" for j, c in enumerate(column)]
    return "\n".join(lines)


def _leftover(spec: BatchSpec) -> str:
    """The rows left over after the last full wide row (``rem`` of them, in wide
    row ``Kw`` as its first ``rem * Mi`` columns): folded into the thread's
    ``a{j}``, or their first values where the part walked no full wide row."""
    lines = ["p = base + Kw * G"]
    for j in range(spec.items):
        index = _index(spec, "p", j)
        value = _element(spec, index, f"x[{index}]", "Kw", j)
        lines.append(render(
            """
            if r${j} < rem:
                if have:
                    a${j} = ${combined}
                else:
                    a${j} = ${value}
            """, j=j, value=value, combined=combine(f"a{j}", value)).strip("\n"))
    return "\n".join(lines)


def _fold_groups(spec: BatchSpec, dialect) -> str:
    """The block's ``count`` groups of ``Mi`` columns in shared ``S`` folded into
    the first group: a tree, halving the groups each step (every thread runs it;
    it has barriers)."""
    return render(
        """
        n = count
        while n > 1:
            h = (n + 1) // 2
            i = tid
            while i < (n - h) * Mi:
                u = ${left}
                w = ${right}
        ${store}
                i += ${B}
            ${sync}
            n = h
        """,
        left=shared_load(spec, "S", "i"), right=shared_load(spec, "S", "i + h * Mi"),
        store=snippet(store(spec, "S", "i", combine("u", "w"), shared=True), 2),
        B=spec.block, sync=dialect.syncthreads(),
    )


def _narrow(spec: BatchSpec, dialect, name: str) -> str:
    """The narrow kernel (the module docstring): walk, leftover rows, the
    groups folded in shared memory, one write per output."""
    c = spec.items
    shared = [store(spec, "S", f"c + {j}" if j else "c", f"a{j}", shared=True)
              for j in range(c)]
    return render(
        """
        ${decorator}
        def ${name}(${args}):
            tid = ${tid}
        ${shared}
            Mo = M // Mi
            mo = ${bid} % Mo
            part = ${bid} // Mo
            g = grain
            Kw = K // g
            rem = K - Kw * g
            rows = (Kw + parts - 1) // parts
            k0 = part * rows
            k1 = min(k0 + rows, Kw)
            have = k1 > k0
            # groups of Mi columns holding data: all after a full wide row, else
            # the leftover rows' (a part with no full wide row is the only part)
            count = g if have else rem
            c = tid * ${C}
            if c < g * Mi:
                G = g * ks
        ${columns}
                base = off + mo * so${column}
                # placeholders (Numba types every path): each is assigned
                # before it is stored
        ${zeros}
                if have:
        ${walk}
                if part == parts - 1 and rem > 0:
        ${leftover}
        ${stores}
            ${sync}
        ${fold}
            o = tid
            while o < Mi:
                v = ${result}
        ${write}
                o += ${B}
        """,
        decorator=dialect.decorator(spec.block), name=name,
        args=", ".join(arguments("rows")), tid=dialect.thread_idx(), bid=dialect.block_idx(),
        shared=snippet(shared_decl(spec, dialect, "S",
                                   fold_width(spec.block, c, spec.acc_dtype)), 1),
        C=c, column=" + c" if spec.unit else "",
        columns=snippet(_wide_columns(spec), 2),
        zeros=snippet("\n".join(f"a{j} = {zero(spec)}" for j in range(c)), 2),
        walk=snippet(_walk(spec), 3), leftover=snippet(_leftover(spec), 3),
        stores=snippet("\n".join(f"if r{j} < count:\n" + snippet(s, 1)
                                 for j, s in enumerate(shared)), 2),
        sync=dialect.syncthreads(), fold=snippet(_fold_groups(spec, dialect), 1),
        result=shared_load(spec, "S", "o"), B=spec.block,
        write=snippet(_write(spec, "mo * Mi + o", "v"), 2),
    )


def build(spec: BatchSpec, dialect, name: str) -> str:
    return prelude(spec, dialect) + (_narrow if spec.narrow else _columns)(spec, dialect, name)
