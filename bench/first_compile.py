"""Where a new operator's first call spends its time on a GPU: Numba's passes,
NVVM, linking (ptxas), loading the module, and the rest.

    python bench/first_compile.py run --out compile.json     # fresh processes
    python bench/first_compile.py report compile.json        # a Markdown table

Each run is a new Python process with an empty kernel cache, CuPy imported and
its 2**20 float32 array made before the first timer. Inside it:

1. ``import pyreduce``;
2. importing numba-cuda's compiler (what the first compile of a process needs and
   a warm process, which loads kernels from the disk cache, never imports);
3. the first call with a new lambda, ``lambda a, b: a if a > b else b``: the
   process's first compile, with the backend's set-up;
4. then three more new lambdas, one after the other: what a new operator's
   compile costs in a process that has compiled before.

Numba's compiler passes, NVVM, the link and the module load are timed by
wrapping them in the running process (their time is counted once: a pass that
compiles the op inside the kernel's typing counts in the op's pass, not twice);
what is left of a call is pyreduce's own work and Numba's dispatch.
``--profile CALL`` also records cProfile's statistics of one call of the last
process (the slowest functions by their own and by their cumulative time) and
the callers of NVVM, for a closer look.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(__file__))
from _cli import main  # noqa: E402
from _report import gpu_name, row, table, today  # noqa: E402
from _timing import fresh_process, result_line  # noqa: E402

#: The program each process runs; it prints one ``RESULT`` line of JSON.
PROGRAM = """
import json, sys, time

import cupy as cp
x = cp.random.random(1 << 20, dtype=cp.float32)
cp.cuda.Device().synchronize()
expected_max = float(x.max())

phases, stack = {}, []


def timed(label_of, fn):
    # exclusive time: a phase nested in another is taken out of the outer one
    def wrapper(*args, **kwargs):
        label = label_of(*args)
        now = time.perf_counter()
        if stack:
            outer = stack[-1]
            phases[outer[0]] = phases.get(outer[0], 0.0) + now - outer[1]
        stack.append([label, now])
        try:
            return fn(*args, **kwargs)
        finally:
            end = time.perf_counter()
            done_label, since = stack.pop()
            phases[done_label] = phases.get(done_label, 0.0) + end - since
            if stack:
                stack[-1][1] = end
    return wrapper


GROUPS = {"nopython_type_inference": "typing", "partial_type_inference": "typing",
          "native_lowering": "lowering", "cuda_native_lowering": "lowering",
          "nopython_backend": "lowering", "cuda_backend": "lowering"}

t = time.perf_counter()
import pyreduce
import_pyreduce = time.perf_counter() - t

t = time.perf_counter()
from numba.cuda.core import compiler_machinery
from numba.cuda.cudadrv import driver, nvvm
import_numba = time.perf_counter() - t

run_pass = compiler_machinery.PassManager._runPass
compiler_machinery.PassManager._runPass = timed(
    lambda self, index, pss, state: GROUPS.get(pss.name(), "other passes"), run_pass)
def nvvm_label(*args, **kwargs):
    if PROFILE is not None:  # who compiles with NVVM, and how often
        import traceback
        nvvm_callers.append(traceback.format_stack(limit=12)[:-2])
    return "NVVM"


nvvm_callers = []
nvvm.compile_ir = timed(nvvm_label, nvvm.compile_ir)
driver._Linker.complete = timed(lambda self: "link (ptxas)", driver._Linker.complete)
driver.Context.create_module_image = timed(lambda *a: "load module",
                                           driver.Context.create_module_image)

OPS = [lambda a, b: a if a > b else b,
       lambda a, b: a if a < b else b,
       lambda a, b: a + b,
       lambda a, b: max(a, b) * 1.0]
EXPECT = [expected_max, float(x.min()), None, expected_max]

calls = []
for i, op in enumerate(OPS):
    if PROFILE is not None and i == PROFILE:
        import cProfile, pstats, io
        prof = cProfile.Profile()
        prof.enable()
    phases.clear()
    t = time.perf_counter()
    value = float(pyreduce.reduce(x, op))
    seconds = time.perf_counter() - t
    ok = EXPECT[i] is None or value == EXPECT[i]
    if EXPECT[i] is None:
        ok = abs(value - float(x.sum())) <= 1e-3 * abs(float(x.sum()))
    calls.append({"seconds": seconds, "phases": dict(phases), "ok": ok})
if PROFILE is not None:
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(40)
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(60)
    profile_text = out.getvalue()
else:
    profile_text = None
print("RESULT " + json.dumps({"import_pyreduce": import_pyreduce,
                              "import_numba_cuda": import_numba, "calls": calls,
                              "profile": profile_text, "nvvm_callers": nvvm_callers}),
      flush=True)
"""


def _environment(cache_dir: str) -> dict:
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PYREDUCE_CACHE_DIR"] = cache_dir
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _one(profile: int | None, timeout: float) -> dict:
    code = f"PROFILE = {profile!r}\n" + textwrap.dedent(PROGRAM)
    with tempfile.TemporaryDirectory(prefix="pyreduce-compile-") as cache_dir:
        proc, wall = fresh_process([sys.executable, "-c", code], _environment(cache_dir),
                                   timeout, cache_dir)
    return result_line(proc, wall, tail=5)


def run(args) -> dict:
    runs = [_one(args.profile if i == args.repeats - 1 else None, args.timeout)
            for i in range(args.repeats)]
    return {"meta": {"date": today(), "python": platform.python_version(),
                     "cpus": os.cpu_count(), "gpu": gpu_name("nvidia-smi")},
            "runs": runs}


PHASES = ["typing", "lowering", "other passes", "NVVM", "link (ptxas)", "load module"]


def _median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def report(data: dict) -> str:
    meta = data["meta"]
    runs = [r for r in data["runs"] if "error" not in r]
    lines = [f"First compiles, {meta.get('gpu') or 'no GPU'}, {meta['cpus']} CPUs, "
             f"{meta['date']}: medians of {len(runs)} fresh processes (seconds)", ""]
    if not runs:
        return "\n".join(lines + [r.get("error", "") for r in data["runs"]]) + "\n"
    lines.append(f"import pyreduce {_median([r['import_pyreduce'] for r in runs]):.3f}, "
                 f"numba-cuda's compiler {_median([r['import_numba_cuda'] for r in runs]):.3f}")
    lines.append("")
    head = ["call", "total"] + PHASES + ["the rest", "result"]
    lines += table(head, [])
    calls = len(runs[0]["calls"])
    for i in range(calls):
        got = [r["calls"][i] for r in runs]
        cells = [f"{_median([c['phases'].get(p, 0.0) for c in got]):.3f}" for p in PHASES]
        rest = _median([c["seconds"] - sum(c["phases"].values()) for c in got])
        name = "first op of the process" if i == 0 else f"new op {i}"
        ok = "agrees" if all(c["ok"] for c in got) else "WRONG"
        lines.append(row([name, f"{_median([c['seconds'] for c in got]):.3f}"] + cells
                         + [f"{rest:.3f}", ok]))
    return "\n".join(lines) + "\n"


def _arguments(r) -> None:
    r.add_argument("--repeats", type=int, default=3, help="fresh processes")
    r.add_argument("--profile", type=int, metavar="CALL",
                   help="cProfile call CALL (0: the process's first) of the last process, "
                        "and record who calls NVVM")
    r.add_argument("--timeout", type=float, default=300.0)


if __name__ == "__main__":
    main(__doc__, _arguments, run, report)
