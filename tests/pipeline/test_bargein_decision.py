"""Barge-in decided by words (gateway.pipeline.bargein), on the VAD and STT stages run by hand with
doubles: a backchannel under the reply's audio pauses it and is dropped; other words interrupt."""

from __future__ import annotations

import numpy as np

from gateway.models.base import HeardWord, ScoredTranscript
from gateway.pipeline.backchannels import SHAPE_MAX_MS, interrupting_words
from gateway.pipeline.bargein import (
    LONG_SPEECH_MS,
    PROBE_PAUSE_MS,
    PROBE_PREFIX_MS,
    STARVED_TIMEOUTS,
    Action,
    BargeInDecider,
    BargeInRules,
)
from gateway.pipeline.events import BargeInDecided, InputCommitted, SpeechStarted, TranscriptionCompleted
from gateway.pipeline.turn import TurnDetection
from tests.doubles import RATE, Chain, ScoredSttDouble, ScriptedSttDouble, UntrustedSttDouble


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def quiet(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


def chain_under_reply(text: str, **turn: object) -> Chain:
    chain = Chain(TurnDetection(detector="silence", **turn), None, stt=ScriptedSttDouble(text))  # type: ignore[arg-type]
    chain.ctx.playing = True
    return chain


def test_backchannel_words_are_not_interrupting() -> None:
    assert interrupting_words("Yeah.") == []
    assert interrupting_words("Mm-hmm, okay, I see.") == []
    assert interrupting_words("(coughs)") == []
    assert interrupting_words("[Music]") == []
    assert interrupting_words("") == []
    assert interrupting_words("Uh huh, got it.") == []
    assert interrupting_words("Wait, stop.") == ["wait", "stop"]
    assert interrupting_words("Yeah, but what about Paris?") == ["but", "what", "about", "paris"]
    assert interrupting_words("No.") == ["no"]


def test_backchannel_under_the_reply_pauses_it_then_resumes_and_is_no_turn() -> None:
    chain = chain_under_reply("Yeah.")
    chain.play(quiet(0.3))
    chain.play(tone(0.3)[: int(0.15 * RATE)])
    assert chain.ctx.paused, "speech under the reply did not pause it"
    chain.play(tone(0.3)[int(0.15 * RATE) :])
    chain.play(quiet(1.0))
    assert not chain.ctx.paused
    assert not chain.ctx.of(SpeechStarted)
    assert not chain.ctx.of(InputCommitted)
    assert not chain.ctx.of(TranscriptionCompleted)
    [decided] = chain.ctx.of(BargeInDecided)
    assert decided.decision == "resumed" and decided.transcript == "Yeah."
    assert chain.vad.backchannels == 1


def test_words_under_the_reply_interrupt_it_and_the_turn_is_reported_whole() -> None:
    chain = chain_under_reply("Wait, stop.")
    chain.play(quiet(0.3))
    chain.play(tone(0.4))
    chain.play(quiet(1.0))
    [started] = chain.ctx.of(SpeechStarted)
    assert 250 <= started.audio_start_ms <= 320  # where the speech began, not when it was decided
    [decided] = chain.ctx.of(BargeInDecided)
    assert decided.decision == "interrupted"
    assert chain.ctx.events.index(started) < chain.ctx.events.index(decided)
    # Decided while the caller still spoke (a probe of the first 200 ms), not at its end (700 ms).
    assert decided.decided_ms < 700
    # The probe heard part of the speech: the turn is transcribed once more, whole.
    assert [e.transcript for e in chain.ctx.of(TranscriptionCompleted)] == ["Wait, stop."]
    assert chain.stt_model.calls[-1] >= int(0.4 * RATE)


def test_long_speech_interrupts_without_waiting_for_its_words() -> None:
    chain = chain_under_reply("Yeah.")  # whatever STT says, speech this long is no backchannel
    chain.play(quiet(0.3))
    chain.play(tone(2.0))
    [decided] = chain.ctx.of(BargeInDecided)
    assert decided.decision == "interrupted"
    assert 1500 <= decided.decided_ms - decided.audio_start_ms < 1500 + 64
    assert chain.ctx.of(SpeechStarted)


def test_zero_words_setting_interrupts_at_once_without_pausing() -> None:
    chain = chain_under_reply("Yeah.", min_interruption_words=0)
    chain.play(quiet(0.3))
    chain.play(tone(0.15))
    assert chain.ctx.of(SpeechStarted) and not chain.ctx.paused and not chain.ctx.of(BargeInDecided)


def test_speech_with_no_reply_playing_is_an_ordinary_turn() -> None:
    chain = chain_under_reply("Yeah.")
    chain.ctx.playing = False
    chain.play(quiet(0.3))
    chain.play(tone(0.3))
    chain.play(quiet(1.0))
    assert chain.ctx.of(SpeechStarted) and not chain.ctx.of(BargeInDecided)
    assert [e.transcript for e in chain.ctx.of(TranscriptionCompleted)] == ["Yeah."]


def test_echo_of_the_reply_starts_no_turn_but_a_voice_does() -> None:
    chain = chain_under_reply("Wait, stop.")
    chain.ctx.echo = 0.9
    chain.play(quiet(0.3))
    chain.play(tone(1.0))
    chain.play(quiet(1.0))
    assert not chain.ctx.of(SpeechStarted) and not chain.ctx.paused and chain.vad.echo_rejections > 0
    chain.ctx.echo = 0.2
    chain.play(tone(0.4))
    chain.play(quiet(1.0))
    assert chain.ctx.of(SpeechStarted)


def chunks(decider: BargeInDecider, start: int, voiced: list[bool]) -> list[Action]:
    """Feed 32 ms chunks after ``start``; the silence count restarts at each voiced chunk."""
    actions, silence, position = [], 0, start
    for is_voiced in voiced:
        position += 512
        silence = 0 if is_voiced else silence + 512
        actions.append(decider.on_chunk(position, is_voiced, silence))
    return actions


def test_no_words_in_time_resumes_and_late_words_still_interrupt() -> None:
    decider = BargeInDecider(RATE)
    decider.begin(0, BargeInRules(false_interruption_timeout_ms=500))
    actions = chunks(decider, 0, [True] * 6 + [False] * 20)
    probe_at = actions.index(Action.PROBE)
    assert (probe_at - 5) * 32 >= PROBE_PAUSE_MS
    decider.probe_sent(1, 512 * (probe_at + 1))
    assert Action.RESUME in actions[probe_at:]  # STT never answered by 500 ms
    assert decider.heard(1, "No.") is Action.INTERRUPT


def test_speech_again_after_a_resume_pauses_the_reply_again() -> None:
    decider = BargeInDecider(RATE)
    decider.begin(0, BargeInRules())
    actions = chunks(decider, 0, [True] * 5 + [False] * 3)
    assert actions[-1] is Action.PROBE
    decider.probe_sent(1, 512 * 8)
    assert decider.heard(1, "Okay") is Action.RESUME
    assert chunks(decider, 512 * 8, [True])[0] is Action.REPAUSE
    assert decider.heard(1, "Okay") is Action.NONE  # an old probe's answer


def ended_turn(decider: BargeInDecider, voiced_chunks: int = 20) -> None:
    """A held turn of ``voiced_chunks`` 32 ms chunks, paused, probed whole as probe 1."""
    decider.begin(0, BargeInRules())
    chunks(decider, 0, [True] * voiced_chunks + [False] * 3)
    decider.probe_sent(1, 512 * (voiced_chunks + 3))


def test_unsure_words_that_are_no_backchannel_never_resume_the_answer() -> None:
    # "Wait, stop." said over the assistant's echo: Whisper heard "Wait" at p 0.35 and "stop" at
    # 0.3. Before, unsure words counted as nothing and the answer resumed: a real interruption
    # ignored.
    decider = BargeInDecider(RATE)
    ended_turn(decider)
    assert decider.heard(1, "Wait, stop.", (HeardWord("Wait", 0.35), HeardWord("stop", 0.3))) is Action.INTERRUPT


def test_a_probe_whisper_does_not_trust_decides_nothing() -> None:
    # "Mhm, right." decoded as a loop ("Image Image Image ..."), marked untrusted by the STT: its
    # sure words used to interrupt; now the next probe, the length or the timeout decides.
    decider = BargeInDecider(RATE)
    ended_turn(decider)
    loop = tuple(HeardWord("Image", 0.8) for _ in range(8))
    assert decider.heard(1, " ".join(w.text for w in loop), loop, trusted=False) is Action.NONE
    assert decider.turn_ended() is Action.NONE
    position, actions = 512 * 23, []
    for _ in range(20):
        position += 512
        actions.append(decider.on_chunk(position, False, 0))
    assert Action.INTERRUPT not in actions and Action.RESUME in actions  # the 1 s timeout


def test_few_short_words_off_the_list_are_a_backchannel_but_a_cue_or_a_question_is_not() -> None:
    # Backchannels Whisper spells as other words it is fairly sure of ("Oh, I see" -> "Always").
    decider = BargeInDecider(RATE)
    ended_turn(decider)
    assert decider.heard(1, "Always.", (HeardWord("Always", 0.7),)) is Action.NONE  # at a pause: wait
    assert decider.turn_ended() is Action.RESUME
    for heard in ("Paris?", "Stop please.", "Go forward ten meters.", "Hold on."):
        decider = BargeInDecider(RATE)
        ended_turn(decider)
        assert decider.heard(1, heard) is Action.INTERRUPT, heard
    decider = BargeInDecider(RATE)
    ended_turn(decider, voiced_chunks=SHAPE_MAX_MS // 32 + 2)  # longer than a backchannel
    assert decider.heard(1, "Always.", (HeardWord("Always", 0.7),)) is Action.INTERRUPT


def test_a_looping_probe_under_the_reply_interrupts_nothing_and_the_timeout_resumes() -> None:
    # The decode looped ("Image Image ..." for "Mhm, right."): the STT marks it untrusted and the
    # VAD stage gets that mark. Before, its sure words interrupted the answer.
    chain = Chain(TurnDetection(detector="silence"), None, stt=UntrustedSttDouble("Image " * 8))
    chain.ctx.playing = True
    chain.play(quiet(0.3))
    chain.play(tone(0.5))
    chain.play(quiet(1.5))
    assert not chain.ctx.of(SpeechStarted)
    [decided] = chain.ctx.of(BargeInDecided)
    assert decided.decision == "resumed" and not chain.ctx.paused


def test_words_of_a_backchannels_shape_at_a_pause_resume_only_once_the_turn_ended() -> None:
    # "Wait, can you repeat that?": at the comma Whisper heard "Wait" unsure (0.37, as it hears
    # "Right." in some voices: a backchannel's shape). Before, the answer resumed there, and the
    # caller went on talking over it. (The first case was "Hold on," with "Hold" at 0.45: a command
    # word, which now interrupts at once.)
    wait = (HeardWord("Wait", 0.37),)
    decider = BargeInDecider(RATE)
    decider.begin(0, BargeInRules())
    chunks(decider, 0, [True] * 14 + [False] * 3)
    decider.probe_sent(1, 512 * 17)
    assert decider.heard(1, "Wait,", wait) is Action.NONE
    assert decider.paused and Action.RESUME not in chunks(decider, 512 * 17, [False] * 30)
    assert decider.turn_ended() is Action.RESUME  # nothing more was said: a backchannel after all
    decider = BargeInDecider(RATE)
    decider.begin(0, BargeInRules())
    assert decider.heard(0, "") is Action.NONE
    decider.begin(0, BargeInRules())
    chunks(decider, 0, [True] * 14 + [False] * 3)
    decider.probe_sent(1, 512 * 17)
    assert decider.heard(1, "Wait,", wait) is Action.NONE
    chunks(decider, 512 * 17, [True] * 10 + [False] * 3)
    decider.probe_sent(2, 512 * 30)
    heard = (*wait, HeardWord("can", 0.9), HeardWord("you", 0.9), HeardWord("repeat", 0.8))
    assert decider.heard(2, "Wait, can you repeat", heard) is Action.INTERRUPT


def test_the_replys_own_words_echoed_under_the_callers_are_not_the_callers() -> None:
    # A leg without echo cancellation (a speakerphone): the probes hear the assistant's story under
    # the caller's "Yeah." ("Yeah, the dragon will", the echo's "the dragon will" played just before).
    # Before, the echo's words were taken for the caller's ("will" a cue word): the answer was cut
    # by its own echo.
    chain = chain_under_reply("Yeah, the dragon will")
    chain.play(quiet(0.3))
    chain.ctx.played = [(chain.clock - 1.0 + 0.2 * i, word) for i, word in enumerate("the little dragon will".split())]
    chain.play(tone(0.3))
    chain.play(quiet(1.0))
    assert not chain.ctx.of(SpeechStarted)
    [decided] = chain.ctx.of(BargeInDecided)
    assert decided.decision == "resumed"
    # Words the reply played long before the speech (not in its echo) are the caller's: "Wait" interrupts.
    chain = chain_under_reply("Wait, the dragon")
    chain.ctx.played = [(0.0, "Wait"), (0.1, "the"), (0.2, "dragon")]
    chain.play(quiet(5.0))
    chain.play(tone(0.3))
    chain.play(quiet(1.0))
    assert chain.ctx.of(SpeechStarted)
    [decided] = chain.ctx.of(BargeInDecided)
    assert decided.decision == "interrupted"


def test_a_probe_holds_only_the_start_of_an_echoed_prefix() -> None:
    # Before the caller's onset, under the reply, lies the reply's own echo on a leg without echo
    # cancellation: with the turn's whole prefix of it (288 ms) in every probe, Whisper wrote "your"
    # (or the echo's "Fear", "Fearless") for the caller's clear "Wait, stop." and the answer resumed
    # (tests/pool/test_bargein_words.py; the same audio with 100 ms of it: "Wait, stop."). Before,
    # a probe held all of it. The turn itself keeps its whole prefix, and so does a probe whose
    # prefix is no echo (cut, soft onsets went: "Sorry" heard "Soak").
    for echo, prefix_ms in ((0.9, PROBE_PREFIX_MS), (0.0, 288)):
        chain = chain_under_reply("Wait, stop.", prefix_padding_ms=300, echo_guard=False)
        chain.ctx.echo = echo  # what echo_share answers: the prefix is (or is not) the reply's echo
        chain.play(quiet(1.0))
        chain.play(tone(0.4))
        chain.play(quiet(1.0))
        [decided] = chain.ctx.of(BargeInDecided)
        assert decided.decision == "interrupted"
        probe, turn = chain.sent[0], chain.sent[-1]
        assert probe.probe and not turn.speculative
        speech_ms = probe.audio.size * 1000 / RATE - prefix_ms
        assert 200 <= speech_ms <= 240, (echo, speech_ms)  # the first probe: its onset, ~200 ms of speech after it
        assert turn.audio.size * 1000 / RATE >= 288 + 400  # the turn: its whole prefix and the speech


def starved_chain(stt: object, answered_probes: int) -> Chain:
    """A chain under the reply whose STT is starved: probes after the first ``answered_probes`` are
    answered only when the test calls ``deliver_late`` (a machine too busy to transcribe in time)."""
    chain = Chain(TurnDetection(detector="silence"), None, stt=stt)
    chain.ctx.playing = True
    chain.answered_probes = answered_probes
    return chain


def test_a_starved_probe_never_drops_an_interruption_its_late_words_stop_the_answer() -> None:
    # "Stop, stop." under load: no probe answer within the in-flight timeout (3 s). Before, the
    # answer resumed there and the held turn was dropped: the late "Stop, stop." was ignored and
    # the caller talked over. Now the reply plays on (nothing known says stop), the turn stays
    # held, and the late words stop the answer.
    chain = starved_chain(ScriptedSttDouble("Stop, stop."), answered_probes=0)
    chain.play(quiet(0.3))
    chain.play(tone(0.9))
    chain.play(quiet(3.5))
    assert chain.late and not chain.ctx.paused  # resumed at the timeout: no words known
    assert [d.decision for d in chain.ctx.of(BargeInDecided)] == ["resumed"]
    chain.deliver_late()
    assert [d.decision for d in chain.ctx.of(BargeInDecided)] == ["resumed", "interrupted"]
    [started] = chain.ctx.of(SpeechStarted)
    assert 250 <= started.audio_start_ms <= 320
    assert chain.transcripts() == ["Stop, stop."]
    assert chain.vad.backchannels == 0


def test_a_starved_probe_decides_by_the_words_already_heard() -> None:
    # The first probe heard "Wait" unsure (0.45: not enough while the caller still spoke); every
    # later one is starved. Before, the in-flight timeout resumed the answer over it. Now the words
    # known, the speech over, decide at that timeout: an unsure cue over 600 ms of speech stops it.
    unsure = ScoredTranscript("Wait", (HeardWord("Wait", 0.45),))
    chain = starved_chain(ScoredSttDouble(unsure, ScoredTranscript("Wait, stop.")), answered_probes=1)
    chain.play(quiet(0.3))
    chain.play(tone(0.9))
    chain.play(quiet(3.5))
    [decided] = chain.ctx.of(BargeInDecided)
    assert decided.decision == "interrupted" and decided.transcript == "Wait"
    waited = decided.decided_ms - decided.audio_start_ms
    assert STARVED_TIMEOUTS * 1000 <= waited < STARVED_TIMEOUTS * 1000 + 64
    assert chain.ctx.of(SpeechStarted)
    # A backchannel heard so far still resumes it, and is dropped once its late answer agrees.
    chain = starved_chain(ScoredSttDouble(ScoredTranscript("Yeah"), ScoredTranscript("Yeah.")), answered_probes=1)
    chain.play(quiet(0.3))
    chain.play(tone(0.5))
    chain.play(quiet(3.5))
    assert [d.decision for d in chain.ctx.of(BargeInDecided)] == ["resumed"] and not chain.ctx.paused
    chain.deliver_late()
    chain.play(quiet(0.1))
    assert not chain.ctx.of(SpeechStarted) and chain.vad.backchannels == 1


def test_a_timeout_never_resumes_over_long_voiced_speech() -> None:
    # A client that allows long backchannels (max_backchannel_ms 3000): 1.6 s of speech whose probes
    # are starved. Before, the in-flight timeout resumed the answer over it; the issue allows length
    # alone to cancel past ~1.5 s of speech, and a timeout now never resumes over that.
    decider = BargeInDecider(RATE)
    decider.begin(0, BargeInRules(max_backchannel_ms=3000))
    actions = chunks(decider, 0, [True] * (LONG_SPEECH_MS // 32 + 3))
    decider.probe_sent(1, 512 * 8)  # its answer never comes in time
    assert Action.INTERRUPT not in actions
    actions = chunks(decider, 512 * len(actions), [False] * 60)
    assert Action.INTERRUPT in actions and Action.RESUME not in actions


def test_a_resumed_turn_whose_last_probe_was_not_trusted_is_dropped_once_it_ended() -> None:
    # Resumed at the timeout in a pause, then ended, its last probe untrusted: before, it stayed
    # held (no decision could come), and the caller's next words released it as an interruption.
    decider = BargeInDecider(RATE)
    decider.begin(0, BargeInRules(false_interruption_timeout_ms=500))
    chunks(decider, 0, [True] * 10)
    decider.probe_sent(1, 512 * 10)
    actions = chunks(decider, 512 * 10, [False] * 10)
    assert Action.RESUME not in actions  # its answer is awaited (starved, not yet 3 timeouts)
    assert decider.heard(1, "Image " * 8, trusted=False) is Action.NONE
    actions = chunks(decider, 512 * 20, [False] * 2)
    assert Action.RESUME in actions  # the timeout, no answer awaited any more
    assert decider.held and decider.turn_ended() is Action.NONE
    assert chunks(decider, 512 * 22, [False])[0] is Action.RESUME  # dropped: ended, nothing awaited


def test_an_unsure_stop_interrupts_at_the_first_probe_while_the_caller_still_speaks() -> None:
    # "Stop, that's enough." in a voice Whisper knows badly: the first probe heard "Stop" at 0.45.
    # Before, a cue needed 0.5 while the caller spoke: the answer stayed paused until a later probe
    # ("Stop" 0.78, 838 ms after the onset offline); now a command word counts from COMMAND_SURE.
    first = ScoredTranscript("Stop", (HeardWord("Stop", 0.45),))
    later = ScoredTranscript("Stop, that's", (HeardWord("Stop", 0.45), HeardWord("that's", 0.3)))
    chain = Chain(TurnDetection(detector="silence"), None, stt=ScoredSttDouble(first, later))
    chain.ctx.playing = True
    chain.play(quiet(0.3))
    chain.play(tone(1.0))
    chain.play(quiet(1.0))
    [decided] = chain.ctx.of(BargeInDecided)
    assert decided.decision == "interrupted" and decided.transcript == "Stop"
    assert decided.decided_ms - decided.audio_start_ms < 300  # the first probe, 200 ms in
    assert chain.ctx.of(SpeechStarted)


def probed_under_reply(speech_s: float, *answers: ScoredTranscript) -> tuple[Chain, ScoredSttDouble]:
    """A tone of ``speech_s`` under the reply's audio, its probes answered ``answers`` in turn."""
    stt = ScoredSttDouble(*answers)
    chain = Chain(TurnDetection(detector="silence"), None, stt=stt)
    chain.ctx.playing = True
    chain.play(quiet(0.3))
    chain.play(tone(speech_s))
    chain.play(quiet(1.5))
    return chain, stt


def test_an_unsure_cue_two_probes_agree_on_interrupts_at_the_second_probe() -> None:
    # "No, that's wrong." in a voice Whisper knows badly (kokoro jm_kumo, held-out): "No" at 0.36,
    # then 0.34, under CUE_SURE both times; before, the answer stayed paused until the fourth probe
    # was sure of "that's wrong" (937 ms after the onset offline). Heard again at the same place by
    # the second probe, the word is no guess: it counts (backchannels.agreed).
    first = ScoredTranscript("No", (HeardWord("No", 0.36),))
    second = ScoredTranscript("No, that", (HeardWord("No,", 0.34), HeardWord("that", 0.28)))
    sure = ScoredTranscript("No, that's wrong.", (HeardWord("No,", 0.9), HeardWord("that's", 0.9)))
    chain, _stt = probed_under_reply(1.0, first, second, sure)
    [decided] = chain.ctx.of(BargeInDecided)
    assert decided.decision == "interrupted" and decided.transcript == "No, that"
    assert decided.decided_ms - decided.audio_start_ms < 500  # the second probe's, 360 ms in
    assert chain.ctx.of(SpeechStarted)


def test_a_noise_guess_two_probes_agree_on_still_keeps_the_answer() -> None:
    # "Yep." (kokoro jf_nezumi): "Yeah, but..." twice, "but" at 0.07 and 0.11; agreed, it would be a
    # cue ("but") and cut the answer. Under NOISE_PROBABILITY in either decode it stays no word.
    first = ScoredTranscript("Yeah", (HeardWord("Yeah", 0.57),))
    second = ScoredTranscript("Yeah, but", (HeardWord("Yeah,", 0.36), HeardWord("but", 0.07)))
    third = ScoredTranscript("Yeah, but...", (HeardWord("Yeah,", 0.35), HeardWord("but...", 0.11)))
    chain, stt = probed_under_reply(0.7, first, second, third)
    [decided] = chain.ctx.of(BargeInDecided)
    assert decided.decision == "resumed"
    assert len(stt.calls) >= 3
    assert not chain.ctx.of(SpeechStarted)
