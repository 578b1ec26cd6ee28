"""Columns that summarise each output's run of rows in float32 first
(``BatchSpec.f32_tiles`` in the ``columns`` family, :func:`pyreduce.spec.column_runs`),
which :data:`pyreduce.batchplanner.COLUMN_RUNS` turns on (it is on by default).

Along ``axis=0`` of a float32 or half-precision matrix, the columns kernel
reads ``ROWS`` rows at a time; for ``var``/``std`` (moments), ``mean`` (sums)
and ``argmax``/``argmin`` each output's run of those rows becomes one float32
summary that is merged into the float64 accumulator once, where it used to
merge every element. The narrow kernel (rows of fewer outputs than a warp's
loads) does the same for the sums and moments; its runs are rows ``g`` apart,
so the indices of ``argmax`` keep the element-by-element fold there.

Each case is checked against NumPy's float64 answer (or index) for row
counts around multiples of ``ROWS`` (fewer rows than a run, one run after the
first row, several, the rows left over, parts of a split pass), with data far
from zero and a small spread (where a float32 sum of squares about zero would
lose it), ties, signed zeros, infinities and NaN, and values past float32's
squares.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pyreduce
from oracles import SIM_TUNING, on
from pyreduce import axes as axes_mod
from pyreduce import batchplanner, callmemo, structured
from pyreduce.dtypes import BFLOAT16
from pyreduce.variants.columns import ROWS

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

GPU_DEVICE = batchplanner.DeviceInfo("h100-like", ("g",), 132, 2048, 32, 32, 256,
                                     vector_bytes=16)
SIM_DEVICE = batchplanner.DeviceInfo("sim-like", ("t",), 2, 64, 1, 32, 64, vector_bytes=16)
#: rows around multiples of ROWS: fewer than a run, one run, a run and the rest, ...
ROW_COUNTS = [1, ROWS - 1, ROWS, ROWS + 1, 2 * ROWS + 3, 5 * ROWS, 41]
#: outputs a row: the columns kernel (past a warp's loads) and the narrow one
WIDE, NARROW = 130, 6
HALVES = ["float32", "float16", "bfloat16"]


@pytest.fixture(autouse=True)
def column_runs_on(monkeypatch):
    """The runs on for every test here (whatever the default), plans and
    remembered calls made anew on the way in and out."""
    monkeypatch.setattr(batchplanner, "COLUMN_RUNS", True)
    batchplanner.clear_plans()
    callmemo.clear()
    yield
    monkeypatch.undo()
    batchplanner.clear_plans()
    callmemo.clear()


def _dt(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def _plan(shape, monoid, dtype, device=GPU_DEVICE, tuning=pyreduce.Tuning()):
    dt = BFLOAT16 if dtype == "bfloat16" else np.dtype(dtype)
    strides = tuple(dt.itemsize * int(np.prod(shape[a + 1:])) for a in range(len(shape)))
    d = axes_mod.describe(shape, strides, dt.itemsize, (0,))
    return batchplanner.plan_strided(d, dt, monoid.dtype, monoid.key, device, tuning,
                                     align=16, mapped=monoid.map is not None,
                                     commutative=monoid.commutative)


def _monoid(name, dtype="float32", **kw):
    dt = BFLOAT16 if dtype == "bfloat16" else np.dtype(dtype)
    if name in ("argmax", "argmin"):
        return getattr(structured, f"{name}_monoid")(dt)
    return structured.moments_monoid(dt, name, **kw)


@pytest.mark.parametrize("dtype", HALVES)
def test_columns_plan_runs_for_the_ops_that_have_them(dtype):
    for name in ("var", "std", "mean", "argmax", "argmin"):
        spec = _plan((4096, 4096), _monoid(name, dtype), dtype).spec
        assert spec.family == "columns" and not spec.narrow
        assert spec.f32_tiles and " t32" in spec.label, name
    for name in ("var", "mean"):  # the narrow kernel: sums and moments
        spec = _plan((4096, 16), _monoid(name, dtype), dtype).spec
        assert spec.narrow and spec.f32_tiles, name
    for name in ("argmax", "argmin"):  # its runs are rows g apart: no index runs
        spec = _plan((4096, 16), _monoid(name, dtype), dtype).spec
        assert spec.narrow and not spec.f32_tiles, name
    for name in ("nanvar", "nanmean"):  # NaN is counted out element by element
        assert not _plan((4096, 4096), _monoid(name, dtype), dtype).spec.f32_tiles
    # a float64 result is computed as NumPy computes it in float64
    wide = _monoid("mean", dtype, result=np.float64)
    assert not _plan((4096, 4096), wide, dtype).spec.f32_tiles


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_columns_of_other_dtypes_merge_every_element(dtype):
    for name in ("var", "mean", "argmax"):
        assert not _plan((4096, 4096), _monoid(name, dtype), dtype).spec.f32_tiles


def test_the_runs_are_on_by_default_and_the_switch_turns_them_off(monkeypatch):
    """``batchplanner.COLUMN_RUNS`` is on (an H200 timed the runs faster); off,
    the columns merge every element in float64 again."""
    monkeypatch.undo()  # the module's own value, not this file's fixture's
    batchplanner.clear_plans()
    assert batchplanner.COLUMN_RUNS is True
    assert _plan((4096, 4096), _monoid("var"), "float32").spec.f32_tiles
    assert _plan((4096, 16), _monoid("mean"), "float32").spec.f32_tiles
    monkeypatch.setattr(batchplanner, "COLUMN_RUNS", False)
    batchplanner.clear_plans()
    assert not _plan((4096, 4096), _monoid("var"), "float32").spec.f32_tiles
    assert not _plan((4096, 16), _monoid("mean"), "float32").spec.f32_tiles


def _columns(gpu_backend, fn, x, **kw):
    callmemo.clear()
    return getattr(pyreduce, fn)(x, axis=0, **on(gpu_backend), **kw)


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_var_of_columns_in_float32_runs_is_within_a_few_roundings(gpu_backend, name, width):
    # (rows of NARROW outputs this few go to the rows kernels in the simulator:
    # the narrow kernel's runs are the test after the next)
    """Data far from zero with a small spread, and spread about zero: var,
    std and ddof within a few float32 roundings of float64's answer."""
    rng = np.random.default_rng(width)
    for k in ROW_COUNTS:
        for scale, offset in ((100.0, 3.0), (1e-3 if name == "float32" else 1.0, 1e4)):
            x = (rng.standard_normal((k, width)) * scale + offset).astype(_dt(name))
            wide = x.astype(np.float64)
            for ddof in (0, 1):
                if k - ddof <= 0:
                    continue
                exact = np.var(wide, axis=0, ddof=ddof)
                got = _columns(gpu_backend, "var", x, ddof=ddof)
                assert got.dtype == np.float32 and got.shape == (width,)
                bound = 16 * 2**-24 * exact + 1e-30
                assert np.all(np.abs(got.astype(np.float64) - exact) <= bound), \
                    (k, scale, ddof, np.max(np.abs(got - exact) / (exact + 1e-300)))
        got = _columns(gpu_backend, "std", x)
        np.testing.assert_allclose(got, np.std(wide, axis=0), rtol=2**-20)


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_mean_of_columns_in_float32_runs_is_within_a_few_roundings(gpu_backend, name, width):
    rng = np.random.default_rng(width + 1)
    for k in ROW_COUNTS:
        x = (rng.standard_normal((k, width)) * 100 + 3).astype(_dt(name))
        wide = x.astype(np.float64)
        exact = np.mean(wide, axis=0)
        got = _columns(gpu_backend, "mean", x)
        assert got.dtype == np.float32
        bound = 8 * 2**-24 * np.mean(np.abs(wide), axis=0) + np.spacing(
            np.abs(exact).astype(np.float32))
        assert np.all(np.abs(got.astype(np.float64) - exact) <= bound), k
        np.testing.assert_allclose(_columns(gpu_backend, "mean", x, dtype=np.float64), exact,
                                   rtol=1e-13)


_SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 3.5, np.inf, -np.inf, np.nan], np.float32)


@pytest.mark.parametrize("name", HALVES)
def test_argmax_of_columns_in_float32_runs_keeps_numpys_index(gpu_backend, name):
    """Few distinct values (ties in every column), signed zeros, infinities and
    NaN: each column's index is NumPy's, the first of its extreme or of its
    first NaN."""
    rng = np.random.default_rng(11)
    for trial, k in enumerate(ROW_COUNTS):
        p = rng.dirichlet(np.ones(_SPECIAL.size))
        if trial % 2 == 0:
            p[-1] = 0  # no NaN: the extreme's first index
            p /= p.sum()
        x = rng.choice(_SPECIAL, size=(k, WIDE), p=p).astype(_dt(name))
        wide = x.astype(np.float32)
        for fn in ("argmax", "argmin"):
            got = _columns(gpu_backend, fn, x)
            np.testing.assert_array_equal(got, getattr(np, fn)(wide, axis=0), err_msg=f"{fn} {k}")


def _narrow_plan(k, dtype="float32", name="var"):
    return _plan((k, NARROW), _monoid(name, dtype), dtype, SIM_DEVICE, SIM_TUNING)


def _narrow_rows(dtype) -> list:
    """Rows of NARROW outputs that the simulator's tuning gives the narrow
    kernel, split into parts (it aims at 3 blocks) with two runs of wide rows
    and more in each, and rows left over."""
    g = _narrow_plan(4096, dtype).wide_rows
    found = []
    for k in (6 * ROWS * g + g // 2, 40 * g + 3):
        plan = _narrow_plan(k, dtype)
        assert plan.spec.narrow and plan.spec.f32_tiles, batchplanner.describe_plan(plan)
        per_part = -(-(k // plan.wide_rows) // plan.parts)
        assert per_part >= 2 * ROWS and k % plan.wide_rows, (k, plan.wide_rows, plan.parts)
        found.append(k)
    assert _narrow_plan(found[-1], dtype).parts > 1
    return found


@pytest.mark.parametrize("name", HALVES)
def test_narrow_columns_summarise_runs_of_wide_rows(gpu_backend, name):
    """The narrow kernel reads ``g`` rows as one wide row and sums runs of
    ``ROWS`` wide rows: ``mean``, ``var`` and ``std`` of far-from-zero data
    with a small spread, the rows left over after the last wide row, and parts
    of a split pass, against float64; ``argmax`` keeps its element-by-element
    fold there and NumPy's index."""
    rng = np.random.default_rng(17)
    for k in _narrow_rows(name):
        x = (rng.standard_normal((k, NARROW)) * (1.0 if name == "float32" else 4.0)
             + 300).astype(_dt(name))
        wide = x.astype(np.float64)
        got = _columns(gpu_backend, "mean", x)
        bound = 8 * 2**-24 * np.mean(np.abs(wide), axis=0)
        assert np.all(np.abs(got - np.mean(wide, axis=0)) <= bound), k
        exact = np.var(wide, axis=0)
        got = _columns(gpu_backend, "var", x)
        assert np.all(np.abs(got - exact) <= 16 * 2**-24 * exact), (k, got, exact)
        np.testing.assert_allclose(_columns(gpu_backend, "std", x), np.sqrt(exact),
                                   rtol=2**-20)
        np.testing.assert_array_equal(_columns(gpu_backend, "argmax", x),
                                      np.argmax(x.astype(np.float32), axis=0))


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_columns_runs_past_float32s_range_fall_back_element_by_element(gpu_backend, width):
    """A run holding an infinity or a NaN gives NumPy's NaN variance; a run whose
    float32 sum or squares overflow is merged in float64 (finite mean, finite
    variance of 1e38); a tiny spread keeps its squares. In the columns kernel
    and in the narrow one, whose runs are of wide rows."""
    k = 3 * ROWS + 1 if width == WIDE else _narrow_rows("float32")[0]
    x = np.ones((k, width), dtype=np.float32)
    x[ROWS + 1, 0], x[k // 2, width - 1] = np.inf, np.nan
    got = _columns(gpu_backend, "var", x)
    assert np.isnan(got[0]) and np.isnan(got[-1]) and np.all(got[1:-1] == 0)
    big = np.full((k, width), np.finfo(np.float32).max * 0.9, dtype=np.float32)
    assert np.all(_columns(gpu_backend, "mean", big) == big[0])
    spread = np.zeros((k, width), dtype=np.float32)
    spread[::2] = 2e19
    got = _columns(gpu_backend, "var", spread)
    np.testing.assert_allclose(got, np.var(spread.astype(np.float64), axis=0), rtol=1e-6)
    tiny = (1e-25 * np.random.default_rng(3).standard_normal((k, width))).astype(np.float32)
    np.testing.assert_allclose(_columns(gpu_backend, "std", tiny),
                               np.std(tiny.astype(np.float64), axis=0), rtol=1e-5)


def test_split_columns_summarise_each_parts_runs(gpu_backend):
    """A split pass (parts of rows, then a finishing pass over their summaries)
    with runs in every part and rows left over in some: the same answers."""
    x = (np.random.default_rng(5).standard_normal((203, WIDE)) * 10 + 1e3).astype(np.float32)
    m = _monoid("var")
    plan = _plan(x.shape, m, "float32", SIM_DEVICE, SIM_TUNING)
    assert plan.parts > 1 and plan.spec.f32_tiles
    exact = np.var(x.astype(np.float64), axis=0)
    got = _columns(gpu_backend, "var", x)
    assert np.all(np.abs(got - exact) <= 16 * 2**-24 * exact)
    np.testing.assert_array_equal(_columns(gpu_backend, "argmax", x), np.argmax(x, axis=0))
