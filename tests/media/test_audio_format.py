"""Audio in Realtime events: G.711 against FFmpeg's codecs (and CPython's audioop where it still
exists), the session's formats, and the stateful conversion of each direction."""

from __future__ import annotations

import warnings

import av
import numpy as np
import pytest

from gateway.media import g711
from gateway.media.audio_format import (
    AudioFormat,
    AudioFormatError,
    InputAudioDecoder,
    OutputAudioEncoder,
    from_linear,
    to_linear,
)
from tests.helpers import require_module

ALL_SAMPLES = np.arange(-32768, 32768, dtype=np.int16)
ALL_CODES = bytes(range(256))


def ffmpeg_decode(codec: str, data: bytes) -> np.ndarray:
    context = av.CodecContext.create(codec, "r")
    context.sample_rate = 8000
    context.layout = "mono"
    return np.concatenate([frame.to_ndarray().reshape(-1) for frame in context.decode(av.Packet(data))])


@pytest.mark.parametrize(("codec", "decode"), [("pcm_mulaw", g711.decode_mulaw), ("pcm_alaw", g711.decode_alaw)])
def test_g711_decodes_every_byte_as_ffmpeg_does(codec, decode):
    assert np.array_equal(decode(ALL_CODES), ffmpeg_decode(codec, ALL_CODES))


@pytest.mark.parametrize(
    ("encode", "decode"), [(g711.encode_mulaw, g711.decode_mulaw), (g711.encode_alaw, g711.decode_alaw)]
)
def test_g711_encoding_is_its_own_decoding_inverse(encode, decode):
    # Each decoded level encodes back to itself...
    levels = decode(ALL_CODES)
    assert np.array_equal(decode(encode(levels)), levels)
    # ...and every sample lands on a level near it (companding: the step grows with the level).
    error = np.abs(decode(encode(ALL_SAMPLES)).astype(np.int32) - ALL_SAMPLES)
    assert error.max() <= 1024
    assert error[np.abs(ALL_SAMPLES.astype(np.int32)) < 256].max() <= 16


def test_g711_encoding_matches_audioop_where_python_still_has_it():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = require_module("audioop", "Python 3.13 removed it: pip install audioop-lts")
    assert g711.encode_mulaw(ALL_SAMPLES) == audioop.lin2ulaw(ALL_SAMPLES.tobytes(), 2)
    assert g711.encode_alaw(ALL_SAMPLES) == audioop.lin2alaw(ALL_SAMPLES.tobytes(), 2)


def test_session_formats():
    assert AudioFormat.from_session({"type": "audio/pcm", "rate": 24000}) == AudioFormat("pcm16", 24000)
    assert AudioFormat.from_session({"type": "audio/pcmu"}) == AudioFormat("pcmu", 8000)
    assert AudioFormat.from_session({"type": "audio/pcma"}) == AudioFormat("pcma", 8000)
    with pytest.raises(AudioFormatError):
        AudioFormat.from_session({"type": "audio/opus"})
    assert AudioFormat("pcm16", 24000).duration_ms(4800) == 100
    assert AudioFormat("pcmu", 8000).duration_ms(800) == 100


def test_bytes_that_are_no_audio_of_the_format_are_refused_with_a_reason():
    with pytest.raises(AudioFormatError, match="whole number of 16-bit samples"):
        to_linear(b"\x00\x01\x02", AudioFormat("pcm16", 24000))
    wav = b"RIFF\x24\x08\x00\x00WAVEfmt " + bytes(32)
    with pytest.raises(AudioFormatError, match="WAV file"):
        to_linear(wav, AudioFormat("pcm16", 24000))
    assert to_linear(b"\x01\x02\x03", AudioFormat("pcmu", 8000)).size == 3  # any byte is a G.711 sample


def tone(rate: int, seconds: float, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (8000 * np.sin(2 * np.pi * hz * t)).astype(np.int16)


@pytest.mark.parametrize("fmt", [AudioFormat("pcm16", 24000), AudioFormat("pcmu", 8000), AudioFormat("pcma", 8000)])
def test_input_chunks_become_16k_audio_of_the_same_length(fmt):
    decoder = InputAudioDecoder(fmt, 16000)
    source = from_linear(tone(fmt.rate, 1.0), fmt)
    chunk = len(source) // 50  # 20 ms chunks, as a client streams them
    out = np.concatenate([decoder.decode(source[i : i + chunk]) for i in range(0, len(source), chunk)])
    assert abs(out.size - 16000) <= 160  # the resampler's delay, no more
    spectrum = np.abs(np.fft.rfft(out[2000:14000]))
    assert abs(np.argmax(spectrum) * 16000 / 12000 - 440) < 5  # still a 440 Hz tone: no clicks, right rate


@pytest.mark.parametrize("fmt", [AudioFormat("pcm16", 24000), AudioFormat("pcmu", 8000)])
def test_reply_audio_is_encoded_to_the_output_format(fmt):
    encoder = OutputAudioEncoder(fmt, 48000)
    source = tone(48000, 1.0)
    data = b"".join(encoder.encode(source[i : i + 4800]) for i in range(0, source.size, 4800))
    samples = to_linear(data, fmt)
    assert abs(samples.size - fmt.rate) <= fmt.rate // 50
    spectrum = np.abs(np.fft.rfft(samples[fmt.rate // 10 : fmt.rate // 10 * 9]))
    assert abs(np.argmax(spectrum) * fmt.rate / (fmt.rate // 10 * 8) - 440) < 5
