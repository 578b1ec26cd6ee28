"""Generated kernel source for the docs: a MkDocs hook and a small script.

As a hook (``hooks:`` in ``mkdocs.yml``) it replaces every line of the form::

    <!-- pyreduce-source: NAME -->

in a page with a fenced code block holding the source that pyreduce generates
*now* for NAME, so the docs can never show stale kernels. Two more markers::

    <!-- pyreduce-diff: A B -->          the unified diff from variant A to B
    <!-- pyreduce-include: PATH -->      the file docs/PATH (measured results)

An unknown NAME or a missing file fails the build. Nothing is written to disk.

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

#: The small spec every page shows: float32 ``add``, 64 threads, 2 items per thread.
SPEC = {"in_dtype": "float32", "acc_dtype": "float32", "op": "add",
        "block": 64, "warp": 32, "items": 2}

_MARKER = re.compile(r"^<!-- pyreduce-source: ([A-Za-z0-9_]+) -->[ \t]*$", re.MULTILINE)
_DIFF = re.compile(
    r"^<!-- pyreduce-diff: ([A-Za-z0-9_]+) ([A-Za-z0-9_]+) -->[ \t]*$", re.MULTILINE
)
_INCLUDE = re.compile(r"^<!-- pyreduce-include: ([A-Za-z0-9_./-]+) -->[ \t]*$", re.MULTILINE)


def sources() -> dict[str, str]:
    """``{name: source}``: each kernel variant for ``SPEC``, the two CPU folds
    and the N-D gather kernel (2-D)."""
    import numpy as np

    from pyreduce.backends.cpu import LANES, STREAMS, fold_source, lanes_source
    from pyreduce.backends.dialect import CUDA
    from pyreduce.flatten import gather_source
    from pyreduce.ops import as_monoid
    from pyreduce.spec import KernelSpec
    from pyreduce.variants import VARIANTS, generate

    monoid = as_monoid(SPEC["op"], np.dtype(SPEC["in_dtype"]))
    out = {}
    for variant in VARIANTS:
        spec = KernelSpec(
            variant, np.dtype(SPEC["in_dtype"]), np.dtype(SPEC["acc_dtype"]), monoid.key,
            block=SPEC["block"], warp=SPEC["warp"], items=SPEC["items"],
        )
        if spec.items % VARIANTS[variant].options.__dict__.get("shared_factor", 1):
            continue  # double_shared needs items divisible by 2: shown on its page
        out[variant] = generate(spec, CUDA)[1]
    out["cpu_streams"] = fold_source(f"pyreduce_cpu_streams_f4_s{STREAMS}", STREAMS)
    out["cpu_lanes"] = lanes_source(f"pyreduce_cpu_lanes_f4_l{LANES}", LANES)
    out["gather_2d"] = gather_source(2, CUDA)[1]
    return {name: src.strip("\n") + "\n" for name, src in out.items()}


def variant_diff(a: str, b: str) -> str:
    """Unified diff between two variants' sources (each with its default items)."""
    import difflib

    import pyreduce

    def src(name):
        return pyreduce.variant_source(name, "float32", block_size=SPEC["block"]).splitlines()

    lines = difflib.unified_diff(src(a), src(b), a, b, lineterm="", n=2)
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
