"""How a reduction of ``n`` elements is laid out on a device: the :class:`Plan`."""

from __future__ import annotations

import dataclasses

import numpy as np

from .spec import KernelSpec

__all__ = ["DeviceInfo", "Plan", "Tuning", "make_plan"]


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

    def max_grid(self, block: int) -> int:
        """Blocks resident at once when nothing but thread count limits occupancy."""
        per_sm = max(1, min(self.max_threads_per_sm // block, self.max_blocks_per_sm))
        return self.sm_count * per_sm


@dataclasses.dataclass(frozen=True)
class Tuning:
    """Optional overrides of the planner's choices (``None``: let it choose)."""

    variant: str = "auto"
    block_size: int | None = None
    items_per_thread: int | None = None
    warp_size: int | None = None
    max_blocks: int | None = None


@dataclasses.dataclass(frozen=True)
class Plan:
    """First pass: ``grid`` blocks of ``spec`` each own ``chunk`` elements and write
    one partial each. If ``finish`` is set, a single block of it reduces the
    partials (in block order) to the result."""

    spec: KernelSpec
    n: int
    grid: int
    chunk: int
    finish: KernelSpec | None

    @property
    def passes(self) -> int:
        return 1 if self.finish is None else 2


DEFAULT_VARIANT = "warp_shuffle"


def default_items(dtype: np.dtype) -> int:
    """Enough items per thread for 16 bytes in flight, at least 2 (op during load)."""
    return int(min(16, max(2, 16 // dtype.itemsize)))


def make_plan(
    n: int,
    in_dtype: np.dtype,
    acc_dtype: np.dtype,
    op_key,
    device: DeviceInfo,
    tuning: Tuning = Tuning(),
    extra_partials: int = 0,
) -> Plan:
    """Lay out ``n >= 1`` elements. ``extra_partials`` forces the finishing pass
    (it is the number of values the driver puts before the block partials)."""
    variant = DEFAULT_VARIANT if tuning.variant == "auto" else tuning.variant
    warp = tuning.warp_size or device.warp
    block = tuning.block_size or max(device.default_block, warp)
    items = tuning.items_per_thread or default_items(in_dtype)
    spec = KernelSpec(variant, in_dtype, acc_dtype, op_key, block, warp, items)
    tiles = -(-n // spec.tile)
    grid = min(tiles, tuning.max_blocks or device.max_grid(block))
    chunk = -(-tiles // grid) * spec.tile
    grid = -(-n // chunk)  # no block without elements
    finish = None
    if grid > 1 or extra_partials:
        items2 = tuning.items_per_thread or default_items(acc_dtype)
        finish = KernelSpec(variant, acc_dtype, acc_dtype, op_key, block, warp, items2)
    return Plan(spec, n, grid, chunk, finish)
