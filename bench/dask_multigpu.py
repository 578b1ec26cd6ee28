"""pyreduce over Dask on one to eight GPUs: the same reductions on 1, 2, 4 (and 8)
GPUs, one Dask worker per GPU, timed next to Dask's own.

    python bench/dask_multigpu.py run --out multigpu.json          # GPUs: CuPy chunks
    python bench/dask_multigpu.py report multigpu.json --chart multigpu.png
    python bench/dask_multigpu.py run --out cpu.json --device cpu --gpus 1 2 --sizes 18
                                                # no GPU: worker processes, NumPy chunks

``run`` starts, for each count N of ``--gpus`` (default 1, 2, 4 and 8, those up to
the GPUs present), a ``dask_cuda.LocalCUDACluster`` of N workers, one per GPU
(``CUDA_VISIBLE_DEVICES`` its first N), and a ``Client``; each N gets its own
cluster, closed before the next. For each size ``2**k`` (``--sizes``, default 30
31 32 33) and dtype (``--dtypes``, default float32, float64, int8) it makes a 1-D
array in chunks of ``2**c`` elements (``--chunk``, default 27) on the workers'
GPUs: each chunk is made by a task pinned to one worker (the chunks in N
contiguous runs, one a worker), from a hash of the elements' global indices, so
nothing is copied from the host and the data do not depend on N. float data are
uniform in [0, 1); int8 data are about half zeros, and the last chunk is all
zeros (so the last non-zero lies before it). Chunks are kept in GPU memory
(futures held), so the timings read chunks already there. A (size, dtype, N)
whose chunks would fill more than ``--mem-fraction`` (0.6) of a GPU's memory is
skipped and recorded as such, with why.

On each array it times pyreduce's ``sum``, ``max``, a user lambda (``a if a > b
else b``), ``argmax`` and ``var`` (float dtypes), the non-commutative "last
non-zero" (``b if b != 0 else a``; int8, summed into int64 by ``sum``), and
Dask's own ``x.sum()`` and ``x.max()`` (the peers of ``sum``, and of ``max`` and
the lambda): each the median of ``--reps`` (3) computes after one untimed compute
(which compiles), graph building excluded. Every result, Dask's too, is checked
against a reference made independently by CuPy (NumPy on the CPU) on each chunk
where it lives, combined on the host: float sums and var to a relative 1e-4,
the others exactly (the first index of the maximum, ties included). For every
float32 array one more compute of pyreduce's sum and of Dask's is recorded with
``distributed``'s task stream: where the time goes (the chunk tasks' compute,
transfers, the gaps between tasks on the busiest worker, and the time outside
all tasks: graph submission, scheduling, the result's return).

Progress lines are printed as it goes, and the JSON is rewritten after every row,
so that a run cut short leaves what it measured. ``--budget`` (seconds, default
420) bounds the run: each N gets an equal share of what is left when it starts,
and the arrays that would start after its share are skipped (recorded). A
compute that takes over ``--timeout`` seconds is an error row, not a hang, and
none starts once the run is a minute past its budget.

``report`` prints the Markdown table (size, dtype, op, GPUs, pyreduce's and Dask's
time, GB/s, the speed-up over 1 GPU), the skipped cases and the time breakdown,
and with ``--chart FILE`` draws bandwidth against the GPU count (matplotlib; no
chart without it).

``--device cpu``: the same on a ``distributed.LocalCluster`` of N worker
processes of one thread each, with NumPy chunks (default sizes 18 and 20, chunks
of 2**15): a test of this script on a machine without a GPU, not a measurement.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import sys
import time
import uuid
import warnings

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
import pyreduce  # noqa: E402  (this checkout's)
from _cli import Command, dispatch, run_command  # noqa: E402
from _report import load, versions  # noqa: E402

DTYPES = ("float32", "float64", "int8")
#: op: (the dtype kinds it runs on, Dask's peer call or None)
OPS = {"sum": ("fi", "sum"), "max": ("fi", "max"), "lambda": ("f", "max"),
       "argmax": ("f", None), "var": ("f", None), "last_nonzero": ("i", None)}
#: the user operators, as a user writes them
USER_OPS = {"lambda": lambda a, b: a if a > b else b,
            "last_nonzero": lambda a, b: b if b != 0 else a}
EXACT = ("max", "lambda", "argmax", "last_nonzero")
RTOL = 1e-4


# --------------------------------------------------------------------------
# on the workers: the chunks and their references


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _xp(device: str):
    if device == "gpu":
        import cupy

        return cupy
    return np


def make_chunk(i: int, chunk: int, n: int, dtype: str, seed: int, device: str):
    """Chunk ``i`` of the array of ``n`` elements: splitmix64 of the global indices
    (and ``seed``), made on this worker's GPU (CuPy) or in its memory (NumPy),
    in place where it can, so that it needs about two chunks of uint64 at most."""
    xp = _xp(device)
    start = i * chunk
    count = min(chunk, n - start)
    z = xp.arange(start + 1, start + count + 1, dtype=xp.uint64)
    z *= _GOLDEN
    z += np.uint64(seed * int(_MIX2) % 2**64)
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    if dtype == "float32":  # 24 random bits: every value k / 2**24, exactly
        out = (z >> np.uint64(40)).astype(xp.float32)
        out *= np.float32(2.0**-24)
        return out
    if dtype == "float64":
        out = (z >> np.uint64(11)).astype(xp.float64)
        out *= 2.0**-53
        return out
    if dtype != "int8":
        raise ValueError(f"dtype {dtype!r}: float32, float64 or int8")
    u = (z >> np.uint64(56)).astype(xp.uint8)  # the top byte: -128..127 as int8
    u *= (z & np.uint64(1)).astype(xp.uint8)  # half of them zero
    tail = zero_tail(n, chunk)
    if start + count > n - tail:
        u[max(0, n - tail - start):] = 0
    return u.view(xp.int8)


def zero_tail(n: int, chunk: int) -> int:
    """How many elements at the end of an int8 array are zero: its last chunk
    (half the array when it is one chunk)."""
    return n - (math.ceil(n / chunk) - 1) * chunk if n > chunk else n // 2


def chunk_stats(block) -> dict:
    """The chunk's reference values, by its own library (CuPy or NumPy), as host
    numbers: float sums and moments in float64, integer sums in int64."""
    xp = _xp("gpu" if type(block).__module__.startswith("cupy") else "cpu")
    if block.dtype.kind in "iu":
        nz = xp.flatnonzero(block)
        last = int(block[nz[-1]]) if nz.size else 0
        return dict(count=int(block.size), sum=int(xp.sum(block, dtype=xp.int64)),
                    max=int(block.max()), last_nonzero=last)
    total = float(xp.sum(block, dtype=xp.float64))
    mean = total / block.size
    d = block.astype(xp.float64)
    d -= mean
    d *= d
    m2 = float(d.sum())
    del d
    top = block.max()
    where = int(xp.flatnonzero(block == top)[0])  # the first of the largest: ties are
    return dict(count=int(block.size), sum=total, mean=mean, m2=m2,  # common in float32
                max=float(top), argmax=where)


def worker_info(device: str) -> dict:
    """This worker's device: the GPU's name, memory and PCI bus (CuPy), or the
    worker process (CPU)."""
    warnings.simplefilter("ignore", pyreduce.BackendNotice)
    if device == "gpu":
        import cupy

        dev = cupy.cuda.Device()
        free, total = cupy.cuda.runtime.memGetInfo()
        name = cupy.cuda.runtime.getDeviceProperties(dev.id)["name"]
        return dict(name=name.decode() if isinstance(name, bytes) else name, total=int(total),
                    free=int(free), pci_bus_id=dev.pci_bus_id, pid=os.getpid(),
                    CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES"))
    return dict(name=f"{platform.machine()} CPU process", total=None, pid=os.getpid())


def holds(keys, dask_worker) -> int:
    """How many of ``keys`` this worker still holds."""
    return sum(k in dask_worker.data for k in keys)


def release_memory() -> None:
    """Hands the memory of dropped chunks back (CuPy's pool), between arrays."""
    import gc

    gc.collect()
    if "cupy" in sys.modules:
        sys.modules["cupy"].get_default_memory_pool().free_all_blocks()


# --------------------------------------------------------------------------
# references and checks


def reference(stats: list, chunk: int) -> dict:
    """Each op's value over the whole array, from the chunks' references."""
    if "last_nonzero" in stats[0]:
        last = next((s["last_nonzero"] for s in reversed(stats) if s["last_nonzero"]), 0)
        return dict(sum=sum(s["sum"] for s in stats), max=max(s["max"] for s in stats),
                    last_nonzero=last)
    top = max(s["max"] for s in stats)
    first = next(i for i, s in enumerate(stats) if s["max"] == top)
    count, mean, m2 = 0, 0.0, 0.0  # Chan's update, chunk by chunk
    for s in stats:
        total = count + s["count"]
        delta = s["mean"] - mean
        mean += delta * s["count"] / total
        m2 += s["m2"] + delta * delta * count * s["count"] / total
        count = total
    return dict(sum=math.fsum(s["sum"] for s in stats), max=top, lambda_=top,
                argmax=first * chunk + stats[first]["argmax"], var=m2 / count)


def ref_value(ref: dict, op: str):
    return ref["lambda_" if op == "lambda" else op]


def host(value):
    """A result as a Python number (a CuPy 0-d array's through the host)."""
    if hasattr(value, "get"):
        value = value.get()
    return np.asarray(value).item()


def agrees(op: str, value, expected) -> bool:
    """Whether a result is the reference: exactly for the extremes, indices, the
    last non-zero and integer sums; to a relative ``RTOL`` for float sums and var."""
    got = host(value)
    if op in EXACT or isinstance(expected, int):
        return bool(got == expected)
    return bool(abs(got - expected) <= RTOL * abs(expected))


# --------------------------------------------------------------------------
# the clusters


def gpus_present() -> int:
    """The GPUs this process may use (CUDA_VISIBLE_DEVICES respected), counted
    without making a CUDA context."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except Exception:  # no NVML: ask CUDA
        try:
            import cupy

            count = cupy.cuda.runtime.getDeviceCount()
        except Exception:
            return 0
    if visible is not None:
        count = min(count, len([d for d in visible.split(",") if d.strip()]))
    return count


def start_cluster(n: int, device: str):
    """A cluster of ``n`` workers, one thread each, and its client: one worker a
    GPU (the first ``n`` visible) or ``n`` worker processes."""
    from distributed import Client

    os.environ["PYTHONPATH"] = os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if device == "gpu":
            from dask_cuda import LocalCUDACluster

            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            ids = ([d.strip() for d in visible.split(",") if d.strip()] if visible
                   else [str(d) for d in range(n)])
            cluster = LocalCUDACluster(n_workers=n, CUDA_VISIBLE_DEVICES=",".join(ids[:n]),
                                       threads_per_worker=1, dashboard_address=None)
        else:
            from distributed import LocalCluster

            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
        client = Client(cluster, timeout=120)
        client.wait_for_workers(n, timeout=60)
    return cluster, client


def close_cluster(cluster, client) -> None:
    for closing in (lambda: client.close(timeout=60), lambda: cluster.close(timeout=60)):
        try:
            closing()
        except Exception as e:  # a slow close: recorded by the caller's timing only
            print(f"  (closing: {type(e).__name__}: {e})", flush=True)


def workers_of(client, device: str) -> list:
    """The workers, in the order of their GPUs (or names), with their devices."""
    info = client.scheduler_info(n_workers=-1)["workers"] if _takes_n_workers(client) \
        else client.scheduler_info()["workers"]
    devices = client.run(worker_info, device)
    out = []
    for address, w in info.items():
        d = dict(devices[address], address=address, worker_name=str(w.get("name")))
        if d["total"] is None:  # a CPU worker: its memory limit
            d["total"] = int(w.get("memory_limit") or 0) or None
        out.append(d)
    return sorted(out, key=lambda w: (_first_device(w.get("CUDA_VISIBLE_DEVICES")),
                                      w["worker_name"]))


def _first_device(visible) -> int:
    """The GPU a dask-cuda worker uses: the first of its CUDA_VISIBLE_DEVICES."""
    try:
        return int(str(visible).split(",")[0])
    except ValueError:  # none (a CPU worker), or a UUID
        return 0


def _takes_n_workers(client) -> bool:
    import inspect

    return "n_workers" in inspect.signature(client.scheduler_info).parameters


# --------------------------------------------------------------------------
# one array


class Array:
    """A 1-D Dask array of ``n`` elements whose chunks were made on the workers,
    chunk ``i`` on ``workers[i * N // chunks]``, and are held there."""

    def __init__(self, client, workers: list, n: int, chunk: int, dtype: str, seed: int,
                 device: str, limit):
        import dask.array as da
        from distributed import wait

        self.n, self.chunk, self.dtype = n, chunk, dtype
        nb = math.ceil(n / chunk)
        name = f"multigpu-{dtype}-{n}-{uuid.uuid4().hex[:8]}"
        self.placement = [workers[i * len(workers) // nb]["address"] for i in range(nb)]
        t0 = time.perf_counter()
        self.futures = [client.submit(make_chunk, i, chunk, n, dtype, seed, device,
                                      key=(name, i), workers=[w], allow_other_workers=False,
                                      pure=False)
                        for i, w in enumerate(self.placement)]
        wait(self.futures, timeout=limit())
        for f in self.futures:
            if f.status != "finished":
                f.result()  # raises the worker's error
        self.make_s = time.perf_counter() - t0
        sizes = tuple(min(chunk, n - i * chunk) for i in range(nb))
        meta = _xp(device).empty(0, dtype=dtype)
        self.x = da.Array({(name, i): f for i, f in enumerate(self.futures)}, name,
                          chunks=(sizes,), dtype=dtype, meta=meta)
        t0 = time.perf_counter()
        stats = [client.submit(chunk_stats, f, workers=[w], pure=False)
                 for f, w in zip(self.futures, self.placement)]
        wait(stats, timeout=limit())
        stats = client.gather(stats)
        self.reference = reference(stats, chunk)
        self.reference_s = time.perf_counter() - t0

    def held(self, client) -> dict:
        """How many chunks each worker holds (the scheduler's word)."""
        counts: dict = {}
        for places in client.who_has(self.futures).values():
            for w in places:
                counts[w] = counts.get(w, 0) + 1
        return counts

    def drop(self, client) -> None:
        """Forgets the chunks, waits (up to 10 s) until no worker holds them, and
        hands their memory back."""
        keys = [f.key for f in self.futures]
        client.cancel(self.futures)
        self.futures, self.x = [], None
        until = time.perf_counter() + 10
        while time.perf_counter() < until and any(client.run(holds, keys).values()):
            time.sleep(0.02)
        client.run(release_memory)


def expression(op: str, x, lib: str):
    """The lazy result of ``op`` on ``x`` by pyreduce, or by Dask (its peer)."""
    if lib == "dask":
        return getattr(x, OPS[op][1])()
    if op in USER_OPS:
        return pyreduce.reduce(x, USER_OPS[op])
    return getattr(pyreduce, op)(x)


def timed(client, expr, reps: int, limit) -> dict:
    """One untimed compute (it compiles), then ``reps`` timed: their median, the
    times, the first compute's time and every value."""
    values, times = [], []
    for _ in range(reps + 1):
        t0 = time.perf_counter()
        values.append(client.compute(expr).result(timeout=limit()))
        times.append(time.perf_counter() - t0)
    return dict(seconds=float(np.median(times[1:])), times=times[1:], first_s=times[0],
                values=values)


def breakdown(client, expr, limit, workers: int) -> dict:
    """Where one compute's wall time goes, from the task stream: the busiest
    worker's tasks (compute and transfer), its gaps between them while any task
    ran (the scheduler's turns), and the time outside every task (graph
    submission, the first task's dispatch, the result's return); with the
    compute time of each kind of task, summed over the workers."""
    from dask.utils import key_split
    from distributed import get_task_stream

    with get_task_stream(client) as ts:
        t0 = time.perf_counter()
        client.compute(expr).result(timeout=limit())
        wall = time.perf_counter() - t0
    kinds: dict = {}
    busy: dict = {}
    starts, stops = [], []
    compute = transfer = 0.0
    for task in ts.data:
        kind = kinds.setdefault(key_split(task["key"]), dict(tasks=0, compute_s=0.0))
        kind["tasks"] += 1
        for s in task["startstops"]:
            dt = s["stop"] - s["start"]
            starts.append(s["start"])
            stops.append(s["stop"])
            busy[task["worker"]] = busy.get(task["worker"], 0.0) + dt
            if s["action"] == "compute":
                compute += dt
                kind["compute_s"] += dt
            elif s["action"] == "transfer":
                transfer += dt
    span = (max(stops) - min(starts)) if starts else 0.0
    busiest = max(busy.values(), default=0.0)
    chunk_kind = max(kinds, key=lambda k: kinds[k]["tasks"], default=None)
    return dict(wall_s=wall, tasks=len(ts.data), workers=workers, workers_used=len(busy),
                compute_s=compute, transfer_s=transfer, span_s=span, busiest_busy_s=busiest,
                busiest_gaps_s=max(span - busiest, 0.0), outside_s=max(wall - span, 0.0),
                chunk_tasks=kinds[chunk_kind]["tasks"] if chunk_kind else 0,
                chunk_compute_s=kinds[chunk_kind]["compute_s"] if chunk_kind else 0.0,
                chunk_kind=chunk_kind, kinds=kinds, per_worker_busy_s=sorted(busy.values()))


# --------------------------------------------------------------------------
# the run


class Recorder:
    """The run's data, written to ``path`` after every change (atomically)."""

    def __init__(self, path: str, data: dict):
        self.path, self.data, self.t0 = path, data, time.perf_counter()

    def add(self, section: str, item: dict) -> None:
        self.data[section].append(item)
        self.save()

    def save(self) -> None:
        tmp = self.path + ".part"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, default=_jsonable)
        os.replace(tmp, self.path)

    def say(self, text: str) -> None:
        print(f"[{time.perf_counter() - self.t0:6.1f}s] {text}", flush=True)


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "get"):
        return host(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def pick_device(device: str) -> str:
    if device != "auto":
        return device
    try:
        import cupy  # noqa: F401
        import dask_cuda  # noqa: F401
    except ImportError:
        return "cpu"
    return "gpu" if gpus_present() > 0 else "cpu"


def gpu_counts(asked, device: str) -> tuple[list, list]:
    """The counts to run, and those refused (more GPUs than present)."""
    present = gpus_present() if device == "gpu" else (os.cpu_count() or 1)
    if not asked:
        asked = [1, 2, 4, 8] if device == "gpu" else [1, 2]
        asked = [n for n in asked if n <= present] or [1]
    return ([n for n in asked if n <= present or device == "cpu"],
            [n for n in asked if n > present and device == "gpu"])


def run(args) -> dict:
    device = pick_device(args.device)
    sizes = args.sizes or ([30, 31, 32, 33] if device == "gpu" else [18, 20])
    chunk = 2 ** (args.chunk or (27 if device == "gpu" else 15))
    counts, refused = gpu_counts(args.gpus, device)
    ops = args.ops or list(OPS)
    deps = ("dask", "distributed", "dask-cuda", "numpy", "numba", "numba-cuda",
            "cupy-cuda12x", "cupy-cuda13x", "pandas")
    data = dict(meta=dict(device=None, device_kind=device, date=datetime.date.today().isoformat(),
                          python=platform.python_version(), versions=versions(deps),
                          gpus_present=gpus_present() if device == "gpu" else 0,
                          chunk=chunk, reps=args.reps, mem_fraction=args.mem_fraction,
                          budget_s=args.budget, counts=counts, sizes=sizes,
                          dtypes=args.dtypes, ops=ops),
                clusters=[], arrays=[], rows=[], skipped=[], breakdown=[])
    rec = Recorder(args.out, data)
    hard_stop = rec.t0 + args.budget + 60

    def limit() -> float:
        """Seconds the next wait may take: ``--timeout``, and nothing once the run
        is a minute past its budget (a hung cluster must not outlast it)."""
        left = hard_stop - time.perf_counter()
        if left <= 0:
            raise TimeoutError("a minute past --budget: not started")
        return min(args.timeout, left)

    args.limit = limit
    for n_gpus in refused:
        rec.add("skipped", dict(gpus=n_gpus, reason=f"only {data['meta']['gpus_present']} "
                                                   "GPUs present"))
    rec.say(f"{device}: GPU counts {counts}, sizes 2**{sizes}, chunks of {chunk}, "
            f"dtypes {args.dtypes}, ops {ops}, {args.reps} reps")
    for index, n_gpus in enumerate(counts):
        left = args.budget - (time.perf_counter() - rec.t0)
        deadline = time.perf_counter() + left / (len(counts) - index)
        if left <= 0:
            for k in sizes:
                for dtype in args.dtypes:
                    rec.add("skipped", dict(gpus=n_gpus, k=k, n=2**k, dtype=dtype,
                                            reason="time budget spent"))
            continue
        one_count(rec, args, device, n_gpus, sizes, chunk, ops, deadline)
    rec.say("done")
    return data


def one_count(rec: Recorder, args, device: str, n_gpus: int, sizes, chunk: int, ops,
              deadline: float) -> None:
    """Every array and op on a cluster of ``n_gpus`` workers."""
    t0 = time.perf_counter()
    entry = dict(gpus=n_gpus)
    try:
        cluster, client = start_cluster(n_gpus, device)
    except Exception as e:
        entry.update(error=f"{type(e).__name__}: {e}", start_s=time.perf_counter() - t0)
        rec.add("clusters", entry)
        rec.say(f"N={n_gpus}: the cluster did not start: {entry['error']}")
        return
    try:
        workers = workers_of(client, device)
        entry.update(start_s=time.perf_counter() - t0, workers=workers)
        if device == "gpu":
            buses = {w["pci_bus_id"] for w in workers}
            entry["distinct_gpus"] = len(buses)
            if rec.data["meta"]["device"] is None:
                rec.data["meta"]["device"] = workers[0]["name"]
        elif rec.data["meta"]["device"] is None:
            rec.data["meta"]["device"] = f"{platform.machine()}, {os.cpu_count()} CPUs"
        client.get_task_stream()  # the scheduler records tasks from now on, for every
        rec.add("clusters", entry)  # timing alike (breakdown reads the record)
        rec.say(f"N={n_gpus}: {len(workers)} workers up in {entry['start_s']:.1f} s"
                + (f", {entry['distinct_gpus']} distinct GPUs" if device == "gpu" else ""))
        memory = (args.device_memory * 2**30 if args.device_memory
                  else min((w["total"] or 0) for w in workers) or None)
        for k in sizes:
            for dtype in args.dtypes:
                case = dict(gpus=n_gpus, k=k, n=2**k, dtype=dtype)
                why = too_big(2**k, chunk, dtype, n_gpus, memory, args.mem_fraction)
                if why is None and time.perf_counter() > deadline:
                    why = "time budget: this GPU count's share is spent"
                if why:
                    rec.add("skipped", dict(case, reason=why))
                    rec.say(f"N={n_gpus} 2**{k} {dtype}: skipped ({why})")
                    continue
                try:
                    one_array(rec, args, client, workers, device, case, chunk, ops)
                except Exception as e:  # recorded; the next array may still run
                    rec.add("rows", dict(case, op="(array)", ok=False,
                                         error=f"{type(e).__name__}: {e}"[:500]))
                    rec.say(f"N={n_gpus} 2**{k} {dtype}: failed: {type(e).__name__}: {e}")
    except Exception as e:  # the cluster's set-up: recorded, the next count may run
        entry["error"] = f"{type(e).__name__}: {e}"[:500]
        rec.say(f"N={n_gpus}: {entry['error']}")
        if entry not in rec.data["clusters"]:
            rec.add("clusters", entry)
    finally:
        t1 = time.perf_counter()
        close_cluster(cluster, client)
        entry["close_s"] = time.perf_counter() - t1
        rec.save()


def too_big(n: int, chunk: int, dtype: str, n_gpus: int, memory, fraction: float):
    """Why an array would not fit (None if it would): its largest share of chunks
    over ``fraction`` of one device's ``memory``."""
    if not memory:
        return None
    nb = math.ceil(n / chunk)
    per = math.ceil(nb / n_gpus) * min(chunk, n) * np.dtype(dtype).itemsize
    if per <= fraction * memory:
        return None
    return (f"{n * np.dtype(dtype).itemsize / 2**30:.0f} GiB: {per / 2**30:.1f} GiB a device, "
            f"over {fraction:.0%} of its {memory / 2**30:.1f} GiB")


def one_array(rec: Recorder, args, client, workers, device: str, case: dict, chunk: int,
              ops) -> None:
    n, dtype, n_gpus = case["n"], case["dtype"], case["gpus"]
    label = f"N={n_gpus} 2**{case['k']} {dtype}"
    kind = np.dtype(dtype).kind
    try:
        arr = Array(client, workers, n, chunk, dtype, args.seed, device, args.limit)
    except Exception as e:
        rec.add("rows", dict(case, op="(make)", ok=False, error=f"{type(e).__name__}: {e}"))
        rec.say(f"{label}: making the array failed: {type(e).__name__}: {e}")
        client.run(release_memory)
        return
    nbytes = n * np.dtype(dtype).itemsize
    rec.add("arrays", dict(case, bytes=nbytes, chunk=chunk, chunks=len(arr.futures),
                           make_s=arr.make_s, reference_s=arr.reference_s,
                           reference=arr.reference, held=arr.held(client)))
    rec.say(f"{label}: {nbytes / 2**30:.2f} GiB in {len(arr.futures)} chunks made in "
            f"{arr.make_s:.2f} s, references in {arr.reference_s:.2f} s")
    try:
        peers = {}
        for peer in sorted({OPS[op][1] for op in ops if OPS[op][1] and kind in OPS[op][0]}):
            peers[peer] = measure(client, expression(peer, arr.x, "dask"), args, peer,
                                  arr.reference)
        for op in ops:
            if kind not in OPS[op][0]:
                continue
            ours = measure(client, expression(op, arr.x, "pyreduce"), args, op, arr.reference)
            theirs = peers.get(OPS[op][1], {})
            row = dict(case, op=op, bytes=nbytes, chunk=chunk, chunks=len(arr.futures),
                       pyreduce_s=ours.get("seconds"), pyreduce_times=ours.get("times"),
                       pyreduce_first_s=ours.get("first_s"), value=ours.get("value"),
                       reference=ref_value(arr.reference, op), pyreduce_ok=ours["ok"],
                       dask_peer=OPS[op][1] and f"x.{OPS[op][1]}()",
                       dask_s=theirs.get("seconds"), dask_times=theirs.get("times"),
                       dask_first_s=theirs.get("first_s"),
                       dask_value=theirs.get("value"), dask_ok=theirs.get("ok", True),
                       ok=ours["ok"] and theirs.get("ok", True))
            errors = [e for e in (ours.get("error"), theirs.get("error")) if e]
            if errors:
                row["error"] = "; ".join(errors)
            rec.add("rows", row)
            rec.say(f"{label} {op}: " + progress(row))
        if dtype == "float32" and "sum" in ops:
            for lib in ("pyreduce", "dask"):
                try:
                    b = breakdown(client, expression("sum", arr.x, lib), args.limit,
                                  len(workers))
                except Exception as e:
                    b = dict(error=f"{type(e).__name__}: {e}")
                rec.add("breakdown", dict(case, lib=lib, op="sum", bytes=nbytes,
                                          chunks=len(arr.futures), **b))
                if "error" not in b:
                    rec.say(f"{label} sum by {lib}, task stream: wall {b['wall_s'] * 1e3:.1f} "
                            f"ms, {b['chunk_tasks']} chunk tasks {b['chunk_compute_s'] * 1e3:.1f}"
                            f" ms in all, busiest worker busy {b['busiest_busy_s'] * 1e3:.1f} ms,"
                            f" gaps {b['busiest_gaps_s'] * 1e3:.1f} ms, outside tasks "
                            f"{b['outside_s'] * 1e3:.1f} ms")
    finally:
        arr.drop(client)


def measure(client, expr, args, op: str, ref: dict) -> dict:
    """``timed``, with every value checked against the reference; an exception
    (a timeout, a worker's error) is kept as the row's error."""
    try:
        t = timed(client, expr, args.reps, args.limit)
    except Exception as e:
        return dict(ok=False, error=f"{type(e).__name__}: {e}"[:500])
    expected = ref_value(ref, op)
    ok = all(agrees(op, v, expected) for v in t["values"])
    return dict(seconds=t["seconds"], times=t["times"], first_s=t["first_s"],
                value=host(t["values"][0]), ok=ok)


def progress(row: dict) -> str:
    """A row as one line: the times, GB/s, the first compute's time, the verdict."""
    parts = []
    if row.get("pyreduce_s") is not None:
        parts.append(f"pyreduce {row['pyreduce_s'] * 1e3:8.2f} ms "
                     f"({_gbps(row['bytes'], row['pyreduce_s'])} GB/s; first compute "
                     f"{row['pyreduce_first_s']:.2f} s)")
    if row.get("dask_s") is not None:
        parts.append(f"Dask {row['dask_peer']} {row['dask_s'] * 1e3:8.2f} ms")
    verdict = "ok" if row["ok"] else f"ERROR {row['error']}" if row.get("error") else (
        f"WRONG: pyreduce {row.get('value')!r}, Dask {row.get('dask_value')!r}, "
        f"reference {row.get('reference')!r}")
    return ", ".join(parts + [verdict])


# --------------------------------------------------------------------------
# the report


def _pow2(k) -> str:
    """2 to the ``k`` as the docs write it (Markdown reads 2**k as bold)."""
    return f"2<sup>{k}</sup>"


def _ms(seconds) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.2f}"


def _gbps(nbytes, seconds) -> str:
    if not seconds:
        return "–"
    v = nbytes / seconds / 1e9
    return f"{v:.1f}" if v >= 10 else f"{v:.3g}"


def speedups(rows: list) -> dict:
    """``(k, dtype, op, gpus): (pyreduce's, Dask's)`` time on 1 GPU over time on N."""
    one = {(r["k"], r["dtype"], r["op"]): r for r in rows
           if r["gpus"] == 1 and r.get("pyreduce_s")}
    out = {}
    for r in rows:
        base = one.get((r["k"], r["dtype"], r["op"]))
        if base is None or not r.get("pyreduce_s"):
            continue
        dask = (base["dask_s"] / r["dask_s"]) if base.get("dask_s") and r.get("dask_s") else None
        out[(r["k"], r["dtype"], r["op"], r["gpus"])] = (base["pyreduce_s"] / r["pyreduce_s"],
                                                         dask)
    return out


def report(data: dict, args=None) -> str:
    m = data["meta"]
    rows = [r for r in data["rows"] if "k" in r and r.get("op") in OPS]
    ups = speedups(rows)
    chunk = m.get("chunk")
    lines = [f"{m.get('device')}, {m.get('date')}; one Dask worker per "
             f"{'GPU' if m.get('device_kind') == 'gpu' else 'process (CPU mode)'}, "
             f"chunks of {_pow2(int(math.log2(chunk))) if chunk else '?'} elements; "
             f"dask {m['versions'].get('dask', '?')}, dask-cuda "
             f"{m['versions'].get('dask-cuda', '-')}; median of {m.get('reps')} computes. "
             "Speed-up: the time on 1 GPU over the time on N (Dask's in brackets).", "",
             "| elements | dtype | op (vs Dask's) | GPUs | pyreduce (ms) | Dask (ms) | "
             "pyreduce GB/s | speed-up over 1 GPU | result |",
             "|---|---|---|--:|--:|--:|--:|--:|---|"]
    order = {d: i for i, d in enumerate(DTYPES)}
    opord = {o: i for i, o in enumerate(OPS)}
    for r in sorted(rows, key=lambda r: (r["k"], order.get(r["dtype"], 9),
                                         opord.get(r["op"], 9), r["gpus"])):
        up = ups.get((r["k"], r["dtype"], r["op"], r["gpus"]))
        up_text = "–" if up is None else f"{up[0]:.2f}" + (
            f" ({up[1]:.2f})" if up[1] is not None else "")
        peer = f" vs `{r['dask_peer']}`" if r.get("dask_peer") else ""
        gbps = _gbps(r["bytes"], r.get("pyreduce_s"))
        result = "agrees" if r["ok"] else ("ERROR" if r.get("error") else "WRONG")
        lines.append(f"| {_pow2(r['k'])} | {r['dtype']} | `{r['op']}`{peer} | {r['gpus']} | "
                     f"{_ms(r.get('pyreduce_s'))} | {_ms(r.get('dask_s'))} | {gbps} | "
                     f"{up_text} | {result} |")
    failed = [r for r in data["rows"] if not r.get("ok")]
    for r in failed:
        if r.get("error"):
            lines.append(f"\nError, {r.get('gpus')} GPUs, {_pow2(r.get('k'))} {r.get('dtype')} "
                         f"{r.get('op')}: {r['error']}")
    if data.get("skipped"):
        lines += ["", "Skipped:"]
        for s in data["skipped"]:
            what = f"{_pow2(s['k'])} {s['dtype']} on " if "k" in s else ""
            lines.append(f"* {what}{s['gpus']} GPUs: {s['reason']}")
    good = [b for b in data.get("breakdown", ()) if "wall_s" in b]
    if good:
        lines += ["", "Where one compute's time goes (task stream, float32 sum): the busiest "
                  "worker's tasks and its gaps between them, and the time outside all tasks "
                  "(graph submission, dispatch, the result's return); ms.", "",
                  "| elements | GPUs | library | wall | tasks | chunk tasks: count, mean | "
                  "all compute | transfers | busiest worker: tasks, gaps | outside tasks |",
                  "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|"]
        for b in sorted(good, key=lambda b: (b["k"], b["gpus"], b["lib"])):
            mean = b["chunk_compute_s"] / b["chunk_tasks"] if b["chunk_tasks"] else 0.0
            lines.append(
                f"| {_pow2(b['k'])} | {b['gpus']} | {b['lib']} | {_ms(b['wall_s'])} | "
                f"{b['tasks']} | "
                f"{b['chunk_tasks']}, {_ms(mean)} | {_ms(b['compute_s'])} | "
                f"{_ms(b['transfer_s'])} | {_ms(b['busiest_busy_s'])}, "
                f"{_ms(b['busiest_gaps_s'])} | {_ms(b['outside_s'])} |")
    chart_path = getattr(args, "chart", None) if args is not None else None
    if chart_path:
        drawn = chart(data, chart_path)
        lines += ["", f"Chart: {chart_path}" if drawn else
                  "(no chart: matplotlib is not importable or there is nothing to draw)"]
    return "\n".join(lines) + "\n"


def chart(data: dict, path: str) -> bool:
    """GB/s against the GPU count, one panel per dtype, at the largest size that
    ran on the most GPU counts: pyreduce's ops solid, Dask's dashed, and linear
    scaling of pyreduce's sum from its fewest GPUs dotted. False if not drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in data["rows"] if r.get("pyreduce_s") and r.get("op") in OPS]
    dtypes = [d for d in DTYPES if any(r["dtype"] == d for r in rows)]
    if not dtypes:
        return False
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5 * len(dtypes), 4), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        mine = [r for r in rows if r["dtype"] == dtype]
        k = max({r["k"] for r in mine}, key=lambda k: (len({r["gpus"] for r in mine
                                                              if r["k"] == k}), k))
        mine = [r for r in mine if r["k"] == k]
        for j, op in enumerate(o for o in OPS if any(r["op"] == o for r in mine)):
            pts = sorted((r["gpus"], r["bytes"] / r["pyreduce_s"] / 1e9)
                         for r in mine if r["op"] == op)
            ax.plot(*zip(*pts), "o-", color=f"C{j}", label=f"pyreduce {op}")
        for j, peer in enumerate(("sum", "max")):
            pts = sorted((r["gpus"], r["bytes"] / r["dask_s"] / 1e9) for r in mine
                         if r["op"] == peer and r.get("dask_s"))
            if pts:
                ax.plot(*zip(*pts), "s--", color=f"C{j}", alpha=0.6, label=f"Dask x.{peer}()")
        base = sorted((r["gpus"], r["bytes"] / r["pyreduce_s"] / 1e9) for r in mine
                      if r["op"] == "sum")
        if len(base) > 1:
            g0, v0 = base[0]
            ax.plot([g for g, _ in base], [v0 * g / g0 for g, _ in base], ":", color="grey",
                    label="linear (sum)")
        counts = sorted({r["gpus"] for r in mine})
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(c) for c in counts])
        ax.set_xlabel("GPUs" if data["meta"].get("device_kind") == "gpu" else "workers")
        ax.set_ylabel("GB/s")
        ax.set_title(f"{dtype}, $2^{{{k}}}$ elements")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"pyreduce over Dask: {data['meta'].get('device')}, {data['meta'].get('date')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------


def arguments(r) -> None:
    r.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    r.add_argument("--gpus", type=int, nargs="*",
                   help="GPU counts (workers on the CPU); default 1 2 4 8, up to those present")
    r.add_argument("--sizes", type=int, nargs="*", help="log2 of the element counts")
    r.add_argument("--chunk", type=int, help="log2 of the chunk size (default 27; CPU 15)")
    r.add_argument("--dtypes", nargs="*", default=list(DTYPES), choices=DTYPES)
    r.add_argument("--ops", nargs="*", choices=list(OPS), help="default: all")
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--mem-fraction", type=float, default=0.6,
                   help="skip arrays that would fill more of a device's memory")
    r.add_argument("--device-memory", type=float,
                   help="GiB a device, instead of what the workers report (for tests)")
    r.add_argument("--budget", type=float, default=420.0,
                   help="seconds for the whole run; arrays past it are skipped")
    r.add_argument("--timeout", type=float, default=120.0,
                   help="seconds one compute may take before it is an error")


def report_arguments(r) -> None:
    r.add_argument("--chart", help="write a PNG chart here (needs matplotlib)")


if __name__ == "__main__":
    def _run_arguments(parser):
        arguments(parser)
        report_arguments(parser)

    dispatch(__doc__, {
        "run": run_command(run, report, _run_arguments, report_args=True),
        "report": Command(lambda args: print(report(load(args.file), args)),
                          lambda parser: (parser.add_argument("file"), report_arguments(parser))),
    })
