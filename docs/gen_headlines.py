"""The headline figures, from the committed measurements, in one place.

Reads ``docs/performance/compare.json`` (H100) and ``compare-h200.json`` (H200),
the raw data of ``bench/compare.py run``, and writes the table that the README,
the home page and the performance page show:

* ``docs/snippets/headlines.md``, which ``docs/index.md`` and
  ``docs/performance.md`` include (``pymdownx.snippets``);
* the block between the ``headlines`` markers in ``README.md`` (GitHub renders
  no includes).

::

    python docs/gen_headlines.py            # rewrite both from the data
    python docs/gen_headlines.py --check    # exit 1 if either is stale

``tests/test_docs.py`` runs the check, so the three pages cannot disagree with
each other or with the data.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "performance")
#: The runs the headlines come from, one column each.
RUNS = ("compare.json", "compare-h200.json")
SNIPPET = os.path.join(ROOT, "docs", "snippets", "headlines.md")
README = os.path.join(ROOT, "README.md")
BEGIN = "<!-- headlines: begin (written by python docs/gen_headlines.py) -->"
END = "<!-- headlines: end -->"

#: The cases whose accumulator is the input's dtype (the like-for-like ones).
SAME = ("float32 sum", "float32 max", "float64 sum", "float64 max", "int32 sum")
WIDE = "int8->int64 sum"
BIG, SMALL = 2**28, 2**10


def load(name: str) -> dict:
    with open(os.path.join(DATA, name)) as f:
        return json.load(f)


def _row(rows, lib, case, n):
    found = [r for r in rows if r["lib"] == lib and r["case"] == case and r["n"] == n]
    if not found:
        raise KeyError(f"no {lib} {case} row at {n} elements")
    return found[0]


def _span(values, fmt="{:.2f}", unit="") -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return (lo if lo == hi else f"{lo}-{hi}") + unit


def _against(rows, cases, key) -> str:
    """pyreduce's span of call times in µs, and CuPy's."""
    ours = _span([_row(rows, "pyreduce", c, SMALL)[key] for c in cases], "{:.0f}")
    theirs = _span([_row(rows, "cupy", c, SMALL)[key] for c in cases], "{:.0f}")
    return f"{ours} (CuPy {theirs})"


def column(run: dict) -> list[str]:
    """One GPU's cells, in the order of :data:`LABELS`."""
    rows = run["rows"]
    if not all(r["correct"] for r in rows):
        raise ValueError(f"{run['meta']['gpu']}: a wrong answer in the data")

    def ratio(lib, other, case, n, key="GBps", inverse=False):
        a, b = _row(rows, lib, case, n)[key], _row(rows, other, case, n)[key]
        return b / a if inverse else a / b

    cases = SAME + (WIDE,)
    return [
        _span([ratio("pyreduce", "cupy", c, BIG) for c in SAME]),
        _span([ratio("pyreduce", "cupy", c, 2**24) for c in SAME]),
        f"{ratio('pyreduce', 'cupy', WIDE, BIG):.2f}",
        _span([ratio("pyreduce-lambda", "pyreduce", c, BIG) for c in cases]),
        _span([ratio("pyreduce", "numba.cuda.reduce", c, BIG) for c in SAME], "{:.0f}"),
        _against(rows, cases, "host_us"),
        _against(rows, cases, "call_us"),
        f"{run['meta']['compile']['first_call_s']:.2f} s",
    ]


LABELS = [
    "float32, float64 and int32 sums and maxima of 2<sup>28</sup> elements: "
    "bandwidth, pyreduce / CuPy",
    "the same at 2<sup>24</sup> elements",
    "int8 summed into int64, 2<sup>28</sup> elements: pyreduce / CuPy",
    "a user's lambda / the built-in op, 2<sup>28</sup> elements",
    "pyreduce / `numba.cuda.reduce`, 2<sup>28</sup> elements",
    "µs per call returning a host scalar, 2<sup>10</sup> elements",
    "µs per call leaving the result on the device, 2<sup>10</sup> elements",
    "the first call with a new lambda (compile, then run)",
]


def render(runs=RUNS) -> str:
    """The headline table and its one-line source note, as Markdown."""
    found = [load(name) for name in runs]
    cols = [column(run) for run in found]
    gpus = [run["meta"]["gpu"] for run in found]
    lines = ["| | " + " | ".join(gpus) + " |", "|---" + "|--:" * len(gpus) + "|"]
    for k, label in enumerate(LABELS):
        lines.append(f"| {label} | " + " | ".join(col[k] for col in cols) + " |")
    dates = sorted({run["meta"]["date"] for run in found})
    lines += ["", "A ratio above 1 favours the first named. Measured by `bench/compare.py run` on "
              f"{' and '.join(dates)}, every library in one process on the same arrays, "
              "GPU time from CUDA events with the GPU held; raw data: "
              + ", ".join(f"`docs/performance/{name}`" for name in runs) + "."]
    return "\n".join(lines) + "\n"


def with_readme_block(readme: str, text: str) -> str:
    """``readme`` with the text between the markers replaced by ``text``."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md lacks the markers {BEGIN!r} ... {END!r}")
    return readme[:start] + BEGIN + "\n" + text + END + readme[end + len(END):]


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true",
                   help="exit 1 if the snippet or the README block is stale")
    args = p.parse_args(argv)
    text = render()
    wanted = {SNIPPET: text, README: with_readme_block(_read(README), text)}
    stale = [path for path, content in wanted.items() if _read(path) != content]
    if args.check:
        for path in stale:
            print(f"stale: {os.path.relpath(path, ROOT)} (run python docs/gen_headlines.py)")
        return 1 if stale else 0
    for path in stale:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(wanted[path])
        print(f"wrote {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
