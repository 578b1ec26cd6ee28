"""A plain repeat found by its array's attributes (pyreduce.plaincalls): each
call runs the remembered decisions of its own call shape, every attribute of
the array and the statistic's ddof count, a call with any other keyword takes
the full path, and forgetting the repeats forgets these too.

The arrays here are stand-ins for a device library's (their reader gives an
address, shape, strides, dtype and stream, as CuPy's does) and the remembered
decisions are stand-ins that say which call shape ran, so that the lookup is
tested without a GPU; ``tests/test_gpu.py`` runs it on CuPy and PyTorch arrays."""

from __future__ import annotations

import numpy as np
import pytest

import pyreduce
from pyreduce import along, callmemo, interop, named, plaincalls, stats, structured
from pyreduce.interop import DeviceFields
from pyreduce.ops import sum_dtype
from pyreduce.tuning_keywords import DEFAULT


class Stand:
    """A device array's stand-in: the attributes its reader reads."""

    def __init__(self, n=1000, dtype=np.float32, strides=None, stream=1, ptr=1 << 20, device=0):
        self.ptr, self.shape, self.dtype = ptr, (n,), np.dtype(dtype)
        self.strides, self.stream, self.device = strides, stream, device


def _read(x):
    return DeviceFields(x.ptr, x.shape, x.strides, x.dtype, x.stream, x.device)


@pytest.fixture
def host_inspects(monkeypatch):
    """The full path's inspections of the named and structured reductions,
    counted (``inspects[0]``); the memos emptied before and after."""
    inspects = [0]
    real = interop.inspect

    def counting(*a, **k):
        inspects[0] += 1
        return real(*a, **k)

    for module in (named, stats):
        monkeypatch.setattr(module, "inspect", counting)
    pyreduce.cache_clear()
    yield inspects
    pyreduce.cache_clear()


@pytest.fixture
def stands(monkeypatch, host_inspects):
    """Stand-ins read as CuPy arrays; ``inspects[0]`` counts the full path's
    inspections (:func:`host_inspects`), ``runs`` the (call shape name, address)
    of every remembered run."""
    monkeypatch.setitem(interop._READERS, Stand, (_read, "cupy"))
    return host_inspects, []


def remember(runs, label, x, name="sum", ddof=0, device_result=None):
    """Remember a stand-in decision for the call shape of ``name`` of ``x``,
    which records ``label`` and the input's address when it runs."""
    info = interop.inspect(x, masked=True)

    def runner(info, dr):
        runs.append((label, info.fields.ptr, dr))
        return label

    if name == "sum":
        k = callmemo.key(info, "add", None, None, sum_dtype(info.dtype), "auto", None)
        op = "add"
    else:
        op = structured.moments_monoid(info.dtype, name, ddof)
        k = along.repeat_shape(info, op, DEFAULT)
    callmemo.remember_runner(k, runner, op)


def test_a_repeat_takes_the_call_shape_its_attributes_were_seen_with(stands):
    inspects, runs = stands
    a, b = Stand(), Stand(n=1001)
    remember(runs, "a", a)
    remember(runs, "b", b)
    for x, label in ((a, "a"), (b, "b"), (a, "a"), (b, "b")):
        assert pyreduce.sum(x) == label
    assert inspects[0] == 2  # the first call of each shape: the full path, which tells
    c = Stand(ptr=1 << 24)  # another array of a's shape: a's decisions, its own address
    assert pyreduce.sum(c) == "a" and runs[-1] == ("a", 1 << 24, None)
    assert inspects[0] == 2


@pytest.mark.parametrize("change", ["dtype", "strides", "stream", "device", "device_result"])
def test_every_attribute_counts(stands, change):
    inspects, runs = stands
    a = Stand(dtype=np.float64, strides=(8,))
    b = {"dtype": Stand(dtype=np.int64, strides=(8,)), "strides": Stand(dtype=np.float64),
         "stream": Stand(dtype=np.float64, strides=(8,), stream=7),
         "device": Stand(dtype=np.float64, strides=(8,), device=1),
         "device_result": a}[change]
    remember(runs, "a", a)
    if change != "device_result":
        remember(runs, "b", b)
    kw = {"device_result": True} if change == "device_result" else {}
    for _ in range(3):
        assert pyreduce.sum(a) == "a"
        assert pyreduce.sum(b, **kw) == ("a" if change == "device_result" else "b")
    assert inspects[0] == 2
    assert [dr for *_, dr in runs] == [None, kw.get("device_result")] * 3


def test_the_statistics_and_their_ddof_count(stands):
    inspects, runs = stands
    x = Stand()
    remember(runs, "mean", x, "mean")
    remember(runs, "var", x, "var")
    remember(runs, "var ddof=1", x, "var", ddof=1)
    for _ in range(3):
        assert pyreduce.mean(x) == "mean"
        assert pyreduce.var(x) == "var"
        assert pyreduce.var(x, ddof=1) == "var ddof=1"
        assert pyreduce.var(x, correction=1) == "var ddof=1"
    assert inspects[0] == 3  # correction=1 is ddof=1: its call shape from the first call


@pytest.mark.parametrize("more", [{"axis": 0}, {"keepdims": True}, {"deterministic": True},
                                  {"backend": "auto"}, {"device_result": np.True_},
                                  {"initial": 0}, {"dtype": np.float32}])
def test_any_other_argument_takes_the_full_path(stands, more):
    inspects, runs = stands
    x = Stand()
    remember(runs, "a", x)
    assert pyreduce.sum(x) == "a"
    seen = inspects[0]
    try:
        pyreduce.sum(x, **more)
    except Exception:  # the stand-in cannot run the full path's own decisions
        pass
    assert inspects[0] == seen + 1
    assert len(plaincalls._SHAPES) == 1  # the bare call's only


def test_forgotten_repeats_take_the_full_path_and_are_learnt_again(stands):
    inspects, runs = stands
    x = Stand()
    remember(runs, "a", x)
    assert pyreduce.sum(x) == "a" and pyreduce.sum(x) == "a"
    assert inspects[0] == 1
    callmemo.clear()  # the decisions gone, the call shape still known here: a miss
    remember(runs, "again", x)
    assert pyreduce.sum(x) == "again" and inspects[0] == 1
    pyreduce.cache_clear()
    assert len(plaincalls._SHAPES) == 0


def test_host_inputs_and_bad_device_results(stands):
    inspects, runs = stands
    h = np.arange(10.0)
    assert plaincalls.run(("sum", "add"), h, None) is callmemo.MISS
    assert pyreduce.sum(h, backend="cpu") == 45.0
    x = Stand()
    remember(runs, "a", x)
    pyreduce.sum(x)
    with pytest.raises(TypeError, match="device_result"):
        pyreduce.sum(x, device_result="yes")
    with pytest.raises(TypeError, match="device_result"):
        pyreduce.mean(x, device_result=1)


def test_the_memo_keeps_at_most_its_bound(stands, monkeypatch):
    inspects, runs = stands
    monkeypatch.setattr(plaincalls._SHAPES, "maxsize", 3)
    xs = [Stand(n=100 + i) for i in range(6)]
    for i, x in enumerate(xs):
        remember(runs, i, x)
        assert pyreduce.sum(x) == i
    assert len(plaincalls._SHAPES) == 3
    assert [pyreduce.sum(x) for x in xs] == list(range(6))  # the dropped ones: full path


def test_other_producers_are_read_once_a_call(stands, monkeypatch):
    """An array of a kind outside plaincalls.KINDS (the CUDA Array Interface's,
    DLPack's, whose export has a cost) is read by the full path alone."""
    inspects, runs = stands
    reads = [0]

    def counted(x):
        reads[0] += 1
        return _read(x)

    monkeypatch.setitem(interop._READERS, Stand, (counted, "cai"))
    x = Stand()
    remember(runs, "a", x)
    reads[0] = 0
    for _ in range(3):
        assert pyreduce.sum(x) == "a"
    assert reads[0] == 3 and inspects[0] == 3
    assert len(plaincalls._SHAPES) == 0


def test_a_nan_ddof_is_not_remembered(stands):
    """A NaN ddof equals no other, so its key would never be found again: such
    calls take the full path without filling the memo."""
    x = Stand()
    for _ in range(3):
        try:
            pyreduce.var(x, ddof=float("nan"))
        except Exception:  # the stand-in cannot run the full path's own decisions
            pass
    assert len(plaincalls._SHAPES) == 0


def test_the_repeat_key_of_a_call_holds_the_inputs_gpu():
    """The call shape of a device input's call (``callmemo.key``) tells apart
    arrays that differ only in the GPU they are on, and keeps one whose
    library does not say."""
    def key(device):
        fields = DeviceFields(1 << 20, (8,), None, np.dtype(np.float32), 1, device)
        info = interop.Input(np.dtype(np.float32), (8,), None, object(), fields, "cupy")
        return callmemo.key(info, "add", None, None, np.dtype(np.float32), "auto", None)

    assert key(0) == key(0) and key(None) == key(None)
    assert len({key(0), key(1), key(None)}) == 3


# --------------------------------------------------------------------------
# NumPy arrays: the same lookup, the cpu backend's remembered fold


def _host_calls(x):
    """Every plain call of a NumPy array with NumPy's value for it (``var`` and
    ``std`` of ddof 0 and 1; the sums as NumPy sums them, bit for bit)."""
    return [
        (lambda v: pyreduce.sum(v), lambda v: np.add.reduce(v, axis=None)),
        (lambda v: pyreduce.max(v), np.max),
        (lambda v: pyreduce.nansum(v), np.nansum),
        (lambda v: pyreduce.nanprod(v[:1, :4]), lambda v: np.nanprod(v[:1, :4])),
        (lambda v: pyreduce.mean(v), np.mean),
        (lambda v: pyreduce.var(v), np.var),
        (lambda v: pyreduce.var(v, ddof=1), lambda v: np.var(v, ddof=1)),
        (lambda v: pyreduce.std(v, device_result=False), np.std),
        (lambda v: pyreduce.argmax(v), np.argmax),
        (lambda v: pyreduce.argmin(v), np.argmin),
        (lambda v: pyreduce.minmax(v), lambda v: (np.min(v), np.max(v))),
    ]


def _close(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return np.allclose(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_numpy_repeats_are_found_by_the_arrays_attributes(host_inspects, dtype):
    """Each plain call of a NumPy array is inspected once: its repeats of any
    array of the same dtype, shape and strides find its call shape, and each
    gives the new array's own value (NumPy's)."""
    inspects = host_inspects
    rng = np.random.default_rng(7)
    arrays = [(rng.standard_normal((3, 700)) * 100).astype(dtype) for _ in range(3)]
    calls = _host_calls(arrays[0])
    for call, _ in calls:
        call(arrays[0])
    first = inspects[0]
    assert first == len(calls)
    for x in arrays:
        for call, numpy_call in calls:
            assert _close(call(x), numpy_call(x))
    assert inspects[0] == first  # every repeat found by the array's attributes
    s = pyreduce.sum(arrays[1])
    assert s == np.add.reduce(arrays[1], axis=None) and s.dtype == pyreduce.sum(
        arrays[1], backend="cpu").dtype


def test_numpy_attributes_count(host_inspects):
    """Another dtype, shape or strides is another call shape, inspected on its
    first call; a view's repeat reads the view."""
    inspects = host_inspects
    base = np.random.default_rng(3).standard_normal(4000)
    views = [base[:2000], base[:2000].astype(np.float32), base[:1999], base[::2],
             base[::-2], base.reshape(2, 2000)[:, :1000], base.reshape(2000, 2).T]
    for v in views:
        assert _close(pyreduce.sum(v), v.sum()) and _close(pyreduce.argmax(v), v.argmax())
    assert inspects[0] == 2 * len(views)
    for v in views:
        w = v * -1  # same dtype and shape; the strides of a new array
        if w.strides == v.strides:
            assert _close(pyreduce.sum(w), w.sum())
            assert _close(pyreduce.argmax(w), w.argmax())
    assert inspects[0] == 2 * len(views)


def test_numpy_inputs_read_as_copies_or_bits_take_the_full_path(host_inspects):
    """A big-endian array (reduced as a native copy), ml_dtypes' bfloat16 (as
    its bits) and a masked array are inspected on every call and keep their
    values; the user's arrays are not changed."""
    inspects = host_inspects
    big = np.arange(1000, dtype=">f8")
    masked = np.ma.masked_array(np.arange(10.0), mask=[True] + [False] * 9)
    before = big.copy()
    for _ in range(3):
        assert pyreduce.sum(big) == 499500.0 and pyreduce.mean(big) == 499.5
        assert pyreduce.sum(masked) == 45.0 and pyreduce.argmax(masked) == 9
    assert inspects[0] == 12
    assert np.array_equal(big, before) and big.dtype == before.dtype
    ml_dtypes = pytest.importorskip("ml_dtypes")
    b = np.arange(8.0).astype(ml_dtypes.bfloat16)
    for _ in range(3):
        assert pyreduce.sum(b) == 28.0 and pyreduce.max(b) == 7.0


def test_numpy_repeats_split_as_the_full_path_does(host_inspects, monkeypatch):
    """A repeat whose input the cpu backend would now cut over threads (here a
    smaller split) takes the backend's own reduction, which splits it."""
    x = np.random.default_rng(5).standard_normal(5000)
    assert pyreduce.sum(x) == np.add.reduce(x)
    be = pyreduce.backends.get("cpu")
    monkeypatch.setattr(pyreduce.backends.cpu_parallel, "SPLIT_BYTES", 128)
    monkeypatch.setattr(pyreduce.backends.cpu_parallel, "PIECE_BYTES", 64)
    monkeypatch.setattr(be, "threads", 3)
    cut = []
    real = pyreduce.backends.cpu_parallel.pieces
    monkeypatch.setattr(pyreduce.backends.cpu_parallel, "pieces",
                        lambda *a: cut.append(a) or real(*a))
    got = pyreduce.sum(x)
    assert cut and abs(got - np.sum(x)) <= 1e-12 * np.abs(x).sum()
    assert host_inspects[0] == 1  # still the remembered call shape


def test_numpy_repeats_warn_and_refuse_as_the_first_call(host_inspects):
    """NumPy's warnings of a finished value come on every call, repeats too;
    device_result=True is refused by a cpu-only machine on every call."""
    x = np.arange(3.0)
    for _ in range(3):
        with pytest.warns(RuntimeWarning):
            assert np.isinf(pyreduce.var(x, ddof=3))
    if "cuda" not in pyreduce.available() and "hip" not in pyreduce.available():
        for _ in range(2):
            with pytest.raises(ValueError, match="device_result=True"):
                pyreduce.sum(x, device_result=True)


_NAMED = ["sum", "prod", "max", "min", "any", "all", "nansum", "nanmax", "mean", "var",
          "std", "argmax", "argmin", "minmax", "nanmean", "nanargmax", "count_nonzero"]


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int64", "uint64", "float16",
                                   "float32", "float64", "complex64", "complex128"])
def test_a_repeats_value_is_the_first_calls_to_the_bit(host_inspects, dtype):
    """The remembered fold gives what the full path gave the same array: the
    same type, dtype and bits (NaN, -0.0 and wrapped integers included)."""
    rng = np.random.default_rng(11)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        x = rng.random(999) < 0.5
    elif dt.kind in "iu":
        x = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, 999, dtype=dt, endpoint=True)
    else:
        x = (rng.standard_normal(999) * 50).astype(dt)
        x[[3, 500]] = np.nan
        x[7] = -0.0
    for name in _NAMED:
        fn = getattr(pyreduce, name)
        try:
            with np.errstate(all="ignore"):
                first = fn(x)
        except (TypeError, ValueError):  # refused for this dtype: refused again
            with pytest.raises((TypeError, ValueError)):
                fn(x)
            continue
        again = fn(x)  # the remembered fold, where the function has a plain repeat
        for a, b in zip(first if isinstance(first, tuple) else (first,),
                        again if isinstance(again, tuple) else (again,)):
            assert type(a) is type(b) and a.dtype == b.dtype, name
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), (name, a, b)
