"""The GPU's own time per call, kernel by kernel, of pyreduce's and its peers'
reductions: what is left of a call's time to a ready result once the host's
part is taken away.

    NUMBA_ENABLE_CUDASIM=0 python bench/kernel_times.py --out kernel-times.json
    NUMBA_ENABLE_CUDASIM=0 python bench/kernel_times.py --only "mean bfloat16"

Each library's call of each case (the calls and data of ``bench/targets.py``:
pyreduce's default, a device result; CuPy's and PyTorch's own) runs
``--calls`` times, each followed by a device synchronisation, under PyTorch's
profiler, which records every kernel and memset of the process through CUPTI.
A row gives each kernel name's launches and time a call (the mean over the
calls), and their sum, the GPU time of one call. The profiler stays attached to the
process once it has run and slows every later launch on the host, so this
study times no call from the host: the time to a ready result is
``bench/targets.py``'s, in another process.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _report import add_row, has_cuda, meta  # noqa: E402

#: the cases whose ready time stayed below the best peer's in the H200 matrix
CASES = ["sum float32 2**24", "max int32 2**24", "any float32 2**24", "mean float32 2**24",
         "mean float64 2**24", "sum bfloat16 2**24", "mean float16 2**24",
         "mean bfloat16 2**24", "minmax int32 2**24", "sum float32 2**26",
         "mean float32 2**26", "mean float64 2**26", "sum float16 2**26",
         "sum bfloat16 2**26", "mean float16 2**26", "mean bfloat16 2**26",
         "sum float64 2**28", "max float64 2**28"]
DISTS = ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "torch")


def parse(text: str) -> tuple[str, str, int]:
    fn, dtype, size = text.split()
    return fn, dtype, 2 ** int(size.removeprefix("2**"))


def kernels(call, sync, calls: int) -> dict:
    """``{kernel name: [launches a call, us a call]}`` of ``calls`` calls (a
    library may launch kernels of one name several times a call: CUB's two
    passes)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
            sync()
    found = collections.defaultdict(list)
    for e in prof.events():
        if e.device_type.name == "CUDA":
            found[short(e.name)].append(getattr(e, "device_time", None) or e.cuda_time)
    return {name: [len(ts) / calls, float(np.sum(ts)) / calls] for name, ts in found.items()}


def short(name: str) -> str:
    """A kernel's name without its return type, namespaces, templates and ABI
    tags (CUB's two reduction kernels keep their own names)."""
    for cut in ("[abi:", "(", "<"):
        name = name.split(cut)[0]
    return name.removeprefix("void ").strip().rsplit("::", 1)[-1]


def gpu_us(found: dict) -> float:
    return sum(us for _, us in found.values())


def case(text: str, calls: int) -> dict:
    import targets

    fn, dtype, n = parse(text)
    _, library = targets.library_calls(fn, dtype, n, "gpu")
    sync = targets._synchronize("gpu")
    row = {"case": text, "libraries": {}}
    for lib, call in library.items():
        if call is None:
            continue
        for _ in range(20):  # compiled, loaded and at its steady clocks
            call()
        sync()
        row["libraries"][lib] = kernels(call, sync, calls)
    return row


def line(row: dict) -> str:
    libs = row["libraries"]
    mine = gpu_us(libs["pyreduce"])
    best = min(gpu_us(v) for k, v in libs.items() if k != "pyreduce")
    parts = [f"{k} {gpu_us(v):.1f} us ("
             + "; ".join(f"{name} x{count:g} {us:.1f}" for name, (count, us) in v.items()) + ")"
             for k, v in libs.items()]
    return f"{row['case']}: best peer / pyreduce {best / mine:.2f}\n  " + "\n  ".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="+", default=CASES, metavar="CASE",
                    help="cases as 'mean bfloat16 2**24' (default: the unmet targets')")
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--out", help="JSON of every case, written after each")
    args = ap.parse_args(argv)
    if not has_cuda():
        raise SystemExit("kernel_times.py needs a CUDA GPU (and NUMBA_ENABLE_CUDASIM unset or 0)")
    from _timing import steady_gpu

    steady_gpu()
    data = {"meta": meta(DISTS, calls=args.calls), "rows": []}
    m = data["meta"]
    print(f"# bench/kernel_times.py on an {m['gpu']}, {m['date']} ("
          f"{', '.join(f'{k} {v}' for k, v in m['versions'].items())}); GPU time of one call, "
          f"the mean of {args.calls} calls (CUPTI)", flush=True)
    for text in args.only:
        row = case(text, args.calls)
        add_row(data, row, line(row), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
