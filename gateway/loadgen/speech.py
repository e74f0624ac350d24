"""The questions simulated callers ask: real recordings, each with the silence after its speech.

A folder given as the speech source is read through its ``transcripts.tsv`` (``file<TAB>text``, a
header line first): the WAV files with a transcript that is not in parentheses (``(silence)``,
``(none)`` mark non-speech); single files are taken as they are. Audio is decoded to int16 mono
48 kHz (what a WebRTC caller sends).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gateway.media.audio_file import read_audio_file
from gateway.media.resample import Resampler

RATE = 48000


@dataclass(frozen=True)
class Question:
    """One recording: ``name`` (its file name), ``samples`` (int16 mono 48 kHz), ``tail_s`` (the
    silence after its speech, s: the caller's speech ends ``tail_s`` before the audio does) and
    ``text``, its transcript ("" when none is known: a file given alone)."""

    name: str
    samples: np.ndarray
    tail_s: float
    text: str = ""

    @property
    def duration_s(self) -> float:
        return self.samples.size / RATE


def speech_files(sources: Sequence[Path]) -> list[Path]:
    """The speech files of ``sources`` (folders with a ``transcripts.tsv``, or files), in order.
    Raises ValueError for a folder without ``transcripts.tsv`` or a path that does not exist."""
    return list(transcribed_files(sources))


def transcribed_files(sources: Sequence[Path]) -> dict[Path, str]:
    """The speech files of ``sources`` with their transcripts ("" for a file given alone), in
    order; ValueError as :func:`speech_files`."""
    found: dict[Path, str] = {}
    for source in sources:
        if source.is_dir():
            listing = source / "transcripts.tsv"
            if not listing.is_file():
                raise ValueError(f"{source}: no transcripts.tsv (give the WAV files instead)")
            for line in listing.read_text().splitlines()[1:]:
                name, _, text = line.partition("\t")
                if name.endswith(".wav") and text.strip() and not text.startswith("("):
                    found[source / name] = text.strip()
        elif source.is_file():
            found[source] = ""
        else:
            raise ValueError(f"{source}: no such file or folder")
    return found


def load_questions(sources: Sequence[Path]) -> list[Question]:
    """Every speech file of ``sources`` decoded, with its trailing silence and transcript. Raises ValueError when
    none is found or a file cannot be decoded."""
    files = transcribed_files(sources)
    if not files:
        raise ValueError("no speech recordings found")
    questions = []
    for path, text in files.items():
        samples = read_audio_file(path, RATE)
        questions.append(Question(path.name, samples, trailing_silence_s(samples), text))
    return questions


def conversation(questions: Sequence[Question], caller: int, turns: int) -> list[Question]:
    """The ``turns`` questions caller number ``caller`` (0-based) asks: the recordings in turn,
    each caller starting ``turns`` further on, so that N callers together ask them evenly."""
    return [questions[(caller * turns + k) % len(questions)] for k in range(turns)]


def trailing_silence_s(audio: np.ndarray) -> float:
    """Seconds of ``audio`` (int16 mono 48 kHz) after its speech ends, by Silero VAD with the
    gateway's default rules: speech is a run of >= 3 chunks (96 ms) at probability >= 0.5, and it
    lasts while the probability stays >= 0.35 (a trailing click or breath is not speech)."""
    from gateway.models.silero import SileroVad

    resampler = Resampler(16000)
    samples = np.concatenate([resampler.resample_array(audio, RATE), resampler.flush()]).astype(np.float32) / 32768
    stream = SileroVad().new_stream()
    chunks = samples.size // 512
    probability = [stream.speech_probability(samples[i * 512 : (i + 1) * 512]) for i in range(chunks)]
    end, run = 0, 0
    for index, p in enumerate(probability):
        run = run + 1 if p >= 0.5 else 0
        if run >= 3:
            end = index + 1
            while end < chunks and probability[end] >= 0.35:
                end += 1
    return max(0.0, (samples.size - end * 512) / 16000)
