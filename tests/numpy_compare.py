"""CuPy's way of testing against NumPy, for pyreduce: one test body, written
once against a small array-library interface, run with NumPy (the reference) and
with pyreduce on a backend, and the two outcomes compared.

A body takes ``lib`` and returns a result (or a tuple of them). ``lib`` is a
:class:`NumPyLib` or a :class:`PyreduceLib`; both offer ``asarray`` (the input
where the library keeps it: a device copy for a device run), ``empty`` (an
``out=`` array, returned as it is by the call that fills it), ``tohost`` (such
an array back on the host), the named reductions with NumPy's signatures,
``reduce`` and ``segmented_reduce``. The reference computes user operators with
``functools.reduce`` over the rows of ``x.transpose(kept + reduced).reshape(M,
K)`` (segments: over each ``x[o[i]:o[i+1]]``), which is the order pyreduce
promises, and built-in ones with NumPy's own reductions.

Outcomes match when both raise exceptions of the same type (NumPy's type, or a
subclass), or both return results of the same type (NumPy scalar or array), dtype
and shape, with equal values: integers, bools and selections exactly, float sums
and products within a tolerance, NaN equal to NaN. A device run's array results
must come back as device arrays of the input's library.
"""

from __future__ import annotations

import functools
import inspect as pyinspect
import operator
import warnings

import numpy as np

try:
    from numpy.lib.array_utils import normalize_axis_tuple
except ImportError:  # NumPy 1.x
    from numpy.core.numeric import normalize_axis_tuple

import pyreduce

_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
           "nanmax": np.fmax, "nanmin": np.fmin, operator.add: np.add, operator.mul: np.multiply,
           max: np.maximum, min: np.minimum}


class NumPyLib:
    """The reference."""

    name = "numpy"
    on_device = False

    def asarray(self, a):
        return a

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def tohost(self, a):
        return a

    def __getattr__(self, name):
        if name in ("sum", "prod", "max", "min", "nanmax", "nanmin"):
            fn = getattr(np, name)

            def call(*args, **kwargs):
                with warnings.catch_warnings():  # all-NaN slices: pyreduce does not warn
                    warnings.simplefilter("ignore", RuntimeWarning)
                    with np.errstate(all="ignore"):
                        return fn(*args, **kwargs)

            return call
        raise AttributeError(name)

    def reduce(self, x, op, identity=None, *, axis=None, keepdims=False, initial=None,
               dtype=None, out=None):
        acc = np.dtype(dtype or x.dtype)
        ufunc = _UFUNCS.get(op) if isinstance(op, (str, type(max), np.ufunc)) else None
        axes = tuple(range(x.ndim)) if axis is None else normalize_axis_tuple(axis, x.ndim)
        if ufunc is not None and identity is None:
            extra = {} if initial is None else {"initial": initial}
            with np.errstate(all="ignore"):
                return ufunc.reduce(x, axis=axes, dtype=acc, keepdims=keepdims, out=out, **extra)
        kept = [a for a in range(x.ndim) if a not in axes]
        M = int(np.prod([x.shape[a] for a in kept]))
        K = int(np.prod([x.shape[a] for a in axes]))
        rows = x.transpose(kept + sorted(axes)).reshape(M, K).astype(acc)
        values = [self._fold(op, row, acc, identity, initial) for row in rows]
        shape = [1 if a in axes else x.shape[a] for a in range(x.ndim)] if keepdims else \
            [x.shape[a] for a in kept]
        result = np.array(values, dtype=acc).reshape(shape)
        if out is not None:
            out[...] = result
            return out
        return result[()] if result.ndim == 0 else result

    @staticmethod
    def _fold(op, values, acc, identity, initial):
        step = lambda a, b: acc.type(op(a, b))  # noqa: E731
        with np.errstate(all="ignore"):
            if initial is not None:
                return functools.reduce(step, values, acc.type(initial))
            if len(values) == 0:
                if identity is None:
                    raise ValueError("zero-size reduction with no identity")
                return acc.type(identity)
            return functools.reduce(step, values)

    def segmented_reduce(self, x, offsets, op, identity=None, *, initial=None, dtype=None,
                         out=None):
        acc = np.dtype(dtype or x.dtype)
        o = np.asarray(offsets)
        if o.ndim != 1 or o.size < 1 or x.ndim != 1:
            raise ValueError("bad shapes")
        if o.dtype.kind not in "iu":
            raise TypeError("offsets must be integers")
        if (o < 0).any() or (o > x.size).any() or (np.diff(o) < 0).any():
            raise ValueError("bad offsets")
        ufunc = _UFUNCS.get(op) if isinstance(op, str) else None
        values = []
        for i in range(o.size - 1):
            seg = x[o[i]:o[i + 1]].astype(acc)
            if ufunc is not None and (seg.size or identity is None):
                # NumPy's own identity for an empty one (none for max: ValueError)
                extra = {} if initial is None else {"initial": initial}
                with np.errstate(all="ignore"):
                    values.append(ufunc.reduce(seg, dtype=acc, **extra))
            else:
                values.append(self._fold(ufunc or op, list(seg), acc, identity, initial))
        result = np.array(values, dtype=acc).reshape(o.size - 1)
        if out is not None:
            out[...] = result
            return out
        return result


class PyreduceLib:
    """pyreduce on ``backend``, with inputs on the device when ``on_device``."""

    def __init__(self, backend: str, on_device: bool = False):
        self.name, self.backend, self.on_device = "pyreduce", backend, on_device

    def asarray(self, a):
        return to_device(a) if self.on_device else a

    def empty(self, shape, dtype):
        return to_device(np.empty(shape, dtype)) if self.on_device else np.empty(shape, dtype)

    def tohost(self, a):
        return to_host(a, self.on_device)

    def __getattr__(self, name):
        fn = getattr(pyreduce, name)

        def call(*args, **kwargs):
            kwargs.setdefault("backend", self.backend)
            result = fn(*args, **kwargs)
            if result is kwargs.get("out"):
                return result  # the caller's array: the body compares it (tohost)
            return to_host(result, self.on_device and self.backend != "cpu"
                           and not isinstance(result, np.generic))

        return call


def to_device(a: np.ndarray):
    """``a`` on the device: a CuPy array where CuPy is importable (its views keep
    any strides), else a Numba device array (the simulator's under pytest)."""
    try:
        import cupy

        if pyreduce.backends._numba_cuda_mode() == "cuda":
            return cupy.asarray(a)
    except ImportError:
        pass
    from numba import cuda

    return cuda.to_device(a)


def to_host(result, expect_device: bool):
    """A device result brought back, after checking it is one when expected."""
    if isinstance(result, tuple):
        return tuple(to_host(r, expect_device) for r in result)
    on_device = hasattr(result, "copy_to_host") or hasattr(result, "get")
    if isinstance(result, (bool, np.bool_)) or result is None:
        return result
    assert on_device == expect_device, (
        f"result is a {type(result).__name__}; expected a "
        f"{'device' if expect_device else 'host'} array")
    if hasattr(result, "copy_to_host"):
        return result.copy_to_host()
    if hasattr(result, "get") and not isinstance(result, np.ndarray):
        return result.get()
    return result


def outcome(body, lib, *args, **kwargs):
    """``(result, None)`` or ``(None, exception)``."""
    try:
        return body(lib, *args, **kwargs), None
    except Exception as exc:  # compared below
        return None, exc


def assert_same(got, want, tol: float | None = None):
    """``got`` (pyreduce's) matches ``want`` (the reference's): see the module
    docstring. ``tol``: relative tolerance of float results (None: by dtype)."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w, tol)
        return
    if isinstance(want, (bool, np.bool_)) and not isinstance(want, np.generic):
        assert got == want
        return
    if isinstance(want, np.generic):
        assert isinstance(got, np.generic), f"got a {type(got).__name__}, expected a scalar"
    else:
        assert isinstance(got, np.ndarray), f"got a {type(got).__name__}, expected an array"
        assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind != "f":
        assert np.array_equal(got, want), f"got {got!r}, expected {want!r}"
        return
    if tol is None:
        tol = 1e-4 if want.dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


def check(body, backend: str, on_device: bool = False, *args, tol=None, **kwargs):
    """Run ``body`` with NumPy and with pyreduce on ``backend`` and compare."""
    want, want_exc = outcome(body, NumPyLib(), *args, **kwargs)
    got, got_exc = outcome(body, PyreduceLib(backend, on_device), *args, **kwargs)
    if want_exc is not None:
        assert got_exc is not None, f"NumPy raised {want_exc!r}; pyreduce returned {got!r}"
        assert isinstance(got_exc, type(want_exc)), (
            f"NumPy raised {type(want_exc).__name__}, pyreduce {type(got_exc).__name__}: "
            f"{got_exc}")
        return got_exc
    if got_exc is not None:
        raise got_exc
    assert_same(got, want, tol)
    return got


def numpy_pyreduce(tol=None):
    """A decorator: the test ``body(lib, ...)`` becomes a test taking the
    ``backend`` and ``placement`` fixtures in place of ``lib``, that runs the body
    with NumPy and with pyreduce and compares them (:func:`check`)."""

    def decorate(body):
        @functools.wraps(body)
        def test(backend, placement, *args, **kwargs):
            check(body, backend, placement == "device", *args, tol=tol, **kwargs)

        sig = pyinspect.signature(body)
        params = list(sig.parameters.values())[1:]
        test.__signature__ = sig.replace(parameters=[
            pyinspect.Parameter("backend", pyinspect.Parameter.POSITIONAL_OR_KEYWORD),
            pyinspect.Parameter("placement", pyinspect.Parameter.POSITIONAL_OR_KEYWORD),
            *params])
        del test.__wrapped__  # pytest reads the signature above, not the body's
        return test

    return decorate
