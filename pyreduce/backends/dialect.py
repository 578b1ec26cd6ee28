"""The spellings a backend gives the few device operations generated code uses.

Kernel factories never write ``cuda.`` or ``hip.`` themselves: they ask a
:class:`Dialect` for the text of a thread index, a barrier, a shared array or a
shuffle, so one factory serves CUDA, the CUDA simulator and (later) HIP. Every
method returns a Python expression or statement as a string.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Dialect", "CUDA", "SIM"]


@dataclasses.dataclass(frozen=True)
class Dialect:
    name: str
    #: emit the block size as the kernel's launch bounds, so the compiler keeps
    #: registers within what a block of that size may use (the simulator's jit
    #: takes no such option)
    launch_bounds: bool = True

    def decorator(self, block: int | None = None) -> str:
        if block and self.launch_bounds:
            return f"@gpu.jit(launch_bounds={block})"
        return "@gpu.jit"

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

    def shfl_down(self, value: str, delta: str, warp: int) -> str:
        """``value`` from lane ``lane + delta``; lanes past the warp get their own."""
        return (
            f"acc_t(gpu.shfl_down_sync({self.full_mask(warp)}, "
            f"carry_t({value}), {delta}))"
        )

    def shfl_idx(self, value: str, src: str, warp: int) -> str:
        """``value`` from lane ``src``."""
        return (
            f"acc_t(gpu.shfl_sync({self.full_mask(warp)}, carry_t({value}), {src}))"
        )

    def threadfence(self) -> str:
        return "gpu.threadfence()"

    def atomic_inc(self, array: str) -> str:
        """Add one to ``array[0]`` and return the old value."""
        return f"gpu.atomic.add({array}, 0, 1)"


#: numba-cuda on a GPU.
CUDA = Dialect("cuda")
#: The same source in Numba's CUDA simulator, less the launch bounds.
SIM = Dialect("sim", launch_bounds=False)
