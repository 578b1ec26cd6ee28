"""The last step of a structured reduction: tuple accumulators made into the
values a user sees, in NumPy's dtypes.

Each finisher is written once, as a scalar function of one accumulator (a
tuple of its fields) and ``ddof``, returning the result (minmax: the two
results) and then a flag: True where the lane is one NumPy warns about or
refuses (no elements, no degrees of freedom left). It is plain Python that
Numba compiles, and it serves every place a structured reduction finishes:

* one accumulator (a reduction to one value; ``Monoid.finalize``):
  :meth:`Finisher.scalar`, the function run as Python;
* a record array on the host (``axis=`` on the cpu backend, masked arrays,
  ``where=``, host results of host inputs): :meth:`Finisher.array`, the
  function in the ``njit`` loop of :mod:`pyreduce.finishing` (kept in the disk
  cache; a few lanes are finished by the function run as Python, which costs
  less than compiling it);
* the accumulators on a GPU, whose results go to a device array: the same loop
  as a kernel (:meth:`pyreduce.backends.base.GeneratedBackend.finish`),
  writing straight into the result; only the flag comes back, and only where
  it depends on the data (:attr:`Finisher.counted`).

Warnings are NumPy's, each given once per call however many results it
concerns, as NumPy's reductions along an axis give them (:meth:`Finisher.report`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import Callable

import numpy as np

from . import diskcache, njitcache
from .backends import _caller_level
from .backends.opcheck import host_njit
from .cache import KERNELS
from .codegen import compile_module
from .dtypes import fields
from .finishing import finish_source
from .opkey import function_key

__all__ = ["Finisher", "index", "checked_index", "pair", "difference", "mean", "variance",
           "PYTHON_LANES"]

_INF = math.inf
_NAN = math.nan

#: Record arrays of at most this many lanes are finished by the scalar function
#: run as Python (microseconds a lane) rather than compiled for them (a fraction
#: of a second, once per finisher and dtypes).
PYTHON_LANES = 64


# --- the scalar finishers: device code, plain Python that Numba compiles (no
# helpers: a compiled function cannot call plain Python), and that runs as it is
# on NumPy scalars in the simulator and for one value. They never divide by zero.

def _index(acc, ddof):
    """argmax/argmin: the last field, the index."""
    return acc[-1], False


def _checked_index(acc, ddof):
    """nanargmax/nanargmin: the index; flagged (NumPy's ValueError) where no
    element was a number (the count, second to last, is 0)."""
    return acc[-1], acc[-2] == 0


def _pair(acc, ddof):
    """minmax: ``(min, max)``."""
    return acc[0], acc[1], False


def _complex_pair(acc, ddof):
    """minmax of complex input, from ``(min.real, min.imag, max.real, max.imag)``."""
    return complex(acc[0], acc[1]), complex(acc[2], acc[3]), False


def _difference(acc, ddof):
    """ptp: ``max - min`` (integers wrap when stored in their dtype, as NumPy's)."""
    return acc[1] - acc[0], False


def _complex_difference(acc, ddof):
    return complex(acc[2], acc[3]) - complex(acc[0], acc[1]), False


def _mean(acc, ddof):
    """mean/nanmean of ``(count, sum)``: NaN, flagged, for no elements."""
    if acc[0] > 0:
        return acc[1] / acc[0], False
    return _NAN, True


def _mean_as_complex(acc, ddof):
    """mean of real input with a complex ``dtype=``: NumPy divides a complex sum
    by the count, which makes the imaginary part NaN where the real part is
    infinite or NaN."""
    if acc[0] > 0:
        re = acc[1] / acc[0]
        return complex(re, 0.0 if abs(re) < _INF else _NAN), False
    return complex(_NAN, _NAN), True


def _complex_mean(acc, ddof):
    """mean of ``(count, sum.real, sum.imag)``: a part that is infinite or NaN
    makes the other NaN, as NumPy's division of the sum by the count does."""
    if acc[0] > 0:
        re, im = acc[1] / acc[0], acc[2] / acc[0]
        if not (abs(re) < _INF and abs(im) < _INF):
            re, im = re + im * 0.0, im - re * 0.0
        return complex(re, im), False
    return complex(_NAN, _NAN), True


def _variance(nan_rule: bool, root: bool, complex_parts: bool, as_complex: bool = False):
    """var/std (nanvar/nanstd with ``nan_rule``) of ``(count, shift, s, q)``
    (or ``(count, shift.real, shift.imag, s.real, s.imag, q)`` with
    ``complex_parts``; :func:`pyreduce.structured._moments_op`): ``m2 / (count -
    ddof)``, ``m2 = q - |s|**2 / count`` the sum of squared deviations from the
    mean (never below 0: rounding can leave it a little under). No degrees of
    freedom left is flagged and gives inf (NaN where ``m2`` is 0) as ``np.var``
    divides, or NaN under ``nan_rule`` as ``np.nanvar`` gives; ``root``: the
    square root (std); ``as_complex``: a real result made complex as NumPy
    makes it for a complex ``dtype=`` (the imaginary part NaN where the real
    part is infinite or NaN, else 0, and 0 for nanvar's NaN of no degrees of
    freedom, which NumPy sets into the complex result)."""

    def finish(acc, ddof):
        n = acc[0]
        m2 = acc[-1]
        if n > 0:
            # s * (s / n), not s * s / n: the square of a sum that is near the
            # largest float would overflow
            if complex_parts:
                m2 = m2 - (acc[3] * (acc[3] / n) + acc[4] * (acc[4] / n))
            else:
                m2 = m2 - acc[2] * (acc[2] / n)
            if m2 < 0.0:
                m2 = 0.0
        dof = n - ddof
        if dof > 0:
            var = m2 / dof
            flagged = False
        elif dof != dof:  # a NaN ddof: NaN, as NumPy's division gives, and no warning
            var = _NAN
            flagged = False
        else:
            var = _NAN if nan_rule or not m2 > 0 else _INF
            flagged = True
        if root:
            var = math.sqrt(var) if not var < 0.0 else _NAN
        if as_complex:  # np.nanvar sets NaN into a complex result: NaN+0j
            real_nan = nan_rule and not root and flagged
            return complex(var, 0.0 if abs(var) < _INF or real_nan else _NAN), flagged
        return var, flagged

    return finish


# --- the finishers


@dataclasses.dataclass(frozen=True, eq=False)
class Finisher:
    """A scalar finisher ``fn(acc, ddof) -> (*results, flag)`` with what it
    makes: ``outputs`` results per lane, each of ``dtype``; ``ddof`` passed to
    it; ``message``, what a flagged lane means (NumPy's RuntimeWarning, or its
    ValueError with ``error``); ``counted``, whether a lane's flag depends on
    the data (its count of elements: the NaN-ignoring statistics), else it
    depends only on the lane's number of elements (:meth:`flagged_at`)."""

    name: str
    fn: Callable
    dtype: np.dtype
    outputs: int = 1
    ddof: float = 0.0
    message: str | None = None
    error: bool = False
    counted: bool = False

    @property
    def read_alone(self) -> bool:
        """Whether a finished value can be read back from a GPU alone: one result,
        whose flag does not depend on the data (else the flag comes back too, a
        second read: the NaN-ignoring statistics). minmax's pair, and those, are
        finished on the host where their value goes there."""
        return self.outputs == 1 and not self.counted

    @functools.cached_property  # read on every call: walking the bytecode once is enough
    def key(self):
        """What the compiled function depends on (``ddof`` is an argument)."""
        return (function_key(self.fn), self.outputs, self.dtype.str)

    def stores(self, dtype: np.dtype) -> bool:
        """Whether the finishing kernel stores a result of ``dtype`` (a
        ``dtype=``) as NumPy casts the finished values to it: its own dtype, or
        a float or complex one. Casts to integers and bools (NaN and overflow
        differ between NumPy and a GPU) and of complex values to real ones
        are left to the host."""
        return dtype == self.dtype or (
            dtype.kind in "fc" and not (self.dtype.kind == "c" and dtype.kind == "f"))

    def to(self, dtype) -> "Finisher":
        """This finisher making ``dtype`` (a ``dtype=``; None: its own) where it
        can (:func:`retarget`), so that the values are rounded once, to the
        dtype the user asked for, and not to the default dtype first."""
        return self if dtype is None else retarget(self, np.dtype(dtype))

    def report(self, flagged) -> None:
        """NumPy's warning, once, or its ValueError, where a lane was flagged."""
        if not flagged or self.message is None:
            return
        if self.error:
            raise ValueError(self.message)
        warnings.warn(self.message, RuntimeWarning, stacklevel=_caller_level())

    def python(self, acc, ddof):
        """``fn`` run as Python (in the simulator's kernels too), without the
        warnings of NumPy scalars' arithmetic (an integer wrapping, ``inf * 0``),
        which compiled code does not give."""
        with np.errstate(all="ignore"):
            return self.fn(acc, ddof)

    def _run(self, acc):
        return self.python(acc, self.ddof)

    def scalar(self, acc):
        """One accumulator (a tuple, or a record) finished: a NumPy scalar of
        ``dtype`` (a pair of them for two results), with the warning or error."""
        *values, flagged = self._run(tuple(acc))
        self.report(flagged)
        cast = tuple(self.dtype.type(v) for v in values)
        return cast if self.outputs > 1 else cast[0]

    def flagged_at(self, count: int, acc_dtype: np.dtype) -> bool:
        """Whether a lane of ``count`` elements, every one of them counted, is
        flagged: the function on an accumulator of ``acc_dtype`` whose first
        field (the count, in the finishers that flag) is ``count`` and the others
        0. For finishers whose flag does not depend on the data (not
        :attr:`counted`), so that no flag need come back from a GPU."""
        probe = (count,) + (0,) * (len(fields(acc_dtype)) - 1)
        return bool(self._run(probe)[-1])

    def array(self, acc: np.ndarray):
        """A record array of accumulators finished: an array of ``dtype`` of its
        shape (a pair of them for two results), with the warning (once) or the error."""
        acc = np.ascontiguousarray(acc)
        flat = acc.reshape(-1)
        outs = tuple(np.empty(flat.size, self.dtype) for _ in range(self.outputs))
        flags = np.zeros(1, np.int32)
        if flat.size > PYTHON_LANES:
            self.host_loop(acc.dtype)(flat, *outs, flags, float(self.ddof))
        else:
            res_t = self.dtype.type
            for i, record in enumerate(flat):
                *values, flagged = self._run(tuple(record))
                for out, value in zip(outs, values):
                    out[i] = res_t(value)
                flags[0] |= bool(flagged)
        self.report(flags[0])
        parts = tuple(out.reshape(acc.shape) for out in outs)
        return parts if self.outputs > 1 else parts[0]

    def host_loop(self, acc_dtype: np.dtype):
        """The compiled loop (:func:`pyreduce.finishing.finish_source`) for
        records of ``acc_dtype``, built once per process, kept in the disk cache."""

        def build():
            name, source = finish_source(len(fields(acc_dtype)), self.outputs, True)
            namespace = {"njit": host_njit, "finish": host_njit(self.fn),
                         "res_t": self.dtype.type}
            compile_module(source, f"<pyreduce finisher {self.name}>", namespace)
            try:
                key = (source, diskcache.op_key(self.key))
            except diskcache.Unkeyable:
                key = None
            return njitcache.attach(namespace[name], key,
                                    f"the finisher of {self.name} ({self.dtype})")

        return KERNELS.get(("cpu", "finisher", self.key, str(acc_dtype.descr)), build)


@functools.lru_cache(maxsize=128)  # finishers live as long as their cached monoids
def retarget(fin: Finisher, dtype: np.dtype) -> Finisher:
    """``fin`` making results of ``dtype`` (a ``dtype=``) where it computes them
    in a wider type and the finishing kernel can store ``dtype``: a float32 or
    float64 result, a complex64 or complex128 one (from a real result made
    complex as NumPy's arithmetic makes it: :func:`_mean_as_complex`, the
    variance's ``as_complex``); a complex result made real as a complex result
    of ``dtype``'s width, whose real part the host's cast takes (with NumPy's
    ComplexWarning). Otherwise (integers, bools, half precision) ``fin``
    itself, its results cast to ``dtype`` on the host as NumPy casts them."""
    if dtype == fin.dtype or dtype.kind not in "fc" or dtype.itemsize < 4 or fin.outputs != 1:
        return fin
    if fin.dtype.kind == "c" and dtype.kind == "f":
        # the complex result as wide as dtype, its real part taken by the host's cast
        wide = np.result_type(dtype, np.complex64)
        return fin if wide == fin.dtype else dataclasses.replace(fin, dtype=wide)
    fn = fin.fn
    if dtype.kind == "c" and fin.dtype.kind != "c":
        fn = _AS_COMPLEX.get(fn)
        if fn is None:
            return fin
    return dataclasses.replace(fin, fn=fn, dtype=dtype)


def index() -> Finisher:
    """argmax/argmin: the index, as NumPy's ``intp``."""
    return Finisher("index", _index, np.dtype(np.intp))


def checked_index() -> Finisher:
    """nanargmax/nanargmin: the index, or NumPy's ValueError where a result has
    no element that is a number."""
    return Finisher("checked index", _checked_index, np.dtype(np.intp),
                    message="All-NaN slice encountered", error=True, counted=True)


def pair(dtype) -> Finisher:
    """minmax: ``(min, max)``, of ``dtype`` (complex: from the real and
    imaginary fields)."""
    dtype = np.dtype(dtype)
    fn = _complex_pair if dtype.kind == "c" else _pair
    return Finisher("minmax", fn, dtype, outputs=2)


def difference(dtype) -> Finisher:
    """ptp: ``max - min`` in ``dtype`` (integers wrap, NaN propagates)."""
    dtype = np.dtype(dtype)
    fn = _complex_difference if dtype.kind == "c" else _difference
    return Finisher("ptp", fn, dtype)


def mean(dtype, counted: bool = False) -> Finisher:
    """mean/nanmean (``counted``: NaN skipped, so a lane may count none) from
    ``(count, sum)`` or ``(count, sum.real, sum.imag)``: the sum over the
    count, NaN where the count is 0 (NumPy's "Mean of empty slice")."""
    dtype = np.dtype(dtype)
    fn = _complex_mean if dtype.kind == "c" else _mean
    return Finisher("mean", fn, dtype, message="Mean of empty slice", counted=counted)


def variance(dtype, ddof, nan_rule: bool = False, root: bool = False,
             counted: bool = False, complex_parts: bool = False) -> Finisher:
    """var/std (nanvar/nanstd with ``nan_rule``; ``counted``: NaN skipped;
    ``complex_parts``: a complex input's summary): ``m2 / (count - ddof)`` (see
    :func:`_variance`), with NumPy's "Degrees of freedom <= 0 for slice";
    ``root``: std."""
    return Finisher("std" if root else "var", _VARIANCE[nan_rule, root, complex_parts],
                    np.dtype(dtype),
                    ddof=float(ddof), message="Degrees of freedom <= 0 for slice",
                    counted=counted)


#: one function per rule, made once: kernels are cached by the function's key
_VARIANCE = {(n, r, c): _variance(n, r, c) for n in (False, True) for r in (False, True)
             for c in (False, True)}
#: the real finishers whose results a complex ``dtype=`` makes complex as
#: NumPy's complex arithmetic does (:func:`retarget`)
_AS_COMPLEX = {_mean: _mean_as_complex} | {
    _VARIANCE[n, r, c]: _variance(n, r, c, as_complex=True)
    for n in (False, True) for r in (False, True) for c in (False, True)}
