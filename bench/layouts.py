"""Kernel layouts of the structured reductions against each other and the peers:
what ``planner._tuple_rule`` was chosen from.

    NUMBA_ENABLE_CUDASIM=0 python bench/layouts.py                  # 2**26 and 2**28
    NUMBA_ENABLE_CUDASIM=0 python bench/layouts.py --log2 24 --only var
    NUMBA_ENABLE_CUDASIM=0 python bench/layouts.py --log2 24 26 28 --dtypes float16 bfloat16

For each size, dtype and call, pyreduce under ``variant="auto"`` and under each
explicit :class:`pyreduce.Tuning` of :data:`LAYOUTS`, next to PyTorch's call
(and CuPy's for ``sum`` and ``mean``), on the same CuPy array. Each line gives
two times per call, the median of 7 rounds: *piped*, calls back to back with one
device synchronisation at the end of a round (what the GPU takes, the host's
work hidden behind it), and *synced*, a synchronisation after every call (what
a call that waits for its result takes). The GPU is brought to its steady state
first (``_timing.steady_gpu``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import steady_gpu  # noqa: E402

#: the layouts of half-precision input's sums (widened into float32) and means
#: (two float64 fields), ordered and per lane, in one launch and two
_HALF_SUM = [("warp_shuffle", 16, 256), ("warp_shuffle", 32, 256),
             ("warp_shuffle_x2", 16, 256), ("last_block", 16, 512),
             ("last_block_lanes", 16, 256), ("last_block_lanes", 16, 512),
             ("last_block_lanes", 32, 256), ("warp_shuffle_lanes", 16, 256),
             ("warp_shuffle_lanes", 32, 256), ("warp_shuffle_lanes", 16, 512)]
_HALF_MEAN = [("warp_shuffle", 16, 256), ("warp_shuffle", 32, 256),
              ("warp_shuffle_x2", 16, 256), ("last_block", 16, 256),
              ("last_block_lanes", 8, 256), ("last_block_lanes", 16, 256),
              ("last_block_lanes", 32, 256), ("warp_shuffle_lanes", 16, 256),
              ("warp_shuffle_lanes", 32, 256)]

#: (variant, items per thread, block size) tried for each dtype and call
LAYOUTS = {
    "float32": {"sum": [("warp_shuffle", 8, 256)],
                "mean": [("warp_shuffle", 16, 256), ("warp_shuffle", 32, 256),
                         ("warp_shuffle_x2", 8, 256), ("last_block_x2", 8, 256),
                         ("last_block_lanes", 8, 256), ("warp_shuffle_lanes", 16, 256),
                         ("warp_shuffle_lanes", 32, 256)],
                "var": [("warp_shuffle", 16, 256), ("warp_shuffle", 32, 256),
                        ("warp_shuffle_x2", 8, 256), ("last_block_x2", 8, 256),
                        ("last_block_lanes", 8, 256), ("last_block_lanes", 16, 256),
                        ("warp_shuffle_lanes", 8, 256), ("warp_shuffle_lanes", 16, 256),
                        ("warp_shuffle_lanes", 32, 256)],
                "argmax": [("warp_shuffle", 16, 256), ("warp_shuffle", 32, 256),
                           ("warp_shuffle", 16, 512), ("warp_shuffle_x2", 8, 256),
                           ("last_block_lanes", 8, 256), ("warp_shuffle_lanes", 16, 256),
                           ("warp_shuffle_lanes", 32, 256)],
                "minmax": [("warp_shuffle", 16, 256), ("warp_shuffle", 32, 256),
                           ("last_block_lanes", 8, 256), ("warp_shuffle_lanes", 16, 256),
                           ("warp_shuffle_lanes", 32, 256)]},
    "float64": {"mean": [("warp_shuffle", 2, 256), ("warp_shuffle", 4, 256),
                         ("warp_shuffle", 8, 256), ("warp_shuffle_lanes", 4, 256)],
                "var": [("warp_shuffle", 4, 256), ("warp_shuffle", 8, 256),
                        ("last_block_lanes", 4, 256), ("warp_shuffle_lanes", 4, 256),
                        ("warp_shuffle_lanes", 8, 256)],
                "argmax": [("warp_shuffle", 4, 256), ("warp_shuffle", 8, 256),
                           ("warp_shuffle_x2", 4, 256), ("last_block_lanes", 4, 256),
                           ("warp_shuffle_lanes", 4, 256), ("warp_shuffle_lanes", 8, 256)],
                "minmax": [("warp_shuffle", 4, 256), ("warp_shuffle", 8, 256),
                           ("last_block_lanes", 4, 256), ("warp_shuffle_lanes", 4, 256),
                           ("warp_shuffle_lanes", 8, 256)]},
    "float16": {"sum": _HALF_SUM, "mean": _HALF_MEAN},
    "bfloat16": {"sum": _HALF_SUM, "mean": _HALF_MEAN},
}


def peer_call(name: str, t):
    """PyTorch's call of ``name`` on the tensor ``t`` (``bench/grids.py`` too)."""
    import torch

    calls = {"sum": t.sum, "mean": t.mean, "argmax": t.argmax, "argmin": t.argmin,
             "minmax": lambda: torch.aminmax(t), "var": lambda: t.var(correction=0)}
    return calls[name]


def _times(f, reps: int, sync) -> tuple[float, float]:
    """(piped, synced) microseconds per call of ``f``, medians of 7 rounds."""
    f()
    sync()
    out = []
    for each in (False, True):
        rounds = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(reps):
                f()
                if each:
                    sync()
            sync()
            rounds.append((time.perf_counter() - t0) / reps * 1e6)
        out.append(float(np.median(rounds)))
    return out[0], out[1]


def run(log2, only, dtypes=()) -> None:
    import cupy as cp
    import torch

    import pyreduce

    sync = cp.cuda.Device().synchronize
    steady_gpu()
    for k in log2:
        n = 2**k
        reps = 20 if k >= 28 else 50
        for dtype, calls in LAYOUTS.items():
            if dtypes and dtype not in dtypes:
                continue
            x = cp.random.standard_normal(n, dtype=cp.float32)
            if dtype == "bfloat16":  # CuPy has none: PyTorch's tensor for every library
                x = t = torch.as_tensor(x, device="cuda").to(torch.bfloat16)
            else:
                x = x.astype(dtype)
                t = torch.as_tensor(x, device="cuda")
            for name, layouts in calls.items():
                if only and name not in only:
                    continue
                rows = [("torch", peer_call(name, t))]
                if name in ("sum", "mean") and dtype != "bfloat16":
                    rows.append(("cupy", getattr(x, name)))
                rows.append(("auto", lambda name=name, x=x: getattr(pyreduce, name)(x)))
                for variant, items, block in layouts:
                    tuning = pyreduce.Tuning(variant=variant, items_per_thread=items,
                                             block_size=block)
                    rows.append((f"{variant}/{items}/{block}",
                                 lambda name=name, tuning=tuning, x=x:
                                 getattr(pyreduce, name)(x, tuning=tuning)))
                for label, f in rows:
                    piped, synced = _times(f, reps, sync)
                    print(f"2**{k} {dtype:8s} {name:7s} {label:22s} piped {piped:8.1f} us"
                          f"  synced {synced:8.1f} us", flush=True)
            del x, t


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log2", type=int, nargs="+", default=[26, 28],
                        help="sizes as powers of two (default 26 28)")
    parser.add_argument("--only", nargs="+", metavar="CALL",
                        help="only these calls (sum, mean, var, argmax, minmax)")
    parser.add_argument("--dtypes", nargs="+", metavar="DTYPE",
                        help=f"only these dtypes ({', '.join(LAYOUTS)})")
    args = parser.parse_args()
    run(args.log2, args.only or (), args.dtypes or ())
