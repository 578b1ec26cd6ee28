"""The autotuner (pyreduce/tuning.py): choices recorded on disk, used by later
plans, listed and reset. Kernels run in the simulator; the timer is replaced by
one that ranks the candidates as the test says, so the outcome is known."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pyreduce
from pyreduce import tuned, tuning

from oracles import affine, affine_data

pytestmark = pytest.mark.sim

# small enough for the simulator: (variant, block, items factor, waves)
CANDIDATES = (
    ("warp_shuffle", 32, 1, None),
    ("last_block", 64, 1, None),
    ("warp_shuffle_x2", 32, 2, 1),
)


def ranked(*seconds):
    """A timer that reports ``seconds`` for the built-in rule's choice, then the
    candidates, in order."""
    it = iter(seconds)
    return lambda fn, reps: next(it)


@pytest.fixture
def tuning_file(tmp_path, monkeypatch):
    where = tmp_path / "sub" / "tuning.json"
    monkeypatch.setenv("PYREDUCE_TUNING_FILE", str(where))
    tuning.reset()
    yield where
    tuning.reset()


def sim_array(host):
    from numba import cuda

    return cuda.to_device(host)


def test_the_fastest_candidate_is_recorded_and_used(tuning_file):
    x = sim_array(affine_data(3000, seed=1))
    before = pyreduce.explain(x, affine, backend="sim").plan.spec
    choice = tuning.tune(x, affine, backend="sim", candidates=CANDIDATES, reps=1,
                         timer=ranked(4e-3, 3e-3, 2e-3, 1e-3))
    # int64: 16 bytes are two items per thread, and this candidate loads twice that
    assert (choice.variant, choice.block_size, choice.items_per_thread) == \
        ("warp_shuffle_x2", 32, 4)
    assert choice.GBps == pytest.approx(3000 * 8 / 1e-3 / 1e9)
    saved = json.loads(tuning_file.read_text())["choices"]
    assert len(saved) == 1 and next(iter(saved.values()))["variant"] == "warp_shuffle_x2"
    # a later call of the same kind and size class plans with it, and is still right
    e = pyreduce.explain(x, affine, backend="sim")
    assert (e.plan.spec.variant, e.plan.spec.block) == ("warp_shuffle_x2", 32) != \
        (before.variant, before.block)
    assert int(e.result) == _expected(x)
    # another size class, or a tuning given by hand, does not use it
    small = sim_array(affine_data(100, seed=2))
    assert pyreduce.explain(small, affine, backend="sim").plan.spec.variant == before.variant
    hand = pyreduce.explain(x, affine, backend="sim",
                            tuning=pyreduce.Tuning(variant="warp_shuffle", block_size=32))
    assert hand.plan.spec.variant == "warp_shuffle"
    assert "warp_shuffle_x2 b32 i4" in tuning.show()


def test_the_rules_own_choice_is_a_candidate(tuning_file):
    """The built-in rule's configuration is timed first: when it wins, it is what
    is recorded, and later plans are the rule's."""
    x = sim_array(affine_data(3000, seed=4))
    before = pyreduce.explain(x, affine, backend="sim").plan
    choice = tuning.tune(x, affine, backend="sim", candidates=CANDIDATES, reps=1,
                         timer=ranked(1e-3, 2e-3, 3e-3, 4e-3))
    assert (choice.variant, choice.block_size, choice.items_per_thread) == (
        before.spec.variant, before.spec.block, before.spec.items)
    after = pyreduce.explain(x, affine, backend="sim")
    assert (after.plan.spec, after.plan.grid) == (before.spec, before.grid)
    assert int(after.result) == _expected(x)


def _expected(x):
    import functools

    return functools.reduce(affine, x.copy_to_host().tolist())


def test_choices_survive_a_new_process(tuning_file):
    x = sim_array(np.random.default_rng(0).standard_normal(700).astype(np.float32))
    tuning.tune(x, "add", backend="sim", candidates=CANDIDATES, reps=1,
                timer=ranked(4e-3, 5e-3, 6e-3, 1e-3))
    tuned._loaded = None  # what a new process starts with
    (key, choice), = tuning.choices().items()
    assert key.op == "add" and key.in_dtype == "float32" and key.size_class == 9
    assert choice.variant == "warp_shuffle_x2" and choice.max_blocks is not None
    assert pyreduce.explain(x, "add", backend="sim").plan.spec.variant == "warp_shuffle_x2"


def test_user_ops_share_one_kind_and_builtins_are_named(tuning_file):
    from pyreduce.ops import as_monoid

    assert tuning.op_kind(as_monoid(lambda a, b: b, np.dtype(np.int32)).key) == "user"
    assert tuning.op_kind(as_monoid(max, np.dtype(np.int32)).key) == "max"


def test_reset_forgets(tuning_file):
    x = sim_array(affine_data(600, seed=3))
    before = pyreduce.explain(x, affine, backend="sim").plan.spec.variant
    tuning.tune(x, affine, backend="sim", candidates=CANDIDATES[::2], reps=1,
                timer=ranked(3e-3, 2e-3, 1e-3))
    assert tuning_file.exists() and tuning.choices()
    assert pyreduce.explain(x, affine, backend="sim").plan.spec.variant == "warp_shuffle_x2"
    tuning.reset()
    assert not tuning_file.exists() and tuning.choices() == {}
    assert "no tuned choices" in tuning.show()
    assert pyreduce.explain(x, affine, backend="sim").plan.spec.variant == before


def test_a_damaged_file_is_ignored_with_a_warning(tuning_file):
    tuning_file.parent.mkdir(parents=True, exist_ok=True)
    tuning_file.write_text("{not json")
    tuned._loaded = None
    with pytest.warns(UserWarning, match="unreadable tuning file"):
        assert tuning.choices() == {}
    x = np.arange(50, dtype=np.int64)
    assert pyreduce.sum(x, backend="sim", tuning=pyreduce.Tuning(block_size=32)) == x.sum()


def test_tune_refuses_what_it_cannot_tune(tuning_file):
    with pytest.raises(ValueError, match="GPU backend"):
        tuning.tune(np.arange(10.0), "add", backend="cpu")
    with pytest.raises(ValueError, match="empty"):
        tuning.tune(sim_array(np.zeros(0)), "add", backend="sim")


def test_candidates_are_checked_against_the_default():
    assert tuning._agrees(np.float32(1.0), np.float32(1.0 + 1e-7), np.dtype(np.float32), 10)
    assert not tuning._agrees(np.float32(1.0), np.float32(1.1), np.dtype(np.float32), 10)
    assert tuning._agrees(np.float64(np.nan), np.float64(np.nan), np.dtype(np.float64), 1)
    assert not tuning._agrees(np.int64(3), np.int64(4), np.dtype(np.int64), 10)


def test_a_recorded_choice_that_reorders_serves_only_ops_that_may_be_reordered(tuning_file):
    """The store files a built-in with an element map (``nansum``'s, commutative)
    under the op kind of a user's operator: a reordering choice recorded for the
    one is taken for it, and the user's operator keeps an ordered plan (where it
    would raise: a reordering variant refuses it); an ordered choice serves both."""
    from pyreduce import planner, structured
    from pyreduce.occupancy import SMLimits
    from pyreduce.ops import as_monoid

    device = planner.DeviceInfo("H200", ("cuda", 0, (9, 0)), 132, 2048, 32, 32,
                                limits=SMLimits(), vector_bytes=16, l2_bytes=60 << 20,
                                auto_block=512)
    f4, n = np.dtype(np.float32), 2**20
    user = as_monoid(lambda a, b: a + b, f4)
    nansum = structured.nansum_monoid(f4)
    assert tuned.op_kind(user.key) == tuned.op_kind(nansum.key) == "user"
    assert nansum.commutative and not user.commutative

    def variant(monoid):
        planner.clear_plans()
        return planner.make_plan(n, f4, monoid.dtype, monoid.key, device, align=16,
                                 commutative=monoid.commutative).spec.variant

    ordered = variant(user)
    key = tuned.key_for(device, f4, f4, user.key, n)
    tuned.record(key, tuned.Choice("last_block_striped", 256, 16, 132, 1.0, "test"))
    assert variant(nansum) == "last_block_striped"
    assert variant(user) == ordered != "last_block_striped"
    tuned.record(key, tuned.Choice("warp_shuffle", 256, 8, 132, 1.0, "test"))
    assert variant(nansum) == variant(user) == "warp_shuffle"


def test_the_rules_own_choice_is_planned_for_the_view_the_call_reduces(tuning_file, monkeypatch):
    """Past the L2 the rule reads a built-in's input in striped vectors where
    they fit: the autotuner's first candidate is the plan the call itself makes,
    for an aligned view and for one that starts an element in (the ordered rule)."""
    import dataclasses

    from pyreduce.backends import numba_cuda

    device = numba_cuda.SimBackend.device
    def with_l2(self, warp=None):  # 16 KiB of float32 lie past it
        return dataclasses.replace(device(self, warp), l2_bytes=4096)

    monkeypatch.setattr(numba_cuda.SimBackend, "device", with_l2)
    whole = sim_array(np.random.default_rng(2).standard_normal(4097).astype(np.float32))
    seen = []
    for x in (whole[:4096], whole[1:]):
        tuning.reset()  # the rule's plan, not the choice recorded for the view before
        plan = pyreduce.explain(x, "add", backend="sim").plan
        choice = tuning.tune(x, "add", backend="sim", candidates=(), reps=1,
                             timer=ranked(1e-3))
        assert (choice.variant, choice.block_size, choice.items_per_thread) == (
            plan.spec.variant, plan.spec.block, plan.spec.items)
        seen.append(plan.spec.variant)
    assert seen[0] == "last_block_striped" != seen[1]
