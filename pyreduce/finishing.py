"""The finishing kernel: every lane's tuple accumulator made into its result,
one lane per loop step, by a structured reduction's scalar finisher
(:mod:`pyreduce.finishers`).

One source serves the GPU (a grid-stride loop in a :class:`~pyreduce.dialect.Dialect`:
CUDA, the simulator, HIP) and the host (a plain loop for ``njit``), so the
finisher's arithmetic is written once. The generated function is
``name(acc, out0[, out1][, flags], ddof)``:

``acc``
    the accumulators, a 1-D record array (fields ``f0``, ``f1``, ...), one per lane;
``out0``, ``out1``
    the results, 1-D, one per lane (``out1``: minmax's second array); their
    length is the number of lanes;
``flags``
    (``flagged`` only) a 1-element int32 array, set to 1 where some lane is
    flagged by the finisher (an empty lane: NumPy's warning or error), else
    left as it is; every thread that sets it writes the same value;
``ddof``
    a float the finisher takes (var's delta degrees of freedom; unused by others).

The names the module uses come from its namespace: ``gpu`` (the kernel module),
``njit`` (on the host), ``finish(acc, ddof)`` (the scalar finisher, returning
the result(s) and then the flag) and ``res_t`` (the result's scalar type: each
value is cast to it before it is stored, as the host's NumPy finishers cast, so
an ``out=`` or ``dtype=`` of another type gets the same rounding).
"""

from __future__ import annotations

from .codegen import render

__all__ = ["finish_source"]


def finish_source(width: int, outputs: int, flagged: bool, dialect=None) -> tuple[str, str]:
    """``(name, source)`` of the finishing loop over accumulators of ``width``
    fields giving ``outputs`` results (1 or 2) per lane; ``dialect`` None: the
    host's ``njit`` loop, else the GPU kernel in that dialect."""
    if outputs not in (1, 2):
        raise ValueError(f"a finisher gives one or two results per lane, not {outputs}")
    fields = ", ".join(f"acc[i]['f{k}']" for k in range(width))
    outs = [f"out{k}" for k in range(outputs)]
    params = ", ".join(["acc", *outs] + (["flags"] if flagged else []) + ["ddof"])
    body = [f"r = finish(({fields},), ddof)"]
    body += [f"{o}[i] = res_t(r[{k}])" for k, o in enumerate(outs)]
    if flagged:
        body += [f"if r[{outputs}]:", "    flags[0] = 1"]
    name = f"pyreduce_finish_f{width}_o{outputs}" + ("_flagged" if flagged else "")
    if dialect is None:
        source = render(
            """
            @njit(nogil=True)
            def ${name}(${params}):
                for i in range(out0.shape[0]):
            ${body}
            """,
            name=name, params=params, body=_lines(body, 2),
        )
    else:
        source = render(
            """
            ${decorator}
            def ${name}(${params}):
                n = out0.shape[0]
                # `n * 0 +` makes the index int64 (thread indices are int32)
                i = n * 0 + ${bid} * ${bdim} + ${tid}
                step = ${gdim} * ${bdim}
                while i < n:
            ${body}
                    i += step
            """,
            decorator=dialect.decorator(), name=name, params=params, body=_lines(body, 2),
            bid=dialect.block_idx(), bdim=dialect.block_dim(), gdim=dialect.grid_dim(),
            tid=dialect.thread_idx(),
        )
    return name, source


def _lines(lines: list[str], level: int) -> str:
    return "\n".join("    " * level + line for line in lines)
