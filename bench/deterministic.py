"""The error study and the cost of ``deterministic=True``.

    python bench/deterministic.py run --out accuracy.json   # errors (GPU columns if one is present)
    python bench/deterministic.py time --out timing.json    # the cost on a GPU
    python bench/deterministic.py wall --out wall.json      # the cost a waiting caller sees
    python bench/deterministic.py report accuracy.json [timing.json]   # tables into docs/

    NUMBA_ENABLE_CUDASIM=0 python bench/deterministic.py all   # on a GPU machine: all three

``run`` sums adversarial float32 data (:data:`DATASETS`, sizes 2**16..2**24) with a
float32 left fold, NumPy's ``np.sum``, pyreduce's default and ``deterministic=True``
(on the CPU; on the GPU too when there is one, where the deterministic result is
also checked bit for bit against ``pyreduce.reference``) and CuPy's ``sum`` (GPU
only), and records each one's error against the exact sum. The exact sum is
computed in integers: a float32 is an integer times a power of two, and the
integers are summed per power of two in int64, then combined with Python's
unbounded integers.

``time`` times float32 and float64 sums at 2**24, 2**26 and 2**28 elements on
the GPU (CUDA events around back-to-back calls writing into a preallocated device
result): the default path against ``deterministic=True`` with its default
layout, with the variant's own defaults (the layout before the measured one),
with 4, 8 and 16 items per thread, and CuPy's ``sum`` where it is installed.

``wall`` times what a caller who waits for the result sees, for float32 and
float64 sums of CuPy arrays at 2**24 and 2**28 elements, the default path and
``deterministic=True`` (their results 0-d CuPy arrays, pyreduce's default)
and CuPy's ``float(x.sum())`` in interleaved rounds:
the host's time to issue a call (bursts of 32), the wall time of a call
followed by a synchronisation, and the device time per call of calls queued
back to back.

``report`` writes ``docs/deterministic/accuracy.md`` and, from a timing file,
``docs/deterministic/cost.md``; ``docs/deterministic.md`` includes both. ``all``
runs the three, keeping the JSON next to the tables.
"""

from __future__ import annotations

import os
import platform
import sys
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _cli import Command, add_max_log2, dispatch, upto, with_out  # noqa: E402
from _report import (docs, gpu_name, has_cuda as _gpu, load, pow2, row, rule,  # noqa: E402
                     save, today, versions_text, write)
from _timing import burst_us, device_seconds, interleaved_seconds, piped_seconds  # noqa: E402

DOCS = docs("deterministic")
SIZES = [2**k for k in range(16, 25, 2)]
TIME_SIZES = [2**24, 2**26, 2**28]
TIME_ITEMS = [4, 8, 16]
WALL_SIZES = [2**24, 2**28]
#: what ``wall`` measures, as its JSON says
WALL_WHAT = ("sum of CuPy arrays, pyreduce's default results (0-d CuPy arrays) and CuPy's "
             "float(x.sum()) (its value copied to the host): [host us (bursts of 32), ready "
             "us (a call then a synchronisation), us a call of calls back to back], medians "
             "of interleaved rounds")


def _one_large(rng, n):
    x = rng.random(n)
    x[0] = 2.0**24  # its float32 ulp is 2: every later value below 1 is lost by a fold
    return x


def _sorted(rng, n):
    return np.sort(rng.random(n))


def _alternating(rng, n):
    return (1 + rng.random(n)) * np.where(np.arange(n) % 2, -1.0, 1.0)


def _offset(rng, n):
    return rng.standard_normal(n) + 1e3


#: name -> generator of float64 values, rounded to float32 by :func:`make`
DATASETS = {
    "one large, then small": _one_large,
    "sorted ascending": _sorted,
    "alternating signs": _alternating,
    "normal + 1e3": _offset,
}


def make(kind: str, n: int, seed: int = 0) -> np.ndarray:
    return DATASETS[kind](np.random.default_rng(seed), n).astype(np.float32)


def exact_sum(x: np.ndarray) -> Fraction:
    """The exact sum of float32 values: each is ``m * 2**e`` with an integer ``m`` of
    at most 24 bits; the ``m`` are summed per ``e`` in int64 (no overflow below 2**39
    elements), then combined exactly."""
    m, e = np.frexp(x.astype(np.float64))
    mant = (m * 2.0**24).astype(np.int64)
    e = e.astype(np.int64) - 24
    lo = int(e.min())
    buckets = np.zeros(int(e.max()) - lo + 1, np.int64)
    np.add.at(buckets, e - lo, mant)
    total = sum(int(b) << k for k, b in enumerate(buckets.tolist()))
    return Fraction(total) * Fraction(2) ** lo


def left_fold():
    """A float32 left fold, compiled: ``((x0 + x1) + x2) + ...``."""
    from numba import njit

    @njit
    def fold(x):
        acc = x[0]
        for i in range(1, x.size):
            acc = acc + x[i]
        return acc

    return fold


def _meta() -> dict:
    import numba

    import pyreduce

    meta = dict(date=today(), machine=platform.machine(),
                numpy=np.__version__, numba=numba.__version__, gpu=None)
    if _gpu():
        meta["gpu"] = gpu_name("numba")
    meta["pyreduce"] = pyreduce.__version__
    return meta


def methods(gpu: bool) -> dict:
    """name -> callable(host float32 array) -> float32 sum."""
    import pyreduce

    fold = left_fold()
    found = {
        "left fold": fold,
        "np.sum": np.sum,
        "pyreduce default (cpu)": lambda x: pyreduce.sum(x, backend="cpu"),
        "pyreduce deterministic": lambda x: pyreduce.reference(x, "add"),
    }
    if gpu:
        from numba import cuda

        found["pyreduce default (cuda)"] = lambda x: pyreduce.sum(cuda.to_device(x))
        found["pyreduce deterministic (cuda)"] = lambda x: pyreduce.sum(
            cuda.to_device(x), deterministic=True)
        try:
            import cupy

            found["cupy"] = lambda x: cupy.sum(cupy.asarray(x)).get()[()]
        except ImportError:
            print("(no CuPy: its column is left out)", flush=True)
    return found


def run(out: str, sizes=SIZES) -> dict:
    from pyreduce.deterministic import rounding_depth

    gpu = _gpu()
    found = methods(gpu)
    rows = []
    for kind in DATASETS:
        for n in sizes:
            x = make(kind, n)
            exact = exact_sum(x)
            absolute = exact_sum(np.abs(x))
            d, u = rounding_depth(n), Fraction(1, 2**24)
            bound = d * u / (1 - d * u) * absolute  # the tree's error bound
            scale = abs(exact) or absolute  # relative to the sum (never 0 here)
            row = dict(data=kind, n=n, exact=float(exact), bound=float(bound / scale),
                       errors={}, values={})
            for name, fn in found.items():
                value = np.float32(fn(x))
                row["values"][name] = float(value)
                row["errors"][name] = float(abs(Fraction(float(value)) - exact) / scale)
            if gpu:  # the GPU's tree is the reference's, bit for bit
                det = found["pyreduce deterministic (cuda)"](x)
                row["cuda_equals_reference"] = det.tobytes() == \
                    found["pyreduce deterministic"](x).tobytes()
            rows.append(row)
            print(f"{kind:24} 2**{n.bit_length() - 1}: " + ", ".join(
                f"{k} {v:.1e}" for k, v in row["errors"].items()), flush=True)
    result = dict(meta=_meta(), rows=rows)
    save(out, result)
    return result


def time_cost(out: str, sizes=TIME_SIZES) -> dict:
    """Device time of the default path and of deterministic=True (GPU only)."""
    from numba import cuda

    import pyreduce

    if not _gpu():
        raise SystemExit("time needs a CUDA GPU (and NUMBA_ENABLE_CUDASIM unset or 0)")
    try:
        import cupy
    except ImportError:
        cupy = None
    rows = []
    for dt in (np.float32, np.float64):
        for n in sizes:
            host = np.random.default_rng(n).standard_normal(n).astype(dt)
            d = cuda.to_device(host)
            res = cuda.device_array(1, dt)
            reps = 20 if n <= 2**24 else 5
            configs = {"default": {}, "deterministic": dict(deterministic=True),
                       "variant's defaults": dict(deterministic=True,
                                                  tuning=_variant_defaults(cuda))}
            for items in TIME_ITEMS:
                configs[f"deterministic i{items}"] = dict(
                    deterministic=True, tuning=pyreduce.Tuning(items_per_thread=items))
            row = dict(dtype=np.dtype(dt).name, n=n, GBps={})
            for name, kw in configs.items():
                seconds = device_seconds(lambda: pyreduce.sum(d, out=res, **kw), reps=reps)
                row["GBps"][name] = host.nbytes / seconds / 1e9
            if cupy is not None:
                c = cupy.asarray(host)
                seconds = device_seconds(lambda: cupy.sum(c), reps=reps)
                row["GBps"]["cupy"] = host.nbytes / seconds / 1e9
            want = pyreduce.reference(host, "add").tobytes()
            row["bitwise"] = all(
                pyreduce.sum(d, deterministic=True, **kw).tobytes() == want
                for kw in ({}, dict(tuning=pyreduce.Tuning(items_per_thread=16, block_size=1024)),
                           dict(tuning=pyreduce.Tuning(items_per_thread=4, block_size=128,
                                                       max_blocks=7))))
            plan = pyreduce.explain(d, "add", deterministic=True).plan
            row["plan"] = f"{plan.spec.label}, grid {plan.grid}, {plan.passes} passes"
            rows.append(row)
            print(row, flush=True)
    result = dict(meta=_meta(), rows=rows)
    save(out, result)
    return result


def wall_cost(out: str, sizes=WALL_SIZES, rounds: int = 3) -> dict:
    """``{case: {config: [host us, ready us, device us]}}`` of the default path
    and ``deterministic=True`` (GPU and CuPy only; pyreduce's results are its
    default, 0-d CuPy arrays) and CuPy's ``float(x.sum())``, each the median
    of ``rounds`` rounds in which they take turns. The deterministic sum of
    each case is checked bit for bit against ``pyreduce.reference`` first,
    its full path's call and a repeat's."""
    import pyreduce

    if not _gpu():
        raise SystemExit("wall needs a CUDA GPU (and NUMBA_ENABLE_CUDASIM unset or 0)")
    import cupy as cp

    sync = cp.cuda.Device().synchronize
    configs = {"default": {}, "deterministic": dict(deterministic=True)}
    result = dict(meta=dict(_meta(), what=WALL_WHAT))
    for dt in (np.float32, np.float64):
        for n in sizes:
            host = np.random.default_rng(n).standard_normal(n).astype(dt)
            x = cp.asarray(host)
            want = pyreduce.reference(host, "add").tobytes()
            for _ in range(2):  # the full path's call, then a repeat's (the one-step runner)
                if cp.asnumpy(pyreduce.sum(x, deterministic=True)).tobytes() != want:
                    raise SystemExit(f"deterministic sum of {n} {np.dtype(dt).name} differs "
                                     "from pyreduce.reference")
            calls = {name: (lambda kw=kw: pyreduce.sum(x, **kw)) for name, kw in configs.items()}
            calls["cupy"] = lambda: float(x.sum())  # a peer in the same rounds
            samples = {name: [] for name in calls}
            for _ in range(rounds):
                ready = interleaved_seconds(
                    {name: (lambda fn=fn: (fn(), sync())) for name, fn in calls.items()},
                    calls=30, rounds=5)
                for name, fn in calls.items():
                    samples[name].append((burst_us(fn, sync), ready[name] * 1e6,
                                          piped_seconds(fn) * 1e6))
            row = {name: [float(v) for v in np.median(np.array(s), axis=0)]
                   for name, s in samples.items()}
            case = f"sum {np.dtype(dt).name} 2**{n.bit_length() - 1}"
            result[case] = row
            print(case, row, flush=True)
    save(out, result)
    return result


def _variant_defaults(cuda):
    """The layout ``pairwise`` ran before its measured one
    (:func:`pyreduce.planner.fixed_tree_layout`): 4 items a thread, blocks of
    256, one wave of them."""
    import pyreduce

    dev = cuda.get_current_device()
    wave = dev.MULTIPROCESSOR_COUNT * (dev.MAX_THREADS_PER_MULTIPROCESSOR // 256)
    return pyreduce.Tuning(items_per_thread=4, block_size=256, max_blocks=wave)


def _e(v: float) -> str:
    return "0" if v == 0 else f"{v:.1e}"


def accuracy_table(data: dict) -> list[str]:
    meta, rows = data["meta"], data["rows"]
    found = list(rows[0]["errors"])
    first = [n for n in ("pyreduce deterministic", "pyreduce deterministic (cuda)", "np.sum",
                         "cupy") if n in found]
    names = first + [n for n in found if n not in first]  # the telling columns first
    where = (f"on {meta['gpu']} and its host" if meta["gpu"]
             else f"on the host alone ({meta['machine']}, no GPU)")
    out = [f"Measured {where}, {meta['date']} ("
           + versions_text(meta, {"numpy": "numpy", "numba": "numba"})
           + "). Relative error of the float32 sum against the exact sum; *bound*: the tree's "
           "bound `d u / (1 - d u) * sum(|x|) / |sum(x)|`.", ""]
    for kind in dict.fromkeys(r["data"] for r in rows):
        out += [f"#### {kind}", "", row(["n", "bound"] + names),
                rule("l" + "r" * (len(names) + 1))]
        for r in rows:
            if r["data"] == kind:
                out.append(row([pow2(r["n"]), _e(r["bound"])]
                               + [_e(r["errors"][k]) for k in names]))
        out.append("")
    checked = [r["cuda_equals_reference"] for r in rows if "cuda_equals_reference" in r]
    if checked:
        out += [f"The GPU's deterministic sums equal `pyreduce.reference` bit for bit: "
                f"{sum(checked)} of {len(checked)}.", ""]
    return out


def cost_table(data: dict) -> list[str]:
    """The cost of ``deterministic=True``: the telling columns first, then the
    items per thread; the plans below the table."""
    meta, rows = data["meta"], data["rows"]
    main = [k for k in ("default", "deterministic", "cupy") if k in rows[0]["GBps"]]
    rest = [k for k in rows[0]["GBps"] if k not in main]
    out = [f"Measured on {meta['gpu']}, {meta['date']} (numba {meta['numba']}): GB/s of "
           f"input over device time, sums written to a preallocated device result. "
           f"*cost*: the deterministic default's time over the default path's, minus one.",
           "", row(["dtype", "n", "cost", "bitwise"] + main + rest),
           rule("llrl" + "r" * (len(main) + len(rest)))]
    for r in rows:
        cost = r["GBps"]["default"] / r["GBps"]["deterministic"] - 1
        out.append(row([r["dtype"], pow2(r["n"]), f"{cost:+.1%}", "yes" if r["bitwise"] else "NO"]
                       + [f"{r['GBps'][k]:.0f}" for k in main + rest]))
    plans = {}  # plan -> the cases that ran it
    for r in rows:
        plans.setdefault(r["plan"], []).append(f"{r['dtype']} {pow2(r['n'])}")
    plans = [f"`{plan}` ({', '.join(cases)})" for plan, cases in plans.items()]
    return out + ["", "The deterministic kernels' plans: " + "; ".join(plans) + ".", ""]


def report(accuracy: str, timing: str | None = None, docs: str = DOCS) -> None:
    os.makedirs(docs, exist_ok=True)
    write(os.path.join(docs, "accuracy.md"), "\n".join(accuracy_table(load(accuracy))))
    if timing:
        write(os.path.join(docs, "cost.md"), "\n".join(cost_table(load(timing))))
    print(f"wrote {docs}/accuracy.md" + (" and cost.md" if timing else ""))


def _all(args) -> None:
    os.makedirs(DOCS, exist_ok=True)
    accuracy = os.path.join(DOCS, "accuracy.json")
    timing = os.path.join(DOCS, "timing.json") if _gpu() else None
    run(accuracy)
    if timing:
        time_cost(timing)
    report(accuracy, timing)


def _report_arguments(g) -> None:
    g.add_argument("accuracy")
    g.add_argument("timing", nargs="?")


COMMANDS = {
    "run": Command(lambda a: run(a.out, upto(SIZES, a.max_log2)),
                   with_out(lambda r: add_max_log2(r, 24))),
    "time": Command(lambda a: time_cost(a.out), with_out()),
    "wall": Command(lambda a: wall_cost(a.out), with_out()),
    "report": Command(lambda a: report(a.accuracy, a.timing), _report_arguments),
    "all": Command(_all),
}


def main(argv=None) -> int:
    dispatch(__doc__, COMMANDS, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
