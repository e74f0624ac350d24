"""Load the process's models once, from the configuration."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from gateway.config import GatewayConfig
from gateway.models.base import ModelSet

log = logging.getLogger(__name__)


def load_models(config: GatewayConfig) -> ModelSet:
    """Load VAD, STT, LLM and TTS as the config names them. Raises ModelNotFoundError (with what to
    install) when weights are missing; never downloads unless a hub is configured."""
    # No hub configured: fail fast with our own message instead of hanging on a connect timeout.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gateway.models.piper_tts import PiperTextToSpeech
    from gateway.models.silero import SileroVad
    from gateway.models.transformers_llm import TransformersLanguageModel
    from gateway.models.whisper import WhisperSpeechToText

    cache = Path(config.model_cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    threads = config.torch_threads or (os.cpu_count() or 1)
    started = time.monotonic()
    vad = SileroVad()
    stt = WhisperSpeechToText(config.stt_model, cache, threads=config.stt_threads)
    llm = TransformersLanguageModel(config.llm_model, cache, threads=threads)
    tts = PiperTextToSpeech(config.tts_voice)
    log.info("models loaded in %.1f s", time.monotonic() - started)
    return ModelSet(vad=vad, stt=stt, llm=llm, tts=tts)
