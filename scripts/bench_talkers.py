#!/usr/bin/env python3
"""Many callers talking at once: voice-to-voice per caller for 1, 2, 4 and 8 simultaneous calls.

    .venv/bin/python scripts/bench_talkers.py [--callers 1,2,4,8] [--stagger-s 0.7] [--rounds 1]

Starts a gateway in this process on the offline default models (pool of the largest N), and for each
N opens N real WebRTC calls on loopback, starting 0.7 s apart; each caller speaks one real recording
(``../shared/fixtures/speech``, listed in its ``transcripts.tsv``; callers take them in turn) and
waits for the spoken answer. Voice-to-voice is the client's own: its last voiced frame sent -> the
first voiced reply frame heard (``scripts/bench_turn.py``). A call refused with 503 (``compute_busy``
or ``pool_full``: admission by capacity) is counted with the time its refusal took (the offer's
HTTP round trip). The talking capacity (``--talking-capacity``, else measured from the decode steps:
``VG_TALKING_CAPACITY`` sets it here) and its decode step times are printed first.

Prints, per N: p50 / p95 / max voice-to-voice of the answered callers, how many were admitted and
refused (by code, with p50 / max time to the 503), aggregate LLM
tokens/s over the round (output tokens of all responses / wall time), and this process's CPU
(user+sys seconds / wall, 2.0 = both cores of a 2-core box: gateway and callers together); then
one row per caller, beside its voice-to-voice alone (N=1 of the same recording, when measured) and
the gateway's own stage times of the answered turn (its ``gateway.latency`` event).
The machine's single- and two-thread decode speed is printed first (``bench_batch_decode.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
from bench_batch_decode import decode_speed

from gateway.client import RealtimeClient
from gateway.config import GatewayConfig
from gateway.loadgen.speech import trailing_silence_s
from gateway.loadgen.turns import event_for, final_turn_response, percentile, voiced_since, wait_pool_idle
from gateway.media.audio_file import read_audio_file
from gateway.server.app import METRICS, MODELS, POOL
from gateway.server.runner import free_port, running_gateway

SPEECH = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "speech"


@dataclass
class Caller:
    """One caller's outcome: ``v2v_ms`` when answered, ``refused_ms`` (HTTP status) when not."""

    recording: str
    status: int = 0
    code: str = ""  # the refusal's error code (compute_busy, pool_full)
    v2v_ms: Optional[float] = None
    refused_ms: Optional[float] = None
    heard: str = ""
    said: str = ""
    failed: str = ""  # admitted but not answered: why (the statuses of its responses)
    stages: dict[str, Optional[float]] = field(default_factory=dict)  # gateway.latency ms of the answer


def recordings(folder: Path) -> dict[str, np.ndarray]:
    """The speech recordings of ``transcripts.tsv`` (WAV files with a transcript), int16 48 kHz."""
    found = {}
    for line in (folder / "transcripts.tsv").read_text().splitlines()[1:]:
        name, _, text = line.partition("\t")
        if name.endswith(".wav") and text and not text.startswith("("):
            found[name] = read_audio_file(str(folder / name))
    return found


async def talk(url: str, name: str, audio: np.ndarray, tail_s: float) -> Caller:
    """One call: connect, speak ``audio``, wait for the answer's first voiced frame, hang up."""
    caller = Caller(name)
    client = RealtimeClient(url)
    started = time.monotonic()
    caller.status = await client.connect()
    if caller.status != 201:
        answer_s = client.answer_s if client.answer_s is not None else time.monotonic() - started
        caller.refused_ms = answer_s * 1000
        with contextlib.suppress(ValueError, KeyError, TypeError):
            caller.code = json.loads(client.error_body or "")["error"]["code"]
        await client.close()
        return caller
    try:
        await asyncio.sleep(0.3)
        client.say(audio)
        try:
            done = await final_turn_response(client, tail_s)
        except RuntimeError as exc:
            statuses = [d["response"]["status"] for d in client.of_type("response.done")]
            errors = [e.get("error", {}).get("code") for e in client.of_type("error")]
            caller.failed = f"{exc} (responses {statuses}, errors {errors})"
            return caller
        response_id = done["response"]["id"]
        with contextlib.suppress(RuntimeError):
            caller.stages = dict((await event_for(client, "gateway.latency", response_id))["latency_ms"])
        begun = await event_for(client, "output_audio_buffer.started", response_id)
        spoke_until = client.mic.finished_at - tail_s if client.mic.finished_at else None
        voiced = await voiced_since(client, client.time_of(begun) - 0.5)
        if voiced and spoke_until:
            caller.v2v_ms = (voiced[0] - spoke_until) * 1000
        heard = client.of_type("conversation.item.input_audio_transcription.completed")
        caller.heard = " ".join(t["transcript"].strip() for t in heard)
        caller.said = done["response"]["output"][0]["content"][0].get("transcript", "")
        return caller
    finally:
        await client.hangup()


async def one_round(url: str, app: Any, n: int, audio: dict[str, np.ndarray], stagger_s: float) -> dict[str, Any]:
    """N callers, started ``stagger_s`` apart; their outcomes, tokens/s and CPU share of the round."""
    names = list(audio)
    tails = {name: trailing_silence_s(samples) for name, samples in audio.items()}
    tokens_before = app[METRICS].usage().output_tokens
    cpu_before, wall_before = os.times(), time.monotonic()

    async def start(i: int) -> Caller:
        await asyncio.sleep(i * stagger_s)
        name = names[i % len(names)]
        return await talk(url, name, audio[name], tails[name])

    callers = await asyncio.gather(*(start(i) for i in range(n)))
    wall = time.monotonic() - wall_before
    cpu_after = os.times()
    cpu = (cpu_after.user - cpu_before.user + cpu_after.system - cpu_before.system) / wall
    tokens = app[METRICS].usage().output_tokens - tokens_before
    return {"n": n, "callers": callers, "tok_s": tokens / wall, "cpu": cpu}


def print_round(result: dict[str, Any], alone: dict[str, float]) -> None:
    answered = [c.v2v_ms for c in result["callers"] if c.v2v_ms is not None]
    refused = [c for c in result["callers"] if c.refused_ms is not None]
    failed = [c for c in result["callers"] if c.failed]
    print(f"\n### {result['n']} callers\n")
    if answered:
        p50, p95 = percentile(answered, 0.5), percentile(answered, 0.95)
        print(f"voice-to-voice p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {max(answered):.0f} ms; ", end="")
    print(f"admitted {len(result['callers']) - len(refused)} of {len(result['callers'])}, ", end="")
    if refused:
        codes = Counter(c.code or str(c.status) for c in refused)
        times = [c.refused_ms for c in refused if c.refused_ms is not None]
        by_code = ", ".join(f"{code} x{count}" for code, count in codes.items())
        print(f"refused {len(refused)} ({by_code}; 503 in p50 {percentile(times, 0.5):.0f} ms, ", end="")
        print(f"max {max(times):.0f} ms)", end="")
    else:
        print("refused none", end="")
    print(f"; unanswered {len(failed)}" if failed else "", end="")
    print(f"; LLM {result['tok_s']:.1f} tok/s; CPU {result['cpu']:.2f} cores\n")
    print(f"| caller | recording | voice-to-voice ms | × alone | {STAGE_HEAD} | heard -> said |")
    print("|---|---|---|---|---|---|")
    for i, c in enumerate(result["callers"]):
        v2v = f"{c.v2v_ms:.0f}" if c.v2v_ms is not None else (c.failed or f"HTTP {c.status}")
        ratio = f"{c.v2v_ms / alone[c.recording]:.2f}" if c.v2v_ms and alone.get(c.recording) else ""
        print(f"| {i + 1} | {c.recording} | {v2v} | {ratio} | {stage_cells(c)} | {c.heard[:40]!r} -> {c.said[:40]!r} |")


# The gateway's stages of the answered turn (its gateway.latency), printed per caller.
STAGE_KEYS = ("vad_end_of_turn", "stt", "llm_first_token", "first_sentence", "tts_first_chunk")
STAGE_HEAD = "end of turn / STT / LLM first token / first sentence / TTS first chunk ms"


def stage_cells(caller: Caller) -> str:
    values = [caller.stages.get(key) for key in STAGE_KEYS]
    return " / ".join("-" if value is None else f"{value:.0f}" for value in values)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callers", default="1,2,4,8", help="comma-separated N")
    parser.add_argument("--stagger-s", type=float, default=0.7)
    parser.add_argument("--speech", type=Path, default=SPEECH)
    args = parser.parse_args()
    counts = [int(n) for n in args.callers.split(",")]
    audio = recordings(args.speech)
    async with contextlib.AsyncExitStack() as stack:
        config = GatewayConfig.from_env(port=free_port(), pool_size=max(counts), max_response_tokens=40)
        url, app = await stack.enter_async_context(running_gateway(config))
        llm = app[MODELS].llm
        if hasattr(llm, "decoder"):
            one, two = decode_speed(llm, 1), decode_speed(llm, 2)
            print(f"machine: decode {one:.1f} tok/s on 1 thread, {two:.1f} on 2 ({config.llm_model})")
        print(
            f"LLM {config.llm_backend}, {config.llm_sequences} sequences, threads {config.llm_threads}/busy "
            f"{config.llm_busy_threads}/idle {config.llm_idle_threads}; admit_by_compute {config.admit_by_compute}; "
            f"{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}"
        )
        capacity = app[POOL].capacity_now()
        steps = ", ".join(f"{size}: {ms:.0f}" for size, ms in capacity.step_ms.items()) or "none"
        print(f"talking capacity {capacity.limit} ({capacity.source}); decode step ms by batch size {{{steps}}}")
        alone: dict[str, float] = {}
        for name, samples in audio.items():  # every recording alone first: the × alone baseline
            if 1 in counts:
                await wait_pool_idle(url)
                caller = await talk(url, name, samples, trailing_silence_s(samples))
                if caller.v2v_ms is not None:
                    alone[name] = caller.v2v_ms
                    print(f"alone: {name} {caller.v2v_ms:.0f} ms ({STAGE_HEAD}: {stage_cells(caller)})")
        for n in counts:
            await wait_pool_idle(url)
            print_round(await one_round(url, app, n, audio, args.stagger_s), alone)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
