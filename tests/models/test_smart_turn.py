"""Smart Turn v3.2 (the ONNX model in the pipecat-ai wheel): our feature extraction and the model's
judgement of real speech made by the bundled Piper voice."""

from __future__ import annotations

import importlib.metadata

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.models.backends import load_backend
from gateway.models.base import ModelNotFoundError
from gateway.models.piper_tts import PiperTextToSpeech
from gateway.models.smart_turn import (
    WINDOW_SAMPLES,
    SmartTurnDetector,
    bundled_model_path,
    log_mel_features,
    mel_filterbank,
)
from tests.models.speech_fixtures import load_tts, silence, speak


@pytest.fixture(scope="module")
def detector() -> SmartTurnDetector:
    return SmartTurnDetector()


@pytest.fixture(scope="module")
def tts() -> PiperTextToSpeech:
    return load_tts()


def test_features_have_the_shape_the_model_takes() -> None:
    audio = np.random.default_rng(1).normal(0, 0.1, 3 * 16000).astype(np.float32)
    features = log_mel_features(audio)
    assert features.shape == (80, 800) and features.dtype == np.float32
    assert features.max() <= 2.5 and features.min() >= features.max() - 2.0 - 1e-6  # (x+4)/4, clamped 8 below max


def test_only_the_last_8_s_count_and_short_turns_are_padded_before() -> None:
    rng = np.random.default_rng(2)
    turn = rng.normal(0, 0.1, WINDOW_SAMPLES).astype(np.float32)
    longer = np.concatenate([rng.normal(0, 0.3, 16000).astype(np.float32), turn])
    assert np.array_equal(log_mel_features(longer), log_mel_features(turn))
    short = turn[-16000:]
    padded = np.concatenate([np.zeros(WINDOW_SAMPLES - short.size, np.float32), short])
    assert np.array_equal(log_mel_features(short), log_mel_features(padded))


def test_mel_filters_match_whispers() -> None:
    """The Slaney filterbank written here equals faster-whisper's own (an independent implementation)."""
    from faster_whisper.feature_extractor import FeatureExtractor

    theirs = FeatureExtractor.get_mel_filters(16000, 400, n_mels=80)
    assert np.allclose(mel_filterbank(), theirs, atol=1e-7)


def test_model_file_comes_from_the_installed_wheel() -> None:
    path = bundled_model_path()
    assert path.name == "smart-turn-v3.2-cpu.onnx" and path.stat().st_size > 8_000_000


def test_missing_wheel_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps pipecat-ai"):
        bundled_model_path()


def test_turn_detector_setting() -> None:
    assert isinstance(load_backend("end_of_turn", GatewayConfig()), SmartTurnDetector)
    assert load_backend("end_of_turn", GatewayConfig(turn_detector="silence")) is None
    with pytest.raises(ValueError, match="turn_detector 'psychic' is not one of smart_turn, silence"):
        load_backend("end_of_turn", GatewayConfig(turn_detector="psychic"))


def test_finished_question_is_complete_and_a_trailing_phrase_is_not(
    detector: SmartTurnDetector, tts: PiperTextToSpeech
) -> None:
    pause = silence(0.2)  # what the VAD has heard when it asks
    finished = np.concatenate([silence(0.3), speak(tts, "What is the capital of France?"), pause])
    unfinished = np.concatenate([silence(0.3), speak(tts, "So I was thinking that maybe we could"), pause])
    complete = detector.end_of_turn_probability(finished)
    incomplete = detector.end_of_turn_probability(unfinished)
    assert complete > 0.7, complete
    assert incomplete < 0.3, incomplete


def test_silence_and_empty_input_do_not_fail(detector: SmartTurnDetector) -> None:
    for audio in (np.zeros(0, np.float32), silence(1.0), silence(12.0)):
        probability = detector.end_of_turn_probability(audio)
        assert 0.0 <= probability <= 1.0
