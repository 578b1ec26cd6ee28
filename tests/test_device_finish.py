"""The structured reductions along axes of device inputs, finished on the device
(pyreduce.manyvalues.reduce_axes_finished, the finishing kernel of
pyreduce.finishing): Numba device arrays in the simulator against NumPy, for
every structured reduction, every kind of axis, keepdims, out= and dtype=,
ddof, empty and all-NaN lanes (NumPy's warnings once, its ValueError), and
every input dtype; and that no accumulator comes back to the host on the way.

On a GPU machine (``NUMBA_ENABLE_CUDASIM=0``) the simulator's tests skip and
the ``gpu`` test at the end makes the same checks for CuPy, PyTorch and Numba
arrays on the ``cuda`` backend."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from pyreduce import backends, structured
from pyreduce.backends.base import GeneratedBackend
from pyreduce.backends.numba_cuda import CudaBackend
from pyreduce.dtypes import default_accumulator

from conftest import examples
from oracles import on

NAMES = ["mean", "var", "std", "nanmean", "nanvar", "nanstd", "argmax", "argmin", "ptp",
         "minmax", "nanargmax", "nanargmin"]
MOMENTS = {"mean", "var", "std", "nanmean", "nanvar", "nanstd"}
WITH_DDOF = {"var", "std", "nanvar", "nanstd"}
DTYPES = [np.float16, np.float32, np.float64, np.int16, np.uint8, np.int64, np.complex64,
          np.complex128, np.bool_]
#: shapes and the axes drawn for them: the first, the last (as -1), the middle
SHAPES = [(7,), (5, 33), (3, 9, 4)]


def _cuda():
    if "sim" not in backends.available():
        pytest.skip("the simulator is not enabled")
    from numba import cuda

    return cuda


def _data(shape, dtype, seed, nan_share=0.1):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, shape).astype(np.float64)  # small values: ties
    dt = np.dtype(dtype)
    if dt.kind in "fc":
        x[rng.random(shape) < nan_share] = np.nan
    if dt.kind == "c":
        x = x + 1j * rng.integers(-2, 3, shape)
    if dt.kind == "u":
        x = np.abs(x) * 40  # 0..120: ptp's differences stay in range, sums do not wrap
    return x.astype(dtype)


def _numpy(name, x, **kw):
    """NumPy's result, the statistics computed from float64 (complex128) values
    as pyreduce's float64 accumulators do."""
    if name in MOMENTS:
        x = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    if name == "minmax":
        return np.min(x, **kw), np.max(x, **kw)
    return getattr(np, name)(x, **kw)


def _host(r) -> np.ndarray:
    """A device result on the host: CuPy's, PyTorch's or Numba's."""
    if hasattr(r, "copy_to_host"):
        return r.copy_to_host()
    if hasattr(r, "get"):
        return r.get()
    return r.cpu().numpy()


def _library(r) -> str:
    return type(r).__module__.split(".")[0]


def _close(got, want, dtype):
    got = _host(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.dtype.kind in "iub":
        assert np.array_equal(got, want), (got, want)
        return
    tol = {np.dtype(np.float16): 1e-3}.get(np.dtype(dtype), 1e-5)
    assert np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True), (got, want)


def _result_dtype(name, dtype, given=None) -> np.dtype:
    """pyreduce's documented result dtype (docs/semantics.md): NumPy's, except
    that half precision gives float32."""
    if given is not None:
        return np.dtype(given)
    if name in ("mean", "nanmean"):
        return structured.mean_dtype(dtype)
    if name in MOMENTS:
        return structured.var_dtype(dtype)
    if name in ("minmax", "ptp"):
        return default_accumulator(np.dtype(dtype))
    return np.dtype(np.intp)


def _call(name, d, backend, **kw):
    """``pyreduce.<name>`` on ``backend``: its result or its ValueError, and the
    RuntimeWarnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = getattr(pyreduce, name)(d, **on(backend), **kw)
        except ValueError as e:
            got = e
    return got, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def _expected(name, x, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            want = _numpy(name, x, **kw)
        except ValueError as e:
            want = e
    return want, {str(w.message).rstrip(".") for w in caught if "slice" in str(w.message)}


def _check(name, x, d, backend="sim", device_result=None, **kw):
    """``pyreduce.<name>(d, **kw)`` of the device array ``d`` (``x`` on the host)
    is NumPy's: values, dtype, warnings, error; an array of ``d``'s library."""
    asked = {} if device_result is None else {"device_result": device_result}
    got, warned = _call(name, d, backend, **kw, **asked)
    want, numpy_warned = _expected(name, x, **kw)
    if isinstance(want, ValueError):
        assert isinstance(got, ValueError) and str(got) == str(want), (got, want)
        return
    assert not isinstance(got, ValueError), got
    # NumPy's warnings, each once for the whole call (NumPy's nanvar ends in a full stop)
    assert set(warned) == numpy_warned and len(warned) == len(numpy_warned), (warned,
                                                                              numpy_warned)
    parts, wants = (got, want) if name == "minmax" else ((got,), (want,))
    for part, w in zip(parts, wants):
        assert _library(part) == _library(d), type(part)  # CuPy in, CuPy out
        if name == "minmax" and x.dtype.kind == "c":  # NumPy's NaN pick differs
            continue
        assert _host(part).dtype == _result_dtype(name, x.dtype, kw.get("dtype"))
        _close(part, w, x.dtype)


@pytest.mark.sim
@settings(max_examples=examples(10), deadline=None)
@given(shape=st.sampled_from(SHAPES), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 2**31), data=st.data())
def test_every_structured_reduction_of_a_device_array_as_numpy(shape, dtype, seed, data):
    cuda = _cuda()
    x = _data(shape, dtype, seed)
    d = cuda.to_device(x)
    axis = data.draw(st.sampled_from(sorted({0, -1, len(shape) // 2})), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    if len(shape) == 1:  # one value: not this path, but the same answers
        keepdims = True
    ddof = data.draw(st.integers(0, 2), label="ddof")
    for name in NAMES:
        if name == "ptp" and np.dtype(dtype) == np.bool_:
            continue
        kw = {"axis": axis, "keepdims": keepdims}
        if name in WITH_DDOF:
            kw["ddof"] = ddof
        _check(name, x, d, **kw)


@pytest.mark.sim
@pytest.mark.parametrize("name", sorted(MOMENTS))
def test_empty_lanes_warn_once(name):
    """All-NaN lanes (the nan statistics: the flag comes back), ddof >= n (var,
    std: known from the lane length) and lanes of no elements (the host path)."""
    cuda = _cuda()
    x = _data((4, 6), np.float64, 1)
    x[1] = np.nan
    x[3, 2:] = np.nan
    d = cuda.to_device(x)
    for kw in ({"axis": 1}, {"axis": 0}, {"axis": 1, "ddof": 6}, {"axis": -1, "ddof": 5}):
        if "ddof" in kw and name not in WITH_DDOF:
            continue
        _check(name, x, d, **kw)
    empty = np.empty((3, 0))
    _check(name, empty, cuda.to_device(empty), axis=1)


@pytest.mark.sim
@pytest.mark.parametrize("name", ["nanargmax", "nanargmin"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_all_nan_lanes_raise(name, dtype):
    cuda = _cuda()
    x = _data((3, 5), dtype, 2, nan_share=0)
    d = cuda.to_device(x)
    _check(name, x, d, axis=1)
    x[2] = np.nan
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        getattr(pyreduce, name)(cuda.to_device(x), axis=1, **on("sim"))


@pytest.mark.sim
def test_device_out_and_dtype():
    cuda = _cuda()
    x = _data((6, 5, 7), np.float32, 3, nan_share=0)
    d = cuda.to_device(x)
    wide = x.astype(np.float64)
    out = cuda.device_array((6, 7), np.float64)
    got = pyreduce.mean(d, axis=1, dtype=np.float64, out=out, **on("sim"))
    assert got is out
    # finished in float64 (tests/test_finish_dtype.py), not a float32 mean cast
    assert np.allclose(out.copy_to_host(), wide.mean(1), rtol=1e-13, atol=0)
    out = cuda.device_array((6, 1, 7), np.float32)
    assert pyreduce.std(d, axis=1, ddof=1, keepdims=True, out=out, **on("sim")) is out
    assert np.allclose(out.copy_to_host(), np.std(wide, axis=1, ddof=1, keepdims=True))
    lo, hi = cuda.device_array(7, np.float32), cuda.device_array(7, np.float32)
    got = pyreduce.minmax(d[0], axis=0, out=(lo, hi), **on("sim"))
    assert got[0] is lo and got[1] is hi
    assert np.array_equal(lo.copy_to_host(), x[0].min(0))
    assert np.array_equal(hi.copy_to_host(), x[0].max(0))
    ix = cuda.device_array(6, np.intp)
    assert pyreduce.argmin(d[:, 0, :], axis=1, out=ix, **on("sim")) is ix
    assert np.array_equal(ix.copy_to_host(), x[:, 0, :].argmin(1))
    # a complex mean as complex128; as int (cast on the host, then placed)
    z = _data((4, 9), np.complex64, 4, nan_share=0)
    got = pyreduce.mean(cuda.to_device(z), axis=0, dtype=np.complex128, **on("sim"))
    assert got.dtype == np.complex128
    assert np.allclose(got.copy_to_host(), z.astype(np.complex128).mean(0), rtol=1e-6)
    got = pyreduce.mean(d, axis=2, dtype=np.int32, **on("sim"))
    assert hasattr(got, "copy_to_host") and got.dtype == np.int32
    assert np.array_equal(got.copy_to_host(), wide.mean(2).astype(np.float32).astype(np.int32))
    with pytest.raises(TypeError, match="out= has dtype"):
        pyreduce.var(d, axis=0, out=cuda.device_array((5, 7), np.float64), **on("sim"))
    with pytest.raises(ValueError, match="out= has shape"):
        pyreduce.var(d, axis=0, out=cuda.device_array((5, 6), np.float32), **on("sim"))
    with pytest.raises(ValueError, match="tuple of 2 arrays"):
        pyreduce.minmax(d, axis=0, out=lo, **on("sim"))


@pytest.mark.sim
def test_device_result_of_a_host_input():
    """``device_result=True`` for a NumPy input: finished on the device too."""
    _cuda()
    x = _data((5, 8), np.float64, 5)
    got = pyreduce.nanvar(x, axis=1, ddof=1, device_result=True, **on("sim"))
    assert hasattr(got, "copy_to_host")
    assert np.allclose(got.copy_to_host(), np.nanvar(x, axis=1, ddof=1), equal_nan=True)


@pytest.fixture
def reads(monkeypatch):
    """Every device buffer the backends read back: ``(dtype, count)``."""
    seen = []
    real = {cls: cls.read_array for cls in (GeneratedBackend, CudaBackend)}

    def counting(self, buf, count, stream):
        seen.append((np.dtype(buf.dtype), count))
        found = CudaBackend if isinstance(self, CudaBackend) else GeneratedBackend
        return real[found](self, buf, count, stream)

    monkeypatch.setattr(GeneratedBackend, "read_array", counting)
    monkeypatch.setattr(CudaBackend, "read_array", counting)
    return seen


@pytest.mark.sim
@pytest.mark.parametrize("name", NAMES)
def test_no_accumulator_comes_back(name, reads):
    """The records stay on the device: nothing is read back but the flag of
    the NaN-ignoring statistics (4 bytes), and for the others nothing at all.
    Host results (a NumPy input) still read the records back, as they did."""
    cuda = _cuda()
    x = _data((4, 40), np.float32, 6, nan_share=0.2)
    got = getattr(pyreduce, name)(cuda.to_device(x), axis=1, **on("sim"))
    assert all(hasattr(g, "copy_to_host") for g in (got if name == "minmax" else (got,)))
    assert not [r for r in reads if r[0].names is not None], reads
    counted = name.startswith("nan")
    assert reads == ([(np.dtype(np.int32), 1)] if counted else []), reads
    reads.clear()
    getattr(pyreduce, name)(x, axis=1, **on("sim"))
    assert [r for r in reads if r[0].names is not None]


@pytest.mark.sim
@pytest.mark.parametrize("name", NAMES)
def test_one_value_finished_on_the_device(name, reads):
    """A reduction to one value whose result goes to the device
    (``device_result=True``, ``keepdims``) is finished there too, after the whole
    input's 1-D plan: NumPy's value, dtype and shape, and nothing read back but
    the NaN statistics' flag; ``dtype=`` a float the kernel stores as NumPy casts."""
    cuda = _cuda()
    x = _data((3, 700), np.float32, 8, nan_share=0.05)
    d = cuda.to_device(x)
    every = {"axis": None if name in ("argmax", "argmin", "nanargmax", "nanargmin")
             else (0, 1), "keepdims": True}
    for kw in ({"device_result": True}, {"keepdims": True}, every):
        reads.clear()
        _check(name, x, d, **kw)
        got = getattr(pyreduce, name)(d, **kw, **on("sim"))
        for g in (got if name == "minmax" else (got,)):
            assert hasattr(g, "copy_to_host") and g.shape == ((1, 1) if "keepdims" in kw else ())
        assert not [r for r in reads if r[0].names is not None], reads
        assert reads == ([(np.dtype(np.int32), 1)] * 2 if name.startswith("nan") else []), reads
    if name in MOMENTS:
        got = getattr(pyreduce, name)(d, dtype=np.float64, device_result=True, **on("sim"))
        assert got.dtype == np.float64
        assert np.allclose(got.copy_to_host(), _numpy(name, x), equal_nan=True)


@pytest.fixture
def values_read(monkeypatch):
    """The dtypes of the values read back one at a time (``read_value``)."""
    seen = []
    real = {cls: cls.read_value for cls in (GeneratedBackend, CudaBackend)}

    def counting(self, buf, stream):
        seen.append(np.dtype(buf.dtype))
        found = CudaBackend if isinstance(self, CudaBackend) else GeneratedBackend
        return real[found](self, buf, stream)

    monkeypatch.setattr(GeneratedBackend, "read_value", counting)
    monkeypatch.setattr(CudaBackend, "read_value", counting)
    return seen


@pytest.mark.sim
@pytest.mark.parametrize("name", NAMES)
def test_a_device_inputs_host_value_is_finished_on_the_device(name, values_read, reads):
    """A device input's one value on the host (``device_result=False``, or a
    Numba array's by default) is finished on the device too and read back, the
    first call and its repeats: NumPy's value as a NumPy scalar of the
    documented dtype, NumPy's warning once a call (``ddof`` past the count),
    its ValueError (an all-NaN nanargmax). No accumulator comes back, but
    minmax's (two values) and the NaN statistics' (whose flag would be a second
    read): those are finished on the host."""
    cuda = _cuda()
    x = _data((900,), np.float32, 9, nan_share=0.05)
    cases = [(x, {})]
    if name in WITH_DDOF:
        cases.append((x, {"ddof": x.size}))
    if name.startswith("nanarg"):
        cases.append((np.full(40, np.nan, np.float32), {}))
    for data, kw in cases:
        d = cuda.to_device(data)
        want, numpy_warned = _expected(name, data, **kw)
        for asked in ({"device_result": False}, {}, {"device_result": False}):
            values_read.clear()
            reads.clear()
            got, warned = _call(name, d, "sim", **kw, **asked)
            records = [dt for dt in values_read + [r[0] for r in reads] if dt.names is not None]
            assert bool(records) == (name == "minmax" or name.startswith("nan")), records
            if isinstance(want, ValueError):
                assert isinstance(got, ValueError) and str(got) == str(want), got
                continue
            assert set(warned) == numpy_warned and len(warned) == len(numpy_warned), warned
            for part, w in zip(*((got, want) if name == "minmax" else ((got,), (want,)))):
                assert isinstance(part, np.generic), type(part)
                assert part.dtype == _result_dtype(name, data.dtype), part.dtype
                if part.dtype.kind in "iub":
                    assert part == w, (part, w)
                else:
                    assert np.allclose(part, w, rtol=1e-5, atol=1e-5, equal_nan=True), (part, w)


@pytest.mark.sim
@pytest.mark.parametrize("name", ["mean", "argmax", "minmax", "nanmean", "nanvar"])
def test_a_host_value_repeat_runs_one_remembered_call(name, monkeypatch):
    """A device input's host value after a device result of the same shape runs
    one remembered call and views the input once: a value finished on the device
    (mean) by its runner, one finished on the host (minmax's pair, the NaN
    statistics) without trying the device-finished runner first."""
    from pyreduce import callmemo

    cuda = _cuda()
    runs, flats = [], []
    real_run, real_flat = callmemo.run, GeneratedBackend.flat_input

    def run(*args):
        found = real_run(*args)
        runs.append(found is not callmemo.MISS)
        return found

    def flat_input(self, info, stream):
        flats.append(info.shape)
        return real_flat(self, info, stream)

    monkeypatch.setattr(callmemo, "run", run)
    monkeypatch.setattr(GeneratedBackend, "flat_input", flat_input)
    x = _data((900,), np.float32, 11, nan_share=0.05 if name.startswith("nan") else 0)
    d = cuda.to_device(x)
    want, _ = _expected(name, x)
    fn = getattr(pyreduce, name)
    fn(d, device_result=True)
    for _ in range(2):
        fn(d, device_result=False)  # the first one remembers its own runner
    runs.clear()
    flats.clear()
    got = fn(d, device_result=False)
    assert runs == [True], runs
    assert len(flats) == 1, flats
    for part, w in zip(*((got, want) if name == "minmax" else ((got,), (want,)))):
        assert np.allclose(part, w, rtol=1e-5, atol=1e-5), (part, w)


@pytest.mark.sim
@pytest.mark.parametrize("variant", ["last_block", "warp_shuffle", "last_block_x2"])
def test_the_last_launch_finishes_the_one_value(variant, monkeypatch):
    """A one value whose flag does not depend on the data is finished by the
    kernel that writes it (``KernelSpec.finisher``): no finishing kernel is
    launched, for one launch (last_block) or two (warp_shuffle), at every
    ddof and for minmax's two results; the NaN statistics, whose flag comes
    back, use the finishing kernel. Each gets NumPy's value. (Every variant
    that holds tuple accumulators is of the warp-shuffle factory, which finishes.)"""
    cuda = _cuda()
    finishing = []
    real = GeneratedBackend.finish
    monkeypatch.setattr(GeneratedBackend, "finish",
                        lambda self, *a, **k: finishing.append(1) or real(self, *a, **k))
    x = _data((3, 700), np.float32, 11, nan_share=0)
    d = cuda.to_device(x)
    kw = on("sim", device_result=True)
    kw["tuning"] = kw["tuning"].replace(variant=variant)
    for name in ["mean", "var", "std", "argmax", "argmin", "ptp", "minmax", "nanmean"]:
        for ddof in ((0, 1, 2.5) if name in WITH_DDOF else (None,)):
            finishing.clear()
            more = {} if ddof is None else {"ddof": ddof}
            got = getattr(pyreduce, name)(d, **more, **kw)
            want = _numpy(name, x, **more)
            if name == "minmax":
                assert [g.shape for g in got] == [(), ()]
                got = tuple(g.copy_to_host() for g in got)
            else:
                got = got.copy_to_host()
            assert np.allclose(got, want, rtol=1e-5), (name, ddof, got, want)
            assert finishing == ([1] if name == "nanmean" else []), (name, finishing)


@pytest.mark.sim
@pytest.mark.parametrize("shape,axis,kernel", [
    ((40, 7), 1, "staged"), ((9, 300), 1, "warp"), ((2, 3000), 1, "block"),
    ((3, 20, 6), 1, "lanes"), ((300, 3), 0, "narrow"), ((4, 40), 0, "columns"),
    ((600, 140), 0, "columns split"), ((1000, 5), 0, "narrow split"),
    ((1000, 40), 0, "narrow split"),  # under a warp's loads: narrow, though a warp wide
])
def test_the_kernel_that_writes_the_outputs_finishes_them(shape, axis, kernel, monkeypatch):
    """Along axes, a rows or columns plan's kernel that writes the outputs
    finishes them (``BatchSpec.finisher``, one result each): no finishing
    kernel for mean, var, std (every ddof), argmax, argmin and ptp, with a
    split plan's second pass finishing; minmax's two results and the NaN
    statistics (whose flag comes back) keep it. Each gets NumPy's values, and
    a ddof past a lane's length its warning and NaN."""
    cuda = _cuda()
    finishing = []
    real = GeneratedBackend.finish
    monkeypatch.setattr(GeneratedBackend, "finish",
                        lambda self, *a, **k: finishing.append(1) or real(self, *a, **k))
    x = _data(shape, np.float32, 12, nan_share=0)
    d = cuda.to_device(x)
    kw = on("sim", axis=axis)
    e = pyreduce.explain(d, "add", **kw).plan
    group = (("narrow" if e.spec.narrow else "columns") if e.kind == "columns"
             else e.spec.group) + (" split" if e.parts > 1 and e.kind == "columns" else "")
    assert group == kernel, e.spec.label
    for name in ["mean", "var", "std", "argmax", "argmin", "ptp", "minmax", "nanmean"]:
        for ddof in ((0, 1, 2.5) if name in WITH_DDOF else (None,)):
            finishing.clear()
            more = {} if ddof is None else {"ddof": ddof}
            got = getattr(pyreduce, name)(d, **more, **kw)
            got = tuple(g.copy_to_host() for g in got) if name == "minmax" else \
                got.copy_to_host()
            want = _numpy(name, x, axis=axis, **more)
            assert np.allclose(got, want, rtol=1e-5), (name, ddof, got, want)
            keeps = name in ("minmax", "nanmean")
            assert finishing == ([1] if keeps else []), (name, finishing)
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
        got = pyreduce.var(d, ddof=shape[axis], **kw).copy_to_host()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _numpy("var", x, axis=axis, ddof=shape[axis])
    assert np.isinf(want).any()
    np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.sim
def test_an_infinite_or_nan_ddof_is_finished_as_numpy_divides(monkeypatch):
    """A ddof the kernel cannot hold as a literal (inf, -inf, NaN) goes to the
    finishing kernel, whose argument it is: NumPy's value (inf, 0, NaN), with
    its warning where no degrees of freedom are left (inf), on the device and
    on the host."""
    cuda = _cuda()
    x = _data((500,), np.float64, 12, nan_share=0)
    d = cuda.to_device(x)
    for ddof in (np.inf, -np.inf, np.nan):
        with warnings.catch_warnings(record=True) as numpy_warned:
            warnings.simplefilter("always")
            want = np.var(x, ddof=ddof)
        expected = any("Degrees of freedom" in str(w.message) for w in numpy_warned)
        for got in (lambda ddof=ddof: pyreduce.var(d, ddof=ddof, device_result=True,
                                                   **on("sim")).copy_to_host(),
                    lambda ddof=ddof: pyreduce.var(x, ddof=ddof, **on("cpu"))):
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                value = got()
            assert value == want or (np.isnan(value) and np.isnan(want)), (ddof, value, want)
            said = any("Degrees of freedom" in str(w.message) for w in warned)
            assert said == expected, (ddof, warned)


@pytest.mark.sim
def test_a_plain_call_goes_straight_to_its_repeat(monkeypatch):
    """A structured call with no keyword but ``device_result`` finds its
    remembered decisions without the full path's checks
    (:func:`pyreduce.along.repeat_shape`): each new array's own value, NumPy's
    warning on every call that earns one, and a bad keyword still refused."""
    from pyreduce import along

    cuda = _cuda()
    hits, real = [0], along.repeat_shape
    monkeypatch.setattr(along, "repeat_shape",
                        lambda *a: hits.__setitem__(0, hits[0] + 1) or real(*a))
    rng = np.random.default_rng(13)
    for _ in range(3):
        x = rng.standard_normal(300)
        d = cuda.to_device(x)
        assert np.isclose(pyreduce.var(d, device_result=True).copy_to_host(), x.var())
        assert int(pyreduce.argmax(d, device_result=True).copy_to_host()) == x.argmax()
        lo, hi = pyreduce.minmax(d, device_result=True)
        assert (lo.copy_to_host(), hi.copy_to_host()) == (x.min(), x.max())
    assert hits[0] == 9  # every call asks; the first of each shape then takes the full path
    one = cuda.to_device(np.ones(1))
    for _ in range(2):
        with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
            pyreduce.var(one, ddof=1, device_result=True)
    with pytest.raises(TypeError, match="device_result"):
        pyreduce.mean(d, device_result="yes")
    with pytest.raises(TypeError, match="axis"):
        pyreduce.argmax(d, axis=1.5)


@pytest.mark.parametrize("backend", ["sim", "cuda"])
def test_the_flag_is_zeroed_for_every_call(backend):
    """The NaN statistics' flag (kept per thread on a GPU) says what this call
    found: an all-NaN call warns or raises, the next one with a number does not,
    whole or along an axis."""
    if backend not in backends.available():
        pytest.skip(f"backend {backend} not available in this process")
    from numba import cuda

    empty, full = np.full(300, np.nan), np.r_[np.full(299, np.nan), 2.0]
    kw = on(backend, device_result=True)
    for _ in range(2):
        with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
            pyreduce.nanmean(cuda.to_device(empty), **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert pyreduce.nanmean(cuda.to_device(full), **kw).copy_to_host() == 2.0
            got = pyreduce.nanmean(cuda.to_device(np.stack([full, full])), axis=1, **on(backend))
            assert (got.copy_to_host() == 2.0).all()
        with pytest.raises(ValueError):
            pyreduce.nanargmax(cuda.to_device(empty), **kw)
        assert int(pyreduce.nanargmax(cuda.to_device(full), **kw).copy_to_host()) == 299


@pytest.mark.sim
def test_a_host_input_to_a_device_result_is_uploaded_once(monkeypatch):
    """Regression: a NumPy input's one value asked for on the device was
    uploaded by the preparation and again by the launch."""
    from pyreduce.backends import staging

    _cuda()
    sizes, real = [], staging.upload
    monkeypatch.setattr(staging, "upload", lambda be, x: sizes.append(x.nbytes) or real(be, x))
    x = _data((40_000,), np.float64, 10, nan_share=0)
    got = pyreduce.mean(x, device_result=True, **on("sim"))
    assert np.isclose(got.copy_to_host(), x.mean())
    assert sizes == [x.nbytes]
    sizes.clear()  # a dtype= the finishing kernel leaves to the host: uploaded once too
    got = pyreduce.mean(x, device_result=True, dtype=np.int32, **on("sim"))
    assert int(got.copy_to_host()) == int(x.mean()) and len(sizes) <= 1, sizes


@pytest.mark.sim
def test_a_repeated_one_value_call_takes_its_remembered_decisions(monkeypatch):
    """The second call of a call shape goes straight to its launches (no
    prepare); a new shape, dtype= or tuning prepares again, and each gets its
    own right answer."""
    from pyreduce import along

    cuda = _cuda()
    prepared = []
    real = along.prepare
    monkeypatch.setattr(along, "prepare", lambda *a, **k: prepared.append(1) or real(*a, **k))
    x = _data((600,), np.float64, 9, nan_share=0)
    d = cuda.to_device(x)
    for _ in range(3):
        assert np.isclose(pyreduce.var(d, device_result=True, **on("sim")).copy_to_host(),
                          x.var())
    assert len(prepared) == 1
    y = cuda.to_device(x[:599])
    assert np.isclose(pyreduce.var(y, device_result=True, **on("sim")).copy_to_host(),
                      x[:599].var())
    got = pyreduce.var(d, device_result=True, dtype=np.float32, **on("sim")).copy_to_host()
    assert got.dtype == np.float32 and np.isclose(got, x.var())
    other = on("sim")
    other["tuning"] = other["tuning"].replace(block_size=2 * other["tuning"].block_size)
    got = pyreduce.var(d, device_result=True, **other).copy_to_host()
    assert np.isclose(got, x.var())
    assert len(prepared) == 4


@pytest.mark.parametrize("dialect", [None, "cuda", "sim", "hip"])
@pytest.mark.parametrize("outputs,flagged", [(1, False), (1, True), (2, False)])
def test_the_finishing_source_in_every_dialect(dialect, outputs, flagged):
    """One source for the host's loop and the kernels of every dialect: valid
    Python with the documented parameters."""
    from pyreduce import dialect as dialects
    from pyreduce.finishing import finish_source

    d = {"cuda": dialects.CUDA, "sim": dialects.SIM, "hip": dialects.HIP}.get(dialect)
    name, source = finish_source(3, outputs, flagged, d)
    compile(source, name, "exec")
    params = ["acc"] + [f"out{k}" for k in range(outputs)] + ["flags"] * flagged + ["ddof"]
    assert f"def {name}({', '.join(params)}):" in source
    assert ("acc[i]['f2']" in source) and ("flags[0] = 1" in source) == flagged
    with pytest.raises(ValueError):
        finish_source(3, 3, False, d)


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning")
@pytest.mark.parametrize("kind", ["cupy", "torch", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_on_a_gpu(kind, dtype, reads):
    """The checks above on a real GPU, for the three libraries' arrays: every
    reduction, axis and keepdims, results of the input's library, nothing but
    the 4-byte flag read back."""
    if "cuda" not in backends.available():
        pytest.skip("no CUDA GPU in this process")
    x = _data((6, 37, 5), dtype, 7)
    x[0, :, 1] = np.nan if x.dtype.kind in "fc" else x[0, :, 1]
    if kind == "numba":
        from numba import cuda

        d = cuda.to_device(x)
    elif kind == "cupy":
        d = pytest.importorskip("cupy").asarray(x)
    else:
        d = pytest.importorskip("torch").from_numpy(x).cuda()
    for name in NAMES:
        if name == "ptp" and np.dtype(dtype) == np.bool_:
            continue
        for axis in (0, 1, -1):
            for keepdims in (False, True):
                kw = {"axis": axis, "keepdims": keepdims}
                if name in WITH_DDOF:
                    kw["ddof"] = 1
                _check(name, x, d, "cuda", **kw)
    assert not [r for r in reads if r[0].names is not None], reads
    assert {r for r in reads} <= {(np.dtype(np.int32), 1)}, reads
