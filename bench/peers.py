"""The cases and the peers, one definition each, shared by the study scripts and
the pytest-benchmark files.

A *case* is an input dtype, an op and the accumulator dtype (``int8`` sums into
``int64``, as ``np.sum`` does). For each library, :func:`calls` returns two
callables over the same CuPy input array: ``device()`` leaves the result on the
device (what device time is measured on) and ``host()`` returns a host scalar
(what call latency is measured on). Everything a call needs (output buffers,
temporary storage, compiled objects, wrapped arrays) is made before timing.

The other studies' peers are here too: :func:`statistic` (``structured_calls.py``),
:func:`matrix_calls` and :func:`segmented_calls` (``axes.py``) and
:func:`host_calls` (``host_input.py``); :func:`to_host` brings any library's
result to the host.
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

#: The distributions whose versions a run records (those installed).
DISTS = ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "torch", "cuda-cccl",
         "cuda-bindings")

#: Libraries whose calls wait for the GPU (numba.cuda.reduce frees its scratch
#: within the call), so their device time cannot be taken with the GPU held
#: (:func:`pyreduce.tuning.device_seconds`) and includes their host's pace.
UNHELD = {"numba.cuda.reduce"}


def pick(names, pool=CASES) -> list:
    """The cases of ``pool`` named in ``names`` (all of them when it is empty)."""
    if not names:
        return list(pool)
    found = {c.name: c for c in pool}
    unknown = [c for c in names if c not in found]
    if unknown:
        raise ValueError(f"unknown case(s) {unknown}; the cases are {sorted(found)}")
    return [found[c] for c in names]


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


def close(got, want, case: Case, n: int) -> bool:
    """Whether a result ``got`` is the answer ``want`` (:func:`expected`): float sums
    to a bound on their rounding error, the rest exactly."""
    if case.dtype.startswith("float") and case.op == "sum":
        eps = np.finfo(case.dtype).eps
        return abs(float(got) - want) <= 4 * eps * np.sqrt(n) * max(1.0, np.sqrt(n))
    return float(got) == float(want)


def user_max(a, b):
    """The user's own max, as a named function."""
    return a if a > b else b


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
    cc = cuda_compute()
    if cc is None:
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
        dev = cuda_compute_call(reducer, out, d_in=x, d_out=out, num_items=x.size, op=op,
                                h_init=init)
    except Exception:  # a case this version cannot build
        return None
    return dev, (lambda: dev().get()[0])


def cuda_compute():
    """The ``cuda.compute`` module, or None where it does not import."""
    try:
        import cuda.compute as cc
    except Exception:  # not installed, or no bindings for this CUDA
        return None
    return cc


def cuda_compute_call(reducer, out, **args):
    """A call of the ``cuda.compute`` ``reducer`` on ``args`` that returns ``out``,
    its temporary storage sized (by a call without it) and made first."""
    import cupy as cp

    nbytes = reducer(temp_storage=None, **args)
    tmp = cp.empty(max(1, nbytes), dtype=cp.uint8)

    def call():
        reducer(temp_storage=tmp, **args)
        return out

    return call


def to_host(v):
    """A library's result (CuPy, Numba, PyTorch, NumPy; a tuple of them) on the host,
    as NumPy."""
    if isinstance(v, tuple):
        return tuple(to_host(p) for p in v)
    if hasattr(v, "get") and not isinstance(v, np.ndarray):
        return np.asarray(v.get())
    if hasattr(v, "copy_to_host"):
        return v.copy_to_host()
    if hasattr(v, "cpu"):  # PyTorch; bfloat16, which NumPy lacks, as float32
        v = v.detach().cpu()
        return (v.float() if str(v.dtype) == "torch.bfloat16" else v).numpy()
    return np.asarray(v)


# --- the statistics (structured_calls.py)

#: The libraries the statistics are compared across.
STAT_LIBS = ["pyreduce", "cupy", "torch"]


def statistic(lib: str, name: str, x, axis):
    """The call of ``name`` (mean, var, std, argmax, argmin, minmax) in ``lib``
    over the CuPy array ``x`` (PyTorch: a zero-copy tensor of it)."""
    if lib == "pyreduce":
        import pyreduce

        fn = getattr(pyreduce, name)
        return lambda: fn(x) if axis is None else fn(x, axis=axis)
    if lib == "cupy":
        if name == "minmax":
            return lambda: (x.min(axis=axis), x.max(axis=axis))
        return lambda: getattr(x, name)(axis=axis)
    import torch

    t = torch.as_tensor(x, device="cuda")
    dim = {} if axis is None else {"dim": axis}
    if name in ("var", "std"):
        return lambda: getattr(t, name)(correction=0, **dim)
    if name == "minmax":
        return lambda: torch.aminmax(t, **dim)
    return lambda: getattr(t, name)(**dim)


# --- along axes and in segments (axes.py)


def matrix_calls(x, axis: int) -> dict:
    """``{library: (call, reference)}`` for the matrix ``x`` along ``axis``."""
    import pyreduce

    return {
        "pyreduce sum": (lambda: pyreduce.sum(x, axis=axis), lambda: x.sum(axis=axis)),
        "pyreduce-lambda sum": (lambda: pyreduce.reduce(x, lambda a, b: a + b, axis=axis),
                                lambda: x.sum(axis=axis)),
        "cupy sum": (lambda: x.sum(axis=axis), lambda: x.sum(axis=axis)),
        "pyreduce max": (lambda: pyreduce.max(x, axis=axis), lambda: x.max(axis=axis)),
        "cupy max": (lambda: x.max(axis=axis), lambda: x.max(axis=axis)),
    }


def segmented_calls(x, size: int) -> dict:
    """``{library: call}`` for sums of ``x`` in segments of ``size``: each leaves
    its result on the device. CuPy has no segmented reduction: ``cupy.add.reduceat``
    over the segment starts is its general formulation, ``reshape-sum`` needs equal
    segments."""
    import cupy as cp

    import pyreduce

    S = x.size // size
    offsets = cp.arange(0, x.size + 1, size, dtype=cp.int64)
    starts, ends = offsets[:-1], offsets[1:]
    calls = {
        "pyreduce": lambda: pyreduce.segmented_reduce(x, offsets, "add"),
        "pyreduce-lambda": lambda: pyreduce.segmented_reduce(x, offsets, lambda a, b: a + b,
                                                             np.float32(0)),
        "cupy reduceat": lambda: cp.add.reduceat(x, starts),
        "cupy reshape-sum": lambda: x.reshape(S, size).sum(axis=1),
    }
    cc = _cuda_compute_segmented(x, starts, ends, S)
    if cc is not None:
        calls["cuda.compute"] = cc
    return calls


def _cuda_compute_segmented(x, starts, ends, S):
    cc = cuda_compute()
    if cc is None:
        return None
    import traceback

    import cupy as cp

    out = cp.empty(S, dtype=x.dtype)
    init = np.zeros(1, x.dtype)
    args = dict(d_in=x, d_out=out, op=cc.OpKind.PLUS, num_segments=S, start_offsets_in=starts,
                end_offsets_in=ends, h_init=init)
    try:
        reducer = cc.make_segmented_reduce(d_in=x, d_out=out, start_offsets_in=starts,
                                           end_offsets_in=ends, op=cc.OpKind.PLUS, h_init=init)
        call = cuda_compute_call(reducer, out, **args)
        call()
        return call
    except Exception:  # an API this version does not have
        traceback.print_exc()
        return None


# --- NumPy inputs (host_input.py)


def host_calls(op: str, x: np.ndarray):
    """``(NumPy's call, pyreduce's call taking a backend name)`` for ``op`` (max,
    sum, or ``lambda``: :func:`user_max`, whose NumPy peer is ``max``) on the
    NumPy array ``x``."""
    import pyreduce

    if op == "max":
        return x.max, lambda be: pyreduce.max(x, backend=be)
    if op == "sum":
        return x.sum, lambda be: pyreduce.sum(x, backend=be)
    return x.max, lambda be: pyreduce.reduce(x, user_max, backend=be)
