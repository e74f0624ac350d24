"""CancelScope generations and the stage queue's flush."""

import numpy as np

from gateway.pipeline.cancel import CancelScope
from gateway.pipeline.messages import AudioIn, CallEnd, TextChunk
from gateway.pipeline.queues import StageQueue


def test_cancel_makes_every_earlier_generation_stale():
    scope = CancelScope()
    first = scope.begin()
    assert scope.is_current(first) and scope.live
    cancelled = scope.cancel()
    assert cancelled == first and not scope.is_current(first) and not scope.live
    second = scope.begin()
    assert second != first and scope.is_current(second)
    scope.finish(second)
    assert not scope.live and scope.is_current(second)  # finished but its audio may still play


def test_flush_keeps_control_markers_and_drops_data():
    queue = StageQueue()
    queue.put(AudioIn("a", samples=np.zeros(10, np.int16)))
    queue.put(CallEnd("a"))
    queue.put(TextChunk("a", text="late"))
    assert queue.flush() == 2
    assert isinstance(queue.get(0), CallEnd)
    assert queue.get(0) is None


def test_audio_beyond_the_bound_drops_the_oldest():
    queue = StageQueue(max_droppable=3)
    for i in range(5):
        queue.put(AudioIn("a", samples=np.full(1, i, np.int16)))
    queue.put(CallEnd("a"))
    got = [queue.get(0) for _ in range(4)]
    assert [int(m.samples[0]) for m in got[:3]] == [2, 3, 4]
    assert isinstance(got[3], CallEnd) and queue.dropped == 2
