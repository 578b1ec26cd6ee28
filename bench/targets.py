"""Every named reduction against the best peer, in one command: the matrix of
targets of the speed work (each call at 1.00 or more of the fastest peer that
has it), as a table and a chart.

    NUMBA_ENABLE_CUDASIM=0 python bench/targets.py run --out targets.json
    python bench/targets.py report targets.json     # docs/performance/targets-<gpu>.md and .png
    python bench/targets.py run --device cpu --log2 16 --out cpu.json   # any machine
    python bench/targets.py merge a.json b.json --runs "how" --out targets.json  # runs of parts
    python bench/targets.py merge targets.json new.json --replace --runs "how" --out t.json
    NUMBA_ENABLE_CUDASIM=0 python bench/targets.py run --axes --out axes.json  # along axes
    python bench/targets.py report axes.json --stem axis-targets-h200

Functions: ``sum``, ``prod``, ``max``, ``min``, ``nansum``, ``nanmax``, ``any``,
``all``, ``mean``, ``var``, ``std``, ``argmax``, ``argmin`` and ``minmax``, of
whole arrays of 2**24, 2**26 and 2**28 elements (``--log2``) of float32,
float64 and int32, and float16 and bfloat16 for ``sum`` and ``mean``
(``--functions`` picks functions, ``--only`` cases by their text). Runs of
parts of the matrix join into one JSON with ``merge``.

``--axes`` measures the calls along axes instead (:func:`axis_cases`):
``sum``, ``max``, ``mean``, ``var``, ``argmax`` and ``minmax`` of float32
(``--functions`` picks others) along the rows (``axis=-1``) and the columns
(``axis=0``) of a square, a tall-skinny (``16`` columns) and a short-wide
(``16`` rows) matrix, and along the middle axis (``axis=1``) of three 3-D
arrays (a cube, one with a long middle axis between two of 16, one with a
middle axis of 16), each of ``2**28`` elements (``--log2``), the same values
in every layout.

On a GPU (``--device gpu``, the default) the peers are CuPy and PyTorch, each
given the same data (PyTorch a zero-copy tensor of the CuPy array; bfloat16,
which CuPy lacks, as a PyTorch tensor for pyreduce too), after the GPU is
brought to its steady state (``_timing.steady_gpu``). Where a peer has no
such call, the pair of calls that gives the same result stands in: CuPy's
``minmax`` is ``x.min()`` and ``x.max()``; PyTorch's ``nanmax`` of floats
replaces NaN by ``-inf`` first, and its ``mean``, ``var`` and ``std`` of
integers convert to float64 first. A call is timed to its result being ready:
the wall time of calls back to back, each followed by a device
synchronisation, median of rounds in which the libraries take turns on a GPU
kept busy (``_timing.interleaved_seconds``), after the case's calls have kept
it busy for :data:`BUSY_SECONDS`. Each library's own call is timed, and each
leaves its result on the device (pyreduce's of a CuPy array is a 0-d CuPy
array); with ``--results host`` each call ends with the value on the host, as
a user who wants the number writes it: ``device_result=False`` for pyreduce,
``.item()`` of the peers' results (``t.sum().item()``). Each library's answer is
checked against NumPy's first (float64 for sums, means and variances, within a rounding
bound; exactly for the rest), and one that disagrees is reported, not timed.

``--device cpu`` runs the same matrix on the host, pyreduce's cpu backend
against NumPy (bfloat16 summed in float32: NumPy sums it in bfloat16), for
the script's own tests and a quick look at any machine.
"""

from __future__ import annotations

import functools
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _cli import Command, UsageError, dispatch, with_out  # noqa: E402
from _report import (docs, load, meta, pyplot, row as _md_row, save, save_chart,  # noqa: E402
                     table, today, versions, write)
from _timing import interleaved_rounds, steady_gpu  # noqa: E402
from peers import to_host  # noqa: E402

FUNCTIONS = ["sum", "prod", "max", "min", "nansum", "nanmax", "any", "all", "mean", "var",
             "std", "argmax", "argmin", "minmax"]
DTYPES = ["float32", "float64", "int32"]
#: half precision, for the functions that take it in the targets
HALF = {"sum": ["float16", "bfloat16"], "mean": ["float16", "bfloat16"]}
LOG2 = [24, 26, 28]
GPU_PEERS = ["cupy", "torch"]
CPU_PEERS = ["numpy"]
DISTS = ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "torch")
#: at or above this ratio (the best peer's time over pyreduce's) a target is met
MET = 1.0


def cases(log2=LOG2, only=(), functions=FUNCTIONS) -> list[tuple[str, str, int]]:
    """``(function, dtype, n)`` for every target of ``functions``, those whose
    text (``"sum float32 2**24"``) contains one of ``only`` where given."""
    found = []
    for k in log2:
        for fn in [f for f in FUNCTIONS if f in functions]:
            for dt in DTYPES + HALF.get(fn, []):
                text = label(fn, dt, 2**k)
                if not only or any(part in text for part in only):
                    found.append((fn, dt, 2**k))
    return found


#: the functions of the calls along axes (``--axes``), of float32
AXIS_FUNCTIONS = ["sum", "max", "mean", "var", "argmax", "minmax"]
AXIS_LOG2 = [28]
#: the smallest size of the layouts along axes: ``16 x 2**(k - 8) x 16``
AXIS_MIN_LOG2 = 8


def axis_layouts(k: int) -> list[tuple[tuple[int, ...], int]]:
    """``(shape, axis)`` of the layouts along axes, each of ``2**k`` elements:
    the rows (``axis=-1``) and the columns (``axis=0``) of a square matrix, of a
    tall-skinny one of 16 columns and of a short-wide one of 16 rows; the middle
    axis of a cube, of ``16 x L x 16`` and of ``M x 16 x M``."""
    half, third, rest = k // 2, k // 3, (k - 4) // 2
    matrices = [(2**half, 2**(k - half)), (2**(k - 4), 16), (16, 2**(k - 4))]
    cubes = [(2**third, 2**(k - 2 * third), 2**third), (16, 2**(k - 8), 16),
             (2**rest, 16, 2**(k - 4 - rest))]
    found = [(m, axis) for m in matrices for axis in (-1, 0)] + [(c, 1) for c in cubes]
    return list(dict.fromkeys(found))  # small k: some shapes coincide


def axis_cases(log2=AXIS_LOG2, only=(), functions=AXIS_FUNCTIONS) -> list[tuple]:
    """``(function, "float32", shape, axis)`` for every call along axes of
    ``functions``, those whose text (``"var float32 16384x16384 axis=0"``)
    contains one of ``only`` where given."""
    found = []
    for k in log2:
        for shape, axis in axis_layouts(k):
            for fn in [f for f in FUNCTIONS if f in functions]:
                if not only or any(part in label(fn, "float32", 2**k, shape, axis)
                                   for part in only):
                    found.append((fn, "float32", shape, axis))
    return found


def label(fn: str, dtype: str, n: int, shape=None, axis=None) -> str:
    if shape is None:
        return f"{fn} {dtype} 2**{n.bit_length() - 1}"
    return f"{fn} {dtype} {'x'.join(map(str, shape))} axis={axis}"


def row_label(row: dict) -> str:
    return label(row["function"], row["dtype"], row["n"], row.get("shape"), row.get("axis"))


def case_key(row: dict) -> tuple:
    """What tells a row's case from another's: the whole array's
    ``(function, dtype, n)``, with the layout along axes after it."""
    shape = row.get("shape")
    return (row["function"], row["dtype"], row["n"]) + (
        () if shape is None else (tuple(shape), row["axis"]))


# --- data and the expected answers (NumPy, on the host)


def host_data(fn: str, dtype: str, n: int, seed: int = 0) -> np.ndarray:
    """:func:`make_data`, the same array again for the functions that take the
    same kind of data (the last two kept: 2**28 values take seconds to draw).
    Not to be written to."""
    kind = fn if fn in ("prod", "nansum", "nanmax", "all") else "plain"
    return _drawn(kind, "int32" if dtype == "int32" else "float", n, seed)


@functools.lru_cache(maxsize=2)
def _drawn(kind: str, dtype: str, n: int, seed: int) -> np.ndarray:
    x = make_data(kind, dtype, n, seed)
    x.setflags(write=False)
    return x


def make_data(fn: str, dtype: str, n: int, seed: int = 0) -> np.ndarray:
    """Values that make the call's answer worth checking, as float32 (for the
    floating dtypes, cast by the caller; ``prod``'s as float64 values that
    float32 holds exactly) or int32: normal floats (with a few NaN
    for the NaN-ignoring calls); for ``prod``, values near 1 (floats, on the
    grid of 2**-23) or mostly 1 with some -1 (ints), so that the product neither
    overflows nor vanishes; for
    ``all``, no zeros."""
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        if fn == "prod":
            return np.where(rng.random(n) < 1e-3, -1, 1).astype(np.int32)
        x = rng.integers(-1000, 1000, n, dtype=np.int32)
        return np.where(x == 0, 1, x).astype(np.int32) if fn == "all" else x
    # float32, cast by the caller
    if fn == "prod":
        # near 1, on the grid float32 has above 1 (2**-23) on both sides of it:
        # where values below 1 use the finer grid there, a tree of float32
        # products rounds ties one way (a + b odd in the finer grid, a * b < 0)
        # and every GPU library's product of 2**24 of them came out 11% low
        step = 2.0**-23
        x = 1 + np.round(rng.standard_normal(n) / (4 * np.sqrt(n) * step)) * step
    else:
        x = rng.standard_normal(n, dtype=np.float32)
    if fn in ("nansum", "nanmax"):
        x[rng.random(n) < 0.01] = np.nan
    if fn == "all":
        x[x == 0] = 1
    return x


def expected(fn: str, h: np.ndarray, axis=None):
    """NumPy's answer for ``h`` (the data as the libraries hold it), along
    ``axis`` where given."""
    floating = h.dtype.kind == "f" or h.dtype.name == "bfloat16"
    wide = h.astype(np.float64) if floating else h
    if fn == "minmax":
        return h.min(axis=axis), h.max(axis=axis)
    if fn in ("sum", "prod", "nansum", "mean", "var", "std"):
        return getattr(np, fn)(wide, axis=axis)
    return getattr(np, fn)(h, axis=axis)


def agrees(fn: str, got, want, h: np.ndarray, axis=None) -> bool:
    """Whether a library's answer is NumPy's (along ``axis`` where given, each
    result of ``n`` elements). Every library adds float64 in float64 and
    float32 and half precision in float32 (``acc``: that precision), and
    returns a half-precision sum (PyTorch a mean too) in half precision
    (``out``: the input's precision). Float sums are held to a tree sum's
    rounding (``4 log2(n) acc sum|x|``) and the result's (``out |sum|``);
    means, variances and deviations to a relative ``1e-4`` or ``2 out``,
    means also to the sum's bound over ``n`` (a mean near 0 rounds as its sum
    does); float products to ``8 sqrt(n)`` times the coarser precision (each of
    the ``n - 1`` products rounds); the rest exactly."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    floating = h.dtype.kind == "f" or h.dtype.name == "bfloat16"
    out = _eps(h.dtype)
    acc = float(np.finfo(np.float64 if h.dtype == np.float64 else np.float32).eps)
    n = h.size if axis is None else h.shape[axis]
    for g, w in zip(got, want):
        g, w = np.asarray(g).astype(np.float64), np.asarray(w).astype(np.float64)
        if g.shape != w.shape:
            return False
        if floating and fn in ("sum", "nansum"):
            magnitude = np.abs(h if h.dtype.kind == "f" else h.astype(np.float32))
            scale = np.nansum(magnitude, axis=axis, dtype=np.float64)
            bound = _tree_bound(n, acc) * scale + out * np.abs(w)
            if not np.all(np.abs(g - w) <= bound):  # NaN fails
                return False
        elif fn == "mean":
            atol = 0.0
            if floating:  # and a half result's smallest step, near 0
                atol = (_tree_bound(n, acc) * np.mean(np.abs(h.astype(np.float64)), axis=axis)
                        + float(_finfo(h.dtype).smallest_subnormal))
            if not _close(g, w, out, atol):
                return False
        elif fn in ("var", "std"):
            if not _close(g, w, out):
                return False
        elif floating and fn == "prod":
            # each of n - 1 products rounds: a random walk of sqrt(n) roundings
            if not _close(g, w, 8 * np.sqrt(n) * max(acc, out)):
                return False
        elif not np.array_equal(g, w, equal_nan=True):
            return False
    return True


def _tree_bound(n: int, eps: float) -> float:
    """A tree sum's rounding of ``n`` terms, over the sum of their magnitudes."""
    return 4 * max(1, int(np.ceil(np.log2(max(n, 2))))) * eps


def _close(g, w, eps: float, atol=0.0) -> bool:
    return bool(np.all(np.isclose(g, w, rtol=max(1e-4, 2 * eps), atol=atol, equal_nan=True)))


def _eps(dtype) -> float:
    """The precision of a float dtype; 0 for integers."""
    return float(_finfo(dtype).eps) if dtype.kind == "f" or dtype.name == "bfloat16" else 0.0


def _finfo(dtype):
    if dtype.name == "bfloat16":  # ml_dtypes': 8 bits of significand
        import ml_dtypes

        return ml_dtypes.finfo(ml_dtypes.bfloat16)
    return np.finfo(dtype)


# --- the calls


def pyreduce_call(fn: str, x, device: str, results: str = "default", axis=None):
    """pyreduce's call of ``fn`` (along ``axis`` where given): its default (on a
    GPU, a device result), or with ``results="host"`` its value on the host
    (``device_result=False``)."""
    import pyreduce

    f = getattr(pyreduce, fn)
    kw = {} if axis is None else {"axis": axis}
    if device == "cpu":
        return lambda: f(x, backend="cpu", **kw)
    if results == "host":
        return lambda: f(x, device_result=False, **kw)
    return lambda: f(x, **kw)


def peer_call(lib: str, fn: str, x, t=None, axis=None):
    """``lib``'s call of ``fn`` on ``x`` (a CuPy or NumPy array; ``t``: a PyTorch
    tensor of it), along ``axis`` where given, or None where the library has
    none for its dtype."""
    if lib in ("cupy", "numpy"):
        xp = __import__(lib)
        if x is None:  # CuPy has no bfloat16
            return None
        if fn == "minmax":
            return lambda: (x.min(axis=axis), x.max(axis=axis))
        if lib == "numpy" and x.dtype.name == "bfloat16":  # NumPy sums it in bfloat16
            return lambda: getattr(xp, fn)(x, axis=axis, dtype=np.float32)
        return lambda: getattr(xp, fn)(x, axis=axis)
    import torch

    dim = {} if axis is None else {"dim": axis}
    floating = t.dtype.is_floating_point
    if fn in ("mean", "var", "std") and not floating:  # integers: through float64
        call = {"mean": lambda: t.double().mean(**dim),
                "var": lambda: t.double().var(correction=0, **dim),
                "std": lambda: t.double().std(correction=0, **dim)}
        return call[fn]
    if fn in ("var", "std"):
        return lambda: getattr(t, fn)(correction=0, **dim)
    if fn == "nanmax":
        if not floating:
            return lambda: t.amax(**dim)
        return lambda: torch.nan_to_num(t, nan=float("-inf")).amax(**dim)
    named = {"max": "amax", "min": "amin", "minmax": "aminmax"}
    f = getattr(torch, named.get(fn, fn))
    return lambda: f(t, **dim)


# --- run


def _inputs(fn: str, dtype: str, n: int, device: str, shape=None):
    """``(host, pyreduce's input, the peers' inputs by library)``, of ``shape``
    where given."""
    h = host_data(fn, dtype, n)
    if shape is not None:
        h = h.reshape(shape)
    if device == "cpu":
        x = h.astype(_numpy_dtype(dtype))
        return x, x, {"numpy": (x, None)}
    import cupy as cp
    import torch

    if dtype == "bfloat16":
        t = torch.as_tensor(h, device="cuda").to(torch.bfloat16)
        host = to_host(t).astype(np.float32).astype(_numpy_dtype(dtype))
        return host, t, {"cupy": (None, None), "torch": (None, t)}
    x = cp.asarray(h.astype(dtype))
    return x.get(), x, {"cupy": (x, None), "torch": (None, torch.as_tensor(x, device="cuda"))}


def _numpy_dtype(dtype: str):
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def library_calls(fn: str, dtype: str, n: int, device: str, results: str = "default",
                  shape=None, axis=None) -> tuple:
    """``(host data, {library: its call of fn on that data, or None where it
    has none})``: pyreduce's, then the peers', of an array of ``shape`` along
    ``axis`` where given. ``results="host"``: each call ends with its value on
    the host (pyreduce's ``device_result=False``, a peer's device result copied
    there, as ``t.sum().item()`` would: :func:`host_value`)."""
    host, mine, theirs = _inputs(fn, dtype, n, device, shape)
    calls = {"pyreduce": pyreduce_call(fn, mine, device, results, axis)}
    calls.update((lib, peer_call(lib, fn, x, t, axis)) for lib, (x, t) in theirs.items())
    if results == "host" and device == "gpu":
        calls.update((lib, None if c is None else (lambda c=c: host_value(c())))
                     for lib, c in calls.items() if lib != "pyreduce")
    return host, calls


def host_value(v):
    """A peer's result (a CuPy array or PyTorch tensor, or a tuple of them) as
    the host value a user takes of it: ``.item()`` of a 0-d one, the cheapest
    copy both libraries offer (PyTorch's ``.cpu()`` makes a tensor first), and
    of one along axes CuPy's ``.get()``, PyTorch's ``.cpu()``."""
    if isinstance(v, tuple):
        return tuple(host_value(p) for p in v)
    if getattr(v, "ndim", 0) == 0:
        return v.item()
    return v.get() if hasattr(v, "get") else v.cpu()


def measure(fn: str, dtype: str, n: int, device: str, rounds: int,
            results: str = "default", shape=None, axis=None) -> dict:
    """The row of one case: each library's answer checked, then its time per
    call; of an array of ``shape`` (``n`` elements) along ``axis`` where given."""
    host, calls = library_calls(fn, dtype, n, device, results, shape, axis)
    want = expected(fn, host, axis)
    sync = _synchronize(device)
    row = {"function": fn, "dtype": dtype, "n": n, "seconds": {}, "ok": True}
    if shape is not None:
        row.update(shape=list(shape), axis=axis)
    timed = {}
    for lib, call in calls.items():
        row["seconds"][lib] = None
        if call is None:
            continue
        try:
            got = to_host(call())
        except Exception as e:  # a library without the call: reported, not timed
            row.setdefault("errors", {})[lib] = f"{type(e).__name__}: {e}"[:200]
            if lib == "pyreduce":  # a failure of pyreduce's own
                row["ok"] = False
            continue
        if not agrees(fn, got, want, host, axis):
            row["ok"] = False
            row.setdefault("disagree", []).append(lib)
            row.setdefault("values", {"numpy": repr(want)})[lib] = repr(got)
            continue

        def ready(call=call):
            call()
            sync()

        timed[lib] = ready
    if device == "gpu":
        _busy(timed, BUSY_SECONDS)
    times = interleaved_rounds(timed, calls=5, rounds=rounds)
    row["seconds"].update({lib: float(np.median(t)) for lib, t in times.items()})
    row["rounds"] = times  # each round's, for the spread of its paired ratios
    print(_line(row, spread=True), flush=True)
    return row


#: seconds the case's own calls keep the GPU busy before they are timed: after
#: the host work of drawing a case's data the GPU's clocks have dropped, and at
#: 2**24 a call timed then took about a quarter longer, for every library
BUSY_SECONDS = 0.3


def _busy(timed: dict, seconds: float) -> None:
    """The calls of ``timed`` in turn for ``seconds``."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for call in timed.values():
            call()


def _synchronize(device: str):
    if device == "cpu":
        return lambda: None
    import cupy as cp

    return cp.cuda.Device().synchronize


def _elements(shape) -> int:
    return int(np.prod(shape))


def run(args) -> int:
    log2 = args.log2 or LOG2
    if args.device == "gpu":
        steady_gpu()
        about = meta(DISTS)
    else:
        about = {"gpu": None, "date": today(), "versions": versions(DISTS),
                 "cpus": os.cpu_count()}
    if args.results == "host":
        if args.device != "gpu":
            raise UsageError("--results host needs --device gpu: on the cpu every value "
                             "is on the host already")
        about["results"] = "host"
    data = {"meta": about, "device": args.device, "rows": []}
    if args.axes:
        if min(args.log2 or AXIS_LOG2) < AXIS_MIN_LOG2:
            raise UsageError(f"--axes needs --log2 of {AXIS_MIN_LOG2} or more: its 3-D "
                             "layouts have two axes of 16 elements")
        todo = [(fn, dt, _elements(shape), shape, axis) for fn, dt, shape, axis in axis_cases(
            args.log2 or AXIS_LOG2, args.only or (), args.functions or AXIS_FUNCTIONS)]
    else:
        todo = [c + (None, None) for c in cases(log2, args.only or (),
                                                args.functions or FUNCTIONS)]
    if not todo:
        raise UsageError("no case matches --only and --functions")
    for fn, dt, n, shape, axis in todo:
        data["rows"].append(measure(fn, dt, n, args.device, args.rounds, args.results,
                                    shape, axis))
        save(args.out, data)  # after every case: a run cut short keeps what it measured
    return 0 if all(r["ok"] for r in data["rows"]) else 1


# --- report


def ratio(row: dict) -> float | None:
    """The fastest peer's time over pyreduce's (above 1: pyreduce is faster), or
    None where either is missing."""
    s = row["seconds"]
    peers = [v for k, v in s.items() if k != "pyreduce" and v]
    if not peers or not s.get("pyreduce"):
        return None
    return min(peers) / s["pyreduce"]


def round_ratios(row: dict) -> list | None:
    """The fastest peer's time over pyreduce's in each round of the row (the
    libraries take turns in a round, so the GPU's and the host's drift between
    rounds touch a round's times alike), or None for a row without them (runs
    before they were kept) or without a peer."""
    rounds = row.get("rounds")
    if not rounds or not rounds.get("pyreduce"):
        return None
    peers = [t for lib, t in rounds.items() if lib != "pyreduce" and t]
    if not peers:
        return None
    return [min(p[i] for p in peers) / mine for i, mine in enumerate(rounds["pyreduce"])]


def spread_text(row: dict) -> str:
    """The middle half of the row's round ratios (:func:`round_ratios`), as
    ``lo-hi`` to two decimals; ``-`` without them."""
    rs = round_ratios(row)
    if not rs:
        return "-"
    lo, hi = np.percentile(rs, [25, 75])
    return f"{ratio_text(lo)}-{ratio_text(hi)}"  # a round short of 1.00 never reads 1.00


def _us(s) -> str:
    return "-" if s is None else f"{s * 1e6:.0f} us"


def _libs(rows) -> list[str]:
    seen = []
    for r in rows:
        for lib in r["seconds"]:
            if lib not in seen:
                seen.append(lib)
    return seen


def ratio_text(r: float) -> str:
    """``r`` to two decimals, a ratio short of the target at most 0.99: 0.996
    does not print as a 1.00 that is "not met"."""
    text = f"{r:.2f}"
    return f"{MET - 0.01:.2f}" if r < MET <= float(text) else text


def _line(row: dict, libs=None, spread: bool = False) -> str:
    """The row's table line; ``spread``: with its rounds' column (:func:`spread_text`)."""
    libs = libs or list(row["seconds"])
    r = ratio(row)
    cells = [row_label(row)]
    cells += [_us(row["seconds"].get(lib)) for lib in libs]
    cells += ["-" if r is None else ratio_text(r)]
    if spread:
        cells.append(spread_text(row))
    cells.append("" if r is None else ("met" if r >= MET else "not met"))
    flag = "" if row["ok"] else f" (disagrees: {', '.join(row.get('disagree', []))})"
    return _md_row(cells) + flag


def report_text(data: dict) -> str:
    rows, m = data["rows"], data["meta"]
    libs = _libs(rows)
    measured = [r for r in rows if ratio(r) is not None]
    met = [r for r in measured if ratio(r) >= MET]
    if not m.get("gpu"):
        where = "pyreduce's cpu backend and NumPy, values on the host"
    elif m.get("results") == "host":
        where = ("every library's value on the host (pyreduce's device_result=False, a "
                 "peer's result copied there by .item())")
    else:
        where = "each library's own call, its result on the device"
    head = (f"{m.get('gpu') or 'CPU'}, {m.get('date')}; time per call to a ready "
            f"result, {where}. Ratio: the fastest peer's time over pyreduce's (at least "
            f"{MET:.2f}: the target is met). Met: {len(met)} of {len(measured)} "
            "measured.\n")
    if m.get("runs"):  # rows from more than one run: which
        head += f"Runs: {m['runs']}.\n"
    spread = any(round_ratios(r) for r in rows)
    if spread:
        head += ("By round: the middle half (25th to 75th percentile) of the ratios of "
                 "each round's times, the libraries taking turns in a round.\n")
    cols = ["best peer / pyreduce"] + (["by round"] if spread else []) + ["target"]
    return "\n".join([head] + summary(rows) + [""] + table(["case"] + libs + cols, [])
                      + [_line(r, libs, spread) for r in rows]) + "\n"


def _group(row: dict) -> str:
    """A row's group in :func:`summary`: its size, or its layout along axes."""
    if row.get("shape") is None:
        return f"2**{row['n'].bit_length() - 1}"
    return f"{'x'.join(map(str, row['shape']))} axis={row['axis']}"


def summary(rows) -> list[str]:
    """A table line for each size (or layout along axes) of ``rows``: its
    cases, those measured (pyreduce and a peer timed), how many met the target,
    how many came within 5% of it, the median and lowest ratio."""
    groups = {}
    for r in rows:
        groups.setdefault(_group(r), []).append(ratio(r))
    cells = []
    for name, ratios in groups.items():
        got = sorted(v for v in ratios if v is not None)
        counts = [str(len(ratios)), str(len(got)), str(sum(v >= MET for v in got)),
                  str(sum(v >= 0.95 for v in got))]
        cells.append([name] + counts + ([ratio_text(np.median(got)), ratio_text(got[0])]
                                        if got else ["-", "-"]))
    return table(["size or layout", "cases", "measured", "met", "at 0.95 or more", "median",
                  "lowest"], cells, "lrrrrrr")


def chart(data: dict, path: str) -> None:
    """A grid of ratios: functions down, dtype and size (or the layout along
    axes) across; green where the target is met, red where not, grey where
    nothing was measured."""
    rows = data["rows"]
    fns = [f for f in FUNCTIONS if any(r["function"] == f for r in rows)]
    cols = []
    for r in rows:
        if _column(r) not in cols:
            cols.append(_column(r))
    grid = np.full((len(fns), len(cols)), np.nan)
    for r in rows:
        v = ratio(r)
        if v is not None:
            grid[fns.index(r["function"]), cols.index(_column(r))] = v
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(cols), 1.0 + 0.4 * len(fns)))
    from matplotlib.colors import TwoSlopeNorm

    shown = np.ma.masked_invalid(grid)
    cmap = plt.get_cmap("RdYlGn").copy()
    cmap.set_bad("#dddddd")
    ax.imshow(shown, cmap=cmap, norm=TwoSlopeNorm(vmin=0.0, vcenter=MET, vmax=2.0),
              aspect="auto")
    for i in range(len(fns)):
        for j in range(len(cols)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, ratio_text(grid[i, j]), ha="center", va="center", fontsize=7)
    ax.set_yticks(range(len(fns)), fns)
    ax.set_xticks(range(len(cols)), cols, fontsize=7)
    m = data["meta"]
    ax.set_title(f"best peer / pyreduce, {m.get('gpu') or 'CPU'}, {m.get('date')}", fontsize=9)
    fig.tight_layout()
    save_chart(fig, path)


def _column(row: dict) -> str:
    """A row's column in the chart: its dtype and size, or its layout along axes."""
    if row.get("shape") is None:
        return f"{row['dtype']}\n2**{row['n'].bit_length() - 1}"
    return f"{'x'.join(map(str, row['shape']))}\naxis={row['axis']}"


def report(args) -> int:
    data = load(args.path)
    text = report_text(data)
    if args.stem:
        base = os.path.join(args.docs, args.stem)
        write(base + ".md", text)
        chart(data, base + ".png")
    print(text, end="")
    return 0


def _run_arguments(p) -> None:
    p.add_argument("--device", choices=["gpu", "cpu"], default="gpu",
                   help="gpu: against CuPy and PyTorch; cpu: the cpu backend against NumPy")
    p.add_argument("--log2", type=int, nargs="+",
                   help=f"sizes as powers of two (default {LOG2}; --axes: {AXIS_LOG2})")
    p.add_argument("--only", action="append", metavar="TEXT",
                   help='only the cases whose text contains TEXT, e.g. "mean" or "float64 2**26"')
    p.add_argument("--functions", nargs="+", choices=FUNCTIONS, metavar="NAME",
                   help="only these functions (default: all 14)")
    p.add_argument("--results", choices=["default", "host"], default="default",
                   help="default: each library's own call, its result on the device; "
                        "host: every value on the host")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--axes", action="store_true",
                   help="the calls along axes of float32 (default functions: "
                        f"{', '.join(AXIS_FUNCTIONS)}; size: 2**{AXIS_LOG2[0]})")


def merge(args) -> int:
    """The rows of runs that measured different cases, as one run's JSON in the
    matrix's order, with ``--runs`` (how they were made) in its meta; the meta
    of the first, whose GPU, versions and kind of results (``--results``)
    each of the others must share. A case in more than one run is refused,
    unless ``--replace``: then a later run's row replaces an earlier one (a
    re-measured case in a committed matrix)."""
    runs = [load(path) for path in args.paths]

    def shared(data):  # what the runs of one matrix have in common
        return {k: data["meta"].get(k) for k in ("gpu", "versions", "results")}

    for path, data in zip(args.paths, runs):
        if shared(data) != shared(runs[0]):
            raise UsageError(f"{path} ran as {shared(data)}, {args.paths[0]} as "
                             f"{shared(runs[0])}")
    rows = {}
    for data in runs:
        for r in data["rows"]:
            case = case_key(r)
            if case in rows and not args.replace:
                raise UsageError(f"{row_label(r)} is in more than one of {', '.join(args.paths)}")
            rows[case] = r
    log2 = sorted({c[2].bit_length() - 1 for c in rows})
    every = [c for c in cases(log2)] + [
        (fn, dt, _elements(shape), tuple(shape), axis)
        for fn, dt, shape, axis in axis_cases(log2, functions=FUNCTIONS)]
    order = {c: i for i, c in enumerate(every)}  # a case of no matrix of now: last
    merged = {"meta": {**runs[0]["meta"], "runs": args.runs}, "device": runs[0]["device"],
              "rows": [rows[c] for c in sorted(rows, key=lambda c: order.get(c, len(order)))]}
    save(args.out, merged)
    print(f"{args.out}: {len(merged['rows'])} rows of {len(runs)} runs")
    return 0


def _merge_arguments(p) -> None:
    p.add_argument("paths", nargs="+", help="JSON of runs of different cases (--replace: or "
                                            "of the same cases)")
    p.add_argument("--runs", required=True,
                   help="how the runs were made, for the report's 'Runs:' line")
    p.add_argument("--replace", action="store_true",
                   help="a case in more than one run: the last run's row (default: refused)")


def _report_arguments(p) -> None:
    p.add_argument("path")
    p.add_argument("--stem", help="write DOCS/STEM.md and DOCS/STEM.png too "
                                  "(e.g. targets-h100)")
    p.add_argument("--docs", default=docs("performance"))


if __name__ == "__main__":
    sys.exit(dispatch(__doc__, {
        "run": Command(run, with_out(_run_arguments), "measure the matrix"),
        "report": Command(report, _report_arguments, "the table (and chart) of a run"),
        "merge": Command(merge, with_out(_merge_arguments), "one run's JSON of several runs"),
    }))
