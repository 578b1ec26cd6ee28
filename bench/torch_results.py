"""What making a PyTorch result after the launch is worth, by size: calls given
a PyTorch tensor, each waited for, with the result tensor taken from the spare
the call before made after its launch (``spare``) and made before the launch
(``before``), PyTorch's own call beside them. Each is the same remembered call
(its express runner), told which way to make its result, so both columns run
at every size whatever pyreduce's rule (``SPARE_BYTES`` of
:mod:`pyreduce.backends.express`, printed as ``rule``). A call's time to a
ready result (from before the call to the end of an event recorded after it)
and the GPU's span between events before and after it, medians of ``--calls``
calls, in ``--rounds`` rounds, the two ways taking turns first.

    NUMBA_ENABLE_CUDASIM=0 python bench/torch_results.py --out torch-results.json

``docs/performance/torch-spare-h100.txt`` and ``.json`` are a run on an H100
(:class:`pyreduce.backends.results.TorchResults`, ``docs/backends.md``).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _report import add_row, has_cuda, meta  # noqa: E402

#: (function, dtype, log2 of the length): bfloat16's only way in is a tensor
CASES = [(fn, dt, log2) for log2 in (12, 20, 22, 24, 25)
         for fn, dt in (("sum", "bfloat16"), ("mean", "bfloat16"), ("sum", "float32"))]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="the JSON, written after every case")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=300)
    args = p.parse_args(argv)
    if not has_cuda():
        raise SystemExit("torch_results.py needs a CUDA GPU (and NUMBA_ENABLE_CUDASIM unset "
                         "or 0)")
    import numpy as np
    import torch

    from _timing import ready_span_us, steady_gpu

    import pyreduce
    from pyreduce import callmemo

    steady_gpu()
    data = {"meta": meta(("numpy", "numba-cuda", "torch"), via="numba"), "rows": []}
    for fn, dt, log2 in CASES:
        g = torch.Generator(device="cuda").manual_seed(1)
        t = torch.randn(2**log2, device="cuda", generator=g).to(getattr(torch, dt))
        ours, theirs = getattr(pyreduce, fn), getattr(t, fn)
        callmemo.clear()
        got, want = ours(t), theirs()
        if not isinstance(got, torch.Tensor):
            raise SystemExit(f"{fn} of a tensor gave a {type(got).__name__}, not a tensor")
        agrees = bool(torch.allclose(got.double(), want.double(), rtol=2e-2, atol=1e-3))
        for _ in range(50):
            ours(t)
        (entry,) = callmemo._MEMO._data.values()  # the call's remembered runner
        runner = entry.run
        rule = runner.spare
        found: dict = {"spare": [], "before": [], "torch": []}
        try:
            for k in range(args.rounds):
                for way in (("before", "spare") if k % 2 == 0 else ("spare", "before")):
                    runner.spare = way == "spare"
                    for _ in range(20):
                        ours(t)
                    found[way].append(ready_span_us(lambda: ours(t), "torch", args.calls))
                found["torch"].append(ready_span_us(theirs, "torch", args.calls))
        finally:
            runner.spare = rule
        m = {k: np.median(np.array(v), axis=0) for k, v in found.items()}
        row = {"function": fn, "dtype": dt, "n": 2**log2, "agrees": agrees, "rule_spare": rule,
               "ready_us": {k: round(float(v[0]), 2) for k, v in m.items()},
               "span_us": {k: round(float(v[1]), 2) for k, v in m.items()}}
        r, s = row["ready_us"], row["span_us"]
        add_row(data, row, f"{fn} {dt} 2**{log2} (rule: spare {rule}): before ready "
                f"{r['before']:.1f} span {s['before']:.1f} | spare ready {r['spare']:.1f} "
                f"span {s['spare']:.1f} | torch ready {r['torch']:.1f} span {s['torch']:.1f} us"
                f"  agrees {agrees}", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
