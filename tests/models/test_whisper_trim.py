"""Whisper on a trimmed encoder input: the same words as the 30 s window, guarded against loops,
and long turns transcribed in pieces (real speech made by the bundled Piper voice)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gateway.models import whisper
from gateway.models.caller_voice import caller_voice_only
from gateway.models.piper_tts import PiperTextToSpeech
from gateway.models.whisper import (
    MAX_PIECE_S,
    TRIM_MIN_WINDOW_S,
    TRIM_PADDING_S,
    Decoded,
    WhisperSpeechToText,
    clearly_voiced,
    compression_ratio,
    ends_in_a_cut_repeat,
    has_repeated_phrase,
    split_at_quiet_points,
)
from tests.helpers import QUESTION
from tests.models.speech_fixtures import RATE, load_stt, load_tts, silence, speak

SENTENCES = [
    QUESTION,
    "Please book a table for two at seven in the evening.",
    "The quick brown fox jumps over the lazy dog.",
    "Ten of clubs.",
    "Yes.",
    "I would like to know how long the train to Berlin takes, and whether it stops in Hanover on the way.",
]


@pytest.fixture(scope="module")
def stt() -> WhisperSpeechToText:
    return load_stt()


@pytest.fixture(scope="module")
def tts() -> PiperTextToSpeech:
    return load_tts()


_NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def words(text: str) -> list[str]:
    """Lower-case words, small numbers spelled out ("10" -> "ten": Whisper writes either)."""
    found = re.findall(r"[a-z0-9']+", text.lower())
    return [_NUMBERS[int(w)] if w.isdigit() and int(w) < len(_NUMBERS) else w for w in found]


def overlap(reference: str, other: str) -> float:
    """Share of the reference's words (as a multiset) that the other text has too."""
    ref, got = words(reference), words(other)
    if not ref:
        return 1.0 if not got else 0.0
    remaining = list(got)
    hits = 0
    for word in ref:
        if word in remaining:
            remaining.remove(word)
            hits += 1
    return hits / max(len(ref), len(got))


def as_turn(audio: np.ndarray) -> np.ndarray:
    """What the VAD hands STT: 300 ms of prefix, the speech, and the pause that ended the turn."""
    return np.concatenate([silence(0.3), audio, silence(0.25)])


@pytest.mark.parametrize("sentence", SENTENCES)
def test_trimmed_transcript_matches_the_full_window(
    stt: WhisperSpeechToText, tts: PiperTextToSpeech, sentence: str
) -> None:
    audio = as_turn(speak(tts, sentence))
    trimmed = stt.transcribe(audio)
    full = stt.transcribe_full_window(audio)
    assert overlap(full, trimmed) >= 0.9, (trimmed, full)
    assert overlap(sentence, trimmed) >= 0.8, (trimmed, sentence)


def test_trimmed_encoder_input_is_the_turn_plus_padding_not_30_s(
    stt: WhisperSpeechToText, tts: PiperTextToSpeech, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What makes the trimmed path cheaper: the encoder reads the turn plus TRIM_PADDING_S (at least
    TRIM_MIN_WINDOW_S) of 10 ms log-mel frames, not 30 s of them. (Its speed is measured by
    scripts/bench_stt.py, not here.)"""
    audio = as_turn(speak(tts, "Please book a table for two at seven in the evening."))
    frames: list[int] = []
    encode = stt._model.encode
    monkeypatch.setattr(stt._model, "encode", lambda features: frames.append(features.shape[-1]) or encode(features))
    stt.transcribe(audio)
    trimmed, frames[:] = list(frames), []
    stt.transcribe_full_window(audio)
    expected = int(max(audio.size / RATE + TRIM_PADDING_S, TRIM_MIN_WINDOW_S) * 100)
    assert trimmed == [expected] and expected < 1000, trimmed  # one encode, under 10 s of frames
    assert frames == [3000], frames  # the 30 s window


@pytest.mark.slow  # 40 s of synthesized speech transcribed in two 30 s windows (~18 s on a busy 2-core box)
def test_turn_longer_than_30_s_is_transcribed_in_pieces(stt: WhisperSpeechToText, tts: PiperTextToSpeech) -> None:
    parts = [
        "My first point is about the weather in spring.",
        "The second point concerns the train timetable.",
        "Third, we should talk about the budget for next year.",
        "Fourth, the new office needs more chairs and desks.",
        "Fifth, someone has to water the plants on Fridays.",
        "Sixth, the printer on the second floor is broken again.",
        "Finally, thank you all for coming to this meeting today.",
    ]
    pieces: list[np.ndarray] = []
    for part in parts:
        pieces += [speak(tts, part), silence(0.8)]
    audio = np.concatenate(pieces)
    while audio.size < 34 * RATE:  # make sure it is well past one 30 s window
        audio = np.concatenate([audio, speak(tts, "And one more thing about the coffee machine."), silence(0.8)])
    assert len(split_at_quiet_points(audio)) >= 2
    text = stt.transcribe(audio)
    got = set(words(text))
    assert {"weather", "spring"} <= got, text
    assert {"thank", "meeting"} <= got, text  # the end, past 30 s, is not lost
    assert "coffee" in got, text


def test_repetitive_output_falls_back_to_the_full_window(
    stt: WhisperSpeechToText, tts: PiperTextToSpeech, monkeypatch: pytest.MonkeyPatch
) -> None:
    audio = as_turn(speak(tts, "Ten of clubs."))
    looping = "ten of clubs ten of clubs ten of clubs ten of"
    monkeypatch.setattr(stt, "_decode_trimmed", lambda piece, language, **_: Decoded(looping, False, [], looping))
    before = stt.fallbacks
    text = stt.transcribe(audio)
    assert stt.fallbacks == before + 1
    assert text == stt.transcribe_full_window(caller_voice_only(audio))  # the same piece, on the 30 s path
    assert len(words(text)) <= 4, text


def test_decode_cut_at_the_token_cap_falls_back(
    stt: WhisperSpeechToText, tts: PiperTextToSpeech, monkeypatch: pytest.MonkeyPatch
) -> None:
    audio = as_turn(speak(tts, "Yes."))
    monkeypatch.setattr(
        stt, "_decode_trimmed", lambda piece, language, **_: Decoded("yes yes yes", True, [], "yes yes yes")
    )
    before = stt.fallbacks
    stt.transcribe(audio)
    assert stt.fallbacks == before + 1


def test_empty_decode_of_voiced_audio_falls_back_but_silence_is_empty(
    stt: WhisperSpeechToText, tts: PiperTextToSpeech, monkeypatch: pytest.MonkeyPatch
) -> None:
    voiced = as_turn(speak(tts, QUESTION))
    monkeypatch.setattr(stt, "_decode_trimmed", lambda piece, language, **_: Decoded("", False, [], ""))
    before = stt.fallbacks
    heard = stt.transcribe(voiced)
    assert overlap(QUESTION, heard) >= 0.8, heard  # the 30 s window heard it (a word may go)
    assert stt.fallbacks == before + 1
    assert stt.transcribe(silence(1.0)) == ""
    assert stt.fallbacks == before + 1  # nothing to hear: no second decode


def test_loop_detectors() -> None:
    assert has_repeated_phrase("10 of clubs 10 of clubs")
    assert has_repeated_phrase("Thank you. Thank you. Thank you.")
    assert not has_repeated_phrase("No, no, no.")
    assert not has_repeated_phrase("And so my fellow Americans, ask not what your country can do for you.")
    assert compression_ratio("the same sentence again. " * 13) > 2.4
    # A short loop cut mid-word ("Fair enough." in a fresh5 voice): too short for the phrase rule.
    assert not has_repeated_phrase("Ther Ther Ther Th")
    assert ends_in_a_cut_repeat("Ther Ther Ther Th") and whisper._rejection("Ther Ther Ther Th", False, silence(1.0))
    assert ends_in_a_cut_repeat("hold on hold on ho")
    for said in ("No, no, no.", "Yeah yeah yeah", "Ther Ther Th", "Okay, okay. Ok", "hold on ho", "Mm mm mm-hmm"):
        assert not ends_in_a_cut_repeat(said), said
    assert compression_ratio("And so my fellow Americans, ask not what your country can do for you.") < 2.4


def test_split_cuts_at_the_quiet_point_and_keeps_every_sample() -> None:
    rng = np.random.default_rng(3)
    loud = rng.normal(0, 0.2, 25 * RATE).astype(np.float32)
    audio = np.concatenate([loud, silence(0.5), loud[: 10 * RATE]])
    pieces = split_at_quiet_points(audio)
    assert len(pieces) == 2
    assert all(piece.size <= MAX_PIECE_S * RATE for piece in pieces)
    assert np.array_equal(np.concatenate(pieces), audio)
    cut = pieces[0].size
    assert 25 * RATE <= cut <= 25.5 * RATE, cut / RATE  # inside the pause
    assert split_at_quiet_points(audio[: 5 * RATE])[0].size == 5 * RATE


def test_clearly_voiced() -> None:
    assert not clearly_voiced(silence(2.0))
    assert clearly_voiced(np.random.default_rng(4).normal(0, 0.1, RATE).astype(np.float32))


def test_barge_in_probe_gives_each_word_with_its_probability(stt, tts) -> None:
    heard = stt.transcribe_words(np.concatenate([silence(0.2), speak(tts, "Wait, stop."), silence(0.3)]))
    assert heard.trusted
    assert [w.text.lower() for w in heard.words] == words(heard.text) == ["wait", "stop"]
    assert all(0.3 < w.probability <= 1.0 for w in heard.words), heard.words
    # Noise has no words the decoder is sure of.
    noise = np.random.default_rng(7).normal(0, 0.05, RATE).astype(np.float32)
    assert all(w.probability < 0.9 for w in stt.transcribe_words(noise).words)


def test_a_few_milliseconds_of_audio_are_heard_as_nothing_not_a_failure(stt: WhisperSpeechToText) -> None:
    """A manual commit under server VAD hands STT only the audio after the VAD's last 32 ms chunk
    (100 ms appended and committed over the WebSocket: 64 samples). Whisper decoded a token from
    that, and faster-whisper's word alignment, with no encoder frame to align to, raised
    ``IndexError``: the client got ``error`` ``stt_failed`` and ``...transcription.failed``."""
    rng = np.random.default_rng(1)
    for size in (1, 64, 80, 319):
        for audio in (np.zeros(size, np.float32), rng.normal(0, 0.01, size).astype(np.float32)):
            assert stt.transcribe(audio) == "", size


def test_a_rejected_decode_is_decoded_again_on_the_same_encoder_output(
    stt: WhisperSpeechToText, tts: PiperTextToSpeech, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A barge-in probe of "Hold on, please." decoded as "Hold on. Hold on. Hold on. Hold" (rejected)
    # is decoded again with the repetition penalty; that retry ran Whisper's encoder once more (~155
    # of a probe's ~190 ms on 2 cores): the probe's answer came ~470 ms after it was sent instead of
    # ~200, and the caller's "Hold on" was decided a probe later (h51). Before: 2 encodes.
    audio = speak(tts, "Hold on.")
    encodes: list[tuple[int, ...]] = []
    encode = stt._model.encode
    monkeypatch.setattr(stt._model, "encode", lambda features: encodes.append(features.shape) or encode(features))
    for transcribe in (stt.transcribe_words, lambda piece: stt.transcribe(as_turn(piece))):
        verdicts = iter(["repeated phrase"])  # the first decode rejected, the retry accepted
        monkeypatch.setattr(whisper, "_rejection", lambda text, hit_cap, audio, verdicts=verdicts: next(verdicts, None))
        encodes.clear()
        retries, fallbacks = stt.retries, stt.fallbacks
        transcribe(audio)
        assert (stt.retries, stt.fallbacks) == (retries + 1, fallbacks)
        assert len(encodes) == 1, encodes


def test_a_turn_that_begins_right_at_its_first_word_is_heard_from_that_word(
    stt: WhisperSpeechToText, tts: PiperTextToSpeech
) -> None:
    """Whisper base dropped the first word of audio that begins at it (before: "some jazz music in
    the living room."); the turn is now heard with a short silence before its voice."""
    from gateway.media.lead_in import voice_start

    audio = speak(tts, "Play some jazz music in the living room.")
    start = voice_start(audio)
    assert start is not None
    assert words(stt.transcribe(audio[start:]))[:3] == ["play", "some", "jazz"]


def test_silence_goes_before_a_voice_only_where_the_audio_begins_with_it() -> None:
    rng = np.random.default_rng(7)
    voice = (0.3 * np.sin(np.arange(RATE) * 2 * np.pi * 220 / RATE)).astype(np.float32)
    floor = rng.normal(0.0, 1e-4, RATE // 2).astype(np.float32)
    abrupt = np.concatenate([voice, floor])
    padded = whisper.with_lead_in(abrupt)
    assert padded.size == abrupt.size + int(whisper.LEAD_IN_S * RATE)
    assert not padded[: int(whisper.LEAD_IN_S * RATE)].any() and np.array_equal(padded[-abrupt.size :], abrupt)
    lead = np.concatenate([floor[: RATE // 4], voice, floor])  # 250 ms before the voice: as it is
    assert whisper.with_lead_in(lead) is lead
    assert whisper.with_lead_in(floor) is floor  # no voice: nothing to go before
