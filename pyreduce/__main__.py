"""Command line: ``python -m pyreduce [demo|info|tune|tuning|cache|warmup|bench]``
(also installed as ``pyreduce``).

``demo`` (the default) runs a few reductions on the best backend present and
prints each result and time next to NumPy's; it exits non-zero if any result
disagrees. ``info`` prints the versions and backends this process sees. ``tune``
measures the best kernel configuration for common cases on this GPU and the
cost model that routes host arrays (:mod:`pyreduce.calibrate`), and records
them (:mod:`pyreduce.tuning`); ``tuning`` lists the recorded choices and
``tuning --reset`` forgets them. ``cache info`` describes the disk cache of
compiled kernels and ``cache clear`` empties it (:mod:`pyreduce.diskcache`);
``warmup`` builds the common kernels into it ahead of time
(:mod:`pyreduce.prebuild`). ``bench OP`` times pyreduce's variants and its
peers on an operator (:mod:`pyreduce.bench_command`).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

__all__ = ["main"]

#: Elements per demo array on the simulator, where every thread is a Python thread.
SIM_SIZE = 20_000
DEFAULT_SIZE = 10_000_000


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _gpu_name() -> str | None:
    """Name and compute capability of the current GPU, or None without one."""
    import pyreduce

    if "cuda" not in pyreduce.available():
        return None
    from numba import cuda

    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
    cc = ".".join(str(v) for v in dev.compute_capability)
    return f"{name} (compute capability {cc}, {len(cuda.gpus)} GPU(s) visible)"


def info(out=sys.stdout) -> int:
    """Print versions, backends and the GPU; always succeeds."""
    import numpy as np

    import pyreduce

    rows = [
        ("pyreduce", pyreduce.__version__),
        ("python", f"{platform.python_version()} ({sys.platform})"),
        ("numpy", np.__version__),
        ("numba", _version("numba")),
        ("numba-cuda", _version("numba-cuda")),
        ("backends", ", ".join(pyreduce.available()) + "   (pyreduce.available(), best first)"),
        ("simulator", os.environ.get("NUMBA_ENABLE_CUDASIM", "unset")
         + "   (NUMBA_ENABLE_CUDASIM)"),
        ("GPU", _gpu_name() or "none found"),
    ]
    for key, value in rows:
        print(f"{key:<11} {value}", file=out)
    return 0


# --- demo

def _last_nonzero(a, b):
    return b if b != 0 else a


def _user_max(a, b):
    return a if a > b else b


def _sum_tolerance(x, extra=0.0) -> float:
    """Worst-case rounding error of summing ``x`` in any order (n * eps * sum|x|)."""
    import numpy as np

    eps = np.finfo(x.dtype).eps
    return float(x.size * eps * (np.abs(x).sum(dtype=np.float64) + abs(extra)))


def _cases(n: int, seed: int = 0):
    """``(label, data, pyreduce call, numpy call, tolerance)``; tolerance 0: exact."""
    import numpy as np

    import pyreduce

    rng = np.random.default_rng(seed)
    f64 = rng.random(n)
    i8 = rng.integers(-128, 128, n, dtype=np.int8)
    # mostly zeros, and the tail all zeros: the answer is neither x[-1] nor max(x)
    ints = np.where(rng.random(n) < 0.9, 0, rng.integers(1, 1000, n)).astype(np.int64)
    ints[-max(1, n // 100):] = 0

    def np_last_nonzero(x):
        nz = np.flatnonzero(x)
        return x[nz[-1]] if nz.size else x[0]

    summed = pyreduce.Reduce(lambda a, b: a + b)
    return [
        ("float64 sum", f64, lambda x, be: pyreduce.sum(x, backend=be),
         np.sum, _sum_tolerance(f64)),
        ("float64 max", f64, lambda x, be: pyreduce.max(x, backend=be), np.max, 0.0),
        ("int8 sum (int64 acc)", i8, lambda x, be: pyreduce.sum(x, backend=be),
         np.sum, 0.0),
        ("lambda max", f64,
         lambda x, be: pyreduce.reduce(x, _user_max, backend=be), np.max, 0.0),
        ("last non-zero (ordered)", ints,
         lambda x, be: pyreduce.reduce(x, _last_nonzero, backend=be),
         np_last_nonzero, 0.0),
        ("Reduce(a + b)(x, init=3)", f64, lambda x, be: summed(x, init=3, backend=be),
         lambda x: 3 + np.sum(x), _sum_tolerance(f64, 3.0)),
    ]


def _timed(fn, *args):
    t0 = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - t0


def _fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def _fmt_value(v) -> str:
    import numpy as np

    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    return str(v)


def _resolve_backend(name: str):
    """The backend object for ``name`` and a description of its device."""
    from pyreduce import BackendNotice, backends

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BackendNotice)
        be = backends.get(name)
    if be.name == "cpu":
        return be, f"host CPU, {be.threads} thread(s)"
    return be, be.device().name


def demo(size: int | None = None, backend: str = "auto", repeat: int = 3,
         out=sys.stdout) -> int:
    """Run the demo table; 0 if every result agrees with NumPy, else 1."""
    import numpy as np

    import pyreduce

    be, device = _resolve_backend(backend)
    n = size if size is not None else (SIM_SIZE if be.name == "sim" else DEFAULT_SIZE)
    print(f"pyreduce {pyreduce.__version__} demo", file=out)
    print(f"backend: {be.name}   device: {device}   n = {n:,}", file=out)
    if be.name == "cuda":
        print("inputs are copied to the GPU once, before timing; NumPy runs on the host",
              file=out)
    cases = _cases(n)

    cols = ("case", "pyreduce", "numpy", "ok", "1st call", "pyreduce t", "numpy t")
    widths = (24, 19, 19, 3, 9, 10, 9)

    def row(cells):
        first = f"{cells[0]:<{widths[0]}}"
        rest = [f"{c:>{w}}" for c, w in zip(cells[1:], widths[1:])]
        return "  ".join([first] + rest).rstrip()

    print(row(cols), file=out)
    print(row(["-" * w for w in widths]), file=out)

    failures = 0
    for label, data, ours, theirs, tol in cases:
        x = be.to_device(data, 0) if be.name == "cuda" else data
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", pyreduce.BackendNotice)
                # Numba warns about small grids (the finishing pass is one block on
                # purpose); its message starts with a terminal colour code
                warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely")
                _, first = _timed(ours, x, be.name)
                got, best = _timed(ours, x, be.name)
                for _ in range(repeat - 1):
                    best = min(best, _timed(ours, x, be.name)[1])
        except Exception as exc:  # report and go on with the other cases
            failures += 1
            print(row([label, "ERROR", "", "no", "", "", ""]), file=out)
            print(f"    {type(exc).__name__}: {exc}", file=out)
            continue
        want, np_best = _timed(theirs, data)
        for _ in range(repeat - 1):
            np_best = min(np_best, _timed(theirs, data)[1])
        if tol:
            ok = abs(float(got) - float(want)) <= tol
        else:
            ok = bool(got == want) and np.dtype(type(got)) == np.dtype(type(want))
        failures += not ok
        print(row([label, _fmt_value(got), _fmt_value(want), "yes" if ok else "NO",
                   _fmt_time(first), _fmt_time(best), _fmt_time(np_best)]), file=out)

    notes = [
        "lambda max: lambda a, b: a if a > b else b (a user op, compiled by Numba)",
        "last non-zero: lambda a, b: b if b != 0 else a on int64, 90% zeros; not",
        "  commutative, so only an order-keeping reduction gets NumPy's",
        "  x[np.flatnonzero(x)[-1]]",
        "1st call: includes compiling the op and kernels (the compile time);",
        f"  pyreduce t, numpy t: best of {repeat} later call(s)",
        "ok: float sums within the rounding bound n*eps*sum|x|, the rest exactly",
        "  (dtype included)",
    ]
    print("\n" + "\n".join(notes), file=out)
    if failures:
        print(f"\nFAILED: {failures} case(s) disagree with NumPy", file=out)
        return 1
    print("\nall results agree with NumPy", file=out)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pyreduce",
        description="pyreduce command line: a demo (default), version information, "
                    "the autotuner and the kernel cache.",
    )
    sub = p.add_subparsers(dest="command")
    d = sub.add_parser("demo", help="run a few reductions next to NumPy (the default)")
    d.add_argument("--size", type=int, default=None,
                   help=f"elements per array (default {DEFAULT_SIZE:,}; "
                        f"{SIM_SIZE:,} on the simulator)")
    d.add_argument("--backend", default="auto", choices=("auto", "cuda", "hip", "sim", "cpu"),
                   help="auto: the GPU if one is present, else the CPU")
    d.add_argument("--repeat", type=int, default=3,
                   help="timed calls after the first (the best is shown; default 3)")
    sub.add_parser("info", help="versions, backends and the GPU")
    t = sub.add_parser("tune", help="measure and record the best kernels on this GPU")
    t.add_argument("--dtypes", nargs="+", default=["float32", "float64", "int32"])
    t.add_argument("--ops", nargs="+", default=["add", "max", "user"],
                   help="built-in op names, and 'user' for user-written ops")
    t.add_argument("--sizes", nargs="+", type=int, default=[16, 20, 24, 28],
                   help="log2 of the sizes to tune (default: 16 20 24 28)")
    s = sub.add_parser("tuning", help="the recorded tuned choices")
    s.add_argument("--reset", action="store_true", help="forget every recorded choice")
    c = sub.add_parser("cache", help="the disk cache of compiled kernels")
    c.add_argument("action", choices=("info", "clear"),
                   help="info: where it is and what it holds; clear: remove its entries")
    w = sub.add_parser("warmup", help="build the common kernels into the disk cache")
    w.add_argument("--ops", nargs="+", default=None,
                   help="named reductions (default: sum max min)")
    w.add_argument("--dtypes", nargs="+", default=None,
                   help="dtypes (default: float32 float64 int32 int64)")
    w.add_argument("--backend", default="auto", choices=("auto", "cuda", "hip", "sim", "cpu"))
    w.add_argument("--sizes", nargs="+", type=int, default=None,
                   help="element counts (default: a small one and one past twice the L2 "
                        "cache)")
    w.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_bench(sub)
    return p


def _fmt_bytes(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def cache(action: str, out=None) -> int:
    """``cache info``: print the disk cache's place, bound and contents;
    ``cache clear``: remove its entries."""
    from pyreduce import diskcache

    out = out or sys.stdout

    if action == "clear":
        removed = diskcache.clear()
        print(f"removed {removed} file(s) from {diskcache.directory()}", file=out)
        return 0
    usage = diskcache.disk_usage()
    state = "on" if diskcache.enabled() else "off (PYREDUCE_CACHE=0)"
    rows = [
        ("directory", f"{diskcache.directory()}   (PYREDUCE_CACHE_DIR)"),
        ("state", state),
        ("limit", f"{_fmt_bytes(diskcache.limit())}   (PYREDUCE_CACHE_SIZE)"),
        ("entries", str(sum(n for n, _ in usage.values()))),
        ("bytes", _fmt_bytes(sum(b for _, b in usage.values()))),
    ]
    rows += [(f"  {kind}", f"{n} entries, {_fmt_bytes(b)}") for kind, (n, b) in
             sorted(usage.items())]
    for key, value in rows:
        print(f"{key:<11} {value}", file=out)
    return 0


def warmup(args, out=None) -> int:
    """``warmup``: build the kernels, then say what was compiled and found."""
    import pyreduce

    out = out or sys.stdout

    try:
        done = pyreduce.warmup(args.ops, args.dtypes, args.backend, args.sizes,
                               progress=not args.quiet)
    except (TypeError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"warmup on {done.backend}: {done.cases} reductions in {done.seconds:.1f} s; "
          f"{done.compiled} kernel(s) compiled into the cache, {done.loaded} found there",
          file=out)
    return 0


def _add_bench(sub) -> None:
    from .bench_command import add_parser

    add_parser(sub)


def bench(args) -> int:
    """The ``bench`` command (:mod:`pyreduce.bench_command`)."""
    if args.backend == "sim" and "numba.cuda" not in sys.modules:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba.cuda is first imported
    from .bench_command import run

    return run(args)


def _user_add(a, b):
    return a + b


def tune(dtypes, ops, sizes, out=sys.stdout) -> int:
    """Tune each dtype x op x size on the GPU; print each choice."""
    import numpy as np

    from numba import cuda

    import pyreduce
    from pyreduce import tuning

    if "cuda" not in pyreduce.available():
        print("error: tuning needs a CUDA GPU", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    for log2 in sizes:
        for dt in dtypes:
            host = (rng.standard_normal(2**log2) * 100).astype(dt)
            x = cuda.to_device(host)
            for op in ops:
                fn = _user_add if op == "user" else op
                choice = tuning.tune(x, fn, backend="cuda")
                print(f"{dt} {op} 2**{log2}: {choice.variant} b{choice.block_size} "
                      f"i{choice.items_per_thread} ({choice.GBps:.0f} GB/s)", file=out,
                      flush=True)
    print(tuning.show(), file=out)
    print(f"host inputs: {tuning.calibrate()}", file=out)
    return 0


def main(argv=None) -> int:
    """Entry point of ``python -m pyreduce`` and the ``pyreduce`` script."""
    args = _parser().parse_args(argv)
    command = args.command or "demo"
    if command == "info":
        return info()
    if command == "tuning":
        from pyreduce import tuning

        if args.reset:
            tuning.reset()
        print(tuning.show())
        return 0
    if command == "tune":
        return tune(args.dtypes, args.ops, args.sizes)
    if command == "cache":
        return cache(args.action)
    if command == "warmup":
        if args.backend == "sim" and "numba.cuda" not in sys.modules:
            os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        return warmup(args)
    if command == "bench":
        return bench(args)
    size = getattr(args, "size", None)
    backend = getattr(args, "backend", "auto")
    repeat = max(1, getattr(args, "repeat", 3))
    if size is not None and size < 1:
        print("--size must be at least 1", file=sys.stderr)
        return 2
    if backend == "sim" and "numba.cuda" not in sys.modules:
        # the simulator must be chosen before numba.cuda is first imported
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    try:
        return demo(size, backend, repeat)
    except RuntimeError as exc:  # e.g. --backend cuda without a GPU
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `python -m pyreduce demo | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
