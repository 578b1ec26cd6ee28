"""axis= and segmented reductions on the GPU: a correctness check against NumPy
and CuPy, then timings against CuPy (and ``cuda.compute``'s segmented_reduce
when it imports), in one process on one GPU.

    NUMBA_ENABLE_CUDASIM=0 python bench/axes.py run --out axes.json   # on the GPU machine
    NUMBA_ENABLE_CUDASIM=0 python bench/axes.py check                 # the check alone
    python bench/axes.py report axes.json     # writes docs/performance/axes.md

    NUMBA_ENABLE_CUDASIM=0 python bench/axes.py run --out short.json --only "rows of 16777216x16" \
        --only "rows of 1048576x32"         # the check, then the short rows alone

``check`` (also the first part of ``run``) prints one ``ok``/``FAIL`` line per
case and exits non-zero if any failed (``run`` then times nothing): row,
column and gathered reductions of float32, int8 -> int64 and an order-sensitive
user op over C, transposed, reversed and strided views, keepdims, initial,
out=, short rows (a group of lanes per row) of several lengths and views, an
int8 matrix of more than 2**31 elements along each axis (64-bit indexing), and
segmented reductions with empty, short, warp-sized and long segments, host and
device offsets.

``run`` then measures device time (CUDA events around back-to-back calls that
leave the result on the device; :func:`_timing.device_seconds`) of

* row and column sums (and max) of a 2**14 x 2**14 float32 matrix: pyreduce's
  built-in op, pyreduce with a Python lambda, CuPy's ``x.sum(axis=...)``;
* row sums (and max) of short rows, ``SHORT_ROWS``: 2**24 x 16 (issue #20's
  tall-skinny case) and 2**20 x 32 float32, the same libraries, and the column
  sums (and max) of the same matrices: fewer columns than a warp, which the
  narrow columns kernel reduces;
* segmented sums of 2**26 float32 in segments of 1, 32, 1024 and 2**20
  elements: pyreduce, CuPy (which has no segmented reduction: ``cupy.add.reduceat``
  over the segment starts, the general formulation, and ``x.reshape(S,
  size).sum(axis=1)``, which only equal segments allow), and
  ``cuda.compute.make_segmented_reduce`` with begin and end offsets;

GB/s are input bytes over device time; the copy ceiling (read + write of a
device-to-device copy) is recorded next to them. Each timed call's answer is
checked first. ``run --only NAME`` (repeatable) times only the cases whose name
contains one of the NAMEs (after the whole check).
"""

from __future__ import annotations

import functools
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _cli import Command, dispatch, with_out  # noqa: E402
from _report import docs, load, meta, save, table, versions_text, write  # noqa: E402
from _timing import copy_ceiling, device_seconds  # noqa: E402
from peers import DISTS, matrix_calls, segmented_calls, to_host as _host  # noqa: E402

DOCS = docs("performance")
ROWS, COLS = 2**14, 2**14
SEGMENTED_N = 2**26
SEGMENT_SIZES = [1, 32, 1024, 2**20]
#: (rows, row length) of float32 matrices summed along their short rows, and
#: along their columns (of 16: narrow columns, a warp wider than a row)
SHORT_ROWS = [(2**24, 16), (2**20, 32)]
P = 1000003


def affine(u, v):
    """Affine maps mod P packed as a*P + b, composed: associative, not commutative."""
    ua, ub = u // 1000003, u % 1000003
    va, vb = v // 1000003, v % 1000003
    return ((va * ua) % 1000003) * 1000003 + (va * ub + vb) % 1000003


def last_nonzero(a, b):
    return b if b != 0 else a


# --------------------------------------------------------------------------
# The check


class Checker:
    def __init__(self):
        self.failures = 0

    def case(self, name, fn):
        try:
            got, want, exact = fn()
            got, want = _host(got), _host(want)
            if exact:
                ok = got.shape == want.shape and got.dtype == want.dtype and \
                    np.array_equal(got, want, equal_nan=got.dtype.kind == "f")
            else:
                ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-3)
            detail = "" if ok else f": got {got.ravel()[:4]} {got.shape} {got.dtype}, " \
                                   f"want {want.ravel()[:4]} {want.shape} {want.dtype}"
        except Exception:
            ok, detail = False, ": raised\n" + traceback.format_exc()
        self.failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}{detail}", flush=True)


def _fold_rows(x: np.ndarray, op, axis) -> np.ndarray:
    """functools.reduce over each row of x.transpose(kept + reduced), on the host."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % x.ndim for a in axes)
    kept = [a for a in range(x.ndim) if a not in axes]
    shape = [x.shape[a] for a in kept]
    rows = x.transpose(kept + sorted(axes)).reshape(int(np.prod(shape)), -1)
    return np.array([functools.reduce(op, r.tolist()) for r in rows], x.dtype).reshape(shape)


def check() -> int:
    import cupy as cp

    import pyreduce

    c = Checker()
    rng = np.random.default_rng(0)
    f = cp.asarray(rng.standard_normal((1000, 3001)).astype(np.float32))
    for axis in (0, 1, -1, (0, 1)):
        c.case(f"float32 (1000, 3001) sum axis={axis}",
               lambda: (pyreduce.sum(f, axis=axis), f.sum(axis=axis), False))
        c.case(f"float32 (1000, 3001) max axis={axis}",
               lambda: (pyreduce.max(f, axis=axis), f.max(axis=axis), True))
    for name, view in [("transposed", f.T), ("reversed", f[::-1, ::-1]),
                       ("strided", f[::3, 1::2]), ("offset by one", f[:, 1:])]:
        for axis in (0, 1):
            c.case(f"float32 {name} sum axis={axis}",
                   lambda: (pyreduce.sum(view, axis=axis), view.sum(axis=axis), False))
    c.case("keepdims and initial",
           lambda: (pyreduce.sum(f, axis=0, keepdims=True, initial=2.0),
                    f.sum(axis=0, keepdims=True) + 2, False))
    out = cp.empty(1000, cp.float32)
    c.case("out=", lambda: (pyreduce.max(f, axis=1, out=out) is out and out,
                            f.max(axis=1), True))
    i8 = cp.asarray(rng.integers(-128, 128, (37, 70001), dtype=np.int8))
    for axis in (0, 1):
        c.case(f"int8 -> int64 sum axis={axis}",
               lambda: (pyreduce.sum(i8, axis=axis), i8.sum(axis=axis, dtype=cp.int64), True))
    a = (rng.integers(1, P, (300, 257)) * P + rng.integers(0, P, (300, 257))).astype(np.int64)
    da = cp.asarray(a)
    for axis in (0, 1):
        c.case(f"affine (order kept) axis={axis}",
               lambda: (pyreduce.reduce(da, affine, axis=axis), _fold_rows(a, affine, axis), True))
    cube = a[:, :255].reshape(300, 5, 51)
    dcube = cp.asarray(cube)
    c.case("affine (order kept) axis=(0, 2): a gather",
           lambda: (pyreduce.reduce(dcube, affine, axis=(0, 2)),
                    _fold_rows(cube, affine, (0, 2)), True))
    c.case("affine transposed view axis=1",
           lambda: (pyreduce.reduce(da.T, affine, axis=1), _fold_rows(a.T, affine, 1), True))
    sparse = (rng.integers(1, 9, (64, 100003)) * (rng.random((64, 100003)) < 0.01))
    c.case("last non-zero per row, long rows",
           lambda: (pyreduce.reduce(cp.asarray(sparse), last_nonzero, axis=1),
                    np.array([r[np.flatnonzero(r)[-1]] if r.any() else 0 for r in sparse]), True))
    _check_short_rows(c, cp, pyreduce, rng)
    _check_narrow_columns(c, cp, pyreduce, rng)
    _check_big(c, cp, pyreduce)
    _check_segments(c, cp, pyreduce, rng)
    print(f"{c.failures} failures", flush=True)
    return c.failures


def _check_order_kept(c, cp, pyreduce, rng, what: str, shape: tuple, axis: int):
    """The affine map composition (not commutative) of random int64 ``shape``
    along ``axis``, against the fold in order on the host."""
    a = (rng.integers(1, P, shape) * P + rng.integers(0, P, shape)).astype(np.int64)
    c.case(f"affine (order kept) {what}",
           lambda: (pyreduce.reduce(cp.asarray(a), affine, axis=axis),
                    _fold_rows(a, affine, axis), True))


def _check_short_rows(c, cp, pyreduce, rng):
    """Rows of a few to 65 elements (a thread, a group of lanes, a warp per
    row), aligned or not, strided, reversed; the order kept."""
    for K in (3, 5, 8, 13, 16, 17, 32, 33, 64, 65):
        s = cp.asarray(rng.standard_normal((20001, K + 1)).astype(np.float32))
        for name, view in [("", s[:, :K]), (" offset by one", s[:, 1:]),
                           (" reversed", s[::-1, K:0:-1])]:
            c.case(f"float32 rows of {K}{name} sum",
                   lambda: (pyreduce.sum(view, axis=1), view.sum(axis=1), False))
            c.case(f"float32 rows of {K}{name} max",
                   lambda: (pyreduce.max(view, axis=1), view.max(axis=1), True))
        _check_order_kept(c, cp, pyreduce, rng, f"rows of {K}", (3001, K), 1)
        c.case(f"argmax rows of {K}",
               lambda: (pyreduce.argmax(s, axis=1), s.argmax(axis=1), True))


def _check_narrow_columns(c, cp, pyreduce, rng):
    """Columns of fewer outputs than a warp (the narrow columns kernel: rows
    read several at a time, leftover rows, parts), adjacent, sliced and
    reversed; a user op keeps the order."""
    for M in (3, 16, 17, 31):
        s = cp.asarray(rng.integers(-3, 4, (200003, M + 1)).astype(np.float32))
        for name, view in [("", s[:, :M]), (" sliced", s[:, 1:]), (" reversed", s[::-1, :M])]:
            c.case(f"float32 columns of {M}{name} sum",
                   lambda: (pyreduce.sum(view, axis=0), view.sum(axis=0), True))
            c.case(f"float32 columns of {M}{name} argmax",
                   lambda: (pyreduce.argmax(view, axis=0), view.argmax(axis=0), True))
        _check_order_kept(c, cp, pyreduce, rng, f"columns of {M}", (3001, M), 0)


def _check_big(c, cp, pyreduce):
    """More than 2**31 elements: 64-bit indices in the row, column and segment
    kernels (each array about 2 GB, freed on return)."""
    _check_big_rows(c, cp, pyreduce)
    _check_big_columns(c, cp, pyreduce)


def _check_big_rows(c, cp, pyreduce):
    big = cp.ones((2, 2**30 + 3), cp.int8)
    big[1, -1] = 3
    c.case("int8 (2, 2**30 + 3) sum axis=1 (rows, parts)",
           lambda: (pyreduce.sum(big, axis=1), big.sum(axis=1, dtype=cp.int64), True))


def _check_big_columns(c, cp, pyreduce):
    tall = cp.ones((2**16 + 1, 2**15 + 3), cp.int8)
    tall[-1, 5] = 7
    c.case("int8 (2**16 + 1, 2**15 + 3) sum axis=0 (columns)",
           lambda: (pyreduce.sum(tall, axis=0), tall.sum(axis=0, dtype=cp.int64), True))
    flat = tall.reshape(-1)
    cut = [0, 5, 2**31 + 7, flat.size]
    offsets = cp.asarray(np.array(cut, np.int64))
    want = cp.asarray([flat[a:b].sum(dtype=cp.int64) for a, b in zip(cut[:-1], cut[1:])])
    c.case("int8 segments past 2**31",
           lambda: (pyreduce.segmented_reduce(flat, offsets, "add", dtype=np.int64), want, True))


def _check_segments(c, cp, pyreduce, rng):
    lengths = rng.integers(0, 3000, 5000)
    lengths[::7] = 0
    lengths[3] = 300000
    off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    x = rng.standard_normal(int(off[-1])).astype(np.float32)
    dx, doff = cp.asarray(x), cp.asarray(off)
    csum = np.concatenate([[0.0], np.cumsum(x.astype(np.float64))])
    want = csum[off[1:]] - csum[off[:-1]]
    c.case("segments: float32 sum, host offsets",
           lambda: (pyreduce.segmented_reduce(dx, off, "add"), want, False))
    c.case("segments: float32 sum, device offsets",
           lambda: (pyreduce.segmented_reduce(dx, doff, "add"), want, False))
    wmax = np.array([x[a:b].max() if b > a else -np.inf for a, b in zip(off[:-1], off[1:])],
                    np.float32)
    c.case("segments: max with identity -inf",
           lambda: (pyreduce.segmented_reduce(dx, doff, "max", identity=-np.inf), wmax, True))
    small = lengths[:200] % 40
    so = np.concatenate([[0], np.cumsum(small)]).astype(np.int64)
    av = (rng.integers(1, P, int(so[-1])) * P + rng.integers(0, P, int(so[-1]))).astype(np.int64)
    wa = np.array([functools.reduce(affine, av[a:b].tolist(), P) for a, b in zip(so[:-1], so[1:])])
    c.case("segments: affine (order kept), empty ones get the identity",
           lambda: (pyreduce.segmented_reduce(cp.asarray(av), cp.asarray(so), affine, P), wa, True))
    for size in SEGMENT_SIZES:
        n = 2**22 if size < 2**20 else 2**23
        y = cp.asarray(rng.standard_normal(n).astype(np.float32))
        o = cp.arange(0, n + 1, size, dtype=cp.int64)
        c.case(f"segments of {size}: sum",
               lambda: (pyreduce.segmented_reduce(y, o, "add"),
                        y.reshape(-1, size).sum(axis=1), False))


# --------------------------------------------------------------------------
# Timings


def _close(got, want) -> bool:
    got, want = _host(got), _host(want)
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-3, atol=1e-2))


def run(out: str, only=None) -> int:
    import cupy as cp

    import pyreduce

    def wanted(case: str) -> bool:
        return not only or any(name in case for name in only)

    failures = check()
    if failures:
        print("the check failed: nothing timed", flush=True)
        return 1
    found = meta(DISTS)
    found["ceiling_GBps"] = copy_ceiling()
    rows = []
    matrices = [(ROWS, COLS, (1, 0))] + [(m, k, (1, 0)) for m, k in SHORT_ROWS]
    for m, k, axes in matrices:
        cases = {axis: f"{'rows' if axis == 1 else 'columns'} of {m}x{k} float32"
                 for axis in axes}
        if not any(wanted(case) for case in cases.values()):
            continue
        x = cp.random.default_rng(1).standard_normal((m, k), dtype=cp.float32)
        for axis, case in cases.items():
            if wanted(case):
                rows += _time_matrix(pyreduce, x, axis, case)
        del x
    y = cp.random.default_rng(2).standard_normal(SEGMENTED_N, dtype=cp.float32)
    for size in SEGMENT_SIZES:
        if not wanted(f"segments of {size}"):
            continue
        want = y.reshape(-1, size).sum(axis=1)
        for lib, call in segmented_calls(y, size).items():
            ok = _close(call(), want)
            sec = device_seconds(call, reps=10)
            rows.append(dict(case=f"segments of {size}", lib=lib, us=sec * 1e6,
                             GBps=y.nbytes / sec / 1e9, correct=ok, plan=""))
            _print(rows[-1])
    save(out, dict(meta=found, rows=rows))
    return 0 if all(r["correct"] for r in rows) else 1


def _time_matrix(pyreduce, x, axis, case) -> list:
    rows = []
    for lib, (call, ref) in matrix_calls(x, axis).items():
        ok = _close(call(), ref())
        sec = device_seconds(call, reps=10)
        plan = _plan(pyreduce, x, axis) if lib.startswith("pyreduce") else ""
        rows.append(dict(case=case, lib=lib, us=sec * 1e6, GBps=x.nbytes / sec / 1e9,
                         correct=ok, plan=plan))
        _print(rows[-1])
    return rows


def _plan(pyreduce, x, axis) -> str:
    from pyreduce.batchplanner import describe_plan

    return describe_plan(pyreduce.explain(x, "add", axis=axis).plan)


def _print(row):
    print(f"{row['case']:>28}  {row['lib']:<20} {row['us']:9.1f} us  {row['GBps']:7.0f} GB/s"
          + ("" if row["correct"] else "  WRONG") + (f"  [{row['plan']}]" if row["plan"] else ""),
          flush=True)


# --------------------------------------------------------------------------
# The report


def report(path: str) -> str:
    data = load(path)
    m, rows = data["meta"], data["rows"]
    out = [
        "<!-- written by bench/axes.py report; do not edit -->",
        f"Measured on {m['gpu']}, {m['date']} ({versions_text(m.get('versions', {}))}). Device "
        "time per call (CUDA events around back-to-back calls, result left on the device), as "
        "GB/s of input read and microseconds. Copy ceiling (read + write of a "
        f"device-to-device copy): {m['ceiling_GBps']:.0f} GB/s.",
    ]
    matrix = [r for r in rows if not r["case"].startswith("segments")]
    segments = [r for r in rows if r["case"].startswith("segments")]
    out += _table(matrix) + _table(segments)
    plans = [(r["case"], r["lib"], r["plan"]) for r in rows if r.get("plan")]
    if plans:
        out += ["", "Kernels pyreduce chose:", ""]
        out += [f"* {case} ({lib}): {plan}" for case, lib, plan in plans]
    out += ["", "CuPy has no segmented reduction: `cupy.add.reduceat` over the segment "
            "starts is its general formulation; `reshape-sum` needs equal segments."]
    return "\n".join(out) + "\n"


def _table(rows) -> list:
    if not rows:
        return []
    libs = list(dict.fromkeys(r["lib"] for r in rows))
    cells = []
    for case in dict.fromkeys(r["case"] for r in rows):
        cells.append([case])
        for lib in libs:
            r = next((r for r in rows if r["case"] == case and r["lib"] == lib), None)
            cells[-1].append("-" if r is None else f"{r['GBps']:.0f} GB/s, {r['us']:.0f} us"
                             + ("" if r["correct"] else " (wrong)"))
    return [""] + table(["case"] + libs, cells)


def _report(args) -> int:
    text = report(args.path)
    write(args.to, text)
    print(text)
    return 0


def _run_arguments(g) -> None:
    g.add_argument("--only", action="append", metavar="NAME",
                   help="time only the cases whose name contains NAME (repeatable); "
                        'e.g. "rows of 16777216x16"')


def _report_arguments(g) -> None:
    g.add_argument("path")
    g.add_argument("--to", default=os.path.join(DOCS, "axes.md"))


COMMANDS = {
    "run": Command(lambda a: run(a.out, a.only), with_out(_run_arguments)),
    "check": Command(lambda a: 1 if check() else 0),
    "report": Command(_report, _report_arguments),
}


def main(argv=None) -> int:
    return dispatch(__doc__, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
