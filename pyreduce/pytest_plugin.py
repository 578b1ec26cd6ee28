"""The ``gpu_benchmark`` fixture: pytest-benchmark statistics of a callable's GPU
time, with GB/s and the device in ``extra_info``.

Installed with pyreduce as a pytest plugin (the ``pytest11`` entry point), so a
test file only asks for the fixture::

    def test_my_sum(gpu_benchmark):
        x = cupy.random.random(2**24, dtype=cupy.float32)
        gpu_benchmark(pyreduce.sum, x, device_result=True, nbytes=x.nbytes)

pytest-benchmark times a call by the wall clock, which for an asynchronous GPU
call measures how fast the host queues work, not how long the GPU takes. With a
CUDA GPU, ``gpu_benchmark`` times each round with CUDA events around ``reps``
back-to-back calls queued while the GPU is held (:mod:`pyreduce.measure`), and
pytest-benchmark's statistics (min, median, mean ...) are of those per-call
device times. Without one (or under the CUDA simulator) it falls back to
pytest-benchmark's own wall-clock timing and says so in ``extra_info``.

``extra_info`` gets ``device`` (the GPU's name, or the CPU), ``timing``
(``"gpu"`` or ``"wall"``), ``timer`` (how it was timed), ``seconds`` (the median
per call) and, given ``nbytes``, ``bytes`` and ``GBps``.

The plugin needs pytest-benchmark only when the fixture is used; loading it
imports neither pytest-benchmark nor numba-cuda.
"""

from __future__ import annotations

import pytest

__all__ = ["GpuBenchmark", "gpu_benchmark"]


class GpuBenchmark:
    """What the ``gpu_benchmark`` fixture gives a test: call it like
    pytest-benchmark's ``benchmark``, with ``nbytes=`` for GB/s."""

    def __init__(self, benchmark):
        self.benchmark = benchmark  # pytest-benchmark's fixture, for anything else

    def __call__(self, fn, *args, nbytes: int | None = None, **kwargs):
        """Time ``fn(*args, **kwargs)`` and return what its first call returned.
        ``nbytes`` (the bytes one call reads) is taken by the fixture, not passed
        on; to time a function that has an argument of that name, wrap it in a
        lambda."""
        return self.pedantic(fn, args, kwargs, nbytes=nbytes)

    def pedantic(self, fn, args=(), kwargs=None, *, nbytes: int | None = None,
                 reps: int = 20, rounds: int = 5, hold: bool = True, timer: str = "auto"):
        """:meth:`__call__` with the measurement spelled out: ``rounds`` rounds
        of ``reps`` calls on the GPU (each round one pytest-benchmark sample);
        ``hold=False`` for a callable that waits for the GPU itself (it cannot be
        held; its time then includes the host's); ``timer`` ``"gpu"`` or
        ``"wall"`` to insist on one (``"auto"``: the GPU if there is one)."""
        from . import measure

        kwargs = kwargs or {}
        timing, device = measure.timing_for(timer)
        info = self.benchmark.extra_info
        info.update(device=device, timing=timing,
                    timer=measure.GPU_TIMER if timing == "gpu" else measure.WALL_TIMER)
        def call():
            return fn(*args, **kwargs)

        if getattr(self.benchmark, "disabled", False):  # --benchmark-disable: one call
            return self.benchmark(call)
        result = call()  # the first call compiles: never timed
        if timing == "gpu":
            self._gpu_rounds(call, reps, rounds, hold)
        else:
            self.benchmark(call)
        seconds = self.benchmark.stats["median"]
        info["seconds"] = seconds
        if nbytes is not None:
            info["bytes"] = int(nbytes)
            info["GBps"] = nbytes / seconds / 1e9
        return result

    @property
    def extra_info(self) -> dict:
        """pytest-benchmark's ``extra_info`` of this test, saved in its JSON:
        ``device``, ``timing``, ``timer``, ``seconds``, ``bytes``, ``GBps``, and
        whatever the test adds."""
        return self.benchmark.extra_info

    @property
    def group(self):
        """pytest-benchmark's group of this test (tables compare within a group)."""
        return self.benchmark.group

    @group.setter
    def group(self, value):
        self.benchmark.group = value

    def _gpu_rounds(self, call, reps, rounds, hold):
        """pytest-benchmark's pedantic mode, on a clock that advances by the
        device time of each round: its statistics are then the GPU's."""
        from . import measure

        if not hasattr(self.benchmark, "_timer"):
            raise RuntimeError("gpu_benchmark: this pytest-benchmark version has no "
                               "replaceable timer; pytest-benchmark 4 or 5 is needed")
        now = [0.0]

        def device_clock():
            return now[0]

        def one_round():
            now[0] += measure.one_round(call, "gpu", reps, hold)

        saved, self.benchmark._timer = self.benchmark._timer, device_clock
        try:
            self.benchmark.pedantic(one_round, rounds=rounds, iterations=1)
        finally:
            self.benchmark._timer = saved


@pytest.fixture
def gpu_benchmark(request) -> GpuBenchmark:
    """pytest-benchmark's ``benchmark``, timing GPU work by the GPU's clock
    (:class:`GpuBenchmark`)."""
    import importlib.util

    if importlib.util.find_spec("pytest_benchmark") is None:
        pytest.fail("the gpu_benchmark fixture needs pytest-benchmark: "
                    "pip install pytest-benchmark", pytrace=False)
    try:
        benchmark = request.getfixturevalue("benchmark")
    except pytest.FixtureLookupError:
        pytest.fail("the gpu_benchmark fixture needs pytest-benchmark's plugin, "
                    "which is disabled here (-p no:benchmark)", pytrace=False)
    return GpuBenchmark(benchmark)
