"""The TTS engine's WAV reader takes a speech server's answer piece by piece, as it arrives: any
split of the bytes gives the same samples, at the rate its header says."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest

from gateway.models.openai_http.tts import WavStream


def wav_bytes(samples: np.ndarray, rate: int, channels: int = 1) -> bytes:
    """int16 ``samples`` (interleaved when ``channels`` > 1) as a WAV file, by the standard library."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(samples.astype("<i2").tobytes())
    return out.getvalue()


def feed_in_pieces(data: bytes, size: int, raw_rate: int | None = None) -> tuple[np.ndarray, WavStream]:
    reader = WavStream(raw_rate)
    pieces = [reader.feed(data[i : i + size]) for i in range(0, len(data), size)]
    return np.concatenate(pieces), reader


SAMPLES = (np.sin(np.arange(2205) / 7.0) * 20000).astype(np.int16)  # 0.1 s at 22 050 Hz


@pytest.mark.parametrize("size", [1, 3, 44, 45, 1000, 1 << 20])
def test_any_split_gives_the_same_samples(size: int) -> None:
    audio, reader = feed_in_pieces(wav_bytes(SAMPLES, 22050), size)
    assert reader.sample_rate == 22050
    np.testing.assert_array_equal(audio, SAMPLES.astype(np.float32) / 32768.0)


def test_a_streamed_header_with_unknown_sizes_and_other_chunks() -> None:
    data = bytearray(wav_bytes(SAMPLES, 24000))
    data[4:8] = struct.pack("<I", 0xFFFFFFFF)  # a streaming server cannot know the sizes
    data[40:44] = struct.pack("<I", 0xFFFFFFFF)
    info = b"LIST" + struct.pack("<I", 5) + b"INFOx" + b"\0"  # odd size: padded to even
    streamed = bytes(data[:36]) + info + bytes(data[36:])
    audio, reader = feed_in_pieces(streamed, 7)
    assert reader.sample_rate == 24000 and audio.size == SAMPLES.size


def test_bytes_after_the_data_chunk_are_not_audio() -> None:
    data = wav_bytes(SAMPLES, 16000) + b"LIST" + struct.pack("<I", 4) + b"INFO"
    audio, _reader = feed_in_pieces(data, 100)
    assert audio.size == SAMPLES.size


def test_stereo_is_averaged_to_mono() -> None:
    left, right = SAMPLES[:1000], np.zeros(1000, np.int16)
    audio, _reader = feed_in_pieces(wav_bytes(np.stack([left, right], axis=1).reshape(-1), 48000, channels=2), 333)
    np.testing.assert_allclose(audio, left.astype(np.float32) / 32768.0 / 2)


def test_raw_pcm_has_no_header() -> None:
    audio, reader = feed_in_pieces(SAMPLES.astype("<i2").tobytes(), 5, raw_rate=24000)
    assert reader.sample_rate == 24000
    np.testing.assert_array_equal(audio, SAMPLES.astype(np.float32) / 32768.0)


def test_other_bodies_are_refused() -> None:
    with pytest.raises(ValueError, match="not a WAV stream"):
        WavStream().feed(b'{"error": {"message": "no"}}')
    eight_bit = bytearray(wav_bytes(SAMPLES, 22050))
    eight_bit[34:36] = struct.pack("<H", 8)
    with pytest.raises(ValueError, match="only 16-bit PCM"):
        WavStream().feed(bytes(eight_bit))
