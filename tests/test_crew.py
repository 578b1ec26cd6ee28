"""The cpu backend's crew of threads (pyreduce.backends.crew): results in piece
order whoever runs a piece, errors raised in the caller, several callers and
nested calls at once, and nothing left waiting."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import numpy as np
import pytest

from pyreduce.backends.crew import Crew


def test_results_come_back_in_piece_order():
    crew = Crew(4)
    for n in (1, 2, 3, 4, 5, 17, 64):
        items = [(k, k * k) for k in range(n)]
        assert crew.map(lambda a, b: (a, b), items) == items


def test_pieces_run_on_several_threads():
    """Pieces that wait for each other finish only if two threads run them."""
    crew = Crew(2)
    both = threading.Barrier(2, timeout=30)

    def piece(k):
        both.wait()
        return k

    assert crew.map(piece, [(0,), (1,)]) == [0, 1]


def test_threads_limits_the_threads_a_map_uses():
    crew = Crew(4)
    seen = set()
    lock = threading.Lock()

    def piece(k):
        with lock:
            seen.add(threading.get_ident())
        time.sleep(0.001)
        return k

    assert crew.map(piece, [(k,) for k in range(20)], threads=1) == list(range(20))
    assert seen == {threading.get_ident()}


def test_an_error_in_a_piece_is_raised_in_the_caller():
    crew = Crew(3)

    def piece(k):
        if k == 5:
            raise ValueError("piece 5")
        return k

    with pytest.raises(ValueError, match="piece 5"):
        crew.map(piece, [(k,) for k in range(12)])
    # the crew still works afterwards
    assert crew.map(lambda k: k + 1, [(k,) for k in range(12)]) == list(range(1, 13))


def test_several_callers_at_once_get_their_own_results():
    crew = Crew(3)
    out = {}

    def caller(c):
        data = np.arange(1000) * (c + 1)
        pieces = [(data[k:k + 50],) for k in range(0, 1000, 50)]
        out[c] = [crew.map(lambda v: int(v.sum()), pieces) for _ in range(20)]

    threads = [threading.Thread(target=caller, args=(c,)) for c in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a caller hangs"
    for c in range(6):
        data = np.arange(1000) * (c + 1)
        want = [int(data[k:k + 50].sum()) for k in range(0, 1000, 50)]
        assert out[c] == [want] * 20


def test_a_piece_may_map_on_the_same_crew():
    crew = Crew(2)

    def outer(k):
        return sum(crew.map(lambda j: j * k, [(j,) for j in range(5)]))

    assert crew.map(outer, [(k,) for k in range(6)]) == [10 * k for k in range(6)]


def test_a_finished_job_keeps_no_reference_to_its_pieces():
    """Once map returns no thread holds the job: the user's array its pieces
    view can be freed (a helper waiting for the next job kept the last one)."""
    crew = Crew(4)
    x = np.ones(1 << 16)
    alive = weakref.ref(x)
    crew.map(lambda v: v.sum(), [(x[k:k + 4096],) for k in range(0, x.size, 4096)])
    del x
    gc.collect()
    assert alive() is None
    assert not crew._jobs


def test_a_map_never_runs_on_more_threads_than_it_asks_for():
    """Helpers awake for another caller's jobs do not join one that asked for
    fewer threads."""
    crew = Crew(4)
    stop = threading.Event()

    def other():
        while not stop.is_set():
            crew.map(lambda k: time.sleep(0.0005), [(k,) for k in range(8)])

    busy = threading.Thread(target=other)
    busy.start()
    try:
        def piece(k):
            time.sleep(0.002)
            return threading.get_ident()

        for _ in range(10):
            assert len(set(crew.map(piece, [(k,) for k in range(16)], threads=2))) <= 2
    finally:
        stop.set()
        busy.join(30)
    assert not busy.is_alive()
