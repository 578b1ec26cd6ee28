"""Launching compiled kernels below Numba's dispatcher, on a GPU.

A call through Numba's dispatcher re-types every argument, wraps arrays in device
array objects and builds a launch configuration each time: tens of microseconds
before the GPU sees anything. Here a kernel is compiled once per argument
signature (by Numba), and each later launch hands ``cuda.core`` the argument list
already flattened the way Numba's array ABI lays it out:
``meminfo, parent, nitems, itemsize, data, shape, strides`` for a 1-D array, one
value per scalar. Arrays travel as :class:`DeviceView` (pointer, length, stride),
read straight from ``__cuda_array_interface__``.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np

__all__ = ["DeviceView", "view_of", "FastKernel", "core_stream", "read_scalar", "write_scalar"]


@dataclasses.dataclass(frozen=True)
class DeviceView:
    """A 1-D window of device memory. ``owner`` keeps the memory alive."""

    ptr: int
    size: int
    stride: int  # bytes, may be negative
    dtype: np.dtype
    owner: object = None

    @property
    def layout(self) -> str:
        return "C" if self.stride == self.dtype.itemsize else "A"

    def slice(self, start: int, stop: int) -> "DeviceView":
        return DeviceView(self.ptr + start * self.stride, stop - start, self.stride,
                          self.dtype, self.owner)

    def args(self) -> tuple:
        return (0, 0, self.size, self.dtype.itemsize, self.ptr, self.size, self.stride)

    def numba_type(self):
        from numba.cuda import types
        from numba.cuda.np.numpy_support import from_dtype

        return types.Array(from_dtype(self.dtype), 1, self.layout)


def view_of(x, dtype: np.dtype | None = None) -> DeviceView | None:
    """A view of a device array in C order, or None when that needs a copy (an N-D
    array that is not C-contiguous)."""
    cai = x.__cuda_array_interface__
    dt = np.dtype(dtype or cai["typestr"])
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    size = 1
    for extent in shape:
        size *= extent
    ptr = cai["data"][0] or 0
    _sync_producer(cai)
    if len(shape) == 1 and strides is not None:
        return DeviceView(ptr, size, strides[0], dt, x)
    if strides is not None:  # N-D with explicit strides: C-contiguous after all?
        expect = dt.itemsize
        for extent, stride in zip(reversed(shape), reversed(strides)):
            if extent > 1 and stride != expect:
                return None
            expect *= extent
    return DeviceView(ptr, size, dt.itemsize, dt, x)


def _sync_producer(cai) -> None:
    """CAI v3: a producer's stream other than the legacy (1) or per-thread (2)
    default must be synchronized before the data may be read (as Numba does)."""
    stream = cai.get("stream")
    if stream not in (None, 1, 2):
        from cuda.bindings import driver as cu

        cu.cuStreamSynchronize(stream)


_streams: dict = {}
_streams_lock = threading.Lock()


def core_stream(stream):
    """The ``cuda.core`` stream for a Numba stream (or 0), created once."""
    key = 0 if not stream else int(stream)
    found = _streams.get(key)
    if found is None:
        from numba.cuda.cudadrv.driver import _to_core_stream

        found = _to_core_stream(stream)
        with _streams_lock:
            _streams[key] = found
    return found


class FastKernel:
    """One compiled signature of a Numba kernel, launched through ``cuda.core``."""

    def __init__(self, dispatcher, argtypes: tuple):
        from cuda.core import LaunchConfig, launch

        compiled = dispatcher.compile(argtypes)
        self._kernel = compiled._codelibrary.get_cufunc().kernel
        self._launch = launch
        self._config = LaunchConfig
        self._configs: dict = {}

    def __call__(self, grid: int, block: int, stream, args: tuple) -> None:
        config = self._configs.get((grid, block))
        if config is None:
            config = self._configs[(grid, block)] = self._config(grid=grid, block=block)
        self._launch(core_stream(stream), config, self._kernel, *args)


def flatten_args(args) -> tuple:
    """Kernel arguments in Numba's ABI: views expand to seven values."""
    out = []
    for a in args:
        if isinstance(a, DeviceView):
            out.extend(a.args())
        else:
            out.append(int(a))
    return tuple(out)


def signature_key(args) -> tuple:
    """A cheap key for the argument types of ``args``: one per compiled signature."""
    return tuple((a.dtype.char, a.layout) if isinstance(a, DeviceView) else "i8" for a in args)


def signature(args) -> tuple:
    """The Numba argument types of ``args`` (views and int64 scalars)."""
    from numba.cuda import types

    return tuple(a.numba_type() if isinstance(a, DeviceView) else types.int64 for a in args)


_local = threading.local()


def read_scalar(view: DeviceView, stream):
    """Copy ``view[0]`` to the host and wait for it."""
    from cuda.bindings import driver as cu

    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = np.empty(16, dtype=np.uint8)  # holds any scalar
    nbytes = view.dtype.itemsize
    if stream:
        handle = int(stream)
        _check(cu.cuMemcpyDtoHAsync(buf.ctypes.data, view.ptr, nbytes, handle))
        _check(cu.cuStreamSynchronize(handle))
    else:
        _check(cu.cuMemcpyDtoH(buf.ctypes.data, view.ptr, nbytes))
    return buf[:nbytes].view(view.dtype)[0]


def write_scalar(view: DeviceView, value, stream) -> None:
    """Write ``value`` to ``view[0]`` (stream-ordered)."""
    from cuda.bindings import driver as cu

    host = np.asarray([value], dtype=view.dtype)
    if stream:
        _check(cu.cuMemcpyHtoDAsync(view.ptr, host.ctypes.data, host.nbytes, int(stream)))
        _check(cu.cuStreamSynchronize(int(stream)))  # `host` must outlive the copy
    else:
        _check(cu.cuMemcpyHtoD(view.ptr, host.ctypes.data, host.nbytes))


def _check(result) -> None:
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        from cuda.bindings import driver as cu

        _, name = cu.cuGetErrorName(err)
        raise RuntimeError(f"CUDA driver call failed: {name.decode() if name else err}")
