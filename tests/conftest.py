"""Fixtures and markers. The simulator is switched on in the root ``conftest.py``;
with ``NUMBA_ENABLE_CUDASIM=0`` on a GPU machine the ``gpu`` tests run and the
``sim`` tests skip."""

import pytest

from pyreduce import backends


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
