"""pyreduce: GPU reductions with any associative operator, kernels written in Python.

>>> import numpy as np, pyreduce
>>> float(pyreduce.reduce(np.array([1.0, 5.0, 2.0]), op=max, backend="cpu"))
5.0
"""

from ._version import __version__ as __version__
from .general import reduce
from .general import scale_out_with as _scale_out_with
from .named import all, any, max, min, nanmax, nanmin, nanprod, nansum, prod, sum
from .numba_reduce import Reduce
from .segmented import segmented_reduce
from .stats import argmax, argmin, mean, minmax, std, var
from .backends import BackendNotice, available
from .cache import KERNELS as _KERNELS
from .cumulative import cumprod, cumsum, cumulative_prod, cumulative_sum, scan
from .deterministic import reference
from .explain import Explanation, explain
from .nanstats import count_nonzero, nanargmax, nanargmin, nanmean, nanstd, nanvar, ptp
from .planner import Tuning
from .variants import VARIANTS as variants
from .variants import variant_source

__all__ = [
    "reduce", "sum", "prod", "max", "min", "any", "all", "nanmax", "nanmin", "Reduce",
    "segmented_reduce", "argmax", "argmin", "minmax", "mean", "var", "std", "nansum",
    "nanprod", "nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin", "ptp",
    "count_nonzero", "reference", "scan", "cumsum", "cumprod", "cumulative_sum",
    "cumulative_prod",
    "explain", "Explanation", "Tuning", "variants", "variant_source", "available", "BackendNotice",
    "cache_info", "cache_clear", "warmup", "tuning",
]


def _scale_out(name, args):
    """A public call of a Dask collection: :func:`pyreduce.dask.call`, imported
    on first use (it builds on the public calls, which live below it)."""
    from . import dask

    return dask.call(name, args)


_scale_out_with(_scale_out)


def __getattr__(name):
    # pyreduce.testing needs hypothesis, a test extra: imported on first use, so
    # that `import pyreduce` works without it
    # pyreduce.tuning (the tuner) runs whole reductions and times them: imported
    # on first use too, so that `import pyreduce` stays quick
    if name in ("testing", "tuning"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def cache_info():
    """The kernel caches, as a :class:`pyreduce.diskcache.CacheInfo`: in memory
    (``hits``, ``builds``, ``size``, all backends; it keeps the ``maxsize`` most
    recently used kernels and compiled operators, ``evictions`` counts those
    dropped) and on disk (``disk_dir``, ``disk_entries``, ``disk_bytes``,
    ``disk_hits``, ``disk_misses``, ...)."""
    from .diskcache import info

    return info(_KERNELS.info())


def warmup(ops=None, dtypes=None, backend="auto", sizes=None, progress=True):
    """Build the kernels of ``ops`` (default: sum, max, min) for ``dtypes``
    (default: float32, float64, int32, int64) ahead of time, into the disk cache,
    so that later processes skip the compiles. See :func:`pyreduce.prebuild.warmup`."""
    from .prebuild import warmup as build

    return build(ops, dtypes, backend, sizes, progress)


def cache_clear(disk=False):
    """Forget every built kernel and compiled operator, the plans that hold them,
    the calls remembered with them (:mod:`pyreduce.callmemo`) and every other memo
    (:data:`pyreduce.cache.MEMOS`) and the spare PyTorch results their repeats
    made; with ``disk=True`` also remove the disk
    cache's entries (what ``python -m pyreduce cache clear`` does)."""
    from . import diskcache, planner
    from .backends import results
    from .cache import MEMOS

    if disk:
        diskcache.clear()
    diskcache.reset_stats()
    _KERNELS.clear()
    planner.clear_plans()  # and what was decided with them
    for memo in MEMOS.values():
        memo.clear()
    results.drop_spares()  # the spare PyTorch results the remembered calls made
