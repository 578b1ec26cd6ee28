"""The reproducible tree on a GPU: the ``pairwise`` variant (``deterministic=True``).

The kernel computes the tree of :mod:`pyreduce.deterministic` (leaves of
:data:`~pyreduce.spec.LEAF` elements folded left to right, then pairs of
nodes in index order, a node without a right sibling passed up), so its result
depends on ``n`` alone. Layout: a bounded grid of blocks, each owning an aligned
range of a power of two of tiles (the planner rounds ``chunk``), finished in
the same launch by the last block to finish (``single_pass``). Inside a block:

* each warp owns an aligned span of ``2**p`` warp tiles (``warp * items``
  elements) and walks it tile by tile;
* in a tile, lane ``l`` loads ``items`` elements with vector loads, folds them
  into ``K = items / LEAF`` leaves, and combines those pairwise in registers;
* shuffles with deltas 1, 2, 4, ... combine the lanes, with the valid-lane guard
  ``lane + d < lanes`` in a tile cut short by ``n``;
* lane 0 pushes the tile's node onto a stack in shared memory (a binary counter:
  it combines the top with the new node while they cover equal spans), and at
  the end folds the stack from the top down into the warp span's node;
* warp 0 combines the warps' nodes with the same shuffles; thread 0 writes the
  block's node.

Each block writes its node, fences and draws a ticket; the block that draws the
last one runs the same steps over the blocks' nodes, read as leaves of one
element (a finishing pass's spec, :func:`finishing_spec`), and combines an
initial value after the root. A lone block with no initial value writes its
node as the result.

Why the result does not depend on the tuning
--------------------------------------------
Write ``T(s)`` for the tree over a span ``s`` of leaves. Facts 1-3 of
:mod:`pyreduce.deterministic`, proved:

1. Node ``j`` of level ``k`` covers leaves ``[j 2**k, min((j+1) 2**k, m))`` and
   passes its left child up exactly when that span has at most ``2**(k-1)``
   leaves, so a node depends on its span alone: ``T(s) = s`` for one leaf, else
   ``op(T(s[:h]), T(s[h:]))`` with ``h`` the largest power of two below ``|s|``.
2. Group an aligned span of ``m`` leaves in aligned groups of ``G = 2**g``. If
   ``m <= G`` there is one group, whose node is ``T(s)``. Otherwise ``h >= G``, so
   ``h`` is a multiple of ``G`` and the split falls between groups; counted in
   groups, ``ceil(m/G)`` lies in ``(h/G, 2h/G]``, so the tree over the group nodes
   splits at the same place; by induction on both halves it has the same root.
3. After ``t`` pushes the stack holds the nodes of the aligned spans given by the
   binary digits of ``t``, the largest (leftmost) at the bottom: two equal spans
   side by side are merged into their parent. With ``t = 2**a1 + ... + 2**ar``
   (``a1 > ... > ar``), fact 1 splits ``T`` at ``2**a1``, and so on down:
   ``op(S1, op(S2, ... Sr))``, the fold from the top.

Then each step of the kernel computes a node by the definition:

* a lane's ``K`` leaves are an aligned span (``items`` is a multiple of
  ``LEAF`` and a lane starts at a multiple of ``items``); its register steps
  with strides ``1, 2, ..., K/2`` are the levels above them, and its guard
  ``j + s < have`` (``have`` leaves present) passes nodes up;
* after the shuffle with delta ``d``, lane ``l`` (a multiple of ``2d``) holds the
  node over lanes ``l .. l + 2d - 1``: the next levels, aligned since lane 0's
  leaves are; lanes without data form a suffix, and the guard passes nodes up;
* a warp's span and the block's range are aligned spans of a power of two of
  tiles, so by fact 2 (the tiles, then the warp spans, as groups) and fact 3 (the
  stack) their nodes are the tree's;
* the last block's pass is the tree over the blocks' nodes (fact 2 with the block
  ranges as groups), and an ``initial`` value joins after it:
  ``op(initial, root)``.

Block size, items per thread, warp size and grid decide only which nodes are
computed where: the root is the same. Nothing is padded (no identity is needed),
and no element past ``n`` is read.
"""

from __future__ import annotations

import dataclasses

from ..codegen import render
from ..spec import LEAF, KernelSpec
from ..dtypes import is_tuple
from ._blocks import combine, element, fold_items, load_items, snippet, warp_reduce

#: Levels of each warp's stack: a warp span of fewer than 2**32 warp tiles (at
#: least 2**40 elements, more than a GPU holds).
DEPTH = 32


@dataclasses.dataclass(frozen=True)
class Options:
    @property
    def items_multiple(self) -> int:
        """A thread holds whole leaves."""
        return LEAF


def _leaf_size(spec: KernelSpec) -> int:
    """Elements per leaf: LEAF in a first pass; a finishing pass reads nodes."""
    return 1 if spec.finish else LEAF


def _thread_tree(leaves: int, have: str | None) -> list[str]:
    """Combine ``v0 .. v{leaves-1}`` pairwise into ``v0``; with ``have``, only the
    first ``have`` hold data and a node without a right sibling passes up."""
    lines, s = [], 1
    while s < leaves:
        for j in range(0, leaves, 2 * s):
            step = f"v{j} = {combine(f'v{j}', f'v{j + s}')}"
            lines.append(step if have is None else f"if {j + s} < {have}:\n    {step}")
        s *= 2
    return lines


def _thread_full(spec: KernelSpec, vector: int, src: str = "x") -> str:
    """``v0``: the node of the lane's ``items`` elements of ``src`` from ``i``, all
    in range."""
    leaf = _leaf_size(spec)
    width = vector if not spec.finish else 1
    loads, values = load_items("e", "i", src, spec.items, width)
    items = [element(spec, src, f"i + {k}" if k else "i", values[k] if width > 1 else None,
                     accs=spec.finish) for k in range(spec.items)]
    lines = list(loads)
    for j in range(spec.items // leaf):
        run = items[j * leaf:(j + 1) * leaf]
        lines.append(f"v{j} = {run[0]}")
        lines += [f"v{j} = {combine(f'v{j}', e)}" for e in run[1:]]
    return "\n".join(lines + _thread_tree(spec.items // leaf, None))


def _thread_tail(spec: KernelSpec, src: str = "x") -> str:
    """``v0``: the node of the lane's elements of ``src`` from ``i`` below ``end``
    (``i < end``): the last leaf cut short, leaves past ``end`` absent."""
    leaf, leaves = _leaf_size(spec), spec.items // _leaf_size(spec)
    present = "end - i" if leaf == 1 else f"(end - i + {leaf - 1}) // {leaf}"
    lines = [f"have = min({present}, {leaves})"]
    for j in range(leaves):
        fold = fold_items(spec, f"v{j}", f"i + {j * leaf}" if j else "i", "end", src,
                          count=leaf, accs=spec.finish)
        lines.append(fold if j == 0 else f"if {j} < have:\n" + snippet(fold, 1))
    return "\n".join(lines + _thread_tree(leaves, "have"))


#: Lane 0 pushes tile ``t``'s node: combined with the stack's top while the top
#: covers as many tiles (once per trailing one bit of ``t``), then stored at the
#: first free level.
_PUSH = """
if lane == 0:
    c = t
    k = s0
    while c & 1:
        v0 = ${combine_top}
        c >>= 1
        k += 1
    stack[k] = v0
t += 1
"""

_BODY = """
bstart = ${bid} * ${chunk}
bend = min(bstart + ${chunk}, ${n})
# each warp owns an aligned span of a power of two of warp tiles; a block's
# chunk is a power of two of tiles, or the grid one block (a finishing pass)
wtiles = 1
while wtiles * ${TILE} < ${chunk}:
    wtiles *= 2
wspan = wtiles * ${WTILE}
start = bstart + warp * wspan
end = min(start + wspan, bend)
s0 = warp * ${DEPTH}
t = 0
base = start
while base + ${WTILE} <= end:
    i = base + lane * ${I}
${thread_full}
${reduce_full}
${push}
    base += ${WTILE}
if base < end:
    i = base + lane * ${I}
${zeros}
    if i < end:
${thread_tail}
    lanes = (end - base + ${I1}) // ${I}
${reduce_tail}
${push}
# the warp span's node: the stack folded from the top (the rightmost node) down
if lane == 0 and t > 0:
    c = t
    k = s0
    while (c & 1) == 0:
        c >>= 1
        k += 1
    r = stack[k]
    c >>= 1
    k += 1
    while c:
        if c & 1:
            r = ${combine_stack}
        c >>= 1
        k += 1
    roots[warp] = r
${sync}
v0 = acc_t(0)
if warp == 0:
    # warps holding data form a prefix of the block
    used = min((bend - bstart + wspan - 1) // wspan, ${NW})
    if lane < used:
        v0 = roots[lane]
${reduce_warps}
"""

#: The last block's finish (the single-pass layout): a lone block with nothing
#: ahead of it holds the result; otherwise each block's node goes to
#: ``blocks[head + block]`` before its ticket, and the block drawing the last
#: ticket computes the tree over the ``grid`` nodes (read as leaves of one
#: element), as a finishing pass would, then combines an initial value
#: (``blocks[0]`` where ``head`` is 1) after the root.
_LAST_BLOCK = """
last = ${flag}
if tid == 0:
    if ${grid} == 1 and head == 0:
        out[0] = v0
        last[0] = 0
    else:
        blocks[head + ${bid}] = v0
${ticket}
${sync}
if last[0]:
    nodes = blocks[head:]
    count = ${grid}
    chunk2 = (count + ${TILE1}) // ${TILE} * ${TILE}
${finish}
    if tid == 0:
        if head:
            v0 = ${after_root}
        out[0] = v0
        ticket[0] = 0
"""


def _body(spec: KernelSpec, dialect, src: str, n: str, chunk: str, bid: str) -> str:
    """The block's node in ``v0`` of thread 0: the tree over ``src[bid * chunk :
    min((bid + 1) * chunk, n)]``."""
    leaves = spec.items // _leaf_size(spec)
    push = snippet(render(_PUSH, combine_top=combine("stack[k]", "v0")), 1)
    return render(
        _BODY,
        bid=bid, n=n, chunk=chunk, TILE=spec.tile, WTILE=spec.warp * spec.items, DEPTH=DEPTH,
        I=spec.items, I1=spec.items - 1, NW=spec.warps,
        thread_full=snippet(_thread_full(spec, spec.vector, src), 1),
        reduce_full=snippet(warp_reduce(spec, dialect, "v0", "lane", None), 1),
        push=push,
        zeros=snippet("\n".join(f"v{j} = acc_t(0)" for j in range(leaves)), 1),
        thread_tail=snippet(_thread_tail(spec, src), 2),
        reduce_tail=snippet(warp_reduce(spec, dialect, "v0", "lane", "lanes"), 1),
        combine_stack=combine("stack[k]", "r"),
        sync=dialect.syncthreads(),
        reduce_warps=snippet(warp_reduce(spec, dialect, "v0", "lane", "used"), 1),
    )


#: Nodes a lane reads in the last block's pass. The kernel's registers are the
#: most either pass needs, and every block pays them: on an H200
#: (``bench/fixed_tree_finish.py``, ``docs/performance/fixed-tree-finish-h200.txt``),
#: float32 with 16 items a thread took 56 registers with 16 here (two blocks of
#: 512 an SM; 1.27 times the default's device time at 2**24), 40 with 8 and 32
#: with 4 (four blocks an SM; 1.01 at 2**24, 1.03 at 2**28); float64 with 4 items
#: a thread 30 registers with 4 here (1.01, 1.00), 49 with 8 (1.11, 1.09). The
#: registers are the compiler's choice, the tree, and so the result, is the same
#: for any of them; the kernel's launch bounds hold them to what a full SM
#: leaves a thread (:data:`SM_THREADS`), so that another CUDA version cannot
#: take more.
FINISH_ITEMS = LEAF

#: The threads an SM holds on the NVIDIA GPUs the layouts were measured on
#: (Volta to Hopper; 1536 on some others, where the bound is looser than the
#: SM). The fixed tree's kernel asks for the blocks of this many threads to
#: reside at once (``Dialect.decorator``): its speed was measured with them.
SM_THREADS = 2048


def finishing_spec(spec: KernelSpec) -> KernelSpec:
    """The spec of the pass over the blocks' nodes (accumulator values, one a
    leaf) that a last block runs: ``spec``'s block and warp, :data:`FINISH_ITEMS`
    nodes a lane."""
    return dataclasses.replace(spec, in_dtype=spec.acc_dtype, vector=1, mapped=False,
                               f32_tiles=False, finish=True, items=FINISH_ITEMS)


def build(spec: KernelSpec, dialect, name: str, options: Options = Options()) -> str:
    if is_tuple(spec.acc_dtype):
        raise ValueError("variant 'pairwise' keeps its stack of nodes in one shared array of "
                         "scalars: deterministic=True takes scalar accumulators")
    if spec.items % options.items_multiple:
        raise ValueError(f"pairwise needs items per thread to be a multiple of {LEAF}, "
                         f"got {spec.items}")
    fin = finishing_spec(spec)
    body = _body(spec, dialect, "x", "n", "chunk", dialect.block_idx()) + render(
        _LAST_BLOCK,
        flag=dialect.shared_array(1, "i32"), grid=dialect.grid_dim(),
        bid=dialect.block_idx(), sync=dialect.syncthreads(),
        ticket=snippet(dialect.draw_ticket("ticket", "last[0]", dialect.grid_dim()), 2),
        TILE=fin.tile, TILE1=fin.tile - 1,
        finish=snippet(_body(fin, dialect, "nodes", "count", "chunk2", "0"), 1),
        after_root=combine(element(fin, "blocks", "0", accs=True), "v0"),
    )
    # the single-pass layout's arguments (pyreduce.driver.schedule)
    return render(
        """
        ${decorator}
        def ${name}(x, n, chunk, out, blocks, head, ticket):
            tid = ${tid}
            lane = tid % ${W}
            warp = tid // ${W}
            roots = ${roots}
            stack = ${stack}
        ${body}
        """,
        decorator=dialect.decorator(spec.block, max(1, SM_THREADS // spec.block)), name=name,
        tid=dialect.thread_idx(),
        W=spec.warp, roots=dialect.shared_array(spec.warps),
        stack=dialect.shared_array(spec.warps * DEPTH), body=snippet(body, 1),
    )
