#!/usr/bin/env python3
"""Barge-in latency and drain time, p50/p99 over N calls, printed as a table (ms).

    .venv/bin/python scripts/bench_bargein.py [--runs 20]

Each run is one call over WebRTC on loopback: the caller asks for a long answer, speaks over it
one second after it starts playing, and hangs up once the interruption is handled.

- from the caller's voice onset (the first voiced sample of the interruption sent) to the
  ``speech_started`` and ``output_audio_buffer.cleared`` events and to the last voiced frame of
  the interrupted answer received (0 when the answer was between two sentences); these include
  the VAD's ``min_speech_ms`` echo guard (96 ms by default);
- speech_started -> last voiced frame: what the caller still heard after the gateway's event;
- drain: hang-up request -> the unit is idle again (the gateway's own state change).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import numpy as np

from gateway.client import RealtimeClient
from gateway.config import GatewayConfig
from gateway.media.resample import Resampler
from gateway.models.base import ModelSet
from gateway.models.loader import load_models
from gateway.pool.unit import PipelineUnit, UnitState
from gateway.server.app import POOL
from gateway.server.runner import free_port, running_gateway


def synthesize(models: ModelSet, text: str) -> np.ndarray:
    """``text`` spoken by the bundled voice: int16 mono 48 kHz samples."""
    audio = np.concatenate(list(models.tts.synthesize(text)))
    resampler = Resampler(48000)
    return np.concatenate([resampler.resample_array(audio, models.tts.sample_rate), resampler.flush()])


async def one_run(url: str, unit: PipelineUnit, question: np.ndarray, interruption: np.ndarray) -> dict[str, float]:
    client = RealtimeClient(url)
    assert await client.connect() == 201
    client.say(question)
    await client.wait_for("output_audio_buffer.started", timeout=120)
    await asyncio.sleep(1.0)
    mark = len(client.events)
    # The voice starts a little way into the synthesized audio; frames leave in real time.
    onset_s = int(np.argmax(np.abs(interruption) > 1000)) / 48000
    client.say(interruption)
    spoke_at = time.monotonic() + onset_s
    started = await client.wait_for("input_audio_buffer.speech_started", timeout=20, after=mark)
    cleared = await client.wait_for("output_audio_buffer.cleared", timeout=10, after=mark)
    await asyncio.sleep(0.5)  # let any straggling frames of the old answer arrive
    voiced = [t for t in client.heard.voiced_times() if spoke_at - 2.0 <= t]
    last_old = max(voiced) if voiced else spoke_at
    result = {
        "detected": (client.time_of(started) - spoke_at) * 1000,
        "cleared": (client.time_of(cleared) - spoke_at) * 1000,
        # A reply caught between two sentences was already silent: that counts as 0.
        "heard": max(0.0, last_old - spoke_at) * 1000,
        "after_event": max(0.0, last_old - client.time_of(started)) * 1000,
    }
    hung_up = time.monotonic()
    await client.hangup()
    # The unit's state changes on its drain thread: poll it (5 ms, well below the drain's own time).
    while unit.state is not UnitState.IDLE:  # noqa: ASYNC110
        await asyncio.sleep(0.005)
    result["drain"] = (time.monotonic() - hung_up) * 1000
    return result


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    config = GatewayConfig(port=free_port(), pool_size=1, max_response_tokens=80)
    models = load_models(config)
    question = synthesize(models, "Tell me a long story about a brave little dragon.")
    interruption = synthesize(models, "Stop. What time is it?")
    results = []
    async with running_gateway(config, models) as (url, app):
        unit = app[POOL].units[0]
        for run in range(args.runs):
            result = await one_run(url, unit, question, interruption)
            print(f"run {run + 1}: " + ", ".join(f"{k} {v:.0f} ms" for k, v in result.items()), file=sys.stderr)
            results.append(result)
    rows = [
        ("detected", "caller voice onset -> speech_started received"),
        ("cleared", "caller voice onset -> output_audio_buffer.cleared"),
        ("heard", "caller voice onset -> last voiced reply frame"),
        ("after_event", "speech_started received -> last voiced reply frame"),
        ("drain", "hang-up -> unit idle (drain)"),
    ]
    width = max(len(label) for _, label in rows)
    print(f"\n{args.runs} calls, times in ms (loopback, aiortc client)\n")
    print(f"{'measure':<{width}}  {'p50':>7}  {'p99':>7}  {'max':>7}")
    for key, label in rows:
        values = [r[key] for r in results]
        p50, p99 = statistics.median(values), percentile(values, 99)
        print(f"{label:<{width}}  {p50:>7.0f}  {p99:>7.0f}  {max(values):>7.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
