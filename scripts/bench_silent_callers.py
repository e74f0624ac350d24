#!/usr/bin/env python3
"""What silent connected callers cost: the gateway against a plain aiortc echo server, printed as a table.

    .venv/bin/python scripts/bench_silent_callers.py [--callers 4] [--seconds 20]

Each side is served in this process on loopback, and called by ``--callers`` aiortc clients
(``gateway.client.RealtimeClient``) that say nothing: first an echo server (aiortc only: it answers
the same ``POST /v1/realtime/calls`` offer, sends ``session.created`` on the data channel and plays
each caller's own audio back), then the gateway on its offline default models (Silero VAD on every
caller's frames, the outbound track paced in 20 ms frames). Over ``--seconds`` after a 3 s settle,
each client records when every 20 ms frame of the server's track arrives; the table gives the gaps
between frames (p50 / p99 / max, ms, over all callers), late frames (gap > 40 ms) and the process's
CPU, and the gateway's ratio to the echo server. Loopback only; it stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from aiohttp import web
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaRelay

from gateway.client import RealtimeClient
from gateway.config import GatewayConfig
from gateway.server.runner import free_port, running_gateway

SETTLE_S = 3.0


@contextlib.asynccontextmanager
async def echo_server() -> AsyncIterator[str]:
    """An aiortc echo answerer on loopback that speaks just enough of the gateway's offer route
    for RealtimeClient: 201 + Location, ``session.created`` on ``oai-events``, DELETE to hang up."""
    relay = MediaRelay()
    calls: dict[str, RTCPeerConnection] = {}

    async def offer(request: web.Request) -> web.Response:
        pc = RTCPeerConnection()
        call_id = f"echo_{uuid.uuid4().hex[:12]}"
        calls[call_id] = pc

        @pc.on("datachannel")
        def on_channel(channel: Any) -> None:
            @channel.on("open")
            def on_open() -> None:
                channel.send(json.dumps({"type": "session.created", "session": {}}))

            if channel.readyState == "open":
                on_open()

        @pc.on("track")
        def on_track(track: Any) -> None:
            pc.addTrack(relay.subscribe(track))

        await pc.setRemoteDescription(RTCSessionDescription(sdp=await request.text(), type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
        return web.Response(
            status=201,
            text=pc.localDescription.sdp,
            content_type="application/sdp",
            headers={"Location": f"/v1/realtime/calls/{call_id}"},
        )

    async def hangup(request: web.Request) -> web.Response:
        pc = calls.pop(request.match_info["call_id"], None)
        if pc is not None:
            await pc.close()
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/v1/realtime/calls", offer)
    app.router.add_delete("/v1/realtime/calls/{call_id}", hangup)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for pc in calls.values():
            await pc.close()
        await runner.cleanup()


async def measure(url: str, callers: int, seconds: float) -> dict[str, float]:
    """Connect ``callers`` silent clients to ``url``, settle, then record frame arrival gaps for
    ``seconds``. Returns gap p50/p99/max (ms), late frames (%), frames and CPU (cores)."""
    clients = [RealtimeClient(url, gateway_events=()) for _ in range(callers)]
    try:
        for client in clients:
            status = await client.connect()
            if status != 201:
                raise RuntimeError(f"offer refused: HTTP {status}")
        await asyncio.sleep(SETTLE_S)
        starts = [len(client.heard.arrivals) for client in clients]
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        gaps = np.concatenate(
            [np.diff(np.asarray(c.heard.arrivals[start:])) * 1000 for c, start in zip(clients, starts, strict=True)]
        )
    finally:
        for client in clients:
            await client.hangup()
    if gaps.size == 0:
        raise RuntimeError("no audio frames arrived")
    return {
        "p50": float(np.percentile(gaps, 50)),
        "p99": float(np.percentile(gaps, 99)),
        "max": float(gaps.max()),
        "late": float(100 * np.mean(gaps > 40)),
        "frames": float(gaps.size + len(clients)),
        "cpu": cpu / wall,
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    async with echo_server() as url:
        echo = await measure(url, args.callers, args.seconds)
    config = GatewayConfig.from_env(port=free_port(), pool_size=args.callers, talking_capacity=args.callers)
    async with running_gateway(config) as (url, _app):
        gateway = await measure(url, args.callers, args.seconds)
    print(
        f"{args.callers} silent callers, {args.seconds:.0f} s each side on loopback; {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.2f}\n"
    )
    print("| server | frames | gap p50 ms | gap p99 ms | gap max ms | gaps > 40 ms | CPU (cores) |")
    print("|---|---|---|---|---|---|---|")
    for name, row in (("aiortc echo", echo), ("voice-gateway", gateway)):
        print(
            f"| {name} | {row['frames']:.0f} | {row['p50']:.1f} | {row['p99']:.1f} | {row['max']:.1f} | "
            f"{row['late']:.2f} % | {row['cpu']:.2f} |"
        )
    print(f"\ngateway / echo: gap p99 {gateway['p99'] / echo['p99']:.2f}x, CPU {gateway['cpu'] / echo['cpu']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
