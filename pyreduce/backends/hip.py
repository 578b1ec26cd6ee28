"""The ``hip`` backend: the generated kernels on AMD GPUs through numba-hip.

.. warning::
   Untested on hardware. No AMD GPU was available while this was written: the
   kernels this backend generates have been *compiled* to AMDGCN for gfx942
   (wave64) and gfx1100 (wave32) and their ISA checked (``tests/amdgcn``,
   ``docs/rocm.md``), and the same kernels' wave64/wave32 logic runs in the CUDA
   simulator in the test suite; this module's launch and memory code has never
   run.

Install with ``pip install "pyreduce-gpu[rocm]"`` (numba-hip, which needs ROCm on the
machine and cannot share an environment with numba-cuda). Importing this module
needs neither: numba-hip is imported when a :class:`HipBackend` is made, and
nothing here imports ``numba.cuda``.

The kernels come from the same factories as CUDA's, in the
:data:`~pyreduce.dialect.HIP` dialect, with the device's wavefront size
(64 on gfx9: MI100/MI200/MI300; 32 on gfx10 and later: Radeon RDNA) baked in as
literals. Arrays are numba-hip device arrays; launches go through numba-hip's
dispatcher (``kernel[grid, block, stream](...)``).
"""

from __future__ import annotations

import contextlib
import functools

from ..planner import DeviceInfo
from ..spec import KernelSpec
from .base import GeneratedBackend
from ..dialect import HIP
__all__ = ["HipBackend", "wavefront_size", "atomic_inc"]


def wavefront_size(arch: str) -> int:
    """The wavefront size HIP compiles for ``arch`` by default: 64 on gfx9 (GCN
    and CDNA: gfx906, gfx908, gfx90a, gfx942, gfx950), 32 on gfx10 and later
    (RDNA: gfx1030, gfx1100, gfx1200, ...).

    >>> [wavefront_size(a) for a in ("gfx942", "gfx90a:sramecc+:xnack-", "gfx1100")]
    [64, 64, 32]
    """
    name = arch.split(":")[0]
    if not name.startswith("gfx") or len(name) < 6:
        raise ValueError(f"not an AMD GPU architecture: {arch!r}")
    return 64 if len(name) == 6 and name[3] in "6789" else 32


@functools.lru_cache(maxsize=None)
def atomic_inc():
    """``atomic_inc(a)``: add one to ``a[0]`` (an integer array) atomically, return
    the old value, then ``fence syncscope("agent") acquire``.

    A Numba intrinsic, because numba-hip 0.2.1 offers no atomics on array
    elements (see :meth:`pyreduce.dialect.HipDialect.atomic_inc`). The
    ``atomicrmw`` is monotonic (relaxed, like CUDA's ``atomicAdd``): the release
    is the ``threadfence`` the kernel issues before it.
    """
    from numba.core import cgutils, types
    from numba.core.extending import intrinsic

    @intrinsic
    def atomic_inc(typingctx, array):
        if not (isinstance(array, types.Array) and isinstance(array.dtype, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            aryty = sig.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            ptr = cgutils.get_item_pointer(
                context, builder, aryty, ary, [context.get_constant(types.intp, 0)]
            )
            old = builder.atomic_rmw(
                "add", ptr, context.get_constant(aryty.dtype, 1), "monotonic"
            )
            builder.fence("acquire", "agent")
            return old

        return array.dtype(array), codegen

    return atomic_inc


class HipBackend(GeneratedBackend):
    """numba-hip on an AMD GPU (untested on hardware: see the module docstring)."""

    name = "hip"
    dialect = HIP

    def __init__(self):
        from numba import hip

        super().__init__(hip)
        self.hip = hip

    # --- the device

    def device(self, warp: int | None = None) -> DeviceInfo:
        return self._gpu_info(self.device_id())

    def device_id(self) -> int:
        return int(self.hip.get_current_device().id)

    @functools.lru_cache(maxsize=None)  # noqa: B019  (a backend lives as long as the process)
    def _gpu_info(self, device_id) -> DeviceInfo:
        dev = self.hip.get_current_device()
        arch = dev.amdgpu_arch

        def attribute(attr, default):
            try:
                return int(getattr(dev, attr))
            except Exception:  # an attribute HIP's CUDA-named enum lacks
                return default

        wave = attribute("WARP_SIZE", 0) or wavefront_size(arch)
        return DeviceInfo(
            name=dev.name,
            key=("hip", int(device_id), arch.split(":")[0]),
            sm_count=attribute("MULTIPROCESSOR_COUNT", 1),
            max_threads_per_sm=attribute("MAX_THREADS_PER_MULTIPROCESSOR", 2048),
            max_blocks_per_sm=attribute("MAX_BLOCKS_PER_MULTIPROCESSOR", 32),
            warp=wave,
        )

    def launch_context(self, warp: int):
        wave = self.device().warp
        if warp != wave:
            raise ValueError(f"warp size {warp} is not this GPU's wavefront size ({wave})")
        return contextlib.nullcontext()

    # --- kernels

    def kernel_namespace(self, spec: KernelSpec, op, fmap=None) -> dict:
        """numba-hip's shuffles take the same types as numba.cuda's, so the shared
        names serve; the single-pass ticket needs :func:`atomic_inc`
        (:meth:`pyreduce.dialect.HipDialect.atomic_inc`)."""
        return {**super().kernel_namespace(spec, op, fmap), "atomic_inc": atomic_inc()}

    # --- memory, on numba-hip device arrays

    def as_device_array(self, x):
        """A numba-hip array for ``x``: itself, or a view through
        ``__cuda_array_interface__`` (which ROCm builds of PyTorch and CuPy export)."""
        if type(x).__module__.startswith("numba.hip"):
            return x
        if getattr(x, "requires_grad", False):  # a PyTorch tensor's values, as on CUDA
            x = x.detach()
        return self.hip.as_cuda_array(x)
