"""Compile pyreduce's CUDA kernels to PTX with NVVM, on a machine with no GPU.

Numba's CUDA simulator runs the generated kernels as Python: it does not type
them. A kernel that the simulator runs can still fail to compile for a GPU (a
record stored into a float array in a branch no test reaches, say). This check
types, lowers and compiles every kind of kernel pyreduce generates for the
``cuda`` backend, through the backend's own kernel builder
(``CudaBackend.kernel``, ``CudaBackend.finish_kernel``), with numba-cuda's
``compile_ptx`` for a compute capability (9.0 by default). It needs NVVM and
NVRTC (the ``cuda13`` or ``cuda`` extra's toolkit wheels, or a CUDA toolkit),
not a GPU or a driver. **Nothing runs.**

What it compiles:

* every 1-D variant of :data:`pyreduce.variants.VARIANTS` for float32 ``add``,
  a float64 user lambda and float32 ``argmax`` (a record accumulator), and
  the striped variants' vector loads for the cases of :data:`STRIPED`;
* the batched kernels of every group and source
  (``tests/amdgcn/compile_batched.py``'s kinds: thread, lanes, warp, block, a
  split pass and its finishing pass, staged rows, strided rows, columns) for
  float32 sum, argmax and nansum;
* the rows and columns kernels that finish their outputs
  (``BatchSpec.finisher``) for the accumulators of :data:`FINISHED`, in every
  kind that writes outputs;
* rows whose lanes summarise their runs in float32 first
  (``BatchSpec.f32_tiles``), the columns kernels whose outputs' runs of rows
  are (``pyreduce.spec.column_runs``), and the 1-D first passes that do
  (``KernelSpec.f32_tiles``), for the cases of :data:`TILED`;
* the finishing kernel of each structured reduction.

Usage (from the checkout)::

    python tests/ptx/compile_kernels.py [--cc 9.0] [--only SUBSTRING] [--shard I/N]

It prints one line per kernel and exits non-zero if any failed to compile
(``tests/ptx/run.sh`` runs it in two processes, as CI does).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

WARP, BLOCK = 32, 256

#: 1-D cases: (label, dtype, op)
VARIANT_CASES = (
    ("f32 add", "float32", "add"),
    ("f64 lambda", "float64", "lambda a, b: a - a * 0.5 + b"),
    ("f32 argmax", "float32", "argmax"),
    ("c16 add into f8", "complex128", "add:float64"),  # the real parts, as loaded
)

#: the striped variants' 1-D kernels with their vector loads, as the planner
#: lays them out (4-byte items: 16 a lane, 8-byte: 4), an element map among them
STRIPED = (("float32", "add"), ("int32", "max"), ("float64", "nansum"), ("float16", "add"))
#: the structured reductions whose rows kernels finish their outputs, by input
#: dtype (a record of two float64, of four, of a value and an int64 index);
#: ``op:dtype``, finished in a ``dtype=`` (a real result made complex too)
FINISHED = (("float32", "mean"), ("float32", "std"), ("float32", "argmax"),
            ("float64", "var"), ("float64", "argmax"), ("float32", "var:float64"),
            ("float32", "mean:complex64"), ("float64", "std:complex128"))


#: rows whose lanes summarise their loaded runs in float32 (BatchSpec.f32_tiles)
TILED = (("float32", "var"), ("float32", "argmax"), ("float16", "std"), ("float32", "mean"))
GROUPS_TILED = ("lanes", "warp", "block")


def toolkit_found() -> str | None:
    """Why NVVM or NVRTC cannot be used here, or None where both load."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        for lib in ("nvvm", "nvrtc"):
            load_nvidia_dynamic_lib(lib)
    except Exception as exc:  # noqa: BLE001  (any failure means: no toolkit)
        return f"{type(exc).__name__}: {exc}"
    return None


def _monoid(dtype: str, op: str):
    import numpy as np

    from pyreduce import structured
    from pyreduce.ops import as_monoid

    dt = np.dtype(dtype)
    if op == "argmax":
        return structured.argmax_monoid(dt)
    if op.startswith("lambda"):
        return as_monoid(eval(op), dt)  # noqa: S307
    if op == "nansum":  # an element map (NaN to zero) before a built-in add
        return structured.nansum_monoid(dt)
    name, _, result = op.partition(":")
    if name in ("mean", "var", "std"):
        return structured.moments_monoid(dt, name, ddof=1 if name != "mean" else 0,
                                         result=result or None)
    return as_monoid(name, dt, acc_dtype=result or None)


def _finished_signature(spec, finisher):
    """A batched kernel's arguments where its outputs are finished results."""
    from numba import from_dtype, types

    import compile_batched

    sig = list(compile_batched.batch_signature(spec))
    from pyreduce.variants.segments import arguments

    sig[arguments(spec.source).index("out")] = types.Array(from_dtype(finisher.dtype), 1, "C")
    return tuple(sig)


def jobs():
    """``(label, kernel maker, signature)`` of every kernel compiled."""
    import dataclasses


    import numpy as np

    import compile_batched
    import compile_variants  # the 1-D kernels' signature, as the AMDGCN check gives it
    from pyreduce.backends.numba_cuda import CudaBackend
    from pyreduce.planner import HALF_STRIPED_ITEMS, STRIPED_LOADS, DeviceInfo, default_items
    from pyreduce.spec import KernelSpec, column_runs
    from pyreduce.variants import VARIANTS, tree

    backend = CudaBackend()
    device = DeviceInfo("no device (ptx check)", ("ptx-check",), 1, 2048, 32, WARP)
    for label, dtype, op in VARIANT_CASES:
        monoid = _monoid(dtype, op)
        for name, v in VARIANTS.items():
            if v.commutative_only and not monoid.commutative:
                continue
            items = v.default_items or default_items(monoid.dtype)
            spec = KernelSpec(name, np.dtype(dtype), monoid.dtype, monoid.key, BLOCK, WARP,
                              items, mapped=monoid.map is not None)
            yield (f"variant {name} {label}",
                   lambda spec=spec, monoid=monoid: backend.kernel(spec, monoid, device),
                   compile_variants._signature(spec, v.layout == "single_pass"))
    for dtype, op in STRIPED:  # the vector loads spread over a warp's tile
        monoid, dt = _monoid(dtype, op), np.dtype(dtype)
        for name, v in VARIANTS.items():
            if not getattr(v.options, "striped", False):
                continue
            items = (HALF_STRIPED_ITEMS if dt.itemsize == 2  # summed in float32
                     else STRIPED_LOADS[dt.itemsize][0] * default_items(dt))
            spec = KernelSpec(name, dt, monoid.dtype, monoid.key, BLOCK, WARP,
                              items, 16 // dt.itemsize,
                              mapped=monoid.map is not None)
            yield (f"striped variant {name} {dtype} {op}",
                   lambda spec=spec, monoid=monoid: backend.kernel(spec, monoid, device),
                   compile_variants._signature(spec, v.layout == "single_pass"))
    for dtype, op in TILED:  # 1-D first passes that summarise runs in float32
        monoid = _monoid(dtype, op)
        for name, v in VARIANTS.items():
            if v.fixed_tree or v.factory is tree or (v.default_items or 8) % 4:
                continue  # the fixed tree's leaves are its own; a shared tree of scalars
            spec = KernelSpec(name, np.dtype(dtype), monoid.dtype, monoid.key, BLOCK, WARP,
                              v.default_items or 8, 4, mapped=True, f32_tiles=True)
            yield (f"tiled variant {name} {dtype} {op}",
                   lambda spec=spec, monoid=monoid: backend.kernel(spec, monoid, device),
                   compile_variants._signature(spec, v.layout == "single_pass"))
    for label, builder in compile_batched.BATCH_CASES:
        monoid = compile_batched.batch_monoid(builder)
        for kind, fields in compile_batched.batch_kinds(WARP):
            if fields.get("finish") and monoid.map is not None and monoid.dtype.names is None:
                continue
            spec = compile_batched.batch_spec(monoid, "float32", fields, WARP, BLOCK)
            yield (f"batched {kind} {label}",
                   lambda spec=spec, monoid=monoid: backend.kernel(spec, monoid, device),
                   compile_batched.batch_signature(spec))
    for dtype, op in FINISHED:
        monoid = _monoid(dtype, op)
        fin = monoid.finisher
        for kind, fields in compile_batched.batch_kinds(WARP):
            if fields.get("split") or fields.get("source", "rows") != "rows":
                continue  # a rows or columns kernel that writes the outputs finishes them
            spec = compile_batched.batch_spec(monoid, dtype, fields, WARP, BLOCK)
            spec = dataclasses.replace(spec, finisher=(fin.key, fin.ddof, 1))
            yield (f"finished {kind} {dtype} {op}",
                   lambda spec=spec, monoid=monoid: backend.kernel(spec, monoid, device),
                   _finished_signature(spec, fin))
    for dtype, op in TILED:
        monoid = _monoid(dtype, op)
        fin = monoid.finisher
        for kind, fields in compile_batched.batch_kinds(WARP):
            if (fields.get("source") != "rows" or fields.get("group") not in GROUPS_TILED
                    or fields.get("finish") or "strided" in kind):
                continue
            spec = compile_batched.batch_spec(monoid, dtype, fields, WARP, BLOCK)
            items = 16 if spec.group in ("lanes", "block") else 8  # as the planner's
            spec = dataclasses.replace(spec, vector=4, items=items, f32_tiles=True)
            if not spec.split:  # as the planner makes the last pass: finished
                spec = dataclasses.replace(spec, finisher=(fin.key, fin.ddof, 1))
            yield (f"tiled {kind} {dtype} {op}",
                   lambda spec=spec, monoid=monoid: backend.kernel(spec, monoid, device),
                   _finished_signature(spec, fin) if spec.finisher
                   else compile_batched.batch_signature(spec))
    for dtype, op in TILED:  # columns whose outputs' runs of rows are summarised
        monoid = _monoid(dtype, op)
        fin = monoid.finisher
        for kind, fields in compile_batched.batch_kinds(WARP):
            if fields.get("family") != "columns" or fields.get("finish"):
                continue
            spec = compile_batched.batch_spec(monoid, dtype, fields, WARP, BLOCK)
            if not column_runs(spec.op_key, spec.narrow):
                continue  # the narrow kernel's runs keep no index
            spec = dataclasses.replace(spec, vector=2 if spec.unit else 1, f32_tiles=True)
            if not spec.split:  # as the planner makes the last pass: finished
                spec = dataclasses.replace(spec, finisher=(fin.key, fin.ddof, 1))
            yield (f"tiled {kind} {dtype} {op}",
                   lambda spec=spec, monoid=monoid: backend.kernel(spec, monoid, device),
                   _finished_signature(spec, fin) if spec.finisher
                   else compile_batched.batch_signature(spec))
    for label, builder in compile_batched.FINISH_CASES:
        monoid = compile_batched.finish_monoid(builder)
        fin = monoid.finisher
        yield (f"finishing {label}",
               lambda fin=fin, monoid=monoid: backend.finish_kernel(fin, monoid.dtype,
                                                                    fin.counted),
               compile_batched.finish_signature(fin, monoid.dtype, fin.counted))


def main(argv=None) -> int:
    # run as a script only: the checkout and the AMDGCN check's kinds and
    # signatures importable, and numba-cuda's real target, not its simulator
    # (importing this module, as pytest's doctest collection does, changes nothing)
    sys.path.insert(0, os.path.join(HERE, "..", "amdgcn"))
    sys.path.insert(0, os.path.join(HERE, "..", ".."))
    os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cc", default="9.0", help="compute capability (default 9.0)")
    ap.add_argument("--only", help="compile only kernels whose label contains this")
    ap.add_argument("--shard", default="0/1",
                    help="I/N: compile every Nth kernel from the Ith (for N processes)")
    args = ap.parse_args(argv)
    missing = toolkit_found()
    if missing:
        print(f"no NVVM/NVRTC: {missing}", file=sys.stderr)
        return 2
    from numba import cuda
    from numba.cuda import dispatcher

    cc = tuple(int(p) for p in args.cc.split("."))
    # device functions (the operator, the finisher) are compiled for the current
    # device's compute capability: here there is none, so it is the one asked for
    dispatcher.get_current_device = lambda: type("NoDevice", (), {"compute_capability": cc})
    failed = total = 0
    t0 = time.perf_counter()
    shard, shards = (int(p) for p in args.shard.split("/"))
    for i, (label, make, sig) in enumerate(jobs()):
        if (args.only and args.only not in label) or i % shards != shard:
            continue
        try:
            kernel = make()
        except ValueError as exc:  # a variant that refuses this op: never built
            print(f"refused {label}: {exc}", flush=True)
            continue
        total += 1
        t = time.perf_counter()
        try:
            # with the kernel's launch bounds, as its dispatcher compiles it
            cuda.compile_ptx(kernel.fn.py_func, sig, cc=cc,
                             launch_bounds=kernel.fn.targetoptions.get("launch_bounds"))
        except Exception as exc:  # noqa: BLE001  (reported, then the next)
            failed += 1
            text = str(exc).strip().splitlines()
            print(f"FAILED {label}: {type(exc).__name__}: {' | '.join(text[:3])[:600]}",
                  flush=True)
            continue
        print(f"ok {label} ({time.perf_counter() - t:.2f} s)", flush=True)
    print(f"{total} kernels, {failed} failed, {time.perf_counter() - t0:.0f} s (cc {args.cc})")
    return 1 if failed or not total else 0


if __name__ == "__main__":
    sys.exit(main())
