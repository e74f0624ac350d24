"""The stereo recording of a call: the caller left, the assistant right, both on the call's
timeline (silence where a channel had none), streamed to work files and renamed into place; the
event-transport pacer places reply audio where the caller's playback clock plays it and takes back
what a barge-in dropped unheard; a full disk stops the recording, and what reached the disk is
still a valid WAV."""

from __future__ import annotations

import stat
import wave
from pathlib import Path

import numpy as np

from gateway.media.audio_pacer import PlayoutPacer
from gateway.media.playout import SAMPLE_RATE, PlayoutBuffer
from gateway.media.recording import RATE, StereoRecording
from tests.doubles import DiskFullOnceFileDouble


def read_wav(path: Path) -> tuple[wave._wave_params, np.ndarray]:
    with wave.open(str(path), "rb") as wav:
        params = wav.getparams()
        frames = np.frombuffer(wav.readframes(params.nframes), dtype="<i2").reshape(-1, params.nchannels)
    return params, frames


def tone(seconds: float, rate: int, level: int = 8000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (level * np.sin(2 * np.pi * 440 * t)).astype(np.int16)


def voiced(channel: np.ndarray, start_s: float, end_s: float) -> float:
    """RMS of ``channel`` (int16 at RATE) between two times."""
    part = channel[int(start_s * RATE) : int(end_s * RATE)].astype(np.float64)
    return float(np.sqrt(np.mean(part**2))) if part.size else 0.0


def test_channels_are_placed_on_the_call_timeline_and_padded_to_its_end(tmp_path):
    recording = StereoRecording(tmp_path / ".partial-call", started_at=100.0)
    # The caller speaks from 0.5 s to 1.5 s (20 ms chunks at 16 kHz, each ending when it arrived).
    for index in range(50):
        recording.caller(tone(0.02, 16000), 16000, 100.5 + 0.02 * (index + 1))
    # The assistant answers from 2.0 s to 3.0 s (48 kHz frames, as the track plays them out).
    for index in range(50):
        recording.assistant(tone(0.02, SAMPLE_RATE), SAMPLE_RATE, 102.0 + 0.02 * index)
    seconds = recording.finish(tmp_path / "call.wav", ended_at=104.0)

    params, frames = read_wav(tmp_path / "call.wav")
    assert (params.nchannels, params.sampwidth, params.framerate) == (2, 2, RATE)
    assert abs(seconds - 4.0) < 0.01 and frames.shape[0] == params.nframes
    left, right = frames[:, 0], frames[:, 1]
    assert voiced(left, 0.55, 1.45) > 4000 and voiced(left, 0.0, 0.45) == 0 and voiced(left, 1.6, 4.0) == 0
    assert voiced(right, 2.05, 2.95) > 4000 and voiced(right, 0.0, 1.95) == 0 and voiced(right, 3.05, 4.0) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["call.wav"]  # the work files are gone


def test_jitter_is_followed_on_a_gap_becomes_silence_and_a_pause_records_nothing(tmp_path):
    recording = StereoRecording(tmp_path / ".partial-call", started_at=0.0)
    recording.caller(tone(0.02, 16000), 16000, 0.02)
    recording.caller(tone(0.02, 16000), 16000, 0.07)  # 30 ms late: follows on directly
    recording.caller(tone(0.02, 16000), 16000, 1.02)  # after a second without media: placed at 1.0 s
    recording.paused = True
    recording.caller(tone(0.5, 16000), 16000, 1.6)
    recording.paused = False
    recording.finish(tmp_path / "call.wav", ended_at=2.0)
    _, frames = read_wav(tmp_path / "call.wav")
    left = frames[:, 0]
    assert voiced(left, 0.0, 0.04) > 4000 and voiced(left, 0.041, 0.99) == 0
    assert voiced(left, 1.0, 1.02) > 4000 and voiced(left, 1.03, 2.0) == 0


def test_a_stall_and_its_burst_keep_the_channel_on_the_clock_and_lost_media_is_closed(tmp_path):
    recording = StereoRecording(tmp_path / ".partial-call", started_at=0.0)
    arrivals = [0.02 * (i + 1) for i in range(50)]  # 1 s of 20 ms chunks in real time...
    arrivals[20:30] = [0.6] * 10  # ...but 0.4-0.6 s arrive in one burst after a 200 ms stall
    for at in arrivals:
        recording.caller(tone(0.02, 16000), 16000, at)
    assert recording.finish(tmp_path / "call.wav", ended_at=1.0) == 1.0  # not a sample ahead
    _, frames = read_wav(tmp_path / "call.wav")
    assert all(voiced(frames[:, 0], t / 50, (t + 1) / 50) > 4000 for t in range(50))  # no silence put in

    recording = StereoRecording(tmp_path / ".partial-call", started_at=0.0)
    for index in range(100):  # 2 s of chunks; from 0.5 s on, 200 ms were lost: every chunk 200 ms late
        at = 0.02 * (index + 1) + (0.2 if index >= 25 else 0.0)
        if not 25 <= index < 35:
            recording.caller(tone(0.02, 16000), 16000, at)
    recording.finish(tmp_path / "call.wav", ended_at=2.2)
    _, frames = read_wav(tmp_path / "call.wav")
    voice = np.flatnonzero(frames[:, 0])
    assert abs(voice[-1] / RATE - 2.2) < 0.03  # the loss was closed with silence: the end is on time


def test_a_full_disk_stops_the_recording_and_what_reached_the_disk_is_a_valid_wav(tmp_path):
    """3 s of caller audio in 20 ms chunks; the caller file's 50th write (the chunk of 0.98 s,
    written at 2 s, once the chunk has settled) meets a full disk after 150 samples and a byte."""
    recording = StereoRecording(tmp_path / ".partial-call", started_at=0.0)
    caller = np.random.default_rng(5).integers(-8000, 8000, 150 * 320).astype(np.int16)
    recording._caller.file = DiskFullOnceFileDouble(recording._caller.file, fail_at=50)
    for index in range(150):
        recording.caller(caller[index * 320 : (index + 1) * 320], 16000, 0.02 * (index + 1))
        if 25 <= index < 50:  # the assistant from 0.5 s to 1.0 s: held in memory until the end
            recording.assistant(tone(0.02, 16000), 16000, 0.02 * index)
    assert recording.failed

    seconds = recording.finish(tmp_path / "call.wav", ended_at=3.0)
    assert recording.error == "No space left on device"
    params, frames = read_wav(tmp_path / "call.wav")
    written = 49 * 320 + 150  # whole chunks before the failed write, and the whole samples of it
    # As long as the longer channel: the assistant's, which had no failed write, ends at 1.0 s.
    assert (params.nchannels, params.framerate) == (2, RATE) and params.nframes == frames.shape[0] == RATE
    assert seconds == 1.0
    assert np.array_equal(frames[:written, 0], caller[:written])  # the samples that reached the disk, in place
    assert not frames[written:, 0].any()
    assert voiced(frames[:, 1], 0.5, 1.0) > 4000 and voiced(frames[:, 1], 0.0, 0.49) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["call.wav"]
    assert stat.S_IMODE((tmp_path / "call.wav").stat().st_mode) == 0o600


def test_work_files_are_private(tmp_path):
    recording = StereoRecording(tmp_path / ".partial-call", started_at=0.0)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    recording.discard()
    assert modes == {".partial-call.caller.raw": 0o600, ".partial-call.assistant.raw": 0o600}


def test_discard_leaves_nothing(tmp_path):
    recording = StereoRecording(tmp_path / ".partial-call", started_at=0.0)
    recording.caller(tone(0.1, 16000), 16000, 0.1)
    recording.discard()
    assert list(tmp_path.iterdir()) == []


def test_the_pacer_places_reply_audio_at_playback_time_and_a_clear_takes_back_the_unheard(tmp_path):
    now = [10.0]
    live = {"gen": 1}
    buffer = PlayoutBuffer(lambda g: g == live["gen"], capacity_ms=10_000)
    recording = StereoRecording(tmp_path / ".partial-call", started_at=10.0)
    pacer = PlayoutPacer(
        buffer,
        lambda g, s: None,
        lambda e: None,
        lead_ms=400,
        clock=lambda: now[0],
        on_played=lambda samples, at: recording.assistant(samples, SAMPLE_RATE, at),
        on_unheard=recording.cut_assistant,
    )
    buffer.write(1, tone(2.0, SAMPLE_RATE), "a long answer")
    pacer.pump()
    for _ in range(30):  # the caller has heard 0.6 s; up to 1 s was sent ahead
        now[0] += 0.02
        pacer.pump()
    buffer.clear()  # barge-in: what was sent but not heard is dropped by the caller
    live["gen"] = 2
    now[0] += 0.02
    pacer.pump()
    recording.finish(tmp_path / "call.wav", ended_at=12.0)
    _, frames = read_wav(tmp_path / "call.wav")
    right = frames[:, 1]
    assert voiced(right, 0.0, 0.58) > 4000
    assert voiced(right, 0.62, 2.0) == 0  # the unheard rest is not in the recording
