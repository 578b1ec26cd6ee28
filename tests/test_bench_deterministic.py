"""bench/deterministic.py's commands where no GPU is (CI: the simulator and
the CPU): ``run`` measures the errors of the CPU columns, and its table is
made of them; ``wall`` and ``time``, which time a GPU, say so and write
nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script(*args, env=None):
    return subprocess.run([sys.executable, os.path.join(ROOT, "bench", "deterministic.py"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("command", ["wall", "time"])
def test_gpu_timings_without_a_gpu_say_so(command, tmp_path):
    out = tmp_path / "t.json"
    done = _script(command, "--out", str(out), env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert done.returncode != 0 and "needs a CUDA GPU" in done.stderr + done.stdout
    assert not out.exists()


def test_the_error_study_on_the_cpu_and_its_table(tmp_path):
    """``run`` at 2**16: every dataset's errors against the exact sum, the
    deterministic sum within its bound and no worse than a float32 left fold;
    ``report`` makes the table of them."""
    acc = tmp_path / "accuracy.json"
    done = _script("run", "--out", str(acc), "--max-log2", "16", env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(acc.read_text())["rows"]
    assert len({r["data"] for r in rows}) >= 4 and all(r["n"] == 2**16 for r in rows)
    for r in rows:
        e = r["errors"]
        assert e["pyreduce deterministic"] <= r["bound"], r
        assert e["pyreduce deterministic"] <= e["left fold"], r
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import deterministic

    table = "\n".join(deterministic.accuracy_table(json.loads(acc.read_text())))
    assert all(r["data"] in table for r in rows) and "pyreduce deterministic" in table
