"""The reductions compared, one definition each, shared by ``compare.py`` and the
pytest-benchmark files.

A *case* is an input dtype, an op and the accumulator dtype (``int8`` sums into
``int64``, as ``np.sum`` does). For each library, :func:`calls` returns two
callables over the same CuPy input array: ``device()`` leaves the result on the
device (what device time is measured on) and ``host()`` returns a host scalar
(what call latency is measured on). Everything a call needs (output buffers,
temporary storage, compiled objects, wrapped arrays) is made before timing.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Case:
    dtype: str
    op: str  # "sum" or "max"
    acc: str

    @property
    def name(self) -> str:
        acc = f"->{self.acc}" if self.acc != self.dtype else ""
        return f"{self.dtype}{acc} {self.op}"


CASES = [
    Case("float32", "sum", "float32"),
    Case("float32", "max", "float32"),
    Case("float64", "sum", "float64"),
    Case("float64", "max", "float64"),
    Case("int32", "sum", "int32"),
    Case("int8", "sum", "int64"),
]

#: pyreduce with a CuPy input (built-in op), with a Numba device array input,
#: with the user's own Python op, then the peers.
LIBS = [
    "pyreduce", "pyreduce-numba", "pyreduce-lambda",
    "cupy", "torch", "cuda.compute", "numba.cuda.reduce",
]

#: Libraries whose calls wait for the GPU (numba.cuda.reduce frees its scratch
#: within the call), so their device time cannot be taken with the GPU held
#: (:func:`pyreduce.tuning.device_seconds`) and includes their host's pace.
UNHELD = {"numba.cuda.reduce"}


def data(case: Case, n: int, seed: int = 0):
    """A CuPy array of ``n`` values that exercise the op: normal floats, ints
    spread over a range that makes int32 sums wrap and int8 sums need int64."""
    import cupy as cp

    rng = cp.random.default_rng(seed)
    if case.dtype.startswith("float"):
        return rng.standard_normal(n, dtype=cp.float32).astype(case.dtype)
    info = np.iinfo(case.dtype)
    return rng.integers(info.min, info.max, n, dtype=case.dtype, endpoint=True)


def expected(case: Case, x) -> float:
    """The answer, from CuPy in float64 (sum) or exactly (max)."""
    import cupy as cp

    if case.op == "max":
        return float(x.max())
    if case.dtype.startswith("float"):
        return float(x.sum(dtype=cp.float64))
    return int(x.sum(dtype=cp.int64).astype(case.acc))  # wraps like the accumulator


def user_op(case: Case):
    """The user's own Python op for the case (what pyreduce-lambda and
    numba.cuda.reduce run)."""
    if case.op == "sum":
        return lambda a, b: a + b
    return lambda a, b: a if a > b else b


def calls(lib: str, case: Case, x):
    """``(device, host)`` callables for ``lib`` on the CuPy array ``x``, or None
    where the library cannot do the case."""
    acc = np.dtype(case.acc)
    if lib.startswith("pyreduce"):
        import pyreduce

        src = x
        if lib == "pyreduce-numba":
            from numba import cuda

            src = cuda.as_cuda_array(x)
        if lib == "pyreduce-lambda":
            f = user_op(case)

            def red(**kw):
                return pyreduce.reduce(src, f, dtype=acc, **kw)
        elif case.op == "sum":
            def red(**kw):
                return pyreduce.sum(src, dtype=acc, **kw)
        else:
            def red(**kw):
                return pyreduce.max(src, **kw)
        # a CuPy input's result is a 0-d CuPy array by default: ask for the host scalar
        return (lambda: red(device_result=True)), (lambda: red(device_result=False))
    if lib == "cupy":
        # the accumulator named, as for every library (CuPy sums int32 in int64 otherwise)
        dev = (lambda: x.sum(dtype=acc)) if case.op == "sum" else x.max
        return dev, (lambda: dev().item())
    if lib == "torch":
        try:
            import torch
        except ImportError:
            return None
        xt = torch.as_tensor(x, device="cuda")
        tacc = getattr(torch, case.acc)
        dev = (lambda: xt.sum(dtype=tacc)) if case.op == "sum" else xt.max
        return dev, (lambda: dev().item())
    if lib == "cuda.compute":
        return _cuda_compute(case, x)
    if lib == "numba.cuda.reduce":
        if acc != x.dtype:
            return None  # accumulates in the input dtype: an int8 sum would wrap
        from numba import cuda

        xd = cuda.as_cuda_array(x)
        f = cuda.Reduce(user_op(case))
        res = cuda.device_array(1, dtype=x.dtype)
        return (lambda: f(xd, res=res)), (lambda: f(xd))
    raise ValueError(f"unknown library {lib!r}")


def _cuda_compute(case: Case, x):
    try:
        import cuda.compute as cc
    except Exception:  # not installed, or no bindings for this CUDA
        return None
    import cupy as cp

    acc = np.dtype(case.acc)
    op = cc.OpKind.PLUS if case.op == "sum" else cc.OpKind.MAXIMUM
    init = np.zeros(1, acc) if case.op == "sum" else np.array([np.finfo(acc).min if
                                                               acc.kind == "f" else
                                                               np.iinfo(acc).min], acc)
    out = cp.empty(1, dtype=acc)
    try:
        reducer = cc.make_reduce_into(d_in=x, d_out=out, op=op, h_init=init)
        nbytes = reducer(temp_storage=None, d_in=x, d_out=out, num_items=x.size, op=op,
                         h_init=init)
    except Exception:  # a case this version cannot build
        return None
    tmp = cp.empty(max(1, nbytes), dtype=cp.uint8)

    def dev():
        reducer(temp_storage=tmp, d_in=x, d_out=out, num_items=x.size, op=op, h_init=init)
        return out

    return dev, (lambda: dev().get()[0])
