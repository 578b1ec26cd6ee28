"""The tuning store: measured kernel choices and host-input cost models, per
machine, kept on disk.

A recorded :class:`Choice` (variant, block size, items per thread, grid size)
stands under a :class:`Key`: the GPU (name and compute capability), the input
and accumulator dtypes, the op kind (each built-in op by name, every user op as
``"user"``) and the size class (``floor(log2 n)``). The planner reads it
(:func:`lookup`) for calls without a tuning (no ``variant=`` or ``tuning=``); the
tuner (:func:`pyreduce.tuning.tune`) writes it. The choices live in a JSON file
(:func:`path`: ``$PYREDUCE_TUNING_FILE``, else ``$XDG_CACHE_HOME/pyreduce/`` or
``~/.cache/pyreduce/``, ``tuning.json``). The same file keeps, per machine, the
numbers of the cost model that sends a host array to the GPU or the cpu backend
(:func:`host_model`, :mod:`pyreduce.costmodel`).

>>> Key("NVIDIA H100 80GB HBM3 sm_90", "float32", "float32", "add", 28).text
'NVIDIA H100 80GB HBM3 sm_90|float32|float32|add|2**28'
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading

import numpy as np

__all__ = ["Key", "Choice", "show", "reset", "choices", "lookup", "record", "path",
           "host_model", "save_host_model", "on_change"]


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


def lookup(device, in_dtype, acc_dtype, op_key, n: int) -> Choice | None:
    """The recorded :class:`Choice` for a call, or None."""
    table = _table()
    if not table:
        return None
    return table.get(key_for(device, in_dtype, acc_dtype, op_key, n).text)


def record(key: Key, choice: Choice) -> None:
    """Record ``choice`` under ``key`` (replacing any), for this process and later ones."""
    global _loaded
    table = dict(_table())  # (not under _lock: _table takes it to load)
    table[key.text] = choice
    _save(table=table)
    _loaded = None
    _changed()


def reset() -> None:
    """Forget every choice and host-input cost model (the file is removed)."""
    global _loaded
    with _lock:
        try:
            os.remove(path())
        except FileNotFoundError:
            pass
        _loaded = None
    _changed()


_listeners: list = []


def on_change(fn) -> None:
    """Call ``fn()`` whenever choices are recorded or forgotten: the planner
    forgets the plans it made with the old ones."""
    _listeners.append(fn)


def _changed() -> None:
    for fn in _listeners:
        fn()


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
