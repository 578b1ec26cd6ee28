"""The frozen, hashable description of one generated kernel."""

from __future__ import annotations

import dataclasses
from typing import Hashable

import numpy as np

from .dtypes import check_accumulator, code, fields, is_bfloat16, is_tuple

__all__ = ["KernelSpec", "BatchSpec", "WARP_SIZES", "BLOCK_SIZES", "ITEMS_PER_THREAD",
           "default_items", "LEAF", "F32_TILES", "tiles_in_float32", "column_runs"]

WARP_SIZES = (32, 64)
BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)
ITEMS_PER_THREAD = (1, 2, 4, 8, 16, 32)

#: Op keys whose first pass may summarise each lane's full tile of a float32 or
#: half-precision input in float32 (:attr:`KernelSpec.f32_tiles`), and how:
#: ``"moments"``, var's ``(count, shift, s, q)`` summaries (``s`` and ``q`` the
#: sums of ``x - shift`` and of its square; the element map ``(1, x, 0, x - x)``);
#: ``"sums"``, mean's ``(count, sum)`` (the element map ``(1, x)``);
#: ``"argmax"`` and ``"argmin"``, ``(value, index)`` with the element map
#: ``(x, i)``, the first index of the extreme or of the first NaN.
#: :mod:`pyreduce.structured` adds the keys.
F32_TILES: dict = {}

#: Elements per leaf of the fixed tree of ``deterministic=True``, folded left to
#: right (:mod:`pyreduce.deterministic` says why 4); a power of two, so that leaves
#: tile the aligned spans the kernels work on.
LEAF = 4


def tiles_in_float32(dtype: np.dtype) -> bool:
    """Whether a lane's tile of ``dtype`` elements may be summarised in float32:
    float32, float16 and bfloat16 (every one of their values is a float32)."""
    return dtype == np.float32 or dtype == np.float16 or is_bfloat16(dtype)


def column_runs(op_key, narrow: bool) -> bool:
    """Whether a columns kernel may summarise each output's run of rows in
    float32 (:attr:`BatchSpec.f32_tiles`) for ``op_key``: an op of
    :data:`F32_TILES`, and for the ``narrow`` kernel, whose runs are rows
    ``g`` apart, only the sums and moments, which keep no index."""
    kind = F32_TILES.get(op_key)
    return kind is not None and (not narrow or kind in ("sums", "moments"))


def spread_vectors(items: int, vector: int) -> bool:
    """Whether a lane's ``items`` can be read as vectors of ``vector`` spread
    over its warp's tile (the striped variants): whole vectors, more than one."""
    return vector > 1 and items % vector == 0 and items > vector


def default_items(dtype: np.dtype) -> int:
    """Enough items per thread for 16 bytes in flight, at least 2 (op during load)."""
    return int(min(16, max(2, 16 // dtype.itemsize)))


class _LaunchShape:
    """What every spec shares: threads per block, lanes per warp, items per
    thread and the load width, and the names derived from them."""

    #: a 1-D first pass may set it (:attr:`KernelSpec.f32_tiles`); batched kernels not
    f32_tiles = False
    #: the ``staged`` group's row length (:attr:`BatchSpec.row`); 0 for every other kernel
    row = 0

    @property
    def warps(self) -> int:
        return self.block // self.warp

    @property
    def half_as_float32(self) -> bool:
        """Whether a float16 element is widened to float32 as it is loaded: for
        an element map, which sees float32 on every backend, and for another
        accumulator type (exact; NVVM has no float16 to bool conversion)."""
        return self.in_dtype == np.float16 and (self.mapped or self.acc_dtype != self.in_dtype)

    @property
    def tile(self) -> int:
        """Elements one block consumes per step; chunks are multiples of it."""
        return self.block * self.items

    @property
    def label(self) -> str:
        """Short, readable name: ``warp_shuffle f4 b256 w32 i4``, or ``i1->i8`` where
        the input and accumulator dtypes differ, ``v4`` where loads are vectors."""
        src, acc = code(self.in_dtype), code(self.acc_dtype)
        dt = src if src == acc else f"{src}->{acc}"
        vec = f" v{self.vector}" if self.vector > 1 else ""
        fin = " finish" if self.finish else ""
        done = " finished" if getattr(self, "finisher", None) is not None else ""
        t32 = " t32" if self.f32_tiles else ""
        return (f"{self.variant} {dt} b{self.block} w{self.warp} i{self.items}{vec}{fin}"
                f"{t32}{done}")


def _check_launch_shape(spec) -> None:
    """Normalise the dtypes and check the fields every spec has; ValueError names
    the one out of range."""
    object.__setattr__(spec, "in_dtype", np.dtype(spec.in_dtype))
    object.__setattr__(spec, "acc_dtype", np.dtype(spec.acc_dtype))
    for dt in fields(spec.acc_dtype):
        check_accumulator(dt, "accumulator")
    mapped = spec.mapped
    if spec.finish and mapped:
        raise ValueError("a finishing pass reads accumulator values: it maps nothing")
    if is_tuple(spec.acc_dtype) and not (mapped or spec.finish):
        raise ValueError("a tuple accumulator needs an element map for its first pass")
    if spec.warp not in WARP_SIZES:
        raise ValueError(f"warp size {spec.warp} not in {WARP_SIZES}")
    if spec.block not in BLOCK_SIZES:
        raise ValueError(f"block size {spec.block} not in {BLOCK_SIZES}")
    if spec.block % spec.warp:
        raise ValueError(
            f"block size {spec.block} is not a multiple of warp size {spec.warp}"
        )
    if spec.items not in ITEMS_PER_THREAD:
        raise ValueError(f"items per thread {spec.items} not in {ITEMS_PER_THREAD}")
    if spec.finish and (spec.vector != 1 or spec.in_dtype != spec.acc_dtype):
        raise ValueError("a finishing pass reads accumulator values with scalar loads")
    if (spec.vector not in ITEMS_PER_THREAD or spec.vector > spec.items
            or (spec.vector > 1 and spec.vector * spec.in_dtype.itemsize > 16)):
        raise ValueError(
            f"vector width {spec.vector} must be a power of two of at most "
            f"items per thread ({spec.items}) and 16 bytes of {spec.in_dtype}"
        )


@dataclasses.dataclass(frozen=True)
class KernelSpec(_LaunchShape):
    """Everything a kernel factory bakes into the source as literals.

    ``op_key`` identifies the operator's code (see ``pyreduce.ops.function_key``);
    ``in_dtype`` is what the kernel loads and ``acc_dtype`` what it combines and
    writes. Construction validates every field and raises ValueError naming the one
    that is out of range, so no factory is asked for a kernel it cannot build.
    """

    variant: str
    in_dtype: np.dtype
    acc_dtype: np.dtype
    op_key: Hashable
    block: int = 256
    warp: int = 32
    items: int = 4
    #: elements per load of the input (1: scalar loads); see pyreduce.backends.vload
    vector: int = 1
    #: a finishing pass: its input is the partials of an earlier pass (already
    #: accumulator values), not the user's elements
    finish: bool = False
    #: the op has an element map: a first pass turns element ``x[i]`` into
    #: ``fmap(i, x[i])`` before combining (tuple accumulators, nansum, ...)
    mapped: bool = False
    #: the last launch of a structured reduction to one value finishes it: the
    #: value is made into the user's result by the scalar finisher
    #: (:mod:`pyreduce.finishers`) and stored as such, not as an accumulator.
    #: ``(finisher key, ddof, outputs)``; ``ddof`` is a literal in the source.
    finisher: Hashable | None = None
    #: an op of :data:`F32_TILES` on a float32 or half-precision input: each
    #: lane's full tile of vector-loaded items is summarised in float32 and
    #: enters the accumulator as one value, instead of an op per element. var's
    #: summary is the tile's mean and the pairwise sums of the deviations from
    #: it and of their squares (a tile whose float32 sum of squares is not
    #: finite, from an infinity, a NaN or an overflow, or so small that squares
    #: may have underflowed, is folded element by element);
    #: argmax's the tile's first largest element (or first NaN) and its index
    #: in the tile, an int32
    f32_tiles: bool = False

    def __post_init__(self):
        _check_launch_shape(self)
        _check_f32_tiles(self)


def _check_f32_tiles(spec) -> None:
    # a columns kernel's runs are rows, each its own load: they need no vectors
    vectors = getattr(spec, "family", None) != "columns"
    if spec.f32_tiles and (spec.op_key not in F32_TILES or (vectors and spec.vector == 1)
                           or not tiles_in_float32(spec.in_dtype) or not spec.mapped):
        raise ValueError("f32_tiles summarises float32 or half-precision elements (vector-"
                         "loaded, but for the columns kernels' runs of rows) for an op of "
                         "spec.F32_TILES")


#: Kernel families of batched reductions (many results per launch), not variants
#: of the 1-D reduction: ``segments`` (a row or a segment per thread, warp or
#: block: :mod:`pyreduce.variants.segments`) and ``columns`` (each thread owns
#: neighbouring outputs: :mod:`pyreduce.variants.columns`), and ``scan``
#: (prefix scans of rows, a block per tile: :mod:`pyreduce.variants.scan`).
FAMILIES = ("segments", "columns", "scan")
#: What reduces one segment in the ``segments`` family: a thread, a group of
#: ``lanes`` lanes of a warp (a power of two from 2 to half the warp), a warp or
#: a block; or a thread per row of ``row`` elements, after the block has copied
#: its rows into shared memory with adjacent loads (``staged``).
GROUPS = ("thread", "lanes", "warp", "block", "staged")
#: The longest row the ``staged`` group takes: each thread keeps ``row``
#: loaded elements in registers before they go to shared memory.
STAGED_ROW_MAX = 32
#: Where a segment's elements are: ``rows`` (output ``m``'s elements at
#: ``off + (m // Mi) * so + (m % Mi) * si + k * ks``) or ``offsets``
#: (``x[offsets[m] : offsets[m + 1]]``).
SOURCES = ("rows", "offsets")


@dataclasses.dataclass(frozen=True)
class BatchSpec(_LaunchShape):
    """A kernel that computes many reductions in one launch: every row of an
    ``axis=`` reduction, or every segment of ``segmented_reduce``.

    Its calling convention differs from the 1-D kernels' (see the family's
    module), so it is no variant of :data:`pyreduce.variants.VARIANTS`; it is
    built, cached and launched by the same machinery. ``unit`` says the elements
    a thread reads together are adjacent, so vector loads may apply: those of
    one reduction (``ks == 1``), for the ``columns`` family those of a row of
    outputs (``si == 1``), for its ``narrow`` kernel those of ``grain`` rows
    (``si == 1`` and ``ks == Mi``);
    ``split`` that the kernel writes one partial per (output, part) for a
    finishing pass, which reads them (``finish``); ``initial`` that each output
    combines ``init[0]`` on its left.
    """

    family: str
    in_dtype: np.dtype
    acc_dtype: np.dtype
    op_key: Hashable
    block: int = 256
    warp: int = 32
    items: int = 4
    vector: int = 1
    group: str = "block"
    source: str = "rows"
    unit: bool = True
    split: bool = False
    initial: bool = False
    finish: bool = False
    #: the op has an element map: a first pass reduces ``fmap(k, element)``, ``k``
    #: the element's position in its row or segment (from 0)
    mapped: bool = False
    #: lanes per segment of the ``lanes`` group (0 for every other group)
    lanes: int = 0
    #: the ``columns`` family's kernel for rows of fewer outputs than a warp's
    #: loads (``warp * items``): it reads ``grain`` rows as one wide row and
    #: folds their groups of outputs in shared memory, which reorders
    #: (commutative ops only; :mod:`pyreduce.variants.columns`)
    narrow: bool = False
    #: the ``staged`` group's row length, a literal in its loads and its fold (0
    #: for every other group): a block's ``block`` rows are ``block * row``
    #: adjacent elements, copied into shared memory ``row`` loads a thread, a
    #: warp's loads adjacent, then folded from there, a thread a row
    row: int = 0
    #: the last launch of a structured reduction along axes finishes each
    #: output: ``(finisher key, ddof, 1)``, as :attr:`KernelSpec.finisher`, for a
    #: finisher of one result (a rows or columns kernel that writes the outputs)
    finisher: Hashable | None = None
    #: a lane's run of vector-loaded elements of a row is summarised in float32
    #: first, as :attr:`KernelSpec.f32_tiles` (a group of lanes, a warp or a
    #: block a row of the ``segments`` family); in the ``columns`` family each
    #: output's run of ``ROWS`` rows (:func:`column_runs` says for which ops)
    f32_tiles: bool = False
    #: a warp or a block a row (or a part of one) whose lanes keep their own
    #: accumulators across the tiles they read and combine them once, after
    #: the last (:func:`pyreduce.variants._blocks.lane_fold`), where the
    #: ordered fold shuffles once a tile: it reorders, so commutative ops only
    lane_accs: bool = False

    def __post_init__(self):
        _check_launch_shape(self)
        if self.lane_accs and (self.family != "segments" or self.group not in ("warp", "block")
                               or self.finish):
            raise ValueError("lane_accs applies to the first pass of a warp or a block a row "
                             "of the segments family")
        _check_f32_tiles(self)
        if self.f32_tiles and (self.finish or not (
                self.family == "segments" and self.group in ("lanes", "warp", "block")
                or self.family == "columns" and column_runs(self.op_key, self.narrow))):
            raise ValueError("f32_tiles applies to the first pass of a group of lanes, a "
                             "warp or a block a row, and of the columns kernels (the narrow "
                             "one's for sums and moments, which no index follows)")
        if self.finisher is not None and (self.family == "scan" or self.split
                                          or self.finisher[2] != 1):
            raise ValueError("finisher= applies to a rows or columns kernel that writes "
                             "the outputs, of a finisher of one result")
        if (self.group == "staged") != bool(self.row):
            raise ValueError("row= is the staged group's row length, and that group needs one")
        if self.row and not (2 <= self.row <= STAGED_ROW_MAX and self.source == "rows"
                             and self.unit and self.vector == 1 and not self.split
                             and not self.finish and self.family == "segments"):
            raise ValueError(f"the staged group reads whole rows of 2 to {STAGED_ROW_MAX} "
                             "adjacent elements of the input, with scalar loads, in one pass")
        if self.family not in FAMILIES:
            raise ValueError(f"unknown kernel family {self.family!r}; known: {FAMILIES}")
        if self.group not in GROUPS:
            raise ValueError(f"group {self.group!r} not in {GROUPS}")
        if self.group == "lanes":
            if not (2 <= self.lanes <= self.warp // 2 and self.lanes & (self.lanes - 1) == 0):
                raise ValueError(f"lanes {self.lanes} per segment: a power of two from 2 "
                                 f"to half the warp ({self.warp // 2})")
        elif self.lanes:
            raise ValueError(f"lanes={self.lanes} applies to the 'lanes' group only")
        if self.source not in SOURCES:
            raise ValueError(f"source {self.source!r} not in {SOURCES}")
        if self.vector > 1 and not self.unit:
            raise ValueError("vector loads need adjacent elements (unit=True)")
        if self.split and self.group != "block" and self.family == "segments":
            raise ValueError("only a block per segment splits a segment into parts")
        if self.narrow and self.family != "columns":
            raise ValueError("narrow=True applies to the 'columns' family only")

    @property
    def width(self) -> int:
        """Lanes that reduce one segment together: ``lanes`` for the ``lanes``
        group, the warp for the others that shuffle."""
        return self.lanes or self.warp

    @property
    def variant(self) -> str:
        """The kernel's kind, as its name and label show it."""
        if self.family == "scan":
            return "scan_totals" if self.split else "scan_init" if self.initial else "scan"
        if self.family == "columns":
            parts = ["columns_narrow" if self.narrow else "columns"]
        else:
            parts = [self.source, f"lanes{self.lanes}" if self.lanes
                     else f"staged{self.row}" if self.row else self.group]
            parts += ["accs"] if self.lane_accs else []
        parts += [] if self.unit else ["strided"]
        parts += ["split"] if self.split else []
        parts += ["init"] if self.initial else []
        return "_".join(parts)
