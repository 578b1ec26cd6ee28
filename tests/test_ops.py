"""Semantics (``docs/semantics.md``) on every backend: result dtypes, NaN, integer
wrap-around, empty inputs, identities, ``initial``, ``device_result``, the
built-in operator spellings, and the kernel cache keyed by an operator's code."""

from __future__ import annotations

import functools
import math
import operator
import os
import warnings
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
import pyreduce.testing
from pyreduce import backends
from oracles import affine, affine_data, first_nonzero, last_nonzero

# example counts: PYREDUCE_EXAMPLES_SCALE times those below (see tests/conftest.py)
_PROFILE_SCALE = {"thorough": "10", "dev": "0.2"}.get(os.environ.get("HYPOTHESIS_PROFILE"), "1")
SCALE = float(os.environ.get("PYREDUCE_EXAMPLES_SCALE", _PROFILE_SCALE))


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float32, np.float64]
ALL = [np.bool_, *INTS, *FLOATS]

# keep the simulator's kernels few: every call below on sim uses this tuning
SIM = pyreduce.Tuning(block_size=64, items_per_thread=2, max_blocks=3)


def kw(backend, **extra):
    out = {"backend": backend, **extra}
    if backend == "sim":
        out["tuning"] = SIM
    return out


# --------------------------------------------------------------------------
# Result dtypes


@pytest.mark.parametrize("dt", ALL, ids=lambda t: np.dtype(t).name)
def test_result_dtypes_follow_numpy(backend, dt):
    dt = np.dtype(dt)
    x = (np.arange(1, 40) % 5 + (dt.kind != "b")).astype(dt)
    got = pyreduce.sum(x, **kw(backend))
    assert got.dtype == np.sum(x).dtype
    assert got == np.sum(x)
    got = pyreduce.prod(x[:9], **kw(backend))
    assert got.dtype == np.prod(x[:9]).dtype
    assert got == np.prod(x[:9])
    for fn, ref in ((pyreduce.max, np.max), (pyreduce.min, np.min)):
        got = fn(x, **kw(backend))
        assert got.dtype == dt and got == ref(x)
    # reduce() keeps the input's dtype for add, the logical ops accumulate in bool
    assert pyreduce.reduce(x, "add", **kw(backend)).dtype == dt
    assert pyreduce.reduce(x, np.logical_and, **kw(backend)).dtype == np.bool_
    assert pyreduce.reduce(x, np.logical_or, **kw(backend)).dtype == np.bool_
    assert pyreduce.reduce(x, last_nonzero, **kw(backend)).dtype == dt
    # dtype= decides, for named and plain reductions alike
    assert pyreduce.sum(x, **kw(backend, dtype=np.float64)).dtype == np.float64
    assert pyreduce.reduce(x, "max", **kw(backend, dtype=np.float32)).dtype == np.float32


def test_sum_widening_values(backend):
    x = np.array([200, 100, 255], dtype=np.uint8)
    assert pyreduce.sum(x, **kw(backend)) == np.uint64(555)
    assert pyreduce.reduce(x, "add", **kw(backend)) == np.uint8(555 % 256)
    x = np.array([True] * 300)
    assert pyreduce.sum(x, **kw(backend)) == 300
    assert pyreduce.reduce(x, "add", **kw(backend)) == np.True_
    x = np.full(7, -128, dtype=np.int8)
    assert pyreduce.sum(x, **kw(backend)) == -896
    assert pyreduce.prod(np.array([100, 100, 3], np.int8), **kw(backend)) == 30000


# --------------------------------------------------------------------------
# NaN


NAN_SPELLINGS = {
    "max": (lambda x, k: pyreduce.reduce(x, max, **k), True),
    "min": (lambda x, k: pyreduce.reduce(x, min, **k), False),
    "np.maximum": (lambda x, k: pyreduce.reduce(x, np.maximum, **k), True),
    "np.minimum": (lambda x, k: pyreduce.reduce(x, np.minimum, **k), False),
    "pyreduce.max": (lambda x, k: pyreduce.max(x, **k), True),
    "pyreduce.min": (lambda x, k: pyreduce.min(x, **k), False),
}


@pytest.mark.parametrize("dt", FLOATS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("spelling", list(NAN_SPELLINGS))
def test_nan_propagates_from_any_position(backend, dt, spelling):
    call, is_max = NAN_SPELLINGS[spelling]
    n = 300 if backend == "sim" else 4099
    base = np.linspace(-5, 5, n).astype(dt)
    base[n // 3] = np.inf
    base[n // 2] = -np.inf
    got = call(base, kw(backend))
    assert got.dtype == dt and got == (np.inf if is_max else -np.inf)
    # first and last element, warp/block/tile/grid edges, the middle
    for pos in sorted({0, 1, 31, 32, 63, 64, 127, 128, 129, 255, 256, 257,
                       n // 3, n // 2, n - 2, n - 1}):
        x = base.copy()
        x[pos] = np.nan
        got = call(x, kw(backend))
        assert got.dtype == dt and np.isnan(got), (pos, got)
        # the caller's array still holds its NaN and nothing else changed
        assert np.isnan(x[pos]) and np.array_equal(np.delete(x, pos), np.delete(base, pos))


def test_nan_in_arithmetic_and_user_ops(backend):
    x = np.array([1.0, np.nan, 3.0, 2.0])
    assert np.isnan(pyreduce.sum(x, **kw(backend)))
    assert np.isnan(pyreduce.prod(x, **kw(backend)))
    # a user max does what its code says, in order: no NaN propagation
    user_max = lambda a, b: a if a > b else b  # noqa: E731
    assert pyreduce.reduce(x, user_max, **kw(backend)) == functools.reduce(user_max, x) == 3.0
    y = np.array([np.nan, 1.0, 3.0])  # the NaN loses the first comparison
    assert pyreduce.reduce(y, user_max, **kw(backend)) == functools.reduce(user_max, y) == 3.0
    y = np.array([1.0, 3.0, np.nan])  # and wins the last
    got = pyreduce.reduce(y, user_max, **kw(backend))
    assert np.isnan(got) and np.isnan(functools.reduce(user_max, y))


def test_nan_only_and_signed_zeros(backend):
    assert np.isnan(pyreduce.max(np.full(70, np.nan), **kw(backend)))
    z = np.array([0.0, -0.0] * 40)
    assert pyreduce.max(z, **kw(backend)) == 0.0
    assert pyreduce.min(z, **kw(backend)) == 0.0
    # selection ops keep the exact element, sign of zero included
    got = pyreduce.reduce(np.array([-0.0, 1.0, -0.0]), lambda a, b: b, **kw(backend))
    assert got == 0.0 and np.signbit(got)


# NaN in every variant of the kernels. NAN_TUNING makes a tile of 128 elements (64
# threads, runs of 2), so NAN_N elements are two blocks and a finishing pass:
# position 128 opens the second block, an odd position is the second element of a
# thread's run.

NAN_TUNING = pyreduce.Tuning(block_size=64, items_per_thread=2, max_blocks=2)
NAN_N, NAN_BLOCK = 200, 128
NAN_AT = {"first": [0], "block edge": [NAN_BLOCK], "middle": [NAN_N // 2 + 1],
          "last": [NAN_N - 1], "everywhere": slice(None)}


def nan_masks(rng):
    """Where nanmax/nanmin find NaN: opening every thread run of the first warp,
    every warp tile and every block, at the last element and at random; everywhere
    but at the element opening the second block (whole blocks of NaN); everywhere."""
    runs = np.zeros(NAN_N, bool)
    runs[0:64:2] = runs[::64] = runs[::NAN_BLOCK] = runs[-1] = True
    runs |= rng.random(NAN_N) < 0.2
    all_but_one = np.ones(NAN_N, bool)
    all_but_one[NAN_BLOCK] = False
    return {"runs": runs, "all but one": all_but_one, "everywhere": np.ones(NAN_N, bool)}


def same_or_both_nan(got, want) -> bool:
    return got == want or (np.isnan(got) and np.isnan(want))


@pytest.mark.parametrize("variant", list(pyreduce.variants))
def test_nan_policy_in_every_variant(gpu_backend, variant):
    """max/min propagate NaN and nanmax/nanmin ignore it, like NumPy, whichever
    variant reduces and wherever the NaN sits. Which of the pair and which float
    dtype take each case alternates between variants, to keep the simulator's
    launches few."""
    tuning = NAN_TUNING.replace(variant=variant)
    multiple = pyreduce.variants[variant].items_multiple
    if tuning.items_per_thread % multiple:  # the same tile with fewer threads
        tuning = tuning.replace(items_per_thread=multiple, block_size=NAN_BLOCK // multiple)
    k = dict(backend=gpu_backend, tuning=tuning)
    i = list(pyreduce.variants).index(variant)
    rng = np.random.default_rng(zlib.crc32(variant.encode()))
    base = rng.standard_normal(NAN_N) * 100
    pairs = [(pyreduce.max, pyreduce.nanmax), (pyreduce.min, pyreduce.nanmin)]
    for j, (where, at) in enumerate(NAN_AT.items()):
        fn, dt = pairs[(i + j) % 2][0], FLOATS[(i + j // 2) % 2]
        x = base.astype(dt)
        x[at] = np.nan
        got = fn(x, **k)
        assert got.dtype == dt and np.isnan(got), (fn.__name__, dt, where, got)
    for j, (where, mask) in enumerate(nan_masks(rng).items()):
        fn, dt = pairs[(i + j) % 2][1], FLOATS[(i + j) % 2]
        x = np.where(mask, np.nan, base).astype(dt)
        got, want = fn(x, **k), getattr(np, fn.__name__)(x)
        assert got.dtype == dt and same_or_both_nan(got, want), (fn.__name__, dt, where, got)


@pytest.mark.parametrize("name", ["nanmax", "nanmin"])
def test_nan_ignored_like_numpy(backend, name):
    fn, ref = getattr(pyreduce, name), getattr(np, name)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    masks = nan_masks(rng)
    for dt, where in zip([*FLOATS, np.float64], masks):
        x = np.where(masks[where], np.nan, rng.standard_normal(NAN_N) * 1e3).astype(dt)
        if where == "runs":
            x[rng.integers(NAN_N)] = np.inf if name == "nanmax" else -np.inf
        before = x.copy()
        with warnings.catch_warnings():
            # documented: no RuntimeWarning for an all-NaN input, unlike NumPy
            warnings.simplefilter("error", RuntimeWarning)
            got = fn(x, **kw(backend))
        assert got.dtype == dt and same_or_both_nan(got, ref(x)), (dt, where, got)
        assert np.array_equal(x, before, equal_nan=True)
    # integers and bools: as max/min
    for dt in (np.int8, np.bool_):
        x = rng.integers(0, 100, 77).astype(dt)
        got = fn(x, **kw(backend))
        assert got.dtype == dt and got == ref(x)
    # empty input: ValueError like np.nanmax, unless an identity or initial is given
    with pytest.raises(ValueError, match="empty"):
        fn(np.zeros(0), **kw(backend))
    assert fn(np.zeros(0), **kw(backend, identity=-2.0)) == -2.0
    # initial is one more element: a NaN initial is ignored too
    x = np.array([np.nan, 1.0, np.nan, 2.0])
    assert fn(x, **kw(backend, initial=np.nan)) == ref(x)
    assert fn(np.full(3, np.nan), **kw(backend, initial=5.0)) == 5.0


def test_nanmax_identity_is_nan():
    """NaN, not -inf, is nanmax's identity on floats: op(e, v) == v for every v,
    NaN included."""
    from pyreduce.ops import as_monoid

    for name in ("nanmax", "nanmin"):
        m = as_monoid(name, np.float32)
        assert np.isnan(m.identity) and m.identity.dtype == np.float32
        for v in (np.float32(np.nan), np.float32(-np.inf), np.float32(2.5)):
            for got in (m.fn(m.identity, v), m.fn(v, m.identity)):
                assert got == v or (np.isnan(got) and np.isnan(v)), (name, v, got)
        assert as_monoid(name, np.int16).identity == (
            np.iinfo(np.int16).min if name == "nanmax" else np.iinfo(np.int16).max)


# --------------------------------------------------------------------------
# Integer overflow wraps like NumPy's fixed-width integers


@pytest.mark.parametrize("dt", INTS, ids=lambda t: np.dtype(t).name)
def test_integer_overflow_wraps(backend, dt):
    dt = np.dtype(dt)
    info = np.iinfo(dt)
    n = 200 if backend == "sim" else 3001
    x = np.full(n, info.max, dtype=dt)
    bits = 8 * dt.itemsize
    want_add = (n * int(info.max)) % (1 << bits)
    if dt.kind == "i" and want_add >= 1 << (bits - 1):
        want_add -= 1 << bits
    got = pyreduce.reduce(x, "add", **kw(backend))
    assert got.dtype == dt and int(got) == want_add
    got = pyreduce.reduce(x, lambda a, b: a + b, **kw(backend))
    assert got.dtype == dt and int(got) == want_add
    # products: (max)**n mod 2**bits
    want_mul = pow(int(info.max), n, 1 << bits)
    if dt.kind == "i" and want_mul >= 1 << (bits - 1):
        want_mul -= 1 << bits
    got = pyreduce.reduce(x, operator.mul, **kw(backend))
    assert got.dtype == dt and int(got) == want_mul
    # np.sum-like widening: no wrap for narrow ints
    if dt.itemsize < 8:
        assert int(pyreduce.sum(x, **kw(backend))) == n * int(info.max)
    # the same wrap happens through dtype=
    assert pyreduce.reduce(x.astype(np.int64), "add", **kw(backend, dtype=dt)) == dt.type(want_add)


def test_documented_int32_example(backend):
    big = np.full(3, 2**30, dtype=np.int32)
    assert pyreduce.reduce(big, "add", **kw(backend)) == np.int32(-(2**30))
    assert pyreduce.sum(big, **kw(backend)) == np.int64(3 * 2**30)
    assert pyreduce.reduce(big, "add", **kw(backend, dtype=np.int64)) == np.int64(3 * 2**30)


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.uint8, np.uint16],
                         ids=lambda t: np.dtype(t).name)
def test_user_op_sees_numba_integer_promotion(backend, dt):
    """Regression (sim backend, pyreduce/backends/numba_cuda.py ``_device_op``): the
    simulator calls the op on NumPy scalars, where int8 + int8 stays int8 and
    wraps (NEP 50), while compiled Numba (cuda, cpu) computes it in int64 and
    only the op's result is cast back. An op whose result depends on the
    intermediate, such as ``(a + b) % 7``, then differs between the simulator
    and a GPU. pyreduce.testing's reference is the compiled op, and its values
    are drawn near the top of the range, so that every a + b overflows dt."""
    info = np.iinfo(dt)
    near_max = st.integers(int(info.max) - 50, int(info.max))
    report = pyreduce.testing.check_op(
        lambda a, b: (a + b) % 7, dt, backends=[backend], variants=["warp_shuffle"],
        elements=near_max, law_examples=examples(50), backend_examples=examples(3), seed=0)
    assert report.associative and report.commutative


# --------------------------------------------------------------------------
# Empty input, identity


IDENTITIES = {
    "add": lambda dt: 0, "mul": lambda dt: 1, "or": lambda dt: 0, "xor": lambda dt: 0,
    "and": lambda dt: True if dt.kind == "b" else (np.iinfo(dt).max if dt.kind == "u" else -1),
}


@pytest.mark.parametrize("dt", ALL, ids=lambda t: np.dtype(t).name)
def test_empty_input_returns_identity(backend, dt):
    dt = np.dtype(dt)
    empty = np.zeros(0, dt)
    for name, ident in IDENTITIES.items():
        if dt.kind == "f" and name in ("and", "or", "xor"):
            continue
        got = pyreduce.reduce(empty, name, **kw(backend))
        assert got.dtype == dt and got == dt.type(ident(dt)), name
    assert pyreduce.reduce(empty, np.logical_and, **kw(backend)) == np.True_
    assert pyreduce.reduce(empty, np.logical_or, **kw(backend)) == np.False_
    assert pyreduce.sum(empty, **kw(backend)).dtype == np.sum(empty).dtype
    assert pyreduce.prod(empty, **kw(backend)) == 1
    for fn in (pyreduce.max, pyreduce.min):
        with pytest.raises(ValueError, match="empty"):
            fn(empty, **kw(backend))
    for op in (max, min, np.maximum, "min"):
        with pytest.raises(ValueError, match="identity"):
            pyreduce.reduce(empty, op, **kw(backend))
    # identity= makes it defined
    assert pyreduce.max(empty, identity=dt.type(1), **kw(backend)) == dt.type(1)
    assert pyreduce.reduce(empty, min, identity=0, **kw(backend)) == dt.type(0)


def test_empty_user_op(backend):
    empty = np.zeros((0, 4), np.int32)
    with pytest.raises(ValueError, match="identity"):
        pyreduce.reduce(empty, last_nonzero, **kw(backend))
    got = pyreduce.reduce(empty, last_nonzero, identity=0, **kw(backend))
    assert got == 0 and got.dtype == np.int32
    got = pyreduce.reduce(empty, last_nonzero, initial=9, **kw(backend))
    assert got == 9 and got.dtype == np.int32
    # initial wins over identity
    assert pyreduce.reduce(empty, "add", identity=0, initial=5, **kw(backend)) == 5


def test_identity_is_not_combined_with_data(backend):
    """The identity only decides the empty result; a wrong one must not leak in."""
    x = np.arange(1, 200, dtype=np.int64)
    assert pyreduce.reduce(x, "add", identity=1000, **kw(backend)) == x.sum()
    assert pyreduce.reduce(x, lambda a, b: a + b, identity=1000, **kw(backend)) == x.sum()
    assert pyreduce.max(x, identity=10**6, **kw(backend)) == 199


# --------------------------------------------------------------------------
# initial: combined once, on the left


@settings(max_examples=examples(25))
@given(n=st.integers(1, 1500), seed=st.integers(0, 2**32 - 1), init_seed=st.integers(0, 99))
def test_initial_is_combined_once_on_the_left(backend, n, seed, init_seed):
    x = affine_data(n, seed)
    init = int(affine_data(1, init_seed)[0])
    want = functools.reduce(affine, x.tolist(), init)
    got = pyreduce.reduce(x, affine, initial=init, **kw(backend))
    assert int(got) == want
    # a sum sees it exactly once, whatever the number of blocks
    s = pyreduce.reduce(x % 1000, "add", initial=123456, **kw(backend))
    assert int(s) == int((x % 1000).sum()) + 123456


def test_initial_with_selection_ops(backend):
    x = np.zeros(500, np.int32)
    assert pyreduce.reduce(x, last_nonzero, initial=7, **kw(backend)) == 7
    x[300] = 4
    assert pyreduce.reduce(x, last_nonzero, initial=7, **kw(backend)) == 4
    assert pyreduce.reduce(x, first_nonzero, initial=7, **kw(backend)) == 7
    assert pyreduce.reduce(x, first_nonzero, initial=0, **kw(backend)) == 4
    assert pyreduce.max(x, initial=100, **kw(backend)) == 100
    assert np.isnan(pyreduce.max(np.arange(5.0), initial=np.nan, **kw(backend)))
    # initial is cast to the accumulator: sum of int8 accumulates in int64
    assert pyreduce.sum(np.full(300, 100, np.int8), initial=2**40, **kw(backend)) == 2**40 + 30000


# --------------------------------------------------------------------------
# device_result


def test_device_result_holds_the_value(gpu_backend):
    from numba import cuda

    x = np.arange(1, 1001, dtype=np.int32)
    out = pyreduce.sum(x, device_result=True, **kw(gpu_backend))
    # a host input gives a Numba device array, 0-d like np.sum's result
    assert hasattr(out, "copy_to_host") and not isinstance(out, np.ndarray)
    host = out.copy_to_host()
    assert host.shape == () and host.dtype == np.int64 and host[()] == 500500
    out = pyreduce.reduce(x, last_nonzero, device_result=True, initial=5, **kw(gpu_backend))
    assert out.copy_to_host()[()] == 1000
    # single block, no finishing pass
    out = pyreduce.reduce(x[:10], first_nonzero, device_result=True, **kw(gpu_backend))
    assert out.copy_to_host()[()] == 1
    # empty: the identity / initial, on the device
    out = pyreduce.sum(np.zeros(0, np.float32), device_result=True, **kw(gpu_backend))
    assert out.copy_to_host()[()] == 0.0 and out.dtype == np.float32
    out = pyreduce.max(np.zeros(0), initial=-3.0, device_result=True, **kw(gpu_backend))
    assert out.copy_to_host()[()] == -3.0
    # and a device input
    d = cuda.to_device(x.reshape(40, 25).T)
    out = pyreduce.reduce(d, last_nonzero, device_result=True, **kw(gpu_backend))
    assert out.copy_to_host()[()] == x.reshape(40, 25).T.ravel()[-1]


def test_device_result_results_are_independent(gpu_backend):
    """Two device results must not share storage."""
    a = pyreduce.sum(np.ones(10), device_result=True, **kw(gpu_backend))
    b = pyreduce.sum(np.ones(20), device_result=True, **kw(gpu_backend))
    assert a.copy_to_host()[()] == 10 and b.copy_to_host()[()] == 20


def test_out_on_the_device(gpu_backend):
    """``out=`` is written on the device and returned; nothing else is touched."""
    from numba import cuda

    x = affine_data(777, seed=4)
    want = functools.reduce(affine, x.tolist())
    buf = cuda.to_device(np.full(3, -1, dtype=np.int64))
    got = pyreduce.reduce(x, affine, out=buf[1:2], **kw(gpu_backend))
    assert buf.copy_to_host().tolist() == [-1, want, -1]
    assert got.copy_to_host()[0] == want
    zero_d = cuda.device_array((), dtype=np.int64)
    assert pyreduce.reduce(x, affine, out=zero_d, **kw(gpu_backend)) is zero_d
    assert zero_d.copy_to_host()[()] == want
    # empty input with an identity: the identity is written
    assert pyreduce.sum(x[:0], out=zero_d, **kw(gpu_backend)).copy_to_host()[()] == 0


@pytest.mark.parametrize("backend_name", ["cpu", "sim", "cuda"])
def test_out_on_the_host(backend_name):
    if backend_name not in backends.available():
        pytest.skip(f"backend {backend_name} not available in this process")
    x = np.random.default_rng(2).standard_normal(300)
    out = np.full((1, 1), np.nan)
    assert pyreduce.max(x, out=out, **kw(backend_name)) is out
    assert out[0, 0] == x.max()


def test_out_refused_when_it_cannot_hold_the_result(backend):
    from numba import cuda

    x = np.arange(10.0)
    with pytest.raises(ValueError, match="exactly one element"):
        pyreduce.sum(x, out=np.zeros(2), **kw(backend))
    with pytest.raises(TypeError, match="dtype float32.*float64"):
        pyreduce.sum(x, out=np.zeros(1, np.float32), **kw(backend))
    with pytest.raises(ValueError, match="not both"):
        pyreduce.sum(x, out=np.zeros(1), device_result=True, **kw(backend))
    if backend == "cpu":
        with pytest.raises(ValueError, match="device out= array needs a GPU"):
            pyreduce.sum(x, out=cuda.device_array(1), backend="cpu")
    else:
        with pytest.raises(TypeError, match="dtype int32.*float64"):
            pyreduce.sum(x, out=cuda.device_array(1, np.int32), **kw(backend))
        with pytest.raises(TypeError, match="out= must be"):
            pyreduce.sum(x, out=[0.0], **kw(backend))
    assert np.array_equal(x, np.arange(10.0))


def test_device_result_refused_on_cpu():
    with pytest.raises(ValueError, match="device_result"):
        pyreduce.sum(np.ones(3), backend="cpu", device_result=True)
    with pytest.raises(ValueError, match="device_result"):
        pyreduce.sum(np.ones(0), backend="cpu", device_result=True)


# --------------------------------------------------------------------------
# Spellings of the built-in operators


SPELLINGS = {
    "add": [operator.add, np.add, "add", pyreduce.sum],
    "mul": [operator.mul, np.multiply, "mul", pyreduce.prod],
    "max": [max, np.maximum, "max", pyreduce.max],
    "min": [min, np.minimum, "min", pyreduce.min],
    "nanmax": [np.fmax, "nanmax", pyreduce.nanmax],
    "nanmin": [np.fmin, "nanmin", pyreduce.nanmin],
    "and": [operator.and_, np.bitwise_and, "and"],
    "or": [operator.or_, np.bitwise_or, "or"],
    "xor": [operator.xor, np.bitwise_xor, "xor"],
    "logical_and": [np.logical_and, "logical_and"],
    "logical_or": [np.logical_or, "logical_or"],
}
EXPECTED = {
    "add": lambda x: np.add.reduce(x, dtype=x.dtype),
    "mul": lambda x: np.multiply.reduce(x, dtype=x.dtype),
    "max": np.max, "min": np.min, "nanmax": np.nanmax, "nanmin": np.nanmin,
    "and": np.bitwise_and.reduce, "or": np.bitwise_or.reduce, "xor": np.bitwise_xor.reduce,
    "logical_and": np.logical_and.reduce, "logical_or": np.logical_or.reduce,
}


@pytest.mark.parametrize("name", list(SPELLINGS))
def test_builtin_spellings_agree_and_share_kernels(backend, name):
    rng = np.random.default_rng(5)
    x = rng.integers(-50, 50, 333).astype(np.int16)
    if name in ("and", "logical_and"):
        x[rng.random(333) < 0.9] = -1
    if name in ("or", "logical_or"):
        x[rng.random(333) < 0.9] = 0
    if name == "mul":
        x = rng.choice(np.array([1, -1, 3], np.int16), 333)
    want = EXPECTED[name](x)
    first = pyreduce.reduce(x, SPELLINGS[name][0], **kw(backend))
    builds = pyreduce.cache_info().builds
    for spelling in SPELLINGS[name]:
        got = pyreduce.reduce(x, spelling, **kw(backend))
        assert got == want and got.dtype == first.dtype == np.asarray(want).dtype, spelling
    assert pyreduce.cache_info().builds == builds, "an alias built a new kernel"


# --------------------------------------------------------------------------
# The kernel cache is keyed by the operator's code


def _make_scaled(k):
    return lambda a, b: a + b + k


def test_distinct_ops_never_share_a_kernel(backend):
    """Ops that differ in code, constants, defaults or named globals get their
    own kernels (a shared one would give the first op's result)."""
    x = np.array([3, 0, 5, 0], dtype=np.int64)
    assert pyreduce.reduce(x, lambda a, b: b if b != 0 else a, **kw(backend)) == 5
    assert pyreduce.reduce(x, lambda a, b: a if a != 0 else b, **kw(backend)) == 3
    assert pyreduce.reduce(x, lambda a, b: a + b + 1, **kw(backend)) == 11
    assert pyreduce.reduce(x, lambda a, b: a + b + 2, **kw(backend)) == 14

    def with_default(a, b, c=1):
        return a + b + c

    def with_default2(a, b, c=2):
        return a + b + c

    # three parameters are refused (see test_errors); defaults are still keyed
    with pytest.raises(TypeError, match="two arguments"):
        pyreduce.reduce(x, with_default, **kw(backend))
    g = {"K": 10}
    exec("def op(a, b):\n    return a + b * K\n", g)
    h = {"K": 100}
    exec("def op(a, b):\n    return a + b * K\n", h)
    assert pyreduce.reduce(x, g["op"], **kw(backend)) == 3 + 50
    assert pyreduce.reduce(x, h["op"], **kw(backend)) == 3 + 500


def test_cache_key_sees_globals_of_nested_code(backend):
    """Regression (pyreduce/ops.py, function_key): globals named only inside a nested
    function of the op are not part of the key, so a second op with the same
    code and another value of that global reuses the first op's kernel."""
    src = "def op(a, b):\n    f = lambda v: v * SCALE\n    return a + f(b)\n"
    g, h = {"SCALE": 10}, {"SCALE": 100}
    exec(src, g)
    exec(src, h)
    x = np.array([1, 2, 3], dtype=np.int64)
    assert pyreduce.reduce(x, g["op"], **kw(backend)) == 1 + 50
    assert pyreduce.reduce(x, h["op"], **kw(backend)) == 1 + 500


def _first_or_last(k):
    # first element for k = +0.0, last for k = -0.0: both associative
    return lambda a, b: a if math.copysign(1.0, k) > 0 else b


def test_cache_key_distinguishes_signed_zero_constants(backend):
    """Regression (pyreduce/ops.py, _value_key): closure constants 0.0 and -0.0 compare
    equal, so two ops that differ only in the sign share one kernel."""
    x = np.array([1.0, 2.0, 3.0])
    assert pyreduce.reduce(x, _first_or_last(-0.0), **kw(backend)) == 3.0
    assert pyreduce.reduce(x, _first_or_last(0.0), **kw(backend)) == 1.0


def test_cache_key_of_nan_constant_is_stable(backend):
    """Regression (pyreduce/ops.py, _value_key): a NaN closure constant never equals
    itself, so every call of such an op builds (and keeps) new kernels."""

    def make():
        k = float("nan")
        return lambda a, b: a + b if k != k else a

    x = np.arange(10.0)
    assert pyreduce.reduce(x, make(), **kw(backend)) == 45.0
    builds = pyreduce.cache_info().builds
    size = pyreduce.cache_info().size
    for _ in range(3):
        assert pyreduce.reduce(x, make(), **kw(backend)) == 45.0
    assert pyreduce.cache_info().builds == builds
    assert pyreduce.cache_info().size == size


def test_jitted_ops_are_keyed_by_their_python_function(backend):
    import numba

    x = np.array([4, 0, 6, 0], dtype=np.int32)
    plain = lambda a, b: b if b != 0 else a  # noqa: E731
    assert pyreduce.reduce(x, plain, **kw(backend)) == 6
    builds = pyreduce.cache_info().builds
    jitted = numba.njit(lambda a, b: b if b != 0 else a)
    assert pyreduce.reduce(x, jitted, **kw(backend)) == 6
    assert pyreduce.cache_info().builds == builds
    if backend != "cpu":
        from numba import cuda

        dev = cuda.jit(device=True)(lambda a, b: b if b != 0 else a)
        assert pyreduce.reduce(x, dev, **kw(backend)) == 6
        assert pyreduce.cache_info().builds == builds


def test_named_reductions_pass_keywords(backend):
    x = np.arange(10, dtype=np.int32)
    assert pyreduce.sum(x, initial=5, **kw(backend)) == 50
    assert pyreduce.max(np.zeros(0, np.int32), identity=-1, **kw(backend)) == -1
    assert pyreduce.min(x[::-1], **kw(backend)) == 0
    assert pyreduce.prod(x[1:6], dtype=np.int8, **kw(backend)) == np.int8(120)


def test_backends_available_lists_this_process():
    present = backends.available()
    assert present[-1] == "cpu"
    assert set(present) <= {"cuda", "sim", "cpu"}
    assert pyreduce.available() == present


# cache_clear() forgets every compiled kernel: kept last so that the tests above
# reuse what earlier files compiled
def test_identical_lambdas_share_one_kernel(backend):
    x = np.arange(100, dtype=np.int64)
    pyreduce.cache_clear()
    assert pyreduce.cache_info().size == 0
    r1 = pyreduce.reduce(x, lambda a, b: b if b != 0 else a, **kw(backend))
    info1 = pyreduce.cache_info()
    assert info1.builds > 0 and info1.size > 0
    r2 = pyreduce.reduce(x, lambda a, b: b if b != 0 else a, **kw(backend))
    info2 = pyreduce.cache_info()
    assert r1 == r2 == 99
    assert info2.builds == info1.builds, "a second identical lambda built again"
    assert info2.size == info1.size
    # same code closing over the same value: shared; another value: a new kernel
    assert pyreduce.reduce(x, _make_scaled(1), **kw(backend)) == x.sum() + 99
    info3 = pyreduce.cache_info()
    assert pyreduce.reduce(x, _make_scaled(1), **kw(backend)) == x.sum() + 99
    assert pyreduce.cache_info().builds == info3.builds
    assert pyreduce.reduce(x, _make_scaled(2), **kw(backend)) == x.sum() + 2 * 99
    assert pyreduce.cache_info().builds > info3.builds
    # another accumulator dtype is another kernel
    before = pyreduce.cache_info().builds
    pyreduce.reduce(x.astype(np.int32), _make_scaled(1), **kw(backend))
    assert pyreduce.cache_info().builds > before
    # cache_clear forgets everything; the next call builds again, correctly
    pyreduce.cache_clear()
    after = pyreduce.cache_info()
    assert (after.hits, after.builds, after.size) == (0, 0, 0)
    assert pyreduce.reduce(x, _make_scaled(2), **kw(backend)) == x.sum() + 2 * 99
    assert pyreduce.cache_info().builds > 0
