"""The playout buffer: back-pressure, clear on barge-in, and what the caller heard."""

import threading
import time

import numpy as np

from gateway.media.playout import PlayoutBuffer


def test_write_blocks_when_full_and_resumes_as_the_track_reads():
    buffer = PlayoutBuffer(lambda g: True, capacity_ms=100)
    done = threading.Event()

    def writer():
        buffer.write(1, np.ones(48000, np.int16))  # 1 s into a 100 ms buffer
        done.set()

    threading.Thread(target=writer, daemon=True).start()
    time.sleep(0.2)
    assert not done.is_set()
    assert buffer.buffered_ms <= 100
    read = 0
    deadline = time.monotonic() + 5
    while not done.is_set() and time.monotonic() < deadline:
        frame, _ = buffer.read_frame(960)
        read += frame is not None
        time.sleep(0.002)
    assert done.is_set()
    assert read >= 30  # the writer only finished once most of the second had been read


def test_cancel_wakes_a_blocked_writer():
    live = {"gen": 1}
    buffer = PlayoutBuffer(lambda g: g == live["gen"], capacity_ms=100)
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
