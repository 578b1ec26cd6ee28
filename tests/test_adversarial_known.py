"""The defects the adversarial suite meets and does not fix here, each shown
by one small reproduction that must fail (strict xfail): issue 18's items,
which other changes fix (``adversarial.KNOWN``), and what this suite found in
modules being edited elsewhere (below). When a fix lands, its reproduction
passes, the strict xfail fails, and the entry (and its mark) is to be
removed: the property tests then cover those cases too."""

from __future__ import annotations

import numpy as np
import pytest

import adversarial as adv
import pyreduce
from numpy_compare import check

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _params():
    for entry in adv.KNOWN:
        for backend, placement in entry.where:
            marks = [pytest.mark.xfail(strict=True, reason=entry.reason)]
            if backend == "sim":
                marks.append(pytest.mark.sim)
            yield pytest.param(entry, backend, placement, marks=marks,
                               id=f"{entry.reason.split(':')[0]}-{backend}-{placement}")


@pytest.mark.parametrize("entry,backend,placement", list(_params()))
def test_known_defect_reproduces(entry, backend, placement):
    check(entry.example, backend, placement == "device")


# --------------------------------------------------------------------------
# Found by this suite, in modules being edited elsewhere: shown, not fixed here


def test_ddof_of_the_wrong_type_is_named():
    with pytest.raises(TypeError, match="ddof"):
        pyreduce.var(np.arange(4.0), ddof="1", backend="cpu")


@pytest.mark.sim
def test_cpu_backend_reads_simulator_bfloat16_arrays():
    """A simulator device array of ml_dtypes bfloat16 that the cpu backend
    reads is copied back as a host input is made, as its bits (its values
    were taken for bits)."""
    from numba import cuda

    x = np.arange(6.0).astype(adv.BFLOAT16)
    d = cuda.to_device(x)
    assert pyreduce.sum(d, backend="cpu") == 15.0
    assert pyreduce.max(d, backend="cpu") == 5.0
    assert pyreduce.sum(d, backend="sim") == 15.0
