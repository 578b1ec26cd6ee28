"""``Reduce``: a drop-in for ``numba.cuda.Reduce``, on :func:`pyreduce.reduce`."""

from __future__ import annotations

from .general import check_keywords, reduce
from .interop import inspect
from .ops import cast_value

__all__ = ["Reduce"]


class Reduce:
    """A reusable reduction with a user operator: a drop-in for ``numba.cuda.Reduce``.

    ``Reduce(f)(arr, size=None, res=None, init=0, stream=0)`` returns
    ``functools.reduce(f, arr[:size], init)``; with ``res`` (a device array) the
    result is written to ``res[0]`` and None is returned. Kernels are cached by the
    operator's code, so a new ``Reduce`` of the same lambda does not recompile.

    >>> import numpy as np, pyreduce
    >>> R = pyreduce.Reduce(lambda a, b: a + b)
    >>> float(R(np.arange(1.0, 11.0), init=3, backend="cpu"))
    58.0
    """

    def __init__(self, functor, **unexpected):
        check_keywords("Reduce", unexpected, ())
        self._functor = functor

    def __call__(self, arr, size=None, res=None, init=0, stream=0, *, backend="auto",
                 **unexpected):
        check_keywords("Reduce(f)", unexpected, ())
        if getattr(arr, "ndim", None) != 1:
            raise TypeError("only support 1D array")
        if size is not None:
            arr = arr[:size]
        info = inspect(arr, masked=True)  # a PyTorch tensor's dtype and size too (not NumPy's)
        # numba's reduce wants init of arr's type: a value that is not one (2.5
        # for integers) is refused as initial= is, not truncated
        init = cast_value(init, info.dtype, "init")
        if info.size < 1:
            return init
        if res is None:  # a host value, as numba.cuda.Reduce returns, for every input
            return reduce(arr, self._functor, initial=init, backend=backend, stream=stream,
                          device_result=False)
        reduce(arr, self._functor, initial=init, backend=backend, out=res[:1], stream=stream)
        return None
