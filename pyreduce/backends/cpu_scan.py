"""Prefix scans on the cpu backend: one ordered Numba ``njit`` loop per row.

The rows are scanned in place, in a copy of the input already cast to the
accumulator dtype (NumPy's casts: integers wrap), each element combined on the
right of the prefix before it, so any associative operator is exact.
"""

from __future__ import annotations

import numpy as np

from ..cache import KERNELS
from ..codegen import compile_module, render
from ..dtypes import code
from .opcheck import check_op, host_njit, njit_cast, njit_op

__all__ = ["scan_rows"]


def _source(name: str) -> str:
    return render(
        """
        @njit(nogil=True)
        def ${name}(out, init, seeded):
            for r in range(out.shape[0]):
                have = seeded
                acc = init
                for j in range(out.shape[1]):
                    if have:
                        acc = acc_t(op(acc, out[r, j]))
                    else:
                        acc = out[r, j]
                    have = True
                    out[r, j] = acc
        """,
        name=name,
    )


def _scanner(monoid):
    def build():
        check_op(monoid)
        name = f"pyreduce_cpu_scan_{code(monoid.dtype)}"
        namespace = {"njit": host_njit, "op": njit_op(monoid),
                     "acc_t": njit_cast(monoid.dtype)}
        return compile_module(_source(name), f"<pyreduce {name}>", namespace)[name]

    return KERNELS.get(("cpu", "scan", monoid.cache_key), build)


def scan_rows(rows: np.ndarray, monoid, init=None, exclusive: bool = False) -> np.ndarray:
    """Every row of the 2-D ``rows`` scanned with ``monoid``, as a new array of
    its accumulator dtype: inclusive, ``init`` (if not None) on the left of each
    row; ``exclusive``: each output is the prefix before its element, and a
    row's first is ``init``."""
    out = np.array(rows, dtype=monoid.dtype, order="C")
    seeded = init is not None
    _scanner(monoid)(out, monoid.dtype.type(init if seeded else 0), seeded)
    if exclusive and out.shape[1]:
        out[:, 1:] = out[:, :-1].copy()
        out[:, 0] = init
    return out
