"""A/B of the single-pass ticket: ``membar.gl`` + relaxed atomic (``fence``) against
one ``atom.acq_rel.gpu.add`` (``acqrel``), pyreduce and CuPy at 2**11..2**28.

    NUMBA_ENABLE_CUDASIM=0 python bench/ticket_ab.py acqrel a.json   # on the GPU
    NUMBA_ENABLE_CUDASIM=0 python bench/ticket_ab.py fence f.json

Run each mode in its own process, alternating; it prints the ticket's PTX and SASS."""
import json, os, sys, time
import numpy as np
sys.path.insert(0, os.path.dirname(__file__))
mode, out = sys.argv[1], sys.argv[2]
from pyreduce.backends import dialect, numba_cuda
if mode == "fence":
    numba_cuda.NumbaCudaBackend.dialect = dialect.Dialect("cuda")
import pyreduce
from pyreduce.tuning import device_seconds
from peers import Case, calls, data, expected
from compare import _close

CASES = [Case("float32", "sum", "float32"), Case("int32", "sum", "int32"),
         Case("float32", "max", "float32"), Case("float64", "sum", "float64")]
LOG2 = [11, 12, 13, 14, 15, 16, 18, 20, 22, 23, 24, 25, 26, 28]
rows = []
for case in CASES:
    full = data(case, 2**28, seed=1)
    for k in LOG2:
        n = 2**k
        x = full[:n]
        want = expected(case, x)
        reps = 50 if n <= 2**20 else 20 if n <= 2**24 else 5
        r = {}
        for lib in ("cupy", "pyreduce"):
            dev, host = calls(lib, case, x)
            ok = bool(_close(host(), want, case, n))
            r[lib] = (ok, [device_seconds(dev, reps=reps, batches=3) for _ in range(3)])
        for lib in ("cupy", "pyreduce"):
            ok, t = r[lib]
            rows.append(dict(mode=mode, case=case.name, n=n, lib=lib, correct=ok,
                             us=[s * 1e6 for s in t], GBps=x.nbytes / float(np.median(t)) / 1e9))
        c, p = rows[-2], rows[-1]
        print(f"{mode} {case.name} 2**{k}: cupy {c['GBps']:.0f} pyreduce {p['GBps']:.0f} "
              f"ratio {p['GBps'] / c['GBps']:.3f} {'ok' if p['correct'] and c['correct'] else 'WRONG'}",
              flush=True)
    del full
json.dump(rows, open(out, "w"), indent=1)
# the ticket as compiled
import re
from pyreduce.cache import KERNELS
for key, k in list(KERNELS._entries.items()):
    if getattr(k, "name", "").startswith("pyreduce_last_block_f4_f4_b512"):
        for sig, ptx in k.fn.inspect_asm().items():
            print(k.name, [l.strip() for l in ptx.splitlines() if re.search(r"atom|membar|fence", l)])
            try:
                sass = k.fn.inspect_sass(sig)
                print("SASS", [l.strip() for l in sass.splitlines() if re.search(r"ATOM|MEMBAR|FENCE|CCTL|ERRBAR", l)])
            except Exception as e:
                print("no sass:", e)
        break
