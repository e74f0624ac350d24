"""Speech model doubles: a slow STT, a TTS and the playout it writes to, and the VAD, end-of-turn and STT
doubles of the hand-driven VAD -> STT chain (16 kHz, 512-sample chunks)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Optional

import numpy as np

from gateway.models.base import HeardWord, ScoredTranscript, SpeechToText


class SlowSpeechToTextDouble:
    """The real speech-to-text, ``delay_s`` slower per turn (as on a loaded machine)."""

    def __init__(self, real: SpeechToText, delay_s: float) -> None:
        self.real = real
        self.delay_s = delay_s
        self.sample_rate = real.sample_rate

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        time.sleep(self.delay_s)  # on the STT stage thread, as a slow transcription would block it
        return self.real.transcribe(audio, language)


class SlowProbesSpeechToTextDouble(SlowSpeechToTextDouble):
    """The real speech-to-text, barge-in probes (``transcribe_words``) included, each call
    ``delay_s`` slower: the answer to a probe of speech under the reply comes late, as on a busy box."""

    def transcribe_words(self, audio: np.ndarray, language: str = "en") -> ScoredTranscript:
        time.sleep(self.delay_s)
        return self.real.transcribe_words(audio, language)  # type: ignore[attr-defined]


class TextToSpeechDouble:
    """A TTS that records each call and returns 100 ms of silence at 24 kHz."""

    sample_rate = 24000
    voice = "af_heart"

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, Optional[str]]] = []

    def synthesize(self, text: str, speed: float = 1.0, voice: Optional[str] = None) -> Iterator[np.ndarray]:
        self.calls.append((text, speed, voice))
        yield np.zeros(2400, np.float32)


class PlayoutDouble:
    """A playout buffer that records what the TTS stage writes (``written``: lengths, ``audio``:
    the int16 48 kHz pieces)."""

    def __init__(self) -> None:
        self.written: list[int] = []
        self.audio: list[np.ndarray] = []

    @property
    def buffered_ms(self) -> float:
        """Audio queued and not yet played, ms: none (the double plays what it gets at once)."""
        return 0.0

    def write(self, generation: int, samples: np.ndarray, text: str) -> bool:
        self.written.append(len(samples))
        self.audio.append(samples)
        return True


class TtsContextDouble:
    """The unit as the TTS stage sees it: every generation current, events recorded."""

    call_id: Optional[str] = "rtc_test"

    def __init__(self) -> None:
        self.playout = PlayoutDouble()
        self.events: list[object] = []

    def is_current(self, generation: int) -> bool:
        return True

    def notify(self, event: object) -> None:
        self.events.append(event)


RATE = 16000
CALL = "call-1"
NUMBERS = ["one", "two", "three", "four", "five"]


class VadStreamDouble:
    """Speech wherever a 32 ms chunk is louder than -40 dBFS (a clean-signal VAD)."""

    def speech_probability(self, chunk: np.ndarray) -> float:
        return 1.0 if float(np.sqrt(np.mean(chunk**2))) > 0.01 else 0.0

    def reset(self) -> None:
        pass


class GradedVadStreamDouble(VadStreamDouble):
    """Speech (1.0) above -40 dBFS, a quiet end of a word (0.2) between -60 and -40 dBFS, else 0."""

    def speech_probability(self, chunk: np.ndarray) -> float:
        level = float(np.sqrt(np.mean(chunk**2)))
        return 1.0 if level > 0.01 else 0.2 if level > 0.001 else 0.0


class VadDouble:
    """Hands out a :class:`VadStreamDouble` (or ``stream_type``) per call; 512-sample chunks at 16 kHz."""

    sample_rate = RATE
    chunk_samples = 512

    def __init__(self, stream_type: type[VadStreamDouble] = VadStreamDouble) -> None:
        self.stream_type = stream_type

    def new_stream(self) -> VadStreamDouble:
        return self.stream_type()


class EndOfTurnDouble:
    """Answers ``probability`` for every pause; records the audio it was asked about."""

    sample_rate = RATE

    def __init__(self, probability: float) -> None:
        self.probability = probability
        self.asked: list[int] = []

    def end_of_turn_probability(self, audio: np.ndarray) -> float:
        self.asked.append(audio.size)
        return self.probability


class ScriptedSttDouble:
    """Answers ``text`` for any audio; records how many samples it was given."""

    sample_rate = RATE

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls: list[int] = []

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        self.calls.append(audio.size)
        return self.text


class UntrustedSttDouble(ScriptedSttDouble):
    """A word-scoring engine whose quick decode of any audio is ``text``, every word sure, and marked
    untrusted (as Whisper marks a decode that looped); its full transcript is ``text`` too."""

    def transcribe_words(self, audio: np.ndarray, language: str = "en") -> ScoredTranscript:
        self.calls.append(audio.size)
        return ScoredTranscript(self.text, tuple(HeardWord(word) for word in self.text.split()), trusted=False)


class ScoredSttDouble(ScriptedSttDouble):
    """A word-scoring engine answering its ``answers`` in turn, one a call (the last one again once
    they run out); its full transcript is the last answer's text."""

    def __init__(self, *answers: ScoredTranscript) -> None:
        super().__init__(answers[-1].text)
        self.answers = answers

    def transcribe_words(self, audio: np.ndarray, language: str = "en") -> ScoredTranscript:
        self.calls.append(audio.size)
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


class SttDouble:
    """Names the voiced segments of the audio it is given, in order: two segments -> "one two"."""

    sample_rate = RATE

    def __init__(self) -> None:
        self.calls: list[str] = []

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        chunks = audio[: audio.size // 512 * 512].reshape(-1, 512)
        loud = np.sqrt(np.mean(chunks**2, axis=1)) > 0.01
        segments = int(np.count_nonzero(loud[1:] & ~loud[:-1]) + (1 if loud.size and loud[0] else 0))
        text = " ".join(NUMBERS[:segments])
        self.calls.append(text)
        return text


class MeanwhileSttDouble(SttDouble):
    """An :class:`SttDouble` during whose ``at``-th transcription (1: the first) ``meanwhile`` runs
    once: what another stage thread does while STT transcribes (the VAD hears the caller go on, a
    client's clear), deterministic."""

    def __init__(self, at: int, meanwhile: Callable[[], None]) -> None:
        super().__init__()
        self.at = at
        self.meanwhile = meanwhile

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        if len(self.calls) + 1 == self.at:
            self.meanwhile()
        return super().transcribe(audio, language)
