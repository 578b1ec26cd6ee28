"""A quick check of the GPU path before longer runs: every input kind, vector and
scalar loads, streams, device results, initial values, non-commutative ops.
Prints one line per check and exits non-zero if any failed.

    NUMBA_ENABLE_CUDASIM=0 python bench/smoke_gpu.py
"""

from __future__ import annotations

import sys
import traceback

import numpy as np


def main() -> int:
    import cupy as cp
    from numba import cuda

    import pyreduce

    failures = 0

    def check(name, got, want):
        nonlocal failures
        ok = bool(np.all(np.asarray(got) == np.asarray(want)))
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {got!r} (want {want!r})", flush=True)

    def run(name, fn):
        nonlocal failures
        try:
            fn()
        except Exception:
            failures += 1
            print(f"FAIL {name}: raised", flush=True)
            traceback.print_exc()

    last = lambda a, b: b if b != 0 else a  # noqa: E731
    first = lambda a, b: a if a != 0 else b  # noqa: E731
    rng = np.random.default_rng(0)
    host = rng.standard_normal(1_000_003).astype(np.float32)
    x = cp.asarray(host)

    def basics():
        check("host max", pyreduce.max(host), host.max())
        check("cupy max", pyreduce.max(x), host.max())
        check("cupy last", pyreduce.reduce(x, last), host[-1])
        check("cupy first, offset 1 (no vector loads)", pyreduce.reduce(x[1:], first), host[1])
        check("cupy reversed last", pyreduce.reduce(x[::-1], last), host[0])
        check("numba array last", pyreduce.reduce(cuda.as_cuda_array(x), last), host[-1])
        for vec in (True, False):
            for v in pyreduce.variants:
                loads = None if v in ("naive", "reduced_divergence", "sequential") else vec
                got = pyreduce.reduce(x, last, tuning=pyreduce.Tuning(variant=v,
                                                                      vector_loads=loads))
                check(f"variant {v} vector={vec}", got, host[-1])
        i8 = cp.asarray(rng.integers(-128, 127, 3_000_001, dtype=np.int8, endpoint=True))
        check("int8 sum -> int64", int(pyreduce.sum(i8)),
              int(cp.asnumpy(i8).astype(np.int64).sum()))
        b = cp.asarray(rng.random(100_001) < 0.5)
        check("bool any", bool(pyreduce.reduce(b, np.logical_or)), bool(cp.asnumpy(b).any()))
        f8 = cp.asarray(rng.standard_normal(2**20 + 7))
        check("float64 last", pyreduce.reduce(f8, last), float(f8[-1]))

    def results_and_streams():
        out = pyreduce.max(x, device_result=True)  # a CuPy input: a 0-d CuPy result
        check("device result is a 0-d CuPy array", isinstance(out, cp.ndarray) and
              out.shape == (), True)
        check("device result", float(out), float(host.max()))
        d = pyreduce.max(cuda.as_cuda_array(x), device_result=True)
        check("device result (Numba input)", d.copy_to_host()[()], host.max())
        buf = cp.full(3, -1.0, dtype=cp.float32)
        pyreduce.max(x, out=buf[1:2])
        check("out=", cp.asnumpy(buf).tolist(), [-1.0, float(host.max()), -1.0])
        check("initial", pyreduce.reduce(x[:10], last, initial=5.0), host[9])
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            y = x * 2
            got = pyreduce.max(y)  # on CuPy's current stream
        check("on CuPy's current stream", got, (host * 2).max())
        ns = cuda.stream()
        check("numba stream", pyreduce.max(x, stream=ns), host.max())
        check("cupy stream object", pyreduce.max(x, stream=s), host.max())
        try:
            import torch

            t = torch.as_tensor(x, device="cuda")
            check("torch last", pyreduce.reduce(t, last), host[-1])
            ts = torch.cuda.Stream()
            with torch.cuda.stream(ts):
                t2 = t + 1
                check("torch current stream", pyreduce.max(t2), host.max() + 1)
        except ImportError:
            print("(no torch)")

    def layouts():
        m = cp.asarray(rng.standard_normal((300, 41)).astype(np.float32))
        check("2-D transposed last", pyreduce.reduce(m.T, last), float(m.T.ravel()[-1]))
        got = float(pyreduce.sum(m[::2, 3:30:3], dtype=np.float64))
        want = float(cp.asnumpy(m[::2, 3:30:3]).astype(np.float64).sum())
        check("2-D strided sum (to 1e-9)", round(got, 9), round(want, 9))

    for name, fn in [("basics", basics), ("results and streams", results_and_streams),
                     ("layouts", layouts)]:
        run(name, fn)
    e = pyreduce.explain(x, "max")
    print(e.plan, e.resources, sep="\n")
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
