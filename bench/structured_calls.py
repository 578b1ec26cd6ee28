"""mean, var, std, argmax, argmin and minmax against CuPy and PyTorch, of whole
arrays and along axes, in one process on one GPU.

    NUMBA_ENABLE_CUDASIM=0 python bench/structured_calls.py run --out structured_calls.json
    python bench/structured_calls.py report structured_calls.json     # a Markdown table

Every library gets the same CuPy array (PyTorch a zero-copy tensor of it),
after the GPU is brought to its steady state (``_timing.steady_gpu``). A call
is timed to its result being ready: the wall time per call of calls back to
back, each followed by a device synchronisation (some calls wait for the GPU
within them, so a held GPU would not time every library fairly), median of
rounds. Each library's answer is checked against NumPy's on the host first
(float64 for the statistics, exactly for the indices and extremes);
a row whose answer disagrees is reported and not timed.

Cases: whole arrays of 2**24, 2**26 and 2**28 float32 (and 2**26 float64);
along axes: ``axis=1`` and ``axis=0`` of a 2**14 x 2**14 float32 matrix, of a
tall-skinny 2**24 x 16 and a short-wide 16 x 2**24 one. ``minmax`` has no
single call in CuPy (``x.min()`` and ``x.max()``, two passes) and is
``torch.aminmax`` in PyTorch.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _cli import main  # noqa: E402
from _report import log2, meta, row as _md_row, table  # noqa: E402
from _timing import host_seconds, steady_gpu  # noqa: E402
from peers import DISTS, STAT_LIBS as LIBS, statistic as _call, to_host as _host  # noqa: E402

FUNCTIONS = ["mean", "var", "std", "argmax", "argmin", "minmax"]
WHOLE = [(2**24, "float32"), (2**26, "float32"), (2**28, "float32"), (2**26, "float64")]
AXES = [((2**14, 2**14), 1), ((2**14, 2**14), 0), ((2**24, 16), 1), ((2**24, 16), 0),
        ((16, 2**24), 1), ((16, 2**24), 0)]


def _expected(name: str, h: np.ndarray, axis):
    if name == "minmax":
        return h.min(axis=axis), h.max(axis=axis)
    if name in ("argmax", "argmin"):
        return getattr(h, name)(axis=axis)
    return getattr(h.astype(np.float64), name)(axis=axis)


def _agrees(got, want, name: str) -> bool:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return False
        if name in ("mean", "var", "std"):
            if not np.allclose(g, w, rtol=1e-4, atol=1e-6):
                return False
        elif not np.array_equal(g, w):
            return False
    return True


def _row(case: str, name: str, x, axis, rounds: int, libs=LIBS) -> dict:
    import cupy as cp

    h = x.get()
    want = _expected(name, h, axis)
    row = {"case": case, "function": name, "bytes": int(x.nbytes), "seconds": {},
           "ok": True}
    for lib in libs:
        try:
            fn = _call(lib, name, x, axis)
            got = _host(fn())
        except Exception as e:  # a library without the call: reported, not timed
            row["seconds"][lib] = None
            row.setdefault("errors", {})[lib] = f"{type(e).__name__}: {e}"[:200]
            continue
        if not _agrees(got, want, name):
            row["ok"] = False
            row.setdefault("disagree", []).append(lib)
            continue

        def ready(fn=fn):
            fn()
            cp.cuda.Device().synchronize()

        row["seconds"][lib] = host_seconds(ready, calls=5, rounds=rounds)
    print(_line(row), flush=True)
    return row


def run(args) -> dict:
    import cupy as cp

    rng = cp.random.default_rng(0)
    libs = [lib for lib in LIBS if lib in (args.libs or LIBS)]
    rows = []
    steady_gpu()

    def wanted(case: str) -> bool:
        return not args.only or any(part in case for part in args.only)

    for n, dtype in WHOLE:
        case = f"{dtype} {log2(n)}"
        if not wanted(case):
            continue
        x = rng.standard_normal(n, dtype=cp.float32).astype(dtype)
        for name in FUNCTIONS:
            rows.append(_row(case, name, x, None, args.rounds, libs))
        del x
    for shape, axis in AXES:
        case = f"float32 {shape[0]} x {shape[1]} axis={axis}"
        if not wanted(case):
            continue
        x = rng.standard_normal(shape, dtype=cp.float32)
        for name in ("mean", "var", "argmax", "minmax"):
            rows.append(_row(case, name, x, axis, args.rounds, libs))
        del x
    return {"meta": meta(DISTS), "libs": libs, "rows": rows}


def _us(s) -> str:
    return "-" if s is None else f"{s * 1e6:.0f} us"


def _line(row: dict, libs=LIBS) -> str:
    s = row["seconds"]
    peers = [v for k, v in s.items() if k != "pyreduce" and v is not None]
    ratio = (f"{min(peers) / s['pyreduce']:.2f}" if peers and s.get("pyreduce") else "-")
    flag = "" if row["ok"] else f" (disagrees: {', '.join(row['disagree'])})"
    return _md_row([row["case"], f"`{row['function']}`"] + [_us(s.get(lib)) for lib in libs]
                   + [ratio]) + flag


def report(data: dict) -> str:
    meta = data["meta"]
    head = (f"{meta['gpu']}, {meta['date']}; time per call to a ready result. "
            "Last column: the best peer's time over pyreduce's (above 1: pyreduce "
            "is faster).\n")
    libs = data.get("libs", LIBS)
    return "\n".join([head] + table(["case", "call"] + libs + ["best peer / pyreduce"], [])
                     + [_line(r, libs) for r in data["rows"]])


def _arguments(parser) -> None:
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", action="append", metavar="CASE",
                        help='measure only the cases whose name contains CASE (repeatable); '
                             'e.g. "2**24" or "axis=1"')
    parser.add_argument("--libs", nargs="+", choices=LIBS, metavar="LIB",
                        help=f"time only these of {', '.join(LIBS)} (pyreduce among them); "
                             "CuPy's calls along axis 0 of a tall-skinny array take 0.2-0.4 s")


if __name__ == "__main__":
    main(__doc__, _arguments, run, report)
