"""The outbound track: 20 ms frames of 960 samples, pts +960 each, paced on the wall clock."""

import asyncio
import time

import numpy as np

from gateway.media.outbound import FRAME_SAMPLES, OutputAudioTrack
from gateway.media.playout import PlayoutBuffer
from gateway.media.thinking_cue import ThinkingCue, thinking_tone


async def test_frames_are_960_samples_paced_20ms_with_increasing_pts():
    buffer = PlayoutBuffer(lambda g: True)
    track = OutputAudioTrack(buffer)
    frames = []
    started = time.monotonic()
    for _ in range(26):
        frames.append(await track.recv())
    elapsed = time.monotonic() - started
    assert all(f.samples == FRAME_SAMPLES == 960 for f in frames)
    assert all(f.sample_rate == 48000 and f.layout.name == "mono" for f in frames)
    assert [f.pts for f in frames] == [i * 960 for i in range(26)]
    # Paced: frame k is not returned before k * 20 ms (never faster than real time, whatever the
    # load; one frame of slack for the event loop's timer resolution). The upper bound is ten times
    # the 0.5 s it takes: a load-independent check that the track does not stall.
    assert 25 * 0.020 - 0.020 <= elapsed <= 10 * 0.65, elapsed
    assert not np.any(frames[3].to_ndarray())  # nothing queued: silence


async def test_queued_audio_plays_in_order_then_silence_and_events():
    events = []
    buffer = PlayoutBuffer(lambda g: True)
    track = OutputAudioTrack(buffer, on_events=events.append)
    audio = (np.arange(2400) % 100 + 1).astype(np.int16)  # 50 ms, never zero
    assert await asyncio.to_thread(buffer.write, 7, audio, "hello world")
    buffer.end(7)
    played = [(await track.recv()).to_ndarray().reshape(-1) for _ in range(5)]
    joined = np.concatenate(played)
    assert np.array_equal(joined[:2400], audio)
    assert not np.any(joined[2400:])
    assert events[0].started == 7
    assert any(e.stopped and e.stopped[0] == 7 and e.stopped[1] == 50 for e in events)


async def test_stale_generation_is_never_played():
    current = {"gen": 1}
    buffer = PlayoutBuffer(lambda g: g == current["gen"])
    track = OutputAudioTrack(buffer)
    assert await asyncio.to_thread(buffer.write, 1, np.full(4800, 1000, np.int16))
    current["gen"] = 2  # cancelled after it was queued
    frame = await track.recv()
    assert not np.any(frame.to_ndarray())


async def test_the_thinking_cue_waits_while_playback_is_suspended():
    # A call on hold hears nothing: before, the cue was read on (a filler's "One moment." said to
    # nobody, its longest time spent); now it waits and sounds at the resume if still due.
    buffer = PlayoutBuffer(lambda g: True)
    cue = ThinkingCue()
    track = OutputAudioTrack(buffer, cue=cue)
    cue.arm(thinking_tone(), at=time.monotonic())
    buffer.suspend(True)
    for _ in range(5):
        assert not np.any((await track.recv()).to_ndarray())
    assert cue.frames_played == 0 and not track.carried_audio
    buffer.suspend(False)
    await track.recv()
    assert cue.frames_played == 1 and track.carried_audio
