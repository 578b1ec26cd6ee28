"""``deterministic=True`` and ``pyreduce.reference``: one fixed tree, the same bits on
every backend and for every tuning.

``reference`` is checked against the tree's recursive definition (written out here,
one scalar operation at a time) and against ``functools.reduce`` for exactly
associative operators; the kernels (``sim`` here, ``cuda`` on a GPU) and the ``cpu``
backend are then compared with ``reference`` bit for bit, across block sizes, items
per thread, warp sizes 32 and 64, grids and sizes around every edge.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from pyreduce import backends
from pyreduce.deterministic import LEAF, rounding_depth
from pyreduce.driver import Ref, schedule
from pyreduce.ops import as_monoid
from pyreduce.planner import DeviceInfo, Tuning, fixed_tree_layout, make_plan
from oracles import affine, affine_data, last_nonzero

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SIM = "sim" in backends.available()
needs_sim = pytest.mark.skipif(not SIM, reason="CUDA simulator not enabled")

# (warp, block, items, max_blocks) for the simulator: every thread is a Python thread
SIM_TUNINGS = [(32, 32, 4, None), (32, 64, 8, 3), (64, 64, 4, 2), (64, 128, 16, 1),
               (32, 64, 16, 2), (64, 64, 8, None)]


def tuning(w, b, i, g):
    """The keywords of a call with warp ``w``, block ``b``, items ``i``, grid bound ``g``."""
    return dict(tuning=Tuning(warp_size=w, block_size=b, items_per_thread=i, max_blocks=g))


def edges(w, b, i, g):
    """Sizes around a leaf, a lane, a warp tile, a tile and a grid of tiles."""
    tile, g = b * i, g or 2
    around = {1, LEAF, w * i, tile, g * tile, 2 * g * tile}
    return sorted({m + d for m in around for d in (-1, 0, 1) if m + d >= 1}
                  | {LEAF * w + 1, tile + w * i + 3})


def tree_by_definition(x, op, acc):
    """The tree of docs/deterministic.md from its recursive form: leaves of LEAF
    elements folded left to right, and a span of m > 1 leaves split after the
    largest power of two below m. One scalar operation at a time."""
    acc = np.dtype(acc)
    values = [acc.type(v) for v in np.ravel(x)]
    leaves = []
    for j in range(0, len(values), LEAF):
        leaf = values[j]
        for v in values[j + 1:j + LEAF]:
            leaf = acc.type(op(leaf, v))
        leaves.append(leaf)

    def node(lo, m):
        if m == 1:
            return leaves[lo]
        h = 1 << ((m - 1).bit_length() - 1)
        return acc.type(op(node(lo, h), node(lo + h, m - h)))

    return node(0, len(leaves))


def same_bits(a, b) -> bool:
    """Equal bit for bit; NaN equals NaN (payloads differ between devices)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f" and np.isnan(a) and np.isnan(b):
        return True
    return a.tobytes() == b.tobytes()


def data(rng, n, dt, kind="normal"):
    if kind == "products":  # near 1: a product of thousands stays finite
        return (1 + rng.standard_normal(n) / 64).astype(dt)
    scale = 10.0 ** rng.integers(-3, 4)
    return (rng.standard_normal(n) * scale + rng.integers(-2, 3) * scale).astype(dt)


# --------------------------------------------------------------------------
# reference: the specification


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_reference_is_the_defined_tree(dt):
    rng = np.random.default_rng(1)
    add, mul = (lambda a, b: a + b), (lambda a, b: a * b)
    for n in [*range(1, 70), 127, 128, 129, 255, 256, 257, 1000, 1025]:
        x = data(rng, n, dt)
        assert same_bits(pyreduce.reference(x, "add"), tree_by_definition(x, add, dt)), n
        y = data(rng, n, dt, "products")
        assert same_bits(pyreduce.reference(y, np.multiply), tree_by_definition(y, mul, dt))
    # a user op goes through the Numba path, a built-in through NumPy: the same bits
    x = data(rng, 5000, dt)
    assert same_bits(pyreduce.reference(x, add), pyreduce.reference(x, "add"))


def test_reference_keeps_order():
    for n in [1, 2, 3, 4, 5, 17, 64, 100, 1000]:
        x = affine_data(n, seed=n)
        assert int(pyreduce.reference(x, affine)) == functools.reduce(affine, x.tolist())
        init = int(affine_data(1, seed=n + 1)[0])
        assert int(pyreduce.reference(x, affine, initial=init)) == \
            functools.reduce(affine, x.tolist(), init)
        z = np.where(np.arange(n) % 3 == 1, np.arange(n), 0).astype(np.int32)
        assert pyreduce.reference(z, last_nonzero) == functools.reduce(last_nonzero, z)


def test_reference_semantics_like_reduce():
    x = np.arange(12, dtype=np.int16).reshape(3, 4).T  # C order of the view
    assert pyreduce.reference(x, lambda a, b: b) == x.ravel()[-1]
    assert pyreduce.reference(np.array([200, 100], np.uint8), "add").dtype == np.uint8
    assert pyreduce.reference(np.array([200, 100], np.uint8), "add", dtype=np.uint64) == 300
    assert pyreduce.reference(np.zeros(0), "add") == 0.0
    assert pyreduce.reference(np.zeros(0), "max", initial=3.0) == 3.0
    assert bool(pyreduce.reference(np.array([0.0, 2.0]), np.logical_or))
    assert pyreduce.reference(np.array([1.0, 2.0]), "add", initial=-3.0) == 0.0
    with pytest.raises(ValueError, match="empty"):
        pyreduce.reference(np.zeros(0), "max")
    with pytest.raises(TypeError, match="initial"):
        pyreduce.reference(np.arange(3, dtype=np.int8), "add", initial=1000)
    assert pyreduce.reference([1.0, 2.0], "add") == 3.0  # as NumPy makes the array
    with pytest.raises(TypeError, match="expected an array"):
        pyreduce.reference("12", "add")
    with pytest.raises(TypeError, match="could not be compiled"):
        pyreduce.reference(np.arange(3.0), lambda a, b: (a, b))
    before = x.copy()
    pyreduce.reference(x, "add")
    assert np.array_equal(x, before)


def test_signed_zero_is_passed_up_not_padded():
    """-0.0 + 0.0 is +0.0: a tree padded with the identity 0.0 would lose the sign
    of an all -0.0 sum; passing nodes up keeps it, on every backend."""
    for n in (1, 3, 5, 6, 7, 1000):
        z = np.full(n, -0.0, np.float32)
        assert np.signbit(pyreduce.reference(z, "add"))
        assert np.signbit(pyreduce.sum(z, deterministic=True, backend="cpu"))
    z = np.array([-0.0, 0.0, -0.0, 0.0, 0.0, -0.0], np.float64)
    for op in ("max", "min", "nanmax", "nanmin"):
        want = tree_by_definition(z, as_monoid(op, z.dtype).fn, z.dtype)
        assert same_bits(pyreduce.reference(z, op), want), op


def test_rounding_depth():
    assert [rounding_depth(n) for n in (1, 2, 4, 5, 8, 9, 16, 17)] == [0, 1, 3, 4, 4, 5, 5, 6]
    for k in range(2, 40):
        assert rounding_depth(2**k) == k + 1  # one more than a tree without leaves


@settings(deadline=None)
@given(n=st.integers(1, 20000), seed=st.integers(0, 2**32 - 1),
       dt=st.sampled_from([np.float32, np.float64]),
       kind=st.sampled_from(["normal", "offset", "one large"]))
def test_error_bound_holds(n, seed, dt, kind):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    if kind == "offset":
        x += 1e4
    elif kind == "one large":
        x[0] = 1e8
    x = x.astype(dt)
    exact = math.fsum(x.astype(np.float64).tolist())
    d, u = rounding_depth(n), np.finfo(dt).eps / 2
    bound = d * u / (1 - d * u) * float(np.abs(x.astype(np.float64)).sum())
    # fsum rounds the exact sum once in float64: allow for it on float64 data
    slack = 2 * abs(exact) * np.finfo(np.float64).eps
    assert abs(float(pyreduce.reference(x, "add")) - exact) <= bound + slack


def test_tree_beats_a_left_fold():
    """One large value, then many small ones: a float32 left fold loses every small
    value (2**25 + 1 rounds to 2**25); the tree loses only those in the large value's
    leaf and adds the others up first."""
    x = np.full(2**16, 1.0, np.float32)
    x[0] = 2.0**25
    exact = 2.0**25 + 2**16 - 1
    fold = functools.reduce(lambda a, b: np.float32(a + b), x)
    assert float(fold) == 2.0**25
    assert float(pyreduce.reference(x, "add")) == exact - (LEAF - 1)


# --------------------------------------------------------------------------
# The API


def test_cpu_backend_is_the_reference():
    rng = np.random.default_rng(2)
    x = data(rng, 3001, np.float32)
    for op in ("add", lambda a, b: a + b):
        got = pyreduce.reduce(x, op, deterministic=True, backend="cpu")
        assert same_bits(got, pyreduce.reference(x, op))
    got = pyreduce.reduce(x, "add", deterministic=True, backend="cpu", initial=1.5)
    assert same_bits(got, pyreduce.reference(x, "add", initial=1.5))
    # the named reductions take it too, with their accumulator rule
    i8 = np.arange(-100, 100, dtype=np.int8)
    assert pyreduce.sum(i8, deterministic=True, backend="cpu") == i8.sum(dtype=np.int64)
    assert pyreduce.max(x, deterministic=True, backend="cpu") == x.max()
    # variant="pairwise" is the same choice
    assert same_bits(pyreduce.sum(x, variant="pairwise", backend="cpu"),
                     pyreduce.reference(x, "add"))


def test_maps_and_bfloat16_follow_the_tree():
    """An element map and bfloat16 loads happen before the leaves: the tree and its
    bits are the same on every backend and tuning."""
    rng = np.random.default_rng(9)
    x = data(rng, 777, np.float32)
    square = lambda i, v: np.float64(v) * v  # noqa: E731
    want = pyreduce.reference(x, "add", map=square)
    assert abs(want - (x.astype(np.float64) ** 2).sum()) < 1e-9 * want
    runs = [("cpu", {})] + ([("sim", tuning(*t)) for t in SIM_TUNINGS[:3]] if SIM else [])
    for backend, tune in runs:
        got = pyreduce.reduce(x, "add", map=square, deterministic=True, backend=backend, **tune)
        assert same_bits(got, want), (backend, tune)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    b = x.astype(ml_dtypes.bfloat16)
    want = pyreduce.reference(b, "add")
    assert same_bits(want, pyreduce.reference(b.astype(np.float32), "add"))
    for backend, tune in runs:
        assert same_bits(pyreduce.sum(b, deterministic=True, backend=backend, **tune), want)
    with pytest.raises(ValueError, match="scalar accumulators"):
        pyreduce.reduce(x, lambda a, b: a, map=lambda i, v: (v, i), deterministic=True,
                        backend="cpu")


def test_argument_errors():
    x = np.arange(10.0)
    with pytest.raises(ValueError, match="deterministic=True .* variant='warp_shuffle'"):
        pyreduce.sum(x, deterministic=True, variant="warp_shuffle", backend="cpu")
    with pytest.raises(TypeError, match="deterministic= must be True or False"):
        pyreduce.sum(x, deterministic="yes", backend="cpu")
    # deterministic=False leaves the choice alone
    assert pyreduce.sum(x, deterministic=False, variant="naive", backend="cpu") == 45.0


SIMDEV = DeviceInfo("CUDA simulator", ("sim",), 2, 64, 1, 32, 64)
H100 = DeviceInfo("H100", ("cuda", 0, (9, 0)), 132, 2048, 32, 32, vector_bytes=16)
# as the backend describes an H200: its L2 size known, so past it the measured
# layout of the fixed tree (planner.fixed_tree_layout) applies
H200_L2 = DeviceInfo("H200", ("cuda", 0, (9, 0)), 132, 2048, 32, 32, vector_bytes=16,
                     l2_bytes=60 * 2**20, auto_block=512)


@settings(deadline=None)
@given(n=st.integers(1, 2**34), device=st.sampled_from([SIMDEV, H100, H200_L2]),
       block=st.sampled_from([None, 32, 64, 256, 1024]), items=st.sampled_from([None, 4, 8, 16]),
       max_blocks=st.sampled_from([None, 1, 3, 1000]), extra=st.sampled_from([0, 1]))
def test_plan_blocks_are_aligned_subtrees(n, device, block, items, max_blocks, extra):
    f4 = np.dtype(np.float32)
    plan = make_plan(n, f4, f4, ("builtin", "add"), device,
                     Tuning(variant="pairwise", block_size=block, items_per_thread=items,
                            max_blocks=max_blocks), extra)
    tiles = plan.chunk // plan.spec.tile
    assert plan.chunk % plan.spec.tile == 0 and tiles & (tiles - 1) == 0
    assert plan.fixed_tree and plan.spec.items % LEAF == 0
    assert (plan.grid - 1) * plan.chunk < n <= plan.grid * plan.chunk
    waves = 8 if fixed_tree_layout(f4, n, device) is not None else 1
    assert plan.grid <= (max_blocks or waves * device.max_grid(plan.spec.block))
    found = schedule(plan)
    # one launch: the last block computes the tree over the blocks' nodes, then
    # combines the initial value (the first of the partials) after its root
    assert plan.layout == "single_pass" and plan.passes == len(found.steps) == 1
    args = found.steps[0].args
    assert args[5] == extra and args[4] == Ref("partials", 0, plan.grid + extra)
    assert found.initial == (Ref("partials", 0, 1) if extra else None)


@pytest.mark.parametrize("dt", [np.int16, np.float32, np.int32, np.float64, np.complex64],
                         ids=lambda t: np.dtype(t).name)
def test_fixed_tree_layout_past_the_l2(dt):
    """Past the L2 cache of a device that knows its size, the fixed tree runs
    the layout measured for it: 16 items of 4-byte elements in blocks of 512
    on up to 8 waves; float64 4 items, about 16 tiles a block on one to
    8 waves; other sizes and complex values the variant's defaults. Inside the cache, and where
    the L2 is unknown, the variant's defaults (4 items, the device's block, one
    wave). The caller's choices win, one by one."""
    dt = np.dtype(dt)
    l2, add = H200_L2.l2_bytes, ("builtin", "add")
    pairwise = Tuning(variant="pairwise")

    def plan(nbytes, device=H200_L2, tuning=pairwise):
        return make_plan(nbytes // dt.itemsize, dt, dt, add, device, tuning, align=16)

    for small in (plan(l2), plan(40 * l2, H100), plan(4096)):
        assert (small.spec.block, small.spec.items) == (256, 4)
        assert small.grid <= H200_L2.max_grid(256)
    wave = H200_L2.max_grid(512)
    for nbytes in (l2 + 4096, 2 * l2, 5 * l2, 80 * l2):
        p = plan(nbytes)
        tiles = -(-p.n // p.spec.tile)
        if dt.kind == "c" or dt.itemsize == 2:
            assert (p.spec.block, p.spec.items) == (256, 4)
            continue
        if dt.itemsize == 8:
            assert (p.spec.block, p.spec.items) == (512, 4)
            bound = min(8 * wave, max(wave, -(-tiles // 16)))
        else:
            assert (p.spec.block, p.spec.items) == (512, 16)
            bound = 8 * wave
        per_block = -(-tiles // min(tiles, bound))
        assert p.chunk // p.spec.tile == 1 << (per_block - 1).bit_length(), nbytes
        assert p.fixed_tree and p.layout == "single_pass"
    big = 80 * l2
    assert plan(big, tuning=pairwise.replace(block_size=128)).spec.block == 128
    assert plan(big, tuning=pairwise.replace(items_per_thread=8)).spec.items == 8
    assert plan(big, tuning=pairwise.replace(max_blocks=7)).grid <= 7


def test_items_must_hold_whole_leaves():
    f4 = np.dtype(np.float32)
    for items in (1, 2):
        with pytest.raises(ValueError, match=f"multiple of {LEAF}"):
            make_plan(1000, f4, f4, "k", SIMDEV,
                      Tuning(variant="pairwise", block_size=64, items_per_thread=items))


# --------------------------------------------------------------------------
# The kernels in the simulator, bit for bit against reference


def sim_sum(x, op, w, b, i, g, **kwargs):
    return pyreduce.reduce(x, op, deterministic=True, backend="sim", **tuning(w, b, i, g),
                           **kwargs)


@needs_sim
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_sim_every_edge_bitwise(dt):
    rng = np.random.default_rng(3)
    for w, b, i, g in SIM_TUNINGS[:3]:
        for n in edges(w, b, i, g):
            x = data(rng, n, dt)
            assert same_bits(sim_sum(x, "add", w, b, i, g), pyreduce.reference(x, "add")), \
                (w, b, i, g, n)


@needs_sim
@settings(deadline=None)
@given(t=st.sampled_from(SIM_TUNINGS), seed=st.integers(0, 2**32 - 1),
       dt=st.sampled_from([np.float32, np.float64]), op=st.sampled_from(["add", "mul"]),
       where=st.sampled_from(["edge", "any"]), data_=st.data())
def test_sim_matches_reference_for_any_tuning(t, seed, dt, op, where, data_):
    rng = np.random.default_rng(seed)
    sizes = edges(*t) if where == "edge" else None
    n = data_.draw(st.sampled_from(sizes) if sizes else st.integers(1, 1500), label="n")
    x = data(rng, n, dt, "products" if op == "mul" else "normal")
    init = data_.draw(st.sampled_from([None, 0.75]), label="initial")
    want = pyreduce.reference(x, op, initial=init)
    assert same_bits(sim_sum(x, op, *t, initial=init), want)


@needs_sim
def test_sim_same_bits_for_every_tuning_and_the_cpu():
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(2500) * 1e3).astype(np.float32)
    results = {t: sim_sum(x, "add", *t) for t in SIM_TUNINGS}
    results["cpu"] = pyreduce.sum(x, deterministic=True, backend="cpu")
    assert len({r.tobytes() for r in results.values()}) == 1, results
    # the default kernel's grouping differs: its result need not (and here does not)
    # equal the tree's in every bit; this is what makes the check above mean something
    plain = {pyreduce.sum(x, backend="sim", **tuning(*t)).tobytes() for t in SIM_TUNINGS}
    assert len(plain | {results["cpu"].tobytes()}) > 1


@needs_sim
def test_sim_keeps_order_of_non_commutative_ops():
    for w, b, i, g in SIM_TUNINGS[1:3]:
        for n in edges(w, b, i, g)[::2]:
            x = affine_data(n, seed=n)
            init = int(affine_data(1, seed=n + 7)[0]) if n % 2 else None
            want = functools.reduce(affine, x.tolist(), *([] if init is None else [init]))
            assert int(sim_sum(x, affine, w, b, i, g, initial=init)) == want, (w, b, i, g, n)
    z = np.zeros(777, np.int64)
    z[[5, 300, 700]] = [4, 9, 2]
    assert sim_sum(z, last_nonzero, 64, 64, 8, 3) == 2


@needs_sim
@pytest.mark.parametrize("w", [32, 64])
def test_sim_long_warp_spans(w):
    """One block of one warp walks many warp tiles: its stack sees every pattern of
    merges, and the fold from the top down every count of tiles up to 13."""
    rng = np.random.default_rng(w)
    wtile = w * LEAF
    for tiles in range(1, 14):
        n = (tiles - 1) * wtile + (wtile if tiles % 3 else 1 + tiles)
        x = affine_data(n, seed=n)
        assert int(sim_sum(x, affine, w, w, LEAF, 1)) == functools.reduce(affine, x.tolist())
        y = data(rng, n, np.float32)
        assert same_bits(sim_sum(y, "add", w, w, LEAF, 1), pyreduce.reference(y, "add")), n


@needs_sim
def test_sim_selection_ops_nan_and_signed_zero():
    rng = np.random.default_rng(5)
    x = np.where(rng.random(700) < 0.5, -0.0, 0.0)
    x[[3, 400]] = np.nan
    for op in ("max", "nanmax", "min", "nanmin", "add"):
        got = sim_sum(x, op, 32, 64, 8, 3)
        assert same_bits(got, pyreduce.reference(x, op)), op
    z = np.full(300, -0.0, np.float32)
    assert np.signbit(sim_sum(z, "add", 64, 64, 4, 2))


@needs_sim
def test_sim_device_input_results_and_input_untouched():
    from numba import cuda

    rng = np.random.default_rng(6)
    x = data(rng, 1000, np.float32)
    d = cuda.to_device(x)
    want = pyreduce.reference(x, "add", initial=2.0)
    assert same_bits(sim_sum(d, "add", 32, 64, 8, 2, initial=2.0), want)
    out = cuda.device_array(1, np.float32)
    sim_sum(d, "add", 32, 64, 8, 2, initial=2.0, out=out)
    assert same_bits(out.copy_to_host()[0], want)
    assert np.array_equal(d.copy_to_host(), x)
    strided = data(rng, 3000, np.float64)[::3]  # no vector loads
    assert same_bits(sim_sum(strided, "add", 64, 64, 8, None), pyreduce.reference(strided, "add"))


@needs_sim
def test_explain_deterministic():
    x = np.arange(3000, dtype=np.float32)
    e = pyreduce.explain(x, "add", deterministic=True, backend="sim",
                         tuning=Tuning(block_size=64, items_per_thread=8, max_blocks=3))
    assert e.plan.spec.variant == "pairwise" and e.plan.fixed_tree
    assert e.plan.chunk == 1024 and e.plan.grid == 3  # 2 tiles per block, a power of two
    assert same_bits(e.result, pyreduce.reference(x, "add"))
    assert "stack = gpu.shared.array(" in e.kernels[0].source


# --------------------------------------------------------------------------
# A GPU (NUMBA_ENABLE_CUDASIM=0): large sizes, every block size, bit for bit


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_cuda_bitwise_large(dt):
    from numba import cuda

    rng = np.random.default_rng(7)
    for n in (2**24 + 7, 1000003, 4097):
        x = data(rng, n, dt)
        want = pyreduce.reference(x, "add")
        d = cuda.to_device(x)
        for b in (32, 128, 256, 512, 1024):
            for i in (4, 8, 16):
                for g in (None, 1, 7, 10**6):
                    got = pyreduce.sum(d, deterministic=True, tuning=Tuning(
                        block_size=b, items_per_thread=i, max_blocks=g))
                    assert same_bits(got, want), (n, b, i, g)
        assert same_bits(pyreduce.sum(d[1:], deterministic=True),  # no vector loads
                         pyreduce.reference(x[1:], "add"))
        y = data(rng, n, dt, "products")
        assert same_bits(pyreduce.prod(y, deterministic=True), pyreduce.reference(y, "mul"))
        assert same_bits(pyreduce.sum(x, deterministic=True, initial=1.25),
                         pyreduce.reference(x, "add", initial=1.25))
