"""Inputs for the adversarial suite (``tests/test_adversarial_*.py``), and the
table of defects that are known and being fixed elsewhere.

An input is drawn as an :class:`Input`: a dtype (every one pyreduce loads), a
layout (C, Fortran, strided slices, negative strides, transposed, broadcast,
byte-swapped), a shape (sizes around block and tile edges, 0-d, empty) and a seed;
the values come from NumPy's generator, not from Hypothesis, so that arrays of
thousands of elements cost nothing to draw. The layout is applied where the
library keeps the array (``lib.asarray``), so a device run slices the device
array itself.

Values are chosen so that a correct result is exact whatever order the
elements are combined in, where the operator allows it: float sums use
multiples of 1/8 (exact in float32 and in bfloat16), products use powers of two,
and NaN, infinities and -0.0 are sprinkled in (NaN and opposite infinities give
NaN in any order). Integers span the whole range, extremes included: their sums
and products wrap, as NumPy's do, in any order. The orderings (``max``,
``argmax``, ...) also see the largest, smallest, tiniest and subnormal floats.
"""

from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np
from hypothesis import event
from hypothesis import strategies as st

import pyreduce

from numpy_compare import check, check_refused, device_keeps_byte_order
from oracles import P

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

#: every dtype pyreduce loads
DTYPES = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64,
    np.complex128))

LAYOUTS = ("C", "F", "strided", "reversed", "transposed", "broadcast", "byteswapped")


def edge_sizes(top: int) -> list:
    """0 and ``2**i - 1``, ``2**i``, ``2**i + 1`` for ``i <= top``."""
    return sorted({0} | {2 ** i + d for i in range(top + 1) for d in (-1, 0, 1)})


#: 1-D sizes: up to 4097 elements on the cpu backend, 513 in the simulator (one
#: Python thread per CUDA thread), 65537 on a GPU (the references of user ops
#: are Python loops)
SIZES = {"cpu": edge_sizes(12), "sim": edge_sizes(9), "cuda": edge_sizes(16)}
#: extents of the axes of N-D arrays (at most a few thousand elements in all)
EXTENTS = {"cpu": (0, 1, 2, 3, 7, 16, 33, 65), "sim": (0, 1, 2, 3, 5, 8, 17, 33),
           "cuda": (0, 1, 2, 3, 31, 32, 33, 257)}
#: at most this many elements in an N-D array
MAX_ELEMENTS = {"cpu": 6000, "sim": 700, "cuda": 1 << 16}


@dataclasses.dataclass(frozen=True)
class Input:
    """An array to reduce, as drawn. ``profile``: ``"sum"`` (values whose sums
    are exact), ``"prod"`` (whose products are exact), ``"order"`` (extremes
    too, for the orderings), ``"small"`` (as ``"sum"``, with integers within
    +-128: for means and variances), ``"sparse"`` (mostly zeros, for the
    selections), ``"noisy"`` (floats of many magnitudes, whose sums round) or
    ``"affine"`` (int64 affine maps, :func:`oracles.affine`)."""

    dtype: np.dtype
    shape: tuple
    layout: str
    seed: int
    special: float  # the fraction of NaN, infinities and -0.0 among floats
    profile: str = "sum"

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def base(self) -> np.ndarray:
        """The host array that :meth:`view` makes the input of (a broadcast
        input is already broadcast: it is uploaded as one)."""
        rng = np.random.default_rng(self.seed)
        shape = self.shape
        if self.layout == "strided":
            shape = tuple(2 * n + 1 for n in shape)
        elif self.layout == "transposed":
            shape = shape[::-1]
        elif self.layout == "broadcast" and shape:
            shape = (1,) + shape[1:]
        a = values(self.dtype, shape, rng, self.special, self.profile)
        if self.layout == "F":
            return np.asfortranarray(a)
        if self.layout == "broadcast":
            return np.broadcast_to(a, self.shape)
        if self.layout == "byteswapped" and swappable(a.dtype):
            return a.astype(a.dtype.newbyteorder(">"))
        return a

    def view(self, a):
        """The input, from :meth:`base` as the library keeps it."""
        if self.layout == "strided":
            return a[(slice(1, None, 2),) * len(self.shape)]
        if self.layout == "reversed":
            return a[(slice(None, None, -1),) * len(self.shape)]
        if self.layout == "transposed":
            return a.T
        return a

    def array(self, lib):
        """The input as ``lib`` (:mod:`numpy_compare`) keeps it."""
        return self.view(lib.asarray(self.base()))


def swappable(dtype: np.dtype) -> bool:
    """Whether ``dtype`` has a byte order (bfloat16's has none in ml_dtypes)."""
    return dtype.itemsize > 1 and dtype.kind != "V"


def values(dtype: np.dtype, shape, rng, special: float, profile: str) -> np.ndarray:
    """Random values of ``dtype`` for ``profile`` (see :class:`Input`)."""
    n = math.prod(shape)
    if profile == "affine":  # affine maps of the integers mod P (oracles.affine)
        return (rng.integers(1, P, n) * P + rng.integers(0, P, n)).reshape(shape)
    if dtype.kind == "b":
        flat = rng.random(n) < (0.1 if profile == "sparse" else 0.5)
    elif dtype.kind in "iu":
        flat = _integers(dtype, n, rng, profile)
    elif dtype.kind == "c":
        part = np.float32 if dtype == np.complex64 else np.float64
        if profile == "prod":  # units and 1 +- i: every product is exact
            flat = rng.choice(np.array([1, -1, 1j, -1j, 1 + 1j, (1 - 1j) / 2]), n,
                              p=[0.3, 0.3, 0.15, 0.15, 0.05, 0.05])
        else:
            flat = (_floats(np.dtype(part), n, rng, special, profile)
                    + 1j * _floats(np.dtype(part), n, rng, special, profile))
    else:
        flat = _floats(dtype, n, rng, special, profile)
    return np.asarray(flat).astype(dtype).reshape(shape)


def _integers(dtype, n, rng, profile):
    info = np.iinfo(dtype)
    if profile == "sparse":
        return rng.integers(1, 100, n) * (rng.random(n) < 0.2)
    if profile == "small":
        return rng.integers(max(info.min, -128), min(info.max, 128), n, endpoint=True)
    flat = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    extremes = np.array([info.min, info.max, info.max - 1, 0, 1, info.min + 1], dtype=dtype)
    pick = rng.random(n) < 0.1
    flat[pick] = rng.choice(extremes, int(pick.sum()))
    return flat


def _floats(dtype, n, rng, special, profile):
    if profile == "sparse":
        flat = rng.integers(1, 100, n) * (rng.random(n) < 0.2) / 8.0
    elif profile == "prod":  # +-1 mostly: no partial product overflows
        flat = rng.choice(np.array([1.0, -1.0, 2.0, 0.5, -2.0, -0.5]), n,
                          p=[0.45, 0.45, 0.025, 0.025, 0.025, 0.025])
    elif profile == "noisy":  # every sum rounds, and the order shows in the bits
        flat = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    else:
        flat = rng.integers(-128, 129, n) / 8.0
    if profile == "order":
        info = ml_dtypes.finfo(dtype)  # NumPy's finfo, and bfloat16's
        big, tiny = float(info.max), float(info.tiny)
        extremes = np.array([big, -big, tiny, -tiny, tiny / 4, -0.0, 0.0])
        pick = rng.random(n) < 0.1
        flat[pick] = rng.choice(extremes, int(pick.sum()))
    if special:
        pick = rng.random(n) < special
        flat[pick] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0]), int(pick.sum()))
    return flat


@st.composite
def inputs(draw, backend: str, dtypes=DTYPES, layouts=LAYOUTS, ndims=(0, 1, 2, 3),
           profile: str = "sum", specials=(0.0, 0.02, 0.3)) -> Input:
    """An :class:`Input` for ``backend``: compile-time choices (dtype, layout,
    number of axes) drawn from short lists, so kernels are reused."""
    dtype = draw(st.sampled_from(dtypes))
    ndim = draw(st.sampled_from(ndims))
    layout = draw(st.sampled_from(layouts)) if ndim else "C"
    if ndim == 1:
        shape = (draw(st.sampled_from(SIZES[backend])),)
    else:
        extents = st.sampled_from(EXTENTS[backend])
        shape = tuple(draw(st.lists(extents, min_size=ndim, max_size=ndim).filter(
            lambda s: math.prod(s) <= MAX_ELEMENTS[backend])))
    special = draw(st.sampled_from(specials)) if dtype.kind in "fcV" else 0.0
    return Input(dtype, shape, layout, draw(st.integers(0, 2 ** 32 - 1)), special, profile)


@st.composite
def tunings(draw, backend: str) -> dict:
    """Keywords with a kernel tuning for the simulator (small blocks and grids, so
    that small inputs span several blocks and passes, and 64-lane warps); none
    for the other backends, which take their planners' choices."""
    if backend != "sim" or draw(st.booleans()):
        return {}
    warp = draw(st.sampled_from([32, 64]))
    return {"tuning": pyreduce.Tuning(
        warp_size=warp, block_size=draw(st.sampled_from([warp, 2 * warp])),
        items_per_thread=draw(st.sampled_from([1, 2, 4])),
        max_blocks=draw(st.sampled_from([1, 2, 3, 5])))}


@st.composite
def axes(draw, ndim: int):
    """``axis=`` for ``ndim`` axes: None, an int or a tuple, negative ones among them."""
    if ndim == 0 or draw(st.booleans()) and draw(st.booleans()):
        return None
    spell = lambda a: a - ndim if draw(st.booleans()) else a  # noqa: E731
    if draw(st.booleans()):
        return spell(draw(st.integers(0, ndim - 1)))
    chosen = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return tuple(spell(a) for a in chosen)


# --------------------------------------------------------------------------
# Known defects: issue 18 lists them and other changes fix them. A case that
# matches one is left out of the property tests; ``test_adversarial_known.py``
# shows each still fails (strict xfail), so that fixing one makes its entry
# here obsolete, to be removed, and the property tests then cover it. (What
# this suite found in modules edited elsewhere is shown there too.)


@dataclasses.dataclass(frozen=True)
class Case:
    """What a property test is about to compare."""

    what: str  # a named reduction, or "reduce", "segmented"
    dtype: np.dtype  # the input's
    backend: str
    device: bool = False  # a device input
    layout: str = "C"
    op: object = None  # reduce's op
    axis: bool = False  # reduces some axes, not all (:func:`some_axes`)
    kwargs: dict = dataclasses.field(default_factory=dict)
    size: int = 1


#: where a reproduction runs: backend and placement of the input
EVERYWHERE = (("cpu", "host"), ("sim", "host"), ("sim", "device"))


@dataclasses.dataclass(frozen=True)
class Known:
    """A defect: ``applies`` says which drawn cases meet it; ``example`` is a
    :mod:`numpy_compare` body that shows it wherever ``where`` says."""

    reason: str
    applies: object  # Case -> bool
    example: object  # body(lib)
    where: tuple = EVERYWHERE


def _user(case: Case) -> bool:
    return case.what in ("reduce", "segmented") and not isinstance(case.op, str) and \
        getattr(case.op, "__module__", None) not in ("builtins", "_operator", "numpy")


def _complex(lib):
    return lib.asarray(np.array([1 + 2j, 3 + 4j, 5 - 1j]))


KNOWN: tuple = ()  # every defect of issue 18 this suite met is fixed


def known(case: Case) -> str | None:
    """The reason of the known defect ``case`` meets, or None."""
    for k in KNOWN:
        if k.applies(case):
            return k.reason
    return None


def some_axes(axis, ndim: int) -> bool:
    """Whether ``axis=`` reduces some of ``ndim`` axes but not all."""
    return axis is not None and (np.ndim(axis) == 0 or len(axis) < ndim)


def left_out(case: Case) -> bool:
    """Whether ``case`` meets a known defect, and is left out (a Hypothesis
    event says why)."""
    reason = known(case)
    if reason is not None:
        event(f"left out: {reason}")
    return reason is not None


def compare(case: Case, body, *args, inexact: bool = False, options=None) -> None:
    """``body`` (:mod:`numpy_compare`) run with NumPy and with pyreduce for
    ``case``, and compared: bit for bit unless ``inexact`` (or integers are
    accumulated in floats). A device array in non-native byte order, which has
    no host copy to convert, must be refused (TypeError); a case that meets a
    known defect is left out."""
    if left_out(case):
        return
    if (case.device and case.layout == "byteswapped" and swappable(case.dtype)
            and device_keeps_byte_order()):
        check_refused(body, case.backend, True, *args, options=options)
        return
    acc = np.dtype(case.kwargs.get("dtype") or case.dtype)
    widened = case.dtype.kind in "biu" and acc.kind in "fc"
    check(body, case.backend, case.device, *args, tol=None if inexact or widened else 0,
          options=options)
