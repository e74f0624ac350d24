#!/usr/bin/env python3
"""STT and TTS in process vs. over HTTP on a speech server on the same machine: time per utterance.

    flock -x /work/cpu.lock .venv/bin/python scripts/bench_speech_http.py [--runs 3]

Starts the real servers the tests use (faster-whisper-server on the bundled Whisper base,
local-tts-studio on the bundled Piper voice joe, from ``.venv-speech``: tests/models/speech_servers.py),
warms each engine once, then measures the same work both ways:

- STT, per utterance (four replies spoken by the test voice, 16 kHz): the gateway's Whisper in
  process (trimmed encoder input), the same model on faster-whisper's 30 s window (how the server
  decodes), and ``openai_http`` to faster-whisper-server (WAV upload, JSON answer);
- TTS, per reply (two sentences each): first audio (ms from the call to the first array the TTS
  stage gets) and the whole reply, Piper in process vs. ``openai_http`` to local-tts-studio.

Prints the median and worst ms of each over the utterances and ``--runs``. Both servers run on
this machine's CPUs, so the HTTP rows are the model's time plus the protocol's, not a GPU tier's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.config import GatewayConfig
from gateway.models.base import SpeechToText, TextToSpeech
from gateway.models.openai_http.stt import OpenAIHttpSpeechToText
from gateway.models.openai_http.tts import OPENAI_MODEL, OpenAIHttpTextToSpeech
from gateway.models.piper_tts import PiperTextToSpeech
from gateway.models.whisper import WhisperSpeechToText
from tests.models.speech_fixtures import load_tts, speak
from tests.models.speech_servers import STT_MODEL, TTS_KEY, start_stt_server, start_tts_server, wait_ready

REPLIES = (
    "Sure, I can help with that. What time would you like to book the table for?",
    "The weather today is sunny and warm. Would you like to hear tomorrow's forecast?",
    "Your order shipped this morning. It should arrive by Thursday afternoon.",
    "I'm sorry, I didn't catch that. Could you say the city name again?",
)


def timed_ms(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return (time.perf_counter() - started) * 1000


def first_and_total_ms(tts: TextToSpeech, text: str) -> tuple[float, float]:
    """(ms to the first audio array, ms to the whole reply) of one synthesis."""
    started = time.perf_counter()
    first = 0.0
    for i, _piece in enumerate(tts.synthesize(text)):
        if i == 0:
            first = (time.perf_counter() - started) * 1000
    return first, (time.perf_counter() - started) * 1000


def row(name: str, values: list[float]) -> str:
    return f"{name:<48} {statistics.median(values):>8.0f} {max(values):>8.0f}"


def bench_stt(stt_url: str, runs: int) -> list[str]:
    voice = load_tts()
    utterances = [speak(voice, text) for text in REPLIES]
    config = GatewayConfig()
    local = WhisperSpeechToText(config.stt_model, Path(config.model_cache_dir), threads=config.stt_threads)
    http: SpeechToText = OpenAIHttpSpeechToText(STT_MODEL, stt_url)
    http.transcribe(utterances[0])  # the server loads its model on the first request
    times: dict[str, list[float]] = {"local": [], "window": [], "http": []}
    for _ in range(runs):
        for audio in utterances:
            times["local"].append(timed_ms(partial(local.transcribe, audio)))
            times["window"].append(timed_ms(partial(local.transcribe_full_window, audio)))
            times["http"].append(timed_ms(partial(http.transcribe, audio)))
    return [
        row("STT whisper in process (trimmed), ms", times["local"]),
        row("STT whisper in process (30 s window), ms", times["window"]),
        row("STT openai_http -> faster-whisper-server, ms", times["http"]),
    ]


def bench_tts(tts_url: str, runs: int) -> list[str]:
    local = PiperTextToSpeech()
    http = OpenAIHttpTextToSpeech(OPENAI_MODEL, tts_url, api_key=TTS_KEY)
    for engine in (local, http):
        for _ in engine.synthesize("Hello."):  # the start-up warm-up
            pass
    firsts: dict[str, list[float]] = {"local": [], "http": []}
    totals: dict[str, list[float]] = {"local": [], "http": []}
    for _ in range(runs):
        for text in REPLIES:
            for name, engine in (("local", local), ("http", http)):
                first, total = first_and_total_ms(engine, text)
                firsts[name].append(first)
                totals[name].append(total)
    return [
        row("TTS piper in process: first audio, ms", firsts["local"]),
        row("TTS openai_http -> local-tts-studio: first, ms", firsts["http"]),
        row("TTS piper in process: whole reply, ms", totals["local"]),
        row("TTS openai_http -> local-tts-studio: whole, ms", totals["http"]),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="passes over the utterances")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="bench-speech-") as folder:
        stt_service, stt_url = start_stt_server(Path(folder))
        tts_service, tts_url = start_tts_server(Path(folder))
        try:
            wait_ready(stt_service, stt_url.removesuffix("/v1") + "/health")
            wait_ready(tts_service, tts_url + "/models")
            lines = bench_stt(stt_url, args.runs) + bench_tts(tts_url, args.runs)
        finally:
            stt_service.stop()
            tts_service.stop()
    print(f"{'':<48} {'p50':>8} {'max':>8}")
    print("\n".join(lines))
    print(f"({len(REPLIES)} utterances x {args.runs} run(s); both servers on this machine, {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
