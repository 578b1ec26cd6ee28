"""The dtypes kernels load and accumulate: scalars, and tuples of scalars.

A *tuple accumulator* (argmax's ``(value, index)``, Welford's ``(count, mean,
m2)``, a user op over tuples) is described by a NumPy structured dtype with
fields ``f0, f1, ...`` of supported scalar dtypes, in order, each at an offset
aligned to its size (as a C struct lays them out). Partials live
in device arrays of that dtype (one record per block); inside a kernel the
accumulator is a Numba tuple, moved through shuffles and shared memory field by
field.

>>> t = tuple_dtype([np.float32, np.int64])
>>> fields(t), t.itemsize
((dtype('float32'), dtype('int64')), 16)
>>> code(tuple_dtype([np.float32, np.int64])), code(np.dtype(np.int8))
('t_f4_i8', 'i1')
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "SUPPORTED_DTYPES", "ACCUMULATOR_DTYPES", "BFLOAT16", "check_dtype", "check_accumulator",
    "default_accumulator", "tuple_dtype", "is_tuple", "is_bfloat16", "element", "storage",
    "name",
    "bfloat16_to_float32", "fields", "code", "as_value", "carrier",
]

#: Scalar dtypes the kernels accumulate in.
ACCUMULATOR_DTYPES = tuple(
    np.dtype(t)
    for t in (
        np.bool_,
        np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float32, np.float64, np.complex64, np.complex128,
    )
)
#: bfloat16, which NumPy lacks: its 16 bits are stored as ``uint16`` and turned
#: into float32 as they are loaded (``bf16_t`` in generated code). This dtype is
#: only a name for it (a one-field record holding the bits); arrays of it are
#: kept as ``uint16`` (:func:`storage`).
BFLOAT16 = np.dtype([("bfloat16", "<u2")])
#: Scalar dtypes the kernels load: the accumulators', float16 and bfloat16, which
#: accumulate in float32 (half precision has too few digits to sum in).
SUPPORTED_DTYPES = ACCUMULATOR_DTYPES + (np.dtype(np.float16), BFLOAT16)
_SUPPORTED = frozenset(SUPPORTED_DTYPES)
_ACCUMULATORS = frozenset(ACCUMULATOR_DTYPES)


def _dtype(dtype, what: str) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"{what} dtype {dtype!r} is not a NumPy dtype") from exc
    return BFLOAT16 if dt.name == "bfloat16" else dt  # ml_dtypes' bfloat16


def check_dtype(dtype, what: str = "input") -> np.dtype:
    """The dtype as ``np.dtype`` if the kernels load it, else a TypeError."""
    if dtype in _SUPPORTED:  # already a supported np.dtype: the common case, first
        return dtype
    dt = _dtype(dtype, what)
    if dt not in _SUPPORTED:
        names = ", ".join(name(d) for d in SUPPORTED_DTYPES)
        raise TypeError(f"{what} dtype {dt} is not supported (supported: {names})")
    return dt


def check_accumulator(dtype, what: str = "dtype=") -> np.dtype:
    """The dtype as ``np.dtype`` if the kernels accumulate in it, else a TypeError."""
    if dtype in _ACCUMULATORS:
        return dtype
    dt = check_dtype(dtype, what)
    if dt not in _ACCUMULATORS:
        raise TypeError(f"{what} {name(dt)} is not an accumulator dtype: float16 and "
                        "bfloat16 are loaded and accumulated in float32 (the default) or "
                        "float64")
    return dt


def default_accumulator(dtype: np.dtype) -> np.dtype:
    """What an input dtype accumulates in without ``dtype=``: itself, except
    float16 and bfloat16, which accumulate in float32."""
    return _WIDENED.get(dtype, dtype)  # a lookup: a repeat call makes this one


_WIDENED = {np.dtype(np.float16): np.dtype(np.float32), BFLOAT16: np.dtype(np.float32)}


def is_bfloat16(dtype: np.dtype) -> bool:
    return dtype == BFLOAT16


def element(dtype: np.dtype) -> np.dtype:
    """The dtype a map sees an element of ``dtype`` as: bfloat16 and float16 as
    float32, on every backend (Numba's CPU target has no half precision)."""
    return _WIDENED.get(dtype, dtype)


def storage(dtype: np.dtype) -> np.dtype:
    """The dtype an array of ``dtype`` is kept in: ``uint16`` for bfloat16, this
    module's marker or ml_dtypes' (a Numba device array of ml_dtypes' bfloat16
    keeps that dtype, which Numba cannot type). Read on every call of a device
    input: NumPy builds ``dtype.name`` anew each time (microseconds), so the
    answer is kept per dtype (a handful in any program)."""
    found = _STORAGE.get(dtype)
    if found is None:
        found = np.dtype(np.uint16) if dtype == BFLOAT16 or dtype.name == "bfloat16" else dtype
        if len(_STORAGE) < 256:
            _STORAGE[dtype] = found
    return found


_STORAGE: dict = {}


def name(dtype: np.dtype) -> str:
    """``float64``, ``bfloat16``, or ``(float64, int64)`` for a tuple accumulator."""
    if is_tuple(dtype):
        return "(" + ", ".join(name(d) for d in fields(dtype)) + ")"
    return "bfloat16" if dtype == BFLOAT16 else dtype.name


def bfloat16_to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 values (their bits, as ``uint16``) as float32, exactly: bfloat16 is
    the upper half of a float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def tuple_dtype(field_dtypes) -> np.dtype:
    """The structured dtype of a tuple accumulator with these field dtypes."""
    dts = [check_accumulator(d, "tuple field") for d in field_dtypes]
    if any(d.kind == "c" for d in dts):
        raise TypeError("a tuple accumulator's fields are real: give a complex value as "
                        "two fields")
    if len(dts) < 2:
        raise TypeError("a tuple accumulator has at least two fields")
    # aligned: the CUDA target refuses a record field at an unaligned offset
    return np.dtype([(f"f{k}", d) for k, d in enumerate(dts)], align=True)


def is_tuple(dtype: np.dtype) -> bool:
    return dtype.names is not None and dtype != BFLOAT16


def negative_zero(dtype: np.dtype):
    """-0.0 of a float or complex ``dtype`` (both parts of a complex one): the
    exact identity of IEEE addition, which the sums on the host start from."""
    return dtype.type(complex(-0.0, -0.0) if dtype.kind == "c" else -0.0)


def fields(dtype: np.dtype) -> tuple:
    """The scalar dtypes of an accumulator: one for a scalar, one per field."""
    if dtype.names is None:
        return (dtype,)
    found = _FIELDS.get(dtype)
    if found is None:
        found = tuple(dtype.fields[name][0] for name in dtype.names)
        if len(_FIELDS) < 256:  # a few accumulator dtypes a process; bounded all the same
            _FIELDS[dtype] = found
    return found


#: :func:`fields` of record dtypes (every result of a tuple accumulator reads them)
_FIELDS: dict = {}


def code(dtype: np.dtype) -> str:
    """A short identifier-safe name: ``f4``, or ``t_f4_i8`` for a tuple."""
    if dtype == BFLOAT16:
        return "bf16"
    if dtype.names is None:
        return dtype.str[1:]
    return "t_" + "_".join(d.str[1:] for d in fields(dtype))


def as_value(raw, dtype: np.dtype):
    """A result read back from the device as the user sees it: a NumPy scalar, or
    a tuple of NumPy scalars for a tuple accumulator."""
    if dtype.names is None:
        return dtype.type(raw)
    return tuple(d.type(raw[k]) for k, d in enumerate(fields(dtype)))


def carrier(dtype: np.dtype):
    """The type a shuffle moves for ``dtype``: Numba's shuffles take 32- and 64-bit
    signed ints and floats; narrower values ride in an int32 and are cast back, a
    complex value's parts in their float type."""
    if dtype.kind == "c":
        return np.float32 if dtype.itemsize == 8 else np.float64
    if dtype.kind == "f":
        return dtype.type
    return np.int64 if dtype.itemsize == 8 else np.int32
