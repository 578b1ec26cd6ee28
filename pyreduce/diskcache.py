"""The kernel cache on disk: compiled code kept between processes.

What is stored is opaque bytes (a cubin, a Numba compile result) with a little
metadata, under a *key*: a tuple of everything that changes the machine code
(the generated source, the operator's code key, argument types, the GPU, the
versions of the compilers and of pyreduce itself). The key's canonical text
(:func:`canonical`) is hashed to name the file; the file carries the full text
too, so a hash collision or a file written for another key is a miss.

Safety, in the manner of CuPy's kernel cache:

* each file begins with a digest of the rest of it: a truncated or corrupt file
  is a miss (and is rebuilt), never loaded;
* a file is written to a temporary name in the same directory and moved into
  place with ``os.replace``, so readers see a whole file or none, and several
  processes may fill the cache at once;
* the cache is bounded (:func:`limit`): after a write the least recently used
  files go first (a hit touches its file);
* a directory that cannot be written (read-only, full, not creatable) turns
  writing off for the process with one :class:`CacheWarning`; reductions go on,
  compiling as they would without a cache.

Settings, read from the environment at each use: ``PYREDUCE_CACHE_DIR`` (where;
by default the platform's per-user cache directory, :func:`default_directory`),
``PYREDUCE_CACHE=0`` (off), ``PYREDUCE_CACHE_SIZE`` (the bound, in bytes or
with a ``K``/``M``/``G`` suffix; 1 GiB by default).

Nothing here imports Numba or CUDA: a process that finds its kernels here need
not load a compiler (:mod:`pyreduce.backends.cubins`, :mod:`pyreduce.njitcache`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from ._version import __version__
from .cache import CacheInfo as _MemoryInfo

__all__ = [
    "CacheWarning", "Unkeyable", "canonical", "op_key", "digest", "code_version",
    "directory", "default_directory", "enabled", "limit", "load", "store", "clear",
    "disk_usage", "stats", "reset", "reset_stats", "report_compile", "Entry", "CacheInfo", "info",
]

log = logging.getLogger("pyreduce")

#: The files' layout version: a new one lives beside the old, never reads it.
FORMAT = "v1"
_MAGIC = b"PYREDUCE\x00CACHE\x01\n"
_DIGEST = hashlib.sha256
_DIGEST_BYTES = 32
_SUFFIX = ".bin"
_TMP = ".tmp-"
#: A temporary file this old was left by a writer that died; eviction removes it.
_STALE_TMP_SECONDS = 3600.0
DEFAULT_LIMIT = 1 << 30


class CacheWarning(UserWarning):
    """Issued once per process when the kernel cache directory cannot be written."""


class Unkeyable(ValueError):
    """A key holds something with no stable text across processes (an object
    known only by its identity): such code is not cached on disk."""


# --- where, whether, how much


def default_directory() -> Path:
    """The platform's per-user cache directory for pyreduce:
    ``$XDG_CACHE_HOME/pyreduce`` or ``~/.cache/pyreduce`` on Linux,
    ``~/Library/Caches/pyreduce`` on macOS, ``%LOCALAPPDATA%\\pyreduce\\Cache`` on
    Windows."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
        return Path(base) / "pyreduce" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "pyreduce"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pyreduce"


def directory() -> Path:
    """The cache directory: ``PYREDUCE_CACHE_DIR`` if set, else
    :func:`default_directory`."""
    given = os.environ.get("PYREDUCE_CACHE_DIR")
    return Path(given).expanduser() if given else default_directory()


def enabled() -> bool:
    """False when ``PYREDUCE_CACHE`` is ``0`` (or ``false``, ``no``, ``off``)."""
    return os.environ.get("PYREDUCE_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
          "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
          "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes from ``"1073741824"``, ``"500M"``, ``"2GiB"``, ``"1.5g"``
    (powers of 1024); ValueError naming the text otherwise."""
    raw = text.strip().lower()
    number = raw.rstrip("kmgtib")
    unit = raw[len(number):]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not value >= 0:
        raise ValueError(f"PYREDUCE_CACHE_SIZE={text!r} is not a size (bytes, or a number "
                         f"with K, M, G or T)")
    return int(value * _UNITS[unit])


def limit() -> int:
    """The cache's bound in bytes (``PYREDUCE_CACHE_SIZE``; 1 GiB by default). A
    value that is not a size is warned about once and the default used."""
    text = os.environ.get("PYREDUCE_CACHE_SIZE")
    if not text:
        return DEFAULT_LIMIT
    try:
        return parse_size(text)
    except ValueError as exc:
        _warn_once("size", f"{exc}; using {DEFAULT_LIMIT >> 30} GiB")
        return DEFAULT_LIMIT


# --- keys


def canonical(value) -> str:
    """A text for ``value`` that is the same in every process and differs for
    different values: ints, floats (by bits), complex, str, bytes, None, bools,
    NumPy dtypes and scalars, classes defined at a module's top level (by module
    and name), tuples and lists of them, dicts, dataclasses (by type name and
    fields), and objects that name themselves across processes (``global_name()``:
    an operator's modules and module-level functions and classes). Anything else
    is :class:`Unkeyable`."""
    parts: list = []
    _canonical(value, parts)
    return "".join(parts)


def _canonical(value, out: list) -> None:
    if value is None or isinstance(value, (bool, np.bool_)):
        out.append(repr(bool(value)) if value is not None else "None")
    elif isinstance(value, (int, np.integer)):
        out.append(f"i{int(value)}")
    elif isinstance(value, (float, np.floating)):
        out.append(f"f{float(value).hex()}")
    elif isinstance(value, (complex, np.complexfloating)):
        c = complex(value)
        out.append(f"c{c.real.hex()},{c.imag.hex()}")
    elif isinstance(value, str):
        out.append(f"s{len(value)}:{value}")
    elif isinstance(value, bytes):
        out.append(f"b{len(value)}:{value.hex()}")
    elif isinstance(value, np.dtype):
        out.append(f"dtype({value.descr!r})" if value.names else f"dtype({value.str})")
    elif isinstance(value, type) and "<locals>" not in value.__qualname__:
        # a class defined at a module's top level (the op keys name the types of
        # the constants they hold: float, NoneType, numpy.float32) is the same
        # class in every process
        out.append(f"t{value.__module__}.{value.__qualname__};")
    elif isinstance(value, (tuple, list)):
        out.append("(" if isinstance(value, tuple) else "[")
        for item in value:
            _canonical(item, out)
            out.append(",")
        out.append(")" if isinstance(value, tuple) else "]")
    elif isinstance(value, dict):
        items = sorted((canonical(k), v) for k, v in value.items())
        out.append("{")
        for k, v in items:
            out.append(k)
            out.append(":")
            _canonical(v, out)
            out.append(",")
        out.append("}")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(type(value).__qualname__)
        _canonical({f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, out)
    else:
        # an object an operator reads by identity that another process imports
        # under the same name (pyreduce.opkey.Ident: a module, numpy.float64)
        named = getattr(value, "global_name", None)
        name = named() if callable(named) else None
        if name is None:
            raise Unkeyable(f"{type(value).__name__} has no stable key")
        out.append(f"g{name};")


def op_key(key) -> str:
    """The canonical text of an operator's code key (``Monoid.key``), or
    :class:`Unkeyable` where the key names a value by its identity in this
    process (``("id", ...)`` parts: an object :func:`pyreduce.ops.function_key`
    cannot describe by value), which another process cannot match."""
    _check_persistent(key)
    return canonical(key)


def _check_persistent(key) -> None:
    if isinstance(key, tuple):
        if len(key) == 2 and key[0] == "id":
            raise Unkeyable("the op refers to an object known only by its identity")
        for part in key:
            _check_persistent(part)


def digest(text: str) -> str:
    """The hex digest that names the file of a key's canonical text."""
    return _DIGEST(text.encode()).hexdigest()


_code_version = None


def code_version() -> str:
    """A digest of pyreduce's own source files (and its version): any change to
    the code that generates or launches kernels makes new keys. A file is known
    by its path, size and modification time, as Python's own bytecode cache knows
    it: reading every source instead cost each process 10-20 ms of its first call."""
    global _code_version
    if _code_version is None:
        package = Path(__file__).resolve().parent
        h = _DIGEST(__version__.encode())
        for path in sorted(package.rglob("*.py")):
            st = path.stat()
            h.update(f"{path.relative_to(package)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        _code_version = h.hexdigest()[:32]
    return _code_version


# --- statistics


_stats_lock = threading.Lock()
_stats: dict = {}


def _count(kind: str, what: str) -> None:
    with _stats_lock:
        counts = _stats.setdefault(kind, {"hits": 0, "misses": 0, "stores": 0, "rejected": 0})
        counts[what] += 1


def stats() -> dict:
    """This process's counts per kind: ``{kind: {"hits", "misses", "stores",
    "rejected"}}`` (rejected: files found but not used, corrupt or for another key;
    each is also a miss)."""
    with _stats_lock:
        return {kind: dict(counts) for kind, counts in _stats.items()}


def reset_stats() -> None:
    """Forget this process's counts."""
    with _stats_lock:
        _stats.clear()


def reset() -> None:
    """Forget this process's counts, warnings given and unwritable directories
    (a directory made writable is tried again)."""
    global _announced
    reset_stats()
    with _warn_lock:
        _warned.clear()
        _unwritable.clear()
        _announced = False


# --- files


@dataclasses.dataclass(frozen=True)
class Entry:
    """A stored entry: its ``payload`` bytes and the ``meta`` dict stored with it."""

    payload: bytes
    meta: dict


def _kind_dir(root: Path, kind: str) -> Path:
    return root / FORMAT / kind


def path_of(kind: str, key_text: str, root: Path | None = None) -> Path:
    """Where the entry of a key's canonical text lives."""
    return _kind_dir(root or directory(), kind) / (digest(key_text) + _SUFFIX)


def encode(key_text: str, payload: bytes, meta: dict) -> bytes:
    """The bytes of an entry file: the magic, a digest of the body, the body (a
    length-prefixed JSON header with the key and ``meta``, then the payload)."""
    header = json.dumps({"key": key_text, "meta": meta}, sort_keys=True).encode()
    body = len(header).to_bytes(8, "little") + header + payload
    return _MAGIC + _DIGEST(body).digest() + body


def decode(data: bytes, key_text: str) -> Entry | None:
    """The entry in ``data`` if it is whole, intact and for ``key_text``, else None."""
    start = len(_MAGIC) + _DIGEST_BYTES
    if len(data) < start + 8 or not data.startswith(_MAGIC):
        return None
    body = data[start:]
    if _DIGEST(body).digest() != data[len(_MAGIC):start]:
        return None
    size = int.from_bytes(body[:8], "little")
    try:
        header = json.loads(body[8:8 + size].decode())
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(header, dict) or header.get("key") != key_text:
        return None
    return Entry(bytes(body[8 + size:]), header.get("meta") or {})


def load(kind: str, key) -> Entry | None:
    """The entry stored for ``key`` (a tuple, :func:`canonical`), or None: cache
    off, no file, or a file that is not a whole entry for this key."""
    if not enabled():
        return None
    text = key if isinstance(key, str) else canonical(key)
    path = path_of(kind, text)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:  # absent, unreadable, or removed by another process's eviction
        _count(kind, "misses")
        return None
    entry = decode(data, text)
    if entry is None:
        log.debug("pyreduce cache: %s is not a valid entry for its key; rebuilding", path)
        _count(kind, "rejected")
        _count(kind, "misses")
        return None
    try:
        os.utime(path)  # recently used: evicted last
    except OSError:
        pass
    _count(kind, "hits")
    return entry


_unwritable: set = set()  # directories this process failed to write


def store(kind: str, key, payload: bytes, meta: dict | None = None) -> bool:
    """Write an entry for ``key``; True if it was written. Never raises for a
    directory that cannot be written: the first failure warns
    (:class:`CacheWarning`) and turns writing off for the process."""
    root = directory()
    if not enabled() or root in _unwritable:
        return False
    text = key if isinstance(key, str) else canonical(key)
    path = path_of(kind, text, root)
    if not write_file(path, encode(text, payload, dict(meta or {})), root):
        return False
    _count(kind, "stores")
    evict(root, limit())
    return True


def write_file(path: Path, data: bytes, root: Path | None = None) -> bool:
    """Write ``data`` to ``path`` atomically (a temporary file in the same
    directory, then ``os.replace``); False, with the one warning of
    :func:`store`, where the cache directory ``root`` cannot be written."""
    root = root or directory()
    if root in _unwritable:
        return False
    try:
        _write_atomic(path, data)
    except OSError as exc:
        _unwritable.add(root)
        _warn_once("write", f"pyreduce: cannot write the kernel cache in {root} ({exc}); "
                            f"kernels are compiled in each process (set PYREDUCE_CACHE_DIR to a "
                            f"writable directory, or PYREDUCE_CACHE=0 to silence this)")
        return False
    return True


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_TMP, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _files(root: Path):
    """``(path, stat)`` of every file in the cache's kind directories."""
    base = root / FORMAT
    try:
        kinds = list(os.scandir(base))
    except OSError:
        return
    for kind in kinds:
        if not kind.is_dir(follow_symlinks=False):
            continue
        try:
            entries = list(os.scandir(kind.path))
        except OSError:
            continue
        for e in entries:
            if e.is_file(follow_symlinks=False):
                try:
                    yield Path(e.path), e.stat(follow_symlinks=False)
                except OSError:  # removed meanwhile
                    continue


def _is_entry(path: Path) -> bool:
    return path.suffix == _SUFFIX and not path.name.startswith(_TMP)


def evict(root: Path | None = None, bound: int | None = None) -> int:
    """Remove the least recently used entries until the cache holds at most
    ``bound`` bytes (default :func:`limit`), and temporary files left by writers
    that died; the number of files removed. Files another process removes
    meanwhile are skipped."""
    root = root or directory()
    bound = limit() if bound is None else bound
    now = time.time()
    entries, total, removed = [], 0, 0
    for path, st in _files(root):
        if _is_entry(path):
            entries.append((st.st_mtime, path, st.st_size))
            total += st.st_size
        elif path.name.startswith(_TMP) and now - st.st_mtime > _STALE_TMP_SECONDS:
            removed += _remove(path)
    if total <= bound:
        return removed
    for _, path, size in sorted(entries):
        if total <= bound:
            break
        removed += _remove(path)
        total -= size
    return removed


def _remove(path: Path) -> int:
    try:
        path.unlink()
        return 1
    except OSError:
        return 0


def disk_usage(root: Path | None = None) -> dict:
    """``{kind: (entries, bytes)}`` of the cache directory."""
    found: dict = {}
    for path, st in _files(root or directory()):
        if _is_entry(path):
            n, b = found.get(path.parent.name, (0, 0))
            found[path.parent.name] = (n + 1, b + st.st_size)
    return found


def clear(root: Path | None = None) -> int:
    """Remove every cache entry (and temporary file) under the cache directory;
    the number of files removed. Only pyreduce's own files are touched, so a
    ``PYREDUCE_CACHE_DIR`` shared with other things is safe to clear."""
    root = root or directory()
    removed = sum(_remove(path) for path, _ in _files(root)
                  if _is_entry(path) or path.name.startswith(_TMP))
    for name in ("toolchain.json",):
        removed += _remove(root / FORMAT / name)
    return removed


# --- what pyreduce.cache_info() reports


@dataclasses.dataclass(frozen=True)
class CacheInfo(_MemoryInfo):
    """The kernel caches: in memory (``hits``, ``builds``, ``size``: this process's
    built kernels and compiled operators) and on disk (``disk_*``: the directory,
    whether it is used, its bound, the entries and bytes it holds, and this
    process's hits, misses and stores there)."""

    disk_dir: str = ""
    disk_enabled: bool = False
    disk_limit: int = 0
    disk_entries: int = 0
    disk_bytes: int = 0
    disk_hits: int = 0
    disk_misses: int = 0
    disk_stores: int = 0


def info(memory) -> CacheInfo:
    """:class:`CacheInfo` of the memory cache's ``memory`` (a
    :class:`pyreduce.cache.CacheInfo`) and of the disk cache."""
    usage = disk_usage()
    counts = [0, 0, 0]
    for kind in stats().values():
        counts[0] += kind["hits"]
        counts[1] += kind["misses"]
        counts[2] += kind["stores"]
    return CacheInfo(
        **{f.name: getattr(memory, f.name) for f in dataclasses.fields(memory)},
        disk_dir=str(directory()), disk_enabled=enabled(), disk_limit=limit(),
        disk_entries=sum(n for n, _ in usage.values()),
        disk_bytes=sum(b for _, b in usage.values()),
        disk_hits=counts[0], disk_misses=counts[1], disk_stores=counts[2],
    )


# --- telling the user


_warned: set = set()
_warn_lock = threading.Lock()


def _warn_once(what: str, message: str) -> None:
    with _warn_lock:
        if what in _warned:
            return
        _warned.add(what)
    log.warning(message)
    warnings.warn(message, CacheWarning, stacklevel=3)


#: A compile longer than this many seconds is announced once per process.
SLOW_COMPILE_SECONDS = 1.0
_announced = False


def report_compile(what: str, seconds: float) -> None:
    """Record that compiling ``what`` took ``seconds``. A slow one (over
    :data:`SLOW_COMPILE_SECONDS`) is logged on the ``pyreduce`` logger, and the
    first in a process also gets one line on stderr (unless ``PYREDUCE_QUIET=1``),
    so a user knows why a first call is slow and that later processes reuse it."""
    global _announced
    log.debug("pyreduce: compiled %s in %.2f s", what, seconds)
    if seconds <= SLOW_COMPILE_SECONDS:
        return
    if enabled():
        why = (f"compiled code is kept in {directory()} for later processes; "
               f"`python -m pyreduce warmup` builds the common kernels ahead of time")
    else:
        why = "the disk cache is off (PYREDUCE_CACHE=0), so every process compiles"
    message = f"pyreduce: compiling {what} took {seconds:.1f} s ({why})"
    log.info(message)
    with _warn_lock:
        first, _announced = not _announced, True
    if first and os.environ.get("PYREDUCE_QUIET", "0").strip() in ("", "0"):
        print(message, file=sys.stderr, flush=True)
