"""Kernels run in Numba's CUDA simulator under pytest unless told otherwise.

``NUMBA_ENABLE_CUDASIM`` must be set before numba.cuda is first imported, so it is
set here, before anything is collected (the doctests in ``pyreduce/`` included). On
a GPU machine run ``NUMBA_ENABLE_CUDASIM=0 python -m pytest`` to test the device.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
