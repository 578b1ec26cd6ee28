"""The studies in bench/ that only time a GPU's calls and kernels: where no GPU
is (CI), each says so by name and fails."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("script", ["call_stages.py", "fixed_tree_finish.py", "kernel_times.py",
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
