"""Audio carried in Realtime events (WebSocket transport): the session's audio formats, and the
stateful conversion of each direction.

Reference: the OpenAI Realtime API audio formats, GA ``{"type": "audio/pcm", "rate": 24000}``
(16-bit little-endian mono PCM at 24 kHz, the default), ``{"type": "audio/pcmu"}`` and
``{"type": "audio/pcma"}`` (G.711 µ-law / A-law at 8 kHz); beta ``pcm16``, ``g711_ulaw``,
``g711_alaw``. The session keeps the GA objects (``SessionSettings.input_format`` /
``output_format``); this module turns them into :class:`AudioFormat`.

Caller audio in (``input_audio_buffer.append``): bytes of the input format -> int16 mono at the
VAD's rate (16 kHz). Reply audio out (``response.output_audio.delta``): int16 mono 48 kHz from the
playout buffer -> bytes of the output format. Each direction keeps one PyAV resampler for the
stream (see :class:`gateway.media.resample.Resampler`), so chunk edges make no clicks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gateway.media import g711
from gateway.media.resample import Resampler


class AudioFormatError(ValueError):
    """Audio bytes that do not fit the session's format (the message says how), or a format
    object this gateway cannot carry."""


@dataclass(frozen=True)
class AudioFormat:
    """One wire format: ``codec`` ``pcm16`` (2 bytes a sample), ``pcmu`` or ``pcma`` (1 byte a
    sample), at ``rate`` Hz, mono."""

    codec: str
    rate: int

    @property
    def bytes_per_sample(self) -> int:
        """2 for 16-bit PCM, 1 for G.711."""
        return 2 if self.codec == "pcm16" else 1

    def duration_ms(self, size: int) -> float:
        """Milliseconds of audio in ``size`` bytes of this format."""
        return size / self.bytes_per_sample * 1000 / self.rate

    @classmethod
    def from_session(cls, fmt: Any) -> AudioFormat:
        """The format of a GA format object (``{"type": "audio/pcm", "rate": 24000}``...).
        Raises AudioFormatError for a type this gateway does not carry."""
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "audio/pcm":
            return cls("pcm16", int(fmt.get("rate") or 24000))
        if kind == "audio/pcmu":
            return cls("pcmu", 8000)
        if kind == "audio/pcma":
            return cls("pcma", 8000)
        raise AudioFormatError(f"unsupported audio format {fmt!r}")


PCM16_24K = AudioFormat("pcm16", 24000)


def check_not_wav(head: bytes) -> None:
    """Raises AudioFormatError when ``head`` (the first 12 bytes or more of an append) is a WAV
    file's header: the Realtime API takes raw samples only."""
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        raise AudioFormatError(
            "the audio is a WAV file; send raw samples in the session's input format, without a header"
        )


def check_whole_samples(size: int, fmt: AudioFormat) -> None:
    """Raises AudioFormatError when ``size`` bytes are not a whole number of ``fmt``'s samples."""
    if size % fmt.bytes_per_sample:
        raise AudioFormatError(
            f"{size} bytes is not a whole number of 16-bit samples (the input format is 16-bit PCM at {fmt.rate} Hz)"
        )


def to_linear(data: bytes, fmt: AudioFormat) -> np.ndarray:
    """Bytes of ``fmt`` -> int16 samples at ``fmt.rate``. Raises AudioFormatError when the bytes
    cannot be audio of that format (an odd byte count of 16-bit PCM, a WAV file header)."""
    check_not_wav(data)
    check_whole_samples(len(data), fmt)
    return _linear(data, fmt)


def _linear(data: bytes, fmt: AudioFormat) -> np.ndarray:
    if fmt.codec == "pcmu":
        return g711.decode_mulaw(data)
    if fmt.codec == "pcma":
        return g711.decode_alaw(data)
    return np.frombuffer(data, "<i2").astype(np.int16)


def from_linear(samples: np.ndarray, fmt: AudioFormat) -> bytes:
    """int16 samples at ``fmt.rate`` -> bytes of ``fmt``."""
    if fmt.codec == "pcmu":
        return g711.encode_mulaw(samples)
    if fmt.codec == "pcma":
        return g711.encode_alaw(samples)
    return samples.astype("<i2").tobytes()


class InputAudioDecoder:
    """Caller audio of one session: bytes in ``fmt`` -> int16 mono at ``rate`` Hz (the VAD's).

    Stateful (the resampler's filter runs across chunks); a new one is made when the session's
    input format changes.
    """

    def __init__(self, fmt: AudioFormat, rate: int) -> None:
        self.format = fmt
        self.rate = rate
        self._resampler = Resampler(rate) if fmt.rate != rate else None

    def decode(self, data: bytes) -> np.ndarray:
        """One chunk of the stream. Raises AudioFormatError (see :func:`to_linear`)."""
        return self._resample(to_linear(data, self.format))

    def decode_pieces(self, data: bytes, piece_s: float) -> list[np.ndarray]:
        """One chunk of the stream, as :meth:`decode` gives it, cut into pieces of at most
        ``piece_s`` seconds of input, each converted in turn (the filter state carries from one to
        the next): no single step holds the interpreter for long, and each piece is one queue
        message of modest size. Raises AudioFormatError (see :func:`to_linear`)."""
        check_not_wav(data)
        check_whole_samples(len(data), self.format)
        step = max(1, int(self.format.rate * piece_s)) * self.format.bytes_per_sample
        pieces = (
            self._resample(_linear(data[start : start + step], self.format)) for start in range(0, len(data), step)
        )
        return [piece for piece in pieces if piece.size]

    def flush(self) -> np.ndarray:
        """The end of a buffer (a commit): the samples the resampler still holds (its filter's delay,
        a few ms), so that the audio decoded so far is all out; the next chunk starts a fresh filter."""
        if self._resampler is None:
            return np.zeros(0, np.int16)
        held = self._resampler.flush()
        self._resampler = Resampler(self.rate)
        return held

    def _resample(self, samples: np.ndarray) -> np.ndarray:
        if self._resampler is None or not samples.size:
            return samples
        return self._resampler.resample_array(samples, self.format.rate)


class OutputAudioEncoder:
    """Reply audio of one session: int16 mono at ``source_rate`` Hz (the playout buffer's 48 kHz)
    -> bytes in ``fmt``. Stateful like :class:`InputAudioDecoder`."""

    def __init__(self, fmt: AudioFormat, source_rate: int) -> None:
        self.format = fmt
        self._source_rate = source_rate
        self._resampler = Resampler(fmt.rate) if fmt.rate != source_rate else None

    def encode(self, samples: np.ndarray) -> bytes:
        """One chunk of the stream (its length in the output may differ by the filter's delay)."""
        if self._resampler is not None and samples.size:
            samples = self._resampler.resample_array(samples, self._source_rate)
        return from_linear(samples, self.format)
