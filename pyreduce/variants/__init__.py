"""Kernel variants: presets of two kernel factories, listed in a plain registry.

A factory is ``build(spec, dialect, name, options) -> source``: it writes a module
defining one kernel called ``name`` with the calling convention of
:mod:`pyreduce.variants._blocks`. A :class:`Variant` names a factory, its options,
the launch layout and its default items per thread. The registry below is the only
place a variant is named; :class:`pyreduce.planner.Tuning` and :func:`generate`
validate against it.

The first eleven entries follow the reduction tutorial step by step (``step``), so
the generated source of one can be diffed against the next
(:func:`pyreduce.variant_source`).

Layouts:

``multi_pass``
    one tile per block; passes repeat over the partials until one value is left.
``two_pass``
    a bounded grid whose blocks loop over their ranges, then one block.
``single_pass``
    a bounded grid; the last block to finish reduces the partials.

``pairwise`` (``deterministic=True``) is the one variant outside the tutorial's
two factories: it computes the fixed tree of :mod:`pyreduce.deterministic`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..codegen import kernel_name
from ..spec import BatchSpec, KernelSpec, default_items
from . import columns, pairwise, scan, segments, tree, warp_shuffle

__all__ = ["Variant", "VARIANTS", "FAMILIES", "LAYOUTS", "generate", "variant_source",
           "finishes"]

LAYOUTS = ("multi_pass", "two_pass", "single_pass")


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    step: int | None  # position in the tutorial's sequence; None: not a tutorial step
    factory: Any  # a module with ``build``
    options: Any
    layout: str
    default_items: int | None  # None: enough for 16 bytes per thread
    description: str
    #: True if the variant reorders elements and so refuses non-commutative ops.
    commutative_only: bool = False
    #: True if it computes the fixed tree of :mod:`pyreduce.deterministic`: each
    #: block's range is then a power of two of tiles (an aligned subtree), and an
    #: initial value is combined after the tree's root.
    fixed_tree: bool = False

    @property
    def items_multiple(self) -> int:
        """Items per thread must be a multiple of this (each of a thread's shared
        slots gets an equal run; each thread holds whole leaves)."""
        return getattr(self.options, "items_multiple", 1)

    def build(self, spec, dialect, name) -> str:
        return self.factory.build(spec, dialect, name, self.options)


def _tree(name, step, description, items, layout="multi_pass", **options):
    return Variant(name, step, tree, tree.Options(**options), layout, items, description)


def _warp(name, step, description, items, layout, **options):
    return Variant(
        name, step, warp_shuffle, warp_shuffle.Options(**options), layout, items, description
    )


VARIANTS = {
    v.name: v
    for v in (
        _tree("naive", 1, "interleaved tree, tid % (2*s) == 0 (divergent warps)", 1,
              addressing="interleaved", unroll=False),
        _tree("reduced_divergence", 2, "same data flow, work on low threads: j = 2*s*tid "
              "(bank conflicts)", 1, addressing="strided_index", unroll=False),
        _tree("sequential", 3, "sequential addressing, strides halving "
              "(conflict-free)", 1, unroll=False),
        _tree("upper_half", 4, "every thread loads two elements and combines them "
              "(first op during load)", 2, unroll=False),
        _tree("warp_sync_tail", 5, "last warp's steps meet at syncwarp, not at block "
              "barriers", 2, unroll=False, tail="syncwarp"),
        _tree("unrolled", 6, "every step unrolled, strides and block size as literals",
              2, tail="syncwarp"),
        _tree("shuffle_tail", 7, "last warp reduces in registers with shuffles", 2,
              tail="shuffle"),
        _warp("warp_reduce", 8, "warp reductions everywhere, warp partials through "
              "shared memory", 2, "multi_pass"),
        _warp("items_per_thread", 9, "several items per thread: bookkeeping amortised",
              None, "multi_pass"),
        _warp("warp_shuffle", 10, "two-pass: a bounded grid loops over the input, one "
              "block finishes", None, "two_pass"),
        _warp("last_block", 11, "single pass: the last block to finish (atomic ticket "
              "after a fence) reduces the partials", None, "single_pass", last_block=True),
        Variant("last_block_lanes", None, warp_shuffle,
                warp_shuffle.Options(last_block=True, lanes=True), "single_pass", None,
                "single pass, each lane accumulating across warp tiles and one shuffle "
                "reduction per warp (reorders: commutative ops only)", commutative_only=True),
        Variant("last_block_striped", None, warp_shuffle,
                warp_shuffle.Options(last_block=True, lanes=True, striped=True), "single_pass",
                None, "single pass, each block reading a block tile at a time as one run, its "
                "warps taking turns and each lane accumulating vectors spread over the warp's "
                "tiles (reorders: commutative ops only)", commutative_only=True),
        Variant("warp_shuffle_striped", None, warp_shuffle,
                warp_shuffle.Options(lanes=True, striped=True), "two_pass", None,
                "two-pass, the loads of last_block_striped (reorders: commutative ops only)",
                commutative_only=True),
        _warp("warp_shuffle_x2", None, "two-pass warp shuffles loading two warp tiles "
              "per iteration before reducing them", None, "two_pass", tiles=2),
        _warp("warp_shuffle_x4", None, "the same with four warp tiles per iteration",
              None, "two_pass", tiles=4),
        Variant("warp_shuffle_lanes", None, warp_shuffle,
                warp_shuffle.Options(lanes=True), "two_pass", None,
                "two-pass, each lane accumulating across warp tiles and one shuffle "
                "reduction per warp (reorders: commutative ops only)", commutative_only=True),
        _warp("last_block_x2", None, "single pass loading two warp tiles per iteration "
              "before reducing them", None, "single_pass", last_block=True, tiles=2),
        _tree("shared_tree", None, "unrolled sequential tree with block barriers, "
              "two-pass layout", None, "two_pass"),
        _tree("double_shared", None, "shared array doubled, first combination in "
              "shared memory (2x TGSM)", 4, "two_pass", tail="syncwarp", shared_factor=2),
        # one leaf per lane: on an H100 (bench/deterministic.py time, 2**28) 4 items cost
        # 4% (float32) and 2% (float64) against the default path, 8 items 5% and 21%
        Variant("pairwise", None, pairwise, pairwise.Options(), "single_pass", 4,
                "reproducible: the fixed pairwise tree of deterministic=True, the same for "
                "every tuning, warp size and GPU", fixed_tree=True),
    )
}


#: The factories of batched reductions (a :class:`pyreduce.spec.BatchSpec`'s
#: ``family``): many results per launch, with their own calling conventions, so
#: not in :data:`VARIANTS`, which holds the presets of the 1-D reduction.
FAMILIES = {"segments": segments, "columns": columns, "scan": scan}


def finishes(variant: str) -> bool:
    """Whether the kernels of ``variant`` can finish a structured reduction in
    the launch that writes its result (``KernelSpec.finisher``)."""
    found = VARIANTS.get(variant)
    return found is not None and getattr(found.factory, "FINISHES", False)


def generate(spec, dialect) -> tuple[str, str]:
    """``(kernel name, module source)`` for ``spec`` (a ``KernelSpec`` or a
    ``BatchSpec``) in ``dialect``."""
    if isinstance(spec, BatchSpec):
        factory = FAMILIES[spec.family]
    elif spec.variant in VARIANTS:
        factory = VARIANTS[spec.variant]
    else:
        raise ValueError(f"unknown variant {spec.variant!r}; known: {', '.join(VARIANTS)}")
    name = kernel_name(spec)
    header = f"# generated by pyreduce: {spec.label} ({dialect.name})\n"
    return name, header + factory.build(spec, dialect, name)


def variant_source(
    name: str,
    dtype="float32",
    *,
    block_size: int = 256,
    warp_size: int = 32,
    items_per_thread: int | None = None,
    acc_dtype=None,
) -> str:
    """The generated source of variant ``name`` for a spec, without compiling it,
    so that one tutorial step can be read and diffed against the next.

    >>> src = variant_source("naive", "int32", block_size=64)
    >>> "tid % (2 * s) == 0" in src and "gpu.shared.array(64, acc_t)" in src
    True
    """
    from ..dialect import CUDA  # late: the backends import it, `import pyreduce` need not

    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    dt = np.dtype(dtype)
    items = items_per_thread or VARIANTS[name].default_items or default_items(dt)
    spec = KernelSpec(name, dt, np.dtype(acc_dtype or dt), "op", block_size, warp_size, items)
    return generate(spec, CUDA)[1]
