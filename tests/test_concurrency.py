"""Calls from several Python threads at once: correct results, one build per new
kernel, and no shared state between calls (scratch, warp size, launch grids).

The simulator runs one kernel at a time (numba-cuda asserts it); pyreduce
serialises simulated reductions, so concurrent calls on ``sim`` must work too.
First use of a backend is tested in a fresh interpreter, where the backend
objects do not exist yet."""

from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import pyreduce
from pyreduce import backends
from oracles import ORDERED, affine, affine_data, last_nonzero

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _jobs(backend):
    """(callable, expected) pairs of different ops, dtypes, sizes and tunings."""
    big = backend == "cpu"
    rng = np.random.default_rng(0)
    jobs = []
    for i in range(24):
        n = [1, 63, 64, 65, 300, 1000, 1537][i % 7] * (1 if not big else 97)
        kind = i % 4
        extra = {"backend": backend}
        if backend == "sim":
            variants = list(pyreduce.variants) if kind >= 2 else ORDERED  # 0, 1: user ops
            variant = variants[i % len(variants)]
            multiple = pyreduce.variants[variant].items_multiple
            extra["tuning"] = pyreduce.Tuning(
                warp_size=[32, 64][i % 2], block_size=[64, 128][i % 2 if i % 3 else 0],
                variant=variant, items_per_thread=-(-[1, 2, 4][i % 3] // multiple) * multiple,
                max_blocks=[1, 2, 4][i % 3],
            )
        if kind == 0:
            x = affine_data(n, seed=i)
            want = functools.reduce(affine, x.tolist())
            jobs.append((functools.partial(pyreduce.reduce, x, affine, **extra), want))
        elif kind == 1:
            x = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 100, n)).astype(np.int32)
            nz = np.flatnonzero(x)
            want = x[nz[-1]] if nz.size else np.int32(7)
            jobs.append((functools.partial(pyreduce.reduce, x, last_nonzero, initial=7,
                                           **extra), want))
        elif kind == 2:
            x = rng.integers(-128, 128, n, dtype=np.int8)
            jobs.append((functools.partial(pyreduce.sum, x, **extra), x.sum(dtype=np.int64)))
        else:
            x = rng.standard_normal(n).astype(np.float32)
            x[n // 2] = np.nan if i % 8 == 3 else x[n // 2]
            want = np.max(x)
            jobs.append((functools.partial(pyreduce.max, x, **extra), want))
    return jobs


def _check(got, want):
    if isinstance(want, (float, np.floating)) and np.isnan(want):
        return bool(np.isnan(got))
    return got == want


@pytest.mark.parametrize("threads", [4, 8])
def test_concurrent_calls_give_correct_results(backend, threads):
    jobs = _jobs(backend)
    for fn, _ in jobs[:4]:  # first use of the backend is tested separately below
        fn()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(fn) for fn, _ in jobs * 2]
        results = [f.result(timeout=300) for f in futures]
    for (fn, want), got in zip(jobs * 2, results):
        assert _check(got, want), (fn.keywords, got, want)


def test_concurrent_large_cpu_calls_use_the_pool_in_order():
    """Inputs above the CPU backend's parallel threshold are split over its thread
    pool; several of them at once must not mix their chunks."""
    from pyreduce.backends import cpu_parallel

    n = 2 * cpu_parallel.PARALLEL_MIN + 5
    arrays = []
    for k in range(4):
        x = np.zeros(n, dtype=np.int64)
        x[[k, n // 2 + k, n - 1 - 3 * k]] = [k + 1, k + 2, k + 3]
        arrays.append(x)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        last = list(pool.map(lambda a: pyreduce.reduce(a, last_nonzero, backend="cpu"),
                             arrays))
        first = list(pool.map(
            lambda a: pyreduce.reduce(a, lambda p, q: p if p != 0 else q, backend="cpu"),
            arrays))
    assert last == [k + 3 for k in range(4)]
    assert first == [k + 1 for k in range(4)]


def _fresh_op(k):
    # same code for every k; the closure constant makes each k a new kernel
    return lambda a, b: a + b + k


def test_concurrent_first_use_of_a_new_op_builds_once(backend):
    x = np.arange(1, 301, dtype=np.int64)
    extra = {"backend": backend}
    if backend == "sim":
        extra["tuning"] = pyreduce.Tuning(block_size=64, items_per_thread=2, max_blocks=3)
    pyreduce.reduce(x, "add", **extra)  # the backend itself exists already
    # what one first use of such an op builds, measured on its own
    k0 = int(np.random.default_rng().integers(1, 2**40))
    before = pyreduce.cache_info().builds
    assert pyreduce.reduce(x, _fresh_op(k0), **extra) == x.sum() + 299 * k0
    one = pyreduce.cache_info().builds - before
    assert one >= 1
    # the same first use from 8 threads at once
    k1 = k0 + 1
    barrier = threading.Barrier(8)

    def call():
        barrier.wait()
        return pyreduce.reduce(x, _fresh_op(k1), **extra)

    before = pyreduce.cache_info().builds
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = [f.result(timeout=300) for f in [pool.submit(call) for _ in range(8)]]
    assert all(r == x.sum() + 299 * k1 for r in results)
    assert pyreduce.cache_info().builds - before == one


def test_device_results_from_concurrent_calls_are_independent(gpu_backend):
    def call(k):
        x = np.full(100 + k, k, dtype=np.int64)
        out = pyreduce.sum(x, device_result=True, backend=gpu_backend)
        return k, out

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        outs = list(pool.map(call, range(12)))
    for k, out in outs:
        assert out.copy_to_host()[()] == k * (100 + k)


def test_cache_clear_during_calls(backend):
    """Clearing the cache while other threads reduce must not break them."""
    stop = threading.Event()
    errors = []

    def clearer():
        while not stop.is_set():
            pyreduce.cache_clear()
            stop.wait(0.01)

    extra = {"backend": backend}
    if backend == "sim":
        extra["tuning"] = pyreduce.Tuning(block_size=32, items_per_thread=1, max_blocks=2)
    x = affine_data(200, seed=3)
    want = functools.reduce(affine, x.tolist())

    def worker():
        for _ in range(3):
            try:
                got = pyreduce.reduce(x, affine, **extra)
                if int(got) != want:
                    errors.append(f"wrong result {got}")
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))

    t = threading.Thread(target=clearer)
    t.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            for f in [pool.submit(worker) for _ in range(3)]:
                f.result(timeout=300)
    finally:
        stop.set()
        t.join()
    assert errors == []


_FIRST_USE = textwrap.dedent(
    """
    import json, os, sys, threading
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    import warnings
    warnings.simplefilter("ignore")
    import numpy as np, pyreduce
    backend = sys.argv[1]
    barrier = threading.Barrier(8)
    errors, results = [], []
    def call(i):
        x = np.arange(i * 10 + 50, dtype=np.float64)
        barrier.wait()
        try:
            results.append(float(pyreduce.sum(x, backend=backend)) == float(x.sum()))
        except Exception as exc:
            errors.append(repr(exc)[:300])
    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    [t.start() for t in threads]
    [t.join(120) for t in threads]
    print(json.dumps({"errors": errors, "results": results,
                      "builds": pyreduce.cache_info().builds}))
    """
)


@pytest.mark.parametrize("name", ["cpu", "sim"])
def test_concurrent_first_use_of_a_backend(name):
    """Regression (pyreduce/backends/__init__.py ``_instance``: ``functools.lru_cache``
    does not stop two threads from constructing the backend at once; the
    simulator backend's constructor then runs ``simwarp.install()`` twice
    concurrently and fails with "TypeError: Cannot create a consistent method
    resolution order (MRO) for bases _ModuleMixin, WarpFakeCUDAModule")."""
    if name not in backends.available():
        pytest.skip(f"{name} not available")
    env = dict(os.environ, PYTHONPATH=REPO)
    env["NUMBA_ENABLE_CUDASIM"] = "1" if name == "sim" else env.get(
        "NUMBA_ENABLE_CUDASIM", "1")
    for _attempt in range(3):  # a race: give it a few fresh processes to show
        proc = subprocess.run([sys.executable, "-c", _FIRST_USE, name],
                              capture_output=True, text=True, timeout=240, env=env, cwd=REPO)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        assert lines, proc.stderr[-3000:]
        out = json.loads(lines[-1])
        assert out["errors"] == []
        assert out["results"] == [True] * 8


def test_the_per_thread_default_stream_is_named_with_its_thread():
    """Workspaces are pooled per stream. The per-thread default stream's handle
    (2) is another stream in each thread, so its pools are per thread: one
    thread's queued kernels may still read a workspace's scratch when its call
    returns, and another thread's work on its own stream is not ordered after
    them. Other handles are one stream whatever the thread."""
    from pyreduce.driver import PER_THREAD_STREAM, stream_key

    here = stream_key(PER_THREAD_STREAM)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        there = pool.submit(stream_key, PER_THREAD_STREAM).result()
        assert pool.submit(stream_key, 7).result() == stream_key(7) == 7
        assert pool.submit(stream_key, None).result() == stream_key(0) == 0
    assert here == stream_key(PER_THREAD_STREAM) and here != there
