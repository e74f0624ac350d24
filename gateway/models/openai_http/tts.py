"""Text-to-speech behind an OpenAI-compatible speech server, streamed over HTTP.

For TTS on a shared GPU tier: speaches, Kokoro-FastAPI, fastkokoro, LocalAI, local-tts-studio
(Piper), or OpenAI itself. One ``POST {base_url}/audio/speech`` per text piece (OpenAI API reference,
"Create speech"): JSON ``{"model", "input", "voice", "response_format", "speed"}``; the audio comes
back as the response body. The body is read as it arrives (chunked transfer), and each piece's whole
samples are yielded at once, so that from a server that streams, the first audio plays while the
rest of the sentence is still being synthesized (from one that does not, it comes whole).

``response_format``:

- ``wav`` (the default): a RIFF/WAVE header, then 16-bit PCM. The header says the rate, so any
  server's voice works; a streaming server may leave the data size 0 or 0xFFFFFFFF (unknown),
  and the body is then read to its end. The engine's ``sample_rate`` is the rate of the first
  answer (the warm-up synthesis at start); an answer at another rate later is an error, since the
  TTS stage resamples from one rate per engine.
- ``pcm``: raw 16-bit little-endian mono at 24 kHz, as OpenAI documents it; for servers that
  follow that exactly (a server that sends its voice's own rate as ``pcm`` would play at the wrong
  pitch: use ``wav`` there).

A server that cannot be reached, stays silent past ``read_timeout_s`` (before the answer or between
two pieces of it), answers with an HTTP error or sends a body that is not such audio raises
:class:`~gateway.models.openai_http.client.SpeechServerError` from the generator; the TTS stage
reports it to the caller as ``tts_failed`` (the response fails), the URL only in the log. A
response cancelled mid-sentence stops reading: the stage drops the generator, which closes the
connection, so the server can stop synthesizing.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from typing import Optional

import numpy as np

from gateway.models.openai_http.client import Endpoint, SpeechServerError
from gateway.models.weights import served

PCM_RATE = 24000  # Hz of OpenAI's ``pcm`` response format
OPENAI_MODEL = "tts-1"
OPENAI_VOICE = "alloy"
RESPONSE_FORMATS = ("wav", "pcm")
PATH = "/audio/speech"
_PCM_FORMATS = (1, 0xFFFE)  # WAVE_FORMAT_PCM, WAVE_FORMAT_EXTENSIBLE (with PCM inside)


class WavStream:
    """Reads a RIFF/WAVE byte stream piece by piece, as it arrives: :meth:`feed` returns the whole
    samples that are complete so far (float32 mono, -1..1; several channels are averaged).

    ``raw_rate`` set: the stream is headerless 16-bit little-endian mono at that rate (``pcm``).
    Only 16-bit integer PCM is accepted; anything else raises ValueError, as does a stream that is
    not RIFF/WAVE. ``sample_rate`` is known once the ``fmt`` chunk has been read (None before).
    """

    def __init__(self, raw_rate: Optional[int] = None) -> None:
        self.sample_rate: Optional[int] = raw_rate
        self._channels = 1
        self._buffer = bytearray()
        self._header_done = raw_rate is not None
        self._in_data = raw_rate is not None
        self._data_left: Optional[int] = None  # bytes of the data chunk still to come (None: to the end)

    def feed(self, data: bytes) -> np.ndarray:
        """Take the next bytes of the stream; return the samples they completed (maybe none)."""
        self._buffer += data
        if not self._in_data:
            self._read_header()
        if not self._in_data:
            return np.zeros(0, np.float32)
        frame = 2 * self._channels
        usable = len(self._buffer) - len(self._buffer) % frame
        if self._data_left is not None:
            usable = min(usable, self._data_left - self._data_left % frame)
            self._data_left -= usable
        pcm = np.frombuffer(bytes(self._buffer[:usable]), dtype="<i2")
        del self._buffer[:usable]
        if self._data_left is not None and self._data_left < frame:
            self._buffer.clear()  # past the data chunk: a trailing chunk (LIST...) is not audio
        samples = pcm.astype(np.float32) / 32768.0
        if self._channels > 1:
            samples = samples.reshape(-1, self._channels).mean(axis=1)
        return samples

    def _read_header(self) -> None:
        """Consume the RIFF header and the chunks before ``data``, as far as the buffer goes."""
        if not self._header_done:
            if len(self._buffer) < 12:
                return
            if self._buffer[:4] != b"RIFF" or self._buffer[8:12] != b"WAVE":
                raise ValueError(f"not a WAV stream (starts {bytes(self._buffer[:12])!r})")
            del self._buffer[:12]
            self._header_done = True
        while len(self._buffer) >= 8:
            chunk_id = bytes(self._buffer[:4])
            (size,) = struct.unpack("<I", self._buffer[4:8])
            if chunk_id == b"data":
                if self.sample_rate is None:
                    raise ValueError("WAV data before its fmt chunk")
                del self._buffer[:8]
                self._in_data = True
                self._data_left = size if 0 < size < 0xFFFFFFFF else None  # 0 / all ones: unknown
                return
            whole = size + (size & 1)  # chunks are padded to an even size
            if len(self._buffer) < 8 + whole:
                return
            if chunk_id == b"fmt ":
                self._read_format(bytes(self._buffer[8 : 8 + size]))
            del self._buffer[: 8 + whole]

    def _read_format(self, fmt: bytes) -> None:
        if len(fmt) < 16:
            raise ValueError("WAV fmt chunk too short")
        tag, channels, rate, _byte_rate, _align, bits = struct.unpack("<HHIIHH", fmt[:16])
        if tag not in _PCM_FORMATS or bits != 16 or channels < 1:
            raise ValueError(f"WAV format {tag:#x} with {bits}-bit samples: only 16-bit PCM is read")
        self._channels, self.sample_rate = channels, rate


class OpenAIHttpTextToSpeech:
    """Speech from the server at ``base_url`` (``http://host:8000/v1``), streamed.

    ``model`` and ``voice`` are names the server serves (OpenAI: ``tts-1``, ``alloy``); a session's
    own voice name (``audio.output.voice``) goes to the server as it is. ``response_format``: "wav"
    or "pcm" (module docstring). ``api_key`` goes as ``Authorization: Bearer`` when set.
    Thread-safe: the units' TTS threads synthesize at once, each on a connection of the shared pool.
    Raises ValueError for another ``response_format``.
    """

    computes_here = False  # the server computes: calls take no slot of this box's speech models

    def __init__(
        self,
        model: str,
        base_url: str,
        voice: str = OPENAI_VOICE,
        api_key: str = "",
        response_format: str = "wav",
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 30.0,
    ) -> None:
        if response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format {response_format!r}: use one of {', '.join(RESPONSE_FORMATS)}")
        self.name = model
        self.voice = voice
        self.response_format = response_format
        self.endpoint = Endpoint("TTS", base_url, api_key, connect_timeout_s, read_timeout_s)
        self.weights = served(model, self.endpoint.base_url)
        self.sample_rate = PCM_RATE  # Hz; for wav: the first answer's (see the module docstring)
        self._rate_known = response_format == "pcm"
        self._lock = threading.Lock()

    def synthesize(self, text: str, speed: float = 1.0, voice: Optional[str] = None) -> Iterator[np.ndarray]:
        """Yield float32 mono (-1..1) at ``sample_rate`` Hz as the server's answer arrives, one array
        per piece of the body that completed samples. ``speed``: the Realtime ``audio.output.speed``
        (OpenAI's speech ``speed``, sent as given; some servers ignore it). ``voice``: the session's
        voice name, None for ``self.voice``. Raises SpeechServerError (module docstring)."""
        if not text.strip():
            return
        reader = WavStream(PCM_RATE if self.response_format == "pcm" else None)
        try:
            with self.endpoint.client().audio.speech.with_streaming_response.create(
                model=self.name,
                input=text,
                voice=voice or self.voice,
                response_format=self.response_format,  # type: ignore[arg-type]  # "wav" | "pcm"
                speed=speed,
            ) as response:
                for piece in response.iter_bytes():
                    samples = reader.feed(piece)
                    if samples.size:
                        self._check_rate(reader.sample_rate)
                        yield samples
        except SpeechServerError:
            raise
        except ValueError as exc:
            raise SpeechServerError(f"TTS server {self.endpoint.base_url}{PATH} sent {exc}") from exc
        except Exception as exc:  # openai's errors, or the HTTP library's while the body streams
            raise SpeechServerError(self.endpoint.failure(exc, PATH)) from exc

    def _check_rate(self, rate: Optional[int]) -> None:
        """The first WAV answer fixes ``sample_rate``; a later one at another rate is an error."""
        with self._lock:
            if not self._rate_known and rate:
                self.sample_rate, self._rate_known = rate, True
        if rate != self.sample_rate:
            raise SpeechServerError(
                f"TTS server {self.endpoint.base_url}{PATH} sent {rate} Hz audio, {self.sample_rate} Hz before: "
                "one engine speaks at one rate (use voices of one rate)"
            )

    def close(self) -> None:
        """Close the connection pool."""
        self.endpoint.close()
