"""The studies in bench/ that only time a GPU's calls and kernels: where no GPU
is (CI), each says so by name and fails."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("script", ["call_stages.py", "fixed_tree_finish.py", "rules.py"])
def test_without_a_gpu_it_says_so(script):
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", script)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert done.returncode != 0 and "needs a CUDA GPU" in done.stderr + done.stdout
