"""``python -m pyreduce bench OP``: pyreduce's variants and its peers on your
operator, as a table, JSON and a chart.

``OP`` is a Python expression (``"lambda a, b: a if a > b else b"``; ``np`` and
``math`` are in scope), ``module:function``, or a built-in op's name (``add``,
``max``, ...). Each contender is timed as :mod:`pyreduce.measure` times it: on a
CUDA GPU by CUDA events with the GPU held, elsewhere by the wall clock. Every
contender's answer is checked against pyreduce's CPU backend (``ok``).
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import json
import math
import re
import sys

import numpy as np

from . import measure

__all__ = ["add_parser", "run", "parse_op", "parse_size"]

#: Default sizes per timing: GPU runs reach past the L2 cache; the wall clock
#: on the CPU backend and the simulator stays small.
SIZES = {"gpu": ["2**16", "2**20", "2**24", "2**26"], "cpu": ["2**10", "2**16", "2**20"],
         "sim": ["2**8", "2**10"]}
#: Peers that take the same built-in op, by op name.
CUPY_OPS = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}
NUMPY_OPS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def parse_op(text: str):
    """The operator ``text`` names: a built-in op name (kept as the string), a
    ``module:function`` (imported), or a Python expression (evaluated)."""
    from .ops import _BUILTINS

    text = text.strip()
    if text in _BUILTINS:
        return text
    if re.fullmatch(r"[\w.]+:[\w.]+", text):
        module, _, name = text.partition(":")
        try:
            found = importlib.import_module(module)
            for part in name.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"op {text!r}: cannot import it ({exc})") from None
    else:
        try:
            found = eval(text, {"np": np, "math": math, "__builtins__": __builtins__})
        except Exception as exc:
            raise ValueError(f"op {text!r} is not a built-in op name, module:function "
                             f"or a Python expression ({type(exc).__name__}: {exc})") from None
    if not callable(found):
        raise ValueError(f"op {text!r} is a {type(found).__name__}, not a function")
    return found


def parse_size(text: str) -> int:
    """``"2**20"``, ``"1e6"``, ``"1_000_000"`` or ``"1000000"`` as a count."""
    t = text.strip().replace("_", "")
    m = re.fullmatch(r"(\d+)\*\*(\d+)", t)
    try:
        n = int(m.group(1)) ** int(m.group(2)) if m else int(float(t)) if "e" in t else int(t)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"size {text!r}: give a positive count such as 2**20 or 1e6")
    return n


def _label_size(n: int) -> str:
    return f"2**{n.bit_length() - 1}" if n & (n - 1) == 0 else f"{n:,}"


def data(dtype: np.dtype, n: int, seed: int = 0) -> np.ndarray:
    """``n`` random values of ``dtype`` that keep sums representable."""
    rng = np.random.default_rng(seed)
    if dtype.kind == "b":
        return rng.random(n) < 0.5
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -100
        return rng.integers(lo, 100, n).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    return rng.standard_normal(n).astype(dtype)


@dataclasses.dataclass
class Contender:
    name: str
    device: object  # the call timed (results left on the device where there is one)
    host: object  # a call returning the answer on the host, for the check
    hold: bool = True  # False: the call waits for the GPU itself


def _close(got, want, dtype: np.dtype, n: int) -> bool:
    got, want = np.asarray(got).reshape(-1)[0], np.asarray(want).reshape(-1)[0]
    if np.asarray(want).dtype.kind not in "fc":
        return bool(got == want)
    if np.isnan(want):
        return bool(np.isnan(got))
    eps = np.finfo(np.asarray(want).dtype).eps
    return bool(abs(got - want) <= 4 * eps * n * max(abs(want), abs(got), 1.0))


def contenders(op, x_host, backend: str, variants, peers: bool) -> list[Contender]:
    """What is timed on ``x_host``: pyreduce (each of ``variants`` on a GPU
    backend), then the peers that take ``op``."""
    import pyreduce

    out = []
    if backend == "cpu":
        out.append(Contender("pyreduce cpu", lambda: pyreduce.reduce(x_host, op, backend="cpu"),
                             lambda: pyreduce.reduce(x_host, op, backend="cpu")))
        if peers and op in NUMPY_OPS:
            ufunc = NUMPY_OPS[op]
            out.append(Contender(f"numpy {ufunc.__name__}.reduce",
                                 lambda: ufunc.reduce(x_host), lambda: ufunc.reduce(x_host)))
        return out
    be = pyreduce.backends.get(backend)
    x = be.to_device(x_host, 0)
    for v in variants:
        def dev(v=v):
            return pyreduce.reduce(x, op, backend=backend, variant=v, device_result=True)

        def host(v=v):
            return pyreduce.reduce(x, op, backend=backend, variant=v)

        out.append(Contender(f"pyreduce {v}", dev, host))
    if peers and backend == "cuda":
        out += _gpu_peers(op, x_host)
    return out


def _gpu_peers(op, x_host) -> list[Contender]:
    """CuPy for the built-in ops it has; ``numba.cuda.reduce`` for any op (its
    calls wait for the GPU: not held)."""
    from numba import cuda

    out = []
    if op in CUPY_OPS:
        try:
            import cupy as cp
        except ImportError:
            cp = None
        if cp is not None:
            xc = cp.asarray(x_host)
            method = getattr(xc, CUPY_OPS[op])
            out.append(Contender(f"cupy {CUPY_OPS[op]}", method, lambda: method().get()))
    fn = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b,
          "max": lambda a, b: a if a > b else b, "min": lambda a, b: a if a < b else b}.get(
        op, op)
    if callable(fn) and len(x_host) > 1:
        # numba's reduce folds its init in: start from the first element instead
        xd, first = cuda.to_device(x_host[1:]), x_host[0]
        red, res = cuda.Reduce(fn), cuda.device_array(1, dtype=x_host.dtype)
        out.append(Contender("numba.cuda.reduce", lambda: red(xd, res=res, init=first),
                             lambda: red(xd, init=first), hold=False))
    return out


def _timing(backend: str) -> tuple[str, str, str]:
    """(backend, timing, device) for ``--backend``."""
    import pyreduce

    if backend == "auto":
        best = pyreduce.available()[0]
        backend = "cpu" if best == "sim" else best  # the simulator only when asked for
    if backend not in pyreduce.available():
        raise RuntimeError(f"backend {backend!r} is not available here; available: "
                           f"{', '.join(pyreduce.available())}")
    if backend == "cuda":
        return backend, "gpu", measure.gpu_name()
    device = measure.cpu_name() if backend == "cpu" else "CUDA simulator"
    return backend, "wall", device


class Progress:
    """A bar on stderr when it is a terminal; otherwise one line per step."""

    def __init__(self, total: int, stream=None, quiet: bool = False):
        self.total, self.done, self.quiet = total, 0, quiet
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()

    def step(self, what: str) -> None:
        self.done += 1
        if self.quiet:
            return
        if self.tty:
            filled = round(30 * self.done / self.total)
            end = "\n" if self.done == self.total else ""
            print(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} "
                  f"{what:<40}", end=end, file=self.stream, flush=True)
        else:
            print(f"[{self.done}/{self.total}] {what}", file=self.stream, flush=True)


def measure_all(op, dtypes, sizes, backend, timing, variants, peers, reps, rounds,
                progress) -> list[dict]:
    """One row per dtype, size and contender (see :func:`run`)."""
    import pyreduce

    rows = []
    for dtype in dtypes:
        for n in sizes:
            x = data(dtype, n)
            want = pyreduce.reduce(x, op, backend="cpu")
            for c in contenders(op, x, backend, variants, peers):
                what = f"{dtype} {_label_size(n)} {c.name}"
                row = dict(dtype=dtype.name, n=n, contender=c.name)
                try:
                    ok = _close(c.host(), want, dtype, n)
                    samples = measure.rounds(c.device, timing, reps, rounds, c.hold)
                except Exception as exc:  # a contender that cannot do this case
                    row.update(error=f"{type(exc).__name__}: {exc}")
                else:
                    seconds = measure.median(samples)
                    row.update(seconds=seconds, GBps=x.nbytes / seconds / 1e9, ok=ok,
                               samples=samples)
                rows.append(row)
                progress.step(what)
    return rows


def table(rows) -> str:
    """The rows as text, each with its speed relative to the first contender of
    its dtype and size (pyreduce)."""
    head = ("dtype", "elements", "contender", "GB/s", "us/call", "speed vs first", "ok")
    lines = [head]
    first = {}
    for r in rows:
        key = (r["dtype"], r["n"])
        if "error" in r:
            lines.append((r["dtype"], _label_size(r["n"]), r["contender"], "-", "-", "-",
                          r["error"][:60]))
            continue
        base = first.setdefault(key, r["seconds"])
        lines.append((r["dtype"], _label_size(r["n"]), r["contender"], f"{r['GBps']:.1f}",
                      f"{r['seconds'] * 1e6:.1f}", f"{base / r['seconds']:.2f}",
                      "yes" if r["ok"] else "NO"))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    fmt = [f"{{:<{w}}}" if i < 3 or i == 6 else f"{{:>{w}}}" for i, w in enumerate(widths)]
    return "\n".join("  ".join(f.format(c) for f, c in zip(fmt, line)).rstrip()
                     for line in lines)


def chart(rows, meta, path: str) -> None:
    """GB/s against size, one panel per dtype, one line per contender."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    names = list(dict.fromkeys(r["contender"] for r in rows))
    colours = plt.get_cmap("tab10" if len(names) <= 10 else "tab20").colors
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5.5 * len(dtypes) + 2, 4.5), squeeze=False,
                             layout="constrained")
    for ax, dtype in zip(axes[0], dtypes):
        for k, name in enumerate(names):
            pts = [(r["n"], r["GBps"]) for r in rows
                   if r["dtype"] == dtype and r["contender"] == name and "GBps" in r]
            if pts:
                ax.plot(*zip(*pts), marker="os^vD<>p*h"[k % 10], ms=4,
                        color=colours[k % len(colours)], label=name)
        ax.set_xscale("log", base=2)
        ax.set_title(dtype)
        ax.set_xlabel("elements")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("GB/s (input bytes / time per call)")
    entries = {}  # every contender once, whichever panel it appears in
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    fig.legend(entries.values(), entries.keys(), loc="outside right upper", fontsize=8)
    fig.suptitle(f"{meta['op']} on {meta['device']} ({meta['timing']} timing)", fontsize=10)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def run(args, out=None, err=None) -> int:
    """The ``bench`` command: 0 when every answer was right, 1 otherwise, 2 on a
    usage error. The table goes to ``out``, progress and errors to ``err``
    (default: stdout and stderr)."""
    import pyreduce

    out, err = out or sys.stdout, err or sys.stderr

    try:
        op = parse_op(args.op)
        dtypes = [np.dtype(d) for d in args.dtypes]
        backend, timing, device = _timing(args.backend)
        sizes = [parse_size(s) for s in (args.sizes or SIZES["gpu" if timing == "gpu"
                                                              else backend])]
        for dtype in dtypes:  # a bad op or dtype fails here, not mid-run
            pyreduce.reduce(data(dtype, 3), op, backend="cpu")
        if args.png:
            importlib.import_module("matplotlib")
    except ModuleNotFoundError:
        print("error: --png needs matplotlib (pip install matplotlib)", file=err)
        return 2
    except (ValueError, TypeError, RuntimeError) as exc:
        print(f"error: {exc}", file=err)
        return 2
    variants = ["auto"]
    if backend != "cpu":
        variants = {"all": ["auto", *pyreduce.variants],
                    "steps": ["auto", *(v.name for v in pyreduce.variants.values() if v.step)]
                    }.get(args.variants[0], args.variants) if args.variants else ["auto"]
        unknown = [v for v in variants if v != "auto" and v not in pyreduce.variants]
        if unknown:
            print(f"error: unknown variant(s) {unknown}; known: auto, all, steps, "
                  f"{', '.join(pyreduce.variants)}", file=err)
            return 2
    elif args.variants:
        print("note: --variants applies to GPU backends; the cpu backend has one kernel",
              file=err)
    progress = Progress(_count(op, dtypes, sizes, backend, variants, args.peers), err,
                        args.quiet)
    rows = measure_all(op, dtypes, sizes, backend, timing, variants, args.peers, args.reps,
                       args.rounds, progress)
    meta = dict(op=args.op, backend=backend, device=device, timing=timing,
                timer=measure.GPU_TIMER if timing == "gpu" else measure.WALL_TIMER,
                date=datetime.date.today().isoformat(), reps=args.reps, rounds=args.rounds,
                pyreduce=pyreduce.__version__, numpy=np.__version__)
    print(f"{args.op} on {device}, backend {backend}; {meta['timer']}; median of "
          f"{args.rounds} rounds of {args.reps} calls", file=out)
    print(table(rows), file=out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)
    if args.png:
        chart(rows, meta, args.png)
    wrong = [r for r in rows if r.get("ok") is False]
    return 1 if wrong else 0


def _count(op, dtypes, sizes, backend, variants, peers) -> int:
    """How many measurements :func:`measure_all` makes (for the progress bar)."""
    if backend == "cpu":
        per = 1 + (1 if peers and op in NUMPY_OPS else 0)
    else:
        per = len(variants)
        if peers and backend == "cuda":
            per += (op in CUPY_OPS) + 1
    return max(1, len(dtypes) * len(sizes) * per)


def add_parser(sub) -> None:
    """The ``bench`` subcommand's options."""
    b = sub.add_parser("bench", help="time pyreduce's variants and its peers on your op",
                       description="Time pyreduce's variants and its peers on your "
                                   "operator: a table, JSON and a chart.")
    b.add_argument("op", help='a Python expression ("lambda a, b: a if a > b else b"), '
                              "module:function, or a built-in op name (add, max, ...)")
    b.add_argument("--dtypes", nargs="+", default=["float32"], metavar="DTYPE",
                   help="NumPy dtype names (default: float32)")
    b.add_argument("--sizes", nargs="+", metavar="N",
                   help="elements per array, e.g. 2**20 1e6 (default: 2**16 2**20 2**24 "
                        "2**26 on a GPU, 2**10 2**16 2**20 on the CPU)")
    b.add_argument("--variants", nargs="+", metavar="NAME",
                   help="pyreduce variants to time: names, 'steps' (the tutorial's) or "
                        "'all' (default: auto)")
    b.add_argument("--no-peers", dest="peers", action="store_false",
                   help="leave out CuPy, numba.cuda.reduce and NumPy")
    b.add_argument("--backend", default="auto", choices=("auto", "cuda", "sim", "cpu"),
                   help="auto: the GPU if one is present, else the CPU")
    b.add_argument("--reps", type=int, default=20, help="calls per round (default 20)")
    b.add_argument("--rounds", type=int, default=5,
                   help="rounds; the median is reported (default 5)")
    b.add_argument("--json", metavar="PATH", help="write the results as JSON")
    b.add_argument("--png", metavar="PATH", help="draw GB/s against size (needs matplotlib)")
    b.add_argument("--quiet", action="store_true", help="no progress on stderr")
