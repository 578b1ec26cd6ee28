"""``pyreduce.explain``: the plan, the generated source and the compiled resources."""

from __future__ import annotations

import dataclasses

from .general import (KEYWORDS, check_keywords, deterministic_tuning, run_whole,
                      wants_host_result)
from .axes import normalize_axes
from .batchplanner import describe_plan
from .interop import checked_device_result, inspect
from .masked import compressed
from .ops import as_monoid
from .manyvalues import prepare_axes
from .planner import Plan
from .prepared import prepare
from .tuning_keywords import DEFAULT as DEFAULT_TUNING
from .tuning_keywords import settle

__all__ = ["Explanation", "explain"]

#: what explain takes: reduce's keywords but where= (explain it on x[mask])
_KEYWORDS = KEYWORDS - {"where"}


@dataclasses.dataclass
class Explanation:
    """What ``explain`` found: the backend and device, the plan (None on the CPU),
    the kernels of each pass with their generated source, their compiled
    resources (or why they are unknown) and the reduction's result."""

    backend: str
    device: str
    plan: Plan | None
    kernels: list  # Kernel objects, pass order
    resources: dict  # kernel name -> {registers, shared_bytes, local_bytes} or a note
    result: object
    #: a host input on a GPU machine: where it went and why, with the cost
    #: model's estimates (:class:`pyreduce.costmodel.Route`); None otherwise
    route: object = None
    #: a host input streamed to the GPU: chunks and elements per chunk
    chunks: tuple | None = None

    def __str__(self):
        lines = [f"backend: {self.backend}", f"device:  {self.device}"]
        if self.route is not None:
            lines.append(f"route:   {self.route}")
        if self.chunks is not None:
            count, size = self.chunks
            lines.append(f"chunks:  {count} of up to {size} elements, each reduced as the "
                         "next is copied; plan of the first:")
        p = self.plan
        if isinstance(p, Plan):
            lines.append(
                f"plan:    {p.spec.label}; grid {p.grid} x {p.spec.block} threads, "
                f"{p.chunk} elements per block, {p.passes} pass(es)"
            )
        elif p is not None:
            lines.append(f"plan:    {describe_plan(p)}")
        for k in self.kernels:
            lines.append(f"\n--- {k.name}: {self.resources.get(k.name)}")
            lines.append(k.source.rstrip())
        lines.append(f"\nresult:  {self.result!r}")
        return "\n".join(lines)


def _resources(backend, kernel, device) -> dict | str:
    if backend.name != "cuda":
        return (
            f"registers, shared and local memory and occupancy are not known on the "
            f"{backend.name} backend (no compiled GPU code)"
        )
    from .backends.cubins import function_resources  # late: the CUDA toolchain
    from .occupancy import occupancy  # late: GPU backends only

    # of the functions the reduction launched (compiled or loaded from the disk
    # cache), one per input layout: the largest
    found = function_resources(kernel)
    if found is None:
        return "not launched in this process"
    occ = occupancy(kernel.spec.block, found["registers"], found["shared_bytes"], device.limits)
    found["occupancy"] = round(occ.fraction, 3)
    found["blocks_per_sm"] = occ.blocks_per_sm
    found["limited_by"] = occ.limited_by
    return found


def _unmasked(info, kwargs):
    """A masked input's unmasked elements, the input ``reduce`` reduces to one
    value; with ``axis=`` or ``keepdims=`` (lanes of a segmented reduction,
    :mod:`pyreduce.masked`) there is no single plan to show."""
    if info.mask is None:
        return info
    if kwargs.get("axis") is not None or kwargs.get("keepdims"):
        raise TypeError("explain() takes a masked array only without axis= and keepdims=; "
                        "pass x.compressed() or x.filled(value)")
    return compressed(info)


def explain(x, op, identity=None, **kwargs) -> Explanation:
    """Run ``reduce(x, op, identity, **kwargs)`` and describe how it ran. With
    ``axis=`` the plan is a :class:`pyreduce.batchplanner.BatchPlan`: which kernel
    reduces the rows or columns, its grid, and the parts long rows are cut into.

    >>> import numpy as np, pyreduce
    >>> e = pyreduce.explain(np.ones(10), "add", backend="cpu")
    >>> e.backend, float(e.result)
    ('cpu', 10.0)
    """
    kwargs = settle("explain", kwargs)
    check_keywords("explain", kwargs, _KEYWORDS)
    info = _unmasked(inspect(x, masked=True), kwargs)
    monoid = as_monoid(op, info.dtype, identity, acc_dtype=kwargs.get("dtype"),
                       map=kwargs.get("map"))
    tuning = kwargs.get("tuning", DEFAULT_TUNING)
    if "deterministic" in kwargs:
        tuning = deterministic_tuning(tuning, kwargs["deterministic"])
    axis, keepdims = kwargs.get("axis"), kwargs.get("keepdims", False)
    axes = normalize_axes(axis, len(info.shape))
    device_result, out = checked_device_result(kwargs.get("device_result")), kwargs.get("out")
    if len(axes) < len(info.shape):
        call = prepare_axes(info, monoid, axes, keepdims, kwargs.get("initial"),
                            kwargs.get("backend", "auto"), tuning, kwargs.get("stream"),
                            device_result, out)
        result = call.run()
    else:
        call = prepare(info, monoid, kwargs.get("initial"), kwargs.get("backend", "auto"),
                       tuning, kwargs.get("stream", 0),
                       host_result=wants_host_result(device_result, out))
        result = run_whole(call, info, monoid, keepdims, device_result, out)
    be = call.backend
    route = getattr(call, "route", None)
    if call.plan is None:
        return Explanation(be.name, "host CPU" if be.name == "cpu" else be.name, None, [], {},
                           result, route)
    exe = be.executable(call.plan, monoid, call.device)
    kernels = list(exe.kernels.values())
    resources = {k.name: _resources(be, k, call.device) for k in kernels}
    streamed = getattr(call, "streamed", None)
    chunks = None if streamed is None else (streamed.count, streamed.chunk)
    return Explanation(be.name, call.device.name, call.plan, kernels, resources, result,
                       route, chunks)
