"""The audio budget of a WebSocket session, judged by lengths only (a fake clock, no sockets), the
pace at which a connection's frames are read, and the piecewise decoding done off the loop."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from gateway.media.audio_format import AudioFormat, AudioFormatError, InputAudioDecoder, from_linear
from gateway.realtime.audio_events import appended_seconds, base64_size, decode_base64
from gateway.realtime.audio_intake import AUDIO_BURST_S, AUDIO_REFILL_PER_S, AudioIntake
from gateway.realtime.items import ClientError
from gateway.transports.websocket.event_socket import (
    FRAME_COST_BYTES,
    MAX_READ_PAUSE_S,
    READ_BURST_BYTES,
    READ_BYTES_PER_S,
    ReadPace,
)

PCM = AudioFormat("pcm16", 24000)
PCMU = AudioFormat("pcmu", 8000)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def intake(pending: list[float] | None = None) -> tuple[AudioIntake, Clock, list[str]]:
    clock, told = Clock(), []
    waiting = pending if pending is not None else [0.0]
    return AudioIntake(lambda: waiting[0], told.append, clock), clock, told


def test_a_burst_then_four_times_real_time_and_one_error_per_flood():
    audio, clock, told = intake()
    assert audio.take(AUDIO_BURST_S / 2) and audio.take(AUDIO_BURST_S / 2)  # a recorded question, at once
    assert not audio.take(0.1) and len(told) == 1 and "4 s of audio a second" in told[0]
    clock.now += 1.0
    assert audio.take(AUDIO_REFILL_PER_S) and not audio.take(0.02)  # 4 s of audio a second, no more
    assert len(told) == 1  # the same flood: no second error
    clock.now += 10.0
    assert not audio.take(AUDIO_BURST_S + 1)  # more than any burst: never
    assert len(told) == 2  # a later flood is told again
    assert audio.budget.refused == 3


def test_a_client_streaming_at_real_time_is_never_refused():
    audio, clock, told = intake()
    for _ in range(3000):  # five minutes of 100 ms chunks
        assert audio.take(0.1)
        clock.now += 0.1
    assert not told


def test_audio_waiting_to_be_decoded_is_bounded_too():
    pending = [AUDIO_BURST_S - 1.0]
    audio, _clock, told = intake(pending)
    assert not audio.take(2.0) and told
    pending[0] = 0.0
    assert audio.take(2.0)


def test_a_large_append_is_judged_by_its_length_before_it_is_parsed():
    audio, _clock, told = intake()
    big = json.dumps({"type": "input_audio_buffer.append", "audio": "A" * 2_000_000})  # 1.5 MB: 31 s of PCM
    assert audio.refused_unread(big, PCM) and len(told) == 1
    assert audio.refused_unread(big.encode(), PCM)  # bytes too
    at_end = json.dumps({"audio": "A" * 2_000_000, "type": "input_audio_buffer.append"})
    assert audio.refused_unread(at_end, PCM)
    fits = json.dumps({"type": "input_audio_buffer.append", "audio": "A" * 1_000_000})  # 15.6 s of PCM
    assert not audio.refused_unread(fits, PCM)
    assert audio.refused_unread(fits, PCMU)  # the same length of G.711 is 94 s
    other = json.dumps({"type": "session.update", "session": {"instructions": "x" * 2_000_000}})
    assert not audio.refused_unread(other, PCM)  # no append: parsed as usual
    assert len(told) == 1


def test_an_appends_length_gives_its_seconds_and_its_faults():
    one_second = base64.b64encode(bytes(48000)).decode()
    assert base64_size(one_second) == 48000 and appended_seconds(one_second, PCM) == 1.0
    assert appended_seconds(base64.b64encode(bytes(8001)).decode(), PCMU) == pytest.approx(1.000125)
    with pytest.raises(ClientError, match="whole number of 16-bit samples"):
        appended_seconds(base64.b64encode(bytes(3)).decode(), PCM)
    with pytest.raises(ClientError, match="WAV file"):
        appended_seconds(base64.b64encode(b"RIFF\x24\x08\x00\x00WAVEfmt " + bytes(32)).decode(), PCM)


def test_base64_is_checked_piece_by_piece_as_a_whole_would_be():
    data = np.random.default_rng(3).integers(0, 256, 300_000, np.uint8).tobytes()
    text = base64.b64encode(data).decode()
    assert decode_base64(text) == data
    for bad in (text[:100_000] + "!" + text[100_001:], text[:100_000] + "====" + text[100_004:], "AAA=" + text):
        with pytest.raises(ValueError, match="not valid base64"):
            decode_base64(bad)


@pytest.mark.parametrize("fmt", [PCM, PCMU, AudioFormat("pcma", 8000)])
def test_decoding_in_pieces_gives_the_stream_in_one_go(fmt):
    rng = np.random.default_rng(5)
    data = from_linear((rng.standard_normal(fmt.rate * 2) * 3000).astype(np.int16), fmt)
    whole = InputAudioDecoder(fmt, 16000).decode(data)
    pieces = InputAudioDecoder(fmt, 16000).decode_pieces(data, 0.1)
    assert len(pieces) >= 19 and max(piece.size for piece in pieces) <= 1600 + 64
    joined = np.concatenate(pieces)
    common = min(joined.size, whole.size)
    assert abs(joined.size - whole.size) <= 64 and np.array_equal(joined[:common], whole[:common])
    with pytest.raises(AudioFormatError):
        InputAudioDecoder(PCM, 16000).decode_pieces(b"RIFF\x24\x08\x00\x00WAVEfmt " + bytes(32), 0.1)


def test_a_connection_is_read_no_faster_than_its_pace():
    clock = Clock()
    pace = ReadPace(clock=clock)
    assert pace.delay(READ_BURST_BYTES - FRAME_COST_BYTES) == 0.0  # a burst at once
    assert pace.delay(READ_BYTES_PER_S - FRAME_COST_BYTES) == pytest.approx(1.0)  # then a second a MiB
    clock.now += 1.0
    assert pace.delay(1000) == pytest.approx((1000 + FRAME_COST_BYTES) / READ_BYTES_PER_S)
    # Empty frames cost something too: a flood of them is read ~1000 a second, after a burst.
    clock.now += 60.0
    empty = [pace.delay(0) for _ in range(READ_BURST_BYTES // FRAME_COST_BYTES + 1)]
    assert not any(empty[:-1]) and empty[-1] > 0
    clock.now += 60.0
    # A flood of 8 MiB frames: one read every MAX_READ_PAUSE_S, and the debt no larger, so that
    # a client that stops is read as usual again once it is paid.
    waits = []
    for _ in range(10):
        waits.append(pace.delay(8 * 2**20))
        clock.now += waits[-1]
    assert waits[0] < MAX_READ_PAUSE_S and waits[1:] == [MAX_READ_PAUSE_S] * 9
    clock.now += MAX_READ_PAUSE_S
    assert pace.delay(1000) == 0.0
    clock.now += 60.0
    for _ in range(100):  # a client sending audio at 4x real time reads on without a wait
        assert pace.delay(256 * 1024 // 10) == 0.0
        clock.now += 0.1
