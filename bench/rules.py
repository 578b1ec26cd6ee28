"""The planner's layout of a whole-array call against alternatives, each run as
a user's call runs it: what a rule of ``planner.auto_variant`` is chosen from.

    NUMBA_ENABLE_CUDASIM=0 python bench/rules.py --out rules.json
    NUMBA_ENABLE_CUDASIM=0 python bench/rules.py --only "sum float64" --log2 28

``bench/layouts.py`` times a layout given as ``tuning=``, which a plain call's
repeat does not take (its express runner, :mod:`pyreduce.backends.express`):
its times a call waits for hold that path's host time. Here each alternative is
recorded in a tuning store of the run's own (``PYREDUCE_TUNING_FILE``, a
temporary file; :mod:`pyreduce.tuned`), which an untuned call reads, so the
call is the user's own ``pyreduce.sum(x)``; ``auto`` is the planner's rule,
the store empty. For each case, in every round each contender in turn (the
first changing from round to round; PyTorch and CuPy among them): a few
untimed calls, then ``--calls`` calls each followed by a device
synchronisation (*ready*: what a call that waits for its result takes) and
``--calls`` back to back with one synchronisation (*piped*: what the GPU
takes). Medians of ``--rounds`` rounds; every contender's answer is checked
against NumPy's first.

Alternatives (:data:`ALTERNATIVES`): ``(variant, block, items, waves)``, the
grid at most ``waves`` waves of resident blocks (``DeviceInfo.max_grid``);
items per thread as a multiple of a 16-byte load (``items`` 2: two loads).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _report import add_row, has_cuda, meta  # noqa: E402

#: (variant, block, 16-byte loads a lane, waves) tried beside the planner's rule
ALTERNATIVES = [("last_block", 512, 2, 1), ("last_block", 512, 2, 2), ("last_block", 512, 2, 4),
                ("last_block", 512, 1, 2), ("warp_shuffle_x2", 512, 2, 16),
                ("warp_shuffle", 512, 2, 8)]
#: a commutative op's block tiles read as one run each (CUB's striped loads):
#: on one wave and up to four, blocks of 512 and of 256 with four loads a lane,
#: and one block tile a block (a grid of many waves), in one launch and two;
#: and on the five blocks an SM of the per-lane rule of two-field accumulators
#: (``planner.LANES_WAVE``)
STRIPED = [("last_block_striped", 512, 2, 1), ("last_block_striped", 512, 2, 4),
           ("last_block_striped", 256, 4, 1), ("last_block_striped", 256, 4, 4),
           ("warp_shuffle_striped", 256, 4, 32), ("warp_shuffle_striped", 512, 2, 32),
           ("last_block_striped", 256, 2, 0.625), ("last_block_striped", 256, 4, 0.625)]
#: the half-precision sums' own: they widen into float32 (a load is 8 items)
HALF = [("last_block", 512, 2, 1), ("last_block", 512, 2, 2), ("last_block", 512, 2, 4),
        ("last_block", 256, 2, 1), ("last_block", 256, 2, 2), ("last_block_lanes", 512, 2, 1),
        ("warp_shuffle_x2", 256, 2, 16), ("warp_shuffle", 256, 4, 4), ("warp_shuffle", 256, 2, 1),
        ("warp_shuffle_lanes", 256, 2, 1)]
#: half-precision block tiles read as one run each, in the block sizes and
#: loads tried for ``planner.HALF_STRIPED_ITEMS``
HALF_STRIPED = [("last_block_striped", 512, 2, 1), ("last_block_striped", 256, 2, 1),
                ("last_block_striped", 256, 4, 1)]
#: a mean's (count, sum) folded per lane in one launch (``planner._tuple_rule``)
MEAN = [("last_block_lanes", 256, 2, 0.625), ("last_block_lanes", 512, 2, 1)]
CALLS = ["sum float64", "max float64", "sum float32", "max int32", "sum float16",
         "sum bfloat16", "mean float16", "mean bfloat16"]
DISTS = ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "torch")


def alternatives(fn: str, dtype: str) -> list:
    half = dtype in ("float16", "bfloat16")
    found = HALF + HALF_STRIPED if half else ALTERNATIVES + STRIPED
    return found + MEAN if fn == "mean" else found


def _inputs(dtype: str, n: int):
    """``(pyreduce's input, CuPy's or None, PyTorch's, NumPy's values)``."""
    import cupy as cp
    import torch

    h = _normal(n)
    if dtype == "int32":
        h = (h * 1000).astype(np.int32)
    if dtype == "bfloat16":
        t = torch.as_tensor(h, device="cuda").to(torch.bfloat16)
        return t, None, t, t.float().cpu().numpy()
    x = cp.asarray(h.astype(dtype))
    return x, x, torch.as_tensor(x, device="cuda"), x.get()


@functools.lru_cache(maxsize=1)
def _normal(n: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(n, dtype=np.float32)


def _peer(lib: str, fn: str, x, t):
    if lib == "cupy":
        return None if x is None else (lambda: getattr(x, fn)())
    name = {"max": "amax"}.get(fn, fn)
    return lambda: getattr(t, name)()


def _key(fn: str, x, n: int):
    """The tuning store's key of ``pyreduce.<fn>(x)`` (its input and accumulator
    dtypes, op kind and size class, as the planner looks it up)."""
    from pyreduce import backends, structured, tuned
    from pyreduce.interop import inspect
    from pyreduce.ops import as_monoid

    info = inspect(x)
    if fn == "mean":
        monoid = structured.moments_monoid(info.dtype, "mean")
    elif fn == "argmax":
        monoid = structured.argmax_monoid(info.dtype)
    else:
        monoid = as_monoid({"sum": "add"}.get(fn, fn), info.dtype)
    device = backends.get("auto", on_device=True).device(None)
    return device, tuned.key_for(device, info.dtype, monoid.dtype, monoid.key, n), info.dtype


def _agrees(fn: str, got, h: np.ndarray) -> bool:
    want = getattr(np, fn)(h.astype(np.float64))
    if fn in ("max", "argmax"):
        return float(got) == float(want)
    scale = float(np.abs(h).astype(np.float64).sum()) / (h.size if fn == "mean" else 1)
    return abs(float(got) - float(want)) <= 1e-3 * scale


def case(fn: str, dtype: str, n: int, rounds: int, calls: int) -> dict:
    import cupy as cp

    import pyreduce
    from pyreduce import tuned

    x, xc, t, h = _inputs(dtype, n)
    device, key, in_dtype = _key(fn, x, n)
    sync = cp.cuda.Device().synchronize
    mine = getattr(pyreduce, fn)
    contenders = {"auto": None}
    for variant, block, loads, waves in alternatives(fn, dtype):
        items = loads * 16 // (2 if dtype == "bfloat16" else np.dtype(dtype).itemsize)
        grid = int(waves * device.max_grid(block))
        contenders[f"{variant}/b{block}/i{items}/w{waves}"] = tuned.Choice(
            variant, block, items, grid, 0.0, "bench/rules.py")
    peers = {lib: _peer(lib, fn, xc, t) for lib in ("torch", "cupy")}
    peers = {k: v for k, v in peers.items() if v is not None}

    def use(choice):
        if choice is None:
            tuned.reset()
        else:
            tuned.record(key, choice)

    found = []  # what the planner's lookups in the store gave
    lookup = tuned.lookup

    def seen(*args):
        found.append(lookup(*args))
        return found[-1]

    row = {"function": fn, "dtype": dtype, "n": n, "ready": {}, "piped": {}, "wrong": []}
    tuned.lookup = seen
    try:
        for name, choice in contenders.items():  # compile each, check its answer
            use(choice)
            found.clear()
            if not _agrees(fn, mine(x), h):
                row["wrong"].append(name)
            if choice is not None and choice not in found:
                raise SystemExit(f"{fn} {dtype}: the planner did not look up {key.text}")
    finally:
        tuned.lookup = lookup
    for lib, call in peers.items():
        if not _agrees(fn, call(), h):
            row["wrong"].append(lib)
    names = [k for k in list(contenders) + list(peers) if k not in row["wrong"]]
    ready = {k: [] for k in names}
    piped = {k: [] for k in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            if name in contenders:
                use(contenders[name])
                call = lambda: mine(x)  # noqa: E731
            else:
                call = peers[name]
            for _ in range(5):
                call()
            sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                call()
                sync()
            ready[name].append((time.perf_counter() - t0) / calls)
            t0 = time.perf_counter()
            for _ in range(calls):
                call()
            sync()
            piped[name].append((time.perf_counter() - t0) / calls)
    tuned.reset()
    row["ready"] = {k: float(np.median(v)) for k, v in ready.items()}
    row["piped"] = {k: float(np.median(v)) for k, v in piped.items()}
    row["in_dtype"] = str(in_dtype)
    return row


def line(row: dict) -> str:
    head = f"{row['function']} {row['dtype']} 2**{row['n'].bit_length() - 1}"
    best = min(v for k, v in row["ready"].items() if k in ("torch", "cupy"))
    cells = [f"  {k:32s} ready {v * 1e6:7.1f} us  piped {row['piped'][k] * 1e6:7.1f} us"
             f"  peer/this {best / v:4.2f}" for k, v in row["ready"].items()]
    wrong = f"\n  wrong: {', '.join(row['wrong'])}" if row["wrong"] else ""
    return "\n".join([head] + cells) + wrong


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log2", type=int, nargs="+", default=[24, 26, 28])
    ap.add_argument("--only", nargs="+", default=CALLS, metavar="CALL",
                    help="calls as 'sum float64' (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--out", help="JSON of every case, written after each")
    args = ap.parse_args(argv)
    if not has_cuda():
        raise SystemExit("rules.py needs a CUDA GPU (and NUMBA_ENABLE_CUDASIM unset or 0)")
    os.environ["PYREDUCE_TUNING_FILE"] = os.path.join(tempfile.mkdtemp(), "tuning.json")
    from _timing import steady_gpu

    steady_gpu()
    data = {"meta": meta(DISTS), "rows": []}
    m = data["meta"]
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    print(f"# bench/rules.py on an {m['gpu']}, {m['date']} ({versions}); --rounds "
          f"{args.rounds} --calls {args.calls}; peer/this: the faster peer's ready time over "
          "this line's", flush=True)
    for k in args.log2:
        for text in args.only:
            fn, dtype = text.split()
            row = case(fn, dtype, 2**k, args.rounds, args.calls)
            add_row(data, row, line(row), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
