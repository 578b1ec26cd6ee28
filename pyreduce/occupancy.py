"""Theoretical occupancy of a compiled kernel, from the device's limits.

Occupancy is the number of warps resident on a multiprocessor over the most it can
hold. Four resources bound the resident blocks: threads, the block slots, the
register file and shared memory; the smallest bound wins and is named as the
limiting resource (the occupancy article among the seeds walks through the same
arithmetic).
"""

from __future__ import annotations

import dataclasses

__all__ = ["SMLimits", "Occupancy", "occupancy"]


@dataclasses.dataclass(frozen=True)
class SMLimits:
    """Per-multiprocessor limits (CUDA device attributes)."""

    max_threads: int = 2048
    max_blocks: int = 32
    registers: int = 65536
    shared_bytes: int = 233472
    warp: int = 32
    #: registers are allocated per warp in units of this many
    register_unit: int = 256
    #: shared memory the runtime reserves per block (1 KiB on sm_80 and later)
    reserved_shared_per_block: int = 1024


@dataclasses.dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    active_warps: int
    max_warps: int
    limited_by: str
    bounds: dict  # resource -> blocks per SM it allows

    @property
    def fraction(self) -> float:
        return self.active_warps / self.max_warps

    def __str__(self):
        return (
            f"{self.active_warps}/{self.max_warps} warps per SM "
            f"({self.fraction:.0%}), {self.blocks_per_sm} blocks, "
            f"limited by {self.limited_by}"
        )


def occupancy(block: int, registers: int, shared_bytes: int, limits: SMLimits) -> Occupancy:
    """Resident blocks and warps per SM for ``block`` threads per block using
    ``registers`` per thread and ``shared_bytes`` of static shared memory.

    >>> str(occupancy(256, 32, 32, SMLimits()))
    '64/64 warps per SM (100%), 8 blocks, limited by threads'
    >>> occupancy(256, 128, 0, SMLimits()).limited_by
    'registers'
    """
    warps = -(-block // limits.warp)
    per_warp = -(-registers * limits.warp // limits.register_unit) * limits.register_unit
    bounds = {
        "threads": limits.max_threads // block,
        "block slots": limits.max_blocks,
        "registers": limits.registers // (per_warp * warps) if per_warp else limits.max_blocks,
    }
    if shared_bytes:
        bounds["shared memory"] = limits.shared_bytes // (
            shared_bytes + limits.reserved_shared_per_block
        )
    limited_by = min(bounds, key=bounds.get)
    blocks = bounds[limited_by]
    return Occupancy(
        blocks, blocks * warps, limits.max_threads // limits.warp, limited_by, bounds
    )
