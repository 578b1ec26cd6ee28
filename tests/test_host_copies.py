"""The CUDA backend's copies of device memory to the host, run on the CPU: a
stand-in driver whose "device pointers" are host addresses, so the byte
arithmetic (negative strides, views that start mid-buffer, bfloat16 as its bits)
is checked without a GPU. The same code runs on a GPU in tests/test_gpu.py."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from pyreduce.backends import cudadriver, fastpath
from pyreduce.dtypes import BFLOAT16
from pyreduce.interop import DeviceFields, parse_dlpack


class _HostDriver:
    """``cuMemcpyDtoH`` as ``memmove``; every call succeeds."""

    def __init__(self):
        self.copies = []

    def cuCtxGetDevice(self):
        return (0, 0)

    def cuMemcpyDtoH(self, dst, src, nbytes):
        self.copies.append(nbytes)
        ctypes.memmove(dst, src, nbytes)
        return (0,)


@pytest.fixture
def driver(monkeypatch):
    d = _HostDriver()
    monkeypatch.setattr(fastpath, "cuda_driver", lambda: d)
    monkeypatch.setattr(cudadriver, "cuda_driver", lambda: d)
    return d


def _views(a):
    yield a
    yield a[::-1]
    yield a[2:-1:3]
    if a.ndim > 1:
        yield a.T
        yield a[::-2, 1::2]
        yield a[:, ::-1].T


@pytest.mark.parametrize("shape", [(37,), (6, 9), (4, 5, 3)])
@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.float64, np.complex64])
def test_fields_to_host_reads_any_strides(driver, shape, dtype):
    rng = np.random.default_rng(sum(shape))
    a = (rng.standard_normal(shape) * 100).astype(dtype)
    before = a.copy()
    for v in _views(a):
        got = fastpath.fields_to_host(parse_dlpack(v.__dlpack__()))
        assert got.flags.c_contiguous and got.dtype == v.dtype
        assert np.array_equal(got, v)
        # one copy of the bytes the view spans, never more than the array
        assert driver.copies[-1] <= a.nbytes
    assert np.array_equal(a, before)


def test_fields_to_host_bfloat16_and_empty(driver):
    bits = np.arange(40, dtype=np.uint16).reshape(5, 8)
    f = DeviceFields(bits.ctypes.data, bits.shape, None, BFLOAT16, None)
    got = fastpath.fields_to_host(f)
    assert got.dtype == np.uint16 and np.array_equal(got, bits)
    empty = DeviceFields(0, (0, 3), None, np.dtype(np.float32), None)
    assert fastpath.fields_to_host(empty).shape == (0, 3)
    assert driver.copies == [bits.nbytes]
