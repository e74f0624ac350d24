"""Drafts of the caller's turn while the caller speaks (``gateway.pipeline.drafts``), VAD + STT
driven by hand with the doubles of ``test_end_of_turn`` (the STT double names the voiced segments it
was given: "one two" for two), and the session's answer to a draft: read the prompt, start no reply.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from gateway.models.compute import deadline
from gateway.models.compute.core_use import CORE_USE
from gateway.models.compute.deadline import DeadlineGate
from gateway.pipeline.drafts import DIP_DRAFT_WITHIN_MS, SpeakingDrafts
from gateway.pipeline.events import (
    SpeechResumed,
    SpeechStarted,
    SpeechStopped,
    TranscriptDrafted,
    TranscriptionCompleted,
)
from gateway.pipeline.messages import AudioIn, ClearInput, Utterance
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.stt import SttStage
from gateway.pipeline.turn import TurnDetection
from tests.doubles import (
    CALL,
    RATE,
    Chain,
    ContextDouble,
    EndOfTurnDouble,
    GradedVadStreamDouble,
    MeanwhileSttDouble,
    SttDouble,
    VadDouble,
)
from tests.helpers import wait_for
from tests.pipeline.test_end_of_turn import silence, tone
from tests.realtime.harness import SID, Harness, speech_started


def three_words(last_s: float = 0.6) -> np.ndarray:
    """Three 0.6 s "words" with 100 ms dips between them (shorter than the 120 ms pause that
    starts the pause's transcript), the last ``last_s`` long, then a second of silence."""
    gap = silence(0.1)
    return np.concatenate([silence(0.3), tone(0.6), gap, tone(0.6), gap, tone(last_s), silence(1.0)])


def drafted(chain: Chain, speaking: bool) -> list[str]:
    return [e.transcript for e in chain.ctx.of(TranscriptDrafted) if e.speaking is speaking]


def test_the_turn_is_drafted_in_its_dips_and_the_pause_takes_the_last_draft_as_its_transcript() -> None:
    chain = Chain(TurnDetection(), EndOfTurnDouble(0.9))  # the turn ends at the first check
    chain.play(three_words())

    # At the turn's start (no words yet: the prompt up to them), then at each dip while speaking.
    assert drafted(chain, speaking=True) == ["", "one", "one two", "one two three"]
    drafts = [u for u in chain.sent if u.speaking]
    (stopped,) = chain.ctx.of(SpeechStopped)
    assert all(u.audio.size * 1000 / RATE <= stopped.audio_end_ms + DIP_DRAFT_WITHIN_MS for u in drafts)
    (pause,) = [u for u in chain.sent if u.speculative and not u.speaking]
    assert pause.draft == drafts[-1].draft  # the draft cut in the pause stands for the turn so far
    assert drafted(chain, speaking=False) == ["one two three"]  # the pause's transcript, a reply may start
    assert [e.transcript for e in chain.ctx.of(TranscriptionCompleted)] == ["one two three"]
    assert chain.stt_model.calls == ["one", "one two", "one two three"]  # nothing transcribed twice
    stats = chain.stt.speculation.snapshot()
    assert stats["drafts"] == 3 and stats["from_drafts"] == 1 and stats["hits"] == 1, stats


def test_a_pause_too_soon_after_the_last_draft_is_transcribed_itself() -> None:
    chain = Chain(TurnDetection(), EndOfTurnDouble(0.9))
    chain.play(three_words(last_s=0.3))  # the last dip comes 0.4 s after the draft before it: none there

    assert drafted(chain, speaking=True) == ["", "one", "one two"]
    (pause,) = [u for u in chain.sent if u.speculative and not u.speaking]
    assert pause.draft == 0
    assert chain.stt_model.calls == ["one", "one two", "one two three"]  # the pause's own transcription
    assert [e.transcript for e in chain.ctx.of(TranscriptionCompleted)] == ["one two three"]
    assert chain.stt.speculation.snapshot()["from_drafts"] == 0


def test_speech_that_never_dips_is_drafted_every_two_seconds() -> None:
    chain = Chain(TurnDetection(), EndOfTurnDouble(0.9))
    chain.play(np.concatenate([silence(0.3), tone(4.5), silence(1.0)]))

    drafts = [u for u in chain.sent if u.speaking]
    # At 2 s and 4 s of the turn's audio (its prefix padding included), then at the final dip.
    assert [round(u.audio.size / RATE, 1) for u in drafts[:2]] == [2.0, 4.0]
    (pause,) = [u for u in chain.sent if u.speculative and not u.speaking]
    assert len(drafts) == 3 and drafts[-1].draft == pause.draft
    assert [e.transcript for e in chain.ctx.of(TranscriptionCompleted)] == ["one"]


def test_no_drafts_when_off_or_with_more_calls_than_the_cores_leave_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    off = Chain(TurnDetection(speaking_drafts=False), EndOfTurnDouble(0.9))
    off.play(three_words())
    assert not [u for u in off.sent if u.speaking] and off.stt_model.calls == ["one two three"]
    assert drafted(off, speaking=True) == []

    monkeypatch.setattr(CORE_USE, "calls", 3)
    busy = Chain(TurnDetection(), EndOfTurnDouble(0.9))
    busy.play(three_words())
    assert not [u for u in busy.sent if u.speaking] and busy.stt_model.calls == ["one two three"]
    assert drafted(busy, speaking=True) == []


def test_no_drafts_when_the_turn_starts_no_response() -> None:
    """A transcription session (``create_response`` off: no reply, so no prompt to read ahead) or a
    client that answers turns with its own ``response.create``: the turn is transcribed once, at
    its pause, as without drafts; no draft costs the shared speech models anything."""
    chain = Chain(TurnDetection(create_response=False), EndOfTurnDouble(0.9))
    chain.play(three_words())
    assert not [u for u in chain.sent if u.speaking] and drafted(chain, speaking=True) == []
    assert chain.stt_model.calls == ["one two three"]
    assert [e.transcript for e in chain.ctx.of(TranscriptionCompleted)] == ["one two three"]


def test_a_draft_that_waited_past_a_newer_one_is_skipped() -> None:
    drafts = SpeakingDrafts(RATE)
    first, voided_first = drafts.sent(RATE, dip=True)
    second, voided_second = drafts.sent(2 * RATE, dip=True)
    assert voided_first.is_set() and not voided_second.is_set() and second == first + 1
    assert drafts.take() == second  # it stands: the pause's transcript...
    drafts.void()
    assert not voided_second.is_set()  # ...which the turn's end no longer voids
    assert drafts.take() == 0


def test_a_draft_makes_the_session_read_the_prompt_but_start_no_reply() -> None:
    h = Harness()
    h.run(speech_started(0))
    for text in ("", "What is the"):  # the turn's start (no words yet), then a dip's draft
        assert h.run(lambda h, text=text: TranscriptDrafted(SID, transcript=text, speaking=True)) == []
    assert h.run(lambda h: TranscriptDrafted(SID, transcript="What is the capital of France?")) == []
    assert h.run(lambda h: TranscriptDrafted(SID, transcript="...")) == []  # a pause's breath: no words
    said = ["", "What is the", "What is the capital of France?"]
    assert [m[0][-1].content for m in h.pipeline.read_aheads] == said
    assert [m[0][-1].role for m in h.pipeline.read_aheads] == ["user"] * 3
    assert h.pipeline.read_ahead_replies == [False, False, True]


def test_a_pause_that_took_a_draft_but_the_caller_went_on_before_stt_came_to_it_starts_nothing() -> None:
    """The pause takes the draft still being transcribed; the caller speaks again before STT comes to
    the pause's message (its ``voided`` set): no pause transcript is drafted to the session (it would
    start a preemptive reply for a pause that is over), nothing is kept for the turn."""
    ctx = ContextDouble()
    model = SttDouble()
    stage = SttStage(ctx, StageQueue(), None, model)
    words = np.concatenate([silence(0.3), tone(0.6)])
    stage.handle(Utterance(CALL, audio=words, speculative=True, speaking=True, draft=1))
    went_on = threading.Event()
    went_on.set()
    stage.handle(Utterance(CALL, audio=words, speculative=True, speculation=1, draft=1, voided=went_on))
    assert [e.speaking for e in ctx.of(TranscriptDrafted)] == [True]  # the draft's own, not a pause's
    assert stage.speculation.snapshot()["from_drafts"] == 0
    longer = np.concatenate([words, silence(0.2), tone(0.6)])
    stage.handle(Utterance(CALL, audio=longer))  # the finished turn names no speculation: transcribed whole
    assert [e.transcript for e in ctx.of(TranscriptionCompleted)] == ["one two"]


def vad_hears(chain: Chain, audio: np.ndarray) -> None:
    """Feed ``audio`` to the VAD stage only (20 ms frames), as its thread does while STT is busy."""
    samples = (audio * 32767).astype(np.int16)
    for start in range(0, samples.size, 320):
        chain.clock += 0.02
        chain.vad.handle(AudioIn(CALL, samples=samples[start : start + 320], received_at=chain.clock))


def test_a_pause_whose_caller_went_on_while_stt_transcribed_it_drafts_nothing() -> None:
    """The caller speaks again while STT transcribes the pause's own transcript (Whisper takes
    0.2-0.5 s; the VAD voids it and reports SpeechResumed meanwhile): that transcript must not go to
    the session after the SpeechResumed, as a pause's (``speaking`` False) it would start a
    preemptive reply for a pause that is over, generating while the caller talks."""
    chain = Chain(
        TurnDetection(speaking_drafts=False),
        EndOfTurnDouble(0.9),
        stt=MeanwhileSttDouble(at=1, meanwhile=lambda: vad_hears(chain, tone(0.6))),
    )
    chain.play(np.concatenate([silence(0.3), tone(0.6), silence(1.0)]))

    kinds = [type(e) for e in chain.ctx.events if isinstance(e, (SpeechResumed, TranscriptDrafted))]
    assert kinds == [SpeechResumed, TranscriptDrafted]  # only the later pause's
    assert drafted(chain, speaking=False) == ["one two"]
    assert [e.transcript for e in chain.ctx.of(TranscriptionCompleted)] == ["one two"]
    stats = chain.stt.speculation.snapshot()
    assert stats["started"] == 2 and stats["discarded"] == 1 and stats["hits"] == 1, stats


def test_a_pause_voided_by_a_quiet_chunk_while_stt_transcribed_it_still_drafts_its_text() -> None:
    """A quiet chunk after the pause's cut (under the turn's threshold: the tail of jfk's "country.")
    voids the speculation, but the caller did not go on: its text still goes to the session (a reply
    made from it is adopted by the finished turn if that is heard the same, ~400 ms before the
    turn's own transcript), and the turn is transcribed whole. Speech after the quiet chunk would
    drop it (the test above)."""
    quiet = (0.004 * np.random.default_rng(3).standard_normal(int(0.064 * RATE))).astype(np.float32)
    chain = Chain(
        TurnDetection(speaking_drafts=False),
        EndOfTurnDouble(0.9),
        stt=MeanwhileSttDouble(at=1, meanwhile=lambda: vad_hears(chain, quiet)),
        vad=VadDouble(GradedVadStreamDouble),
    )
    chain.play(np.concatenate([silence(0.3), tone(0.6), silence(1.0)]))

    kinds = [type(e) for e in chain.ctx.events if isinstance(e, (SpeechResumed, TranscriptDrafted))]
    assert kinds == [SpeechResumed, TranscriptDrafted]  # the pause's text, after the quiet chunk
    assert drafted(chain, speaking=False) == ["one"]
    assert [e.transcript for e in chain.ctx.of(TranscriptionCompleted)] == ["one"]
    assert chain.stt_model.calls == ["one", "one"]  # the turn transcribed whole: the pause's did not stand


def test_a_draft_being_transcribed_when_the_client_clears_the_buffer_reaches_no_prompt() -> None:
    """``input_audio_buffer.clear`` while STT transcribes a draft (the VAD voids it): the cleared
    words are not drafted to the session (it would have the LLM read them into a prompt ahead); the
    caller's next turn is drafted and transcribed from its own audio only."""
    cleared_at: list[int] = []

    def clear() -> None:
        cleared_at.append(len(chain.ctx.events))
        chain.vad.handle(ClearInput(CALL))

    chain = Chain(TurnDetection(), EndOfTurnDouble(0.9), stt=MeanwhileSttDouble(at=1, meanwhile=clear))
    chain.play(three_words())

    after = chain.ctx.events[cleared_at[0] :]
    next_turn = next(i for i, e in enumerate(after) if isinstance(e, SpeechStarted))
    assert not [e for e in after[:next_turn] if isinstance(e, TranscriptDrafted)]
    assert chain.stt_model.calls[0] == "one"  # the cleared draft was transcribed (it had started)
    assert [e.transcript for e in chain.ctx.of(TranscriptionCompleted)] == ["one two"]


def test_a_draft_waiting_for_the_speech_models_is_due_once_the_turn_waits_behind_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A draft waits for the shared speech models with no deadline (speculative work); once the
    pause that takes it (or the finished turn) is queued behind it in STT, that work waits on the
    draft: the draft is due now, before another call's sentence due in 2 s, not after it (on two
    calls, the turn's transcript waited behind every due-ahead call of the speech models)."""
    gate = DeadlineGate(slots=1, poll_s=0.005)
    monkeypatch.setattr(deadline, "SPEECH_MODELS", gate)
    order: list[str] = []
    inbox = StageQueue()
    stage = SttStage(ContextDouble(), inbox, None, MeanwhileSttDouble(at=1, meanwhile=lambda: order.append("draft")))
    words = np.concatenate([silence(0.3), tone(0.6)])
    draft = Utterance(CALL, audio=words, speculative=True, speaking=True, draft=1)

    def other_call() -> None:  # another call's next sentence, due in 2 s
        with gate.slot(time.monotonic() + 2.0):
            order.append("other")

    with gate.slot(time.monotonic()):  # the speech models are busy when the draft comes
        threads = [threading.Thread(target=stage.handle, args=(draft,)), threading.Thread(target=other_call)]
        for thread in threads:
            thread.start()
        assert wait_for(lambda: gate.waiting == 2)
        inbox.put(Utterance(CALL, audio=words, speculative=True, speculation=1, draft=1))  # the pause takes it
    for thread in threads:
        thread.join(10)
    assert order == ["draft", "other"]
