"""The tuning a public call was given, settled into one
:class:`~pyreduce.planner.Tuning`: its ``tuning=``, its ``variant=`` (the short
way to name a variant) and, for one release, the keywords that tuned the kernels
before ``tuning=`` did (``block_size=``, ``items_per_thread=``, ``warp_size=``,
``max_blocks=``, ``vector_loads=``), each accepted with a DeprecationWarning.
"""

from __future__ import annotations

import sys
import warnings

from .planner import DEFAULT_TUNING, Tuning

__all__ = ["DEFAULT", "DEPRECATED", "settle", "tuning_of", "warn_deprecated"]

#: A call's tuning when it was given none: the planner chooses everything.
DEFAULT = DEFAULT_TUNING

#: The keywords ``tuning=`` replaces (each a field of :class:`Tuning`).
DEPRECATED = ("block_size", "items_per_thread", "warp_size", "max_blocks", "vector_loads")

_KEYWORDS = frozenset(("variant", "tuning", *DEPRECATED))


def tuning_of(name: str, variant="auto", tuning=None, deprecated=None) -> Tuning:
    """The :class:`Tuning` of a call to the public function ``name`` with
    ``variant=``, ``tuning=`` and the deprecated keywords ``deprecated`` (a dict;
    another key in it is a TypeError, as an unknown keyword is)."""
    if tuning is None:
        tuning = DEFAULT
    elif not isinstance(tuning, Tuning):
        raise TypeError(f"{name}(): tuning= must be a pyreduce.Tuning or None, got {tuning!r} "
                        "(e.g. tuning=pyreduce.Tuning(block_size=256))")
    if deprecated:
        tuning = _from_deprecated(name, tuning, deprecated)
    if variant != "auto" and variant != tuning.variant:
        if tuning.variant != "auto":
            raise ValueError(f"{name}(): variant={variant!r} and tuning={tuning!r} name two "
                             "variants; give one")
        tuning = tuning.replace(variant=variant)  # checked as a Tuning is
    return tuning


def settle(name: str, kwargs: dict) -> dict:
    """``kwargs``, the keywords of a call to the public function ``name``, with its
    ``variant=``, ``tuning=`` and deprecated tuning keywords replaced by one
    ``tuning``: a :class:`Tuning` (``kwargs`` itself where it has none of them)."""
    if _KEYWORDS.isdisjoint(kwargs):
        return kwargs
    kwargs = dict(kwargs)
    deprecated = {k: kwargs.pop(k) for k in DEPRECATED if k in kwargs}
    kwargs["tuning"] = tuning_of(name, kwargs.pop("variant", "auto"), kwargs.pop("tuning", None),
                                 deprecated)
    return kwargs


def _from_deprecated(name: str, tuning: Tuning, deprecated: dict) -> Tuning:
    """The Tuning of the deprecated keywords, with a DeprecationWarning saying
    what to write instead."""
    for key in deprecated:
        if key not in DEPRECATED:
            raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
    given = ", ".join(f"{k}={v!r}" for k, v in deprecated.items())
    if tuning is not DEFAULT:
        raise TypeError(f"{name}() got tuning= and {given}: give the whole tuning in "
                        f"tuning= (tuning.replace({given}))")
    tuning = Tuning(**deprecated)  # checked before the warning: a typo fails as such
    warn_deprecated(f"{name}({given}) is deprecated: pass tuning=pyreduce.{tuning!r} "
                    "(the tuning keywords are removed in the next release)")
    return tuning


def warn_deprecated(message: str) -> None:
    """A DeprecationWarning pointed at the first caller outside pyreduce (the
    public calls reach the keywords they check through different paths)."""
    warnings.warn(message, DeprecationWarning, stacklevel=_user_level())


def _user_level() -> int:
    """The ``stacklevel`` of the first frame outside pyreduce, for a warning
    issued by :func:`warn_deprecated`'s caller."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] \
            == "pyreduce":
        frame, level = frame.f_back, level + 1
    return level
