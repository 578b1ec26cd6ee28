"""CuPy's way of testing against NumPy, for pyreduce: one test body, written
once against a small array-library interface, run with NumPy (the reference) and
with pyreduce on a backend, and the two outcomes compared.

A body takes ``lib`` and returns a result (or a tuple of them). ``lib`` is a
:class:`NumPyLib` or a :class:`PyreduceLib`; both offer ``asarray`` (the input
where the library keeps it: a device copy for a device run), ``empty`` (an
``out=`` array, returned as it is by the call that fills it), ``tohost`` (such
an array back on the host), the named reductions (:data:`NAMED`) with
pyreduce's signatures, ``reduce`` and ``segmented_reduce``. The reference
computes user operators with ``functools.reduce`` over the rows of
``x.transpose(kept + reduced).reshape(M, K)`` (segments: over each
``x[o[i]:o[i+1]]``), which is the order pyreduce promises, and built-in ones and
the named reductions with NumPy's own functions.

Where pyreduce's documented semantics differ from NumPy's, the reference follows
pyreduce's documents: float16 and bfloat16 are loaded as float32 (so sums,
maxima, user ops and ``mean``/``var``/``std`` give float32), the ordering ops
(``max``, ``min``, ``nanmax``, ``nanmin``) refuse complex input with a TypeError,
and ``minmax`` of complex input returns the first NaN in C order (NumPy's
``np.min`` takes the first in memory order).

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
           "nanmax": np.fmax, "nanmin": np.fmin, "and": np.bitwise_and, "or": np.bitwise_or,
           "xor": np.bitwise_xor, "logical_and": np.logical_and,
           "logical_or": np.logical_or, operator.add: np.add, operator.mul: np.multiply,
           operator.and_: np.bitwise_and, operator.or_: np.bitwise_or,
           operator.xor: np.bitwise_xor, max: np.maximum, min: np.minimum}
_UFUNCS.update({u: u for u in set(_UFUNCS.values())})
#: the ufuncs that order their operands: pyreduce refuses complex input to them
_ORDERINGS = {np.maximum, np.minimum, np.fmax, np.fmin}

#: every named reduction of pyreduce (``NumPyLib`` has a reference for each)
NAMED = ("sum", "prod", "max", "min", "nanmax", "nanmin", "any", "all", "argmax", "argmin",
         "minmax", "mean", "var", "std", "nansum", "nanprod")
_ORDERED_NAMES = ("max", "min", "nanmax", "nanmin")


def is_half(dtype) -> bool:
    """float16 (in either byte order) or bfloat16 (ml_dtypes'), which pyreduce
    loads as float32."""
    dt = np.dtype(dtype)
    return dt.newbyteorder("=") == np.float16 or dt.name == "bfloat16"


def loaded(x):
    """The values pyreduce reduces for host array ``x``: half precision as
    float32, and in native byte order."""
    if is_half(x.dtype):
        return x.astype(np.float32)
    return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))


def _refuse_complex(dtype, what):
    if np.dtype(dtype).kind == "c":
        raise TypeError(f"{what} is not defined for complex dtype {np.dtype(dtype)}")


def _quiet(fn, *args, **kwargs):
    """``fn`` without NumPy's warnings (all-NaN slices, empty means: pyreduce does
    not warn) and floating-point error reports (wrap-around, overflow)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)


def moments_dtype(dtype, statistic: str) -> np.dtype:
    """The result dtype of ``mean``/``var``/``std``: NumPy's, except float32 for
    float16 and bfloat16 (docs/semantics.md)."""
    dt = np.dtype(dtype).newbyteorder("=")
    if dt.kind == "c":
        return dt if statistic == "mean" else np.dtype(dt.char.lower())
    return np.dtype(np.float32 if dt == np.float32 or is_half(dt) else np.float64)


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
        if name in ("sum", "prod", "max", "min", "nanmax", "nanmin", "any", "all", "nansum",
                    "nanprod"):
            fn = getattr(np, name)

            def call(x, *args, **kwargs):
                if name in _ORDERED_NAMES:
                    _refuse_complex(x.dtype, name)
                return _quiet(fn, loaded(x), *args, **kwargs)

            return call
        raise AttributeError(name)

    def argmax(self, x):
        return np.argmax(loaded(x))

    def argmin(self, x):
        return np.argmin(loaded(x))

    def minmax(self, x):
        x = np.ascontiguousarray(loaded(x))  # the first NaN in C order
        return _quiet(np.min, x), _quiet(np.max, x)

    def mean(self, x):
        return self._moment(np.mean, x, "mean")

    def var(self, x, ddof=0):
        return self._moment(np.var, x, "var", ddof=ddof)

    def std(self, x, ddof=0):
        return self._moment(np.std, x, "std", ddof=ddof)

    @staticmethod
    def _moment(fn, x, statistic, **kwargs):
        wide = np.complex128 if x.dtype.kind == "c" else np.float64
        value = _quiet(fn, x.astype(wide), **kwargs)
        return moments_dtype(x.dtype, statistic).type(value)

    def reduce(self, x, op, identity=None, *, axis=None, keepdims=False, initial=None,
               dtype=None, out=None):
        x = loaded(x)
        ufunc = _UFUNCS.get(op) if isinstance(op, (str, type(max), np.ufunc)) else None
        logical = ufunc in (np.logical_and, np.logical_or)
        acc = np.dtype(np.bool_) if logical else np.dtype(dtype or x.dtype)
        if ufunc in _ORDERINGS:
            _refuse_complex(acc, ufunc.__name__)
        axes = tuple(range(x.ndim)) if axis is None else normalize_axis_tuple(axis, x.ndim)
        if ufunc is not None:
            empty = any(x.shape[a] == 0 for a in axes)
            return _quiet(ufunc.reduce, x, axis=axes, dtype=acc, keepdims=keepdims, out=out,
                          **_start(initial, identity, empty))
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
        x = loaded(x)
        acc = np.dtype(dtype or x.dtype)
        o = np.asarray(offsets)
        if o.ndim != 1 or o.size < 1 or x.ndim != 1:
            raise ValueError("bad shapes")
        if o.dtype.kind not in "iu":
            raise TypeError("offsets must be integers")
        if (o < 0).any() or (o > x.size).any() or (np.diff(o) < 0).any():
            raise ValueError("bad offsets")
        ufunc = _UFUNCS.get(op) if isinstance(op, (str, type(max), np.ufunc)) else None
        if ufunc in _ORDERINGS:
            _refuse_complex(acc, ufunc.__name__)
        if ufunc is not None:  # NumPy's TypeError for an op the dtype lacks, segments or not
            ufunc.reduce(np.zeros(1, acc), dtype=acc)
        values = []
        for i in range(o.size - 1):
            seg = x[o[i]:o[i + 1]].astype(acc)
            if ufunc is not None:
                values.append(_quiet(ufunc.reduce, seg, dtype=acc,
                                     **_start(initial, identity, seg.size == 0)))
            else:
                values.append(self._fold(op, list(seg), acc, identity, initial))
        result = np.array(values, dtype=acc).reshape(o.size - 1)
        if out is not None:
            out[...] = result
            return out
        return result


def _start(initial, identity, empty: bool) -> dict:
    """The ``initial=`` of a NumPy ufunc reduction for pyreduce's ``initial`` and
    ``identity``: an identity only decides what an empty reduction gives (NumPy's
    own where there is none: none for max, a ValueError)."""
    if initial is not None:
        return {"initial": initial}
    return {"initial": identity} if identity is not None and empty else {}


class PyreduceLib:
    """pyreduce on ``backend``, with inputs on the device when ``on_device``."""

    def __init__(self, backend: str, on_device: bool = False, options=None):
        self.name, self.backend, self.on_device = "pyreduce", backend, on_device
        self.options = options or {}  # keywords of every call (the kernels' tuning)

    def asarray(self, a):
        return to_device(a) if self.on_device else a

    def empty(self, shape, dtype):
        return to_device(np.empty(shape, dtype)) if self.on_device else np.empty(shape, dtype)

    def tohost(self, a):
        # an out= array: an array on the host too, a 0-d one included
        return np.asarray(to_host(a, self.on_device))

    def __getattr__(self, name):
        fn = getattr(pyreduce, name)

        def call(*args, **kwargs):
            kwargs.setdefault("backend", self.backend)
            for k, v in self.options.items():
                kwargs.setdefault(k, v)
            result = fn(*args, **kwargs)
            if result is kwargs.get("out"):
                return result  # the caller's array: the body compares it (tohost)
            return to_host(result, self.on_device and self.backend != "cpu")

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


@functools.lru_cache(maxsize=None)
def device_keeps_byte_order() -> bool:
    """Whether :func:`to_device` keeps a non-native byte order (Numba's device
    arrays do; CuPy converts to native order as it copies)."""
    return not to_device(np.zeros(2, np.dtype(">i4"))).dtype.isnative


def to_host(result, expect_device: bool):
    """A device result brought back, after checking it is one when expected."""
    if isinstance(result, tuple):
        return tuple(to_host(r, expect_device) for r in result)
    on_device = hasattr(result, "copy_to_host") or hasattr(result, "get")
    if isinstance(result, (bool, np.generic)) or result is None:
        return result  # a scalar is a host value (assert_same checks its type)
    assert on_device == expect_device, (
        f"result is a {type(result).__name__}; expected a "
        f"{'device' if expect_device else 'host'} array")
    if hasattr(result, "copy_to_host"):
        return result.copy_to_host()
    if hasattr(result, "get") and not isinstance(result, np.ndarray):
        return host_value(result)
    return result


def host_value(result):
    """A result brought to the host as NumPy gives it: a CuPy array's or a
    PyTorch tensor's values, a 0-d one as a NumPy scalar (a CuPy or PyTorch
    input's reduction to one value is a 0-d array of its library); tuples part
    by part; anything else as it is."""
    if isinstance(result, tuple):
        return tuple(host_value(r) for r in result)
    if hasattr(result, "get") and not isinstance(result, np.ndarray):  # CuPy
        host = result.get()
    elif type(result).__module__.startswith("torch"):
        host = result.cpu().numpy()
    else:
        return result
    return host[()] if host.ndim == 0 else host


def result_and_out(lib, call):
    """``call()``, and the same call into an ``out=`` array of its result's shape
    and dtype: ``(result, whether the call returned out, out on the host)``."""
    result = call()
    out = lib.empty(np.shape(result), np.asarray(result).dtype)
    returned = call(out=out)
    return result, returned is out, lib.tohost(out)


def outcome(body, lib, *args, **kwargs):
    """``(result, None)`` or ``(None, exception)``."""
    try:
        return body(lib, *args, **kwargs), None
    except Exception as exc:  # compared below
        return None, exc


def tolerance(dtype) -> float:
    """The default relative tolerance of a float (or complex) result of ``dtype``."""
    return 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


def assert_same(got, want, tol: float | None = None):
    """``got`` (pyreduce's) matches ``want`` (the reference's): see the module
    docstring. ``tol``: relative tolerance of float and complex results (None: by
    dtype, :func:`tolerance`; 0: bit for bit, except the sign of zero)."""
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
    if want.dtype.kind not in "fc":
        assert np.array_equal(got, want), f"got {got!r}, expected {want!r}"
        return
    if tol == 0:
        np.testing.assert_array_equal(got, want)
        return
    tol = tolerance(want.dtype) if tol is None else tol
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


def check(body, backend: str, on_device: bool = False, *args, tol=None, options=None,
          **kwargs):
    """Run ``body`` with NumPy and with pyreduce on ``backend`` and compare.
    ``options``: keywords pyreduce's calls get besides the body's (a tuning)."""
    want, want_exc = outcome(body, NumPyLib(), *args, **kwargs)
    got, got_exc = outcome(body, PyreduceLib(backend, on_device, options), *args, **kwargs)
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


def check_refused(body, backend: str, on_device: bool = False, *args, error=TypeError,
                  options=None, **kwargs):
    """Run ``body`` with pyreduce on ``backend`` and check that it raises
    ``error``: a refusal pyreduce documents where NumPy has an answer."""
    got, got_exc = outcome(body, PyreduceLib(backend, on_device, options), *args, **kwargs)
    assert isinstance(got_exc, error), f"expected {error.__name__}, got {got_exc or got!r}"
    return got_exc


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
