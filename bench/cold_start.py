"""What a user waits for in a fresh process: the first call, with the kernel cache
empty and then warm.

    python bench/cold_start.py run --out cold.json       # every case, twice each
    python bench/cold_start.py report cold.json          # a Markdown table

Each case runs in a new Python process, as a user starts one, and times itself
from inside (the interpreter's own start is not counted; ``import pyreduce`` is,
where the case says so). Every case runs twice against one cache directory: first
with the directory empty (``cold``), then again in another new process
(``warm``), which is what a user's second run of a script sees. CuPy's own calls
are measured the same way, as the peer (CuPy keeps its kernels on disk too, in
``~/.cupy``; its warm run is the fair comparison).

Cases (each skipped where its library or a GPU is missing):

``import``          ``import pyreduce``
``cupy_max``        ``pyreduce.max`` of a 2**20 float32 CuPy array, CuPy imported
                    and initialised before the timer
``cupy_lambda``     the same with ``lambda a, b: a if a > b else b``
``cupy_mean``       ``pyreduce.mean`` of it (a structured reduction: the kernels and
                    the finishing kernel)
``cupy_mean_peer``  CuPy's own ``x.mean()``, its peer
``cupy_sum_deterministic`` ``pyreduce.sum(x, deterministic=True)`` of it, the
                    value on the host (the fixed tree's kernel)
``cupy_sum_peer``   CuPy's own ``float(x.sum())``, its peer
``cupy_sum_large``  ``pyreduce.sum`` of a 2**26 float32 CuPy array, the value on
                    the host (past the L2: the striped kernel of the built-ins)
``cupy_sum_large_peer`` CuPy's own ``float(x.sum())`` of it
``cupy_axes``       ``pyreduce.mean`` of it as 1024 rows of 1024 along ``axis=1``
                    and ``pyreduce.sum`` of it as 2**17 rows of 8 (staged rows)
``cupy_axes_peer``  CuPy's own two calls
``cupy_columns``    ``pyreduce.mean`` and ``pyreduce.var`` of it as 1024 rows of 1024
                    along ``axis=0`` (the columns kernels, float32 runs of rows)
``cupy_columns_peer`` CuPy's own two calls
``cupy_peer``       CuPy's own ``x.max()``, the peer of the two above
``numpy_max``       ``pyreduce.max`` of a 2**20 float64 NumPy array (``auto``)
``numpy_lambda``    the same with the lambda
``sweep``           one script reducing NumPy arrays of 1e3, 1e4, ... elements with
                    ``op=max``: its total time and the kernels it built
``demo``            ``python -m pyreduce demo``, whole, as a subprocess

``--tree DIR`` runs the cases against another checkout of pyreduce (its ``DIR``
first on ``PYTHONPATH``), so two versions can be compared in one run on one
machine.
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

_PRELUDE = """
import json, os, sys, time
T0 = time.perf_counter()
def done(**fields):
    print("RESULT " + json.dumps(fields), flush=True)
"""

_CUPY = """
import numpy as np
import cupy as cp
x = cp.asarray(np.random.default_rng(0).random(2**20, dtype=np.float32))
cp.cuda.Device().synchronize()
"""

#: a float32 CuPy array of 2**26 elements (256 MiB), past any L2 cache
_CUPY_LARGE = _CUPY.replace("2**20", "2**26")



def _host_sum(keywords: str) -> str:
    """A case's ``pyreduce.sum(x, <keywords>device_result=False)``, its value on
    the host checked against CuPy's float64 sum."""
    return f"""
t = time.perf_counter()
import pyreduce
v = pyreduce.sum(x, {keywords}device_result=False)
ok = abs(float(v) - float(x.astype(cp.float64).sum())) < 1e-6 * x.size
done(seconds=time.perf_counter() - t, ok=bool(ok))
"""


#: CuPy's own ``float(x.sum())``, the peer of the sums
_SUM_PEER = """
t = time.perf_counter()
v = float(x.sum())
done(seconds=time.perf_counter() - t, ok=True)
"""

CASES = {
    "import": """
t = time.perf_counter()
import pyreduce
done(seconds=time.perf_counter() - t)
""",
    "cupy_max": _CUPY + """
t = time.perf_counter()
import pyreduce
v = pyreduce.max(x, device_result=False)  # the value on the host, as cupy_peer's
done(seconds=time.perf_counter() - t, ok=bool(float(v) == float(x.max())))
""",
    "cupy_lambda": _CUPY + """
t = time.perf_counter()
import pyreduce
v = pyreduce.reduce(x, lambda a, b: a if a > b else b, device_result=False)
done(seconds=time.perf_counter() - t, ok=bool(float(v) == float(x.max())))
""",
    "cupy_mean": _CUPY + """
t = time.perf_counter()
import pyreduce
v = pyreduce.mean(x)  # a structured reduction, finished on the device
ok = abs(float(v) - float(x.astype(cp.float64).mean())) < 1e-6
done(seconds=time.perf_counter() - t, ok=bool(ok))
""",
    # the fixed tree's kernel
    "cupy_sum_deterministic": _CUPY + _host_sum("deterministic=True, "),
    "cupy_sum_peer": _CUPY + _SUM_PEER,
    # past the L2: the built-ins' striped block tiles
    "cupy_sum_large": _CUPY_LARGE + _host_sum(""),
    "cupy_sum_large_peer": _CUPY_LARGE + _SUM_PEER,
    "cupy_axes": _CUPY + """
t = time.perf_counter()
import pyreduce
rows = x.reshape(1024, 1024)
m = pyreduce.mean(rows, axis=1)  # a rows kernel that finishes its outputs
s = pyreduce.sum(x.reshape(2**17, 8), axis=1)  # short rows, staged
ok = bool(cp.allclose(m, rows.mean(axis=1), rtol=1e-5)) and bool(
    cp.allclose(s, x.reshape(2**17, 8).sum(axis=1), rtol=1e-5))
done(seconds=time.perf_counter() - t, ok=ok)
""",
    "cupy_columns": _CUPY + """
t = time.perf_counter()
import pyreduce
rows = x.reshape(1024, 1024)
m = pyreduce.mean(rows, axis=0)  # columns kernels that finish their outputs
v = pyreduce.var(rows, axis=0)
ok = bool(cp.allclose(m, rows.mean(axis=0), rtol=1e-5)) and bool(
    cp.allclose(v, rows.var(axis=0), rtol=1e-4))
done(seconds=time.perf_counter() - t, ok=ok)
""",
    "cupy_columns_peer": _CUPY + """
t = time.perf_counter()
rows = x.reshape(1024, 1024)
m = rows.mean(axis=0)
v = rows.var(axis=0)
cp.cuda.Device().synchronize()
done(seconds=time.perf_counter() - t, ok=True)
""",
    "cupy_axes_peer": _CUPY + """
t = time.perf_counter()
m = x.reshape(1024, 1024).mean(axis=1)
s = x.reshape(2**17, 8).sum(axis=1)
cp.cuda.Device().synchronize()
done(seconds=time.perf_counter() - t, ok=True)
""",
    "cupy_mean_peer": _CUPY + """
t = time.perf_counter()
v = x.mean()
float(v)
done(seconds=time.perf_counter() - t, ok=True)
""",
    "cupy_peer": _CUPY + """
t = time.perf_counter()
v = x.max()
float(v)
done(seconds=time.perf_counter() - t, ok=True)
""",
    "numpy_max": """
import numpy as np
x = np.random.default_rng(0).random(2**20)
t = time.perf_counter()
import pyreduce
v = pyreduce.max(x)
done(seconds=time.perf_counter() - t, ok=bool(v == x.max()))
""",
    "numpy_lambda": """
import numpy as np
x = np.random.default_rng(0).random(2**20)
t = time.perf_counter()
import pyreduce
v = pyreduce.reduce(x, lambda a, b: a if a > b else b)
done(seconds=time.perf_counter() - t, ok=bool(v == x.max()))
""",
    "sweep": """
import numpy as np
sizes = [10**k for k in range(3, int(os.environ["SWEEP_MAX_EXP"]) + 1)]
rng = np.random.default_rng(0)
arrays = [rng.random(n) for n in sizes]
t = time.perf_counter()
import pyreduce
steps, ok = [], True
for x in arrays:
    s = time.perf_counter()
    ok &= bool(pyreduce.reduce(x, op=max) == x.max())
    steps.append(time.perf_counter() - s)
info = pyreduce.cache_info()
done(seconds=time.perf_counter() - t, ok=ok, sizes=sizes, steps=steps,
     builds=getattr(info, "builds", None), info=repr(info))
""",
}


def _environment(tree: str | None, cache_dir: str) -> dict:
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PYREDUCE_CACHE_DIR"] = cache_dir
    # the processes run in the cache directory, so the current directory never
    # decides which pyreduce they import: this checkout's, or --tree's
    root = os.path.abspath(tree) if tree else os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    # as installed: pip compiles a package's modules to bytecode when it installs
    # it; a checkout (or PYTHONDONTWRITEBYTECODE=1, set on some machines) would
    # make every process compile pyreduce's sources again, 0.1-0.2 s that no
    # installed copy pays
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    _compile_bytecode(os.path.join(root, "pyreduce"))
    return env


def _compile_bytecode(package: str) -> None:
    import compileall

    compileall.compile_dir(package, quiet=1)


def _run_case(name: str, env: dict, timeout: float) -> dict:
    code = _PRELUDE + textwrap.dedent(CASES[name])
    proc, wall = fresh_process([sys.executable, "-c", code], env, timeout,
                               env["PYREDUCE_CACHE_DIR"])
    return result_line(proc, wall)


def _run_demo(env: dict, timeout: float) -> dict:
    proc, wall = fresh_process([sys.executable, "-m", "pyreduce", "demo"], env, timeout,
                               env["PYREDUCE_CACHE_DIR"])
    return {"seconds": wall, "ok": proc.returncode == 0}


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def run(args) -> dict:
    os.environ["SWEEP_MAX_EXP"] = str(args.sweep_max_exp)
    names = [n for n in (args.cases or list(CASES) + ["demo"])
             if n in CASES or n == "demo"]
    if not _has("cupy"):
        names = [n for n in names if not n.startswith("cupy")]
    results = {}
    for name in names:
        with tempfile.TemporaryDirectory(prefix="pyreduce-cold-") as cache_dir:
            env = _environment(args.tree, cache_dir)
            for state in ("cold", "warm"):
                print(f"{name} ({state}) ...", file=sys.stderr, flush=True)
                out = (_run_demo(env, args.timeout) if name == "demo"
                       else _run_case(name, env, args.timeout))
                results.setdefault(name, {})[state] = out
    meta = _meta()
    meta["tree"] = args.tree or "this checkout"
    return {"meta": meta, "results": results}


def _meta() -> dict:
    """Where it ran; the GPU's name from ``nvidia-smi``, so that this process
    never starts CUDA."""
    return {"date": today(), "python": platform.python_version(), "host": platform.node(),
            "cpus": os.cpu_count(), "gpu": gpu_name("nvidia-smi")}


def report(data: dict) -> str:
    meta = data["meta"]
    lines = [f"Cold start, {meta.get('gpu') or 'no GPU'}, {meta['cpus']} CPUs, "
             f"{meta['date']} ({meta['tree']})", ""] + table(
                 ["case", "cold (s)", "warm (s)", "result"], [])
    for name, runs in data["results"].items():
        cells = []
        for state in ("cold", "warm"):
            r = runs.get(state, {})
            cells.append("error" if "error" in r else f"{r.get('seconds', float('nan')):.3f}")
        ok = all(r.get("ok", True) and "error" not in r for r in runs.values())
        lines.append(row([name] + cells + ["agrees" if ok else "WRONG"]))
    sweep = data["results"].get("sweep", {})
    for state in ("cold", "warm"):
        r = sweep.get(state)
        if r and "steps" in r:
            steps = ", ".join(f"{n:.0e}: {s:.3f}" for n, s in zip(r["sizes"], r["steps"]))
            lines.append("")
            lines.append(f"sweep ({state}): {steps}; cache {r.get('info')}")
    return "\n".join(lines) + "\n"


def _arguments(r) -> None:
    r.add_argument("--tree", help="another checkout of pyreduce to measure")
    r.add_argument("--cases", nargs="*", help=f"from {', '.join(list(CASES) + ['demo'])}")
    r.add_argument("--sweep-max-exp", type=int, default=8)
    r.add_argument("--timeout", type=float, default=300.0)


if __name__ == "__main__":
    main(__doc__, _arguments, run, report)
