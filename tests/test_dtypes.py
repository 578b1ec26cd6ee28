"""float16 (loaded, accumulated in float32), complex64/complex128 (sum, prod, user
ops) and any/all, on every backend, against NumPy and ``functools.reduce``."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import pyreduce

from oracles import on

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# one variant of each family, with the tree's shuffle tail (a complex shuffle by index)
VARIANTS = [None, "warp_shuffle", "shuffle_tail", "shared_tree"]


def last_nonzero(a, b):
    return b if b != 0 else a


@pytest.mark.parametrize("variant", VARIANTS)
def test_float16_is_accumulated_in_float32(backend, variant):
    rng = np.random.default_rng(1)
    h = rng.standard_normal(1500).astype(np.float16)
    exact = h.astype(np.float64).sum()
    for x in (h, h[1:], h[::-3]):  # aligned (vector loads), offset by one, strided
        want = x.astype(np.float64).sum()
        got = pyreduce.sum(x, **on(backend, variant))
        assert got.dtype == np.float32
        assert abs(float(got) - want) <= 1e-5 * np.abs(x.astype(np.float64)).sum() + 1e-6
        assert pyreduce.max(x, **on(backend, variant)) == np.float32(x.max())
        assert pyreduce.reduce(x, last_nonzero, **on(backend, variant)) == np.float32(
            functools.reduce(last_nonzero, x.tolist()))
    # a sum in float16 would stop at 2048: 2048 + 1 is 2048 in half precision
    assert np.float16(2048) + np.float16(1) == np.float16(2048)
    ones = np.ones(4097, dtype=np.float16)
    assert pyreduce.sum(ones, **on(backend, variant)) == 4097
    assert abs(exact) < 1e5


def test_float16_accumulator_refused(backend):
    with pytest.raises(TypeError,
                       match="float16 and bfloat16 are loaded and accumulated in float32"):
        pyreduce.sum(np.ones(4, np.float16), dtype=np.float16, **on(backend))
    assert pyreduce.sum(np.ones(4, np.float16), dtype=np.float64, **on(backend)).dtype == \
        np.float64


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
@pytest.mark.parametrize("variant", VARIANTS)
def test_complex_sum_prod_and_user_ops(backend, dt, variant):
    rng = np.random.default_rng(2)
    n = 700
    c = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    tol = 1e-4 if dt == np.complex64 else 1e-12
    got = pyreduce.sum(c, **on(backend, variant))
    assert got.dtype == dt and abs(got - c.astype(np.complex128).sum()) <= tol * n
    p = (1 + 0.01 * c[:200]).astype(dt)
    got = pyreduce.prod(p, **on(backend, variant))
    want = np.prod(p.astype(np.complex128))
    assert got.dtype == dt and abs(got - want) <= tol * 200 * abs(want)
    c[-5:] = 0
    got = pyreduce.reduce(c, last_nonzero, **on(backend, variant))
    assert got == c[-6]
    assert pyreduce.sum(c, initial=1 + 2j, **on(backend, variant)) == pytest.approx(
        complex(c.astype(np.complex128).sum()) + 1 + 2j, rel=tol, abs=tol * n)


def test_complex_refuses_orderings(backend):
    c = np.ones(5, np.complex64)
    for red in (pyreduce.max, pyreduce.min, pyreduce.nanmax):
        with pytest.raises(TypeError, match="not defined for dtype complex64"):
            red(c, **on(backend))
    if backend != "cpu":  # the cpu backend takes no kernel tuning
        with pytest.raises(ValueError, match="complex values are loaded one at a time"):
            kw = on(backend)
            kw["tuning"] = kw.get("tuning", pyreduce.Tuning()).replace(vector_loads=True)
            pyreduce.sum(c, **kw)


@pytest.mark.parametrize("dt", [np.bool_, np.int16, np.float32])
def test_any_and_all(backend, dt):
    rng = np.random.default_rng(3)
    for n in (0, 1, 65, 300):
        for density in (0.0, 0.02, 1.0):
            x = (rng.random(n) < density).astype(dt)
            a, b = pyreduce.any(x, **on(backend)), pyreduce.all(x, **on(backend))
            assert a.dtype == b.dtype == np.bool_
            assert (bool(a), bool(b)) == (bool(np.any(x)), bool(np.all(x))), (n, density)


# --------------------------------------------------------------------------
# bfloat16 (no NumPy dtype: ml_dtypes' on the host, PyTorch's and DLPack's on a GPU)


@pytest.mark.parametrize("variant", [None, "warp_shuffle", "shuffle_tail"])
def test_bfloat16_is_loaded_as_float32(backend, variant):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from pyreduce.dtypes import bfloat16_to_float32

    rng = np.random.default_rng(6)
    b = rng.standard_normal(1500).astype(ml_dtypes.bfloat16)
    before = b.copy()
    for x in (b, b[1:], b[::-2]):
        f = bfloat16_to_float32(x.view(np.uint16))
        assert np.array_equal(f, x.astype(np.float32))  # the conversion is exact
        got = pyreduce.sum(x, **on(backend, variant))
        assert got.dtype == np.float32
        assert abs(float(got) - f.astype(np.float64).sum()) <= 1e-5 * np.abs(f).sum()
        assert pyreduce.max(x, **on(backend, variant)) == f.max()
        assert pyreduce.reduce(x, last_nonzero, **on(backend, variant)) == \
            functools.reduce(last_nonzero, f.tolist())
        if variant != "shuffle_tail":  # a tree variant holds no tuple accumulator
            assert pyreduce.argmax(x, **on(backend, variant)) == np.argmax(f)
    assert np.array_equal(b.view(np.uint16), before.view(np.uint16))


def test_bfloat16_marker_arrays_are_its_bits(backend):
    # pyreduce.dtypes.BFLOAT16 (a NumPy array of its bits): read as ml_dtypes'
    # bfloat16 is (the simulator's kernels had read a structured element)
    from pyreduce.dtypes import BFLOAT16, bfloat16_to_float32

    bits = np.random.default_rng(8).integers(0x3f00, 0x4100, 700).astype(np.uint16)
    x = bits.view(BFLOAT16)
    f = bfloat16_to_float32(bits).astype(np.float64)
    for y, g in ((x, f), (x[::-3], f[::-3])):
        assert np.isclose(float(pyreduce.sum(y, **on(backend))), g.sum(), rtol=1e-5)
        assert pyreduce.max(y, **on(backend)) == g.max()
        assert pyreduce.argmin(y, **on(backend)) == np.argmin(g)
        assert np.isclose(float(pyreduce.mean(y, **on(backend))), g.mean(), rtol=1e-6)
    assert np.array_equal(x.view(np.uint16), bits)


def test_bfloat16_accumulator_refused(backend):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with pytest.raises(TypeError, match="bfloat16 .*accumulat"):
        pyreduce.sum(np.ones(4, np.float32), dtype=ml_dtypes.bfloat16, **on(backend))


# --------------------------------------------------------------------------
# DLPack


class _DLPackOnly:
    """A producer with nothing but the DLPack protocol (as some libraries have)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_capsules_are_read():
    from pyreduce.interop import parse_dlpack

    a = np.arange(60, dtype=np.int16).reshape(6, 10)[::2, 1:7]
    f = parse_dlpack(a.__dlpack__())
    assert f.ptr == a.ctypes.data and f.shape == a.shape and f.dtype == np.int16
    assert f.strides == a.strides
    c = np.ones(3, np.complex64)
    assert parse_dlpack(c.__dlpack__()).dtype == np.complex64


class _HostView:
    """An ``__cuda_array_interface__`` dict read as NumPy's ``__array_interface__``
    (the same layout), so a host array can stand in for device memory."""

    def __init__(self, cai):
        self.__array_interface__ = dict(cai, version=3)


@pytest.mark.parametrize("perm", [None, (1, 0), (2, 0, 1)])
def test_array_interface_describes_any_fields(perm):
    """How the CUDA backend hands Numba an input it cannot view itself
    (DLPack-only, bfloat16) or a permuted view of one: from its fields, with
    bfloat16 as its uint16 bits and C strides filled in where none are given."""
    from pyreduce.dtypes import BFLOAT16
    from pyreduce.interop import ArrayInterface, DeviceFields, parse_dlpack

    rng = np.random.default_rng(8)
    a = rng.integers(0, 2**16, (4, 6, 5), dtype=np.uint16)
    for x, strided in ((a, False), (a[::-1, 1::2, ::2], True)):
        x = x if perm is None or len(perm) == 3 else x[:, 0]
        x = x if strided else np.ascontiguousarray(x)
        f = parse_dlpack(x.__dlpack__()) if strided else DeviceFields(
            x.ctypes.data, x.shape, None, np.dtype(np.uint16), None)
        for dt in (np.dtype(np.uint16), BFLOAT16):
            f.dtype = dt
            cai = ArrayInterface(f, x, perm).__cuda_array_interface__
            assert cai["typestr"] == "<u2"
            got = np.asarray(_HostView(cai))
            assert np.array_equal(got, x if perm is None else x.transpose(perm))


def test_a_dlpack_host_producer_is_a_host_array(backend):
    a = np.random.default_rng(7).standard_normal((30, 7))
    x = _DLPackOnly(a[:, ::2])
    assert pyreduce.max(x, **on(backend)) == a[:, ::2].max()
    assert pyreduce.reduce(x, last_nonzero, **on(backend)) == a[:, ::2].ravel()[-1]


@pytest.mark.parametrize("where", ["host", "device"])
def test_complex_input_into_a_real_dtype_takes_the_real_parts(backend, where):
    """``sum``, ``prod`` and ``reduce`` of complex values with a real ``dtype=``:
    the real parts, cast as NumPy casts them, with NumPy's ComplexWarning once
    (pointing at the caller), to one value and along axes, on every backend
    and for device inputs (their kernels take the real part as they load)."""
    if where == "device" and backend == "cpu":
        pytest.skip("device inputs are a GPU backend's")
    rng = np.random.default_rng(11)
    x = rng.integers(-4, 5, (6, 70)) + 1j * rng.integers(-4, 5, (6, 70))
    small = np.ascontiguousarray(x[:2, :9])  # products that stay exact

    def calls(a, b):
        yield "sum", lambda ax: pyreduce.sum(a, axis=ax, dtype=np.float64, **on(backend)), \
            lambda ax: np.sum(x, axis=ax, dtype=np.float64)
        yield "sum int64", lambda ax: pyreduce.sum(a, axis=ax, dtype=np.int64, **on(backend)), \
            lambda ax: np.sum(x, axis=ax, dtype=np.int64)
        yield "prod", lambda ax: pyreduce.prod(b, axis=ax, dtype=np.float64, **on(backend)), \
            lambda ax: np.prod(small, axis=ax, dtype=np.float64)
        yield "reduce", lambda ax: pyreduce.reduce(a, last_nonzero, axis=ax,
                                                   dtype=np.float64, **on(backend)), \
            lambda ax: _left_fold(x.real, ax)

    if where == "device":
        from numba import cuda

        a, b = cuda.to_device(x), cuda.to_device(small)
    else:
        a, b = x, small
    for name, call, want in calls(a, b):
        for axis in (None, 0, 1):
            with pytest.warns(np.exceptions.ComplexWarning) as caught:
                got = call(axis)
            assert len(caught) == 1 and caught[0].filename == __file__, name
            got = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = np.asarray(want(axis))
            assert got.dtype == expected.dtype, (name, got.dtype)
            assert np.allclose(got, expected, rtol=1e-12), (name, axis, got, expected)


def _left_fold(real: np.ndarray, axis):
    """``last_nonzero`` (associative, not commutative) folded left to right
    along ``axis`` (None: every element)."""
    if axis is None:
        return functools.reduce(last_nonzero, real.ravel().tolist())
    return np.apply_along_axis(lambda lane: functools.reduce(last_nonzero, lane.tolist()),
                               axis, real)
