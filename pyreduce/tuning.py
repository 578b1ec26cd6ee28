"""The autotuner: measured kernel choices per GPU, kept on disk.

The planner's built-in choices are good on the GPUs they were measured on; a
tuned choice is better on the GPU in hand. :func:`tune` times a few candidate
configurations (variant, block size, items per thread, grid size) of one
reduction on the device and records the fastest under a :class:`Key`: the GPU
(name and compute capability), the input and accumulator dtypes, the op kind
(each built-in op by name, every user op as ``"user"``) and the size class
(``floor(log2 n)``). Calls without a tuning (no ``variant=`` or ``tuning=``) then
use it, in this process and in every later one: the choices live in a JSON file
(:func:`path`: ``$PYREDUCE_TUNING_FILE``, else ``$XDG_CACHE_HOME/pyreduce/`` or
``~/.cache/pyreduce/``, ``tuning.json``). :func:`show` lists them and
:func:`reset` forgets them; ``python -m pyreduce tune`` tunes the common cases.
The same file keeps, per machine, the numbers of the cost model that sends a
host array to the GPU or the cpu backend (:func:`host_model`,
:mod:`pyreduce.costmodel`), which :func:`calibrate` measures.

This module runs whole reductions; the store it writes is
:mod:`pyreduce.tuned`, whose names it re-exports.

Nothing is tuned behind the user's back: timing candidates compiles a kernel for
each, seconds of work that a first call should not pay.

>>> import pyreduce.tuning as t
>>> t.Key("NVIDIA H100 80GB HBM3 sm_90", "float32", "float32", "add", 28).text
'NVIDIA H100 80GB HBM3 sm_90|float32|float32|add|2**28'
"""

from __future__ import annotations

import datetime

import numpy as np

from . import backends, costmodel, tuned
from .backends import staging
from .backends.cpu_parallel import PARALLEL_MIN
from .calibrate import (CPU_SAMPLE_BYTES, SAMPLE_BYTES, best_seconds, cheap_numbers, remember,
                        slope)
from .interop import inspect
from .measure import device_seconds, wall_seconds
from .ops import as_monoid
from .planner import Tuning, auto_variant, default_items, resolve_auto
from .planner import recorded_tuning as lookup
from .prepared import prepare
from .tuned import (Choice, Key, choices, device_label, host_model, key_for, op_kind, path,
                    reset, save_host_model, show)

__all__ = ["Key", "Choice", "tune", "calibrate", "show", "reset", "choices", "lookup", "path",
           "CANDIDATES", "device_seconds", "host_model", "save_host_model", "op_kind",
           "device_label", "key_for"]


#: What :func:`tune` tries besides the built-in rule's own choice
#: (:func:`pyreduce.planner.auto_variant`): (variant, block size, items per thread
#: as a multiple of the 16-byte default, grid size in waves of resident blocks;
#: None: the planner's grid). Small on purpose: each candidate is a compile.
CANDIDATES = (
    ("warp_shuffle", 256, 1, None),
    ("warp_shuffle", 256, 2, None),
    ("warp_shuffle", 512, 2, 16),
    ("warp_shuffle_x2", 256, 2, None),
    ("last_block", 256, 2, None),
    ("last_block", 512, 2, 1),
    ("last_block", 512, 2, 4),
    ("last_block", 512, 4, 32),
)


def tune(x, op, *, dtype=None, backend: str = "auto", candidates=CANDIDATES, reps: int = 10,
         timer=None, save: bool = True) -> Choice:
    """Time ``reduce(x, op, dtype=dtype)`` with each candidate configuration, record
    the fastest for this GPU, dtypes, op kind and the size class of ``x``, and
    return it. ``x`` should be a device array (the input's transfer is not the
    kernel's cost). Every candidate's result is checked against the default's;
    one that disagrees (beyond rounding, for floats) is an error, not a choice."""
    info = inspect(x)
    monoid = as_monoid(op, info.dtype, acc_dtype=dtype)
    be = backends.get(backend, on_device=info.on_device)
    if be.name == "cpu":
        raise ValueError("tuning needs a GPU backend: the cpu backend has no kernels to tune")
    if info.size == 0:
        raise ValueError("cannot tune on an empty input")
    timer = timer or (device_seconds if be.name == "cuda" else wall_seconds)
    device = be.device(None)
    first = prepare(info, monoid, None, backend, Tuning(), None)
    base = first.run()
    # the built-in rule's own choice first: a recorded choice is never one the
    # rule beat in the same measurement. Its layout depends on the alignment of
    # the flat view the call reduces (a gathered N-D input is a new, aligned
    # buffer; a host input's are the staging buffers)
    align = be.alignment(first.flat) if first.flat is not None else 16
    auto = resolve_auto(auto_variant(info.dtype, monoid.dtype, info.size, device,
                                     monoid.commutative), info.dtype, align, device, Tuning())
    block = auto.block_on(device, device.warp)
    tiles = -(-info.size // (block * auto.items))
    tunings = [Tuning(variant=auto.variant, block_size=block, items_per_thread=auto.items,
                      max_blocks=auto.max_blocks(device, block, tiles))]
    for variant, block, factor, waves in candidates:
        items = min(16, default_items(np.dtype(info.dtype)) * factor)
        block = max(block, device.warp)
        max_blocks = None if waves is None else waves * device.max_grid(block)
        tunings.append(Tuning(variant=variant, block_size=block, items_per_thread=items,
                              max_blocks=max_blocks))
    best = None
    for tuning in dict.fromkeys(tunings):
        variant, block, items, max_blocks = (tuning.variant, tuning.block_size,
                                              tuning.items_per_thread, tuning.max_blocks)
        got = prepare(info, monoid, None, backend, tuning, None).run()
        if not _agrees(got, base, monoid.dtype, info.size):
            raise AssertionError(f"{variant} b{block} i{items} gave {got!r}, the default "
                                 f"configuration {base!r}")
        seconds = timer(lambda: prepare(info, monoid, None, backend, tuning, None).run(  # noqa: B023  (timed in this iteration)
            device_result=True), reps)
        gbps = info.size * info.dtype.itemsize / seconds / 1e9
        if best is None or gbps > best.GBps:
            best = Choice(variant, block, items, max_blocks, gbps,
                          datetime.date.today().isoformat())
    if save:
        tuned.record(tuned.key_for(device, info.dtype, monoid.dtype, monoid.key, info.size),
                     best)
    return best


def _agrees(a, b, dtype: np.dtype, n: int) -> bool:
    if dtype.kind != "f":
        return a == b or (a != a and b != b)
    a, b = float(a), float(b)
    if a != a or b != b:
        return a != a and b != b
    return abs(a - b) <= 4 * np.finfo(dtype).eps * n * max(abs(a), abs(b), 1.0)


def _user_add(a, b):
    return a + b


def calibrate(backend=None, save: bool = True) -> costmodel.HostModel:
    """Measure every number of the host-input cost model (:mod:`pyreduce.calibrate`)
    on this machine (compiling a GPU kernel and a cpu fold for it: seconds),
    record it unless ``save`` is False, and return it."""
    be = backend or backends.get("cuda")
    numbers = cheap_numbers(be)
    src = np.random.default_rng(0).random(SAMPLE_BYTES // 8)
    sample = np.random.default_rng(0).random(CPU_SAMPLE_BYTES // 8)
    cpu = backends.get("cpu")
    user = as_monoid(_user_add, src.dtype)
    serial = src[: PARALLEL_MIN]  # one piece: the fold on one thread
    numbers["cpu_user_ns"] = slope(lambda k: best_seconds(lambda: cpu.reduce(sample[:k], user)),
                                   sample.size) * 1e9
    numbers["cpu_user_serial_ns"] = (best_seconds(lambda: cpu.reduce(serial, user))
                                     / serial.size * 1e9)
    numbers.update(_gpu_numbers(be, src))
    found = costmodel.HostModel.from_dict(
        dict(numbers, source=f"measured {datetime.date.today().isoformat()}"))
    if save:
        remember(be, found)
    return found


def _gpu_numbers(be, src: np.ndarray) -> dict:
    """The GPU path's fixed cost (a streamed sum of a few elements) and the
    device's reduction rate (a sum of a device array)."""
    add = as_monoid("add", src.dtype)
    small = src[: (staging.DIRECT_BYTES // 8) + 1]  # just past the direct copies
    call = prepare(inspect(small), add, None, be.name, Tuning(), None)
    fixed = best_seconds(call.run, 20)
    device = be.gpu.to_device(src)
    on_device = prepare(inspect(device), add, None, be.name, Tuning(), None)
    reduce_s = device_seconds(lambda: on_device.run(device_result=True), 20, 3)
    return {"gpu_call_us": fixed * 1e6, "gpu_GBps": src.nbytes / reduce_s / 1e9}
