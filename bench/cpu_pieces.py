"""How the cpu backend should cut a NumPy input into pieces: each call timed
under several splits (:data:`CONFIGS`: pieces per thread, least bytes of a
built-in's piece, least elements of a fold's piece), against NumPy's own
single call, and what the crew of threads costs alone.

    python bench/cpu_pieces.py run --out pieces.json
    python bench/cpu_pieces.py report pieces.json

Cases: float64 and float32 arrays of 1e5 to 1e8 elements (``--sizes``), the
built-in ``max`` and ``sum`` (NumPy's loops, split over the pool) and a user's
``lambda a, b: a if a > b else b`` (the generated fold), each the best of
``--repeats`` calls. ``handoff_us`` times the crew's map
(:mod:`pyreduce.backends.crew`) of pieces that do nothing, one a thread.
"""

from __future__ import annotations

import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _cli import main  # noqa: E402
from pyreduce.calibrate import best_seconds  # noqa: E402
from _report import row, table, today  # noqa: E402

OPS = ("max", "sum", "lambda")


#: The splits compared: pieces per thread, least bytes a piece of a built-in
#: reads, least elements a piece of a fold reads.
CONFIGS = [(1, 1 << 22, 1 << 18), (1, 1 << 21, 1 << 17), (1, 1 << 20, 1 << 16),
           (2, 1 << 22, 1 << 18), (4, 1 << 20, 1 << 16)]


def _label(config) -> str:
    per_thread, piece, fold = config
    return f"{per_thread}/thread, {piece >> 10} KiB, {fold >> 10}Ki el"


def _config(config):
    """A context in which the cpu backend splits as ``config`` says (an input
    of two pieces' bytes or more is split)."""
    import contextlib

    from pyreduce.backends import cpu_parallel

    @contextlib.contextmanager
    def ctx():
        names = ("PIECES_PER_THREAD", "PIECE_BYTES", "PARALLEL_MIN", "SPLIT_BYTES")
        saved = [getattr(cpu_parallel, name) for name in names]
        for name, value in zip(names, (*config, 2 * config[1])):
            setattr(cpu_parallel, name, value)
        try:
            yield
        finally:
            for name, value in zip(names, saved):
                setattr(cpu_parallel, name, value)

    return ctx()


def run(args) -> dict:
    import pyreduce
    from pyreduce.backends import cpu

    be = cpu.shared()
    cores = be.threads
    counts = [p for p in (1, 2, 4, 8, 16, 32) if p <= cores]
    rng = np.random.default_rng(0)

    def nothing(k):
        return k

    handoff = {p: best_seconds(lambda: be.crew().map(nothing, [(k,) for k in range(p)], p),
                        args.repeats * 5) * 1e6 for p in counts}

    def user(a, b):
        return a if a > b else b

    calls = {"max": lambda x: pyreduce.max(x, backend="cpu"),
             "sum": lambda x: pyreduce.sum(x, backend="cpu"),
             "lambda": lambda x: pyreduce.reduce(x, user, backend="cpu")}
    numpy = {"max": np.max, "sum": np.sum, "lambda": np.max}
    rows = []
    for dtype in ("float64", "float32"):
        for n in args.sizes:
            x = rng.random(int(n)).astype(dtype)
            for op in OPS:
                out = {"dtype": dtype, "n": int(n), "op": op,
                       "numpy_us": best_seconds(lambda: numpy[op](x), args.repeats) * 1e6,
                       "default_us": best_seconds(lambda: calls[op](x), args.repeats) * 1e6,
                       "configs_us": {}}
                for config in CONFIGS:
                    with _config(config):
                        out["configs_us"][_label(config)] = best_seconds(lambda: calls[op](x),
                                                                  args.repeats) * 1e6
                rows.append(out)
                print(out, file=sys.stderr, flush=True)
    return {"meta": {"date": today(), "cpus": os.cpu_count(), "threads": cores,
                     "python": platform.python_version(), "numpy": np.__version__,
                     "machine": platform.processor() or platform.machine()},
            "handoff_us": handoff, "rows": rows}


def report(data: dict) -> str:
    meta = data["meta"]
    handoff = {int(p): us for p, us in data["handoff_us"].items()}
    labels = list(data["rows"][0]["configs_us"]) if data["rows"] else []
    lines = [f"cpu backend pieces, {meta['cpus']} CPUs ({meta['threads']} threads), "
             f"{meta['date']}; best of repeats, microseconds", ""]
    lines.append("the crew's map of empty pieces, one a thread: "
                 + ", ".join(f"{p}: {handoff[p]:.1f}" for p in sorted(handoff)))
    lines.append("")
    lines += table(["dtype", "op", "n", "numpy", "default"] + labels + ["best"], [])
    for r in data["rows"]:
        got = r["configs_us"]
        best = min(got, key=got.get)
        lines.append(row([r["dtype"], r["op"], f"{r['n']:.0e}", f"{r['numpy_us']:.0f}",
                          f"{r['default_us']:.0f}"] + [f"{got[k]:.0f}" for k in labels]
                         + [best]))
    return "\n".join(lines) + "\n"


def _arguments(r) -> None:
    r.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6, 1e7, 1e8])
    r.add_argument("--repeats", type=int, default=7)


if __name__ == "__main__":
    main(__doc__, _arguments, run, report)
