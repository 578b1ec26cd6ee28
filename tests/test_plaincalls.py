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
def stands(monkeypatch):
    """Stand-ins read as CuPy arrays; ``inspects[0]`` counts the full path's
    inspections, ``runs`` the (call shape name, address) of every remembered
    run; the memos are emptied before and after."""
    monkeypatch.setitem(interop._READERS, Stand, (_read, "cupy"))
    inspects, runs = [0], []
    real = interop.inspect

    def counting(*a, **k):
        inspects[0] += 1
        return real(*a, **k)

    for module in (named, stats):
        monkeypatch.setattr(module, "inspect", counting)
    pyreduce.cache_clear()
    yield inspects, runs
    pyreduce.cache_clear()


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
