"""The thinking cue ("no dead air"): real, quiet audio made at 48 kHz, played by the output
track only in frames without answer audio, stopped by the answer's first frame, recorded as played."""

from __future__ import annotations

import asyncio
import logging

import numpy as np

from gateway.media.echo_reference import EchoReference
from gateway.media.outbound import FRAME_SAMPLES, OutputAudioTrack
from gateway.media.playout import PlayoutBuffer
from gateway.media.thinking_cue import MAX_CUE_S, RATE, FillerCache, ThinkingCue, filler_audio, thinking_tone


class ClockDouble:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def dbfs(samples: np.ndarray) -> float:
    return 20 * float(np.log10(max(1.0, float(np.abs(samples.astype(np.float64)).max())) / 32767))


def test_tone_is_soft_audible_notes_well_below_speech():
    tone = thinking_tone()
    assert tone.dtype == np.int16 and tone.size == RATE * 1600 // 1000
    assert -33 <= dbfs(tone) <= -27  # audible, ~24 dB under speech peaks (-6 dBFS)
    spectrum = np.abs(np.fft.rfft(tone.astype(np.float64)))
    peak_hz = np.argmax(spectrum) * RATE / tone.size
    assert 500 <= peak_hz <= 700
    assert tone[0] == 0 and abs(int(tone[-1])) < 5  # no click where the loop joins


def test_cue_waits_until_due_loops_and_stops():
    clock = ClockDouble()
    cue = ThinkingCue(clock)
    assert cue.read(FRAME_SAMPLES) is None
    tone = thinking_tone()
    cue.arm(tone, at=101.5)
    assert cue.armed and cue.read(FRAME_SAMPLES) is None  # not due yet
    clock.now = 101.5
    frames = [cue.read(FRAME_SAMPLES) for _ in range(200)]  # 4 s: past the 1.6 s cycle
    assert all(f is not None and f.size == FRAME_SAMPLES for f in frames)
    joined = np.concatenate([f for f in frames if f is not None])
    assert np.array_equal(joined[: tone.size], tone) and np.array_equal(joined[tone.size : 2 * tone.size], tone)
    assert cue.stop() and not cue.armed and cue.read(FRAME_SAMPLES) is None


def test_rearming_keeps_the_earlier_due_time_and_the_place_in_the_sound():
    clock = ClockDouble()
    cue = ThinkingCue(clock)
    tone = thinking_tone()
    cue.arm(tone, at=100.0)
    first = cue.read(FRAME_SAMPLES)
    cue.arm(tone, at=105.0)  # the next response of a tool call: the cue runs on
    second = cue.read(FRAME_SAMPLES)
    assert first is not None and second is not None
    assert np.array_equal(np.concatenate([first, second]), tone[: 2 * FRAME_SAMPLES])


def test_a_filler_plays_once_and_any_cue_ends_after_its_longest():
    clock = ClockDouble()
    cue = ThinkingCue(clock)
    filler = np.full(FRAME_SAMPLES * 3 // 2, 500, np.int16)
    cue.arm(filler, at=100.0, loop=False)
    frames = [cue.read(FRAME_SAMPLES) for _ in range(3)]
    assert frames[0] is not None and frames[1] is not None and frames[2] is None
    assert np.count_nonzero(frames[1]) == FRAME_SAMPLES // 2
    cue.stop()
    cue.arm(thinking_tone(), at=100.0)
    assert cue.read(FRAME_SAMPLES) is not None
    clock.now += MAX_CUE_S
    assert cue.read(FRAME_SAMPLES) is None and not cue.sounding


def test_filler_audio_is_resampled_to_48k_and_softened():
    pieces = [np.sin(np.linspace(0, 400 * np.pi, 22050)).astype(np.float32) * 0.9]
    audio = filler_audio(pieces, 22050)
    assert abs(audio.size - RATE) < 200
    assert -13 <= dbfs(audio) <= -11


async def test_track_plays_the_cue_in_silence_and_the_answer_stops_it():
    buffer = PlayoutBuffer(lambda g: True)
    cue = ThinkingCue()
    echo = EchoReference()
    track = OutputAudioTrack(buffer, cue=cue, echo_reference=echo)
    silent = (await track.recv()).to_ndarray().reshape(-1)
    assert not np.any(silent) and not track.carried_audio
    cue.arm(thinking_tone(), at=0.0)
    heard = [(await track.recv()).to_ndarray().reshape(-1) for _ in range(10)]
    assert np.abs(np.concatenate(heard)).max() > 500 and track.carried_audio
    assert echo.recently_played(echo._end_time or 0.0)  # recorded as played: its echo starts no turn
    answer = np.full(FRAME_SAMPLES * 2, 3000, np.int16)
    assert await asyncio.to_thread(buffer.write, 1, answer, "hello")
    buffer.end(1)
    frame = (await track.recv()).to_ndarray().reshape(-1)
    assert np.all(frame == 3000)  # the answer, not a mix
    assert not cue.armed
    (await track.recv()), (await track.recv())
    after = (await track.recv()).to_ndarray().reshape(-1)
    assert not np.any(after)  # the answer played out: silence, no cue


def test_a_filler_that_cannot_be_made_is_logged_once_per_cause_and_left_empty(caplog):
    cache = FillerCache()

    def broken_voice() -> np.ndarray:
        raise RuntimeError("voice model file is corrupt")

    with caplog.at_level(logging.WARNING, logger="gateway.media.thinking_cue"):
        for key in (("tts", "alloy"), ("tts", "verse")):  # two voices, one cause
            assert cache.claim(key)
            cache.prepare(key, broken_voice)
        assert cache.claim(("tts", "ash"))
        cache.prepare(("tts", "ash"), lambda: np.zeros(0, np.int16))  # a voice that says nothing
    assert cache.get(("tts", "alloy")).size == cache.get(("tts", "verse")).size == 0  # the tone plays instead
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "RuntimeError: voice model file is corrupt" in warnings[0] and "made no audio" in warnings[1]
