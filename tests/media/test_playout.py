"""The playout buffer: back-pressure, clear on barge-in, and what the caller heard."""

import threading
import time

import numpy as np

from gateway.media.playout import PlayoutBuffer


def test_a_sentence_is_queued_at_once_and_the_next_waits_for_room():
    """The TTS thread must be free to synthesize sentence 2 while sentence 1 plays (else the reply
    has a gap of one synthesis between sentences), yet never run far ahead of the track."""
    buffer = PlayoutBuffer(lambda g: True, capacity_ms=100)
    # 1 s into an empty 100 ms buffer is queued at once: nothing reads it, so a write that waited
    # for room would never return (no timing needed).
    assert buffer.write(1, np.ones(48000, np.int16))
    done = threading.Event()

    def writer():
        buffer.write(1, np.ones(48000, np.int16))
        done.set()

    threading.Thread(target=writer, daemon=True).start()
    time.sleep(0.2)
    assert not done.is_set()  # sentence 1 is not played yet: no room
    read = 0
    deadline = time.monotonic() + 5
    while not done.is_set() and time.monotonic() < deadline:
        frame, _ = buffer.read_frame(960)
        read += frame is not None
        time.sleep(0.002)
    assert done.is_set()
    assert read >= 45  # queued once at most 100 ms of sentence 1 was left (50 frames in all)
    assert buffer.buffered_ms <= 1100


def test_cancel_wakes_a_blocked_writer():
    live = {"gen": 1}
    buffer = PlayoutBuffer(lambda g: g == live["gen"], capacity_ms=100)
    assert buffer.write(1, np.ones(48000, np.int16))  # the buffer is now full
    result = {}

    def writer():
        result["ok"] = buffer.write(1, np.ones(48000, np.int16))

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    time.sleep(0.1)
    live["gen"] = 2
    buffer.clear()
    thread.join(2)
    assert result == {"ok": False}


def test_clear_reports_what_was_heard():
    buffer = PlayoutBuffer(lambda g: True, capacity_ms=5000)
    buffer.write(3, np.ones(48000, np.int16), "one two three four five six seven eight nine ten")
    for _ in range(25):  # 500 ms of 1 s
        buffer.read_frame(960)
    generation, played_ms, heard = buffer.clear()
    assert generation == 3 and played_ms == 500
    assert heard == "one two three four five"
    assert buffer.read_frame(960)[0] is None
    assert buffer.clear() is None
