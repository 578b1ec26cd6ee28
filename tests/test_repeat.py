"""Repeat calls (pyreduce.callmemo): a call shape seen before skips its decisions,
and every call still computes its own input's value: new data, new addresses and
alignments, rebound closure values and globals, other dtypes, identities and
initial values."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pyreduce
from pyreduce import callmemo, tuning
from conftest import count_calls
from oracles import P, affine

N = 300  # a few blocks of the simulator's device


def device(x):
    from numba import cuda

    return cuda.to_device(x)


def noncommutative(rng, n):
    return (rng.integers(1, P, n) * P + rng.integers(0, P, n)).astype(np.int64)


def test_a_repeat_skips_the_full_path_and_reads_its_own_input(gpu_backend, prepares):
    rng = np.random.default_rng(0)
    xs = [noncommutative(rng, N) for _ in range(3)]
    for x in xs:
        got = pyreduce.reduce(device(x), affine, backend=gpu_backend)
        assert int(got) == functools.reduce(affine, x.tolist())
    assert prepares[0] == 1  # new arrays of the same call shape: one full call
    y = rng.standard_normal(N)
    for _ in range(2):
        assert pyreduce.max(device(y), backend=gpu_backend) == y.max()
    assert prepares[0] == 2


def test_device_results_of_repeats_are_new_arrays(gpu_backend, prepares):
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(N) for _ in range(3)]
    outs = [pyreduce.sum(device(x), backend=gpu_backend, device_result=True) for x in xs]
    assert prepares[0] == 1
    for x, out in zip(xs, outs):
        assert out.copy_to_host()[()] == pytest.approx(x.sum(), rel=1e-12)


def test_other_addresses_and_alignments(gpu_backend, prepares):
    rng = np.random.default_rng(2)
    x = noncommutative(rng, N + 8)
    d32 = device(x.astype(np.int32))
    d = device(x)
    for start in (0, 1, 2, 3, 0, 2):  # 4-byte steps: 16-, 4-, 8-byte aligned views
        v = x.astype(np.int32)[start:start + N]
        assert pyreduce.reduce(d32[start:start + N], lambda a, b: b,
                               backend=gpu_backend) == v[-1]
        assert pyreduce.sum(d32[start:start + N], backend=gpu_backend) == v.sum()
        got = pyreduce.reduce(d[start:start + N], affine, backend=gpu_backend)
        assert int(got) == functools.reduce(affine, x[start:start + N].tolist())


def test_rebound_closure_values_and_globals_are_seen(gpu_backend, prepares):
    x = np.random.default_rng(3).integers(-1000, 1000, N).astype(np.int64)
    d = device(x)
    k = 3

    def shifted(a, b):
        return a + b + k

    for k in (3, 3, 5):
        want = functools.reduce(lambda a, b, k=k: a + b + k, x.tolist())
        assert pyreduce.reduce(d, shifted, identity=None, backend=gpu_backend) == want
    assert prepares[0] == 2  # the rebinding took the full path, the repeat did not
    global OFFSET
    for OFFSET in (1, 1, 4):
        want = functools.reduce(lambda a, b: a + b + OFFSET, x.tolist())
        assert pyreduce.reduce(d, _global_shifted, backend=gpu_backend) == want
    assert prepares[0] == 4


OFFSET = 0


def _global_shifted(a, b):
    return a + b + OFFSET


@pytest.mark.parametrize("change", ["dtype", "identity", "initial", "initial value", "size",
                                    "acc", "op"])
def test_each_part_of_the_call_shape_counts(gpu_backend, prepares, change):
    rng = np.random.default_rng(4)
    x = rng.integers(0, 100, N).astype(np.int32)
    base = dict(op="add", identity=None, initial=None, dtype=None)
    other = dict(base)
    y = x
    if change == "initial value":
        base["initial"], other["initial"] = 2, 9
    if change == "dtype":
        y = x.astype(np.int64)
    elif change == "identity":
        other["identity"] = 0
    elif change == "initial":
        other["initial"] = 7
    elif change == "size":
        y = x[:N - 3]
    elif change == "acc":
        other["dtype"] = np.int8
    elif change == "op":
        other["op"] = "max"
    for kw, arr in ((base, x), (other, y), (base, x), (other, y)):
        got = pyreduce.reduce(device(arr), kw["op"], kw["identity"], initial=kw["initial"],
                              dtype=kw["dtype"], backend=gpu_backend)
        acc = np.dtype(kw["dtype"] or arr.dtype)
        vals = arr.astype(acc)
        want = vals.max() if kw["op"] == "max" else vals.sum(dtype=acc)
        if kw["initial"] is not None:
            want = acc.type(want + kw["initial"])
        assert got == want and got.dtype == acc
    assert prepares[0] == 2


def test_only_plain_calls_are_remembered(gpu_backend, prepares):
    x = np.random.default_rng(5).standard_normal(N)
    d = device(x)
    for _ in range(2):
        out = device(np.zeros(1))
        pyreduce.sum(d, backend=gpu_backend, out=out)
        assert out.copy_to_host()[0] == pytest.approx(x.sum())
        assert pyreduce.reduce(d, "add", backend=gpu_backend, check=True) == \
            pytest.approx(x.sum())
    assert prepares[0] == 4
    assert not callmemo._MEMO


def test_a_tuning_and_deterministic_are_part_of_the_call_shape(gpu_backend, prepares):
    """A repeat with ``tuning=`` or ``deterministic=True`` takes its remembered
    decisions, under a call shape of its own: the default call, another tuning
    and the other ``deterministic`` are other call shapes; a ``deterministic``
    that is not a bool is still refused."""
    rng = np.random.default_rng(5)
    small = pyreduce.Tuning(block_size=64, max_blocks=3)
    calls = [dict(tuning=small), dict(tuning=pyreduce.Tuning(block_size=128, max_blocks=2)),
             dict(deterministic=True), dict(deterministic=True, tuning=small), {}]
    for x in (rng.standard_normal(N) for _ in range(2)):
        d = device(x)
        for kw in calls:
            got = pyreduce.sum(d, backend=gpu_backend, **kw)
            if kw.get("deterministic"):
                assert got.tobytes() == pyreduce.reference(x, "add").tobytes()
            else:
                assert got == pytest.approx(x.sum(), rel=1e-12)
    assert prepares[0] == len(calls)
    with pytest.raises(TypeError, match="deterministic= must be True or False"):
        pyreduce.sum(d, backend=gpu_backend, deterministic=1)


def test_plain_deterministic_repeats_go_straight_to_their_decisions(monkeypatch):
    """A named reduction's repeat with no keyword but ``deterministic=`` and
    ``device_result=`` skips the keyword checks and finds the decisions the
    full path remembered (the same call shape): the fixed tree's bits on each
    new input, the device result where asked; a ``deterministic`` that is not
    a bool takes the full path, which refuses it."""
    from pyreduce import named

    rng = np.random.default_rng(12)
    xs = [rng.standard_normal(N) for _ in range(3)]
    pyreduce.sum(device(xs[0]), deterministic=True)  # the full path remembers it
    pyreduce.sum(device(xs[0]), deterministic=True, device_result=True)
    with pytest.raises(TypeError, match="deterministic= must be True or False"):
        pyreduce.sum(device(xs[0]), deterministic=1)

    def full_path(*args, **kwargs):
        raise AssertionError("a plain repeat took the full path")

    monkeypatch.setattr(named, "_reduce", full_path)
    for x in xs[1:]:
        want = pyreduce.reference(x, "add").tobytes()
        assert pyreduce.sum(device(x), deterministic=True).tobytes() == want
        got = pyreduce.sum(device(x), deterministic=True, device_result=True)
        assert got.copy_to_host().tobytes() == want


def test_forgetting_plans_forgets_repeats(gpu_backend, prepares, tmp_path, monkeypatch):
    x = np.random.default_rng(6).standard_normal(N)
    d = device(x)
    pyreduce.max(d, backend=gpu_backend)
    assert callmemo._MEMO
    pyreduce.cache_clear()
    assert not callmemo._MEMO
    pyreduce.max(d, backend=gpu_backend)
    monkeypatch.setenv("PYREDUCE_TUNING_FILE", str(tmp_path / "tuning.json"))
    tuning.reset()
    assert not callmemo._MEMO
    assert pyreduce.max(d, backend=gpu_backend) == x.max()


def test_the_memo_keeps_at_most_its_bound(gpu_backend, prepares, monkeypatch):
    monkeypatch.setattr(callmemo._MEMO, "maxsize", 3)
    rng = np.random.default_rng(7)
    for n in range(N, N + 7):
        x = rng.standard_normal(n)
        assert pyreduce.max(device(x), backend=gpu_backend) == x.max()
        assert len(callmemo._MEMO) <= 3


def test_host_inputs_take_the_full_path(gpu_backend, prepares):
    x = np.random.default_rng(8).standard_normal(N)
    for _ in range(2):
        assert pyreduce.max(x, backend=gpu_backend) == x.max()
    assert prepares[0] == 2


def _host(r):
    return r.get() if hasattr(r, "get") else r.copy_to_host()


def test_repeats_of_structured_one_values_read_their_own_input(gpu_backend, monkeypatch):
    """Repeats of a structured reduction to one device value (the kernel
    finishes it: on a GPU the express runner) give each input's own value,
    of NumPy's dtype and shape: minmax's two results, keepdims, ddof and
    dtype=, NumPy's warning on every call that earns it, for Numba arrays and
    (on a GPU) CuPy's."""
    from pyreduce import along

    callmemo.clear()
    prepares = [0]
    real = along.prepare
    monkeypatch.setattr(along, "prepare",
                        lambda *a, **k: prepares.__setitem__(0, prepares[0] + 1) or real(*a, **k))
    rng = np.random.default_rng(9)
    libs = [device]
    if gpu_backend == "cuda":
        cp = pytest.importorskip("cupy")
        libs.append(cp.asarray)
    for lib in libs:
        xs = [rng.standard_normal((3, N // 3)).astype(np.float32) for _ in range(3)]
        for x in xs:
            d = lib(x)
            kw = {"backend": gpu_backend, "device_result": True}
            for name, more, want in [
                ("mean", {}, x.astype(np.float64).mean()),
                ("var", {"ddof": 1}, x.astype(np.float64).var(ddof=1)),
                ("std", {"dtype": np.float64}, x.astype(np.float64).std()),
                ("argmax", {}, x.argmax()),
                ("mean", {"keepdims": True}, x.astype(np.float64).mean(keepdims=True)),
            ]:
                got = getattr(pyreduce, name)(d, **more, **kw)
                assert got.shape == np.shape(want) and got.dtype == np.asarray(
                    getattr(np, name)(x, **more)).dtype, (name, got.dtype)
                assert np.allclose(_host(got), want, rtol=1e-5), (name, _host(got), want)
            lo, hi = pyreduce.minmax(d, **kw)
            assert (lo.shape, hi.shape) == ((), ())
            assert (_host(lo), _host(hi)) == (x.min(), x.max())
            with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
                got = pyreduce.var(d, ddof=x.size, **kw)
            assert np.isinf(_host(got))
    # each call shape prepared once per library, however many inputs
    assert prepares[0] == 7 * len(libs)


@pytest.fixture
def axis_prepares(monkeypatch):
    """The number of full-path calls along axes (``prepare_axes``) since the test
    began, the remembered calls forgotten first."""
    from pyreduce import manyvalues

    yield count_calls(monkeypatch, manyvalues, "prepare_axes")
    callmemo.clear()


def _rows_of(op, x, axis):
    """``op`` folded left to right along ``axis`` of a 2-D integer array."""
    lanes = np.moveaxis(x, axis, -1)
    rows = lanes.reshape(-1, lanes.shape[-1])
    return np.array([functools.reduce(op, row.tolist()) for row in rows])


@pytest.mark.parametrize("axis", [1, 0, -1, (1,)])
def test_repeats_along_an_axis_read_their_own_input(gpu_backend, axis_prepares, axis):
    rng = np.random.default_rng(11)
    xs = [noncommutative(rng, 37 * 9).reshape(37, 9) for _ in range(3)]
    for x in xs:
        got = _host(pyreduce.reduce(device(x), affine, axis=axis, backend=gpu_backend))
        ax = axis[0] if isinstance(axis, tuple) else axis
        assert got.tolist() == _rows_of(affine, x, ax).tolist()
    assert axis_prepares[0] == 1
    for keepdims in (True, True):  # a call shape of its own
        got = _host(pyreduce.reduce(device(xs[0]), affine, axis=axis, keepdims=keepdims,
                                    backend=gpu_backend))
        ax = axis[0] if isinstance(axis, tuple) else axis
        assert got.shape == tuple(1 if i == ax % 2 else n for i, n in enumerate(xs[0].shape))
    assert axis_prepares[0] == 2


def test_repeats_along_an_axis_check_strides_alignment_and_initial(gpu_backend, axis_prepares):
    rng = np.random.default_rng(12)
    x = noncommutative(rng, 40 * 9).reshape(40, 9)
    f = np.asfortranarray(x)
    d, df = device(x), device(f)
    for arr, dev in ((x, d), (f, df), (x, d), (f, df)):  # one shape, two layouts
        got = _host(pyreduce.reduce(dev, affine, axis=1, backend=gpu_backend))
        assert got.tolist() == _rows_of(affine, arr, 1).tolist()
    wide = rng.integers(-99, 99, 64 * 40).astype(np.int32)
    flat = device(wide)
    for start in (0, 1, 2, 3, 0, 2):  # rows of 32 bytes at 16-, 4- and 8-byte alignment
        view = flat[start:start + 40 * 32].reshape(40, 32)
        want = wide[start:start + 40 * 32].reshape(40, 32).sum(axis=1)
        assert _host(pyreduce.sum(view, axis=1, backend=gpu_backend)).tolist() == want.tolist()
    for initial in (5, 5, 7):
        got = _host(pyreduce.reduce(d, affine, axis=0, initial=initial, backend=gpu_backend))
        want = [functools.reduce(affine, [initial] + col.tolist()) for col in x.T]
        assert got.tolist() == want
    out = pyreduce.sum(d, axis=1, backend=gpu_backend, device_result=True)
    assert _host(out).tolist() == x.sum(axis=1).tolist()


def test_along_an_axis_only_plain_calls_are_remembered(gpu_backend, axis_prepares):
    x = np.random.default_rng(13).standard_normal((20, 30))
    d = device(x)
    for _ in range(2):
        out = device(np.zeros(20))
        pyreduce.sum(d, axis=1, backend=gpu_backend, out=out)
        np.testing.assert_allclose(out.copy_to_host(), x.sum(axis=1))
        got = pyreduce.sum(x, axis=1, backend=gpu_backend)  # a host input
        np.testing.assert_allclose(got, x.sum(axis=1))
    assert axis_prepares[0] == 4
    assert not callmemo._MEMO
    for _ in range(2):  # a tuning is part of the call shape
        got = pyreduce.sum(d, axis=1, backend=gpu_backend,
                           tuning=pyreduce.Tuning(block_size=64))
        np.testing.assert_allclose(_host(got), x.sum(axis=1))
    assert axis_prepares[0] == 5


@pytest.fixture
def strided_plans(monkeypatch):
    """The number of batched plans made (``manyvalues._strided_plan``) since the
    test began, the remembered calls forgotten first."""
    from pyreduce import manyvalues

    yield count_calls(monkeypatch, manyvalues, "_strided_plan")
    callmemo.clear()


def _host_all(r):
    return tuple(_host(v) for v in r) if isinstance(r, tuple) else _host(r)


@pytest.mark.parametrize("axis", [1, 0])
def test_structured_repeats_along_an_axis_read_their_own_input(gpu_backend, strided_plans,
                                                               axis):
    """Plain calls (no keywords: the default backend, the GPU's for a device
    array) of the structured reductions along an axis, on new arrays."""
    rng = np.random.default_rng(14)
    xs = [rng.standard_normal((37, 11)) * (k + 1) for k in range(3)]
    calls = [(lambda d: pyreduce.mean(d, axis=axis), lambda x: np.mean(x, axis=axis)),
             (lambda d: pyreduce.var(d, axis=axis, ddof=1),
              lambda x: np.var(x, axis=axis, ddof=1)),
             (lambda d: pyreduce.argmax(d, axis=axis), lambda x: np.argmax(x, axis=axis)),
             (lambda d: pyreduce.minmax(d, axis=axis),
              lambda x: (x.min(axis=axis), x.max(axis=axis)))]
    for x in xs:
        for f, want in calls:
            np.testing.assert_allclose(_host_all(f(device(x))), want(x), rtol=1e-12)
    assert strided_plans[0] == len(calls)  # one full call per call shape
    f = np.asfortranarray(xs[0])           # the same shape, other strides
    np.testing.assert_allclose(_host(pyreduce.mean(device(f), axis=axis)),
                               np.mean(xs[0], axis=axis), rtol=1e-12)
    assert strided_plans[0] == len(calls) + 1


def test_structured_repeats_along_an_axis_warn_for_empty_lanes(gpu_backend, strided_plans):
    x = np.random.default_rng(15).standard_normal((6, 9))
    x[2] = np.nan
    for _ in range(2):
        with pytest.warns(RuntimeWarning):
            got = _host(pyreduce.nanmean(device(x), axis=1))
        assert np.isnan(got[2]) and np.allclose(np.delete(got, 2), np.nanmean(
            np.delete(x, 2, axis=0), axis=1))
    assert strided_plans[0] == 1


def test_a_remembered_axis_does_not_admit_values_equal_to_it(gpu_backend, axis_prepares):
    """``1.0``, ``True`` and ``(True,)`` equal ``1`` as keys; after a remembered
    ``axis=1`` they are still refused as a first call refuses them."""
    x = np.arange(12.0).reshape(3, 4)
    d = device(x)
    for bad in (1.0, True, (True,)):
        with pytest.raises(TypeError):
            pyreduce.sum(d, axis=bad)
    assert _host(pyreduce.sum(d, axis=1)).tolist() == x.sum(axis=1).tolist()
    assert _host(pyreduce.sum(d, axis=np.int64(1))).tolist() == x.sum(axis=1).tolist()
    for bad in (1.0, True, (True,)):
        with pytest.raises(TypeError):
            pyreduce.sum(d, axis=bad)
    assert axis_prepares[0] == 1  # np.int64(1) found axis=1's decisions


def test_structured_calls_with_keywords_are_not_remembered(gpu_backend, strided_plans):
    """Only what a plain call can find is remembered: calls naming a backend, a
    stream or a tuning take the full path and leave the memo as it was."""
    x = np.random.default_rng(16).standard_normal((30, 7))
    d = device(x)
    for _ in range(2):
        got = pyreduce.mean(d, axis=1, backend=gpu_backend)
        np.testing.assert_allclose(_host(got), x.mean(axis=1), rtol=1e-12)
    assert strided_plans[0] == 2
    assert not callmemo._MEMO


@pytest.mark.parametrize("backend", ["cpu", "auto"])
def test_host_inputs_the_cpu_backend_folds_repeat(backend, prepares):
    """A NumPy input's plain call that the cpu backend reduced is remembered by
    dtype, shape and strides: new arrays (and a rebound closure value) get their
    own values, another layout, a masked array or a call with more keywords
    takes the full path."""
    if backend == "auto" and "cuda" in pyreduce.available():
        pytest.skip("auto sends host arrays where the cost model says; cpu is tested")
    rng = np.random.default_rng(17)
    xs = [noncommutative(rng, N) for _ in range(3)]
    for x in xs:
        got = pyreduce.reduce(x, affine, backend=backend)
        assert int(got) == functools.reduce(affine, x.tolist())
    assert prepares[0] == 1
    ys = [rng.standard_normal((20, 30)) for _ in range(2)]
    for y in ys + [y.T for y in ys]:  # C order, then its transposes (other strides)
        assert pyreduce.max(y, backend=backend) == y.max()
        assert pyreduce.sum(y, backend=backend) == pytest.approx(y.sum(), rel=1e-12)
    assert prepares[0] == 1 + 2 + 2
    k = 3

    def shifted(a, b):
        return a + b + k

    x = rng.integers(-9, 9, 50).astype(np.int64)
    for k in (3, 3, 5):
        want = functools.reduce(lambda a, b, k=k: a + b + k, x.tolist())
        assert pyreduce.reduce(x, shifted, identity=None, backend=backend) == want
    before = prepares[0]
    m = np.ma.MaskedArray(ys[0], mask=ys[0] > 1)
    for _ in range(2):
        assert pyreduce.max(m, backend=backend) == m.max()
        assert pyreduce.max(ys[0], backend=backend, keepdims=True).shape == (1, 1)
    assert prepares[0] == before + 4
    # deterministic=True: a call shape of its own, the fixed tree's bits each time
    for y in ys:
        got = pyreduce.sum(y, backend=backend, deterministic=True)
        assert got.tobytes() == pyreduce.reference(y, "add").tobytes()
    assert prepares[0] == before + 5


def test_the_default_tuning_is_one_object():
    """A structured call's shape holds None for the default tuning, told by
    identity (``pyreduce.along``): every layer's default is that one object,
    and a tuning equal to it makes a call shape of its own."""
    from pyreduce import along, planner, tuning_keywords
    from pyreduce.interop import inspect
    from pyreduce.structured import argmax_monoid

    assert tuning_keywords.DEFAULT is planner.DEFAULT_TUNING is along._DEFAULT
    info = inspect(np.arange(5.0))
    info.device = object()  # a device input's call shape
    m = argmax_monoid(info.dtype)
    default = along._call_shape(info, m, (), None, "auto", planner.DEFAULT_TUNING, None)
    equal = along._call_shape(info, m, (), None, "auto", planner.Tuning(), None)
    def finished(key):
        return [part for part in key if isinstance(part, tuple) and part[:1] == ("finished",)]

    assert finished(default) == [("finished", (), None, None)]
    assert finished(equal) == [("finished", (), None, planner.Tuning())] and equal != default
