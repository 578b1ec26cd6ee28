"""The docs agree with the data and render as written: the headline figures are
generated from the committed runs, and no prose turns numbers into bold text."""

import importlib.util
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
INCLUDE = '--8<-- "snippets/headlines.md"'


def _module(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(DOCS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def test_headlines_are_those_of_the_data():
    # README block and snippet regenerated from docs/performance/compare*.json
    headlines = _module("gen_headlines")
    assert headlines.main(["--check"]) == 0, "run python docs/gen_headlines.py"
    assert _read("docs", "snippets", "headlines.md") == headlines.render()


@pytest.mark.parametrize("page", ["index.md", "performance.md"])
def test_pages_show_the_generated_headlines(page):
    assert INCLUDE in _read("docs", page)


def test_readme_shows_the_generated_headlines():
    headlines = _module("gen_headlines")
    readme = _read("README.md")
    assert headlines.BEGIN + "\n" + headlines.render() + headlines.END in readme


def test_headlines_follow_the_data(tmp_path, monkeypatch):
    # a changed measurement changes the table: the figures are computed, not typed
    headlines = _module("gen_headlines")
    import json
    import shutil

    for name in headlines.RUNS:
        shutil.copy(os.path.join(headlines.DATA, name), tmp_path / name)
    data = json.loads((tmp_path / "compare.json").read_text())
    for row in data["rows"]:
        if row["lib"] == "pyreduce" and row["n"] == headlines.BIG:
            row["GBps"] *= 1.5
    (tmp_path / "compare.json").write_text(json.dumps(data))
    before = headlines.render()
    monkeypatch.setattr(headlines, "DATA", str(tmp_path))
    after = headlines.render()
    assert before != after and "| 1.51-1.54 |" in after  # 1.00-1.02, times 1.5


def _pages():
    """Every page of the site, and the measured results they include."""
    pages = sorted(n for n in os.listdir(DOCS) if n.endswith(".md"))
    included = [m for page in pages for m in re.findall(
        r"^<!-- pyreduce-include: (\S+) -->", _read("docs", page), flags=re.M)]
    return pages + included


def _prose(text):
    """``text`` without fenced code blocks and code spans."""
    text = re.sub(r"^([ \t]*)(```|~~~).*?^\1\2", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


@pytest.mark.parametrize("page", _pages())
def test_no_powers_written_as_python_in_prose(page):
    # Markdown reads 2**20 ... 2**24 as bold text: prose writes 2<sup>20</sup>
    found = re.findall(r"\d\*\*-?\d+", _prose(_read("docs", page)))
    assert not found, f"{page}: write {found[0]} as 2<sup>..</sup> or as code"


def test_fence_doctests():
    fence = _module("griffe_doctests").fence_doctests
    text = "Sum.\n\n>>> 1 + 1\n2\n\nMore.\n    >>> x\n    3\n```\n>>> kept\n```"
    assert fence(text) == ("Sum.\n\n```pycon\n>>> 1 + 1\n2\n```\n\nMore.\n    ```pycon\n"
                           "    >>> x\n    3\n    ```\n```\n>>> kept\n```")
