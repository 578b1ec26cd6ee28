"""The fixed tree's one kernel (``deterministic=True``) with other numbers of
nodes a lane in its last block's pass (``pyreduce.variants.pairwise.FINISH_ITEMS``):
registers and occupancy (``pyreduce.explain``), device time of calls back to back
against the default path's, and the result's bits, for float32 and float64
sums of 2**24 and 2**28 elements (CuPy arrays). Each setting runs in a process
of its own with an empty kernel cache: ``first`` (the first pass's items), then
the numbers given.

    NUMBA_ENABLE_CUDASIM=0 python bench/fixed_tree_finish.py [ITEMS ...]   # default: 4 8

``docs/performance/fixed-tree-finish-h200.txt`` is its output on an H200.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _report import has_cuda  # noqa: E402


def measure(setting: str) -> None:
    import cupy as cp

    from _timing import piped_seconds, steady_gpu

    import pyreduce
    from pyreduce.variants import pairwise

    first = pairwise.finishing_spec
    if setting == "first":
        pairwise.finishing_spec = lambda spec: dataclasses.replace(first(spec), items=spec.items)
    else:
        pairwise.finishing_spec = lambda spec: dataclasses.replace(first(spec),
                                                                   items=int(setting))
    steady_gpu(0.5)
    for dt in (np.float32, np.float64):
        for k in (24, 28):
            x = cp.asarray(np.random.default_rng(k).standard_normal(2**k).astype(dt))
            e = pyreduce.explain(x, "add", deterministic=True)
            bits = np.asarray(pyreduce.sum(x, deterministic=True, device_result=False))
            det = piped_seconds(lambda: pyreduce.sum(x, deterministic=True)) * 1e6
            default = piped_seconds(lambda: pyreduce.sum(x)) * 1e6
            again = piped_seconds(lambda: pyreduce.sum(x, deterministic=True)) * 1e6
            print(f"{setting} {np.dtype(dt).name} 2**{k}: det {det:.1f}/{again:.1f} us default "
                  f"{default:.1f} us ratio {min(det, again) / default:.3f} bits "
                  f"{bits.tobytes().hex()} {e.plan.spec.label} grid {e.plan.grid} "
                  f"{e.resources}", flush=True)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--setting"]:
        measure(args[1])
        return 0
    if not has_cuda():
        raise SystemExit("fixed_tree_finish.py needs a CUDA GPU (and NUMBA_ENABLE_CUDASIM "
                         "unset or 0)")
    status = 0
    for setting in ["first", *(args or ["4", "8"])]:
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "PYREDUCE_CACHE_DIR": cache}
            status |= subprocess.run([sys.executable, __file__, "--setting", setting],
                                     env=env).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
