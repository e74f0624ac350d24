"""Whisper hears only the caller's own voice: in office babble, no words from the background talkers
before the caller speaks, no unsure words it invents in the babble over the caller, and clean
speech transcribed as before (real Piper speech, real Whisper base; the babble is four other
sentences of the bundled voice, looped at seeded offsets and gains, as ``scripts/bench_noise.py``
mixes it)."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.models.caller_voice import FRAME, caller_span, caller_voice_only, voice_frames
from gateway.models.piper_tts import PiperTextToSpeech
from gateway.models.whisper import MIN_WORD_PROBABILITY, WhisperSpeechToText
from gateway.pipeline.backchannels import Verdict, judge
from tests.helpers import says
from tests.models.speech_fixtures import RATE, load_stt, load_tts, silence, speak

CALLER = "What's the weather like in Paris right now?"
BACKGROUND = [
    "The quarterly numbers are due on Friday, so let's meet before lunch.",
    "I sent the slides to Maria but she hasn't answered yet.",
    "Does anyone know where the printer on the third floor went?",
    "We should move the stand-up to half past nine tomorrow.",
]
SEED = 2  # a seed whose babble Whisper writes down before the caller speaks
SNR_DB = 0.0
LEAD_IN_S = 1.5  # office noise alone before the caller's first word (a VAD that opened on the babble)


@pytest.fixture(scope="module")
def tts() -> PiperTextToSpeech:
    return load_tts()


@pytest.fixture(scope="module")
def stt() -> WhisperSpeechToText:
    return load_stt()


@pytest.fixture(scope="module")
def caller(tts: PiperTextToSpeech) -> np.ndarray:
    return speak(tts, CALLER)


@pytest.fixture(scope="module")
def babble(tts: PiperTextToSpeech) -> list[np.ndarray]:
    return [speak(tts, sentence) for sentence in BACKGROUND]


def words(text: str) -> list[str]:
    return "".join(c if c.isalnum() or c in " '" else " " for c in text.lower()).split()


def pink(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS pink noise (1/f power) of ``n`` samples."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    spectrum /= np.sqrt(np.maximum(np.arange(spectrum.size), 1))
    noise = np.fft.irfft(spectrum, n)
    return noise / np.sqrt(np.mean(noise**2))


def office_turn(caller: np.ndarray, talkers: list[np.ndarray], snr_db: float, seed: int) -> np.ndarray:
    """LEAD_IN_S of office noise, then the caller over it, then 0.5 s of it. The office noise is
    the babble of ``talkers`` plus pink noise at equal power, its RMS ``snr_db`` under the caller's
    voiced level (20 ms frames above -40 dBFS). float32 16 kHz."""
    turn = np.concatenate([silence(LEAD_IN_S), caller, silence(0.5)]).astype(np.float64)
    rng = np.random.default_rng(seed)
    babble = np.zeros(turn.size)
    for talker in talkers:
        looped = np.tile(talker, turn.size // talker.size + 2)
        start = int(rng.integers(0, talker.size))
        babble += looped[start : start + turn.size] * rng.uniform(0.5, 1.0)
    noise = babble / np.sqrt(np.mean(babble**2)) + pink(turn.size, rng)
    frames = caller[: caller.size // FRAME * FRAME].reshape(-1, FRAME).astype(np.float64)
    levels = np.sqrt(np.mean(frames**2, axis=1))
    voiced_rms = np.sqrt(np.mean(levels[levels > 0.01] ** 2))
    noise *= voiced_rms / 10 ** (snr_db / 20) / np.sqrt(np.mean(noise**2))
    return np.clip(turn + noise, -1, 1).astype(np.float32)


def test_the_span_leaves_out_the_noise_before_the_caller(caller: np.ndarray, babble: list[np.ndarray]) -> None:
    turn = office_turn(caller, babble, snr_db=SNR_DB, seed=SEED)
    span = caller_span(turn)
    assert span is not None
    caller_starts = LEAD_IN_S * RATE
    assert caller_starts - 0.3 * RATE <= span[0] <= caller_starts + 0.3 * RATE, span[0] / RATE
    assert not voice_frames(turn)[: int((LEAD_IN_S - 0.3) * RATE) // FRAME].any()


def test_background_talkers_are_not_written_down(
    stt: WhisperSpeechToText, caller: np.ndarray, babble: list[np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    turn = office_turn(caller, babble, snr_db=SNR_DB, seed=SEED)
    heard = stt.transcribe(turn)
    monkeypatch.setattr(stt, "caller_voice", False)
    whole = stt.transcribe(turn)
    # The whole turn: Whisper writes down the babble before the caller, words the caller never said.
    assert len([w for w in words(whole) if w not in words(CALLER)]) >= 3, whole
    # The caller's voice only: at most one word that is not the caller's (0 dB: words may be misheard).
    assert len([w for w in words(heard) if w not in words(CALLER)]) <= 1, (heard, whole)
    assert {"weather"} <= set(words(heard)), heard


def test_unsure_words_heard_in_the_babble_are_dropped(
    stt: WhisperSpeechToText, caller: np.ndarray, babble: list[np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 5 dB office noise: without the word filter Whisper writes words the caller did not say for
    # "in Paris" ("is pairs" on one machine, "is tears" on another; on an AVX-512 box seed 12 gave
    # "the weather like is": CPUs round differently). So the test takes the first of a few seeds
    # whose unfiltered decode invents two words; the unsure one(s) go, the caller's sure words stay.
    assert stt.min_word_probability == MIN_WORD_PROBABILITY == GatewayConfig().stt_min_word_probability
    tried = []
    for seed in (12, 13, 14, 15, 16, 17):
        turn = office_turn(caller, babble, snr_db=5.0, seed=seed)
        monkeypatch.setattr(stt, "min_word_probability", 0.0)
        unfiltered = stt.transcribe(turn)
        monkeypatch.setattr(stt, "min_word_probability", MIN_WORD_PROBABILITY)
        invented = [w for w in words(unfiltered) if w not in words(CALLER)]
        tried.append(unfiltered)
        if len(invented) >= 2 and {"weather", "right", "now"} <= set(words(unfiltered)):
            break
    assert len(invented) >= 2, tried  # before the filter
    heard = stt.transcribe(turn)
    kept = [w for w in words(heard) if w not in words(CALLER)]
    assert len(kept) < len(invented) and set(kept) <= set(invented), (heard, unfiltered)
    assert {"weather", "right", "now"} <= set(words(heard)), heard  # the sure words stay


def test_a_looping_decode_is_decoded_again_with_a_repetition_penalty(
    stt: WhisperSpeechToText, tts: PiperTextToSpeech, babble: list[np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 3 dB office noise, seed 37: the greedy trimmed decode loops on something the babble says
    # ("He does not rise. He does not rise. ..."). Before, every such decode went to the 30 s
    # window (a decode of 30 s of audio, with faster-whisper's temperature fallbacks; over the
    # rejected turns of scripts/bench_noise.py it invented more words than the retry:
    # docs/BENCHMARKS.md); now it is decoded again, trimmed, with a repetition penalty: no loop and
    # no 30 s decode. What the retry hears differs by CPU: "does not rise. Please set it for 10
    # minutes" on an AVX-512 machine, "does not rise." alone on an AVX2-only one (where the 30 s
    # window heard the caller): which words a decode keeps is measured by bench_noise, not here.
    text = "Please set a timer for ten minutes."
    turn = office_turn(speak(tts, text), babble, snr_db=3.0, seed=37)
    retries, fallbacks = stt.retries, stt.fallbacks
    heard = stt.transcribe(turn)
    assert (stt.retries, stt.fallbacks) == (retries + 1, fallbacks), heard
    assert " ".join(words(heard)).count("does not rise") <= 1, heard
    monkeypatch.setattr(stt, "retry_repetition_penalty", 1.0)  # no retry: the 30 s window, as before
    before = stt.transcribe(turn)
    assert (stt.retries, stt.fallbacks) == (retries + 1, fallbacks + 1), before
    print(f"\nretry: {heard!r}\n30 s window: {before!r}")


def test_clean_speech_keeps_the_whole_caller_and_is_still_heard(
    stt: WhisperSpeechToText, caller: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    turn = np.concatenate([silence(0.5), caller, silence(0.5)])
    kept = caller_voice_only(turn)
    assert kept.size >= caller.size - FRAME  # only the silence around the caller goes
    heard = stt.transcribe(turn)
    monkeypatch.setattr(stt, "caller_voice", False)
    whole = stt.transcribe(turn)
    # Not always word for word the same: on an AVX2-only CPU the trimmed turn is "...like and pairs
    # right now" where the whole one is "...like in Paris right now" (identical on an AVX-512 one);
    # clean WER is measured by scripts/bench_noise.py.
    assert says(heard, CALLER) and says(whole, CALLER), (heard, whole)


def test_steady_noise_or_silence_is_kept_whole() -> None:
    noise = np.random.default_rng(0).normal(0.0, 0.01, RATE).astype(np.float32)
    assert caller_span(noise) is None
    assert caller_voice_only(noise) is noise
    assert caller_span(silence(1.0)) is None
    assert caller_span(np.zeros(FRAME - 1, np.float32)) is None


def test_a_looping_barge_in_probe_is_decoded_again_with_a_repetition_penalty(
    stt: WhisperSpeechToText, tts: PiperTextToSpeech, babble: list[np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A barge-in probe (``transcribe_words``) of "Wait, stop." in 3 dB office noise, seed 0: the
    # greedy decode loops ("Wait, wait, wait, ..."). Before, a probe's loop came back untrusted and
    # decided nothing (a fresh-clone run heard "Hold on, what about tomorrow?" as "Hold on Hold on
    # ..." and the reply resumed over the interruption); now it is decoded again with the
    # repetition penalty, as a turn's is, and its words decide.
    voice = speak(tts, "Wait, stop.")
    turn = office_turn(voice, babble, snr_db=3.0, seed=0)
    retries = stt.retries
    heard = stt.transcribe_words(turn)
    assert stt.retries == retries + 1 and heard.trusted, heard
    assert "wait" in words(heard.text) and len(words(heard.text)) <= 4, heard.text
    assert judge(heard.words, voiced_ms=voice.size * 1000 / RATE)[0] is Verdict.TURN, heard.words
    monkeypatch.setattr(stt, "retry_repetition_penalty", 1.0)  # no retry, as before
    before = stt.transcribe_words(turn)
    assert not before.trusted and words(before.text).count("wait") > 4, before.text
