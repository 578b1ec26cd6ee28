"""Tests that need a real CUDA GPU (run with ``NUMBA_ENABLE_CUDASIM=0``): large
sizes, CuPy / PyTorch / Numba device inputs and views, and inputs of more than
2**32 elements (``slow``)."""

from __future__ import annotations

import functools
import gc
import time

import numpy as np
import pytest

import pyreduce
from oracles import ONE_VALUE, ORDERED, WITH_AXIS, P, affine, first_nonzero, last_nonzero

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

VARIANTS = list(pyreduce.variants)


def cuda_module():
    from numba import cuda

    return cuda


# --------------------------------------------------------------------------
# Large sizes


@pytest.mark.parametrize("n", [2**20 + 1, 2**24])
@pytest.mark.parametrize("variant", VARIANTS)
def test_large_sizes(variant, n):
    rng = np.random.default_rng(n)
    x = np.arange(n, dtype=np.float64)
    assert pyreduce.sum(x, backend="cuda", variant=variant) == n * (n - 1) // 2
    i8 = rng.integers(-128, 128, n, dtype=np.int8)
    assert pyreduce.sum(i8, backend="cuda", variant=variant) == i8.sum(dtype=np.int64)
    sparse = np.zeros(n, np.int32)
    idx = np.sort(rng.choice(n, 50, replace=False))
    sparse[idx] = rng.integers(1, 10**6, 50)
    if variant in ORDERED:
        assert pyreduce.reduce(sparse, last_nonzero, backend="cuda", variant=variant) == \
            sparse[idx[-1]]
        assert pyreduce.reduce(sparse, first_nonzero, backend="cuda", variant=variant) == \
            sparse[idx[0]]
    assert pyreduce.sum(sparse, backend="cuda", variant=variant) == sparse.sum()
    f = rng.standard_normal(n).astype(np.float32)
    assert pyreduce.max(f, backend="cuda", variant=variant) == f.max()
    f[n - 2] = np.nan
    assert np.isnan(pyreduce.min(f, backend="cuda", variant=variant))


@pytest.mark.parametrize("variant", ORDERED)
@pytest.mark.parametrize("tuning", [
    pyreduce.Tuning(block_size=1024, items_per_thread=16),
    pyreduce.Tuning(block_size=32, items_per_thread=1),
    pyreduce.Tuning(block_size=256, items_per_thread=4, max_blocks=10**6),
    pyreduce.Tuning(block_size=512, items_per_thread=2, max_blocks=1),
], ids=repr)
def test_large_non_commutative(variant, tuning):
    multiple = pyreduce.variants[variant].items_multiple
    tuning = tuning.replace(variant=variant, items_per_thread=-(-tuning.items_per_thread
                                                                 // multiple) * multiple)
    n = 2**20 + 12345
    rng = np.random.default_rng(1)
    x = (rng.integers(1, P, n) * P + rng.integers(0, P, n)).astype(np.int64)
    want = functools.reduce(affine, x.tolist())
    got = pyreduce.reduce(x, affine, backend="cuda", tuning=tuning)
    assert int(got) == want


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int16], ids=lambda t: np.dtype(t).name)
def test_auto_kernels_in_and_past_the_l2_cache(dt):
    """``variant="auto"`` changes its items per thread and grid with the input's
    size against the L2 cache: order-sensitive ops and the maximum stay right in
    every band, from views that start 0-3 elements into an allocation, and so
    do the built-ins' sums and maxima, striped past the L2 where aligned (4-
    and 8-byte items)."""
    from pyreduce import backends

    cuda = cuda_module()
    device = backends.get("cuda").device()
    assert device.l2_bytes > 0 and device.auto_block == 512
    dt = np.dtype(dt)
    rng = np.random.default_rng(7)
    most = (2 * device.l2_bytes + 3 * 4096) // dt.itemsize
    host = np.zeros(most + 3, dt)
    hot = rng.choice(most, 4000, replace=False)
    host[hot] = rng.integers(1, 100, hot.size)
    whole = cuda.to_device(host)
    for nbytes in (device.l2_bytes // 3, device.l2_bytes + 4096, 2 * device.l2_bytes + 8192):
        n = nbytes // dt.itemsize + 5
        for offset in (0, 3):
            x, d = host[offset:offset + n], whole[offset:offset + n]
            nz = np.flatnonzero(x)
            e = pyreduce.explain(d, last_nonzero, backend="cuda")
            streams = nbytes > 2 * device.l2_bytes  # two-pass, four tiles a block
            assert e.plan.spec.variant == ("warp_shuffle_x2" if streams else "last_block")
            assert e.plan.spec.block == 512
            # past the cache: more than one wave of resident blocks
            assert (e.plan.grid > device.max_grid(512)) == (nbytes > device.l2_bytes)
            assert e.result == x[nz[-1]], (nbytes, offset)
            assert pyreduce.reduce(d, first_nonzero, backend="cuda") == x[nz[0]]
            assert pyreduce.max(d, backend="cuda") == x.max()
            # a built-in past the L2 reads block tiles as runs where its
            # vectors fit (the allocation's start), the ordered layout elsewhere
            b = pyreduce.explain(d, "add", dtype=np.int64, backend="cuda")
            assert b.result == x.sum(dtype=np.int64), (nbytes, offset)
            m = pyreduce.explain(d, "max", backend="cuda")
            striped = nbytes > device.l2_bytes and offset == 0 and dt.itemsize >= 4
            assert (m.plan.spec.variant == "last_block_striped") == striped, (nbytes, offset)
            assert m.result == x.max()
    assert np.array_equal(whole.copy_to_host(), host)


def test_half_precision_sums_in_and_past_the_l2_cache():
    """float16 and bfloat16 sums inside and past the L2 read block tiles as
    runs where a lane's items can be read as vectors of more than one item
    (planner.HALF_STRIPED_ITEMS), the two-pass layout elsewhere: the same
    float32 sum within its rounding bound, the maximum exactly, NaN and inf
    where an element has them, the input untouched."""
    import torch

    from pyreduce import backends

    device = backends.get("cuda").device()
    large = (device.l2_bytes + 3 * 8192) // 2 + 7
    rng = np.random.default_rng(11)
    host = rng.standard_normal(large + 3).astype(np.float32)
    for tdt in (torch.float16, torch.bfloat16):
        whole = torch.as_tensor(host, device="cuda").to(tdt)
        ref = whole.float().cpu().numpy().astype(np.float64)
        keep = whole.clone()
        for n in (1000, 3 * 8192 + 5, device.l2_bytes // 8, large):
            for offset in (0, 1, 2, 3, 4):  # 16-, 2-, 4-, 2- and 8-byte aligned
                x = whole[offset:offset + n]
                e = pyreduce.explain(x, "add", backend="cuda")
                striped = offset in (0, 2, 4)  # vectors of 8, 2 and 4 items
                assert (e.plan.spec.variant == "last_block_striped") == striped, offset
                want = ref[offset:offset + n].sum()
                bound = 1e-6 * np.abs(ref[offset:offset + n]).sum() + 1e-3
                got = float(pyreduce.sum(x, backend="cuda"))
                assert abs(got - want) <= bound, (tdt, n, offset)
                assert float(pyreduce.max(x, backend="cuda")) == ref[offset:offset + n].max()
        y = whole[:large].clone()
        y[large - 5] = float("inf")
        assert float(pyreduce.sum(y, backend="cuda")) == np.inf
        y[large // 2] = float("nan")
        assert np.isnan(float(pyreduce.sum(y, backend="cuda")))
        assert torch.equal(whole, keep)


def test_half_precision_means_in_and_past_the_l2_cache():
    """float16 and bfloat16 means inside the L2 fold their (count, sum) per
    lane in blocks of 256 on up to five blocks an SM (planner.HALF_MEAN), one
    launch that also finishes; past the L2 their own rule. Each is a float32
    tensor (docs/semantics.md): NumPy's float64 mean of the values rounded
    once, within a float32 run's rounding; NaN where an element is; the input
    untouched."""
    import torch

    from pyreduce import backends, structured
    from pyreduce.dtypes import BFLOAT16
    from pyreduce.planner import HALF_MEAN

    device = backends.get("cuda").device()
    large = device.l2_bytes // 2 + 3 * 4096 + 7
    rng = np.random.default_rng(12)
    host = (rng.standard_normal(large + 3) + 0.5).astype(np.float32)
    for tdt, dt in ((torch.float16, np.dtype(np.float16)), (torch.bfloat16, BFLOAT16)):
        whole = torch.as_tensor(host, device="cuda").to(tdt)
        ref = whole.float().cpu().numpy().astype(np.float64)
        keep = whole.clone()
        monoid = structured.moments_monoid(dt, "mean")
        for n in (1000, 3 * 4096 + 5, device.l2_bytes // 4, large):
            for offset in (0, 1, 3):
                x = whole[offset:offset + n]
                e = pyreduce.explain(x, monoid, backend="cuda")
                inside = n * 2 <= device.l2_bytes
                assert ((e.plan.spec.variant, e.plan.spec.block) ==
                        (HALF_MEAN.variant, HALF_MEAN.block)) == inside, (n, offset)
                want = ref[offset:offset + n].mean()
                got = pyreduce.mean(x, backend="cuda")
                assert got.dtype == torch.float32 and got.shape == ()
                tol = 2.0**-23 * abs(want) + 1e-6 * np.abs(ref[offset:offset + n]).mean()
                assert abs(float(got) - want) <= tol, (tdt, n, offset, float(got), want)
        y = whole[:large].clone()
        y[large // 3] = float("nan")
        assert np.isnan(float(pyreduce.mean(y[:device.l2_bytes // 4], backend="cuda")))
        assert np.isnan(float(pyreduce.mean(y, backend="cuda")))
        assert torch.equal(whole, keep)


# --------------------------------------------------------------------------
# Numba device arrays


def test_numba_device_arrays_and_views():
    cuda = cuda_module()
    host = np.arange(3 * 1000 * 7, dtype=np.float64).reshape(3, 1000, 7)
    d = cuda.to_device(host)
    views = {
        "c": (d, host),
        "strided": (d[:, ::3, 1::2], host[:, ::3, 1::2]),
        "reversed": (d.reshape(host.size)[::-1], host.ravel()[::-1]),
        "transposed": (d.reshape(3000, 7).T, host.reshape(3000, 7).T),
        "fortran": (cuda.to_device(np.asfortranarray(host[0])), host[0]),
    }
    for name, (dv, hv) in views.items():
        assert pyreduce.reduce(dv, lambda a, b: b, backend="cuda") == \
            hv.ravel(order="C")[-1], name
        assert pyreduce.reduce(dv, lambda a, b: a, backend="cuda") == \
            hv.ravel(order="C")[0], name
        assert pyreduce.sum(dv, backend="cuda") == hv.sum(), name
    assert np.array_equal(d.copy_to_host(), host)
    # auto picks the device of a device input
    assert pyreduce.sum(d) == host.sum()
    out = pyreduce.max(d, device_result=True)
    assert cuda.is_cuda_array(out) and out.copy_to_host()[()] == host.max()


def _library(kind):
    """``(to_device, scalar_of, address_of)`` for device arrays of ``kind``."""
    if kind == "numba":
        cuda = cuda_module()
        return (cuda.to_device, lambda r: r.copy_to_host()[()],
                lambda r: r.device_ctypes_pointer.value)
    if kind == "cupy":
        cp = pytest.importorskip("cupy")
        return cp.asarray, lambda r: r.get()[()], lambda r: r.data.ptr
    torch = pytest.importorskip("torch")
    return (lambda h: torch.as_tensor(h, device="cuda"), lambda r: r.cpu().numpy()[()],
            lambda r: r.data_ptr())


@pytest.mark.parametrize("kind", ["numba", "cupy", "torch"])
def test_express_repeats_of_two_pass_plans(kind, monkeypatch):
    """Inputs streamed from memory (more than twice the L2 cache) reduce in two
    launches, and their repeats run them both in one step: each call's own
    value, for plain sums and maxima and for the structured reductions (var's
    and argmax's two-pass lane folds, minmax's pair), device and host results."""
    from pyreduce.backends.express import Express
    from pyreduce.backends.numba_cuda import CudaBackend

    to_device, scalar_of, _ = _library(kind)
    from pyreduce.callmemo import MISS

    fast, real_call = [0], Express.__call__

    def call(self, *args):
        found = real_call(self, *args)
        fast[0] += found is not MISS  # served here, not handed to the full path
        return found

    monkeypatch.setattr(Express, "__call__", call)
    l2 = CudaBackend().device().l2_bytes or 50 * 2**20
    n = 3 * l2 // 8 + 5  # float64: three L2 sizes
    rng = np.random.default_rng(12)
    for _ in range(3):
        h = rng.standard_normal(n)
        d = to_device(h)
        assert float(scalar_of(pyreduce.sum(d, device_result=True))) == pytest.approx(
            h.sum(), rel=1e-12)
        assert float(pyreduce.max(d, device_result=False)) == h.max()
        assert float(scalar_of(pyreduce.var(d, device_result=True))) == pytest.approx(
            h.var(), rel=1e-10)
        assert int(scalar_of(pyreduce.argmax(d, device_result=True))) == h.argmax()
        lo, hi = pyreduce.minmax(d, device_result=True)
        assert (float(scalar_of(lo)), float(scalar_of(hi))) == (h.min(), h.max())
    assert fast[0] >= 2 * 5  # the second and third rounds' calls: served as repeats


@pytest.mark.parametrize("kind", ["numba", "cupy", "torch"])
def test_structured_host_values_repeat_in_one_step(kind, monkeypatch):
    """A device input's mean, var, std, argmax and argmin on the host
    (``device_result=False``) are finished by the kernel and read back, their
    repeats by the express runner: the device result's bits as a NumPy scalar
    of its dtype, one call after another on new data, inside the L2 and past
    it (two launches), with ``ddof`` past the count's warning every call;
    minmax's pair takes the full path and gives NumPy's values."""
    from pyreduce.backends.express import Express
    from pyreduce.backends.numba_cuda import CudaBackend
    from pyreduce.callmemo import MISS

    to_device, scalar_of, _ = _library(kind)
    fast, real_call = [0], Express.__call__

    def call(self, info, device_result):
        found = real_call(self, info, device_result)
        fast[0] += found is not MISS and not device_result
        return found

    monkeypatch.setattr(Express, "__call__", call)
    l2 = CudaBackend().device().l2_bytes or 50 * 2**20
    rng = np.random.default_rng(21)
    names = ("mean", "var", "std", "argmax", "argmin")
    for n in (3 * 2**16 + 7, 3 * l2 // 4 + 3):  # float32: inside, then past the L2
        for _ in range(3):
            h = rng.standard_normal(n).astype(np.float32)
            d = to_device(h)
            for name in names:
                f = getattr(pyreduce, name)
                got, on_device = f(d, device_result=False), f(d, device_result=True)
                assert isinstance(got, np.generic), (name, type(got))
                want = scalar_of(on_device)
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name
            with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
                assert np.isinf(pyreduce.var(d[:5], ddof=5, device_result=False))
            lo, hi = pyreduce.minmax(d, device_result=False)
            assert (lo, hi) == (h.min(), h.max()) and isinstance(lo, np.generic)
    assert fast[0] >= 2 * 2 * len(names)  # each size's later rounds: served as repeats


@pytest.mark.parametrize("kind", ["numba", "cupy", "torch"])
def test_express_repeats_of_the_fixed_tree(kind, monkeypatch):
    """``deterministic=True`` repeats run the fixed tree's one launch (its last
    block finishes the tree) in one step (``pyreduce.backends.express``), with
    the bits of the full path: new data on every call, inside and past the L2
    cache (where the tree takes another layout), host and device results,
    checked against the cpu backend's evaluation of the same tree; with an
    initial value, combined after the root by the same launch."""
    from pyreduce.backends.express import Express
    from pyreduce.backends.numba_cuda import CudaBackend
    from pyreduce.callmemo import MISS

    to_device, scalar_of, _ = _library(kind)
    fast, real_call = [0], Express.__call__

    def call(self, *args):
        found = real_call(self, *args)
        fast[0] += found is not MISS
        return found

    monkeypatch.setattr(Express, "__call__", call)
    l2 = CudaBackend().device().l2_bytes or 50 * 2**20
    rng = np.random.default_rng(5)
    sizes = [3 * 2**16 + 7, 3 * l2 // 4 + 3]  # float32: inside, then past three L2 sizes
    for n in sizes:
        for _ in range(3):
            h = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)
            want = pyreduce.sum(h, backend="cpu", deterministic=True)
            d = to_device(h)
            got = pyreduce.sum(d, deterministic=True, device_result=False)
            assert got.tobytes() == want.tobytes()
            r = pyreduce.sum(d, deterministic=True, device_result=True)
            assert np.float32(scalar_of(r)).tobytes() == want.tobytes()
        plan = pyreduce.explain(d, "add", deterministic=True).plan
        assert plan.layout == "single_pass" and plan.passes == 1 and plan.grid > 1
        init = np.float32(-1.5e3)
        got = pyreduce.sum(d, deterministic=True, initial=init, device_result=False)
        assert got.tobytes() == pyreduce.sum(h, deterministic=True, initial=init,
                                             backend="cpu").tobytes()
    # per size the first call plans, the five others are served as repeats
    assert fast[0] == 5 * len(sizes)


@pytest.mark.parametrize("kind", ["numba", "cupy"])
def test_small_results_share_slabs_and_stay_correct(kind):
    """Small Numba and CuPy results are cut from shared slabs: every result keeps
    its own value while later ones are made, across slab boundaries and after
    the slabs are let go."""
    from pyreduce.backends.results import Slabs

    to_device, scalar_of, address_of = _library(kind)
    rng = np.random.default_rng(7)
    hosts = [rng.standard_normal(1 + int(k) % 300) for k in rng.integers(0, 10**6, 64)]
    devs = [to_device(h) for h in hosts]
    per_slab = Slabs.SLAB_BYTES // Slabs.ALIGN
    kept, ptrs = [], set()
    for i in range(per_slab + 100):  # into a second slab
        k = i % len(hosts)
        r = pyreduce.max(devs[k], device_result=True)
        assert type(r) is type(devs[k]) and r.shape == () and r.dtype == np.float64
        ptrs.add(address_of(r))
        if i % 37 == 0:
            kept.append((k, r))
    assert len(ptrs) == per_slab + 100  # no two live results share memory
    for k, r in kept:
        assert scalar_of(r) == hosts[k].max()
    del ptrs
    gc.collect()
    for k, r in kept:  # their slabs are held by the results alone now
        assert scalar_of(r) == hosts[k].max()
    t = pyreduce.reduce(devs[0], lambda a, b: a if a > b else b, device_result=True)
    assert scalar_of(t) == hosts[0].max()
    rec = pyreduce.reduce(devs[1], lambda a, b: a if a[0] >= b[0] else b,
                          map=lambda i, v: (v, i), identity=(-np.inf, -1), device_result=True)
    assert rec.copy_to_host()[()][1] == np.argmax(hosts[1])  # a record: a Numba array


def test_a_numba_array_bound_to_a_stream_is_read_after_its_work():
    """A Numba array bound to a non-blocking stream names it (as its interface
    does): a reduction right after a slow kernel filled it on that stream,
    with nothing synchronized, reads the filled values, first call and repeats."""
    cuda = cuda_module()
    cp = pytest.importorskip("cupy")
    other = cp.cuda.Stream(non_blocking=True)
    bound = cuda.external_stream(other.ptr)

    @cuda.jit
    def slow_fill(x, value, spins):
        i = cuda.grid(1)
        if i < x.size:
            v = 0.0
            for k in range(spins):  # keeps the stream busy long after the launch
                v += 1e-30 * k
            x[i] = value + v * 0.0

    n = 1 << 16
    x = cuda.device_array(n, dtype=np.float32, stream=bound)
    for value in (1.0, 2.0, 3.0):
        slow_fill[n // 256, 256, bound](x, value, 200_000)
        assert float(pyreduce.sum(x)) == value * n
    other.synchronize()


def test_numba_results_after_the_first_are_like_numbas_own():
    """A small Numba result after the first of its shape and dtype copies that
    one's attributes (``pyreduce.backends.results.numba_result``): it must be
    the array Numba's constructor makes, on memory of its own."""
    from pyreduce.backends import results

    cuda = cuda_module()
    results._NUMBA_LIKE.clear()
    rng = np.random.default_rng(11)
    hosts = [rng.standard_normal((6, 70)) for _ in range(3)]
    devs = [cuda.to_device(h) for h in hosts]
    made, *copied = [pyreduce.max(d, axis=1, device_result=True) for d in devs]
    ref = cuda.device_array(6)  # Numba's own
    assert set(vars(made)) == set(vars(ref))
    for r in copied:
        assert type(r) is type(ref) and set(vars(r)) == set(vars(made))
        for name, value in vars(made).items():
            if name != "gpu_data":
                assert vars(r)[name] is value or vars(r)[name] == value, name
        assert (r.shape, r.strides, r.dtype, r.size, r.alloc_size) == \
            (ref.shape, ref.strides, ref.dtype, ref.size, ref.alloc_size)
        assert r.is_c_contiguous() and r.gpu_data is not made.gpu_data
    addresses = {r.device_ctypes_pointer.value for r in [made, *copied]}
    assert len(addresses) == 3
    for h, r in zip(hosts, [made, *copied]):
        assert np.array_equal(r.copy_to_host(), h.max(axis=1))
        assert np.array_equal(r[2:5].copy_to_host(), h.max(axis=1)[2:5])
        assert np.array_equal(r.reshape(2, 3).copy_to_host(), h.max(axis=1).reshape(2, 3))
    copied[0].copy_to_device(np.zeros(6))  # its memory alone
    assert np.array_equal(made.copy_to_host(), hosts[0].max(axis=1))
    assert np.array_equal(copied[1].copy_to_host(), hosts[2].max(axis=1))
    assert not copied[0].copy_to_host().any()


@pytest.mark.parametrize("kind", ["numba", "cupy", "torch"])
def test_express_repeats_give_the_full_paths_results(kind, prepares, monkeypatch):
    """Repeats of a plain call whose plan is one launch run in one step
    (``pyreduce.backends.express``): for each input library, host and device
    results of a non-commutative op over sizes around a block's tile, new data
    on every call, ops finished on the host, records, a misaligned view."""
    from pyreduce import structured
    from pyreduce.backends.express import Express

    to_device, scalar_of, _ = _library(kind)
    fast, real_call = [0], Express.__call__

    def call(self, *args):
        fast[0] += 1
        return real_call(self, *args)

    monkeypatch.setattr(Express, "__call__", call)
    rng = np.random.default_rng(11)
    sizes = [1, 255, 256 * 16 + 1, 3 * 2**16 + 5]
    for n in sizes:
        for _ in range(3):  # the first call takes the full path, the others repeat it
            x = (rng.integers(1, P, n) * P + rng.integers(0, P, n)).astype(np.int64)
            want = functools.reduce(affine, x.tolist())
            d = to_device(x)
            assert int(pyreduce.reduce(d, affine)) == want
            r = pyreduce.reduce(d, affine, device_result=True)
            assert type(r) is type(d) and r.shape == () and int(scalar_of(r)) == want
    # per size, one full call; the five others (device_result is not part of
    # the call shape) repeat it
    assert prepares[0] == len(sizes) and fast[0] == 5 * len(sizes)
    h = rng.standard_normal(1000)
    d = to_device(h)
    mean = structured.moments_monoid(h.dtype, "mean")  # finished on the host
    for _ in range(2):
        assert pyreduce.reduce(d, mean) == pytest.approx(h.mean(), rel=1e-12)
        with pytest.raises(ValueError, match="finishes its result on the host"):
            pyreduce.reduce(d, mean, device_result=True)
        lo, hi = pyreduce.minmax(d)
        assert (float(lo), float(hi)) == (h.min(), h.max())
    def last(a, b):
        return b

    for start in (1, 0, 1, 1, 2):  # a new alignment is planned afresh, then repeated
        v = d[start:start + 900]
        assert float(pyreduce.reduce(v, last)) == h[start + 899]
        assert float(pyreduce.sum(v)) == pytest.approx(h[start:start + 900].sum(), rel=1e-12)


def test_the_fixed_tree_kernel_keeps_the_occupancy_of_its_layout():
    """Every block of the fixed tree's one kernel pays the registers of its last
    block's pass too (``pyreduce.variants.pairwise.FINISH_ITEMS``): past the L2,
    float32 and float64 keep every thread slot of the SM, as they did with the
    CUDA of the H200 machine measured (with 16 nodes a lane there, float32 took
    56 registers, half the SM's threads, and 1.27 times the default's time at
    2**24: ``docs/performance/fixed-tree-finish-h200.txt``). The kernel's
    launch bounds ask for all four blocks of 512 an SM, the occupancy the
    layout's speed was measured with, whichever CUDA compiles it."""
    cp = pytest.importorskip("cupy")
    for dt in (np.float32, np.float64):
        x = cp.ones(2**26, dtype=dt)
        e = pyreduce.explain(x, "add", deterministic=True)
        (res,) = e.resources.values()
        assert e.plan.passes == 1 and res["occupancy"] == 1.0, (dt, res)


@pytest.mark.parametrize("kind", ["numba", "cupy", "torch"])
def test_express_repeats_make_the_result_array_after_the_launch(kind, monkeypatch):
    """A repeat reserves its device result's memory, launches into it, and makes
    the array object after the launch (``pyreduce.backends.results.Results``):
    for a plain and a structured reduction, the array comes after every launch
    of its call and holds the call's value; a result made at once
    (``maker(...)(...)``) is the same kind of array."""
    from pyreduce.backends import express, fastpath, results

    to_device, scalar_of, address_of = _library(kind)
    order = []
    real_launch = fastpath.launch
    real_array = {cls: cls.array for cls in (results.NumbaResults, results.CupyResults,
                                             results.TorchResults)}

    def launch(*args):
        order.append("launch")
        return real_launch(*args)

    def array_of(cls):
        def array(self, token, shape, dtype, address):
            made = real_array[cls](self, token, shape, dtype, address)
            order.append(("array", address))
            return made
        return array

    rng = np.random.default_rng(5)
    for f, host_of in ((pyreduce.sum, np.sum), (pyreduce.mean, np.mean)):
        h = rng.standard_normal(3 * 2**16 + 7)
        d = to_device(h)
        f(d, device_result=True)  # the full path, remembered
        monkeypatch.setattr(express.fastpath, "launch", launch)
        for cls in real_array:
            monkeypatch.setattr(cls, "array", array_of(cls))
        order.clear()
        r = f(d, device_result=True)
        monkeypatch.undo()
        assert order and order[0] == "launch" and order[-1] == ("array", address_of(r)), order
        assert order.count("launch") == len(order) - 1
        assert type(r) is type(d) and r.shape == ()
        assert float(scalar_of(r)) == pytest.approx(host_of(h), rel=1e-12)
    made, address = results.maker(kind, np.dtype(np.float64))((), np.dtype(np.float64), 0, 0, d)
    assert type(made) is type(d) and address_of(made) == address


@pytest.mark.parametrize("kind", ["numba", "cupy", "torch"])
def test_express_repeats_of_views_in_turn(kind, prepares):
    """Views of one shape but other strides are other call shapes: a strided 1-D
    view and a contiguous array of its length in turn, a 2-D view of every other
    row (gathered into C order on every call, so never repeated in one step) and
    a C-contiguous one in turn, each call with a non-commutative op, so that a
    repeat reading one view as the other gives a wrong value. (Rows skipped, not
    a transpose: Numba's ``.T`` of a 2-D array is a C-contiguous copy.)"""
    to_device, scalar_of, _ = _library(kind)
    rng = np.random.default_rng(12)
    n = 3 * 2**12 + 7
    for _ in range(3):
        x = (rng.integers(1, P, 2 * n) * P + rng.integers(0, P, 2 * n)).astype(np.int64)
        d = to_device(x)
        for view, host in ((d[::2], x[::2]), (d[:n], x[:n]), (d[1::2], x[1::2])):
            want = functools.reduce(affine, host.tolist())
            assert int(pyreduce.reduce(view, affine)) == want
            assert int(scalar_of(pyreduce.reduce(view, affine, device_result=True))) == want
        m = x[:2 * 300].reshape(20, 30)
        dm = to_device(m)
        for view, host in ((dm[::2], m[::2]),
                           (to_device(np.ascontiguousarray(m[::2])), m[::2])):
            want = functools.reduce(affine, host.ravel().tolist())
            assert int(pyreduce.reduce(view, affine)) == want
    # strided and contiguous 1-D (the odd and even views share a call shape),
    # strided and contiguous 2-D: four call shapes, each planned once
    assert prepares[0] == 4


def test_express_repeats_wait_for_the_producers_stream(prepares):
    """A repeat launched on another stream than the one that made its input waits
    for the producer first (the CUDA Array Interface's rule), as the full path does."""
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(13)
    n = 2**24
    producer, launch = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    for k in range(4):
        h = rng.standard_normal(n).astype(np.float32)
        with producer:  # current: CuPy names it as the input's stream
            x = cp.asarray(h)
            for _ in range(10):  # work queued on the producer's stream, still running
                x *= np.float32(1)  # when the reduction is called
            x *= 2
            x += np.float32(k)
            got = pyreduce.max(x, stream=launch, device_result=False)  # read on the host
        assert got == (h * 2 + np.float32(k)).max()
    assert prepares[0] == 1


_LATE_WRITE = r"""
extern "C" __global__ void late_write(float* x, long long i, float value,
                                      long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
    x[i] = value;
}
"""


@pytest.mark.parametrize("variant", ["auto", "warp_shuffle_x2", "last_block"])
def test_a_non_blocking_stream_waits_for_the_default_streams_work(variant):
    """An input written on the default stream and reduced on a non-blocking
    stream (which the default stream does not order) is read after the default
    stream's work, without the host waiting: with out= on the stream, its
    repeats, and a host value. The write comes from a kernel that spins for
    about 10 ms first, so a read that does not wait for it misses it."""
    cp = pytest.importorskip("cupy")
    late_write = cp.RawKernel(_LATE_WRITE, "late_write")
    rng = np.random.default_rng(17)
    n = 2**24 + 5
    launch, other = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    out = cp.empty((), cp.float32)
    tuning = pyreduce.Tuning(variant=variant)
    x = cp.asarray(rng.standard_normal(n).astype(np.float32))
    cycles = 20_000_000  # about 10 ms at 2 GHz
    for k in range(4):
        at = int(rng.integers(n))
        late_write((1,), (1,), (x, np.int64(at), np.float32(100 + k), np.int64(cycles)))
        pyreduce.max(x, out=out, stream=launch, tuning=tuning)
        launch.synchronize()  # the call's work is on launch, after the write
        assert out.get(stream=other) == 100 + k  # read where nothing orders it
        late_write((1,), (1,), (x, np.int64(at), np.float32(200 + k), np.int64(cycles)))
        assert pyreduce.max(x, stream=launch, tuning=tuning, device_result=False) == 200 + k
        x[at] = 0  # on the default stream, which the next write follows


def test_a_capture_on_a_non_blocking_stream_of_a_default_streams_input():
    """A call captured on a non-blocking stream whose input CuPy made on its
    default stream (not the capturing one: no ``with s``) records the reduction
    without touching the default stream; the replay reduces the new values."""
    cp = pytest.importorskip("cupy")
    n = 2**20 + 3
    x = cp.asarray(np.random.default_rng(3).random(n, dtype=np.float32))
    out = cp.empty((), cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    pyreduce.max(x, out=out, stream=s)  # compiled and planned first
    s.synchronize()
    assert out.get(stream=s) == x.max().get()
    s.begin_capture()
    pyreduce.max(x, out=out, stream=s)
    graph = s.end_capture()
    x[n // 2] = 9.0
    cp.cuda.Stream.null.synchronize()
    graph.launch(s)
    s.synchronize()
    assert out.get(stream=s) == 9.0


def test_express_repeat_on_another_device_takes_the_full_path(prepares):
    """A repeat launches only on the device its decisions were taken on: where the
    thread's device is another, it launches nothing (``fastpath.WRONG_DEVICE``)
    and the call is decided afresh."""
    from pyreduce import callmemo
    from pyreduce.backends import fastpath
    from pyreduce.backends.express import Express

    cuda = cuda_module()
    x = np.random.default_rng(2).standard_normal(5000)
    d = cuda.to_device(x)
    assert pyreduce.max(d) == x.max()
    (entry,) = callmemo._MEMO.values()
    assert isinstance(entry.run, Express)
    here = entry.run.device
    entry.run.device = here + 1  # as if the decisions were taken on another GPU
    assert pyreduce.max(d) == x.max()
    r = pyreduce.max(d, device_result=True)
    assert r.copy_to_host()[()] == x.max()
    assert prepares[0] == 2  # the first call, then the other device's entry replaced
    (entry,) = callmemo._MEMO.values()
    assert entry.run.device == here
    # 7 parameter words, the scratch word and the driver functions' addresses
    values = np.array([*range(7), 0, *fastpath.driver_functions()], dtype=np.int64)
    for launcher in (fastpath._compiled_launch(), fastpath._bindings_launch()):
        err = launcher(values, 0, -1, 5, 6, 7, 8, here + 1, 0, 1, 32, 0, 0)
        assert err == fastpath.WRONG_DEVICE
        assert values[:7].tolist() == list(range(7))  # nothing written, nothing launched


def test_express_repeats_from_many_threads():
    """Threads repeating one call shape at once share its remembered call, each
    with a workspace of its own: every result is its own input's."""
    import concurrent.futures

    cuda = cuda_module()
    rng = np.random.default_rng(4)
    n = 3 * 2**12 + 1
    xs = [(rng.integers(1, P, n) * P + rng.integers(0, P, n)).astype(np.int64)
          for _ in range(16)]
    ds = [cuda.to_device(x) for x in xs]
    wants = [functools.reduce(affine, x.tolist()) for x in xs]
    pyreduce.reduce(ds[0], affine)

    def job(k):
        got = []
        for i in range(40):
            j = (k + i) % len(ds)
            if i % 2:
                got.append((j, int(pyreduce.reduce(ds[j], affine))))
            else:
                r = pyreduce.reduce(ds[j], affine, device_result=True)
                got.append((j, int(r.copy_to_host()[()])))
        return got

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for got in pool.map(job, range(8)):
            for j, value in got:
                assert value == wants[j]


def test_repeat_calls_follow_their_inputs():
    """A repeated call shape reuses its decisions (pyreduce.callmemo); each call
    still reads its own array: a new address, a misaligned view, a rebound
    closure value."""
    cuda = cuda_module()
    rng = np.random.default_rng(3)
    base = rng.standard_normal(10**5 + 7).astype(np.float32)
    d = cuda.to_device(base)
    for start in (0, 1, 2, 3, 4, 0, 1):  # alignments 16, 4, 8, 4, 16, ...
        v = d[start:start + 10**5]
        assert pyreduce.sum(v, dtype=np.float64) == pytest.approx(
            base[start:start + 10**5].sum(dtype=np.float64), rel=1e-6)
        assert pyreduce.reduce(v, lambda a, b: b) == base[start + 10**5 - 1]
    cap = np.float32(0.5)

    def capped_max(a, b):  # associative for any cap
        m = a if a > b else b
        return m if m < cap else cap

    got = []
    for c in (0.5, 0.5, 1.5, 1.5, -3.0):
        cap = np.float32(c)
        got.append(pyreduce.reduce(d, capped_max))
    want = [min(base.max(), np.float32(c)) for c in (0.5, 0.5, 1.5, 1.5, -3.0)]
    assert got == want


def test_device_seconds_times_the_gpu_not_the_host():
    """With the GPU held while the calls are queued, ``device_seconds`` (the
    autotuner's and the benchmarks' timer) times the kernels: each call below
    spends 50 us on the host before it launches a small reduction, which unheld
    events count and held ones do not (the kernels run back to back once the
    hold ends); a kernel of known length is timed at that length."""
    from pyreduce.measure import _hold_kernel, device_seconds

    cuda = cuda_module()
    d = cuda.to_device(np.random.default_rng(0).standard_normal(1024).astype(np.float32))

    def call():
        host_work = time.perf_counter() + 50e-6
        while time.perf_counter() < host_work:
            pass
        return pyreduce.max(d, device_result=True)

    held = device_seconds(call, reps=20, batches=3)
    unheld = device_seconds(call, reps=20, batches=3, hold=False)
    assert unheld > 50e-6 and 0 < held < 0.5 * unheld
    sleeper = _hold_kernel()
    assert 150e-6 < device_seconds(lambda: sleeper[1, 1](200), reps=5) < 2e-3


def test_compiled_and_bindings_launchers_agree(monkeypatch):
    """Kernels are launched by compiled code calling libcuda
    (``fastpath.launch``); the ``cuda.bindings`` launcher it falls back to gives
    the same results; a failed launch is a RuntimeError naming the driver's
    error, from either."""
    from pyreduce.backends import fastpath

    cuda = cuda_module()
    x = np.random.default_rng(5).standard_normal(3 * 2**16 + 5).astype(np.float32)
    d = cuda.to_device(x)
    want = (x.max(), x[-1], x.sum(dtype=np.float64))

    def results():
        return (pyreduce.reduce(d, lambda a, b: b if b > a else a),
                pyreduce.reduce(d, lambda a, b: b),
                pyreduce.sum(d, dtype=np.float64, device_result=True).copy_to_host()[()])

    compiled = fastpath._compiled_launch()
    assert type(compiled).__name__ == "CPUDispatcher"  # Numba's compiled function
    for launcher in (compiled, fastpath._bindings_launch()):
        monkeypatch.setattr(fastpath, "launch", launcher)
        found = results()
        assert found[:2] == want[:2]
        assert found[2] == pytest.approx(want[2], rel=1e-9)
    # no parameters: the launcher's scratch word and the driver functions' addresses
    values = np.array([0, *fastpath.driver_functions()], dtype=np.int64)
    for launcher in (compiled, fastpath._bindings_launch()):
        err = launcher(values, -1, -1, 0, 0, 0, 0, fastpath.ANY_DEVICE, 0, 1, 32, 0, 0)
        # no such function
        assert err != 0
        with pytest.raises(RuntimeError, match="CUDA_ERROR"):
            fastpath.check_driver(err)
    assert results()[:2] == want[:2]  # the failed launches left nothing behind


# --------------------------------------------------------------------------
# CuPy


def test_cupy_inputs():
    cp = pytest.importorskip("cupy")
    x = cp.arange(10**6 + 3, dtype=cp.float32)
    before = x.copy()
    assert pyreduce.sum(x, backend="cuda", dtype=np.float64) == float(cp.sum(x, dtype=cp.float64))
    assert pyreduce.reduce(x, last_nonzero, backend="cuda") == float(x[-1])
    assert pyreduce.reduce(x[::3], lambda a, b: b) == float(x[::3][-1])
    assert pyreduce.reduce(x[::-1], lambda a, b: b) == 0.0
    assert pyreduce.reduce(x[::-7], lambda a, b: a) == float(x[-1])
    m = cp.arange(1000 * 37, dtype=cp.int64).reshape(1000, 37)
    t = m.T
    assert pyreduce.reduce(t, lambda a, b: b) == int(t.ravel()[-1])
    assert pyreduce.reduce(t, lambda a, b: a) == int(t.ravel()[0])
    assert pyreduce.sum(t) == int(m.sum())
    assert pyreduce.reduce(m[::2, 5:30:3], lambda a, b: b) == int(m[::2, 5:30:3].ravel()[-1])
    # the cpu backend copies device input to the host, any strides
    r = m[::-3, ::-2]
    assert pyreduce.reduce(r, lambda a, b: b, backend="cpu") == int(r.ravel()[-1])
    assert pyreduce.reduce(x[::-7], lambda a, b: a, backend="cpu") == float(x[-1])
    assert bool(cp.all(x == before))
    assert pyreduce.sum(cp.zeros(0, cp.int32)) == 0
    b = cp.asarray(np.random.default_rng(0).random(5000) < 0.5)
    assert pyreduce.sum(b) == int(b.sum())
    assert pyreduce.reduce(b, np.logical_or) == bool(b.any())


def test_bare_repeats_of_every_array_kind_take_their_own_call_shape():
    """Calls with nothing but the array (and device_result) find their call
    shape by the array's attributes (pyreduce.plaincalls): interleaved arrays
    of CuPy, PyTorch and Numba of other dtypes, sizes, strides and streams each
    get their own value, in their own library's array, every time."""
    cp = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    from numba import cuda

    pyreduce.cache_clear()
    rng = np.random.default_rng(21)
    hosts = [rng.standard_normal(n).astype(dt) for n, dt in
             ((2**20 + 3, np.float32), (2**20 + 3, np.float64), (4099, np.float32),
              (2**23, np.float16))]
    hosts.append(rng.integers(-1000, 1000, 2**20 + 1).astype(np.int32))
    arrays = []
    for h in hosts:
        arrays += [(h, cp.asarray(h)), (h[::-1], cp.asarray(h)[::-1]),
                   (h[1::3], cp.asarray(h)[1::3]), (h, torch.as_tensor(h, device="cuda")),
                   (h, cuda.to_device(h))]
    other = cp.cuda.Stream(non_blocking=True)
    for rounds in range(3):
        for h, d in arrays:
            wide = h.astype(np.float64)
            for name, want, rtol in (("sum", wide.sum(), 1e-3), ("max", h.max(), 0),
                                     ("mean", wide.mean(), 1e-4), ("var", wide.var(), 1e-4),
                                     ("argmax", h.argmax(), 0)):
                f = getattr(pyreduce, name)
                if rounds == 2 and isinstance(d, cp.ndarray):
                    with other:  # CuPy's current stream another: another call shape
                        got = f(d)
                        assert isinstance(got, cp.ndarray)
                        # read on the stream it was made on: ``other`` does not
                        # wait for the default stream, nor the default for it
                        value = float(got.item())
                else:
                    got = f(d, device_result=False) if rounds == 1 else f(d)
                    value = float(got.item() if hasattr(got, "item") else got)
                tol = rtol * max(1.0, float(np.abs(wide).sum()) if name == "sum" else 1.0)
                assert abs(value - float(want)) <= tol, (name, h.dtype, h.size, type(d), value)
            lo, hi = pyreduce.minmax(d)
            assert (float(lo), float(hi)) == (float(h.min()), float(h.max()))
        if rounds == 0:
            t = torch.as_tensor(hosts[0], device="cuda")
            assert type(pyreduce.sum(t)) is torch.Tensor
            assert type(pyreduce.mean(cp.asarray(hosts[0]))) is cp.ndarray


# --------------------------------------------------------------------------
# PyTorch


@pytest.mark.parametrize("variant", ["auto", "warp_shuffle_x2", "last_block"])
@pytest.mark.parametrize("n", [1000, 2**20 + 7, 2**26])
def test_calls_captured_in_a_cuda_graph_replay_on_new_data(variant, n):
    """A call with out= on a stream neither waits nor allocates, so CuPy's
    stream capture records it: the graph's replay reduces the array's new
    values."""
    cp = pytest.importorskip("cupy")
    x = cp.asarray(np.random.default_rng(0).random(n, dtype=np.float32))
    out = cp.empty((), cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    tuning = pyreduce.Tuning(variant=variant)
    pyreduce.max(x, out=out, stream=s, tuning=tuning)  # compiled and planned first
    s.synchronize()
    assert float(out) == float(x.max())
    with s:
        s.begin_capture()
        pyreduce.max(x, out=out, stream=s, tuning=tuning)
        pyreduce.sum(x, out=out, stream=s, tuning=tuning)
        graph = s.end_capture()
        x[:] = cp.asarray(np.random.default_rng(1).random(n, dtype=np.float32))
        x[n // 3] = 5.0  # written on s, before the replay
        graph.launch(s)
    s.synchronize()
    assert np.isclose(float(out), float(x.sum(dtype=cp.float64)), rtol=1e-5)


def test_torch_call_captured_in_a_cuda_graph():
    torch = pytest.importorskip("torch")
    x = torch.rand(2**22, device="cuda")
    out = torch.empty((), device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        pyreduce.max(x, out=out, stream=s)
    s.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        pyreduce.max(x, out=out, stream=s)
    x.copy_(torch.rand(2**22, device="cuda"))
    x[123] = 7.0
    graph.replay()
    torch.cuda.synchronize()
    assert float(out) == 7.0


def test_torch_device_result_captured_in_a_cuda_graph_past_the_l2():
    """A tensor's device result captured into a graph comes from the capture
    (PyTorch's pool for the graph), not from a spare made on that stream
    before it (``pyreduce.backends.results.TorchResults``): the replay writes
    the result the graph holds, and the spare is still there for a call after
    the capture."""
    torch = pytest.importorskip("torch")
    from pyreduce.backends import results

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    x = torch.rand(2 * l2 // 4 + 1000, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # remembered, then a repeat leaves a spare on s
            pyreduce.max(x)
    s.synchronize()
    before = {k: t for k, (t, _) in results._TORCH_SPARES.items() if k[1] == s.cuda_stream}
    assert len(before) == 1
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        r = pyreduce.max(x)
    assert all(r is not t for t in before.values())
    x.copy_(torch.rand(x.numel(), device="cuda"))
    x[123] = 7.0
    graph.replay()
    torch.cuda.synchronize()
    assert float(r) == 7.0
    with torch.cuda.stream(s):
        after = pyreduce.max(x)
    s.synchronize()
    assert after is next(iter(before.values())) and float(after) == 7.0


def test_torch_inputs():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    x = torch.arange(10**6 + 5, dtype=torch.float64, device="cuda")
    assert pyreduce.sum(x) == float(x.sum())
    assert pyreduce.reduce(x, lambda a, b: b) == float(x[-1])
    assert pyreduce.reduce(x[::4], lambda a, b: b) == float(x[::4][-1])
    m = torch.arange(300 * 41, dtype=torch.int32, device="cuda").reshape(300, 41)
    assert pyreduce.reduce(m.t(), lambda a, b: b) == int(m.t().reshape(-1)[-1])
    assert pyreduce.sum(m.t()) == int(m.sum())
    h = torch.arange(100, dtype=torch.int16)  # a host tensor
    assert pyreduce.sum(h) == 4950


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_torch_lazy_views_are_refused_and_grad_tensors_read(device):
    """PyTorch's lazy conjugate and negated views hold other values than they
    show: a TypeError naming the bit, never the sum of their memory; a tensor
    that requires grad (a Parameter) is read as its values, the first call of
    its type as later ones, plain and along an axis."""
    torch = pytest.importorskip("torch")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    z = torch.randn(4099, dtype=torch.complex64, device=device)
    for lazy, bit in ((z.conj(), "conjugate"), (z.conj().imag, "negative")):
        for call in (pyreduce.sum, pyreduce.mean, pyreduce.argmax):
            with pytest.raises(TypeError, match=f"{bit} bit"):
                call(lazy)
    resolved = z.conj().resolve_conj()
    got = complex(pyreduce.sum(resolved, device_result=False))
    assert abs(got - complex(resolved.cpu().numpy().astype(np.complex128).sum())) < 1e-2
    w = torch.nn.Parameter(torch.randn(257, 31, device=device))
    host = w.detach().cpu().numpy()
    for _ in range(2):
        assert float(pyreduce.max(w)) == host.max()
        assert int(pyreduce.argmax(w)) == int(host.argmax())
        along = pyreduce.max(w, axis=0, device_result=False)
        if device == "cuda":  # an array result stays a tensor of w's GPU
            assert isinstance(along, torch.Tensor) and along.device == w.device
            along = along.cpu()
        assert np.array_equal(np.asarray(along), host.max(axis=0))
        assert not getattr(pyreduce.max(w), "requires_grad", False)


def test_inputs_on_another_gpu_are_refused_and_reduced_with_theirs_current():
    """On a machine of two GPUs or more: a CuPy array, a PyTorch tensor and a
    Numba array on the last GPU while the first is current are a ValueError
    naming both, after a call of the same shape on the first GPU was
    remembered; with their GPU current, each is reduced there, to the right
    value, by the full path and by its repeats."""
    cuda = cuda_module()
    if len(cuda.gpus) < 2:
        pytest.skip("needs two GPUs")
    last = len(cuda.gpus) - 1
    cp = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    host = np.arange(4097, dtype=np.float32)  # every partial sum exact in float32
    with cp.cuda.Device(last):
        arrays = [cp.asarray(host), torch.from_numpy(host).to(f"cuda:{last}")]
    with cuda.gpus[last]:
        arrays.append(cuda.to_device(host))
    with cp.cuda.Device(0):
        firsts = [cp.asarray(host), torch.from_numpy(host).to("cuda:0"), cuda.to_device(host)]
    for first, x in zip(firsts, arrays):
        with cp.cuda.Device(0):
            for _ in range(2):  # the same call shape but for the GPU, remembered first
                assert float(pyreduce.sum(first)) == 4096 * 4097 / 2
                with pytest.raises(ValueError, match=f"on GPU {last} and .* GPU 0"):
                    pyreduce.sum(x)
        with cp.cuda.Device(last):
            for _ in range(3):
                assert float(pyreduce.sum(x)) == 4096 * 4097 / 2
                assert int(pyreduce.argmax(x)) == host.size - 1


class _DLPackOnly:
    """A CUDA producer with nothing but the DLPack protocol (as JAX arrays are)."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, stream=None):
        return self._t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_bfloat16_float16_and_dlpack_inputs():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    x = torch.randn(100_003, device="cuda").to(torch.bfloat16)
    f = x.float()
    assert pyreduce.max(x) == float(f.max())
    assert pyreduce.sum(x).dtype == torch.float32  # a 0-d tensor
    assert pyreduce.sum(x, device_result=False).dtype == np.float32
    assert abs(float(pyreduce.sum(x)) - float(f.double().sum())) <= 1e-4 * float(f.abs().sum())
    assert pyreduce.reduce(x[::3], lambda a, b: b) == float(f[::3][-1])
    assert pyreduce.argmax(x) == int(torch.argmax(f))
    h = x.half()
    assert pyreduce.max(h) == float(h.float().max())
    # through DLPack alone, strided, bfloat16 and int64
    assert pyreduce.reduce(_DLPackOnly(x[1::3]), lambda a, b: b) == float(f[1::3][-1])
    i = torch.arange(10_000, device="cuda")
    t = _DLPackOnly(i.reshape(100, 100).t())  # gathered into C order through its fields
    assert pyreduce.reduce(t, lambda a, b: b) == int(i.reshape(100, 100).t().reshape(-1)[-1])
    assert pyreduce.sum(t) == int(i.sum())
    assert pyreduce.sum(t, backend="cpu") == int(i.sum())
    last = pyreduce.reduce(_DLPackOnly(x[1::3]), lambda a, b: b, backend="cpu")
    assert last == float(f[1::3][-1])
    m = x[:600].reshape(20, 30).t()  # bfloat16, N-D and strided: gathered as its bits
    assert pyreduce.reduce(m, lambda a, b: b) == float(f[:600].reshape(20, 30).t()[-1, -1])
    assert pyreduce.max(m, axis=0)[3] == float(f[:600].reshape(20, 30)[3].max())
    c = torch.randn(5000, dtype=torch.complex64, device="cuda")
    got = complex(pyreduce.sum(c))
    want = complex(c.to(torch.complex128).sum())
    assert abs(got - want) <= 1e-4 * 5000


# --------------------------------------------------------------------------
# Results follow the input's library (docs/semantics.md, "Where results live")

#: the argmax family takes an int axis only
INT_AXIS = ("argmax", "argmin", "nanargmax", "nanargmin")
RESULT_DATA = {
    "float64": np.array([3.0, 1.0, 4.0, 0.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0] * 30),
    "float32": np.array([3.0, 1.0, 4.0, 0.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0] * 30, np.float32),
    "int32": np.array([3, 1, 4, 0, 5, 9, 2, 6, 5, 3] * 30, np.int32),
}


def _followed(kind):
    """``(to_device, library's array type, numpy dtype of a result, result on the
    host)`` for CuPy or PyTorch."""
    if kind == "cupy":
        cp = pytest.importorskip("cupy")
        return cp.asarray, cp.ndarray, lambda r: np.dtype(r.dtype), lambda r: r.get()
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    return (lambda h: torch.as_tensor(h, device="cuda"), torch.Tensor,
            lambda r: np.dtype(torch.empty(0, dtype=r.dtype).numpy().dtype),
            lambda r: r.cpu().numpy())


def _check_value(got, want, host_of=None):
    got = np.asarray(got if host_of is None else host_of(got))
    kind = "f" if want.dtype.kind in "fc" else "i"
    if kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), np.float64(want), rtol=1e-5)
    else:
        assert got == want


@pytest.mark.parametrize("kind", ["cupy", "torch"])
@pytest.mark.parametrize("data", list(RESULT_DATA))
@pytest.mark.parametrize("name", list(ONE_VALUE))
def test_one_value_of_a_device_input_is_a_0d_array_of_its_library(kind, data, name):
    """Every public reduction to one value of a CuPy array (a PyTorch tensor)
    is a 0-d CuPy array (tensor) of the host scalar's dtype and value, for
    ``axis=None``, every ``axis`` covering all of them, and on repeats (the
    one-step path, ``pyreduce.backends.express``); ``keepdims=True`` an array
    of ones of that library; ``device_result=True`` the same 0-d array;
    ``device_result=False`` the NumPy scalar. A 0-d array of the library is
    returned as the library returns it, without waiting for the GPU: its type
    says so (a NumPy scalar would have had to wait)."""
    to_device, array_type, dtype_of, host_of = _followed(kind)
    f = ONE_VALUE[name]
    h = RESULT_DATA[data]
    want = f(h, backend="cpu")
    assert isinstance(want, np.generic)
    d = to_device(h)
    for _ in range(3):  # the full path, then repeats
        r = f(d)
        assert type(r) is array_type and r.shape == () and dtype_of(r) == want.dtype, r
        _check_value(r, want, host_of)
    r = f(d, device_result=True)
    assert type(r) is array_type and r.shape == () and dtype_of(r) == want.dtype
    _check_value(r, want, host_of)
    r = f(d, device_result=False)
    assert isinstance(r, np.generic) and r.dtype == want.dtype
    _check_value(r, want)
    if name not in WITH_AXIS:
        return
    for axis in (0, -1):
        r = f(d, axis=axis)
        assert type(r) is array_type and r.shape == () and dtype_of(r) == want.dtype
        _check_value(r, want, host_of)
    r = f(d, keepdims=True)
    assert type(r) is array_type and tuple(r.shape) == (1,) and dtype_of(r) == want.dtype
    _check_value(r[0], want, host_of)
    if name in INT_AXIS:
        return
    m = to_device(h.reshape(30, 10))
    want2 = f(h.reshape(30, 10), backend="cpu")
    for axis in (None, (0, 1), (1, 0), (-1, -2)):
        r = f(m, axis=axis)
        assert type(r) is array_type and r.shape == () and dtype_of(r) == want2.dtype
        _check_value(r, want2, host_of)
    r = f(m, keepdims=True)
    assert type(r) is array_type and tuple(r.shape) == (1, 1)
    r = f(m, axis=(0, 1), device_result=False)
    assert isinstance(r, np.generic) and r.dtype == want2.dtype


@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_tuple_where_empty_and_host_results_of_device_inputs(kind):
    """minmax: a pair of 0-d arrays of the library (False: NumPy scalars).
    ``where=``, an empty input, ``dtype=``: the same kind of result. Host values
    stay host values: ``pyreduce.Reduce``, the ``cpu`` backend, a tuple
    accumulator of ``reduce``, ``out=``."""
    to_device, array_type, dtype_of, host_of = _followed(kind)
    h = RESULT_DATA["float32"]
    d = to_device(h)
    lo, hi = pyreduce.minmax(d)
    assert type(lo) is array_type and type(hi) is array_type and lo.shape == ()
    assert (host_of(lo)[()], host_of(hi)[()]) == (h.min(), h.max())
    lo, hi = pyreduce.minmax(d, device_result=False)
    assert isinstance(lo, np.float32) and (lo, hi) == (h.min(), h.max())
    m = h > 2
    r = pyreduce.sum(d, where=m)
    assert type(r) is array_type and r.shape == () and host_of(r) == h.sum(where=m)
    r = pyreduce.mean(d, where=to_device(m))
    assert type(r) is array_type
    np.testing.assert_allclose(host_of(r), h[m].mean(), rtol=1e-6)
    r = pyreduce.mean(d, dtype=np.float64)
    assert type(r) is array_type and dtype_of(r) == np.float64
    e = to_device(np.zeros(0, np.float32))
    r = pyreduce.sum(e)
    assert type(r) is array_type and dtype_of(r) == np.float32 and host_of(r) == 0
    r = pyreduce.max(e, initial=-2.0)
    assert type(r) is array_type and host_of(r) == -2.0
    r = pyreduce.Reduce(lambda a, b: a + b)(d)
    assert isinstance(r, np.float32) and r == h.sum()
    r = pyreduce.sum(d, backend="cpu")
    assert isinstance(r, np.float32)
    pair = pyreduce.reduce(d, lambda a, b: a if a[0] >= b[0] else b, map=lambda i, v: (v, i),
                           identity=(np.float32(-np.inf), -1))
    assert isinstance(pair, tuple) and isinstance(pair[1], np.integer)
    out = np.zeros(1, np.float64)
    assert pyreduce.sum(d, dtype=np.float64, out=out) is out and out[0] == h.sum()
    dout = to_device(np.zeros(1, np.float64))
    assert pyreduce.sum(d, dtype=np.float64, out=dout) is dout
    assert host_of(dout)[0] == h.sum()


def test_cupy_results_are_ordered_on_the_current_stream():
    """A CuPy input's 0-d result is written on the stream the reduction runs on,
    CuPy's current one by default: work queued after it on that stream sees it,
    with no wait on the host in between; a loop of 100 reductions accumulates on
    the device and is read once."""
    cp = pytest.importorskip("cupy")
    h = np.random.default_rng(21).standard_normal(2**22).astype(np.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        x = cp.asarray(h)
        x *= 2  # still queued when the reduction is called
        total = cp.zeros((), cp.float64)
        for _ in range(100):
            r = pyreduce.sum(x, dtype=np.float64)
            assert isinstance(r, cp.ndarray)
            total += r
        stream.synchronize()
    np.testing.assert_allclose(float(total), 100 * (2 * h).sum(dtype=np.float64), rtol=1e-6)


def test_torch_repeats_of_spare_bytes_or_more_take_the_spare_of_the_call_before():
    """A tensor's repeat of at least SPARE_BYTES (inside the L2 too) returns
    the result tensor its call before made after that call's launch
    (``pyreduce.backends.results.TorchResults``), each call its own tensor with
    its own value, also on another current stream; below it no spare is kept."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    from pyreduce.backends import results
    from pyreduce.backends.express import SPARE_BYTES

    results._TORCH_SPARES.clear()
    m = SPARE_BYTES // 4 - 1
    small = torch.arange(m, dtype=torch.int32, device="cuda")
    for _ in range(3):
        assert int(pyreduce.sum(small)) == m * (m - 1) // 2
    assert not results._TORCH_SPARES
    n = SPARE_BYTES // 4
    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randint(-1000, 1000, (n,), device="cuda", generator=g, dtype=torch.int32)
    outs, values = [], []
    for k in range(6):
        spare = [t for t, _ in results._TORCH_SPARES.values()]
        y = x + k  # each call its own data: its own value
        r = pyreduce.max(y)
        if k >= 2:  # a repeat: the spare the call before left
            assert len(spare) == 1 and r is spare[0]
        outs.append(r)
        values.append(int(y.max()))
    assert len({t.data_ptr() for t in outs}) == len(outs)
    assert [int(t) for t in outs] == values
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        on_side = [pyreduce.max(x + k) for k in range(4)]
        torch.cuda.current_stream().synchronize()
    assert [int(t) for t in on_side] == [int(x.max()) + k for k in range(4)]
    keys = {key[1] for key in results._TORCH_SPARES}
    assert side.cuda_stream in keys and len({t.data_ptr() for t in on_side + outs}) == 10


def test_torch_results_stay_on_their_device():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    t = torch.arange(10_000, dtype=torch.float32, device="cuda") % 7  # exact sums
    r = pyreduce.max(t)
    assert isinstance(r, torch.Tensor) and r.device == t.device and r.dim() == 0
    assert r.dtype == torch.float32 and bool(r == t.max())
    acc = torch.zeros((), device="cuda")
    for _ in range(100):
        acc = acc + pyreduce.sum(t)  # tensor arithmetic on the 0-d results
    assert float(acc) == 100 * float(t.double().sum())
    b = t.to(torch.bfloat16)
    r = pyreduce.sum(b)
    assert isinstance(r, torch.Tensor) and r.dtype == torch.float32
    r = pyreduce.argmax(t)
    assert isinstance(r, torch.Tensor) and r.dtype == torch.int64 and int(r) == int(t.argmax())


def test_numba_and_other_device_inputs_keep_host_scalars():
    """A Numba device array's reduction to one value is a NumPy scalar (also for
    an ``axis`` covering every axis), its ``keepdims`` and ``axis=`` results
    Numba device arrays; a DLPack-only producer's (JAX's kind) the same."""
    cuda = cuda_module()
    h = RESULT_DATA["float64"].reshape(30, 10)
    d = cuda.to_device(h)
    for f in (pyreduce.sum, pyreduce.max, pyreduce.mean, pyreduce.argmax,
              pyreduce.count_nonzero):
        want = f(h, backend="cpu")
        r = f(d)
        assert isinstance(r, np.generic) and r.dtype == want.dtype
    assert isinstance(pyreduce.sum(d, axis=(0, 1)), np.float64)
    assert cuda.is_cuda_array(pyreduce.sum(d, keepdims=True))
    assert cuda.is_cuda_array(pyreduce.sum(d, axis=1))
    r = pyreduce.sum(d, device_result=True)
    assert cuda.is_cuda_array(r) and r.shape == ()
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    t = torch.arange(1000, dtype=torch.float64, device="cuda")
    r = pyreduce.sum(_DLPackOnly(t))
    assert isinstance(r, np.float64) and r == 499500.0


# --------------------------------------------------------------------------
# More than 2**32 elements


@pytest.fixture
def free_gpu_memory():
    yield
    gc.collect()
    try:
        cuda_module().current_context().memory_manager.deallocations.clear()
    except AttributeError:  # an external memory manager: nothing pending here
        pass


def _fill_int8_pattern(n):
    """A device int8 array with x[i] = i % 200 - 100, filled on the device."""
    cuda = cuda_module()

    @cuda.jit
    def fill(x, n):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, n, stride):
            x[i] = (i % 200) - 100

    x = cuda.device_array(n, dtype=np.int8)
    fill[4096, 256](x, n)
    cuda.synchronize()
    return x


@pytest.mark.slow
def test_sum_of_more_than_2_pow_32_int8(free_gpu_memory):
    n = 2**32 + 12345
    x = _fill_int8_pattern(n)
    q, r = divmod(n, 200)
    want = q * sum(k - 100 for k in range(200)) + sum(k - 100 for k in range(r))
    # plant values past index 2**32 and at the very end
    hi = 2**32 + 7
    want += (-128 - ((hi % 200) - 100)) + (127 - (((n - 1) % 200) - 100))
    x[hi] = -128
    x[n - 1] = 127
    got = pyreduce.sum(x, backend="cuda")
    assert got.dtype == np.int64 and int(got) == want
    for variant in VARIANTS:
        assert int(pyreduce.sum(x, backend="cuda", variant=variant)) == want
    assert pyreduce.reduce(x, lambda a, b: b, backend="cuda") == 127
    del x


@pytest.mark.slow
def test_max_of_more_than_2_pow_31_float32(free_gpu_memory):
    cuda = cuda_module()
    n = 2**31 + 1000

    @cuda.jit
    def fill(x, n):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, n, stride):
            x[i] = np.float32(i % 1000) * np.float32(0.001)

    x = cuda.device_array(n, dtype=np.float32)
    fill[4096, 256](x, n)
    cuda.synchronize()
    x[n - 3] = 5.0
    for variant in VARIANTS:
        assert pyreduce.max(x, backend="cuda", variant=variant) == np.float32(5.0)
    x[n - 3] = 0.5
    x[2**31 + 17] = 7.0
    assert pyreduce.max(x, backend="cuda") == np.float32(7.0)
    x[n - 1] = np.nan
    assert np.isnan(pyreduce.max(x, backend="cuda"))
    del x
