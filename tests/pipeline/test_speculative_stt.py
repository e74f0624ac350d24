"""Speculative STT with the real models (Silero VAD, Whisper base, Smart Turn) on speech made by the
bundled Piper voice: a caller who pauses and goes on gets one transcript of the whole turn."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gateway.models.piper_tts import PiperTextToSpeech
from gateway.models.silero import SileroVad
from gateway.models.smart_turn import SmartTurnDetector
from gateway.models.whisper import WhisperSpeechToText
from gateway.pipeline.events import TranscriptionCompleted
from gateway.pipeline.turn import TurnDetection
from tests.doubles import Chain
from tests.helpers import says
from tests.models.speech_fixtures import load_stt, load_tts, silence, speak


class RecordingStt:
    """The real Whisper model, with a list of every text it produced (reported or not)."""

    sample_rate = 16000

    def __init__(self, real: WhisperSpeechToText) -> None:
        self.real = real
        self.texts: list[str] = []

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        text = self.real.transcribe(audio, language)
        self.texts.append(text)
        return text


@pytest.fixture(scope="module")
def tts() -> PiperTextToSpeech:
    return load_tts()


@pytest.fixture(scope="module")
def whisper() -> WhisperSpeechToText:
    return load_stt()


@pytest.fixture(scope="module")
def vad() -> SileroVad:
    return SileroVad()


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


def test_pause_then_more_speech_reports_only_the_whole_turn(
    tts: PiperTextToSpeech, whisper: WhisperSpeechToText, vad: SileroVad
) -> None:
    stt = RecordingStt(whisper)
    # Plain silence rules (a client's server_vad): the 350 ms pause is shorter than the 600 ms that
    # ends the turn, so the speculation made in it must never be reported.
    turn = TurnDetection(detector="silence", silence_duration_ms=600)
    chain = Chain(turn, None, vad=vad, stt=stt)
    chain.play(
        np.concatenate(
            [
                silence(0.5),
                speak(tts, "I would like to order a large pizza"),
                silence(0.35),
                speak(tts, "with extra cheese and olives."),
                silence(1.2),
            ]
        )
    )

    (transcript,) = chain.transcripts()
    assert {"pizza", "cheese", "olives"} <= words(transcript), transcript
    partial = [t for t in stt.texts if "pizza" in words(t) and "cheese" not in words(t)]
    assert partial, stt.texts  # the pause was speculated on...
    reported = [e.transcript for e in chain.ctx.of(TranscriptionCompleted)]
    assert all(text not in reported for text in partial)  # ...and that text never reached the caller
    stats = chain.stt.speculation.snapshot()
    assert stats["started"] >= 2 and stats["hits"] == 1 and stats["discarded"] >= 1, stats
    assert stats["wasted_s"] > 0, stats


def test_finished_question_ends_early_with_its_speculative_transcript(
    tts: PiperTextToSpeech, whisper: WhisperSpeechToText, vad: SileroVad
) -> None:
    stt = RecordingStt(whisper)
    chain = Chain(TurnDetection(speaking_drafts=False), SmartTurnDetector(), vad=vad, stt=stt)  # the pause's own
    chain.play(np.concatenate([silence(0.5), speak(tts, "What is the capital of France?"), silence(1.0)]))

    (transcript,) = chain.transcripts()
    assert says(transcript, "What is the capital of France?"), transcript
    assert chain.vad.semantic_checks >= 1 and chain.vad.semantic_complete == 1
    assert chain.stt.speculation.snapshot()["hits"] == 1
    assert len(stt.texts) == 1  # the speculative transcription was the only one


@pytest.mark.slow  # 1.5 s of real models on 2 cores; the default suite is near its bar
def test_a_question_is_drafted_while_it_is_said_and_transcribed_the_same(
    tts: PiperTextToSpeech, whisper: WhisperSpeechToText, vad: SileroVad
) -> None:
    stt = RecordingStt(whisper)
    chain = Chain(TurnDetection(), SmartTurnDetector(), vad=vad, stt=stt)  # drafts on, as configured by default
    question = "Could you tell me what the weather will be like in Paris tomorrow morning?"
    chain.play(np.concatenate([silence(0.5), speak(tts, question), silence(1.0)]))

    (transcript,) = chain.transcripts()
    assert says(transcript, question), transcript
    drafts = [u for u in chain.sent if u.speaking]
    assert len(drafts) >= 2, "a 4 s question is drafted while it is said"
    (pause,) = [u for u in chain.sent if u.speculative and not u.speaking]
    assert drafts[0].audio.size < pause.audio.size  # the first draft before the caller stopped
    stats = chain.stt.speculation.snapshot()
    # The pause's transcript: the last draft when it was cut in that pause, else its own transcription.
    assert len(stt.texts) == stats["drafts"] + (0 if stats["from_drafts"] else 1), (stt.texts, stats)
    assert stats["hits"] == 1
