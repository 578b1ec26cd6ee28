"""A griffe extension for the API pages: docstrings render as Markdown.

The docstrings keep their doctests bare (``>>>`` lines, run by ``pytest
--doctest-modules``). Outside a Google-style ``Examples:`` section Markdown would
read them as nested block quotes and run them together into one paragraph, so
each run of lines that starts with ``>>>`` is fenced as a ``pycon`` block here,
when the docs are built. Sphinx roles (``:func:`tune```) become code spans, and
a dataclass's generated docstring (its signature again) is dropped. The source
is not changed.
"""

from __future__ import annotations

import re

import griffe

_PROMPT = re.compile(r"^(\s*)>>> ?")
_FENCE = re.compile(r"^\s*(```|~~~)")
_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc|obj):`~?([^`]+)`")


def fence_doctests(text: str) -> str:
    """``text`` with each block of doctest lines (from a ``>>>`` line to the next
    blank line) inside a ```` ```pycon ```` fence at the block's indentation."""
    out, inside, fenced = [], None, False
    for line in text.splitlines():
        fence = _FENCE.match(line)
        if inside is not None and (fence or not line.strip()):
            out.append(f"{inside}```")
            inside = None
        if fence:
            fenced = not fenced
        prompt = None if fenced else _PROMPT.match(line)
        if inside is None and prompt:
            inside = prompt.group(1)
            out.append(f"{inside}```pycon")
        out.append(line)
    if inside is not None:
        out.append(f"{inside}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fence the doctests of every docstring griffe loads."""

    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is None:
            return
        text = obj.docstring.value
        if obj.is_class and "\n" not in text and text.startswith(f"{obj.name}("):
            obj.docstring = None  # a dataclass's generated docstring: its signature again
            return
        obj.docstring.value = _ROLE.sub(r"`\1`", fence_doctests(text))
