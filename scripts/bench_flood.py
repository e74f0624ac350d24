#!/usr/bin/env python3
"""A WebSocket client flooding large audio appends beside a WebRTC caller: what the caller gets, quiet vs flood.

    .venv/bin/python scripts/bench_flood.py [--question WAV] [--append-mib 8] [--rate 20] [--seconds 6]
                                            [--format pcm|pcmu|pcma] [--runs 1]

Starts a gateway in this process on the offline default models (a pool of 2). A real WebRTC caller
(aiortc, ``gateway.client.RealtimeClient``) speaks a recording and waits for the spoken answer:
once to warm up, then quiet, then while a second process floods ``GET /v1/realtime`` with
``input_audio_buffer.append`` messages of ``--append-mib`` MiB each (random bytes as audio of
``--format``) at ``--rate`` a second for ``--seconds`` (quiet and flood ``--runs`` times each). The
flooder connects first and floods as the caller starts to speak (its session's start is not the
flood's cost); it runs at nice 19, as if elsewhere (on a 2-core box its masking of 8 MiB frames
would otherwise take CPU from the gateway that a remote flooder does not). The flood is
bounded: the flooder stops once its time is up, whatever it got sent; loopback only.

Per run: the caller's frame-arrival gaps (p50 / p99 / max, ms, over the ``--seconds`` + 4 s from the
moment it starts speaking), its voice-to-voice (its last voiced frame sent -> the first voiced
reply frame heard, as ``scripts/bench_turn.py`` measures it), the growth of this process's RSS over
the same window (the gateway and the caller; the flooder is its own process), and what the flooder
sent and was told. The machine's llama.cpp decode speed is printed first; quote it beside latency.
Run it under ``flock -x /work/cpu.lock``; set PYTHONPATH to the checkout to measure (the code run
is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Optional

import aiohttp
import numpy as np

SPEECH = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "speech"
SETTLE_S = 2.0
WINDOW_EXTRA_S = 4.0  # the window measured: the flood's seconds and this much after
FORMATS = {"pcm": {"type": "audio/pcm", "rate": 24000}, "pcmu": {"type": "audio/pcmu"}, "pcma": {"type": "audio/pcma"}}


# ----- the flooder (its own process: its CPU and memory are not the gateway's) -----
async def flood(url: str, fmt: str, append_mib: float, rate: float, seconds: float) -> dict[str, Any]:
    """Connect to ``url``'s Realtime WebSocket, then send ``append_mib`` MiB appends at ``rate`` a
    second until ``seconds`` are up (a send still under way then is abandoned); what was sent and
    the error codes received."""
    chars = int(append_mib * 2**20) - 128  # the whole message within append_mib MiB
    size = (chars - chars % 8) * 3 // 4  # whole 16-bit samples, no base64 padding
    audio = base64.b64encode(np.random.default_rng(11).integers(0, 256, size, np.uint8).tobytes()).decode()
    payload = json.dumps({"type": "input_audio_buffer.append", "audio": audio})
    codes: list[str] = []
    sent = 0
    async with aiohttp.ClientSession() as http:
        ws = await http.ws_connect(url.replace("http://", "ws://") + "/v1/realtime", protocols=("realtime",))

        async def read() -> None:
            async for message in ws:
                if message.type is aiohttp.WSMsgType.TEXT:
                    event = json.loads(message.data)
                    if event["type"] == "error":
                        codes.append(event["error"]["code"])

        reader = asyncio.ensure_future(read())
        await ws.send_str(
            json.dumps({"type": "session.update", "session": {"audio": {"input": {"format": FORMATS[fmt]}}}})
        )
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # "go"
        started = time.monotonic()
        end = started + seconds
        with contextlib.suppress(asyncio.TimeoutError):
            for index in range(int(rate * seconds)):
                await asyncio.sleep(max(0.0, started + index / rate - time.monotonic()))
                await asyncio.wait_for(ws.send_str(payload), max(0.01, end - time.monotonic()))
                sent += 1
        await asyncio.sleep(1.0)  # errors still on their way
        reader.cancel()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(ws.close(), 3)  # else the session's close drops the connection
    return {"sent": sent, "mib": sent * len(payload) / 2**20, "codes": codes}


# ----- the caller -----
def rss_mb() -> float:
    """This process's resident set, MB (/proc/self/status VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def one_run(url: str, audio: np.ndarray, tail_s: float, args: argparse.Namespace, flooding: bool) -> dict:
    """One call speaking ``audio``, with or without the flooder: gaps, voice-to-voice, RSS growth."""
    from gateway.client import RealtimeClient
    from gateway.loadgen.turns import final_turn_response, voiced_since, wait_pool_idle

    await wait_pool_idle(url)
    client = RealtimeClient(url, gateway_events=())
    if await client.connect() != 201:
        raise RuntimeError("the caller's offer was refused")
    flooder: Optional[asyncio.subprocess.Process] = None
    try:
        await asyncio.sleep(SETTLE_S)
        if flooding:
            flooder = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--flood-child", url, "--format", args.format,
                "--append-mib", str(args.append_mib), "--rate", str(args.rate), "--seconds", str(args.seconds),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert flooder.stdin is not None and flooder.stdout is not None
            await flooder.stdout.readline()  # "ready": connected, its session started
            await asyncio.sleep(SETTLE_S)  # the session's own start (its prompt read ahead) is not the flood's
            flooder.stdin.write(b"go\n")
            await flooder.stdin.drain()
        rss = [rss_mb()]
        start = time.monotonic()
        window_end = start + args.seconds + WINDOW_EXTRA_S

        async def sample_rss() -> None:
            while time.monotonic() < window_end:
                rss.append(rss_mb())
                await asyncio.sleep(0.05)

        sampler = asyncio.ensure_future(sample_rss())
        client.say(audio)
        done = await final_turn_response(client, tail_s)
        spoke_until = client.mic.finished_at - tail_s if client.mic.finished_at else None
        voiced = await voiced_since(client, spoke_until or start)
        v2v = (voiced[0] - spoke_until) * 1000 if voiced and spoke_until else None
        await sampler
        arrivals = np.asarray([t for t in client.heard.arrivals if start <= t <= window_end])
        gaps = np.diff(arrivals) * 1000
        result = {
            "gap_p50": float(np.percentile(gaps, 50)),
            "gap_p99": float(np.percentile(gaps, 99)),
            "gap_max": float(gaps.max()),
            "gap_max_at_s": float(arrivals[int(gaps.argmax()) + 1] - start),
            "v2v": v2v,
            "rss_growth": max(rss) - rss[0],
            "status": done["response"]["status"],
        }
        if flooder is not None:
            out, _ = await asyncio.wait_for(flooder.communicate(), 60)
            result["flood"] = json.loads(out.decode().splitlines()[-1])
        return result
    finally:
        if flooder is not None and flooder.returncode is None:
            flooder.kill()
            await flooder.wait()
        await client.hangup()


def cell(values: list[Optional[float]], fmt: str = "{:.0f}") -> str:
    """The median of the known values (and each run's, when more than one)."""
    known = [v for v in values if v is not None]
    if not known:
        return "-"
    median = fmt.format(statistics.median(known))
    return median if len(values) == 1 else f"{median} ({', '.join(fmt.format(v) for v in known)})"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--question", type=Path, default=SPEECH / "pocketsphinx_librivox_0880.wav")
    parser.add_argument("--append-mib", type=float, default=8.0, help="size of each append message, MiB")
    parser.add_argument("--rate", type=float, default=20.0, help="appends a second")
    parser.add_argument("--seconds", type=float, default=6.0, help="how long the flood lasts")
    parser.add_argument("--format", choices=sorted(FORMATS), default="pcm", help="the flooder's input format")
    parser.add_argument("--runs", type=int, default=1, help="quiet and flood calls each")
    parser.add_argument("--flood-child", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flood_child:
        os.nice(19)  # a flooder elsewhere: its own CPU (base64, masking) is not the gateway's
        print(json.dumps(await flood(args.flood_child, args.format, args.append_mib, args.rate, args.seconds)))
        return 0

    from bench_batch_decode import decode_speed

    import gateway
    from gateway.config import GatewayConfig
    from gateway.loadgen.speech import trailing_silence_s
    from gateway.media.audio_file import read_audio_file
    from gateway.server.app import MODELS
    from gateway.server.runner import free_port, running_gateway

    audio = read_audio_file(str(args.question))
    tail_s = trailing_silence_s(audio)
    config = GatewayConfig.from_env(port=free_port(), pool_size=2, talking_capacity=2, max_response_tokens=40)
    async with running_gateway(config) as (url, app):
        print(f"code: {Path(gateway.__file__).parent.parent}")
        llm = app[MODELS].llm
        if hasattr(llm, "decoder"):
            one, two = decode_speed(llm, 1), decode_speed(llm, 2)
            print(f"machine: decode {one:.1f} tok/s on 1 thread, {two:.1f} on 2 ({config.llm_model}); ", end="")
        print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        await one_run(url, audio, tail_s, args, flooding=False)  # warm-up: the first call's allocations
        runs: dict[str, list[dict]] = {"quiet": [], "flood": []}
        for _ in range(args.runs):
            for name in runs:
                result = await one_run(url, audio, tail_s, args, flooding=name == "flood")
                print(f"{name}: {json.dumps({k: v for k, v in result.items() if k != 'status'})}", file=sys.stderr)
                runs[name].append(result)
    print(
        f"\n{args.question.name} ({audio.size / 48000:.1f} s) from a WebRTC caller; flood: {args.append_mib:g} MiB "
        f"appends of {args.format} at {args.rate:g}/s for {args.seconds:g} s over a WebSocket; gaps over "
        f"{args.seconds + WINDOW_EXTRA_S:g} s from the start of speech; {args.runs} run(s), median (each run)\n"
    )
    print(
        "| run | frame gap p50 ms | frame gap p99 ms | frame gap max ms | voice-to-voice ms | RSS growth MB | flood |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, results in runs.items():
        floods = [r["flood"] for r in results if "flood" in r]
        told = ", ".join(
            f"{f['sent']} sent ({f['mib']:.0f} MiB), errors {dict((c, f['codes'].count(c)) for c in set(f['codes']))}"
            for f in floods
        )
        print(
            f"| {name} | {cell([r['gap_p50'] for r in results], '{:.1f}')} | "
            f"{cell([r['gap_p99'] for r in results], '{:.1f}')} | {cell([r['gap_max'] for r in results])} | "
            f"{cell([r['v2v'] for r in results])} | {cell([r['rss_growth'] for r in results])} | {told or '-'} |"
        )
    quiet, flooded = runs["quiet"], runs["flood"]
    p99 = statistics.median(r["gap_p99"] for r in flooded) / statistics.median(r["gap_p99"] for r in quiet)
    print(f"\nflood / quiet: frame gap p99 {p99:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
