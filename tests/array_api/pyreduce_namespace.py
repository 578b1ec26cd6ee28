"""An array API namespace whose reductions are pyreduce's, for the array API
standard's conformance suite (``data-apis/array-api-tests``; see ``run.sh``
here and ``docs/testing.md``).

Everything is NumPy's own array API namespace (NumPy >= 2), except the
reductions pyreduce provides, which are thin adapters: they pass the array
API's keywords on to pyreduce's function of the same meaning, on the backend
named by ``PYREDUCE_ARRAY_API_BACKEND`` (``cpu`` by default; ``sim``, ``cuda``),
and return a 0-d array where pyreduce returns a NumPy scalar (the standard's
functions return arrays). No reduction is computed here.
"""

from __future__ import annotations

import os

import numpy as np

import pyreduce

__array_api_version__ = np.__array_api_version__
__version__ = f"numpy {np.__version__} + pyreduce {pyreduce.__version__}"

#: the backend every adapter runs on
BACKEND = os.environ.get("PYREDUCE_ARRAY_API_BACKEND", "cpu")

#: the functions pyreduce computes here; every other name is NumPy's
REDUCTIONS = (
    # statistical functions
    "max", "mean", "min", "prod", "std", "sum", "var", "cumulative_sum", "cumulative_prod",
    # searching functions
    "argmax", "argmin", "count_nonzero",
    # utility functions
    "all", "any",
)


def _array(result):
    """The standard's result: an array (pyreduce gives NumPy scalars for 0-d)."""
    return result if isinstance(result, np.ndarray) else np.asarray(result)


def max(x, /, *, axis=None, keepdims=False):
    return _array(pyreduce.max(x, axis=axis, keepdims=keepdims, backend=BACKEND))


def min(x, /, *, axis=None, keepdims=False):
    return _array(pyreduce.min(x, axis=axis, keepdims=keepdims, backend=BACKEND))


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    return _array(pyreduce.sum(x, axis=axis, dtype=dtype, keepdims=keepdims, backend=BACKEND))


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    return _array(pyreduce.prod(x, axis=axis, dtype=dtype, keepdims=keepdims, backend=BACKEND))


def mean(x, /, *, axis=None, keepdims=False):
    return _array(pyreduce.mean(x, axis=axis, keepdims=keepdims, backend=BACKEND))


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    return _array(pyreduce.var(x, axis=axis, correction=correction, keepdims=keepdims,
                               backend=BACKEND))


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return _array(pyreduce.std(x, axis=axis, correction=correction, keepdims=keepdims,
                               backend=BACKEND))


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    return pyreduce.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial,
                                   backend=BACKEND)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    return pyreduce.cumulative_prod(x, axis=axis, dtype=dtype, include_initial=include_initial,
                                    backend=BACKEND)


def argmax(x, /, *, axis=None, keepdims=False):
    return _array(pyreduce.argmax(x, axis=axis, keepdims=keepdims, backend=BACKEND))


def argmin(x, /, *, axis=None, keepdims=False):
    return _array(pyreduce.argmin(x, axis=axis, keepdims=keepdims, backend=BACKEND))


def count_nonzero(x, /, *, axis=None, keepdims=False):
    return _array(pyreduce.count_nonzero(x, axis=axis, keepdims=keepdims, backend=BACKEND))


def all(x, /, *, axis=None, keepdims=False):
    return _array(pyreduce.all(x, axis=axis, keepdims=keepdims, backend=BACKEND))


def any(x, /, *, axis=None, keepdims=False):
    return _array(pyreduce.any(x, axis=axis, keepdims=keepdims, backend=BACKEND))


def __getattr__(name):
    # every other name (creation functions, dtypes, elementwise functions,
    # diff, where, ...) is NumPy's, unchanged
    return getattr(np, name)


def __dir__():
    return sorted(set(dir(np)) | set(globals()))
