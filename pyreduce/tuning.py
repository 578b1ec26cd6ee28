"""The autotuner: measured kernel choices per GPU, kept on disk.

The planner's built-in choices are good on the GPUs they were measured on; a
tuned choice is better on the GPU in hand. :func:`tune` times a few candidate
configurations (variant, block size, items per thread, grid size) of one
reduction on the device and records the fastest under a :class:`Key`: the GPU
(name and compute capability), the input and accumulator dtypes, the op kind
(each built-in op by name, every user op as ``"user"``) and the size class
(``floor(log2 n)``). ``variant="auto"`` calls with no other tuning argument then
use it, in this process and in every later one: the choices live in a JSON file
(:func:`path`: ``$PYREDUCE_TUNING_FILE``, else ``$XDG_CACHE_HOME/pyreduce/`` or
``~/.cache/pyreduce/``, ``tuning.json``). :func:`show` lists them and
:func:`reset` forgets them; ``python -m pyreduce tune`` tunes the common cases.
The same file keeps, per machine, the numbers of the cost model that sends a
host array to the GPU or the cpu backend (:func:`host_model`,
:mod:`pyreduce.costmodel`).

Nothing is tuned behind the user's back: timing candidates compiles a kernel for
each, seconds of work that a first call should not pay.

>>> import pyreduce.tuning as t
>>> t.Key("NVIDIA H100 80GB HBM3 sm_90", "float32", "float32", "add", 28).text
'NVIDIA H100 80GB HBM3 sm_90|float32|float32|add|2**28'
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import threading
import time

import numpy as np

__all__ = ["Key", "Choice", "tune", "show", "reset", "choices", "lookup", "path",
           "CANDIDATES", "device_seconds", "host_model", "save_host_model"]


@dataclasses.dataclass(frozen=True)
class Key:
    device: str
    in_dtype: str
    acc_dtype: str
    op: str  # a built-in op's name, or "user"
    size_class: int  # floor(log2 n)

    @property
    def text(self) -> str:
        return "|".join((self.device, self.in_dtype, self.acc_dtype, self.op,
                         f"2**{self.size_class}"))

    @classmethod
    def parse(cls, text: str) -> "Key":
        device, in_dt, acc_dt, op, size = text.split("|")
        return cls(device, in_dt, acc_dt, op, int(size[3:]))


@dataclasses.dataclass(frozen=True)
class Choice:
    """A measured configuration: the ``reduce`` tuning arguments it stands for."""

    variant: str
    block_size: int
    items_per_thread: int
    max_blocks: int | None
    GBps: float
    tuned_on: str

    def tuning(self):
        from .planner import Tuning

        return Tuning(self.variant, self.block_size, self.items_per_thread, None,
                      self.max_blocks)


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


def path() -> str:
    """Where the choices are kept."""
    explicit = os.environ.get("PYREDUCE_TUNING_FILE")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pyreduce", "tuning.json")


_lock = threading.Lock()
_loaded: dict | None = None  # key text -> Choice, read once per process
_loaded_from: str | None = None


def choices() -> dict:
    """Every recorded choice: ``{Key: Choice}``."""
    return {Key.parse(k): c for k, c in _table().items()}


def _table() -> dict:
    global _loaded, _loaded_from, _hosts
    where = path()
    if _loaded is None or _loaded_from != where:
        with _lock:
            table, hosts = {}, {}
            try:
                raw = _read(where)
                for text, value in raw.get("choices", {}).items():
                    table[text] = Choice(**value)
                hosts = {str(k): dict(v) for k, v in raw.get("host", {}).items()}
            except FileNotFoundError:
                pass
            except (ValueError, TypeError, KeyError, AttributeError) as exc:  # damaged: ignored
                import warnings

                warnings.warn(f"pyreduce: ignoring the unreadable tuning file {where}: {exc}",
                              stacklevel=3)
            _loaded, _loaded_from, _hosts = table, where, hosts
    return _loaded


def _read(where: str) -> dict:
    with open(where) as f:
        return json.load(f)


def _save(table: dict | None = None, hosts: dict | None = None) -> None:
    """Write the choices and the host models, each as given or as read now from
    the file (another process may have added to it since this one read it)."""
    where = path()
    try:
        raw = _read(where)
    except (OSError, ValueError):
        raw = {}
    choices_now = raw.get("choices", {}) if table is None else {
        k: dataclasses.asdict(c) for k, c in sorted(table.items())}
    hosts_now = raw.get("host", {}) if hosts is None else hosts
    os.makedirs(os.path.dirname(where) or ".", exist_ok=True)
    tmp = f"{where}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"version": 1, "choices": choices_now, "host": hosts_now}, f, indent=1)
    os.replace(tmp, where)  # readers never see half a file


_hosts: dict = {}  # machine -> the numbers of pyreduce.costmodel.HostModel


def host_model(machine: str) -> dict | None:
    """The host-input cost model's numbers recorded for ``machine``
    (:mod:`pyreduce.costmodel`), or None."""
    _table()
    found = _hosts.get(machine)
    return None if found is None else dict(found)


def save_host_model(machine: str, numbers: dict) -> None:
    """Record the cost model's numbers for ``machine``, beside the choices."""
    global _loaded
    with _lock:
        try:
            hosts = dict(_read(path()).get("host", {}))
        except (OSError, ValueError, AttributeError):
            hosts = {}
        hosts[machine] = dict(numbers)
        _save(hosts=hosts)
        _loaded = None


def op_kind(op_key) -> str:
    """``op_key`` of a Monoid as a tuning op kind."""
    return op_key[1] if isinstance(op_key, tuple) and op_key[0] == "builtin" else "user"


def device_label(device) -> str:
    """A GPU as tuning keys name it: its name and compute capability."""
    if len(device.key) > 2:  # ("cuda", id, compute capability)
        major, minor = tuple(device.key[2])[:2]
        return f"{device.name} sm_{major}{minor}"
    return device.name


def key_for(device, in_dtype: np.dtype, acc_dtype: np.dtype, op_key, n: int) -> Key:
    return Key(device_label(device), np.dtype(in_dtype).name, np.dtype(acc_dtype).name,
               op_kind(op_key), int(math.log2(n)) if n >= 1 else 0)


def lookup(device, in_dtype, acc_dtype, op_key, n: int):
    """The tuned :class:`~pyreduce.planner.Tuning` for a call, or None."""
    table = _table()
    if not table:
        return None
    found = table.get(key_for(device, in_dtype, acc_dtype, op_key, n).text)
    return None if found is None else found.tuning()


def reset() -> None:
    """Forget every choice and host-input cost model (the file is removed)."""
    global _loaded
    with _lock:
        try:
            os.remove(path())
        except FileNotFoundError:
            pass
        _loaded = None
    _forget_plans()


def _forget_plans() -> None:
    from .planner import clear_plans

    clear_plans()  # plans made with the old choices must not be reused


def show() -> str:
    """The choices as a table, one line each, then the host-input cost models."""
    rows = sorted(choices().items(), key=lambda kv: kv[0].text)
    lines = [f"tuned choices ({path()}):" if rows else f"no tuned choices ({path()})"]
    for key, c in rows:
        grid = "" if c.max_blocks is None else f", at most {c.max_blocks} blocks"
        lines.append(f"  {key.text}: {c.variant} b{c.block_size} i{c.items_per_thread}{grid}"
                     f"  ({c.GBps:.0f} GB/s, {c.tuned_on})")
    for machine, numbers in sorted(_hosts.items()):
        lines.append(f"host inputs on {machine}: " + ", ".join(
            f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
            for k, v in numbers.items()))
    return "\n".join(lines)


def device_seconds(fn, reps: int = 20, batches: int = 1, hold: bool = True) -> float:
    """Seconds per call of ``fn`` on the device: CUDA events around ``reps``
    back-to-back calls after a warm-up call, the median over ``batches``.

    With ``hold``, the GPU is held by a kernel that sleeps while the host queues
    the calls (as NVIDIA's nvbench does), so that the events time the GPU's work
    and not the pace at which the host issues it: a reduction of 2**24 float32
    takes about as long on an H100 as a Python call takes to issue it. A batch
    whose first event was reached before the last call was queued is timed once
    more with a hold four times as long, unless its first call outlasted the
    hold. A ``fn`` that waits for the GPU itself cannot be held: pass
    ``hold=False`` for one."""
    from numba import cuda

    fn()
    cuda.synchronize()
    t0 = time.perf_counter()
    fn()  # a warm call's host time sizes the hold
    issue = time.perf_counter() - t0
    cuda.synchronize()
    sleeps = int(2 * reps * issue * 1e6) + 100  # microseconds
    times = []
    for _ in range(batches):
        for _ in range(2 if hold else 1):
            start, stop = cuda.event(), cuda.event()
            if hold:
                _hold_kernel()[1, 1](sleeps)
            start.record()
            t0 = time.perf_counter()
            fn()
            waits = time.perf_counter() - t0 > sleeps * 1e-6  # fn synchronizes
            for _ in range(reps - 1):
                fn()
            stop.record()
            early = start.query()  # the GPU was already past the hold
            stop.synchronize()
            if not early or waits:
                break
            sleeps *= 4
        times.append(cuda.event_elapsed_time(start, stop) * 1e-3 / reps)
    return float(np.median(times))


_HOLD = None


def _hold_kernel():
    """A one-thread kernel that sleeps about one microsecond per count."""
    global _HOLD
    if _HOLD is None:
        from numba import cuda, uint32

        one_us = uint32(1000)

        @cuda.jit("void(int64)")
        def hold(count):
            for _ in range(count):
                cuda.nanosleep(one_us)

        _HOLD = hold
    return _HOLD


def _wall_timer(fn, reps: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def tune(x, op, *, dtype=None, backend: str = "auto", candidates=CANDIDATES, reps: int = 10,
         timer=None, save: bool = True) -> Choice:
    """Time ``reduce(x, op, dtype=dtype)`` with each candidate configuration, record
    the fastest for this GPU, dtypes, op kind and the size class of ``x``, and
    return it. ``x`` should be a device array (the input's transfer is not the
    kernel's cost). Every candidate's result is checked against the default's;
    one that disagrees (beyond rounding, for floats) is an error, not a choice."""
    from . import backends
    from .api import prepare
    from .interop import inspect
    from .ops import as_monoid
    from .planner import Tuning, auto_variant, default_items

    info = inspect(x)
    monoid = as_monoid(op, info.dtype, acc_dtype=dtype)
    be = backends.get(backend, on_device=info.on_device)
    if be.name == "cpu":
        raise ValueError("tuning needs a GPU backend: the cpu backend has no kernels to tune")
    if info.size == 0:
        raise ValueError("cannot tune on an empty input")
    timer = timer or (device_seconds if be.name == "cuda" else _wall_timer)
    device = be.device(None)
    base = prepare(info, monoid, None, backend, Tuning(), None).run()
    # the built-in rule's own choice first: a recorded choice is never one the
    # rule beat in the same measurement
    auto = auto_variant(info.dtype, monoid.dtype, info.size, device)
    block = auto.block_on(device, device.warp)
    tiles = -(-info.size // (block * auto.items))
    tunings = [Tuning(auto.variant, block, auto.items, None,
                      auto.max_blocks(device, block, tiles))]
    for variant, block, factor, waves in candidates:
        items = min(16, default_items(np.dtype(info.dtype)) * factor)
        block = max(block, device.warp)
        max_blocks = None if waves is None else waves * device.max_grid(block)
        tunings.append(Tuning(variant, block, items, None, max_blocks))
    best = None
    for tuning in dict.fromkeys(tunings):
        variant, block, items, max_blocks = (tuning.variant, tuning.block_size,
                                              tuning.items_per_thread, tuning.max_blocks)
        got = prepare(info, monoid, None, backend, tuning, None).run()
        if not _agrees(got, base, monoid.dtype, info.size):
            raise AssertionError(f"{variant} b{block} i{items} gave {got!r}, the default "
                                 f"configuration {base!r}")
        seconds = timer(lambda: prepare(info, monoid, None, backend, tuning, None).run(
            device_result=True), reps)
        gbps = info.size * info.dtype.itemsize / seconds / 1e9
        if best is None or gbps > best.GBps:
            best = Choice(variant, block, items, max_blocks, gbps,
                          datetime.date.today().isoformat())
    if save:
        table = dict(_table())  # (not under _lock: _table takes it to load)
        table[key_for(device, info.dtype, monoid.dtype, monoid.key, info.size).text] = best
        _save(table=table)
        global _loaded
        _loaded = None
        _forget_plans()
    return best


def _agrees(a, b, dtype: np.dtype, n: int) -> bool:
    if dtype.kind != "f":
        return a == b or (a != a and b != b)
    a, b = float(a), float(b)
    if a != a or b != b:
        return a != a and b != b
    return abs(a - b) <= 4 * np.finfo(dtype).eps * n * max(abs(a), abs(b), 1.0)
