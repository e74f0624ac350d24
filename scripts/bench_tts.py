#!/usr/bin/env python3
"""TTS latency of each backend side by side: first audio (ms) and real-time factor, per reply.

    .venv/bin/python scripts/bench_tts.py [--backends piper,kokoro_onnx] [--runs 1] [--kokoro-model DIR]

Loads each backend the way the gateway does (``load_backend("tts", config)``; one warm-up synthesis first,
as ``warm_up_models`` does at start-up), then speaks a few typical two-sentence replies through
``synthesize`` as the TTS stage consumes it. Per reply:

- first audio: ms from the call to the first sentence's array (what the caller waits for);
- RTF: synthesis seconds / audio seconds for the whole reply (< 1 is faster than real time).

Prints the p50 (median) and worst of each over the replies and ``--runs``, and the device.

``--lead-in N``: instead, the silence each backend puts before a reply's first word (ms to
``gateway.media.lead_in.voice_start``) over N syntheses of each reply opening in
:data:`OPENINGS`, as synthesized and as the TTS stage plays it (``trim_lead_in``). The

``kokoro`` backend runs only with ``--kokoro-model`` (no Kokoro-82M weights ship in any package).
On a machine with CUDA, ``kokoro`` runs on it (torch) and ``kokoro_onnx`` where onnxruntime-gpu is
installed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from gateway.config import GatewayConfig
from gateway.media.lead_in import trim_lead_in, voice_start
from gateway.models.backends import load_backend, names
from gateway.models.base import TextToSpeech

REPLIES = (
    "Sure, I can help with that. What time would you like to book the table for?",
    "The weather today is sunny and warm. Would you like to hear tomorrow's forecast?",
    "Your order shipped this morning. It should arrive by Thursday afternoon.",
    "I'm sorry, I didn't catch that. Could you say the city name again?",
)


# Reply openings of other kinds than REPLIES (a breath, a vowel, a stop, a nasal first), for --lead-in.
OPENINGS = (
    "He was not an old man.",
    "Hi there, how can I help?",
    "Here is what I found.",
    "Happy to help with that.",
    "Yes, that works.",
    "Okay, let me check.",
    "Absolutely, one moment.",
    "Unfortunately, it is closed today.",
    "Twelve degrees and cloudy.",
    "My pleasure.",
    "No, I'm afraid not.",
    "Well, it depends.",
)


def lead_in_ms(tts: TextToSpeech, text: str) -> tuple[float, float]:
    """(ms before the voice as synthesized, the same as played) of one synthesis of ``text``."""
    first = next(iter(tts.synthesize(text)))
    played = trim_lead_in(first, tts.sample_rate)

    def onset(samples: np.ndarray) -> float:
        start = voice_start(samples)
        return (len(samples) if start is None else start) / tts.sample_rate * 1000

    return onset(first), onset(played)


def lead_in_table(tts: TextToSpeech, backend: str, syntheses: int) -> None:
    """Prints the lead-in of each opening over ``syntheses`` syntheses: p50 / max ms, raw and played."""
    print(f"{backend}: ms before the voice, {syntheses} syntheses each (as synthesized -> as played)")
    print(f"{'opening':<34} {'p50':>5} {'max':>5} {'-> p50':>7} {'max':>5} {'over 200 ms':>12}")
    raw_all, played_all = [], []
    for text in OPENINGS:
        pairs = [lead_in_ms(tts, text) for _ in range(syntheses)]
        raw, played = [r for r, _ in pairs], [p for _, p in pairs]
        raw_all += raw
        played_all += played
        over = sum(r > 200 for r in raw)
        print(
            f"{text:<34} {statistics.median(raw):>5.0f} {max(raw):>5.0f} {statistics.median(played):>7.0f} "
            f"{max(played):>5.0f} {over:>7} of {syntheses}"
        )
    over = sum(r > 200 for r in raw_all)
    print(
        f"{'all':<34} {statistics.median(raw_all):>5.0f} {max(raw_all):>5.0f} {statistics.median(played_all):>7.0f} "
        f"{max(played_all):>5.0f} {over:>7} of {len(raw_all)}"
    )


def measure(tts: TextToSpeech, text: str) -> tuple[float, float, float]:
    """(first audio ms, RTF, audio seconds) of one reply."""
    started = time.perf_counter()
    first_ms = 0.0
    samples = 0
    for i, piece in enumerate(tts.synthesize(text)):
        if i == 0:
            first_ms = (time.perf_counter() - started) * 1000
        samples += len(piece)
    total_s = time.perf_counter() - started
    audio_s = samples / tts.sample_rate
    return first_ms, total_s / audio_s if audio_s else float("inf"), audio_s


def device_of(tts: TextToSpeech) -> str:
    """Where the backend runs: torch device, ONNX Runtime provider, or CPU."""
    providers = getattr(tts, "providers", None)
    if providers:
        return str(providers[0]).replace("ExecutionProvider", "")
    return str(getattr(tts, "device", "cpu"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="piper,kokoro_onnx", help="of " + ", ".join(names("tts")))
    parser.add_argument("--runs", type=int, default=1, help="passes over the replies")
    parser.add_argument("--kokoro-model", default="", help="a Kokoro-82M folder for the 'kokoro' backend")
    parser.add_argument("--lead-in", type=int, default=0, metavar="N", help="the lead-in table, N syntheses each")
    args = parser.parse_args()
    rows = []
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        if backend == "kokoro" and not args.kokoro_model:
            print("bench_tts: skipping kokoro (pass --kokoro-model DIR)", file=sys.stderr)
            continue
        model = args.kokoro_model if backend == "kokoro" else ""
        started = time.perf_counter()
        tts = load_backend("tts", GatewayConfig(tts_backend=backend, tts_model=model))
        load_s = time.perf_counter() - started
        for _ in tts.synthesize("Hello."):  # the start-up warm-up
            pass
        if args.lead_in:
            lead_in_table(tts, backend, args.lead_in)
            continue
        firsts, rtfs = [], []
        for _ in range(args.runs):
            for text in REPLIES:
                first_ms, rtf, _audio_s = measure(tts, text)
                firsts.append(first_ms)
                rtfs.append(rtf)
        rows.append((backend, device_of(tts), tts.sample_rate, load_s, firsts, rtfs))
        print(f"bench_tts: {backend} done", file=sys.stderr, flush=True)
    if args.lead_in:
        return 0
    print(
        f"{'backend':<12} {'device':<6} {'Hz':>6} {'load s':>7} {'first audio p50 ms':>19} {'max ms':>8} "
        f"{'RTF p50':>8} {'RTF max':>8}"
    )
    for backend, device, rate, load_s, firsts, rtfs in rows:
        print(
            f"{backend:<12} {device:<6} {rate:>6} {load_s:>7.1f} {statistics.median(firsts):>19.0f} "
            f"{max(firsts):>8.0f} {statistics.median(rtfs):>8.2f} {max(rtfs):>8.2f}"
        )
    print(f"({len(REPLIES)} two-sentence replies x {args.runs} run(s) per backend)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
