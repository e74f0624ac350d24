#!/usr/bin/env python3
"""Would batching Whisper over simultaneous turns pay? Time of N turns decoded one after another
(what the gateway does: CTranslate2 queues the units' calls) against one batched encode + generate.

    .venv/bin/python scripts/bench_stt_batch.py [--runs 5]

Uses the gateway's Whisper model and its trimmed input (each turn padded to the same window:
turns under ~6 s all get :data:`TRIM_MIN_WINDOW_S`, so batching adds no padding). The turns are
real recordings of ``../shared/fixtures/speech``. Prints, for N = 1, 2, 4 turns, the median ms of
``--runs`` rounds each way, batched ÷ one-after-another, and whether the texts are the same.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from bench_stt import load

from gateway.config import GatewayConfig
from gateway.models.whisper import _MAX_FRAMES, TRIM_MIN_WINDOW_S, TRIM_PADDING_S, WhisperSpeechToText

# Short turns (under 6 s), as callers say them.
TURNS = (
    "speechrecognition_english.wav",
    "pocketsphinx_goforward.raw",
    "pocketsphinx_cards_001.wav",
    "pocketsphinx_librivox_0880.wav",
)


def batched(stt: WhisperSpeechToText, turns: list[np.ndarray]) -> list[str]:
    """All ``turns`` (float32 mono 16 kHz) in one encoder pass and one greedy generate."""
    from faster_whisper.transcribe import get_suppressed_tokens

    model = stt._model
    longest_s = max(turn.size for turn in turns) / stt.sample_rate
    frames = min(int(max(longest_s + TRIM_PADDING_S, TRIM_MIN_WINDOW_S) * 100), _MAX_FRAMES)
    features = np.stack(
        [np.pad(f, ((0, 0), (0, max(0, frames - f.shape[1]))))[:, :frames] for f in map(model.feature_extractor, turns)]
    )
    tokenizer = stt._tokenizer("en")
    prompt = model.get_prompt(tokenizer, [], without_timestamps=True)
    budget = int(12 + 8 * longest_s)
    results = model.model.generate(
        model.encode(features),
        [prompt] * len(turns),
        beam_size=1,
        max_length=min(len(prompt) + budget, model.max_length),
        suppress_blank=True,
        suppress_tokens=list(get_suppressed_tokens(tokenizer, [-1]) or []),
    )
    return [tokenizer.decode([t for t in result.sequences_ids[0] if t < tokenizer.eot]).strip() for result in results]


def one_after_another(stt: WhisperSpeechToText, turns: list[np.ndarray]) -> list[str]:
    return [stt._decode_trimmed(turn, "en").text for turn in turns]


def median_ms(call, runs: int) -> tuple[float, list[str]]:
    times, texts = [], []
    for _ in range(runs):
        started = time.monotonic()
        texts = call()
        times.append((time.monotonic() - started) * 1000)
    return statistics.median(times), texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="CTranslate2 threads (default: the gateway's)")
    args = parser.parse_args()
    folder = Path(__file__).resolve().parents[2] / "shared/fixtures/speech"
    config = GatewayConfig()
    threads = config.stt_threads if args.threads is None else args.threads
    stt = WhisperSpeechToText(config.stt_model, Path(config.model_cache_dir), threads=threads)
    audio = [load(folder / name) for name in TURNS]
    print(f"Whisper {config.stt_model}, {threads or 'all'} CTranslate2 threads, median of {args.runs} rounds")
    print(f"{'turns':>5} {'one after another ms':>21} {'batched ms':>11} {'batched ÷ serial':>17}  same text")
    for count in (1, 2, 4):
        turns = audio[:count]
        serial_ms, serial_texts = median_ms(lambda turns=turns: one_after_another(stt, turns), args.runs)
        batch_ms, batch_texts = median_ms(lambda turns=turns: batched(stt, turns), args.runs)
        same = sum(a == b for a, b in zip(serial_texts, batch_texts, strict=True))
        print(f"{count:>5} {serial_ms:>21.0f} {batch_ms:>11.0f} {batch_ms / serial_ms:>17.2f}  {same}/{count}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
