"""What making a PyTorch result after the launch is worth: calls given a
PyTorch tensor, each waited for (``torch.cuda.synchronize``), with the result
tensor taken from the spare the call before made after its launch (``spare``,
pyreduce's own rule: inputs past the L2 cache) and made before the launch
(``before``, what every call did without it, but for the few tenths of a
microsecond of the spare's lookup, which it still runs), PyTorch's own call
beside them, the three taking turns in every round, always in the same cyclic
order (``_timing.interleaved_seconds``).

    NUMBA_ENABLE_CUDASIM=0 python bench/torch_results.py --out torch-results.json

``docs/performance/torch-results-h200.json`` is a run on an H200
(:class:`pyreduce.backends.results.TorchResults`, ``docs/backends.md``).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _report import add_row, has_cuda, meta  # noqa: E402

#: (function, dtype, log2 of the length): bfloat16's only way in is a tensor
CASES = [("sum", "bfloat16", 24), ("mean", "bfloat16", 24), ("sum", "float16", 24),
         ("mean", "float16", 24), ("argmax", "float32", 24), ("sum", "bfloat16", 26),
         ("mean", "bfloat16", 26), ("sum", "float32", 20), ("sum", "float32", 10)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="the JSON, written after every case")
    p.add_argument("--rounds", type=int, default=31)
    args = p.parse_args(argv)
    if not has_cuda():
        raise SystemExit("torch_results.py needs a CUDA GPU (and NUMBA_ENABLE_CUDASIM unset "
                         "or 0)")
    import torch

    from _timing import interleaved_seconds, steady_gpu

    import pyreduce
    from pyreduce.backends import results

    spare_array = results.TorchResults.array

    def before_array(self, token, shape, dtype, address):  # no spare left for the next call
        return token[0]

    steady_gpu()
    sync = torch.cuda.synchronize
    data = {"meta": meta(("numpy", "numba-cuda", "torch"), via="numba"), "rows": []}
    for fn, dt, log2 in CASES:
        g = torch.Generator(device="cuda").manual_seed(1)
        t = torch.randn(2**log2, device="cuda", generator=g).to(getattr(torch, dt))
        ours, theirs = getattr(pyreduce, fn), getattr(torch, fn)
        got, want = ours(t), theirs(t)
        if not isinstance(got, torch.Tensor):
            raise SystemExit(f"{fn} of a tensor gave a {type(got).__name__}, not a tensor")
        agrees = bool(torch.allclose(got.double(), want.double(), rtol=2e-2, atol=1e-3))

        def call(array):
            def timed():
                results.TorchResults.array = array
                ours(t)
                sync()
            return timed

        def peer():
            results.TorchResults.array = spare_array  # the same class write as the others
            theirs(t)
            sync()

        try:
            s = interleaved_seconds({"spare": call(spare_array), "before": call(before_array),
                                     "torch": peer}, calls=40, rounds=args.rounds)
        finally:
            results.TorchResults.array = spare_array
        row = {"function": fn, "dtype": dt, "n": 2**log2, "agrees": agrees,
               "us": {k: round(v * 1e6, 2) for k, v in s.items()}}
        us = row["us"]
        add_row(data, row, f"{fn} {dt} 2**{log2}: spare {us['spare']:.1f}  before "
                f"{us['before']:.1f}  torch {us['torch']:.1f} us  agrees {agrees}", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
