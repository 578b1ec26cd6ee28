"""``pyreduce.Tuning`` and ``tuning=``: the value checked as it is made, the
kernels it chooses, ``variant=`` beside it, every public call passing it on,
and the deprecated tuning keywords (``block_size=``, ...) mapped onto it with a
DeprecationWarning."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

import pyreduce
from pyreduce import Tuning
from oracles import P, affine, affine_data

pytestmark = pytest.mark.sim  # the kernels a tuning chooses run in the simulator

FIELDS = ("variant", "block_size", "items_per_thread", "warp_size", "max_blocks",
          "vector_loads")


# --------------------------------------------------------------------------
# The value


def test_fields_and_defaults():
    t = Tuning()
    assert tuple(f.name for f in dataclasses.fields(Tuning)) == FIELDS
    assert (t.variant, t.block_size, t.items_per_thread, t.warp_size, t.max_blocks,
            t.vector_loads) == ("auto", None, None, None, None, None)
    assert repr(t) == "Tuning()"


@pytest.mark.parametrize("field,value,exc,message", [
    ("variant", "fastest", ValueError, "unknown variant 'fastest'; known: auto, naive"),
    ("variant", None, TypeError, "variant= must be a variant's name"),
    ("variant", 3, TypeError, "variant= must be a variant's name"),
    ("block_size", 96, ValueError, r"block size \(block_size=96\) must be one of"),
    ("block_size", 0, ValueError, r"block_size=0\) must be one of"),
    ("block_size", 128.0, TypeError, r"block size \(block_size=\) must be an int"),
    ("block_size", True, TypeError, r"block_size=\) must be an int or None, got True"),
    ("items_per_thread", 3, ValueError, r"items per thread \(items_per_thread=3\)"),
    ("items_per_thread", "4", TypeError, r"items_per_thread=\) must be an int"),
    ("warp_size", 16, ValueError, r"warp size \(warp_size=16\) must be one of \(32, 64\)"),
    ("warp_size", np.float32(32), TypeError, r"warp_size=\) must be an int"),
    ("max_blocks", 0, ValueError, r"max_blocks=0\) must be at least 1"),
    ("max_blocks", -3, ValueError, r"max_blocks=-3\) must be at least 1"),
    ("max_blocks", 2.5, TypeError, r"max_blocks=\) must be an int"),
    ("vector_loads", 1, TypeError, "vector_loads= must be True, False or None, got 1"),
    ("vector_loads", "no", TypeError, "vector_loads= must be True, False or None"),
])
def test_each_field_is_checked(field, value, exc, message):
    with pytest.raises(exc, match=message):
        Tuning(**{field: value})
    with pytest.raises(exc, match=message):  # a changed copy is checked as well
        Tuning().replace(**{field: value})


def test_fields_are_keywords_and_unknown_ones_are_named():
    with pytest.raises(TypeError, match="positional"):
        Tuning("naive")
    with pytest.raises(TypeError, match="'blocksize'"):
        Tuning(blocksize=64)
    with pytest.raises(TypeError, match="'threads'"):
        Tuning().replace(threads=64)


def test_frozen_hashable_and_normalised():
    t = Tuning(block_size=np.int64(64), items_per_thread=np.uint8(2), vector_loads=np.False_)
    assert type(t.block_size) is int and type(t.items_per_thread) is int
    assert t.vector_loads is False
    assert t == Tuning(block_size=64, items_per_thread=2, vector_loads=False)
    assert len({t, Tuning(block_size=64, items_per_thread=2, vector_loads=False)}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.block_size = 128


def test_repr_shows_what_is_set_and_round_trips():
    t = Tuning(variant="warp_shuffle", block_size=128, max_blocks=7, vector_loads=False)
    assert repr(t) == ("Tuning(variant='warp_shuffle', block_size=128, max_blocks=7, "
                       "vector_loads=False)")
    assert eval(repr(t), {"Tuning": Tuning}) == t


def test_replace_keeps_the_rest():
    t = Tuning(block_size=64, items_per_thread=2)
    u = t.replace(variant="naive", items_per_thread=4)
    assert u == Tuning(variant="naive", block_size=64, items_per_thread=4)
    assert t == Tuning(block_size=64, items_per_thread=2)  # unchanged


# --------------------------------------------------------------------------
# What it chooses


def test_tuning_sets_block_items_grid_and_warp():
    x = affine_data(1000, seed=2)
    want = functools.reduce(affine, x.tolist())
    tuned = pyreduce.explain(x, affine, backend="sim", tuning=Tuning(
        variant="warp_shuffle", block_size=64, items_per_thread=2, warp_size=64,
        max_blocks=3))
    auto = pyreduce.explain(x, affine, backend="sim")
    spec = tuned.plan.spec
    assert (spec.variant, spec.block, spec.items, spec.warp) == ("warp_shuffle", 64, 2, 64)
    assert tuned.plan.grid == 3 and tuned.plan.chunk == 3 * 128  # 1000 / 128: 8 tiles, 3 blocks
    assert (auto.plan.spec.block, auto.plan.spec.items) != (64, 2)
    assert int(tuned.result) == int(auto.result) == want


def test_vector_loads_false_gives_element_loads():
    x = np.arange(4096, dtype=np.float32)
    t = Tuning(block_size=32, items_per_thread=4, max_blocks=2)
    assert pyreduce.explain(x, "add", backend="sim", tuning=t).plan.spec.vector == 4
    plain = pyreduce.explain(x, "add", backend="sim", tuning=t.replace(vector_loads=False))
    assert plain.plan.spec.vector == 1 and plain.result == x.sum()


def test_the_old_keywords_give_the_same_plan_and_result():
    rng = np.random.default_rng(3)
    x = (rng.integers(1, P, 777) * P + rng.integers(0, P, 777)).astype(np.int64)
    fields = dict(block_size=32, items_per_thread=4, warp_size=32, max_blocks=2)
    new = pyreduce.explain(x, affine, backend="sim", variant="last_block",
                           tuning=Tuning(**fields))
    with pytest.warns(DeprecationWarning):
        old = pyreduce.explain(x, affine, backend="sim", variant="last_block", **fields)
    assert new.plan == old.plan
    spec = new.plan.spec
    assert (spec.variant, spec.block, spec.warp, spec.items) == ("last_block", 32, 32, 4)
    assert new.plan.grid == 2
    assert int(new.result) == int(old.result) == functools.reduce(affine, x.tolist())
    with pytest.warns(DeprecationWarning):
        legacy = pyreduce.reduce(x, affine, backend="sim", variant="last_block", **fields)
    assert legacy == pyreduce.reduce(x, affine, backend="sim",
                                     tuning=Tuning(variant="last_block", **fields))


def test_a_tuned_call_has_a_call_shape_of_its_own(prepares):
    from numba import cuda

    x = affine_data(600, seed=4)
    d = cuda.to_device(x)
    want = functools.reduce(affine, x.tolist())
    for _ in range(2):
        assert int(pyreduce.reduce(d, affine, backend="sim")) == want
    assert prepares[0] == 1  # the second call was a repeat
    t = Tuning(variant="naive", block_size=32, items_per_thread=1, max_blocks=2)
    for _ in range(2):
        assert int(pyreduce.reduce(d, affine, backend="sim", tuning=t)) == want
    assert prepares[0] == 2  # the tuned call plans its own kernels, once
    assert int(pyreduce.reduce(d, affine, backend="sim")) == want
    assert prepares[0] == 2  # and the plain call's repeat is still there
    t2 = Tuning(variant="naive", block_size=64, items_per_thread=1, max_blocks=2)
    assert int(pyreduce.reduce(d, affine, backend="sim", tuning=t2)) == want
    assert prepares[0] == 3  # another tuning: another call shape


# --------------------------------------------------------------------------
# variant= beside tuning=


def test_variant_is_the_short_way():
    x = np.arange(500.0)
    by_variant = pyreduce.explain(x, "add", backend="sim", variant="naive",
                                  tuning=Tuning(block_size=64))
    by_tuning = pyreduce.explain(x, "add", backend="sim",
                                 tuning=Tuning(variant="naive", block_size=64))
    assert by_variant.plan == by_tuning.plan and by_variant.plan.spec.variant == "naive"
    # the same variant twice, or "auto" beside a tuning's variant, is no conflict
    same = pyreduce.explain(x, "add", backend="sim", variant="naive",
                            tuning=Tuning(variant="naive", block_size=64))
    assert same.plan == by_tuning.plan
    assert pyreduce.explain(x, "add", backend="sim", variant="auto",
                            tuning=Tuning(variant="naive")).plan.spec.variant == "naive"


@pytest.mark.parametrize("call", [
    lambda **k: pyreduce.reduce(np.ones(8), "add", **k),
    lambda **k: pyreduce.sum(np.ones(8), **k),
    lambda **k: pyreduce.argmax(np.ones(8), **k),
    lambda **k: pyreduce.nanmean(np.ones(8), **k),
    lambda **k: pyreduce.explain(np.ones(8), "add", **k),
], ids=["reduce", "sum", "argmax", "nanmean", "explain"])
def test_two_variants_are_a_value_error(call):
    with pytest.raises(ValueError, match="variant='naive' and tuning=Tuning"
                                         r"\(variant='last_block'\) name two variants"):
        call(variant="naive", tuning=Tuning(variant="last_block"), backend="cpu")


def test_tuning_must_be_a_tuning():
    for bad in ({"block_size": 64}, 64, "auto"):
        with pytest.raises(TypeError, match=r"reduce\(\): tuning= must be a pyreduce.Tuning"):
            pyreduce.reduce(np.ones(4), "add", tuning=bad)
    with pytest.raises(TypeError, match=r"mean\(\): tuning= must be a pyreduce.Tuning"):
        pyreduce.mean(np.ones(4), tuning={"block_size": 64})


def test_deterministic_takes_a_tuning_without_another_variant():
    x = np.random.default_rng(5).standard_normal(3000).astype(np.float32)
    t = Tuning(block_size=64, items_per_thread=8, max_blocks=3)
    e = pyreduce.explain(x, "add", deterministic=True, backend="sim", tuning=t)
    assert e.plan.spec.variant == "pairwise" and e.plan.spec.block == 64
    assert e.result.tobytes() == pyreduce.reference(x, "add").tobytes()
    with pytest.raises(ValueError, match="deterministic=True .* variant='naive'"):
        pyreduce.sum(x, deterministic=True, backend="sim", tuning=t.replace(variant="naive"))


# --------------------------------------------------------------------------
# Every kind of public call passes it on


SIM = Tuning(block_size=32, items_per_thread=2, max_blocks=2)


def test_named_reductions_take_tuning():
    rng = np.random.default_rng(6)
    x = rng.standard_normal(700)
    x[[5, 300]] = np.nan
    m = rng.integers(-50, 50, (6, 70))
    assert pyreduce.sum(m, tuning=SIM, backend="sim") == m.sum()
    assert np.array_equal(pyreduce.max(m, axis=1, tuning=SIM, backend="sim"), m.max(axis=1))
    assert np.array_equal(pyreduce.prod(m[:, :5] % 3, axis=0, tuning=SIM, backend="sim"),
                          np.prod(m[:, :5] % 3, axis=0))
    assert pyreduce.nanmax(x, tuning=SIM, variant="warp_shuffle", backend="sim") == np.nanmax(x)
    assert pyreduce.argmax(m, tuning=SIM, backend="sim") == np.argmax(m)
    assert tuple(pyreduce.minmax(m, tuning=SIM, backend="sim")) == (m.min(), m.max())
    assert pyreduce.mean(m, tuning=SIM, backend="sim") == pytest.approx(m.mean())
    assert pyreduce.var(m, ddof=1, tuning=SIM, backend="sim") == pytest.approx(m.var(ddof=1))
    assert pyreduce.nansum(x, tuning=SIM, backend="sim") == pytest.approx(np.nansum(x))
    assert pyreduce.nanmean(x, tuning=SIM, backend="sim") == pytest.approx(np.nanmean(x))
    assert pyreduce.nanargmin(x, tuning=SIM, backend="sim") == np.nanargmin(x)
    assert pyreduce.count_nonzero(m, tuning=SIM, backend="sim") == np.count_nonzero(m)
    assert np.array_equal(pyreduce.count_nonzero(m, axis=0, tuning=SIM, backend="sim"),
                          np.count_nonzero(m, axis=0))


def test_segmented_reduce_and_scans_take_tuning():
    x = affine_data(300, seed=7)
    offsets = np.array([0, 7, 7, 150, 300])
    got = pyreduce.segmented_reduce(x, offsets, affine, identity=P, backend="sim", tuning=SIM)
    want = [functools.reduce(affine, x[a:b].tolist(), P) for a, b in zip(offsets, offsets[1:])]
    assert got.tolist() == want
    with pytest.raises(ValueError, match="variant='naive' selects a kernel of the 1-D"):
        pyreduce.segmented_reduce(x, offsets, "add", backend="sim",
                                  tuning=SIM.replace(variant="naive"))
    scan_tuning = Tuning(block_size=32, items_per_thread=2)
    want = np.array(list(__import__("itertools").accumulate(x.tolist(), affine)))
    assert np.array_equal(pyreduce.scan(x, affine, backend="sim", tuning=scan_tuning), want)
    assert np.array_equal(pyreduce.cumsum(x % 100, backend="sim", tuning=scan_tuning),
                          np.cumsum(x % 100))
    with pytest.raises(ValueError, match="sets max_blocks"):
        pyreduce.cumsum(x, backend="sim", tuning=SIM)


def test_dask_arrays_take_tuning():
    da = pytest.importorskip("dask.array")
    x = affine_data(500, seed=8)
    d = da.from_array(x, chunks=150)
    got = pyreduce.reduce(d, affine, backend="sim", tuning=SIM).compute(scheduler="sync")
    assert int(got) == functools.reduce(affine, x.tolist())
    assert pyreduce.argmax(d, backend="sim", tuning=SIM).compute(scheduler="sync") == \
        np.argmax(x)
    with pytest.warns(DeprecationWarning, match=r"sum\(block_size=32\) is deprecated"):
        lazy = pyreduce.sum(d % 1000, backend="sim", block_size=32)
    assert lazy.compute(scheduler="sync") == (x % 1000).sum()


# --------------------------------------------------------------------------
# The deprecated keywords


def test_each_deprecated_keyword_warns_and_still_tunes():
    x = np.arange(2000, dtype=np.float32)
    for field, value in [("block_size", 32), ("items_per_thread", 2), ("warp_size", 64),
                         ("max_blocks", 1), ("vector_loads", False)]:
        with pytest.warns(DeprecationWarning) as record:
            e = pyreduce.explain(x, "add", backend="sim", **{field: value})
        message = str(record[0].message)
        assert message == (f"explain({field}={value!r}) is deprecated: pass "
                           f"tuning=pyreduce.Tuning({field}={value!r}) (the tuning keywords "
                           "are removed in the next release)")
        assert record[0].filename == __file__  # it points at the caller
        want = pyreduce.explain(x, "add", backend="sim", tuning=Tuning(**{field: value}))
        assert e.plan == want.plan and e.result == want.result == x.sum()


#: a call of each kind, with keywords ``k``
CALLS = {
    "reduce": lambda **k: pyreduce.reduce(np.arange(300), "add", **k),
    "sum": lambda **k: pyreduce.sum(np.arange(300), **k),
    "any": lambda **k: pyreduce.any(np.arange(300), **k),
    "argmin": lambda **k: pyreduce.argmin(np.arange(300), **k),
    "nansum": lambda **k: pyreduce.nansum(np.arange(300.0), **k),
    "ptp": lambda **k: pyreduce.ptp(np.arange(300), **k),
    "segmented_reduce":
        lambda **k: pyreduce.segmented_reduce(np.arange(300), np.array([0, 300]), "add", **k),
    "scan": lambda **k: pyreduce.scan(np.arange(300), "add", **k),
    "cumsum": lambda **k: pyreduce.cumsum(np.arange(300), **k),
}


@pytest.mark.parametrize("name", CALLS)
def test_every_public_call_takes_the_deprecated_keywords(name):
    call = CALLS[name]
    with pytest.warns(DeprecationWarning,
                      match=rf"^{name}\(block_size=32, items_per_thread=2\) is deprecated: "
                            r"pass tuning=pyreduce.Tuning\(block_size=32, items_per_thread=2\)"):
        old = call(backend="sim", block_size=32, items_per_thread=2)
    new = call(backend="sim", tuning=Tuning(block_size=32, items_per_thread=2))
    assert np.array_equal(old, new)


def test_deprecated_keywords_and_tuning_together_are_refused():
    with pytest.raises(TypeError, match=r"reduce\(\) got tuning= and block_size=64: give the "
                                        r"whole tuning in tuning="):
        pyreduce.reduce(np.ones(4), "add", block_size=64, tuning=Tuning(max_blocks=2))
    with pytest.raises(TypeError, match="unexpected keyword argument 'block'"):
        pyreduce.reduce(np.ones(4), "add", block=64)
    with pytest.raises(TypeError, match=r"scan\(\) got an unexpected keyword argument "
                                        "'max_blocks'"):
        pyreduce.scan(np.ones(4), "add", max_blocks=2)  # never a scan's keyword
