"""pyreduce.finishers: each structured monoid's finisher, one scalar function
run three ways (as Python on one accumulator: ``finalize``; compiled in the
host's ``njit`` loop, and as Python for a few lanes: ``Finisher.array``; in the
finishing kernel, here in the simulator), gives for every accumulator of a
record array what ``finalize`` gives one by one (values, dtype, NaN and
infinity rules, warnings once, errors), on accumulators that the monoids' own
host summaries make from random slices, empty and all-NaN ones included. The
finishers against NumPy itself: tests/test_device_finish.py and the
structured tests."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples

from pyreduce import backends, finishers, structured
from pyreduce.dtypes import as_value

#: how an array of accumulators is finished
FORMS = ["python", "compiled", "sim kernel"]


def _finish(form, monoid, records, monkeypatch):
    """``monoid.finisher`` over ``records`` the way ``form`` names."""
    fin = monoid.finisher
    if form != "sim kernel":
        monkeypatch.setattr(finishers, "PYTHON_LANES", 10**9 if form == "python" else -1)
        return fin.array(records)
    if "sim" not in backends.available():
        pytest.skip("the simulator is not enabled")
    from numba import cuda

    be = backends.get("sim")
    n = records.size
    outs = [cuda.device_array(n, fin.dtype) for _ in range(fin.outputs)]
    fin.report(be.finish(fin, cuda.to_device(records), outs, n, 0, True))
    parts = tuple(o.copy_to_host() for o in outs)
    return parts if fin.outputs > 1 else parts[0]

REALS = [np.float32, np.float64, np.int8, np.int64, np.uint16]
ALL = REALS + [np.complex64, np.complex128]

MONOIDS = {
    "argmax": lambda dt: structured.argmax_monoid(dt),
    "argmin": lambda dt: structured.argmin_monoid(dt),
    "minmax": lambda dt: structured.minmax_monoid(dt),
    "ptp": lambda dt: structured.ptp_monoid(dt),
    "mean": lambda dt: structured.moments_monoid(dt, "mean"),
    "nanmean": lambda dt: structured.moments_monoid(dt, "nanmean"),
    "var": lambda dt: structured.moments_monoid(dt, "var"),
    "std1": lambda dt: structured.moments_monoid(dt, "std", 1),
    "nanvar2": lambda dt: structured.moments_monoid(dt, "nanvar", 2),
    "nanstd": lambda dt: structured.moments_monoid(dt, "nanstd"),
    "nanargmax": lambda dt: structured.nanargmax_monoid(dt),
    "nanargmin": lambda dt: structured.nanargmin_monoid(dt),
}


def _slices(dtype, seed: int, lanes: int, allow_empty: bool) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    out = []
    for _ in range(lanes):
        n = int(rng.integers(0 if allow_empty else 1, 6))
        if dt.kind in "iu":
            info = np.iinfo(dt)
            x = rng.integers(max(info.min, -50), min(info.max, 50), n).astype(dt)
        else:
            x = rng.choice([0.0, 1.5, -2.0, 3.25, np.nan, np.inf, -np.inf], n)
            if dt.kind == "c":
                with np.errstate(invalid="ignore"):
                    x = x + 1j * rng.choice([0.0, -1.0, 2.0, np.nan, np.inf], n)
            x = x.astype(dt)
        out.append(x)
    return out


def _values(monoid, value):
    return value if isinstance(value, tuple) else (value,)


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=True))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", sorted(MONOIDS))
@settings(max_examples=examples(4), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), lanes=st.integers(1, 12))
def test_the_array_finisher_is_finalize_of_each_accumulator(name, dtype, form, seed, lanes,
                                                           monkeypatch):
    if name == "ptp" and np.dtype(dtype).kind == "b":
        return
    monoid = MONOIDS[name](np.dtype(dtype))
    empty_ok = monoid.identity is not None and monoid.empty_ok
    lanes_in = _slices(dtype, seed, lanes, allow_empty=empty_ok)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        accs = [monoid.host(x) if x.size else monoid.identity for x in lanes_in]
    records = np.array([tuple(a) for a in accs], dtype=monoid.dtype)
    with warnings.catch_warnings(record=True) as one_by_one:
        warnings.simplefilter("always")
        try:
            expected = [_values(monoid, monoid.result(r)) for r in records]
            error = None
        except ValueError as e:
            error = str(e)
    if error is not None:  # nanargmax of an all-NaN lane
        with pytest.raises(ValueError, match=error):
            _finish(form, monoid, records, monkeypatch)
        return
    with warnings.catch_warnings(record=True) as at_once:
        warnings.simplefilter("always")
        got = _finish(form, monoid, records, monkeypatch)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected[0])
    for k, field in enumerate(got):
        assert field.shape == (lanes,)
        want = np.array([e[k] for e in expected])
        assert _same(field, want.astype(field.dtype)), (name, dtype, k, field, want)
        assert field.dtype == np.asarray(expected[0][k]).dtype or name.endswith("argmax") \
            or name.endswith("argmin"), (field.dtype, np.asarray(expected[0][k]).dtype)
    # the same warnings, each once for the whole array
    assert {str(w.message) for w in at_once} == {str(w.message) for w in one_by_one}
    assert len(at_once) == len({str(w.message) for w in one_by_one})


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.complex64])
def test_indices_are_intp(dtype):
    monoid = structured.argmax_monoid(np.dtype(dtype))
    records = np.array([tuple(monoid.host(np.arange(3).astype(dtype)))], dtype=monoid.dtype)
    got = monoid.finisher.array(records)
    assert got.dtype == np.intp and got.tolist() == [2]
    assert as_value(records[0], monoid.dtype)[-1] == 2
