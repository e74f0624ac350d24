"""Real models for the model tests, loaded once per module and without the LLM: the bundled Piper
voice (speech made at test time), Whisper base and Smart Turn. 16 kHz float speech helpers.

Test speech is deterministic: the voice is loaded without Piper's sampled noise
(:func:`load_tts`), so a sentence is the same audio in every test, every run and every test order
(Piper's noise is drawn from ONNX Runtime's process-wide, clock-seeded RNG: with it, one draw in
~20 of "What is the capital of France?" is heard as "... of friends?")."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gateway.config import GatewayConfig
from gateway.media.resample import Resampler

if TYPE_CHECKING:
    from gateway.models.piper_tts import PiperTextToSpeech
    from gateway.models.whisper import WhisperSpeechToText

RATE = 16000


def load_tts() -> PiperTextToSpeech:
    """The bundled voice with no sampled noise: the same text is bit-identical audio every call."""
    from gateway.models.piper_tts import PiperTextToSpeech

    return PiperTextToSpeech(GatewayConfig().tts_voice, noise_scale=0.0, noise_w_scale=0.0)


def load_stt() -> WhisperSpeechToText:
    from gateway.models.whisper import WhisperSpeechToText

    config = GatewayConfig()
    return WhisperSpeechToText(config.stt_model, Path(config.model_cache_dir), threads=config.stt_threads)


def speak(tts: PiperTextToSpeech, text: str) -> np.ndarray:
    """``text`` spoken by the bundled voice: float32 mono 16 kHz, -1..1."""
    audio = np.concatenate(list(tts.synthesize(text)))
    resampler = Resampler(RATE)
    samples = np.concatenate([resampler.resample_array(audio, tts.sample_rate), resampler.flush()])
    return samples.astype(np.float32) / 32768.0


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)
