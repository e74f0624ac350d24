"""A lone call's reply: from the moment its first piece of text goes to TTS until that piece's audio
is made, the LLM takes no step (``CoreUse.holds_llm``), so the synthesis the caller waits for has
the cores; later pieces hold nothing; other calls' due work never waits; a cancelled reply lets go.
The real LLM stage, streaming a scripted reply (the test double below), with the real chunker."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from gateway.models.base import Generation
from gateway.models.compute import core_use
from gateway.models.compute.core_use import CORE_USE
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.llm import LlmStage
from gateway.pipeline.messages import ResponseRequest, TextChunk
from gateway.pipeline.queues import StageQueue

REPLY = ["Yes,", " of", " course.", " The", " museum", " opens", " at", " nine.", " Enjoy!"]


class ScriptedReplyLanguageModelDouble:
    """Streams ``REPLY`` word by word; after each word notes whether the LLM is held, and marks the
    reply's first audio as made (the TTS stage's part) after word ``audio_after``."""

    def __init__(self, latency: TurnLatency, audio_after: int) -> None:
        self.latency = latency
        self.audio_after = audio_after
        self.held: list[bool] = []

    def generate(
        self, messages: Any, max_tokens: int, should_stop: Any, on_text: Any, options: Any = None
    ) -> Generation:
        for index, word in enumerate(REPLY):
            on_text(word)
            if index == self.audio_after:
                self.latency.mark("tts_first_chunk", 1.0)
            self.held.append(CORE_USE.holds_llm)
        return Generation(text="".join(REPLY), tokens=len(REPLY))


class ContextDouble:
    """The unit as the LLM stage sees it: one generation current (``current``), events dropped."""

    call_id: Optional[str] = "rtc_test"

    def __init__(self) -> None:
        self.current = 1

    def is_current(self, generation: int) -> bool:
        return generation == self.current

    def notify(self, event: object) -> None:
        pass


def run_reply(audio_after: int, ctx: ContextDouble | None = None) -> tuple[list[bool], list[str]]:
    """The held flags after each word, and the pieces the stage sent to TTS."""
    latency = TurnLatency()
    llm = ScriptedReplyLanguageModelDouble(latency, audio_after)
    outbox = StageQueue()
    ctx = ctx or ContextDouble()
    stage = LlmStage(ctx, StageQueue(), outbox, llm)  # type: ignore[arg-type]
    stage.handle(ResponseRequest("rtc_test", generation=1, latency=latency))
    ctx.current += 1  # the reply is over: a hold whose audio never came lets go (no later test waits)
    pieces = []
    while len(outbox):
        message = outbox.get(timeout=0)
        if isinstance(message, TextChunk):
            pieces.append(message.text)
    return llm.held, pieces


def test_from_the_first_piece_to_its_audio_a_lone_calls_llm_is_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CORE_USE, "calls", 1)
    monkeypatch.setattr(core_use, "FIRST_AUDIO_HOLD_S", 60.0)
    held, pieces = run_reply(audio_after=5)
    assert pieces[0] == "Yes, of course." and len(pieces) >= 2
    first_out = 2  # "Yes, of course." leaves the chunker with its mark (" course.")
    assert held[:first_out] == [False] * first_out, "nothing held before the first piece"
    assert held[first_out:5] == [True, True, True], "held while its audio is awaited"
    assert not any(held[5:]), "let go once it is made; later pieces hold nothing"


def test_with_other_calls_connected_nothing_is_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CORE_USE, "calls", 2)
    monkeypatch.setattr(core_use, "FIRST_AUDIO_HOLD_S", 60.0)
    held, _pieces = run_reply(audio_after=len(REPLY))
    assert not any(held), "another caller's due LLM work never waits for this synthesis"
    monkeypatch.setattr(CORE_USE, "calls", 1)
    monkeypatch.setattr(core_use, "FIRST_AUDIO_HOLD_S", 0.0)
    held, _pieces = run_reply(audio_after=len(REPLY))
    assert not any(held), "nor past its limit"


def test_a_cancelled_reply_lets_go_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CORE_USE, "calls", 1)
    monkeypatch.setattr(core_use, "FIRST_AUDIO_HOLD_S", 60.0)
    ctx = ContextDouble()
    latency = TurnLatency()
    CORE_USE.await_first_audio(lambda: latency.tts_first_chunk is not None, lambda: ctx.is_current(1))
    assert CORE_USE.holds_llm
    ctx.current = 2  # cancelled (or a preemptive reply discarded): its synthesis may still run
    assert not CORE_USE.holds_llm


class RemoteTextToSpeechDouble:
    """A TTS engine as the chain sees one on a speech server (``openai_http``): it computes elsewhere."""

    computes_here = False


class LocalTextToSpeechDouble:
    """A TTS engine that computes in this process (Piper, Kokoro)."""


@pytest.mark.parametrize(("tts", "holds"), [(LocalTextToSpeechDouble(), True), (RemoteTextToSpeechDouble(), False)])
def test_the_chain_holds_the_llm_only_for_a_tts_that_computes_here(
    monkeypatch: pytest.MonkeyPatch, tts: object, holds: bool
) -> None:
    """The LLM stage as the unit's chain builds it: a speech server's first audio needs no core of
    this box, so the LLM is not held for it (before: held up to ``FIRST_AUDIO_HOLD_S`` all the same)."""
    from types import SimpleNamespace

    from gateway.pipeline.chain import _default_factories

    monkeypatch.setattr(CORE_USE, "calls", 1)
    monkeypatch.setattr(core_use, "FIRST_AUDIO_HOLD_S", 60.0)
    latency = TurnLatency()
    llm = ScriptedReplyLanguageModelDouble(latency, audio_after=5)
    ctx = ContextDouble()
    models = SimpleNamespace(llm=llm, tts=tts)
    stage = _default_factories()["llm"](ctx, StageQueue(), StageQueue(), models)  # type: ignore[arg-type]
    stage.handle(ResponseRequest("rtc_test", generation=1, latency=latency))
    ctx.current += 1
    assert any(llm.held) is holds
