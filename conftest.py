"""Kernels run in Numba's CUDA simulator under pytest unless told otherwise.

``NUMBA_ENABLE_CUDASIM`` must be set before numba.cuda is first imported, so it is
set here, before anything is collected (the doctests in ``pyreduce/`` included). On
a GPU machine run ``NUMBA_ENABLE_CUDASIM=0 python -m pytest`` to test the device.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# The kernel cache on disk (pyreduce.diskcache) and the tuning store
# (pyreduce.tuned: measured choices and the host-input cost model): this
# session's own, never the user's, so that what a machine measured before does
# not change the plans the tests expect; and no notices on stderr.
import atexit
import shutil
import tempfile

os.environ["PYREDUCE_CACHE_DIR"] = _cache_dir = tempfile.mkdtemp(prefix="pyreduce-test-cache-")
os.environ["PYREDUCE_TUNING_FILE"] = os.path.join(_cache_dir, "tuning.json")
os.environ["PYREDUCE_QUIET"] = "1"
atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
