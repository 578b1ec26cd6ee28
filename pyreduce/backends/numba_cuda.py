"""numba-cuda backends: ``cuda`` on a GPU and ``sim`` in Numba's CUDA simulator.

Both run the same generated source (the :data:`~pyreduce.backends.dialect.CUDA`
dialect). They differ in what they compile the operator to, in the device they
describe to the planner, and in the simulator's warp emulation
(:mod:`pyreduce.backends.simwarp`).
"""

from __future__ import annotations

import contextlib
import functools
import threading

import numpy as np

from ..cache import KERNELS
from ..codegen import Kernel, compile_module
from ..flatten import gather_source
from ..planner import DeviceInfo
from ..spec import KernelSpec
from ..variants import generate
from .dialect import CUDA

__all__ = ["NumbaCudaBackend", "carrier"]

_SIM_LOCK = threading.RLock()


def carrier(dtype: np.dtype):
    """The type a shuffle moves for ``dtype``: Numba's shuffles take 32- and 64-bit
    signed ints and floats; narrower values ride in an int32 and are cast back."""
    if dtype.kind == "f":
        return dtype.type
    return np.int64 if dtype.itemsize == 8 else np.int32


class ScratchPool:
    """Reusable device buffers, one checkout at a time, so that concurrent calls never
    share scratch. Buffers are keyed by dtype and stream: work on one stream is
    ordered, so a buffer returned after its launches were enqueued is safe to reuse
    on that stream."""

    def __init__(self, allocate):
        self._allocate = allocate
        self._free: dict = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def borrow(self, n: int, dtype: np.dtype, stream_key):
        key = (dtype.str, stream_key)
        with self._lock:
            free = self._free.setdefault(key, [])
            buf = next((b for b in free if b.size >= n), None)
            if buf is not None:
                free.remove(buf)
        if buf is None:
            buf = self._allocate(max(n, 64), dtype)
        try:
            yield buf
        finally:
            with self._lock:
                self._free[key].append(buf)


class NumbaCudaBackend:
    dialect = CUDA

    def __init__(self):
        from numba import cuda
        from numba.cuda.core import config

        self.cuda = cuda
        self.simulated = bool(config.ENABLE_CUDASIM)
        self.name = "sim" if self.simulated else "cuda"
        self.scratch = ScratchPool(lambda n, dt: cuda.device_array(n, dtype=dt))
        # single-pass tickets: zeroed once, and the kernel's last block resets them
        self.counters = ScratchPool(lambda n, dt: cuda.to_device(np.zeros(n, dtype=dt)))
        if self.simulated:
            from . import simwarp

            simwarp.install()

    # --- the device

    def device(self, warp: int | None = None) -> DeviceInfo:
        if self.simulated:
            from . import simwarp

            w = warp or simwarp.get_warp_size()
            # Small on purpose: every simulated thread is a Python thread.
            return DeviceInfo("CUDA simulator", ("sim",), 2, 2 * w, 1, w, 2 * w)
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

    @contextlib.contextmanager
    def _simulated_launches(self, warp: int):
        from . import simwarp

        # The simulator runs one kernel at a time (it asserts so): calls from
        # several Python threads take turns for the whole reduction.
        with _SIM_LOCK, simwarp.warp_size(warp):
            yield

    def launch_context(self, warp: int):
        if self.simulated:
            return self._simulated_launches(warp)
        if warp != 32:
            raise ValueError(f"warp size {warp} is not this GPU's (32)")
        return contextlib.nullcontext()

    # --- kernels

    def _device_op(self, monoid):
        """The operator as the kernels call it; one compiled function per op code."""
        if self.simulated:
            return monoid.fn
        return KERNELS.get(
            (self.name, "op", monoid.key),
            lambda: self.cuda.jit(device=True)(monoid.fn),
        )

    def kernel(self, spec: KernelSpec, monoid, device: DeviceInfo) -> Kernel:
        def build():
            name, source = generate(spec, self.dialect)
            namespace = {
                "gpu": self.cuda,
                "op": self._device_op(monoid),
                "acc_t": spec.acc_dtype.type,
                "carry_t": carrier(spec.acc_dtype),
                "i32": np.int32,
            }
            filename = f"<pyreduce {spec.label}>"
            compile_module(source, filename, namespace)
            return Kernel(
                spec, name, source, filename, namespace[name],
                cache_launchers=not self.simulated,
            )

        return KERNELS.get((self.name, device.key, spec), build)

    def gather_kernel(self, ndim: int, dtype: np.dtype):
        def build():
            name, source = gather_source(ndim, self.dialect)
            namespace = compile_module(source, f"<pyreduce gather {ndim}d>", {"gpu": self.cuda})
            return namespace[name]

        return KERNELS.get((self.name, "gather", ndim), build)

    # --- arrays

    def as_device_array(self, x):
        """A Numba device array viewing ``x`` (no copy)."""
        if self.simulated:
            if not hasattr(x, "_ary"):
                raise TypeError(
                    f"the simulator cannot use a {type(x).__name__}: pass a host array"
                )
            return x
        return self.cuda.as_cuda_array(x)

    def flat_view(self, arr, stream):
        """A 1-D device array whose order is the C-order flattening of ``arr``:
        a view when one exists (1-D of any stride, contiguous N-D), else a copy
        into library-owned memory through the gather kernel."""
        if arr.ndim == 1:
            return arr
        if arr.ndim == 0 or arr.is_c_contiguous():
            return arr.reshape(arr.size)
        flat = self.cuda.device_array(arr.size, dtype=arr.dtype, stream=stream)
        gather = self.gather_kernel(arr.ndim, arr.dtype)
        block = 256 if not self.simulated else 32
        grid = min(-(-arr.size // block), 1024 if not self.simulated else 2)
        with self.launch_context(self.device().warp):
            gather[grid, block, stream](arr, flat)
        return flat

    def to_device(self, host: np.ndarray, stream):
        return self.cuda.to_device(np.ascontiguousarray(host).reshape(-1), stream=stream)

    def put_value(self, buf, value, stream):
        buf[:1].copy_to_device(np.asarray([value], dtype=buf.dtype), stream=stream)

    def new_result(self, dtype: np.dtype, stream):
        return self.cuda.device_array(1, dtype=dtype, stream=stream)

    def read_value(self, buf, stream):
        host = buf[:1].copy_to_host(stream=stream)
        if stream:
            stream.synchronize()
        return host[0]
