"""The batched kernels and the finishing kernel, for the AMDGCN compile check.

``compile_variants.py`` compiles the 1-D variants; this module gives it the
other kernels pyreduce generates, as record lists of the same shape, checked by
the same facts where they apply:

* the ``segments`` family (:mod:`pyreduce.variants.segments`) for each group
  (``thread``; ``lanes`` with G = 2, 4, ... up to half the wavefront, so 2 to 16
  at wave32 and 2 to 32 at wave64; ``warp``; ``block``; a ``block`` first pass
  cut into parts (``split``); the finishing pass over those parts, a warp per
  segment reading accumulators as the planner makes it), for both sources
  (``rows`` and ``offsets``), plus strided rows (``ks != 1``) for each group
  and an initial value for one;
* the ``columns`` family (:mod:`pyreduce.variants.columns`): adjacent and
  strided outputs, a split first pass and its finishing pass;
* each for float32 sum, argmax of float32 (a ``(value, index)`` record
  accumulator of mixed field types with an element map: record arrays, fields
  shuffled one at a time) and nansum of float32 (a scalar accumulator with an
  element map); the finishing passes read accumulators, so they map nothing
  and the mapped scalar op has none of its own;
* the finishing kernel of structured reductions
  (:func:`pyreduce.finishing.finish_source`, through
  ``GeneratedBackend.finish_kernel``) for the scalar finishers of mean, nanmean
  (flagged), var, std, argmax, nanargmax (flagged) and minmax (two results).

Every kernel is built by the project's own code: ``BatchSpec`` fields as
:mod:`pyreduce.batchplanner` sets them, ``HipBackend.kernel`` (which calls
``pyreduce.variants.generate`` with the HIP dialect and compiles the module in
the backend's namespace, with the operator and element map as device functions)
and ``HipBackend.finish_kernel``; the monoids and finishers are
:mod:`pyreduce.structured`'s. Compiled only: nothing runs on AMD hardware.
"""

from __future__ import annotations

import re

#: (label, monoid builder): the batched kernels' cases
BATCH_CASES = (
    ("f32 add", "add"),
    ("f32 argmax", "argmax"),  # (float32 value, int64 index), mapped
    ("f32 nansum", "nansum"),  # float32, mapped
)

#: (label, finisher builder, flagged): the finishing kernel's cases; ``flagged`` is
#: what pyreduce.manyvalues passes (the finisher's ``counted``)
FINISH_CASES = (
    ("mean", "mean"),
    ("nanmean", "nanmean"),
    ("var", "var"),
    ("std", "std"),
    ("argmax", "argmax"),
    ("nanargmax", "nanargmax"),
    ("minmax", "minmax"),
)


def batch_monoid(name: str):
    import numpy as np

    from pyreduce import structured
    from pyreduce.ops import as_monoid

    f32 = np.dtype(np.float32)
    if name == "argmax":
        return structured.argmax_monoid(f32)
    if name == "nansum":
        return structured.nansum_monoid(f32)
    return as_monoid(name, f32)


def finish_monoid(name: str):
    """The structured reduction of float32 input whose finisher is ``name``'s."""
    import numpy as np

    from pyreduce import structured

    f32 = np.dtype(np.float32)
    if name in ("mean", "nanmean", "var", "std"):
        return structured.moments_monoid(f32, name, ddof=1 if name in ("var", "std") else 0)
    return {"argmax": structured.argmax_monoid, "nanargmax": structured.nanargmax_monoid,
            "minmax": structured.minmax_monoid}[name](f32)


def batch_kinds(wave: int) -> list[tuple[str, dict]]:
    """``(label, BatchSpec fields)`` of every batched kernel compiled at ``wave``
    (besides the dtypes, op key, block, warp and items, which the case gives)."""
    kinds = []
    for source in ("rows", "offsets"):
        kinds.append((f"{source} thread", dict(group="thread", source=source)))
        lanes = 2
        while lanes <= wave // 2:
            kinds.append((f"{source} lanes{lanes}",
                          dict(group="lanes", lanes=lanes, source=source)))
            lanes *= 2
        kinds.append((f"{source} warp", dict(group="warp", source=source)))
        kinds.append((f"{source} block", dict(group="block", source=source)))
        kinds.append((f"{source} block split", dict(group="block", source=source,
                                                    split=True)))
        # the finishing pass over a split pass's partials: batchplanner._finish_spec
        kinds.append((f"{source} finish", dict(group="warp", source=source, finish=True)))
    for row in (2, 7, 15, 24):  # rows one after another, staged in LDS
        kinds.append((f"rows staged{row}", dict(group="staged", row=row, source="rows")))
    kinds.append(("rows staged5 initial", dict(group="staged", row=5, source="rows",
                                               initial=True)))
    for group, lanes in (("thread", 0), ("lanes", 4), ("warp", 0), ("block", 0)):
        label = f"lanes{lanes}" if lanes else group
        kinds.append((f"rows {label} strided",
                      dict(group=group, lanes=lanes, source="rows", unit=False)))
    kinds.append(("rows warp initial", dict(group="warp", source="rows", initial=True)))
    # a warp a row whose lanes keep their own accumulators (commutative ops)
    kinds.append(("rows warp accs", dict(group="warp", source="rows", lane_accs=True)))
    kinds.append(("rows warp accs strided", dict(group="warp", source="rows", unit=False,
                                                 lane_accs=True)))
    # ... and a block a row (or a part of one) likewise
    kinds.append(("rows block accs", dict(group="block", source="rows", lane_accs=True)))
    kinds.append(("rows block accs split", dict(group="block", source="rows", split=True,
                                                lane_accs=True)))
    kinds.append(("columns", dict(family="columns")))
    kinds.append(("columns strided", dict(family="columns", unit=False)))
    kinds.append(("columns split", dict(family="columns", split=True)))
    kinds.append(("columns finish", dict(family="columns", finish=True)))
    # an intermediate finishing pass: partials in, partials out
    # (batchplanner._finish_parts)
    kinds.append(("columns finish split", dict(family="columns", finish=True, split=True)))
    kinds.append(("columns narrow", dict(family="columns", narrow=True)))
    kinds.append(("columns narrow strided", dict(family="columns", narrow=True, unit=False)))
    kinds.append(("columns narrow split", dict(family="columns", narrow=True, split=True)))
    kinds.append(("columns narrow finish", dict(family="columns", narrow=True, finish=True)))
    return kinds


def batch_spec(monoid, in_dtype, fields: dict, wave: int, block: int):
    """The BatchSpec of ``fields`` for ``monoid`` over elements of ``in_dtype``,
    with the planner's items
    (:func:`pyreduce.planner.default_items` of the input; of the accumulator
    for a finishing pass, which reads accumulators and maps nothing)."""
    import numpy as np

    from pyreduce.planner import default_items
    from pyreduce.spec import BatchSpec

    fields = dict(fields)
    family = fields.pop("family", "segments")
    from pyreduce.batchplanner import staged_rows_each

    finish = fields.get("finish", False)
    acc = monoid.dtype
    in_dtype = acc if finish else np.dtype(in_dtype)
    items = (staged_rows_each(fields["row"], in_dtype) if fields.get("row")
             else default_items(acc if finish else in_dtype))
    return BatchSpec(family, in_dtype, acc, monoid.key, block, wave, items,
                     mapped=monoid.map is not None and not finish, **fields)


def batch_signature(spec):
    """The argument types a launch gives the kernel: a C-contiguous 1-D input
    (partials, a record array for a tuple, in a finishing pass), int64 scalars,
    int64 offsets, and ``out``/``init`` arrays of the accumulator."""
    from numba import from_dtype, types

    from pyreduce.variants.segments import arguments

    i64 = types.int64
    acc = types.Array(from_dtype(spec.acc_dtype), 1, "C")
    x = types.Array(from_dtype(spec.in_dtype), 1, "C")
    kinds = {"x": x, "offsets": types.Array(i64, 1, "C"), "out": acc, "init": acc}
    source = "rows" if spec.family == "columns" else spec.source
    return tuple(kinds.get(a, i64) for a in arguments(source))


def finish_signature(finisher, acc_dtype, flagged: bool):
    """``(acc, out0[, out1][, flags], ddof)``, as ``GeneratedBackend.finish`` launches it."""
    from numba import from_dtype, types

    out = types.Array(from_dtype(finisher.dtype), 1, "C")
    sig = [types.Array(from_dtype(acc_dtype), 1, "C")] + [out] * finisher.outputs
    if flagged:
        sig.append(types.Array(types.int32, 1, "C"))
    return tuple(sig + [types.float64])


def batch_expect(spec) -> dict:
    """What the assembly of a batched kernel must show: cross-lane instructions
    where a warp or a group of lanes shuffles, a barrier (and the warps'
    partials in LDS) where a block reduces one segment, a barrier and the wide
    row's columns in LDS in the narrow columns kernel, neither otherwise."""
    from pyreduce.variants.columns import fold_width

    from pyreduce.dtypes import storage
    from pyreduce.variants.segments import staged_words

    shuffles = spec.family == "segments" and spec.group not in ("thread", "staged")
    block = spec.family == "segments" and spec.group == "block"
    acc = spec.acc_dtype.itemsize if spec.acc_dtype.names is None else sum(
        spec.acc_dtype.fields[f][0].itemsize for f in spec.acc_dtype.names)
    lds = (spec.warps * acc if block else
           fold_width(spec.block, spec.items, spec.acc_dtype) * acc if spec.narrow else
           staged_words(spec.block, spec.row, spec.items) * storage(spec.in_dtype).itemsize
           if spec.row
           else 0)
    return dict(cross_lane=shuffles, barrier=block or spec.narrow or bool(spec.row),
                atomic=False, lds=lds)


#: a shuffle's width argument: the last argument of HIP's shfl/shfl_down
_WIDTH = re.compile(r"gpu\.shfl(?:_down)?\(\w*\([^()]*\), [^,()]+, (\w+)\)")


def batch_source_checks(src: str, spec) -> list[str]:
    """The generated HIP source: numba-hip names only, and the width each
    shuffle is given is the wavefront size baked in (``G`` for a group of
    ``G`` lanes, whose lane index is then ``tid % G``)."""
    bad = [f"source contains {name!r}" for name in
           ("_sync(", "syncwarp", "cuda.", "activemask", "0xffffffff", "launch_bounds")
           if name in src]
    widths = _WIDTH.findall(src)
    calls = src.count("gpu.shfl")
    if len(widths) != calls:
        bad.append(f"{calls - len(widths)} shuffles without a literal width")
    shuffles = spec.family == "segments" and spec.group not in ("thread", "staged")
    if shuffles:
        width = str(spec.width)
        if not widths or set(widths) != {width}:
            bad.append(f"shuffle widths {sorted(set(widths))}, want {width}")
        if f"lane = tid % {width}\n" not in src:
            bad.append(f"lane index not tid % {width}")
    elif calls:
        bad.append(f"{calls} shuffles in a kernel without cross-lane work")
    return bad


def finish_source_checks(src: str) -> list[str]:
    return [f"source contains {name!r}" for name in
            ("_sync(", "syncwarp", "cuda.", "activemask", "launch_bounds", "gpu.shfl",
             "gpu.syncthreads", "gpu.shared")
            if name in src]


def compile_batched(arch: str, wave: int, block: int, backend, device, compile_one,
                    asm_dir: str | None) -> list[dict]:
    """Every batched kernel and case for ``arch``: one record each (made and
    checked by ``compile_one(rec, kernel, signature, asm_base)``)."""
    records = []
    for label, builder in BATCH_CASES:
        monoid = batch_monoid(builder)
        for kind, fields in batch_kinds(wave):
            if fields.get("finish") and monoid.map is not None and monoid.dtype.names is None:
                continue  # reads accumulators: the same kernel as the unmapped sum's
            spec = batch_spec(monoid, "float32", fields, wave, block)
            kernel = backend.kernel(spec, monoid, device)
            rec = dict(target=arch, wave=wave, family="batched", case=label,
                       dtype=str(monoid.dtype), op=builder, variant=kind, block=block,
                       items=spec.items, kernel=kernel.name, spec=spec.label,
                       expect=batch_expect(spec), lds_declared=batch_expect(spec)["lds"],
                       source_problems=batch_source_checks(kernel.source, spec))
            base = f"{arch}-{kind.replace(' ', '_')}-{builder}"
            records.append(compile_one(rec, kernel, batch_signature(spec), base,
                                       asm_dir))
    return records


def compile_finishers(arch: str, wave: int, backend, compile_one,
                      asm_dir: str | None) -> list[dict]:
    """The finishing kernel for each finisher of :data:`FINISH_CASES`."""
    records = []
    for label, builder in FINISH_CASES:
        monoid = finish_monoid(builder)
        fin = monoid.finisher
        flagged = fin.counted
        kernel = backend.finish_kernel(fin, monoid.dtype, flagged)
        rec = dict(target=arch, wave=wave, family="finish", case="float32 input",
                   dtype=str(monoid.dtype), op=builder, variant=label, block=backend.gather_block,
                   items=1, kernel=kernel.name, spec=f"{fin.name} -> {fin.dtype}"
                   f"{' x2' if fin.outputs > 1 else ''}{' flagged' if flagged else ''}",
                   expect=dict(cross_lane=False, barrier=False, atomic=False, lds=0),
                   lds_declared=0, source_problems=finish_source_checks(kernel.source))
        base = f"{arch}-finish_{label}"
        records.append(compile_one(rec, kernel, finish_signature(fin, monoid.dtype, flagged),
                                   base, asm_dir))
    return records
