"""Calls along axes as a program makes them, on CuPy float32 arrays: pyreduce's
device time per call (``_timing.piped_seconds``: CUDA events around
back-to-back calls that leave the result on the device) and host time
(``_timing.host_seconds``: back to back, no wait), with CuPy's and
PyTorch's device time in the same process (``--peers``).

    NUMBA_ENABLE_CUDASIM=0 python bench/axes_calls.py now --peers > calls.txt
    PYTHONPATH=../other-checkout NUMBA_ENABLE_CUDASIM=0 python bench/axes_calls.py other
    NUMBA_ENABLE_CUDASIM=0 python bench/axes_calls.py now --peers --structured

The first argument labels the lines (two checkouts compared on one machine,
one after the other). ``--structured``: the structured reductions (mean, var and
argmax) along rows and columns instead of the sums. Every timed call's
answer is checked against CuPy's. The launch path is the compiled one, as a
long-running process has it.
"""

import os
import sys

import cupy as cp
import torch

import pyreduce

sys.path.insert(0, os.path.dirname(__file__))
from _timing import host_seconds, piped_seconds  # noqa: E402

sync = cp.cuda.Device().synchronize


def dev_us(f):
    return piped_seconds(f) * 1e6


def host_us(f):
    """The best of three rounds of 100 calls, each round from an idle GPU."""
    rounds = []
    for _ in range(3):
        sync()
        rounds.append(host_seconds(f, calls=100, rounds=1))
    sync()
    return min(rounds) * 1e6


from pyreduce.backends import fastpath  # noqa: E402

if hasattr(fastpath, "use_compiled_launch"):
    fastpath.use_compiled_launch()
else:  # a checkout from before it: the launches that switch
    for _ in range(fastpath.COMPILE_AFTER + 10):
        pyreduce.sum(cp.ones(16, cp.float32))
tag = sys.argv[1]
peers = "--peers" in sys.argv
SUMS = [("sum", (4096, 4096), 1), ("sum", (1 << 17, 300), 1), ("sum", (1 << 20, 65), 1),
         ("sum", (1 << 20, 100), 1), ("sum", (1 << 20, 5), 1), ("sum", (1 << 23, 9), 1),
         ("sum", (1 << 24, 16), 1), ("sum", (1 << 24, 16), 0), ("sum", (16384, 16384), 1),
         ("sum", (16384, 16384), 0), ("sum", (16, 1 << 24), 1), ("sum", (16, 1 << 24), 0),
         ("sum", (256, 4096, 256), 1),
         ("mean", (4096, 4096), 1), ("mean", (1 << 20, 9), 1), ("argmax", (1 << 20, 9), 1),
         ("argmax", (4096, 4096), 0), ("var", (4096, 4096), 1), ("mean", (1 << 24, 16), 0)]
STRUCTURED = [
    (name, shape, axis)
    for shape, axes in (((4096, 4096), (1, 0)), ((16384, 16384), (1, 0)), ((1 << 17, 300), (1,)),
                        ((1 << 20, 64), (1,)), ((1 << 20, 9), (1,)), ((64, 1 << 20), (1,)))
    for axis in axes for name in ("mean", "var", "argmax")]
CASES = STRUCTURED if "--structured" in sys.argv else SUMS
TORCH = {"sum": torch.sum, "mean": torch.mean, "argmax": torch.argmax,
         "var": lambda a, dim: torch.var(a, dim=dim, correction=0),
         "std": lambda a, dim: torch.std(a, dim=dim, correction=0)}


def case(name, shape, axis):
    x = cp.random.standard_normal(shape, dtype=cp.float32)
    t = torch.as_tensor(x, device="cuda")
    fn = getattr(pyreduce, name)
    kw = dict(device_result=True) if name == "sum" else {}

    def call():
        return fn(x, axis=axis, **kw)

    want = getattr(cp, name)(x, axis=axis)
    err = float(cp.abs(cp.asarray(call()).astype(cp.float64) - want).max())
    assert err <= 1e-3 * max(1.0, float(cp.abs(want).max())), (name, shape, err)
    if name == "argmax":  # the index itself, not a value near it
        assert bool((cp.asarray(call()) == want).all()), (name, shape)
    line = (f"{tag} {name}{shape} axis={axis}: pyreduce {dev_us(call):8.1f} us "
            f"host {host_us(call):6.1f}")
    if peers:
        cu = dev_us(lambda: getattr(cp, name)(x, axis=axis))
        to = dev_us(lambda: TORCH[name](t, dim=axis))
        line += f" | cupy {cu:8.1f} torch {to:8.1f}"
    print(line, flush=True)


for name, shape, axis in CASES:
    case(name, shape, axis)
