"""The order of a device input's read after its producer's stream
(:func:`pyreduce.backends.fastpath.sync_producer`): which driver calls each case
makes, against a recording stand-in for ``cuda.bindings.driver``, so that the
rules run without a GPU (the GPU tests in test_gpu.py check them on one)."""

from __future__ import annotations

import types

import pytest

from pyreduce.backends import cudadriver, fastpath

NON_BLOCKING, CAPTURING = 0x100, 0x200  # stream handles of those kinds
STALE = 0x300  # a stream whose context's event was destroyed


class FakeDriver:
    """The driver calls order_after_default makes, recorded; streams are their ints."""

    CUstream = staticmethod(int)
    CUstreamCaptureStatus = types.SimpleNamespace(CU_STREAM_CAPTURE_STATUS_NONE=0)
    CUstream_flags = types.SimpleNamespace(CU_STREAM_NON_BLOCKING=1)
    CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)

    def __init__(self, ctx=7):
        self.calls, self.ctx, self.events, self.dead = [], ctx, 0, set()

    def cuStreamIsCapturing(self, s):
        return 0, 1 if s == CAPTURING else 0

    def cuStreamGetFlags(self, s):
        if s == CAPTURING:
            return 900, 0  # as the driver answers for a capturing stream
        self.calls.append(("flags", s))
        return 0, 1 if s in (NON_BLOCKING, STALE) else 0

    def cuCtxGetCurrent(self):
        return 0, self.ctx

    def cuEventCreate(self, flags):
        self.events += 1
        self.calls.append(("create", self.events))
        return 0, self.events

    def cuEventRecord(self, event, s):
        self.calls.append(("record", event, s))
        return (400,) if event in self.dead else (0,)

    def cuStreamWaitEvent(self, s, event, flags):
        self.calls.append(("wait", s, event))
        return (0,)


@pytest.fixture
def driver(monkeypatch):
    fake = FakeDriver()
    monkeypatch.setattr(cudadriver, "_CU", fake)
    monkeypatch.setattr(cudadriver, "_ORDER_EVENTS", {})
    return fake


def _fields(stream):
    return types.SimpleNamespace(stream=stream)


@pytest.mark.parametrize("producer, stream", [(None, NON_BLOCKING), (NON_BLOCKING, NON_BLOCKING),
                                              (1, 0), (2, 0), (1, 2), (2, 1)])
def test_a_read_ordered_already_makes_no_call(driver, producer, stream):
    """No producer stream, the same stream, or a default stream read on a
    default stream (which order each other): nothing to do."""
    fastpath.sync_producer(_fields(producer), stream)
    assert driver.calls == []


def test_the_legacy_stream_read_on_a_non_blocking_stream_is_waited_for(driver):
    fastpath.sync_producer(_fields(1), NON_BLOCKING)
    fastpath.sync_producer(_fields(1), NON_BLOCKING)  # the context's event reused
    wait = [("flags", NON_BLOCKING), ("record", 1, 1), ("wait", NON_BLOCKING, 1)]
    assert driver.calls == [("flags", NON_BLOCKING), ("create", 1), ("record", 1, 1),
                            ("wait", NON_BLOCKING, 1)] + wait


def test_a_blocking_stream_waits_for_the_per_thread_stream_only(driver):
    """The legacy stream orders a blocking stream; the per-thread one does not."""
    blocking = 0x400
    fastpath.sync_producer(_fields(1), blocking)
    assert driver.calls == [("flags", blocking)]
    driver.calls.clear()
    fastpath.sync_producer(_fields(2), blocking)
    assert driver.calls == [("create", 1), ("record", 1, 2), ("wait", blocking, 1)]


def test_a_capturing_stream_and_a_thread_without_a_context_are_left_alone(driver):
    fastpath.sync_producer(_fields(1), CAPTURING)
    assert driver.calls == []  # not even its flags, which the driver refuses
    driver.ctx = 0
    fastpath.sync_producer(_fields(1), NON_BLOCKING)
    assert driver.calls == [("flags", NON_BLOCKING)]


def test_an_event_of_a_destroyed_context_is_made_again(driver):
    fastpath.sync_producer(_fields(1), STALE)
    driver.dead.add(1)  # the context at this address was destroyed and made again
    driver.calls.clear()
    fastpath.sync_producer(_fields(1), STALE)
    assert driver.calls == [("flags", STALE), ("record", 1, 1), ("create", 2),
                            ("record", 2, 1), ("wait", STALE, 2)]


def test_another_producer_stream_is_synchronized(monkeypatch, driver):
    synced = []
    driver.cuStreamSynchronize = lambda s: synced.append(s) or (0,)
    fastpath.sync_producer(_fields(0x500), NON_BLOCKING)
    assert synced == [0x500] and driver.calls == []
