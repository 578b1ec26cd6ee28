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

import argparse
import datetime
import json
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import device_seconds as _time  # noqa: E402

SIZES = [2**k for k in range(10, 29, 2)]
CASES = [("float32", "sum"), ("float32", "max"), ("int32", "sum"), ("int32", "max")]
DOCS = os.path.join(os.path.dirname(__file__), "..", "docs", "case-study")


def run(out: str, sizes=SIZES, variants=None) -> None:
    import cupy as cp
    import numba
    from numba import cuda

    import pyreduce

    names = variants or list(pyreduce.variants)
    dev = cuda.get_current_device()
    gpu = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
    rows = []
    big = cp.ones(max(sizes), dtype=cp.float32)
    dst = cp.empty_like(big)
    ceiling = {}
    for n in sizes:
        t = _time(lambda: cp.copyto(dst[:n], big[:n]), reps=20)
        ceiling[n] = 2 * 4 * n / t / 1e9
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
            peer = (lambda: x.sum(dtype=dtype)) if op == "sum" else x.max
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
        gpu=gpu, date=datetime.date.today().isoformat(), python=platform.python_version(),
        numpy=np.__version__, numba=numba.__version__, cupy=cp.__version__,
        numba_cuda=_version("numba-cuda"), ceiling_GBps=ceiling,
    )
    with open(out, "w") as f:
        json.dump(dict(meta=meta, rows=rows, resources=resources, params=params), f, indent=1)


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
                t = _time(lambda: pyreduce.sum(xd, device_result=True, variant=name,
                                               block_size=block, items_per_thread=items), 10)
                out.append(dict(variant=name, block=block, items=items, n=PARAM_N,
                                GBps=x.nbytes / t / 1e9))
    return out


def _version(dist):
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def report(path: str, docs: str = DOCS) -> None:
    with open(path) as f:
        data = json.load(f)
    meta, rows = data["meta"], data["rows"]
    os.makedirs(docs, exist_ok=True)
    sizes = sorted({r["n"] for r in rows})
    top = max(sizes)
    names = [r["variant"] for r in rows if r["dtype"] == "float32" and r["op"] == "sum"
             and r["n"] == top]
    lines = [
        f"Measured on {meta['gpu']}, {meta['date']} (numba {meta['numba']}, "
        f"numba-cuda {meta['numba_cuda']}, CuPy {meta['cupy']}). Device time from CUDA "
        f"events, result left on the device. Copy ceiling (device-to-device, read + "
        f"write) at 2**{top.bit_length() - 1}: "
        f"{meta['ceiling_GBps'][str(top)]:.0f} GB/s.",
        "",
    ]
    for dtype, op in CASES:
        lines += [f"### {dtype} {op}, GB/s", ""]
        head = "| variant | " + " | ".join(f"2**{n.bit_length() - 1}" for n in sizes) + " |"
        lines += [head, "|---" * (len(sizes) + 1) + "|"]
        for name in names:
            cells = []
            for n in sizes:
                r = next(r for r in rows if r["variant"] == name and r["dtype"] == dtype
                         and r["op"] == op and r["n"] == n)
                flag = "" if r.get("correct", True) else " (wrong)"
                cells.append(f"{r['GBps']:.0f}{flag}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["### Resources at 2**28 float32 sum", "",
              "| variant | plan | kernel | registers | shared B | local B | occupancy | limited by |",
              "|---|---|---|---|---|---|---|---|"]
    for name, kernels in data["resources"].items():
        plan = kernels.get("plan", "")
        for kname, res in kernels.items():
            if kname == "plan" or not isinstance(res, dict):
                continue
            lines.append(
                f"| {name} | {plan} | `{kname}` | {res['registers']} | {res['shared_bytes']} "
                f"| {res['local_bytes']} | {res['occupancy']:.0%} | {res['limited_by']} |"
            )
            plan = ""
    params = data.get("params") or []
    if params:
        lines += ["", f"### Parameters: float32 sum of 2**{PARAM_N.bit_length() - 1}, GB/s",
                  "", "| variant | block | items=1 | items=2 | items=4 | items=16 |",
                  "|---|---|---|---|---|---|"]
        for name in PARAM_VARIANTS:
            for block in (64, 256, 1024):
                cells = []
                for items in (1, 2, 4, 16):
                    r = [p for p in params if p["variant"] == name and p["block"] == block
                         and p["items"] == items]
                    cells.append(f"{r[0]['GBps']:.0f}" if r else "-")
                lines.append(f"| {name} | {block} | " + " | ".join(cells) + " |")
    with open(os.path.join(docs, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    _chart(rows, meta, sizes, names, os.path.join(docs, "variants.png"))


def _chart(rows, meta, sizes, names, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), sharey=True)
    colours = plt.get_cmap("tab20").colors
    for ax, op in zip(axes, ("sum", "max")):
        for k, name in enumerate(names):
            ys = [next(r["GBps"] for r in rows if r["variant"] == name and r["n"] == n
                       and r["dtype"] == "float32" and r["op"] == op) for n in sizes]
            if name == "cupy":
                ax.plot(sizes, ys, "k--", marker="o", ms=3, label="CuPy (CUB)")
            else:
                ax.plot(sizes, ys, "-", color=colours[k % len(colours)],
                        marker="osD^v<>"[k % 7], ms=3, label=name)
        ceiling = [meta["ceiling_GBps"][str(n)] for n in sizes]
        ax.plot(sizes, ceiling, ":", color="grey", label="copy (read + write bytes)")
        ax.set_xscale("log", base=2)
        ax.set_title(f"float32 {op}")
        ax.set_xlabel("elements")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("GB/s (input bytes / device time)")
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"pyreduce variants on {meta['gpu']}, {meta['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--max-log2", type=int, default=28)
    r.add_argument("--variants", nargs="*")
    g = sub.add_parser("report")
    g.add_argument("path")
    args = p.parse_args(argv)
    if args.cmd == "run":
        run(args.out, [n for n in SIZES if n <= 2**args.max_log2], args.variants)
    else:
        report(args.path)


if __name__ == "__main__":
    sys.exit(main())
