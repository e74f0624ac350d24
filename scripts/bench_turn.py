#!/usr/bin/env python3
"""Per-turn latency of real calls, stage by stage, printed as tables (ms).

    .venv/bin/python scripts/bench_turn.py ../shared/fixtures/speech/*.wav [--runs 5]

Starts a gateway in this process on the offline default models (or uses ``--url`` of a running
one), calls it over WebRTC on loopback with aiortc, speaks each file as the microphone, and waits
for the spoken answer; ``--runs`` calls per file, each a new call. The gateway's own timestamps come
from its ``gateway.latency`` event; the client measures its own voice-to-voice: the caller's last
voiced frame (the end of the file less its trailing silence, found with the VAD model) -> the first
voiced reply frame received. Per file: each run and the median. Over all calls: p50, p95 and max of
each stage, of voice-to-voice, and of the gateway's own overhead (client voice-to-voice minus the
end-of-turn wait minus the model stages STT, LLM first token, first sentence, TTS first chunk).

``--preemptive both`` alternates the preemptive reply off and on call by call (``off`` first) in
the same gateway and prints each setting's summary, and how often the preemptive reply was used,
discarded or skipped (the pool's counts); ``--drafts both`` does the same for the drafts made while
the caller speaks (``stt_drafts``; both ``both``: the four settings in turn), an A/B in one run on
one box, so that the machine's noise falls on both alike. A preemptive reply's LLM first token, first sentence and
TTS first chunk can be negative: done before the turn was asked (its end decided and transcribed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from bench_batch_decode import decode_speed

from gateway.client import RealtimeClient
from gateway.config import GatewayConfig
from gateway.loadgen.speech import trailing_silence_s
from gateway.loadgen.turns import event_for, final_turn_response, percentile, voiced_since, wait_pool_idle
from gateway.media.audio_file import read_audio_file
from gateway.pipeline.latency import DETAIL, STAGES
from gateway.server.app import CONFIG, MODELS, POOL
from gateway.server.runner import free_port, running_gateway

# (key, label): the gateway's stages (its gateway.latency keys, in order), then this client's own
# voice-to-voice, measured on what it sent and heard, then where the turn's time went in finer steps
# (its ``detail_ms``: waits for a shared model apart from compute; a reply held from the pause
# started before the turn's response was asked, so its ``llm_queue`` is negative).
ROWS: tuple[tuple[str, str], ...] = (
    *STAGES,
    ("client_voice_to_voice", "Voice-to-voice (client, loopback)"),
    ("prompt_read", "LLM prompt tokens read in the turn (count)"),
    *((f"detail_{key}", f"  detail: {key}") for key, _start, _end in DETAIL),
)


# ``--tools``: a session with function tools, as an app with a weather and a booking tool would
# set them (the first turn reads their schemas unless the call's warm read them already).
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    {
        "type": "function",
        "name": "book_table",
        "description": "Book a restaurant table.",
        "parameters": {
            "type": "object",
            "properties": {"restaurant": {"type": "string"}, "time": {"type": "string"}, "people": {"type": "integer"}},
            "required": ["restaurant", "time", "people"],
        },
    },
]


async def one_call(url: str, audio: np.ndarray, tail_s: float = 0.0, session: dict | None = None) -> dict:
    """One call speaking ``audio`` (int16 mono 48 kHz): the gateway's latency_ms of the answered
    turn, plus client_voice_to_voice (ms), _heard (the caller's transcript) and _said (the answer)."""
    await wait_pool_idle(url)
    client = RealtimeClient(url)
    status = await client.connect(session=session)
    if status != 201:
        raise RuntimeError(f"offer refused: HTTP {status}")
    try:
        await asyncio.sleep(0.3)
        client.say(audio)
        done = await final_turn_response(client, tail_s)
        response_id = done["response"]["id"]
        latency = await event_for(client, "gateway.latency", response_id)
        started = await event_for(client, "output_audio_buffer.started", response_id)
        result = dict(latency["latency_ms"])
        result.update({f"detail_{key}": ms for key, ms in (latency.get("detail_ms") or {}).items()})
        spoke_until = client.mic.finished_at - tail_s if client.mic.finished_at else None
        reply_from = client.time_of(started) - 0.5
        voiced = await voiced_since(client, reply_from)
        result["client_voice_to_voice"] = round((voiced[0] - spoke_until) * 1000, 1) if voiced and spoke_until else None
        if voiced and spoke_until and result.get("voice_to_voice") is not None:
            # One process, one clock: split what the client adds to the gateway's own voice-to-voice.
            result["outbound"] = round((voiced[0] - client.time_of(started)) * 1000, 1)
            added = result["client_voice_to_voice"] - result["voice_to_voice"]
            result["inbound"] = round(added - result["outbound"], 1)
        # A caller who pauses mid-sentence makes several user items: what was heard is all of them.
        transcripts = client.of_type("conversation.item.input_audio_transcription.completed")
        result["_heard"] = " ".join(t["transcript"].strip() for t in transcripts if t["transcript"].strip())
        result["_said"] = done["response"]["output"][0]["content"][0].get("transcript", "")
        usage = done["response"].get("usage") or {}
        if usage.get("input_tokens"):  # engines that count them (llama.cpp): what the turn itself read
            result["prompt_read"] = usage["input_tokens"] - usage["input_token_details"]["cached_tokens"]
        return result
    finally:
        await client.hangup()


MODEL_STAGES = ("stt", "llm_first_token", "first_sentence", "tts_first_chunk")


def overhead_ms(result: dict, total: str = "client_voice_to_voice") -> float | None:
    """Voice-to-voice (``total``: the client's, or the gateway's own "voice_to_voice") less the
    end-of-turn wait and the model stages. Of the client's: transport, jitter buffers, queue hops,
    the Realtime layer, playout and the voice's lead-in; of the gateway's: only what is inside it."""
    parts = [result.get(key) for key in (total, "vad_end_of_turn", *MODEL_STAGES)]
    if any(part is None for part in parts):
        return None
    return round(parts[0] - sum(parts[1:]), 1)


def print_summary(results: list[dict]) -> None:
    """p50 / p95 / max of every row (and the overhead) over all calls."""
    rows = [
        *ROWS,
        ("overhead", "Gateway overhead (client v2v - wait - models)"),
        ("internal", "  of it: inside the gateway (gateway v2v - wait - models)"),
        ("inbound", "  of it: speech end -> its last chunk at the VAD"),
        ("outbound", "  of it: playback start -> first voiced frame heard"),
    ]
    width = max(len(label) for _, label in rows)
    print(f"{'stage':<{width}}  {'p50':>6}  {'p95':>6}  {'max':>6}")
    print("-" * (width + 26))
    for key, label in rows:
        computed = {"overhead": overhead_ms, "internal": lambda r: overhead_ms(r, "voice_to_voice")}
        values = [computed[key](r) if key in computed else r.get(key) for r in results]
        known = [v for v in values if v is not None]
        if not known:
            print(f"{label:<{width}}  {'-':>6}  {'-':>6}  {'-':>6}")
            continue
        print(f"{label:<{width}}  {percentile(known, 0.5):>6.0f}  {percentile(known, 0.95):>6.0f}  {max(known):>6.0f}")


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


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("audio", nargs="+", help="speech files (WAV or anything FFmpeg decodes)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--url", help="a running gateway (default: start one in this process)")
    parser.add_argument("--tools", action="store_true", help="give each call's session two function tools")
    parser.add_argument(
        "--forget",
        action="store_true",
        help="drop the LLM's cached prompts before each call (every call a new caller with new words; "
        "otherwise a repeated recording finds its whole prompt cached)",
    )
    parser.add_argument(
        "--preemptive",
        choices=("config", "on", "off", "both"),
        default="config",
        help="the preemptive reply: as configured, on, off, or both (alternating call by call, off first)",
    )
    parser.add_argument(
        "--drafts",
        choices=("config", "on", "off", "both"),
        default="config",
        help="drafts while the caller speaks (stt_drafts): as configured, on, off, or both (alternating)",
    )
    args = parser.parse_args()
    try:
        recordings = {path: read_audio_file(path) for path in args.audio}
    except ValueError as exc:
        print(f"bench_turn: {exc}", file=sys.stderr)
        return 2
    tails = {path: trailing_silence_s(audio) for path, audio in recordings.items()}

    async with contextlib.AsyncExitStack() as stack:
        url, app = args.url, None
        if url is None:
            started = time.monotonic()
            config = GatewayConfig.from_env(port=free_port(), pool_size=1, max_response_tokens=40)
            url, app = await stack.enter_async_context(running_gateway(config))
            print(f"gateway up in {time.monotonic() - started:.1f} s (models loaded)", file=sys.stderr)
            print(
                f"LLM: {config.llm_model} on {config.llm_backend}; turn detector: {config.turn_detector}; "
                f"read ahead at the pause: {config.llm_read_ahead}"
            )
            llm = app[MODELS].llm
            if hasattr(llm, "decoder"):
                one, two = decode_speed(llm, 1), decode_speed(llm, 2)
                print(f"machine: decode {one:.1f} tok/s on 1 thread, {two:.1f} on 2")
        choices = {"config": [None], "on": [True], "off": [False], "both": [False, True]}
        settings = [
            {name: value for name, value in (("preemptive_reply", p), ("stt_drafts", d)) if value is not None}
            for p in choices[args.preemptive]
            for d in choices[args.drafts]
        ]
        if app is None and settings != [{}]:
            print("bench_turn: --preemptive and --drafts need the gateway started here (no --url)", file=sys.stderr)
            return 2
        every: list[dict] = []
        for path, audio in recordings.items():
            results = []
            for run in range(args.runs * len(settings)):
                setting = settings[run % len(settings)]
                for name, value in setting.items():
                    setattr(app[CONFIG], name, value)  # the next call's CallSettings default
                if args.forget and app is not None and hasattr(app[MODELS].llm, "decoder"):
                    app[MODELS].llm.decoder.forget()
                before = preemptive_counts(app)
                result = await one_call(
                    url, audio, tails[path], {"type": "realtime", "tools": TOOLS} if args.tools else None
                )
                after = preemptive_counts(app)
                result["_setting"] = setting
                result["_outcomes"] = {key: after[key] - before.get(key, 0) for key in after}
                print(
                    f"run {run + 1} ({described(setting) or 'as configured'}, {result['_outcomes']}): "
                    f"heard {result['_heard']!r} -> said {result['_said']!r}",
                    file=sys.stderr,
                )
                results.append(result)
            print(
                f"\n{Path(path).name}: {len(audio) / 48000:.1f} s ({tails[path]:.2f} s trailing silence), "
                f"{args.runs} calls, times in ms\n"
            )
            print_table(results)
            every += results
    if len(recordings) > 1 or args.runs > 1:
        for setting in settings:
            calls = [r for r in every if r["_setting"] == setting]
            named = f", {described(setting)}" if setting else ""
            print(f"\nall {len(calls)} calls over {len(recordings)} recordings{named}, times in ms\n")
            print_summary(calls)
            outcomes: dict[str, int] = {}
            for r in calls:
                for key, value in r["_outcomes"].items():
                    outcomes[key] = outcomes.get(key, 0) + value
            if outcomes:
                print("preemptive replies: " + ", ".join(f"{key} {value}" for key, value in outcomes.items()))
    return 0


def described(setting: dict[str, bool]) -> str:
    """A setting of the A/B as words: "preemptive reply on, drafts off"."""
    names = {"preemptive_reply": "preemptive reply", "stt_drafts": "drafts"}
    return ", ".join(f"{names[name]} {'on' if value else 'off'}" for name, value in setting.items())


def preemptive_counts(app) -> dict[str, int]:
    """The pool's preemptive replies so far by outcome (used, discarded, skipped); {} with --url."""
    totals: dict[str, int] = {}
    if app is None:
        return totals
    for unit in app[POOL].units:
        for key, value in unit.preemptive.counts().items():
            totals[key] = totals.get(key, 0) + value
    return totals


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
