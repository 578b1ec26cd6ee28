"""bench/grids.py's host side (its GPU runs need CuPy and PyTorch): the check
of each layout's answer against NumPy's, which a half's mean must pass at its
own precision and a wrong answer must fail, and the monoid it explains."""

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
def test_a_mean_in_its_dtype_agrees_and_a_wrong_one_does_not(dtype):
    host = np.random.default_rng(3).standard_normal(1000).astype(dtype)
    want = grids._numpy("mean", host)
    assert grids._agrees("mean", np.asarray(want).astype(dtype), want, dtype)
    assert grids._agrees("mean", want, want, dtype)
    assert not grids._agrees("mean", want * 1.02 + 0.01, want, dtype)


def test_arg_and_minmax_results_agree_exactly():
    host = np.array([3, -1, 7, 7, -1], dtype=BF16)
    assert grids._agrees("argmax", 2, grids._numpy("argmax", host), BF16)
    assert not grids._agrees("argmax", 3, grids._numpy("argmax", host), BF16)
    assert grids._agrees("minmax", (-1.0, 7.0), grids._numpy("minmax", host), BF16)


@pytest.mark.parametrize("name", grids.CALLS)
def test_the_monoid_it_explains_gives_numpys_answer_for_bfloat16(name):
    import pyreduce

    host = np.random.default_rng(5).standard_normal(3000).astype(BF16)
    e = pyreduce.explain(host, grids._monoid(name, BF16), backend="cpu")
    assert grids._agrees(name, e.result, grids._numpy(name, host), BF16)


def test_grids_study_reads_its_before_layout():
    """bench/grids.py (a GPU study) takes the layout a change replaced as a
    variant and a tuning in bench/columns.py's spelling."""
    import pyreduce

    assert grids.before_tuning("last_block_lanes i8b256m4224") == pyreduce.Tuning(
        variant="last_block_lanes", items_per_thread=8, block_size=256, max_blocks=4224)
    with pytest.raises(SystemExit, match="i8x"):
        grids.before_tuning("last_block_lanes i8x")
    f32 = np.dtype(np.float32)
    assert grids._agrees("argmax", np.int64(3), 3, f32) and not grids._agrees("mean", 1.0, 1.1, f32)
