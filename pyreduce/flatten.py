"""A gather kernel that copies an N-D strided device array into C order.

Used only for device inputs whose C-order flattening is not a view (a transposed
or sliced 2-D array): the copy goes to library-owned memory, never the input.
"""

from __future__ import annotations

from .codegen import render

__all__ = ["gather_source"]


def gather_source(ndim: int, dialect) -> tuple[str, str]:
    """``(name, source)`` of ``gather(src, dst)`` for ``src.ndim == ndim``."""
    name = f"pyreduce_gather_{ndim}d"
    # Peel indices from the last axis (fastest in C order) to the first.
    unravel = []
    for axis in range(ndim - 1, 0, -1):
        unravel.append(f"i{axis} = r % src.shape[{axis}]")
        unravel.append(f"r = r // src.shape[{axis}]")
    unravel.append("i0 = r")
    index = ", ".join(f"i{a}" for a in range(ndim))
    source = render(
        """
        ${decorator}
        def ${name}(src, dst):
            n = dst.shape[0]
            # `n * 0 +` makes the index int64 (thread indices are int32)
            i = n * 0 + ${bid} * ${bdim} + ${tid}
            step = ${gdim} * ${bdim}
            while i < n:
                r = i
        ${unravel}
                dst[i] = src[${index}]
                i += step
        """,
        decorator=dialect.decorator(),
        name=name,
        bid=dialect.block_idx(),
        bdim=dialect.block_dim(),
        gdim=dialect.grid_dim(),
        tid=dialect.thread_idx(),
        unravel="\n".join("        " + line for line in unravel),
        index=index,
    )
    return name, source
