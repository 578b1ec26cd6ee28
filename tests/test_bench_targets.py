"""bench/targets.py, the matrix of speed targets, end to end in its CPU mode
(pyreduce's cpu backend against NumPy, tiny arrays): every case of the matrix
named, each answer checked against NumPy's, the report and its chart."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import targets  # noqa: E402


def _script(*args, timeout=300):
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "targets.py"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_matrix_is_the_targets():
    """14 functions of float32, float64 and int32, float16 and bfloat16 for sum
    and mean, at three sizes; ``only`` picks by the case's text."""
    every = targets.cases()
    assert len(every) == 3 * (14 * 3 + 4)
    assert ("minmax", "int32", 2**28) in every and ("mean", "bfloat16", 2**24) in every
    assert ("var", "float16", 2**24) not in every
    picked = targets.cases([24], ["float64 2**24"])
    assert sorted(fn for fn, _, _ in picked) == sorted(targets.FUNCTIONS)
    some = targets.cases([24, 26], functions=["minmax", "sum"])  # in the matrix's order
    assert [(fn, dt) for fn, dt, n in some if n == 2**24] == [
        ("sum", "float32"), ("sum", "float64"), ("sum", "int32"), ("sum", "float16"),
        ("sum", "bfloat16"), ("minmax", "float32"), ("minmax", "float64"), ("minmax", "int32")]


def test_the_layouts_along_axes_are_the_targets():
    """Rows and columns of a square, a tall-skinny and a short-wide matrix, and
    the middle axis of three 3-D arrays, each of 2**28 elements; six functions
    of float32 in each by default."""
    layouts = targets.axis_layouts(28)
    assert layouts == [
        ((16384, 16384), -1), ((16384, 16384), 0), ((2**24, 16), -1), ((2**24, 16), 0),
        ((16, 2**24), -1), ((16, 2**24), 0),
        ((512, 1024, 512), 1), ((16, 2**20, 16), 1), ((4096, 16, 4096), 1)]
    assert all(int(np.prod(shape)) == 2**28 for shape, _ in layouts)
    assert len(targets.axis_layouts(12)) == 7  # the 3-D shapes of 2**12 coincide
    every = targets.axis_cases()
    assert len(every) == 9 * len(targets.AXIS_FUNCTIONS)
    assert ("var", "float32", (2**24, 16), 0) in every
    picked = targets.axis_cases(only=["16x16777216 axis=0"], functions=["argmax", "sum"])
    assert picked == [("sum", "float32", (16, 2**24), 0), ("argmax", "float32", (16, 2**24), 0)]
    row = {"function": "var", "dtype": "float32", "n": 2**28, "shape": [4096, 16, 4096],
           "axis": 1, "ok": True, "seconds": {"pyreduce": 2.0, "torch": 1.0}}
    assert targets._line(row).startswith("| var float32 4096x16x4096 axis=1 | 2000000 us |")


@pytest.mark.parametrize("fn", targets.AXIS_FUNCTIONS + ["prod", "nansum"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_each_result_along_an_axis_is_checked(fn, axis):
    """Along an axis every result is held to its own row's bound: one result a
    little off is caught, and means near 0 (a row's mean of normal values)
    pass as the rounding of their terms allows."""
    h = targets.host_data(fn, "float32", 4096).astype(np.float32).reshape(256, 16)
    want = targets.expected(fn, h, axis)
    assert targets.agrees(fn, want, want, h, axis)
    assert not targets.agrees(fn, targets.expected(fn, h), want, h, axis)  # the whole's
    assert not targets.agrees(fn, _off_one(want), want, h, axis), fn
    if fn == "mean":
        got = np.mean(h, axis=axis, dtype=np.float32)  # NumPy's float32 mean
        assert np.min(np.abs(want)) < 1e-3 and targets.agrees(fn, got, want, h, axis)


def _off_one(v):
    """``v`` with its last result a little off."""
    if isinstance(v, tuple):
        return (_off_one(v[0]),) + v[1:]
    v = np.array(v)
    v.flat[-1] = _off(v.flat[-1])
    return v


def test_a_ratio_short_of_the_target_never_reads_as_met():
    """Two decimals, except that a ratio under 1.00 is shown at most 0.99."""
    assert [targets.ratio_text(r) for r in (0.9951, 0.999, 0.994, 1.0, 1.004, 2.345)] == [
        "0.99", "0.99", "0.99", "1.00", "1.00", "2.35"]
    row = {"function": "sum", "dtype": "float64", "n": 2**26, "ok": True,
           "seconds": {"pyreduce": 189.6e-6, "cupy": 192e-6, "torch": 189e-6}}
    assert targets._line(row).endswith("| 0.99 | not met |")


def test_the_ratio_of_each_round_pairs_that_rounds_times():
    """By round: the fastest peer of each round over pyreduce's time in it, so a
    round in which everything ran slow (the GPU's clocks, the host) moves no
    ratio; the table shows the middle half of them, rows without rounds "-"."""
    row = {"function": "sum", "dtype": "float32", "n": 2**24, "ok": True,
           "seconds": {"pyreduce": 2.0, "cupy": 2.2, "torch": 2.1},
           "rounds": {"pyreduce": [1.0, 2.0, 4.0, 2.0, 2.0],
                      "cupy": [1.1, 2.3, 4.4, 2.2, 1.8],
                      "torch": [1.2, 2.1, 4.2, 2.4, 2.6]}}
    assert targets.round_ratios(row) == pytest.approx([1.1, 1.05, 1.05, 1.1, 0.9])
    assert targets.spread_text(row) == "1.05-1.10"
    assert targets._line(row, spread=True).endswith("| 1.05 | 1.05-1.10 | met |")
    close = dict(row, rounds={"pyreduce": [1.0] * 4, "cupy": [0.996] * 4})
    assert targets.spread_text(close) == "0.99-0.99"  # short of 1.00 in every round
    bare = {k: v for k, v in row.items() if k != "rounds"}
    assert targets.round_ratios(bare) is None and targets.spread_text(bare) == "-"
    assert targets._line(bare).endswith("| 1.05 | met |")
    text = targets.report_text({"meta": {"gpu": "G", "date": "d"}, "rows": [row, bare]})
    assert "| by round |" in text and "| 1.05 | - | met |" in text
    assert "| by round |" not in targets.report_text({"meta": {"gpu": "G"}, "rows": [bare]})


def test_the_summary_counts_each_size_and_layout():
    """One line a size (or layout along axes): the measured rows, how many met
    the target and came within 5% of it, the median and the lowest ratio."""
    def row(n, mine, peer, **layout):
        return {"function": "sum", "dtype": "float32", "n": n, "ok": True, **layout,
                "seconds": {"pyreduce": mine, "cupy": peer}}

    rows = [row(2**24, 1.0, 1.2), row(2**24, 1.0, 0.96), row(2**24, 1.0, 0.5),
            row(2**24, 1.0, None), row(2**26, 1.0, 0.999),
            row(2**28, 1.0, 2.0, shape=[16, 2**24], axis=0)]
    assert targets.summary(rows)[2:] == [
        "| 2**24 | 4 | 3 | 1 | 2 | 0.96 | 0.50 |", "| 2**26 | 1 | 1 | 0 | 1 | 0.99 | 0.99 |",
        "| 16x16777216 axis=0 | 1 | 1 | 1 | 1 | 2.00 | 2.00 |"]
    assert targets.summary([row(2**24, 1.0, None)])[2:] == ["| 2**24 | 1 | 0 | 0 | 0 | - | - |"]
    assert "\n".join(targets.summary(rows)) in targets.report_text(
        {"meta": {"gpu": "G", "date": "d"}, "rows": rows})


@pytest.mark.parametrize("fn", targets.FUNCTIONS)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_the_data_make_each_check_worth_making(fn, dtype):
    """The answers of the data are finite and the checks hold them, and an
    answer off by a little (a thousandth, or one for integers) is caught."""
    h = targets.host_data(fn, dtype, 4096).astype(dtype)
    want = targets.expected(fn, h)
    assert targets.agrees(fn, want, want, h)
    assert np.all(np.isfinite(np.asarray(want, dtype=np.float64)))
    assert not targets.agrees(fn, _off(want), want, h), (fn, want)
    if dtype == "float32" and fn in ("sum", "nansum", "mean", "var", "std"):
        wrong = targets.expected(fn, h[: h.size // 2])  # half the data
        assert not targets.agrees(fn, wrong, want, h), (fn, wrong, want)


@pytest.mark.parametrize("fn, dtype", [
    (fn, "float64") for fn in ("sum", "nansum", "mean", "var", "prod")] + [
    (fn, dt) for fn in ("sum", "mean") for dt in ("float16", "bfloat16")])
def test_each_precision_is_held_to_its_own_rounding(fn, dtype):
    """float64 to float64's rounding, half precision to float32's accumulation
    and its own result's: an answer a little off, of the wrong sign, 0, or of
    half the data, is caught; NumPy's own float32 or float64 answer passes."""
    h = targets.host_data(fn, dtype, 4096).astype(targets._numpy_dtype(dtype))
    want = targets.expected(fn, h)
    assert targets.agrees(fn, want, want, h)
    acc = np.float64 if dtype == "float64" else np.float32
    assert targets.agrees(fn, getattr(np, fn)(h.astype(acc)), want, h)
    # a little off: by a thousandth, or by four steps of a half-precision result
    little = float(want) * (1 + max(1e-3, 4 * targets._eps(h.dtype))) + 1e-3
    for wrong in (little, -float(want), 0.0, targets.expected(fn, h[: h.size // 2])):
        if fn == "prod" and wrong != little and abs(float(wrong) - float(want)) < 1e-3:
            continue  # a product of values near 1: half of them is near the whole
        assert not targets.agrees(fn, wrong, want, h), (fn, dtype, wrong, want)


def _off(v):
    if isinstance(v, tuple):
        return (_off(v[0]),) + v[1:]
    v = np.asarray(v)
    if v.dtype == np.bool_:
        return not v
    if v.dtype.kind in "iu":
        return v + 1
    return v * (1 + 1e-3) + 1e-3


def test_cpu_mode_end_to_end(tmp_path):
    out = tmp_path / "t.json"
    printed = _script("run", "--device", "cpu", "--log2", "12", "--rounds", "1",
                      "--only", "2**12", "--out", str(out))
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert len(rows) == 14 * 3 + 4 and all(r["ok"] for r in rows)
    assert all(set(r["seconds"]) == {"pyreduce", "numpy"} for r in rows)
    assert all(r["seconds"]["pyreduce"] > 0 and r["seconds"]["numpy"] > 0 for r in rows)
    assert "| minmax int32 2**12 |" in printed
    text = _script("report", str(out), "--stem", "targets-test", "--docs", str(tmp_path))
    assert f"Met: {sum(targets.ratio(r) >= 1 for r in rows)} of {len(rows)} measured" in text
    assert (tmp_path / "targets-test.md").read_text() == text
    png = (tmp_path / "targets-test.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_runs_of_parts_merge_into_the_matrix(tmp_path):
    """Two runs of different functions join into one JSON in the matrix's
    order, with the runs' description; a case in both is refused."""
    a, b, both = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "ab.json"
    common = ("--device", "cpu", "--log2", "10", "--rounds", "1")
    _script("run", *common, "--functions", "minmax", "mean", "--out", str(a))
    _script("run", *common, "--functions", "sum", "--only", "float", "--out", str(b))
    printed = _script("merge", str(a), str(b), "--runs", "two parts", "--out", str(both))
    data = json.loads(both.read_text())
    data_rows = data["rows"]
    assert "12 rows of 2 runs" in printed and data["meta"]["runs"] == "two parts"
    assert [(r["function"], r["dtype"]) for r in data["rows"]] == [
        ("sum", "float32"), ("sum", "float64"), ("sum", "float16"), ("sum", "bfloat16"),
        ("mean", "float32"), ("mean", "float64"), ("mean", "int32"), ("mean", "float16"),
        ("mean", "bfloat16"), ("minmax", "float32"), ("minmax", "float64"),
        ("minmax", "int32")]
    text = _script("report", str(both))
    assert "Runs: two parts." in text and "cpu backend and NumPy, values on the host" in text
    # --results host is a GPU mode; runs of another kind of results are not one matrix
    assert "--results host needs --device gpu" in _fails(
        "run", *common, "--functions", "prod", "--results", "host", "--out", str(tmp_path / "h"))
    host = tmp_path / "host.json"
    data = json.loads(b.read_text())
    data["meta"].update(results="host", gpu="a GPU")
    host.write_text(json.dumps(data))
    assert "every library's value on the host" in _script("report", str(host))
    assert "'results': 'host'" in _fails("merge", str(a), str(host), "--runs", "x",
                                         "--out", str(tmp_path / "d.json"))
    assert "mean float32 2**10 is in more than one" in _fails(
        "merge", str(a), str(both), "--runs", "x", "--out", str(tmp_path / "c.json"))
    # --replace: a re-measured case's later row stands, in the matrix's order
    again = json.loads(a.read_text())
    again["rows"] = [dict(r, seconds={k: 2 * v for k, v in r["seconds"].items()})
                     for r in again["rows"] if r["function"] == "mean"]
    (tmp_path / "again.json").write_text(json.dumps(again))
    _script("merge", str(both), str(tmp_path / "again.json"), "--runs", "re-measured",
            "--replace", "--out", str(tmp_path / "e.json"))
    replaced = json.loads((tmp_path / "e.json").read_text())["rows"]
    assert [(r["function"], r["dtype"]) for r in replaced] == [
        (r["function"], r["dtype"]) for r in data_rows]
    for old, new in zip(data_rows, replaced):
        factor = 2 if old["function"] == "mean" else 1
        assert new["seconds"] == {k: factor * v for k, v in old["seconds"].items()}


def test_calls_along_axes_need_their_sizes(tmp_path):
    """Layouts of fewer than 2**8 elements do not exist, and a choice of
    nothing is refused rather than run."""
    assert "--axes needs --log2 of 8 or more" in _fails(
        "run", "--axes", "--device", "cpu", "--log2", "7", "--out", str(tmp_path / "a.json"))
    assert "no case matches" in _fails("run", "--axes", "--device", "cpu", "--log2", "8",
                                       "--only", "float64", "--out", str(tmp_path / "b.json"))


def test_calls_along_axes_end_to_end(tmp_path):
    """``run --axes`` on the cpu: each layout's answers checked along its axis
    and timed; merged with a run of whole arrays, the whole arrays come first;
    the chart's columns are the layouts."""
    out, whole, both = tmp_path / "ax.json", tmp_path / "w.json", tmp_path / "both.json"
    printed = _script("run", "--axes", "--device", "cpu", "--log2", "12", "--rounds", "1",
                      "--functions", "sum", "argmax", "--out", str(out))
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 * 7 and all(r["ok"] and r["seconds"]["numpy"] > 0 for r in rows)
    assert {tuple(r["shape"]) for r in rows} == {
        (64, 64), (256, 16), (16, 256), (16, 16, 16)}
    assert "| argmax float32 16x256 axis=0 |" in printed
    _script("run", "--device", "cpu", "--log2", "12", "--rounds", "1", "--functions", "sum",
            "--only", "float32", "--out", str(whole))
    _script("merge", str(out), str(whole), "--runs", "both", "--out", str(both))
    merged = json.loads(both.read_text())["rows"]
    assert [targets.row_label(r) for r in merged[:3]] == [
        "sum float32 2**12", "sum float32 64x64 axis=-1", "argmax float32 64x64 axis=-1"]
    assert "sum float32 64x64 axis=-1 is in more than one" in _fails(
        "merge", str(out), str(both), "--runs", "x", "--out", str(tmp_path / "x.json"))
    text = _script("report", str(out), "--stem", "axes-test", "--docs", str(tmp_path))
    assert "| sum float32 16x16x16 axis=1 |" in text
    assert (tmp_path / "axes-test.png").read_bytes()[:4] == b"\x89PNG"


def _fails(*args) -> str:
    """The error of a bench/targets.py command that must fail."""
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "targets.py"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0, done.stdout[-2000:]
    return done.stderr


def test_host_results_bring_every_value_to_the_host(monkeypatch):
    """``--results host``: on a GPU each peer's call ends with ``.item()`` of
    its result (``host_value``) and pyreduce's asks for a host result
    (``device_result=False``); by default every call is the library's own,
    and the cpu mode has nothing to copy."""
    import pyreduce

    copied, asked = [], []
    monkeypatch.setattr(targets, "host_value", lambda v: copied.append(v) or ("host", v))
    monkeypatch.setattr(targets, "_inputs", lambda fn, dt, n, device, shape: (
        None, "mine", {"cupy": ("x", None), "torch": (None, "t")}))
    monkeypatch.setattr(pyreduce, "sum", lambda x, **kw: asked.append(kw) or ("pr", x))
    monkeypatch.setattr(targets, "peer_call",
                        lambda lib, fn, x, t=None, axis=None: lambda: (lib, x, t))
    _, calls = targets.library_calls("sum", "float32", 8, "gpu", "host")
    assert calls["pyreduce"]() == ("pr", "mine") and asked == [{"device_result": False}]
    assert not copied
    assert calls["cupy"]() == ("host", ("cupy", "x", None))
    assert calls["torch"]() == ("host", ("torch", None, "t")) and len(copied) == 2
    _, calls = targets.library_calls("sum", "float32", 8, "gpu")
    assert calls["cupy"]() == ("cupy", "x", None) and calls["pyreduce"]() == ("pr", "mine")
    assert asked[-1] == {} and len(copied) == 2
    _, calls = targets.library_calls("sum", "float32", 8, "cpu", "host")
    assert calls["cupy"]() == ("cupy", "x", None) and len(copied) == 2
    calls["pyreduce"]()
    assert asked[-1] == {"backend": "cpu"}


def test_a_host_value_is_each_results_item():
    """What ``host_value`` takes of a peer's 0-d results, a pair of them too."""
    assert targets.host_value(np.float32(1.5)) == 1.5
    pair = targets.host_value((np.asarray(-2, np.int32), np.asarray(7, np.int32)))
    assert pair == (-2, 7) and all(type(v) is int for v in pair)


def test_a_wrong_answer_is_reported_not_timed(monkeypatch):
    """A library whose answer disagrees with NumPy's is not timed, and the row
    says which."""
    monkeypatch.setattr(targets, "peer_call",
                        lambda lib, fn, x, t=None, axis=None: lambda: x.sum() + 1)
    row = targets.measure("sum", "float64", 4096, "cpu", rounds=1)
    assert not row["ok"] and row["disagree"] == ["numpy"] and row["seconds"]["numpy"] is None
    assert row["seconds"]["pyreduce"] > 0 and targets.ratio(row) is None


def test_every_layout_the_layouts_study_tries_is_a_plan():
    """bench/layouts.py (a GPU study) names its layouts as Tunings: each must be
    one the planner takes for its dtype and call, or the study would stop
    half-way on a GPU."""
    import dataclasses

    import layouts

    import pyreduce
    from pyreduce import structured
    from pyreduce.dtypes import BFLOAT16
    from pyreduce.ops import make_monoid, sum_dtype
    from pyreduce.planner import DeviceInfo, make_plan

    device = DeviceInfo("H100", ("cuda", 0, (9, 0)), 132, 2048, 32, 32)
    device = dataclasses.replace(device, vector_bytes=16, l2_bytes=50 * 2**20, auto_block=512)
    monoids = {"sum": lambda dt: _acc(make_monoid("add", dt, acc_dtype=sum_dtype(dt))),
               "mean": lambda dt: _acc(structured.moments_monoid(dt, "mean")),
               "var": lambda dt: _acc(structured.moments_monoid(dt, "var")),
               "argmax": lambda dt: _acc(structured.argmax_monoid(dt)),
               "minmax": lambda dt: _acc(structured.minmax_monoid(dt))}
    for dtype, calls in layouts.LAYOUTS.items():
        dt = BFLOAT16 if dtype == "bfloat16" else np.dtype(dtype)
        for name, tried in calls.items():
            acc, key = monoids[name](dt)
            for variant, items, block in tried:
                tuning = pyreduce.Tuning(variant=variant, items_per_thread=items,
                                         block_size=block)
                plan = make_plan(2**26, dt, acc, key, device, tuning, align=16)
                assert (plan.spec.variant, plan.spec.items, plan.spec.block) == (
                    variant, items, block)


def _acc(monoid):
    return monoid.dtype, monoid.key


def test_columns_study_reads_its_tunings():
    """bench/columns.py (a GPU study) takes its A/B columns as ``i4b256m528``:
    each letter a field of the Tuning, and anything else refused by name."""
    import columns

    import pyreduce

    assert columns.tuning_of("i4b256m528") == pyreduce.Tuning(
        items_per_thread=4, block_size=256, max_blocks=528)
    assert columns.tuning_of("i2") == pyreduce.Tuning(items_per_thread=2)
    with pytest.raises(SystemExit, match="i4x2"):
        columns.tuning_of("i4x2")
    assert columns.label(300, 4096, "float32", "var") == "var 300x4096 f4"
