"""numba-cuda backends: ``cuda`` on a GPU and ``sim`` in Numba's CUDA simulator.

Both run the same generated source, the simulator's without the launch bounds
its ``jit`` does not take (:data:`~pyreduce.backends.dialect.CUDA` and
:data:`~pyreduce.backends.dialect.SIM`). They differ in what they compile the operator to, in the device they
describe to the planner, and in the simulator's warp emulation
(:mod:`pyreduce.backends.simwarp`).
"""

from __future__ import annotations

import contextlib
import functools
import threading

import numpy as np

from ..planner import DeviceInfo
from .base import GeneratedBackend, carrier
from .dialect import CUDA, SIM
from .opcheck import check_op
from .fastpath import (
    DeviceView, FastKernel, flatten_args, read_scalar, signature, signature_key, view_of,
    write_scalar,
)

__all__ = ["NumbaCudaBackend", "SimBackend", "CudaBackend", "carrier"]

_SIM_LOCK = threading.RLock()


class NumbaCudaBackend(GeneratedBackend):
    """What the simulator and the GPU share: ``numba.cuda`` as the kernel module."""

    dialect = CUDA

    def __init__(self):
        from numba import cuda

        super().__init__(cuda)
        self.cuda = cuda


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
        return DeviceInfo("CUDA simulator", ("sim",), 2, 2 * w, 1, w, 2 * w)

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
        if monoid.dtype.kind not in "biu" or monoid.dtype.itemsize == 8:
            return monoid.fn
        fn, wide = monoid.fn, np.uint64 if monoid.dtype.kind == "u" else np.int64

        def widened(a, b):
            return fn(wide(a), wide(b))

        return widened

    def as_device_array(self, x):
        if not hasattr(x, "_ary"):
            raise TypeError(f"the simulator cannot use a {type(x).__name__}: pass a host array")
        return x

    def flat_view(self, arr, stream):
        """A 1-D array in the C-order of ``arr``: a view, or a gathered copy."""
        if arr.ndim == 1:
            return arr
        if arr.ndim == 0 or arr.is_c_contiguous():
            return arr.reshape(arr.size)
        return self._gather(arr, stream, block=32, grid=2)

    def to_device(self, host: np.ndarray, stream):
        return self.cuda.to_device(np.ascontiguousarray(host).reshape(-1), stream=stream)


class CudaBackend(NumbaCudaBackend):
    """A real GPU. Kernels are compiled by Numba but launched through ``cuda.core``
    with prepared arguments (:mod:`pyreduce.backends.fastpath`); arrays travel as
    :class:`~pyreduce.backends.fastpath.DeviceView`."""

    name = "cuda"

    def __init__(self):
        super().__init__()
        self._fast: dict = {}
        self._fast_lock = threading.Lock()

    def _allocate(self, n, dtype):
        return view_of(super()._allocate(n, dtype))

    def _allocate_zeros(self, n, dtype):
        return view_of(super()._allocate_zeros(n, dtype))

    def device(self, warp: int | None = None) -> DeviceInfo:
        return self._gpu_info(self.cuda.get_current_device().id)

    @functools.lru_cache(maxsize=None)
    def _gpu_info(self, device_id: int) -> DeviceInfo:
        from ..occupancy import SMLimits

        dev = self.cuda.get_current_device()
        name = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
        cc = dev.compute_capability

        def attribute(attr, default):
            try:
                return int(getattr(dev, attr))
            except (AttributeError, TypeError):
                return default

        limits = SMLimits(
            max_threads=dev.MAX_THREADS_PER_MULTIPROCESSOR,
            max_blocks=attribute("MAX_BLOCKS_PER_MULTIPROCESSOR", 32 if cc >= (5, 0) else 16),
            registers=attribute("MAX_REGISTERS_PER_MULTIPROCESSOR", 65536),
            shared_bytes=attribute("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", 49152),
            warp=dev.WARP_SIZE,
            reserved_shared_per_block=attribute("RESERVED_SHARED_MEMORY_PER_BLOCK", 0),
        )
        return DeviceInfo(
            name=name,
            key=("cuda", device_id, cc),
            sm_count=dev.MULTIPROCESSOR_COUNT,
            max_threads_per_sm=limits.max_threads,
            max_blocks_per_sm=limits.max_blocks,
            warp=dev.WARP_SIZE,
            limits=limits,
        )

    def launch_context(self, warp: int):
        if warp != 32:
            raise ValueError(f"warp size {warp} is not this GPU's (32)")
        return contextlib.nullcontext()

    def as_device_array(self, x):
        """A view of ``x`` when its C order is one, else a Numba array to gather."""
        return view_of(x) or self.cuda.as_cuda_array(x)

    def flat_view(self, arr, stream):
        if isinstance(arr, DeviceView):
            return arr
        return view_of(self._gather(arr, stream, block=256, grid=min(-(-arr.size // 256), 1024)))

    def to_device(self, host: np.ndarray, stream):
        dev = self.cuda.to_device(np.ascontiguousarray(host).reshape(-1), stream=stream)
        return view_of(dev)

    def launch(self, kernel, grid, block, stream, args):
        key = (kernel, signature_key(args))
        fast = self._fast.get(key)
        if fast is None:
            with self._fast_lock:
                fast = self._fast.get(key) or FastKernel(kernel.fn, signature(args))
                self._fast[key] = fast
        fast(grid, block, stream, flatten_args(args))

    def slice(self, buf, start, stop):
        return buf.slice(start, stop)

    def put_value(self, buf, value, stream):
        write_scalar(buf, value, stream)

    def new_result(self, dtype: np.dtype, stream):
        return view_of(self.cuda.device_array(1, dtype=dtype, stream=stream))

    def result_array(self, buf):
        return buf.owner

    def read_value(self, buf, stream):
        return read_scalar(buf, stream)
