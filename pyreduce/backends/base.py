"""What every Numba-style GPU backend shares (``numba.cuda``, its simulator and
``numba.hip``): kernels from the factories compiled into a namespace of the few
names the generated code uses, operators compiled once per op code, scratch pools,
the gather kernel, and launching and reading results on the module's device arrays.

A backend subclass names its kernel module (``self.gpu``), its dialect, its device
description and, where it needs more names, its kernel namespace. Nothing here
imports numba-cuda or numba-hip: a HIP environment has no numba-cuda, and the
reverse.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from ..cache import KERNELS
from ..codegen import Kernel, compile_module
from ..flatten import gather_source
from ..planner import DeviceInfo
from ..spec import KernelSpec
from ..variants import generate
from .opcheck import check_op

__all__ = ["GeneratedBackend", "ScratchPool", "carrier"]


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
            # results (n == 1) are read back whole; partials get some headroom
            buf = self._allocate(n if n == 1 else max(n, 64), dtype)
        try:
            yield buf
        finally:
            with self._lock:
                self._free[key].append(buf)


class GeneratedBackend:
    """A backend whose kernels are generated source compiled by a Numba-style
    ``jit`` (``self.gpu``: ``numba.cuda`` or ``numba.hip``)."""

    name: str
    dialect = None

    def __init__(self, gpu):
        self.gpu = gpu
        self.scratch = ScratchPool(self._allocate)
        # single-pass tickets: zeroed once, and the kernel's last block resets them
        self.counters = ScratchPool(self._allocate_zeros)

    def _allocate(self, n, dtype):
        return self.gpu.device_array(n, dtype=dtype)

    def _allocate_zeros(self, n, dtype):
        return self.gpu.to_device(np.zeros(n, dtype=dtype))

    # --- kernels

    def _device_op(self, monoid):
        """The operator as the kernels call it; one compiled function per op code.
        An op Numba cannot compile is a TypeError here, before any kernel."""
        check_op(monoid)
        return KERNELS.get(
            (self.name, "op", monoid.key),
            lambda: self.gpu.jit(device=True)(monoid.fn),
        )

    def kernel_namespace(self, spec: KernelSpec, op) -> dict:
        """The names a generated kernel module uses (see :mod:`pyreduce.codegen`)."""
        return {
            "gpu": self.gpu,
            "op": op,
            "acc_t": spec.acc_dtype.type,
            "carry_t": carrier(spec.acc_dtype),
            "i32": np.int32,
        }

    def kernel(self, spec: KernelSpec, monoid, device: DeviceInfo) -> Kernel:
        def build():
            name, source = generate(spec, self.dialect)
            namespace = self.kernel_namespace(spec, self._device_op(monoid))
            filename = f"<pyreduce {spec.label} ({self.name})>"
            compile_module(source, filename, namespace)
            return Kernel(
                spec, name, source, filename, namespace[name],
                cache_launchers=self.name != "sim",
            )

        return KERNELS.get((self.name, device.key, spec), build)

    def gather_kernel(self, ndim: int):
        def build():
            name, source = gather_source(ndim, self.dialect)
            namespace = compile_module(
                source, f"<pyreduce gather {ndim}d ({self.name})>", {"gpu": self.gpu}
            )
            return namespace[name]

        return KERNELS.get((self.name, "gather", ndim), build)

    def _gather(self, arr, stream, block, grid):
        """Copy an N-D device array into a new C-order 1-D one."""
        flat = self.gpu.device_array(arr.size, dtype=arr.dtype, stream=stream)
        with self.launch_context(self.device().warp):
            self.gather_kernel(arr.ndim)[grid, block, stream](arr, flat)
        return flat

    def launch_context(self, warp: int):
        return contextlib.nullcontext()

    # --- launching and memory, on the module's device arrays (overridden on CUDA)

    def launch(self, kernel, grid, block, stream, args):
        kernel.launcher(grid, block, stream)(*args)

    def slice(self, buf, start, stop):
        return buf[start:stop]

    def put_value(self, buf, value, stream):
        buf[:1].copy_to_device(np.asarray([value], dtype=buf.dtype), stream=stream)

    def new_result(self, dtype: np.dtype, stream):
        return self.gpu.device_array(1, dtype=dtype, stream=stream)

    def result_array(self, buf):
        """What ``device_result=True`` hands the user for a result buffer."""
        return buf

    def read_value(self, buf, stream):
        host = (buf if buf.size == 1 else buf[:1]).copy_to_host(stream=stream)
        if stream:
            stream.synchronize()
        return host[0]
