"""The disk cache of compiled code (:mod:`pyreduce.diskcache`), its users
(:mod:`pyreduce.njitcache`: the cpu folds, the op checks and the compiled launch;
:mod:`pyreduce.backends.cubins`: GPU kernel images), ``warmup``, ``cache_info``
and the ``cache`` command.

The store holds any bytes, so its safety (keys, digests, atomic writes,
eviction, concurrent processes, damaged files, unwritable directories) is tested
here without a GPU; loading a cubin and launching it is tested by the ``gpu``
tests at the end (``NUMBA_ENABLE_CUDASIM=0`` on a GPU machine).
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import io
import json
import os
import subprocess
import sys
import textwrap
import time
import types
import warnings

import numpy as np
import pytest

import pyreduce
from pyreduce import diskcache, njitcache
from pyreduce.ops import as_monoid
from pyreduce.spec import KernelSpec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """An empty cache directory of the test's own, switched on, with fresh counts
    and an empty memory cache (as in a new process)."""
    path = tmp_path / "cache"
    monkeypatch.setenv("PYREDUCE_CACHE_DIR", str(path))
    for name in ("PYREDUCE_CACHE", "PYREDUCE_CACHE_SIZE"):
        monkeypatch.delenv(name, raising=False)
    pyreduce.cache_clear()
    diskcache.reset()
    yield path
    diskcache.reset()


def entries(root, kind=None):
    base = root / diskcache.FORMAT
    found = sorted(base.glob(f"{kind or '*'}/*")) if base.exists() else []
    return [p for p in found if p.is_file()]


def counts(kind):
    return diskcache.stats().get(kind, {"hits": 0, "misses": 0, "stores": 0, "rejected": 0})


def run_python(code: str, env: dict, *args: str, timeout: int = 600) -> str:
    """``code`` in a fresh interpreter with this checkout first on the path, given
    ``args``; its stdout (a failure shows stderr)."""
    full = dict(os.environ, PYREDUCE_QUIET="1", **env)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=full,
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


# --------------------------------------------------------------------------
# Keys


def test_canonical_tells_apart_what_compiles_apart():
    values = [
        0, 1, True, False, None, 0.0, -0.0, 1.0, float("nan"), float("inf"), 1 + 0j, "1", b"1",
        "", b"", (), (1,), (1, 2), ((1,), 2), (1, (2,)), [1, 2], {"a": 1}, {"a": 2},
        np.dtype("f4"), np.dtype("f8"), np.dtype(">f8"), np.dtype([("a", "f4"), ("b", "i8")]),
        np.dtype([("a", "f4"), ("c", "i8")]), np.float32(1), np.int8(1),
        ("id", 5), ("fn", "f", b"\x01"), "s1:a", ("s1:a",),
    ]
    texts = [diskcache.canonical(v) for v in values]
    # NumPy scalars key by value, as their Python counterparts do (the dtype is
    # elsewhere in every key)
    assert diskcache.canonical(np.float32(1)) == diskcache.canonical(1.0)
    assert diskcache.canonical(np.int8(1)) == diskcache.canonical(1)
    assert len(set(texts)) == len(values) - 2
    assert diskcache.canonical({"b": 1, "a": 2}) == diskcache.canonical({"a": 2, "b": 1})
    spec = KernelSpec("last_block", np.dtype("f8"), np.dtype("f8"), ("builtin", "max"))
    assert diskcache.canonical(spec) != diskcache.canonical(
        dataclasses.replace(spec, block=512))


def test_canonical_refuses_what_has_no_stable_text():
    class Local:
        pass

    for value in (object(), len, lambda a: a, np.zeros(3), {1, 2}, (1, object()), Local):
        with pytest.raises(diskcache.Unkeyable):
            diskcache.canonical(value)


def test_classes_are_named_by_module_and_name():
    assert diskcache.canonical((float, type(None))) != diskcache.canonical((int, type(None)))
    assert diskcache.canonical(np.float32) != diskcache.canonical(np.float64)


def test_a_plain_lambda_has_the_same_disk_key_in_every_process():
    """A user's lambda is kept on disk: its key text (through the op key, which
    names the types of its constants) is the same in a new process."""
    code = ("import numpy as np; from pyreduce.ops import as_monoid; "
            "from pyreduce import diskcache; "
            "m = as_monoid(lambda a, b: a if a > b else b * 2.5, np.dtype('f4')); "
            "print(diskcache.digest(diskcache.op_key(m.cache_key)))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": seed},
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           ).stdout.strip() for seed in ("1", "2")}
    assert len(runs) == 1 and runs != {""}


def test_op_key_refuses_ops_known_by_identity():
    class Thing:
        pass

    thing = Thing()
    monoid = as_monoid(lambda a, b: a if thing else b, np.dtype("f8"))
    assert "Ident" in str(monoid.key)  # what the op key makes of an unknown object
    with pytest.raises(diskcache.Unkeyable):
        diskcache.op_key(monoid.key)
    assert njitcache.op_text(monoid) is None
    plain = as_monoid(lambda a, b: a + b, np.dtype("f8"))
    assert njitcache.op_text(plain) == diskcache.op_key(plain.cache_key)


_KEY_TEXT = """
import numpy as np
from pyreduce import diskcache
from pyreduce.ops import as_monoid
scale = 2.5
def outer(c):
    return lambda a, b: a + b * c
print(diskcache.op_key(as_monoid(outer(scale), np.dtype("f8")).cache_key))
print(diskcache.op_key(as_monoid(lambda a, b: a if a > b else b, np.dtype("i4")).cache_key))
print(diskcache.op_key(as_monoid("max", np.dtype("f4")).cache_key))
import math
print(diskcache.op_key(as_monoid(lambda a, b: math.hypot(a, b) + np.float64(np.sqrt(b)),
                                 np.dtype("f8")).cache_key))
from pyreduce import structured
print(diskcache.op_key(structured.moments_monoid(np.dtype("f4"), "mean").key))
"""


def test_op_keys_are_the_same_in_every_process():
    # string hashing is randomised per process; the keys must not depend on it
    first = run_python(_KEY_TEXT, {"PYTHONHASHSEED": "1"})
    second = run_python(_KEY_TEXT, {"PYTHONHASHSEED": "2"})
    assert first == second
    assert len(set(first.splitlines())) == 5


def test_modules_and_their_functions_and_classes_are_named_across_processes():
    """An operator reading ``np.float64``, ``np.sqrt`` or ``math.hypot`` (the
    structured reductions' element maps do) is kept on disk: a module by its
    name (what is read from it is keyed by value), NumPy's and the standard
    library's classes and functions by name and version. Nothing else is named:
    a user's package may change under the same name and ``__version__``."""
    import math
    import types

    from pyreduce.opkey import Ident

    python = f"python {sys.version_info[:2]}"
    assert Ident(np).global_name() == "numpy"
    assert Ident(np.float64).global_name() == f"numpy:float64@numpy {np.__version__}"
    assert Ident(np.sqrt).global_name() == f"numpy:sqrt@numpy {np.__version__}"
    assert Ident(math.hypot).global_name() == f"math:hypot@{python}"

    class Local:
        pass

    versioned = types.ModuleType("a_local_package")  # a version, but not a released one
    versioned.__version__ = "0.1.0"
    versioned.Thing = type("Thing", (), {"__module__": "a_local_package"})
    shadow = types.ModuleType("random")  # a local random.py is not the standard library's
    shadow.__file__ = "/home/someone/project/random.py"
    sys.modules["a_local_package"] = versioned
    try:
        assert Ident(versioned).global_name() == "a_local_package"  # its reads keyed by value
        assert Ident(versioned.Thing).global_name() is None
    finally:
        del sys.modules["a_local_package"]
    from pyreduce.opkey import _in_standard_library

    assert not _in_standard_library(shadow) and _in_standard_library(math)
    for obj in (object(), Local, Local(), np.zeros(2)):
        assert Ident(obj).global_name() is None
        with pytest.raises(diskcache.Unkeyable):
            diskcache.canonical(Ident(obj))
    assert diskcache.canonical(Ident(np.float32)) != diskcache.canonical(Ident(np.float64))


_VERSIONED = """
import numpy as np, pyreduce, mylib
def op(a, b):
    return a + b * mylib.Mode.SCALE.value
print(float(pyreduce.reduce(np.ones(8), op, identity=0.0, backend="cpu", deterministic=True)))
"""


def test_a_local_package_with_a_version_is_not_trusted_by_it(tmp_path):
    """Regression: a package of the user's keeps its ``__version__`` while its
    code changes; an enum member it defines, compiled into the operator, must
    not come back from the disk cache after it changed."""
    results, fresh = [], []
    for scale in (2, 3):
        pkg = tmp_path / f"v{scale}" / "mylib"
        pkg.mkdir(parents=True)
        pkg.joinpath("__init__.py").write_text(
            f"__version__ = '0.1.0'\nimport enum\nclass Mode(enum.Enum):\n    SCALE = {scale}.0\n")
        env = {"PYTHONPATH": os.pathsep.join([str(pkg.parent), *sys.path]),
               "PYREDUCE_CACHE_DIR": str(tmp_path / "cache")}
        results.append(float(run_python(_VERSIONED, env).split()[-1]))
        fresh.append(float(run_python(_VERSIONED, dict(env, PYREDUCE_CACHE="0")).split()[-1]))
    assert results == fresh and fresh[0] != fresh[1]


# --------------------------------------------------------------------------
# The store


def test_store_and_load_round_trip(cache_dir):
    rng = np.random.default_rng(0)
    payloads = {("k", i): rng.bytes(int(rng.integers(0, 5000))) for i in range(6)}
    assert diskcache.load("t", ("k", 0)) is None
    for key, payload in payloads.items():
        assert diskcache.store("t", key, payload, {"n": len(payload)})
    for key, payload in payloads.items():
        entry = diskcache.load("t", key)
        assert entry.payload == payload and entry.meta == {"n": len(payload)}
    assert len(entries(cache_dir, "t")) == len(payloads)
    assert counts("t") == {"hits": 6, "misses": 1, "stores": 6, "rejected": 0}
    assert not list((cache_dir / diskcache.FORMAT / "t").glob(".tmp-*"))


def test_a_store_replaces_the_entry_of_its_key(cache_dir):
    diskcache.store("t", ("k",), b"first")
    diskcache.store("t", ("k",), b"second")
    assert diskcache.load("t", ("k",)).payload == b"second"
    assert len(entries(cache_dir)) == 1


def test_cache_off_reads_and_writes_nothing(cache_dir, monkeypatch):
    diskcache.store("t", ("k",), b"x")
    monkeypatch.setenv("PYREDUCE_CACHE", "0")
    assert not diskcache.enabled()
    assert diskcache.load("t", ("k",)) is None
    assert not diskcache.store("t", ("j",), b"y")
    assert len(entries(cache_dir)) == 1


def test_the_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PYREDUCE_CACHE_DIR", str(tmp_path / "here"))
    assert diskcache.directory() == tmp_path / "here"
    monkeypatch.delenv("PYREDUCE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert diskcache.directory() == tmp_path / "xdg" / "pyreduce"
    assert diskcache.directory() == diskcache.default_directory()


def _damaged(data: bytes, header_at: int):
    """Ways a file can be damaged, each with its name."""
    magic = len(diskcache._MAGIC)
    digest_end = magic + 32
    yield "empty", b""
    for cut in (1, magic, digest_end, digest_end + 4, header_at + 3, len(data) - 1):
        yield f"truncated at {cut}", data[:cut]
    for at in (0, magic + 5, digest_end + 2, header_at + 2, len(data) - 1):
        flipped = bytearray(data)
        flipped[at] ^= 0x10
        yield f"bit flipped at {at}", bytes(flipped)
    yield "garbage appended", data + b"\x00garbage"
    other = diskcache._MAGIC[:-2] + b"\x02\n"
    yield "another format's magic", data.replace(diskcache._MAGIC, other, 1)


def test_a_damaged_entry_is_a_miss_and_is_rebuilt(cache_dir):
    payload = bytes(range(256)) * 4
    diskcache.store("t", ("k",), payload, {"entry": "f"})
    (path,) = entries(cache_dir)
    good = path.read_bytes()
    header_at = len(diskcache._MAGIC) + 32 + 8
    damages = list(_damaged(good, header_at))
    for name, data in damages:
        path.write_bytes(data)
        assert diskcache.load("t", ("k",)) is None, name
        # the next store (after the compile) makes it whole again
        assert diskcache.store("t", ("k",), payload, {"entry": "f"}), name
        assert diskcache.load("t", ("k",)).payload == payload, name
    assert counts("t")["rejected"] == len(damages)


def test_an_entry_for_another_key_is_not_loaded(cache_dir):
    """A file whose digest is intact but which holds another key (a hash
    collision, or a file copied or renamed) is a miss."""
    diskcache.store("t", ("a",), b"payload of a")
    diskcache.store("t", ("b",), b"payload of b")
    a = diskcache.path_of("t", diskcache.canonical(("a",)))
    b = diskcache.path_of("t", diskcache.canonical(("b",)))
    b.write_bytes(a.read_bytes())
    assert diskcache.load("t", ("b",)) is None
    assert diskcache.load("t", ("a",)).payload == b"payload of a"
    assert counts("t")["rejected"] == 1


def test_decode_checks_everything(cache_dir):
    data = diskcache.encode("key", b"xyz", {"m": 1})
    assert diskcache.decode(data, "key") == diskcache.Entry(b"xyz", {"m": 1})
    assert diskcache.decode(data, "other") is None


# --------------------------------------------------------------------------
# Bounded size


def _store_aged(keys, start=1000.0):
    """Store each key with a modification time one second after the last."""
    for i, key in enumerate(keys):
        diskcache.store("t", key, bytes(1000))
        path = diskcache.path_of("t", diskcache.canonical(key))
        os.utime(path, (start + i, start + i))


def test_eviction_removes_the_least_recently_used_first(cache_dir):
    keys = [("k", i) for i in range(6)]
    _store_aged(keys)
    size = entries(cache_dir)[0].stat().st_size
    diskcache.evict(cache_dir, 4 * size)
    left = {p.name for p in entries(cache_dir)}
    want = {diskcache.path_of("t", diskcache.canonical(k)).name for k in keys[2:]}
    assert left == want
    # a hit makes an entry recent: ("k", 2), the oldest, is used and survives
    assert diskcache.load("t", keys[2]) is not None
    diskcache.evict(cache_dir, 3 * size)
    left = {p.name for p in entries(cache_dir)}
    assert diskcache.path_of("t", diskcache.canonical(keys[2])).name in left
    assert diskcache.path_of("t", diskcache.canonical(keys[3])).name not in left


def test_stores_keep_the_cache_within_its_bound(cache_dir, monkeypatch):
    monkeypatch.setenv("PYREDUCE_CACHE_SIZE", "10K")
    assert diskcache.limit() == 10 * 1024
    for i in range(40):
        diskcache.store("t", ("k", i), bytes(1000))
        assert sum(p.stat().st_size for p in entries(cache_dir)) <= 10 * 1024
    # the newest survive
    assert diskcache.load("t", ("k", 39)) is not None
    assert diskcache.load("t", ("k", 0)) is None


def test_eviction_removes_stale_temporary_files_only(cache_dir):
    diskcache.store("t", ("k",), b"x")
    folder = cache_dir / diskcache.FORMAT / "t"
    stale, fresh = folder / ".tmp-stale", folder / ".tmp-fresh"
    stale.write_bytes(b"left by a writer that died")
    fresh.write_bytes(b"being written now")
    old = time.time() - 2 * diskcache._STALE_TMP_SECONDS
    os.utime(stale, (old, old))
    diskcache.evict(cache_dir, 1 << 30)
    assert not stale.exists() and fresh.exists()
    assert diskcache.load("t", ("k",)) is not None


@pytest.mark.parametrize("text, want", [
    ("1073741824", 1 << 30), ("500M", 500 << 20), ("2GiB", 2 << 30), ("1.5g", 3 << 29),
    ("10k", 10240), ("0", 0), (" 7 ", 7), ("3KB", 3072),
])
def test_sizes_parse(text, want):
    assert diskcache.parse_size(text) == want


@pytest.mark.parametrize("text", ["", "big", "-1", "10X", "1e", "M"])
def test_a_bad_size_is_named_and_the_default_used(text, cache_dir, monkeypatch):
    with pytest.raises(ValueError, match="PYREDUCE_CACHE_SIZE"):
        diskcache.parse_size(text)
    if text:
        monkeypatch.setenv("PYREDUCE_CACHE_SIZE", text)
        with pytest.warns(diskcache.CacheWarning, match="PYREDUCE_CACHE_SIZE"):
            assert diskcache.limit() == diskcache.DEFAULT_LIMIT
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert diskcache.limit() == diskcache.DEFAULT_LIMIT  # once


def test_clear_removes_only_the_cache_files(cache_dir):
    diskcache.store("t", ("k",), b"x")
    diskcache.store("u", ("k",), b"y")
    foreign = cache_dir / "notes.txt"
    foreign.write_text("not the cache's")
    assert diskcache.clear() == 2
    assert entries(cache_dir) == [] and foreign.exists()
    assert diskcache.disk_usage() == {}


# --------------------------------------------------------------------------
# Many processes at once

_WRITER = """
import sys
from pyreduce import diskcache

def payload(key):
    return repr(key).encode() * (40 + 7 * key[-1])

me = int(sys.argv[1])
for i in range(80):
    key = ("shared", i % 12) if i % 2 else ("own", me, i)
    diskcache.store("t", key, payload(key), {"key": repr(key)})
    other = ("shared", (i * 5 + me) % 12)
    entry = diskcache.load("t", other)
    assert entry is None or entry.payload == payload(other), other
print("ok")
"""


def test_processes_fill_the_cache_at_once(cache_dir):
    env = {"PYREDUCE_CACHE_DIR": str(cache_dir), "PYREDUCE_CACHE_SIZE": "24K"}
    full = dict(os.environ, **env)
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(me)], env=full, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me in range(4)]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0 and out.strip() == "ok", err[-3000:]
    keys = [("shared", i) for i in range(12)] + [("own", me, i) for me in range(4)
                                                  for i in range(0, 80, 2)]
    by_name = {diskcache.path_of("t", diskcache.canonical(k)).name: k for k in keys}
    files = entries(cache_dir, "t")
    assert files, "the newest entries survive eviction"
    assert sum(p.stat().st_size for p in files) <= 24 * 1024 + 4 * 8 * 1024
    for path in files:
        key = by_name[path.name]
        entry = diskcache.decode(path.read_bytes(), diskcache.canonical(key))
        assert entry is not None and entry.payload == repr(key).encode() * (40 + 7 * key[-1])
    assert not [p for p in (cache_dir / diskcache.FORMAT / "t").iterdir()
                if p.name.startswith(".tmp-")]


# --------------------------------------------------------------------------
# A directory that cannot be written


def _unwritable(tmp_path):
    """A cache directory that cannot be created, even by root: under a file."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return blocker / "cache"


def test_an_unwritable_directory_warns_once_and_reads_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PYREDUCE_CACHE_DIR", str(_unwritable(tmp_path)))
    monkeypatch.delenv("PYREDUCE_CACHE", raising=False)
    diskcache.reset()
    with pytest.warns(diskcache.CacheWarning, match="cannot write") as caught:
        assert not diskcache.store("t", ("a",), b"x")
        assert not diskcache.store("t", ("b",), b"y")
        assert diskcache.load("t", ("a",)) is None
    assert len([w for w in caught if w.category is diskcache.CacheWarning]) == 1
    diskcache.reset()


def test_a_full_disk_warns_once(cache_dir, monkeypatch):
    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(diskcache, "_write_atomic", full)
    with pytest.warns(diskcache.CacheWarning, match="No space left") as caught:
        for i in range(3):
            assert not diskcache.store("t", ("k", i), b"x")
    assert len(caught) == 1
    assert counts("t")["stores"] == 0


def _ordered(c):
    # keeps the left operand when it is c-times larger: max for c > 0, min for c < 0
    return lambda a, b: a if a * c > b * c else b


def test_reductions_fall_back_to_compiling(tmp_path, monkeypatch):
    monkeypatch.setenv("PYREDUCE_CACHE_DIR", str(_unwritable(tmp_path)))
    monkeypatch.delenv("PYREDUCE_CACHE", raising=False)
    pyreduce.cache_clear()
    diskcache.reset()
    x = np.random.default_rng(1).standard_normal(3000)
    with pytest.warns(diskcache.CacheWarning) as caught:
        got = [pyreduce.reduce(x, _ordered(c), backend="cpu") for c in (1.0, -1.0)]
    assert got == [x.max(), x.min()]
    assert len([w for w in caught if w.category is diskcache.CacheWarning]) == 1
    diskcache.reset()


# --------------------------------------------------------------------------
# Numba functions in the store (njitcache)


def _fresh(fn, key):
    from numba import njit

    return njitcache.attach(njit(fn), key, "a test function")


def _poly(x, y):
    return x * 3 + y


def test_njit_functions_are_stored_and_loaded(cache_dir):
    first = _fresh(_poly, ("poly",))
    assert first(2, 1) == 7
    assert counts("cpu")["stores"] == 1
    second = _fresh(_poly, ("poly",))  # a new dispatcher: as in a new process
    assert second(2, 1) == 7 and second(2.5, 1.0) == 8.5
    assert sum(second.stats.cache_hits.values()) == 1  # int64 loaded, float64 compiled
    assert counts("cpu") == {"hits": 1, "misses": 2, "stores": 2, "rejected": 0}


def test_another_key_or_version_is_another_entry(cache_dir, monkeypatch):
    _fresh(_poly, ("poly",))(1, 1)
    _fresh(_poly, ("poly", "other"))(1, 1)
    assert counts("cpu")["stores"] == 2
    monkeypatch.setattr(diskcache, "_code_version", "another pyreduce")
    _fresh(_poly, ("poly",))(1, 1)
    assert counts("cpu")["stores"] == 3 and counts("cpu")["hits"] == 0


def test_an_unkeyable_function_is_compiled_each_time(cache_dir):
    _fresh(_poly, ("poly", None))(1, 1)
    _fresh(_poly, ("poly", None))(1, 1)
    assert counts("cpu")["stores"] == 0 and entries(cache_dir) == []


def test_a_stored_result_that_does_not_load_is_compiled_again(cache_dir):
    _fresh(_poly, ("poly",))(1, 1)
    (path,) = entries(cache_dir)
    # intact as a file (its digest matches), but not a Numba compile result
    data = path.read_bytes()
    size = int.from_bytes(data[len(diskcache._MAGIC) + 32:len(diskcache._MAGIC) + 40], "little")
    header = json.loads(data[len(diskcache._MAGIC) + 40:len(diskcache._MAGIC) + 40 + size])
    path.write_bytes(diskcache.encode(header["key"], b"not a pickle", header["meta"]))
    again = _fresh(_poly, ("poly",))
    assert again(4, 2) == 14
    assert sum(again.stats.cache_hits.values()) == 0
    assert diskcache.load("cpu", header["key"]).payload != b"not a pickle"  # rebuilt


# --------------------------------------------------------------------------
# The cpu backend's folds


def test_cpu_folds_are_loaded_not_compiled(cache_dir):
    x = np.random.default_rng(2).standard_normal(5000)
    op = _ordered(1.0)
    assert pyreduce.reduce(x, op, backend="cpu") == x.max()
    stored = counts("cpu")["stores"]
    assert stored >= 2  # the fold and the op's checked step
    pyreduce.cache_clear()  # the memory cache: as in a new process
    assert pyreduce.reduce(x, op, backend="cpu") == x.max()
    assert counts("cpu")["stores"] == 0 and counts("cpu")["hits"] >= 2


def test_cpu_folds_differ_by_captured_value(cache_dir):
    x = np.random.default_rng(3).standard_normal(5000)
    assert pyreduce.reduce(x, _ordered(1.0), backend="cpu") == x.max()
    pyreduce.cache_clear()
    assert pyreduce.reduce(x, _ordered(-1.0), backend="cpu") == x.min()
    assert counts("cpu")["hits"] == 0


_CPU_RUN = """
import functools
import numpy as np, pyreduce
from pyreduce import diskcache
x = np.random.default_rng(4).integers(-1000, 1000, 4000).astype(np.int64)
for op in (lambda a, b: a if a * 2.5 > b * 2.5 else b, lambda a, b: a - a + b):
    got = pyreduce.reduce(x, op, backend="cpu")
    assert got == functools.reduce(op, x), got
import sys
counts = dict(diskcache.stats().get("cpu", {}))
counts["numba.cuda imported"] = "numba.cuda" in sys.modules
print(counts)
"""


def test_a_second_process_loads_the_cpu_folds(cache_dir):
    env = {"PYREDUCE_CACHE_DIR": str(cache_dir)}
    first = eval(run_python(_CPU_RUN, env))
    assert first["stores"] >= 4 and first["hits"] == 0
    second = eval(run_python(_CPU_RUN, env))
    assert second["stores"] == 0 and second["hits"] == first["stores"]
    # backend="cpu" looks for no GPU: numba-cuda's import is a second of a cold start
    assert not first["numba.cuda imported"] and not second["numba.cuda imported"]


# --------------------------------------------------------------------------
# The compiled launch path (pyreduce.backends.launchjit), on fake driver functions

_LAUNCH_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, *([ctypes.c_uint] * 7),
                             ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64)
_DEVICE_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class FakeDriver:
    """``cuCtxGetDevice`` and ``cuLaunchKernel`` as C function pointers that
    record their calls."""

    def __init__(self, device: int, result: int = 0):
        self.calls, self.device, self.result = [], device, result

        def launch(*args):
            self.calls.append(args)
            return self.result

        def current(ptr):
            ctypes.c_int.from_address(ptr).value = self.device
            return 0

        self._launch, self._current = _LAUNCH_T(launch), _DEVICE_T(current)
        self.addresses = tuple(ctypes.cast(f, ctypes.c_void_p).value
                               for f in (self._current, self._launch))

    def python_current(self, values):
        return self.device

    def python_launch(self, values, function, grid, block, stream, params):
        self.calls.append((function, grid, 1, 1, block, 1, 1, 0, stream, params, 0))
        return self.result


def _words(n_params=14):
    rng = np.random.default_rng(5)
    return rng.integers(0, 1 << 40, n_params).astype(np.int64)


@pytest.mark.parametrize("device, want", [(-1, 0), (3, 0), (2, -1)])
def test_the_compiled_launch_does_what_the_python_one_does(cache_dir, device, want):
    from pyreduce.backends import fastpath, launchjit

    fake = FakeDriver(device=3, result=0)
    params = _words()
    compiled_values = np.concatenate([params, [0], fake.addresses]).astype(np.int64)
    python_values = compiled_values.copy()
    args = (0, 7, 12345, 0xABC000, 8, 0xDEF000, device, 0x77, 9, 256, 0x55, 0x99)
    got = launchjit.launcher(fastpath._launcher)(compiled_values, *args)
    compiled_calls = list(fake.calls)
    fake.calls.clear()
    oracle = fastpath._launcher(fake.python_current, fake.python_launch)(python_values, *args)
    assert got == oracle == want
    assert compiled_calls == fake.calls
    n = params.size
    assert (compiled_values[:n] == python_values[:n]).all()
    if want == 0:
        assert compiled_calls == [(0x77, 9, 1, 1, 256, 1, 1, 0, 0x55, 0x99, 0)]
        assert compiled_values[2] == compiled_values[5] == 12345
        assert compiled_values[4] == 0xABC000 and compiled_values[6] == 8
        assert compiled_values[7 + 4] == 0xDEF000
    else:
        assert compiled_calls == [] and (compiled_values[:n] == params).all()


def test_the_compiled_launch_returns_the_drivers_error(cache_dir):
    from pyreduce.backends import fastpath, launchjit

    fake = FakeDriver(device=0, result=719)
    values = np.concatenate([_words(), [0], fake.addresses]).astype(np.int64)
    launch = launchjit.launcher(fastpath._launcher)
    assert launch(values, -1, -1, 0, 0, 0, 0, -1, 1, 1, 32, 0, 0) == 719


def test_the_compiled_launch_is_loaded_from_the_cache(cache_dir):
    from pyreduce.backends import fastpath, launchjit

    fake = FakeDriver(device=0)
    values = np.concatenate([_words(), [0], fake.addresses]).astype(np.int64)
    first = launchjit.launcher(fastpath._launcher)
    assert first(values, 0, 7, 1, 2, 8, 3, -1, 4, 5, 64, 0, 6) == 0
    assert sum(first.stats.cache_hits.values()) == 0 and counts("cpu")["stores"] == 1
    again = launchjit.launcher(fastpath._launcher)  # a new dispatcher: as in a new process
    assert again(values, 0, 7, 1, 2, 8, 3, -1, 4, 5, 64, 0, 6) == 0
    assert sum(again.stats.cache_hits.values()) == 1 and counts("cpu")["stores"] == 1
    assert len(fake.calls) == 2


@pytest.mark.parametrize("builds", [True, False])
@pytest.mark.parametrize("ready", [True, False])
def test_the_first_launches_run_in_python_then_compiled(monkeypatch, builds, ready):
    from pyreduce.backends import fastpath

    made = []

    def python(*args):
        made.append("python")
        return 0

    def compiled(*args):
        made.append("compiled")
        return 0

    def build():
        if not builds:
            raise RuntimeError("no Numba here")
        return compiled

    # the launch that picks its implementation (earlier launches in this process
    # have replaced ``fastpath.launch``, which the monkeypatch restores afterwards)
    first_call = fastpath.first_launch
    monkeypatch.setattr(fastpath, "launch", first_call)
    monkeypatch.setattr(fastpath, "COMPILE_AFTER", 3)
    monkeypatch.setattr(fastpath, "LOAD_COLD_AFTER", 9)
    monkeypatch.setattr(fastpath, "cpu_target_ready", lambda: ready)
    monkeypatch.setattr(fastpath, "driver_functions", lambda: (1, 2))
    monkeypatch.setattr(fastpath, "_bindings_launch", lambda: python)
    monkeypatch.setattr(fastpath, "_compiled_launch", build)
    # with Numba's CPU target ready the compiled launch takes over at the first
    # look (after 3 launches), else at the look that reaches 9 launches
    switch = 3 if ready else 9
    for found, want in ((2, ["python"] * switch + ["compiled" if builds else "python"] * 3),
                        (0, ["python"] * (switch + 3))):  # 0: ctypes found no libcuda
        values = np.array([0, 0, 1, found], np.int64)
        fastpath.launch, made[:] = first_call, []
        for _ in range(switch + 3):
            assert fastpath.launch(values, -1, -1, 0, 0, 0, 0, -1, 1, 1, 32, 0, 0) == 0
        assert made == want


def test_numba_cpu_target_readiness_is_seen():
    from numba import njit

    from pyreduce.backends import fastpath

    njit(lambda v: v + 1)  # a CPU dispatcher readies the target
    assert fastpath.cpu_target_ready()


def test_use_compiled_launch_switches_at_once(monkeypatch):
    from pyreduce.backends import fastpath

    monkeypatch.setattr(fastpath, "launch", fastpath.first_launch)
    marker = lambda *args: 0  # noqa: E731
    monkeypatch.setattr(fastpath, "_compiled_launch", lambda: marker)
    monkeypatch.setattr(fastpath, "driver_functions", lambda: (1, 2))
    assert fastpath.use_compiled_launch() and fastpath.launch is marker
    monkeypatch.setattr(fastpath, "launch", fastpath.first_launch)
    monkeypatch.setattr(fastpath, "driver_functions", lambda: (0, 0))  # no libcuda
    assert not fastpath.use_compiled_launch() and fastpath.launch is fastpath.first_launch


def test_without_libcuda_the_launch_words_are_zero():
    from pyreduce.backends import fastpath

    found = fastpath.driver_functions()
    assert len(found) == 2 and (all(found) or found == (0, 0))


# --------------------------------------------------------------------------
# GPU kernel images: their keys (the loading is in the gpu tests below)


@pytest.fixture
def toolchain(cache_dir, tmp_path, monkeypatch):
    """A toolchain stamp for this process's environment, naming a fake NVVM."""
    from pyreduce.backends import cubins

    monkeypatch.setattr(cubins, "_driver_version", lambda: 12080)
    monkeypatch.setattr(cubins, "_environment_digest", None)
    monkeypatch.setattr(cubins, "_toolchain", {})
    lib = tmp_path / "libnvvm.so"
    lib.write_bytes(b"nvvm " * 100)
    st = lib.stat()
    stamp = {cubins._environment(): [str(lib), st.st_size, st.st_mtime_ns, [2, 0]]}
    path = cubins._stamp_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stamp))
    return lib


class FakeKernel:
    """What cubins reads of a :class:`pyreduce.codegen.Kernel`."""

    def __init__(self, spec, source):
        self.spec, self.source, self.name = spec, source, "k"


def _kernel(source="def k(x): pass", op=("builtin", "max"), **spec):
    return FakeKernel(KernelSpec("last_block", np.dtype("f8"), np.dtype("f8"), op, **spec),
                      source)


ARGS = (("array", np.dtype("f8"), "C"), "int64", ("array", np.dtype("f8"), "C"))


def test_image_keys_hold_what_changes_the_machine_code(toolchain):
    from pyreduce.backends.cubins import image_key
    from pyreduce.finishers import mean, variance

    base = diskcache.canonical(image_key(_kernel(), ARGS, (9, 0)))
    variants = [
        image_key(_kernel(source="def k(x): return"), ARGS, (9, 0)),
        image_key(_kernel(op=("builtin", "min")), ARGS, (9, 0)),
        image_key(_kernel(block=512), ARGS, (9, 0)),
        image_key(_kernel(), (("array", np.dtype("f8"), "A"),) + ARGS[1:], (9, 0)),
        image_key(_kernel(), (("array", np.dtype("f4"), "C"),) + ARGS[1:], (9, 0)),
        image_key(_kernel(), ARGS, (8, 0)),
        # a kernel that finishes a structured reduction: the finisher's code and ddof
        image_key(_kernel(finisher=_finisher(mean("f8"))), ARGS, (9, 0)),
        image_key(_kernel(finisher=_finisher(variance("f8", 0))), ARGS, (9, 0)),
        image_key(_kernel(finisher=_finisher(variance("f8", 1))), ARGS, (9, 0)),
    ]
    texts = [diskcache.canonical(v) for v in variants]
    assert len(set(texts + [base])) == len(texts) + 1
    assert diskcache.canonical(image_key(_kernel(), ARGS, (9, 0))) == base
    fin = _finisher(mean("f8"))
    assert diskcache.canonical(image_key(_kernel(finisher=fin), ARGS, (9, 0))) == texts[-3]
    # a finisher known only by its identity in this process is not kept on disk
    assert image_key(_kernel(finisher=(("id", 1),) + fin[1:]), ARGS, (9, 0)) is None


def _finisher(fin) -> tuple:
    """``KernelSpec.finisher`` of a kernel finishing by ``fin``."""
    return (fin.key, fin.ddof, fin.outputs)


def test_image_keys_change_with_the_toolchain(toolchain, monkeypatch):
    from pyreduce.backends import cubins

    base = diskcache.canonical(cubins.image_key(_kernel(), ARGS, (9, 0)))
    monkeypatch.setattr(cubins, "_environment_digest", None)
    monkeypatch.setattr(cubins, "_driver_version", lambda: 12090)
    assert cubins.image_key(_kernel(), ARGS, (9, 0)) is None  # a new driver: not seen yet
    monkeypatch.setattr(cubins, "_driver_version", lambda: 12080)
    monkeypatch.setattr(cubins, "_environment_digest", None)
    assert diskcache.canonical(cubins.image_key(_kernel(), ARGS, (9, 0))) == base
    monkeypatch.setattr(diskcache, "_code_version", "another pyreduce")
    assert diskcache.canonical(cubins.image_key(_kernel(), ARGS, (9, 0))) != base


def test_a_changed_nvvm_library_is_not_trusted(toolchain, monkeypatch):
    from pyreduce.backends import cubins

    assert cubins.toolchain() is not None
    monkeypatch.setattr(cubins, "_toolchain", {})
    toolchain.write_bytes(b"another nvvm")
    assert cubins.toolchain() is None
    assert cubins.image_key(_kernel(), ARGS, (9, 0)) is None


def test_the_nvvm_library_is_found_by_name_or_path():
    from pyreduce.backends.cubins import _loaded_path

    assert _loaded_path("/opt/cuda/nvvm/lib64/libnvvm.so") == "/opt/cuda/nvvm/lib64/libnvvm.so"
    assert _loaded_path("libnot-loaded-here.so") is None
    if sys.platform.startswith("linux"):  # a library the system loader found: its file
        found = _loaded_path("libc.so")
        assert found and os.path.isfile(found) and "libc.so" in found


def test_the_finishing_kernels_image_key(toolchain):
    """A kernel outside a plan (the finishing kernel: no spec) is keyed by its
    source, its own code key (the finisher's) and the argument types; without a
    code key it is not kept on disk."""
    from pyreduce.backends.cubins import image_key
    from pyreduce.finishers import mean, variance

    def finishing(fin, source="def f(acc, out0, ddof): pass"):
        k = FakeKernel(None, source)
        k.cache_key = None if fin is None else ("finisher", fin.key, False)
        return k

    args = (("array", np.dtype([("f0", "f8"), ("f1", "f8")]), "C"),
            ("array", np.dtype("f4"), "C"), "float64")
    base = diskcache.canonical(image_key(finishing(mean("f4")), args, (9, 0)))
    others = [image_key(finishing(mean("f8")), args, (9, 0)),
              image_key(finishing(variance("f4", 0)), args, (9, 0)),
              image_key(finishing(mean("f4"), "def f(acc, out0, ddof): return"), args, (9, 0)),
              image_key(finishing(mean("f4")), args[:1] + (("array", np.dtype("f8"), "C"),)
                        + args[2:], (9, 0))]
    texts = {diskcache.canonical(k) for k in others}
    assert len(texts | {base}) == len(others) + 1
    assert diskcache.canonical(image_key(finishing(mean("f4")), args, (9, 0))) == base
    assert image_key(finishing(None), args, (9, 0)) is None


def test_no_image_key_for_an_op_known_by_identity_or_with_the_cache_off(toolchain, monkeypatch):
    from pyreduce.backends.cubins import image_key

    assert image_key(_kernel(op=("fn", ("id", 1234))), ARGS, (9, 0)) is None
    monkeypatch.setenv("PYREDUCE_CACHE", "0")
    assert image_key(_kernel(), ARGS, (9, 0)) is None


@pytest.mark.sim
def test_kernels_run_their_source_only_when_launched():
    """A launch that finds its image on disk needs no Numba dispatcher: the
    generated module is executed on first use of ``Kernel.fn``."""
    from pyreduce.backends import get
    from pyreduce.cache import KERNELS

    be = get("sim")
    KERNELS.clear()
    monoid = as_monoid(lambda a, b: a + b, np.dtype("f8"))
    spec = KernelSpec("last_block", np.dtype("f8"), np.dtype("f8"), monoid.key, 64, 32, 2)
    kernel = be.kernel(spec, monoid, be.device())
    assert kernel._fn is None and "def " in kernel.source
    assert kernel.fn is kernel.fn and kernel._fn is not None


# --------------------------------------------------------------------------
# The driver calls that spare a warm process numba-cuda, on a fake driver


class FakeCu:
    """The few ``cuda.bindings.driver`` calls :mod:`pyreduce.backends.cudadriver`
    makes, over host memory, recording what is freed."""

    CU_MEMHOSTALLOC_DEVICEMAP = 2

    class CUdevice_attribute:
        pass

    ATTRIBUTES = {"COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0,
                  "WARP_SIZE": 32, "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
                  "MAX_BLOCKS_PER_MULTIPROCESSOR": 32, "MULTIPROCESSOR_COUNT": 132,
                  "L2_CACHE_SIZE": 50 << 20}

    def __init__(self, devices=1, context=None, init_error=0):
        self.devices, self.context, self.init_error = devices, context, init_error
        self.freed, self.retained, self.buffers = [], [], {}
        for name in self.ATTRIBUTES:
            setattr(self.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}", name)

    def cuInit(self, flags):
        return (self.init_error,)

    def cuDeviceGetCount(self):
        return 0, self.devices

    def cuDeviceGet(self, ordinal):
        return 0, ordinal

    def cuCtxGetDevice(self):
        return (0, self.context) if self.context is not None else (201, 0)

    def cuDevicePrimaryCtxRetain(self, device):
        self.retained.append(device)
        return 0, 1000 + device

    def cuCtxSetCurrent(self, ctx):
        self.context = ctx - 1000
        return (0,)

    def cuDeviceGetAttribute(self, which, device):
        return 0, self.ATTRIBUTES[which]

    def cuDeviceGetName(self, length, device):
        return 0, b"Fake GPU\0\0\0"

    def _alloc(self, nbytes):
        buf = np.full(nbytes, 0xAB, np.uint8)
        self.buffers[buf.ctypes.data] = buf
        return buf.ctypes.data

    def cuMemAlloc(self, nbytes):
        return 0, self._alloc(nbytes)

    def cuMemHostAlloc(self, nbytes, flags):
        assert flags == self.CU_MEMHOSTALLOC_DEVICEMAP
        return 0, self._alloc(nbytes)

    def cuMemHostGetDevicePointer(self, host, flags):
        return 0, host

    def cuMemcpyHtoD(self, dst, src, nbytes):
        ctypes.memmove(dst, src, nbytes)
        return (0,)

    def cuMemFree(self, ptr):
        self.freed.append(("device", ptr))
        return (0,)

    def cuMemFreeHost(self, ptr):
        self.freed.append(("host", ptr))
        return (0,)

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_NUM_REGS = "regs"
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = "shared"
        CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = "local"

    def cuFuncGetAttribute(self, which, handle):
        return 0, {"regs": 30, "shared": 256, "local": 0}[which] + handle


@pytest.fixture
def fake_cu(monkeypatch):
    from pyreduce.backends import cudadriver

    cu = FakeCu(context=0)
    monkeypatch.setattr(cudadriver, "_CU", cu)
    monkeypatch.setattr(cudadriver, "cuda_driver", lambda: cu)
    cudadriver.compute_capability.cache_clear()
    yield cu
    cudadriver.compute_capability.cache_clear()


def test_scratch_memory_is_allocated_zeroed_and_freed(fake_cu):
    import gc

    from pyreduce.backends.numba_cuda import CudaBackend

    be = CudaBackend()
    ticket = be.allocate(4, np.int32, zeroed=True)
    assert ticket.size == 4 and ticket.stride == 4 and ticket.dtype == np.int32
    assert (fake_cu.buffers[ticket.ptr][:16] == 0).all()
    partials = be.allocate(10, np.float64)
    assert partials.layout == "C" and (fake_cu.buffers[partials.ptr] == 0xAB).all()
    slot = be.allocate_result(np.dtype(np.float32))
    slot.host[0] = 2.5  # the device writes here; the host reads the same bytes
    assert fake_cu.buffers[slot.ptr][:4].view(np.float32)[0] == 2.5
    freed = {("device", ticket.ptr), ("device", partials.ptr), ("host", slot.ptr)}
    del ticket, partials, slot
    gc.collect()
    assert set(fake_cu.freed) == freed


def test_the_device_is_described_by_the_driver(fake_cu):
    from pyreduce.backends.numba_cuda import CudaBackend

    info = CudaBackend()._gpu_info(0)
    assert info.name == "Fake GPU" and info.key == ("cuda", 0, (9, 0))
    assert info.sm_count == 132 and info.warp == 32 and info.l2_bytes == 50 << 20
    # attributes this driver does not report take the defaults Numba's path used
    assert info.limits.registers == 65536 and info.limits.reserved_shared_per_block == 0


def test_a_thread_without_a_context_gets_device_0s_primary_one(fake_cu):
    from pyreduce.backends import fastpath

    fake_cu.context = None
    assert fastpath.current_device() == 0 and fake_cu.retained == [0]
    assert fastpath.current_device() == 0 and fake_cu.retained == [0]  # now current


def test_kernel_resources_come_from_its_loaded_functions(fake_cu):
    """explain() reports the functions a reduction launched, loaded or compiled,
    the largest over their argument types; nothing before any launch."""
    from pyreduce.backends import cubins

    kernel = _kernel()
    assert cubins.function_resources(kernel) is None
    cubins._functions[kernel] = {1, 7}
    assert cubins.function_resources(kernel) == {"registers": 37, "shared_bytes": 263,
                                                 "local_bytes": 7}


@pytest.mark.parametrize("case, want", [
    ("gpu", True), ("no gpu", False), ("no driver", False), ("driver fails", False),
    ("no nvvm seen", None), ("simulator", None), ("numba.cuda imported", None),
])
def test_the_gpu_is_found_without_numba_where_it_can_be(case, want, monkeypatch, fake_cu):
    from pyreduce.backends import cubins, cudadriver

    monkeypatch.delitem(sys.modules, "numba.cuda")  # restored after the test
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1" if case == "simulator" else "0")
    if case == "numba.cuda imported":
        monkeypatch.setitem(sys.modules, "numba.cuda", types.ModuleType("numba.cuda"))
    fake_cu.devices = 0 if case == "no gpu" else 1
    fake_cu.init_error = 100 if case == "driver fails" else 0
    if case == "no driver":
        def missing():
            raise OSError("libcuda.so.1: cannot open shared object file")

        monkeypatch.setattr(cudadriver, "cuda_driver", missing)
    monkeypatch.setattr(cubins, "toolchain", lambda: None if case == "no nvvm seen" else ("t",))
    assert cudadriver.gpu_present(cubins.toolchain) is want


# --------------------------------------------------------------------------
# What the user sees


def test_cache_info_reports_memory_and_disk(cache_dir):
    x = np.arange(100.0)
    pyreduce.cache_clear()
    assert pyreduce.reduce(x, lambda a, b: a + b, backend="cpu") == x.sum()
    info = pyreduce.cache_info()
    assert info.builds >= 1 and info.size >= 1 and info.hits >= 0  # the memory fields
    assert info.disk_dir == str(cache_dir) and info.disk_enabled
    files = entries(cache_dir)
    assert info.disk_entries == len(files) == info.disk_stores >= 2
    assert info.disk_bytes == sum(p.stat().st_size for p in files)
    assert info.disk_limit == diskcache.DEFAULT_LIMIT and info.disk_hits == 0
    pyreduce.cache_clear()
    pyreduce.reduce(x, lambda a, b: a + b, backend="cpu")
    assert pyreduce.cache_info().disk_hits == len(files)
    pyreduce.cache_clear(disk=True)
    assert pyreduce.cache_info().disk_entries == 0


def test_the_cache_command(cache_dir, capsys):
    from pyreduce.__main__ import main

    diskcache.store("cuda", ("k",), bytes(3000))
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(cache_dir) in out and "entries     1" in out and "cuda" in out
    assert main(["cache", "clear"]) == 0
    assert "removed 1 file" in capsys.readouterr().out
    assert entries(cache_dir) == []


def test_warmup_builds_then_finds(cache_dir):
    from pyreduce.prebuild import warmup

    def plus(a, b):
        return a + b

    out = io.StringIO()
    first = warmup([plus, "sum"], ["float64", "int32"], backend="cpu", stream=out)
    assert first.backend == "cpu" and first.cases == 4 and first.compiled >= 2
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("pyreduce warmup 1/4") and "reductions in" in lines[-1]
    pyreduce.cache_clear()
    again = warmup([plus], ["float64", "int32"], backend="cpu", progress=False)
    assert again.compiled == 0 and again.loaded == first.compiled


def test_warmup_draws_a_bar_on_a_terminal(cache_dir):
    from pyreduce.prebuild import warmup

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    warmup(["max"], ["float32"], backend="cpu", sizes=[10, 20], stream=out)
    text = out.getvalue()
    assert text.count("\r[") == 2 and text.endswith("\n") and text.count("\n") == 1


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(ops=["nope"]), ValueError, "ops="),
    (dict(ops=[3]), TypeError, "ops="),
    (dict(dtypes=["nope"]), TypeError, "dtypes="),
    (dict(sizes=[0]), ValueError, "sizes="),
    (dict(sizes=[]), ValueError, "sizes="),
])
def test_warmup_names_a_bad_argument(kwargs, error, match, cache_dir):
    with pytest.raises(error, match=match):
        pyreduce.warmup(backend="cpu", progress=False, **kwargs)


def test_the_warmup_command(cache_dir, capsys):
    from pyreduce.__main__ import main

    assert main(["warmup", "--backend", "cpu", "--ops", "max", "--dtypes", "int8",
                 "--quiet"]) == 0
    assert "warmup on cpu: 1 reductions" in capsys.readouterr().out
    assert main(["warmup", "--backend", "cpu", "--ops", "nope", "--quiet"]) == 2


def test_a_slow_compile_is_announced_once(cache_dir, monkeypatch, capsys, caplog):
    monkeypatch.delenv("PYREDUCE_QUIET", raising=False)
    caplog.set_level("INFO", logger="pyreduce")
    diskcache.report_compile("the kernel A", 0.2)
    assert capsys.readouterr().err == "" and not caplog.records
    diskcache.report_compile("the kernel B", 2.5)
    diskcache.report_compile("the kernel C", 3.5)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the kernel B took 2.5 s" in err and str(cache_dir) in err
    assert [r.getMessage().split(" took")[0] for r in caplog.records] == [
        "pyreduce: compiling the kernel B", "pyreduce: compiling the kernel C"]


def test_quiet_means_no_notice(cache_dir, monkeypatch, capsys, caplog):
    monkeypatch.setenv("PYREDUCE_QUIET", "1")
    caplog.set_level("INFO", logger="pyreduce")
    diskcache.report_compile("the kernel B", 2.5)
    assert capsys.readouterr().err == "" and len(caplog.records) == 1


# --------------------------------------------------------------------------
# On a GPU (NUMBA_ENABLE_CUDASIM=0): images loaded, not compiled

_GPU_RUN = """
import functools, sys
import numpy as np
from numba import cuda
import pyreduce
from pyreduce import diskcache
from pyreduce.backends import cubins

if sys.argv[1] == "forbid":
    def no_compile(*args, **kwargs):
        raise AssertionError("a kernel was compiled")
    cubins._compile = no_compile
    import numba.cuda.compiler
    numba.cuda.compiler.compile_cuda = no_compile

rng = np.random.default_rng(6)
host = rng.standard_normal(1 << 20)
x = cuda.to_device(host)
assert pyreduce.max(x) == host.max()
op = lambda a, b: a if a < b else b
assert pyreduce.reduce(x, op) == host.min()
ints = rng.integers(-9, 9, 100_001).astype(np.int32)
assert pyreduce.sum(cuda.to_device(ints)) == ints.sum()
# structured reductions finished on the device: the finishing kernel is kept too
assert np.isclose(pyreduce.mean(x, device_result=True).copy_to_host(), host.mean())
rows = host.reshape(1024, 1024)
assert np.allclose(pyreduce.var(cuda.to_device(rows), axis=1).copy_to_host(), rows.var(axis=1))
print(dict(diskcache.stats().get("cuda", {})))
"""


@pytest.mark.gpu
def test_gpu_a_second_process_launches_without_compiling(cache_dir):
    env = {"PYREDUCE_CACHE_DIR": str(cache_dir), "NUMBA_ENABLE_CUDASIM": "0"}
    first = eval(run_python(_GPU_RUN, env, "allow"))
    assert first["stores"] >= 3 and first["hits"] == 0
    second = eval(run_python(_GPU_RUN, env, "forbid"))
    assert second["stores"] == 0 and second["hits"] == first["stores"]


@pytest.mark.gpu
def test_gpu_damaged_images_are_rebuilt(cache_dir):
    env = {"PYREDUCE_CACHE_DIR": str(cache_dir), "NUMBA_ENABLE_CUDASIM": "0"}
    first = eval(run_python(_GPU_RUN, env, "allow"))
    for i, path in enumerate(entries(cache_dir, "cuda")):
        data = bytearray(path.read_bytes())
        if i % 2:
            data[-10] ^= 0xFF  # a flipped bit in the cubin
        path.write_bytes(bytes(data[: len(data) // (1 if i % 2 else 2)]))
    again = eval(run_python(_GPU_RUN, env, "allow"))
    assert again["stores"] == first["stores"] and again["rejected"] == first["stores"]


@pytest.mark.gpu
def test_gpu_load_function_launches_a_stored_image(cache_dir):
    from numba import cuda
    from numba.cuda import types as nt

    from pyreduce.backends import cubins, fastpath

    @cuda.jit
    def fill(out, value):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = value * i

    out = cuda.device_array(100, np.int64)
    compiled = fill.compile((nt.Array(nt.int64, 1, "C"), nt.int64))
    image = compiled._codelibrary.get_cubin()
    handle = cubins.load_function(cubins.cubin_bytes(image), compiled.entry_name)
    view = fastpath.view_of(out)
    words = np.array(list(view.args()) + [7], np.int64)
    pointers = np.arange(8, dtype=np.uint64) * 8 + words.ctypes.data
    cu = fastpath.cuda_driver()
    fastpath.check_driver(cu.cuLaunchKernel(handle, 1, 1, 1, 128, 1, 1, 0, 0,
                                            pointers.ctypes.data, 0))
    fastpath.check_driver(cu.cuCtxSynchronize())
    assert (out.copy_to_host() == 7 * np.arange(100)).all()


@pytest.mark.gpu
def test_gpu_the_launch_path_is_loaded_in_a_second_process(cache_dir):
    code = """
    import numpy as np
    from numba import cuda
    import pyreduce
    from pyreduce.backends import fastpath
    x = cuda.to_device(np.arange(1000.0))
    fastpath.use_compiled_launch()
    for _ in range(10):
        assert pyreduce.sum(x) == 499500.0
    print(sum(fastpath.launch.stats.cache_hits.values()))
    """
    env = {"PYREDUCE_CACHE_DIR": str(cache_dir), "NUMBA_ENABLE_CUDASIM": "0"}
    assert run_python(code, env).strip() == "0"
    assert run_python(code, env).strip() == "1"



_CUPY_RUN = """
import sys, time
import numpy as np
import cupy as cp
host = np.random.default_rng(7).standard_normal(1 << 20)
x = cp.asarray(host)
cp.cuda.Device().synchronize()
import pyreduce
from pyreduce import diskcache
start = time.perf_counter()
got = pyreduce.max(x)
seconds = time.perf_counter() - start
assert got == host.max(), got
counts = dict(diskcache.stats().get("cuda", {}))
counts.update(numba="numba" in sys.modules, seconds=seconds)
print(counts)
"""


@pytest.mark.gpu
def test_gpu_a_warm_process_reduces_a_cupy_array_without_numba(cache_dir):
    """The target of the cache: a second process's first ``pyreduce.max`` of a
    CuPy array loads its kernel and launches it with no Numba imported. The
    times are printed (``pytest -s``), not asserted."""
    pytest.importorskip("cupy")
    env = {"PYREDUCE_CACHE_DIR": str(cache_dir), "NUMBA_ENABLE_CUDASIM": "0"}
    first = eval(run_python(_CUPY_RUN, env))
    second = eval(run_python(_CUPY_RUN, env))
    print(f"first call: {first['seconds']:.3f} s cold, {second['seconds']:.3f} s warm")
    assert first["stores"] >= 1 and first["numba"]
    assert second["hits"] == first["stores"] and second["stores"] == 0
    assert not second["numba"]


def test_cubin_bytes_reads_every_form_numba_cuda_returns(tmp_path):
    """numba-cuda's ``get_cubin()`` returns bytes, or a ``cuda.core`` ObjectCode
    whose ``code`` is the bytes or a file's path; the store needs the bytes."""
    from types import SimpleNamespace

    from pyreduce.backends.cubins import cubin_bytes

    image = bytes(range(256)) * 3
    path = tmp_path / "k.cubin"
    path.write_bytes(image)
    assert cubin_bytes(image) == image
    assert cubin_bytes(SimpleNamespace(code=image)) == image
    assert cubin_bytes(SimpleNamespace(code=str(path))) == image


def test_deciding_the_gpu_through_numba_records_the_toolchain(monkeypatch):
    """Regression (H100): a process whose host arrays all went to the cpu
    backend compiled no kernel, so nothing recorded the NVVM library, and every
    later process imported numba-cuda (0.8 s) to learn that the GPU is usable.
    Deciding it through Numba now records the toolchain for them."""
    from numba import cuda
    from numba.cuda.core import config

    from pyreduce import backends
    from pyreduce.backends import cubins, cudadriver

    before = backends._numba_cuda_mode()  # 'sim' under pytest, 'cuda' on a GPU run
    recorded = []
    monkeypatch.setattr(cudadriver, "gpu_present", lambda toolchain: None)
    monkeypatch.setattr(cubins, "remember_toolchain", lambda: recorded.append(True))
    monkeypatch.setattr(config, "ENABLE_CUDASIM", 0)
    backends._numba_cuda_mode.cache_clear()
    try:
        for usable in (False, True):
            monkeypatch.setattr(cuda, "is_available", lambda usable=usable: usable)
            backends._numba_cuda_mode.cache_clear()
            assert backends._numba_cuda_mode() == ("cuda" if usable else None)
            assert recorded == [True] * usable
    finally:
        monkeypatch.undo()
        backends._numba_cuda_mode.cache_clear()
    assert backends._numba_cuda_mode() == before
