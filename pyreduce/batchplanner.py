"""Plans for many reductions in one launch: the rows or columns of an ``axis=``
reduction (a :class:`pyreduce.axes.Strided` description) and the segments of
``segmented_reduce``.

A :class:`BatchPlan` knows its :class:`~pyreduce.driver.Schedule`: the kernels,
their grids and arguments, the scratch they share, so the driver runs it as it
runs a 1-D plan. ``OUTPUT`` is ``M`` elements, one per row, column or segment.
Every kernel takes ``init``, a one-element scratch buffer the driver fills per
call with the initial value (or, for segments, the identity that an empty
segment returns).

Which kernel (:mod:`pyreduce.variants.segments`, :mod:`pyreduce.variants.columns`):

rows (the reduced elements of an output are one run, ``|ks| == 1``, or no
layout is better)
    Rows of 2 to ``STAGED_MAX`` elements that lie one after another in memory
    (row ``m`` at ``off + m * K``), of any type but bool, except rows of 16:
    the ``staged`` group. A block copies its rows into shared memory,
    its threads' loads adjacent, and then each thread folds its rows from there
    (several, where they are short); a group of lanes per row would leave lanes
    idle and read short runs, a thread per row would read a run of its own
    (:func:`_staged_rows` has the measurements). Its rows a thread come from
    the element size (:func:`staged_rows_each`, whatever items the tuning
    names), and its block (the tuning's, or the default) is halved while its
    tile would pass ``STAGED_BYTES``; rows of which one warp's would pass it
    (complex128 rows of more than 16 in warps of 64) are not staged.
    Otherwise ``K <= THREAD_MAX``: a thread per row. Rows of at most half a warp tile
    (``warp / 2 * items`` elements): a group of ``G`` lanes per row (the
    ``lanes`` group), ``G`` the smallest power of two, at least 2, with
    ``G * items >= K``, so that a warp reads ``warp / G`` whole rows with
    adjacent (vector, where rows are aligned) loads and few lanes idle; where
    ``G`` is 2 and the tuning names no items, items shrink to the power of two
    that covers the row (rows of 16 int8: 2 lanes of 8, not of 16). Rows of
    at most two warp tiles, or of at most ``WARP_TILES`` when there are at
    least half as many rows as the GPU holds warps at once: a warp per row.
    Longer rows: a block per row; when there are fewer rows than twice the
    blocks resident at once, each row is cut into parts, one block each, and a
    warp per row folds the parts' partials in a second launch.

    ``THREAD_MAX`` (4) is the old rule's, kept until measured: whether a thread
    (a plain loop, its loads strided across the warp) or a group of 2 lanes is
    better for rows of 2 to 4 elements is *to be measured on a GPU*
    (``bench/axes.py``, the ``rows of ...`` cases); setting it to 1 gives every
    row of more than one element a group of lanes.
columns (the *outputs* are adjacent, ``si == 1``, the reduced elements are
not, and a row of outputs fills a warp; for a commutative op, a warp's loads:
a warp of ``items`` outputs each)
    a thread per ``items`` neighbouring outputs, walking the reduced index in
    order: each warp's loads of a row are adjacent. When the outputs give fewer
    blocks than :meth:`_Shape.columns_target` (a quarter of the threads the GPU
    holds), the reduced range is cut into parts (a block row each; var's parts
    at most :data:`HEAVY_ROWS` rows) and the same kernel reduces the parts'
    partials; where
    that finishing pass would have fewer blocks than the SMs, an intermediate
    pass of the same kernel cuts the partials' rows into parts again first
    (:func:`_finish_parts`).
narrow columns (the same layout with fewer outputs ``Mi`` than a warp's
loads, ``warp * items``, a commutative op, ``Monoid.commutative``, and at
least ``g`` rows)
    the narrow kernel of the columns family (the columns kernel would leave
    lanes of each warp idle: on an H100, 2026-11-27,
    ``docs/performance/columns-parts-h100.txt``, the columns of 8192 x 64
    float32 took 14.3 us for a sum and 35.8 for var with it, against 34.0 and
    168.5; of 4194304 x 48, 331 and 528 us for mean and var against 375 and
    966; of 1048576 x 100, where a warp's lanes are mostly busy, 199 us for
    mean against 181): ``g`` consecutive rows read as one
    wide row of ``g * Mi`` columns, as many as a block's threads hold
    (``items`` each) and its shared memory folds
    (:func:`~pyreduce.variants.columns.fold_width`), so that a warp's loads
    are as long and as many as for wide columns; ``g`` a multiple of what
    makes ``g * Mi`` whole items (the plan's ``wide_rows``). The ``K // g``
    full wide rows are cut into parts as the columns kernel cuts rows; the last
    part also folds the ``K % g`` rows left over; each block folds its ``g``
    groups of outputs in shared memory, which reorders. A split pass's partials
    (``parts`` rows of ``M``) are reduced by the narrow kernel in one block
    where ``M`` is below a warp (a ``(3, K, 5)`` array's middle axis), else by
    the columns kernel. An op that is not commutative keeps the order, and
    fewer than ``g`` rows fill no wide row: such narrow columns are strided
    rows (a thread, group of lanes, warp or block per output, each element of
    a row a load of its own).
segments
    chosen like rows, by the average segment length: a thread, a group of
    lanes, a warp or a block per segment, with parts for few long segments.

Vector loads apply where every row starts on an aligned address (rows, unit
stride; columns, adjacent outputs; narrow columns, adjacent rows of adjacent
outputs), never to segments, whose starts are data.

An element map (``mapped``: the op's ``Monoid.map``) is applied by the first
pass only, to each element with its position in its row or segment (in a
narrow kernel's wide row, the row each column lies in); a
finishing pass reads the partials as accumulators. A tuple accumulator's
scratch (``init``, the partials) and output are record arrays.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .axes import Strided
from .cache import Memo
from .dtypes import is_tuple
from .driver import INPUT, OFFSETS, OUTPUT, Ref, Schedule, Step
from .planner import (
    DeviceInfo, Tuning, default_items, forget_decisions, on_clear_plans, vector_width,
)
from .spec import F32_TILES, BatchSpec, column_runs, tiles_in_float32
from .variants.columns import ROWS, fold_width
from .variants.segments import staged_words

__all__ = ["BatchPlan", "plan_strided", "plan_segments", "THREAD_MAX", "STAGED_MAX",
           "WARP_TILES"]

#: rows (segments) of at most this many elements, on average, get a thread each
#: (against a group of 2 lanes: to be measured on a GPU, see the module's docstring)
THREAD_MAX = 4
#: The longest rows the ``staged`` group reduces (at most
#: :data:`~pyreduce.spec.STAGED_ROW_MAX`); 0 turns the group off
STAGED_MAX = 31
#: Shared memory of a staged block's tile, at most (bytes)
STAGED_BYTES = 16 * 1024
#: Bytes a thread of the staged group loads, at most, where rows are short
#: enough for several a thread (64: sixteen float32, as a 1-D kernel's lane)
STAGED_THREAD_BYTES = 64
#: rows of at most this many warp tiles get a warp each when rows are plenty
WARP_TILES = 16
#: a split columns pass aims at this fraction (its inverse) of the threads the
#: GPU holds at once (:meth:`_Shape.columns_target`)
COLUMNS_SHARE = 4
#: rows a part of a split columns pass walks at most where the accumulator has
#: more than two fields (var's four): merging an element into one costs more
#: than loading it, and such a pass wants more threads than the loads alone.
#: On an H100, columns of 16384 x 16384 float32 took 780.8 us for var with 17
#: parts of 964 rows and 478.6 with 33 (PyTorch 433.7); of 4096 x 4096, 74.4
#: with 66 parts of 63 rows
HEAVY_ROWS = 512


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """``kind`` (``rows``, ``columns`` or ``segments``), the first pass's
    ``spec`` and ``grid``, the ``parts`` each output is cut into (1: no
    finishing pass), ``outputs`` (``M``) and the :class:`~pyreduce.driver.Schedule`."""

    kind: str
    spec: BatchSpec
    grid: int
    parts: int
    outputs: int
    schedule: Schedule
    #: rows of outputs the first pass reads as one wide row (``g`` of the narrow
    #: columns kernel); 1 for every other kernel
    wide_rows: int = 1
    #: backend name -> pyreduce.driver.Executable, built on first use
    executables: dict = dataclasses.field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    @property
    def passes(self) -> int:
        return len(self.schedule.steps)

    @property
    def finish(self) -> BatchSpec | None:
        """The last pass's spec, where there is more than one pass."""
        steps = self.schedule.steps
        return steps[-1].spec if len(steps) > 1 else None


#: call shape -> BatchPlan; a plan keeps its executables (kernels, workspaces)
_plans = Memo("batch plans", 256)


def clear_plans() -> None:
    """Forget every batched plan, and (as :func:`pyreduce.planner.clear_plans`
    does) what was decided with them: a remembered call along axes holds its
    plan (:mod:`pyreduce.callmemo`)."""
    _plans.clear()
    forget_decisions()


on_clear_plans(_plans.clear)  # forgetting the 1-D plans forgets these too


def _memo(key, make):
    plan = _plans.get(key)
    if plan is None:
        plan = make()
        _plans.put(key, plan)
    return plan


class _Shape:
    """The launch shape the tuning and the device give: warp, block, items."""

    def __init__(self, in_dtype, device: DeviceInfo, tuning: Tuning):
        if tuning.variant != "auto":
            raise ValueError(f"variant={tuning.variant!r} selects a kernel of the 1-D "
                             "reduction; it does not apply to axis= or segmented reductions")
        self.device, self.tuning = device, tuning
        self.warp = device.warp if tuning.warp_size is None else int(tuning.warp_size)
        self.block = tuning.block_size or max(device.default_block, self.warp)
        self.items = tuning.items_per_thread or default_items(in_dtype)
        #: items of a lane of a group reducing a row of 16 elements or more
        #: into a scalar: two 16-byte loads of 4-byte elements. On an H100, float32 row sums
        #: of 2**24 x 16 took 383 us in two lanes of 8 against 486 in four of 4
        #: (CuPy 381, PyTorch 1709); of 2**20 x 64, 95 against 126; of 2**20 x
        #: 100, sixteen lanes of 8 217 against 348 for a warp of 4 (CuPy 203).
        #: A warp or a block per row keeps one load: with two, rows of 300 and
        #: 4096 took 104 and 101 us against 71 and 52
        self.row_items = tuning.items_per_thread or (
            8 if np.dtype(in_dtype).itemsize == 4 else self.items)
        if self.block % self.warp:
            raise ValueError(f"block size {self.block} is not a multiple of warp size "
                             f"{self.warp}")
        #: blocks worth launching at once before outputs are split into parts
        self.target = (2 * device.max_grid(self.block) if tuning.max_blocks is None
                       else int(tuning.max_blocks))
        self.resident_warps = device.sm_count * device.max_threads_per_sm // self.warp

    def narrow_block(self, threads: int) -> int:
        """The block size for ``threads`` useful threads: no wider than needed
        (at least a warp), unless the call named one."""
        if self.tuning.block_size:
            return self.block
        return min(self.block, max(self.warp, 1 << max(0, threads - 1).bit_length()))

    def group(self, length: float, count: int, items: int) -> tuple[str, int]:
        """What reduces one of ``count`` rows of ``length`` elements (on average)
        read ``items`` a thread, and the lanes per row of a ``lanes`` group
        (else 0)."""
        wtile = self.warp * items
        if length <= THREAD_MAX:
            return "thread", 0
        if length <= wtile // 2:
            lanes = 2
            while lanes * items < length:
                lanes *= 2
            return "lanes", lanes
        if length <= 2 * wtile or (length <= WARP_TILES * wtile
                                   and count >= self.resident_warps // 2):
            return "warp", 0
        return "block", 0

    def lane_items(self, length: float, lanes: int, items: int) -> int:
        """Items per thread of a group of ``lanes`` lanes for rows of ``length``:
        the tuning's if it names them, else no more than a tile that covers the
        row needs (the default fills 16 bytes: 16 int8 items, where 2 lanes of
        8 cover a row of 16)."""
        if not lanes or self.tuning.items_per_thread:
            return items
        need = max(1, math.ceil(length / lanes))
        return min(items, 1 << (need - 1).bit_length())

    def parts(self, count: int, length: float, unit: int, target: int | None = None) -> int:
        """How many parts each of ``count`` outputs is cut into: enough for
        ``target`` blocks (default :attr:`target`), each at least ``unit``
        elements long."""
        target = self.target if target is None else target
        if count >= target:
            return 1
        return max(1, min(-(-target // count), int(-(-length // unit))))

    def columns_target(self, block: int) -> int:
        """The blocks of ``block`` threads a split columns pass aims at: a
        :data:`COLUMNS_SHARE`-th of the threads the GPU holds at once (two
        blocks of 256 threads an SM; narrower blocks as many threads), and two
        blocks an SM at least, unless the call named ``max_blocks``.
        Each thread keeps :data:`~pyreduce.variants.columns.ROWS` vector loads
        in flight, which that many threads cover; more parts only add rows of
        partials that the finishing passes read again. On an H100 (device
        time, float32 CuPy arrays, ``axis=0``, 2026-11-27,
        ``docs/performance/columns-parts-h100.txt``) a quarter of the
        threads against twice them, the target before: 4096 x 4096 sum 36.6
        us against 54.3 (PyTorch 34.8), mean 41.6 against 51.5, argmax 45.4
        against 58.1; 8192 x 2048 sum 37.2 against 60.4; 65536 x 1024 sum
        105.8 against 137.0 (PyTorch 117.7); 16384 x 16384 sum 354.7 against
        367.9 (362.2)."""
        if self.tuning.max_blocks is not None:
            return self.target
        threads = self.resident_warps * self.warp // COLUMNS_SHARE
        return max(2 * self.device.sm_count, threads // block)


def _pow2_alignment(align: int, itemsize: int, *element_offsets: int) -> int:
    """The alignment (bytes, at most ``align``) every address ``base + e * itemsize``
    has, for the element offsets given (zero ones say nothing)."""
    for e in element_offsets:
        b = abs(e) * itemsize
        if b:
            align = min(align, b & -b)
    return align


def _finish_items(acc_dtype, shape: _Shape) -> int:
    """Items per thread of a finishing pass, which reads accumulators: 16 bytes
    of them, unless the call named a count."""
    return default_items(acc_dtype) if shape.tuning.items_per_thread is None else shape.items


def _finish_spec(kind, acc_dtype, op_key, shape: _Shape, initial: bool, outputs: int,
                 source="rows"):
    """The finishing pass over the parts' partials: a warp per output for rows
    and segments, the columns kernel for columns (see :func:`_columns_finish`)."""
    items = _finish_items(acc_dtype, shape)
    if kind == "columns":
        family, group, block = "columns", "block", shape.narrow_block(-(-outputs // items))
    else:
        family, group, block = "segments", "warp", shape.narrow_block(outputs * shape.warp)
    return BatchSpec(family, acc_dtype, acc_dtype, op_key, block, shape.warp, items,
                     1, group, source, True, False, initial, True)


def _narrow_fold(shape: _Shape, Mi: int, items: int, acc_dtype) -> tuple[int, int] | None:
    """``(block, g)`` of the narrow columns kernel for rows of ``Mi`` outputs:
    ``g`` rows make a wide row of as many columns as fit the block's threads
    and shared memory (:func:`~pyreduce.variants.columns.fold_width`), a
    multiple of ``items`` so that every thread owns whole columns; the block no
    wider than its columns need. None where not one row fits."""
    step = items // math.gcd(items, Mi)
    g = fold_width(shape.block, items, acc_dtype) // Mi // step * step
    if g < 1:
        return None
    return shape.narrow_block(-(-g * Mi // items)), g


def plan_strided(d: Strided, in_dtype: np.dtype, acc_dtype: np.dtype, op_key,
                 device: DeviceInfo, tuning: Tuning = Tuning(), initial: bool = False,
                 align: int = 0, mapped: bool = False, commutative: bool = False) -> BatchPlan:
    """The plan for an ``axis=`` reduction described by ``d`` (``M, K >= 1``), on a
    1-D input whose first element is ``align``-byte aligned (0: unknown).
    ``mapped``: the op has an element map (``Monoid.map``), applied by the first
    pass. ``commutative``: the op may combine a lane's elements in any order
    (``Monoid.commutative``), which the narrow columns kernel needs."""
    key = ("strided", d, in_dtype, acc_dtype, op_key, device.key, device.warp,
           tuning, initial, align, mapped, commutative)
    return _memo(key, lambda: _plan_strided(d, in_dtype, acc_dtype, op_key, device, tuning,
                                            initial, align, mapped, commutative))


def _plan_strided(d, in_dtype, acc_dtype, op_key, device, tuning, initial, align, mapped,
                  commutative):
    shape = _Shape(in_dtype, device, tuning)
    across = abs(d.ks) != 1 and d.M > 1 and abs(d.si) < abs(d.ks)
    narrow = across and commutative and d.Mi < shape.warp * shape.items
    fold = _narrow_fold(shape, d.Mi, shape.items, acc_dtype) if narrow else None
    if fold is not None and d.K >= fold[1]:  # at least one wide row
        return _plan_narrow(d, in_dtype, acc_dtype, op_key, shape, initial, align, mapped,
                            fold)
    if across and d.Mi >= shape.warp:
        return _plan_columns(d, in_dtype, acc_dtype, op_key, shape, initial, align, mapped)
    return _plan_rows(d, in_dtype, acc_dtype, op_key, shape, initial, align, mapped,
                      commutative)


def _descriptor(d: Strided) -> tuple:
    return (d.off, d.M, d.Mi, d.so, d.si, d.K, d.ks)


def _adjacent_rows(d: Strided) -> bool:
    """Whether row ``m`` of ``d`` is the ``K`` adjacent elements from ``off + m * K``
    on: the rows are one dense run of memory, in order."""
    return (d.ks == 1 and (d.Mi == 1 or d.si == d.K)
            and (d.Mi == d.M or d.so == d.Mi * d.K))


def staged_rows_each(K: int, in_dtype: np.dtype) -> int:
    """Rows a thread of the staged group folds: the most (a power of two) whose
    ``K`` elements each stay within :data:`STAGED_THREAD_BYTES` loaded, at least one."""
    each = 1
    while 2 * each * K * in_dtype.itemsize <= STAGED_THREAD_BYTES and 2 * each <= 32:
        each *= 2
    return each


def _staged_block(shape: _Shape, K: int, each: int, in_dtype: np.dtype, M: int) -> int:
    """Threads of a staged block: the call's block size, halved while the tile
    of ``block * each * K`` elements would pass :data:`STAGED_BYTES`, and no
    wider than the rows need."""
    block = shape.narrow_block(-(-M // each))
    while (block > shape.warp
           and staged_words(block, K, each) * in_dtype.itemsize > STAGED_BYTES):
        block //= 2
    return block


def _staged_rows(d: Strided, in_dtype: np.dtype, warp: int) -> bool:
    """Whether the staged group reduces the rows of ``d``: rows one after another
    of 2 to :data:`STAGED_MAX` elements of any type but bool, except rows of 16
    (whose threads would read the tile with 16-way bank conflicts). Measured on
    an H100 (sums of 2**23 rows, device time, CuPy's in the same run):
    float32 rows of 2, 3, 4, 5, 8, 9, 12, 15 and 24 took 39, 48, 61, 70, 104,
    115, 151, 183 and 295 us staged against 61, 67, 77, 166, 128, 335, 339, 334
    and 418 for a thread, two lanes or four lanes a row (CuPy 41, 53, 58, 73,
    102, 128, 149, 216 and 858); float64 rows of 2 to 4 took the same either
    way, of 5 to 15 0.43-0.82 the time, of 24 572 us against 1294 (CuPy
    1036). Rows of 16 took 322 us staged against 190 for two lanes. Rows of
    which one warp's would pass :data:`STAGED_BYTES` are not staged either."""
    return (2 <= d.K <= STAGED_MAX and d.K % 16 != 0 and in_dtype.kind != "b"
            and staged_words(warp, d.K) * in_dtype.itemsize <= STAGED_BYTES
            and _adjacent_rows(d))


#: A warp or a block a row of a commutative op keeps one accumulator a lane
#: across the tiles it reads and shuffles once, after the last
#: (:attr:`BatchSpec.lane_accs`), where the ordered fold shuffles after every
#: tile. ``bench/rows_lanes.py`` turns it off to time the ordered fold against it.
LANE_ACCS = True


def _plan_rows(d, in_dtype, acc_dtype, op_key, shape, initial, align, mapped,
               commutative=False) -> BatchPlan:
    if _staged_rows(d, in_dtype, shape.warp):
        return _plan_staged(d, in_dtype, acc_dtype, op_key, shape, initial, mapped)
    unit = d.ks == 1
    rows_align = _pow2_alignment(align, in_dtype.itemsize, d.off, d.so, d.si) if unit else 0
    # whether a lane's loads can be vector loads, and then whether its loaded
    # run is summarised in float32 first, as the 1-D first passes do
    vectors = unit and shape.tuning.vector_loads is not False and vector_width(
        shape.items, in_dtype, rows_align, shape.device, None) > 1
    tiles = vectors and mapped and op_key in F32_TILES and tiles_in_float32(in_dtype)
    wide = _lane_items(shape, "lanes", d.K, acc_dtype, tiles, vectors)
    group, lanes = shape.group(d.K, d.M, wide)
    if group != "lanes":  # a thread, a warp or a block a row
        group, lanes = shape.group(d.K, d.M, shape.items)
    accs = commutative and group in ("warp", "block") and LANE_ACCS
    items = _lane_items(shape, group, d.K, acc_dtype, tiles, vectors, accs)
    block, items, vector, parts = shape.block, shape.lane_items(d.K, lanes, items), 1, 1
    wanted = shape.tuning.vector_loads
    if group == "thread":
        block = shape.narrow_block(d.M)
        grid = -(-d.M // block)
        if wanted:  # a thread reads its row one element at a time
            vector_width(items, in_dtype, 0, shape.device, True)
    else:
        vector = vector_width(items, in_dtype, rows_align, shape.device, wanted)
        if group in ("lanes", "warp"):
            width = lanes or shape.warp
            block = shape.narrow_block(d.M * width)
            grid = -(-d.M // (block // width))
        else:
            tile = block * items
            parts = shape.parts(d.M, d.K, tile)
            chunk = -(-(-(-d.K // parts)) // tile) * tile  # noqa: B002  (two ceilings)
            parts = -(-d.K // chunk)  # every part holds elements
            grid = d.M * parts
    split = parts > 1
    f32_tiles = tiles and vector > 1
    spec = BatchSpec("segments", in_dtype, acc_dtype, op_key, block, shape.warp, items,
                     vector, group, "rows", unit, split, initial and not split, mapped=mapped,
                     lanes=lanes, f32_tiles=f32_tiles,
                     lane_accs=accs)
    desc = _descriptor(d)
    init = Ref("init", 0, 1)
    grain = block * items
    first_out = Ref("partials", 0, d.M * parts) if split else OUTPUT
    steps = [Step(spec, grid, (INPUT, *desc, parts, grain, first_out, init))]
    buffers = [("init", 1, acc_dtype, False)]
    if split:
        fin = _finish_spec("rows", acc_dtype, op_key, shape, initial, d.M)
        fgrid = -(-d.M // fin.warps)
        steps.append(Step(fin, fgrid, (first_out, *desc, parts, grain, OUTPUT, init)))
        buffers.append(("partials", d.M * parts, acc_dtype, False))
    return BatchPlan("rows", spec, grid, parts, d.M,
                     Schedule(tuple(buffers), tuple(steps), init, d.M))


#: items a lane of a group of lanes or of a block loads where it summarises its
#: run in float32 (:attr:`BatchSpec.f32_tiles`)
TILE_ITEMS = 16


def _lane_items(shape: _Shape, group: str, K: int, acc_dtype: np.dtype, tiles: bool,
                vectors: bool, accs: bool = False) -> int:
    """Items a lane loads at once in ``group`` for rows of ``K`` (the call's
    own count where it names one). Rows of 16 or more: :data:`TILE_ITEMS`
    where runs are summarised in float32 (``tiles``) in a group of lanes or a
    block; else two 16-byte loads of 4-byte elements (``row_items``), but for
    a tuple accumulator only where the loads are vector loads (``vectors``:
    adjacent, aligned rows, which the measurements below are of). On an H100,
    device time of float32 rows with 4 items a lane against these: 16384 x
    16384, argmax 614 us against 355, var 560 (8 items) against 441, mean 384
    against 357 (PyTorch 401, 439, 349); 2**20 x 64, argmax 188 against 101,
    var 357 against 105, mean 164 against 104 (PyTorch 464, 467, 239); rows of
    300 (a warp each), argmax 133 against 125 (a sum 74 against 80).

    A warp or a block a row of a scalar accumulator: with lane accumulators
    (``accs``) and vector loads of 4-byte elements, two 16-byte loads a lane
    in a warp and four in a block; otherwise one. On an H200, float32 sums
    (maxima) against 4 items: rows of 300, 47.5 (53.5) us at 8 items against
    51.0 (54.9); 16384 x 16384, 246.8 (247.6) at 16 against 284.3 (273.7);
    64 x 2**20, 70.8 (70.4) against 76.0 (77.2); CuPy 40.2 (87.2), 236.7
    (239.3), 139.0 (275.1). The ordered fold, which shuffles once a tile,
    took 104 and 101 us with two loads against 71 and 52 for rows of 300 and
    4096 on an H100."""
    if K < 16 or shape.tuning.items_per_thread:
        return shape.items
    if tiles and group in ("lanes", "block"):
        return max(shape.items, TILE_ITEMS)
    if is_tuple(acc_dtype) and not vectors:
        return shape.items
    if group != "lanes" and not is_tuple(acc_dtype):
        # row_items differs from items only for 4-byte elements, untuned
        if not (accs and vectors and shape.row_items != shape.items):
            return shape.items
        return 2 * shape.row_items if group == "block" else shape.row_items
    return shape.row_items


def _plan_staged(d, in_dtype, acc_dtype, op_key, shape, initial, mapped) -> BatchPlan:
    each = staged_rows_each(d.K, in_dtype)
    block = _staged_block(shape, d.K, each, in_dtype, d.M)
    spec = BatchSpec("segments", in_dtype, acc_dtype, op_key, block, shape.warp, each,
                     1, "staged", "rows", True, False, initial, mapped=mapped, row=d.K)
    grid = -(-d.M // (block * each))
    init = Ref("init", 0, 1)
    step = Step(spec, grid, (INPUT, *_descriptor(d), 1, block * each * d.K, OUTPUT, init))
    return BatchPlan("rows", spec, grid, 1, d.M,
                     Schedule((("init", 1, acc_dtype, False),), (step,), init, d.M))


def _plan_columns(d, in_dtype, acc_dtype, op_key, shape, initial, align,
                  mapped) -> BatchPlan:
    items = shape.items
    unit = d.si == 1
    rows_align = _pow2_alignment(align, in_dtype.itemsize, d.off, d.so, d.ks) if unit else 0
    vector = vector_width(items, in_dtype, rows_align, shape.device, shape.tuning.vector_loads)
    block = shape.narrow_block(-(-d.Mi // items))
    tiles = -(-d.Mi // (block * items))
    blocks = d.Mo * tiles
    parts = shape.parts(blocks, d.K, ROWS, shape.columns_target(block))
    if len(acc_dtype.names or ()) > 2 and shape.tuning.max_blocks is None:
        resident = max(1, shape.device.max_grid(block) // blocks)  # parts, every block resident
        parts = max(parts, min(-(-d.K // HEAVY_ROWS), resident))
    parts = _whole_parts(d.K, parts)
    split = parts > 1
    spec = BatchSpec("columns", in_dtype, acc_dtype, op_key, block, shape.warp, items,
                     vector, "block", "rows", unit, split, initial and not split,
                     mapped=mapped, f32_tiles=_column_runs(in_dtype, op_key, mapped, False))
    return _columns_plan(d, spec, blocks * parts, parts, 0, shape, initial)


#: Whether the columns kernels summarise each output's run of
#: :data:`~pyreduce.variants.columns.ROWS` rows in float32 before they merge it
#: (:attr:`BatchSpec.f32_tiles`), for the ops and dtypes that may
#: (:func:`pyreduce.spec.column_runs`), as the rows kernels summarise their
#: lanes' runs; off, the columns merge every element in float64. On an H200
#: (device time, float32 CuPy arrays, 2026-12-01,
#: ``docs/performance/columns-runs-h200.txt``, ``bench/columns.py --runs``)
#: ``var`` of 16384 x 16384 took 363.2 us against 465.3 element by element,
#: 1024 x 65536 151.8 against 188.6, 2**24 x 16 387.0 against 505.4 and
#: 4194304 x 48 416.9 against 512.9; ``argmax`` of 16384 x 16384 262.7 against
#: 280.2; ``mean`` of 2**24 x 16 286.7 against 303.8, of 16384 x 16384 261.0
#: against 255.9 and of 4096 x 4096 35.3 against 35.0.
COLUMN_RUNS = True


def _column_runs(in_dtype, op_key, mapped: bool, narrow: bool) -> bool:
    """Whether a columns kernel's first pass summarises runs of rows in float32."""
    return (COLUMN_RUNS and mapped and tiles_in_float32(in_dtype)
            and column_runs(op_key, narrow))


def _plan_narrow(d, in_dtype, acc_dtype, op_key, shape, initial, align, mapped,
                 fold) -> BatchPlan:
    """Rows of fewer outputs than a warp's loads, for a commutative op: the narrow
    columns kernel (:mod:`pyreduce.variants.columns`), ``g`` rows to a wide row
    (``fold``: :func:`_narrow_fold`), the ``K // g`` full wide rows cut into
    parts as the columns kernel cuts rows."""
    block, g = fold
    items = shape.items
    unit = d.si == 1 and d.ks == d.Mi  # a wide row is adjacent elements
    rows_align = (_pow2_alignment(align, in_dtype.itemsize, d.off, d.so, g * d.ks)
                  if unit else 0)
    vector = vector_width(items, in_dtype, rows_align, shape.device, shape.tuning.vector_loads)
    parts = _whole_parts(d.K // g, shape.parts(d.Mo, d.K // g, ROWS))
    split = parts > 1
    spec = BatchSpec("columns", in_dtype, acc_dtype, op_key, block, shape.warp, items,
                     vector, "block", "rows", unit, split, initial and not split,
                     mapped=mapped, narrow=True,
                     f32_tiles=_column_runs(in_dtype, op_key, mapped, True))
    return _columns_plan(d, spec, d.Mo * parts, parts, g, shape, initial)


def _whole_parts(rows: int, parts: int) -> int:
    """``parts`` made as few as cover ``rows`` with ``ceil(rows / parts)`` rows
    each, as the kernels cut them: every part then holds rows."""
    return -(-rows // -(-rows // parts))


def _columns_plan(d, spec: BatchSpec, grid: int, parts: int, grain: int, shape: _Shape,
                  initial: bool) -> BatchPlan:
    """The plan of a columns-family first pass ``spec`` over ``d`` (``grid``
    blocks, ``grain`` its argument) and, where it is split into ``parts``, the
    finishing pass over its partials (:func:`_columns_finish`)."""
    acc_dtype, split = spec.acc_dtype, parts > 1
    init = Ref("init", 0, 1)
    first_out = Ref("partials", 0, d.M * parts) if split else OUTPUT
    steps = [Step(spec, grid, (INPUT, *_descriptor(d), parts, grain, first_out, init))]
    buffers = [("init", 1, acc_dtype, False)]
    if split:
        fin, fgrid, fgrain = _columns_finish(spec, shape, initial, d.M)
        buffers.append(("partials", d.M * parts, acc_dtype, False))

        def partials(rows):  # `rows` rows of M partials: a columns problem of its own
            return (0, d.M, d.M, 0, 1, rows, d.M)

        # cut into parts again where the finishing grid would leave SMs idle
        rows, src = parts, first_out
        sub = 1 if fin.narrow else _finish_parts(fgrid, rows, shape)
        if sub > 1:
            mid = dataclasses.replace(fin, split=True, initial=False)
            mid_out = Ref("partials2", 0, d.M * sub)
            steps.append(Step(mid, fgrid * sub,
                              (src, *partials(rows), sub, fgrain, mid_out, init)))
            buffers.append(("partials2", d.M * sub, acc_dtype, False))
            rows, src = sub, mid_out
        steps.append(Step(fin, fgrid, (src, *partials(rows), 1, fgrain, OUTPUT, init)))
    return BatchPlan("columns", spec, grid, parts, d.M,
                     Schedule(tuple(buffers), tuple(steps), init, d.M), grain or 1)


#: rows of partials a part of an intermediate finishing pass reads, at least
FINISH_ROWS = 8


def _finish_parts(fgrid: int, rows: int, shape: _Shape) -> int:
    """Parts of an intermediate pass over ``rows`` rows of partials whose
    finishing pass has ``fgrid`` blocks, or 1 for none: where those blocks are
    fewer than the SMs, the rows are cut into parts of at least
    :data:`FINISH_ROWS` rows, enough for two blocks an SM, if that makes four
    parts or more; the finishing pass then reads one row a part. A thread of
    the finishing pass walks its rows one after the other, so a long walk costs
    more than a launch however few bytes the partials hold: on an H100
    (2026-11-27, ``docs/performance/columns-parts-h100.txt``) a sum of the
    columns of 1048576 x 32 float32 took 289.5 us with one block walking 2048
    rows of 32 partials (256 KiB) and 88.1 with an intermediate pass
    (PyTorch 95.4 in another run), of 4194304 x 48 545.3 against 301.1;
    before, only partials of 512 KiB or more had an intermediate pass.

    On an H200 (device time of calls back to back, float32 4096 x 4096 along
    ``axis=0``, one run) the finishing pass alone held the call back: a sum's
    512 parts of 8 rows each were read by 4 blocks (102.7 us; with 64 parts,
    ``Tuning(max_blocks=256)``, 33.0; PyTorch 28.9), and var's 128 parts by 8
    blocks merging 128 summaries a thread (164.6 us; with 32 parts 87.4;
    PyTorch 88.0), while fewer parts starved mean's first pass (53.3 us
    with 128 parts, 72.0 with 32)."""
    sms = shape.device.sm_count
    limit = min(-(-2 * sms // fgrid), rows // FINISH_ROWS)
    if fgrid >= sms or limit < 4:
        return 1
    return _whole_parts(rows, limit)


def _columns_finish(first: BatchSpec, shape: _Shape, initial: bool,
                    outputs: int) -> tuple[BatchSpec, int, int]:
    """``(spec, grid, grain)`` of the pass that reduces the ``parts`` rows of
    ``outputs`` partials a split columns pass (``first``) writes: the columns
    kernel, a thread per ``items`` of them, where a row of them fills a warp;
    else (a narrow first pass: the op commutes) the narrow kernel, in one block
    and one part, as many rows to a wide row as fit."""
    acc_dtype = first.acc_dtype
    items = _finish_items(acc_dtype, shape)
    fold = _narrow_fold(shape, outputs, items, acc_dtype) if first.narrow else None
    if outputs >= shape.warp or fold is None:
        fin = _finish_spec("columns", acc_dtype, first.op_key, shape, initial, outputs)
        return fin, -(-outputs // (fin.block * fin.items)), 0
    block, g = fold
    fin = BatchSpec("columns", acc_dtype, acc_dtype, first.op_key, block, shape.warp, items,
                    1, "block", "rows", True, False, initial, True, narrow=True)
    return fin, 1, g


def plan_segments(segments: int, n: int, in_dtype: np.dtype, acc_dtype: np.dtype, op_key,
                  device: DeviceInfo, tuning: Tuning = Tuning(),
                  initial: bool = False, mapped: bool = False) -> BatchPlan:
    """The plan for ``segments >= 1`` segments of a 1-D input of ``n`` elements
    (``mapped``: as for :func:`plan_strided`)."""
    key = ("segments", segments, n, in_dtype, acc_dtype, op_key, device.key,
           device.warp, tuning, initial, mapped)
    return _memo(key, lambda: _plan_segments(segments, n, in_dtype, acc_dtype, op_key,
                                             device, tuning, initial, mapped))


def _plan_segments(S, n, in_dtype, acc_dtype, op_key, device, tuning, initial,
                   mapped) -> BatchPlan:
    shape = _Shape(in_dtype, device, tuning)
    if tuning.vector_loads:  # segment starts are data: no alignment to rely on
        vector_width(shape.items, in_dtype, 0, device, True)
    average = n / S
    group, lanes = shape.group(average, S, shape.items)
    block, parts, items = shape.block, 1, shape.lane_items(average, lanes, shape.items)
    if group == "thread":
        block = shape.narrow_block(S)
        grid = -(-S // block)
    elif group in ("lanes", "warp"):
        width = lanes or shape.warp
        block = shape.narrow_block(S * width)
        grid = -(-S // (block // width))
    else:
        parts = shape.parts(S, average, block * shape.items)
        grid = S * parts
    split = parts > 1
    spec = BatchSpec("segments", in_dtype, acc_dtype, op_key, block, shape.warp, items,
                     1, group, "offsets", True, split, initial and not split, mapped=mapped,
                     lanes=lanes)
    init = Ref("init", 0, 1)
    grain = block * items
    first_out = Ref("partials", 0, S * parts) if split else OUTPUT
    steps = [Step(spec, grid, (INPUT, n, OFFSETS, S, parts, grain, first_out, init))]
    buffers = [("init", 1, acc_dtype, False)]
    if split:
        fin = _finish_spec("segments", acc_dtype, op_key, shape, initial, S, "offsets")
        steps.append(Step(fin, -(-S // fin.warps),
                          (first_out, n, OFFSETS, S, parts, grain, OUTPUT, init)))
        buffers.append(("partials", S * parts, acc_dtype, False))
    return BatchPlan("segments", spec, grid, parts, S,
                     Schedule(tuple(buffers), tuple(steps), init, S))


def describe_plan(plan: BatchPlan) -> str:
    """One line: the kind, the first pass's kernel and grid, the parts."""
    steps = plan.schedule.steps
    mid = "".join(f", cut into {s.args[8]} by {s.spec.label}" for s in steps[1:-1])
    parts = (f", {plan.parts} parts per output{mid} then {plan.finish.label}"
             if plan.parts > 1 else "")
    lanes = f" ({plan.spec.lanes} lanes per output)" if plan.spec.lanes else ""
    wide = f" ({plan.wide_rows} rows per wide row)" if plan.spec.narrow else ""
    return (f"{plan.kind}: {plan.spec.label}; grid {plan.grid} x {plan.spec.block} threads "
            f"for {plan.outputs} outputs{lanes}{wide}{parts}")

