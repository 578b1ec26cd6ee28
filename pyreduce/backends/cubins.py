"""Kernel images on a GPU: loaded from the disk cache, or compiled by Numba and
stored there.

The launch path (:mod:`pyreduce.backends.fastpath`) needs one thing of a kernel:
the driver's function handle for its argument types on the current context.
:func:`function_handle` finds it in this order:

1. loaded already in this process (per context and key);
2. a cubin in the disk cache (:mod:`pyreduce.diskcache`), loaded with
   ``cuModuleLoadData`` and ``cuModuleGetFunction`` by its stored entry name
   (:func:`load_function`) without Numba's compiler: the parameters keep
   Numba's array ABI, so the prepared launches are the same;
3. compiled by Numba, and the cubin and entry name stored for later processes.

The key (:func:`image_key`) holds everything that changes the machine code: the
generated source, the operator's code key, the spec, the argument types, the
compute capability, the driver's version, pyreduce's code version and the
toolchain (:func:`toolchain`: the installed Numba, numba-cuda, llvmlite and
cuda-bindings, and the NVVM library found). The NVVM library is only known
after Numba has loaded it, so its identity (path, size, modification time,
version) is remembered in the cache directory after a compile and checked with
one ``stat`` in later processes; until a process has seen it, lookups miss and
kernels compile.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import weakref

from .. import diskcache
from .cudadriver import check_driver, compute_capability, cuda_driver, current_device

__all__ = ["function_handle", "function_resources", "load_function", "image_key", "toolchain",
           "remember_toolchain", "KIND"]

KIND = "cuda"

_lock = threading.Lock()
#: (context handle, key digest) -> function handle
_loaded: dict = {}
#: loaded modules stay loaded for the process (their functions are in use)
_modules: list = []


def function_handle(kernel, argtypes: tuple) -> int:
    """The function handle of ``kernel`` (a :class:`pyreduce.codegen.Kernel`)
    compiled for ``argtypes`` (:func:`numba_signature`), on the current context."""
    handle = _function_handle(kernel, argtypes)
    with _lock:
        _functions.setdefault(kernel, set()).add(handle)
    return handle


#: kernel -> the handles of its functions loaded or compiled in this process
_functions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def function_resources(kernel) -> dict | None:
    """The registers per thread and the static shared and local memory of
    ``kernel``'s functions (the largest over its argument types), as the driver
    reports them; None before any was loaded or compiled."""
    handles = sorted(_functions.get(kernel, ()))
    if not handles:
        return None
    cu = cuda_driver()
    attr = cu.CUfunction_attribute
    found = {}
    for key, which in (("registers", attr.CU_FUNC_ATTRIBUTE_NUM_REGS),
                       ("shared_bytes", attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                       ("local_bytes", attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)):
        values = []
        for handle in handles:
            err, value = cu.cuFuncGetAttribute(which, handle)
            if int(err) == _INVALID_HANDLE:
                err, value = cu.cuFuncGetAttribute(which, _as_function(cu, handle))
            check_driver(err)
            values.append(int(value))
        found[key] = max(values)
    return found


#: CUDA_ERROR_INVALID_HANDLE, as cuFuncGetAttribute returns it for a library kernel
_INVALID_HANDLE = 400


def _as_function(cu, handle: int):
    """The current context's ``CUfunction`` of the library kernel ``handle``.
    numba-cuda links with ``cuda.core``, whose kernels are library kernels
    (``CUkernel``): launches take them as they are, but ``cuFuncGetAttribute``
    refuses them (``CUDA_ERROR_INVALID_HANDLE``) and needs the function."""
    err, function = cu.cuKernelGetFunction(handle)
    return function if not int(err) else handle


def _function_handle(kernel, argtypes: tuple) -> int:
    ctx, cc = _context()
    key = image_key(kernel, argtypes, cc)
    text = None if key is None else diskcache.canonical(key)
    if text is not None:
        name = (ctx, diskcache.digest(text))
        found = _loaded.get(name)
        if found is not None:
            return found
        entry = diskcache.load(KIND, text)
        if entry is not None:
            try:
                handle = load_function(entry.payload, entry.meta["entry"])
            except Exception:  # an image this driver or GPU refuses: compile it again
                diskcache.log.debug("pyreduce cache: stored %s did not load", kernel.name)
            else:
                _loaded[name] = handle
                return handle
    handle, image, entry_name = _compile(kernel, argtypes)
    if key is None:  # the toolchain is known now, after the compile
        key = image_key(kernel, argtypes, cc)
        text = None if key is None else diskcache.canonical(key)
    if text is not None:
        _loaded[(ctx, diskcache.digest(text))] = handle
        diskcache.store(KIND, text, image, {"entry": entry_name, "label": kernel.label,
                                            "cc": list(cc)})
    return handle


def _compile(kernel, argtypes) -> tuple:
    """``(handle, cubin, entry name)``, compiled by Numba for the current device."""
    start = time.perf_counter()
    compiled = kernel.fn.compile(numba_signature(argtypes))
    library = compiled._codelibrary
    cufunc = library.get_cufunc()
    handle = int(cufunc.handle)
    with _lock:
        # the handle is remembered for the process (_loaded): its module must stay
        # loaded after Numba's objects for it are gone (a kernel evicted from the
        # memory cache, cache_clear()), as loaded images' modules do (_modules)
        _modules.append(cufunc)
    diskcache.report_compile(f"the kernel {kernel.label}", time.perf_counter() - start)
    image = cubin_bytes(library.get_cubin())
    remember_toolchain()
    return handle, image, compiled.entry_name


def cubin_bytes(cubin) -> bytes:
    """The bytes of a linked image as numba-cuda returns it: bytes, or (since it
    links with ``cuda.core``) an ``ObjectCode``, whose ``code`` holds the bytes
    or the path of a file with them."""
    code = getattr(cubin, "code", cubin)
    if isinstance(code, str):
        with open(code, "rb") as f:
            return f.read()
    return bytes(code)


def load_function(image: bytes, entry: str) -> int:
    """Load the cubin ``image`` into the current context and return the handle
    of its function ``entry`` (a mangled name). The module stays loaded."""
    cu = cuda_driver()
    err, module = cu.cuModuleLoadData(image)
    check_driver(err)
    err, function = cu.cuModuleGetFunction(module, entry.encode())
    if int(err):
        cu.cuModuleUnload(module)
        check_driver(err)
    with _lock:
        _modules.append(module)
    return int(function)


# --- argument types, without Numba


def numba_signature(argtypes) -> tuple:
    """The Numba types of argument descriptors: ``"int64"`` for an integer (every
    one the kernels take), ``"float64"`` (the finishing kernel's ``ddof``),
    ``("array", dtype, layout)`` for a 1-D array
    (:meth:`pyreduce.backends.fastpath.DeviceView.arg_type`)."""
    from numba.cuda import types
    from numba.cuda.np.numpy_support import from_dtype

    scalars = {"int64": types.int64, "float64": types.float64}
    return tuple(
        scalars[t] if isinstance(t, str) else types.Array(from_dtype(t[1]), 1, t[2])
        for t in argtypes
    )


# --- the key


def image_key(kernel, argtypes, cc) -> tuple | None:
    """What the kernel's machine code depends on, or None where it cannot be
    stored: the cache is off, the operator is known only by identity, or this
    process has not seen the toolchain yet."""
    if not diskcache.enabled():
        return None
    tools = toolchain()
    if tools is None:
        return None
    spec = kernel.spec
    if spec is None:  # a kernel outside a plan: its own code key, if it has one
        if kernel.cache_key is None:
            return None
        try:
            own = diskcache.op_key(kernel.cache_key)
        except diskcache.Unkeyable:
            return None
        return ("kernel", kernel.source, own, argtypes, tuple(cc), tools,
                diskcache.code_version())
    try:  # the operator's code, and the finisher's where the kernel finishes
        op = diskcache.op_key(spec.op_key)
        if getattr(spec, "finisher", None) is not None:
            op = (op, diskcache.op_key(spec.finisher))
    except diskcache.Unkeyable:
        return None
    fields = tuple((name, value) for name, value in vars(spec).items()
                   if name not in ("op_key", "finisher"))
    return ("kernel", kernel.source, op, type(spec).__name__, fields, argtypes, tuple(cc),
            tools, diskcache.code_version())


_environment_digest = None


def _environment() -> str:
    """A digest of what steers Numba to a toolkit and its options: package
    versions, the prefix, the CUDA and Numba environment variables and the
    driver's version; taken once per process."""
    global _environment_digest
    if _environment_digest is None:
        import cuda.bindings

        packages = tuple(_installed(name) for name in ("numba", "numba_cuda", "llvmlite"))
        env = tuple(sorted((k, v) for k, v in os.environ.items()
                           if k.startswith(("NUMBA_", "CUDA_", "CONDA_PREFIX", "LD_LIBRARY_PATH"))
                           and k != "NUMBA_ENABLE_CUDASIM"))
        found = (packages, cuda.bindings.__version__, sys.prefix, env, _driver_version())
        _environment_digest = diskcache.digest(diskcache.canonical(found))
    return _environment_digest


def _installed(package: str) -> tuple:
    """Which copy of an installed package this is, without importing it (Numba's
    import is what a warm process avoids): the path, size and modification time
    of its ``__init__.py`` and ``_version.py``, which an install rewrites."""
    from importlib.util import find_spec

    spec = find_spec(package)
    if spec is None or not spec.origin:
        return (package, None)
    found = [package]
    for path in (spec.origin, os.path.join(os.path.dirname(spec.origin), "_version.py")):
        try:
            st = os.stat(path)
            found.append((path, st.st_size, st.st_mtime_ns))
        except OSError:
            found.append((path, None))
    return tuple(found)


def _driver_version() -> int:
    err, version = cuda_driver().cuDriverGetVersion()
    check_driver(err)
    return int(version)


def _stamp_path():
    return diskcache.directory() / diskcache.FORMAT / "toolchain.json"


def _read_stamps() -> dict:
    try:
        with open(_stamp_path()) as f:
            found = json.load(f)
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return {}


_toolchain: dict = {}  # environment digest -> identity, once known in this process


def toolchain() -> tuple | None:
    """The compilers' identity for the key, or None while unknown (see the module)."""
    env = _environment()
    known = _toolchain.get(env)
    if known is not None:
        return known
    stamp = _read_stamps().get(env)
    if not (isinstance(stamp, list) and len(stamp) == 4):
        return None
    path, size, mtime, version = stamp
    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return None
    if [st.st_size, st.st_mtime_ns] != [size, mtime]:
        return None
    found = _toolchain[env] = (env, path, size, mtime, tuple(version))
    return found


def remember_toolchain() -> None:
    """Record the NVVM library Numba loads (loading it if it has not), for
    :func:`toolchain` here and in later processes. Where it cannot be
    identified nothing is recorded: the kernels then stay out of the disk
    cache, and compiling is unaffected."""
    env = _environment()
    if env in _toolchain:
        return
    try:
        stamp = _nvvm_stamp()
    except Exception:  # numba-cuda's NVVM wrapper differs between builds
        diskcache.log.debug("pyreduce cache: NVVM not identified", exc_info=True)
        return
    if stamp is None:
        return
    _toolchain[env] = (env, *stamp[:3], tuple(stamp[3]))
    stamps = _read_stamps()
    if stamps.get(env) == stamp or not diskcache.enabled():
        return
    stamps[env] = stamp
    diskcache.write_file(_stamp_path(), json.dumps(stamps, sort_keys=True).encode())


def _nvvm_stamp() -> list | None:
    """``[path, size, mtime, version]`` of the NVVM library this process loaded
    (found by the name Numba opened it by, else among the mapped files), or None
    where its file is not found."""
    from numba.cuda.cudadrv.nvvm import NVVM

    nvvm = NVVM()
    name = getattr(getattr(nvvm, "driver", None), "_name", "") or ""
    path = (_loaded_path(name) if name else None) or _loaded_path("libnvvm")
    try:
        st = os.stat(path)
    except (OSError, TypeError):
        return None  # not found on disk: nothing to check later
    return [path, st.st_size, st.st_mtime_ns, list(nvvm.get_version())]


def _loaded_path(name: str) -> str | None:
    """The file of a loaded library: ``name`` where it is a path, else (a name
    the system loader resolved) the file this process mapped for it, on Linux."""
    if os.path.isabs(name):
        return name
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip()
                if os.path.basename(path).startswith(os.path.basename(name)):
                    return path
    except OSError:
        pass
    return None


def _context() -> tuple:
    """``(context handle, compute capability)`` of this thread's context."""
    device = current_device()  # makes a context current where none is
    err, ctx = cuda_driver().cuCtxGetCurrent()
    check_driver(err)
    return int(ctx), compute_capability(device)
