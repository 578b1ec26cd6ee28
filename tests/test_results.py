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


# --- PyTorch results: the spare made after a launch for the next call ---------


class _FakeTensor:
    """What TorchResults uses of a tensor: ``new_empty``, ``data_ptr`` and
    ``get_device``. Each
    remembers the (fake) current stream it was allocated on."""

    made = 0

    def __init__(self, world, shape, dtype):
        type(self).made += 1
        self.address = type(self).made << 12
        self.shape, self.dtype, self.stream = shape, dtype, world["stream"]
        self.world = world

    def new_empty(self, shape, dtype):
        if self.world.get("fail"):
            raise RuntimeError("CUDA out of memory")
        return _FakeTensor(self.world, shape, dtype)

    def data_ptr(self):
        return self.address

    def get_device(self):
        return self.world.get("device", 0)


@pytest.fixture
def torch_world(monkeypatch):
    from pyreduce.backends import results

    world = {"stream": 7, "capturing": False}  # the stream PyTorch allocates on, and
    # the call names; whether it is being captured into a CUDA graph
    monkeypatch.setattr(results, "_capturing", lambda: world["capturing"])
    monkeypatch.setitem(results._TORCH_DTYPES, np.dtype(np.float32), "f32")
    monkeypatch.setitem(results._TORCH_DTYPES, np.dtype(np.int64), "i64")
    monkeypatch.setattr(results, "_TORCH_SPARES", {})
    return results, world, _FakeTensor(world, (100,), "f32")


def _call(results, like, dtype=np.float32, shape=(), device=0, current=True):
    """One express call's two steps, a launch between them."""
    new = results.torch_result
    token, address = new.reserve(shape, np.dtype(dtype), device, 0, like,
                                 like.world["stream"] if current else None)
    out = new.array(token, shape, np.dtype(dtype), address)
    assert out.data_ptr() == address and out.shape == shape
    return out


def test_torch_results_take_the_spare_of_the_call_before(torch_world):
    """The second call of a key returns the tensor the first made after its
    launch; every result is a tensor of its own, allocated on the stream
    current at the call (never one a call of another stream, dtype, shape or
    device left)."""
    results, world, like = torch_world
    first = _call(results, like)
    (spare,) = (t for t, _ in results._TORCH_SPARES.values())
    second = _call(results, like)
    assert second is spare and second is not first
    outs = [first, second] + [_call(results, like) for _ in range(20)]
    assert len({id(t) for t in outs}) == len({t.address for t in outs}) == len(outs)
    for key in ((np.int64, ()), (np.float32, (2,))):
        other = _call(results, like, *key)
        assert other.dtype == results._TORCH_DTYPES[np.dtype(key[0])] and other not in outs
    world["device"] = 1  # a tensor on another device than the thread's
    other_device = _call(results, like, device=0)
    world["device"] = 0
    assert other_device not in outs and other_device is not _call(results, like)
    world["stream"] = 9
    on_nine = [_call(results, like) for _ in range(5)]
    assert all(t.stream == 9 for t in on_nine) and not set(map(id, on_nine)) & set(map(id, outs))
    left = next(t for k, (t, _) in results._TORCH_SPARES.items() if k == (0, 7, (), "f32"))
    world["stream"] = 7
    back = _call(results, like)
    assert back.stream == 7 and back is left  # the stream-7 spare outlived stream 9's calls


def test_torch_results_made_at_once_keep_no_spare(torch_world):
    """Neither a result made at once nor one whose call names no current
    stream takes or leaves a spare."""
    results, world, like = torch_world
    made = [results.torch_result((3,), np.dtype(np.float32), 0, 0, like) for _ in range(3)]
    assert not results._TORCH_SPARES
    unnamed = [_call(results, like, current=False) for _ in range(3)]
    assert not results._TORCH_SPARES and len({id(t) for t in unnamed}) == 3
    assert len({arr.address for arr, _ in made}) == 3
    assert all(arr.data_ptr() == address for arr, address in made)


def test_torch_spares_are_bounded_and_survive_a_failed_allocation(torch_world):
    results, world, like = torch_world
    for n in range(3 * results._TORCH_SPARES_LIMIT):
        _call(results, like, shape=(n + 1,))
        assert 1 <= len(results._TORCH_SPARES) <= results._TORCH_SPARES_LIMIT
    results._TORCH_SPARES.clear()
    token, address = results.torch_result.reserve((), np.dtype(np.float32), 0, 0, like, 7)
    world["fail"] = True  # the spare's allocation, after the launch, fails
    out = results.torch_result.array(token, (), np.dtype(np.float32), address)
    assert out.data_ptr() == address and not results._TORCH_SPARES
    world["fail"] = False
    assert _call(results, like) is not out and len(results._TORCH_SPARES) == 1


def test_torch_spares_go_to_one_call_each_across_threads(torch_world):
    results, world, like = torch_world
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda _: _call(results, like), range(2000)))
    assert len({id(t) for t in outs}) == len(outs)


def test_torch_results_under_a_graph_capture_neither_take_nor_leave_a_spare(torch_world):
    """A call captured into a CUDA graph gets a tensor made in the capture
    (PyTorch's pool for the graph), never a spare made outside it, and leaves
    none that a later call could take."""
    results, world, like = torch_world
    _call(results, like)
    (outside,) = (t for t, _ in results._TORCH_SPARES.values())
    world["capturing"] = True
    captured = [_call(results, like) for _ in range(3)]
    assert all(t is not outside for t in captured)
    assert [t for t, _ in results._TORCH_SPARES.values()] == [outside]
    world["capturing"] = False
    assert _call(results, like) is outside


def test_cache_clear_lets_the_torch_spares_go(torch_world):
    import pyreduce

    results, world, like = torch_world
    _call(results, like)
    assert results._TORCH_SPARES
    pyreduce.cache_clear()
    assert not results._TORCH_SPARES
