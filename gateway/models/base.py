"""The interfaces the pipeline stages use; every backend implements one of them.

Weights are loaded once per process and shared by all units; anything that belongs to one caller
(VAD recurrent state, chat history) lives in the unit, never in these objects. Every method here is
called from stage threads of several units at once and must be thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

import numpy as np


class ModelNotFoundError(RuntimeError):
    """A model's weights are not installed; the message names what to install or pass."""


class VadSession(Protocol):
    """Per-caller voice activity detector state (recurrent state of the network)."""

    def speech_probability(self, chunk: np.ndarray) -> float:
        """Probability 0..1 that ``chunk`` (float32, shape (512,), 16 kHz, -1..1) holds speech."""

    def reset(self) -> None:
        """Forget everything heard so far (a new session starts)."""


class VoiceActivityDetector(Protocol):
    """Loaded VAD weights, shared by all units; each caller gets its own :class:`VadSession`.

    Chunks are float32 mono of exactly ``chunk_samples`` at ``sample_rate`` Hz (Silero: 512 at
    16 kHz, 32 ms). The inbound reader resamples caller audio to ``sample_rate``, so it fixes the
    rate of the whole input path. ``new_session`` may be called from any thread.
    """

    sample_rate: int  # Hz of the chunks it takes
    chunk_samples: int  # samples per chunk

    def new_session(self) -> VadSession:
        """A fresh detector state that shares the loaded weights."""


class SpeechToText(Protocol):
    """Batch transcription of one finished turn, called from STT threads of several units at once.

    Turns arrive at the VAD's rate and nothing converts them, so ``sample_rate`` (Hz) must equal the
    VAD's: 16 kHz for Silero and Whisper.
    """

    sample_rate: int

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        """Text of ``audio`` (float32 mono, -1..1, at ``sample_rate`` Hz); "" when nothing was said."""


@dataclass
class ChatMessage:
    """One prompt message in the role/content shape that chat templates take (Hugging Face
    ``apply_chat_template``, OpenAI Chat Completions); built from Realtime conversation items."""

    role: str  # "system" | "user" | "assistant"
    content: str


class LanguageModel(Protocol):
    """Streaming chat completion for the LLM stage; ``name`` is the ``llm_model`` setting.

    Called from LLM threads of several units; an implementation may run one call at a time, so
    ``should_stop`` is the only way a cancelled response gives the model back quickly.
    """

    name: str

    def generate(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        should_stop: Callable[[], bool],
        on_text: Callable[[str], None],
    ) -> tuple[str, int]:
        """Generate a reply, calling ``on_text(piece)`` from the calling thread as text is decoded.

        ``should_stop`` is polled once per token; when it returns True generation ends early.
        Returns (the whole text generated, the number of tokens generated).
        """


class TextToSpeech(Protocol):
    """Synthesis for the TTS stage, called from TTS threads of several units at once.

    ``sample_rate`` is the voice's own rate (Piper joe: 22050 Hz); the stage resamples to the
    48 kHz of the WebRTC track. ``voice`` is the name reported to clients as the session's voice.
    """

    sample_rate: int  # Hz of the audio it yields
    voice: str

    def synthesize(self, text: str, speed: float = 1.0) -> Iterator[np.ndarray]:
        """Yield float32 mono audio (-1..1) for ``text``, one array per sentence, as soon as each is ready."""


@dataclass
class ModelSet:
    """The models of one process, shared by every PipelineUnit."""

    vad: VoiceActivityDetector
    stt: SpeechToText
    llm: LanguageModel
    tts: TextToSpeech
