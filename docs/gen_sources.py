"""Generated kernel source for the docs: a MkDocs hook and a small script.

As a hook (``hooks:`` in ``mkdocs.yml``) it replaces every line of the form::

    <!-- pyreduce-source: NAME -->

in a page with a fenced code block holding the source that pyreduce generates
*now* for NAME, so the docs can never show stale kernels. NAME is any variant in
the registry (for :data:`SPEC`), ``cpu_streams``, ``cpu_lanes``, ``gather_2d`` or
a batched kernel of :data:`BATCHED`.
Two more markers::

    <!-- pyreduce-diff: A B -->          the unified diff from variant A to B
    <!-- pyreduce-include: PATH -->      the file docs/PATH (measured results)

An unknown NAME or variant, or a missing file, fails the build. Nothing is written
to disk.

As a script it prints the same sources, or writes them as ``NAME.py`` files::

    python docs/gen_sources.py                  # print all
    python docs/gen_sources.py --out DIR        # write DIR/NAME.py
    python docs/gen_sources.py --check DIR      # exit 1 if DIR/NAME.py differ
"""

from __future__ import annotations

import argparse
import os
import re
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:  # a checkout that is not pip-installed
    sys.path.insert(0, _ROOT)

#: The small spec every page shows: float32, 64 threads per block, warp 32 (the
#: operator is a name in the kernel's namespace, so it does not change the text).
#: Items per thread are each variant's own default (its ``default_items``, else the
#: planner's 16 bytes per thread: 4 for float32), as ``pyreduce.variant_source``
#: chooses them, so ``pyreduce-source`` and ``pyreduce-diff`` show the same kernels
#: and every variant can be shown (``double_shared`` needs an even count).
SPEC = {"dtype": "float32", "block": 64, "warp": 32}

_MARKER = re.compile(r"^<!-- pyreduce-source: ([A-Za-z0-9_]+) -->[ \t]*$", re.MULTILINE)
_DIFF = re.compile(
    r"^<!-- pyreduce-diff: ([A-Za-z0-9_]+) ([A-Za-z0-9_]+) -->[ \t]*$", re.MULTILINE
)
_INCLUDE = re.compile(r"^<!-- pyreduce-include: ([A-Za-z0-9_./-]+) -->[ \t]*$", re.MULTILINE)


def variant(name: str) -> str:
    """The source of variant ``name`` for ``SPEC``, with its own default items."""
    import pyreduce

    return pyreduce.variant_source(
        name, SPEC["dtype"], block_size=SPEC["block"], warp_size=SPEC["warp"]
    )


#: Kernels of batched reductions (``axis=``, segments) shown in docs/axes.md:
#: name -> ``BatchSpec`` fields beyond ``SPEC`` (4 items per thread).
BATCHED = {
    "batch_rows_staged": dict(family="segments", group="staged", row=3),
    "batch_rows_lanes": dict(family="segments", group="lanes", lanes=4, vector=4),
    "batch_rows_warp": dict(family="segments", group="warp", vector=4),
    "batch_rows_block_split": dict(family="segments", group="block", vector=4, split=True),
    "batch_segments_thread": dict(family="segments", group="thread", source="offsets"),
    "batch_segments_finish": dict(family="segments", group="warp", source="offsets",
                                  finish=True, initial=True),
    "batch_columns": dict(family="columns", vector=4),
    "batch_columns_narrow": dict(family="columns", vector=4, narrow=True),
}


def sources() -> dict[str, str]:
    """``{name: source}``: every kernel variant in the registry for ``SPEC``, the
    two CPU folds, the N-D gather kernel (2-D) and the batched kernels of
    :data:`BATCHED`."""
    import numpy as np

    from pyreduce.backends.cpu import LANES, STREAMS, fold_source, lanes_source
    from pyreduce.dialect import CUDA
    from pyreduce.flatten import gather_source
    from pyreduce.spec import BatchSpec
    from pyreduce.variants import VARIANTS, generate

    out = {name: variant(name) for name in VARIANTS}
    out["cpu_streams"] = fold_source(f"pyreduce_cpu_streams_f4_s{STREAMS}", STREAMS)
    out["cpu_lanes"] = lanes_source(f"pyreduce_cpu_lanes_f4_l{LANES}", LANES)
    out["gather_2d"] = gather_source(2, CUDA)[1]
    dt = np.dtype(SPEC["dtype"])
    for name, fields in BATCHED.items():
        spec = BatchSpec(in_dtype=dt, acc_dtype=dt, op_key="op", block=SPEC["block"],
                         warp=SPEC["warp"], items=4, **fields)
        out[name] = generate(spec, CUDA)[1]
    return {name: src.strip("\n") + "\n" for name, src in out.items()}


def variant_diff(a: str, b: str) -> str:
    """Unified diff from variant ``a``'s source to ``b``'s (``SPEC``, each with its
    own default items)."""
    import difflib

    lines = difflib.unified_diff(
        variant(a).splitlines(), variant(b).splitlines(), a, b, lineterm="", n=2
    )
    return "\n".join(lines) + "\n"


def _include(path: str, where: str) -> str:
    full = os.path.join(_ROOT, "docs", path)
    if not os.path.exists(full):
        raise FileNotFoundError(f"{where}: pyreduce-include {path!r} not found")
    with open(full) as f:
        return f.read()


def expand(markdown: str, where: str = "page") -> str:
    """``markdown`` with every marker replaced by its source in a code block."""
    markdown = _DIFF.sub(
        lambda m: f"```diff\n{variant_diff(m.group(1), m.group(2))}```", markdown
    )
    markdown = _INCLUDE.sub(lambda m: _include(m.group(1), where), markdown)
    if not _MARKER.search(markdown):
        return markdown
    found = sources()

    def block(match):
        name = match.group(1)
        if name not in found:
            raise KeyError(
                f"{where}: unknown pyreduce-source {name!r}; known: {', '.join(found)}"
            )
        return f"```python\n{found[name]}```"

    return _MARKER.sub(block, markdown)


# --- MkDocs hook

def on_page_markdown(markdown, page, config, files):
    return expand(markdown, page.file.src_path)


# --- script

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--out", metavar="DIR", help="write DIR/NAME.py for every source")
    g.add_argument("--check", metavar="DIR",
                   help="compare DIR/NAME.py with what pyreduce generates now")
    args = p.parse_args(argv)
    found = sources()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        for name, src in found.items():
            with open(os.path.join(args.out, f"{name}.py"), "w") as f:
                f.write(src)
        print(f"wrote {len(found)} files to {args.out}")
        return 0
    if args.check:
        stale = []
        for name, src in found.items():
            path = os.path.join(args.check, f"{name}.py")
            try:
                with open(path) as f:
                    same = f.read() == src
            except FileNotFoundError:
                same = False
            if not same:
                stale.append(path)
        for path in stale:
            print(f"stale or missing: {path}")
        return 1 if stale else 0
    for name, src in found.items():
        print(f"# ==== {name} ====\n{src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
