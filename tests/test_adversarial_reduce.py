"""``reduce`` and ``segmented_reduce`` against NumPy and ``functools.reduce``
(:mod:`numpy_compare`) on drawn inputs (:mod:`adversarial`): every built-in op in
its spellings, and user ops, non-commutative ones among them, whose reference
is ``functools.reduce`` over the C-order flattening (or each row of the reduced
axes, or each segment); with ``axis=``, ``keepdims=``, ``initial=``,
``identity=``, ``dtype=`` and ``out=``; on each backend with host and (GPU
backends) device inputs. Known defects (``adversarial.KNOWN``) are left out
here and shown in ``test_adversarial_known.py``."""

from __future__ import annotations

import functools
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import adversarial as adv
import pyreduce
from conftest import examples
from numpy_compare import result_and_out, to_device
from oracles import affine, affine_data, first_nonzero, last_nonzero

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def right(a, b):
    return b


def left(a, b):
    return a


def plus(a, b):
    return a + b


def times(a, b):
    return a * b


#: built-in ops in several spellings -> the values they are compared on
BUILTINS = {
    "add": "sum", operator.add: "sum", np.add: "sum",
    "mul": "prod", np.multiply: "prod",
    "max": "order", max: "order", np.maximum: "order", "min": "order", np.minimum: "order",
    "nanmax": "order", np.fmax: "order", "nanmin": "order", np.fmin: "order",
    "and": "sum", operator.and_: "sum", "or": "sum", np.bitwise_or: "sum",
    "xor": "sum", operator.xor: "sum",
    "logical_and": "sparse", np.logical_and: "sparse", "logical_or": "sparse",
    np.logical_or: "sparse",
}
#: user ops -> the values they are compared on (associative there, results
#: exact in any order); the first four are not commutative
USER = {last_nonzero: "sparse", first_nonzero: "sparse", right: "sum", left: "sum",
        plus: "sum", times: "prod"}


def _accumulators(op, dt: np.dtype) -> list:
    """``dtype=`` values: the input's, or a wider one of the same kind (a float
    one for integers, except for products, which could overflow there in an
    order-dependent way)."""
    if dt.kind == "b":
        return [np.dtype(np.int64)]
    if dt.kind in "iu":
        return [np.dtype(np.int64)] + ([] if BUILTINS.get(op, USER.get(op)) == "prod"
                                       else [np.dtype(np.float64)])
    if dt.kind == "c":
        return [np.dtype(np.complex128)]
    return [np.dtype(np.float64)]


def _value(draw, dt: np.dtype):
    """An ``initial``/``identity`` the accumulator holds exactly."""
    if dt.kind == "b":
        return draw(st.booleans())
    return draw(st.sampled_from([0, 1, 2] if dt.kind == "u" else [0, 1, -2]))


@st.composite
def _reduce_case(draw, backend, ops, ndims=(0, 1, 1, 2, 3)):
    op = draw(st.sampled_from(ops))
    profile = BUILTINS.get(op, USER.get(op))
    x = draw(adv.inputs(backend, profile=profile, ndims=ndims))
    kw = {}
    if draw(st.booleans()):
        kw["dtype"] = draw(st.sampled_from(_accumulators(op, x.dtype)))
    acc = np.dtype(kw.get("dtype", np.float32 if x.dtype.kind == "V" else x.dtype))
    if op in (np.logical_and, np.logical_or, "logical_and", "logical_or"):
        acc = np.dtype(np.bool_)
    if draw(st.booleans()):
        kw["initial"] = _value(draw, acc)
    if op not in BUILTINS or draw(st.booleans()):
        kw["identity"] = _value(draw, acc)  # user ops: what an empty input gives
    kw["axis"] = draw(adv.axes(len(x.shape)))
    kw["keepdims"] = draw(st.booleans())
    return x, op, kw, draw(st.booleans()), draw(adv.tunings(backend))


def _body(lib, x: adv.Input, op, kw: dict, with_out: bool):
    kw = dict(kw)
    call = functools.partial(lib.reduce, x.array(lib), op, kw.pop("identity", None), **kw)
    return result_and_out(lib, call) if with_out else call()


def _compare(backend, placement, x, op, kw, with_out, tuning, what="reduce"):
    case = adv.Case(what, x.dtype, backend, placement == "device", x.layout, op=op,
                    axis=adv.some_axes(kw.get("axis"), len(x.shape)), kwargs=kw,
                    size=x.size)
    adv.compare(case, _body if what == "reduce" else _segments_body, x, op, kw, with_out,
                options=tuning)


@settings(max_examples=examples(40))
@given(data=st.data())
def test_reduce_with_builtin_ops(backend, placement, data):
    """Every built-in op, in several spellings, on every dtype: NumPy's ufunc
    reductions (TypeError where the op is not defined for the dtype)."""
    _compare(backend, placement, *data.draw(_reduce_case(backend, list(BUILTINS))))


def _user_ops(backend, placement, data):
    """User ops, non-commutative ones among them: ``functools.reduce`` in C order
    (integer results wrap as NumPy's scalars do)."""
    _compare(backend, placement, *data.draw(_reduce_case(backend, list(USER))))


@pytest.mark.parametrize("placement", ["host", "device"])
@settings(max_examples=examples(40))
@given(data=st.data())
def test_reduce_with_user_ops(gpu_backend, placement, data):
    _user_ops(gpu_backend, placement, data)


# each new op and dtype is a Numba compilation on the cpu backend (a second or so)
@settings(max_examples=examples(10))
@given(data=st.data())
def test_reduce_with_user_ops_on_cpu(data):
    _user_ops("cpu", "host", data)


test_reduce_with_user_ops.__doc__ = test_reduce_with_user_ops_on_cpu.__doc__ = \
    _user_ops.__doc__


@settings(max_examples=examples(15))
@given(data=st.data())
def test_affine_composition_keeps_order(backend, placement, data):
    """Affine maps composed (associative, not commutative, every element counts)
    over every layout and axis choice."""
    x, _, kw, with_out, tuning = data.draw(_reduce_case(backend, [affine], ndims=(1, 2, 3)))
    x = adv.Input(np.dtype(np.int64), x.shape, x.layout, x.seed, 0.0, "affine")
    kw.pop("dtype", None)
    if "initial" in kw:
        kw["initial"] = int(affine_data(1, seed=x.seed)[0])
    kw["identity"] = 1000003  # the identity map
    _compare(backend, placement, x, affine, kw, with_out, tuning)


# --------------------------------------------------------------------------
# segmented_reduce


def _segments_body(lib, x: adv.Input, op, kw: dict, with_out: bool):
    kw = dict(kw)
    offsets = np.sort(np.random.default_rng(x.seed).integers(0, x.size + 1, kw.pop("cuts")))
    call = functools.partial(lib.segmented_reduce, x.array(lib), offsets, op,
                             kw.pop("identity", None), **kw)
    return result_and_out(lib, call) if with_out else call()


@settings(max_examples=examples(25))
@given(data=st.data())
def test_segmented_reduce(backend, placement, data):
    """Segments of every length (empty ones too) with built-in and user ops."""
    x, op, kw, with_out, tuning = data.draw(_reduce_case(
        backend, ["add", "max", "nanmin", "and", last_nonzero, first_nonzero, plus],
        ndims=(1,)))
    del kw["axis"], kw["keepdims"]
    kw["cuts"] = data.draw(st.integers(1, 12))
    _compare(backend, placement, x, op, kw, with_out, tuning, what="segmented")


# --------------------------------------------------------------------------
# deterministic=True: the same bits everywhere


FLOATS = tuple(d for d in adv.DTYPES if d.kind in "fcV")
#: (warp, block, items, max_blocks): the fixed tree takes items in multiples of 4
PAIRWISE_TUNINGS = [(32, 32, 4, None), (32, 64, 8, 3), (64, 64, 4, 2), (64, 128, 4, 1)]


@pytest.mark.sim
@settings(max_examples=examples(15))
@given(x=adv.inputs("sim", dtypes=FLOATS, profile="noisy", specials=(0.0,)),
       t=st.sampled_from(PAIRWISE_TUNINGS))
def test_deterministic_sums_agree_bit_for_bit(x, t):
    """A float sum of every float dtype (half precision and complex too) and
    layout has the bits of ``pyreduce.reference`` on the cpu backend and in the
    simulator, for a host or a device input and any tuning."""
    if adv.left_out(adv.Case("sum", x.dtype, "cpu", layout=x.layout)):
        return
    host = x.view(x.base())
    want = pyreduce.reference(host, "add")
    tuning = {"tuning": pyreduce.Tuning(
        **dict(zip(("warp_size", "block_size", "items_per_thread", "max_blocks"), t)))}
    calls = [("cpu", host, {}), ("sim", host, tuning)]
    if not (x.layout == "byteswapped" and adv.swappable(x.dtype)):  # refused on a device
        calls.append(("sim", x.view(to_device(x.base())), tuning))
    for backend, arr, extra in calls:
        got = pyreduce.sum(arr, deterministic=True, backend=backend, **extra)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (backend, got, want)
