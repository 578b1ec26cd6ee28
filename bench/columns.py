"""Columns (``axis=0``) of CuPy matrices against CuPy and PyTorch, in one process:
device time per call, and what a tuning would change.

    NUMBA_ENABLE_CUDASIM=0 python bench/columns.py                     # every case
    NUMBA_ENABLE_CUDASIM=0 python bench/columns.py --only 16x16777216 --tunings i2 i4 i8
    NUMBA_ENABLE_CUDASIM=0 python bench/columns.py --out columns.txt

Each case is a call (``sum``, ``max``, ``mean``, ``var``, ``argmax``, ``minmax``)
of a matrix of :data:`SHAPES` along ``axis=0``, ``float32`` unless the shape
names another dtype. Every library gets the same CuPy array (PyTorch a
zero-copy tensor of it, ``var`` with ``correction=0``); each answer is checked
against CuPy's float64 one first (integers and indices exactly) and a call that
disagrees is not timed. The time is the device's per call of calls back to
back (:func:`pyreduce.measure.device_seconds`: CUDA events, the GPU held while
the calls are queued, median of 5 batches of 20). ``--tunings`` adds a
pyreduce column per :class:`pyreduce.Tuning` written as ``i<items>``,
``b<block size>`` and ``m<max blocks>`` run together (``i4b256``): the A/B of a
rule, in the same process as the peers; ``--runs`` adds one (``runs``) with the
columns kernels' float32 runs of rows switched the other way from
:data:`pyreduce.batchplanner.COLUMN_RUNS`'s default.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _report import gpu_name, today, versions, versions_text  # noqa: E402
from _timing import device_seconds, steady_gpu  # noqa: E402
from peers import DISTS, statistic  # noqa: E402

#: (rows, columns, dtype) of the matrices, with the calls each gets
SHAPES = [
    (4096, 4096, "float32"), (16384, 16384, "float32"), (8192, 2048, "float32"),
    (2048, 8192, "float32"), (65536, 1024, "float32"), (1024, 65536, "float32"),
    (300, 4096, "float32"), (1048576, 32, "float32"), (4096, 4096, "float64"),
    (16384, 4096, "float64"), (4096, 4096, "int32"), (1048576, 64, "float32"),
    (1048576, 100, "float32"), (4194304, 48, "float32"), (1024, 32, "float32"),
    (8192, 64, "float32"), (16777216, 16, "float32"), (16, 16777216, "float32"),
]
CALLS = ["sum", "max", "mean", "var", "argmax", "minmax"]
LIBS = ["cupy", "torch"]


def label(rows: int, cols: int, dtype: str, call: str) -> str:
    short = {"float32": "f4", "float64": "f8", "int32": "i4"}[dtype]
    return f"{call} {rows}x{cols} {short}"


def tuning_of(text: str):
    """``i4b256m528`` as ``pyreduce.Tuning(items_per_thread=4, block_size=256,
    max_blocks=528)``."""
    import pyreduce

    names = {"i": "items_per_thread", "b": "block_size", "m": "max_blocks"}
    parts = re.fullmatch(r"((?:[ibm]\d+)+)", text)
    if not parts:
        raise SystemExit(f"--tunings: {text!r} is not of the form i4b256m528")
    return pyreduce.Tuning(**{names[k]: int(v) for k, v in re.findall(r"([ibm])(\d+)", text)})


#: the column of ``--runs``: pyreduce with the columns kernels' float32 runs of
#: rows the other way from :data:`pyreduce.batchplanner.COLUMN_RUNS`'s default
SWITCHED = "runs"


@contextlib.contextmanager
def _switched(on: bool):
    """Calls with the columns kernels' float32 runs the other way from the
    default where ``on``, their plans and remembered calls forgotten on the way
    in and out."""
    from pyreduce import batchplanner, callmemo

    default = batchplanner.COLUMN_RUNS

    def switch(value):
        batchplanner.COLUMN_RUNS = value
        batchplanner.clear_plans()
        callmemo.clear()

    if not on:
        yield
        return
    switch(not default)
    try:
        yield
    finally:
        switch(default)


def _call(lib: str, name: str, x, tuning=None):
    """The call of ``name`` along ``axis=0`` in ``lib`` (pyreduce with ``tuning``)."""
    if lib == "pyreduce":
        import pyreduce

        keywords = {} if tuning is None else {"tuning": tuning}
        return lambda: getattr(pyreduce, name)(x, axis=0, **keywords)
    if name not in ("sum", "max"):
        return statistic(lib, name, x, 0)
    if lib == "cupy":
        return lambda: getattr(x, name)(axis=0)
    import torch

    t = torch.as_tensor(x, device="cuda")
    return (lambda: t.sum(dim=0)) if name == "sum" else (lambda: t.amax(dim=0))


def _expected(name: str, x):
    import cupy as cp

    if name == "minmax":
        return x.min(axis=0), x.max(axis=0)
    if name in ("max", "argmax"):
        return getattr(x, name)(axis=0)
    if name == "sum" and x.dtype.kind in "iu":
        return x.astype(cp.int64).sum(axis=0)
    return getattr(x.astype(cp.float64), name)(axis=0)


def _agrees(got, want, name: str, rows: int) -> bool:
    """``got`` against CuPy's float64 ``want``: within a bound that grows with
    the ``rows`` a float32 sum adds (standard normal data), else exactly."""
    import cupy as cp

    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    atol = 1e-6 * rows if name == "sum" else 1e-4
    for g, w in zip(got, want):
        g, w = cp.asarray(g), cp.asarray(w)
        if g.shape != w.shape:
            return False
        if name in ("mean", "var", "sum") and w.dtype.kind == "f":
            if not bool(cp.allclose(g.astype(cp.float64), w, rtol=2e-4, atol=atol)):
                return False
        elif not bool(cp.array_equal(g, w)):
            return False
    return True


def run(only, tunings, out, runs=False) -> None:
    import cupy as cp

    steady_gpu()
    columns = ["pyreduce", *([SWITCHED] if runs else []), *tunings, *LIBS]
    lines = [
        "# Columns (axis=0) of CuPy arrays: device time per call (us), calls back to back",
        f"# (pyreduce.measure.device_seconds: median of 5 batches of 20). {gpu_name('cupy')},"
        f" {today()}; {versions_text(versions(DISTS))}.",
        "# PyTorch: a zero-copy tensor of the same array (var with correction=0); every"
        " answer checked against CuPy's float64 (integer: exact) first.",
        f"{'call':28s}" + "".join(f"{c:>12s}" for c in columns) + "  best peer/pyreduce",
    ]
    sink = open(out, "w") if out else None  # noqa: SIM115  (line by line: a run cut short keeps its rows)

    def emit(line: str) -> None:
        print(line, flush=True)
        if sink:
            sink.write(line + "\n")
            sink.flush()

    for line in lines:
        emit(line)
    rng = np.random.default_rng(0)
    for rows, cols, dtype in SHAPES:
        for name in CALLS:
            text = label(rows, cols, dtype, name)
            if only and not any(part in text for part in only):
                continue
            if dtype == "int32":
                x = cp.asarray(rng.integers(-1000, 1000, (rows, cols), dtype=np.int32))
            else:
                x = cp.asarray(rng.standard_normal((rows, cols), dtype=np.float32)
                               .astype(dtype))
            want = _expected(name, x)
            times = {}
            for col in columns:
                lib = col if col in LIBS else "pyreduce"
                tuning = None if col in ("pyreduce", SWITCHED, *LIBS) else tuning_of(col)
                with _switched(col == SWITCHED):
                    fn = _call(lib, name, x, tuning)
                    try:
                        ok = _agrees(fn(), want, name, rows)
                    except Exception as exc:  # noqa: BLE001  (a peer without the call)
                        emit(f"# {text} {col}: {type(exc).__name__}: {exc}")
                        ok = False
                    times[col] = device_seconds(fn) * 1e6 if ok else None
            peers = [times[c] for c in LIBS if times[c] is not None]
            ratio = (f"{min(peers) / times['pyreduce']:.2f}"
                     if peers and times["pyreduce"] else "-")
            line = f"{text:28s}" + "".join(
                f"{'-' if times[c] is None else f'{times[c]:.1f}':>12s}" for c in columns)
            emit(line + f"  {ratio:>8s}")
            del x, want
    if sink:
        sink.close()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="TEXT",
                        help="only the cases whose text (e.g. 'var 16x16777216') contains TEXT")
    parser.add_argument("--tunings", nargs="+", default=[], metavar="TUNING",
                        help="pyreduce columns with these tunings, e.g. i4 i8b256")
    parser.add_argument("--runs", action="store_true",
                        help="a column with the columns kernels' float32 runs of rows "
                             "switched from the default (pyreduce.batchplanner.COLUMN_RUNS)")
    parser.add_argument("--out", help="write the table here too")
    args = parser.parse_args(argv)
    run(args.only or (), args.tunings, args.out, args.runs)


if __name__ == "__main__":
    main()
