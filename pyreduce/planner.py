"""How a reduction of ``n`` elements is laid out on a device: the :class:`Plan`."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from . import tuned
from .cache import Memo
from .dtypes import fields, is_bfloat16, is_tuple
from .log import logger
from .spec import (BLOCK_SIZES, F32_TILES, ITEMS_PER_THREAD, WARP_SIZES, KernelSpec,
                   default_items, spread_vectors, tiles_in_float32)
from .variants import VARIANTS

__all__ = [
    "DEFAULT_TUNING",
    "DeviceInfo", "Plan", "Tuning", "make_plan", "address_alignment", "vector_width",
    "Auto", "auto_variant", "recorded_tuning",
]


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """What the planner needs to know of a device."""

    name: str
    key: tuple  # identifies the compile target (device id, compute capability)
    sm_count: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    warp: int
    default_block: int = 256
    limits: object = None  # pyreduce.occupancy.SMLimits on a GPU, None elsewhere
    #: the widest vector load its kernels may issue, in bytes (0: scalar loads only)
    vector_bytes: int = 0
    #: its L2 cache, in bytes (0: not known; ``variant="auto"`` then sizes no
    #: grid by it)
    l2_bytes: int = 0
    #: the block size of ``variant="auto"``'s single-launch kernel, where it was
    #: measured (None: ``default_block``)
    auto_block: int | None = None

    def max_grid(self, block: int) -> int:
        """Blocks resident at once when nothing but thread count limits occupancy."""
        per_sm = max(1, min(self.max_threads_per_sm // block, self.max_blocks_per_sm))
        return self.sm_count * per_sm


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class Tuning:
    """How the GPU kernels of a reduction are laid out, where the planner's choice
    is not wanted: ``pyreduce.Tuning``, passed to ``reduce`` (and every named
    reduction, scan and ``explain``) as ``tuning=``.

    Every field is optional; what is left out (``None``, ``variant="auto"``) the
    planner chooses, as without a ``tuning=``. A Tuning only tunes: the result
    of a reduction is the same whatever its fields (up to float rounding, which
    depends on the grouping of the elements; ``deterministic=True`` removes
    that). The ``cpu`` backend has no kernels and ignores it.

    Fields, each checked when the Tuning is made (a ``TypeError`` for a value
    of the wrong type, a ``ValueError`` for one out of range, naming the field):

    * ``variant``: a name from ``pyreduce.variants`` (``"naive"``, ...,
      ``"last_block"``), or ``"auto"``. ``reduce(..., variant=name)`` is the
      short way to give it alone.
    * ``block_size``: threads per block, one of 32, 64, 128, 256, 512, 1024, a
      multiple of the warp size.
    * ``items_per_thread``: elements each thread folds per step, one of 1, 2, 4,
      8, 16, 32 (some variants need a multiple of 2 or 4).
    * ``warp_size``: 32, or 64 in the simulator (AMD wavefronts); on ``hip``
      the device's wavefront size.
    * ``max_blocks``: an upper bound (at least 1) on the first pass's grid.
    * ``vector_loads``: ``None``: 16-byte vector loads where the input is
      contiguous and aligned; ``False``: element loads only; ``True``: vector
      loads, or a ``ValueError`` where none fits.

    A Tuning is frozen and hashable: plans and kernels are cached by it, and one
    value serves many calls. :meth:`replace` gives a changed copy.

    Example:
        >>> import numpy as np, pyreduce
        >>> t = pyreduce.Tuning(block_size=64, items_per_thread=2)
        >>> t
        Tuning(block_size=64, items_per_thread=2)
        >>> int(pyreduce.sum(np.arange(1000), tuning=t, backend="cpu"))
        499500
        >>> t.replace(variant="naive")
        Tuning(variant='naive', block_size=64, items_per_thread=2)
        >>> pyreduce.Tuning(block_size=48)
        Traceback (most recent call last):
            ...
        ValueError: block size (block_size=48) must be one of (32, 64, 128, 256, 512, 1024)
    """

    variant: str = "auto"
    block_size: int | None = None
    items_per_thread: int | None = None
    warp_size: int | None = None
    max_blocks: int | None = None
    #: None: vector loads where the input allows them; False: never; True: required
    vector_loads: bool | None = None

    def __post_init__(self):
        if not isinstance(self.variant, str):
            raise TypeError(f"variant= must be a variant's name (a str), got {self.variant!r}")
        if self.variant != "auto" and self.variant not in VARIANTS:
            raise ValueError(
                f"unknown variant {self.variant!r}; known: auto, {', '.join(VARIANTS)}"
            )
        for field, label, allowed in _TUNABLE:
            value = getattr(self, field)
            if value is None:
                continue
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{label} ({field}=) must be an int or None, got {value!r}")
            if value < 1 or (allowed and value not in allowed):
                need = f"one of {allowed}" if allowed else "at least 1"
                raise ValueError(f"{label} ({field}={value}) must be {need}")
            object.__setattr__(self, field, int(value))  # a NumPy int: one key, one repr
        if self.vector_loads is not None:
            if not isinstance(self.vector_loads, (bool, np.bool_)):
                raise TypeError(
                    f"vector_loads= must be True, False or None, got {self.vector_loads!r}")
            object.__setattr__(self, "vector_loads", bool(self.vector_loads))

    def replace(self, **changes) -> Tuning:
        """A copy with ``changes`` (fields by name), checked as a new Tuning is."""
        return dataclasses.replace(self, **changes)

    def __repr__(self):
        given = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)
                 if getattr(self, f.name) != f.default]
        return f"Tuning({', '.join(given)})"


_TUNABLE = (
    ("block_size", "block size", BLOCK_SIZES),
    ("items_per_thread", "items per thread", ITEMS_PER_THREAD),
    ("warp_size", "warp size", WARP_SIZES),
    ("max_blocks", "max_blocks", None),
)


@dataclasses.dataclass(frozen=True)
class Plan:
    """First pass: ``grid`` blocks of ``spec`` each own ``chunk`` elements and write
    one partial each, in block order. ``finish`` (the same variant over the
    accumulator dtype) reduces the partials: one block for ``two_pass``, repeated
    passes of one tile per block for ``multi_pass``. A ``single_pass`` kernel
    finishes by itself. ``head`` values (an initial value) precede the partials."""

    spec: KernelSpec
    layout: str
    n: int
    grid: int
    chunk: int
    finish: KernelSpec | None
    head: int = 0
    #: the kernel computes the fixed tree of pyreduce.deterministic, in one pass:
    #: its last block combines the head value after the root
    fixed_tree: bool = False
    #: backend name -> pyreduce.driver.Executable, built on first use
    executables: dict = dataclasses.field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    @property
    def passes(self) -> int:
        """Kernel launches this plan makes."""
        if self.layout == "single_pass":
            return 1
        count, passes = self.grid + self.head, 1
        if self.finish is None:
            return passes
        while count > 1 or passes == 1:
            passes += 1
            if self.layout == "two_pass":
                break
            count = -(-count // self.finish.tile)
        return passes


#: A call's tuning when it was given none: the planner chooses everything
#: (one object, so that a call shape can tell it by identity).
DEFAULT_TUNING = _UNTUNED = Tuning()


@dataclasses.dataclass(frozen=True)
class Auto:
    """What ``variant="auto"`` runs (a tuned choice takes precedence)."""

    variant: str
    items: int
    block: int | None = None  # None: the device's default_block
    #: the grid's bound, in multiples of DeviceInfo.max_grid(block) (a fraction:
    #: part of a wave, for a kernel whose registers hold fewer blocks an SM)
    waves: float = 1
    #: 0: the grid fills its bound; k: about k tiles per block, on a grid of
    #: at least one wave and at most ``waves`` waves
    per_block: int = 0
    #: the layout run instead where the input cannot be read as this one's
    #: striped vectors (:func:`striped_fits`): not contiguous, not aligned
    fallback: "Auto | None" = None

    def block_on(self, device: DeviceInfo, warp: int) -> int:
        """The block size on ``device`` with warps of ``warp`` threads."""
        return max(self.block or device.default_block, warp)

    def max_blocks(self, device: DeviceInfo, block: int, tiles: int) -> int:
        """The most blocks for ``tiles`` tiles of ``block`` threads. A fraction
        of a wave holds for this layout's own block size only (its kernel's
        registers): a tuning's other block size gets a whole wave."""
        wave = device.max_grid(block)
        waves = self.waves if self.waves >= 1 or block == self.block else 1
        bound = max(1, int(waves * wave))
        if not self.per_block:
            return bound
        return min(bound, max(wave, -(-tiles // self.per_block)))


def auto_variant(in_dtype: np.dtype, acc_dtype: np.dtype, n: int = 0,
                 device: DeviceInfo | None = None, commutative: bool = False) -> Auto:
    """The built-in choice of ``variant="auto"`` for ``n`` elements on ``device``.

    Measured on an H100 and an H200 (``bench/compare.py sweep``, 2**10 to 2**28
    elements of float32, int32 and float64 sums and maxima,
    ``docs/performance/sweep.md``):

    * the single-launch ``last_block`` with 512 threads (``auto_block``) and two
      16-byte loads per lane (8 float32) won while the input fits the L2 cache,
      on a grid of one wave of resident blocks; up to twice the L2 cache, four
      waves;
    * above twice the L2 cache the input streams from memory. There the
      two-pass ``warp_shuffle_x2`` (two warp tiles loaded before either is
      reduced: four 16-byte loads per lane in flight), on a grid of about four
      tiles per block (one wave at least, 32 at most), was within 1-2% of the
      best configuration on both GPUs. The earlier rule here (``last_block``,
      four loads per lane, up to 32 waves) lost up to 17% on the H200; on the
      H100 it had been up to 1.5% faster than this one;
    * past the L2 cache an op that may be reordered (the built-ins) on 4- and
      8-byte items reads each block tile as one run (``last_block_striped``:
      the block's warps take turns tile by tile, a warp's loads are adjacent
      vectors, as CUB's striped loads are), one launch on one wave: 4-byte
      items in blocks of 256 with four 16-byte loads a lane, 8-byte items in
      blocks of ``auto_block`` with two (:data:`STRIPED_LOADS`). On an H200
      (``bench/rules.py``, calls back to back, 2026-12-04,
      ``docs/performance/rules-striped-h200.txt`` and ``.json``; the rule above in brackets,
      then PyTorch's and CuPy's calls): float32 sum of 2**24 20.7 us (23.2;
      23.4, 25.2), 2**26 64.3 (65.9; 68.3, 65.7), 2**28 238.0 (238.0; 246.8,
      237.9); int32 max of 2**24 21.1 (25.1; 23.6, 27.9), 2**26 64.3 (66.0 with
      16 waves; 68.3, 66.4), 2**28 238.8 (243.7, 16 waves; 247.6, 240.1); float64 sum
      of 2**24, 2**26, 2**28 35.2, 122.4, 468.8 (37.0, 123.8, 480.7; PyTorch
      37.8, 124.4, 470.5), float64 max of 2**24 35.6 (39.3; 38.4). Inside the
      L2 it was no faster (float32 sum of 2**22: 17.6-18.3 against 16.3), and
      the rule there is unchanged; 1- and 2-byte items that are not widened
      were not measured and keep the ordered rule (half precision accumulated
      in float32: below). An input that cannot be read in such vectors (not
      contiguous, not aligned) gets the ordered rule (:func:`resolve_auto`);
    * sums that widen (int8 into int64) ran fastest two-pass (``warp_shuffle``);
      but a built-in of float16 or bfloat16 accumulated in float32 (their
      sums, maxima, ...) on a GPU whose L2 size is known reads block tiles as
      runs, in blocks of :data:`HALF_BLOCK` with two 16-byte loads a lane, one
      launch on one wave (:data:`HALF_STRIPED_ITEMS`), at every size. On an
      H200 (``bench/rules.py``, 2026-12-04,
      ``docs/performance/rules-half-striped-h200.txt``; back to back, then
      waited for, against the two-pass rule and PyTorch) float16 sums of
      2**26 took 36.0 us back to back (39.1; PyTorch 38.9) and 53.3 waited for
      (56.3; 55.4), of 2**28 125.1 and 139.5 (128.4 and 141.9; 133.1 and
      145.9); bfloat16 sums of 2**26 36.1 and 57.5 (38.5 and 59.5; 38.8 and
      56.1), of 2**28 125.6 and 148.6 (130.4 and 167.2; 134.0 and 157.2).
      Inside the L2 (2**24) float16 took 14.9 us back to back against 22.0
      and 26.3 waited for against 25.1 and 26.7 (the two-pass layout measured
      twice; bfloat16 19.8 and 30.4 against 25.0 and 30.9-32.3). From 2**12
      to 2**22 on an H100 (2026-12-07,
      ``docs/performance/rules-half-small-h100.txt``) float16 sums took
      10.1-11.1 us back to back against the two-pass layout's 10.3-16.9, and
      bfloat16's 13.0-13.6 against 12.7-17.9: never slower beyond the runs'
      noise, and one kernel serves every size of an op and dtype
      (``tests/test_kernel_count.py``), in one launch where the two-pass
      layout took two. An input its vectors
      do not fit gets the two-pass layout (its ``fallback``);
      a tuple accumulator up to twice the L2 gets the same items per thread on
      one launch (``last_block``; float32 var's between one and two L2 sizes
      two passes, see :func:`_tuple_rule`), whose last block also finishes a structured
      reduction (:meth:`pyreduce.backends.base.GeneratedBackend.finishes`): a
      call that waits for its result pays for every launch on the host;
    * tuple accumulators (mean's, var's, argmax's: several fields folded per
      element, a longer chain of dependent operations than a sum's add) past
      the L2 (:func:`_tuple_rule`, an H200, ``bench/targets.py`` and the A/B
      runs of ``bench/layouts.py`` at 2**24-2**28, each against the widening
      rule).

    A device whose L2 size is not known (``l2_bytes=0``) gets the in-cache choice.
    """
    l2 = device.l2_bytes if device is not None else 0
    nbytes = n * in_dtype.itemsize
    if is_tuple(acc_dtype) and l2 and nbytes > l2:
        rule = _tuple_rule(in_dtype, acc_dtype, nbytes > 2 * l2, commutative)
        if rule is not None:
            return rule
    if acc_dtype.itemsize > in_dtype.itemsize:
        items = min(16, 2 * default_items(in_dtype))
        if (commutative and l2 and _half(in_dtype)
                and acc_dtype == np.float32):  # half-precision built-ins
            return Auto("last_block_striped", HALF_STRIPED_ITEMS, HALF_BLOCK, 1,
                        fallback=Auto("warp_shuffle", items))
        if is_tuple(acc_dtype) and not (l2 and nbytes > 2 * l2):
            # one launch, which also finishes; var's summaries folded per lane
            lanes = commutative and acc_dtype.itemsize >= 32
            if not lanes and l2 and nbytes <= l2 and _half(in_dtype):
                if commutative and _sums(acc_dtype):  # a mean's (see HALF_MEAN)
                    return HALF_MEAN
                # folded per lane where the op may be reordered (see HALF_BLOCK)
                return Auto("last_block_lanes" if commutative else "last_block", items,
                            HALF_BLOCK)
            return Auto("last_block_lanes" if lanes else "last_block", items)
        return Auto("warp_shuffle", items)
    block = device.auto_block if device is not None else None
    two = min(16, 2 * default_items(in_dtype))
    if l2 and nbytes > 2 * l2:
        ordered = Auto("warp_shuffle_x2", two, block, 32, per_block=4)
    else:
        ordered = Auto("last_block", two, block, 4 if l2 and nbytes > l2 else 1)
    if commutative and l2 and nbytes > l2 and in_dtype.itemsize in STRIPED_LOADS:
        loads, striped_block = STRIPED_LOADS[in_dtype.itemsize]
        return Auto("last_block_striped", loads * default_items(in_dtype),
                    striped_block or block, 1, fallback=ordered)
    return ordered


#: The striped layout's 16-byte loads a lane and block (None: ``auto_block``)
#: by the input's item size (the sizes measured; see :func:`auto_variant`).
#: A 4-byte input's blocks of 512 with two loads took 37 registers for an
#: int32 max (three blocks an SM, where the ordered kernel's 32 let four reside;
#: ``explain`` on an H200); 256 threads with four loads take 32, eight blocks an
#: SM, as CUB's 16 items of 256 threads. float64's blocks of 256 with four
#: loads took 40 (six blocks an SM) and were slower than 512 with two.
STRIPED_LOADS = {4: (4, 256), 8: (2, None)}
#: The items a lane of a half-precision built-in's striped layout reads (two
#: 16-byte loads), in blocks of :data:`HALF_BLOCK`, on one wave (see
#: :func:`auto_variant`).
HALF_STRIPED_ITEMS = 16


def striped_fits(auto: Auto, in_dtype: np.dtype, align: int, device: DeviceInfo,
                 tuning: Tuning) -> bool:
    """Whether ``auto``'s striped loads can be issued on an input of ``in_dtype``
    whose start is aligned to ``align`` bytes (0: not contiguous) under ``tuning``
    (its items and vector loads, where it names them): each lane's items whole
    vectors, more than one (:func:`pyreduce.spec.spread_vectors`, as
    ``_blocks.striped_loads`` asks)."""
    items = tuning.items_per_thread or auto.items
    return spread_vectors(items, vector_width(items, in_dtype, align, device,
                                              tuning.vector_loads))


def resolve_auto(auto: Auto, in_dtype: np.dtype, align: int, device: DeviceInfo,
                 tuning: Tuning) -> Auto:
    """``auto``, or its fallback where its striped loads do not fit the input."""
    if auto.fallback is not None and not striped_fits(auto, in_dtype, align, device, tuning):
        return auto.fallback
    return auto


#: The block size of a half-precision input's two-field accumulators
#: (argmax's, minmax's; a mean's until :data:`HALF_MEAN`) inside the L2, on one
#: wave (and of its striped float32 sums and maxima at every size,
#: :func:`auto_variant`). On an H200 (``bench/rules.py``, the
#: layouts through a tuning store, as a user's call runs them, PyTorch in the
#: same rounds; ``docs/performance/rules-h200.txt`` and, after the change,
#: ``rules-half-h200.txt``), float16 ``mean`` of 2**24 took 28.1 and 28.6 us a
#: call waited for with blocks of 512 against 30.1 and 35.8 with 256 (PyTorch
#: 24.5, 25.9), 14.3 and 15.3 back to back against 16.4 and 17.0; bfloat16
#: 33.5 and 32.9 against 35.3 and 34.9 (24.0, 24.9). At 2**23 within the runs'
#: noise (float16 31.8 against 34.4, bfloat16 33.0 against 32.4 waited for),
#: and float16 ``argmax`` within 3% at both sizes. Where the op may be reordered
#: (every structured reduction's but complex minmax's and ptp's) each lane folds
#: its items across its warp's tiles and the warp combines its lanes once
#: (``last_block_lanes``, same file, three processes on H200s, 2026-12-02 and
#: 2026-12-03): float16 ``argmax`` of 2**24 took 33.2, 32.1 and 32.6 us a call
#: waited for against 36.1, 36.9 and 36.7 once a tile (PyTorch 39.0, 38.9 and
#: 39.5), bfloat16 ``argmax`` 36.9 against 40.4 (39.4), float16 ``argmax`` of
#: 2**23 29.0 against 30.1; the means moved by less than a microsecond (float16
#: of 2**24 28.9 and 27.4 against 28.6 and 27.6, bfloat16 32.0 and 37.0 against
#: 32.9 and 37.0). Past the L2 the rules of :func:`_tuple_rule` hold.
HALF_BLOCK = 512


def _half(dtype: np.dtype) -> bool:
    return dtype.itemsize == 2 and (dtype.kind == "f" or is_bfloat16(dtype))


def _sums(acc_dtype: np.dtype) -> bool:
    """Whether a tuple accumulator is two float64 fields: a mean's ``(count, sum)``."""
    return fields(acc_dtype) == (np.dtype(np.float64),) * 2


#: The grid of the per-lane fold of a 4-byte input's accumulators under 32
#: bytes (``last_block_lanes``, 8 items, blocks of 256) past the L2, in waves
#: of :meth:`DeviceInfo.max_grid`: five blocks an SM of the eight that 256
#: threads allow. Their registers let five or six reside on an H200, so every
#: block starts at once and none is left for a second round (see
#: :func:`_tuple_rule`; measured for float32 mean, argmax, argmin and minmax
#: and int32 argmax, argmin and minmax, the other accumulators of the rule,
#: such as nanargmax's and int32 mean's, not).
LANES_WAVE = 0.625

#: The layout of a half-precision mean inside the L2: its ``(count, sum)``
#: folded per lane, 16 items a lane, in blocks of 256 on the five blocks an SM
#: of :data:`LANES_WAVE`, one launch. On an H100 (``bench/rules.py``,
#: 2026-12-07, ``docs/performance/rules-means-h100.txt``; a call waited for,
#: then back to back; PyTorch's in brackets) float16 ``mean`` of 2**24 took
#: 24.9 and 12.4 us against 27.1 and 14.4 with the blocks of 512 on one wave of
#: :data:`HALF_BLOCK` (23.7 and 13.3), bfloat16 30.1 and 14.9 against 31.7 and
#: 14.8 (24.4 and 13.1); on an H200 (2026-12-04,
#: ``docs/performance/rules-means-h200.txt``) float16 30.5 and 17.6 against
#: 31.0 and 16.5 (27.8 and 15.8), bfloat16 30.0 and 16.6 against 37.5 and 21.2
#: (24.7 and 15.9). It was the fastest layout of the runs' 15 at a call waited
#: for on both GPUs. argmax's and minmax's pairs keep :data:`HALF_BLOCK`.
HALF_MEAN = Auto("last_block_lanes", 16, 256, LANES_WAVE)


def _tuple_rule(in_dtype: np.dtype, acc_dtype: np.dtype, streaming: bool,
                commutative: bool = False) -> Auto | None:
    """The layout of a tuple accumulator past the L2 (``streaming``: past twice
    the L2), or None for the rule of sums that widen; ``commutative``: the op
    may be reordered (every structured reduction's but complex minmax's and
    ptp's), so
    each lane may fold its items across all of its warp's tiles and the warp
    combine its lanes once (``*_lanes``, :func:`pyreduce.variants._blocks.lane_fold`)
    instead of once a tile: a merge of var's summaries is a dozen float64
    operations, and argmax's and minmax's carry two or three shuffles a step.

    Measured with ``bench/layouts.py`` (time per call with the GPU kept busy,
    *piped*; PyTorch's in brackets). On an H100 at 2**28, against the rule
    before lane folds:

    * var: float32 16 items two-pass (415 us against 467 with 32 items a
      tile; 390), float64 4 items (735 against 856; 867);
    * argmax and minmax of float32: 8 items in one launch (425 and 377 us
      against 456 and 386; 366 and 360), mean the same (365 against 363);
      float64 4 items two-pass (argmax 714 against 730, minmax 718 against
      797; 748 and 739), mean 721 against 715;
    * between one and two L2 sizes (2**24 float32) var 8 items in one launch
      (47 us against 67; 35); the accumulators under 32 bytes of a 4-byte
      input one tile of 8 items a loop (``last_block``; A/B of ``variant=
      "auto"``: float32 argmax 33.0 us against 35.0 with ``last_block_x2``,
      int32 argmax 30.1 against 35.2, int32 minmax 29.7 against 33.7, float32
      mean 32.5 against 32.4; PyTorch 33.8, 32.5, 30.6 and 30.0). This
      replaces the H200 choice of two tiles below for them.

    On an H200 at 2**28 (``docs/performance/tuple-layouts-h200.json``: device
    time of calls back to back; PyTorch's in
    brackets) the per-lane fold of a 4-byte input's accumulators under 32
    bytes in one launch takes up to four waves of blocks, not one. One wave
    (125 tiles a block) was the slowest for int32 argmax (295.5 us, four
    waves 261.5, two 253.2; 267.3), int32 argmin and float32 minmax (295.4
    and 297.6 us in another run, two waves 254.3 and 250.6); for float32
    mean, float32 argmax and int32 minmax it was the fastest, four waves
    within 1.2% of it (257.1 against 260.3 us, 262.4 against 263.0, 255.7
    against 255.8; 250.5, 283.9, 251.8), two waves up to 4.2% slower. Four
    waves are within 3.3% of the best of the three in every case measured.

    Those waves counted :meth:`DeviceInfo.max_grid`'s eight blocks an SM, but
    these kernels' registers let five or six reside, so four "waves" ran in
    about seven rounds and one in two. On an H200 (2026-12-02,
    ``docs/performance/lanes-grid-h200.json``, a sweep of the grid bound and a
    second process after the rule; device time of calls back to back, PyTorch's
    in brackets) a grid of five blocks an SM (:data:`LANES_WAVE`, 660) ran at
    2**28 3-5% faster than four waves (float32 mean 245.0 us against 256.0,
    246.7; argmax 254.4 against 267.3, 288.3; int32 minmax 243.3 against
    252.2, 247.1), at 2**26 8-14% (float32 argmax 69.8 against 80.3, 80.2;
    mean 67.8 against 77.3, 70.0), and between one and two L2 sizes 11-12%
    faster than one wave (float32 mean of 2**24 22.0 us against 25.1, 23.2;
    argmax 24.0 against 27.2, 28.9). In the sweep no bound from 528 to 4224
    blocks was more than 2% faster than 660 in any of these cases.

    On an H200 (2026-12-02, ``docs/performance/var-layouts-h200.json``: device
    time of calls back to back, then wall time of calls each waited for;
    PyTorch's in brackets), var's summaries of float32 between one and two L2
    sizes run two-pass per lane (``warp_shuffle_lanes``, 8 items, blocks of
    256) on half a wave of blocks: its kernel takes 60 registers a thread, so
    four blocks an SM reside (528 on the H200), where the one launch per lane
    chosen before took 70 (three an SM) on 1024 blocks and merged every
    block's summary in its last block. A sweep at 2**24: 29.5 and 46.4 us
    against 36.9 and 57.7 (30.2 and 48.7); a whole wave of blocks 32.9 and
    49.7, two waves 38.3 and 55.7. Then, in another process: 2**24 32.1 and
    50.3 us against 36.8 and 64.5 (30.5 and 49.9), 24,000,000 elements 34.0
    and 59.2 against 45.8 and 78.8 (38.6 and 58.0); std the same (nanvar and
    nanstd, which share the rule, were not measured). 14,000,000 elements fit
    the H200's 60 MiB L2 and keep the one launch (33.9 us back to back, and
    33.8 as the same layout named by a tuning; 27.2). int32 keeps the one launch (not
    measured two-pass).

    On an H200 at 2**24 (device time of calls back to back, one run;
    PyTorch's in brackets), the 16-byte accumulators of a float32 input fold
    per lane where the op may be reordered (``last_block_lanes``, 8 items,
    blocks of 256): argmax 26.9 us against 30.1 with one tile a loop (28.8),
    argmin 27.1 against 30.3 (29.0), mean 25.9 against 27.6 (23.2). Those of
    int32 keep one tile a loop (argmax 24.3 us against 26.7 per lane; 26.9),
    and so do minmax's 8-byte pairs (not faster per lane).

    On an H200, at 2**28 before lane folds (ops that may not be reordered
    keep these): var's four fields (32 bytes and more) 32 items of a 4-byte
    input in blocks of 256 (float32: 404 us, against 514 with 16 and 721
    with the widening rule's 8; PyTorch 321), 8 of float64 (748 us against
    1038 with the widening rule's 4; PyTorch 761); two fields 16 items of a
    4-byte input in blocks of 256 (float32 mean 256 us, argmax 309, minmax
    292, against 314, 364 and 342 with the widening rule; 32 items took
    1.1-1.6 times as long); two tiles of 16 items of a 2-byte input
    (``warp_shuffle_x2``: float16 mean 134 us against 153 with 32 items;
    PyTorch 132); float64 the widening rule (mean 483 us, argmax 515, against
    638 and 637 with 8 items); between one and two L2 sizes (2**24 float32),
    two tiles of 8 items of a 4-byte input (var 70 us and argmax 65, against
    101 and 99 with the widening rule; mean 76 against 66), in one launch
    (``last_block_x2``) whose last block finishes the reduction.
    """
    size = in_dtype.itemsize
    wide = acc_dtype.itemsize >= 32  # var's summaries
    if not streaming:
        if wide and commutative:
            if size == 4 and in_dtype.kind == "f":
                return Auto("warp_shuffle_lanes", 8, 256, 0.5)  # var's of float32
            return Auto("last_block_lanes", 8 if size <= 4 else 4, 256)
        if size != 4:
            return None
        if commutative and in_dtype.kind == "f" and acc_dtype.itemsize == 16:
            return Auto("last_block_lanes", 8, 256, LANES_WAVE)  # mean's, argmax's of float32
        return Auto("last_block_x2" if wide else "last_block", 8, 256)
    if wide:
        if commutative:
            return Auto("warp_shuffle_lanes", 16 if size <= 4 else 4, 256)
        return Auto("warp_shuffle", 32 if size <= 4 else 8, 256)
    if size == 4:
        if commutative:
            return Auto("last_block_lanes", 8, 256, LANES_WAVE)
        return Auto("warp_shuffle", 16, 256)
    if size == 2:
        return Auto("warp_shuffle_x2", 16, 256)
    if size == 8 and commutative:
        return Auto("warp_shuffle_lanes", 4, 256)
    return None


def fixed_tree_layout(in_dtype: np.dtype, n: int, device: DeviceInfo) -> Auto | None:
    """The layout of the fixed tree (``pairwise``, ``deterministic=True``) where
    the call names none, for an input past the L2 cache on a device whose L2 is
    known; else None (the variant's defaults: four items a thread, blocks of the
    device's default size, one wave). The tree does not depend on the layout, so
    this changes the speed only, never a bit of the result.

    Measured on an H200 (``bench/deterministic.py time`` and a sweep of layouts,
    ``docs/performance/deterministic-h200.json``: float32 and float64 sums of
    2**24, 2**26 and 2**28 elements, bandwidth against the default
    ``variant="auto"`` of the same run): four-byte elements 16 items a thread in
    blocks of 512 on up to eight waves (1.00, 0.97 and 0.98 of the default,
    against 0.91, 0.90 and 0.80 with the variant's defaults); eight-byte
    elements four items in blocks of 512, about 16 tiles a block on one to
    eight waves (0.93, 0.96 and 1.00, against 0.93, 0.95 and 0.92). Float64
    lost with 8 and 16 items (0.85-0.94 and 0.51-0.74). That sweep ran the
    tree in two launches; in one (``docs/deterministic/timing.json``, the same
    H200) the layouts give 0.99, 0.94 and 0.97 (float32) and 0.99, 0.96 and
    1.00 (float64) of the default. Other element sizes (half precision, bytes,
    complex) keep the defaults: not measured."""
    if not device.l2_bytes or n * in_dtype.itemsize <= device.l2_bytes:
        return None
    if in_dtype.kind == "c" or in_dtype.itemsize not in (4, 8):  # not measured
        return None
    if in_dtype.itemsize == 8:
        return Auto("pairwise", 4, 512, 8, per_block=16)
    return Auto("pairwise", 16, 512, 8)


def address_alignment(address: int, contiguous: bool) -> int:
    """What the planner knows of an input's placement: the largest power of two
    (at most 16) dividing its address when it is contiguous, else 0."""
    if not contiguous:
        return 0
    return 16 if address % 16 == 0 else address & -address


def vector_width(items: int, dtype: np.dtype, align: int, device: DeviceInfo,
                 wanted: bool | None) -> int:
    """Elements per load of the input: the most of a thread's ``items`` one aligned
    load can carry (see :mod:`pyreduce.backends.vload`), or 1."""
    width = 1
    if wanted is not False and dtype.kind != "c":  # a complex value is a struct, not a lane
        limit = min(align, device.vector_bytes)
        width = items
        while width > 1 and width * dtype.itemsize > limit:
            width //= 2
        if width * dtype.itemsize < 4:  # narrower than a word: nothing gained
            width = 1
    if wanted and width == 1:
        why = ("this backend issues none" if not device.vector_bytes else
               "complex values are loaded one at a time" if dtype.kind == "c" else
               f"the input is not contiguous and aligned to {min(16, items * dtype.itemsize)} bytes"
               if align < 4 else f"items_per_thread={items} of {dtype} is too few")
        raise ValueError(f"vector_loads=True, but no vector load fits: {why}")
    return width


#: call shape -> Plan; a plan keeps its executables (kernels, workspaces)
_plans = Memo("plans", 256)
_on_clear: list = []


def clear_plans() -> None:
    """Forget every remembered plan (and the executables built on them), and
    what was decided with them (:func:`on_clear_plans`)."""
    _plans.clear()
    forget_decisions()


def forget_decisions() -> None:
    """Run every :func:`on_clear_plans` callback: what was decided with plans
    (remembered calls, batched plans) is forgotten."""
    for forget in _on_clear:
        forget()


def on_clear_plans(forget) -> None:
    """Call ``forget()`` whenever the plans are forgotten."""
    _on_clear.append(forget)


tuned.on_change(clear_plans)  # plans made with the old choices must not be reused


def make_plan(
    n: int,
    in_dtype: np.dtype,
    acc_dtype: np.dtype,
    op_key,
    device: DeviceInfo,
    tuning: Tuning = Tuning(),
    extra_partials: int = 0,
    align: int = 0,
    commutative: bool = False,
) -> Plan:
    """Lay out ``n >= 1`` elements. ``extra_partials`` is the number of values the
    driver puts before the block partials (an initial value); they force a
    finishing pass. ``align`` is :func:`address_alignment` of the input;
    ``commutative``: the op may be reordered (``Monoid.commutative``), so
    ``variant="auto"`` may pick a variant that does. Plans are remembered: the
    same call shape plans once."""
    # dtypes, not their one-letter codes: every tuple accumulator's code is 'V'
    key = (n, in_dtype, acc_dtype, op_key, device.key, device.warp, tuning,
           extra_partials, align, commutative)
    plan = _plans.get(key)
    if plan is None:
        plan = _make_plan(n, in_dtype, acc_dtype, op_key, device, tuning, extra_partials,
                          align, commutative)
        _plans.put(key, plan)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("plan for %d elements on %s: %s, %s, grid %d, %d launch(es)", n,
                         device.name, plan.spec.label, plan.layout, plan.grid, plan.passes)
    return plan


def recorded_tuning(device, in_dtype, acc_dtype, op_key, n: int) -> Tuning | None:
    """The tuned :class:`Tuning` for a call, from the tuning store
    (:mod:`pyreduce.tuned`), or None."""
    found = tuned.lookup(device, in_dtype, acc_dtype, op_key, n)
    if found is None:
        return None
    return Tuning(variant=found.variant, block_size=found.block_size,
                  items_per_thread=found.items_per_thread, max_blocks=found.max_blocks)


def _make_plan(n, in_dtype, acc_dtype, op_key, device, tuning, extra_partials, align,
               commutative=False) -> Plan:
    if tuning == _UNTUNED:  # nothing chosen by hand: a measured choice, if recorded
        recorded = recorded_tuning(device, in_dtype, acc_dtype, op_key, n)
        # a choice that reorders, only for an op that may be reordered: the
        # store files a built-in with an element map (a commutative nansum)
        # under the same op kind as a user's operator (tuned.op_kind)
        if recorded is not None and (commutative
                                     or not VARIANTS[recorded.variant].commutative_only):
            tuning = recorded

    auto = None
    if tuning.variant == "auto":
        auto = resolve_auto(auto_variant(in_dtype, acc_dtype, n, device, commutative),
                            in_dtype, align, device, tuning)
    elif tuning.variant == "pairwise":
        auto = fixed_tree_layout(in_dtype, n, device)
    name = tuning.variant if auto is None else auto.variant
    variant = VARIANTS[name]
    warp = device.warp if tuning.warp_size is None else int(tuning.warp_size)
    block = tuning.block_size
    if block is None:
        block = auto.block_on(device, warp) if auto is not None else max(device.default_block,
                                                                          warp)
    block = int(block)

    def items_for(dtype):
        if tuning.items_per_thread is not None:
            return int(tuning.items_per_thread)
        if auto is not None and dtype == in_dtype:
            return auto.items
        return variant.default_items or default_items(dtype)

    items = items_for(in_dtype)
    vector = vector_width(items, in_dtype, align, device, tuning.vector_loads)
    # ops with an element map have keys ("mapped", op, map) (pyreduce.ops)
    mapped = isinstance(op_key, tuple) and op_key[:1] == ("mapped",)
    f32_tiles = (vector > 1 and op_key in F32_TILES and tiles_in_float32(in_dtype)
                 and not variant.fixed_tree)  # the fixed tree's leaves are its own
    spec = KernelSpec(name, in_dtype, acc_dtype, op_key, block, warp, items, vector,
                      mapped=mapped, f32_tiles=f32_tiles)
    for dtype in {in_dtype, acc_dtype}:
        if dtype.names is None and items_for(dtype) % variant.items_multiple:
            raise ValueError(
                f"variant {name!r} needs items_per_thread to be a multiple of "
                f"{variant.items_multiple}, got {items_for(dtype)}"
            )
    tiles = -(-n // spec.tile)
    if variant.layout == "multi_pass":
        grid = tiles if tuning.max_blocks is None else min(tiles, int(tuning.max_blocks))
    else:
        if tuning.max_blocks is not None:
            limit = int(tuning.max_blocks)
        else:
            limit = (device.max_grid(block) if auto is None
                     else auto.max_blocks(device, block, tiles))
        grid = min(tiles, limit)
    per_block = -(-tiles // grid)
    if variant.fixed_tree:  # a block's range must be one aligned subtree
        per_block = 1 << (per_block - 1).bit_length()
    chunk = per_block * spec.tile
    grid = -(-n // chunk)  # no block without elements
    finish = None
    if variant.layout != "single_pass" and (grid > 1 or extra_partials):
        finish = spec if reads_partials(spec, variant) else KernelSpec(
            name, acc_dtype, acc_dtype, op_key, block, warp, items_for(acc_dtype), finish=True)
    return Plan(spec, variant.layout, n, grid, chunk, finish, extra_partials, variant.fixed_tree)


def reads_partials(spec: KernelSpec, variant) -> bool:
    """True where ``spec``'s kernel, given the partials as its input, does what a
    finishing pass would, so one kernel serves both passes (a program then builds
    one kernel fewer per op and dtype): its elements are accumulator values as
    they are (the same dtype, no element map, a scalar), and the variant's tree
    does not depend on the pass (a fixed tree's does). Partials start at the
    start of a scratch buffer, aligned for any vector load."""
    return (spec.in_dtype == spec.acc_dtype and not spec.mapped and not spec.finish
            and not is_tuple(spec.acc_dtype) and not is_bfloat16(spec.in_dtype)
            and not variant.fixed_tree)
