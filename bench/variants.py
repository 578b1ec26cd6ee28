"""The variants case study: every variant over sizes 2**10..2**28 on one GPU.

    python bench/variants.py run --out results.json      # on the GPU machine
    python bench/variants.py report results.json         # tables and chart into docs/

``run`` times each variant (CUDA events, median of batches; the result left on the
device, nothing allocated in the timed region once the pool is warm) for float32
and int32 sums and max, next to CuPy (CUB) and a device-to-device copy (the
bandwidth ceiling, read + write bytes), and records each kernel's resources.
``report`` writes ``docs/case-study/results.md`` (tables, included by the
variants page) and ``variants.png``.
"""

from __future__ import annotations

import os
import platform
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _cli import Command, add_max_log2, dispatch, upto, with_out  # noqa: E402
from _report import (docs, gpu_name, load, pow2, pyplot, row, rule, save,  # noqa: E402
                     save_chart, table, today, versions, versions_text, write)
from _timing import copy_GBps, device_seconds as _time  # noqa: E402
from peers import Case, calls  # noqa: E402

SIZES = [2**k for k in range(10, 29, 2)]
#: (dtype, op): each sums or compares in its own dtype
CASES = [("float32", "sum"), ("float32", "max"), ("int32", "sum"), ("int32", "max")]
DOCS = docs("case-study")


def run(out: str, sizes=SIZES, variants=None) -> None:
    import cupy as cp
    import numba
    from numba import cuda

    import pyreduce

    names = variants or list(pyreduce.variants)
    gpu = gpu_name("numba")
    rows = []
    big = cp.ones(max(sizes), dtype=cp.float32)
    dst = cp.empty_like(big)
    ceiling = {}
    for n in sizes:
        ceiling[n] = copy_GBps(big[:n], dst[:n], reps=20)
    print(f"{gpu}: copy ceiling at 2**28 {ceiling[max(sizes)]:.0f} GB/s", flush=True)
    resources = {}
    for dtype, op in CASES:
        rng = cp.random.default_rng(0)
        full = (rng.standard_normal(max(sizes), dtype=cp.float32) * 100).astype(dtype)
        for n in sizes:
            x = full[:n]
            xd = cuda.as_cuda_array(x)
            expect = float(x.astype(cp.float64).sum()) if op == "sum" else float(x.max())
            red = pyreduce.sum if op == "sum" else pyreduce.max
            reps = 20 if n <= 2**24 else 5
            kw = {} if op == "max" else {"dtype": dtype}
            peer = calls("cupy", Case(dtype, op, dtype), x)[0]
            t = _time(peer, reps)
            rows.append(dict(lib="cupy", variant="cupy", dtype=dtype, op=op, n=n, seconds=t,
                             GBps=x.nbytes / t / 1e9))
            for name in names:
                def call():
                    return red(xd, device_result=True, variant=name, **kw)

                got = float(call().copy_to_host()[0])
                ok = bool(np.isclose(got, expect, rtol=1e-3, atol=1e-3 * np.sqrt(n) * 100))
                t = _time(call, reps)
                rows.append(dict(lib="pyreduce", variant=name, dtype=dtype, op=op, n=n,
                                 seconds=t, GBps=x.nbytes / t / 1e9, correct=ok))
                if n == max(sizes) and (dtype, op) == ("float32", "sum"):
                    e = pyreduce.explain(xd, "add", variant=name)
                    resources[name] = {k.name: e.resources[k.name] for k in e.kernels}
                    resources[name]["plan"] = (
                        f"grid {e.plan.grid} x {e.plan.spec.block}, items "
                        f"{e.plan.spec.items}, {e.plan.passes} launches"
                    )
            print(f"{dtype} {op} n=2**{n.bit_length() - 1} done", flush=True)
    params = _parameters(cp, cuda, pyreduce)
    meta = dict(
        gpu=gpu, date=today(), python=platform.python_version(),
        numpy=np.__version__, numba=numba.__version__, cupy=cp.__version__,
        numba_cuda=versions(["numba-cuda"]).get("numba-cuda"), ceiling_GBps=ceiling,
    )
    save(out, dict(meta=meta, rows=rows, resources=resources, params=params))


#: The compute-shader article's knobs: threads per group, values fetched per
#: thread, interleaved vs sequential addressing, and the doubled shared array.
PARAM_N = 2**24
PARAM_VARIANTS = ["naive", "sequential", "unrolled", "double_shared", "warp_shuffle"]


def _parameters(cp, cuda, pyreduce):
    x = cp.random.default_rng(3).standard_normal(PARAM_N, dtype=cp.float32)
    xd = cuda.as_cuda_array(x)
    out = []
    for name in PARAM_VARIANTS:
        for block in (64, 256, 1024):
            for items in (1, 2, 4, 16):
                if name == "double_shared" and items == 1:
                    continue
                tuning = pyreduce.Tuning(variant=name, block_size=block, items_per_thread=items)
                t = _time(lambda: pyreduce.sum(xd, device_result=True, tuning=tuning), 10)
                out.append(dict(variant=name, block=block, items=items, n=PARAM_N,
                                GBps=x.nbytes / t / 1e9))
    return out


def report(path: str, docs: str = DOCS) -> None:
    """``results.md`` (tables) and ``variants.png`` (chart) from a ``run``."""
    data = load(path)
    meta, rows = data["meta"], data["rows"]
    os.makedirs(docs, exist_ok=True)
    sizes = sorted({r["n"] for r in rows})
    top = max(sizes)
    names = [r["variant"] for r in rows if r["dtype"] == "float32" and r["op"] == "sum"
             and r["n"] == top]
    lines = [
        f"{meta['gpu']}, {meta['date']}; "
        + versions_text(meta, {"numba": "numba", "numba_cuda": "numba-cuda", "cupy": "CuPy"})
        + ". GPU time from CUDA events, the "
        f"result left on the device. A device-to-device copy (read + write bytes) of "
        f"{pow2(top)} float32 reached {meta['ceiling_GBps'][str(top)]:.0f} GB/s. Below "
        f"{pow2(2**20)} elements every variant is bound by the host's call, not the "
        f"kernel, so the tables start there (the raw data has every size).",
        "",
    ]
    shown = sorted((n for n in sizes if n >= 2**20), reverse=True)
    for dtype, op in CASES:
        found = []
        for name in names:
            cells = []
            for n in shown:
                r = next(r for r in rows if r["variant"] == name and r["dtype"] == dtype
                         and r["op"] == op and r["n"] == n)
                flag = "" if r.get("correct", True) else " (wrong)"
                cells.append(f"{r['GBps']:.0f}{flag}")
            found.append([name] + cells)
        lines += [f'=== "{dtype} {op}"', ""]
        lines += ["    " + line for line in table(["variant"] + [pow2(n) for n in shown], found,
                                                  "l" + "r" * len(shown))]
        lines += ["", "    GB/s: input bytes over GPU time per call.", ""]
    lines += _resources(data["resources"], top) + _parameters_table(data.get("params") or [])
    write(os.path.join(docs, "results.md"), "\n".join(lines) + "\n")
    _chart(rows, meta, sizes, names, os.path.join(docs, "variants.png"))


def _resources(resources, top) -> list[str]:
    """Each variant's first-pass kernel (the one that reads the input): its
    resources and the plan it ran in."""
    out = [f"### Resources at {pow2(top)} float32 sum", "",
           "The first-pass kernel of each variant, the one that reads the input.", "",
           row(["variant", "registers", "occupancy", "limited by", "shared B", "local B",
                "grid", "items", "launches"]), rule("lrrlrrrrr")]
    for name, kernels in resources.items():
        found = re.fullmatch(r"grid (\d+) x (\d+), items (\d+), (\d+) launches?",
                             kernels.get("plan", ""))
        grid, block, items, launches = found.groups() if found else ("-",) * 4
        res = next(r for k, r in kernels.items() if k != "plan" and isinstance(r, dict))
        out.append(row([name, str(res["registers"]), f"{res['occupancy']:.0%}",
                         str(res["limited_by"]), str(res["shared_bytes"]), str(res["local_bytes"]),
                         f"{grid} x {block}", items, launches]))
    return out + [""]


def _parameters_table(params) -> list[str]:
    if not params:
        return []
    out = [f"### Parameters: float32 sum of {pow2(PARAM_N)}, GB/s", "",
           row(["variant", "block", "items=1", "items=2", "items=4", "items=16"]),
           rule("lrrrrr")]
    for name in PARAM_VARIANTS:
        for block in (64, 256, 1024):
            cells = []
            for items in (1, 2, 4, 16):
                r = [p for p in params if p["variant"] == name and p["block"] == block
                     and p["items"] == items]
                cells.append(f"{r[0]['GBps']:.0f}" if r else "-")
            out.append(row([name, str(block)] + cells))
    return out


#: The steps the size chart follows: one per kind of change.
TRACED = ["naive", "upper_half", "shuffle_tail", "items_per_thread", "last_block"]


def _chart(rows, meta, sizes, names, path):
    """Left: every variant at the largest size, tutorial steps in order. Right: a
    few steps against size, next to CuPy."""
    import pyreduce

    plt = pyplot()

    def gbps(name, n, op="sum"):
        return next(r["GBps"] for r in rows if r["variant"] == name and r["n"] == n
                    and r["dtype"] == "float32" and r["op"] == op)

    top = max(sizes)
    plt.rcParams.update({"font.size": 13})  # the docs show it at about half its width
    fig, (bars, lines) = plt.subplots(1, 2, figsize=(15, 7), layout="constrained",
                                      gridspec_kw=dict(width_ratios=[1.1, 1]))
    variants = [n for n in names if n != "cupy"]
    steps = {v: pyreduce.variants[v].step for v in variants if v in pyreduce.variants}
    labels = [f"{steps[v]}. {v}" if steps.get(v) else v for v in variants] + ["CuPy (CUB)"]
    values = [gbps(v, top) for v in variants] + [gbps("cupy", top)]
    colours = ["#1f77b4" if steps.get(v) else "#9e9e9e" for v in variants] + ["black"]
    ypos = range(len(labels))[::-1]
    bars.barh(list(ypos), values, color=colours)
    bars.set_yticks(list(ypos), labels)
    for y, value in zip(ypos, values):
        bars.text(value + 40, y, f"{value:.0f}", va="center", fontsize=11)
    bars.axvline(meta["ceiling_GBps"][str(top)], ls=":", color="black", lw=1)
    bars.set_xlabel("GB/s (input bytes / GPU time)")
    bars.set_title(f"every variant, float32 sum of $2^{{{top.bit_length() - 1}}}$ elements\n"
                   "(blue: the tutorial's steps; "
                   "grey: other variants; dotted: device-to-device copy)", fontsize=12)
    bars.grid(axis="x", alpha=0.3)
    colour = plt.get_cmap("tab10").colors
    for k, name in enumerate(TRACED):
        lines.plot(sizes, [gbps(name, n) for n in sizes], "-", marker="o", ms=4,
                   color=colour[k], label=f"{steps[name]}. {name}")
    lines.plot(sizes, [gbps("cupy", n) for n in sizes], "--", color="black", marker="s",
               ms=4, label="CuPy (CUB)")
    lines.set_xscale("log", base=2)
    lines.set_xlabel("elements")
    lines.set_ylabel("GB/s")
    lines.set_title("five steps against size, float32 sum", fontsize=12)
    lines.grid(alpha=0.3)
    lines.legend(loc="upper left", fontsize=11)
    fig.suptitle(f"pyreduce's variants on {meta['gpu']}, {meta['date']}")
    save_chart(fig, path)


def _run_arguments(r) -> None:
    add_max_log2(r, 28)
    r.add_argument("--variants", nargs="*")


COMMANDS = {
    "run": Command(lambda a: run(a.out, upto(SIZES, a.max_log2), a.variants),
                   with_out(_run_arguments)),
    "report": Command(lambda a: report(a.path), lambda g: g.add_argument("path")),
}


def main(argv=None):
    dispatch(__doc__, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
