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


def test_pause_holds_playback_where_it_is_and_resume_goes_on_from_there():
    buffer = PlayoutBuffer(lambda g: True, capacity_ms=1000)
    assert not buffer.pause()  # nothing playing: nothing to hold
    ramp = np.arange(4800, dtype=np.int16)  # 100 ms, every sample different
    buffer.write(1, ramp, "one two")
    first, _ = buffer.read_frame(960)
    assert first is not None and first[0] == 0
    assert buffer.pause() and buffer.paused
    for _ in range(10):
        frame, events = buffer.read_frame(960)
        assert frame is None and events.started is None and events.stopped is None  # silence
    buffer.resume()
    second, _ = buffer.read_frame(960)
    assert second is not None and second[0] == 960  # exactly where it paused


def test_clear_ends_a_pause():
    buffer = PlayoutBuffer(lambda g: True, capacity_ms=1000)
    buffer.write(1, np.ones(4800, np.int16), "one")
    buffer.read_frame(960)
    assert buffer.pause()
    cleared = buffer.clear()
    assert cleared is not None and cleared[1] == 20  # 20 ms heard before the pause
    assert not buffer.paused


def test_suspended_playback_takes_nothing_and_goes_on_from_where_it_stopped():
    """A SIP hold suspends playback: before, the reply was read on (paced out to nobody) and ended
    as if heard. Suspended, reads take nothing (no audio, no end, no miss), a barge-in pause and
    resume in between do not undo it, a writer waits past its timeout without giving up (a hold
    lasts minutes), and the resume goes on at the very sample where it stopped, to the reply's end
    with all of it played."""
    buffer = PlayoutBuffer(lambda g: True, capacity_ms=100)
    ramp = np.arange(9600, dtype=np.int16)  # 200 ms, every sample different
    buffer.write(1, ramp, "one two")
    first, events = buffer.read_frame(960)
    assert first is not None and first[0] == 0 and events.started == 1
    buffer.suspend(True)
    assert buffer.suspended and buffer.pause()
    buffer.resume()  # a barge-in's resume is not the caller's
    result = {}

    def writer():  # the next sentence: no room while nothing is read
        result["ok"] = buffer.write(1, np.ones(4800, np.int16), timeout=0.05)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    for _ in range(20):
        frame, events = buffer.read_frame(960)
        assert frame is None and events.started is None and events.stopped is None
        time.sleep(0.01)
    assert thread.is_alive() and buffer.underruns == 0
    assert buffer.buffered_ms == 180  # nothing of it taken
    buffer.suspend(False)
    second, _ = buffer.read_frame(960)
    assert second is not None and second[0] == 960  # exactly where it stopped
    for _ in range(3):  # down to 100 ms left: room for the next sentence
        buffer.read_frame(960)
    thread.join(2)
    assert result == {"ok": True}
    buffer.end(1)
    stopped = None
    for _ in range(20):
        _frame, events = buffer.read_frame(960)
        stopped = stopped or events.stopped
    assert stopped == (1, 300)  # all of it (200 ms, then the next 100), then its end


def test_a_reply_whose_audio_runs_dry_before_its_end_counts_one_deadline_miss_per_gap():
    """A reply that plays and has no audio for a frame, though it has not ended, is a missed
    deadline (the caller hears a gap); silence between replies, a paused reply (barge-in being
    decided) and a reply's end are not."""
    buffer = PlayoutBuffer(lambda g: True)
    assert buffer.read_frame(960)[0] is None and buffer.underruns == 0, "nothing plays yet"
    buffer.write(1, np.ones(960 * 2, np.int16))
    for _ in range(2):
        assert buffer.read_frame(960)[0] is not None
    for _ in range(3):  # the next sentence is late: three frames of the reply are silent
        assert buffer.read_frame(960)[0] is None
    assert buffer.underruns == 1 and buffer.underrun_samples == 3 * 960
    buffer.write(1, np.ones(960, np.int16))
    buffer.read_frame(960)
    buffer.read_frame(960)  # dry again: a second gap
    assert buffer.underruns == 2
    buffer.write(1, np.ones(960, np.int16))
    assert buffer.pause()
    buffer.read_frame(960)
    buffer.resume()
    buffer.end(1)
    buffer.read_frame(960)
    buffer.read_frame(960)
    buffer.read_frame(960)
    assert buffer.underruns == 2 and buffer.underrun_samples == 4 * 960, "a pause and the end are no gap"


def test_held_audio_waits_unplayed_until_released_and_a_drop_leaves_nothing():
    """A preemptive reply's audio is queued but not played (no frame, no started event) until its
    turn is confirmed; dropped, it is never heard and a blocked writer wakes."""
    buffer = PlayoutBuffer(lambda g: True, capacity_ms=100)
    buffer.hold(2)
    assert buffer.write(2, np.ones(4800, np.int16), "held words")
    frame, events = buffer.read_frame(960)
    assert frame is None and events.started is None
    buffer.release(2)
    frame, events = buffer.read_frame(960)
    assert frame is not None and events.started == 2

    live = {"gen": 3}
    buffer = PlayoutBuffer(lambda g: g == live["gen"], capacity_ms=100)
    buffer.hold(3)
    assert buffer.write(3, np.ones(48000, np.int16))
    wrote: list[bool] = []
    writer = threading.Thread(target=lambda: wrote.append(buffer.write(3, np.ones(480, np.int16))), daemon=True)
    writer.start()
    live["gen"] = 4  # discarded: its generation is cancelled, then its audio dropped
    buffer.drop(3)
    writer.join(5)
    assert wrote == [False], "a writer blocked on the dropped reply wakes, and queues nothing"
    assert buffer.buffered_ms == 0 and buffer.read_frame(960)[0] is None


def test_the_words_played_are_kept_with_when_their_audio_began_to_play():
    """What the caller's microphone may pick up as echo: the words whose audio began to play since a
    time, any response (barge-in tells the assistant's echoed words from the caller's by them)."""
    now = [100.0]
    buffer = PlayoutBuffer(lambda g: True, capacity_ms=5000, clock=lambda: now[0])
    buffer.write(1, np.ones(48000, np.int16), "once upon a time there lived a dragon named Ember")  # 1 s
    assert buffer.words_played_since(0.0) == []  # queued is not played
    for _ in range(25):  # 500 ms, 20 ms a frame
        buffer.read_frame(960)
        now[0] += 0.02
    assert buffer.words_played_since(0.0) == "once upon a time there".split()
    assert buffer.words_played_since(100.29) == "time there".split()  # pieces that began at ~100.3 and ~100.4
    assert buffer.pause()
    now[0] += 5.0
    buffer.read_frame(960)  # paused: nothing plays
    assert buffer.words_played_since(100.45) == []
    buffer.clear()
    buffer.write(2, np.ones(4800, np.int16), "Sure.")
    buffer.read_frame(4800)
    assert buffer.words_played_since(100.29) == ["time", "there", "Sure."]
    now[0] += 11.0  # older than the history kept
    buffer.write(2, np.ones(4800, np.int16), "Next.")
    buffer.read_frame(960)
    assert buffer.words_played_since(0.0) == ["Next."]
