"""The shared-memory tree family: the first seven steps of the reduction tutorial.

One factory, four knobs (:class:`Options`); each registered variant is a preset:

``addressing``
    ``interleaved``: thread ``t`` is active when ``t % 2s == 0`` and combines slots
    ``t`` and ``t + s`` (divergent warps). ``strided_index``: the same data flow with
    the work moved to low threads, ``j = 2 s t`` (no divergence, bank conflicts).
    ``sequential``: thread ``t < s`` combines slots ``t`` and ``t + s``, strides
    halving (no divergence, no conflicts).
``unroll``
    steps as a Python ``while`` over a run-time stride, or unrolled with literal
    strides (the tutorial's ``static_for``).
``tail``
    ``sync``: a block barrier after every step. ``syncwarp``: once a single warp is
    left, its steps meet at ``syncwarp`` instead (lanes of a warp are not in
    lockstep on Volta and later). ``shuffle``: the last warp reduces in registers.
``shared_factor``
    2 doubles the shared array so the first combination happens in shared memory
    (the compute-shader article's "2x TGSM"): each thread stores two runs.

Every thread first folds ``items / shared_factor`` neighbouring elements per run
while loading ("first op during load"). The block walks its range in tiles; thread
0 folds each tile's result into the block's accumulator.

Order is kept in all of them. Interleaved and strided addressing combine
neighbours by construction. Sequential addressing pairs slot ``t`` with ``t + S/2``,
which only a commutative op tolerates, so runs are *stored* bit-reversed: run ``r``
goes to slot ``bitrev(r)``. Before the step with stride ``s``, slot ``u < 2s`` then
holds a group of whole runs starting at run ``bitrev(u)``, and slot ``u + s`` holds
the group right after it: every step combines neighbours, left operand first. A
group holds data exactly when its first run is below ``valid`` (the number of runs
holding data, a prefix), which gives each step its guard
``bitrev(t) + S/(2s) < valid``.
"""

from __future__ import annotations

import dataclasses

from ..codegen import render
from ..dtypes import is_tuple
from ..spec import KernelSpec
from ._blocks import block_range, combine, fold_items, shuffle_idx, snippet, warp_reduce

ADDRESSING = ("interleaved", "strided_index", "sequential")
TAILS = ("sync", "syncwarp", "shuffle")


@dataclasses.dataclass(frozen=True)
class Options:
    addressing: str = "sequential"
    unroll: bool = True
    tail: str = "sync"
    shared_factor: int = 1

    def __post_init__(self):
        if self.addressing not in ADDRESSING:
            raise ValueError(f"addressing {self.addressing!r} not in {ADDRESSING}")
        if self.tail not in TAILS:
            raise ValueError(f"tail {self.tail!r} not in {TAILS}")
        if self.tail != "sync" and self.addressing != "sequential":
            raise ValueError("warp tails need sequential addressing")
        if self.shared_factor not in (1, 2):
            raise ValueError(f"shared_factor {self.shared_factor} not in (1, 2)")
        if self.shared_factor == 2 and self.addressing == "interleaved":
            raise ValueError("interleaved addressing has one slot per thread")

    @property
    def items_multiple(self) -> int:
        """Each of a thread's shared slots gets an equal run."""
        return self.shared_factor


def _log2(v: int) -> int:
    return v.bit_length() - 1


def bitrev(expr: str, bits: int) -> str:
    """Expression for ``expr`` with its low ``bits`` bits reversed."""
    e = expr if expr.isidentifier() else f"({expr})"
    terms = [f"(({e} >> {k}) & 1) << {bits - 1 - k}" for k in range(bits)]
    return " | ".join(terms) if terms else "0"


def _load(spec: KernelSpec, opt: Options) -> str:
    """Each thread folds its ``shared_factor`` runs and stores them in their slots."""
    f, run = opt.shared_factor, spec.items // opt.shared_factor
    bits = _log2(spec.block * f)
    parts = []
    for g in range(f):
        r = "tid" if f == 1 else f"(tid * {f} + {g})"
        if opt.addressing != "sequential":
            slot = r
        elif f == 1:
            slot = "rslot"
        else:  # bitrev(2t + g) = bitrev(t) over the low bits, g on top
            slot = f"rrun | {g << (bits - 1)}"
        parts.append(render(
            """
            i = base + ${r} * ${R}
            if base + ${TILE} <= bend:
            ${full}
                sdata[${slot}] = v
            elif i < bend:
            ${tail}
                sdata[${slot}] = v
            """,
            r=r, R=run, TILE=spec.tile, slot=slot,
            full=snippet(fold_items(spec, "v", "i", None, count=run, vector=spec.vector), 1),
            tail=snippet(fold_items(spec, "v", "i", "bend", count=run), 1),
        ))
    return "\n".join(p.strip("\n") for p in parts)


def _step(opt: Options, slots: int, s: str) -> str:
    """One tree step with stride ``s`` (a literal or the loop variable)."""
    if opt.addressing == "interleaved":
        return (
            f"if tid % (2 * {s}) == 0 and tid + {s} < valid:\n"
            f"    sdata[tid] = {combine('sdata[tid]', f'sdata[tid + {s}]')}"
        )
    if opt.addressing == "strided_index":
        return (
            f"j = 2 * {s} * tid\n"
            f"if j + {s} < valid:\n"
            f"    sdata[j] = {combine('sdata[j]', f'sdata[j + {s}]')}"
        )
    group = slots // (2 * int(s)) if s.isdigit() else f"{slots} // (2 * {s})"
    return (
        f"if tid < {s} and rslot + {group} < valid:\n"
        f"    sdata[tid] = {combine('sdata[tid]', f'sdata[tid + {s}]')}"
    )


def _block_steps(spec: KernelSpec, dialect, opt: Options, slots: int, stop: int) -> str:
    """The steps taken with block barriers, down to (not including) stride ``stop``
    for the sequential order, or all steps for the others."""
    sync = dialect.syncthreads()
    if opt.addressing == "sequential":
        strides = []
        s = slots // 2
        while s > stop:
            strides.append(s)
            s //= 2
        if not opt.unroll:
            return render(
                """
                s = ${first}
                while s > ${stop}:
                ${step}
                    ${sync}
                    s //= 2
                """,
                first=slots // 2, stop=stop, sync=sync,
                step=snippet(_step(opt, slots, "s"), 1),
            ) if strides else ""
    else:
        strides = [1 << k for k in range(_log2(slots))]
        if not opt.unroll:
            return render(
                """
                s = 1
                while s < ${slots}:
                ${step}
                    ${sync}
                    s *= 2
                """,
                slots=slots, sync=sync, step=snippet(_step(opt, slots, "s"), 1),
            )
    return "\n".join(f"{_step(opt, slots, str(s))}\n{sync}" for s in strides)


def _warp_tail(spec: KernelSpec, dialect, opt: Options, slots: int) -> str:
    """Warp 0 finishes: ``(code, expression of the tile's result in thread 0)``."""
    w = spec.warp
    first = min(w, slots // 2)
    if opt.tail == "syncwarp":
        steps = []
        s = first
        while s >= 1:
            steps.append(f"{_step(opt, slots, str(s))}\n{dialect.syncwarp(w)}")
            s //= 2
        return "if tid < %d:\n%s" % (w, snippet("\n".join(steps), 1)), "sdata[0]"
    # shuffle: after the stride-w step, slot u < w holds group bitrev(u) of w groups
    # of slots/w runs; one index shuffle puts group l in lane l, then an ordered
    # warp reduction over the groups holding data
    group = slots // w
    pre = "v = sdata[tid]"
    if slots >= 2 * w:
        pre += (
            f"\nif rslot + {group // 2} < valid:\n"
            f"    v = {combine('v', f'sdata[tid + {w}]')}"
        )
    return render(
        """
        v = acc_t(0)
        if tid < ${W}:
        ${pre}
            v = ${gather}
            groups = (valid + ${G1}) // ${G}
        ${reduce}
        """,
        W=w, G=group, G1=group - 1,
        pre=snippet(pre, 1),
        gather=shuffle_idx(spec, dialect, "v", bitrev("tid", _log2(w))),
        reduce=snippet(warp_reduce(spec, dialect, "v", "tid", "groups"), 1),
    ), "v"


def build(spec: KernelSpec, dialect, name: str, options: Options = Options()) -> str:
    opt = options
    if is_tuple(spec.acc_dtype):
        raise ValueError(
            f"variant {spec.variant!r} keeps its tree in one shared array of scalars; "
            "tuple accumulators reduce with the warp-shuffle variants (variant='auto')"
        )
    if spec.items % opt.shared_factor:
        raise ValueError(
            f"items per thread ({spec.items}) must be a multiple of the shared "
            f"factor ({opt.shared_factor})"
        )
    slots = spec.block * opt.shared_factor
    run = spec.items // opt.shared_factor
    warp_tail = opt.tail != "sync"
    stop = min(spec.warp, slots // 2) if warp_tail else 0
    tail, res = _warp_tail(spec, dialect, opt, slots) if warp_tail else ("", "sdata[0]")
    return render(
        """
        ${decorator}
        def ${name}(x, n, chunk, out):
        ${range}
            sdata = ${shared}
            rslot = ${rslot}${rrun}
            acc = acc_t(0)
            first = True
            base = bstart
            while base < bend:
        ${load}
                # runs holding data form a prefix of the tile
                valid = min((bend - base + ${R1}) // ${R}, ${S})
                ${sync}
        ${steps}
        ${tail}
                if tid == 0:
                    if first:
                        acc = ${res}
                    else:
                        acc = ${combine_acc}
                first = False
                base += ${TILE}
        ${after}
            if tid == 0:
                out[${bid}] = acc
        """,
        decorator=dialect.decorator(spec.block),
        name=name,
        range=snippet(block_range(dialect), 1),
        shared=dialect.shared_array(slots),
        rslot=bitrev("tid", _log2(slots)) if opt.addressing == "sequential" else "tid",
        rrun="" if opt.shared_factor == 1 or opt.addressing != "sequential"
        else "\n    rrun = " + bitrev("tid", _log2(spec.block)),
        load=snippet(_load(spec, opt), 2),
        R=run, R1=run - 1, S=slots, TILE=spec.tile,
        sync=dialect.syncthreads(),
        steps=snippet(_block_steps(spec, dialect, opt, slots, stop), 2),
        tail=snippet(tail, 2),
        res=res,
        combine_acc=combine("acc", res),
        # with a warp tail the other warps may race into the next tile's stores
        after=snippet(dialect.syncthreads(), 2) if warp_tail else "",
        bid=dialect.block_idx(),
    )
