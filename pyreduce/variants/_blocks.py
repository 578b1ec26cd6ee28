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

Accumulators are scalars or tuples (:mod:`pyreduce.dtypes`). Everything that
touches one goes through the helpers below (:func:`element`, :func:`zero`,
:func:`shuffle_down`, :func:`shared_decl`/:func:`shared_load`/:func:`store`,
:func:`acc_load`), which write today's scalar text unchanged and, for a tuple,
the same statement field by field: shuffles move one field at a time, shared
memory holds one array per field, and device arrays of partials are record
arrays. :func:`prelude` defines ``acc_t`` for a tuple (the cast of every field).
"""

from __future__ import annotations


from ..codegen import field_cast, indent, render
from ..dtypes import carrier, fields, is_bfloat16, is_tuple
from ..spec import F32_TILES, KernelSpec, spread_vectors

__all__ = [
    "combine", "load_items", "fold_items", "warp_reduce", "warp_fold", "block_fold",
    "lane_fold", "block_range", "prelude", "element", "zero",
    "shuffle_down", "shuffle_idx", "shared_decl", "shared_load", "store", "acc_load", "copy",
    "put_result", "tile_summary", "fold_loop",
]


def prelude(spec: KernelSpec, dialect) -> str:
    """Module-level definitions a kernel for ``spec`` needs before it: for a tuple
    accumulator, ``acc_t`` casting every field (``f0_t``, ``f1_t``, ... are the
    fields' types in the namespace). Empty for a scalar accumulator."""
    if not is_tuple(spec.acc_dtype):
        return ""
    cast = field_cast(len(fields(spec.acc_dtype)))
    return f"{dialect.device_decorator()}\ndef acc_t(v):\n    return {cast}\n\n"


def _width(spec: KernelSpec) -> int:
    return len(fields(spec.acc_dtype)) if is_tuple(spec.acc_dtype) else 0


def element(spec: KernelSpec, src: str, index: str, value: str | None = None,
            accs: bool = False, position: str | None = None) -> str:
    """The accumulator value of ``src[index]`` (``value``: an expression already
    holding it, from a vector load). ``accs``: ``src`` holds accumulator values
    (partials), else elements, which go through the element map if the op has one:
    ``fmap(position, element)``, ``position`` defaulting to ``index`` (a batched
    kernel numbers the elements of each row or segment from 0)."""
    if accs:
        return acc_load(spec, src, index)
    item = loaded(spec, value or f"{src}[{index}]")
    if spec.mapped:
        return f"acc_t(fmap({position or index}, {item}))"
    if spec.in_dtype == spec.acc_dtype:
        return item  # already an accumulator: a cast would only cost compile time
    if spec.in_dtype.kind == "c" and spec.acc_dtype.kind in "fiu":
        item = f"({item}).real"  # NumPy's cast of a complex value to a real type
    return f"acc_t({item})"


def loaded(spec: KernelSpec, item: str) -> str:
    """An element as the kernel computes with it: bfloat16 from its bits, and
    float16 widened to float32 where :attr:`KernelSpec.half_as_float32` says so."""
    if is_bfloat16(spec.in_dtype):  # its bits, stored as uint16
        return f"bf16_t({item})"
    if spec.half_as_float32:
        return f"f32_t({item})"
    return item


def pairwise(terms: list[str]) -> str:
    """``terms`` added as a balanced tree (the rounding of a pairwise sum)."""
    if len(terms) == 1:
        return terms[0]
    half = len(terms) // 2
    return f"({pairwise(terms[:half])} + {pairwise(terms[half:])})"


#: Below this, a run's float32 sum of squared deviations may have lost the
#: squares that fell under float32's normal range (2**-126): the run is merged
#: element by element in float64 instead, unless its deviations are all zero.
TINY_Q = 2.0**-96


def tile_moments(spec: KernelSpec, dst: str, values: list[str], fallback: list[str]) -> list[str]:
    """Lines leaving in ``dst`` var's summary of a lane's run of loaded elements
    (:attr:`KernelSpec.f32_tiles`): ``(count, mean, s, q)``, the run's mean and
    the sums of the deviations from it and of their squares, all in float32
    and pairwise (``s`` is what rounding left of zero). ``values`` are the
    loaded elements. A run whose ``q`` float32 cannot hold runs ``fallback``
    instead (lines folding each element's own summary into ``dst``): ``q`` not
    finite (an infinity or a NaN among them, or squares past float32's range),
    or below :data:`TINY_Q` while some deviation is not zero (squares under
    float32's normal range)."""
    k, t = len(values), f"{dst}_t"
    e = [f"{t}e{j}" for j in range(k)]
    d = [f"{t}d{j}" for j in range(k)]  # each deviation named once: less to type
    lines = [f"{x} = {loaded(spec, v)}" for x, v in zip(e, values)]
    lines += [f"{t}m = {pairwise(e)} * f32_t({1 / k!r})",  # 1/k: a power of two, exact
              *(f"{y} = {x} - {t}m" for x, y in zip(e, d)),
              f"{t}s = {pairwise(d)}",
              f"{t}q = {pairwise([f'{x} * {x}' for x in d])}",
              f"{dst} = acc_t(({k}.0, {t}m, {t}s, {t}q))"]
    spread = pairwise([f"abs({x})" for x in d])
    lines.append(f"if {t}q - {t}q != 0 or ({t}q < f32_t({TINY_Q!r}) and {spread} != 0):\n"
                 + snippet("\n".join(fallback), 1))
    return lines


def tile_sums(spec: KernelSpec, dst: str, values: list[str], fallback: list[str]) -> list[str]:
    """Lines leaving in ``dst`` mean's summary of a lane's run of loaded
    elements (:attr:`KernelSpec.f32_tiles`): ``(count, sum)``, the run's sum in
    float32 and pairwise, widened once. A run whose float32 sum is not finite
    (an infinity or a NaN among them, or a sum past float32's range) runs
    ``fallback`` instead (lines folding each element's own summary, in
    float64, into ``dst``)."""
    t = f"{dst}_t"
    e = [f"{t}e{j}" for j in range(len(values))]
    lines = [f"{x} = {loaded(spec, v)}" for x, v in zip(e, values)]
    lines += [f"{t}s = {pairwise(e)}", f"{dst} = acc_t(({len(values)}.0, {t}s))",
              f"if {t}s - {t}s != 0:\n" + snippet("\n".join(fallback), 1)]
    return lines


def tile_summary(spec, dst: str, values: list[str], fallback: list[str],
                 first: str) -> list[str]:
    """Lines leaving in ``dst`` the float32 summary of a run of loaded elements
    ``values`` (:attr:`KernelSpec.f32_tiles`), by the kind of the spec's op
    (:data:`pyreduce.spec.F32_TILES`): :func:`tile_moments`, :func:`tile_sums`
    or :func:`tile_arg`. ``fallback``: lines folding the run element by element
    into ``dst``, for a run float32 cannot summarise (a loop that loads the
    elements again: it is rare, and one step of it compiles faster than the run
    unrolled, see :func:`fold_loop`); ``first``: the element map's index of
    ``values[0]``, the run's others following it one by one."""
    kind = F32_TILES[spec.op_key]
    if kind == "moments":
        return tile_moments(spec, dst, values, fallback)
    if kind == "sums":
        return tile_sums(spec, dst, values, fallback)
    return tile_arg(spec, dst, values, first, kind)


def chain(dst: str, items: list[str]) -> list[str]:
    """Lines folding the expressions ``items`` into ``dst`` left to right."""
    return [f"{dst} = {items[0]}"] + [f"{dst} = {combine(dst, item)}" for item in items[1:]]


def tile_arg(spec: KernelSpec, dst: str, values: list[str], first: str,
             kind: str) -> list[str]:
    """Lines leaving in ``dst`` argmax's (``kind``: or argmin's) ``(value,
    index)`` of a lane's run of loaded elements (:attr:`KernelSpec.f32_tiles`):
    the first element a later one does not replace, which a later one does
    where it is larger (smaller), or NaN, and the one held is not NaN: what the
    compare-first op folding them left to right keeps, its index counted in
    the run as an int32 and added to ``first`` once, as an int64."""
    keeps = "<=" if kind == "argmax" else ">="
    t = f"{dst}_t"
    best, at = f"{t}b", f"{t}j"
    lines = [f"{best} = {loaded(spec, values[0])}", f"{at} = i32(0)"]
    for j, v in enumerate(values[1:], 1):
        e = f"{t}e{j}"
        lines += [f"{e} = {loaded(spec, v)}",
                  f"if not ({e} {keeps} {best}) and {best} == {best}:",
                  f"    {best} = {e}", f"    {at} = i32({j})"]
    return lines + [f"{dst} = acc_t(({best}, {first} + i64({at})))"]


def acc_load(spec: KernelSpec, array: str, index: str) -> str:
    """``array[index]`` of a device array of accumulator values, as an accumulator."""
    n = _width(spec)
    if not n:
        return f"{array}[{index}]"
    return "acc_t((" + ", ".join(f"{array}[{index}]['f{k}']" for k in range(n)) + "))"


def zero(spec: KernelSpec) -> str:
    """A placeholder accumulator (assigned before it is combined)."""
    n = _width(spec)
    return "acc_t(0)" if not n else "acc_t((" + ", ".join("0" for _ in range(n)) + "))"


def shuffle_down(spec: KernelSpec, dialect, var: str, delta, width: int | None = None) -> str:
    """``var`` from lane ``lane + delta``, field by field for a tuple. With a
    ``width`` below the warp, a step of a tree reduction in groups of that many
    lanes (:meth:`pyreduce.dialect.Dialect.shfl_group`): only lanes whose index
    in their group is a multiple of ``2 * delta`` are sure to get it."""
    if width is None or width == spec.warp:
        return _shuffle(spec, dialect.shfl_down, var, delta)

    def shfl(value, arg, warp, cast="acc_t", carry="carry_t"):
        return dialect.shfl_group(value, arg, warp, width, cast, carry)
    return _shuffle(spec, shfl, var, delta)


def shuffle_idx(spec: KernelSpec, dialect, var: str, src) -> str:
    """``var`` from lane ``src``, field by field for a tuple."""
    return _shuffle(spec, dialect.shfl_idx, var, src)


def _shuffle(spec: KernelSpec, shfl, var: str, arg) -> str:
    """A shuffle of the accumulator ``var``: shuffles move 32- and 64-bit ints and
    floats, so a tuple moves field by field and a complex value as its real and
    imaginary parts (``re_t``: their type)."""
    n = _width(spec)
    if n:
        return "(" + ", ".join(shfl(f"{var}[{k}]", arg, spec.warp, cast=f"f{k}_t",
                                    carry=f"c{k}_t") for k in range(n)) + ")"
    if spec.acc_dtype.kind == "c":
        re, im = (shfl(f"{var}.{part}", arg, spec.warp, cast="re_t", carry="re_t")
                  for part in ("real", "imag"))
        return f"acc_t(complex({re}, {im}))"
    if carrier(spec.acc_dtype) is spec.acc_dtype.type:  # it travels as it is
        return shfl(var, arg, spec.warp, cast="", carry="")
    return shfl(var, arg, spec.warp)


def shared_decl(spec: KernelSpec, dialect, name: str, size: int) -> str:
    """Shared memory for ``size`` accumulators: one array, or one per field."""
    n = _width(spec)
    if not n:
        return f"{name} = {dialect.shared_array(size)}"
    return "\n".join(f"{name}_{k} = {dialect.shared_array(size, f'f{k}_t')}" for k in range(n))


def shared_load(spec: KernelSpec, name: str, index: str) -> str:
    n = _width(spec)
    if not n:
        return f"{name}[{index}]"
    return "(" + ", ".join(f"{name}_{k}[{index}]" for k in range(n)) + ")"


def store(spec: KernelSpec, array: str, index: str, value: str, shared: bool = False) -> str:
    """``array[index] = value``: a shared array (per field) or a device array of
    accumulator values (a record array for a tuple)."""
    n = _width(spec)
    if not n:
        return f"{array}[{index}] = {value}"
    lines = []
    if not value.isidentifier():  # an expression: computed once, then stored by field
        lines, value = [f"{array}_v = {value}"], f"{array}_v"
    if shared:
        return "\n".join(lines + [f"{array}_{k}[{index}] = {value}[{k}]" for k in range(n)])
    return "\n".join(lines + [f"{array}[{index}]['f{k}'] = {value}[{k}]" for k in range(n)])


def put_result(spec: KernelSpec, array: str, index: str, value: str) -> str:
    """A block's result ``value`` stored in ``out[index]``: as an accumulator
    (:func:`store`), or, where the spec finishes the reduction
    (``spec.finisher``), made into the user's result(s) by the scalar finisher
    ``finish(acc, ddof)`` of :mod:`pyreduce.finishers`, each cast to ``res_t``
    (the finisher's dtype, as the host's finishers cast) and stored from
    ``out[index * outputs]`` on. Only a kernel whose grid is one block writes
    the result there, so ``index`` is 0 when the finisher applies; a batched
    kernel's finisher has one result, ``out[index]`` of segment ``index``."""
    if spec.finisher is None:
        return store(spec, array, index, value)
    _, ddof, outputs = spec.finisher
    lines = [f"{array}_r = finish({value}, {float(ddof)!r})"]
    lines += [f"{array}[{index} * {outputs} + {k}] = res_t({array}_r[{k}])"
              for k in range(outputs)]
    return "\n".join(lines)


def copy(spec: KernelSpec, dst: str, dst_index: str, src: str, src_index: str) -> str:
    """``dst[dst_index] = src[src_index]`` between device arrays of accumulator
    values (field by field for a tuple)."""
    n = _width(spec)
    if not n:
        return f"{dst}[{dst_index}] = {src}[{src_index}]"
    return "\n".join(f"{dst}[{dst_index}]['f{k}'] = {src}[{src_index}]['f{k}']"
                     for k in range(n))


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
    dst: str, first: str, src: str, count: int, width: int = 1, at=None, spread: int = 0,
) -> tuple[list[str], list[str]]:
    """``(lines, items)``: the lines loading ``src[first : first + count]`` and the
    expression of each item. With ``width > 1`` the items are read ``width`` at a
    time with ``vloadN`` into tuples ``{dst}_{k}`` (``first`` must then be a
    multiple of ``width``, and ``src`` aligned: only the kernel input qualifies);
    otherwise each item is its own load, ``at(index)`` (default ``src[index]``).
    ``spread``: the vectors are that many elements apart instead of adjacent
    (:func:`item_offsets`)."""
    width = min(width, count)
    index = [_offset(first, k) for k in item_offsets(count, width, spread)]
    if width > 1:
        loads = [f"{dst}_{k} = vload{width}({src}, {index[k]})" for k in range(0, count, width)]
        return loads, [f"{dst}_{k - k % width}[{k % width}]" for k in range(count)]
    at = at or f"{src}[{{}}]".format
    return [], [at(i) for i in index]


def item_offsets(count: int, width: int, spread: int = 0) -> list[int]:
    """The offsets from a lane's first item of its ``count`` items, read
    ``width`` at a time: adjacent, or (``spread``) each vector ``spread``
    elements after the one before it."""
    if not spread or width <= 1:
        return list(range(count))
    return [k // width * spread + k % width for k in range(count)]


def _offset(first: str, k: int) -> str:
    return f"{first}{f' + {k}' if k else ''}"


def fold_items(
    spec: KernelSpec, dst: str, first: str, end: str | None, src: str = "x",
    count: int | None = None, vector: int = 1, accs: bool = False, at=None, position=None,
    spread: int = 0,
) -> str:
    """Fold ``src[first : first + count]`` (``count`` defaults to the spec's items)
    in order into ``dst``.

    Without ``end``, ``accs`` or ``at`` the items are read ``vector`` at a time
    (:func:`load_items`) and folded unrolled, each a field of a loaded tuple.
    Otherwise they are read one at a time, by a loop (:func:`fold_loop`). With
    :attr:`KernelSpec.f32_tiles` the loaded items are summarised in float32
    (:func:`tile_summary`), the loop reading them again where that cannot be
    done. With ``end`` given, items at or
    past ``end`` are skipped (the caller ensures ``first < end``, so ``dst``
    always holds at least one element). ``accs``: ``src`` holds accumulator
    values (:func:`element`). ``at`` maps an index expression to the expression
    loading that element, for inputs not addressed as ``src[index]`` (a strided
    row); ``position`` maps it to the element map's index (default: the index
    itself), for inputs whose elements are not numbered from ``src[0]``.
    ``spread`` (vector loads only, for an op that may be reordered): the
    vectors are that many elements apart (:func:`item_offsets`), and a float32
    summary's fallback reads them there (summaries that do not number their
    items only: :func:`spread_summary`).
    """
    count = spec.items if count is None else count
    width = min(vector, count) if end is None and not accs and at is None else 1
    if spread and (width <= 1 or not spread_summary(spec)):
        raise ValueError("spread items need vector loads of elements, summarised in float32 "
                         "only where the summary does not number them")

    def item(index):
        return element(spec, src, index, at and at(index), accs, position and position(index))

    def kth(k):  # the k-th item's accumulator (k None: the first)
        if k is None:
            return item(first)
        if spread:
            return item(f"{first} + {k} // {width} * {spread} + {k} % {width}")
        return item(f"{first} + {k}")

    if width > 1:
        loads, values = load_items(dst, first, src, count, width, spread=spread)
        if spec.f32_tiles:
            start = position(first) if position else first
            return "\n".join(loads + tile_summary(spec, dst, values,
                                                   fold_loop(dst, count, kth), start))
        index = [_offset(first, k) for k in item_offsets(count, width, spread)]
        items = [element(spec, src, index[k], values[k], accs, position and position(index[k]))
                 for k in range(count)]
        return "\n".join(loads + chain(dst, items))
    guard = None if end is None else (lambda k: f"{first} + {k} < {end}")
    return "\n".join(fold_loop(dst, count, kth, guard))


def fold_loop(dst: str, count: int, item, guard=None) -> list[str]:
    """Lines folding ``count`` items into ``dst`` in order by a loop of literal
    bounds: NVVM unrolls it into the code unrolled text would give, and Numba
    types and lowers one step instead of ``count - 1``. ``item(k)``: the
    accumulator of the ``k``-th item (``k`` the loop's variable; None for the
    first, which starts ``dst``); ``guard(k)``: where given, the condition
    under which the ``k``-th item is folded."""
    lines = [f"{dst} = {item(None)}"]
    if count > 1:
        k = f"{dst}_k"
        body = f"{dst} = {combine(dst, item(k))}"
        if guard is not None:
            body = f"if {guard(k)}:\n    {body}"
        lines += [f"for {k} in range(1, {count}):", snippet(body, 1)]
    return lines


def warp_reduce(spec: KernelSpec, dialect, var: str, lane: str, valid: str | None,
                width: int | None = None) -> str:
    """Reduce ``var`` across a warp into lane 0, in lane order; with ``width``
    (a power of two, default the warp), across each group of ``width`` lanes
    into the group's lane 0, ``lane`` then being the index in the group.

    Deltas grow 1, 2, 4, ...: after the step with delta ``d`` a lane that is a
    multiple of ``2d`` holds its own ``2d`` lanes combined left to right, so lane 0
    ends with the ordered fold of the warp (group). With ``valid`` given, only
    lanes below it hold data (a prefix), and a lane combines with its right
    neighbour only if that neighbour is one of them. Every lane of the warp
    (group) executes every shuffle. A lane whose result no later step reads
    may combine a value that is not its right neighbour's (:func:`shuffle_down`);
    that value is never used.
    """
    width = width or spec.warp
    # a loop of literal bounds, unrolled by NVVM (see fold_items)
    s, d, other = f"{var}_s", f"{var}_d", f"{var}_o"
    step = f"{var} = {combine(var, other)}"
    if valid is not None:
        step = f"if {lane} + {d} < {valid}:\n    {step}"
    return "\n".join([
        f"for {s} in range({width.bit_length() - 1}):",
        f"    {d} = 1 << {s}",
        f"    {other} = {shuffle_down(spec, dialect, var, d, width)}",
        snippet(step, 1)])


def _multi_tile(spec, dialect, src: str, tiles: int, vector: int, at, accs: bool,
                position=None, width: int | None = None) -> str:
    """A loop over ``tiles`` warp tiles at a time: all loads first, then the
    reductions, then the tiles folded into ``acc`` in order."""
    w, i = width or spec.warp, spec.items
    loads, reduces, folds = [], [], []
    for u in range(tiles):
        loads.append(f"i = base + {u * w * i} + lane * {i}")
        loads.append(fold_items(spec, f"t{u}", "i", None, src, vector=vector, accs=accs,
                                at=at, position=position))
        reduces.append(warp_reduce(spec, dialect, f"t{u}", "lane", None, w))
        first = f"if have:\n    acc = {combine('acc', 't0')}\nelse:\n    acc = t0" if u == 0 \
            else f"acc = {combine('acc', f't{u}')}"
        folds.append(first)
    body = "\n".join(loads + reduces + folds) + f"\nhave = True\nbase += {tiles * w * i}"
    return f"while base + {tiles * w * i} <= end:\n" + snippet(body, 1)


def _tile_loop(spec, src: str, vector: int, at, accs: bool, reduce: str = "",
               multi: str = "", position=None, width: int | None = None,
               striped: bool = False) -> str:
    """The loop over a warp's (group's) full tiles from ``start`` (after
    ``multi``, a loop over several tiles at a time): each lane folds its items
    into ``v``, ``reduce`` (if any) combines the lanes, and ``v`` is folded into
    ``acc``; ``have`` says whether it was. ``striped`` (an op that may be
    reordered, :func:`striped_loads`): lane ``l`` reads vectors ``l``,
    ``l + warp``, ... of the tile, so that each load of the warp reads
    ``warp`` adjacent vectors, not every other half of twice as many sectors,
    and the block's warps take turns, tile by tile (:func:`block_fold`)."""
    w, i = width or spec.warp, spec.items
    first, spread = (vector, w * vector) if striped else (i, 0)
    step = spec.warps * w * i if striped else w * i
    return render(
        """
        acc = ${zero}
        have = False
        base = start${multi}
        while base + ${WTILE} <= end:
            i = base + lane * ${FIRST}
        ${fold_full}${reduce}
            if have:
                acc = ${combine_acc}
            else:
                acc = v
            have = True
            base += ${STEP}
        """,
        FIRST=first, WTILE=w * i, STEP=step, combine_acc=combine("acc", "v"), zero=zero(spec),
        multi="\n" + multi.strip("\n") if multi else "",
        fold_full=snippet(fold_items(spec, "v", "i", None, src, vector=vector, accs=accs,
                                     at=at, position=position, spread=spread), 1),
        reduce="\n" + snippet(reduce, 1) if reduce else "",
    )


def warp_fold(spec, dialect, src: str = "x", tiles: int = 1, vector: int = 1,
              at=None, accs: bool = False, lanes: bool = False, position=None,
              width: int | None = None, striped: bool = False) -> str:
    """One warp's ordered fold of ``src[start:end]`` (locals ``start``, ``end``,
    ``lane``) in warp tiles of ``warp * items``: each lane folds its neighbouring
    items, the warp combines its lanes with shuffles, and lane 0 folds the tile
    into ``acc``, which lane 0 holds at the end when the range is not empty.
    Full tiles are read ``vector`` elements at a time, ``tiles`` of them
    per loop iteration; ``at``, ``accs`` and ``position`` as for :func:`fold_items`.

    ``width``: the same fold by each group of ``width`` lanes (a power of two
    below the warp), each with its own range, in tiles of ``width * items``;
    ``lane`` is then the index in the group, and groups may diverge (their
    shuffles name their own lanes: :func:`warp_reduce`).

    ``lanes``: for commutative ops only (:func:`lane_fold`), each lane keeps its
    own accumulator across tiles and the warp combines its lanes once, at the end;
    ``striped`` then spreads a lane's vectors over the tile (:func:`striped_loads`).
    """
    if lanes:
        return lane_fold(spec, dialect, src, vector, at, accs, position, striped)
    i = spec.items
    return render(
        """
        ${tiles}
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
        """,
        I=i, I1=i - 1, zero=zero(spec),
        tiles=_tile_loop(
            spec, src, vector, at, accs, warp_reduce(spec, dialect, "v", "lane", None, width),
            _multi_tile(spec, dialect, src, tiles, vector, at, accs, position, width)
            if tiles > 1 else "", position, width,
        ).strip("\n"),
        combine_acc=combine("acc", "v"),
        fold_tail=snippet(fold_items(spec, "v", "i", "end", src, accs=accs, at=at,
                                     position=position), 2),
        reduce_tail=snippet(warp_reduce(spec, dialect, "v", "lane", "lanes", width), 1),
    )


def spread_summary(spec: KernelSpec) -> bool:
    """Whether a lane's items may be spread over its warp's tile: they are not
    summarised as a float32 run, or the summary does not number them (mean's
    sum, var's moments; argmax's :func:`tile_arg` numbers them one after
    another)."""
    return not spec.f32_tiles or F32_TILES[spec.op_key] in ("sums", "moments")


def striped_loads(spec: KernelSpec, vector: int, at=None, accs: bool = False) -> bool:
    """Whether a lane's full-tile items can be read as vectors spread over the
    warp tile (lane ``l``'s ``k``-th vector the tile's ``l + k * warp``-th):
    vector loads of elements (not partials, not a strided row) whose items are
    whole vectors, more than one, and summarised as a float32 run only where
    :func:`spread_summary` allows."""
    return (at is None and not accs and spread_summary(spec)
            and spread_vectors(spec.items, vector))


def lane_fold(spec, dialect, src: str = "x", vector: int = 1, at=None,
              accs: bool = False, position=None, striped: bool = False) -> str:
    """A warp's fold of ``src[start:end]`` into ``acc`` of lane 0 that *reorders*
    elements, for commutative ops: lane ``l`` folds items ``l*items ...`` of every
    warp tile into its own accumulator, and the warp combines its 32 (or 64)
    accumulators with one shuffle reduction after the last tile, where the ordered
    :func:`warp_fold` shuffles once per tile. Fewer instructions per element, and
    no shuffle chain between one tile's loads and the next's. With vector loads
    the tail after the last full tile is read in vectors too (:func:`_vector_tail`),
    and with ``striped`` so are the full tiles, where :func:`striped_loads` allows."""
    w, i = spec.warp, spec.items
    if vector > 1 and at is None and not accs:
        return _vector_tail(spec, dialect, src, vector, position, striped)
    return render(
        """
        ${tiles}
        # lanes holding data: all after a full tile, else the tail's prefix
        lanes = ${W} if have else 0
        if base < end:
            i = base + lane * ${I}
            if i < end:
        ${fold_tail}
                if have:
                    acc = ${combine_acc}
                else:
                    acc = v
            if not have:
                lanes = (end - base + ${I1}) // ${I}
        ${reduce}
        """,
        I=i, I1=i - 1, W=w,
        tiles=_tile_loop(spec, src, vector, at, accs, position=position).strip("\n"),
        combine_acc=combine("acc", "v"),
        fold_tail=snippet(fold_items(spec, "v", "i", "end", src, accs=accs, at=at,
                                     position=position), 2),
        reduce=warp_reduce(spec, dialect, "acc", "lane", "lanes"),
    )


def _vector_tail(spec, dialect, src: str, vector: int, position, striped: bool = False) -> str:
    """:func:`lane_fold` whose tail (fewer elements than a tile, from ``base``)
    is read ``vector`` at a time, the warp's vectors adjacent (lane ``l`` takes
    vectors ``l``, ``l + warp``, ...), the last ``(end - base) % vector``
    elements by the lane whose vector they would begin, one at a time, in the
    same round: where a lane of the element-by-element tail would load its
    ``items`` one at a time while the others idle (a row of 300 float32 in
    warp tiles of 256 left 6 lanes 8 loads each). ``base`` is a multiple of
    ``vector`` from an aligned start, as the full tiles' loads are. The lanes
    holding data stay a prefix of the warp: all of them after a full tile,
    else those the tail reaches."""
    w, i, vec = spec.warp, spec.items, vector

    def into_acc(fold: str) -> str:  # the lane's fold of ``v`` into its accumulator
        return fold + "\n" + render(
            """
            if have:
                acc = ${combine_acc}
            else:
                acc = v
            have = True
            """, combine_acc=combine("acc", "v")).strip("\n")

    return render(
        """
        ${tiles}
        lanes = ${W} if have else 0
        if base < end:
            if not have:
                lanes = min((end - base + ${V1}) // ${V}, ${W})
            j = base + lane * ${V}
            for r in range(${ROUNDS}):
                if j + ${V} <= end:
        ${fold_vector}
                elif j < end:
        ${fold_rest}
                j += ${WV}
        ${reduce}
        """,
        W=w, V=vec, V1=vec - 1, WV=w * vec, ROUNDS=-(-i // vec),
        tiles=_tile_loop(spec, src, vec, None, False, position=position,
                         striped=striped).strip("\n"),
        fold_vector=snippet(into_acc(fold_items(
            spec, "v", "j", None, src, count=vec, vector=vec, position=position)), 3),
        fold_rest=snippet(into_acc(fold_items(
            spec, "v", "j", "end", src, count=vec - 1, position=position)), 3),
        reduce=warp_reduce(spec, dialect, "acc", "lane", "lanes"),
    )


def block_fold(
    spec, dialect, src: str, n: str, bstart: str, chunk: str, tiles: int = 1,
    vector: int = 1, at=None, accs: bool = False, lanes: bool = False, position=None,
    striped: bool = False,
) -> str:
    """Code leaving the ordered fold of ``src[bstart : bstart + chunk]`` (clipped at
    ``n``, never empty) in ``v`` of thread 0. ``chunk`` is a multiple of the tile,
    so each warp owns a contiguous slice of whole warp tiles (:func:`warp_fold`);
    the warps' results meet in shared memory and warp 0 reduces them in warp
    order. Uses locals ``tid``, ``lane``, ``warp``, ``partials`` (shared, one slot
    per warp); every thread of the block must run it (it has a barrier).

    ``striped`` (with ``lanes``, where :func:`striped_loads` allows; else
    ignored): the block reads its range a block tile at a time, as one
    contiguous run, warp ``w`` taking the ``w``-th warp tile of each and each
    lane vectors spread over it; the order of the elements is lost."""
    striped = striped and lanes and striped_loads(spec, vector, at, accs)
    if striped:  # the warps take turns, warp tile by warp tile
        wtile = spec.warp * spec.items
        layout = f"""
        wchunk = {wtile}
        start = ${{bstart}} + warp * {wtile}
        end = bend"""
    else:
        layout = """
        wchunk = ${chunk} // ${NW}
        start = ${bstart} + warp * wchunk
        end = min(start + wchunk, bend)"""
    return render(
        """
        bend = min(${bstart} + ${chunk}, ${n})""" + layout + """
        ${fold}
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
        n=n, bstart=bstart, chunk=chunk, NW=spec.warps, zero=zero(spec),
        store_partial=snippet(store(spec, "partials", "warp", "acc", shared=True), 1),
        load_partial=shared_load(spec, "partials", "lane"),
        fold=warp_fold(spec, dialect, src, tiles, vector, at, accs, lanes,
                       position, striped=striped).strip("\n"),
        sync=dialect.syncthreads(),
        reduce_warps=snippet(
            "if warp == 0:\n" + snippet(warp_reduce(spec, dialect, "v", "lane", "used"), 1), 0
        ),
    )


def snippet(code: str, level: int) -> str:
    """A snippet indented for the body of a generated function."""
    return indent(code, level)
