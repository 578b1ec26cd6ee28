"""Benchmarks: their own pytest collection (``python -m pytest bench``; on a GPU
machine with ``NUMBA_ENABLE_CUDASIM=0``, since the root conftest enables the
simulator by default).

GPU cases are timed by pyreduce's ``gpu_benchmark`` fixture: the statistics are
device time per call (CUDA events, the GPU held while the calls are queued), with
``GBps``, ``bytes`` and ``device`` in ``extra_info``; inputs are allocated before
timing starts. The device name and date also go into the JSON's
``machine_info``.
"""

import os
import sys

import pytest

# the benchmark files share the harness: bench/_timing.py, _report.py, peers.py
sys.path.insert(0, os.path.dirname(__file__))
from _report import gpu_name, has_cuda, today  # noqa: E402


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """A run without ``-n`` is one process: its ``--dist`` (the project's
    ``addopts`` name one for the tests) set to ``no``, since pytest-benchmark
    turns itself off wherever ``--dist`` is anything else."""
    if not getattr(config.option, "numprocesses", None):
        config.option.dist = "no"


def _gpu_name():
    if not has_cuda():  # no GPU, or the simulator
        return None
    try:
        return gpu_name("numba")
    except Exception:
        return None


def pytest_benchmark_update_machine_info(config, machine_info):
    import numba
    import numpy

    machine_info["gpu"] = _gpu_name()
    machine_info["date"] = today()
    machine_info["numpy"] = numpy.__version__
    machine_info["numba"] = numba.__version__
    for mod in ("numba_cuda", "cupy", "torch"):
        try:
            machine_info[mod] = __import__(mod).__version__
        except Exception:
            machine_info[mod] = None


@pytest.fixture(scope="session")
def gpu():
    name = _gpu_name()
    if name is None:
        pytest.skip("no CUDA GPU")
    return name


# The fixture of pyreduce's pytest plugin, for checkouts where pyreduce is not
# installed (an installed pyreduce registers it through its pytest11 entry point)
from pyreduce.pytest_plugin import gpu_benchmark  # noqa: E402,F401
