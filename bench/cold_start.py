"""A process's first call, with the kernel cache empty and warm.

    NUMBA_ENABLE_CUDASIM=0 python bench/cold_start.py            # on a GPU machine
    python bench/cold_start.py --backend cpu                     # the cpu backend
    python bench/cold_start.py --out cold.json

Each case runs in fresh processes, first with an empty cache directory (every
kernel compiled), then twice more with the cache the first left (kernels
loaded): the time of the first call (the input made, and CuPy initialised,
before the timer), its CPU time (what a machine shared with other work still
measures), the kernels compiled and loaded, and whether Numba was imported. The cases:

* ``max``: ``pyreduce.max(x)`` of 2**20 float64 (a CuPy array on a GPU, else NumPy);
* ``lambda``: ``pyreduce.reduce(x, lambda a, b: a if a > b else b)`` of the same;
* ``sweep``: one process reducing NumPy arrays of 1e3, 1e4, ..., 1e8 float64
  with ``op=max``; the first call's time and the whole sweep's;
* ``demo``: ``python -m pyreduce demo`` (the whole command's time).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CASE = r"""
import json, sys, time
import numpy as np
case, backend = sys.argv[1], sys.argv[2]
host = np.random.default_rng(0).standard_normal(1 << 20)
x = host
if backend == "cuda":
    try:
        import cupy as cp
        x = cp.asarray(host)
        cp.cuda.Device().synchronize()
    except ImportError:
        pass
import pyreduce
from pyreduce import diskcache
start, cpu = time.perf_counter(), time.process_time()
if case == "max":
    got = pyreduce.max(x, backend=backend)
elif case == "lambda":
    got = pyreduce.reduce(x, lambda a, b: a if a > b else b, backend=backend)
first, cpu = time.perf_counter() - start, time.process_time() - cpu
total = first
if case == "sweep":
    sizes = [10**k for k in range(3, 9)]
    arrays = [np.random.default_rng(k).standard_normal(n) for k, n in enumerate(sizes)]
    start, cpu = time.perf_counter(), time.process_time()
    for k, a in enumerate(arrays):
        got = pyreduce.max(a, backend=backend)
        assert got == a.max()
        if k == 0:
            first, cpu = time.perf_counter() - start, time.process_time() - cpu
    total = time.perf_counter() - start
else:
    assert got == host.max(), got
stats = diskcache.stats()
print(json.dumps(dict(
    first=first, total=total, cpu=cpu,
    compiled=sum(s["stores"] for s in stats.values()),
    loaded=sum(s["hits"] for s in stats.values()),
    numba="numba" in sys.modules)))
"""


def run_case(case: str, backend: str, cache: str) -> dict:
    env = dict(os.environ, PYREDUCE_CACHE_DIR=cache, PYREDUCE_QUIET="1")
    if case == "demo":
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pyreduce", "demo", "--backend", backend],
                              env=env, cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if proc.returncode:
            raise RuntimeError(proc.stdout[-2000:] + proc.stderr[-2000:])
        return {"first": seconds, "total": seconds, "cpu": float("nan")}
    proc = subprocess.run([sys.executable, "-c", _CASE, case, backend], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="auto", help="auto: cuda if present, else cpu")
    p.add_argument("--cases", nargs="+", default=["max", "lambda", "sweep", "demo"])
    p.add_argument("--warm", type=int, default=2, help="warm runs after the cold one")
    p.add_argument("--out", help="also write the rows as JSON here")
    args = p.parse_args(argv)
    backend = args.backend
    if backend == "auto":
        sys.path.insert(0, ROOT)
        import pyreduce

        backend = "cuda" if "cuda" in pyreduce.available() else "cpu"
    rows = []
    print(f"backend {backend}; seconds of a fresh process's first call (sweep and demo: "
          f"also the whole)")
    print(f"{'case':8} {'cache':6} {'first':>8} {'cpu':>8} {'whole':>8} {'compiled':>9} "
          f"{'loaded':>7} numba")
    for case in args.cases:
        with tempfile.TemporaryDirectory(prefix="pyreduce-cold-") as cache:
            for run in range(1 + args.warm):
                row = dict(case=case, cache="empty" if run == 0 else "warm",
                           **run_case(case, backend, cache))
                rows.append(row)
                print(f"{case:8} {row['cache']:6} {row['first']:8.3f} {row['cpu']:8.3f} "
                      f"{row['total']:8.3f} "
                      f"{row.get('compiled', ''):>9} {row.get('loaded', ''):>7} "
                      f"{row.get('numba', '')}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"backend": backend, "date": time.strftime("%Y-%m-%d"), "rows": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
