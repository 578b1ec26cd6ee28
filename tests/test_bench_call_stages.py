"""bench/call_stages.py times a GPU's calls: where no GPU is (CI), it says so
by name and fails."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_without_a_gpu_it_says_so():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "call_stages.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert done.returncode != 0 and "needs a CUDA GPU" in done.stderr + done.stdout
