"""Turn a pytest-benchmark JSON of ``bench/bench_reduce.py`` into Markdown tables.

    python bench/report.py bench.json > docs/performance/results.md

GPU rows: device time (CUDA events, result left on the device) as GB/s and the
host call (result returned as a host scalar) in microseconds, per library, op and
size, with the machine information the run recorded. CPU rows: time per call.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _report import load, log2, row, rule, versions_text  # noqa: E402
from peers import LIBS  # noqa: E402


def _median_us(bench) -> float:
    return bench["stats"]["median"] * 1e6


def _host_us(bench) -> float:
    """A GPU case's host call: ``host_us`` in ``extra_info`` (``gpu_benchmark``,
    whose statistics are device time), else the statistics (older files, timed
    by pytest-benchmark's wall clock)."""
    return bench["extra_info"].get("host_us") or _median_us(bench)


def report(path: str) -> str:
    data = load(path)
    info = data["machine_info"]
    benches = data["benchmarks"]
    out = [
        f"Run on {info.get('gpu') or 'no GPU'} ({info.get('cpu', {}).get('brand_raw', 'CPU')}), "
        f"{info.get('date')}; " + versions_text(info, {
            "numpy": "numpy", "numba": "numba", "numba_cuda": "numba-cuda", "cupy": "CuPy",
            "torch": "PyTorch"}) + ".",
        "",
    ]
    gpu = [b for b in benches if b["name"].startswith("test_gpu[")
           and b["extra_info"].get("dtype", "float32") == "float32"
           and b["extra_info"].get("acc", "float32") == "float32"]
    if gpu:
        found = {b["extra_info"]["lib"] for b in gpu}  # older runs named some differently
        libs = [lib for lib in LIBS if lib in found] + sorted(found - set(LIBS))
        sizes = sorted({b["extra_info"]["n"] for b in gpu})
        for op in ("sum", "max"):
            out += [f"### GPU float32 {op}", "",
                    row(["library"] + [f"{log2(n)} {what}" for n in sizes
                                       for what in ("GB/s", "host us")]),
                    rule("l" * (1 + 2 * len(sizes)))]
            for lib in libs:
                cells = []
                for n in sizes:
                    b = [b for b in gpu if b["extra_info"]["lib"] == lib
                         and b["extra_info"]["op"] == op and b["extra_info"]["n"] == n]
                    if b:
                        cells += [f"{b[0]['extra_info']['GBps']:.0f}", f"{_host_us(b[0]):.1f}"]
                    else:
                        cells += ["-", "-"]
                out.append(row([lib] + cells))
            out.append("")
        ceiling = [b for b in benches if b["name"] == "test_gpu_copy_ceiling"]
        if ceiling:
            out += [f"Device-to-device copy of 2**28 float32 (read + write bytes): "
                    f"{ceiling[0]['extra_info']['GBps']:.0f} GB/s.", ""]
        compile_ = [b for b in benches if b["name"] == "test_compile_time"]
        if compile_:
            e = compile_[0]["extra_info"]
            out += [f"First call with a new op (generate, compile, run): "
                    f"{e['first_call_s']:.2f} s; a second lambda with the same code: "
                    f"{e['same_code_second_call_s'] * 1e3:.2f} ms (no compile).", ""]
    cpu = [b for b in benches if b["name"].startswith("test_cpu[")]
    if cpu:
        sizes = sorted({b["extra_info"]["n"] for b in cpu})
        out += ["### CPU float64 (median time per call, us)", "",
                row(["library", "op"] + [str(n) for n in sizes]), rule("l" * (2 + len(sizes)))]
        for lib in ("pyreduce", "numpy"):
            for op in ("sum", "max"):
                cells = []
                for n in sizes:
                    b = [b for b in cpu if b["extra_info"]["lib"] == lib
                         and b["extra_info"]["op"] == op and b["extra_info"]["n"] == n]
                    cells.append(f"{_median_us(b[0]):.1f}" if b else "-")
                out.append(row([lib, op] + cells))
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(report(sys.argv[1]))
