"""Short rows on the GPU: pyreduce's ``sum(x, axis=1)`` with the staged kernel and
with the kernels it replaced (a thread or a group of lanes a row), against
CuPy and PyTorch in the same process, and the host time of pyreduce's call.

    NUMBA_ENABLE_CUDASIM=0 python bench/short_rows.py --rows 8388608 \\
        --lengths 2 3 4 5 8 9 12 15 16 24 32 --dtypes float32 float64 > rows.txt

Each line: device time per call (CUDA events around 20 back-to-back calls that
leave the result on the device, the median of 7 rounds:
``_timing.piped_seconds``) of ``auto`` (what the
planner picks), ``off`` (the staged group turned off: ``STAGED_MAX = 0``) and,
for rows longer than the staged group takes, ``staged`` (its limit raised to
32), each with the kernel it ran; ``host``: the host time of ``auto``'s call
(``_timing.host_seconds``: back to back, no wait); then CuPy's ``x.sum(axis=1)`` and PyTorch's
``t.sum(dim=1)``. Every timed call's answer is checked against a float64 sum
first.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _timing import host_seconds, piped_seconds  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1 << 23])
    p.add_argument("--lengths", type=int, nargs="+", default=[2, 3, 4, 5, 8, 9, 12, 15, 16])
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    args = p.parse_args(argv)

    import cupy as cp
    import torch

    import pyreduce
    from pyreduce import batchplanner

    limit = batchplanner.STAGED_MAX
    for dtype in args.dtypes:
        for rows in args.rows:
            for K in args.lengths:
                x = cp.random.standard_normal((rows, K), dtype=cp.float32).astype(dtype)
                t = torch.as_tensor(x, device="cuda")
                exact = x.astype(cp.float64).sum(axis=1)
                ways = [("auto", limit), ("off", 0)] + ([("staged", 32)] if K > limit else [])
                parts = []
                for name, staged_max in ways:
                    batchplanner.STAGED_MAX = staged_max
                    batchplanner.clear_plans()
                    try:
                        got = pyreduce.sum(x, axis=1)
                        err = float(cp.abs(got.astype(cp.float64) - exact).max())
                        assert err < 1e-2 * K, (dtype, rows, K, name, err)

                        def call():
                            return pyreduce.sum(x, axis=1, device_result=True)

                        spec = pyreduce.explain(x, "add", axis=1).plan.spec
                        kernel = (f"staged{spec.row}x{spec.items}" if spec.row else
                                  f"lanes{spec.lanes}" if spec.lanes else spec.group)
                        parts.append(f"{name} {piped_seconds(call) * 1e6:.1f} us ({kernel})")
                        if name == "auto":
                            parts.append(f"host {host_seconds(call) * 1e6:.1f} us")
                            cp.cuda.Device().synchronize()
                    finally:
                        batchplanner.STAGED_MAX = limit
                        batchplanner.clear_plans()
                cu = piped_seconds(lambda: x.sum(axis=1)) * 1e6
                to = piped_seconds(lambda: t.sum(dim=1)) * 1e6
                print(f"{dtype} {rows} rows of {K}: " + ", ".join(parts)
                      + f" | CuPy {cu:.1f} us, PyTorch {to:.1f} us", flush=True)


if __name__ == "__main__":
    main()
