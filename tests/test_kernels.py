"""The generated kernels and the plan: every variant at every warp, block, tile
and grid edge with a non-commutative operator, the shuffle carriers of every
dtype, float sums within their rounding bound, determinism, planner invariants,
the generated source, the variant registry and ``pyreduce.explain``."""

from __future__ import annotations

import dataclasses
import functools
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from pyreduce import backends
from pyreduce.planner import DeviceInfo, Tuning, default_items, make_plan
from pyreduce.spec import BLOCK_SIZES, ITEMS_PER_THREAD, WARP_SIZES, KernelSpec
from oracles import ORDERED, P, REORDERING, affine, affine_data, first_nonzero, last_nonzero

# example counts: PYREDUCE_EXAMPLES_SCALE times those below (see tests/conftest.py)
_PROFILE_SCALE = {"thorough": "10", "dev": "0.2"}.get(os.environ.get("HYPOTHESIS_PROFILE"), "1")
SCALE = float(os.environ.get("PYREDUCE_EXAMPLES_SCALE", _PROFILE_SCALE))


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

VARIANTS = list(pyreduce.variants)


# --------------------------------------------------------------------------
# Every edge of every variant, with an operator that notices any reordering

# (warp, block, items, max_blocks)
SIM_CONFIGS = [(32, 32, 1, 1), (32, 64, 2, 2), (64, 64, 4, 3), (32, 128, 1, 4),
               (64, 128, 2, 2)]
GPU_CONFIGS = [(32, 32, 1, 1), (32, 64, 2, 2), (32, 256, 4, 3), (32, 1024, 1, 4),
               (32, 512, 16, 2), (32, 128, 8, 64), (32, 256, 2, None), (32, 256, 32, 3)]


def edge_sizes(w, b, i, g):
    tile = b * i
    g = g or 2
    return sorted({1, 2, w - 1, w + 1, w * i - 1, w * i + 1, b - 1, b + 1, tile - 1,
                   tile, tile + 1, g * tile - 1, g * tile + 1, 2 * g * tile + w * i + 3})


def configs(backend):
    return SIM_CONFIGS if backend == "sim" else GPU_CONFIGS


def fit_items(variant, items):
    """``items`` rounded up to what the variant accepts."""
    m = pyreduce.variants[variant].items_multiple
    return -(-items // m) * m


@pytest.mark.parametrize("variant", ORDERED)
def test_every_edge_keeps_order(gpu_backend, variant):
    for w, b, i, g in configs(gpu_backend):
        i = fit_items(variant, i)
        tuning = Tuning(warp_size=w, block_size=b, items_per_thread=i, max_blocks=g)
        for n in edge_sizes(w, b, i, g):
            x = affine_data(n, seed=n)
            want = functools.reduce(affine, x.tolist())
            got = pyreduce.reduce(x, affine, backend=gpu_backend, variant=variant, tuning=tuning)
            assert int(got) == want, (tuning, n)


@pytest.mark.parametrize("variant", ORDERED)
def test_every_edge_with_initial_and_device_input(gpu_backend, variant):
    from numba import cuda

    for w, b, i, g in configs(gpu_backend)[::2]:
        i = fit_items(variant, i)
        tuning = Tuning(warp_size=w, block_size=b, items_per_thread=i, max_blocks=g)
        for n in edge_sizes(w, b, i, g)[::3]:
            x = affine_data(n, seed=n + 1)
            init = int(affine_data(1, seed=n + 2)[0])
            want = functools.reduce(affine, x.tolist(), init)
            d = cuda.to_device(x)
            got = pyreduce.reduce(d, affine, initial=init, backend=gpu_backend,
                                  variant=variant, tuning=tuning)
            assert int(got) == want, (tuning, n)
            assert np.array_equal(d.copy_to_host(), x)


STRIPED = [name for name in REORDERING if pyreduce.variants[name].options.striped]


@pytest.mark.parametrize("variant", STRIPED)
def test_striped_loads_of_float32_summaries(gpu_backend, variant):
    """The striped variants spread a lane's vectors over its warp's tile where
    a float32 summary does not number its items (mean's sums, var's moments),
    and their fallbacks read the same elements: means and variances against
    float64 NumPy, an infinity and a NaN, and squares under float32's normal
    range (var's element-by-element fallback), around tile edges."""
    rng = np.random.default_rng(11)
    block = 64 if gpu_backend == "sim" else 256
    tuning = Tuning(variant=variant, block_size=block, items_per_thread=8, max_blocks=3)
    tile = block * 8
    for n in (100, tile + 33, 3 * tile, 5 * tile - 7):
        kw = dict(backend=gpu_backend, tuning=tuning)
        x = (rng.standard_normal(n) * 3 + 1000).astype(np.float32)
        h = x.astype(np.float64)
        assert abs(pyreduce.mean(x, **kw) - h.mean()) <= 1e-6 * 1000, n
        assert abs(pyreduce.var(x, ddof=1, **kw) - h.var(ddof=1)) <= 1e-4 * h.var(), n
        y = x.copy()
        y[rng.integers(0, n)] = np.inf
        assert pyreduce.mean(y, **kw) == np.inf
        y[rng.integers(0, n)] = np.nan
        assert np.isnan(pyreduce.var(y, **kw))
        tiny = rng.standard_normal(n).astype(np.float32) * np.float32(1e-17)
        want = tiny.astype(np.float64).var()
        assert abs(pyreduce.var(tiny, **kw) - want) <= 1e-5 * want, n


@pytest.mark.parametrize("variant", STRIPED)
def test_striped_loads_of_half_precision_sums(gpu_backend, variant):
    """float16 and bfloat16 sums and maxima (in float32, as the planner runs
    them past the L2) in striped block tiles: around tile edges and from views that
    start 0, 1, 2 or 4 elements into an allocation (vectors of 8, 1, 2 or 4 items), the
    float64 sum within float32's rounding, an infinity and a NaN propagated,
    float16 maxima exactly."""
    import ml_dtypes
    from numba import cuda

    rng = np.random.default_rng(5)
    block = 32 if gpu_backend == "sim" else 256
    tuning = Tuning(variant=variant, block_size=block, items_per_thread=16, max_blocks=3)
    tile = block * 16
    widths = set()
    for dt in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        host = rng.standard_normal(5 * tile + 8).astype(dt)
        # float16 as device views (their start sets the vector width)
        whole = cuda.to_device(host) if dt == np.float16 else None
        for n in (9, tile - 1, tile + 33, 3 * tile, 5 * tile - 7):
            for offset in (0, 1, 2, 4):
                x = host[offset:offset + n]
                wide = x.astype(np.float64)
                bound = 1e-5 * np.abs(wide).sum() + 1e-6
                if whole is None:
                    got = pyreduce.sum(x, backend=gpu_backend, tuning=tuning)
                else:
                    e = pyreduce.explain(whole[offset:offset + n], "add",
                                         backend=gpu_backend, tuning=tuning)
                    got = e.result
                    widths.add(e.plan.spec.vector)
                    top = pyreduce.reduce(whole[offset:offset + n], "max",
                                          backend=gpu_backend, tuning=tuning)
                    assert top == x.max(), (n, offset)  # a maximum, exactly
                assert abs(float(got) - wide.sum()) <= bound, (dt, n, offset)
        y = host[:3 * tile + 5].copy()
        y[rng.integers(0, y.size)] = np.inf
        assert pyreduce.sum(y, backend=gpu_backend, tuning=tuning) == np.inf
        y[rng.integers(0, y.size)] = np.nan
        assert np.isnan(pyreduce.sum(y, backend=gpu_backend, tuning=tuning))
    assert widths == {8, 4, 2, 1}, widths


@pytest.mark.parametrize("variant", REORDERING)
def test_every_edge_of_a_reordering_variant(gpu_backend, variant):
    """A variant that reorders (commutative built-ins only) still combines every
    element exactly once: wrapping int64 sums of random values (a lost or doubled
    element shows), with and without an initial value, from host and device, and
    float32 maxima whose winner sits anywhere; user ops are refused."""
    from numba import cuda

    for w, b, i, g in configs(gpu_backend):
        kw = dict(tuning=Tuning(warp_size=w, block_size=b, items_per_thread=i,
                                max_blocks=g, variant=variant), backend=gpu_backend)
        for n in edge_sizes(w, b, i, g):
            rng = np.random.default_rng(n)
            x = rng.integers(-2**62, 2**62, n, dtype=np.int64)
            init = int(rng.integers(-2**62, 2**62))
            want = np.add.reduce(x, dtype=np.int64)
            assert pyreduce.reduce(x, "add", **kw) == want, (kw, n)
            d = cuda.to_device(x)
            got = pyreduce.reduce(d, "add", initial=init, **kw)
            assert got == np.int64(want + np.int64(init)), (kw, n)
            assert np.array_equal(d.copy_to_host(), x)
            f = rng.standard_normal(n).astype(np.float32)
            f[rng.integers(0, n)] = 9.5  # the winner, somewhere
            assert pyreduce.reduce(f, "max", **kw) == np.float32(9.5), (kw, n)
    # 32 items per lane, read 16, 8 or 4 bytes at a time by where the view starts
    block = 32 if gpu_backend == "sim" else 256
    x = np.random.default_rng(7).integers(-2**30, 2**30, 3 * block * 32 + 40).astype(np.int32)
    whole = cuda.to_device(x)
    widths = set()
    for offset in range(4):
        for n in (1, 31, 33, block * 32 - 1, block * 32 + 1, 3 * block * 32 + 5):
            e = pyreduce.explain(whole[offset:offset + n], "add", backend=gpu_backend,
                                 tuning=Tuning(variant=variant, block_size=block,
                                               items_per_thread=32, max_blocks=2))
            assert e.result == np.add.reduce(x[offset:offset + n], dtype=np.int32), (offset, n)
            widths.add(e.plan.spec.vector)
    assert widths == {4, 2, 1}
    with pytest.raises(ValueError, match="commutative"):
        pyreduce.reduce(np.ones(10, np.int64), affine, backend=gpu_backend, variant=variant)


@pytest.mark.parametrize("variant", ["last_block", "warp_shuffle"])
@pytest.mark.parametrize("dt", [np.int8, np.float32, np.int64], ids=lambda t: np.dtype(t).name)
def test_32_items_with_every_vector_width(gpu_backend, variant, dt):
    """32 items per thread, the most offered, loaded 16 bytes at a time where the
    start allows it and narrower where it does not (offsets 0-3 elements), at the
    tile's edges: an order-sensitive op sees every element once, in order."""
    from numba import cuda

    block = 32 if gpu_backend == "sim" else 256
    tile = block * 32
    rng = np.random.default_rng(np.dtype(dt).itemsize)
    base = rng.integers(0, 3, 2 * 2 * tile + 40).astype(dt)  # many zeros: order shows
    whole = cuda.to_device(base)  # a fresh allocation starts 16-byte aligned
    widths = set()
    for offset in range(4):
        for n in (1, 31, tile - 1, tile + 1, 2 * tile + 5, 4 * tile + 3):
            x = base[offset:offset + n]
            d = whole[offset:offset + n]
            for op in (last_nonzero, first_nonzero):
                e = pyreduce.explain(d, op, backend=gpu_backend, variant=variant,
                                     tuning=Tuning(block_size=block, items_per_thread=32,
                                                   max_blocks=2))
                assert e.result == functools.reduce(op, x.tolist()), (offset, n, op)
            widths.add(e.plan.spec.vector)
    assert widths == {np.int8: {16, 1}, np.float32: {4, 2, 1}, np.int64: {2, 1}}[dt]


@pytest.mark.parametrize("n", [1, 100, 1000, 9999, 100003])
def test_cpu_streams_keep_order(n):
    """The CPU fold cuts a range into 8 contiguous streams (16 lanes for the
    built-ins); every stream boundary must keep order."""
    for k in range(-2, 3):
        m = max(1, n + k)
        x = affine_data(m, seed=m)
        assert int(pyreduce.reduce(x, affine, backend="cpu")) == functools.reduce(
            affine, x.tolist())


# --------------------------------------------------------------------------
# Shuffle carriers: narrow ints ride in int32, 64-bit ints in int64


# one variant per way values travel: shuffles (warp family, shuffle tail), shared
# memory only (tree), the single-pass finish, the doubled shared array, and the
# lanes' accumulators of a reordering variant (the built-ins only)
CARRIER_VARIANTS = [v for v in ("warp_shuffle", "shuffle_tail", "last_block",
                                "double_shared") if v in pyreduce.variants] + REORDERING


@pytest.mark.parametrize("dt", [np.bool_, np.int8, np.int16, np.int32, np.int64,
                                np.uint8, np.uint16, np.uint32, np.uint64,
                                np.float32, np.float64], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("variant", CARRIER_VARIANTS)
def test_carriers_preserve_every_bit(gpu_backend, variant, dt):
    dt = np.dtype(dt)
    rng = np.random.default_rng(11)
    n = 400
    if dt.kind == "f":
        x = (rng.standard_normal(n) * 1e30).astype(dt)
        x[[3, n // 2, n - 3]] = [np.inf, -0.0, np.finfo(dt).tiny]
    elif dt.kind == "b":
        x = rng.random(n) < 0.5
    else:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, n, endpoint=True, dtype=dt)
        x[[1, n // 2, n - 1]] = [info.max, info.min, info.max]
    tuning = Tuning(variant=variant, block_size=64 if gpu_backend == "sim" else 128,
                    items_per_thread=fit_items(variant, 1), max_blocks=3)
    # last: exactly the last element; first-max: position-sensitive among equal keys
    if variant in ORDERED:
        got = pyreduce.reduce(x, lambda a, b: b, backend=gpu_backend, tuning=tuning)
        assert got.tobytes() == x[-1].tobytes()
        got = pyreduce.reduce(x, lambda a, b: a, backend=gpu_backend, tuning=tuning)
        assert got.tobytes() == x[0].tobytes()
    got = pyreduce.reduce(x, "max", backend=gpu_backend, tuning=tuning)
    assert got == x.max()
    got = pyreduce.reduce(x, "min", backend=gpu_backend, tuning=tuning)
    assert got == x.min()
    if dt.kind in "iu":
        got = pyreduce.reduce(x, "xor", backend=gpu_backend, tuning=tuning)
        assert got == np.bitwise_xor.reduce(x)
        got = pyreduce.reduce(x, "add", backend=gpu_backend, tuning=tuning)
        assert got == np.add.reduce(x, dtype=dt)


# --------------------------------------------------------------------------
# Float sums: within the rounding bound, and deterministic


def sum_bound(x, acc):
    eps = np.finfo(acc).eps
    return len(x) * eps * float(np.abs(x.astype(np.float64)).sum()) + 1e-300


@settings(max_examples=examples(20))
@given(n=st.integers(1, 1500), seed=st.integers(0, 2**32 - 1),
       dt=st.sampled_from([np.float32, np.float64]), variant=st.sampled_from(VARIANTS),
       user=st.booleans())
def test_random_float_sums_within_bound(backend, n, seed, dt, variant, user):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4)).astype(dt)
    exact = math.fsum(x.astype(np.float64).tolist())
    op = (lambda a, b: a + b) if user else "add"
    extra = {} if backend == "cpu" else {"variant": variant}
    if backend == "sim":
        extra.update(tuning=Tuning(block_size=64, max_blocks=3))
    if user and backend != "cpu" and variant in REORDERING:
        with pytest.raises(ValueError, match="commutative"):
            pyreduce.reduce(x, op, backend=backend, **extra)
        return
    got = pyreduce.reduce(x, op, backend=backend, **extra)
    assert got.dtype == dt
    assert abs(float(got) - exact) <= sum_bound(x, dt)
    # no atomics: the same call gives the same bits
    again = pyreduce.reduce(x, op, backend=backend, **extra)
    assert got.tobytes() == again.tobytes()


# --------------------------------------------------------------------------
# Scratch buffers are reused between calls: nothing stale may leak in


def test_scratch_reuse_between_sizes(gpu_backend):
    """Workspaces (and single-pass tickets) are reused by later calls: grids of
    several blocks and of one (which skips the ticket without an initial
    value), each size twice."""
    tuning = Tuning(block_size=32, items_per_thread=1, max_blocks=4)
    for n in (1000, 3, 129, 40, 1, 500, 2) * 2:
        x = affine_data(n, seed=n)
        for init in (None, 77 * P + 5):
            want = functools.reduce(affine, x.tolist(), *(() if init is None else (init,)))
            got = pyreduce.reduce(x, affine, initial=init, backend=gpu_backend, tuning=tuning)
            assert int(got) == want, (n, init)


# --------------------------------------------------------------------------
# The planner


H100 = DeviceInfo("H100", ("cuda", 0, (9, 0)), 132, 2048, 32, 32)
SIMDEV = DeviceInfo("CUDA simulator", ("sim",), 2, 64, 1, 32, 64)


@settings(max_examples=examples(400))
@given(
    n=st.one_of(st.integers(1, 10**6), st.integers(1, 2**40)),
    dt=st.sampled_from([np.bool_, np.int8, np.int32, np.float64]),
    variant=st.sampled_from(VARIANTS),
    warp=st.sampled_from([None, 32, 64]),
    block=st.sampled_from([None, *BLOCK_SIZES]),
    items=st.sampled_from([None, *ITEMS_PER_THREAD]),
    max_blocks=st.sampled_from([None, 1, 2, 3, 1000, 10**6]),
    extra=st.sampled_from([0, 1]),
    device=st.sampled_from([H100, SIMDEV]),
)
def test_plan_invariants(n, dt, variant, warp, block, items, max_blocks, extra, device):
    dt = np.dtype(dt)
    v = pyreduce.variants[variant]
    w = warp or device.warp
    tuning = Tuning(variant=variant, block_size=block, items_per_thread=items, warp_size=warp,
                    max_blocks=max_blocks)
    want_items = items or v.default_items or default_items(dt)
    if block is not None and block % w:
        with pytest.raises(ValueError, match="multiple of warp"):
            make_plan(n, dt, dt, "k", device, tuning, extra)
        return
    if want_items % v.items_multiple:
        with pytest.raises(ValueError, match="multiple"):
            make_plan(n, dt, dt, "k", device, tuning, extra)
        return
    plan = make_plan(n, dt, dt, "k", device, tuning, extra)
    spec = plan.spec
    assert plan.layout == v.layout and spec.variant == variant
    assert spec.warp == w
    assert spec.block == (block or max(device.default_block, w))
    assert spec.items == want_items
    assert plan.chunk % spec.tile == 0
    assert plan.grid >= 1
    assert (plan.grid - 1) * plan.chunk < n <= plan.grid * plan.chunk  # no empty block
    if v.layout == "multi_pass":
        tiles = -(-n // spec.tile)
        if not max_blocks or tiles <= max_blocks:
            assert plan.chunk == spec.tile and plan.grid == tiles  # one tile per block
        else:
            assert plan.grid <= max_blocks
    else:
        assert plan.grid <= (max_blocks or device.max_grid(spec.block))
    assert plan.head == extra
    if v.layout == "single_pass":
        assert plan.finish is None and plan.passes == 1
    else:
        assert (plan.finish is not None) == (plan.grid > 1 or extra > 0)
        if plan.finish is None:
            assert plan.passes == 1
        elif v.layout == "two_pass":
            assert plan.passes == 2
        else:
            # one pass per level of the partials' tree
            count, passes = plan.grid + extra, 1
            while count > 1 or passes == 1:
                count = -(-count // plan.finish.tile)
                passes += 1
            assert plan.passes == passes
    if plan.finish is not None:
        assert plan.finish.in_dtype == plan.finish.acc_dtype == dt
        assert plan.finish.block == spec.block and plan.finish.warp == spec.warp
    # the same call shape gives the same plan
    assert make_plan(n, dt, dt, "k", device, tuning, extra) == plan


# an H100 as its backend describes it: 50 MiB of L2, 512-thread "auto" blocks
H100_L2 = dataclasses.replace(H100, vector_bytes=16, l2_bytes=50 * 2**20, auto_block=512)


@pytest.mark.parametrize("dt", [np.int16, np.float32, np.int32, np.float64],
                         ids=lambda t: np.dtype(t).name)
def test_auto_streams_two_pass_past_twice_the_l2_cache(dt):
    """``variant="auto"``: two 16-byte loads per lane in one pass, on one wave of
    blocks in the L2 cache and four waves up to twice its size; past that, the
    two-pass ``warp_shuffle_x2`` on about four tiles per block, one wave at
    least and 32 at most; 512 threads where the device says so."""
    dt = np.dtype(dt)
    l2, wave = H100_L2.l2_bytes, H100_L2.max_grid(512)
    two = min(16, 2 * default_items(dt))
    for nbytes, waves in [(4096, 1), (l2 // 3, 1), (l2, 1), (l2 + 4096, 4), (2 * l2, 4)]:
        n = nbytes // dt.itemsize
        plan = make_plan(n, dt, dt, "add", H100_L2, align=16)
        spec = plan.spec
        assert (plan.layout, spec.variant, spec.block, spec.items) == (
            "single_pass", "last_block", 512, two), nbytes
        assert spec.vector * dt.itemsize == 16
        bound = min(-(-n // spec.tile), waves * wave)
        assert bound // 2 < plan.grid <= bound, nbytes  # the grid fills its bound
        assert (plan.grid - 1) * plan.chunk < n <= plan.grid * plan.chunk
    tile_bytes = 512 * two * dt.itemsize
    for nbytes in [2 * l2 + 4096, 3 * l2, 8 * l2, 40 * l2 + 12, 400 * l2]:
        n = nbytes // dt.itemsize
        plan = make_plan(n, dt, dt, "add", H100_L2, align=16)
        spec = plan.spec
        assert (plan.layout, spec.variant, spec.block, spec.items) == (
            "two_pass", "warp_shuffle_x2", 512, two), nbytes
        assert spec.vector * dt.itemsize == 16 and plan.finish is not None
        tiles = -(-n // spec.tile)
        assert tiles == -(-nbytes // tile_bytes)
        assert plan.chunk % spec.tile == 0
        # four tiles a block, unless one wave or 32 waves bound the grid
        bound = min(32 * wave, max(wave, -(-tiles // 4)))
        assert plan.chunk // spec.tile == -(-tiles // bound), (nbytes, plan.chunk, plan.grid)
        assert (plan.grid - 1) * plan.chunk < n <= plan.grid * plan.chunk
    # 32 waves bind far past the L2 (one wave would bind below 4 waves' tiles:
    # 33 MiB of 512-thread tiles on an H100, so never past twice its L2)
    huge = make_plan(400 * l2 // dt.itemsize, dt, dt, "add", H100_L2, align=16)
    assert huge.chunk // huge.spec.tile > 4 and huge.grid > 16 * wave
    # the caller's choices win over the rule's, one by one
    n = 40 * l2 // dt.itemsize
    plan = make_plan(n, dt, dt, "add", H100_L2, Tuning(block_size=128), align=16)
    assert (plan.spec.variant, plan.spec.block, plan.spec.items) == (
        "warp_shuffle_x2", 128, two)
    assert plan.grid <= 32 * H100_L2.max_grid(128)
    plan = make_plan(n, dt, dt, "add", H100_L2, Tuning(items_per_thread=2, max_blocks=7),
                     align=16)
    assert (plan.spec.block, plan.spec.items, plan.grid) == (512, 2, 7)
    plan = make_plan(n, dt, dt, "add", H100_L2, Tuning(variant="warp_shuffle"), align=16)
    assert plan.spec.block == H100_L2.default_block and plan.grid <= H100_L2.max_grid(256)
    # where the L2 size and block are not known: the in-cache rule at every size
    plan = make_plan(n, dt, dt, "add", H100, align=16)
    assert (plan.spec.block, plan.spec.items) == (H100.default_block, two)
    assert plan.grid <= H100.max_grid(H100.default_block)


@pytest.mark.parametrize("dt", [np.int16, np.float32, np.int32, np.float64],
                         ids=lambda t: np.dtype(t).name)
def test_auto_reads_block_tiles_as_runs_past_the_l2_for_ops_that_may_be_reordered(dt):
    """A commutative op (a built-in) of 4- or 8-byte items past the L2 runs
    ``last_block_striped`` on one wave: 4-byte items in blocks of 256 with four
    16-byte loads a lane, 8-byte items in the device's blocks with two. Inside
    the L2, for an op that keeps its order, for other item sizes and for an
    input its vectors do not fit (not aligned, not contiguous, or a tuning's
    items that are one vector): the ordered rule."""
    dt = np.dtype(dt)
    l2 = H100_L2.l2_bytes
    block, loads = {4: (256, 4), 8: (512, 2)}.get(dt.itemsize, (None, None))
    for nbytes in (l2 + 4096, 2 * l2, 3 * l2, 400 * l2):
        n = nbytes // dt.itemsize
        ordered = make_plan(n, dt, dt, "add", H100_L2, align=16)
        plan = make_plan(n, dt, dt, "add", H100_L2, align=16, commutative=True)
        spec = plan.spec
        if block is None:  # not measured: the ordered rule
            assert plan == ordered, nbytes
            continue
        assert (plan.layout, spec.variant, spec.block, spec.items) == (
            "single_pass", "last_block_striped", block, loads * 16 // dt.itemsize), nbytes
        assert spec.vector * dt.itemsize == 16 and plan.finish is None
        bound = min(-(-n // spec.tile), H100_L2.max_grid(block))
        assert bound // 2 < plan.grid <= bound, nbytes
        assert (plan.grid - 1) * plan.chunk < n <= plan.grid * plan.chunk
        for align in (0, dt.itemsize):  # strided, or aligned to one element only
            other = make_plan(n, dt, dt, "add", H100_L2, align=align, commutative=True)
            assert other.spec.variant == ordered.spec.variant != "last_block_striped"
        one = Tuning(items_per_thread=16 // dt.itemsize)  # items of one vector
        assert make_plan(n, dt, dt, "add", H100_L2, one, align=16,
                         commutative=True).spec.variant == ordered.spec.variant
    inside = make_plan(l2 // dt.itemsize, dt, dt, "add", H100_L2, align=16, commutative=True)
    assert inside.spec.variant == "last_block"


def test_auto_reads_half_precision_sums_as_runs():
    """A float16 or bfloat16 sum (into float32) runs ``last_block_striped`` in
    blocks of planner.HALF_BLOCK with two 16-byte loads a lane, one launch on
    one wave, inside the L2 and past it; for an op that keeps its order, for an
    input its vectors do not fit, for a sum into float64 and on a device whose
    L2 size is not known: the two-pass ``warp_shuffle`` of the widening sums."""
    from pyreduce.dtypes import BFLOAT16
    from pyreduce.planner import HALF_BLOCK, HALF_STRIPED_ITEMS

    l2 = H100_L2.l2_bytes
    f4 = np.dtype(np.float32)
    # plans are remembered by the device's key: another key for another device
    no_l2 = dataclasses.replace(H100_L2, key=("cuda", 1, (9, 0)), l2_bytes=0)
    for dt in (np.dtype(np.float16), BFLOAT16):
        for nbytes in (2**16, l2 // 2, l2 + 4096, 3 * l2, 400 * l2):
            n = nbytes // dt.itemsize
            plan = make_plan(n, dt, f4, "add", H100_L2, align=16, commutative=True)
            spec = plan.spec
            assert (plan.layout, spec.variant, spec.block, spec.items, spec.vector) == (
                "single_pass", "last_block_striped", HALF_BLOCK, HALF_STRIPED_ITEMS, 8)
            assert plan.finish is None and plan.grid <= H100_L2.max_grid(HALF_BLOCK)
            assert (plan.grid - 1) * plan.chunk < n <= plan.grid * plan.chunk
            ordered = make_plan(n, dt, f4, "add", H100_L2, align=16)
            assert ordered.spec.variant == "warp_shuffle" and ordered.passes == 2
            unknown = make_plan(n, dt, f4, "add", no_l2, align=16, commutative=True)
            assert unknown.spec.variant == "warp_shuffle"  # no L2 size: as before
            for align in (0, 2):  # strided, or aligned to one element only
                other = make_plan(n, dt, f4, "add", H100_L2, align=align, commutative=True)
                assert other.spec.variant == "warp_shuffle", (align, nbytes)
            wide = make_plan(n, dt, np.dtype(np.float64), "add", H100_L2, align=16,
                             commutative=True)
            assert wide.spec.variant == "warp_shuffle"  # not measured: as before
        tiny = make_plan(1000, dt, f4, "add", H100_L2, align=16, commutative=True)
        assert tiny.spec.variant == "last_block_striped" and tiny.grid == 1


def test_auto_grid_of_tiles_per_block_lies_between_one_wave_and_its_waves():
    from pyreduce.planner import Auto

    wave = H100_L2.max_grid(512)
    rule = Auto("warp_shuffle_x2", 8, 512, 32, per_block=4)
    assert rule.max_blocks(H100_L2, 512, 10) == wave  # one wave at least
    assert rule.max_blocks(H100_L2, 512, 4 * wave + 1) == wave + 1
    assert rule.max_blocks(H100_L2, 512, 40 * wave) == 10 * wave
    assert rule.max_blocks(H100_L2, 512, 10**9) == 32 * wave  # 32 waves at most
    assert rule.max_blocks(H100_L2, 256, 10**9) == 32 * H100_L2.max_grid(256)
    assert Auto("last_block", 8, 512, 4).max_blocks(H100_L2, 512, 10**9) == 4 * wave
    assert Auto("last_block", 8, 512, 4).max_blocks(H100_L2, 512, 10) == 4 * wave


def test_auto_sums_that_widen_run_two_pass():
    i8, i64 = np.dtype(np.int8), np.dtype(np.int64)
    for n in (1000, 2**30):
        plan = make_plan(n, i8, i64, "add", H100_L2, align=16)
        assert (plan.spec.variant, plan.spec.block, plan.spec.items) == ("warp_shuffle", 256, 16)
        assert plan.grid <= H100_L2.max_grid(256)


def test_auto_tuple_accumulators_keep_more_loads_in_flight():
    """Tuple accumulators of ops that may not be reordered (a user's tuple op
    with var's or mean's accumulator: the moments monoids planned with
    ``commutative=False``) past the L2 (the measured rule, planner._tuple_rule):
    four fields 32 items of float32 and 8 of float64, two fields 16 of
    float32 and two tiles of 16 of float16, float64's two fields the widening
    rule; two tiles of 8 of float32 between one and two L2 sizes, in one launch;
    up to twice the L2 otherwise the widening rule's items in one launch
    (``last_block``, which finishes too); the caller's tuning wins."""
    from pyreduce import structured

    l2 = H100_L2.l2_bytes

    def layout(dtype, statistic, nbytes, tuning=Tuning(), commutative=False):
        dt = np.dtype(dtype)
        m = structured.moments_monoid(dt, statistic)
        plan = make_plan(nbytes // dt.itemsize, dt, m.dtype, m.key, H100_L2, tuning, align=16,
                         commutative=commutative)
        return plan.spec.variant, plan.spec.block, plan.spec.items

    assert layout(np.float32, "var", 3 * l2) == ("warp_shuffle", 256, 32)
    assert layout(np.float64, "var", 3 * l2) == ("warp_shuffle", 256, 8)
    assert layout(np.float32, "mean", 3 * l2) == ("warp_shuffle", 256, 16)
    assert layout(np.float16, "mean", 3 * l2) == ("warp_shuffle_x2", 256, 16)
    widening = ("warp_shuffle", H100_L2.default_block)
    assert layout(np.float64, "mean", 3 * l2) == widening + (4,)
    one_launch = ("last_block", H100_L2.default_block)
    assert layout(np.float32, "var", 3 * l2 // 2) == ("last_block_x2", 256, 8)
    assert layout(np.float64, "var", 3 * l2 // 2) == one_launch + (4,)
    assert layout(np.float32, "var", l2 // 8) == one_launch + (8,)
    assert layout(np.float32, "mean", 1000 * 4) == one_launch + (8,)
    assert layout(np.float32, "var", 3 * l2, Tuning(items_per_thread=4))[2] == 4


def test_auto_half_precision_pairs_in_the_cache_take_blocks_of_512():
    """A float16 or bfloat16 input's two-field accumulators (argmax's,
    minmax's) inside the L2 run one launch in blocks of 512 on one wave
    (planner.HALF_BLOCK), folded per lane where the op may be reordered; a
    mean's in blocks of 256 on five blocks an SM (planner.HALF_MEAN); past the
    L2, int16 and float32 in the cache, and a tuning's block size keep their
    own."""
    from pyreduce import structured
    from pyreduce.dtypes import BFLOAT16
    from pyreduce.planner import HALF_BLOCK, HALF_MEAN, LANES_WAVE

    l2 = H100_L2.l2_bytes

    def plan(monoid, dt, nbytes, tuning=Tuning()):
        m = monoid(dt)
        return make_plan(nbytes // dt.itemsize, dt, m.dtype, m.key, H100_L2, tuning, align=16,
                         commutative=m.commutative)

    def mean(dt):
        return structured.moments_monoid(dt, "mean")

    for dt in (np.dtype(np.float16), BFLOAT16):
        for monoid in (mean, structured.argmax_monoid):
            p = plan(monoid, dt, l2 // 2)
            block = 256 if monoid is mean else HALF_BLOCK
            assert (p.spec.variant, p.spec.block, p.spec.items) == (
                "last_block_lanes", block, 16)
            wave = H100_L2.max_grid(block) * (LANES_WAVE if monoid is mean else 1)
            assert p.grid <= wave and p.passes == 1
            assert plan(monoid, dt, 3 * l2 // 2).spec.block == H100_L2.default_block
            assert plan(monoid, dt, l2 // 2, Tuning(block_size=128)).spec.block == 128
        # the mean's grid: up to five blocks of 256 an SM (planner.LANES_WAVE),
        # more than the four of one wave of 512 threads
        p = plan(mean, dt, l2 // 2)
        assert (p.spec.variant, p.spec.block, p.spec.items) == (
            HALF_MEAN.variant, HALF_MEAN.block, HALF_MEAN.items)
        assert H100_L2.max_grid(HALF_BLOCK) < p.grid <= H100_L2.max_grid(256) * LANES_WAVE
    # minmax's pair too
    p = plan(structured.minmax_monoid, np.dtype(np.float16), l2 // 2)
    assert (p.spec.variant, p.spec.block) == ("last_block_lanes", HALF_BLOCK)
    assert plan(mean, np.dtype(np.int16), l2 // 2).spec.block == H100_L2.default_block
    assert plan(mean, np.dtype(np.float32), l2 // 2).spec.block == H100_L2.default_block


def test_auto_folds_per_lane_where_the_op_may_be_reordered():
    """A commutative tuple op (every structured reduction's but complex
    minmax's) past the L2 folds per lane (planner._tuple_rule): var 16 items
    of float32 and 4 of float64 two-pass, two fields of float32 8 items in one
    launch and of float64 4 items two-pass; between one and two L2 sizes
    float32's var 8 items two-pass on half a wave, int32's in one launch, and
    in the cache var in one launch; a non-commutative op never, and an explicit
    variant wins. The plans keep NumPy's answers (tests/test_structured.py runs
    the lane variants)."""
    from pyreduce import structured

    l2 = H100_L2.l2_bytes

    def layout(monoid, dtype, nbytes, tuning=Tuning()):
        dt = np.dtype(dtype)
        m = monoid(dt)
        plan = make_plan(nbytes // dt.itemsize, dt, m.dtype, m.key, H100_L2, tuning, align=16,
                         commutative=m.commutative)
        return plan.spec.variant, plan.spec.items

    def var(dt):
        return structured.moments_monoid(dt, "var")

    def mean(dt):
        return structured.moments_monoid(dt, "mean")

    def lanes_grid(monoid, nbytes):
        m = monoid(np.dtype(np.float32))
        return make_plan(nbytes // 4, np.dtype(np.float32), m.dtype, m.key, H100_L2, align=16,
                         commutative=True).grid

    argmax, minmax = structured.argmax_monoid, structured.minmax_monoid
    assert layout(var, np.float32, 3 * l2) == ("warp_shuffle_lanes", 16)
    assert layout(var, np.float64, 3 * l2) == ("warp_shuffle_lanes", 4)
    # between one and two L2 sizes: float32's var two-pass on half a wave of
    # blocks, int32's in one launch; in the cache in one launch
    assert layout(var, np.float32, 3 * l2 // 2) == ("warp_shuffle_lanes", 8)
    m = var(np.dtype(np.float32))
    plan = make_plan(3 * l2 // 8, np.dtype(np.float32), m.dtype, m.key, H100_L2, align=16,
                     commutative=True)
    half = H100_L2.max_grid(256) // 2
    assert half // 2 < plan.grid <= half and plan.finish is not None
    assert layout(var, np.int32, 3 * l2 // 2) == ("last_block_lanes", 8)
    assert layout(var, np.float32, l2 // 8) == ("last_block_lanes", 8)
    for two in (mean, argmax, minmax):
        assert layout(two, np.float32, 3 * l2) == ("last_block_lanes", 8)
        # past the L2 on five blocks an SM (planner.LANES_WAVE): the most that
        # their registers let reside
        assert H100_L2.sm_count * 4 < lanes_grid(two, 40 * l2) <= H100_L2.sm_count * 5
        assert layout(two, np.float64, 3 * l2) == ("warp_shuffle_lanes", 4)
        assert layout(two, np.float32, l2 // 8)[0] == "last_block"
    # between one and two L2 sizes: float32's 16-byte accumulators per lane,
    # int32's and minmax's pairs one tile a loop
    for two in (mean, argmax, structured.argmin_monoid):
        assert layout(two, np.float32, 3 * l2 // 2) == ("last_block_lanes", 8)
        assert H100_L2.sm_count * 4 < lanes_grid(two, 3 * l2 // 2) <= H100_L2.sm_count * 5
        assert layout(two, np.int32, 3 * l2 // 2) == ("last_block", 8)
    # a tuning's other block size: the fraction of a wave was measured for 256
    m = mean(np.dtype(np.float32))
    wide = make_plan(40 * l2 // 4, np.dtype(np.float32), m.dtype, m.key, H100_L2,
                     Tuning(block_size=1024), align=16, commutative=True)
    assert (wide.spec.block, wide.grid) == (1024, H100_L2.max_grid(1024))
    assert layout(minmax, np.float32, 3 * l2 // 2) == ("last_block", 8)
    # complex minmax is not commutative (which NaN wins): ordered variants only
    assert layout(minmax, np.complex64, 3 * l2)[0] == "warp_shuffle"
    assert layout(var, np.float32, 3 * l2, Tuning(variant="warp_shuffle"))[0] == "warp_shuffle"


def test_kernel_spec_validation():
    ok = KernelSpec("warp_shuffle", np.float32, np.float32, "k", 64, 32, 2)
    assert (ok.warps, ok.tile, ok.label) == (2, 128, "warp_shuffle f4 b64 w32 i2")
    mixed = KernelSpec("shared_tree", np.int8, np.int64, "k", 128, 64, 4)
    assert mixed.label == "shared_tree i1->i8 b128 w64 i4"
    for kwargs, msg in [
        (dict(block=100), "block size"), (dict(warp=16), "warp size"),
        (dict(items=3), "items per thread"), (dict(block=32, warp=64), "multiple"),
    ]:
        args = dict(variant="warp_shuffle", in_dtype=np.float32, acc_dtype=np.float32,
                    op_key="k", block=64, warp=32, items=2)
        args.update(kwargs)
        with pytest.raises(ValueError, match=msg):
            KernelSpec(**args)
    # the spec is a description; the registry refuses a variant it does not know
    from pyreduce.dialect import CUDA
    from pyreduce.variants import generate

    with pytest.raises(ValueError, match="unknown variant 'nope'"):
        generate(dataclasses.replace(ok, variant="nope"), CUDA)


# --------------------------------------------------------------------------
# The generated source


@pytest.mark.parametrize("variant", ["last_block", "warp_shuffle", "shared_tree"])
def test_generated_source_casts_only_where_types_differ(variant):
    """Every call in a kernel's source is typed and lowered by Numba on each
    compile: elements already of the accumulator's type are not cast, and values
    a shuffle moves as they are are not cast either way."""
    from pyreduce.dialect import CUDA
    from pyreduce.variants import generate

    def source(in_dt, acc_dt):
        spec = KernelSpec(variant, in_dt, acc_dt, ("builtin", "add"), 256, 32, 8)
        return generate(spec, CUDA)[1]

    same = source(np.float32, np.float32)
    assert "x[i" in same and "acc_t(x[" not in same and "carry_t(" not in same
    assert "acc_t(op(" in same  # an op's result is cast back: int8 + int8 widens
    widened = source(np.int8, np.int64)
    assert "acc_t(x[" in widened
    narrow = source(np.int16, np.int16)  # rides in an int32 through shuffles
    assert "acc_t(x[" not in narrow
    if "shfl" in narrow:
        assert "carry_t(" in narrow


@pytest.mark.parametrize("variant", VARIANTS)
def test_generated_source_is_valid_python_with_literals(variant):
    from pyreduce.dialect import CUDA, SIM
    from pyreduce.variants import generate

    v = pyreduce.variants[variant]
    for warp in WARP_SIZES:
        for block in BLOCK_SIZES:
            if block % warp:
                continue
            for items in ITEMS_PER_THREAD:
                if items % v.items_multiple:
                    continue
                spec = KernelSpec(variant, np.int8, np.int64, ("builtin", "add"),
                                  block, warp, items)
                name, source = generate(spec, CUDA)
                assert name == f"pyreduce_{variant}_i1_i8_b{block}_w{warp}_i{items}"
                assert "${" not in source
                compile(source, f"<{spec.label}>", "exec")  # valid Python
                assert f"def {name}(x, n, chunk, out" in source
                # the fixed tree's one kernel keeps a full SM's blocks resident
                # (pairwise.SM_THREADS): its registers do not depend on the compiler
                bounds = (f"({block}, {max(1, 2048 // block)})" if v.fixed_tree
                          else f"{block}")
                assert f"@gpu.jit(launch_bounds={bounds}, lto=False)" in source
                sim_source = generate(spec, SIM)[1]
                assert "launch_bounds" not in sim_source and "lto=" not in sim_source
                assert "@gpu.jit" in sim_source
                # the shared array is sized by literals
                assert "gpu.shared.array(" in source
                if v.factory.__name__.endswith("warp_shuffle"):
                    assert f"tid % {warp}" in source
                    assert f"gpu.shared.array({block // warp}, acc_t)" in source
                    var = "acc" if v.commutative_only else "v"  # lanes shuffle once
                    # log2(warp) shuffles, deltas 1 << s: a loop of literal bounds
                    assert f"for {var}_s in range({warp.bit_length() - 1}):" in source
                    assert f"({var}), {var}_d))" in source
                elif v.factory.__name__.endswith("pairwise"):
                    # a node per warp, and a stack of nodes per warp
                    assert f"tid % {warp}" in source
                    assert f"roots = gpu.shared.array({block // warp}, acc_t)" in source
                    assert f"for v0_s in range({warp.bit_length() - 1}):" in source
                    assert "(v0), v0_d))" in source
                else:
                    slots = block * v.options.shared_factor
                    assert f"gpu.shared.array({slots}, acc_t)" in source
                # a thread's items: a loop of literal bounds (NVVM unrolls it)
                run = items // v.items_multiple
                if run > 1:
                    assert f"in range(1, {run}):" in source or f"[i + {run - 1}]" in source
                assert f"x[i + {items}]" not in source


def test_variant_source():
    for name in pyreduce.variants:
        src = pyreduce.variant_source(name, "float32", block_size=64)
        assert "gpu.shared.array(" in src and f"pyreduce_{name}_f4_f4_b64" in src
    assert "tid % (2 * s) == 0" in pyreduce.variant_source("naive", "int32", block_size=64)
    with pytest.raises(ValueError, match="unknown variant"):
        pyreduce.variant_source("bogus")


def test_variant_registry():
    from pyreduce.variants import LAYOUTS

    assert set(pyreduce.variants) >= {"shared_tree", "warp_shuffle"}
    steps = sorted(v.step for v in pyreduce.variants.values() if v.step is not None)
    assert steps == list(range(1, len(steps) + 1))  # the tutorial's sequence, no gaps
    for name, v in pyreduce.variants.items():
        assert v.name == name and callable(v.build) and v.description
        assert v.layout in LAYOUTS
        assert v.default_items is None or v.default_items in ITEMS_PER_THREAD
        assert v.default_items is None or v.default_items % v.items_multiple == 0
    # four reorder (docs/semantics.md): the single and two passes with lane
    # accumulators, and with striped block tiles
    assert REORDERING == ["last_block_lanes", "last_block_striped", "warp_shuffle_striped",
                          "warp_shuffle_lanes"]
    for name in REORDERING:
        assert pyreduce.variants[name].layout == (
            "single_pass" if name.startswith("last_block") else "two_pass")


def test_reordering_variant_refuses_user_ops():
    """A variant that declares ``commutative_only`` is refused for user ops (they
    are never reordered), a jitted one included, and used for the built-ins."""
    if "sim" not in backends.available() and "cuda" not in backends.available():
        pytest.skip("needs a device backend")

    be = "sim" if "sim" in backends.available() else "cuda"
    x = np.arange(1, 200, dtype=np.int64)
    for variant in REORDERING:
        for op in (last_nonzero, lambda a, b: a + b):
            with pytest.raises(ValueError, match="commutative"):
                pyreduce.reduce(x, op, backend=be, variant=variant)
        assert pyreduce.reduce(x, "add", backend=be, variant=variant) == x.sum()


# --------------------------------------------------------------------------
# explain


@pytest.mark.parametrize("variant", VARIANTS)
def test_explain_on_device_backends(gpu_backend, variant):
    warp = 64 if gpu_backend == "sim" else 32
    v = pyreduce.variants[variant]
    x = np.arange(3000, dtype=np.float32)
    tuning = Tuning(variant=variant, block_size=128, warp_size=warp, items_per_thread=4,
                    max_blocks=3)
    e = pyreduce.explain(x, "add", backend=gpu_backend, tuning=tuning)
    assert e.backend == gpu_backend
    assert e.result == pyreduce.reduce(x, "add", backend=gpu_backend, tuning=tuning)
    assert e.result == x.sum(dtype=np.float64)
    plan = e.plan
    assert plan.spec.variant == variant and plan.layout == v.layout
    assert (plan.spec.block, plan.spec.warp, plan.spec.items) == (128, warp, 4)
    # a fresh contiguous copy is 16-byte aligned: four float32 per vector load
    assert plan.spec.vector == 4
    assert plan.grid == 3 and plan.n == 3000 and plan.chunk == 1024
    first = e.kernels[0]
    assert first.spec == plan.spec
    assert first.name == f"pyreduce_{variant}_f4_f4_b128_w{warp}_i4_v4"
    if v.layout == "single_pass":
        assert plan.passes == 1 and len(e.kernels) == 1
    else:
        assert plan.passes == 2
        # a float32 first pass's partials are read as they are: the same kernel
        # finishes (pyreduce.planner.reads_partials)
        assert len(e.kernels) == 1
        assert e.kernels[-1].spec == plan.finish
    for k in e.kernels:
        assert f"def {k.name}(x, n, chunk, out" in k.source
        assert "gpu.shared.array(" in k.source
        if v.factory.__name__.endswith("warp_shuffle"):
            assert f"tid % {warp}" in k.source
    text = str(e)
    assert f"backend: {gpu_backend}" in text
    assert plan.spec.label in text and "grid 3 x 128 threads" in text
    assert first.source.strip() in text
    assert repr(e.result) in text
    if gpu_backend == "sim":
        assert e.device == "CUDA simulator"
        for k in e.kernels:
            assert "not known" in e.resources[k.name]
        assert "not known on the sim backend" in text
    else:
        for k in e.kernels:
            r = e.resources[k.name]
            assert r["registers"] > 0 and r["shared_bytes"] > 0
            assert 0 < r["occupancy"] <= 1 and r["blocks_per_sm"] >= 1


def test_explain_single_pass_and_initial(gpu_backend):
    x = np.arange(10, dtype=np.int64)
    e = pyreduce.explain(x, last_nonzero, backend=gpu_backend)
    assert e.plan.passes == 1 and len(e.kernels) == 1 and e.result == 9
    # the default is single-pass: an initial value travels with the block partials
    e = pyreduce.explain(x, last_nonzero, backend=gpu_backend, initial=3)
    assert e.plan.layout == "single_pass"
    assert e.plan.passes == 1 and len(e.kernels) == 1 and e.result == 9
    # two-pass: an initial value forces a finishing pass (by the same kernel: int64
    # partials of int64 elements are read as they are)
    e = pyreduce.explain(x, last_nonzero, backend=gpu_backend, initial=3, variant="warp_shuffle")
    assert e.plan.passes == 2 and len(e.kernels) == 1 and e.result == 9
    e = pyreduce.explain(np.zeros(10, np.int64), last_nonzero, backend=gpu_backend,
                         initial=3)
    assert e.result == 3


def test_explain_device_input(gpu_backend):
    from numba import cuda

    d = cuda.to_device(np.arange(12.0).reshape(3, 4).T)
    e = pyreduce.explain(d, lambda a, b: b, backend=gpu_backend)
    assert e.result == 11.0 and e.plan.n == 12


def test_explain_on_cpu_and_empty():
    e = pyreduce.explain(np.arange(100.0), "max", backend="cpu")
    assert e.backend == "cpu" and e.device == "host CPU"
    assert e.result == 99.0 and e.plan is None and e.kernels == []
    assert "backend: cpu" in str(e) and "99.0" in str(e)
    for be in backends.available():
        e = pyreduce.explain(np.zeros(0), "add", backend=be)
        assert e.result == 0.0 and e.plan is None
    with pytest.raises(ValueError, match="empty"):
        pyreduce.explain(np.zeros(0), "max", backend="cpu")


def test_same_spec_different_sizes_build_nothing_new(gpu_backend):
    tuning = Tuning(block_size=64, items_per_thread=2, max_blocks=4)
    x = affine_data(2000)
    pyreduce.reduce(x, affine, backend=gpu_backend, tuning=tuning)
    pyreduce.reduce(x[:3], affine, backend=gpu_backend, initial=1, tuning=tuning)
    builds = pyreduce.cache_info().builds
    for n in (1, 7, 128, 129, 600, 2000):
        assert int(pyreduce.reduce(x[:n], affine, backend=gpu_backend, tuning=tuning)) == \
            functools.reduce(affine, x[:n].tolist())
    assert pyreduce.cache_info().builds == builds
