#!/usr/bin/env python3
"""TTS latency of each backend side by side: first audio (ms) and real-time factor, per reply.

    .venv/bin/python scripts/bench_tts.py [--backends piper,kokoro_onnx] [--runs 1] [--kokoro-model DIR]

Loads each backend the way the gateway does (``load_backend("tts", config)``; one warm-up synthesis first,
as ``warm_up_models`` does at start-up), then speaks a few typical two-sentence replies through
``synthesize`` as the TTS stage consumes it. Per reply:

- first audio: ms from the call to the first sentence's array (what the caller waits for);
- RTF: synthesis seconds / audio seconds for the whole reply (< 1 is faster than real time).

Prints the p50 (median) and worst of each over the replies and ``--runs``, and the device. The
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

from gateway.config import GatewayConfig
from gateway.models.backends import load_backend, names
from gateway.models.base import TextToSpeech

REPLIES = (
    "Sure, I can help with that. What time would you like to book the table for?",
    "The weather today is sunny and warm. Would you like to hear tomorrow's forecast?",
    "Your order shipped this morning. It should arrive by Thursday afternoon.",
    "I'm sorry, I didn't catch that. Could you say the city name again?",
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
        firsts, rtfs = [], []
        for _ in range(args.runs):
            for text in REPLIES:
                first_ms, rtf, _audio_s = measure(tts, text)
                firsts.append(first_ms)
                rtfs.append(rtf)
        rows.append((backend, device_of(tts), tts.sample_rate, load_s, firsts, rtfs))
        print(f"bench_tts: {backend} done", file=sys.stderr, flush=True)
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
