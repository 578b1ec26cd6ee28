"""Warp intrinsics in numba-cuda's CUDA simulator (pyreduce.backends.simwarp).

Shuffles and votes are checked against NumPy models of PTX ``shfl.sync`` and
``vote.sync`` for warp sizes 32 and 64 over blocks of several warps; misuse that
is undefined on hardware must raise, and deadlocks must raise instead of hanging.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # before numba.cuda is imported

import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from numba import cuda

from pyreduce.backends import simwarp

pytestmark = pytest.mark.sim


def _simulator_active():
    try:
        from numba.cuda.simulator import api
    except ImportError:
        return False
    return cuda.jit is api.jit


if not _simulator_active():
    pytest.skip("the CUDA simulator is not active in this process", allow_module_level=True)

simwarp.install()

BLOCK = 128  # 4 warps of 32, 2 of 64


@pytest.fixture(params=[32, 64], ids=["w32", "w64"])
def W(request):
    with simwarp.warp_size(request.param):
        yield request.param


def full(w):
    return (1 << w) - 1


def run_within(seconds, fn, *args):
    """Run fn(*args) in a thread; fail if it has not finished in time."""
    outcome = {}

    def target():
        try:
            outcome["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            outcome["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s: the launch hangs"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


# --------------------------------------------------------------------------
# Kernels


@cuda.jit
def shuffle_kernel(kind, mask, x, arg, out, types):
    t = cuda.threadIdx.x
    v = x[t]
    if kind == 0:
        r = cuda.shfl_sync(mask, v, arg[t])
    elif kind == 1:
        r = cuda.shfl_up_sync(mask, v, arg[t])
    elif kind == 2:
        r = cuda.shfl_down_sync(mask, v, arg[t])
    else:
        r = cuda.shfl_xor_sync(mask, v, arg[t])
    out[t] = r
    types.append(type(r))


@cuda.jit
def vote_kernel(mask, pred, ballot, anyv, allv, eqv, active, lt, types):
    t = cuda.threadIdx.x
    p = pred[t]
    b = cuda.ballot_sync(mask, p)
    ballot[t] = b
    anyv[t] = cuda.any_sync(mask, p)
    allv[t] = cuda.all_sync(mask, p)
    eqv[t] = cuda.eq_sync(mask, p)
    active[t] = cuda.activemask()
    lt[t] = cuda.lanemask_lt()
    types.append(type(b))


@cuda.jit
def last_nonzero_kernel(x, out):
    """Warp reduction with deltas 1, 2, 4, ...: lane 0 gets the ordered fold."""
    t = cuda.threadIdx.x
    w = cuda.warpsize
    lane = cuda.laneid
    base = (t // w) * w
    nlanes = min(w, cuda.blockDim.x - base)  # fewer in a partial last warp
    mask = (1 << nlanes) - 1
    v = x[cuda.blockIdx.x, t]
    d = 1
    while d < w:
        if d < nlanes:
            other = cuda.shfl_down_sync(mask, v, d if lane + d < nlanes else 0)
            if lane + d < nlanes:
                v = other if other != 0 else v  # op(a, b) = b if b != 0 else a
        d *= 2
    if lane == 0:
        out[cuda.blockIdx.x, t // w] = v


@cuda.jit
def block_sum_kernel(x, out, counts):
    """Warp shuffles, a barrier, then warp 0 reduces the warps' partials."""
    partials = cuda.shared.array(8, np.int64)
    t = cuda.threadIdx.x
    w = cuda.warpsize
    m = (1 << w) - 1
    v = x[cuda.blockIdx.x, t]
    d = 1
    while d < w:
        v += cuda.shfl_xor_sync(m, v, d)  # butterfly: every lane gets the sum
        d *= 2
    if cuda.laneid == 0:
        partials[t // w] = v
    cuda.syncthreads()
    nwarps = cuda.blockDim.x // w
    if t < w:
        v = partials[t] if t < nwarps else np.int64(0)
        d = 1
        while d < w:
            v += cuda.shfl_down_sync(m, v, d)
            d *= 2
        if t == 0:
            out[cuda.blockIdx.x] = v
    counts[cuda.blockIdx.x, 0] = cuda.syncthreads_count(x[cuda.blockIdx.x, t] > 0)
    counts[cuda.blockIdx.x, 1] = cuda.syncthreads_and(x[cuda.blockIdx.x, t] > -100)
    counts[cuda.blockIdx.x, 2] = cuda.syncthreads_or(x[cuda.blockIdx.x, t] > 1000)


@cuda.jit
def lanes_kernel(warpsize, laneid):
    t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
    warpsize[t] = cuda.warpsize
    laneid[t] = cuda.laneid


# --------------------------------------------------------------------------
# The install itself


def test_smoke_install_and_shuffle():
    """Fails loudly if numba-cuda's simulator internals changed under us."""
    simwarp.install()  # idempotent
    assert simwarp.is_installed()
    from numba.cuda.simulator import kernel

    assert kernel.FakeCUDAModule.__name__ == "WarpFakeCUDAModule"
    assert kernel.BlockManager.__name__ == "WarpBlockManager"
    x = np.arange(32, dtype=np.float32)
    out = np.zeros_like(x)
    with simwarp.warp_size(32):
        shuffle_kernel[1, 32](2, full(32), x, np.ones(32, np.int64), out, [])
    np.testing.assert_array_equal(out, np.r_[x[1:], x[31]])


def test_install_refuses_unsupported_version(monkeypatch):
    simwarp.uninstall()
    try:
        assert not simwarp.is_installed()
        monkeypatch.setattr(simwarp, "SUPPORTED_NUMBA_CUDA", ((0, 1), (0, 2)))
        with pytest.raises(RuntimeError, match=r"outside the versions.*>=0.1,<0.2"):
            simwarp.install()
    finally:
        monkeypatch.undo()
        simwarp.install()
    assert simwarp.is_installed()


def test_install_refuses_changed_internals(monkeypatch):
    from numba.cuda.simulator import kernel

    class ChangedBlockManager:
        def __init__(self, f, grid_dim, block_dim, debug, extra):
            pass

        def run(self, grid_point, *args):
            pass

    simwarp.uninstall()
    try:
        monkeypatch.setattr(kernel, "BlockManager", ChangedBlockManager)
        with pytest.raises(RuntimeError, match=r"internals changed.*BlockManager.__init__"):
            simwarp.install()
    finally:
        monkeypatch.undo()
        simwarp.install()
    assert simwarp.is_installed()


def test_install_without_simulator_raises():
    code = (
        "from pyreduce.backends import simwarp\n"
        "try:\n"
        "    simwarp.install()\n"
        "except RuntimeError as e:\n"
        "    print('ERROR', e)\n"
    )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert "ERROR the CUDA simulator is not active" in proc.stdout, proc.stdout + proc.stderr


def test_warp_size_setting():
    before = simwarp.get_warp_size()
    for w in (64, 32):
        with simwarp.warp_size(w):
            assert simwarp.get_warp_size() == w
        assert simwarp.get_warp_size() == before
    with pytest.raises(ValueError, match="warp size"):
        simwarp.set_warp_size(16)


@pytest.mark.parametrize("block", [(128, 1), (16, 8)], ids=["1d", "2d"])
def test_warpsize_and_laneid(W, block):
    n = block[0] * block[1]
    ws, lane = np.zeros(n, np.int64), np.zeros(n, np.int64)
    lanes_kernel[1, block](ws, lane)
    assert (ws == W).all()
    np.testing.assert_array_equal(lane, np.arange(n) % W)  # linear thread index


# --------------------------------------------------------------------------
# Shuffles against a NumPy model


def shuffle_model(kind, x, arg, w):
    """PTX shfl.sync over whole warps: the lane each lane reads, then gather."""
    t = np.arange(len(x))
    lane, base = t % w, t - t % w
    if kind == "idx":
        src = arg % w
    elif kind == "up":
        src = np.where(lane - arg >= 0, lane - arg, lane)
    elif kind == "down":
        src = np.where(lane + arg < w, lane + arg, lane)
    else:
        src = np.where(lane ^ arg < w, lane ^ arg, lane)
    return x[base + src]


KINDS = ["idx", "up", "down", "xor"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_shuffle_matches_model(W, kind, dtype):
    rng = np.random.default_rng([W, KINDS.index(kind), np.dtype(dtype).num])
    for trial in range(2):
        x = (rng.standard_normal(BLOCK) * 1000).astype(dtype)
        if kind == "idx":
            arg = rng.integers(-W, 3 * W, BLOCK)  # taken modulo the warp size
        elif kind == "xor":
            arg = rng.integers(0, 2 * W, BLOCK)  # lane ^ mask >= W: own value
        elif trial == 0:
            arg = np.repeat(rng.integers(0, W + 2, BLOCK // W), W)  # per warp
        else:
            arg = rng.integers(0, W + 2, BLOCK)  # per lane, as PTX allows
        out = np.zeros_like(x)
        types = []
        shuffle_kernel[1, BLOCK](KINDS.index(kind), full(W), x, arg, out, types)
        np.testing.assert_array_equal(out, shuffle_model(kind, x, arg, W))
        assert set(types) == {dtype}, "the result must keep the value's type"


def test_out_of_range_returns_own_value(W):
    x = np.arange(BLOCK, dtype=np.int64) * 10
    lane = np.arange(BLOCK) % W
    out = np.zeros_like(x)
    shuffle_kernel[1, BLOCK](2, full(W), x, np.full(BLOCK, W), out, [])  # down by W
    np.testing.assert_array_equal(out, x)
    shuffle_kernel[1, BLOCK](1, full(W), x, np.full(BLOCK, 1), out, [])  # up by 1
    np.testing.assert_array_equal(out[lane == 0], x[lane == 0])
    np.testing.assert_array_equal(out[lane > 0], x[np.flatnonzero(lane > 0) - 1])


def test_shuffle_rejects_types_numba_cannot_compile():
    x = np.arange(32, dtype=np.uint32)
    with pytest.raises(simwarp.WarpSimError, match="uint32 would not compile"):
        shuffle_kernel[1, 32](2, full(32), x, np.ones(32, np.int64), np.zeros_like(x), [])


# --------------------------------------------------------------------------
# Votes


def test_votes_match_model(W):
    rng = np.random.default_rng(W)
    lane = np.arange(BLOCK) % W
    preds = [rng.integers(0, 2, BLOCK), np.ones(BLOCK, np.int64), np.zeros(BLOCK, np.int64)]
    for pred in preds:
        outs = [np.zeros(BLOCK, np.uint64) for _ in range(3)]
        anyv, allv, eqv = (np.zeros(BLOCK, np.bool_) for _ in range(3))
        ballot, active, lt = outs
        types = []
        vote_kernel[1, BLOCK](full(W), pred, ballot, anyv, allv, eqv, active, lt, types)
        warps = pred.reshape(-1, W).astype(bool)
        bits = (warps.astype(np.uint64) << np.arange(W, dtype=np.uint64)).sum(axis=1)
        np.testing.assert_array_equal(ballot, np.repeat(bits, W))
        np.testing.assert_array_equal(anyv, np.repeat(warps.any(axis=1), W))
        np.testing.assert_array_equal(allv, np.repeat(warps.all(axis=1), W))
        np.testing.assert_array_equal(eqv, np.repeat(warps.all(axis=1) | ~warps.any(axis=1), W))
        np.testing.assert_array_equal(active, np.full(BLOCK, full(W), np.uint64))
        np.testing.assert_array_equal(lt, (np.uint64(1) << lane.astype(np.uint64)) - np.uint64(1))
        assert set(types) == {np.uint32 if W == 32 else np.uint64}


@cuda.jit
def half_ballot_kernel(pred, out):
    t = cuda.threadIdx.x
    half = cuda.warpsize // 2
    if cuda.laneid < half:
        out[t] = cuda.ballot_sync((1 << half) - 1, pred[t])


def test_ballot_of_half_warp(W):
    pred = np.random.default_rng(7).integers(0, 2, BLOCK)
    out = np.zeros(BLOCK, np.uint64)
    half_ballot_kernel[1, BLOCK](pred, out)
    halves = pred.reshape(-1, W)[:, : W // 2].astype(np.uint64)
    bits = (halves << np.arange(W // 2, dtype=np.uint64)).sum(axis=1)
    lane = np.arange(BLOCK) % W
    np.testing.assert_array_equal(out[lane < W // 2], np.repeat(bits, W // 2))
    assert (out[lane >= W // 2] == 0).all()


@cuda.jit
def early_return_kernel(n, x, masks, out):
    t = cuda.threadIdx.x
    if t >= n:
        return  # the usual tail guard
    m = cuda.activemask()
    masks[t] = m
    out[t] = cuda.shfl_xor_sync(m, x[t], 1)


def test_activemask_after_early_return(W):
    n = W + 6  # warp 0 complete, warp 1 keeps lanes 0-5
    x = np.arange(BLOCK, dtype=np.int64)
    masks = np.zeros(BLOCK, np.uint64)
    out = np.full(BLOCK, -1, np.int64)
    early_return_kernel[1, BLOCK](n, x, masks, out)
    np.testing.assert_array_equal(masks[:W], full(W))
    np.testing.assert_array_equal(masks[W:n], 0b111111)
    assert (masks[n:] == 0).all()
    np.testing.assert_array_equal(out[:n], x[:n] ^ 1)


@cuda.jit
def match_kernel(mask, x, any_out, all_out, all_pred):
    t = cuda.threadIdx.x
    any_out[t] = cuda.match_any_sync(mask, x[t])
    m, p = cuda.match_all_sync(mask, x[t] // 100)
    all_out[t] = m
    all_pred[t] = p


def test_match_any_and_all(W):
    x = np.random.default_rng(W).integers(0, 3, BLOCK)
    x[W] += 100  # warp 1: one lane differs in x // 100; warp 0: all equal
    any_out, all_out = np.zeros(BLOCK, np.uint64), np.zeros(BLOCK, np.uint64)
    all_pred = np.zeros(BLOCK, np.bool_)
    match_kernel[1, BLOCK](full(W), x, any_out, all_out, all_pred)
    lanes = np.arange(W, dtype=np.uint64)
    for w, row in enumerate(x.reshape(-1, W)):
        want = [((row == v).astype(np.uint64) << lanes).sum() for v in row]
        np.testing.assert_array_equal(any_out[w * W:(w + 1) * W], want)
    same = np.ones(BLOCK, bool)
    same[W:2 * W] = False
    np.testing.assert_array_equal(all_out, np.where(same, np.uint64(full(W)), np.uint64(0)))
    np.testing.assert_array_equal(all_pred, same)


@cuda.jit
def mixed_types_kernel(x, out, types):
    t = cuda.threadIdx.x
    v = x[t] if t % 2 else 0  # float32 in odd lanes, Python int in even ones
    r = cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)
    out[t] = r
    types.append(type(r))


def test_lanes_of_different_types_unify_like_numba():
    x = np.arange(32, dtype=np.float32) + 0.5
    out = np.zeros(32, np.float64)
    types = []
    with simwarp.warp_size(32):
        mixed_types_kernel[1, 32](x, out, types)
    np.testing.assert_array_equal(out[::2], x[1::2])  # not truncated to int
    assert set(types) == {np.float64}


# --------------------------------------------------------------------------
# Reductions: order, partial warps, barriers with warp calls


def last_nonzero(row):
    nz = row[row != 0]
    return nz[-1] if len(nz) else 0


@pytest.mark.parametrize("block", [BLOCK, BLOCK - 8], ids=["full", "partial-warp"])
def test_ordered_warp_reduction(W, block):
    rng = np.random.default_rng(block + W)
    blocks = 3
    x = rng.integers(1, 100, (blocks, block)) * (rng.random((blocks, block)) < 0.2)
    x[0, :] = 0  # a block of zeros: the fold is 0
    nwarps = -(-block // W)
    out = np.full((blocks, nwarps), -1, np.int64)
    last_nonzero_kernel[blocks, block](x, out)
    for b in range(blocks):
        for w in range(nwarps):
            assert out[b, w] == last_nonzero(x[b, w * W:(w + 1) * W]), (b, w)


def test_syncthreads_with_warp_calls(W):
    rng = np.random.default_rng(W)
    x = rng.integers(-50, 50, (2, BLOCK))
    out = np.zeros(2, np.int64)
    counts = np.zeros((2, 3), np.int64)
    block_sum_kernel[2, BLOCK](x, out, counts)
    np.testing.assert_array_equal(out, x.sum(axis=1))
    np.testing.assert_array_equal(counts[:, 0], (x > 0).sum(axis=1))
    np.testing.assert_array_equal(counts[:, 1:], [[1, 0], [1, 0]])


@cuda.jit(device=True)
def warp_sum(v):
    d = 1
    while d < cuda.warpsize:
        v += cuda.shfl_down_sync((1 << cuda.warpsize) - 1, v, d)
        d *= 2
    return v


@cuda.jit(debug=True)
def device_function_kernel(x, out):
    t = cuda.threadIdx.x
    cuda.syncwarp()  # default mask: the whole warp
    v = warp_sum(x[t])
    cuda.syncwarp((1 << cuda.warpsize) - 1)
    if cuda.laneid == 0:
        out[t // cuda.warpsize] = v


def test_device_function_and_syncwarp(W):
    x = np.random.default_rng(3).integers(-9, 9, BLOCK)
    out = np.zeros(BLOCK // W, np.int64)
    device_function_kernel[1, BLOCK](x, out)
    np.testing.assert_array_equal(out, x.reshape(-1, W).sum(axis=1))


# --------------------------------------------------------------------------
# Misuse raises


@cuda.jit
def full_mask_reduce(x, out):
    v = x[cuda.threadIdx.x]
    v += cuda.shfl_down_sync(0xFFFFFFFF, v, 1)
    out[cuda.threadIdx.x] = v


def test_partial_warp_full_mask_raises():
    x = np.ones(48, np.int64)  # warp 1 has lanes 0-15 only
    with simwarp.warp_size(32):
        with pytest.raises(simwarp.WarpSimError, match=r"names lanes 16-31, which do not exist"):
            full_mask_reduce[1, 48](x, np.zeros_like(x))


@cuda.jit
def read_outside_mask(x, out):
    t = cuda.threadIdx.x
    if cuda.laneid < 16:
        out[t] = cuda.shfl_down_sync(0xFFFF, x[t], 8)  # lanes 8-15 read 16-23


def test_read_from_non_participating_lane_raises():
    x = np.arange(32, dtype=np.int64)
    with pytest.raises(simwarp.WarpSimError,
                       match=r"reads lane (1[6-9]|2[0-3]), which is not in mask 0xffff"):
        read_outside_mask[1, 32](x, np.zeros_like(x))


@cuda.jit
def caller_outside_mask(x):
    cuda.shfl_down_sync(0xFFFF0000, x[cuda.threadIdx.x], 1)


def test_caller_outside_its_mask_raises():
    with pytest.raises(simwarp.WarpSimError, match="calling lane is not in the mask"):
        caller_outside_mask[1, 32](np.zeros(32, np.int64))


@cuda.jit
def exited_lanes(x, out):
    t = cuda.threadIdx.x
    if cuda.laneid >= 16:
        return
    out[t] = cuda.shfl_down_sync(0xFFFFFFFF, x[t], 1)


def test_mask_naming_exited_lanes_raises():
    x = np.arange(32, dtype=np.int64)
    with pytest.raises(simwarp.WarpSimError, match="exited"):
        run_within(10, exited_lanes[1, 32], x, np.zeros_like(x))


@cuda.jit
def shfl_against_syncthreads(x):
    t = cuda.threadIdx.x
    if cuda.laneid < 16:
        x[t] = cuda.shfl_down_sync(0xFFFFFFFF, x[t], 1)
    else:
        cuda.syncthreads()


def test_deadlock_raises_instead_of_hanging(monkeypatch):
    # The report must not call sys._current_frames(): on CPython 3.11 before
    # 3.11.9 it can deadlock the whole interpreter (gh-106883), which hung a
    # full test run here once.
    def forbidden():
        raise AssertionError("sys._current_frames() called")

    monkeypatch.setattr(sys, "_current_frames", forbidden)
    x = np.zeros(64, np.int64)
    start = time.monotonic()
    with pytest.raises(simwarp.WarpDeadlockError) as info:
        run_within(10, shfl_against_syncthreads[1, 64], x)
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert "lanes 0-15: shfl_down_sync(mask=0xffffffff) waiting for lanes 16-31" in message
    assert "lanes 16-31: syncthreads" in message
    assert "test_simwarp.py" in message  # where they wait
    assert "warp 1" in message


@cuda.jit
def shfl_against_ballot(x):
    t = cuda.threadIdx.x
    if cuda.laneid < 16:
        x[t] = cuda.shfl_down_sync(0xFFFFFFFF, x[t], 1)
    else:
        x[t] = cuda.ballot_sync(0xFFFFFFFF, x[t])


def test_different_warp_calls_raise():
    x = np.zeros(32, np.int64)
    with pytest.raises(simwarp.WarpSimError, match="must make the same call"):
        run_within(10, shfl_against_ballot[1, 32], x)


@cuda.jit
def raising_thread(x):
    t = cuda.threadIdx.x
    if t == 5:
        raise ValueError("boom")
    cuda.syncthreads()
    x[t] = cuda.shfl_xor_sync(0xFFFFFFFF, x[t], 1)


def test_exception_aborts_block_and_next_launch_works():
    x = np.arange(64, dtype=np.int64)
    with pytest.raises(ValueError, match=r"tid=\[5, 0, 0\].*boom"):
        run_within(10, raising_thread[1, 64], np.zeros(64, np.int64))
    x = np.arange(64, dtype=np.int64)
    ok = x.copy()
    full_mask_reduce[1, 64](x, ok)  # the pooled threads are usable again
    np.testing.assert_array_equal(ok[::2], x[::2] + x[1::2])
