"""Rows a warp or a block reduces each: lane accumulators against the ordered
fold, with CuPy and PyTorch, device time a call.

    NUMBA_ENABLE_CUDASIM=0 python bench/rows_lanes.py run --out rows.json
    python bench/rows_lanes.py report rows.json

For each float32 shape (``--shapes``, rows along ``axis=1``) and each of
``sum``, ``mean``, ``var``, ``max`` and ``argmax``, the call is timed with
:data:`pyreduce.batchplanner.LANE_ACCS` on and off in turns, twice each
(the plans and remembered calls forgotten at every switch), then CuPy's and
PyTorch's own calls on the same array; every pyreduce answer is checked
against CuPy's. Times are :func:`pyreduce.measure.device_seconds` (CUDA
events, the GPU held while the calls are queued).
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _cli import main  # noqa: E402
from _report import meta, row, table  # noqa: E402

CALLS = ("sum", "mean", "var", "max", "argmax")
SHAPES = ("131072x300", "1048576x300", "65536x200", "32768x1000", "16384x16384")


def _peers(x, t):
    """CuPy's and PyTorch's calls of each name on ``x`` (and its tensor ``t``)."""
    return {
        "sum": (lambda: x.sum(1), lambda: t.sum(1)),
        "mean": (lambda: x.mean(1), lambda: t.mean(1)),
        "var": (lambda: x.var(1), lambda: t.var(1, correction=0)),
        "max": (lambda: x.max(1), lambda: t.amax(1)),
        "argmax": (lambda: x.argmax(1), lambda: t.argmax(1)),
    }


def run(args) -> dict:
    import cupy as cp
    import torch

    import pyreduce
    from pyreduce import batchplanner, callmemo
    from pyreduce.measure import device_seconds

    rows = []
    for text in args.shapes:
        shape = tuple(int(s) for s in text.split("x"))
        x = cp.random.random(shape, dtype=cp.float32)
        t = torch.as_tensor(x, device="cuda")
        peers = _peers(x, t)
        for name in CALLS:
            fn = getattr(pyreduce, name)
            out = {"call": name, "shape": text, "lane_accs_us": [], "ordered_us": [],
                   "ok": True}
            for accs in (True, False, True, False):
                batchplanner.LANE_ACCS = accs
                batchplanner.clear_plans()
                callmemo.clear()
                got = cp.asnumpy(fn(x, axis=1))
                want = cp.asnumpy(peers[name][0]())
                out["ok"] &= bool(np.allclose(got, want, rtol=1e-4, atol=1e-5))
                seconds = device_seconds(lambda x=x, fn=fn: fn(x, axis=1), 20, 5, True)
                out["lane_accs_us" if accs else "ordered_us"].append(seconds * 1e6)
            batchplanner.LANE_ACCS = True
            out["cupy_us"] = device_seconds(peers[name][0], 20, 5, True) * 1e6
            out["torch_us"] = device_seconds(peers[name][1], 20, 5, True) * 1e6
            rows.append(out)
            print(out, file=sys.stderr, flush=True)
        del x, t
    return {"meta": meta(("numpy", "numba", "numba-cuda", "cupy-cuda13x", "torch")),
            "rows": rows}


def report(data: dict) -> str:
    m = data["meta"]
    lines = [f"Rows a warp or a block reduces each, float32 along axis=1, {m.get('gpu')}, "
             f"{m.get('date')}; device time a call (us), the better of two runs of each", ""]
    lines += table(["call", "shape", "lane accumulators", "ordered", "CuPy", "PyTorch",
                    "agrees"], [])
    for r in data["rows"]:
        lines.append(row([r["call"], r["shape"], f"{min(r['lane_accs_us']):.1f}",
                          f"{min(r['ordered_us']):.1f}", f"{r['cupy_us']:.1f}",
                          f"{r['torch_us']:.1f}", "yes" if r["ok"] else "NO"]))
    return "\n".join(lines) + "\n"


def _arguments(r) -> None:
    r.add_argument("--shapes", nargs="+", default=list(SHAPES), help="ROWSxLENGTH")


if __name__ == "__main__":
    main(__doc__, _arguments, run, report)
