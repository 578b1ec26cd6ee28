"""The benchmarks' one report writer: what a run records about where it ran (the
meta block: device, date, versions), the JSON it is saved as, and what a report
writes from it (Markdown tables, the provenance line, charts)."""

from __future__ import annotations

import datetime
import json
import os

#: the docs folder, where reports write their tables and charts
DOCS = os.path.join(os.path.dirname(__file__), "..", "docs")


def docs(*parts: str) -> str:
    """A path under ``docs/``."""
    return os.path.join(DOCS, *parts)


# --- the meta block


def today() -> str:
    return datetime.date.today().isoformat()


def versions(dists) -> dict:
    """The installed version of each distribution in ``dists`` that is installed."""
    from importlib import metadata

    found = {}
    for dist in dists:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return found


def _text(name) -> str:
    return name.decode() if isinstance(name, bytes) else name


def has_cuda() -> bool:
    """Whether pyreduce has a CUDA GPU (not the simulator) in this process."""
    import pyreduce

    return "cuda" in pyreduce.available()


def gpu_name(via: str = "cupy") -> str | None:
    """The current GPU's name, asked of CuPy (``via="cupy"``), of Numba
    (``"numba"``), or of ``nvidia-smi`` in another process (``"nvidia-smi"``,
    None where it fails: the caller need not touch CUDA)."""
    if via == "cupy":
        import cupy as cp

        return _text(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"])
    if via == "numba":
        from numba import cuda

        return _text(cuda.get_current_device().name)
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None


def meta(dists=(), via: str = "cupy", **fields) -> dict:
    """The meta block of a GPU run: the device's name (:func:`gpu_name`), the
    date, the versions of ``dists``, then ``fields``."""
    return dict(gpu=gpu_name(via), date=today(), versions=versions(dists), **fields)


def cupy_version(versions: dict) -> str | None:
    """The version of whichever CuPy wheel a run recorded."""
    return versions.get("cupy-cuda13x") or versions.get("cupy-cuda12x")


def versions_text(versions: dict, labels: dict | None = None) -> str:
    """``"label version, ..."`` for each ``dist: label`` of ``labels`` (every
    recorded one under its own name without); ``"cupy"`` stands for whichever
    CuPy wheel was recorded where no ``cupy`` entry is."""
    labels = labels or {dist: dist for dist in versions}
    return ", ".join(f"{label} " + str(versions.get(dist) if dist in versions or dist != "cupy"
                                       else cupy_version(versions))
                     for dist, label in labels.items())


# --- the JSON


def load(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def save(path: str, data: dict) -> None:
    """``data`` as the benchmarks write their JSON (``indent=1``)."""
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


def add_row(data: dict, row: dict, text: str, path: str | None) -> None:
    """``row`` appended to ``data["rows"]`` and ``text`` printed, then, with a
    ``path``, ``data`` saved there: a run cut short keeps what it measured."""
    data["rows"].append(row)
    print(text, flush=True)
    if path:
        save(path, data)


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


# --- Markdown


def pow2(n: int) -> str:
    """``n`` as the docs write a power of two: 2<sup>k</sup>."""
    return f"2<sup>{n.bit_length() - 1}</sup>"


def log2(n: int) -> str:
    """``n`` as the plain-text tables write a power of two: 2**k."""
    return f"2**{n.bit_length() - 1}"


def row(cells) -> str:
    """A Markdown table row."""
    return "| " + " | ".join(cells) + " |"


def rule(align: str) -> str:
    """A Markdown table's rule, one character a column: ``l`` (``---``) or ``r``
    (``--:``)."""
    return "|" + "|".join("--:" if a == "r" else "---" for a in align) + "|"


def table(head, rows, align: str | None = None) -> list[str]:
    """The lines of a Markdown table: ``head``, the rule (:func:`rule`; every column
    left-aligned without ``align``), then ``rows``, each a list of cells."""
    return [row(head), rule(align or "l" * len(head))] + [row(cells) for cells in rows]


# --- charts


def pyplot():
    """matplotlib's pyplot, drawing to files (the Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_chart(fig, path: str, dpi: int = 100) -> None:
    """``fig`` saved to ``path``, and closed."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=dpi)
    plt.close(fig)
