"""pyreduce against CuPy (CUB), PyTorch, cuda.compute and numba.cuda.reduce, in one
process on one GPU.

    python bench/compare.py run --out compare.json      # on the GPU machine
    python bench/compare.py run --out compare.json --cases 'int8->int64 sum' --add
                                                        # complete a cut-off run
    python bench/compare.py sweep --out sweep.json      # pyreduce's tuning space
    python bench/compare.py report compare.json         # tables and chart into docs/
    python bench/compare.py report-sweep sweep.json     # docs/performance/sweep.md

``run`` measures, for every case of :data:`peers.CASES` and sizes 2**10..2**28:
*device time* (CUDA events around back-to-back calls that leave the result on the
device, per call, queued while the GPU is held so that the host's pace is not
timed: :func:`pyreduce.tuning.device_seconds`; GB/s are input bytes over it),
*host latency* (wall time of a call that returns a host scalar) and the *device
call* (wall time per call of back-to-back calls that leave the result on the
device), with each library's answer checked against a float64 (or exact)
reference. It also measures the bandwidth ceiling (a
device-to-device copy, read + write bytes) and pyreduce's compile time: the first
call with a new op, and a second lambda with the same code. ``sweep`` times
pyreduce's variants, block sizes, items per thread and grid sizes against CuPy
and ``variant="auto"`` (at 2**20..2**28, or ``--log2``). ``report`` writes
``docs/performance/compare.md``, ``compare.png`` and ``compare-latency.png``.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _cli import Command, UsageError, add_max_log2, dispatch, upto, with_out  # noqa: E402
from _report import (cupy_version, docs, load, log2, meta as _run_meta, pow2,  # noqa: E402
                     pyplot, row as _md_row, rule, save, save_chart, table, versions_text, write)
from _timing import copy_ceiling, device_seconds, host_seconds  # noqa: E402,F401
from peers import (CASES, DISTS, LIBS, UNHELD, Case, calls, close, data,  # noqa: E402
                   expected, pick)

SIZES = [2**10, 2**12, 2**14, 2**16, 2**20, 2**24, 2**26, 2**28]
DOCS = docs("performance")


def _meta() -> dict:
    return _run_meta(DISTS)


#: the least wall time of one round of host calls (:func:`_timing.host_seconds`)
HOST_ROUND_S = 0.02


def _timings(n: int) -> tuple[int, int]:
    """(device reps, host calls) so that each measurement takes tens of ms."""
    if n <= 2**20:
        return 50, 200
    if n <= 2**24:
        return 20, 50
    return 5, 10


def measure(case: Case, n: int, libs, x, rounds: int = 3) -> list[dict]:
    """Every library on ``x``, interleaved over ``rounds`` rounds (median of each),
    so that drift in the GPU's clocks during a run favours none of them. Each
    round starts the order one library later, so that no library always follows
    the same one (whose leftovers, such as Numba's deferred frees, it might pay
    for)."""
    want = expected(case, x)
    reps, host_calls = _timings(n)
    made = {lib: calls(lib, case, x) for lib in libs}
    made = {lib: fns for lib, fns in made.items() if fns is not None}
    got = {lib: fns[1]() for lib, fns in made.items()}
    dev = {lib: [] for lib in made}
    host = {lib: [] for lib in made}
    issue = {lib: [] for lib in made}
    order = list(made)
    for k in range(rounds):
        for lib in order[k % len(order):] + order[:k % len(order)]:
            device_fn, host_fn = made[lib]
            dev[lib].append(device_seconds(device_fn, reps=reps, batches=3,
                                           hold=lib not in UNHELD))
            host[lib].append(host_seconds(host_fn, calls=host_calls, rounds=3,
                                          min_seconds=HOST_ROUND_S))
            issue[lib].append(host_seconds(device_fn, calls=host_calls, rounds=3,
                                           min_seconds=HOST_ROUND_S))
    rows = []
    for lib in made:
        dsec, hsec = float(np.median(dev[lib])), float(np.median(host[lib]))
        isec = float(np.median(issue[lib]))
        rows.append(dict(lib=lib, case=case.name, dtype=case.dtype, op=case.op, acc=case.acc,
                         n=n, device_us=dsec * 1e6, GBps=x.nbytes / dsec / 1e9,
                         host_us=hsec * 1e6, call_us=isec * 1e6, rounds=rounds,
                         correct=bool(close(got[lib], want, case, n))))
    return rows


def compile_times() -> dict:
    """The process's first pyreduce call (import, CUDA start, a built-in op's
    kernel), then the first call with a never-seen op, then a second lambda with
    the same code."""
    import cupy as cp

    x = cp.arange(1000, dtype=cp.float32)
    t0 = time.perf_counter()
    import pyreduce

    pyreduce.reduce(x, "max", device_result=False)  # until the value is on the host
    startup = time.perf_counter() - t0
    salt = np.float32(time.time_ns() % 1000)  # a closure value never seen before

    def make():
        return lambda a, b: a + b + salt * np.float32(0)

    t0 = time.perf_counter()
    pyreduce.reduce(x, make(), device_result=False)
    first = time.perf_counter() - t0
    builds = pyreduce.cache_info().builds
    t0 = time.perf_counter()
    pyreduce.reduce(x, make(), device_result=False)
    second = time.perf_counter() - t0
    return dict(process_first_call_s=startup, first_call_s=first,
                same_code_second_call_s=second,
                second_built=int(pyreduce.cache_info().builds - builds))


def run(out: str, sizes=SIZES, cases=CASES, libs=LIBS, add: bool = False) -> None:
    """Measure ``cases`` into ``out``. With ``add``, the rows of other cases
    already in ``out`` are kept, and this process's description goes into the
    meta's ``later`` list (a run cut off by a device time limit, completed)."""
    meta = _meta()
    meta["ceiling_GBps"] = copy_ceiling()
    meta["compile"] = compile_times()
    print(f"{meta['gpu']}: copy ceiling {meta['ceiling_GBps']:.0f} GB/s; compile "
          f"{meta['compile']['first_call_s']:.2f} s", flush=True)
    rows, names = [], [c.name for c in cases]
    if add and os.path.exists(out):
        earlier = load(out)
        rows = [r for r in earlier["rows"] if r["case"] not in names]
        meta = dict(earlier["meta"], later=earlier["meta"].get("later", [])
                    + [dict(meta, cases=names)])
    for case in cases:
        full = data(case, max(sizes))
        for n in sizes:
            found = measure(case, n, libs, full[:n])
            rows += found
            print(f"{case.name:>16} 2**{n.bit_length() - 1:<2} " + "  ".join(
                f"{r['lib']}={r['GBps']:.0f}GB/s,{r['host_us']:.0f}us"
                + ("" if r["correct"] else "(WRONG)") for r in found), flush=True)
        save(out, dict(meta=meta, rows=rows))  # after every case: a cut-off run keeps it


#: pyreduce's tuning space: variant x block size x items per thread (as a multiple
#: of the 16 bytes of :func:`pyreduce.planner.default_items`, at most 32) x grid
#: size (in waves of the blocks the GPU holds at once, by thread count), with
#: vector loads, per input size
SWEEP_SPACE = dict(variant=["last_block", "warp_shuffle"], block=[256, 512], loads=[2, 4, 8],
                   waves=[1, 2, 4, 8, 16])
SWEEP_LOG2 = [20, 24, 26, 28]
SWEEP_CASES = pick(["float32 sum", "float32 max", "int32 sum", "float64 sum", "float64 max",
                    "int8->int64 sum"])


def sweep_configs(text=None) -> list[tuple]:
    """``(variant, block, loads, waves)`` configurations: every one of
    :data:`SWEEP_SPACE`, or those written ``VARIANT:BLOCK:LOADS:WAVES``."""
    if text:
        return [(v, int(b), int(m), int(w)) for v, b, m, w in (t.split(":") for t in text)]
    s = SWEEP_SPACE
    return [(v, b, m, w) for v in s["variant"] for b in s["block"] for m in s["loads"]
            for w in s["waves"]]


def sweep(out: str, sizes=tuple(2**k for k in SWEEP_LOG2), cases=SWEEP_CASES,
          configs=None) -> None:
    """Time pyreduce's kernel choices (:func:`sweep_configs`) against CuPy and
    ``variant="auto"`` at each of ``sizes``, with each kernel's registers and
    resident blocks. Recorded tuning choices are not consulted."""
    import tempfile

    import pyreduce
    from pyreduce import backends
    from pyreduce.planner import default_items

    # "auto" is the built-in rule: no tuning file
    os.environ["PYREDUCE_TUNING_FILE"] = os.path.join(tempfile.mkdtemp(), "none.json")
    configs = configs or sweep_configs()
    meta = _meta()
    device = backends.get("cuda").device()  # waves as the planner counts them
    meta["sm_count"] = device.sm_count
    rows = []
    for case in cases:
        full = data(case, max(sizes), seed=1)
        acc = np.dtype(case.acc)
        op = "add" if case.op == "sum" else "max"
        kernels = {}  # (variant, block, items) -> resources of its first kernel
        for n in sizes:
            x = full[:n]
            want = expected(case, x)
            reps = _timings(n)[0]

            def timed(fn):
                return x.nbytes / device_seconds(fn, reps=reps) / 1e9

            base = dict(case=case.name, n=n)
            rows.append(dict(base, config="cupy", GBps=timed(calls("cupy", case, x)[0])))
            got = pyreduce.reduce(x, op, dtype=acc)
            rows.append(dict(base, config="auto", correct=bool(close(got, want, case, n)),
                             GBps=timed(lambda: pyreduce.reduce(x, op, dtype=acc,
                                                                device_result=True))))
            seen = set()
            for variant, block, loads, waves in configs:
                items = min(32, loads * default_items(np.dtype(case.dtype)))
                tuning = pyreduce.Tuning(variant=variant, block_size=block,
                                         items_per_thread=items,
                                         max_blocks=waves * device.max_grid(block))
                if tuning in seen:  # items capped at 32: the same as another
                    continue
                seen.add(tuning)
                if (variant, block, items) not in kernels:
                    e = pyreduce.explain(x, op, dtype=acc, tuning=tuning)
                    r = e.resources[e.kernels[0].name]
                    kernels[variant, block, items] = dict(
                        registers=r["registers"], local_bytes=r["local_bytes"],
                        blocks_per_sm=r["blocks_per_sm"])
                got = pyreduce.reduce(x, op, dtype=acc, tuning=tuning)
                rows.append(dict(base, config="tuned", waves=waves, variant=variant,
                                 block_size=block, items_per_thread=items,
                                 max_blocks=tuning.max_blocks,
                                 **kernels[variant, block, items],
                                 correct=bool(close(got, want, case, n)),
                                 GBps=timed(lambda: pyreduce.reduce(
                                     x, op, dtype=acc, device_result=True, tuning=tuning))))
            mine = [r for r in rows if r["case"] == case.name and r["n"] == n]
            cupy, auto = mine[0], mine[1]
            best = max(mine[2:], key=lambda r: r["GBps"])
            print(f"{case.name} 2**{n.bit_length() - 1}: cupy {cupy['GBps']:.0f}, auto "
                  f"{auto['GBps']:.0f} GB/s, best {_label(best)} {best['GBps']:.0f}", flush=True)
            # after every size: a cut-off run keeps what it has
            save(out, dict(meta=meta, rows=rows))


# --- report -----------------------------------------------------------------


def _row(rows, **match):
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    return found[0] if found else None


def report(path: str, docs: str = DOCS, stem: str = "compare") -> str:
    """Tables and ratios into ``docs/performance/<stem>.md``, the charts into
    ``<stem>.png`` (bandwidth) and ``<stem>-latency.png`` (small calls)."""
    data_ = load(path)
    meta, rows = data_["meta"], data_["rows"]
    sizes = sorted({r["n"] for r in rows})
    libs = [lib for lib in LIBS if any(r["lib"] == lib for r in rows)]
    cases = sorted({r["case"] for r in rows}, key=[c.name for c in CASES].index)
    lines = [_provenance(meta), ""]
    lines += _ratios(rows, cases)
    lines += ["Per case, every library (*pyreduce-numba*: a Numba device array as input; "
              "*pyreduce-lambda*: the operator as a Python lambda):", ""]
    for case in cases:
        lines += [f'=== "{case}"', ""]
        lines += ["    " + line if line else "" for line in _case_tables(rows, case, sizes, libs)]
    text = "\n".join(lines) + "\n"
    os.makedirs(docs, exist_ok=True)
    write(os.path.join(docs, f"{stem}.md"), text)
    _chart(rows, meta, sizes, libs, os.path.join(docs, f"{stem}.png"), "GBps")
    _chart(rows, meta, sizes, libs, os.path.join(docs, f"{stem}-latency.png"), "host_us")
    return text


#: the versions the provenance line names, and how
PROVENANCE = {"numba": "numba", "numba-cuda": "numba-cuda", "cupy": "CuPy", "torch": "PyTorch",
              "cuda-cccl": "cuda-cccl (cuda.compute)"}


def _provenance(meta) -> str:
    """Where and with what a run was measured, and its compile times."""
    v, comp = meta["versions"], meta["compile"]
    text = (f"{meta['gpu']}, {meta['date']}; " + versions_text(v, PROVENANCE) + ". "
            f"A device-to-device copy (read + write bytes) reached "
            f"{meta['ceiling_GBps']:.0f} GB/s. ")
    if "process_first_call_s" in comp:
        text += (f"The process's first pyreduce call (import, CUDA start, a built-in op) "
                 f"took {comp['process_first_call_s']:.2f} s, ")
    text += (f"the first call with a new lambda {comp['first_call_s']:.2f} s, a second "
             f"lambda with the same code {comp['same_code_second_call_s'] * 1e3:.2f} ms "
             f"({comp['second_built']} kernels built).")
    for later in meta.get("later", []):
        text += (f" {', '.join(later['cases'])} ran in a second process (copy ceiling "
                 f"{later['ceiling_GBps']:.0f} GB/s); the libraries of a case always share "
                 "a process.")
    return text


def _case_tables(rows, case, sizes, libs) -> list[str]:
    """Bandwidth at the large sizes, then call times at the small ones."""
    big = sorted((n for n in sizes if n >= 2**20), reverse=True)
    small = [n for n in sizes if n <= 2**16]
    out = [_md_row(["library"] + [pow2(n) for n in big]), rule("l" + "r" * len(big))]
    for lib in libs:
        found = [_row(rows, lib=lib, case=case, n=n) for n in big]
        if any(found):
            out.append(_md_row([lib] + [
                "-" if r is None else f"{r['GBps']:.0f}" + ("" if r["correct"] else " (wrong)")
                for r in found]))
    out += ["", "GB/s: input bytes over GPU time per call.", "",
            _md_row(["library", "device result, " + pow2(2**10)]
                    + [f"host result, {pow2(n)}" for n in small]),
            rule("l" + "r" * (1 + len(small)))]
    for lib in libs:
        first = _row(rows, lib=lib, case=case, n=2**10)
        found = [_row(rows, lib=lib, case=case, n=n) for n in small]
        if first is None and not any(found):
            continue
        cells = ["-" if first is None or "call_us" not in first else f"{first['call_us']:.1f}"]
        cells += ["-" if r is None else f"{r['host_us']:.1f}" for r in found]
        out.append(_md_row([lib] + cells))
    return out + ["", "µs per call, wall time: back-to-back calls that leave the result on "
                  "the device, or a call that returns a host scalar.", ""]


def _ratios(rows, cases) -> list[str]:
    """pyreduce over CuPy (and its lambda over its built-in op), one row per case:
    bandwidth in one table, call times in another."""
    def ratio(case, lib, n, key, other="cupy", invert=False):
        a, b = _row(rows, lib=lib, case=case, n=n), _row(rows, lib=other, case=case, n=n)
        if a is None or b is None:
            return "-"
        return f"{(b[key] / a[key]) if invert else (a[key] / b[key]):.2f}"

    out = table(["case", f"bandwidth, {pow2(2**28)}", f"bandwidth, {pow2(2**24)}",
                 f"lambda / built-in, {pow2(2**28)}"],
                [[case, ratio(case, "pyreduce", 2**28, "GBps"),
                  ratio(case, "pyreduce", 2**24, "GBps"),
                  ratio(case, "pyreduce-lambda", 2**28, "GBps", other="pyreduce")]
                 for case in cases], "lrrr")
    out += [""] + table(["case", f"host result, {pow2(2**10)}", "the same, Numba input",
                         f"host result, {pow2(2**16)}", f"device result, {pow2(2**10)}"],
                        [[case, ratio(case, "pyreduce", 2**10, "host_us", invert=True),
                          ratio(case, "pyreduce-numba", 2**10, "host_us", invert=True),
                          ratio(case, "pyreduce", 2**16, "host_us", invert=True),
                          ratio(case, "pyreduce", 2**10, "call_us", invert=True)]
                         for case in cases], "lrrrr")
    out += ["", "pyreduce against CuPy in the same run: bandwidth is pyreduce's over CuPy's "
            "(the lambda's over the built-in op's), call times CuPy's over pyreduce's, so "
            "above 1 favours pyreduce everywhere.", ""]
    return out


def _label(r) -> str:
    return f"{r['variant']} b{r['block_size']} i{r['items_per_thread']} x{r['waves']}"


def _loads_label(r) -> str:
    """A configuration with its items as 16-byte loads per lane (``L``), the same
    label for every dtype."""
    from pyreduce.planner import default_items

    dtype = np.dtype(r["case"].split()[0].split("-")[0])
    loads = r["items_per_thread"] / default_items(dtype)
    return f"{r['variant']} b{r['block_size']} {loads:g}L x{r['waves']}"


def sweep_report(paths, docs: str = DOCS) -> str:
    """``docs/performance/sweep.md`` from one or more ``sweep`` outputs."""
    lines = ["# pyreduce's kernel choices against CuPy", "",
             "Written by `bench/compare.py report-sweep`. Configurations are "
             "`variant bBLOCK iITEMS xWAVES` (or `LOADSL`: 16-byte loads per lane per "
             "tile, for every dtype): the grid is bounded by WAVES times the "
             "blocks the GPU holds at once when only thread count limits them. Cells "
             "are GB/s over CuPy's in the same process; *auto* is `variant=\"auto\"` "
             "as the code stood in that run.", ""]
    for path in paths:
        found = load(path)
        meta, rows = found["meta"], found["rows"]
        labels = list(dict.fromkeys(_loads_label(r) for r in rows if r["config"] == "tuned"))
        lines += [f"## {os.path.basename(path)}", "",
                  f"{meta['gpu']} ({meta['sm_count']} SMs), {meta['date']}, numba-cuda "
                  f"{meta['versions'].get('numba-cuda')}, CuPy "
                  f"{cupy_version(meta['versions'])}.", ""]
        lines += _sweep_matrix(rows, labels) if len(labels) <= 16 else _sweep_summary(rows)
    text = "\n".join(lines) + "\n"
    write(os.path.join(docs, "sweep.md"), text)
    return text


def _gbps(row) -> str:
    return f"{row['GBps']:.0f}" if row["GBps"] >= 100 else f"{row['GBps']:.2f}"


def _sweep_cells(rows):
    """(case, n) -> (CuPy row, auto row, tuned rows) for each measured size."""
    for case in dict.fromkeys(r["case"] for r in rows):
        for n in sorted({r["n"] for r in rows if r["case"] == case}):
            cupy = _row(rows, case=case, n=n, config="cupy")
            auto = _row(rows, case=case, n=n, config="auto")
            mine = [r for r in rows if r["case"] == case and r["n"] == n
                    and r["config"] == "tuned"]
            if cupy and auto and mine:
                yield case, n, cupy, auto, mine


def _sweep_matrix(rows, labels) -> list[str]:
    """Every configuration's ratio to CuPy, per case and size."""
    cells = []
    for case, n, cupy, auto, mine in _sweep_cells(rows):
        by = {_loads_label(r): r["GBps"] / cupy["GBps"] for r in mine}
        cells.append([case, log2(n), _gbps(cupy), f"{auto['GBps'] / cupy['GBps']:.3f}"]
                     + [f"{by[k]:.3f}" if k in by else "-" for k in labels])
    return table(["case", "elements", "CuPy GB/s", "auto"] + labels, cells) + [""]


def _sweep_summary(rows) -> list[str]:
    """CuPy, auto and the best and worst configuration, per case and size."""
    cells = []
    for case, n, cupy, auto, mine in _sweep_cells(rows):
        best = max(mine, key=lambda r: r["GBps"])
        worst = min(mine, key=lambda r: r["GBps"])
        c = cupy["GBps"]
        cells.append([case, log2(n), _gbps(cupy), f"{auto['GBps'] / c:.3f}", _label(best),
                      f"{best['GBps'] / c:.3f}", _label(worst), f"{worst['GBps'] / c:.3f}"])
    return table(["case", "elements", "CuPy GB/s", "auto", "best", "ratio", "worst", "ratio"],
                 cells) + [""]


#: One colour per library, the same in every chart; pyreduce is the one solid line.
STYLE = {
    "pyreduce": dict(color="#d62728", ls="-", marker="o", lw=3, zorder=3),
    "cupy": dict(color="#1f77b4", ls="--", marker="s"),
    "torch": dict(color="#ff7f0e", ls="--", marker="^"),
    "cuda.compute": dict(color="#2ca02c", ls="--", marker="D"),
    "numba.cuda.reduce": dict(color="#7f7f7f", ls=":", marker="v"),
}
CHART_CASES = ["float32 sum", "float32 max", "int8->int64 sum"]


def _chart(rows, meta, sizes, libs, path, key):
    """One idea per chart: bandwidth (``key="GBps"``) or small calls (``"host_us"``)
    against size, pyreduce (built-in op, CuPy input: its lambda and Numba-input
    lines coincide with it, see the tables) and each peer."""
    plt = pyplot()
    import matplotlib
    import matplotlib.ticker  # noqa: F401 (matplotlib.ticker below)

    latency = key == "host_us"
    shown = [n for n in sizes if (n <= 2**16) == latency]
    libs = [lib for lib in libs if lib in STYLE]
    # large type: the docs show the chart at about half its width
    plt.rcParams.update({"font.size": 15, "lines.markersize": 7, "lines.linewidth": 1.8})
    fig, axes = plt.subplots(1, len(CHART_CASES), figsize=(5 * len(CHART_CASES), 5.2),
                             layout="constrained")
    for ax, case in zip(axes, CHART_CASES):
        for lib in libs:
            pts = [(n, _row(rows, lib=lib, case=case, n=n)) for n in shown]
            pts = [(n, r[key]) for n, r in pts if r is not None]
            if pts:
                ax.plot(*zip(*pts), label=lib, **STYLE[lib])
        if not latency:
            ax.axhline(meta["ceiling_GBps"], ls=":", color="black", lw=1,
                       label="device-to-device copy")
        ax.set_title(case)
        ax.set_xscale("log", base=2)
        ax.set_xticks(shown)
        ax.set_xlabel("elements")
        ax.grid(alpha=0.3)
        if latency:  # plain numbers on the log axis, not powers of ten
            ax.set_yscale("log")
            plain = matplotlib.ticker.FuncFormatter(
                lambda v, _: f"{v:g}" if f"{v:g}"[0] in "1235" else "")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
    axes[0].set_ylabel("µs per call, result returned to the host" if latency
                       else "GB/s (input bytes / GPU time)")
    entries = {}  # every library once, whichever panel it appears in
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    fig.legend(entries.values(), entries.keys(), loc="outside lower center",
               ncol=3, frameon=False)
    what = "call time, small inputs" if latency else "bandwidth, large inputs"
    fig.suptitle(f"{what}: {meta['gpu']}, {meta['date']}")
    save_chart(fig, path)


def _pick(wanted, pool) -> list:
    """The cases of ``pool`` named in ``wanted`` (all of them when it is empty)."""
    try:
        return pick(wanted, pool)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _run_arguments(r) -> None:
    add_max_log2(r, 28)
    r.add_argument("--libs", nargs="*", default=LIBS)
    r.add_argument("--cases", nargs="*", metavar="CASE",
                   help="cases by name, e.g. 'float32 sum' 'int8->int64 sum' (default: all)")
    r.add_argument("--add", action="store_true",
                   help="keep the other cases' rows already in --out (a second process)")


def _sweep_arguments(s) -> None:
    s.add_argument("--log2", type=int, nargs="*", default=SWEEP_LOG2,
                   help=f"sizes: 2**LOG2 elements (default {SWEEP_LOG2})")
    s.add_argument("--cases", nargs="*", metavar="CASE",
                   help="cases by name (default: the six of SWEEP_CASES)")
    s.add_argument("--configs", nargs="*", metavar="V:B:L:W",
                   help="variant:block:loads:waves, e.g. last_block:512:4:16 "
                        "(default: every one of SWEEP_SPACE)")


def _report_arguments(g) -> None:
    g.add_argument("path")
    g.add_argument("--stem", default="compare",
                   help="names of the files written into docs/performance (default: compare)")


COMMANDS = {
    "run": Command(lambda a: run(a.out, upto(SIZES, a.max_log2), cases=_pick(a.cases, CASES),
                                 libs=a.libs, add=a.add), with_out(_run_arguments)),
    "sweep": Command(lambda a: sweep(a.out, [2**k for k in a.log2],
                                     _pick(a.cases, SWEEP_CASES), sweep_configs(a.configs)),
                     with_out(_sweep_arguments)),
    "report": Command(lambda a: print(report(a.path, stem=a.stem)), _report_arguments),
    "report-sweep": Command(lambda a: print(sweep_report(a.paths)),
                            lambda w: w.add_argument("paths", nargs="+")),
}


def main(argv=None):
    dispatch(__doc__, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
