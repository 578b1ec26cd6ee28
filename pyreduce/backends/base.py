"""What every Numba-style GPU backend shares (``numba.cuda``, its simulator and
``numba.hip``): kernels from the factories compiled into a namespace of the few
names the generated code uses, operators compiled once per op code, the plans'
executables (:mod:`pyreduce.driver`), the gather kernel, and launching and
reading results on the module's device arrays.

A backend subclass names its kernel module (``self.gpu``), its dialect, its device
description and, where it needs more names, its kernel namespace. Nothing here
imports numba-cuda or numba-hip: a HIP environment has no numba-cuda, and the
reverse.
"""

from __future__ import annotations

import contextlib
import math
import threading

import numpy as np

from ..cache import KERNELS
from ..codegen import Kernel, compile_module
from ..driver import Executable, resolve
from ..dtypes import carrier, code, fields, is_bfloat16, is_tuple, storage
from ..finishing import finish_source
from ..flatten import gather_source
from ..forks import renew_in_child
from ..interop import host_input, inspect
from ..planner import DeviceInfo
from ..spec import KernelSpec
from ..variants import finishes, generate
from .opcheck import check_op

__all__ = ["GeneratedBackend", "carrier", "check_out", "check_out_array", "check_stream",
           "not_a_stream", "to_host"]

_build_lock = renew_in_child(threading.Lock())
_NO_CONTEXT = contextlib.nullcontext()


#: what a stream object has: CuPy's ``ptr``, PyTorch's ``cuda_stream``, Numba's
#: ``handle``, the simulator's streams only ``synchronize``
_STREAM_ATTRIBUTES = ("ptr", "cuda_stream", "handle", "synchronize")


def check_stream(stream) -> None:
    """A ``stream=`` argument is None (the default), a stream handle (an int of at
    least 0) or a stream object (Numba's, CuPy's, PyTorch's); a TypeError or
    ValueError says what else was given."""
    if stream is None:
        return
    if isinstance(stream, (int, np.integer)) and not isinstance(stream, (bool, np.bool_)):
        if stream < 0:
            raise ValueError(f"stream={stream} is not a stream handle (handles are >= 0)")
        return
    if isinstance(stream, (bool, np.bool_, str, bytes, np.ndarray)) or not any(
            hasattr(stream, a) for a in _STREAM_ATTRIBUTES):
        raise not_a_stream(stream)


def not_a_stream(stream) -> TypeError:
    """The error for a ``stream=`` that is neither a stream nor a handle."""
    return TypeError(f"stream= must be a CUDA stream (Numba, CuPy or PyTorch) or a stream "
                     f"handle (an int), got {type(stream).__name__}")


def check_out_array(out) -> None:
    """An ``out=`` argument is None, a NumPy array or a device array (with
    ``__cuda_array_interface__``, or a kernel module's own); a TypeError says
    what else was given."""
    if out is None or isinstance(out, np.ndarray):
        return
    if not (hasattr(out, "__cuda_array_interface__") or hasattr(out, "copy_to_host")):
        raise TypeError(f"out= must be an array (a NumPy array, or a device array on a GPU "
                        f"backend), got {type(out).__name__}")


def to_host(info) -> np.ndarray:
    """A device input copied to the host, for the cpu backend."""
    x = info.device
    if info.fields is None:  # the simulator's arrays: as a host input's (bfloat16 as bits)
        return host_input(x.copy_to_host()).host
    if info.kind == "torch":
        return inspect(x.cpu()).host
    from .fastpath import fields_to_host  # late: the CUDA driver's bindings

    return fields_to_host(info.fields)


def check_out(shape, got: np.dtype, dtype: np.dtype, want=None) -> None:
    """An ``out=`` array (of ``shape`` and dtype ``got``) must hold exactly the
    result: one element of the result's dtype for a reduction to one value
    (``want`` None), else the result's shape ``want``."""
    if want is not None:
        if tuple(shape) != tuple(want):
            raise ValueError(f"out= has shape {tuple(shape)}, the result has shape "
                             f"{tuple(want)}")
    elif math.prod(shape) != 1:
        raise ValueError(f"out= must have exactly one element, has shape {tuple(shape)}")
    if got != dtype:
        raise TypeError(f"out= has dtype {got}, the result is {dtype}: pass dtype= or an "
                        f"out= of dtype {dtype}")


class GeneratedBackend:
    """A backend whose kernels are generated source compiled by a Numba-style
    ``jit`` (``self.gpu``: ``numba.cuda`` or ``numba.hip``)."""

    name: str
    dialect = None

    def __init__(self, gpu):
        self.gpu = gpu

    def allocate(self, count: int, dtype: np.dtype, zeroed: bool = False):
        """A device buffer for a workspace. Zeroed ones are single-pass tickets:
        zeroed once here, and reset by the kernel's last block."""
        if zeroed:
            return self.gpu.to_device(np.zeros(count, dtype=dtype))
        return self.gpu.device_array(count, dtype=dtype)

    def allocate_result(self, dtype: np.dtype, count: int = 1):
        """A workspace's slot for a result read back to the host (``count``
        elements for a batched reduction)."""
        return self.allocate(count, dtype)

    def executable(self, plan, monoid, device, finished=None) -> Executable:
        """The plan's :class:`~pyreduce.driver.Executable` on this backend, built
        once (plans are remembered, so the same call shape finds it again).
        ``finished``: ``(KernelSpec.finisher, result dtype)``, its last launch
        finishing the structured reduction ``monoid`` (see :meth:`finishes`)."""
        key = self.name if finished is None else (self.name, finished[0], finished[1].str)
        found = plan.executables.get(key)
        if found is None:
            with _build_lock:
                found = plan.executables.get(key)
                if found is None:
                    found = plan.executables[key] = Executable(self, plan, monoid, device,
                                                               finished)
        return found

    def finishes(self, plan, finisher) -> bool:
        """Whether ``plan``'s last launch can finish a reduction by ``finisher``
        (:mod:`pyreduce.finishers`) itself, saving the finishing kernel's launch:
        its variant can (:func:`pyreduce.variants.finishes`), the flag of an
        empty result does not depend on the data (the NaN-ignoring statistics
        read theirs back from the finishing kernel) and ``ddof``, a literal of
        that kernel's source, is finite (an infinite or NaN one is an argument
        of the finishing kernel's). (A plan's later passes run its first pass's
        variant.)"""
        return (not finisher.counted and not plan.fixed_tree and math.isfinite(finisher.ddof)
                and finishes(plan.spec.variant))

    def express(self, call, device: int, finished=None):
        """A faster runner for repeats of the :class:`~pyreduce.prepared.Prepared`
        ``call`` on ``device`` (:mod:`pyreduce.callmemo`), or None: repeats run
        ``call.run_on`` after checking the device. ``finished``: its kernel
        finishes a structured reduction
        (:func:`pyreduce.backends.express.express`)."""
        return None

    def prepare(self, kernel, step, buffers):
        """A callable ``(input, output, stream, offsets=None)`` making ``step``'s
        launch with the workspace ``buffers`` (:mod:`pyreduce.driver`)."""

        def launch(flat, out, stream, offsets=None):
            args = resolve(self, step.args, buffers, flat, out, offsets)
            self.launch(kernel, step.grid, step.spec.block, stream, args)

        return launch

    # --- kernels

    def _device_op(self, monoid):
        """The operator as the kernels call it; one compiled function per op code.
        An op Numba cannot compile is a TypeError here, before any kernel."""
        op = KERNELS.get(
            (self.name, "op", monoid.key),
            lambda: self.gpu.jit(device=True)(monoid.fn),
        )
        self.verify_op(monoid, op)
        return op

    def verify_op(self, monoid, device_op) -> None:
        """A TypeError if ``monoid``'s op does not compile for its dtype
        (:mod:`pyreduce.backends.opcheck`); ``device_op``: the op as the
        kernels call it."""
        check_op(monoid)

    def _device_map(self, monoid):
        """The element map as the kernels call it, one per op code."""
        return KERNELS.get(
            (self.name, "map", monoid.key),
            lambda: self.gpu.jit(device=True)(monoid.map),
        )

    def kernel_namespace(self, spec: KernelSpec, op, fmap=None) -> dict:
        """The names a generated kernel module uses (see :mod:`pyreduce.codegen`).
        A tuple accumulator's ``acc_t`` is defined by the module itself
        (:func:`pyreduce.variants._blocks.prelude`) from its fields' ``f<k>_t``,
        which travel in shuffles as ``c<k>_t``."""
        names = {"gpu": self.gpu, "op": op, "i32": np.int32, "i64": np.int64}
        if is_tuple(spec.acc_dtype):
            for k, d in enumerate(fields(spec.acc_dtype)):
                names[f"f{k}_t"], names[f"c{k}_t"] = d.type, carrier(d)
        else:
            names["acc_t"], names["carry_t"] = spec.acc_dtype.type, carrier(spec.acc_dtype)
            if spec.acc_dtype.kind == "c":
                names["re_t"] = carrier(spec.acc_dtype)
        if fmap is not None:
            names["fmap"] = fmap
        if is_bfloat16(spec.in_dtype):
            names["bf16_t"] = self.bfloat16_loader()
        if spec.half_as_float32 or spec.f32_tiles:
            names["f32_t"] = np.float32
        if spec.row:  # the staged group's shared tile holds the input as it is stored
            names["x_t"] = storage(spec.in_dtype).type
        width = 2
        while width <= spec.vector:  # a factory may load a run narrower than the spec's
            names[f"vload{width}"] = self.vector_load(width)
            width *= 2
        return names

    def bfloat16_loader(self):
        """``bf16_t(bits)``: a bfloat16 element (its ``uint16`` bits) as float32."""
        raise NotImplementedError(f"the {self.name} backend does not load bfloat16")

    def vector_load(self, count: int):
        """``vload<count>`` for this backend's kernels; only asked for where the
        device's ``vector_bytes`` allows one."""
        raise NotImplementedError(f"the {self.name} backend has no vector loads")

    def alignment(self, flat) -> int:
        """:func:`pyreduce.planner.address_alignment` of a flat device array."""
        return 0

    def device_id(self) -> int:
        """Which device this thread launches on (what :meth:`device` describes)."""
        return 0

    def quiet_device(self) -> DeviceInfo:
        """:meth:`device`, asked without starting anything on the GPU that a call
        which ends up elsewhere (a host array reduced by the cpu backend) would
        not otherwise need."""
        return self.device()

    def kernel(self, spec: KernelSpec, monoid, device: DeviceInfo) -> Kernel:
        """The kernel of ``spec``: its source now, its Numba dispatcher on first
        use (a launch that finds a compiled image on disk needs none)."""
        def build():
            name, source = generate(spec, self.dialect)
            filename = f"<pyreduce {spec.label} ({self.name})>"

            def make():
                fmap = self._device_map(monoid) if spec.mapped else None
                namespace = self.kernel_namespace(spec, self._device_op(monoid), fmap)
                if getattr(spec, "finisher", None) is not None:  # the last launch finishes
                    namespace["finish"] = self._device_finisher(monoid.finisher)
                    namespace["res_t"] = monoid.finisher.dtype.type
                return compile_module(source, filename, namespace)[name]

            return Kernel(spec, name, source, filename, make,
                          cache_launchers=self.name != "sim")

        return KERNELS.get((self.name, device.key, spec), build)

    def gather_kernel(self, ndim: int):
        def build():
            name, source = gather_source(ndim, self.dialect)
            namespace = compile_module(
                source, f"<pyreduce gather {ndim}d ({self.name})>", {"gpu": self.gpu}
            )
            return namespace[name]

        return KERNELS.get((self.name, "gather", ndim), build)

    # --- finishing a structured reduction's accumulators (pyreduce.finishers)

    def _device_finisher(self, finisher):
        """The scalar finisher as the finishing kernel calls it, one compiled
        function per finisher."""
        return KERNELS.get((self.name, "finisher", finisher.key),
                           lambda: self.gpu.jit(device=True)(finisher.fn))

    def finish_kernel(self, finisher, acc_dtype: np.dtype, flagged: bool) -> Kernel:
        """The finishing kernel (:func:`pyreduce.finishing.finish_source`) of
        ``finisher`` over records of ``acc_dtype``; ``flagged``: it sets a flag."""
        def build():
            name, source = finish_source(len(fields(acc_dtype)), finisher.outputs, flagged,
                                         self.dialect)
            filename = f"<pyreduce finisher {finisher.name} {code(acc_dtype)} ({self.name})>"

            def make():
                namespace = {"gpu": self.gpu, "finish": self._device_finisher(finisher),
                             "res_t": finisher.dtype.type}
                return compile_module(source, filename, namespace)[name]

            return Kernel(None, name, source, filename, make,
                          cache_launchers=self.name != "sim",
                          cache_key=("finisher", finisher.key, flagged))

        return KERNELS.get((self.name, "finish", finisher.key, str(acc_dtype.descr), flagged),
                           build)

    def finish(self, finisher, acc, outs, count: int, stream, flagged: bool,
               kernel=None) -> bool:
        """Queue on ``stream`` the finishing of the ``count`` accumulators in the
        device buffer ``acc`` into the device buffers ``outs`` (one per result).
        ``flagged``: read back whether a lane was flagged (4 bytes; this waits for
        the stream), else return False without waiting. ``kernel``: its
        :meth:`finish_kernel`, where the caller holds it."""
        kernel = kernel or self.finish_kernel(finisher, acc.dtype, flagged)
        flags = self.allocate(1, np.int32, zeroed=True) if flagged else None
        args = (self.slice(acc, 0, count), *outs) + ((flags,) if flagged else ())
        block = self.gather_block
        grid = min(-(-count // block), self.gather_grid)
        with self.launch_context(self.device().warp):
            self.launch_finishing(kernel, grid, block, stream, args + (float(finisher.ddof),))
        return bool(self.read_array(flags, 1, stream)[0]) if flagged else False

    def launch_finishing(self, kernel, grid, block, stream, args):
        """The finishing kernel's launch: :meth:`launch`, where a backend has no
        faster way."""
        self.launch(kernel, grid, block, stream, args)

    #: the gather and finishing kernels' block size and most blocks
    gather_block, gather_grid = 256, 1024

    def _gather(self, arr, stream):
        """Copy an N-D device array into a new C-order 1-D one."""
        flat = self.gpu.device_array(arr.size, dtype=arr.dtype, stream=stream)
        block = self.gather_block
        grid = min(-(-arr.size // block), self.gather_grid)
        with self.launch_context(self.device().warp):
            self.gather_kernel(arr.ndim)[grid, block, stream](arr, flat)
        return flat

    # --- the input

    def launch_stream(self, stream, info):
        """What this backend launches on: the caller's ``stream`` (None: the
        default), a stream object of its kernel module: results are read back
        through its ``synchronize``, so a bare handle cannot serve."""
        check_stream(stream)
        if stream and not hasattr(stream, "synchronize"):
            raise TypeError(f"stream= on the {self.name} backend must be a stream of its "
                            f"kernel module ({self.gpu.__name__}.stream()) or None, got "
                            f"{stream!r}")
        return stream or 0

    def as_device_array(self, x):
        """``x`` as an array of this backend's kernel module."""
        return x

    def flat_input(self, info, stream):
        """The input (:class:`pyreduce.interop.Input`) as a flat device array in C
        order: a view where it is one, else a gathered copy; host arrays are copied."""
        if not info.on_device:
            return self.to_device(info.host, stream)
        arr = self.as_device_array(info.device)
        if arr.ndim == 1:
            return arr
        if arr.ndim == 0 or arr.is_c_contiguous():
            return arr.reshape(arr.size)
        return self._gather(arr, stream)

    def to_device(self, host: np.ndarray, stream):
        return self.gpu.to_device(np.ascontiguousarray(host).reshape(-1), stream=stream)

    # --- inputs of axis= and segmented reductions (pyreduce.manyvalues)

    def upload(self, host: np.ndarray, stream):
        """A 1-D host array copied to a new device buffer (complete on return)."""
        return self.gpu.to_device(np.ascontiguousarray(host))

    def input_strides(self, info):
        """The byte strides of a device input, or None where the input is only
        usable in C order (then it is gathered: :meth:`gather_input`)."""
        arr = self.as_device_array(info.device)
        return arr.strides if arr.ndim == 0 or arr.is_c_contiguous() else None

    def input_span(self, info, off: int, span: int, stream):
        """The 1-D window of a device input's memory that
        :func:`pyreduce.axes.describe` names: ``span`` elements from ``off``
        elements below its first one. Here only for C-contiguous inputs."""
        assert off == 0 and span == info.size
        return self.as_device_array(info.device).reshape(info.size)

    def gather_input(self, info, perm: tuple, stream):
        """The device input's axes in the order ``perm``, gathered into a new
        C-order 1-D buffer."""
        return self._gather(self.as_device_array(info.device).transpose(perm), stream)

    def offsets_input(self, offsets, stream):
        """Segment offsets for the kernels: a device array as it is (any integer
        dtype), a host one uploaded as int64."""
        if isinstance(offsets, np.ndarray):
            return self.upload(offsets.astype(np.int64), stream)
        return self.as_device_array(offsets)

    def launch_context(self, warp: int):
        return _NO_CONTEXT

    # --- launching and memory, on the module's device arrays (overridden on CUDA)

    def launch(self, kernel, grid, block, stream, args):
        kernel.launcher(grid, block, stream)(*args)

    def slice(self, buf, start, stop):
        return buf[start:stop]

    def put_value(self, buf, value, stream):
        buf[:1].copy_to_device(np.asarray([value], dtype=buf.dtype), stream=stream)

    def new_result(self, dtype: np.dtype, stream, info, shape=()):
        """``(array, buffer)``: a new device array of ``shape`` (0-d for
        ``device_result=True``) and the 1-D buffer the kernels write it through."""
        arr = self.gpu.device_array(shape, dtype=dtype)
        return arr, arr.reshape(math.prod(shape))

    def out_buffer(self, out, dtype: np.dtype, shape=None):
        """The buffer the kernels write a user's ``out=`` device array through:
        one element, or (``shape`` given) the result's shape in C order."""
        if not hasattr(out, "reshape") or not hasattr(out, "copy_to_host"):
            raise TypeError(f"out= must be a NumPy array or a device array of this backend "
                            f"({self.name}), got {type(out).__name__}")
        check_out(out.shape, np.dtype(out.dtype), dtype, shape)
        if shape is None:
            return out.reshape(1)
        if not out.is_c_contiguous():
            raise ValueError("out= must be C-contiguous to be written in place")
        return out.reshape(out.size)

    def read_value(self, buf, stream):
        host = (buf if buf.size == 1 else buf[:1]).copy_to_host(stream=stream)
        if stream:
            stream.synchronize()
        return host[0]

    def read_array(self, buf, count: int, stream) -> np.ndarray:
        """The first ``count`` elements of a device buffer, on the host."""
        host = buf[:count].copy_to_host(stream=stream)
        if stream:
            stream.synchronize()
        return host

    def copy_buffer(self, dst, src, stream):
        """Copy the device buffer ``src`` into ``dst`` (as many elements), in
        order on ``stream`` (Numba's deallocations wait for the work queued
        before them, so ``src`` may be dropped after the call)."""
        dst.copy_to_device(src, stream=stream)

    def put_array(self, buf, host: np.ndarray, stream):
        """Write the 1-D host array into the start of a device buffer."""
        if host.size:
            buf[:host.size].copy_to_device(np.ascontiguousarray(host, dtype=buf.dtype),
                                           stream=stream)
