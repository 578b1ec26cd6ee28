"""The gpu_benchmark fixture in a user's own test file (pytester), on the CPU; the
GPU path's bookkeeping with the device timer replaced by a known one."""

import json
import os
import subprocess
import sys

import pytest

from pyreduce import measure

pytest_plugins = ["pytester"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN = ("-p", "pyreduce.pytest_plugin")
QUICK = ("--benchmark-max-time=0.02", "--benchmark-min-rounds=3")


def _run(pytester, source, *args):
    """Run a user's test file with the plugin; its benchmarks from the JSON."""
    pytester.makepyfile(test_user=source)
    out = pytester.path / "bench.json"
    result = pytester.runpytest(*PLUGIN, *QUICK, f"--benchmark-json={out}", *args)
    # a session that timed nothing may leave the file empty, or not write it
    text = out.read_text() if out.exists() else ""
    return result, (json.loads(text)["benchmarks"] if text.strip() else None)


@pytest.fixture(autouse=True)
def _not_in_an_xdist_worker(monkeypatch):
    """The inline runs below are sessions of their own: pytest-benchmark turns
    itself off in a pytest-xdist worker (``-n``), which it tells by this
    variable, inherited from the worker that runs this file."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)


@pytest.fixture
def no_gpu(monkeypatch):
    """This process as one without a GPU (the user's tests run in it, inline)."""
    monkeypatch.setattr(measure, "gpu_name", lambda: None)


def test_wall_clock_without_a_gpu(pytester, no_gpu):
    result, found = _run(pytester, """
        import numpy as np
        import pyreduce

        def test_sum(gpu_benchmark):
            x = np.random.default_rng(0).random(1000)
            got = gpu_benchmark(pyreduce.sum, x, backend="cpu", nbytes=x.nbytes)
            assert got == pyreduce.sum(x, backend="cpu")
    """)
    result.assert_outcomes(passed=1)
    (bench,) = found
    info, stats = bench["extra_info"], bench["stats"]
    assert info["timing"] == "wall" and info["device"] == measure.cpu_name()
    assert "wall clock" in info["timer"]
    assert info["bytes"] == 8000
    assert info["seconds"] == stats["median"] > 0
    assert info["GBps"] == pytest.approx(8000 / stats["median"] / 1e9)
    assert stats["rounds"] >= 3


def test_gpu_rounds_become_the_statistics(pytester):
    # the device timer replaced by known per-call times: pytest-benchmark's
    # statistics must be exactly those, one sample a round
    result, found = _run(pytester, """
        from pyreduce import measure

        def test_op(gpu_benchmark, monkeypatch):
            times = iter([3e-3, 1e-3, 2e-3, 5e-3])
            calls = []
            monkeypatch.setattr(measure, "gpu_name", lambda: "Test GPU")
            monkeypatch.setattr(measure, "one_round",
                                lambda fn, timing, reps, hold: (fn(), next(times))[1])
            got = gpu_benchmark.pedantic(lambda k: calls.append(k) or k, (7,),
                                         nbytes=4_000_000, rounds=4)
            assert got == 7 and calls == [7] * 5    # the untimed first call, then 4 rounds
    """)
    result.assert_outcomes(passed=1)
    (bench,) = found
    info, stats = bench["extra_info"], bench["stats"]
    assert info["timing"] == "gpu" and info["device"] == "Test GPU"
    assert info["timer"] == measure.GPU_TIMER
    assert stats["rounds"] == 4
    assert stats["min"] == pytest.approx(1e-3) and stats["max"] == pytest.approx(5e-3)
    assert stats["median"] == pytest.approx(2.5e-3) == info["seconds"]
    assert info["GBps"] == pytest.approx(4_000_000 / 2.5e-3 / 1e9)


def test_benchmark_disable_runs_once(pytester, no_gpu):
    result, found = _run(pytester, """
        def test_op(gpu_benchmark):
            calls = []
            assert gpu_benchmark(lambda: calls.append(1) or 5, nbytes=8) == 5
            assert calls == [1]
            info = gpu_benchmark.extra_info
            assert info["timing"] == "wall" and "seconds" not in info
    """, "--benchmark-disable")
    result.assert_outcomes(passed=1)
    # the fixture counts as used: no "benchmark fixture was not used" warning (an
    # assertion-rewrite warning for the plugin module may come from the session)
    assert "PytestBenchmarkWarning" not in result.stdout.str()


def test_insisting_on_the_gpu_without_one_says_why(pytester, no_gpu):
    result, _ = _run(pytester, """
        def test_op(gpu_benchmark):
            gpu_benchmark.pedantic(lambda: 1, timer="gpu")
    """, "-W", "ignore::pytest_benchmark.logger.PytestBenchmarkWarning")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*timer='gpu' needs a CUDA GPU*"])


@pytest.mark.gpu
def test_device_time_on_a_real_gpu(pytester):
    result, found = _run(pytester, """
        import numpy as np
        from numba import cuda
        import pyreduce

        def test_sum(gpu_benchmark):
            x = cuda.to_device(np.ones(1 << 20, dtype=np.float32))
            got = gpu_benchmark(pyreduce.sum, x, nbytes=x.nbytes)
            assert got == 1 << 20
    """)
    result.assert_outcomes(passed=1)
    (bench,) = found
    info, stats = bench["extra_info"], bench["stats"]
    assert info["timing"] == "gpu" and info["device"] == measure.gpu_name()
    assert info["timer"] == measure.GPU_TIMER and stats["rounds"] == 5
    # 4 MiB read in well under a millisecond, and not in less than a microsecond
    assert 1e-6 < info["seconds"] == stats["median"] < 1e-3


def test_without_pytest_benchmark_the_error_names_it(pytester):
    pytester.makepyfile(test_user="""
        def test_op(gpu_benchmark):
            pass
    """)
    result = pytester.runpytest(*PLUGIN, "-p", "no:benchmark")
    result.stdout.fnmatch_lines(["*gpu_benchmark fixture needs pytest-benchmark*"])
    assert result.ret != 0


def test_loading_the_plugin_imports_nothing_it_does_not_use():
    code = ("import sys, pyreduce.pytest_plugin; "
            "print(sorted(m for m in ('pytest_benchmark', 'numba.cuda', 'matplotlib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.stdout.strip() == "[]"


def test_a_session_that_does_not_use_it_is_untouched(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", ROOT)
    pytester.makepyfile(test_plain="""
        import sys

        def test_plain():
            assert "numba.cuda" not in sys.modules
    """)
    result = pytester.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("bad", ["fast", "GPU", ""])
def test_timer_names_are_checked(bad):
    with pytest.raises(ValueError, match="timer must be"):
        measure.timing_for(bad)


def test_rounds_are_checked():
    with pytest.raises(ValueError, match="reps and rounds"):
        measure.rounds(lambda: None, "wall", reps=0)
    assert len(measure.rounds(lambda: None, "wall", reps=2, count=3)) == 3
