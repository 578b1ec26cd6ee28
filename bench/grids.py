"""The grid bound of the structured reductions' layouts: what
``planner.LANES_WAVE`` and the half wave of float32 ``var`` were chosen from.

    NUMBA_ENABLE_CUDASIM=0 python bench/grids.py --out grids.json
    NUMBA_ENABLE_CUDASIM=0 python bench/grids.py --only var --log2 24 --bounds 264 528 1056
    NUMBA_ENABLE_CUDASIM=0 python bench/grids.py --before "last_block_lanes i8b256m4224"

For each call, dtype and size: PyTorch's call, pyreduce's ``variant="auto"``,
and the layout ``auto`` chose (:func:`pyreduce.explain`) with each grid bound
of ``--bounds`` (``Tuning(max_blocks=...)``); with ``--before``, also that
layout as a tuning (a variant and ``i8b256m4224``, as ``bench/columns.py``
spells tunings: the rule a change replaced). Each gives ``[piped, synced]``
microseconds: calls back to back (``_timing.piped_seconds``) and calls each
followed by a synchronisation, medians of three rounds in which the rows take
turns. Each case also records the blocks an SM that each of ``auto``'s
kernels lets reside (its registers, from ``explain``). Every result is
checked against NumPy's first. bfloat16, which CuPy lacks, is a PyTorch
tensor for both libraries.

A call with ``tuning=`` does not take the fast path of a plain structured
call: where the host bounds calls (2**24 elements of a half), a bound that
gives ``auto``'s own grid (1056 blocks: 1024 at 2**24) is slower than
``auto`` for that, not for its grid.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _report import meta, save  # noqa: E402
from _timing import host_seconds, piped_seconds, steady_gpu  # noqa: E402
from layouts import peer_call  # noqa: E402

#: the calls of the study and their NumPy references
CALLS = ("mean", "var", "argmax", "argmin", "minmax")
DISTS = ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "torch")


def _numpy(name: str, host: np.ndarray):
    if name == "minmax":
        return host.min(), host.max()
    return getattr(np, name)(host.astype(np.float64) if name in ("mean", "var") else host)


def _agrees(name: str, got, want) -> bool:
    """pyreduce's answer against NumPy's in float64: exactly for the arg and
    min/max reductions; a mean or variance (float32 for halves, float64 for
    wider inputs) to ``1e-5``, which a float32 result of a float64 sum meets."""
    if name == "minmax":
        return all(float(g) == float(w) for g, w in zip(got, want))
    if name.startswith("arg"):
        return int(got) == int(want)
    return abs(float(got) - float(want)) <= 1e-5 * abs(float(want)) + 1e-7


def inputs(dtype: str, log2: int) -> tuple:
    """``(pyreduce's array, PyTorch's tensor of it, its values on the host)``:
    a CuPy array, or for bfloat16, which CuPy lacks, PyTorch's tensor for both
    (its host values as ``ml_dtypes.bfloat16``)."""
    import cupy as cp
    import torch

    x = cp.random.default_rng(11).standard_normal(2**log2, dtype=cp.float32)
    if dtype == "bfloat16":
        import ml_dtypes

        t = torch.as_tensor(x, device="cuda").to(torch.bfloat16)
        return t, t, t.float().cpu().numpy().astype(ml_dtypes.bfloat16)
    x = (x * 1000).astype(dtype) if np.dtype(dtype).kind in "iu" else x.astype(dtype)
    return x, torch.as_tensor(x, device="cuda"), cp.asnumpy(x)


def before_tuning(text: str):
    """``"last_block_lanes i8b256m4224"`` (a variant, then a tuning as
    ``bench/columns.py`` spells it) as a :class:`pyreduce.Tuning`."""
    from columns import tuning_of

    variant, _, fields = text.partition(" ")
    return tuning_of(fields.strip()).replace(variant=variant)


def measure(name: str, dtype: str, log2: int, bounds, before=None) -> dict:
    """One case's row: its plan, resident blocks an SM, and ``[piped, synced]``
    microseconds for each library and grid bound."""
    import cupy as cp

    import pyreduce

    sync = cp.cuda.Device().synchronize
    x, t, host = inputs(dtype, log2)
    fn = getattr(pyreduce, name)
    e = pyreduce.explain(x, _monoid(name, host.dtype))
    spec = e.plan.spec
    # resources: a dict per kernel, or a note where they are not known
    resident = {name: r.get("blocks_per_sm") if isinstance(r, dict) else None
                for name, r in e.resources.items()}
    layout = dict(variant=spec.variant, items_per_thread=spec.items, block_size=spec.block)
    rows = {"torch": peer_call(name, t), "auto": lambda: fn(x)}
    if before is not None:
        rows["before"] = lambda: fn(x, tuning=before)
    for bound in bounds:
        tuning = pyreduce.Tuning(max_blocks=bound, **layout)
        rows[f"m{bound}"] = lambda tuning=tuning: fn(x, tuning=tuning)
    want = _numpy(name, host)
    for label, f in rows.items():
        if label != "torch" and not _agrees(name, f(), want):
            raise AssertionError(f"{name} {dtype} 2**{log2} {label}: {f()!r}, NumPy {want!r}")
    sync()
    got: dict = {k: [] for k in rows}
    for _ in range(3):
        for label, f in rows.items():
            synced = host_seconds(lambda f=f: (f(), sync()), calls=20)
            got[label].append((piped_seconds(f, calls=10 if log2 >= 28 else 20, rounds=5) * 1e6,
                               synced * 1e6))
    times = {k: [float(np.median([a for a, _ in v])), float(np.median([b for _, b in v]))]
             for k, v in got.items()}
    return {"plan": f"{spec.label}; grid {e.plan.grid}", "blocks_per_sm": resident,
            "times": times}


def _monoid(name: str, dt: np.dtype):
    from pyreduce import structured

    if name in ("mean", "var"):
        return structured.moments_monoid(dt, name)
    return getattr(structured, f"{name}_monoid")(dt)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", choices=CALLS, default=("mean", "argmax", "minmax"))
    p.add_argument("--dtypes", nargs="+", default=("float32", "int32"))
    p.add_argument("--log2", type=int, nargs="+", default=(24, 26, 28))
    p.add_argument("--bounds", type=int, nargs="+", default=(528, 660, 1056, 2112, 4224),
                   help="grid bounds (max_blocks) of auto's layout")
    p.add_argument("--before", help="a layout beside them: 'variant i8b256m4224'")
    p.add_argument("--out", help="JSON of the cases")
    args = p.parse_args(argv)
    before = before_tuning(args.before) if args.before else None
    steady_gpu()
    cases = {}
    for log2 in args.log2:
        for dtype in args.dtypes:
            for name in args.only:
                case = f"{name} {dtype} 2**{log2}"
                row = cases[case] = measure(name, dtype, log2, args.bounds, before)
                cells = "  ".join(f"{k} {a:.1f}/{b:.1f}" for k, (a, b) in row["times"].items())
                print(f"{case}: {row['plan']} {row['blocks_per_sm']}\n  {cells}", flush=True)
                if args.out:
                    save(args.out, {"meta": meta(DISTS), "cases": cases})
    return 0


if __name__ == "__main__":
    sys.exit(main())
