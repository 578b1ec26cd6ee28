"""Launching compiled kernels below Numba's dispatcher, on a GPU.

A call through Numba's dispatcher re-types every argument, wraps arrays in device
array objects and builds a launch configuration each time: tens of microseconds
before the GPU sees anything. Here a kernel is compiled once per argument
signature (by Numba), and each launch hands ``cuLaunchKernel`` a parameter
buffer prepared once, laid out the way Numba's array ABI expects:
``meminfo, parent, nitems, itemsize, data, shape, strides`` for a 1-D array, one
value per scalar. Arrays travel as :class:`DeviceView` (pointer, length, stride),
read straight from ``__cuda_array_interface__``.
"""

from __future__ import annotations

import math
import os
import sys
import threading

import numpy as np

from ..driver import INPUT, OFFSETS, OUTPUT, Ref
from ..dtypes import storage
from ..interop import device_fields
from . import cudadriver
from .cubins import function_handle
from .cudadriver import check_driver, cuda_driver, current_device

__all__ = [
    "DeviceView", "view_from", "view_of", "sync_producer", "stream_handle", "PreparedLaunch",
    "read_scalar", "write_scalar", "read_array", "write_array", "check_driver",
]


class DeviceView:
    """A 1-D window of device memory. ``owner`` keeps the memory alive. (A plain
    class: one is made on every call, and a frozen dataclass costs a microsecond.)"""

    __slots__ = ("ptr", "size", "stride", "dtype", "owner")

    def __init__(self, ptr: int, size: int, stride: int, dtype: np.dtype, owner=None):
        self.ptr, self.size, self.stride, self.dtype, self.owner = ptr, size, stride, dtype, owner

    def __repr__(self):
        return (f"DeviceView(ptr={self.ptr:#x}, size={self.size}, stride={self.stride}, "
                f"dtype={self.dtype})")

    @property
    def layout(self) -> str:
        return "C" if self.stride == self.dtype.itemsize else "A"

    def slice(self, start: int, stop: int) -> "DeviceView":
        return DeviceView(self.ptr + start * self.stride, stop - start, self.stride,
                          self.dtype, self.owner)

    def args(self) -> tuple:
        return (0, 0, self.size, self.dtype.itemsize, self.ptr, self.size, self.stride)

    def arg_type(self) -> tuple:
        """This view as a kernel argument's type (:mod:`pyreduce.backends.cubins`)."""
        return ("array", self.dtype, self.layout)


class MappedView(DeviceView):
    """A one-element result slot in pinned host memory that the device writes
    directly (:class:`pyreduce.backends.cudadriver.MappedMemory`): reading it back
    needs a stream synchronization, not a copy. ``host`` is its NumPy view."""

    __slots__ = ("host",)

    def __init__(self, mapped):
        super().__init__(mapped.ptr, 1, mapped.host.dtype.itemsize, mapped.host.dtype, mapped)
        self.host = mapped.host


#: read results through mapped pinned memory (True) or a device-to-host copy
MAPPED_RESULTS = True


def view_from(fields, owner, stream=0) -> DeviceView | None:
    """A view in C order of the device array ``owner`` described by ``fields``
    (:class:`pyreduce.interop.DeviceFields`), or None when that needs a copy (an
    N-D array that is not C-contiguous). Its read on ``stream`` is ordered after
    the producer's stream first (:func:`sync_producer`)."""
    dt, shape, strides = storage(fields.dtype), fields.shape, fields.strides
    sync_producer(fields, stream)
    size = 1
    for extent in shape:
        size *= extent
    if size <= 1:  # no stride to honour: producers report any for such arrays
        return DeviceView(fields.ptr, size, dt.itemsize, dt, owner)
    if len(shape) == 1 and strides is not None:
        return DeviceView(fields.ptr, size, strides[0], dt, owner)
    if strides is not None:  # N-D with explicit strides: C-contiguous after all?
        expect = dt.itemsize
        for extent, stride in zip(reversed(shape), reversed(strides)):
            if extent > 1 and stride != expect:
                return None
            expect *= extent
    return DeviceView(fields.ptr, size, dt.itemsize, dt, owner)


def sync_producer(fields, stream) -> None:
    """Order the read of an array on ``stream`` after the stream that produced it
    (``fields.stream``, the CUDA Array Interface's rule), where that is another
    one: a default stream (1, 2) by a wait of ``stream`` on it, which only a
    non-blocking ``stream`` needs (:func:`~pyreduce.backends.cudadriver.order_after_default`),
    any other stream by synchronizing it."""
    producer = fields.stream
    if producer is None or producer == stream:
        return
    if producer in (1, 2):
        if stream not in (0, 1, 2):
            cudadriver.order_after_default(producer, stream)
        return
    check_driver(cuda_driver().cuStreamSynchronize(producer))


def view_of(x) -> DeviceView | None:
    """:func:`view_from` for a device array of any kind."""

    return view_from(device_fields(x), x)


def stream_handle(stream) -> int:
    """The CUDA handle of a stream given as an int, a Numba stream, a CuPy stream
    (``.ptr``) or a PyTorch stream (``.cuda_stream``); 0 for the default stream."""
    if not stream:
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("ptr", "cuda_stream"):
        handle = getattr(stream, attr, None)
        if handle is not None:
            return int(handle)
    return int(stream)


class PreparedLaunch:
    """One step of a schedule (:mod:`pyreduce.driver`) bound to a workspace.

    Every argument in Numba's ABI is 8 bytes, so the parameters live in one int64
    array, with a second array of pointers to them (what ``kernelParams`` is). Per
    call only the input's pointer, length and stride, the output's pointer and a
    segmented reduction's offsets are written; the kernel is compiled by Numba
    once per input dtype and layout (and offsets dtype and layout).
    """

    def __init__(self, kernel, step, buffers):
        self.kernel, self.grid, self.block = kernel, step.grid, step.spec.block
        # where the placeholders' words start; -1: not an argument of this step
        self.input_at = self.output_at = -1
        self.offsets_at = None
        values, types = [], []
        for a in step.args:
            if a is INPUT or a is OUTPUT or a is OFFSETS:
                if a is INPUT:
                    self.input_at = len(values)
                elif a is OUTPUT:
                    self.output_at = len(values)
                else:
                    self.offsets_at = len(values)
                values.extend((0,) * 7)
                types.append(a)
                continue
            if isinstance(a, Ref):
                a = buffers[a.buffer].slice(a.start, a.stop)
            if isinstance(a, DeviceView):
                values.extend(a.args())
                types.append(a.arg_type())
            else:
                values.append(int(a))
                types.append("int64")
        # three words more than the kernel takes: the launcher's scratch and the
        # driver functions it calls (launch())
        self.values = np.array(values + [0, *driver_functions()], dtype=np.int64)
        # the parameters' addresses: the array of pointers cuLaunchKernel reads
        self.pointers = np.arange(len(values), dtype=np.uint64) * 8 + self.values.ctypes.data
        self.params = int(self.pointers.ctypes.data)
        self._types = tuple(types)
        self._handles: dict = {}

    def _compile(self, flat, out, offsets, key):
        """The kernel for this input's dtype and layout: loaded from the disk
        cache or compiled, on first use (:mod:`pyreduce.backends.cubins`)."""

        argtypes = tuple(
            flat.arg_type() if t is INPUT else out.arg_type() if t is OUTPUT
            else offsets.arg_type() if t is OFFSETS else t
            for t in self._types
        )
        handle = function_handle(self.kernel, argtypes)
        self._handles[key] = handle
        return handle

    def handle(self, flat, like, key, offsets=None) -> int:
        """The handle of the kernel compiled for ``key``: ``flat``'s dtype and
        layout (and the offsets'), compiled on first use for ``flat``, an output
        like ``like`` and ``offsets``."""
        return self._handles.get(key) or self._compile(flat, like, offsets, key)

    def __call__(self, flat, out, stream, offsets=None) -> None:
        key = (flat.dtype.char, flat.layout)
        i = self.offsets_at
        if i is not None:
            v = self.values
            v[i + 2] = v[i + 5] = offsets.size
            v[i + 3] = offsets.dtype.itemsize
            v[i + 4] = offsets.ptr
            v[i + 6] = offsets.stride
            key += (offsets.dtype.char, offsets.layout)
        err = launch(self.values, self.input_at, self.output_at, flat.size, flat.ptr,
                     flat.stride, out.ptr, ANY_DEVICE, self.handle(flat, out, key, offsets),
                     self.grid, self.block, int(stream) if stream else 0, self.params)
        if err:
            check_driver(err)


def launch_args(kernel, args, grid: int, block: int, stream) -> None:
    """A launch of ``kernel`` outside a plan (the finishing kernel) on a 1-D grid,
    by the same path as :class:`PreparedLaunch`'s: ``args`` are device views
    and floats (float64 parameters). The function is loaded from the disk cache
    or compiled once per device and argument types, and kept with the kernel:
    Numba's dispatcher would spend more than a hundred microseconds a launch
    typing record arrays."""
    values, types = [], []
    for a in args:
        if isinstance(a, DeviceView):
            values.extend(a.args())
            types.append(a.arg_type())
        else:
            values.append(int(np.float64(a).view(np.int64)))
            types.append("float64")
    key = (current_device(), tuple(types))
    handle = kernel.functions.get(key)
    if handle is None:
        handle = kernel.functions[key] = function_handle(kernel, key[1])
    words = np.array(values + [0, *driver_functions()], dtype=np.int64)
    pointers = np.arange(len(values), dtype=np.uint64) * 8 + words.ctypes.data
    # cuLaunchKernel reads the parameters before it returns: the arrays may go then
    err = launch(words, -1, -1, 0, 0, 0, 0, ANY_DEVICE, handle, grid, block,
                 stream_handle(stream), int(pointers.ctypes.data))
    if err:
        check_driver(err)


#: :func:`launch`'s ``device`` for a launch on whatever device is current.
ANY_DEVICE = -1
#: :func:`launch`'s result when the current device is not the one asked for (CUDA
#: error codes are positive).
WRONG_DEVICE = -1


def launch(values, input_at, output_at, size, ptr, stride, out_ptr, device, function, grid,
           block, stream, params) -> int:
    """One prepared launch (:class:`PreparedLaunch`): write the input's length,
    address and stride into the parameter words ``values`` at ``input_at`` and the
    output's address at ``output_at`` (-1: none), then ``cuLaunchKernel`` of
    ``function`` (a handle) on a 1-D grid with the parameter pointer array at
    ``params``. The driver's result code; :data:`WRONG_DEVICE`, with no parameter
    written and nothing launched, if ``device`` is not :data:`ANY_DEVICE` and the
    thread's current device is another. The three last words of ``values`` are
    not parameters: the device query writes in the first, and the others hold the
    addresses of ``cuCtxGetDevice`` and ``cuLaunchKernel``
    (:func:`driver_functions`), so a launch allocates nothing.

    Launches run in Python through ``cuda.bindings`` at first. Numba-compiled
    code calling the driver through those addresses can take over, which spares
    the per-argument conversions of a Python binding (on an H100, about a
    microsecond of a launch's 5-6). It is loaded from the disk cache after its
    first compile (:mod:`pyreduce.backends.launchjit`), but loading readies
    Numba's CPU target unless the process already has: half a second to over a
    second, which one to six microseconds a launch repay only after hundreds
    of thousands of launches. So every :data:`COMPILE_AFTER` launches the
    process is looked at:
    the compiled launch takes over once Numba's CPU target is ready (the
    process compiled or loaded CPU code: a ``cpu`` backend fold, a user's
    ``njit``) or after :data:`LOAD_COLD_AFTER` launches
    (:func:`use_compiled_launch` switches at once). Where ctypes did not find
    libcuda's functions, Python throughout."""
    _use(_counted(_bindings_launch(), COMPILE_AFTER, LOAD_COLD_AFTER) if values[-1]
         else _bindings_launch())
    return launch(values, input_at, output_at, size, ptr, stride, out_ptr, device, function,
                  grid, block, stream, params)


#: launches between two looks at whether the compiled launch should take over
COMPILE_AFTER = 1000

#: launches after which the compiled launch takes over even where loading it
#: readies Numba's CPU target (what it saves a launch repays that load)
LOAD_COLD_AFTER = 2**18

#: :func:`launch` as defined: it picks the implementation that replaces it
first_launch = launch


def _use(implementation) -> None:
    global launch
    launch = implementation


def _counted(first, count: int, cold_after: int):
    """``first``, looking every ``count`` calls whether the compiled launch should
    replace it: when Numba's CPU target is ready, or ``cold_after`` calls on
    (``first`` stays should the compiled launch fail to build)."""
    left, made = [count], [0]

    def counting(*args):
        left[0] -= 1
        if left[0] <= 0:  # not == 0: threads may race past it
            made[0] += count
            if made[0] >= cold_after or cpu_target_ready():
                use_compiled_launch(first)
            else:
                left[0] = count
        return first(*args)

    return counting


def use_compiled_launch(fallback=None) -> bool:
    """Make the compiled launch :func:`launch`'s implementation now (loading or
    compiling it: see :func:`launch`); ``fallback`` (if given) takes over should
    it fail to build. Whether the compiled launch is in use. Benchmarks call this
    to time a long-running process's steady state."""
    if not all(driver_functions()):  # the compiled launch calls libcuda by address
        return False
    try:
        _use(_compiled_launch())
        return True
    except Exception:  # Numba cannot build it here
        if fallback is not None:
            _use(fallback)
        return False


def cpu_target_ready() -> bool:
    """Whether this process has readied Numba's CPU target (its code generator
    and typing registries), so that loading compiled CPU code is cheap. False
    where Numba is not imported, or no longer keeps the target where looked for."""
    registry = sys.modules.get("numba.core.registry")
    target = getattr(registry, "cpu_target", None)
    return target is not None and "_toplevel_target_context" in vars(target)


def _launcher(current_device, launch_kernel):
    """:func:`launch`'s body over the driver's ``cuCtxGetDevice`` and
    ``cuLaunchKernel``, as functions of the parameter words:
    ``current_device(values)`` (the device, or -1 without a context) and
    ``launch_kernel(values, function, grid, block, stream, params)``. In Python
    here, compiled by :mod:`pyreduce.backends.launchjit`."""

    def launch(values, input_at, output_at, size, ptr, stride, out_ptr, device, function,
               grid, block, stream, params):
        if device >= 0 and current_device(values) != device:
            return WRONG_DEVICE
        if input_at >= 0:
            values[input_at + 2] = size
            values[input_at + 5] = size
            values[input_at + 4] = ptr
            values[input_at + 6] = stride
        if output_at >= 0:
            values[output_at + 4] = out_ptr
        return launch_kernel(values, function, grid, block, stream, params)

    return launch


def _bindings_launch():
    """:func:`launch` in Python, through ``cuda.bindings``."""
    cu = cuda_driver()

    def device(values):
        err, dev = cu.cuCtxGetDevice()
        return -1 if int(err) else int(dev)

    def launch_kernel(values, function, grid, block, stream, params):
        return int(cu.cuLaunchKernel(function, grid, 1, 1, block, 1, 1, 0, stream, params,
                                     0)[0])

    return _launcher(device, launch_kernel)


def _compiled_launch():
    """:func:`launch` compiled (:mod:`pyreduce.backends.launchjit`)."""
    from .launchjit import launcher  # late: it imports Numba

    return launcher(_launcher)


_driver_functions = None


def driver_functions() -> tuple:
    """The addresses of libcuda's ``cuCtxGetDevice`` and ``cuLaunchKernel``, or
    ``(0, 0)`` where ctypes does not find libcuda."""
    global _driver_functions
    if _driver_functions is None:
        import ctypes
        import ctypes.util

        name = "nvcuda.dll" if os.name == "nt" else "libcuda.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            found = ctypes.util.find_library("cuda")
            lib = ctypes.CDLL(found) if found else None
        if lib is None:
            _driver_functions = (0, 0)
        else:
            # the library stays loaded for the process (ctypes never unloads one)
            _driver_functions = tuple(
                ctypes.cast(getattr(lib, fn), ctypes.c_void_p).value
                for fn in ("cuCtxGetDevice", "cuLaunchKernel")
            )
    return _driver_functions


_local = threading.local()


def read_scalar(view: DeviceView, stream):
    """``view[0]`` on the host, once the work on ``stream`` is done."""
    cu = cuda_driver()
    if type(view) is MappedView:
        err, = cu.cuStreamSynchronize(stream)
        if err != cudadriver.SUCCESS:
            check_driver((err,))
        return view.host[0]
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = np.empty(16, dtype=np.uint8)  # holds any scalar
    nbytes = view.dtype.itemsize
    if stream:
        handle = int(stream)
        check_driver(cu.cuMemcpyDtoHAsync(buf.ctypes.data, view.ptr, nbytes, handle))
        check_driver(cu.cuStreamSynchronize(handle))
    else:
        check_driver(cu.cuMemcpyDtoH(buf.ctypes.data, view.ptr, nbytes))
    return buf[:nbytes].view(view.dtype)[0]


def read_array(view: DeviceView, count: int, stream) -> np.ndarray:
    """``view[:count]`` (contiguous) in a new host array, once the work on
    ``stream`` is done."""
    if type(view) is MappedView:
        read_scalar(view, stream)  # waits for the stream
        return view.host[:count].copy()
    host = np.empty(count, dtype=view.dtype)
    if count:
        cu = cuda_driver()
        if stream:
            check_driver(cu.cuMemcpyDtoHAsync(host.ctypes.data, view.ptr, host.nbytes, int(stream)))
            check_driver(cu.cuStreamSynchronize(int(stream)))
        else:
            check_driver(cu.cuMemcpyDtoH(host.ctypes.data, view.ptr, host.nbytes))
    return host


def fields_to_host(fields, stream=0) -> np.ndarray:
    """The device array ``fields`` describes (:class:`pyreduce.interop.DeviceFields`)
    in a new C-ordered host array: the bytes it spans are copied once and NumPy
    picks the elements out, so any strides work, negative ones included."""
    dt, shape, strides = storage(fields.dtype), tuple(fields.shape), fields.byte_strides()
    if math.prod(shape) == 0:
        return np.empty(shape, dt)
    lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0) + dt.itemsize
    current_device()  # the copy needs a context in this thread
    sync_producer(fields, stream)
    raw = read_array(DeviceView(fields.ptr + lo, hi - lo, 1, np.dtype(np.uint8)), hi - lo, stream)
    return np.array(np.ndarray(shape, dt, buffer=raw, offset=-lo, strides=strides), order="C")


def copy_array(dst: DeviceView, src: DeviceView, stream) -> None:
    """Copy the contiguous ``src`` into the start of the contiguous ``dst``, in
    order on ``stream`` and complete on return (``src`` may be freed then)."""
    nbytes = src.size * src.dtype.itemsize
    if not nbytes:
        return
    cu = cuda_driver()
    handle = int(stream) if stream else 0
    check_driver(cu.cuMemcpyDtoDAsync(dst.ptr, src.ptr, nbytes, handle))
    check_driver(cu.cuStreamSynchronize(handle))


def write_scalar(view: DeviceView, value, stream) -> None:
    """Write ``value`` to ``view[0]`` (stream-ordered)."""
    write_array(view, np.asarray([value], dtype=view.dtype), stream)


def write_array(view: DeviceView, host: np.ndarray, stream) -> None:
    """Write the 1-D host array to the start of ``view`` (contiguous), complete
    on return."""
    cu = cuda_driver()
    host = np.ascontiguousarray(host, dtype=view.dtype)
    if not host.size:
        return
    if stream:
        check_driver(cu.cuMemcpyHtoDAsync(view.ptr, host.ctypes.data, host.nbytes, int(stream)))
        check_driver(cu.cuStreamSynchronize(int(stream)))  # `host` must outlive the copy
    else:
        check_driver(cu.cuMemcpyHtoD(view.ptr, host.ctypes.data, host.nbytes))
