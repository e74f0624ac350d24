"""The pacer of event transports: reply audio read ahead of the caller's playback by a bounded
lead, playback events at the times the caller hears them, and barge-in keeping what was heard."""

from __future__ import annotations

import numpy as np

from gateway.media.audio_pacer import FRAME_SAMPLES, PlayoutPacer
from gateway.media.playout import SAMPLE_RATE, PlayoutBuffer, PlayoutEvents


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def setup(lead_ms: int = 400, current: int = 1):
    clock = Clock()
    live = {"gen": current}
    buffer = PlayoutBuffer(lambda g: g == live["gen"], capacity_ms=10_000)
    sent: list[tuple[int, int, float]] = []  # (generation, samples, at)
    events: list[tuple[str, int, float]] = []

    def on_events(e: PlayoutEvents) -> None:
        if e.started is not None:
            events.append(("started", e.started, clock.now))
        if e.stopped is not None:
            events.append(("stopped", e.stopped[0], clock.now))

    pacer = PlayoutPacer(
        buffer, lambda g, s: sent.append((g, s.size, clock.now)), on_events, lead_ms=lead_ms, clock=clock
    )
    return clock, live, buffer, pacer, sent, events


def run(clock: Clock, pacer: PlayoutPacer, seconds: float, step: float = 0.02) -> None:
    for _ in range(round(seconds / step)):
        clock.now += step
        pacer.pump()


def test_audio_goes_out_ahead_of_playback_but_never_more_than_the_lead():
    clock, _, buffer, pacer, sent, events = setup(lead_ms=400)
    buffer.write(1, np.ones(SAMPLE_RATE * 2, np.int16), "one two three four")  # 2 s of reply
    buffer.end(1)
    pacer.pump()
    assert sum(n for _, n, _ in sent) == SAMPLE_RATE * 400 // 1000  # the first 400 ms at once
    assert events == [("started", 1, 100.0)]
    for _ in range(100):
        clock.now += 0.02
        pacer.pump()
        elapsed = clock.now - 100.0
        sent_s = sum(n for _, n, _ in sent) / SAMPLE_RATE
        assert sent_s - min(elapsed, 2.0) <= 0.4 + 1e-9  # never more than the lead ahead
        if elapsed < 1.5:
            assert sent_s - elapsed >= 0.28  # and topped up in ~100 ms pieces (lead - batch)
    assert sum(n for _, n, _ in sent) == SAMPLE_RATE * 2
    # "stopped" when the caller has heard the end (2 s after the start), not when it was read.
    assert events[-1][:2] == ("stopped", 1) and abs(events[-1][2] - 102.0) <= 0.021
    assert all(n % 960 == 0 for _, n, _ in sent)


def test_barge_in_counts_only_what_the_caller_heard():
    clock, live, buffer, pacer, sent, _ = setup(lead_ms=400)
    words = " ".join(f"w{i}" for i in range(20))  # 20 words over 2 s: 10 a second
    buffer.write(1, np.ones(SAMPLE_RATE * 2, np.int16), words)
    buffer.end(1)
    pacer.pump()
    run(clock, pacer, 0.6)  # the caller heard 0.6 s; about 1 s has been sent
    assert sum(n for _, n, _ in sent) / SAMPLE_RATE >= 0.9
    generation, played_ms, heard = buffer.clear()
    live["gen"] = 2
    assert generation == 1
    assert abs(played_ms - 600) <= 20
    assert 5 <= len(heard.split()) <= 6  # the words of the first 0.6 s (of 1 s read), not all of them
    # The caller drops what it had not played: the next reply starts at once, with a full lead.
    buffer.write(2, np.ones(SAMPLE_RATE, np.int16), "next")
    before = len(sent)
    pacer.pump()
    assert sum(n for g, n, _ in sent[before:] if g == 2) == SAMPLE_RATE * 400 // 1000


def test_after_sent_waits_until_all_audio_of_the_response_is_sent():
    clock, live, buffer, pacer, _, _ = setup(lead_ms=400)
    calls: list[float] = []
    pacer.after_sent(1, lambda: calls.append(clock.now))
    assert calls == [100.0]  # nothing queued: at once
    buffer.write(1, np.ones(SAMPLE_RATE, np.int16), "a b")
    buffer.end(1)
    pacer.after_sent(1, lambda: calls.append(clock.now))
    run(clock, pacer, 2.0)
    # All of 1 s sent once the caller is 400 ms from its end (give or take one 100 ms piece).
    assert len(calls) == 2 and 100.5 <= calls[1] <= 100.7
    # A cancelled response releases its waiter too (its audio will never be sent).
    buffer.write(1, np.ones(SAMPLE_RATE, np.int16), "c")
    pacer.after_sent(1, lambda: calls.append(clock.now))
    live["gen"] = 2
    pacer.pump()
    assert len(calls) == 3


def test_stop_leaves_the_buffer_to_the_next_reader():
    _, _, buffer, pacer, _, _ = setup()
    assert buffer.read_ahead is pacer
    pacer.stop()
    assert buffer.read_ahead is None
    buffer.write(1, np.ones(SAMPLE_RATE, np.int16), "x")
    buffer.read_frame(960 * 10)
    assert buffer.clear()[1] == 200  # a real-time reader: what was read was heard


def test_a_reply_not_a_whole_number_of_frames_is_sent_and_counted_in_whole_frames():
    """A reply of 2.5 frames goes out as 3 whole frames, its last one padded with silence, as the
    WebRTC track sends it: ``on_played`` gets whole frames only, so the unit's count of the frames
    sent (``PipelineUnit._sent_reply``: ``samples.size // FRAME_SAMPLES``) drops nothing."""
    clock = Clock()
    buffer = PlayoutBuffer(lambda g: g == 1, capacity_ms=10_000)
    sent: list[int] = []
    played: list[int] = []
    pacer = PlayoutPacer(
        buffer,
        lambda g, samples: sent.append(samples.size),
        lambda events: None,
        clock=clock,
        on_played=lambda samples, at: played.append(samples.size),
    )
    buffer.write(1, np.ones(FRAME_SAMPLES * 5 // 2, np.int16), "hi")
    buffer.end(1)
    run(clock, pacer, 0.5)
    assert sum(sent) == sum(played) == 3 * FRAME_SAMPLES
    assert all(n % FRAME_SAMPLES == 0 for n in played)
