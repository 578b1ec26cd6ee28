"""Fixtures and markers. The simulator is switched on in the root ``conftest.py``;
with ``NUMBA_ENABLE_CUDASIM=0`` on a GPU machine the ``gpu`` tests run and the
``sim`` tests skip."""

import os
import sys

import pytest

from pyreduce import backends

# test files share helpers from tests/oracles.py
sys.path.insert(0, os.path.dirname(__file__))


def pytest_collection_modifyitems(config, items):
    present = backends.available()
    skip_gpu = pytest.mark.skip(reason="no CUDA GPU in this process")
    skip_sim = pytest.mark.skip(reason="CUDA simulator not enabled in this process")
    for item in items:
        if "gpu" in item.keywords and "cuda" not in present:
            item.add_marker(skip_gpu)
        if "sim" in item.keywords and "sim" not in present:
            item.add_marker(skip_sim)


@pytest.fixture(params=[b for b in ("cuda", "sim", "cpu")])
def backend(request):
    """Every backend; those absent from this process are skipped."""
    if request.param not in backends.available():
        pytest.skip(f"backend {request.param} not available in this process")
    return request.param


def count_calls(monkeypatch, module, name: str, *also) -> list:
    """``[n]``: the calls of ``module.name`` since now (the same function where
    the modules of ``also`` imported it), through a counting wrapper; the
    remembered repeat calls (``pyreduce.callmemo``) are forgotten first."""
    from pyreduce import callmemo

    count = [0]
    real = getattr(module, name)

    def counting(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    for owner in (module, *also):
        monkeypatch.setattr(owner, name, counting)
    callmemo.clear()
    return count


@pytest.fixture
def prepares(monkeypatch):
    """The number of full-path calls (``prepare``, from the public calls and from
    masked inputs) since the test began; the remembered repeat calls are
    forgotten first (``pyreduce.callmemo``)."""
    from pyreduce import general, masked

    return count_calls(monkeypatch, general, "prepare", masked)


# --------------------------------------------------------------------------
# Hypothesis profiles and shared fixtures for the API/semantics test files.
#
# Profiles (HYPOTHESIS_PROFILE): "ci", the default (no deadline, since a simulated
# launch runs one Python thread per CUDA thread; bounded example counts), "thorough"
# (10 times the examples of every property test) and "dev" (a fifth of them). The
# tests set their counts with ``settings(max_examples=examples(n))``; ``examples``
# scales ``n`` by the profile's factor, or by PYREDUCE_EXAMPLES_SCALE when set.

import os as _os  # noqa: E402  (with the section it serves)

from hypothesis import HealthCheck, Phase, settings  # noqa: E402

_COMMON = dict(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        # the ``backend`` fixture only returns a name: sharing it between
        # examples is harmless
        HealthCheck.function_scoped_fixture,
    ],
    print_blob=True,
)
settings.register_profile("ci", max_examples=25, **_COMMON)
settings.register_profile("dev", max_examples=5, **_COMMON)
settings.register_profile("thorough", max_examples=200, **_COMMON)
# "triage": failures reported as found, not shrunk (each shrink step on a GPU may
# build a kernel)
settings.register_profile("triage", max_examples=25, phases=[Phase.explicit, Phase.reuse,
                                                             Phase.generate], **_COMMON)
settings.load_profile(_os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_PROFILE_SCALE = {"thorough": 10.0, "dev": 0.2}.get(_os.environ.get("HYPOTHESIS_PROFILE"), 1.0)


def examples(n: int) -> int:
    """``n`` examples scaled by the profile's factor (or PYREDUCE_EXAMPLES_SCALE):
    ``from conftest import examples``."""
    scale = float(_os.environ.get("PYREDUCE_EXAMPLES_SCALE", _PROFILE_SCALE))
    return max(1, int(n * scale))


@pytest.fixture(params=["cuda", "sim"])
def gpu_backend(request):
    """The backends that run the generated kernels (``variant=`` applies)."""
    if request.param not in backends.available():
        pytest.skip(f"backend {request.param} not available in this process")
    return request.param


@pytest.fixture(params=["host", "device"])
def placement(request, backend):
    """Where a test's input lives: host, or (GPU backends) a device array."""
    if request.param == "device" and backend == "cpu":
        pytest.skip("device inputs are a GPU backend's; the cpu backend copies them")
    return request.param


@pytest.fixture(autouse=True, scope="module")
def _gpu_memory_released():
    """On a GPU, each test module gives back the device memory its arrays left
    behind: Numba's deferred frees (up to ten arrays, or a fifth of the GPU's
    memory, wait in each process before they are made), CuPy's pools and
    PyTorch's cache, none of which give memory back to the other processes by
    themselves. With several test processes sharing one GPU (``pytest -n``)
    what all of them kept can outgrow it."""
    yield
    if "cuda" not in backends.available():
        return
    import gc

    from numba import cuda

    gc.collect()
    try:
        cuda.current_context().memory_manager.deallocations.clear()
    except AttributeError:  # an external memory manager: nothing pending here
        pass
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
