"""pyreduce against Dask's own reductions, on the same chunked Dask array.

    python bench/dask_compare.py run --out dask.json           # GPU: CuPy chunks
    python bench/dask_compare.py run --out dask.json --device cpu --sizes 20 22
                                                               # no GPU: NumPy chunks
    python bench/dask_compare.py report dask.json              # the Markdown table

``run`` builds, for each size ``2**k`` (``--sizes``, default 28 29 30 31 on a GPU
and 20 22 on the CPU), a float32 Dask array in chunks of ``2**c`` elements
(``--chunk``, default 26 on a GPU and 18 on the CPU): NumPy chunks from Dask's
random generator, turned into CuPy chunks with ``x.map_blocks(cp.asarray)`` on a
GPU, and persisted, so that the timings read chunks already in (GPU) memory. It
then times, on that array, pyreduce's ``sum``, ``max``, ``argmax`` and a user
lambda (``a if a > b else b``) against Dask's ``x.sum()``, ``x.max()``,
``x.argmax()`` (and ``x.max()`` again, the lambda's peer): each the median wall
time of ``--reps`` computes of the lazy result after one untimed compute (which
compiles the kernels), graph building excluded, with each result checked
(pyreduce's against Dask's: a sum to a relative 1e-4, the others exactly).
GB/s are input bytes over that time.

The scheduler (``--scheduler``): ``auto`` (default) uses a ``dask_cuda``
``LocalCUDACluster`` of one worker when ``dask_cuda`` is importable on a GPU, and
Dask's threaded scheduler otherwise; ``threads`` forces the latter. The JSON
holds the device, the date, the versions, the scheduler and every timing;
``report`` prints the table that ``docs/scaling.md`` quotes.
"""

from __future__ import annotations

import json
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
import pyreduce  # noqa: E402  (this checkout's)
from _cli import main  # noqa: E402
from _report import gpu_name, log2, table, today, versions  # noqa: E402
from _timing import median_seconds  # noqa: E402
from peers import to_host, user_max  # noqa: E402,F401  (user_max: the lambda's op)

OPS = ("sum", "max", "argmax", "lambda")


def expressions(x) -> dict:
    """``op: (pyreduce's lazy result, Dask's)`` on the Dask array ``x``."""
    return {
        "sum": (pyreduce.sum(x), x.sum()),
        "max": (pyreduce.max(x), x.max()),
        "argmax": (pyreduce.argmax(x), x.argmax()),
        "lambda": (pyreduce.reduce(x, user_max), x.max()),
    }


def agree(op: str, ours, theirs) -> bool:
    ours, theirs = _host(ours), _host(theirs)
    if op == "sum":
        return bool(abs(float(ours) - float(theirs)) <= 1e-4 * abs(float(theirs)))
    return bool(ours == theirs)


def _host(value):
    """A result as a Python scalar (a CuPy 0-d array's through the host)."""
    return to_host(value).item()


def timed(compute, expr, reps: int) -> tuple[float, object]:
    """The median wall time of ``reps`` computes of ``expr`` (after one untimed),
    and its value."""
    value = compute(expr)
    return median_seconds(lambda: compute(expr), reps), value


def array(n: int, chunk: int, device: str, persist):
    """A float32 Dask array of ``n`` uniform values in ``[0, 1)``, persisted: CuPy
    chunks on a GPU, NumPy ones on the CPU."""
    import dask.array as da

    x = da.random.default_rng(0).random(n, chunks=chunk, dtype=np.float32)
    if device == "gpu":
        import cupy as cp

        x = x.map_blocks(cp.asarray)
    return persist(x)


def scheduler(kind: str, device: str):
    """``(name, compute, persist, close)`` for the chosen scheduler."""
    import dask

    if kind == "auto" and device == "gpu":
        try:
            import dask_cuda  # noqa: F401

            kind = "cuda-cluster"
        except ImportError:
            kind = "threads"
    elif kind == "auto":
        kind = "threads"
    if kind == "threads":
        def compute(expr):
            return dask.compute(expr, scheduler="threads")[0]

        def persist(x):
            return x.persist(scheduler="threads")

        return kind, compute, persist, lambda: None
    from dask_cuda import LocalCUDACluster
    from distributed import Client, wait

    cluster = LocalCUDACluster(n_workers=1)
    client = Client(cluster)

    def persist(x):
        x = client.persist(x)
        wait(x)
        return x

    def close():
        client.close()
        cluster.close()

    def compute(expr):
        return client.compute(expr).result()

    return "LocalCUDACluster(n_workers=1)", compute, persist, close


def meta(device: str, sched: str) -> dict:
    name = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"
    if device == "gpu":
        name = gpu_name("cupy")
    return dict(device=name, date=today(), scheduler=sched,
                versions=versions(("dask", "distributed", "dask-cuda", "numpy", "numba",
                                   "numba-cuda", "cupy-cuda12x", "cupy-cuda13x")))


def run(args) -> dict:
    device = args.device
    if device == "auto":
        try:
            import cupy  # noqa: F401

            device = "gpu" if cupy.cuda.runtime.getDeviceCount() > 0 else "cpu"
        except Exception:  # no CuPy or no GPU
            device = "cpu"
    sizes = args.sizes or ([28, 29, 30, 31] if device == "gpu" else [20, 22])
    chunk = 2 ** (args.chunk or (26 if device == "gpu" else 18))
    sched, compute, persist, close = scheduler(args.scheduler, device)
    data = dict(meta=meta(device, sched), rows=[])
    try:
        for k in sizes:
            n = 2**k
            x = array(n, chunk, device, persist)
            for op, (ours, theirs) in expressions(x).items():
                t_ours, v_ours = timed(compute, ours, args.reps)
                t_theirs, v_theirs = timed(compute, theirs, args.reps)
                row = dict(n=n, chunk=chunk, chunks=x.numblocks[0], op=op,
                           pyreduce_s=t_ours, dask_s=t_theirs, bytes=n * 4,
                           ok=agree(op, v_ours, v_theirs))
                data["rows"].append(row)
                print(json.dumps(row), flush=True)
            del x
    finally:
        close()
    return data


def report(data: dict) -> str:
    m = data["meta"]
    lines = [f"{m['device']}, {m['date']}, {m['scheduler']}; float32, "
             f"dask {m['versions'].get('dask', '?')}", ""]
    cells = []
    for r in data["rows"]:
        peer = "x.max()" if r["op"] == "lambda" else f"x.{r['op']}()"
        cells.append([log2(r["n"]), f"{r['chunks']} x {log2(r['chunk'])}", f"{r['op']} (vs {peer})",
                      f"{r['pyreduce_s'] * 1e3:.2f}", f"{r['dask_s'] * 1e3:.2f}",
                      f"{r['bytes'] / r['pyreduce_s'] / 1e9:.1f}",
                      f"{r['bytes'] / r['dask_s'] / 1e9:.1f}",
                      f"{r['dask_s'] / r['pyreduce_s']:.2f}", "agrees" if r["ok"] else "WRONG"])
    lines += table(["elements", "chunks", "op", "pyreduce (ms)", "Dask (ms)", "pyreduce GB/s",
                    "Dask GB/s", "Dask time / pyreduce time", "result"], cells)
    return "\n".join(lines) + "\n"


def arguments(r) -> None:
    r.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    r.add_argument("--sizes", type=int, nargs="*", help="log2 of the element counts")
    r.add_argument("--chunk", type=int, help="log2 of the chunk size")
    r.add_argument("--reps", type=int, default=5)
    r.add_argument("--scheduler", choices=("auto", "threads", "cuda-cluster"),
                   default="auto")


if __name__ == "__main__":
    main(__doc__, arguments, run, report)
