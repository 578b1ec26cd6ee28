"""pyreduce's logger, and one-line notices for waits a user would otherwise not
understand.

``logger`` is ``logging.getLogger("pyreduce")`` with a ``NullHandler``: silent
until the application configures logging. Records at DEBUG say which plan a call
chose and whether a kernel came from the cache or was built::

    import logging
    logging.basicConfig()
    logging.getLogger("pyreduce").setLevel(logging.DEBUG)

:func:`notice` is for the few moments a user waits for more than a second (a
compile, for instance): one line on stderr, once per process for each key, also
logged at INFO. ``PYREDUCE_QUIET=1`` in the environment keeps stderr silent (the
records are still logged).

>>> from pyreduce.log import logger
>>> logger.name
'pyreduce'
"""

from __future__ import annotations

import logging
import os
import sys
import threading

__all__ = ["logger", "notice"]

logger = logging.getLogger("pyreduce")
logger.addHandler(logging.NullHandler())

_said: set = set()
_lock = threading.Lock()


def notice(message: str, key=None) -> bool:
    """Tell the user ``message`` on one line of stderr, the first time ``key``
    (default: the message itself) is noticed in this process; log it at INFO
    every time. Returns whether the line was printed."""
    logger.info(message)
    key = message if key is None else key
    with _lock:
        if key in _said:
            return False
        _said.add(key)
    if os.environ.get("PYREDUCE_QUIET", "") not in ("", "0"):
        return False
    print(f"pyreduce: {message}", file=sys.stderr, flush=True)
    return True
