"""Prefix scans of rows on a GPU backend: the three phases of
:mod:`pyreduce.variants.scan`, order kept.

``R`` rows of ``L`` adjacent elements, each cut into ``P`` tiles of
``block * items`` elements:

1. the *totals* kernel folds every tile, in order, to one value;
2. the totals (``R`` rows of ``P``) are scanned inclusively by this same
   procedure, one level up, until a row fits in one tile;
3. the *scan* kernel scans every tile, seeded by the scanned total of the
   tiles before it in its row (and ``init`` on the left of each row).

Every buffer is the backend's own (``allocate``), and every launch goes through
``launch``, so the same code serves ``cuda``, ``hip`` and ``sim``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .spec import BatchSpec

__all__ = ["Scan", "scan_rows"]


@dataclasses.dataclass(frozen=True)
class Scan:
    """What one scan launches with: the backend, its device description, the
    operator, the threads per block and items per thread, and the stream."""

    be: object
    device: object
    monoid: object
    block: int
    items: int
    stream: object

    def spec(self, in_dtype, totals: bool, finish: bool, initial: bool) -> BatchSpec:
        return BatchSpec("scan", in_dtype, self.monoid.dtype, self.monoid.key, self.block,
                         self.device.warp, self.items, split=totals, initial=initial,
                         finish=finish)

    def launch(self, spec: BatchSpec, grid: int, *args) -> None:
        kernel = self.be.kernel(spec, self.monoid, self.device)
        self.be.launch(kernel, grid, spec.block, self.stream, args)


def scan_rows(call: Scan, x, in_dtype: np.dtype, R: int, L: int, out, init,
              exclusive: bool = False, finish: bool = False) -> None:
    """Write into the device buffer ``out`` the scan of every row of the device
    buffer ``x`` (``R`` rows of ``L`` elements of ``in_dtype``, ``R * L > 0``).
    ``init``: None, or a device buffer whose first element goes on the left of
    every row (needed for ``exclusive``, where ``out[r, j]`` is the prefix
    before element ``j`` and ``out[r, 0]`` is ``init``). ``finish``: ``x`` holds
    accumulator values."""
    be, acc = call.be, call.monoid.dtype
    tile = call.block * call.items
    P = -(-L // tile)
    spare = init if init is not None else be.allocate(1, acc)  # a kernel argument unread
    seeds = spare
    if P > 1:
        totals = be.allocate(R * P, acc)
        call.launch(call.spec(in_dtype, True, finish, False), R * P, x, L, P, totals)
        seeds = be.allocate(R * P, acc)
        scan_rows(call, totals, acc, R, P, seeds, None, finish=True)
    spec = call.spec(in_dtype, False, finish, init is not None)
    call.launch(spec, R * P, x, L, P, out, seeds, spare, int(exclusive))
