"""bench/grids.py's host side (its GPU runs need CuPy and PyTorch): the check
of each layout's answer against NumPy's, which pyreduce's float32 mean of a
half must pass and an answer a little off must fail, and the monoids it
explains."""

from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import grids  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16, np.dtype(np.float32)])
def test_a_float32_mean_agrees_and_one_a_little_off_does_not(dtype):
    """pyreduce's mean of a half is float32: NumPy's float64 mean rounded to
    float32 agrees, one off by a part in 10**4 does not."""
    host = np.random.default_rng(3).standard_normal(1000).astype(dtype)
    want = grids._numpy("mean", host)
    assert grids._agrees("mean", np.float32(want), want)
    assert not grids._agrees("mean", np.float32(want * (1 + 1e-4) + 1e-6), want)


def test_arg_and_minmax_results_agree_exactly():
    host = np.array([3, -1, 7, 7, -1], dtype=BF16)
    assert grids._agrees("argmax", 2, grids._numpy("argmax", host))
    assert not grids._agrees("argmax", 3, grids._numpy("argmax", host))
    assert grids._agrees("minmax", (-1.0, 7.0), grids._numpy("minmax", host))


@pytest.mark.parametrize("name", grids.CALLS)
def test_the_monoid_it_explains_gives_numpys_answer_for_bfloat16(name):
    import pyreduce

    host = np.random.default_rng(5).standard_normal(3000).astype(BF16)
    e = pyreduce.explain(host, grids._monoid(name, BF16), backend="cpu")
    assert grids._agrees(name, e.result, grids._numpy(name, host))


def test_grids_study_reads_its_before_layout():
    """bench/grids.py (a GPU study) takes the layout a change replaced as a
    variant and a tuning in bench/columns.py's spelling."""
    import pyreduce

    assert grids.before_tuning("last_block_lanes i8b256m4224") == pyreduce.Tuning(
        variant="last_block_lanes", items_per_thread=8, block_size=256, max_blocks=4224)
    with pytest.raises(SystemExit, match="i8x"):
        grids.before_tuning("last_block_lanes i8x")
    assert grids._agrees("argmax", np.int64(3), 3) and not grids._agrees("mean", 1.0, 1.1)
