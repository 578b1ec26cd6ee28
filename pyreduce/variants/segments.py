"""Many reductions in one launch, one per row or segment: the ``segments`` family.

A *segment* is a run of elements reduced, in order, to one output. Where it
lies is the spec's ``source``:

``rows``
    output ``m`` (a row of an ``axis=`` reduction) folds the ``K`` elements at
    ``off + (m // Mi) * so + (m % Mi) * si + k * ks`` of ``x``; the kernel is
    ``(x, off, M, Mi, so, si, K, ks, parts, grain, out, init)``.
``offsets``
    output ``m`` folds ``x[offsets[m] : offsets[m + 1]]`` (``x`` 1-D, any
    stride); the kernel is ``(x, n, offsets, M, parts, grain, out, init)``, with
    ``n = len(x)``. Each offset is clamped into ``[0, n]`` and an end below its
    start makes the segment empty, so no offsets array, whatever it holds, makes
    a kernel read outside ``x``.

What reduces one segment is the spec's ``group``:

``thread``
    a thread per segment, a plain ordered loop: segments of a few elements.
    Its loads are strided across the warp (each lane reads its own segment).
``lanes``
    a group of ``lanes`` lanes per segment (a power of two from 2 to half the
    warp), so that a warp reads several whole short segments at once, its loads
    adjacent (and vectors where rows are aligned): the ``warp`` group's code at
    width ``lanes``. Lane ``g`` of a group folds items ``g * items ...`` of each
    group tile of ``lanes * items`` elements, so its items precede lane
    ``g + 1``'s; shuffles within the group (each group's own lanes: groups of
    one warp may loop different numbers of times) combine the lanes in order,
    and the group's lane 0 folds the tiles in order and writes the output.
``warp``
    a warp per segment (:func:`~pyreduce.variants._blocks.warp_fold`): lanes fold
    neighbouring items, shuffles combine the lanes in order, lane 0 folds the
    warp tiles in order.
``block``
    a block per segment, or per part of one
    (:func:`~pyreduce.variants._blocks.block_fold`): each warp owns a contiguous
    slice, the warps meet in shared memory in order.
``staged``
    rows of ``spec.row`` elements one after another (``rows`` only, unit
    stride): a block copies ``block * items`` whole rows into shared memory
    with adjacent loads, then each thread folds ``items`` of them, in order
    (:func:`_staged`).

With ``split`` a block owns one *part* of a segment: segment ``m`` of length
``L`` is cut into pieces of ``chunk(L) = ceil(ceil(L / parts) / grain) * grain``
elements (``grain`` is the first pass's tile, so pieces hold whole tiles), and
block ``m * parts + p`` writes the fold of piece ``p``, if it holds any element,
to ``out[m * parts + p]``. The finishing pass (``finish``) is a kernel of the
same family whose ``x`` is those partials: segment ``m``'s are
``x[m * parts : m * parts + ceil(L / chunk(L))]``, its length ``L`` read from the
same ``rows`` or ``offsets`` description, so both passes agree on which pieces
hold data and no kernel needs an identity to pad with.

An empty segment's output is ``init[0]``: the caller puts the initial value or
the identity there (and never launches with an empty segment when there is
neither). With ``initial`` set every other output is ``op(init[0], fold)``, the
initial value combined once, on the left.

With an element map (``mapped``) element ``k`` of a segment, ``k = 0 .. L-1``
counted from the segment's start whatever part it lies in, is reduced as
``fmap(k, element)``. Accumulators may be tuples: every write of ``out``, read
of ``init`` or of partials goes through the helpers of
:mod:`pyreduce.variants._blocks`, so ``out``, ``init`` and the partials are then
record arrays.
"""

from __future__ import annotations

from ..codegen import render
from ..spec import BatchSpec
from ._blocks import (
    acc_load, block_fold, chain, combine, copy, element, prelude, put_result, shared_decl,
    snippet, store, warp_fold,
)

__all__ = ["build", "arguments"]


def arguments(source: str) -> tuple[str, ...]:
    """The kernel's parameters for a ``source`` (the columns family shares the
    ``rows`` ones)."""
    if source == "rows":
        return ("x", "off", "M", "Mi", "so", "si", "K", "ks", "parts", "grain", "out", "init")
    return ("x", "n", "offsets", "M", "parts", "grain", "out", "init")


def _locate(spec: BatchSpec) -> str:
    """Locals ``origin`` and ``length``: segment ``seg`` is ``length`` elements
    from ``x[origin]`` on (every ``ks``-th where not ``unit``)."""
    if spec.source == "rows":
        code = "origin = off + (seg // Mi) * so + (seg % Mi) * si\nlength = K"
    else:
        code = ("origin = min(max(offsets[seg], 0), n)\n"
                "length = min(max(offsets[seg + 1], origin), n) - origin")
    if spec.finish:  # the first pass's parts of this segment that hold data
        code += (f"\n{_CHUNK}\n"
                 "length = (length + chunk - 1) // chunk if length > 0 else 0\n"
                 "origin = seg * parts")
    return code


_CHUNK = "chunk = ((length + parts - 1) // parts + grain - 1) // grain * grain"


def _at(spec: BatchSpec):
    """Element ``i`` of the segment, counted from its start."""
    if spec.unit:
        return lambda i: f"x[origin + {i}]"
    return lambda i: f"x[origin + ({i}) * ks]"


def _position(spec: BatchSpec):
    """The element map's index of ``x[i]`` where the folds index ``x`` itself
    (adjacent elements: ``i`` counts from ``x[0]``), else None (they count from
    the segment's start already)."""
    if spec.mapped and spec.unit:
        return lambda i: f"{i} - origin"
    return None


def _write(spec: BatchSpec, value: str) -> str:
    """Segment ``seg``'s ``value`` written: a part's partial, or the output
    (``initial`` combined on its left; finished where the spec finishes)."""
    if spec.split:
        return store(spec, "out", "seg * parts + part", value)
    if spec.initial:
        value = combine(acc_load(spec, "init", "0"), value)
    return put_result(spec, "out", "seg", value)


def _empty(spec: BatchSpec) -> str:
    """An empty segment's output: ``init[0]`` (finished where the spec finishes:
    rows are never empty, but the branch is compiled all the same)."""
    if spec.finisher is not None:  # (never with split: BatchSpec refuses it)
        return put_result(spec, "out", "seg", acc_load(spec, "init", "0"))
    return copy(spec, "out", "seg", "init", "0")


def _thread(spec: BatchSpec, dialect) -> str:
    at = _at(spec)
    return render(
        """
        seg = ${bid} * ${B} + ${tid}
        if seg < M:
        ${locate}
            if length > 0:
                v = ${first}
                i = 1
                while i < length:
                    v = ${step}
                    i += 1
        ${write}
            else:
        ${empty}
        """,
        bid=dialect.block_idx(), B=spec.block, tid=dialect.thread_idx(),
        locate=snippet(_locate(spec), 1),
        first=element(spec, "x", "0", at("0")),
        step=combine("v", element(spec, "x", "i", at("i"))),
        write=snippet(_write(spec, "v"), 2), empty=snippet(_empty(spec), 2),
    )


def _warp(spec: BatchSpec, dialect) -> str:
    """A warp per segment, or a group of ``lanes`` lanes (the same code at
    another width: ``lane`` is the index in the group)."""
    unit, width = spec.unit, spec.width
    return render(
        """
        tid = ${tid}
        lane = tid % ${W}
        seg = ${bid} * ${NW} + tid // ${W}
        if seg < M:
        ${locate}
            start = ${start}
            end = ${end}
        ${fold}
            if lane == 0:
                if length > 0:
        ${write}
                else:
        ${empty}
        """,
        tid=dialect.thread_idx(), W=width, bid=dialect.block_idx(), NW=spec.block // width,
        locate=snippet(_locate(spec), 1),
        start="origin" if unit else "0", end="origin + length" if unit else "length",
        fold=snippet(warp_fold(spec, dialect, "x", 1, spec.vector,
                               None if unit else _at(spec), spec.finish,
                               lanes=spec.lane_accs, position=_position(spec),
                               width=width), 1),
        write=snippet(_write(spec, "acc"), 3), empty=snippet(_empty(spec), 3),
    )


def _block(spec: BatchSpec, dialect) -> str:
    unit = spec.unit
    fold = block_fold(
        spec, dialect, "x", n="origin + length" if unit else "length", bstart="bstart",
        chunk="chunk", vector=spec.vector, at=None if unit else _at(spec), accs=spec.finish,
        lanes=spec.lane_accs, position=_position(spec),
    )
    empty = "" if spec.split else ("elif length == 0:\n    if tid == 0:\n"
                                   + snippet(_empty(spec), 2))
    return render(
        """
        tid = ${tid}
        lane = tid % ${W}
        warp = tid // ${W}
        ${shared}
        seg = ${bid} // parts
        part = ${bid} - seg * parts
        ${locate}
        ${chunk}
        lo = part * chunk
        if lo < length:
            bstart = ${bstart}
        ${fold}
            if tid == 0:
        ${write}
        ${empty}
        """,
        tid=dialect.thread_idx(), W=spec.warp, shared=shared_decl(spec, dialect, "partials",
                                                                  spec.warps),
        bid=dialect.block_idx(), locate=_locate(spec), chunk=_CHUNK,
        bstart="origin + lo" if unit else "lo",
        fold=snippet(fold, 1), write=snippet(_write(spec, "v"), 2), empty=empty,
    )


def staged_words(block: int, row: int, rows_each: int = 1) -> int:
    """Elements of the staged group's shared tile: ``block * rows_each`` rows of
    ``row``."""
    return block * rows_each * row


def _staged(spec: BatchSpec, dialect) -> str:
    """A thread per row, the block's rows staged in shared memory: block ``b``
    owns rows ``b * B * E ...`` (``E = spec.items`` rows a thread), ``B * E *
    row`` adjacent elements from the first one's origin on. Each thread loads
    ``E * row`` of them ``B`` apart (a warp's loads adjacent) and stores them
    where they lie in the tile; all are loaded before any is stored, so the
    loads are in flight together. After the barrier thread ``t`` folds rows
    ``t, t + B, ...``, each in order, from the tile. Every index is the
    thread's base plus a literal, so a load, a store and a read of the tile
    are one instruction each (the kernel is bound by its instructions, not by
    memory): a block of whole rows loads without bounds, the grid's last
    block clamps its loads to its last element and stores only its own. A row
    of an even length meets bank conflicts as its thread reads it (two-way, or
    four-way for rows of 12); padding the tile costs more instructions."""
    B, R, E = spec.block, spec.row, spec.items
    count = E * R
    full = "\n".join(f"v{c} = x[base + {c * B}]" for c in range(count))
    full += "\n" + "\n".join(f"tile[tid + {c * B}] = v{c}" for c in range(count))
    part = "\n".join(f"v{c} = x[min(base + {c * B}, last)]" for c in range(count))
    part += "\n" + "\n".join(f"if tid < total - {c * B}:\n    tile[tid + {c * B}] = v{c}"
                              for c in range(count))

    def fold(i: int) -> str:
        def at(j: int) -> str:
            return element(spec, "tile", "", f"tile[q + {i * B * R + j}]", position=str(j))

        lines = chain("acc", [at(j) for j in range(R)])
        lines += [f"seg = first + tid + {i * B}", _write(spec, "acc")]
        return f"if tid < rows - {i * B}:\n" + snippet("\n".join(lines), 1)

    return render(
        """
        tid = ${tid}
        seg = ${bid} * ${BE}
        first = seg
        rows = min(${BE}, M - seg)
        ${locate}
        base = origin + tid
        tile = ${shared}
        if rows == ${BE}:
        ${full}
        else:
            total = rows * ${R}
            last = origin + total - 1
        ${part}
        ${sync}
        q = tid * ${R}
        ${rows}
        """,
        tid=dialect.thread_idx(), bid=dialect.block_idx(), BE=B * E, R=R,
        locate=_locate(spec), shared=dialect.shared_array(staged_words(B, R, E), "x_t"),
        full=snippet(full, 1), part=snippet(part, 1), sync=dialect.syncthreads(),
        rows="\n".join(fold(i) for i in range(E)),
    )


_GROUPS = {"thread": _thread, "lanes": _warp, "warp": _warp, "block": _block,
           "staged": _staged}


def build(spec: BatchSpec, dialect, name: str) -> str:
    body = _GROUPS[spec.group](spec, dialect)
    return prelude(spec, dialect) + render(
        """
        ${decorator}
        def ${name}(${args}):
        ${body}
        """,
        decorator=dialect.decorator(spec.block), name=name,
        args=", ".join(arguments(spec.source)), body=snippet(body, 1),
    )
