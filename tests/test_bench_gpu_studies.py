"""The studies in bench/ that only time a GPU's calls and kernels: where no GPU
is (CI), each says so by name and fails."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("script", ["bare_calls.py", "call_stages.py", "fixed_tree_finish.py",
                                    "kernel_times.py",
                                    "rules.py", "torch_results.py"])
def test_without_a_gpu_it_says_so(script):
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", script)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert done.returncode != 0 and "needs a CUDA GPU" in done.stderr + done.stdout


def test_kernel_times_sum_each_kernels_time_a_call(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import _report
        import kernel_times
    finally:
        sys.path.pop(0)
    assert kernel_times.parse("mean bfloat16 2**24") == ("mean", "bfloat16", 2**24)
    assert kernel_times.short("void _3cdynamic_3e::pyreduce_sum[abi:v1](float*)") == "pyreduce_sum"
    assert kernel_times.short("void cub::CUB_3::detail::reduce::DeviceReduceSingleTileKernel"
                              "<Policy, float*>(float*)") == "DeviceReduceSingleTileKernel"
    row = {"case": "sum float32 2**24", "libraries": {
        "pyreduce": {"a": [1, 20.0]}, "cupy": {"b": [2, 16.0]},
        "torch": {"Memset": [1, 1.0], "c": [1, 20.0]}}}
    text = kernel_times.line(row)
    assert text.startswith("sum float32 2**24: best peer / pyreduce 0.80")
    assert "torch 21.0 us (Memset x1 1.0; c x1 20.0)" in text
    data = {"rows": []}
    _report.add_row(data, row, text, str(tmp_path / "k.json"))
    assert _report.load(str(tmp_path / "k.json"))["rows"] == [row]


def test_ready_span_us_takes_medians_of_events_in_microseconds(monkeypatch):
    """bench/_timing.ready_span_us on stand-ins for CuPy's and PyTorch's events:
    each call between two recorded events on the current stream after a
    synchronisation, the GPU's span converted from milliseconds, medians."""
    import types

    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import _timing
    finally:
        sys.path.pop(0)
    log = []

    class Event:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self, stream):
            log.append(("record", stream))
            self.at = len(log)

        def synchronize(self):
            log.append("wait")

        def elapsed_time(self, end):  # PyTorch's: milliseconds
            return (end.at - self.at) * 0.5

    cuda = types.SimpleNamespace(
        get_current_stream=lambda: "cs", Event=Event,
        Device=lambda: types.SimpleNamespace(synchronize=lambda: log.append("sync")),
        get_elapsed_time=lambda a, b: a.elapsed_time(b))
    tcuda = types.SimpleNamespace(current_stream=lambda: "ts", Event=Event,
                                  synchronize=lambda: log.append("sync"))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=tcuda))
    for events, stream in (("cupy", "cs"), ("torch", "ts")):
        log.clear()
        ready, span = _timing.ready_span_us(lambda: log.append("call"), events, reps=3)
        assert log[:5] == ["sync", ("record", stream), "call", ("record", stream), "wait"]
        assert len(log) == 15 and span == 1000.0  # two log entries apart: 1 ms
        assert 0 < ready < 1e6


def test_no_study_takes_a_standard_library_module_name():
    """A script's own folder comes first on its import path, so a study named as
    a standard-library module (bench/statistics.py once) is imported in its place
    by every study and by pyreduce itself (pyreduce.measure's ``statistics``)."""
    names = {f[:-3] for f in os.listdir(os.path.join(ROOT, "bench")) if f.endswith(".py")}
    assert not names & set(sys.stdlib_module_names)


def test_a_benchmark_run_of_one_process_is_timed(tmp_path):
    """``python -m pytest bench/...`` without ``-n`` times its benchmarks: the
    project's addopts name ``--dist`` for the tests, and pytest-benchmark turns
    itself off under any ``--dist`` but ``no`` (bench/conftest.py sets it)."""
    out = tmp_path / "b.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         os.path.join("bench", "bench_reduce.py"), "-k", "cpu and sum and 1024",
         f"--benchmark-json={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        # a session of its own: pytest-benchmark turns itself off in an xdist
        # worker, which it tells by the variables this test's worker would pass on
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},
             "NUMBA_ENABLE_CUDASIM": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    import json

    timed = json.loads(out.read_text())["benchmarks"]
    assert {b["name"] for b in timed} == {"test_cpu[pyreduce-sum-1024]",
                                          "test_cpu[pyreduce-auto-sum-1024]",
                                          "test_cpu[numpy-sum-1024]"}
    assert all(b["stats"]["rounds"] > 1 for b in timed)
