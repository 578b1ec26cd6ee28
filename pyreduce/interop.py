"""What the user handed us: a host array or a device array, its dtype and shape.

Host arrays are NumPy arrays or anything NumPy can view without guessing
(``__array__``/``__array_interface__``: PyTorch CPU tensors, memoryviews of typed
buffers). Device arrays are anything with ``__cuda_array_interface__`` (CuPy,
PyTorch CUDA tensors, Numba device arrays) or the CUDA simulator's arrays. Lists,
scalars and strings are refused: a reduction of a Python list is ``functools.reduce``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .ops import check_dtype

__all__ = ["Input", "inspect"]


@dataclasses.dataclass(frozen=True)
class Input:
    """A validated input. ``host`` is set for host arrays, ``device`` otherwise."""

    dtype: np.dtype
    shape: tuple
    host: np.ndarray | None = None
    device: Any = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def on_device(self) -> bool:
        return self.device is not None


def _is_simulator_array(x) -> bool:
    return type(x).__name__ in ("FakeCUDAArray", "FakeWithinKernelCUDAArray") and (
        type(x).__module__.startswith("numba.cuda.simulator")
    )


def inspect(x) -> Input:
    """Classify ``x`` and check its dtype; TypeError names what is wrong."""
    if isinstance(x, np.ndarray):
        return Input(check_dtype(x.dtype), x.shape, host=x)
    # hasattr on the instance: a PyTorch CPU tensor's class has the property, but
    # reading it raises AttributeError
    if hasattr(x, "__cuda_array_interface__") or _is_simulator_array(x):
        try:
            dtype, shape = np.dtype(x.dtype), tuple(x.shape)
        except (AttributeError, TypeError):
            desc = x.__cuda_array_interface__
            dtype, shape = np.dtype(desc["typestr"]), tuple(desc["shape"])
        return Input(check_dtype(dtype), shape, device=x)
    if isinstance(x, np.generic):  # before the Python scalars: np.float64 is a float
        return inspect(np.asarray(x))
    if isinstance(x, memoryview):
        return inspect(np.asarray(x))
    if isinstance(x, (list, tuple, str, bytes, int, float, complex, bool)) or x is None:
        raise TypeError(
            f"expected an array (NumPy, CuPy, PyTorch, Numba device array), "
            f"got {type(x).__name__}; wrap Python data in np.asarray(...) first"
        )
    if hasattr(x, "__array__") or hasattr(x, "__array_interface__"):
        host = np.asarray(x)
        return Input(check_dtype(host.dtype), host.shape, host=host)
    raise TypeError(f"expected an array, got {type(x).__name__}")
