"""A lone call's reply: its first audio is synthesized with the LLM's steps held
(``CoreUse.holds_llm``), so that the synthesis the caller waits for has the cores; later sentences,
and any synthesis while other calls are connected, are not held. The real bundled Piper voice
through the real TTS stage (no sampled noise)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from gateway.models.compute import core_use
from gateway.models.compute.core_use import CORE_USE
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.messages import TextChunk
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.tts import TtsStage
from tests.doubles import TtsContextDouble
from tests.models.speech_fixtures import load_tts


class HoldWatchingTtsDouble:
    """The real Piper voice, noting for each sentence whether the LLM was held while it was made."""

    def __init__(self) -> None:
        self._tts = load_tts()
        self.sample_rate = self._tts.sample_rate
        self.held: list[bool] = []

    def synthesize(self, text: str, speed: float = 1.0, voice: Any = None) -> Iterator[np.ndarray]:
        for audio in self._tts.synthesize(text, speed=speed):
            self.held.append(CORE_USE.holds_llm)  # still inside the computing of this sentence
            yield audio


def speak_two_pieces(tts: HoldWatchingTtsDouble) -> None:
    stage = TtsStage(TtsContextDouble(), StageQueue(), None, tts)  # type: ignore[arg-type]
    reply = TurnLatency()
    stage.handle(TextChunk("rtc_test", generation=1, text="And so my fellow Americans.", latency=reply))
    stage.handle(TextChunk("rtc_test", generation=1, text="Ask not.", latency=reply))


def test_a_lone_calls_first_reply_audio_holds_the_llm_and_later_sentences_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(CORE_USE, "calls", 1)
    tts = HoldWatchingTtsDouble()
    speak_two_pieces(tts)
    assert tts.held == [True, False]
    assert not CORE_USE.holds_llm, "let go once the first audio is made"


def test_with_other_calls_connected_nothing_is_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CORE_USE, "calls", 2)
    tts = HoldWatchingTtsDouble()
    speak_two_pieces(tts)
    assert tts.held == [False, False], "another caller's due LLM work never waits for this synthesis"


def test_the_hold_ends_at_its_limit_or_once_the_reply_is_not_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthesis cannot stop mid-sentence: a cancelled or discarded reply's (a preemptive reply
    the caller talked over) must not keep the next reply's prompt waiting, nor a slow one for long."""
    monkeypatch.setattr(CORE_USE, "calls", 1)
    monkeypatch.setattr(core_use, "FIRST_AUDIO_HOLD_S", 60.0)
    wanted = [True]
    with CORE_USE.first_audio(lambda: wanted[0]):
        assert CORE_USE.holds_llm
        wanted[0] = False
        assert not CORE_USE.holds_llm
    monkeypatch.setattr(core_use, "FIRST_AUDIO_HOLD_S", 0.0)
    with CORE_USE.first_audio():
        assert not CORE_USE.holds_llm
