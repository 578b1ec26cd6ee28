"""Result slabs (pyreduce.backends.results.Slabs): small device results cut from
shared allocations must never overlap, must stay aligned and inside their slab,
and must come from a slab of their own device and stream. The allocator is a
stand-in here; on a GPU, tests/test_gpu.py checks the results' values."""

from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest

from pyreduce.backends.results import Slabs


class Allocator:
    """Slabs at made-up, far-apart addresses; remembers what was asked for."""

    def __init__(self):
        self.made = []

    def __call__(self, device, stream, nbytes):
        owner = object()
        base = (len(self.made) + 1) << 24
        self.made.append((device, stream, nbytes, owner, base))
        return owner, base


def _slab_of(alloc, address):
    for device, stream, nbytes, owner, base in alloc.made:
        if base <= address < base + nbytes:
            return device, stream, owner, base
    raise AssertionError(f"{address:#x} is in no slab")


def test_slots_are_aligned_disjoint_and_inside_their_slab():
    alloc = Allocator()
    slabs = Slabs(alloc)
    rng = np.random.default_rng(0)
    taken = []  # (start, stop, device, stream)
    for _ in range(3000):
        nbytes = int(rng.integers(1, Slabs.MAX_BYTES + 1))
        device, stream = int(rng.integers(0, 2)), int(rng.choice([0, 7]))
        owner, address = slabs.carve(nbytes, device, stream)
        assert address % Slabs.ALIGN == 0
        d, s, slab_owner, base = _slab_of(alloc, address)
        assert (d, s) == (device, stream) and owner is slab_owner
        assert address + nbytes <= base + Slabs.SLAB_BYTES
        taken.append((address, address + nbytes))
    taken.sort()
    assert all(a[1] <= b[0] for a, b in zip(taken, taken[1:]))  # no overlaps
    assert all(n == Slabs.SLAB_BYTES for _, _, n, _, _ in alloc.made)
    # 3000 slots of 16-256 bytes over 4 (device, stream) pairs: several slabs each
    assert len(alloc.made) > 4


@pytest.mark.parametrize("nbytes", [0, Slabs.MAX_BYTES + 1, 1 << 20])
def test_sizes_a_slab_does_not_take(nbytes):
    alloc = Allocator()
    assert Slabs(alloc).carve(nbytes, 0) is None
    assert not alloc.made


def test_open_slabs_are_bounded():
    """Streams come and go: past OPEN_LIMIT open slabs the table starts over (the
    dropped slabs live on in the results cut from them)."""
    alloc = Allocator()
    slabs = Slabs(alloc)
    for stream in range(Slabs.OPEN_LIMIT):
        slabs.carve(8, 0, stream)
    assert len(alloc.made) == Slabs.OPEN_LIMIT
    slabs.carve(8, 0, 0)  # still open
    assert len(alloc.made) == Slabs.OPEN_LIMIT
    slabs.carve(8, 0, 10**6)  # one more stream: the table starts over
    assert len(slabs._open) == 1
    slabs.carve(8, 0, 0)
    assert len(alloc.made) == Slabs.OPEN_LIMIT + 2


def test_concurrent_carving_gives_disjoint_slots():
    alloc = Allocator()
    slabs = Slabs(alloc)

    def job(seed):
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(500):
            n = int(rng.integers(1, 65))
            out.append((slabs.carve(n, 0)[1], n))
        return out

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        slots = sorted(s for got in pool.map(job, range(8)) for s in got)
    assert len({a for a, _ in slots}) == len(slots)
    assert all(a + n <= b for (a, n), (b, _) in zip(slots, slots[1:]))
