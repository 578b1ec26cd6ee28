"""Backends and the choice between them.

========  =================================================================
``cuda``  numba-cuda on an NVIDIA GPU
``hip``   numba-hip on an AMD GPU (``pyreduce-gpu[rocm]``; untested on hardware)
``sim``   the same generated kernels in Numba's CUDA simulator (tests; needs
          ``NUMBA_ENABLE_CUDASIM=1`` before Numba is imported)
``cpu``   Numba ``njit`` folds on the host's cores
``auto``  the input's device if it lives on one, else ``cuda`` when a GPU is
          present, else ``hip`` when an AMD GPU is, else ``cpu`` (with a
          one-time notice)
========  =================================================================
"""

from __future__ import annotations

import functools
import threading
import warnings

from ..forks import renew_in_child

__all__ = ["get", "available", "BACKENDS", "BackendNotice"]

BACKENDS = ("auto", "cuda", "hip", "sim", "cpu")


class BackendNotice(UserWarning):
    """Issued once when ``auto`` falls back to the CPU."""


_lock = renew_in_child(threading.Lock())


@functools.lru_cache(maxsize=None)
def _numba_cuda_mode() -> str | None:
    """'sim', 'cuda' (a usable GPU) or None, decided once per process; by the
    driver alone where it can tell (:func:`pyreduce.backends.cudadriver.gpu_present`),
    since importing numba-cuda to ask it costs a second."""
    from .cubins import remember_toolchain, toolchain
    from .cudadriver import gpu_present

    present = gpu_present(toolchain)
    if present is not None:
        return "cuda" if present else None
    try:
        from numba.cuda.core import config
    except ImportError:
        return None
    if config.ENABLE_CUDASIM:
        return "sim"
    try:
        from numba import cuda

        usable = cuda.is_available()
    except Exception:  # no driver, broken install: the GPU is simply not there
        return None
    if usable:
        # the NVVM library's identity, recorded so that later processes decide
        # by the driver alone: without it a process whose host arrays all went
        # to the cpu backend (no kernel compiled, nothing recorded) left every
        # later one importing numba-cuda for this question, 0.8 s of its first call
        remember_toolchain()
    return "cuda" if usable else None


@functools.lru_cache(maxsize=None)
def _hip_present() -> bool:
    """True if numba-hip is installed and finds an AMD GPU, decided once."""
    from importlib import metadata

    try:  # without numba-hip, importing Numba to find that out costs a cold start a second
        metadata.distribution("numba-hip")
    except metadata.PackageNotFoundError:
        return False
    try:
        from numba import hip

        return bool(hip.is_available())
    except Exception:  # not installed (ImportError), no ROCm, no device
        return False


_instances: dict = {}
_create_lock = renew_in_child(threading.Lock())


def _instance(name: str):
    """One backend object per name, created once even when threads race to it."""
    found = _instances.get(name)
    if found is None:
        with _create_lock:
            found = _instances.get(name)
            if found is None:
                found = _instances[name] = _create(name)
    return found


def _create(name: str):
    if name == "cpu":
        from .cpu import shared

        return shared()
    if name == "hip":
        from .hip import HipBackend

        return HipBackend()
    from .numba_cuda import CudaBackend, SimBackend

    return SimBackend() if name == "sim" else CudaBackend()


def available() -> tuple[str, ...]:
    """The backends this process can use, best first."""
    mode = _numba_cuda_mode()
    return ((mode,) if mode else ()) + (("hip",) if _hip_present() else ()) + ("cpu",)


_noticed = False


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside pyreduce."""
    import os
    import sys

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def get(name: str, on_device: bool = False):
    """The backend called ``name``; ``auto`` as described in this module."""
    global _noticed
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}")
    if name == "cpu":  # no GPU probe: importing numba-cuda costs a cold start a second
        return _instance(name)
    mode = _numba_cuda_mode()
    if name == "auto":
        if on_device and mode:
            name = mode
        elif mode == "cuda":
            name = "cuda"
        elif _hip_present():
            name = "hip"
        else:
            name = "cpu"
            with _lock:
                notice, _noticed = not _noticed, True
            if notice:
                warnings.warn(
                    "pyreduce: no CUDA GPU found, reducing on the CPU backend",
                    BackendNotice, stacklevel=_caller_level(),
                )
    elif name in ("cuda", "sim") and mode != name:
        why = {
            None: "numba-cuda is not installed or finds no GPU",
            "sim": "the CUDA simulator is enabled (NUMBA_ENABLE_CUDASIM=1)",
            "cuda": "the CUDA simulator is not enabled (set NUMBA_ENABLE_CUDASIM=1 "
            "before importing numba)",
        }[mode]
        raise RuntimeError(f"backend {name!r} is not available: {why}")
    elif name == "hip" and not _hip_present():
        raise RuntimeError("backend 'hip' is not available: numba-hip (pyreduce-gpu[rocm]) "
                           "is not installed or finds no AMD GPU")
    return _instance(name)
