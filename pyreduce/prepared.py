"""One reduction made ready to run: :func:`prepare` takes every decision (the
backend, where a host input goes, the flat device input, the plan) and returns
a :class:`Prepared`, whose ``run`` launches it. The public calls
(:mod:`pyreduce.general` and the families on it) build on it, and so do the tuner and
:func:`pyreduce.explain`, which reads the decisions without running them."""

from __future__ import annotations

import numpy as np

from . import backends
from .backends.base import check_out, check_out_array, to_host
from .dtypes import bfloat16_to_float32, is_bfloat16
from .interop import one_value_follows
from .ops import Monoid, cast_value
from .planner import make_plan
from .variants import VARIANTS

__all__ = ["Prepared", "prepare"]


class Prepared:
    """A reduction with every decision taken and nothing launched yet: the backend,
    the operator, and on a GPU backend the flat device input and the plan. ``run``
    performs it; :func:`pyreduce.explain` reads it."""

    __slots__ = ("backend", "monoid", "info", "initial", "stream", "device", "flat", "plan",
                 "fixed_tree", "route", "streamed", "asked_stream", "route_holds")

    def __init__(self, backend, monoid: Monoid, info, initial, stream, fixed_tree=False):
        self.backend, self.monoid, self.info = backend, monoid, info
        self.initial, self.stream = initial, stream
        self.device = self.flat = self.plan = None
        #: compute pyreduce.deterministic's tree (the cpu backend too)
        self.fixed_tree = fixed_tree
        #: a host input on a GPU machine: where it goes and why
        #: (:class:`pyreduce.costmodel.Route`); None otherwise
        self.route = None
        #: a host input reduced chunk by chunk on the GPU
        #: (:class:`pyreduce.backends.staging.Streamed`; ``plan`` is its first
        #: chunk's), else None
        self.streamed = None
        #: the caller's ``stream=`` (None: the default, the input's own stream)
        self.asked_stream = None
        #: where the cost model sent a host input to the cpu backend, the check
        #: that it would again (:func:`pyreduce.hostroute.unchanged`), else None
        self.route_holds = None

    def detached(self) -> "Prepared":
        """These decisions without the input (what :mod:`pyreduce.callmemo` keeps:
        the memo must not keep a user's array alive)."""
        twin = Prepared(self.backend, self.monoid, None, self.initial, self.stream,
                        self.fixed_tree)
        twin.device, twin.plan = self.device, self.plan
        twin.route, twin.streamed = self.route, self.streamed
        twin.asked_stream, twin.route_holds = self.asked_stream, self.route_holds
        return twin

    def run(self, device_result: bool | None = False, out=None, shape=None):
        """The value: a NumPy scalar, a device array (``device_result``) or
        ``out``. ``shape`` (all ones: ``keepdims``) makes the result an array of
        that shape instead of a scalar or 0-d array, and ``out`` must have it.
        ``device_result=None``: where the input lives (:meth:`follows`)."""
        return self.run_on(self.info, self.flat, device_result, out, shape)

    def follows(self, info, out=None) -> bool:
        """Whether ``device_result=None`` puts this call's value of ``info`` on
        the device: a CuPy or PyTorch input on a GPU backend
        (:func:`pyreduce.interop.one_value_follows`), whose operator's value is
        the accumulator itself (one that is finished on the host, or a tuple,
        stays there)."""
        return one_value_follows(None, info, self.backend.name, out, self.monoid,
                                 self.asked_stream)

    def run_on(self, info, flat, device_result: bool | None = False, out=None, shape=None):
        """:meth:`run` with another input of the same call shape: ``info`` and
        its flat device array (:mod:`pyreduce.callmemo`)."""
        be, monoid, stream = self.backend, self.monoid, self.stream
        if device_result is None:
            device_result = self.follows(info, out)
        if out is not None and device_result:
            raise ValueError("pass out= or device_result=True, not both")
        if isinstance(out, np.ndarray):  # a host array: the value, copied in
            check_out(out.shape, out.dtype, monoid.dtype, shape)
            out[...] = self.run_on(info, flat)
            return out
        user = buffer = None
        check_out_array(out)
        if out is not None or device_result:
            if be.name == "cpu":
                what = "device_result=True" if device_result else "a device out= array"
                raise ValueError(f"{what} needs a GPU backend, not 'cpu'")
            if monoid.finalize is not None:
                raise ValueError(f"{monoid.name} finishes its result on the host: "
                                 "device_result=True and a device out= do not apply")
            if out is not None:
                user, buffer = out, be.out_buffer(out, monoid.dtype, shape)
            else:
                user, buffer = be.new_result(monoid.dtype, stream, info, shape or ())
        if info.size == 0:
            value = self.initial if self.initial is not None else monoid.empty_result()
            if buffer is not None:
                be.put_value(buffer, value, stream)
                return user
        elif be.name == "cpu":
            host = info.host if info.host is not None else to_host(info)
            if is_bfloat16(info.dtype):  # the cpu backend folds float32
                host = bfloat16_to_float32(host)
            value = be.reduce(host, monoid, self.initial, tree=self.fixed_tree)
        elif self.streamed is not None and buffer is None:
            value = self.streamed(info.host, self.initial)
        else:
            plan = self.plan
            if self.streamed is not None:  # a device result: the whole input copied
                flat = be.flat_input(info, stream)
                plan = self._whole_plan(flat)
            run = be.executable(plan, monoid, self.device)
            if buffer is not None:
                run(flat, stream, self.initial, buffer)
                return user
            value = run(flat, stream, self.initial)
        value = monoid.result(value)
        if shape is None:
            return value
        if isinstance(value, tuple):  # a tuple result: an array of each field
            return tuple(np.full(shape, v) for v in value)
        return np.full(shape, value, dtype=monoid.dtype)

    def _whole_plan(self, flat):
        """The plan of the whole input as one flat device array ``flat``."""
        return _plan(self.info, self.monoid, self.device, self.streamed.tuning, self.initial,
                     self.backend.alignment(flat))


def _plan(info, monoid: Monoid, device, tuning, initial, align: int):
    """The plan of the whole input, flat on the device with alignment ``align``."""
    return make_plan(info.size, info.dtype, monoid.dtype, monoid.key, device, tuning,
                     extra_partials=0 if initial is None else 1, align=align,
                     commutative=monoid.commutative)


def prepare(info, monoid: Monoid, initial, backend_name, tuning, stream,
            host_result: bool = True) -> Prepared:
    """Choose the backend, flatten the input on the device and plan the launches.
    A host input on a GPU backend is routed (:mod:`pyreduce.hostroute`: with
    ``backend="auto"``, to the GPU or the cpu backend, whichever the cost model
    finds faster; ``host_result=False``, a result asked for on the device, keeps
    it on the GPU) and, where it can be, reduced chunk by chunk as it is copied
    (:mod:`pyreduce.backends.staging`)."""
    if initial is not None:
        initial = cast_value(initial, monoid.dtype, "initial")
    be = backends.get(backend_name, on_device=info.on_device)
    route = None
    if info.host is not None and info.size and getattr(be, "stages_host_inputs", False):
        from .hostroute import route as host_route  # late: host inputs on a GPU only
        from .hostroute import unchanged

        # taken before the model is read: a model recorded meanwhile fails it
        holds = unchanged(be) if backend_name == "auto" else None
        route = host_route(info, monoid, be, backend_name, host_result)
        if route.path == "cpu":
            be = backends.get("cpu")
    fixed_tree = tuning.variant != "auto" and VARIANTS[tuning.variant].fixed_tree
    call = Prepared(be, monoid, info, initial, be.launch_stream(stream, info), fixed_tree)
    call.asked_stream = stream
    call.route = route
    if route is not None and route.path == "cpu":
        call.route_holds = holds
    if be.name == "cpu" or info.size == 0:
        return call
    call.device = device = be.device(tuning.warp_size)
    if route is not None and host_result and _streams(info, monoid, fixed_tree):
        from .backends.staging import Streamed  # late: host inputs on a GPU only

        call.streamed = Streamed(be, monoid, info.dtype, device, tuning, info.size)
        call.plan = plan = call.streamed.first_plan()
    else:
        call.flat = be.flat_input(info, call.stream)
        call.plan = plan = _plan(info, monoid, device, tuning, initial,
                                 be.alignment(call.flat))
    if _needs_commutative(plan.spec.variant) and not monoid.commutative:
        raise ValueError(
            f"variant {plan.spec.variant!r} reorders elements and needs a commutative "
            f"op; {monoid.name!r} is not known to be commutative"
        )
    return call


def _needs_commutative(variant: str) -> bool:
    return VARIANTS[variant].commutative_only


def _streams(info, monoid: Monoid, fixed_tree: bool) -> bool:
    """Whether a host input is reduced chunk by chunk as it is copied (else it
    is copied whole first): large enough, and a reduction that splits."""
    from .backends import staging  # late: host inputs on a GPU only

    return info.host.nbytes > staging.DIRECT_BYTES and staging.streamable(monoid, fixed_tree)
