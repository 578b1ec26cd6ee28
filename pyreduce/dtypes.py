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
    "SUPPORTED_DTYPES", "check_dtype", "tuple_dtype", "is_tuple", "fields", "code",
    "as_value",
]

#: Scalar input and accumulator dtypes the kernels support.
SUPPORTED_DTYPES = tuple(
    np.dtype(t)
    for t in (
        np.bool_,
        np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float32, np.float64,
    )
)
_SUPPORTED = frozenset(SUPPORTED_DTYPES)


def check_dtype(dtype, what: str = "input") -> np.dtype:
    """The dtype as ``np.dtype`` if the kernels support it, else a TypeError."""
    if dtype in _SUPPORTED:  # already a supported np.dtype: the common case, first
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"{what} dtype {dtype!r} is not a NumPy dtype") from exc
    if dt not in _SUPPORTED:
        names = ", ".join(d.name for d in SUPPORTED_DTYPES)
        raise TypeError(f"{what} dtype {dt} is not supported (supported: {names})")
    return dt


def tuple_dtype(field_dtypes) -> np.dtype:
    """The structured dtype of a tuple accumulator with these field dtypes."""
    dts = [check_dtype(d, "tuple field") for d in field_dtypes]
    if len(dts) < 2:
        raise TypeError("a tuple accumulator has at least two fields")
    # aligned: the CUDA target refuses a record field at an unaligned offset
    return np.dtype([(f"f{k}", d) for k, d in enumerate(dts)], align=True)


def is_tuple(dtype: np.dtype) -> bool:
    return dtype.names is not None


def fields(dtype: np.dtype) -> tuple:
    """The scalar dtypes of an accumulator: one for a scalar, one per field."""
    if dtype.names is None:
        return (dtype,)
    return tuple(dtype.fields[name][0] for name in dtype.names)


def code(dtype: np.dtype) -> str:
    """A short identifier-safe name: ``f4``, or ``t_f4_i8`` for a tuple."""
    if dtype.names is None:
        return dtype.str[1:]
    return "t_" + "_".join(d.str[1:] for d in fields(dtype))


def as_value(raw, dtype: np.dtype):
    """A result read back from the device as the user sees it: a NumPy scalar, or
    a tuple of NumPy scalars for a tuple accumulator."""
    if dtype.names is None:
        return dtype.type(raw)
    return tuple(d.type(raw[k]) for k, d in enumerate(fields(dtype)))
