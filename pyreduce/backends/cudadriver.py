"""What the ``cuda`` backend asks of the CUDA driver directly, through
``cuda.bindings``: whether a GPU is there, the current context, the device's
attributes, and the library's own small buffers (scratch and mapped result
slots).

Importing numba-cuda takes about a second; a process whose kernels are all in
the disk cache (:mod:`pyreduce.backends.cubins`) needs none of it to reduce a
CuPy or PyTorch array: the decisions made here are those Numba would make (the
primary context of device 0 where no context is current, as Numba makes it;
device attributes by the same names), so Numba, when a later call needs it,
finds the same context.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import weakref

import numpy as np


__all__ = ["gpu_present", "ensure_context", "attribute", "device_name", "compute_capability",
           "cuda_driver", "check_driver", "current_device", "device_to_use",
           "DeviceMemory", "MappedMemory"]


def gpu_present(toolchain) -> bool | None:
    """True when the driver finds a GPU, numba-cuda is installed and its NVVM
    was seen here before (``toolchain()``, :func:`pyreduce.backends.cubins.toolchain`,
    is not None); None when this cannot be told without Numba (the simulator
    asked for, a Numba config file, numba-cuda already imported, or no NVVM seen
    yet); False without a GPU."""
    if "numba.cuda" in sys.modules or os.path.exists(".numba_config.yaml"):
        return None
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0"):
        return None
    from importlib.util import find_spec

    try:
        if find_spec("numba_cuda") is None:
            return None
    except ImportError:  # a finder that refuses it: numba-cuda is not to be had
        return None
    try:
        cu = cuda_driver()
        err, = cu.cuInit(0)
        if int(err):
            return False
        err, count = cu.cuDeviceGetCount()
    except Exception:  # no libcuda: no GPU
        return False
    if int(err) or count < 1:
        return False
    return True if toolchain() is not None else None


def ensure_context() -> int:
    """The device of this thread's CUDA context; where none is current, the
    primary context of device 0 is retained and made current (what Numba does)."""
    cu = cuda_driver()
    err, dev = cu.cuCtxGetDevice()
    if int(err):
        check_driver(cu.cuInit(0))
        err, device = cu.cuDeviceGet(0)
        check_driver(err)
        err, ctx = cu.cuDevicePrimaryCtxRetain(device)
        check_driver(err)
        check_driver(cu.cuCtxSetCurrent(ctx))
        err, dev = cu.cuCtxGetDevice()
        check_driver(err)
    return int(dev)


def attribute(device: int, name: str, default: int | None = None) -> int:
    """``cuDeviceGetAttribute`` of ``CU_DEVICE_ATTRIBUTE_<name>`` (``default``
    where the driver does not know the attribute)."""
    cu = cuda_driver()
    which = getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}", None)
    if which is not None:
        err, value = cu.cuDeviceGetAttribute(which, device)
        if not int(err):
            return int(value)
    if default is None:
        raise RuntimeError(f"the CUDA driver does not report {name} of device {device}")
    return default


def device_name(device: int) -> str:
    err, name = cuda_driver().cuDeviceGetName(256, device)
    check_driver(err)
    return name.split(b"\0", 1)[0].decode()


@functools.lru_cache(maxsize=None)
def compute_capability(device: int) -> tuple:
    return (attribute(device, "COMPUTE_CAPABILITY_MAJOR"),
            attribute(device, "COMPUTE_CAPABILITY_MINOR"))


def _free(function, pointer) -> None:
    function(pointer)  # an error (the context gone at exit) is returned, not raised


class DeviceMemory:
    """``nbytes`` of device memory in the current context (``cuMemAlloc``), zeroed
    if asked (complete on return), freed when the object goes."""

    __slots__ = ("ptr", "nbytes", "__weakref__")

    def __init__(self, nbytes: int, zeroed: bool = False):
        cu = cuda_driver()
        ensure_context()  # a thread's first reduction may come before any context
        err, ptr = cu.cuMemAlloc(max(1, nbytes))
        check_driver(err)
        self.ptr, self.nbytes = int(ptr), nbytes
        weakref.finalize(self, _free, cu.cuMemFree, self.ptr).atexit = False
        if zeroed and nbytes:
            zeros = np.zeros(nbytes, np.uint8)
            check_driver(cu.cuMemcpyHtoD(self.ptr, zeros.ctypes.data, nbytes))


class MappedMemory:
    """``nbytes`` of pinned host memory the device writes directly
    (``cuMemHostAlloc`` with ``DEVICEMAP``): ``host`` is its NumPy view of
    ``dtype``, ``ptr`` its device address."""

    __slots__ = ("ptr", "host", "__weakref__")

    def __init__(self, count: int, dtype: np.dtype):
        import ctypes

        cu = cuda_driver()
        ensure_context()
        nbytes = max(1, count * dtype.itemsize)
        err, host = cu.cuMemHostAlloc(nbytes, cu.CU_MEMHOSTALLOC_DEVICEMAP)
        check_driver(err)
        host = int(host)
        weakref.finalize(self, _free, cu.cuMemFreeHost, host).atexit = False
        err, ptr = cu.cuMemHostGetDevicePointer(host, 0)
        check_driver(err)
        self.ptr = int(ptr)
        raw = (ctypes.c_byte * nbytes).from_address(host)
        self.host = np.frombuffer(raw, dtype=dtype, count=count)


_CU = None
#: ``CUresult.CUDA_SUCCESS``, once :func:`cuda_driver` has imported the bindings
SUCCESS = None


def current_device() -> int:
    """The device of this thread's CUDA context, making the primary context of
    device 0 current first (as Numba would) if the thread has none yet."""
    cu = cuda_driver()
    err, dev = cu.cuCtxGetDevice()
    if int(err):
        return ensure_context()
    return int(dev)


def device_to_use() -> int:
    """The device a reduction in this thread would use (:func:`current_device`),
    without making a context current where there is none: the driver only
    initialised, for questions that need no context (a device's name and
    attributes). Creating the primary context takes about 0.1 s, which a host
    array that the cpu backend reduces need never pay."""
    cu = cuda_driver()
    err, dev = cu.cuCtxGetDevice()
    if not int(err):
        return int(dev)
    check_driver(cu.cuInit(0))
    err, device = cu.cuDeviceGet(0)
    check_driver(err)
    return int(device)


def cuda_driver():
    """``cuda.bindings.driver``, imported on first use (the simulator has none)."""
    global _CU, SUCCESS
    if _CU is None:
        from cuda.bindings import driver

        SUCCESS = driver.CUresult.CUDA_SUCCESS
        _CU = driver
    return _CU


_ORDER_LOCK = threading.Lock()
#: one event a context (its handle's int), recorded on a default stream and
#: waited for by another: :func:`order_after_default`
_ORDER_EVENTS: dict = {}


def order_after_default(default: int, stream: int) -> None:
    """Make ``stream`` wait, without the host waiting, for the work queued so far
    on the default stream ``default`` (1: the legacy one, 2: the per-thread one)
    where it is not ordered after it already. The legacy stream orders every
    blocking stream; a non-blocking one (every PyTorch stream, CuPy's
    ``non_blocking=True`` ones) runs beside it, and the per-thread stream
    orders only the legacy one. Nothing is done while ``stream`` is being
    captured into a graph (a replay is ordered by the stream it is launched on,
    and the default stream may not be touched during a capture), nor in a
    thread with no current context (a remembered call then takes the full
    path, which makes one current and orders the read itself)."""
    cu = cuda_driver()
    handle = cu.CUstream(stream)
    err, status = cu.cuStreamIsCapturing(handle)  # first: a capturing stream's
    check_driver(err)  # flags may not be asked for
    if status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
        return
    if default == 1:
        err, flags = cu.cuStreamGetFlags(handle)
        check_driver(err)
        if not int(flags) & int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING):
            return  # a blocking stream: the legacy stream orders it already
    err, ctx = cu.cuCtxGetCurrent()
    check_driver(err)
    if not int(ctx):
        return
    with _ORDER_LOCK:  # one event a context: record and wait before another records
        event = _ORDER_EVENTS.get(int(ctx))
        if event is None or _failed(cu.cuEventRecord(event, cu.CUstream(default))):
            # none yet, or one of a context since destroyed at this address
            err, event = cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
            check_driver(err)
            _ORDER_EVENTS[int(ctx)] = event
            check_driver(cu.cuEventRecord(event, cu.CUstream(default)))
        check_driver(cu.cuStreamWaitEvent(handle, event, 0))


def _failed(result) -> bool:
    """Whether a driver call's ``result`` (as :func:`check_driver` takes it) is an error."""
    return bool(int(result[0] if isinstance(result, tuple) else result))


def check_driver(result) -> None:
    """Raise RuntimeError, naming the error, unless a driver call's ``result``
    (a CUresult, or a tuple that starts with one) is success."""
    if _failed(result):
        err = result[0] if isinstance(result, tuple) else result
        cu = cuda_driver()
        _, name = cu.cuGetErrorName(cu.CUresult(int(err)))
        raise RuntimeError(f"CUDA driver call failed: {name.decode() if name else err}")
