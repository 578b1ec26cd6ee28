"""The HIP dialect's generated source, checked without numba-hip.

Every variant is generated for numba-hip at wave64 (gfx9: MI200/MI300) and wave32
(gfx10+: RDNA) and read as text and as a Python AST: it must parse, use only
names numba-hip 0.2.1 provides (no ``*_sync``, ``syncwarp``, ``activemask``, lane
masks or ``cuda.``), have the wavefront size baked in as literals, and shuffle
with HIP's spellings. Whether it *compiles* for AMD GPUs is checked by
``tests/amdgcn/compile_variants.py`` in the amdgcn-check environment (numba-hip
cannot be installed next to numba-cuda); whether its wave64/wave32 logic computes
the right result is checked by running the same factories in the CUDA simulator
at warp 64 and 32 (test_kernels.py, test_api.py).
"""

import ast
import builtins
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import pyreduce
from pyreduce import backends
from pyreduce.dialect import CUDA, HIP, SIM
from pyreduce.backends.hip import HipBackend, wavefront_size
from pyreduce.flatten import gather_source
from pyreduce.planner import default_items
from pyreduce.spec import KernelSpec
from pyreduce.variants import VARIANTS, generate

#: ``gpu.*`` names the HIP source may use: all of them exist in numba-hip 0.2.1
#: (``hip.threadfence_block`` and ``hip.shfl``/``shfl_down(value, delta, width)``
#: included; see tests/amdgcn/compile_variants.py for the compiled proof)
HIP_GPU_NAMES = {
    "threadIdx.x", "blockIdx.x", "blockDim.x", "gridDim.x", "syncthreads", "shared.array",
    "shfl_down", "shfl", "threadfence", "threadfence_block", "jit",
}
NAMESPACE = {"gpu", "op", "acc_t", "carry_t", "i32", "i64", "atomic_inc"}
WARP_VARIANTS = [n for n, v in VARIANTS.items() if getattr(v.options, "tail", "warp") != "sync"]
SHUFFLE_VARIANTS = [n for n, v in VARIANTS.items() if getattr(v.options, "tail", "shuffle")
                    == "shuffle"]


def hip_source(variant, warp, dtype=np.float32, block=128):
    v = VARIANTS[variant]
    items = v.default_items or default_items(np.dtype(dtype))
    spec = KernelSpec(variant, dtype, dtype, "op", block, warp, items)
    return generate(spec, HIP)[1]


def sources():
    for variant in VARIANTS:
        for warp in (64, 32):
            for dtype in (np.float32, np.int64):
                yield variant, warp, dtype, hip_source(variant, warp, dtype)


ALL = list(sources())


def gpu_names(tree):
    """Dotted ``gpu.…`` attribute chains used in ``tree``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts, inner = [], node
            while isinstance(inner, ast.Attribute):
                parts.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id == "gpu":
                found.add(".".join(reversed(parts)))
    # keep the longest chains (shared.array, not shared)
    return {n for n in found if not any(m.startswith(n + ".") for m in found)}


def free_names(tree):
    """Names read but never assigned in the module: what the namespace must give."""
    assigned = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    assigned |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Store)}
    assigned |= {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Load)}
    return loaded - assigned - set(dir(builtins))


def test_every_variant_parses_and_uses_only_numba_hip_names():
    for variant, warp, dtype, src in ALL:
        where = (variant, warp, np.dtype(dtype).name)
        tree = ast.parse(src)
        for bad in ("_sync(", "syncwarp", "cuda.", "activemask", "lanemask", "0xffffffff",
                    "launch_bounds"):
            assert bad not in src, (where, bad)
        assert gpu_names(tree) <= HIP_GPU_NAMES, (where, gpu_names(tree) - HIP_GPU_NAMES)
        assert free_names(tree) <= NAMESPACE, (where, free_names(tree) - NAMESPACE)
        assert "@gpu.jit\n" in src


def test_wavefront_size_is_baked_in_as_literals():
    for variant, warp, dtype, src in ALL:
        where = (variant, warp, np.dtype(dtype).name)
        widths = re.findall(r"gpu\.shfl(?:_down)?\((?:carry_t)?\([^()]*\), [^,]+, (\w+)\)\)",
                            src)
        calls = src.count("gpu.shfl")
        assert len(widths) == calls, where  # every shuffle matched by the pattern
        assert set(widths) <= {str(warp)}, (where, widths)
        if variant in WARP_VARIANTS:
            assert calls or "gpu.threadfence_block()" in src, where
            assert f"tid < {warp}:" in src or f"tid % {warp}\n" in src, where
            # the other wavefront size appears nowhere as a width or a lane test
            other = 96 - warp
            assert f", {other}))" not in src and f"tid % {other}\n" not in src, where
        if variant in SHUFFLE_VARIANTS:
            # log2(warp) shuffle steps per warp reduction, 6 at wave64 and 5 at
            # wave32: a loop of literal bounds, delta 1 << step
            steps = set(re.findall(r"for (\w+)_s in range\((\d+)\):\n\s+\1_d = 1 << \1_s\n"
                                   r"\s+\1_o = \S*gpu\.shfl_down\((?:carry_t)?\(\1\), \1_d, ",
                                   src))
            assert {int(k) for _, k in steps} == {warp.bit_length() - 1}, (where, steps)
            literal = re.findall(r"gpu\.shfl_down\((?:carry_t)?\(\w+\), (\d+), ", src)
            assert not literal, (where, literal)


def test_hip_spellings():
    src = hip_source("warp_shuffle", 64)
    # a float32 moves as it is; an int16 rides in an int32 and is cast back
    assert "= (gpu.shfl_down((v), v_d, 64))" in src
    narrow = hip_source("warp_shuffle", 64, np.int16)
    assert "acc_t(gpu.shfl_down(carry_t(v), v_d, 64))" in narrow
    tail = hip_source("shuffle_tail", 32)
    assert re.search(r"v = \(gpu\.shfl\(\(v\), .*tid.*, 32\)\)", tail)
    sync_tail = hip_source("warp_sync_tail", 64)
    assert "if tid < 64:" in sync_tail and "gpu.threadfence_block()" in sync_tail
    last = hip_source("last_block", 64)
    assert "gpu.threadfence()" in last and "atomic_inc(ticket) == gpu.gridDim.x - 1" in last
    assert "gpu.shared.array(1, i32)" in last
    _, gather = gather_source(3, HIP)
    assert "@gpu.jit\n" in gather and not free_names(ast.parse(gather)) - NAMESPACE


def test_same_factories_as_cuda_and_sim():
    """HIP differs from the simulator's source only in single-line spellings, and the
    CUDA and SIM dialects are unchanged (masks, *_sync, syncwarp, launch bounds)."""
    for variant in VARIANTS:
        spec = KernelSpec(variant, np.float32, np.float32, "op", 128, 64,
                          VARIANTS[variant].default_items or 4)
        hip, sim = generate(spec, HIP)[1], generate(spec, SIM)[1]
        assert len(hip.splitlines()) == len(sim.splitlines()), variant
        differ = [(a, b) for a, b in zip(hip.splitlines()[1:], sim.splitlines()[1:]) if a != b]
        for h, s in differ:
            assert re.search(r"shfl|syncwarp|threadfence_block|atomic", h + s), (variant, h, s)
    cuda = generate(KernelSpec("warp_sync_tail", np.float32, np.float32, "op", 256, 32, 2),
                    CUDA)[1]
    assert "@gpu.jit(launch_bounds=256, lto=False)" in cuda and "gpu.syncwarp(0xffffffff)" in cuda
    shfl = generate(KernelSpec("warp_shuffle", np.float32, np.float32, "op", 256, 32, 4), SIM)[1]
    assert "gpu.shfl_down_sync(0xffffffff, (v), v_d)" in shfl
    assert "gpu.atomic.add(ticket, 0, 1)" in generate(
        KernelSpec("last_block", np.int32, np.int32, "op", 64, 32, 4), CUDA)[1]


def test_namespace_and_wavefront_sizes():
    spec = KernelSpec("last_block", np.int8, np.int8, "op", 64, 64, 4)
    backend = HipBackend.__new__(HipBackend)  # no numba-hip here: no __init__
    backend.gpu = object()
    ns = backend.kernel_namespace(spec, op=None)
    assert set(ns) == NAMESPACE
    assert ns["acc_t"] is np.int8 and ns["carry_t"] is np.int32 and ns["i32"] is np.int32
    arch = {"gfx906": 64, "gfx908": 64, "gfx90a": 64, "gfx942": 64, "gfx950": 64,
            "gfx90a:sramecc+:xnack-": 64, "gfx1030": 32, "gfx1100": 32, "gfx1201": 32}
    assert {a: wavefront_size(a) for a in arch} == arch
    with pytest.raises(ValueError):
        wavefront_size("sm_90")


def test_hip_backend_absent_here():
    assert "hip" in backends.BACKENDS
    assert "hip" not in pyreduce.available()  # numba-hip cannot be next to numba-cuda
    with pytest.raises(RuntimeError, match="numba-hip"):
        pyreduce.reduce(np.arange(4.0), "add", backend="hip")


def test_hip_import_path_never_needs_numba_cuda(tmp_path):
    """With numba.cuda (and the cuda package) unimportable, pyreduce, its HIP backend
    module and the HIP source generation still import and work."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'cuda' or name.startswith(('cuda.', 'numba.cuda', 'numba_cuda')):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import numpy as np, pyreduce\n"
        "from pyreduce.backends import hip\n"
        "from pyreduce.dialect import HIP\n"
        "from pyreduce.variants import generate\n"
        "from pyreduce.spec import KernelSpec\n"
        "spec = KernelSpec('last_block', np.float32, np.float32, 'op', 256, 64, 4)\n"
        "src = generate(spec, HIP)[1]\n"
        "assert 'shfl_down' in src\n"
        "print(pyreduce.available(), hip.wavefront_size('gfx942'))\n"
    )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "('cpu',) 64"


def test_batched_kernels_use_only_numba_hip_names():
    """The row, column, segment and scan kernels (pyreduce.variants.FAMILIES) in the HIP
    dialect, at both wavefront sizes: numba-hip's names only, widths baked in."""
    from pyreduce.spec import BatchSpec

    kinds = [dict(family="segments", group=g, source=s, split=split, finish=fin)
             for g in ("thread", "warp", "block") for s in ("rows", "offsets")
             for split in (False, True) for fin in (False, True)
             if not (split and g != "block")]
    # a group of lanes per segment shuffles at its own width
    kinds += [dict(family="segments", group="lanes", lanes=lanes, source=s, unit=unit)
              for lanes in (2, 16) for s in ("rows", "offsets") for unit in (True, False)
              if unit or s == "rows"]
    kinds.append(dict(family="columns"))
    # the narrow kernel: shared memory and barriers
    kinds += [dict(family="columns", narrow=True, unit=unit, split=split, finish=fin)
              for unit in (True, False) for split in (False, True) for fin in (False, True)]
    kinds += [dict(family="scan", split=split, finish=fin, initial=init)
              for split in (False, True) for fin in (False, True) for init in (False, True)]
    for warp in (64, 32):
        for fields in kinds:
            spec = BatchSpec(in_dtype=np.float32, acc_dtype=np.float32, op_key="op",
                             block=128, warp=warp, items=4, **fields)
            src = generate(spec, HIP)[1]
            tree = ast.parse(src)
            assert "_sync(" not in src and "launch_bounds" not in src, fields
            assert gpu_names(tree) <= HIP_GPU_NAMES, (fields, gpu_names(tree))
            assert free_names(tree) <= NAMESPACE, (fields, free_names(tree) - NAMESPACE)
            widths = set(re.findall(r"gpu\.shfl_down\(\w*\(\w+\), \w+, (\d+)\)\)", src))
            assert widths <= {str(fields.get("lanes", warp))}, (fields, widths)
            if fields.get("lanes"):
                assert widths == {str(fields["lanes"])}, (fields, widths)


def test_batched_tuple_and_mapped_accumulators_shuffle_at_their_width():
    """A record accumulator (argmax's (value, index)) and a mapped scalar op
    (nansum) in the segments family at every group width: every field's shuffle
    carries the width of the lanes that reduce one segment (compiled for gfx942
    and gfx1100 by tests/amdgcn/compile_batched.py)."""
    from pyreduce import structured
    from pyreduce.spec import BatchSpec

    for monoid in (structured.argmax_monoid(np.dtype(np.float32)),
                   structured.nansum_monoid(np.dtype(np.float32))):
        names = NAMESPACE | {"fmap"} | ({f"{p}{k}_t" for p in "fc" for k in range(2)}
                                        if monoid.dtype.names else set())
        for warp in (64, 32):
            widths = [("warp", 0), ("block", 0)]
            widths += [("lanes", 1 << k) for k in range(1, warp.bit_length() - 1)]
            for group, lanes in widths:
                for source in ("rows", "offsets"):
                    spec = BatchSpec("segments", np.float32, monoid.dtype, "op", 256, warp, 4,
                                     group=group, source=source, lanes=lanes, mapped=True)
                    src = generate(spec, HIP)[1]
                    where = (monoid.name, warp, group, lanes, source)
                    tree = ast.parse(src)
                    assert gpu_names(tree) <= HIP_GPU_NAMES, where
                    assert free_names(tree) <= names, (where, free_names(tree) - names)
                    shuffles = re.findall(r"gpu\.shfl_down\(\w*\([^()]*\), \w+, (\d+)\)\)",
                                          src)
                    assert len(shuffles) == src.count("gpu.shfl_down"), where
                    assert set(shuffles) == {str(lanes or warp)}, (where, set(shuffles))
                    assert f"lane = tid % {lanes or warp}\n" in src, where


def test_finishing_kernel_source():
    """The finishing kernel of structured reductions (pyreduce.finishing) in the
    HIP dialect: numba-hip's names only, no launch bounds, no warp operations."""
    from pyreduce.finishing import finish_source

    for width, outputs, flagged in ((2, 1, False), (3, 1, True), (2, 2, False)):
        name, src = finish_source(width, outputs, flagged, HIP)
        tree = ast.parse(src)
        assert "@gpu.jit\n" in src and "launch_bounds" not in src
        assert gpu_names(tree) <= {"threadIdx.x", "blockIdx.x", "blockDim.x", "gridDim.x",
                                   "jit"}, gpu_names(tree)
        assert free_names(tree) <= {"gpu", "finish", "res_t"}, free_names(tree)
        assert f"def {name}(" in src


def test_the_hip_backend_reads_a_tensor_that_requires_grad_as_its_values():
    """A PyTorch tensor that requires grad reaches numba-hip as ``x.detach()``
    (its interface refuses the tensor itself), as the CUDA backend reads it;
    any other array as it is."""
    import types

    class Tensor:
        def __init__(self, grad):
            self.requires_grad = grad

        def detach(self):
            return Tensor(False)

    seen = []
    fake = types.SimpleNamespace(hip=types.SimpleNamespace(as_cuda_array=seen.append))
    for grad in (True, False):
        HipBackend.as_device_array(fake, Tensor(grad))
    assert [t.requires_grad for t in seen] == [False, False]
    other = object()
    HipBackend.as_device_array(fake, other)
    assert seen[-1] is other
