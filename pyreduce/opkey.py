"""What a user's operator computes with: its cache key, its frozen copy, and the
memo's check that both still hold.

Numba compiles the values a function reads into its code: the globals it names,
its closure cells and defaults, the attributes of modules it reads (``math.pi``,
``mymod.K``) and the contents of NumPy arrays among them, as constants. A kernel
compiled for an op is therefore right only for those values, so the op's key
(:func:`function_key`) is made of them:

* its bytecode and constants, nested functions' included;
* each value it can read, by value: numbers by their bits (``-0.0`` is not
  ``0.0``, NaN payloads differ), strings, dtypes, tuples item by item; an array
  by its type, dtype, shape, layout and a SHA-256 digest of its bytes (the key
  does not hold the array); a module by identity and the values of those of its
  attributes whose names the code uses (``co_names``); a function, or the Python
  function of a Numba dispatcher, by its own key (with the dispatcher's options
  and the number of times its compiled code was replaced, :func:`recompiled`);
* anything else by identity: the key holds the object, so its id is not reused
  while the key exists. Numba compiles no such object (a list, a dict, an
  instance), so every backend refuses an op that reads one when it compiles it.

The op the kernels call is :func:`freeze` of the user's function: a copy that reads
its own copies of the arrays and global values it captured, which is what Numba
compiles in anyway. A kernel cached under a key so computes the values the key was
made from on every backend, the simulator (which calls the op as Python) included,
whichever function with that key built it.

:func:`bindings` is the cheap check behind the memo of :func:`pyreduce.ops.as_monoid`:
the objects a function reads, compared by identity, and a digest of every array
among them, recomputed on each call because NumPy arrays change in place without
a trace. That digest costs a pass over the array's bytes per call (about 0.7 ms
per MiB here): the arrays an op reads are constants that Numba compiles into its
code, small in any op that compiles in reasonable time.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import inspect
import os
import struct
import sys
import sysconfig
import threading
import types
import weakref
from typing import Hashable

import numpy as np

from .cache import Memo

__all__ = ["function_key", "value_key", "freeze", "bindings", "same", "array_digest", "op_ref"]

_F64 = struct.Struct("<d")
_C128 = struct.Struct("<dd")
_NOTHING = object()


class Ident:
    """A key part that is equal only to another for the same object (whatever
    that object's ``==`` says), and holds it so its id is not reused."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return type(other) is Ident and other.obj is self.obj

    def __repr__(self):
        return f"Ident({type(self.obj).__name__} at {id(self.obj):#x})"

    def global_name(self) -> str | None:
        """The name another process finds the same object under, or None. What
        lets the disk cache keep an operator that reads ``np.float64``,
        ``np.sqrt`` or ``math.hypot`` (:func:`pyreduce.diskcache.canonical`):

        * an imported module, by its name: the attributes an operator reads from
          it are keyed by their values, apart from this;
        * a class or function at the top level of NumPy (with NumPy's version)
          or of the standard library as installed (its file under the
          interpreter's library directory, or built in).

        Anything else, a user's module's classes, enums or ``vectorize``
        functions among them, can change under the same name between
        processes (and Numba compiles their contents in): None."""
        obj = self.obj
        if isinstance(obj, types.ModuleType):
            name = getattr(obj, "__name__", None)
            return f"{name}" if isinstance(name, str) and sys.modules.get(name) is obj else None
        module = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
        if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
            return None
        found = sys.modules.get(module)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if found is not obj:
            return None
        package = module.split(".")[0]
        if package == "numpy":
            return f"{module}:{qualname}@numpy {np.__version__}"
        if _in_standard_library(sys.modules.get(package)):
            return f"{module}:{qualname}@python {sys.version_info[:2]}"
        return None


def _in_standard_library(module) -> bool:
    """Whether ``module`` is the standard library's, as installed: built in, or
    loaded from the interpreter's library directory (a local ``random.py``
    is not)."""
    if module is None:
        return False
    if module.__name__ in sys.builtin_module_names:
        return True
    path = getattr(module, "__file__", None)
    if not isinstance(path, str):
        return False
    path = os.path.realpath(path)
    for root in _stdlib_roots():
        if path.startswith(root) and "site-packages" not in path[len(root):].split(os.sep):
            return True
    return False


@functools.cache
def _stdlib_roots() -> tuple:
    """The interpreter's library directories, resolved once."""
    return tuple({os.path.realpath(sysconfig.get_paths()[key]) + os.sep
                  for key in ("stdlib", "platstdlib")})


class _Digest(bytes):
    """An array's digest in :func:`bindings`: compared by value, not identity."""


def array_digest(a: np.ndarray) -> bytes:
    """SHA-256 of an array's dtype, shape and bytes in C order. A TypeError for an
    array of Python objects, whose contents are references Numba cannot compile."""
    if a.dtype.hasobject:
        raise TypeError(f"an op reads an array of dtype {a.dtype}; Numba compiles the arrays "
                        "an op reads as constants, which arrays of Python objects cannot be")
    h = hashlib.sha256(repr((a.dtype.descr, a.shape)).encode())
    h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8).data)
    return h.digest()


def _layout(a: np.ndarray) -> str:
    return "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "A"


# --- keys of values

def value_key(value) -> Hashable:
    """A memo key for a value the user passes (``identity=``, ``initial=``) that tells
    apart what ``==`` does not: ``-0.0`` and ``0.0``, NaNs with other payloads, ``1``,
    ``1.0`` and ``True``. A TypeError for a value of any other kind (no memo)."""
    t = type(value)
    if value is None or t is int or t is bool or t is str:
        return (t, value)
    if t is float:
        return (t, _F64.pack(value))
    if t is complex:
        return (t, _C128.pack(value.real, value.imag))
    if isinstance(value, np.generic):
        return (t, value.dtype, value.tobytes())
    if t is tuple or t is list:
        return (t, *(value_key(v) for v in value))
    raise TypeError(f"no memo key for a {t.__name__}")


def _value_key(value, names, seen) -> Hashable:
    """The key part for a value a function reads (see the module docstring);
    ``names`` are the attribute names its code uses, ``seen`` the ids of the
    functions and modules on the way here (recursion through globals)."""
    t = type(value)
    if value is None or t in (int, bool, str, bytes, float, complex) or isinstance(
            value, np.generic):
        return value_key(value) if t is not bytes else (t, value)
    if isinstance(value, np.ndarray):
        return ("array", t, value.dtype, value.shape, _layout(value), array_digest(value))
    if isinstance(value, np.dtype):
        return ("dtype", value)
    if isinstance(value, tuple):
        return ("tuple", t, tuple(_value_key(v, names, seen) for v in value))
    if t is frozenset:  # a constant of `v in {...}`: 0.0 and -0.0 are equal members
        return ("frozenset", frozenset(_value_key(v, names, seen) for v in value))
    if isinstance(value, types.ModuleType):
        return _module_key(value, names, seen)
    if isinstance(value, types.FunctionType):
        return function_key(value, seen)
    py_func = getattr(value, "py_func", None)  # a Numba dispatcher
    if isinstance(py_func, types.FunctionType):
        options = getattr(value, "targetoptions", None) or {}
        return ("jitted", type(value).__name__,
                tuple(sorted((k, repr(v)) for k, v in options.items())),
                recompiled(value), function_key(py_func, seen))
    return Ident(value)


class _Compiled:
    __slots__ = ("results", "generation")

    def __init__(self, results):
        self.results, self.generation = results, 0


#: Numba dispatcher -> its compiled overloads when last seen, and how many times
#: they have been replaced since
_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_COMPILED_LOCK = threading.Lock()


def recompiled(dispatcher) -> int:
    """How many times the compiled overloads of a Numba dispatcher an op calls
    have been replaced (by its ``recompile()``) since first seen here. Code that
    calls it links the overload it found when it was compiled, so the op's key
    takes this count: after ``recompile()`` the op is compiled anew and links the
    new overload, as calling the op from Python would use it. A signature
    compiled for the first time replaces nothing and changes no key."""
    overloads = getattr(dispatcher, "overloads", None)
    if not overloads:
        return 0
    results = dict(overloads)  # signature -> compile result; holds only what it holds
    with _COMPILED_LOCK:
        state = _COMPILED.get(dispatcher)
        if state is None:
            _COMPILED[dispatcher] = _Compiled(results)
            return 0
        if any(state.results.get(sig, r) is not r for sig, r in results.items()) or (
                state.results.keys() - results.keys()):
            state.generation += 1
        state.results = results
        return state.generation


def _module_key(module, names, seen) -> Hashable:
    if id(module) in seen:
        return ("module", Ident(module))
    seen = seen | {id(module)}
    attrs = vars(module)
    return ("module", Ident(module), tuple(
        (n, _value_key(attrs[n], names, seen)) for n in names if n in attrs))


def _code_key(code: types.CodeType) -> Hashable:
    consts = tuple(
        _code_key(c) if isinstance(c, types.CodeType) else _value_key(c, (), frozenset())
        for c in code.co_consts
    )
    return (code.co_code, consts, code.co_names, code.co_varnames, code.co_argcount,
            code.co_kwonlyargcount, code.co_flags & ~_PLACEMENT_FLAGS)


#: Code flags that say where a function was defined, not what it does: a lambda
#: inside a function (CO_NESTED) compiles to the same code as one at module level.
_PLACEMENT_FLAGS = inspect.CO_NESTED


_GLOBAL_NAMES = Memo("global names", 1024)


def global_names(code: types.CodeType) -> tuple:
    """The names a function's code (nested functions' included) may look up as
    globals or as attributes, sorted: ``co_names`` holds both."""
    found = _GLOBAL_NAMES.get(code)
    if found is None:
        found = tuple(sorted(_names(code)))
        _GLOBAL_NAMES.put(code, found)
    return found


def _names(code: types.CodeType) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _cell(cell):
    try:
        return cell.cell_contents
    except ValueError:  # a variable the enclosing function has not bound yet
        return _NOTHING


def function_key(fn: types.FunctionType, seen=frozenset()) -> Hashable:
    """A key for a Python function's behaviour: its bytecode, constants, closure
    values, defaults and the globals it names, each by value (see the module
    docstring). Two lambdas with the same code and captured values get the same
    key; an array changed in place, or a module attribute rebound, gives a new
    one. A TypeError for what cannot be keyed (an array of Python objects)."""
    if id(fn) in seen:  # recursion through globals
        return ("recursive", fn.__qualname__)
    seen = seen | {id(fn)}
    code = fn.__code__
    names = global_names(code)
    g = fn.__globals__

    def key(v):
        return ("unbound",) if v is _NOTHING else _value_key(v, names, seen)

    closure = tuple(key(_cell(c)) for c in fn.__closure__ or ())
    referenced = tuple((n, key(g[n])) for n in names if n in g)
    defaults = tuple(key(d) for d in fn.__defaults__ or ())
    kwdefaults = tuple((k, key(v)) for k, v in sorted((fn.__kwdefaults__ or {}).items()))
    return ("fn", fn.__name__, _code_key(code), closure, referenced, defaults, kwdefaults)


# --- the frozen copy

def _frozen(value):
    """``value`` as a frozen op reads it: a read-only copy of an array, tuples
    rebuilt around such copies, anything else as it is."""
    if isinstance(value, np.ndarray):
        copy = value.copy(order="K")
        copy.flags.writeable = False
        return copy
    if isinstance(value, tuple) and any(isinstance(v, (np.ndarray, tuple)) for v in value):
        items = [_frozen(v) for v in value]
        return type(value)._make(items) if hasattr(type(value), "_make") else type(value)(items)
    return value


def freeze(fn: types.FunctionType) -> types.FunctionType:
    """A copy of ``fn`` that reads the values it captures (globals it names,
    closure cells, defaults) as they are now, arrays as read-only copies: what
    Numba compiles in. Rebinding or changing them later leaves the copy as it is.
    A function that captures nothing is returned as it is."""
    names = global_names(fn.__code__)
    g = fn.__globals__
    if not (fn.__closure__ or fn.__defaults__ or fn.__kwdefaults__
            or any(n in g for n in names)):
        return fn
    scope = {n: _frozen(g[n]) for n in names if n in g}
    scope["__builtins__"] = g.get("__builtins__", builtins)
    scope["__name__"] = g.get("__name__")
    closure = tuple(types.CellType() if v is _NOTHING else types.CellType(_frozen(v))
                    for v in map(_cell, fn.__closure__ or ()))
    copy = types.FunctionType(fn.__code__, scope, fn.__name__,
                              tuple(_frozen(d) for d in fn.__defaults__ or ()) or None,
                              closure or None)
    copy.__qualname__ = fn.__qualname__
    copy.__doc__ = fn.__doc__
    if fn.__kwdefaults__:
        copy.__kwdefaults__ = {k: _frozen(v) for k, v in fn.__kwdefaults__.items()}
    return copy


# --- the memo's check

class _WeakOp:
    """A memo key part for a user's function, equal to another for the same live
    function, that does not keep the function (and what it captures) alive. A dead
    one equals nothing, so a new function at the same address is not mistaken
    for it."""

    __slots__ = ("ref", "hash")

    def __init__(self, fn):
        self.ref, self.hash = weakref.ref(fn), id(fn)

    def __hash__(self):
        return self.hash

    def __eq__(self, other):
        if type(other) is not _WeakOp or other.hash != self.hash:
            return False
        alive = self.ref()
        return alive is not None and alive is other.ref()


def op_ref(op):
    """``op`` as a part of a memo key: a user's function (or Numba dispatcher) by a
    weak reference, anything else (a built-in, a name, a Monoid) as it is."""
    if type(op) is types.FunctionType or hasattr(op, "py_func"):
        try:
            return _WeakOp(op)
        except TypeError:  # a callable without weak references
            return op
    return op


def python_function(op):
    """The Python function behind ``op`` (a Numba dispatcher gives its ``py_func``),
    or None."""
    if type(op) is types.FunctionType:
        return op
    fn = getattr(op, "py_func", None)
    return fn if type(fn) is types.FunctionType else None


def bindings(op) -> tuple:
    """What ``op``'s key was made from, cheaply: the code object and each value it
    reads (closure cells, defaults, the globals it names, the attributes of modules
    among them, recursively through the functions it calls), compared by identity,
    and a digest of each array among them. While :func:`same` holds between two of
    these, the function's key is unchanged. Objects are held by weak reference
    where they allow one (CPython hands out one weak reference per object, so
    identity still compares), so a remembered check keeps no array alive. Empty
    for what is not a function."""
    fn = python_function(op)
    if fn is None:
        return ()
    out: list = []
    _watch_function(fn, out, set())
    return tuple(out)


def _watch_function(fn, out, seen) -> None:
    seen.add(id(fn))
    code = fn.__code__
    names = global_names(code)
    defaults, kwdefaults = fn.__defaults__ or (), fn.__kwdefaults__ or {}
    out += (code, len(defaults), len(kwdefaults))
    for cell in fn.__closure__ or ():
        _watch(_cell(cell), names, out, seen)
    g = fn.__globals__
    for n in names:
        _watch(g.get(n, _NOTHING), names, out, seen)
    for d in defaults:
        _watch(d, names, out, seen)
    for k in sorted(kwdefaults):
        out.append(k)
        _watch(kwdefaults[k], names, out, seen)


_LEAVES = frozenset((int, float, bool, complex, str, bytes, type(None), object))


def _watch(value, names, out, seen) -> None:
    t = type(value)
    if t in _LEAVES:
        out.append(value)
        return
    if t is tuple or isinstance(value, tuple):  # no weak reference to a tuple
        out += (t, len(value))
        for v in value:
            _watch(v, names, out, seen)
        return
    try:
        out.append(weakref.ref(value))
    except TypeError:
        out.append(value)
    if isinstance(value, np.ndarray):
        out.append(_Digest(array_digest(value)))
    elif id(value) in seen:
        return
    elif isinstance(value, types.ModuleType):
        seen.add(id(value))
        attrs = vars(value)
        for n in names:
            _watch(attrs.get(n, _NOTHING), names, out, seen)
    else:
        fn = python_function(value)
        if fn is not None and id(fn) not in seen:
            if fn is not value:  # a dispatcher: what its callers linked
                out.append(recompiled(value))
            _watch_function(fn, out, seen)


def same(a: tuple, b: tuple) -> bool:
    """Whether two :func:`bindings` of a function are the same: the same objects,
    and equal digests of the arrays among them."""
    return len(a) == len(b) and all(map(_same_part, a, b))


def _same_part(x, y) -> bool:
    return x is y or (type(x) is _Digest and x == y)

