"""numba-cuda backends: ``cuda`` on a GPU and ``sim`` in Numba's CUDA simulator.

Both run the same generated source, the simulator's without the launch bounds
its ``jit`` does not take (:data:`~pyreduce.dialect.CUDA` and
:data:`~pyreduce.dialect.SIM`). They differ in what they compile the operator to, in the device they
describe to the planner, and in the simulator's warp emulation
(:mod:`pyreduce.backends.simwarp`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import types

import numpy as np

from ..axes import span_view
from ..planner import DeviceInfo, address_alignment
from ..dtypes import bfloat16_to_float32, storage
from ..forks import renew_in_child
from ..interop import ArrayInterface, DeviceFields, device_fields
from ..occupancy import SMLimits
from .base import GeneratedBackend, carrier, check_out, check_stream, not_a_stream
from .vload import VECTOR_BYTES, cuda_vload, sim_vload
from ..dialect import CUDA, SIM
from .opcheck import check_device_op, check_op
from .express import express
from .results import maker
from . import fastpath, staging
from .cudadriver import DeviceMemory, MappedMemory, attribute, compute_capability, device_name
from .cudadriver import device_to_use
from .fastpath import (
    DeviceView, MappedView, PreparedLaunch, copy_array, current_device, read_array, read_scalar,
    stream_handle, sync_producer, view_from, view_of, write_array, write_scalar,
)

__all__ = ["NumbaCudaBackend", "SimBackend", "CudaBackend", "carrier"]

_SIM_LOCK = renew_in_child(threading.RLock())


def check_input_device(on: int, current: int, what: str = "the input") -> None:
    """Refuse an input (or ``what`` else: ``out=``) on GPU ``on`` while GPU
    ``current`` is this thread's: the kernels run in the current device's
    context, and a stream of the input's device is not one of its streams."""
    if on == current:
        return
    if what != "the input":  # the input is on the current GPU: this array must be too
        raise ValueError(f"{what} is on GPU {on} and this thread's current device is GPU "
                         f"{current}, where the input is and the kernels run: pass "
                         f"{what} on GPU {current}")
    raise ValueError(f"{what} is on GPU {on} and this thread's current device is GPU "
                     f"{current}: reduce it with GPU {on} current (with "
                     f"cupy.cuda.Device({on}), torch.cuda.device({on}) or "
                     f"numba.cuda.gpus[{on}])")


class NumbaCudaBackend(GeneratedBackend):
    """What the simulator and the GPU share: ``numba.cuda`` as the kernel module,
    imported on first use (a GPU process whose kernels are all in the disk cache
    reduces device arrays without it), and host inputs copied through pinned
    staging buffers (:mod:`pyreduce.backends.staging`)."""

    dialect = CUDA
    #: host inputs go through :mod:`pyreduce.backends.staging`
    stages_host_inputs = True

    def __init__(self):
        pass

    @functools.cached_property
    def cuda(self):
        from numba import cuda

        return cuda

    @property
    def gpu(self):
        return self.cuda

    def stream_arg(self, stream):
        """A Numba stream as this backend's launches take it."""
        return stream

    def as_flat(self, arr):
        """A flat Numba device array as this backend's kernels take it."""
        return arr

    def flat_input(self, info, stream):
        if info.device is None:  # on the host: complete before any stream reads it
            return self.as_flat(staging.upload(self, info.host))
        return super().flat_input(info, stream)

    def upload(self, host, stream):
        return self.as_flat(staging.upload(self, host))


class SimBackend(NumbaCudaBackend):
    """The generated kernels in Numba's CUDA simulator, with project-supplied warp
    intrinsics (:mod:`pyreduce.backends.simwarp`) and no launch bounds."""

    name = "sim"
    dialect = SIM

    def __init__(self):
        super().__init__()
        from . import simwarp

        simwarp.install()

    def device(self, warp: int | None = None) -> DeviceInfo:
        from . import simwarp

        w = warp or simwarp.get_warp_size()
        # Small on purpose: every simulated thread is a Python thread.
        return DeviceInfo("CUDA simulator", ("sim",), 2, 2 * w, 1, w, 2 * w,
                          vector_bytes=VECTOR_BYTES)

    def vector_load(self, count: int):
        return sim_vload(count)

    def bfloat16_loader(self):
        return _sim_bf16

    def alignment(self, flat) -> int:
        host = flat._ary  # the simulator's device arrays wrap a NumPy array
        return address_alignment(host.ctypes.data, host.strides[0] == host.itemsize)

    @contextlib.contextmanager
    def launch_context(self, warp: int):
        from . import simwarp

        # The simulator runs one kernel at a time (it asserts so): calls from
        # several Python threads take turns for the whole reduction.
        with _SIM_LOCK, simwarp.warp_size(warp):
            yield

    def _device_op(self, monoid):
        """The op as a Python function, called on NumPy scalars. Compiled code
        computes small integers in 64 bits (Numba widens int8 + int8 to int64) and
        casts the result back; NumPy scalars would wrap at every step instead, so
        integer and bool arguments are widened first, as Numba does."""
        check_op(monoid)
        fn = frozen(monoid.fn)
        if monoid.dtype.kind not in "biu" or monoid.dtype.itemsize == 8:
            return fn
        wide = np.uint64 if monoid.dtype.kind == "u" else np.int64

        def widened(a, b):
            return fn(wide(a), wide(b))

        return widened

    gather_block, gather_grid = 32, 2  # each simulated thread is a Python thread

    def _device_finisher(self, finisher):
        """The scalar finisher as Python, like the op: on NumPy scalars, without
        the warnings of their arithmetic that compiled code does not give
        (:meth:`pyreduce.finishers.Finisher.python`)."""
        return finisher.python

    def _device_map(self, monoid):
        """The element map as Python, like the op."""
        return frozen(monoid.map)

    def as_device_array(self, x):
        if not hasattr(x, "_ary"):
            raise TypeError(f"the simulator cannot use a {type(x).__name__}: pass a host array")
        if x.dtype.name == "bfloat16":  # ml_dtypes': the kernels load its bits
            return type(x)(x._ary.view(np.uint16))
        return x

    def input_strides(self, info):
        return self.as_device_array(info.device)._ary.strides

    def input_span(self, info, off, span, stream):
        arr = self.as_device_array(info.device)
        return type(arr)(span_view(arr._ary, off, span))


class CudaBackend(NumbaCudaBackend):
    """A real GPU. Kernels are compiled by Numba but launched with
    ``cuLaunchKernel`` from prepared parameter buffers
    (:mod:`pyreduce.backends.fastpath`); arrays travel as
    :class:`~pyreduce.backends.fastpath.DeviceView`."""

    name = "cuda"

    def allocate(self, count, dtype, zeroed=False):
        dtype = np.dtype(dtype)
        memory = DeviceMemory(count * dtype.itemsize, zeroed)
        return DeviceView(memory.ptr, count, dtype.itemsize, dtype, memory)

    def allocate_result(self, dtype, count=1):
        if fastpath.MAPPED_RESULTS and count == 1:
            return MappedView(MappedMemory(1, np.dtype(dtype)))
        return self.allocate(count, dtype)

    def prepare(self, kernel, step, buffers):
        return PreparedLaunch(kernel, step, buffers)

    def launch_finishing(self, kernel, grid, block, stream, args):
        """The finishing kernel, launched as the plans' kernels are (its record
        arrays would cost Numba's dispatcher more than a hundred microseconds)."""
        fastpath.launch_args(kernel, args, grid, block, stream)

    def launch(self, kernel, grid, block, stream, args):
        """A launch through Numba's dispatcher, for kernels outside a plan (the
        scans of :mod:`pyreduce.prefix`): this backend's buffers, views of raw
        device memory, reach it as Numba arrays."""
        args = [self._numba_array(a) if isinstance(a, DeviceView) else a for a in args]
        super().launch(kernel, grid, block, self._numba_stream(stream), args)

    def _numba_array(self, view: DeviceView):
        """A view as a Numba array: of its dtype, records included (the CUDA
        Array Interface's ``typestr`` of a record is raw bytes, ``V<size>``)."""
        arr = self.cuda.as_cuda_array(ArrayInterface(
            DeviceFields(view.ptr, (view.size,), (view.stride,), view.dtype, None), view.owner))
        return arr.view(view.dtype) if view.dtype.names is not None else arr

    def verify_op(self, monoid, device_op) -> None:
        # on the CUDA target: the kernel's compile reuses it, and no host compile
        check_device_op(monoid, device_op, self.gpu)

    def express(self, call, device: int, finished=None):
        return express(self, call, device, finished)

    def device(self, warp: int | None = None) -> DeviceInfo:
        if warp not in (None, 32):
            raise ValueError(f"warp size {warp} is not this GPU's (32)")
        return self._gpu_info(current_device())

    def device_id(self) -> int:
        return current_device()

    def quiet_device(self) -> DeviceInfo:
        # the device's attributes need the driver, not a context (0.1 s to make)
        return self._gpu_info(device_to_use())

    @functools.lru_cache(maxsize=None)  # noqa: B019  (a backend lives as long as the process)
    def _gpu_info(self, device_id: int) -> DeviceInfo:
        """The device's description, from the driver's attributes (by the names
        Numba's device object uses for them)."""
        cc = compute_capability(device_id)
        warp = attribute(device_id, "WARP_SIZE")
        limits = SMLimits(
            max_threads=attribute(device_id, "MAX_THREADS_PER_MULTIPROCESSOR"),
            max_blocks=attribute(device_id, "MAX_BLOCKS_PER_MULTIPROCESSOR",
                                 32 if cc >= (5, 0) else 16),
            registers=attribute(device_id, "MAX_REGISTERS_PER_MULTIPROCESSOR", 65536),
            shared_bytes=attribute(device_id, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", 49152),
            warp=warp,
            reserved_shared_per_block=attribute(device_id, "RESERVED_SHARED_MEMORY_PER_BLOCK",
                                                0),
        )
        return DeviceInfo(
            name=device_name(device_id),
            key=("cuda", device_id, cc),
            sm_count=attribute(device_id, "MULTIPROCESSOR_COUNT"),
            max_threads_per_sm=limits.max_threads,
            max_blocks_per_sm=limits.max_blocks,
            warp=warp,
            limits=limits,
            vector_bytes=VECTOR_BYTES,
            l2_bytes=attribute(device_id, "L2_CACHE_SIZE", 0),
            auto_block=512,  # measured on an H100 (pyreduce.planner.auto_variant)
        )

    def vector_load(self, count: int):
        return cuda_vload(count)

    def bfloat16_loader(self):
        return _cuda_bf16()

    def alignment(self, flat) -> int:
        return address_alignment(flat.ptr, flat.stride == flat.dtype.itemsize)

    def launch_stream(self, stream, info) -> int:
        """The caller's stream, as a handle; by default the stream the input's
        producer works on (CuPy's or PyTorch's current stream), so the reduction
        is ordered after the work that made its input without a synchronization."""
        check_stream(stream)
        fields = info.fields
        if fields is not None and fields.device is not None:
            check_input_device(fields.device, current_device())
        if stream is None:
            producer = None if fields is None else fields.stream
            return 0 if producer in (None, 1) else producer
        try:
            return stream_handle(stream)
        except (TypeError, ValueError):  # an object with none of the interfaces
            raise not_a_stream(stream) from None

    def _numba_stream(self, handle: int):
        """A Numba stream object for ``handle`` (Numba's own calls need one)."""
        return self.cuda.external_stream(handle) if handle else 0

    def stream_arg(self, stream) -> int:
        return int(stream)

    def as_flat(self, arr):
        return view_of(arr)

    def flat_input(self, info, stream):
        if info.device is None:  # on the host
            return super().flat_input(info, stream)
        view = view_from(info.fields, info.device, stream)
        if view is None:  # N-D and not C-contiguous: gather it into C order
            view = self.gather_input(info, range(len(info.fields.shape)), stream)
        return view

    def input_strides(self, info):
        return info.fields.byte_strides()

    def input_span(self, info, off, span, stream):
        fields = info.fields
        sync_producer(fields, stream)
        dt = storage(fields.dtype)
        return DeviceView(fields.ptr - off * dt.itemsize, span, dt.itemsize, dt, info.device)

    def gather_input(self, info, perm, stream):
        """The input's axes in ``perm`` order, copied into C order. Numba sees the
        input through its fields (pointer, shape, strides, storage dtype), so
        producers it cannot view itself work too: DLPack-only arrays, bfloat16."""
        arr = self.cuda.as_cuda_array(ArrayInterface(info.fields, info.device, perm))
        return view_of(self._gather(arr, self._numba_stream(stream)))

    def offsets_input(self, offsets, stream):
        if isinstance(offsets, np.ndarray):
            return self.upload(offsets.astype(np.int64), stream)
        fields = device_fields(offsets)
        if fields.device is not None:  # read by the kernels in place: on their GPU
            check_input_device(fields.device, current_device(), "offsets")
        sync_producer(fields, stream)
        stride = fields.strides[0] if fields.strides else fields.dtype.itemsize
        return DeviceView(fields.ptr, fields.shape[0], stride, fields.dtype, offsets)

    def read_array(self, buf, count, stream):
        return read_array(buf, count, stream)

    def put_array(self, buf, host, stream):
        write_array(buf, host, stream)

    def copy_buffer(self, dst, src, stream):
        copy_array(dst, src, stream)

    def slice(self, buf, start, stop):
        return buf.slice(start, stop)

    def put_value(self, buf, value, stream):
        write_scalar(buf, value, stream)

    def new_result(self, dtype: np.dtype, stream, info, shape=()):
        """An array of ``shape`` (0-d for ``device_result=True``) of the input's own
        library (:mod:`pyreduce.backends.results`)."""
        arr, ptr = maker(info.kind, dtype)(shape, dtype, current_device(), stream, info.device)
        return arr, DeviceView(ptr, math.prod(shape), dtype.itemsize, dtype, arr)

    def out_buffer(self, out, dtype: np.dtype, shape=None):
        fields = device_fields(out) if hasattr(out, "__cuda_array_interface__") else None
        if fields is None:
            raise TypeError(f"out= must be a NumPy array or a CUDA device array, got "
                            f"{type(out).__name__}")
        if fields.device is not None:
            check_input_device(fields.device, current_device(), "out=")
        check_out(fields.shape, fields.dtype, dtype, shape)
        if shape is None:
            return DeviceView(fields.ptr, 1, dtype.itemsize, dtype, out)
        view = view_from(fields, out)
        if view is None or view.stride != dtype.itemsize:
            raise ValueError("out= must be C-contiguous to be written in place")
        return view

    def read_value(self, buf, stream):
        return read_scalar(buf, stream)


def frozen(fn):
    """``fn`` reading its closure's values as they are now. A kernel is cached
    under the values its op captures (:func:`pyreduce.ops.function_key`) and
    compiled code freezes them; the simulator's kernel calls Python, which would
    read a cell rebound later, and so answer for another key."""
    if not fn.__closure__:
        return fn
    cells = tuple(_cell_copy(c) for c in fn.__closure__)
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              cells)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def _cell_copy(cell):
    try:
        return types.CellType(cell.cell_contents)
    except ValueError:  # an empty cell (a name assigned later): Python's NameError then
        return types.CellType()


def _sim_bf16(bits):
    return bfloat16_to_float32(np.uint16(bits))[()]


@functools.lru_cache(maxsize=None)
def _cuda_bf16():
    """bfloat16 is the upper half of a float32: shift its bits up and reinterpret."""
    from numba import cuda
    from numba.cuda import libdevice

    @cuda.jit(device=True)
    def bf16_t(bits):
        return libdevice.int_as_float(np.int32(bits) << 16)

    return bf16_t
