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

from ..codegen import indent
from ..spec import KernelSpec

__all__ = ["combine", "load_items", "fold_items", "warp_reduce", "block_range"]


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


def load_items(
    dst: str, first: str, src: str, count: int, width: int = 1,
) -> tuple[list[str], list[str]]:
    """``(lines, items)``: the lines loading ``src[first : first + count]`` and the
    expression of each item. With ``width > 1`` the items are read ``width`` at a
    time with ``vloadN`` into tuples ``{dst}_{k}`` (``first`` must then be a
    multiple of ``width``, and ``src`` aligned: only the kernel input qualifies)."""
    width = min(width, count)
    if width > 1:
        loads = [f"{dst}_{k} = vload{width}({src}, {first}{f' + {k}' if k else ''})"
                 for k in range(0, count, width)]
        return loads, [f"{dst}_{k - k % width}[{k % width}]" for k in range(count)]
    return [], [f"{src}[{first}{f' + {k}' if k else ''}]" for k in range(count)]


def fold_items(
    spec: KernelSpec, dst: str, first: str, end: str | None, src: str = "x",
    count: int | None = None, vector: int = 1,
) -> str:
    """Fold ``src[first : first + count]`` (``count`` defaults to the spec's items)
    in order into ``dst``, unrolled.

    With ``end`` given, items at or past ``end`` are skipped (the caller ensures
    ``first < end``, so ``dst`` always holds at least one element). Without it the
    items are read ``vector`` at a time (:func:`load_items`).
    """
    count = spec.items if count is None else count
    loads, item = load_items(dst, first, src, count, vector if end is None else 1)
    lines = loads + [f"{dst} = acc_t({item[0]})"]
    for k in range(1, count):
        step = f"{dst} = {combine(dst, f'acc_t({item[k]})')}"
        lines.append(step if end is None else f"if {first} + {k} < {end}:\n    {step}")
    return "\n".join(lines)


def warp_reduce(spec: KernelSpec, dialect, var: str, lane: str, valid: str | None) -> str:
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


def snippet(code: str, level: int) -> str:
    """A snippet indented for the body of a generated function."""
    return indent(code, level)
