#!/usr/bin/env python3
"""Compute seconds per turn, stage by stage, and the callers-per-core estimate of docs/DEPLOYMENT.md.

    .venv/bin/python scripts/bench_compute.py ../shared/fixtures/speech/*.wav [--runs 2]

Starts a gateway in this process on the offline default models, calls it over WebRTC on loopback
(one call per file and run), speaks the file and waits for the spoken answer. The numbers are the
gateway's own ``vg_model_compute_seconds`` metric (time inside each model call, the LLM's queue
wait excluded: ``gateway.models.compute.meter``), read before and after each turn, so each turn's
compute per stage is exact even though the stages overlap in time. VAD and Smart Turn run on all
caller audio, so they are also given per second of caller audio (``vg_inbound_audio_seconds_total``).

The estimate: a talking caller takes one turn every ``--turn-period-s`` seconds (speech, answer,
pauses) and sends audio all the time; its CPU share is VAD per audio second plus the per-turn
compute over the period. Callers per core = 1 / that share. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

import numpy as np

from gateway.client import RealtimeClient
from gateway.config import GatewayConfig
from gateway.media.audio_file import read_audio_file
from gateway.metrics import GatewayMetrics
from gateway.server.app import METRICS, POOL
from gateway.server.runner import free_port, running_gateway

STAGES = ("vad", "end_of_turn", "stt", "llm", "tts")


def compute_totals(metrics: GatewayMetrics) -> dict[str, tuple[float, float]]:
    """stage -> (compute seconds, model calls) so far."""
    totals = {}
    for stage in STAGES:
        seconds = metrics.registry.get_sample_value("vg_model_compute_seconds_sum", {"stage": stage}) or 0.0
        calls = metrics.registry.get_sample_value("vg_model_compute_seconds_count", {"stage": stage}) or 0.0
        totals[stage] = (seconds, calls)
    return totals


def audio_in_s(metrics: GatewayMetrics) -> float:
    return metrics.registry.get_sample_value("vg_inbound_audio_seconds_total") or 0.0


async def one_turn(url: str, samples: np.ndarray, metrics: GatewayMetrics) -> tuple[dict[str, float], float]:
    """Call, speak, wait for the answer to end, hang up. Returns (compute s per stage, caller
    audio s) of this call."""
    client = RealtimeClient(url)
    if await client.connect() != 201:
        raise RuntimeError(f"offer refused: {client.status} {client.error_body}")
    before, heard_before = compute_totals(metrics), audio_in_s(metrics)
    mark = len(client.events)
    client.say(samples)
    await client.wait_for("response.done", timeout=120, after=mark)
    await client.wait_for("output_audio_buffer.stopped", timeout=60, after=mark)
    await asyncio.sleep(0.3)
    after, heard_after = compute_totals(metrics), audio_in_s(metrics)
    await client.hangup()
    per_stage = {stage: after[stage][0] - before[stage][0] for stage in STAGES}
    return per_stage, heard_after - heard_before


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--turn-period-s", type=float, default=10.0, help="one turn every this many seconds")
    args = parser.parse_args()
    config = GatewayConfig(port=free_port(), pool_size=1)
    clips = [(path.name, read_audio_file(path)) for path in args.files]
    turns: list[dict[str, float]] = []
    audio_s = 0.0
    async with running_gateway(config) as (url, app):
        metrics = app[METRICS]
        for name, samples in clips:
            for run in range(args.runs):
                per_stage, heard = await one_turn(url, samples, metrics)
                turns.append(per_stage)
                audio_s += heard
                shown = ", ".join(f"{stage} {per_stage[stage] * 1000:.0f} ms" for stage in STAGES)
                print(f"{name} run {run + 1}: {shown}; caller audio {heard:.1f} s", file=sys.stderr, flush=True)
                for _ in range(100):  # the unit drains after the hang-up
                    if app[POOL].snapshot()["in_use"] == 0:
                        break
                    await asyncio.sleep(0.1)
    print(
        f"\n{len(turns)} turns, {audio_s:.1f} s of caller audio, models: LLM {config.llm_model} "
        f"({config.llm_backend}, {config.llm_threads} thread), STT {config.stt_model}, TTS {config.tts_voice}, "
        f"turn detector {config.turn_detector}\n"
    )
    print("| stage | compute per turn, median (s) | mean (s) | max (s) |")
    print("|---|---|---|---|")
    means = {}
    for stage in STAGES:
        values = [turn[stage] for turn in turns]
        means[stage] = statistics.fmean(values)
        print(f"| {stage} | {statistics.median(values):.3f} | {means[stage]:.3f} | {max(values):.3f} |")
    total = sum(means.values())
    print(f"| all stages | | {total:.3f} | |")
    streaming = (means["vad"] + means["end_of_turn"]) * len(turns) / audio_s if audio_s else 0.0
    per_turn = means["stt"] + means["llm"] + means["tts"]
    share = streaming + per_turn / args.turn_period_s
    print(f"\nVAD + Smart Turn: {streaming * 1000:.1f} ms of compute per second of caller audio.")
    print(
        f"STT + LLM + TTS: {per_turn:.2f} s per turn. One turn every {args.turn_period_s:g} s: "
        f"{share:.3f} core per talking caller, so about {1 / share:.1f} callers per core."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
