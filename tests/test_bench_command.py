"""``python -m pyreduce bench``: the op as text, the table, JSON and chart."""

import io
import json
import sys

import numpy as np
import pytest

from pyreduce.__main__ import main
from pyreduce.bench_command import Progress, parse_op, parse_size


def _last_nonzero(a, b):
    return b if b != 0 else a


def test_ops_from_text():
    assert parse_op("max") == "max"
    assert parse_op("lambda a, b: a if a > b else b")(2, 5) == 5
    assert parse_op("lambda a, b: np.maximum(a, b)")(2, 5) == 5
    assert parse_op("tests.test_bench_command:_last_nonzero")(3, 0) == 3
    assert parse_op("math:hypot")(3, 4) == 5.0


@pytest.mark.parametrize("text, why", [
    ("nosuch.module:f", "cannot import"), ("math:nosuch", "cannot import"),
    ("lambda a, b:", "not a built-in op name"), ("42", "is a int, not a function"),
])
def test_bad_ops_say_why(text, why):
    with pytest.raises(ValueError, match=why):
        parse_op(text)


@pytest.mark.parametrize("text, n", [("2**20", 2**20), ("1e6", 10**6), ("1_000", 1000),
                                     ("77", 77)])
def test_sizes(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["0", "-3", "two", "2**"])
def test_bad_sizes(text):
    with pytest.raises(ValueError, match="positive count"):
        parse_size(text)


def test_cpu_table_and_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["bench", "lambda a, b: a if a > b else b", "--backend", "cpu", "--dtypes",
               "float32", "int16", "--sizes", "100", "2**12", "--reps", "2", "--rounds", "2",
               "--json", str(out)])
    assert rc == 0
    printed = capsys.readouterr()
    assert "[4/4] int16 2**12 pyreduce cpu" in printed.err  # progress, not a terminal
    assert "pyreduce cpu" in printed.out and "GB/s" in printed.out
    found = json.loads(out.read_text())
    assert found["meta"]["timing"] == "wall" and found["meta"]["backend"] == "cpu"
    rows = found["rows"]
    assert [(r["dtype"], r["n"]) for r in rows] == [
        ("float32", 100), ("float32", 4096), ("int16", 100), ("int16", 4096)]
    for r in rows:
        assert r["ok"] and len(r["samples"]) == 2
        assert r["GBps"] == pytest.approx(r["n"] * np.dtype(r["dtype"]).itemsize
                                          / r["seconds"] / 1e9)


def test_builtin_op_against_numpy(capsys):
    assert main(["bench", "add", "--backend", "cpu", "--sizes", "1000", "--reps", "1",
                 "--rounds", "1", "--quiet"]) == 0
    printed = capsys.readouterr()
    assert printed.err == ""
    assert "numpy add.reduce" in printed.out


@pytest.mark.sim
def test_variants_in_the_simulator(tmp_path):
    # an ordered, non-commutative op: every variant must agree with the CPU backend
    out = tmp_path / "r.json"
    rc = main(["bench", "tests.test_bench_command:_last_nonzero", "--backend", "sim",
               "--variants", "auto", "naive", "last_block", "--dtypes", "int32",
               "--sizes", "200", "--reps", "1", "--rounds", "1", "--quiet",
               "--json", str(out)])
    assert rc == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["contender"] for r in rows] == ["pyreduce auto", "pyreduce naive",
                                              "pyreduce last_block"]
    assert all(r["ok"] for r in rows)


@pytest.mark.parametrize("args, why", [
    (["lambda a: a"], "must take exactly two arguments"),
    (["add", "--dtypes", "float33"], "float33"),
    (["add", "--sizes", "0"], "positive count"),
    pytest.param(["add", "--backend", "sim", "--variants", "bogus"], "unknown variant",
                 marks=pytest.mark.sim),
])
def test_usage_errors(args, why, capsys):
    assert main(["bench", *args]) == 2
    assert why in capsys.readouterr().err


def test_png_without_matplotlib_says_so(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["bench", "add", "--backend", "cpu", "--png", str(tmp_path / "c.png")]) == 2
    assert "--png needs matplotlib (pip install matplotlib)" in capsys.readouterr().err
    assert not (tmp_path / "c.png").exists()


def test_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "c.png"
    assert main(["bench", "add", "--backend", "cpu", "--sizes", "100", "1000", "--reps",
                 "1", "--rounds", "1", "--quiet", "--png", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_progress_bar_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    bar = Progress(4, stream)
    for k in range(4):
        bar.step(f"case {k}")
    text = stream.getvalue()
    assert text.count("\r") == 4 and text.endswith("\n")
    assert "[" + "#" * 30 + "] 4/4 case 3" in text
