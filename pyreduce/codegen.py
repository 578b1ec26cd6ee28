"""Turning generated source into compiled kernels.

A kernel factory (``pyreduce.variants``) writes the Python source of a small module
that defines one ``@gpu.jit`` kernel; this module compiles that source with a
filename that names the spec (``<pyreduce warp_shuffle f4 b256 w32 i4>``), registers
it with ``linecache`` so tracebacks and ``inspect`` show the generated lines, and
keeps the source on the returned :class:`Kernel`.

The names a generated module may use come from its namespace, never from imports:

==============  =============================================================
``gpu``         the backend's kernel module (``numba.cuda``; in the simulator
                Numba swaps in its fake module at launch)
``op``          the operator, compiled as a device function by the backend
``acc_t``       the accumulator's NumPy scalar type, used as a cast
``carry_t``     the type a shuffle moves (shuffles take 32/64-bit ints and floats)
``i32``         ``np.int32``, for the single-pass kernel's shared flag
``vloadN``      ``vloadN(x, i)``: ``x[i : i + N]`` as a tuple, one wide load
                (only where the spec's ``vector`` is ``N > 1``;
                :mod:`pyreduce.backends.vload`)
==============  =============================================================
"""

from __future__ import annotations

import dataclasses
import itertools
import linecache
import string
import textwrap
import threading
import warnings
from typing import Any

from .dtypes import code
from .spec import KernelSpec

__all__ = ["Kernel", "compile_module", "render", "indent", "kernel_name", "field_cast"]


def render(template: str, **values) -> str:
    """Fill a ``string.Template`` (``${name}`` placeholders) after dedenting it.

    Every placeholder must be given: a missing one is a KeyError, not silent text.
    """
    return string.Template(textwrap.dedent(template)).substitute(values)


def field_cast(count: int, value: str = "v") -> str:
    """The expression casting each of the ``count`` fields of the tuple
    ``value`` to its type, ``f0_t``, ``f1_t``, ... (a Numba tuple cannot be
    cast by one call): a tuple accumulator's ``acc_t``."""
    return "(" + ", ".join(f"f{k}_t({value}[{k}])" for k in range(count)) + ")"


def indent(code: str, level: int) -> str:
    """Indent a generated snippet to ``level`` four-space steps."""
    return textwrap.indent(textwrap.dedent(code).strip("\n"), "    " * level)


def kernel_name(spec: KernelSpec) -> str:
    """A Python identifier that encodes the spec, shown by profilers."""
    src, acc = code(spec.in_dtype), code(spec.acc_dtype)
    return (
        f"pyreduce_{spec.variant}_{src}_{acc}"
        f"_b{spec.block}_w{spec.warp}_i{spec.items}"
        + (f"_v{spec.vector}" if spec.vector > 1 else "")
        + ("_finish" if spec.finish else "")
        + ("_finished" if getattr(spec, "finisher", None) is not None else "")
    )


@dataclasses.dataclass(eq=False)
class Kernel:
    """A kernel with the source it comes from.

    ``source`` is the complete generated module; ``make()`` compiles it into the
    backend's callable, ``fn`` (a Numba dispatcher to launch as
    ``fn[grid, block, stream](...)``), on first use of ``fn``: a launch path that
    finds the compiled image elsewhere (:mod:`pyreduce.backends.cubins`) never
    runs the generated module at all.
    """

    spec: KernelSpec
    name: str
    source: str
    filename: str
    make: Any
    #: False where configuring returns the kernel itself (the simulator's kernels
    #: store the last grid on themselves, so a cached launcher would be stale).
    cache_launchers: bool = True
    #: for a kernel outside a plan (``spec`` None: the finishing kernel), what
    #: its machine code depends on besides its source, for the disk cache
    #: (an operator-style code key); None: not kept on disk
    cache_key: Any = None
    #: such a kernel's compiled functions, by device and argument types, for
    #: launches outside Numba's dispatcher (:func:`pyreduce.backends.fastpath.launch_args`)
    functions: dict = dataclasses.field(default_factory=dict, repr=False)
    _launchers: dict = dataclasses.field(default_factory=dict, repr=False)
    _fn: Any = dataclasses.field(default=None, repr=False)
    _lock: Any = dataclasses.field(default_factory=threading.Lock, repr=False)

    def __repr__(self):
        return f"<Kernel {self.name}>"

    @property
    def label(self) -> str:
        """How logs and the disk cache name it."""
        return self.spec.label if self.spec is not None else self.name

    @property
    def fn(self):
        found = self._fn
        if found is None:
            with self._lock:
                if self._fn is None:
                    self._fn = self.make()
                found = self._fn
        return found

    def launcher(self, grid: int, block: int, stream):
        """``fn[grid, block, stream]``, configured once and reused: configuring costs
        microseconds per call, and Numba's low-occupancy warning (small grids are
        deliberate here: a second pass is one block) is raised only then."""
        if not self.cache_launchers:
            return self.fn[grid, block, stream]
        key = (grid, block, stream)
        found = self._launchers.get(key)
        if found is None:
            with warnings.catch_warnings():
                # Numba's message starts with a terminal colour code
                warnings.filterwarnings("ignore", message=r".*Grid size")
                found = self.fn[grid, block, stream]
            if len(self._launchers) >= 256:  # grids vary with n; keep the table small
                self._launchers.clear()
            self._launchers[key] = found
        return found


_serial = itertools.count(1)  # next() on a count is atomic under the GIL


def compile_module(source: str, filename: str, namespace: dict) -> dict:
    """Execute generated ``source`` in ``namespace`` and return the namespace.

    The file name is made unique per call so that two modules never share a
    ``linecache`` entry (tracebacks then always show the right source).
    """
    unique = f"{filename[:-1]} #{next(_serial)}>" if filename.endswith(">") else filename
    linecache.cache[unique] = (len(source), None, source.splitlines(True), unique)
    exec(compile(source, unique, "exec"), namespace)
    return namespace
