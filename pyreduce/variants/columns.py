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
``rows`` convention of :mod:`pyreduce.variants.segments` (``grain`` unused).
Block ``b`` covers outputs ``[t * block * items, (t + 1) * block * items)`` of
outer index ``mo`` for rows ``[part * R, (part + 1) * R)``, ``R = ceil(K /
parts)``, where ``t = b % tiles``, ``mo = (b // tiles) % Mo`` and ``part = b //
(tiles * Mo)``: neighbouring blocks read neighbouring columns of the same rows.
With ``split`` (``parts > 1``: few outputs, many rows) block part ``p`` writes
``out[p * M + m]``, and a finishing pass of this same kernel reduces those
``parts`` rows of ``M`` partials (``off = so = 0``, ``si = 1``, ``ks = M``). With
``initial`` each output is ``op(init[0], fold)``.

With an element map (``mapped``) the element of row ``k`` is reduced as
``fmap(k, element)``: its position in the output's lane, whatever part it lies
in. Tuple accumulators go through the helpers of
:mod:`pyreduce.variants._blocks` (``out``, ``init`` and the partials are then
record arrays).
"""

from __future__ import annotations

from ..codegen import render
from ..spec import BatchSpec
from ._blocks import acc_load, combine, element, load_items, prelude, snippet, store
from .segments import arguments

__all__ = ["build", "ROWS"]

#: rows loaded per loop iteration before they are combined
ROWS = 4


def _write(spec: BatchSpec, index: str, value: str) -> str:
    if spec.split:
        return store(spec, "out", f"part * M + {index}", value)
    if spec.initial:
        return store(spec, "out", index, combine(acc_load(spec, "init", "0"), value))
    return store(spec, "out", index, value)


def _element(spec: BatchSpec, index: str, value: str, k: str) -> str:
    """Element ``x[index]`` of row ``k`` (``value`` holds it) as an accumulator:
    through the element map, or read as one by a finishing pass."""
    return element(spec, "x", index, value, spec.finish, k)


def _row(spec: BatchSpec, dst: str, first: str) -> tuple[list, list, list]:
    """``(loads, values, indices)``: loads of this thread's ``items`` outputs'
    elements of the row whose first element is ``x[first]``, the expression of
    each and its index into ``x``."""
    if spec.unit:
        index = [f"{first}{f' + {j}' if j else ''}" for j in range(spec.items)]
        return (*load_items(dst, first, "x", spec.items, spec.vector), index)
    index = [f"{first}{f' + {j} * si' if j else ''}" for j in range(spec.items)]
    return [], [f"x[{i}]" for i in index], index


def _full(spec: BatchSpec) -> str:
    """Every one of the thread's ``items`` outputs exists: unrolled, no guards."""
    c = spec.items
    first_loads, first_items, first_index = _row(spec, "f", "p")
    lines = ["p = base + k0 * ks", *first_loads]
    lines += [f"a{j} = {_element(spec, first_index[j], first_items[j], 'k0')}"
              for j in range(c)]
    step_loads, steps = [], []
    for r in range(ROWS):
        loads, items, index = _row(spec, f"r{r}", f"p{r}")
        step_loads += [f"p{r} = base + (k + {r}) * ks", *loads]
        k = f"k + {r}" if r else "k"
        steps += [f"a{j} = {combine(f'a{j}', _element(spec, index[j], items[j], k))}"
                  for j in range(c)]
    one_loads, one_items, one_index = _row(spec, "q", "p")
    one = [f"a{j} = {combine(f'a{j}', _element(spec, one_index[j], one_items[j], 'k'))}"
           for j in range(c)]
    writes = [_write(spec, f"m + {j}" if j else "m", f"a{j}") for j in range(c)]
    return render(
        """
        ${first}
        k = k0 + 1
        while k + ${R} <= k1:
        ${step}
            k += ${R}
        while k < k1:
            p = base + k * ks
        ${one}
            k += 1
        ${writes}
        """,
        first="\n".join(lines), R=ROWS,
        step=snippet("\n".join(step_loads + steps), 1),
        one=snippet("\n".join(one_loads + one), 1), writes="\n".join(writes),
    )


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


def build(spec: BatchSpec, dialect, name: str) -> str:
    span = spec.block * spec.items
    return prelude(spec, dialect) + render(
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
