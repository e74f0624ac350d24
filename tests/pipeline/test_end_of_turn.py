"""VAD + STT stages driven by hand (no threads): semantic end of turn, pause rules and speculative STT.

The doubles stand in for the models so that every pause is judged the same way each run: the VAD
double hears speech wherever the audio is loud, the end-of-turn double answers a fixed probability,
and the STT double names the voiced segments it was given ("one two" for two segments), so a
transcript shows exactly which audio it came from.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from gateway.pipeline import stt as stt_stage
from gateway.pipeline.events import InputCommitted, SpeechResumed, SpeechStopped, TranscriptionCompleted
from gateway.pipeline.messages import CommitInput
from gateway.pipeline.turn import EAGERNESS, SEMANTIC_CHECK_MS, TurnDetection, pause_rules
from tests.doubles import CALL, RATE, Chain, EndOfTurnDouble, GradedVadStreamDouble, VadDouble


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


def stopped_after_ms(chain: Chain, voiced_s: float) -> float:
    """Silence (ms) the VAD heard after speech before it ended the turn."""
    (stopped,) = chain.ctx.of(SpeechStopped)
    (committed,) = chain.ctx.of(InputCommitted)
    return committed.audio_ms - stopped.audio_end_ms if voiced_s else 0.0


def test_caller_who_pauses_and_goes_on_gets_one_transcript_of_the_whole_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    model = EndOfTurnDouble(0.3)  # "not finished": the 300 ms pause does not end the turn
    chain = Chain(TurnDetection(speaking_drafts=False), model)
    # The STT stage's clock advances only while the STT double transcribes: 0.25 s for the first
    # call, 0.5 s for the second, so the compute a discarded speculation wasted is known.
    now = [0.0]
    monkeypatch.setattr(stt_stage, "time", SimpleNamespace(monotonic=lambda: now[0]))
    transcribe = chain.stt_model.transcribe

    def timed(audio: np.ndarray, language: str = "en") -> str:
        now[0] += 0.25 * (len(chain.stt_model.calls) + 1)
        return transcribe(audio, language)

    monkeypatch.setattr(chain.stt_model, "transcribe", timed)
    chain.play(np.concatenate([silence(0.3), tone(1.0), silence(0.3), tone(1.0), silence(1.0)]))

    assert chain.transcripts() == ["one two"]  # one transcript, of the whole turn
    speculative = [u for u in chain.sent if u.speculative]
    assert len(speculative) == 2  # one per pause
    assert "one" in chain.stt_model.calls  # the part before the pause was transcribed...
    assert all(e.transcript != "one" for e in chain.ctx.of(TranscriptionCompleted))  # ...and never reported
    (final,) = [u for u in chain.sent if not u.speculative]
    assert final.speculation == speculative[-1].speculation  # the last pause's speculation stands
    stats = chain.stt.speculation.snapshot()
    assert stats["started"] == 2 and stats["hits"] == 1 and stats["discarded"] == 1
    assert stats["wasted_s"] == 0.25  # the discarded speculation's transcription, not the one used
    assert chain.stt_model.calls == ["one", "one two"]  # the finished turn cost no second transcription


def test_speech_after_the_speculation_voids_it() -> None:
    """A voiced chunk after the speculative snapshot voids it, even a 100 ms one: the transcript
    then comes from audio that includes it."""
    chain = Chain(TurnDetection(detector="silence", silence_duration_ms=500, speaking_drafts=False), None)
    chain.play(np.concatenate([silence(0.3), tone(1.0), silence(0.2), tone(0.1), silence(0.8)]))
    assert chain.transcripts() == ["one two"]
    first, second = [u.speculation for u in chain.sent if u.speculative]
    (final,) = [u for u in chain.sent if not u.speculative]
    assert final.speculation == second != first
    assert chain.stt.speculation.snapshot()["discarded"] == 1


def test_the_caller_going_on_voids_the_pause_draft_for_stt() -> None:
    """The pause's speculative utterance carries ``voided``, set when speech follows the pause (STT
    then skips it if it still waits for the speech models); the draft that stands is never set."""
    chain = Chain(TurnDetection(detector="silence", silence_duration_ms=500, speaking_drafts=False), None)
    chain.play(np.concatenate([silence(0.3), tone(1.0), silence(0.2), tone(0.5), silence(0.8)]))
    first, second = [u for u in chain.sent if u.speculative]
    assert first.voided is not None and first.voided.is_set()
    assert second.voided is not None and not second.voided.is_set()


def test_turn_cut_at_max_length_is_transcribed_whole() -> None:
    """No pause, no speculation: a turn cut by max_utterance_s is transcribed from its own audio."""
    chain = Chain(TurnDetection(max_utterance_s=1.0), EndOfTurnDouble(0.9))
    chain.play(np.concatenate([silence(0.3), tone(0.5), silence(0.15), tone(1.0)]))
    (final,) = [u for u in chain.sent if not u.speculative]
    assert final.speculation == 0
    assert chain.transcripts() == ["one two"]
    assert chain.stt_model.calls == ["one", "one two"]


def test_complete_turn_ends_at_the_first_check() -> None:
    model = EndOfTurnDouble(0.9)
    chain = Chain(TurnDetection(), model)
    chain.play(np.concatenate([silence(0.3), tone(1.2), silence(1.0)]))
    assert chain.transcripts() == ["one"]
    assert len(model.asked) == 1
    waited = stopped_after_ms(chain, 1.2)
    assert SEMANTIC_CHECK_MS <= waited < SEMANTIC_CHECK_MS + 40, waited  # ~192 ms, not 500
    assert chain.stt.speculation.snapshot()["hits"] == 1


def test_unfinished_turn_waits_the_configured_silence() -> None:
    chain = Chain(TurnDetection(silence_duration_ms=500), EndOfTurnDouble(0.3))
    chain.play(np.concatenate([silence(0.3), tone(1.0), silence(1.5)]))
    assert 500 <= stopped_after_ms(chain, 1.0) < 540


def test_mid_thought_waits_longer_but_bounded() -> None:
    chain = Chain(TurnDetection(silence_duration_ms=500), EndOfTurnDouble(0.02))
    chain.play(np.concatenate([silence(0.3), tone(1.0), silence(2.0)]))
    waited = stopped_after_ms(chain, 1.0)
    assert 800 <= waited < 840, waited


def test_client_server_vad_keeps_plain_silence() -> None:
    turn = TurnDetection().updated({"type": "server_vad", "silence_duration_ms": 400})
    model = EndOfTurnDouble(0.99)
    chain = Chain(turn, model)
    chain.play(np.concatenate([silence(0.3), tone(1.0), silence(1.0)]))
    assert model.asked == []
    assert 400 <= stopped_after_ms(chain, 1.0) < 440


def test_without_a_model_the_default_ends_by_silence() -> None:
    chain = Chain(TurnDetection(silence_duration_ms=500), None)
    chain.play(np.concatenate([silence(0.3), tone(1.0), silence(1.0)]))
    assert 500 <= stopped_after_ms(chain, 1.0) < 540
    assert chain.transcripts() == ["one"]


@pytest.mark.parametrize("eagerness", ["low", "medium", "high", "auto"])
def test_semantic_vad_eagerness_maps_onto_the_rules(eagerness: str) -> None:
    turn = TurnDetection().updated({"type": "semantic_vad", "eagerness": eagerness})
    rules = pause_rules(turn, semantic_model=True)
    complete_above, silence_ms, longest_ms = EAGERNESS[eagerness]
    assert (rules.complete_above, rules.silence_ms, rules.mid_thought_ms) == (complete_above, silence_ms, longest_ms)
    assert rules.check_ms is not None and rules.check_ms <= silence_ms
    assert rules.wait_ms(0.99) == rules.check_ms
    assert rules.wait_ms(0.02) == longest_ms
    eager = pause_rules(TurnDetection(kind="semantic_vad", eagerness="high"), True)
    patient = pause_rules(TurnDetection(kind="semantic_vad", eagerness="low"), True)
    assert eager.complete_above < patient.complete_above and eager.silence_ms < patient.silence_ms


def test_semantic_vad_with_eagerness_low_lets_the_caller_think() -> None:
    turn = TurnDetection().updated({"type": "semantic_vad", "eagerness": "low"})
    chain = Chain(turn, EndOfTurnDouble(0.6))  # complete for "medium", not for "low" (0.7)
    chain.play(np.concatenate([silence(0.3), tone(1.0), silence(0.7), tone(0.5), silence(1.5)]))
    assert chain.transcripts() == ["one two"]


def test_manual_turns_do_not_speculate() -> None:
    turn = TurnDetection().updated(None)
    chain = Chain(turn, EndOfTurnDouble(0.9))
    chain.play(np.concatenate([tone(0.5), silence(0.5), tone(0.5)]))
    assert chain.sent == []
    chain.handle_vad(CommitInput(CALL))
    assert chain.transcripts() == ["one two"]
    assert not any(u.speculative for u in chain.sent)


def test_speculation_can_be_switched_off() -> None:
    chain = Chain(TurnDetection(speculative_stt=False), EndOfTurnDouble(0.9))
    chain.play(np.concatenate([silence(0.3), tone(1.0), silence(0.5)]))
    assert chain.transcripts() == ["one"]
    assert not any(u.speculative for u in chain.sent)


def test_call_end_discards_a_kept_speculation() -> None:
    chain = Chain(TurnDetection(detector="silence", silence_duration_ms=800), None)
    chain.play(np.concatenate([silence(0.3), tone(1.0), silence(0.3)]))  # speculated, turn not over
    assert chain.transcripts() == []
    chain.stt.reset()  # what a CallEnd marker does as it passes the stage
    assert chain.stt.speculation.snapshot()["discarded"] == 1
    chain.vad.reset()
    chain.play(np.concatenate([tone(1.0), silence(1.0)]))
    assert chain.transcripts() == ["one"]
    assert chain.stt.speculation.snapshot()["hits"] == 1


def test_a_quiet_word_ending_after_the_speculative_cut_voids_the_speculation() -> None:
    """The speculation cut at the first short pause misses what follows it; if that is not
    silence (the quiet "s" of "France", under the turn's threshold), the turn is transcribed whole."""
    chain = Chain(
        TurnDetection(detector="silence", silence_duration_ms=500), None, vad=VadDouble(GradedVadStreamDouble)
    )
    rng = np.random.default_rng(1)
    loud = (0.3 * np.sin(np.arange(int(0.6 * RATE)) * 0.05)).astype(np.float32)
    quiet_tail = (0.004 * rng.standard_normal(int(0.1 * RATE))).astype(np.float32)
    gap = np.zeros(int(0.15 * RATE), np.float32)
    chain.play(np.concatenate([loud, gap, quiet_tail, np.zeros(int(0.8 * RATE), np.float32)]))
    speculative = [u for u in chain.sent if u.speculative]
    final = [u for u in chain.sent if not u.speculative]
    assert speculative, "a speculation was made at the pause"
    assert len(final) == 1 and final[0].speculation == 0, "the speculation missed the quiet tail: it must not stand"


def test_a_quiet_chunk_after_a_still_one_leaves_the_speculation_standing() -> None:
    """After the cut, a still chunk, then a quiet one (a breath or a click, not the tail of a word:
    jfk's "country." 0.06, 0.04, then 0.13 on the chunk that ended the turn): the pause's transcript
    stands for the turn, which is not transcribed again. Before, it was (~420 ms of Whisper after
    the turn's end, stop 48)."""
    chain = Chain(
        TurnDetection(detector="silence", silence_duration_ms=500), None, vad=VadDouble(GradedVadStreamDouble)
    )
    chunk = 512  # the VAD's chunk: each part below is whole chunks, so none mixes two levels
    loud = (0.3 * np.sin(np.arange(19 * chunk) * 0.05)).astype(np.float32)
    breath = (0.004 * np.random.default_rng(2).standard_normal(2 * chunk)).astype(np.float32)
    still = np.zeros(6 * chunk, np.float32)  # the cut at its 4th chunk (120 ms), then two still ones
    chain.play(np.concatenate([loud, still, breath, np.zeros(25 * chunk, np.float32)]))
    speculative = [u for u in chain.sent if u.speculative and not u.speaking]  # the pause's (no drafts)
    final = [u for u in chain.sent if not u.speculative]
    assert len(speculative) == 1 and len(final) == 1
    assert final[0].speculation == speculative[0].speculation, "the breath after a still chunk voided it"
    assert not chain.ctx.of(SpeechResumed)
    assert [e.transcript for e in chain.ctx.of(TranscriptionCompleted)] == ["one"]
    stats = chain.stt.speculation.snapshot()
    assert stats["started"] == 1 and stats["hits"] == 1, stats


def test_a_quiet_chunk_after_a_still_one_leaves_a_dip_draft_standing() -> None:
    """The same for a draft cut at the dip's first still chunk: a still chunk, then a quiet one,
    before the pause's speculation (120 ms): the draft still is the pause's transcript, so STT
    transcribes the turn once."""
    chain = Chain(
        TurnDetection(detector="silence", silence_duration_ms=500), None, vad=VadDouble(GradedVadStreamDouble)
    )
    chunk = 512
    loud = (0.3 * np.sin(np.arange(19 * chunk) * 0.05)).astype(np.float32)
    breath = (0.004 * np.random.default_rng(2).standard_normal(chunk)).astype(np.float32)
    still = np.zeros(2 * chunk, np.float32)  # the draft's cut at the first, the second still after it
    chain.play(np.concatenate([loud, still, breath, np.zeros(25 * chunk, np.float32)]))
    stats = chain.stt.speculation.snapshot()
    assert stats["drafts"] == 1 and stats["from_drafts"] == 1 and stats["hits"] == 1, stats
    assert [e.transcript for e in chain.ctx.of(TranscriptionCompleted)] == ["one"]
