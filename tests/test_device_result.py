"""Where results live (``device_result=``, ``docs/semantics.md``, *Where results
live*), without a GPU: the tri-state keyword on every public reduction.

* ``None`` (the default) follows the input: a CuPy or PyTorch input's
  reduction to one value is a 0-d array of its library; a host input's, a
  Numba device array's and the simulator's is a NumPy scalar.
* ``True``: a device array, ``False``: a NumPy scalar.
* Anything else is a TypeError naming ``device_result``.

CuPy and PyTorch are not here: their rule is exercised with the simulator's
arrays standing in for them (``FOLLOWED`` patched to take the simulator's
kind), which runs the same code: the full path, the repeat path, the
structured reductions finished on the host and copied back, ``where=``,
``keepdims``, an ``axis`` covering every axis. ``tests/test_gpu.py`` checks
real CuPy arrays and PyTorch tensors.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pyreduce
from pyreduce import interop

from oracles import ONE_VALUE, WITH_AXIS

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DATA = np.array([3.0, 1.0, 4.0, 0.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0])


def _sim():
    if "sim" not in pyreduce.backends.available():
        pytest.skip("the simulator is not enabled")
    from numba import cuda

    return cuda


def _is_device(r) -> bool:
    return hasattr(r, "copy_to_host")


def _host_of(r):
    return r.copy_to_host() if _is_device(r) else r


def _same_value(got, want):
    """``got`` (a NumPy scalar or a 0-d array, host or device) is ``want``: the
    same dtype and value."""
    got = _host_of(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert np.asarray(got).shape == np.shape(want)
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float),
                               rtol=1e-12)


@pytest.fixture
def follows_sim(monkeypatch):
    """The simulator's arrays followed as CuPy's and PyTorch's are."""
    monkeypatch.setattr(interop, "FOLLOWED", interop.FOLLOWED | {"sim"})
    pyreduce.callmemo.clear()
    yield
    pyreduce.callmemo.clear()


# --------------------------------------------------------------------------
# host inputs: unchanged


@pytest.mark.parametrize("name", ONE_VALUE)
def test_host_inputs_give_numpy_scalars(name):
    f = ONE_VALUE[name]
    want = f(DATA, backend="cpu")
    assert isinstance(want, np.generic)
    for kwargs in ({}, {"device_result": None}, {"device_result": False},
                   {"device_result": np.False_}):
        got = f(DATA, backend="cpu", **kwargs)
        assert isinstance(got, np.generic) and got.dtype == want.dtype and got == want
    if name in WITH_AXIS:
        got = f(DATA, axis=0, backend="cpu")
        assert isinstance(got, np.generic) and got.dtype == want.dtype
    with pytest.raises(ValueError, match="device_result=True needs a GPU backend"):
        f(DATA, backend="cpu", device_result=True)


def test_host_results_with_dtype_are_scalars():
    """``mean(x, dtype=...)`` is a NumPy scalar of that dtype, as ``np.mean``
    gives (it was a 0-d NumPy array)."""
    got = pyreduce.mean(DATA, dtype=np.float32, backend="cpu")
    assert isinstance(got, np.float32) and got == np.mean(DATA, dtype=np.float32)
    got = pyreduce.var(DATA, dtype=np.float32, backend="cpu")
    assert isinstance(got, np.float32)


# --------------------------------------------------------------------------
# bad values


@pytest.mark.parametrize("bad", ["yes", 1, 0, 1.0, [True], np.array([True])])
def test_device_result_must_be_none_true_or_false(bad):
    x = np.arange(6.0).reshape(2, 3)
    calls = [
        lambda: pyreduce.reduce(x, "add", device_result=bad, backend="cpu"),
        lambda: pyreduce.sum(x, device_result=bad),  # the named reductions' fast path
        lambda: pyreduce.sum(x, axis=1, device_result=bad, backend="cpu"),
        lambda: pyreduce.nansum(x, device_result=bad, backend="cpu"),
        lambda: pyreduce.mean(x, device_result=bad, backend="cpu"),
        lambda: pyreduce.argmax(x, axis=1, device_result=bad, backend="cpu"),
        lambda: pyreduce.minmax(x, device_result=bad, backend="cpu"),
        lambda: pyreduce.nanvar(x, device_result=bad, backend="cpu"),
        lambda: pyreduce.count_nonzero(x, device_result=bad, backend="cpu"),
        lambda: pyreduce.count_nonzero(x, axis=0, device_result=bad, backend="cpu"),
        lambda: pyreduce.segmented_reduce(x[0], np.array([0, 3]), "add", device_result=bad,
                                          backend="cpu"),
        lambda: pyreduce.explain(x, "add", device_result=bad, backend="cpu"),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="device_result= must be None"):
            call()


# --------------------------------------------------------------------------
# Numba device arrays (the simulator's): host scalars by default


@pytest.mark.sim
@pytest.mark.parametrize("name", ONE_VALUE)
def test_numba_inputs(name):
    """A Numba device array's reduction to one value is a NumPy scalar under
    None and False (as ``numba.cuda.reduce`` returns), a 0-d device array
    under True, for ``axis=None`` and an ``axis`` covering every axis alike;
    ``keepdims`` is a device array of ones, for None and False too."""
    cuda = _sim()
    f = ONE_VALUE[name]
    want = f(DATA, backend="cpu")
    d = cuda.to_device(DATA)
    for kwargs in ({}, {"device_result": False}):
        got = f(d, backend="sim", **kwargs)
        assert isinstance(got, np.generic)
        _same_value(got, want)
    got = f(d, backend="sim", device_result=True)
    assert _is_device(got) and got.shape == ()
    _same_value(got, want)
    if name in WITH_AXIS:
        got = f(d, axis=-1, backend="sim")
        assert isinstance(got, np.generic)
        _same_value(got, want)
        if name == "count_nonzero":  # compares x != 0 first, which Numba cannot
            with pytest.raises(TypeError, match="compares x with 0"):
                f(d, keepdims=True, backend="sim")
            return
        got = f(d, keepdims=True, backend="sim")
        assert _is_device(got) and got.shape == (1,)
        _same_value(got, np.asarray(want).reshape(1))


@pytest.mark.sim
def test_numba_tuple_results():
    """minmax: a pair of NumPy scalars, or of 0-d device arrays with True."""
    cuda = _sim()
    d = cuda.to_device(DATA)
    lo, hi = pyreduce.minmax(d, backend="sim")
    assert isinstance(lo, np.float64) and (lo, hi) == (0.0, 9.0)
    lo, hi = pyreduce.minmax(d, backend="sim", device_result=True)
    assert _is_device(lo) and lo.shape == () and (lo.copy_to_host(), hi.copy_to_host()) == (0, 9)


@pytest.mark.sim
def test_reduce_class_keeps_host_values(follows_sim):
    """``pyreduce.Reduce`` returns a host value, as ``numba.cuda.Reduce`` does,
    also for inputs whose results would follow them."""
    cuda = _sim()
    got = pyreduce.Reduce(lambda a, b: a + b)(cuda.to_device(DATA), backend="sim")
    assert isinstance(got, np.float64) and got == DATA.sum()


# --------------------------------------------------------------------------
# the rule CuPy and PyTorch inputs get, with the simulator's arrays standing in


@pytest.mark.sim
@pytest.mark.parametrize("name", ONE_VALUE)
def test_followed_inputs_give_0d_arrays_of_their_library(name, follows_sim):
    """Every public reduction to one value: a 0-d array of the input's library
    with the host scalar's dtype and value, for ``axis=None`` and an ``axis``
    covering every axis; ``keepdims``: that library's array of ones;
    ``device_result=False``: the NumPy scalar."""
    cuda = _sim()
    f = ONE_VALUE[name]
    want = f(DATA, backend="cpu")
    d = cuda.to_device(DATA)
    for _ in range(2):  # the full path, then the remembered decisions (callmemo)
        got = f(d, backend="sim")
        assert _is_device(got) and got.shape == ()
        _same_value(got, want)
    got = f(d, backend="sim", device_result=False)
    assert isinstance(got, np.generic)
    _same_value(got, want)
    got = f(d, backend="sim", device_result=True)
    assert _is_device(got) and got.shape == ()
    if name in WITH_AXIS:
        for axis in (0, -1):
            got = f(d, axis=axis, backend="sim")
            assert _is_device(got) and got.shape == ()
            _same_value(got, want)
        for kwargs in ({}, {"device_result": False}):  # keepdims: an array, as before
            if name == "count_nonzero":  # x != 0 by the input's library: not here
                break
            got = f(d, keepdims=True, backend="sim", **kwargs)
            assert _is_device(got) and got.shape == (1,)
            _same_value(got, np.asarray(want).reshape(1))
    # the cpu backend copies a device input to the host: a host scalar
    got = f(d, backend="cpu")
    assert isinstance(got, np.generic)


@pytest.mark.sim
def test_followed_2d_inputs(follows_sim):
    """Every axis of a 2-D input, as a tuple, in any order: the same 0-d array
    as ``axis=None``; an axis short of them: an array, as always."""
    cuda = _sim()
    x = DATA.reshape(2, 5)
    d = cuda.to_device(x)
    for f in (pyreduce.sum, pyreduce.max, pyreduce.mean, pyreduce.std, pyreduce.ptp,
              pyreduce.count_nonzero):
        want = f(x, backend="cpu")
        for axis in (None, (0, 1), (1, 0), (-1, 0)):
            got = f(d, axis=axis, backend="sim")
            assert _is_device(got) and got.shape == (), (f.__name__, axis)
            _same_value(got, want)
        if f is pyreduce.count_nonzero:  # x != 0 by the input's library: not here
            continue
        got = f(d, keepdims=True, backend="sim")
        assert _is_device(got) and got.shape == (1, 1)
        got = f(d, axis=1, backend="sim")
        assert _is_device(got) and got.shape == (2,)
        _same_value(got, f(x, axis=1, backend="cpu"))


@pytest.mark.sim
def test_followed_minmax_is_a_pair_of_0d_arrays(follows_sim):
    cuda = _sim()
    d = cuda.to_device(DATA)
    lo, hi = pyreduce.minmax(d, backend="sim")
    assert _is_device(lo) and _is_device(hi) and lo.shape == hi.shape == ()
    assert (lo.copy_to_host(), hi.copy_to_host()) == (0.0, 9.0)
    lo, hi = pyreduce.minmax(d, backend="sim", device_result=False)
    assert isinstance(lo, np.float64) and (lo, hi) == (0.0, 9.0)


@pytest.mark.sim
def test_followed_where_out_and_host_only_results(follows_sim):
    """``where=``: the same kind of result as without it. ``out=``: written,
    as before (no device result asked for). An operator finished on the host
    given to ``reduce``, and a tuple accumulator, stay host values."""
    cuda = _sim()
    d = cuda.to_device(DATA)
    m = DATA > 2
    got = pyreduce.sum(d, where=m, backend="sim")
    assert _is_device(got) and got.shape == () and got.copy_to_host() == DATA[m].sum()
    got = pyreduce.mean(d, where=m, backend="sim")
    assert _is_device(got) and got.copy_to_host() == DATA[m].mean()
    got = pyreduce.sum(d, where=m, backend="sim", device_result=False)
    assert isinstance(got, np.float64)
    out = np.zeros(1)
    assert pyreduce.sum(d, out=out, backend="sim") is out and out[0] == DATA.sum()
    out = cuda.to_device(np.zeros(1))
    assert pyreduce.sum(d, out=out, backend="sim") is out
    assert out.copy_to_host()[0] == DATA.sum()
    out = np.zeros(())
    assert pyreduce.mean(d, out=out, backend="sim") is out and out == DATA.mean()
    with pytest.raises(ValueError, match="not both"):
        pyreduce.sum(d, out=np.zeros(1), device_result=True, backend="sim")
    mean = pyreduce.structured.moments_monoid(DATA.dtype, "mean")
    got = pyreduce.reduce(d, mean, backend="sim")
    assert isinstance(got, np.float64) and got == DATA.mean()
    pair = pyreduce.reduce(d, lambda a, b: a if a[0] >= b[0] else b, map=lambda i, v: (v, i),
                           identity=(-np.inf, -1), backend="sim")
    assert isinstance(pair, tuple) and isinstance(pair[1], np.integer) and pair[1] == 5


@pytest.mark.sim
def test_followed_empty_inputs(follows_sim):
    """An empty input's value (the identity, ``initial``) is written to the 0-d
    array as well."""
    cuda = _sim()
    e = cuda.to_device(np.zeros(0, np.float32))
    got = pyreduce.sum(e, backend="sim")
    assert _is_device(got) and got.dtype == np.float32 and got.copy_to_host() == 0
    got = pyreduce.max(e, initial=-3.0, backend="sim")
    assert _is_device(got) and got.copy_to_host() == -3.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = pyreduce.mean(e, backend="sim")
    assert _is_device(got) and np.isnan(got.copy_to_host())


@pytest.mark.sim
def test_repeats_follow_the_call_not_the_first_result(follows_sim, prepares):
    """The remembered decisions of a call shape (``pyreduce.callmemo``) serve
    every ``device_result``: each call gets the kind of result it asks for."""
    cuda = _sim()
    d = cuda.to_device(DATA)
    kinds = []
    for device_result in (None, False, None, True, False, None):
        r = pyreduce.sum(d, backend="sim", device_result=device_result)
        kinds.append(_is_device(r))
        assert float(_host_of(r)) == DATA.sum()
    assert kinds == [True, False, True, True, False, True]
    assert prepares[0] == 1


@pytest.mark.sim
def test_a_named_stream_keeps_the_default_a_host_value(follows_sim, prepares):
    """A value written on a stream the caller named is not ordered before what
    the input's library runs next on its own current stream, so
    ``device_result=None`` gives the host value there, first call and repeats
    alike; ``True`` still asks for the device array on that stream."""
    cuda = _sim()
    d = cuda.to_device(DATA)
    s = cuda.stream()
    for _ in range(3):  # the full path, then the remembered call shape
        r = pyreduce.sum(d, backend="sim", stream=s)
        assert not _is_device(r) and r == DATA.sum()
    assert prepares[0] == 1
    r = pyreduce.sum(d, backend="sim", stream=s, device_result=True)
    assert _is_device(r) and float(_host_of(r)) == DATA.sum()
    assert _is_device(pyreduce.sum(d, backend="sim"))  # without stream=: followed
    for name in ("mean", "argmax"):
        r = getattr(pyreduce, name)(d, backend="sim", stream=s)
        _same_value(r, getattr(np, name)(DATA))
        assert not _is_device(r)
    r = pyreduce.sum(d, backend="sim", stream=s, where=DATA > 2)
    assert not _is_device(r) and r == DATA[DATA > 2].sum()
