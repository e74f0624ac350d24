#!/usr/bin/env python3
"""Barge-in latency and drain time, p50/p99 over N calls, printed as tables (ms).

    .venv/bin/python scripts/bench_bargein.py [--runs 20] [--recording FILE]

(e.g. ``--recording ../shared/fixtures/speech/pocketsphinx_goforward.raw``.)

Each run is one call over WebRTC on loopback: the caller asks for a long answer, speaks over it
one second after it starts playing, and hangs up once the interruption is handled. The caller is
a second voice: the bundled voice made deterministic and raised in pitch (as ``tests/conftest.py``
``caller_speech`` makes it), or, for the interruption, a real recording (``--recording``: a WAV
or 16 kHz raw s16 file, e.g. from ``../shared/fixtures/speech``).

Interruption ("Wait, stop." in the caller voice, then the recording if given):

- from the caller's voice onset (the first voiced sample of the interruption sent) to the
  ``speech_started`` and ``output_audio_buffer.cleared`` events and to the last voiced frame of
  the interrupted answer received (0 when the answer was between two sentences); these include
  the VAD's ``min_speech_ms`` echo guard (96 ms by default);
- speech_started -> last voiced frame: what the caller still heard after the gateway's event;
- decided: voice onset -> ``gateway.barge_in`` received (the words were judged); and the same
  decision in the gateway's input-stream time (its ``decided_ms - audio_start_ms``: the rules and
  the probes, without the audio's way in);
- drain: hang-up request -> the unit is idle again (the gateway's own state change).

Backchannels ("Yeah.", "Okay.", "Right." in the caller voice) under the answer: voice onset ->
``gateway.barge_in`` (decision ``resumed``) received; the longest silence heard in the reply from
the onset to 3 s after it (the pause, or a gap between two sentences); and how often the answer
went on (same response played to its end, no ``speech_started``, no second response).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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

BACKCHANNELS = ("Yeah.", "Okay.", "Right.")


def synthesize(models: ModelSet, text: str) -> np.ndarray:
    """``text`` spoken by the bundled voice: int16 mono 48 kHz samples."""
    audio = np.concatenate(list(models.tts.synthesize(text)))
    resampler = Resampler(48000)
    return np.concatenate([resampler.resample_array(audio, models.tts.sample_rate), resampler.flush()])


def caller_voice(text: str) -> np.ndarray:
    """``text`` in a second voice: the bundled voice with Piper's noise off (the same samples every
    run), read 12 % fast (about two semitones higher); int16 mono 48 kHz."""
    from gateway.models.piper_tts import PiperTextToSpeech

    tts = PiperTextToSpeech(noise_scale=0.0, noise_w_scale=0.0)
    audio = np.concatenate(list(tts.synthesize(text)))
    resampler = Resampler(48000)
    return np.concatenate([resampler.resample_array(audio, int(tts.sample_rate * 1.12)), resampler.flush()])


def recording(path: str) -> np.ndarray:
    """A WAV (any rate, mono or stereo s16) or raw 16 kHz s16 file as int16 mono 48 kHz."""
    import wave

    if path.endswith(".raw"):
        samples, rate = np.fromfile(path, np.int16), 16000
    else:
        with wave.open(path) as wav:
            rate = wav.getframerate()
            samples = np.frombuffer(wav.readframes(wav.getnframes()), np.int16)
            samples = samples.reshape(-1, wav.getnchannels())[:, 0].copy()
    resampler = Resampler(48000)
    return np.concatenate([resampler.resample_array(samples, rate), resampler.flush()])


def onset_s(audio: np.ndarray) -> float:
    """Seconds into ``audio`` of its first voiced sample."""
    return int(np.argmax(np.abs(audio) > 1000)) / 48000


async def one_backchannel_run(url: str, question: np.ndarray, backchannel: np.ndarray) -> dict[str, float]:
    client = RealtimeClient(url)
    assert await client.connect() == 201
    client.say(question)
    started = await client.wait_for("output_audio_buffer.started", timeout=120)
    await asyncio.sleep(1.0)
    mark = len(client.events)
    client.say(backchannel)
    spoke_at = time.monotonic() + onset_s(backchannel)
    decided = await client.wait_for("gateway.barge_in", timeout=20, after=mark)
    stopped = await client.wait_for("output_audio_buffer.stopped", timeout=180, after=mark)
    await asyncio.sleep(1.0)
    voiced = [t for t in client.heard.voiced_times() if spoke_at - 0.1 <= t <= spoke_at + 3.0]
    gaps = [b - a for a, b in itertools.pairwise(voiced)]
    turn_events = ("input_audio_buffer.speech_started", "response.created", "output_audio_buffer.cleared")
    kept = (
        decided["decision"] == "resumed"
        and stopped["response_id"] == started["response_id"]
        and not [e for e in client.events[mark:] if e["type"] in turn_events]
    )
    await client.hangup()
    return {
        "decided": (client.time_of(decided) - spoke_at) * 1000,
        "gap": max(gaps, default=0.0) * 1000,
        "kept": 100.0 if kept else 0.0,
    }


async def one_run(url: str, unit: PipelineUnit, question: np.ndarray, interruption: np.ndarray) -> dict[str, float]:
    client = RealtimeClient(url)
    assert await client.connect() == 201
    client.say(question)
    await client.wait_for("output_audio_buffer.started", timeout=120)
    await asyncio.sleep(1.0)
    mark = len(client.events)
    # The voice starts a little way into the audio; frames leave in real time.
    client.say(interruption)
    spoke_at = time.monotonic() + onset_s(interruption)
    started = await client.wait_for("input_audio_buffer.speech_started", timeout=20, after=mark)
    cleared = await client.wait_for("output_audio_buffer.cleared", timeout=10, after=mark)
    decided = await client.wait_for("gateway.barge_in", timeout=10, after=mark)
    await asyncio.sleep(0.5)  # let any straggling frames of the old answer arrive
    voiced = [t for t in client.heard.voiced_times() if spoke_at - 2.0 <= t]
    last_old = max(voiced) if voiced else spoke_at
    result = {
        "detected": (client.time_of(started) - spoke_at) * 1000,
        "cleared": (client.time_of(cleared) - spoke_at) * 1000,
        # A reply caught between two sentences was already silent: that counts as 0.
        "heard": max(0.0, last_old - spoke_at) * 1000,
        "after_event": max(0.0, last_old - client.time_of(started)) * 1000,
        "decided": (client.time_of(decided) - spoke_at) * 1000,
        # The same decision in the gateway's input-stream time, from where its VAD found the speech:
        # what the rules and the probes took, without the way in (the client's send, RTP, decode).
        "in_stream": float(decided["decided_ms"] - decided["audio_start_ms"]),
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


def print_table(title: str, rows: list[tuple[str, str]], results: list[dict[str, float]]) -> None:
    width = max(len(label) for _, label in rows)
    print(f"\n{title}\n")
    print(f"{'measure':<{width}}  {'p50':>7}  {'p99':>7}  {'max':>7}")
    for key, label in rows:
        values = [r[key] for r in results]
        p50, p99 = statistics.median(values), percentile(values, 99)
        print(f"{label:<{width}}  {p50:>7.0f}  {p99:>7.0f}  {max(values):>7.0f}")


INTERRUPT_ROWS = [
    ("detected", "caller voice onset -> speech_started received"),
    ("cleared", "caller voice onset -> output_audio_buffer.cleared"),
    ("heard", "caller voice onset -> last voiced reply frame"),
    ("after_event", "speech_started received -> last voiced reply frame"),
    ("decided", "caller voice onset -> gateway.barge_in (interrupted)"),
    ("in_stream", "speech start -> decision, input-stream time"),
    ("drain", "hang-up -> unit idle (drain)"),
]
BACKCHANNEL_ROWS = [
    ("decided", "caller voice onset -> gateway.barge_in (resumed)"),
    ("gap", "longest silence heard in the reply (onset .. +3 s)"),
    ("kept", "answer went on, unanswered (% of calls)"),
]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--recording", help="a real recording to interrupt with (WAV, or 16 kHz raw s16)")
    args = parser.parse_args()
    config = GatewayConfig(port=free_port(), pool_size=1, max_response_tokens=80)
    models = load_models(config)
    question = synthesize(models, "Tell me a long story about a brave little dragon.")
    interruptions = {'"Wait, stop." (caller voice)': caller_voice("Wait, stop.")}
    if args.recording:
        interruptions[f"{args.recording.rsplit('/', 1)[-1]} (recording)"] = recording(args.recording)
    async with running_gateway(config, models) as (url, app):
        unit = app[POOL].units[0]
        for name, interruption in interruptions.items():
            results = []
            for run in range(args.runs):
                result = await one_run(url, unit, question, interruption)
                print(
                    f"{name} run {run + 1}: " + ", ".join(f"{k} {v:.0f} ms" for k, v in result.items()), file=sys.stderr
                )
                results.append(result)
            print_table(
                f"Interruption {name}, {args.runs} calls, ms (loopback, aiortc client)", INTERRUPT_ROWS, results
            )
        for text in BACKCHANNELS:
            results = []
            for run in range(args.runs):
                result = await one_backchannel_run(url, question, caller_voice(text))
                print(f"{text} run {run + 1}: " + ", ".join(f"{k} {v:.0f}" for k, v in result.items()), file=sys.stderr)
                results.append(result)
            print_table(f"Backchannel {text!r} (caller voice), {args.runs} calls", BACKCHANNEL_ROWS, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
