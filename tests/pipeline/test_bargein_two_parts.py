"""Barge-in speech in two parts under the reply ("Yeah... yeah.", "Wait, stop."): the VAD ends the
held turn at the pause between them (the semantic model says the first part is complete), and the
second part starts before the first was decided. It joins the held turn: one overlap, decided by
the words of both parts (gateway.pipeline.bargein), on the VAD and STT stages run by hand with
doubles."""

from __future__ import annotations

import numpy as np

from gateway.pipeline.bargein import Action, BargeInDecider, BargeInRules
from gateway.pipeline.events import BargeInDecided, InputCommitted, SpeechStarted, SpeechStopped, TranscriptionCompleted
from gateway.pipeline.turn import TurnDetection
from tests.doubles import RATE, Chain, EndOfTurnDouble, ScriptedSttDouble
from tests.pipeline.test_bargein_decision import chunks


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def quiet(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


def two_parts(text: str, first_s: float = 0.35, pause_s: float = 0.35, second_s: float = 0.35) -> Chain:
    """``text`` said under the reply as two parts with a pause between them that ends the turn
    (Smart Turn says complete at ~192 ms of it). STT is slow: the answer to the probe of the first
    part comes back 150 ms into the second part (a busy machine; in real calls ~544 ms after the
    onset)."""
    chain = Chain(TurnDetection(), EndOfTurnDouble(0.9), stt=ScriptedSttDouble(text))
    chain.ctx.playing = True
    chain.answered_probes = 0  # every answer waits until deliver_late
    chain.play(quiet(0.3))
    chain.play(tone(first_s))
    chain.play(quiet(pause_s))
    chain.play(tone(second_s)[: int(0.15 * RATE)])
    chain.deliver_late()
    chain.answered_probes = None  # from here on STT keeps up
    chain.play(tone(second_s)[int(0.15 * RATE) :])
    chain.play(quiet(1.5))
    return chain


def test_a_two_part_backchannel_keeps_the_answer() -> None:
    # Before, the second part's start released the held first part as an interruption with no words
    # known (decided "interrupted", transcript "", ~544 ms after the onset in loaded real calls): a
    # "Yeah... yeah." cut the answer.
    chain = two_parts("Yeah, yeah.")
    assert chain.vad.semantic_complete >= 1, "the pause did not end the held turn: nothing tested"
    assert not chain.ctx.of(SpeechStarted), [(d.decision, d.transcript) for d in chain.ctx.of(BargeInDecided)]
    assert not chain.ctx.of(SpeechStopped) and not chain.ctx.of(InputCommitted)
    assert not chain.ctx.of(TranscriptionCompleted)
    decided = chain.ctx.of(BargeInDecided)
    assert decided and {d.decision for d in decided} == {"resumed"}
    assert not chain.ctx.paused and chain.vad.backchannels == 1
    # The last probe heard both parts: one overlap.
    probe = [u for u in chain.sent if u.probe][-1]
    assert probe.audio.size >= int((0.35 + 0.35 + 0.35) * RATE)


def test_a_two_part_interruption_is_decided_by_its_words_and_reported_as_one_turn() -> None:
    chain = two_parts("Wait, stop.")
    [started] = chain.ctx.of(SpeechStarted)
    assert 250 <= started.audio_start_ms <= 320  # the first part's onset
    [decided] = chain.ctx.of(BargeInDecided)
    assert decided.decision == "interrupted" and decided.transcript == "Wait, stop."
    # One turn, both parts in it: one speech_stopped, one commit, one transcript of all of it.
    assert len(chain.ctx.of(SpeechStopped)) == 1 and len(chain.ctx.of(InputCommitted)) == 1
    assert chain.transcripts() == ["Wait, stop."]
    assert chain.stt_model.calls[-1] >= int((0.35 + 0.35 + 0.35) * RATE)


def test_the_pause_between_two_parts_is_not_speech_for_the_length_rule() -> None:
    # Two parts of 0.8 s and more with 0.6 s between them: the length rule (max_backchannel_ms)
    # counts the speech of the parts, not the pause between them.
    decider = BargeInDecider(RATE)
    decider.begin(0, BargeInRules(max_backchannel_ms=1700))
    voiced = [True] * 25  # 800 ms
    assert Action.INTERRUPT not in chunks(decider, 0, voiced)
    decider.probe_sent(1, 512 * 25)
    assert decider.turn_ended() is Action.NONE  # its answer is awaited
    onset = 512 * (25 + 19)  # after a 608 ms pause
    decider.goes_on(onset)
    assert not decider.ended
    assert Action.INTERRUPT not in chunks(decider, onset, voiced)  # 1.6 s of speech, 2.2 s from the onset
    assert Action.INTERRUPT in chunks(decider, onset + 512 * 25, [True] * 4)  # past 1.7 s of speech


def one_held_turn(text: str, first_s: float, pause_s: float, second_s: float) -> Chain:
    """``text`` said under the reply as two parts with a pause between them that does NOT end the
    turn (the semantic model says the first part is not complete: the turn waits past the pause)."""
    chain = Chain(TurnDetection(), EndOfTurnDouble(0.1), stt=ScriptedSttDouble(text))
    chain.ctx.playing = True
    chain.play(quiet(0.3))
    chain.play(tone(first_s))
    chain.play(quiet(pause_s))
    chain.play(tone(second_s))
    chain.play(quiet(1.5))
    return chain


def test_a_pause_inside_one_held_turn_is_not_speech_for_the_length_rule() -> None:
    # "Okay." 400 ms "okay.": 1.4 s of speech, 1.8 s from its onset, one held turn (no join). Before
    # (h41), the length rule counted the pause: decided "interrupted" 1.5 s after the onset, the
    # words ("Okay, okay.") a backchannel.
    chain = one_held_turn("Okay, okay.", first_s=0.7, pause_s=0.4, second_s=0.7)
    assert chain.vad.joined_parts == 0 and chain.vad.semantic_checks >= 1, "not one held turn: nothing tested"
    assert not chain.ctx.of(SpeechStarted), [(d.decision, d.transcript) for d in chain.ctx.of(BargeInDecided)]
    assert not chain.ctx.of(InputCommitted) and not chain.ctx.of(TranscriptionCompleted)
    assert {d.decision for d in chain.ctx.of(BargeInDecided)} == {"resumed"}
    assert not chain.ctx.paused and chain.vad.backchannels == 1


def test_speech_past_the_length_bound_with_pauses_inside_still_interrupts() -> None:
    # 0.9 s, a 400 ms pause, 0.9 s: 1.8 s of speech; the length rule cancels once 1.5 s of it was
    # said (the pause later than 1.5 s from the onset), whatever its words.
    chain = one_held_turn("Okay, okay.", first_s=0.9, pause_s=0.4, second_s=0.9)
    [decided] = chain.ctx.of(BargeInDecided)[-1:]
    assert decided.decision == "interrupted" and chain.ctx.of(SpeechStarted)
    assert 1500 + 350 <= decided.decided_ms - decided.audio_start_ms < 1500 + 400 + 64


def test_the_length_rule_counts_voiced_chunks_and_short_dips_not_pauses() -> None:
    decider = BargeInDecider(RATE)
    decider.begin(0, BargeInRules(max_backchannel_ms=1000))
    # 320 ms, a 64 ms dip (speech), 320 ms, a 320 ms pause (no speech), 320 ms: 1024 ms of speech.
    voiced = [True] * 10 + [False] * 2 + [True] * 10 + [False] * 10 + [True] * 10
    actions = chunks(decider, 0, voiced)
    assert Action.INTERRUPT not in actions[:-1] and actions[-1] is Action.INTERRUPT
