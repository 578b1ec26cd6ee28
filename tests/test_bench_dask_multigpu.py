"""bench/dask_multigpu.py end to end in its CPU mode: worker processes of
``distributed`` in place of GPUs, tiny arrays, every op checked against the
script's own references, a case skipped for want of (declared) memory, the time
breakdown, the report and its chart."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("dask.array")
pytest.importorskip("distributed")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "bench", "dask_multigpu.py")


def _script(*args, timeout=120):
    done = subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_cpu_mode_end_to_end(tmp_path):
    out = tmp_path / "multigpu.json"
    # an op of each kind (built-in, structured, an ordered user op; the others take
    # the same paths); chunks of 2**10 elements; a "device" of 40 KiB holds 24 KiB
    # (60%): 2**13 float32 (32 KiB) fits only on two workers, int8 everywhere
    printed = _script("run", "--out", str(out), "--device", "cpu", "--gpus", "1", "2",
                      "--sizes", "12", "13", "--chunk", "10", "--dtypes", "float32", "int8",
                      "--ops", "sum", "argmax", "last_nonzero", "--reps", "1",
                      "--device-memory", str(40 / 2**20))
    assert "N=2 2**13 float32 argmax: pyreduce" in printed  # progress lines
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert rows and all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]
    ran = {(r["gpus"], r["k"], r["dtype"], r["op"]) for r in rows}
    assert ran == {(g, k, d, op) for g in (1, 2) for k in (12, 13)
                   for d, ops in (("float32", ("sum", "argmax")), ("int8", ("sum", "last_nonzero")))
                   for op in ops if (g, k, d) != (1, 13, "float32")}
    for r in rows:
        assert r["pyreduce_s"] > 0 and len(r["pyreduce_times"]) == 1
        assert (r["dask_s"] is not None) == (r["op"] == "sum")
    last = [r for r in rows if r["op"] == "last_nonzero"]
    assert all(r["value"] == r["reference"] != 0 for r in last)
    [skip] = data["skipped"]
    assert (skip["gpus"], skip["k"], skip["dtype"]) == (1, 13, "float32")
    assert "over 60%" in skip["reason"]
    assert [len(c["workers"]) for c in data["clusters"]] == [1, 2]
    for a in data["arrays"]:  # the chunks in equal runs, one a worker
        assert sorted(a["held"].values()) == [a["chunks"] // a["gpus"]] * a["gpus"]
    b = data["breakdown"]
    assert {(x["gpus"], x["k"], x["lib"]) for x in b} == {
        (1, 12, "pyreduce"), (1, 12, "dask"), (2, 12, "pyreduce"), (2, 12, "dask"),
        (2, 13, "pyreduce"), (2, 13, "dask")}
    assert all(x["wall_s"] > 0 and x["chunk_tasks"] == x["chunks"] for x in b)

    chart = tmp_path / "multigpu.png"
    table = _script("report", str(out), "--chart", str(chart))
    assert "| 2<sup>13</sup> | float32 | `sum` vs `x.sum()` | 2 |" in table
    assert "| 2<sup>12</sup> | int8 | `last_nonzero` | 2 |" in table
    assert "WRONG" not in table and "ERROR" not in table
    assert "Skipped:" in table and "Where one compute's time goes" in table
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "no chart" in table
    else:
        assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
