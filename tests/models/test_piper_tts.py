"""Piper with and without its sampled noise: the voice's default noise makes every synthesis
differ; with both noise scales at 0 the same text is bit-identical audio, whatever was synthesized
before (test speech, tests/models/speech_fixtures.py)."""

from __future__ import annotations

import numpy as np

from gateway.config import GatewayConfig
from gateway.models.piper_tts import PiperTextToSpeech
from tests.models.speech_fixtures import load_tts

TEXT = "What is the capital of France?"


def synthesize(tts: PiperTextToSpeech, text: str = TEXT) -> np.ndarray:
    return np.concatenate(list(tts.synthesize(text)))


def test_without_noise_two_syntheses_are_bit_identical() -> None:
    first, second = load_tts(), load_tts()
    reference = synthesize(first)
    synthesize(first, "Something else first, to move the random generator on.")
    again = synthesize(first)
    other = synthesize(second)  # another voice instance: its own ONNX session
    assert reference.dtype == np.float32 and reference.size > first.sample_rate  # over a second of speech
    assert np.array_equal(reference, again) and np.array_equal(reference, other)


def test_the_default_keeps_the_voices_noise() -> None:
    tts = PiperTextToSpeech(GatewayConfig().tts_voice)
    assert tts.noise_scale is None and tts.noise_w_scale is None  # the voice's own (joe: 0.667, 0.8)
    first, second = synthesize(tts), synthesize(tts)
    assert first.size != second.size or not np.array_equal(first, second)


def test_a_synthesis_can_leave_the_llm_its_core() -> None:
    """ONNX Runtime's default session takes every core (intra-op threads 0); ``threads`` sets it."""
    tts = load_tts()
    assert tts._voice.session.get_session_options().intra_op_num_threads == 0
    one = PiperTextToSpeech(GatewayConfig().tts_voice, noise_scale=0.0, noise_w_scale=0.0, threads=1)
    assert one._voice.session.get_session_options().intra_op_num_threads == 1
    assert synthesize(one).size > one.sample_rate
