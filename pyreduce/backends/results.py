"""The arrays ``device_result=True`` returns: new device arrays of the input's
own library (CuPy, PyTorch or Numba), made fast enough for a small reduction.

A small result is cut from a *slab*, a larger allocation shared by thousands of
results (:class:`Slabs`), instead of being allocated alone:

* A Numba allocation is a ``cuMemAlloc``: about 24 us through Numba on an H100,
  as long as the whole rest of a small reduction, and Numba frees memory in
  batches of ``cuMemFree``, each of which waits for the device.
* ``cupy.empty(())`` goes through CuPy's memory pool: about 2 us on an H100's
  host, against under 1 us for a 0-d array on a slab's memory.

Every result keeps its slab alive, and a slab is given back (to CuPy's pool, or
freed by Numba) with the last of them, so a program that keeps one result holds
one slab (:attr:`Slabs.SLAB_BYTES`). CuPy's pool orders the reuse of memory by
the stream it was allocated for, so CuPy slabs are per device and stream: a slot
is written only by work on its slab's stream. PyTorch results come from
PyTorch's caching allocator, which is as fast.

A result is made in two steps (:class:`Results`): its memory first, whose
address the kernel is launched with, then, while the kernel runs, the array
object around it.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading

import numpy as np

from ..interop import c_strides

__all__ = ["Slabs", "Results", "maker", "parts", "NUMBA_SLABS", "CUPY_SLABS"]


class Slabs:
    """Small allocations carved out of larger ones: one open slab per device,
    stream and slot size (a multiple of :attr:`ALIGN`), cut into equal slots.
    ``allocate(device, stream, nbytes)`` makes a slab: ``(owner, address)``,
    where ``owner`` keeps the memory alive. A slot is taken without a lock (the
    next value of the slab's counter); only making a slab takes one."""

    SLAB_BYTES = 1 << 16
    MAX_BYTES = 256
    ALIGN = 16  # the widest of a result's fields, complex128 included
    #: open slabs kept (streams come and go; a dropped slab lives on in its results)
    OPEN_LIMIT = 64

    def __init__(self, allocate):
        self._allocate = allocate
        self._lock = threading.Lock()
        # (device, stream, slot bytes) -> (owner, address, slot counter, slots)
        self._open: dict = {}

    def carve(self, nbytes: int, device: int, stream: int = 0):
        """``(owner, address)`` of ``nbytes`` new bytes on ``device`` for work on
        ``stream``, or None if ``nbytes`` is not in 1..:attr:`MAX_BYTES`."""
        if not 0 < nbytes <= self.MAX_BYTES:
            return None
        size = -(-nbytes // self.ALIGN) * self.ALIGN
        slab = self._open.get((device, stream, size))
        if slab is not None:
            i = next(slab[2])  # atomic: no two callers get the same slot
            if i < slab[3]:
                return slab[0], slab[1] + i * size
        return self._new_slab(device, stream, size)

    def _new_slab(self, device, stream, size):
        """The first slot of a new slab (or a free one of a slab another thread
        has just made)."""
        key = (device, stream, size)
        with self._lock:
            slab = self._open.get(key)
            if slab is not None:
                i = next(slab[2])
                if i < slab[3]:
                    return slab[0], slab[1] + i * size
            if len(self._open) >= self.OPEN_LIMIT:
                self._open.clear()
            owner, address = self._allocate(device, stream, self.SLAB_BYTES)
            self._open[key] = (owner, address, itertools.count(1), self.SLAB_BYTES // size)
        return owner, address


def _numba_slab(device, stream, nbytes):
    from numba import cuda

    with cuda.gpus[device]:
        mem = cuda.current_context().memalloc(nbytes)
    return mem, mem.device_pointer_value


def _cupy_slab(device, stream, nbytes):
    import cupy

    # the pool files the memory under the current stream: make it the slab's
    on = cupy.cuda.ExternalStream(stream) if stream else cupy.cuda.Stream.null
    with cupy.cuda.Device(device), on:
        memptr = cupy.cuda.alloc(nbytes)
    return memptr.mem, memptr.ptr


#: Numba slabs: one per device (``cuMemAlloc`` is not stream-ordered).
NUMBA_SLABS = Slabs(_numba_slab)
#: CuPy slabs, per device and stream.
CUPY_SLABS = Slabs(_cupy_slab)


#: (shape, dtype) -> the attributes, but its memory, of a small Numba array
#: made by Numba's constructor (see NumbaResults)
_NUMBA_LIKE: dict = {}
_NUMBA_LIKE_LIMIT = 256


class Results:
    """The device arrays of one library that results are made as, in two steps
    so that a kernel can be launched between them: :meth:`reserve` gives the
    address the kernel writes and a token that keeps that memory alive,
    :meth:`array` the array around it. A call's host time before its launch is
    what a ready result waits for, and making a CuPy or Numba array object is
    a good part of a repeat's (``bench/call_stages.py`` times the stages).
    ``maker(shape, dtype, device, stream, like)`` does both at once."""

    __slots__ = ()

    def reserve(self, shape: tuple, dtype: np.dtype, device: int, stream: int, like=None,
                current=None):
        """``(token, address)``: memory for a result of ``shape`` and ``dtype``
        on ``device`` for work on ``stream`` (``like``: the input array;
        ``current``: its library's current stream when it was read, the
        interface's handle)."""
        raise NotImplementedError

    def array(self, token, shape: tuple, dtype: np.dtype, address: int):
        """The array of :meth:`reserve`'s ``token`` and ``address``."""
        return token

    def __call__(self, shape, dtype: np.dtype, device: int, stream: int, like=None):
        """``(array, address)``: a new result, made at once."""
        token, address = self.reserve(shape, dtype, device, stream, like)
        return self.array(token, shape, dtype, address), address


class NumbaResults(Results):
    """New Numba device arrays, on a slab where they are small.

    Numba's ``DeviceNDArray`` constructor works out the array's layout anew each
    time (3.7 us for a 0-d array on a 2-core host; 1.7 us copied). The first
    small array of a shape and dtype is made by it; later ones copy its
    attributes (what this Numba's constructor set, whatever they are) and get
    their own memory."""

    __slots__ = ()

    def reserve(self, shape, dtype, device, stream, like=None, current=None):
        nbytes = math.prod(shape) * dtype.itemsize
        cut = NUMBA_SLABS.carve(nbytes, device)
        if cut is None:  # not small: an array of its own
            cuda = _numba()[0]
            arr = cuda.device_array(shape, dtype=dtype)
            return arr, arr.device_ctypes_pointer.value or 0
        return cut[0], cut[1]  # the slab's memory: the token keeps it alive

    def array(self, token, shape, dtype, address):
        cuda, devicearray, driver = _numba()
        if isinstance(token, devicearray.DeviceNDArray):
            return token
        nbytes = math.prod(shape) * dtype.itemsize
        view = driver.MemoryPointer(token.context, driver.binding.CUdeviceptr(address), nbytes,
                                    owner=token)
        like_attrs = _NUMBA_LIKE.get((shape, dtype))
        if like_attrs is None:
            arr = devicearray.DeviceNDArray(shape, c_strides(shape, dtype.itemsize), dtype,
                                            gpu_data=view)
            if len(_NUMBA_LIKE) >= _NUMBA_LIKE_LIMIT:
                _NUMBA_LIKE.clear()
            # without its memory: a kept template must not keep a slab alive
            _NUMBA_LIKE[shape, dtype] = {k: v for k, v in vars(arr).items() if k != "gpu_data"}
            return arr
        arr = object.__new__(devicearray.DeviceNDArray)
        arr.__dict__.update(like_attrs)
        arr.gpu_data = view
        return arr


class CupyResults(Results):
    """New CuPy arrays, on a slab of the stream's where they are small."""

    __slots__ = ()

    def reserve(self, shape, dtype, device, stream, like=None, current=None):
        ndarray, memory_pointer, empty = _CUPY or _cupy()
        cut = CUPY_SLABS.carve(math.prod(shape) * dtype.itemsize, device, stream)
        if cut is None:  # not small: an array of its own
            arr = empty(shape, dtype=dtype)
            return arr, arr.data.ptr
        return cut[0], cut[1]  # the slab's memory: the token keeps it alive

    def array(self, token, shape, dtype, address):
        ndarray, memory_pointer, empty = _CUPY
        if type(token) is ndarray:
            return token
        return ndarray(shape, dtype, memory_pointer(token, address - token.ptr))


_TORCH_DTYPES: dict = {}

#: (device, PyTorch's current stream, shape, dtype) -> ``(tensor, address)``, a
#: result tensor made after an earlier call's launch for the next call's
#: (see :class:`TorchResults`)
_TORCH_SPARES: dict = {}
_TORCH_SPARES_LIMIT = 64


class TorchResults(Results):
    """New PyTorch tensors on the device of ``like`` (the input tensor), from
    PyTorch's caching allocator, by ``like.new_empty``: the input's device
    without the device object ``like.device`` makes, and fewer arguments for
    PyTorch to parse than ``torch.empty(..., device=...)``.

    PyTorch's allocator gives the address only with the tensor, so the tensor
    of a result in two steps (:meth:`reserve`, then :meth:`array` after the
    launch) would be made before the launch, where a ready result waits for it
    (2 to 4 us of an H200 host's). Instead :meth:`array` makes, while the
    kernel runs, the tensor the next call of the same shape, dtype, device and
    current stream takes in :meth:`reserve`: a tensor of its own (no storage
    shared with another result), allocated on PyTorch's current stream, as
    ``new_empty`` at the call would (none while the stream is captured into a
    CUDA graph). One spare of a few bytes is kept per such
    key, at most :data:`_TORCH_SPARES_LIMIT` of them; a result made at once
    (``maker(...)(...)``, the full path), or one whose caller does not name
    the current stream (``current``), neither takes nor leaves one."""

    __slots__ = ()

    def reserve(self, shape, dtype, device, stream, like=None, current=None):
        tdt = _torch_dtype_for(dtype)
        # keyed by the tensor's own device (the thread's may be another), as
        # new_empty allocates; none while a CUDA graph is captured: a result
        # captured there must come from the graph's own pool, kept for replays
        key = (None if current is None or _capturing()
               else (like.get_device(), current, shape, tdt))
        spare = _TORCH_SPARES.pop(key, None)  # atomic: no two calls take the same one
        if spare is None:
            arr = like.new_empty(shape, dtype=tdt)
            return (arr, like, key), arr.data_ptr()
        return (spare[0], like, key), spare[1]

    def array(self, token, shape, dtype, address):
        arr, like, key = token
        if key is not None:
            try:
                spare = like.new_empty(shape, dtype=key[-1])  # the key's dtype
            except RuntimeError:  # out of memory, say: the next call makes its own
                return arr
            if len(_TORCH_SPARES) >= _TORCH_SPARES_LIMIT:
                _TORCH_SPARES.clear()
            _TORCH_SPARES[key] = (spare, spare.data_ptr())
        return arr

    def __call__(self, shape, dtype, device, stream, like=None):
        arr = like.new_empty(shape, dtype=_torch_dtype_for(dtype))
        return arr, arr.data_ptr()


def _capturing() -> bool:
    """Whether PyTorch's current stream is being captured into a CUDA graph."""
    global _capturing
    import torch

    try:  # later calls go straight to PyTorch's own
        _capturing = torch._C._cuda_isCurrentStreamCapturing
    except AttributeError:
        # without a way to tell, as if captured: no spares
        _capturing = getattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    return _capturing()


def _torch_dtype_for(dtype: np.dtype):
    """PyTorch's dtype for a NumPy result ``dtype`` (the reverse of
    :func:`pyreduce.interop`'s reading)."""
    tdt = _TORCH_DTYPES.get(dtype)
    if tdt is None:
        import torch

        tdt = _TORCH_DTYPES[dtype] = torch.from_numpy(np.empty(0, dtype)).dtype
    return tdt


def drop_spares() -> None:
    """Let go of the spare PyTorch results (:class:`TorchResults`): their memory
    goes back to PyTorch's allocator (:func:`pyreduce.cache_clear`)."""
    _TORCH_SPARES.clear()


numba_result, cupy_result, torch_result = NumbaResults(), CupyResults(), TorchResults()


def maker(kind: str, dtype: np.dtype) -> Results:
    """The :class:`Results` for an input of ``kind`` and a result of ``dtype``.
    Records are Numba arrays whatever the input."""
    if dtype.names is None:
        if kind == "cupy":
            return cupy_result
        if kind == "torch":
            return torch_result
    return numba_result


def parts(arr, count: int, shape: tuple) -> tuple:
    """The ``count`` elements of a 1-D device array (of any library) as views of
    ``shape``: the results one kernel wrote side by side (minmax's pair)."""
    return tuple(arr[k:k + 1].reshape(shape) for k in range(count))


@functools.lru_cache(maxsize=None)
def _numba():
    """numba.cuda and the driver modules, imported once, not on every result."""
    from numba import cuda
    from numba.cuda.cudadrv import devicearray, driver

    return cuda, devicearray, driver


_CUPY = None


def _cupy():
    """CuPy's array class, memory pointer and ``empty``, looked up once."""
    global _CUPY
    import cupy

    _CUPY = (cupy.ndarray, cupy.cuda.MemoryPointer, cupy.empty)
    return _CUPY
