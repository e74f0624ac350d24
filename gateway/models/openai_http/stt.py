"""Speech-to-text behind an OpenAI-compatible transcription server, over HTTP.

For STT on a shared GPU tier: faster-whisper-server, speaches, vLLM, LocalAI, or OpenAI itself. One
``POST {base_url}/audio/transcriptions`` per finished turn (OpenAI API reference, "Create
transcription"): a multipart form with ``file`` (the turn as a WAV file: 16 kHz mono 16-bit PCM),
``model``, ``language`` and ``response_format=json``; the answer is
``{"text": "..."}``. The server does its own batching and queueing; every unit's STT thread posts
through the engine's one connection pool (:mod:`gateway.models.openai_http.client`).

A server that cannot be reached, stays silent past ``read_timeout_s`` or answers with an HTTP error
raises :class:`~gateway.models.openai_http.client.SpeechServerError`; the STT stage reports it to
the caller as ``stt_failed`` (and the turn's transcription as failed), the URL only in the log.
"""

from __future__ import annotations

import io
import wave

import numpy as np
import openai

from gateway.models.openai_http.client import Endpoint, SpeechServerError
from gateway.models.weights import served

SAMPLE_RATE = 16000  # Hz: the VAD's, so the turns arrive at it (see SpeechToText)
OPENAI_MODEL = "whisper-1"  # what OpenAI calls its Whisper; the model asked for by default
PATH = "/audio/transcriptions"


def wav_file(audio: np.ndarray, sample_rate: int) -> bytes:
    """``audio`` (float32 mono, -1..1) as a WAV file: 16-bit PCM, one channel, ``sample_rate`` Hz."""
    pcm = (np.clip(np.asarray(audio, np.float32).reshape(-1), -1.0, 1.0) * 32767.0).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(pcm.tobytes())
    return out.getvalue()


class OpenAIHttpSpeechToText:
    """Transcription of one finished turn by the server at ``base_url`` (``http://host:8000/v1``).

    ``model`` is the name the server serves (``whisper-1`` for OpenAI and for a faster-whisper-server
    configured so; some servers serve one model and ignore it); ``api_key`` goes as ``Authorization:
    Bearer`` when set. Thread-safe: the units' STT threads call :meth:`transcribe` at once, each
    request on a connection of the shared pool.
    """

    sample_rate = SAMPLE_RATE
    computes_here = False  # the server computes: calls take no slot of this box's speech models

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "",
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 30.0,
    ) -> None:
        self.name = model
        self.endpoint = Endpoint("STT", base_url, api_key, connect_timeout_s, read_timeout_s)
        self.weights = served(model, self.endpoint.base_url)

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        """Text of one turn, stripped ("" for no audio, without asking): ``audio`` float32 mono -1..1
        at 16 kHz; ``language`` an ISO 639-1 code. Raises SpeechServerError when the server cannot
        answer (see the module docstring)."""
        samples = np.asarray(audio, dtype=np.float32).reshape(-1)
        if samples.size == 0:
            return ""
        try:
            result = self.endpoint.client().audio.transcriptions.create(
                model=self.name,
                file=("turn.wav", wav_file(samples, SAMPLE_RATE), "audio/wav"),
                response_format="json",
                language=language,
            )
        except openai.OpenAIError as exc:
            raise SpeechServerError(self.endpoint.failure(exc, PATH)) from exc
        return (result.text or "").strip()

    def close(self) -> None:
        """Close the connection pool."""
        self.endpoint.close()
