"""What the user handed us: a host array or a device array, its dtype and shape.

Host arrays are NumPy arrays or anything NumPy can view without guessing
(``__array__``/``__array_interface__``/DLPack: PyTorch CPU tensors; the buffer
protocol: ``array.array``, memoryviews of typed buffers). Python lists, tuples,
ranges and numbers become arrays by NumPy's rules, as ``np.sum([1, 2])`` takes
them; strings, bytes and None are refused. Data in non-native byte order is
reduced as a native copy. Masked arrays carry their mask to the reductions that
honour it (:mod:`pyreduce.masked`) and are refused elsewhere. Device arrays are
anything with ``__cuda_array_interface__`` (CuPy, PyTorch CUDA tensors, Numba
device arrays), a CUDA DLPack producer (``__dlpack__``, JAX), or the CUDA
simulator's arrays. bfloat16 (PyTorch's, ml_dtypes', DLPack's) has no NumPy
dtype: it is kept as its ``uint16`` bits and named
:data:`pyreduce.dtypes.BFLOAT16`.

Reading ``__cuda_array_interface__`` builds a dictionary on every access (CuPy and
Numba make a new one each time, PyTorch also validates the tensor), which is a
good part of a small reduction's cost. CuPy arrays, PyTorch tensors and Numba
device arrays are therefore read through their own attributes, by a reader chosen
once per type; every other type goes through the interface. A reader also says
which stream the producer works on (CuPy's and PyTorch's current stream, the
interface's ``stream`` entry), so a reduction can run on it.
"""

from __future__ import annotations

import ctypes
import math
import sys

import numpy as np

from .dtypes import BFLOAT16, storage
from .ops import check_dtype

__all__ = ["Input", "DeviceFields", "inspect", "host_input", "device_fields", "parse_dlpack",
           "checked_device_result", "FOLLOWED", "one_value_follows"]


class DeviceFields:
    """A device array's memory: ``ptr``, ``shape``, ``strides`` in bytes (None:
    C-contiguous), ``dtype``, ``stream``, the producer's stream handle (None:
    none given; 1 and 2 are CUDA's legacy and per-thread default streams), and
    ``device``, the ordinal of the GPU it is on where its library says (None:
    not said, as the CUDA Array Interface does not)."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "stream", "device")

    def __init__(self, ptr, shape, strides, dtype, stream, device=None):
        self.ptr, self.shape, self.strides = ptr, shape, strides
        self.dtype, self.stream, self.device = dtype, stream, device

    def byte_strides(self) -> tuple:
        """The strides in bytes, filled in for a C-contiguous array."""
        return self.strides or c_strides(self.shape, self.dtype.itemsize)


def c_strides(shape, itemsize: int) -> tuple:
    """The byte strides of a C-contiguous array of ``shape``."""
    return tuple(itemsize * math.prod(shape[a + 1:]) for a in range(len(shape)))


class ArrayInterface:
    """A device array described by its :class:`DeviceFields`, for Numba to view
    through ``__cuda_array_interface__``: how inputs Numba cannot view itself
    (DLPack-only producers, bfloat16, which it sees as its ``uint16`` bits) and
    permuted views of any input reach a kernel without a copy. ``perm`` orders
    the axes; ``owner`` keeps the memory alive."""

    def __init__(self, fields: DeviceFields, owner, perm=None):
        shape, strides = fields.shape, fields.byte_strides()
        perm = range(len(shape)) if perm is None else perm
        self.owner = owner
        self.__cuda_array_interface__ = {
            "data": (fields.ptr, True), "shape": tuple(shape[a] for a in perm),
            "strides": tuple(strides[a] for a in perm),
            "typestr": storage(fields.dtype).str, "version": 3,
        }


class Input:
    """A validated input. ``host`` is set for host arrays, ``device`` (the user's
    object) otherwise; ``fields`` is its :class:`DeviceFields` where it has a
    CUDA address (not for the simulator's arrays); ``mask`` is a masked array's
    mask (:mod:`pyreduce.masked`)."""

    __slots__ = ("dtype", "shape", "host", "device", "fields", "kind", "mask")

    def __init__(self, dtype, shape, host=None, device=None, fields=None, kind="numpy"):
        self.dtype, self.shape, self.host = dtype, shape, host
        self.device, self.fields, self.kind = device, fields, kind
        #: a masked array's mask (True: masked), of ``shape``; None: no mask
        self.mask = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def on_device(self) -> bool:
        return self.device is not None


# --- where a result goes: device_result=

#: The input libraries whose reductions to one value are, by default
#: (``device_result=None``), 0-d arrays of the input's own library, left on the
#: device without waiting for it: those with arrays that compute (CuPy,
#: PyTorch). Numba's device arrays are buffers with no arithmetic, and
#: ``numba.cuda.reduce`` returns a host value: their reductions to one value are
#: NumPy scalars, as are those of other device inputs (DLPack producers, other
#: ``__cuda_array_interface__`` arrays: pyreduce makes no arrays of those
#: libraries). ``docs/semantics.md``, *Where results live*.
FOLLOWED = frozenset({"cupy", "torch"})


def checked_device_result(value):
    """``device_result=`` checked: None (follow the input), True or False
    (NumPy's bools too); a TypeError naming the keyword for anything else."""
    if value is None or value is True or value is False:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"device_result= must be None (a result where the input lives), True "
                    f"(on the device) or False (a NumPy value on the host), got {value!r}")


def one_value_follows(device_result, info, backend_name: str, out=None, monoid=None,
                      stream=None) -> bool:
    """Whether a reduction of ``info`` to one value is returned on the device:
    ``device_result`` as given, or for None (follow the input) whether the
    input is an array of a library in :data:`FOLLOWED`, reduced on a GPU
    backend (``backend_name`` not ``"cpu"``), with no ``out=`` and no
    ``stream=``: a value written on a stream the caller named is not ordered
    before what the input's library runs next on its own current stream, so
    it comes back as a host value (``device_result=True`` asks for it on that
    stream). With the operator's ``monoid``, also whether its value is the
    accumulator itself, made on the device: one finished on the host (argmax,
    mean) or a tuple accumulator's stays there, unless the caller finishes and
    places it."""
    if device_result is not None:
        return device_result
    if (out is not None or stream is not None or info.kind not in FOLLOWED
            or backend_name == "cpu"):
        return False
    return monoid is None or (monoid.finalize is None and monoid.dtype.names is None)


def _is_simulator_array(x) -> bool:
    return type(x).__name__ in ("FakeCUDAArray", "FakeWithinKernelCUDAArray") and (
        type(x).__module__.startswith("numba.cuda.simulator")
    )


# --- device readers, one per array type -------------------------------------


def _read_cai(x) -> DeviceFields:
    cai = x.__cuda_array_interface__
    return DeviceFields(cai["data"][0] or 0, tuple(cai["shape"]), cai.get("strides"),
                        np.dtype(cai["typestr"]), cai.get("stream"))


def _read_cupy(x) -> DeviceFields:
    # CuPy's null stream (0) is CUDA's legacy default stream, which the
    # interface names 1: a read on a non-blocking stream must wait for it
    data = x.data
    return DeviceFields(data.ptr, x.shape, x.strides, x.dtype, _cupy_stream().ptr or 1,
                        data.device_id)


def _cupy_stream():
    global _cupy_stream
    import cupy

    _cupy_stream = cupy.cuda.get_current_stream  # later calls go straight to CuPy
    return _cupy_stream()


_TORCH_DTYPES: dict = {}


def _torch_dtype(tdtype) -> np.dtype | None:
    """NumPy's name for a PyTorch dtype (bfloat16: :data:`BFLOAT16`), or None."""
    dt = _TORCH_DTYPES.get(tdtype)
    if dt is None:
        import torch

        if tdtype == torch.bfloat16:
            dt = BFLOAT16
        else:
            try:
                dt = np.dtype(torch.empty(0, dtype=tdtype).numpy().dtype)
            except (TypeError, RuntimeError):
                return None
        _TORCH_DTYPES[tdtype] = dt
    return dt


def _read_torch(x) -> DeviceFields | None:
    # each of PyTorch's accessors is a call into it: the cheapest ones, once each
    # (get_device() makes no device object, as x.device does). A tensor that
    # requires grad is read as its values, as x.detach() would be.
    if not x.is_cuda:
        return None  # a host tensor (see _host_tensor)
    _check_torch_bits(x)
    tdt = x.dtype
    dt = _TORCH_DTYPES.get(tdt)
    if dt is None:
        dt = _torch_dtype(tdt)
    if dt is None:
        return _read_cai(x.detach())  # let the interface name (or refuse) the dtype
    device = x.get_device()
    try:
        s = _torch_stream(device)
    except (AttributeError, RuntimeError):  # a PyTorch without the raw call
        s = x.detach().__cuda_array_interface__.get("stream")
    strides = tuple(map(dt.itemsize.__mul__, x.stride()))
    # PyTorch's default stream (0) is CUDA's legacy one, the interface's 1
    return DeviceFields(x.data_ptr(), tuple(x.shape), strides, dt, s or 1, device)


def _check_torch_bits(x) -> None:
    """Refuse a PyTorch tensor whose memory does not hold its values: a lazy
    ``x.conj()`` (the conjugate bit) or a negated view (the negative bit, as
    ``x.conj().imag`` is) holds the values before the conjugation or
    negation, which PyTorch's own operators apply as they read."""
    if x.is_conj():
        raise TypeError("a PyTorch tensor with its conjugate bit set (a lazy x.conj()) "
                        "holds the unconjugated values: pass x.resolve_conj()")
    if x.is_neg():
        raise TypeError("a PyTorch tensor with its negative bit set (a lazy negated view, "
                        "such as x.conj().imag) holds the values before negation: pass "
                        "x.resolve_neg()")


def _host_tensor(x) -> Input:
    """A PyTorch CPU tensor: its values as NumPy views them (one that requires
    grad read as x.detach() would be; bfloat16, which NumPy cannot view, as its
    bits)."""
    _check_torch_bits(x)
    x = x.detach()
    if _torch_dtype(x.dtype) == BFLOAT16:
        import torch

        return Input(BFLOAT16, tuple(x.shape), host=x.view(torch.int16).numpy().view(np.uint16))
    return host_input(np.asarray(x))


# --- DLPack (__dlpack__), for producers without __cuda_array_interface__


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
#: DLPack type codes (int, uint, float, bfloat, complex, bool) and bits -> dtype
_DL_TYPES = {(0, b): np.dtype(f"int{b}") for b in (8, 16, 32, 64)} | {
    (1, b): np.dtype(f"uint{b}") for b in (8, 16, 32, 64)} | {
    (2, 16): np.dtype(np.float16), (2, 32): np.dtype(np.float32),
    (2, 64): np.dtype(np.float64), (4, 16): BFLOAT16,
    (5, 64): np.dtype(np.complex64), (5, 128): np.dtype(np.complex128),
    (6, 8): np.dtype(np.bool_)}


def parse_dlpack(capsule, stream=None) -> DeviceFields:
    """The memory a DLPack capsule (``"dltensor"``) describes, ``stream`` the one
    its producer ordered its work before (:class:`DeviceFields`). The capsule is
    not consumed: its destructor releases the producer's tensor, and the caller
    keeps the producer's array alive while the memory is used."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    t = _DLTensor.from_address(get(capsule, b"dltensor"))  # DLManagedTensor starts with it
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    dt = _DL_TYPES.get((code, bits))
    if dt is None or lanes != 1:
        raise TypeError(f"DLPack dtype (code {code}, {bits} bits, {lanes} lanes) is not "
                        "supported")
    shape = tuple(t.shape[k] for k in range(t.ndim))
    strides = None if not t.strides else tuple(t.strides[k] * dt.itemsize
                                              for k in range(t.ndim))
    # a GPU's own memory names its device; pinned and managed memory serve any
    device = t.device.device_id if t.device.device_type == _DL_CUDA else None
    return DeviceFields((t.data or 0) + t.byte_offset, shape, strides, dt, stream, device)


def _read_dlpack(x) -> DeviceFields | None:
    """A CUDA DLPack producer's array; None for a host one (NumPy takes those)."""
    kind, _ = x.__dlpack_device__()
    if kind == _DL_CPU:
        return None
    if kind not in (_DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED):
        raise TypeError(f"a DLPack array on device type {kind} is not a CUDA array")
    # stream 1: the producer orders its work before CUDA's legacy default stream,
    # which a reduction launches on unless told otherwise (and which a read on a
    # non-blocking stream waits for: the fields name it)
    return parse_dlpack(x.__dlpack__(stream=1), 1)


def _torch_stream(index):
    global _torch_stream
    import torch

    _torch_stream = torch._C._cuda_getCurrentRawStream  # later calls go straight to it
    return _torch_stream(index)


def _read_numba(x) -> DeviceFields:
    # an array bound to a stream (cuda.device_array(n, stream=s)) names it, as its
    # interface does: its producer's work is ordered on it
    stream = x.__cuda_array_interface__.get("stream") if getattr(x, "stream", 0) else None
    try:  # the address as an int, without the ctypes object device_ctypes_pointer makes
        data = x.gpu_data
        # an owned pointer forwards every attribute to its view, by a slow lookup
        data = getattr(data, "_view", data)
        ptr = data.device_pointer_value or 0
    except AttributeError:  # no memory
        return DeviceFields(0, x.shape, x.strides, x.dtype, stream)
    try:
        device = data.context.device.id
    except AttributeError:  # memory of no context Numba knows
        device = None
    return DeviceFields(ptr, x.shape, x.strides, x.dtype, stream, device)


def _reader_for(cls):
    module, name = cls.__module__, cls.__name__
    if module.startswith("cupy") and name == "ndarray":
        return _read_cupy
    if module.startswith("torch") and name in ("Tensor", "Parameter"):
        return _read_torch
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(cls, torch.Tensor):
        return _read_torch  # a user's subclass: its lazy views are refused too
    if module.startswith("numba.cuda.cudadrv.devicearray") and name in (
        "DeviceNDArray", "DeviceRecord", "MappedNDArray"
    ):
        return _read_numba
    if not hasattr(cls, "__cuda_array_interface__") and hasattr(cls, "__dlpack__"):
        return _read_dlpack
    return _read_cai


_READERS: dict = {}  # type -> (reader, kind)
#: ``reader_of(type)``: ``(reader, kind)`` of a device array type read before, or None
reader_of = _READERS.get


def _reader(cls):
    found = _READERS.get(cls)
    if found is None:
        kind = next((k for k in ("cupy", "torch", "numba") if cls.__module__.startswith(k)),
                    "cai")
        found = (_reader_for(cls), kind)
        # what inspect reads first; the simulator's arrays are not read this way
        if not cls.__module__.startswith("numba.cuda.simulator") and cls is not np.ndarray:
            _READERS[cls] = found
    return found


def device_fields(x) -> DeviceFields | None:
    """The :class:`DeviceFields` of ``x``, or None if it is not a device array."""
    return _reader(type(x))[0](x)


def _placement(x):
    """``(address, shape, byte strides, itemsize)`` of a device array's
    elements (the simulator's: of the NumPy array it wraps), or None."""
    wrapped = getattr(x, "_ary", None)
    if isinstance(wrapped, np.ndarray):
        return (wrapped.__array_interface__["data"][0], wrapped.shape, wrapped.strides,
                wrapped.itemsize)
    fields = device_fields(x)
    if fields is None:
        return None
    return fields.ptr, tuple(fields.shape), fields.byte_strides(), fields.dtype.itemsize


def _extent(address, shape, strides, itemsize):
    """The bytes ``[low, high)`` the elements span, or None for no element."""
    low = high = address
    for n, step in zip(shape, strides):
        if n == 0:
            return None
        if step < 0:
            low += (n - 1) * step
        else:
            high += (n - 1) * step
    return low, high + itemsize


def aliases(a, b) -> bool:
    """Whether device arrays ``a`` and ``b`` share memory other than as the
    same C-ordered elements at the same addresses (True where that cannot be
    told): a kernel reading ``a`` and writing ``b`` would then read elements
    it had written (NumPy buffers such a call)."""
    pa, pb = _placement(a), _placement(b)
    if pa is None or pb is None:
        return True
    ea, eb = _extent(*pa), _extent(*pb)
    if ea is None or eb is None or ea[1] <= eb[0] or eb[1] <= ea[0]:
        return False
    return not all(ptr == pa[0] and ea == eb and strides == c_strides(shape, itemsize)
                   for ptr, shape, strides, itemsize in (pa, pb))


# --- classification -------------------------------------------------------

#: Python data NumPy makes an array of, by its own dtype rules (``np.sum([1, 2])``)
_PYTHON_DATA = (list, tuple, range, int, float, complex, bool)


def inspect(x, masked: bool = False) -> Input:
    """Classify ``x`` and check its dtype; TypeError names what is wrong. A
    masked array (``numpy.ma``) gives its data and its mask (``Input.mask``)
    where the caller reduces the unmasked elements (``masked=True``), and is a
    TypeError otherwise: its mask is never ignored."""
    found = _READERS.get(type(x))  # a device array type read before: the common case
    if found is None:
        if isinstance(x, np.ndarray):
            if type(x) is not np.ndarray and isinstance(x, np.ma.MaskedArray):
                return _masked(x, masked)
            return host_input(x)
        if _is_simulator_array(x):  # before the protocols: it forwards them to NumPy
            return Input(_device_dtype(x.dtype), tuple(x.shape), device=x, kind="sim")
        if _device_protocol(x):
            found = _reader(type(x))
    if found is not None:
        fields = found[0](x)
        if fields is not None:
            return Input(_device_dtype(fields.dtype), fields.shape, None, x, fields, found[1])
    if isinstance(x, np.generic):  # before the Python scalars: np.float64 is a float
        return host_input(np.asarray(x))
    if isinstance(x, (str, bytes)) or x is None:
        raise _not_an_array(x)
    if isinstance(x, _PYTHON_DATA):
        return host_input(_from_python(x))
    if found is not None and found[1] == "torch":  # a host tensor
        return _host_tensor(x)
    if hasattr(x, "__dlpack_device__") and not hasattr(x, "__array__"):
        return host_input(np.from_dlpack(x))
    if hasattr(x, "__array__") or hasattr(x, "__array_interface__"):
        return host_input(np.asarray(x))
    return host_input(_from_buffer(x))


def _device_protocol(x) -> bool:
    """Whether ``x`` offers a device array's protocol (on the instance: a
    PyTorch CPU tensor's class has ``__cuda_array_interface__``, but reading it
    raises AttributeError; for a tensor that requires grad, RuntimeError)."""
    try:
        if hasattr(x, "__cuda_array_interface__"):
            return True
    except RuntimeError:  # PyTorch's tensor that requires grad: its own reader reads it
        return True
    return hasattr(x, "__dlpack_device__")


def host_input(x: np.ndarray) -> Input:
    """A host NumPy array as an :class:`Input`. Data in the other byte order
    (big-endian FITS or HDF5 data) is reduced as a native copy, made once here:
    the user's array is never changed."""
    if type(x) is not np.ndarray:  # a subclass (np.matrix, np.memmap): its values
        x = x.view(np.ndarray)
    if not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    # ml_dtypes' bfloat16 and this package's marker dtype: kept as its bits
    # (storage() keeps the answer per dtype: NumPy builds dtype.name anew on
    # every read, microseconds a call)
    if storage(x.dtype) != x.dtype:
        return Input(BFLOAT16, x.shape, host=x.view(np.uint16))
    return Input(check_dtype(x.dtype), x.shape, host=x)


def _masked(x, masked: bool) -> Input:
    if not masked:
        raise TypeError("this function does not take a masked array (numpy.ma): pass "
                        "x.compressed() (its unmasked elements) or x.filled(value)")
    info = host_input(np.ma.getdata(x))
    info.mask = np.ma.getmaskarray(x)
    return info


def _device_dtype(dt: np.dtype) -> np.dtype:
    """A device array's dtype, checked: the kernels read native values, and
    there is no host copy to convert, so another byte order is refused."""
    if not dt.isnative:
        raise TypeError(f"a device array of dtype {dt.str} is not in this machine's byte "
                        f"order, which the kernels read: convert it to native byte order "
                        f"first (x.astype(x.dtype.newbyteorder('=')))")
    return check_dtype(dt)


def _not_an_array(x) -> TypeError:
    return TypeError(f"expected an array (NumPy, CuPy, PyTorch, Numba device array, Python "
                     f"numbers or lists, or an object with the buffer protocol), got "
                     f"{type(x).__name__}")


def _from_python(x) -> np.ndarray:
    """A list, tuple, range or Python number as NumPy makes it (``np.asarray``)."""
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as exc:  # ragged lists: NumPy's ValueError
        raise type(exc)(f"the input {type(x).__name__} is not an array NumPy can make: "
                        f"{exc}") from exc


def _from_buffer(x) -> np.ndarray:
    """An object with the buffer protocol (``array.array``, ``bytearray``, a
    memoryview) as the NumPy array viewing it, with its format's dtype."""
    try:
        view = memoryview(x)
    except TypeError:
        raise _not_an_array(x) from None
    try:
        return np.asarray(view)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the input {type(x).__name__} has buffer format {view.format!r}, "
                        f"which NumPy cannot read: {exc}") from exc
