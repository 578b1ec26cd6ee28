"""Rows of float32 and half-precision input reduced by ``mean``, ``var``/``std``
and ``argmax``/``argmin`` along an axis: each lane's run of vector-loaded elements
is summarised in float32 first and merged once (``BatchSpec.f32_tiles``, as the
1-D first passes do: :mod:`test_structured`'s tile tests), in a group of lanes,
a warp or a block a row. Checked against NumPy from float64 in the simulator
and, on a GPU machine, on the GPU: row lengths around a lane's run and the
tiles, rows that start at every alignment (the kernel then loads element by
element), infinities, NaN, ties, signed zeros, tiny spreads whose squares
float32 would lose, deviations whose squares it cannot hold and sums past its
range.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import pyreduce
from pyreduce import batchplanner, structured
from pyreduce.axes import describe
from pyreduce.backends.base import GeneratedBackend
from pyreduce.dtypes import BFLOAT16
from pyreduce.planner import DeviceInfo, Tuning

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

_H100_LIKE = DeviceInfo("h100-like", ("g",), 132, 2048, 32, 32, 256, vector_bytes=16,
                        l2_bytes=50 << 20)

HALVES = ["float32", "float16", "bfloat16"]


def _dtype(name):
    """The host arrays' dtype."""
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _kernel_dtype(name):
    """The dtype the planner sees (pyreduce's bfloat16 is its 16 bits)."""
    return BFLOAT16 if name == "bfloat16" else np.dtype(name)


def _monoid(name, dtype):
    if name in ("mean", "nanmean", "var", "std", "nanvar"):
        return structured.moments_monoid(dtype, name)
    return getattr(structured, f"{name}_monoid")(dtype)


def _row_spec(name, dtype, shape, axis=1, align=16, **tuning):
    m = _monoid(name, np.dtype(dtype))
    d = describe(shape, (shape[1] * np.dtype(dtype).itemsize, np.dtype(dtype).itemsize),
                 np.dtype(dtype).itemsize, (axis,))
    return batchplanner.plan_strided(d, np.dtype(dtype), m.dtype, m.key, _H100_LIKE,
                                     Tuning(**tuning), align=align, mapped=True,
                                     commutative=m.commutative).spec


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("shape", [(4096, 4096), (1 << 17, 300), (1 << 20, 64), (64, 1 << 20)])
def test_rows_of_var_and_argmax_summarise_runs_in_float32(name, shape):
    dt = _kernel_dtype(name)
    for op in ("mean", "var", "std", "argmax", "argmin"):
        spec = _row_spec(op, dt, shape)
        assert spec.group in ("lanes", "warp", "block") and spec.vector > 1, spec.label
        assert spec.f32_tiles and " t32" in spec.label, (op, spec.label)
        assert not _row_spec(op, dt, shape, align=2).f32_tiles  # element loads
    assert not _row_spec("nanvar", dt, shape).f32_tiles  # NaN is counted out per element
    assert not _row_spec("nanmean", dt, shape).f32_tiles
    assert not _row_spec("minmax", dt, shape).f32_tiles
    # a mean finished in float64 is computed as NumPy computes it in float64
    m = structured.moments_monoid(np.dtype(dt), "mean", result=np.float64)
    d = describe(shape, (shape[1] * dt.itemsize, dt.itemsize), dt.itemsize, (1,))
    assert not batchplanner.plan_strided(d, dt, m.dtype, m.key, _H100_LIKE, Tuning(),
                                         align=16, mapped=True).spec.f32_tiles


def test_other_rows_and_columns_merge_every_element():
    for dt in (np.float64, np.int32, np.complex64):
        assert not _row_spec("var", dt, (4096, 4096)).f32_tiles
    assert not _row_spec("var", np.float32, (1 << 20, 9)).f32_tiles  # staged: a thread a row
    # (the columns' runs of rows: tests/test_column_runs.py)
    with pytest.raises(ValueError, match="f32_tiles"):
        import dataclasses

        dataclasses.replace(_row_spec("var", np.float32, (1 << 20, 9)), f32_tiles=True)


def test_lanes_load_runs_of_16_where_they_summarise_them():
    """Rows of float32 mean, var and argmax: 16 items a lane in a group of lanes
    or a block (their runs summarised in float32), 8 in a warp; a float64
    var's tuple 2. A tuning's items_per_thread is kept."""
    for op in ("mean", "var", "argmax"):
        assert _row_spec(op, np.float32, (4096, 4096)).items == 16
        lanes = _row_spec(op, np.float32, (1 << 20, 64))
        assert (lanes.group, lanes.lanes, lanes.items) == ("lanes", 4, 16)
        assert _row_spec(op, np.float32, (1 << 17, 300)).items == 8
        assert _row_spec(op, np.float32, (4096, 4096), items_per_thread=4).items == 4
    assert _row_spec("var", np.float64, (4096, 4096)).items == 2


def test_rows_without_vector_loads_keep_four_items_a_lane():
    """Where a lane cannot load vectors (strided or unaligned rows) no run is
    summarised and a tuple accumulator's lane loads 4 items, as before: 16
    scalar loads a lane would only space a warp's loads further apart."""
    for op in ("var", "argmax", "mean"):
        for spec in (_row_spec(op, np.float32, (1 << 20, 64), align=4),
                     _strided_spec(op, (1 << 20, 64)),
                     _strided_spec(op, (4096, 4096))):
            assert spec.vector == 1 and not spec.f32_tiles, spec.label
            assert spec.items == 4, (op, spec.label)
    lanes = _strided_spec("var", (1 << 20, 64))
    assert (lanes.group, lanes.lanes) == ("lanes", 16), lanes.label


def _strided_spec(name, shape):
    """Every second column of a float32 array twice as wide as ``shape``."""
    m = _monoid(name, np.dtype(np.float32))
    d = describe(shape, (shape[1] * 8, 8), 4, (1,))
    return batchplanner.plan_strided(d, np.dtype(np.float32), m.dtype, m.key, _H100_LIKE,
                                     Tuning(), align=16, mapped=True,
                                     commutative=m.commutative).spec


@pytest.fixture
def backend(gpu_backend):
    return gpu_backend


def _on(backend):
    # small blocks: several lanes, warps and blocks per call in the simulator
    return dict(backend=backend, tuning=Tuning(block_size=64))


@pytest.fixture
def built(monkeypatch):
    """The specs of the kernels looked up from here on."""
    specs = []
    real = GeneratedBackend.kernel

    def kernel(self, spec, *args, **kwargs):
        specs.append(spec)
        return real(self, spec, *args, **kwargs)

    monkeypatch.setattr(GeneratedBackend, "kernel", kernel)
    return specs


def _ran_tiles(built) -> bool:
    return any(getattr(s, "f32_tiles", False) and s.family == "segments" for s in built)


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("K", [16, 32, 40, 64, 72, 300])  # 16-byte aligned rows, not staged
def test_var_along_rows_in_float32_runs(backend, built, name, K):
    rng = np.random.default_rng(K)
    dt = _dtype(name)
    for scale, offset in ((100.0, 3.0), (1e-3 if name == "float32" else 1.0, 1e4)):
        x = (rng.standard_normal((5, K)) * scale + offset).astype(dt)
        wide = x.astype(np.float64)
        for ddof in (0, 1):
            exact = np.var(wide, axis=1, ddof=ddof)
            got = np.asarray(pyreduce.var(x, axis=1, ddof=ddof, **_on(backend)))
            assert got.dtype == np.float32
            assert np.all(np.abs(got - exact) <= 16 * 2**-24 * exact), (scale, ddof)
        got = np.asarray(pyreduce.std(x, axis=1, **_on(backend)))
        np.testing.assert_allclose(got, np.std(wide, axis=1), rtol=2**-20)
    assert _ran_tiles(built)


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("K", [16, 32, 40, 64, 72, 300])
def test_mean_along_rows_in_float32_runs(backend, built, name, K):
    """Each run's float32 pairwise sum, widened once: within a few float32
    roundings of the exact mean of the row's magnitudes, as NumPy's float32
    mean (every element added in float32) is; a float64 ``dtype=`` is NumPy's
    float64 mean."""
    rng = np.random.default_rng(K)
    dt = _dtype(name)
    for scale, offset in ((100.0, 3.0), (1.0, 1e4 if name != "float16" else 1e3)):
        x = (rng.standard_normal((5, K)) * scale + offset).astype(dt)
        wide = x.astype(np.float64)
        exact = np.mean(wide, axis=1)
        got = np.asarray(pyreduce.mean(x, axis=1, **_on(backend)))
        assert got.dtype == np.float32
        bound = 8 * 2**-24 * np.mean(np.abs(wide), axis=1) + np.spacing(np.abs(exact))
        assert np.all(np.abs(got - exact) <= bound), (scale, got - exact)
        assert (np.asarray(pyreduce.mean(x, axis=1, dtype=np.float64, **_on(backend)))
                == pytest.approx(exact, rel=1e-13))
    assert _ran_tiles(built)


def test_mean_along_rows_past_float32s_range_falls_back(backend):
    """A run whose float32 sum overflows, or holds an infinity or a NaN, adds
    its elements in float64: the mean of values near float32's largest is
    finite, as the float64 sum gives it."""
    x = np.full((4, 64), 3e38, dtype=np.float32)
    x[1, ::2] = -3e38
    x[2, 5] = np.inf
    x[3, 9] = np.nan
    got = np.asarray(pyreduce.mean(x, axis=1, **_on(backend)))
    wide = np.mean(x.astype(np.float64), axis=1)
    assert got[0] == np.float32(3e38) and got[1] == np.float32(wide[1])
    assert got[2] == np.inf and np.isnan(got[3])


@pytest.mark.parametrize("start", [0, 1, 2, 3])
def test_rows_at_every_alignment(backend, start):
    """Rows that do not start at a run's alignment (or whose length breaks it,
    as rows of 41 do) load element by element (no vector loads, no runs); the
    answers are the same."""
    from numba import cuda

    rng = np.random.default_rng(start)
    for K in (40, 41):
        flat = (rng.standard_normal(start + 7 * K) * 10 + 5).astype(np.float32)
        x = flat[start:].reshape(7, K)
        d = cuda.to_device(flat)[start:].reshape(7, K)  # in place, at its offset
        wide = x.astype(np.float64)
        np.testing.assert_allclose(pyreduce.var(d, axis=1, **_on(backend)).copy_to_host(),
                                   np.var(wide, axis=1), rtol=1e-6)
        got = pyreduce.argmax(d, axis=1, **_on(backend)).copy_to_host()
        assert np.array_equal(got, np.argmax(x, axis=1))


def test_var_along_rows_of_squares_past_float32_falls_back(backend):
    x = np.zeros((3, 64), dtype=np.float32)
    x[:, ::2] = 2e19
    x[1, 5] = np.inf
    x[2, 9] = np.nan
    got = np.asarray(pyreduce.var(x, axis=1, **_on(backend)))
    assert np.isfinite(got[0]) and got[0] == pytest.approx(np.var(x[0].astype(np.float64)),
                                                           rel=1e-6)
    assert np.isnan(got[1]) and np.isnan(got[2])


@pytest.mark.parametrize("scale", [1e-21, 1e-25, 1e-30])
def test_std_along_rows_of_a_tiny_spread(backend, scale):
    rng = np.random.default_rng(int(-np.log10(scale)))
    x = (scale * rng.standard_normal((4, 96))).astype(np.float32)
    x[3, :48] = 0  # a run of equal elements next to tiny ones
    exact = np.std(x.astype(np.float64), axis=1)
    got = np.asarray(pyreduce.std(x, axis=1, **_on(backend)))
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=0)


_SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 3.5, np.inf, -np.inf, np.nan], np.float32)


@pytest.mark.parametrize("name", HALVES)
@pytest.mark.parametrize("K", [16, 32, 64, 136, 300])
def test_argmax_along_rows_in_float32_runs_keeps_numpys_index(backend, built, name, K):
    """Few distinct values (ties), signed zeros, infinities and NaN at random
    places: the index is NumPy's, the first of the extreme or of the first NaN,
    counted from the row's start."""
    rng = np.random.default_rng(K)
    p = rng.dirichlet(np.ones(_SPECIAL.size))
    x = rng.choice(_SPECIAL, size=(6, K), p=p).astype(_dtype(name))
    x[0] = np.where(np.isnan(x[0]), 1.0, x[0])  # a row with no NaN
    wide = x.astype(np.float32)
    for fn in ("argmax", "argmin"):
        got = np.asarray(getattr(pyreduce, fn)(x, axis=1, **_on(backend)))
        assert np.array_equal(got, getattr(np, fn)(wide, axis=1)), fn
    assert _ran_tiles(built)
