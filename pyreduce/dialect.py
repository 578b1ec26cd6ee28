"""The spellings a backend gives the few device operations generated code uses.

Kernel factories never write ``cuda.`` or ``hip.`` themselves: they ask a
:class:`Dialect` for the text of a thread index, a barrier, a shared array or a
shuffle, so one factory serves CUDA, the CUDA simulator and HIP (numba-hip, AMD
GPUs: :class:`HipDialect`). Every method returns a Python expression or statement
as a string.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Dialect", "HipDialect", "CUDA", "SIM", "HIP"]


@dataclasses.dataclass(frozen=True)
class Dialect:
    name: str
    #: emit the block size as the kernel's launch bounds, so the compiler keeps
    #: registers within what a block of that size may use (the simulator's jit
    #: takes no such option)
    launch_bounds: bool = True
    #: pass ``lto=False`` to the kernels' ``jit``: numba-cuda links with
    #: link-time optimisation wherever nvJitLink is present, which compiles
    #: each kernel with NVVM twice (PTX, then LTO-IR for the link), 0.1-0.2 s
    #: of a new operator's first call; a kernel links nothing else, so the
    #: link has nothing to optimise across
    no_lto: bool = False

    def decorator(self, block: int | None = None, resident: int | None = None) -> str:
        """The kernel's ``jit`` line; with ``resident``, the blocks of ``block``
        threads an SM must hold at once as well (the second number of its
        launch bounds: the compiler keeps registers within what they leave a
        thread)."""
        bounds = f"({block}, {resident})" if resident else f"{block}"
        options = [f"launch_bounds={bounds}"] if block and self.launch_bounds else []
        if self.no_lto:
            options.append("lto=False")
        return f"@gpu.jit({', '.join(options)})" if options else "@gpu.jit"

    def device_decorator(self) -> str:
        """A device function (helpers a kernel module defines, such as a tuple
        accumulator's ``acc_t``)."""
        return "@gpu.jit(device=True)"

    def thread_idx(self) -> str:
        return "gpu.threadIdx.x"

    def block_idx(self) -> str:
        return "gpu.blockIdx.x"

    def block_dim(self) -> str:
        return "gpu.blockDim.x"

    def grid_dim(self) -> str:
        return "gpu.gridDim.x"

    def syncthreads(self) -> str:
        return "gpu.syncthreads()"

    def shared_array(self, size: int, dtype: str = "acc_t") -> str:
        return f"gpu.shared.array({size}, {dtype})"

    def full_mask(self, warp: int) -> str:
        return hex((1 << warp) - 1)

    def syncwarp(self, warp: int) -> str:
        # Independent thread scheduling (Volta+) means lanes of a warp are not in
        # lockstep: warp-synchronous code must say where lanes meet.
        return f"gpu.syncwarp({self.full_mask(warp)})"

    def shfl_down(self, value: str, delta: str, warp: int, cast: str = "acc_t",
                  carry: str = "carry_t") -> str:
        """``value`` from lane ``lane + delta``; lanes past the warp get their own.
        It travels as ``carry`` (what a shuffle moves) and is cast back with ``cast``."""
        return (
            f"{cast}(gpu.shfl_down_sync({self.full_mask(warp)}, "
            f"{carry}({value}), {delta}))"
        )

    def shfl_group(self, value: str, delta: str, warp: int, width: int,
                   cast: str = "acc_t", carry: str = "carry_t") -> str:
        """Step ``delta`` of a tree reduction in groups of ``width`` lanes (a power
        of two below ``warp``; aligned groups, each shuffling among its own lanes
        only, so groups may diverge): a lane whose index in its group is a
        multiple of ``2 * delta`` gets ``value`` from lane ``lane + delta``, any
        other lane a value from its own group.

        Numba's ``shfl_down_sync`` takes no width (its clamp is the whole warp),
        so this is ``shfl_xor_sync``, which stays in the group and, for the lanes
        above, reads lane ``lane + delta``; its mask is the group's lanes."""
        mask = f"({hex((1 << width) - 1)} << (gpu.laneid & {warp - width}))"
        return f"{cast}(gpu.shfl_xor_sync({mask}, {carry}({value}), {delta}))"

    def shfl_idx(self, value: str, src: str, warp: int, cast: str = "acc_t",
                 carry: str = "carry_t") -> str:
        """``value`` from lane ``src``."""
        return (
            f"{cast}(gpu.shfl_sync({self.full_mask(warp)}, {carry}({value}), {src}))"
        )

    def threadfence(self) -> str:
        return "gpu.threadfence()"

    def atomic_inc(self, array: str) -> str:
        """Add one to ``array[0]`` and return the old value."""
        return f"gpu.atomic.add({array}, 0, 1)"

    def draw_ticket(self, array: str, last: str, count: str) -> str:
        """Statements that release this thread's earlier writes to the whole
        device, add one to ``array[0]`` and set ``last`` to whether that drew the
        last of ``count`` tickets; the thread that draws the last one sees every
        write released before the other tickets. Here: a full fence, then a
        relaxed atomic add.

        One ``atom.acq_rel.gpu.add`` in place of ``membar.gl`` (a sequentially
        consistent fence) and the atomic timed the same, to within run-to-run
        noise, on an H100 at 2**11 to 2**28 elements and on an H200 at 2**24 to
        2**28 (commit 70ce564; ``docs/performance/ticket-ab-h100.json``,
        ``h200-kernel-options.json``), so the portable spelling stays."""
        return f"{self.threadfence()}\n{last} = {self.atomic_inc(array)} == {count} - 1"


#: numba-cuda on a GPU.
CUDA = Dialect("cuda", no_lto=True)
#: The same source in Numba's CUDA simulator, less the launch bounds.
SIM = Dialect("sim", launch_bounds=False)



@dataclasses.dataclass(frozen=True)
class HipDialect(Dialect):
    """numba-hip (``from numba import hip``) for AMD GPUs.

    numba-hip follows numba.cuda's kernel API (``jit``, ``threadIdx``,
    ``shared.array``, ``syncthreads``, ``threadfence``, ``atomic.add``) but its
    wavefront intrinsics are HIP's: ``shfl_down(value, delta, width)`` and
    ``shfl(value, src_lane, width)``, no masks, no ``*_sync`` names, no
    ``syncwarp``. The wavefront size (64 on gfx9/CDNA, 32 on gfx10+/RDNA) is the
    spec's ``warp``, a literal in the source: ``hip.warpsize`` is only known at
    run time inside a kernel. Nothing generated in this dialect has run on AMD
    hardware; it has been compiled to AMDGCN (``tests/amdgcn``, ``docs/rocm.md``).
    """

    #: numba-hip's ``jit`` takes no launch bounds (and no ``max_registers``): the
    #: compiler budgets registers for its default of up to 1024 threads per block.
    launch_bounds: bool = False

    def full_mask(self, warp: int) -> str:
        raise NotImplementedError("HIP shuffles take no lane mask")

    def syncwarp(self, warp: int) -> str:
        # The lanes of a wavefront execute in lockstep: one instruction stream with
        # an execution mask, no independent thread scheduling, so they need no
        # meeting point. What the tail still needs is a *memory* fence: without
        # one the compiler may move the next step's shared-memory loads above this
        # step's stores (different addresses in one thread's view), which lockstep
        # execution would then expose; pre-Volta CUDA code used ``volatile`` for
        # the same reason. A workgroup-scope fence is that ordering point (LLVM
        # keeps loads and stores on their side of it; on AMDGCN it costs an
        # ``s_waitcnt lgkmcnt(0)``), and unlike ``syncthreads`` it is legal inside
        # ``if tid < warp``. HIP's own ``__syncwarp`` (ROCm >= 6.2) is a
        # wavefront-scope fence around ``wave_barrier``; numba-hip 0.2.1 has none.
        return "gpu.threadfence_block()"

    def shfl_down(self, value: str, delta: str, warp: int, cast: str = "acc_t",
                  carry: str = "carry_t") -> str:
        """HIP's ``__shfl_down``: lanes past the width keep their own value."""
        return f"{cast}(gpu.shfl_down({carry}({value}), {delta}, {warp}))"

    def shfl_group(self, value: str, delta: str, warp: int, width: int,
                   cast: str = "acc_t", carry: str = "carry_t") -> str:
        """HIP's ``__shfl_down`` of width ``width``: lane ``lane + delta`` where
        that is in the caller's group, else its own value."""
        return self.shfl_down(value, delta, width, cast, carry)

    def shfl_idx(self, value: str, src: str, warp: int, cast: str = "acc_t",
                 carry: str = "carry_t") -> str:
        return f"{cast}(gpu.shfl({carry}({value}), {src}, {warp}))"

    def atomic_inc(self, array: str) -> str:
        """Add one to ``array[0]``, return the old value, then an agent-scope acquire.

        numba-hip 0.2.1 has no atomics on array elements: its ``hip.atomic.add`` is
        HIP's ``atomicAdd(T*, T)`` with the pointer turned into a stack out-argument
        (its lowering notes "TODO: Support atomics for arrays types"). So HIP code
        calls ``atomic_inc``, an intrinsic the HIP backend puts in the namespace
        (:meth:`pyreduce.backends.hip.HipBackend.kernel_namespace`): ``atomicrmw add``
        followed by ``fence syncscope("agent") acquire``. The fence makes the block
        that draws the last ticket see the partials the other blocks released with
        ``threadfence`` before drawing theirs; on CDNA3 (several L2 caches) it
        invalidates this block's caches, where CUDA needs nothing.
        """
        return f"atomic_inc({array})"


#: numba-hip on an AMD GPU; the wavefront size comes from the spec (64 or 32).
HIP = HipDialect("hip")
