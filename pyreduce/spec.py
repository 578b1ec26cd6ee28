"""The frozen, hashable description of one generated kernel."""

from __future__ import annotations

import dataclasses
from typing import Hashable

import numpy as np

from .dtypes import check_accumulator, code, fields, is_tuple

__all__ = ["KernelSpec", "WARP_SIZES", "BLOCK_SIZES", "ITEMS_PER_THREAD"]

WARP_SIZES = (32, 64)
BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)
ITEMS_PER_THREAD = (1, 2, 4, 8, 16)


@dataclasses.dataclass(frozen=True)
class KernelSpec:
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

    def __post_init__(self):
        object.__setattr__(self, "in_dtype", np.dtype(self.in_dtype))
        object.__setattr__(self, "acc_dtype", np.dtype(self.acc_dtype))
        for dt in fields(self.acc_dtype):
            check_accumulator(dt, "accumulator")
        if self.finish and self.mapped:
            raise ValueError("a finishing pass reads accumulator values: it maps nothing")
        if is_tuple(self.acc_dtype) and not (self.mapped or self.finish):
            raise ValueError("a tuple accumulator needs an element map for its first pass")
        if self.warp not in WARP_SIZES:
            raise ValueError(f"warp size {self.warp} not in {WARP_SIZES}")
        if self.block not in BLOCK_SIZES:
            raise ValueError(f"block size {self.block} not in {BLOCK_SIZES}")
        if self.block % self.warp:
            raise ValueError(
                f"block size {self.block} is not a multiple of warp size {self.warp}"
            )
        if self.items not in ITEMS_PER_THREAD:
            raise ValueError(f"items per thread {self.items} not in {ITEMS_PER_THREAD}")
        if self.finish and (self.vector != 1 or self.in_dtype != self.acc_dtype):
            raise ValueError("a finishing pass reads accumulator values with scalar loads")
        if (self.vector not in ITEMS_PER_THREAD or self.vector > self.items
                or (self.vector > 1 and self.vector * self.in_dtype.itemsize > 16)):
            raise ValueError(
                f"vector width {self.vector} must be a power of two of at most "
                f"items per thread ({self.items}) and 16 bytes of {self.in_dtype}"
            )
        from .variants import VARIANTS  # late: the registry imports the factories

        if self.variant not in VARIANTS:
            raise ValueError(
                f"unknown variant {self.variant!r}; known: {', '.join(VARIANTS)}"
            )

    @property
    def warps(self) -> int:
        return self.block // self.warp

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
        return f"{self.variant} {dt} b{self.block} w{self.warp} i{self.items}{vec}{fin}"
