"""The streamed host-input path taken apart: each stage's rate alone, then
together, for a float64 NumPy array of 1e8 elements in the chunks, pieces and
pinned buffers the library uses (:mod:`pyreduce.backends.staging`; best of 3
after a warm-up). Prints one line per stage.

    NUMBA_ENABLE_CUDASIM=0 python bench/host_stages.py

``docs/performance/host-stages-h100.txt`` is its output on an H100.
"""

from __future__ import annotations

import time

import numpy as np


def rate(label: str, nbytes: int, fn, reps: int = 3) -> None:
    fn()
    best = min(_seconds(fn) for _ in range(reps))
    print(f"{label}: {best * 1e3:.2f} ms, {nbytes / best / 1e9:.1f} GB/s", flush=True)


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    from numba import cuda

    import pyreduce
    from pyreduce import backends
    from pyreduce.backends import staging
    from pyreduce.backends.cpu import shared as cpu_backend

    chunk, slots = staging.CHUNK_BYTES, staging.SLOTS
    parts = max(1, min(cpu_backend().threads, chunk // staging.COPY_PIECE_BYTES))
    x = np.random.default_rng(0).random(10**8)
    raw = x.view(np.uint8)
    chunks = raw.size // chunk
    moved = chunks * chunk
    pinned = [cuda.pinned_array(chunk, dtype=np.uint8) for _ in range(slots)]
    device = [cuda.device_array(chunk, dtype=np.uint8) for _ in range(slots)]
    stream = cuda.stream()
    crew, threads = cpu_backend().crew(), cpu_backend().threads

    def to_device(source):
        for c in range(chunks):
            device[c % slots].copy_to_device(source(c), stream=stream)
        stream.synchronize()

    def into_pinned(parts: int):
        for c in range(chunks):
            dst, src = pinned[c % slots], raw[c * chunk:(c + 1) * chunk]
            edges = [chunk * p // parts for p in range(parts + 1)]
            crew.map(np.copyto, [(dst[a:b], src[a:b]) for a, b in zip(edges, edges[1:])])

    rate("host-to-device copy from pinned buffers", moved,
         lambda: to_device(lambda c: pinned[c % slots]))
    rate("host-to-device copy from the pageable array", moved,
         lambda: to_device(lambda c: raw[c * chunk:(c + 1) * chunk]))
    rate(f"host copy into pinned buffers, {chunk >> 20} MiB chunks in {parts} pieces "
         f"({threads} threads)", moved, lambda: into_pinned(parts))
    rate("host copy into pinned buffers, one thread", moved, lambda: into_pinned(1))
    with staging.stager(backends.get("cuda")) as st:
        rate("Stager.upload (staging and copies, no reduction)", x.nbytes,
             lambda: st.upload(x))
    rate("pyreduce.sum(x, backend='cuda'), streamed", x.nbytes,
         lambda: pyreduce.sum(x, backend="cuda"))
    rate("pyreduce.sum(x, backend='cpu')", x.nbytes, lambda: pyreduce.sum(x, backend="cpu"))
    rate("np.sum(x)", x.nbytes, lambda: np.sum(x))


if __name__ == "__main__":
    main()
