#!/usr/bin/env python3
"""Word error rate and time of the STT model on real recordings, before and after the trimmed input.

    .venv/bin/python scripts/bench_stt.py [../shared/fixtures/speech] [--runs 3]

Reads ``transcripts.tsv`` of the folder (file <TAB> reference text; rows whose reference is in
parentheses are not speech and are skipped) and transcribes each recording three ways with the
gateway's Whisper model:

- ``before``: the gateway's first call of Whisper (30 s window, with timestamps);
- ``30 s``: the fallback path (30 s window, ``without_timestamps``);
- ``trimmed``: what the gateway does now (:meth:`WhisperSpeechToText.transcribe`).

Prints one row per recording (median ms of ``--runs`` calls, WER) and the WER over all words.
Text is normalised before scoring: lower case, punctuation dropped, hyphens split, numbers to words.
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.config import GatewayConfig
from gateway.media.audio_file import read_audio_file
from gateway.models.whisper import WhisperSpeechToText
from gateway.pipeline.backchannels import edit_distance

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split()
)
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SPOKEN = {"mr": "mister", "mrs": "missus", "dr": "doctor", "st": "saint"}


def _number_words(number: int) -> str:
    if number < 20:
        return _ONES[number]
    if number < 100:
        return _TENS[number // 10] + ("" if number % 10 == 0 else " " + _ONES[number % 10])
    return str(number)


def normalise(text: str) -> list[str]:
    """Words for scoring: lower case, hyphens as spaces, numbers spelled out, punctuation gone."""
    text = text.lower().replace("-", " ")
    text = re.sub(r"\d+", lambda m: " " + _number_words(int(m.group())) + " ", text)
    words = re.findall(r"[a-z']+", text)
    return [_SPOKEN.get(word, word) for word in words]


def word_errors(reference: list[str], hypothesis: list[str]) -> int:
    """Levenshtein distance in words (substitutions + deletions + insertions)."""
    return edit_distance(reference, hypothesis)


def load(path: Path) -> np.ndarray:
    """float32 mono 16 kHz; ``.raw`` files are headerless int16 16 kHz (as pocketsphinx ships them)."""
    if path.suffix == ".raw":
        samples = np.fromfile(path, dtype="<i2")
    else:
        samples = read_audio_file(path, rate=16000)
    return samples.astype(np.float32) / 32768.0


def timed(call: Callable[[], str], runs: int) -> tuple[str, float]:
    """(text of the last call, median ms over ``runs`` calls)."""
    times, text = [], ""
    for _ in range(runs):
        started = time.monotonic()
        text = call()
        times.append((time.monotonic() - started) * 1000)
    return text, statistics.median(times)


def before_issue_10(stt: WhisperSpeechToText, audio: np.ndarray) -> str:
    """The call the gateway made before the trimmed input (kept here as the reference)."""
    segments, _ = stt._model.transcribe(
        audio, language="en", beam_size=1, vad_filter=False, condition_on_previous_text=False
    )
    return "".join(segment.text for segment in segments).strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_folder = Path(__file__).resolve().parents[2] / "shared/fixtures/speech"
    parser.add_argument("folder", nargs="?", default=str(default_folder))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    folder = Path(args.folder)
    with open(folder / "transcripts.tsv", newline="") as handle:
        rows = [(r["file"], r["transcript_or_ground_truth"]) for r in csv.DictReader(handle, delimiter="\t")]
    rows = [(name, text) for name, text in rows if not text.startswith("(")]

    config = GatewayConfig()
    stt = WhisperSpeechToText(config.stt_model, Path(config.model_cache_dir), threads=config.stt_threads)
    ways: dict[str, Callable[[np.ndarray], str]] = {
        "before": lambda audio: before_issue_10(stt, audio),
        "30 s": stt.transcribe_full_window,
        "trimmed": stt.transcribe,
    }
    totals = {way: [0, 0] for way in ways}  # errors, reference words
    print(f"{'recording':<32} {'s':>5}  " + "  ".join(f"{way + ' ms':>11} {'WER':>5}" for way in ways))
    for name, reference in rows:
        audio = load(folder / name)
        ref_words = normalise(reference)
        cells = []
        for way, call in ways.items():
            text, ms = timed(lambda call=call, audio=audio: call(audio), args.runs)
            errors = word_errors(ref_words, normalise(text))
            totals[way][0] += errors
            totals[way][1] += len(ref_words)
            cells.append(f"{ms:>11.0f} {errors / len(ref_words):>5.2f}")
            print(f"  {way:>8}: {text!r}", file=sys.stderr)
        print(f"{name:<32} {audio.size / 16000:>5.1f}  " + "  ".join(cells))
    print(f"{'all words (WER)':<38}  " + "  ".join(f"{'':>11} {e / max(1, n):>5.3f}" for e, n in totals.values()))
    print(f"trimmed decodes that fell back to the 30 s window: {stt.fallbacks}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
