"""Every named reduction against NumPy (:mod:`numpy_compare`), on drawn inputs
(:mod:`adversarial`): every dtype and layout, sizes around block and tile edges,
NaN, infinities, -0.0 and integer extremes, with ``axis=``, ``keepdims=``,
``initial=``, ``dtype=`` and ``out=``, on each backend, with host and (GPU
backends) device inputs. Results, their types, dtypes and shapes, and the
exceptions raised must be NumPy's (with pyreduce's documented differences,
which :mod:`numpy_compare` applies). Known defects (``adversarial.KNOWN``) are
left out here and shown in ``test_adversarial_known.py``."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import adversarial as adv
from conftest import examples
from numpy_compare import NAMED, check, is_half, result_and_out

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

#: the data each reduction is compared on: values whose reductions are exact
PROFILE = {"prod": "prod", "nanprod": "prod", "mean": "small", "var": "small",
           "std": "small"} | {n: "order" for n in ("max", "min", "nanmax", "nanmin",
                                                   "argmax", "argmin", "minmax")}
#: the keywords each takes besides the input, and whether it reduces along axes
TAKES = {
    "sum": ("initial", "dtype", "out", "axis"), "prod": ("initial", "dtype", "out", "axis"),
    "nansum": ("initial", "dtype", "out"), "nanprod": ("initial", "dtype", "out"),
    "max": ("initial", "out", "axis"), "min": ("initial", "out", "axis"),
    "nanmax": ("initial", "out", "axis"), "nanmin": ("initial", "out", "axis"),
    "any": ("out", "axis"), "all": ("out", "axis"), "var": ("ddof",), "std": ("ddof",),
}
#: results compared within a tolerance (by dtype), as are integers accumulated
#: in floats; all others bit for bit
INEXACT = ("mean", "var", "std")


def _accumulators(name, dt: np.dtype) -> list:
    """``dtype=`` values NumPy also takes (same kind or wider, no half precision;
    no float product of integers, which overflows in an order-dependent way)."""
    if dt.kind in "biu":
        return [dt if dt.kind != "b" else np.dtype(np.int64), np.dtype(np.int64)] + (
            [] if name in ("prod", "nanprod") else [np.dtype(np.float64)])
    if dt.kind == "c":
        return [dt, np.dtype(np.complex128)]
    return [np.dtype(np.float32) if is_half(dt) else dt, np.dtype(np.float64),
            np.dtype(np.complex128)]


def _initial(draw, name, dt: np.dtype):
    """A value for ``initial=`` that the accumulator holds exactly."""
    if dt.kind == "b":
        return draw(st.booleans()) if name in ("max", "min", "nanmax", "nanmin") else 1
    low = 0 if dt.kind == "u" else -2
    value = draw(st.sampled_from([v for v in (0, 1, 2, -2, 3) if v >= low]))
    if dt.kind in "fcV" and draw(st.booleans()):
        return [0.5, -0.0, np.inf, np.nan][value % 4]
    return value


def _keywords(draw, name, x: adv.Input) -> dict:
    takes, kw = TAKES.get(name, ()), {}
    if "ddof" in takes:
        kw["ddof"] = draw(st.sampled_from([0, 1, 2]))
    if "initial" in takes and draw(st.booleans()):
        kw["initial"] = _initial(draw, name, x.dtype)
    if "dtype" in takes and draw(st.booleans()):
        kw["dtype"] = draw(st.sampled_from(_accumulators(name, x.dtype)))
    complex_product = name in ("prod", "nanprod") and "c" in (
        x.dtype.kind, np.dtype(kw.get("dtype", x.dtype)).kind)
    if complex_product and not np.isfinite(kw.get("initial", 0)):
        # a complex product with an infinity is inf or NaN by its association
        # ((inf+0j) * (1+1j) * (2-1j): inf+nanj left to right, inf+infj with the
        # elements' product first); the profile's products are exact, and so must
        # be initial's, for the comparison to be bit for bit
        kw["initial"] = 2
    if "axis" in takes:
        kw["axis"] = draw(adv.axes(len(x.shape)))
        if kw["axis"] is not None or draw(st.booleans()):
            kw["keepdims"] = draw(st.booleans())
    return kw


def _body(lib, x: adv.Input, name: str, kw: dict, with_out: bool):
    """The reduction, and with ``with_out`` the same into an ``out=`` array."""
    call = functools.partial(getattr(lib, name), x.array(lib), **kw)
    return result_and_out(lib, call) if with_out else call()


def _compare(backend, placement, x: adv.Input, name: str, kw: dict, with_out, tuning):
    case = adv.Case(name, x.dtype, backend, placement == "device", x.layout,
                    axis=adv.some_axes(kw.get("axis"), len(x.shape)), kwargs=kw,
                    size=x.size)
    adv.compare(case, _body, x, name, kw, with_out, inexact=name in INEXACT, options=tuning)


@st.composite
def _named_case(draw, backend, names, ndims):
    name = draw(st.sampled_from(names))
    x = draw(adv.inputs(backend, profile=PROFILE.get(name, "sum"), ndims=ndims))
    with_out = "out" in TAKES.get(name, ()) and draw(st.booleans())
    return x, name, _keywords(draw, name, x), with_out, draw(adv.tunings(backend))


@settings(max_examples=examples(40))
@given(data=st.data())
def test_named_reductions_to_one_value(backend, placement, data):
    """Each named reduction of a whole array (0-d and N-D included)."""
    x, name, kw, with_out, tuning = data.draw(_named_case(backend, NAMED, (0, 1, 1, 2)))
    kw.pop("axis", None), kw.pop("keepdims", None)
    _compare(backend, placement, x, name, kw, with_out, tuning)


@settings(max_examples=examples(40))
@given(data=st.data())
def test_named_reductions_along_axes(backend, placement, data):
    """The named reductions that take ``axis=``: int, tuple, negative, None,
    ``keepdims`` and ``out=`` of the result's shape."""
    names = [n for n in NAMED if "axis" in TAKES.get(n, ())]
    _compare(backend, placement, *data.draw(_named_case(backend, names, (1, 2, 3))))


def _bfloat16_body(lib):
    data = np.random.default_rng(4).integers(-64, 65, (3, 70)) / 8.0
    x = lib.asarray(data.astype(adv.BFLOAT16))
    return (lib.sum(x), lib.max(x[:, ::-2]), lib.argmax(x), lib.sum(x, axis=0),
            lib.reduce(x, "min", axis=1, keepdims=True), lib.minmax(x))


@pytest.mark.sim
def test_simulator_device_arrays_of_bfloat16():
    """Regression (sim): a simulator device array of ml_dtypes bfloat16 holds
    the values' bits, which the kernels loaded as values (``np.uint16(2.0)`` is
    2, read back as a denormal), giving garbage. They are now read as bits,
    like the host arrays."""
    check(_bfloat16_body, "sim", True, tol=None)
