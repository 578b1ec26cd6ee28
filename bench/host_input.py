"""NumPy inputs: NumPy itself, the cpu backend, the GPU with the input streamed
through pinned buffers, and ``backend="auto"``, in one run.

    python bench/host_input.py run --out host_input.json     # on the GPU machine
    python bench/host_input.py report host_input.json        # Markdown on stdout
    python bench/host_input.py run --sizes 1e5 1e6 --out cpu.json   # any machine

``run`` measures, on a machine with a GPU:

* the copy to the device: from pageable memory (what ``cuda.to_device`` of a
  NumPy array does), from pinned memory (the ceiling the staging pipeline is
  measured against), and the host threads' copy into pinned memory;
* the staging pipeline's rate (a streamed ``sum`` of 1 GiB) for chunk sizes of
  2 to 32 MiB (``--chunks``) and host threads' parts of 1 to 4 MiB
  (``--pieces``), which is what :data:`pyreduce.backends.staging.CHUNK_BYTES`
  and ``COPY_PIECE_BYTES`` should be set from;
* the host-input cost model (:mod:`pyreduce.costmodel`), measured anew and
  recorded first unless ``--no-calibrate``;

and on every machine, for each dtype, op (``max``, ``sum`` and the user's
``lambda a, b: a if a > b else b``) and size: the time of a call (the median of
repeated calls after a first, untimed one that compiles) with NumPy
(``x.max()``, ``x.sum()``; NumPy's ``max`` stands for the lambda), with
``backend="cpu"``, ``"cuda"`` and ``"auto"``, which path ``auto`` took, and
whether each result agrees with NumPy's (exactly for ``max``; sums within
``n * eps * sum|x|``). The targets: ``auto`` no slower than the faster of NumPy
and ``cpu``; where the GPU is taken, its copy at 80% or more of the pinned
bandwidth (the ``cuda`` column's GB/s against it).
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from _cli import dispatch, report_command, run_command  # noqa: E402
from _report import gpu_name, has_cuda as _has_gpu, row, table, today, versions  # noqa: E402
from _timing import wall_seconds as seconds  # noqa: E402
from peers import host_calls as _calls, user_max as _user_max  # noqa: E402

OPS = ("max", "sum", "lambda")
GPU_SIZES = (10**6, 10**7, 10**8, 10**9)
CPU_SIZES = (10**5, 10**6, 10**7)
CHUNKS_MIB = (2, 4, 8, 16, 32)


def _meta(gpu: bool) -> dict:
    return dict(date=today(), cpus=os.cpu_count(), gpu=gpu_name("numba") if gpu else None,
                versions=versions(("numpy", "numba", "numba-cuda")))


# --- copies


def copies(nbytes: int = 256 << 20) -> dict:
    """GB/s of host-to-device copies (pageable, pinned) and of the host threads'
    copy into pinned memory."""
    from numba import cuda

    from pyreduce.backends import get, staging

    host = np.ones(nbytes // 8)
    dev = cuda.device_array_like(host)
    pinned = cuda.pinned_array(host.shape, dtype=host.dtype)
    pinned[:] = 1
    stream = cuda.stream()

    def pageable():
        dev.copy_to_device(host)
        cuda.synchronize()

    def from_pinned():
        dev.copy_to_device(pinned, stream=stream)
        stream.synchronize()

    cpu = get("cpu")
    crew = cpu.crew()

    def stage(threads):
        parts = np.array_split(np.arange(host.size), threads)

        def run():
            crew.map(np.copyto, [(pinned[p[0]:p[-1] + 1], host[p[0]:p[-1] + 1])
                                 for p in parts if p.size], threads)

        return run

    gb = nbytes / 1e9
    out = {
        "h2d_pageable_GBps": gb / seconds(pageable, 2.0),
        "h2d_pinned_GBps": gb / seconds(from_pinned, 2.0),
        "stage_1_thread_GBps": gb / seconds(stage(1), 2.0),
        f"stage_{cpu.threads}_threads_GBps": gb / seconds(stage(cpu.threads), 2.0),
    }
    staging.reset()
    return out


def chunk_sweep(chunks_mib, pieces_mib, nbytes: int = 1 << 30) -> list:
    """The streamed ``sum`` of ``nbytes`` of float64 per chunk size and size of
    the part of a chunk one host thread copies: GB/s."""
    import pyreduce
    from pyreduce.backends import staging

    x = np.random.default_rng(0).random(nbytes // 8)
    saved = staging.CHUNK_BYTES, staging.MIN_CHUNK_BYTES, staging.COPY_PIECE_BYTES
    rows = []
    try:
        for mib in chunks_mib:
            for piece in (p for p in pieces_mib if p <= mib):
                staging.CHUNK_BYTES = mib << 20
                staging.MIN_CHUNK_BYTES = min(saved[1], mib << 20)
                staging.COPY_PIECE_BYTES = piece << 20
                staging.reset()
                t = seconds(lambda: pyreduce.sum(x, backend="cuda"), 2.0)
                rows.append(dict(chunk_MiB=mib, piece_MiB=piece, GBps=x.nbytes / t / 1e9))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        staging.CHUNK_BYTES, staging.MIN_CHUNK_BYTES, staging.COPY_PIECE_BYTES = saved
        staging.reset()
    return rows


# --- the table


def _agrees(op: str, got, want, x: np.ndarray) -> bool:
    if op != "sum":
        return bool(got == want)
    bound = x.size * np.finfo(x.dtype).eps * float(np.abs(x).sum(dtype=np.float64))
    return bool(abs(float(got) - float(want)) <= bound)


def _auto_path(op: str, x: np.ndarray) -> str:
    from pyreduce.prepared import prepare
    from pyreduce.interop import inspect
    from pyreduce.ops import as_monoid
    from pyreduce.planner import Tuning

    fn = _user_max if op == "lambda" else {"max": "max", "sum": "add"}[op]
    call = prepare(inspect(x), as_monoid(fn, x.dtype), None, "auto", Tuning(), None)
    return "gpu" if call.backend.name == "cuda" else call.backend.name


def measure(sizes, dtypes, ops, gpu: bool) -> list:
    rows = []
    backends = ("cpu", "cuda", "auto") if gpu else ("cpu", "auto")
    for dtype in dtypes:
        rng = np.random.default_rng(1)
        whole = rng.standard_normal(max(sizes), dtype=np.float32).astype(dtype, copy=False)
        for n in sizes:
            x = whole[:n]
            for op in ops:
                np_call, ours = _calls(op, x)
                want = np_call()
                row = dict(dtype=dtype, n=n, op=op, numpy_s=seconds(np_call))
                for be in backends:
                    got = ours(be)
                    row[f"{be}_s"] = seconds(lambda: ours(be))
                    row[f"{be}_ok"] = _agrees(op, got, want, x)
                row["auto_path"] = _auto_path(op, x)
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def run(args) -> dict:
    gpu = _has_gpu()
    warnings.simplefilter("ignore")
    result = dict(meta=_meta(gpu))
    sizes = [int(float(s)) for s in args.sizes] if args.sizes else (
        GPU_SIZES if gpu else CPU_SIZES)
    if gpu:
        from pyreduce import backends, calibrate, tuning

        result["copies"] = copies()
        print(json.dumps(result["copies"]), flush=True)
        if args.chunks:
            result["chunk_sweep"] = chunk_sweep([int(c) for c in args.chunks],
                                                [int(p) for p in args.pieces])
        be = backends.get("cuda")
        model = tuning.calibrate(be) if args.calibrate else calibrate.model(be)
        result["model"] = model.as_dict()
        print(json.dumps(result["model"]), flush=True)
    result["rows"] = measure(sizes, args.dtypes, args.ops, gpu)
    return result


# --- the report


def _ms(s) -> str:
    return "-" if s is None else f"{s * 1e3:.3g}"


def report(data: dict) -> str:
    """The Markdown tables of a run."""
    meta = data["meta"]
    out = [f"Run on {meta['gpu'] or 'no GPU'}, {meta['cpus']} CPUs, {meta['date']}; "
           + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".", ""]
    pinned = None
    if "copies" in data:
        c = data["copies"]
        pinned = c["h2d_pinned_GBps"]
        out += table(["copy", "GB/s"], [[k.replace("_GBps", ""), f"{v:.1f}"]
                                         for k, v in c.items()]) + [""]
    if data.get("chunk_sweep"):
        out += table(["chunk MiB", "thread's part MiB", "streamed sum GB/s"],
                     [[str(r["chunk_MiB"]), str(r["piece_MiB"]), f"{r['GBps']:.1f}"]
                      for r in data["chunk_sweep"]]) + [""]
    if data.get("model"):
        m = data["model"]
        out += ["Cost model: " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else
                                           f"{k} {v}" for k, v in m.items()), ""]
    rows = data["rows"]
    gpu = any("cuda_s" in r for r in rows)
    head = ["dtype", "op", "n", "numpy ms", "cpu ms"] + (
        ["cuda ms", "cuda GB/s", "% pinned"] if gpu else []) + [
        "auto ms", "auto path", "auto / best(numpy, cpu)", "all agree"]
    out += table(head, [])
    for r in rows:
        nbytes = r["n"] * np.dtype(r["dtype"]).itemsize
        best = min(r["numpy_s"], r["cpu_s"])
        cells = [r["dtype"], r["op"], f"{r['n']:.0e}", _ms(r["numpy_s"]), _ms(r["cpu_s"])]
        if gpu:
            gbps = nbytes / r["cuda_s"] / 1e9
            cells += [_ms(r["cuda_s"]), f"{gbps:.1f}",
                      f"{100 * gbps / pinned:.0f}" if pinned else "-"]
        ok = all(v for k, v in r.items() if k.endswith("_ok"))
        cells += [_ms(r["auto_s"]), r["auto_path"], f"{r['auto_s'] / best:.2f}",
                  "yes" if ok else "NO"]
        out.append(row(cells))
    return "\n".join(out)


def _arguments(r) -> None:
    r.add_argument("--sizes", nargs="+", help="element counts, e.g. 1e6 1e7 (default: "
                   "1e6..1e9 with a GPU, 1e5..1e7 without)")
    r.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    r.add_argument("--ops", nargs="+", default=list(OPS), choices=OPS)
    r.add_argument("--chunks", nargs="*", default=[str(c) for c in CHUNKS_MIB],
                   help="chunk sizes (MiB) of the staging sweep; none: skip it")
    r.add_argument("--pieces", nargs="+", default=["1", "2", "4"],
                   help="sizes (MiB) of one host thread's part of a chunk, in the sweep")
    r.add_argument("--no-calibrate", dest="calibrate", action="store_false",
                   help="use the recorded (or quick) cost model instead of measuring it")


def main(argv=None) -> None:
    dispatch(__doc__, {
        "run": run_command(run, report, _arguments, out="host_input.json",
                           help="measure and write JSON (and print the report)"),
        "report": report_command(report, arg="path",
                                 help="the Markdown tables of a run's JSON"),
    }, argv)


if __name__ == "__main__":
    main()
